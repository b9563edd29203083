"""The op statements of the FlashAttention-forward program as CUDA (docs/attention.md, "The kernel").

:class:`AttentionOps` is the :class:`~synth.emit.sm90.writer.OpWriter` of the attention program: the
:class:`~synth.emit.sm90.writer.Writer` writes every barrier and wgmma-group statement, and hands each op statement
here, which writes its code:

* ``load_Q`` / ``load_K`` / ``load_V`` (the producer's TMA ops): one ``cp.async.bulk.tensor.2d`` per 64-column chunk
  of the head dimension (a 128-byte-swizzled box of ``rows x 64`` elements), into the slot of the statement's write
  access, completing on its ``BarrierRef`` (whose bytes must be the whole tile's: the boxes' sum);
* ``qk``: ``wgmma.fence``, ``d / 16`` SS wgmmas ``m64n{BN}k16``, the first with scale-d 0 (S starts from 0; Q: this
  consumer's 64 rows; K: the slot of the statement's read access; both K-major through
  :data:`~synth.emit.sm90.mainloop.DESCRIPTOR`'s ``synth_desc_k128``);
* ``pv``: ``wgmma.fence``, ``BN / 16`` RS wgmmas ``m64n{d}k16`` (A: the P fragments of k16 step ``j``, registers
  ``P[4 j .. 4 j + 3]``; B: V's slot, MN-major, one ``synth_desc_mn128`` per block);
* the softmax ops of a consumer thread (two rows: ``r0 = 16 warp + lane / 4`` and ``r0 + 8``, the accumulator layout
  of ``m64nNk16``): ``rowmax`` (the mask, then the row max over the quad, the new ``m``, ``corr``), ``scale``,
  ``exp2``, ``rowsum``, ``pack_P``, ``rescale_O``.

Every statement's guard (``if 1 <= i``, ``i < n``) is written around its code; a TMA op's ``when`` (``i < 1`` of
``load_Q``) too. Pure text; ValueError for an op statement the attention kernel has no code for.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...program import OpStmt
from ..cuda import c_expr
from .attention_ptx import rs_wgmma_name
from .writer import Writer

LOG2E = 1.4426950408889634
"""``log2(e)``: the kernel's ``scale_log2 = softmax_scale * LOG2E`` folds it into the scale, so ``exp2`` is exp."""


@dataclass(frozen=True)
class AttentionShape:
    """The facts of one attention kernel: head dim ``d``, the CTA's ``bm`` Q rows (``consumers`` warp groups of 64
    rows), ``bn`` KV rows per block, ``dtype`` (``f16`` / ``bf16``), the causal mask, the rings' slots."""

    d: int
    bm: int
    bn: int
    consumers: int
    dtype: str
    causal: bool
    depth: tuple[tuple[str, int], ...]
    """``(ring buffer, slots)``: ``K_s``, ``V_s``."""

    @property
    def chunks(self) -> int:
        """64-column chunks of the head dimension: the TMA boxes of one Q / K / V tile."""
        return self.d // 64

    @property
    def q_bytes(self) -> int:
        return self.bm * self.d * 2

    @property
    def kv_bytes(self) -> int:
        """One K or V slot: ``bn`` rows of ``d`` 16-bit elements."""
        return self.bn * self.d * 2

    def slots(self, ring: str) -> int:
        return dict(self.depth)[ring]

    @property
    def bf16(self) -> bool:
        return self.dtype == "bf16"


def ss_wgmma(shape: AttentionShape) -> str:
    """The SS wgmma of ``qk``: ``m64n{bn}k16`` of the dtype (the GEMM's device function, :mod:`.mainloop`)."""
    return f"synth_wgmma{'_bf16' if shape.bf16 else ''}_m64n{shape.bn}k16"


def rs_wgmma(shape: AttentionShape) -> str:
    """The RS wgmma of ``pv``: ``m64n{d}k16``, A (P) from registers, B (V) MN-major from shared memory
    (:func:`synth.emit.sm90.attention_ptx.rs_wgmma_name`)."""
    return rs_wgmma_name(shape.d, shape.dtype)


def zero_wgmma_lines(shape: AttentionShape, ss_ptx: str) -> tuple[list[str], list[str]]:
    """``(emulator lines, nvcc lines)`` of ``{ss_wgmma(shape)}_zero``: the SS wgmma with scale-d 0 (``D = A B``, the
    accumulator's old value ignored). For nvcc, ``ss_ptx`` (the GEMM's definition of :func:`ss_wgmma`,
    :func:`synth.emit.sm90.mainloop.wgmma_ptx`) with its scale-d predicate set false; on the emulator, ``d`` zeroed by
    the issuing thread, then the accumulating wgmma (which the emulator retires as ``d + A B`` at the
    ``wait_group``)."""
    name = ss_wgmma(shape)
    if "setp.ne.b32 p, 1, 0;" not in ss_ptx or name not in ss_ptx:
        raise ValueError(f"{name}: its PTX has no scale-d predicate to set")
    ptx = ss_ptx.replace(name, f"{name}_zero").replace("setp.ne.b32 p, 1, 0;", "setp.ne.b32 p, 0, 0;")
    emu = [f"inline void {name}_zero(float* d, uint64_t da, uint64_t db) {{  // scale-d 0",
           f"  for (int j = 0; j < {shape.bn // 2}; ++j) d[j] = 0.0f;",
           f"  {name}(d, da, db);",
           "}"]
    return emu, ["// scale-d 0: D = A B", *ptx.rstrip().split("\n")]


@dataclass(frozen=True)
class AttentionOps:
    """The op writer of the attention program (module docstring). The kernel's frame declares what the code here
    names: ``sQ``, ``sK``, ``sV`` (shared addresses), the tensor maps ``tmQ``, ``tmK``, ``tmV``, the rows ``q_row0``
    (this CTA's first Q row in the flattened ``[B H Sq, d]`` tensor) and ``kv_row0`` (the head's first K / V row), and
    in the consumers ``S``, ``P``, ``O``, ``m``, ``l``, ``corr``, ``cw`` (the consumer's index), ``lane``, ``row0`` (the
    thread's first row in the head), ``scale_log2``, ``seqlen_q``, ``seqlen_k``."""

    shape: AttentionShape

    def group(self, w: Writer, stmts) -> list:
        """The statements as they are (one op statement per unit)."""
        return list(stmts)

    def op(self, w: Writer, depth: int, s) -> None:
        """Op statement ``s`` at ``depth`` (module docstring). ValueError for another op or statement."""
        if not isinstance(s, OpStmt):
            raise ValueError(f"unsupported statement {s!r}")
        if s.barrier is not None:
            body = self.copy(w, s)
        else:
            gen = getattr(self, f"op_{s.op}", None)
            if gen is None:
                raise ValueError(f"op {s.op}: the attention kernel has no code for it")
            body = [f"// {s.op}({c_expr(s.iteration)})", *gen(w, s)]
        w.guarded(depth, s.guard, body)

    # ---- the producer's copies

    def copy(self, w: Writer, s: OpStmt) -> list[str]:
        """A TMA op: the tile of its block into the slot of its write access, one box per 64-column chunk."""
        sh = self.shape
        (acc,) = s.writes
        if acc.buffer == "Q_s":
            dst, tmap, row, tile = "sQ", "tmQ", "q_row0", sh.q_bytes
            rows = sh.bm
        elif acc.buffer in ("K_s", "V_s"):
            dst = "sK" if acc.buffer == "K_s" else "sV"
            tmap = "tmK" if acc.buffer == "K_s" else "tmV"
            row, tile, rows = f"kv_row0 + ({c_expr(s.iteration)}) * {sh.bn}", sh.kv_bytes, sh.bn
        else:
            raise ValueError(f"{s.op}: a TMA into {acc.buffer}: the attention kernel loads Q_s, K_s and V_s")
        if s.barrier.bytes != tile:
            raise ValueError(f"{s.op}: the program's complete_tx bytes {s.barrier.bytes} differ from the tile's "
                             f"{rows} x {sh.d} x 2 = {tile} bytes (its {sh.chunks} box(es))")
        slot = "0" if acc.buffer == "Q_s" else f"({c_expr(acc.slot)})"
        bar = w.bar(s.barrier.barrier, s.barrier.state)
        body = [f"synth_tma_load_2d({dst} + {slot} * {tile}u + {c * rows * 128}u, &{tmap}, {64 * c}, {row}, {bar});"
                f"  // {s.op}({c_expr(s.iteration)}), columns {64 * c}..{64 * c + 63}: {rows * 128} bytes"
                for c in range(sh.chunks)]
        cond = w.pred(s.op, s.iteration)
        if cond is not None:
            body = [f"if ({cond}) {{"] + ["  " + b for b in body] + ["}"]
        return body

    # ---- the wgmma ops

    def slot_of(self, s: OpStmt, ring: str) -> str:
        """The C slot of the statement's read of ``ring``."""
        for a in s.reads:
            if a.buffer == ring:
                return f"({c_expr(a.slot)})"
        raise ValueError(f"{s.op}: reads no slot of {ring}")

    def op_qk(self, w: Writer, s: OpStmt) -> list[str]:
        """``S = Q K^T`` of this consumer's 64 rows: the fence (S was touched), ``d / 16`` SS wgmmas, the first with
        scale-d 0 (:func:`zero_wgmma_lines`: S is not zeroed by other instructions, which, with ``pv``'s group in
        flight, made ptxas serialize every wgmma of the kernel, its C7515)."""
        sh = self.shape
        slot = self.slot_of(s, "K_s")
        lines = ["synth_wgmma_fence();",
                 "{",
                 "  const uint64_t dq = synth_desc_k128(sQ + cw * 64u * 128u);  // this consumer's 64 Q rows",
                 f"  const uint64_t dk = synth_desc_k128(sK + {slot} * {sh.kv_bytes}u);"]
        for kk in range(sh.d // 16):
            c, k = divmod(kk, 4)
            fn = ss_wgmma(sh) + ("_zero" if kk == 0 else "")
            lines.append(f"  {fn}(S, dq + {c * sh.bm * 8 + 2 * k}, dk + {c * sh.bn * 8 + 2 * k});"
                         f"  // k {16 * kk}..{16 * kk + 15}" + ("; S = Q K^T (scale-d 0): S starts from 0" if kk == 0 else ""))
        return lines + ["}"]

    def op_pv(self, w: Writer, s: OpStmt) -> list[str]:
        """``O += P V``: the fence (P and O were written), ``bn / 16`` RS wgmmas, k16 step ``j`` taking
        ``P[4 j ..]`` and V's rows ``16 j ..`` (2048 bytes on per step: the descriptor's start field, in 16-byte
        units, plus ``128 j``; the 64-column chunks ``bn * 128`` bytes apart)."""
        sh = self.shape
        slot = self.slot_of(s, "V_s")
        lines = ["synth_wgmma_fence();", "{",
                 f"  const uint64_t dv = synth_desc_mn128(sV + {slot} * {sh.kv_bytes}u, {sh.bn * 128}u);"]
        for j in range(sh.bn // 16):
            lines.append(f"  {rs_wgmma(sh)}(O, P + {4 * j}, dv + {128 * j});"
                         f"  // keys {16 * j}..{16 * j + 15}: +{2048 * j} bytes")
        return lines + ["}"]

    # ---- the softmax of a thread's two rows (values i with (i >> 1) & 1 == 0: row r0, else r0 + 8)

    def op_rowmax(self, w: Writer, s: OpStmt) -> list[str]:
        """The mask of block ``s.iteration`` (key columns ``>= seqlen_k`` and, causal, ``c > r + seqlen_k -
        seqlen_q`` get ``-inf``; only in a block that reaches past either: a uniform branch around the mask, which the
        other blocks skip), then the new row max over the quad and
        ``corr = exp2((m_old - m_new) scale_log2)`` (1 for a row still at ``-inf``)."""
        sh = self.shape
        j = c_expr(s.iteration)
        causal = (f" || kv0 + {sh.bn - 1} > q_tile0 + seqlen_k - seqlen_q" if sh.causal else "")
        colmask = "c >= seqlen_k" + (" || c > r + seqlen_k - seqlen_q" if sh.causal else "")
        return [
            "{",
            f"  const int kv0 = ({j}) * {sh.bn};",
            f"  if (kv0 + {sh.bn} > seqlen_k{causal}) {{  // a block the mask reaches",
            "#pragma unroll",
            f"    for (int j = 0; j < {sh.bn // 2}; ++j) {{",
            "      const int c = kv0 + 8 * (j >> 2) + 2 * (lane % 4) + (j & 1)" +
            (", r = row0 + 8 * ((j >> 1) & 1);" if sh.causal else ";"),
            f"      if ({colmask}) S[j] = -INFINITY;",
            "    }",
            "  }",
            "  float mx0 = m[0], mx1 = m[1];",
            "#pragma unroll",
            f"  for (int j = 0; j < {sh.bn // 2}; j += 4) {{",
            "    mx0 = fmaxf(mx0, fmaxf(S[j], S[j + 1]));",
            "    mx1 = fmaxf(mx1, fmaxf(S[j + 2], S[j + 3]));",
            "  }",
            "  mx0 = fmaxf(mx0, synth_shfl_xor(mx0, 1)); mx0 = fmaxf(mx0, synth_shfl_xor(mx0, 2));",
            "  mx1 = fmaxf(mx1, synth_shfl_xor(mx1, 1)); mx1 = fmaxf(mx1, synth_shfl_xor(mx1, 2));",
            "  corr[0] = mx0 == -INFINITY ? 1.0f : synth_ex2((m[0] - mx0) * scale_log2);",
            "  corr[1] = mx1 == -INFINITY ? 1.0f : synth_ex2((m[1] - mx1) * scale_log2);",
            "  m[0] = mx0; m[1] = mx1;",
            "}",
        ]

    def op_scale(self, w: Writer, s: OpStmt) -> list[str]:
        """``S = S scale_log2 - m scale_log2`` (a row at ``-inf`` subtracts 0: its ``exp2`` is 0)."""
        return [
            "{",
            "  const float ms0 = m[0] == -INFINITY ? 0.0f : m[0] * scale_log2;",
            "  const float ms1 = m[1] == -INFINITY ? 0.0f : m[1] * scale_log2;",
            "#pragma unroll",
            f"  for (int j = 0; j < {self.shape.bn // 2}; j += 4) {{",
            "    S[j] = fmaf(S[j], scale_log2, -ms0); S[j + 1] = fmaf(S[j + 1], scale_log2, -ms0);",
            "    S[j + 2] = fmaf(S[j + 2], scale_log2, -ms1); S[j + 3] = fmaf(S[j + 3], scale_log2, -ms1);",
            "  }",
            "}",
        ]

    def op_exp2(self, w: Writer, s: OpStmt) -> list[str]:
        """``S = exp2(S)`` (``ex2.approx``: ``-inf`` -> 0)."""
        return ["#pragma unroll", f"for (int j = 0; j < {self.shape.bn // 2}; ++j) S[j] = synth_ex2(S[j]);"]

    def op_rowsum(self, w: Writer, s: OpStmt) -> list[str]:
        """``l = l corr + sum(S)`` over the thread's own values (the quad's partial sums meet after the loop)."""
        return [
            "{",
            "  float s0 = 0.0f, s1 = 0.0f;",
            "#pragma unroll",
            f"  for (int j = 0; j < {self.shape.bn // 2}; j += 4) {{ s0 += S[j] + S[j + 1]; s1 += S[j + 2] + S[j + 3]; }}",
            "  l[0] = fmaf(l[0], corr[0], s0); l[1] = fmaf(l[1], corr[1], s1);",
            "}",
        ]

    def op_pack_P(self, w: Writer, s: OpStmt) -> list[str]:
        """``P[q] = (S[2 q], S[2 q + 1])`` packed: the f32 accumulator fragment of S, pairwise, is the A fragment of
        P (k16 step ``j``: ``P[4 j .. 4 j + 3]``, S's columns ``16 j .. 16 j + 15``)."""
        fn = "synth_pack_bf16x2" if self.shape.bf16 else "synth_pack_f16x2"
        return ["#pragma unroll", f"for (int q = 0; q < {self.shape.bn // 4}; ++q) P[q] = {fn}(S[2 * q], S[2 * q + 1]);"]

    def op_rescale_O(self, w: Writer, s: OpStmt) -> list[str]:
        """``O *= corr`` of each value's row."""
        return ["#pragma unroll",
                f"for (int j = 0; j < {self.shape.d // 2}; j += 4) {{",
                "  O[j] *= corr[0]; O[j + 1] *= corr[0]; O[j + 2] *= corr[1]; O[j + 3] *= corr[1];",
                "}"]


__all__ = ["AttentionOps", "AttentionShape", "ss_wgmma", "rs_wgmma", "zero_wgmma_lines", "LOG2E"]

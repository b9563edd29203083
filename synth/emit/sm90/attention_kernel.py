"""Write the sm_90a FlashAttention-forward ``kernel.cu`` from the proven attention program (docs/attention.md,
"The kernel").

Input: the :class:`~synth.lower.hopper_attention.AttentionProgram` of ``lower_attention(body, schedule)`` (or a
mutant of it), the loop body (``attention_body(d, BM, BN, dtype)``) and its ``solve_ws`` schedule, and whether the
causal mask applies. Output: CUDA C++ text that compiles with nvcc for ``sm_90a`` (inline PTX) and with g++ against
``runtime/synth_emu_sm90.h`` (``-DSYNTH_EMULATE``).

``synth_attention_sm90(tmQ, tmK, tmV, Out, seqlen_q, seqlen_k, softmax_scale)``: q ``[B, H, Sq, d]``, k and v
``[B, H, Sk, d]`` row-major f16 or bf16, each described by a 2-D tensor map over the flattened ``[B H S, d]`` tensor
(box ``64 x BM`` for Q, ``64 x BN`` for K and V, 128-byte swizzle, zero fill); ``Out`` ``[B, H, Sq, d]`` f32. Grid
``(ceil(Sq / BM), B H)``, block ``128 (1 + C)`` threads, dynamic shared memory :func:`smem_bytes`. One CTA per
(Q tile, batch-head): warp group 0's elected thread runs the producer role, warp group ``1 + w`` the role
``consumer{w}`` (its 64 rows of the Q tile). Every barrier and wgmma-group statement is the program's, written by
:class:`~synth.emit.sm90.writer.Writer` in the program's order (its slot, parity, byte count, wait count); each op
statement is :class:`~synth.emit.sm90.attention_ops.AttentionOps`' code; a guard of the program is the same ``if``;
the trip count ``n`` is the KV blocks of the CTA's Q tile (``ceil(Sk / BN)``, under the causal mask bottom-right
aligned ``min(that, ceil(((m_block + 1) BM + Sk - Sq) / BN))`` clamped at 0). After the loop (whose last step's
``wait_group 0`` is the drain the proof's ``wgmma_drain`` class covers): the quad's row sums, ``O / l`` (0 for a row
that saw no key), the rows ``< Sq`` stored.
"""

from __future__ import annotations

from typing import Optional

from ...completion import ArriveStmt
from ...expr import Bin, Ite, Num, Var, as_affine, evaluate, free_vars, parse, substitute
from ...hopper.kernel_design import ALIGN_PAD, SMEM_LIMIT, KernelDesign
from ...lower.hopper_attention import TRIP, AttentionProgram
from ...model.ws_body import WsBody
from ...model.ws_schedule import WsSchedule
from ...program import OpStmt, Part, WaitStmt
from ..cuda import c_expr
from .attention_ops import LOG2E, AttentionOps, AttentionShape, zero_wgmma_lines
from .attention_ptx import ATTENTION_PTX, rs_wgmma_ptx
from .cluster import SingleCta
from .mainloop import DESCRIPTOR, wait_dispatch, wgmma_ptx
from .ptx import BASE_PTX
from .writer import Writer

KERNEL = "synth_attention_sm90"
OPS = {"load_K", "load_V", "qk", "rowmax", "scale", "exp2", "rowsum", "pack_P", "rescale_O", "pv"}
"""The ops of ``attention_body``: the kernel writes code for these."""
HEAD_DIMS = (64, 128, 256)
PRODUCER_MIN_REGS = 32
"""The producer's least ``setmaxnreg``: at 24 (the schedule's, FA3's with two consumers) ptxas spills 20 bytes of
the producer's loop at head dim 128 (its tensor-map addresses, slots and rows); at 32 none, and two consumers keep
240 (``32 + 2 x 240 = 512`` registers per thread slot of 128: the whole file), three keep 160."""
ONE_CTA = KernelDesign.of()
"""The design the :class:`~synth.emit.sm90.writer.Writer` is given: it reads a design's cluster facts only (one CTA,
not persistent), none of its tile."""


class AttentionWriter(Writer):
    """The :class:`~synth.emit.sm90.writer.Writer` of the attention program, with two additions: a ``wait_group``
    whose count is ``cond ? a : b`` (``pv``'s ``(i < n) ? 1 : 0``) is written as two immediates under ``if (cond)``,
    so that every ``wgmma.wait_group`` has an immediate count without a run-time switch; an unguarded
    ``arrive.expect_tx`` in a block of its own (a step of the producer has one per ring, each declaring its
    ``tx_bytes``)."""

    def stmt(self, depth: int, role: str, s, waits) -> None:
        """As :meth:`Writer.stmt`, but a wait with a conditional count as described above."""
        if isinstance(s, WaitStmt):
            n = waits[s.wait].in_flight
            if isinstance(n, Ite) and isinstance(n.then, Num) and isinstance(n.other, Num) and \
                    min(n.then.value, n.other.value) >= 0:
                self.guard_now = s.guard
                self.guarded(depth, s.guard, [f"if ({c_expr(n.cond)}) synth_wgmma_wait_n<{n.then.value}>();",
                                              f"else synth_wgmma_wait_n<{n.other.value}>();"])
                return
        if isinstance(s, ArriveStmt) and s.tx and s.guard is None:
            # its own scope: the producer's step has several unguarded arrive.expect_tx, each declaring tx_bytes
            self.w(depth, "{")
            super().stmt(depth + 1, role, s, waits)
            self.w(depth, "}")
            return
        super().stmt(depth, role, s, waits)

    def part(self, depth: int, role: str, part: Part, waits) -> None:
        """Part ``part`` of role ``role``: the loop over the steps split at its guards' thresholds
        (:func:`split_points`), each piece the same statements under the same guards, so that in each piece every
        guard is constant to the compiler (with the guards' ``if``s in one loop, ptxas, which does not correlate a
        wgmma's issue and its wait under two ``if``s, injected waits and serialized every wgmma: its C7517 and
        C7515). The loop as :meth:`Writer.part` writes it where the part is not of that form."""
        pts = split_points(part, self.ops)
        if pts is None:
            super().part(depth, role, part, waits)
            return
        need, points = pts
        v = part.var
        self.w(depth, f"// ---- {role} {part.name}")
        self.w(depth, f"if ({TRIP} >= {need}) {{  // the steps split at the guards' thresholds "
                      f"{', '.join(points[1:-1])}: each guard constant in each piece")
        for a, b in zip(points, points[1:]):
            self.w(depth + 1, f"for (int {v} = {a}; {v} < {b}; ++{v}) {{")
            for s in self.grouped(part.stmts):
                self.stmt(depth + 2, role, s, waits)
            self.w(depth + 1, "}")
        self.w(depth, "}")


def _atoms(g, out: list) -> None:
    if isinstance(g, Bin) and g.op == "&&":
        _atoms(g.lhs, out)
        _atoms(g.rhs, out)
    elif g is not None:
        out.append(g)


def split_points(part: Part, ops: dict) -> Optional[tuple[int, list[str]]]:
    """Where the step loop ``part`` splits into pieces in each of which every guard is constant: ``(M, points)``, the
    pieces ``[points[k], points[k + 1])`` (C expressions in the trip count ``n``) covering the steps whenever
    ``n >= M``. For a part of extent ``n + L min(n, 1)`` whose guards (and its ops' ``when``) are conjunctions of
    ``c <= i``, ``i < c`` and ``i < n + c`` (``c`` numbers): the points are 0, the constant thresholds, the
    ``n``-relative ones, ``n + L``, ordered so for ``n >= M``; ``M`` is 1 (below it the extent is 0, nothing to
    cover). None for another part, or where ``M`` would be larger (the loop is then written unsplit)."""
    ext = part.extent
    if free_vars(ext) - {TRIP}:
        return None
    e = [evaluate(ext, {TRIP: k}) for k in range(4)]
    L = e[1] - 1
    if L < 0 or e != [0, 1 + L, 2 + L, 3 + L]:
        return None
    consts, offs = set(), set()
    atoms: list = []
    for s in part.stmts:
        _atoms(getattr(s, "guard", None), atoms)
        if isinstance(s, OpStmt) and ops.get(s.op) is not None and ops[s.op].when:
            _atoms(substitute(parse(ops[s.op].when), {part.var: s.iteration}), atoms)
    for a in atoms:
        lhs, rhs = (a.lhs, a.rhs) if isinstance(a, Bin) else (None, None)
        if isinstance(a, Bin) and a.op == "<=" and isinstance(lhs, Num) and rhs == Var(part.var):
            consts.add(lhs.value)
        elif isinstance(a, Bin) and a.op == "<" and lhs == Var(part.var) and isinstance(rhs, Num):
            consts.add(rhs.value)
        elif isinstance(a, Bin) and a.op == "<" and lhs == Var(part.var) and as_affine(rhs) is not None and \
                as_affine(rhs)[0] == {TRIP: 1}:
            offs.add(as_affine(rhs)[1])
        else:
            return None
    consts = sorted(c for c in consts if c > 0)
    offs = sorted(c for c in offs if 0 <= c < L) if offs else []
    if not consts and not offs:
        return None
    need = max(1, (consts[-1] if consts else 0) - (offs[0] if offs else L))
    if need > 1:
        return None  # 0 < n < need would need the loop unsplit beside it
    points = ["0", *map(str, consts), *(f"{TRIP} + {c}" if c else TRIP for c in offs), f"{TRIP} + {L}" if L else TRIP]
    out = [points[0]]
    for x in points[1:]:
        if x != out[-1]:
            out.append(x)
    return need, out


def body_dtype(body: WsBody) -> str:
    """The dtype of ``attention_body``'s body: the last part of its name (``attention-fwd-d128-128x128-f16``)."""
    dt = body.name.rsplit("-", 1)[-1]
    if dt not in ("f16", "bf16"):
        raise ValueError(f"body {body.name!r}: its name does not end in the dtype (f16 or bf16) as attention_body's "
                         "do; pass dtype=")
    return dt


def attention_shape(ap: AttentionProgram, body: WsBody, schedule: WsSchedule, *, causal: bool,
                    dtype: str = "") -> AttentionShape:
    """The kernel's facts read off the body, the schedule and the program; ValueError for a body or schedule outside
    the form this kernel is written for (the message says what)."""
    names = {o.name for o in body.ops}
    if names != OPS:
        raise ValueError(f"body {body.name}: ops {sorted(names)}, the attention kernel writes {sorted(OPS)}")
    dtype = dtype or body_dtype(body)
    if dtype not in ("f16", "bf16"):
        raise ValueError(f"dtype {dtype!r}: expected f16 or bf16")
    bm = body.rows
    bn = body.buffer("S").size * 128 // bm
    d = body.buffer("O").size * 128 // bm
    if body.buffer("Q_s").size != bm * d * 2 or body.buffer("K_s").size != bn * d * 2:
        raise ValueError(f"body {body.name}: Q_s / K_s sizes are not {bm} x {d} and {bn} x {d} 16-bit elements")
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim {d}: the kernel takes {HEAD_DIMS} (64-column TMA boxes, an m64n{{d}}k16 wgmma)")
    if bn % 64 or not 64 <= bn <= 256:
        raise ValueError(f"BN {bn}: the kernel takes a multiple of 64 in 64..256 (a TMA box of BN rows, m64n{{BN}}k16)")
    if not schedule.producer:
        raise ValueError("the schedule has no producer warp group: the kernel's TMA copies are the producer's")
    C = schedule.consumers
    if bm != 64 * C or bm > 256:
        raise ValueError(f"{C} consumer warp group(s) for {bm} rows: the kernel gives each consumer 64 rows "
                         "(one m64 wgmma) and a TMA box at most 256 rows")
    roles = [r.name for r in ap.program.roles]
    if roles != ["producer"] + [f"consumer{w}" for w in range(C)]:
        raise ValueError(f"program roles {roles}: expected producer, consumer0 .. consumer{C - 1}")
    for b in ap.program.buffers:
        if b.space == "register" and b.multiplicity != 1:
            raise ValueError(f"register buffer {b.name} has {b.multiplicity} copies: the kernel holds one of each")
    for r in ap.program.roles:
        if [p.name for p in r.program.parts] != ["body"]:
            raise ValueError(f"role {r.name}: parts {[p.name for p in r.program.parts]}, expected one body")
    prod, cons = schedule.registers
    for x in (prod, cons):
        if x % 8 or not 24 <= x <= 256:
            raise ValueError(f"setmaxnreg {x}: a multiple of 8 in 24..256")
    return AttentionShape(d, bm, bn, C, dtype, causal, tuple(ap.rings))


def kernel_registers(schedule: WsSchedule) -> tuple[int, int]:
    """``setmaxnreg`` of the producer and of each consumer: the schedule's, with the producer given at least
    :data:`PRODUCER_MIN_REGS` and the consumers then the most that fits the register file (65,536 per SM, one CTA:
    ``128 (producer + C consumer) <= 65536``, multiples of 8), at most the schedule's figure."""
    prod, cons = schedule.registers
    prod = max(prod, PRODUCER_MIN_REGS)
    cons = min(cons, (65536 // 128 - prod) // schedule.consumers // 8 * 8)
    return prod, cons


def smem_bytes(shape: AttentionShape, ap: AttentionProgram) -> int:
    """Dynamic shared memory: the 1024-byte alignment pad, Q, the K and V rings, the barriers."""
    bars = sum(8 * b.slots for b in ap.program.barriers)
    return (ALIGN_PAD + shape.q_bytes + sum(slots for _, slots in shape.depth) * shape.kv_bytes + bars)


def grid(shape: AttentionShape, batch_heads: int, seqlen_q: int) -> tuple[int, int, int]:
    """The launch grid: ``(ceil(Sq / BM), B H, 1)``."""
    return (-(-seqlen_q // shape.bm), batch_heads, 1)


def emit_attention_kernel(ap: AttentionProgram, body: WsBody, schedule: WsSchedule, *, causal: bool,
                          dtype: str = "") -> str:
    """The ``kernel.cu`` text (module docstring) of the attention program ``ap`` lowered from ``body`` and
    ``schedule`` (``dtype``: default the body's, from its name). ValueError for a body, schedule or program outside
    the form this kernel is written for."""
    sh = attention_shape(ap, body, schedule, causal=causal, dtype=dtype)
    p = ap.program
    prod_regs, cons_regs = kernel_registers(schedule)
    threads = 128 * (1 + sh.consumers)
    smem = smem_bytes(sh, ap)
    if smem > SMEM_LIMIT:
        raise ValueError(f"shared memory {smem} bytes (Q, the K and V rings, barriers): over {SMEM_LIMIT}")
    ops = AttentionOps(sh)
    w = AttentionWriter(ONE_CTA, p, ops)
    ctas = SingleCta(ONE_CTA)
    ss_cfg = KernelDesign.of(bn=sh.bn, dtype=sh.dtype)  # the GEMM's SS wgmma of that width and dtype (qk's)
    rings = {b: slots for b, slots in sh.depth}
    ss_ptx = wgmma_ptx(ss_cfg)
    zero_emu, zero_ptx = zero_wgmma_lines(sh, ss_ptx)
    head = [
        f"// synth: sm_90a FlashAttention forward, head dim {sh.d}, {sh.bm}x{sh.bn} tile, {sh.consumers} consumer "
        f"warp group(s) ({schedule.design}, II {schedule.ii}), K ring {rings.get('K_s')} / V ring {rings.get('V_s')} "
        f"slots, {sh.dtype}, {'causal' if causal else 'no mask'}",
        *(f"// {x}" for x in p.notes),
        "// Synchronization emitted statement by statement from the attention program (docs/attention.md).",
        f"#define SYNTH_ATTN_D {sh.d}", f"#define SYNTH_ATTN_BM {sh.bm}", f"#define SYNTH_ATTN_BN {sh.bn}",
        f"#define SYNTH_ATTN_THREADS {threads}", f"#define SYNTH_ATTN_SMEM_BYTES {smem}",
        f"#define SYNTH_ATTN_CAUSAL {int(causal)}", f"#define SYNTH_ATTN_BF16 {int(sh.bf16)}",
        "#ifdef SYNTH_EMULATE",
        '#include "synth_emu_sm90.h"',
        *zero_emu,
        "#else",
        BASE_PTX.strip(), ss_ptx.rstrip(), *zero_ptx, wait_dispatch(body.max_groups + 1).rstrip(),
        *ATTENTION_PTX, rs_wgmma_ptx(sh.d, sh.dtype).rstrip(),
        "#endif",
        *DESCRIPTOR,
        "",
        f'extern "C" __global__ void __launch_bounds__({threads}, 1)',
        f"{KERNEL}(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,",
        "               const __grid_constant__ CUtensorMap tmV, float* __restrict__ Out, int seqlen_q, int seqlen_k,",
        "               float softmax_scale) {",
        "  extern __shared__ unsigned char synth_smem_raw[];",
        "  unsigned char* smem = synth_smem_raw + ((1024 - (synth_smem_u32(synth_smem_raw) & 1023)) & 1023);",
        "  // shared-memory addresses: Q, the K ring, the V ring (each tile 1024-byte aligned), the barriers",
        "  const uint32_t sQ = synth_pinned_uniform(synth_smem_u32(smem));",
        f"  const uint32_t sK = sQ + {sh.q_bytes}u;",
        f"  const uint32_t sV = sK + {rings['K_s'] * sh.kv_bytes}u;",
    ]
    off = sh.q_bytes + (rings["K_s"] + rings["V_s"]) * sh.kv_bytes
    for b in p.barriers:
        head.append(f"  const uint32_t bar_{b.name} = sQ + {off}u;  // {b.kind}, {b.slots} slot(s), count {b.count}")
        off += 8 * b.slots
    n_lines = [f"  const int n_all = (seqlen_k + {sh.bn - 1}) / {sh.bn};  // KV blocks"]
    if causal:
        n_lines += [
            "  // causal, bottom-right aligned: row r sees key c iff c <= r + seqlen_k - seqlen_q",
            f"  const int reach = q_tile0 + {sh.bm} + seqlen_k - seqlen_q;",
            f"  const int n_causal = reach <= 0 ? 0 : (reach + {sh.bn - 1}) / {sh.bn};",
            "  const int n = n_causal < n_all ? n_causal : n_all;",
        ]
    else:
        n_lines += ["  const int n = n_all;"]
    w.lines = head + [
        "  const int m_block = blockIdx.x, bh = blockIdx.y;",
        f"  const int q_tile0 = m_block * {sh.bm};  // the tile's first row in its head",
        "  const int q_row0 = bh * seqlen_q + q_tile0, kv_row0 = bh * seqlen_k;  // rows of the flattened tensors",
        *n_lines,
        "  const int wg = synth_uniform(threadIdx.x / 128), wt = threadIdx.x % 128;",
    ]
    ctas.setup(w)
    w.w(1, "if (wg == 0) {")
    w.w(2, f"synth_setmaxnreg_dec<{prod_regs}>();")
    w.w(2, "if (wt == 0) {  // one elected thread issues the producer's statements")
    _role(w, 3, "producer")
    w.w(2, "}")
    w.w(1, "} else {")
    w.w(2, f"synth_setmaxnreg_inc<{cons_regs}>();")
    w.w(2, "const int cw = wg - 1, warp = wt / 32, lane = wt % 32;  // consumer cw: the tile's rows 64 cw ..")
    w.w(2, "const int row0 = q_tile0 + 64 * cw + 16 * warp + lane / 4;  // this thread's rows: row0, row0 + 8")
    w.w(2, f"const float scale_log2 = softmax_scale * {LOG2E!r}f;")
    w.w(2, f"float S[{sh.bn // 2}], O[{sh.d // 2}];  // m64n{sh.bn} / m64n{sh.d} accumulator fragments")
    w.w(2, f"uint32_t P[{sh.bn // 4}];  // A fragments of P: k16 step j in P[4 j .. 4 j + 3]")
    w.w(2, "float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2] = {1.0f, 1.0f};")
    w.w(2, "#pragma unroll")
    w.w(2, f"for (int j = 0; j < {sh.d // 2}; ++j) O[j] = 0.0f;")
    for c in range(sh.consumers):
        w.w(2, ("if" if c == 0 else "} else if") + f" (cw == {c}) {{")
        _role(w, 3, f"consumer{c}")
    w.w(2, "}")
    w.lines += _epilogue(sh)
    w.w(1, "}")
    ctas.teardown(w)
    w.lines.append("}")
    return "\n".join(w.lines) + "\n"


def _role(w: AttentionWriter, depth: int, role: str) -> None:
    prog = w.p.role(role).program
    for part in prog.parts:
        w.part(depth, role, part, prog.waits)


def _epilogue(sh: AttentionShape) -> list[str]:
    """The quad's row sums, ``O / l`` (0 where ``l`` is 0: a row that saw no key), the rows inside ``Sq`` stored."""
    return [
        "    // ---- epilogue: the row sums of the quad, O / l, the rows inside seqlen_q stored (f32)",
        "    l[0] += synth_shfl_xor(l[0], 1); l[0] += synth_shfl_xor(l[0], 2);",
        "    l[1] += synth_shfl_xor(l[1], 1); l[1] += synth_shfl_xor(l[1], 2);",
        "    const float inv0 = l[0] > 0.0f ? 1.0f / l[0] : 0.0f, inv1 = l[1] > 0.0f ? 1.0f / l[1] : 0.0f;",
        "#pragma unroll",
        f"    for (int j = 0; j < {sh.d // 2}; j += 2) {{",
        "      const int r = row0 + 8 * ((j >> 1) & 1), c = 8 * (j >> 2) + 2 * (lane % 4);",
        "      const float inv = (j >> 1) & 1 ? inv1 : inv0;",
        "      if (r < seqlen_q) {",
        f"        float* o = Out + ((size_t)bh * seqlen_q + r) * {sh.d} + c;",
        "        o[0] = O[j] * inv; o[1] = O[j + 1] * inv;",
        "      }",
        "    }",
    ]


__all__ = ["emit_attention_kernel", "attention_shape", "smem_bytes", "grid", "body_dtype", "kernel_registers",
           "AttentionWriter", "split_points", "KERNEL", "OPS", "HEAD_DIMS", "PRODUCER_MIN_REGS"]

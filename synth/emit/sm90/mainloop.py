"""The mainloop component of the sm_90a kernel: the TMA/wgmma ring's ops (docs/hopper_kernel.md).

What the ring program's op statements become (written through :class:`synth.emit.sm90.writer.Writer`, which writes
its barrier statements): a TMA op -> one ``cp.async.bulk.tensor.2d`` of the A or B box of its k-tile into the slot
of its write access, completing on its ``BarrierRef`` (whose bytes must be the box's); in a cluster, a run of one
producer's copies of its part of the shared operand into several CTAs -> one ``.multicast::cluster`` copy with
their mask (docs/hopper_cluster.md, "The kernel"); the wgmma op -> ``BK / 16`` ``wgmma.mma_async`` reading the
slots of its read accesses through the slot-0 descriptors (one per 64-row block of a warp group's tile). Also
the mainloop's device functions: the wgmma of the tile's width and dtype, the run-time ``wait_group`` dispatch,
the K-major 128-byte-swizzle descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...program import OpStmt
from ..cuda import c_expr
from ...hopper.kernel_design import KernelDesign
from .writer import HALF_OP, Writer, cta_of

DESCRIPTOR = [
    "// K-major operand, 128-byte swizzle: start >> 4, LBO 1 (unused), SBO 1024 bytes (8 rows), layout 1 (128B)",
    "SYNTH_DEV uint64_t synth_desc_k128(uint32_t a) {",
    "  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32)"
    " | ((uint64_t)1 << 62);",
    "}",
]
"""The wgmma matrix descriptor of a shared-memory slot (compiled for the GPU and the emulator alike)."""


@dataclass(frozen=True)
class Multicast:
    """Adjacent copy statements of one producer that put the same part of the shared operand's k-tile into
    several CTAs (same half, iteration, guard, slot and barrier state): one multicast copy whose mask is
    their destination CTAs."""

    stmts: tuple
    dests: tuple

    @property
    def guard(self):
        """The copies' guard (one: it is part of what they share)."""
        return self.stmts[0].guard


def wgmma_name(cfg: KernelDesign) -> str:
    """The device function of one ``m64n{bn}k16`` wgmma of ``cfg.dtype`` operands."""
    return f"synth_wgmma_m64n{cfg.bn}k16" if cfg.dtype == "f16" else f"synth_wgmma_bf16_m64n{cfg.bn}k16"


def wgmma_ptx(cfg: KernelDesign) -> str:
    """The inline-PTX definition of :func:`wgmma_name` (f32 accumulators ``d[0 .. bn / 2 - 1]``, descriptors)."""
    n, t = cfg.bn, cfg.dtype
    regs = n // 2
    outs = ", ".join(f"%{j}" for j in range(regs))
    binds = ", ".join(f'"+f"(d[{j}])' for j in range(regs))
    return (f"SYNTH_DEV void {wgmma_name(cfg)}(float* d, uint64_t da, uint64_t db) {{\n"
            f"  asm volatile(\"{{\\n .reg .pred p;\\n setp.ne.b32 p, 1, 0;\\n"
            f" wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{outs}}}, %{regs}, "
            f"%{regs + 1}, p, 1, 1, 0, 0;\\n}}\"\n"
            f"               : {binds}\n               : \"l\"(da), \"l\"(db) : \"memory\"); }}\n")


def wait_dispatch(max_n: int) -> str:
    """``synth_wgmma_wait(n)``: ``wgmma.wait_group`` with a run-time count ``n`` in ``0 .. max_n`` (an immediate in
    PTX, so a switch)."""
    cases = " ".join(f"case {j}: synth_wgmma_wait_n<{j}>(); break;" for j in range(1, max_n + 1))
    return ("SYNTH_DEV void synth_wgmma_wait(int n) {\n"
            f"  switch (n) {{ {cases} default: synth_wgmma_wait_n<0>(); break; }}\n}}\n")


@dataclass(frozen=True)
class Mainloop:
    """The ring's ops of ``cfg``: the :class:`~synth.emit.sm90.writer.OpWriter` of its program, one for every
    design (a cluster's multicast and shared-operand box read off ``cfg``)."""

    cfg: KernelDesign
    k_tile: Callable[[str], str]
    """The C k-tile of the tile being computed at a copy's ring iteration (a C expression): the tile scheduler's
    (:meth:`synth.emit.sm90.scheduler.OneTile.k_tile`: the iteration itself, ``kt0 +`` it in a split, ``- kb`` in a
    persistent ring)."""

    def ptx(self) -> list[str]:
        """The mainloop's device functions outside the emulator: the wgmma, the ``wait_group`` dispatch."""
        return [wgmma_ptx(self.cfg).rstrip(), wait_dispatch(self.cfg.stages).rstrip()]

    def storage(self) -> tuple[list[str], int]:
        """``(lines, bytes)`` of the ring's slots at the base of the aligned shared memory: ``sA`` (``stages`` A
        boxes) then ``sB`` (``stages`` B boxes)."""
        cfg = self.cfg
        return (["  const uint32_t sA = synth_pinned_uniform(synth_smem_u32(smem));",
                 f"  const uint32_t sB = sA + {cfg.stages * cfg.a_slot_bytes};"],
                cfg.stages * (cfg.a_slot_bytes + cfg.b_slot_bytes))

    def group(self, w: Writer, stmts) -> list:
        """A cluster role's statements with each run of adjacent copies of one part of the shared operand
        (:data:`~synth.emit.sm90.writer.HALF_OP`) into several CTAs made one :class:`Multicast`; other statements
        as they are (all of them without a cluster)."""
        if not w.cluster:
            return list(stmts)

        def key(s):
            m = HALF_OP.match(s.op)
            (acc,) = s.writes if len(s.writes) == 1 else (None,)
            if acc is None:
                raise ValueError(f"{s.op}: a copy writes one buffer, got {len(s.writes)}")
            return (m.group(1), m.group(3), s.iteration, s.guard, acc.version, acc.slot, w.base(acc.buffer),
                    w.base(s.barrier.barrier), s.barrier.state, s.barrier.bytes)

        out: list = []
        for s in stmts:
            if not (isinstance(s, OpStmt) and s.barrier is not None and HALF_OP.match(s.op)):
                out.append(s)
                continue
            d = cta_of(s.writes[0].buffer) if len(s.writes) == 1 else None
            prev = out[-1] if out else None
            if isinstance(prev, Multicast) and key(prev.stmts[0]) == key(s) and d not in prev.dests:
                out[-1] = Multicast(prev.stmts + (s,), prev.dests + (d,))
            else:
                key(s)
                out.append(Multicast((s,), (d,)))
        return out

    def op(self, w: Writer, depth: int, s) -> None:
        """Op statement (or :class:`Multicast`) ``s`` at ``depth``: a copy, a multicast copy or the wgmma.
        ValueError for anything else."""
        if isinstance(s, Multicast):
            self.multicast(w, depth, s)
        elif isinstance(s, OpStmt) and s.barrier is not None:
            self.copy(w, depth, s)
        elif isinstance(s, OpStmt):
            self.mma(w, depth, s)
        else:
            raise ValueError(f"unsupported statement {s!r}")

    def copy(self, w: Writer, depth: int, s: OpStmt) -> None:
        """One TMA copy of the whole A or B box of the statement's k-tile (:attr:`k_tile`) into its slot, completing
        on its barrier; gated by the load's predicate. ValueError when the program's bytes are not the box's, or
        for a copy a cluster kernel cannot be."""
        cfg = self.cfg
        (acc,) = s.writes
        buf = w.base(acc.buffer)
        if w.cluster and not (w.local(acc.buffer) and w.local(s.barrier.barrier)):
            raise ValueError(f"{s.op}: a copy into {acc.buffer} completing on {s.barrier.barrier} from CTA {w.cta}: "
                             "only a part of the shared operand's box (op load_X_h<c>_to<d>) is multicast")
        if w.cluster and buf == cfg.shared_operand:
            raise ValueError(f"{s.op}: the cluster {cfg.cluster} shares {buf}: each producer loads its part of the box "
                             "(op load_X_h<c>_to<d>), not the whole")
        if buf == "A":
            dst, rows, origin, tmap = "sA", cfg.bm, "m0", "tmA"
            slot_bytes = cfg.a_slot_bytes
        elif buf == "B":
            dst, rows, origin, tmap = "sB", cfg.bn, "n0", "tmB"
            slot_bytes = cfg.b_slot_bytes
        else:
            raise ValueError(f"TMA into unknown buffer {acc.buffer!r}")
        if s.barrier.bytes != slot_bytes:
            raise ValueError(f"{s.op}: the program's complete_tx bytes {s.barrier.bytes} differ from the box "
                             f"{cfg.bk} x {rows} f16 = {slot_bytes} bytes")
        k_tile = self.k_tile(c_expr(s.iteration))
        body = [f"synth_tma_load_2d({dst} + ({w.slot_m(acc.version, acc.slot)}) * {slot_bytes}, &{tmap}, "
                f"({k_tile}) * {cfg.bk}, {origin}, {w.bar(s.barrier.barrier, s.barrier.state)});"
                f"  // {w.label(s.op)}: {slot_bytes} bytes"]
        cond = w.pred(s.op, s.iteration)
        if cond is not None:
            body = [f"if ({cond}) {{"] + ["  " + b for b in body] + ["}"]
        w.guarded(depth, s.guard, body)

    def multicast(self, w: Writer, depth: int, g: Multicast) -> None:
        """One ``cp.async.bulk.tensor ... .multicast::cluster`` for the copies of ``g``: the part ``h`` of the
        shared operand's box its op names (rows ``h * box rows`` of the tile: coordinates and slot offset),
        landing at the slot of its write access and completing on the barrier at its ``BarrierRef``'s offset in
        every destination CTA (the mask)."""
        cfg = self.cfg
        s0 = g.stmts[0]
        m = HALF_OP.match(s0.op)
        letter, h = m.group(2), int(m.group(3))
        if letter != cfg.shared_operand:
            raise ValueError(f"{s0.op}: a part of {letter}'s box, but the cluster {cfg.cluster} shares "
                             f"{cfg.shared_operand}")
        if not 0 <= h < cfg.cluster_size:
            raise ValueError(f"{s0.op}: part {h} of the box: the cluster {cfg.cluster} splits it into "
                             f"{cfg.cluster_size}")
        for s, d in zip(g.stmts, g.dests):
            (acc,) = s.writes
            if w.base(acc.buffer) != letter or d is None or d >= cfg.cluster_size or \
                    int(HALF_OP.match(s.op).group(4)) != d or cta_of(s.barrier.barrier) != d:
                raise ValueError(f"{s.op}: writes {acc.buffer} and completes on {s.barrier.barrier}: a part of "
                                 f"{letter}'s box lands in the CTA its op names and on that CTA's barrier")
        rows = cfg.a_box_rows if letter == "A" else cfg.b_box_rows
        part_bytes = rows * cfg.bk * 2
        if s0.barrier.bytes != part_bytes:
            raise ValueError(f"{s0.op}: the program's complete_tx bytes {s0.barrier.bytes} differ from the box "
                             f"{cfg.bk} x {rows} = {part_bytes} bytes")
        conds = {w.pred(s.op, s.iteration) for s in g.stmts}
        if len(conds) != 1:
            raise ValueError(f"{', '.join(s.op for s in g.stmts)}: one multicast copy has one predicate")
        (acc,) = s0.writes
        dst, origin, tmap, slot_bytes = (("sA", "m0", "tmA", cfg.a_slot_bytes) if letter == "A" else
                                         ("sB", "n0", "tmB", cfg.b_slot_bytes))
        pairs = list(zip(g.stmts, g.dests))
        if w.relative:  # the part and the mask from the running CTA's rank; one instruction: own CTA first
            pairs.sort(key=lambda sd: sd[1] != w.cta)
            g = Multicast(tuple(x for x, _ in pairs), tuple(d for _, d in pairs))
            mask = " | ".join(f"(1u << {w.rank(d)})" for d in g.dests)
            if set(g.dests) == set(range(cfg.cluster_size)):
                mask = f"{(1 << cfg.cluster_size) - 1:#x}"
            at, first = f"{w.rank(h)} * {part_bytes}u", f"(int){w.rank(h)} * {rows}"
            into = " and ".join("this CTA" if d == w.cta else "the peer" for d in g.dests)
        else:
            mask, at, first = f"{sum(1 << d for d in g.dests):#x}", f"{h * part_bytes}", f"{h * rows}"
            into = "CTA(s) " + ", ".join(map(str, g.dests))
        k_tile = self.k_tile(c_expr(s0.iteration))
        body = [f"synth_tma_load_2d_multicast({dst} + ({w.slot_m(acc.version, acc.slot)}) * "
                f"{slot_bytes} + {at}, &{tmap}, ({k_tile}) * {cfg.bk}, {origin} + {first}, "
                f"{w.bar(s0.barrier.barrier, s0.barrier.state)}, (uint16_t)({mask}));"
                f"  // {', '.join(w.label(s.op) for s in g.stmts)}: part {w.rank(h) if w.relative else h} "
                f"of {letter} ({rows} rows, {part_bytes} bytes) into {into}"]
        (cond,) = conds
        if cond is not None:
            body = [f"if ({cond}) {{"] + ["  " + b for b in body] + ["}"]
        w.guarded(depth, s0.guard, body)

    def mma(self, w: Writer, depth: int, s: OpStmt) -> None:
        """The wgmma op: ``BK / 16`` wgmma per 64-row block of the warp group's tile, reading the slots of the
        statement's read accesses (``synth_wgmma_fence`` first); skipped for a k-tile whose loads are predicated
        off. ValueError unless it reads one slot of A and one of B in its own CTA."""
        cfg = self.cfg
        slots = {w.base(a.buffer): w.slot_c(a.version, a.slot) for a in s.reads}
        at = {w.base(a.buffer): w.slot_m(a.version, a.slot) for a in s.reads}
        if any(not w.local(a.buffer) for a in s.reads) or \
                len({(w.base(a.buffer), w.slot_c(a.version, a.slot)) for a in s.reads}) != len(slots):
            raise ValueError(f"{s.op}: a wgmma reads one slot of each operand in its own CTA's shared memory, got "
                             f"{', '.join(a.buffer for a in s.reads)}")
        if set(slots) != {"A", "B"}:
            raise ValueError(f"{s.op}: expected reads of A and B, got {sorted(slots)}")
        conds = [c for c in (w.pred(a.producer, s.iteration) for a in s.reads if a.producer) if c]
        body = ["synth_wgmma_fence();",
                "{",
                f"  const uint64_t da = desc_a0 + (uint64_t)(({at['A']}) * {cfg.a_slot_bytes >> 4});",
                f"  const uint64_t db = desc_b0 + (uint64_t)(({at['B']}) * {cfg.b_slot_bytes >> 4});",
                "#pragma unroll",
                f"  for (int kk = 0; kk < {cfg.bk // 16}; ++kk)",
                f"    {wgmma_name(cfg)}(acc, da + 2 * kk, db + 2 * kk);  // +32 bytes per k16",
                "}"]
        if cfg.row_blocks > 1:  # ping-pong with a 128-row tile per warp group: one wgmma per 64-row block
            body[-3:-1] = [f"  for (int kk = 0; kk < {cfg.bk // 16}; ++kk) {{",
                           *(f"    {wgmma_name(cfg)}(acc + {r * cfg.bn // 2}, da + {r * 512} + 2 * kk, db + 2 * kk);"
                             f"  // rows {64 * r}.. (+{64 * r} x 128 bytes)" for r in range(cfg.row_blocks)),
                           "  }"]
        if conds:
            # adapter (docs/hopper_kernel.md): a k-tile whose loads are predicated off is not multiplied
            body = [f"if ({' && '.join(conds)}) {{"] + ["  " + b for b in body] + ["}"]
        w.guarded(depth, s.guard, body)


__all__ = ["Mainloop", "Multicast", "DESCRIPTOR", "wgmma_name", "wgmma_ptx", "wait_dispatch"]

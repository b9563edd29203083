"""Lowering a Hopper main loop to a thread-block cluster of CTAs that share one operand
(docs/hopper_cluster.md).

Input: a :class:`~synth.hopper.loop.HopperLoop` and the cluster size (2: a 2x1 cluster, the two
CTAs of one tile column share the B tile). Output: a :class:`~synth.hopper.ir.HopperProgram` in
the program form of docs/hopper.md whose roles, barriers and buffers name their CTA by a trailing
index (:func:`synth.verify.hopper_cluster.cta_of`): per CTA ``c`` the roles ``producer{c}`` (one
elected thread) and ``consumer{c}`` (``consumers`` warp groups of 128 threads, the wgmma
collective, the releases elected), the barriers ``full{c}`` and ``empty{c}`` and one buffer per
load (``A{c}``, ``B{c}``). Each CTA loads its own tile of every unshared operand; of the shared
one it loads ``1 / cluster`` (a half box for 2) and multicasts it into every CTA's slot: one op
statement per destination CTA ``d`` (op ``{load}_h{c}_to{d}``), each completing its half-box
bytes on ``full{d}``. So ``full{c}`` expects the whole tile (its own boxes and every CTA's part
of the shared box, the peers' multicast included) from its one ``arrive.expect_tx``, and
``empty{c}`` counts the consumer warp groups of every CTA (a consumer releases its slot on its
own ``empty`` and, remotely, on each peer's: the peer's producer multicasts into it). Setup:
every barrier's init, ``fence.mbarrier_init.release.cluster`` and a cluster barrier; teardown: a
cluster barrier, then the invalidations. One program for every ``T >= 1`` (the guards of
:func:`synth.lower.barriers.lower_hopper`). Pure.
"""

from __future__ import annotations

from ..completion import (ArriveStmt, Barrier, BarrierRef, ClusterSyncStmt, FenceStmt, InitStmt, InvalStmt,
                          PipelineState, TryWaitStmt, Tx)
from ..expr import Bin, Num, Var, parse, simplify, to_str
from ..hopper.ir import HopperProgram, Role
from ..hopper.loop import HopperLoop
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from .barriers import WARPGROUP_THREADS

CLUSTER_SIZES = (2,)
"""Cluster sizes lowered (a 2x1 cluster); 1 is :func:`synth.lower.barriers.lower_hopper`."""


def _names(loop: HopperLoop, shared: str):
    """``(own loads, the shared load, op name of CTA c's part of the shared box for CTA d)``."""
    own = [ld for ld in loop.loads if ld.buffer != shared]
    sh = next(ld for ld in loop.loads if ld.buffer == shared)
    return own, sh, (lambda c, d: f"{sh.op}_h{c}_to{d}")


def lower_hopper_cluster(loop: HopperLoop, cluster: int = 2, shared: "str | None" = None) -> HopperProgram:
    """The warp-specialized program of ``loop`` on a cluster of ``cluster`` CTAs sharing the load of
    buffer ``shared`` (default: the last load's, B). ValueError on a loop outside the bounds of
    :meth:`HopperLoop.check`, a cluster size outside :data:`CLUSTER_SIZES`, an unknown ``shared``
    buffer, a predicated load, a loop of one load (nothing is left to load per CTA) or a shared box
    whose bytes do not split into ``cluster`` parts of whole 16-byte units."""
    loop.check()
    if cluster not in CLUSTER_SIZES:
        raise ValueError(f"cluster size {cluster}: only {', '.join(map(str, CLUSTER_SIZES))} is lowered "
                         "(1 is lower_hopper)")
    shared = loop.loads[-1].buffer if shared is None else shared
    if shared not in {ld.buffer for ld in loop.loads}:
        raise ValueError(f"shared buffer {shared!r} is not loaded by the loop")
    if any(ld.when is not None for ld in loop.loads):
        # a predicated-off multicast leaves the peer's remote release ordered only by a chain longer than
        # the provers' one hop (docs/hopper_cluster.md, "Not done"): refused rather than reported refuted
        raise ValueError("predicated loads in a cluster are not lowered: load whole boxes (the K residue is "
                         "zero-filled)")
    if len(loop.loads) < 2:
        raise ValueError("a cluster shares one operand: the loop needs another load of each CTA's own")
    own, sh, half_op = _names(loop, shared)
    if sh.bytes % (16 * cluster):
        raise ValueError(f"load {sh.op}: {sh.bytes} bytes do not split into {cluster} parts of whole 16-byte "
                         "units")
    part_bytes = sh.bytes // cluster
    S, K, C, n = loop.stages, loop.k_pipe_mmas, loop.consumers, cluster
    T = loop.trip_count
    tsym = T if isinstance(T, str) else None
    tv = Var(tsym) if tsym else Num(int(T))
    i = Var("i")
    slot = simplify(Bin("%", i, Num(S)))
    ctas = range(n)

    ops = tuple(ProgOp(f"{ld.op}{c}", "tma", 0, True, None, None) for c in ctas for ld in own) + \
        tuple(ProgOp(half_op(c, d), "tma", 0, True, None, None) for c in ctas for d in ctas) + \
        tuple(ProgOp(f"{loop.mma}{c}", "wgmma", 0, True, 0, None) for c in ctas)
    buffers = tuple(ProgBuffer(f"{ld.buffer}{c}", "shared", S, ld.bytes) for c in ctas for ld in loop.loads)
    barriers = []
    for c in ctas:
        barriers.append(Barrier(f"full{c}", S, 1, "full", tuple(f"{ld.buffer}{c}" for ld in loop.loads)))
    for c in ctas:
        # the buffers producer c writes: its own tiles and every CTA's slot of the shared operand
        guards = tuple(f"{ld.buffer}{c}" for ld in own) + tuple(f"{shared}{d}" for d in ctas)
        barriers.append(Barrier(f"empty{c}", S, n * C, "empty", guards))

    def tx_of(c: int) -> tuple:
        """The whole tile CTA ``c``'s full barrier expects: its own boxes and every CTA's part of the shared one."""
        return tuple(Tx(ld.bytes) for ld in own) + tuple(Tx(part_bytes) for _ in ctas)

    roles = []
    for c in ctas:
        body = [TryWaitStmt(f"empty{c}", PipelineState(i, S, 1)),
                ArriveStmt(f"full{c}", PipelineState(i, S, 0), 1, tx_of(c))]
        for ld in own:
            body.append(OpStmt(f"{ld.op}{c}", i, None, None, (), (Access(f"{ld.buffer}{c}", i, slot),),
                               BarrierRef(f"full{c}", PipelineState(i, S, 0), ld.bytes)))
        for d in ctas:  # the multicast: one statement per destination CTA
            body.append(OpStmt(half_op(c, d), i, None, None, (), (Access(f"{shared}{d}", i, slot),),
                               BarrierRef(f"full{d}", PipelineState(i, S, 0), part_bytes)))
        prog = Program(f"{loop.name}.producer{c}", loop.loop_var, T, loop.min_trip_count, 0, ops, buffers, (),
                       (Part("body", "i", tv, tuple(body)),), ())
        roles.append(Role(f"producer{c}", 1, prog, threads=1))
    for c in ctas:
        mma = f"{loop.mma}{c}"
        reads = tuple(Access(f"{ld.buffer}{c}", i, slot, f"{ld.op}{c}") for ld in own) + \
            tuple(Access(f"{shared}{c}", i, slot, half_op(s, c)) for s in ctas)
        rg = None if K == 0 else parse(f"{K} <= i")
        order = [c] + [d for d in ctas if d != c]  # its own CTA's release first, then the peers'
        release = [ArriveStmt(f"empty{d}", PipelineState(simplify(Bin("+", i, Num(-K))) if K else i, S, 0), 1, (), rg)
                   for d in order]
        body = (TryWaitStmt(f"full{c}", PipelineState(i, S, 0)), OpStmt(mma, i, None, 0, reads, ()),
                CommitStmt(0, 0), WaitStmt(0)) + tuple(release)
        waits = [Wait("body", 0, Num(K), f"release of {mma}'s slot",
                      reason=f"K_PIPE_MMAS = {K}: the group of iteration i - {K} must be complete before its slot "
                             "is released in every CTA of the cluster")]
        parts = [Part("body", "i", tv, body)]
        if K:
            eg = None if loop.min_trip_count >= K else parse(f"{K} <= i + {tsym if tsym else T}")
            ver = simplify(Bin("+", i, Bin("-", tv, Num(K))))
            waits.append(Wait("epilogue", 0, parse(to_str(simplify(parse(f"{K - 1} - i")))),
                              f"release of {mma}'s slot",
                              reason="drain: the group of iteration T - K + i is complete before its slot is released"))
            parts.append(Part("epilogue", "i", Num(K), (WaitStmt(1, eg),) + tuple(
                ArriveStmt(f"empty{d}", PipelineState(ver, S, 0), 1, (), eg) for d in order)))
        prog = Program(f"{loop.name}.consumer{c}", loop.loop_var, T, loop.min_trip_count, 0, ops, buffers, ("wgmma",),
                       tuple(parts), tuple(waits))
        roles.append(Role(f"consumer{c}", C, prog, threads=WARPGROUP_THREADS, collective=(mma,)))
    setup = tuple(InitStmt(f"{k}{c}") for c in ctas for k in ("full", "empty")) + \
        (FenceStmt("mbarrier_init"), ClusterSyncStmt())
    teardown = (ClusterSyncStmt(),) + tuple(InvalStmt(f"{k}{c}") for c in ctas for k in ("full", "empty"))
    notes = (f"cluster of {n} CTAs sharing {shared} (multicast, {part_bytes} B per CTA): per CTA 1 producer warp "
             f"group, {C} consumer warp group(s), {S} stages, K_PIPE_MMAS = {K}",)
    return HopperProgram(loop.name, loop.loop_var, T, loop.min_trip_count, ops, buffers, tuple(barriers), setup,
                         tuple(roles), teardown, notes)


__all__ = ["lower_hopper_cluster", "CLUSTER_SIZES"]

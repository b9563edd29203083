"""Lowering a Hopper main loop to the warp-specialized mbarrier protocol (docs/hopper.md).

Input: a :class:`~synth.hopper.loop.HopperLoop`. Output: a
:class:`~synth.hopper.ir.HopperProgram` with the barrier operations explicit: ``full`` and
``empty`` barrier arrays of ``stages`` slots (init counts 1 and the consumer warp groups),
the init fence; a producer role (``try_wait`` on ``empty`` with a producer state starting at
phase 1, ``arrive.expect_tx`` on ``full`` with the bytes of the loads whose predicates hold,
the TMA copies completing on ``full``) and a consumer role (``try_wait`` on ``full``, the
wgmma, ``commit_group``, ``wait_group K``, the release of the slot of iteration ``i - K``;
an epilogue of ``K`` steps draining the last groups and releasing their slots); the
invalidations. Threads: the producer is one elected thread (``threads`` 1); each consumer warp
group runs on its 128 threads, the release is ``elected`` (one thread arrives for the warp group)
and the wgmma is ``collective``: the warp-group convergence point between every thread's ``full``
wait and that release (the ``converge`` proof). One program for every ``T >= 1``: guards ``K <= i`` and ``K <= i + T`` keep
the releases inside the iterations, and no part depends on ``T >= stages``. Pure.
"""

from __future__ import annotations

from ..completion import (ArriveStmt, Barrier, BarrierRef, FenceStmt, InitStmt, InvalStmt, PipelineState,
                          TryWaitStmt, Tx)
from ..expr import Bin, Expr, Num, Var, parse, simplify, to_str
from ..hopper.ir import HopperProgram, Role
from ..hopper.loop import HopperChoice, HopperLoop, hopper_loop
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt

FULL = "full"
EMPTY = "empty"
WARPGROUP_THREADS = 128
"""Threads of a warp group (4 warps of 32): the threads of a consumer role."""


def _plus(e: Expr, c: int) -> Expr:
    return simplify(Bin("+", e, Num(c))) if c else e


def _guard(text: str, loop: HopperLoop, always_from: int) -> "Expr | None":
    """``text`` (a condition) unless ``min_trip_count >= always_from`` makes it always true."""
    return None if loop.min_trip_count >= always_from else parse(text)


def _loop_decls(loop: HopperLoop):
    """``(trip symbol or None, trip count expression, ops, buffers)`` shared by both lowerings: one
    TMA op per load, the wgmma op, a buffer of ``stages`` slots per load."""
    T = loop.trip_count
    tsym = T if isinstance(T, str) else None
    tv: Expr = Var(tsym) if tsym else Num(int(T))
    ops = tuple(ProgOp(ld.op, "tma", 0, True, None, ld.when) for ld in loop.loads) + \
        (ProgOp(loop.mma, "wgmma", 0, True, 0, None),)
    buffers = tuple(ProgBuffer(ld.buffer, "shared", loop.stages, ld.bytes) for ld in loop.loads)
    return tsym, tv, ops, buffers


def lower_hopper(loop: HopperLoop) -> HopperProgram:
    """The warp-specialized program of ``loop`` (ValueError on a loop outside its bounds)."""
    loop.check()
    S, K = loop.stages, loop.k_pipe_mmas
    T = loop.trip_count
    tsym, tv, ops, buffers = _loop_decls(loop)
    i = Var("i")
    guards = tuple(ld.buffer for ld in loop.loads)
    barriers = (Barrier(FULL, S, 1, "full", guards), Barrier(EMPTY, S, loop.consumers, "empty", guards))
    slot = simplify(Bin("%", i, Num(S)))

    producer_body = [TryWaitStmt(EMPTY, PipelineState(i, S, 1)),
                     ArriveStmt(FULL, PipelineState(i, S, 0), 1,
                                tuple(Tx(ld.bytes, ld.op if ld.when is not None else None) for ld in loop.loads))]
    for ld in loop.loads:
        producer_body.append(OpStmt(ld.op, i, None, None, (), (Access(ld.buffer, i, slot),),
                                    BarrierRef(FULL, PipelineState(i, S, 0), ld.bytes)))
    producer = Program(f"{loop.name}.producer", loop.loop_var, T, loop.min_trip_count, 0, ops, buffers, (),
                       (Part("body", "i", tv, tuple(producer_body)),), ())

    reads = tuple(Access(ld.buffer, i, slot, ld.op) for ld in loop.loads)
    release_guard = None if K == 0 else parse(f"{K} <= i")
    consumer_body = (TryWaitStmt(FULL, PipelineState(i, S, 0)),
                     OpStmt(loop.mma, i, None, 0, reads, ()),
                     CommitStmt(0, 0),
                     WaitStmt(0),
                     ArriveStmt(EMPTY, PipelineState(_plus(i, -K), S, 0), 1, (), release_guard))
    waits = [Wait("body", 0, Num(K), f"release of {loop.mma}'s slot",
                  reason=f"K_PIPE_MMAS = {K}: the group of iteration i - {K} must be complete before its slot "
                         f"is released")]
    parts = [Part("body", "i", tv, consumer_body)]
    if K:
        eg = _guard(f"{K} <= i + {tsym}" if tsym else f"{K} <= i + {T}", loop, K)
        count = to_str(simplify(parse(f"{K - 1} - i")))
        waits.append(Wait("epilogue", 0, parse(count), f"release of {loop.mma}'s slot",
                          reason="drain: the group of iteration T - K + i is complete before its slot is released"))
        ver = simplify(Bin("+", i, Bin("-", tv, Num(K))))
        parts.append(Part("epilogue", "i", Num(K),
                          (WaitStmt(1, eg), ArriveStmt(EMPTY, PipelineState(ver, S, 0), 1, (), eg))))
    consumer = Program(f"{loop.name}.consumer", loop.loop_var, T, loop.min_trip_count, 0, ops, buffers, ("wgmma",),
                       tuple(parts), tuple(waits))
    setup = (InitStmt(FULL), InitStmt(EMPTY), FenceStmt("mbarrier_init"))
    teardown = (InvalStmt(FULL), InvalStmt(EMPTY))
    notes = (f"warp-specialized: 1 producer warp group, {loop.consumers} consumer warp group(s), {S} stages, "
             f"K_PIPE_MMAS = {K}",)
    return HopperProgram(loop.name, loop.loop_var, T, loop.min_trip_count, ops, buffers, barriers, setup,
                         (Role("producer", 1, producer, threads=1),
                          Role("consumer", loop.consumers, consumer, threads=WARPGROUP_THREADS, collective=(loop.mma,))),
                         teardown, notes)


def lower_hopper_single(loop: HopperLoop) -> HopperProgram:
    """The program of ``loop`` without warp specialization: one warp group issues the TMA copies
    ``L = stages - k_pipe_mmas`` iterations ahead of its wgmma (its 128 threads wait; one elected
thread issues the copies and their ``expect_tx``; the wgmma is the convergence point). Global step ``J`` loads iteration
    ``J`` (when ``J < T``) after consuming iteration ``J - L`` (``try_wait`` on ``full``, wgmma,
    ``commit_group``, ``wait_group K``): the slot the load reuses held ``J - S = (J - L) - K``,
    whose wgmma that wait completed, so no ``empty`` barrier is needed. Parts: prologue
    ``min(T, L)`` (loads only), body ``max(T - L, 0)``, epilogue ``L`` (guard ``L <= i + T``; the
    last step drains with ``wait_group 0``). ``consumers`` must be 1."""
    loop.check()
    if loop.consumers != 1:
        raise ValueError("a single warp group pipeline has one consumer warp group")
    S, K = loop.stages, loop.k_pipe_mmas
    L = S - K
    T = loop.trip_count
    tsym, tv, ops, buffers = _loop_decls(loop)
    i = Var("i")
    barriers = (Barrier(FULL, S, 1, "full", tuple(ld.buffer for ld in loop.loads)),)

    def load(it: Expr) -> list:
        sl = simplify(Bin("%", it, Num(S)))
        out = [ArriveStmt(FULL, PipelineState(it, S, 0), 1,
                          tuple(Tx(ld.bytes, ld.op if ld.when is not None else None) for ld in loop.loads))]
        return out + [OpStmt(ld.op, it, None, None, (), (Access(ld.buffer, it, sl),),
                             BarrierRef(FULL, PipelineState(it, S, 0), ld.bytes)) for ld in loop.loads]

    def consume(it: Expr, wait: int, guard) -> list:
        sl = simplify(Bin("%", it, Num(S)))
        reads = tuple(Access(ld.buffer, it, sl, ld.op) for ld in loop.loads)
        return [TryWaitStmt(FULL, PipelineState(it, S, 0), guard), OpStmt(loop.mma, it, guard, 0, reads, ()),
                CommitStmt(0, 0, guard), WaitStmt(wait, guard)]

    ahead = simplify(Bin("+", i, Num(L)))
    behind = simplify(Bin("+", i, Bin("-", tv, Num(L))))
    eg = _guard(f"{L} <= i + {tsym if tsym else T}", loop, L)
    parts = (Part("prologue", "i", parse(f"min({tsym if tsym else T}, {L})"), tuple(load(i))),
             Part("body", "i", parse(f"max({tsym if tsym else T} - {L}, 0)"), tuple(consume(i, 0, None) + load(ahead))),
             Part("epilogue", "i", Num(L), tuple(consume(behind, 1, eg))))
    waits = (Wait("body", 0, Num(K), f"TMA refill of the slot of iteration i - {K}",
                  reason=f"K_PIPE_MMAS = {K}: the wgmma of iteration i - {K} reads the slot the next load reuses"),
             Wait("epilogue", 0, parse(f"(i == {L - 1}) ? 0 : {K}"), "drain",
                  reason="the last step drains every wgmma group"))
    role = Program(f"{loop.name}.mainloop", loop.loop_var, T, loop.min_trip_count, 0, ops, buffers, ("wgmma",),
                   parts, waits)
    notes = (f"single warp group: loads {L} iterations ahead, {S} stages, K_PIPE_MMAS = {K}",)
    return HopperProgram(loop.name, loop.loop_var, T, loop.min_trip_count, ops, buffers, barriers,
                         (InitStmt(FULL), FenceStmt("mbarrier_init")),
                         (Role("mainloop", 1, role, threads=WARPGROUP_THREADS, collective=(loop.mma,)),),
                         (InvalStmt(FULL),), notes)


def lower_choice(cfg, choice: HopperChoice) -> HopperProgram:
    """The lowered :class:`~synth.hopper.ir.HopperProgram` of ``cfg`` (a :class:`~synth.gemm.GemmConfig`) under ``choice``
    (:func:`synth.model.hopper.choose`'s)."""
    loop = hopper_loop(cfg, choice)
    return lower_hopper(loop) if choice.warp_specialized else lower_hopper_single(loop)


__all__ = ["lower_hopper", "lower_hopper_single", "lower_choice", "FULL", "EMPTY", "WARPGROUP_THREADS"]

"""Ping-pong consumers' order protocol (docs/hopper_pingpong.md): two one-slot mbarriers ``order0`` and
``order1`` that hand a persistent CTA's ring from one consumer warp group to the other, as a program of two roles
(:func:`order_program`) whose statements the kernel emits around each tile's main loop, and its known bugs
(:data:`MUTANTS`). The proof that it serializes the two warp groups' main loops is
:func:`synth.verify.hopper_pingpong.verify_pingpong`'s. Pure.
"""

from __future__ import annotations

from ..completion import ArriveStmt, Barrier, FenceStmt, InitStmt, InvalStmt, PipelineState, TryWaitStmt
from ..expr import Num, Var, parse
from ..hopper.ir import HopperProgram, Role
from ..program import CommitStmt, OpStmt, Part, Program, ProgOp, Wait, WaitStmt

ORDER = ("order0", "order1")
"""The order barriers: ``order{w}`` is what warp group ``w`` waits on before a main loop."""
MUTANTS = {
    "order_arrive_missing": "warp group 0 never arrives on order1: warp group 1 waits for ever",
    "order_wrong_parity": "warp group 1 waits on order1 with the parity of turn j + 1 (it passes its first "
                          "turn before warp group 0 ended its main loop, then waits for ever)",
    "order_first_wait": "warp group 0 waits on order0 before its first tile too: nobody arrives on it first",
}
"""Order-protocol bugs (docs/hopper_pingpong.md), each a change of :func:`order_program`."""


def order_program(odd: bool, mutant: str = "") -> HopperProgram:
    """The order protocol of a CTA with ``n = 2 T`` tiles (``odd`` False) or ``n = 2 T - 1`` (``odd``: warp
    group 1's last turn guarded off), ``T >= 1`` turns: roles ``pp0`` and ``pp1`` (one warp group of 128
    threads each, their main loop a collective op ``mainloop0`` / ``mainloop1``). ``mutant``: one of
    :data:`MUTANTS`. KeyError for another name."""
    if mutant and mutant not in MUTANTS:
        raise KeyError(mutant)
    i = Var("i")
    last = parse("i + 1 < T") if odd else None
    # a turn's main loop: its wgmma groups (one op standing for them all), drained by wait_group 0 before
    # the arrive that hands the ring over (the handoff, proven here as the wgmma classes of the roles)
    ops = (ProgOp("mainloop0", "wgmma", 0, True, 0, None),
           ProgOp("mainloop1", "wgmma", 0, True, 0, "i + 1 < T" if odd else None))
    first = None if mutant == "order_first_wait" else parse("1 <= i")
    pp0 = [TryWaitStmt("order0", PipelineState(parse("i - 1") if first is not None else i, 1, 0), first),
           OpStmt("mainloop0", i, None, 0), CommitStmt(0, 0), WaitStmt(0)]
    if mutant != "order_arrive_missing":
        pp0.append(ArriveStmt("order1", PipelineState(i, 1, 0), 1, (), None, elected=True))
    wait1 = PipelineState(parse("i + 1") if mutant == "order_wrong_parity" else i, 1, 0)
    pp1 = (TryWaitStmt("order1", wait1, last), OpStmt("mainloop1", i, None, 0), CommitStmt(0, 0, last),
           WaitStmt(0, last), ArriveStmt("order0", PipelineState(i, 1, 0), 1, (), last, elected=True))

    def role(name: str, stmts, op: str) -> Role:
        prog = Program(f"pingpong_order.{name}", "i", "T", 1, 0, ops, (), ("wgmma",),
                       (Part("body", "i", Var("T"), tuple(stmts)),),
                       (Wait("body", 0, Num(0), "order arrive", reason="the turn's wgmma groups are complete "
                             "before the other warp group takes the ring"),))
        return Role(name, 1, prog, threads=128, collective=(op,))

    barriers = tuple(Barrier(b, 1, 1, "full", ()) for b in ORDER)
    return HopperProgram(f"pingpong_order_{'odd' if odd else 'even'}", "i", "T", 1, ops, (), barriers,
                         (InitStmt("order0"), InitStmt("order1"), FenceStmt("mbarrier_init")),
                         (role("pp0", pp0, "mainloop0"), role("pp1", pp1, "mainloop1")),
                         (InvalStmt("order0"), InvalStmt("order1")),
                         (f"ping-pong order barrier, {'2 T - 1' if odd else '2 T'} tiles: warp group w waits on "
                          "order{w} before each main loop but its first, arrives on order{1 - w} after it",))


__all__ = ["order_program", "ORDER", "MUTANTS"]

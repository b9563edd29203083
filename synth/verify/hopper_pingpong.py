"""Ping-pong consumers: two consumer warp groups take a persistent CTA's tiles in turn, and the order
barrier that serializes their main loops (docs/hopper_pingpong.md).

A ping-pong CTA runs the persistent ring of :mod:`synth.verify.hopper_persistent` (``N = n T`` iterations,
every slot and parity at the running count ``g = t T + k``) with ONE consumer role of one warp group;
its tiles ``t = 0, 1, ...`` are taken by consumer warp group ``t % 2`` (its ``j``-th tile is
``t = 2 j + w``), each computing a whole ``64 x BN`` tile. The *order barrier* — two one-slot
mbarriers ``order0`` and ``order1``, count 1 — hands the ring from one warp group to the other: warp
group ``w`` waits on ``order{w}`` before its main loop (not before its first tile), and after it (its
wgmma groups drained by ``wait_group 0``) its elected thread arrives on ``order{1 - w}``. Its epilogue
(the C store) then overlaps the other warp group's main loop.

What makes the two warp groups one consumer (the proof, :func:`verify_pingpong`):

1. **the ring** (:func:`synth.verify.phases.verify_hopper`, every ``N >= 1``): the protocol with one
   consumer running every ring iteration in order;
2. **the order protocol** (:func:`~synth.lower.hopper_pingpong.order_program`, proven by the same prover for every turn count):
   the main loops alternate ``0, 1, 0, 1, ...`` — ``order`` parities, arrivals, no deadlock, the
   converged release — for an even tile count (both warp groups take ``T`` tiles) and an odd one
   (warp group 1 takes ``T - 1``), so for every ``n >= 1``; hence the consumer statements run in the
   ring's order, one warp group at a time;
3. **the handoff**: each order role's turn is its main loop (the collective op standing for the ring's
   body), ``wait_group 0``, then the arrive (the order program proves the wgmma classes of that
   sequence, and the kernel emits those statements around each tile's main loop), so a warp group
   starts a tile with every wgmma group of the previous tile (its partner's) complete: its own wgmma
   FIFO holds fewer groups than the ring's one consumer would, and each of its waits completes at
   least what the ring's does (the argument of the persistent tile end);
4. **the carry**: each warp group indexes slots and parities by the running count of the CTA's tile
   ``t`` (``kb = t T``), not by its own tile count ``j``: :func:`synth.verify.hopper_persistent.check_carry`,
   whose mutant ``partner_skip`` (a warp group counting only its own tiles) is refuted.

The order program and its mutants are the lowering's (:mod:`synth.lower.hopper_pingpong`, whose roles' statements
the kernel emits); this module is the proof. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hopper.ir import HopperProgram
from ..lower.hopper_persistent import TileCarry
from ..lower.hopper_pingpong import order_program
from .hopper_persistent import check_carry
from .phases import verify_hopper

CARRY_MUTANTS = {
    # each warp group counts its own tiles: the ring position of its j-th tile taken as j T instead of (2 j + w) T
    "partner_skip": TileCarry("(t / 2) * T", "(t / 2) * T", "0"),
}
"""Ping-pong carries of known bugs: a consumer that does not advance its state over its partner's tile."""


@dataclass(frozen=True)
class PingpongResult:
    """``checks``: ``ring``, ``order_even``, ``order_odd``, ``carry`` -> ``(ok, detail)``."""

    checks: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(ok for ok, _ in self.checks.values())

    def render(self) -> str:
        return "\n".join(f"{k}: {'proven' if ok else 'REFUTED'}{': ' + d if d and not ok else ''}"
                         for k, (ok, d) in self.checks.items())


def verify_pingpong(ring: HopperProgram, *, time_limit: float = 20.0, carry=None, deadline=None,
                    order=None, ring_report=None, order_reports=None) -> PingpongResult:
    """The ping-pong kernel's proof (module docstring): ``ring``, ``order_even``, ``order_odd`` (``order``: a
    function ``odd -> program`` standing for :func:`order_program`, for mutants) and ``carry`` (``carry``: the
    consumer's :class:`~synth.lower.hopper_persistent.TileCarry`, default the running count). ``ring_report`` and
    ``order_reports`` (``{"even": report, "odd": report}``): proofs already made, reused rather than repeated."""
    checks = {}
    r = ring_report if ring_report is not None else verify_hopper(ring, time_limit=time_limit, tightness=False,
                                                                  deadline=deadline)
    checks["ring"] = (bool(r.ok), "" if r.ok else r.render())
    for odd in (False, True):
        prog = order(odd) if order is not None else order_program(odd)
        known = (order_reports or {}).get("odd" if odd else "even")
        o = known if known is not None else verify_hopper(prog, time_limit=time_limit, tightness=False,
                                                          deadline=deadline)
        checks["order_odd" if odd else "order_even"] = (bool(o.ok), "" if o.ok else o.render())
    checks["carry"] = check_carry(ring, {"consumer": carry} if carry is not None else {})
    return PingpongResult(checks)


__all__ = ["verify_pingpong", "PingpongResult", "CARRY_MUTANTS"]

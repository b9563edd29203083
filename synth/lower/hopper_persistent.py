"""Persistent tiles: how a persistent CTA's roles carry the ring's pipeline state across its output tiles
(docs/hopper.md, "Persistent tiles"), and the ring program with the kernel's tile end made explicit.

A persistent CTA computes ``n >= 0`` output tiles of ``T >= 1`` k-tiles each; its roles run the ring program of
:func:`synth.lower.barriers.lower_hopper` over ``N = n T`` iterations, iteration ``g = t T + k`` being k-tile ``k``
of the CTA's ``t``-th tile. A :class:`TileCarry` is how a role's kernel code computes the state of tile ``t``
from the tile-local ``k`` (the correct carry is ``t * T``, ``t * T``, ``0``: the running count);
:func:`tile_end_program` adds the consumer's tile-end ``wait_group 0``. The proofs of both are
:mod:`synth.verify.hopper_persistent`'s. Pure.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Mapping

from ..expr import Num, parse
from ..hopper.ir import HopperProgram
from ..program import Wait, WaitStmt

_CTA = re.compile(r"[0-9]+\Z")

CANONICAL = "t * T"
"""The running count at the start of a CTA's tile ``t`` (``T`` k-tiles per tile)."""


@dataclass(frozen=True)
class TileCarry:
    """How a role computes its pipeline state at its ``t``-th tile (expressions in ``t`` and ``T``): the
    count a statement of count ``c`` (an expression of the running count ``g = t T + k``) uses is
    ``slot_base + (c - t T)`` for the slot and ``parity_base + (c - t T)`` for the parity, and ``flip``
    (0 or 1) is added to the parity."""

    slot_base: str = CANONICAL
    parity_base: str = CANONICAL
    flip: str = "0"

    @property
    def canonical(self) -> bool:
        return self == TileCarry()


def role_kind(role: str) -> str:
    """A role's kind: its name without the CTA index that ends a cluster program's role names (``consumer1`` ->
    ``consumer``; ``consumer`` as it is)."""
    return _CTA.sub("", role)


def role_carry(carry: Mapping[str, TileCarry], role: str) -> TileCarry:
    """The carry of role ``role``: the one ``carry`` gives for its name, else for its kind (a carry given for
    ``consumer`` is every CTA's consumer's in a cluster program), else the running count."""
    return carry.get(role, carry.get(role_kind(role), TileCarry()))


def tile_end_program(program: HopperProgram, kt: int, role: str = "consumer") -> HopperProgram:
    """The ring program with the kernel's tile end made explicit for ``kt`` k-tiles per tile: ``role``'s body
    (and in a cluster program, that of every CTA's role of kind ``role``: ``consumer0``, ``consumer1``)
    gains, after its statements, a ``wait_group 0`` guarded ``i % kt == kt - 1`` (the drain before the C
    store). ValueError when no such role exists, one has no body part, or ``kt < 1``."""
    if kt < 1:
        raise ValueError(f"kt {kt}: a tile has at least one k-tile")
    named = {r.name for r in program.roles if r.name == role or (r.name != role_kind(r.name) and role_kind(r.name) == role)}
    roles = []
    for r in program.roles:
        if r.name in named:
            prog = r.program
            if not prog.parts or prog.parts[0].name != "body":
                raise ValueError(f"role {role} has no body part")
            body = prog.parts[0]
            waits = prog.waits + (Wait(body.name, 0, Num(0), "the tile's C store",
                                       reason="tile end: every wgmma group of the tile completes before C is read"),)
            stmts = body.stmts + (WaitStmt(len(prog.waits), parse(f"{body.var} % {kt} == {kt - 1}")),)
            parts = (dataclasses.replace(body, stmts=stmts),) + tuple(prog.parts[1:])
            r = dataclasses.replace(r, program=dataclasses.replace(prog, parts=parts, waits=waits))
        roles.append(r)
    if not named:
        raise ValueError(f"no role {role}")
    return dataclasses.replace(program, roles=tuple(roles))


__all__ = ["CANONICAL", "TileCarry", "role_carry", "role_kind", "tile_end_program"]

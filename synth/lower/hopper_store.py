"""The TMA-store epilogue's store program: one consumer warp group's sub-tiles through the staging ring, for every
``E >= 1`` (docs/hopper_store.md; the protocol is :mod:`synth.hopper.store`'s docstring, its proof
:mod:`synth.verify.hopper_store` with synth's prover). Pure.
"""

from __future__ import annotations

from typing import Optional

from ..expr import Var, parse
from ..hopper.store import MAX_STAGING, QUEUE, TRIP
from ..program import Access, CommitStmt, OpStmt, Part, Program, ProgBuffer, ProgOp, Wait, WaitStmt


def store_program(staging: int, *, name: str = "tma_store", wait: Optional[int] = None) -> Program:
    """The store program of a warp group with ``staging`` slots (1 .. :data:`MAX_STAGING`), for every
    ``E >= 1``; ``wait``: the ``wait_group.read`` count before a slot is written (default
    ``staging - 1``, the largest correct one). ValueError outside the bounds."""
    if not 1 <= staging <= MAX_STAGING:
        raise ValueError(f"staging {staging}: expected 1..{MAX_STAGING} buffers")
    n = staging - 1 if wait is None else wait
    if not 0 <= n <= MAX_STAGING:
        raise ValueError(f"wait_group.read {n}: expected 0..{MAX_STAGING}")
    i = Var("i")
    slot = parse(f"i % {staging}")
    ops = (ProgOp("free", "bar_sync", 0, False, None, None),
           ProgOp("stage", "st_shared", 0, False, None, None),
           ProgOp("fence", "fence_proxy_async", 0, False, None, None),
           ProgOp("publish", "bar_sync", 0, False, None, None),
           ProgOp("store", "tma_store", 0, True, 0, None))
    body = Part("body", "i", parse(TRIP), (
        WaitStmt(0),
        OpStmt("free", i),
        OpStmt("stage", i, writes=(Access("staging", i, slot),)),
        OpStmt("fence", i),
        OpStmt("publish", i),
        OpStmt("store", i, group=0, reads=(Access("staging", i, slot, "stage"),)),
        CommitStmt(0, 0),
    ))
    # after the last sub-tile: the CTA may exit only once every store has read its slot (class teardown)
    epilogue = Part("epilogue", "i", parse("1"), (WaitStmt(1),))
    waits = (Wait("body", 0, parse(str(n)), "free", reason="the slot's previous store has read it"),
             Wait("epilogue", 0, parse("0"), "", reason="every store has read its slot before the CTA exits"))
    return Program(name, "i", TRIP, 1, 0, ops, (ProgBuffer("staging", "shared", staging, 0),), (QUEUE,),
                   (body, epilogue), waits)


__all__ = ["store_program"]

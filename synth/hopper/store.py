"""The TMA-store epilogue: C through a shared staging ring and ``cp.async.bulk.tensor`` stores, and its proof
(docs/hopper_store.md).

A consumer warp group stores its part of every output tile it computes as ``E >= 1`` sub-tiles
(64 rows x ``W`` columns of f32 each), numbered ``e = 0, 1, ...`` across all its tiles (a persistent
CTA never resets the count). Sub-tile ``e`` goes through staging slot ``e % S`` (``S`` staging buffers
per warp group). The elected thread (``wt == 0``) issues the stores, so the bulk async-group FIFO is
its own; the other 127 threads learn what it waited for only through a named barrier over the warp
group. Per sub-tile, in program order (:func:`synth.lower.hopper_store.store_program`):

1. ``wait_group.read S - 1`` (elected): the store that read slot ``e % S`` last (sub-tile ``e - S``)
   has read it;
2. ``bar.sync`` (all): every thread knows the slot is free;
3. ``st.shared`` (all): the sub-tile, after ``alpha`` / ``beta``, into the slot;
4. ``fence.proxy.async.shared::cta`` (all): each thread's generic-proxy writes visible to the async
   proxy that the TMA store reads with;
5. ``bar.sync`` (all): every thread's writes and fence done;
6. ``cp.async.bulk.tensor`` store (elected), reading the slot, then ``cp.async.bulk.commit_group``.

After the last sub-tile, ``wait_group.read 0`` (elected): no store still reads shared memory when the
CTA exits (its shared memory may be given to the next CTA at once).

The program is a :class:`~synth.program.Program` of the sm_80 form (one FIFO queue: the bulk
groups; a TMA store is an async op that *reads* its slot), so RFC 0077's completion model and synth's
prover (:func:`synth.verify.verify_program`) prove its waits for every ``E``: the write of slot
``e % S`` after the store of ``e - S`` read it (``war``). What the single-thread model cannot see is
:func:`synth.verify.hopper_store.check_threads`: classes ``converge`` (an all-thread write after an elected wait is separated
from it by a barrier), ``proxy_fence`` (a store reads a version only after every writing thread
fenced and then met the issuing thread at a barrier) and ``teardown`` (the epilogue part, after the
last sub-tile, runs ``wait_group.read 0`` unguarded with nothing committed after it; the program
format writes that wait with an empty ``before``: no op follows it, the CTA's exit does). The independent checker
(:mod:`synth.trusted.store`) decides the same two classes on its own; certificates of the
``war`` obligations are written as for any sm_80 program.

This module holds the protocol's vocabulary (units, bounds, the thread classes) and its known bugs as edits of a
store program (:data:`STORE_MUTANTS`, :func:`store_mutant`); the program is built by
:mod:`synth.lower.hopper_store` and its thread classes decided by :mod:`synth.verify.hopper_store`.
"""

from __future__ import annotations

from dataclasses import replace

from ..expr import parse
from ..program import OpStmt, Program, WaitStmt

QUEUE = "tma_store"
"""The queue of ``cp.async.bulk`` groups (one FIFO per issuing thread: the elected one)."""
MAX_STAGING = 4
"""Staging buffers per consumer warp group: 1 .. 4."""
DEFAULT_STAGING = 2
"""Staging buffers of the kernels ``synth solve`` writes: one being filled while the other's store reads it."""
UNITS = {
    "bar_sync": "converge",
    "st_shared": "all",
    "fence_proxy_async": "all",
    "tma_store": "elected",
}
"""Unit of each store-program op -> which threads run it: ``all`` (every thread of the warp group),
``elected`` (one thread), ``converge`` (a named barrier over the warp group: every thread arrives and
none passes before all have). A wait or commit runs on the elected thread (the one whose bulk groups
they count)."""
THREAD_CLASSES = ("converge", "proxy_fence", "teardown")
"""What :func:`check_threads` decides beside the prover's ``war`` obligations."""
TRIP = "E"
"""The trip-count symbol: sub-tiles this warp group stores over the CTA's life."""


STORE_MUTANTS = {
    "rewrite_before_read": "the wait before a staging write lets one store too many stay in flight "
                           "(wait_group.read S instead of S - 1): the slot is rewritten before its last store read it",
    "no_wait": "no wait_group.read before the staging write (the slot reused as soon as the store is issued)",
    "proxy_fence_missing": "no fence.proxy.async.shared::cta between the st.shared writes and the TMA store",
    "publish_barrier_missing": "no bar.sync between the writers' fence and the elected thread's store: it may "
                               "issue the store before the other threads wrote their part",
    "free_barrier_missing": "no bar.sync after the elected thread's wait: the other threads write a slot that only "
                            "thread 0 knows is free",
    "no_drain": "no wait_group.read 0 before the CTA exits: the last stores may still read shared memory "
                "(CUTLASS's store tail)",
}
"""The TMA-store epilogue's known bug shapes (docs/hopper_store.md), each a change of :func:`store_program`."""


def store_mutant(program: Program, name: str) -> Program:
    """``program`` (a :func:`store_program`) with the bug ``name`` of :data:`STORE_MUTANTS`; KeyError for
    another name."""
    if name not in STORE_MUTANTS:
        raise KeyError(name)
    body = program.part("body")

    def without(stmts, pred):
        return tuple(st for st in stmts if not pred(st))

    def unit(st) -> str:
        return program.op(st.op).unit if isinstance(st, OpStmt) else st.kind

    if name == "rewrite_before_read":
        w = body.stmts[[isinstance(st, WaitStmt) for st in body.stmts].index(True)].wait
        return program.with_wait(w, in_flight=parse(str(program.buffer("staging").multiplicity)))
    stmts = list(body.stmts)
    if name == "no_wait":
        return program.without_wait("body", next(k for k, st in enumerate(stmts) if isinstance(st, WaitStmt))) \
            .with_befores()
    if name == "proxy_fence_missing":
        stmts = without(stmts, lambda st: unit(st) == "fence_proxy_async")
    elif name == "publish_barrier_missing":
        fence = next(k for k, st in enumerate(stmts) if unit(st) == "fence_proxy_async")
        bar = next(k for k in range(fence + 1, len(stmts)) if unit(stmts[k]) == "bar_sync")
        stmts = tuple(stmts[:bar] + stmts[bar + 1:])
    elif name == "free_barrier_missing":
        bar = next(k for k, st in enumerate(stmts) if unit(st) == "bar_sync")
        stmts = tuple(stmts[:bar] + stmts[bar + 1:])
    else:  # no_drain
        ep = program.part("epilogue")
        return program.without_wait("epilogue", next(k for k, st in enumerate(ep.stmts) if isinstance(st, WaitStmt)))
    return replace(program, parts=(replace(body, stmts=tuple(stmts)), *program.parts[1:])).with_befores()


__all__ = ["THREAD_CLASSES", "DEFAULT_STAGING", "store_mutant", "STORE_MUTANTS", "QUEUE", "UNITS", "MAX_STAGING", "TRIP"]

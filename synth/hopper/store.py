"""The TMA-store epilogue: C through a shared staging ring and ``cp.async.bulk.tensor`` stores, and its proof
(docs/hopper_store.md).

A consumer warp group stores its part of every output tile it computes as ``E >= 1`` sub-tiles
(64 rows x ``W`` columns of f32 each), numbered ``e = 0, 1, ...`` across all its tiles (a persistent
CTA never resets the count). Sub-tile ``e`` goes through staging slot ``e % S`` (``S`` staging buffers
per warp group). The elected thread (``wt == 0``) issues the stores, so the bulk async-group FIFO is
its own; the other 127 threads learn what it waited for only through a named barrier over the warp
group. Per sub-tile, in program order (:func:`store_program`):

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
:func:`check_threads`: classes ``converge`` (an all-thread write after an elected wait is separated
from it by a barrier), ``proxy_fence`` (a store reads a version only after every writing thread
fenced and then met the issuing thread at a barrier) and ``teardown`` (the epilogue part, after the
last sub-tile, runs ``wait_group.read 0`` unguarded with nothing committed after it; the program
format writes that wait with an empty ``before``: no op follows it, the CTA's exit does). The independent checker
(:mod:`synth.trusted.store`) decides the same two classes on its own; certificates of the
``war`` obligations are written as for any sm_80 program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..expr import Num, Var, parse
from ..program import Access, CommitStmt, OpStmt, Part, Program, ProgBuffer, ProgOp, Wait, WaitStmt

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


@dataclass(frozen=True)
class ThreadCheck:
    """One verdict of :func:`check_threads`: ``cls`` (``converge`` / ``proxy_fence``), ``ok`` and the
    counterexample (which statement, which thread lags, what it may see)."""

    cls: str
    ok: bool
    detail: str = ""


def _scope(program: Program, s) -> str:
    if isinstance(s, (WaitStmt, CommitStmt)):
        return "elected"
    return UNITS.get(program.op(s.op).unit, "?")


def check_threads(program: Program) -> tuple[ThreadCheck, ...]:
    """The two thread classes of a store program's body (module docstring), decided on its statement order
    (the body is one straight line per sub-tile; a guarded barrier or fence may not run, so it does not
    count). ``converge``: between the elected thread's last wait and each all-thread write of the staging
    buffer, a barrier runs. ``proxy_fence``: between each all-thread write of a version and the elected
    store reading it, a fence by the writers then a barrier run, in that order. An op of an unknown unit
    fails both (the checker cannot say which threads run it)."""
    body = program.part("body")
    stmts = body.stmts
    scopes = [_scope(program, s) for s in stmts]
    out = []
    bad = [program.op(s.op).unit for s, sc in zip(stmts, scopes) if sc == "?"]
    if bad:
        why = f"ops of unit(s) {', '.join(sorted(set(bad)))}: which threads run them is unknown"
        return tuple(ThreadCheck(c, False, why) for c in THREAD_CLASSES)

    def runs(k: int) -> bool:
        return stmts[k].guard is None

    # converge: an all-thread write after an elected wait (in the same sub-tile, or the last wait of the
    # previous one, reached around the loop), with no barrier between
    problem = ""
    for k, s in enumerate(stmts):
        if not (isinstance(s, OpStmt) and s.writes and scopes[k] == "all"):
            continue
        # the last wait before it: in this sub-tile, or else the previous one's, reached around the back edge
        waits = [w for w in (*range(k + 1, len(stmts)), *range(k)) if isinstance(stmts[w], WaitStmt)]
        if not waits:
            continue  # no wait at all: nothing to learn before writing (the prover's war obligations judge that)
        last = waits[-1]
        span = range(last + 1, k) if last < k else (*range(last + 1, len(stmts)), *range(k))
        if not any(scopes[b] == "converge" and runs(b) for b in span):
            problem = (f"{s.op} (all 128 threads) writes staging slot {s.writes[0].slot} after the elected thread's "
                       f"wait_group.read with no bar.sync between: thread 1 may write while the previous store of "
                       f"that slot still reads it, since only thread 0 waited")
            break
    out.append(ThreadCheck("converge", not problem, problem))
    problem = ""
    for k, s in enumerate(stmts):
        if not (isinstance(s, OpStmt) and s.reads and scopes[k] == "elected"):
            continue
        for acc in s.reads:
            writers = [w for w in range(k) if isinstance(stmts[w], OpStmt) and any(
                a.buffer == acc.buffer and a.version == acc.version for a in stmts[w].writes)]
            if not writers:
                problem = f"{s.op} reads {acc.buffer} version {acc.version} that no earlier statement of the sub-tile writes"
                break
            w = writers[-1]
            fences = [f for f in range(w + 1, k) if isinstance(stmts[f], OpStmt) and runs(f)
                      and program.op(stmts[f].op).unit == "fence_proxy_async"]
            if not fences:
                problem = (f"{s.op} (async proxy) reads {acc.buffer} slot {acc.slot} written by "
                           f"{stmts[w].op} (generic proxy) with no fence.proxy.async between: the TMA store may "
                           f"read the slot's old bytes")
                break
            bars = [b for b in range(fences[0] + 1, k) if scopes[b] == "converge" and runs(b)]
            if not bars:
                problem = (f"{s.op} (elected thread) reads {acc.buffer} slot {acc.slot} with no bar.sync after "
                           f"the fence: thread 1's writes may not be fenced, or not made, when thread 0 issues it")
                break
        if problem:
            break
    out.append(ThreadCheck("proxy_fence", not problem, problem))
    # teardown: after the last sub-tile, an unguarded wait_group.read 0 on the bulk queue with no commit after it
    problem = "after the last sub-tile no wait_group.read 0 runs: a store may still read shared memory when the CTA exits"
    for pt in program.parts:
        if pt.name == "body":
            continue
        for k, s in enumerate(pt.stmts):
            if isinstance(s, WaitStmt) and s.guard is None and program.waits[s.wait].in_flight == Num(0) and \
                    program.waits[s.wait].queue == 0 and \
                    not any(isinstance(x, (CommitStmt, OpStmt)) for x in pt.stmts[k + 1:]):
                problem = ""
    out.append(ThreadCheck("teardown", not problem, problem))
    return tuple(out)


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
    from dataclasses import replace

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


__all__ = ["THREAD_CLASSES", "DEFAULT_STAGING", "store_program", "store_mutant", "STORE_MUTANTS", "check_threads", "ThreadCheck", "QUEUE", "UNITS", "MAX_STAGING", "TRIP"]

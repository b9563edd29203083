"""The TMA-store epilogue's thread classes (docs/hopper_store.md): what the single-thread model of the store
program (:func:`synth.lower.hopper_store.store_program`, whose waits synth's prover proves) cannot see, decided on
its statement order: ``converge``, ``proxy_fence`` and ``teardown`` (the protocol: :mod:`synth.hopper.store`).
The independent checker (:mod:`synth.trusted.store`) decides the same classes on its own. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import Num
from ..hopper.store import THREAD_CLASSES, UNITS
from ..program import CommitStmt, OpStmt, Program, WaitStmt


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


__all__ = ["ThreadCheck", "check_threads", "THREAD_CLASSES"]

"""Independent simulator of the latency model (docs/latency_model.md).

Given only a schedule's stages, body order and async flags, :func:`best_timing`
finds the best static timing by its own method, and :func:`replay` executes the
fully unrolled pipelined loop event by event. Nothing here is shared with the
CP-SAT model in :mod:`synth.model`; the two are compared in the tests and every
schedule the solver returns is re-checked here.

**Timing search.** For a fixed II the constraints on the issue offsets ``t`` are

* body order: consecutive ops ``u, v`` of the body have ``t_v >= t_u + [u > v]``
  (the body order is the order of ``(t, program index)``);
* dependence ``a -> b`` (distance ``d``, latency ``l``), ``D = s_b + d - s_a``:
  ``t_b >= t_a + l - D * II``;
* a sync op ``a`` on an async unit blocks issue until its result is ready:
  ``t_b >= t_a + l_a`` for every ``b`` after it in the body, and
  ``t_b >= t_a + l_a - II`` for every ``b`` (the next step's instances);
* a unit of count ``c`` has at most ``c`` ops busy at a time
  (busy interval ``[t, t + issue)``);
* ``0 <= t_a <= II - issue_a``.

Every lower-bound rule is monotone, and for a fixed order the set of feasible
slots of a unit is upward closed above the previous op's start, so iterating
"earliest admissible offset" from zero reaches the least solution: every offset
(hence the tail) is as small as it can be, or some offset overflows the step
and the II is infeasible. Feasibility is monotone in II, so the smallest II is
found by bisection, then larger IIs are tried while
``(T - 1) * II + max_a(s_a * II + l_a)`` can still beat the best cycles.
Symbolic trip counts minimize ``(II, tail)`` lexicographically.

**Replay.** Steps ``0 .. T + S - 1``; op ``a`` in step ``j`` processes iteration
``j - s_a`` when ``0 <= j - s_a < T``. Instances issue in order (step, body
order), each at ``max(planned, previous issue, operands ready, unit free,
blocking op done)``; the difference to the planned ``j * II + t_a`` is a stall.
The loop ends when the last result is ready. Buffer slots are checked too: the
write of a version that reuses a slot must come after the last read of the
version it overwrites (after its completion for an async reader). An op that
reads and writes one buffer (an in-place update, ``acc[i]`` reading version
``i - 1`` and writing version ``i``) may do so in one slot: one instance reads
its operands before it writes its results, as :func:`synth.schedule.multiplicity`,
the CP-SAT model and the lowering assume (an async one gets a second slot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .graph import Graph
from .problem import Problem
from .schedule import Schedule, Timing


@dataclass(frozen=True)
class Event:
    """One op instance of the replay."""

    step: int
    op: str
    iteration: int
    planned: int
    issue: int
    """Actual issue cycle (``planned`` plus any stall)."""
    ready: int
    """Cycle its result is ready."""


@dataclass(frozen=True)
class SimResult:
    cycles: int
    """Cycles of the replayed loop (``trip_count`` iterations), from the replay."""
    ii: int
    offsets: tuple[int, ...]
    tail: int
    """``cycles = (trip_count - 1) * ii + tail`` when nothing stalls."""
    stalls: int
    """Total stall cycles seen in the replay (0 for a timing of the model)."""
    trip_count: int
    """The trip count that was replayed."""
    hazards: tuple[str, ...] = ()
    """Operands read before they were ready, units over-subscribed, slots clobbered."""
    trace: Optional[tuple[Event, ...]] = None

    @property
    def timing(self) -> Timing:
        return Timing(self.ii, self.offsets, self.cycles, self.tail)


def _body(sched: Schedule) -> list[int]:
    return sorted(range(len(sched.order)), key=lambda i: sched.order[i])


def _lags(problem: Problem, graph: Graph, sched: Schedule) -> list[tuple[int, int, int, int]]:
    """(src, dst, latency, D) of every hard edge; raises when the schedule breaks one."""
    out = []
    for e in graph.constraints():
        lag = sched.stage[e.dst] + e.distance - sched.stage[e.src]
        if lag < 0 or (lag == 0 and sched.order[e.src] >= sched.order[e.dst]):
            raise ValueError(f"schedule breaks the dependence {problem.ops[e.src].name}->"
                             f"{problem.ops[e.dst].name} (distance {e.distance})")
        out.append((e.src, e.dst, e.latency, lag))
    return out


def _blocking(problem: Problem, sched: Schedule) -> list[int]:
    """Ops that block issue: sync ops on async units (with a non-zero latency)."""
    return [i for i, op in enumerate(problem.ops)
            if problem.target.unit(op.unit).is_async and not sched.is_async[i] and op.latency > 0]


def offsets_at(problem: Problem, graph: Graph, sched: Schedule, ii: Optional[int]) -> Optional[tuple[int, ...]]:
    """The least issue offsets at initiation interval ``ii``, or None when none exist.

    ``ii=None`` means an unbounded step: only the constraints inside one step
    (distance-0 lags, body order, units, blocking of later ops) apply; those
    offsets are below the least offsets at every finite II.
    """
    ops = problem.ops
    n = len(ops)
    if ii is not None and any(op.issue > ii for op in ops):
        return None
    body = _body(sched)
    pos = {a: k for k, a in enumerate(body)}
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, lat, lag in _lags(problem, graph, sched):
        if ii is not None or lag == 0:
            preds[b].append((a, lat - lag * (ii or 0)))
    blockers = [(a, ops[a].latency) for a in _blocking(problem, sched)]
    counts = [problem.target.unit(op.unit).count for op in ops]
    # Ops of the same unit earlier in the body: a prefix of one list per unit (no n^2 copies).
    per_unit: dict[str, list[int]] = {}
    same_unit_before: list[tuple[list[int], int]] = []
    for b in body:
        lst = per_unit.setdefault(ops[b].unit, [])
        same_unit_before.append((lst, len(lst)))
        lst.append(b)
    issue = [op.issue for op in ops]
    limit = [ii - op.issue for op in ops] if ii is not None else None
    t = [0] * n
    changed = True
    while changed:
        changed = False
        for k, b in enumerate(body):
            lo = t[b]
            if k:
                a = body[k - 1]
                lo = max(lo, t[a] + (1 if a > b else 0))
            for a, w in preds[b]:
                if t[a] + w > lo:
                    lo = t[a] + w
            for a, lat in blockers:
                if ii is not None and t[a] + lat - ii > lo:
                    lo = t[a] + lat - ii
                if pos[a] < k and t[a] + lat > lo:
                    lo = t[a] + lat
            lst, n_before = same_unit_before[k]
            if n_before:
                if counts[b] == 1:
                    last = lst[n_before - 1]  # in body order the previous op of the unit ends last
                    lo = max(lo, t[last] + issue[last])
                else:
                    lo = _earliest_slot(lo, [(t[a], t[a] + issue[a]) for a in lst[:n_before]], counts[b])
            if limit is not None and lo > limit[b]:
                return None
            if lo != t[b]:
                t[b] = lo
                changed = True
    return tuple(t)


def _earliest_slot(lo: int, busy: list[tuple[int, int]], count: int) -> int:
    """Earliest cycle >= lo at which fewer than ``count`` of ``busy`` intervals are running.

    Every interval in ``busy`` starts at or before ``lo`` (body order), so the
    occupancy only falls after ``lo``; the answer is ``lo`` or an interval end.
    """
    def load(x: int) -> int:
        return sum(1 for s, e in busy if s <= x < e)

    if load(lo) < count:
        return lo
    for end in sorted({e for _, e in busy if e > lo}):
        if load(end) < count:
            return end
    return lo  # unreachable: after every end the unit is idle


def _tail(problem: Problem, sched: Schedule, ii: int, t: tuple[int, ...]) -> int:
    return max(sched.stage[a] * ii + t[a] + op.latency for a, op in enumerate(problem.ops))


def best_timing(problem: Problem, graph: Graph, sched: Schedule, trip_count: int | None = None) -> Timing:
    """The best timing of ``sched``'s stages/order/async flags under the latency model.

    Static trip counts (or an explicit ``trip_count``) minimize
    ``(T - 1) * II + tail``; symbolic ones minimize ``(II, tail)``.
    """
    ops = problem.ops
    symbolic = problem.loop.symbolic and trip_count is None
    T = trip_count if trip_count is not None else (problem.loop.min_trip_count if symbolic
                                                   else int(problem.loop.trip_count))
    lo = max(op.issue for op in ops)
    for u in problem.target.units:
        total = sum(op.issue for op in ops if op.unit == u.name)
        lo = max(lo, -(-total // u.count))
    for a in _blocking(problem, sched):
        lo = max(lo, ops[a].latency)
    hi = sum(op.latency + op.issue for op in ops) + lo + 1
    if offsets_at(problem, graph, sched, hi) is None:
        raise ValueError(f"no timing exists for this schedule of {problem.name}")
    while lo < hi:  # smallest feasible II (feasibility is monotone in II)
        mid = (lo + hi) // 2
        if offsets_at(problem, graph, sched, mid) is None:
            lo = mid + 1
        else:
            hi = mid
    ii = lo
    t = offsets_at(problem, graph, sched, ii)
    assert t is not None
    best = (ii, t, _tail(problem, sched, ii, t))
    if not symbolic:
        best_cycles = (T - 1) * ii + best[2]
        t_inf = offsets_at(problem, graph, sched, None)
        assert t_inf is not None
        floor = [(sched.stage[a], t_inf[a] + op.latency) for a, op in enumerate(ops)]
        cand = ii + 1
        while (T - 1) * cand + max(s * cand + x for s, x in floor) < best_cycles:
            tc = offsets_at(problem, graph, sched, cand)
            if tc is not None:
                tail = _tail(problem, sched, cand, tc)
                if (T - 1) * cand + tail < best_cycles:
                    best, best_cycles = (cand, tc, tail), (T - 1) * cand + tail
            cand += 1
    ii, t, tail = best
    cycles = None if symbolic else (T - 1) * ii + tail
    return Timing(ii, t, cycles, tail)


def replay(problem: Problem, graph: Graph, sched: Schedule, timing: Timing, trip_count: int,
           trace: bool = False) -> SimResult:
    """Execute the unrolled pipelined loop at ``timing`` for ``trip_count`` iterations."""
    ops = problem.ops
    n = len(ops)
    ii, off = timing.ii, timing.offsets
    T = trip_count
    S = max(sched.stage)
    body = _body(sched)
    preds: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    for e in graph.constraints():
        preds[e.dst].append((e.src, e.distance, e.latency))
    hazards: list[str] = []
    issued: dict[tuple[int, int], tuple[int, int, int]] = {}  # (op, iteration) -> (seq, issue, ready)
    unit_busy: dict[str, list[int]] = {u.name: [] for u in problem.target.units}  # end cycles
    last_issue = 0
    block_until = 0
    stalls = 0
    end = 0
    seq = 0
    events: list[Event] = []
    for step in range(T + S):
        for a in body:
            it = step - sched.stage[a]
            if not 0 <= it < T:
                continue
            op = ops[a]
            planned = step * ii + off[a]
            when = max(planned, last_issue, block_until)
            for src, dist, lat in preds[a]:
                pit = it - dist
                if pit < 0:
                    continue
                if (src, pit) not in issued:
                    hazards.append(f"{op.name}[{it}] issues before its producer {ops[src].name}[{pit}]")
                    continue
                when = max(when, issued[(src, pit)][1] + lat)
            busy = unit_busy[op.unit]
            cap = problem.target.unit(op.unit).count
            while True:
                live = [x for x in busy if x > when]
                if len(live) < cap:
                    break
                when = min(live)
            unit_busy[op.unit] = [x for x in busy if x > when] + [when + op.issue]
            if when > planned:
                stalls += when - planned
            ready = when + op.latency
            issued[(a, it)] = (seq, when, ready)
            seq += 1
            last_issue = when
            if problem.target.unit(op.unit).is_async and not sched.is_async[a]:
                block_until = max(block_until, ready)
            end = max(end, ready)
            if trace:
                events.append(Event(step, op.name, it, planned, when, ready))
    hazards += _slot_hazards(problem, graph, sched, issued, T)
    return SimResult(end, ii, tuple(off), timing.tail, stalls, T, tuple(hazards),
                     tuple(events) if trace else None)


def _slot_hazards(problem: Problem, graph: Graph, sched: Schedule,
                  issued: dict[tuple[int, int], tuple[int, int, int]], T: int) -> list[str]:
    """Writes that land in a slot whose previous version is still to be read."""
    out: list[str] = []
    mult = dict(sched.multiplicity)
    for buf in problem.buffers:
        if buf.carried:
            continue
        m = mult[buf.name]
        for e in graph.raw_edges(buf.name):
            a, b = e.src, e.dst
            for it in range(T):
                version = it - e.distance
                if version < 0 or (b, it) not in issued:
                    continue
                w = (a, version + m)
                if w not in issued:
                    continue
                if w == (b, it):
                    continue  # an in-place update: one instance reads its operand before it writes its result
                rseq = issued[(b, it)][0]
                wseq = issued[w][0]
                ok = wseq > rseq
                if sched.is_async[b]:
                    ok = ok and w[1] + sched.stage[a] > it + sched.stage[b]  # a later step
                if not ok:
                    out.append(f"{problem.ops[a].name}[{version + m}] overwrites slot of {buf.name} "
                               f"still read by {problem.ops[b].name}[{it}]")
                    break
    return out


def simulate(problem: Problem, graph: Graph, schedule: Schedule, trip_count: int | None = None,
             *, trace: bool = False) -> SimResult:
    """Best timing of ``schedule`` (ignoring ``schedule.timing``), then its replay.

    For a symbolic trip count the replay runs ``trip_count`` iterations, or
    ``max(min_trip_count, stages)`` when not given; ``ii`` and ``tail`` give the
    cycles for any ``T`` as ``(T - 1) * ii + tail``.
    """
    timing = best_timing(problem, graph, schedule, trip_count)
    if trip_count is None:
        trip_count = (int(problem.loop.trip_count) if not problem.loop.symbolic
                      else max(problem.loop.min_trip_count, schedule.max_stage + 1))
    return replay(problem, graph, schedule, timing, trip_count, trace)


def replay_window(problem: Problem, graph: Graph, schedule: Schedule, trip_count: int) -> int:
    """Iterations whose replay checks a stall-free timing for all ``trip_count`` iterations.

    Every check of :func:`replay` relates two instances at most ``L = S + D + M + 1``
    steps apart (``S`` stages, ``D`` the largest dependence distance, ``M`` the
    most slots of a buffer). Without stalls each instance issues at its planned
    cycle, so a step's checks depend only on which instances exist within ``L``
    steps of it: prologue steps, steady-state steps and epilogue steps each look
    alike. ``S + 2L + 2`` iterations hold every such neighbourhood (and the first
    stall of a longer replay happens in one of them), so a longer loop is
    replayed that far.
    """
    S = schedule.max_stage
    D = max((e.distance for e in graph.edges), default=0)
    M = max((m for _, m in schedule.multiplicity), default=1)
    L = S + D + M + 1
    return min(trip_count, S + 2 * L + 2)


def check_timing(problem: Problem, graph: Graph, schedule: Schedule, trip_count: int | None = None) -> list[str]:
    """Replay ``schedule.timing`` as given: stalls, hazards or a wrong cycle count, as strings.

    Long loops are replayed for :func:`replay_window` iterations (the same verdict).
    """
    tm = schedule.timing
    if tm is None:
        return ["schedule has no timing"]
    if trip_count is None:
        trip_count = (int(problem.loop.trip_count) if not problem.loop.symbolic
                      else max(problem.loop.min_trip_count, schedule.max_stage + 1))
    trip_count = replay_window(problem, graph, schedule, trip_count)
    errs: list[str] = []
    for a, op in enumerate(problem.ops):
        if not 0 <= tm.offsets[a] <= tm.ii - op.issue:
            errs.append(f"offset {tm.offsets[a]} of {op.name} is outside its step of {tm.ii} cycles")
    keyed = sorted(range(len(problem.ops)), key=lambda a: (tm.offsets[a], a))
    if [schedule.order[a] for a in keyed] != list(range(len(problem.ops))):
        errs.append("body order is not the order of (offset, program index)")
    res = replay(problem, graph, schedule, tm, trip_count)
    if res.stalls:
        errs.append(f"replay stalls {res.stalls} cycles")
    errs += list(res.hazards)
    want = (trip_count - 1) * tm.ii + tm.tail
    if res.cycles != want:
        errs.append(f"replay takes {res.cycles} cycles, the timing predicts {want}")
    return errs


__all__ = ["SimResult", "Event", "simulate", "best_timing", "replay", "replay_window", "offsets_at",
           "check_timing"]

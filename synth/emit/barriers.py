"""Where a CUDA kernel of a lowered :class:`~synth.program.Program` needs
``__syncthreads()`` (docs/cuda_kernel.md section 4).

Input: the program and the names of its shared buffers. Output: the
:class:`Barrier` placements, found by running the program's statements for its
static trip count with cp.async's hardware semantics. Used by
:mod:`synth.emit.cuda`; never modifies its inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Optional

from ..expr import Bin, Call, Expr, Ite, Un, Var, evaluate, free_vars, to_str
from ..program import CommitStmt, Part, Program, Stmt, WaitStmt


# ---------------------------------------------------------------------------
# barrier placement


@dataclass(frozen=True)
class Barrier:
    """A ``__syncthreads()`` before statement ``stmt`` of ``part`` (at prologue/epilogue
    step ``step``; ``None`` in the body, where it is in every iteration)."""

    part: str
    step: Optional[int]
    stmt: int
    why: str


@dataclass
class _SimState:
    uncommitted: list = field(default_factory=list)
    """(buffer, version) of issued, not yet committed cp.async."""
    groups: list = field(default_factory=list)
    """Committed, possibly pending groups, oldest first: lists of (buffer, version)."""
    landed: set = field(default_factory=set)
    """(buffer, version) complete in this thread, not yet made visible by a barrier."""
    visible: set = field(default_factory=set)
    read_slots: dict = field(default_factory=dict)
    """(buffer, slot) read since the last barrier -> reader op."""


def _static(e: Optional[Expr], env: dict[str, int]):
    return None if e is None else evaluate(e, env)


def trip_samples(program: Program) -> tuple[int, ...]:
    """The trip counts a kernel of ``program`` is analysed at: the static one, or for a
    symbolic ``T`` every value from its minimum up to ``max_stage + 2 * slots + 2``
    beyond it (past that, prologue and epilogue are the same and the body only
    repeats its slot pattern, whose period divides the largest slot count)."""
    if isinstance(program.trip_count, int):
        return (program.trip_count,)
    m = max((b.multiplicity for b in program.buffers), default=1)
    lo = max(program.min_trip_count, 1)
    return tuple(range(lo, lo + program.max_stage + 2 * m + 3))


def step_env(program: Program, part: Part, i: int, trip: Optional[int] = None) -> dict[str, int]:
    """The variables of step ``i`` of ``part`` (the loop variable's value does not matter;
    a symbolic trip count takes ``trip``, default its minimum)."""
    env = {part.var: i, program.loop_var: 0}
    if isinstance(program.trip_count, str):
        env[program.trip_count] = program.min_trip_count if trip is None else trip
    return env


def extent(program: Program, part: Part, trip: Optional[int] = None) -> int:
    """The number of steps of ``part`` at trip count ``trip`` (default: the static trip
    count, or the minimum of a symbolic one)."""
    env = {}
    if isinstance(program.trip_count, str):
        env[program.trip_count] = program.min_trip_count if trip is None else trip
    return int(evaluate(part.extent, env))


def max_extent(program: Program, part: Part) -> int:
    """The most steps ``part`` has at any analysed trip count (:func:`trip_samples`)."""
    return max(extent(program, part, t) for t in trip_samples(program))


def periodic(e: Expr, var: str, env: dict[str, int]) -> Optional[tuple[int, int]]:
    """``(P, inc)`` with ``e(i + P) == e(i) + inc`` for every integer ``i`` (``e`` a function
    of ``var`` with the other names bound by ``env``), or None where no such pair is found
    (a comparison of sides that grow at different rates, a product of two terms in
    ``var``, a division by something that is not a positive constant...).

    Exact, by structure: ``var`` is ``(1, 1)``, a sub-expression without ``var`` is
    ``(1, 0)``; sums and differences add their increments over a common period;
    ``x % d`` and ``x // d`` with a positive constant ``d`` are periodic once the period
    makes ``x``'s increment a multiple of ``d``; comparisons, ``!``, ``&&``, ``||``,
    ``?:``, ``min`` and ``max`` need operands whose increments agree (their result's
    increment is 0 for a boolean)."""
    if var not in free_vars(e):
        return 1, 0
    if isinstance(e, Var):
        return 1, 1
    if isinstance(e, Un):
        a = periodic(e.arg, var, env)
        if a is None:
            return None
        if e.op == "!":
            return a if a[1] == 0 else None
        return a[0], -a[1]
    if isinstance(e, Ite):
        c = periodic(e.cond, var, env)
        if c is None or c[1] != 0:
            return None
        return _same((c[0], 0), _same(periodic(e.then, var, env), periodic(e.other, var, env)), ignore_first=True)
    if isinstance(e, Call):
        out = periodic(e.args[0], var, env)
        for x in e.args[1:]:
            out = _same(out, periodic(x, var, env))
        return out
    assert isinstance(e, Bin)
    a, b = periodic(e.lhs, var, env), periodic(e.rhs, var, env)
    if a is None or b is None:
        return None
    if e.op in ("+", "-"):
        p = math.lcm(a[0], b[0])
        sign = 1 if e.op == "+" else -1
        return p, a[1] * (p // a[0]) + sign * b[1] * (p // b[0])
    if e.op == "*":
        for x, other in ((a, e.rhs), (b, e.lhs)):
            if var not in free_vars(other):  # ``other`` is a constant here
                c = _constant(other, env)
                return None if c is None else (x[0], x[1] * c)
        return None
    if e.op in ("/", "%"):
        d = None if var in free_vars(e.rhs) else _constant(e.rhs, env)
        if d is None or d <= 0:
            return None
        p = a[0] * (d // math.gcd(a[1], d))
        inc = a[1] * (p // a[0])  # a multiple of d
        return (p, inc // d) if e.op == "/" else (p, 0)
    if e.op in ("&&", "||"):
        if a[1] != 0 or b[1] != 0:
            return None
        return math.lcm(a[0], b[0]), 0
    # comparisons: the sides' difference must repeat
    p = math.lcm(a[0], b[0])
    if a[1] * (p // a[0]) != b[1] * (p // b[0]):
        return None
    return p, 0


def _constant(e: Expr, env: dict[str, int]) -> Optional[int]:
    """The value of ``e`` (free of the step variable), or None where it has none (a name ``env``
    lacks, a division by zero): the caller then simulates, and meets the error where it would."""
    try:
        return int(evaluate(e, env))
    except (KeyError, ZeroDivisionError, ValueError, TypeError):
        return None


def _same(a: Optional[tuple[int, int]], b: Optional[tuple[int, int]], ignore_first: bool = False
          ) -> Optional[tuple[int, int]]:
    """A common ``(P, inc)`` of ``a`` and ``b`` over the lcm of their periods: their increments
    must agree (unless ``ignore_first``: ``a`` is a condition, the result takes ``b``'s)."""
    if a is None or b is None:
        return None
    p = math.lcm(a[0], b[0])
    ia, ib = a[1] * (p // a[0]), b[1] * (p // b[0])
    if not ignore_first and ia != ib:
        return None
    return p, ib


def analysed_steps(program: Program, part: Part, exprs: tuple[Expr, ...] = (), period: int = 1,
                   constant: bool = False) -> Iterator[tuple[int, int]]:
    """``(trip, step)`` of the steps of ``part`` at every :func:`trip_samples` trip count
    that decide any property of the values of ``exprs`` and of ``step % period``: every
    step, or, at a trip count where each of ``exprs`` repeats its value every ``P`` steps
    (:func:`periodic` with increment 0), the first ``lcm(P.., period)`` of them: the later
    steps only repeat their values. So the sets of values, and whether a relation holds
    at every step, are those of the full run, at a cost independent of the trip count.

    ``constant``: only whether each of ``exprs`` keeps one value (and which) matters; an
    expression that grows by a non-zero increment every ``P`` steps then needs only the
    first ``P + 1`` steps (two of its values differ)."""
    for trip in trip_samples(program):
        n = extent(program, part, trip)
        env = step_env(program, part, 0, trip)
        env.pop(part.var)
        p = period
        grows = False
        for e in exprs:
            got = periodic(e, part.var, env)
            if got is None or (got[1] != 0 and not constant):
                p = n
                break
            p = math.lcm(p, got[0])
            grows = grows or got[1] != 0
        for i in range(min(n, p + 1 if grows else p)):
            yield trip, i


def takes_value(program: Program, part: Part, e: Expr, value: int) -> bool:
    """Whether ``e`` equals ``value`` at some step of ``part`` at some :func:`trip_samples` trip
    count; where ``e`` is :func:`periodic`, decided per residue of the step modulo the period
    (its values there form an arithmetic progression), at a cost independent of the trip count."""
    for trip in trip_samples(program):
        n = extent(program, part, trip)
        env = step_env(program, part, 0, trip)
        env.pop(part.var)
        got = periodic(e, part.var, env)
        p, inc = got if got is not None else (max(n, 1), 0)
        for r in range(min(n, p)):
            first = int(evaluate(e, {**env, part.var: r}))
            last_q = (n - 1 - r) // p  # steps r, r + p, .. r + last_q * p
            if first == value or (inc != 0 and (value - first) % inc == 0 and 0 <= (value - first) // inc <= last_q):
                return True
    return False


def barriers(program: Program, shared: set[str]) -> list[Barrier]:
    """Where the kernel needs ``__syncthreads()``, found by running the program's
    statements for its static trip count (every :func:`trip_samples` value of a
    symbolic one) with cp.async's hardware semantics.

    A barrier is needed (and placed as late as possible, right before the
    statement that needs it):

    * **RAW**: before a read of a shared-buffer version whose cp.async group a
      wait has retired in this thread but no barrier has yet published to the
      other threads that read it (every thread copies part of every tile);
    * **WAR**: before a cp.async writes a shared slot that some thread has read
      since the last barrier (another warp may still be reading it).

    Body barriers sit at a statement index and run in every iteration; the
    placement is grown to a fixed point (a barrier added for one iteration also
    runs in the others). Raises ValueError when a read sees a version no wait
    has retired (the verifier refutes such programs).
    """
    placed: dict[tuple, str] = {}
    while True:
        need = None
        for trip in trip_samples(program):  # a symbolic trip count: the union over its values
            need = _simulate(program, shared, placed, trip)
            if need is not None:
                break
        if need is None:
            break
        key, why = need
        placed[key] = why
    out = [Barrier(k[0], k[1], k[2], why) for k, why in placed.items()]
    order = {p: n for n, p in enumerate(("prologue", "body", "epilogue"))}
    return sorted(out, key=lambda b: (order[b.part], b.step or 0, b.stmt))


def _simulate(program: Program, shared: set[str], placed: dict[tuple, str], trip: int):
    """Run once at ``trip`` with barriers ``placed``; return the first missing barrier (key, why) or None.

    The body is run step by step until its state repeats (:func:`_body_period`): from
    then on every period does what the last one did, so the run jumps over the whole
    periods left (none of them could return a need the last one did not) and runs the
    rest step by step. The answer is that of running every step."""
    st = _SimState()
    for part in program.parts:
        n = extent(program, part, trip)
        period = _body_period(program, part, shared, trip) if part.name == "body" else None
        seen: dict = {}
        i = 0
        while i < n:
            if period is not None and i % period[0] == 0:
                k = i // period[0]
                norm = _snapshot(st, {b: -k * inc for b, inc in period[1].items()})
                if norm in seen:
                    length = (k - seen[norm]) * period[0]
                    q = (n - i) // length
                    if q > 0:
                        _shift(st, {b: q * (k - seen[norm]) * inc for b, inc in period[1].items()})
                        i += q * length
                    period = None  # the rest (less than one period) step by step
                    continue
                seen[norm] = k
            env = step_env(program, part, i, trip)
            for k, s in enumerate(part.stmts):
                key = (part.name, None if part.name == "body" else i, k)
                if key in placed:
                    st.visible |= st.landed
                    st.landed = set()
                    st.read_slots = {}
                if s.guard is not None and not _static(s.guard, env):
                    continue
                why = _run_stmt(program, st, s, env, shared, part.name, i)
                if why is not None:
                    if key in placed:  # pragma: no cover - a barrier here resolves every need
                        raise AssertionError(why)
                    return key, why
            i += 1
    return None


def _body_period(program: Program, part: Part, shared: set[str], trip: int
                 ) -> Optional[tuple[int, dict[str, int]]]:
    """``(L, {buffer: inc})`` when every value the body's steps use repeats every ``L`` steps
    at ``trip`` (guards, wait counts and shared slots exactly; each shared buffer's versions
    shifted by its ``inc``), so that two states ``L`` steps apart that differ only by those
    shifts behave alike forever; None otherwise (the body is then run step by step)."""
    env = step_env(program, part, 0, trip)
    env.pop(part.var)
    period = 1
    incs: dict[str, tuple[int, int]] = {}
    fixed: list[Expr] = []
    for s in part.stmts:
        if s.guard is not None:
            fixed.append(s.guard)
        if isinstance(s, WaitStmt):
            if not 0 <= s.wait < len(program.waits):
                return None
            fixed.append(program.waits[s.wait].in_flight)
        elif not isinstance(s, CommitStmt):
            for a in (*s.reads, *s.writes):
                if a.buffer not in shared:
                    continue
                fixed.append(a.slot)
                got = periodic(a.version, part.var, env)
                if got is None:
                    return None
                have = incs.setdefault(a.buffer, got)
                common = _same(have, got)
                if common is None:
                    return None
                incs[a.buffer] = common
                period = math.lcm(period, common[0])
    for e in fixed:
        got = periodic(e, part.var, env)
        if got is None or got[1] != 0:
            return None
        period = math.lcm(period, got[0])
    return period, {b: inc * (period // p) for b, (p, inc) in incs.items()}


def _moved(x: tuple[str, int], by: dict[str, int]) -> tuple[str, int]:
    return x[0], x[1] + by.get(x[0], 0)


def _snapshot(st: _SimState, by: dict[str, int]) -> tuple:
    """The state with each buffer's versions moved by ``by``, as a hashable value."""
    return (tuple(_moved(x, by) for x in st.uncommitted), tuple(tuple(_moved(x, by) for x in g) for g in st.groups),
            frozenset(_moved(x, by) for x in st.landed), frozenset(_moved(x, by) for x in st.visible),
            frozenset(st.read_slots.items()))


def _shift(st: _SimState, by: dict[str, int]) -> None:
    """Move each buffer's versions in ``st`` by ``by`` (slots and readers stay)."""
    st.uncommitted = [_moved(x, by) for x in st.uncommitted]
    st.groups = [[_moved(x, by) for x in g] for g in st.groups]
    st.landed = {_moved(x, by) for x in st.landed}
    st.visible = {_moved(x, by) for x in st.visible}


def _run_stmt(program: Program, st: _SimState, s: Stmt, env: dict[str, int], shared: set[str],
          part: str, i: int) -> Optional[str]:
    if isinstance(s, CommitStmt):
        st.groups.append(st.uncommitted)
        st.uncommitted = []
        return None
    if isinstance(s, WaitStmt):
        if not 0 <= s.wait < len(program.waits):
            raise ValueError(f"{part} step {i}: wait #{s.wait} is not one of the program's {len(program.waits)} waits")
        n = int(_static(program.waits[s.wait].in_flight, env))
        if n < 0:  # a read-back program is checked at read time; this keeps the emitter total
            raise ValueError(f"{part} step {i}: wait #{s.wait} keeps {n} groups in flight (negative)")
        while len(st.groups) > n:
            st.landed |= set(st.groups.pop(0))
        st.landed -= _pending(st)  # a version several ops write is complete when all of its groups are
        return None
    op = program.op(s.op)
    for a in s.reads:
        if a.buffer not in shared:
            continue
        v = int(evaluate(a.version, env))
        if (a.buffer, v) in _pending(st):
            raise ValueError(f"{part} step {i}: {s.op} reads {a.buffer} version {v} before any wait retires "
                             "every cp.async group that writes it (the program's wait counts are wrong)")
        if (a.buffer, v) in st.visible:
            pass
        elif (a.buffer, v) in st.landed:
            sym = isinstance(program.trip_count, str)
            return (f"RAW: {s.op} reads {a.buffer} k-tile {_show(a.version, v, part, sym)} (slot "
                    f"{_show(a.slot, int(evaluate(a.slot, env)), part, sym)}) that the last wait completed in this "
                    "thread; the other threads' cp.async into it must be visible")
        else:
            raise ValueError(f"{part} step {i}: {s.op} reads {a.buffer} version {v} before any wait retires "
                             "its cp.async group (the program's wait counts are wrong)")
        slot = int(evaluate(a.slot, env))
        st.read_slots.setdefault((a.buffer, slot), s.op)
    for a in s.writes:
        if a.buffer not in shared:
            continue
        slot = int(evaluate(a.slot, env))
        if (a.buffer, slot) in st.read_slots:
            rd = st.read_slots[(a.buffer, slot)]
            sym = isinstance(program.trip_count, str)
            return (f"WAR: {s.op} overwrites {a.buffer} slot {_show(a.slot, slot, part, sym)} that {rd} read since "
                    "the last barrier; every warp must have finished reading it")
        v = int(evaluate(a.version, env))
        if op.is_async:
            st.uncommitted.append((a.buffer, v))
        else:  # pragma: no cover - rejected by _check_supported
            st.landed.add((a.buffer, v))
        m = program.buffer(a.buffer).multiplicity
        st.visible = {(b, x) for (b, x) in st.visible if not (b == a.buffer and x % m == v % m)}
        st.landed = {(b, x) for (b, x) in st.landed if not (b == a.buffer and x % m == v % m)}
    return None


def _pending(st: _SimState) -> set:
    """(buffer, version) with a copy not yet complete in this thread (committed or not)."""
    return {x for g in st.groups for x in g} | set(st.uncommitted)


def _show(e: Expr, value: int, part: str, symbolic: bool) -> str:
    """``e`` as written in the body and with a symbolic trip count (it holds for every iteration
    and trip count; the kernel's unrolled steps define ``i``), its value elsewhere."""
    return to_str(e) if part == "body" or symbolic else str(value)


__all__ = ["Barrier", "analysed_steps", "barriers", "periodic", "takes_value", "step_env", "extent", "max_extent", "trip_samples"]

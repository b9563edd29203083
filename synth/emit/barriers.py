"""Where a CUDA kernel of a lowered :class:`~synth.program.Program` needs
``__syncthreads()`` (docs/cuda_kernel.md section 4).

Input: the program and the names of its shared buffers. Output: the
:class:`Barrier` placements, found by running the program's statements for its
static trip count with cp.async's hardware semantics. Used by
:mod:`synth.emit.cuda`; never modifies its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..expr import Expr, evaluate, to_str
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
    """Run once at ``trip`` with barriers ``placed``; return the first missing barrier (key, why) or None."""
    st = _SimState()
    for part in program.parts:
        n = extent(program, part, trip)
        for i in range(n):
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
    return None


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


__all__ = ["Barrier", "barriers", "step_env", "extent", "max_extent", "trip_samples"]

"""A pipeline schedule: per op stage, order and async queue; per buffer multiplicity.

Produced by :func:`synth.model.solve.solve` (or :func:`schedule_from_pins` for a
fully pinned problem), consumed by :mod:`synth.lower`. ``check_schedule`` re-checks
a schedule without any solver.

Conventions (TVM's): in pipelined step ``j`` op ``i`` works on original iteration
``j - stage[i]``, so a producer in stage 0 runs ``s`` iterations ahead of a
consumer in stage ``s``. ``order[i]`` is op ``i``'s position in the
pipelined body.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Optional

from .bounds import MAX_STAGE
from .errors import Loc, SynthError
from .graph import Graph, describe
from .problem import Problem
from .readfile import load_json


@dataclass(frozen=True)
class Timing:
    """The latency model's static timing of the body (see README, "Latency model")."""

    ii: int
    """Cycles per pipelined step (initiation interval)."""
    offsets: tuple[int, ...]
    """Issue cycle of each op within its step, program order."""
    cycles: Optional[int]
    """Predicted cycles of the whole loop for the static trip count (None when symbolic)."""
    tail: int
    """``cycles = (T - 1) * ii + tail``."""


@dataclass(frozen=True)
class SolveInfo:
    status: str
    """OPTIMAL | FEASIBLE | PINNED"""
    objective: Optional[int]
    bound: Optional[int]
    """Best proven lower bound on the objective."""
    gap: float
    solve_time: float
    lower_bound: Optional[int] = None
    """Resource- and recurrence-constrained lower bound on the cycles."""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schedule:
    problem: str
    stage: tuple[int, ...]
    order: tuple[int, ...]
    is_async: tuple[bool, ...]
    """Whether each op runs asynchronously (its unit is async and its stage is async)."""
    queue: tuple[Optional[int], ...]
    """Async queue of each op (index of its unit among async units), None when sync."""
    multiplicity: tuple[tuple[str, int], ...]
    """(buffer, number of slots), problem order."""
    timing: Optional[Timing] = None
    info: Optional[SolveInfo] = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def max_stage(self) -> int:
        return max(self.stage) if self.stage else 0

    def mult(self, buffer: str) -> int:
        return dict(self.multiplicity)[buffer]

    @property
    def async_stages(self) -> tuple[int, ...]:
        return tuple(sorted({s for s, a in zip(self.stage, self.is_async) if a}))

    def body_order(self) -> list[int]:
        """Op indices in the order they appear in the pipelined body."""
        return sorted(range(len(self.order)), key=lambda i: self.order[i])


def multiplicity(problem: Problem, graph: Graph, stage: tuple[int, ...], order: tuple[int, ...],
                 is_async: tuple[bool, ...] | None = None) -> tuple[tuple[str, int], ...]:
    """Slots each buffer needs so that no write clobbers a version still to be read.

    For a RAW edge ``a -> b`` on buffer ``x`` with distance ``d``, version ``v``
    lives from ``a``'s write in step ``v + s_a`` to ``b``'s read in step
    ``v + d + s_b``; the writes of versions ``v+1 ..`` that happen before that read
    need their own slots: ``M = (s_b + d - s_a) + [order_b > order_a]``.  A reader
    that is itself async keeps reading until its group completes, so it gets one
    more slot (the lowering then needs no extra write-after-read wait in the
    steady state).  Carried buffers always have one slot.
    """
    is_async = is_async or tuple(False for _ in problem.ops)
    out = []
    for buf in problem.buffers:
        m = 1
        if not buf.carried:
            for e in graph.raw_edges(buf.name):
                lag = stage[e.dst] + e.distance - stage[e.src]
                need = lag + (1 if order[e.dst] > order[e.src] else 0)
                if is_async[e.dst]:
                    need += 1
                m = max(m, need)
        out.append((buf.name, m))
    return tuple(out)


def lift_stages(edges, stage: list[int], order: tuple[int, ...] | None = None) -> list[int]:
    """Raise stages (never lower them) until every edge holds: ``s_b >= s_a - d``, plus one
    when a pinned ``order`` puts ``b`` before ``a`` in the body (longest-path relaxation).

    ``edges`` are :class:`synth.graph.Edge` hard constraints; returns a new list.
    """
    stage = list(stage)
    for _ in range(len(stage) + 1):
        changed = False
        for e in edges:
            need = stage[e.src] - e.distance
            if order is not None and order[e.src] >= order[e.dst]:
                need += 1
            if stage[e.dst] < need:
                stage[e.dst], changed = need, True
        if not changed:
            break
    return stage


def same_step_order(edges, stage: list[int], pick=None) -> tuple[int, ...] | None:
    """A body order (``order[i]`` = position of op ``i``) that puts every producer before its
    consumers in the same pipelined step (edges whose lag ``s_b + d - s_a`` is 0).

    ``pick(ready)`` chooses the index of the next op among the ready ones (default: the
    lowest op index). None when those edges form a cycle.
    """
    n = len(stage)
    succ: dict[int, list[int]] = {a: [] for a in range(n)}
    indeg = [0] * n
    for e in edges:
        if e.src != e.dst and stage[e.dst] + e.distance - stage[e.src] == 0:
            succ[e.src].append(e.dst)
            indeg[e.dst] += 1
    ready = [a for a in range(n) if indeg[a] == 0]
    seq: list[int] = []
    while ready:
        a = ready.pop(pick(ready) if pick is not None else ready.index(min(ready)))
        seq.append(a)
        for b in succ[a]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if len(seq) != n:
        return None
    order = [0] * n
    for k, a in enumerate(seq):
        order[a] = k
    return tuple(order)


def buffer_bytes(problem: Problem, mult: tuple[tuple[str, int], ...], space: str) -> int:
    """Bytes of all ``space`` buffers at the given multiplicities."""
    m = dict(mult)
    return sum(b.bytes * m[b.name] for b in problem.buffers if b.space == space)


def check_schedule(problem: Problem, graph: Graph, sched: Schedule) -> list[str]:
    """Violations of dependences, capacities and pins, as readable strings (empty: valid).

    Solver-free: used to re-check every schedule the CP-SAT model returns.
    """
    errs: list[str] = []
    n = len(problem.ops)
    if len(sched.stage) != n or len(sched.order) != n:
        return [f"schedule has {len(sched.stage)} stages / {len(sched.order)} orders for {n} ops"]
    if sorted(sched.order) != list(range(n)):
        errs.append(f"order {list(sched.order)} is not a permutation")
    for e in graph.constraints():
        slack = sched.stage[e.dst] + e.distance - sched.stage[e.src]
        if slack < 0 or (slack == 0 and sched.order[e.src] >= sched.order[e.dst]):
            errs.append(f"{describe(problem, e)} broken by stage/order")
    want = multiplicity(problem, graph, sched.stage, sched.order, sched.is_async)
    for (b, m), (_, need) in zip(sched.multiplicity, want):
        if m < need:
            errs.append(f"buffer {b} has {m} slots but needs {need}")
    sh = buffer_bytes(problem, sched.multiplicity, "shared")
    if sh > problem.target.shared_bytes:
        errs.append(f"shared memory {sh} B exceeds {problem.target.shared_bytes} B")
    rg = problem.target.registers_bytes
    if rg is not None and buffer_bytes(problem, sched.multiplicity, "register") > rg:
        errs.append(f"register buffers exceed {rg} B")
    for i, op in enumerate(problem.ops):
        q = problem.queue_of_unit(op.unit)
        if sched.is_async[i] and q is None:
            errs.append(f"op {op.name} is async but unit {op.unit} is not")
        if sched.is_async[i] and sched.queue[i] != q:
            errs.append(f"op {op.name} is on queue {sched.queue[i]}, expected {q}")
    p = problem.pins
    if p.stage is not None and tuple(p.stage) != sched.stage:
        errs.append("pinned stages not respected")
    if p.order is not None and tuple(p.order) != sched.order:
        errs.append("pinned order not respected")
    if p.max_stage is not None and sched.max_stage > p.max_stage:
        errs.append(f"max_stage {p.max_stage} exceeded")
    if p.async_stages is not None:
        for i, op in enumerate(problem.ops):
            want_async = sched.stage[i] in p.async_stages and problem.queue_of_unit(op.unit) is not None
            if want_async != sched.is_async[i]:
                errs.append(f"op {op.name}: async_stages pin not respected")
    return errs


def schedule_from_pins(problem: Problem, graph: Graph) -> Schedule:
    """The schedule a fully pinned problem describes (``synth lower``), with TVM defaults.

    Order defaults to program order; ``async_stages`` defaults to none (all sync).
    Raises :class:`~synth.errors.SynthError` when stages are not pinned.
    """
    p = problem.pins
    if p.stage is None:
        raise SynthError(p.loc if p.loc.file != "<none>" else problem.loop.loc,
                         "'synth lower' needs a pinned schedule but schedule.stage is missing",
                         "add schedule: {stage: [...]} (one stage per op), or run 'synth solve'")
    stage = tuple(p.stage)
    order = tuple(p.order) if p.order is not None else tuple(range(len(problem.ops)))
    astages = set(p.async_stages or ())
    is_async = tuple(stage[i] in astages and problem.queue_of_unit(op.unit) is not None
                     for i, op in enumerate(problem.ops))
    queue = tuple(problem.queue_of_unit(op.unit) if a else None for op, a in zip(problem.ops, is_async))
    mult = multiplicity(problem, graph, stage, order, is_async)
    sched = Schedule(problem.name, stage, order, is_async, queue, mult,
                     info=SolveInfo("PINNED", None, None, 0.0, 0.0))
    return sched


def schedule_to_json(problem: Problem, sched: Schedule) -> dict:
    """The ``schedule.json`` document (docs/outputs.md)."""
    ops = []
    for i, op in enumerate(problem.ops):
        ops.append({"name": op.name, "unit": op.unit, "stage": sched.stage[i], "order": sched.order[i],
                    "async": sched.is_async[i], "queue": sched.queue[i],
                    "offset": sched.timing.offsets[i] if sched.timing else None})
    bufs = []
    for b in problem.buffers:
        m = sched.mult(b.name)
        bufs.append({"name": b.name, "space": b.space, "multiplicity": m, "bytes": m * b.bytes,
                     "bytes_per_slot": b.bytes})
    info = sched.info
    doc = {
        "problem": problem.name,
        "ops": ops,
        "buffers": bufs,
        "max_stage": sched.max_stage,
        "async_stages": list(sched.async_stages),
        "shared_bytes": buffer_bytes(problem, sched.multiplicity, "shared"),
        "register_bytes": buffer_bytes(problem, sched.multiplicity, "register"),
        "trip_count": problem.loop.trip_count,
        "ii": sched.timing.ii if sched.timing else None,
        "cycles": sched.timing.cycles if sched.timing else None,
        "cycles_formula": (f"({problem.loop.trip_count} - 1) * {sched.timing.ii} + {sched.timing.tail}"
                           if sched.timing else None),
        "status": info.status if info else None,
        "objective": info.objective if info else None,
        "bound": info.bound if info else None,
        "gap": info.gap if info else None,
        "lower_bound": info.lower_bound if info else None,
        "solve_time": round(info.solve_time, 4) if info else None,
        "tvm": {"software_pipeline_stage": list(sched.stage), "software_pipeline_order": list(sched.order),
                "software_pipeline_async_stages": list(sched.async_stages)},
    }
    return doc


def _field(d, key: str, kind, where: str, *, lo=None, hi=None, optional: bool = False):
    """``d[key]`` of JSON type ``kind`` (an int is never a bool) within ``lo .. hi``; ValueError naming
    ``where.key`` otherwise (KeyError when it is missing and not ``optional``)."""
    if not isinstance(d, dict):
        raise ValueError(f"{where} is {type(d).__name__}, not an object")
    if optional and d.get(key) is None:
        return None
    x = d[key]
    ok = isinstance(x, kind) and (kind is bool or not isinstance(x, bool))
    if not ok:
        raise ValueError(f"{where}.{key} is {x!r}, not {getattr(kind, '__name__', kind)}")
    if isinstance(x, (int, float)) and not isinstance(x, bool) and (
            (lo is not None and x < lo) or (hi is not None and x > hi)):
        raise ValueError(f"{where}.{key} is {x}, outside {lo} .. {hi}")
    return x


def schedule_from_json(problem: Problem, doc: dict) -> Schedule:
    """Inverse of :func:`schedule_to_json` (for ``synth emit`` / ``synth verify`` on an output folder).

    Every field read is type-checked, never coerced, and bounded (stages ``0 .. MAX_STAGE``, orders
    ``0 .. ops`` (that they are a permutation is :func:`check_schedule`'s), multiplicities ``1 .. MAX_STAGE + 1``, cycle counts ``0 .. 2**62``): ValueError
    (or KeyError) naming the JSON path otherwise, which the readers turn into a located SynthError."""
    big = 1 << 62
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list) or not isinstance(doc.get("buffers"), list):
        raise ValueError("schedule.json needs an object with lists 'ops' and 'buffers'")
    ops = {_field(o, "name", str, f"ops[{i}]"): o for i, o in enumerate(doc["ops"])}
    order_ops = [ops[o.name] for o in problem.ops]
    n = len(problem.ops)
    where = {o["name"]: f"ops[{i}]" for i, o in enumerate(doc["ops"])}
    stage = tuple(_field(o, "stage", int, where[o["name"]], lo=0, hi=MAX_STAGE) for o in order_ops)
    order = tuple(_field(o, "order", int, where[o["name"]], lo=0, hi=max(len(doc["ops"]), n)) for o in order_ops)
    is_async = tuple(_field(o, "async", bool, where[o["name"]]) for o in order_ops)
    queue = tuple(_field(o, "queue", int, where[o["name"]], lo=0, hi=MAX_STAGE, optional=True) for o in order_ops)
    mult = tuple((_field(b, "name", str, f"buffers[{i}]"),
                  _field(b, "multiplicity", int, f"buffers[{i}]", lo=1, hi=MAX_STAGE + 1))
                 for i, b in enumerate(doc["buffers"]))
    timing = None
    ii = _field(doc, "ii", int, "schedule", lo=1, hi=big, optional=True)
    if ii is not None:
        cyc = _field(doc, "cycles", int, "schedule", lo=0, hi=big, optional=True)
        tail = 0
        if cyc is not None:
            tail = cyc - (problem.loop.min_trip_count - 1) * ii
        timing = Timing(ii, tuple(_field(o, "offset", int, where[o["name"]], lo=0, hi=big, optional=True) or 0
                                  for o in order_ops), cyc, tail)
    num = (int, float)
    status = _field(doc, "status", str, "schedule", optional=True) or "PINNED"
    info = SolveInfo(status, _field(doc, "objective", num, "schedule", optional=True),
                     _field(doc, "bound", num, "schedule", optional=True),
                     _field(doc, "gap", num, "schedule", optional=True) or 0.0,
                     _field(doc, "solve_time", num, "schedule", optional=True) or 0.0,
                     _field(doc, "lower_bound", num, "schedule", optional=True))
    return Schedule(problem.name, stage, order, is_async, queue, mult, timing, info)


MAX_SCHEDULE_BYTES = 8 << 20
"""Size of a ``schedule.json`` read back (8 MiB; a thousand-op schedule is about 200 KiB)."""


def read_schedule_json(path: str) -> dict:
    """The JSON object of the ``schedule.json`` at ``path``, read with :func:`synth.readfile.load_json`:
    a regular file of at most :data:`MAX_SCHEDULE_BYTES`, nested at most
    :data:`synth.readfile.MAX_JSON_DEPTH` deep; anything else is a located SynthError (exit 2)."""
    doc = load_json(path, MAX_SCHEDULE_BYTES, "schedule.json")
    if not isinstance(doc, dict):
        raise SynthError(Loc(path, 1, 1), f"schedule.json holds {type(doc).__name__}, not an object",
                         "restore the schedule.json 'synth solve' wrote, or re-run 'synth solve'")
    return doc


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


__all__ = ["Schedule", "Timing", "SolveInfo", "multiplicity", "buffer_bytes", "check_schedule",
           "schedule_from_pins", "schedule_to_json", "schedule_from_json", "read_schedule_json", "MAX_SCHEDULE_BYTES",
           "asdict"]

"""The pipelined program: prologue / body / epilogue with commits and waits (docs/verification.md, "Semantics").

Produced by :func:`synth.lower.lower`, read by the verifier, the emitters and
``program.json``. The program is self-contained: ``synth verify program.json``
needs nothing else.

Execution semantics (what the verifier proves things about):

* The parts run in sequence, each a loop ``for i in range(extent)``. Global
  step ``j`` numbers the loop iterations of all parts together: the prologue's
  ``i`` is ``j``, the body's is ``j - P``, the epilogue's ``j - P - B`` (``P``, ``B``
  the prologue and body extents). An extent is an expression in the trip-count
  symbol, never negative: ``min(T, 3)`` and ``max(T - 3, 0)`` where the loop may be
  shorter than the pipeline (then ``P + B = T`` and the epilogue's guards test
  ``T``, e.g. ``3 <= i + T``).
* An ``op`` statement runs op ``op`` for original iteration ``iteration`` (an
  expression in the part's ``i``, always ``j - stage``) when its ``guard`` holds
  and the op's ``when`` predicate holds at that iteration.
* Async ops are issued at their statement; they belong to the group closed by
  the next ``commit`` statement with the same ``group`` id. A ``commit`` pushes a
  group onto queue ``queue`` when its guard holds and, if ``gate`` is non-empty,
  when the predicate of at least one op named in ``gate`` holds at its
  iteration (a conditional commit); otherwise the group is committed even when
  its ops were predicated off (an empty group, as CUTLASS does).
* A ``wait`` statement executes ``waits[wait]``: block until at most
  ``in_flight`` groups of its queue are still in flight. Groups complete in FIFO
  order, at any time after their commit.
* Reads name the version (original iteration) of the buffer they need and the
  op that produced it; ``slot`` is ``version % multiplicity``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Optional, Union

from .completion import (STMT_KINDS as BARRIER_STMT_KINDS, BARRIER_STMTS, BarrierRef, barrier_ref_from_json,
                         barrier_stmt_from_json, barrier_stmt_json)
from .expr import Expr, Num, parse, to_str

PARTS = ("prologue", "body", "epilogue")


@dataclass(frozen=True)
class Access:
    buffer: str
    version: Expr
    """Original loop iteration whose value is read or written, in the part's ``i``."""
    slot: Expr
    """``version % multiplicity`` as printed (``(i + 3) % 4``)."""
    producer: Optional[str] = None
    """For reads: the op that wrote this version."""


@dataclass(frozen=True)
class OpStmt:
    op: str
    iteration: Expr
    guard: Optional[Expr] = None
    group: Optional[int] = None
    """Commit group id (async ops only)."""
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()
    barrier: Optional[BarrierRef] = None
    """Barrier-phase completion (a TMA copy's ``complete_tx``), the other variant beside ``group``
    (:mod:`synth.completion`)."""
    kind: str = field(default="op", init=False)


@dataclass(frozen=True)
class CommitStmt:
    queue: int
    group: int
    guard: Optional[Expr] = None
    gate: tuple[str, ...] = ()
    """Ops whose predicates gate this commit (empty: committed unconditionally)."""
    kind: str = field(default="commit", init=False)


@dataclass(frozen=True)
class WaitStmt:
    wait: int
    """Index into :attr:`Program.waits`."""
    guard: Optional[Expr] = None
    kind: str = field(default="wait", init=False)


Stmt = Union[OpStmt, CommitStmt, WaitStmt]


@dataclass(frozen=True)
class Wait:
    part: str
    queue: int
    in_flight: Expr
    """An integer or an expression in the part's loop variable (and trip-count symbol)."""
    before: str
    """The op whose read this wait guards (first consumer after it)."""
    tight: Optional[bool] = None
    """Set by the verifier: ``in_flight + 1`` would be incorrect."""
    reason: str = ""
    """Why the count is what it is (and, when not tight, why)."""


@dataclass(frozen=True)
class Part:
    name: str
    var: str
    extent: Expr
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class ProgOp:
    """What the program needs to know of each op of the problem."""

    name: str
    unit: str
    stage: int
    is_async: bool
    queue: Optional[int]
    when: Optional[str]
    """``None``, ``"opaque"`` or a condition in the original loop var and trip symbol."""
    latency: int = 0


@dataclass(frozen=True)
class ProgBuffer:
    name: str
    space: str
    multiplicity: int
    bytes_per_slot: int


@dataclass(frozen=True)
class Program:
    name: str
    loop_var: str
    """The original loop variable (predicates are written in it)."""
    trip_count: Union[int, str]
    min_trip_count: int
    max_stage: int
    ops: tuple[ProgOp, ...]
    buffers: tuple[ProgBuffer, ...]
    queues: tuple[str, ...]
    """Unit name of each queue."""
    parts: tuple[Part, ...]
    waits: tuple[Wait, ...]
    notes: tuple[str, ...] = ()
    """Lowering decisions worth telling the user (predicate strategy, extra slots...)."""

    def op(self, name: str) -> ProgOp:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    def buffer(self, name: str) -> ProgBuffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(name)

    def commit_queue(self, op: str) -> Optional[int]:
        """Queue an async op's groups are committed to (its commit's queue, else the op's own)."""
        for p in self.parts:
            for k, s in enumerate(p.stmts):
                if isinstance(s, OpStmt) and s.op == op and s.group is not None:
                    for c in p.stmts[k + 1:]:
                        if isinstance(c, CommitStmt) and c.group == s.group:
                            return c.queue
        return self.op(op).queue

    def with_wait(self, index: int, **changes) -> "Program":
        """A copy with ``waits[index]`` changed (mutation tests, tightness checks)."""
        waits = list(self.waits)
        waits[index] = replace(waits[index], **changes)
        return replace(self, waits=tuple(waits))

    def without_wait(self, part: str, k: int) -> "Program":
        """A copy without the wait statement ``k`` of ``part`` and its ``waits`` entry, the later wait indices
        renumbered (mutants)."""
        idx = self.part(part).stmts[k].wait
        parts = []
        for pt in self.parts:
            stmts = [s for n, s in enumerate(pt.stmts) if not (pt.name == part and n == k)]
            stmts = [replace(s, wait=s.wait - 1) if isinstance(s, WaitStmt) and s.wait > idx else s for s in stmts]
            parts.append(replace(pt, stmts=tuple(stmts)))
        return replace(self, parts=tuple(parts), waits=self.waits[:idx] + self.waits[idx + 1:])

    def with_befores(self) -> "Program":
        """A copy whose waits' ``before`` is the op of the next op statement of their part, ``""`` when none
        follows (what the readers check; after statements are moved or removed)."""
        waits = list(self.waits)
        for pt in self.parts:
            for k, st in enumerate(pt.stmts):
                if isinstance(st, WaitStmt):
                    nxt = next((x.op for x in pt.stmts[k + 1:] if isinstance(x, OpStmt)), "")
                    waits[st.wait] = replace(waits[st.wait], before=nxt)
        return replace(self, waits=tuple(waits))


def _e(x: Optional[Expr]) -> Optional[str]:
    return None if x is None else to_str(x)


def _count(x: Expr) -> Union[int, str]:
    return x.value if isinstance(x, Num) else to_str(x)


def _access_json(a: Access) -> dict:
    d = {"buffer": a.buffer, "version": to_str(a.version), "slot": to_str(a.slot)}
    if a.producer is not None:
        d["producer"] = a.producer
    return d


def _stmt_json(s: Stmt) -> dict:
    if isinstance(s, OpStmt):
        d = {"kind": "op", "op": s.op, "iteration": to_str(s.iteration), "guard": _e(s.guard)}
        if s.group is not None:
            d["group"] = s.group
        d["reads"] = [_access_json(a) for a in s.reads]
        d["writes"] = [_access_json(a) for a in s.writes]
        if s.barrier is not None:
            d["barrier"] = s.barrier.to_json()
        return d
    if isinstance(s, BARRIER_STMTS):
        return barrier_stmt_json(s)
    if isinstance(s, CommitStmt):
        return {"kind": "commit", "queue": s.queue, "group": s.group, "guard": _e(s.guard), "gate": list(s.gate)}
    return {"kind": "wait", "wait": s.wait, "guard": _e(s.guard)}


def program_to_json(p: Program) -> dict:
    """The ``program.json`` document; ``waits`` is the program's list of waits."""
    return {
        "name": p.name,
        "loop": {"var": p.loop_var, "trip_count": p.trip_count, "min_trip_count": p.min_trip_count},
        "max_stage": p.max_stage,
        "ops": [{"name": o.name, "unit": o.unit, "stage": o.stage, "async": o.is_async, "queue": o.queue,
                 "when": o.when, "latency": o.latency} for o in p.ops],
        "buffers": [{"name": b.name, "space": b.space, "multiplicity": b.multiplicity,
                     "bytes_per_slot": b.bytes_per_slot} for b in p.buffers],
        "queues": [{"queue": q, "unit": u} for q, u in enumerate(p.queues)],
        "parts": [{"part": pt.name, "var": pt.var, "extent": _count(pt.extent),
                   "stmts": [_stmt_json(s) for s in pt.stmts]} for pt in p.parts],
        "waits": [{"part": w.part, "queue": w.queue, "in_flight": _count(w.in_flight), "before": w.before,
                   "tight": w.tight, "reason": w.reason} for w in p.waits],
        "notes": list(p.notes),
    }


def _typed(x, kind, where: str):
    """``x`` if it is of JSON type ``kind`` (int: not a bool), else ValueError: no coercion."""
    ok = isinstance(x, kind) and (kind is bool or not isinstance(x, bool))
    if not ok:
        raise ValueError(f"{where}: expected {getattr(kind, '__name__', kind)}, got {x!r}")
    return x


def _pe(x) -> Optional[Expr]:
    return None if x is None else parse(_typed(x, (str, int), "expression"))


def _access(d: dict) -> Access:
    prod = d.get("producer")
    return Access(_typed(d["buffer"], str, "buffer"), _pe(d["version"]), _pe(d["slot"]),
                  None if prod is None else _typed(prod, str, "producer"))


def _group(x) -> Optional[int]:
    return None if x is None else _typed(x, int, "group")


def _stmt(d: dict) -> Stmt:
    kind = d["kind"]
    if kind == "op":
        return OpStmt(_typed(d["op"], str, "op"), _pe(d["iteration"]), _pe(d.get("guard")), _group(d.get("group")),
                      tuple(_access(a) for a in d.get("reads", [])), tuple(_access(a) for a in d.get("writes", [])),
                      None if d.get("barrier") is None else barrier_ref_from_json(d["barrier"]))
    if kind in BARRIER_STMT_KINDS:
        return barrier_stmt_from_json(d)
    if kind == "commit":
        return CommitStmt(_typed(d["queue"], int, "queue"), _typed(d["group"], int, "group"), _pe(d.get("guard")),
                          tuple(_typed(g, str, "gate") for g in d.get("gate", [])))
    if kind == "wait":
        return WaitStmt(_typed(d["wait"], int, "wait"), _pe(d.get("guard")))
    raise ValueError(f"unknown statement kind {kind!r}")


MAX_IN_FLIGHT = 1 << 16
"""Largest constant ``in_flight`` of a wait read back (a wait keeps at most one group per k-tile in flight)."""


def _in_flight(x, n: int) -> Expr:
    """A wait's ``in_flight``: an expression, or a constant in ``0 .. MAX_IN_FLIGHT`` (ValueError naming
    ``waits[n].in_flight`` otherwise: a negative count has no meaning, and the emitter indexes with it)."""
    e = _pe(x)
    if isinstance(e, Num) and not 0 <= e.value <= MAX_IN_FLIGHT:
        raise ValueError(f"waits[{n}].in_flight is {e.value}: a wait keeps 0 .. {MAX_IN_FLIGHT} groups in flight")
    return e


def program_from_json(doc: dict) -> Program:
    """Inverse of :func:`program_to_json`. Types are checked, never coerced (``"0"`` is not 0, ``1.5``
    not 1). Raises KeyError/ValueError/ExprError on malformed input; :func:`synth.verify.load_program`
    validates the file first (JSON Schema, semantic checks) and reports errors with their location."""
    loop = doc["loop"]
    tc = loop["trip_count"]
    return Program(
        name=_typed(doc["name"], str, "name"), loop_var=_typed(loop["var"], str, "loop.var"),
        trip_count=_typed(tc, (str, int), "loop.trip_count"),
        min_trip_count=_typed(loop["min_trip_count"], int, "loop.min_trip_count"),
        max_stage=_typed(doc["max_stage"], int, "max_stage"),
        ops=tuple(ProgOp(_typed(o["name"], str, "ops.name"), _typed(o["unit"], str, "ops.unit"),
                         _typed(o["stage"], int, "ops.stage"), _typed(o["async"], bool, "ops.async"),
                         None if o.get("queue") is None else _typed(o["queue"], int, "ops.queue"),
                         None if o.get("when") is None else _typed(o["when"], str, "ops.when"),
                         _typed(o.get("latency", 0), int, "ops.latency")) for o in doc["ops"]),
        buffers=tuple(ProgBuffer(_typed(b["name"], str, "buffers.name"), _typed(b["space"], str, "buffers.space"),
                                 _typed(b["multiplicity"], int, "buffers.multiplicity"),
                                 _typed(b.get("bytes_per_slot", 0), int, "buffers.bytes_per_slot"))
                      for b in doc["buffers"]),
        queues=tuple(_typed(q["unit"], str, "queues.unit")
                     for q in sorted(doc["queues"], key=lambda q: _typed(q["queue"], int, "queues.queue"))),
        parts=tuple(Part(_typed(pt["part"], str, "parts.part"), _typed(pt.get("var", "i"), str, "parts.var"),
                         _pe(pt["extent"]), tuple(_stmt(s) for s in pt["stmts"])) for pt in doc["parts"]),
        waits=tuple(Wait(_typed(w["part"], str, "waits.part"), _typed(w["queue"], int, "waits.queue"),
                         _in_flight(w["in_flight"], n), _typed(w["before"], str, "waits.before"),
                         None if w.get("tight") is None else _typed(w["tight"], bool, "waits.tight"),
                         _typed(w.get("reason", ""), str, "waits.reason")) for n, w in enumerate(doc["waits"])),
        notes=tuple(_typed(n, str, "notes") for n in doc.get("notes", [])),
    )


def dumps(p: Program) -> str:
    return json.dumps(program_to_json(p), indent=2) + "\n"

"""The Hopper program: barriers, a setup, warp roles running concurrently, a teardown.

Each role is a :class:`~synth.program.Program` (prologue / body / epilogue in the form of
:mod:`synth.program`, its own wgmma queue and waits) whose parts also hold the barrier
statements of :mod:`synth.completion`; every warp group of the role runs it, on ``threads``
threads each: every thread runs every statement but the elected ones (an arrive marked
``elected``, a TMA copy), which one thread runs; the ops named ``collective`` (wgmma) and
``bar_sync`` statements are warp-group convergence points. Roles synchronize only through
barriers. ``setup`` runs on one thread before a CTA barrier (inits
and the init fence), ``teardown`` after one (invalidations). docs/hopper.md gives the
semantics and the ``program.json`` form (``"protocol": "mbarrier"``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Union

from ..completion import (ArriveStmt, BARRIER_KINDS, BARRIER_STMTS, BarSyncStmt, Barrier, InitStmt, InvalStmt,
                          barrier_stmt_from_json, barrier_stmt_json)
from ..errors import Loc, SynthError
from ..expr import ExprError, check_expr, free_vars, is_bool, parse, to_str
from ..program import CommitStmt, OpStmt, ProgBuffer, ProgOp, Program, WaitStmt, program_from_json, program_to_json
from ..readfile import load_json, read_regular_bytes
from ..trusted import solvers
from ..trusted.hopper import CLASSES, derive_hopper
from ..trusted.hopper_program import BOUNDS, HopperInputError, read_hopper_bytes

PROTOCOL = "mbarrier"


@dataclass(frozen=True)
class Role:
    name: str
    warpgroups: int
    """Warp groups running this role's program (each has its own wgmma FIFO; each arrives)."""
    program: Program
    threads: int = 1
    """Threads of each warp group that run the program: 1 (one elected thread runs every statement: the
    producer) or up to 128 (every thread runs the role's statements, but the elected ones)."""
    collective: tuple[str, ...] = ()
    """Ops this role issues as warp-group collectives (``wgmma.mma_async.sync.aligned``): every thread of
    the warp group executes each of their instances, a convergence point of the ``converge`` proof."""


@dataclass(frozen=True)
class HopperProgram:
    name: str
    loop_var: str
    trip_count: Union[int, str]
    min_trip_count: int
    ops: tuple[ProgOp, ...]
    buffers: tuple[ProgBuffer, ...]
    barriers: tuple[Barrier, ...]
    setup: tuple
    roles: tuple[Role, ...]
    teardown: tuple
    notes: tuple[str, ...] = ()

    def barrier(self, name: str) -> Barrier:
        for b in self.barriers:
            if b.name == name:
                return b
        raise KeyError(name)

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(name)

    def op(self, name: str) -> ProgOp:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    def with_role(self, name: str, program: Program) -> "HopperProgram":
        """A copy with role ``name``'s program replaced (mutants, tightness)."""
        from dataclasses import replace
        return replace(self, roles=tuple(replace(r, program=program) if r.name == name else r for r in self.roles))


def is_hopper_doc(doc) -> bool:
    """Whether a ``program.json`` document is a Hopper program."""
    return isinstance(doc, dict) and doc.get("protocol") == PROTOCOL


def hopper_to_json(p: HopperProgram) -> dict:
    roles = []
    for r in p.roles:
        d = program_to_json(r.program)
        roles.append({"role": r.name, "warpgroups": r.warpgroups, "threads": r.threads,
                      "collective": list(r.collective), "queues": d["queues"], "parts": d["parts"],
                      "waits": d["waits"]})
    return {
        "protocol": PROTOCOL,
        "name": p.name,
        "loop": {"var": p.loop_var, "trip_count": p.trip_count, "min_trip_count": p.min_trip_count},
        "ops": [{"name": o.name, "unit": o.unit, "stage": o.stage, "async": o.is_async, "queue": o.queue,
                 "when": o.when, "latency": o.latency} for o in p.ops],
        "buffers": [{"name": b.name, "space": b.space, "multiplicity": b.multiplicity,
                     "bytes_per_slot": b.bytes_per_slot} for b in p.buffers],
        "barriers": [b.to_json() for b in p.barriers],
        "setup": [barrier_stmt_json(s) for s in p.setup],
        "roles": roles,
        "teardown": [barrier_stmt_json(s) for s in p.teardown],
        "notes": list(p.notes),
    }


def _int(x, where: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise ValueError(f"{where}: expected an integer, got {x!r}")
    return x


def hopper_from_json(doc: dict) -> HopperProgram:
    """Inverse of :func:`hopper_to_json`; KeyError/ValueError on malformed input (types never coerced)."""
    if not is_hopper_doc(doc):
        raise ValueError(f"protocol: expected {PROTOCOL!r}")
    base = {"name": doc["name"], "loop": doc["loop"], "ops": doc["ops"], "buffers": doc["buffers"]}
    roles = []
    for r in doc["roles"]:
        prog = program_from_json(dict(base, name=f"{doc['name']}.{r['role']}", max_stage=0, queues=r["queues"],
                                      parts=r["parts"], waits=r["waits"]))
        wg = _int(r["warpgroups"], "roles.warpgroups")
        if not 1 <= wg <= BOUNDS["warpgroups"][1]:
            raise ValueError(f"roles.warpgroups: {wg} is outside 1..{BOUNDS['warpgroups'][1]}")
        th = _int(r["threads"], "roles.threads")
        if not 1 <= th <= BOUNDS["threads"][1]:
            raise ValueError(f"roles.threads: {th} is outside 1..{BOUNDS['threads'][1]}")
        coll = r["collective"]
        if not isinstance(coll, list) or not all(isinstance(c, str) for c in coll):
            raise ValueError("roles.collective: expected a list of op names")
        roles.append(Role(str(r["role"]), wg, prog, th, tuple(coll)))
    shell = program_from_json(dict(base, max_stage=0, queues=[], parts=[], waits=[]))
    barriers = []
    for b in doc["barriers"]:
        kind = b["kind"]
        if kind not in BARRIER_KINDS:
            raise ValueError(f"barriers.kind: expected one of {BARRIER_KINDS}, got {kind!r}")
        guards = b.get("guards", [])
        if not isinstance(guards, list) or not all(isinstance(g, str) for g in guards):
            raise ValueError("barriers.guards: expected a list of buffer names")
        slots, count = _int(b["slots"], "barriers.slots"), _int(b["count"], "barriers.count")
        if not 1 <= slots <= BOUNDS["slots"][1] or not 1 <= count <= BOUNDS["count"][1]:
            raise ValueError(f"barriers: slots {slots} and count {count} must be in 1..{BOUNDS['slots'][1]} and "
                             f"1..{BOUNDS['count'][1]}")
        barriers.append(Barrier(str(b["name"]), slots, count, kind, tuple(guards)))
    return HopperProgram(shell.name, shell.loop_var, shell.trip_count, shell.min_trip_count, shell.ops, shell.buffers,
                         tuple(barriers), tuple(barrier_stmt_from_json(s) for s in doc.get("setup", [])),
                         tuple(roles), tuple(barrier_stmt_from_json(s) for s in doc.get("teardown", [])),
                         tuple(str(n) for n in doc.get("notes", [])))


def dumps(p: HopperProgram) -> str:
    return json.dumps(hopper_to_json(p), indent=2) + "\n"


class HopperError(ValueError):
    """A malformed Hopper program: ``path`` says where."""

    def __init__(self, path: str, msg: str, fix: str) -> None:
        super().__init__(f"{path}: {msg}")
        self.path, self.msg, self.fix = path, msg, fix


def _expr(path: str, e, allowed: set, want_bool: bool) -> None:
    if isinstance(e, (str, int)):
        try:
            e = parse(e)
        except ExprError as err:
            raise HopperError(path, f"bad expression {e!r}: {err}", "use C syntax: i + 3, 1 <= i") from None
    why = check_expr(e)
    if why is not None:
        raise HopperError(path, f"{to_str(e)!r}: {why}", "use C syntax with constant positive divisors: i % 4")
    extra = free_vars(e) - allowed
    if extra:
        raise HopperError(path, f"{to_str(e)!r} uses unknown name(s) {', '.join(sorted(extra))}",
                          f"only {', '.join(sorted(allowed)) or 'constants'} may appear here")
    if is_bool(e) != want_bool:
        raise HopperError(path, f"{to_str(e)!r} is {'an integer' if want_bool else 'a condition'}",
                          "write a condition such as 1 <= i" if want_bool else "write an integer expression")


def validate_hopper(p: HopperProgram, *, zero_trips: bool = False) -> None:
    """Raise :class:`HopperError` on names the verifier cannot resolve, malformed expressions
    (names outside the part's variable and the trip symbol, conditions where integers belong,
    division by anything but a positive constant) or counts out of range. Trip counts start at 1;
    ``zero_trips`` (a program whose loop may run zero times: the attention program, ``n >= 0``) lets a
    symbolic trip count start at 0."""
    tsym = {p.trip_count} if isinstance(p.trip_count, str) else set()
    least = 0 if zero_trips and tsym else 1
    if isinstance(p.trip_count, int) and p.trip_count < 1 or p.min_trip_count < least:
        raise HopperError("loop", f"trip counts start at {least}", f"use min_trip_count >= {least}")
    for o in p.ops:
        if o.when not in (None, "opaque"):
            _expr(f"ops[{o.name}].when", o.when, {p.loop_var} | tsym, True)
    bars = {b.name: b for b in p.barriers}
    if len(bars) != len(p.barriers):
        raise HopperError("barriers", "duplicate barrier names", "give every barrier a distinct name")
    bufs = {b.name for b in p.buffers}
    ops = {o.name for o in p.ops}
    for b in p.barriers:
        if b.slots < 1 or b.count < 1:
            raise HopperError(f"barriers[{b.name}]", f"slots {b.slots} and count {b.count} must be >= 1",
                              "use slots >= 1 and an init count >= 1")
        for g in b.guards:
            if g not in bufs:
                raise HopperError(f"barriers[{b.name}].guards", f"unknown buffer {g!r}", "name a buffer")
    if not p.roles or len({r.name for r in p.roles}) != len(p.roles):
        raise HopperError("roles", "roles must be non-empty and distinctly named", "name each role once")

    def check(stmt, where: str) -> None:
        name = getattr(stmt, "barrier", None)
        if isinstance(stmt, OpStmt):
            name = stmt.barrier.barrier if stmt.barrier is not None else None
        if isinstance(name, str) and name not in bars:
            raise HopperError(where, f"unknown barrier {name!r}", "declare it in \"barriers\"")
        if isinstance(stmt, ArriveStmt):
            for t in stmt.tx:
                if t.gate is not None and t.gate not in ops:
                    raise HopperError(where, f"tx gate {t.gate!r} is not an op", "name the TMA op whose bytes it is")
    for k, s in enumerate(p.setup):
        check(s, f"setup[{k}]")
    for k, s in enumerate(p.teardown):
        check(s, f"teardown[{k}]")
    bufs_all = {b.name: b for b in p.buffers}
    opnames = {o.name: o for o in p.ops}
    for r in p.roles:
        if not 1 <= r.warpgroups <= 4:
            raise HopperError(f"roles[{r.name}].warpgroups", "a role has 1 to 4 warp groups", "use 1")
        if not 1 <= r.threads <= BOUNDS["threads"][1]:
            raise HopperError(f"roles[{r.name}].threads", f"{r.threads} threads per warp group",
                              f"use 1 (one elected thread) to {BOUNDS['threads'][1]} (the warp group)")
        for c in r.collective:
            o = opnames.get(c)
            if o is None or not o.is_async or o.queue is None or o.unit != "wgmma":
                raise HopperError(f"roles[{r.name}].collective", f"{c!r} is not a wgmma op (async, with a queue, "
                                  "unit wgmma)", "list only wgmma ops: a warp-group collective is a "
                                  "wgmma.mma_async.sync.aligned; converge the threads of other code with bar_sync")
        if len(set(r.collective)) != len(r.collective):
            raise HopperError(f"roles[{r.name}].collective", "an op listed twice", "list each op once")
        if r.threads == 1 and r.collective:
            raise HopperError(f"roles[{r.name}].collective", "a collective in a role of one thread",
                              "set threads to 128: a wgmma is executed by every thread of its warp group")
        prog = r.program
        names = [pt.name for pt in prog.parts]
        if len(set(names)) != len(names) or any(n not in ("prologue", "body", "epilogue") for n in names):
            raise HopperError(f"roles[{r.name}].parts", f"parts must be distinct among prologue, body, epilogue, "
                              f"got {names}", "name the parts prologue, body, epilogue")
        seen: set = set()
        for pt in prog.parts:
            _expr(f"roles[{r.name}].parts[{pt.name}].extent", pt.extent, tsym, False)
            allowed = {pt.var} | tsym
            for k, s in enumerate(pt.stmts):
                where = f"roles[{r.name}].parts[{pt.name}].stmts[{k}]"
                if isinstance(s, (InitStmt, InvalStmt)):
                    # the prover's obligations place a barrier's life between setup and teardown; one
                    # initialized or invalidated while warp groups run is outside what it proves
                    raise HopperError(where, f"mbarrier.{s.kind} inside a role: synth proves barriers "
                                      "initialized in \"setup\" and invalidated in \"teardown\" only",
                                      f"move the {s.kind} of {s.barrier} to \"{'setup' if s.kind == 'init' else 'teardown'}\"")
                if getattr(s, "kind", None) == "cluster_sync":
                    raise HopperError(where, "a cluster barrier inside a role: synth proves cluster barriers in "
                                      "\"setup\" and \"teardown\" only", "move it to \"setup\" or \"teardown\"")
                check(s, where)
                if isinstance(s, ArriveStmt) and r.threads > 1 and not s.elected:
                    raise HopperError(f"{where}.elected", f"an arrive by each of the {r.threads} threads of a warp "
                                      "group: synth counts one arrival per warp group", "mark it \"elected\": true "
                                      "(one thread arrives, as the kernel's if (wt == 0))")
                if isinstance(s, BarSyncStmt):
                    if r.threads == 1:
                        raise HopperError(where, "bar_sync in a role of one thread converges nothing",
                                          "remove it, or give the role its warp group's threads")
                    if s.id + r.warpgroups - 1 > BOUNDS["bar_id"][1]:
                        raise HopperError(f"{where}.id", f"named barriers {s.id} .. {s.id + r.warpgroups - 1} (one "
                                          f"per warp group) exceed {BOUNDS['bar_id'][1]}", "use a smaller id")
                if s.guard is not None:
                    _expr(f"{where}.guard", s.guard, allowed, True)
                if isinstance(s, BARRIER_STMTS) and hasattr(s, "state"):
                    _expr(f"{where}.state.count", s.state.count, allowed, False)
                if isinstance(s, OpStmt):
                    if s.op not in opnames:
                        raise HopperError(f"{where}.op", f"unknown op {s.op!r}", "use an op listed in \"ops\"")
                    _expr(f"{where}.iteration", s.iteration, allowed, False)
                    if s.barrier is not None:
                        _expr(f"{where}.barrier.state.count", s.barrier.state.count, allowed, False)
                    for kind, accs in (("reads", s.reads), ("writes", s.writes)):
                        for a, acc in enumerate(accs):
                            if acc.buffer not in bufs_all:
                                raise HopperError(f"{where}.{kind}[{a}].buffer", f"unknown buffer {acc.buffer!r}",
                                                  "use a buffer listed in \"buffers\"")
                            if acc.producer is not None and acc.producer not in opnames:
                                raise HopperError(f"{where}.{kind}[{a}].producer",
                                                  f"unknown producer {acc.producer!r}", "name an op")
                            _expr(f"{where}.{kind}[{a}].version", acc.version, allowed, False)
                            _expr(f"{where}.{kind}[{a}].slot", acc.slot, allowed, False)
                    if opnames[s.op].is_async and s.barrier is None and s.group is None:
                        raise HopperError(f"{where}.group", f"async op {s.op} has neither a group nor a barrier",
                                          "give a wgmma a commit group or a TMA its barrier")
                elif isinstance(s, CommitStmt):
                    if any(g not in opnames for g in s.gate):
                        raise HopperError(f"{where}.gate", "a gate names an unknown op", "name ops of this group")
                    if not 0 <= s.queue < len(prog.queues):
                        raise HopperError(f"{where}.queue", f"commit to unknown queue {s.queue}",
                                          f"use a queue in 0..{len(prog.queues) - 1}")
                elif isinstance(s, WaitStmt):
                    if not 0 <= s.wait < len(prog.waits) or s.wait in seen:
                        raise HopperError(f"{where}.wait", f"wait index {s.wait} out of range or used twice",
                                          "give each wait_group statement its own entry in \"waits\"")
                    seen.add(s.wait)
                    w = prog.waits[s.wait]
                    if w.part != pt.name or not 0 <= w.queue < len(prog.queues):
                        raise HopperError(f"roles[{r.name}].waits[{s.wait}]", "part or queue does not match its "
                                          "statement", f"set part {pt.name!r} and a queue in range")
                    _expr(f"roles[{r.name}].waits[{s.wait}].in_flight", w.in_flight, allowed, False)
        if len(seen) != len(prog.waits):
            raise HopperError(f"roles[{r.name}].waits", "a wait has no wait_group statement",
                              "remove the entry or add its statement")


MAX_BYTES = 256 * 1024
"""Largest program.json read (as the problem loader's bound)."""
FORM_CLASSES = ("wellformed", "coverage")
"""The trusted checker's obligation classes that :func:`load_hopper` asks before building the program:
every derived field (state counts, versions, slots, iterations) is what it derives from, and each
iteration of each op runs exactly once."""
FORM_TIMEOUT_S = 20.0
"""Z3's time per well-formedness obligation at load time."""


def _file(path: str) -> str:
    return os.path.join(path, "program.json") if os.path.isdir(path) else path


def is_hopper_file(path: str) -> bool:
    """Whether ``path`` (program.json or its folder) holds a Hopper program (False when unreadable,
    not a regular file, or larger than :data:`MAX_BYTES`; never blocks on a FIFO)."""
    try:
        return is_hopper_doc(load_json(_file(path), MAX_BYTES, "program.json"))
    except SynthError:  # load_json reports every failure (open, read, decode, parse) as one
        return False


def load_hopper(path: str, *, check_form: bool = True, zero_trips: bool = False) -> HopperProgram:
    """Read a Hopper ``program.json`` (or its folder); errors are :class:`~synth.errors.SynthError` (exit 2).

    The file must be a regular file of at most :data:`MAX_BYTES`; it is read by the trusted
    reader (:func:`synth.trusted.hopper_program.read_hopper_bytes`: exact keys, types without
    coercion, every number within its bound, names resolved, expressions parsed), then the
    trusted checker's :data:`FORM_CLASSES` obligations are asked of Z3 (``check_form``): a slot
    that is not ``version % slots``, a version or state count that is not the step plus a
    constant, a write of a version other than its op's iteration, an iteration that skips,
    repeats or invents one, is refused naming the obligation, before synth's prover believes any
    of these fields.

    Trip counts start at 1 (``min_trip_count`` 0 is refused); ``zero_trips`` is for a caller that knows the
    program's loop may run zero times (:func:`synth.flow.ws.load_ws_output`: the attention program of a
    warp-specialized body's folder, ``n >= 0`` KV blocks), and lets a symbolic trip count start at 0."""
    f = _file(path)
    data = read_regular_bytes(f, MAX_BYTES, "program.json", fix="pass program.json or its output folder")
    try:
        checked = read_hopper_bytes(data, zero_trips=zero_trips)
    except HopperInputError as e:
        raise SynthError(Loc(f), f"{e.path + ': ' if e.path else ''}{e.msg}", e.fix) from None
    try:
        p = hopper_from_json(json.loads(data))
        validate_hopper(p, zero_trips=zero_trips)
    except HopperError as e:
        raise SynthError(Loc(f), f"{e.path}: {e.msg}", e.fix) from None
    except (KeyError, ValueError, TypeError, AttributeError, ExprError, RecursionError) as e:
        raise SynthError(Loc(f), f"malformed Hopper program: {e!s}",
                         "compare with the program.json form in docs/hopper.md") from None
    if check_form:
        _check_form(checked, f)
    return p


def _check_form(checked, f: str) -> None:
    kinds = tuple(k for k in FORM_CLASSES if k in CLASSES)
    try:
        obs = derive_hopper(checked, kinds=kinds)
    except (ValueError, RecursionError) as e:
        raise SynthError(Loc(f), f"program outside the checker's bounds: {e}",
                         "use fewer statements or stages (docs/bounds.md)") from None
    for ob in obs:
        answer = solvers.z3_answer(ob.smt2, FORM_TIMEOUT_S)
        if answer != "unsat":
            why = "a trip count where it fails exists" if answer == "sat" else f"Z3: {answer}"
            raise SynthError(Loc(f), f"{ob.id}: not so: {ob.description} ({why})",
                             "program.json must run each iteration of each op once, with state counts, versions "
                             "and slots derived from its step (slot = version % slots); regenerate it with "
                             "'synth solve'")


__all__ = ["load_hopper", "is_hopper_file", "Role", "HopperProgram", "hopper_to_json", "hopper_from_json", "is_hopper_doc", "dumps",
           "validate_hopper", "HopperError", "PROTOCOL"]

"""The importers' common form of a pipelined loop, and its mapping onto synth's Program.

Every front-end (:mod:`~synth.frontends.ttgir`, :mod:`~synth.frontends.tvm`,
:mod:`~synth.frontends.mlir`) reduces its input to a :class:`Loop`: the events
(async writes, commits, waits, reads of multi-buffered slots) of the straight-line
code before the loop, of one iteration of the loop, and of the straight-line code
after it. :func:`to_program` maps that onto a :class:`~synth.program.Program`, which
:func:`synth.verify.verify_program` proves. docs/check.md states the rules; in short:

* **Slots.** A body access's slot must be ``(k + c) % M`` (``k`` the body's 0-based
  iteration, ``M`` the buffer's slot count), proven with Z3 for every ``k``; an
  epilogue access's slot ``(B + d) % M`` (``B`` the body's trip count) for every
  trip count. Anything else is outside the model (exit 2).
* **Versions.** The ``n``-th write of a buffer (program order, counting from 0 in
  the prologue) is version ``n`` and must land in slot ``n % M``. A read's version
  is that of the *last write to its slot before it in program order*: the value the
  loop would read if every copy were synchronous. So "proven" means the async loop
  reads exactly what its synchronous version reads; whether that version is the
  right computation is the pipeliner's business, not this check's.
* **Steps and stages.** The body's iteration ``k`` is step ``P + k``; each op's stage
  is its step minus the version it touches (writers: ``P - (prologue writes)``), and
  each straight-line statement is placed at the step its version and stage give.
  The placement must keep the source order (else exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Union

import z3

from ..errors import Loc, SynthError
from ..expr import Bin, Expr, Num, Var, free_vars, parse, simplify, substitute, to_str, to_z3
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt

KINDS = ("write", "read", "commit", "wait")


@dataclass(frozen=True)
class Event:
    """One statement of the source loop that matters to the waits.

    ``key`` names the source op across parts (the prologue's copies of the body's
    copy share its key); ``slot`` is an int in straight-line code, an expression in
    ``k`` (body) or the trip symbol (epilogue); ``guard`` a condition in the same
    names (None: always); ``count`` a wait's in-flight count."""

    kind: str
    key: str = ""
    buffer: str = ""
    slot: Union[int, Expr, None] = None
    is_async: bool = False
    queue: int = 0
    count: Union[int, Expr, None] = None
    guard: Optional[Expr] = None
    line: int = 0
    text: str = ""
    """The source statement, for reports."""
    reads: tuple = ()
    """For an async write: the ``(buffer, slot)`` pairs the same op reads (an async stage fed by another)."""


@dataclass(frozen=True)
class Loop:
    """A pipelined loop as a front-end read it."""

    name: str
    path: str
    buffers: dict
    """Buffer name -> slot count."""
    prologue: tuple[Event, ...]
    body: tuple[Event, ...]
    epilogue: tuple[Event, ...]
    body_extent: Expr
    """The body's trip count: an int, or an expression in ``trip_symbol``."""
    trip_symbol: Optional[str] = None
    min_trip: int = 1
    """Smallest trip count the input allows (the user may raise it)."""
    queues: tuple[str, ...] = ("cp.async",)
    source: str = ""
    """"triton", "tvm" or "mlir"."""
    body_line: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceMap:
    """Where each synth op and wait of the mapped program comes from."""

    ops: dict = field(default_factory=dict)
    """Op name -> list of (part, line, source text)."""
    waits: tuple = ()
    """Per wait index: (line, source text)."""


def _err(loop: Loop, line: int, msg: str, fix: str) -> SynthError:
    return SynthError(Loc(loop.path, line, 1 if line else 0), msg, fix)


K = "k"


def _prove(claim, facts, loop: Loop, line: int, what: str) -> None:
    s = z3.Solver()
    s.set("timeout", 10000)
    s.add(*facts)
    s.add(z3.Not(claim))
    r = s.check()
    if r == z3.unsat:
        return
    detail = ""
    if r == z3.sat:
        # Only the integer constants: a model may also interpret div/mod by zero with huge terms.
        m = s.model()
        vals = [f"{d.name()} = {m[d]}" for d in sorted(m.decls(), key=lambda d: d.name())
                if d.arity() == 0 and z3.is_int_value(m[d])]
        detail = f" (fails at {', '.join(vals)})" if vals else ""
    raise _err(loop, line, f"{what} is outside the model{detail}",
               "only rotating multi-buffers are supported: slot (k + c) % M in the loop, (B + d) % M after it")


def _valid(claim, facts) -> bool:
    s = z3.Solver()
    s.set("timeout", 5000)
    s.add(*facts)
    s.add(z3.Not(claim))
    return s.check() == z3.unsat


def _z3env(loop: Loop):
    env = {K: z3.Int(K)}
    if loop.trip_symbol:
        env[loop.trip_symbol] = z3.Int(loop.trip_symbol)
    return env


def _facts(loop: Loop, env, min_trip: int, body: bool):
    f = []
    if loop.trip_symbol:
        f.append(env[loop.trip_symbol] >= min_trip)
    if body:
        B = to_z3(loop.body_extent, env)
        f += [env[K] >= 0, env[K] < B]
    return f


def _value_at(e: Union[int, Expr], binding: dict) -> Optional[int]:
    if isinstance(e, int):
        return e
    v = substitute(e, {n: Num(x) for n, x in binding.items()})
    return v.value if isinstance(v, Num) else None


def _body_offset(loop: Loop, ev: Event, m: int, min_trip: int) -> int:
    """``c`` with ``slot == (k + c) % m`` for every body iteration (proven)."""
    slot = ev.slot if not isinstance(ev.slot, int) else Num(ev.slot)
    bind = {K: 0}
    if loop.trip_symbol:
        bind[loop.trip_symbol] = min_trip
    c0 = _value_at(slot, bind)
    if c0 is None or (loop.trip_symbol and loop.trip_symbol in free_vars(slot)):
        raise _err(loop, ev.line, f"slot index {to_str(slot)} of {ev.text or ev.key} depends on the trip count",
                   "only slots (k + c) % M are supported in the loop body")
    c = c0 % m
    env = _z3env(loop)
    _prove(to_z3(slot, env) == (env[K] + c) % m, _facts(loop, env, min_trip, True), loop, ev.line,
           f"slot index {to_str(slot)} of {ev.text or ev.key} (not (k + {c}) % {m})")
    return c


def _epilogue_offset(loop: Loop, ev: Event, m: int, min_trip: int) -> int:
    """``d`` with ``slot == (B + d) % m`` for every allowed trip count (proven)."""
    slot = ev.slot if not isinstance(ev.slot, int) else Num(ev.slot)
    env = _z3env(loop)
    B = to_z3(loop.body_extent, env)
    bind = {loop.trip_symbol: min_trip} if loop.trip_symbol else {}
    s0 = _value_at(slot, bind)
    b0 = _value_at(loop.body_extent, bind)
    if s0 is None or b0 is None:
        raise _err(loop, ev.line, f"slot index {to_str(slot)} of {ev.text or ev.key} is not a function of the "
                   "trip count", "only slots (B + d) % M are supported after the loop")
    d = (s0 - b0) % m
    _prove(to_z3(slot, env) == (B + d) % m, _facts(loop, env, min_trip, False), loop, ev.line,
           f"slot index {to_str(slot)} of {ev.text or ev.key} (not (B + {d}) % {m}, B the body's trip count)")
    return d


def _last_version(e: int, d: int, m: int) -> int:
    """Offset ``a``: the largest ``v = x + a <= x + e`` with ``v % m == (x + d) % m``."""
    return e - ((e - d) % m)


def to_program(loop: Loop, min_trip: Optional[int] = None, trip_count: Optional[int] = None
               ) -> tuple[Program, SourceMap]:
    """Map ``loop`` onto a Program (rules: module docstring, docs/check.md).

    ``trip_count`` fixes the trip symbol; ``min_trip`` raises its lower bound.
    Raises SynthError (exit 2) for whatever the model cannot express."""
    if trip_count is not None and loop.trip_symbol is not None:
        loop = _fix_trip(loop, trip_count)
    elif trip_count is not None:
        b = _value_at(loop.body_extent, {})
        if b != trip_count:
            raise _err(loop, loop.body_line, f"--trip-count {trip_count}, but this loop's body runs {b} times, "
                       "fixed in the IR", "drop --trip-count (or pass the IR of a loop with a symbolic bound)")
    mt = max(loop.min_trip, min_trip or 0)
    bufs = dict(loop.buffers)
    # ---- which buffers matter: those written by an async op --------------------------------
    written = {e.buffer for e in loop.prologue + loop.body + loop.epilogue if e.kind == "write" and e.is_async}
    for e in loop.prologue + loop.body + loop.epilogue:
        if e.kind == "write" and e.buffer in written and not e.is_async:
            raise _err(loop, e.line, f"buffer {e.buffer} is written both by async copies and synchronously "
                       f"({e.text})", "only buffers filled by async copies alone are supported")
    genv0 = _z3env(loop)
    for part, evs, body in (("before", loop.prologue, False), ("in", loop.body, True), ("after", loop.epilogue, False)):
        for e in evs:
            if e.kind == "write" and e.buffer in written and e.guard is not None and not _valid(
                    to_z3(e.guard, genv0), _facts(loop, genv0, max(loop.min_trip, min_trip or 0), body)):
                raise _err(loop, e.line, f"{e.text or e.key} {part} the loop runs only when {to_str(e.guard)}",
                           "a predicated-off copy changes which write a slot holds last; copies predicated by "
                           "a condition (not by a zero-filling mask) are outside the model")
    # ---- body writers: one version per step, slot (k + c) % M ---------------------------
    body_c: dict[str, int] = {}
    writers: dict[str, list[str]] = {}
    for e in loop.body:
        if e.kind == "write" and e.buffer in written:
            c = _body_offset(loop, e, bufs[e.buffer], mt)
            if e.buffer in body_c and body_c[e.buffer] != c:
                raise _err(loop, e.line, f"buffer {e.buffer} is written in two slots per iteration",
                           "one slot per buffer per iteration is supported")
            body_c[e.buffer] = c
            if e.key in writers.get(e.buffer, []):
                raise _err(loop, e.line, f"{e.text or e.key} writes {e.buffer} twice per iteration",
                           "one write per op per iteration is supported")
            writers.setdefault(e.buffer, []).append(e.key)
    for b in written:
        if b not in body_c:
            raise _err(loop, loop.body_line, f"buffer {b} is written by async copies only outside the loop",
                       "only loops that refill their buffers each iteration are supported")
    # ---- prologue writes: n-th write -> slot n % M ----------------------------------------
    pro_count: dict[str, int] = {}
    pro_w: dict[tuple[str, str], int] = {}
    for e in loop.prologue:
        if e.kind == "write" and e.buffer in written:
            if e.key not in writers[e.buffer]:
                raise _err(loop, e.line, f"{e.text or e.key} writes {e.buffer} before the loop but no copy in the "
                           "loop matches it", "the prologue must hold copies of the loop's own copies")
            n = pro_w.get((e.buffer, e.key), 0)
            m = bufs[e.buffer]
            if e.slot != n % m:
                raise _err(loop, e.line, f"{e.text or e.key}: write #{n} of {e.buffer} before the loop goes to "
                           f"slot {e.slot}, not {n % m}", "the buffer must rotate: write n lands in slot n % M")
            pro_w[(e.buffer, e.key)] = n + 1
    for b in written:
        counts = {pro_w.get((b, w), 0) for w in writers[b]}
        if len(counts) != 1:
            raise _err(loop, loop.body_line, f"the copies into {b} are peeled a different number of times",
                       "every copy of a buffer must run once per pipeline step")
        pro_count[b] = counts.pop()
        m = bufs[b]
        if body_c[b] != pro_count[b] % m:
            raise _err(loop, loop.body_line, f"buffer {b}: the loop's first write goes to slot {body_c[b]}, but "
                       f"{pro_count[b]} writes came before it (slot {pro_count[b] % m} expected)",
                       "the buffer must rotate: write n lands in slot n % M")
    P = max(pro_count.values(), default=0)
    stage: dict[str, int] = {}
    buffer_of: dict[str, str] = {}
    for b in written:
        for w in writers[b]:
            stage[w] = P - pro_count[b]
            buffer_of[w] = b
    # ---- body reads: version k + a ------------------------------------------------------
    body_read_a: list[Optional[int]] = []
    for pos, e in enumerate(loop.body):
        if e.kind != "read" or e.buffer not in written:
            body_read_a.append(None)
            continue
        m = bufs[e.buffer]
        d = _body_offset(loop, e, m, mt)
        before = any(x.kind == "write" and x.buffer == e.buffer for x in loop.body[:pos])
        top = pro_count[e.buffer] - (0 if before else 1)
        body_read_a.append(_last_version(top, d, m))
    def body_version(pos: int, ev: Event, buffer: str, slot) -> int:
        m = bufs[buffer]
        d = _body_offset(loop, Event("read", ev.key, buffer, slot, line=ev.line, text=ev.text), m, mt)
        before = any(x.kind == "write" and x.buffer == buffer for x in loop.body[:pos])
        return _last_version(pro_count[buffer] - (0 if before else 1), d, m)

    def pro_version(pos: int, buffer: str, slot: int) -> int:
        m = bufs[buffer]
        done = [x for x in loop.prologue[:pos] if x.kind == "write" and x.buffer == buffer]
        per_writer = len(done) // max(1, len(writers[buffer]))
        cand = [v for v in range(per_writer) if v % m == slot]
        return cand[-1] if cand else slot - m  # never written: the producer never ran

    def read_accesses(ev: Event, version_of) -> tuple:
        out = []
        for buffer, slot in ev.reads:
            if buffer in written:
                v = version_of(buffer, slot)
                vx = Num(v) if isinstance(v, int) else v
                out += [Access(buffer, vx, _slot_of(vx, bufs[buffer]), w) for w in writers[buffer]]
        return tuple(out)

    read_stage: dict[str, int] = {}
    for e, a in zip(loop.body, body_read_a):
        if a is None:
            continue
        s = P - a
        if read_stage.setdefault(e.key, s) != s:
            raise _err(loop, e.line, f"{e.text or e.key} reads versions at two distances",
                       "each reading op must read one version per iteration")
    # ---- straight-line parts ------------------------------------------------------------
    B = simplify(loop.body_extent if not isinstance(loop.body_extent, int) else Num(loop.body_extent))
    ops: dict[str, ProgOp] = {}
    smap_ops: dict[str, list] = {}

    def add_op(key: str, st: int, is_async: bool, queue: Optional[int], part: str, ev: Event) -> None:
        if key not in ops:
            ops[key] = ProgOp(key, loop.queues[queue] if is_async else "sync", st, is_async,
                              queue if is_async else None, None)
        smap_ops.setdefault(key, []).append((part, ev.line, ev.text))

    waits: list[Wait] = []
    wait_src: list[tuple[int, str]] = []

    def build(events, part: str, where) -> tuple[list, int]:
        """Statements of a straight-line part; ``where(ev, pos)`` -> (step, version, stage, key).
        Op statements go to the step their version and stage give; a commit to its last op's step,
        a wait to its next op's step (it guards what follows)."""
        placed_at: dict[int, tuple] = {}
        step = 0
        for pos, ev in enumerate(events):
            if ev.kind in ("write", "read") and ev.buffer in written:
                r = where(ev, pos)
                if r[0] < step:
                    raise _err(loop, ev.line, f"{ev.text or ev.key} ({part}) belongs to pipeline step {r[0]}, "
                               f"after statements of step {step}", "the straight-line code must run its steps in order")
                step = r[0]
                placed_at[pos] = r
        stmts: list = []
        pending: list[int] = []
        group = 0
        step = 0
        for pos, ev in enumerate(events):
            if pos in placed_at:
                st, version, stg, key = placed_at[pos]
                step = st
                guard = _and(parse(f"i == {st}"), ev.guard)
                it = parse(f"i - {stg}") if part == "prologue" else simplify(
                    substitute(parse(f"i + {P} - {stg} + B"), {"B": B}))
                ver = Num(version) if isinstance(version, int) else version
                acc = Access(ev.buffer, ver, _slot_of(ver, bufs[ev.buffer]))
                if ev.kind == "write":
                    add_op(key, stg, True, ev.queue, part, ev)
                    vf = (lambda b, sl, pos=pos: pro_version(pos, b, sl)) if part == "prologue" else \
                        (lambda b, sl, pos=pos, ev=ev: epi_version(pos, ev, b, sl))
                    rd = read_accesses(ev, vf) if ev.reads else ()
                    stmts.append(OpStmt(key, it, guard, group, rd, (acc,)))
                    pending.append(len(stmts) - 1)
                else:
                    add_op(key, stg, False, None, part, ev)
                    reads = tuple(Access(ev.buffer, ver, acc.slot, w) for w in writers[ev.buffer])
                    prev = stmts[-1] if stmts else None
                    if isinstance(prev, OpStmt) and prev.op == key and prev.guard == guard and not prev.writes:
                        stmts[-1] = OpStmt(key, prev.iteration, guard, None, prev.reads + reads, ())
                    else:
                        stmts.append(OpStmt(key, it, guard, None, reads, ()))
            elif ev.kind == "commit":
                stmts.append(CommitStmt(ev.queue, group, _and(parse(f"i == {step}"), ev.guard)))
                group += 1
                pending = []
            elif ev.kind == "wait":
                nxt = next((placed_at[q][0] for q in range(pos + 1, len(events)) if q in placed_at), step)
                cnt = ev.count if not isinstance(ev.count, int) else Num(ev.count)
                waits.append(Wait(part, ev.queue, cnt, ""))
                wait_src.append((ev.line, ev.text))
                stmts.append(WaitStmt(len(waits) - 1, _and(parse(f"i == {nxt}"), ev.guard)))
        for k in pending:
            s = stmts[k]
            stmts[k] = OpStmt(s.op, s.iteration, s.guard, None, s.reads, s.writes)
        last = max([r[0] for r in placed_at.values()] + [0])
        return stmts, last

    pro_seen: dict[tuple[str, str], int] = {}

    def pro_where(ev: Event, pos: int):
        if ev.kind == "write":
            n = pro_seen.get((ev.buffer, ev.key), 0)
            pro_seen[(ev.buffer, ev.key)] = n + 1
            return n + stage[ev.key], n, stage[ev.key], ev.key
        version = pro_version(pos, ev.buffer, ev.slot)
        if ev.key in read_stage:
            st = read_stage[ev.key]
            return version + st, version, st, ev.key
        key = ev.key + "@prologue"
        st = placed[-1] if placed else 0
        read_stage.setdefault(key, st - version)
        return st, version, read_stage[key], key

    placed: list[int] = []

    def pro_where_tracked(ev, pos):
        r = pro_where(ev, pos)
        placed.append(r[0])
        return r

    pro_stmts, pro_last = build(loop.prologue, "prologue", pro_where_tracked)
    if pro_last >= P and any(e.kind in ("write", "read") and e.buffer in written for e in loop.prologue):
        raise _err(loop, loop.prologue[-1].line if loop.prologue else 0,
                   f"the code before the loop reaches pipeline step {pro_last}, but only {P} steps are peeled",
                   "the prologue must only hold the first iterations' early stages")

    # body
    body_stmts: list = []
    group = 1000
    pending: list[int] = []
    genv = _z3env(loop)
    gfacts = _facts(loop, genv, mt, True)
    for pos, ev in enumerate(loop.body):
        guard = None if ev.guard is None or _valid(to_z3(ev.guard, genv), gfacts) else _rename(ev.guard)
        if ev.kind == "write" and ev.buffer in written:
            add_op(ev.key, stage[ev.key], True, ev.queue, "body", ev)
            v = parse(f"i + {pro_count[ev.buffer]}")
            rd = read_accesses(ev, lambda b, sl, pos=pos, ev=ev: _rename(parse(f"k + {body_version(pos, ev, b, sl)}")))
            body_stmts.append(OpStmt(ev.key, v, guard, group, rd,
                                     (Access(ev.buffer, v, _slot_of(v, bufs[ev.buffer])),)))
            pending.append(len(body_stmts) - 1)
        elif ev.kind == "read" and ev.buffer in written:
            a = body_read_a[pos]
            add_op(ev.key, read_stage[ev.key], False, None, "body", ev)
            v = parse(f"i + {a}") if a else parse("i")
            reads = tuple(Access(ev.buffer, v, _slot_of(v, bufs[ev.buffer]), w) for w in writers[ev.buffer])
            prev = body_stmts[-1] if body_stmts else None
            if isinstance(prev, OpStmt) and prev.op == ev.key and prev.guard == guard and not prev.writes:
                body_stmts[-1] = OpStmt(ev.key, prev.iteration, guard, None, prev.reads + reads, ())
            else:
                body_stmts.append(OpStmt(ev.key, v, guard, None, reads, ()))
        elif ev.kind == "commit":
            body_stmts.append(CommitStmt(ev.queue, group, guard))
            group += 1
            pending = []
        elif ev.kind == "wait":
            cnt = ev.count if not isinstance(ev.count, int) else Num(ev.count)
            waits.append(Wait("body", ev.queue, _rename(cnt), ""))
            wait_src.append((ev.line, ev.text))
            body_stmts.append(WaitStmt(len(waits) - 1, guard))
    for k in pending:
        s = body_stmts[k]
        body_stmts[k] = OpStmt(s.op, s.iteration, s.guard, None, s.reads, s.writes)

    # epilogue
    epi_placed: list[int] = []

    epi_seen: dict[str, int] = {}

    def epi_before(pos: int, buffer: str) -> int:
        """Version offset of the last write of ``buffer`` before epilogue position ``pos`` (B + this)."""
        n = len([x for x in loop.epilogue[:pos] if x.kind == "write" and x.buffer == buffer])
        return pro_count[buffer] - 1 + n // max(1, len(writers[buffer]))

    def epi_version(pos: int, ev: Event, buffer: str, slot) -> Expr:
        m = bufs[buffer]
        d = _epilogue_offset(loop, Event("read", ev.key, buffer, slot, line=ev.line, text=ev.text), m, mt)
        return simplify(Bin("+", B, Num(_last_version(epi_before(pos, buffer), d, m))))

    def epi_where(ev: Event, pos: int):
        m = bufs[ev.buffer]
        d = _epilogue_offset(loop, ev, m, mt)
        if ev.kind == "write":
            j = epi_seen.get(ev.key, 0)
            epi_seen[ev.key] = j + 1
            if (pro_count[ev.buffer] + j - d) % m:
                raise _err(loop, ev.line, f"{ev.text or ev.key} after the loop writes slot (B + {d}) % {m}, not "
                           f"(B + {pro_count[ev.buffer] + j}) % {m}",
                           "the buffer must rotate: write n lands in slot n % M")
            epi_placed.append(j)
            return j, simplify(Bin("+", B, Num(pro_count[ev.buffer] + j))), stage[ev.key], ev.key
        a = _last_version(epi_before(pos, ev.buffer), d, m)
        version = simplify(Bin("+", B, Num(a)))
        if ev.key in read_stage:
            st = read_stage[ev.key]
            e = a + st - P
            if e < 0:
                raise _err(loop, ev.line, f"{ev.text or ev.key} after the loop reads a version the loop itself "
                           "should have read", "the epilogue must only finish the last iterations' late stages")
            epi_placed.append(e)
            return e, version, st, ev.key
        key = ev.key + "@epilogue"
        e = epi_placed[-1] if epi_placed else 0
        read_stage.setdefault(key, P + e - a)
        epi_placed.append(e)
        return e, version, read_stage[key], key

    epi_stmts, epi_last = build(loop.epilogue, "epilogue", epi_where)
    E = epi_last + 1 if loop.epilogue else 0

    parts = [Part("prologue", "i", Num(P), tuple(pro_stmts)), Part("body", "i", B, tuple(body_stmts))]
    if epi_stmts:
        parts.append(Part("epilogue", "i", Num(E), tuple(epi_stmts)))
    parts = [p for p in parts if p.stmts or p.name == "body"]
    trip: Union[int, str]
    if loop.trip_symbol:
        trip = loop.trip_symbol
    else:
        bv = _value_at(B, {})
        trip = int(bv) if bv is not None else 0
    program = Program(
        name=loop.name, loop_var="k", trip_count=trip, min_trip_count=mt if loop.trip_symbol else int(trip),
        max_stage=max([o.stage for o in ops.values()] + [0]), ops=tuple(ops.values()),
        buffers=tuple(ProgBuffer(b, "shared", bufs[b], 0) for b in sorted(written)),
        queues=tuple(loop.queues), parts=tuple(parts), waits=tuple(waits), notes=loop.notes).with_befores()
    return program, SourceMap(smap_ops, tuple(wait_src))


def _fix_trip(loop: Loop, t: int) -> Loop:
    sym = loop.trip_symbol
    if t < loop.min_trip:
        raise _err(loop, loop.body_line, f"--trip-count {t} is below the smallest trip count this loop "
                   f"supports ({loop.min_trip})", f"use --trip-count {loop.min_trip} or more")
    sub = lambda x: x if x is None or isinstance(x, int) else simplify(substitute(x, {sym: Num(t)}))
    ev = lambda es: tuple(replace(e, slot=sub(e.slot), guard=sub(e.guard), count=sub(e.count)) for e in es)
    return replace(loop, prologue=ev(loop.prologue), body=ev(loop.body), epilogue=ev(loop.epilogue),
                   body_extent=sub(loop.body_extent), trip_symbol=None, min_trip=t)


def _slot_of(version: Expr, m: int) -> Expr:
    return Num(version.value % m) if isinstance(version, Num) else Bin("%", version, Num(m))


def _and(a: Optional[Expr], b: Optional[Expr]) -> Optional[Expr]:
    if b is None:
        return a
    if a is None:
        return _rename(b)
    return Bin("&&", a, _rename(b))


def _rename(e):
    """Body expressions use ``k``; the program's parts use ``i``."""
    if e is None or isinstance(e, int):
        return e
    return substitute(e, {K: Var("i")})


__all__ = ["Event", "Loop", "SourceMap", "to_program", "KINDS"]

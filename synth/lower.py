"""Lowering: a :class:`~synth.schedule.Schedule` to the pipelined :class:`~synth.program.Program`.

Input: a validated problem, its dependence graph and a schedule (stage, order and
async queue of every op, slots of every buffer). Output: prologue / body /
epilogue with commit groups, waits, guards and slot indices, with the execution
semantics of :mod:`synth.program` (RFC 0077's notation). Pure: never modifies
its inputs.

Global step ``J`` runs over ``0 .. T + S - 1`` (``S`` = max stage); an op of
stage ``s`` works on original iteration ``J - s`` when ``0 <= J - s < T``. The
prologue is ``J = i`` (extent ``S``), the body ``J = i + S`` (extent ``T - S``),
the epilogue ``J = i + T`` (extent ``S``).

Steps, one function each:

1. :func:`_check_trip_count` -- the pipeline needs ``min_trip_count >= S + 1``.
2. :func:`_commit_groups` -- maximal runs of async ops of one queue and one stage,
   adjacent in the body order (split where an op needs a result of its own run);
   how predicated ops commit (``predicate_strategy``).
3. :func:`_requirements` -- every group instance that must be complete before a
   statement runs: reads (and explicit deps) of async results (RAW), and slots an
   async reader may still be reading when a writer reuses them (WAR).
4. :func:`_wait_count` -- per part, statement and queue: the number of groups
   committed after the awaited one (an exact sum of indicators), then the simplest
   expression in the part's ``i`` equal to it (constant, affine, piecewise, or the
   exact sum); every candidate is checked with Z3 over the part's whole domain.
5. :func:`_drop_implied` -- waits implied by others: by an earlier wait of the same
   step, and in the body by the previous steps' waits (RFC 0077's remark that
   ``wait(0, 3)`` is redundant after the previous iteration's ``wait(0, 2)``).
6. :func:`_assemble` -- statements of each part.

Left out on purpose: no dynamic in-flight counter for predicated producers (the
predicate strategies cover them, see ``docs/lowering.md``); no hoisting of a
stricter wait to an earlier statement (it would block earlier than needed); no
cross-step dropping in prologue and epilogue (their waits stay as RFC 0077
prints them, each consumer with its own count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .errors import SynthError
from .expr import (Bin, Call, Expr, Ite, Num, Un, Var, as_affine, evaluate, free_vars, is_bool, parse,
                   simplify, substitute, to_str)
from .graph import Graph
from .problem import Problem
from .program import (Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Stmt, Wait,
                      WaitStmt)
from .schedule import Schedule

STRATEGIES = ("auto", "always_commit", "naive")
"""``predicate_strategy`` values, see :func:`lower` and docs/lowering.md."""

TRUE: Expr = Bin("==", Num(0), Num(0))
FALSE: Expr = Bin("!=", Num(0), Num(0))


def lower(problem: Problem, graph: Graph, schedule: Schedule, *,
          predicate_strategy: str = "auto") -> Program:
    """The pipelined program of ``schedule``; raises :class:`SynthError` when the
    trip count may be smaller than the number of stages.

    ``predicate_strategy`` says how a predicated async op (``when:``) keeps the
    queue accounting right:

    * ``"auto"``: an opaque predicate commits its group every iteration (empty when
      the op is off, CUTLASS's zero-fill idiom); a group whose ops all have affine
      predicates is committed only when one holds (as TVM does) and the counts
      count those commits exactly.
    * ``"always_commit"``: every group is committed every iteration.
    * ``"naive"``: groups of predicated ops commit only when a predicate holds, but
      the counts assume every group commits. Unsafe on purpose: it lets the
      verifier's tests show such a program refuted.
    """
    if predicate_strategy not in STRATEGIES:
        raise ValueError(f"predicate_strategy must be one of {STRATEGIES}, not {predicate_strategy!r}")
    _check_trip_count(problem, schedule)
    ctx = _Ctx.make(problem, graph, schedule, predicate_strategy)
    reqs = _requirements(ctx)
    waits = _initial_waits(ctx, reqs)
    waits, dropped = _drop_implied(ctx, waits)
    return _assemble(ctx, waits, dropped)


# --------------------------------------------------------------------------------------------
# 1. trip count
# --------------------------------------------------------------------------------------------

def _check_trip_count(problem: Problem, schedule: Schedule) -> None:
    """The prologue and epilogue each run ``S`` steps and the body ``T - S >= 1``."""
    stages = schedule.max_stage + 1
    tmin = problem.loop.min_trip_count
    if tmin < stages:
        may = "is" if not problem.loop.symbolic else "may be"
        raise SynthError(problem.loop.loc,
                         f"trip count {may} {tmin} but the pipeline has {stages} stages",
                         "raise min_trip_count or lower max_stage" if problem.loop.symbolic
                         else "lower max_stage (or the pinned stages) below the trip count")


# --------------------------------------------------------------------------------------------
# context: parts, groups, expressions in the global step
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _PartInfo:
    name: str
    offset: Expr
    """``J = i + offset``."""
    extent: Expr


@dataclass(frozen=True)
class _Group:
    gid: int
    queue: int
    stage: int
    ops: tuple[int, ...]
    """Op indices, body order."""
    first: int
    """Body position of the first op."""
    last: int
    """Body position of the last op; the commit follows it."""
    gate: tuple[int, ...]
    """Ops whose predicates gate the commit (empty: committed unconditionally)."""
    counted_gate: bool
    """Whether wait counts account for the gate (False only for ``naive``)."""


@dataclass
class _Ctx:
    problem: Problem
    graph: Graph
    sched: Schedule
    strategy: str
    S: int
    T: Expr
    tmin: int
    var: str
    body: list[int]
    pos: list[int]
    groups: list[_Group]
    group_of: dict[int, int]
    parts: tuple[_PartInfo, ...]
    z3: "_Prover"
    notes: list[str] = field(default_factory=list)
    _present: dict = field(default_factory=dict)
    _memo: dict = field(default_factory=dict)

    @staticmethod
    def make(problem: Problem, graph: Graph, sched: Schedule, strategy: str) -> "_Ctx":
        S = sched.max_stage
        loop = problem.loop
        T: Expr = Var(loop.trip_count) if isinstance(loop.trip_count, str) else Num(loop.trip_count)
        var = "i" if loop.trip_count != "i" else "j"
        body = sched.body_order()
        pos = [0] * len(problem.ops)
        for p, o in enumerate(body):
            pos[o] = p
        parts = (
            _PartInfo("prologue", Num(0), Num(S)),
            _PartInfo("body", Num(S), _aff_expr(simplify(Bin("-", T, Num(S))), var)),
            _PartInfo("epilogue", T, Num(S)),
        )
        ctx = _Ctx(problem, graph, sched, strategy, S, T, loop.min_trip_count, var, body, pos, [], {},
                   parts, _Prover(T, loop.min_trip_count))
        ctx.groups = _commit_groups(ctx)
        ctx.group_of = {o: g.gid for g in ctx.groups for o in g.ops}
        return ctx

    # -- conditions in a part's i (and T) ---------------------------------------------------
    # Every condition is built directly in the local variable of the part it is used in:
    # global step J is ``i + offset``, and ``step(part, m)`` is ``J - m``.

    def domain(self, part: _PartInfo) -> Expr:
        """``0 <= i < extent`` (and ``T >= min_trip_count`` when symbolic), in the part's i."""
        i = Var(self.var)
        d = _and(Bin("<=", Num(0), i), Bin("<", i, part.extent))
        if isinstance(self.T, Var):
            d = _and(d, Bin(">=", self.T, Num(self.tmin)))
        return d

    def step(self, part: _PartInfo, m: int = 0) -> Expr:
        """Global step ``J - m`` in ``part``'s i."""
        key = ("step", part.name, m)
        if key not in self._memo:
            self._memo[key] = _aff_expr(simplify(Bin("-", Bin("+", Var(self.var), part.offset), Num(m))),
                                        self.var)
        return self._memo[key]

    def in_part(self, part: _PartInfo, j: Expr) -> Expr:
        """Step ``j`` lies in ``part``."""
        key = ("in", part.name, j)
        if key not in self._memo:
            lo = {"prologue": Num(0), "body": Num(self.S), "epilogue": self.T}[part.name]
            hi = {"prologue": Num(self.S), "body": self.T, "epilogue": _add(self.T, self.S)}[part.name]
            self._memo[key] = _pretty_bool(_and(Bin("<=", lo, j), Bin("<", j, hi)), self.var)
        return self._memo[key]

    def runs(self, stage: int, j: Expr) -> Expr:
        """An op of ``stage`` runs in step ``j``: ``0 <= j - stage < T``."""
        key = ("runs", stage, j)
        if key not in self._memo:
            self._memo[key] = _pretty_bool(_and(Bin("<=", Num(stage), j), Bin("<", j, _add(self.T, stage))),
                                           self.var)
        return self._memo[key]

    def gate_holds(self, g: _Group, j: Expr) -> Expr:
        """The commit gate of ``g`` in step ``j`` (TRUE when ungated or not counted)."""
        if not g.gate or not g.counted_gate:
            return TRUE
        it = _sub(j, g.stage)
        conds = [self.pred_at(o, it) for o in g.gate]
        out = conds[0]
        for c in conds[1:]:
            out = Bin("||", out, c)
        return _pretty_bool(out, self.var)

    def pred_at(self, op: int, iteration: Expr) -> Expr:
        """The affine predicate of ``op`` at ``iteration``."""
        w = self.problem.ops[op].when
        assert w is not None and w.expr is not None
        return substitute(w.expr, {self.problem.loop.var: iteration})

    def present(self, g: _Group, j: Expr) -> Expr:
        """Group ``g`` is committed in step ``j``."""
        key = (g.gid, j)
        if key not in self._present:
            self._present[key] = _pretty_bool(_and(self.runs(g.stage, j), self.gate_holds(g, j)), self.var)
        return self._present[key]

    def part(self, name: str) -> _PartInfo:
        return next(p for p in self.parts if p.name == name)


def _commit_groups(ctx: _Ctx) -> list[_Group]:
    """Maximal runs of async ops with one queue and one stage, adjacent in body order.

    A run is split before an op that needs (distance 0) a result of an op already in
    the run: a group cannot be awaited before it is committed.
    """
    p, s = ctx.problem, ctx.sched
    deps0: dict[int, set[int]] = {}
    for e in ctx.graph.edges:
        if e.kind in ("raw", "explicit") and e.distance == 0:
            deps0.setdefault(e.dst, set()).add(e.src)
    runs: list[list[int]] = []
    for o in ctx.body:
        if not s.is_async[o]:
            runs.append([])
            continue
        cur = runs[-1] if runs else []
        if (cur and s.queue[cur[0]] == s.queue[o] and s.stage[cur[0]] == s.stage[o]
                and not (deps0.get(o, set()) & set(cur))):
            cur.append(o)
        else:
            runs.append([o])
    groups = []
    for run in runs:
        if not run:
            continue
        whens = [p.ops[o].when for o in run]
        strategy = ctx.strategy
        gate: tuple[int, ...] = ()
        counted = True
        all_pred = all(w is not None for w in whens)
        if strategy == "auto" and all_pred and all(not w.opaque for w in whens):
            gate = tuple(run)
        elif strategy == "naive" and all_pred:
            gate, counted = tuple(run), False
        groups.append(_Group(len(groups), s.queue[run[0]], s.stage[run[0]], tuple(run),
                             ctx.pos[run[0]], ctx.pos[run[-1]], gate, counted))
    _predicate_notes(ctx, groups)
    return groups


def _predicate_notes(ctx: _Ctx, groups: list[_Group]) -> None:
    p = ctx.problem
    for g in groups:
        for o in g.ops:
            w = p.ops[o].when
            if w is None:
                continue
            name = p.ops[o].name
            if not g.gate:
                mixed = "" if w.opaque or ctx.strategy != "auto" else " (its group also holds unpredicated ops)"
                ctx.notes.append(
                    f"{name} is predicated ({w.text}){mixed}: its group is committed on every iteration, "
                    f"empty when {name} is off (CUTLASS's zero-fill idiom), so the wait counts are those "
                    f"of the unpredicated loop")
            elif g.counted_gate:
                ctx.notes.append(
                    f"{name} is predicated ({w.text}): its group is committed only when the predicate "
                    f"holds (as TVM does) and the wait counts count exactly those commits")
            else:
                ctx.notes.append(
                    f"predicate strategy 'naive': {name}'s group is committed only when its predicate "
                    f"({w.text}) holds, but the wait counts assume it is always committed (unsafe)")


# --------------------------------------------------------------------------------------------
# 3. requirements
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Req:
    kind: str
    """raw | dep | war | waw"""
    op: int
    """The statement's op: a consumer (raw, dep) or a writer reusing a slot (war)."""
    queue: int
    group: int
    """The awaited group: the producer's (raw, dep) or the async reader's (war)."""
    delta: int
    """The awaited instance was committed in step ``J - delta``."""
    other: int
    """Producer (raw, dep) or async reader (war)."""
    buffer: Optional[str] = None
    distance: int = 0
    """raw: the read's iteration distance; war: the overwritten version's distance."""


def _producer_edges(ctx: _Ctx, op: int) -> list[tuple[str, int, int]]:
    """``(buffer, producer, distance)`` of each buffer ``op`` reads: the last writer
    before it in program order (distance 0), else the last writer (distance 1)."""
    p = ctx.problem
    out = []
    for buf in p.ops[op].reads:
        writers = [w for w, o in enumerate(p.ops) if buf in o.writes]
        before = [w for w in writers if w < op]
        if before:
            out.append((buf, before[-1], 0))
        elif writers:
            out.append((buf, writers[-1], 1))
    return out


def _requirements(ctx: _Ctx) -> list[_Req]:
    """Group instances that must be complete before a statement (RAW, explicit deps, WAR)."""
    p, s = ctx.problem, ctx.sched
    out: list[_Req] = []
    for b in range(len(p.ops)):
        for buf, a, d in _producer_edges(ctx, b):
            if s.is_async[a]:
                out.append(_req(ctx, "raw", b, a, s.stage[b] + d - s.stage[a], buf, d))
    for e in ctx.graph.edges:
        if e.kind == "explicit" and s.is_async[e.src]:
            out.append(_req(ctx, "dep", e.dst, e.src, s.stage[e.dst] + e.distance - s.stage[e.src], None,
                            e.distance))
    # WAR: a writer of x reusing the slot of version v - M, which an async reader R read at
    # iteration v - M + d_R in step v - M + d_R + s_R: R's group must be complete.
    for r in range(len(p.ops)):
        for buf, a, d in _producer_edges(ctx, r):
            m = s.mult(buf)
            for w in (w for w, o in enumerate(p.ops) if buf in o.writes):
                delta = s.stage[w] + m - d - s.stage[r]
                if s.is_async[r] and r != w:
                    out.append(_req(ctx, "war", w, r, delta, buf, d))
                elif delta < 0 or (delta == 0 and ctx.pos[r] > ctx.pos[w]):
                    _too_few_slots(ctx, buf, w, r)
    # WAW: a buffer nobody reads has no read whose wait completes an async write before the
    # next write of its slot (version v - M), so that older write could land last.
    read = {buf for o in p.ops for buf in o.reads}
    for buf in (b.name for b in p.buffers if b.name not in read):
        m = s.mult(buf)
        writers = [w for w, o in enumerate(p.ops) if buf in o.writes]
        for w0 in (w for w in writers if s.is_async[w]):
            for w in writers:
                out.append(_req(ctx, "waw", w, w0, s.stage[w] + m - s.stage[w0], buf, 0))
    return list(dict.fromkeys(out))


def _req(ctx: _Ctx, kind: str, op: int, other: int, delta: int, buf: Optional[str], d: int) -> _Req:
    g = ctx.groups[ctx.group_of[other]]
    if delta < 0 or (delta == 0 and g.last >= ctx.pos[op]):
        if kind in ("war", "waw"):
            _too_few_slots(ctx, buf or "", op, other)
        p = ctx.problem
        raise SynthError(p.ops[op].loc, f"{p.ops[op].name} needs the result of async {p.ops[other].name} "
                         f"before its group is committed (stage {ctx.sched.stage[op]} vs "
                         f"{ctx.sched.stage[other]})",
                         f"give {p.ops[op].name} a later stage or order it after {p.ops[other].name}")
    return _Req(kind, op, g.queue, g.gid, delta, other, buf, d)


def _too_few_slots(ctx: _Ctx, buf: str, writer: int, reader: int) -> None:
    p = ctx.problem
    raise SynthError(p.buffer(buf).loc, f"buffer {buf} has {ctx.sched.mult(buf)} slots, so "
                     f"{p.ops[writer].name} overwrites a version {p.ops[reader].name} still reads",
                     "use the multiplicity synth.schedule.multiplicity computes for this schedule")


# --------------------------------------------------------------------------------------------
# 4. wait counts
# --------------------------------------------------------------------------------------------

def _between(ctx: _Ctx, part: _PartInfo, r: _Req, m: int, pos: int) -> list[Expr]:
    """Groups of ``r.queue`` committed after the awaited instance (step ``J - r.delta``)
    and before position ``pos`` of step ``J - m``: one condition per possible commit
    (the count is the number that hold), in ``part``'s i."""
    ga = ctx.groups[r.group]
    out = []
    for g in ctx.groups:
        if g.queue != r.queue:
            continue
        k_lo = m + (0 if g.last < pos else 1)
        k_hi = r.delta - (0 if g.last > ga.last else 1)
        for k in range(k_lo, k_hi + 1):
            out.append(ctx.present(g, ctx.step(part, k)))
    return out


def _count_of(conds: list[Expr]) -> Expr:
    """``sum(c ? 1 : 0)``."""
    total: Expr = Num(0)
    for c in conds:
        total = Bin("+", total, Ite(c, Num(1), Num(0)))
    return total


def _needed(ctx: _Ctx, part: _PartInfo, r: _Req) -> Expr:
    """The awaited instance exists: its group runs in step ``J - delta``."""
    return ctx.runs(ctx.groups[r.group].stage, ctx.step(part, r.delta))


def _executes(ctx: _Ctx, part: _PartInfo, op: int) -> Expr:
    return ctx.runs(ctx.sched.stage[op], ctx.step(part))


@dataclass(frozen=True)
class _WaitKey:
    part: str
    pos: int
    queue: int


@dataclass
class _Wait:
    key: _WaitKey
    op: int
    count: Expr
    guard: Optional[Expr]
    reqs: list[_Req]
    reason: str


def _initial_waits(ctx: _Ctx, reqs: list[_Req]) -> dict[_WaitKey, _Wait]:
    """One wait per part, statement and queue that some requirement needs there."""
    by_key: dict[_WaitKey, list[_Req]] = {}
    for part in ctx.parts:
        for r in reqs:
            by_key.setdefault(_WaitKey(part.name, ctx.pos[r.op], r.queue), []).append(r)
    out: dict[_WaitKey, _Wait] = {}
    for key in sorted(by_key, key=lambda k: (_PART_IDX[k.part], k.pos, k.queue)):
        w = _wait_count(ctx, key, by_key[key])
        if w is not None:
            out[key] = w
    return out


_PART_IDX = {"prologue": 0, "body": 1, "epilogue": 2}


def _wait_count(ctx: _Ctx, key: _WaitKey, reqs: list[_Req]) -> Optional[_Wait]:
    """The count of the wait at ``key``: the least, over its requirements that are live,
    of the groups committed after the awaited one; None when none is ever live there."""
    part = ctx.part(key.part)
    op = reqs[0].op
    guard = _guard(ctx, part, ctx.sched.stage[op])
    if guard == FALSE:
        return None
    hyp = _and(ctx.domain(part), _executes(ctx, part, op))
    live = [r for r in reqs if ctx.z3.sat(_and(hyp, _needed(ctx, part, r)))]
    if not live:
        return None
    needs = []
    for r in live:
        n = _simplify_count(ctx, part, hyp, _between(ctx, part, r, 0, key.pos))
        needs.append((_needed(ctx, part, r), n))
    count = _fit(ctx, part, hyp, needs)
    return _Wait(key, op, count, guard, live, _reason(ctx, live, count))


def _guard(ctx: _Ctx, part: _PartInfo, stage: int) -> Optional[Expr]:
    """Structural guard of a stage-``stage`` statement in ``part``: None (always runs),
    FALSE (never), or ``s <= i`` (prologue) / ``i < s`` (epilogue)."""
    i, S = Var(ctx.var), ctx.S
    if part.name == "prologue":
        if stage >= S:
            return FALSE
        return None if stage == 0 else Bin("<=", Num(stage), i)
    if part.name == "epilogue":
        if stage == 0:
            return FALSE
        return None if stage >= S else Bin("<", i, Num(stage))
    return None


def _simplify_count(ctx: _Ctx, part: _PartInfo, hyp: Expr, conds: list[Expr]) -> Expr:
    """``c + sum(cond ? 1 : 0)`` with each condition decided or reduced under ``hyp``."""
    const = 0
    terms: dict[Expr, int] = {}
    for t in conds:
        conj = []
        dead = False
        for c in _conjuncts(t):
            c = _pretty_bool(c, ctx.var)
            if c == TRUE or ctx.z3.valid(hyp, c, part):
                continue
            if c == FALSE or ctx.z3.valid(hyp, Un("!", c), part):
                dead = True
                break
            conj.append(c)
        if dead:
            continue
        if not conj:
            const += 1
            continue
        cond = conj[0]
        for c in conj[1:]:
            cond = Bin("&&", cond, c)
        terms[cond] = terms.get(cond, 0) + 1
    if len(terms) == 1:
        (cond, n), = terms.items()
        return _norm(Ite(cond, Num(const + n), Num(const)))
    head: Optional[Expr] = Num(const) if const else None
    mixed = {c: n for c, n in terms.items() if free_vars(c) - {ctx.var}}
    if len(mixed) < len(terms):
        # the terms in i alone: one expression (2 - i), if one fits everywhere
        only_i = _sum_of(Num(const), {c: n for c, n in terms.items() if c not in mixed})
        fit = _fit(ctx, part, hyp, [(TRUE, only_i)]) if mixed else None
        if (fit is not None and not isinstance(fit, Call) and fit != only_i
                and ctx.z3.valid(hyp, Bin("==", fit, only_i), part)):
            head, terms = fit, mixed
    return _norm(_sum_of(head, terms))


def _sum_of(head: Optional[Expr], terms: dict[Expr, int]) -> Expr:
    """``head + sum(cond ? n : 0)``."""
    out = head if head != Num(0) else None
    for cond, n in terms.items():
        t = Ite(cond, Num(n), Num(0))
        out = t if out is None else Bin("+", out, t)
    return out if out is not None else Num(0)


def _fit(ctx: _Ctx, part: _PartInfo, hyp: Expr, needs: list[tuple[Expr, Expr]]) -> Expr:
    """The simplest expression equal, wherever the wait runs and some requirement is
    live, to the least live count; checked with Z3 (safe, non-negative, tight)."""
    table = _table(ctx, part, hyp, needs)
    exact = needs[0][1] if len(needs) == 1 else _norm(Call("min", tuple(n for _, n in needs)))
    cands = _candidates(ctx, part, table) + [n for _, n in needs] + [exact]
    live_any = needs[0][0]
    for nv, _ in needs[1:]:
        live_any = Bin("||", live_any, nv)
    safe_ok: list[Expr] = []
    for c in dict.fromkeys(cands):
        safe = all(ctx.z3.valid(_and(hyp, nv), Bin("<=", c, n), part) for nv, n in needs)
        if not safe or not ctx.z3.valid(hyp, Bin(">=", c, Num(0)), part):
            continue
        tight_c: Expr = FALSE
        for nv, n in needs:
            tight_c = Bin("||", tight_c, _and(nv, Bin("==", c, n)))
        if ctx.z3.valid(_and(hyp, live_any), tight_c, part):
            return c
        safe_ok.append(c)
    return safe_ok[0] if safe_ok else exact


def _table(ctx: _Ctx, part: _PartInfo, hyp: Expr, needs: list[tuple[Expr, Expr]]
           ) -> tuple[list[tuple[int, Optional[int]]], bool]:
    """``([(i, least live count or None)], open_ended)`` at a representative trip count;
    open-ended: the body of a symbolic loop, whose last value repeats for all larger i."""
    tval = ctx.z3.t_big(ctx.S)
    env = {} if not isinstance(ctx.T, Var) else {ctx.T.name: tval}
    ext = int(evaluate(part.extent, env))
    open_ended = part.name == "body" and isinstance(ctx.T, Var)
    if open_ended:
        ext = min(ext, 5 * ctx.S + 12)
    rows = []
    for i in range(ext):
        e = dict(env)
        e[ctx.var] = i
        if not evaluate(hyp, e):
            continue
        vals = [int(evaluate(n, e)) for nv, n in needs if evaluate(nv, e)]
        rows.append((i, min(vals) if vals else None))
    return rows, open_ended


def _candidates(ctx: _Ctx, part: _PartInfo, table) -> list[Expr]:
    rows, open_ended = table
    known = [(i, v) for i, v in rows if v is not None]
    if not known:
        return [Num(0)]
    i = Var(ctx.var)
    out: list[Expr] = []
    vals = {v for _, v in known}
    if len(vals) == 1:
        return [Num(known[0][1])]
    if not open_ended and len(known) >= 2:
        (i0, v0), (i1, v1) = known[0], known[1]
        if (v1 - v0) % (i1 - i0) == 0:
            b = (v1 - v0) // (i1 - i0)
            a = v0 - b * i0
            if all(a + b * x == v for x, v in known) and all(a + b * x >= 0 for x, _ in rows):
                out.append(_norm(_aff_expr(simplify(Bin("+", Num(a), Bin("*", Num(b), i))), ctx.var)))
    # piecewise: runs of equal values (free points join the run before them)
    runs: list[tuple[int, int]] = []  # (first i, value)
    for x, v in rows:
        if v is None:
            continue
        if not runs or runs[-1][1] != v:
            runs.append((x, v))
    expr: Expr = Num(runs[-1][1])
    for k in range(len(runs) - 2, -1, -1):
        expr = Ite(Bin("<", i, Num(runs[k + 1][0])), Num(runs[k][1]), expr)
    out.append(_norm(expr))
    return out


# --------------------------------------------------------------------------------------------
# 5. implied waits
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Cover:
    pos: int
    m: int
    """Steps back: 0 this step, 1 the previous one..."""


def _covers(ctx: _Ctx, r: _Req, part: _PartInfo, waits: dict[_WaitKey, _Wait]) -> Optional[_Cover]:
    """A kept wait (position, steps back) that completes ``r``'s awaited instance whenever
    ``r`` is live in ``part``; None if none does alone."""
    own = _WaitKey(part.name, ctx.pos[r.op], r.queue)
    if own in waits:
        return _Cover(own.pos, 0)
    ga = ctx.groups[r.group]
    hyp = _and(_and(ctx.domain(part), _executes(ctx, part, r.op)), _needed(ctx, part, r))
    if not ctx.z3.sat(hyp):
        return _Cover(own.pos, 0)
    max_m = r.delta if part.name == "body" else 0
    for m in range(0, max_m + 1):
        for pos in sorted({k.pos for k in waits if k.queue == r.queue}):
            if m == 0 and pos >= own.pos:
                continue
            if m == r.delta and pos <= ga.last:
                continue
            n_here = _count_of(_between(ctx, part, r, m, pos))
            j = ctx.step(part, m)
            alts: Expr = FALSE
            for p2 in ctx.parts:
                w = waits.get(_WaitKey(p2.name, pos, r.queue))
                if w is None:
                    continue
                at = {ctx.var: _sub_e(j, p2.offset)}
                cond = ctx.in_part(p2, j)
                if w.guard is not None:
                    cond = _and(cond, substitute(w.guard, at))
                cond = _and(cond, Bin(">=", n_here, substitute(w.count, at)))
                alts = cond if alts == FALSE else Bin("||", alts, cond)
            if alts == FALSE:
                continue
            if ctx.z3.valid(hyp, alts, part):
                return _Cover(pos, m)
    return None


def _drop_implied(ctx: _Ctx, waits: dict[_WaitKey, _Wait]
                  ) -> tuple[dict[_WaitKey, _Wait], list[tuple[_Wait, list[tuple[_Req, _Cover]]]]]:
    """Greedily drop each wait (part order, then body order) whose requirements, and those
    of the waits dropped before it, are all covered by the remaining waits."""
    kept = dict(waits)
    dropped: list[_Wait] = []
    cover_of: dict[tuple[int, int], _Cover] = {}  # (id of dropped wait, req index) -> its cover
    for key in list(waits):
        trial = {k: v for k, v in kept.items() if k != key}
        found: dict[tuple[int, int], _Cover] = {}
        ok = True
        # the new wait's requirements, and those of dropped waits that relied on this position
        todo = [(w, n, r) for w in dropped for n, r in enumerate(w.reqs)
                if cover_of[(id(w), n)].pos == key.pos and r.queue == key.queue]
        todo += [(waits[key], n, r) for n, r in enumerate(waits[key].reqs)]
        for w, n, r in todo:
            c = _covers(ctx, r, ctx.part(w.key.part), trial)
            if c is None:
                ok = False
                break
            found[(id(w), n)] = c
        if ok:
            kept = trial
            dropped.append(waits[key])
            cover_of.update(found)
    report = []
    for w in dropped:
        report.append((w, [(r, _covers(ctx, r, ctx.part(w.key.part), kept)) for r in w.reqs]))
    return kept, report


# --------------------------------------------------------------------------------------------
# 6. statements
# --------------------------------------------------------------------------------------------

def _iteration(ctx: _Ctx, part: _PartInfo, stage: int) -> Expr:
    return _aff_expr(simplify(_sub_e(_add_e(Var(ctx.var), part.offset), Num(stage))), ctx.var)


def _access(ctx: _Ctx, part: _PartInfo, buf: str, version: Expr, stage: int, producer: Optional[str]) -> Access:
    m = ctx.sched.mult(buf)
    version = _aff_expr(simplify(version), ctx.var)
    slot: Expr = Bin("%", version, Num(m))
    if m == 1:
        slot = Num(0)
    else:
        rng = _range(ctx, part, stage, version)
        if rng is not None and 0 <= rng[0] and rng[1] < m:
            slot = Num(rng[0]) if rng[0] == rng[1] else version
    return Access(buf, _norm(version), _norm(slot), producer)


def _range(ctx: _Ctx, part: _PartInfo, stage: int, version: Expr) -> Optional[tuple[int, int]]:
    """Values of ``version`` where a stage-``stage`` op runs in ``part``; None if unbounded."""
    if free_vars(version) - {ctx.var}:
        return None
    try:
        ext = int(evaluate(part.extent, {}))
    except KeyError:
        return None
    env_ok = []
    g = _guard(ctx, part, stage)
    for i in range(ext):
        if g is None or evaluate(g, {ctx.var: i}):
            env_ok.append(int(evaluate(version, {ctx.var: i})))
    return (min(env_ok), max(env_ok)) if env_ok else None


def _assemble(ctx: _Ctx, waits: dict[_WaitKey, _Wait],
              dropped: list[tuple[_Wait, list[tuple[_Req, _Cover]]]]) -> Program:
    p, s = ctx.problem, ctx.sched
    prog_waits: list[Wait] = []
    parts = []
    for part in ctx.parts:
        stmts: list[Stmt] = []
        for posn, o in enumerate(ctx.body):
            guard = _guard(ctx, part, s.stage[o])
            if guard == FALSE or part.extent == Num(0):
                continue
            for q in range(len(p.target.async_units)):
                w = waits.get(_WaitKey(part.name, posn, q))
                if w is None:
                    continue
                prog_waits.append(Wait(part.name, q, w.count, p.ops[o].name, None, w.reason))
                stmts.append(WaitStmt(len(prog_waits) - 1, w.guard))
            it = _iteration(ctx, part, s.stage[o])
            reads = []
            for buf, a, d in _producer_edges(ctx, o):
                reads.append(_access(ctx, part, buf, _sub_e(it, Num(d)), s.stage[o], p.ops[a].name))
            writes = [_access(ctx, part, buf, it, s.stage[o], None) for buf in p.ops[o].writes]
            gid = ctx.group_of.get(o)
            stmts.append(OpStmt(p.ops[o].name, it, guard, gid, tuple(reads), tuple(writes)))
            if gid is not None and ctx.groups[gid].last == posn:
                g = ctx.groups[gid]
                stmts.append(CommitStmt(g.queue, gid, guard, tuple(p.ops[x].name for x in g.gate)))
        parts.append(Part(part.name, ctx.var, part.extent, tuple(stmts)))
    notes = list(ctx.notes)
    for w, covers in dropped:
        for r, c in covers:
            assert c is not None
            if c.m == 0:
                continue  # a later statement of the same step under an equal or stricter wait
            by = waits.get(_WaitKey(w.key.part, c.pos, r.queue))
            by_name = p.ops[ctx.body[c.pos]].name
            when = "one iteration earlier" if c.m == 1 else f"{c.m} iterations earlier"
            cnt = to_str(by.count) if by is not None else "?"
            notes.append(f"{w.key.part}: no async_wait_queue({r.queue}, {to_str(w.count)}) before "
                         f"{p.ops[w.op].name}: {_req_text(ctx, r)} is already complete after "
                         f"async_wait_queue({r.queue}, {cnt}) before {by_name} {when}")
    notes += _slot_notes(ctx)
    return Program(
        name=p.name, loop_var=p.loop.var, trip_count=p.loop.trip_count, min_trip_count=p.loop.min_trip_count,
        max_stage=ctx.S,
        ops=tuple(ProgOp(o.name, o.unit, s.stage[k], s.is_async[k], s.queue[k],
                         None if o.when is None else o.when.text, o.latency) for k, o in enumerate(p.ops)),
        buffers=tuple(ProgBuffer(b.name, b.space, s.mult(b.name), b.bytes) for b in p.buffers),
        queues=tuple(p.target.async_units),
        parts=tuple(parts), waits=tuple(prog_waits), notes=tuple(dict.fromkeys(notes)))


def _slot_notes(ctx: _Ctx) -> list[str]:
    """Buffers given an extra slot because an async op reads them."""
    from .schedule import multiplicity

    p, s = ctx.problem, ctx.sched
    sync_need = dict(multiplicity(p, ctx.graph, s.stage, s.order))
    out = []
    for b in p.buffers:
        if b.carried:
            continue
        readers = [r for r in range(len(p.ops)) if s.is_async[r] and b.name in p.ops[r].reads]
        if readers and s.mult(b.name) > sync_need[b.name]:
            names = ", ".join(p.ops[r].name for r in readers)
            out.append(f"{b.name} has {s.mult(b.name)} slots: {names} reads it asynchronously, so a slot stays "
                       f"busy until that group completes (one slot more than a synchronous reader needs)")
    return out


def _req_text(ctx: _Ctx, r: _Req) -> str:
    p = ctx.problem
    a, b = p.ops[r.other].name, p.ops[r.op].name
    if r.kind == "raw":
        return f"{a}'s write of {r.buffer} read by {b}"
    if r.kind == "dep":
        return f"{a}, which {b} depends on,"
    if r.kind == "waw":
        return f"{a}'s earlier asynchronous write of the {r.buffer} slot {b} overwrites"
    return f"{a}'s asynchronous read of the {r.buffer} slot {b} overwrites"


def _reason(ctx: _Ctx, reqs: list[_Req], count: Expr) -> str:
    p = ctx.problem
    parts = []
    for r in reqs:
        g = ctx.groups[r.group]
        a, b = p.ops[r.other].name, p.ops[r.op].name
        steps = "in the same step" if r.delta == 0 else (
            "one step earlier" if r.delta == 1 else f"{r.delta} steps earlier")
        if r.kind == "raw":
            what = f"{b} reads {r.buffer} written by async {a} (queue {g.queue}, committed {steps})"
        elif r.kind == "dep":
            what = f"{b} depends on async {a} (queue {g.queue}, committed {steps})"
        elif r.kind == "waw":
            what = (f"{b} overwrites the {r.buffer} slot that async {a} wrote (queue {g.queue}, "
                    f"committed {steps}) and nobody reads")
        else:
            what = (f"{b} overwrites the {r.buffer} slot that async {a} read (queue {g.queue}, "
                    f"committed {steps})")
        parts.append(what)
    tail = (f"; {to_str(count)} = the groups of queue {reqs[0].queue} committed after it by this point"
            + (" (the least over these reads)" if len(reqs) > 1 else ""))
    return "; ".join(parts) + tail


# --------------------------------------------------------------------------------------------
# Z3 checks
# --------------------------------------------------------------------------------------------

class _Prover:
    """Validity and satisfiability of conditions in the part variable and T, with a
    cheap refutation by sample points first and a cache."""

    def __init__(self, T: Expr, tmin: int) -> None:
        import z3

        self.z3 = z3
        self.T = T
        self.tmin = tmin
        self.solver = z3.SolverFor("QF_LIA")
        self.cache: dict[tuple, bool] = {}
        self.vars: dict[str, object] = {}
        self.memo: dict[int, tuple[Expr, object]] = {}
        self.sample = True

    def t_big(self, S: int) -> int:
        if isinstance(self.T, Num):
            return self.T.value
        return self.tmin + 6 * S + 40

    def _term(self, e: Expr):
        """``e`` as a Z3 term; sub-terms are memoised (counts share many conditions)."""
        z3 = self.z3
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, Num):
            t = z3.IntVal(e.value)
        elif isinstance(e, Var):
            if e.name not in self.vars:
                self.vars[e.name] = z3.Int(e.name)
            t = self.vars[e.name]
        elif isinstance(e, Un):
            a = self._term(e.arg)
            t = z3.Not(a) if e.op == "!" else -a
        elif isinstance(e, Ite):
            t = z3.If(self._term(e.cond), self._term(e.then), self._term(e.other))
        elif isinstance(e, Call):
            args = [self._term(x) for x in e.args]
            t = args[0]
            for x in args[1:]:
                t = z3.If(x < t, x, t) if e.fn == "min" else z3.If(x > t, x, t)
        else:
            a, b = self._term(e.lhs), self._term(e.rhs)
            op = e.op
            if op == "&&":
                t = z3.And(a, b)
            elif op == "||":
                t = z3.Or(a, b)
            else:
                t = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                     "%": lambda: a % b, "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
                     ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b}[op]()
        self.memo[id(e)] = (e, t)  # keeps e alive, so its id is not reused
        return t

    def _check(self, formula: Expr) -> bool:
        """Whether ``formula`` is satisfiable (with T >= tmin when T is symbolic)."""
        key = ("sat", formula)
        if key in self.cache:
            return self.cache[key]
        s = self.solver
        s.push()
        s.add(self._term(formula))
        if isinstance(self.T, Var):
            s.add(self._term(Bin(">=", self.T, Num(self.tmin))))
        res = s.check()
        s.pop()
        if res == self.z3.unknown:
            raise RuntimeError(f"z3 returned unknown on {to_str(formula)}")
        out = res == self.z3.sat
        self.cache[key] = out
        return out

    def sat(self, e: Expr) -> bool:
        return self._check(e)

    def valid(self, hyp: Expr, concl: Expr, part: Optional[_PartInfo] = None) -> bool:
        """``hyp => concl`` for all values of the free names."""
        key = ("valid", hyp, concl)
        if key in self.cache:
            return self.cache[key]
        if self.sample and self._refuted(hyp, concl):
            self.cache[key] = False
            return False
        out = not self._check(_and(hyp, Un("!", concl)))
        self.cache[key] = out
        return out

    def _refuted(self, hyp: Expr, concl: Expr) -> bool:
        names = free_vars(hyp) | free_vars(concl)
        tname = self.T.name if isinstance(self.T, Var) else None
        others = names - {tname}
        if len(others) > 1:
            return False
        v = next(iter(others)) if others else None
        ts = [self.tmin, self.tmin + 9] if tname else [None]
        for t in ts:
            for x in (0, 1, 3, 8) if v else (0,):
                env = {}
                if tname:
                    env[tname] = t
                if v:
                    env[v] = x
                try:
                    if evaluate(hyp, env) and not evaluate(concl, env):
                        return True
                except KeyError:
                    return False
        return False


# --------------------------------------------------------------------------------------------
# expression helpers
# --------------------------------------------------------------------------------------------

def _norm(e: Expr) -> Expr:
    """The form ``parse(to_str(e))`` (what program.json reads back)."""
    return parse(to_str(e))


def _and(a: Expr, b: Expr) -> Expr:
    if a == TRUE:
        return b
    if b == TRUE:
        return a
    return Bin("&&", a, b)


def _add(e: Expr, k: int) -> Expr:
    return simplify(Bin("+", e, Num(k)))


def _sub(e: Expr, k: int) -> Expr:
    return simplify(Bin("-", e, Num(k)))


def _add_e(a: Expr, b: Expr) -> Expr:
    return simplify(Bin("+", a, b))


def _sub_e(a: Expr, b: Expr) -> Expr:
    return simplify(Bin("-", a, b))


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Bin) and e.op == "&&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _aff(coeffs: dict[str, int], const: int, first: str) -> Expr:
    """``sum(c * x) + const``, readable: ``first`` var leads, positive terms before
    negative ones, ``2 - i`` rather than ``-i + 2``; never a negative literal."""
    names = sorted((n for n, c in coeffs.items() if c), key=lambda n: (n != first, n))
    pos = [(n, coeffs[n]) for n in names if coeffs[n] > 0]
    neg = [(n, -coeffs[n]) for n in names if coeffs[n] < 0]

    def term(n: str, c: int) -> Expr:
        return Var(n) if c == 1 else Bin("*", Num(c), Var(n))

    out: Optional[Expr] = None
    for n, c in pos:
        out = term(n, c) if out is None else Bin("+", out, term(n, c))
    if out is None and const > 0:
        out, const = Num(const), 0
    for n, c in neg:
        out = Un("-", term(n, c)) if out is None else Bin("-", out, term(n, c))
    if out is None:
        return Num(const) if const >= 0 else Un("-", Num(-const))
    if const > 0:
        out = Bin("+", out, Num(const))
    elif const < 0:
        out = Bin("-", out, Num(-const))
    return out


def _aff_expr(e: Expr, first: str) -> Expr:
    """``e`` rewritten by :func:`_aff` when it is affine."""
    a = as_affine(e) if not is_bool(e) else None
    return e if a is None else _aff(a[0], a[1], first)


def _ge0(coeffs: dict[str, int], c: int, first: str) -> Expr:
    """``sum(coeffs) + c >= 0`` in the form RFC 0077 prints (``2 <= i``, ``i < 1``, ``i + 6 < T``)."""
    coeffs = {n: v for n, v in coeffs.items() if v}
    if not coeffs:
        return TRUE if c >= 0 else FALSE
    if len(coeffs) == 1:
        (x, a), = coeffs.items()
        if a == 1 and c <= 0:
            return Bin("<=", Num(-c), Var(x))
        if a == -1 and c >= 0:
            return Bin("<", Var(x), Num(c + 1))
    # sum + c + 1 > 0  <=>  L < R
    k = c + 1
    lhs = _aff({n: -v for n, v in coeffs.items() if v < 0}, max(-k, 0), first)
    rhs = _aff({n: v for n, v in coeffs.items() if v > 0}, max(k, 0), first)
    return Bin("<", lhs, rhs)


def _pretty_bool(e: Expr, first: str) -> Expr:
    """Comparisons of affine sides in :func:`_ge0`'s form, constants folded."""
    e = simplify(e)
    if not free_vars(e):
        return TRUE if evaluate(e, {}) else FALSE
    if isinstance(e, Bin) and e.op in ("&&", "||"):
        a, b = _pretty_bool(e.lhs, first), _pretty_bool(e.rhs, first)
        if e.op == "&&":
            if FALSE in (a, b):
                return FALSE
            return _and(a, b)
        if TRUE in (a, b):
            return TRUE
        return b if a == FALSE else a if b == FALSE else Bin("||", a, b)
    if isinstance(e, Un) and e.op == "!":
        a = _pretty_bool(e.arg, first)
        if a in (TRUE, FALSE):
            return FALSE if a == TRUE else TRUE
        if isinstance(a, Bin) and a.op in ("<", "<="):
            d = as_affine(Bin("-", a.rhs, a.lhs))
            if d is not None:  # !(l < r) <=> l - r >= 0 ; !(l <= r) <=> l - r - 1 >= 0
                return _ge0({n: -v for n, v in d[0].items()}, -d[1] - (0 if a.op == "<" else 1), first)
        return Un("!", a)
    if isinstance(e, Bin) and e.op in ("<", "<=", ">", ">="):
        d = as_affine(Bin("-", e.rhs, e.lhs))
        if d is not None:
            coeffs, c = d
            if e.op == "<":      # r - l > 0
                return _ge0(coeffs, c - 1, first)
            if e.op == "<=":
                return _ge0(coeffs, c, first)
            neg = {n: -v for n, v in coeffs.items()}
            if e.op == ">":      # l - r > 0
                return _ge0(neg, -c - 1, first)
            return _ge0(neg, -c, first)
    return e


def pretty_condition(e: Expr, var: str = "i") -> Expr:
    """A condition with its comparisons in RFC 0077's form (``2 <= i``, ``i < 1``,
    ``i + 6 < T``) and constants folded; same value as ``e``."""
    return _norm(_pretty_bool(e, var))


__all__ = ["lower", "pretty_condition", "STRATEGIES"]

"""Step 1 and the lowering context: parts, structural guards, and conditions in the
global step.

Input: problem, graph, schedule and ``predicate_strategy``. Output: a
:class:`Context` holding the parts, the body order, the commit groups and the
prover, with memoised conditions (step, in-part, runs, gate, group present) built
directly in each part's local ``i``.

The parts, for trip count ``T >= 1`` and largest stage ``S`` (global step ``J``
runs over ``0 .. T + S - 1``; an op of stage ``s`` works on iteration ``J - s``
when ``0 <= J - s < T``):

========  ==============  ===================  ====================================
part      ``J``           extent               steps
========  ==============  ===================  ====================================
prologue  ``i``           ``min(T, S)``        ``0 .. min(T, S) - 1``
body      ``i + S``       ``max(T - S, 0)``    ``S .. T - 1``
epilogue  ``i + T``       ``S``                ``T .. T + S - 1``
========  ==============  ===================  ====================================

The extents add up to ``T + S`` for every ``T`` and each part starts where the one
before it ends (``min(T, S) + max(T - S, 0) = T``), so a step's ``J`` is the sum of
the earlier parts' extents plus ``i``, as :mod:`synth.program` defines it. The
``min``/``max`` are written only where ``min_trip_count`` leaves them open
(``S`` and ``T - S`` when ``T >= S`` always). A loop shorter than the pipeline
(``T <= S``) has no body step: its prologue stops at step ``T`` and its epilogue
starts there, with guards that keep each op inside ``0 <= J - s < T``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..expr import Bin, Call, Expr, Num, Var, simplify, substitute
from ..graph import Graph
from ..problem import Problem
from ..schedule import Schedule
from .exprs import FALSE, TRUE, add_k, aff_expr, conj, pretty_bool, sub_k
from .groups import Group, commit_groups
from .prover import Prover


@dataclass(frozen=True)
class PartInfo:
    """One part of the pipelined loop: where its steps lie in the global step ``J``."""

    name: str
    offset: Expr
    """``J = i + offset``."""
    extent: Expr
    lo: Expr
    """First global step of the part."""
    hi: Expr
    """One past its last global step."""
    bound: Optional[int]
    """An upper bound of the extent for every allowed ``T`` (None: unbounded)."""


def make_parts(S: int, T: Expr, tmin: int, var: str) -> tuple[PartInfo, ...]:
    """The prologue, body and epilogue of an ``S``-stage pipeline of ``T >= tmin >= 1`` steps."""
    fixed = isinstance(T, Num)
    if fixed:
        pro: Expr = Num(min(T.value, S))  # type: ignore[union-attr]
        body: Expr = Num(max(T.value - S, 0))  # type: ignore[union-attr]
    elif tmin >= S:
        pro, body = Num(S), aff_expr(simplify(Bin("-", T, Num(S))), var)
    else:
        pro = Call("min", (T, Num(S)))
        body = Call("max", (aff_expr(simplify(Bin("-", T, Num(S))), var), Num(0)))
    return (
        PartInfo("prologue", Num(0), pro, Num(0), pro, pro.value if isinstance(pro, Num) else S),
        PartInfo("body", Num(S), body, Num(S), T, body.value if isinstance(body, Num) else None),
        PartInfo("epilogue", T, Num(S), T, add_k(T, S), S),
    )


@dataclass
class Context:
    """Everything the lowering steps share; built by :meth:`make`. Its conditions are
    memoised, so build one per lowering."""

    problem: Problem
    graph: Graph
    sched: Schedule
    strategy: str
    S: int
    T: Expr
    tmin: int
    var: str
    body: list[int]
    """Op indices in body order."""
    pos: list[int]
    """Body position of each op."""
    groups: list[Group]
    group_of: dict[int, int]
    parts: tuple[PartInfo, ...]
    z3: Prover
    notes: list[str] = field(default_factory=list)
    _present: dict = field(default_factory=dict)
    _memo: dict = field(default_factory=dict)

    @staticmethod
    def make(problem: Problem, graph: Graph, sched: Schedule, strategy: str) -> "Context":
        """The context of one lowering (``min_trip_count >= 1``)."""
        S = sched.max_stage
        loop = problem.loop
        T: Expr = Var(loop.trip_count) if isinstance(loop.trip_count, str) else Num(loop.trip_count)
        var = "i" if loop.trip_count != "i" else "j"
        body = sched.body_order()
        pos = [0] * len(problem.ops)
        for p, o in enumerate(body):
            pos[o] = p
        groups, notes = commit_groups(problem, graph, sched, strategy, body)
        return Context(problem, graph, sched, strategy, S, T, loop.min_trip_count, var, body, pos, groups,
                       {o: g.gid for g in groups for o in g.ops}, make_parts(S, T, loop.min_trip_count, var),
                       Prover(T, loop.min_trip_count), notes)

    # -- conditions in a part's i (and T) ---------------------------------------------------
    # Every condition is built directly in the local variable of the part it is used in:
    # global step J is ``i + offset``, and ``step(part, m)`` is ``J - m``.

    def domain(self, part: PartInfo) -> Expr:
        """``0 <= i < extent`` (and ``T >= min_trip_count`` when symbolic), in the part's i."""
        i = Var(self.var)
        d = conj(Bin("<=", Num(0), i), Bin("<", i, part.extent))
        if isinstance(self.T, Var):
            d = conj(d, Bin(">=", self.T, Num(self.tmin)))
        return d

    def step(self, part: PartInfo, m: int = 0) -> Expr:
        """Global step ``J - m`` in ``part``'s i."""
        key = ("step", part.name, m)
        if key not in self._memo:
            self._memo[key] = aff_expr(simplify(Bin("-", Bin("+", Var(self.var), part.offset), Num(m))),
                                       self.var)
        return self._memo[key]

    def in_part(self, part: PartInfo, j: Expr) -> Expr:
        """Step ``j`` lies in ``part``."""
        key = ("in", part.name, j)
        if key not in self._memo:
            self._memo[key] = pretty_bool(conj(Bin("<=", part.lo, j), Bin("<", j, part.hi)), self.var)
        return self._memo[key]

    def runs(self, stage: int, j: Expr) -> Expr:
        """An op of ``stage`` runs in step ``j``: ``0 <= j - stage < T``."""
        key = ("runs", stage, j)
        if key not in self._memo:
            self._memo[key] = pretty_bool(conj(Bin("<=", Num(stage), j), Bin("<", j, add_k(self.T, stage))),
                                          self.var)
        return self._memo[key]

    def gate_holds(self, g: Group, j: Expr) -> Expr:
        """The commit gate of ``g`` in step ``j`` (TRUE when ungated or not counted)."""
        if not g.gate or not g.counted_gate:
            return TRUE
        it = sub_k(j, g.stage)
        conds = [self.pred_at(o, it) for o in g.gate]
        out = conds[0]
        for c in conds[1:]:
            out = Bin("||", out, c)
        return pretty_bool(out, self.var)

    def pred_at(self, op: int, iteration: Expr) -> Expr:
        """The affine predicate of ``op`` at ``iteration``."""
        w = self.problem.ops[op].when
        assert w is not None and w.expr is not None
        return substitute(w.expr, {self.problem.loop.var: iteration})

    def present(self, g: Group, j: Expr) -> Expr:
        """Group ``g`` is committed in step ``j``."""
        key = (g.gid, j)
        if key not in self._present:
            self._present[key] = pretty_bool(conj(self.runs(g.stage, j), self.gate_holds(g, j)), self.var)
        return self._present[key]

    def guard(self, part: PartInfo, stage: int) -> Optional[Expr]:
        """Structural guard of a stage-``stage`` statement in ``part``: None (it runs at every
        ``i``), FALSE (never), or the condition in ``i`` (and ``T``) under which
        ``0 <= J - stage < T``: ``s <= i`` in the prologue, ``i < s`` in the epilogue, and
        there also ``s <= i + T`` where a loop shorter than ``s`` steps is allowed."""
        key = ("guard", part.name, stage)
        if key in self._memo:
            return self._memo[key]
        i, S = Var(self.var), self.S
        out: Optional[Expr] = None
        if part.name == "prologue":
            # i < min(T, S) there, so J - stage < T always holds
            if stage >= S or (isinstance(self.T, Num) and stage >= self.T.value):
                out = FALSE
            elif stage > 0:
                out = Bin("<=", Num(stage), i)
        elif part.name == "epilogue":
            if stage == 0:
                out = FALSE
            else:
                conds = []
                if stage < S:
                    conds.append(Bin("<", i, Num(stage)))
                if isinstance(self.T, Num):
                    if stage > self.T.value:
                        conds.insert(0, Bin("<=", Num(stage - self.T.value), i))
                elif stage > self.tmin:
                    conds.insert(0, Bin("<=", Num(stage), Bin("+", i, self.T)))
                for c in conds:
                    out = c if out is None else Bin("&&", out, c)
        self._memo[key] = out
        return out

    def part(self, name: str) -> PartInfo:
        """The part called ``name``."""
        return next(p for p in self.parts if p.name == name)

"""Step 1 and the lowering context: trip-count check, parts, and conditions in the
global step.

Input: problem, graph, schedule and ``predicate_strategy``. Output: a
:class:`_Ctx` holding the parts (prologue ``J = i``, body ``J = i + S``, epilogue
``J = i + T``), the body order, the commit groups and the prover, with memoised
conditions (step, in-part, runs, gate, group present) built directly in each
part's local ``i``. :func:`_check_trip_count` raises :class:`SynthError` when the
pipeline needs more steps than the trip count allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SynthError
from ..expr import Bin, Expr, Num, Var, simplify, substitute
from ..graph import Graph
from ..problem import Problem
from ..schedule import Schedule
from .exprs import TRUE, _and, _add, _sub, _aff_expr, _pretty_bool
from .prover import _Prover
from .groups import _Group, _commit_groups


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


@dataclass(frozen=True)
class _PartInfo:
    name: str
    offset: Expr
    """``J = i + offset``."""
    extent: Expr


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

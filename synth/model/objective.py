"""The objective: what "best" means, its per-II encoding, and its lower bounds.

**What is minimized** (docs/latency_model.md, "Objective"). The problem's
``objective`` terms form a weighted sum, the *primary* objective:

* ``latency``: the cycles ``(T - 1) * II + tail`` for a static trip count; for a
  symbolic one the steady-state cost ``II`` (T -> infinity), with ``tail`` as the
  next tie-breaker;
* ``stages``: ``max_stage``;
* ``shared_memory``: shared bytes at the chosen multiplicities.

Ties are broken lexicographically by latency (cycles; or ``II`` then ``tail``),
then fewer stages, then less shared memory. The whole order is the tuple
:func:`key`.

**Per-II encoding.** With ``II`` fixed, the key restricted to that II is a
lexicographic list of linear terms (``primary_II``, ``tail``, ``max_stage``,
shared units), folded into one integer objective with mixed-radix weights
(:func:`add_objective`); the CP-SAT bound on it decodes back to a bound on the
primary objective (:func:`decode_bound`).

**Lower bounds.** :func:`relaxation` drops units, blocking and the modulo
structure: absolute times ``T_a = s_a * II + t_a`` with
``T_b - T_a >= l - d * II`` per edge and ``0 <= T_a <= (S_a + 1) * II - issue_a``.
Its feasibility is monotone in II; the least feasible II, raised to the
resource bound ``ceil(sum issue / count)`` per unit and to the least II whose
smallest possible multiplicities fit the capacities (:func:`capacity_ok`), is
:func:`ii_lower_bound`.
Its longest paths give :func:`tail_lower_bound`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..graph import Graph
from ..problem import Problem
from .vars import Model, Vars


@dataclass(frozen=True)
class ObjectiveSpec:
    w_lat: int
    w_st: int
    w_sh: int
    symbolic: bool
    trip: int
    """The static trip count (``min_trip_count`` when symbolic, unused then)."""

    @staticmethod
    def of(problem: Problem) -> ObjectiveSpec:
        w = {"latency": 0, "stages": 0, "shared_memory": 0}
        for name, weight in problem.objective.terms:
            w[name] = w.get(name, 0) + weight
        if not any(w.values()):
            w["latency"] = 1
        return ObjectiveSpec(w["latency"], w["stages"], w["shared_memory"], problem.loop.symbolic,
                             problem.loop.min_trip_count)

    @property
    def latency_only(self) -> bool:
        return self.w_lat > 0 and self.w_st == 0 and self.w_sh == 0

    def latency_value(self, ii: int, tail: int) -> int:
        return ii if self.symbolic else (self.trip - 1) * ii + tail

    def primary(self, ii: int, tail: int, max_stage: int, shared: int) -> int:
        return self.w_lat * self.latency_value(ii, tail) + self.w_st * max_stage + self.w_sh * shared


Key = tuple[int, int, int, int, int]


def key(spec: ObjectiveSpec, ii: int, tail: int, max_stage: int, shared: int) -> Key:
    """The total order on schedules: (primary, latency, tail-or-0, stages, shared)."""
    lat2 = tail if spec.symbolic else 0
    return (spec.primary(ii, tail, max_stage, shared), spec.latency_value(ii, tail), lat2, max_stage, shared)


@dataclass(frozen=True)
class Encoded:
    """The folded per-II objective and how to read a bound on it back."""

    radix0: int
    """Weight of the first lexicographic term."""
    first_is_primary: bool
    first_scale: int
    """primary_II = first_scale * first term (+ constant) when ``first_is_primary``."""
    primary_expr: object
    """Linear expression of the primary objective minus its II-only constant."""
    complete: bool = True
    """False when the trailing tie-breakers were left out of the folded objective because
    their ranges multiplied past 64 bits (huge latencies and byte counts): an OPTIMAL
    answer then proves only the terms that were kept."""


def add_objective(m: Model, v: Vars, spec: ObjectiveSpec) -> Encoded:
    """Minimize the key restricted to ``v.ii`` as one folded integer objective."""
    q = v.shared_quantum
    tail_hi = v.tail_hi
    st_hi = v.stage_hi
    sh_hi = v.shared_hi
    wl = 0 if spec.symbolic else spec.w_lat
    prim_terms = [(wl, v.tail, tail_hi), (spec.w_st, v.max_stage, st_hi), (spec.w_sh * q, v.shared_units, sh_hi)]
    prim_terms = [t for t in prim_terms if t[0] > 0]
    primary_expr = sum(c * x for c, x, _ in prim_terms) if prim_terms else 0
    lex: list[tuple[object, int]] = []
    first_scale = 1
    first_is_primary = False
    if len(prim_terms) == 1:
        first_scale = prim_terms[0][0]
        lex.append((prim_terms[0][1], prim_terms[0][2]))
        first_is_primary = True
    elif len(prim_terms) > 1:
        lex.append((primary_expr, sum(c * hi for c, _, hi in prim_terms)))
        first_is_primary = True
    for var, hi in ((v.tail, tail_hi), (v.max_stage, st_hi), (v.shared_units, sh_hi)):
        if not any(var is x for x, _ in lex):
            lex.append((var, hi))
    complete = True
    while len(lex) > 1 and _radix_product(lex) > FOLD_LIMIT:
        lex.pop()  # drop the least significant tie-breaker rather than overflow CP-SAT's int64
        complete = False
    weights = []
    w = 1
    for _, hi in reversed(lex):
        weights.append(w)
        w *= hi + 1
    weights.reverse()
    m.m.Minimize(sum(wt * e for wt, (e, _) in zip(weights, lex)))
    if m.log:
        m.formulas.append("minimize lexicographically: " + ", ".join(str(e) for e, _ in lex))
    return Encoded(weights[0], first_is_primary, first_scale, primary_expr, complete)


FOLD_LIMIT = 1 << 60
"""Largest range of the folded objective (CP-SAT works in int64; headroom for its bounds)."""


def _radix_product(lex: list[tuple[object, int]]) -> int:
    out = 1
    for _, hi in lex:
        out *= hi + 1
    return out


def decode_bound(spec: ObjectiveSpec, enc: Encoded, ii: int, bound: float) -> Optional[int]:
    """A lower bound on the primary objective at this II from CP-SAT's bound on the folded one."""
    if not enc.first_is_primary:
        return spec.w_lat * ii if spec.symbolic else None
    first = int(bound + 1e-6) // enc.radix0
    const = spec.w_lat * ii if spec.symbolic else spec.w_lat * (spec.trip - 1) * ii
    return const + enc.first_scale * first


# ---------------------------------------------------------------------------- bounds


def stage_ranges(problem: Problem, stage_limit: int) -> list[tuple[int, int]]:
    """(lowest, highest) stage of each op: pinned, or ``0..stage_limit``."""
    if problem.pins.stage is not None:
        return [(s, s) for s in problem.pins.stage]
    return [(0, stage_limit)] * len(problem.ops)


def edge_gap(problem: Problem, e) -> int:
    """Least ``T_b - T_a`` (absolute issue times, distance included) of a hard edge ``a -> b``: its latency,
    and at least ``issue_a`` when both ops are on one unit of count 1 (NoOverlap modulo II: with lag
    ``D = 0`` b follows a in the body, so ``t_b >= t_a + issue_a``; with ``D >= 1``,
    ``D * II + t_b - t_a >= II - (II - issue_a)``)."""
    a, b = problem.ops[e.src], problem.ops[e.dst]
    if e.src != e.dst and a.unit == b.unit and problem.target.unit(a.unit).count == 1:
        return max(e.latency, a.issue)
    return e.latency


def relaxation(problem: Problem, graph: Graph, ii: int, ranges: list[tuple[int, int]]) -> Optional[list[int]]:
    """Least absolute times ``T_a`` of the relaxation at ``ii`` (Bellman-Ford), or None if infeasible."""
    ops = problem.ops
    n = len(ops)
    lo = [ranges[a][0] * ii for a in range(n)]
    hi = [(ranges[a][1] + 1) * ii - ops[a].issue for a in range(n)]
    if any(lo[a] > hi[a] for a in range(n)):
        return None
    edges = [(e.src, e.dst, edge_gap(problem, e) - e.distance * ii) for e in graph.constraints()]
    T = lo[:]
    for _ in range(n + 1):
        changed = False
        for a, b, w in edges:
            if T[a] + w > T[b]:
                T[b] = T[a] + w
                if T[b] > hi[b]:
                    return None
                changed = True
        if not changed:
            return T
    return None  # a positive cycle


def ii_resource_bound(problem: Problem) -> int:
    """``max(max issue, ceil(sum issue / count) per unit)``."""
    lo = max(op.issue for op in problem.ops)
    for u in problem.target.units:
        total = sum(op.issue for op in problem.ops if op.unit == u.name)
        lo = max(lo, -(-total // u.count))
    return lo


def ii_big(problem: Problem) -> int:
    """An II at which every stage/order/async choice has a timing (so: feasible iff feasible here)."""
    return sum(op.latency + op.issue for op in problem.ops) + max(op.issue for op in problem.ops) + 1


def least_multiplicities(problem: Problem, graph: Graph, ii: int) -> dict[str, int]:
    """Slots every buffer needs at ``ii`` whatever the schedule (see :func:`capacity_ok`)."""
    need: dict[str, int] = {b.name: 1 for b in problem.buffers}
    for e in graph.edges:
        if e.kind != "raw" or e.buffer is None or problem.buffer(e.buffer).carried:
            continue
        need[e.buffer] = max(need[e.buffer], -(-e.latency // ii))
    return need


def ii_floors(problem: Problem, graph: Graph, ii: int, stage_limit: int) -> tuple[int, int, int]:
    """Lower bounds (tail, max_stage, shared bytes) over schedules with initiation interval ``ii``."""
    T = relaxation(problem, graph, ii, stage_ranges(problem, stage_limit))
    if T is None:
        return 1 << 40, 0, 0
    tail = max(T[a] + op.latency for a, op in enumerate(problem.ops))
    stages = max(T[a] // ii for a in range(len(problem.ops)))
    need = least_multiplicities(problem, graph, ii)
    shared = sum(b.bytes * need[b.name] for b in problem.buffers if b.space == "shared")
    return tail, stages, shared


def capacity_ok(problem: Problem, graph: Graph, ii: int) -> bool:
    """Whether the least multiplicities any timing at ``ii`` needs fit the capacities.

    A RAW edge ``a -> b`` (latency l) needs ``M >= D + [b after a]`` slots with
    ``II * D + t_b - t_a >= l``: if ``b`` is after ``a``, ``t_b - t_a <= II - issue_b``,
    else ``t_b <= t_a``; either way ``II * M >= l``, so ``M >= max(1, ceil(l / II))``.
    """
    need = least_multiplicities(problem, graph, ii)
    for space, cap in (("shared", problem.target.shared_bytes), ("register", problem.target.registers_bytes)):
        if cap is None:
            continue
        if sum(b.bytes * need.get(b.name, 1) for b in problem.buffers if b.space == space) > cap:
            return False
    return True


def ii_lower_bound(problem: Problem, graph: Graph, stage_limit: int) -> int:
    """Resource-, recurrence- and capacity-constrained lower bound on II (see module docstring)."""
    ranges = stage_ranges(problem, stage_limit)
    lo = ii_resource_bound(problem)
    hi = ii_big(problem)
    if relaxation(problem, graph, hi, ranges) is None:
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if relaxation(problem, graph, mid, ranges) is None or not capacity_ok(problem, graph, mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def tail_lower_bound(problem: Problem, graph: Graph, ii: int, stage_limit: int) -> int:
    """Least tail at ``ii`` in the relaxation (``max_a T_a + l_a``); huge when infeasible."""
    T = relaxation(problem, graph, ii, stage_ranges(problem, stage_limit))
    if T is None:
        return 1 << 40
    return max(T[a] + op.latency for a, op in enumerate(problem.ops))


def tail_floor(problem: Problem, graph: Graph) -> int:
    """A tail bound valid at every II: longest chain of distance-0 edges plus the last latency."""
    ops = problem.ops
    n = len(ops)
    T = [0] * n
    zero = [e for e in graph.constraints() if e.distance == 0]
    for _ in range(n + 1):
        changed = False
        for e in zero:
            if T[e.src] + edge_gap(problem, e) > T[e.dst]:
                T[e.dst] = T[e.src] + edge_gap(problem, e)
                changed = True
        if not changed:
            break
    return max(T[a] + op.latency for a, op in enumerate(ops))


def primary_lower_bound(spec: ObjectiveSpec, ii: int, tail_lb: int, shared_lb: int) -> int:
    """Lower bound on the primary objective over schedules with initiation interval ``ii``."""
    return spec.primary(ii, tail_lb, 0, shared_lb)

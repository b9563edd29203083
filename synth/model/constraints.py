"""Constraint families of the fixed-II model, one function each.

Each ``add_<family>(m, v, problem, graph)`` states the inequality it adds in its
docstring (notation of docs/latency_model.md: stage ``s``, offset ``t``, async
flag ``x``, initiation interval ``II``, multiplicity ``M``). Families that a user
can get wrong (a dependence, a unit, a capacity, a pin, a stage bound) are
guarded by an enforcement literal from :meth:`Model.family`, so an infeasible
problem can be re-solved with those literals as assumptions and explained.
The latency model's own rules (blocking, multiplicity, tail) are not guarded.

Inputs are never modified; every function only adds to ``m``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..graph import Graph, describe
from ..problem import Problem
from .vars import Model, Vars

DEFAULT_MAX_STAGE = 5
"""Stage bound when the problem does not set ``schedule.max_stage``."""


@dataclass(frozen=True)
class StageBound:
    key: tuple
    bound: int
    text: str


def stage_bounds(problem: Problem) -> list[StageBound]:
    """The upper bounds on every op's stage, each a user-visible reason."""
    out = []
    if not problem.loop.symbolic and problem.pins.stage is None:
        # Loops shorter than the pipeline lower fine; for a fixed trip count, stages beyond it overlap nothing.
        mt = problem.loop.min_trip_count
        out.append(StageBound(("trip",), mt - 1,
                              f"trip_count {mt} allows at most {mt} stages (more would overlap nothing)"))
    if problem.pins.max_stage is not None:
        out.append(StageBound(("max_stage",), problem.pins.max_stage,
                              f"schedule.max_stage is {problem.pins.max_stage}"))
    elif problem.pins.stage is None:
        out.append(StageBound(("default_max_stage",), DEFAULT_MAX_STAGE,
                              f"the default stage bound max_stage {DEFAULT_MAX_STAGE}"))
    return out


def stage_domain_hi(problem: Problem) -> int:
    """Upper end of the stage variables' domain: one above the tightest bound (so that bound is a
    constraint an infeasibility core can name), and wide enough for every pinned stage.

    Never wider: a loop of 10^6 iterations has the same few stages as one of 10.
    """
    his = [max(b.bound, 0) for b in stage_bounds(problem)]
    pinned = max(problem.pins.stage) if problem.pins.stage is not None else 0
    if not his:
        return pinned
    return max(min(max(his), min(his) + 1), pinned)


def add_stage_bounds(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """``s_a <= bound`` for every bound of :func:`stage_bounds`; ``max_stage = max_a s_a``."""
    for b in stage_bounds(problem):
        lit = m.family(b.key, b.text)
        for a, op in enumerate(problem.ops):
            m.add(v.stage[a] <= b.bound, f"stage[{op.name}] <= {b.bound}", [lit])
    m.m.AddMaxEquality(v.max_stage, v.stage)


def add_async(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """Async flags follow stages (TVM): ``x_a = stage_async[s_a]`` for ops on async units.

    Stage indicators ``at[a,k] <=> s_a = k``; ``at[a,k] -> x_a = stage_async[k]``.
    """
    for a, op in enumerate(problem.ops):
        if not problem.target.unit(op.unit).is_async:
            continue
        at = [m.bool(f"at[{op.name},{k}]") for k in range(v.stage_hi + 1)]
        m.m.AddExactlyOne(at)
        m.add(v.stage[a] == sum(k * at[k] for k in range(len(at))), f"stage[{op.name}] = sum k*at[{op.name},k]")
        for k, lit in enumerate(at):
            m.add(v.is_async[a] == v.stage_async[k], f"async[{op.name}] = stage_async[{k}]", [lit])


def add_pins(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """Pinned parts of the schedule, each family under its own literal.

    * ``schedule.stage``: ``s_a = p_a``;
    * ``schedule.order``: for consecutive ``u, v`` of the pinned order,
      ``t_v >= t_u + [u > v]`` (the body order is the order of ``(t, index)``);
    * ``schedule.async_stages``: ``stage_async[k] = [k listed]``.
    """
    p = problem.pins
    if p.stage is not None:
        lit = m.family(("pin_stage",), f"pinned schedule.stage {list(p.stage)}")
        for a, op in enumerate(problem.ops):
            m.add(v.stage[a] == p.stage[a], f"stage[{op.name}] = {p.stage[a]}", [lit])
    if p.order is not None:
        lit = m.family(("pin_order",), f"pinned schedule.order {list(p.order)}")
        seq = sorted(range(len(p.order)), key=lambda i: p.order[i])
        for u, w in zip(seq, seq[1:]):
            gap = 1 if u > w else 0
            m.add(v.t[w] >= v.t[u] + gap,
                  f"t[{problem.ops[w].name}] >= t[{problem.ops[u].name}] + {gap}", [lit])
    if p.async_stages is not None:
        lit = m.family(("pin_async",), f"pinned schedule.async_stages {list(p.async_stages)}")
        for k in range(v.stage_hi + 1):
            m.add(v.stage_async[k] == (1 if k in p.async_stages else 0),
                  f"stage_async[{k}] = {int(k in p.async_stages)}", [lit])


def add_dependences(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """Every hard edge ``a -> b`` (distance d, latency l), with ``D = s_b + d - s_a``:

    ``D >= 0`` and ``II * D + t_b - t_a >= max(l, [a > b])``.

    The second term covers "when ``D = 0``, ``a`` precedes ``b`` in the body":
    for ``D >= 1`` the inequality ``II + t_b - t_a >= 1`` always holds because
    ``t_a <= II - issue_a``.
    """
    ii = v.ii
    for i, e in enumerate(graph.edges):
        if not e.constraint:
            continue
        lit = m.family(("dep", i), describe(problem, e) + f", latency {e.latency}")
        a, b = e.src, e.dst
        na, nb = problem.ops[a].name, problem.ops[b].name
        need = max(e.latency, 1 if a > b else 0)
        if a == b:
            m.add(ii * e.distance >= need, f"{ii}*{e.distance} >= {need}", [lit])
            continue
        lag = v.stage[b] + e.distance - v.stage[a]
        m.add(lag >= 0, f"stage[{nb}] + {e.distance} - stage[{na}] >= 0", [lit])
        m.add(ii * lag + v.t[b] - v.t[a] >= need,
              f"{ii}*(stage[{nb}] + {e.distance} - stage[{na}]) + t[{nb}] - t[{na}] >= {need}", [lit])


def writer_pairs(problem: Problem) -> list[tuple[int, int, str]]:
    """``(a, b, buffer)`` for ops ``a < b`` on one async unit that both write ``buffer`` (load shares of
    one tile): :func:`add_writer_order` keeps them in program order."""
    out = []
    for buf in problem.buffers:
        ws = [a for a, op in enumerate(problem.ops) if buf.name in op.writes and problem.target.unit(op.unit).is_async]
        out += [(a, b, buf.name) for i, a in enumerate(ws) for b in ws[i + 1:]
                if problem.ops[a].unit == problem.ops[b].unit]
    return out


def writer_order_ok(problem: Problem, stage, order) -> bool:
    """Whether every pair of :func:`writer_pairs` issues in program order (``(s_a, o_a) < (s_b, o_b)``)."""
    return all((stage[a], order[a]) < (stage[b], order[b]) for a, b, _ in writer_pairs(problem))


def add_writer_order(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """Async writers ``a < b`` of one buffer on one unit issue in program order for the same iteration:
    ``s_b >= s_a`` and ``II * (s_b - s_a) + t_b - t_a >= 0`` (with ``a < b`` an equal offset keeps ``a``
    first). The lowering (``synth.lower.requirements.producer_edges``) waits for a version's last writer
    in program order; its group then closes after every other writer's, so one wait covers them all.
    """
    for a, b, buf in writer_pairs(problem):
        na, nb = problem.ops[a].name, problem.ops[b].name
        lit = m.family(("writer_order", a, b), f"{na} and {nb} both write {buf}: the earlier in program order "
                                               "issues first (the lowering waits for the last writer)")
        m.add(v.stage[b] >= v.stage[a], f"stage[{nb}] >= stage[{na}]", [lit])
        m.add(v.ii * (v.stage[b] - v.stage[a]) + v.t[b] - v.t[a] >= 0,
              f"{v.ii}*(stage[{nb}] - stage[{na}]) + t[{nb}] - t[{na}] >= 0", [lit])


def weaving_applies(problem: Problem) -> bool:
    """Whether :func:`add_weaving` constrains ``problem``: a ``kind: gemm`` problem (its CUDA emitter
    weaves) whose order is not pinned, with a tensor unit."""
    return (problem.gemm is not None and problem.pins.order is None
            and any(op.unit == WEAVE_HOST_UNIT for op in problem.ops))


WEAVE_HOST_UNIT = "tensor"
"""The unit whose ops (the mma of a k16 step) host the ldmatrix and copies the CUDA emitter weaves."""


@dataclass(frozen=True)
class WeaveRules:
    """The ops :func:`add_weaving` constrains (indices into ``problem.ops``)."""

    hosts: tuple[int, ...]
    """Ops on :data:`WEAVE_HOST_UNIT`."""
    guests: tuple[int, ...]
    """Ops that need a host after them: async copies and every op feeding a host."""
    feeds: tuple[tuple[int, int, int], ...]
    """``(b, c, d)``: RAW edge of distance ``d`` from guest ``b`` to host ``c`` (none with one host)."""
    copies: tuple[int, ...]
    """Async copies: no two without a host between them."""


def weave_rules(problem: Problem, graph: Graph) -> WeaveRules:
    """The hosts, guests, feeding edges and copies of :func:`add_weaving`."""
    ops = problem.ops
    hosts = tuple(a for a, op in enumerate(ops) if op.unit == WEAVE_HOST_UNIT)
    feeds = tuple(sorted({(e.src, e.dst, e.distance) for e in graph.constraints()
                          if e.kind == "raw" and e.dst in hosts and e.src not in hosts}))
    if len(hosts) < 2:
        # one mma per k-tile (BK = 16): its fragments are one register set, so the next k-tile's ldmatrix
        # follows the mma that reads them (a hard WAR edge) and cannot precede it as a guest
        feeds = ()
    copies = tuple(a for a, op in enumerate(ops) if problem.target.unit(op.unit).is_async)
    guests = tuple(sorted(set(copies) | {b for b, _, _ in feeds}))
    return WeaveRules(hosts, guests, feeds, copies)


def weaving_ok(problem: Problem, graph: Graph, stage, order) -> bool:
    """Whether a schedule (stages, body positions) obeys :func:`add_weaving` (True when it does not apply)."""
    if not weaving_applies(problem):
        return True
    r = weave_rules(problem, graph)

    def between(a: int, b: int) -> bool:
        return any(order[a] < order[h] < order[b] for h in r.hosts)

    if any(not any(order[b] < order[h] for h in r.hosts) for b in r.guests):
        return False
    if any(stage[c] + d == stage[b] and not any(order[b] < order[h] < order[c] for h in r.hosts if h != c)
           for b, c, d in r.feeds):
        return False
    return all(between(a, b) if order[a] < order[b] else between(b, a)
               for i, a in enumerate(r.copies) for b in r.copies[i + 1:])


def precedes(m: Model, v: Vars, problem: Problem, a: int, b: int):
    """``prec[a, b]``: 1 exactly when ``a`` precedes ``b`` in the body (``t_b - t_a >= [a > b]``)."""
    if (b, a) in v.prec:
        return v.prec[(b, a)].Not()
    if (a, b) not in v.prec:
        lit = m.bool(f"prec[{problem.ops[a].name},{problem.ops[b].name}]")
        gap = 1 if a > b else 0
        m.m.Add(v.t[b] - v.t[a] >= gap).OnlyEnforceIf(lit)
        m.m.Add(v.t[b] - v.t[a] <= gap - 1).OnlyEnforceIf(lit.Not())
        v.prec[(a, b)] = lit
    return v.prec[(a, b)]


def add_weaving(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """The CUDA emitter's weaving (``kind: gemm``, order not pinned; docs/latency_model.md, constraint 8).

    The emitter interleaves an ldmatrix or a copy with the mma.sync of the next tensor op after it in the
    body (its *host*) unless it feeds that op; otherwise it stands alone and in-order issue puts it after
    the previous mma's HMMAs, which the offsets here cannot express. So, with ``prec`` the body order:

    * every guest (async copy, op feeding a host) has a host after it: ``OR_h prec[b, h]``;
    * a guest ``b`` feeding host ``c`` in the same step (``s_c + d = s_b``) has another host between them:
      ``OR_{h != c} (prec[b, h] AND prec[h, c])``;
    * two copies have a host between them (each HMMA-free stretch holds one copy op).
    """
    if not weaving_applies(problem):
        return
    r = weave_rules(problem, graph)
    if not r.guests:
        return
    lit = m.family(("weaving",), "the CUDA emitter's weaving: every ldmatrix and copy has an mma after it "
                                 "that it does not feed, and copies are separated by an mma")
    mid: dict[tuple[int, int, int], object] = {}

    def between(a: int, h: int, b: int):
        if (a, h, b) not in mid:
            z = m.bool(f"between[{problem.ops[a].name},{problem.ops[h].name},{problem.ops[b].name}]")
            m.m.AddImplication(z, precedes(m, v, problem, a, h))
            m.m.AddImplication(z, precedes(m, v, problem, h, b))
            mid[(a, h, b)] = z
        return mid[(a, h, b)]

    for b in r.guests:
        m.m.AddBoolOr([precedes(m, v, problem, b, h) for h in r.hosts if h != b]).OnlyEnforceIf(lit)
    for b, c, d in r.feeds:
        same = m.bool(f"same_step[{problem.ops[b].name},{problem.ops[c].name}]")
        m.m.Add(v.stage[c] + d - v.stage[b] == 0).OnlyEnforceIf(same)
        m.m.Add(v.stage[c] + d - v.stage[b] != 0).OnlyEnforceIf(same.Not())
        m.m.AddBoolOr([same.Not()] + [between(b, h, c) for h in r.hosts if h != c]).OnlyEnforceIf(lit)
    for i, a in enumerate(r.copies):
        for b in r.copies[i + 1:]:
            ab = precedes(m, v, problem, a, b)
            m.m.AddBoolOr([ab.Not()] + [between(a, h, b) for h in r.hosts]).OnlyEnforceIf(lit)
            m.m.AddBoolOr([ab] + [between(b, h, a) for h in r.hosts]).OnlyEnforceIf(lit)
    if m.log:
        m.formulas.append("weaving: every guest has a host after it, a same-step feeder a host between, "
                          "copies a host between them")


def add_units(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """At most ``count`` busy intervals ``[t_a, t_a + issue_a)`` of a unit overlap (NoOverlap / Cumulative)."""
    for u in problem.target.units:
        members = [a for a, op in enumerate(problem.ops) if op.unit == u.name]
        if len(members) <= u.count:
            continue
        lit = m.family(("unit", u.name), f"unit {u.name} runs {u.count} op{'s' if u.count > 1 else ''} at a time")
        ivs = [m.m.NewOptionalFixedSizeIntervalVar(v.t[a], problem.ops[a].issue, lit, f"busy[{problem.ops[a].name}]")
               for a in members]
        if u.count == 1:
            m.m.AddNoOverlap(ivs)
        else:
            m.m.AddCumulative(ivs, [1] * len(ivs), u.count)
        if m.log:
            m.formulas.append(f"at most {u.count} of busy[{', '.join(problem.ops[a].name for a in members)}] overlap")


def add_blocking(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """A sync op ``a`` on an async unit blocks in-order issue until its result is ready.

    With ``tau_b = n * t_b + b`` (distinct, ordered like the body):
    no op after ``a`` in the body issues before ``t_a + l_a``, i.e. no ``tau_b``
    lies in ``(tau_a, n * (t_a + l_a))``: a NoOverlap of the window
    ``[tau_a, n * (t_a + l_a))`` (present when ``x_a = 0``) with the points
    ``[tau_b, tau_b + 1)`` of every other op. The next step's ops wait too:
    ``x_a = 0 -> t_a + l_a <= II + min_b t_b`` (``min_b t_b = 0`` by symmetry breaking).
    """
    ops = problem.ops
    n = len(ops)
    cands = [a for a, op in enumerate(ops) if problem.target.unit(op.unit).is_async and op.latency > 0]
    if not cands:
        return
    ivs = []
    for b, op in enumerate(ops):
        tau = v.tau(b)
        if b in cands:
            sync = v.is_async[b].Not()
            ivs.append(m.m.NewOptionalFixedSizeIntervalVar(tau, 1, v.is_async[b], f"point[{op.name}]"))
            ivs.append(m.m.NewOptionalFixedSizeIntervalVar(tau, n * op.latency - b, sync, f"block[{op.name}]"))
            m.add(v.t[b] + op.latency <= v.ii, f"t[{op.name}] + {op.latency} <= {v.ii}", [sync])
        else:
            ivs.append(m.m.NewFixedSizeIntervalVar(tau, 1, f"point[{op.name}]"))
    m.m.AddNoOverlap(ivs)
    if m.log:
        m.formulas.append("no op issues inside the window of a blocking sync op on an async unit")


def before_lit(m: Model, v: Vars, problem: Problem, a: int, b: int):
    """``before[a, b]``, forced to 1 when ``a`` precedes ``b`` (``t_b - t_a >= [a > b]``)."""
    if (a, b) not in v.before:
        lit = m.bool(f"before[{problem.ops[a].name},{problem.ops[b].name}]")
        gap = 1 if a > b else 0
        m.add(v.t[b] - v.t[a] <= gap - 1, f"not before -> t[{problem.ops[b].name}] - t[{problem.ops[a].name}] < {gap}",
              [lit.Not()])
        v.before[(a, b)] = lit
    return v.before[(a, b)]


def add_multiplicity(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """``M_x >= s_b + d - s_a + before[a, b] + x_b`` for every RAW edge ``a -> b`` on a
    non-carried buffer ``x`` (exactly :func:`synth.schedule.multiplicity`); carried: ``M = 1``.

    Redundant, for the LP: ``II * M_x >= l + issue_b * before[a, b] + II * x_b`` (with
    ``II * D + t_b - t_a >= l``: if ``b`` is after ``a`` then ``t_b - t_a <= II - issue_b``,
    else ``t_b <= t_a``).
    """
    for e in graph.edges:
        if e.kind != "raw" or e.buffer is None or problem.buffer(e.buffer).carried:
            continue
        a, b = e.src, e.dst
        mv = v.mult[e.buffer]
        lag = v.stage[b] + e.distance - v.stage[a]
        xb = v.is_async[b]
        if a == b:
            m.add(mv >= e.distance + xb, f"mult[{e.buffer}] >= {e.distance} + async[{problem.ops[b].name}]")
            continue
        bl = before_lit(m, v, problem, a, b)
        nb = problem.ops[b].name
        m.add(mv >= lag + bl + xb, f"mult[{e.buffer}] >= stage lag + before[{problem.ops[a].name},{nb}] + async[{nb}]")
        m.add(v.ii * mv >= e.latency + problem.ops[b].issue * bl + v.ii * xb,
              f"{v.ii}*mult[{e.buffer}] >= {e.latency} + {problem.ops[b].issue}*before[{problem.ops[a].name},{nb}]"
              f" + {v.ii}*async[{nb}]")


def add_capacity(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """``sum bytes_x * M_x <= target.shared_bytes`` over shared buffers (and registers when given)."""
    q = v.shared_quantum
    shared = [(b.bytes // q, v.mult[b.name]) for b in problem.buffers if b.space == "shared"]
    m.add(v.shared_units == sum(c * x for c, x in shared), "shared_bytes/q = sum bytes*mult / q")
    lit = m.family(("shared",), f"target.shared_bytes {problem.target.shared_bytes}")
    m.add(v.shared_units <= problem.target.shared_bytes // q,
          f"sum shared bytes*mult <= {problem.target.shared_bytes}", [lit])
    regs = problem.target.registers_bytes
    if regs is not None:
        lit = m.family(("registers",), f"target.registers_bytes {regs}")
        m.add(sum(b.bytes * v.mult[b.name] for b in problem.buffers if b.space == "register") <= regs,
              f"sum register bytes*mult <= {regs}", [lit])


def add_tail(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """``tail >= II * s_a + t_a + l_a`` (the last iteration's results are ready by ``(T-1)*II + tail``)."""
    for a, op in enumerate(problem.ops):
        m.add(v.tail >= v.ii * v.stage[a] + v.t[a] + op.latency,
              f"tail >= {v.ii}*stage[{op.name}] + t[{op.name}] + {op.latency}")


def add_symmetry(m: Model, v: Vars, problem: Problem, graph: Graph) -> None:
    """Symmetry breaking: ``min_a t_a = 0`` (shifting every offset keeps a schedule valid and
    shortens the tail) and, when stages and async stages are free, ``min_a s_a = 0``."""
    zero = m.const(0)
    m.m.AddMinEquality(zero, v.t)
    if problem.pins.stage is None and problem.pins.async_stages is None:
        m.m.AddMinEquality(zero, v.stage)


def add_primary_cap(m: Model, v: Vars, expr, cap: Optional[int]) -> None:
    """``primary <= cap`` (used once the best primary objective is known)."""
    if cap is not None:
        m.add(expr <= cap, f"primary objective <= {cap}")


FAMILIES = (add_stage_bounds, add_async, add_pins, add_dependences, add_writer_order, add_weaving, add_units, add_blocking,
            add_multiplicity, add_capacity, add_tail, add_symmetry)


def build_model(m: Model, v: Vars, problem: Problem, graph: Graph, weave: bool = True) -> None:
    """Post every family, in this order (the table of contents of the model); ``weave=False`` leaves
    out :func:`add_weaving` (the fallback when it makes a problem infeasible)."""
    add_stage_bounds(m, v, problem, graph)
    add_async(m, v, problem, graph)
    add_pins(m, v, problem, graph)
    add_dependences(m, v, problem, graph)
    add_writer_order(m, v, problem, graph)
    if weave:
        add_weaving(m, v, problem, graph)
    add_units(m, v, problem, graph)
    add_blocking(m, v, problem, graph)
    add_multiplicity(m, v, problem, graph)
    add_capacity(m, v, problem, graph)
    add_tail(m, v, problem, graph)
    add_symmetry(m, v, problem, graph)

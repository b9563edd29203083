"""Solve a problem: search the initiation interval, solve each fixed-II model, re-check, explain.

**Why an external II loop.** ``II * D`` (stage lag times II) is the only
nonlinear term of the latency model. With II fixed every constraint is linear,
so one CP-SAT model per candidate II is small, propagates well and needs no
product channelling (``D`` booleans times a variable II gave weak bounds).
Feasibility is monotone in II (a timing at II is a timing at II + 1), so:

1. ``ii_lb`` from the relaxation of :mod:`.objective` (resources, recurrences,
   stage bound); an upper end from the best heuristic schedule, "every async copy
   N stages ahead" (:func:`uniform_schedule`, timed by :mod:`synth.sim`);
2. the least feasible II by galloping from ``ii_lb`` then bisection
   (feasibility-only solves, hinted with the incumbent);
3. from there upwards, each II is optimized for the full key (cycles, stages,
   shared memory) until ``(T - 1) * II + tail_floor`` cannot beat the best
   (symbolic trip counts stop at the first feasible II: II comes first).

The body order is derived from the offsets (``tau = n * t + index``), never an
all-different, so a fixed-II model has no order permutation to search.
When a shared-memory or stage objective comes first, its optimum is found at an
II where every choice is feasible (:func:`~.objective.ii_big`) and capped in
every later model.

Every returned schedule is re-checked with :func:`synth.schedule.check_schedule`
and replayed by :mod:`synth.sim`; a disagreement is an internal error.
An infeasible problem is re-solved with the constraint families' enforcement
literals as assumptions; the core is shrunk by deletion and reported in the
user's terms as :class:`synth.errors.Infeasible`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Optional

from ortools.sat.python import cp_model

from ..deadline import cp_sat_parameters, solve_cp_sat
from ..errors import Infeasible, Loc, SynthError
from ..gemm import GemmConfig, order_pins, stage_pins
from ..graph import Graph
from ..problem import Problem
from ..schedule import Schedule, SolveInfo, Timing, buffer_bytes, check_schedule, lift_stages, multiplicity, same_step_order
from ..sim import best_timing, check_timing
from .constraints import (build_model, stage_bounds, stage_domain_hi, weaving_applies, weaving_ok,
                          writer_order_ok)
from .objective import (Encoded, Key, ObjectiveSpec, add_objective, decode_bound, ii_big, ii_lower_bound, key,
                        ii_floors, tail_floor, tail_lower_bound)
from .vars import Model, Vars, new_vars

_STATUS = {cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE", cp_model.INFEASIBLE: "INFEASIBLE",
           cp_model.UNKNOWN: "UNKNOWN", cp_model.MODEL_INVALID: "MODEL_INVALID"}


class InternalError(RuntimeError):
    """The solver and the independent checks disagree (a bug in synth, not in the problem)."""


# ---------------------------------------------------------------------------- heuristics


def stage_limit(problem: Problem) -> int:
    """The tightest stage bound (``max_stage``, default 5, a fixed ``trip_count - 1``); the largest pinned
    stage when fully pinned stages leave no bound."""
    bounds = [b.bound for b in stage_bounds(problem)]
    if not bounds:
        return max(problem.pins.stage or (0,))
    return max(min(bounds), 0)


def uniform_schedule(problem: Problem, graph: Graph, n_ahead: int, *, use_async: bool = True) -> Optional[Schedule]:
    """"Every async copy ``n_ahead`` stages ahead", as CUTLASS multistage kernels do.

    Ops on async units that read nothing produced in the same iteration (the
    copies) get stage 0, every other op stage ``n_ahead``; stages are then raised
    where a dependence needs it (``s_b >= s_a - d``). The body order is program
    order where the dependences allow; stages holding async-unit ops are async
    when ``use_async``. Pins are respected. Returns None when the result breaks
    the stage bound, a pin or a capacity. ``n_ahead = 0`` is "no pipelining".
    """
    ops = problem.ops
    pins = problem.pins
    edges = graph.constraints()
    if pins.stage is not None:
        stage = list(pins.stage)
    else:
        fed = {e.dst for e in edges if e.distance == 0 and e.kind == "raw"}
        stage = [0 if problem.target.unit(op.unit).is_async and a not in fed else n_ahead
                 for a, op in enumerate(ops)]
        stage = lift_stages(edges, stage, pins.order)
    if max(stage) > stage_limit(problem) and pins.stage is None:
        return None
    if pins.order is not None:
        order = list(pins.order)
    else:
        found = same_step_order(edges, stage)
        if found is None:
            return None
        order = list(found)
    if pins.async_stages is not None:
        astages = set(pins.async_stages)
    else:
        astages = set(stage) if use_async else set()
    is_async = tuple(stage[a] in astages and problem.target.unit(op.unit).is_async for a, op in enumerate(ops))
    queue = tuple(problem.queue_of_unit(op.unit) if x else None for op, x in zip(ops, is_async))
    mult = multiplicity(problem, graph, tuple(stage), tuple(order), is_async)
    sched = Schedule(problem.name, tuple(stage), tuple(order), is_async, queue, mult)
    if check_schedule(problem, graph, sched) or any(sched.max_stage > b.bound for b in stage_bounds(problem)):
        return None
    return sched


def timed(problem: Problem, graph: Graph, sched: Schedule) -> Schedule:
    """``sched`` with the simulator's best timing."""
    return replace(sched, timing=best_timing(problem, graph, sched))


def schedule_key(spec: ObjectiveSpec, problem: Problem, sched: Schedule) -> Key:
    assert sched.timing is not None
    return key(spec, sched.timing.ii, sched.timing.tail, sched.max_stage,
               buffer_bytes(problem, sched.multiplicity, "shared"))


def heuristic_schedules(problem: Problem, graph: Graph, ns: Optional[range] = None,
                        deadline: Optional[float] = None) -> list[Schedule]:
    """Timed uniform schedules for every ``n_ahead`` in ``ns`` (default ``0..stage bound``) that are valid.

    Stops early (with the schedules found so far) once ``time.monotonic()`` passes ``deadline``.
    """
    ns = ns if ns is not None else range(0, stage_limit(problem) + 1)
    out: list[Schedule] = []
    seen = set()
    for n_ahead in ns:
        if deadline is not None and time.monotonic() > deadline and out:
            break
        for use_async in (True, False):
            s = uniform_schedule(problem, graph, n_ahead, use_async=use_async)
            if s is None or (s.stage, s.order, s.is_async) in seen:
                continue
            seen.add((s.stage, s.order, s.is_async))
            out.append(timed(problem, graph, s))
    return out


def gemm_schedules(problem: Problem, graph: Graph) -> list[Schedule]:
    """Timed CUTLASS-shaped schedules (:func:`synth.gemm.stage_pins` and :func:`synth.gemm.order_pins`,
    ``MmaMultistage``'s order) at every depth the stage bound allows, for a ``kind: gemm`` problem whose
    stages and order are free: incumbents that obey the weaving, which the uniform schedules (program
    order) never do. Pinned async stages and capacities are respected; invalid ones are left out."""
    cfg, pins = problem.gemm, problem.pins
    if not isinstance(cfg, GemmConfig) or pins.stage is not None or pins.order is not None:
        return []
    out: list[Schedule] = []
    for depth in range(2, stage_limit(problem) + 2):
        shaped = replace(cfg, stages=depth)
        stage, order = stage_pins(shaped), order_pins(shaped)
        if stage is None or order is None or len(stage) != len(problem.ops):
            continue
        astages = set(pins.async_stages) if pins.async_stages is not None else {0}
        is_async = tuple(stage[a] in astages and problem.target.unit(op.unit).is_async
                         for a, op in enumerate(problem.ops))
        queue = tuple(problem.queue_of_unit(op.unit) if x else None for op, x in zip(problem.ops, is_async))
        sched = Schedule(problem.name, stage, order, is_async, queue,
                         multiplicity(problem, graph, stage, order, is_async))
        if check_schedule(problem, graph, sched) or any(sched.max_stage > b.bound for b in stage_bounds(problem)):
            continue
        out.append(timed(problem, graph, sched))
    return out


def best_uniform(problem: Problem, graph: Graph, ns: Optional[range] = None) -> Optional[Schedule]:
    """The best of :func:`heuristic_schedules` under the problem's objective."""
    spec = ObjectiveSpec.of(problem)
    cands = heuristic_schedules(problem, graph, ns)
    return min(cands, key=lambda s: schedule_key(spec, problem, s)) if cands else None


# ---------------------------------------------------------------------------- one fixed-II solve


@dataclass
class _Run:
    ii: int
    status: str
    sched: Optional[Schedule]
    key: Optional[Key]
    primary_bound: Optional[int]
    """Lower bound on the primary objective over schedules at this II (None: unknown)."""
    wall: float


@dataclass
class _Built:
    mdl: Model
    v: Vars
    enc: Optional[Encoded]


class _Search:
    def __init__(self, problem: Problem, graph: Graph, time_limit: float, workers: int, log: bool,
                 weave: bool = True) -> None:
        self.weave = weave
        self.problem = problem
        self.graph = graph
        self.spec = ObjectiveSpec.of(problem)
        self.start = time.monotonic()
        self.deadline = self.start + time_limit
        self.workers = workers
        self.log = log
        self.stage_hi = stage_domain_hi(problem)
        self.n_solves = 0
        self.notes: list[str] = []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def build(self, ii: int, *, optimize: bool, cap: Optional[int], tail_cap: Optional[int] = None) -> _Built:
        mdl = Model(self.log)
        v = new_vars(mdl, self.problem, self.graph, ii, self.stage_hi)
        build_model(mdl, v, self.problem, self.graph, weave=self.weave)
        enc = add_objective(mdl, v, self.spec) if optimize else None
        if cap is not None:
            q = v.shared_quantum
            prim = self.spec.w_st * v.max_stage + self.spec.w_sh * q * v.shared_units
            mdl.add(prim <= cap, f"primary <= {cap}")
        if tail_cap is not None:
            mdl.add(v.tail <= tail_cap, f"tail <= {tail_cap} (else the incumbent is better)")
        if self.log:
            print(f"-- model at II={ii}:")
            for f in mdl.formulas:
                print("   ", f)
        return _Built(mdl, v, enc)

    def hint(self, b: _Built, sched: Optional[Schedule]) -> None:
        if sched is None or sched.timing is None:
            return
        v, m = b.v, b.mdl.m
        for a, op in enumerate(self.problem.ops):
            m.AddHint(v.stage[a], min(sched.stage[a], self.stage_hi))
            m.AddHint(v.t[a], max(0, min(sched.timing.offsets[a], v.ii - op.issue)))
            if self.problem.target.unit(op.unit).is_async:
                m.AddHint(v.is_async[a], int(sched.is_async[a]))
        for k in range(self.stage_hi + 1):
            m.AddHint(v.stage_async[k], int(any(x and s == k for x, s in zip(sched.is_async, sched.stage))))

    def solver(self, limit: float, workers: Optional[int] = None) -> cp_model.CpSolver:
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = max(0.05, limit)
        s.parameters.num_workers = workers or self.workers
        s.parameters.log_search_progress = self.log
        cp_sat_parameters(s)  # Ctrl-C must reach Python, not end the search quietly (synth.deadline)
        return s

    def solve_at(self, ii: int, *, optimize: bool, cap: Optional[int] = None, hint: Optional[Schedule] = None,
                 limit: Optional[float] = None, tail_cap: Optional[int] = None) -> _Run:
        t0 = time.monotonic()
        b = self.build(ii, optimize=optimize, cap=cap, tail_cap=tail_cap)
        for lit, _ in b.mdl.families.values():
            b.mdl.m.Add(lit == 1)
        self.hint(b, hint)
        s = self.solver(min(self.left(), limit) if limit is not None else self.left())
        st = _STATUS[solve_cp_sat(s, b.mdl.m)]
        self.n_solves += 1
        sched = kk = None
        pb: Optional[int] = None
        if st in ("OPTIMAL", "FEASIBLE"):
            sched = self.extract(s, b.v)
            kk = schedule_key(self.spec, self.problem, sched)
            if optimize:
                assert b.enc is not None
                pb = kk[0] if st == "OPTIMAL" else decode_bound(self.spec, b.enc, ii, s.BestObjectiveBound())
            if optimize and b.enc is not None and not b.enc.complete and st == "OPTIMAL":
                st = "FEASIBLE"  # the primary objective is optimal; the dropped tie-breakers are not proven
            st = st if optimize else "FEASIBLE"
        if self.log:
            print(f"-- II={ii}: {st} key={kk} ({time.monotonic() - t0:.2f}s)")
        return _Run(ii, st, sched, kk, pb, time.monotonic() - t0)

    def extract(self, s: cp_model.CpSolver, v: Vars) -> Schedule:
        p, g = self.problem, self.graph
        n = len(p.ops)
        stage = tuple(int(s.Value(x)) for x in v.stage)
        t = tuple(int(s.Value(x)) for x in v.t)
        is_async = tuple(bool(s.Value(x)) for x in v.is_async)
        seq = sorted(range(n), key=lambda a: (t[a], a))
        order = [0] * n
        for k, a in enumerate(seq):
            order[a] = k
        queue = tuple(p.queue_of_unit(op.unit) if x else None for op, x in zip(p.ops, is_async))
        mult = multiplicity(p, g, stage, tuple(order), is_async)
        tail = max(v.ii * stage[a] + t[a] + op.latency for a, op in enumerate(p.ops))
        cycles = None if p.loop.symbolic else (p.loop.min_trip_count - 1) * v.ii + tail
        return Schedule(p.name, stage, tuple(order), is_async, queue, mult, Timing(v.ii, t, cycles, tail))

    # ------------------------------------------------------------------------ explanation

    def explain(self, ii: int) -> Infeasible:
        """Shrink the families' literals to a minimal infeasible set and describe it."""
        b = self.build(ii, optimize=False, cap=None)
        fam = b.mdl.families
        keys = list(fam)
        m = b.mdl.m

        def infeasible(subset: list[tuple]) -> Optional[bool]:
            m.ClearAssumptions()
            m.AddAssumptions([fam[k][0] for k in subset])
            s = self.solver(max(1.0, self.left() / 4), workers=1)
            st = solve_cp_sat(s, m)
            if st == cp_model.INFEASIBLE:
                idx = {fam[k][0].Index(): k for k in subset}
                core = [idx[i] for i in s.SufficientAssumptionsForInfeasibility() if i in idx]
                return core or subset  # type: ignore[return-value]
            return False if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None

        core = infeasible(keys)
        if not core:
            return Infeasible(self.problem.loop.loc, ["no schedule exists (the solver could not isolate why)"],
                              "relax the pinned schedule or the capacities")
        core = list(core)  # type: ignore[arg-type]
        for k in list(core):
            if k not in core or len(core) == 1:
                continue
            trial = [c for c in core if c != k]
            res = infeasible(trial)
            if res:
                core = [c for c in trial if c in res] if isinstance(res, list) else trial
        return self.render(core, b)

    def render(self, core: list[tuple], b: _Built) -> Infeasible:
        p = self.problem
        fam = b.mdl.families
        items: list[tuple[int, str, str, Optional[Loc]]] = []  # (rank, reason, fix, loc)
        for k in core:
            text = fam[k][1].text
            if k[0] in ("shared", "registers"):
                space = "shared" if k[0] == "shared" else "register"
                need, text = self.capacity_text(b, [c for c in core if c != k], space)
                cap = p.target.shared_bytes if space == "shared" else p.target.registers_bytes
                fix = (f"raise target.{k[0]}_bytes to at least {need}" if need
                       else f"raise target.{k[0]}_bytes (now {cap})")
                items.append((0, text, fix, p.target.loc))
            elif k[0] == "dep":
                e = self.graph.edges[k[1]]
                dep_loc = next((d.loc for d in p.deps if e.kind == "explicit" and d.src == p.ops[e.src].name
                                and d.dst == p.ops[e.dst].name), None)
                items.append((3, text, "", dep_loc or p.ops[e.dst].loc))
            elif k[0] == "pin_stage":
                items.append((1, text, "change or drop the pinned schedule.stage", p.pins.stage_loc or p.pins.loc))
            elif k[0] == "pin_order":
                items.append((1, text, "change or drop the pinned schedule.order", p.pins.order_loc or p.pins.loc))
            elif k[0] == "pin_async":
                items.append((1, text, "change schedule.async_stages", p.pins.loc))
            elif k[0] == "trip":
                items.append((0, text, "raise loop.min_trip_count or use fewer stages", p.loop.loc))
            elif k[0] == "max_stage":
                items.append((0, text, "raise schedule.max_stage", p.pins.loc))
            elif k[0] == "default_max_stage":
                items.append((0, text, "set schedule.max_stage higher", p.loop.loc))
            else:
                items.append((2, text, "", p.target.loc))
        items.sort(key=lambda it: it[0])
        reasons = [it[1] for it in items]
        fixes = [it[2] for it in items if it[2]]
        loc = items[0][3] if items else None
        return Infeasible(loc, reasons, "; or ".join(dict.fromkeys(fixes)) or "relax one of these constraints")

    def capacity_text(self, b: _Built, others: list[tuple], space: str) -> tuple[Optional[int], str]:
        """``shared memory: A_s x3 + B_s x4 = 65536 B > 49152 B`` at the least multiplicities
        the other constraints of the core allow."""
        p = self.problem
        fam = b.mdl.families
        m = b.mdl.m
        m.ClearAssumptions()
        m.AddAssumptions([fam[k][0] for k in others])
        bufs = [x for x in p.buffers if x.space == space]
        m.Minimize(sum(x.bytes * b.v.mult[x.name] for x in bufs))
        s = self.solver(max(1.0, self.left() / 4), workers=1)
        st = solve_cp_sat(s, m)
        cap = p.target.shared_bytes if space == "shared" else p.target.registers_bytes
        label = "shared memory" if space == "shared" else "register buffers"
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, f"{label}: more than {cap} B needed"
        sched = self.extract(s, b.v)
        mult = dict(sched.multiplicity)
        parts = [f"{x.name} x{mult[x.name]}" for x in bufs]
        total = sum(x.bytes * mult[x.name] for x in bufs)
        if st != cp_model.OPTIMAL:
            return None, f"{label}: {' + '.join(parts)} = {total} B > {cap} B (no better multiplicities found)"
        return total, f"{label}: {' + '.join(parts)} = {total} B > {cap} B"

    # ------------------------------------------------------------------------ the II search

    def run(self) -> Schedule:
        p, g, spec = self.problem, self.graph, self.spec
        S = stage_limit(p)
        lb_ii = ii_lower_bound(p, g, S)
        big = ii_big(p)
        tfloor = tail_floor(p, g)
        sh_lb = sum(x.bytes for x in p.buffers if x.space == "shared")
        T = p.loop.min_trip_count
        best: Optional[Schedule] = None
        best_key: Optional[Key] = None
        best_exact = False
        unresolved: list[int] = []  # lower bounds on the primary objective of unsolved regions
        global_lb: Optional[int] = None

        def offer(s: Optional[Schedule], exact: bool = False) -> None:
            nonlocal best, best_key, best_exact
            if s is None:
                return
            k = schedule_key(spec, p, s)
            if best_key is None or k < best_key or (k == best_key and exact and not best_exact):
                best, best_key, best_exact = s, k, exact

        def primary_lb(ii: int, tail_lb: int, st: int = 0, sh: int = sh_lb) -> int:
            v = spec.primary(ii, tail_lb, st, sh)
            return max(v, global_lb) if global_lb is not None else v

        try:
            heur = heuristic_schedules(p, g, deadline=self.start + 0.3 * (self.deadline - self.start))
        except ValueError:
            heur = []
        try:
            heur += gemm_schedules(p, g)
        except ValueError:
            pass
        for h in heur:
            if writer_order_ok(p, h.stage, h.order) and (not self.weave or weaving_ok(p, g, h.stage, h.order)):
                offer(h)
        cap: Optional[int] = None
        static_one = not spec.symbolic and T == 1
        if best is None or spec.w_lat == 0 or static_one:
            r = self.solve_at(big, optimize=spec.w_lat == 0 or static_one, hint=best)
            if r.status == "INFEASIBLE":
                raise self.explain(big)
            if r.sched is None:
                raise SynthError(p.loop.loc, f"no schedule found for {p.name} within the time limit",
                                 "raise --time-limit")
            if spec.w_lat == 0:
                cap = r.key[0] if r.key else None
                if r.status == "OPTIMAL":
                    global_lb = cap
                elif r.primary_bound is not None:
                    global_lb = r.primary_bound
                    unresolved.append(r.primary_bound)
                if best_key is not None and cap is not None and best_key[0] > cap:
                    best = best_key = None
            offer(timed(p, g, r.sched), exact=False)
            offer(r.sched, exact=r.status == "OPTIMAL")
            if static_one:
                if r.status != "OPTIMAL" and r.primary_bound is not None:
                    unresolved.append(r.primary_bound)
                return self.finish(best, best_key, best_exact, unresolved, lb_ii, tfloor)
        assert best is not None and best.timing is not None and best_key is not None
        hi = best.timing.ii
        if hi < lb_ii:  # cannot happen: the relaxation is a relaxation
            raise InternalError(f"heuristic II {hi} below the lower bound {lb_ii}")

        # Least feasible II: gallop up from lb_ii, then bisect.
        proven = lb_ii   # every II below is proven infeasible
        last_bad = lb_ii - 1
        step = 1
        probe = lb_ii
        probe_limit = lambda: max(0.2, self.left() * 0.3)  # noqa: E731

        def feasible(ii: int) -> Optional[bool]:
            nonlocal proven
            r = self.solve_at(ii, optimize=False, cap=cap, hint=best, limit=probe_limit())
            if r.status == "INFEASIBLE":
                proven = max(proven, ii + 1)
                return False
            if r.sched is not None:
                offer(r.sched)
                return True
            return None

        while probe < hi and self.left() > 0.05:
            f = feasible(probe)
            if f:
                hi = probe
                break
            last_bad = probe
            probe = min(hi, last_bad + step)
            step *= 2
        while hi - last_bad > 1 and self.left() > 0.05:
            mid = (last_bad + hi) // 2
            f = feasible(mid)
            if f:
                hi = mid
            else:
                last_bad = mid
        if proven < hi:
            unresolved.append(primary_lb(proven, tfloor))
        # Optimize from the least feasible II upwards.
        ii = hi
        while True:
            assert best_key is not None
            lat_all = ii if spec.symbolic else (T - 1) * ii + tfloor
            if (primary_lb(ii, tfloor), lat_all) > best_key[:2] or ii > big:
                break
            if self.left() <= 0.05:
                unresolved.append(primary_lb(ii, tfloor))
                self.notes.append(f"time limit reached before II {ii} was solved")
                break
            tl, st_lb, sh_ii = ii_floors(p, g, ii, S)
            if (primary_lb(ii, tl, st_lb, sh_ii), spec.latency_value(ii, tl)) > best_key[:2]:
                ii += 1
                continue
            r = self.solve_at(ii, optimize=True, cap=cap, hint=best, tail_cap=self.tail_cap(ii, best_key[0]))
            if r.sched is not None:
                offer(r.sched, exact=r.status == "OPTIMAL")
            if r.status == "FEASIBLE" and r.primary_bound is not None:
                unresolved.append(r.primary_bound)
            elif r.status == "UNKNOWN":
                unresolved.append(primary_lb(ii, tl, st_lb, sh_ii))
            ii += 1
        return self.finish(best, best_key, best_exact, unresolved, lb_ii, tfloor)

    def tail_cap(self, ii: int, best_primary: int) -> Optional[int]:
        """The largest tail a schedule at ``ii`` may have and still tie the incumbent's primary objective
        (static trip count, latency weighted, no negative weight; else None): stages and shared memory add
        ``>= 0``, so ``w_lat * ((T - 1) * ii + tail) <= best_primary``."""
        sp = self.spec
        if sp.symbolic or sp.w_lat <= 0 or sp.w_st < 0 or sp.w_sh < 0:
            return None
        return (best_primary - sp.w_lat * (sp.trip - 1) * ii) // sp.w_lat

    def finish(self, best: Optional[Schedule], best_key: Optional[Key], exact: bool, unresolved: list[int],
               lb_ii: int, tfloor: int) -> Schedule:
        p, g, spec = self.problem, self.graph, self.spec
        assert best is not None and best_key is not None
        primary = best_key[0]
        bound = min([primary] + unresolved)
        # OPTIMAL: the key (primary and tie-breakers) is proven; an unresolved II whose bound
        # only equals the primary value might still hide a better tie-breaker.
        status = "OPTIMAL" if exact and all(u > primary for u in unresolved) else "FEASIBLE"
        if status == "FEASIBLE" and bound >= primary:
            bound = primary
            self.notes.append("the primary objective is proven optimal; a tie-breaker "
                              "(tail, stages or shared memory) is not")
        gap = (primary - bound) / primary if primary else 0.0
        T = p.loop.min_trip_count
        if spec.symbolic:
            lower = lb_ii
        else:
            lower = min((T - 1) * lb_ii + tail_lower_bound(p, g, lb_ii, stage_limit(p)),
                        (T - 1) * (lb_ii + 1) + tfloor)
        info = SolveInfo(status, primary, bound, gap, time.monotonic() - self.start, lower,
                         tuple(self.notes) + (f"{self.n_solves} CP-SAT solves",))
        return replace(best, info=info)


# ---------------------------------------------------------------------------- entry point


def solve(problem: Problem, graph: Graph, *, time_limit: float = 20.0, workers: int = 2,
          log: bool = False) -> Schedule:
    """The best schedule of ``problem`` under the latency model (docs/latency_model.md).

    Returns a :class:`Schedule` with ``timing`` and ``info`` (status OPTIMAL or
    FEASIBLE, objective, proven bound, gap, solve time, and the resource- and
    recurrence-constrained lower bound on cycles). Pins are always respected.
    Raises :class:`~synth.errors.Infeasible` naming the clashing constraints, and
    :class:`InternalError` if the independent checks reject the result.
    """
    start = time.monotonic()
    weave = weaving_applies(problem) and stage_limit(problem) >= 1
    try:
        sched = _Search(problem, graph, time_limit, workers, log, weave=weave).run()
    except Infeasible:
        if not weave:
            raise
        # the emitter's weaving is a preference of the gemm kernel, never a reason to refuse a problem
        left = max(1.0, time_limit - (time.monotonic() - start))
        sched = _Search(problem, graph, left, workers, log, weave=False).run()
        assert sched.info is not None
        sched = replace(sched, info=replace(sched.info, notes=sched.info.notes + (
            "no schedule obeys the CUDA emitter's weaving (docs/latency_model.md, constraint 8); solved without it",)))
    return recheck(problem, graph, sched)


def recheck(problem: Problem, graph: Graph, sched: Schedule) -> Schedule:
    """Re-check a solved schedule without the solver; adopt the simulator's timing if it is better."""
    errs = check_schedule(problem, graph, sched)
    errs += [f"stage {sched.max_stage} breaks the bound: {b.text}" for b in stage_bounds(problem)
             if sched.max_stage > b.bound]
    if errs:
        raise InternalError(f"solver returned an invalid schedule for {problem.name}: {'; '.join(errs)}")
    errs = check_timing(problem, graph, sched)
    if errs:
        raise InternalError(f"simulator rejects the solver's timing for {problem.name}: {'; '.join(errs)}")
    spec = ObjectiveSpec.of(problem)
    mine = schedule_key(spec, problem, sched)
    sim_sched = replace(sched, timing=best_timing(problem, graph, sched))
    theirs = schedule_key(spec, problem, sim_sched)
    assert sched.info is not None
    if theirs > mine:
        raise InternalError(f"simulator finds no timing as good as the solver's for {problem.name}: "
                            f"{theirs} > {mine}")
    if theirs < mine:
        if sched.info.status == "OPTIMAL":
            raise InternalError(f"simulator beats the solver's optimum for {problem.name}: {theirs} < {mine}")
        info = replace(sched.info, objective=theirs[0],
                       gap=(theirs[0] - sched.info.bound) / theirs[0] if theirs[0] and sched.info.bound is not None
                       else sched.info.gap,
                       notes=sched.info.notes + ("timing improved by the simulator",))
        sched = replace(sim_sched, info=info)
    return sched


__all__ = ["solve", "recheck", "uniform_schedule", "heuristic_schedules", "gemm_schedules", "best_uniform", "InternalError",
           "stage_limit"]

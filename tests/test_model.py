"""The CP-SAT model against the independent simulator, exhaustive search, pins and infeasibility."""

from __future__ import annotations

import itertools
import pathlib
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synth.errors import Infeasible
from synth.graph import Graph, build_graph
from synth.load import load_problem, load_problem_text
from synth.model import solve, uniform_schedule
from synth.model.constraints import writer_order_ok, writer_pairs
from synth.model.objective import ObjectiveSpec, key
from synth.model.solve import schedule_key, stage_limit
from synth.problem import Objective, Pins, Problem
from synth.randgen import random_problem
from synth.schedule import Schedule, buffer_bytes, check_schedule, multiplicity
from synth.sim import best_timing, check_timing, simulate

PROBLEMS = pathlib.Path(__file__).resolve().parent.parent / "problems"
EXAMPLES = [f for f in sorted(PROBLEMS.glob("*.yaml"))
            if re.search(r"^name:", f.read_text(), re.M) and "kind: gemm" not in f.read_text()]


def _agrees_with_sim(p: Problem, g: Graph, s: Schedule) -> None:
    assert check_schedule(p, g, s) == []
    assert check_timing(p, g, s) == []
    r = simulate(p, g, s)
    assert r.stalls == 0 and r.hazards == ()
    assert s.timing is not None and s.info is not None
    if p.loop.symbolic:
        assert (r.ii, r.tail) == (s.timing.ii, s.timing.tail)
    else:
        assert r.cycles == s.timing.cycles


def _pins_respected(p: Problem, s: Schedule) -> None:
    if p.pins.stage is not None:
        assert s.stage == tuple(p.pins.stage)
    if p.pins.order is not None:
        assert s.order == tuple(p.pins.order)
    if p.pins.async_stages is not None:
        for a, op in enumerate(p.ops):
            assert s.is_async[a] == (s.stage[a] in p.pins.async_stages and p.target.unit(op.unit).is_async)
    if p.pins.max_stage is not None:
        assert s.max_stage <= p.pins.max_stage


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda f: f.stem)
def test_examples_optimal_and_simulated(path: pathlib.Path) -> None:
    p = load_problem(str(path))
    g = build_graph(p)
    s = solve(p, g, time_limit=20)
    assert s.info is not None and s.info.status == "OPTIMAL"
    _agrees_with_sim(p, g, s)
    _pins_respected(p, s)
    if not p.loop.symbolic:  # a symbolic loop may be shorter than its pipeline; the lowering guards it
        assert s.max_stage + 1 <= p.loop.min_trip_count
    assert s.timing is not None and s.info.lower_bound is not None
    if p.loop.symbolic:
        assert s.info.objective == s.timing.ii >= s.info.lower_bound
    else:
        assert s.info.objective == s.timing.cycles >= s.info.lower_bound


def test_gemm_example_optimal_and_pipelined() -> None:
    p = load_problem(str(PROBLEMS / "gemm-sm80-f16.yaml"))
    g = build_graph(p)
    # proven optimal (in under 2 CPU-s with 2 workers: benchmarks/speed_bounds.py)
    s = solve(p, g, time_limit=120, workers=2)
    assert s.info is not None and s.info.status == "OPTIMAL" and s.info.gap == 0.0
    # The copies run async, five stages ahead of the math (max_stage: 5).
    assert s.stage[:2] == (0, 0) and s.is_async[:2] == (True, True)
    assert s.timing is not None and s.timing.cycles == 12667 and s.timing.ii == 95
    # It beats every "N stages ahead" schedule and no pipelining by far.
    for n in range(0, 6):
        u = uniform_schedule(p, g, n)
        if u is not None:
            assert best_timing(p, g, u).cycles >= s.timing.cycles


def _random(seed: int, n: int) -> Problem:
    return random_problem(seed, n, predicated=seed % 2 == 1, symbolic=seed % 3 == 2, hideable=seed % 4 != 3,
                          async_frac=0.3 + 0.1 * (seed % 4))


@pytest.mark.parametrize("seed", range(16))
def test_random_problems_match_simulator(seed: int) -> None:
    p = _random(seed, 3 + seed % 8)
    g = build_graph(p)
    s = solve(p, g, time_limit=20)
    assert s.info is not None and s.info.status == "OPTIMAL"
    _agrees_with_sim(p, g, s)
    assert s.info.bound == s.info.objective


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 100_000), st.integers(2, 12), st.booleans(), st.booleans(), st.booleans())
def test_property_solved_schedules_check_and_simulate(seed: int, n: int, pred: bool, sym: bool, hide: bool) -> None:
    p = random_problem(seed, n, predicated=pred, symbolic=sym, hideable=hide)
    g = build_graph(p)
    s = solve(p, g, time_limit=10)
    _agrees_with_sim(p, g, s)
    assert s.info is not None and s.info.bound is not None and s.info.bound <= s.info.objective


# ---------------------------------------------------------------------------- exhaustive


def _all_schedules(p: Problem, g: Graph):
    """Every (stage, order, async stages) schedule of ``p`` that passes check_schedule."""
    n = len(p.ops)
    S = stage_limit(p)
    edges = g.constraints()
    async_ops = [a for a, op in enumerate(p.ops) if p.target.unit(op.unit).is_async]
    for stage in itertools.product(range(S + 1), repeat=n):
        if any(stage[e.dst] + e.distance - stage[e.src] < 0 for e in edges):
            continue
        for perm in itertools.permutations(range(n)):
            order = tuple(perm)
            if any(stage[e.dst] + e.distance - stage[e.src] == 0 and order[e.src] >= order[e.dst] for e in edges):
                continue
            if not writer_order_ok(p, stage, order):  # the model's schedule space (add_writer_order)
                continue
            ks = sorted({stage[a] for a in async_ops})
            for bits in itertools.product((False, True), repeat=len(ks)):
                astages = {k for k, b in zip(ks, bits) if b}
                is_async = tuple(a in async_ops and stage[a] in astages for a in range(n))
                queue = tuple(p.queue_of_unit(op.unit) if x else None for op, x in zip(p.ops, is_async))
                s = Schedule(p.name, stage, order, is_async, queue, multiplicity(p, g, stage, order, is_async))
                if not check_schedule(p, g, s) and s.max_stage + 1 <= p.loop.min_trip_count:
                    yield s


def _exhaustive_best(p: Problem, g: Graph):
    spec = ObjectiveSpec.of(p)
    best = None
    for s in _all_schedules(p, g):
        t = best_timing(p, g, s)
        k = key(spec, t.ii, t.tail, s.max_stage, buffer_bytes(p, s.multiplicity, "shared"))
        best = k if best is None or k < best else best
    return best


TINY = [(seed, n, S, kw) for seed, n, S, kw in [
    (0, 2, 2, {}), (1, 2, 2, {"symbolic": True}), (2, 3, 2, {}), (3, 3, 2, {"hideable": False}),
    (4, 3, 1, {"async_frac": 0.7}), (5, 4, 1, {}), (6, 4, 1, {"hideable": False}), (7, 3, 2, {"symbolic": True}),
    (8, 4, 1, {"async_frac": 0.6, "predicated": True}), (9, 3, 2, {"async_frac": 0.7}),
]]


@pytest.mark.parametrize("seed,n,S,kw", TINY)
@pytest.mark.parametrize("objective", ["latency", "shared_memory", "latency+shared_memory/64"])
def test_exhaustive_never_beats_solver(seed: int, n: int, S: int, kw: dict, objective: str) -> None:
    p = random_problem(seed, n, **kw)
    terms = ((("latency", 64), ("shared_memory", 1)) if "+" in objective else ((objective, 1),))
    p = replace(p, pins=Pins(max_stage=S), objective=Objective(terms))
    g = build_graph(p)
    s = solve(p, g, time_limit=20)
    assert s.info is not None and s.info.status == "OPTIMAL"
    best = _exhaustive_best(p, g)
    assert best is not None
    assert schedule_key(ObjectiveSpec.of(p), p, s) == best


# ---------------------------------------------------------------------------- pins


@pytest.mark.parametrize("seed", range(6))
def test_pinning_a_solved_schedule_reproduces_it(seed: int) -> None:
    p = _random(seed, 4 + seed)
    g = build_graph(p)
    s = solve(p, g, time_limit=20)
    pinned = replace(p, pins=Pins(stage=s.stage, order=s.order, async_stages=s.async_stages))
    s2 = solve(pinned, g, time_limit=20)
    assert (s2.stage, s2.order, s2.is_async, s2.multiplicity) == (s.stage, s.order, s.is_async, s.multiplicity)
    assert s2.timing is not None and s.timing is not None
    assert (s2.timing.ii, s2.timing.tail) == (s.timing.ii, s.timing.tail)


def test_shared_memory_objective_first() -> None:
    p = load_problem(str(PROBLEMS / "gemm-sm80-f16.yaml"))
    g = build_graph(p)
    lat = solve(p, g)
    mem = solve(replace(p, objective=Objective((("shared_memory", 1),))), g)
    assert buffer_bytes(p, mem.multiplicity, "shared") == 16384 < buffer_bytes(p, lat.multiplicity, "shared")
    assert mem.timing is not None and lat.timing is not None and mem.timing.cycles > lat.timing.cycles


# ---------------------------------------------------------------------------- infeasible


RFC_GEMM = (PROBLEMS / "rfc0077-gemm.yaml").read_text()


@pytest.mark.parametrize("text,expect,line", [
    (RFC_GEMM.replace("shared_bytes: 167936", "shared_bytes: 49152"),
     ["shared memory: A_s x3 + B_s x4 = 57344 B > 49152 B", "pinned schedule.stage [0, 0, 2, 3, 3]"], 22),
    (RFC_GEMM.replace("registers_bytes: 65536", "registers_bytes: 700"),
     ["register buffers: A_r x2 + B_r x1 + C_r x1 = 704 B > 700 B"], 22),
    ((PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace(
        "  stage: [0, 1]\n  order: [0, 1]\n  async_stages: [0]", "  order: [1, 0]\n  max_stage: 0"),
     ["schedule.max_stage is 0", "pinned schedule.order [1, 0]",
      "raw dependence produce_B->consume_B on B, distance 0"], 18),
])
def test_infeasible_names_the_constraint(text: str, expect: list[str], line: int) -> None:
    p = load_problem_text(text, "bad.yaml")
    with pytest.raises(Infeasible) as exc:
        solve(p, build_graph(p), time_limit=10)
    msg = str(exc.value)
    for want in expect:
        assert want in msg
    assert exc.value.loc is not None and exc.value.loc.line == line
    assert exc.value.fix


def test_pinned_stages_may_exceed_a_symbolic_minimum_trip_count() -> None:
    # Loops shorter than the pipeline are lowered and proved, so four pinned stages with T >= 3 solve,
    # and so does an unpinned symbolic loop from T = 1, whose stages are bounded by max_stage only.
    import dataclasses

    p = load_problem_text(RFC_GEMM, "short.yaml")
    p = dataclasses.replace(p, loop=dataclasses.replace(p.loop, trip_count="T", min_trip_count=3))
    s = solve(p, build_graph(p), time_limit=10)
    assert s.max_stage + 1 > 3
    free = dataclasses.replace(p, loop=dataclasses.replace(p.loop, min_trip_count=1),
                               pins=dataclasses.replace(p.pins, stage=None, order=None))
    s2 = solve(free, build_graph(free), time_limit=10)
    assert s2.max_stage >= 1, "a loop from T = 1 may still be pipelined"


def test_fixed_trip_count_bounds_unpinned_stages() -> None:
    import dataclasses

    p = load_problem_text(RFC_GEMM, "fixed.yaml")
    p = dataclasses.replace(p, loop=dataclasses.replace(p.loop, trip_count=2, min_trip_count=2),
                            pins=dataclasses.replace(p.pins, stage=None, order=None))
    assert solve(p, build_graph(p), time_limit=10).max_stage <= 1

def test_time_limit_still_returns_a_valid_schedule() -> None:
    p = random_problem(3, 40)
    g = build_graph(p)
    s = solve(p, g, time_limit=0.3)
    assert s.info is not None and s.info.status in ("OPTIMAL", "FEASIBLE")
    assert s.info.bound is not None and s.info.objective is not None and s.info.bound <= s.info.objective
    _agrees_with_sim(p, g, s)


def test_log_prints_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    p = load_problem(str(PROBLEMS / "rfc0077-two-stage.yaml"))
    solve(p, build_graph(p), log=True, time_limit=5)
    out = capsys.readouterr().out
    assert "stage[produce_B]" in out and "tail >=" in out


BLOCKING = """
name: blocking
loop: {var: k, trip_count: 32}
buffers:
  A_s: {space: shared, bytes: 16384}
  P_r: {space: register, bytes: 256}
  C_r: {space: register, bytes: 1024, carried: true}
ops:
  - {name: tma_A, unit: tma, writes: [A_s], latency: 700, issue: 2}
  - {name: wgmma, unit: tensor, reads: [A_s], writes: [P_r], latency: 120, issue: 64}
  - {name: accum, unit: alu, reads: [P_r, C_r], writes: [C_r], latency: 8, issue: 8}
target:
  shared_bytes: 32768
  units:
    tma: {async: true}
    tensor: {async: true}
    alu: {}
schedule:
  max_stage: 2
"""


def test_sync_op_on_async_unit_blocks_when_memory_is_tight() -> None:
    # An async wgmma would keep A_s for one more slot (3 x 16 KiB > 32 KiB): it must run
    # sync, and then nothing issues until its result is ready (t + 120 <= II).
    p = load_problem_text(BLOCKING)
    g = build_graph(p)
    s = solve(p, g)
    assert s.is_async == (True, False, False) and s.mult("A_s") == 2
    assert s.timing is not None
    assert s.timing.offsets[1] + 120 <= s.timing.ii
    assert schedule_key(ObjectiveSpec.of(p), p, s) == _exhaustive_best(p, g)
    _agrees_with_sim(p, g, s)
    roomy = load_problem_text(BLOCKING.replace("shared_bytes: 32768", "shared_bytes: 65536"))
    s2 = solve(roomy, g)
    assert s2.timing is not None and s2.timing.cycles < s.timing.cycles


IN_PLACE = """name: inplace
loop: {var: i, trip_count: 16}
buffers:
  X: {space: shared, bytes: 4}
ops:
  - {name: acc, unit: dma, reads: [X], writes: [X], latency: 200, issue: 2}
target:
  shared_bytes: SHARED
  units:
    dma: {async: true}
"""


@pytest.mark.parametrize("shared", [4, 1024])
def test_in_place_async_update_solves(shared: int) -> None:
    # Every schedule of an async op that reads and writes one buffer ended in
    # "simulator rejects the solver's timing". The model, the simulator and the lowering
    # agree: one instance reads its operand before it writes its result; async, it keeps
    # reading until its group completes, so it needs a second slot (when it fits).
    p = load_problem_text(IN_PLACE.replace("SHARED", str(shared)))
    g = build_graph(p)
    s = solve(p, g, time_limit=10)
    assert s.mult("X") == (2 if s.is_async[0] else 1)
    assert shared >= 8 or not s.is_async[0]
    _agrees_with_sim(p, g, s)


def _in_place(seed: int) -> Problem:
    return random_problem(seed, 2 + seed % 6, inplace=True, symbolic=seed % 3 == 0)


IN_PLACE_SEEDS = [s for s in range(60)
                  if any(set(o.reads) & set(o.writes) for o in _in_place(s).ops if o.unit == "cp_async")][:8]


@pytest.mark.parametrize("seed", IN_PLACE_SEEDS)
def test_random_in_place_problems_solve_without_internal_error(seed: int) -> None:
    p = _in_place(seed)
    g = build_graph(p)
    s = solve(p, g, time_limit=10, workers=1)
    _agrees_with_sim(p, g, s)


def test_long_loop_keeps_few_stages_and_solves() -> None:
    # A trip count of 65536 must not widen the stage domain to 65535 (it once built a
    # million-variable model, which no time limit saw proven); the replay checks a window of iterations.
    # (Its time, under 10 s: benchmarks/speed_bounds.py.)
    text = IN_PLACE.replace("SHARED", "1024").replace("trip_count: 16", "trip_count: 65536")
    p = load_problem_text(text)
    g = build_graph(p)
    s = solve(p, g, time_limit=120)
    assert s.info is not None and s.info.status == "OPTIMAL"
    assert check_timing(p, g, s) == []


# ---------------------------------------------------------------------------- writers of one buffer


def test_async_writers_of_one_buffer_keep_program_order() -> None:
    """Load shares writing one tile issue in program order for the same iteration (the lowering waits for
    a version's last writer in program order): solved gemm schedules keep them so, their programs lower,
    and a pinned order that swaps them is refused, naming both ops."""
    from synth.gemm import GemmConfig, expand_gemm
    from synth.lower import lower

    p = expand_gemm(GemmConfig(4096, 4096, 4096, BM=128, BN=128, BK=32, warps=4))
    assert ("load_0", "load_1") in {(p.ops[a].name, p.ops[b].name) for a, b, _ in writer_pairs(p)}
    g = build_graph(p)
    s = solve(p, g, time_limit=30)
    assert writer_order_ok(p, s.stage, s.order)
    lo = [a for a, op in enumerate(p.ops) if op.name.startswith("load_")]
    assert [(s.stage[a], s.order[a]) for a in lo] == sorted((s.stage[a], s.order[a]) for a in lo)
    lower(p, g, s)  # the program's waits cover every share
    order = list(s.order)
    order[lo[0]], order[lo[1]] = order[lo[1]], order[lo[0]]
    bad = replace(p, pins=replace(p.pins, stage=s.stage, order=tuple(order), max_stage=s.max_stage))
    with pytest.raises(Infeasible) as exc:
        solve(bad, build_graph(bad), time_limit=10)
    assert "load_0 and load_1 both write" in str(exc.value)


def test_gemm_schedules_leave_the_emitter_a_host_for_every_ldmatrix_and_copy() -> None:
    """kind: gemm with the order free: every ldmatrix and copy has an mma after it in the body that it
    does not feed in the same step, and copies are separated by an mma (add_weaving); program order,
    whose first ldmatrix directly precedes the mma it feeds, does not."""
    from synth.gemm import GemmConfig, expand_gemm
    from synth.model.constraints import weave_rules, weaving_applies, weaving_ok

    p = expand_gemm(GemmConfig(4096, 4096, 4096, BM=128, BN=128, BK=32, warps=4))
    g = build_graph(p)
    assert weaving_applies(p)
    r = weave_rules(p, g)
    names = lambda xs: sorted(p.ops[a].name for a in xs)  # noqa: E731
    assert names(r.hosts) == ["mma_0", "mma_1"] and names(r.copies) == ["load_0", "load_1"]
    assert names(r.guests) == ["load_0", "load_1", "s2r_A_0", "s2r_A_1", "s2r_B_0", "s2r_B_1"]
    s = solve(p, g, time_limit=30)
    assert weaving_ok(p, g, s.stage, s.order)
    assert not any("weaving" in n for n in s.info.notes)
    assert not weaving_ok(p, g, (0, 0, 1, 1, 1, 1, 1, 1), tuple(range(len(p.ops))))
    # the CUTLASS-shaped incumbents obey it, at every depth from 2 to the stage bound + 1
    from synth.model.solve import gemm_schedules

    shaped = gemm_schedules(p, g)
    assert [x.max_stage + 1 for x in shaped] == list(range(2, stage_limit(p) + 2))
    assert all(weaving_ok(p, g, x.stage, x.order) and check_schedule(p, g, x) == [] for x in shaped[1:])
    # a pinned order is the user's: no weaving constraint
    assert not weaving_applies(replace(p, pins=replace(p.pins, order=tuple(range(len(p.ops))))))


def test_gemm_solves_without_weaving_when_no_schedule_obeys_it() -> None:
    """Every op pinned to one stage: the first k16 slice's ldmatrix has no mma between it and the mma it
    feeds, so no schedule obeys the weaving; the solver says so in a note and solves without it."""
    from synth.gemm import GemmConfig, expand_gemm
    from synth.model.constraints import weaving_ok

    p = expand_gemm(GemmConfig(4096, 4096, 4096, BM=128, BN=128, BK=32, warps=4))
    p = replace(p, pins=replace(p.pins, stage=(0,) * len(p.ops), max_stage=1))
    g = build_graph(p)
    s = solve(p, g, time_limit=30)
    assert any("weaving" in n for n in s.info.notes)
    assert not weaving_ok(p, g, s.stage, s.order) and check_schedule(p, g, s) == []

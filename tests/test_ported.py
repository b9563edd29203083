"""Cases ported from other compilers' pipelining tests (TVM InjectSoftwarePipeline, MLIR
scf/nvgpu pipelining, CUTLASS multistage, Triton num_stages); each YAML under
tests/ported/ cites its source test and what it expects. Every case is lowered as pinned,
proved, checked against the source's wait counts where they carry over to synth's model
(RFC 0077 counts do not depend on the slot count, unlike TVM's max_stage + 1 versions),
and solved unpinned (max_stage kept) and proved again. Loops shorter than their
pipeline (TVM's less-loop and trivial-pipeline cases) are lowered as well and must issue
TVM's op instances in TVM's order."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from synth.errors import SynthError
from synth.expr import to_str
from synth.graph import build_graph
from synth.load import load_problem, load_problem_text
from synth.lower import lower
from synth.model import solve
from synth.schedule import schedule_from_pins
from synth.verify import verify_program

HERE = pathlib.Path(__file__).resolve().parent / "ported"
CASES = sorted(HERE.glob("*.yaml"))
BAD = sorted((HERE / "bad").glob("*.yaml"))

# (part, queue, in_flight, before) waits the source test implies, in synth's notation.
EXPECT: dict[str, set[tuple[str, int, str, str]]] = {
    "tvm-simple-compute-async-1": {("body", 0, "1", "compute_C"), ("epilogue", 0, "0", "compute_C")},
    "tvm-simple-compute-async-3": {("body", 0, "3", "compute_C"), ("epilogue", 0, "2 - i", "compute_C")},
    # TVM: 5 in the body; its epilogue "2 - i" counts merged prologue groups (see the YAML)
    "tvm-async-producer-interleaving": {("body", 0, "5", "compute_C"), ("epilogue", 0, "4 - 2 * i", "compute_C")},
    "tvm-three-stage-two-async": {("body", 0, "1", "make_C"), ("body", 1, "1", "make_D"),
                                  ("epilogue", 0, "0", "make_C"), ("epilogue", 1, "1 - i", "make_D")},
    "tvm-async-mma-gemm-simple": {("body", 0, "3", "mma"), ("epilogue", 0, "2 - i", "mma")},
    "tvm-async-nested-gemm-ideal": {("prologue", 0, "2", "s2r_A"), ("body", 0, "2", "s2r_A"),
                                    ("epilogue", 0, "1 - i", "s2r_A")},
    "tvm-three-stage-compute-sync": set(),
    "tvm-dag-interleaving-async": {("body", 0, "0", "load_AL")},
    "tvm-dynamic-compute-async": {("body", 0, "1", "compute_C"), ("epilogue", 0, "0", "compute_C")},
    "tvm-less-loop-dynamic-4-stages": {("body", 0, "1", "make_C"), ("epilogue", 0, "0", "make_C")},
    "mlir-simple-pipeline-async": {("body", 0, "1", "addf"), ("epilogue", 0, "0", "addf")},
    "mlir-op-order-consumer-first": {("body", 0, "1", "compute"), ("epilogue", 0, "1 - i", "compute")},
    "mlir-loop-carried-accumulator": {("body", 0, "1", "add"), ("epilogue", 0, "0", "add")},
    "mlir-long-liverange": {("body", 0, "3", "use"), ("epilogue", 0, "2 - i", "use")},
    # commits only when "i + 2 < T" holds, so the body counts those commits exactly
    "mlir-dynamic-predicated": {("body", 0, "((i + 4 < T) ? 1 : 0) + ((i + 3 < T) ? 1 : 0)", "compute"),
                                ("epilogue", 0, "0", "compute")},
    "nvgpu-multi-buffer-opaque": {("body", 0, "2", "compute"), ("epilogue", 0, "1 - i", "compute")},
    "cutlass-multistage-k3": {("body", 0, "1", "mma")},
    "triton-num-stages-4": {("body", 0, "2", "dot"), ("epilogue", 0, "2 - i", "dot")},
    # regression: P_s is never read, so only a WAW wait keeps copy_P's writes in order
    "deps-distance-2": {("body", 0, "1", "copy_P")},
    "sm90-four-stage-two-queues": {("body", 0, "1", "wgmma"), ("body", 1, "0", "accum")},
    # loops shorter than the pipeline (TVM PR #17579)
    "tvm-less-loop-than-num-stage": set(),
    "tvm-trivial-pipeline": set(),
    "tvm-less-loop-async-extent-2": {("prologue", 0, "1", "make_C"), ("epilogue", 0, "0", "make_C")},
    "tvm-less-loop-async-extent-3": {("prologue", 0, "1", "make_C"), ("epilogue", 0, "0", "make_C")},
    "tvm-less-loop-dynamic-from-1": {("prologue", 0, "1", "make_C"), ("body", 0, "1", "make_C"),
                                     ("epilogue", 0, "0", "make_C")},
    "tvm-less-loop-than-num-stage-dynamic": set(),
}
# exact: the program has these waits and no others
EXACT = {"tvm-simple-compute-async-1", "tvm-simple-compute-async-3", "tvm-async-mma-gemm-simple",
         "tvm-three-stage-compute-sync", "mlir-long-liverange", "triton-num-stages-4",
         "tvm-async-producer-interleaving", "tvm-less-loop-than-num-stage", "tvm-trivial-pipeline",
         "tvm-less-loop-async-extent-2", "tvm-less-loop-async-extent-3", "tvm-less-loop-dynamic-from-1",
         "tvm-less-loop-than-num-stage-dynamic"}
# the op instances (op, iteration) in the order TVM's expected listing runs them
TVM_ORDER = {
    "tvm-less-loop-than-num-stage": [("make_B", 0), ("make_B", 1), ("make_C", 0), ("make_C", 1), ("make_D", 0),
                                     ("make_D", 1), ("make_E", 0), ("make_E", 1)],
    "tvm-trivial-pipeline": [("make_B", 0), ("make_C", 0)],
}


def _load(path: pathlib.Path):
    return load_problem(str(path))


def _waits(prog) -> set[tuple[str, int, str, str]]:
    return {(w.part, w.queue, to_str(w.in_flight), w.before) for w in prog.waits}


def test_every_case_has_expectations() -> None:
    assert {f.stem for f in CASES} == set(EXPECT)


@pytest.mark.parametrize("path", CASES, ids=lambda f: f.stem)
def test_pinned_lowers_proves_and_matches_source(path: pathlib.Path) -> None:
    p = _load(path)
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    r = verify_program(prog)
    assert r.ok, r.render()
    got = _waits(prog)
    want = EXPECT[path.stem]
    assert want <= got, (sorted(got), sorted(want))
    if path.stem in EXACT:
        assert got == want, sorted(got)
    if path.stem in TVM_ORDER:
        from synth.verify import oracle

        ex = oracle.execute(prog, int(prog.trip_count))
        assert [(x.op, x.iteration) for x in ex.insts] == TVM_ORDER[path.stem]


@pytest.mark.parametrize("path", [f for f in CASES if "less-loop" in f.stem or "trivial" in f.stem],
                         ids=lambda f: f.stem)
def test_short_loops_agree_with_the_oracle(path: pathlib.Path) -> None:
    """Every op instance once, none outside 0 <= iteration < T, nothing refuted by the
    explicit-state oracle at any trip count from the least to S + 2."""
    from synth.verify import oracle

    p = _load(path)
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    trips = [int(prog.trip_count)] if isinstance(prog.trip_count, int) else \
        range(prog.min_trip_count, prog.max_stage + 3)
    s = schedule_from_pins(p, g)
    body = s.body_order()
    for T in trips:
        ex = oracle.execute(prog, T)
        # the software pipeline's order: step J = 0, 1, .., and in a step the body order
        want = [(p.ops[o].name, J - s.stage[o]) for J in range(T + prog.max_stage) for o in body
                if 0 <= J - s.stage[o] < T]
        assert [(x.op, x.iteration) for x in ex.insts] == want, T
        assert not oracle.check(prog, T).violations, T


@pytest.mark.parametrize("path", CASES, ids=lambda f: f.stem)
def test_unpinned_solves_and_proves(path: pathlib.Path) -> None:
    doc = yaml.safe_load(path.read_text())
    doc["schedule"] = {"max_stage": max(doc["schedule"]["stage"])}
    p = load_problem_text(yaml.safe_dump(doc, sort_keys=False), f"{path.stem}-unpinned.yaml")
    g = build_graph(p)
    s = solve(p, g, time_limit=10, workers=1)
    assert s.info is not None and s.info.status in ("OPTIMAL", "FEASIBLE")
    r = verify_program(lower(p, g, s), tightness=False)
    assert r.ok, r.render()


BAD_MESSAGES = {
    "tvm-error-reorder": ("breaks the raw dependence", "order 'make_C' before 'make_D'"),
    "tvm-error-conflicting-order": ("not a permutation", "distinct position"),
}


@pytest.mark.parametrize("path", BAD, ids=lambda f: f.stem)
def test_outside_the_model_is_a_clear_error(path: pathlib.Path) -> None:
    with pytest.raises(SynthError) as ei:
        p = load_problem(str(path))
        g = build_graph(p)
        lower(p, g, schedule_from_pins(p, g))
    text = str(ei.value)
    msg, fix = BAD_MESSAGES[path.stem]
    assert msg in text and fix in text, text
    assert path.name in text


def test_dynamic_less_loop_mutated_wait_refuted_at_one_iteration() -> None:
    """One more in flight at the epilogue's wait(0, 0) lets make_C read B unfinished; the
    counterexample is the shortest loop, K = 1, replayed as a trace."""
    from synth.expr import Num
    from synth.verify import oracle

    p = _load(HERE / "tvm-less-loop-dynamic-from-1.yaml")
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    k = next(k for k, w in enumerate(prog.waits) if w.part == "epilogue")
    r = verify_program(prog.with_wait(k, in_flight=Num(1)), tightness=False, smt2=False)
    assert not r.ok
    cex = r.verdicts[k].counterexample
    assert cex is not None and cex.trip_count == 1 and cex.part == "epilogue" and cex.i == 0, cex
    assert any("may still be in flight" in line for line in cex.trace)
    assert oracle.check(prog.with_wait(k, in_flight=Num(1)), 1).violations

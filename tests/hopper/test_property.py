"""Random Hopper problems: lowering -> proof for every T >= 1, with the explicit-state oracle
(the real mbarrier / wgmma semantics at each small T) as the judge; mutants of the known bug
shapes are refuted by both."""

import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from synth.hopper.ir import dumps, hopper_from_json
from synth.hopper.loop import HopperLoop, Load
from synth.hopper.mutants import mutants
from synth.lower.barriers import lower_hopper, lower_hopper_single
from synth.verify.oracle_phases import run
from synth.verify.phases import verify_hopper

PREDICATES = (None, "k < T - 1", "1 <= k")


@st.composite
def loops(draw, max_stages=3, max_consumers=2):
    stages = draw(st.integers(1, max_stages))
    k = draw(st.integers(0, stages - 1))
    consumers = draw(st.integers(1, max_consumers))
    n = draw(st.integers(1, 2))
    loads = tuple(Load(f"load_{c}", c, draw(st.sampled_from((4096, 8192, 16384, 16400))),
                       draw(st.sampled_from(PREDICATES))) for c in "AB"[:n])
    ws = draw(st.booleans())
    return HopperLoop("rand", loads, "mma", stages, k, consumers if ws else 1), ws


def _judge(case, mutate: bool = False) -> None:
    loop, ws = case
    p = lower_hopper(loop) if ws else lower_hopper_single(loop)
    assert hopper_from_json(__import__("json").loads(dumps(p))) == p
    r = verify_hopper(p, time_limit=30, tightness=False)
    assert r.ok, r.render()
    for T in range(1, loop.stages + 2):
        res = run(p, T, max_states=60_000)
        assert not res.violations, (T, res.violations)
    if not mutate:
        return
    for name, m, classes in mutants(p):
        r = verify_hopper(m, time_limit=30, tightness=False)
        trips = set(range(1, loop.stages + 3)) | {o.counterexample.trip_count for o in r.obligations
                                                   if o.counterexample is not None
                                                   and o.counterexample.trip_count <= 8}
        found = set()
        for T in sorted(trips):
            found |= run(m, T, max_states=60_000).classes
        # the judge: the prover refutes exactly when the oracle sees a violation (a mutation can be
        # a no-op, e.g. bytes +16 on an entry whose load is predicated off wherever it runs)
        assert bool(r.refuted_classes()) == bool(found), (name, r.refuted_classes(), found)
        if found:
            assert r.refuted_classes() & classes, (name, r.refuted_classes())
            assert found & classes, (name, found)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(loops(max_stages=2, max_consumers=1))
def test_random_loops_proven_and_oracle_agrees(loop):
    _judge(loop)


@pytest.mark.slow
@settings(max_examples=20 if os.environ.get("SYNTH_HYPOTHESIS") == "explore" else 3, deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=True)
@given(loops(max_stages=3))
def test_random_loops_and_mutants_slow(loop):
    _judge(loop, mutate=True)


def test_mutants_of_a_small_loop():
    small = HopperLoop("small", (Load("load_A", "A", 8192), Load("load_B", "B", 8192, "k < T - 1")), "mma", 2, 1)
    _judge((small, True), mutate=True)


def test_mutants_of_a_single_warp_group_loop():
    one = HopperLoop("one", (Load("load_A", "A", 8192, "1 <= k"),), "mma", 2, 1)
    _judge((one, False), mutate=True)

"""Random problems are valid user files; random schedules pass check_schedule (capacity aside)."""

from __future__ import annotations

import pytest

from synth.graph import build_graph
from synth.randgen import random_problem, random_schedule
from synth.schedule import check_schedule


def _non_capacity(errs: list[str]) -> list[str]:
    return [e for e in errs if "exceed" not in e]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 20, 50, 100])
@pytest.mark.parametrize("kw", [{}, {"predicated": True, "symbolic": True}, {"hideable": False},
                                {"async_frac": 0.7, "predicated": True}])
def test_random_problem_valid(n: int, kw: dict) -> None:
    for seed in range(5):
        p = random_problem(seed, n, **kw)
        assert len(p.ops) == n
        g = build_graph(p)
        for s in range(3):
            sched = random_schedule(p, g, seed * 10 + s)
            assert _non_capacity(check_schedule(p, g, sched)) == []
            assert sched.max_stage + 1 <= p.loop.min_trip_count


def test_deterministic() -> None:
    a = random_problem(7, 12, predicated=True, symbolic=True)
    b = random_problem(7, 12, predicated=True, symbolic=True)
    assert a == b
    g = build_graph(a)
    assert random_schedule(a, g, 3) == random_schedule(b, g, 3)
    assert random_problem(8, 12) != random_problem(7, 12)


def test_features() -> None:
    probs = [random_problem(s, 8, predicated=True, symbolic=True) for s in range(20)]
    assert any(op.when is not None and op.when.opaque for p in probs for op in p.ops)
    assert any(op.when is not None and not op.when.opaque for p in probs for op in p.ops)
    assert all(p.loop.symbolic for p in probs)
    assert any(len(p.target.async_units) == 2 for s in range(30) for p in [random_problem(s, 12)])
    stall = random_problem(1, 8, hideable=False)
    g = build_graph(stall)
    # The pointer-chasing recurrence goes through an async copy.
    assert any(e.distance == 1 and stall.ops[e.dst].unit == "cp_async" for e in g.constraints())

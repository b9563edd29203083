"""The lowering's speed-ups change no output: program.json byte for byte.

The goldens under ``tests/golden/lower_perf/`` were written by the lowering as it was
before it was made faster (the greedy dropping of implied waits re-proved the same
covers over and over: a 120-op body took about 40 s). Each case is lowered again and
its ``program.json`` text must equal the golden's. The cases: every sm_80 problem of
``problems/`` under its pinned schedule (where it pins one) and under random schedules,
random bodies (:mod:`synth.randgen`) of every kind the generator makes under every
predicate strategy, and (slow) the 120-op body with the schedule CP-SAT chose for it.

``pytest --update-golden`` rewrites the goldens; only do that for a change of the
lowering's output that is meant, and review the diff.
"""

from __future__ import annotations

import pathlib
import time

import pytest

from conftest import PROBLEMS, ROOT
from synth.graph import build_graph
from synth.load import load_problem
from synth.lower import lower
from synth.program import dumps
from synth.randgen import random_problem, random_schedule
from synth.schedule import read_schedule_json, schedule_from_json, schedule_from_pins

GOLDEN = ROOT / "tests" / "golden" / "lower_perf"

SM80 = ["gemm-128x128x32-f16", "gemm-sm80-f16", "predicated-affine", "predicated-opaque", "rfc0077-gemm",
        "rfc0077-interleaved", "rfc0077-same-stage-consumer", "rfc0077-three-stage", "rfc0077-two-stage",
        "spec-predicated", "two-queues"]

FLAGS = {"plain": {}, "sym": {"symbolic": True}, "pred": {"predicated": True},
         "predsym": {"predicated": True, "symbolic": True}, "chase": {"hideable": False, "symbolic": True},
         "async": {"async_frac": 0.7}, "inplace": {"inplace": True}}

# (seed, n_ops, flags, strategy)
RANDOM = [(seed, n, flag, strategy)
          for k, (seed, n) in enumerate([(1, 4), (2, 6), (3, 9), (4, 12), (5, 16), (6, 20), (7, 24)])
          for j, flag in enumerate(FLAGS)
          for strategy in (["auto", "always_commit", "naive"][(k + j) % 3],)]


def _problem_case(name: str, seed: int):
    p = load_problem(str(PROBLEMS / f"{name}.yaml"))
    g = build_graph(p)
    s = schedule_from_pins(p, g) if seed < 0 else random_schedule(p, g, seed)
    return p, g, s, "auto"


def _random_case(seed: int, n: int, flag: str, strategy: str):
    p = random_problem(seed, n, **FLAGS[flag])
    g = build_graph(p)
    return p, g, random_schedule(p, g, seed), strategy


def _cases() -> list:
    out = []
    for name in SM80:
        pinned = load_problem(str(PROBLEMS / f"{name}.yaml")).pins.stage is not None
        for seed in ([-1] if pinned else []) + [0, 1]:
            out.append(pytest.param(f"{name}-{'pinned' if seed < 0 else f's{seed}'}", _problem_case, (name, seed),
                                    id=f"{name}-{seed}"))
    for seed, n, flag, strategy in RANDOM:
        out.append(pytest.param(f"rand-{seed}-{n}-{flag}-{strategy}", _random_case, (seed, n, flag, strategy),
                                id=f"rand-{seed}-{n}-{flag}-{strategy}"))
    return out


def _compare(name: str, text: str, update: bool) -> None:
    path = GOLDEN / f"{name}.json"
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no golden {path} (write it with the lowering before the change: --update-golden)"
    assert text == path.read_text(), f"{name}: program.json differs from {path}"


@pytest.mark.parametrize("name,make,args", _cases())
def test_lowering_unchanged(name, make, args, update_golden) -> None:
    """Each case's program.json equals the golden the earlier lowering wrote, byte for byte."""
    p, g, s, strategy = make(*args)
    _compare(name, dumps(lower(p, g, s, predicate_strategy=strategy)), update_golden)


@pytest.mark.slow
def test_120_op_body_unchanged_and_fast(update_golden) -> None:
    """The 120-op body (randgen seed 1) under the schedule CP-SAT chose for it (``synth solve
    --time-limit 300``, OPTIMAL): the same program.json, lowered in a bounded time (it took
    about 40 s before; now about 3 s on one core, 20 s allowed for a loaded machine)."""
    p = random_problem(1, 120)
    g = build_graph(p)
    s = schedule_from_json(p, read_schedule_json(str(GOLDEN / "rand-1-120.schedule.json")))
    t0 = time.process_time()
    text = dumps(lower(p, g, s))
    spent = time.process_time() - t0
    _compare("rand-1-120", text, update_golden)
    if not update_golden:
        assert spent < 20, f"lowering the 120-op body took {spent:.1f} CPU-seconds"

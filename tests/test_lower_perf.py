"""The lowering's and the emitter's speed-ups change no output: program.json and kernel.cu
byte for byte.

The goldens under ``tests/golden/lower_perf/`` were written by the lowering as it was
before it was made faster (the greedy dropping of implied waits re-proved the same
covers over and over: a 120-op body took 5.4 CPU-s, now 1.7). Each case is lowered again and
its ``program.json`` text must equal the golden's. The cases: every sm_80 problem of
``problems/`` under its pinned schedule (where it pins one) and under random schedules,
random bodies (:mod:`synth.randgen`) of every kind the generator makes under every
predicate strategy, and (slow) the 120-op body with the schedule CP-SAT chose for it.

The ``kernel-*.cu`` goldens were written by the emitter before it read the body's repeating
period (it simulated every k-tile at every analysed trip count: 23 CPU-s for
``min_k_tiles: 31250``); barrier placement is also compared with its own step-by-step run.

``pytest --update-golden`` rewrites the goldens; only do that for a change of the
lowering's output that is meant, and review the diff.
"""

from __future__ import annotations


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


def rand_1_120():
    """The 120-op body (randgen seed 1) and the schedule CP-SAT chose for it (``synth solve --time-limit 300``,
    OPTIMAL): ``(problem, graph, schedule)``."""
    p = random_problem(1, 120)
    g = build_graph(p)
    return p, g, schedule_from_json(p, read_schedule_json(str(GOLDEN / "rand-1-120.schedule.json")))


@pytest.mark.slow
def test_120_op_body_unchanged(update_golden) -> None:
    """The 120-op body under its CP-SAT schedule: the same program.json (its lowering time, 5.4 CPU-s before
    dropping implied waits stopped re-proving the same covers, about 1.7 now, 4 allowed, is
    benchmarks/speed_bounds.py's)."""
    p, g, s = rand_1_120()
    _compare("rand-1-120", dumps(lower(p, g, s)), update_golden)


# ---------------------------------------------------------------------------------------------
# emit: kernel.cu of a GEMM whose body runs many k-tiles

def gemm_case(stages: int, min_k_tiles: int, warps: int, bk: int, k_factor: int):
    from synth.load import load_problem_text

    text = (f"name: bigk\nkind: gemm\nshape: {{M: 128, N: 128, K: {bk * min_k_tiles * k_factor}}}\ndtype: f16\n"
            f"tile: {{BM: 128, BN: 128, BK: {bk}}}\nwarps: {warps}\nstages: {stages}\narch: sm_80\n"
            f"min_k_tiles: {min_k_tiles}\n")
    p = load_problem_text(text, "bigk.yaml")
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    return p, s, lower(p, g, s)


GEMM_CASES = [(2, 1, 4, 32, 2), (3, 7, 8, 64, 2), (4, 40, 4, 32, 2), (5, 300, 8, 64, 2), (3, 2000, 4, 32, 2),
              (3, 31250, 4, 32, 1)]
"""(stages, min_k_tiles, warps, bk, k_factor) of the emitter's goldens (and of benchmarks/speed_bounds.py)."""


@pytest.mark.parametrize("stages,min_k_tiles,warps,bk,k_factor", GEMM_CASES)
def test_kernel_unchanged_and_independent_of_min_k_tiles(stages, min_k_tiles, warps, bk, k_factor,
                                                         update_golden) -> None:
    """kernel.cu equals the golden the earlier emitter wrote (it simulated every k-tile of the
    body at ten trip counts: 23 CPU-s for min_k_tiles 31250); the time it takes, which does not grow with
    min_k_tiles (about 10 ms; 1 s allowed), is benchmarks/speed_bounds.py's."""
    from synth.emit.cuda import emit_kernel

    p, s, prog = gemm_case(stages, min_k_tiles, warps, bk, k_factor)
    _compare_text(f"kernel-{stages}-{min_k_tiles}-{warps}-{bk}.cu", emit_kernel(p, s, prog), update_golden)


def _compare_text(name: str, text: str, update: bool) -> None:
    path = GOLDEN / name
    if update:
        path.write_text(text)
        return
    assert path.exists(), f"no golden {path}"
    assert text == path.read_text(), f"{name} differs from {path}"


def _random_expr(rng, depth: int):
    from synth.expr import Bin, Call, Ite, Num, Un, Var

    if depth == 0 or rng.random() < 0.25:
        return rng.choice([Var("i"), Var("i"), Var("T"), Num(rng.randint(-4, 6))])
    kind = rng.choice(["+", "-", "*", "/", "%", "<", "==", "&&", "!", "neg", "?", "min"])
    a, b = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
    if kind in ("/", "%"):
        return Bin(kind, a, Num(rng.randint(1, 6)))
    if kind == "*":
        return Bin("*", a, Num(rng.randint(-3, 3))) if rng.random() < 0.7 else Bin("*", a, b)
    if kind == "!":
        return Un("!", Bin("<", a, b))
    if kind == "neg":
        return Un("-", a)
    if kind == "&&":
        return Bin("&&", Bin("<", a, b), Bin("==", Bin("%", a, Num(2)), Num(0)))
    if kind == "?":
        return Ite(Bin("<", Bin("%", a, Num(3)), Num(1)), a, b)
    if kind == "min":
        return Call(rng.choice(["min", "max"]), (a, b))
    return Bin(kind, a, b)


def test_periodic_is_exact() -> None:
    """Whenever :func:`periodic` answers ``(P, inc)``, ``e(i + P) == e(i) + inc`` at every i
    tried, and :func:`takes_value` agrees with a scan of every step (random expressions)."""
    import random

    from synth.emit.barriers import periodic
    from synth.expr import evaluate

    rng = random.Random(7)
    answered = 0
    for _ in range(600):
        e = _random_expr(rng, 4)
        env = {"T": rng.randint(1, 9)}
        got = periodic(e, "i", env)
        if got is None:
            continue
        answered += 1
        p, inc = got
        for i in range(-12, 40):
            assert int(evaluate(e, {**env, "i": i + p})) == int(evaluate(e, {**env, "i": i})) + inc, (e, i)
    assert answered > 150


def test_takes_value_matches_a_scan() -> None:
    """:func:`takes_value` on the body of real programs (slots, versions, iterations, counts)
    and random expressions equals the answer of evaluating every step."""
    import random

    from synth.emit.barriers import extent, step_env, takes_value, trip_samples
    from synth.expr import evaluate

    p, s, prog = gemm_case(4, 9, 4, 32, 1)
    body = prog.part("body")
    rng = random.Random(3)
    exprs = [a.version for st in body.stmts for a in (*getattr(st, "reads", ()), *getattr(st, "writes", ()))]
    exprs += [_random_expr(rng, 3) for _ in range(150)]
    for e in exprs:
        values = {int(evaluate(e, step_env(prog, body, i, t))) for t in trip_samples(prog)
                  for i in range(extent(prog, body, t))}
        for v in range(-3, 14):
            assert takes_value(prog, body, e, v) == (v in values), (e, v)


def test_barrier_placement_jumps_only_where_it_may(monkeypatch) -> None:
    """:func:`synth.emit.barriers.barriers` on random lowered programs (trip counts of 32 and
    symbolic ones, predicated copies, in-place updates) places the same barriers, for the same
    reasons, as the step-by-step run (the body's periods switched off), or fails the same way."""
    import synth.emit.barriers as B

    def place(prog, shared):
        try:
            return B.barriers(prog, shared)
        except ValueError as exc:
            return str(exc)

    checked = jumped = 0
    for seed in range(24):
        flags = [{}, {"symbolic": True}, {"predicated": True}, {"inplace": True}][seed % 4]
        p = random_problem(seed, 4 + seed % 9, **flags)
        g = build_graph(p)
        try:
            s = random_schedule(p, g, seed)
        except ValueError:
            continue
        prog = lower(p, g, s)
        shared = {b.name for b in p.buffers if b.space == "shared"}
        fast = place(prog, shared)
        body = prog.part("body")
        jumped += any(B._body_period(prog, body, shared, t) is not None for t in B.trip_samples(prog))
        with monkeypatch.context() as m:
            m.setattr(B, "_body_period", lambda *a: None)
            slow = place(prog, shared)
        assert fast == slow, p.name
        checked += 1
    for stages, mk, warps, bk in ((2, 5, 4, 32), (3, 9, 8, 64), (4, 17, 4, 32), (5, 40, 8, 64), (6, 33, 4, 32)):
        _, _, prog = gemm_case(stages, mk, warps, bk, 1)
        shared = {"A_s", "B_s"}
        fast = place(prog, shared)
        with monkeypatch.context() as m:
            m.setattr(B, "_body_period", lambda *a: None)
            slow = place(prog, shared)
        assert fast == slow and not isinstance(fast, str), (stages, mk)
        checked += 1
    assert checked >= 20 and jumped >= 10, (checked, jumped)

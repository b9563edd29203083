"""The trusted checker (synth/trusted) against synth's prover: two implementations, one verdict.

For the RFC listings, the lowered example problems (also as short loops, T >= 1)
and every mutant that raises or lowers one wait count by one, the per-wait verdicts
(proven / refuted) and the presence of global failures must agree.
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.expr import Bin, Num, simplify
from synth.graph import build_graph
from synth.load import load_problem
from synth.lower import lower
from synth.program import Program, dumps
from synth.schedule import schedule_from_pins
from synth.trusted import expr as X
from synth.trusted.check import form
from synth.trusted.check import waits as trusted_waits
from synth.trusted.program import read_bytes
from synth.verify import load_program, verify_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
LISTINGS = ROOT / "tests" / "rfc_listings"
PINNED = ["rfc0077-two-stage", "rfc0077-gemm", "rfc0077-interleaved", "rfc0077-three-stage",
          "rfc0077-same-stage-consumer", "spec-predicated", "predicated-affine"]


def _lowered(name: str, trip=None, tmin=None) -> Program:
    p = load_problem(str(ROOT / "problems" / f"{name}.yaml"))
    if trip is not None:
        p = dataclasses.replace(p, loop=dataclasses.replace(p.loop, trip_count=trip, min_trip_count=tmin))
    g = build_graph(p)
    return lower(p, g, schedule_from_pins(p, g))


def _agree(program: Program) -> None:
    mine = verify_program(program, tightness=False)
    synth_waits = {v.index: v.status for v in mine.verdicts}
    synth_global = [o.id for o in mine.obligations if o.wait is None and o.status != "proven"]
    tw, tglob = trusted_waits(read_bytes(dumps(program).encode()))
    assert tw == synth_waits, (program.name, tw, synth_waits)
    assert bool(tglob) == bool(synth_global), (program.name, tglob, synth_global)


def _mutants(program: Program):
    yield program
    for k, w in enumerate(program.waits):
        for delta in (1, -1):
            yield program.with_wait(k, in_flight=simplify(Bin("+", w.in_flight, Num(delta))))


@pytest.mark.parametrize("name", ["rfc0077-two-stage", "rfc0077-gemm", "rfc0077-interleaved-literal",
                                  "rfc0077-three-stage", "predicated-opaque-naive"])
def test_agree_on_rfc_listings_and_mutants(name: str) -> None:
    for m in _mutants(load_program(str(LISTINGS / f"{name}.json"))):
        _agree(m)


@pytest.mark.parametrize("name", PINNED)
def test_agree_on_lowered_examples_and_mutants(name: str) -> None:
    for m in _mutants(_lowered(name)):
        _agree(m)


@pytest.mark.slow
@pytest.mark.parametrize("name, trip, tmin", [("rfc0077-gemm", 2, 2), ("rfc0077-gemm", "T", 1),
                                              ("rfc0077-three-stage", "T", 1), ("rfc0077-interleaved", 1, 1),
                                              ("rfc0077-two-stage", "T", 1)])
def test_agree_on_short_loops_and_mutants(name: str, trip, tmin: int) -> None:
    for m in _mutants(_lowered(name, trip, tmin)):
        _agree(m)


def test_lowered_programs_are_well_formed_and_covered() -> None:
    """What load_program checks with the solver holds for what synth writes (short loops too)."""
    for name in PINNED:
        assert form(read_bytes(dumps(_lowered(name)).encode())) == [], name
    for name, trip, tmin in (("rfc0077-gemm", 1, 1), ("rfc0077-gemm", "T", 1), ("rfc0077-three-stage", 2, 2)):
        assert form(read_bytes(dumps(_lowered(name, trip, tmin)).encode())) == [], (name, trip)


def _random_lowered(seed: int, n_ops: int, predicated: bool, short: bool) -> Program:
    from synth.randgen import random_problem, random_schedule

    pr = random_problem(seed, n_ops, predicated=predicated, symbolic=seed % 2 == 0)
    if short:
        trip = "T" if isinstance(pr.loop.trip_count, str) else 1 + seed % 3
        pr = dataclasses.replace(pr, loop=dataclasses.replace(pr.loop, trip_count=trip, min_trip_count=1 + seed % 3))
    g = build_graph(pr)
    return lower(pr, g, random_schedule(pr, g, seed))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.integers(2, 6), st.booleans(), st.booleans())
def test_random_lowered_programs_read_back_and_agree(seed: int, n_ops: int, predicated: bool, short: bool) -> None:
    """Random lowered programs pass the trusted reader and its well-formedness checks, and both
    checkers prove them."""
    p = _random_lowered(seed, n_ops, predicated, short)
    tp = read_bytes(dumps(p).encode())
    assert form(tp) == []
    _agree(p)


@pytest.mark.parametrize("text, smt", [
    ("i + 3", "(+ i 3)"), ("(i + 3) % 4", "(mod (+ i 3) 4)"), ("2 - i", "(- 2 i)"),
    ("i < 2 && !(T <= 3)", "(and (< i 2) (not (<= T 3)))"), ("i != 1", "(not (= i 1))"),
    ("-i", "(- i)"), ("i / 2", "(div i 2)"), ("(i < 1) ? 1 : 0", "(ite (< i 1) 1 0)"),
])
def test_expressions_print_as_smt(text: str, smt: str) -> None:
    assert X.smt(X.parse(text), {"i": "i", "T": "T"}) == smt


@pytest.mark.parametrize("text", ["i * i", "i % 0", "i / T", "(" * 40 + "1" + ")" * 40, "f(i)", "i +", "1" * 13])
def test_expressions_refused(text: str) -> None:
    with pytest.raises(X.ExprError):
        X.sort(X.parse(text))


def test_min_max_stay_small() -> None:
    e = "min(" * 30 + "i" + ", 1)" * 30
    assert len(X.smt(X.parse(e), {"i": "i"})) < 5000

"""The independent Hopper checker (synth/trusted/hopper.py): it accepts the lowered programs,
rejects every mutant synth's prover refutes, refuses malformed files cleanly, and imports
nothing of synth outside synth.trusted. The tests may use synth's prover; the checker may not."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import pytest

from synth.emit.sm90.config import Sm90Config
from synth.hopper.ir import dumps
from synth.hopper.loop import HopperLoop, Load
from synth.hopper.mutants import mutants
from synth.lower.barriers import lower_hopper, lower_hopper_single
from synth.trusted.hopper import CLASSES, check_hopper_program
from synth.verify.phases import verify_hopper

TIMEOUT = 30.0
LOADS = (Load("load_A", "A", 16384), Load("load_B", "B", 8192, "k < T - 1"))


def _check(p):
    return check_hopper_program(dumps(p).encode("utf-8"), timeout_s=TIMEOUT)


def _accepted(p) -> None:
    r = _check(p)
    assert r.ok, r.render()
    assert all(c.z3 == "unsat" and c.cvc5 == "unsat" for c in r.obligations)
    assert r.messages[0].startswith("independent Hopper check OK")


@pytest.mark.parametrize("bm,bn,stages,k", [(128, 128, 1, 0), (128, 256, 2, 1), (128, 64, 3, 0), (128, 128, 4, 3),
                                            (128, 128, 5, 1), (64, 128, 2, 0), (64, 64, 3, 2), (64, 256, 5, 4)])
def test_lowered_warp_specialized_programs_are_accepted(bm: int, bn: int, stages: int, k: int) -> None:
    _accepted(Sm90Config(bm=bm, bn=bn, stages=stages, k_pipe_mmas=k).program())


@pytest.mark.slow
@pytest.mark.parametrize("bm", [64, 128])
@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5])
def test_every_k_pipe_mmas_is_accepted(bm: int, stages: int) -> None:
    for k in range(stages):
        _accepted(Sm90Config(bm=bm, bn=128, stages=stages, k_pipe_mmas=k).program())


@pytest.mark.parametrize("stages,k", [(1, 0), (2, 1), (3, 0), (4, 2), (5, 4)])
def test_single_warp_group_programs_are_accepted(stages: int, k: int) -> None:
    _accepted(lower_hopper_single(HopperLoop("g", LOADS, "mma", stages, k)))


def test_predicated_loads_and_other_trip_counts_are_accepted() -> None:
    _accepted(Sm90Config(stages=4, k_pipe_mmas=1, load_when="k % 2 == 0").program())
    _accepted(lower_hopper(HopperLoop("g", LOADS, "mma", 3, 1, 2)))
    _accepted(lower_hopper(HopperLoop("g", LOADS[:1], "mma", 3, 2, 3, trip_count=7, min_trip_count=7)))
    _accepted(lower_hopper(HopperLoop("g", LOADS, "mma", 3, 2, 1, min_trip_count=4)))


def test_every_class_is_derived_and_the_ranking_is_reported() -> None:
    r = _check(Sm90Config(stages=3, k_pipe_mmas=1, load_when="k < T - 1").program())
    assert r.ok, r.render()
    kinds = {c.kind for c in r.obligations}
    assert kinds <= set(CLASSES)
    assert kinds >= {"wellformed", "parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma",
                     "wgmma_wait", "slot_reuse", "raw", "fence"}
    assert dict(r.lags) == {"consumer": 0} and "deadlock ranking" in r.messages[0]


def test_five_stage_two_consumer_program_is_fast() -> None:
    p = Sm90Config(bm=128, stages=5, k_pipe_mmas=1).program()
    assert p.role("consumer").warpgroups == 2
    t0 = time.perf_counter()
    _accepted(p)
    assert time.perf_counter() - t0 < 30  # about 1 s alone; the machine is shared


def _compare_mutants(p) -> int:
    rejected = 0
    for name, m, _ in mutants(p):
        if verify_hopper(m, time_limit=20, tightness=False).ok:
            continue
        r = _check(m)
        assert not r.ok, f"{name}: synth's prover refutes it, the independent checker accepts it"
        assert r.obligations and any(c.z3 == "sat" for c in r.obligations), name
        rejected += 1
    return rejected


@pytest.mark.parametrize("program", [
    pytest.param(lambda: Sm90Config(bm=128, stages=3, k_pipe_mmas=1, load_when="k % 2 == 0").program(), id="ws-pred"),
    pytest.param(lambda: lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1)), id="single"),
])
def test_refuted_mutants_are_rejected(program) -> None:
    assert _compare_mutants(program()) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("program", [
    pytest.param(lambda: Sm90Config(bm=128, stages=3, k_pipe_mmas=2).program(), id="ws-3-2"),
    pytest.param(lambda: Sm90Config(bm=64, stages=1, k_pipe_mmas=0).program(), id="ws-1-0"),
    pytest.param(lambda: Sm90Config(bm=64, stages=2, k_pipe_mmas=0).program(), id="ws-2-0"),
    pytest.param(lambda: lower_hopper_single(HopperLoop("g", LOADS[:1], "mma", 2, 0)), id="single-2-0"),
])
def test_refuted_mutants_are_rejected_more_shapes(program) -> None:
    assert _compare_mutants(program()) >= 4


def test_an_arrival_for_phase_minus_one_is_rejected() -> None:
    """A release of count i - 1 without its guard arrives at i = 0 for phase -1, which lands in
    phase 0 (the oracle sees it); the phase each arrival names must be >= 0."""
    from synth.verify.oracle_phases import run
    doc = json.loads(dumps(Sm90Config(bm=64, stages=3, k_pipe_mmas=0).program()))
    rel = _stmt(doc, "consumer", "arrive")
    assert rel["state"]["count"] == "i" and rel["guard"] is None
    rel["state"]["count"] = "i - 1"
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "arrivals:consumer:body:4:order" in {c.id for c in r.obligations if not c.ok}
    from synth.hopper.ir import hopper_from_json
    assert "arrivals" in run(hopper_from_json(doc), 1).violations


# -- tampering ----------------------------------------------------------------------------------

def _doc():
    return json.loads(dumps(Sm90Config(stages=2, k_pipe_mmas=1).program()))


def _refused(doc_or_bytes, *needles: str) -> None:
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else json.dumps(doc_or_bytes).encode()
    t0 = time.perf_counter()
    r = check_hopper_program(data, timeout_s=TIMEOUT)
    assert not r.ok and not r.obligations, r.render()
    assert "refused" in r.messages[0] and "fix:" in r.messages[0], r.messages[0]
    for n in needles:
        assert n in r.messages[0], (n, r.messages[0])
    assert time.perf_counter() - t0 < 5


def _stmt(doc, role: str, kind: str):
    r = next(x for x in doc["roles"] if x["role"] == role)
    return next(s for pt in r["parts"] for s in pt["stmts"] if s["kind"] == kind)


def test_flipped_fields_are_rejected_by_the_solvers() -> None:
    doc = _doc()
    doc["barriers"][1]["count"] = 1  # two consumer warp groups arrive on "empty"
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "arrivals" in {c.kind for c in r.obligations if not c.ok}
    doc = _doc()
    _stmt(doc, "producer", "arrive")["tx"][0]["bytes"] += 16
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "tx_bytes" in {c.kind for c in r.obligations if not c.ok}
    doc = _doc()
    _stmt(doc, "consumer", "try_wait")["state"]["phase"] = 1
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "parity" in {c.kind for c in r.obligations if not c.ok}
    doc = _doc()
    _stmt(doc, "consumer", "op")["reads"][0]["slot"] = "(i + 1) % 2"  # a slot is derived, never trusted
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "wellformed" in {c.kind for c in r.obligations if not c.ok}
    doc = _doc()
    doc["teardown"] = doc["teardown"][:1]
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and {c.id for c in r.obligations if not c.ok} == {"fence:inval:empty"}


def test_wrong_types_huge_numbers_and_unknown_keys_are_refused() -> None:
    doc = _doc()
    doc["barriers"][0]["slots"] = "2"
    _refused(doc, "barriers[0].slots", "expected an integer")
    doc = _doc()
    _stmt(doc, "consumer", "arrive")["arrivals"] = True
    _refused(doc, "arrivals")
    doc = _doc()
    doc["loop"]["min_trip_count"] = 10 ** 20
    _refused(doc, "min_trip_count")
    doc["loop"]["min_trip_count"] = 10 ** 30
    _refused(doc, "digits")
    doc = _doc()
    doc["loop"]["trip_count"] = 2 ** 40
    _refused(doc, "trip_count")
    doc = _doc()
    doc["buffers"][0]["multiplicity"] = 0
    _refused(doc, "multiplicity")
    doc = _doc()
    doc["parity"] = 1
    _refused(doc, "unknown key", "'parity'")
    doc = _doc()
    _stmt(doc, "consumer", "try_wait")["parity"] = 0  # parities are derived from the state, never read
    _refused(doc, "unknown key")
    doc = _doc()
    _stmt(doc, "producer", "arrive")["state"]["phase"] = 1
    _refused(doc, "current phase")
    doc = _doc()
    _stmt(doc, "consumer", "try_wait")["state"]["count"] = "i * i"
    _refused(doc, "constant")
    doc = _doc()
    _stmt(doc, "consumer", "try_wait")["state"]["count"] = "i + n"
    _refused(doc, "unknown name")
    doc = _doc()
    _stmt(doc, "consumer", "try_wait")["barrier"] = "nope"
    _refused(doc, "unknown barrier")
    doc = _doc()
    doc["protocol"] = "cp.async"
    _refused(doc, "protocol")
    doc = _doc()
    del doc["roles"][0]["waits"]
    _refused(doc, "missing key")
    _refused(b'{"protocol": "mbarrier", "protocol": "mbarrier"}', "twice")
    _refused(b'{"protocol": NaN}', "NaN")
    _refused(b'{"protocol": "mbarrier", "x": 1.5}')
    _refused(b"\xff\xfe", "UTF-8")
    _refused(b"[" * 100 + b"]" * 100, "nested")
    _refused(b"{", "JSON")
    _refused(b"[]", "expected an object")


INT_FIELDS = ("slots", "stages", "phase", "bytes", "arrivals", "warpgroups", "multiplicity", "stage", "latency",
              "bytes_per_slot", "min_trip_count", "group", "wait")


def _int_paths(x, path=()):
    if isinstance(x, dict):
        for k, v in x.items():
            if k in INT_FIELDS and isinstance(v, int) or (k == "count" and isinstance(v, int) and "kind" in x):
                yield path + (k,)
            yield from _int_paths(v, path + (k,))
    elif isinstance(x, list):
        for n, v in enumerate(x):
            yield from _int_paths(v, path + (n,))


def test_every_integer_field_refuses_other_types_and_out_of_range_values() -> None:
    paths = list(_int_paths(_doc()))
    assert len(paths) > 30
    for path in paths:
        for bad in ("1", 1.5, True, 2 ** 70, -5, None, [1]):
            doc = _doc()
            at = doc
            for k in path[:-1]:
                at = at[k]
            at[path[-1]] = bad
            _refused(doc)


# -- wiring and the trusted boundary ------------------------------------------------------------

def test_certify_hopper_adds_the_independent_verdict_and_fails_with_it(tmp_path, monkeypatch) -> None:
    from synth.trusted.hopper import TrustedHopperResult
    from synth.verify import certificate_phases as cp
    p = lower_hopper(HopperLoop("g", LOADS, "mma", 2, 1))
    cp.write_hopper_certificate(verify_hopper(p, time_limit=20), str(tmp_path / "c"))
    res = cp.certify_hopper(str(tmp_path / "c"))
    assert res.ok and any(m.startswith("independent Hopper check OK") for m in res.messages), res.render()
    monkeypatch.setattr(cp, "check_hopper_program", lambda data, timeout_s: TrustedHopperResult(
        False, (), ("independent Hopper check FAILED: stand-in",)))
    res = cp.certify_hopper(str(tmp_path / "c"))
    assert not res.ok and "stand-in" in res.render()


def test_hopper_checker_imports_nothing_else_of_synth() -> None:
    src = pathlib.Path(__file__).resolve().parent.parent / "synth" / "trusted"
    files = sorted(src.glob("hopper*.py"))
    assert {f.name for f in files} >= {"hopper.py", "hopper_program.py"}
    for f in files:
        for line in f.read_text().splitlines():
            s = line.strip()
            if s.startswith(("import ", "from ")):
                assert not s.startswith(("from ..", "import synth", "from synth")), (f.name, s)
    data = dumps(lower_hopper(HopperLoop("g", LOADS, "mma", 2, 1))).encode()
    code = ("import sys\n"
            "from synth.trusted.hopper import check_hopper_program\n"
            f"r = check_hopper_program({data!r}, timeout_s=30)\n"
            "bad = sorted(m for m in sys.modules if m.startswith('synth.') and not m.startswith('synth.trusted'))\n"
            "print('OK' if r.ok and not bad else f'FAIL {bad} {r.render()}')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "OK", out.stdout + out.stderr

"""The independent Hopper checker (synth/trusted/hopper.py): it accepts the lowered programs,
rejects every mutant synth's prover refutes, refuses malformed files cleanly, and imports
nothing of synth outside synth.trusted. The tests may use synth's prover; the checker may not."""

from __future__ import annotations

import functools
import json
import pathlib
import subprocess
import sys
import time

import pytest

from conftest import AT_ONCE_S
from synth.hopper.kernel_design import KernelDesign
from synth.hopper.ir import dumps
from synth.hopper.loop import HopperLoop, Load
from synth.hopper.mutants import mutants
from synth.lower.barriers import lower_hopper, lower_hopper_single
from synth.trusted.hopper import CLASSES, check_hopper_program
from synth.verify.phases import verify_hopper
from synth.lower.hopper_design import design_program

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
    _accepted(design_program(KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=k)))


@pytest.mark.slow
@pytest.mark.parametrize("stages", [1, 2, 3, 4])  # 5 stages: test_lowered_warp_specialized_programs_are_accepted
def test_every_k_pipe_mmas_is_accepted(stages: int) -> None:
    """Every K_PIPE_MMAS of the stage count, one (bm = 64) and two (bm = 128) consumer warp groups
    taking turns, so each stage count from 2 up meets both (1 stage: both, it has only k = 0)."""
    for k in range(stages):
        for bm in ((64, 128) if stages == 1 else (64 if k % 2 == 0 else 128,)):
            _accepted(design_program(KernelDesign.of(bm=bm, bn=128, stages=stages, k_pipe_mmas=k)))


@pytest.mark.parametrize("stages,k", [(1, 0), (2, 1), (3, 0), (4, 2), (5, 4)])
def test_single_warp_group_programs_are_accepted(stages: int, k: int) -> None:
    _accepted(lower_hopper_single(HopperLoop("g", LOADS, "mma", stages, k)))


def test_predicated_loads_and_other_trip_counts_are_accepted() -> None:
    _accepted(design_program(KernelDesign.of(stages=4, k_pipe_mmas=1, load_when="k % 2 == 0")))
    _accepted(lower_hopper(HopperLoop("g", LOADS, "mma", 3, 1, 2)))
    _accepted(lower_hopper(HopperLoop("g", LOADS[:1], "mma", 3, 2, 3, trip_count=7, min_trip_count=7)))
    _accepted(lower_hopper(HopperLoop("g", LOADS, "mma", 3, 2, 1, min_trip_count=4)))


def test_every_class_is_derived_and_the_ranking_is_reported() -> None:
    r = _check(design_program(KernelDesign.of(stages=3, k_pipe_mmas=1, load_when="k < T - 1")))
    assert r.ok, r.render()
    kinds = {c.kind for c in r.obligations}
    assert kinds <= set(CLASSES)
    assert kinds >= {"wellformed", "parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma",
                     "wgmma_wait", "wgmma_drain", "slot_reuse", "raw", "coverage", "fence", "teardown"}
    assert dict(r.lags) == {"consumer": 0} and "deadlock ranking" in r.messages[0]
    assert r.by_class()["teardown"] == (2, 2) and "teardown 2/2" in r.messages[0]  # one per TMA statement


def test_five_stage_program_has_two_consumer_warp_groups() -> None:
    # its acceptance is test_lowered_warp_specialized_programs_are_accepted[128-128-5-1]'s; the time it takes
    # (about 1 s alone, 30 allowed) is benchmarks/speed_bounds.py's
    assert design_program(KernelDesign.of(bm=128, stages=5, k_pipe_mmas=1)).role("consumer").warpgroups == 2


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


# Each mutant costs a proof by synth's prover (with oracle replays) and one by the checker, so the
# shapes are one per distinct feature: two consumer warp groups with predicated loads and
# K_PIPE_MMAS 2 (ws-pred), one warp group with a predicated load and K_PIPE_MMAS 1 (single: at 3
# stages the same mutants apply and fail the same classes, at twice the cost), one stage with
# K_PIPE_MMAS 0 (ws-1-0), one load and no wgmma in flight at the wait (single-2-0).
@pytest.mark.parametrize("program", [
    pytest.param(lambda: design_program(KernelDesign.of(bm=128, stages=3, k_pipe_mmas=2, load_when="k % 2 == 0")), id="ws-pred",
                 marks=pytest.mark.slow),  # two warp groups, predicated: in CI (SYNTH_SLOW=1); the quick tier runs "single"
    pytest.param(lambda: lower_hopper_single(HopperLoop("g", LOADS, "mma", 2, 1)), id="single"),
])
def test_refuted_mutants_are_rejected(program) -> None:
    assert _compare_mutants(program()) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("program", [
    pytest.param(lambda: design_program(KernelDesign.of(bm=64, stages=1, k_pipe_mmas=0)), id="ws-1-0"),
    pytest.param(lambda: lower_hopper_single(HopperLoop("g", LOADS[:1], "mma", 2, 0)), id="single-2-0"),
])
def test_refuted_mutants_are_rejected_more_shapes(program) -> None:
    assert _compare_mutants(program()) >= 4


def test_an_arrival_for_phase_minus_one_is_rejected() -> None:
    """A release of count i - 1 without its guard arrives at i = 0 for phase -1, which lands in
    phase 0 (the oracle sees it); the phase each arrival names must be >= 0."""
    from synth.verify.oracle_phases import run
    doc = json.loads(dumps(design_program(KernelDesign.of(bm=64, stages=3, k_pipe_mmas=0))))
    rel = _stmt(doc, "consumer", "arrive")
    assert rel["state"]["count"] == "i" and rel["guard"] is None
    rel["state"]["count"] = "i - 1"
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "arrivals:consumer:body:4:order" in {c.id for c in r.obligations if not c.ok}
    from synth.hopper.ir import hopper_from_json
    assert "arrivals" in run(hopper_from_json(doc), 1).violations


# -- tampering ----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _doc_text() -> str:
    return dumps(design_program(KernelDesign.of(stages=2, k_pipe_mmas=1)))


def _doc():
    """A fresh, mutable copy of one lowered program's JSON (lowered once)."""
    return json.loads(_doc_text())


def _refused(doc_or_bytes, *needles: str) -> None:
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else json.dumps(doc_or_bytes).encode()
    t0 = time.perf_counter()
    r = check_hopper_program(data, timeout_s=TIMEOUT)
    assert not r.ok and not r.obligations, r.render()
    assert "refused" in r.messages[0] and "fix:" in r.messages[0], r.messages[0]
    for n in needles:
        assert n in r.messages[0], (n, r.messages[0])
    assert time.perf_counter() - t0 < AT_ONCE_S


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
    for inval, needle in (({"kind": "inval", "barrier": "nope", "guard": None}, "unknown barrier"),
                          ({"kind": "inval", "barrier": "full", "guard": None, "phase": 0}, "unknown key"),
                          ({"kind": "inval", "barrier": "full", "guard": "k < 2"}, "unknown name")):
        doc = _doc()
        doc["roles"][1]["parts"][0]["stmts"].append(inval)  # an inval may stand in a role, well formed
        _refused(doc, needle)
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
    """A Hopper certificate holds the independent checker's obligations: its writer runs that
    checker and writes nothing when it fails; certify re-derives them (trusted) and asks both solvers."""
    from synth.trusted.hopper import TrustedHopperResult
    from synth.verify import certificate_phases as cp
    p = lower_hopper(HopperLoop("g", LOADS, "mma", 2, 1))
    report = verify_hopper(p, time_limit=20)
    cp.write_hopper_certificate(report, str(tmp_path / "c"))
    res = cp.certify_hopper(str(tmp_path / "c"))
    assert res.ok and "re-derived and unsat" in res.messages[0], res.render()
    monkeypatch.setattr(cp, "check_hopper_program", lambda data, timeout_s, tightness: TrustedHopperResult(
        False, (), ("independent Hopper check FAILED: stand-in",)))
    with pytest.raises(ValueError, match="stand-in"):
        cp.write_hopper_certificate(report, str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()


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


# -- teardown: every copy is observed before mbarrier.inval ---------------------------------------

def _both(doc):
    """(trusted result, ids it fails, ids synth's prover does not prove) of a mutated program."""
    from synth.hopper.ir import hopper_from_json
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    v = verify_hopper(hopper_from_json(doc), time_limit=20, tightness=False)
    assert r.ok == v.ok
    return r, {c.id for c in r.obligations if not c.ok}, {o.id for o in v.obligations if o.status != "proven"}


def _last_full_wait(doc):
    """(part, position) of the last try_wait on "full" of the last role that has one."""
    for r in reversed(doc["roles"]):
        for pt in reversed(r["parts"]):
            for k in reversed(range(len(pt["stmts"]))):
                if pt["stmts"][k]["kind"] == "try_wait" and pt["stmts"][k]["barrier"] == "full":
                    return pt, k
    raise AssertionError("no wait on full")


def _last(pt) -> str:
    """A guard true only in the part's last iteration."""
    return f"i == {pt['extent']} - 1"


def _tma_tags(doc) -> set:
    return {f"teardown:{r['role']}:{pt['part']}:{k}" for r in doc["roles"] for pt in r["parts"]
            for k, s in enumerate(pt["stmts"]) if s["kind"] == "op" and s.get("barrier")}


SHAPES = [
    pytest.param(lambda: design_program(KernelDesign.of(bm=128, stages=2, k_pipe_mmas=1)), id="ws"),
    pytest.param(lambda: lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1)), id="single"),
]


@pytest.mark.parametrize("program", SHAPES)
def test_teardown_is_proven_for_every_copy(program) -> None:
    doc = json.loads(dumps(program()))
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert r.ok, r.render()
    assert {c.id for c in r.obligations if c.kind == "teardown"} == _tma_tags(doc)


@pytest.mark.parametrize("program", SHAPES)
def test_dropping_the_last_wait_before_teardown_is_refuted_by_both(program) -> None:
    doc = json.loads(dumps(program()))
    pt, k = _last_full_wait(doc)
    w = pt["stmts"][k]
    w["guard"] = f"!({_last(pt)})" if w["guard"] is None else f"({w['guard']}) && !({_last(pt)})"
    r, mine, synths = _both(doc)
    assert not r.ok
    td = {i for i in mine if i.startswith("teardown:")}
    assert td and td <= _tma_tags(doc) and td == {i for i in synths if i.startswith("teardown:")}, (mine, synths)


def test_a_copy_nobody_waits_for_fails_teardown() -> None:
    """The last k-tile's wait, wgmma, commit and drain guarded off: nothing reads the copy, so the
    teardown class sees it land after mbarrier.inval (load_B, predicated k < T - 1, does not run
    there); the k-tile's wgmma never runs (coverage) and the group before it is left pending
    (wgmma_drain). Both checkers name the same obligations."""
    doc = json.loads(dumps(lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1))))
    ep = doc["roles"][0]["parts"][-1]
    for s in ep["stmts"]:
        s["guard"] = f"({s['guard']}) && !({_last(ep)})" if s["guard"] else f"!({_last(ep)})"
    r, mine, synths = _both(doc)
    assert mine == synths == {"teardown:mainloop:prologue:1", "teardown:mainloop:body:5", "coverage:mainloop:mma",
                              "wgmma_drain:mainloop:epilogue:1"}, (mine, synths)
    assert "the copy is observed before the teardown's mbarrier.inval" in r.render()


@pytest.mark.parametrize("program", SHAPES)
def test_inval_moved_before_the_final_wait_is_refuted_by_both(program) -> None:
    doc = json.loads(dumps(program()))
    pt, k = _last_full_wait(doc)
    role = next(r["role"] for r in doc["roles"] if any(p is pt for p in r["parts"]))
    pt["stmts"].insert(k, {"kind": "inval", "barrier": "full", "guard": _last(pt)})
    kept = json.loads(json.dumps(doc))
    doc["teardown"] = [t for t in doc["teardown"] if t["barrier"] != "full"]
    from synth.errors import SynthError
    from synth.hopper.ir import hopper_from_json
    # synth's prover does not model an inval inside a role: its reader refuses the program
    with pytest.raises(SynthError, match="mbarrier.inval inside a role"):
        verify_hopper(hopper_from_json(doc), time_limit=20, tightness=False)
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    mine = {c.id for c in r.obligations if not c.ok}
    inval = f"teardown:{role}:{pt['part']}:{k}"
    assert not r.ok and "fence:inval:full" in mine
    assert f"{inval}<-{role}:{pt['part']}:{k + 1}" in mine, mine  # the final wait runs after the inval
    # with the teardown's inval kept, the one in the role still comes before the final wait
    r = check_hopper_program(json.dumps(kept).encode(), timeout_s=TIMEOUT)
    assert {c.id for c in r.obligations if not c.ok} == {i for i in mine if i.startswith("teardown:")}


def test_inval_after_the_final_wait_of_one_warp_group_is_accepted() -> None:
    doc = json.loads(dumps(lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1))))
    ep = doc["roles"][0]["parts"][-1]
    ep["stmts"].append({"kind": "inval", "barrier": "full", "guard": _last(ep)})
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert r.ok, r.render()
    assert any(c.id.startswith("teardown:mainloop:epilogue:4<-") for c in r.obligations)
    # two consumer warp groups: one may invalidate while the other still waits
    doc = json.loads(dumps(design_program(KernelDesign.of(bm=128, stages=2, k_pipe_mmas=1))))
    body = next(r for r in doc["roles"] if r["role"] == "consumer")["parts"][0]
    body["stmts"].append({"kind": "inval", "barrier": "full", "guard": _last(body)})
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert {c.id for c in r.obligations if not c.ok} == {f"teardown:consumer:body:{len(body['stmts']) - 1}"
                                                          "<-consumer:body:0"}, r.render()


def test_a_certificate_without_teardown_obligations_is_refused(tmp_path) -> None:
    """The independent checker derives the teardown class from program.json whatever a manifest
    lists: a program with a copy nobody waits for fails it, and the manifest of a sound certificate
    with its teardown entries removed is refused."""
    from synth.verify import certificate_phases as cp
    doc = json.loads(dumps(lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1))))
    ep = doc["roles"][0]["parts"][-1]
    for s in ep["stmts"]:
        s["guard"] = f"({s['guard']}) && !({_last(ep)})" if s["guard"] else f"!({_last(ep)})"
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and "teardown:mainloop:body:5" in r.render(), r.render()
    # and the manifest of a sound certificate with its teardown entries removed is refused
    good = lower_hopper(HopperLoop("g", LOADS, "mma", 2, 1))
    cp.write_hopper_certificate(verify_hopper(good, time_limit=20, tightness=False), str(tmp_path / "d"),
                                cvc5_check=False)
    man = json.loads((tmp_path / "d" / "manifest.json").read_text())
    man["obligations"] = [e for e in man["obligations"] if e["kind"] != "teardown"]
    (tmp_path / "d" / "manifest.json").write_text(json.dumps(man))
    assert not cp.certify_hopper(str(tmp_path / "d")).ok


# -- wgmma wait_group tightness ---------------------------------------------------------------------

def test_wgmma_tightness_agrees_with_synths_prover() -> None:
    for p in (design_program(KernelDesign.of(bm=64, stages=3, k_pipe_mmas=1)),
              lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1))):
        r = _check(p)
        mine = [(w.role, w.index, w.tight) for w in r.waits]
        assert mine == [(v.role, v.index, v.tight) for v in verify_hopper(p, time_limit=20).waits]
        assert any(t for _, _, t in mine) and all(w.reason in r.messages for w in r.waits)


def test_a_false_tightness_claim_fails_and_a_true_one_passes() -> None:
    doc = json.loads(dumps(lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1))))
    role = doc["roles"][0]
    # a second wait_group 0 after the drain: with two, neither drain is needed on its own
    role["waits"].append(dict(role["waits"][1], in_flight=0))
    role["parts"][-1]["stmts"].append({"kind": "wait", "wait": 2, "guard": "2 <= i + T"})
    waits = role["waits"]
    waits[0]["tight"], waits[1]["tight"], waits[2]["tight"] = True, False, False
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert r.ok and [w.tight for w in r.waits] == [True, False, False], r.render()
    waits[2]["tight"] = True
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert not r.ok and all(c.ok for c in r.obligations), r.render()
    assert 'claims "tight": true' in r.render() and "wait_group #2 of mainloop epilogue" in r.render()
    # the real drain alone is tight: one more group in flight leaves a group pending at the end
    del waits[2], role["parts"][-1]["stmts"][-1]
    waits[1]["tight"] = True
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT)
    assert r.ok and [w.tight for w in r.waits] == [True, True] and "wgmma_drain" in r.waits[1].reason, r.render()
    r = check_hopper_program(json.dumps(doc).encode(), timeout_s=TIMEOUT, tightness=False)
    assert not r.ok and "not checked" in r.render()


def test_triton_programs_agree_on_teardown() -> None:
    """Triton 3.9's TTGIR (tests/check_inputs): proven, tightness as synth's prover says; the loop
    started at 1 with the prologue's two loads kept leaves a copy nobody waits for at T = 1."""
    import re
    from synth.frontends.ttgir_hopper import ttgir_to_hopper
    text = (pathlib.Path(__file__).resolve().parent / "check_inputs" / "triton_hopper_s3.ttgir").read_text()
    p = ttgir_to_hopper(text, "x").program
    r = _check(p)
    assert r.ok, r.render()
    assert {c.id for c in r.obligations if c.kind == "teardown"} == _tma_tags(json.loads(dumps(p)))
    assert [w.tight for w in r.waits] == [w.tight for w in verify_hopper(p, time_limit=20).waits] == [True, True]
    bad = ttgir_to_hopper(re.sub(r"(scf\.for %\w+ = )%c0_i32", r"\1%c1_i32", text, count=1), "x").program
    r, mine, synths = _both(json.loads(dumps(bad)))
    # the copy of iteration 1 at T = 1 is also a k-tile the loop does not have (coverage)
    # (prologue statements 6 and 7: each expect follows the bar_sync Triton's lowering puts before it)
    assert mine == synths == {"teardown:mainloop:prologue:6", "teardown:mainloop:prologue:7",
                              "coverage:mainloop:tma_a_4", "coverage:mainloop:tma_b_5"}, (mine, synths)

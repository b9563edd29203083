"""synth.verify: RFC 0077's listings, mutations, predicates, program.json errors, lowered programs."""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import write_file
from synth.errors import SynthError
from synth.expr import Bin, Num, parse, simplify
from synth.program import CommitStmt, Program, WaitStmt, dumps, program_from_json
from synth.verify import load_program, verify_program
from synth.verify.obligations import enumerate_obligations
from synth.verify.encode import Encoder

ROOT = pathlib.Path(__file__).resolve().parent.parent
LISTINGS = ROOT / "tests" / "rfc_listings"


#: RFC listings that are not whole programs: the RFC elides the epilogue (so the last iterations of the
#: stage-2/3 ops never run) and the as-written one runs iteration -2 (its guard typo). ``synth verify``
#: refuses them (test_incomplete_rfc_listings_are_refused); the tests here replay them as written.
PARTIAL = {"rfc0077-where-to-wait", "rfc0077-where-to-wait-fixed"}


@functools.lru_cache(maxsize=None)
def listing(name: str) -> Program:
    return load_program(str(LISTINGS / f"{name}.json"), check_form=name not in PARTIAL)


@functools.lru_cache(maxsize=None)
def report(name: str):
    return verify_program(listing(name))


def statuses(r) -> dict[int, str]:
    return {v.index: v.status for v in r.verdicts}


# --------------------------------------------------------------------------------------------
# RFC 0077 listings
# --------------------------------------------------------------------------------------------

#: name -> (ok, per-wait status, {refuted obligation kind charged to a wait}, {kinds of global failures})
EXPECT = {
    "rfc0077-two-stage": (True, {0: "proven", 1: "proven"}, set(), set()),
    "rfc0077-interleaved": (True, {0: "proven", 1: "proven"}, set(), set()),
    "rfc0077-interleaved-literal": (False, {0: "refuted", 1: "proven"}, {"raw"}, {"waw"}),
    "rfc0077-gemm": (False, {0: "proven", 1: "proven", 2: "refuted"}, {"count-nonnegative"}, set()),
    "rfc0077-gemm-fixed": (True, {0: "proven", 1: "proven", 2: "proven", 3: "proven"}, set(), set()),
    "rfc0077-where-to-wait": (False, {0: "refuted", 1: "proven", 2: "proven"}, {"raw"}, set()),
    "rfc0077-where-to-wait-fixed": (True, {0: "proven", 1: "proven", 2: "proven"}, set(), set()),
    "rfc0077-three-stage": (False, {k: "proven" for k in range(6)}, set(), {"war"}),
    "rfc0077-three-stage-3-slots": (True, {k: "proven" for k in range(6)}, set(), set()),
    "predicated-opaque": (True, {0: "proven", 1: "proven"}, set(), set()),
    "predicated-opaque-naive": (False, {0: "refuted", 1: "refuted"}, {"raw"}, {"waw"}),
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_rfc_listing_verdicts(name: str) -> None:
    ok, waits, kinds, glob = EXPECT[name]
    r = report(name)
    assert r.ok is ok
    assert statuses(r) == waits
    assert {o.kind for o in r.obligations if o.status == "refuted" and o.wait is not None} == kinds
    assert {o.kind for o in r.global_failures} == glob
    assert not [o for o in r.obligations if o.status == "unknown"]


def test_rfc_listings_all_present() -> None:
    assert {p.stem for p in LISTINGS.glob("*.json")} == set(EXPECT)


def test_gemm_epilogue_count_goes_negative() -> None:
    r = report("rfc0077-gemm")
    v = r.verdicts[2]
    cex = v.counterexample
    assert cex is not None and cex.kind == "count-nonnegative"
    assert (cex.trip_count, cex.part, cex.i, cex.step) == (128, "epilogue", 2, 130)
    assert "count -1" in cex.summary


def test_where_to_wait_typo_reads_before_completion() -> None:
    r = report("rfc0077-where-to-wait")
    cex = r.verdicts[0].counterexample
    assert cex is not None and cex.kind == "raw"
    assert (cex.part, cex.i, cex.step, cex.trip_count) == ("prologue", 0, 0, 128)
    text = "\n".join(cex.trace)
    assert "1 group committed so far" in text and "forces nothing" in text
    assert "group #0 of queue 0 (load_A iteration 0) may still be in flight" in text


def test_three_stage_war_names_the_clobbering_write() -> None:
    r = report("rfc0077-three-stage")
    g = r.global_failures[0]
    assert g.kind == "war" and g.wait is None
    cex = g.counterexample
    assert cex is not None and "make_B (iteration 2) overwrites B slot 0" in cex.summary
    assert "make_C's read of version 0 may still be pending" in cex.summary
    assert "group #0 of queue 1 (make_C iteration 0) may still be in flight" in "\n".join(cex.trace)


def test_interleaved_literal_prologue_commits_one_group_per_iteration() -> None:
    """RFC 0077 prints the prologue with one commit around both copies; wait(0, 5) is then too
    weak for the first three body iterations (the RFC's count assumes two groups per iteration)."""
    r = report("rfc0077-interleaved-literal")
    cex = r.verdicts[0].counterexample
    assert cex is not None and (cex.part, cex.i) == ("body", 0)
    assert "4 groups committed so far" in "\n".join(cex.trace)


def test_tightness_and_reasons() -> None:
    r = report("rfc0077-where-to-wait-fixed")
    assert [v.tight for v in r.verdicts] == [True, False, True]
    assert "subsumed by wait #2" in r.verdicts[1].reason
    assert r.program.waits[1].tight is False and "subsumed by wait #2" in r.program.waits[1].reason
    r = report("rfc0077-gemm-fixed")
    assert [v.tight for v in r.verdicts] == [True, True, False, True]
    assert "subsumed by wait #3" in r.verdicts[2].reason
    for name in ("rfc0077-two-stage", "rfc0077-interleaved", "rfc0077-three-stage-3-slots", "predicated-opaque"):
        assert all(v.tight for v in report(name).verdicts), name
    # refuted waits get no tightness verdict
    assert report("rfc0077-gemm").verdicts[2].tight is None


def test_report_program_round_trips_with_tightness() -> None:
    r = report("rfc0077-two-stage")
    doc = json.loads(dumps(r.program))
    assert [w["tight"] for w in doc["waits"]] == [True, True]
    assert program_from_json(doc) == r.program


def test_render_is_plain_text() -> None:
    text = report("rfc0077-where-to-wait").render()
    assert text.startswith("rfc0077-where-to-wait: NOT PROVEN")
    assert "wait #0 prologue: async_wait_queue(0, 2) before s2r_A_next: refuted" in text
    assert "<-- RAW" in text and "\x1b[" not in text
    assert "subsumed by wait #2" in text


# --------------------------------------------------------------------------------------------
# mutations of correct programs
# --------------------------------------------------------------------------------------------

CORRECT = ["rfc0077-two-stage", "rfc0077-interleaved", "rfc0077-gemm-fixed", "rfc0077-where-to-wait-fixed",
           "rfc0077-three-stage-3-slots", "predicated-opaque"]


def quick(p: Program):
    return verify_program(p, tightness=False, smt2=False)


def bump(p: Program, k: int, delta: int) -> Program:
    return p.with_wait(k, in_flight=simplify(Bin("+", p.waits[k].in_flight, Num(delta))))


def drop_wait(p: Program, k: int) -> Program:
    """Remove wait ``k`` (its statement and its entry; later indices shift down)."""
    def fix(s):
        if isinstance(s, WaitStmt) and s.wait > k:
            return dataclasses.replace(s, wait=s.wait - 1)
        return s
    parts = tuple(dataclasses.replace(pt, stmts=tuple(fix(s) for s in pt.stmts
                                                      if not (isinstance(s, WaitStmt) and s.wait == k)))
                  for pt in p.parts)
    return dataclasses.replace(p, parts=parts, waits=p.waits[:k] + p.waits[k + 1:])


def drop_stmt(p: Program, part: str, pos: int) -> Program:
    parts = tuple(dataclasses.replace(pt, stmts=pt.stmts[:pos] + pt.stmts[pos + 1:]) if pt.name == part else pt
                  for pt in p.parts)
    return dataclasses.replace(p, parts=parts)


def other_queue(p: Program, k: int) -> Program:
    q = p.waits[k].queue
    if len(p.queues) == 1:
        p = dataclasses.replace(p, queues=p.queues + ("idle",))
    return p.with_wait(k, queue=(q + 1) % len(p.queues))


@pytest.mark.parametrize("name", CORRECT)
def test_mutating_waits_is_caught(name: str) -> None:
    p = listing(name)
    r = report(name)
    for v in r.verdicts:
        k = v.index
        w = p.waits[k]
        if v.tight:
            assert not quick(bump(p, k, +1)).ok, (name, k, "n + 1")
            assert not quick(drop_wait(p, k)).ok, (name, k, "dropped")
            assert not quick(other_queue(p, k)).ok, (name, k, "other queue")
        minus = bump(p, k, -1)
        rm = quick(minus)
        fails = {o.kind for o in rm.obligations if o.status != "proven"}
        assert fails <= {"count-nonnegative"}, (name, k, "n - 1", fails)
        if isinstance(w.in_flight, Num) and w.in_flight.value >= 1:
            assert rm.ok, (name, k, "n - 1")


@pytest.mark.parametrize("name", CORRECT)
def test_dropping_a_commit_is_caught(name: str) -> None:
    p = listing(name)
    for pt in p.parts:
        for pos, s in enumerate(pt.stmts):
            if isinstance(s, CommitStmt):
                assert not quick(drop_stmt(p, pt.name, pos)).ok, (name, pt.name, pos)


# --------------------------------------------------------------------------------------------
# predicates
# --------------------------------------------------------------------------------------------

def test_opaque_always_commit_proven_naive_refuted_with_predicate_false() -> None:
    assert report("predicated-opaque").ok
    r = report("predicated-opaque-naive")
    raw = [o for o in r.obligations if o.kind == "raw" and o.status == "refuted"]
    assert raw
    for o in raw:
        cex = o.counterexample
        assert cex is not None
        assert any(op == "load_mask_tile" and not val for op, _it, val in cex.predicates), cex
        assert "opaque predicates: load_mask_tile@" in cex.render()


def test_symbolic_trip_count_is_quantified_not_sampled() -> None:
    """A count that is right for T = 3..20 but wrong for T = 50 only is refuted."""
    p = listing("predicated-opaque")
    bad = p.with_wait(0, in_flight=parse("(T == 50) ? 5 : 4"))
    r = quick(bad)
    assert not r.ok
    cex = r.verdicts[0].counterexample
    assert cex is not None and cex.trip_count == 50


def test_affine_predicate_in_counts() -> None:
    """A count that is only correct because the producer is off at the end (k + 1 < T)."""
    p = listing("rfc0077-two-stage")
    p = dataclasses.replace(p, trip_count="T", min_trip_count=2, ops=(
        dataclasses.replace(p.ops[0], when=f"{p.loop_var} + 1 < T"), p.ops[1]),
        parts=tuple(dataclasses.replace(pt, extent=parse("T - 1")) if pt.name == "body" else pt for pt in p.parts))
    p = _retarget_epilogue(p)
    assert quick(p).ok
    # the epilogue consumer reads version T - 1, which the predicated producer never writes: no wait needed
    r = verify_program(drop_wait(p, 1))
    assert r.ok


def _retarget_epilogue(p: Program) -> Program:
    from synth.program import Access, OpStmt
    ep = p.part("epilogue")
    stmts = []
    for s in ep.stmts:
        if isinstance(s, OpStmt):
            s = dataclasses.replace(s, iteration=parse("i + T - 1"), reads=(
                Access("B", parse("i + T - 1"), parse("(i + T - 1) % 2"), "produce_B"),))
        stmts.append(s)
    return dataclasses.replace(p, parts=tuple(dataclasses.replace(pt, stmts=tuple(stmts)) if pt.name == "epilogue"
                                              else pt for pt in p.parts))


# --------------------------------------------------------------------------------------------
# program.json errors
# --------------------------------------------------------------------------------------------

def _doc(name: str = "rfc0077-two-stage") -> dict:
    return json.loads((LISTINGS / f"{name}.json").read_text())


def test_load_program_folder_and_file(tmp_path) -> None:
    (tmp_path / "program.json").write_text((LISTINGS / "rfc0077-two-stage.json").read_text())
    assert load_program(str(tmp_path)) == listing("rfc0077-two-stage")


@pytest.mark.parametrize("mutate, msg, line", [
    (lambda d: "{\n  \"name\": 1,,\n}", "not valid JSON", 2),
    (lambda d: {k: v for k, v in d.items() if k != "waits"}, "missing key 'waits'", 0),
    (lambda d: d["waits"][0].update(in_flight="2 - ") or d, "waits[0].in_flight: bad expression", 0),
    (lambda d: d["waits"][0].update(in_flight="2 - x") or d, "unknown name(s) x", 0),
    (lambda d: d["waits"][1].update(part="body") or d, "wait #1 says part 'body'", 0),
    (lambda d: d["parts"][1]["stmts"][3].update(op="consume_C") or d, "unknown op 'consume_C'", 0),
    (lambda d: d["parts"][1]["stmts"].append({"kind": "jump"}) or d, "unknown statement kind 'jump'", 0),
    (lambda d: d["parts"][1]["stmts"][1].update(queue=3) or d, "committed to queue 3", 0),
    (lambda d: d["waits"].append(dict(d["waits"][0])) or d, "has no wait statement", 0),
])
def test_malformed_program_json(tmp_path, mutate, msg, line) -> None:
    path = write_file(tmp_path, "program.json", mutate(_doc()))
    with pytest.raises(SynthError) as e:
        load_program(path)
    err = e.value
    assert msg in err.msg
    assert err.loc is not None and err.loc.file == path
    if line:
        assert err.loc.line == line
    assert err.fix


def test_missing_file_is_a_user_error(tmp_path) -> None:
    with pytest.raises(SynthError) as e:
        load_program(str(tmp_path / "nope.json"))
    assert "no such file" in e.value.msg


def test_error_located_on_its_line(tmp_path) -> None:
    d = _doc()
    d["waits"][0]["in_flight"] = "1 - q"
    path = write_file(tmp_path, "program.json", d)
    with pytest.raises(SynthError) as e:
        load_program(path)
    text = pathlib.Path(path).read_text().splitlines()
    assert '"1 - q"' in text[e.value.loc.line - 1]


def test_edited_in_flight_is_rechecked(tmp_path) -> None:
    """docs/verification.md: a person who edits one in_flight gets the new count checked."""
    d = _doc()
    d["waits"][0]["in_flight"] = 2
    r = verify_program(load_program(write_file(tmp_path, "program.json", d)))
    assert not r.ok and r.verdicts[0].status == "refuted"


def test_obligations_are_charged_to_waits() -> None:
    p = listing("rfc0077-gemm-fixed")
    obs = enumerate_obligations(p, Encoder(p))
    kinds = {o.kind for o in obs}
    assert kinds == {"raw", "waw", "count-nonnegative", "wellformed"}
    raw = [o for o in obs if o.kind == "raw" and o.queue == 0]
    assert {o.wait for o in raw} == {0, 1, 2, 3}
    assert len({o.id for o in obs}) == len(obs)


# --------------------------------------------------------------------------------------------
# lowered programs (synth.lower)
# --------------------------------------------------------------------------------------------

def _pinned_problems():
    from synth.load import load_problem
    out = []
    for f in sorted((ROOT / "problems").glob("*.yaml")):
        try:
            p = load_problem(str(f))
        except SynthError:
            continue
        if getattr(p, "pins", None) is not None and p.pins.stage is not None:
            out.append(f.name)
    return out


@functools.lru_cache(maxsize=None)
def lowered(fname: str, strategy: str = "auto") -> Program:
    from synth.graph import build_graph
    from synth.load import load_problem
    from synth.lower import lower
    from synth.schedule import schedule_from_pins
    pr = load_problem(str(ROOT / "problems" / fname))
    g = build_graph(pr)
    return lower(pr, g, schedule_from_pins(pr, g), predicate_strategy=strategy)


@pytest.mark.parametrize("fname", _pinned_problems())
def test_lowered_problems_prove(fname: str) -> None:
    r = verify_program(lowered(fname))
    assert r.ok, r.render()
    for v in r.verdicts:
        k = v.index
        w = r.program.waits[k]
        if v.tight:
            assert not quick(bump(r.program, k, +1)).ok, (fname, k)
        rm = quick(bump(r.program, k, -1))
        assert {o.kind for o in rm.obligations if o.status != "proven"} <= {"count-nonnegative"}
        if isinstance(w.in_flight, Num) and w.in_flight.value >= 1:
            assert rm.ok, (fname, k)


NAIVE = """\
name: naive-opaque
loop: {var: k, trip_count: T, min_trip_count: 3}
buffers:
  M_s: {space: shared, bytes: 4096}
ops:
  - {name: load_M, unit: cp_async, writes: [M_s], latency: 500, issue: 4, when: opaque}
  - {name: compute, unit: alu, reads: [M_s], latency: 40, issue: 24}
target:
  shared_bytes: 65536
  units: {cp_async: {async: true}, alu: {}}
schedule: {stage: [0, 2], async_stages: [0]}
"""


@pytest.mark.parametrize("strategy, ok", [("auto", True), ("always_commit", True), ("naive", False)])
def test_lowering_predicate_strategies(strategy: str, ok: bool) -> None:
    from synth.graph import build_graph
    from synth.load import load_problem_text
    from synth.lower import lower
    from synth.schedule import schedule_from_pins
    pr = load_problem_text(NAIVE, "naive.yaml")
    g = build_graph(pr)
    r = verify_program(lower(pr, g, schedule_from_pins(pr, g), predicate_strategy=strategy), tightness=False)
    assert r.ok is ok
    if not ok:
        cex = next(o.counterexample for o in r.obligations if o.status == "refuted" and o.kind == "raw")
        assert any(op == "load_M" and not v for op, _it, v in cex.predicates)


def _random_lowered(seed: int, n_ops: int, predicated: bool) -> Program:
    from synth.graph import build_graph
    from synth.lower import lower
    from synth.randgen import random_problem, random_schedule
    pr = random_problem(seed, n_ops, predicated=predicated, symbolic=seed % 2 == 0)
    g = build_graph(pr)
    return lower(pr, g, random_schedule(pr, g, seed))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.integers(2, 6), st.booleans())
def test_random_lowered_programs_prove(seed: int, n_ops: int, predicated: bool) -> None:
    p = _random_lowered(seed, n_ops, predicated)
    r = verify_program(p, tightness=False, smt2=False)
    assert r.ok, r.render()


@pytest.mark.slow
@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.integers(2, 12), st.booleans())
def test_random_lowered_programs_prove_and_are_tight(seed: int, n_ops: int, predicated: bool) -> None:
    p = _random_lowered(seed, n_ops, predicated)
    r = verify_program(p, smt2=False)
    assert r.ok, r.render()
    for v in r.verdicts:
        if v.tight:
            assert not quick(bump(p, v.index, +1)).ok

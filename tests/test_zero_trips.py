"""``synth check --min-trip-count 0``: a loop that may run zero times (K = 0, an empty KV range).

Each form is either proven for every trip count T >= 0 (the prologue's and epilogue's guards keep every wait
and barrier consistent when the body never runs; the explicit-state oracles agree at T = 0) or refused with
a located reason. A program whose guards are wrong only at T = 0 is proven for T >= 1 and refuted with a
trip-count-0 counterexample for T >= 0; its fixed form is proven."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import write_file
from tests.check_inputs.helpers import run_check, run_text

INPUTS = Path(__file__).parent / "check_inputs"
HOPPER_S3 = INPUTS / "triton_hopper_s3.ttgir"


# ---------------------------------------------------------------------------------------------
# cp.async (Triton sm_80, MLIR): proven for T >= 0, the oracle agrees at T = 0

@pytest.mark.parametrize("name", ["triton-matmul-s3.ttgir", "triton-attention-s3.ttgir"])
def test_triton_cp_async_is_proven_for_every_trip_count_from_zero(name):
    rc, doc, err = run_check(str(INPUTS / name), "--min-trip-count", "0")
    assert rc == 0, err
    r = doc["result"]
    assert r["min_trip_count"] == 0 and r["trip_count"] == "T" and r["ok"]
    rc, out, _ = run_text(str(INPUTS / name), "--min-trip-count", "0")
    assert rc == 0 and "trip count T >= 0" in out


def test_cp_async_oracle_agrees_at_trip_count_zero():
    from synth.frontends.check import check_file
    from synth.verify.oracle import check

    r = check_file(str(INPUTS / "triton-matmul-s3.ttgir"), min_trip_count=0)
    assert r.program.min_trip_count == 0
    for T in (0, 1):
        assert not check(r.program, T).violations, T


def test_raised_wait_is_still_refuted_from_zero(tmp_path):
    """The usual read-after-write mutant (a tight wait raised by one) stays refuted when T = 0 is allowed."""
    path = str(INPUTS / "triton-matmul-s3.ttgir")
    rc, doc, _ = run_check(path, "--min-trip-count", "0")
    w = next(w for w in doc["result"]["waits"] if w["tight"])
    lines = Path(path).read_text().splitlines()
    n = int(re.search(r"num = (\d+)", lines[w["line"] - 1]).group(1))
    lines[w["line"] - 1] = lines[w["line"] - 1].replace(f"num = {n}", f"num = {n + 1}")
    rc, doc, _ = run_check(write_file(tmp_path, "raised.ttgir", "\n".join(lines)), "--min-trip-count", "0")
    assert rc == 1 and doc["result"]["counts"]["refuted"] >= 1


def test_negative_extent_below_the_bound_is_refused_at_the_loop_line():
    """TVM's dynamic pipeline runs its body ``T - 2`` times (the prologue peels two): trip counts 0 and 1
    make that extent negative, outside the model; refused at the loop's line, naming the flag. The
    default bound (T >= 2) is unchanged."""
    path = str(INPUTS / "tvm-dynamic-s2.py")
    rc, out, err = run_text(path, "--min-trip-count", "0")
    assert rc == 2 and not out
    assert re.search(rf"{re.escape(path)}:29:1: error: --min-trip-count 0: at trip count 0 the loop's extent "
                     r"T - 2 is -2", err), err
    assert "fix: use --min-trip-count 2 or more" in err and "Traceback" not in err
    rc, doc, err = run_check(path)
    assert rc == 0 and doc["result"]["min_trip_count"] == 2, err


def test_guarded_prologue_copy_is_refused_at_zero_with_its_line(tmp_path):
    """A TVM loop whose body runs ``T`` times and whose prologue copy is guarded by ``0 < T`` (a condition,
    not a zero-filling mask): which write a slot holds depends on the guard, outside the model at T = 0;
    refused naming the copy's line and the flag."""
    text = (INPUTS / "tvm-dynamic-s2.py").read_text()
    assert "range(n - 2)" in text
    path = write_file(tmp_path, "tvm-extent-t.py", text.replace("range(n - 2)", "range(n)", 1))
    rc, out, err = run_text(path, "--min-trip-count", "0")
    assert rc == 2 and not out, err
    assert re.search(rf"{re.escape(path)}:\d+:1: error: --min-trip-count 0: .* only when 0 < T", err), err


# ---------------------------------------------------------------------------------------------
# Hopper (TMA + mbarrier + wgmma; warp-specialized; persistent): proven for T >= 0


@pytest.mark.parametrize("path", [HOPPER_S3, INPUTS / "triton_persistent" / "triton_persistent_s3.ttgir",
                                  INPUTS / "triton_ws" / "triton_ws_s2.ttgir"], ids=["one-warp-group", "persistent",
                                                                                     "warp-specialized"])
def test_hopper_forms_are_proven_from_zero(path):
    from synth.frontends.check import check_file
    from synth.verify.oracle_phases import run

    rc, doc, err = run_check(str(path), "--min-trip-count", "0")
    assert rc == 0, err
    r = doc["result"]
    assert r["ok"] and r["min_trip_count"] == 0, r
    p = check_file(str(path), min_trip_count=0, tightness=False).imported.program
    assert not run(p, 0).violations  # the oracle agrees at T = 0


def _prologue_copy_unguarded(text: str) -> str:
    """The first prologue TMA copy (and its barrier_expect) guarded by ``T >= 0`` instead of ``T > 0``: the
    same for every T >= 1, but at T = 0 the copy is issued and nothing waits for it before the barriers are
    invalidated (the empty-KV-range hang's shape: a guard that assumes the body runs)."""
    out = re.sub(r"(= arith\.cmpi )sgt(, %\w+, %c0_i32)", r"\1sge\2", text, count=1)
    assert out != text
    return out


def test_guard_wrong_only_at_zero_is_refuted_with_a_zero_trip_counterexample(tmp_path):
    path = write_file(tmp_path, "unguarded.ttgir", _prologue_copy_unguarded(HOPPER_S3.read_text()))
    rc, doc, err = run_check(path)
    assert rc == 0, err  # T >= 1: the guard is right
    rc, doc, err = run_check(path, "--min-trip-count", "0")
    assert rc == 1, err
    r = doc["result"]
    assert r["obligations"]["teardown"]["refuted"] >= 1, r["obligations"]
    fails = [f for f in r["failures"] if f["class"] == "teardown"]
    assert fails and all(re.search(r"with trip count 0\b", f["reason"]) for f in fails), fails
    assert all(f["line"] for f in fails)
    rc, out, _ = run_text(path, "--min-trip-count", "0")
    assert rc == 1 and "NOT PROVEN" in out and "with trip count 0" in out


def test_hopper_oracle_sees_the_zero_trip_violation_and_none_in_the_fixed_form():
    from synth.frontends.check import check_file
    from synth.verify.oracle_phases import run

    fixed = check_file(str(HOPPER_S3), min_trip_count=0)
    p = fixed.imported.program
    assert p.min_trip_count == 0 and all(r.program.min_trip_count == 0 for r in p.roles)
    assert not run(p, 0).violations
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "unguarded.ttgir"
        path.write_text(_prologue_copy_unguarded(HOPPER_S3.read_text()))
        bad = check_file(str(path), min_trip_count=0).imported.program
    assert "teardown" in run(bad, 0).violations
    assert not run(bad, 1).violations


def test_trip_count_zero_is_still_refused_for_hopper():
    rc, _, err = run_text(str(HOPPER_S3), "--trip-count", "0")
    assert rc == 2 and "--trip-count 0" in err


def test_an_extent_that_cannot_be_evaluated_is_refused_not_a_crash():
    """lower_min_trip on a loop whose extent names another symbol: a SynthError at the loop's line."""
    from dataclasses import replace

    from synth.errors import SynthError
    from synth.expr import Var
    from synth.frontends.check import import_loop, lower_min_trip, read_text

    path = str(INPUTS / "triton-matmul-s3.ttgir")
    loop = import_loop(read_text(path), path)
    assert lower_min_trip(loop, 0).min_trip == 0 and lower_min_trip(loop, 3) is loop
    with pytest.raises(SynthError) as e:
        lower_min_trip(replace(loop, body_extent=Var("n")), 0)
    assert e.value.loc.line == loop.body_line and "not a number of iterations" in e.value.msg

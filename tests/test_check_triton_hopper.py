"""``synth check`` on Triton's sm_90 TMA + mbarrier + wgmma pipelines (docs/check.md, "Triton Hopper TTGIR").

The saved inputs ``tests/check_inputs/triton_hopper_*.ttgir`` are Triton 3.9's TTGIR of the kernels
below (``python tests/test_check_triton_hopper.py`` writes them again); the tests read them, so they
need no Triton. One test compiles a kernel afresh when Triton is installed and compares the mapped
program with the saved one.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

from conftest import write_file

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from check_inputs.helpers import run_check, run_text  # noqa: E402

INPUTS = pathlib.Path(__file__).parent / "check_inputs"
REFUSED = INPUTS / "triton_hopper_refused"
"""Inputs outside the model (a folder, so the sweep over saved inputs in test_check_errors.py skips them)."""
STAGES = (2, 3, 4, 5)

try:  # the kernels (benchmarks/triton_sm90.py), only to regenerate the saved inputs and compare with them
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
    from triton_sm90 import compile_sm90, mm_one_tma, mm_tma, mm_tma_and_cp_async
    HAVE_TRITON = True
except ImportError:  # pragma: no cover - Triton is optional
    HAVE_TRITON = False


def triton_tma_ttgir(fn, stages: int, bk: int = 64, bm: int = 128, bn: int = 128) -> str:
    """TTGIR of ``fn`` for sm_90 (8 warps, f16 in, f32 out), as benchmarks/sass_sm90.py compiles it."""
    return compile_sm90(fn, stages, bk=bk, bm=bm, bn=bn).asm["ttgir"]


def generate() -> None:
    """Write the saved inputs (needs Triton)."""
    REFUSED.mkdir(exist_ok=True)
    for s in STAGES:
        (INPUTS / f"triton_hopper_s{s}.ttgir").write_text(triton_tma_ttgir(mm_tma, s))
    (INPUTS / "triton_hopper_s3_bk32.ttgir").write_text(triton_tma_ttgir(mm_tma, 3, bk=32))
    (INPUTS / "triton_hopper_one_tma_s3.ttgir").write_text(triton_tma_ttgir(mm_one_tma, 3))
    (REFUSED / "triton_hopper_s1.ttgir").write_text(triton_tma_ttgir(mm_tma, 1))
    (REFUSED / "triton_hopper_tma_and_cp_async_s3.ttgir").write_text(triton_tma_ttgir(mm_tma_and_cp_async, 3))


def _text(name: str) -> str:
    return (INPUTS / name).read_text()


# ---------------------------------------------------------------------------------------------
# Triton's pipelines are proven for every trip count

PROVEN = [f"triton_hopper_s{s}.ttgir" for s in STAGES] + ["triton_hopper_s3_bk32.ttgir",
                                                         "triton_hopper_one_tma_s3.ttgir"]


@pytest.mark.parametrize("name", PROVEN)
def test_triton_pipelines_are_proven_for_every_trip_count(name):
    rc, doc, err = run_check(str(INPUTS / name))
    assert rc == 0, err
    r = doc["result"]
    assert r["ok"] and r["protocol"] == "mbarrier" and r["source"] == "triton-sm90"
    assert r["trip_count"] == "T" and r["min_trip_count"] == 1  # symbolic: every T >= 1
    assert r["counts"]["refuted"] == r["counts"]["unknown"] == 0
    for cls in ("arrivals", "tx_bytes", "parity", "no_deadlock", "raw", "slot_reuse", "fence", "teardown"):
        assert r["obligations"][cls]["proven"] >= 1, cls
    body = [w for w in r["waits"] if w["status"] == "proven" and w["tight"]]
    assert len(body) == 2  # wait_group 1 in the loop and the final wait_group 0 (the drain) are both tight


@pytest.mark.parametrize("stages", STAGES)
def test_mapped_program_has_the_pipeline_shape(stages):
    from synth.frontends.ttgir_hopper import ttgir_to_hopper
    from synth.hopper.printer import hopper_text
    p = ttgir_to_hopper(_text(f"triton_hopper_s{stages}.ttgir"), "x.ttgir").program
    assert [(b.slots, b.count, b.kind) for b in p.barriers] == [(stages, 1, "full")]
    assert sorted((b.multiplicity, b.bytes_per_slot) for b in p.buffers) == [(stages, 16384)] * 2
    role = p.roles[0]
    assert (role.name, role.warpgroups) == ("mainloop", 1)
    assert role.program.part("prologue").extent.value == stages - 1
    text = hopper_text(p)
    assert f"arrive.expect_tx acc[(i + {stages - 1}) % {stages}], 32768 B" in text
    assert f"try_wait.parity acc[i % {stages}], i / {stages} % 2" in text
    assert f"!(T <= {stages - 1} + i)" in text  # the refill's predicate k < T - (stages - 1)
    assert "wgmma.wait_group 1" in text and "wgmma.wait_group 0" in text


def test_threads_collectives_and_the_barrier_before_each_expect():
    """num-warps = 8: one role of two warp groups, 128 threads modeled, the wgmma no convergence point of the
    role (each warp group converges alone); Triton 3.9 lowers each ttng.barrier_expect after a CTA bar.sync (a
    bar_sync before the elected expect), through which ``converge`` holds. Without it (``arrive_sync=False``)
    nothing in the TTGIR converges the warp groups between the wait and the refill: refuted, and proven with a
    gpu.barrier before each expect. At num-warps = 4 the wgmma is the role's collective."""
    from synth.completion import ArriveStmt, BarSyncStmt
    from synth.frontends.mutants import barrier_before_arrives
    from synth.frontends.ttgir_hopper import check_hopper, ttgir_to_hopper

    text = _text("triton_hopper_s2.ttgir")
    p = ttgir_to_hopper(text, "x.ttgir").program
    role = p.roles[0]
    assert (role.threads, role.collective) == (128, ())
    for pt in role.program.parts:
        assert all(isinstance(pt.stmts[k - 1], BarSyncStmt) for k, s in enumerate(pt.stmts)
                   if isinstance(s, ArriveStmt))
    four = text.replace('"ttg.num-warps" = 8', '"ttg.num-warps" = 4')
    assert ttgir_to_hopper(four, "x.ttgir").program.roles[0].collective == ("wgmma",)

    def check(t):
        return check_hopper(t, "x.ttgir", time_limit=20, tightness=False, arrive_sync=False)

    bad = [o for o in check(text).report.obligations if o.status != "proven"]
    assert bad and {o.kind for o in bad} == {"converge"}
    assert "thread 1 of warp group mainloop may still be waiting in its try_wait" in bad[0].counterexample.summary
    assert check(barrier_before_arrives(text)).report.ok


def test_bk32_boxes_are_half_the_bytes():
    from synth.frontends.ttgir_hopper import ttgir_to_hopper
    p = ttgir_to_hopper(_text("triton_hopper_s3_bk32.ttgir"), "x").program
    assert {b.bytes_per_slot for b in p.buffers} == {128 * 32 * 2}


def test_fixed_trip_count_and_minimum(tmp_path):
    path = str(INPUTS / "triton_hopper_s3.ttgir")
    for args in (("--trip-count", "1"), ("--trip-count", "4"), ("--min-trip-count", "3")):
        rc, doc, err = run_check(path, *args)
        assert rc == 0, (args, err)
    rc, _, err = run_text(path, "--trip-count", "0")
    assert rc == 2 and "trip counts >= 1" in err


def test_human_report_lists_classes_and_source_lines():
    rc, out, err = run_text(str(INPUTS / "triton_hopper_s3.ttgir"))
    assert rc == 0, err
    assert "PROVEN" in out and "tx_bytes:" in out and "teardown:" in out
    assert re.search(r"body \d+: line \d+: ttng\.wait_barrier", out)


@pytest.mark.skipif(not HAVE_TRITON, reason="Triton is not installed")
def test_fresh_triton_output_maps_like_the_saved_one():
    from synth.frontends.ttgir_hopper import ttgir_to_hopper
    from synth.hopper.printer import hopper_text

    def shape(text: str) -> str:
        return "\n".join(x for x in hopper_text(ttgir_to_hopper(text, "x").program).splitlines()
                         if not x.startswith("# Triton"))
    assert shape(triton_tma_ttgir(mm_tma, 3)) == shape(_text("triton_hopper_s3.ttgir"))


# ---------------------------------------------------------------------------------------------
# mutants: refuted with a counterexample naming the class

def _body(lines: list) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if "scf.for" in x)
    return a, next(i for i in range(a, len(lines)) if "scf.yield" in lines[i])


def _in_body(text: str, pat: str, rep: str) -> str:
    lines = text.splitlines()
    a, b = _body(lines)
    out = lines[:a] + [re.sub(pat, rep, x) for x in lines[a:b]] + lines[b:]
    assert out != lines, pat
    return "\n".join(out)


def _tma_predicate_one_more(text: str, stages: int) -> str:
    """The refill copies predicated ``k < T - (stages - 2)`` (one iteration too many), their
    barrier_expect left at ``k < T - (stages - 1)``."""
    lines = text.splitlines()
    a, b = _body(lines)
    iv, ub = re.search(r"scf\.for (%\w+) = %\w+ to (%\w+)", lines[a]).groups()
    tma = [i for i in range(a, b) if "async_tma_copy_global_to_local" in lines[i]]
    pred = re.search(r"(%\w+) :", lines[tma[0]]).group(1)
    for i in tma:
        lines[i] = lines[i].replace(f"{pred} :", "%mut_p :")
    lines[a + 1:a + 1] = [f"      %mut_c = arith.constant {stages - 2} : i32",
                          f"      %mut_t = arith.subi {ub}, %mut_c : i32",
                          f"      %mut_p = arith.cmpi slt, {iv}, %mut_t : i32"]
    return "\n".join(lines)


MUTANTS = {
    "pendings_2": (lambda t, s: _in_body(t, r"pendings = 1 :", "pendings = 2 :"), "slot_reuse"),
    "phase_xor_removed": (lambda t, s: _in_body(t, r"arith\.xori (%\w+), %c1_i32", r"arith.addi \1, %c0_i32"),
                          "parity"),
    "expect_bytes_16384": (lambda t, s: _in_body(t, r"(ttng\.barrier_expect %\w+, )32768", r"\g<1>16384"),
                           "tx_bytes"),
    "tma_predicate_one_more": (_tma_predicate_one_more, "teardown"),
    "wait_barrier_removed": (lambda t, s: _in_body(t, r"^\s*ttng\.wait_barrier .*$", ""), "raw"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutants_are_refuted_with_their_class(tmp_path, mutant):
    make, cls = MUTANTS[mutant]
    rc, doc, err = run_check(write_file(tmp_path, "mutant.ttgir", make(_text("triton_hopper_s3.ttgir"), 3)))
    assert rc == 1, err
    r = doc["result"]
    assert not r["ok"] and r["obligations"][cls]["refuted"] >= 1, r["obligations"]
    fails = [f for f in r["failures"] if f["class"] == cls]
    assert fails and all(f["line"] for f in fails)  # each names its source line
    summary = rf"{cls}: with trip count \d+, warp group mainloop \w+ i = \d+"
    assert any(re.search(summary, f["reason"]) for f in fails), fails  # the counterexample, in its terms
    if mutant != "pendings_2":
        return  # the human output prints the same counterexamples: checked once (each check is a full proof)
    rc, out, _ = run_text(write_file(tmp_path, "mutant.ttgir", make(_text("triton_hopper_s3.ttgir"), 3)))
    assert rc == 1 and "NOT PROVEN" in out
    assert re.search(summary, out), out


@pytest.mark.parametrize("stages", (2, 5))
def test_mutants_at_other_depths(tmp_path, stages):
    text = _text(f"triton_hopper_s{stages}.ttgir")
    for mutant in ("pendings_2", "expect_bytes_16384", "tma_predicate_one_more"):
        make, cls = MUTANTS[mutant]
        rc, doc, err = run_check(write_file(tmp_path, "mutant.ttgir", make(text, stages)))
        assert rc == 1 and doc["result"]["obligations"][cls]["refuted"] >= 1, (mutant, err)


@pytest.mark.parametrize("stages", STAGES)
def test_oracle_agrees_on_small_trip_counts(stages):
    """The explicit-state oracle (real mbarrier / wgmma semantics, one T) on the mapped programs: Triton's
    has no violation; each mutant the oracle can see (not the dangling copy at the teardown, which it
    does not model) has one by T = 6."""
    from synth.frontends.ttgir_hopper import ttgir_to_hopper
    from synth.verify.oracle_phases import run
    text = _text(f"triton_hopper_s{stages}.ttgir")
    p = ttgir_to_hopper(text, "x").program
    for T in range(1, 7):
        r = run(p, T, max_states=50_000)
        assert r.complete and not r.violations, (T, r.violations)
    if stages == 3:
        for mutant in ("pendings_2", "phase_xor_removed", "expect_bytes_16384", "wait_barrier_removed"):
            m = ttgir_to_hopper(MUTANTS[mutant][0](text, stages), "x").program
            assert any(run(m, T, max_states=50_000).violations for T in range(1, 7)), mutant


def test_loop_from_one_to_the_same_bound_leaves_a_copy_in_flight(tmp_path):
    # T = bound - 1 iterations, but the prologue still loads two tiles when bound > 1: at T = 1 the second
    # is never waited for
    text = re.sub(r"(scf\.for %\w+ = )%c0_i32", r"\1%c1_i32", _text("triton_hopper_s3.ttgir"), count=1)
    rc, doc, err = run_check(write_file(tmp_path, "mutant.ttgir", text))
    assert rc == 1, err
    r = doc["result"]
    # the copy of iteration 1 >= T is also a k-tile the loop does not have (coverage, per op: no line)
    assert set(r["obligations"]) and {f["class"] for f in r["failures"]} == {"teardown", "coverage"}
    assert all(f["line"] and "async_tma_copy_global_to_local" in f["text"] for f in r["failures"]
               if f["class"] == "teardown")


def test_stricter_wait_is_still_proven(tmp_path):
    rc, doc, err = run_check(write_file(tmp_path, "mutant.ttgir",
                                        _in_body(_text("triton_hopper_s3.ttgir"), r"pendings = 1 :", "pendings = 0 :")))
    assert rc == 0, err


def test_pendings_2_counterexample_names_the_refill(tmp_path):
    make, _ = MUTANTS["pendings_2"]
    rc, out, _ = run_text(write_file(tmp_path, "mutant.ttgir", make(_text("triton_hopper_s3.ttgir"), 3)))
    assert "TMA tma_a_4" in out and "released version i + 2 - 3" in out
    m = re.search(r"source: line (\d+): ttng\.async_tma_copy_global_to_local", out)
    assert m and "async_tma_copy_global_to_local" in _text("triton_hopper_s3.ttgir").splitlines()[int(m[1]) - 1]


# ---------------------------------------------------------------------------------------------
# outside the model, malformed input: exit 2 with file:line and a fix

def _refused(path: str, *needles: str, line: bool = True) -> None:
    rc, _, err = run_text(path)
    assert rc == 2, err
    assert re.search(r":\d+:\d+: error: " if line else r": error: ", err), err
    assert "fix:" in err and "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def test_num_stages_1_is_refused():
    _refused(str(REFUSED / "triton_hopper_s1.ttgir"), "num_stages = 1", "nothing is pipelined", "num_stages >= 2")


def test_tma_with_cp_async_is_refused():
    _refused(str(REFUSED / "triton_hopper_tma_and_cp_async_s3.ttgir"), "cp.async")


def test_data_dependent_slot_is_refused(tmp_path):
    text = _in_body(_text("triton_hopper_s3.ttgir"), r"(%a_45 = ttg\.memdesc_index %a_4\[)%\w+\]", r"\1%K]")
    _refused(write_file(tmp_path, "mutant.ttgir", text), "slot index", "indirect")


def test_unfittable_phase_is_refused(tmp_path):
    # the phase becomes (k / 5) % 2 on a barrier of 3 slots: none of the fitted forms
    text = _text("triton_hopper_s3.ttgir")
    lines = text.splitlines()
    a, b = _body(lines)
    iv = re.search(r"scf\.for (%\w+)", lines[a]).group(1)
    k = next(i for i in range(a, b) if "ttng.wait_barrier" in lines[i])
    lines[k] = re.sub(r"(ttng\.wait_barrier %\w+, )%\w+", r"\1%mut_sq", lines[k])
    lines[k:k] = ["      %mut_c5 = arith.constant 5 : i32", f"      %mut_d = arith.divsi {iv}, %mut_c5 : i32",
                  "      %mut_sq = arith.remsi %mut_d, %c2_i32 : i32"]
    _refused(write_file(tmp_path, "mutant.ttgir", "\n".join(lines)), "phase", "wait_barrier")


def test_truncated_and_garbled_inputs(tmp_path):
    text = _text("triton_hopper_s3.ttgir")
    _refused(write_file(tmp_path, "mutant.ttgir", text[: text.index("scf.yield")]), "unbalanced", line=False)
    _refused(write_file(tmp_path, "mutant.ttgir", re.sub(r"(ttng\.barrier_expect %\w+), 32768,", r"\1,", text)),
             "byte count")
    _refused(write_file(tmp_path, "mutant.ttgir",
                        text.replace("ttng.warp_group_dot_wait %acc_37, %a_36, %acc_35 {pendings = 1 : i32}",
                                     "ttng.warp_group_dot_wait %acc_37, %a_36, %acc_35")), "pendings")


def test_undefined_wgmma_operand_is_refused(tmp_path):
    text = _text("triton_hopper_s3.ttgir")
    lines = [x for x in text.splitlines() if not re.match(r"\s*%a_36 = ttg\.memdesc_index", x)]
    _refused(write_file(tmp_path, "mutant.ttgir", "\n".join(lines)), "%a_36", "not defined")


def test_uninitialized_barrier_slot_is_refuted(tmp_path):
    text = _text("triton_hopper_s3.ttgir")
    lines = [x for x in text.splitlines() if not re.match(r"\s*ttng\.init_barrier %acc_8,", x)]
    rc, doc, err = run_check(write_file(tmp_path, "mutant.ttgir", "\n".join(lines)))
    assert rc == 1 and doc["result"]["obligations"]["fence"]["refuted"] >= 1, err


if __name__ == "__main__":
    generate()

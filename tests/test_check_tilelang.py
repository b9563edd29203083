"""``synth check`` on TileLang's lowered device TIR (docs/check.md, "TileLang").

The saved inputs ``tests/check_inputs/tilelang/tilelang_*.tir`` are TileLang 0.1.15's pipelined GEMM lowered
without a GPU for sm_80 (cp.async, K fixed and ``T.dynamic("K")``, ``num_stages`` 2, 3, 4) and sm_90 (the
warp-specialized TMA pipeline at 2, 3, 4 stages and at one iteration; cp.async + wgmma with warp
specialization disabled), each naming the TileLang version in its first line;
``scripts/gen_tilelang_fixtures.sh`` writes them again (TileLang lives in its own venv: it pulls torch). The
bug-trail inputs under ``bugs/`` are hand edits of those files (each says so in its first line). One test
regenerates the fixtures when ``tilelang`` is importable here (skipped otherwise, as in CI).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import sys

import pytest

from conftest import write_file

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from check_inputs.helpers import run_check as run_envelope, run_text  # noqa: E402
from check_inputs.tilelang import generate as gen  # noqa: E402

TL = pathlib.Path(gen.HERE)
BUGS = TL / gen.BUGS


def run_check(*args: str) -> tuple:
    """``(exit status, the JSON envelope's result or {}, stderr)`` of ``synth check ARGS --json``."""
    rc, doc, err = run_envelope(*args)
    return rc, doc.get("result", {}), err


def fixture(name: str) -> str:
    return str(TL / gen.file_name(name))


def converged(text: str) -> str:
    """A warp-specialized kernel with its producer's threads converged before each elected block (the fix of
    the ``converge`` refutation every TileLang 0.1.15 producer gets; see the test below); others unchanged."""
    from synth.frontends.tilelang_mutants import converge_producer

    try:
        return converge_producer(text)
    except ValueError:
        return text


def converged_path(tmp_path, path: str) -> str:
    return write_file(tmp_path, pathlib.Path(path).name, converged(pathlib.Path(path).read_text()))


# ---------------------------------------------------------------------------------------------
# the saved inputs are TileLang's output


@pytest.mark.parametrize("name,arch,stages,K,no_ws", gen.PROGRAMS)
def test_saved_inputs_name_the_tilelang_version_and_the_call(name, arch, stages, K, no_ws):
    text = pathlib.Path(fixture(name)).read_text()
    first = text.splitlines()[0]
    assert re.match(rf"# tilelang \d+\.\d+\.\d+: {name}: matmul\(1024, 1024, K=", first), first
    assert f"num_stages={stages}) lowered for sm_{arch}" in first
    assert f'"arch": "sm_{arch}"' in text
    if arch == 80 or no_ws:
        assert "T.ptx_cp_async(" in text and "T.ptx_wait_group(" in text and "T.tma_load(" not in text
    else:
        assert "kWarpSpecializationScope" in text and "T.tma_load(" in text and "T.ptx_cp_async(" not in text


# ---------------------------------------------------------------------------------------------
# sm_80 cp.async: proven for every trip count, each wait tight


@pytest.mark.parametrize("stages", (2, 3, 4))
def test_cp_async_pipeline_with_fixed_K_is_proven(stages):
    rc, r, err = run_check(fixture(f"sm80_s{stages}"))
    assert rc == 0, err
    assert r["source"] == "tilelang" and r["ok"]
    assert r["trip_count"] == 32 - (stages - 1)  # K = 1024: 32 k-tiles, stages - 1 of them in the prologue
    waits = r["waits"]
    assert [w["in_flight"] for w in waits] == [str(stages - 1)] + [str(n) for n in range(stages - 2, -1, -1)]
    assert all(w["status"] == "proven" and w["tight"] for w in waits)
    assert waits[0]["text"] == f"T.ptx_wait_group({stages - 1})" and waits[0]["part"] == "body"


@pytest.mark.parametrize("stages,min_k", ((2, 1), (3, 33), (4, 65)))
def test_cp_async_pipeline_with_dynamic_K_is_proven_for_every_K(stages, min_k):
    """K = T.dynamic("K"): the trip-count symbol is K itself (renamed T); the smallest K is the first at which
    the loop's extent ceil(K / 32) - (stages - 1) is not negative."""
    rc, r, err = run_check(fixture(f"sm80_dynk_s{stages}"))
    assert rc == 0, err
    assert r["trip_count"] == "T" and r["min_trip_count"] == min_k
    assert len(r["waits"]) == stages and all(w["status"] == "proven" and w["tight"] for w in r["waits"])
    for k in (min_k, 100, 1000):  # several K, each alone
        rc, r1, err = run_check(fixture(f"sm80_dynk_s{stages}"), "--trip-count", str(k))
        assert rc == 0 and r1["ok"], (k, err)


def test_short_K_below_the_pipeline_is_refused_at_the_loop_line():
    rc, out, err = run_text(fixture("sm80_dynk_s3"), "--min-trip-count", "0")
    assert rc == 2 and out == "" and "Traceback" not in err
    assert "tilelang_sm80_dynk_s3.tir:46:1: error: --min-trip-count 0: at trip count 0 the loop's extent" in err
    assert "fix: use --min-trip-count 33 or more" in err


def test_sm90_cp_async_with_wgmma_reads_is_proven():
    rc, r, err = run_check(fixture("sm90_cpasync_s3"))
    assert rc == 0, err
    assert all(w["tight"] for w in r["waits"]) and len(r["waits"]) == 3


def test_raised_wait_group_is_refuted_with_the_read_its_iteration_and_slot(tmp_path):
    from synth.frontends.tilelang_mutants import raise_wait_group

    text = pathlib.Path(fixture("sm80_s3")).read_text()
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "T.ptx_wait_group(2)" in x)
    rc, out, _ = run_text(write_file(tmp_path, "k.tir", raise_wait_group(text, line)))
    assert rc == 1
    assert f"wait #0 line {line} (body) T.ptx_wait_group(3): keeps <= 3 groups in flight before read_A_shared: " \
           "refuted" in out
    assert "RAW (stale read): with trip count 30, at body i = 0 (step 2): read_A_shared (iteration 0) reads " \
           "A_shared version 0 before copy_A_shared's write of it is complete" in out
    assert "source: read_A_shared in the body is line 49: T.ptx_ldmatrix(" in out


def test_flash_attention_two_buffers_at_two_points_is_proven():
    """TileLang's FlashAttention on sm_80: K's and V's copies committed separately, each read after its own
    wait (the loop waits twice, the epilogue four times), every wait proven and tight."""
    rc, r, err = run_check(fixture("flash_sm80_s2"))
    assert rc == 0, err
    assert len(r["waits"]) == 6 and all(w["status"] == "proven" and w["tight"] for w in r["waits"])
    assert [w["part"] for w in r["waits"]][:2] == ["body", "body"]


@pytest.mark.parametrize("rows", (1, 2))
def test_one_dimensional_bulk_copy_read_by_plain_loads_is_proven(tmp_path, rows):
    """tilelang #2566's kernel shape (a contiguous row into a plain shared tile): TileLang 0.1.15 issues a 1D bulk
    TMA copy with its arrive.expect_tx, also at one row, where it drops the loop; the consumer's plain loads are
    synchronous reads of the iteration's slot."""
    from synth.frontends.tilelang import tilelang_to_hopper

    path = converged_path(tmp_path, fixture(f"rowsum_bulk1d_sm90_t{rows}"))
    rc, r, err = run_check(path)
    assert rc == 0 and r["trip_count"] == rows, err
    p = tilelang_to_hopper(pathlib.Path(path).read_text(), path).program
    assert [(o.name, o.unit, o.is_async) for o in p.ops] == [("tma_A_shared", "tma", True),
                                                              ("load_A_shared_consumer", "lds", False)]
    assert p.role("consumer").warpgroups == 2 and p.barriers[1].count == 256  # 256 consumer threads arrive


def test_flash_attention_on_sm90_is_refused_naming_its_once_loaded_tile():
    path = fixture("flash_sm90_s2_refused")
    rc, out, err = run_text(path)
    assert rc == 2 and out == "" and "Traceback" not in err
    text = pathlib.Path(path).read_text()
    assert f"{path}:{_line_of(text, 'T.ptx_arrive_barrier_expect_tx(mbarrier_1[8]')}:1: error:" in err
    assert "a TMA tile loaded once before the warp-specialized roles (FlashAttention's Q)" in err


# ---------------------------------------------------------------------------------------------
# sm_90 warp-specialized: a producer and a consumer role on full / empty mbarriers


@pytest.mark.parametrize("name,T", (("sm90_ws_s2", 1), ("sm90_ws_s3", 1), ("sm90_ws_s4", 1), ("sm90_ws_k32_s3", 1),
                                    ("rowsum_bulk1d_sm90_t1", 1), ("rowsum_bulk1d_sm90_t2", 2)))
def test_producer_threads_are_not_converged_before_the_elected_refill(tmp_path, name, T):
    """TileLang 0.1.15's producer: its 128 threads each wait on the empty barrier, then one
    (``T.tl_shuffle_elect(128)``: an elect within warp 0) expects bytes and issues the TMA copies; nothing
    converges the producer's four warps in between. A producer thread still before its wait for phase -1 of
    an empty slot (a fresh barrier: it passes at once) when the consumer's release completes phase 0 then
    waits for parity 1 of phase 1, which no one completes: the kernel hangs, at T = 1 already. Refuted by
    ``converge`` only, in the producer; with a named bar.sync over the producer before the elected block it is
    proven (the consumer's releases are each thread's own arrives: it is one actor)."""
    path = fixture(name)
    rc, r, err = run_check(path)
    assert rc == 1 and not r["ok"], err
    assert {f["class"] for f in r["failures"]} == {"converge"} and {f["role"] for f in r["failures"]} == {"producer"}
    rc, out, err = run_text(path)
    assert (f"converge: with trip count {T}, warp group producer body i = 0: the elected thread 0 arrives on bar0[0] "
            "phase 0 (iteration 0) while thread 1 of warp group producer may still be waiting in its try_wait on "
            f"bar{2 if 's2' in name or 'rowsum' in name else 3 if 's3' in name else 4}[0] for phase -1") in out, out
    assert re.search(r"source: line \d+: T\.(mbarrier_expect_tx|ptx_arrive_barrier_expect_tx)\(", out), out
    rc, r, err = run_check(converged_path(tmp_path, path))
    assert rc == 0 and r["ok"], err


def test_a_named_barrier_in_the_consumer_makes_it_a_role_of_threads(tmp_path):
    """A T.tvm_storage_sync("shared", id, n) inside a role is a bar_sync: the consumer is then read as 128
    threads (its wgmma collective, its per-thread release one elected arrive of 128), still proven."""
    from synth.frontends.tilelang import tilelang_to_hopper

    line = "                T.ptx_arrive_barrier(mbarrier_1[k % 3 + 3])\n"
    assert line in WS3
    path = write_file(tmp_path, "k.tir",
                      WS3.replace(line, '                T.tvm_storage_sync("shared", 2, 128)\n' + line, 1))
    p = tilelang_to_hopper(pathlib.Path(path).read_text(), path).program
    assert (p.role("consumer").threads, p.role("consumer").collective) == (128, ("wgmma_consumer",))
    rc, r, err = run_check(path)
    assert rc == 0 and r["ok"], err


@pytest.mark.parametrize("stages", (2, 3, 4))
def test_warp_specialized_tma_pipeline_is_proven_for_every_trip_count(tmp_path, stages):
    from synth.frontends.tilelang import tilelang_to_hopper

    path = converged_path(tmp_path, fixture(f"sm90_ws_s{stages}"))
    rc, r, err = run_check(path)
    assert rc == 0, err
    assert r["source"] == "tilelang-sm90-ws" and r["roles"] == ["producer", "consumer"]
    assert r["trip_count"] == "T" and r["min_trip_count"] == 1 and r["counts"]["refuted"] == 0
    p = tilelang_to_hopper(pathlib.Path(path).read_text(), path).program
    full, empty = p.barriers
    assert (full.kind, full.slots, full.count, full.guards) == ("full", stages, 1, ("A_shared", "B_shared"))
    assert (empty.kind, empty.slots, empty.count) == ("empty", stages, 128)
    assert [b.multiplicity for b in p.buffers] == [stages, stages]
    assert [b.bytes_per_slot for b in p.buffers] == [8192, 8192]  # A's one box, B's two half-boxes as one op
    assert r["counts"]["proven"] == len(r.get("obligations", [])) or r["ok"]
    assert [(x.name, x.threads, x.collective) for x in p.roles] == [("producer", 128, ()), ("consumer", 1, ())]


def test_warp_specialized_pipeline_is_proven_from_zero_trips(tmp_path):
    rc, r, err = run_check(converged_path(tmp_path, fixture("sm90_ws_s3")), "--min-trip-count", "0")
    assert rc == 0 and r["min_trip_count"] == 0, err


def test_one_iteration_warp_specialized_kernel_is_proven(tmp_path):
    """K = 32: TileLang 0.1.15 drops the loop; each role's straight-line code is one iteration."""
    rc, r, err = run_check(converged_path(tmp_path, fixture("sm90_ws_k32_s3")))
    assert rc == 0 and r["trip_count"] == 1, err


@pytest.mark.parametrize("mutant,cls", (("drop_release_wait", "slot_reuse"), ("flip_consumer_parity", "parity")))
def test_warp_specialized_mutants_are_refuted_with_role_barrier_slot_and_phase(tmp_path, mutant, cls):
    from synth.frontends import tilelang_mutants as TLM

    text = getattr(TLM, mutant)(pathlib.Path(fixture("sm90_ws_s3")).read_text())
    rc, r, _ = run_check(write_file(tmp_path, "k.tir", text))
    assert rc == 1 and not r["ok"]
    fails = [f for f in r["failures"] if f["class"] == cls]
    assert fails, [f["class"] for f in r["failures"]]
    assert all(f["line"] and f["text"].startswith("T.") for f in r["failures"])
    assert any(f["at"] and re.match(r"role (producer|consumer), iteration \d+: barrier bar\d slot \d, phase \d",
                                    f["at"]) for f in r["failures"])


# ---------------------------------------------------------------------------------------------
# TileLang's bug trail: each refuted with a counterexample, its fixed form proven

BUG_TRAIL = (
    # bug file, fixed form, what the first counterexample must say, where it happens (role, barrier, phase)
    ("tl2505_split_groups_bug.tir", BUGS / "tl2505_split_groups_fixed.tir",
     "RAW (stale read): with trip count 30, at body i = 0 (step 2): read_B_shared (iteration 0) reads B_shared "
     "version 0 before copy_B_shared's write of it is complete", "source: read_B_shared in the body is line 55"),
    ("tl2668_war_bug.tir", TL / "tilelang_sm90_ws_s3.tir", "refuted [slot_reuse] producer body: TMA tma_A_shared",
     "at: role producer, iteration 3: barrier bar0 slot 0, phase 1 (parity 1, count 3), trip count 4"),
    ("tl3087_ring_parity_bug.tir", BUGS / "tl3087_ring_parity_fixed.tir",
     "refuted [parity] producer body: try_wait bar3[i % 1]",
     "at: role producer, iteration 1: barrier bar3 slot 0, phase 1 (parity 1, count 1), trip count 2"),
    ("tl2566_one_iteration_bug.tir", TL / "tilelang_rowsum_bulk1d_sm90_t1.tir",
     "refuted [no_deadlock] consumer body: try_wait bar0[i % 2]",
     "at: role consumer, iteration 0: barrier bar0 slot 0, phase 0 (parity 0, count 0), trip count 1"),
    ("tl2566_gemm_k32_bug.tir", TL / "tilelang_sm90_ws_k32_s3.tir",
     "refuted [arrivals] producer body: expect_tx bar0[i % 3]: the phase it names gets exactly 1 arrival(s)",
     "at: role producer, iteration 0: barrier bar0 slot 0, phase 0 (parity 0, count 0), trip count 1"),
)


@pytest.mark.parametrize("bug,fixed,says,where", BUG_TRAIL, ids=[b[0] for b in BUG_TRAIL])
def test_bug_trail_is_refuted_and_its_fixed_form_proven(tmp_path, bug, fixed, says, where):
    rc, out, err = run_text(str(BUGS / bug))
    assert rc == 1, err
    assert says in out and where in out, out[:3000]
    assert re.search(r"source: (read_B_shared in the body is )?line \d+: T\.", out)
    rc, out, err = run_text(converged_path(tmp_path, str(fixed)))  # and its producer converged
    assert rc == 0, out[:2000] + err


def test_bug_trail_files_are_the_edits_their_headers_name():
    """Each saved bug input is its base fixture with the edit :data:`generate.MUTANTS` names (no TileLang)."""
    assert {m[0] for m in gen.MUTANTS} == {p.name for p in BUGS.glob("*.tir")}
    for fname, base, what, edit, _verdict in gen.MUTANTS:
        text = (BUGS / fname).read_text()
        assert text.startswith(f"# HAND EDIT of {gen.file_name(base)} "), fname
        assert text == gen.mutant_text(pathlib.Path(fixture(base)).read_text(), base, what, edit), fname


# ---------------------------------------------------------------------------------------------
# bad input: exit 2, file:line and a fix, never a traceback

S3 = pathlib.Path(fixture("sm80_s3")).read_text() if pathlib.Path(fixture("sm80_s3")).exists() else ""
WS3 = converged(pathlib.Path(fixture("sm90_ws_s3")).read_text()) if pathlib.Path(fixture("sm90_ws_s3")).exists() else ""
CP90 = pathlib.Path(fixture("sm90_cpasync_s3")).read_text() if pathlib.Path(fixture("sm90_cpasync_s3")).exists() else ""


def _line_of(text: str, needle: str) -> int:
    return next(i for i, x in enumerate(text.splitlines(), 1) if needle in x)


BAD = (
    ("syntax", lambda: S3.replace("for k in T.serial(30,", "for k in T.serial(30,,"),
     lambda t: _line_of(t, "T.serial(30,,"), "not TileLang TIR text"),
    ("data-dependent slot", lambda: S3.replace("B_shared, (k + 2) % 3 * 4096", "B_shared, idx[k] * 4096"),
     lambda t: _line_of(t, "idx[k] * 4096"), "is not known (indirect or data-dependent)"),
    ("unknown wait count", lambda: S3.replace("T.ptx_wait_group(2)", "T.ptx_wait_group(n_local[0])"),
     lambda t: _line_of(t, "n_local[0]"), "the count of T.ptx_wait_group(n_local[0]) is not known"),
    ("slot straddling", lambda: S3.replace("B_shared, (k + 2) % 3 * 4096 +", "B_shared, (k + 2) % 3 * 4096 + 100 +"),
     lambda t: _line_of(t, "% 3 * 4096 + 100 +"), "leaves its slot"),
    ("while loop", lambda: S3.replace("        for k in T.serial(30, annotations={\"tl_pipelined_num_stages\": 3}):",
                                      "        while k < 30:"),
     lambda t: _line_of(t, "while k < 30:"), "a while loop around the pipeline's statements"),
    ("barrier index", lambda: WS3.replace("T.mbarrier_wait_parity(mbarrier_1[k % 3],", "T.mbarrier_wait_parity("
                                          "mbarrier_1[idx[0]],"),
     lambda t: _line_of(t, "mbarrier_1[idx[0]]"), "the barrier index of"),
    ("wgmma in flight", lambda: CP90.replace("T.warpgroup_wait(0)", "T.warpgroup_wait(1)", 1),
     lambda t: _line_of(t, "T.warpgroup_wait(1)"), "a wgmma batch left in flight is outside the cp.async model"),
    ("parity", lambda: WS3.replace("T.mbarrier_wait_parity(mbarrier_1[k % 3], k % 6 // 3)",
                                   "T.mbarrier_wait_parity(mbarrier_1[k % 3], p_local[0])"),
     lambda t: _line_of(t, "p_local[0]"), "is not a function of the iteration"),
)


@pytest.mark.parametrize("name,make,line,says", BAD, ids=[b[0] for b in BAD])
def test_bad_tilelang_input_exits_2_with_file_line_and_fix(tmp_path, name, make, line, says):
    text = make()
    path = write_file(tmp_path, "k.tir", text)
    rc, out, err = run_text(path)
    assert rc == 2 and out == "" and "Traceback" not in err, err
    assert f"{path}:{line(text)}:" in err, err
    assert says in err and "\nfix: " in err, err


def test_form_tilelang_and_func_are_checked(tmp_path):
    rc, _, err = run_text(fixture("sm80_s2"), "--form", "tilelang")
    assert rc == 0, err
    rc, _, err = run_text(fixture("sm80_s2"), "--func", "main_kernel")
    assert rc == 2 and "--func main_kernel: only a TVMScript file" in err
    rc, _, err = run_text(write_file(tmp_path, "k.tir", "x = 1\n"), "--form", "tilelang")
    assert rc == 2 and "no @T.prim_func" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# what today's TileLang emits

HAS_TILELANG = importlib.util.find_spec("tilelang") is not None


@pytest.mark.skipif(not HAS_TILELANG, reason="tilelang is not installed here (it pulls torch; "
                    "scripts/gen_tilelang_fixtures.sh installs it in its own venv)")
def test_regenerated_fixtures_match_the_saved_ones(tmp_path):
    out = tmp_path / "tl"
    gen.generate(str(out))
    import tilelang
    for name, *_ in gen.PROGRAMS + gen.FLASH + gen.ROWSUM:
        fresh = (out / gen.file_name(name)).read_text()
        saved = pathlib.Path(fixture(name)).read_text()
        if tilelang.__version__ != saved.split()[2].rstrip(":"):
            rc, _, err = run_check(str(out / gen.file_name(name)))  # another version: still proven
            assert rc == 0, (name, err)
        else:
            assert fresh == saved, name


def test_an_unknown_call_reading_a_slot_is_a_read_not_ignored(tmp_path):
    """An extern call with a read pointer into B_shared, placed before the loop's wait: a stale read."""
    call = ('            T.call_extern("handle", "peek", T.tvm_access_ptr(T.type_annotation("float16"), B_shared, '
            'k % 3 * 4096, 4096, 1))\n')
    text = S3.replace("            T.ptx_wait_group(2)\n", call + "            T.ptx_wait_group(2)\n", 1)
    rc, out, err = run_text(write_file(tmp_path, "k.tir", text))
    assert rc == 1, err
    assert "read_B_shared (iteration 0) reads B_shared version 0 before copy_B_shared's write of it is complete" in out


@pytest.mark.parametrize("where,rc_want", (("k % 3 * 4096", 0), ("0", 2), ("late", 1)))
def test_a_plain_read_of_a_tma_tile(tmp_path, where, rc_want):
    """An extern call reading the consumer's A tile: its own slot before the release is a synchronous read
    (proven); a fixed slot is outside the model (exit 2); its own slot after the release is a race (refuted)."""
    line = "                T.ptx_arrive_barrier(mbarrier_1[k % 3 + 3])\n"
    off = "0" if where == "0" else "k % 3 * 4096"
    read = ('                T.call_extern("handle", "peek", T.tvm_access_ptr(T.type_annotation("float16"), A_shared, '
            f'{off}, 4096, 1))\n')
    assert line in WS3
    text = WS3.replace(line, line + read if where == "late" else read + line, 1)
    path = write_file(tmp_path, "k.tir", text)
    rc, out, err = run_text(path)
    assert rc == rc_want and "Traceback" not in err, out[:2000] + err
    if rc_want == 2:
        assert f"{path}:{_line_of(text, 'peek')}:" in err and "reads a slot of A_shared other than k % 3" in err
    if rc_want == 1:
        assert "refuted [release_after_wgmma] consumer body: arrive bar3[i % 3]" in out


def test_tilelang_text_is_never_run(tmp_path):
    """The reader parses the text with ``ast`` only: a payload in an expression is never evaluated."""
    marker = tmp_path / "ran"
    payload = f"__import__('os').system('touch {marker}')"
    text = S3.replace("T.ptx_wait_group(2)", f"T.ptx_wait_group({payload})", 1)
    rc, out, err = run_text(write_file(tmp_path, "k.tir", text))
    assert rc == 2 and "is not known" in err and "Traceback" not in err
    assert not marker.exists()


FUZZ_CASES = 200 if __import__("os").environ.get("SYNTH_HYPOTHESIS") == "explore" else 12


@pytest.mark.parametrize("seed", range(FUZZ_CASES))
def test_edited_tilelang_input_never_crashes(tmp_path, seed):
    """A fixture with a few random line deletions, duplications, token splices or numbers changed: proven,
    refuted or exit 2 with file:line-or-file and a fix; never a traceback (derandomized: one seed per case)."""
    import random

    rnd = random.Random(seed)
    base = ("rowsum_bulk1d_sm90_t2", "sm80_s2", "sm90_ws_s2")[seed % 3]
    lines = pathlib.Path(fixture(base)).read_text().split("\n")
    toks = ["k", "0", "1", "3", "K", "(", ")", "[", "]", ",", "T.foo()", "%", "//", "-", "T.bitwise_xor(k, 1)",
            "mbarrier_1[0]", "A_shared", "idx[0]", "if k < 3:", "    ", "for q in T.unroll(100000):"]
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(lines))
        op = rnd.random()
        if op < 0.3:
            del lines[i]
        elif op < 0.6 and lines[i]:
            j = rnd.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + rnd.choice(toks) + lines[i][j + rnd.randint(0, 3):]
        elif op < 0.8:
            lines.insert(i, lines[rnd.randrange(len(lines))])
        else:
            m = list(re.finditer(r"\d+", lines[i]))
            if m:
                mm = rnd.choice(m)
                lines[i] = lines[i][:mm.start()] + str(rnd.choice([0, 1, 2, 5, 4096, 8191, 10 ** 6])) + \
                    lines[i][mm.end():]
    rc, out, err = run_text(write_file(tmp_path, "k.tir", "\n".join(lines)), "--time-limit", "5")
    assert rc in (0, 1, 2) and "Traceback" not in err, err
    if rc == 2:
        assert "error:" in err and "\nfix: " in err, err

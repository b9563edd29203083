"""``synth check`` on Triton's warp-specialized loops and Blackwell TTGIR (docs/check.md, "Warp-specialized Triton").

The saved inputs ``tests/check_inputs/triton_ws/`` are Triton 3.9's TTGIR of docs/check.md's warp-specialized
recipe (``tl.range(..., warp_specialize=True)``, sm_90, ``num_stages`` 2, 3, 4; and sm_100), each naming the
Triton version in its first line; ``python tests/check_inputs/generate.py`` writes them again. The tests read
them (no Triton needed); one compiles the recipe afresh when Triton is installed and compares the mapped program.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest

from conftest import write_file

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from check_inputs import generate as gen  # noqa: E402
from check_inputs.helpers import run_check, run_text  # noqa: E402

WS = pathlib.Path(gen.WS_DIR)
S3 = WS / "triton_ws_s3.ttgir"
SM100 = WS / gen.WS_SM100


# ---------------------------------------------------------------------------------------------
# the saved inputs: what Triton emits, and that synth proves it for every trip count


@pytest.mark.parametrize("stages", gen.WS_STAGES)
def test_saved_inputs_are_warp_specialized_triton_output(stages):
    text = (WS / f"triton_ws_s{stages}.ttgir").read_text()
    assert re.match(rf"// Triton \d+\.\d+\.\d+: ws_ttgir\(num_stages={stages}, capability=90\)", text)
    assert "ttg.warp_specialize(" in text and "partition0(" in text and "partition1(" in text
    assert text.count("ttng.arrive_barrier") == 4 and text.count("ttng.async_tma_copy_global_to_local") == 3
    assert f"memdesc<{stages}x1xi64" in text  # one barrier slot per stage


@pytest.fixture(scope="module")
def s3_check():
    """``check_file`` of the saved num_stages = 3 input, proven once (what ``synth check`` prints and its
    ``--json`` are this object's ``render()`` and ``to_json()``)."""
    from synth.frontends import check_file

    return check_file(str(S3))


def test_warp_specialized_matmul_is_proven_for_every_trip_count(s3_check):
    assert s3_check.ok
    r = json.loads(json.dumps(s3_check.to_json()))
    assert r["ok"] and r["source"] == "triton-sm90-ws" and r["protocol"] == "mbarrier"
    assert r["roles"] == ["default", "partition0", "partition1"]
    assert r["trip_count"] == "T" and r["min_trip_count"] == 1
    assert r["counts"]["refuted"] == r["counts"]["unknown"] == 0
    for cls in ("arrivals", "tx_bytes", "parity", "no_deadlock", "raw", "slot_reuse", "release_after_wgmma",
                "teardown", "fence"):
        assert r["obligations"][cls]["proven"] >= 1, cls
    # each consumer's synchronous wgmma (wait_group 0) is what makes its release safe: tight
    assert sorted((w["role"], w["tight"]) for w in r["waits"]) == [("partition0", True), ("partition1", True)]


def test_mapped_program_has_one_role_per_partition_and_full_empty_pairs():
    from synth.frontends.ttgir_ws import ws_to_hopper

    p = ws_to_hopper(S3.read_text(), str(S3)).program
    assert [(r.name, r.warpgroups) for r in p.roles] == [("default", 1), ("partition0", 1), ("partition1", 1)]
    kinds = sorted((b.kind, b.count, b.slots, len(b.guards)) for b in p.barriers)
    # three full barriers (A top half, A bottom half, B; init 1) and four empty ones (init 128, one arrive of 128
    # per consumer iteration), each guarding the one buffer the producer refills after waiting on it (A's half,
    # or B); the four unused ones are left out
    assert kinds == [("empty", 128, 3, 1)] * 4 + [("full", 1, 3, 1)] * 3
    assert "left out" in p.notes[0]
    producer = p.role("default").program.parts[0].stmts
    assert sum(type(s).__name__ == "TryWaitStmt" and s.state.phase == 1 for s in producer) == 4  # waits on empty
    assert {b.bytes_per_slot for b in p.buffers} == {8192, 16384}


def _check_ws(text: str, path: str, arrive_sync: bool):
    from synth.frontends.ttgir_ws import check_ws

    return check_ws(text, path, time_limit=20, tightness=False, arrive_sync=arrive_sync)


def test_roles_run_their_partitions_threads_with_wgmma_collective_and_a_barrier_before_each_arrive():
    """Each partition of 4 warps is 128 threads; a consumer's wgmma is a warp-group collective; Triton 3.9
    lowers every ttng.arrive_barrier / ttng.barrier_expect to a bar.sync over the partition, then thread 0's
    arrive: a bar_sync right before each elected arrive (the ``converge`` obligations hold through it)."""
    from synth.completion import ArriveStmt, BarSyncStmt
    from synth.frontends.ttgir_ws import ws_to_hopper

    p = ws_to_hopper(S3.read_text(), str(S3)).program
    assert [(r.name, r.threads, r.collective) for r in p.roles] == [
        ("default", 128, ()), ("partition0", 128, ("wgmma_partition0",)), ("partition1", 128, ("wgmma_partition1",))]
    for r in p.roles:
        st = r.program.parts[0].stmts
        arrives = [k for k, s in enumerate(st) if isinstance(s, ArriveStmt)]
        assert arrives and all(st[k].elected and isinstance(st[k - 1], BarSyncStmt) for k in arrives), r.name
    q = ws_to_hopper(S3.read_text(), str(S3), arrive_sync=False).program
    assert not any(isinstance(s, BarSyncStmt) for r in q.roles for s in r.program.parts[0].stmts)


def test_consumer_reading_its_slot_with_plain_loads_is_refuted_by_converge(tmp_path):
    """The leader-warp release (Triton's fix 'always insert bar sync before all mbarrier arrives'): a consumer
    whose wgmma is replaced by per-thread ttg.local_loads has nothing converging its 128 threads between their
    wait on the full barrier and thread 0's release of the slot. Without the lowering's bar.sync
    (``arrive_sync=False``) ``converge`` refutes it at T = stages + 1, naming the lagging thread; with a
    gpu.barrier before each arrive it is proven, and so it is under Triton 3.9's lowering, which emits that
    barrier."""
    from synth.frontends.mutants import barrier_before_arrives, wgmma_to_local_load

    s2 = WS / "triton_ws_s2.ttgir"
    text = wgmma_to_local_load(s2.read_text())
    c = _check_ws(text, "mutant.ttgir", arrive_sync=False)
    cons = [o for o in c.report.obligations if o.kind == "converge" and o.status == "refuted"
            and o.id.startswith("converge:partition0:")]
    assert cons, [o.id for o in c.report.obligations if o.status != "proven"]
    cex = cons[0].counterexample
    assert cex.trip_count == 3  # stages + 1
    assert ("the elected thread 0 arrives on bar" in cex.summary and
            "while thread 1 of warp group partition0 may still be waiting in its try_wait on bar" in cex.summary
            and "two phases behind" in cex.summary), cex.summary
    fixed = barrier_before_arrives(text)
    assert _check_ws(fixed, "fixed.ttgir", arrive_sync=False).report.ok
    assert _check_ws(text, "mutant.ttgir", arrive_sync=True).report.ok


def test_the_command_line_refutes_the_plain_reads_consumer_without_the_lowering_barriers(tmp_path):
    """``synth check --without-lowering-barriers`` is ``arrive_sync=False``: the plain-reads mutant exits 1 with
    the converge counterexample; without the flag (Triton 3.9's lowering) it exits 0; a non-Triton input with
    the flag exits 2 naming the flag."""
    from synth.frontends.mutants import wgmma_to_local_load

    mutant = tmp_path / "plain_reads.ttgir"
    mutant.write_text(wgmma_to_local_load((WS / "triton_ws_s2.ttgir").read_text()))
    rc, doc, _ = run_check(str(mutant), "--without-lowering-barriers")
    classes = doc["result"]["obligations"]
    assert rc == 1 and classes["converge"]["refuted"] > 0, classes
    assert all(c["refuted"] == 0 for k, c in classes.items() if k != "converge"), classes
    rc, doc, _ = run_check(str(mutant))
    assert rc == 0 and doc["result"]["ok"], doc
    rc, _, err = run_text(str(pathlib.Path(gen.__file__).with_name("triton-matmul-s3.ttgir")),
                          "--without-lowering-barriers")
    assert rc == 2 and "--without-lowering-barriers applies to Triton's sm_90 TTGIR" in err, err


def test_human_report_names_roles_and_source_lines(s3_check):
    out = s3_check.render()
    assert "warp-specialized sm_90 pipeline" in out and "roles default, partition0, partition1" in out
    assert re.search(r"partition0 body \d+: line \d+: ttng.arrive_barrier %\w+, 128", out)


@pytest.mark.slow
@pytest.mark.parametrize("stages", [s for s in gen.WS_STAGES if s != 3])
def test_other_depths_are_proven(stages):
    rc, doc, err = run_check(str(WS / f"triton_ws_s{stages}.ttgir"))
    assert rc == 0, err
    doc = doc["result"]
    assert doc["roles"] == ["default", "partition0", "partition1"]
    assert doc["counts"]["refuted"] == doc["counts"]["unknown"] == 0 and doc["counts"]["proven"] >= 90


@pytest.mark.skipif(bool(gen.triton_available()), reason=gen.triton_available() or "Triton is installed")
def test_fresh_triton_output_maps_like_the_saved_one(tmp_path):
    """A fresh compile maps to the same roles, statements and verdicts as the saved file. Triton 3.9 does not
    always emit a partition's two releases (``arrive_barrier``) in the same order, nor allocate its barriers
    in the same order, so the statements of each part are compared as a multiset of kinds, and the proof by
    its counts per class."""
    from collections import Counter

    from synth.frontends.ttgir_ws import ws_to_hopper
    from synth.hopper.ir import hopper_to_json

    def shape(text: str, path: str) -> dict:
        d = hopper_to_json(ws_to_hopper(text, path).program)
        return {r["role"]: [(p["part"], p["extent"], sorted(Counter(s["kind"] for s in p["stmts"]).items()))
                            for p in r["parts"]] for r in d["roles"]}

    fresh = gen.triton_ws_ttgir(3)
    assert fresh.splitlines()[0] == S3.read_text().splitlines()[0]
    assert shape(fresh, "fresh.ttgir") == shape(S3.read_text(), str(S3))
    rc_fresh, doc_fresh, err = run_check(write_file(tmp_path, "fresh.ttgir", fresh))
    rc_saved, doc_saved, _ = run_check(str(S3))
    assert rc_fresh == rc_saved == 0, err
    for key in ("roles", "counts"):
        assert doc_fresh["result"][key] == doc_saved["result"][key]


# ---------------------------------------------------------------------------------------------
# mutants: each refuted with a counterexample naming the role, the barrier and its phase


def _lines(text: str) -> list:
    return text.splitlines(keepends=True)


def _region_start(lines: list, name: str) -> int:
    return next(i for i, ln in enumerate(lines) if ln.strip().startswith(name))


def flip_producer_parity(text: str) -> str:
    """The producer's phase bit is no longer negated (``xori ..., true`` bypassed): it waits for the current
    release of each slot instead of the previous one."""
    lines = _lines(text)
    i = next(i for i, ln in enumerate(lines) if re.search(r"= arith\.xori %\S+, %true : i1", ln))
    res, src = re.search(r"(%\S+) = arith\.xori (%\S+), %true", lines[i]).groups()
    j = next(j for j in range(i, len(lines)) if f"arith.extui {res} " in lines[j])
    lines[j] = lines[j].replace(f"arith.extui {res} ", f"arith.extui {src} ")
    return "".join(lines)


def arrive_64(text: str) -> str:
    """partition0's first release arrives with count 64 on a barrier initialized with 128."""
    lines = _lines(text)
    i = next(i for i, ln in enumerate(lines) if "ttng.arrive_barrier" in ln)
    lines[i] = re.sub(r"(ttng\.arrive_barrier %\S+), 128", r"\1, 64", lines[i])
    return "".join(lines)


def release_before_use(text: str) -> str:
    """partition0's first release (its memdesc_index and arrive_barrier) moved before its warp_group_dot."""
    lines = _lines(text)
    d = next(i for i in range(_region_start(lines, "partition0("), len(lines)) if "ttng.warp_group_dot " in lines[i])
    a = next(i for i in range(d, len(lines)) if "ttng.arrive_barrier" in lines[i])
    moved = lines[a - 1:a + 1]
    del lines[a - 1:a + 1]
    lines[d:d] = moved
    return "".join(lines)


def delete_consumer_wait(text: str) -> str:
    """partition0's wait on its A tile's full barrier deleted."""
    lines = _lines(text)
    i = next(i for i in range(_region_start(lines, "partition0("), len(lines)) if "ttng.wait_barrier" in lines[i])
    del lines[i]
    return "".join(lines)


MUTANTS = {
    # mutant: (classes one of which must be refuted, the role it is charged to)
    "flip_producer_parity": (flip_producer_parity, {"no_deadlock", "parity"}, "default"),
    "arrive_64": (arrive_64, {"arrivals"}, "partition0"),
    "delete_consumer_wait": (delete_consumer_wait, {"raw"}, "partition0"),
}
SLOW_MUTANTS = {"arrive_64", "delete_consumer_wait"}
"""Each proof of a mutant takes seconds: these two run with the slow tests (CI)."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_MUTANTS else n
                                  for n in sorted(MUTANTS)])
def test_mutants_are_refuted_naming_role_barrier_and_phase(tmp_path, name):
    mutate, classes, role = MUTANTS[name]
    text = mutate(S3.read_text())
    assert text != S3.read_text()
    rc, doc, err = run_check(write_file(tmp_path, f"{name}.ttgir", text))
    assert rc == 1, err
    d = doc["result"]
    hits = [f for f in d["failures"] if f["class"] in classes and f["status"] == "refuted" and f["role"] == role]
    assert hits, [(f["class"], f["role"]) for f in d["failures"]]
    f = hits[0]
    assert f["line"] and f["text"]  # the source statement
    assert re.match(rf"role {role}, iteration \d+: barrier bar\d+ slot \d, phase \d+ \(parity [01], count \d+\)",
                    f["at"]), f["at"]


def test_release_before_use_is_refuted_in_the_report(tmp_path):
    """The human report of a release moved before the consumer's wgmma: the class, the statement's source
    line, and the role, barrier, slot and phase of the counterexample."""
    rc, out, _ = run_text(write_file(tmp_path, "release.ttgir", release_before_use(S3.read_text())))
    assert rc == 1 and "NOT PROVEN" in out
    assert re.search(r"refuted \[release_after_wgmma\] partition0 body: arrive bar\d+\[i % 3\] releases version i", out)
    assert re.search(r"source: line \d+: ttng.arrive_barrier %\w+, 128", out)
    assert re.search(r"at: role partition0, iteration 0: barrier bar\d+ slot 0, phase 0 \(parity 0, count 0\)", out)


# ---------------------------------------------------------------------------------------------
# outside the model: exit 2 with the file, the line and why


def test_regions_with_different_trip_counts_are_refused(tmp_path):
    lines = _lines(S3.read_text())
    p1 = _region_start(lines, "partition1(")
    i = next(i for i in range(p1, len(lines)) if re.search(r"= arith\.divsi %\S+, %c64_i32\w*", lines[i]))
    c128 = next(m.group(1) for ln in lines[p1:i] for m in [re.search(r"(%c128_i32\w*) = arith\.constant 128", ln)]
                if m)
    lines[i] = re.sub(r"%c64_i32\w*", c128, lines[i], count=1)  # partition1 runs (K + 63) / 128 times
    path = write_file(tmp_path, "trips.ttgir", "".join(lines))
    rc, _, err = run_text(path)
    assert rc == 2 and "partition1" in err and "different number of times" in err
    assert re.search(rf"{re.escape(path)}:\d+:\d+: error", err) and "fix:" in err


def test_partition_of_several_warp_groups_is_refused(tmp_path):
    """Triton arrives once per warp group (tid % 128 == 0): an 8-warp consumer would arrive twice, which the
    one-warp-group role does not model; exit 2 at the partition."""
    text = S3.read_text()
    mutant = re.sub(r"^(\s*partition1\(.*\)) num_warps\(4\)", r"\1 num_warps(8)", text, count=1, flags=re.M)
    assert mutant != text
    path = write_file(tmp_path, "wide.ttgir", mutant)
    line = next(n for n, ln in enumerate(mutant.splitlines(), 1) if ln.lstrip().startswith("partition1("))
    rc, _, err = run_text(path)
    assert rc == 2 and f"{path}:{line}:1: error: partition1 runs 8 warps" in err and "fix:" in err


def test_blackwell_ttgir_is_refused_naming_its_tcgen05_ops():
    text = SM100.read_text()
    assert re.match(r"// Triton \d+\.\d+\.\d+: ws_ttgir\(num_stages=3, capability=100\)", text)
    for form in ((), ("--form", "triton")):
        rc, _, err = run_text(str(SM100), *form)
        assert rc == 2, err
        first = next(n for n, ln in enumerate(text.splitlines(), 1) if "ttng.tmem_alloc" in ln)
        col = text.splitlines()[first - 1].index("ttng.tmem_alloc") + 1
        assert f"{SM100}:{first}:{col}: error: Blackwell TTGIR (tcgen05)" in err
        for op in ("ttng.tc_gen5_mma", "ttng.tc_gen5_commit", "ttng.tmem_alloc", "ttng.tmem_load", "ttng.tmem_store"):
            assert op in err
        assert "fix:" in err and "GPUTarget('cuda', 90, 32)" in err and "Traceback" not in err


def test_hand_written_tcgen05_op_is_refused_at_its_line(tmp_path):
    text = ("module attributes {\"ttg.num-warps\" = 4 : i32, ttg.target = \"cuda:100\"} {\n"
            "  tt.func public @k() {\n"
            "    ttng.tc_gen5_mma %a, %b, %acc, %true, %true : !ttg.memdesc<128x64xf16>\n"
            "    tt.return\n  }\n}\n")
    path = write_file(tmp_path, "bw.ttgir", text)
    rc, _, err = run_text(path, "--form", "triton")
    assert rc == 2 and f"{path}:3:5: error" in err and "ttng.tc_gen5_mma (line 3)" in err


@pytest.mark.slow
@pytest.mark.skipif(bool(gen.triton_available()), reason=gen.triton_available() or "Triton is installed")
def test_fresh_sm100_compile_is_refused(tmp_path):
    path = write_file(tmp_path, "sm100.ttgir", gen.triton_ws_ttgir(3, 100))
    rc, _, err = run_text(path)
    assert rc == 2 and "ttng.tc_gen5_mma" in err


def test_docs_recipe_is_the_generator_source():
    src = gen.triton_ws_recipe_source()
    assert "warp_specialize=True" in src and "def ws_ttgir(num_stages, capability=90)" in src


# ---------------------------------------------------------------------------------------------
# the persistent matmul (tutorial 09, flatten=True): one fused loop of tiles x k-tiles iterations

PERSISTENT = pathlib.Path(gen.PERSISTENT_DIR)


@pytest.mark.parametrize("stages", gen.PERSISTENT_STAGES)
def test_persistent_flattened_matmul_is_proven_for_every_trip_count(stages):
    path = PERSISTENT / f"triton_persistent_s{stages}.ttgir"
    assert re.match(rf"// Triton \d+\.\d+\.\d+: persistent_ttgir\(num_stages={stages}\)", path.read_text())
    rc, doc, err = run_check(str(path))
    assert rc == 0, err
    r = doc["result"]
    # every tile count, 0 included (a CTA past the last tile); its C stores checked as a store program
    assert r["source"] == "triton-sm90-persistent" and r["trip_count"] == "T" and r["min_trip_count"] == 0
    assert r["counts"]["refuted"] == r["counts"]["unknown"] == 0
    assert r["stores"] and all(s["ok"] for s in r["stores"])
    for cls in ("raw", "slot_reuse", "parity", "teardown", "wgmma_drain"):
        assert r["obligations"][cls]["proven"] >= 1, cls
    # what is not checked is said: the branch without the loop, the per-tile epilogue, the stores' drain
    left = " ".join(r["left_out"])
    assert "per-tile epilogue" in left and "warp_group_dot_wait {pendings = 0}" in left and "TMA store" in left


def _persistent_s3() -> str:
    return (PERSISTENT / "triton_persistent_s3.ttgir").read_text()


def test_persistent_loop_wait_raised_is_refuted(tmp_path):
    """The fused loop's wait_group 1 made 2: a TMA refills a slot a wgmma of two iterations back may still read,
    across a tile boundary as well as inside a tile (the ring runs on through the tiles)."""
    text = _persistent_s3()
    mutant = re.sub(r"(warp_group_dot_wait %\S+, %\S+, %\S+ \{pendings = )1( : i32\})", r"\g<1>2\2", text, count=1)
    assert mutant != text
    rc, doc, err = run_check(write_file(tmp_path, "pendings2.ttgir", mutant))
    assert rc == 1, err
    assert any(f["class"] == "slot_reuse" for f in doc["result"]["failures"])


def test_persistent_epilogue_wait_that_is_not_a_drain_is_refuted(tmp_path):
    """The per-tile epilogue's wait with pendings = 1 lets the tile's last wgmma run on while the epilogue reads
    the accumulator: refuted (wgmma_wait) at its line, naming the wgmma and the scf.if (it was exit 2)."""
    text = _persistent_s3()
    mutant = text.replace("{pendings = 0 : i32, warpGroupLocal}", "{pendings = 1 : i32, warpGroupLocal}", 1)
    assert mutant != text
    path = write_file(tmp_path, "epilogue.ttgir", mutant)
    line = next(n for n, ln in enumerate(mutant.splitlines(), 1) if "pendings = 1 : i32, warpGroupLocal" in ln)
    rc, doc, err = run_check(path)
    assert rc == 1, err
    bad = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert [o["class"] for o in bad] == ["wgmma_wait"] and bad[0]["line"] == line
    assert "may still be writing the accumulator" in bad[0]["detail"] and "scf.if at line" in bad[0]["detail"]


@pytest.mark.slow
@pytest.mark.skipif(bool(gen.triton_available()), reason=gen.triton_available() or "Triton is installed")
def test_fresh_persistent_compile_maps_like_the_saved_one():
    from synth.frontends.ttgir_persistent import persistent_to_hopper
    from synth.hopper.ir import hopper_to_json

    def mapped(text: str) -> str:
        d = hopper_to_json(persistent_to_hopper(text, "x.ttgir").program)
        d["notes"] = []
        return json.dumps(d, sort_keys=True)

    assert mapped(gen.triton_persistent_ttgir(3)) == mapped(_persistent_s3())


@pytest.mark.slow  # a sweep; the quick tier proves and refutes each warp-specialized input
def test_oracle_agrees_on_small_trip_counts():
    """The explicit-state oracle (real mbarrier / wgmma semantics, one T, every interleaving of the three
    roles) on the mapped programs: Triton's have no violation; each warp-specialized mutant has one by T = 4."""
    from synth.frontends.ttgir_persistent import persistent_to_hopper
    from synth.frontends.ttgir_ws import ws_to_hopper
    from synth.verify.oracle_phases import run

    ws2 = (WS / "triton_ws_s2.ttgir").read_text()
    for T in (1, 2, 3):
        r = run(ws_to_hopper(ws2, "x").program, T, max_states=200_000)
        assert r.complete and not r.violations, (T, r.violations)
    pers = persistent_to_hopper(_persistent_s3(), "x").program
    for T in range(1, 7):
        r = run(pers, T, max_states=50_000)
        assert r.complete and not r.violations, (T, r.violations)
    for mutate in (flip_producer_parity, arrive_64, release_before_use, delete_consumer_wait):
        m = ws_to_hopper(mutate(ws2), "x").program
        assert any(run(m, T, max_states=200_000).violations for T in range(1, 5)), mutate.__name__

"""``synth check`` on Triton's tile-loop matmul and warp-specialized TMA stores (docs/check.md, "Tile loops, warp
specialization and TMA stores").

The saved inputs ``tests/check_inputs/triton_nested/`` are Triton 3.9's sm_90a TTGIR of docs/check.md's tile-loop
recipe (tutorial 09 with ``flatten=False``: one warp group, subtiled epilogue, warp-specialized; a
warp-specialized one-tile k-loop storing C by TMA), each naming the Triton version and the call in its first line;
``python tests/check_inputs/generate.py`` writes them again. The tests read them (no Triton needed) and check what
``synth check`` says: every input proven for every tile count and k-trip count (0 included), each mutant of
:mod:`synth.frontends.ttgir_mutants` refuted with a counterexample naming the tile, the k-step, the role, the
barrier and the phase. One test (slow) compiles the recipe afresh when Triton is installed.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from check_inputs import generate as gen  # noqa: E402
from check_inputs.helpers import run_check, run_text  # noqa: E402

from synth.frontends import ttgir_mutants as mut  # noqa: E402

NESTED = pathlib.Path(gen.NESTED_DIR)
TILES = NESTED / "triton_tiles_s3.ttgir"
SUBTILE = NESTED / "triton_tiles_subtile_s3.ttgir"
RING = NESTED / "triton_tiles_ws_s2.ttgir"
WS_STORE = NESTED / "triton_ws_store_s3.ttgir"


def _mutant(tmp_path, src: pathlib.Path, fn) -> str:
    p = tmp_path / f"{src.stem}_{fn.__name__}.ttgir"
    p.write_text(fn(src.read_text()))
    return str(p)


@pytest.mark.parametrize("fname", sorted(gen.NESTED_FIXTURES))
def test_saved_inputs_are_triton_output_of_the_recipe(fname):
    text = (NESTED / fname).read_text()
    kernel, s, w, ws, sub = gen.NESTED_FIXTURES[fname]
    assert re.match(rf"// Triton \d+\.\d+\.\d+: tiles_ttgir\({kernel}, num_stages={s}, num_warps={w}, "
                    rf"warp_specialize={ws}, subtile={sub}\)", text)
    assert f'"ttg.num-warps" = {w}' in text and 'ttg.target = "cuda:90"' in text
    assert "ttng.async_tma_copy_local_to_global" in text
    assert ("ttg.warp_specialize(" in text) == ws


# ---------------------------------------------------------------------------------------------
# the compiler's output: proven for every tile count and every k-trip count, 0 included


def test_tile_loop_one_warp_group_is_proven_for_every_tile_and_k_count():
    rc, out, err = run_text(str(TILES))
    assert rc == 0, out + err
    title = out.splitlines()[0]
    assert "tile loop (line 55, every tile count n >= 0)" in title
    assert "k-tiles T >= 0" in title and "barriers re-initialized per tile" in title and title.endswith("PROVEN")
    assert "all obligations proven (48/48 obligations" in out
    # C staged through one reused buffer: the read-only store wait before the rewrite, the fence, the final drain
    assert "TMA store of mainloop: proven" in out
    assert "line 123: ttng.async_tma_store_wait {pendings = 0 : i32, read_only}" in out
    assert re.search(r"proxy_fence: proven", out) and re.search(r"teardown: proven", out)


def test_tile_loop_json(tmp_path):
    rc, doc, _ = run_check(str(TILES))
    assert rc == 0
    r = doc["result"]
    assert r["ok"] and r["source"] == "triton-sm90-tiles" and r["tile_line"] == 55
    assert r["min_trip_count"] == 0 and r["trip_count"] == "T"
    assert [s["role"] for s in r["stores"]] == ["mainloop"] and r["stores"][0]["ok"]
    assert r["stores"][0]["teardown"]["ok"] and r["tile_obligations"] == []


def test_subtiled_epilogue_two_stores_per_tile_through_one_buffer():
    rc, out, _ = run_text(str(SUBTILE))
    assert rc == 0, out
    assert "TMA store of mainloop: proven (2 store(s) per tile through one staging buffer" in out


def test_warp_specialized_tile_loop_is_one_ring_with_its_count_carried():
    rc, out, _ = run_text(str(RING))
    assert rc == 0, out
    title = out.splitlines()[0]
    assert "warp-specialized sm_90 tile loop" in title and "roles default, partition0, partition1" in title
    assert "one ring of T >= 0 iterations (T = tiles x k-tiles)" in title and title.endswith("PROVEN")
    assert "carry: proven: every partition enters tile t with count t T" in out
    assert "TMA store of partition0: proven" in out and "TMA store of partition1: proven" in out


def test_warp_specialized_k_loop_with_tma_store():
    rc, out, _ = run_text(str(WS_STORE))
    assert rc == 0, out
    assert "C stored by TMA: PROVEN" in out.splitlines()[0]
    assert "every store has read its staging buffer before partition0 exits" in out


def test_trip_count_flags():
    rc, out, _ = run_text(str(TILES), "--min-trip-count", "1")
    assert rc == 0 and "k-tiles T >= 1" in out.splitlines()[0]
    rc, out, _ = run_text(str(TILES), "--trip-count", "2")
    assert rc == 0 and "k-tiles T = 2" in out.splitlines()[0]


def test_without_lowering_barriers_the_store_needs_its_bar_sync():
    rc, out, _ = run_text(str(TILES), "--without-lowering-barriers")
    assert rc == 1
    assert "proxy_fence: refuted: store (elected thread) reads" in out and "no bar.sync after the fence" in out


# ---------------------------------------------------------------------------------------------
# mutants: refuted, the counterexample naming tile, k-step, role, barrier and phase


def test_phase_reset_per_tile_without_reinit_is_refuted_one_warp_group(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, TILES, mut.reset_phase_per_tile))
    assert rc == 1
    assert "phase_reset: refuted" in out
    assert ("tile 1, k-step 0, with T = 1 k-tile(s) per tile: role mainloop's wait on barrier acc slot 0 for phase 0 "
            "(parity 0)") in out
    assert "tile 0 completed 1 phase(s) of slot 0" in out and "barriers initialized once" in out.splitlines()[0]


def test_phase_reset_per_tile_is_refuted_by_carry_warp_specialized(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, RING, mut.reset_phase_per_tile))
    assert rc == 1
    m = re.search(r"carry: refuted: .*\n\s+(tile 1, k-step 0, with T = \d+ k-tile\(s\) per tile: partition (\w+) "
                  r"waits on barrier (\w+) slot 0 with parity 0 .* one phase early: it reads the slot before tile 1's "
                  r"copy of k-step 0 lands)", out)
    assert m, out
    assert m.group(2) in ("partition0", "partition1") and m.group(3).startswith("bar")


def test_raised_store_wait_rewrites_the_staging_buffer_while_read(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, TILES, mut.raise_store_wait))
    assert rc == 1
    assert "TMA store of mainloop: NOT PROVEN" in out
    assert "keeps <= 1 stores reading: refuted" in out
    assert "WAR (slot overwritten while read): with trip count 2, at body i = 1" in out


def test_raised_store_wait_at_the_end_of_a_partition(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, WS_STORE, mut.raise_store_wait))
    assert rc == 1
    assert "TMA store of partition0: NOT PROVEN" in out
    assert "teardown: refuted: after the last tile no store wait with pending count 0 runs" in out


def test_missing_fence_before_a_tma_store(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, SUBTILE, mut.drop_store_fence))
    assert rc == 1
    assert "proxy_fence: refuted: store (async proxy) reads" in out and "no fence.proxy.async between" in out


def test_drain_skipped_on_the_last_tile(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, TILES, mut.skip_last_tile_wait))
    assert rc == 1
    assert re.search(r"on the tiles where a conditional wait does not run .*e\.g\. tile 0 of 1 \(the last tile\): the "
                     r"scf\.if at line \d+ is false there: NOT PROVEN", out)
    assert "refuted [wgmma_drain]" in out


def test_store_wait_skipped_on_the_last_tile(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, RING, mut.skip_last_tile_wait))
    assert rc == 1
    assert "runs only where i < E - 1: not at the last tile, i = E - 1" in out


def test_arrive_count_off_by_one(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, NESTED / "triton_tiles_s2.ttgir", mut.arrive_count_off_by_one))
    assert rc == 1
    assert "refuted [arrivals]" in out
    assert ("at: role mainloop, iteration 0: barrier acc slot 0, phase 0 (parity 0, count 0), trip count 1; in every "
            "tile") in out


@pytest.mark.slow
def test_arrive_count_off_by_one_in_the_ring(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, RING, mut.arrive_count_off_by_one))
    assert rc == 1
    assert "refuted [arrivals] partition0 body: arrive" in out
    assert "in the tile loop: ring iteration 0 of N = 1 = tiles x k-tiles" in out


def test_every_mutant_applies_or_says_why():
    for fname in gen.NESTED_FIXTURES:
        text = (NESTED / fname).read_text()
        for name, fn in mut.MUTANTS.items():
            try:
                assert fn(text) != text
            except ValueError as e:
                ws, ring = "_ws" in fname, fname.startswith("triton_tiles_ws")
                assert (fname == "triton_ws_store_s3.ttgir" and name in ("reset_phase_per_tile", "skip_last_tile_wait")
                        or name == "parity_from_tile_local_k" and not ring  # a ring's parity only
                        or name == "rewrite_staging_before_read" and ws), (fname, name, e)  # a wait before a write


# ---------------------------------------------------------------------------------------------
# outside the model: exit 2 with the op and its line


def test_condition_not_on_the_tile_counter_is_exit_2(tmp_path):
    text = mut.skip_last_tile_wait(RING.read_text())
    text = re.sub(r"(%synth_more = arith\.cmpi slt, %synth_next, )%num_tiles\S*", r"\1%K_2", text, count=1)
    text = re.sub(r"(%synth_more = arith\.cmpi slt, %synth_next, )%num_tiles\S*", r"\1%K_2", text)
    p = tmp_path / "cond.ttgir"
    p.write_text(text)
    rc, out, err = run_text(str(p))
    assert rc == 2
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "scf.if %synth_more" in ln)
    assert f"cond.ttgir:{line}:1: error:" in err
    assert "the condition of the scf.if around ttng.async_tma_store_wait" in err


@pytest.mark.slow
@pytest.mark.skipif(bool(gen.triton_available()), reason=gen.triton_available() or "Triton is installed")
def test_fresh_compile_gets_the_saved_inputs_verdict(tmp_path):
    """Triton 3.9 is not deterministic here: a partition's two arrives may come out in either order, so the fresh
    TTGIR is compared by its header and its verdict, not byte for byte."""
    for fname in ("triton_tiles_s3.ttgir", "triton_tiles_ws_s2.ttgir"):
        fresh = gen.triton_nested_ttgir(fname)
        saved = (NESTED / fname).read_text()
        assert fresh.splitlines()[0] == saved.splitlines()[0]
        p = tmp_path / fname
        p.write_text(fresh)
        rc, doc, _ = run_check(str(p))
        rc0, doc0, _ = run_check(str(NESTED / fname))
        assert rc == rc0 == 0
        assert doc["result"]["obligations"] == doc0["result"]["obligations"]

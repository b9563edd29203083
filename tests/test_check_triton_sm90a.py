"""``synth check`` on the sm_90a corpus: what Triton 3.9 writes for its tutorial matmuls and attention.

The saved inputs ``tests/check_inputs/triton_sm90a/`` come from ``tests/check_inputs/generate_hopper.py`` (our own
kernels after Triton's tutorials 09 and 06, and a matmul and an attention forward written in Gluon, compiled for
``GPUTarget("cuda", 90, 32)``; each file names the Triton version and the options in its first line). The tests
read them (no Triton needed): every file of the forms synth reads gets a verdict (proven, for every tile count
and k-trip count, 0 included; each Gluon hand-made bug refuted, its role, barrier and phase named); what is outside
the model exits 2 at a named op and line; each mutant of :mod:`synth.frontends.ttgir_mutants` (phase reset per
tile, parity from the tile-local k, store wait raised, fence dropped, staging rewritten before its store read
it, the last tile's wait skipped, arrive count off by one) is refuted with a counterexample. One test (slow) compiles a kernel afresh when Triton is installed.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from check_inputs import generate_hopper as gen  # noqa: E402
from check_inputs.helpers import run_check, run_text  # noqa: E402

from synth.frontends import ttgir_mutants as mut  # noqa: E402

DIR = pathlib.Path(gen.OUT_DIR)
OUTSIDE: dict = {}
"""The saved files still outside the model (none: docs/check.md, "Still outside the model", says what is)."""


def _mutant(tmp_path, name: str, fn, text: str = None) -> str:
    src = DIR / name
    p = tmp_path / f"{src.stem}_{fn.__name__}.ttgir"
    p.write_text(fn(src.read_text()) if text is None else text)
    return str(p)


def test_saved_corpus_is_the_generator_s_fixtures():
    saved = sorted(p.name for p in DIR.glob("*.ttgir"))
    assert saved == sorted(gen.FIXTURES)
    assert not set(gen.TRITON_FAILS) & set(gen.FIXTURES)
    for name in saved:
        first = (DIR / name).read_text().splitlines()[0]
        assert re.match(r"// Triton \d+\.\d+\.\d+: (gemm_persistent|gemm_tile|attn_fwd|gluon_matmul(_ws)?|"
                        r"gluon_attention(_ws)?) of "
                        r"tests/check_inputs/generate_hopper\.py for sm_90a, ", first), first
        assert 'ttg.target = "cuda:90"' in (DIR / name).read_text()
    # every option docs/check.md lists (num_stages 2-5, 4 and 8 warps, three tile shapes, ...) appears in the matrix
    opts = list(gen.FIXTURES.values())
    assert {o["stages"] for o in opts} >= {2, 3, 4, 5} and {o["warps"] for o in opts} >= {4, 8}
    assert {o["block"][:2] for o in opts if o["kind"] == "persistent"} >= {(128, 128), (128, 256), (64, 256)}
    assert any(o["kind"] == "gluon" for o in opts) and len(BUGS) == len(gen.GLUON_BUGS) + len(gen.GLUON_ATTN_BUGS)
    assert {o["ws"] for o in opts if o["kind"] == "gluon_attn" and not o["bug"]} == {True, False}
    for key in ("flatten", "subtile", "ws", "host"):
        assert {o.get(key) for o in opts if o["kind"] == "persistent"} >= {True, False}, key
    assert any(o["kind"] == "attention" and o["ws"] for o in opts)


BUGS = sorted(n for n in gen.FIXTURES if "_bug" in n)
"""Gluon's hand-made bugs (``generate_hopper.GLUON_BUGS``, ``GLUON_ATTN_BUGS``): refuted, not proven."""


@pytest.mark.parametrize("name", sorted(set(gen.FIXTURES) - set(OUTSIDE) - set(BUGS)))
def test_every_file_is_proven_for_every_tile_and_k_count(name):
    rc, doc, err = run_check(str(DIR / name))
    assert rc == 0, err + str(doc)[:3000]
    r = doc["result"]
    # every k-trip count from 0, or the one fixed in the IR (the causal attention's diagonal band: 2 steps)
    assert r["ok"] and (r["min_trip_count"] == 0 or isinstance(r["trip_count"], int)), r.get("min_trip_count")
    assert all(seg["ok"] and seg["min_trip_count"] == 0 for seg in r.get("segments", []))
    assert r["counts"]["refuted"] == r["counts"]["unknown"] == 0
    want = {"persistent": "triton-sm90-tiles", "flat": "triton-sm90-persistent", "persistent_ws":
            "triton-sm90-ws-tiles", "tile_ws": "triton-sm90-ws-store", "tile": "triton-sm90-store",
            "attn": "triton-sm90-store", "flat_ws": "triton-sm90-persistent", "attn_ws": "triton-sm90-ws-store",
            "gluon": "triton-sm90-store", "gluon_ws": "triton-sm90-ws-store", "gluon_attn": "triton-sm90-store",
            "gluon_attn_ws": "triton-sm90-ws-store"}
    prefix = max((p for p in want if name.startswith(p + "_")), key=len)
    if name == "persistent_ws_w8_s3.ttgir":  # Triton 3.9 does not partition at 8 warps: one warp group
        prefix = "persistent"
    if name == "tile_ws_w8_s3.ttgir":
        prefix = "tile"
    assert r["source"] == want[prefix], (name, r["source"])
    assert r["stores"] and all(s["ok"] for s in r["stores"])  # every file stores its result by TMA


def test_pipelines_that_overlap_are_exit_2_at_a_named_op_and_line(tmp_path):
    """The causal attention with the first loop's inval_barrier lines deleted: the second pipeline starts while
    the first one's barriers live on, which synth does not read (exit 2 at the second loop, with a fix)."""
    text = (DIR / "attn_causal_s3.ttgir").read_text()
    lines = [ln for i, ln in enumerate(text.splitlines(keepends=True), 1)
             if not (186 <= i <= 192 and "ttng.inval_barrier" in ln)]
    p = _mutant(tmp_path, "attn_causal_s3.ttgir", lambda t: t, "".join(lines))
    rc, out, err = run_text(p)
    line = next(i for i, ln in enumerate(lines, 1) if "scf.for" in ln and "%offs_m to" in ln)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert f"{p}:{line}:1: error: the pipelined loop at line {line} starts before the barriers of the loop at line 126 " \
           "are invalidated" in err and "fix:" in err


def test_warp_specialized_attention_hands_q_over_in_a_one_shot_exchange():
    rc, doc, _ = run_check(str(DIR / "attn_ws_s3.ttgir"))
    assert rc == 0
    ob = doc["result"]["tile_obligations"]
    assert sorted((o["class"], o["ok"]) for o in ob) == [("one_shot", True)] * 4  # two Q halves: full + empty each
    assert sum("the load lands before any role reads it" in o["description"] for o in ob) == 2


def test_warp_specialized_attention_q_wait_with_the_wrong_parity_is_refuted(tmp_path):
    text = (DIR / "attn_ws_s3.ttgir").read_text()
    lines = text.splitlines(keepends=True)
    assert "ttng.wait_barrier %60, %c0_i32_12" in lines[249]
    lines[249] = lines[249].replace("ttng.wait_barrier %60, %c0_i32_12", "ttng.wait_barrier %60, %c1_i32_15")
    assert "%c1_i32_15 = arith.constant 1 : i32" in "".join(lines[215:249])
    rc, doc, _ = run_check(_mutant(tmp_path, "attn_ws_s3.ttgir", lambda t: t, "".join(lines)))
    assert rc == 1
    bad = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert bad and bad[0]["detail"].startswith("parity: partition0 waits for parity") and bad[0]["line"] == 250


def test_warp_specialized_attention_producer_waiting_for_parity_0_deadlocks(tmp_path):
    text = (DIR / "attn_ws_s3.ttgir").read_text()
    bad_text = text.replace("ttng.wait_barrier %60, %c1_i32 {", "ttng.wait_barrier %60, %c0_i32 {", 1)
    assert bad_text != text
    rc, doc, _ = run_check(_mutant(tmp_path, "attn_ws_s3.ttgir", lambda t: t, bad_text))
    assert rc == 1
    bad = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert bad and bad[0]["detail"].startswith("no_deadlock: default waits on barrier") and bad[0]["line"] == 174


@pytest.mark.parametrize("name,classes", [
    ("gluon_bug1_s3.ttgir", {"slot_reuse"}),  # the refill issued before the wait for the wgmma reading the slot
    ("gluon_bug2_s3.ttgir", {"parity", "raw"}),  # the wait's parity one phase ahead
    ("gluon_bug3_s3.ttgir", {"slot_reuse"}),  # warpgroup_mma_wait(2): the refilled slot's wgmma may run on
    ("gluon_bug5_s3.ttgir", {"tx_bytes", "no_deadlock"}),  # the expect announces A's bytes only
    ("gluon_bug6_s3.ttgir", {"no_deadlock"}),  # warp-specialized: the loader's empty-barrier parity not negated
    ("gluon_bug7_s3.ttgir", {"release_after_wgmma"}),  # warp-specialized: the slot released before its wgmma ends
])
def test_gluon_hand_made_bugs_are_refuted(name, classes):
    assert re.search(r"gluon_matmul(_ws)? of .*, bug=[1-7], ws=(True|False)$", (DIR / name).read_text().splitlines()[0])
    rc, doc, _ = run_check(str(DIR / name))
    assert rc == 1
    got = {f["class"] for f in doc["result"]["failures"]}
    assert classes <= got, got


def test_gluon_missing_fence_before_its_tma_store_is_refuted():
    rc, doc, _ = run_check(str(DIR / "gluon_bug4_s3.ttgir"))
    assert rc == 1 and doc["result"]["counts"]["refuted"] == 0  # the pipeline is fine; the store is not
    s = doc["result"]["stores"][0]
    assert not s["threads"]["proxy_fence"]["ok"] and "no fence.proxy.async between" in s["threads"]["proxy_fence"]["detail"]


GLUON_ATTN = sorted(n for n in gen.FIXTURES if n.startswith("gluon_attn_") and "_bug" not in n)


@pytest.mark.parametrize("name", GLUON_ATTN)
def test_gluon_attention_loads_q_once_and_pipelines_k_and_v(name):
    """Gluon's hand-written attention: Q's barrier lives through the loop (invalidated with the ring's after it)
    and is judged as a one-shot load; K and V each through their own ring barriers; O stored by TMA."""
    rc, doc, err = run_check(str(DIR / name))
    assert rc == 0, err
    r = doc["result"]
    ob = r["tile_obligations"]
    assert [(o["class"], o["ok"]) for o in ob] == [("one_shot", True)] and "barrier q_bar" in ob[0]["description"]
    assert "lands before" in ob[0]["description"] and "before the inval" in ob[0]["description"]
    assert r["min_trip_count"] == 0 and [st["ok"] for st in r["stores"]] == [True]
    if "_ws_" in name:  # the loader partition (1 warp) and the compute in the default partition (4 warps)
        _rc, out, _ = run_text(str(DIR / name))
        assert re.search(r"roles default \(line \d+, 4 warps, 128 threads\), partition0 \(line ", out)
        assert re.search(r"partition0 \(line \d+, 1 warps, 32 threads\)", out)


def test_gluon_attention_q_barrier_invalidated_after_the_loop_still_needs_its_wait(tmp_path):
    """The one-shot reading of a barrier invalidated after the loop is not a pass for its wait: the Q wait
    deleted, the wgmma reads Q before it lands and the barrier is invalidated with the copy in flight."""
    text = (DIR / "gluon_attn_s3.ttgir").read_text()
    lines = text.splitlines(keepends=True)
    assert "ttng.wait_barrier %q_bar, %c0_i32" in lines[95] and "ttng.inval_barrier %q_bar" in lines[155]
    rc, doc, _ = run_check(_mutant(tmp_path, "gluon_attn_s3.ttgir", lambda t: t, "".join(lines[:95] + lines[96:])))
    assert rc == 1
    ob = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert ob and ob[0]["class"] == "one_shot" and ob[0]["detail"].startswith("raw: no ttng.wait_barrier observes")
    assert ob[0]["line"] == 78  # the Q copy


def _failures(name: str, cls: str) -> list:
    rc, doc, _ = run_check(str(DIR / name))
    assert rc == 1
    assert re.search(r"gluon_attention(_ws)? of .*, bug=[1-5], ws=(True|False)$",
                     (DIR / name).read_text().splitlines()[0])
    return [f for f in doc["result"]["failures"] if f["class"] == cls]


def test_gluon_attention_k_slot_released_before_its_wgmma_completes_is_refuted():
    bad = _failures("gluon_attn_bug1_s3.ttgir", "release_after_wgmma")
    assert len(bad) == 1 and bad[0]["role"] == "default" and bad[0]["text"].startswith("ttng.arrive_barrier")
    assert "arrive k_empty[i % 3]" in bad[0]["description"] and "read of k_s version i + 0" in bad[0]["description"]
    assert "barrier k_empty slot 0, phase 0" in bad[0]["at"]


def test_gluon_attention_v_wait_with_the_wrong_parity_is_refuted():
    bad = _failures("gluon_attn_bug2_s3.ttgir", "parity")
    assert len(bad) == 1 and bad[0]["line"] == 136
    assert "try_wait v_bar[i % 3] parity (i / 3 + 1) % 2" in bad[0]["description"]
    # it waits for the phase before phase 0 (parity 1 on a fresh barrier): it passes before V's copy lands
    assert "warp group mainloop body i = 0: iteration 0, barrier v_bar[0] phase -1:" in bad[0]["reason"]
    raw = _failures("gluon_attn_bug2_s3.ttgir", "raw")
    assert raw and "reads v_s version i + 0" in raw[0]["description"]  # P V's wgmma reads V before it lands


def test_gluon_attention_missing_fence_before_o_s_tma_store_is_refuted():
    rc, doc, _ = run_check(str(DIR / "gluon_attn_bug3_s3.ttgir"))
    assert rc == 1 and doc["result"]["counts"]["refuted"] == 0  # the pipeline is fine; the store is not
    s = doc["result"]["stores"][0]
    assert not s["ok"] and not s["threads"]["proxy_fence"]["ok"]
    assert "reads o_s slot i % 1 written by stage (generic proxy) with no fence.proxy.async between" in \
        s["threads"]["proxy_fence"]["detail"]


def test_gluon_attention_expect_of_too_few_bytes_is_refuted():
    bad = _failures("gluon_attn_bug4_s3.ttgir", "tx_bytes")
    got = {re.search(r"barrier (\w+)\[0\] phase 0, 4096 bytes expected, 8192 delivered", f["reason"]).group(1)
           for f in bad}
    assert got == {"k_bar", "v_bar"} and all("warp group mainloop" in f["reason"] for f in bad)
    assert {f["line"] for f in _failures("gluon_attn_bug4_s3.ttgir", "no_deadlock")} == {f["line"] for f in bad}


def test_gluon_attention_loader_phase_not_flipped_on_wrap_is_refuted():
    bad = _failures("gluon_attn_bug5_s3.ttgir", "parity")
    assert {f["role"] for f in bad} == {"partition0"}
    ats = sorted(f["at"] for f in bad)
    assert ats == [f"role partition0, iteration 3: barrier {b}_empty slot 0, phase 1 (parity 1, count 3), trip count 4"
                   for b in ("k", "v")]
    rc, out, _ = run_text(str(DIR / "gluon_attn_bug5_s3.ttgir"))
    # the explicit-state oracle at that trip count confirms it: the loader's second round waits for ever
    assert rc == 1 and "oracle at trip count 4: no_deadlock: no thread can move" in out


def test_attention_forward_reads_its_one_shot_q_load_and_a_loop_of_step_block_n():
    rc, out, _ = run_text(str(DIR / "attn_s3.ttgir"))
    assert rc == 0, out
    assert "trip count T >= 0, one warp group, its result stored by TMA: PROVEN" in out.splitlines()[0]
    assert "one_shot: proven: the one-shot TMA load through barrier qt_21 (lines 77, 78, 79, 80, 81)" in out
    assert "TMA store of mainloop: proven" in out


def test_causal_attention_s_two_loops_are_proven_one_after_the_other():
    rc, out, _ = run_text(str(DIR / "attn_causal_s3.ttgir"))
    assert rc == 0, out
    assert "the pipelined loop at line 126 (its own barriers, ended before the next loop): proven" in out
    assert "2 pipelined loops one after the other (lines 126, 234)" in out


def test_causal_attention_s_first_loop_mutant_is_refuted(tmp_path):
    """The first loop's wait on its K tile's barrier (line 135) deleted: its wgmma reads the slot before the copy
    lands, in the first of the two pipelines (raw)."""
    text = (DIR / "attn_causal_s3.ttgir").read_text()
    lines = text.splitlines(keepends=True)
    assert "ttng.wait_barrier %m_i_80, %m_i_79" in lines[134]
    del lines[134]
    rc, doc, _ = run_check(_mutant(tmp_path, "attn_causal_s3.ttgir", lambda t: t, "".join(lines)))
    assert rc == 1
    seg = doc["result"]["segments"]
    assert len(seg) == 1 and not seg[0]["ok"] and seg[0]["label"] == "the pipelined loop at line 126"
    assert any(f["class"] == "raw" for f in seg[0]["failures"]) and doc["result"]["counts"]["refuted"] == 0


def test_flattened_kernel_checks_its_stores_and_both_branches():
    rc, doc, _ = run_check(str(DIR / "flat_subtile_s3.ttgir"))
    assert rc == 0
    roles = [s["role"] for s in doc["result"]["stores"]]
    assert roles == ["mainloop", "mainloop (k_tiles <= 0)"] and all(s["subtiles"] == 2 for s in doc["result"]["stores"])


def test_warp_specialized_subtiled_epilogue_reads_its_two_staging_allocations_as_one():
    rc, out, _ = run_text(str(DIR / "persistent_ws_subtile_s3.ttgir"))
    assert rc == 0, out
    assert "staging buffers 54, 57 read as one (they may share shared memory: the stronger condition)" in out


# ---------------------------------------------------------------------------------------------
# the mutants: each refuted, with a counterexample


def test_phase_reset_per_tile_is_refuted(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, "persistent_s3.ttgir", mut.reset_phase_per_tile))
    assert rc == 1 and "phase_reset: refuted" in out
    assert re.search(r"tile 1, k-step 0, with T = 1 k-tile\(s\) per tile: role mainloop's wait on barrier \w+ slot 0", out)
    rc, out, _ = run_text(_mutant(tmp_path, "persistent_ws_s3.ttgir", mut.reset_phase_per_tile))
    assert rc == 1 and re.search(r"carry: refuted: .*\n\s+tile 1, k-step 0, with T = \d+ k-tile\(s\) per tile: "
                                 r"partition \w+ waits on barrier \w+ slot 0 with parity 0", out), out


def test_parity_from_the_tile_local_k_is_refuted(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, "persistent_ws_s3.ttgir", mut.parity_from_tile_local_k))
    assert rc == 1, out
    m = re.search(r"carry: refuted: (\w+): the k-loop's slots and phases follow the count carried across tiles\n\s+"
                  r"tile (\d), k-step (\d), with T = (\d) k-tile\(s\) per tile: partition \w+ waits on barrier (\w+) at "
                  r"line (\d+) .* with slot (\d) and parity (\d), computed from the tile-local k = \3; the ring is at "
                  r"count (\d+) = t T \+ k there, which means slot \7 and parity (\d)", out)
    assert m, out
    t, k, T, count = int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(9))
    assert count == t * T + k and m.group(8) != m.group(10)


@pytest.mark.parametrize("name", ["persistent_s3.ttgir", "flat_s3.ttgir", "attn_s3.ttgir", "tile_s3.ttgir",
                                  "persistent_ws_s3.ttgir", "tile_ws_s3.ttgir"])
def test_store_wait_pending_count_raised_is_refuted(tmp_path, name):
    rc, doc, _ = run_check(_mutant(tmp_path, name, mut.raise_store_wait))
    assert rc == 1
    bad = [s for s in doc["result"]["stores"] if not s["ok"]]
    assert bad, doc["result"]["stores"]
    s = bad[0]
    assert (any(w["status"] == "refuted" for w in s["waits"]) or not s["teardown"]["ok"]), s


@pytest.mark.parametrize("name", ["persistent_s3.ttgir", "flat_s3.ttgir", "attn_s3.ttgir", "tile_ws_s3.ttgir"])
def test_missing_fence_before_a_tma_store_is_refuted(tmp_path, name):
    rc, doc, _ = run_check(_mutant(tmp_path, name, mut.drop_store_fence))
    assert rc == 1
    s = next(s for s in doc["result"]["stores"] if not s["ok"])
    assert not s["threads"]["proxy_fence"]["ok"]
    assert "no fence.proxy.async between" in s["threads"]["proxy_fence"]["detail"]


@pytest.mark.parametrize("name", ["persistent_s3.ttgir", "flat_s3.ttgir", "persistent_host_subtile_s4.ttgir"])
def test_staging_buffer_rewritten_before_its_store_read_it_is_refuted(tmp_path, name):
    rc, doc, _ = run_check(_mutant(tmp_path, name, mut.rewrite_staging_before_read))
    assert rc == 1
    s = next(s for s in doc["result"]["stores"] if not s["ok"])
    cex = " ".join([w["counterexample"] or "" for w in s["waits"] if w["status"] == "refuted"] +
                   [f["counterexample"] or "" for f in s["failures"]])
    m = re.search(r"WAR \(slot overwritten while read\).* stage \(iteration (\d)\) overwrites \w+ slot 0 \(version "
                  r"\1\) while store2?'s read of version (\d) may still be pending", cex)
    assert m and int(m.group(2)) == int(m.group(1)) - 1, cex


def test_conditional_wait_that_skips_the_last_tile_is_refuted(tmp_path):
    rc, out, _ = run_text(_mutant(tmp_path, "persistent_s3.ttgir", mut.skip_last_tile_wait))
    assert rc == 1 and "e.g. tile 0 of 1 (the last tile)" in out and "wgmma_drain" in out
    rc, out, _ = run_text(_mutant(tmp_path, "persistent_ws_s3.ttgir", mut.skip_last_tile_wait))
    assert rc == 1 and "runs only where i < E - 1: not at the last tile, i = E - 1" in out


@pytest.mark.parametrize("name", ["persistent_ws_s3.ttgir", "tile_ws_s3.ttgir", "persistent_s3.ttgir",
                                  "flat_s3.ttgir", "attn_s3.ttgir"])
def test_arrive_count_off_by_one_is_refuted(tmp_path, name):
    rc, doc, _ = run_check(_mutant(tmp_path, name, mut.arrive_count_off_by_one))
    assert rc == 1
    fails = doc["result"]["failures"]
    assert any(f["class"] == "arrivals" for f in fails), [f["class"] for f in fails]


def test_flattened_epilogue_wait_with_one_pending_group_is_refuted(tmp_path):
    text = (DIR / "flat_s3.ttgir").read_text()
    bad = text.replace("{pendings = 0 : i32, warpGroupLocal}", "{pendings = 1 : i32, warpGroupLocal}", 1)
    assert bad != text
    rc, doc, _ = run_check(_mutant(tmp_path, "flat_s3.ttgir", lambda t: t, bad))
    assert rc == 1
    ob = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert [o["class"] for o in ob] == ["wgmma_wait"] and "the wgmma at line 169" in ob[0]["detail"]


def test_one_shot_load_without_its_wait_is_refuted(tmp_path):
    text = (DIR / "attn_s3.ttgir").read_text()
    lines = text.splitlines(keepends=True)
    assert "ttng.wait_barrier %qt_21, %c0_i32" in lines[79]
    rc, doc, _ = run_check(_mutant(tmp_path, "attn_s3.ttgir", lambda t: t, "".join(lines[:79] + lines[80:])))
    assert rc == 1
    ob = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert ob and ob[0]["class"] == "one_shot" and ob[0]["detail"].startswith("raw: no ttng.wait_barrier observes")


def test_one_shot_load_waiting_for_the_wrong_parity_is_refuted(tmp_path):
    text = (DIR / "attn_s3.ttgir").read_text()
    bad = text.replace("ttng.wait_barrier %qt_21, %c0_i32", "ttng.wait_barrier %qt_21, %c1_i32", 1)
    assert bad != text
    rc, doc, _ = run_check(_mutant(tmp_path, "attn_s3.ttgir", lambda t: t, bad))
    assert rc == 1
    ob = [o for o in doc["result"]["tile_obligations"] if not o["ok"]]
    assert ob and ob[0]["detail"].startswith("parity: ") and ob[0]["line"] == 80


# ---------------------------------------------------------------------------------------------
# a fresh compile (Triton installed)


@pytest.mark.slow
def test_fresh_compile_gets_the_saved_verdict(tmp_path):
    pytest.importorskip("triton")
    for name in ("attn_s2.ttgir", "flat_s2.ttgir", "gluon_ws_s2.ttgir", "gluon_attn_ws_s2.ttgir"):
        p = tmp_path / name
        p.write_text(gen.ttgir(name))
        rc, doc, err = run_check(str(p))
        assert rc == 0, err
        assert doc["result"]["ok"]

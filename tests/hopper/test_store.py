"""The TMA-store epilogue (docs/hopper_store.md): C through shared staging slots and TMA stores. Its store
program is proven for every sub-tile count by the prover and the independent checker; each known bug shape
is refuted by one of them, with the other agreeing, and fails the emulator when injected into kernel.cu;
the emulated kernel equals numpy for one CTA per tile and for persistent grids; the sm_90a SASS keeps the
stores (UTMASTG) without spills; a solved folder certifies and runs through synth.kernel; bad problem keys
fail cleanly."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synth.kernel
from synth.emit import sass
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import emulate_sm90
from synth.emit.sm90.kernel import emit_sm90_kernel
from synth.hopper.store import STORE_MUTANTS, THREAD_CLASSES, store_mutant
from synth.lower.hopper_store import store_program
from synth.verify.hopper_store import check_threads
from synth.program import dumps, program_to_json
from synth.trusted.flags import FlagError, read_epilogue_flag
from synth.trusted.store import check_store_threads
from synth.verify import verify_program
from synth.lower.hopper_design import design_program
from synth.lower.hopper_design import design_store_program

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")
CFG = KernelDesign.of(bm=128, bn=128, stages=3, epilogue="tma_store")
EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"

# which check refutes each bug: the prover's war obligations or one thread class (the others hold)
REFUTED_BY = {"rewrite_before_read": "prover", "no_wait": "prover", "proxy_fence_missing": "proxy_fence",
              "publish_barrier_missing": "proxy_fence", "free_barrier_missing": "converge", "no_drain": "teardown"}


def _trusted(p):
    return {k: ok for k, (ok, _) in check_store_threads(json.dumps(program_to_json(p)).encode()).items()}


@pytest.mark.parametrize("staging", [1, 2, 3, 4])
def test_store_program_is_proven_and_tight(staging):
    p = store_program(staging)
    r = verify_program(p, time_limit=10)
    assert r.ok, r.render()
    assert "async_wait_queue(0, %d) before free: proven, tight" % (staging - 1) in r.render()
    assert all(t.ok for t in check_threads(p)) and all(_trusted(p).values())
    # one more store in flight is a write-after-read race: the count is the largest correct one
    assert not verify_program(store_program(staging, wait=staging), time_limit=10).ok


@pytest.mark.parametrize("name", sorted(STORE_MUTANTS))
def test_each_bug_is_refuted_and_the_checkers_agree(name):
    m = store_mutant(store_program(2), name)
    report = verify_program(m, time_limit=10)
    mine = {t.cls: t for t in check_threads(m)}
    trusted = _trusted(m)
    assert {c: t.ok for c, t in mine.items()} == trusted  # the independent checker says the same
    if REFUTED_BY[name] == "prover":
        assert not report.ok and "WAR" in report.render() and all(trusted.values())
    else:
        assert report.ok and not trusted[REFUTED_BY[name]] and mine[REFUTED_BY[name]].detail
        assert [c for c in THREAD_CLASSES if not trusted[c]] == [REFUTED_BY[name]]


def _shuffled(p, data):
    """A store program whose body is a permutation of a subset of the original's, some statements guarded."""
    from dataclasses import replace
    from synth.expr import parse

    body = p.part("body")
    keep = data.draw(st.lists(st.sampled_from(range(len(body.stmts))), unique=True, min_size=1))
    stmts = [body.stmts[k] for k in keep]
    guard = data.draw(st.sets(st.sampled_from(range(len(stmts)))))
    stmts = [replace(s, guard=parse("i >= 1")) if k in guard else s for k, s in enumerate(stmts)]
    return replace(p, parts=(replace(body, stmts=tuple(stmts)), *p.parts[1:]))


@settings(max_examples=300 if EXPLORE else 40, deadline=None)
@given(st.data())
def test_thread_classes_agree_on_reordered_programs(data):
    # synth's positional check and the trusted checker's two-thread knowledge sets, on any reordering that the
    # trusted reader accepts: the same verdict per class
    from synth.trusted.program import InputError

    p = _shuffled(store_program(data.draw(st.integers(1, 3))), data).with_befores()
    try:
        trusted = _trusted(p)
    except InputError:
        return  # not a program (a commit before its op, a wait with no statement...)
    assert {t.cls: t.ok for t in check_threads(p)} == trusted


@needs_gxx
@pytest.mark.parametrize("cfg,M,N,K,ctas,order", [
    (CFG, 128, 128, 64, 0, "forward"),                    # one tile, one k-tile
    (CFG, 200, 260, 136, 0, "random"),                    # M, N off the tile grid (stores clipped), K below stages x BK
    (KernelDesign.of(bm=64, bn=48, stages=2, epilogue="tma_store", staging=1), 70, 52, 200, 0, "reverse"),  # 16 columns
    (KernelDesign.of(bm=128, bn=64, stages=3, epilogue="tma_store", persistent=True), 300, 200, 200, 5, "random"),
    (KernelDesign.of(bm=128, bn=64, stages=3, epilogue="tma_store", persistent=True, staging=3), 300, 200, 64, 1, "forward"),
])
def test_emulated_kernel_matches_numpy(cfg, M, N, K, ctas, order):
    r = emulate_sm90(emit_sm90_kernel(cfg), M, N, K, ctas=ctas, order=order, with_c=True, alpha=0.5, beta=-1.5)
    assert r.ok, r.summary()
    assert r.max_abs_err < 1e-4 and r.nan_count == 0


def _mutant_fails(name, order):
    src = emit_sm90_kernel(CFG, store=store_mutant(design_store_program(CFG), name))
    return emulate_sm90(src, 200, 260, 136, order=order, with_c=True, beta=0.5)


@needs_gxx
def test_a_slot_rewritten_before_its_store_read_it_fails_the_emulator():
    r = _mutant_fails("rewrite_before_read", "forward")
    assert not r.ok and r.kind == "race"


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STORE_MUTANTS))
def test_every_injected_bug_fails_the_emulator(name):
    results = [_mutant_fails(name, order) for order in ("random",)]  # forward misses the publish barrier
    assert any(not r.ok for r in results), name
    assert all(r.kind in ("", "race", "protocol") for r in results)


@pytest.mark.skipif(sass.tool("cuobjdump") is None or sass.tool("nvcc") is None, reason="nvcc and cuobjdump needed")
def test_sass_keeps_the_tma_stores():
    for cfg in (CFG, KernelDesign.of(bm=128, bn=128, stages=4, epilogue="tma_store", persistent=True)):
        c = sass.compile_cuda(emit_sm90_kernel(cfg), arch="sm_90a")
        assert c.sass.count("UTMASTG") == cfg.bn // cfg.store_cols  # one per sub-tile, unrolled
        assert c.spill_loads == 0 and c.spill_stores == 0
        assert "FENCE.VIEW.ASYNC.S" in c.sass and "LDGSTS" not in c.sass


def test_problem_key_and_refusals(tmp_path):
    base = ("name: g\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 128, BN: 128, BK: 64}\n"
            "arch: sm_90\nmainloop: tma_wgmma\n")
    cases = {"epilogue: smem\n": "epilogue 'smem'", "epilogue: tma_store\nsplit_k: 2\n": "split_k = 2",
             "epilogue: [1]\n": "epilogue"}
    for extra, want in cases.items():
        f = tmp_path / "p.yaml"
        f.write_text(base + extra)
        r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "--out", str(tmp_path / "o")],
                           capture_output=True, text=True)
        assert r.returncode == 2 and want in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "o").exists()
    f.write_text(base.replace("N: 256", "N: 258") + "epilogue: tma_store\n")
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "multiple of 16" in r.stderr
    f.write_text(base.replace("mainloop: tma_wgmma", "mainloop: cp_async").replace("sm_90", "sm_80")
                 + "epilogue: tma_store\n")
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Hopper main loop only" in r.stderr


def test_epilogue_flag_reader():
    assert read_epilogue_flag(b"name: x\nepilogue: tma_store  # stores\n") == "tma_store"
    assert read_epilogue_flag(b"name: x\n") == "register"
    assert read_epilogue_flag(b"{name: x, d: 'y #', epilogue: tma_store}\n") == "tma_store"  # read as YAML reads it
    for bad in (b"epilogue: tma_store\nepilogue: register\n", b"{epilogue: !!str tma_store}\n", b"  epilogue: x\n",
                b"epilogue: smem\n"):
        with pytest.raises(FlagError):
            read_epilogue_flag(bad)


@needs_gxx
def test_solved_folder_certifies_and_runs(tmp_path):
    prob = tmp_path / "p.yaml"
    prob.write_text("name: gs\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 128, BN: 64, BK: 64}\n"
                    "arch: sm_90\nmainloop: tma_wgmma\nepilogue: tma_store\nstages: 3\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(prob), "--out", str(out)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert (out / "store" / "program.json").read_text() == dumps(
        design_store_program(KernelDesign.of(bm=128, bn=64, stages=3, epilogue="tma_store", name="gs")))
    text = (out / "verify.txt").read_text()
    assert "TMA-store epilogue" in text and "teardown: proven" in text and "proxy_fence: proven" in text
    r = subprocess.run([sys.executable, "-m", "synth", "certify", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "TMA-store epilogue: certificate OK" in r.stdout, r.stdout + r.stderr
    kern = synth.kernel.load(str(out))
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (150, 136)).astype(np.float16)
    B = rng.uniform(-1, 1, (92, 136)).astype(np.float16)
    C = kern(A, B)
    assert np.abs(C - A.astype(np.float32) @ B.astype(np.float32).T).max() < 1e-3
    assert kern.last_info["stores"] > 0 and kern.last_info["c_tma"]
    # N = 90: C's rows are 360 bytes, not a multiple of 16: no TMA store, that launch stores C from registers
    B90 = rng.uniform(-1, 1, (90, 136)).astype(np.float16)
    assert np.abs(kern(A, B90) - A.astype(np.float32) @ B90.astype(np.float32).T).max() < 1e-3
    assert kern.last_info["stores"] == 0 and not kern.last_info["c_tma"]
    # synth verify OUT proves the store program again, with its thread classes
    r = subprocess.run([sys.executable, "-m", "synth", "verify", str(out), "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["result"]["parts"] == {"store": {"ok": True}}, r.stderr
    # the store program's certificate is bound to its bytes: an edited store/program.json fails certify, and
    # its one-too-many store in flight fails verify
    sp = out / "store" / "program.json"
    doc = json.loads(sp.read_text())
    doc["waits"][0]["in_flight"] = 2
    sp.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "synth", "certify", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "TMA-store epilogue" in r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "synth", "verify", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "store/program.json: NOT PROVEN" in r.stdout and "Traceback" not in r.stderr


@needs_gxx
@pytest.mark.parametrize("out_dtype", ["f16", "bf16"])
def test_c_stored_as_f16_or_bf16(out_dtype):
    # the TMA store writes C in the output type: every value is one of that type, within its rounding of numpy's
    from synth.emit.sm90.runner import round_out

    cfg = KernelDesign.of(bm=128, bn=64, stages=3, epilogue="tma_store", out_dtype=out_dtype, persistent=True)
    r = emulate_sm90(emit_sm90_kernel(cfg), 200, 136, 136, with_c=True, beta=0.5, ctas=2, order="random")
    assert r.ok, r.summary()
    C = r.C[:, :136].astype(np.float32)
    assert np.array_equal(C, round_out(C, out_dtype))  # representable: stored as out_dtype, not as f32
    ulp = 2.0 ** -10 if out_dtype == "f16" else 2.0 ** -7
    assert np.all(np.abs(C - r.ref) <= 2 * ulp * np.abs(r.ref) + 1e-3)


def test_out_dtype_key(tmp_path):
    base = ("name: g\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 128, BN: 128, BK: 64}\n"
            "arch: sm_90\nmainloop: tma_wgmma\n")
    cases = {"out_dtype: f16\n": "TMA-store epilogue only", "out_dtype: f8\nepilogue: tma_store\n": "expected one of",
             "out_dtype: bf16\nepilogue: tma_store\n": None}
    for extra, want in cases.items():
        f = tmp_path / "p.yaml"
        text = base + extra
        f.write_text(text)
        r = subprocess.run([sys.executable, "-m", "synth", "lower", str(f)], capture_output=True, text=True)
        if want is None:
            assert r.returncode == 2 and "stages" in r.stderr  # well-formed: lower asks for pinned stages
        else:
            assert r.returncode == 2 and want in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)
    f.write_text(base.replace("N: 256", "N: 260") + "out_dtype: f16\nepilogue: tma_store\n")
    r = subprocess.run([sys.executable, "-m", "synth", "lower", str(f)], capture_output=True, text=True)
    assert r.returncode == 2 and "multiple of 8" in r.stderr


def test_the_timeline_draws_the_stores_under_the_next_main_loop():
    from synth.emit.timeline_hopper import simulate
    from synth.emit.timeline_pingpong import pingpong_view

    view = pingpong_view(design_program(KernelDesign.of(bm=128, bn=128, stages=4, persistent=True)), kt=3, tiles=4,
                         pingpong=False, tma_store=True)
    _, events = simulate(view, 12)
    assert not [e for e in events if e.kind in ("violation", "hang")]
    stores = sorted((e for e in events if e.kind == "store" and e.lane == "consumer 0"), key=lambda e: e.start)
    groups = {e.iteration: e for e in events if e.kind == "wgmma" and e.lane == "consumer 0"}
    assert len(stores) == 4
    # tile 0's TMA store runs while the same warp group computes tile 1 (k-tiles 3..5): it does not wait for it
    assert stores[0].start < groups[3].end and stores[0].end > groups[4].active_from

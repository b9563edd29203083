"""A TMA-store kernel takes any N (docs/hopper_store.md, "C not TMA-aligned"): when C's base or
row stride is not a multiple of 16 bytes (f32 C with N = 137 or 133, f16 C with an odd N), the host encodes no C
tensor map (cuTensorMapEncodeTiled refuses it) and every consumer of that launch stores C from registers (the
register epilogue, bounds-checked), which the kernel decides from C and ldc (``synth_c_tma``). Here each design's
TMA-store kernel runs on the emulator at the small shapes benchmarks/gpu_check.py runs on a GPU (its own
``shapes_for``: two of them off the 16-byte grid, two on it), both paths matching numpy, and the path taken is the
one the launch's alignment says (TMA stores completed or none). Before, the runtime refused such an N (the full
pack's emulator check reported the persistent TMA-store folder WRONG at 2 of 4 shapes; CI runs the reduced pack,
which holds no TMA-store folder). The configurations are other tests' where they can be, so the emulator binaries
compiled for those are reused."""

from __future__ import annotations

import importlib.util
import os
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import emulate_sm90, run_emulated
from synth.emit.sm90.kernel import emit_sm90_kernel
from synth.emit.sm90.runner import c_tma_aligned, round_out

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ (C++20) needed for the emulator")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check_shapes", os.path.join(REPO, "benchmarks", "gpu_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TS = dict(epilogue="tma_store")
DESIGNS = {  # every design with the TMA-store epilogue (ping-pong has no cluster), each once
    "one-tile": KernelDesign.of(bm=128, bn=128, stages=3, **TS),  # tests/hopper/test_store.py's CFG: N = 137, 133
    "persistent": KernelDesign.of(bm=128, bn=64, stages=3, persistent=True, **TS),
    "persistent-f16": KernelDesign.of(bm=128, bn=64, stages=3, persistent=True, out_dtype="f16", **TS),
    "pingpong": KernelDesign.of(bm=64, bn=128, stages=4, k_pipe_mmas=2, persistent=True, pingpong=True, **TS),
    "persistent-cluster2x1": KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=2, cluster="2x1", persistent=True, **TS),
}
SLOW_DESIGNS = {
    "cluster2x1": KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1", **TS),
    "persistent-cluster1x2-bf16": KernelDesign.of(bm=64, bn=128, stages=2, k_pipe_mmas=1, cluster="1x2", persistent=True,
                                             out_dtype="bf16", **TS),
    "pingpong-128rows": KernelDesign.of(bm=128, bn=64, stages=3, persistent=True, pingpong=True, **TS),  # 2 row blocks
}


def _check(cfg: KernelDesign, M: int, N: int, K: int, seed: int = 0):
    r = emulate_sm90(emit_sm90_kernel(cfg), M, N, K, with_c=True, alpha=0.5, beta=-1.5, seed=seed, order="random",
                     ctas=2 * cfg.cluster_size if cfg.persistent else 0)
    assert r.ok, (M, N, K, r.summary())
    aligned = (N * cfg.out_bytes) % 16 == 0
    assert r.stats["c_tma"] == aligned and (r.stats["stores"] > 0) == aligned, (N, r.stats)
    if cfg.out_dtype != "f32":  # stored as out_dtype on either path (TMA from the staging slot, or st.global)
        C = r.C[:, :N].astype(np.float32)
        assert np.array_equal(C, round_out(C, cfg.out_dtype))
    return r


def _run_design(cfg: KernelDesign) -> None:
    shapes = _gpu_check().shapes_for(SimpleNamespace(config=cfg), "sm_90a", 132, emulator=True)
    widths = [N for _, _, N, _ in shapes]
    assert any((N * cfg.out_bytes) % 16 for N in widths) and any((N * cfg.out_bytes) % 16 == 0 for N in widths)
    for k, (_, M, N, K) in enumerate(shapes):
        _check(cfg, M, N, K, seed=k)


@needs_gxx
@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_each_tma_store_design_computes_c_at_gpu_check_s_shapes(name):
    _run_design(DESIGNS[name])


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_DESIGNS))
def test_the_other_tma_store_designs_compute_c_at_gpu_check_s_shapes(name):
    _run_design(SLOW_DESIGNS[name])


@needs_gxx
@pytest.mark.parametrize("N", [137, 133, 132, 8])
def test_f16_c_of_any_row_width(N):
    # f16 C: odd N, and even N whose row is not 16 bytes (132: 264 bytes); N = 8 is one 16-byte row (TMA)
    _check(DESIGNS["persistent-f16"], 130, N, 72)


@needs_gxx
def test_a_padded_c_takes_the_path_of_its_own_stride():
    # N = 137 inside a C of row stride 140 floats (560 bytes): TMA-aligned, so the TMA stores write it, clipped
    # at N; the padding columns stay untouched (NaN)
    cfg = DESIGNS["persistent"]
    r = emulate_sm90(emit_sm90_kernel(cfg), 150, 137, 136, ldc=140, with_c=True, beta=0.5, ctas=3)
    assert r.ok and r.stats["c_tma"] and r.stats["stores"] > 0, r.summary()
    # and the other way: N = 128 in rows of 130 floats (520 bytes): register stores
    r = emulate_sm90(emit_sm90_kernel(cfg), 150, 128, 136, ldc=130, with_c=True, beta=0.5, ctas=3)
    assert r.ok and not r.stats["c_tma"] and r.stats["stores"] == 0, r.summary()


def test_the_host_s_rule_is_the_kernel_s():
    # the runner encodes C's map only where the kernel's synth_c_tma takes the TMA path: base and row stride
    # multiples of 16 bytes
    assert c_tma_aligned(0x1000, 136, 4) and c_tma_aligned(0x1000, 8, 2)
    assert not c_tma_aligned(0x1000, 137, 4) and not c_tma_aligned(0x1000, 133, 4)
    assert not c_tma_aligned(0x1000, 132, 2) and not c_tma_aligned(0x1008, 136, 4)
    src = emit_sm90_kernel(DESIGNS["persistent"])
    assert "reinterpret_cast<uintptr_t>(C) | ((uintptr_t)(unsigned)ldc * 4u)) & 15) == 0" in src
    assert src.count("if (synth_c_tma(C, ldc))") == 1
    # a 128-row ping-pong tile: each of its two 64-row blocks
    pp = KernelDesign.of(bm=128, bn=64, stages=3, persistent=True, pingpong=True, **TS)
    assert emit_sm90_kernel(pp).count("if (synth_c_tma(C, ldc))") == 2
    f16 = emit_sm90_kernel(DESIGNS["persistent-f16"])
    assert "(unsigned)ldc * 2u" in f16 and "synth_st_global_f16(out + e" in f16
    # the register epilogue kernel has neither
    assert "synth_c_tma" not in emit_sm90_kernel(KernelDesign.of(bm=128, bn=64, stages=3, persistent=True))


@needs_gxx
def test_a_kernel_without_the_fallback_faults_on_the_emulator():
    # the TMA path forced for every launch (the kernel before the fallback): the harness passes a zeroed C map
    # for an unaligned C, as the host does, and the emulator's TMA store refuses it
    src = emit_sm90_kernel(DESIGNS["persistent"]).replace("if (synth_c_tma(C, ldc))", "if (true)")
    rng = np.random.default_rng(0)
    A = rng.integers(0, 1 << 14, (100, 64)).astype(np.uint16)
    B = rng.integers(0, 1 << 14, (137, 64)).astype(np.uint16)
    _, info = run_emulated(src, A, B, ctas=1)
    assert not info["ok"] and info["kind"] == "fault" and "did not encode" in info["message"], info

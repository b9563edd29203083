"""The fused ReLU epilogue of the Hopper GEMM (``activation: relu``): ``C = max(alpha A B^T + beta C_in, 0)`` at
the value stored, on both store paths (register; TMA store with its unaligned register fallback) and after split-K's
reduction, checked against numpy on the sm_90a emulator with negative values present (docs/hopper_kernel.md,
"Activation"). It changes no synchronization: ``activation: none`` emits the same text byte for byte
(tests/hopper/test_emit_identity.py), and nothing proven changes.
"""

from __future__ import annotations

import numpy as np
import pytest

import synth.kernel
from conftest import synth_cli
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import emulate_sm90
from synth.emit.sm90.kernel import emit_sm90_kernel

ALPHA, BETA = 0.75, -1.25


def _relu_run(cfg: KernelDesign, M: int, N: int, K: int, **kw):
    """The emulator's run of ``cfg`` with ReLU, with C_in, against numpy's ``max(alpha A B^T + beta C_in, 0)``."""
    r = emulate_sm90(emit_sm90_kernel(cfg), M, N, K, with_c=True, alpha=ALPHA, beta=BETA, activation="relu", **kw)
    assert r.ok, r.summary()
    C = r.C[:, :N]
    zeros = float((C == 0).mean())
    assert 0.2 < zeros < 0.8, f"{zeros:.2f} of C clamped: the data must hold negative values for ReLU to show"
    assert float(C.min()) == 0.0
    return r


def test_none_is_the_default_text_and_relu_wraps_only_the_final_writes():
    """``activation: none`` is the default design (the identity golden holds its text); ``relu`` adds ``fmaxf`` at
    C's writes and never to a split-K partial (the workspace store)."""
    for kw in ({}, {"epilogue": "tma_store"}, {"split_k": 2}, {"persistent": True, "pingpong": True, "bm": 64}):
        base = KernelDesign.of(bm=kw.pop("bm", 128), bn=64, stages=3, **kw)
        assert emit_sm90_kernel(base) == emit_sm90_kernel(base.with_(activation="none"))
        relu = emit_sm90_kernel(base.with_(activation="relu"))
        assert "fmaxf" not in emit_sm90_kernel(base) and "fmaxf" in relu
        if base.split_k > 1:
            partial = [ln for ln in relu.splitlines() if "ws_tile + (size_t)split" in ln]
            assert partial and not any("fmaxf" in ln for ln in partial)
    with pytest.raises(ValueError, match="activation 'gelu'"):
        KernelDesign.of(activation="gelu").check()


def test_register_epilogue_relu_odd_and_aligned_n():
    """Register stores: N = 137 (per-element edge stores) and N = 136 (128-bit stores), alpha and beta != 0."""
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, activation="relu")
    for N in (137, 136):
        _relu_run(cfg, 70, N, 128)


def test_tma_store_persistent_cluster_relu_fallback_and_aligned():
    """A persistent 2x1 cluster with the TMA-store epilogue: N = 137 (C not TMA-aligned: the register fallback) and
    N = 128 (the store program's staged sub-tiles)."""
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, epilogue="tma_store", persistent=True, cluster="2x1",
                     activation="relu")
    fallback = _relu_run(cfg, 130, 137, 128, ctas=2)
    assert not fallback.stats["c_tma"]
    staged = _relu_run(cfg, 130, 128, 128, ctas=2)
    assert staged.stats["c_tma"]


def _problem(tmp_path, name: str, extra: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nkind: gemm\nshape: {{M: 96, N: 137, K: 256}}\narch: sm_90\n"
                    f"tile: {{BM: 64, BN: 64, BK: 64}}\nstages: 2\n{extra}")
    return str(path)


def test_split_k_relu_folder_through_synth_kernel_load(tmp_path):
    """``synth solve`` of a split-K 2 problem with ``activation: relu``: the folder's problem.yaml keeps the key,
    ``synth.kernel.load`` runs it (emulator) and C is ReLU of the reduced sum, also for K = 0."""
    out = tmp_path / "out"
    r = synth_cli("solve", _problem(tmp_path, "relu_splitk", "split_k: 2\nactivation: relu\n"), "-o", out)
    assert r.returncode == 0, r.stderr
    assert "activation: relu" in (out / "problem.yaml").read_text()
    k = synth.kernel.load(str(out), backend="emulator")
    assert k.config.activation == "relu" and k.config.split_k == 2 and "activation relu" in repr(k)
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (96, 256)).astype(np.float16)
    B = rng.uniform(-1, 1, (137, 256)).astype(np.float16)
    C = rng.uniform(-1, 1, (96, 137)).astype(np.float32)
    got = k(A, B, C, alpha=ALPHA, beta=BETA)
    ref = np.maximum(ALPHA * (A.astype(np.float64) @ B.astype(np.float64).T) + BETA * C, 0.0)
    assert np.allclose(got, ref, atol=1e-2, rtol=1e-2) and 0.2 < float((got == 0).mean()) < 0.8
    zero = k(A[:, :0], B[:, :0], C, alpha=ALPHA, beta=BETA)
    assert np.array_equal(zero, np.maximum(np.float32(BETA) * C, 0))


def test_bad_activation_refused_at_its_line(tmp_path):
    """``activation: gelu`` (exit 2 at its line); ``activation: relu`` on the cp.async kernel (exit 2, naming the
    file that would take it)."""
    r = synth_cli("solve", _problem(tmp_path, "gelu", "activation: gelu\n"), "-o", tmp_path / "o1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "gelu.yaml:7:" in r.stderr and "activation 'gelu'" in r.stderr and "fix:" in r.stderr
    sm80 = tmp_path / "a80.yaml"
    sm80.write_text("name: a80\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\narch: sm_80\n"
                    "tile: {BM: 128, BN: 128, BK: 32}\nactivation: relu\n")
    r = synth_cli("solve", sm80, "-o", tmp_path / "o2")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "a80.yaml:6:" in r.stderr and "synth/emit/cuda.py" in r.stderr and "fix:" in r.stderr

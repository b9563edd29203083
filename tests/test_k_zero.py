"""K = 0 through synth.kernel: an empty product is legal and gives ``alpha * 0 + beta * C`` (zeros without C).

The host computes it and launches nothing, on every backend (emulator, CUDA Python) and for every kernel
(sm_80 plain, split-K, stream-K; Hopper plain, split-K, persistent). kernel.cu called directly with K = 0
refuses it: the sm_80 kernel writes ``SYNTH_ERR_K`` to ``*status`` and leaves C untouched.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_fixtures import NEEDS_GXX

import synth.kernel
from synth.emit.sm90 import runner

SMALL = ("name: small\nkind: gemm\nshape: {M: 70, N: 90, K: 200}\ntile: {BM: 64, BN: 64, BK: 32}\n"
         "warps: 4\nstages: 3\narch: sm_80\n")
HOPPER = ("name: hop\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 128, BN: 64, BK: 64}\n"
          "arch: sm_90\nmainloop: tma_wgmma\nstages: 2\nk_pipe_mmas: 1\n")
KINDS = {"plain": SMALL, "split": SMALL + "split_k: 2\n", "stream": SMALL + "stream_k: true\n",
         "hopper": HOPPER, "hopper_split": HOPPER + "split_k: 2\n", "hopper_persistent": HOPPER + "persistent: true\n"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from synth.api import solve

    out = {}
    for kind, doc in KINDS.items():
        d = tmp_path_factory.mktemp(kind)
        (d / "p.yaml").write_text(doc)
        solve(str(d / "p.yaml"), out=str(d / "out"), time_limit=120, verify=False)  # the proof is not under test
        out[kind] = str(d / "out")
    return out


def _empty(M, N):
    return np.zeros((M, 0), np.float16), np.zeros((N, 0), np.float16)


@pytest.mark.parametrize("kind", list(KINDS))
def test_k_zero_is_beta_c_on_the_emulator(folders, kind):
    kern = synth.kernel.load(folders[kind], backend="emulator")
    A, B = _empty(70, 90)
    C = kern(A, B)
    assert C.shape == (70, 90) and C.dtype == np.float32 and not C.any()
    Cin = np.random.default_rng(1).uniform(-4, 4, (70, 90)).astype(np.float32)
    Cin_copy = Cin.copy()
    got = kern(A, B, Cin, alpha=3.0, beta=-0.5)
    assert np.array_equal(got, np.float32(-0.5) * Cin) and np.array_equal(Cin, Cin_copy)
    assert np.array_equal(kern(A, B, Cin, alpha=2.0, beta=0.0), np.zeros((70, 90), np.float32))
    # the same checks as any K: beta without C, a C of the wrong shape, B with another K
    with pytest.raises(synth.kernel.KernelError, match="beta = 1.0 needs C"):
        kern(A, B, beta=1.0)
    with pytest.raises(synth.kernel.KernelError, match="C must be an 70 x 90"):
        kern(A, B, Cin[:, :89], beta=1.0)
    with pytest.raises(synth.kernel.KernelError, match="B must be N x K"):
        kern(A, np.zeros((90, 8), np.float16))
    if kind == "hopper_persistent":
        assert np.array_equal(kern(A, B, Cin, beta=2.0, ctas=3), np.float32(2.0) * Cin)
        with pytest.raises(synth.kernel.KernelError, match="ctas"):
            kern(A, B, ctas=0)
    with pytest.raises(synth.kernel.KernelError, match="K = 0"):
        kern.prepare(A, B)  # no launch to prepare or time


@NEEDS_GXX
@pytest.mark.parametrize("kind", ["plain", "split", "stream", "hopper", "hopper_split"])
def test_k_zero_launches_nothing_through_cuda_python(folders, kind, monkeypatch):
    from test_run import FakeDriver

    drv = FakeDriver(open(f"{folders[kind]}/kernel.cu").read())
    monkeypatch.setattr(runner, "driver", lambda: drv)
    monkeypatch.setenv("SYNTH_GPU_BACKEND", "cuda-python")
    kern = synth.kernel.load(folders[kind], backend="cuda", images=[("cubin", b"CUBIN")])
    assert kern.backend == "cuda"
    A, B = _empty(70, 90)
    Cin = np.random.default_rng(2).uniform(-1, 1, (70, 90)).astype(np.float32)
    assert np.array_equal(kern(A, B, Cin, beta=0.25), np.float32(0.25) * Cin)
    assert not drv.launches and not drv.loaded and not drv.mem  # nothing loaded, allocated or launched


@NEEDS_GXX
@pytest.mark.parametrize("kind", ["plain", "stream"])
def test_kernel_cu_called_with_k_zero_refuses_it(folders, kind):
    # the kernel's own precondition: K >= 1, a multiple of 8; K = 0 writes SYNTH_ERR_K and leaves C untouched
    from synth.emit.cuda import STATUS_CODES
    from synth.emit.emulate import GEMM_KERNEL, Buf, compile_and_run

    kern = synth.kernel.load(folders[kind], backend="emulator")
    M, N, ldc = 70, 90, 92
    out = np.full((M, ldc), np.nan, np.float32)
    status = np.zeros(1, np.int32)
    launch = kern.facts.launch(M, N, 8, 4)
    extra = launch.buffers(lambda n: Buf("workspace", np.full(n, np.nan, np.float32)),
                           lambda n: Buf("tickets", np.zeros(n, np.uint32)))
    A, B = np.zeros((M, 8), np.float16), np.zeros((N, 8), np.float16)
    params = launch.params(Buf("A", A), Buf("B", B), Buf("C", out, out=True), None, M, N, 0, ldc, 1.0, 0.0,
                           extra, Buf("status", status, out=True), lda=8, ldb=8)
    run = compile_and_run(kern.source, GEMM_KERNEL, [p.value for p in params], grid=launch.grid,
                          block=launch.block, smem_bytes=launch.smem_bytes)
    assert not run.errors
    err_k = next(code for code, (name, _) in STATUS_CODES.items() if name == "SYNTH_ERR_K")
    assert int(run.outputs["status"][0]) & err_k
    assert np.isnan(run.outputs["C"]).all()  # nothing written


@NEEDS_GXX
@pytest.mark.parametrize("kind", ["hopper", "hopper_split", "hopper_persistent"])
def test_hopper_kernel_cu_called_with_k_zero_writes_nothing(folders, kind):
    # the sm_90a kernel's own guard: K < 1 returns before any barrier, copy or store (no hang, C untouched)
    from synth.emit.sm90.emulate import run_emulated

    src = open(f"{folders[kind]}/kernel.cu").read()
    C, info = run_emulated(src, np.zeros((70, 0), np.uint16), np.zeros((90, 0), np.uint16), None,
                           ctas=3 if kind == "hopper_persistent" else 0)
    assert info["ok"] and not info["kind"] and info["landed"] == 0 and info["wgmma"] == 0
    assert np.isnan(C).all()  # C starts as NaN: nothing written


@pytest.mark.parametrize("kind", ["split", "hopper_split"])
def test_a_refused_k_says_k_zero_is_taken(folders, kind):
    kern = synth.kernel.load(folders[kind], backend="emulator")
    A, B = np.zeros((70, 8), np.float16), np.zeros((90, 8), np.float16)  # one k-tile for two splits
    with pytest.raises(synth.kernel.KernelError) as e:
        kern(A, B)
    assert "K = 8" in e.value.msg and "empty product" in e.value.msg + e.value.fix  # the range names K = 0

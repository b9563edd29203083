"""The sm_90a GEMM (synth.emit.sm90) on the CPU emulator: equal to numpy at many shapes, and each
Hopper bug shape of docs/hopper.md ("Known bug shapes") injected into the proven program (synth.hopper.mutants) and emitted makes
the kernel give a wrong result or a reported hang."""

import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synth.hopper.kernel_design import KernelDesign
from synth.emit.emulate import EmulatorError
from synth.emit.sm90.emulate import emulate_sm90
from synth.emit.sm90.kernel import emit_sm90_kernel
from synth.hopper.mutants import mutants
from synth.lower.hopper_design import design_program

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")

CFG = KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=1)
PRED = KernelDesign.of(bm=64, bn=64, stages=4, k_pipe_mmas=2, load_when="k < T - 1")


@pytest.mark.parametrize("M,N,K,order,with_c", [
    (100, 72, 64, "forward", False),     # one k-tile: T < stages
    (128, 64, 136, "reverse", True),     # T = 3 = stages, K off the tile (TMA zero fill)
    (200, 136, 448, "forward", True),    # T = 7 > stages, M and N off the tile grid
    (33, 17, 40, "reverse", False),      # odd N: the scalar edge of the 128-bit epilogue
    (150, 80, 520, "random", True),      # a random thread at every switch (seeded)
    (128 * 9 + 3, 72, 64, "forward", False),  # 10 x 2 tiles: two bands of the grouped rasterization
])
def test_matches_numpy(M, N, K, order, with_c):
    r = emulate_sm90(emit_sm90_kernel(CFG), M, N, K, order=order, with_c=with_c, alpha=0.5, beta=-1.5)
    assert r.ok, r.summary()
    assert r.kind == "" and r.nan_count == 0 and r.max_abs_err < 1e-4
    assert r.stats["poisoned_ops"] == 0 and r.stats["waw"] == 0


def test_k_not_a_multiple_of_8_is_refused():
    with pytest.raises(EmulatorError, match="multiple of 16"):
        emulate_sm90(emit_sm90_kernel(CFG), 64, 64, 100)


def test_ldc_padding_untouched_and_predicated_ktiles():
    r = emulate_sm90(emit_sm90_kernel(CFG), 70, 64, 200, ldc=68)
    assert r.ok, r.summary()
    assert np.isnan(r.C[:, 64:]).all()
    src = emit_sm90_kernel(PRED)
    for K in (64, 296):  # one k-tile (predicated off: C = 0) and 5
        r = emulate_sm90(src, 64, 64, K, load_when=PRED.load_when)
        assert r.ok, (K, r.summary())


@pytest.mark.slow
def test_one_consumer_n256_and_two_consumers_k_pipe_2():
    for cfg, (M, N, K) in ((KernelDesign.of(bm=64, bn=256, stages=3, k_pipe_mmas=1), (70, 300, 200)),
                           (KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=2), (130, 129, 520))):
        r = emulate_sm90(emit_sm90_kernel(cfg), M, N, K, order="reverse", with_c=True, beta=0.25)
        assert r.ok, (cfg, r.summary())


def test_bf16():
    src = emit_sm90_kernel(KernelDesign.of(bm=128, bn=64, stages=3, dtype="bf16"))
    r = emulate_sm90(src, 130, 100, 296, dtype="bf16", with_c=True, beta=0.5)
    assert r.ok, r.summary()
    assert not emulate_sm90(src, 130, 100, 296, dtype="f16").ok  # the emulator reads the kernel's type


def _mutant(cfg, name):
    (mp,) = [m for n, m, _ in mutants(design_program(cfg)) if n == name]
    return emit_sm90_kernel(cfg, mp)


@pytest.mark.slow
@pytest.mark.parametrize("cfg,name", [
    (CFG, "parity flipped"), (CFG, "bytes +16"), (CFG, "bytes -16"), (CFG, "release before wait_group"),
    (CFG, "wait_group #0 + 1"), (PRED, "expect_tx left on a predicated-off load"),
    (CFG, "arrive.expect_tx without arrive"), (CFG, "arrival added"), (CFG, "release removed"),
])
def test_injected_bug_fails(cfg, name):
    src = _mutant(cfg, name)
    assert src != emit_sm90_kernel(cfg)
    for order in ("forward", "reverse", "random"):
        r = emulate_sm90(src, 100, 72, 448, order=order, load_when=cfg.load_when)
        assert not r.ok, (name, order)
        assert r.kind == "hang" or r.nan_count > 0 or r.max_abs_err > 1e-2, r.summary()
        if r.kind == "hang":
            assert "try_wait.parity" in r.message and "mbarrier full[" in r.message, r.message
        if name.startswith("bytes"):
            assert r.kind == "hang" and f"tx {name.split()[1].lstrip('+')})" in r.message, r.message


@pytest.mark.slow
@settings(max_examples=40 if os.environ.get("SYNTH_HYPOTHESIS") == "explore" else 2, deadline=None)
@given(bm=st.sampled_from([64, 128]), bn=st.sampled_from([16, 48, 96, 160]), stages=st.integers(1, 5),
       k_pipe=st.integers(0, 4), M=st.integers(1, 140), N=st.integers(1, 200), K=st.integers(1, 88).map(lambda k: 8 * k),
       order=st.sampled_from(["forward", "reverse", "random"]))
def test_random_configs_and_shapes(bm, bn, stages, k_pipe, M, N, K, order):
    cfg = KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=min(k_pipe, stages - 1))
    r = emulate_sm90(emit_sm90_kernel(cfg), M, N, K, order=order, with_c=True, beta=0.5)
    assert r.ok, (cfg, M, N, K, order, r.summary())

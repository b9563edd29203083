"""Grouped rasterization (synth.emit.raster): every tile exactly once, bands of GROUP_M rows, and the
kernels of both main loops use it (their results are checked on grids of several bands in
tests/test_emulate.py, "raster-10x3-tiles", and tests/test_sm90_emulate.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from synth.emit.raster import GROUP_M, cuda_lines, tile_of


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 12))
def test_every_tile_is_computed_once(tm, tn, g):
    tiles = [tile_of(pid, tm, tn, g) for pid in range(tm * tn)]
    assert sorted(tiles) == [(i, j) for i in range(tm) for j in range(tn)]


def test_consecutive_ctas_walk_down_a_band():
    tm, tn = 20, 30
    first = [tile_of(pid, tm, tn) for pid in range(GROUP_M * 3)]
    assert first[:GROUP_M] == [(i, 0) for i in range(GROUP_M)]
    assert first[GROUP_M:2 * GROUP_M] == [(i, 1) for i in range(GROUP_M)]
    # the last band is shorter: 20 = 8 + 8 + 4
    last_band = [tile_of(pid, tm, tn) for pid in range(2 * GROUP_M * tn, tm * tn)]
    assert last_band[:4] == [(16, 0), (17, 0), (18, 0), (19, 0)] and last_band[4] == (16, 1)


def test_both_kernels_use_it():
    from synth.hopper.kernel_design import KernelDesign
    from synth.emit.sm90.kernel import emit_sm90_kernel

    src = emit_sm90_kernel(KernelDesign.of(bm=128, bn=256, stages=3, k_pipe_mmas=1))
    assert all(line in src for line in cuda_lines(128, 256))
    from tests.test_emulate import gemm

    assert all(line in gemm("128x128x128")[4] for line in cuda_lines("BM", "BN"))

"""The persistent 2x1 cluster with the TMA-store epilogue, end to end: 'synth solve' exited 3
after the whole proof ("expected roles producer and consumer, got ['producer0', 'producer1', ...]": the folder's
timeline was sent to the one-CTA view), so no folder of this design was ever written, though the search ranks it
second at 4096^3 and 8192^3. Here: solved (exit 0), its timeline drawn with each CTA's stores, proven and
certified (the cluster ring, the carry of every CTA's roles, the store program), and its kernel on the emulator
matching numpy at odd shapes on any grid of whole clusters, through TMA stores where C's rows are 16-byte
multiples and from registers where they are not (N = 137)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from gemm_fixtures import PERSISTENT_CLUSTER_PROBLEM

PROBLEM = PERSISTENT_CLUSTER_PROBLEM.replace("name: pcl\n", "name: pcls\n").replace(
    "persistent: true\n", "persistent: true\nepilogue: tma_store\n")
"""The persistent 2x1 cluster problem of the other cluster tests, with the TMA-store epilogue."""


# persistent + cluster + TMA store together; each is solved, proven and run in the quick tier
pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    d = tmp_path_factory.mktemp("pcls")
    (d / "pcls.yaml").write_text(PROBLEM)
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(d / "pcls.yaml"), "-o", str(d / "out")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return d / "out"


def test_the_folder_is_written_proven_and_certified(solved):
    from synth.api import certify

    names = {p.name for p in solved.iterdir()}
    assert {"kernel.cu", "timeline.png", "timeline.svg", "certificate", "store", "verify.txt"} <= names
    svg = (solved / "timeline.svg").read_text()
    assert "persistent + TMA store view" in svg and "tma_store_C0" in svg and "tma_store_C1" in svg
    text = (solved / "verify.txt").read_text()
    assert "thread-block cluster 2x1" in text and "persistent tiles:" in text and "TMA-store epilogue" in text
    assert "REFUTED" not in text
    src = (solved / "kernel.cu").read_text()
    assert "cluster_q" in src and "synth_tma_store_2d" in src and "synth_c_tma(C, ldc)" in src
    res = certify(str(solved))
    assert res.ok, res.render()
    out = res.render()
    assert "cluster classes" in out and "TMA-store epilogue: certificate OK" in out, out


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ (C++20) needed for the emulator")
def test_the_folder_s_kernel_computes_c_at_odd_shapes(solved):
    import synth.kernel

    k = synth.kernel.load(str(solved), backend="emulator")
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (300, 200)).astype(np.float16)  # 5 tile rows: 3 groups (odd) of 2x1 tiles
    for N, tma in ((136, True), (137, False)):
        B = rng.uniform(-1, 1, (N, 200)).astype(np.float16)
        Cin = rng.uniform(-1, 1, (300, N)).astype(np.float32)
        ref = 0.5 * (A.astype(np.float64) @ B.astype(np.float64).T) - 1.5 * Cin
        for ctas in (None, 2, 4):
            C = k(A, B, Cin, alpha=0.5, beta=-1.5, ctas=ctas)
            assert C.shape == (300, N) and np.abs(C - ref).max() < 1e-3, (N, ctas)
            assert k.last_info["c_tma"] == tma and (k.last_info["stores"] > 0) == tma, (N, ctas, k.last_info)

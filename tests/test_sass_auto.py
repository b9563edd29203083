"""The main-loop targets (docs/cuda_kernel.md, section 6) for ``stages: auto``: the solver's own schedule, emitted and compiled.

benchmarks/sass_vs_cutlass.py's configurations 128x128x32 with 4 warps and 128x256x64 with 8 warps, solved
with ``stages: auto`` (K = 4096, the solver chooses stages, order and slots), lowered, emitted and compiled
for sm_80; the main loop's figures per k-tile (synth.emit.sass.loop_stats) against the targets that
tests/test_sass.py::test_main_loop_meets_the_targets checks for pinned ``stages: N``: live instructions per
HMMA at most CUTLASS's (2.48, 2.06 with nvcc 13.0; compared with CUTLASS compiled here when nvidia-cutlass
is installed), longest HMMA-free run <= 8, >= 8 HMMA between an LDSM and its first use, no HMMA-free run
holding more than a third of the k-tile's LDGSTS, 128-bit C stores, no spills. Static proxies read from
the binary, no GPU.
"""

from __future__ import annotations

import functools
import pathlib
import sys

import pytest

from gemm_fixtures import NVCC
from synth.emit import sass as sa
from synth.emit.cuda import emit_kernel
from synth.gemm import GemmConfig, expand_gemm, tiling
from synth.graph import build_graph
from synth.lower import lower
from synth.model import solve

CUOBJDUMP = sa.tool("cuobjdump")
pytestmark = [pytest.mark.nvcc, pytest.mark.slow,
              pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (install the CUDA toolkit)"),
              pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump not found: pip install nvidia-cuda-cuobjdump")]

CONFIGS = {  # benchmarks/sass_vs_cutlass.py's tiles, stages left to the solver
    "128x128x32w4": dict(BM=128, BN=128, BK=32, warps=4),
    "128x256x64w8": dict(BM=128, BN=256, BK=64, warps=8),
}
CUTLASS_PER_HMMA = {"128x128x32w4": 2.48, "128x256x64w8": 2.06}
"""CUTLASS 2.x device::Gemm at 3 stages, measured by benchmarks/sass_vs_cutlass.py with nvcc 13.0."""


@functools.lru_cache(maxsize=None)
def auto_build(key: str, symbolic: bool = False):
    """The auto kernel for K = 4096 (``symbolic``: for every K, the trip count T >= 1 at run time)."""
    p = expand_gemm(GemmConfig(4096, 4096, 4096, **CONFIGS[key]), min_ktiles=1 if symbolic else None)
    assert p.pins.stage is None and p.pins.order is None  # stages: auto
    g = build_graph(p)
    s = solve(p, g, time_limit=60.0, workers=1)  # one worker: CP-SAT is deterministic
    prog = lower(p, g, s)
    comp = sa.compile_cuda(emit_kernel(p, s, prog), "sm_80")
    insns = sa.parse_sass(comp.sass)
    t = tiling(p.gemm)
    return p, s, comp, insns, sa.loop_stats(sa.main_loop(insns), t.MI * t.NI * t.KI)


@pytest.mark.parametrize("symbolic", (False, True), ids=("static-T", "symbolic-T"))
@pytest.mark.parametrize("key", CONFIGS)
def test_auto_schedule_meets_the_targets(key, symbolic):
    """Solved, lowered and emitted (the emitter re-checks every wait) with 2+ shared slots; then every
    target of the issue on the main loop's SASS."""
    p, s, comp, insns, st = auto_build(key, symbolic)
    print(key, f"{s.max_stage + 1} stages, {s.mult('A_s')} slots, II {s.timing.ii}", st)
    assert s.info.status == "OPTIMAL"
    assert s.mult("A_s") >= 2 and s.mult("B_s") >= 2  # the next k-tile's copies overlap this one's reads
    assert st.ktiles == 1.0
    assert comp.spill_stores == comp.spill_loads == comp.stack == 0
    assert sa.stg_widths(insns).get(128, 0) > 0
    assert st.per_hmma <= CUTLASS_PER_HMMA[key]
    assert st.max_ldgsts_run_share <= 1 / 3
    assert st.longest_hmma_free <= 8
    assert st.min_ldsm_to_use is not None and st.min_ldsm_to_use >= 8


@pytest.mark.parametrize("key", CONFIGS)
def test_auto_against_cutlass_when_installed(key):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    import sass_vs_cutlass as bench

    if bench.cutlass_include() is None:
        pytest.skip("nvidia-cutlass is not installed (pip install nvidia-cutlass): no CUTLASS headers")
    p, s, comp, insns, ours = auto_build(key)
    t = tiling(p.gemm)
    cut = bench.compile_cutlass(dict(CONFIGS[key], stages=3), "sm_80")
    theirs = sa.loop_stats(sa.main_loop(sa.parse_sass(cut.sass)), t.MI * t.NI * t.KI)
    assert ours.per_hmma <= theirs.per_hmma, (ours, theirs)

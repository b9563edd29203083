"""Persistent thread-block clusters (docs/hopper_cluster.md, "Persistent clusters"): a persistent grid of P CTAs
in 2-CTA clusters walks cluster-sized tile groups, both CTAs of a cluster taking the same groups (so the same ring
trip count T). The proof is the cluster program over the ring (every barrier class of both CTAs and the cluster
classes, for every T) plus the tile carry of every role of every CTA; a carry bug is refuted naming the CTA's role.
The emulated kernel computes C for one cluster walking several groups, an odd group count, M and N off the tile
grid, T = 1 and T > stages, 2x1 and 1x2; a scheduler that counts a CTA's tiles from its own index (peers with
different trip counts) hangs; nvcc compiles it for sm_90a without spills."""

from __future__ import annotations

import os
import shutil
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_fixtures import PERSISTENT_CLUSTER_PROBLEM, SOLVE_FLAGS
from synth.emit import sass
from synth.emit.launch import persistent_ctas, persistent_grid, persistent_ring, tile_groups
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.kernel import emit_proven, emit_sm90_kernel
from synth.errors import SynthError
from synth.lower.hopper_persistent import TileCarry, tile_end_program
from synth.verify.hopper_persistent import CARRY_MUTANTS, check_carry, verify_persistent
from synth.lower.hopper_design import design_program

EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")
NEEDS_NVCC = pytest.mark.skipif(sass.tool("nvcc") is None or sass.tool("cuobjdump") is None,
                                reason="nvcc/cuobjdump needed")

CFG = KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1", persistent=True)


def _emulate(src, M, N, K, **kw):
    from synth.emit.sm90.emulate import emulate_sm90

    return emulate_sm90(src, M, N, K, **kw)


# ---------------------------------------------------------------------------------------------------------------
# the configuration, the grid
# ---------------------------------------------------------------------------------------------------------------

def test_persistent_clusters_are_built_the_rest_refused():
    for cluster in ("2x1", "1x2"):
        KernelDesign.of(cluster=cluster, persistent=True).check()
        KernelDesign.of(cluster=cluster, persistent=True, epilogue="tma_store").check()
    for bad, why in ((KernelDesign.of(bm=64, cluster="2x1", persistent=True, pingpong=True), "ping-pong consumers"),
                     (KernelDesign.of(cluster="1x2", split_k=2), "with split_k = 2"),
                     (KernelDesign.of(cluster="2x1", persistent=True, load_when="k < T - 1"), "load predicate")):
        with pytest.raises(ValueError, match=why):
            bad.check()
    with pytest.raises(ValueError, match="persistent cluster kernel only"):
        emit_sm90_kernel(KernelDesign.of(cluster="2x1", bm=64, bn=64, stages=2), scheduler="cta")


def test_the_grid_is_whole_clusters():
    # one wave in whole clusters, at most one cluster per tile group
    assert persistent_ctas(tile_groups(4096, 4096, 128, 128, 2, 1), 132, cluster=2) == 132
    assert persistent_ctas(tile_groups(300, 130, 64, 64, 2, 1), 132, cluster=2) == 2 * 9
    assert persistent_ctas(5, 132) == 5  # one CTA per tile (1x1) as before
    assert persistent_ctas(7, 132, ctas=6, cluster=2) == 6
    with pytest.raises(ValueError, match="a persistent grid of 2-CTA clusters takes a multiple of 2 CTAs"):
        persistent_ctas(7, 132, ctas=5, cluster=2)
    # each cluster CN CTAs along x by all CM of y, as __cluster_dims__(CN, CM, 1) groups them
    assert persistent_grid(8, 2, 1) == (4, 2, 1) and persistent_grid(8, 1, 2) == (8, 1, 1)
    assert persistent_grid(5) == (5, 1, 1)
    assert persistent_ring(9, 4, 3, cluster=2) == 5 * 3  # 9 groups on 2 clusters: 5 groups of 3 k-tiles


def test_the_runner_launches_a_grid_of_whole_clusters():
    from types import SimpleNamespace

    from synth.emit.sm90 import runner
    from tests.test_run import FakeDriver

    # 3 x 3 tiles of 128 x 64: 2 x 3 groups of a 2x1 cluster (one CTA of the last group row outside C)
    for cl, ctas, grid in (("2x1", None, (6, 2, 1)), ("2x1", 4, (2, 2, 1)), ("1x2", None, (12, 1, 1)),
                           ("1x1", None, (9, 1, 1))):
        cfg = KernelDesign.of(bm=128, bn=64, stages=2, cluster=cl, persistent=True)
        dev = SimpleNamespace(cu=FakeDriver(None), attribute=lambda name: 132)
        _, g = runner.sm90_params(dev, cfg, 1 << 32, 2 << 32, 3 << 32, None, M=300, N=130, K=128, alpha=1.0,
                                  beta=0.0, ctas=ctas)
        assert g == grid, (cl, ctas, g)
    with pytest.raises(ValueError, match="multiple of 2"):
        runner.sm90_params(dev, KernelDesign.of(bm=128, bn=64, stages=2, cluster="2x1", persistent=True), 1 << 32,
                           2 << 32, 3 << 32, None, M=300, N=130, K=128, alpha=1.0, beta=0.0, ctas=5)


# ---------------------------------------------------------------------------------------------------------------
# the proof: the cluster ring for every T and the carry of every role of every CTA
# ---------------------------------------------------------------------------------------------------------------

def test_the_persistent_cluster_ring_is_proven():
    p = design_program(CFG)
    r = verify_persistent(p, tile_ends=range(1, CFG.stages + 2))
    assert r.ok, r.render()
    # the ring is the cluster program's: every barrier class of both CTAs' roles and the cluster classes
    classes = {o.kind for o in r.ring.obligations}
    assert {"cluster_form", "init_visible", "safe_exit", "arrivals", "tx_bytes", "no_deadlock"} <= classes
    assert {"carry", "tile_end"} <= set(r.checks)
    # the tile end's wait_group 0 is checked in every CTA's consumer
    te = tile_end_program(p, 2)
    assert all(str(r.program.parts[0].stmts[-1].guard) == "i % 2 == 1" for r in te.roles if "consumer" in r.name)


@pytest.mark.parametrize("role", ["consumer1", "producer0"])
def test_a_carry_bug_is_refuted_naming_the_cta_s_role(role):
    ok, why = check_carry(design_program(CFG), {role: CARRY_MUTANTS["second_tile_parity_flip"]})
    assert not ok and why.startswith(f"{role} (CTA {role[-1]}, carry slot t * T"), why
    assert "at the CTA's tile 1, k-tile 0" in why, why
    # a carry given for a role kind is every CTA's role of that kind: the first CTA's is named
    ok, why = check_carry(design_program(CFG), {role[:-1]: CARRY_MUTANTS["phase_reset"]})
    assert not ok and why.startswith(f"{role[:-1]}0 (CTA 0, "), why
    assert check_carry(design_program(CFG), {role: TileCarry()}) == (True, "")


def test_emit_proven_proves_the_ring_and_the_carry():
    text, report = emit_proven(CFG)
    assert report.ok and {"cluster_form", "safe_exit"} <= {o.kind for o in report.obligations}
    assert "cluster_q" in text and "#define SYNTH_PERSISTENT 1" in text
    with pytest.raises(SynthError, match=r"tile carry .* not proven: consumer1 \(CTA 1, "):
        emit_proven(CFG, carry={"consumer1": CARRY_MUTANTS["tile_local_parity"]})


# ---------------------------------------------------------------------------------------------------------------
# the kernel text
# ---------------------------------------------------------------------------------------------------------------

def test_the_tile_count_comes_from_the_cluster_index():
    text = emit_sm90_kernel(CFG)
    body = text.split('extern "C"', 1)[1]
    (n_line,) = [ln.strip() for ln in body.splitlines() if "const int n_tiles =" in ln]
    assert n_line == "const int n_tiles = cluster_q < groups ? (groups - 1 - cluster_q) / clusters + 1 : 0;"
    assert "const int cluster_q = (int)blockIdx.x, clusters = (int)gridDim.x;" in body  # 2x1: one CTA along x
    assert "const int groups_n = tiles_n, groups_m = (tiles_m + 1) / 2;" in body
    # each CTA's tile at its offset in its cluster's group: the peer's the other tile row (2x1)
    assert "const int group = cluster_q + t * clusters;" in body and "(int)(blockIdx.y % 2) * 64" in body
    # one body per role kind for both CTAs (relative to crank), the ring over the tiles inside it
    for kind in ("producer", "consumer"):
        assert f"{{  // every CTA: role {kind}<crank>" in body
    assert body.count("for (int t = 0; t < n_tiles; ++t) {") == 2
    assert "(int)((i) - kb)) * 64, n0 + (int)crank * 32," in body  # the multicast: k-tile i - kb of this tile
    # a carry mutant of one CTA's role: the CTAs differ, each emitted as it is
    one = emit_sm90_kernel(CFG, carry={"consumer1": CARRY_MUTANTS["second_tile_parity_flip"]})
    start = one.index("if (crank == 0u) {  // CTA 0: role consumer0")
    cta0 = one[start:one.index("} else if (crank == 1u) {  // CTA 1: role consumer1")]
    assert "(mutant)" not in cta0
    assert "(mutant)" in one.split("// CTA 1: role consumer1")[1]


# ---------------------------------------------------------------------------------------------------------------
# the emulator
# ---------------------------------------------------------------------------------------------------------------

RUNS = [
    # (cfg, M, N, K, P, order): 64x64 tiles
    (CFG, 300, 130, 192, 2, "cta1_first"),      # P = 2: one cluster walks all 9 groups; T = 3 > stages; M, N ragged
    (CFG, 300, 130, 64, 4, "random"),           # P = 4, 9 groups (odd): 5 and 4; T = 1; a group's 2nd tile outside C
    (KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster="1x2", persistent=True), 130, 300, 320, 4,
     "cta0_first"),                            # 1x2: 3 x 3 groups on 2 clusters, T = 5
]


@NEEDS_GXX
@pytest.mark.parametrize("k", range(len(RUNS)))
def test_persistent_clusters_compute_c(k):
    cfg, M, N, K, P, order = RUNS[k]
    r = _emulate(emit_sm90_kernel(cfg), M, N, K, ctas=P, order=order, with_c=True, alpha=0.5, beta=-1.5, seed=k)
    assert r.ok, r.summary()
    assert r.stats["poisoned_ops"] == 0 and r.stats["waw"] == 0
    groups = tile_groups(M, N, cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n)
    kt = -(-K // 64)
    # every group once: each of its 2 CTAs multicasts its half of every k-tile into both; one remote release each
    assert r.stats["multicasts"] == 2 * groups * kt and r.stats["multicast_copies"] == 2 * r.stats["multicasts"]
    assert r.stats["remote_arrivals"] == 2 * groups * kt
    assert r.stats["cluster_syncs"] == 2 * (P // 2)  # setup and teardown of each cluster, none per tile


@NEEDS_GXX
@settings(max_examples=40 if EXPLORE else 4, deadline=None)
@given(st.integers(1, 400), st.integers(1, 300), st.integers(1, 40), st.integers(1, 8), st.sampled_from(
    ["forward", "random", "cta0_first", "cta1_first"]), st.sampled_from(["2x1", "1x2"]))
def test_any_grid_of_whole_clusters_computes_c(M, N, k8, clusters, order, cluster):
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster=cluster, persistent=True)
    r = _emulate(emit_sm90_kernel(cfg), M, N, 8 * k8, ctas=2 * clusters, order=order, with_c=True, beta=0.5)
    assert r.ok, (M, N, 8 * k8, clusters, order, r.summary())


SLOW_RUNS = [
    # more clusters than groups (clusters without a tile group run setup and teardown only)
    (CFG, 190, 70, 136, 12, "forward", "shuffle:2"),
    # the TMA-store epilogue, 128-row tiles (two consumer warp groups), K_PIPE_MMAS 2 (a two-step drain)
    (KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=2, cluster="2x1", persistent=True, epilogue="tma_store"),
     390, 136, 456, 4, "cta1_first", "reverse"),
    (KernelDesign.of(bm=64, bn=128, stages=4, k_pipe_mmas=0, cluster="1x2", persistent=True, dtype="bf16"),
     200, 500, 200, 2, "starve", "forward"),
]


@pytest.mark.slow
@NEEDS_GXX
@pytest.mark.parametrize("k", range(len(SLOW_RUNS)))
def test_other_persistent_clusters(k):
    cfg, M, N, K, P, order, block_order = SLOW_RUNS[k]
    r = _emulate(emit_sm90_kernel(cfg), M, N, K, ctas=P, order=order, block_order=block_order, with_c=k != 1,
                 beta=0.25, dtype=cfg.dtype)
    assert r.ok, r.summary()


@NEEDS_GXX
def test_a_scheduler_from_the_cta_index_deadlocks_on_an_odd_group_count():
    """The one-CTA scheduler in a cluster kernel (each CTA counting its tiles from its own index): with 3 groups on
    2 clusters the two CTAs of cluster 0 get 2 and 1 tiles, so different trip counts sharing barriers (the
    DeepGEMM #429 shape); the kernel's scheduler (from the cluster index) computes C there."""
    bad = emit_sm90_kernel(CFG, scheduler="cta")
    r = _emulate(bad, 384, 64, 128, ctas=4)  # 6 tile rows: 3 groups of 2
    assert not r.ok and r.kind == "hang", r.summary()
    assert "barrier.cluster.wait" in r.message or "try_wait" in r.message
    good = _emulate(emit_sm90_kernel(CFG), 384, 64, 128, ctas=4)
    assert good.ok, good.summary()
    if EXPLORE:  # an even group count gives the peers the same count: the bug hides there
        assert _emulate(bad, 256, 128, 128, ctas=4).ok


@NEEDS_GXX
def test_a_carry_bug_of_one_cta_fails_on_the_emulator():
    src = emit_sm90_kernel(CFG, carry={"consumer1": CARRY_MUTANTS["second_tile_parity_flip"]})
    r = _emulate(src, 300, 130, 192, ctas=2)
    assert not r.ok and r.kind in ("hang", "fault", "protocol"), r.summary()


def test_a_grid_of_part_of_a_cluster_is_refused():
    from synth.emit.sm90.emulate import EmulatorError, run_emulated

    import numpy as np

    with pytest.raises(EmulatorError, match="takes a multiple of 2 CTAs"):
        run_emulated(emit_sm90_kernel(CFG), np.zeros((64, 64), np.uint16), np.zeros((64, 64), np.uint16), ctas=3)


# ---------------------------------------------------------------------------------------------------------------
# nvcc for sm_90a
# ---------------------------------------------------------------------------------------------------------------

def _sass(cfg: KernelDesign):
    from synth.emit.sm90.sass_mix import figures

    c = sass.compile_cuda(emit_sm90_kernel(cfg), "sm_90a", flags=("-DNDEBUG",))
    ops = Counter(i.opcode for i in sass.parse_sass(c.sass))
    assert ops["UTMALDG.2D.MULTICAST"] >= 2 and ops["UTMALDG.2D"] >= 2, ops
    assert ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] >= 2, ops
    assert ops["UCGABAR_ARV"] == 2 and ops["UCGABAR_WAIT"] == 2, ops  # setup and teardown only, none per tile
    assert c.spill_stores == 0 and c.spill_loads == 0 and c.stack == 0
    assert "C7514" not in c.log, "ptxas serialized the wgmma pipeline"
    return figures(c, cfg.bk // 16)


@NEEDS_NVCC
def test_the_persistent_cluster_kernel_compiles_for_sm90a():
    f = _sass(KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1, cluster="2x1", persistent=True))
    assert f["insn_per_hgmma"] <= 11.25 and f["longest_free"] <= 28, f


@pytest.mark.slow
@NEEDS_NVCC
@pytest.mark.parametrize("cfg", [KernelDesign.of(bm=128, bn=256, stages=4, k_pipe_mmas=1, cluster="1x2", persistent=True),
                                 KernelDesign.of(bm=128, bn=128, stages=4, cluster="2x1", persistent=True,
                                            epilogue="tma_store")], ids=["1x2-128x256", "2x1-tma-store"])
def test_persistent_cluster_kernels_compile_for_sm90a(cfg):
    f = _sass(cfg)
    assert f["insn_per_hgmma"] <= 11.25, f


# ---------------------------------------------------------------------------------------------------------------
# from a problem file: solve, verify, certify
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def solved(solve_once):
    """The persistent 2x1 cluster folder, solved once for the run (test_cluster_hostile's too)."""
    return solve_once(PERSISTENT_CLUSTER_PROBLEM, *SOLVE_FLAGS).out


def test_solve_verify_certify_a_persistent_cluster_problem(solved):
    import json

    from synth.api import certify, verify

    text = (solved / "verify.txt").read_text()
    assert "persistent tiles:" in text and "thread-block cluster 2x1" in text and "REFUTED" not in text
    assert "cluster_q" in (solved / "kernel.cu").read_text()
    manifest = json.loads((solved / "certificate" / "manifest.json").read_text())
    assert manifest["persistent"] is True and manifest["cluster"]
    # the carry obligations of every role of both CTAs, re-derived by the independent checker
    names = {p.name for p in (solved / "certificate").iterdir()}
    for role in ("producer0", "producer1", "consumer0", "consumer1"):
        assert any(f"-carry-shape-{role}." in n for n in names), role
    assert verify(str(solved)).ok
    res = certify(str(solved))
    assert res.ok and "cluster classes" in res.render(), res.render()


@pytest.mark.slow
@NEEDS_GXX
def test_the_solved_folder_runs_any_whole_cluster_grid(solved):
    import numpy as np

    import synth.kernel
    from synth.kernel import KernelError

    k = synth.kernel.load(str(solved), backend="emulator")
    rng = np.random.default_rng(1)
    A = rng.standard_normal((384, 200)).astype(np.float16)  # 6 tile rows: 3 groups (odd) on 2 clusters
    B = rng.standard_normal((64, 200)).astype(np.float16)
    ref = A.astype(np.float32) @ B.astype(np.float32).T
    for ctas in (None, 2, 4, 10):
        assert np.abs(k(A, B, ctas=ctas) - ref).max() < 1e-3, ctas
    with pytest.raises(KernelError, match="multiple of 2"):
        k(A, B, ctas=3)

"""The 2x1 / 1x2 cluster kernel (docs/hopper_cluster.md, "The kernel"): emitted statement by statement from the
cluster program (each CTA's roles under ``crank``, remote releases through ``mapa``, one multicast per run of a
producer's part copies, cluster barriers), compiled by nvcc for sm_90a (multicast TMA, remote arrives and cluster
barriers in the SASS, no spills), launched on whole clusters with half boxes, run on the emulator with the right
answer, and each known cluster bug injected into it caught by the emulator."""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_fixtures import NEEDS_GXX
from synth.completion import TryWaitStmt
from synth.emit import sass
from synth.emit.launch import sm90_grid
from synth.emit.raster import cluster_tile_of
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.kernel import emit_proven, emit_sm90_kernel
from synth.emit.sm90.sass_mix import figures
from synth.verify.hopper_cluster import CLUSTER_BUGS, mask_missing_peer
from synth.program import OpStmt
from synth.lower.hopper_design import design_program

EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
NEEDS_NVCC = pytest.mark.skipif(sass.tool("nvcc") is None or sass.tool("cuobjdump") is None,
                                reason="nvcc/cuobjdump needed")


def _lines(text: str, what: str) -> list[str]:
    """The lines holding ``what`` (after the CUDA prelude, when ``text`` is a whole kernel)."""
    body = text.split('extern "C"', 1)[-1]
    return [ln.strip() for ln in body.splitlines() if what in ln]


def _role_block(text: str, role: str) -> str:
    """The text of ``if (crank == c) { ... }`` that runs role ``role`` (up to the next CTA's or the block's end)."""
    start = text.index(f"// CTA {role[-1]}: role {role}")
    nxt = [i for i in (text.find("// CTA ", start + 10), text.find("// ---- teardown", start)) if i > 0]
    return text[start:min(nxt)]


# ---------------------------------------------------------------------------------------------------------------
# the kernel text: statement by statement from the cluster program
# ---------------------------------------------------------------------------------------------------------------

def test_cluster_kernel_is_the_cluster_program():
    cfg = KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1, cluster="2x1")
    text = emit_sm90_kernel(cfg)
    assert "__cluster_dims__(SYNTH_CLUSTER_N, SYNTH_CLUSTER_M, 1)" in text
    for macro in ("SYNTH_CLUSTER_M 2", "SYNTH_CLUSTER_N 1", "SYNTH_A_BOX_ROWS 128", "SYNTH_B_BOX_ROWS 64"):
        assert f"#define {macro}" in text
    for fn in ("synth_cluster_ctarank", "synth_mapa", "synth_mbar_arrive_cluster", "synth_tma_load_2d_multicast",
               "synth_cluster_sync"):
        assert f"SYNTH_DEV {'uint32_t' if fn in ('synth_cluster_ctarank', 'synth_mapa') else 'void'} {fn}(" in text
    # one barrier array per kind: each CTA's full_c / empty_c at the same offset of its own shared memory
    assert len(_lines(text, "const uint32_t bar_full =")) == len(_lines(text, "const uint32_t bar_empty =")) == 1
    # setup: each CTA initializes its own barriers (the program's counts), fences, then every thread syncs
    setup = text[text.index("// ---- setup"):text.index("if (wg == 0)")]
    assert re.search(r"if \(crank == 1u\).*\n.*synth_mbar_init\(bar_empty \+ 8 \* s, 4\);  // init empty1", setup)
    assert setup.index("synth_fence_mbarrier_init();") < setup.index("synth_cluster_sync();")
    assert "synth_syncthreads" not in setup
    # the program is symmetric under the swap of the CTAs: one body for both, relative to crank
    assert "if (crank == 0u) {  // CTA 0: role" not in text
    for kind in ("producer", "consumer"):
        assert f"{{  // every CTA: role {kind}<crank>, written relative to this CTA (crank)" in text
    # the producer: its A box, and ONE multicast of its half of B (half crank) into both CTAs (mask 0b11)
    (mc,) = _lines(text, "synth_tma_load_2d_multicast(")
    assert "* 16384 + crank * 8192u, &tmB, (i) * 64, n0 + (int)crank * 64," in mc and "(uint16_t)(0x3)" in mc
    assert mc.endswith("load_B_h<own>_to<own>, load_B_h<own>_to<peer>: part crank of B (64 rows, 8192 bytes) "
                       "into this CTA and the peer")
    assert len(_lines(text, "synth_tma_load_2d(")) == 1 and "16384u + 8192u + 8192u" in text
    # the consumer: its own release locally, the peer's through mapa (body and drain)
    # (the peer's barrier array mapped once, before the consumer's loops: a release adds its slot's offset)
    (peer,) = _lines(text, "const uint32_t bar_empty_peer =")
    assert "synth_mapa(bar_empty, (crank ^ 1u))" in peer
    remote = _lines(text, "synth_mbar_arrive_cluster(")
    assert len(remote) == 2 and all(r.startswith("synth_mbar_arrive_cluster(bar_empty_peer + 8 * (") and
                                    r.endswith("// remote: empty<peer>") for r in remote)
    assert len(_lines(text, "synth_mbar_arrive(bar_empty")) == 2
    teardown = text[text.index("// ---- teardown"):]
    assert teardown.index("synth_cluster_sync();") < teardown.index("synth_mbar_inval")
    assert "synth_syncthreads" not in teardown
    # a 1x2 cluster shares A: its half rows along M
    text12 = emit_sm90_kernel(KernelDesign.of(bm=128, bn=64, stages=3, cluster="1x2"))
    assert "#define SYNTH_CLUSTER_N 2" in text12 and "#define SYNTH_A_BOX_ROWS 64" in text12
    assert any("m0 + (int)crank * 64," in ln and "&tmA" in ln for ln in _lines(text12, "synth_tma_load_2d_multicast("))


def test_mutants_are_emitted_as_they_are():
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, cluster="2x1")
    p = design_program(cfg)
    mut = {name: emit_sm90_kernel(cfg, fn(p)) for name, (fn, _, _) in CLUSTER_BUGS.items()}
    # the mask follows the copies present: producer1's copy into CTA 0 gone -> its multicast lands in CTA 1 only;
    # the producers differ, so each CTA's role is emitted as it is, under its rank
    text = mut["mask_missing_peer"]
    (mc0,) = _lines(_role_block(text, "producer0"), "synth_tma_load_2d_multicast(")
    (mc1,) = _lines(_role_block(text, "producer1"), "synth_tma_load_2d_multicast(")
    assert "* 8192 + 0, &tmB, (i) * 64, n0 + 0," in mc0 and "(uint16_t)(0x3)" in mc0
    assert mc0.endswith("load_B_h0_to0, load_B_h0_to1: part 0 of B (32 rows, 4096 bytes) into CTA(s) 0, 1")
    assert "* 8192 + 4096, &tmB, (i) * 64, n0 + 32," in mc1 and "(uint16_t)(0x2)" in mc1
    assert mc1.endswith("load_B_h1_to1: part 1 of B (32 rows, 4096 bytes) into CTA(s) 1")
    # the consumers are still the same up to the swap (both read their whole slot): one body
    assert "{  // every CTA: role consumer<crank>" in text
    assert "synth_mbar_init(bar_empty + 8 * s, 1)" in mut["local_empty_count"]
    assert "8192u + 4096u;" in _role_block(mut["own_part_expect_tx"], "producer0")  # its A and its own half of B
    assert "8192u + 4096u + 4096u;" in _role_block(mut["own_part_expect_tx"], "producer1")
    setup = mut["cta_scope_init_fence"].split("// ---- setup")[1].split("if (wg == 0)")[0]
    assert "synth_fence_proxy_async();" in setup and "synth_cluster_sync" not in setup
    assert "synth_syncthreads();" in setup  # the CTA's own threads still see the init (the one-CTA kernel's order)
    tail = mut["no_cluster_sync_before_exit"].split("// ---- teardown")[1]
    assert "synth_cluster_sync" not in tail and "synth_syncthreads();" in tail
    # DeepGEMM's shape: CTA 1 runs one k-tile more than CTA 0
    for role in ("producer", "consumer"):
        assert "i < (unsigned)((T + 1))" in _role_block(mut["trip_mismatch"], f"{role}1")
        assert "i < (unsigned)(T)" in _role_block(mut["trip_mismatch"], f"{role}0")


def test_what_the_kernel_cannot_be_is_refused():
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, cluster="2x1")
    p = design_program(cfg)
    with pytest.raises(ValueError, match="expected roles producer0"):
        emit_sm90_kernel(cfg, design_program(KernelDesign.of(bm=64, bn=64, stages=2)))
    with pytest.raises(ValueError, match="expected a producer role"):
        emit_sm90_kernel(KernelDesign.of(bm=64, bn=64, stages=2), p)
    with pytest.raises(ValueError, match="cluster 2x1: expected roles"):
        emit_sm90_kernel(cfg, replace(p, roles=p.roles[:3]))
    # a 2x1 program (sharing B) for a 1x2 configuration (sharing A)
    with pytest.raises(ValueError, match="load_A0: the cluster 1x2 shares A: each producer loads its part"):
        emit_sm90_kernel(KernelDesign.of(bm=64, bn=64, stages=2, cluster="1x2"), p)

    def edit(role, fn):
        prog = p.role(role).program
        body = prog.parts[0]
        return p.with_role(role, replace(prog, parts=(replace(body, stmts=tuple(map(fn, body.stmts))),)
                                         + prog.parts[1:]))

    # a wait on the peer's barrier (mbarrier.try_wait takes the waiting CTA's own)
    peer_wait = edit("consumer0", lambda s: replace(s, barrier="full1") if isinstance(s, TryWaitStmt) else s)
    with pytest.raises(ValueError, match="try_wait on full1 of CTA 1"):
        emit_sm90_kernel(cfg, peer_wait)
    # a copy into the peer that is not a part of the shared operand's box
    renamed = edit("producer0", lambda s: replace(s, op="load_B0_to1") if isinstance(s, OpStmt) and
                   s.op == "load_B_h0_to1" else s)
    with pytest.raises(ValueError, match="only a part of the shared operand's box"):
        emit_sm90_kernel(cfg, renamed)
    # a part whose bytes are not the half box, and a part landing on another CTA's barrier than it writes
    wrong = edit("producer1", lambda s: replace(s, barrier=replace(s.barrier, bytes=4096 + 16))
                 if isinstance(s, OpStmt) and s.op.startswith("load_B_h1") else s)
    with pytest.raises(ValueError, match="complete_tx bytes 4112 differ"):
        emit_sm90_kernel(cfg, wrong)
    crossed = edit("producer1", lambda s: replace(s, barrier=replace(s.barrier, barrier="full1"))
                   if isinstance(s, OpStmt) and s.op == "load_B_h1_to0" else s)
    with pytest.raises(ValueError, match="lands in the CTA its op names"):
        emit_sm90_kernel(cfg, crossed)
    # a part of A in a cluster that shares B
    other = edit("producer0", lambda s: replace(s, op="load_A_h0_to0") if isinstance(s, OpStmt) and
                 s.op == "load_B_h0_to0" else s)
    with pytest.raises(ValueError, match="a part of A's box, but the cluster 2x1 shares B"):
        emit_sm90_kernel(cfg, other)


def test_emitting_a_cluster_kernel_needs_no_prover():
    # the light runtime (a stock GPU image: no Z3) re-emits a folder's kernel.cu when it loads it
    import subprocess
    import sys

    code = ("import sys; from synth.hopper.kernel_design import KernelDesign; "
            "from synth.emit.sm90.kernel import emit_sm90_kernel; "
            "emit_sm90_kernel(KernelDesign.of(cluster='1x2', bm=64, bn=64, stages=2)); "
            "assert not {'z3', 'synth.verify', 'synth.verify.hopper_cluster'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_emit_proven_proves_the_cluster_program():
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, cluster="2x1")
    text, report = emit_proven(cfg)
    assert report.ok and text == emit_sm90_kernel(cfg)
    assert {"init_visible", "safe_exit", "cluster_form", "tx_bytes", "arrivals"} <= \
        {o.kind for o in report.obligations}


# ---------------------------------------------------------------------------------------------------------------
# tiles and launch
# ---------------------------------------------------------------------------------------------------------------

@settings(max_examples=300 if EXPLORE else 40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.sampled_from([(2, 1), (1, 2)]), st.integers(1, 9))
def test_cluster_raster_keeps_a_cluster_on_its_shared_tile(tm, tn, shape, group):
    cm, cn = shape
    gx, gy, _ = sm90_grid(tm * 64, tn * 64, 64, 64, cluster_m=cm, cluster_n=cn)
    assert gx % cn == 0 and gy % cm == 0 and gx - tn < cn and gy - tm < cm
    tiles = {}
    for by in range(gy):
        for bx in range(gx):
            tiles[(bx, by)] = cluster_tile_of(bx, by, gx, gy, cm, cn, group)
    assert sorted(tiles.values()) == [(i, j) for i in range(gy) for j in range(gx)]  # a bijection onto the grid
    for (bx, by), (r, c) in tiles.items():
        # the peer CTA of the cluster (__cluster_dims__(cn, cm, 1): the other along y for 2x1, along x for 1x2)
        # computes the neighbouring tile of the same column (2x1: the shared B tile) or row (1x2: the shared A)
        peer = tiles[(bx, by ^ 1)] if cm == 2 else tiles[(bx ^ 1, by)]
        assert peer == ((r ^ 1, c) if cm == 2 else (r, c ^ 1))


def test_the_kernel_uses_the_cluster_raster():
    from synth.emit.raster import cluster_cuda_lines

    text = emit_sm90_kernel(KernelDesign.of(bm=128, bn=64, stages=3, cluster="1x2"))
    assert all(ln in text for ln in cluster_cuda_lines(128, 64, 1, 2))


def test_runner_launches_whole_clusters_with_half_boxes():
    from synth.emit.sm90 import runner
    from tests.test_run import FakeDriver

    for cl, boxes, grid in (("2x1", [[64, 128], [64, 32]], (3, 4, 1)), ("1x2", [[64, 64], [64, 64]], (4, 3, 1)),
                            ("1x1", [[64, 128], [64, 64]], (3, 3, 1))):
        cfg = KernelDesign.of(bm=128, bn=64, stages=2, cluster=cl)
        drv = FakeDriver(None)
        params, g = runner.sm90_params(SimpleNamespace(cu=drv), cfg, 1 << 32, 2 << 32, 3 << 32, None,
                                       M=300, N=130, K=128, alpha=1.0, beta=0.0)
        assert [t["box"] for t in drv.tmaps.values()] == boxes and g == grid, (cl, g)
        assert [t["dims"] for t in drv.tmaps.values()] == [[128, 300], [128, 130]]
    assert sm90_grid(1, 1, 128, 128, cluster_m=2) == (1, 2, 1)
    assert sm90_grid(129, 257, 128, 128, cluster_n=2) == (4, 2, 1)
    with pytest.raises(ValueError):
        sm90_grid(0, 5, 128, 128)


@NEEDS_GXX
def test_run_gpu_launches_the_cluster_kernel(monkeypatch):
    # runner.run_gpu's whole path against the fake driver, which runs each launch on the emulator: whole clusters,
    # the half box of B, the kernel's C
    from synth.emit.sm90 import runner
    from tests.test_run import FakeDriver

    cfg = KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1")
    drv = FakeDriver(emit_sm90_kernel(cfg))
    monkeypatch.setattr(runner, "driver", lambda: drv)
    rng = np.random.default_rng(4)
    A, B = rng.uniform(-1, 1, (150, 128)).astype(np.float16), rng.uniform(-1, 1, (70, 128)).astype(np.float16)
    C = runner.run_gpu(drv.source, cfg, A, B, images=[("sm_90a cubin", b"CUBIN")])
    assert np.allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, atol=1e-2)
    (launch,) = drv.launches
    assert launch["grid"] == (2, 4, 1) and [t["box"] for t in drv.tmaps.values()] == [[64, 64], [64, 32]]
    assert not drv.mem


# ---------------------------------------------------------------------------------------------------------------
# nvcc for sm_90a: the SASS
# ---------------------------------------------------------------------------------------------------------------

def _sass_checks(cfg: KernelDesign, targets: bool = True):
    c = sass.compile_cuda(emit_sm90_kernel(cfg), "sm_90a", flags=("-DNDEBUG",))
    ops = Counter(i.opcode for i in sass.parse_sass(c.sass))
    # each producer's multicast (one per k-tile position of its unrolled loop) beside its own box's copy
    assert ops["UTMALDG.2D.MULTICAST"] >= 2 and ops["UTMALDG.2D"] >= 2, ops
    # the remote releases (SYNCS ... .RED: an arrive on a shared::cluster address) and the local ones
    assert ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] >= 2 and ops["SYNCS.ARRIVE.TRANS64.A1T0"] >= 2, ops
    # the cluster barriers of setup and teardown; their release/acquire is the only GPU-scope fence (none in a loop)
    assert ops["UCGABAR_ARV"] == 2 and ops["UCGABAR_WAIT"] == 2 and ops["MEMBAR.ALL.GPU"] == 2, ops
    assert any(o.startswith(f"HGMMA.64x{cfg.bn}x16.F32") for o in ops)
    assert c.spill_stores == 0 and c.spill_loads == 0 and c.stack == 0
    assert "C7514" not in c.log, "ptxas serialized the wgmma pipeline"
    # the one-CTA kernel's targets (docs/hopper_kernel.md: CUTLASS cooperative has 11.25 and 28); met with a
    # power-of-two number of stages (docs/hopper_cluster.md, "Performance")
    f = figures(c, cfg.bk // 16)
    assert f["insn_per_hgmma"] <= 11.25 and (f["longest_free"] <= 28 or not targets), f


@NEEDS_NVCC
@pytest.mark.parametrize("cluster", ["2x1", "1x2"])
def test_cluster_kernel_compiles_for_sm90a(cluster):
    _sass_checks(KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1, cluster=cluster))


@pytest.mark.slow
@NEEDS_NVCC
@pytest.mark.parametrize("cfg", [KernelDesign.of(bm=128, bn=256, stages=3, k_pipe_mmas=1, cluster="2x1"),
                                 KernelDesign.of(bm=64, bn=128, stages=2, k_pipe_mmas=0, cluster="1x2"),
                                 KernelDesign.of(bm=128, bn=128, stages=4, cluster="2x1", epilogue="tma_store"),
                                 KernelDesign.of(bm=128, bn=64, stages=5, k_pipe_mmas=2, cluster="1x2", dtype="bf16")],
                         ids=["2x1-128x256", "1x2-64x128-k0", "2x1-tma-store", "1x2-bf16"])
def test_cluster_kernels_compile_for_sm90a(cfg):
    _sass_checks(cfg, targets=cfg.stages & (cfg.stages - 1) == 0)


# stage counts that are not a power of two, and 8: the slot i % S and the round i / S carried from one k-tile to the
# next and the peer's barrier array mapped once (docs/hopper_cluster.md, "Performance"); before, a division by S per
# slot and a mapa per release made the longest HGMMA-free run 30 to 44
_ODD_STAGES = [pytest.param(KernelDesign.of(bm=128, bn=128, stages=3, k_pipe_mmas=1, cluster="2x1"), id="2x1-s3")] + [
    pytest.param(KernelDesign.of(bm=bm, bn=bn, stages=st, k_pipe_mmas=k, cluster=cl, persistent=pers), marks=pytest.mark.slow,
                 id=f"{cl}-{bm}x{bn}-s{st}-k{k}{'-persistent' if pers else ''}")
    for bm, bn, st, k, cl, pers in [(128, 256, 3, 1, "2x1", False), (128, 128, 5, 3, "2x1", False),
                                    (128, 128, 5, 3, "1x2", False), (128, 128, 6, 1, "2x1", False),
                                    (128, 128, 7, 1, "2x1", False), (128, 128, 3, 1, "2x1", True),
                                    (128, 128, 5, 1, "1x2", True), (64, 128, 8, 1, "2x1", True)]]


@NEEDS_NVCC
@pytest.mark.parametrize("cfg", _ODD_STAGES)
def test_cluster_kernels_with_odd_stage_counts_meet_the_targets(cfg):
    text = emit_sm90_kernel(cfg)
    # the slot and round are carried, not divided: no "% S" left in the consumer's main loop
    assert f"i_slot = " in text and f"% {cfg.stages})" not in text.split("---- consumer")[1].split("epilogue")[0]
    _sass_checks(cfg)


# ---------------------------------------------------------------------------------------------------------------
# the emulator
# ---------------------------------------------------------------------------------------------------------------

def _emulate(src, M, N, K, **kw):
    from synth.emit.sm90.emulate import emulate_sm90

    return emulate_sm90(src, M, N, K, **kw)


@NEEDS_GXX
@pytest.mark.parametrize("cluster, M, N, K, order", [("2x1", 150, 70, 64, "cta1_first"),
                                                     ("1x2", 70, 150, 320, "random")])
def test_cluster_kernel_on_the_emulator(cluster, M, N, K, order):
    # 3 tile rows (2x1) / columns (1x2) of 64: the grid rounds up to 4, and the fourth CTA's tile lies outside C
    cfg = KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster=cluster)
    r = _emulate(emit_sm90_kernel(cfg), M, N, K, order=order, with_c=True, alpha=0.5, beta=2.0, seed=3)
    assert r.ok, r.summary()
    tiles = 4 * 2  # 4 x 2 CTAs, each multicasting its half of every k-tile into both CTAs of its cluster
    assert r.stats["multicasts"] == tiles * -(-K // 64) and r.stats["multicast_copies"] == 2 * r.stats["multicasts"]
    assert r.stats["remote_arrivals"] == tiles * -(-K // 64)


SWEEP = [
    (KernelDesign.of(bm=128, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1"), 330, 70, 64),     # T = 1, 3 tile rows
    (KernelDesign.of(bm=128, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1"), 200, 136, 456),   # T = 8 > stages
    (KernelDesign.of(bm=64, bn=128, stages=3, k_pipe_mmas=0, cluster="1x2"), 100, 300, 200),   # 3 tile columns
    (KernelDesign.of(bm=64, bn=64, stages=4, k_pipe_mmas=3, cluster="1x2", dtype="bf16"), 64, 192, 512),
    (KernelDesign.of(bm=128, bn=128, stages=2, k_pipe_mmas=1, cluster="2x1", epilogue="tma_store"), 130, 136, 136),
]
ORDERS = ["forward", "reverse", "random", "starve", "cta0_first", "cta1_first"]


@pytest.mark.slow
@NEEDS_GXX
@pytest.mark.parametrize("k", range(len(SWEEP)))
def test_cluster_kernels_on_the_emulator(k):
    cfg, M, N, K = SWEEP[k]
    src = emit_sm90_kernel(cfg)
    for j, order in enumerate(ORDERS if EXPLORE else ORDERS[k % 3::3]):
        r = _emulate(src, M, N, K, order=order, seed=j, dtype=cfg.dtype, with_c=j % 2 == 0, beta=0.5,
                     block_order=("forward", "reverse", "shuffle:7")[j % 3])
        assert r.ok, (cfg, order, r.summary())


# stage counts that are not a power of two: the carried slots and rounds (a chain of moves for i - 1 and i - 2, a step
# for i - 3 and beyond; from kb in the persistent ring) compute C as the divisions did
_ODD_RUNS = [
    (KernelDesign.of(bm=64, bn=64, stages=3, k_pipe_mmas=2, cluster="2x1"), 130, 64, 7 * 64, None, "cta1_first"),
    pytest.param(KernelDesign.of(bm=64, bn=64, stages=5, k_pipe_mmas=3, cluster="1x2"), 64, 200, 13 * 64, None, "random",
                 marks=pytest.mark.slow),
    pytest.param(KernelDesign.of(bm=64, bn=64, stages=3, k_pipe_mmas=1, cluster="2x1", persistent=True), 330, 70, 5 * 64, 4,
                 "cta0_first", marks=pytest.mark.slow),
    pytest.param(KernelDesign.of(bm=64, bn=64, stages=7, k_pipe_mmas=4, cluster="1x2", persistent=True), 70, 200, 3 * 64, 2,
                 "starve", marks=pytest.mark.slow),
]


@NEEDS_GXX
@pytest.mark.parametrize("cfg, M, N, K, ctas, order", _ODD_RUNS)
def test_odd_stage_counts_on_the_emulator(cfg, M, N, K, ctas, order):
    src = emit_sm90_kernel(cfg)
    assert "i_slot" in src
    r = _emulate(src, M, N, K, order=order, with_c=True, beta=0.5, seed=5, **({"ctas": ctas} if ctas else {}))
    assert r.ok, (cfg, order, r.summary())


# The bug table of docs/hopper_cluster.md injected into the emitted kernel: the thread order that catches each
# (a CTA racing ahead of its peer shows a release counted in the wrong phase and an exit under a peer's arrive)
BUG_ORDER = {"local_empty_count": "cta0_first", "own_part_expect_tx": "forward", "mask_missing_peer": "forward",
             "cta_scope_init_fence": "forward", "no_cluster_sync_after_init": "forward",
             "no_cluster_sync_before_exit": "cta1_first", "trip_mismatch": "forward"}
BUG_CFG = KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1")
BUG_SHAPE = (128, 64, 192)  # one cluster, T = 3 > stages


def test_every_cluster_bug_has_its_order():
    assert set(BUG_ORDER) == set(CLUSTER_BUGS)


@NEEDS_GXX
@pytest.mark.parametrize("bug", [pytest.param(b, marks=[] if b == "no_cluster_sync_before_exit" else pytest.mark.slow)
                                 for b in BUG_ORDER])
def test_each_cluster_bug_fails_on_the_emulator(bug):
    fn = CLUSTER_BUGS[bug][0]
    r = _emulate(emit_sm90_kernel(BUG_CFG, fn(design_program(BUG_CFG))), *BUG_SHAPE, order=BUG_ORDER[bug])
    assert not r.ok, (bug, r.summary())
    assert r.kind in ("hang", "fault", "protocol") or r.nan_count or r.max_abs_err > 1e-2, r.summary()


@NEEDS_GXX
def test_the_correct_program_passes_where_the_bugs_fail():
    src = emit_sm90_kernel(BUG_CFG)
    for order in sorted(set(BUG_ORDER.values())):
        r = _emulate(src, *BUG_SHAPE, order=order)
        assert r.ok, (order, r.summary())

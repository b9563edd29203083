"""The Hopper model and search weigh thread-block clusters (docs/search.md, section 10, "Clusters").

Monotone where they must be: multicast lowers the L2 bytes a CTA reads for the shared operand (and only for it); an
odd tile count along the cluster's axis costs a CTA that computes nothing; the peer's remote release and the two
cluster barriers cost cycles. The search ranks only clusters the kernel's check and the emitter accept, and the
winner's reason weighs its cluster against one CTA per tile.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from synth.arch import get_arch
from synth.hopper.kernel_design import KernelDesign
from synth.search import search_gemm, search_result_to_json
from synth.search.hopper import (HopperPoint, cluster_kernel_issue, cluster_slots, enumerate_hopper_space,
                                 estimate_hopper, hopper_variants, is_legal_hopper, l2_ktile_bytes, prune_hopper)
from synth.search.hopper_search import hopper_context

H100 = get_arch("sm_90")
TILES = [(64, 64), (64, 256), (128, 128), (128, 256), (128, 48)]
SHAPE = (2048, 1024, 2048)
"""A shape whose winner is a 2x1 cluster (128x128), with 2x1 and 1x2 kernels among its first five candidates."""


@pytest.mark.parametrize("bm,bn", TILES)
def test_multicast_lowers_the_l2_reads_of_the_shared_operand_only(bm, bn):
    a, b = bm * 64 * 2, bn * 64 * 2
    one, b2, a2 = (HopperPoint(bm, bn, 4, 1, cluster=c) for c in ("1x1", "2x1", "1x2"))
    assert l2_ktile_bytes(one) == a + b
    assert l2_ktile_bytes(b2) == a + b // 2  # 2x1: B read once per pair
    assert l2_ktile_bytes(a2) == a // 2 + b  # 1x2: A read once per pair
    ctx = hopper_context(4096, 4096, 4096, "f16", "sm_90")
    e1, e2, e3 = (estimate_hopper(ctx, p) for p in (one, b2, a2))
    l2 = [dict(e.terms)["l2"] for e in (e1, e2, e3)]
    assert l2[1] < l2[0] and l2[2] < l2[0], l2
    assert dict(e2.terms)["tensor"] == dict(e1.terms)["tensor"]  # the same wgmma work per CTA
    # each SM still receives the whole tile (its own half and the peer's multicast): the ingress term is unchanged
    ingress = [dict(e.terms)["ingress"] for e in (e1, e2, e3)]
    assert ingress[0] == ingress[1] == ingress[2] == pytest.approx((a + b) / H100.l2_ingress_bytes_per_clk_sm, abs=0.1)
    assert e1.round_exact / e2.round_exact <= H100.l2_ingress_bytes_per_clk_sm / (H100.l2_bytes_per_clk / 132)


def test_the_ingress_figure_lies_within_its_bounds():
    """synth/arch.py: at least the SM's share of the L2 figure (every SM received it in the benchmark behind that
    figure), at most what fast.cu's measured cluster step allows (53.3 B/clk)."""
    assert H100.l2_bytes_per_clk / H100.sm_count <= H100.l2_ingress_bytes_per_clk_sm <= 53.3
    assert get_arch("sm_80").l2_ingress_bytes_per_clk_sm == 0  # no clusters, no separate figure


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4096, 4096, 4096), (6144, 6144, 6144)])
def test_the_cluster_gain_at_fast_cu_s_tile_is_within_its_measurement(shape):
    """fast.cu (H100 SXM, 8192^3): 2-CTA clusters with multicast at 128x256 on its persistent kernel, 777.5 -> 799.1
    TFLOP/s, +2.8 % (with a tile change of its own). The model's 2x1 cluster of 128x256 gains something over one CTA
    per tile and over the persistent kernel, and at most that: in the round and in the whole kernel."""
    ctx = hopper_context(*shape, "f16", "sm_90")
    one, per, two = (estimate_hopper(ctx, HopperPoint(128, 256, 4, 1, persistent=pe, cluster=c))
                     for pe, c in ((False, "1x1"), (True, "1x1"), (False, "2x1")))
    measured = 799.1 / 777.5
    assert 1 < one.round_exact / two.round_exact <= measured, (one.round_exact, two.round_exact)
    assert 1 < one.time_us / two.time_us <= measured and per.time_us / two.time_us <= measured


def test_an_odd_tile_count_along_the_cluster_axis_costs_a_wasted_cta():
    """33 tile rows of 128x256 (M = 4224): a 2x1 cluster's grid rounds up to 34 rows, one idle CTA per tile column
    (16), which takes a CTA slot (528 = 4 x 132 CTAs become 544: a fifth wave); 32 rows waste nothing. A 1x2
    cluster pairs tile columns (16, even) and wastes nothing on either shape."""
    even, odd = (hopper_context(M, 4096, 4096, "f16", "sm_90") for M in (4096, 4224))
    p2, p12 = HopperPoint(128, 256, 4, 1, cluster="2x1"), HopperPoint(128, 256, 4, 1, cluster="1x2")
    e_even, e_odd = estimate_hopper(even, p2), estimate_hopper(odd, p2)
    assert (e_even.ctas, e_even.idle_ctas) == (512, 0)
    assert (e_odd.ctas, e_odd.idle_ctas, e_odd.tiles) == (544, 16, 528)
    one_odd = estimate_hopper(odd, HopperPoint(128, 256, 4, 1))
    assert (one_odd.ctas, one_odd.waves, e_odd.waves) == (528, 4, 5)
    assert e_odd.time_us > one_odd.time_us  # the wasted slots cost a wave the multicast does not pay back
    assert estimate_hopper(odd, p12).idle_ctas == 0
    # one tile column (N = 64): a 1x2 cluster doubles the grid, half of it idle
    skinny = hopper_context(8192, 64, 8192, "f16", "sm_90")
    e = estimate_hopper(skinny, HopperPoint(64, 64, 8, 1, cluster="1x2"))
    assert e.idle_ctas == e.tiles == 128 and e.ctas == 256


def test_the_remote_release_and_the_cluster_barriers_cost_their_latency():
    ctx = hopper_context(4096, 4096, 4096, "f16", "sm_90")
    one, two = (estimate_hopper(ctx, HopperPoint(128, 256, 4, 1, cluster=c)) for c in ("1x1", "2x1"))
    assert two.fill_cycles - one.fill_cycles == H100.lat_remote_arrive > 0  # the peer's release in each refill
    assert two.cluster_sync_cycles == 2 * H100.lat_remote_arrive and one.cluster_sync_cycles == 0
    assert two.prologue_cycles - one.prologue_cycles == 3 * H100.lat_remote_arrive  # syncs + the longer fill
    assert H100.lat_remote_arrive <= H100.lat_l2  # an upper bound taken at the L2 hit latency (synth/arch.py)


def test_waves_are_counted_in_clusters_placed_on_whole_tpcs():
    assert cluster_slots(H100, 1, 2) == 66 and cluster_slots(H100, 1, 1) == 132
    with pytest.raises(ValueError, match="no exact placement"):
        cluster_slots(H100, 1, 4)
    one_sm = hopper_context(1024, 1024, 1024, "f16", replace(H100, sm_count=1))
    why = is_legal_hopper(one_sm, HopperPoint(128, 128, 4, 1, cluster="2x1"))
    assert why and why.startswith("cluster-kernel:") and "no GPC slot" in why, why


def test_clusters_are_never_split_or_ping_pong_and_persistent_where_the_kernel_builds_it():
    """The ranked cluster variants are one CTA per tile or persistent: the kernel builds no split or ping-pong
    cluster; a persistent cluster is legal exactly where the kernel's check and the emitter accept it."""
    ctx = hopper_context(2048, 2048, 2048, "f16", "sm_90")
    for p in (HopperPoint(128, 128, 4, 1, split_k=2, cluster="2x1"),
              HopperPoint(64, 128, 4, 1, persistent=True, pingpong=True, cluster="1x2")):
        assert is_legal_hopper(ctx, p) is not None, p
    for c in ("2x1", "1x2"):
        per = HopperPoint(128, 128, 4, 1, persistent=True, cluster=c)
        try:
            KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1, persistent=True, cluster=c).check()
            built = cluster_kernel_issue(KernelDesign.of(stages=4, k_pipe_mmas=1, cluster=c, persistent=True)) is None
        except ValueError:
            built = False
        assert built and is_legal_hopper(ctx, per) is None
    variants = hopper_variants(ctx, HopperPoint(128, 128, 4, 1))
    assert {v.cluster for v in variants} == {"1x1", "2x1", "1x2"}
    assert {(v.persistent, v.cluster) for v in variants if v.cluster != "1x1"} == \
        {(False, "2x1"), (False, "1x2"), (True, "2x1"), (True, "1x2")}
    assert all(not (v.pingpong or v.split_k > 1) for v in variants if v.cluster != "1x1")
    assert HopperPoint(128, 128, 4, 1, persistent=True, cluster="2x1").variant == "persistent 2x1 cluster"


def test_a_persistent_cluster_walks_cluster_sized_tile_groups():
    """A persistent 2x1 grid: one wave of whole clusters (66 of 2 on 132 SMs), each walking groups of 2 tiles; the
    busiest cluster's tile count is counted in groups (an odd count of tile rows makes a group of one tile and one
    zero-filled tile, which still takes the cluster's turn); the prologue (with the cluster barriers and the
    longer round trip) once per CTA, as for the persistent kernel without a cluster."""
    big = hopper_context(8192, 8192, 8192, "f16", "sm_90")
    pts = {(pe, c): HopperPoint(128, 256, 4, 1, persistent=pe, cluster=c)
           for pe in (False, True) for c in ("1x1", "2x1")}
    e = {k: estimate_hopper(big, p) for k, p in pts.items()}
    pc = e[(True, "2x1")]
    assert (pc.ctas, pc.tiles_per_cta, pc.idle_ctas, pc.waves) == (132, 16, 0, 1)  # 1,024 groups over 66 clusters
    assert pc.prologue_cycles == e[(True, "1x1")].prologue_cycles + 3 * H100.lat_remote_arrive
    # the persistent cluster saves the per-wave prologues the one-tile cluster pays, and multicasts as it does
    assert pc.time_us < e[(False, "2x1")].time_us and pc.time_us < e[(True, "1x1")].time_us
    assert pc.fixed_cycles < e[(False, "2x1")].fixed_cycles
    # fast.cu's measured step (persistent -> persistent + 2-CTA clusters, 8192^3): +2.8 %, at most
    assert e[(True, "1x1")].time_us / pc.time_us <= 799.1 / 777.5
    # 33 tile rows: 17 x 16 = 272 groups over 66 clusters -> 5 groups for the busiest (4 tiles without a cluster)
    odd = hopper_context(4224, 4096, 4096, "f16", "sm_90")
    o1, o2 = (estimate_hopper(odd, HopperPoint(128, 256, 4, 1, persistent=True, cluster=c)) for c in ("1x1", "2x1"))
    assert (o1.ctas, o1.tiles_per_cta) == (132, 4)
    assert (o2.ctas, o2.tiles_per_cta, o2.idle_ctas) == (132, 5, 16) and o2.time_us > o1.time_us
    # fewer groups than a wave: one cluster per group (16 groups of 128x256 at 1024^3 -> 32 CTAs, one group each)
    small = estimate_hopper(hopper_context(1024, 1024, 1024, "f16", "sm_90"), pts[(True, "2x1")])
    assert (small.ctas, small.tiles_per_cta) == (32, 1)


def test_the_search_ranks_only_buildable_clusters_and_says_why_the_winner_won():
    # 2048x1024x2048: 128 tiles of 128x128 in one wave, L2-bound; the winner is a 2x1 cluster (a tie within the
    # model's error: its multicast saves more main-loop cycles than its barriers and longer round trips cost)
    res = search_gemm(*SHAPE, arch="sm_90", top=5, references=False)
    ctx = hopper_context(*SHAPE, "f16", "sm_90")
    clustered = [c for c in res.candidates if c.cluster != "1x1"]
    assert clustered, [c.label for c in res.candidates]
    for c in clustered:  # each is a kernel the check and the emitter accept
        KernelDesign.of(bm=c.BM, bn=c.BN, stages=c.stages, k_pipe_mmas=c.k_pipe_mmas, cluster=c.cluster,
                   epilogue=c.config.epilogue).check()
        assert cluster_kernel_issue(c.config.design) is None
        assert c.label.endswith(f"cluster{c.cluster}") and f"-cluster{c.cluster}-" in c.name
    w = res.winner
    assert "cluster 2x1 (B multicast): a CTA reads" in w.why and "cluster 1x2 (A multicast)" in w.why, w.why
    assert "KiB per k-tile from L2 instead of" in w.why and "cluster barriers" in w.why, w.why
    assert "but each SM still receives 32 KiB (its own half of B and the peer's multicast half) through its 53 B/clk " \
        "port" in w.why, w.why
    doc = search_result_to_json(res)
    assert all(c["cluster"] in ("1x1", "2x1", "1x2") for c in doc["candidates"])
    assert all(isinstance(c["model"]["idle_ctas"], int) for c in doc["candidates"])
    off = search_gemm(*SHAPE, arch="sm_90", top=5, references=False, clusters=False)
    assert all(c.cluster == "1x1" for c in off.candidates) and "multicast" not in off.winner.why
    # the legal set of the space is unchanged: the 8,192 points are one CTA per tile, no cluster
    legal, first, _ = prune_hopper(ctx, enumerate_hopper_space())
    assert first["cluster-kernel"] == 0


def test_the_search_ranks_a_persistent_cluster_and_says_why_it_won():
    """4096^3: 512 tiles of 128x256, 256 groups of 2 over 66 clusters; the persistent 2x1 cluster wins (fast.cu's
    configuration), by at most fast.cu's measured cluster step over the persistent kernel without a cluster, and the
    reason weighs it against that kernel and against the 2x1 cluster of one CTA per tile."""
    res = search_gemm(4096, 4096, 4096, arch="sm_90", top=3, references=False)
    w = res.winner
    assert (w.config.persistent, w.config.cluster, w.BM, w.BN) == (True, "2x1", 128, 256), w.label
    assert w.label.endswith(" persistent cluster2x1") and "-pers-c2x1-" in w.name, (w.label, w.name)
    KernelDesign.of(bm=w.BM, bn=w.BN, stages=w.stages, k_pipe_mmas=w.k_pipe_mmas, persistent=True, cluster="2x1").check()
    assert "132 persistent CTAs at 1/SM (registers-limited) in 66 2x1 clusters walking 256 groups of 2 tiles" in w.why
    assert "persistent 2x1 cluster is the fastest of the" in w.why, w.why
    assert "persistent cluster 2x1: 132 CTAs in 66 clusters walk 256 groups of 2 tiles, the busiest 4 " \
        "(ceil(256 / 66); persistent without a cluster: 4 tiles per CTA)" in w.why, w.why
    assert "persistent cluster 2x1 predicted 2." in w.why and "faster than persistent without a cluster" in w.why
    assert "faster than cluster 2x1 of one CTA per tile" in w.why, w.why
    ctx = hopper_context(4096, 4096, 4096, "f16", "sm_90")
    per = estimate_hopper(ctx, HopperPoint(w.BM, w.BN, w.stages, w.k_pipe_mmas, persistent=True))
    assert 1 < per.time_us / w.time_us <= 799.1 / 777.5
    doc = search_result_to_json(res)["candidates"][0]
    assert (doc["cluster"], doc["model"]["tiles_per_cta"]) == ("2x1", 4), doc
    off = search_gemm(4096, 4096, 4096, arch="sm_90", top=1, references=False, clusters=False)
    assert off.winner.config.persistent and off.winner.cluster == "1x1"


@pytest.mark.slow
def test_a_persistent_cluster_winner_folder_pins_both_keys_and_is_proven(tmp_path):
    """The 4096^3 winner's --top folder: problem.yaml pins persistent: true and cluster: 2x1, synth solve's flow
    proves its program (every obligation) and emits the persistent cluster kernel (the cluster's tile groups).
    About 15 s (the proof of the persistent cluster ring, 10 s of it)."""
    from synth.flow.candidates import write_candidates

    res = search_gemm(4096, 4096, 4096, arch="sm_90", top=1, references=False)
    (folder,) = write_candidates(res, str(tmp_path / "s"), k=1, time_limit=300)
    out = tmp_path / "s" / folder.rsplit("/", 1)[-1]
    text = (out / "problem.yaml").read_text()
    assert "persistent: true" in text and "cluster: 2x1" in text, text
    assert "all obligations proven" in (out / "verify.txt").read_text()
    kernel = (out / "kernel.cu").read_text()
    assert "__cluster_dims__(SYNTH_CLUSTER_N, SYNTH_CLUSTER_M, 1)" in kernel and "n_tiles" in kernel


def test_a_cluster_the_emitter_cannot_build_is_not_ranked(monkeypatch):
    """With an emitter that refuses clusters (as before it built them), no cluster variant is ranked and the winner's
    reason says why, naming the emitter's refusal."""
    import synth.emit.sm90.kernel as kernel

    real = kernel.emit_sm90_kernel

    def refusing(cfg, *a, **kw):
        if cfg.cluster != "1x1":
            raise ValueError("expected a producer role of 1 warp group")
        return real(cfg, *a, **kw)

    monkeypatch.setattr(kernel, "emit_sm90_kernel", refusing)
    cluster_kernel_issue.cache_clear()
    try:
        res = search_gemm(1024, 1024, 1024, arch="sm_90", top=5, references=False)
        assert all(c.cluster == "1x1" for c in res.candidates), [c.label for c in res.candidates]
        assert "cluster 2x1 is not ranked for this tile (cluster-kernel: the sm_90a emitter does not build it yet " \
               "(expected a producer role" in res.winner.why, res.winner.why
    finally:
        cluster_kernel_issue.cache_clear()


def test_a_cluster_candidate_the_problem_cannot_say_is_refused_before_anything_is_written(tmp_path):
    """A candidate whose pinned problem lost its cluster (a problem format without the key) is never written as the
    one-CTA-per-tile kernel under the cluster's name: write_candidates refuses it first, and writes nothing."""
    from synth.errors import SynthError
    from synth.flow.candidates import write_candidates

    res = search_gemm(*SHAPE, arch="sm_90", top=2, references=False)
    c = next(c for c in res.candidates if c.cluster != "1x1")
    lost = replace(res, candidates=(replace(c, config=c.config.with_(cluster="1x1")),))
    out = tmp_path / "s"
    with pytest.raises(SynthError, match=r"cluster kernel.*--no-clusters|no cluster key"):
        write_candidates(lost, str(out), k=1)
    assert not out.exists()


@pytest.mark.slow
def test_a_cluster_winner_folder_says_so_and_matches_numpy_on_the_emulator(tmp_path):
    """2048x1024x2048: the winner is a 2x1 cluster; its --top folder pins cluster: 2x1 and its kernel, loaded by
    synth.kernel.load, equals numpy on the emulator, with an odd count of tile rows (one idle CTA per column)."""
    import numpy as np

    from synth.kernel import load
    from synth.flow.candidates import write_candidates

    res = search_gemm(*SHAPE, arch="sm_90", top=1, references=False)
    w = res.winner
    assert w.cluster == "2x1", w.label
    (folder,) = write_candidates(res, str(tmp_path / "s"), k=1)
    assert "cluster: 2x1" in (tmp_path / "s" / folder.rsplit("/", 1)[-1] / "problem.yaml").read_text()
    kern = load(folder, backend="emulator")
    rng = np.random.default_rng(3)
    M = 3 * w.BM - 8  # 3 tile rows: the cluster grid rounds them up to 4
    A = rng.standard_normal((M, 128)).astype(np.float16)
    B = rng.standard_normal((2 * w.BN, 128)).astype(np.float16)
    got = kern(A, B)
    assert np.allclose(got, A.astype(np.float32) @ B.astype(np.float32).T, atol=1e-2, rtol=1e-3)


def test_the_pipeline_model_adds_the_remote_release_to_a_clusters_round_trip():
    from synth.gemm import GemmConfig
    from synth.model.hopper import loop_cost

    cfg = GemmConfig(128, 256, 64 * 32, "f16", 128, 256, 64, 12, 4, "sm_90")
    one, two = (loop_cost(cfg, 4, 1, 2, 32, cluster=n) for n in (1, 2))
    assert two.fill - one.fill == H100.lat_remote_arrive and two.per_tile >= one.per_tile
    for bad in ({"cluster": 3}, {"cluster": 2, "warp_specialized": False}):
        with pytest.raises(ValueError, match="clusters of 1 or 2 warp-specialized CTAs"):
            loop_cost(cfg, 4, 1, 2 if bad.get("warp_specialized", True) else 1, 32, **bad)

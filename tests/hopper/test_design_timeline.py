"""Every design the problem reader accepts gets a timeline (synth.emit.timeline_pingpong.design_timeline, what an
output folder's timeline.png is): persistent x pingpong x epilogue x cluster. The persistent cluster with the
TMA-store epilogue was sent to the one-CTA view and 'synth solve' exited 3 after the whole proof. At the
timeline level: the drawn program runs without a hang or violation, each consumer role of each
CTA stores each tile's C (the TMA stores under the next main loop)."""

from __future__ import annotations

import itertools

import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.timeline_hopper import simulate
from synth.emit.timeline_pingpong import design_timeline, design_view, pingpong_view, timeline_kind
from synth.errors import SynthError
from synth.load import load_problem_text
from synth.lower.hopper_design import design_program

BASE = ("name: g\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ndtype: f16\ntile: {BM: 64, BN: 64, BK: 64}\n"
        "arch: sm_90\nmainloop: tma_wgmma\nstages: 2\nk_pipe_mmas: 1\n")
FLAGS = list(itertools.product((False, True), (False, True), ("register", "tma_store"), ("1x1", "2x1", "1x2")))


def _accepted(persistent, pingpong, epilogue, cluster) -> bool:
    text = BASE + (f"persistent: {str(persistent).lower()}\npingpong: {str(pingpong).lower()}\n"
                   f"epilogue: {epilogue}\ncluster: {cluster}\n")
    try:
        load_problem_text(text)
    except SynthError:
        return False
    return True


ACCEPTED = [f for f in FLAGS if _accepted(*f)]


def _cfg(persistent, pingpong, epilogue, cluster) -> KernelDesign:
    return KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, persistent=persistent, pingpong=pingpong,
                      epilogue=epilogue, cluster=cluster)


def test_the_reader_and_the_kernel_accept_the_same_designs():
    # 14 of the 24: ping-pong needs persistent and no cluster
    assert len(ACCEPTED) == 14
    for flags in FLAGS:
        try:
            _cfg(*flags).check()
            ok = True
        except ValueError:
            ok = False
        assert ok == (flags in ACCEPTED), flags


@pytest.mark.parametrize("flags", ACCEPTED, ids=["-".join(map(str, f)) for f in ACCEPTED])
def test_every_accepted_design_is_drawn(flags):
    persistent, pingpong, epilogue, cluster = flags
    cfg = _cfg(*flags)
    ring = design_program(cfg)
    view, trip = design_view(ring, cfg)
    kind = timeline_kind(persistent=persistent, pingpong=pingpong, epilogue=epilogue)
    T, events = simulate(view, trip)
    assert not [e for e in events if e.kind in ("violation", "hang")], [e.label for e in events
                                                                       if e.kind in ("violation", "hang")]
    if kind == "ring":
        assert view is ring and trip is None
        return
    assert trip == 12  # 4 tiles of 3 k-tiles
    ctas = cfg.cluster_size
    consumers = [r.name for r in view.roles if r.name.startswith("consumer")]
    assert consumers == (["consumer0", "consumer1"] if pingpong or ctas > 1 else ["consumer"])
    stores = [e for e in events if (e.kind == "store" if epilogue == "tma_store" else
                                    e.kind == "op" and e.label.startswith("store_C"))]
    # every tile's C once: by its warp group (ping-pong) or by each CTA's consumer warp groups (cooperative)
    wgs = sum(r.warpgroups for r in view.roles if r.name.startswith("consumer"))
    assert len(stores) == (4 if pingpong else 4 * wgs), [(e.lane, e.label) for e in stores]


@pytest.mark.parametrize("cluster", ["2x1", "1x2"])
def test_a_persistent_cluster_draws_each_cta_s_stores_under_its_next_main_loop(cluster):
    cfg = KernelDesign.of(bm=128, bn=128, stages=4, persistent=True, epilogue="tma_store", cluster=cluster)
    view = pingpong_view(design_program(cfg), kt=3, tiles=4, pingpong=False, tma_store=True)
    _, events = simulate(view, 12)
    assert not [e for e in events if e.kind in ("violation", "hang")]
    for c in (0, 1):
        lane = f"consumer{c} 0"  # the first of the CTA's two consumer warp groups
        stores = sorted((e for e in events if e.kind == "store" and e.lane == lane), key=lambda e: e.start)
        groups = {e.iteration: e for e in events if e.kind == "wgmma" and e.lane == lane}
        assert len(stores) == 4 and all(f"tma_store_C{c}" in e.label for e in stores)
        # tile 0's TMA store runs while the same warp group computes tile 1 (k-tiles 3..5)
        assert stores[0].start < groups[3].end and stores[0].end > groups[4].active_from


def test_ping_pong_on_a_cluster_ring_is_refused_by_the_view():
    ring = design_program(KernelDesign.of(bm=64, bn=64, stages=2, persistent=True, cluster="2x1"))
    with pytest.raises(ValueError, match="not a design synth builds"):
        pingpong_view(ring, pingpong=True)
    from dataclasses import replace

    odd = replace(ring, roles=tuple(replace(r, name=r.name.replace("producer", "loader")) for r in ring.roles))
    with pytest.raises(ValueError, match="expected roles"):
        pingpong_view(odd, pingpong=False)


@pytest.mark.parametrize("flags", [(True, False, "tma_store", "2x1"), (True, True, "tma_store", "1x1"),
                                   (False, False, "tma_store", "1x2")], ids=["pcl-store", "pingpong-store", "cl"])
def test_the_folder_timeline_is_written(flags):
    cfg = _cfg(*flags)
    svg, png = design_timeline(design_program(cfg), cfg)
    assert png.startswith(b"\x89PNG") and svg.lstrip().startswith("<?xml")
    if flags[0]:
        assert "TMA store" in svg and "view" in svg

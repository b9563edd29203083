"""The sm_90a emulator runs a thread-block cluster's CTAs together (docs/emulator.md, "Clusters"): a
hand-written 2-CTA cluster GEMM (tests/hopper/cluster_emu/kernel.cu: B multicast to both CTAs, empty
barriers released remotely through mapa) computes the right C under every thread order and block order, and
each cluster bug it can carry is reported naming the CTAs: a missing cluster barrier or fence after the
barrier inits (fault), a CTA leaving before its peer's last remote arrive or with a peer's multicast still in
flight into it (protocol), a multicast mask that misses the peer (hang, each waiter's CTA named). A kernel
without a cluster (1x1) runs as before: the cluster orders change nothing there."""

import pathlib
import shutil

import numpy as np
import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import CTA_FIRST, ORDERS, emulate_sm90, order_code, run_emulated
from synth.emit.sm90.kernel import emit_sm90_kernel

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")

KERNEL = (pathlib.Path(__file__).parent / "cluster_emu" / "kernel.cu").read_text()
# 3 x 2 tiles of 64 x 64, the grid rounded up to 4 x 2 CTAs (two clusters per tile column); 5 k-tiles, 2 stages
SHAPE = (192, 128, 320)
CTA0, CTA1 = "CTA 0 (block 0,0)", "CTA 1 (block 0,1)"


def run(bug: str, order: str, monkeypatch, **kw):
    if bug:
        monkeypatch.setenv("SYNTH_TEST_BUG", bug)
    else:
        monkeypatch.delenv("SYNTH_TEST_BUG", raising=False)
    return emulate_sm90(KERNEL, *SHAPE, order=order, seed=3, **kw)


def test_orders_and_codes():
    assert ORDERS[-2:] == ("cta0_first", "cta1_first")
    assert order_code("cta0_first") == CTA_FIRST and order_code("cta1_first") == CTA_FIRST + 1
    assert order_code("random", seed=7) == 2 + 7 and order_code("forward") == 0


@pytest.mark.parametrize("order", ORDERS)
def test_multicast_ring_computes_c(order, monkeypatch):
    r = run("", order, monkeypatch, block_order="shuffle:5" if order == "random" else "reverse")
    assert r.ok, r.summary()
    assert r.kind == "" and r.max_abs_err < 1e-4 and r.stats["poisoned_ops"] == 0 and r.stats["waw"] == 0
    # 8 CTAs x 5 k-tiles: one multicast each, landing in both CTAs; one remote release each; two cluster
    # barriers per cluster (after the inits, before the exit)
    assert r.stats["multicasts"] == 40 and r.stats["multicast_copies"] == 80
    assert r.stats["landed"] == 40 + 80 and r.stats["remote_arrivals"] == 40 and r.stats["cluster_syncs"] == 8


def test_harness_cluster_grid_and_boxes(monkeypatch):
    monkeypatch.delenv("SYNTH_TEST_BUG", raising=False)
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (SHAPE[0], SHAPE[2])).astype(np.float16)
    B = rng.uniform(-1, 1, (SHAPE[1], SHAPE[2])).astype(np.float16)
    C, info = run_emulated(KERNEL, A.view(np.uint16), B.view(np.uint16), order="cta1_first")
    assert info["ok"], info["message"]
    assert info["cluster_size"] == 2 and info["clusters"] == 4
    assert [m["box"] for m in info["tensor_maps"]] == [[64, 64], [64, 32]]  # B's box: the half each CTA loads
    assert np.allclose(C, A.astype(np.float64) @ B.astype(np.float64).T, atol=1e-3)


@pytest.mark.parametrize("order", ["forward", "cta0_first", "cta1_first"])
def test_missing_cluster_sync_after_init_faults(order, monkeypatch):
    r = run("no_cluster_sync", order, monkeypatch)
    assert r.kind == "fault", r.summary()
    assert "TMA multicast" in r.message and "full[0]" in r.message
    assert CTA0 in r.message and CTA1 in r.message
    assert "not visible to the cluster" in r.message or "uninitialized" in r.message


def test_missing_init_fence_faults(monkeypatch):
    r = run("no_fence", "forward", monkeypatch)
    assert r.kind == "fault", r.summary()
    assert "ran no fence.mbarrier_init" in r.message and CTA0 in r.message and CTA1 in r.message


@pytest.mark.parametrize("order,exited,peer", [("cta0_first", CTA0, CTA1), ("cta1_first", CTA1, CTA0)])
def test_cta_exiting_before_peer_remote_arrive_is_reported(order, exited, peer, monkeypatch):
    r = run("early_exit", order, monkeypatch)
    assert r.kind == "protocol", r.summary()
    assert r.message.startswith(f"mbarrier.arrive.release.cluster by {peer} on mbarrier empty[")
    assert f"of {exited}, which has exited" in r.message


def test_peer_multicast_in_flight_at_exit_is_reported(monkeypatch):
    r = run("consumer_short", "forward", monkeypatch)
    assert r.kind == "protocol", r.summary()
    assert f"{CTA1} exits while a TMA multicast from {CTA0} into it is in flight" in r.message
    assert "full[" in r.message


@pytest.mark.parametrize("order", ["forward", "cta1_first"])
def test_mask_missing_peer_hangs_naming_each_waiters_cta(order, monkeypatch):
    r = run("mask_own", order, monkeypatch)
    assert r.kind == "hang", r.summary()
    for cta in (CTA0, CTA1):  # each CTA's consumers wait on its full barrier, short of the peer's half
        assert f"128 thread(s) at {cta}: try_wait.parity 0 on mbarrier full[0] (shared " in r.message
        assert f"of {cta} (phases completed 0, pending arrivals 0/1, tx 4096)" in r.message


@pytest.mark.parametrize("bug,message", [
    ("mask_wide", "TMA multicast mask 0x7 names a CTA outside the cluster of 2 CTA(s)"),
    ("mapa_outside", "mapa to CTA rank 2 outside the cluster of 2 CTA(s)"),
    ("wait_remote", "mbarrier.try_wait on a shared::cluster address (from mapa): it takes a barrier of the calling "
                    "thread's own CTA (a shared::cta address)"),
])
def test_addresses_outside_the_cluster_fault(bug, message, monkeypatch):
    r = run(bug, "forward", monkeypatch)
    assert r.kind == "fault", r.summary()
    assert r.message in (f"{CTA0}: {message}", f"{CTA1}: {message}")  # named by the CTA that ran it


def test_1x1_kernel_unchanged_under_cluster_orders():
    cu = emit_sm90_kernel(KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=1))
    runs = {o: emulate_sm90(cu, 200, 136, 448, order=o, with_c=True, alpha=0.5, beta=-1.5)
            for o in ("forward", "cta0_first", "cta1_first")}
    for o, r in runs.items():
        assert r.ok, (o, r.summary())
        assert r.stats["multicasts"] == r.stats["remote_arrivals"] == r.stats["cluster_syncs"] == 0
    # a cluster of one CTA: the cluster orders are round robin, thread for thread as forward
    assert np.array_equal(runs["forward"].C, runs["cta0_first"].C, equal_nan=True)
    assert np.array_equal(runs["forward"].C, runs["cta1_first"].C, equal_nan=True)
    assert runs["forward"].stats == runs["cta0_first"].stats == runs["cta1_first"].stats

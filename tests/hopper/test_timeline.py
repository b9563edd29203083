"""The protocol picture of a Hopper program: one run under the latency model, checked against the
protocol (loads land before their wgmma, refills wait for releases, waits pass on their phase),
hangs and violations of the known bug shapes' mutants (judged against the exhaustive oracle), and a
deterministic SVG/PNG naming every lane."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.timeline_hopper import (MAX_TRIP, HopperLatency, default_trip, hopper_timeline_events,
                                        render_hopper_timeline, simulate)
from synth.gemm import GemmConfig
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_choice
from synth.model.hopper import choose
from synth.hopper.mutants import mutants
from synth.lower.barriers import lower_hopper, lower_hopper_single
from synth.verify.oracle_phases import run
from synth.lower.hopper_design import design_program

WS4 = design_program(KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1))
SINGLE = lower_hopper_single(HopperLoop("single", (Load("tma_A", "A_s", 16384),
                                                   Load("tma_B", "B_s", 16384, "k < T - 1")), "wgmma", 3, 1, 1))
SMALL = lower_hopper(HopperLoop("small", (Load("load_A", "A", 16384), Load("load_B", "B", 8192, "k < T - 1")),
                                "mma", 2, 1, 1))


def _model_program():
    cfg = GemmConfig(4096, 4096, 128, "f16", 64, 64, 64, arch="sm_90")
    return lower_choice(cfg, choose(cfg, time_limit=5))


def _texts(svg: str) -> str:
    root = ET.fromstring(svg)
    return " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))


def _by(events, kind, lane=None):
    return [e for e in events if e.kind == kind and (lane is None or e.lane == lane)]


def _check_protocol(program, T: int) -> None:
    """The user-visible facts of a correct program's run at trip count ``T``."""
    events = hopper_timeline_events(program, trip=T, n_iters=T)
    assert not _by(events, "hang") and not _by(events, "violation"), [e.label for e in events
                                                                     if e.kind in ("hang", "violation")]
    stages = max(b.slots for b in program.barriers)
    tmas = _by(events, "tma")
    consumers = sorted({e.lane for e in _by(events, "wgmma")})
    wgs = sum(r.warpgroups for r in program.roles if r.program.waits)
    assert len(consumers) == wgs
    for lane in consumers:
        groups = _by(events, "wgmma", lane)
        # one wgmma group per k-tile, in order, each executing after the previous completed
        assert [g.iteration for g in groups] == list(range(T))
        assert all(a.end <= b.active_from for a, b in zip(groups, groups[1:]))
        for g in groups:
            mine = [t for t in tmas if t.iteration == g.iteration]
            assert mine, f"k-tile {g.iteration} has no TMA"
            # every TMA of k-tile k lands before the wgmma of k-tile k is issued
            assert all(t.end <= g.start for t in mine), (g, mine)
        # wait_group N passes with at most N of the warp group's groups still running
        for w in _by(events, "wgwait", lane):
            running = [g for g in groups if g.start <= w.start and g.end > w.end]
            assert len(running) <= w.count
    has_empty = any(b.kind == "empty" for b in program.barriers)
    for t in tmas:
        prev = t.iteration - stages
        if prev < 0:
            continue
        if has_empty:
            # the refill is issued after every consumer released the slot's previous tile
            rel = [r for r in _by(events, "release") if r.iteration == prev]
            assert len(rel) == wgs and all(r.start <= t.start for r in rel), (t, rel)
            done = [p for p in _by(events, "phase") if p.barrier == "empty" and p.iteration == prev]
            assert len(done) == 1 and done[0].end <= t.start
        else:
            # one warp group: the refill follows the completion of the wgmma reading the slot
            g = [g for g in _by(events, "wgmma") if g.iteration == prev]
            assert g and all(x.end <= t.start for x in g)
    # a try_wait passes only once the phase it waits for has completed (never early)
    phases = {(p.barrier, p.slot, p.phase): p.end for p in _by(events, "phase")}
    for w in _by(events, "wait"):
        if w.phase >= 0:
            assert phases[(w.barrier, w.slot, w.phase)] <= w.end, w


@pytest.mark.parametrize("T", [1, 2, 3, 6, 9])
def test_warp_specialized_run_follows_the_protocol(T):
    _check_protocol(WS4, T)


@pytest.mark.parametrize("T", [1, 2, 5])
def test_single_warp_group_run_follows_the_protocol(T):
    _check_protocol(SINGLE, T)


def test_model_chosen_program_follows_the_protocol():
    p = _model_program()
    for T in (1, 2, default_trip(p)):
        _check_protocol(p, T)


def test_phases_are_numbered_with_their_parity():
    events = hopper_timeline_events(WS4, trip=9, n_iters=9)
    full0 = [p for p in _by(events, "phase", "full[0]")]
    assert [(p.phase, p.parity, p.iteration) for p in full0] == [(0, 0, 0), (1, 1, 4), (2, 0, 8)]
    assert all(p.label == f"ph{p.phase} p{p.parity}" for p in full0)
    empty1 = _by(events, "phase", "empty[1]")
    assert [(p.phase, p.iteration) for p in empty1] == [(0, 1), (1, 5)]
    # the producer's first pass over the ring waits on phase -1 of each empty slot: it passes at once
    first = _by(events, "wait", "producer")[:4]
    assert [w.parity for w in first] == [1, 1, 1, 1] and all(w.end - w.start <= 20 for w in first)


def test_latency_model_and_first_tiles():
    lat = HopperLatency(tma_cycles=300, wgmma_cycles=100, issue_cycles=1, arrive_cycles=2, wake_cycles=3)
    events = hopper_timeline_events(WS4, trip=12, n_iters=3, latency=lat)
    assert {e.iteration for e in events} <= {-1, 0, 1, 2}
    assert all(e.end - e.start == 300 for e in _by(events, "tma"))
    assert all(e.end - e.active_from == 100 for e in _by(events, "wgmma"))
    _, every = simulate(WS4, 12, lat)
    assert len(_by(every, "wgmma", "consumer 0")) == 12
    # deterministic
    assert hopper_timeline_events(WS4, trip=12, n_iters=3, latency=lat) == events


def test_bounds_are_refused():
    with pytest.raises(ValueError, match="trip count 0"):
        hopper_timeline_events(WS4, trip=0)
    with pytest.raises(ValueError, match="outside"):
        hopper_timeline_events(WS4, trip=MAX_TRIP + 1)
    with pytest.raises(ValueError, match="n_iters"):
        hopper_timeline_events(WS4, n_iters=0)
    with pytest.raises(ValueError, match="tma_cycles"):
        HopperLatency(tma_cycles=0)
    with pytest.raises(ValueError, match="wake_cycles"):
        HopperLatency(wake_cycles=-1)
    fixed = replace(WS4, trip_count=5)
    with pytest.raises(ValueError, match="fixed trip count 5"):
        hopper_timeline_events(fixed, trip=4)
    assert default_trip(WS4) == 6 and default_trip(replace(WS4, min_trip_count=9)) == 9


def test_default_draws_the_whole_default_run():
    """5 stages: T = 7 by default, and all 7 k-tiles are drawn (refill of slot 0 and the drain included)."""
    p5 = design_program(KernelDesign.of(bm=128, bn=128, stages=5, k_pipe_mmas=1))
    events = hopper_timeline_events(p5)
    assert {e.iteration for e in _by(events, "wgmma")} == set(range(7))
    assert [e.iteration for e in _by(events, "release", "consumer 1")] == list(range(7))
    assert len(hopper_timeline_events(p5, trip=20)) < len(simulate(p5, 20)[1])
    svg, _ = render_hopper_timeline(p5)
    assert "T = 7" in _texts(svg) and "drawn" not in _texts(svg) and "empty[4]" in _texts(svg)


@pytest.mark.parametrize("name,T,kind,cls", [
    ("release removed", 6, "hang", None),
    ("bytes +16", 1, "hang", None),
    ("bytes -16", 2, "hang", None),
    ("arrive.expect_tx without arrive", 1, "hang", None),
    ("parity flipped", 6, "violation", "raw"),
    ("arrival added", 6, "violation", "arrivals"),
    ("release before wait_group", 6, "violation", "release_after_wgmma"),
    ("wait_group #0 + 1", 6, "violation", "release_after_wgmma"),
])
def test_mutants_of_the_sm90_program_are_shown(name, T, kind, cls):
    m = dict((n, p) for n, p, _ in mutants(WS4))[name]
    events = hopper_timeline_events(m, trip=T)
    bad = _by(events, kind)
    assert bad
    if cls:
        assert any(e.label.startswith(cls + ":") for e in bad)
    else:
        assert all(e.label.startswith("hang: ") and "never passes" in e.label for e in bad)
        # the hang is at the wait: nothing of that warp group happens after it
        for h in bad:
            assert all(e.start <= h.start for e in events if e.lane == h.lane and e.kind != "hang")
    # correct program, same trip count: nothing to show
    assert not _by(hopper_timeline_events(WS4, trip=T), kind)


@pytest.mark.parametrize("program", [SMALL, SINGLE], ids=["ws", "single"])
def test_hangs_and_violations_agree_with_the_oracle(program):
    """The run is one execution of the oracle's: each hang is a deadlock the oracle finds and each
    violation one of its classes; and at these trip counts the run shows every mutant the oracle
    refutes (none looks clean in the picture)."""
    for name, m, _ in mutants(program):
        for T in (1, 2, 3):
            events = hopper_timeline_events(m, trip=T, n_iters=T)
            oracle = run(m, T, max_states=50_000)
            assert oracle.complete
            ours = {"no_deadlock" if e.kind == "hang" else e.label.split(":")[0]
                    for e in events if e.kind in ("hang", "violation")}
            assert ours <= oracle.classes, (name, T, ours, oracle.violations)
            assert bool(ours) == bool(oracle.classes), (name, T, oracle.violations)


def test_render_is_deterministic_and_names_every_lane():
    svg, png = render_hopper_timeline(WS4)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    text = _texts(svg)
    for lane in ("producer", "producer TMA", "consumer 0", "consumer 1", "consumer 1 wgmma", "full[0]", "full[3]",
                 "empty[0]", "empty[3]"):
        assert lane in text
    assert "gemm_sm90" in text and "4 stages" in text and "K_PIPE_MMAS = 1" in text and "T = 6" in text
    assert "ph1 p1" in text and "k-tile 5" in text and "HANG" not in text
    assert render_hopper_timeline(WS4) == (svg, png)


def test_render_of_a_hang_and_of_short_loops():
    m = dict((n, p) for n, p, _ in mutants(WS4))["release removed"]
    svg, _ = render_hopper_timeline(m)
    text = _texts(svg)
    assert "HANG" in text and "hang: try_wait.parity 0 on empty[0] never passes" in text
    for T in (1, 2):
        svg, png = render_hopper_timeline(WS4, trip=T)
        assert f"T = {T}" in _texts(svg) and png.startswith(b"\x89PNG")
    svg, _ = render_hopper_timeline(SINGLE, trip=9, n_iters=4)
    text = _texts(svg)
    assert "mainloop" in text and "first 4 k-tiles drawn" in text and "empty[" not in text

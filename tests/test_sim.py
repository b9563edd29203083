"""The independent simulator: hand-computed timings, replay checks, stalls and hazards."""

from __future__ import annotations

import pathlib
from dataclasses import replace

import pytest

from synth.graph import build_graph
from synth.load import load_problem, load_problem_text
from synth.randgen import random_problem, random_schedule
from synth.schedule import Timing, schedule_from_pins
from synth.sim import best_timing, check_timing, offsets_at, replay, simulate

PROBLEMS = pathlib.Path(__file__).resolve().parent.parent / "problems"


def _pinned(name: str):
    p = load_problem(str(PROBLEMS / f"{name}.yaml"))
    g = build_graph(p)
    return p, g, schedule_from_pins(p, g)


def test_two_stage_by_hand() -> None:
    # produce_B (async, latency 200, issue 2) in stage 0, consume_B (latency 4) in stage 1:
    # II + t_c - t_p >= 200 and t_c <= II - 1  =>  II = 101, t_c = 99, tail = 101 + 99 + 4.
    p, g, s = _pinned("rfc0077-two-stage")
    r = simulate(p, g, s, trace=True)
    assert (r.ii, r.offsets, r.tail) == (101, (0, 99), 204)
    assert r.cycles == 15 * 101 + 204 and r.stalls == 0 and r.hazards == ()
    assert r.trace is not None and len(r.trace) == 2 * 16
    first_consume = next(e for e in r.trace if e.op == "consume_B")
    assert (first_consume.step, first_consume.iteration, first_consume.issue) == (1, 0, 200)


def test_rfc_gemm_by_hand() -> None:
    # s2r_A (stage 2) is ordered after s2r_B, so mma (stage 3) waits for it in the same step:
    # 2 * II + t_s2rA >= 500 and t_mma >= t_s2rA, t_mma <= II - 32  =>  II = 178.
    p, g, s = _pinned("rfc0077-gemm")
    t = best_timing(p, g, s)
    assert t.ii == 178 and t.offsets == (0, 8, 144, 8, 144)
    assert t.cycles == 127 * 178 + t.tail
    assert offsets_at(p, g, s, 177) is None


def test_blocking_sync_copy() -> None:
    # The same-stage consumer problem with async_stages dropped: the copies block issue.
    text = (PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace("  async_stages: [0]\n", "")
    p = load_problem_text(text)
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    assert s.is_async == (False, False)
    t = best_timing(p, g, s)
    # produce_B blocks until t_p + 200 <= II (next step) -> II >= 200; consume at >= II - ... .
    assert t.ii >= 200
    assert check_timing(p, g, replace(s, timing=t)) == []


def test_replay_flags_stalls_and_hazards() -> None:
    p, g, s = _pinned("rfc0077-two-stage")
    bad = Timing(101, (0, 50), None, 155)   # consume_B planned before B is ready
    r = replay(p, g, s, bad, 16)
    assert r.stalls > 0
    assert check_timing(p, g, replace(s, timing=bad))
    few = replace(s, multiplicity=(("B", 1),))   # B needs 2 slots
    r = replay(p, g, few, best_timing(p, g, s), 16)
    assert any("overwrites slot of B" in h for h in r.hazards)


def test_unit_count() -> None:
    text = """
name: lsu2
loop: {var: k, trip_count: 8}
buffers:
  A: {space: shared, bytes: 64}
  B: {space: register, bytes: 64}
  C: {space: register, bytes: 64}
ops:
  - {name: load, unit: dma, writes: [A], latency: 50, issue: 2}
  - {name: r1, unit: lsu, reads: [A], writes: [B], latency: 10, issue: 6}
  - {name: r2, unit: lsu, reads: [A], writes: [C], latency: 10, issue: 6}
target:
  shared_bytes: 4096
  units: {dma: {async: true}, lsu: {count: 2}}
schedule: {stage: [0, 1, 1], async_stages: [0]}
"""
    p = load_problem_text(text)
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    t = best_timing(p, g, s)
    assert t.offsets[1] == t.offsets[2]      # two lsu ops side by side
    one = load_problem_text(text.replace("lsu: {count: 2}", "lsu: {}"))
    t1 = best_timing(one, g, schedule_from_pins(one, g))
    assert t1.offsets[2] >= t1.offsets[1] + 6


@pytest.mark.parametrize("seed", range(12))
def test_random_schedules_replay_cleanly(seed: int) -> None:
    p = random_problem(seed, 3 + seed % 6, predicated=seed % 2 == 1, symbolic=seed % 3 == 0,
                       hideable=seed % 4 != 0)
    g = build_graph(p)
    s = random_schedule(p, g, seed)
    r = simulate(p, g, s)
    assert r.stalls == 0 and r.hazards == ()
    assert r.cycles == (r.trip_count - 1) * r.ii + r.tail
    assert check_timing(p, g, replace(s, timing=r.timing)) == []
    # One cycle less than the least II has no timing.
    assert offsets_at(p, g, s, r.ii - 1) is None or not p.loop.symbolic


INPLACE = """name: inplace
loop: {var: i, trip_count: 16}
buffers:
  X: {space: shared, bytes: 4}
ops:
  - {name: acc, unit: dma, reads: [X], writes: [X], latency: 200, issue: 2}
target:
  shared_bytes: 1024
  units:
    dma: {async: true}
"""


@pytest.mark.parametrize("async_stages", ["[]", "[0]"])
def test_in_place_update_is_not_a_slot_hazard(async_stages: str) -> None:
    # acc[i] reads version i - 1 of X and writes version i: with one slot (sync) it reads
    # before it writes; async, it gets a second slot. Neither clobbers a version still to be read.
    p = load_problem_text(INPLACE + f"schedule: {{stage: [0], async_stages: {async_stages}}}\n")
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    assert s.mult("X") == (2 if s.is_async[0] else 1)
    r = simulate(p, g, s)
    assert r.hazards == () and r.stalls == 0
    assert check_timing(p, g, replace(s, timing=r.timing)) == []


def test_in_place_update_of_another_instance_is_still_a_hazard() -> None:
    # One slot but the update is async in stage 0 and read by a consumer a stage later:
    # the next acc overwrites the version the consumer has not read yet.
    text = INPLACE.replace("latency: 200, issue: 2}", "latency: 200, issue: 2}\n  - {name: use, unit: alu, "
                           "reads: [X], latency: 4, issue: 1}").replace("    dma: {async: true}",
                                                                        "    dma: {async: true}\n    alu: {}")
    p = load_problem_text(text + "schedule: {stage: [0, 1], async_stages: [0]}\n")
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    bad = replace(s, multiplicity=(("X", 1),))
    r = replay(p, g, bad, best_timing(p, g, bad), 16)
    assert any("overwrites slot of X" in h for h in r.hazards)


@pytest.mark.parametrize("seed", range(10))
def test_random_in_place_schedules_replay_cleanly(seed: int) -> None:
    p = random_problem(seed, 2 + seed % 5, inplace=True, symbolic=seed % 3 == 0)
    g = build_graph(p)
    for k in range(3):
        s = random_schedule(p, g, seed * 3 + k)
        r = simulate(p, g, s)
        assert r.hazards == () and check_timing(p, g, replace(s, timing=r.timing)) == []

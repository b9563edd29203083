"""The Hopper loop-body model (synth/model/ws_*.py, docs/ws_model.md): GEMM's designs and K_PIPE_MMAS as its
solutions, cross-checked with the enumeration of synth.model.hopper; attention's choice; clear errors for machine
facts nothing fits; an independent checker on random bodies; the time limit."""

from __future__ import annotations

import functools
import time
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.errors import SynthError
from synth.gemm import GemmConfig
from synth.model.hopper import choose, loop_cost
from synth.model.ws_bodies import attention_body, gemm_design, gemm_kloop_body, gemm_tile_body, overlaps
from synth.model.ws_body import WsBody, WsBuffer, WsOp, machine
from synth.model.ws_check import check_ws
from synth.model.ws_read import read_ws, read_ws_text
from synth.model.ws_schedule import Pins, combo_issues, solve_ws

M = machine("sm_90")


def _cfg(BM, BN, S=4):
    return GemmConfig(4096, 4096, 4096, "f16", BM, BN, 64, 4, S, "sm_90")


# ---------------------------------------------------------------------------- GEMM


@pytest.mark.parametrize("BM,BN,S", [(128, 128, 3), (128, 128, 4), (128, 128, 6), (128, 256, 3),
                                     (128, 256, 4)])
def test_k_pipe_mmas_agrees_with_the_enumeration(BM, BN, S):
    """Cooperative main loop, stages pinned: the model's K_PIPE_MMAS is one of loop_cost's optima (choose's pick
    whenever loop_cost has one optimum); the model's II is never above loop_cost's, and equal to it where loop_cost
    is compute-bound (the wgmma plus its drain when K = 0); where loop_cost is fill-bound the model is lower, as it
    times the consumer's wait for the full barrier inside its step (docs/ws_model.md, "GEMM")."""
    body = gemm_kloop_body(BM, BN, 64)
    s = solve_ws(body, M, pins=Pins(mode="coop", producer=True, depth=(("stage", S),)), time_limit=10)
    assert s.status == "OPTIMAL" and s.gap == 0
    lc = {K: loop_cost(_cfg(BM, BN), S, K, 1, 64).per_tile for K in range(S)}
    best = min(lc.values())
    opt = {K for K in lc if lc[K] == best}
    k = s.op("mma").groups
    assert k in opt, (s.ii, k, lc)
    ck = choose(_cfg(BM, BN), stages=S, consumers=1, warp_specialized=True).k_pipe_mmas
    assert ck in opt and (len(opt) > 1 or ck == k)
    mma = body.op("mma").work
    assert s.ii <= best
    if best == mma + (M.wgmma_drain if min(opt) == 0 else 0):
        assert s.ii == best


def test_tma_throughput_is_a_term_the_enumeration_leaves_out():
    """64x64x64: the two boxes take 256 cycles of the TMA engine per k-tile, the wgmma 128; loop_cost charges the
    bytes as latency only, so at 7 stages it predicts 190 cycles, below what the engine can land."""
    s = solve_ws(gemm_kloop_body(64, 64, 64), M, pins=Pins(mode="coop", producer=True, depth=(("stage", 7),)),
                 time_limit=10)
    assert s.ii == 256 == sum(o.work for o in gemm_kloop_body(64, 64, 64).ops if o.unit == "tma")
    assert min(loop_cost(_cfg(64, 64), 7, K, 1, 64).per_tile for K in range(7)) < s.ii


def test_cooperative_128x256():
    g = gemm_design(128, 256, 64, 4096)
    assert g.kind == "cooperative" and g.tiles.consumers == 2 and g.tiles.mode == "coop"
    assert (g.stages, g.k_pipe_mmas) == (4, 1)
    ch = choose(_cfg(128, 256), consumers=1, warp_specialized=True)
    assert (ch.stages, ch.k_pipe_mmas) == (g.stages, g.k_pipe_mmas)
    # ping-pong is refused for the reason synth.hopper.design.legal gives: a whole tile per warp group spills
    _, why = combo_issues(gemm_tile_body(128, 256, 64, g.kloop), M)
    assert any("alternating" in w and "registers" in w for w in why)
    # the epilogue is not hidden: the tile takes the main loop plus the epilogue
    assert g.tiles.ii == 64 * g.kloop.ii + 128 * 256 * 4 // 128


@pytest.mark.parametrize("BN", [128, 256])
def test_ping_pong_64_rows(BN):
    g = gemm_design(64, BN, 64, 4096)
    assert g.kind == "ping-pong" and g.tiles.consumers == 2 and g.tiles.mode == "alternate"
    main, epi = 64 * g.kloop.ii, 64 * BN * 4 // 128
    assert g.tiles.ii == max(main, -(-(main + epi) // 2))  # one's epilogue under the other's main loop
    assert g.k_pipe_mmas == choose(_cfg(64, BN), stages=g.stages, consumers=1, warp_specialized=True).k_pipe_mmas


# ---------------------------------------------------------------------------- attention


@functools.lru_cache(maxsize=None)
def _attention(d, BM, BN):
    body = attention_body(d, BM, BN)
    return body, solve_ws(body, M, time_limit=15)


@pytest.mark.parametrize("d,BM,BN,consumers,regs", [(128, 128, 128, 2, 240), (64, 192, 128, 3, 160)])
def test_attention_choice(d, BM, BN, consumers, regs):
    body, s = _attention(d, BM, BN)
    tensor = sum(o.work for o in body.ops if o.unit == "tensor")
    assert s.status == "OPTIMAL" and s.ii == tensor  # the tensor cores never wait
    assert s.producer and s.consumers == consumers and s.mode == "stagger"
    assert s.registers == (24, regs)  # FA3: 24 / 240 with two consumers, 32 / 160 with three
    assert s.depth_of("K_s") == s.depth_of("V_s") == 2  # FA3's kStages
    kinds = {(o.sync_op, o.kind) for o in overlaps(body, s)}
    assert ("exp2", "ping-pong") in kinds  # one warp group's exp2 under another's wgmma
    assert check_ws(body, M, s) == []


def test_attention_time_limit_and_lockstep_consumers():
    """Lockstep consumers cannot keep the tensor cores busy (their softmax runs together); the model's search is cut
    by the time limit and reports a feasible II with its proven bound."""
    body = attention_body(128, 128, 128)
    t0 = time.monotonic()
    s = solve_ws(body, M, pins=Pins(mode="coop"), time_limit=2.0)
    assert time.monotonic() - t0 < 4.0
    assert s.status == "FEASIBLE" and s.bound < s.ii and s.gap == (s.ii - s.bound) / s.ii
    assert s.ii > 2048 and check_ws(body, M, s) == []


# ---------------------------------------------------------------------------- errors


def test_infeasible_machine_facts_are_named():
    body = attention_body(128, 128, 128)
    with pytest.raises(SynthError, match="registers"):
        solve_ws(body, machine(registers=32768))
    with pytest.raises(SynthError, match="shared memory"):
        solve_ws(body, machine(smem=40 * 1024))
    _, why = combo_issues(attention_body(64, 192, 128), machine(named_barriers=2))
    assert any("staggered" in w and "named barriers" in w for w in why)
    with pytest.raises(SynthError, match="warp groups"):
        solve_ws(attention_body(64, 192, 128), machine(warp_groups=3))
    with pytest.raises(SynthError, match="no TMA"):
        machine("sm_80")


def test_checker_refutes_broken_schedules():
    body, s = _attention(128, 128, 128)
    assert check_ws(body, M, s) == []
    one_slot = replace(s, depth=(("K_s", 1), ("V_s", 2)), smem=s.smem - body.buffer("K_s").size - 16)
    assert any("K_s" in e for e in check_ws(body, M, one_slot))
    early = tuple(replace(o, start=o.start - 200, stage=(o.start - 200) // s.ii) if o.name == "pv" else o
                  for o in s.ops)
    assert check_ws(body, M, replace(s, ops=early))
    assert any("registers" in e for e in check_ws(body, machine(registers=49152), s))


# ---------------------------------------------------------------------------- random bodies


@st.composite
def bodies(draw):
    n_loads = draw(st.integers(0, 2))
    n_sync = draw(st.integers(1, 3))
    units = ("fma", "mufu", "alu", "lsu")
    ops, bufs = [], []
    for i in range(n_loads):
        bufs.append(WsBuffer(f"R{i}", "smem", draw(st.sampled_from([1024, 4096]))))
        ops.append(WsOp(f"load{i}", "tma", draw(st.integers(8, 80)), draw(st.integers(0, 200)), writes=(f"R{i}",),
                        split=False))
    prev = [f"R{i}" for i in range(n_loads)]
    use_mma = draw(st.booleans())
    if use_mma:
        bufs.append(WsBuffer("X", "reg", draw(st.sampled_from([8, 32, 64]))))
        carried = draw(st.booleans())
        if carried:
            bufs.append(WsBuffer("acc", "reg", 16, carried=True))
        ops.append(WsOp("mma", "tensor", draw(st.integers(16, 160)), 0, reads=tuple(prev),
                        reads_prev=("acc",) if carried else (), writes=("X",) + (("acc",) if carried else ()),
                        issue=1, hold=draw(st.integers(0, 1))))
        prev = ["X"]
    for j in range(n_sync):
        name = f"Y{j}"
        alias = "X" if j == 0 and use_mma and draw(st.booleans()) else None  # packed into X's registers
        bufs.append(WsBuffer(name, "reg", draw(st.sampled_from([2, 8])), alias=alias))
        ops.append(WsOp(f"op{j}", draw(st.sampled_from(units)), draw(st.integers(4, 120)), draw(st.integers(0, 30)),
                        reads=tuple(prev), writes=(name,), split=draw(st.booleans())))
        prev = [name]
    rows = draw(st.sampled_from([64, 128, 192]))
    return WsBody("random", tuple(ops), tuple(bufs), rows, max_consumers=draw(st.integers(1, 3)), max_depth=4,
                  max_stage=3)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_random_bodies_satisfy_every_constraint(body):
    s = solve_ws(body, M, time_limit=5)
    assert check_ws(body, M, s) == []
    assert s.ii >= max(sum(o.work for o in body.ops if o.unit == u) for u in {o.unit for o in body.ops})
    if s.status == "OPTIMAL" and s.ii > 1:
        # one cycle less is refused by the solver (the least II is proven): the solver agrees with itself pinned
        with pytest.raises(SynthError):
            solve_ws(body, M, pins=Pins(ii=s.ii - 1), time_limit=5)


# ---------------------------------------------------------------------------- the file form


def test_files_read_to_the_bodies():
    body, mach, pins = read_ws("problems/ws/attention-d128-f16.yaml")
    assert replace(body, name="x") == replace(attention_body(128, 128, 128), name="x") and mach == M
    body, mach, pins = read_ws("problems/ws/gemm-kloop-128x256x64-f16.yaml")
    assert pins == Pins(mode="coop", producer=True, depth=(("stage", 4),))
    s = solve_ws(body, mach, pins=pins, time_limit=10)
    assert s.op("mma").groups == choose(_cfg(128, 256), stages=4, consumers=1, warp_specialized=True).k_pipe_mmas
    body, mach, pins = read_ws("problems/ws/body-two-stage.yaml")
    s = solve_ws(body, mach, pins=pins, time_limit=10)
    assert check_ws(body, mach, s) == [] and s.ii == 512


@pytest.mark.parametrize("text,where,what", [
    ("name: x\nkind: body\nrows: 128\nbuffers:\n  - {name: t, space: smem, size: 16}\nops:\n"
     "  - {name: l, unit: tmaa, work: 4, writes: [t], split: false}\n", "f.yaml:7:21", "did you mean 'tma'"),
    ("name: x\nkind: body\nrows: 128\nbuffers:\n  - {name: t, space: smem, size: 16}\nops:\n"
     "  - {name: l, unit: tma, work: 4, writes: [u], split: false}\n", "f.yaml:7:43", "unknown buffer 'u'"),
    ("name: x\nkind: attention\nhead_dim: 128\nBM: 100\nBN: 128\n", "f.yaml:4:5", "rows 100"),
    ("name: x\nkind: attention\nhead_dim: 128\nBM: 128\nBN: 128\npins: {depth: {K: 2}}\n", "f.yaml:6:16",
     "not a shared ring"),
    ("name: x\nkind: attention\nhead_dim: 128\nBM: 128\nBN: 128\nrows: 4\n", "f.yaml:6:1", "does not belong"),
    ("name: x\nkind: body\nrows: 128\nbuffers:\n  - {name: t, space: smem, size: 16}\n"
     "  - {name: p, space: reg, size: 4, alias: t}\nops:\n  - {name: l, unit: tma, work: 4, writes: [t], split: false}\n"
     "  - {name: f, unit: fma, work: 4, reads: [t], writes: [p]}\n", "f.yaml:7:1", "alias 't' must be"),
])
def test_file_errors_name_the_line(text, where, what):
    with pytest.raises(SynthError) as e:
        read_ws_text(text, "f.yaml")
    assert str(e.value.loc) == where and what in e.value.render()

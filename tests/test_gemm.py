"""synth.gemm and synth.arch: configs, validation, expansion, the kind: gemm front end."""

from __future__ import annotations

import pytest

from conftest import PROBLEMS
from synth.arch import ARCHS, get_arch
from synth.errors import SynthError
from synth.gemm import (GemmConfig, expand_gemm, register_estimate, stage_pins, tiling, validate,
                        warp_layout)
from synth.graph import build_graph
from synth.load import load_problem, load_problem_text
from synth.schedule import buffer_bytes, check_schedule, schedule_from_pins


def test_arch_table_is_consistent():
    assert set(ARCHS) == {"sm_80", "sm_86", "sm_89", "sm_90"}
    a100 = get_arch("sm_80")
    assert 300 < a100.peak_tflops_f16 < 320  # 312 TFLOPS dense f16
    assert 950 < get_arch("sm_90").peak_tflops_f16 < 1000
    for a in ARCHS.values():
        assert a.smem_per_block <= a.smem_per_sm and a.registers_per_sm == 65536
        assert a.lat_global > a.lat_l2 > a.lat_shared > 0
    with pytest.raises(KeyError, match="known: sm_80"):
        get_arch("sm_75")


def test_warp_layout_and_tiling():
    assert warp_layout(4, 128, 128) == (2, 2)
    assert warp_layout(8, 128, 128) == (2, 4)
    assert warp_layout(8, 256, 128) == (4, 2)
    assert warp_layout(4, 16, 16) is None
    t = tiling(GemmConfig(4096, 4096, 4096))
    assert (t.WTM, t.WTN, t.MI, t.NI, t.KI) == (64, 64, 4, 8, 2)
    assert t.acc_regs == 128 and t.a_frag_regs == 32 and t.b_frag_regs == 32
    assert t.a_chunks_per_thread == 4  # 8 KiB / (128 threads x 16 B)


def test_validate_accepts_defaults_and_explains_rejections():
    assert validate(GemmConfig(4096, 4096, 4096)) == []
    assert validate(GemmConfig(1000, 777, 1000, stages=4, warps=8)) == []

    def msgs(**kw):
        kw.setdefault("M", 512)
        kw.setdefault("N", 512)
        kw.setdefault("K", 512)
        return " | ".join(validate(GemmConfig(**kw)))

    assert "not yet supported" in msgs(dtype="tf32")
    assert "multiple of 8" in msgs(K=100)
    assert "power of two" in msgs(BK=24)
    assert "multiple of 16" in msgs(BM=40)
    assert "1, 2, 4, 8 or 16" in msgs(warps=3)
    assert "cannot split" in msgs(BM=16, BN=16, warps=4)
    assert "16-byte cp.async" in msgs(BM=32, BN=16, BK=16, warps=2)
    assert "shared memory" in msgs(BM=256, BN=256, BK=64, stages=6, warps=8, K=4096)
    assert "registers per thread" in msgs(BM=256, BN=128, warps=4)
    assert "exceed the 2 k-tiles" in msgs(K=64, stages=5)
    assert "unknown arch" in msgs(arch="sm_75")


def test_stage_pins_are_cutlass_like():
    # 8 warps: two fragment slots fit in registers -> ldmatrix one stage ahead of the mma
    cfg = GemmConfig(4096, 4096, 4096, warps=8, stages=3)
    assert register_estimate(cfg, 2) <= 255
    assert stage_pins(cfg) == (0, 0, 1, 1, 2)
    # 4 warps: 64x64 warp tiles, double-buffered fragments would need ~296 registers
    cfg4 = GemmConfig(4096, 4096, 4096, warps=4, stages=3)
    assert register_estimate(cfg4, 2) > 255
    assert stage_pins(cfg4) == (0, 0, 2, 2, 2)
    assert stage_pins(GemmConfig(64, 64, 64, stages=1)) == (0, 0, 0, 0, 0)
    assert stage_pins(GemmConfig(64, 64, 64, stages=2)) == (0, 0, 1, 1, 1)
    assert stage_pins(GemmConfig(64, 64, 64)) is None


def test_expand_gemm_builds_the_k_tile_loop():
    cfg = GemmConfig(4096, 4096, 4096, warps=8, stages=4)
    p = expand_gemm(cfg)
    assert p.gemm is cfg
    assert [o.name for o in p.ops] == ["load_A", "load_B", "s2r_A", "s2r_B", "mma"]
    assert [o.unit for o in p.ops] == ["cp_async", "cp_async", "lsu", "lsu", "tensor"]
    assert p.loop.trip_count == 128 and p.loop.var == "k"
    assert p.buffer("A_s").bytes == 128 * 32 * 2 and p.buffer("C_r").carried
    assert p.target.shared_bytes == get_arch("sm_80").smem_per_block
    assert p.target.async_units == ("cp_async",)
    mma = p.op("mma")
    assert mma.issue == 512  # 128*128*32 FMA at 1024 FMA/clk/SM
    assert mma.latency == mma.issue + get_arch("sm_80").lat_mma
    assert p.op("load_A").latency >= get_arch("sm_80").lat_global
    assert p.pins.stage == (0, 0, 2, 2, 3) and p.pins.async_stages == (0,) and p.pins.max_stage == 3
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    assert check_schedule(p, g, s) == []
    assert s.mult("A_s") == 3 and s.mult("A_r") == 2
    assert buffer_bytes(p, s.multiplicity, "shared") == 3 * 16384


def test_auto_stages_leave_the_schedule_free():
    p = expand_gemm(GemmConfig(4096, 4096, 4096))
    assert p.pins.stage is None and p.pins.async_stages == (0,) and p.pins.max_stage == 6
    short = expand_gemm(GemmConfig(128, 128, 96))  # 3 k-tiles
    assert short.pins.max_stage == 2
    # register buffers are per thread: the budget excludes the kernel's own registers
    assert p.target.registers_bytes == (255 - 40) * 4


def test_expand_gemm_raises_on_invalid_config():
    with pytest.raises(SynthError, match="multiple of 8"):
        expand_gemm(GemmConfig(64, 64, 60))


def test_example_problem_file_loads():
    p = load_problem(str(PROBLEMS / "gemm-128x128x32-f16.yaml"))
    assert p.name == "gemm-128x128x32-f16"
    assert p.gemm.stages == 3 and p.gemm.warps == 8
    assert p.pins.stage == (0, 0, 1, 1, 2)


GOOD = """\
name: g
kind: gemm
shape: {M: 256, N: 256, K: 256}
dtype: f16
tile: {BM: 128, BN: 128, BK: 32}
warps: 4
stages: auto
arch: sm_90
"""


def test_gemm_doc_defaults_and_auto():
    p = load_problem_text(GOOD)
    assert p.gemm.arch == "sm_90" and p.gemm.stages is None
    assert p.target.shared_bytes == get_arch("sm_90").smem_per_block
    p2 = load_problem_text("kind: gemm\nshape: {M: 64, N: 64, K: 64}\n")
    assert p2.gemm == GemmConfig(64, 64, 64)


@pytest.mark.parametrize("text, line, col, msg", [
    (GOOD.replace("dtype: f16", "dtype: tf32"), 4, 8, "not yet supported"),
    (GOOD.replace("dtype: f16", "dtype: f8"), 4, 8, "unknown dtype"),
    (GOOD.replace("stages: auto", "stages: three"), 7, 9, "integer or auto"),
    (GOOD.replace("stages: auto", "stages: 0"), 7, 9, "stages is 0"),
    (GOOD.replace("arch: sm_90", "arch: sm_70"), 8, 7, "unknown arch"),
    (GOOD.replace("BK: 32", "BK: 24"), 5, 30, "power of two"),
    (GOOD.replace("K: 256}", "K: 250}"), 3, 28, "multiple of 8"),
    (GOOD.replace("shape: {M: 256, N: 256, K: 256}", "shape: {M: 256, N: 256}"), 3, 8, "missing 'K'"),
    (GOOD.replace("shape: {M: 256,", "shape: {Q: 1, M: 256,"), 3, 9, "unknown key 'Q'"),
    (GOOD.replace("warps: 4", "warps: 3"), 6, 8, "1, 2, 4, 8 or 16"),
    (GOOD + "loop: {var: k, trip_count: 8}\n", 9, 1, "derived from shape.K"),
    (GOOD.replace("stages: auto", "stages: 3") + "schedule: {stage: [0, 0, 1, 1, 1]}\n", 9, 19,
     "has 2 stages but stages is 3"),
    (GOOD + "target: {shared_bytes: 999999}\n", 9, 24, "exceeds"),
])
def test_gemm_doc_errors_are_located(text, line, col, msg):
    with pytest.raises(SynthError) as ei:
        load_problem_text(text, "g.yaml")
    e = ei.value
    assert msg in e.msg
    assert (e.loc.line, e.loc.col) == (line, col), e.render()
    assert e.fix


def test_gemm_doc_schedule_pins_override():
    p = load_problem_text(GOOD.replace("stages: auto", "stages: 3")
                          + "schedule: {stage: [0, 0, 2, 2, 2], order: [0, 1, 2, 3, 4]}\n")
    assert p.pins.stage == (0, 0, 2, 2, 2) and p.pins.order == (0, 1, 2, 3, 4)
    assert p.pins.async_stages == (0,) and p.pins.max_stage == 2

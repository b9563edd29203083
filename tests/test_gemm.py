"""synth.gemm and synth.arch: configs, validation, expansion, the kind: gemm front end."""

from __future__ import annotations

import pytest

from conftest import PROBLEMS
from synth.arch import ARCHS, get_arch
from synth.errors import SynthError
from synth.gemm import (REG_OVERHEAD, GemmConfig, copy_l2_cycles, expand_gemm, load_shares, op_names, order_pins,
                        register_estimate, share_chunks, smem_slots, stage_pins, tiling, validate, warp_layout)
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
    # fragment buffers hold one k16 slice of the warp tile: 4 m16 x 4 regs (A), 8 n8 x 2 regs (B)
    assert t.acc_regs == 128 and t.a_frag_regs == 16 and t.b_frag_regs == 16 and t.frag_buffers == 2
    assert t.a_chunks_per_thread == 4  # 8 KiB / (128 threads x 16 B)
    assert tiling(GemmConfig(4096, 4096, 4096, BK=16)).frag_buffers == 1


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


def test_register_estimate_is_accumulators_two_k16_slices_and_overhead():
    # CUTLASS's default (128x256x64, 8 warps) and Triton's tutorial default (128x128x64, 4 warps):
    # 64x64 warp tiles, 128 f32 accumulators + 2 x (16 + 16) fragment registers + the overhead
    for cfg in (GemmConfig(4096, 4096, 4096, BM=128, BN=256, BK=64, warps=8, stages=3),
                GemmConfig(4096, 4096, 4096, BM=128, BN=128, BK=64, warps=4, stages=3)):
        assert register_estimate(cfg) == 128 + 2 * (16 + 16) + REG_OVERHEAD == 232
        assert validate(cfg) == []
    # the estimate does not grow with BK (fragments are per k16 step), and BK = 16 has one slice
    for bk in (32, 64, 128):
        assert register_estimate(GemmConfig(4096, 4096, 4096, BK=bk)) == 232
    assert register_estimate(GemmConfig(4096, 4096, 4096, BK=16)) == 128 + 32 + REG_OVERHEAD


def _in_order(names, order):
    return [names[i] for i in sorted(range(len(names)), key=order.__getitem__)]


def test_stage_pins_are_cutlass_like():
    names = op_names(2, 2)
    assert names == ("load_0", "load_1", "s2r_A_0", "s2r_B_0", "mma_0", "s2r_A_1", "s2r_B_1", "mma_1")
    cfg = GemmConfig(4096, 4096, 4096, warps=8, stages=3)
    assert load_shares(cfg) == 2  # 128x32 tiles, 256 threads: 2 chunks of A and of B per thread
    # loads in stage 0, the next k-tile's first k16 slice one stage ahead of the mma, the rest with it
    assert stage_pins(cfg) == (0, 0, 1, 1, 2, 2, 2, 2)
    # load share j before k16 step j (MmaMultistage's copy groups); fragment kk + 1 loaded before mma kk
    assert _in_order(names, order_pins(cfg)) == [
        "load_0", "s2r_A_1", "s2r_B_1", "mma_0", "load_1", "s2r_A_0", "s2r_B_0", "mma_1"]
    assert smem_slots(stage_pins(cfg)) == 3  # CUTLASS's kStages: stages == shared slots
    # BK = 64: four k16 steps, four load shares (the 256-row B tile has 8 chunks per thread)
    c64 = GemmConfig(4096, 4096, 4096, BM=128, BN=256, BK=64, warps=8, stages=3)
    assert load_shares(c64) == 4
    n64 = op_names(4, 4)
    assert _in_order(n64, order_pins(c64)) == [
        "load_0", "s2r_A_1", "s2r_B_1", "mma_0", "load_1", "s2r_A_2", "s2r_B_2", "mma_1",
        "load_2", "s2r_A_3", "s2r_B_3", "mma_2", "load_3", "s2r_A_0", "s2r_B_0", "mma_3"]
    assert [s for n, s in zip(n64, stage_pins(c64)) if n.startswith("s2r")] == [1, 1] + [2] * 6
    assert [len(share_chunks(8, 4, j)) for j in range(4)] == [2, 2, 2, 2]
    assert [list(share_chunks(3, 2, j)) for j in range(2)] == [[0], [1, 2]]
    # two stages: the ldmatrix stays with the mma (a stage earlier would be the loads' own stage)
    c2 = GemmConfig(64, 64, 64, stages=2)
    P2 = load_shares(c2)
    assert stage_pins(c2) == (0,) * P2 + (1,) * 6
    assert _in_order(op_names(2, P2), order_pins(c2)) == [f"load_{j}" for j in range(P2)] + [
        "s2r_A_0", "s2r_B_0", "s2r_A_1", "s2r_B_1", "mma_0", "mma_1"]
    assert smem_slots(stage_pins(c2)) == 2
    assert stage_pins(GemmConfig(64, 64, 64, stages=1)) == (0,) * (P2 + 6)
    # BK = 16, one k16 step and one fragment buffer: the next tile's ldmatrix follows the mma
    c16 = GemmConfig(4096, 4096, 4096, BK=16, stages=3)
    assert load_shares(c16) == 1
    assert stage_pins(c16) == (0, 1, 1, 2) and order_pins(c16) == (0, 2, 3, 1)
    assert smem_slots(stage_pins(c16)) == 2
    assert stage_pins(GemmConfig(64, 64, 64)) is None and order_pins(GemmConfig(64, 64, 64)) is None


def _reference_configs():
    import yaml

    doc = yaml.safe_load((PROBLEMS.parent / "synth" / "data" / "reference_configs.yaml").read_text())
    return doc, [c for k in ("cutlass_sm80_f16", "triton_matmul_tutorial") for c in doc[k]["configs"]] + \
        [d["config"] for d in doc["defaults"].values()]


def test_every_reference_config_that_fits_validates_and_expands():
    doc, refs = _reference_configs()
    for arch in ARCHS.values():
        for r in refs:
            cfg = GemmConfig(4096, 4096, 4096, "f16", r["BM"], r["BN"], r["BK"], r["warps"], r["stages"], arch.name)
            smem = r["stages"] * (r["BM"] + r["BN"]) * r["BK"] * 2
            assert smem_slots(stage_pins(cfg)) == r["stages"]  # synth's depth = the reference's slots
            if smem > arch.smem_per_block:
                assert any("shared memory" in m for m in validate(cfg)), (arch.name, r)
                continue
            assert validate(cfg) == [], (arch.name, r, validate(cfg))
            assert register_estimate(cfg) <= 232
            p = expand_gemm(cfg)
            g = build_graph(p)
            s = schedule_from_pins(p, g)
            assert check_schedule(p, g, s) == []
            assert s.mult("A_s") == s.mult("B_s") == r["stages"]
            assert buffer_bytes(p, s.multiplicity, "shared") == smem
    # on sm_80 every CUTLASS sm80 f16 multistage config and both defaults are legal
    for r in doc["cutlass_sm80_f16"]["configs"] + [d["config"] for d in doc["defaults"].values()]:
        cfg = GemmConfig(4096, 4096, 4096, "f16", r["BM"], r["BN"], r["BK"], r["warps"], r["stages"], "sm_80")
        assert validate(cfg) == [], (r, validate(cfg))


def test_expand_gemm_builds_the_k_tile_loop():
    cfg = GemmConfig(4096, 4096, 4096, warps=8, stages=4)
    p = expand_gemm(cfg)
    assert p.gemm is cfg
    assert [o.name for o in p.ops] == list(op_names(2, 2))  # 128x32 tiles, 256 threads: 2 + 2 chunks
    assert [o.unit for o in p.ops] == ["cp_async"] * 2 + ["lsu", "lsu", "tensor"] * 2
    assert p.op("load_0").writes == ("A_s", "B_s")
    assert p.loop.trip_count == 128 and p.loop.var == "k"
    assert p.buffer("A_s").bytes == 128 * 32 * 2 and p.buffer("C_r").carried
    # fragment buffers: one k16 slice each, one register set (carried: never multi-buffered)
    assert [b.name for b in p.buffers] == ["A_s", "B_s", "A_f0", "A_f1", "B_f0", "B_f1", "C_r"]
    assert p.buffer("A_f0").bytes == 4 * 4 * 4 and p.buffer("B_f1").bytes == 4 * 2 * 4  # 64x32 warp tile
    assert all(p.buffer(f"{x}_f{k}").carried for x in "AB" for k in (0, 1))
    assert p.op("s2r_A_1").reads == ("A_s",) and p.op("s2r_A_1").writes == ("A_f1",)
    assert p.op("mma_1").reads == ("A_f1", "B_f1", "C_r") and p.op("mma_1").writes == ("C_r",)
    assert p.target.shared_bytes == get_arch("sm_80").smem_per_block
    assert p.target.async_units == ("cp_async",)
    a100 = get_arch("sm_80")
    mma = p.op("mma_0")
    assert mma.issue == 256  # 128*128*16 FMA per k16 step at 1024 FMA/clk/SM
    assert sum(o.issue for o in p.ops if o.unit == "tensor") == 128 * 128 * 32 // 1024
    assert mma.latency == a100.lat_mma  # streamed into the next step's mma on the same accumulators
    assert p.op("s2r_A_0").issue == 4 * 8 * 4  # MI ldmatrix.x4 per warp, 8 warps, 4 cycles each
    assert p.op("s2r_B_0").issue == 2 * 8 * 4  # NI / 2 ldmatrix.x4 per warp
    # a fragment waits for the k16 step's shared traffic: both operands' ldmatrix and half the copies' port time
    assert p.op("s2r_A_0").latency == p.op("s2r_B_0").latency == a100.lat_shared + 128 + 64 + (2 * 2 * 8 * 4) // 2
    # 1 + 1 cp.async per thread: 8192 B at the SM's share of the L2 bandwidth (108 SMs, 5120 B/clk), above
    # their shared-port time (2 x 8 warps x 4 cycles)
    assert p.op("load_0").issue == copy_l2_cycles(8192, a100) == 173 > (1 + 1) * 8 * 4
    assert p.op("load_0").latency == a100.lat_global + 173
    assert p.pins.stage == (0, 0, 2, 2, 3, 3, 3, 3) and p.pins.async_stages == (0,) and p.pins.max_stage == 3
    assert p.pins.order == order_pins(cfg)
    g = build_graph(p)
    # the fragment buffers' reuse is ordered by hard edges: the next tile's s2r_A_0 after mma_0
    hard = {(p.ops[e.src].name, p.ops[e.dst].name, e.distance) for e in g.constraints() if e.kind == "war"}
    assert ("mma_0", "s2r_A_0", 1) in hard and ("mma_1", "s2r_B_1", 1) in hard
    s = schedule_from_pins(p, g)
    assert check_schedule(p, g, s) == []
    assert s.mult("A_s") == 4 and s.mult("A_f0") == 1
    assert buffer_bytes(p, s.multiplicity, "shared") == 4 * 16384


def test_four_k16_steps_reuse_each_fragment_buffer_twice():
    p = expand_gemm(GemmConfig(4096, 4096, 4096, BM=128, BN=256, BK=64, warps=8, stages=3))
    assert len(p.ops) == 4 + 3 * 4  # four load shares: 1 A and 2 B chunks per thread each
    assert [o.issue for o in p.ops if o.unit == "cp_async"] == [copy_l2_cycles(3 * 256 * 16, get_arch("sm_80"))] * 4
    g = build_graph(p)
    hard = {(p.ops[e.src].name, p.ops[e.dst].name, e.distance) for e in g.constraints() if e.kind == "war"}
    # s2r_A_2 overwrites A_f0: mma_0 must have read it first (same k-tile)
    assert ("mma_0", "s2r_A_2", 0) in hard and ("mma_2", "s2r_A_0", 1) in hard
    s = schedule_from_pins(p, g)
    assert check_schedule(p, g, s) == [] and s.mult("A_s") == 3
    regs = buffer_bytes(p, s.multiplicity, "register") // 4
    assert regs == 128 + 2 * (16 + 16) == register_estimate(p.gemm) - REG_OVERHEAD


def test_one_k16_step_has_one_fragment_buffer_per_operand():
    p = expand_gemm(GemmConfig(4096, 4096, 4096, BK=16, stages=3))
    assert [o.name for o in p.ops] == ["load_0", "s2r_A_0", "s2r_B_0", "mma_0"]
    assert [b.name for b in p.buffers] == ["A_s", "B_s", "A_f0", "B_f0", "C_r"]
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    assert check_schedule(p, g, s) == [] and s.mult("A_s") == 2


def test_auto_stages_leave_the_schedule_free():
    p = expand_gemm(GemmConfig(4096, 4096, 4096))
    assert p.pins.stage is None and p.pins.async_stages == (0,) and p.pins.max_stage == 6
    short = expand_gemm(GemmConfig(128, 128, 96))  # 3 k-tiles
    assert short.pins.max_stage == 2
    assert p.pins.order is None
    # register buffers are per thread: the budget excludes the kernel's own registers
    assert p.target.registers_bytes == (255 - REG_OVERHEAD) * 4


def test_expand_gemm_raises_on_invalid_config():
    with pytest.raises(SynthError, match="multiple of 8"):
        expand_gemm(GemmConfig(64, 64, 60))


def test_example_problem_file_loads():
    p = load_problem(str(PROBLEMS / "gemm-128x128x32-f16.yaml"))
    assert p.name == "gemm-128x128x32-f16"
    assert p.gemm.stages == 3 and p.gemm.warps == 8
    assert p.pins.stage == (0, 0, 1, 1, 2, 2, 2, 2)


GOOD = """\
name: g
kind: gemm
shape: {M: 256, N: 256, K: 256}
dtype: f16
tile: {BM: 128, BN: 128, BK: 32}
warps: 4
stages: auto
arch: sm_90
mainloop: cp_async
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
    # a power of two below 16 with pinned stages reached the default pins before the check (exit 3)
    (GOOD.replace("BK: 32", "BK: 8").replace("stages: auto", "stages: 3"), 5, 30, "power of two"),
    (GOOD.replace("BK: 32", "BK: 1").replace("stages: auto", "stages: 3"), 5, 30, "power of two"),
    (GOOD.replace("K: 256}", "K: 250}"), 3, 28, "multiple of 8"),
    (GOOD.replace("shape: {M: 256, N: 256, K: 256}", "shape: {M: 256, N: 256}"), 3, 8, "missing 'K'"),
    (GOOD.replace("shape: {M: 256,", "shape: {Q: 1, M: 256,"), 3, 9, "unknown key 'Q'"),
    (GOOD.replace("warps: 4", "warps: 3"), 6, 8, "1, 2, 4, 8 or 16"),
    (GOOD + "loop: {var: k, trip_count: 8}\n", 10, 1, "derived from shape.K"),
    (GOOD.replace("stages: auto", "stages: 3") + "schedule: {stage: [0, 0, 1, 1, 1, 1, 1, 1]}\n", 10, 19,
     "has 2 stages but stages is 3"),
    (GOOD + "target: {shared_bytes: 999999}\n", 10, 24, "exceeds"),
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
                          + "schedule: {stage: [0, 0, 2, 2, 2, 2, 2, 2], order: [0, 1, 2, 3, 4, 5, 6, 7]}\n")
    assert p.pins.stage == (0, 0, 2, 2, 2, 2, 2, 2) and p.pins.order == tuple(range(8))
    assert p.pins.async_stages == (0,) and p.pins.max_stage == 2
    # stages without an order: the order is free (the default order goes with the default stages)
    q = load_problem_text(GOOD.replace("stages: auto", "stages: 3") + "schedule: {stage: [0, 0, 2, 2, 2, 2, 2, 2]}\n")
    assert q.pins.order is None
    # only an order: the default stages stay (and must agree with it)
    r = load_problem_text(GOOD.replace("stages: auto", "stages: 3") + "schedule: {order: [1, 0, 5, 6, 4, 2, 3, 7]}\n")
    assert r.pins.stage == (0, 0, 1, 1, 2, 2, 2, 2) and r.pins.order == (1, 0, 5, 6, 4, 2, 3, 7)
    with pytest.raises(SynthError, match="war dependence mma_0->s2r_A_0 on A_f0"):
        load_problem_text(GOOD.replace("stages: auto", "stages: 3") + "schedule: {order: [0, 1, 2, 3, 4, 5, 6, 7]}\n")
    # one stage per op of the k16 expansion
    with pytest.raises(SynthError):
        load_problem_text(GOOD.replace("stages: auto", "stages: 3") + "schedule: {stage: [0, 0, 2, 2, 2]}\n")


def test_symbolic_k_tiles_for_one_kernel_of_every_k():
    """min_ktiles: the loop's trip count is the symbol T (at least min_ktiles), stages above it allowed
    (loops shorter than the pipeline); without it the trip count is ceil(K / BK)."""
    cfg = GemmConfig(4096, 4096, 4096, stages=3)
    p = expand_gemm(cfg, min_ktiles=1)
    assert p.loop.symbolic and p.loop.trip_count == "T" and p.loop.min_trip_count == 1
    assert p.pins.stage == stage_pins(cfg)
    assert not expand_gemm(cfg).loop.symbolic and expand_gemm(cfg).loop.trip_count == 128
    short = GemmConfig(64, 64, 64, BK=32, stages=3)  # 2 k-tiles, 3 stages
    assert any("exceed" in m for m in validate(short))
    assert expand_gemm(short, min_ktiles=1).loop.min_trip_count == 1
    # stages: auto is bounded by the tuned shape's k-tile count, not by the smallest K the kernel serves
    assert expand_gemm(GemmConfig(4096, 4096, 4096), min_ktiles=2).pins.max_stage == 6
    assert expand_gemm(GemmConfig(64, 64, 64, BK=32), min_ktiles=1).pins.max_stage == 1
    with pytest.raises(SynthError, match="min_ktiles is 0"):
        expand_gemm(cfg, min_ktiles=0)

"""synth.search.attention_estimate: the FlashAttention-forward TFLOP/s prediction's contract (monotone in the II,
bounded by the tensor peak and the best published GEMM), its terms (KV blocks under a causal mask, waves, setup),
and the published figures it is printed beside."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from synth.arch import get_arch
from synth.errors import SynthError
from synth.search.attention_estimate import (AttentionShape, AttentionTile, kv_blocks, predict_attention,
                                             published_attention)
from synth.search.published import best_published

H100 = get_arch("sm_90")
T128 = AttentionTile(128, 128, 128)
T64 = AttentionTile(192, 128, 64)


def sched(ii: int, makespan: int) -> SimpleNamespace:
    """A schedule's two figures the prediction reads (the head-dim-128 schedule of docs/ws_model.md: II 2,048,
    makespan 4,386)."""
    return SimpleNamespace(ii=ii, makespan=makespan)


SHAPES = [AttentionShape.fa3_benchmark(n, d, causal) for n in (512, 2048, 16384) for d in (64, 128)
          for causal in (False, True)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.seqlen}-d{s.d}-{'causal' if s.causal else 'full'}")
@pytest.mark.parametrize("persistent", (True, False))
def test_monotone_in_the_ii_and_bounded(shape, persistent):
    tile = T128 if shape.d == 128 else T64
    least = tile.block_flops // H100.tensor_f16_f32_flop_per_clk_sm
    peak = H100.tensor_f16_f32_flop_per_clk_sm * H100.sm_count * H100.clock_ghz / 1e3
    gemm = best_published("sm_90")[0]
    prev = None
    for ii in range(least, 3 * least + 1, least // 8):
        e = predict_attention(sched(ii, ii + 2300), tile, shape, persistent=persistent)
        assert 0 < e.tflops <= min(peak, gemm)
        assert e.steady_tflops <= peak + 1e-9
        if prev is not None:
            assert e.tflops <= prev + 1e-9
        prev = e.tflops
    slow = predict_attention(sched(3 * least, 3 * least + 2300), tile, shape, persistent=persistent)
    fast = predict_attention(sched(least, least + 2300), tile, shape, persistent=persistent)
    assert slow.tflops < fast.tflops or fast.bound == "dram"


def test_a_block_takes_at_least_the_tensor_work_at_the_best_gemm_rate():
    shape = AttentionShape.fa3_benchmark(16384, 128)
    e = predict_attention(sched(2048, 4386), T128, shape)
    share = best_published("sm_90")[0] / (4096 * 132 * H100.clock_ghz / 1e3)
    assert e.tensor_cycles == 2048 and e.tensor_share == pytest.approx(share)
    assert e.block_cycles == -(-2048 * 1000 // int(share * 1000)) and e.bound == "tensor rate"
    slower = predict_attention(sched(3000, 5338), T128, shape)
    assert slower.block_cycles == 3000 and slower.bound == "schedule"


def test_the_sass_loop_s_instruction_issue_bounds_a_block():
    shape = AttentionShape.fa3_benchmark(16384, 128)
    two = SimpleNamespace(ii=2048, makespan=4386, consumers=2)
    base = predict_attention(two, T128, shape)
    light = predict_attention(two, T128, shape, loop_instructions=625)  # 2 x 625 issue cycles: under the tensor term
    assert light.issue_cycles == 1250 and light.tflops == base.tflops and light.bound == "tensor rate"
    heavy = predict_attention(two, T128, shape, loop_instructions=1500)
    assert heavy.issue_cycles == 3000 == heavy.block_cycles and heavy.bound == "issue"
    assert heavy.tflops < base.tflops
    assert base.issue_cycles == 0


def test_causal_blocks_are_those_at_or_left_of_the_diagonal():
    s = AttentionShape(1, 1, 512, 128, causal=True)
    assert [kv_blocks(T128, s, j) for j in range(4)] == [1, 2, 3, 4]
    s64 = AttentionShape(1, 1, 512, 64, causal=True)
    assert [kv_blocks(T64, s64, j) for j in range(3)] == [2, 3, 4]  # rows up to 192, 384, 512 (the last tile short)
    full = AttentionShape(1, 1, 500, 128)
    assert kv_blocks(T128, full, 0) == 4  # a partial last block counts whole


def test_waves_and_per_tile_terms():
    # 132 equal tiles: one each; 133: the busiest SM takes two
    one = predict_attention(sched(2048, 4386), T128, AttentionShape(1, 132, 128, 128))
    two = predict_attention(sched(2048, 4386), T128, AttentionShape(1, 133, 128, 128))
    assert (one.tiles, one.tiles_busiest, one.blocks_busiest) == (132, 1, 1)
    assert (two.tiles_busiest, two.blocks_busiest) == (2, 2)
    assert one.wave_efficiency == 1.0 and two.wave_efficiency == pytest.approx(133 / 264)
    per_tile = one.block_cycles + one.fill_cycles + one.epilogue_cycles
    assert one.busiest_cycles == per_tile and one.fill_cycles == 4386 - 2048
    assert one.epilogue_cycles == 128 * 128 * 2 // H100.smem_bytes_per_clk + H100.barrier_cycles
    grid = predict_attention(sched(2048, 4386), T128, AttentionShape(1, 132, 128, 128), persistent=False)
    assert grid.setup_cycles > 0 and grid.busiest_cycles == per_tile + grid.setup_cycles


def test_fa3_benchmark_sizes_and_flops():
    s = AttentionShape.fa3_benchmark(2048, 128)
    assert (s.batch, s.heads) == (8, 16)
    assert s.flops == 4 * 8 * 16 * 2048 * 2048 * 128
    assert AttentionShape.fa3_benchmark(2048, 128, causal=True).flops == s.flops / 2


def test_refused_inputs():
    with pytest.raises(ValueError, match="below the tensor work"):
        predict_attention(sched(2047, 4000), T128, AttentionShape(1, 1, 1024, 128))
    with pytest.raises(ValueError, match="head dim"):
        predict_attention(sched(2048, 4386), T128, AttentionShape(1, 1, 1024, 64))


def test_published_figures():
    figs, bench = published_attention()
    best = max((p for p in figs if p.dtype == "f16"), key=lambda p: p.tflops)
    assert best.tflops == 740 and best.utilization == 0.75 and "FlashAttention-3" in best.source
    assert (bench["tokens"], bench["hidden"]) == (16384, 2048) and 16384 in bench["seqlens"]


def test_published_file_errors(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("fa3:\n  - name: x\n    tflops: -1\nbenchmark: {}\n")
    with pytest.raises(SynthError, match="tflops positive"):
        published_attention(str(bad))
    bad.write_text("fa3: [\n")
    with pytest.raises(SynthError, match="not valid YAML"):
        published_attention(str(bad))

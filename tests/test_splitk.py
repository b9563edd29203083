"""Split-K (``split_k: S``): the problem key, the kernel it emits, and the kernel run on the CPU emulator.

What a user sees: a problem with ``split_k`` loads (or fails at the key, with a fix); its kernel
computes the same C as numpy for ragged shapes, uneven splits and every order the CTAs may finish
in, bit for bit the same C in every order; the tickets are left zeroed; and a kernel whose
release/acquire protocol is broken (a fence, the reset, the last-CTA test) fails on the emulator.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gemm_fixtures import NEEDS_GXX, NVCC, emitted_kernel, emulate_emitted, gemm_doc, program_for
from synth.emit.cuda import STATUS_CODES, kernel_info
from synth.emit.splitk import split_range, ticket_count, workspace_floats
from synth.errors import SynthError
from synth.gemm import GemmConfig, expand_gemm
from synth.load import load_problem_text

needs_gxx = NEEDS_GXX

DOC = gemm_doc("split_k: 2")


def _kernel(split_k: int, **kw):
    return emitted_kernel(split_k=split_k, **kw)


# ---------------------------------------------------------------------------
# the problem key


def test_split_k_loads_and_names_the_problem():
    p = load_problem_text(DOC, "sk.yaml")
    assert p.gemm.split_k == 2 and p.gemm.split_trip_count == 32
    unnamed = load_problem_text(DOC.replace("name: sk\n", ""), "sk.yaml")
    assert "-split2-" in unnamed.name


@pytest.mark.parametrize("value, words", [
    ("0", "below the minimum 1"), ("65", "above the maximum 64"), ("two", "must be an integer"),
    ("true", "must be an integer"),
])
def test_split_k_out_of_bounds_fails_at_the_key(value, words):
    with pytest.raises(SynthError) as e:
        load_problem_text(DOC.replace("split_k: 2", f"split_k: {value}"), "sk.yaml")
    assert e.value.loc.line == 7, str(e.value)
    assert e.value.fix


def test_split_k_above_the_k_tiles_fails_at_the_key():
    with pytest.raises(SynthError) as e:
        load_problem_text(DOC.replace("K: 2048}", "K: 96}").replace("split_k: 2", "split_k: 4"), "sk.yaml")
    assert e.value.loc.line == 7 and "3 k-tiles" in str(e.value) and "at most 3" in e.value.fix


def test_splits_shorter_than_the_pipeline_load():
    # 4 k-tiles in 2 splits of 2, 3 stages: the program is proved for every trip count, short ones included
    p = load_problem_text(DOC.replace("K: 2048}", "K: 128}"), "sk.yaml")
    assert p.gemm.split_trip_count == 2 and p.loop.min_trip_count == 1


def test_hopper_loop_takes_split_k_up_to_its_k_tiles():
    doc = DOC.replace("arch: sm_80", "arch: sm_90").replace("BK: 32", "BK: 64").replace("warps: 4\n", "")
    g = load_problem_text(doc.replace("name: sk\n", ""), "sk.yaml")
    assert g.split_k == 2 and "-split2-" in g.name
    with pytest.raises(SynthError) as e:
        load_problem_text(doc.replace("K: 2048}", "K: 64}"), "sk.yaml")
    assert e.value.loc.line == 6 and "at most 1" in e.value.fix


def test_a_fixed_trip_count_needs_a_split_that_divides_the_k_tiles():
    # Python API only (problem files always read T at run time): splits of 256 k-tiles into 6 have 42 or 43
    with pytest.raises(SynthError) as e:
        expand_gemm(GemmConfig(M=256, N=256, K=16384, BM=64, BN=64, BK=64, stages=3, split_k=6))
    assert "does not divide the 256 k-tiles" in str(e.value) and "min_ktiles" in e.value.fix
    assert expand_gemm(GemmConfig(M=256, N=256, K=16384, BM=64, BN=64, BK=64, stages=3, split_k=4)).loop.trip_count == 64


def test_split_ranges_cover_k_once_and_are_never_empty():
    for T in range(1, 70):
        for S in range(1, min(T, 64) + 1):
            ranges = [split_range(z, T, S) for z in range(S)]
            assert ranges[0][0] == 0 and ranges[-1][1] == T
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            assert all(T // S <= e - b <= -(-T // S) for b, e in ranges)


# ---------------------------------------------------------------------------
# the kernel text


def test_unsplit_kernel_keeps_its_signature_and_split_kernel_adds_two_buffers():
    p1, s1, g1, one = _kernel(1)
    p2, s2, g2, two = _kernel(3)
    assert "float beta, int* status)" in one and "workspace" not in one.split("synth_gemm(")[1].split(")")[0]
    assert "float beta, float* workspace, unsigned* tickets, int* status)" in two
    assert "#define SYNTH_SPLIT_K 1" in one and "#define SYNTH_SPLIT_K 3" in two
    assert kernel_info(p1, s1, g1).grid[2] == 1 and kernel_info(p2, s2, g2).grid == (8, 8, 3)
    assert "SYNTH_MIN_KTILES * SYNTH_SPLIT_K" in two
    assert STATUS_CODES[64][0] == "SYNTH_ERR_SPLIT"


def test_buffer_sizes():
    assert workspace_floats(130, 200, 128, 128, 1) == 0 and ticket_count(130, 200, 128, 128, 1) == 0
    assert workspace_floats(130, 200, 128, 128, 3) == 2 * 2 * 3 * 128 * 128
    assert ticket_count(130, 200, 128, 128, 3) == 2 * 4


@pytest.mark.skipif(NVCC is None, reason="nvcc is needed to compile the kernel")
def test_split_kernel_compiles_for_sm80_without_spills(tmp_path):
    # 128x128 tiles on 4 warps: 252 registers; the sum of 4 partials must not push it into spills
    *_, text = _kernel(4, BM=128, BN=128, warps=4)
    (tmp_path / "k.cu").write_text(text)
    out = subprocess.run([NVCC, "-arch=sm_80", "-cubin", "-O3", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"),
                          str(tmp_path / "k.cu")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores" in out.stderr, out.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc is needed to compile the kernel")
def test_the_main_loop_sass_is_the_unsplit_one():
    from synth.emit.sass import kernel_mix

    mixes = []
    for split_k in (1, 3):
        p = expand_gemm(GemmConfig(M=2048, N=2048, K=2048, BM=128, BN=128, BK=32, warps=4, stages=3,
                                   split_k=split_k), min_ktiles=1)
        s, prog = program_for(p)
        mixes.append(kernel_mix(p, s, prog))
    assert mixes[0] == mixes[1] and mixes[0].hmma == 64


def test_exports_say_the_loop_is_one_split():
    from synth.emit.mlir import mlir_pipelined_loop
    from synth.emit.tvm import tvm_annotations

    p, s, _, _ = _kernel(3)
    for text in (tvm_annotations(p, s), mlir_pipelined_loop(p, s)):
        assert "splits K into 3 parts" in text
    p1, s1, _, _ = _kernel(1)
    assert "split-K" not in tvm_annotations(p1, s1)


# ---------------------------------------------------------------------------
# on the emulator

MUTANTS = {  # name: (text, its replacement, the block order that shows it)
    "release fence dropped": ("synth_threadfence();  // release", "(void)0;  //", "forward"),
    "acquire fence dropped": ("synth_threadfence();  // acquire", "(void)0;  //", "forward"),
    "no wait for the count": ("while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {",
                              "if (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {", "forward"),
    "a weaker wait": ("while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {",
                      "while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 2) {", "forward"),
    "counter not reset": ("counters[0] = 0u;", "", "forward"),
    "first arrival sums": ("== SYNTH_SPLIT_K - 1 ? 1 : 0", "== 0 ? 1 : 0", "forward"),
    # launch order makes split 2 the last to arrive, reversed split 0: the own term is then p0
    "own term at the wrong place": ("if (split == 0) { s[0] = x.x;", "if (split == 1) { s[0] = x.x;", "reverse"),
    "split skips its first k-tile": ("const int kt0 = (int)((long long)split * T_all / SYNTH_SPLIT_K);",
                                     "const int kt0 = (int)((long long)split * T_all / SYNTH_SPLIT_K) + (split > 0);",
                                     "forward"),
}


_emulate = emulate_emitted


@needs_gxx
def test_split_kernel_is_right_and_the_same_bits_in_every_block_order():
    p, s, prog, text = _kernel(3)
    runs = {order: _emulate(p, s, prog, text, 70, 126, 296, order=order, with_c=True, alpha=1.5, beta=-0.5,
                            ldc=128)
            for order in ("forward", "reverse", "shuffle:11")}
    for order, r in runs.items():
        assert r.clean and r.status == 0, (order, r.summary())
        # 4 tiles of 3 splits: 12 arrivals and 8 published counts; per tile 2 partials stored and read
        # back, only their vectors inside C (70 x 126: 70 * 128 / 4 of them in all)
        assert r.stats["atomics"] == 12 + 8 and r.stats["unordered_global"] == 0
        assert r.stats["gst"] == r.stats["gld"] == 2 * 70 * 128 // 4
    assert all(np.array_equal(runs["forward"].C, r.C) for r in runs.values())


@needs_gxx
@pytest.mark.parametrize("split_k, K", [(4, 264), (9, 264), (2, 8 * 32)])
def test_uneven_and_one_tile_splits(split_k, K):
    # 264 = 8 k-tiles of 32 plus a partial one: 9 k-tiles over 4 splits (2, 2, 2, 3), over 9 (one each)
    p, s, prog, text = _kernel(split_k, stages=2)
    r = _emulate(p, s, prog, text, 65, 64, K, order="reverse")
    assert r.clean and r.status == 0, r.summary()


@needs_gxx
def test_too_few_k_tiles_or_a_wrong_grid_is_refused_and_c_untouched():
    p, s, prog, text = _kernel(4)
    short = _emulate(p, s, prog, text, 64, 64, 96)  # 3 k-tiles for 4 splits
    assert short.status == 16 and short.nan_count == short.C.size
    grid = _emulate(p, s, prog, text, 64, 64, 256, splits=2)
    assert grid.status == 64 and grid.nan_count == grid.C.size


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_broken_protocol_fails_on_the_emulator(name):
    p, s, prog, text = _kernel(3)
    old, new, order = MUTANTS[name]
    assert old in text
    assert not _emulate(p, s, prog, text.replace(old, new), 70, 64, 296, order=order, timeout=60).clean, name


def _solved_kernel(tmp_path, text: str):
    """``synth solve`` on ``text`` (a split_k: 3 problem), its folder loaded as a kernel on the emulator."""
    import synth.kernel
    from synth.api import solve

    doc = tmp_path / "sk.yaml"
    doc.write_text(text)
    out = tmp_path / "out"
    solve(str(doc), out=str(out))
    assert "split_k: 3" in (out / "problem.yaml").read_text()
    return synth.kernel.load(str(out), backend="emulator")


@needs_gxx
def test_solved_folder_runs_through_the_python_api(tmp_path):
    kern = _solved_kernel(tmp_path, DOC.replace("BM: 128, BN: 128", "BM: 64, BN: 64").replace("split_k: 2", "split_k: 3"))
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (70, 200)).astype(np.float16)
    B = rng.uniform(-1, 1, (90, 200)).astype(np.float16)  # N = 90: the API pads C's rows to 92 for the kernel
    Cin = rng.uniform(-1, 1, (70, 90)).astype(np.float32)
    C = kern(A, B, Cin, alpha=2.0, beta=0.5)
    assert C.shape == (70, 90) and C.flags.c_contiguous
    assert np.allclose(C, 2.0 * (A.astype(np.float32) @ B.astype(np.float32).T) + 0.5 * Cin, atol=1e-3)
    with pytest.raises(SynthError) as e:
        kern(A[:, :64].copy(), B[:, :64].copy())  # 2 k-tiles for 3 splits
    assert "3 splits" in str(e.value)


# ---------------------------------------------------------------------------
# the Hopper kernel (TMA + wgmma): the same protocol, the consumers' named barrier in place of __syncthreads

HOPPER_MUTANTS = {  # name: (text, its replacement, the block order that shows it)
    "release fence dropped": ("synth_threadfence();  // release", "(void)0;  //", "forward"),
    "acquire fence dropped": ("synth_threadfence();  // acquire", "(void)0;  //", "forward"),
    "no wait for the count": ("while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {",
                              "if (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {", "forward"),
    "counter not reset": ("counters[0] = 0u;", "", "forward"),
    "first arrival sums": ("== SYNTH_SPLIT_K - 1;", "== 0;", "forward"),
    "own term at the wrong place": ("if (split == 0) { s[0] = v[0];", "if (split == 1) { s[0] = v[0];", "reverse"),
    "split skips its first k-tile": ("(kt0 + i) * 64", "(kt0 + i + (split > 0)) * 64", "forward"),
}


def _sm90(split_k: int, **kw):
    from synth.hopper.kernel_design import KernelDesign
    from synth.emit.sm90.kernel import emit_sm90_kernel

    return emit_sm90_kernel(KernelDesign.of(bm=kw.pop("bm", 128), bn=kw.pop("bn", 64), stages=kw.pop("stages", 3),
                                       split_k=split_k, **kw))


@needs_gxx
def test_hopper_split_kernel_is_right_and_the_same_bits_in_every_block_order():
    from synth.emit.sm90.emulate import emulate_sm90

    text = _sm90(3)
    runs = {o: emulate_sm90(text, 130, 70, 520, block_order=o, with_c=True, alpha=1.5, beta=0.5, ldc=72)
            for o in ("forward", "reverse", "shuffle:4")}
    for o, r in runs.items():
        assert r.ok and r.stats["tickets_left"] == 0, (o, r.summary())
    assert all(np.array_equal(runs["forward"].C, r.C, equal_nan=True) for r in runs.values())  # NaN: ldc padding


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOPPER_MUTANTS))
def test_hopper_broken_protocol_fails_on_the_emulator(name):
    from synth.emit.sm90.emulate import emulate_sm90

    old, new, order = HOPPER_MUTANTS[name]
    text = _sm90(3)
    assert old in text
    assert not emulate_sm90(text.replace(old, new), 130, 64, 520, block_order=order).ok, name


@pytest.mark.skipif(NVCC is None, reason="nvcc is needed to compile the kernel")
def test_hopper_split_kernel_compiles_and_keeps_the_consumer_loop():
    from synth.emit import sass
    from synth.emit.sm90.sass_mix import figures

    figs = []
    for split_k in (1, 3):
        c = sass.compile_cuda(_sm90(split_k, bn=128, stages=4), arch="sm_90a")
        assert c.spill_stores == 0 and c.spill_loads == 0
        figs.append(figures(c, 4))
    assert figs[0]["loop_hgmma"] == figs[1]["loop_hgmma"] == 16
    assert figs[1]["insn_per_hgmma"] <= figs[0]["insn_per_hgmma"] + 0.25
    assert figs[1]["longest_free"] <= 28  # the consumer-loop target of the unsplit kernels (docs/hopper_kernel.md)


@needs_gxx
def test_hopper_split_folder_runs_through_the_python_api(tmp_path):
    kern = _solved_kernel(tmp_path, DOC.replace("arch: sm_80", "arch: sm_90").replace("BK: 32", "BK: 64")
                          .replace("warps: 4\n", "").replace("BN: 128", "BN: 64").replace("split_k: 2", "split_k: 3"))
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (70, 264)).astype(np.float16)
    B = rng.uniform(-1, 1, (90, 264)).astype(np.float16)
    C = kern(A, B)
    assert np.allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, atol=1e-3)
    with pytest.raises(SynthError) as e:
        kern(A[:, :128].copy(), B[:, :128].copy())  # 2 k-tiles for 3 splits
    assert "splits K in 3" in str(e.value)

"""The CPU emulator of synth's CUDA API (synth/emit/emulate.py, docs/emulator.md).

Part 1 proves the emulator bites with small hand-written kernels
(tests/emu_kernels/): fragment layouts against numpy, a cp.async pipeline whose
correct version matches numpy and whose mutations (a wait count one too high, a
missing barrier, a prefetch into the slot being read) give NaN and are reported,
bank-conflict counts of known layouts, and faults reported instead of crashes.

Part 2 runs the GEMM kernels synth.emit.cuda writes: C equals numpy for several
shapes (tile multiples or not), and every mutation that the verifier or the
barrier placement would refuse (a wait count raised by one, a ``sync:<n>`` line
deleted) makes the run fail.
"""

from __future__ import annotations

import functools
import pathlib
import re

import numpy as np
import pytest

from synth.errors import SynthError
from synth.emit.emulate import (Buf, EmulatorError, compile_and_run, emulate_gemm, kernel_macros,
                                mark_main_loop)

KERNELS = pathlib.Path(__file__).resolve().parent / "emu_kernels"
SERIAL_POLICIES = ("forward", "reverse", "interleave")


def kernel(name: str) -> str:
    return (KERNELS / name).read_text()


# ---------------------------------------------------------------------------
# Part 1: the emulator on its own
# ---------------------------------------------------------------------------

def test_ldmatrix_x4_fragment_layout():
    rng = np.random.default_rng(1)
    M = rng.uniform(-4, 4, size=(32, 8)).astype(np.float16)  # 4 matrices of 8 rows
    run = compile_and_run(kernel("fragments.cu"), "ldmatrix_raw",
                          [Buf("M", M), Buf("R", np.zeros(128, np.uint32), out=True)],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=512)
    assert run.errors == []
    R = run.outputs["R"].reshape(32, 4)
    bits = M.view(np.uint16).astype(np.uint32)
    for lane in range(32):
        for q in range(4):  # PTX: r[q] = matrix q, row lane/4, columns 2*(lane%4) (low half) and +1
            row, col = 8 * q + lane // 4, 2 * (lane % 4)
            assert R[lane, q] == bits[row, col] | (bits[row, col + 1] << 16), (lane, q)


def test_mma_16816_against_numpy():
    rng = np.random.default_rng(2)
    A = rng.uniform(-1, 1, size=(16, 16)).astype(np.float16)
    B = rng.uniform(-1, 1, size=(8, 16)).astype(np.float16)  # n x k
    Cin = rng.uniform(-1, 1, size=(16, 8)).astype(np.float32)
    run = compile_and_run(kernel("fragments.cu"), "mma_tile",
                          [Buf("A", A), Buf("B", B), Buf("Cin", Cin), Buf("D", np.zeros((16, 8), np.float32), out=True)],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=768)
    assert run.errors == []
    ref = A.astype(np.float32) @ B.astype(np.float32).T + Cin
    np.testing.assert_allclose(run.outputs["D"], ref, rtol=1e-5, atol=1e-5)
    assert run.count("mma") == 1 and run.count("ldmatrix") == 2


def tile_sum(policy: str = "default", T: int = 6, **defines) -> tuple:
    """Run tests/emu_kernels/tile_sum.cu; returns (run, Y, reference)."""
    stages = int(defines.get("STAGES", 3))
    X = np.random.default_rng(3).uniform(-1, 1, size=(T, 2048)).astype(np.float16)
    run = compile_and_run(kernel("tile_sum.cu"), "tile_sum",
                          [Buf("X", X), Buf("Y", np.zeros(2048, np.float32), out=True), T],
                          grid=(1, 1, 1), block=(128, 1, 1), smem_bytes=4096 * stages, policy=policy,
                          defines=defines)
    return run, run.outputs.get("Y"), X.astype(np.float32).sum(axis=0)


@pytest.mark.parametrize("policy", ("forward", "reverse", "interleave", "parallel"))
@pytest.mark.parametrize("stages", (2, 3, 4))
def test_pipeline_with_correct_waits_matches_numpy(policy, stages):
    run, Y, ref = tile_sum(policy, STAGES=stages)
    assert run.errors == [] and run.warnings == []
    np.testing.assert_allclose(Y, ref, rtol=1e-5, atol=1e-4)
    assert run.early_reads == 0 and run.hazards == 0
    assert run.count("barriers") == 6 and run.count("max_groups_in_flight") == stages - 1


@pytest.mark.parametrize("policy", ("forward", "reverse", "interleave", "parallel"))
def test_wait_count_raised_by_one_reads_poison(policy):
    run, Y, _ = tile_sum(policy, SLACK=1)
    assert np.isnan(Y).all()  # every tile is read before its copy lands
    assert run.count("early_reads") > 0


@pytest.mark.parametrize("policy", ("forward", "reverse", "interleave", "parallel"))
def test_missing_barrier_after_wait_reads_poison(policy):
    run, Y, _ = tile_sum(policy, SYNC=0)
    assert np.isnan(Y).any()
    assert run.count("early_reads") > 0 and run.count("unsync_reads") > 0
    assert run.count("war_hazards") > 0  # and the next copy clobbers a slot others still read


@pytest.mark.parametrize("policy", SERIAL_POLICIES)
def test_prefetch_into_the_slot_being_read_is_write_after_read(policy):
    run, Y, _ = tile_sum(policy, STAGES=3, DIST=3)  # 3 slots, 3 tiles in flight: overwrites the current one
    assert run.count("war_hazards") > 0
    assert np.isnan(Y).any()


def test_plain_loads_are_not_instrumented_but_poison_shows():
    run, Y, _ = tile_sum(SYNC=0, PLAIN=1)
    assert run.count("early_reads") == 0 and run.count("lds") == 0
    assert np.isnan(Y).any()


def test_uncommitted_group_at_exit_is_reported():
    run, Y, ref = tile_sum(NO_LAST_COMMIT=1)
    np.testing.assert_allclose(Y, ref, rtol=1e-5, atol=1e-4)
    assert run.count("uncommitted_at_exit") == 128
    assert any("uncommitted cp.async" in w for w in run.warnings)


def test_wait_group_above_seven_is_allowed_with_a_warning():
    run, Y, ref = tile_sum(STAGES=10)
    np.testing.assert_allclose(Y, ref, rtol=1e-5, atol=1e-4)
    assert run.count("wait_over_7") > 0 and run.count("max_wait_n") == 8
    assert any("exceeds the PTX limit of 7" in w for w in run.warnings)


def bank_probe(rows, words) -> dict:
    run = compile_and_run(kernel("bank_probe.cu"), "bank_probe",
                          [Buf("rows", np.array(rows, np.int32)), Buf("words", np.array(words, np.int32)),
                           Buf("src", np.zeros(256, np.float16)), Buf("out", np.zeros(32, np.uint32), out=True), 3],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=8192)
    assert run.errors == []
    return run.bank_conflicts.by_kind


@pytest.mark.parametrize("row_stride, per_phase", ((16, 0), (32, 1), (64, 3), (128, 7)))
def test_bank_conflicts_of_strided_rows(row_stride, per_phase):
    # 8 rows of 16 bytes per phase; rows `row_stride` apart share a bank group every 128/row_stride rows
    by = bank_probe([row_stride * lane for lane in range(32)], [4 * lane for lane in range(32)])
    assert by["ldmatrix"] == {"main": 3 * 4 * per_phase, "other": 0}  # 3 reps x 4 matrices
    assert by["cp_async"] == {"main": 0, "other": 4 * per_phase}     # 4 phases of 8 lanes
    assert by["lds"] == {"main": 0, "other": 0}


def test_bank_conflicts_of_swizzled_rows_and_word_loads():
    swz = [128 * lane + 16 * ((lane % 8) ^ (lane // 8 % 8)) for lane in range(32)]
    by = bank_probe(swz, [128 * lane for lane in range(32)])  # 32 words in one bank: 32 wavefronts
    assert by["ldmatrix"]["main"] == 0 and by["cp_async"]["other"] == 0
    assert by["lds"]["other"] == 31
    assert bank_probe(swz, [8 * lane for lane in range(32)])["lds"]["other"] == 1  # 2 words per bank


@pytest.mark.parametrize("mode, message", (
    (1, "outside the 256-byte dynamic shared buffer"),
    (2, "outside every global buffer"),
    (3, "not reached by all 32 lanes"),
    (5, "written out of bounds"),
    (6, "not 16-byte aligned"),
))
def test_faults_are_reported_not_crashed_on(mode, message):
    run = compile_and_run(kernel("faults.cu"), "faults",
                          [Buf("src", np.zeros(64, np.float16)), Buf("out", np.zeros(64, np.float32), out=True),
                           mode, 256], grid=(1, 1, 1), block=(64, 1, 1), smem_bytes=256, timeout=30)
    assert run.returncode == 3
    assert any(message in e for e in run.errors), run.errors


def test_barrier_after_early_exit_is_a_warning():
    run = compile_and_run(kernel("faults.cu"), "faults",
                          [Buf("src", np.zeros(64, np.float16)), Buf("out", np.zeros(64, np.float32), out=True),
                           4, 256], grid=(1, 1, 1), block=(64, 1, 1), smem_bytes=256, timeout=30)
    assert run.returncode == 0 and run.errors == []
    assert any("after some threads exited" in w for w in run.warnings)


def test_f16_conversions_match_numpy():
    src = r'''
#include <stdint.h>
#include "synth_emu.h"
extern "C" __global__ void conv(const half* h, float* f, const float* x, half* y, int n) {
  for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
    f[i] = __half2float(h[i]);
    y[i] = __float2half_rn(x[i]);
  }
}
'''
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.standard_normal(30000).astype(np.float32) * 10.0 ** rng.integers(-9, 6, 30000),
                        np.array([65504, 65519.99, 65520, 1e-8, 2.0 ** -25, 2.0 ** -24 * 1.5, np.inf, -np.inf],
                                 np.float32)]).astype(np.float32)
    x = np.resize(x, 65536).astype(np.float32)
    run = compile_and_run(src, "conv", [Buf("h", bits.view(np.float16)), Buf("f", np.zeros(65536, np.float32), out=True),
                                        Buf("x", x), Buf("y", np.zeros(65536, np.float16), out=True), 65536],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=0)
    assert run.errors == []
    f, want = run.outputs["f"], bits.view(np.float16).astype(np.float32)
    assert np.array_equal(np.isnan(f), np.isnan(want))
    assert np.array_equal(f[~np.isnan(f)], want[~np.isnan(want)])
    with np.errstate(over="ignore"):
        want_y = x.astype(np.float16)
    assert np.array_equal(run.outputs["y"].view(np.uint16), want_y.view(np.uint16))


def test_compile_error_is_a_synth_error():
    with pytest.raises(EmulatorError, match="does not compile"):
        compile_and_run('#include "synth_emu.h"\nextern "C" __global__ void k() { no_such_call(); }\n', "k", [],
                        grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=0)


def test_mark_main_loop_wraps_the_body_part():
    src = "  // ---- prologue: 1 step\n  a();\n  // ---- body: 2 steps\n  b();\n  // ---- epilogue\n  c();\n"
    assert mark_main_loop(src) == ("  // ---- prologue: 1 step\n  a();\n  synth_emu_region(1);\n"
                                   "  // ---- body: 2 steps\n  b();\n  synth_emu_region(0);\n"
                                   "  // ---- epilogue\n  c();\n")
    assert mark_main_loop("synth_emu_region(1);\n// ---- body\n") == "synth_emu_region(1);\n// ---- body\n"


# ---------------------------------------------------------------------------
# Part 2: the GEMM kernels of synth.emit.cuda
# ---------------------------------------------------------------------------

from synth.emit import cuda
from synth.gemm import GemmConfig, expand_gemm
from synth.graph import build_graph
from synth.lower import lower
from synth.schedule import schedule_from_pins
from synth.verify import verify_program

SHAPES = {
    "128x128x128": dict(M=128, N=128, K=128, BM=64, BN=64, BK=32, warps=4, stages=3),
    "200x136x96": dict(M=200, N=136, K=96, BM=64, BN=64, BK=32, warps=4, stages=3),
    "64x256x160": dict(M=64, N=256, K=160, BM=32, BN=64, BK=32, warps=2, stages=4),
    "96x80x72-1warp": dict(M=96, N=80, K=72, BM=32, BN=32, BK=16, warps=1, stages=2),
    "64x64x256-bk64": dict(M=64, N=64, K=256, BM=64, BN=64, BK=64, warps=4, stages=3),
    # CUTLASS's default sm80 f16 configuration on one CTA: 128x256x64, 8 warps of 64x64, 3 stages
    "cutlass-default": dict(M=128, N=256, K=256, BM=128, BN=256, BK=64, warps=8, stages=3),
    # Triton's tutorial default 128x128x64, 4 warps, 3 stages, on a ragged shape
    "triton-default-200x136x200": dict(M=200, N=136, K=200, BM=128, BN=128, BK=64, warps=4, stages=3),
    # 10 x 3 tiles: two bands of the grouped rasterization (8 rows, then 2), ragged in M and N
    "raster-10x3-tiles": dict(M=32 * 9 + 5, N=3 * 32 - 8, K=48, BM=32, BN=32, BK=16, warps=1, stages=2),
}
SYNC_LINE = re.compile(r"^[ \t]*synth_syncthreads\(\); // sync:(\d+)\b.*\n", re.M)


@functools.lru_cache(maxsize=None)
def gemm(shape: str):
    """(config, program, kernel text, kernel info) of SHAPES[shape]."""
    kw = SHAPES[shape]
    problem = expand_gemm(GemmConfig(**kw))
    graph = build_graph(problem)
    sched = schedule_from_pins(problem, graph)
    # proved, as 'synth solve' writes it: each wait's tight flag says whether count + 1 is refuted
    # (an epilogue wait implied by the previous step's is correct but not tight)
    program = verify_program(lower(problem, graph, sched), smt2=False).program
    return kw, problem, sched, program, cuda.emit_kernel(problem, sched, program), \
        cuda.kernel_info(problem, sched, program)


def run_gemm(shape: str, src: str | None = None, policy: str = "default"):
    kw, _, _, _, text, info = gemm(shape)
    return emulate_gemm(text if src is None else src, kw["M"], kw["N"], kw["K"], BM=kw["BM"], BN=kw["BN"],
                        warps=kw["warps"], smem_bytes=info.smem_bytes, policy=policy)


def raise_wait_in_text(src: str, index: int, by: int = 1) -> str:
    """``src`` with every immediate of wait #index raised by ``by`` (plain waits and switch cases)."""
    out, n, in_switch = [], 0, False
    for line in src.split("\n"):
        if re.search(rf"// wait #{index} before", line):
            if line.lstrip().startswith("switch"):
                in_switch = True
            else:
                line, k = re.subn(r"synth_cp_async_wait<(\d+)>", lambda m: f"synth_cp_async_wait<{int(m[1]) + by}>",
                                  line)
                n += k
        elif in_switch:
            if line.strip() == "}":
                in_switch = False
            else:
                line, k = re.subn(r"synth_cp_async_wait<(\d+)>", lambda m: f"synth_cp_async_wait<{int(m[1]) + by}>",
                                  line)
                n += k
        out.append(line)
    assert n > 0, f"wait #{index} not found in the kernel"
    return "\n".join(out)


def kernel_with_wait_raised(shape: str, index: int) -> str:
    """The kernel of ``program.with_wait(index, in_flight + 1)``: re-emitted when the emitter accepts
    the program, else (its barrier placement refuses a read that no wait retired, as it should) the
    emitted text with that wait's immediates raised by one."""
    from synth.expr import Bin, Num, simplify

    _, problem, sched, program, text, _ = gemm(shape)
    w = program.waits[index]
    mutated = program.with_wait(index, in_flight=simplify(Bin("+", w.in_flight, Num(1))))
    try:
        return cuda.emit_kernel(problem, sched, mutated)
    except (ValueError, SynthError):
        return raise_wait_in_text(text, index)


@pytest.mark.parametrize("shape", ("128x128x128", "200x136x96", "64x256x160", "cutlass-default",
                                   "triton-default-200x136x200", "raster-10x3-tiles"))
@pytest.mark.parametrize("policy", ("forward", "reverse"))
def test_emitted_gemm_matches_numpy(shape, policy):
    r = run_gemm(shape, policy=policy)
    assert r.ok and r.clean, r.summary()
    assert r.max_abs_err < 1e-3
    assert r.C.shape == (SHAPES[shape]["M"], SHAPES[shape]["N"])


@pytest.mark.slow
@pytest.mark.parametrize("shape", ("96x80x72-1warp", "64x64x256-bk64"))
@pytest.mark.parametrize("policy", ("interleave", "parallel"))
def test_emitted_gemm_matches_numpy_more(shape, policy):
    r = run_gemm(shape, policy=policy)
    assert r.ok and r.clean, r.summary()


@pytest.mark.parametrize("shape", ("128x128x128", "64x64x256-bk64"))
def test_emitted_gemm_main_loop_is_bank_conflict_free(shape):
    r = run_gemm(shape)
    bank = r.stats["bank"]
    assert bank["ldmatrix"]["main"]["instructions"] > 0 and bank["cp_async"]["main"]["instructions"] > 0
    assert r.bank_conflicts.main == 0, r.bank_conflicts.by_kind
    assert r.bank_conflicts.total == 0, r.bank_conflicts.by_kind


def test_unswizzled_layout_has_bank_conflicts():
    """The counter is not trivially zero: the same kernel without its XOR swizzle conflicts."""
    _, _, _, _, text, _ = gemm("128x128x128")
    m = re.search(r"SYNTH_DEVICE int swz\(int r, int c\) \{\n(.*?\n)\}", text, re.S)
    if m is None:
        pytest.skip("the kernel has no swz(r, c) layout function to replace")
    plain = text[: m.start(1)] + "  return (r * CPR + c) << 4;\n" + text[m.end(1):]
    r = run_gemm("128x128x128", plain)
    assert r.ok, r.summary()
    assert r.bank_conflicts.by_kind["ldmatrix"]["main"] > 0  # 64-byte rows: 4-way conflicts


@pytest.mark.parametrize("shape", ("128x128x128", "64x256x160", "96x80x72-1warp", "cutlass-default"))
def test_emitted_gemm_fails_with_a_wait_count_raised_by_one(shape):
    _, _, _, program, _, _ = gemm(shape)
    body = [k for k, w in enumerate(program.waits) if w.part == "body" and w.tight is not False]
    assert body, "the program has no body wait"
    for k in body:
        r = run_gemm(shape, kernel_with_wait_raised(shape, k))
        assert not r.ok and r.nan_count > 0 and r.early_reads > 0, (k, r.summary())


@pytest.mark.slow
@pytest.mark.parametrize("shape", ("128x128x128", "64x256x160", "96x80x72-1warp"))
def test_emitted_gemm_fails_with_any_wait_raised_by_one(shape):
    _, _, _, program, _, _ = gemm(shape)
    for k, w in enumerate(program.waits):
        if w.tight is False:
            continue
        for policy in SERIAL_POLICIES:
            if policy == "reverse" and w.part == "body":
                continue  # the default policy: test_emitted_gemm_fails_with_a_wait_count_raised_by_one
            r = run_gemm(shape, kernel_with_wait_raised(shape, k), policy)
            assert not r.ok and r.early_reads > 0, (k, w.part, policy, r.summary())


@pytest.mark.parametrize("shape", ("128x128x128", "64x256x160", "cutlass-default"))
def test_emitted_gemm_fails_without_any_one_barrier(shape):
    """Multi-warp kernels: every deleted ``sync:<n>`` line poisons C and is reported."""
    _, _, _, _, text, info = gemm(shape)
    syncs = [int(n) for n in SYNC_LINE.findall(text)]
    assert len(syncs) >= len(info.barriers) > 0  # body barriers repeat in each unrolled copy
    for n in syncs:
        src, k = re.subn(rf"^[ \t]*synth_syncthreads\(\); // sync:{n}\b.*\n", "", text, flags=re.M)
        assert k == 1
        r = run_gemm(shape, src)  # default policy: warps in reverse order between barriers
        assert not r.ok and r.nan_count > 0, (n, r.summary())
        assert r.early_reads + r.hazards > 0, (n, r.summary())


def test_single_warp_gemm_reports_every_missing_barrier():
    """With one warp the lanes move together, so poison cannot show; the race is still reported."""
    _, _, _, _, text, _ = gemm("96x80x72-1warp")
    syncs = [int(n) for n in SYNC_LINE.findall(text)]
    assert syncs
    for n in syncs:
        src = re.sub(rf"^[ \t]*synth_syncthreads\(\); // sync:{n}\b.*\n", "", text, flags=re.M)
        r = run_gemm("96x80x72-1warp", src)
        assert not r.clean and r.early_reads + r.hazards > 0, (n, r.summary())


# reverse, the default policy, is test_emitted_gemm_fails_without_any_one_barrier's (the same runs)
@pytest.mark.slow
@pytest.mark.parametrize("shape", ("128x128x128", "64x256x160"))
@pytest.mark.parametrize("policy", ("forward", "interleave", "parallel"))
def test_emitted_gemm_missing_barriers_under_every_policy(shape, policy):
    _, _, _, _, text, _ = gemm(shape)
    for n in (int(x) for x in SYNC_LINE.findall(text)):
        src = re.sub(rf"^[ \t]*synth_syncthreads\(\); // sync:{n}\b.*\n", "", text, flags=re.M)
        r = run_gemm(shape, src, policy)
        assert not r.clean and r.early_reads + r.hazards > 0, (n, policy, r.summary())


def test_launch_that_does_not_match_the_kernel_is_refused():
    kw, _, _, _, text, info = gemm("128x128x128")
    assert kernel_macros(text)["SMEM_BYTES"] == info.smem_bytes
    with pytest.raises(EmulatorError, match="SYNTH_BM"):
        emulate_gemm(text, 128, 128, 128, BM=128, BN=64, warps=4, smem_bytes=info.smem_bytes)



STATUS_CODES_BY_NAME = {name: code for code, (name, _) in cuda.STATUS_CODES.items()}


def _run(shape: str, M: int, N: int, K: int, **kw):
    k, _, _, _, text, info = gemm(shape)
    return emulate_gemm(text, M, N, K, BM=k["BM"], BN=k["BN"], warps=k["warps"], smem_bytes=info.smem_bytes, **kw)


@pytest.mark.parametrize("K, lda, ldb, ldc, code", [
    (256, None, None, None, STATUS_CODES_BY_NAME["SYNTH_ERR_KTILES"]),  # another trip count than proved
    (124, None, None, None, STATUS_CODES_BY_NAME["SYNTH_ERR_K"]),       # K % 8 != 0
    (128, 120, None, None, STATUS_CODES_BY_NAME["SYNTH_ERR_LD_AB"]),    # lda < K
    (128, None, 132, None, STATUS_CODES_BY_NAME["SYNTH_ERR_LD_AB"]),    # ldb % 8 != 0
    (128, None, None, 130, STATUS_CODES_BY_NAME["SYNTH_ERR_LD_C"]),     # ldc % 4 != 0
])
def test_violated_run_time_precondition_is_reported_and_c_untouched(K, lda, ldb, ldc, code):
    """One kernel.cu, launched against its preconditions: the documented code in *status, C left
    as it was (NaN here), nothing read or written out of bounds."""
    r = _run("128x128x128", 128, 128, K, lda=lda, ldb=ldb, ldc=ldc)
    assert r.status & code, r.status
    assert not r.errors and r.nan_count == r.C.size and not r.ok


def test_one_kernel_many_m_n_k_alpha_beta_c_and_strides():
    """The kernel proved for 4 k-tiles of 32: every K with ceil(K / 32) == 4 (the residue is k-tile
    0's), M and N off the tile, alpha/beta with C_in, padded row strides (C's padding untouched)."""
    for (M, N, K, kw) in [(128, 128, 104, {}), (1, 8, 128, {}),
                          (77, 45, 120, dict(ldc=48, with_c=True, alpha=0.5, beta=-2.0)),
                          (130, 66, 112, dict(lda=136, ldb=120, ldc=72, with_c=True, alpha=-1.0, beta=0.25)),
                          (129, 127, 97 + 7, dict(ldc=128, alpha=2.0))]:
        r = _run("128x128x128", M, N, K, **kw)
        assert r.clean and r.status == 0, (M, N, K, kw, r.summary())


# ---------------------------------------------------------------------------
# one kernel.cu for every K: the k-tile loop proved for a symbolic T >= 1

SYMBOLIC = dict(M=96, N=80, K=256, BM=64, BN=64, BK=32, warps=4, stages=3)
SYMBOLIC_KS = (8, 32, 64, 104, 200, 1032)
"""K = 8 and BK (one k-tile, below the 3 stages), 2 BK = (stages - 1) BK, stages BK + 8, 200, large."""


@functools.lru_cache(maxsize=None)
def symbolic_gemm():
    problem = expand_gemm(GemmConfig(**SYMBOLIC), min_ktiles=1)
    graph = build_graph(problem)
    sched = schedule_from_pins(problem, graph)
    program = verify_program(lower(problem, graph, sched), smt2=False).program  # proved for every T >= 1
    return problem, sched, program, cuda.emit_kernel(problem, sched, program), \
        cuda.kernel_info(problem, sched, program)


def run_symbolic(M: int, N: int, K: int, src: str | None = None, policy: str = "default"):
    _, _, _, text, info = symbolic_gemm()
    return emulate_gemm(text if src is None else src, M, N, K, BM=SYMBOLIC["BM"], BN=SYMBOLIC["BN"],
                        warps=SYMBOLIC["warps"], smem_bytes=info.smem_bytes, policy=policy, ldc=-(-N // 4) * 4)


def test_one_kernel_for_every_k_and_off_tile_m_n():
    """The same kernel.cu at K = 8 .. 1032 (trip counts 1 to 33, below and above the 3 stages) and M, N on
    and off the 64x64 tile equals numpy, clean; the program it implements was proved for every T >= 1."""
    _, _, program, text, info = symbolic_gemm()
    assert program.trip_count == "T" and program.min_trip_count == 1 and info.ktiles == 0
    shapes = ((96, 80), (33, 17), (128, 64))  # ragged in M and N, one block, on the tile
    for j, K in enumerate(SYMBOLIC_KS):  # every K with two of the shapes, every shape with four Ks
        for M, N in (shapes[j % 3], shapes[(j + 2) % 3]):
            r = run_symbolic(M, N, K)
            assert r.clean and r.status == 0, (M, N, K, r.summary())


@pytest.mark.slow
def test_one_kernel_for_every_k_fails_with_a_tight_wait_raised_or_a_barrier_deleted():
    """Every tight wait raised by one and every sync:<n> line deleted: some K of SYMBOLIC_KS fails
    (NaN, early reads or hazards)."""
    _, _, program, text, _ = symbolic_gemm()
    tight = [k for k, w in enumerate(program.waits) if w.tight]
    assert tight
    for k in tight:
        src = raise_wait_in_text(text, k)
        assert any(not run_symbolic(96, 80, K, src).clean for K in (8, 64, 104, 200)), f"wait #{k}"
    nums = [int(m.group(1)) for m in SYNC_LINE.finditer(text)]
    assert nums
    for n in nums:
        src = SYNC_LINE.sub(lambda m: "" if int(m.group(1)) == n else m.group(0), text)
        assert any(not run_symbolic(96, 80, K, src, policy).clean
                   for K in (8, 64, 104, 200) for policy in ("forward", "reverse")), f"sync:{n}"

"""The attention kernel's device functions (synth.emit.sm90.attention_ptx; docs/emulator.md, "Register-operand wgmma
and MN-major B"):

* on the sm_90a emulator, a warp group's register-A wgmma (tests/hopper/rs_wgmma_emu.cpp: A fragments built from a
  known matrix, B = V in shared memory as TMA boxes, fence / rs wgmma / commit / wait) computes 0.5 + A B as numpy
  does, f16 and bf16, N = 16 .. 256, one to four k16 steps, under every thread order; and its adversarial semantics
  show: A registers changed before the wait_group are a race, and so is an accumulator register written then (two
  groups chained on one accumulator in flight together run), a B slot refilled before it changes D (the late
  read), a wgmma issued while B's TMA is in flight gives NaN, a missing wgmma.fence is a protocol error;
* ex2, the f16x2 / bf16x2 packs and synth_desc_mn128 of the emulator against numpy and the nvcc text;
* with nvcc, every real definition compiles for sm_90a and the SASS holds a register-A, transposed-B HGMMA per
  wgmma, MUFU.EX2 and the F2FP packs.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from conftest import gxx_build

HERE = pathlib.Path(__file__).resolve().parent
RUNTIME = HERE.parent.parent / "synth" / "emit" / "runtime"

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to build the emulator programs")


def _exe() -> pathlib.Path:
    return gxx_build(HERE / "rs_wgmma_emu.cpp", ["-std=c++20", "-O2", "-w", "-DSYNTH_EMULATE", f"-I{RUNTIME}"],
                     depends=sorted(RUNTIME.glob("*.h")))


def _bits(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact: the values are bf16 already


def _value(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


class Case:
    """A (64 x K), B and B2 (K x N) of small integers and quarters (exact in f16 and bf16, and their products sums
    exact in f32), the 16-bit file the program reads, and the references."""

    def __init__(self, tmp_path: pathlib.Path, n: int, ksteps: int, dtype: str, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        k = 16 * ksteps
        self.n, self.ksteps, self.dtype = n, ksteps, dtype
        A = rng.integers(-4, 5, (64, k)).astype(np.float32)
        B = rng.integers(-8, 9, (k, n)).astype(np.float32) / 4
        B2 = rng.integers(-8, 9, (k, n)).astype(np.float32) / 4
        bits = [_bits(x, dtype) for x in (A, B, B2)]
        self.A, self.B, self.B2 = (_value(b, dtype) for b in bits)
        self.file = tmp_path / f"in-{n}-{ksteps}-{dtype}-{seed}.bin"
        self.file.write_bytes(b"".join(b.tobytes() for b in bits))
        self.ref = 0.5 + self.A @ self.B

    def run(self, variant: str = "ok", order: int = 0) -> dict:
        proc = subprocess.run([str(_exe()), str(self.n), str(int(self.dtype == "bf16")), str(self.ksteps), variant,
                               str(order), str(self.file)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        r = json.loads(proc.stdout)
        r["D"] = np.array(r["D"], np.float64).reshape(64, self.n)
        return r


@needs_gxx
@pytest.mark.parametrize("n, ksteps, dtype, order", [(64, 1, "f16", 0), (128, 2, "f16", 1), (256, 4, "f16", 2 + 5),
                                                     (128, 4, "bf16", 0), (64, 2, "bf16", 2 + 1), (16, 1, "f16", 1),
                                                     (96, 2, "bf16", 0)])
def test_rs_wgmma_computes_a_times_b(tmp_path, n, ksteps, dtype, order):
    """D = 0.5 + A B exactly (the operands' sums are exact), every thread order; one wgmma per k16 step, B's TMA
    boxes all landed and none read in flight."""
    c = Case(tmp_path, n, ksteps, dtype)
    r = c.run("ok", order)
    assert r["ok"] and r["kind"] == "", r["message"]
    assert r["wgmma"] == ksteps and r["poisoned_ops"] == 0 and r["protocol_errors"] == 0
    assert r["landed"] == (n + 63) // 64
    np.testing.assert_array_equal(r["D"], c.ref)


@needs_gxx
def test_rs_wgmma_reads_b_when_the_wait_retires_it(tmp_path):
    """The V slot refilled (TMA of B2, waited on) between the commit and the wait_group: the emulator reads B at
    retire time, so D is 0.5 + A B2, not A B (on the GPU: either, or a mix)."""
    c = Case(tmp_path, 128, 2, "f16")
    r = c.run("overwrite_b", 1)
    assert r["ok"], r["message"]
    assert not np.array_equal(r["D"], c.ref)
    np.testing.assert_array_equal(r["D"], 0.5 + c.A @ c.B2)


@needs_gxx
@pytest.mark.parametrize("order", [0, 1, 2 + 3])
def test_rs_wgmma_a_registers_changed_before_the_wait_is_a_race(tmp_path, order):
    """One thread changes one of its A registers between the commit and the wait_group: reported as a race naming the
    thread and the register (PTX leaves the result undefined), not a silently different D."""
    r = Case(tmp_path, 64, 1, "bf16").run("overwrite_a", order)
    assert not r["ok"] and r["kind"] == "race"
    assert "thread 37" in r["message"] and "A-fragment register 1" in r["message"] and "wait_group" in r["message"]


@needs_gxx
@pytest.mark.parametrize("variant, order", [("overwrite_d", 0), ("overwrite_d", 2 + 3), ("overwrite_d_chained", 1)])
def test_accumulator_written_before_the_wait_is_a_race(tmp_path, variant, order):
    """One thread adds 1 to one of its accumulator registers while a wgmma accumulating into it is in flight (after
    the commit, or after wait_group 1 retired the first of two chained groups): a race naming the CTA, the warp
    group, the thread and the register, not the D of ``corr O + P V`` that an execution at the retire would give."""
    r = Case(tmp_path, 64, 2, "f16").run(variant, order)
    assert not r["ok"] and r["kind"] == "race", r["message"]
    m = r["message"]
    assert "CTA 0 (block 0,0)" in m and "warp group 0" in m and "thread 37" in m
    assert "accumulator register 5" in m and "wait_group" in m


@needs_gxx
@pytest.mark.parametrize("order", [0, 1])
def test_chained_wgmmas_on_one_accumulator_run(tmp_path, order):
    """Two groups of wgmmas on the same accumulator in flight together (wait_group 1, then 0), as the GEMM kernels'
    k-tiles are: allowed (they chain in order), D = 0.5 + 2 A B."""
    c = Case(tmp_path, 128, 2, "f16")
    r = c.run("chained", order)
    assert r["ok"] and r["kind"] == "", r["message"]
    assert r["wgmma"] == 4
    np.testing.assert_array_equal(r["D"], 0.5 + 2 * (c.A @ c.B))


@needs_gxx
def test_rs_wgmma_issued_while_b_is_in_flight_is_nan(tmp_path):
    """The wgmma issued before B's copies were waited on: the op is poisoned (read before the data landed), D NaN."""
    r = Case(tmp_path, 128, 2, "f16").run("in_flight", 0)
    assert r["ok"], r["message"]
    assert r["poisoned_ops"] == 2 and np.isnan(r["D"]).all()


@needs_gxx
@pytest.mark.parametrize("variant", ["no_fence", "unfenced_after_wait"])
def test_missing_wgmma_fence_is_a_protocol_error(tmp_path, variant):
    """No wgmma.fence before the first wgmma, or before a batch after a wait_group: a protocol error; the same second
    batch with its fence runs (D = 0.5 + 2 A B)."""
    c = Case(tmp_path, 64, 2, "f16")
    r = c.run(variant, 0)
    assert not r["ok"] and r["kind"] == "protocol" and "no wgmma.fence" in r["message"], r["message"]
    ok = c.run("fenced_after_wait", 0)
    assert ok["ok"] and ok["protocol_errors"] == 0, ok["message"]
    np.testing.assert_array_equal(ok["D"], 0.5 + 2 * (c.A @ c.B))


SCALARS = r'''
#include "synth_emu_sm90.h"
#include <iostream>
int main() {
  std::string what;
  while (std::cin >> what) {
    if (what == "ex2") {  // the argument's f32 bits (inf and NaN included)
      uint32_t u; float x; std::cin >> u; std::memcpy(&x, &u, 4); std::printf("%.9g\n", double(synth_ex2(x))); }
    else if (what == "pack") { float lo, hi; std::cin >> lo >> hi;
      std::printf("%u %u\n", synth_pack_f16x2(lo, hi), synth_pack_bf16x2(lo, hi)); }
    else if (what == "desc") { uint32_t a, c; std::cin >> a >> c;
      std::printf("%llu\n", (unsigned long long)synth_desc_mn128(a, c)); }
  }
}
'''


@pytest.fixture(scope="module")
def scalars(tmp_path_factory):
    """``query(lines) -> [output line]`` from the emulator's synth_ex2, packs and synth_desc_mn128."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build the emulator programs")
    src = tmp_path_factory.mktemp("scalars") / "emu_scalars.cpp"
    src.write_text(SCALARS)
    exe = gxx_build(src, ["-std=c++20", "-O1", "-w", "-DSYNTH_EMULATE", f"-I{RUNTIME}"],
                    depends=sorted(RUNTIME.glob("*.h")))

    def query(lines):
        proc = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    return query


def test_emulated_ex2(scalars):
    """2^x, with ex2.approx.ftz's edges: -inf -> 0, +inf -> inf, a subnormal result flushed to 0, NaN stays NaN."""
    xs = [0.0, 1.0, -1.0, 0.5, 10.25, -20.0, -126.0, -127.5, -149.0, -float("inf"), float("inf"), float("nan")]
    bits = np.array(xs, np.float32).view(np.uint32)
    got = [float(v) for v in scalars([f"ex2 {b}" for b in bits])]
    assert len(got) == len(xs)
    with np.errstate(over="ignore"):
        want = np.exp2(np.array(xs, np.float32))
    for x, g, w in zip(xs, got, want):
        if np.isnan(w):
            assert np.isnan(g)
        elif 0 < abs(w) < np.finfo(np.float32).tiny:
            assert g == 0.0, x  # flushed (ftz)
        else:
            assert g == pytest.approx(float(w), rel=1e-6), x


def test_emulated_packs_round_to_nearest_even(scalars):
    """cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32: lo in the low half, each rounded to nearest even (numpy's f16 cast,
    and bf16 as the top half of the f32 rounded to nearest even)."""
    rng = np.random.default_rng(1)
    pairs = [(float(a), float(b)) for a, b in rng.normal(0, 100, (64, 2)).astype(np.float32)]
    pairs += [(1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11), (70000.0, -70000.0), (1.0 + 2.0 ** -8, 3.0 * 2.0 ** -9)]
    got = [tuple(int(v) for v in line.split()) for line in scalars([f"pack {lo!r} {hi!r}" for lo, hi in pairs])]
    assert len(got) == len(pairs)
    for (lo, hi), (f16, bf16) in zip(pairs, got):
        with np.errstate(over="ignore"):  # 70000 -> inf, as cvt.rn.f16x2.f32
            h = np.array([lo, hi], np.float32).astype(np.float16).view(np.uint16)
        assert f16 == int(h[0]) | int(h[1]) << 16, (lo, hi)
        assert bf16 == _bf16_rne(lo) | _bf16_rne(hi) << 16, (lo, hi)


def _bf16_rne(x: float) -> int:
    """The bf16 nearest to f32 ``x`` (ties to an even last bit): of the two bf16 around it, by their values."""
    u = int(np.array([x], np.float32).view(np.uint32)[0])
    down = u >> 16
    up = down + 1  # one bf16 ulp further from zero (the sign bit is kept)

    def val(b: int) -> float:
        return float(np.array([b << 16], np.uint32).view(np.float32)[0])

    dd, du = abs(float(np.float32(x)) - val(down)), abs(val(up) - float(np.float32(x)))
    return down if dd < du or (dd == du and down % 2 == 0) else up


def test_emulated_descriptor_is_the_kernels_text(scalars):
    """The emulator's synth_desc_mn128 is the nvcc text's (DESC_MN128) field for field: start >> 4 (18-bit shared
    address), LBO chunk_bytes >> 4, SBO 1024 >> 4, layout 1 (128-byte swizzle), base offset 0."""
    from synth.emit.sm90.attention_ptx import DESC_MN128

    text = "\n".join(DESC_MN128)
    assert "synth_desc_mn128(uint32_t a, uint32_t chunk_bytes)" in text
    cases = [(0x400, 8192), (0x400 + 2048 * 3, 16384), (0x3FC00, 4096), (0x40400, 128 * 256)]
    got = [int(v) for v in scalars([f"desc {a} {c}" for a, c in cases])]
    for (a, c), d in zip(cases, got):
        assert d & 0x3FFF == (a & 0x3FFFF) >> 4 and (d >> 16) & 0x3FFF == c >> 4
        assert (d >> 32) & 0x3FFF == 64 and (d >> 49) & 7 == 0 and d >> 62 == 1


NVCC_PROBE = r'''
extern "C" __global__ void __launch_bounds__(128, 1) rs_probe(const uint32_t* A, const float* X, float* out) {
  __shared__ alignas(1024) unsigned char sm[4 * 64 * 128];
  const uint32_t sb = synth_smem_u32(sm);
  uint32_t a[4];
  for (int i = 0; i < 4; ++i) a[i] = A[threadIdx.x * 4 + i];
  a[0] ^= synth_pack_f16x2(X[0], X[1]);
  a[1] ^= synth_pack_bf16x2(X[2], X[3]);
  float d[128];
  for (int i = 0; i < 128; ++i) d[i] = synth_ex2(X[i + threadIdx.x]);
  synth_wgmma_fence();
  %CALLS%
  synth_wgmma_commit();
  synth_wgmma_wait_n<0>();
  for (int i = 0; i < 128; ++i) out[threadIdx.x * 128 + i] = d[i];
}
'''


@pytest.mark.nvcc
def test_real_definitions_compile_for_sm90a():
    """BASE_PTX + ATTENTION_PTX + the register-A wgmma of N = 64, 128, 256 in f16 and bf16, used by one kernel, compile
    with nvcc -arch=sm_90a; the SASS has one HGMMA per call, each with a register A operand (R<n>) and a transposed B
    (gdesc ... .tnspB), in order of N (64, 64, 128, 128, 256, 256), MUFU.EX2 for synth_ex2 and one F2FP pack per
    type; ptxas does not serialize the wgmmas."""
    import re

    from synth.emit import sass
    from synth.emit.sm90.attention_ptx import ATTENTION_PTX, rs_wgmma_name, rs_wgmma_ptx
    from synth.emit.sm90.ptx import BASE_PTX

    if sass.tool("nvcc") is None:
        pytest.skip("nvcc is not on PATH (install the CUDA toolkit)")
    if sass.tool("cuobjdump") is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    shapes = [(n, t) for n in (64, 128, 256) for t in ("f16", "bf16")]
    calls = "\n  ".join(f"{rs_wgmma_name(n, t)}(d, a, synth_desc_mn128(sb + {2048 * j}, 8192));"
                        for j, (n, t) in enumerate(shapes))
    text = "\n".join([BASE_PTX, *ATTENTION_PTX, *(rs_wgmma_ptx(n, t) for n, t in shapes),
                      NVCC_PROBE.replace("%CALLS%", calls)])
    compiled = sass.compile_cuda(text, "sm_90a")
    hgmma = [line for line in compiled.sass.splitlines() if "HGMMA" in line]
    assert len(hgmma) == len(shapes), hgmma
    for line, (n, t) in zip(hgmma, shapes):
        m = re.search(r"HGMMA\.64x(\d+)x16\.F32(\.BF16)? R\d+, (R\d+), gdesc\[UR\d+\]\.tnspB,", line)
        assert m, line
        assert int(m.group(1)) == n and bool(m.group(2)) == (t == "bf16"), line
    assert "MUFU.EX2" in compiled.sass
    assert re.search(r"F2FP\.F16\.F32\.PACK_AB", compiled.sass) and re.search(r"F2FP\.BF16\.F32\.PACK_AB",
                                                                              compiled.sass)
    assert compiled.spill_stores == 0
    assert "serialized" not in compiled.log, compiled.log  # ptxas keeps the wgmmas asynchronous


def test_rs_wgmma_names_and_shapes():
    """The names the attention emitter calls, for every N wgmma has, and the refusals."""
    from synth.emit.sm90.attention_ptx import rs_wgmma_name, rs_wgmma_ptx

    assert rs_wgmma_name(128, "f16") == "synth_wgmma_rs_m64n128k16"
    assert rs_wgmma_name(64, "bf16") == "synth_wgmma_rs_bf16_m64n64k16"
    header = (RUNTIME / "synth_emu_sm90.h").read_text()
    assert "SYNTH_WGMMA_RS_SHAPE" in header
    for n in range(16, 257, 16):
        assert f"SYNTH_WGMMA_RS_SHAPE({n})" in header
        assert rs_wgmma_ptx(n, "f16").startswith(f"SYNTH_DEV void synth_wgmma_rs_m64n{n}k16(float* d, const uint32_t* a,"
                                                 " uint64_t db) {")
    for bad in ((8, "f16"), (272, "f16"), (72, "bf16"), (64, "f32")):
        with pytest.raises(ValueError):
            rs_wgmma_name(*bad)

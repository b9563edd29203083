"""The device functions a FlashAttention-forward kernel adds to the sm_90a base (:data:`synth.emit.sm90.ptx.BASE_PTX`):
their inline PTX, for nvcc.

Under ``-DSYNTH_EMULATE`` the kernel includes ``runtime/synth_emu_sm90.h`` instead, which defines the same names
with the emulator's semantics (docs/emulator.md, "Register-operand wgmma and MN-major B"):

* ``synth_wgmma_rs_m64n{N}k16(float* d, const uint32_t* a, uint64_t db)`` and ``synth_wgmma_rs_bf16_m64n{N}k16``
  (:func:`rs_wgmma_ptx`): ``D += A * B`` with A (64 x 16) from registers, 4 per thread of the warp group, each two
  16-bit values (the PTX ISA's register fragment of matrix A: value ``j`` of thread ``t`` is the low (``j`` even) or
  high half of ``a[j / 2]`` and holds the element the f32 accumulator value ``j`` of an n16 tile holds), B (16 x N)
  from shared memory, MN-major (transpose-b 1) through a 128-byte-swizzle descriptor, D ``N / 2`` f32 per thread;
* ``synth_desc_mn128(a, chunk_bytes)``: that descriptor, for B stored as TMA boxes of ``[K rows x 64 elements]``
  (``CU_TENSOR_MAP_SWIZZLE_128B``, 1024-byte aligned) ``chunk_bytes`` apart along N, ``a`` the shared address of
  ``(k0, n = 0)`` with ``k0`` a multiple of 8 (one k16 step further: ``a + 2048``);
* ``synth_ex2(x)``: ``ex2.approx.ftz.f32``;
* ``synth_pack_f16x2(lo, hi)`` / ``synth_pack_bf16x2(lo, hi)``: ``cvt.rn.{f16,bf16}x2.f32``, ``lo`` in bits 0..15.

The text the GEMM kernels emit is untouched: these are added only by a kernel that asks for them.
"""

from __future__ import annotations

DESC_MN128 = [
    "// MN-major operand, 128-byte swizzle: start >> 4, LBO = chunk_bytes (from one 64-element MN chunk to the next),",
    "// SBO 1024 bytes (8 K rows), layout 1 (128B)",
    "SYNTH_DEV uint64_t synth_desc_mn128(uint32_t a, uint32_t chunk_bytes) {",
    "  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((chunk_bytes >> 4) & 0x3FFF) << 16) |",
    "         ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);",
    "}",
]
"""``synth_desc_mn128``: the wgmma descriptor of an MN-major B operand made of 128-byte-swizzled TMA boxes (the
emulator's header defines it with the same expression; tests/hopper/test_emulator_rs_wgmma.py holds them equal)."""

ATTENTION_PTX = [
    *DESC_MN128,
    "// ex2.approx.ftz.f32: 2^x (MUFU.EX2), subnormals flushed to zero, -inf -> +0",
    "SYNTH_DEV float synth_ex2(float x) {",
    '  float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;',
    "}",
    "// cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32: lo in bits 0..15, hi in bits 16..31 (PTX names the high half first)",
    "SYNTH_DEV uint32_t synth_pack_f16x2(float lo, float hi) {",
    '  uint32_t r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;',
    "}",
    "SYNTH_DEV uint32_t synth_pack_bf16x2(float lo, float hi) {",
    '  uint32_t r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;',
    "}",
]
"""The attention kernel's device functions besides the register-A wgmma (one C++ line each entry), for nvcc: the
MN-major descriptor, ``ex2``, the f16x2 / bf16x2 packs. They need ``SYNTH_DEV`` and ``<cstdint>``
(:data:`synth.emit.sm90.ptx.BASE_PTX`)."""

DTYPES = ("f16", "bf16")
"""The 16-bit operand types of the register-A wgmma."""


def rs_wgmma_name(n: int, dtype: str) -> str:
    """The device function of one register-A ``m64n{n}k16`` wgmma of ``dtype`` operands: ``synth_wgmma_rs_m64n{n}k16``
    (f16) or ``synth_wgmma_rs_bf16_m64n{n}k16``. ValueError for an N wgmma has not (a multiple of 16 in 16 .. 256) or
    another type."""
    if dtype not in DTYPES:
        raise ValueError(f"register-A wgmma of {dtype!r}: expected one of {DTYPES}")
    if n % 16 or not 16 <= n <= 256:
        raise ValueError(f"wgmma m64n{n}k16: N must be a multiple of 16 in 16 .. 256")
    return f"synth_wgmma_rs_m64n{n}k16" if dtype == "f16" else f"synth_wgmma_rs_bf16_m64n{n}k16"


def rs_wgmma_ptx(n: int, dtype: str) -> str:
    """The inline-PTX definition of :func:`rs_wgmma_name`: ``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t}``
    with accumulators ``d[0 .. n / 2 - 1]`` (read and written: scale-d 1, accumulate), A registers ``a[0 .. 3]``,
    B descriptor ``db``, immediates scale-a 1, scale-b 1, transpose-b 1 (B MN-major). One line per statement,
    ending in a newline."""
    name = rs_wgmma_name(n, dtype)
    regs = n // 2
    outs = ", ".join(f"%{j}" for j in range(regs))
    ins = ", ".join(f"%{regs + j}" for j in range(4))
    binds = ", ".join(f'"+f"(d[{j}])' for j in range(regs))
    return (f"SYNTH_DEV void {name}(float* d, const uint32_t* a, uint64_t db) {{\n"
            f"  asm volatile(\"{{\\n .reg .pred p;\\n setp.ne.b32 p, 1, 0;\\n"
            f" wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype} {{{outs}}}, {{{ins}}}, %{regs + 4}, "
            f"p, 1, 1, 1;\\n}}\"\n"
            f"               : {binds}\n"
            f"               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db) : \"memory\"); }}\n")


__all__ = ["ATTENTION_PTX", "DESC_MN128", "DTYPES", "rs_wgmma_name", "rs_wgmma_ptx"]

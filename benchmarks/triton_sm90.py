"""Triton 3.9 matmuls that load through tensor descriptors (TMA), compiled for sm_90 without a GPU.

Shared by benchmarks/sass_sm90.py (their SASS beside synth's and CUTLASS's) and
tests/test_check_triton_hopper.py (their TTGIR is what ``synth check`` maps and proves;
the test's saved inputs are regenerated from these). Importing this module needs Triton.

* ``mm_tma``: A and B by TMA, ``acc = dot(a, b.T, acc)`` per k-tile;
* ``mm_one_tma``: one TMA load in the loop, B one tile loaded before it (never refilled);
* ``mm_tma_and_cp_async``: A by TMA, B by pointer loads (Triton pipelines B with cp.async).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def mm_tma(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

@triton.jit
def mm_one_tma(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    # one TMA load in the loop; B is one tile loaded before it (its shared copy is never refilled)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    b = tl.load(b_ptr + offs_n[None, :] * BLOCK_K + offs_k[:, None])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        acc = tl.dot(a, b, acc)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

@triton.jit
def mm_tma_and_cp_async(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    # A by TMA, B by pointer loads: Triton pipelines B with cp.async in the same loop
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = tl.load(b_ptr + offs_n[None, :] * K + (k * BLOCK_K + offs_k)[:, None])
        acc = tl.dot(a, b, acc)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def compile_sm90(fn, stages: int, *, bk: int = 64, bm: int = 128, bn: int = 128, warps: int = 8):
    """``fn`` compiled by Triton for ``GPUTarget("cuda", 90, 32)`` (f16 A and B, f32 C, every pointer and
    size 16-divisible), ``num_stages = stages``; its ``asm`` holds the ``ttgir`` and ``ptx``."""
    import warnings

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    warnings.filterwarnings("ignore")
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K")}
    src = ASTSource(fn=fn, signature=sig, constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})

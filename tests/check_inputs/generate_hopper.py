"""The sm_90a corpus: what Triton 3.9 writes for its tutorial matmuls and attention on Hopper.

``python tests/check_inputs/generate_hopper.py`` compiles the kernels below for ``GPUTarget("cuda", 90, 32)``
(sm_90a; no GPU is needed) at the options of :data:`FIXTURES` and saves each TTGIR under
``tests/check_inputs/triton_sm90a/`` with a first line naming the Triton version and the call, so that the
tests and ``benchmarks/check_corpus.py`` read them where Triton is absent. ``--check`` also runs
``synth check`` on each and prints the verdicts; ``--only SUBSTRING`` compiles the matching files only.

The kernels are our own, written after Triton's tutorials 09 (persistent matmul: ``flatten``,
``warp_specialize``, ``EPILOGUE_SUBTILE``, tensor descriptors made in the kernel or passed from the host) and
06 (fused attention, forward pass: the causal kernel's two k-loops, the non-causal one's single loop, each
``tl.range(..., warp_specialize=WS)``), and a Hopper matmul written in Gluon (``triton.experimental.gluon``)
after its Hopper tutorial, pipelined by hand and warp-specialized by hand, with hand-made synchronization bugs
(:data:`GLUON_BUGS`, saved as ``gluon_bug*``: each must be refuted), and a FlashAttention forward pass written in
Gluon after its attention examples, hand-pipelined and warp-specialized by hand (a loader partition, the compute
in the default partition), with its own hand-made bugs (:data:`GLUON_ATTN_BUGS`, saved as ``gluon_attn_bug*``).
The matrix is representative, not every
combination: each option is varied around a base (128x128x64 f16 tiles, ``num_stages = 3``, 8 warps for one
warp group, 4 for the warp-specialized forms, which Triton 3.9 partitions on sm_90 only at 4 warps).
Set ``TRITON_DEFAULT_FP_FUSION=1`` to silence Triton 3.9's warning (the saved files were compiled with it unset,
which means enabled).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "triton_sm90a")

# The kernels, as a module written to a file before import: triton.jit reads its functions' source back.
KERNELS = r'''
import triton
import triton.language as tl


@triton.jit
def tile_of(tile, per_group, tiles_m, GROUP_M: tl.constexpr):
    """Tile index -> (row block, column block), GROUP_M row blocks per group (L2 reuse)."""
    group = tile // per_group
    first = group * GROUP_M
    rows = min(tiles_m - first, GROUP_M)
    within = tile % per_group
    return first + within % rows, within // rows


@triton.jit
def gemm_persistent(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    GROUP_M: tl.constexpr, SMS: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr,
                    SUBTILE: tl.constexpr, HOST: tl.constexpr):
    """C = A B^T over tiles t = pid, pid + SMS, ...; C leaves through a TMA store (two halves if SUBTILE)."""
    if not HOST:
        a = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b = tl.make_tensor_descriptor(b, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
        if SUBTILE:
            c = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // 2])
        else:
            c = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    steps = tl.cdiv(K, BK)
    per_group = GROUP_M * tiles_n
    out_tile = pid - SMS
    for tile in tl.range(pid, tiles_m * tiles_n, SMS, flatten=FLATTEN, warp_specialize=WS):
        pm, pn = tile_of(tile, per_group, tiles_m, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(steps):
            x = a.load([pm * BM, s * BK])
            y = b.load([pn * BN, s * BK])
            acc = tl.dot(x, y.T, acc)
        out_tile += SMS
        om, on = tile_of(out_tile, per_group, tiles_m, GROUP_M)
        if SUBTILE:
            pair = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
            lo, hi = tl.split(pair)
            c.store([om * BM, on * BN], lo.to(tl.float16))
            c.store([om * BM, on * BN + BN // 2], hi.to(tl.float16))
        else:
            c.store([om * BM, on * BN], acc.to(tl.float16))


@triton.jit
def gemm_tile(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
              WS: tl.constexpr, HOST: tl.constexpr):
    """One C tile per program; the k-loop warp-specialized when WS; C stored by TMA."""
    if not HOST:
        a = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b = tl.make_tensor_descriptor(b, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
        c = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for s in tl.range(0, tl.cdiv(K, BK), num_stages=STAGES, warp_specialize=WS):
        acc = tl.dot(a.load([pm * BM, s * BK]), b.load([pn * BN, s * BK]).T, acc)
    c.store([pm * BM, pn * BN], acc.to(tl.float16))


@triton.jit
def attn_steps(acc, l_i, m_i, q, kd, vd, row0, offs_m, lo, hi, qk_scale, BLOCK_N: tl.constexpr,
               MASKED: tl.constexpr, WS: tl.constexpr):
    """Online softmax over the key blocks lo, lo + BLOCK_N, ..., hi (masked on the diagonal band)."""
    offs_n = tl.arange(0, BLOCK_N)
    for n0 in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        kt = kd.load([row0 + n0, 0]).T
        s = tl.dot(q, kt)
        if MASKED:
            keep = offs_m[:, None] >= (n0 + offs_n[None, :])
            s = s * qk_scale + tl.where(keep, 0, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s = s - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = vd.load([row0 + n0, 0])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd(sm_scale, lse, q, k, v, o, Z, H, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WS: tl.constexpr, HOST: tl.constexpr):
    """Attention forward for one (BLOCK_M queries, head) block: O = softmax(Q K^T * sm_scale) V, and the
    rows' log-sum-exp; the causal form runs the blocks left of the diagonal, then the diagonal band."""
    rows = Z * H * N_CTX
    if not HOST:
        q = tl.make_tensor_descriptor(q, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_M, D])
        k = tl.make_tensor_descriptor(k, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_N, D])
        v = tl.make_tensor_descriptor(v, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_N, D])
        o = tl.make_tensor_descriptor(o, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_M, D])
    block = tl.program_id(0)
    head = tl.program_id(1)
    row0 = (head // H) * (H * N_CTX) + (head % H) * N_CTX
    offs_m = block * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    qt = q.load([row0 + block * BLOCK_M, 0])
    if CAUSAL:
        acc, l_i, m_i = attn_steps(acc, l_i, m_i, qt, k, v, row0, offs_m, 0, block * BLOCK_M, qk_scale,
                                   BLOCK_N, False, WS)
        acc, l_i, m_i = attn_steps(acc, l_i, m_i, qt, k, v, row0, offs_m, block * BLOCK_M,
                                   (block + 1) * BLOCK_M, qk_scale, BLOCK_N, True, WS)
    else:
        acc, l_i, m_i = attn_steps(acc, l_i, m_i, qt, k, v, row0, offs_m, 0, N_CTX, qk_scale, BLOCK_N, False, WS)
    m_i += tl.math.log2(l_i)
    tl.store(lse + head * N_CTX + offs_m, m_i)
    o.store([row0 + block * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))
'''


# Gluon (triton.experimental.gluon): a Hopper matmul pipelined by hand -- explicit mbarriers, TMA loads, async
# wgmma -- written after Gluon's Hopper tutorial; BUG selects a hand-made synchronization bug (0: none).
GLUON_KERNELS = r'''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                             warpgroup_mma_wait)


@gluon.jit
def gluon_matmul(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, BUG: gl.constexpr, num_warps: gl.constexpr):
    """C = A B^T for one C tile: a ring of STAGES slots filled by TMA, one async wgmma in flight."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    dtype: gl.constexpr = a_desc.dtype
    if BUG == 5:  # the expect announces A's bytes only
        nbytes: gl.constexpr = a_desc.block_type.nbytes
    else:
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_s = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b_s = gl.allocate_shared_memory(dtype, [STAGES, BN, BK], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    n_k = gl.cdiv(K, BK)
    for i in gl.static_range(STAGES - 1):  # fill all slots but one
        live = i < n_k
        mbarrier.expect(ready.index(i), nbytes, pred=live)
        tma.async_load(a_desc, [off_m, i * BK], ready.index(i), a_s.index(i), pred=live)
        tma.async_load(b_desc, [off_n, i * BK], ready.index(i), b_s.index(i), pred=live)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
    for k in range(n_k):
        s = k % STAGES
        if BUG == 2:  # the parity one phase ahead
            mbarrier.wait(ready.index(s), ((k // STAGES) + 1) & 1)
        else:
            mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_s.index(s), b_s.index(s).permute((1, 0)), acc, is_async=True)
        nk = k + STAGES - 1  # refill the slot of step k - 1, once its wgmma is complete
        ns = nk % STAGES
        live = nk < n_k
        if BUG == 1:  # the refill issued before the wait for step k - 1's wgmma
            mbarrier.expect(ready.index(ns), nbytes, pred=live)
            tma.async_load(a_desc, [off_m, nk * BK], ready.index(ns), a_s.index(ns), pred=live)
            tma.async_load(b_desc, [off_n, nk * BK], ready.index(ns), b_s.index(ns), pred=live)
        if BUG == 3:  # two wgmmas left in flight: the one reading the slot refilled below among them
            acc, _a, _b = warpgroup_mma_wait(2, deps=[acc, a_s.index(s), b_s.index(s)])
        else:
            acc, _a, _b = warpgroup_mma_wait(1, deps=[acc, a_s.index(s), b_s.index(s)])
        if BUG != 1:
            mbarrier.expect(ready.index(ns), nbytes, pred=live)
            tma.async_load(a_desc, [off_m, nk * BK], ready.index(ns), a_s.index(ns), pred=live)
            tma.async_load(b_desc, [off_n, nk * BK], ready.index(ns), b_s.index(ns), pred=live)
    acc = warpgroup_mma_wait(0, deps=[acc])
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
    c_s = gl.allocate_shared_memory(dtype, [BM, BN], c_desc.layout)
    c_s.store(acc.to(dtype))
    if BUG != 4:  # 4: no fence between the threads' writes and the TMA store
        fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_s)
    tma.store_wait(0)


@gluon.jit
def _ws_loader(a_desc, b_desc, a_s, b_s, ready, empty, off_m, off_n, n_k, STAGES: gl.constexpr,
               BUG: gl.constexpr):
    BK: gl.constexpr = a_desc.block_type.shape[1]
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for k in range(n_k):
        s = k % STAGES
        if BUG == 6:  # waits for the release of the current round instead of the previous one
            mbarrier.wait(empty.index(s), (k // STAGES) & 1)
        else:  # the first round passes on the fresh barriers (parity 1)
            mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_load(a_desc, [off_m, k * BK], ready.index(s), a_s.index(s))
        tma.async_load(b_desc, [off_n, k * BK], ready.index(s), b_s.index(s))


@gluon.jit
def _ws_mma(a_s, b_s, ready, empty, c_desc, off_m, off_n, n_k, STAGES: gl.constexpr, BUG: gl.constexpr,
            num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
    for k in range(n_k):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        acc = warpgroup_mma(a_s.index(s), b_s.index(s).permute((1, 0)), acc, is_async=True)
        if BUG == 7:  # releases the slot while its wgmma may still read it
            mbarrier.arrive(empty.index(s), count=1)
            acc, _a, _b = warpgroup_mma_wait(0, deps=[acc, a_s.index(s), b_s.index(s)])
        else:
            acc, _a, _b = warpgroup_mma_wait(0, deps=[acc, a_s.index(s), b_s.index(s)])
            mbarrier.arrive(empty.index(s), count=1)
    c_s = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    c_s.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_s)
    tma.store_wait(0)


@gluon.jit
def gluon_matmul_ws(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, BUG: gl.constexpr, num_warps: gl.constexpr):
    """C = A B^T for one C tile, warp-specialized by hand: a 1-warp TMA loader and the default partition's
    wgmma, a ring of STAGES slots with ready and empty barriers."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_s = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_s = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, BK], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    n_k = gl.cdiv(K, BK)
    gl.warp_specialize([(_ws_mma, (a_s, b_s, ready, empty, c_desc, off_m, off_n, n_k, STAGES, BUG, num_warps)),
                        (_ws_loader, (a_desc, b_desc, a_s, b_s, ready, empty, off_m, off_n, n_k, STAGES, BUG))], [1])
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
'''

GLUON_BUGS = {1: "refills a slot before waiting for the wgmma that reads it", 2: "waits for the parity one phase ahead",
              3: "leaves two wgmmas in flight before the refill", 4: "no fence_async_shared before the TMA store",
              5: "the expect announces A's bytes only", 6: "warp-specialized: the loader waits for the current "
              "round's release (parity not negated)", 7: "warp-specialized: the slot released before its wgmma "
              "completes"}
"""The hand-made bugs of :data:`GLUON_KERNELS` (``BUG``): each saved file ``gluon_bug{n}_s3.ttgir`` must be
refuted."""


# Gluon: a FlashAttention forward pass for Hopper written by hand -- Q loaded once by TMA through a barrier of its
# own, K and V through a ring of STAGES slots (a ready barrier each), S = Q K^T and O += P V by async wgmma, the
# online softmax in registers (P fed to the second wgmma from registers), O stored by TMA -- after the ideas of
# Gluon's attention examples; and the same warp-specialized (a 1-warp loader partition, the compute in the
# default partition, empty barriers per K and V slot, slot and phase carried as counters). BUG selects a
# hand-made synchronization bug (0: none; :data:`GLUON_ATTN_BUGS`).
GLUON_ATTENTION = r'''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                             warpgroup_mma_wait)


@gluon.jit
def _online_softmax(s, m_i, l_i, acc, qk_scale):
    # one key block's step: the new row maxima, P = exp2(S * scale - m), the old sums and O rescaled by alpha
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, acc.type.layout)), 1)
    return p, m_new, l_i, acc


@gluon.jit
def _store_o(o_desc, acc, l_i, qrow, BUG: gl.constexpr):
    # O = acc / l through shared memory and a TMA store (BUG 3: no proxy fence between the two)
    o = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, acc.type.layout)), 1)
    o_s = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    o_s.store(o.to(o_desc.dtype))
    if BUG != 3:
        fence_async_shared()
    tma.async_store(o_desc, [qrow, 0], o_s)
    tma.store_wait(0)


@gluon.jit
def gluon_attention(q_desc, k_desc, v_desc, o_desc, N_CTX, qk_scale, STAGES: gl.constexpr, BUG: gl.constexpr,
                    num_warps: gl.constexpr):
    # O = softmax(Q K^T * scale) V for one block of BM queries of one head (rows head * N_CTX + ...): K and V
    # through a ring refilled with block j + STAGES - 1 once block j - 1's wgmmas are complete
    BM: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    if BUG == 4:  # the expect counts the block's elements, not its bytes
        kv_bytes: gl.constexpr = BN * D
    else:
        kv_bytes: gl.constexpr = k_desc.block_type.nbytes
    row0 = gl.program_id(1) * N_CTX
    qrow = row0 + gl.program_id(0) * BM
    q_s = gl.allocate_shared_memory(dtype, [BM, D], q_desc.layout)
    k_s = gl.allocate_shared_memory(dtype, [STAGES, BN, D], k_desc.layout)
    v_s = gl.allocate_shared_memory(dtype, [STAGES, BN, D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bar.index(i), count=1)
        mbarrier.init(v_bar.index(i), count=1)
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_load(q_desc, [qrow, 0], q_bar, q_s)
    n = gl.cdiv(N_CTX, BN)
    for i in gl.static_range(STAGES - 1):  # blocks 0 .. STAGES - 2, those that exist
        live = i < n
        mbarrier.expect(k_bar.index(i), kv_bytes, pred=live)
        tma.async_load(k_desc, [row0 + i * BN, 0], k_bar.index(i), k_s.index(i), pred=live)
        mbarrier.expect(v_bar.index(i), kv_bytes, pred=live)
        tma.async_load(v_desc, [row0 + i * BN, 0], v_bar.index(i), v_s.index(i), pred=live)
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, D, 16])
    p_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2)
    m_i = gl.full([BM], float("-inf"), gl.float32, gl.SliceLayout(1, s_l))
    l_i = gl.full([BM], 1.0, gl.float32, gl.SliceLayout(1, s_l))
    acc = gl.zeros((BM, D), dtype=gl.float32, layout=o_l)
    mbarrier.wait(q_bar, 0)
    for j in range(n):
        s = j % STAGES
        ph = (j // STAGES) & 1
        mbarrier.wait(k_bar.index(s), ph)
        qk = warpgroup_mma(q_s, k_s.index(s).permute((1, 0)), gl.zeros((BM, BN), gl.float32, s_l), is_async=True)
        qk, _q, _k = warpgroup_mma_wait(0, deps=[qk, q_s, k_s.index(s)])
        p, m_i, l_i, acc = _online_softmax(qk, m_i, l_i, acc, qk_scale)
        if BUG == 2:  # V's wait for the other parity: passes on the slot's previous phase
            mbarrier.wait(v_bar.index(s), ph ^ 1)
        else:
            mbarrier.wait(v_bar.index(s), ph)
        acc = warpgroup_mma(gl.convert_layout(p.to(dtype), p_l), v_s.index(s), acc, is_async=True)
        acc, _v = warpgroup_mma_wait(0, deps=[acc, v_s.index(s)])
        nj = j + STAGES - 1  # block j - 1's slot: both its wgmmas are complete
        ns = nj % STAGES
        live = nj < n
        mbarrier.expect(k_bar.index(ns), kv_bytes, pred=live)
        tma.async_load(k_desc, [row0 + nj * BN, 0], k_bar.index(ns), k_s.index(ns), pred=live)
        mbarrier.expect(v_bar.index(ns), kv_bytes, pred=live)
        tma.async_load(v_desc, [row0 + nj * BN, 0], v_bar.index(ns), v_s.index(ns), pred=live)
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bar.index(i))
        mbarrier.invalidate(v_bar.index(i))
    _store_o(o_desc, acc, l_i, qrow, BUG)


@gluon.jit
def _attn_loader(q_desc, k_desc, v_desc, q_s, k_s, v_s, q_bar, k_ready, v_ready, k_empty, v_empty, row0, qrow, n,
                 STAGES: gl.constexpr, BUG: gl.constexpr):
    # the worker partition: Q once, then K and V of every key block into slot idx once the compute released it
    BN: gl.constexpr = k_desc.block_type.shape[0]
    kv_bytes: gl.constexpr = k_desc.block_type.nbytes
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_load(q_desc, [qrow, 0], q_bar, q_s)
    idx = 0
    phase = 0
    for j in range(n):
        mbarrier.wait(k_empty.index(idx), phase ^ 1)  # the first round passes on the fresh barriers
        mbarrier.expect(k_ready.index(idx), kv_bytes)
        tma.async_load(k_desc, [row0 + j * BN, 0], k_ready.index(idx), k_s.index(idx))
        mbarrier.wait(v_empty.index(idx), phase ^ 1)
        mbarrier.expect(v_ready.index(idx), kv_bytes)
        tma.async_load(v_desc, [row0 + j * BN, 0], v_ready.index(idx), v_s.index(idx))
        idx += 1
        wrap = idx == STAGES
        idx = gl.where(wrap, 0, idx)
        if BUG != 5:  # 5: the phase is not flipped when the slot index wraps
            phase = gl.where(wrap, phase ^ 1, phase)


@gluon.jit
def _attn_compute(q_s, k_s, v_s, q_bar, k_ready, v_ready, k_empty, v_empty, o_desc, qrow, n, qk_scale,
                  STAGES: gl.constexpr, BUG: gl.constexpr, num_warps: gl.constexpr):
    # the default partition: S = Q K^T, K's slot released; the softmax; O += P V, V's slot released; O by TMA
    BM: gl.constexpr = q_s.shape[0]
    D: gl.constexpr = q_s.shape[1]
    BN: gl.constexpr = k_s.shape[1]
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, D, 16])
    p_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2)
    m_i = gl.full([BM], float("-inf"), gl.float32, gl.SliceLayout(1, s_l))
    l_i = gl.full([BM], 1.0, gl.float32, gl.SliceLayout(1, s_l))
    acc = gl.zeros((BM, D), dtype=gl.float32, layout=o_l)
    mbarrier.wait(q_bar, 0)
    idx = 0
    phase = 0
    for j in range(n):
        mbarrier.wait(k_ready.index(idx), phase)
        qk = warpgroup_mma(q_s, k_s.index(idx).permute((1, 0)), gl.zeros((BM, BN), gl.float32, s_l), is_async=True)
        if BUG == 1:  # K's slot released while Q K^T's wgmma may still read it
            mbarrier.arrive(k_empty.index(idx), count=1)
        qk, _q, _k = warpgroup_mma_wait(0, deps=[qk, q_s, k_s.index(idx)])
        if BUG != 1:
            mbarrier.arrive(k_empty.index(idx), count=1)
        p, m_i, l_i, acc = _online_softmax(qk, m_i, l_i, acc, qk_scale)
        mbarrier.wait(v_ready.index(idx), phase)
        acc = warpgroup_mma(gl.convert_layout(p.to(q_s.dtype), p_l), v_s.index(idx), acc, is_async=True)
        acc, _v = warpgroup_mma_wait(0, deps=[acc, v_s.index(idx)])
        mbarrier.arrive(v_empty.index(idx), count=1)
        idx += 1
        wrap = idx == STAGES
        idx = gl.where(wrap, 0, idx)
        phase = gl.where(wrap, phase ^ 1, phase)
    _store_o(o_desc, acc, l_i, qrow, BUG)


@gluon.jit
def gluon_attention_ws(q_desc, k_desc, v_desc, o_desc, N_CTX, qk_scale, STAGES: gl.constexpr, BUG: gl.constexpr,
                       num_warps: gl.constexpr):
    # the same forward pass, warp-specialized: a ready and an empty barrier per K slot and per V slot
    BM: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    row0 = gl.program_id(1) * N_CTX
    qrow = row0 + gl.program_id(0) * BM
    q_s = gl.allocate_shared_memory(dtype, [BM, D], q_desc.layout)
    k_s = gl.allocate_shared_memory(dtype, [STAGES, BN, D], k_desc.layout)
    v_s = gl.allocate_shared_memory(dtype, [STAGES, BN, D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=1)
    n = gl.cdiv(N_CTX, BN)
    gl.warp_specialize([(_attn_compute, (q_s, k_s, v_s, q_bar, k_ready, v_ready, k_empty, v_empty, o_desc, qrow, n,
                                         qk_scale, STAGES, BUG, num_warps)),
                        (_attn_loader, (q_desc, k_desc, v_desc, q_s, k_s, v_s, q_bar, k_ready, v_ready, k_empty,
                                        v_empty, row0, qrow, n, STAGES, BUG))], [1])
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(i))
        mbarrier.invalidate(v_ready.index(i))
        mbarrier.invalidate(k_empty.index(i))
        mbarrier.invalidate(v_empty.index(i))
'''

GLUON_ATTN_BUGS = {1: "warp-specialized: K's slot released before Q K^T's wgmma completes",
                   2: "V's wait for the other parity", 3: "no fence_async_shared before O's TMA store",
                   4: "the K and V expects count elements, not bytes (half the bytes)",
                   5: "warp-specialized: the loader's phase not flipped when its slot index wraps"}
"""The hand-made bugs of :data:`GLUON_ATTENTION` (``BUG``): each saved file ``gluon_attn_bug{n}_s3.ttgir`` must
be refuted."""


def _base(kind, **kw):
    """A fixture's options: the defaults of its kernel, overridden by ``kw``."""
    if kind == "attention":
        d = dict(stages=3, warps=8, block=(128, 64), head_dim=64, causal=False, ws=False, host=False)
    elif kind == "gluon":
        d = dict(stages=3, warps=4, block=(128, 128, 64), bug=0, ws=False)
    elif kind == "gluon_attn":
        d = dict(stages=3, warps=4, block=(128, 64), head_dim=64, bug=0, ws=False)
    elif kind == "persistent":
        d = dict(stages=3, warps=8, block=(128, 128, 64), flatten=False, ws=False, subtile=False, host=False)
    else:  # one tile per program
        d = dict(stages=3, warps=4, block=(128, 128, 64), ws=True, host=False)
    d.update(kw)
    if kind == "persistent" and d["ws"] and "warps" not in kw:
        d["warps"] = 4
    return dict(kind=kind, **d)


FIXTURES = {
    # tutorial 09, flatten=False (Triton's default): the tile loop around the pipelined k-loop, one warp group
    "persistent_s2.ttgir": _base("persistent", stages=2),
    "persistent_s3.ttgir": _base("persistent"),
    "persistent_s4.ttgir": _base("persistent", stages=4),
    "persistent_s5.ttgir": _base("persistent", stages=5),
    "persistent_w4_s3.ttgir": _base("persistent", warps=4),
    "persistent_128x256_s3.ttgir": _base("persistent", block=(128, 256, 64)),
    "persistent_64x256_w4_s4.ttgir": _base("persistent", block=(64, 256, 64), warps=4, stages=4),
    "persistent_subtile_s3.ttgir": _base("persistent", subtile=True),
    "persistent_host_s3.ttgir": _base("persistent", host=True),
    "persistent_host_subtile_s4.ttgir": _base("persistent", host=True, subtile=True, stages=4),
    # flatten=True: one fused loop, the per-tile epilogue under scf.if
    "flat_s2.ttgir": _base("persistent", flatten=True, stages=2),
    "flat_s3.ttgir": _base("persistent", flatten=True),
    "flat_s5.ttgir": _base("persistent", flatten=True, stages=5),
    "flat_w4_s3.ttgir": _base("persistent", flatten=True, warps=4),
    "flat_128x256_s3.ttgir": _base("persistent", flatten=True, block=(128, 256, 64)),
    "flat_64x256_w4_s3.ttgir": _base("persistent", flatten=True, block=(64, 256, 64), warps=4),
    "flat_subtile_s3.ttgir": _base("persistent", flatten=True, subtile=True),
    "flat_host_s3.ttgir": _base("persistent", flatten=True, host=True),
    # warp_specialize=True, persistent (Triton 3.9 partitions the tile loop at 4 warps, not when flattened)
    "persistent_ws_s2.ttgir": _base("persistent", ws=True, stages=2),
    "persistent_ws_s3.ttgir": _base("persistent", ws=True),
    "persistent_ws_s4.ttgir": _base("persistent", ws=True, stages=4),
    "persistent_ws_s5.ttgir": _base("persistent", ws=True, stages=5),
    "persistent_ws_subtile_s3.ttgir": _base("persistent", ws=True, subtile=True),
    "persistent_ws_128x256_s3.ttgir": _base("persistent", ws=True, block=(128, 256, 64)),
    "persistent_ws_w8_s3.ttgir": _base("persistent", ws=True, warps=8),
    "flat_ws_s3.ttgir": _base("persistent", ws=True, flatten=True),
    # one tile per program, the k-loop warp-specialized (or not), C by TMA
    "tile_ws_s2.ttgir": _base("tile", stages=2),
    "tile_ws_s3.ttgir": _base("tile"),
    "tile_ws_s4.ttgir": _base("tile", stages=4),
    "tile_ws_s5.ttgir": _base("tile", stages=5),
    "tile_ws_128x256_s3.ttgir": _base("tile", block=(128, 256, 64)),
    "tile_ws_w8_s3.ttgir": _base("tile", warps=8),
    "tile_s3.ttgir": _base("tile", ws=False, warps=8),
    # tutorial 06's forward pass (sm_90a: Q by TMA before the loop, K and V pipelined, O by TMA after it)
    "attn_s2.ttgir": _base("attention", stages=2),
    "attn_s3.ttgir": _base("attention"),
    "attn_s4.ttgir": _base("attention", stages=4),
    "attn_w4_64x64_s3.ttgir": _base("attention", warps=4, block=(64, 64)),
    "attn_d128_s3.ttgir": _base("attention", head_dim=128, block=(128, 128)),
    "attn_host_s3.ttgir": _base("attention", host=True),
    "attn_causal_s3.ttgir": _base("attention", causal=True),
    "attn_ws_s3.ttgir": _base("attention", ws=True, warps=4),
    # Gluon: the hand-pipelined Hopper matmul, and its hand-made bugs (each must be refuted)
    **{f"gluon_s{n}.ttgir": _base("gluon", stages=n) for n in (2, 3, 4)},
    "gluon_w8_s3.ttgir": _base("gluon", warps=8),
    **{f"gluon_ws_s{n}.ttgir": _base("gluon", stages=n, ws=True) for n in (2, 3)},
    **{f"gluon_bug{b}_s3.ttgir": _base("gluon", bug=b, ws=b >= 6) for b in GLUON_BUGS},
    # Gluon: the hand-written attention forward, one warp group and warp-specialized, and its hand-made bugs
    **{f"gluon_attn_s{n}.ttgir": _base("gluon_attn", stages=n) for n in (2, 3, 4)},
    "gluon_attn_w8_s3.ttgir": _base("gluon_attn", warps=8),
    "gluon_attn_d128_s3.ttgir": _base("gluon_attn", head_dim=128),
    **{f"gluon_attn_ws_s{n}.ttgir": _base("gluon_attn", stages=n, ws=True) for n in (2, 3, 4)},
    "gluon_attn_ws_d128_s3.ttgir": _base("gluon_attn", head_dim=128, ws=True),
    **{f"gluon_attn_bug{b}_s3.ttgir": _base("gluon_attn", bug=b, ws=b in (1, 5)) for b in GLUON_ATTN_BUGS},
}
"""File name -> the kernel (``kind``) and its options."""

TRITON_FAILS = {
    "persistent_ws_host_s3.ttgir": (_base("persistent", ws=True, host=True),
                                    "the partitioner splits A's 128-row tile between two consumers, but a host "
                                    "descriptor's block is fixed at 128x64: 'descriptor block and tensor must "
                                    "have the same number of elements'"),
    "tile_ws_host_s3.ttgir": (_base("tile", host=True), "the same as persistent_ws_host_s3"),
    "persistent_ws_64x256_s3.ttgir": (_base("persistent", ws=True, block=(64, 256, 64)),
                                      "'instruction shape [16, 256] is too large for the layout with block size "
                                      "[64, 128]' (no wgmma layout for B once the tile is split)"),
    "tile_ws_64x256_s3.ttgir": (_base("tile", block=(64, 256, 64)), "the same as persistent_ws_64x256_s3"),
    "attn_causal_ws_s3.ttgir": (_base("attention", causal=True, ws=True, warps=4),
                                "the pass pipeline fails on the causal kernel's two warp-specialized loops"),
}
"""Options Triton 3.9 fails to compile for sm_90a (its pass pipeline errors out): not in the corpus; ``--fails``
tries them again."""

FORMS = {
    "persistent": "persistent, flatten=False",
    "flat": "persistent, flatten=True",
    "persistent_ws": "persistent, warp-specialized",
    "flat_ws": "persistent, flatten=True + warp_specialize",
    "tile_ws": "one tile, warp-specialized",
    "tile": "one tile, one warp group",
    "attn": "attention forward",
    "attn_causal": "attention forward, causal",
    "attn_ws": "attention forward, warp_specialize",
    "attn_causal_ws": "attention forward, causal, warp_specialize",
    "gluon": "Gluon matmul (hand-pipelined)",
    "gluon_ws": "Gluon matmul, warp-specialized by hand",
    "gluon_bug1": "Gluon matmul, hand-made bugs", "gluon_bug2": "Gluon matmul, hand-made bugs",
    "gluon_bug3": "Gluon matmul, hand-made bugs", "gluon_bug4": "Gluon matmul, hand-made bugs",
    "gluon_bug5": "Gluon matmul, hand-made bugs", "gluon_bug6": "Gluon matmul, hand-made bugs",
    "gluon_bug7": "Gluon matmul, hand-made bugs",
    "gluon_attn": "Gluon attention forward (hand-pipelined)",
    "gluon_attn_ws": "Gluon attention forward, warp-specialized by hand",
    **{f"gluon_attn_bug{b}": "Gluon attention forward, hand-made bugs" for b in range(1, 6)},
}
"""File-name prefix -> the form it is reported under (longest prefix wins; :func:`form_of`)."""


def form_of(fname: str) -> str:
    """The form of a saved file (:data:`FORMS`), plus ", host descriptors" for the host-descriptor ones."""
    stem = os.path.basename(fname)
    best = max((p for p in FORMS if stem.startswith(p + "_")), key=len, default=None)
    form = FORMS[best] if best else "?"
    return form + (", host descriptors" if "_host" in stem else "")


@functools.lru_cache(maxsize=None)
def kernels(text: str = KERNELS, name: str = "triton_sm90a_kernels"):
    """A kernels text (:data:`KERNELS`, :data:`GLUON_KERNELS`) as a module (one file per text, reused by every
    run and so by Triton's cache)."""
    folder = os.path.join(tempfile.gettempdir(),
                          "synth-triton-sm90a-" + hashlib.sha256(text.encode()).hexdigest()[:16])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _desc(shape) -> str:
    return f"tensordesc<fp16[{', '.join(str(s) for s in shape)}]>"


def _gluon_desc(shape) -> str:
    """A Gluon kernel's tensor-descriptor argument type: f16 blocks of ``shape`` in Gluon's default NVMMA layout."""
    from triton.experimental.gluon import language as gl

    layout = gl.NVMMASharedLayout.get_default_for(list(shape), gl.float16)
    return f"tensordesc<fp16[{shape[0]}, {shape[1]}],{layout!r}>"


def source(opts: dict):
    """``(kernel, signature, constexprs)`` of a fixture's options."""
    kind = opts["kind"]
    if kind == "gluon_attn":
        g = kernels(GLUON_ATTENTION, "triton_sm90a_gluon_attn")
        bm, bn = opts["block"]
        d = opts["head_dim"]

        desc = _gluon_desc
        sig = {"q_desc": desc((bm, d)), "k_desc": desc((bn, d)), "v_desc": desc((bn, d)), "o_desc": desc((bm, d)),
               "N_CTX": "i32", "qk_scale": "fp32", "STAGES": "constexpr", "BUG": "constexpr",
               "num_warps": "constexpr"}
        fn = g.gluon_attention_ws if opts["ws"] else g.gluon_attention
        return fn, sig, {"STAGES": opts["stages"], "BUG": opts["bug"], "num_warps": opts["warps"]}
    if kind == "gluon":
        g = kernels(GLUON_KERNELS, "triton_sm90a_gluon")
        bm, bn, bk = opts["block"]

        desc = _gluon_desc
        sig = {"a_desc": desc((bm, bk)), "b_desc": desc((bn, bk)), "c_desc": desc((bm, bn)), "K": "i32",
               "STAGES": "constexpr", "BUG": "constexpr", "num_warps": "constexpr"}
        fn = g.gluon_matmul_ws if opts["ws"] else g.gluon_matmul
        return fn, sig, {"STAGES": opts["stages"], "BUG": opts["bug"], "num_warps": opts["warps"]}
    k = kernels()
    if kind == "attention":
        bm, bn = opts["block"]
        d = opts["head_dim"]
        host = opts["host"]
        sig = {"sm_scale": "fp32", "lse": "*fp32",
               "q": _desc((bm, d)) if host else "*fp16", "k": _desc((bn, d)) if host else "*fp16",
               "v": _desc((bn, d)) if host else "*fp16", "o": _desc((bm, d)) if host else "*fp16",
               "Z": "i32", "H": "i32", "N_CTX": "i32", "D": "constexpr", "BLOCK_M": "constexpr",
               "BLOCK_N": "constexpr", "CAUSAL": "constexpr", "WS": "constexpr", "HOST": "constexpr"}
        consts = {"D": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": opts["causal"], "WS": opts["ws"], "HOST": host}
        return k.attn_fwd, sig, consts
    bm, bn, bk = opts["block"]
    host = opts["host"]
    cblock = (bm, bn // 2) if opts.get("subtile") else (bm, bn)
    sig = {"a": _desc((bm, bk)) if host else "*fp16", "b": _desc((bn, bk)) if host else "*fp16",
           "c": _desc(cblock) if host else "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    consts = {"BM": bm, "BN": bn, "BK": bk}
    if kind == "persistent":
        sig.update(GROUP_M="constexpr", SMS="constexpr", FLATTEN="constexpr", WS="constexpr", SUBTILE="constexpr",
                   HOST="constexpr")
        consts.update(GROUP_M=8, SMS=132, FLATTEN=opts["flatten"], WS=opts["ws"], SUBTILE=opts["subtile"],
                      HOST=host)
        return k.gemm_persistent, sig, consts
    sig.update(STAGES="constexpr", WS="constexpr", HOST="constexpr")
    consts.update(STAGES=opts["stages"], WS=opts["ws"], HOST=host)
    return k.gemm_tile, sig, consts


def header(fname: str) -> str:
    """The first line of a saved file: the Triton version, the kernel and its options."""
    import triton

    full = FIXTURES[fname] if fname in FIXTURES else TRITON_FAILS[fname][0]
    opts = {k: v for k, v in full.items() if k != "kind"}
    kernel = {"attention": "attn_fwd", "persistent": "gemm_persistent", "tile": "gemm_tile",
              "gluon": "gluon_matmul_ws" if full.get("ws") else "gluon_matmul",
              "gluon_attn": "gluon_attention_ws" if full.get("ws") else "gluon_attention"}[full["kind"]]
    return (f"// Triton {triton.__version__}: {kernel} of tests/check_inputs/generate_hopper.py for sm_90a, "
            + ", ".join(f"{k}={v}" for k, v in opts.items()) + "\n")


def ttgir(fname: str) -> str:
    """The TTGIR of the fixture ``fname``, headed by :func:`header` (a comment: the reader skips it)."""
    import warnings

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    warnings.filterwarnings("ignore")
    opts = FIXTURES[fname] if fname in FIXTURES else TRITON_FAILS[fname][0]
    fn, sig, consts = source(opts)
    attrs = {(i,): [["tt.divisibility", 16]] for i, kind in enumerate(sig.values())
             if kind in ("i32",) or kind.startswith("*")}
    if opts["kind"] in ("gluon", "gluon_attn"):
        from triton.experimental.gluon._runtime import GluonASTSource

        src = GluonASTSource(fn, sig, constexprs=consts, attrs=attrs)
    else:
        src = ASTSource(fn, sig, constexprs=consts, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"num_stages": opts["stages"], "num_warps": opts["warps"]})
    return header(fname) + k.asm["ttgir"]


def generate(only: str = "", out_dir: str = OUT_DIR, fails: bool = False) -> list:
    """Compile and save the fixtures whose name holds ``only`` (with ``fails``: try :data:`TRITON_FAILS`
    instead): their paths."""
    os.makedirs(out_dir, exist_ok=True)
    out = []
    for fname in (TRITON_FAILS if fails else FIXTURES):
        if only and only not in fname:
            continue
        path = os.path.join(out_dir, fname)
        try:
            text = ttgir(fname)
        except RuntimeError as e:  # Triton's own pass pipeline failed (its error went to stderr)
            print(f"{fname}: Triton failed to compile it ({str(e).splitlines()[0]}); not saved", flush=True)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        out.append(path)
        print(f"{fname}: {len(text)} bytes", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="compile only the fixtures whose file name holds this")
    ap.add_argument("--fails", action="store_true", help="try the options Triton failed to compile (TRITON_FAILS)")
    ap.add_argument("--check", action="store_true", help="run synth check on each and print its verdict")
    args = ap.parse_args(argv)
    if args.fails:
        with tempfile.TemporaryDirectory() as tmp:
            generate(args.only, tmp, fails=True)
        return 0
    paths = generate(args.only)
    if args.check:
        sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
        from synth.errors import SynthError
        from synth.frontends.check import check_file_all

        for p in paths:
            try:
                rs = check_file_all(p)
                print(f"{os.path.basename(p)}: {'proven' if all(r.ok for r in rs) else 'refuted'}")
            except SynthError as e:
                print(f"{os.path.basename(p)}: exit 2: {str(e).splitlines()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write the sm_90a GEMM ``kernel.cu`` from a lowered Hopper program (docs/hopper_kernel.md).

Input: an :class:`~.config.Sm90Config` and the :class:`~synth.hopper.ir.HopperProgram` of its
loop (default: ``cfg.program()``; a mutant of it for the emulator's bug tests). Output: CUDA C++
text. Every synchronization line comes from one statement of the program, in the program's
order: ``try_wait`` -> ``synth_mbar_wait(bar, parity)`` with the parity
``PipelineState.parity()`` of the statement, ``arrive`` -> ``arrive`` / ``arrive.expect_tx`` /
``expect_tx`` with the statement's ``tx`` bytes (each gated by its load's predicate at
``state.count``), TMA op statements -> ``cp.async.bulk.tensor.2d`` into the slot of their write
access completing on their ``BarrierRef``, the wgmma op -> ``BK / 16`` ``wgmma.mma_async``
reading the slots of its read accesses, ``commit`` / ``wait`` -> ``wgmma.commit_group`` /
``wgmma.wait_group N`` with ``N`` the program's wait count, ``init`` / ``fence`` / ``inval``
from setup and teardown. Nothing is re-derived here.

The kernel is ``synth_gemm_sm90(tmA, tmB, C, C_in, M, N, K, ldc, alpha, beta)``: A is M x K and
B is N x K, row-major f16 or bf16 (``cfg.dtype``; K contiguous, both operands K-major), described by 2-D tensor maps
(box ``BK x BM`` and ``BK x BN``, 128-byte swizzle, out-of-bound elements zero-filled); C is
M x N f32 with row stride ``ldc``; ``C = alpha A B^T (+ beta C_in)``. Grid ``(ceil(N/BN),
ceil(M/BM))``, block ``128 * (1 + BM/64)`` threads, dynamic shared memory ``cfg.smem_bytes``.
The k-tile count ``T = ceil(K / BK)`` is a run-time value; ``K < 1`` writes nothing.
The same text compiles with nvcc for sm_90a (inline PTX) and with g++ against
``runtime/synth_emu_sm90.h`` (``-DSYNTH_EMULATE``).

A cluster configuration (``cfg.cluster`` ``2x1`` or ``1x2``) takes the cluster program of
:func:`synth.lower.cluster.lower_hopper_cluster`: the kernel is declared ``__cluster_dims__``, each CTA runs
its own CTA's roles (one body relative to ``crank`` when the program is symmetric under the swap of the
CTAs), a statement on another CTA's barrier is a remote arrive through ``mapa``, a run of one producer's
copies of its part of the shared operand into several CTAs is one multicast copy with their mask, and
setup and teardown hold the cluster barriers (docs/hopper_cluster.md, "The kernel"). A persistent cluster
configuration runs each CTA's roles as the persistent ring over its cluster's cluster-sized tile groups, the tile
count from the cluster's index (docs/hopper_cluster.md, "Persistent clusters").
"""

from __future__ import annotations

from typing import Optional

import re
from dataclasses import dataclass

from ...completion import ArriveStmt, ClusterSyncStmt, FenceStmt, InitStmt, InvalStmt, TryWaitStmt
from ...expr import Bin, Expr, Ite, Num, Var, as_affine, evaluate, parse, simplify, substitute
from ...hopper.ir import HopperProgram
from ...program import CommitStmt, OpStmt, Part, WaitStmt
from ..cuda import c_expr
from ..raster import cluster_cuda_lines, cuda_lines as raster_lines
from ..splitk import index_lines as split_index_lines, range_lines as split_range_lines
from .config import PRODUCER_REGS, Sm90Config

KERNEL = "synth_gemm_sm90"
SPLIT_BARRIER = 1
"""Named barrier (``bar.sync``) of the consumer warp groups in the split-K reduction (0 is __syncthreads)."""
STORE_BARRIER = 2
"""Named barrier of consumer warp group ``cw`` in the TMA-store epilogue: ``STORE_BARRIER + cw`` (128 threads)."""
SCHEDULERS = ("cluster", "cta")
"""How a persistent cluster kernel counts a CTA's tiles: ``cluster`` (the kernel's) from its cluster's index, so
the CTAs of a cluster take the same tile groups and run the same ring trip count; ``cta`` (a bug, for the
emulator's test) from the CTA's own index, as the one-CTA scheduler, so peers may run different trip counts."""
UNROLL_MAX = 16
"""Parts of a constant extent up to this are unrolled (wait counts become immediates)."""

_CUDA_API = r"""
#include <cuda.h>
#include <cstdint>
#define SYNTH_DEV __device__ __forceinline__
SYNTH_DEV uint32_t synth_smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
SYNTH_DEV void synth_syncthreads() { __syncthreads(); }
SYNTH_DEV void synth_mbar_init(uint32_t b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(n) : "memory"); }
SYNTH_DEV void synth_mbar_inval(uint32_t b) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(b) : "memory"); }
SYNTH_DEV void synth_fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
SYNTH_DEV void synth_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
SYNTH_DEV void synth_mbar_arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(b) : "memory"); }
SYNTH_DEV void synth_mbar_arrive_expect_tx(uint32_t b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory"); }
SYNTH_DEV void synth_mbar_expect_tx(uint32_t b, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(bytes) : "memory"); }
SYNTH_DEV void synth_mbar_wait(uint32_t b, uint32_t parity) {
  asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra WAIT_%=;\n}" :: "r"(b), "r"(parity) : "memory"); }
SYNTH_DEV void synth_tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t b) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(b) : "memory"); }
SYNTH_DEV void synth_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
SYNTH_DEV void synth_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> SYNTH_DEV void synth_wgmma_wait_n() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
template <int R> SYNTH_DEV void synth_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(R)); }
template <int R> SYNTH_DEV void synth_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(R)); }
SYNTH_DEV float synth_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
SYNTH_DEV int synth_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }
// a value held in a register from here on (ptxas may not rematerialize it), warp-uniform
SYNTH_DEV uint32_t synth_pinned_uniform(uint32_t v) { asm volatile("" : "+r"(v)); return __shfl_sync(0xffffffffu, v, 0); }
SYNTH_DEV void synth_stg4(float* p, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d); }
SYNTH_DEV float4 synth_ldg4(const float* p) { return *reinterpret_cast<const float4*>(p); }
SYNTH_DEV void synth_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
SYNTH_DEV bool synth_bar_red_or(int id, int n, bool p) {
  int r;
  asm volatile("{\n .reg .pred q, r;\n setp.ne.b32 q, %1, 0;\n bar.red.or.pred r, %2, %3, q;\n selp.b32 %0, 1, 0, r;\n}"
               : "=r"(r) : "r"((int)p), "r"(id), "r"(n) : "memory");
  return r != 0; }
SYNTH_DEV void synth_threadfence() { __threadfence(); }
// a value computed once and held (ptxas may not rematerialize it)
SYNTH_DEV void synth_pin_u64(const uint64_t& v) { asm volatile("" : "+l"(const_cast<uint64_t&>(v))); }
// the CTA's launch-order index, read afresh (volatile: not merged with an earlier read, so not kept live)
SYNTH_DEV int synth_block_linear() {
  unsigned x, y, z, nx, ny;
  asm volatile("mov.u32 %0, %%ctaid.x;\n mov.u32 %1, %%ctaid.y;\n mov.u32 %2, %%ctaid.z;\n"
               " mov.u32 %3, %%nctaid.x;\n mov.u32 %4, %%nctaid.y;" : "=r"(x), "=r"(y), "=r"(z), "=r"(nx), "=r"(ny));
  return (int)((z * ny + y) * nx + x); }
SYNTH_DEV void synth_st_cg_f32x4(float* p, float a, float b, float c, float d) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory"); }
SYNTH_DEV void synth_ld_cg_f32x4(float* r, const float* p) {
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3]) : "l"(p)
               : "memory"); }
SYNTH_DEV unsigned synth_atomic_add_u32(unsigned* p, unsigned v) { return atomicAdd(p, v); }
SYNTH_DEV unsigned synth_ld_acquire_u32(const unsigned* p) {
  unsigned v; asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v; }
"""

_CUDA_CLUSTER_API = r"""
// thread-block cluster (docs/hopper_cluster.md, "The kernel")
SYNTH_DEV uint32_t synth_cluster_ctarank() {
  uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
SYNTH_DEV uint32_t synth_mapa(uint32_t a, uint32_t rank) {
  uint32_t d; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(rank)); return d; }
// CUTLASS's remote arrive (.release at the default .cta scope): .release.cluster puts a MEMBAR.ALL.GPU before every
// remote release of the main loop, and the slot's reads it orders are wgmma reads that wgmma.wait_group completed
SYNTH_DEV void synth_mbar_arrive_cluster(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(cluster_addr) : "memory"); }
SYNTH_DEV void synth_tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t b,
                                           uint16_t mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(b), "h"(mask) : "memory"); }
// not .aligned: the teardown's threads come from diverged role branches
SYNTH_DEV void synth_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;" ::: "memory"); }
"""

_CUDA_STORE_API = r"""
// TMA-store epilogue (docs/hopper_store.md): staging writes, the bulk store, its group FIFO
#include <cuda_fp16.h>
#include <cuda_bf16.h>
SYNTH_DEV void synth_st_shared_f32x2(uint32_t a, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(a), "f"(x), "f"(y) : "memory"); }
SYNTH_DEV void synth_st_shared_f16x2(uint32_t a, float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(*reinterpret_cast<const uint32_t*>(&h)) : "memory"); }
SYNTH_DEV void synth_st_shared_bf16x2(uint32_t a, float x, float y) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(*reinterpret_cast<const uint32_t*>(&h)) : "memory"); }
SYNTH_DEV void synth_tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               :: "l"(reinterpret_cast<uint64_t>(map)), "r"(src), "r"(c0), "r"(c1) : "memory"); }
SYNTH_DEV void synth_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> SYNTH_DEV void synth_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
// the register stores of a launch whose C is not TMA-aligned: one f16 / bf16 element, rounded to nearest even
SYNTH_DEV void synth_st_global_f16(void* p, float v) { *reinterpret_cast<__half*>(p) = __float2half_rn(v); }
SYNTH_DEV void synth_st_global_bf16(void* p, float v) { *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(v); }
"""


_CTA = re.compile(r"([0-9]+)\Z")


def cta_of(name: str) -> Optional[int]:
    """The CTA a cluster program's role, barrier or buffer belongs to: the number ending its name (the convention
    of :func:`synth.hopper.cluster.cta_of`, restated here because that module imports the provers, which the
    light runtime does not have)."""
    m = _CTA.search(name)
    return int(m.group(1)) if m else None


_HALF_OP = re.compile(r"(load_([AB]))_h([0-9]+)_to([0-9]+)\Z")
"""A cluster program's copy of one part of the shared operand's box into one CTA (:mod:`synth.lower.cluster`):
``load_B_h{c}_to{d}`` is half ``c`` of the B box (producer ``c``'s, by the lowering's convention), into CTA ``d``."""


@dataclass(frozen=True)
class _Multicast:
    """Adjacent copy statements of one producer that put the same part of the shared operand's k-tile into
    several CTAs (same half, iteration, guard, slot and barrier state): one multicast copy whose mask is
    their destination CTAs."""

    stmts: tuple
    dests: tuple


def _wgmma_name(cfg: Sm90Config) -> str:
    return f"synth_wgmma_m64n{cfg.bn}k16" if cfg.dtype == "f16" else f"synth_wgmma_bf16_m64n{cfg.bn}k16"


def _wgmma_cuda(cfg: Sm90Config) -> str:
    n, t = cfg.bn, cfg.dtype
    regs = n // 2
    outs = ", ".join(f"%{j}" for j in range(regs))
    binds = ", ".join(f'"+f"(d[{j}])' for j in range(regs))
    return (f"SYNTH_DEV void {_wgmma_name(cfg)}(float* d, uint64_t da, uint64_t db) {{\n"
            f"  asm volatile(\"{{\\n .reg .pred p;\\n setp.ne.b32 p, 1, 0;\\n"
            f" wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{outs}}}, %{regs}, "
            f"%{regs + 1}, p, 1, 1, 0, 0;\\n}}\"\n"
            f"               : {binds}\n               : \"l\"(da), \"l\"(db) : \"memory\"); }}\n")


def _carries_slots(stages: int) -> bool:
    """Whether a cluster kernel's loops carry their slots and rounds (:meth:`_Emit.cx`): with a number of stages
    that is not a power of two, and with 8 or more (ptxas keeps ``% 8`` a mask but with the slots and rounds carried
    the persistent 8-stage ring's longest HGMMA-free run went from 33 to 25 or 28); with 1, 2 or 4 the masks are
    cheaper than the carried values (the persistent 4-stage ring: 7.38 / 19 with masks, 9.38 / 28 carried)."""
    return stages & (stages - 1) != 0 or stages >= 8


def _pingpong_carries(cfg: Sm90Config) -> bool:
    """Whether the ping-pong consumer's ring carries its slots and parities (:meth:`_Emit.carried_loop`): with a
    128-row tile per warp group (two wgmma per k16: the 4-stage loop's masks and shifts of ``i % 4`` and
    ``i / 4 % 2`` made 5.62 instructions per HGMMA and a longest HGMMA-free run of 29, carried 5.5 / 22; with 2, 3,
    5, 6 or 7 stages 5.44-6.25 / 26-28 -> 5.44-5.5 / 22-23), and with 64-row tiles where :func:`_carries_slots`
    (3 to 8 stages but 4: 8.5-9.25 / 24-31 -> 7.19-7.38 / 20-23); 64-row tiles with 2 or 4 stages keep the masks
    (4 stages: 6.56 / 18, carried 7.19 / 23)."""
    return cfg.row_blocks > 1 or _carries_slots(cfg.stages)


def _wait_dispatch(max_n: int) -> str:
    cases = " ".join(f"case {j}: synth_wgmma_wait_n<{j}>(); break;" for j in range(1, max_n + 1))
    return ("SYNTH_DEV void synth_wgmma_wait(int n) {\n"
            f"  switch (n) {{ {cases} default: synth_wgmma_wait_n<0>(); break; }}\n}}\n")


class _Emit:
    def __init__(self, cfg: Sm90Config, p: HopperProgram, carry=None) -> None:
        self.cfg, self.p = cfg, p
        self.lines: list[str] = []
        self.ops = {o.name: o for o in p.ops}
        self.buffer_of_load = {}
        self.loop_var = p.loop_var
        self.const: dict = {}
        self.carry = dict(carry or {})
        """Persistent kernels: role -> :class:`synth.hopper.persistent.TileCarry` other than the running count
        (a mutant for the emulator's bug tests); the role being emitted is ``self.role``."""
        self.role = ""
        self.store = None
        """The TMA-store epilogue's store program (None: the register epilogue)."""
        self.order = None
        """Ping-pong: the order program (:func:`synth.hopper.pingpong.order_program`) whose roles' statements
        surround each consumer tile's main loop (None: cooperative)."""
        self.cluster = cfg.cluster_size > 1
        self.cta: Optional[int] = None
        """A cluster kernel: the CTA whose role is being emitted (inside its ``if (crank == c)``)."""
        self.relative = False
        """A cluster kernel of 2 CTAs: write the role of CTA ``self.cta`` relative to the running CTA (its own CTA
        ``crank``, the other ``crank ^ 1``), so that the text is the same for both CTAs when the program is
        symmetric under their swap (:func:`_cluster_roles`)."""
        self.carried: Optional[tuple[str, int]] = None
        """A cluster kernel's loop over ``(variable, S)`` whose ``S`` stages :func:`_carries_slots`: the slots
        ``(v + c) % S`` and rounds ``(v + c) / S`` of its iteration are carried from one iteration to the next
        (:meth:`cx`)."""
        self.carried_phase = False
        """The carried loop's parities ``((v + c) / S + k) % 2`` are carried too, as a bit flipped at each wrap of the
        slot (:meth:`cx`; the ping-pong consumer's ring, :func:`_ring`)."""
        self.carried_used: set = set()
        """The ``(c, "slot" | "round" | "phase")`` the loop's statements used (:meth:`carried_step` declares and steps
        them)."""
        self.carried_at = (0, 0, "0")
        """Where the carried values are declared: (line index, depth, the loop's start)."""
        self.guard_now: Optional[Expr] = None
        """The guard of the statement being emitted (:meth:`cx` uses it to know ``v + c >= 0``)."""
        self.remote: dict = {}
        """The peer barrier arrays the role being emitted releases remotely: C name -> (the local array, the rank
        expression, its label), declared by :func:`_per_cta` before the role."""

    def rank(self, d: int) -> str:
        """The C expression of CTA ``d``'s rank from the role being emitted: ``d`` or, relative, ``crank`` (its own
        CTA) or ``(crank ^ 1u)`` (the other)."""
        if not self.relative:
            return f"{d}u"
        return "crank" if d == self.cta else "(crank ^ 1u)"

    def label(self, name: str) -> str:
        """A role's, barrier's, buffer's or op's name for a comment: as it is, or, relative, with each CTA index
        written ``<own>`` or ``<peer>``."""
        if not self.relative:
            return name
        rel = lambda x: "<own>" if x == self.cta else "<peer>"  # noqa: E731
        m = _HALF_OP.match(name)
        if m:
            return f"{m.group(1)}_h{rel(int(m.group(3)))}_to{rel(int(m.group(4)))}"
        c = cta_of(name)
        return name if c is None else f"{self.base(name)}{rel(c)}"

    def base(self, name: str) -> str:
        """The kernel's name of a barrier or buffer: a cluster program's ``full1`` / ``B0`` (CTA 1's, CTA 0's) are
        ``full`` / ``B`` at one offset of every CTA's shared memory; a one-CTA program's names are its own."""
        return re.sub(r"[0-9]+\Z", "", name) if self.cluster else name

    def local(self, name: str) -> bool:
        """Whether barrier or buffer ``name`` belongs to the CTA of the role being emitted (always, without a
        cluster)."""
        return not self.cluster or cta_of(name) == self.cta

    def cta_guard(self, name: str, body: list[str]) -> list[str]:
        """``body`` run by the CTA that owns barrier ``name`` only (a cluster's setup and teardown)."""
        if not self.cluster:
            return body
        c = cta_of(name)
        if c is None or c >= self.cfg.cluster_size:
            raise ValueError(f"barrier {name} names no CTA of the cluster {self.cfg.cluster}")
        return [f"if (crank == {c}u) {{  // CTA {c}'s barrier"] + ["  " + b for b in body] + ["}"]

    def grouped(self, stmts) -> list:
        """A cluster role's statements with each run of adjacent copies of one part of the shared operand
        (:data:`_HALF_OP`) into several CTAs made one :class:`_Multicast`; other statements as they are."""
        if not self.cluster:
            return list(stmts)

        def key(s):
            m = _HALF_OP.match(s.op)
            (acc,) = s.writes if len(s.writes) == 1 else (None,)
            if acc is None:
                raise ValueError(f"{s.op}: a copy writes one buffer, got {len(s.writes)}")
            return (m.group(1), m.group(3), s.iteration, s.guard, acc.version, acc.slot, self.base(acc.buffer),
                    self.base(s.barrier.barrier), s.barrier.state, s.barrier.bytes)

        out: list = []
        for s in stmts:
            if not (isinstance(s, OpStmt) and s.barrier is not None and _HALF_OP.match(s.op)):
                out.append(s)
                continue
            d = cta_of(s.writes[0].buffer) if len(s.writes) == 1 else None
            prev = out[-1] if out else None
            if isinstance(prev, _Multicast) and key(prev.stmts[0]) == key(s) and d not in prev.dests:
                out[-1] = _Multicast(prev.stmts + (s,), prev.dests + (d,))
            else:
                key(s)
                out.append(_Multicast((s,), (d,)))
        return out

    def mutant_carry(self):
        """The carry of the role being emitted (``self.role``): the one given for its name, else for its kind (a
        cluster role ``consumer1`` takes a carry given for ``consumer``); None for the running count."""
        c = self.carry.get(self.role, self.carry.get(re.sub(r"[0-9]+\Z", "", self.role)))
        return None if c is None or c.canonical else c

    def count_c(self, count: Expr, base: str) -> str:
        """The C count of a pipeline position under the role's carry (``base``: ``cs`` slot, ``cp`` parity)."""
        return f"({base} + (int)(({c_expr(count)}) - kb))"

    def slot_c(self, count: Expr, slot: Expr) -> str:
        """The C slot expression (before ``% stages``) of an access or state of count ``count``."""
        return c_expr(slot) if self.mutant_carry() is None else self.count_c(count, "cs")

    def slot_m(self, count: Expr, slot: Expr) -> str:
        """The C slot index (``% stages``) of an access or state of count ``count``."""
        if self.carried is not None and self.mutant_carry() is None:
            return self.cx(slot, self.cfg.stages)
        return f"({self.slot_c(count, slot)}) % {self.cfg.stages}"

    def cx(self, e: Expr, mod: Optional[int] = None) -> str:
        """``e`` in C, or ``(e) % mod`` when ``mod`` is given. In a loop with carried slots and rounds
        (:attr:`carried`: the loop variable ``v``, ``S`` stages), each ``(v + c) % S`` and ``(v + c) / S`` (``|c| < S``,
        ``v + c >= 0`` known from the statement's guard when ``c < 0``) is a variable carried from one iteration to
        the next (one per ``c``: an add, a compare and a select per iteration) instead of a division by the constant
        ``S``, and ``% mod`` is left out where the value is such a slot and ``mod`` is ``S`` (it is in
        ``0 .. S - 1``): the same values, which ptxas keeps in uniform registers (with 3, 5, 6 or 7 stages the
        divisions made the consumer loop's longest HGMMA-free run 34 to 44). With :attr:`carried_phase`, a parity
        ``((v + c) / S + k) % 2`` is the carried bit ``(v + c) / S % 2`` (flipped when the slot wraps), or its
        complement for an odd ``k``."""
        if self.carried is None:
            return c_expr(e) if mod is None else f"({c_expr(e)}) % {mod}"
        v, n = self.carried

        def offset(a: Expr) -> Optional[int]:
            aff = as_affine(a)
            if aff is None or aff[0] != {v: 1} or not -n < aff[1] < n:
                return None
            c = aff[1]
            return c if c >= 0 or self.nonnegative(v, -c) else None

        def halves(a: Expr) -> Optional[tuple[int, int]]:  # (c, k) of a = (v + c) / S + k, k a number
            k = 0
            if isinstance(a, Bin) and a.op == "+" and isinstance(a.rhs, Num):
                a, k = a.lhs, a.rhs.value
            if isinstance(a, Bin) and a.op == "/" and a.rhs == Num(n):
                c = offset(a.lhs)
                if c is not None:
                    return c, k
            return None

        def walk(x: Expr) -> Expr:
            if self.carried_phase and isinstance(x, Bin) and x.op == "%" and x.rhs == Num(2):
                h = halves(x.lhs)
                if h is not None:
                    self.carried_used.add((h[0], "phase"))
                    bit = Var(self.carried_name(v, h[0], "phase"))
                    return bit if h[1] % 2 == 0 else Bin("^", bit, Num(1))
            if isinstance(x, Bin) and x.op in ("%", "/") and x.rhs == Num(n):
                c = offset(x.lhs)
                if c is not None:
                    kind = "slot" if x.op == "%" else "round"
                    self.carried_used.add((c, kind))
                    return Var(self.carried_name(v, c, kind))
            if isinstance(x, Bin):
                return Bin(x.op, walk(x.lhs), walk(x.rhs))
            if isinstance(x, Ite):
                return Ite(walk(x.cond), walk(x.then), walk(x.other))
            return x

        r = walk(e)
        if mod is None or (mod == n and isinstance(r, Var) and r.name.startswith(f"{v}_slot")):
            return c_expr(r)
        return f"({c_expr(r)}) % {mod}"

    @staticmethod
    def carried_name(v: str, c: int, kind: str) -> str:
        """The C name of the carried ``(v + c) % S`` (``kind`` ``slot``), ``(v + c) / S`` (``round``) or
        ``(v + c) / S % 2`` (``phase``)."""
        return f"{v}_{kind}" + ("" if c == 0 else f"_{'p' if c > 0 else 'm'}{abs(c)}")

    def nonnegative(self, v: str, k: int) -> bool:
        """Whether the statement being emitted runs only with ``v >= k`` (a conjunct ``k' <= v`` of its guard,
        ``k' >= k``)."""
        todo, g = [self.guard_now], []
        while todo:
            x = todo.pop()
            if isinstance(x, Bin) and x.op == "&&":
                todo += [x.lhs, x.rhs]
            elif x is not None:
                g.append(x)
        return any(isinstance(x, Bin) and ((x.op == "<=" and isinstance(x.lhs, Num) and x.lhs.value >= k and
                                            x.rhs == Var(v)) or
                                           (x.op == ">=" and x.lhs == Var(v) and isinstance(x.rhs, Num) and
                                            x.rhs.value >= k)) for x in g)

    def carried_loop(self, depth: int, var: str, start: str, phase: bool = False) -> None:
        """Before a cluster kernel's loop over ``var`` from ``start``: with a number of stages that
        :func:`_carries_slots`, set :attr:`carried`; :meth:`carried_step` declares the carried values the body
        used here. ``phase`` (the ping-pong consumer's ring): with any number of stages, parities carried too
        (:attr:`carried_phase`)."""
        n = self.cfg.stages
        self.carried_used = set()
        self.carried_phase = phase
        if self.mutant_carry() is not None or not (phase or (self.cluster and _carries_slots(n))):
            self.carried = None
            return
        self.carried = (var, n)
        self.carried_at = (len(self.lines), depth, start)

    def carried_step(self, depth: int) -> None:
        """At the end of a loop iteration: the carried slots and rounds of the next (declared before the loop,
        from the loop's start: ``(start + S + c) % S`` and ``(start + S + c) / S - 1``, unsigned, so a round of a
        negative count wraps as the count does)."""
        if self.carried is None:
            return
        v, n = self.carried
        at, d0, start = self.carried_at
        decl, step = [], []
        used = {c for c, _ in self.carried_used}
        if (0, "slot") in self.carried_used:
            # (i - k) % S is the slot of k iterations before: a chain of moves from (i - 1) % S on, where no round of
            # these counts is needed, for k <= 2 (longer chains made the persistent ring's longest HGMMA-free run
            # 30 to 33 with K_PIPE_MMAS 3 and 4, against 28 to 29 with the step)
            lows = [c for c in used if -2 <= c < 0 and not any((d, kind) in self.carried_used for d in range(c, 0)
                                                                for kind in ("round", "phase"))]
            used |= set(range(min(lows), 0)) if lows else set()
        for c in sorted(used, reverse=True):
            count = v if c == 0 else f"{v} {'+' if c > 0 else '-'} {abs(c)}"
            slot, rnd, ph = (self.carried_name(v, c, kind) for kind in ("slot", "round", "phase"))
            x = f"{n + c}u" if start == "0" else f"({start} + {n + c}u)"
            decl.append(f"unsigned {slot} = {x} % {n}u;  // ({count}) % {n}, carried" if start != "0" else
                        f"unsigned {slot} = {(n + c) % n}u;  // ({count}) % {n}, carried")
            if c < 0 and (0, "slot") in self.carried_used and (c, "round") not in self.carried_used and \
                    (c, "phase") not in self.carried_used and all(d in used for d in range(c, 0)):
                # (i + c) % S is the previous iteration's (i + c + 1) % S: a move, before that one's own step
                step.insert(0, f"{slot} = {self.carried_name(v, c + 1, 'slot')};")
                continue
            wrap = [f"{slot} = 0u;"]
            if (c, "round") in self.carried_used:
                decl.append(f"unsigned {rnd} = {x} / {n}u - 1u;  // ({count}) / {n}, carried" if start != "0" else
                            f"unsigned {rnd} = {(n + c) // n - 1}u;  // ({count}) / {n}, carried")
                wrap.append(f"++{rnd};")
            if (c, "phase") in self.carried_used:  # the parity of the round (-1 is odd): a bit flipped at each wrap
                decl.append(f"unsigned {ph} = ({x} / {n}u + 1u) % 2u;  // ({count}) / {n} % 2, carried"
                            if start != "0" else f"unsigned {ph} = {((n + c) // n - 1) % 2}u;  // ({count}) / {n} % 2, carried")
                wrap.append(f"{ph} ^= 1u;")
            step.append(f"if (++{slot} == {n}u) {wrap[0]}" if len(wrap) == 1 else
                        f"if (++{slot} == {n}u) {{ {' '.join(wrap)} }}")
        self.lines[at:at] = ["  " * d0 + x for x in decl]
        for x in step:
            self.w(depth, x)
        self.carried = None
        self.carried_phase = False

    def carry_lines(self, depth: int) -> None:
        """The mutant carry's per-tile values ``cs``, ``cp``, ``cf`` (needs ``t``, ``KT`` and ``kb``)."""
        c = self.mutant_carry()
        if c is None:
            return
        env = {"T": parse("KT")}
        vals = [c_expr(substitute(parse(x), env)) for x in (c.slot_base, c.parity_base, c.flip)]
        self.w(depth, f"const int cs = {vals[0]}, cp = {vals[1]}, cf = {vals[2]};  // carried state (mutant)")

    def w(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def barrier(self, name: str):
        """Barrier ``name`` of the ring program or of the ping-pong order program."""
        if self.order is not None and name in {b.name for b in self.order.barriers}:
            return self.order.barrier(name)
        return self.p.barrier(name)

    def bar(self, name: str, state) -> str:
        return f"bar_{self.base(name)} + {self.bar_offset(name, state)}"

    def bar_offset(self, name: str, state) -> str:
        """The C byte offset of barrier ``name``'s slot at ``state`` from the barrier array's base."""
        b = self.barrier(name)
        if self.mutant_carry() is not None:
            return f"8 * ((({self.count_c(state.count, 'cs')}) % {state.stages}) % {b.slots})"
        return f"8 * ({self.cx(state.index(), b.slots)})"

    def remote_base(self, name: str) -> str:
        """The C name of barrier array ``name``'s shared::cluster address in the CTA owning it (a peer of the role
        being emitted), recorded in :attr:`remote` for :func:`_per_cta` to declare before the role: ``mapa`` of
        the array's base, once per role rather than per release."""
        d = cta_of(name)
        var = f"bar_{self.base(name)}_{'peer' if self.relative else f'cta{d}'}"
        self.remote[var] = (f"bar_{self.base(name)}", self.rank(d), self.label(name))
        return var

    def parity(self, state) -> str:
        if self.mutant_carry() is not None:
            return (f"(({self.count_c(state.count, 'cp')}) / {state.stages} + {state.phase} + cf) % 2")
        return self.cx(state.parity())

    def pred(self, op: str, at: Expr) -> Optional[str]:
        """The C condition of op ``op``'s predicate at iteration ``at`` (None: always)."""
        when = self.ops[op].when
        if when is None:
            return None
        return c_expr(simplify(substitute(parse(when), {self.loop_var: at})))

    def guarded(self, depth: int, guard: Optional[Expr], body: list[str]) -> None:
        if guard is None:
            for b in body:
                self.w(depth, b)
            return
        self.w(depth, f"if ({c_expr(guard)}) {{")
        for b in body:
            self.w(depth + 1, b)
        self.w(depth, "}")

    def setup_stmt(self, depth: int, s) -> None:
        if isinstance(s, InitStmt):
            b = self.barrier(s.barrier)
            v = f"bar_{self.base(b.name)}"
            self.guarded(depth, s.guard, self.cta_guard(b.name, [
                f"for (int s = 0; s < {b.slots}; ++s) synth_mbar_init({v} + 8 * s, "
                f"{b.count});  // init {b.name}[{b.slots}], count {b.count}",
                "#ifdef SYNTH_EMULATE",
                f"for (int s = 0; s < {b.slots}; ++s) synth_emu_name_barrier("
                f"{v} + 8 * s, \"{b.name}\", s);",
                "#endif"]))
        elif isinstance(s, InvalStmt):
            b = self.barrier(s.barrier)
            self.guarded(depth, s.guard, self.cta_guard(b.name, [
                f"for (int s = 0; s < {b.slots}; ++s) synth_mbar_inval(bar_{self.base(b.name)} + 8 * s);"]))
        elif isinstance(s, FenceStmt):
            fn = "synth_fence_mbarrier_init()" if s.fence == "mbarrier_init" else "synth_fence_proxy_async()"
            self.guarded(depth, s.guard, [f"{fn};"])
        else:
            raise ValueError(f"statement {s!r} cannot appear in setup or teardown")

    def stmt(self, depth: int, role: str, s, waits) -> None:
        self.guard_now = s.stmts[0].guard if isinstance(s, _Multicast) else getattr(s, "guard", None)
        if isinstance(s, TryWaitStmt):
            if not self.local(s.barrier):
                raise ValueError(f"{role}{self.cta}: try_wait on {s.barrier} of CTA {cta_of(s.barrier)}: "
                                 "mbarrier.try_wait takes a barrier of the waiting thread's own CTA")
            self.guarded(depth, s.guard, [f"synth_mbar_wait({self.bar(s.barrier, s.state)}, "
                                          f"{self.parity(s.state)});  // {self.label(s.barrier)} count "
                                          f"{c_expr(s.state.count)}"])
        elif isinstance(s, ArriveStmt):
            target = self.bar(s.barrier, s.state)
            body = []
            if not self.local(s.barrier):  # a release on a peer CTA's barrier: its shared::cluster address
                d = cta_of(s.barrier)
                if s.tx or d is None or d >= self.cfg.cluster_size:
                    raise ValueError(f"{role}{self.cta}: arrive on {s.barrier} (CTA {d}): a remote arrive carries no "
                                     "tx bytes and names a CTA of the cluster")
                if self.cfg.persistent and not _carries_slots(self.cfg.stages):
                    # the persistent ring with 1, 2 or 4 stages: mapa per release (with the array's base mapped
                    # once, ptxas moved the release's address arithmetic into the run between the tile's HGMMA:
                    # 128x128, 4 stages, K_PIPE_MMAS 1 went from 7.38 / 19 to 7.62 / 29)
                    addr = f"synth_mapa({target}, {self.rank(d)})"
                else:
                    addr = f"{self.remote_base(s.barrier)} + {self.bar_offset(s.barrier, s.state)}"
                body = [f"synth_mbar_arrive_cluster({addr});  // remote: {self.label(s.barrier)}"] * s.arrivals
                if not body:
                    return
                if role != "producer":
                    body = ["if (wt == 0) {"] + ["  " + b for b in body] + ["}"]
                self.guarded(depth, s.guard, body)
                return
            if s.tx:
                terms = []
                for t in s.tx:
                    cond = None if t.gate is None else self.pred(t.gate, s.state.count)
                    terms.append(f"{t.bytes}u" if cond is None else f"(({cond}) ? {t.bytes}u : 0u)")
                body.append(f"const uint32_t tx_bytes = {' + '.join(terms)};")
                fn = "synth_mbar_arrive_expect_tx" if s.arrivals else "synth_mbar_expect_tx"
                body.append(f"{fn}({target}, tx_bytes);")
                extra = s.arrivals - 1
            else:
                extra = s.arrivals
                if not s.arrivals:
                    return
            body += [f"synth_mbar_arrive({target});"] * max(extra, 0)
            if role != "producer":
                body = ["if (wt == 0) {"] + ["  " + b for b in body] + ["}"]
            self.guarded(depth, s.guard, body)
        elif isinstance(s, _Multicast):
            self.multicast(depth, s)
        elif isinstance(s, OpStmt) and s.barrier is not None:
            self.tma(depth, s)
        elif isinstance(s, OpStmt):
            self.mma(depth, s)
        elif isinstance(s, CommitStmt):
            self.guarded(depth, s.guard, ["synth_wgmma_commit();"])
        elif isinstance(s, WaitStmt):
            n = simplify(substitute(waits[s.wait].in_flight, self.const)) if self.const else waits[s.wait].in_flight
            text = (f"synth_wgmma_wait_n<{n.value}>();" if isinstance(n, Num) and n.value >= 0
                    else f"synth_wgmma_wait({c_expr(n)});")
            self.guarded(depth, s.guard, [text])
        elif isinstance(s, (InitStmt, InvalStmt, FenceStmt)):
            self.setup_stmt(depth, s)
        else:
            raise ValueError(f"unsupported statement {s!r}")

    def tma(self, depth: int, s: OpStmt) -> None:
        cfg = self.cfg
        (acc,) = s.writes
        buf = self.base(acc.buffer)
        if self.cluster and not (self.local(acc.buffer) and self.local(s.barrier.barrier)):
            raise ValueError(f"{s.op}: a copy into {acc.buffer} completing on {s.barrier.barrier} from CTA {self.cta}: "
                             "only a part of the shared operand's box (op load_X_h<c>_to<d>) is multicast")
        if self.cluster and buf == cfg.shared_operand:
            raise ValueError(f"{s.op}: the cluster {cfg.cluster} shares {buf}: each producer loads its part of the box "
                             "(op load_X_h<c>_to<d>), not the whole")
        if buf == "A":
            dst, rows, origin, tmap = "sA", cfg.bm, "m0", "tmA"
            slot_bytes = cfg.a_slot_bytes
        elif buf == "B":
            dst, rows, origin, tmap = "sB", cfg.bn, "n0", "tmB"
            slot_bytes = cfg.b_slot_bytes
        else:
            raise ValueError(f"TMA into unknown buffer {acc.buffer!r}")
        if s.barrier.bytes != slot_bytes:
            raise ValueError(f"{s.op}: the program's complete_tx bytes {s.barrier.bytes} differ from the box "
                             f"{cfg.bk} x {rows} f16 = {slot_bytes} bytes")
        k_tile = c_expr(s.iteration) if cfg.split_k == 1 else f"kt0 + {c_expr(s.iteration)}"
        if cfg.persistent:  # the ring's iteration i is k-tile i - kb of this tile
            k_tile = f"(int)(({c_expr(s.iteration)}) - kb)"
        body = [f"synth_tma_load_2d({dst} + ({self.slot_m(acc.version, acc.slot)}) * {slot_bytes}, &{tmap}, "
                f"({k_tile}) * {cfg.bk}, {origin}, {self.bar(s.barrier.barrier, s.barrier.state)});"
                f"  // {self.label(s.op)}: {slot_bytes} bytes"]
        cond = self.pred(s.op, s.iteration)
        if cond is not None:
            body = [f"if ({cond}) {{"] + ["  " + b for b in body] + ["}"]
        self.guarded(depth, s.guard, body)

    def multicast(self, depth: int, g: _Multicast) -> None:
        """One ``cp.async.bulk.tensor ... .multicast::cluster`` for the copies of ``g``: the part ``h`` of the
        shared operand's box its op names (rows ``h * box rows`` of the tile: coordinates and slot offset),
        landing at the slot of its write access and completing on the barrier at its ``BarrierRef``'s offset in
        every destination CTA (the mask)."""
        cfg = self.cfg
        s0 = g.stmts[0]
        m = _HALF_OP.match(s0.op)
        letter, h = m.group(2), int(m.group(3))
        if letter != cfg.shared_operand:
            raise ValueError(f"{s0.op}: a part of {letter}'s box, but the cluster {cfg.cluster} shares "
                             f"{cfg.shared_operand}")
        if not 0 <= h < cfg.cluster_size:
            raise ValueError(f"{s0.op}: part {h} of the box: the cluster {cfg.cluster} splits it into "
                             f"{cfg.cluster_size}")
        for s, d in zip(g.stmts, g.dests):
            (acc,) = s.writes
            if self.base(acc.buffer) != letter or d is None or d >= cfg.cluster_size or \
                    int(_HALF_OP.match(s.op).group(4)) != d or cta_of(s.barrier.barrier) != d:
                raise ValueError(f"{s.op}: writes {acc.buffer} and completes on {s.barrier.barrier}: a part of "
                                 f"{letter}'s box lands in the CTA its op names and on that CTA's barrier")
        rows = cfg.a_box_rows if letter == "A" else cfg.b_box_rows
        part_bytes = rows * cfg.bk * 2
        if s0.barrier.bytes != part_bytes:
            raise ValueError(f"{s0.op}: the program's complete_tx bytes {s0.barrier.bytes} differ from the box "
                             f"{cfg.bk} x {rows} = {part_bytes} bytes")
        conds = {self.pred(s.op, s.iteration) for s in g.stmts}
        if len(conds) != 1:
            raise ValueError(f"{', '.join(s.op for s in g.stmts)}: one multicast copy has one predicate")
        (acc,) = s0.writes
        dst, origin, tmap, slot_bytes = (("sA", "m0", "tmA", cfg.a_slot_bytes) if letter == "A" else
                                         ("sB", "n0", "tmB", cfg.b_slot_bytes))
        pairs = list(zip(g.stmts, g.dests))
        if self.relative:  # the part and the mask from the running CTA's rank; one instruction: own CTA first
            pairs.sort(key=lambda sd: sd[1] != self.cta)
            g = _Multicast(tuple(x for x, _ in pairs), tuple(d for _, d in pairs))
            mask = " | ".join(f"(1u << {self.rank(d)})" for d in g.dests)
            if set(g.dests) == set(range(cfg.cluster_size)):
                mask = f"{(1 << cfg.cluster_size) - 1:#x}"
            at, first = f"{self.rank(h)} * {part_bytes}u", f"(int){self.rank(h)} * {rows}"
            into = " and ".join("this CTA" if d == self.cta else "the peer" for d in g.dests)
        else:
            mask, at, first = f"{sum(1 << d for d in g.dests):#x}", f"{h * part_bytes}", f"{h * rows}"
            into = "CTA(s) " + ", ".join(map(str, g.dests))
        # a persistent CTA's ring iteration i is k-tile i - kb of its tile
        k_tile = f"(int)(({c_expr(s0.iteration)}) - kb)" if cfg.persistent else c_expr(s0.iteration)
        body = [f"synth_tma_load_2d_multicast({dst} + ({self.slot_m(acc.version, acc.slot)}) * "
                f"{slot_bytes} + {at}, &{tmap}, ({k_tile}) * {cfg.bk}, {origin} + {first}, "
                f"{self.bar(s0.barrier.barrier, s0.barrier.state)}, (uint16_t)({mask}));"
                f"  // {', '.join(self.label(s.op) for s in g.stmts)}: part {self.rank(h) if self.relative else h} "
                f"of {letter} ({rows} rows, {part_bytes} bytes) into {into}"]
        (cond,) = conds
        if cond is not None:
            body = [f"if ({cond}) {{"] + ["  " + b for b in body] + ["}"]
        self.guarded(depth, s0.guard, body)

    def mma(self, depth: int, s: OpStmt) -> None:
        cfg = self.cfg
        slots = {self.base(a.buffer): self.slot_c(a.version, a.slot) for a in s.reads}
        at = {self.base(a.buffer): self.slot_m(a.version, a.slot) for a in s.reads}
        if any(not self.local(a.buffer) for a in s.reads) or \
                len({(self.base(a.buffer), self.slot_c(a.version, a.slot)) for a in s.reads}) != len(slots):
            raise ValueError(f"{s.op}: a wgmma reads one slot of each operand in its own CTA's shared memory, got "
                             f"{', '.join(a.buffer for a in s.reads)}")
        if set(slots) != {"A", "B"}:
            raise ValueError(f"{s.op}: expected reads of A and B, got {sorted(slots)}")
        conds = [c for c in (self.pred(a.producer, s.iteration) for a in s.reads if a.producer) if c]
        body = ["synth_wgmma_fence();",
                "{",
                f"  const uint64_t da = desc_a0 + (uint64_t)(({at['A']}) * {cfg.a_slot_bytes >> 4});",
                f"  const uint64_t db = desc_b0 + (uint64_t)(({at['B']}) * {cfg.b_slot_bytes >> 4});",
                "#pragma unroll",
                f"  for (int kk = 0; kk < {cfg.bk // 16}; ++kk)",
                f"    {_wgmma_name(cfg)}(acc, da + 2 * kk, db + 2 * kk);  // +32 bytes per k16",
                "}"]
        if cfg.row_blocks > 1:  # ping-pong with a 128-row tile per warp group: one wgmma per 64-row block
            body[-3:-1] = [f"  for (int kk = 0; kk < {cfg.bk // 16}; ++kk) {{",
                           *(f"    {_wgmma_name(cfg)}(acc + {r * cfg.bn // 2}, da + {r * 512} + 2 * kk, db + 2 * kk);"
                             f"  // rows {64 * r}.. (+{64 * r} x 128 bytes)" for r in range(cfg.row_blocks)),
                           "  }"]
        if conds:
            # adapter (docs/hopper_kernel.md): a k-tile whose loads are predicated off is not multiplied
            body = [f"if ({' && '.join(conds)}) {{"] + ["  " + b for b in body] + ["}"]
        self.guarded(depth, s.guard, body)

    def part(self, depth: int, role: str, part: Part, waits) -> None:
        self.w(depth, f"// ---- {role} {part.name}")
        if isinstance(part.extent, Num) and part.extent.value <= UNROLL_MAX:
            # a constant-extent part (the drain) is unrolled so that every wgmma.wait_group count is an
            # immediate: ptxas serializes all wgmma when a run-time count selects the wait
            for c in range(part.extent.value):
                self.w(depth, f"{{  // {part.var} = {c}")
                self.w(depth + 1, f"const int {part.var} = {c};")
                self.const = {part.var: Num(c)}
                for s in self.grouped(part.stmts):
                    self.stmt(depth + 1, role, s, waits)
                self.const = {}
                self.w(depth, "}")
            return
        if self.cluster:
            # unsigned, as the persistent ring's: ptxas then unrolls the loop with slots and parities as shifts and
            # masks (the 128x128 cluster consumer: 6.75 instructions per HGMMA, 10.4 with an int)
            self.carried_loop(depth, part.var, "0")
            self.w(depth, f"for (unsigned {part.var} = 0; {part.var} < (unsigned)({c_expr(part.extent)}); "
                          f"++{part.var}) {{")
        else:
            self.w(depth, f"for (int {part.var} = 0; {part.var} < {c_expr(part.extent)}; ++{part.var}) {{")
        for s in self.grouped(part.stmts):
            self.stmt(depth + 1, role, s, waits)
        self.carried_step(depth + 1)
        self.w(depth, "}")


def emit_sm90_kernel(cfg: Sm90Config, program: Optional[HopperProgram] = None, carry=None, store=None,
                     order=None, scheduler: str = "cluster") -> str:
    """The ``kernel.cu`` text of ``cfg`` with its synchronization taken from ``program``
    (default: the proven lowering ``cfg.program()``). ValueError when the program is not of the
    shape this emitter knows (roles ``producer`` of 1 warp group and ``consumer`` of
    ``bm / 64``, TMA into buffers A and B, one wgmma op reading both). ``cfg.persistent``: the
    program is the CTA's ring over all its tiles (docs/hopper_kernel.md, "Persistent tiles"), each
    role's parts a ``body`` of extent ``T`` then at most a constant-extent ``epilogue``; ``carry``
    (role -> :class:`synth.hopper.persistent.TileCarry`) replaces the running count of a role's
    states (the bug tests' mutants; default: the running count). ``cfg.epilogue == "tma_store"``: C leaves
    through the store program ``store`` (default ``cfg.store_program()``; a mutant for the bug tests), each
    of its statements one line of the consumers' epilogue (docs/hopper_store.md). A cluster ``cfg`` takes a cluster
    program (roles ``producer{c}``, ``consumer{c}`` for each CTA ``c``, its barriers and buffers naming their CTA);
    ValueError for a statement the cluster kernel cannot be (a wait on another CTA's barrier, a copy into
    another CTA that is not a part of the shared operand's box, a part whose bytes are not the half box, ...),
    docs/hopper_cluster.md "The kernel". A persistent cluster ``cfg``: the grid's clusters walk cluster-sized
    tile groups, each CTA's roles the ring over its cluster's groups (docs/hopper_cluster.md, "Persistent
    clusters"); ``carry`` keys may name a role (``consumer1``) or a role kind (``consumer``: every CTA's);
    ``scheduler`` (:data:`SCHEDULERS`) ``cta`` writes the scheduler bug of the emulator's test."""
    cfg.check()
    p = program if program is not None else cfg.program()
    if store is not None and cfg.epilogue != "tma_store":
        raise ValueError("a store program applies to a TMA-store epilogue only")
    store = store if store is not None else cfg.store_program()
    if order is not None and not cfg.pingpong:
        raise ValueError("an order program applies to ping-pong consumers only")
    if cfg.pingpong and order is None:
        from ...lower.hopper_pingpong import order_program

        order = order_program(False)
    if carry and not cfg.persistent:
        raise ValueError("a tile carry applies to a persistent kernel only")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler {scheduler!r}: expected one of {SCHEDULERS}")
    if scheduler != "cluster" and not (cfg.persistent and cfg.cluster_size > 1):
        raise ValueError(f"scheduler {scheduler!r} applies to a persistent cluster kernel only")
    roles = {r.name: r for r in p.roles}
    n = cfg.cluster_size
    if n > 1:
        want = [f"{k}{c}" for k in ("producer", "consumer") for c in range(n)]
        if sorted(roles) != sorted(want) or any(roles[f"producer{c}"].warpgroups != 1 or
                                                roles[f"consumer{c}"].warpgroups != cfg.ring_consumers
                                                for c in range(n)):
            raise ValueError(f"cluster {cfg.cluster}: expected roles {', '.join(want)} (producers of 1 warp group, "
                             f"consumers of {cfg.ring_consumers}), got {', '.join(roles)}")
    elif set(roles) != {"producer", "consumer"} or roles["producer"].warpgroups != 1 or \
            roles["consumer"].warpgroups != cfg.ring_consumers:
        raise ValueError(f"expected a producer role of 1 warp group and a consumer role of {cfg.ring_consumers}")
    if p.trip_count != "T":
        raise ValueError("the kernel computes T = ceil(K / BK) at run time: the program needs a symbolic trip count T")
    if cfg.persistent:
        for r in p.roles:
            names = [pt.name for pt in r.program.parts]
            if names not in (["body"], ["body", "epilogue"]) or r.program.parts[0].extent != parse("T") or \
                    any(not isinstance(pt.extent, Num) for pt in r.program.parts[1:]):
                raise ValueError(f"role {r.name}: a persistent kernel runs a body of extent T per tile and a "
                                 f"constant-extent epilogue after the last tile, got parts {names}")
    e = _Emit(cfg, p, carry)
    e.store = store
    e.order = order
    max_wait = cfg.stages
    head = [
        f"// synth: sm_90a GEMM {cfg.bm}x{cfg.bn}x{cfg.bk}, {cfg.stages} stages, K_PIPE_MMAS {cfg.k_pipe_mmas}, "
        f"{cfg.consumers} consumer warp group(s) ({'ping-pong' if cfg.pingpong else 'cooperative'}), TMA 128B swizzle, wgmma m64n{cfg.bn}k16 {cfg.dtype}"
        + (", persistent tiles" if cfg.persistent else "")
        + (f", TMA-store epilogue ({cfg.staging} staging buffers of 64x{cfg.store_cols} {cfg.out_dtype} per warp group)"
           if store is not None else ""),
        *(f"// {n}" for n in p.notes),
        "// Synchronization emitted statement by statement from the Hopper program (docs/hopper_kernel.md).",
        f"#define SYNTH_BM {cfg.bm}", f"#define SYNTH_BN {cfg.bn}", f"#define SYNTH_BK {cfg.bk}",
        f"#define SYNTH_STAGES {cfg.stages}", f"#define SYNTH_THREADS {cfg.threads}",
        f"#define SYNTH_SMEM_BYTES {cfg.smem_bytes}", f"#define SYNTH_SPLIT_K {cfg.split_k}",
        *(["#define SYNTH_PERSISTENT 1  // a 1-D grid of any P >= 1 CTAs walks the tiles"] if cfg.persistent else []),
        *([f"#define SYNTH_CLUSTER_M {cfg.cluster_m}  // CTAs of a cluster along M (grid y)",
           f"#define SYNTH_CLUSTER_N {cfg.cluster_n}  // CTAs of a cluster along N (grid x)",
           f"#define SYNTH_A_BOX_ROWS {cfg.a_box_rows}  // rows of tmA's box",
           f"#define SYNTH_B_BOX_ROWS {cfg.b_box_rows}  // rows of tmB's box"] if n > 1 else []),
        *([f"#define SYNTH_TMA_STORE {cfg.store_cols}  // C leaves through TMA stores of 64 x this many elements",
           f"#define SYNTH_OUT_BYTES {cfg.out_bytes}  // C stored as {cfg.out_dtype}",
           *(["#define SYNTH_OUT_BF16 1"] if cfg.out_dtype == "bf16" else [])] if store is not None else []),
        "#ifdef SYNTH_EMULATE",
        '#include "synth_emu_sm90.h"',
        *(["#ifndef __cluster_dims__  // the emulator reads the cluster shape from SYNTH_CLUSTER_M / N",
           "#define __cluster_dims__(...)",
           "#endif"] if n > 1 else []),
        "#else",
        _CUDA_API.strip(),
        *([_CUDA_CLUSTER_API.strip()] if n > 1 else []),
        *([_CUDA_STORE_API.strip()] if store is not None else []),
        _wgmma_cuda(cfg).rstrip(),
        _wait_dispatch(max_wait).rstrip(),
        "#endif",
        "// K-major operand, 128-byte swizzle: start >> 4, LBO 1 (unused), SBO 1024 bytes (8 rows), layout 1 (128B)",
        "SYNTH_DEV uint64_t synth_desc_k128(uint32_t a) {",
        "  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32)"
        " | ((uint64_t)1 << 62);",
        "}",
        "",
        *([f"// tmC: C as the TMA stores write it ({cfg.out_dtype}, row stride {cfg.out_bytes} ldc bytes, box 64 rows x "
            f"{cfg.store_cols} columns, no swizzle).",
           "// The host encodes it only when C's base address and row stride are multiples of 16 bytes",
           "// (cuTensorMapEncodeTiled's rule); otherwise it passes a zeroed map and every consumer of the launch",
           "// stores C from registers instead (the register epilogue, bounds-checked per element): the choice is",
           "// the launch's (uniform), made here from C and ldc, the arguments the host decided on",
           "SYNTH_DEV bool synth_c_tma(const void* C, int ldc) {",
           f"  return ((reinterpret_cast<uintptr_t>(C) | ((uintptr_t)(unsigned)ldc * {cfg.out_bytes}u)) & 15) == 0;",
           "}"] if store is not None else []),
        f"extern \"C\" __global__ void "
        + ("__cluster_dims__(SYNTH_CLUSTER_N, SYNTH_CLUSTER_M, 1) " if n > 1 else "")
        + f"__launch_bounds__({cfg.threads}, 1)",
        f"{KERNEL}(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,",
        *(["               const __grid_constant__ CUtensorMap tmC,"] if store is not None else []),
        "               float* __restrict__ C, const float* __restrict__ C_in, int M, int N, int K, int ldc,",
        "               float alpha, float beta) {" if cfg.split_k == 1 else
        "               float alpha, float beta, float* __restrict__ workspace, unsigned* __restrict__ tickets) {",
        "  extern __shared__ unsigned char synth_smem_raw[];",
        "  unsigned char* smem = synth_smem_raw + ((1024 - (synth_smem_u32(synth_smem_raw) & 1023)) & 1023);",
        "  // shared-memory addresses (32-bit, the state space of every TMA, mbarrier and descriptor operand)",
        "  // pinned: otherwise ptxas recomputes the shared window base at every loop head (S2UR SR_CgaCtaId)",
        "  const uint32_t sA = synth_pinned_uniform(synth_smem_u32(smem));",
        f"  const uint32_t sB = sA + {cfg.stages * cfg.a_slot_bytes};",
    ]
    off = cfg.stages * (cfg.a_slot_bytes + cfg.b_slot_bytes)
    if store is not None:
        head.append(f"  const uint32_t sStage = sA + {off};  // TMA-store staging: {cfg.consumers} warp group(s) x "
                    f"{cfg.staging} x {64 * cfg.store_cols * cfg.out_bytes} bytes")
        off += cfg.staging_bytes
    laid: dict = {}
    for b in p.barriers + (order.barriers if order is not None else ()):
        name = e.base(b.name)  # a cluster's full0, full1: one offset, each CTA's own barrier there
        if name in laid:
            if laid[name] != b.slots:
                raise ValueError(f"barrier {b.name}: {b.slots} slots, but its peer at the same offset has {laid[name]}")
            continue
        laid[name] = b.slots
        peers = [x.name for x in p.barriers if e.base(x.name) == name]
        head.append(f"  const uint32_t bar_{name} = sA + {off};  // {b.kind}, "
                    f"{b.slots} slots" + (f" ({', '.join(peers)}: each CTA's own at this offset)" if n > 1 else ""))
        off += 8 * b.slots
    if off + 1024 > cfg.smem_bytes:
        raise ValueError("the program's barriers do not fit the shared memory of the configuration")
    if cfg.persistent and n > 1:
        cm, cn = cfg.cluster_m, cfg.cluster_n

        def per(x: str, c: int) -> str:  # x / c rounded up (C text)
            return x if c == 1 else f"({x} + {c - 1}) / {c}"

        def over(x: str, c: int) -> str:  # x / c (C text)
            return x if c == 1 else f"{x} / {c}"
        head += [
            f"  const int KT = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles per output tile",
            "  if (K < 1) return;",
            f"  const int tiles_n = (N + {cfg.bn - 1}) / {cfg.bn}, tiles_m = (M + {cfg.bm - 1}) / {cfg.bm};",
            f"  // persistent clusters: the tiles in groups of {cm} x {cn} (a cluster's), a group's tiles outside C "
            "computed and clipped",
            f"  const int groups_n = {per('tiles_n', cn)}, groups_m = {per('tiles_m', cm)};",
            "  const int groups = groups_n * groups_m;",
            f"  // the grid is (P / {n}) * {cn} x {cm} CTAs: cluster q = blockIdx.x / {cn} of Q = gridDim.x / {cn} takes "
            "groups q, q + Q, ...",
            f"  const int cluster_q = {over('(int)blockIdx.x', cn)}, clusters = {over('(int)gridDim.x', cn)};",
        ]
        if scheduler == "cluster":
            head += [
                "  // from the CLUSTER's index: every CTA of the cluster takes the same groups, so the same tile count",
                "  // and ring trip count T (peers with different trip counts sharing barriers deadlock)",
                "  const int n_tiles = cluster_q < groups ? (groups - 1 - cluster_q) / clusters + 1 : 0;",
            ]
        else:  # the bug: each CTA counts its tiles from its own index, as the one-CTA scheduler does
            head += [
                "  const int tiles = tiles_n * tiles_m, cta_b = (int)(blockIdx.y * gridDim.x + blockIdx.x);",
                "  const int n_tiles = cta_b < tiles ? (tiles - 1 - cta_b) / (int)(gridDim.x * gridDim.y) + 1 : 0;"
                "  // BUG (scheduler 'cta'): the CTA's own index",
            ]
        head += [
            "  // the program's trip count: the CTA's ring of every k-tile of every tile it takes (state never reset)",
            "  const int T = n_tiles * KT;",
        ]
    elif cfg.persistent:
        head += [
            f"  const int KT = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles per output tile",
            "  if (K < 1) return;",
            f"  const int tiles_n = (N + {cfg.bn - 1}) / {cfg.bn}, tiles_m = (M + {cfg.bm - 1}) / {cfg.bm};",
            "  const int tiles = tiles_n * tiles_m;",
            "  // persistent: CTA b takes tiles b, b + P, ... (P = gridDim.x, any P >= 1) in grouped raster order",
            "  const int n_tiles = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;",
            "  // the program's trip count: the CTA's ring of every k-tile of every tile it takes (state never reset)",
            "  const int T = n_tiles * KT;",
        ]
    elif cfg.split_k == 1:
        head += [f"  const int T = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles", "  if (K < 1) return;"]
    else:
        # the split and its k-tiles here; each role computes its tile (synth_tile, m0, n0) where it uses it
        head += [
            f"  const int T_all = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles of the whole K",
            "  // every split gets at least one k-tile, and a split-K launch has its grid and buffers, or nothing runs",
            "  if (K < 1 || T_all < SYNTH_SPLIT_K || gridDim.z != SYNTH_SPLIT_K || workspace == nullptr ||",
            "      tickets == nullptr || (reinterpret_cast<uintptr_t>(workspace) & 15) != 0) return;",
        ]
    head += [
        "  // the warp group index made warp-uniform (a broadcast) so descriptor arithmetic stays in uniform registers",
        "  const int wg = synth_uniform(threadIdx.x / 128), wt = threadIdx.x % 128;",
    ]
    if n > 1:
        head += ["  const uint32_t crank = synth_cluster_ctarank();  // this CTA's rank in its cluster: it runs the roles "
                 "of CTA crank"]
        e.lines = head + ["  // ---- setup"]
        _cluster_sync_stmts(e, p.setup)
        if not (p.setup and isinstance(p.setup[-1], ClusterSyncStmt)):
            e.w(1, "synth_syncthreads();")
        if cfg.persistent:
            _persistent_cluster_roles(e, cfg, p)
        else:
            _cluster_roles(e, cfg, p)
        e.w(1, "// ---- teardown")
        if not (p.teardown and isinstance(p.teardown[0], ClusterSyncStmt)):
            e.w(1, "synth_syncthreads();")
        _cluster_sync_stmts(e, p.teardown)
        e.lines.append("}")
        return "\n".join(e.lines) + "\n"
    head += [
        "  // ---- setup",
        "  if (threadIdx.x == 0) {",
    ]
    e.lines = head
    for s in p.setup + (order.setup if order is not None else ()):
        e.setup_stmt(2, s)
    e.w(1, "}")
    e.w(1, "synth_syncthreads();")
    prod, cons = roles["producer"].program, roles["consumer"].program
    if cfg.persistent:
        _persistent_roles(e, cfg, prod, cons)
    else:
        _tile_roles(e, cfg, prod, cons)
    e.w(1, "// ---- teardown")
    e.w(1, "synth_syncthreads();")
    e.w(1, "if (threadIdx.x == 0) {")
    for s in p.teardown + (order.teardown if order is not None else ()):
        e.setup_stmt(2, s)
    e.w(1, "}")
    e.lines.append("}")
    return "\n".join(e.lines) + "\n"


def _cluster_sync_stmts(e: _Emit, stmts) -> None:
    """A cluster program's setup or teardown in its order: a cluster barrier (``cluster_sync``) by every thread of
    the CTA, each other statement by thread 0 (an ``init`` / ``inval`` by the CTA owning its barrier only)."""
    open_ = False
    for s in stmts:
        if isinstance(s, ClusterSyncStmt):
            if s.guard is not None:
                raise ValueError("a cluster barrier is run by every thread of every CTA: it takes no guard")
            if open_:
                e.w(1, "}")
                open_ = False
            e.w(1, "synth_cluster_sync();  // barrier.cluster arrive.release + wait.acquire: every thread of every CTA")
            continue
        if not open_:
            e.w(1, "if (threadIdx.x == 0) {")
            open_ = True
        e.setup_stmt(2, s)
    if open_:
        e.w(1, "}")


def _per_cta(e: _Emit, cfg: Sm90Config, depth: int, kind: str, emit_role) -> None:
    """The roles of kind ``kind`` of a cluster program, each CTA's written by ``emit_role(depth, role name)`` with
    ``e.cta`` the CTA: when their texts written relative to the running CTA (:attr:`_Emit.relative`) are the same
    for every CTA (the program is symmetric under the swap of the CTAs), one block run by every CTA; otherwise
    each CTA's role as it is, in its own ``if (crank == c)`` (a mutant that differs per CTA is emitted as it is)."""
    def body(d: int, c: int, relative: bool) -> list[str]:
        saved, e.lines = e.lines, []
        e.cta, e.relative, e.remote = c, relative, {}
        emit_role(d, f"{kind}{c}")
        out, e.lines = e.lines, saved
        # each peer barrier array's shared::cluster base once, before the role's loops: a remote release is then the
        # base plus the slot's offset (mapa maps an address to the same offset in the peer's shared memory), which
        # ptxas keeps in a uniform register and carries from one k-tile to the next as it does the local release's
        # address (a mapa per release cost 3 to 5 instructions per HGMMA and 10 to 18 of the longest HGMMA-free run
        # with 3, 5 or 6 stages); pinned by a warp broadcast where every lane runs the role (not the producer's
        # elected thread)
        decl = []
        for var, (local, rank, label) in sorted(e.remote.items()):
            addr = f"synth_mapa({local}, {rank})"
            value = addr if kind == "producer" else f"synth_pinned_uniform({addr})"
            decl.append("  " * d + f"const uint32_t {var} = {value};  // {label}'s barriers in the peer's shared memory "
                        "(shared::cluster)")
        e.cta, e.relative, e.remote = None, False, {}
        return decl + out

    n = cfg.cluster_size
    if n == 2:
        same = [body(depth + 1, c, True) for c in range(n)]
        if all(x == same[0] for x in same):  # the roles of CTA 1 are CTA 0's with the CTAs swapped
            e.w(depth, f"{{  // every CTA: role {kind}<crank>, written relative to this CTA (crank) and its peer "
                       "(crank ^ 1)")
            e.lines += same[0]
            e.w(depth, "}")
            return
    for c in range(n):
        e.w(depth, f"{'if' if c == 0 else '} else if'} (crank == {c}u) {{  // CTA {c}: role {kind}{c}")
        e.lines += body(depth + 1, c, False)
    e.w(depth, "}")


def _cluster_roles(e: _Emit, cfg: Sm90Config, p: HopperProgram) -> None:
    """The roles of a cluster CTA (one tile, docs/hopper_cluster.md "The kernel"): warp group 0's elected thread runs
    role ``producer{crank}``, the consumer warp groups role ``consumer{crank}`` (:func:`_per_cta`). The tile from
    :func:`synth.emit.raster.cluster_cuda_lines`."""
    tile = cluster_cuda_lines(cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n)

    def parts(kind: str):
        def emit_role(depth: int, role: str) -> None:
            prog = p.role(role).program
            for pt in prog.parts:
                e.part(depth, kind, pt, prog.waits)
        return emit_role

    e.w(1, "if (wg == 0) {")
    e.w(2, f"synth_setmaxnreg_dec<{PRODUCER_REGS}>();")
    e.w(2, "if (wt == 0) {  // one elected thread issues the producer's statements")
    for line in tile:
        e.w(3, line)
    _per_cta(e, cfg, 3, "producer", parts("producer"))
    e.w(2, "}")
    e.w(1, "} else {")
    e.w(2, f"synth_setmaxnreg_inc<{cfg.consumer_regs}>();")
    e.w(2, "const int cw = wg - 1;  // consumer warp group: rows cw * 64 .. + 63 of the tile")
    _consumer_registers(e, cfg)
    e.w(2, "#pragma unroll")
    e.w(2, f"for (int j = 0; j < {cfg.bn // 2}; ++j) acc[j] = 0.0f;")
    _per_cta(e, cfg, 2, "consumer", parts("consumer"))
    for line in tile:
        e.w(2, line)
    if e.store is not None:
        e.lines += _store_or_registers(cfg, e.store, "0u") + _store_drain(e.store)
    else:
        e.lines += _epilogue(cfg)
    e.w(1, "}")


def _persistent_cluster_roles(e: _Emit, cfg: Sm90Config, p: HopperProgram) -> None:
    """The roles of a persistent cluster CTA (docs/hopper_cluster.md, "Persistent clusters"): each CTA's roles
    (:func:`_per_cta`) run the ring over the ``n_tiles`` tile groups of its cluster (:func:`_ring`: the ring
    program's body once per tile, its epilogue after the last), its tile in each group at its offset in the
    cluster (:func:`synth.emit.raster.cluster_cuda_lines` of the group); the consumers drain and store C at each
    tile's end. A cluster without a group skips both roles in both CTAs alike."""
    tile_lines = ["const int group = cluster_q + t * clusters;  // the cluster's t-th tile group",
                  *cluster_cuda_lines(cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n, "group", "groups_n", "groups_m")]
    e.w(1, "if (n_tiles > 0) {  // a cluster with no tile group initializes and invalidates its barriers, "
           "nothing else")
    e.w(1, "if (wg == 0) {")
    e.w(2, f"synth_setmaxnreg_dec<{PRODUCER_REGS}>();")
    e.w(2, "if (wt == 0) {  // one elected thread issues the producer's statements")
    _per_cta(e, cfg, 3, "producer",
             lambda depth, role: _ring(e, depth, role, "producer", p.role(role).program, tile_lines, []))
    e.w(2, "}")
    e.w(1, "} else {")
    e.w(2, f"synth_setmaxnreg_inc<{cfg.consumer_regs}>();")
    e.w(2, "const int cw = wg - 1;  // consumer warp group: rows cw * 64 .. + 63 of the tile")
    _consumer_registers(e, cfg)
    zero, tail = _consumer_tile_end(e, cfg, tile_lines, indent="    ")
    _per_cta(e, cfg, 2, "consumer",
             lambda depth, role: _ring(e, depth, role, "consumer", p.role(role).program, zero, tail))
    if e.store is not None:
        e.lines += _store_drain(e.store)
    e.w(1, "}")
    e.w(1, "}")


def _ring(e: _Emit, depth: int, role: str, kind: str, program, per_tile_head, per_tile_tail) -> None:
    """Role ``role`` (of kind ``producer`` or ``consumer``) of a persistent CTA: the ring program's body once per
    tile (``i = kb + k``, ``kb`` the running count at the tile start), ``per_tile_head`` before it and
    ``per_tile_tail`` after it (lines, or lists of lines taken as they are), then the ring's epilogue once after
    the last tile."""
    pingpong = e.order is not None
    e.role = role
    body, rest = program.parts[0], program.parts[1:]
    if pingpong and kind == "consumer":
        e.w(depth, "for (int t = cw; t < n_tiles; t += 2) {  // ping-pong: this warp group's turns, tiles t = 2 j + cw")
    else:
        e.w(depth, "for (int t = 0; t < n_tiles; ++t) {")
    e.w(depth + 1, "const unsigned kb = (unsigned)t * (unsigned)KT;  // the running count at this tile's start "
                   "(carried, never reset)")
    e.carry_lines(depth + 1)
    for line in per_tile_head:
        e.w(depth + 1, line)
    # the ring's iteration as the loop variable, unsigned: ptxas then unrolls the loop with slots and parities
    # as shifts and masks (from t = 0, k it was 10.9 instructions per HGMMA at 128x128, with it 6.6)
    e.w(depth + 1, f"// ---- {e.label(role)} body: the ring's iterations kb .. kb + KT - 1 (k-tile {body.var} - kb)")
    # ping-pong consumers: slots and parities carried over the iterations where that is shorter (_pingpong_carries)
    e.carried_loop(depth + 1, body.var, "kb", phase=pingpong and kind == "consumer" and _pingpong_carries(e.cfg))
    e.w(depth + 1, f"for (unsigned {body.var} = kb; {body.var} < kb + (unsigned)KT; ++{body.var}) {{")
    for st in e.grouped(body.stmts):
        e.stmt(depth + 2, kind, st, program.waits)
    e.carried_step(depth + 2)
    e.w(depth + 1, "}")
    for line in per_tile_tail:
        e.w(depth + 1, line) if isinstance(line, str) else e.lines.extend(line)
    e.w(depth, "}")
    if rest:
        if pingpong and kind == "consumer":
            e.w(depth, "if ((n_tiles - 1) % 2 == cw) {  // after the last tile, by the warp group that took it: "
                       "the ring's epilogue")
        else:
            e.w(depth, "{  // after the last tile: the ring's epilogue")
        if e.mutant_carry() is not None:
            e.w(depth + 1, "const int t = n_tiles;")
            e.w(depth + 1, "const unsigned kb = (unsigned)T;")
            e.carry_lines(depth + 1)
        for pt in rest:
            e.part(depth + 1, kind, pt, program.waits)
        e.w(depth, "}")
    e.role = ""


def _consumer_tile_end(e: _Emit, cfg: Sm90Config, tile_lines: list[str], indent: str = "  "):
    """``(head, tail)`` of a persistent consumer's tile: the accumulators zeroed before its main loop; after it the
    wgmma drain (ping-pong: the order program's statements), the tile's ``m0``, ``n0`` and C (lists of lines are
    taken as they are: each line of C's epilogue indented by ``indent``)."""
    pingpong = e.order is not None
    zero = ["#pragma unroll", f"for (int j = 0; j < {cfg.row_blocks * cfg.bn // 2}; ++j) acc[j] = 0.0f;"]
    rows = "0" if pingpong else "cw * 64"
    subtiles = cfg.bn // cfg.store_cols
    first = (f"(unsigned)(t / 2) * {subtiles * cfg.row_blocks}u" if pingpong else f"(unsigned)t * {subtiles}u")
    if cfg.row_blocks == 1:
        c_lines = _epilogue(cfg, rows=rows) if e.store is None else _store_or_registers(cfg, e.store, first, rows=rows)
    else:  # each 64-row block of the warp group's tile in turn, its accumulators at acc + r BN / 2
        c_lines = []
        for r in range(cfg.row_blocks):
            part = (_epilogue(cfg, rows=str(64 * r)) if e.store is None else
                    _store_or_registers(cfg, e.store, f"{first} + {r * subtiles}u", rows=str(64 * r)))
            c_lines += ["    {  // rows " + f"{64 * r} .. {64 * r + 63} of the tile"] + \
                [ln.replace("acc[", f"acc[{r * cfg.bn // 2} + ") for ln in part] + ["    }"]
    c_lines = [indent + ln for ln in c_lines]
    if pingpong:
        # the order program's statements around the main loop: its waits before it, its drain (wait_group 0) and
        # the arrive that hands the ring to the other warp group after it; then C, overlapping the other's loop
        return _order_lines(e, "head") + zero, [*_order_lines(e, "tail"), *tile_lines, c_lines]
    # the tile's end: every wgmma group complete before the accumulators are read (wait_group 0 only completes
    # more groups than the ring program's own waits), then C from registers as in the one-tile kernel
    return zero, ["synth_wgmma_wait_n<0>();  // the tile's accumulators are complete", *tile_lines, c_lines]


def _persistent_roles(e: _Emit, cfg: Sm90Config, prod, cons) -> None:
    """The roles of a persistent CTA: each runs the ring program's body once per tile (``i = kb + k``, ``kb``
    the running count at the tile start) and its epilogue once after the last tile; the consumers drain
    their wgmma groups (``wait_group 0``) and store C at each tile's end. A CTA with no tile skips both."""
    tile_lines = ["const int tile = (int)blockIdx.x + t * (int)gridDim.x;",
                  *raster_lines(cfg.bm, cfg.bn, "tile", "tiles_n", "tiles_m")]
    pingpong = e.order is not None
    e.w(1, "if (n_tiles > 0) {  // a CTA with no tile initializes and invalidates its barriers, nothing else")
    e.w(1, "if (wg == 0) {")
    e.w(2, f"synth_setmaxnreg_dec<{PRODUCER_REGS}>();")
    e.w(2, "if (wt == 0) {  // one elected thread issues the producer's statements")
    _ring(e, 3, "producer", "producer", prod, tile_lines, [])
    e.w(2, "}")
    e.w(1, "} else {")
    e.w(2, f"synth_setmaxnreg_inc<{cfg.consumer_regs}>();")
    if pingpong:
        e.w(2, "const int cw = wg - 1;  // consumer warp group: whole 64-row tiles, every other one of the CTA's")
    else:
        e.w(2, "const int cw = wg - 1;  // consumer warp group: rows cw * 64 .. + 63 of the tile")
    _consumer_registers(e, cfg)
    zero, tail = _consumer_tile_end(e, cfg, tile_lines)
    _ring(e, 2, "consumer", "consumer", cons, zero, tail)
    if e.store is not None:
        e.lines += _store_drain(e.store)
    e.w(1, "}")
    e.w(1, "}")


def _order_lines(e: _Emit, where: str) -> list[str]:
    """The order program's statements of this warp group's turn ``j = t / 2`` (``if (cw == 0)``: role ``pp0``,
    else ``pp1``): ``head``, those before the role's collective op (its main loop); ``tail``, those after it
    but the commit (the ring's body commits its own groups: the op and its commit stand for the main loop)."""
    out: list[str] = []
    saved, e.lines = e.lines, out
    e.w(0, "{  // ping-pong order barrier: this warp group's turn j = t / 2 (" + where + ")")
    e.w(1, "const int i = t / 2;")
    for k, rname in enumerate(("pp0", "pp1")):
        role = e.order.role(rname)
        body = role.program.parts[0].stmts
        at = next(n for n, st in enumerate(body) if isinstance(st, OpStmt) and st.op in role.collective)
        stmts = body[:at] if where == "head" else [st for st in body[at + 1:] if not isinstance(st, CommitStmt)]
        e.w(1, "if (cw == 0) {" if k == 0 else "} else {")
        for st in stmts:
            if isinstance(st, ArriveStmt):
                e.w(2, "// order: hand the ring over to the other warp group")
            e.stmt(2, rname, st, role.program.waits)
    e.w(1, "}")
    e.w(0, "}")
    e.lines = saved
    return out


def _consumer_registers(e: _Emit, cfg: Sm90Config) -> None:
    """A consumer warp group's slot-0 wgmma descriptors (pinned) and its accumulators (both kernels)."""
    e.w(2, "// descriptors of slot 0 (start address >> 4 in the low bits: a slot adds its bytes >> 4)")
    a0 = "sA" if cfg.pingpong else f"sA + cw * {64 * 128}"
    e.w(2, f"const uint64_t desc_a0 = synth_desc_k128({a0}), desc_b0 = synth_desc_k128(sB);")
    # held, not rematerialized: otherwise ptxas may recompute them from sA / sB every k-tile (it did once the
    # split-K epilogue took uniform registers of its own)
    e.w(2, "synth_pin_u64(desc_a0);")
    e.w(2, "synth_pin_u64(desc_b0);")
    e.w(2, f"float acc[{cfg.row_blocks * cfg.bn // 2}];")


def _tile_roles(e: _Emit, cfg: Sm90Config, prod, cons) -> None:
    """The roles of a one-tile CTA (the non-persistent kernel, split-K included)."""
    e.w(1, "if (wg == 0) {")
    e.w(2, f"synth_setmaxnreg_dec<{40}>();")
    e.w(2, "if (wt == 0) {  // one elected thread issues the producer's statements")
    # each role reads its split where it needs it (as its tile): the producer before its loads; the
    # consumers before the loop only for T, and again after it, so that no split value lives across the
    # consumer loop (they would take uniform registers its descriptors need, and ptxas would recompute those)
    index = split_index_lines()
    split_lines = [*index, *split_range_lines("T", cfg.bk, all_tiles=False)] if cfg.split_k > 1 else []
    for line in split_lines:
        e.w(3, line)
    # each role computes its tile where it needs it (the producer before its loads, the consumers
    # before their epilogue): m0 and n0 live across no consumer main loop, whose SASS then keeps
    # the uniform registers it had
    tile = ["synth_tile"] if cfg.split_k > 1 else []
    for line in raster_lines(cfg.bm, cfg.bn, *tile):
        e.w(3, line)
    for pt in prod.parts:
        e.part(3, "producer", pt, prod.waits)
    e.w(2, "}")
    e.w(1, "} else {")
    e.w(2, f"synth_setmaxnreg_inc<{cfg.consumer_regs}>();")
    e.w(2, "const int cw = wg - 1;  // consumer warp group: rows cw * 64 .. + 63 of the tile")
    if cfg.split_k > 1:
        e.w(2, "int T;  // this split's k-tiles")
        e.w(2, "{")
        for line in index + split_range_lines("T_split", cfg.bk, all_tiles=False):
            e.w(3, line)
        e.w(3, "T = T_split;")
        e.w(2, "}")
    _consumer_registers(e, cfg)
    e.w(2, "#pragma unroll")
    e.w(2, f"for (int j = 0; j < {cfg.bn // 2}; ++j) acc[j] = 0.0f;")
    for pt in cons.parts:
        e.part(2, "consumer", pt, cons.waits)
    if cfg.split_k > 1:
        for line in index:
            e.w(2, line)
    for line in raster_lines(cfg.bm, cfg.bn, *tile):
        e.w(2, line)
    if cfg.split_k > 1:
        e.lines += _split_epilogue(cfg)
    elif e.store is not None:
        e.lines += _store_or_registers(cfg, e.store, "0u") + _store_drain(e.store)
    else:
        e.lines += _epilogue(cfg)
    e.w(1, "}")


def _store_unit(store, s) -> str:
    from ...hopper.store import UNITS

    if isinstance(s, (WaitStmt, CommitStmt)):
        return s.kind
    unit = store.op(s.op).unit
    if unit not in UNITS:
        raise ValueError(f"store program op {s.op}: unit {unit!r} is not one of {sorted(UNITS)}")
    return unit


def _store_wait(store, s) -> str:
    n = store.waits[s.wait].in_flight
    if not isinstance(n, Num) or not 0 <= n.value <= 7:
        raise ValueError(f"store program wait {s.wait}: in_flight {n} is not a constant 0..7")
    return f"if (wt == 0) synth_bulk_wait_read<{n.value}>();  // wait_group.read {n.value}: the slot's last store has read it"


def _store_slot(cfg: Sm90Config, acc) -> str:
    sub = 64 * cfg.store_cols * cfg.out_bytes
    return (f"sStage + (uint32_t)cw * {cfg.staging * sub}u + ((unsigned)({c_expr(acc.slot)}) % {cfg.staging}u) * "
            f"{sub}u")


_STAGE_WRITE = {"f32": "synth_st_shared_f32x2", "f16": "synth_st_shared_f16x2", "bf16": "synth_st_shared_bf16x2"}
"""The staging write of a pair of C values, by the element type C is stored in (f16 / bf16: rounded to nearest)."""


def _store_lines(cfg: Sm90Config, store, e0: str, rows: str = "cw * 64") -> list[str]:
    """The consumers' TMA-store epilogue of one tile: sub-tile ``jj`` (columns ``jj * W ..``) is the store
    program's body at ``i = e0 + jj``, each statement one line (module docstring of
    :mod:`synth.hopper.store`); lines indented as :func:`_epilogue`'s."""
    w = cfg.store_cols
    body = store.part("body")
    out = [
        f"    // ---- epilogue: TMA store, 64 x {w} f32 sub-tiles through {cfg.staging} staging slot(s) (store program)",
        "    const int lane = wt % 32, sr0 = (wt / 32) * 16 + lane / 4, sc0 = 2 * (lane % 4);",
        "#pragma unroll",
        f"    for (int jj = 0; jj < {cfg.bn // w}; ++jj) {{",
        f"      const unsigned {body.var} = {e0} + (unsigned)jj;  // the warp group's running sub-tile count",
    ]
    for s in body.stmts:
        unit = _store_unit(store, s)
        if unit == "wait":
            lines = [_store_wait(store, s)]
        elif unit == "commit":
            lines = ["if (wt == 0) synth_bulk_commit();"]
        elif unit == "bar_sync":
            lines = [f"synth_bar_sync({STORE_BARRIER} + cw, 128);  // {s.op}: the warp group's threads meet"]
        elif unit == "fence_proxy_async":
            lines = ["synth_fence_proxy_async();  // this thread's st.shared visible to the TMA store (async proxy)"]
        elif unit == "st_shared":
            (acc,) = s.writes
            lines = [
                "{",
                f"  const uint32_t dst = {_store_slot(cfg, acc)};",
                "#pragma unroll",
                f"  for (int q = 0; q < {w // 8}; ++q) {{",
                "#pragma unroll",
                "    for (int h = 0; h < 2; ++h) {",
                f"      const int r = sr0 + 8 * h, c = 8 * q + sc0, g = jj * {w // 8} + q;",
                "      float v0 = alpha * acc[4 * g + 2 * h], v1 = alpha * acc[4 * g + 2 * h + 1];",
                "      if (C_in != nullptr) {",
                f"        const int row = m0 + {rows} + r, col = n0 + jj * {w} + c;",
                "        if (row < M && col < N) v0 += beta * C_in[(size_t)row * ldc + col];",
                "        if (row < M && col + 1 < N) v1 += beta * C_in[(size_t)row * ldc + col + 1];",
                "      }",
                f"      {_STAGE_WRITE[cfg.out_dtype]}(dst + (uint32_t)(r * {w} + c) * {cfg.out_bytes}u, v0, v1);",
                "    }",
                "  }",
                "}",
            ]
        elif unit == "tma_store":
            (acc,) = s.reads
            lines = [f"if (wt == 0) synth_tma_store_2d(&tmC, {_store_slot(cfg, acc)}, n0 + jj * {w}, m0 + {rows});"
                     "  // out-of-range rows and columns clipped by the tensor map"]
        else:
            raise ValueError(f"store program op {s.op} of unit {unit} cannot run per sub-tile")
        if s.guard is not None:
            lines = [f"if ({c_expr(s.guard)}) {{"] + ["  " + ln for ln in lines] + ["}"]
        out += ["      " + ln if not ln.startswith("#") else ln for ln in lines]
    out.append("    }")
    return out


def _store_or_registers(cfg: Sm90Config, store, e0: str, rows: str = "cw * 64") -> list[str]:
    """A TMA-store kernel's C of one tile (lines indented as :func:`_epilogue`'s): the store program's sub-tiles
    (:func:`_store_lines`) when this launch's C is TMA-aligned (``synth_c_tma``, uniform over the launch), else
    the register epilogue's lines (:func:`_epilogue`, in ``cfg.out_dtype``): no staging write, no bulk group,
    so the store program runs no sub-tile in such a launch and its final ``wait_group.read 0`` waits for
    nothing (docs/hopper_store.md, "C not TMA-aligned")."""
    def inner(lines: list[str]) -> list[str]:
        return ["  " + ln if not ln.startswith("#") else ln for ln in lines]
    return [
        "    if (synth_c_tma(C, ldc)) {  // this launch's C is TMA-aligned: the store program's sub-tiles",
        *inner(_store_lines(cfg, store, e0, rows=rows)),
        "    } else {  // C's base or row stride is not a multiple of 16 bytes: register stores, bounds-checked",
        *inner(_epilogue(cfg, rows=rows, out_dtype=cfg.out_dtype)),
        "    }",
    ]


def _store_drain(store) -> list[str]:
    """The store program's parts after the body, at the consumer's end (after its last tile): waits only."""
    out = ["    // ---- after the last tile: every TMA store has read its staging slot before the CTA exits"]
    for pt in store.parts[1:]:
        if not isinstance(pt.extent, Num):
            raise ValueError(f"store program part {pt.name}: extent {pt.extent} is not a constant")
        for c in range(pt.extent.value):
            env = {pt.var: c}
            for s in pt.stmts:
                unit = _store_unit(store, s)
                if s.guard is not None and not evaluate(s.guard, env):
                    continue
                if unit == "wait":
                    out.append("    " + _store_wait(store, s))
                else:
                    raise ValueError(f"store program {pt.name}: only waits run after the last tile")
    return out


def _split_epilogue(cfg: Sm90Config) -> list[str]:
    """Split-K (docs/hopper_kernel.md): the consumers learn whether their CTA arrived last at the tile
    (one thread counts it, ``bar.red.or`` tells the others); the others store their partial tile (after
    ``alpha``, in tile rows: 16-byte ``st.global.cg``), release it and count it; the last waits for
    their count and runs the epilogue with each vector summed in split order."""
    ct = 128 * cfg.consumers
    one = "cw == 0 && wt == 0"
    return [
        "    // ---- split-K (synth.emit.splitk): the tile's last CTA to arrive sums the partials in split order",
        "    unsigned* const counters = tickets + 2 * synth_tile;  // [0] CTAs arrived, [1] partials published",
        f"    float* const ws_tile = workspace + (size_t)synth_tile * SYNTH_SPLIT_K * {cfg.bm * cfg.bn};",
        "    bool arrived_last = false;",
        f"    if ({one}) arrived_last = synth_atomic_add_u32(counters, 1u) == SYNTH_SPLIT_K - 1;",
        f"    const bool last = synth_bar_red_or({SPLIT_BARRIER}, {ct}, arrived_last);",
        "    if (!last) {  // store this split's partial tile, release it, count it",
        *("  " + line for line in _epilogue(cfg, "partial")),
        "      synth_threadfence();  // release: this thread's partials before the count",
        f"      synth_bar_sync({SPLIT_BARRIER}, {ct});  // every consumer thread's partials are fenced",
        f"      if ({one}) synth_atomic_add_u32(counters + 1, 1u);  // published",
        "    } else {",
        f"      if ({one}) {{",
        "        // the other CTAs of the tile arrived before this one and after arriving only store and count:",
        "        // this wait ends whatever the launch order or residency",
        "        while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {",
        "        }",
        "        counters[0] = 0u;  // zeroed for the next launch: no CTA of this tile touches them again",
        "        counters[1] = 0u;",
        "      }",
        f"      synth_bar_sync({SPLIT_BARRIER}, {ct});",
        "      synth_threadfence();  // acquire: the other splits' partials after their count",
        *("  " + line for line in _epilogue(cfg, "fold")),
        "    }",
    ]


def _epilogue(cfg: Sm90Config, split: str = "", rows: str = "cw * 64", out_dtype: str = "f32") -> list[str]:
    """C = alpha acc (+ beta C_in): lanes of a pair swap halves so each holds 4 consecutive
    columns of one row (one 128-bit store); ragged or unaligned edges store per element.
    ``split`` ``partial``: store each vector inside C to this split's workspace slot instead;
    ``fold``: first replace it by the split-order sum of every split's (:func:`synth.emit.splitk.fold_lines`).
    ``out_dtype`` ``f16`` / ``bf16`` (a TMA-store kernel's launch whose C is not TMA-aligned): C holds 2-byte
    elements (row stride ``ldc`` of them), each stored on its own, rounded to nearest even."""
    head = [
        "    // ---- epilogue: quad pairs exchange so each lane owns 4 consecutive columns of one row",
        "    const int lane = wt % 32, odd = lane & 1;",
        f"    const int row = m0 + {rows} + (wt / 32) * 16 + lane / 4 + (odd ? 8 : 0);",
    ]
    loop = [
        "#pragma unroll",
        f"    for (int j = 0; j < {cfg.bn // 8}; ++j) {{",
        "      // alpha first: ptxas serializes every wgmma when a shfl reads an accumulator register",
        "      const float a0 = alpha * acc[4 * j], a1 = alpha * acc[4 * j + 1];",
        "      const float a2 = alpha * acc[4 * j + 2], a3 = alpha * acc[4 * j + 3];",
        "      const float r0 = synth_shfl_xor(odd ? a0 : a2, 1), r1 = synth_shfl_xor(odd ? a1 : a3, 1);",
        "      float v[4];",
        "      if (odd) { v[0] = r0; v[1] = r1; v[2] = a2; v[3] = a3; }",
        "      else { v[0] = a0; v[1] = a1; v[2] = r0; v[3] = r1; }",
        "      const int col = n0 + 8 * j + 4 * ((lane % 4) / 2);",
    ]
    if split == "partial":
        return head + loop + [
            "      if (row >= M || col >= N) continue;",
            f"      synth_st_cg_f32x4(ws_tile + (size_t)split * {cfg.bm * cfg.bn} + (size_t)(row - m0) * {cfg.bn} + "
            "(col - n0), v[0], v[1], v[2], v[3]);",
            "    }",
        ]
    fold = []
    if split == "fold":
        fold = [
            "      if (col < N) {  // split-K: p0 + p1 + ... in split order: the same bits whichever CTA is last",
            f"        const float* const wp = ws_tile + (size_t)(row - m0) * {cfg.bn} + (col - n0);",
            "        float s[4], w[4];",
            "        if (split == 0) { s[0] = v[0]; s[1] = v[1]; s[2] = v[2]; s[3] = v[3]; }",
            "        else synth_ld_cg_f32x4(s, wp);",
            "#pragma unroll",
            "        for (int z = 1; z < SYNTH_SPLIT_K; ++z) {",
            "          if (z == split) { w[0] = v[0]; w[1] = v[1]; w[2] = v[2]; w[3] = v[3]; }",
            f"          else synth_ld_cg_f32x4(w, wp + (size_t)z * {cfg.bm * cfg.bn});",
            "          s[0] += w[0]; s[1] += w[1]; s[2] += w[2]; s[3] += w[3];",
            "        }",
            "        v[0] = s[0]; v[1] = s[1]; v[2] = s[2]; v[3] = s[3];",
            "      }",
        ]
    if out_dtype != "f32":
        store = {"f16": "synth_st_global_f16", "bf16": "synth_st_global_bf16"}[out_dtype]
        return head + loop + [
            "      if (row >= M) continue;",
            "      unsigned short* out = reinterpret_cast<unsigned short*>(C) + (size_t)row * ldc + col;",
            "      const float* in = C_in == nullptr ? nullptr : C_in + (size_t)row * ldc + col;",
            "      for (int e = 0; e < 4; ++e)",
            f"        if (col + e < N) {store}(out + e, v[e] + (in != nullptr ? beta * in[e] : 0.0f));",
            "    }",
        ]
    return head + [
        "    const bool vec = (ldc % 4) == 0 && ((reinterpret_cast<uintptr_t>(C) & 15) == 0) &&",
        "                     (C_in == nullptr || (reinterpret_cast<uintptr_t>(C_in) & 15) == 0);",
    ] + loop + [
        "      if (row >= M) continue;",
    ] + fold + [
        "      float* out = C + (size_t)row * ldc + col;",
        "      const float* in = C_in == nullptr ? nullptr : C_in + (size_t)row * ldc + col;",
        "      if (vec && col + 3 < N) {",
        "        float4 c4 = make_float4(0.f, 0.f, 0.f, 0.f);",
        "        if (in != nullptr) c4 = synth_ldg4(in);",
        "        synth_stg4(out, v[0] + beta * c4.x, v[1] + beta * c4.y, v[2] + beta * c4.z, v[3] + beta * c4.w);",
        "      } else {",
        "        for (int e = 0; e < 4; ++e)",
        "          if (col + e < N) out[e] = v[e] + (in != nullptr ? beta * in[e] : 0.0f);",
        "      }",
        "    }",
    ]


def emit_proven(cfg: Sm90Config, *, time_limit: float = 60.0, carry=None):
    """``(kernel.cu text, report)`` for ``cfg.program()`` once it is proven for every ``T >= 1``: by
    :func:`synth.verify.phases.verify_hopper` (a ``HopperReport``), or for a cluster by
    :func:`synth.hopper.cluster.verify_cluster` (a ``ClusterReport``: the barrier classes of every CTA's roles and
    the cluster classes); a persistent ``cfg`` also needs the tile carry of every role (of every CTA) that the
    kernel is emitted with (``carry``, role or role kind -> :class:`synth.hopper.persistent.TileCarry`; default the
    running count) proven by :func:`synth.hopper.persistent.check_carry`. SynthError naming what is refuted
    otherwise (nothing emitted)."""
    from ...errors import SynthError
    from ...verify.phases import verify_hopper

    p = cfg.program()
    if cfg.cluster_size > 1:  # the barrier classes of the whole cluster and the cluster classes
        from ...verify.hopper_cluster import verify_cluster

        report = verify_cluster(p, time_limit=time_limit, tightness=False)
    else:
        report = verify_hopper(p, time_limit=time_limit, tightness=False)
    if not report.ok:
        raise SynthError(None, f"the Hopper program of {cfg} is not proven:\n{report.render()}",
                         "use another configuration or raise the time limit")
    if cfg.persistent:  # each tile's state carried from the previous one, for every role of every CTA
        from ...verify.hopper_persistent import check_carry

        ok, why = check_carry(p, dict(carry or {}), time_limit=time_limit)
        if not ok:
            raise SynthError(None, f"the tile carry of the persistent kernel of {cfg} is not proven: {why}",
                             "emit the kernel with the running count's carry (carry=None)")
    return emit_sm90_kernel(cfg, p, carry=carry), report


__all__ = ["emit_sm90_kernel", "emit_proven", "KERNEL", "SCHEDULERS"]

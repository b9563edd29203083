"""The base device functions of the sm_90a kernel: the inline PTX every design declares outside the emulator.

Under ``-DSYNTH_EMULATE`` the kernel includes ``runtime/synth_emu_sm90.h`` instead, which defines the same names.
A part that needs more brings its own (:data:`synth.emit.sm90.cluster.CLUSTER_PTX`,
:data:`synth.emit.sm90.epilogue.STORE_PTX`, the wgmma of :mod:`synth.emit.sm90.mainloop`).
"""

BASE_PTX = r"""
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
"""Shared-memory addresses, mbarriers, TMA loads, wgmma fences and groups, ``setmaxnreg``, shuffles, global stores
and loads, named barriers, the split-K reduction's atomics and acquire loads."""

__all__ = ["BASE_PTX"]

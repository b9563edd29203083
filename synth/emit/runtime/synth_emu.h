// synth_emu.h -- CPU emulation of the CUDA subset that synth's cp.async GEMM
// kernels use, with ADVERSARIAL cp.async semantics (docs/emulator.md).
//
// A kernel.cu written for the GPU (docs/cuda_kernel.md) compiles with g++
// against this header when SYNTH_EMULATE is defined:
//
//     g++ -std=c++20 -O2 -pthread -DSYNTH_EMULATE -I<this dir> emu_harness.cpp synth_emu_runtime.o
//
// This header is deliberately light (only <stdint.h>, <stddef.h>, <string.h>):
// the device API is declared here and implemented in synth_emu_runtime.cpp,
// which synth/emit/emulate.py compiles once and caches, so each kernel
// compiles in about a second.
//
// Provided: synth_cp_async_16, synth_cp_async_commit, synth_cp_async_wait<N>,
// synth_syncthreads (and __syncthreads), synth_ldmatrix_x4, synth_mma_16816,
// synth_lane_id, synth_threadfence, synth_st_cg_f32x4, synth_ld_cg_f32x4,
// synth_atomic_add_u32, synth_ld_acquire_u32 (split-K), threadIdx / blockIdx / blockDim / gridDim, half, __global__,
// __shared__, __align__, __device__, __forceinline__, SYNTH_DEVICE, the
// dynamic shared buffer `synth_smem`, and for hand-written kernels
// synth_lds<T> / synth_sts<T> (instrumented shared loads/stores) and
// synth_emu_region(r) (0: other, 1: main loop; splits the bank-conflict counts).
//
// How it bites (details in docs/emulator.md):
//   * every thread of a block is a real std::thread; by default a
//     deterministic scheduler serializes them: one warp runs until it blocks
//     at a block barrier before the next starts ("forward" / "reverse"), or
//     warps take turns at every warp-collective op ("interleave");
//     "parallel" runs them concurrently;
//   * cp.async poisons its 16 destination bytes at issue (0xFF = f16 NaN); the
//     data lands only when a wait_group of the issuing thread forces its group;
//   * shadow state per 16-byte chunk of shared memory reports early reads,
//     unsynchronized reads, write-after-read and write-after-write hazards;
//   * bank conflicts of ldmatrix, cp.async and instrumented loads/stores.
//
// Limits: blocks run one after another (one shared buffer); static
// `__shared__` arrays are not supported (use the dynamic buffer); plain C++
// loads/stores of shared memory are not instrumented (poison still shows).
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// ---------------------------------------------------------------------------
// CUDA spellings
// ---------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define SYNTH_DEVICE inline

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/// 16-bit storage type: the kernel only moves its bits.
struct __align__(2) half {
  uint16_t bits;
};
using __half = half;

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

#define SYNTH_EMU_SMEM_MAX (256 * 1024)
/// The shared memory of the block being run (blocks run one at a time). The
/// kernel's `extern __shared__ __align__(16) unsigned char synth_smem[];`
/// redeclares this array.
extern __attribute__((aligned(128))) unsigned char synth_smem[SYNTH_EMU_SMEM_MAX];

namespace synth_emu {

// ---------------------------------------------------------------------------
// f16 <-> f32 (bit exact, round to nearest even)
// ---------------------------------------------------------------------------
inline float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f2h(float f) {  // round to nearest even
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // overflow (>= 65520) or inf
  if (ax < 0x38800000u) {                         // subnormal or zero in f16
    if (ax < 0x33000000u) return sign;            // < 2^-25 rounds to 0
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 + (112 - e) + 1 ... maps to 10-bit subnormal
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1))) ++r;
    return sign | (uint16_t)r;
  }
  uint32_t r = ((ax >> 13) - (112u << 10));
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return sign | (uint16_t)r;
}

// ---------------------------------------------------------------------------
// Entry points of the runtime (synth_emu_runtime.cpp)
// ---------------------------------------------------------------------------
void wait_group(int n);
void lds(void* out, const void* smem, int bytes);
void sts(void* smem, const void* in, int bytes);
using Body = void (*)(void*);
/// Run body(closure) as every thread of every block of the grid.
void launch_erased(Body body, void* closure, dim3 grid, dim3 block, size_t smem_bytes);

template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem_bytes, A... args) {
  auto run = [&]() { kernel(args...); };
  launch_erased([](void* c) { (*static_cast<decltype(run)*>(c))(); }, &run, grid, block, smem_bytes);
}

/// Host side of emu_harness.cpp: reads RUN_DIR/launch.txt, owns the buffers,
/// writes the outputs and stats.json.
class Runner {
 public:
  Runner(int argc, char** argv);
  ~Runner();
  template <class T>
  T* buf(size_t i) {
    return static_cast<T*>(buf_ptr(i, sizeof(T)));
  }
  int i32(size_t i);
  float f32(size_t i);
  template <class... P, class... A>
  void launch(void (*kernel)(P...), A... args) {
    auto run = [&]() { kernel(args...); };
    launch_body([](void* c) { (*static_cast<decltype(run)*>(c))(); }, &run);
  }
  int finish();

 private:
  void* buf_ptr(size_t i, size_t elem);
  void launch_body(Body body, void* closure);
  struct Impl;
  Impl* impl_;
};

}  // namespace synth_emu

// ---------------------------------------------------------------------------
// The device API (docs/cuda_kernel.md)
// ---------------------------------------------------------------------------
/// %laneid of the calling thread.
uint32_t synth_lane_id();
/// 0: outside the main loop, 1: inside (bank conflicts are reported per region).
void synth_emu_region(int r);
/// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copy src_bytes
/// (0..16) bytes and zero-fill the rest. The destination is poisoned now; the
/// data lands when a wait_group of this thread forces its group.
void synth_cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes);
/// cp.async.commit_group: close the open group (possibly empty).
void synth_cp_async_commit();
/// cp.async.wait_group N: complete this thread's oldest committed groups until
/// at most N are in flight (and no more: data lands as late as allowed).
template <int N>
inline void synth_cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes N >= 0");
  synth_emu::wait_group(N);
}
/// __syncthreads(): block barrier.
void synth_syncthreads();
inline void __syncthreads() { synth_syncthreads(); }
/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l supplies the address of
/// row l%8 of matrix l/8; r[m] receives row lane/4, columns 2*(lane%4)+{0,1}
/// of matrix m (lower 16 bits: the even column).
void synth_ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_addr);
/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: d = a * b + c (c and d may alias).
void synth_mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);

/// Instrumented shared load (2, 4, 8 or 16 bytes): checks early and
/// unsynchronized reads, counts bank conflicts.
template <class T>
inline T synth_lds(const T* p) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "2/4/8/16-byte loads");
  T v;
  synth_emu::lds(&v, p, (int)sizeof(T));
  return v;
}
/// Instrumented shared store.
template <class T>
inline void synth_sts(T* p, T v) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "2/4/8/16-byte stores");
  synth_emu::sts(p, &v, (int)sizeof(T));
}

/// __threadfence() (membar.gl). The emulator checks the split-K protocol with it: a block's
/// global stores are fenced before the count that publishes them (release), and another block's
/// stores are read only after this block observed that count and fenced (acquire).
void synth_threadfence();
/// st.global.cg.v4.f32 [p], {a, b, c, d} (16-byte aligned, inside a global buffer).
void synth_st_cg_f32x4(float* p, float a, float b, float c, float d);
/// ld.global.cg.v4.f32 {r}, [p].
void synth_ld_cg_f32x4(float (&r)[4], const float* p);
/// atomicAdd(p, v) on a 32-bit unsigned in global memory: the old value.
unsigned synth_atomic_add_u32(unsigned* p, unsigned v);
/// ld.acquire.gpu.u32 [p]: adversarially the oldest value of the counter this thread has not yet seen.
unsigned synth_ld_acquire_u32(const unsigned* p);
/// The block's index in launch order (blockIdx.x fastest).
inline int synth_block_linear() { return (int)((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x); }

inline float __half2float(half h) { return synth_emu::h2f(h.bits); }
inline half __float2half(float f) { return half{synth_emu::f2h(f)}; }
inline half __float2half_rn(float f) { return half{synth_emu::f2h(f)}; }

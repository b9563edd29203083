// synth portability layer, CUDA side (pasted into kernel.cu by synth/emit/cuda.py).
// The CPU emulator (synth_emu.h) defines the same names when SYNTH_EMULATE is set.
// Contract: docs/cuda_kernel.md, section 1.
#include <cuda_fp16.h>

#define SYNTH_DEVICE __device__ __forceinline__
#define SYNTH_UNROLL _Pragma("unroll")
#define SYNTH_NO_UNROLL _Pragma("unroll 1")
#define SYNTH_LAUNCH_BOUNDS(n) __launch_bounds__(n, 1)

// Shared-memory address of a generic pointer (PTX state-space address).
SYNTH_DEVICE uint32_t synth_smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async.cg: 16 bytes, src_bytes of them read from global, the rest zero-filled.
SYNTH_DEVICE void synth_cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(synth_smem_addr(smem_dst)), "l"(gmem_src), "r"(src_bytes)
               : "memory");
}

SYNTH_DEVICE void synth_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
SYNTH_DEVICE void synth_cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group needs a non-negative count");
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

SYNTH_DEVICE void synth_syncthreads() { __syncthreads(); }

SYNTH_DEVICE void synth_ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(synth_smem_addr(smem_row_addr))
               : "memory");
}

// d may alias c: all of c is read (as inputs) before d is written.
SYNTH_DEVICE void synth_mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                  const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

SYNTH_DEVICE uint32_t synth_lane_id() {
  uint32_t l;
  asm("mov.u32 %0, %%laneid;\n" : "=r"(l));
  return l;
}

// Split-K (docs/cuda_kernel.md, "Split-K"): the partial tiles go through the L2 (.cg: never a
// stale L1 line), published by a fence and a count, read after an acquiring load of that count.
SYNTH_DEVICE void synth_threadfence() { __threadfence(); }

SYNTH_DEVICE void synth_st_cg_f32x4(float* p, float a, float b, float c, float d) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

SYNTH_DEVICE void synth_ld_cg_f32x4(float (&r)[4], const float* p) {
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3]) : "l"(p) : "memory");
}

SYNTH_DEVICE unsigned synth_atomic_add_u32(unsigned* p, unsigned v) { return atomicAdd(p, v); }

// The CTA's index in launch order (blockIdx.x fastest), read afresh: volatile, so the compiler neither
// merges it with an earlier read nor keeps that value live across the main loop.
SYNTH_DEVICE int synth_block_linear() {
  unsigned x, y, z, nx, ny;
  asm volatile("mov.u32 %0, %%ctaid.x;\n mov.u32 %1, %%ctaid.y;\n mov.u32 %2, %%ctaid.z;\n"
               " mov.u32 %3, %%nctaid.x;\n mov.u32 %4, %%nctaid.y;\n"
               : "=r"(x), "=r"(y), "=r"(z), "=r"(nx), "=r"(ny));
  return (int)((z * ny + y) * nx + x);
}

SYNTH_DEVICE unsigned synth_ld_acquire_u32(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Plain shared-memory load and store (the emulator instruments them: synth_emu.h).
template <class T>
SYNTH_DEVICE T synth_lds(const T* p) { return *p; }
template <class T>
SYNTH_DEVICE void synth_sts(T* p, T v) { *p = v; }

// Emulator self-test: ldmatrix.x4 and mma.m16n8k16 fragment layouts (one warp).
//
// ldmatrix_raw: lane l passes row l%8 of matrix l/8 of a 32x8 f16 matrix M
//   (matrix q = rows 8q..8q+7) and writes back its four registers R[l][q].
// mma_tile: A 16x16 and B 8x16 (n x k) row-major go to shared memory by
//   cp.async, A and B fragments come from ldmatrix.x4, one mma gives
//   D = A * B^T + Cin (16x8), written back row-major.
#include <stdint.h>
#ifdef SYNTH_EMULATE
#include "synth_emu.h"
#else
#error "emulator self-test kernel: the CUDA definitions of the API live in synth_cuda_api.h"
#endif

extern "C" __global__ void ldmatrix_raw(const half* M, uint32_t* R) {
  extern __shared__ __align__(16) unsigned char synth_smem[];
  const int lane = (int)synth_lane_id();
  synth_cp_async_16(synth_smem + lane * 16, M + lane * 8, 16);  // row `lane` of M
  synth_cp_async_commit();
  synth_cp_async_wait<0>();
  synth_syncthreads();
  uint32_t r[4];
  synth_ldmatrix_x4(r, synth_smem + ((lane / 8) * 8 + lane % 8) * 16);
  for (int q = 0; q < 4; ++q) R[lane * 4 + q] = r[q];
}

extern "C" __global__ void mma_tile(const half* A, const half* B, const float* Cin, float* D) {
  extern __shared__ __align__(16) unsigned char synth_smem[];
  half* As = (half*)synth_smem;          // 16 x 16 f16, 512 bytes
  half* Bs = (half*)(synth_smem + 512);  // 8 x 16 f16 (n x k), 256 bytes
  const int lane = (int)synth_lane_id();
  synth_cp_async_16(As + lane * 8, A + lane * 8, 16);
  if (lane < 16) synth_cp_async_16(Bs + lane * 8, B + lane * 8, 16);
  synth_cp_async_commit();
  synth_cp_async_wait<0>();
  synth_syncthreads();
  const int q = lane / 8, r = lane % 8;
  // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3
  uint32_t a[4];
  synth_ldmatrix_x4(a, As + ((q % 2) * 8 + r) * 16 + (q / 2) * 8);
  // B stored n x k: matrix (n 0-7, k 0-7) is b0, (n 0-7, k 8-15) is b1; q = 2, 3 repeat them
  uint32_t bb[4];
  synth_ldmatrix_x4(bb, Bs + r * 16 + (q % 2) * 8);
  uint32_t b[2] = {bb[0], bb[1]};
  const int g = lane / 4, t = lane % 4;
  float acc[4] = {Cin[g * 8 + 2 * t], Cin[g * 8 + 2 * t + 1], Cin[(g + 8) * 8 + 2 * t], Cin[(g + 8) * 8 + 2 * t + 1]};
  synth_mma_16816(acc, a, b, acc);  // c and d alias, as in the generated kernels
  D[g * 8 + 2 * t] = acc[0];
  D[g * 8 + 2 * t + 1] = acc[1];
  D[(g + 8) * 8 + 2 * t] = acc[2];
  D[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

// Emulator self-test: faults the emulator must report (never crash on).
//
//   mode 1: cp.async destination outside the dynamic shared buffer
//   mode 2: cp.async source outside every global buffer
//   mode 3: half of the warp skips an ldmatrix (divergent warp-collective op)
//   mode 4: warp 1 returns before the __syncthreads warp 0 waits at (allowed,
//           exited threads count as arrived; reported as a warning)
//   mode 5: a global store past the end of `out` (guard bytes)
//   mode 6: cp.async destination not 16-byte aligned
//   mode 0: nothing wrong
#include <stdint.h>
#ifdef SYNTH_EMULATE
#include "synth_emu.h"
#else
#error "emulator self-test kernel: the CUDA definitions of the API live in synth_cuda_api.h"
#endif

extern "C" __global__ void faults(const half* src, float* out, int mode, int smem_bytes) {
  extern __shared__ __align__(16) unsigned char synth_smem[];
  const int tid = (int)threadIdx.x;
  const int lane = (int)synth_lane_id();
  unsigned char* dst = synth_smem + (tid % 8) * 16;
  const half* from = src + (tid % 8) * 8;
  if (mode == 1 && tid == 5) dst = synth_smem + smem_bytes;
  if (mode == 2 && tid == 7) from = src + 4096;
  if (mode == 6 && tid == 3) dst = synth_smem + 8;
  synth_cp_async_16(dst, from, 16);
  synth_cp_async_commit();
  synth_cp_async_wait<0>();
  if (mode == 4 && tid >= 32) return;
  synth_syncthreads();
  uint32_t r[4] = {0, 0, 0, 0};
  if (!(mode == 3 && lane >= 16)) synth_ldmatrix_x4(r, synth_smem + (lane % 8) * 16);
  out[tid] = (float)(r[0] & 0xff);
  if (mode == 5 && tid == 0) out[blockDim.x + 3] = 1.0f;
}

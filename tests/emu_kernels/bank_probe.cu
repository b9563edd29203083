// Emulator self-test: bank-conflict counting.
//
// One warp. rows[0..31] are byte offsets (16-byte aligned) into shared memory:
//   cp.async: lane l copies 16 bytes to rows[l];
//   ldmatrix: lane l supplies rows[l] as its row address;
//   synth_lds<uint32_t>: lane l loads 4 bytes at words[l] (byte offsets).
// The main loop (region 1) repeats the ldmatrix `reps` times.
#include <stdint.h>
#ifdef SYNTH_EMULATE
#include "synth_emu.h"
#else
#error "emulator self-test kernel: the CUDA definitions of the API live in synth_cuda_api.h"
#endif

extern "C" __global__ void bank_probe(const int* rows, const int* words, const half* src, uint32_t* out, int reps) {
  extern __shared__ __align__(16) unsigned char synth_smem[];
  const int lane = (int)synth_lane_id();
  synth_emu_region(0);
  synth_cp_async_16(synth_smem + rows[lane], src + lane * 8, 16);
  synth_cp_async_commit();
  synth_cp_async_wait<0>();
  synth_syncthreads();
  uint32_t acc = 0;
  synth_emu_region(1);
  for (int i = 0; i < reps; ++i) {
    uint32_t r[4];
    synth_ldmatrix_x4(r, synth_smem + rows[lane]);
    acc += r[0] ^ r[1] ^ r[2] ^ r[3];
  }
  synth_emu_region(0);
  acc += synth_lds((const uint32_t*)(synth_smem + words[lane]));
  out[lane] = acc;
}

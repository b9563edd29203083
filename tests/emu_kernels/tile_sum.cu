// Emulator self-test: a STAGES-deep cp.async pipeline that sums T tiles.
//
// X holds T tiles of 4096 bytes (2048 f16); Y[e] = sum over tiles of X[t][e]
// (f32). 128 threads (4 warps); thread `tid` copies chunks tid and tid + 128
// of each tile and reads chunks tid + 64 and tid + 192 (mod 256), which other
// warps copied, so a missing barrier or a short wait shows.
//
// Knobs (-D): STAGES (buffers), DIST (prefetch distance, default STAGES - 1),
// SLACK (added to the wait count; 0 is tight), SYNC (the barrier after the
// wait), PLAIN (plain C++ loads instead of instrumented synth_lds),
// NO_LAST_COMMIT (skip the final commit: an uncommitted group at exit).
#include <stdint.h>
#ifdef SYNTH_EMULATE
#include "synth_emu.h"
#else
#error "emulator self-test kernel: the CUDA definitions of the API live in synth_cuda_api.h"
#endif

#ifndef STAGES
#define STAGES 3
#endif
#ifndef DIST
#define DIST (STAGES - 1)
#endif
#ifndef SLACK
#define SLACK 0
#endif
#ifndef SYNC
#define SYNC 1
#endif
#ifndef PLAIN
#define PLAIN 0
#endif
#ifndef NO_LAST_COMMIT
#define NO_LAST_COMMIT 0
#endif

struct __align__(16) Chunk16 {
  uint16_t h[8];
};

extern "C" __global__ void tile_sum(const half* X, float* Y, int T) {
  extern __shared__ __align__(16) unsigned char synth_smem[];
  const int tid = (int)threadIdx.x;
  auto issue = [&](int tile) {
    unsigned char* slot = synth_smem + (tile % STAGES) * 4096;
    for (int i = 0; i < 2; ++i) {
      int ch = tid + 128 * i;
      bool in = tile < T;  // past the end: zero-fill from an in-bounds address
      synth_cp_async_16(slot + ch * 16, X + (size_t)(in ? tile : 0) * 2048 + ch * 8, in ? 16 : 0);
    }
  };
  float acc[2][8] = {};
  synth_emu_region(0);
  for (int s = 0; s < DIST; ++s) {
    issue(s);
    synth_cp_async_commit();
  }
  synth_emu_region(1);
  for (int k = 0; k < T; ++k) {
    synth_cp_async_wait<DIST - 1 + SLACK>();
#if SYNC
    synth_syncthreads();
#endif
    const unsigned char* slot = synth_smem + (k % STAGES) * 4096;
    for (int i = 0; i < 2; ++i) {
      int ch = (tid + 64 + 128 * i) % 256;
#if PLAIN
      Chunk16 v = *(const Chunk16*)(slot + ch * 16);
#else
      Chunk16 v = synth_lds((const Chunk16*)(slot + ch * 16));
#endif
      for (int e = 0; e < 8; ++e) acc[i][e] += __half2float(half{v.h[e]});
    }
    issue(k + DIST);
#if NO_LAST_COMMIT
    if (k + 1 < T)
#endif
      synth_cp_async_commit();
  }
  synth_emu_region(0);
  for (int i = 0; i < 2; ++i) {
    int ch = (tid + 64 + 128 * i) % 256;
    for (int e = 0; e < 8; ++e) Y[ch * 8 + e] = acc[i][e];
  }
}

// Probes of the sm_80 emulator's warp-collective ops (synth/emit/runtime/synth_emu_runtime.cpp), run by
// tests/test_cute_layouts.py through synth.emit.emulate.compile_and_run (one warp) and compared with CuTe.
//
// ldsm_probe: M is 32 rows x 8 f16 (row s = what lane s points at); lane l passes the address of row l
//   to ldmatrix.x4 and writes back its four registers R[l][q].
// mma_probe: `n` experiments; in experiment e lane l loads its A, B and C registers from Areg, Breg,
//   Creg (e, lane, register), runs one mma.sync m16n8k16 and writes D[e][lane][0..3].
#include <stdint.h>
#ifdef SYNTH_EMULATE
#include "synth_emu.h"
#else
#error "emulator probe: runs on synth's CPU emulator"
#endif

extern "C" __global__ void ldsm_probe(const half* M, uint32_t* R) {
  extern __shared__ __align__(16) unsigned char synth_smem[];
  const int lane = (int)synth_lane_id();
  synth_cp_async_16(synth_smem + lane * 16, M + lane * 8, 16);
  synth_cp_async_commit();
  synth_cp_async_wait<0>();
  synth_syncthreads();
  uint32_t r[4];
  synth_ldmatrix_x4(r, synth_smem + lane * 16);
  for (int q = 0; q < 4; ++q) R[lane * 4 + q] = r[q];
}

extern "C" __global__ void mma_probe(const uint32_t* Areg, const uint32_t* Breg, const float* Creg, float* D, int n) {
  const int lane = (int)synth_lane_id();
  for (int e = 0; e < n; ++e) {
    const int at = e * 32 + lane;
    uint32_t a[4] = {Areg[at * 4], Areg[at * 4 + 1], Areg[at * 4 + 2], Areg[at * 4 + 3]};
    uint32_t b[2] = {Breg[at * 2], Breg[at * 2 + 1]};
    float c[4] = {Creg[at * 4], Creg[at * 4 + 1], Creg[at * 4 + 2], Creg[at * 4 + 3]};
    float d[4];
    synth_mma_16816(d, a, b, c);
    for (int i = 0; i < 4; ++i) D[at * 4 + i] = d[i];
  }
}

// A hand-written cluster GEMM for the sm_90a emulator's cluster tests (tests/hopper/test_emu_cluster.py):
// the cluster API of kernel.cu used directly. SYNTH_CLUSTER_M CTAs along M (grid y) share the B tile: each
// CTA's producer loads its own A tile and its 1 / SYNTH_CLUSTER_M part of B, multicast into every CTA of the
// cluster; each CTA's full barrier expects its whole tile, each empty barrier counts the consumer warp group of
// every CTA (remote arrives through mapa). The environment variable SYNTH_TEST_BUG (read at run time, so that
// one binary runs every variant) injects one bug:
//   no_cluster_sync  the setup's cluster barrier replaced by __syncthreads
//   no_fence         no fence.mbarrier_init after the inits
//   early_exit       no cluster barrier before exit
//   mask_own         the multicast mask names the issuing CTA only
//   consumer_short   the consumers stop one k-tile early: the peer's last multicast is never waited for
//   mask_wide        the multicast mask names a CTA beyond the cluster
//   mapa_outside     the remote release maps its barrier into a CTA rank beyond the cluster
//   wait_remote      the consumers wait on the peer's full barrier (try_wait takes only the own CTA's)
#define SYNTH_BM 64
#define SYNTH_BN 64
#define SYNTH_BK 64
#define SYNTH_THREADS 256
#ifndef SYNTH_CLUSTER_M
#define SYNTH_CLUSTER_M 2
#endif
#define SYNTH_CLUSTER_N 1
#define SYNTH_B_BOX_ROWS (SYNTH_BN / SYNTH_CLUSTER_M)
#define STAGES 2
#include "synth_emu_sm90.h"

SYNTH_DEV uint64_t desc_k128(uint32_t a) {
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

static bool bug(const char* name) {
  const char* b = std::getenv("SYNTH_TEST_BUG");
  return b != nullptr && std::strcmp(b, name) == 0;
}

extern "C" __global__ void __launch_bounds__(SYNTH_THREADS, 1)
synth_gemm_sm90(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                float* __restrict__ C, const float* __restrict__ C_in, int M, int N, int K, int ldc,
                float alpha, float beta) {
  extern __shared__ unsigned char synth_smem_raw[];
  unsigned char* smem = synth_smem_raw + ((1024 - (synth_smem_u32(synth_smem_raw) & 1023)) & 1023);
  constexpr uint32_t SLOT = 64 * 128, PART = SYNTH_B_BOX_ROWS * 128;  // a tile's slot, B's part per CTA
  const uint32_t sA = synth_smem_u32(smem), sB = sA + STAGES * SLOT;
  const uint32_t bar_full = sB + STAGES * SLOT, bar_empty = bar_full + 8 * STAGES;
  const int T = (K + 63) / 64;
  if (K < 1) return;
  const uint32_t rank = synth_cluster_ctarank();
  const int m0 = (int)blockIdx.y * SYNTH_BM, n0 = (int)blockIdx.x * SYNTH_BN;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      synth_mbar_init(bar_full + 8 * s, 1);
      synth_mbar_init(bar_empty + 8 * s, SYNTH_CLUSTER_M);
      synth_emu_name_barrier(bar_full + 8 * s, "full", s);
      synth_emu_name_barrier(bar_empty + 8 * s, "empty", s);
    }
    if (!bug("no_fence")) synth_fence_mbarrier_init();
  }
  if (bug("no_cluster_sync")) synth_syncthreads();
  else synth_cluster_sync();
  const int wg = threadIdx.x / 128, wt = threadIdx.x % 128;
  if (wg == 0) {
    if (wt == 0) {
      const uint16_t mask = bug("mask_own") ? uint16_t(1u << rank)
                            : uint16_t((1u << (SYNTH_CLUSTER_M + (bug("mask_wide") ? 1 : 0))) - 1);
      for (int i = 0; i < T; ++i) {
        const int s = i % STAGES;
        synth_mbar_wait(bar_empty + 8 * s, ((i / STAGES) & 1) ^ 1);
        synth_mbar_arrive_expect_tx(bar_full + 8 * s, 2 * SLOT);  // A and the whole B tile, the peers' parts too
        synth_tma_load_2d(sA + s * SLOT, &tmA, i * 64, m0, bar_full + 8 * s);
        synth_tma_load_2d_multicast(sB + s * SLOT + rank * PART, &tmB, i * 64, n0 + (int)rank * SYNTH_B_BOX_ROWS,
                                    bar_full + 8 * s, mask);
      }
    }
  } else {
    float acc[32];
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    for (int i = 0; i < T - (bug("consumer_short") ? 1 : 0); ++i) {
      const int s = i % STAGES;
      synth_mbar_wait(bug("wait_remote") ? synth_mapa(bar_full + 8 * s, (rank + 1) % SYNTH_CLUSTER_M) : bar_full + 8 * s,
                      (i / STAGES) & 1);
      synth_wgmma_fence();
      for (int kk = 0; kk < 4; ++kk)
        synth_wgmma_m64n64k16(acc, desc_k128(sA + s * SLOT + kk * 32), desc_k128(sB + s * SLOT + kk * 32));
      synth_wgmma_commit();
      synth_wgmma_wait(0);
      if (wt == 0)  // release slot s in every CTA of the cluster: the own barrier, then the peers' (remote)
        for (uint32_t r = 0; r < SYNTH_CLUSTER_M; ++r) {
          const uint32_t peer = (rank + r) % SYNTH_CLUSTER_M;
          if (peer == rank) synth_mbar_arrive(bar_empty + 8 * s);
          else synth_mbar_arrive_cluster(synth_mapa(bar_empty + 8 * s, bug("mapa_outside") ? SYNTH_CLUSTER_M : peer));
        }
    }
    const int w = wt / 32, l = wt % 32;
    for (int i = 0; i < 32; ++i) {
      const int row = m0 + 16 * w + l / 4 + 8 * ((i >> 1) & 1), col = n0 + 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
      if (row < M && col < N)
        C[(size_t)row * ldc + col] = alpha * acc[i] + (C_in ? beta * C_in[(size_t)row * ldc + col] : 0.0f);
    }
  }
  if (!bug("early_exit")) synth_cluster_sync();  // no CTA leaves while a peer may still arrive on its barriers
}

// main() of the sm_90a emulator: kernel.cu's synth_gemm_sm90 and its SYNTH_* facts handed to synth_emu::harness_main
// (sm90_harness.h: the input and output files, the grid, cluster after cluster, the JSON line), which the runtime
// object holds (sm90_runtime.cpp) when this file is built with -DSYNTH_EMU_SM90_LINKED, as synth.emit.sm90.emulate
// builds it; header-only otherwise.
#include "kernel.cu"
#ifndef SYNTH_SPLIT_K
#define SYNTH_SPLIT_K 1  // a kernel.cu written before split-K
#endif
#ifndef SYNTH_PERSISTENT
#define SYNTH_PERSISTENT 0  // one CTA per tile
#endif
#ifndef SYNTH_CLUSTER_M
#define SYNTH_CLUSTER_M 1  // CTAs of a cluster along M (grid y)
#endif
#ifndef SYNTH_CLUSTER_N
#define SYNTH_CLUSTER_N 1  // CTAs of a cluster along N (grid x)
#endif
#ifndef SYNTH_A_BOX_ROWS
#define SYNTH_A_BOX_ROWS SYNTH_BM  // rows of the A tensor map's box
#endif
#ifndef SYNTH_B_BOX_ROWS
#define SYNTH_B_BOX_ROWS SYNTH_BN
#endif
#ifdef SYNTH_TMA_STORE
#ifndef SYNTH_OUT_BYTES
#define SYNTH_OUT_BYTES 4
#endif
#define SYNTH_TMC tmC,
#else
#define SYNTH_TMC
#endif
#include "sm90_harness.h"

static void synth_emu_launch(const CUtensorMap& tmA, const CUtensorMap& tmB, const CUtensorMap& tmC, float* C,
                             const float* C_in, int M, int N, int K, int ldc, float alpha, float beta, float* ws,
                             unsigned* tickets) {
  (void)tmC; (void)ws; (void)tickets;
#if SYNTH_SPLIT_K > 1
  synth_gemm_sm90(tmA, tmB, SYNTH_TMC C, C_in, M, N, K, ldc, alpha, beta, ws, tickets);
#else
  synth_gemm_sm90(tmA, tmB, SYNTH_TMC C, C_in, M, N, K, ldc, alpha, beta);
#endif
}

int main(int argc, char** argv) {
  synth_emu::Sm90Kernel k{};
  k.bm = SYNTH_BM; k.bn = SYNTH_BN; k.bk = SYNTH_BK; k.threads = SYNTH_THREADS; k.split_k = SYNTH_SPLIT_K;
  k.persistent = SYNTH_PERSISTENT; k.cluster_m = SYNTH_CLUSTER_M; k.cluster_n = SYNTH_CLUSTER_N;
  k.a_box_rows = SYNTH_A_BOX_ROWS; k.b_box_rows = SYNTH_B_BOX_ROWS;
#ifdef SYNTH_TMA_STORE
  k.tma_store = true; k.store_cols = SYNTH_TMA_STORE; k.out_bytes = SYNTH_OUT_BYTES;
#else
  k.tma_store = false; k.store_cols = 0; k.out_bytes = 4;
#endif
#ifdef SYNTH_OUT_BF16
  k.out_bf16 = true;
#else
  k.out_bf16 = false;
#endif
  k.launch = synth_emu_launch;
  return synth_emu::harness_main(argc, argv, k);
}

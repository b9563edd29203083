// The sm_90a emulator's main for any kernel (synth_emu::harness_main), given the kernel's facts and a launch of its
// synth_gemm_sm90 (sm90_harness.cpp, compiled with the kernel, passes them): runs the kernel over the grid, cluster
// after cluster (the CTAs of a cluster together; a kernel without SYNTH_CLUSTER_M/N: one CTA per cluster).
// Compiled once into the runtime object (sm90_runtime.cpp) and only declared to a kernel's build
// (-DSYNTH_EMU_SM90_LINKED), as the runtime of synth_emu_sm90.h is; header-only by default.
// argv[1]: input (int32 M N K ldc lda ldb with_c order (0 forward, 1 reverse, 2 + seed random, 100000 starve,
// 100001 + R CTA R first) block_order (0 launch order, 1 reversed, 2 + seed shuffled: of the clusters)
// ctas (a persistent kernel's grid P, a multiple of the cluster size; 0: one per tile or tile group),
// float alpha beta, A, B as f16 bits, C_in);
// argv[2]: C written as f32. One JSON line on stdout: ok, kind ("hang"/"fault"), message, stats.
#pragma once
#include "synth_emu_sm90.h"

namespace synth_emu {

// A kernel's SYNTH_* facts, as the harness reads them (sm90_harness.cpp fills them from the kernel's macros)
struct Sm90Kernel {
  unsigned bm, bn, bk, threads, split_k, persistent, cluster_m, cluster_n, a_box_rows, b_box_rows;
  bool tma_store;      // SYNTH_TMA_STORE defined: C leaves through TMA stores of 64 x store_cols elements
  unsigned store_cols, out_bytes;
  bool out_bf16;
  // synth_gemm_sm90 called with these (tmC only for a TMA-store kernel, ws and tickets only for split-K)
  void (*launch)(const CUtensorMap& tmA, const CUtensorMap& tmB, const CUtensorMap& tmC, float* C, const float* C_in,
                 int M, int N, int K, int ldc, float alpha, float beta, float* ws, unsigned* tickets);
};

SYNTH_EMU_RT int harness_main(int argc, char** argv, const Sm90Kernel& k);

}  // namespace synth_emu

#ifndef SYNTH_EMU_SM90_LINKED
#include <algorithm>
#include <fstream>
#include <random>

SYNTH_EMU_RT int synth_emu::harness_main(int argc, char** argv, const Sm90Kernel& k) {
  if (argc != 3) { std::fprintf(stderr, "usage: harness IN OUT\n"); return 2; }
  std::ifstream in(argv[1], std::ios::binary);
  int32_t h[10]; float ab[2];
  in.read(reinterpret_cast<char*>(h), sizeof h); in.read(reinterpret_cast<char*>(ab), sizeof ab);
  const int M = h[0], N = h[1], K = h[2], ldc = h[3], lda = h[4], ldb = h[5], with_c = h[6], order = h[7];
  const int block_order = h[8];  // 0 launch order, 1 reversed, 2 + seed shuffled
  std::vector<uint16_t> A(size_t(M) * lda), B(size_t(N) * ldb);
  std::vector<float> Cin(with_c ? size_t(M) * ldc : 0);
  std::vector<float> C(size_t(M) * ldc + 4, NAN);
  in.read(reinterpret_cast<char*>(A.data()), A.size() * 2);
  in.read(reinterpret_cast<char*>(B.data()), B.size() * 2);
  in.read(reinterpret_cast<char*>(Cin.data()), Cin.size() * 4);
  if (!in) { std::fprintf(stderr, "short input\n"); return 2; }
  CUtensorMap tmA{A.data(), {uint64_t(K), uint64_t(M)}, uint64_t(lda) * 2, {k.bk, k.a_box_rows}, 2, 128};
  CUtensorMap tmB{B.data(), {uint64_t(K), uint64_t(N)}, uint64_t(ldb) * 2, {k.bk, k.b_box_rows}, 2, 128};
  // the TMA-store epilogue's C: f32 (or f16 / bf16 bits in C16), box 64 rows x SYNTH_TMA_STORE columns, no swizzle;
  // as the host does (synth.emit.sm90.runner.sm90_params), a map only where C's base and row stride are multiples
  // of 16 bytes, else a zeroed one (the kernel then stores C from registers); the kernel's C is the same buffer
  const bool out16 = k.tma_store && k.out_bytes == 2;
  std::vector<uint16_t> C16(out16 ? size_t(M) * ldc + 8 : 0, uint16_t(0x7FFF));  // NaN bits
  void* c_base = out16 ? static_cast<void*>(C16.data()) : static_cast<void*>(C.data());
  const bool c_tma = k.tma_store && ((reinterpret_cast<uintptr_t>(c_base) | (uint64_t(ldc) * k.out_bytes)) & 15) == 0;
  const CUtensorMap tmC = c_tma ? CUtensorMap{c_base, {uint64_t(N), uint64_t(M)}, uint64_t(ldc) * k.out_bytes,
                                              {k.store_cols, 64}, k.out_bytes, 0} : CUtensorMap{};
  float* const c_arg = static_cast<float*>(c_base);
  const unsigned tx = (N + k.bn - 1) / k.bn, ty = (M + k.bm - 1) / k.bm;
  const unsigned CN = k.cluster_n, CM = k.cluster_m;
  // a persistent kernel: a grid of P CTAs (h[9], default one per tile, or per cluster-sized tile group of a cluster
  // kernel), whatever the tile count: 1-D, or for clusters (P / (CM CN)) CN x CM, so that each cluster is CN CTAs
  // along x by all CM of y; P a multiple of the cluster size
  const unsigned groups = (tx + CN - 1) / CN * ((ty + CM - 1) / CM);
  const unsigned P = h[9] > 0 ? unsigned(h[9]) : groups * CN * CM;
  if (k.persistent && P % (CN * CM)) {
    std::fprintf(stderr, "a persistent grid of %u CTAs is not a whole number of %u-CTA clusters\n", P, CN * CM);
    return 2;
  }
  // a cluster kernel's grid rounded up to whole clusters (the CTAs past C run the protocol, their stores clipped)
  const unsigned gx = k.persistent ? P / (CN * CM) * CN : (tx + CN - 1) / CN * CN;
  const unsigned gy = k.persistent ? CM : (ty + CM - 1) / CM * CM;
  const unsigned gz = k.split_k;
  synth_emu::S().grid = {gx, gy, gz};
  // split-K: a NaN-filled workspace and zeroed tickets, which a launch must leave zeroed
  std::vector<float> ws(k.split_k > 1 ? size_t(gx) * gy * gz * k.bm * k.bn : 0, NAN);
  std::vector<unsigned> tickets(k.split_k > 1 ? 2 * size_t(gx) * gy : 0, 0u);  // two counters per tile
  // the clusters in launch order (x fastest), permuted by block_order; a cluster's CTAs in rank order,
  // rank = (blockIdx.x % CN) + CN (blockIdx.y % CM) as %cluster_ctarank of __cluster_dims__(CN, CM, 1)
  const unsigned qx = gx / CN, qy = gy / CM;
  std::vector<long long> blocks(size_t(qx) * qy * gz);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = (long long)i;
  if (block_order == 1) std::reverse(blocks.begin(), blocks.end());
  if (block_order >= 2) std::shuffle(blocks.begin(), blocks.end(), std::mt19937(unsigned(block_order - 2)));
  bool ok = true;
  for (size_t i = 0; i < blocks.size() && ok; ++i) {
    const unsigned cx = unsigned(blocks[i] % qx), cy = unsigned(blocks[i] / qx % qy), bz = unsigned(blocks[i] / qx / qy);
    std::vector<synth_dim3> cluster;
    for (unsigned r = 0; r < CN * CM; ++r) cluster.push_back({cx * CN + r % CN, cy * CM + r / CN, bz});
    ok = synth_emu::run_cluster(cluster, int(k.threads), order, [&] {
      k.launch(tmA, tmB, tmC, c_arg, with_c ? Cin.data() : nullptr, M, N, K, ldc, ab[0], ab[1], ws.data(),
               tickets.data());
    });
  }
  if (out16) {
    // C stored as f16 / bf16: widened to f32 for the output file (NaN where never written, guard included)
    for (size_t i = 0; i < size_t(M) * ldc; ++i)
      C[i] = k.out_bf16 ? synth_emu::bf16_to_float(C16[i]) : synth_emu::half_to_float(C16[i]);
    for (size_t i = size_t(M) * ldc; i < C16.size(); ++i)
      if (C16[i] != uint16_t(0x7FFF)) C[C.size() - 4] = 0.0f;  // a store past the tensor: guard written
  }
  long tickets_left = 0;
  for (unsigned t : tickets) tickets_left += t != 0;
  std::ofstream out(argv[2], std::ios::binary);
  out.write(reinterpret_cast<const char*>(C.data()), (C.size() - 4) * 4);
  auto& s = synth_emu::S();
  std::string descs;  // the distinct (A, B) wgmma descriptor pairs the kernel issued, for the layout checks
  for (auto [da, db] : s.wgmma_descs)
    descs += (descs.empty() ? "[" : ", [") + std::to_string(da) + ", " + std::to_string(db) + "]";
  std::string maps;  // the tensor maps of A and B as the emulator's TMA reads them (dims, row stride, box)
  for (const CUtensorMap* m : {&tmA, &tmB})
    maps += std::string(maps.empty() ? "" : ", ") + "{\"dims\": [" + std::to_string(m->dim[0]) + ", " +
            std::to_string(m->dim[1]) + "], \"stride\": " + std::to_string(m->stride1) + ", \"box\": [" +
            std::to_string(m->box[0]) + ", " + std::to_string(m->box[1]) + "], \"elem_bytes\": " +
            std::to_string(m->elem_bytes) + ", \"swizzle_bytes\": " + std::to_string(m->swizzle) + "}";
  std::string msg;
  for (char c : s.failure) msg += (c == '"' || c == '\\') ? ' ' : c;
  std::printf("{\"ok\": %s, \"kind\": \"%s\", \"message\": \"%s\", \"guard_written\": %s, \"landed\": %ld, "
              "\"tx_bytes\": %ld, \"wgmma\": %ld, \"poisoned_ops\": %ld, \"waw\": %ld, \"arrivals\": %ld, "
              "\"tickets_left\": %ld, \"stores\": %ld, \"wgmma_descs\": [%s], \"tensor_maps\": [%s], "
              "\"cluster_size\": %u, \"clusters\": %ld, \"multicasts\": %ld, \"multicast_copies\": %ld, "
              "\"remote_arrivals\": %ld, \"cluster_syncs\": %ld, \"c_tma\": %s}\n",
              ok ? "true" : "false", s.kind.c_str(), msg.c_str(),
              (std::isnan(C[C.size() - 4]) ? "false" : "true"), s.stat_landed, s.stat_tx_bytes, s.stat_wgmma,
              s.stat_poisoned_ops, s.stat_waw, s.stat_arrivals, tickets_left, s.stat_stores, descs.c_str(), maps.c_str(),
              CN * CM, s.stat_clusters, s.stat_multicasts, s.stat_multicast_copies, s.stat_remote_arrivals,
              s.stat_cluster_syncs, c_tma ? "true" : "false");
  return ok ? 0 : 3;
}
#endif

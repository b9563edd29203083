// main() of the sm_90a emulator: runs kernel.cu's synth_gemm_sm90 over the grid, block after block.
// argv[1]: input (int32 M N K ldc lda ldb with_c order (0 forward, 1 reverse, 2 + seed random), float alpha beta, A, B as f16 bits, C_in);
// argv[2]: C written as f32. One JSON line on stdout: ok, kind ("hang"/"fault"), message, stats.
#include "kernel.cu"
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 3) { std::fprintf(stderr, "usage: harness IN OUT\n"); return 2; }
  std::ifstream in(argv[1], std::ios::binary);
  int32_t h[8]; float ab[2];
  in.read(reinterpret_cast<char*>(h), sizeof h); in.read(reinterpret_cast<char*>(ab), sizeof ab);
  const int M = h[0], N = h[1], K = h[2], ldc = h[3], lda = h[4], ldb = h[5], with_c = h[6], order = h[7];
  std::vector<uint16_t> A(size_t(M) * lda), B(size_t(N) * ldb);
  std::vector<float> Cin(with_c ? size_t(M) * ldc : 0);
  std::vector<float> C(size_t(M) * ldc + 4, NAN);
  in.read(reinterpret_cast<char*>(A.data()), A.size() * 2);
  in.read(reinterpret_cast<char*>(B.data()), B.size() * 2);
  in.read(reinterpret_cast<char*>(Cin.data()), Cin.size() * 4);
  if (!in) { std::fprintf(stderr, "short input\n"); return 2; }
  CUtensorMap tmA{A.data(), {uint64_t(K), uint64_t(M)}, uint64_t(lda) * 2, {SYNTH_BK, SYNTH_BM}, 2, 128};
  CUtensorMap tmB{B.data(), {uint64_t(K), uint64_t(N)}, uint64_t(ldb) * 2, {SYNTH_BK, SYNTH_BN}, 2, 128};
  const unsigned gx = (N + SYNTH_BN - 1) / SYNTH_BN, gy = (M + SYNTH_BM - 1) / SYNTH_BM;
  synth_emu::S().grid = {gx, gy, 1};
  bool ok = true;
  for (unsigned by = 0; by < gy && ok; ++by)
    for (unsigned bx = 0; bx < gx && ok; ++bx)
      ok = synth_emu::run_block({bx, by, 0}, SYNTH_THREADS, order, [&] {
        synth_gemm_sm90(tmA, tmB, C.data(), with_c ? Cin.data() : nullptr, M, N, K, ldc, ab[0], ab[1]);
      });
  std::ofstream out(argv[2], std::ios::binary);
  out.write(reinterpret_cast<const char*>(C.data()), (C.size() - 4) * 4);
  auto& s = synth_emu::S();
  std::string msg;
  for (char c : s.failure) msg += (c == '"' || c == '\\') ? ' ' : c;
  std::printf("{\"ok\": %s, \"kind\": \"%s\", \"message\": \"%s\", \"guard_written\": %s, \"landed\": %ld, "
              "\"tx_bytes\": %ld, \"wgmma\": %ld, \"poisoned_ops\": %ld, \"waw\": %ld, \"arrivals\": %ld}\n",
              ok ? "true" : "false", s.kind.c_str(), msg.c_str(),
              (std::isnan(C[C.size() - 4]) ? "false" : "true"), s.stat_landed, s.stat_tx_bytes, s.stat_wgmma,
              s.stat_poisoned_ops, s.stat_waw, s.stat_arrivals);
  return ok ? 0 : 3;
}

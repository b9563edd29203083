// main() of the sm_90a emulator for the FlashAttention-forward kernel (synth.emit.sm90.attention_kernel):
// kernel.cu's synth_attention_sm90 run over its grid, one CTA at a time, on the emulator (synth_emu_sm90.h), whose
// runtime object this file is linked with (-DSYNTH_EMU_SM90_LINKED, as synth.emit.sm90.emulate_attention builds it).
// argv[1]: input (int32 batch_heads seqlen_q seqlen_k order (0 forward, 1 reverse, 2 + seed random, 100000 starve)
// block_order (0 launch order, 1 reversed, 2 + seed shuffled), float softmax_scale, then Q [BH, Sq, d], K and
// V [BH, Sk, d] as 16-bit patterns (f16 or bf16, as the kernel's SYNTH_ATTN_BF16 reads them));
// argv[2]: O [BH, Sq, d] written as f32 (NaN where the kernel wrote nothing).
// The tensor maps are 2-D over the flattened [BH S, d] tensors (box 64 x BM for Q, 64 x BN for K and V, 128-byte
// swizzle, zero fill past the last row), as the host encodes them. One JSON line on stdout: ok, kind
// ("hang" / "fault" / "protocol" / "race"), message, guard_written (a store past O), the emulator's counters.
#include "kernel.cu"
#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) { std::fprintf(stderr, "usage: attn_harness IN OUT\n"); return 2; }
  std::ifstream in(argv[1], std::ios::binary);
  int32_t h[5]; float scale;
  in.read(reinterpret_cast<char*>(h), sizeof h); in.read(reinterpret_cast<char*>(&scale), sizeof scale);
  const int BH = h[0], Sq = h[1], Sk = h[2], order = h[3], block_order = h[4];
  if (BH < 1 || Sq < 1 || Sk < 1) { std::fprintf(stderr, "need batch_heads, seqlen_q, seqlen_k >= 1\n"); return 2; }
  const size_t D = SYNTH_ATTN_D;
  std::vector<uint16_t> Q(size_t(BH) * Sq * D), K(size_t(BH) * Sk * D), V(size_t(BH) * Sk * D);
  in.read(reinterpret_cast<char*>(Q.data()), Q.size() * 2);
  in.read(reinterpret_cast<char*>(K.data()), K.size() * 2);
  in.read(reinterpret_cast<char*>(V.data()), V.size() * 2);
  if (!in) { std::fprintf(stderr, "short input\n"); return 2; }
  const CUtensorMap tmQ{Q.data(), {D, uint64_t(BH) * Sq}, D * 2, {64, SYNTH_ATTN_BM}, 2, 128};
  const CUtensorMap tmK{K.data(), {D, uint64_t(BH) * Sk}, D * 2, {64, SYNTH_ATTN_BN}, 2, 128};
  const CUtensorMap tmV{V.data(), {D, uint64_t(BH) * Sk}, D * 2, {64, SYNTH_ATTN_BN}, 2, 128};
  std::vector<float> O(size_t(BH) * Sq * D + 4, NAN);  // 4 guard floats past the end
  const unsigned gx = unsigned((Sq + SYNTH_ATTN_BM - 1) / SYNTH_ATTN_BM), gy = unsigned(BH);
  synth_emu::S().grid = {gx, gy, 1};
  std::vector<long long> blocks(size_t(gx) * gy);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = (long long)i;
  if (block_order == 1) std::reverse(blocks.begin(), blocks.end());
  if (block_order >= 2) std::shuffle(blocks.begin(), blocks.end(), std::mt19937(unsigned(block_order - 2)));
  bool ok = true;
  long ctas = 0;
  for (size_t i = 0; i < blocks.size() && ok; ++i, ++ctas) {
    const synth_dim3 b{unsigned(blocks[i] % gx), unsigned(blocks[i] / gx), 0};
    ok = synth_emu::run_cluster({b}, SYNTH_ATTN_THREADS, order, [&] {
      synth_attention_sm90(tmQ, tmK, tmV, O.data(), Sq, Sk, scale);
    });
  }
  bool guard = false;
  for (size_t i = O.size() - 4; i < O.size(); ++i) guard = guard || !std::isnan(O[i]);
  std::ofstream out(argv[2], std::ios::binary);
  out.write(reinterpret_cast<const char*>(O.data()), (O.size() - 4) * 4);
  auto& s = synth_emu::S();
  std::string msg;
  for (char c : s.failure) msg += (c == '"' || c == '\\' || c == '\n') ? ' ' : c;
  std::printf("{\"ok\": %s, \"kind\": \"%s\", \"message\": \"%s\", \"guard_written\": %s, \"ctas\": %ld, "
              "\"grid\": [%u, %u], \"landed\": %ld, \"tx_bytes\": %ld, \"wgmma\": %ld, \"poisoned_ops\": %ld, "
              "\"waw\": %ld, \"arrivals\": %ld}\n",
              ok ? "true" : "false", s.kind.c_str(), msg.c_str(), guard ? "true" : "false", ctas, gx, gy,
              s.stat_landed, s.stat_tx_bytes, s.stat_wgmma, s.stat_poisoned_ops, s.stat_waw, s.stat_arrivals);
  return ok ? 0 : 3;
}

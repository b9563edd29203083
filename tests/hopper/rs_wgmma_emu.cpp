// A warp group's register-A wgmma on the sm_90a emulator (tests/hopper/test_emulator_rs_wgmma.py): D (64 x N, f32)
// = 0.5 + A (64 x K, from registers) * B (K x N, shared memory, MN-major), K = 16 * KSTEPS, the way the attention
// kernel's P * V runs. B is V as global memory holds it (K rows of N elements, N contiguous); one thread loads it
// with N / 64 TMA boxes of [K rows x 64 elements] (128-byte swizzle) chunk_bytes = K * 128 apart, completing on one
// mbarrier; every thread builds its A fragment from A (gmma_a_frag_coord), then wgmma.fence, one
// synth_wgmma_rs[_bf16]_m64n{N}k16 per k16 step through synth_desc_mn128(sB + 2048 step, chunk_bytes), commit, wait 0.
//
// Usage: rs_wgmma_emu N BF16 KSTEPS VARIANT ORDER FILE. FILE holds A (64 x K), B (K x N) and B2 (K x N) as 16-bit
// values, row-major. ORDER: the emulator's thread order code (0 forward, 1 reverse, 2 + seed random). VARIANT:
//   ok                  as above
//   overwrite_a         thread 37 changes one A register between the commit and the wait_group
//   overwrite_b         the B slot is refilled with B2 (TMA, waited on) between the commit and the wait_group
//   in_flight           the wgmma is issued before B's copies are waited on (still in flight)
//   no_fence            no wgmma.fence before the wgmma
//   unfenced_after_wait a second batch (the same wgmmas again) after the wait_group, without a wgmma.fence
//   fenced_after_wait   the same second batch with its wgmma.fence (D = 0.5 + 2 A B)
//   overwrite_d         thread 37 adds 1 to its accumulator register 5 between the commit and the wait_group
//   chained             a second batch (fenced, committed) on the same accumulator before any wait_group: two
//                       groups in flight together, then wait_group 1 and 0 (D = 0.5 + 2 A B)
//   overwrite_d_chained as chained, thread 37 adding 1 to register 5 between wait_group 1 (the first group retired)
//                       and wait_group 0 (the second still in flight)
// Prints one JSON line: ok, kind, message, the emulator's counts, and D (row-major).
#include "synth_emu_sm90.h"

#include <fstream>
#include <string>
#include <vector>

using Rs = void (*)(float*, const uint32_t*, uint64_t);

#define RS_PAIR(N) {N, synth_wgmma_rs_m64n##N##k16, synth_wgmma_rs_bf16_m64n##N##k16}
struct RsFn { int n; Rs f16, bf16; };
static const RsFn RS_FNS[] = {RS_PAIR(16), RS_PAIR(32), RS_PAIR(64), RS_PAIR(96), RS_PAIR(128), RS_PAIR(192),
                              RS_PAIR(256)};

int main(int argc, char** argv) {
  if (argc != 7) { std::fprintf(stderr, "usage: rs_wgmma_emu N BF16 KSTEPS VARIANT ORDER FILE\n"); return 2; }
  const int N = std::atoi(argv[1]), bf16 = std::atoi(argv[2]), KS = std::atoi(argv[3]), order = std::atoi(argv[5]);
  const std::string variant = argv[4];
  const int K = 16 * KS;
  Rs rs = nullptr;
  for (const RsFn& f : RS_FNS) if (f.n == N) rs = bf16 ? f.bf16 : f.f16;
  if (rs == nullptr || KS < 1 || KS > 8) { std::fprintf(stderr, "bad N or KSTEPS\n"); return 2; }
  std::vector<uint16_t> A(64 * K), B(size_t(K) * N), B2(size_t(K) * N);
  std::ifstream in(argv[6], std::ios::binary);
  in.read(reinterpret_cast<char*>(A.data()), A.size() * 2);
  in.read(reinterpret_cast<char*>(B.data()), B.size() * 2);
  in.read(reinterpret_cast<char*>(B2.data()), B2.size() * 2);
  if (!in) { std::fprintf(stderr, "short input file\n"); return 2; }
  auto map_of = [&](const std::vector<uint16_t>& g) {
    CUtensorMap m{};
    m.base = g.data(); m.dim[0] = uint64_t(N); m.dim[1] = uint64_t(K); m.stride1 = uint64_t(N) * 2;
    m.box[0] = 64; m.box[1] = uint32_t(K); m.elem_bytes = 2; m.swizzle = 128;
    return m;
  };
  const CUtensorMap mapB = map_of(B), mapB2 = map_of(B2);
  const int chunks = (N + 63) / 64;
  const uint32_t chunk_bytes = uint32_t(K) * 128;
  std::vector<float> D(64 * size_t(N), std::nanf(""));

  const bool ran = synth_emu::run_block({0, 0, 0}, 128, order, [&] {
    unsigned char* smem = synth_smem_raw + ((1024 - (synth_smem_u32(synth_smem_raw) & 1023)) & 1023);
    const uint32_t sB = synth_smem_u32(smem), bar = sB + chunks * chunk_bytes;
    const int t = int(threadIdx.x);
    auto load = [&](const CUtensorMap& m) {
      synth_mbar_arrive_expect_tx(bar, uint32_t(chunks) * 64 * uint32_t(K) * 2);  // whole boxes (zero-filled past N)
      for (int c = 0; c < chunks; ++c) synth_tma_load_2d(sB + c * chunk_bytes, &m, 64 * c, 0, bar);
    };
    if (t == 0) {
      synth_mbar_init(bar, 1);
      synth_emu_name_barrier(bar, "full_V", 0);
    }
    synth_syncthreads();
    if (t == 0) load(mapB);
    uint32_t a[8][4];
    for (int s = 0; s < KS; ++s)
      for (int j = 0; j < 8; ++j) {
        int row, k;
        synth_emu::gmma_a_frag_coord(t, j, row, k);
        const uint32_t h = A[size_t(row) * K + 16 * s + k];
        if (j % 2 == 0) a[s][j / 2] = h;
        else a[s][j / 2] |= h << 16;
      }
    float d[128];
    for (int i = 0; i < N / 2; ++i) d[i] = 0.5f;
    if (variant != "in_flight") synth_mbar_wait(bar, 0);
    auto batch = [&](bool fence) {
      if (fence) synth_wgmma_fence();
      for (int s = 0; s < KS; ++s) rs(d, a[s], synth_desc_mn128(sB + 2048 * s, chunk_bytes));
      synth_wgmma_commit();
    };
    batch(variant != "no_fence");
    if (variant == "overwrite_a" && t == 37) a[0][1] ^= 0x3C00u;
    if (variant == "overwrite_d" && t == 37) d[5] += 1.0f;
    if (variant == "chained" || variant == "overwrite_d_chained") {
      batch(true);
      synth_wgmma_wait_n<1>();
      if (variant == "overwrite_d_chained" && t == 37) d[5] += 1.0f;
    }
    if (variant == "overwrite_b") {
      if (t == 0) load(mapB2);
      synth_mbar_wait(bar, 1);
    }
    synth_wgmma_wait_n<0>();
    if (variant == "unfenced_after_wait" || variant == "fenced_after_wait") {
      batch(variant == "fenced_after_wait");
      synth_wgmma_wait_n<0>();
    }
    if (variant == "in_flight") synth_mbar_wait(bar, 0);
    for (int i = 0; i < N / 2; ++i) {
      int row, col;
      synth_emu::gmma_acc_coord(t, i, row, col);
      D[size_t(row) * N + col] = d[i];
    }
  });
  const auto& s = synth_emu::S();
  std::string msg;
  for (char c : s.failure) {
    if (c == '"' || c == '\\') msg += '\\';
    msg += c == '\n' ? ' ' : c;
  }
  std::printf("{\"ok\": %s, \"kind\": \"%s\", \"message\": \"%s\", \"wgmma\": %ld, \"poisoned_ops\": %ld, "
              "\"protocol_errors\": %ld, \"landed\": %ld, \"D\": [",
              ran ? "true" : "false", s.kind.c_str(), msg.c_str(), s.stat_wgmma, s.stat_poisoned_ops,
              s.stat_protocol_errors, s.stat_landed);
  for (size_t i = 0; i < D.size(); ++i) {
    if (std::isnan(D[i])) std::printf("%sNaN", i ? "," : "");
    else std::printf("%s%.9g", i ? "," : "", double(D[i]));
  }
  std::printf("]}\n");
  return 0;
}

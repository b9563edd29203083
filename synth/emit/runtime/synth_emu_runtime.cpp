// synth_emu_runtime.cpp -- the CPU emulator behind synth_emu.h (docs/emulator.md).
//
// Compiled once per version by synth/emit/emulate.py (cached object file) and
// linked with each kernel's emu_harness.cpp. Everything heavy lives here: the
// block scheduler, the adversarial cp.async queues, the shared-memory shadow
// state, bank-conflict counting, the warp-collective ops and the Runner.
#include "synth_emu.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

thread_local uint3 threadIdx{0, 0, 0};
thread_local uint3 blockIdx{0, 0, 0};
thread_local dim3 blockDim{1, 1, 1};
thread_local dim3 gridDim{1, 1, 1};
__attribute__((aligned(128))) unsigned char synth_smem[SYNTH_EMU_SMEM_MAX];

namespace synth_emu {

// ---------------------------------------------------------------------------
// Run options, statistics, diagnostics
// ---------------------------------------------------------------------------
enum class Policy { Forward, Reverse, Interleave, Parallel };

inline const char* policy_name(Policy p) {
  switch (p) {
    case Policy::Forward: return "forward";
    case Policy::Reverse: return "reverse";
    case Policy::Interleave: return "interleave";
    case Policy::Parallel: return "parallel";
  }
  return "?";
}

inline bool parse_policy(const std::string& s, Policy* out) {
  if (s == "default" || s == "reverse") *out = Policy::Reverse;
  else if (s == "forward") *out = Policy::Forward;
  else if (s == "interleave") *out = Policy::Interleave;
  else if (s == "parallel") *out = Policy::Parallel;
  else return false;
  return true;
}

/// Access kinds that are logged per lane and grouped into warp instructions.
enum AccessKind { kCpAsync = 0, kLds = 1, kSts = 2, kNumLogged = 3 };
/// Bank-conflict categories (the logged kinds plus ldmatrix).
enum BankCat { kBankCpAsync = 0, kBankLds = 1, kBankSts = 2, kBankLdmatrix = 3, kNumBankCats = 4 };
inline const char* bank_cat_name(int c) {
  static const char* names[] = {"cp_async", "lds", "sts", "ldmatrix"};
  return names[c];
}

struct BankCounter {
  uint64_t instructions[2] = {0, 0};  // [other, main]
  uint64_t wavefronts[2] = {0, 0};
  uint64_t conflicts[2] = {0, 0};     // wavefronts beyond one per phase
};

struct Stats {
  uint64_t blocks = 0, threads = 0;
  uint64_t cp_async = 0, commits = 0, waits = 0, barriers = 0, ldmatrix = 0, mma = 0;
  uint64_t lds = 0, sts = 0;
  uint64_t gld = 0, gst = 0, atomics = 0;  // split-K workspace loads/stores (16 B) and ticket atomics
  uint64_t early_reads = 0;      // read of a chunk whose cp.async has not landed
  uint64_t unsync_reads = 0;     // read of data landed/stored by another thread in the same barrier interval
  uint64_t war_hazards = 0;      // write into a chunk another thread read in the same barrier interval
  uint64_t waw_hazards = 0;      // write into a chunk whose cp.async is still in flight
  uint64_t uncommitted_at_exit = 0;  // threads that exited with an open (uncommitted) group
  uint64_t pending_at_exit = 0;      // committed groups never waited for (harmless; reported)
  uint64_t wait_over_7 = 0;          // wait_group N with N > 7 (PTX limit)
  uint64_t unordered_global = 0;     // workspace accesses that break the fence / ticket protocol
  uint64_t max_wait_n = 0;
  uint64_t max_groups_in_flight = 0;
  BankCounter bank[kNumBankCats];
};

struct Runtime {
  Policy policy = Policy::Reverse;
  double timeout_s = 300.0;
  std::mutex mu;  // guards stats, messages
  Stats st;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  uint64_t suppressed = 0;
  struct Region {
    const unsigned char* p;
    size_t n;
    std::string name;
  };
  std::vector<Region> globals;
  void (*on_fatal)() = nullptr;  // writes stats.json before a fatal exit
  // block order of a launch: 0 forward (x fastest, then y, then z), 1 reverse, 2 shuffled by `order_seed`
  int order = 0;
  unsigned order_seed = 0;
  // the split-K release/acquire protocol (docs/emulator.md, "Split-K"): who stored each 16-byte global
  // chunk through synth_st_cg_f32x4 and through which count it was published (fence, then atomicAdd),
  // and every value each counter took (an acquiring load may return any of them not older than the
  // last one the thread saw: the emulator returns the oldest)
  struct GStore {
    long long block = -1;
    bool published = false;
    uintptr_t counter = 0;
    unsigned value = 0;
  };
  std::unordered_map<uintptr_t, GStore> gstores;
  std::unordered_map<uintptr_t, std::vector<unsigned>> history;
};

inline Runtime& rt() {
  static Runtime r;
  return r;
}

inline void note(std::vector<std::string>& v, const std::string& msg) {
  if (v.size() < 50) v.push_back(msg);
  else ++rt().suppressed;
}
inline void warn(const std::string& msg) {
  std::lock_guard<std::mutex> g(rt().mu);
  note(rt().warnings, msg);
}
[[noreturn]] inline void fatal(const std::string& msg) {
  {
    std::lock_guard<std::mutex> g(rt().mu);
    rt().errors.push_back("fatal: " + msg);
  }
  std::fprintf(stderr, "synth_emu: fatal: %s\n", msg.c_str());
  if (rt().on_fatal) rt().on_fatal();
  std::fflush(nullptr);
  std::_Exit(3);
}

inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

/// Register a global buffer: cp.async sources must lie inside one.
inline void register_global(const void* p, size_t n, const std::string& name) {
  rt().globals.push_back({(const unsigned char*)p, n, name});
}
inline bool in_globals(const void* p, size_t n) {
  auto* q = (const unsigned char*)p;
  for (auto& g : rt().globals)
    if (q >= g.p && q + n <= g.p + g.n) return true;
  return false;
}

// ---------------------------------------------------------------------------
// Block state
// ---------------------------------------------------------------------------
struct PendingCopy {
  uint32_t off;
  uint8_t data[16];
};

struct LogEntry {
  uint32_t off;
  uint8_t size;
  uint8_t region;
};

struct ThreadCtx {
  struct Block* blk = nullptr;
  int tid = 0, warp = 0, lane = 0;
  int region = 0;
  std::vector<PendingCopy> open;                // the open (uncommitted) group
  std::deque<std::vector<PendingCopy>> groups;  // committed, not yet landed (FIFO)
  std::vector<LogEntry> log[kNumLogged];        // accesses since the last barrier
  uint64_t unfenced = 0;     // global stores not yet followed by synth_threadfence
  uint64_t fence_mark = 0;   // the block's acquiring loads before this thread's last synth_threadfence
  std::unordered_map<uintptr_t, size_t> seen;  // per counter: index of the next value an acquiring load returns
  uint64_t stale_loads = 0;                    // consecutive acquiring loads that returned the newest value
};
constexpr uint64_t kMaxStaleLoads = 64;

inline thread_local ThreadCtx* tl_ctx = nullptr;

/// Shadow state of one 16-byte chunk of shared memory.
struct Chunk {
  int32_t pending = 0;          // cp.async copies in flight into this chunk
  int32_t writer = -1;          // thread whose copy landed / store happened last
  uint64_t write_epoch = ~0ull; // barrier interval of that landing / store
  uint64_t read_epoch = ~0ull;  // barrier interval of the reads below
  int32_t reader = -1;          // first thread that read the chunk in read_epoch
  bool many_readers = false;    // and whether another thread did too
};

enum CollKind { kCollNone = 0, kCollLdmatrix = 1, kCollMma = 2 };

struct LaneScratch {
  int kind = kCollNone;
  const void* addr = nullptr;
  uint32_t a[4], b[2];
  float c[4];
  uint32_t r[4];
  float d[4];
};

struct Block;
struct BlockBarrierDone {
  Block* b;
  void operator()() noexcept;
};
struct WarpBarrierDone {
  Block* b;
  int w;
  void operator()() noexcept;
};

enum ThreadState { kReady = 0, kAtBarrier = 1, kAtColl = 2, kDone = 3 };

struct Block {
  Policy policy;
  dim3 idx;
  int nthreads, nwarps;
  size_t smem_bytes;
  std::mutex mu;  // guards everything below (and the serialized token)
  uint64_t epoch = 0;
  std::vector<Chunk> chunks;
  std::vector<ThreadCtx> th;
  std::vector<LaneScratch> scratch;  // nwarps * 32
  Stats st;                          // merged into rt().st at block end
  // serialized scheduling
  std::vector<int> state;
  std::vector<std::condition_variable> cv;
  int running = -1;
  int finished_threads = 0;
  std::condition_variable done_cv;
  bool warned_exit = false;
  uint64_t acquires = 0;                            // acquiring loads by this block's threads
  std::unordered_map<uintptr_t, unsigned> acquired;  // per counter: the newest value this block observed
  std::vector<uintptr_t> unpublished;               // this block's global stores not yet published
  long long lin = 0;                                // linear block index (x fastest)
  // parallel scheduling
  std::unique_ptr<std::barrier<BlockBarrierDone>> bbar;
  std::vector<std::unique_ptr<std::barrier<WarpBarrierDone>>> wbar;
  std::vector<int> live_lanes;

  Block(Policy p, dim3 bidx, int nthr, size_t smem)
      : policy(p), idx(bidx), nthreads(nthr), nwarps((nthr + 31) / 32), smem_bytes(smem),
        chunks((smem + 15) / 16), th(nthr), scratch(nwarps * 32), state(nthr, kReady), cv(nthr),
        live_lanes(nwarps, 0) {
    for (int t = 0; t < nthr; ++t) {
      th[t].blk = this;
      th[t].tid = t;
      th[t].warp = t / 32;
      th[t].lane = t % 32;
      live_lanes[t / 32]++;
    }
    if (policy == Policy::Parallel) {
      bbar = std::make_unique<std::barrier<BlockBarrierDone>>(nthr, BlockBarrierDone{this});
      for (int w = 0; w < nwarps; ++w)
        wbar.push_back(std::make_unique<std::barrier<WarpBarrierDone>>(live_lanes[w], WarpBarrierDone{this, w}));
    }
  }

  std::string where(int tid) const {
    return fmt("block (%u,%u,%u) thread %d (warp %d lane %d)", idx.x, idx.y, idx.z, tid, tid / 32, tid % 32);
  }

  // ---- shadow state ------------------------------------------------------
  uint32_t smem_off(const void* p, size_t n, const char* what, int tid) {
    auto* q = (const unsigned char*)p;
    if (q < synth_smem || q + n > synth_smem + smem_bytes)
      fatal(fmt("%s: %s address %p is outside the %zu-byte dynamic shared buffer (offset %td)", where(tid).c_str(),
                what, p, smem_bytes, q - synth_smem));
    return (uint32_t)(q - synth_smem);
  }

  /// A read of [off, off+n) by thread tid (for ldmatrix: the lane that supplied the row address).
  void shadow_read(uint32_t off, uint32_t n, int tid, const char* what) {
    for (uint32_t c = off / 16; c <= (off + n - 1) / 16; ++c) {
      Chunk& ch = chunks[c];
      if (ch.pending > 0) {
        if (st.early_reads++ < 8)
          warn(fmt("early read: %s by %s reads shared offset %u whose cp.async has not landed", what,
                   where(tid).c_str(), c * 16));
      } else if (ch.writer >= 0 && ch.write_epoch == epoch && ch.writer != tid) {
        if (st.unsync_reads++ < 8)
          warn(fmt("unsynchronized read: %s by %s reads shared offset %u written by thread %d in the same "
                   "barrier interval (no __syncthreads between)",
                   what, where(tid).c_str(), c * 16, ch.writer));
      }
      if (ch.read_epoch != epoch) {
        ch.read_epoch = epoch;
        ch.reader = tid;
        ch.many_readers = false;
      } else if (ch.reader != tid) {
        ch.many_readers = true;
      }
    }
  }

  /// A write of [off, off+n) by thread tid (a cp.async issue or a store).
  void shadow_write(uint32_t off, uint32_t n, int tid, const char* what) {
    for (uint32_t c = off / 16; c <= (off + n - 1) / 16; ++c) {
      Chunk& ch = chunks[c];
      if (ch.pending > 0) {
        if (st.waw_hazards++ < 8)
          warn(fmt("write-after-write: %s by %s into shared offset %u while an earlier cp.async into it is in "
                   "flight",
                   what, where(tid).c_str(), c * 16));
      }
      if (ch.read_epoch == epoch && (ch.many_readers || ch.reader != tid)) {
        if (st.war_hazards++ < 8)
          warn(fmt("write-after-read: %s by %s into shared offset %u which another thread read in the same barrier "
                   "interval (no __syncthreads between)",
                   what, where(tid).c_str(), c * 16));
      }
    }
  }

  void land(const PendingCopy& pc, int tid) {
    std::memcpy(synth_smem + pc.off, pc.data, 16);
    Chunk& ch = chunks[pc.off / 16];
    ch.pending--;
    ch.writer = tid;
    ch.write_epoch = epoch;
  }

  // ---- bank conflicts ----------------------------------------------------
  /// One phase: the accesses (offset, size) that the hardware serves together.
  static uint64_t wavefronts(const std::vector<std::pair<uint32_t, uint32_t>>& acc) {
    // distinct 4-byte words per bank; a phase needs max-over-banks wavefronts
    uint32_t words[32][32];
    int nw[32] = {0};
    int worst = 0;
    for (auto [off, size] : acc) {
      for (uint32_t b = off / 4; b <= (off + size - 1) / 4; ++b) {
        int bank = b % 32;
        bool seen = false;
        for (int i = 0; i < nw[bank]; ++i) seen |= words[bank][i] == b;
        if (!seen && nw[bank] < 32) words[bank][nw[bank]++] = b;
        worst = std::max(worst, nw[bank]);
      }
    }
    return (uint64_t)worst;
  }

  void count_instruction(int cat, int region, const std::vector<std::pair<uint32_t, uint32_t>>& lanes,
                         const std::vector<int>& lane_ids) {
    // phases: 128 bytes per phase (32 lanes x 4B, 16 x 8B, 8 x 16B)
    uint32_t size = lanes.empty() ? 4 : lanes[0].second;
    int per_phase = size >= 16 ? 8 : size >= 8 ? 16 : 32;
    BankCounter& bc = st.bank[cat];
    int r = region ? 1 : 0;
    bc.instructions[r]++;
    for (int ph = 0; ph < 32 / per_phase; ++ph) {
      std::vector<std::pair<uint32_t, uint32_t>> acc;
      for (size_t i = 0; i < lanes.size(); ++i)
        if (lane_ids[i] / per_phase == ph) acc.push_back(lanes[i]);
      if (acc.empty()) continue;
      uint64_t wf = wavefronts(acc);
      bc.wavefronts[r] += wf;
      bc.conflicts[r] += wf - 1;
    }
  }

  /// Group each lane's logged accesses into warp instructions (the j-th access
  /// of every lane is one instruction) and count their bank conflicts.
  void flush_logs() {
    for (int w = 0; w < nwarps; ++w) {
      for (int k = 0; k < kNumLogged; ++k) {
        size_t longest = 0;
        for (int l = 0; l < 32 && w * 32 + l < nthreads; ++l) longest = std::max(longest, th[w * 32 + l].log[k].size());
        for (size_t j = 0; j < longest; ++j) {
          std::vector<std::pair<uint32_t, uint32_t>> acc;
          std::vector<int> ids;
          int region = -1;
          for (int l = 0; l < 32 && w * 32 + l < nthreads; ++l) {
            auto& lg = th[w * 32 + l].log[k];
            if (j < lg.size()) {
              acc.push_back({lg[j].off, lg[j].size});
              ids.push_back(l);
              if (region < 0) region = lg[j].region;
            }
          }
          count_instruction(k, region, acc, ids);
        }
        for (int l = 0; l < 32 && w * 32 + l < nthreads; ++l) th[w * 32 + l].log[k].clear();
      }
    }
  }

  // ---- barrier release (both modes; called with every live thread blocked) --
  void on_barrier_release() {
    flush_logs();
    ++epoch;
    st.barriers++;
  }

  // ---- warp collectives (called with all 32 lanes blocked) ----------------
  void complete_collective(int w) {
    LaneScratch* s = &scratch[w * 32];
    int kind = s[0].kind;
    for (int l = 0; l < 32; ++l)
      if (s[l].kind != kind || kind == kCollNone)
        fatal(fmt("%s: divergent warp-collective ops in one warp (lane 0: %s, lane %d: %s)", where(w * 32 + l).c_str(),
                  kind == kCollLdmatrix ? "ldmatrix" : kind == kCollMma ? "mma" : "none", l,
                  s[l].kind == kCollLdmatrix ? "ldmatrix" : s[l].kind == kCollMma ? "mma" : "none"));
    if (kind == kCollLdmatrix) do_ldmatrix(w, s);
    else do_mma(s);
    for (int l = 0; l < 32; ++l) s[l].kind = kCollNone;
  }

  void do_ldmatrix(int w, LaneScratch* s) {
    st.ldmatrix++;
    uint32_t off[32];
    for (int l = 0; l < 32; ++l) {
      off[l] = smem_off(s[l].addr, 16, "ldmatrix row", w * 32 + l);
      if (off[l] % 16)
        fatal(fmt("%s: ldmatrix row address (shared offset %u) is not 16-byte aligned", where(w * 32 + l).c_str(),
                  off[l]));
    }
    // lane l supplies row l%8 of matrix l/8; every lane reads its own row once
    for (int l = 0; l < 32; ++l) shadow_read(off[l], 16, w * 32 + l, "ldmatrix row");
    int region = th[w * 32].region ? 1 : 0;
    BankCounter& bc = st.bank[kBankLdmatrix];
    bc.instructions[region]++;
    for (int m = 0; m < 4; ++m) {  // one phase per matrix: its eight 16-byte rows
      std::vector<std::pair<uint32_t, uint32_t>> acc;
      for (int r = 0; r < 8; ++r) acc.push_back({off[m * 8 + r], 16});
      uint64_t wf = wavefronts(acc);
      bc.wavefronts[region] += wf;
      bc.conflicts[region] += wf - 1;
    }
    // fragment: lane l gets, from matrix m, row l/4, 16-bit columns 2*(l%4), 2*(l%4)+1
    for (int l = 0; l < 32; ++l)
      for (int m = 0; m < 4; ++m) std::memcpy(&s[l].r[m], synth_smem + off[m * 8 + l / 4] + (l % 4) * 4, 4);
  }

  void do_mma(LaneScratch* s) {
    st.mma++;
    float A[16][16], B[16][8], C[16][8];
    auto lo = [](uint32_t v) { return h2f((uint16_t)(v & 0xffffu)); };
    auto hi = [](uint32_t v) { return h2f((uint16_t)(v >> 16)); };
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      // A (row-major 16x16): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
      A[g][2 * t] = lo(s[l].a[0]);
      A[g][2 * t + 1] = hi(s[l].a[0]);
      A[g + 8][2 * t] = lo(s[l].a[1]);
      A[g + 8][2 * t + 1] = hi(s[l].a[1]);
      A[g][2 * t + 8] = lo(s[l].a[2]);
      A[g][2 * t + 9] = hi(s[l].a[2]);
      A[g + 8][2 * t + 8] = lo(s[l].a[3]);
      A[g + 8][2 * t + 9] = hi(s[l].a[3]);
      // B (16x8, "col"): b0 rows k = 2t, 2t+1 of column g; b1 rows k = 2t+8, 2t+9
      B[2 * t][g] = lo(s[l].b[0]);
      B[2 * t + 1][g] = hi(s[l].b[0]);
      B[2 * t + 8][g] = lo(s[l].b[1]);
      B[2 * t + 9][g] = hi(s[l].b[1]);
      // C/D (16x8 f32): c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
      C[g][2 * t] = s[l].c[0];
      C[g][2 * t + 1] = s[l].c[1];
      C[g + 8][2 * t] = s[l].c[2];
      C[g + 8][2 * t + 1] = s[l].c[3];
    }
    float D[16][8];
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float acc = 0.0f;  // products of f16 are exact in f32
        for (int k = 0; k < 16; ++k) acc += A[i][k] * B[k][j];
        D[i][j] = C[i][j] + acc;
      }
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      s[l].d[0] = D[g][2 * t];
      s[l].d[1] = D[g][2 * t + 1];
      s[l].d[2] = D[g + 8][2 * t];
      s[l].d[3] = D[g + 8][2 * t + 1];
    }
  }

  // ---- serialized scheduler (mu held) --------------------------------------
  int first_ready_lane(int w) const {
    for (int l = 0; l < 32; ++l) {
      int t = w * 32 + l;
      if (t < nthreads && state[t] == kReady) return t;
    }
    return -1;
  }

  int pick_in_order(int after_warp) const {
    for (int i = 0; i < nwarps; ++i) {
      int w;
      if (policy == Policy::Forward) w = i;
      else if (policy == Policy::Reverse) w = nwarps - 1 - i;
      else w = (after_warp + 1 + i) % nwarps;
      int t = first_ready_lane(w);
      if (t >= 0) return t;
    }
    return -1;
  }

  std::string describe_states() const {
    std::string s;
    for (int w = 0; w < nwarps; ++w) {
      int n[4] = {0, 0, 0, 0};
      for (int l = 0; l < 32 && w * 32 + l < nthreads; ++l) n[state[w * 32 + l]]++;
      s += fmt(" warp %d: %d ready, %d at __syncthreads, %d at a warp-collective op, %d exited;", w, n[0], n[1], n[2],
               n[3]);
    }
    return s;
  }

  /// Choose the thread to run after `me` stopped (state already updated).
  /// Completes a warp collective or the block barrier when they are due.
  int pick_next(int me) {
    int w = me / 32;
    int t = first_ready_lane(w);
    if (t >= 0) return t;  // finish this warp's segment first
    bool all_coll = true, any_coll = false;
    for (int l = 0; l < 32; ++l) {
      int u = w * 32 + l;
      bool c = u < nthreads && state[u] == kAtColl;
      all_coll &= c;
      any_coll |= c;
    }
    if (all_coll) {
      complete_collective(w);
      for (int l = 0; l < 32; ++l) state[w * 32 + l] = kReady;
      if (policy != Policy::Interleave) return w * 32;
    } else if (any_coll) {
      fatal(fmt("block (%u,%u,%u) warp %d: a warp-collective op (ldmatrix/mma) is not reached by all 32 lanes;%s",
                idx.x, idx.y, idx.z, w, describe_states().c_str()));
    }
    t = pick_in_order(w);
    if (t >= 0) return t;
    bool any_bar = false;
    for (int u = 0; u < nthreads; ++u) {
      if (state[u] == kAtColl)
        fatal(fmt("block (%u,%u,%u): deadlock;%s", idx.x, idx.y, idx.z, describe_states().c_str()));
      any_bar |= state[u] == kAtBarrier;
    }
    if (!any_bar) return -1;  // all threads exited
    bool some_exited = false;
    for (int u = 0; u < nthreads; ++u) {
      if (state[u] == kAtBarrier) state[u] = kReady;
      else some_exited = true;
    }
    if (some_exited && !warned_exit) {
      warned_exit = true;
      warn(fmt("block (%u,%u,%u): __syncthreads reached after some threads exited (they count as arrived)", idx.x,
               idx.y, idx.z));
    }
    on_barrier_release();
    return pick_in_order(policy == Policy::Interleave ? nwarps - 1 : w);
  }

  void wait_turn(std::unique_lock<std::mutex>& lk, int me) {
    cv[me].wait(lk, [&] { return running == me; });
  }

  /// `me` stopped (its state says why): hand the token on and wait for it.
  void switch_from(std::unique_lock<std::mutex>& lk, int me) {
    int next = pick_next(me);
    running = next;
    if (next < 0) {
      done_cv.notify_all();
      return;
    }
    if (next != me) {
      cv[next].notify_one();
      if (state[me] != kDone) wait_turn(lk, me);
    }
  }

  // ---- the operations --------------------------------------------------------
  void barrier(ThreadCtx& c) {
    if (policy == Policy::Parallel) {
      bbar->arrive_and_wait();
      return;
    }
    std::unique_lock<std::mutex> lk(mu);
    state[c.tid] = kAtBarrier;
    switch_from(lk, c.tid);
  }

  /// Deposit done by the caller in scratch[c.tid]; returns once the warp's op ran.
  void collective(ThreadCtx& c) {
    if (policy == Policy::Parallel) {
      wbar[c.warp]->arrive_and_wait();
      return;
    }
    std::unique_lock<std::mutex> lk(mu);
    state[c.tid] = kAtColl;
    switch_from(lk, c.tid);
  }

  void thread_exit(ThreadCtx& c) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!c.open.empty()) {
        if (st.uncommitted_at_exit++ < 4)
          warn(fmt("%s exited with %zu uncommitted cp.async copies (no cp.async.commit_group after them)",
                   where(c.tid).c_str(), c.open.size()));
      }
      st.pending_at_exit += c.groups.size();
    }
    if (policy == Policy::Parallel) {
      {
        std::lock_guard<std::mutex> g(mu);
        finished_threads++;
      }
      // exited threads count as arrived at later barriers
      wbar[c.warp]->arrive_and_drop();
      bbar->arrive_and_drop();
      std::lock_guard<std::mutex> g(mu);
      done_cv.notify_all();
      return;
    }
    std::unique_lock<std::mutex> lk(mu);
    state[c.tid] = kDone;
    finished_threads++;
    switch_from(lk, c.tid);
  }
};

inline void BlockBarrierDone::operator()() noexcept {
  std::lock_guard<std::mutex> g(b->mu);
  if (b->finished_threads == b->nthreads) return;  // the phase the last exits completed
  b->on_barrier_release();
}
inline void WarpBarrierDone::operator()() noexcept {
  std::lock_guard<std::mutex> g(b->mu);
  int live = 0;
  for (int l = 0; l < 32; ++l) live += b->scratch[w * 32 + l].kind != kCollNone;
  if (live == 0) return;  // the phase the last exits completed
  if (live != 32)
    fatal(fmt("block (%u,%u,%u) warp %d: a warp-collective op (ldmatrix/mma) is not reached by all 32 lanes",
              b->idx.x, b->idx.y, b->idx.z, w));
  b->complete_collective(w);
}

inline ThreadCtx& ctx() {
  ThreadCtx* c = tl_ctx;
  if (!c) fatal("a synth_* device function was called outside a kernel launch");
  return *c;
}

#define SYNTH_EMU_SUM_FIELDS(X)                                                                          \
  X(blocks) X(threads) X(cp_async) X(commits) X(waits) X(barriers) X(ldmatrix) X(mma) X(lds) X(sts)       \
  X(gld) X(gst) X(atomics)                                                                               \
  X(early_reads) X(unsync_reads) X(war_hazards) X(waw_hazards) X(uncommitted_at_exit) X(pending_at_exit) \
  X(wait_over_7) X(unordered_global)
#define SYNTH_EMU_MAX_FIELDS(X) X(max_wait_n) X(max_groups_in_flight)

inline void merge_stats(Stats& into, const Stats& s) {
#define SYNTH_EMU_ADD(f) into.f += s.f;
#define SYNTH_EMU_MAX(f) into.f = std::max(into.f, s.f);
  SYNTH_EMU_SUM_FIELDS(SYNTH_EMU_ADD)
  SYNTH_EMU_MAX_FIELDS(SYNTH_EMU_MAX)
#undef SYNTH_EMU_ADD
#undef SYNTH_EMU_MAX
  for (int c = 0; c < kNumBankCats; ++c)
    for (int r = 0; r < 2; ++r) {
      into.bank[c].instructions[r] += s.bank[c].instructions[r];
      into.bank[c].wavefronts[r] += s.bank[c].wavefronts[r];
      into.bank[c].conflicts[r] += s.bank[c].conflicts[r];
    }
}

// ---------------------------------------------------------------------------
// Launch
// ---------------------------------------------------------------------------
void launch_erased(Body body, void* closure, dim3 grid, dim3 block, size_t smem_bytes) {
  Runtime& R = rt();
  int nthr = (int)(block.x * block.y * block.z);
  if (nthr <= 0 || nthr > 1024) fatal(fmt("block of %d threads (1..1024 allowed)", nthr));
  if (smem_bytes > SYNTH_EMU_SMEM_MAX) fatal(fmt("%zu bytes of dynamic shared memory (max %d)", smem_bytes,
                                                SYNTH_EMU_SMEM_MAX));
  // blocks run one at a time, in the launch order (x fastest) or its reverse, or shuffled: a kernel
  // must not depend on which block of a grid runs first (split-K: which CTA of a tile is last)
  std::vector<long long> order((size_t)grid.x * grid.y * grid.z);
  for (size_t i = 0; i < order.size(); ++i) order[i] = (long long)i;
  if (R.order == 1) std::reverse(order.begin(), order.end());
  if (R.order == 2) std::shuffle(order.begin(), order.end(), std::mt19937(R.order_seed));
  for (long long lin : order) {
        const unsigned bx = (unsigned)(lin % grid.x), by = (unsigned)(lin / grid.x % grid.y),
                       bz = (unsigned)(lin / grid.x / grid.y);
        // uninitialized shared memory reads as NaN
        std::memset(synth_smem, 0xFF, sizeof synth_smem);
        Block blk(R.policy, dim3(bx, by, bz), nthr, smem_bytes);
        blk.lin = lin;
        std::vector<std::thread> threads;
        threads.reserve(nthr);
        {
          std::lock_guard<std::mutex> g(blk.mu);
          if (R.policy != Policy::Parallel) blk.running = blk.pick_in_order(blk.nwarps - 1);
        }
        for (int t = 0; t < nthr; ++t) {
          threads.emplace_back([&, t]() {
            ThreadCtx& c = blk.th[t];
            tl_ctx = &c;
            threadIdx = uint3{(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y),
                              (unsigned)(t / (block.x * block.y))};
            blockIdx = uint3{bx, by, bz};
            blockDim = block;
            gridDim = grid;
            if (R.policy != Policy::Parallel) {
              std::unique_lock<std::mutex> lk(blk.mu);
              blk.wait_turn(lk, t);
            }
            body(closure);
            blk.thread_exit(c);
            tl_ctx = nullptr;
          });
        }
        {
          std::unique_lock<std::mutex> lk(blk.mu);
          bool ok = blk.done_cv.wait_for(lk, std::chrono::duration<double>(R.timeout_s), [&] {
            return blk.finished_threads == nthr;
          });
          if (!ok)
            fatal(fmt("block (%u,%u,%u) did not finish within %.0f s (deadlock at a barrier?)", bx, by, bz,
                      R.timeout_s));
        }
        for (auto& th : threads) th.join();
        blk.flush_logs();
        blk.st.blocks = 1;
        blk.st.threads = (uint64_t)nthr;
        {
          std::lock_guard<std::mutex> g(R.mu);
          merge_stats(R.st, blk.st);
        }
  }
}

}  // namespace synth_emu

// ---------------------------------------------------------------------------
// The device API
// ---------------------------------------------------------------------------
uint32_t synth_lane_id() { return (uint32_t)synth_emu::ctx().lane; }

/// 0: outside the main loop, 1: inside (bank conflicts are reported per region).
void synth_emu_region(int r) { synth_emu::ctx().region = r; }

/// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copy src_bytes
/// (0..16) bytes and zero-fill the rest of the 16. The destination is
/// poisoned now; the data lands when a wait_group forces its group.
void synth_cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& b = *c.blk;
  if (src_bytes < 0 || src_bytes > 16)
    fatal(fmt("%s: cp.async src_bytes = %d (must be 0..16)", b.where(c.tid).c_str(), src_bytes));
  uint32_t off = b.smem_off(smem_dst, 16, "cp.async destination", c.tid);
  if (off % 16)
    fatal(fmt("%s: cp.async destination (shared offset %u) is not 16-byte aligned", b.where(c.tid).c_str(), off));
  if (src_bytes > 0 && (uintptr_t)gmem_src % 16 != 0)
    fatal(fmt("%s: cp.async source %p is not 16-byte aligned", b.where(c.tid).c_str(), gmem_src));
  if (src_bytes > 0 && !in_globals(gmem_src, (size_t)src_bytes))
    fatal(fmt("%s: cp.async reads %d bytes at %p, outside every global buffer", b.where(c.tid).c_str(), src_bytes,
              gmem_src));
  PendingCopy pc;
  pc.off = off;
  std::memset(pc.data, 0, 16);
  if (src_bytes > 0) std::memcpy(pc.data, gmem_src, (size_t)src_bytes);
  {
    std::lock_guard<std::mutex> g(b.mu);
    b.st.cp_async++;
    b.shadow_write(off, 16, c.tid, "cp.async");
    b.chunks[off / 16].pending++;
    std::memset(synth_smem + off, 0xFF, 16);  // poison: f16 NaN until it lands
  }
  c.log[kCpAsync].push_back({off, 16, (uint8_t)c.region});
  c.open.push_back(pc);
}

/// cp.async.commit_group: close the open group (possibly empty).
void synth_cp_async_commit() {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  c.groups.push_back(std::move(c.open));
  c.open.clear();
  std::lock_guard<std::mutex> g(c.blk->mu);
  c.blk->st.commits++;
  c.blk->st.max_groups_in_flight = std::max<uint64_t>(c.blk->st.max_groups_in_flight, c.groups.size());
}

/// cp.async.wait_group N: complete this thread's oldest committed groups
/// until at most N are in flight (as late as that rule allows).
void synth_emu::wait_group(int N) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& b = *c.blk;
  std::lock_guard<std::mutex> g(b.mu);
  b.st.waits++;
  b.st.max_wait_n = std::max<uint64_t>(b.st.max_wait_n, (uint64_t)N);
  if (N > 7 && b.st.wait_over_7++ == 0)
    warn(fmt("%s: cp.async.wait_group %d exceeds the PTX limit of 7", b.where(c.tid).c_str(), N));
  while (c.groups.size() > (size_t)N) {
    for (const PendingCopy& pc : c.groups.front()) b.land(pc, c.tid);
    c.groups.pop_front();
  }
}

/// __syncthreads(): block barrier.
void synth_syncthreads() {
  synth_emu::ThreadCtx& c = synth_emu::ctx();
  c.blk->barrier(c);
}

// ---- split-K: global workspace and tickets (docs/emulator.md, "Split-K") ----------------------
namespace synth_emu {
inline void protocol_error(const std::string& msg) {
  std::lock_guard<std::mutex> g(rt().mu);
  rt().st.unordered_global++;
  note(rt().errors, msg);
}
inline void check_global(const void* p, size_t n, size_t align, const char* what, const Block& b, int tid) {
  if ((uintptr_t)p % align != 0)
    fatal(fmt("%s: %s address %p is not %zu-byte aligned", b.where(tid).c_str(), what, p, align));
  if (!in_globals(p, n))
    fatal(fmt("%s: %s of %zu bytes at %p is outside every global buffer", b.where(tid).c_str(), what, n, p));
}
}  // namespace synth_emu

/// __threadfence(): this thread's earlier global stores are ordered before its later memory
/// operations for every other block (release before a count, acquire after reading one).
void synth_threadfence() {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  std::lock_guard<std::mutex> g(c.blk->mu);
  c.unfenced = 0;
  c.fence_mark = c.blk->acquires;
}

/// st.global.cg.v4.f32: 16 bytes to global memory (L2); other blocks may read them only once this block
/// published them (a fence in every storing thread, then an atomicAdd on a counter) and they observed
/// that count (an acquiring load, then a fence).
void synth_st_cg_f32x4(float* p, float a, float b, float c2, float d) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& blk = *c.blk;
  check_global(p, 16, 16, "st.global.cg", blk, c.tid);
  const float v[4] = {a, b, c2, d};
  std::memcpy(p, v, 16);
  {
    std::lock_guard<std::mutex> g(blk.mu);
    blk.st.gst++;
    c.unfenced++;
    blk.unpublished.push_back((uintptr_t)p);
  }
  std::lock_guard<std::mutex> g(rt().mu);
  rt().gstores[(uintptr_t)p] = Runtime::GStore{blk.lin, false, 0, 0};
}

/// ld.global.cg.v4.f32: 16 bytes from global memory (L2). Another block's bytes need that block's
/// publishing count observed by this block and a fence by this thread after that observation.
void synth_ld_cg_f32x4(float (&r)[4], const float* p) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& blk = *c.blk;
  check_global(p, 16, 16, "ld.global.cg", blk, c.tid);
  Runtime::GStore gs;
  bool found = false;
  {
    std::lock_guard<std::mutex> g(rt().mu);
    auto it = rt().gstores.find((uintptr_t)p);
    if (it != rt().gstores.end()) gs = it->second, found = true;
  }
  unsigned seen = 0;
  uint64_t acquires, mark;
  {
    std::lock_guard<std::mutex> g(blk.mu);
    blk.st.gld++;
    acquires = blk.acquires;
    mark = c.fence_mark;
    auto a = blk.acquired.find(gs.counter);
    if (a != blk.acquired.end()) seen = a->second;
  }
  const std::string at = blk.where(c.tid) + ": ld.global.cg at " + fmt("%p", (const void*)p);
  if (!found)
    protocol_error(at + " reads 16 bytes no block of this launch stored");
  else if (gs.block != blk.lin && !gs.published)
    protocol_error(at + fmt(" reads what block %lld stored and never published (fence, then a count)", gs.block));
  else if (gs.block != blk.lin && seen < gs.value)
    protocol_error(at + fmt(" reads what block %lld published at count %u, but this block has only observed %u "
                            "(no wait for the count)", gs.block, gs.value, seen));
  else if (gs.block != blk.lin && mark < acquires)
    protocol_error(at + fmt(" reads what block %lld stored without a __threadfence after observing its count "
                            "(no acquire)", gs.block));
  std::memcpy(r, p, 16);
}

/// atomicAdd on a 32-bit unsigned global: the old value. Publishes the block's earlier global stores
/// (every storing thread must have fenced them) through the new count.
unsigned synth_atomic_add_u32(unsigned* p, unsigned v) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& blk = *c.blk;
  check_global(p, 4, 4, "atomicAdd", blk, c.tid);
  int unfenced_tid = -1;
  std::vector<uintptr_t> stores;
  {
    std::lock_guard<std::mutex> g(blk.mu);
    blk.st.atomics++;
    for (const ThreadCtx& t : blk.th)
      if (t.unfenced != 0) {
        unfenced_tid = t.tid;
        break;
      }
    stores.swap(blk.unpublished);
  }
  if (unfenced_tid >= 0)
    protocol_error(fmt("%s: atomicAdd while thread %d has global stores not followed by __threadfence (another "
                       "block may see the count before the data)", blk.where(c.tid).c_str(), unfenced_tid));
  unsigned old;
  {
    std::lock_guard<std::mutex> g(rt().mu);
    old = *p;
    *p = old + v;
    auto& h = rt().history[(uintptr_t)p];
    if (h.empty()) h.push_back(old);
    h.push_back(old + v);
    if (unfenced_tid < 0)
      for (uintptr_t a : stores) rt().gstores[a] = Runtime::GStore{blk.lin, true, (uintptr_t)p, old + v};
  }
  // the value an atomic reads is observed as an acquiring load's is (a fence after it acquires)
  std::lock_guard<std::mutex> gb(blk.mu);
  blk.acquires++;
  unsigned& a = blk.acquired[(uintptr_t)p];
  a = std::max(a, old);
  return old;
}

/// ld.acquire.gpu.u32: a value the counter took, adversarially the oldest one this thread has not
/// yet seen (coherence allows any not older than the last it saw), so a wait loop runs through them.
unsigned synth_ld_acquire_u32(const unsigned* p) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& blk = *c.blk;
  check_global(p, 4, 4, "ld.acquire", blk, c.tid);
  unsigned value;
  bool stuck = false;
  {
    std::lock_guard<std::mutex> g(rt().mu);
    auto& h = rt().history[(uintptr_t)p];
    if (h.empty()) h.push_back(*p);
    size_t& i = c.seen[(uintptr_t)p];
    value = h[std::min(i, h.size() - 1)];
    if (i < h.size() - 1) {
      ++i;
      c.stale_loads = 0;
    } else {
      stuck = ++c.stale_loads > kMaxStaleLoads;
    }
  }
  if (stuck)  // blocks run one at a time: the counter cannot move while this one waits
    fatal(fmt("%s: waits on a counter at %p that no block run before it will change (it stays %u): on a GPU "
              "this wait hangs unless a block that has not started yet moves it", blk.where(c.tid).c_str(),
              (const void*)p, value));
  std::lock_guard<std::mutex> g(blk.mu);
  blk.acquires++;
  unsigned& a = blk.acquired[(uintptr_t)p];
  a = std::max(a, value);
  return value;
}

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l supplies the address of
/// row l%8 of matrix l/8; r[m] receives row lane/4, columns 2*(lane%4)+{0,1}
/// of matrix m.
void synth_ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_addr) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  LaneScratch& s = c.blk->scratch[c.tid];
  s.addr = smem_row_addr;
  s.kind = kCollLdmatrix;
  c.blk->collective(c);
  for (int i = 0; i < 4; ++i) r[i] = s.r[i];
}

/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: d = a * b + c.
void synth_mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  using namespace synth_emu;
  ThreadCtx& t = ctx();
  LaneScratch& s = t.blk->scratch[t.tid];
  for (int i = 0; i < 4; ++i) s.a[i] = a[i];
  s.b[0] = b[0];
  s.b[1] = b[1];
  for (int i = 0; i < 4; ++i) s.c[i] = c[i];
  s.kind = kCollMma;
  t.blk->collective(t);
  for (int i = 0; i < 4; ++i) d[i] = s.d[i];
}

/// Instrumented shared load.
void synth_emu::lds(void* out, const void* p, int n) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& b = *c.blk;
  uint32_t off = b.smem_off(p, (size_t)n, "shared load", c.tid);
  {
    std::lock_guard<std::mutex> g(b.mu);
    b.st.lds++;
    b.shadow_read(off, (uint32_t)n, c.tid, "shared load");
    std::memcpy(out, synth_smem + off, (size_t)n);
  }
  c.log[kLds].push_back({off, (uint8_t)n, (uint8_t)c.region});
}

/// Instrumented shared store.
void synth_emu::sts(void* p, const void* in, int n) {
  using namespace synth_emu;
  ThreadCtx& c = ctx();
  Block& b = *c.blk;
  uint32_t off = b.smem_off(p, (size_t)n, "shared store", c.tid);
  {
    std::lock_guard<std::mutex> g(b.mu);
    b.st.sts++;
    b.shadow_write(off, (uint32_t)n, c.tid, "shared store");
    std::memcpy(synth_smem + off, in, (size_t)n);
    for (uint32_t ch = off / 16; ch <= (off + (uint32_t)n - 1) / 16; ++ch) {
      b.chunks[ch].writer = c.tid;
      b.chunks[ch].write_epoch = b.epoch;
    }
  }
  c.log[kSts].push_back({off, (uint8_t)n, (uint8_t)c.region});
}

// ---------------------------------------------------------------------------
// Runner: the host side of emu_harness.cpp
// ---------------------------------------------------------------------------
// RUN_DIR/launch.txt:
//     grid X Y Z
//     block X Y Z
//     smem BYTES
//     policy forward|reverse|interleave|parallel|default
//     timeout SECONDS
//     order forward|reverse|shuffle SEED   (optional; default forward)
//     arg buf NAME ELEM_BYTES NBYTES IN_FILE|- OUT_FILE|-
//     arg int VALUE
//     arg float VALUE
// Every buffer gets 256 guard bytes on both sides; finish() reports a buffer
// written out of bounds, writes the outputs and RUN_DIR/stats.json.
namespace synth_emu {

struct Runner::Impl {
  struct Arg {
    std::string kind, name, in, out;
    int elem = 1;
    size_t nbytes = 0;
    long long ival = 0;
    double fval = 0.0;
    unsigned char* base = nullptr;
    unsigned char* data = nullptr;
  };
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kCanary = 0xA5;

  std::string dir, stats_path;
  dim3 grid{1, 1, 1}, block{32, 1, 1};
  size_t smem = 0;
  double seconds = 0;
  std::vector<Arg> args;

  static Impl*& self() {
    static Impl* r = nullptr;
    return r;
  }

  [[noreturn]] static void die(const std::string& msg) {
    std::fprintf(stderr, "emu_harness: %s\n", msg.c_str());
    std::exit(2);
  }

  Arg& arg(size_t i, const char* kind) {
    if (i >= args.size() || args[i].kind != kind)
      die("argument " + std::to_string(i) + " is not a " + kind + " in launch.txt");
    return args[i];
  }

  void alloc(Arg& a) {
    size_t total = (a.nbytes + 2 * kGuard + 255) / 256 * 256;
    a.base = (unsigned char*)std::aligned_alloc(256, total);
    std::memset(a.base, kCanary, total);
    a.data = a.base + kGuard;
    if (a.in != "-") {
      std::ifstream f(dir + "/" + a.in, std::ios::binary);
      if (!f.read((char*)a.data, (std::streamsize)a.nbytes))
        die("cannot read " + std::to_string(a.nbytes) + " bytes of " + a.in);
    } else {
      std::memset(a.data, 0, a.nbytes);
    }
    register_global(a.data, a.nbytes, a.name);
  }

  static std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') o += '\\', o += ch;
      else if (ch == '\n') o += "\\n";
      else if ((unsigned char)ch < 0x20) o += ' ';
      else o += ch;
    }
    return o + "\"";
  }

  void write_stats() {
    const Stats& s = rt().st;
    std::ostringstream o;
    o << "{\n  \"policy\": \"" << policy_name(rt().policy) << "\",\n  \"seconds\": " << seconds << ",\n";
#define SYNTH_EMU_JSON(f) o << "  \"" #f "\": " << s.f << ",\n";
    SYNTH_EMU_SUM_FIELDS(SYNTH_EMU_JSON)
    SYNTH_EMU_MAX_FIELDS(SYNTH_EMU_JSON)
#undef SYNTH_EMU_JSON
    o << "  \"bank\": {";
    for (int c = 0; c < kNumBankCats; ++c) {
      o << (c ? ", " : "") << "\"" << bank_cat_name(c) << "\": {";
      for (int r = 0; r < 2; ++r)
        o << (r ? ", " : "") << "\"" << (r ? "main" : "other") << "\": {\"instructions\": " << s.bank[c].instructions[r]
          << ", \"wavefronts\": " << s.bank[c].wavefronts[r] << ", \"conflicts\": " << s.bank[c].conflicts[r] << "}";
      o << "}";
    }
    o << "},\n  \"suppressed_messages\": " << rt().suppressed << ",\n  \"warnings\": [";
    for (size_t i = 0; i < rt().warnings.size(); ++i) o << (i ? ", " : "") << jstr(rt().warnings[i]);
    o << "],\n  \"errors\": [";
    for (size_t i = 0; i < rt().errors.size(); ++i) o << (i ? ", " : "") << jstr(rt().errors[i]);
    o << "]\n}\n";
    std::ofstream f(stats_path);
    f << o.str();
  }
};

Runner::Runner(int argc, char** argv) : impl_(new Impl) {
  Impl& I = *impl_;
  if (argc != 2) Impl::die(std::string("usage: ") + argv[0] + " RUN_DIR");
  I.dir = argv[1];
  I.stats_path = I.dir + "/stats.json";
  Impl::self() = impl_;
  rt().on_fatal = [] { Impl::self()->write_stats(); };
  std::ifstream in(I.dir + "/launch.txt");
  if (!in) Impl::die("cannot read " + I.dir + "/launch.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    if (key == "grid") ls >> I.grid.x >> I.grid.y >> I.grid.z;
    else if (key == "block") ls >> I.block.x >> I.block.y >> I.block.z;
    else if (key == "smem") ls >> I.smem;
    else if (key == "timeout") ls >> rt().timeout_s;
    else if (key == "order") {
      std::string o;
      ls >> o;
      if (o == "forward") rt().order = 0;
      else if (o == "reverse") rt().order = 1;
      else if (o == "shuffle") {
        rt().order = 2;
        ls >> rt().order_seed;
      } else Impl::die("unknown block order " + o);
    }
    else if (key == "policy") {
      std::string p;
      ls >> p;
      if (!parse_policy(p, &rt().policy)) Impl::die("unknown policy " + p);
    } else if (key == "arg") {
      Impl::Arg a;
      ls >> a.kind;
      if (a.kind == "buf") {
        ls >> a.name >> a.elem >> a.nbytes >> a.in >> a.out;
        I.alloc(a);
      } else if (a.kind == "int") {
        ls >> a.ival;
      } else if (a.kind == "float") {
        ls >> a.fval;
      } else {
        Impl::die("bad arg line: " + line);
      }
      I.args.push_back(std::move(a));
    } else {
      Impl::die("bad launch.txt line: " + line);
    }
  }
}

Runner::~Runner() {
  for (auto& a : impl_->args) std::free(a.base);
  delete impl_;
}

void* Runner::buf_ptr(size_t i, size_t elem) {
  Impl::Arg& a = impl_->arg(i, "buf");
  if ((size_t)a.elem != elem)
    Impl::die("argument " + std::to_string(i) + " has " + std::to_string(a.elem) + "-byte elements, the kernel takes " +
              std::to_string(elem));
  return a.data;
}

int Runner::i32(size_t i) { return (int)impl_->arg(i, "int").ival; }

float Runner::f32(size_t i) { return (float)impl_->arg(i, "float").fval; }

void Runner::launch_body(Body body, void* closure) {
  auto t0 = std::chrono::steady_clock::now();
  launch_erased(body, closure, impl_->grid, impl_->block, impl_->smem);
  impl_->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int Runner::finish() {
  for (Impl::Arg& a : impl_->args) {
    if (a.kind != "buf") continue;
    for (size_t i = 0; i < Impl::kGuard; ++i)
      if (a.base[i] != Impl::kCanary || a.base[Impl::kGuard + a.nbytes + i] != Impl::kCanary) {
        std::lock_guard<std::mutex> g(rt().mu);
        rt().errors.push_back("buffer " + a.name + " was written out of bounds (guard bytes changed)");
        break;
      }
    if (a.out != "-") {
      std::ofstream o(impl_->dir + "/" + a.out, std::ios::binary);
      o.write((const char*)a.data, (std::streamsize)a.nbytes);
    }
  }
  impl_->write_stats();
  return rt().errors.empty() ? 0 : 3;
}

}  // namespace synth_emu

// synth_emu_sm90.h: a CPU emulator of the sm_90a API the synth Hopper GEMM uses
// (docs/hopper_kernel.md), included by kernel.cu under -DSYNTH_EMULATE. Header-only by default; the emulator
// (synth.emit.sm90.emulate) compiles its runtime once (sm90_runtime.cpp) and each kernel against declarations
// only ("the emulator's runtime, compiled once" below).
//
// Every CUDA thread of a block is a coroutine (ucontext); one runs at a time and control
// passes to the next thread (round robin, forward or reverse, or a seeded random pick) at every synchronization call,
// so the other warp groups run between any two of a thread's barrier, TMA or wgmma calls.
// Adversarial semantics:
//  * TMA: issuing poisons the destination box with 0xFF (f16 NaN); the box lands (zero-filled
//    outside the tensor, complete_tx of the whole box on its mbarrier) only when a waiter on
//    that barrier cannot pass otherwise, or when every thread is blocked: as late as allowed.
//  * mbarrier: pending arrivals, tx-count (may go negative), phase count; try_wait.parity P
//    passes iff phases_completed % 2 != P. A block where every live thread is blocked and no
//    copy is in flight is a hang: reported with each waiter's barrier, parity and state.
//  * wgmma: an op reads its shared-memory operands when a wait_group retires its group (as
//    late as allowed), so a slot overwritten before the wait poisons the result; an op issued
//    while a TMA into its operands is in flight yields NaN (read before the data landed). The
//    register-A form (synth_wgmma_rs_*: A from registers, B MN-major) reads its A registers at
//    retire time too, and reports a race when they changed since the issue. A warp group's wgmma
//    with no wgmma.fence since its last wgmma.wait_group (or since the start) is a protocol error
//    (docs/emulator.md, "Register-operand wgmma and MN-major B"). A write to a wgmma's accumulator
//    registers between its issue and the wait_group that retires it is a race (wgmmas chained on
//    one accumulator excepted; docs/emulator.md, "The accumulator in flight").
//  * clusters (docs/emulator.md, "Clusters"): the CTAs of a thread-block cluster run together, thread j
//    of CTA rank r being coroutine r * threads + j; each CTA has its own shared-memory window (the same
//    shared addresses in every CTA, as on the GPU), barriers, __syncthreads and named barriers. Internal
//    maps key a CTA's shared address a by (rank << 20) | a. A remote arrive or a multicast needs the
//    target barrier's init fenced (fence.mbarrier_init) and a cluster barrier completed since; a CTA
//    that exits while a peer still targets it is reported.
#pragma once
#include <ucontext.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)  // the harness reads the cluster shape from SYNTH_CLUSTER_M / N
#define __grid_constant__
#define __shared__
#define SYNTH_DEV inline

struct synth_dim3 { unsigned x, y, z; };
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

struct CUtensorMap {
  const void* base;
  uint64_t dim[2];      // elements, innermost first
  uint64_t stride1;     // bytes between rows (dim 1)
  uint32_t box[2];      // box extent, innermost first
  uint32_t elem_bytes;
  uint32_t swizzle;     // bytes of the swizzle span: 128 (the only one supported)
};

namespace synth_emu {

constexpr uint32_t SMEM_SIZE = 256 * 1024;
constexpr uint32_t SMEM_BASE = 0x80;  // shared address of synth_smem_raw[0]: the kernel must align itself

struct MBar { bool init = false; int count = 0, pending = 0; long tx = 0, phases = 0;
  int init_thread = -1;   // the thread that initialized it (cluster-wide index)
  bool fenced = false;    // that thread ran fence.mbarrier_init since the init
  bool visible = false;   // and a cluster barrier completed after the fence: peers may target it
};
// dst and bar are cluster-wide keys ((rank << 20) | shared address); from: the issuing CTA's rank
struct Copy { uint32_t dst; CUtensorMap map; int c0, c1; uint32_t bar; long seq; int from = 0; };
struct Op { uint64_t da, db; int n; bool poisoned; float* d[128]; bool bf16 = false; int cta = 0;
  // the register-A form (da unused): each thread's 4 A registers, read when the op retires, and their values
  // at issue (a change in between is a race: PTX leaves the result undefined)
  bool rs = false; const uint32_t* a[128] = {}; uint32_t a_issue[128][4] = {};
  int wg = 0;  // the issuing warp group of the CTA (for reports)
};
// an accumulator with wgmmas in flight (docs/emulator.md, "The accumulator in flight"): each thread's range d[t] ..
// d[t] + len, the ops issued on it and not yet retired, and its values as they were when the first of them was issued
// (then after each retire: the emulator's own writes); a write by the program in between is a race
struct Acc { float* d[128] = {}; int len = 0; int inflight = 0; std::vector<float> snap; };
struct WG {
  int count = 0; long gen = 0; std::string kind; uint64_t da = 0, db = 0; int n = 0; int arg = 0;
  float* d[128]; const uint32_t* a[128];
  bool fenced = false;  // a wgmma.fence since the warp group's last wgmma.wait_group (none at the start)
  std::vector<Op> open; std::vector<std::vector<Op>> committed;
  std::vector<Acc> accs;  // the accumulators with an op in flight
};
struct Warp { int count = 0; long gen = 0; float vals[32], res[32]; int mask = 0; };
// a TMA store (cp.async.bulk.tensor global <- shared): the box's bytes as they were when it was issued; it reads
// them again when its group completes (as late as wait_group.read allows) and the two must agree
struct Store { CUtensorMap map; uint32_t src; int c0, c1; std::vector<unsigned char> at_issue; };
struct Thread { ucontext_t ctx; std::vector<char> stack; bool done = false; std::string waiting; uint32_t wait_bar = 0; uint32_t wait_parity = 0; long failed_at = -1;
  std::vector<Store> bulk_open; std::vector<std::vector<Store>> bulk_groups;  // this thread's bulk async-group FIFO
  long proxy_fence = 0;  // stamp of this thread's last fence.proxy.async
};

// one CTA of the cluster that runs: its block index, shared-memory window, block barrier and exit
struct Cta {
  synth_dim3 block{0, 0, 0};
  std::vector<unsigned char> storage;  // the window of a CTA other than rank 0 (rank 0's is synth_smem_raw)
  unsigned char* win = nullptr;
  int sync_count = 0; long sync_gen = 0; int live = 0;
  bool exited = false;
};

struct State {
  std::vector<Thread> th; int cur = 0, nthreads = 0; bool reverse = false; bool random = false;
  bool starve = false;  // order "starve": thread 1 of each consumer warp group runs only when nothing else can
  int starve_wg = -1;   // orders "starve_wgW" (code STARVE_WG + W): that of warp group W only
  std::vector<Cta> ctas; int tpc = 1;  // the cluster's CTAs (rank order) and the threads of each
  int prefer = -1;           // orders "ctaR_first": this CTA's threads run while one of them may progress
  bool prefer_active = false;  // (computed at each switch) the preferred CTA has a thread that may progress
  int cs_count = 0; long cs_gen = 0;  // the cluster barrier: arrivals and generation
  long stat_multicasts = 0, stat_multicast_copies = 0, stat_remote_arrivals = 0, stat_cluster_syncs = 0,
       stat_clusters = 0;
  std::mt19937 rng{0};
  ucontext_t main_ctx; std::function<void()> body;
  synth_dim3 grid{1, 1, 1}, bdim{1, 1, 1};
  std::map<uint32_t, MBar> bars; std::map<uint32_t, std::string> bar_names; std::vector<Copy> copies; long seq = 0;
  std::vector<WG> wgs; std::vector<Warp> warps;
  int live = 0;  // live threads of the whole cluster
  long stuck = 0;
  long epoch = 0;        // counts state changes that may let a blocked thread pass
  int failed_in_epoch = 0;  // live threads whose wait failed since the last state change
  std::vector<int> urgent;  // threads to run next: the waiters of a barrier whose phase just completed
  int greedy = -1;           // a woken waiter keeps running until it blocks again
  bool failed = false; std::string failure, kind;
  long stat_landed = 0, stat_tx_bytes = 0, stat_wgmma = 0, stat_poisoned_ops = 0, stat_waw = 0, stat_arrivals = 0;
  std::set<std::pair<uint64_t, uint64_t>> wgmma_descs;  // every (A, B) descriptor pair issued (all blocks)
  // named barriers (bar.sync / bar.red id, n): arrivals, generation, the OR of the predicates
  struct Named { int count = 0, expected = 0; long gen = 0; bool acc = false, result = false; };
  std::map<int, Named> named;  // key: rank * 16 + id
  // split-K (docs/emulator.md, "Split-K"): writer block of each 16-byte global chunk stored with
  // st.global.cg, the blocks that published theirs (fence, then ticket), per-thread fence state
  struct GStore { long long block = -1; bool published = false; uintptr_t counter = 0; unsigned value = 0; };
  long acquires = 0; long stale_loads = 0;
  std::map<uintptr_t, GStore> gstores;                   // who stored each 16 bytes, through which count published
  std::map<uintptr_t, std::vector<unsigned>> history;    // every value each counter took
  std::map<uintptr_t, unsigned> acquired;                // this block: the newest value observed per counter
  std::vector<uintptr_t> unpublished;                    // this block's stores not yet published
  std::vector<long> unfenced, fence_mark;
  std::vector<std::map<uintptr_t, size_t>> seen;         // per thread and counter: the next value to return
  long stat_protocol_errors = 0;
  // the TMA-store epilogue: who wrote each 4-byte shared word through st.shared, and when (a stamp)
  struct SWrite { int thread = -1; long stamp = 0; };
  std::vector<SWrite> swrites; long stamp = 0; long stat_stores = 0;  // swrites: per CTA, per word
};
inline State& S() { static State s; return s; }

}  // namespace synth_emu

alignas(4096) inline unsigned char synth_smem_raw[synth_emu::SMEM_SIZE];

#define threadIdx (synth_emu::thread_idx())
#define blockIdx (synth_emu::block_idx())
#define blockDim (synth_emu::S().bdim)
#define gridDim (synth_emu::S().grid)

// ---- the emulator's runtime, compiled once (synth.emit.sm90.emulate: the sm90_runtime object)
// The functions declared here hold the emulator proper (scheduling, barriers, copies, reports, the API calls that
// synchronize); their definitions below stand between #ifndef SYNTH_EMU_SM90_LINKED and #endif. Header-only (the
// default): they are inline, as everything else here. -DSYNTH_EMU_SM90_RUNTIME (sm90_runtime.cpp): they are
// compiled into the runtime object. -DSYNTH_EMU_SM90_LINKED (a kernel's build): only declared, so that a kernel's
// translation unit compiles the kernel, the harness and the templates, and links with the runtime object.
// A new API function: inline where it stands (compiled with each kernel), or declared here and defined between
// #ifndef SYNTH_EMU_SM90_LINKED and #endif (compiled once; a default argument only in the declaration).
#if defined(SYNTH_EMU_SM90_RUNTIME) || defined(SYNTH_EMU_SM90_LINKED)
#define SYNTH_EMU_RT
#else
#define SYNTH_EMU_RT inline
#endif

namespace synth_emu {
SYNTH_EMU_RT std::string cta_name(int r);
SYNTH_EMU_RT std::string cta_prefix(int r);
[[noreturn]] SYNTH_EMU_RT void fail(const std::string& kind, const std::string& msg);
SYNTH_EMU_RT bool held_back(int j);
SYNTH_EMU_RT void update_prefer();
SYNTH_EMU_RT void switch_next();
SYNTH_EMU_RT MBar& gbar_at(uint32_t g, const char* op);
SYNTH_EMU_RT MBar& bar_at(uint32_t a, const char* op);
SYNTH_EMU_RT void maybe_complete(MBar& b);
SYNTH_EMU_RT void land_one(size_t k);
SYNTH_EMU_RT std::string bar_label(uint32_t g);
SYNTH_EMU_RT std::string bar_state(uint32_t g, const MBar& b);
SYNTH_EMU_RT std::string describe_waiters();
SYNTH_EMU_RT void run_op(Op& op);
SYNTH_EMU_RT bool overlaps_copy(uint32_t lo, uint32_t hi, int cta = -1);
SYNTH_EMU_RT void st_shared_pair16(uint32_t a, uint16_t x, uint16_t y);
SYNTH_EMU_RT void complete_bulk_group(Thread& th);
[[noreturn]] SYNTH_EMU_RT void cluster_fail(const std::string& kind, const std::string& msg);
SYNTH_EMU_RT MBar& remote_bar(int d, uint32_t a, const std::string& op);
SYNTH_EMU_RT void cluster_addr(uint32_t ca, int& rank, uint32_t& a);
SYNTH_EMU_RT void complete_cluster_sync();
SYNTH_EMU_RT void cta_exits(int r);
SYNTH_EMU_RT void trampoline();
SYNTH_EMU_RT bool run_cluster(const std::vector<synth_dim3>& blocks, int threads, int order, std::function<void()> body);
SYNTH_EMU_RT bool run_block(synth_dim3 block, int threads, int order, std::function<void()> body);
}  // namespace synth_emu
SYNTH_EMU_RT void synth_syncthreads();
SYNTH_EMU_RT void synth_mbar_init(uint32_t a, unsigned n);
SYNTH_EMU_RT void synth_emu_name_barrier(uint32_t a, const char* name, int slot);
SYNTH_EMU_RT void synth_mbar_inval(uint32_t a);
SYNTH_EMU_RT void synth_fence_mbarrier_init();
SYNTH_EMU_RT void synth_fence_proxy_async();
SYNTH_EMU_RT void synth_st_shared_f32x2(uint32_t a, float x, float y);
SYNTH_EMU_RT void synth_tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1);
SYNTH_EMU_RT void synth_bulk_commit();
SYNTH_EMU_RT void synth_mbar_expect_tx(uint32_t b, uint32_t bytes);
SYNTH_EMU_RT void synth_mbar_arrive(uint32_t b);
SYNTH_EMU_RT void synth_mbar_arrive_expect_tx(uint32_t b, uint32_t bytes);
SYNTH_EMU_RT void synth_mbar_wait(uint32_t a, uint32_t parity);
SYNTH_EMU_RT void synth_tma_load_2d(uint32_t d, const CUtensorMap* map, int c0, int c1, uint32_t a);
SYNTH_EMU_RT void synth_wgmma_fence();
SYNTH_EMU_RT void synth_emu_plain_mma(float* d, uint64_t da, uint64_t db, int n, bool bf16);
SYNTH_EMU_RT void synth_wgmma_commit();
SYNTH_EMU_RT void synth_wgmma_wait(int n);
SYNTH_EMU_RT float synth_shfl_xor(float v, int mask);
SYNTH_EMU_RT bool synth_bar_red_or(int id, int n, bool p);
SYNTH_EMU_RT void synth_threadfence();
SYNTH_EMU_RT void synth_emu_protocol_error(const std::string& msg);
SYNTH_EMU_RT void synth_st_cg_f32x4(float* p, float a, float b, float c, float d);
SYNTH_EMU_RT void synth_ld_cg_f32x4(float* r, const float* p);
SYNTH_EMU_RT unsigned synth_atomic_add_u32(unsigned* p, unsigned v);
SYNTH_EMU_RT unsigned synth_ld_acquire_u32(const unsigned* p);
SYNTH_EMU_RT uint32_t synth_mapa(uint32_t a, uint32_t rank);
SYNTH_EMU_RT void synth_mbar_arrive_cluster(uint32_t ca);
SYNTH_EMU_RT void synth_tma_load_2d_multicast(uint32_t d, const CUtensorMap* map, int c0, int c1, uint32_t bar, uint16_t mask);
SYNTH_EMU_RT void synth_cluster_sync();

namespace synth_emu {

constexpr uint32_t CTA_SHIFT = 20;            // internal key of shared address a of CTA r: (r << 20) | a
constexpr uint32_t CLUSTER_WINDOW = 0x1000000;  // mapa: shared::cluster address of a in CTA r: (r + 1) * this + a
inline int cta_of(int t) { return t / S().tpc; }
inline int my_cta() { return S().cur / S().tpc; }
inline int local_tid(int t) { return t % S().tpc; }
inline bool clustered() { return S().ctas.size() > 1; }
inline uint32_t gkey(uint32_t a, int cta) { return (uint32_t(cta) << CTA_SHIFT) | a; }
inline uint32_t gkey(uint32_t a) { return gkey(a, my_cta()); }
inline synth_dim3 thread_idx() { return {unsigned(local_tid(S().cur)), 0, 0}; }
inline synth_dim3 block_idx() { return S().ctas[my_cta()].block; }
inline long long block_linear_of(int cta) {
  const synth_dim3 b = S().ctas[cta].block;
  return (long long)((b.z * S().grid.y + b.y) * S().grid.x + b.x);
}
// "CTA 1 (block 3,0)": how reports name a CTA of a cluster
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT std::string cta_name(int r) {
  const synth_dim3 b = S().ctas[r].block;
  return "CTA " + std::to_string(r) + " (block " + std::to_string(b.x) + "," + std::to_string(b.y) +
         (b.z ? "," + std::to_string(b.z) : "") + ")";
}
// prefix of a report about a CTA: "" when the cluster is one CTA (the reports of a 1x1 kernel are unchanged)
SYNTH_EMU_RT std::string cta_prefix(int r) { return clustered() ? cta_name(r) + ": " : ""; }

[[noreturn]] SYNTH_EMU_RT void fail(const std::string& kind, const std::string& msg) {
  State& s = S();
  if (!s.failed) { s.failed = true; s.kind = kind; s.failure = msg; }
  swapcontext(&s.th[s.cur].ctx, &s.main_ctx);
  std::abort();  // never resumed
}
#endif

inline void progress() { S().stuck = 0; S().epoch++; S().failed_in_epoch = 0; }

// order "starve": thread 1 of every warp group but the first (a consumer's non-elected thread) of each CTA
// is held back while another live thread has not failed its wait since the last state change (it may still
// progress); orders "starve_wgW": thread 1 of warp group W only (one consumer lags, the others run ahead of it);
// orders "ctaR_first": a thread of another CTA than R is held back while a thread of CTA R may
constexpr int STARVE_WG = 200000;  // the harness's code of order "starve_wgW" is STARVE_WG + W
inline bool starved(int j) {
  const int l = local_tid(j);
  return l >= 128 && l % 128 == 1 && (S().starve_wg < 0 || l / 128 == S().starve_wg);
}
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT bool held_back(int j) {
  State& s = S();
  if (s.prefer_active && cta_of(j) != s.prefer) return true;
  if (!s.starve || !starved(j)) return false;
  for (int k = 0; k < s.nthreads; ++k)
    if (k != j && !s.th[k].done && s.th[k].failed_at != s.epoch && !starved(k)) return true;
  return false;
}
SYNTH_EMU_RT void update_prefer() {
  State& s = S();
  s.prefer_active = false;
  if (s.prefer < 0 || s.prefer >= int(s.ctas.size())) return;
  for (int k = s.prefer * s.tpc; k < (s.prefer + 1) * s.tpc; ++k)
    if (!s.th[k].done && s.th[k].failed_at != s.epoch) { s.prefer_active = true; return; }
}

SYNTH_EMU_RT void switch_next() {
  State& s = S();
  int n = s.nthreads, from = s.cur;
  update_prefer();
  while (!s.urgent.empty()) {
    int j = s.urgent.front();
    s.urgent.erase(s.urgent.begin());
    if (j == from || s.th[j].done || held_back(j)) continue;
    s.cur = j;
    s.greedy = j;
    swapcontext(&s.th[from].ctx, &s.th[j].ctx);
    return;
  }
  if (s.random) {
    for (int tries = 0; tries < 4 * n; ++tries) {
      int j = int(s.rng() % unsigned(n));
      if (s.th[j].done) continue;
      if (j == from) return;
      s.cur = j;
      swapcontext(&s.th[from].ctx, &s.th[j].ctx);
      return;
    }
  }
  for (int k = 1; k <= n; ++k) {
    int j = s.reverse ? ((from - k) % n + n) % n : (from + k) % n;
    if (!s.th[j].done && (j == from || !held_back(j))) {
      if (j == from) return;
      s.cur = j;
      swapcontext(&s.th[from].ctx, &s.th[j].ctx);
      return;
    }
  }
  swapcontext(&s.th[from].ctx, &s.main_ctx);
}
#endif


// Block the current thread until cond() holds; detects a hang: every live thread found its wait
// unsatisfied since the last state change (conditions change only with one) and no copy is left to land.
template <class F> inline void block_until(F cond, const std::string& what) {
  State& s = S();
  s.th[s.cur].waiting = what;
  while (!cond()) {
    if (s.greedy == s.cur) s.greedy = -1;
    Thread& me = s.th[s.cur];
    if (me.failed_at != s.epoch) { me.failed_at = s.epoch; s.failed_in_epoch++; }
    // a hang: every live thread found its wait unsatisfied since the last state change
    if (s.failed_in_epoch >= s.live) {
      if (!s.copies.empty()) { land_one(0); continue; }
      fail("hang", "hang: every thread is blocked and no copy is in flight; " + describe_waiters());
    }
    switch_next();
  }
  s.th[s.cur].waiting.clear();
  s.th[s.cur].wait_bar = 0;
}

inline void yield_point() {
  if (S().greedy == S().cur) return;
  switch_next();
}

inline uint32_t smem_u32(const void* p) {
  auto d = reinterpret_cast<const unsigned char*>(p) - synth_smem_raw;
  if (d < 0 || d >= (long)SMEM_SIZE) fail("fault", "address outside shared memory");
  return SMEM_BASE + uint32_t(d);
}
// the bytes behind a cluster-wide key, and behind a shared address of the current thread's CTA
inline unsigned char* gptr(uint32_t g) { return S().ctas[g >> CTA_SHIFT].win + ((g & ((1u << CTA_SHIFT) - 1)) - SMEM_BASE); }
inline unsigned char* smem_ptr(uint32_t a) { return gptr(gkey(a)); }
inline size_t sw_index(uint32_t a) { return (size_t(my_cta()) * SMEM_SIZE + (a - SMEM_BASE)) / 4; }
inline void check_shared(uint32_t a, uint32_t n) {
  if (a < SMEM_BASE || a + n > SMEM_BASE + SMEM_SIZE) fail("fault", "shared address outside shared memory");
}

#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT MBar& gbar_at(uint32_t g, const char* op) {
  auto it = S().bars.find(g);
  if (it == S().bars.end() || !it->second.init)
    fail("fault", cta_prefix(int(g >> CTA_SHIFT)) + std::string(op) + " on an uninitialized mbarrier at shared offset " +
                      std::to_string(g & ((1u << CTA_SHIFT) - 1)));
  return it->second;
}
SYNTH_EMU_RT MBar& bar_at(uint32_t a, const char* op) {
  if (a >= CLUSTER_WINDOW)  // an address from synth_mapa: only the remote arrive and the multicast take one
    fail("fault", cta_prefix(my_cta()) + op + " on a shared::cluster address (from mapa): it takes a barrier of " +
                      "the calling thread's own CTA (a shared::cta address)");
  check_shared(a, 8);
  return gbar_at(gkey(a), op);
}

SYNTH_EMU_RT void maybe_complete(MBar& b) {
  if (b.pending == 0 && b.tx == 0) {
    b.phases += 1; b.pending = b.count; b.tx = 0; progress();
    // the released side runs first: a producer refills a slot as soon as it is released
    State& s = S();
    for (int t = 0; t < s.nthreads; ++t)
      if (!s.th[t].done && !s.th[t].waiting.empty() && s.th[t].wait_bar && &s.bars[s.th[t].wait_bar] == &b)
        s.urgent.push_back(t);
  }
}
#endif

inline float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 0) v = std::ldexp(float(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(float(m | 1024), int(e) - 25);
  return sign ? -v : v;
}

inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// ---- layouts (checked against CuTe by tests/test_cute_layouts.py; docs/emulator.md, "Checked against CuTe")

// The 128-byte swizzle of TMA (CU_TENSOR_MAP_SWIZZLE_128B) and wgmma (layout type 1): the 16-byte chunk
// bits [4,7) of a shared address XOR its bits [7,10) (CuTe's Swizzle<3,4,3> on byte addresses).
inline uint32_t swz128(uint32_t a) { return a ^ (((a >> 7) & 7) << 4); }

// The fields of a wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"; CuTe's
// GmmaDescriptor): start address, leading and stride byte offsets (each in 16-byte units, 14 bits),
// base offset (3 bits), layout type (2 bits: 0 interleave, 1 128-byte, 2 64-byte, 3 32-byte swizzle).
struct GmmaDesc { uint32_t start, lbo, sbo, base_offset, layout; };
inline GmmaDesc gmma_desc_decode(uint64_t d) {
  return GmmaDesc{uint32_t(d & 0x3FFF) << 4, uint32_t((d >> 16) & 0x3FFF) << 4, uint32_t((d >> 32) & 0x3FFF) << 4,
                  uint32_t((d >> 49) & 7), uint32_t(d >> 62)};
}
// "" when the emulator reads this descriptor's layout (K-major, 128-byte swizzle, base offset 0), else why not.
inline const char* gmma_desc_unsupported(uint64_t d) {
  GmmaDesc g = gmma_desc_decode(d);
  if (g.layout != 1) return "only the 128-byte swizzle layout is emulated";
  if (g.base_offset != 0) return "a non-zero base offset is not emulated (the tiles are 1024-byte aligned)";
  return "";
}
// Shared address of element (row r, column k) of the K-major operand read through descriptor d with
// elements of elem_bytes: 8-row core-matrix groups SBO apart, rows of 128 bytes, then the swizzle.
inline uint32_t gmma_k_major_addr(uint64_t d, int r, int k, uint32_t elem_bytes) {
  GmmaDesc g = gmma_desc_decode(d);
  return swz128(g.start + uint32_t(r / 8) * g.sbo + uint32_t(r % 8) * 128 + uint32_t(k) * elem_bytes);
}
// Shared address of element (n, k) (n along MN, k < 16 along K) of the MN-major operand read through descriptor
// d with a 128-byte swizzle (PTX ISA, "Matrix Descriptor"; CuTe's make_gmma_desc<Major::MN>, canonical layout
// Swizzle<3,4,3> o ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) with T elements per 16 bytes): chunks of 128 bytes along
// MN (64 f16 elements) LBO apart, K rows 128 bytes apart within an 8-row group, 8-row groups SBO apart, then the
// swizzle. A TMA box of [K rows x 64 elements] with CU_TENSOR_MAP_SWIZZLE_128B is one chunk: LBO = the distance
// between two such boxes, SBO = 1024.
inline uint32_t gmma_mn_major_addr(uint64_t d, int n, int k, uint32_t elem_bytes) {
  GmmaDesc g = gmma_desc_decode(d);
  const uint32_t per_chunk = 128 / elem_bytes;
  return swz128(g.start + uint32_t(n) / per_chunk * g.lbo + uint32_t(k / 8) * g.sbo + uint32_t(k % 8) * 128 +
                uint32_t(n) % per_chunk * elem_bytes);
}
// Accumulator layout of wgmma m64nNk16 (f32): value i of thread t of the warp group is C[row][col].
inline void gmma_acc_coord(int t, int i, int& row, int& col) {
  int w = t / 32, l = t % 32;
  row = 16 * w + l / 4 + 8 * ((i >> 1) & 1);
  col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
}
// Register fragment of A of wgmma m64nNk16 with 16-bit A (PTX ISA, "Register Fragments and Shared Memory Matrix
// Layouts", matrix A): value j (0..7) of thread t of the warp group is A[row][k]; value j is the low (j even) or
// high (j odd) half of register j / 2. The same (row, column) as accumulator value j of an n16 tile: an f32
// accumulator block of 16 columns packs in place into one k16 A fragment.
inline void gmma_a_frag_coord(int t, int j, int& row, int& k) { gmma_acc_coord(t, j, row, k); }
// Shared address where element e of box row r lands (TMA tile mode, 128-byte swizzle, an inner box of
// 128 bytes: box rows are 128 bytes apart from the 1024-aligned destination, then the swizzle).
inline uint32_t tma_box_addr(uint32_t dst, uint32_t r, uint32_t e, uint32_t elem_bytes) {
  return swz128(dst + r * 128 + e * elem_bytes);
}

#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void land_one(size_t k) {
  State& s = S();
  Copy c = s.copies[k];  // lands in its destination CTA's window
  s.copies.erase(s.copies.begin() + long(k));
  const CUtensorMap& m = c.map;
  for (uint32_t r = 0; r < m.box[1]; ++r)
    for (uint32_t e = 0; e < m.box[0]; ++e) {
      long gx = long(c.c0) + e, gy = long(c.c1) + r;
      uint16_t v = 0;
      if (gx >= 0 && gy >= 0 && uint64_t(gx) < m.dim[0] && uint64_t(gy) < m.dim[1])
        std::memcpy(&v, static_cast<const unsigned char*>(m.base) + gy * m.stride1 + gx * 2, 2);
      std::memcpy(gptr(tma_box_addr(c.dst, r, e, 2)), &v, 2);
    }
  uint32_t bytes = m.box[0] * m.box[1] * m.elem_bytes;
  s.stat_landed++; s.stat_tx_bytes += bytes;
  MBar& b = gbar_at(c.bar, "complete_tx");
  b.tx -= bytes;
  maybe_complete(b);
  progress();
}

// "mbarrier full[0] (shared 0x...)" of the barrier at cluster-wide key g ("of CTA r" in a cluster)
SYNTH_EMU_RT std::string bar_label(uint32_t g) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%x", unsigned(g & ((1u << CTA_SHIFT) - 1)));
  auto nm = S().bar_names.find(g);
  std::string who = nm != S().bar_names.end() ? nm->second + " (shared " + hex + ")" : std::string("shared ") + hex;
  // a barrier its CTA has not named (not initialized yet): the name a peer gave the same offset
  for (int r = 0; nm == S().bar_names.end() && r < int(S().ctas.size()); ++r)
    if (auto peer = S().bar_names.find(gkey(g & ((1u << CTA_SHIFT) - 1), r)); peer != S().bar_names.end())
      return "mbarrier at shared " + std::string(hex) + " (where CTA " + std::to_string(r) + " has " + peer->second +
             ") of " + cta_name(int(g >> CTA_SHIFT));
  return "mbarrier " + who + (clustered() ? " of " + cta_name(int(g >> CTA_SHIFT)) : "");
}
SYNTH_EMU_RT std::string bar_state(uint32_t g, const MBar& b) {
  return bar_label(g) + " (phases completed " + std::to_string(b.phases) + ", pending arrivals " +
         std::to_string(b.pending) + "/" + std::to_string(b.count) + ", tx " + std::to_string(b.tx) + ")";
}

SYNTH_EMU_RT std::string describe_waiters() {
  State& s = S();
  std::map<std::string, int> by;
  for (int j = 0; j < s.nthreads; ++j) {
    const Thread& t = s.th[j];
    if (t.done || t.waiting.empty()) continue;
    const std::string where = cta_prefix(cta_of(j));  // a cluster: each waiter's CTA
    if (t.wait_bar && s.bars.count(t.wait_bar))  // the barrier's state now, not when the wait began
      by[where + "try_wait.parity " + std::to_string(t.wait_parity) + " on " + bar_state(t.wait_bar, s.bars[t.wait_bar])]++;
    else
      by[where + t.waiting]++;
  }
  std::string out;
  for (auto& [w, n] : by) out += std::to_string(n) + " thread(s) at " + w + "; ";
  return out;
}
#endif


// Warp-group collective: the 128th arrival performs `perform`; the others wait for it.
// (warp groups and warps are per CTA: thread j of CTA r is in warp group j / 128 of that CTA)
inline int wg_index(int t) { return cta_of(t) * ((S().tpc + 127) / 128) + local_tid(t) / 128; }
inline int warp_index(int t) { return cta_of(t) * ((S().tpc + 31) / 32) + local_tid(t) / 32; }
template <class Rec, class F> inline void wg_collective(const char* kind, Rec record, F perform) {
  State& s = S();
  WG& w = s.wgs[wg_index(s.cur)];
  const int l = local_tid(s.cur);
  if (w.count == 0) w.kind = kind;
  else if (w.kind != kind)
    fail("fault", cta_prefix(my_cta()) + "warp group " + std::to_string(l / 128) + ": thread " + std::to_string(l) +
                      " at " + kind + " while others are at " + w.kind);
  record(w, l % 128);
  long my = w.gen;
  if (++w.count == 128) { perform(w); w.count = 0; w.gen++; progress(); yield_point(); return; }
  block_until([&] { return w.gen != my; }, std::string("warp group ") + std::to_string(l / 128) + " " + kind);
}

// The accumulator in flight: a wgmma reads and writes its accumulator registers asynchronously, so another
// instruction's access between its issue and the wait_group that completes it is undefined (PTX ISA,
// wgmma.mma_async). Wgmmas of one warp group on the same accumulator may be in flight together (they chain in
// order). The emulator executes an op at its retire; it tracks each accumulator with ops in flight (Acc) and reports
// a value that changed since the issue of the first (or since the emulator's last write of it) as a race. A read
// alone is invisible here; a read and a write back (a rescale) is not, unless it writes the same bits.
inline Acc* find_acc(WG& w, float* const* d) {
  for (Acc& a : w.accs)
    if (std::equal(d, d + 128, a.d)) return &a;
  return nullptr;
}
inline void acc_snap(Acc& a) {
  a.snap.resize(size_t(128) * a.len);
  for (int t = 0; t < 128; ++t) std::memcpy(&a.snap[size_t(t) * a.len], a.d[t], sizeof(float) * a.len);
}
inline void acc_check(const Acc& a, int cta, int wg) {
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < a.len; ++i)
      if (std::memcmp(&a.d[t][i], &a.snap[size_t(t) * a.len + i], sizeof(float))) {
        char vals[96];
        std::snprintf(vals, sizeof vals, " (%g, now %g)", double(a.snap[size_t(t) * a.len + i]), double(a.d[t][i]));
        fail("race", cta_name(cta) + ": wgmma accumulator: thread " + std::to_string(128 * wg + t) + " (warp group " +
                         std::to_string(wg) + ") wrote accumulator register " + std::to_string(i) + vals +
                         " between the issue of a wgmma accumulating into it and the wgmma.wait_group that completes "
                         "it (PTX: undefined; wait for the wgmma's group before touching its accumulator)");
      }
}
// at a wgmma's issue: its accumulator (op.d, op.n / 2 values a thread) is in flight from here
inline void acc_issue(WG& w, const Op& op) {
  const int len = op.n / 2;
  Acc* a = find_acc(w, op.d);
  if (!a) {
    w.accs.push_back(Acc{});
    a = &w.accs.back();
    std::memcpy(a->d, op.d, sizeof(a->d));
  } else if (len > a->len) {
    acc_check(*a, op.cta, op.wg);
  }
  if (len > a->len) { a->len = len; acc_snap(*a); }
  a->inflight++;
}
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void run_op(Op& op) {
  State& s = S();
  s.stat_wgmma++;
  for (auto [d, which] : {std::pair<uint64_t, const char*>{op.da, "A"}, {op.db, "B"}})
    if ((which[0] == 'B' || !op.rs) && *gmma_desc_unsupported(d))
      fail("fault", std::string("wgmma ") + which + ": " + gmma_desc_unsupported(d));
  auto value = [&](uint16_t h) { return op.bf16 ? bf16_to_float(h) : half_to_float(h); };
  auto elem = [&](uint64_t d, int r, int k, bool mn) {  // the issuing CTA's window
    uint32_t p = mn ? gmma_mn_major_addr(d, r, k, 2) : gmma_k_major_addr(d, r, k, 2);
    if (p < SMEM_BASE || p + 2 > SMEM_BASE + SMEM_SIZE) fail("fault", "wgmma operand outside shared memory");
    uint16_t h; std::memcpy(&h, gptr(gkey(p, op.cta)), 2);
    return value(h);
  };
  float A[64][16], B[256][16];
  if (op.rs) {  // A from each thread's registers, as they are now (the late read); changed since the issue: a race
    for (int t = 0; t < 128; ++t)
      for (int j = 0; j < 8; ++j) {
        const uint32_t reg = op.a[t][j / 2];
        if (reg != op.a_issue[t][j / 2])
          fail("race", cta_prefix(op.cta) + "wgmma (register A): thread " + std::to_string(128 * op.wg + t) +
                       " (warp group " + std::to_string(op.wg) + ") changed A-fragment register " +
                       std::to_string(j / 2) + " between the wgmma's issue and the wgmma.wait_group that completes it "
                       "(PTX: undefined; keep the fragment until the wait)");
        int row, k;
        gmma_a_frag_coord(t, j, row, k);
        A[row][k] = value(uint16_t(reg >> (16 * (j & 1))));
      }
  } else {
    for (int r = 0; r < 64; ++r) for (int k = 0; k < 16; ++k) A[r][k] = elem(op.da, r, k, false);
  }
  for (int r = 0; r < op.n; ++r) for (int k = 0; k < 16; ++k) B[r][k] = elem(op.db, r, k, op.rs);
  for (int t = 0; t < 128; ++t) {
    for (int i = 0; i < op.n / 2; ++i) {
      int row, col;
      gmma_acc_coord(t, i, row, col);
      float acc = 0.0f;
      for (int k = 0; k < 16; ++k) acc += A[row][k] * B[col][k];
      op.d[t][i] = op.poisoned ? NAN : op.d[t][i] + acc;
    }
  }
}

// a copy in flight into [lo, hi) of CTA cta (the current thread's by default)
SYNTH_EMU_RT bool overlaps_copy(uint32_t lo, uint32_t hi, int cta) {
  if (cta < 0) cta = my_cta();
  lo = gkey(lo, cta); hi = gkey(hi, cta);
  for (auto& c : S().copies) {
    uint32_t clo = c.dst, chi = c.dst + c.map.box[0] * c.map.box[1] * c.map.elem_bytes;
    if (clo < hi && lo < chi) return true;
  }
  return false;
}
#endif

}  // namespace synth_emu

// ---- the API of kernel.cu

inline uint32_t synth_smem_u32(const void* p) { return synth_emu::smem_u32(p); }

#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void synth_syncthreads() {  // the calling thread's CTA
  using namespace synth_emu;
  State& s = S();
  Cta& c = s.ctas[my_cta()];
  long my = c.sync_gen;
  if (++c.sync_count >= c.live) { c.sync_count = 0; c.sync_gen++; progress(); yield_point(); return; }
  block_until([&] { return c.sync_gen != my; }, "__syncthreads");
}

SYNTH_EMU_RT void synth_mbar_init(uint32_t a, unsigned n) {
  using namespace synth_emu;
  check_shared(a, 8);
  if (a % 8) fail("fault", "misaligned mbarrier");
  if (n < 1) fail("fault", "mbarrier.init with count 0");
  MBar& m = S().bars[gkey(a)];
  m = MBar{true, int(n), int(n), 0, 0};
  m.init_thread = S().cur;  // visible to the peers only after this thread's fence and a cluster barrier
  progress();
}
// the kernel names its barriers for the emulator's reports (not part of the CUDA API)
SYNTH_EMU_RT void synth_emu_name_barrier(uint32_t a, const char* name, int slot) {
  synth_emu::S().bar_names[synth_emu::gkey(a)] = std::string(name) + "[" + std::to_string(slot) + "]";
}
SYNTH_EMU_RT void synth_mbar_inval(uint32_t a) {
  using namespace synth_emu;
  bar_at(a, "mbarrier.inval");
  for (auto& c : S().copies)
    if (c.bar == gkey(a))
      fail("fault", cta_prefix(my_cta()) + "mbarrier.inval while a TMA copy completing on it is in flight" +
                        (c.from != my_cta() ? " (a multicast from " + cta_name(c.from) + ")" : ""));
  S().bars.erase(gkey(a));
  progress();
}
// fence.mbarrier_init.release.cluster: the calling thread's inits so far are released to the cluster (they
// become visible to the peers at the next cluster barrier)
SYNTH_EMU_RT void synth_fence_mbarrier_init() {
  using namespace synth_emu;
  State& s = S();
  for (auto it = s.bars.lower_bound(gkey(0)); it != s.bars.end() && int(it->first >> CTA_SHIFT) == my_cta(); ++it)
    if (it->second.init && it->second.init_thread == s.cur) it->second.fenced = true;
  yield_point();
}
SYNTH_EMU_RT void synth_fence_proxy_async() {
  auto& s = synth_emu::S();
  s.th[s.cur].proxy_fence = ++s.stamp;
  synth_emu::yield_point();
}
// st.shared.v2.f32 (generic proxy): recorded per word, so that a TMA store reading it can ask for the fence
SYNTH_EMU_RT void synth_st_shared_f32x2(uint32_t a, float x, float y) {
  using namespace synth_emu;
  State& s = S();
  check_shared(a, 8);
  if (a & 7) fail("fault", "misaligned st.shared.v2.f32");
  std::memcpy(smem_ptr(a), &x, 4); std::memcpy(smem_ptr(a + 4), &y, 4);
  for (uint32_t w = 0; w < 2; ++w) s.swrites[sw_index(a) + w] = {s.cur, ++s.stamp};
  yield_point();
}
#endif
namespace synth_emu {
// float -> f16 / bf16 bits, rounded to nearest even (as __floats2half2_rn and __floats2bfloat162_rn)
inline uint16_t float_to_half(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u; std::memcpy(&u, &h, 2); return u;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void st_shared_pair16(uint32_t a, uint16_t x, uint16_t y) {
  State& s = S();
  check_shared(a, 4);
  if (a & 3) fail("fault", "misaligned st.shared.b32");
  std::memcpy(smem_ptr(a), &x, 2); std::memcpy(smem_ptr(a + 2), &y, 2);
  s.swrites[sw_index(a)] = {s.cur, ++s.stamp};
  yield_point();
}
#endif
}  // namespace synth_emu
// st.shared.b32 of two f16 / bf16 values (generic proxy), recorded per word as st.shared.v2.f32 is
inline void synth_st_shared_f16x2(uint32_t a, float x, float y) {
  synth_emu::st_shared_pair16(a, synth_emu::float_to_half(x), synth_emu::float_to_half(y));
}
inline void synth_st_shared_bf16x2(uint32_t a, float x, float y) {
  synth_emu::st_shared_pair16(a, synth_emu::float_to_bf16(x), synth_emu::float_to_bf16(y));
}
// st.global of one f16 / bf16 element (rounded to nearest even): the register stores of a TMA-store kernel's
// launch whose C is not TMA-aligned
inline void synth_st_global_f16(void* p, float v) {
  const uint16_t h = synth_emu::float_to_half(v);
  std::memcpy(p, &h, 2);
}
inline void synth_st_global_bf16(void* p, float v) {
  const uint16_t h = synth_emu::float_to_bf16(v);
  std::memcpy(p, &h, 2);
}
// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group: f32, f16 or bf16 elements, no swizzle (the C map)
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void synth_tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  using namespace synth_emu;
  State& s = S();
  // cuTensorMapEncodeTiled encodes no map whose base or row stride is not a multiple of 16 bytes: the host then
  // passes a zeroed one, which a TMA store must never use
  if (map->base == nullptr)
    fail("fault", "TMA store through a tensor map the host did not encode (C not TMA-aligned: the kernel must "
                  "store such a launch's C from registers)");
  if ((reinterpret_cast<uintptr_t>(map->base) & 15) || map->stride1 % 16)
    fail("fault", "TMA store: the tensor map's base or row stride is not a multiple of 16 bytes");
  if (map->swizzle != 0 || (map->elem_bytes != 4 && map->elem_bytes != 2))
    fail("fault", "TMA store: the emulator knows f32, f16 and bf16 boxes without swizzle");
  const uint32_t n = map->box[0] * map->box[1] * map->elem_bytes;
  check_shared(src, n);
  if ((src - SMEM_BASE) % 128) fail("fault", "TMA store: shared source not 128-byte aligned");
  for (uint32_t w = 0; w < n / 4; ++w) {
    const State::SWrite& wr = s.swrites[sw_index(src) + w];
    if (wr.thread >= 0 && s.th[wr.thread].proxy_fence < wr.stamp)
      synth_emu_protocol_error(cta_prefix(my_cta()) + "TMA store reads shared memory that thread " + std::to_string(local_tid(wr.thread)) +
                               " wrote with st.shared and has not fenced (fence.proxy.async.shared::cta) since: "
                               "the async proxy may read the old bytes");
  }
  Store st{*map, src, c0, c1, std::vector<unsigned char>(smem_ptr(src), smem_ptr(src) + n)};
  s.th[s.cur].bulk_open.push_back(std::move(st));
  yield_point();
}
SYNTH_EMU_RT void synth_bulk_commit() {
  auto& s = synth_emu::S();
  auto& th = s.th[s.cur];
  th.bulk_groups.push_back(std::move(th.bulk_open));
  th.bulk_open.clear();
  synth_emu::yield_point();
}
#endif
namespace synth_emu {
// a bulk group's stores read their boxes (now: as late as allowed), write global memory (clipped to the
// tensor's extent) and poison what they read; a box that changed since its store was issued is a race
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void complete_bulk_group(Thread& th) {
  State& s = S();
  std::vector<Store> g = std::move(th.bulk_groups.front());
  th.bulk_groups.erase(th.bulk_groups.begin());
  for (Store& st : g) {
    const uint32_t n = uint32_t(st.at_issue.size());
    if (std::memcmp(st.at_issue.data(), smem_ptr(st.src), n) != 0)
      fail("race", "a TMA store's staging box changed between the store's issue and its wait_group.read: the "
                   "store may read either (a slot rewritten before the store read it, or written after it was issued)");
    const CUtensorMap& m = st.map;
    for (uint32_t r = 0; r < m.box[1]; ++r)
      for (uint32_t e = 0; e < m.box[0]; ++e) {
        long gx = long(st.c0) + e, gy = long(st.c1) + r;
        if (gx < 0 || gy < 0 || uint64_t(gx) >= m.dim[0] || uint64_t(gy) >= m.dim[1]) continue;
        const uint32_t eb = m.elem_bytes;
        std::memcpy(const_cast<unsigned char*>(static_cast<const unsigned char*>(m.base)) + gy * m.stride1 + gx * eb,
                    smem_ptr(st.src + (r * m.box[0] + e) * eb), eb);
      }
    std::memset(smem_ptr(st.src), 0xFF, n);  // poisoned: NaN for anyone who reads the slot before rewriting it
    for (uint32_t w = 0; w < n / 4; ++w) s.swrites[sw_index(st.src) + w] = {};
    s.stat_stores++;
  }
  progress();
}
#endif
}  // namespace synth_emu
template <int N> inline void synth_bulk_wait_read() {
  auto& s = synth_emu::S();
  auto& th = s.th[s.cur];
  while (th.bulk_groups.size() > size_t(N)) synth_emu::complete_bulk_group(th);
  synth_emu::yield_point();
}

#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void synth_mbar_expect_tx(uint32_t b, uint32_t bytes) {
  using namespace synth_emu;
  MBar& m = bar_at(b, "mbarrier.expect_tx");
  m.tx += bytes;
  progress();
  yield_point();
}
SYNTH_EMU_RT void synth_mbar_arrive(uint32_t b) {
  using namespace synth_emu;
  MBar& m = bar_at(b, "mbarrier.arrive");
  S().stat_arrivals++;
  m.pending -= 1;
  maybe_complete(m);
  progress();
  yield_point();
}
SYNTH_EMU_RT void synth_mbar_arrive_expect_tx(uint32_t b, uint32_t bytes) {
  using namespace synth_emu;
  MBar& m = bar_at(b, "mbarrier.arrive.expect_tx");
  m.tx += bytes;
  S().stat_arrivals++;
  m.pending -= 1;
  maybe_complete(m);
  progress();
  yield_point();
}
SYNTH_EMU_RT void synth_mbar_wait(uint32_t a, uint32_t parity) {
  using namespace synth_emu;
  State& s = S();
  bar_at(a, "mbarrier.try_wait");
  const uint32_t g = gkey(a);  // the waiting thread's own CTA's barrier
  auto passed = [&] { return (s.bars[g].phases % 2) != long(parity & 1); };
  s.th[s.cur].wait_bar = g;
  s.th[s.cur].wait_parity = parity & 1;
  // land this barrier's copies one at a time, only as far as the wait needs them
  for (size_t k = 0; !passed() && k < s.copies.size();) {
    if (s.copies[k].bar == g) land_one(k); else ++k;
  }
  block_until([&] {
    for (size_t k = 0; !passed() && k < s.copies.size();) { if (s.copies[k].bar == g) land_one(k); else ++k; }
    return passed();
  }, "try_wait.parity");
  yield_point();
}

SYNTH_EMU_RT void synth_tma_load_2d(uint32_t d, const CUtensorMap* map, int c0, int c1, uint32_t a) {
  using namespace synth_emu;
  State& s = S();
  bar_at(a, "cp.async.bulk.tensor");
  if (map->swizzle != 128 || map->box[0] * map->elem_bytes != 128)
    fail("fault", "TMA: only a 128-byte swizzle with a 128-byte inner box is emulated");
  if (d % 1024) fail("fault", "TMA with 128-byte swizzle: destination not 1024-byte aligned");
  uint32_t bytes = map->box[0] * map->box[1] * map->elem_bytes;
  if (d + bytes > SMEM_BASE + SMEM_SIZE) fail("fault", "TMA destination outside shared memory");
  if (overlaps_copy(d, d + bytes)) s.stat_waw++;
  std::memset(smem_ptr(d), 0xFF, bytes);
  s.copies.push_back(Copy{gkey(d), *map, c0, c1, gkey(a), s.seq++, my_cta()});
  progress();
  yield_point();
}

SYNTH_EMU_RT void synth_wgmma_fence() {
  synth_emu::wg_collective("wgmma.fence", [](synth_emu::WG&, int) {}, [](synth_emu::WG& w) { w.fenced = true; });
}
#endif
namespace synth_emu {
// a wgmma of a warp group that has not run wgmma.fence since its last wait_group (or at all): reported. PTX asks for
// the fence before the first wgmma and between any other access of a wgmma's accumulator or A-fragment registers and
// that wgmma; the emulator cannot see register accesses, so it asks for one after every wait_group (CUTLASS's and
// FA3's warpgroup_arrive before each batch of wgmmas)
inline void check_wgmma_fenced(const WG& w) {
  if (!w.fenced)
    synth_emu_protocol_error(cta_prefix(my_cta()) + "warp group " + std::to_string(local_tid(S().cur) / 128) +
                             " issues wgmma.mma_async with no wgmma.fence since its last wgmma.wait_group (or since "
                             "the start): PTX requires wgmma.fence before the first wgmma and before a wgmma whose "
                             "accumulator or A-fragment registers other instructions accessed");
}
}  // namespace synth_emu

template <int N> inline void synth_wgmma_issue(float* d, uint64_t da, uint64_t db, bool bf16) {
  using namespace synth_emu;
  wg_collective("wgmma.mma_async",
                [&](WG& w, int t) {
                  if (w.count == 0) { w.da = da; w.db = db; }
                  else if (w.da != da || w.db != db) fail("fault", "wgmma: threads of a warp group pass different descriptors");
                  w.d[t] = d;
                },
                [&](WG& w) {
                  check_wgmma_fenced(w);
                  Op op{w.da, w.db, N, false, {}, bf16, my_cta()};
                  std::memcpy(op.d, w.d, sizeof(op.d));
                  op.wg = local_tid(S().cur) / 128;
                  acc_issue(w, op);
                  S().wgmma_descs.insert({w.da, w.db});
                  uint32_t sa = gmma_desc_decode(w.da).start, sb = gmma_desc_decode(w.db).start;
                  if (overlaps_copy(sa & ~1023u, (sa & ~1023u) + 64 * 128) || overlaps_copy(sb & ~1023u, (sb & ~1023u) + N * 128)) {
                    op.poisoned = true; S().stat_poisoned_ops++;
                  }
                  w.open.push_back(op);
                });
}
#define SYNTH_WGMMA_SHAPE(N) \
  inline void synth_wgmma_m64n##N##k16(float* d, uint64_t da, uint64_t db) { synth_wgmma_issue<N>(d, da, db, false); } \
  inline void synth_wgmma_bf16_m64n##N##k16(float* d, uint64_t da, uint64_t db) { synth_wgmma_issue<N>(d, da, db, true); }
SYNTH_WGMMA_SHAPE(16) SYNTH_WGMMA_SHAPE(32) SYNTH_WGMMA_SHAPE(48) SYNTH_WGMMA_SHAPE(64) SYNTH_WGMMA_SHAPE(80)
SYNTH_WGMMA_SHAPE(96) SYNTH_WGMMA_SHAPE(112) SYNTH_WGMMA_SHAPE(128) SYNTH_WGMMA_SHAPE(144) SYNTH_WGMMA_SHAPE(160)
SYNTH_WGMMA_SHAPE(176) SYNTH_WGMMA_SHAPE(192) SYNTH_WGMMA_SHAPE(208) SYNTH_WGMMA_SHAPE(224) SYNTH_WGMMA_SHAPE(240)
SYNTH_WGMMA_SHAPE(256)

// ---- the attention kernel's device functions (synth.emit.sm90.attention_ptx holds their inline PTX)

// wgmma.mma_async m64nNk16 with A from registers (4 per thread, two 16-bit values each: gmma_a_frag_coord) and B
// MN-major through descriptor db (transpose-b 1; synth_desc_mn128), accumulating into d (scale-d 1). Retired as the
// shared-memory form: B and the A registers are read when a wait_group completes the group; a TMA in flight into B at
// the issue poisons the result (NaN); A registers changed between the issue and that wait_group: a race.
template <int N> inline void synth_wgmma_rs_issue(float* d, const uint32_t* a, uint64_t db, bool bf16) {
  using namespace synth_emu;
  wg_collective("wgmma.mma_async (register A)",
                [&](WG& w, int t) {
                  if (w.count == 0) w.db = db;
                  else if (w.db != db) fail("fault", "wgmma: threads of a warp group pass different descriptors");
                  w.d[t] = d; w.a[t] = a;
                },
                [&](WG& w) {
                  check_wgmma_fenced(w);
                  Op op{0, w.db, N, false, {}, bf16, my_cta()};
                  std::memcpy(op.d, w.d, sizeof(op.d));
                  op.rs = true; op.wg = local_tid(S().cur) / 128;
                  acc_issue(w, op);
                  for (int t = 0; t < 128; ++t) {
                    op.a[t] = w.a[t];
                    std::memcpy(op.a_issue[t], w.a[t], sizeof(op.a_issue[t]));
                  }
                  S().wgmma_descs.insert({0, w.db});
                  const GmmaDesc g = gmma_desc_decode(w.db);
                  for (int c = 0; c < (N + 63) / 64; ++c) {  // each 64-element chunk: 16 K rows of 128 bytes
                    const uint32_t lo = (g.start + uint32_t(c) * g.lbo) & ~127u;
                    if (overlaps_copy(lo, lo + 16 * 128)) op.poisoned = true;
                  }
                  if (op.poisoned) S().stat_poisoned_ops++;
                  w.open.push_back(op);
                });
}
#define SYNTH_WGMMA_RS_SHAPE(N) \
  inline void synth_wgmma_rs_m64n##N##k16(float* d, const uint32_t* a, uint64_t db) { \
    synth_wgmma_rs_issue<N>(d, a, db, false); } \
  inline void synth_wgmma_rs_bf16_m64n##N##k16(float* d, const uint32_t* a, uint64_t db) { \
    synth_wgmma_rs_issue<N>(d, a, db, true); }
SYNTH_WGMMA_RS_SHAPE(16) SYNTH_WGMMA_RS_SHAPE(32) SYNTH_WGMMA_RS_SHAPE(48) SYNTH_WGMMA_RS_SHAPE(64)
SYNTH_WGMMA_RS_SHAPE(80) SYNTH_WGMMA_RS_SHAPE(96) SYNTH_WGMMA_RS_SHAPE(112) SYNTH_WGMMA_RS_SHAPE(128)
SYNTH_WGMMA_RS_SHAPE(144) SYNTH_WGMMA_RS_SHAPE(160) SYNTH_WGMMA_RS_SHAPE(176) SYNTH_WGMMA_RS_SHAPE(192)
SYNTH_WGMMA_RS_SHAPE(208) SYNTH_WGMMA_RS_SHAPE(224) SYNTH_WGMMA_RS_SHAPE(240) SYNTH_WGMMA_RS_SHAPE(256)
// The MN-major, 128-byte-swizzle descriptor (the same text as synth.emit.sm90.attention_ptx's): start >> 4,
// LBO = chunk_bytes (from one 64-element MN chunk to the next), SBO 1024 bytes (8 K rows), layout 1 (128B)
inline uint64_t synth_desc_mn128(uint32_t a, uint32_t chunk_bytes) {
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((chunk_bytes >> 4) & 0x3FFF) << 16) |
         ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
// ex2.approx.ftz.f32: 2^x (exact here; the GPU's is within 2 ulp), subnormal inputs and results flushed to zero
// (sign kept), -inf -> +0, +inf -> +inf, NaN -> NaN
inline float synth_ex2(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float r = std::exp2(x);
  return std::fpclassify(r) == FP_SUBNORMAL ? 0.0f : r;
}
// cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32: two f32 rounded to nearest even, lo in bits 0..15, hi in bits 16..31
inline uint32_t synth_pack_f16x2(float lo, float hi) {
  return uint32_t(synth_emu::float_to_half(lo)) | uint32_t(synth_emu::float_to_half(hi)) << 16;
}
inline uint32_t synth_pack_bf16x2(float lo, float hi) {
  return uint32_t(synth_emu::float_to_bf16(lo)) | uint32_t(synth_emu::float_to_bf16(hi)) << 16;
}

// A test-only stand-in for a warp group's wgmma (docs/emulator.md, "Starved threads"): THIS thread's
// accumulators from shared memory now, as plain per-thread reads with no warp-group convergence (the shape
// of a consumer that reads its slot with ld.shared instead of wgmma)
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void synth_emu_plain_mma(float* d, uint64_t da, uint64_t db, int n, bool bf16) {
  using namespace synth_emu;
  yield_point();
  const int t = local_tid(S().cur) % 128;
  auto elem = [&](uint64_t desc, int r, int k) {
    uint32_t p = gmma_k_major_addr(desc, r, k, 2);
    if (p < SMEM_BASE || p + 2 > SMEM_BASE + SMEM_SIZE) fail("fault", "plain read outside shared memory");
    uint16_t h; std::memcpy(&h, smem_ptr(p), 2);
    return bf16 ? bf16_to_float(h) : half_to_float(h);
  };
  for (int i = 0; i < n / 2; ++i) {
    int row, col;
    gmma_acc_coord(t, i, row, col);
    float acc = 0.0f;
    for (int k = 0; k < 16; ++k) acc += elem(da, row, k) * elem(db, col, k);
    d[i] += acc;
  }
}

SYNTH_EMU_RT void synth_wgmma_commit() {
  using namespace synth_emu;
  wg_collective("wgmma.commit_group", [](WG&, int) {}, [](WG& w) { w.committed.push_back(w.open); w.open.clear(); });
}
SYNTH_EMU_RT void synth_wgmma_wait(int n) {
  using namespace synth_emu;
  if (n < 0) fail("fault", "wgmma.wait_group with a negative count " + std::to_string(n));
  wg_collective("wgmma.wait_group",
                [&](WG& w, int t) {
                  (void)t;
                  if (w.count == 0) w.arg = n;
                  else if (w.arg != n) fail("fault", "wgmma.wait_group: threads of a warp group wait different counts");
                },
                [](WG& w) {
                  w.fenced = false;  // the warp group may access wgmma registers from here: a fence before the next
                  const int cta = my_cta(), wg = local_tid(S().cur) / 128;
                  for (const Acc& a : w.accs) acc_check(a, cta, wg);  // written while in flight: a race
                  while (long(w.committed.size()) > w.arg) {
                    for (auto& op : w.committed.front()) {
                      run_op(op);
                      if (Acc* a = find_acc(w, op.d); a && --a->inflight == 0)
                        w.accs.erase(w.accs.begin() + (a - w.accs.data()));
                      for (Acc& b : w.accs) acc_snap(b);  // the emulator's own write (and one of an overlapping range)
                    }
                    w.committed.erase(w.committed.begin());
                  }
                });
}
#endif
template <int N> inline void synth_wgmma_wait_n() { synth_wgmma_wait(N); }
template <int R> inline void synth_setmaxnreg_dec() { synth_emu::yield_point(); }
template <int R> inline void synth_setmaxnreg_inc() { synth_emu::yield_point(); }

#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT float synth_shfl_xor(float v, int mask) {
  using namespace synth_emu;
  State& s = S();
  Warp& w = s.warps[warp_index(s.cur)];
  int lane = local_tid(s.cur) % 32;
  w.vals[lane] = v; w.mask = mask;
  long my = w.gen;
  if (++w.count == 32) {
    for (int l = 0; l < 32; ++l) w.res[l] = w.vals[l ^ (w.mask & 31)];
    w.count = 0; w.gen++; progress();
    return w.res[lane];
  }
  block_until([&] { return w.gen != my; }, "shfl.sync of warp " + std::to_string(local_tid(s.cur) / 32));
  return w.res[lane];
}
#endif
// a warp-uniform value (CUDA: broadcast from lane 0); the kernel passes one value per warp
inline int synth_uniform(int v) { return v; }
inline uint32_t synth_pinned_uniform(uint32_t v) { return v; }
inline void synth_stg4(float* p, float a, float b, float c, float d) {
  if (reinterpret_cast<uintptr_t>(p) & 15) synth_emu::fail("fault", "misaligned 128-bit global store");
  p[0] = a; p[1] = b; p[2] = c; p[3] = d;
}
inline void synth_pin_u64(const uint64_t&) {}
inline int synth_block_linear() { return int(synth_emu::block_linear_of(synth_emu::my_cta())); }
// bar.red.or.pred id, n, p: the named barrier of n threads, returning the OR of their predicates
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT bool synth_bar_red_or(int id, int n, bool p) {
  using namespace synth_emu;
  State& s = S();
  if (id <= 0 || id > 15 || n <= 0 || n % 32 || n > s.tpc) fail("fault", "bad named barrier (id 1..15, n a multiple of 32)");
  const int key = my_cta() * 16 + id;  // the calling thread's CTA's barrier
  State::Named& b = s.named[key];
  if (b.expected == 0) b.expected = n;
  else if (b.expected != n) fail("fault", "bar.sync " + std::to_string(id) + " with different thread counts");
  long my = b.gen;
  b.acc = b.acc || p;
  if (++b.count >= n) {
    b.result = b.acc; b.acc = false; b.count = 0; b.expected = 0; b.gen++;
    progress(); yield_point(); return b.result;
  }
  block_until([&] { return s.named[key].gen != my; }, "bar.sync " + std::to_string(id));
  return s.named[key].result;
}
#endif
inline void synth_bar_sync(int id, int n) { synth_bar_red_or(id, n, false); }
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void synth_threadfence() {
  auto& s = synth_emu::S();
  s.unfenced[s.cur] = 0; s.fence_mark[s.cur] = s.acquires;
  synth_emu::yield_point();
}
SYNTH_EMU_RT void synth_emu_protocol_error(const std::string& msg) {
  auto& s = synth_emu::S();
  if (s.stat_protocol_errors++ == 0) synth_emu::fail("protocol", msg);
}
// st.global.cg.v4.f32: other blocks may read the bytes once this block published them (a fence in
// every storing thread, then an atomicAdd on a counter) and they observed that count (then a fence)
SYNTH_EMU_RT void synth_st_cg_f32x4(float* p, float a, float b, float c, float d) {
  auto& s = synth_emu::S();
  if (reinterpret_cast<uintptr_t>(p) & 15) synth_emu::fail("fault", "misaligned st.global.cg");
  p[0] = a; p[1] = b; p[2] = c; p[3] = d;
  s.gstores[reinterpret_cast<uintptr_t>(p)] = {synth_emu::block_linear_of(synth_emu::my_cta()), false, 0, 0};
  s.unpublished.push_back(reinterpret_cast<uintptr_t>(p));
  s.unfenced[s.cur]++;
  synth_emu::yield_point();
}
SYNTH_EMU_RT void synth_ld_cg_f32x4(float* r, const float* p) {
  auto& s = synth_emu::S();
  if (reinterpret_cast<uintptr_t>(p) & 15) synth_emu::fail("fault", "misaligned ld.global.cg");
  auto it = s.gstores.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.gstores.end()) {
    synth_emu_protocol_error("ld.global.cg reads 16 bytes no block of this launch stored");
  } else if (const auto& g = it->second; g.block != synth_emu::block_linear_of(synth_emu::my_cta())) {
    if (!g.published)
      synth_emu_protocol_error("ld.global.cg reads what block " + std::to_string(g.block) + " never published");
    else if (s.acquired[g.counter] < g.value)
      synth_emu_protocol_error("ld.global.cg reads what block " + std::to_string(g.block) + " published at count " +
                               std::to_string(g.value) + " before this block observed that count (no wait)");
    else if (s.fence_mark[s.cur] < s.acquires)
      synth_emu_protocol_error("ld.global.cg reads another block's partial without a __threadfence after observing "
                               "its count (no acquire)");
  }
  r[0] = p[0]; r[1] = p[1]; r[2] = p[2]; r[3] = p[3];
  synth_emu::yield_point();
}
SYNTH_EMU_RT unsigned synth_atomic_add_u32(unsigned* p, unsigned v) {
  auto& s = synth_emu::S();
  if (reinterpret_cast<uintptr_t>(p) & 3) synth_emu::fail("fault", "misaligned atomicAdd");
  bool fenced = true;
  for (long u : s.unfenced) fenced = fenced && u == 0;
  if (!fenced && !s.unpublished.empty())
    synth_emu_protocol_error("atomicAdd while a thread of the block has global stores not followed by __threadfence");
  const unsigned old = *p;
  *p = old + v;
  auto& h = s.history[reinterpret_cast<uintptr_t>(p)];
  if (h.empty()) h.push_back(old);
  h.push_back(old + v);
  for (uintptr_t a : s.unpublished)
    s.gstores[a] = {synth_emu::block_linear_of(synth_emu::my_cta()), true, reinterpret_cast<uintptr_t>(p), old + v};
  s.unpublished.clear();
  s.acquires++;  // the value an atomic reads is observed as an acquiring load's is (a fence after it acquires)
  unsigned& seen = s.acquired[reinterpret_cast<uintptr_t>(p)];
  seen = std::max(seen, old);
  synth_emu::yield_point();
  return old;
}
// ld.acquire.gpu.u32: adversarially the oldest value of the counter this thread has not seen yet
SYNTH_EMU_RT unsigned synth_ld_acquire_u32(const unsigned* p) {
  auto& s = synth_emu::S();
  if (reinterpret_cast<uintptr_t>(p) & 3) synth_emu::fail("fault", "misaligned ld.acquire");
  auto& h = s.history[reinterpret_cast<uintptr_t>(p)];
  if (h.empty()) h.push_back(*p);
  size_t& i = s.seen[s.cur][reinterpret_cast<uintptr_t>(p)];
  const unsigned value = h[std::min(i, h.size() - 1)];
  if (i < h.size() - 1) {
    ++i;
    s.stale_loads = 0;
  } else if (++s.stale_loads > 64) {
    // blocks run one at a time: the counter cannot move while this one waits
    synth_emu::fail("hang", "hang: a wait on a counter that no block run before this one will change (it stays " +
                    std::to_string(value) + "): on a GPU it hangs unless a block that has not started moves it");
  }
  s.acquires++;
  unsigned& a = s.acquired[reinterpret_cast<uintptr_t>(p)];
  a = std::max(a, value);
  synth_emu::yield_point();
  return value;
}
#endif
inline float4 synth_ldg4(const float* p) {
  if (reinterpret_cast<uintptr_t>(p) & 15) synth_emu::fail("fault", "misaligned 128-bit global load");
  return {p[0], p[1], p[2], p[3]};
}

// ---- clusters (docs/emulator.md, "Clusters"): the cluster API of kernel.cu

namespace synth_emu {
// A report about the cluster: kind "protocol" for a use of an exited CTA, "fault" otherwise
#ifndef SYNTH_EMU_SM90_LINKED
[[noreturn]] SYNTH_EMU_RT void cluster_fail(const std::string& kind, const std::string& msg) { fail(kind, msg); }

// The barrier at shared address a of CTA d as a peer's remote operation `op` sees it: CTA d must not have
// exited, the barrier must be initialized there, and its init visible to the cluster (the initializing
// thread's fence.mbarrier_init, then a completed cluster barrier)
SYNTH_EMU_RT MBar& remote_bar(int d, uint32_t a, const std::string& op) {
  State& s = S();
  const int me = my_cta();
  check_shared(a, 8);
  const uint32_t g = gkey(a, d);
  if (s.ctas[d].exited)
    cluster_fail("protocol", op + " by " + cta_name(me) + " on " + bar_label(g) + ", which has exited: " +
                                 cta_name(d) + "'s shared memory is gone while its peer still targets it");
  auto it = s.bars.find(g);
  if (it == s.bars.end() || !it->second.init)
    cluster_fail("fault", op + " by " + cta_name(me) + " on the uninitialized " + bar_label(g) +
                              " (not initialized yet, or invalidated)");
  if (!it->second.visible)
    cluster_fail("fault", op + " by " + cta_name(me) + " on " + bar_label(g) + " whose init is not visible to " +
                              "the cluster: " + (it->second.fenced
                                  ? "no cluster barrier completed since its fence.mbarrier_init"
                                  : "its initializing thread ran no fence.mbarrier_init before a cluster barrier"));
  return it->second;
}
// decode a shared::cluster address (synth_mapa's, or a shared::cta address of the calling thread's CTA)
SYNTH_EMU_RT void cluster_addr(uint32_t ca, int& rank, uint32_t& a) {
  if (ca < CLUSTER_WINDOW) { rank = my_cta(); a = ca; return; }
  rank = int(ca / CLUSTER_WINDOW) - 1; a = ca % CLUSTER_WINDOW;
  if (rank >= int(S().ctas.size()))
    fail("fault", cta_prefix(my_cta()) + "shared::cluster address of CTA rank " + std::to_string(rank) +
                      " outside the cluster of " + std::to_string(S().ctas.size()) + " CTA(s)");
}
SYNTH_EMU_RT void complete_cluster_sync() {
  State& s = S();
  s.cs_count = 0; s.cs_gen++; s.stat_cluster_syncs++;
  for (auto& [g, b] : s.bars) if (b.init && b.fenced) b.visible = true;  // released inits: now cluster-visible
  progress();
}
#endif
}  // namespace synth_emu

// %cluster_ctarank
inline uint32_t synth_cluster_ctarank() { return uint32_t(synth_emu::my_cta()); }
// mapa.shared::cluster.u32: the shared::cluster address of local shared address a in CTA `rank`
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT uint32_t synth_mapa(uint32_t a, uint32_t rank) {
  using namespace synth_emu;
  if (rank >= S().ctas.size())
    fail("fault", cta_prefix(my_cta()) + "mapa to CTA rank " + std::to_string(rank) + " outside the cluster of " +
                      std::to_string(S().ctas.size()) + " CTA(s)");
  if (a >= CLUSTER_WINDOW) fail("fault", "mapa of an address that is not a shared::cta address");
  check_shared(a, 1);
  synth_emu::yield_point();
  return (rank + 1) * CLUSTER_WINDOW + a;
}
// mbarrier.arrive.release.cluster.shared::cluster.b64: an arrive on the barrier of the CTA the address names
SYNTH_EMU_RT void synth_mbar_arrive_cluster(uint32_t ca) {
  using namespace synth_emu;
  State& s = S();
  int d; uint32_t a;
  cluster_addr(ca, d, a);
  if (d == my_cta()) { synth_mbar_arrive(a); return; }  // the own CTA's barrier: an ordinary arrive
  MBar& m = remote_bar(d, a, "mbarrier.arrive.release.cluster");
  s.stat_arrivals++; s.stat_remote_arrivals++;
  m.pending -= 1;
  maybe_complete(m);
  progress();
  yield_point();
}
// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster: one copy
// in flight per CTA of the mask, each poisoning its box at issue and landing (complete_tx of the box's bytes on
// that CTA's barrier at offset bar) as late as that CTA's waiter allows, independently of the others
SYNTH_EMU_RT void synth_tma_load_2d_multicast(uint32_t d, const CUtensorMap* map, int c0, int c1, uint32_t bar,
                                        uint16_t mask) {
  using namespace synth_emu;
  State& s = S();
  const int me = my_cta(), n = int(s.ctas.size());
  if (mask == 0) fail("fault", cta_prefix(me) + "TMA multicast with an empty CTA mask");
  if (mask >> n) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", unsigned(mask));
    fail("fault", cta_prefix(me) + "TMA multicast mask " + hex + " names a CTA outside the cluster of " +
                      std::to_string(n) + " CTA(s)");
  }
  if (map->swizzle != 128 || map->box[0] * map->elem_bytes != 128)
    fail("fault", "TMA: only a 128-byte swizzle with a 128-byte inner box is emulated");
  if (d % 1024) fail("fault", "TMA with 128-byte swizzle: destination not 1024-byte aligned");
  const uint32_t bytes = map->box[0] * map->box[1] * map->elem_bytes;
  check_shared(d, bytes);
  for (int t = 0; t < n; ++t)  // every destination's barrier first: a bad one faults before anything is written
    if (mask >> t & 1) {
      if (t == me) bar_at(bar, "cp.async.bulk.tensor.multicast");
      else remote_bar(t, bar, "TMA multicast (cp.async.bulk.tensor.multicast::cluster) into " + cta_name(t));
    }
  s.stat_multicasts++;
  for (int t = 0; t < n; ++t)
    if (mask >> t & 1) {
      if (overlaps_copy(d, d + bytes, t)) s.stat_waw++;
      std::memset(gptr(gkey(d, t)), 0xFF, bytes);
      s.copies.push_back(Copy{gkey(d, t), *map, c0, c1, gkey(bar, t), s.seq++, me});
      s.stat_multicast_copies++;
    }
  progress();
  yield_point();
}
// barrier.cluster.arrive.release + barrier.cluster.wait.acquire: every live thread of every CTA of the cluster
SYNTH_EMU_RT void synth_cluster_sync() {
  using namespace synth_emu;
  State& s = S();
  long my = s.cs_gen;
  if (++s.cs_count >= s.live) { complete_cluster_sync(); yield_point(); return; }
  block_until([&] { return s.cs_gen != my; }, "barrier.cluster.wait");
}
#endif

namespace synth_emu {

// a CTA whose threads are all done: its shared memory is gone; a peer's copy still in flight into it is reported
#ifndef SYNTH_EMU_SM90_LINKED
SYNTH_EMU_RT void cta_exits(int r) {
  State& s = S();
  s.ctas[r].exited = true;
  if (!clustered()) return;
  for (const Copy& c : s.copies)
    if (int(c.dst >> CTA_SHIFT) == r && c.from != r)
      fail("protocol", cta_name(r) + " exits while a TMA multicast from " + cta_name(c.from) + " into it is in flight "
                       "(completing on " + bar_label(c.bar) + "): its peer still writes its shared memory");
}

SYNTH_EMU_RT void trampoline() {
  State& s = S();
  s.body();
  s.th[s.cur].done = true;
  s.live--;
  Cta& c = s.ctas[my_cta()];
  c.live--;
  if (c.sync_count > 0 && c.sync_count >= c.live) { c.sync_count = 0; c.sync_gen++; }
  if (s.cs_count > 0 && s.cs_count >= s.live) complete_cluster_sync();
  progress();
  if (c.live == 0) cta_exits(my_cta());
  switch_next();
}

// Run the CTAs of one cluster together (blocks[r]: the block index of the CTA of rank r), each of `threads`
// threads; false on a hang or fault (S().kind, S().failure). order: 0 forward, 1 reverse, 2 + seed: a random
// thread at every switch (seeded, deterministic), 100000 starve, 100001 + R: CTA R's threads first,
// STARVE_WG + W: starve warp group W's thread 1 only
SYNTH_EMU_RT bool run_cluster(const std::vector<synth_dim3>& blocks, int threads, int order, std::function<void()> body) {
  const int starve_wg = order >= STARVE_WG ? order - STARVE_WG : -1;  // orders "starve_wgW"
  const bool starve = order == 100000 || starve_wg >= 0;  // the harness's code of order "starve"
  const int prefer = order > 100000 && order < STARVE_WG ? order - 100001 : -1;  // orders "ctaR_first"
  if (starve || prefer >= 0) order = 0;
  bool reverse = order == 1;
  State& s = S();
  const int nc = int(blocks.size()), total = nc * threads;
  const synth_dim3 block = blocks[0];
  s.starve = starve; s.starve_wg = starve_wg; s.prefer = prefer; s.prefer_active = false;
  s.bdim = {unsigned(threads), 1, 1}; s.reverse = reverse; s.random = order >= 2; s.rng.seed(unsigned(order >= 2 ? order - 2 : 0) * 7919u + block.x * 31u + block.y); s.body = std::move(body);
  s.ctas.resize(nc); s.tpc = threads;
  for (int r = 0; r < nc; ++r) {
    Cta& c = s.ctas[r];
    c.block = blocks[r]; c.sync_count = 0; c.sync_gen = 0; c.live = threads; c.exited = false;
    if (r > 0) c.storage.resize(SMEM_SIZE);
    c.win = r == 0 ? synth_smem_raw : c.storage.data();
    std::memset(c.win, 0xFF, SMEM_SIZE);
  }
  s.cs_count = 0; s.stat_clusters++;
  s.th.assign(total, Thread{}); s.nthreads = total; s.live = total;
  s.bars.clear(); s.bar_names.clear(); s.copies.clear();
  s.wgs.assign(size_t(nc) * ((threads + 127) / 128), WG{}); s.warps.assign(size_t(nc) * ((threads + 31) / 32), Warp{});
  s.stuck = 0; s.failed_in_epoch = 0; s.epoch++; s.urgent.clear(); s.greedy = -1;
  s.named.clear(); s.acquires = 0; s.stale_loads = 0; s.acquired.clear(); s.unpublished.clear();
  s.unfenced.assign(total, 0); s.fence_mark.assign(total, 0); s.seen.assign(total, {});
  s.swrites.assign(size_t(nc) * SMEM_SIZE / 4, State::SWrite{}); s.stamp = 0;
  for (int t = 0; t < total; ++t) {
    Thread& th = s.th[t];
    th.stack.resize(256 * 1024);
    getcontext(&th.ctx);
    th.ctx.uc_stack.ss_sp = th.stack.data();
    th.ctx.uc_stack.ss_size = th.stack.size();
    th.ctx.uc_link = nullptr;
    makecontext(&th.ctx, trampoline, 0);
  }
  s.cur = reverse ? total - 1 : prefer > 0 && prefer < nc ? prefer * threads : 0;
  swapcontext(&s.main_ctx, &s.th[s.cur].ctx);
  if (s.failed) return false;
  while (!s.copies.empty()) land_one(0);
  for (int t = 0; t < total; ++t)
    if (!s.th[t].bulk_open.empty() || !s.th[t].bulk_groups.empty()) {
      s.failed = true; s.kind = "protocol";
      s.failure = cta_prefix(cta_of(t)) + "thread " + std::to_string(local_tid(t)) + " exits with TMA stores not known to have read shared memory "
                  "(no cp.async.bulk.wait_group.read 0): the CTA's shared memory may be reused under them";
      return false;
    }
  return true;
}

// Run one block of `threads` threads (a cluster of one CTA)
SYNTH_EMU_RT bool run_block(synth_dim3 block, int threads, int order, std::function<void()> body) {
  return run_cluster({block}, threads, order, std::move(body));
}
#endif

}  // namespace synth_emu

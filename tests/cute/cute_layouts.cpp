// NVIDIA's own statement of the layouts synth's kernels and emulators rely on, printed as one JSON
// object (tests/test_cute_layouts.py compares it with what synth emits and what its emulators do).
//
// Host code only: compiled with g++ against the CuTe/CUTLASS headers of the nvidia-cutlass wheel.
//  * "sm80_mma":  MMA_Traits<SM80_16x8x16_F32F16F16F32_TN>: per lane, per value, the (row, col) of A
//                 (M x K), B (N x K) and C (M x N); values pair into 32-bit registers, low half first.
//  * "ldsm_n":    Copy_Traits<SM75_U32x4_LDSM_N>: per lane, register, half: which lane's row address
//                 and which 16-bit column of that row it receives.
//  * "swizzle":   Swizzle<3,4,S> (S = 3, 4, 5) of byte offsets 0, 16, ..., 16383.
//  * "gmma_c":    CLayout_64xN<N> (N = 16 .. 256 step 16): per thread of the warp group, per value, (m, n).
//  * "gmma_enums": the values of GMMA::ScaleIn, Major and ScaleOut (the wgmma immediates and scale-d).
//  * "gmma_rs_a": ALayout of MMA_Traits<SM90_64x64x16_F32{F16F16,BF16BF16}_RS<K, MN>> (the register-A wgmma): per
//                 thread of the warp group, per value, (m, k) of the 64 x 16 A tile, keyed "f16" and "bf16".
//  * "mn_b":      per (dtype, N, KT): an MN-major B operand of N x KT (N along MN) as
//                 tile_to_shape(GMMA::Layout_MN_SW128_Atom, (N, KT), Step<_2,_1>) lays it out (K first: each
//                 64-element N chunk is KT rows of 128 bytes, the chunks KT * 128 bytes apart, as TMA boxes of
//                 [KT rows x 64 elements] with the 128-byte swizzle land), read by the TiledMMA of rs_op_selector
//                 (A K-major from registers, B MN-major): the GmmaDescriptor of each k-block (make_fragment_B) and
//                 the shared address of every element (n, k).
//  * "gmma_desc_fields": a GmmaDescriptor with distinct values in every bitfield, as a 64-bit word.
//  * "configs":   per kernel tile (bm, bn, stages, dtype), operands A and B as the CollectiveBuilder makes
//                 them (K-major, swizzle atom GMMA::Layout_K_SW128_Atom, tile_to_shape, a TiledMMA of
//                 ss_op_selector with BM/64 warp groups along M; B's stages right after A's): the
//                 GmmaDescriptor CuTe issues for each warp group slice, stage and k-block
//                 (make_fragment_A/B), and the shared address of every element (row, k, stage) of the tile.
//                 Shared memory is a 1024-aligned host array seen at shared address BASE (a host
//                 __cvta_generic_to_shared, so make_gmma_desc sees real shared addresses).
//  * "tma" (per operand) and "tma_enums": with -DSYNTH_CUTE_TMA (needs cuda.h) the arguments
//                 make_tma_copy(SM90_TMA_LOAD) passes to cuTensorMapEncodeTiled for a K-major f16/bf16
//                 global operand and one stage of the tile, and the driver's enum values; the driver call
//                 is intercepted here (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL): no driver, no GPU.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

static unsigned char* g_smem = nullptr;  // the host array standing for shared memory
static const uint32_t BASE = 0x400;      // its shared address (1024-aligned, as the kernels align their tiles)
inline size_t __cvta_generic_to_shared(const void* p) {
  return size_t(static_cast<const unsigned char*>(p) - g_smem) + BASE;
}
#define CUTE_CVTA_GENERIC_TO_SHARED_ACTIVATED 1

#ifdef SYNTH_CUTE_TMA
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#include <cuda.h>
struct TmaCall {
  int dtype, rank;
  unsigned long long dims[5], strides[4];
  unsigned box[5], estrides[5];
  int interleave, swizzle, l2, oob;
};
static TmaCall g_tma{};
extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType dtype, cuuint32_t rank, void*,
                                           const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                           const cuuint32_t* estrides, CUtensorMapInterleave il,
                                           CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                           CUtensorMapFloatOOBfill oob) {
  g_tma = TmaCall{};
  g_tma.dtype = int(dtype);
  g_tma.rank = int(rank);
  for (unsigned i = 0; i < rank; ++i) {
    g_tma.dims[i] = dims[i];
    g_tma.box[i] = box[i];
    g_tma.estrides[i] = estrides[i];
    if (i + 1 < rank) g_tma.strides[i] = strides[i];
  }
  g_tma.interleave = int(il);
  g_tma.swizzle = int(sw);
  g_tma.l2 = int(l2);
  g_tma.oob = int(oob);
  return CUDA_SUCCESS;
}
#endif

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/copy_traits_sm75.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#ifdef SYNTH_CUTE_TMA
#include <cute/atom/copy_traits_sm90_tma.hpp>
#endif

using namespace cute;

static std::string out;
static void emit(const char* s) { out += s; }
static void emitf(const char* fmt, long long a) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, a);
  out += b;
}
static void pair(long long a, long long b) {
  char s[64];
  std::snprintf(s, sizeof s, "[%lld,%lld]", a, b);
  out += s;
}

// (thread, value) -> (row, col) of a column-major rows x cols matrix, as [[[r, c] per value] per thread]
template <class L>
static void thr_val(L const& layout, int rows) {
  emit("[");
  for (int t = 0; t < int(size<0>(layout)); ++t) {
    emit(t ? ",[" : "[");
    for (int v = 0; v < int(size<1>(layout)); ++v) {
      if (v) emit(",");
      int idx = int(layout(t, v));
      pair(idx % rows, idx / rows);
    }
    emit("]");
  }
  emit("]");
}

static void sm80_mma() {
  using T = MMA_Traits<SM80_16x8x16_F32F16F16F32_TN>;
  emit("\"sm80_mma\":{\"shape_mnk\":[16,8,16],\"A\":");
  thr_val(typename T::ALayout{}, 16);
  emit(",\"B\":");
  thr_val(typename T::BLayout{}, 8);
  emit(",\"C\":");
  thr_val(typename T::CLayout{}, 16);
  emit("}");
}

static void ldsm_n() {
  using T = Copy_Traits<SM75_U32x4_LDSM_N>;
  typename T::SrcLayout src{};
  typename T::DstLayout dst{};
  // bit -> (source lane, bit within its 128-bit row)
  static int lane_of[32 * 128], bit_of[32 * 128];
  for (int s = 0; s < 32; ++s)
    for (int b = 0; b < 128; ++b) {
      int bit = int(src(s, b));
      lane_of[bit] = s;
      bit_of[bit] = b;
    }
  emit("\"ldsm_n\":[");
  for (int t = 0; t < 32; ++t) {
    emit(t ? ",[" : "[");
    for (int q = 0; q < 4; ++q) {
      emit(q ? ",[" : "[");
      for (int h = 0; h < 2; ++h) {
        int bit = int(dst(t, 32 * q + 16 * h));
        if (h) emit(",");
        pair(lane_of[bit], bit_of[bit] / 16);  // the 16-bit column of that lane's row
      }
      emit("]");
    }
    emit("]");
  }
  emit("]");
}

template <int S>
static void swizzle_table() {
  Swizzle<3, 4, S> sw{};
  emitf("\"%lld\":[", S);
  for (int o = 0; o < 16384; o += 16) {
    if (o) emit(",");
    emitf("%lld", int(sw(o)));
  }
  emit("]");
}

template <int N>
static void gmma_c_one(bool first) {
  if (!first) emit(",");
  emitf("\"%lld\":", N);
  thr_val(SM90::GMMA::CLayout_64xN<N>{}, 64);
}
template <int... Ns>
static void gmma_c(std::integer_sequence<int, Ns...>) {
  emit("\"gmma_c\":{");
  bool first = true;
  ((gmma_c_one<16 * (Ns + 1)>(first), first = false), ...);
  emit("}");
}

static void gmma_desc_fields() {
  GmmaDescriptor d;
  d.bitfield.start_address_ = 0x1234;
  d.bitfield.leading_byte_offset_ = 0x0567;
  d.bitfield.stride_byte_offset_ = 0x2abc;
  d.bitfield.base_offset_ = 5;
  d.bitfield.layout_type_ = uint8_t(SM90::GMMA::LayoutType::B128);
  char b[256];
  std::snprintf(b, sizeof b,
                "\"gmma_desc_fields\":{\"word\":%llu,\"start_address\":%d,\"leading_byte_offset\":%d,"
                "\"stride_byte_offset\":%d,\"base_offset\":%d,\"layout_type\":%d,\"B128\":%d,\"B64\":%d,\"B32\":%d,"
                "\"INTERLEAVE\":%d}",
                (unsigned long long)d.desc_, 0x1234, 0x0567, 0x2abc, 5, int(SM90::GMMA::LayoutType::B128),
                int(SM90::GMMA::LayoutType::B128), int(SM90::GMMA::LayoutType::B64), int(SM90::GMMA::LayoutType::B32),
                int(SM90::GMMA::LayoutType::INTERLEAVE));
  emit(b);
}

template <class Elem>
static void gmma_rs_a(const char* key, bool first) {
  using Op = std::conditional_t<std::is_same_v<Elem, half_t>,
                                SM90_64x64x16_F32F16F16_RS<GMMA::Major::K, GMMA::Major::MN>,
                                SM90_64x64x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>>;
  out += first ? "\"" : ",\"";
  out += key;
  emit("\":");
  thr_val(typename MMA_Traits<Op>::ALayout{}, 64);
}

// An MN-major B operand (N x KT, N along MN) in TMA-box chunks of 64 elements, KT * 128 bytes apart (the "mn_b" entry)
template <class Elem, int N, int KT>
static void mn_operand(bool first) {
  auto layout = tile_to_shape(GMMA::Layout_MN_SW128_Atom<Elem>{}, make_shape(Int<N>{}, Int<KT>{}), Step<_2, _1>{});
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<Elem*>(g_smem)), layout);
  auto op = GMMA::rs_op_selector<Elem, Elem, float, Shape<_64, Int<N>, Int<KT>>, GMMA::Major::K, GMMA::Major::MN>();
  auto mma = make_tiled_mma(op);
  auto thr = mma.get_slice(0);
  Tensor tCsB = thr.partition_B(s);
  Tensor tCrB = thr.make_fragment_B(tCsB);
  if (!first) emit(",");
  emit(std::is_same_v<Elem, half_t> ? "{\"dtype\":\"f16\"," : "{\"dtype\":\"bf16\",");
  emitf("\"n\":%lld,", N);
  emitf("\"kt\":%lld,", KT);
  emitf("\"base\":%lld,", BASE);
  emitf("\"chunk_bytes\":%lld,\"desc\":[", KT * 128);
  for (int kb = 0; kb < int(size<2>(tCrB)); ++kb) {
    if (kb) emit(",");
    emitf("%llu", (long long)(uint64_t(tCrB(0, 0, kb))));
  }
  emit("],\"addr\":[");
  for (int n = 0; n < N; ++n) {
    emit(n ? ",[" : "[");
    for (int k = 0; k < KT; ++k) {
      if (k) emit(",");
      emitf("%lld", (long long)__cvta_generic_to_shared(&s(n, k)));
    }
    emit("]");
  }
  emit("]}");
}

// One operand tile, ROWS x 64 (k) x STAGES, f16, as the CollectiveBuilder lays it out; read by warp groups
// of WG_ROWS rows each (A: 64 per consumer warp group; B: all of it).
template <class Elem, int ROWS, int STAGES, bool IS_A>
static void operand(size_t offset) {
  using Atom = GMMA::Layout_K_SW128_Atom<Elem>;
  auto layout = tile_to_shape(Atom{}, make_shape(Int<ROWS>{}, Int<64>{}, Int<STAGES>{}));
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<Elem*>(g_smem + offset)), layout);
  // the MMA: A's warp groups along M (ROWS/64 of them for A; B is read whole by each)
  constexpr int BM = IS_A ? ROWS : 64;
  constexpr int BN = IS_A ? 64 : ROWS;
  auto op = GMMA::ss_op_selector<Elem, Elem, float, Shape<Int<BM>, Int<BN>, _64>>();
  auto mma = make_tiled_mma(op, Layout<Shape<Int<BM / 64>, _1, _1>>{});
  emit(IS_A ? "\"A\":{" : "\"B\":{");
  emitf("\"rows\":%lld,", ROWS);
  emitf("\"stages\":%lld,", STAGES);
  emitf("\"elem_bits\":%lld,", int(sizeof_bits_v<Elem>));
  emitf("\"base\":%lld,\"desc\":[", BASE + offset);
  // desc[slice][stage][kblock]
  constexpr int SLICES = IS_A ? ROWS / 64 : 1;
  for (int wg = 0; wg < SLICES; ++wg) {
    auto thr = mma.get_slice(wg * 128);
    emit(wg ? ",[" : "[");
    if constexpr (IS_A) {
      Tensor tCsA = thr.partition_A(s);          // (MMA, MMA_M, MMA_K, PIPE)
      Tensor tCrA = thr.make_fragment_A(tCsA);  // descriptors
      for (int st = 0; st < STAGES; ++st) {
        emit(st ? ",[" : "[");
        for (int kb = 0; kb < int(size<2>(tCrA)); ++kb) {
          if (kb) emit(",");
          emitf("%llu", (long long)(uint64_t(tCrA(0, 0, kb, st))));
        }
        emit("]");
      }
    } else {
      Tensor tCsB = thr.partition_B(s);
      Tensor tCrB = thr.make_fragment_B(tCsB);
      for (int st = 0; st < STAGES; ++st) {
        emit(st ? ",[" : "[");
        for (int kb = 0; kb < int(size<2>(tCrB)); ++kb) {
          if (kb) emit(",");
          emitf("%llu", (long long)(uint64_t(tCrB(0, 0, kb, st))));
        }
        emit("]");
      }
    }
    emit("]");
  }
  // addr[stage][row][k]: shared byte address of element (row, k) of stage st
  emit("],\"addr\":[");
  for (int st = 0; st < STAGES; ++st) {
    emit(st ? ",[" : "[");
    for (int r = 0; r < ROWS; ++r) {
      emit(r ? ",[" : "[");
      for (int k = 0; k < 64; ++k) {
        if (k) emit(",");
        emitf("%lld", (long long)__cvta_generic_to_shared(&s(r, k, st)));
      }
      emit("]");
    }
    emit("]");
  }
  emit("]");
#ifdef SYNTH_CUTE_TMA
  // the tensor map CuTe builds for a (rows x K) K-major global operand and one stage of this tile
  {
    const int K = 320, R = 3 * ROWS + 5;
    static Elem g[8];
    Tensor gt = make_tensor(make_gmem_ptr(reinterpret_cast<Elem*>(reinterpret_cast<uintptr_t>(g) & ~uintptr_t(15))),
                            make_shape(R, K), make_stride(K, _1{}));
    auto tma = make_tma_copy(SM90_TMA_LOAD{}, gt, layout(_, _, 0));
    (void)tma;
    char b[512];
    std::snprintf(b, sizeof b,
                  ",\"tma\":{\"gmem_rows\":%d,\"K\":%d,\"dtype\":%d,\"rank\":%d,\"dims\":[%llu,%llu],"
                  "\"strides\":[%llu],"
                  "\"box\":[%u,%u],\"element_strides\":[%u,%u],\"interleave\":%d,\"swizzle\":%d,\"l2_promotion\":%d,"
                  "\"oob_fill\":%d}",
                  R, K, g_tma.dtype, g_tma.rank, g_tma.dims[0], g_tma.dims[1], g_tma.strides[0], g_tma.box[0],
                  g_tma.box[1], g_tma.estrides[0], g_tma.estrides[1], g_tma.interleave, g_tma.swizzle, g_tma.l2,
                  g_tma.oob);
    emit(b);
  }
#endif
  emit("}");
}

// One kernel configuration's operands as the CollectiveMainloop's SharedStorage places them: the A
// stages, then the B stages right after them.
template <class Elem, int BM, int BN, int STAGES>
static void config(bool first) {
  if (!first) emit(",");
  emitf("{\"bm\":%lld,", BM);
  emitf("\"bn\":%lld,", BN);
  emitf("\"stages\":%lld,", STAGES);
  emit(sizeof_bits_v<Elem> == 16 && std::is_same_v<Elem, half_t> ? "\"dtype\":\"f16\"," : "\"dtype\":\"bf16\",");
  operand<Elem, BM, STAGES, true>(0);
  emit(",");
  operand<Elem, BN, STAGES, false>(size_t(STAGES) * BM * 64 * sizeof(Elem));
  emit("}");
}

int main() {
  alignas(4096) static unsigned char smem[256 * 1024];
  g_smem = smem;
  emit("{");
  sm80_mma();
  emit(",");
  ldsm_n();
  emit(",\"swizzle\":{");
  swizzle_table<3>();
  emit(",");
  swizzle_table<4>();
  emit(",");
  swizzle_table<5>();
  emit("},");
  gmma_c(std::make_integer_sequence<int, 16>{});
  emit(",");
  gmma_desc_fields();
#ifdef SYNTH_CUTE_TMA
  {
    const std::pair<const char*, int> enums[] = {
        {"CU_TENSOR_MAP_DATA_TYPE_FLOAT16", CU_TENSOR_MAP_DATA_TYPE_FLOAT16},
        {"CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16},
        {"CU_TENSOR_MAP_DATA_TYPE_FLOAT32", CU_TENSOR_MAP_DATA_TYPE_FLOAT32},
        {"CU_TENSOR_MAP_INTERLEAVE_NONE", CU_TENSOR_MAP_INTERLEAVE_NONE},
        {"CU_TENSOR_MAP_INTERLEAVE_16B", CU_TENSOR_MAP_INTERLEAVE_16B},
        {"CU_TENSOR_MAP_INTERLEAVE_32B", CU_TENSOR_MAP_INTERLEAVE_32B},
        {"CU_TENSOR_MAP_SWIZZLE_NONE", CU_TENSOR_MAP_SWIZZLE_NONE},
        {"CU_TENSOR_MAP_SWIZZLE_32B", CU_TENSOR_MAP_SWIZZLE_32B},
        {"CU_TENSOR_MAP_SWIZZLE_64B", CU_TENSOR_MAP_SWIZZLE_64B},
        {"CU_TENSOR_MAP_SWIZZLE_128B", CU_TENSOR_MAP_SWIZZLE_128B},
        {"CU_TENSOR_MAP_L2_PROMOTION_NONE", CU_TENSOR_MAP_L2_PROMOTION_NONE},
        {"CU_TENSOR_MAP_L2_PROMOTION_L2_64B", CU_TENSOR_MAP_L2_PROMOTION_L2_64B},
        {"CU_TENSOR_MAP_L2_PROMOTION_L2_128B", CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
        {"CU_TENSOR_MAP_L2_PROMOTION_L2_256B", CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
        {"CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
        {"CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA", CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA},
    };
    emit(",\"tma_enums\":{");
    bool first = true;
    for (auto [name, value] : enums) {
      out += first ? "\"" : ",\"";
      out += name;
      emitf("\":%lld", value);
      first = false;
    }
    emit("}");
  }
#endif
  emitf(",\"gmma_enums\":{\"ScaleIn_One\":%lld,", int(GMMA::ScaleIn::One));
  emitf("\"ScaleIn_Neg\":%lld,", int(GMMA::ScaleIn::Neg));
  emitf("\"Major_K\":%lld,", int(GMMA::Major::K));
  emitf("\"Major_MN\":%lld,", int(GMMA::Major::MN));
  emitf("\"ScaleOut_One\":%lld,", int(GMMA::ScaleOut::One));
  emitf("\"ScaleOut_Zero\":%lld}", int(GMMA::ScaleOut::Zero));
  emit(",\"gmma_rs_a\":{");
  gmma_rs_a<half_t>("f16", true);
  gmma_rs_a<bfloat16_t>("bf16", false);
  emit("},\"mn_b\":[");
  mn_operand<half_t, 64, 64>(true);
  mn_operand<half_t, 128, 64>(false);
  mn_operand<half_t, 256, 64>(false);
  mn_operand<half_t, 128, 128>(false);
  mn_operand<bfloat16_t, 128, 64>(false);
  emit("]");
  emit(",\"configs\":[");
  config<half_t, 128, 128, 4>(true);
  config<half_t, 128, 64, 3>(false);
  config<half_t, 64, 256, 3>(false);
  config<bfloat16_t, 128, 48, 2>(false);
  emit("]}");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::printf("\n");
  return 0;
}

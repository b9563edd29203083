// NVIDIA's own statement of a 2-CTA TMA multicast of one K-major operand tile (ROWS x 64, 16-bit elements,
// GMMA::Layout_K_SW128_Atom tiled to the tile, as the CollectiveBuilder lays it out), printed as one JSON
// object for tests/hopper/test_cluster_hostile.py: per ROWS, the shared address of every element (row, k) of
// the tile ("addr"), the box make_tma_copy(SM90_TMA_LOAD_MULTICAST, ..., cluster_size 2) passes to
// cuTensorMapEncodeTiled ("box", the driver call intercepted: no driver, no GPU), and, per multicast CTA id,
// the shared addresses that CTA's one multicast instruction writes: from the TiledCopy's partition_D ("part")
// and from the collective's tma_partition ("tma_part", the form CUTLASS's sm90 mainloops use).
// Host code only: compiled with g++ against the CuTe/CUTLASS headers of the nvidia-cutlass wheel.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

static unsigned char* g_smem = nullptr;
static const uint32_t BASE = 0x400;  // 1024-aligned, as the kernels align their tiles
inline size_t __cvta_generic_to_shared(const void* p) {
  return size_t(static_cast<const unsigned char*>(p) - g_smem) + BASE;
}
#define CUTE_CVTA_GENERIC_TO_SHARED_ACTIVATED 1
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#include <cuda.h>
static unsigned g_box[5];
extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t rank, void*,
                                           const cuuint64_t*, const cuuint64_t*, const cuuint32_t* box,
                                           const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                           CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  for (unsigned i = 0; i < rank && i < 5; ++i) g_box[i] = box[i];
  return CUDA_SUCCESS;
}

#include <cute/tensor.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

using namespace cute;

static std::string out;
static void emitn(long long v) { out += std::to_string(v); }

// The shared addresses of the elements one multicast TMA instruction writes into its CTA: the first box's worth
// of the CTA's partition (CuTe offsets each CTA's partition into the tile's TMA vector by its multicast id and
// issues one box from there).
template <class T>
static void addresses(T const& t) {
  out += "[";
  for (int i = 0; i < int(g_box[0] * g_box[1]); ++i) {
    if (i) out += ",";
    emitn((long long)__cvta_generic_to_shared(&t(i)));
  }
  out += "]";
}

template <int ROWS>
static void tile(bool first) {
  using Elem = half_t;
  auto layout = tile_to_shape(GMMA::Layout_K_SW128_Atom<Elem>{}, make_shape(Int<ROWS>{}, Int<64>{}));
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<Elem*>(g_smem)), layout);
  const int K = 320, R = 3 * ROWS + 5;
  static Elem g[8];
  Tensor gt = make_tensor(make_gmem_ptr(reinterpret_cast<Elem*>(reinterpret_cast<uintptr_t>(g) & ~uintptr_t(15))),
                          make_shape(R, K), make_stride(K, _1{}));
  auto tma = make_tma_copy(SM90_TMA_LOAD_MULTICAST{}, gt, layout, Int<2>{});
  out += first ? "" : ",";
  out += "\"" + std::to_string(ROWS) + "\":{\"box\":[" + std::to_string(g_box[0]) + "," + std::to_string(g_box[1]) +
         "],\"addr\":[";
  for (int r = 0; r < ROWS; ++r) {
    out += r ? ",[" : "[";
    for (int k = 0; k < 64; ++k) {
      if (k) out += ",";
      emitn((long long)__cvta_generic_to_shared(&s(r, k)));
    }
    out += "]";
  }
  out += "],\"part\":[";
  for (int c = 0; c < 2; ++c) {
    if (c) out += ",";
    addresses(tma.get_slice(c).partition_D(s));
  }
  out += "],\"tma_part\":[";
  Tensor gc = tma.get_tma_tensor(make_shape(R, K));
  Tensor gtile = local_tile(gc, make_shape(Int<ROWS>{}, Int<64>{}), make_coord(0, 0));
  for (int c = 0; c < 2; ++c) {
    if (c) out += ",";
    auto [tg, ts] = tma_partition(tma, c, make_layout(Int<2>{}), group_modes<0, 2>(s), group_modes<0, 2>(gtile));
    (void)tg;
    addresses(ts);
  }
  out += "]}";
}

int main() {
  alignas(4096) static unsigned char smem[64 * 1024];
  g_smem = smem;
  out += "{";
  tile<16>(true);
  tile<48>(false);
  tile<64>(false);
  tile<128>(false);
  tile<144>(false);
  tile<256>(false);
  out += "}";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::printf("\n");
  return 0;
}

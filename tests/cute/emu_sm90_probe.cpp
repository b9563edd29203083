// Probe of the sm_90a emulator's layout functions (synth/emit/runtime/synth_emu_sm90.h): the very
// functions its wgmma and TMA use (run_op, land_one), answered for queries read from stdin, one JSON
// line each (tests/test_cute_layouts.py compares them with CuTe):
//   fields D            the descriptor's decoded fields and whether the emulator reads it
//   desc D ROWS EB      shared address of element (r, k), r < ROWS, k < 16, read through descriptor D
//   acc N               (row, col) of value i of thread t of wgmma m64nNk16's accumulator
//   tma DST ROWS EB     shared address where element e of box row r lands (128-byte rows)
//   afrag               (row, k) of value j of thread t of the register-A wgmma's A fragment (64 x 16)
//   mn D N EB           shared address of element (n, k), n < N, k < 16, of the MN-major operand read through D
//   descmn A CHUNK      synth_desc_mn128(A, CHUNK): the MN-major 128-byte-swizzle descriptor the kernel builds
#include "synth_emu_sm90.h"

#include <iostream>
#include <sstream>
#include <string>

int main() {
  using namespace synth_emu;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string what;
    in >> what;
    std::string o;
    if (what == "fields") {
      uint64_t d;
      in >> d;
      GmmaDesc g = gmma_desc_decode(d);
      o = "{\"start\":" + std::to_string(g.start) + ",\"lbo\":" + std::to_string(g.lbo) + ",\"sbo\":" +
          std::to_string(g.sbo) + ",\"base_offset\":" + std::to_string(g.base_offset) + ",\"layout\":" +
          std::to_string(g.layout) + ",\"unsupported\":\"" + gmma_desc_unsupported(d) + "\"}";
    } else if (what == "desc") {
      uint64_t d;
      int rows;
      uint32_t eb;
      in >> d >> rows >> eb;
      o = "[";
      for (int r = 0; r < rows; ++r) {
        o += r ? ",[" : "[";
        for (int k = 0; k < 16; ++k) o += (k ? "," : "") + std::to_string(gmma_k_major_addr(d, r, k, eb));
        o += "]";
      }
      o += "]";
    } else if (what == "acc") {
      int n;
      in >> n;
      o = "[";
      for (int t = 0; t < 128; ++t) {
        o += t ? ",[" : "[";
        for (int i = 0; i < n / 2; ++i) {
          int row, col;
          gmma_acc_coord(t, i, row, col);
          o += (i ? ",[" : "[") + std::to_string(row) + "," + std::to_string(col) + "]";
        }
        o += "]";
      }
      o += "]";
    } else if (what == "tma") {
      uint32_t dst, rows, eb;
      in >> dst >> rows >> eb;
      o = "[";
      for (uint32_t r = 0; r < rows; ++r) {
        o += r ? ",[" : "[";
        for (uint32_t e = 0; e < 128 / eb; ++e) o += (e ? "," : "") + std::to_string(tma_box_addr(dst, r, e, eb));
        o += "]";
      }
      o += "]";
    } else if (what == "afrag") {
      o = "[";
      for (int t = 0; t < 128; ++t) {
        o += t ? ",[" : "[";
        for (int j = 0; j < 8; ++j) {
          int row, k;
          gmma_a_frag_coord(t, j, row, k);
          o += (j ? ",[" : "[") + std::to_string(row) + "," + std::to_string(k) + "]";
        }
        o += "]";
      }
      o += "]";
    } else if (what == "mn") {
      uint64_t d;
      int n;
      uint32_t eb;
      in >> d >> n >> eb;
      o = "[";
      for (int r = 0; r < n; ++r) {
        o += r ? ",[" : "[";
        for (int k = 0; k < 16; ++k) o += (k ? "," : "") + std::to_string(gmma_mn_major_addr(d, r, k, eb));
        o += "]";
      }
      o += "]";
    } else if (what == "descmn") {
      uint32_t a, chunk;
      in >> a >> chunk;
      o = std::to_string(synth_desc_mn128(a, chunk));
    } else {
      o = "null";
    }
    std::cout << o << "\n";
  }
  return 0;
}

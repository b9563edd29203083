// emu_harness.cpp -- main() of an emulator binary (docs/emulator.md).
//
// synth/emit/emulate.py compiles this file next to the kernel (kernel.cu) and
// a generated emu_launch.inc that defines SYNTH_EMU_LAUNCH(run), e.g.
//
//     #define SYNTH_EMU_LAUNCH(run) run.launch(synth_gemm, run.buf<half>(0), ...
//         run.buf<float>(2), run.i32(3), run.i32(4), run.i32(5))
//
// with -DSYNTH_EMULATE, and links it with the cached synth_emu_runtime.o. The
// binary takes one argument, a run directory holding launch.txt (format in
// synth_emu_runtime.cpp, "Runner"); it writes the output buffers and
// stats.json there. Exit status 0, or 3 after an emulation error (stats.json
// still written).
#include "synth_emu.h"

#include "kernel.cu"
#include "emu_launch.inc"

int main(int argc, char** argv) {
  synth_emu::Runner run(argc, argv);
  SYNTH_EMU_LAUNCH(run);
  return run.finish();
}

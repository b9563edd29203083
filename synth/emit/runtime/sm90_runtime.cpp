// The sm_90a emulator's runtime (synth_emu_sm90.h: the functions declared under "the emulator's runtime, compiled
// once"; sm90_harness.h: the harness's main for any kernel), compiled once into an object that every kernel's
// emulator binary links with (synth.emit.sm90.emulate): a kernel's own build (-DSYNTH_EMU_SM90_LINKED, with
// sm90_harness.cpp) sees their declarations only.
#define SYNTH_EMU_SM90_RUNTIME
#include "synth_emu_sm90.h"
#include "sm90_harness.h"

"""The sm_90a GEMM kernel: TMA + mbarriers + wgmma + warp specialization (docs/hopper_kernel.md).

:mod:`.config` holds the tile configuration and the Hopper loop it lowers
(:func:`synth.lower.barriers.lower_hopper`); :mod:`.kernel` writes ``kernel.cu`` from the
lowered :class:`~synth.hopper.ir.HopperProgram` (every wait, parity, byte count and release
taken from the program's statements); :mod:`.emulate` runs it on the CPU emulator
(``runtime/synth_emu_sm90.h``); :mod:`.runner` launches it on a GPU (lazy CUDA Python import).
"""

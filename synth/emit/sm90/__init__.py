"""The sm_90a GEMM kernel: TMA + mbarriers + wgmma + warp specialization (docs/hopper_kernel.md).

:mod:`.config` holds the tile configuration and the Hopper loop it lowers
(:func:`synth.lower.barriers.lower_hopper`); :mod:`.kernel` writes ``kernel.cu`` from the
lowered :class:`~synth.hopper.ir.HopperProgram` (every wait, parity, byte count and release
taken from the program's statements by :mod:`.writer`), composing the kernel's parts: :mod:`.cluster`
(one CTA or a cluster), :mod:`.scheduler` (the tile scheduler), :mod:`.mainloop` (the ring's copies and
wgmma), :mod:`.consumers` (cooperative or ping-pong), :mod:`.epilogue` (register or TMA-store C) and
:mod:`.ptx` (the base device functions); :mod:`.emulate` runs it on the CPU emulator
(``runtime/synth_emu_sm90.h``); :mod:`.runner` launches it on a GPU (lazy CUDA Python import).
"""

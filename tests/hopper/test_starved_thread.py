"""Threads, not warp groups, wait — on the emulator (docs/emulator.md, "Starved threads"): with thread 1 of
every consumer warp group held back while anything else can run (order ``starve``), the emitted kernels are
right, but a consumer that reads its slot with plain per-thread reads (no wgmma collective, so no convergence
point before the elected release) hangs at T = stages + 1 and not below: its lagging thread waits for phase
0 of a slot that has completed phase 1 too. A bar.sync of the warp group before the release fixes it."""

import re
import shutil

import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import emulate_sm90
from synth.emit.sm90.kernel import emit_sm90_kernel

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")
CFG = KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=0)


def plain_reads(src: str) -> str:
    """The kernel with each wgmma replaced by this thread's own plain shared-memory reads (emulator only)."""
    s = src.replace("synth_wgmma_fence();", "").replace("synth_wgmma_commit();", "")
    s = re.sub(r"synth_wgmma_m64n64k16\(acc, (da \+ 2 \* kk), (db \+ 2 \* kk)\);",
               r"synth_emu_plain_mma(acc, \1, \2, 64, false);", s)
    out = re.sub(r"synth_wgmma_wait_n<\d+>\(\);", "", s)
    assert "synth_emu_plain_mma" in out and "synth_wgmma_m64n64k16(acc" not in out.split("extern \"C\"")[1]
    return out


def with_convergence(src: str) -> str:
    fixed = src.replace("      if (wt == 0) {\n        synth_mbar_arrive(bar_empty",
                        "      synth_bar_sync(3 + cw, 128);\n      if (wt == 0) {\n        synth_mbar_arrive(bar_empty")
    assert fixed.count("synth_bar_sync(3 + cw, 128)") == 1
    return fixed


@pytest.mark.parametrize("cfg", [CFG, KernelDesign.of(bm=128, bn=64, stages=3, persistent=True),
                                 KernelDesign.of(bm=64, bn=64, stages=2, persistent=True, pingpong=True)])
def test_emitted_kernels_are_right_with_a_starved_thread(cfg):
    r = emulate_sm90(emit_sm90_kernel(cfg), 130, 130, 320, order="starve", ctas=2 if cfg.persistent else 0)
    assert r.ok, r.summary()


def test_plain_reads_hang_at_stages_plus_one_and_a_bar_sync_fixes_it():
    mutant = plain_reads(emit_sm90_kernel(CFG))
    below = emulate_sm90(mutant, 64, 64, 64 * CFG.stages, order="starve")
    assert below.ok, below.summary()  # T = stages: no slot completes a second phase
    hung = emulate_sm90(mutant, 64, 64, 64 * (CFG.stages + 1), order="starve")
    assert not hung.ok and hung.kind == "hang" and "try_wait.parity 0 on mbarrier full[0]" in hung.message
    fixed = emulate_sm90(with_convergence(mutant), 64, 64, 64 * (CFG.stages + 1), order="starve")
    assert fixed.ok, fixed.summary()

"""The producer tail (CUTLASS's ``load_tail``): a producer that leaves, and invalidates the barriers, before
the consumers' last releases. In synth's kernels the teardown runs after a CTA barrier every thread reaches
(docs/hopper.md: the program's ``teardown`` follows a CTA barrier, which the proofs take as given), so the
invalidation follows every copy and release; without that barrier the emulator reports the invalidation
while a copy or a consumer's release still targets the barrier, for one CTA per tile and for a ping-pong
CTA (persistent)."""

import shutil

import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import emulate_sm90
from synth.emit.sm90.kernel import emit_sm90_kernel

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")


def without_teardown_barrier(src: str) -> str:
    marker = "  // ---- teardown\n  synth_syncthreads();\n"
    assert src.count(marker) == 1
    return src.replace(marker, "  // ---- teardown (its CTA barrier removed: the producer tail bug)\n")


@pytest.mark.slow
@pytest.mark.parametrize("cfg,ctas", [(KernelDesign.of(bm=128, bn=64, stages=3), 0),
                                      (KernelDesign.of(bm=64, bn=64, stages=2, persistent=True, pingpong=True), 2)])
def test_the_producer_leaving_before_the_last_release_fails(cfg, ctas):
    good = emulate_sm90(emit_sm90_kernel(cfg), 200, 130, 200, ctas=ctas, order="forward")
    assert good.ok, good.summary()
    bad = emulate_sm90(without_teardown_barrier(emit_sm90_kernel(cfg)), 200, 130, 200, ctas=ctas, order="forward")
    assert not bad.ok and bad.kind in ("fault", "protocol", "hang"), bad.summary()

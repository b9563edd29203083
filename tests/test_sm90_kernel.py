"""The sm_90a GEMM kernel text (synth.emit.sm90): emitted from the proven Hopper program, compiled
by nvcc 13 for sm_90a, its SASS holding TMA, mbarrier and wgmma instructions and nothing Ampere."""

from collections import Counter
from dataclasses import replace

import pytest

from synth.completion import ArriveStmt
from synth.emit import sass
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.kernel import emit_proven, emit_sm90_kernel
from synth.emit.sm90.sass_mix import figures
from synth.lower.hopper_design import design_program


def test_synchronization_comes_from_the_program():
    cfg = KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=2)
    p = design_program(cfg)
    text = emit_sm90_kernel(cfg, p)
    assert "synth_wgmma_wait_n<2>();" in text                      # the program's wait count
    assert "16384u + 16384u" in text                               # its expect_tx bytes
    assert "(((i / 4) + 1) % 2)" in text and "((i / 4) % 2)" in text  # producer / consumer parities
    assert "synth_mbar_init(bar_empty + 8 * s, 2)" in text          # init count = consumer warp groups
    # change a byte count in the program: the kernel follows
    prod = p.role("producer").program
    body = prod.part("body")
    stmts = tuple(replace(s, tx=(replace(s.tx[0], bytes=16400),) + s.tx[1:]) if isinstance(s, ArriveStmt) and s.tx
                  else s for s in body.stmts)
    parts = tuple(replace(pt, stmts=stmts) if pt.name == "body" else pt for pt in prod.parts)
    assert "16400u + 16384u" in emit_sm90_kernel(cfg, p.with_role("producer", replace(prod, parts=parts)))


@pytest.mark.slow
def test_the_program_is_proven():
    cfg = KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1)
    text, report = emit_proven(cfg)
    assert report.ok and text == emit_sm90_kernel(cfg)
    kinds = {o.kind for o in report.obligations}
    assert {"parity", "tx_bytes", "no_deadlock", "release_after_wgmma"} <= kinds


def test_bounds():
    for bad in (KernelDesign.of(bm=96), KernelDesign.of(bn=72), KernelDesign.of(stages=8, bn=256), KernelDesign.of(stages=2, k_pipe_mmas=2)):
        with pytest.raises(ValueError):
            emit_sm90_kernel(bad)


@pytest.mark.skipif(sass.tool("nvcc") is None or sass.tool("cuobjdump") is None, reason="nvcc/cuobjdump needed")
@pytest.mark.parametrize("bm,bn,stages", [(128, 128, 4), pytest.param(128, 256, 4, marks=pytest.mark.slow)])
def test_compiles_for_sm90a(bm, bn, stages):
    c = sass.compile_cuda(emit_sm90_kernel(KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=1)), "sm_90a", flags=("-DNDEBUG",))
    ops = Counter(i.opcode for i in sass.parse_sass(c.sass))
    names = Counter(o.split(".")[0] for o in ops.elements())
    assert names["UTMALDG"] and names["HGMMA"] and names["SYNCS"]
    assert any(o.startswith("SYNCS.PHASECHK") for o in ops)
    assert any(o.startswith(f"HGMMA.64x{bn}x16.F32") for o in ops)
    assert names["HMMA"] == 0 and names["LDGSTS"] == 0
    assert names["USETMAXREG"] == 2
    assert c.spill_stores == 0 and c.spill_loads == 0 and c.stack == 0
    assert "C7514" not in c.log, "ptxas serialized the wgmma pipeline"
    f = figures(c, 4)  # the targets of docs/hopper_kernel.md: CUTLASS cooperative has 11.25 and 28 at both tiles
    assert f["insn_per_hgmma"] <= 11.25 and f["longest_free"] <= 28, f


@pytest.mark.slow
@pytest.mark.skipif(sass.tool("nvcc") is None or sass.tool("cuobjdump") is None, reason="nvcc/cuobjdump needed")
def test_bf16_compiles():
    c = sass.compile_cuda(emit_sm90_kernel(KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1, dtype="bf16")), "sm_90a", flags=("-DNDEBUG",))
    assert {i.opcode for i in sass.parse_sass(c.sass) if i.op == "HGMMA"} == {"HGMMA.64x128x16.F32.BF16"}
    assert "C7514" not in c.log and c.spill_stores == 0

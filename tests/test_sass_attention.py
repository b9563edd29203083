"""synth.emit.sass's attention reader (natural loops, the consumer main loop, its figures, setmaxnreg) on a
hand-written sm_90a listing shaped like FlashAttention-3's forward kernel, and (nvcc) synth's attention kernel
compiled and read the same way."""

from __future__ import annotations

import importlib
import math
import pathlib

import pytest

from synth.emit.sass import (attention_loop, attention_stats, backward_loops, natural_loops, parse_sass,
                             setmaxnreg_targets, tool, wgmma_diagnostics)

ROOT = pathlib.Path(__file__).resolve().parent.parent

# A persistent CTA: setmaxnreg, a tile loop (0x0030 .. 0x0260) around the consumer's KV loop (0x0060 .. 0x0200):
# a wait whose retry block lies after the function's EXIT and jumps back into the loop (0x0300 .. 0x0320), two
# QK HGMMAs, the softmax (FMNMX, SHFL, MUFU.EX2), two PV HGMMAs; the epilogue's store after the KV loop.
LISTING = """
        code for sm_90a
                Function : fa_fwd
        /*0000*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0 ;
        /*0010*/                   USETMAXREG.DEALLOC.CTAPOOL 0x18 ;
        /*0020*/                   MOV R1, c[0x0][0x28] ;
        /*0030*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0040*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3 ;
        /*0050*/              @!P0 BRA 0x300 ;
        /*0060*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR6], R5 ;
        /*0070*/              @!P1 BRA 0x330 ;
        /*0080*/                   HGMMA.64x176x16.F32 R24, gdesc[UR8], RZ ;
        /*0090*/                   HGMMA.64x176x16.F32 R24, gdesc[UR12], R24, gsb0 ;
        /*00a0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*00b0*/                   FMNMX R6, R24, R25, !PT ;
        /*00c0*/                   SHFL.BFLY PT, R7, R6, 0x1, 0x1f ;
        /*00d0*/                   FMNMX R6, R6, R7, !PT ;
        /*00e0*/                   SHFL.BFLY PT, R7, R6, 0x2, 0x1f ;
        /*00f0*/                   FFMA R24, R24, R8, -R6 ;
        /*0100*/                   MUFU.EX2 R24, R24 ;
        /*0110*/                   MUFU.EX2 R25, R25 ;
        /*0120*/                   MUFU.EX2 R9, R9 ;
        /*0130*/                   FADD R10, R24, R25 ;
        /*0140*/              @!PT LDS RZ, [RZ] ;
        /*0150*/                   NOP ;
        /*0160*/                   F2FP.F16.F32.PACK_AB R11, R25, R24 ;
        /*0170*/                   BAR.SYNC.DEFER_BLOCKING 0x2, 0x100 ;
        /*0180*/                   HGMMA.64x128x16.F32 R112, R11, gdesc[UR16], R112 ;
        /*0190*/                   HGMMA.64x128x16.F32 R112, R12, gdesc[UR20], R112, gsb0 ;
        /*01a0*/                   BAR.ARV 0x3, 0x100 ;
        /*01b0*/                   SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR24], RZ ;
        /*01c0*/                   IADD3 R4, R4, -0x1, RZ ;
        /*01d0*/                   ISETP.GT.AND P2, PT, R4, RZ, PT ;
        /*01e0*/                   STL [R1+0x4], R112 ;
        /*01f0*/                   FMUL R113, R113, R9 ;
        /*0200*/               @P2 BRA 0x60 ;
        /*0210*/                   MUFU.RCP R13, R10 ;
        /*0220*/                   STS [R14], R112 ;
        /*0230*/                   UTMASTG.2D [UR28], [UR30] ;
        /*0240*/                   ISETP.GT.AND P3, PT, R2, 0x4, PT ;
        /*0250*/                   NOP ;
        /*0260*/               @P3 BRA 0x30 ;
        /*0270*/                   EXIT ;
        /*0280*/                   BRA 0x280 ;
        /*0300*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3 ;
        /*0310*/              @!P0 BRA 0x300 ;
        /*0320*/                   BRA 0x60 ;
        /*0330*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR6], R5 ;
        /*0340*/              @!P1 BRA 0x330 ;
        /*0350*/                   BRA 0x80 ;
"""


def _span(loop):
    return loop[0].addr, loop[-1].addr


def test_retry_blocks_are_not_loops():
    insns = parse_sass(LISTING)
    spans = {_span(x) for x in backward_loops(insns)}
    # the address-span reading counts the retry blocks' jumps back into the body as loops
    assert (0x60, 0x320) in spans and (0x80, 0x350) in spans
    natural = {_span(x) for x in natural_loops(insns)}
    # the tile loop, the KV loop and the retry blocks' spins; the function's closing BRA to itself follows the EXIT
    # and is reached by no path
    assert natural == {(0x60, 0x200), (0x30, 0x260), (0x300, 0x310), (0x330, 0x340)}


def test_attention_loop_is_the_innermost_natural_loop_with_the_hgmma():
    loop = attention_loop(parse_sass(LISTING))
    assert _span(loop) == (0x60, 0x200)


def test_attention_stats_per_kv_block():
    st = attention_stats(attention_loop(parse_sass(LISTING)), hgmma_per_block=4)
    assert st.blocks == 1.0 and st.hgmma == 4
    assert st.instructions == 25  # 27 in the span, less the NOP and the @!PT load
    assert st.per_hgmma == 25 / 4
    # the softmax between the QK pair and the PV pair (live indices 4 .. 15); the wrap-around run from the second PV
    # HGMMA to the first QK HGMMA is 9
    assert st.longest_hgmma_free == 12
    assert (st.ex2_per_block, st.mufu_per_block, st.shfl_per_block) == (3, 3, 2)
    assert (st.syncs_per_block, st.bar_per_block) == (2, 2)
    assert st.hgmma_shapes == ("64x128x16", "64x176x16")
    assert st.local == 1
    assert (st.wgmma_waits_per_block, st.wgmma_arrives_per_block) == (1, 0)
    two = attention_stats(attention_loop(parse_sass(LISTING)), hgmma_per_block=2)
    assert two.blocks == 2.0 and two.ex2_per_block == 1.5
    assert math.isnan(attention_stats(attention_loop(parse_sass(LISTING)), 0).ex2_per_block)


def test_setmaxnreg_targets():
    assert setmaxnreg_targets(parse_sass(LISTING)) == (("alloc", 240), ("dealloc", 24))


PTXAS_LOG = """ptxas info    : (C7517) warpgroup.wait is injected in around line 283 by compiler to allow use of registers \
defined by GMMA in function 'k'
ptxas info    : (C7517) warpgroup.wait is injected in around line 777 by compiler to allow use of registers defined by \
GMMA in function 'k'
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma \
instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'k'
ptxas info    : Used 168 registers, used 1 barriers
"""


def test_wgmma_diagnostics_of_a_ptxas_log():
    d = wgmma_diagnostics(PTXAS_LOG)
    assert d.injected_waits == 2
    assert d.serialized == ("non wgmma instructions defining accumulator registers of a wgmma between start and end "
                            "of the pipeline stage")
    clean = wgmma_diagnostics("ptxas info    : Used 168 registers, used 16 barriers\n")
    assert (clean.serialized, clean.injected_waits) == ("", 0)


def test_no_hgmma_loop_is_an_error():
    from synth.emit.sass import SassError

    text = LISTING.replace("HGMMA", "HMMA")
    with pytest.raises(SassError, match="no loop with HGMMA"):
        attention_loop(parse_sass(text))


# --- synth's attention kernel, compiled (nvcc) ---------------------------------------------------------------------


def _emitter():
    try:
        return importlib.import_module("synth.emit.sm90.attention_kernel")
    except ImportError as exc:
        pytest.skip(f"synth's attention emitter is not built: {exc}")


@pytest.mark.nvcc
@pytest.mark.skipif(tool("nvcc") is None, reason="nvcc is not on PATH (install the CUDA toolkit)")
@pytest.mark.skipif(tool("cuobjdump") is None, reason="cuobjdump not found: pip install nvidia-cuda-cuobjdump")
def test_synth_attention_kernel_sass():
    """synth's head-dim-128 kernel (the schedule of problems/ws/attention-d128-f16.yaml) compiles for sm_90a, and its
    consumer main loop holds the schedule's wgmmas, 8 + 8 HGMMA (k16) per KV block and warp group, and at least
    ``BN / 2 = 64`` exponentials per KV block and thread (a warp group's 64 x 128 block of S over its 128 threads),
    with no local-memory traffic in it (ptxas may spill outside the loop at the launch bound, as it does for FA3's
    kernel: 20 + 20 bytes with nvcc 13.0), and with its wgmmas pipelined: one ``wgmma.wait_group`` per GEMM and
    block, none serialized by ptxas (message C7515) nor waits injected (C7517)."""
    mod = _emitter()
    sys_path = str(ROOT / "benchmarks")
    import sys

    if sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    import sass_attention

    row = sass_attention.synth_row(sass_attention.solve_problem(ROOT / "problems" / "ws" / "attention-d128-f16.yaml",
                                                                time_limit=60.0), causal=False, emitter=mod)
    assert "error" not in row, row.get("error")
    assert row["blocks"] >= 1 and row["hgmma_per_block"] == 16
    assert row["ex2_per_block"] >= 64
    assert row["loop_local"] == 0
    assert row["setmaxnreg"] != "-"  # the producer gives its registers to the consumers
    # the wgmmas pipelined as the schedule has them: ptxas serializes none, injects no wait, and the loop waits once
    # per GEMM and block
    assert row["ptxas_wgmma"] == "no" and row["injected"] == 0 and row["waits_per_block"] == 2


# --- the benchmark's FA3 side: where its sources and CUTLASS come from, and what it says when they do not build ------


def _bench():
    import sys

    path = str(ROOT / "benchmarks")
    if path not in sys.path:
        sys.path.insert(0, path)
    import sass_attention

    return sass_attention


def test_fa3_checkout_and_cutlass_version(tmp_path, monkeypatch):
    b = _bench()
    monkeypatch.delenv("SYNTH_FA3", raising=False)
    assert b.fa3_checkout(None) is None
    monkeypatch.setenv("SYNTH_FA3", str(tmp_path))
    assert b.fa3_checkout(None) == tmp_path.resolve()
    assert b.fa3_checkout("/elsewhere") == pathlib.Path("/elsewhere")
    inc = tmp_path / "csrc" / "cutlass" / "include"
    (inc / "cutlass").mkdir(parents=True)
    (inc / "cutlass" / "version.h").write_text("#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 5\n"
                                               "#define CUTLASS_PATCH 1\n")
    assert b.cutlass_version(inc) == (3, 5, 1)
    found, where = b.cutlass_for(tmp_path)
    assert found != inc  # 3.5 is too old for FA3: the wheel's headers, or none with the reason
    assert ("nvidia-cutlass wheel" in where) if found else ("CUTLASS 3.5.1" in where)
    (inc / "cutlass" / "version.h").write_text("#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 6\n"
                                               "#define CUTLASS_PATCH 0\n")
    assert b.cutlass_for(tmp_path) == (inc, "the checkout's csrc/cutlass (CUTLASS 3.6.0)")


def test_fa3_row_without_the_launch_template(tmp_path):
    row = _bench().fa3_row(tmp_path, 128, False)
    assert row["error"].startswith("not available:") and "flash_fwd_launch_template.h not found" in row["error"]


@pytest.mark.nvcc
@pytest.mark.skipif(tool("nvcc") is None, reason="nvcc is not on PATH (install the CUDA toolkit)")
def test_fa3_row_names_the_first_compiler_error(tmp_path):
    b = _bench()
    inc = tmp_path / "csrc" / "cutlass" / "include" / "cutlass"
    inc.mkdir(parents=True)
    (inc / "version.h").write_text("#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 0\n")
    (tmp_path / "hopper").mkdir()
    (tmp_path / "hopper" / "flash_fwd_launch_template.h").write_text('#include "missing_header_of_fa3.h"\n')
    row = b.fa3_row(tmp_path, 128, False)
    assert row["error"].startswith("does not compile with the checkout's csrc/cutlass (CUTLASS 4.2.0):")
    assert "missing_header_of_fa3.h" in row["error"]

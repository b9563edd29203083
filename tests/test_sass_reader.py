"""synth.emit.sass on hand-written listings: parsing, the main loop and its figures (no nvcc needed)."""

from __future__ import annotations

from synth.emit.sass import loop_stats, main_loop, parse_sass, stg_widths

LISTING = """
        code for sm_80
                Function : synth_gemm
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDGSTS.E.BYPASS.LTC128B.128 [R10], [R2.64] ;
        /*0020*/                   HMMA.16816.F32 R20, R4, R8, R20 ;
        /*0030*/                   LDSM.16.M88.4 R4, [R12] ;
        /*0040*/                   HMMA.16816.F32 R24, R40, R8, R24 ;
        /*0050*/                   HMMA.16816.F32 R28, R40, R8, R28 ;
        /*0060*/                   IADD3 R2, R2, 0x40, RZ ;
        /*0070*/                   LDGSTS.E.BYPASS.LTC128B.128 [R10+0x800], [R2.64] ;
        /*0080*/              @!PT LDS RZ, [RZ] ;
        /*0090*/                   NOP ;
        /*00a0*/                   DEPBAR.LE SB0, 0x2 ;
        /*00b0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00c0*/                   UIADD3 UR4, UR4, 0x1, URZ ;
        /*00d0*/                   HMMA.16816.F32 R32, R4, R8, R32 ;
        /*00e0*/               @P0 BRA 0x20 ;
        /*00f0*/                   STG.E.128 [R2.64], R20 ;
        /*0100*/                   STG.E [R2.64+0x10], R24 ;
        /*0110*/                   EXIT ;
        /*0120*/                   BRA 0x120 ;
"""


def test_parse_finds_guards_opcodes_and_operands():
    insns = parse_sass(LISTING)
    assert insns[0].op == "MOV" and insns[0].addr == 0
    guarded = [x for x in insns if x.pred]
    assert [(x.pred, x.op) for x in guarded] == [("@!PT", "LDS"), ("@P0", "BRA")]
    assert stg_widths(insns) == {128: 1, 32: 1}


def test_main_loop_is_the_backward_branch_with_the_hmma():
    loop = main_loop(parse_sass(LISTING))
    assert loop[0].addr == 0x20 and loop[-1].op == "BRA"  # not the self-loop after EXIT


def test_loop_figures():
    st = loop_stats(main_loop(parse_sass(LISTING)), hmma_per_ktile=4)
    assert st.ktiles == 1.0 and st.hmma == 4 and st.ldsm == 1 and st.ldgsts == 1
    assert st.instructions == 11  # 0x20 .. 0xe0 but NOP and the never-executed @!PT LDS
    assert st.per_hmma == 11 / 4
    assert st.depbar == (2,) and st.bar_sync == 1
    # cyclic: after the last HMMA only the BRA, then the first HMMA of the next iteration
    assert st.longest_hmma_free == 5  # IADD3 LDGSTS DEPBAR BAR UIADD3
    # LDSM R4 at 0x30: HMMA at 0x40, 0x50 read R40 (not R4..R7), the one at 0xd0 reads R4
    assert st.min_ldsm_to_use == 2
    assert st.max_ldgsts_run_share == 1.0 and st.int_ops == 1 and st.uniform_ops == 1
    assert st.order == ("HMMA", "LDSM", "HMMA", "HMMA", "LDGSTS", "DEPBAR", "BAR", "HMMA")
    assert loop_stats(main_loop(parse_sass(LISTING)), hmma_per_ktile=2).ktiles == 2.0

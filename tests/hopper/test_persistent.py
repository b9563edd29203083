"""Persistent tiles (docs/hopper.md, "Persistent tiles"; docs/hopper_kernel.md): a grid of any P CTAs walks
the output tiles with the pipeline state carried across them. The emulated kernel equals numpy for P not
dividing the tile count, P = 1, P = tiles, P above the tiles, one tile, K below stages x BK, M and N off the
tile grid; the proof (the ring program for every N = n T >= 1 and the tile carry) holds; each known
persistent-tile bug, written as a carry mutant, is refuted by the prover with the tile and k-tile and fails
on the emulator; the problem key is opt-in and refused where it does not apply."""

import shutil
from collections import Counter

import pytest

from synth.emit import sass
from synth.emit.launch import persistent_ctas, persistent_ring
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import emulate_sm90
from synth.emit.sm90.kernel import emit_sm90_kernel
from synth.emit.sm90.sass_mix import figures
from synth.errors import SynthError
from synth.lower.hopper_persistent import TileCarry
from synth.verify.hopper_persistent import CARRY_MUTANTS, check_carry, verify_persistent
from synth.lower.hopper_design import design_program

CFG = KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=1, persistent=True)
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ needed")


@needs_gxx
@pytest.mark.parametrize("M,N,K,ctas,order,block_order", [
    (300, 200, 448, 5, "forward", "forward"),       # 12 tiles on 5 CTAs (3, 3, 2, 2, 2), T = 7 > stages, M, N ragged
    (300, 200, 128, 1, "reverse", "forward"),       # P = 1: one CTA walks all 12 tiles; T = 2 < stages
    (300, 200, 136, 12, "random", "reverse"),       # P = tiles, T = 3 = stages, K off the tile
    (100, 72, 64, 1, "forward", "forward"),         # one tile, one k-tile
    (300, 200, 192, 40, "forward", "shuffle:3"),    # more CTAs than tiles: 28 CTAs without a tile
    (128 * 9 + 3, 72, 320, 7, "reverse", "forward"),  # 10 x 2 tiles: two raster bands, 7 CTAs
])
def test_persistent_grids_match_numpy(M, N, K, ctas, order, block_order):
    r = emulate_sm90(emit_sm90_kernel(CFG), M, N, K, ctas=ctas, order=order, block_order=block_order, with_c=True,
                     alpha=0.5, beta=-1.5)
    assert r.ok, r.summary()
    assert r.stats["poisoned_ops"] == 0 and r.stats["waw"] == 0 and r.max_abs_err < 1e-4


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("cfg,shape,ctas", [
    (KernelDesign.of(bm=64, bn=64, stages=4, k_pipe_mmas=2, persistent=True), (200, 130, 520), 3),  # a 2-step drain
    (KernelDesign.of(bm=128, bn=64, stages=2, k_pipe_mmas=0, persistent=True, dtype="bf16"), (260, 130, 200), 4),  # none
    (KernelDesign.of(bm=64, bn=256, stages=3, k_pipe_mmas=1, persistent=True), (130, 300, 136), 2),  # one consumer
])
def test_other_pipelines_persistent(cfg, shape, ctas):
    r = emulate_sm90(emit_sm90_kernel(cfg), *shape, ctas=ctas, with_c=True, beta=0.25, order="random", dtype=cfg.dtype)
    assert r.ok, r.summary()
    assert verify_persistent(design_program(cfg), tile_ends=range(1, cfg.stages + 2)).ok


def test_default_is_one_cta_per_tile_and_refusals():
    plain = emit_sm90_kernel(KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=1))
    assert "n_tiles" not in plain and "SYNTH_PERSISTENT" not in plain
    src = emit_sm90_kernel(CFG)
    assert "#define SYNTH_PERSISTENT 1" in src and "for (int t = 0; t < n_tiles; ++t)" in src
    assert "if (n_tiles > 0)" in src  # a CTA with no tile uses no barrier
    for bad in (KernelDesign.of(persistent=True, split_k=2), KernelDesign.of(persistent=True, load_when="k < T - 1")):
        with pytest.raises(ValueError):
            emit_sm90_kernel(bad)
    with pytest.raises(ValueError, match="persistent"):
        emit_sm90_kernel(KernelDesign.of(), carry={"consumer": CARRY_MUTANTS["phase_reset"]})


def test_the_persistent_kernel_is_proven():
    r = verify_persistent(design_program(CFG), tile_ends=range(1, CFG.stages + 2))
    assert r.ok, r.render()
    for line in ("ring program (every N >= 1): proven", "carry: proven", "tile_end: proven"):
        assert line in r.render()
    # the kernel of a persistent config writes the ring program's own states: the program is the one-tile lowering
    assert design_program(CFG) == design_program(KernelDesign.of(bm=128, bn=64, stages=3, k_pipe_mmas=1))


@pytest.mark.parametrize("name", sorted(CARRY_MUTANTS))
@pytest.mark.parametrize("role", ["producer", "consumer"])
def test_each_carry_bug_is_refuted_with_its_tile(name, role):
    ok, why = check_carry(design_program(CFG), {role: CARRY_MUTANTS[name]})
    assert not ok
    assert why.startswith(role) and "at the CTA's tile " in why and "k-tile" in why and "T = " in why, why
    tile = int(why.split("at the CTA's tile ")[1].split(",")[0])
    assert tile >= 1, why  # invisible on a CTA's first tile
    if name == "second_tile_parity_flip":
        assert tile == 1, why
    # its corrected form is proven
    assert check_carry(design_program(CFG), {role: TileCarry()}) == (True, "")


def test_carry_bug_invisible_at_one_tile_per_cta():
    """Each bug carries the right state on a CTA's first tile: one CTA per tile never shows it (why
    bounded checkers miss it), but the carry check quantifies over every tile."""
    if shutil.which("g++") is None:
        pytest.skip("g++ needed")
    # the same binary as test_each_carry_bug_fails_on_the_emulator's first case
    src = emit_sm90_kernel(CFG, carry={"consumer": CARRY_MUTANTS["second_tile_parity_flip"]})
    r = emulate_sm90(src, 300, 200, 448, ctas=12)  # P = tiles: every CTA has one tile
    assert r.ok, r.summary()
    bad = emulate_sm90(src, 300, 200, 448, ctas=5)
    assert not bad.ok and bad.kind in ("hang", "fault"), bad.summary()


@needs_gxx
@pytest.mark.parametrize("name", [
    "second_tile_parity_flip",
    pytest.param("tile_local_parity", marks=pytest.mark.slow),
    pytest.param("phase_reset", marks=pytest.mark.slow),
])
def test_each_carry_bug_fails_on_the_emulator(name):
    src = emit_sm90_kernel(CFG, carry={"consumer": CARRY_MUTANTS[name]})
    for K in (64, 448):  # T = 1 and T = 7: every tile of a CTA after its first
        r = emulate_sm90(src, 300, 200, K, ctas=2)
        assert not r.ok and (r.kind in ("hang", "fault") or r.max_abs_err > 1e-2), (K, r.summary())


def test_tile_end_wait_is_checked_in_place():
    """The tile-end wait_group 0 as a statement of the program: a wrong count there is refuted."""
    import dataclasses

    from synth.expr import Num
    from synth.lower.hopper_persistent import tile_end_program
    from synth.verify.phases import verify_hopper

    p = tile_end_program(design_program(CFG), 2)
    cons = next(r for r in p.roles if r.name == "consumer")
    assert cons.program.parts[0].stmts[-1].guard is not None
    waits = cons.program.waits[:-1] + (dataclasses.replace(cons.program.waits[-1], in_flight=Num(-1)),)
    bad = dataclasses.replace(p, roles=tuple(dataclasses.replace(r, program=dataclasses.replace(r.program, waits=waits))
                                             if r.name == "consumer" else r for r in p.roles))
    assert not verify_hopper(bad, tightness=False).ok
    with pytest.raises(ValueError):
        tile_end_program(design_program(CFG), 0)


@needs_gxx
@pytest.mark.slow
def test_missing_tile_end_drain_fails_on_the_emulator():
    """Without the tile's wait_group 0 the C store reads accumulators a pending wgmma group still writes, and the next
    tile zeroes them: the emulator reports the write as a race on the accumulator (docs/emulator.md, "The accumulator
    in flight")."""
    src = emit_sm90_kernel(CFG)
    line = "synth_wgmma_wait_n<0>();  // the tile's accumulators are complete"
    assert line in src
    r = emulate_sm90(src.replace(line, ""), 300, 200, 448, ctas=5)
    assert not r.ok and r.kind == "race" and "wgmma accumulator" in r.message, r.summary()


def test_launch_grid():
    assert persistent_ctas(12, 132) == 12 and persistent_ctas(1000, 132) == 132 and persistent_ctas(0, 132) == 1
    assert persistent_ctas(12, 132, 40) == 40 and persistent_ctas(12, 132, 1) == 1
    for bad in (0, -3, True, 2**31):
        with pytest.raises(ValueError):
            persistent_ctas(12, 132, bad)
    assert persistent_ring(12, 5, 7) == 21


def _problem(tmp_path, body: str):
    from synth.load import load_problem

    f = tmp_path / "p.yaml"
    f.write_text("kind: gemm\nname: hop\nshape: {M: 300, N: 200, K: 448}\narch: sm_90\n"
                 "tile: {BM: 128, BN: 64, BK: 64}\n" + body)
    return load_problem(str(f))


def test_problem_key(tmp_path):
    assert _problem(tmp_path, "persistent: true\n").persistent is True
    assert _problem(tmp_path, "").persistent is False
    for body, where, words in (("split_k: 2\npersistent: true\n", 7, "split_k"),
                               ("persistent: 3\n", 6, "true or false"),
                               ("mainloop: cp_async\npersistent: true\n", 7, "Hopper main loop")):
        with pytest.raises(SynthError) as e:
            _problem(tmp_path, body)
        assert e.value.loc.line == where and words in str(e.value), (body, str(e.value))


@needs_gxx
@pytest.mark.slow
def test_solved_folder_launches_any_grid(tmp_path):
    import numpy as np

    from synth import api
    from synth.kernel import KernelError, load

    f = tmp_path / "p.yaml"
    f.write_text("kind: gemm\nname: hop\nshape: {M: 300, N: 200, K: 448}\narch: sm_90\n"
                 "tile: {BM: 128, BN: 64, BK: 64}\nstages: 3\nk_pipe_mmas: 1\npersistent: true\n")
    out = tmp_path / "out"
    api.solve(str(f), out=str(out))
    k = load(str(out), backend="emulator")
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (300, 448)).astype(np.float16)
    B = rng.uniform(-1, 1, (200, 448)).astype(np.float16)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    for ctas in (None, 5):
        assert np.abs(k(A, B, ctas=ctas) - ref).max() < 1e-3
    with pytest.raises(KernelError, match="ctas"):
        k(A, B, ctas=0)


@pytest.mark.slow
@pytest.mark.skipif(sass.tool("nvcc") is None or sass.tool("cuobjdump") is None, reason="nvcc/cuobjdump needed")
@pytest.mark.parametrize("bm,bn", [(128, 128), (128, 256)])
def test_compiles_for_sm90a_and_keeps_the_main_loop(bm, bn):
    cfg = KernelDesign.of(bm=bm, bn=bn, stages=4, k_pipe_mmas=1, persistent=True)
    c = sass.compile_cuda(emit_sm90_kernel(cfg), "sm_90a",
                          flags=("-DNDEBUG",))
    names = Counter(i.op for i in sass.parse_sass(c.sass))
    assert names["UTMALDG"] and names["HGMMA"] and names["HMMA"] == 0 and names["LDGSTS"] == 0
    assert c.spill_stores == 0 and c.spill_loads == 0 and c.stack == 0
    assert "C7514" not in c.log, "ptxas serialized the wgmma pipeline"
    f = figures(c, 4)  # the tile loop is outside the k-loop: the k-loop is the one-tile kernel's, unrolled
    assert f["loop_hgmma"] >= 8 and f["insn_per_hgmma"] <= 7.0 and f["longest_free"] <= 18, f

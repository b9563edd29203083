"""The sm_90a FlashAttention-forward kernel emitted from the proven attention program (docs/attention.md, "The
kernel"): the text follows the program statement by statement, nvcc compiles it for sm_90a (HGMMA and MUFU.EX2 in the
consumers' loop, no spill), the CPU emulator runs it against numpy (head dims 64 and 128, f16 and bf16, causal or not,
odd lengths, CTAs with no KV block, a grid larger than one in both dimensions, every thread order), and each bug of
the table, injected into the kernel text, fails there."""

from __future__ import annotations

import hashlib
import os
import pathlib
import pickle
import re
import shutil
from dataclasses import replace

import numpy as np
import ortools
import pytest

from synth.completion import TryWaitStmt
from synth.emit import sass
from synth.emit.sm90.attention_kernel import emit_attention_kernel, kernel_registers
from synth.emit.sm90.attention_mutants import KERNEL_MUTANTS, attention_kernel_mutant
from synth.emit.emulate import EmulatorError, cache_dir
from synth.emit.sm90.emulate_attention import attention_orders, consumer_orders, emulate_attention, reference
from synth.lower.hopper_attention import attention_mutant, lower_attention
from synth.model.ws_bodies import attention_body
from synth.model.ws_schedule import solve_ws
from synth.program import CommitStmt, WaitStmt

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed for the CPU emulator")
needs_nvcc = pytest.mark.skipif(sass.tool("nvcc") is None or sass.tool("cuobjdump") is None,
                                reason="nvcc and cuobjdump are needed")

TILES = {128: 128, 64: 192}
"""Head dim -> the CTA's Q rows (two consumer warp groups at 128, three at 64); 128 KV rows per block."""


def _solve(body, workers):
    """``solve_ws(body)``, kept by content like the emulator's binaries (under ``$SYNTH_EMU_CACHE/tests``, keyed by the
    body, the workers, OR-Tools' version and the text of every module of synth/model and of the two it imports from
    the base, arch and deadline): the solve takes most of this file's quick tier, and
    tests/hopper/test_attention_program.py solves the same bodies anew on every run."""
    pkg = pathlib.Path(__file__).resolve().parents[2] / "synth"
    sources = [*sorted((pkg / "model").glob("*.py")), pkg / "arch.py", pkg / "deadline.py"]
    h = hashlib.sha256()
    for part in (repr(body), str(workers), ortools.__version__, *(p.read_text() for p in sources)):
        h.update(part.encode())
        h.update(b"\0")
    path = cache_dir() / "tests" / f"attention-schedule-{h.hexdigest()[:24]}.pickle"
    if path.exists():
        return pickle.loads(path.read_bytes())
    sched = solve_ws(body, time_limit=60, workers=workers)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(sched))
    os.replace(tmp, path)
    return sched


@pytest.fixture(scope="module")
def solved():
    """``(body, schedule, program)`` per head dim: ``solve_ws``'s schedules (as tests/hopper/test_attention_program.py
    solves them; cached, :func:`_solve`), lowered. The bf16 bodies take the f16 schedule: attention_body's costs do
    not depend on the 16-bit type (its lowering is the same program)."""
    out = {}
    for d, bm in TILES.items():
        body = attention_body(d, bm, 128)
        sched = _solve(body, 1 if d == 128 else 2)
        out[d, "f16"] = (body, sched, lower_attention(body, sched))
        bbody = attention_body(d, bm, 128, "bf16")
        out[d, "bf16"] = (bbody, sched, lower_attention(bbody, sched))
    return out


def kernel(solved, d, causal, dtype="f16"):
    body, sched, ap = solved[d, dtype]
    return emit_attention_kernel(ap, body, sched, causal=causal)


# ---- the text


def _role_text(text: str, role: str) -> str:
    """The kernel's text of role ``role``: from its ``// ---- ROLE body`` to the next such comment."""
    m = re.search(rf"// ---- {role} body\n(.*?)// ---- ", text, re.S)
    assert m, role
    return m.group(1)


def test_every_synchronization_statement_is_one_line(solved):
    """Each try_wait, commit and wait_group of every role is one line of the kernel, in the program's order, in each
    piece of the role's loop (the steps split at the guards' thresholds: 0, 1, n, n + 1 for a consumer)."""
    body, sched, ap = solved[128, "f16"]
    text = emit_attention_kernel(ap, body, sched, causal=True)
    for role in ap.program.roles:
        stmts = role.program.part("body").stmts
        seg = _role_text(text, role.name)
        pieces = re.findall(r"for \(int i = (.*?); i < (.*?); \+\+i\)", seg)
        assert pieces == ([("0", "1"), ("1", "n")] if role.name == "producer" else
                          [("0", "1"), ("1", "n"), ("n", "n + 1")]), role.name
        waits = [s.barrier for s in stmts if isinstance(s, TryWaitStmt)]
        assert re.findall(r"synth_mbar_wait\(bar_(\w+) ", seg) == waits * len(pieces), role.name
        assert seg.count("synth_wgmma_commit();") == len(pieces) * sum(isinstance(s, CommitStmt) for s in stmts)
        # pv's (i < n) ? 1 : 0 and qk's 0: one immediate 0 each
        assert seg.count("synth_wgmma_wait_n<0>();") == len(pieces) * sum(isinstance(s, WaitStmt) for s in stmts)
    # the wait counts are the program's: pv keeps the next qk in flight
    assert "if ((i < n)) synth_wgmma_wait_n<1>();" in text
    # setmaxnreg: the producer at least 32 (24 spills), the consumers the rest of the register file
    assert kernel_registers(sched) == (32, 240)
    assert "synth_setmaxnreg_dec<32>();" in text and "synth_setmaxnreg_inc<240>();" in text


def test_kernel_follows_the_program(solved):
    """A change of the program is the same change of the kernel: consumer1's order wait on the parity of turn i + 1
    (the table's order_wrong_parity, a program mutant) changes that one line (in each piece of consumer1's loop)."""
    body, sched, ap = solved[128, "f16"]
    base = emit_attention_kernel(ap, body, sched, causal=False)
    mut = emit_attention_kernel(attention_mutant(ap, "order_wrong_parity"), body, sched, causal=False)
    diff = [(a, b) for a, b in zip(base.split("\n"), mut.split("\n")) if a != b]
    assert len(base.split("\n")) == len(mut.split("\n")) and len(diff) == 3
    for a, b in diff:
        assert "bar_order1" in a and "((i / 1) % 2)" in a and "(((i + 1) / 1) % 2)" in b


def test_refused_outside_the_form(solved):
    body, sched, ap = solved[128, "f16"]
    with pytest.raises(ValueError, match="head dim 32"):
        emit_attention_kernel(ap, attention_body(32, 128, 128), sched, causal=False)
    with pytest.raises(ValueError, match="1 consumer warp group"):
        emit_attention_kernel(ap, body, replace(sched, consumers=1), causal=False)
    with pytest.raises(ValueError, match="does not end in the dtype"):
        emit_attention_kernel(ap, replace(body, name="attention"), sched, causal=False)
    with pytest.raises(ValueError, match="no producer"):
        emit_attention_kernel(ap, body, replace(sched, producer=False), causal=False)
    # a copy whose complete_tx bytes are not the tile's
    prod = ap.program.role("producer").program
    stmts = tuple(replace(s, barrier=replace(s.barrier, bytes=s.barrier.bytes // 2))
                  if getattr(s, "barrier", None) is not None and getattr(s, "op", "") == "load_K" else s
                  for s in prod.part("body").stmts)
    p2 = ap.program.with_role("producer", replace(prod, parts=(replace(prod.part("body"), stmts=stmts),)))
    with pytest.raises(ValueError, match="complete_tx bytes 16384 differ"):
        emit_attention_kernel(ap.with_program(p2), body, sched, causal=False)


# ---- nvcc


@needs_nvcc
@pytest.mark.parametrize("d,causal", [(128, True), (64, False), pytest.param(128, False, marks=pytest.mark.slow),
                                      pytest.param(64, True, marks=pytest.mark.slow)])
def test_nvcc_sm90a(solved, d, causal):
    """nvcc -arch=sm_90a: no spill; each consumer's steady loop holds its d / 16 + BN / 16 HGMMA (qk, pv), its
    BN / 2 + 2 MUFU.EX2 (exp2 of S, the two corrections) and 4 warpgroup instructions (a fence and a wait per batch):
    ptxas serializes no wgmma (no C7515 / C7517 / C7511 in its report)."""
    c = sass.compile_cuda(kernel(solved, d, causal), arch="sm_90a")
    assert c.spill_stores == c.spill_loads == 0 and c.stack == 0, c.log
    assert "C751" not in c.log, c.log
    per_step = d // 16 + 128 // 16
    steps = {lp[0].addr for lp in sass.backward_loops(sass.parse_sass(c.sass))
             if sum(x.op == "HGMMA" for x in lp) == per_step
             and sum(x.opcode.startswith("MUFU.EX2") for x in lp) >= 128 // 2 + 2
             and sum("WARPGROUP" in x.op for x in lp) == 4}
    assert len(steps) >= TILES[d] // 64  # a loop per consumer role (ptxas may peel more)
    # the mask (its FSEL ... -INF) lies behind a predicated forward branch: a block no mask reaches skips it
    ins = sass.parse_sass(c.sass)
    for lp in sass.backward_loops(ins):
        if lp[0].addr not in steps:
            continue
        skips = [(x.addr, int(re.search(r"0x[0-9a-f]+", x.operands).group(0), 16)) for x in lp
                 if x.op == "BRA" and x.pred and re.search(r"0x[0-9a-f]+", x.operands)]
        masks = [x.addr for x in lp if x.op == "FSEL" and "-INF" in x.operands]
        assert len(masks) == 64 and all(any(a < m < b for a, b in skips) for m in masks)


# ---- the emulator


def test_reference_is_softmax_attention():
    """The numpy reference on a case by hand: one query, two keys; a causal row that sees no key is 0."""
    q = np.array([[[[1.0, 0.0]]]])
    k = np.array([[[[1.0, 0.0], [0.0, 1.0]]]])
    v = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    p = np.exp([1.0, 0.0]) / np.exp([1.0, 0.0]).sum()
    assert np.allclose(reference(q, k, v, causal=False, scale=1.0)[0, 0, 0], p @ v[0, 0])
    q2 = np.ones((1, 1, 3, 2))  # 3 queries, 2 keys, causal bottom-right: row 0 sees no key
    out = reference(q2, k, v, causal=True, scale=1.0)
    assert np.all(out[0, 0, 0] == 0) and np.allclose(out[0, 0, 1], v[0, 0, 0])


@needs_gxx
@pytest.mark.parametrize("d,causal,dtype,shape,order", [
    (128, True, "f16", (2, 1, 300, 130), "reverse"),     # Sq > Sk: CTAs with n = 0 (their rows 0), grid 3 x 2
    (64, False, "f16", (2, 1, 250, 77), "starve"),       # one ragged block, Sq not a multiple of BM
    pytest.param(128, True, "f16", (1, 2, 200, 330), "forward", marks=pytest.mark.slow),  # 3 KV blocks, grid 2 x 2
    pytest.param(64, True, "f16", (1, 1, 77, 1), "random", marks=pytest.mark.slow),       # one key
    (128, False, "bf16", (1, 2, 130, 257), "random"),
])
def test_emulator_matches_numpy(solved, d, causal, dtype, shape, order):
    b, h, sq, sk = shape
    r = emulate_attention(kernel(solved, d, causal, dtype), batch=b, heads=h, seqlen_q=sq, seqlen_k=sk,
                          causal=causal, order=order, seed=7)
    assert r.ok, r.summary()
    assert r.stats["ctas"] == -(-sq // TILES[d]) * b * h
    if causal and sq > sk:  # rows that see no key are 0, as FlashAttention returns them
        assert np.all(r.O[:, :, :sq - sk] == 0)


def test_consumer_orders(solved):
    """One ``starve_consumerW`` order per consumer warp group of the kernel; an order naming a consumer the kernel
    does not have is refused."""
    text = kernel(solved, 128, False)
    assert consumer_orders(text) == ("starve_consumer0", "starve_consumer1")
    assert consumer_orders(kernel(solved, 64, False))[-1] == "starve_consumer2"
    with pytest.raises(EmulatorError, match="starve_consumer2"):
        emulate_attention(text, batch=1, heads=1, seqlen_q=1, seqlen_k=1, causal=False, order="starve_consumer2")


MUTANT_SHAPES = {128: ((1, 2, 128, 400), (1, 2, 300, 130)), 64: ((1, 2, 200, 400), (1, 2, 500, 100))}
"""Head dim -> (batch, heads, Sq, Sk) without and with the causal mask (the latter with CTAs of no KV block):
four KV blocks, so that both slots of each ring are refilled."""


def _mutant_case(d, name):
    causal = name == "q_load_before_exit"
    return causal, MUTANT_SHAPES[d][causal]


@needs_gxx
@pytest.mark.parametrize("d,causal", [(128, False), pytest.param(128, True, marks=pytest.mark.slow),
                                      pytest.param(64, False, marks=pytest.mark.slow),
                                      pytest.param(64, True, marks=pytest.mark.slow)])
def test_unmutated_passes_every_order(solved, d, causal):
    """The kernel the mutants are made from passes at their shapes in every thread order (each consumer starved
    alone included)."""
    b, h, sq, sk = MUTANT_SHAPES[d][causal]
    text = kernel(solved, d, causal)
    for order in attention_orders(text):
        r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order=order, seed=3)
        assert r.ok, (order, r.summary())


EXPECTED = {
    # name: (how it fails, the thread order that shows it)
    "softmax_before_wait": ("race", "forward"),  # rowmax's mask writes S while qk accumulates into it
    "rescale_races_pv": ("wrong", "forward"),    # the last block's P V missing from O / l
    "v_released_early": ("nan", "forward"),      # pv reads V's slot after the refill poisoned it
    "order_wrong_parity": ("hang", "starve"),    # a consumer waits on a phase already passed
    "q_load_before_exit": ("fault", "forward"),  # mbarrier.inval with the Q copy in flight
}
"""How each kernel edit of the table fails at head dim 128; with three consumers (head dim 64) the same, but for
``order_wrong_parity``, which hangs when one consumer lags alone (:data:`EXPECTED_THREE`)."""
EXPECTED_THREE = {**EXPECTED, "order_wrong_parity": ("hang", "starve_consumer2")}
EXPECTED_PROGRAM = {**EXPECTED, "rescale_races_pv": ("race", "forward"), "v_released_early": ("nan", "starve_consumer0")}
"""How the kernel emitted from each program mutant fails (head dim 128): the rescale moved after pv's issue writes O
while pv accumulates into it; consumer 0's early release of V needs consumer 0 to lag while consumer 1 releases and
the producer refills the slot."""


def _assert_fails(r, kind):
    if kind in ("hang", "fault", "race"):
        assert r.kind == kind, r.summary()
    elif kind == "nan":
        assert r.kind == "" and r.nan_count > 0, r.summary()
    else:
        assert r.kind == "" and r.nan_count == 0 and r.max_abs_err > 0.05, r.summary()


@needs_gxx
@pytest.mark.parametrize("name", sorted(KERNEL_MUTANTS))
def test_table_bug_fails_on_the_emulator(solved, name):
    """Each bug of the table, injected into the head-dim-128 kernel, fails on the emulator in the thread order and the
    way :data:`EXPECTED` says."""
    causal, (b, h, sq, sk) = _mutant_case(128, name)
    base = kernel(solved, 128, causal)
    text = attention_kernel_mutant(base, name)
    assert text != base
    kind, order = EXPECTED[name]
    r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order=order, seed=3)
    _assert_fails(r, kind)
    if name == "softmax_before_wait":
        assert "wgmma accumulator" in r.message and "warp group 1" in r.message, r.message


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNEL_MUTANTS))
def test_table_bug_fails_with_three_consumers(solved, name):
    """The same bugs in the head-dim-64 kernel (three consumer warp groups), as :data:`EXPECTED_THREE` says; the wrong
    order parity passes the orders that hold back no consumer or all alike (forward, reverse, random, starve)."""
    causal, (b, h, sq, sk) = _mutant_case(64, name)
    text = attention_kernel_mutant(kernel(solved, 64, causal), name)
    kind, order = EXPECTED_THREE[name]
    r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order=order, seed=3)
    _assert_fails(r, kind)
    if name == "order_wrong_parity":
        for o in ("forward", "starve"):
            r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order=o, seed=3)
            assert r.ok, (o, r.summary())


def test_mutant_names():
    """The kernel's bug table names the program's (docs/attention.md); an unknown name is refused."""
    from synth.lower.hopper_attention import MUTANTS
    assert set(KERNEL_MUTANTS) == set(MUTANTS)
    with pytest.raises(KeyError):
        attention_kernel_mutant("", "no_such_bug")


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("d", sorted(TILES))
@pytest.mark.parametrize("causal", [False, True])
def test_emulator_sweep(solved, d, causal):
    """Every thread order, odd lengths (one key, 77, 130, Sq not a multiple of BM, Sq > Sk), batch x heads 4."""
    text = kernel(solved, d, causal)
    for sq, sk in ((77, 1), (130, 77), (300, 130), (200, 330)):
        for order in attention_orders(text):
            r = emulate_attention(text, batch=2, heads=2, seqlen_q=sq, seqlen_k=sk, causal=causal, order=order,
                                  seed=sq + sk)
            assert r.ok, (sq, sk, order, r.summary())


@needs_gxx
@pytest.mark.parametrize("name", sorted(EXPECTED_PROGRAM))
def test_program_mutant_emitted_fails(solved, name):
    """The kernel emitted from a mutant of the program (docs/attention.md's table, ``attention_mutant``) carries the
    bug too, and each fails on the emulator as :data:`EXPECTED_PROGRAM` says: the rescale racing pv as a race on the
    accumulator, naming the warp group and the thread; consumer 0's early V release when consumer 0 alone lags
    (``starve_consumer0``; ``starve``, which holds both back alike, passes). ``q_load_before_exit``'s producer loop (extent ``max(n, 1)``) is
    not of the split form and is written as one loop under its guards."""
    body, sched, ap = solved[128, "f16"]
    causal, (b, h, sq, sk) = _mutant_case(128, name)
    text = emit_attention_kernel(attention_mutant(ap, name), body, sched, causal=causal)
    if name == "q_load_before_exit":
        assert "for (int i = 0; i < ((n) > (1) ? (n) : (1)); ++i) {" in text
    kind, order = EXPECTED_PROGRAM[name]
    r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order=order, seed=3)
    _assert_fails(r, kind)
    if name == "rescale_races_pv":
        assert re.search(r"thread \d+ \(warp group [12]\) wrote accumulator register \d+", r.message), r.message
    if name == "v_released_early":
        r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order="starve", seed=3)
        assert r.ok, r.summary()


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_PROGRAM))
def test_program_mutant_emitted_fails_with_three_consumers(solved, name):
    """The same program mutants emitted at head dim 64 (three consumer warp groups): as at head dim 128, but for the
    wrong order parity, which hangs when one consumer lags alone (as the kernel edit does)."""
    body, sched, ap = solved[64, "f16"]
    causal, (b, h, sq, sk) = _mutant_case(64, name)
    text = emit_attention_kernel(attention_mutant(ap, name), body, sched, causal=causal)
    kind, order = {**EXPECTED_PROGRAM, "order_wrong_parity": EXPECTED_THREE["order_wrong_parity"]}[name]
    r = emulate_attention(text, batch=b, heads=h, seqlen_q=sq, seqlen_k=sk, causal=causal, order=order, seed=3)
    _assert_fails(r, kind)

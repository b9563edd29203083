"""synth.emit.cuda: kernel.cu implements the lowered program statement for statement.

The text checks need no compiler. The emulator checks (``slow``) compile the
kernel with g++ against synth_emu.h and run it on the CPU.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest

from conftest import ROOT, check_golden
from gemm_fixtures import gemm_problem, program_for
from synth.emit.cuda import LDSM_LEAD, STATUS_CODES, barriers, c_expr, emit_kernel, kernel_info, staging_bytes
from synth.gemm import load_shares, share_chunks, tiling
from synth.errors import SynthError
from synth.expr import evaluate, parse
from synth.load import load_problem
from synth.expr import to_str
from synth.program import CommitStmt, OpStmt, WaitStmt
from synth.schedule import buffer_bytes

CONFIGS = [
    dict(stages=1, warps=4),
    dict(stages=2, warps=4),    # ldmatrix with the mma: two barriers per k-tile
    dict(stages=3, warps=4),    # the next k-tile's first k16 slice a stage ahead: CUTLASS's shape
    dict(stages=3, warps=8),
    dict(stages=4, warps=8, M=1000, N=777, K=520),
    dict(stages=5, warps=4, BM=64, BN=128, BK=64),
    dict(stages=3, warps=4, BK=16),  # one k16 step, one fragment buffer per operand
]
SYNC_RE = re.compile(r"^\s*synth_syncthreads\(\); // sync:(\d+) (RAW|WAR): \S.*$")


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items())


@pytest.fixture(scope="module", params=CONFIGS, ids=_ids)
def case(request):
    p = gemm_problem(**request.param)
    s, prog = program_for(p)
    return p, s, prog, emit_kernel(p, s, prog)


def _expected_waits_and_commits(prog, unroll):
    """Immediates of every wait_group and the number of commit_group in the text, in order:
    prologue/epilogue once per executed step, the body once per emitted copy."""
    waits, commits = [], 0
    for part in prog.parts:
        n = int(evaluate(part.extent, {}))
        if part.name == "body":
            copies = (unroll if n >= unroll else 0) + n % unroll
            steps = [(c, True) for c in range(copies)]
        else:
            steps = [(i, False) for i in range(n)]
        for i, body in steps:
            env = {part.var: i, prog.loop_var: 0}
            for s in part.stmts:
                if not body and s.guard is not None and not evaluate(s.guard, env):
                    continue
                if isinstance(s, CommitStmt):
                    commits += 1
                if isinstance(s, WaitStmt):
                    waits.append(int(evaluate(prog.waits[s.wait].in_flight, env)))
    return waits, commits


def _body_sync_numbers(text):
    lines = text.split("\n")
    a = next(k for k, ln in enumerate(lines) if "// ---- body" in ln)
    b = next(k for k, ln in enumerate(lines) if "// ---- epilogue" in ln)
    return [int(m.group(1)) for ln in lines[a:b] if (m := SYNC_RE.match(ln))]


def test_portability_layer_comes_first(case):
    _, _, _, text = case
    lines = text.split("\n")
    i = lines.index("#ifdef SYNTH_EMULATE")
    assert lines[i + 1] == '#include "synth_emu.h"' and lines[i + 2] == "#else"
    assert "#include <cuda_fp16.h>" in lines[i + 3:i + 8]
    assert "#define SYNTH_DEVICE __device__ __forceinline__" in lines
    end = lines.index("#endif", i)
    assert all(not ln.startswith("#include") for ln in lines[end:])
    kernel = "\n".join(ln.split("//")[0] for ln in lines[end + 1:])
    # only the layer's names inside the kernel: no PTX, no CUDA intrinsics; no % of the loop counter
    for bad in ("asm", "__syncthreads", "__cvta", "__device__", "__half", "__hadd", "uint4", "float2", "float4",
                "__trap"):
        assert not re.search(rf"\b{bad}\b", kernel), bad
    assert not re.search(r"\bi\b[^;]*%", kernel)
    assert 'extern "C" __global__ void SYNTH_LAUNCH_BOUNDS(SYNTH_THREADS)' in kernel
    assert ("synth_gemm(const half* A, const half* B, float* C, const float* C_in, int M, int N, int K,\n"
            "           int lda, int ldb, int ldc, float alpha, float beta, int* status) {") in kernel
    assert "extern __shared__ __align__(16) unsigned char synth_smem[];" in kernel


def test_run_time_preconditions_come_first_with_documented_codes(case):
    _, _, _, text = case
    body = text[text.index("synth_gemm(const half* A"):]
    first = body.index("int err = 0;")
    assert first < body.index("synth_smem") and first < body.index("synth_cp_async_16")
    for code, (name, _) in STATUS_CODES.items():
        assert f"#define {name} {code}" in text
        assert f"err |= {name};" in body
    assert "*status = err;" in body and "return;" in body[first:body.index("extern __shared__")]


def test_commits_and_waits_match_the_program(case):
    p, s, prog, text = case
    info = kernel_info(p, s, prog)
    waits, commits = _expected_waits_and_commits(prog, info.body_unroll)
    got = [int(x) for x in re.findall(r"^\s*synth_cp_async_wait<(\d+)>\(\);  // wait #", text, re.M)]
    assert got == waits
    assert len(re.findall(r"^\s*synth_cp_async_commit\(\);", text, re.M)) == commits
    assert "switch" not in text  # gemm programs have constant body counts
    # the store waits for everything once more before reusing shared memory for C
    assert re.findall(r"^\s*synth_cp_async_wait<(\d+)>\(\);  // store", text, re.M) == ["0"]


def test_every_barrier_is_a_numbered_line(case):
    p, s, prog, text = case
    calls = [ln for ln in text.split("\n") if "synth_syncthreads();" in ln and "// store" not in ln]
    nums = []
    for ln in calls:
        m = SYNC_RE.match(ln)
        assert m, ln
        nums.append(int(m.group(1)))
    assert nums == list(range(len(nums)))
    info = kernel_info(p, s, prog)
    body = [b for b in info.barriers if b.part == "body"]
    n_body = int(evaluate(prog.part("body").extent, {}))
    others = [b for b in info.barriers if b.part != "body"]
    assert len(calls) == len(others) + (1 if n_body else 0) * len(body)


def test_shared_memory_is_the_schedules_or_the_c_staging(case):
    p, s, prog, text = case
    info = kernel_info(p, s, prog)
    assert info.pipeline_smem_bytes == buffer_bytes(p, s.multiplicity, "shared")
    assert info.staging_smem_bytes == staging_bytes(p.gemm)
    assert info.smem_bytes == max(info.pipeline_smem_bytes, info.staging_smem_bytes)
    assert f"#define SYNTH_SMEM_BYTES {info.smem_bytes}" in text
    assert f"#define SYNTH_KTILES {p.loop.trip_count}" in text
    assert f"constexpr int A_S_SLOTS = {s.mult('A_s')};" in text
    # the fragment buffers: one k16 slice each, declared once
    frags = [b.name for b in p.buffers if b.space == "register" and b.name != "C_r"]
    assert frags == (["A_f0", "B_f0"] if p.gemm.BK == 16 else ["A_f0", "A_f1", "B_f0", "B_f1"])
    for f in frags:
        assert len(re.findall(rf"^  uint32_t {f}\[(MI\]\[4|NI\]\[2)\];", text, re.M)) == 1, f


def _body_lines(text):
    lines = text.split("\n")
    start = next(k for k, ln in enumerate(lines) if "// ---- body" in ln)
    end = next(k for k, ln in enumerate(lines) if "// ---- epilogue" in ln)
    return lines[start:end]


def test_every_instruction_of_the_body_is_there_once_from_the_right_slot(case):
    """Per body iteration: MI ldmatrix (A) and NI/2 (B) per s2r op into X_f{kk % 2}, MI x NI mma.sync per
    mma op, each load share's chunks; shared slots are rotating registers, never a % of the counter."""
    p, s, prog, text = case
    t = tiling(p.gemm)
    body = "\n".join(_body_lines(text))
    assert not re.search(r"\bi\b[^;/]*%", "\n".join(ln.split("//")[0] for ln in _body_lines(text)))
    stmts = {st.op: st for st in prog.part("body").stmts if isinstance(st, OpStmt)}
    P = load_shares(p.gemm)
    for op, st in stmts.items():
        n = len(re.findall(rf"// {op}: ", body))
        if op.startswith("s2r_A"):
            assert n == t.MI
            kk = int(op.rsplit("_", 1)[1])
            assert len(re.findall(rf"synth_ldmatrix_x4\(A_f{kk % 2}\[\d\], .*// {op}: ", body)) == t.MI
        elif op.startswith("s2r_B"):
            assert n == t.NI // 2
        elif op.startswith("mma"):
            kk = int(op.rsplit("_", 1)[1])
            assert len(re.findall(rf"synth_mma_16816\(acc\[\d+\]\[\d+\], A_f{kk % 2}\[\d+\], B_f{kk % 2}", body)) >= \
                t.MI * t.NI * sum(1 for x in stmts if x == op)
        else:
            j = int(op.split("_")[1])
            assert n == len(share_chunks(t.a_chunks_per_thread, P, j)) + len(share_chunks(t.b_chunks_per_thread, P, j))
    info = kernel_info(p, s, prog)
    assert len(re.findall(r"synth_cp_async_16\(", body)) == info.cp_async_per_iteration
    assert len(re.findall(r"synth_mma_16816\(", body)) == t.MI * t.NI * t.KI
    assert len(re.findall(r"synth_ldmatrix_x4\(", body)) == (t.MI + t.NI // 2) * t.KI
    # full, unpredicated copies in the body: the K residue is k-tile 0's, which the prologue loads
    if int(evaluate(prog.part("prologue").extent, {})):
        assert "k0_bytes" not in body


def test_copies_and_ldmatrix_are_woven_into_the_mma_of_their_run():
    """CUTLASS's pins: every k16 step's mma.sync carries the ldmatrix of the next step (all of them at
    least LDSM_LEAD mma.sync before the step ends) and the step's load share, spread out."""
    p = gemm_problem(stages=3, warps=4, M=1024, N=1024, K=1024)
    s, prog = program_for(p)
    lines = [ln.strip() for ln in _body_lines(emit_kernel(p, s, prog))]
    mma_rows = [k for k, ln in enumerate(lines) if ln.startswith("synth_mma_16816")]
    t = tiling(p.gemm)
    steps = [mma_rows[q * t.MI * t.NI:(q + 1) * t.MI * t.NI] for q in range(t.KI)]
    copies = 0
    for q, rows in enumerate(steps):
        lo = steps[q - 1][-1] + 1 if q else 0
        region = range(lo, rows[-1] + 1)
        lds = [k for k in region if lines[k].startswith("synth_ldmatrix_x4")]
        ldg = [k for k in region if lines[k].startswith("synth_cp_async_16")]
        assert len(lds) == t.MI + t.NI // 2, q  # the next k16 step's fragments
        after = [sum(1 for r in rows if r > k) for k in lds]
        assert min(after) >= LDSM_LEAD, (q, after)
        between = [sum(1 for k in ldg if rows[j] < k < rows[j + 1]) for j in range(len(rows) - 1)]
        assert not ldg or max(between) <= 1, between  # at most one copy between two mma.sync
        copies += len(ldg)
    assert copies == kernel_info(p, s, prog).cp_async_per_iteration


def _symbolic(**kw):
    from synth.gemm import GemmConfig, expand_gemm
    from synth.graph import build_graph
    from synth.lower import lower
    from synth.schedule import schedule_from_pins

    p = expand_gemm(GemmConfig(**kw), min_ktiles=1)
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    prog = lower(p, g, s)
    return p, s, prog, emit_kernel(p, s, prog)


def test_symbolic_trip_count_is_computed_at_run_time():
    """T = ceil(K / BK) at run time: the body loop runs max(T - S, 0) steps, prologue steps past the
    first are guarded by the trip count, T below SYNTH_MIN_KTILES is reported, any K otherwise."""
    p, s, prog, text = _symbolic(M=512, N=512, K=512, stages=3, warps=4)
    assert "#define SYNTH_KTILES 0" in text and "#define SYNTH_MIN_KTILES 1" in text
    assert "const int T = (K + BK - 1) / BK;  // k-tiles" in text
    assert "(K + BK - 1) / BK < SYNTH_MIN_KTILES) err |= SYNTH_ERR_KTILES;" in text
    assert "!= SYNTH_KTILES" not in text
    assert re.search(r"for \(int i = 0; i < \(\(\(T - 2\)\) > \(0\) \? .*; \+\+i\) \{", text)
    assert "if (1 < ((T) < (2) ? (T) : (2))) {  // prologue i = 1" in text
    info = kernel_info(p, s, prog)
    assert info.ktiles == 0
    body = "\n".join(ln.split("//")[0] for ln in _body_lines(text))
    assert not re.search(r"\bi\b[^;]*%", body) and "k0_bytes" not in body


def test_cutlass_like_pins_need_one_barrier_per_k_tile():
    # stages 3: the next k-tile's s2r_*_0 runs after the wait, behind the only barrier, which also
    # retires every read of the slot the next step's cp.async overwrites (MmaMultistage's shape)
    p = gemm_problem(stages=3, warps=8)
    s, prog = program_for(p)
    body = [b for b in barriers(prog, {"A_s", "B_s"}) if b.part == "body"]
    assert [b.why[:3] for b in body] == ["RAW"]
    assert prog.part("body").stmts[body[0].stmt].op == "s2r_A_0"
    assert s.mult("A_s") == 3
    w = [prog.waits[st.wait] for st in prog.part("body").stmts if isinstance(st, WaitStmt)]
    groups = sum(1 for st in prog.part("body").stmts if isinstance(st, CommitStmt))  # per k-tile
    # CUTLASS's kStages - 2 k-tiles in flight
    assert [(x.before, to_str(x.in_flight)) for x in w] == [("s2r_A_0", str(groups))]


def test_minimal_slots_need_two_barriers_per_k_tile():
    # stages 2 (ldmatrix with the mma, loads first): with the minimal number of slots the
    # next step's cp.async reuses the slot read after this step's barrier
    p = gemm_problem(stages=2, warps=8)
    s, prog = program_for(p)
    body = [b for b in barriers(prog, {"A_s", "B_s"}) if b.part == "body"]
    assert [b.why[:3] for b in body] == ["WAR", "RAW"]
    assert prog.part("body").stmts[body[0].stmt].op == "load_0"
    assert prog.part("body").stmts[body[1].stmt].op == "s2r_A_0"


def test_one_more_slot_needs_one_barrier_per_k_tile():
    # CUTLASS's choice: kStages slots for kStages-1 tiles in flight, one __syncthreads per k-tile
    p = gemm_problem(stages=2, warps=8)
    s, _ = program_for(p)
    more = replace(s, multiplicity=tuple((b, m + 1 if b.endswith("_s") else m) for b, m in s.multiplicity))
    from synth.graph import build_graph
    from synth.lower import lower

    prog = lower(p, build_graph(p), more)
    body = [b for b in barriers(prog, {"A_s", "B_s"}) if b.part == "body"]
    assert [b.why[:3] for b in body] == ["RAW"]
    text = emit_kernel(p, more, prog)
    assert "constexpr int A_S_SLOTS = 3;" in text
    # shared slots are rotating registers in the body (no % of the loop counter)
    assert re.search(r"^    so_AB\d+ = so_AB\d+ == 2 \* A_STRIDE \? 0 : so_AB\d+ \+ A_STRIDE;$", text, re.M)


def test_unsafe_wait_is_refused():
    p = gemm_problem(stages=3, warps=8)
    s, prog = program_for(p)
    k = next(n for n, w in enumerate(prog.waits) if w.part == "body")
    bad = prog.with_wait(k, in_flight=parse(f"{to_str(prog.waits[k].in_flight)} + 1"))
    with pytest.raises(SynthError, match="before any wait retires"):
        emit_kernel(p, s, bad)


def test_dynamic_body_count_becomes_a_switch():
    p = gemm_problem(stages=3, warps=8)
    s, prog = program_for(p)
    k = next(n for n, w in enumerate(prog.waits) if w.part == "body")
    # a smaller count is always safe: 0 in the first steps, the proved 1 after
    dyn = prog.with_wait(k, in_flight=parse("(i < 5) ? 0 : 1"))
    text = emit_kernel(p, s, dyn)
    assert kernel_info(p, s, dyn).body_unroll == 1  # fragment buffers have one slot: no unrolling
    assert text.count("switch ((((i < 5)) ? (0) : (1))) {") == 1
    assert text.count("case 1: synth_cp_async_wait<1>(); break;") == 1
    assert text.count("default: synth_cp_async_wait<0>(); break;") == 1
    assert kernel_info(p, s, dyn).body_waits == (0, 1)
    # the proved count is a constant: an immediate
    assert "switch" not in emit_kernel(p, s, prog)


def test_non_gemm_problems_are_refused():
    p = load_problem(str(ROOT / "problems" / "rfc0077-gemm.yaml"))
    from synth.graph import build_graph
    from synth.lower import lower
    from synth.schedule import schedule_from_pins

    g = build_graph(p)
    s = schedule_from_pins(p, g)
    with pytest.raises(SynthError, match="not a kind: gemm problem"):
        emit_kernel(p, s, lower(p, g, s))


def test_c_expr():
    assert c_expr(parse("(i + 3) % 4")) == "((i + 3) % 4)"
    assert c_expr(parse("min(i, 2) - 1")) == "(((i) < (2) ? (i) : (2)) - 1)"
    assert c_expr(parse("i < 1 ? 1 : 0")) == "(((i < 1)) ? (1) : (0))"


def test_golden_kernel(update_golden):
    p = load_problem(str(ROOT / "problems" / "gemm-128x128x32-f16.yaml"))
    s, prog = program_for(p)
    check_golden(ROOT / "tests" / "golden" / p.name / "kernel.cu", emit_kernel(p, s, prog), update_golden)


# ---------------------------------------------------------------------------
# the CPU emulator (g++)

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed for the CPU emulator")


def _emulate(p, s, prog, text, **kw):
    from synth.emit.emulate import emulate_gemm

    cfg = p.gemm
    info = kernel_info(p, s, prog)
    return emulate_gemm(text, cfg.M, cfg.N, cfg.K, BM=cfg.BM, BN=cfg.BN, warps=cfg.warps,
                        smem_bytes=info.smem_bytes, **kw)


@pytest.mark.slow
@needs_gxx
def test_emulated_kernel_is_correct_and_conflict_free():
    # M, N, K not tile multiples: zero-filled loads, bounds-checked stores
    p = gemm_problem(M=200, N=136, K=200, stages=4, warps=8)
    s, prog = program_for(p)
    r = _emulate(p, s, prog, emit_kernel(p, s, prog))
    assert r.clean, r.summary()
    assert r.bank_conflicts.total == 0, r.summary()


@pytest.mark.slow
@needs_gxx
def test_emulator_catches_each_deleted_body_barrier():
    p = gemm_problem(M=128, N=128, K=160, stages=3, warps=4)
    s, prog = program_for(p)
    text = emit_kernel(p, s, prog)
    body_syncs = _body_sync_numbers(text)
    assert body_syncs
    for n in body_syncs[:2]:
        cut = "\n".join(ln for ln in text.split("\n") if f"// sync:{n} " not in ln)
        r = _emulate(p, s, prog, cut)
        assert not r.clean, f"deleting sync:{n} went unnoticed: {r.summary()}"


@pytest.mark.slow
@needs_gxx
@pytest.mark.parametrize("K, stages, policy", [(96, 3, "interleave"), (160, 3, "forward"), (64, 2, "reverse")])
def test_emulated_short_loops(K, stages, policy):
    # body of 1 step (only a remainder copy), 3 steps (one unrolled pair + remainder), 1 with 2 stages
    p = gemm_problem(M=40, N=72, K=K, stages=stages, warps=8, BM=64, BN=64)
    s, prog = program_for(p)
    r = _emulate(p, s, prog, emit_kernel(p, s, prog), policy=policy)
    assert r.clean, r.summary()

"""The CUDA target: a lowered :class:`~synth.program.Program` of a ``kind: gemm``
problem as ``kernel.cu`` (contract in ``docs/cuda_kernel.md``).

Input: the problem (its :class:`~synth.gemm.GemmConfig`), the schedule and the
program. Output: one self-contained CUDA C++ file whose main loop is the
program statement for statement, written so that ptxas keeps the order:

* prologue and epilogue fully unrolled (every guard, slot and
  ``cp.async.wait_group`` count an immediate); the body a loop whose shared
  slots are **rotating registers** (a byte offset per distinct ``(i + d) % M``,
  advanced once per iteration, never a ``%`` of the loop counter);
* ``load_j`` (share ``j`` of the k-tile's copies): one 16-byte ``cp.async``
  per chunk of the share, at the matrix plus a per-chunk 32-bit offset
  computed once and advanced by BK per iteration (rows past M/N clamped to the
  last row: they only feed C entries that are never stored); the K residue is k-tile 0's
  (its chunks left of ``K - T*BK`` are zero-filled), so every other copy is a
  full, unpredicated 16 bytes;
* ``s2r_X_kk``: one ``ldmatrix.x4`` per m16 (A) or n16 (B) tile of k16 slice
  ``kk`` into ``X_f{kk % 2}``; ``mma_kk``: ``MI x NI`` ``mma.sync``;
* within a **run** (statements with no commit, wait, barrier or run-time guard
  between them) the ldmatrix and cp.async of the run are woven into the
  ``mma.sync`` of the k16 step they precede (or, after the run's last step,
  follow) when the data allows (the op writes nothing that step reads): ldmatrix early (at least 8 mma before the end of the
  step, so their results have the next step to arrive), copies spread evenly.
  Commits, waits and barriers stay exactly where the program has them;
* one ``cp.async.commit_group`` per :class:`~synth.program.CommitStmt`, one
  ``cp.async.wait_group N`` per :class:`~synth.program.WaitStmt` (a ``switch``
  over the values of a count that varies in the body);
* ``__syncthreads()`` exactly where :func:`~synth.emit.barriers.barriers`
  finds cross-thread visibility needs one, each on its own
  ``synth_syncthreads(); // sync:<n> <why>`` line;
* the store: ``C = alpha * A B^T + beta * C_in`` (``C_in`` optional) staged
  through shared memory, 128-bit loads and stores;
* run-time preconditions checked first; a violation writes a code to
  ``*status`` (:data:`STATUS_CODES`) and the kernel returns without writing C.

Left out on purpose: predicated ops (``when:``), more than one async queue,
sync (non-async) loads, symbolic trip counts — gemm problems have none of
these; :func:`emit_kernel` raises :class:`~synth.errors.SynthError` for them.
Never modifies its inputs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from ..errors import SynthError
from ..expr import Bin, Call, Expr, Ite, Num, Un, Var, evaluate, simplify, to_str
from ..gemm import GemmConfig, Tiling, config_from_problem, load_shares, op_names, share_chunks, tiling
from ..problem import Problem
from ..program import CommitStmt, OpStmt, Part, Program, WaitStmt
from ..schedule import Schedule
from .barriers import Barrier, analysed_steps, barriers, extent, max_extent, step_env, takes_value, trip_samples
from .raster import cuda_lines as raster_lines
from . import splitk, streamk
from .splitk import SPLIT_STATUS

RUNTIME_DIR = os.path.join(os.path.dirname(__file__), "runtime")
API_HEADER = os.path.join(RUNTIME_DIR, "synth_cuda_api.h")
SHARED = ("A_s", "B_s")
LOAD_RE = re.compile(r"^load_(\d+)$")
S2R_RE = re.compile(r"^s2r_([AB])_(\d+)$")
MMA_RE = re.compile(r"^mma_(\d+)$")
LDSM_LEAD = 8
"""mma.sync an ldmatrix woven into a k16 step keeps between it and the step's end (when the step has more)."""
STATUS_CODES = {
    1: ("SYNTH_ERR_K", "K < 1 or K % 8 != 0 (16-byte cp.async of A and B rows)"),
    2: ("SYNTH_ERR_LD_AB", "lda or ldb below K or not a multiple of 8"),
    4: ("SYNTH_ERR_LD_C", "ldc below N or not a multiple of 4 (128-bit C stores)"),
    8: ("SYNTH_ERR_ALIGN", "A, B, C or C_in not 16-byte aligned"),
    16: ("SYNTH_ERR_KTILES", "ceil(K / BK) differs from SYNTH_KTILES, the trip count the program was proved for "
             "(a kernel proved for a symbolic trip count: ceil(K / BK) below SYNTH_MIN_KTILES; with split-K, "
             "times SYNTH_SPLIT_K: every split runs at least that many)"),
    32: ("SYNTH_ERR_SIZE", "A or B spans 2^31 elements or more (the copies use 32-bit offsets), or a stream-K "
         "grid times its k-tile iterations reaches 2^62"),
    SPLIT_STATUS: ("SYNTH_ERR_SPLIT", "gridDim.z differs from SYNTH_SPLIT_K, a stream-K grid is not 1-D or has more "
                   "CTAs than k-tile iterations, or a split-K or stream-K launch lacks its "
                   "workspace or tickets (or the workspace is not 16-byte aligned)"),
}
"""Bits of the code the kernel writes to ``*status`` when a run-time precondition fails."""


def status_reasons(status: int) -> str:
    """The reasons :data:`STATUS_CODES` gives for the bits set in a kernel's ``*status``, joined by ``; ``."""
    return "; ".join(w for code, (_, w) in STATUS_CODES.items() if status & code)


# ---------------------------------------------------------------------------
# C expressions


def c_expr(e: Expr) -> str:
    """``e`` in C (the expression grammar is C's; min/max become conditionals)."""
    if isinstance(e, Num):
        return str(e.value) if e.value >= 0 else f"({e.value})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Un):
        return f"{e.op}({c_expr(e.arg)})"
    if isinstance(e, Ite):
        return f"(({c_expr(e.cond)}) ? ({c_expr(e.then)}) : ({c_expr(e.other)}))"
    if isinstance(e, Call):
        acc = c_expr(e.args[0])
        for a in e.args[1:]:
            b = c_expr(a)
            cmp = "<" if e.fn == "min" else ">"
            acc = f"(({acc}) {cmp} ({b}) ? ({acc}) : ({b}))"
        return acc
    if e.op == "==" and e.lhs == Num(0) and e.rhs == Num(0):
        return "true"
    if e.op == "!=" and e.lhs == Num(0) and e.rhs == Num(0):
        return "false"
    return f"({c_expr(e.lhs)} {e.op} {c_expr(e.rhs)})"


# ---------------------------------------------------------------------------
# the kernel


@dataclass(frozen=True)
class KernelInfo:
    """Facts of an emitted kernel that tests and the runner check against the binary."""

    smem_bytes: int
    """Dynamic shared memory: the larger of the pipeline's slots and the C staging area."""
    threads: int
    grid: tuple[int, int, int]
    """The grid for the problem's own shape (a stream-K kernel's: one CTA per tile, 1-D; its launcher picks
    any size up to the k-tile iterations, :meth:`synth.kernel.KernelFacts.launch`)."""
    ktiles: int
    """The static trip count the kernel was proved for; 0 for a symbolic one (``SYNTH_KTILES``: any K with
    ``ceil(K / BK) >= SYNTH_MIN_KTILES``)."""
    body_unroll: int
    barriers: tuple[Barrier, ...]
    body_waits: tuple[int, ...]
    """Immediate of every ``wait_group`` in one body iteration, in order (all values of a switch)."""
    prologue_waits: tuple[int, ...]
    epilogue_waits: tuple[int, ...]
    cp_async_per_iteration: int
    """cp.async instructions per thread in one body iteration."""
    commits_per_iteration: int
    pipeline_smem_bytes: int = 0
    """Shared bytes of the A and B slots (the schedule's multiplicities)."""
    staging_smem_bytes: int = 0
    """Shared bytes the C store stages through (one m16 row band of every warp tile at a time)."""


def _steps(program: Program, part: Part, *exprs: Expr, period: int = 1, constant: bool = False):
    """``(trip, step)`` of every step of ``part`` at every analysed trip count; in the body, only
    those that decide the values of ``exprs`` and of ``step % period``
    (:func:`~synth.emit.barriers.analysed_steps`: the body repeats them)."""
    if part.name == "body":
        yield from analysed_steps(program, part, exprs, period, constant)
        return
    for trip in trip_samples(program):
        for i in range(extent(program, part, trip)):
            yield trip, i


def _check_supported(problem: Problem, program: Program) -> GemmConfig:
    cfg = config_from_problem(problem)
    names = {o.name for o in program.ops}
    if names != set(op_names(cfg.BK // 16, load_shares(cfg))):
        raise SynthError(None, f"program {program.name!r} is not the k-tile loop of its gemm problem (ops "
                         f"{sorted(names)})", "emit CUDA from the program lowered from the kind: gemm problem")
    for o in program.ops:
        if o.when is not None:
            raise SynthError(None, f"op {o.name} is predicated ({o.when}); the CUDA emitter does not support "
                             "predicated gemm ops", "remove the predicate")
        if LOAD_RE.match(o.name) and not o.is_async:
            raise SynthError(None, f"{o.name} is in stage {o.stage}, which is not async; the CUDA kernel needs "
                             "the global->shared copies in an async stage (cp.async)",
                             "keep schedule.async_stages: [0] with the loads in stage 0")
    if len(program.queues) > 1:
        raise SynthError(None, "the program uses more than one async queue; cp.async has one",
                         "use a single cp_async unit")
    for b in program.buffers:
        if b.space == "register" and b.multiplicity != 1:
            raise SynthError(None, f"register buffer {b.name} has {b.multiplicity} slots; the kernel keeps "
                             "fragments in fixed registers (gemm problems make them carried, one slot)",
                             "emit from the program lowered from the kind: gemm problem")
    return cfg


def staging_bytes(cfg: GemmConfig) -> int:
    """Shared bytes the C store stages through: every warp's 16 x WTN f32 band, rows padded by
    32 bytes: the 8-byte fragment stores of 4 rows and (for WTN >= 32) the 16-byte loads of a row
    touch 32 distinct banks."""
    t = tiling(cfg)
    return cfg.warps * 16 * (t.WTN + 8) * 4


def kernel_info(problem: Problem, schedule: Schedule, program: Program) -> KernelInfo:
    """Sizes, waits and barriers of the kernel :func:`emit_kernel` writes."""
    cfg = _check_supported(problem, program)
    t = tiling(cfg)
    mult = {b.name: b.multiplicity for b in program.buffers}
    for name, m in schedule.multiplicity:
        if mult.get(name) != m:
            raise SynthError(None, f"buffer {name} has {m} slots in the schedule but {mult.get(name)} in the "
                             "program", "emit from a program lowered from this schedule")
    pipe = mult["A_s"] * t.a_bytes + mult["B_s"] * t.b_bytes
    stage = staging_bytes(cfg)
    try:
        bars = tuple(barriers(program, set(SHARED)))
    except ValueError as exc:
        raise SynthError(None, f"cannot emit '{program.name}': {exc}",
                         "run 'synth verify' on program.json; emit only proved programs") from None
    waits: dict[str, list[int]] = {"prologue": [], "body": [], "epilogue": []}
    cp = commits = 0
    P = load_shares(cfg)
    full = max(trip_samples(program))  # every prologue and epilogue step runs
    for part in program.parts:
        n = extent(program, part, full)
        for s in part.stmts:
            if isinstance(s, WaitStmt):
                w = program.waits[s.wait]
                if part.name == "body":
                    waits["body"].extend(sorted({int(evaluate(w.in_flight, step_env(program, part, i, t)))
                                                 for t, i in _steps(program, part, w.in_flight)}))
                else:
                    for i in range(n):
                        env = step_env(program, part, i, full)
                        if s.guard is None or evaluate(s.guard, env):
                            waits[part.name].append(int(evaluate(w.in_flight, env)))
            if part.name == "body":
                if isinstance(s, OpStmt) and (m := LOAD_RE.match(s.op)):
                    j = int(m.group(1))
                    cp += len(share_chunks(t.a_chunks_per_thread, P, j)) + \
                        len(share_chunks(t.b_chunks_per_thread, P, j))
                if isinstance(s, CommitStmt):
                    commits += 1
    grid = (-(-cfg.N // cfg.BN), -(-cfg.M // cfg.BM), cfg.split_k)
    if cfg.stream_k:
        grid = (grid[0] * grid[1], 1, 1)
    ktiles = 0 if isinstance(program.trip_count, str) else program.trip_count  # 0: any (symbolic T)
    return KernelInfo(max(pipe, stage), cfg.threads, grid, ktiles, 1, bars, tuple(waits["body"]),
                      tuple(waits["prologue"]), tuple(waits["epilogue"]), cp, commits, pipe, stage)


def api_header() -> str:
    with open(API_HEADER, encoding="utf-8") as fh:
        return fh.read()


def emit_kernel(problem: Problem, schedule: Schedule, program: Program) -> str:
    """``kernel.cu`` implementing ``program`` for the gemm ``problem`` (see module docstring)."""
    info = kernel_info(problem, schedule, program)
    cfg = config_from_problem(problem)
    return _Writer(cfg, tiling(cfg), program, schedule, info).text()


@dataclass
class _Unit:
    """One instruction-sized piece of an op: an ldmatrix, a cp.async or an mma.sync."""

    kind: str
    """``lds``, ``ldg`` or ``mma``."""
    line: str


class _Writer:
    def __init__(self, cfg: GemmConfig, t: Tiling, program: Program, schedule: Schedule, info: KernelInfo) -> None:
        self.cfg, self.t, self.p, self.s, self.info = cfg, t, program, schedule, info
        self.mult = {b.name: b.multiplicity for b in program.buffers}
        self.P = load_shares(cfg)
        self.lines: list[str] = []
        self.nsync = 0
        self.bar = {(b.part, b.step, b.stmt): b for b in info.barriers}
        # shared layout: with equal slot counts slot s of A and of B are adjacent (one rotating offset serves both)
        self.paired = self.mult["A_s"] == self.mult["B_s"]
        if self.paired:
            stride = t.a_bytes + t.b_bytes
            self.base = {"A_s": 0, "B_s": t.a_bytes}
            self.stride = {"A_s": stride, "B_s": stride}
        else:
            self.base = {"A_s": 0, "B_s": self.mult["A_s"] * t.a_bytes}
            self.stride = {"A_s": t.a_bytes, "B_s": t.b_bytes}
        self.rot: dict[tuple[str, int], str] = {}
        """(stride group, d) -> name of the register holding ((i + d) % M) * stride in the body."""
        # chunk c + 1 of a thread is LD_ROWS rows below chunk c: the same swizzle key (a constant byte
        # step) when LD_ROWS is a multiple of 8 (CPR >= 8, key r % 8) or THREADS of 64 (CPR < 8, key L % 8)
        cpr = cfg.BK // 8
        self.st_linear = (cfg.threads // cpr) % 8 == 0 if cpr >= 8 else cfg.threads % 64 == 0
        self.symbolic = isinstance(program.trip_count, str)
        self.T = program.trip_count if self.symbolic else "T"
        self.split = cfg.split_k
        self.stream = cfg.stream_k
        self.red = streamk if self.stream else (splitk if self.split > 1 else None)
        """The protocol by which a tile's partial sums meet (None: every CTA computes whole tiles)."""
        self.loads_in_body = any(isinstance(s, OpStmt) and LOAD_RE.match(s.op) for s in program.part("body").stmts)

    def frag_buffers(self):
        return [b for b in self.p.buffers if b.space == "register" and b.name != "C_r"]

    # -- output helpers
    def w(self, line: str = "", ind: int = 0) -> None:
        self.lines.append(("  " * ind + line) if line else "")

    def text(self) -> str:
        self.header()
        self.kernel()
        return "\n".join(self.lines) + "\n"

    # -- file header and layer
    def header(self) -> None:
        cfg, t, p, info = self.cfg, self.t, self.p, self.info
        stages = ", ".join(f"{o.name}={o.stage}" for o in p.ops)
        mult = ", ".join(f"{b.name} x{b.multiplicity}" for b in p.buffers)
        self.w(f"// kernel.cu for '{p.name}', generated by synth (do not edit; re-run 'synth emit').")
        self.w("// C[M x N] (f32, row stride ldc) = alpha * A[M x K] (f16, row stride lda) * B[N x K]^T (f16, "
               "row stride ldb)")
        self.w(f"//                                 + beta * C_in (optional); problem shape M={cfg.M} N={cfg.N} "
               f"K={cfg.K}, {cfg.arch}")
        self.w(f"// CTA tile {cfg.BM}x{cfg.BN}x{cfg.BK}, {cfg.warps} warps as {t.WM}x{t.WN} "
               f"(warp tile {t.WTM}x{t.WTN}: {t.MI} m16 x {t.NI} n8 x {t.KI} k16 mma.sync per k-tile)")
        self.w(f"// stages: {stages}; order: {list(self.s.order)}; slots: {mult}")
        self.w(f"// shared memory: {info.smem_bytes} B dynamic (pipeline {info.pipeline_smem_bytes} B, tiles "
               f"XOR-swizzled in 16-byte chunks; C staging {info.staging_smem_bytes} B)")
        if self.symbolic:
            self.w(f"// k-tiles: {p.trip_count} = ceil(K / BK) at run time, at least {p.min_trip_count}: prologue "
                   f"{to_str(p.part('prologue').extent)} + body {to_str(p.part('body').extent)} + epilogue "
                   f"{to_str(p.part('epilogue').extent)} steps (proved for every {p.trip_count} >= "
                   f"{p.min_trip_count}); body not unrolled")
        else:
            self.w(f"// k-tiles: {info.ktiles} = prologue {extent(p, p.part('prologue'))} + body "
                   f"{extent(p, p.part('body'))} + epilogue {extent(p, p.part('epilogue'))} steps; body not unrolled")
        self.w(f"// barriers: {len(info.barriers)} placements (see the '// sync:' lines); "
               f"body waits: {list(info.body_waits)}")
        if self.split > 1:
            self.w(f"// split-K: {self.split} splits (gridDim.z); each CTA runs the loop over its share of the "
                   "k-tiles, the tile's last CTA to arrive sums the partials in split order (synth.emit.splitk)")
            self.w("// launch: grid (ceil(N/BN), ceil(M/BM), SYNTH_SPLIT_K), block SYNTH_THREADS, dynamic smem "
                   "SYNTH_SMEM_BYTES; workspace: ceil(M/BM) * ceil(N/BN) * SYNTH_SPLIT_K * BM * BN floats; "
                   "tickets: 2 * ceil(M/BM) * ceil(N/BN) unsigned, zeroed before the first launch (left zeroed)")
        elif self.stream:
            self.w("// stream-K: a 1-D grid of G CTAs shares the tiles x ceil(K/BK) k-tile iterations evenly; a CTA's "
                   "range crosses tiles, a tile's last contributor to arrive sums the partials in k order "
                   "(synth.emit.streamk)")
            self.w("// launch: grid (G, 1, 1), any G >= 1 (one wave: SMs x resident CTAs per SM), block SYNTH_THREADS, "
                   "dynamic smem SYNTH_SMEM_BYTES; workspace: 2 * G * BM * BN floats; tickets: 2 * ceil(M/BM) * "
                   "ceil(N/BN) unsigned, zeroed before the first launch (left zeroed)")
        else:
            self.w("// launch: grid (ceil(N/BN), ceil(M/BM)), block SYNTH_THREADS, dynamic smem SYNTH_SMEM_BYTES.")
        self.w("// run-time preconditions (else *status |= code, C untouched): " +
               "; ".join(f"{code} {why}" for code, (_, why) in STATUS_CODES.items()))
        self.w("#include <stdint.h>")
        self.w("#ifdef SYNTH_EMULATE")
        self.w('#include "synth_emu.h"')
        self.w("#else")
        for line in api_header().rstrip("\n").split("\n"):
            self.lines.append(line)
        self.w("#endif")
        for name, dflt in (("SYNTH_UNROLL", ""), ("SYNTH_NO_UNROLL", ""), ("SYNTH_LAUNCH_BOUNDS(n)", "")):
            self.w(f"#ifndef {name.split('(')[0]}")
            self.w(f"#define {name}{dflt}")
            self.w("#endif")
        self.w()
        for k, v in (("M", cfg.M), ("N", cfg.N), ("K", cfg.K), ("BM", cfg.BM), ("BN", cfg.BN), ("BK", cfg.BK),
                     ("THREADS", cfg.threads), ("SMEM_BYTES", info.smem_bytes),
                     ("KTILES", info.ktiles), ("MIN_KTILES", p.min_trip_count), ("SPLIT_K", self.split),
                     ("STREAM_K", int(self.stream))):
            self.w(f"#define SYNTH_{k} {v}")
        for code, (name, _) in STATUS_CODES.items():
            self.w(f"#define {name} {code}")
        self.w()
        cpr = cfg.BK // 8
        self.w("namespace synth_kernel {")
        consts = [("BM", cfg.BM), ("BN", cfg.BN), ("BK", cfg.BK), ("THREADS", cfg.threads),
                  ("WM", t.WM), ("WN", t.WN), ("WTM", t.WTM), ("WTN", t.WTN),
                  ("MI", t.MI), ("NI", t.NI), ("KI", t.KI), ("CPR", cpr), ("LD_ROWS", cfg.threads // cpr),
                  ("A_TILE", t.a_bytes), ("B_TILE", t.b_bytes),
                  ("A_CHUNKS", t.a_chunks_per_thread), ("B_CHUNKS", t.b_chunks_per_thread),
                  ("A_S_SLOTS", self.mult["A_s"]), ("B_S_SLOTS", self.mult["B_s"]),
                  ("A_BASE", self.base["A_s"]), ("B_BASE", self.base["B_s"]),
                  ("A_STRIDE", self.stride["A_s"]), ("B_STRIDE", self.stride["B_s"]),
                  ("C_LD", t.WTN + 8)]
        for k, v in consts:
            self.w(f"constexpr int {k} = {v};", 0)
        self.w("struct alignas(8) f32x2 { float x, y; };")
        self.w("struct alignas(16) f32x4 { float x, y, z, w; };")
        self.w()
        self.w("// Byte offset of 16-byte chunk c (8 f16) of row r in a tile of CPR chunks per row: chunks")
        self.w("// are numbered row-major, grouped in 128-byte lines of 8, and chunk p of line L is stored")
        self.w("// at position p ^ key (key = L % 8, or r % 8 when a row spans whole lines), so the 8 rows")
        self.w("// of one ldmatrix 8x8 matrix and 8 consecutive cp.async chunks hit 8 distinct bank groups.")
        self.w("SYNTH_DEVICE int swz(int r, int c) {")
        self.w("const int l = r * CPR + c;", 1)
        self.w("const int key = CPR >= 8 ? (r & 7) : ((l >> 3) & 7);", 1)
        self.w("return ((l >> 3) << 7) | (((l & 7) ^ key) << 4);", 1)
        self.w("}")
        self.w("}  // namespace synth_kernel")
        self.w()

    # -- the kernel function
    def kernel(self) -> None:
        p, t = self.p, self.t
        self.w('extern "C" __global__ void SYNTH_LAUNCH_BOUNDS(SYNTH_THREADS)')
        self.w("synth_gemm(const half* A, const half* B, float* C, const float* C_in, int M, int N, int K,")
        if self.red is not None:
            self.w("           int lda, int ldb, int ldc, float alpha, float beta, float* workspace, "
                   "unsigned* tickets, int* status) {")
        else:
            self.w("           int lda, int ldb, int ldc, float alpha, float beta, int* status) {")
        self.w("using namespace synth_kernel;", 1)
        self.w("{  // run-time preconditions, uniform over the grid: report and return before touching memory", 1)
        self.w("int err = 0;", 2)
        self.w("if (K < 1 || K % 8 != 0) err |= SYNTH_ERR_K;", 2)
        self.w("if (lda < K || ldb < K || lda % 8 != 0 || ldb % 8 != 0) err |= SYNTH_ERR_LD_AB;", 2)
        self.w("if (ldc < N || ldc % 4 != 0) err |= SYNTH_ERR_LD_C;", 2)
        self.w("if ((((uintptr_t)A | (uintptr_t)B | (uintptr_t)C | (uintptr_t)C_in) & 15) != 0) "
               "err |= SYNTH_ERR_ALIGN;", 2)
        per = " * SYNTH_SPLIT_K" if self.split > 1 else ""  # every split runs at least (exactly) the proved count
        if self.symbolic:
            self.w(f"if (K >= 1 && (K + BK - 1) / BK < SYNTH_MIN_KTILES{per}) err |= SYNTH_ERR_KTILES;", 2)
        else:
            self.w(f"if (K >= 1 && (K + BK - 1) / BK != SYNTH_KTILES{per}) err |= SYNTH_ERR_KTILES;", 2)
        self.w("if (gridDim.z != SYNTH_SPLIT_K) err |= SYNTH_ERR_SPLIT;", 2)
        if self.stream:
            # a 1-D grid of at most one CTA per iteration (every CTA's range is non-empty), and iteration indices
            # times gridDim.x within 64 bits (the ranges' arithmetic)
            self.w("const long long iters = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN) * ((K + BK - 1) / BK);",
                   2)
            self.w("if (gridDim.y != 1 || iters < gridDim.x) err |= SYNTH_ERR_SPLIT;", 2)
            self.w("if (iters >= (1LL << 62) / gridDim.x) err |= SYNTH_ERR_SIZE;", 2)
        if self.red is not None:
            self.w("if (workspace == nullptr || tickets == nullptr || ((uintptr_t)workspace & 15) != 0) "
                   "err |= SYNTH_ERR_SPLIT;", 2)
        self.w("if ((long long)M * lda >= 2147483647LL || (long long)N * ldb >= 2147483647LL) err |= SYNTH_ERR_SIZE;",
               2)
        self.w("if (err != 0) {", 2)
        self.w("if (status != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) "
               "*status = err;", 3)
        self.w("return;", 3)
        self.w("}", 2)
        self.w("}", 1)
        self.w("extern __shared__ __align__(16) unsigned char synth_smem[];", 1)
        layout = ("slot s of A_s at s * A_STRIDE, of B_s at B_BASE + s * B_STRIDE (A and B of a slot adjacent)"
                  if self.paired else "A_s slots, then B_s slots")
        self.w(f"unsigned char* const smem = synth_smem;  // {layout}", 1)
        thread = ["const int tid = threadIdx.x;", "const int lane = (int)synth_lane_id();",
                  "const int warp = tid / 32, warp_m = warp / WN, warp_n = warp % WN;"]
        if self.stream:  # the thread's indices inside the segment loop: read again, not kept live across it
            self.lines_at(streamk.loop_lines(self.T), 1)
            self.loop_open = len(self.lines)
            self.lines_at(thread, 1)
            for line in raster_lines("BM", "BN", "synth_tile", "sk_tiles_n", "sk_tiles_m"):
                self.w(line, 1)
        else:
            self.lines_at(thread, 1)
            if self.split > 1:
                for line in splitk.index_lines():
                    self.w(line, 1)
            for line in raster_lines("BM", "BN", *(["synth_tile"] if self.split > 1 else [])):
                self.w(line, 1)
        self.w("// loop-invariant addressing, computed once:", 1)
        self.w("// ldmatrix row address of m16 (n16) tile 0 at k16 step 0 in slot 0", 1)
        self.w("const int a_ld = A_BASE + swz(warp_m * WTM + (lane & 15), lane >> 4);", 1)
        self.w("const int b_ld = B_BASE + swz(warp_n * WTN + ((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);", 1)
        self.w("// cp.async chunk c of a tile: row ld_r + c * LD_ROWS, k-chunk ld_kc. k-tile 0 is the partial", 1)
        self.w("// one: it covers k in [-pad, BK - pad), so only its chunks left of 0 are zero-filled and every", 1)
        self.w("// later copy is a full 16 bytes. Rows past M (N) are read from row M - 1 (N - 1): they only", 1)
        self.w("// feed C rows (columns) that are never stored.", 1)
        self.w("const int ld_r = tid / CPR, ld_kc = tid % CPR;", 1)
        if self.red is not None:
            if not self.stream:
                for line in splitk.range_lines(self.T):
                    self.w(line, 1)
            self.w("const int pad = T_all * BK - K;", 1)
            self.w("const int k0_bytes = kt0 > 0 || ld_kc * 8 >= pad ? 16 : 0;  // this thread's chunks of the "
                   f"{'segment' if self.stream else 'split'}'s first k-tile (only k-tile 0 is partial)", 1)
        else:
            self.w(f"const int {self.T} = (K + BK - 1) / BK;  // k-tiles", 1)
            self.w(f"const int pad = {self.T} * BK - K;", 1)
            self.w("const int k0_bytes = ld_kc * 8 >= pad ? 16 : 0;  // this thread's chunks of k-tile 0", 1)
        for mat, rows, ld in (("A", "M", "lda"), ("B", "N", "ldb")):
            x = mat.lower()
            self.w(f"int {x}_off[{mat}_CHUNKS];  // chunk c of the current k-tile: elements from {mat} (advanced by "
                   "BK per body step; 32-bit: SYNTH_ERR_SIZE)", 1)
            if self.st_linear:
                self.w(f"const int {x}_st = {mat}_BASE + swz(ld_r, ld_kc);  // chunk 0 in a slot; chunk c is "
                       "c * THREADS * 16 bytes further (the swizzle key repeats)", 1)
            else:
                self.w(f"int {x}_st[{mat}_CHUNKS];  // chunk c: bytes into a slot", 1)
            self.w(f"SYNTH_UNROLL for (int c = 0; c < {mat}_CHUNKS; ++c) {{", 1)
            origin = "m0" if mat == "A" else "n0"
            self.w(f"const int r = {origin} + ld_r + c * LD_ROWS;", 2)
            start = " + kt0 * BK" if self.red is not None else ""
            self.w(f"{x}_off[c] = (r < {rows} ? r : {rows} - 1) * {ld} + ld_kc * 8 - pad{start};", 2)
            if not self.st_linear:
                self.w(f"{x}_st[c] = {mat}_BASE + swz(ld_r + c * LD_ROWS, ld_kc);", 2)
            self.w("}", 1)
        self.w("float acc[MI][NI][4];  // C_r (carried)", 1)
        self.w("SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)", 1)
        self.w("SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni)", 2)
        self.w("SYNTH_UNROLL for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;", 3)
        for b in self.frag_buffers():
            dims = "[MI][4]" if b.name[0] == "A" else "[NI][2]"
            steps = ", ".join(str(k) for k in range(t.KI) if f"{b.name[0]}_f{k % 2}" == b.name)
            self.w(f"uint32_t {b.name}{dims};{' ' * max(1, 16 - len(b.name + dims))}"
                   f"// {b.name[0]} fragments of k16 step{'s' if ',' in steps else ''} {steps} (ldmatrix.x4)", 1)
        self.w()
        for part in p.parts:
            if part.name == "body":
                self.body(part)
                continue
            n = max_extent(p, part)
            always = extent(p, part, min(trip_samples(p)))
            self.w(f"// ---- {part.name}: {n} step{'s' if n != 1 else ''}, fully unrolled"
                   + (f" (step i runs when i < {to_str(part.extent)})" if always < n else ""), 1)
            for i in range(n):
                if i < always:
                    self.w(f"{{  // {part.name} {part.var} = {i}", 1)
                else:
                    self.w(f"if ({i} < {c_expr(part.extent)}) {{  // {part.name} {part.var} = {i}", 1)
                if self.symbolic:  # guards and slots of this part may still name the step and T
                    self.w(f"const int {part.var} = {i};", 2)
                    self.w(f"(void){part.var};", 2)
                self.stmts(part, 2, i)
                self.w("}", 1)
        self.w()
        self.store()
        if self.stream:  # the segment loop's body, indented one level
            self.lines[self.loop_open:] = [("  " + ln) if ln else ln for ln in self.lines[self.loop_open:]]
            self.w("}  // the next segment", 1)
        self.w("}")

    # -- the body loop
    def rotations(self, part: Part) -> None:
        """Declare the rotating slot offsets the body's shared accesses use (``self.rot``)."""
        for s in part.stmts:
            if not isinstance(s, OpStmt):
                continue
            for a in (*s.reads, *s.writes):
                if a.buffer in SHARED:
                    d = self.rot_offset(part, a.buffer, a.slot)
                    if d is not None:
                        key = (self.group(a.buffer), d)
                        if key not in self.rot:
                            self.rot[key] = f"so_{self.group(a.buffer)}{d}"

    def group(self, buf: str) -> str:
        return "AB" if self.paired else buf[0]

    def rot_offset(self, part: Part, buf: str, slot: Expr) -> Optional[int]:
        """``d`` when ``slot`` is ``(i + d) % M`` over the body's steps (M = the buffer's slots), else None."""
        m = self.mult[buf]
        if m == 1:
            return None
        d = None
        for t, i in _steps(self.p, part, slot, period=m):
            v = int(evaluate(slot, step_env(self.p, part, i, t)))
            d = v if d is None and i == 0 else d
            if d is None or v != (d + i) % m:
                return None
        return 0 if d is None else d

    def body(self, part: Part) -> None:
        n = to_str(part.extent) if self.symbolic else str(extent(self.p, part))
        self.w(f"// ---- body: {n} steps", 1)
        if max_extent(self.p, part) == 0:
            return
        self.rotations(part)
        for (g, d), name in sorted(self.rot.items()):
            buf = "A_s" if g in ("AB", "A") else "B_s"
            self.w(f"int {name} = {d * self.stride[buf]};  // slot i + {d} (mod {self.mult[buf]}) times "
                   f"{'A_STRIDE' if buf == 'A_s' else 'B_STRIDE'}, rotated each step", 1)
        self.w("SYNTH_NO_UNROLL", 1)
        bound = c_expr(simplify(part.extent)) if self.symbolic else n
        self.w(f"for (int {part.var} = 0; {part.var} < {bound}; ++{part.var}) {{", 1)
        self.stmts(part, 2, None)
        self.w("// next step: the copies' sources move one k-tile, the slot offsets rotate", 2)
        if self.loads_in_body:
            self.w("SYNTH_UNROLL for (int c = 0; c < A_CHUNKS; ++c) a_off[c] += BK;", 2)
            self.w("SYNTH_UNROLL for (int c = 0; c < B_CHUNKS; ++c) b_off[c] += BK;", 2)
        for (g, d), name in sorted(self.rot.items()):
            buf = "A_s" if g in ("AB", "A") else "B_s"
            st = "A_STRIDE" if buf == "A_s" else "B_STRIDE"
            self.w(f"{name} = {name} == {self.mult[buf] - 1} * {st} ? 0 : {name} + {st};", 2)
        self.w("}", 1)

    # -- statements
    def value(self, part: Part, e: Expr, step: Optional[int]) -> Optional[int]:
        """The value of ``e`` at prologue/epilogue step ``step``; in the body (``step`` None) when
        it is the same at every step, else None."""
        if step is not None:
            vals = {int(evaluate(e, step_env(self.p, part, step, t))) for t in trip_samples(self.p)
                    if step < extent(self.p, part, t)}
        else:
            vals = {int(evaluate(e, step_env(self.p, part, i, t))) for t, i in _steps(self.p, part, e, constant=True)}
        return next(iter(vals)) if len(vals) == 1 else None

    def stmts(self, part: Part, ind: int, step: Optional[int]) -> None:
        """Statements of ``part`` at ``step`` (None: the body loop), runs of ops woven."""
        run: list[OpStmt] = []
        for k, s in enumerate(part.stmts):
            guard = None
            if s.guard is not None:
                g = self.value(part, s.guard, step)
                if g is None:
                    guard = c_expr(simplify(s.guard))
                elif not g:
                    continue
            b = self.bar.get((part.name, step if part.name != "body" else None, k))
            if isinstance(s, OpStmt) and guard is None and b is None:
                run.append(s)
                continue
            self.run(part, run, ind, step)
            run = []
            if b is not None:  # before the guard: barriers() assumes it runs whether or not the statement does
                self.w(f"synth_syncthreads(); // sync:{self.nsync} {b.why}", ind)
                self.nsync += 1
            gi = ind
            if guard is not None:
                self.w(f"if ({guard}) {{", ind)
                gi = ind + 1
            if isinstance(s, CommitStmt):
                self.w(f"synth_cp_async_commit();  // commit group {s.group} of queue {s.queue}", gi)
            elif isinstance(s, WaitStmt):
                self.wait(part, s, gi, step)
            elif guard is not None:
                self.run(part, [s], gi, step)
            else:
                run.append(s)
            if guard is not None:
                self.w("}", ind)
        self.run(part, run, ind, step)

    def wait(self, part: Part, s: WaitStmt, ind: int, step: Optional[int]) -> None:
        wt = self.p.waits[s.wait]
        note = f"wait #{s.wait} before {wt.before}"
        n = self.value(part, wt.in_flight, step)
        if n is not None:
            self.w(f"synth_cp_async_wait<{n}>();  // {note}: groups in flight <= {n}", ind)
            return
        vals = sorted({int(evaluate(wt.in_flight, step_env(self.p, part, i, t)))
                       for t, i in _steps(self.p, part, wt.in_flight) if step is None or i == step})
        self.w(f"switch ({c_expr(wt.in_flight)}) {{  // {note}: count {to_str(wt.in_flight)}", ind)
        for v in vals[1:]:
            self.w(f"case {v}: synth_cp_async_wait<{v}>(); break;", ind + 1)
        self.w(f"default: synth_cp_async_wait<{vals[0]}>(); break;", ind + 1)
        self.w("}", ind)

    def slot_off(self, part: Part, buf: str, slot: Expr, step: Optional[int]) -> str:
        """C text of the byte offset of slot ``slot`` of ``buf`` (a number, or a rotating register)."""
        v = self.value(part, slot, step)
        if v is not None:
            return str(v * self.stride[buf])
        d = self.rot_offset(part, buf, slot)
        if d is not None:
            return self.rot[(self.group(buf), d)]
        return f"({c_expr(slot)}) * {'A_STRIDE' if buf == 'A_s' else 'B_STRIDE'}"

    def tile_rel(self, part: Part, it: Expr, step: Optional[int]) -> str:
        """k-tile ``it`` relative to where the copies' pointers stand (0 before the body, the body
        step inside it, the body's extent after it), in k-tiles."""
        if part.name == "prologue":
            base: Expr = Num(0)
        elif part.name == "body":
            base = Var(part.var)
        else:
            base = simplify(self.p.part("body").extent) if self.loads_in_body else Num(0)
        rel = simplify(Bin("-", it, base))
        v = self.value(part, rel, step)
        return str(v) if v is not None else f"({c_expr(rel)})"

    def units(self, part: Part, s: OpStmt, step: Optional[int]) -> list[_Unit]:
        """The instructions of ``s`` (one line each), annotated with the op."""
        t = self.t
        it = s.iteration
        itv = self.value(part, it, step)
        ktxt = str(itv) if itv is not None else to_str(it)
        out: list[_Unit] = []
        if (m := LOAD_RE.match(s.op)):
            j = int(m.group(1))
            rel = self.tile_rel(part, it, step)
            if itv is None:
                never = (not takes_value(self.p, part, it, 0) if step is None and part.name == "body" else
                         all(evaluate(it, step_env(self.p, part, i, t)) != 0 for t, i in _steps(self.p, part, it)
                             if step is None or i == step))
                zero = ("16" if never
                        else f"(({c_expr(it)}) == 0 ? k0_bytes : 16)")
            else:
                zero = "k0_bytes" if itv == 0 else "16"
            wacc = {a.buffer: a for a in s.writes}
            for mat, total in (("A", t.a_chunks_per_thread), ("B", t.b_chunks_per_thread)):
                buf = f"{mat}_s"
                so = self.slot_off(part, buf, wacc[buf].slot, step)
                x = mat.lower()
                for c in share_chunks(total, self.P, j):
                    src = f"{mat} + {x}_off[{c}]" + (f" + {rel} * BK" if rel != "0" else "")
                    dst = f"{x}_st + {c * self.cfg.threads * 16}" if self.st_linear else f"{x}_st[{c}]"
                    out.append(_Unit("ldg", f"synth_cp_async_16(smem + {so} + {dst}, {src}, {zero});  "
                                            f"// {s.op}: {mat} chunk {c} of k-tile {ktxt}"))
            return out
        if (m := S2R_RE.match(s.op)):
            mat, kk = m.group(1), int(m.group(2))
            racc, wacc = s.reads[0], s.writes[0]
            so = self.slot_off(part, racc.buffer, racc.slot, step)
            dst = wacc.buffer
            cpr = self.cfg.BK // 8
            n = t.MI if mat == "A" else t.NI // 2
            for q in range(n):
                x = ((kk & 3) << 5) ^ (((q & 1) << 6) if cpr == 2 else 0)
                y = (kk >> 2) * 128 + q * 256 * cpr
                addr = f"smem + {so} + ({mat.lower()}_ld ^ {x}) + {y}"
                note = f"// {s.op}: k-tile {ktxt}"
                if mat == "A":
                    out.append(_Unit("lds", f"synth_ldmatrix_x4({dst}[{q}], {addr});  {note}, m16 tile {q}"))
                else:
                    out.append(_Unit("lds", f"synth_ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&{dst}[{2 * q}][0]), "
                                            f"{addr});  {note}, n16 tile {q}"))
            return out
        m = MMA_RE.match(s.op)
        if not m:  # pragma: no cover - _check_supported
            raise SynthError(None, f"unknown gemm op {s.op}", "")
        fa = next(a.buffer for a in s.reads if a.buffer.startswith("A_f"))
        fb = next(a.buffer for a in s.reads if a.buffer.startswith("B_f"))
        for mi in range(t.MI):
            for ni in range(t.NI):
                out.append(_Unit("mma", f"synth_mma_16816(acc[{mi}][{ni}], {fa}[{mi}], {fb}[{ni}], acc[{mi}][{ni}]);"
                                        f"  // {s.op}: k-tile {ktxt}" if (mi, ni) == (0, 0) else
                                 f"synth_mma_16816(acc[{mi}][{ni}], {fa}[{mi}], {fb}[{ni}], acc[{mi}][{ni}]);"))
        return out

    def run(self, part: Part, run: list[OpStmt], ind: int, step: Optional[int]) -> None:
        """Emit a run of op statements (nothing between them orders memory): every ldmatrix and
        cp.async is woven into the mma.sync of the nearest k16 step it is independent of."""
        if not run:
            return
        mmas = [k for k, s in enumerate(run) if MMA_RE.match(s.op)]
        host: dict[int, Optional[int]] = {}
        for k, s in enumerate(run):
            if k in mmas:
                continue
            writes = {a.buffer for a in s.writes}
            nxt = next((h for h in mmas if h > k), None)
            prev = next((h for h in reversed(mmas) if h < k), None)
            if nxt is not None and not writes & {a.buffer for a in run[nxt].reads}:
                host[k] = nxt
            elif nxt is None and prev is not None and not writes & {a.buffer for a in run[prev].reads}:
                host[k] = prev  # after the run's last k16 step and independent of it: woven back into it
            else:
                host[k] = None
        guests: dict[int, list[_Unit]] = {h: [] for h in mmas}
        for k in sorted(host):
            if host[k] is not None:
                guests[host[k]].extend(self.units(part, run[k], step))
        for k, s in enumerate(run):
            if k in mmas:
                self.weave(self.units(part, s, step), guests[k], ind)
            elif host[k] is None:
                for u in self.units(part, s, step):
                    self.w(u.line, ind)

    def weave(self, mma: list[_Unit], guests: list[_Unit], ind: int) -> None:
        """``mma`` with ``guests`` interleaved: ldmatrix spread over the first ``len(mma) - LDSM_LEAD``
        mma.sync (all before the first when the step is shorter), cp.async over all of them."""
        h = len(mma)
        before: dict[int, list[_Unit]] = {j: [] for j in range(h)}
        lds = [u for u in guests if u.kind == "lds"]
        ldg = [u for u in guests if u.kind == "ldg"]
        span = max(1, h - LDSM_LEAD)
        for q, u in enumerate(lds):
            before[q * span // len(lds)].append(u)
        for q, u in enumerate(ldg):
            before[min(h - 1, (2 * q + 1) * h // (2 * len(ldg)))].append(u)
        for j, u in enumerate(mma):
            for g in before[j]:
                self.w(g.line, ind)
            self.w(u.line, ind)

    # -- the C store
    def store(self) -> None:
        self.w("// ---- store: C = alpha * acc + beta * C_in, staged through shared memory one m16 band at a", 1)
        self.w("// time (8-byte fragment stores, 16-byte row loads), 128-bit global loads and stores", 1)
        self.w("synth_cp_async_wait<0>();  // store: no copy may land in the staging area", 1)
        self.w("synth_syncthreads();  // store: every warp has finished reading the pipeline's slots", 1)
        self.w("float* const c_stage = reinterpret_cast<float*>(smem) + warp * (16 * C_LD);", 1)
        if self.red is None:
            self.bands(self.c_store)
            return
        what = "segment's tile and contributors" if self.stream else "split and tile shadow those read before the main loop"
        self.w(f"{{  // {'stream' if self.stream else 'split'}-K: this block's {what}", 1)
        self.lines_at(self.red.arrival_lines(), 2)
        self.w("if (!last) {  // store this partial tile; the tile's last CTA to arrive sums them", 2)
        self.bands(lambda ind: self.w(self.red.partial_store("x", "row - m0", "col - n0"), ind), ind=3)
        self.lines_at(self.red.publish_lines(), 3)
        if self.stream:  # the last CTA's sum in the else branch: the segment loop goes on after either
            self.w("} else {", 2)
            self.lines_at(self.red.wait_lines(), 3)
            self.bands(self.c_store, ind=3)
            self.w("}", 2)
        else:
            self.w("}", 2)
            self.lines_at(self.red.wait_lines(), 2)
            self.bands(self.c_store, ind=2)
        self.w("}", 1)

    def lines_at(self, lines: list[str], ind: int) -> None:
        """``lines`` (``{``/``}`` balanced) indented by brace depth from ``ind``."""
        depth = ind
        for line in lines:
            opens = line.count("{") - line.count("}")
            self.w(line, depth + min(opens, 0))
            depth += opens

    def bands(self, action, ind: int = 1) -> None:
        """The staging loop: per m16 band, the accumulators to shared memory, then per 16-byte vector ``x``
        of a tile row inside C (``row``, ``col``) the statements ``action(indent)`` writes."""
        self.w("SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi) {", ind)
        self.w("SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni) {", ind + 1)
        self.w("float* const p = c_stage + (lane >> 2) * C_LD + ni * 8 + (lane & 3) * 2;", ind + 2)
        self.w("synth_sts(reinterpret_cast<f32x2*>(p), f32x2{acc[mi][ni][0], acc[mi][ni][1]});", ind + 2)
        self.w("synth_sts(reinterpret_cast<f32x2*>(p + 8 * C_LD), f32x2{acc[mi][ni][2], acc[mi][ni][3]});", ind + 2)
        self.w("}", ind + 1)
        self.w("synth_syncthreads();  // store: the band is in shared memory", ind + 1)
        self.w("SYNTH_UNROLL for (int v = 0; v < WTN / 8; ++v) {", ind + 1)
        self.w("const int idx = v * 32 + lane, r = idx / (WTN / 4), c4 = idx % (WTN / 4);", ind + 2)
        const = "" if self.red is not None else "const "
        self.w(f"{const}f32x4 x = synth_lds(reinterpret_cast<const f32x4*>(c_stage + r * C_LD + c4 * 4));", ind + 2)
        self.w("const int row = m0 + warp_m * WTM + mi * 16 + r, col = n0 + warp_n * WTN + c4 * 4;", ind + 2)
        self.w("if (row < M && col < N) {", ind + 2)
        action(ind + 3)
        self.w("}", ind + 2)
        self.w("}", ind + 1)
        self.w("synth_syncthreads();  // store: the band is read before the next one overwrites it", ind + 1)
        self.w("}", ind)

    def c_store(self, ind: int) -> None:
        if self.red is not None:
            self.lines_at(self.red.fold_lines("x", "row - m0", "col - n0"), ind)
        self.w("const long long o = (long long)row * ldc + col;", ind)
        self.w("f32x4 y = {alpha * x.x, alpha * x.y, alpha * x.z, alpha * x.w};", ind)
        self.w("if (col + 4 <= N) {", ind)
        self.w("if (C_in != nullptr) {", ind + 1)
        self.w("const f32x4 c = *reinterpret_cast<const f32x4*>(C_in + o);", ind + 2)
        self.w("y.x += beta * c.x; y.y += beta * c.y; y.z += beta * c.z; y.w += beta * c.w;", ind + 2)
        self.w("}", ind + 1)
        self.w("*reinterpret_cast<f32x4*>(C + o) = y;", ind + 1)
        self.w("} else {  // the last, partial vector of a row (N % 4 != 0): 1 to 3 scalars", ind)
        for e, f in enumerate("xyz"):
            self.w(f"if (col + {e} < N) C[o + {e}] = y.{f} + (C_in != nullptr ? beta * C_in[o + {e}] : 0.0f);",
                   ind + 1)
        self.w("}", ind)

__all__ = ["emit_kernel", "kernel_info", "staging_bytes", "KernelInfo", "Barrier", "barriers", "api_header",
           "c_expr", "STATUS_CODES", "status_reasons", "LDSM_LEAD"]

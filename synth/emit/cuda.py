"""The CUDA target: a lowered :class:`~synth.program.Program` of a ``kind: gemm``
problem as ``kernel.cu`` (SPEC §3; contract in ``docs/cuda_kernel.md``).

Input: the problem (its :class:`~synth.gemm.GemmConfig`), the schedule and the
program. Output: one self-contained CUDA C++ file whose main loop is the
program statement for statement:

* prologue and epilogue fully unrolled (every guard and ``cp.async.wait_group``
  count is an immediate); the body a loop (shared slots ``(i + d) % M`` at run
  time), unrolled only if a fragment buffer had several slots (by the lcm of
  their multiplicities, so that fragment slots are compile-time indices); a
  gemm problem's fragment buffers are ``carried``, one slot each;
* ``load_A``/``load_B``: one 16-byte ``cp.async`` per chunk of the thread;
  ``s2r_X_kk``: one ``ldmatrix.x4`` per m16 (A) or n16 (B) tile of k16 slice
  ``kk`` into ``X_f{kk % 2}``; ``mma_kk``: ``MI x NI`` ``mma.sync`` on
  ``A_f{kk % 2}``, ``B_f{kk % 2}`` into the accumulators; every address is a
  per-thread base computed once plus constants (``swz_step``);
* one ``cp.async.commit_group`` per :class:`~synth.program.CommitStmt`, one
  ``cp.async.wait_group N`` per :class:`~synth.program.WaitStmt` (a ``switch``
  over the values of a count that varies in the body);
* ``__syncthreads()`` exactly where :func:`barriers` finds cross-thread
  visibility needs one, each on its own ``synth_syncthreads(); // sync:<n> <why>``
  line.

Left out on purpose: predicated ops (``when:``), more than one async queue,
sync (non-async) loads, symbolic trip counts — gemm problems have none of
these; :func:`emit_kernel` raises :class:`~synth.errors.SynthError` for them.
Never modifies its inputs.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import SynthError
from ..expr import Expr, Num, evaluate, simplify, to_str
from ..gemm import GemmConfig, Tiling, config_from_problem, op_names, tiling
from ..problem import Problem
from ..program import CommitStmt, OpStmt, Part, Program, Stmt, WaitStmt
from ..schedule import Schedule

RUNTIME_DIR = os.path.join(os.path.dirname(__file__), "runtime")
API_HEADER = os.path.join(RUNTIME_DIR, "synth_cuda_api.h")
LOADS = {"load_A": ("A_s", "A"), "load_B": ("B_s", "B")}
S2R_RE = re.compile(r"^s2r_([AB])_(\d+)$")
MMA_RE = re.compile(r"^mma_(\d+)$")


# ---------------------------------------------------------------------------
# barrier placement


@dataclass(frozen=True)
class Barrier:
    """A ``__syncthreads()`` before statement ``stmt`` of ``part`` (at prologue/epilogue
    step ``step``; ``None`` in the body, where it is in every iteration)."""

    part: str
    step: Optional[int]
    stmt: int
    why: str


@dataclass
class _SimState:
    uncommitted: list = field(default_factory=list)
    """(buffer, version) of issued, not yet committed cp.async."""
    groups: list = field(default_factory=list)
    """Committed, possibly pending groups, oldest first: lists of (buffer, version)."""
    landed: set = field(default_factory=set)
    """(buffer, version) complete in this thread, not yet made visible by a barrier."""
    visible: set = field(default_factory=set)
    read_slots: dict = field(default_factory=dict)
    """(buffer, slot) read since the last barrier -> reader op."""


def _static(e: Optional[Expr], env: dict[str, int]):
    return None if e is None else evaluate(e, env)


def _trip(program: Program) -> int:
    if not isinstance(program.trip_count, int):
        raise SynthError(None, f"program {program.name!r} has a symbolic trip count; CUDA kernels are emitted "
                         "for static trip counts (kind: gemm problems)", "give the loop a numeric trip_count")
    return program.trip_count


def _env(program: Program, part: Part, i: int) -> dict[str, int]:
    return {part.var: i, program.loop_var: 0}


def _extent(program: Program, part: Part) -> int:
    return int(evaluate(part.extent, {}))


def barriers(program: Program, shared: set[str]) -> list[Barrier]:
    """Where the kernel needs ``__syncthreads()``, found by running the program's
    statements for its static trip count with cp.async's hardware semantics.

    A barrier is needed (and placed as late as possible, right before the
    statement that needs it):

    * **RAW**: before a read of a shared-buffer version whose cp.async group a
      wait has retired in this thread but no barrier has yet published to the
      other threads that read it (every thread copies part of every tile);
    * **WAR**: before a cp.async writes a shared slot that some thread has read
      since the last barrier (another warp may still be reading it).

    Body barriers sit at a statement index and run in every iteration; the
    placement is grown to a fixed point (a barrier added for one iteration also
    runs in the others). Raises ValueError when a read sees a version no wait
    has retired (the verifier refutes such programs).
    """
    placed: dict[tuple, str] = {}
    while True:
        need = _simulate(program, shared, placed)
        if need is None:
            break
        key, why = need
        placed[key] = why
    out = [Barrier(k[0], k[1], k[2], why) for k, why in placed.items()]
    order = {p: n for n, p in enumerate(("prologue", "body", "epilogue"))}
    return sorted(out, key=lambda b: (order[b.part], b.step or 0, b.stmt))


def _simulate(program: Program, shared: set[str], placed: dict[tuple, str]):
    """Run once with barriers ``placed``; return the first missing barrier (key, why) or None."""
    st = _SimState()
    for part in program.parts:
        n = _extent(program, part)
        for i in range(n):
            env = _env(program, part, i)
            for k, s in enumerate(part.stmts):
                key = (part.name, None if part.name == "body" else i, k)
                if key in placed:
                    st.visible |= st.landed
                    st.landed = set()
                    st.read_slots = {}
                if s.guard is not None and not _static(s.guard, env):
                    continue
                why = _step(program, st, s, env, shared, part.name, i)
                if why is not None:
                    if key in placed:  # pragma: no cover - a barrier here resolves every need
                        raise AssertionError(why)
                    return key, why
    return None


def _step(program: Program, st: _SimState, s: Stmt, env: dict[str, int], shared: set[str],
          part: str, i: int) -> Optional[str]:
    if isinstance(s, CommitStmt):
        st.groups.append(st.uncommitted)
        st.uncommitted = []
        return None
    if isinstance(s, WaitStmt):
        n = int(_static(program.waits[s.wait].in_flight, env))
        while len(st.groups) > n:
            st.landed |= set(st.groups.pop(0))
        return None
    op = program.op(s.op)
    for a in s.reads:
        if a.buffer not in shared:
            continue
        v = int(evaluate(a.version, env))
        if (a.buffer, v) in st.visible:
            pass
        elif (a.buffer, v) in st.landed:
            return (f"RAW: {s.op} reads {a.buffer} k-tile {_show(a.version, v, part)} (slot "
                    f"{_show(a.slot, int(evaluate(a.slot, env)), part)}) that the last wait completed in this "
                    "thread; the other threads' cp.async into it must be visible")
        else:
            raise ValueError(f"{part} step {i}: {s.op} reads {a.buffer} version {v} before any wait retires "
                             "its cp.async group (the program's wait counts are wrong)")
        slot = int(evaluate(a.slot, env))
        st.read_slots.setdefault((a.buffer, slot), s.op)
    for a in s.writes:
        if a.buffer not in shared:
            continue
        slot = int(evaluate(a.slot, env))
        if (a.buffer, slot) in st.read_slots:
            rd = st.read_slots[(a.buffer, slot)]
            return (f"WAR: {s.op} overwrites {a.buffer} slot {_show(a.slot, slot, part)} that {rd} read since "
                    "the last barrier; every warp must have finished reading it")
        v = int(evaluate(a.version, env))
        if op.is_async:
            st.uncommitted.append((a.buffer, v))
        else:  # pragma: no cover - rejected by _check_supported
            st.landed.add((a.buffer, v))
        m = program.buffer(a.buffer).multiplicity
        st.visible = {(b, x) for (b, x) in st.visible if not (b == a.buffer and x % m == v % m)}
        st.landed = {(b, x) for (b, x) in st.landed if not (b == a.buffer and x % m == v % m)}
    return None


def _show(e: Expr, value: int, part: str) -> str:
    """``e`` as written in the body (it holds for every iteration), its value elsewhere."""
    return to_str(e) if part == "body" else str(value)


# ---------------------------------------------------------------------------
# C expressions


def c_expr(e: Expr) -> str:
    """``e`` in C (the expression grammar is C's; min/max become conditionals)."""
    from ..expr import Call, Ite, Un, Var

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
    threads: int
    grid: tuple[int, int, int]
    ktiles: int
    body_unroll: int
    barriers: tuple[Barrier, ...]
    body_waits: tuple[int, ...]
    """Immediate of every ``wait_group`` in one body iteration, in order (all values of a switch)."""
    prologue_waits: tuple[int, ...]
    epilogue_waits: tuple[int, ...]
    cp_async_per_iteration: int
    """cp.async instructions per thread in one body iteration."""
    commits_per_iteration: int


def _check_supported(problem: Problem, program: Program) -> GemmConfig:
    cfg = config_from_problem(problem)
    names = {o.name for o in program.ops}
    if names != set(op_names(cfg.BK // 16)):
        raise SynthError(None, f"program {program.name!r} is not the k-tile loop of its gemm problem (ops "
                         f"{sorted(names)})", "emit CUDA from the program lowered from the kind: gemm problem")
    for o in program.ops:
        if o.when is not None:
            raise SynthError(None, f"op {o.name} is predicated ({o.when}); the CUDA emitter does not support "
                             "predicated gemm ops", "remove the predicate")
        if o.name in LOADS and not o.is_async:
            raise SynthError(None, f"{o.name} is in stage {o.stage}, which is not async; the CUDA kernel needs "
                             "the global->shared copies in an async stage (cp.async)",
                             "keep schedule.async_stages: [0] with the loads in stage 0")
    if len(program.queues) > 1:
        raise SynthError(None, "the program uses more than one async queue; cp.async has one",
                         "use a single cp_async unit")
    _trip(program)
    return cfg


def kernel_info(problem: Problem, schedule: Schedule, program: Program) -> KernelInfo:
    """Sizes, waits and barriers of the kernel :func:`emit_kernel` writes."""
    cfg = _check_supported(problem, program)
    t = tiling(cfg)
    mult = {b.name: b.multiplicity for b in program.buffers}
    for name, m in schedule.multiplicity:
        if mult.get(name) != m:
            raise SynthError(None, f"buffer {name} has {m} slots in the schedule but {mult.get(name)} in the "
                             "program", "emit from a program lowered from this schedule")
    smem = mult["A_s"] * t.a_bytes + mult["B_s"] * t.b_bytes
    try:
        bars = tuple(barriers(program, {"A_s", "B_s"}))
    except ValueError as exc:
        raise SynthError(None, f"cannot emit '{program.name}': {exc}",
                         "run 'synth verify' on program.json; emit only proved programs") from None
    waits: dict[str, list[int]] = {"prologue": [], "body": [], "epilogue": []}
    cp = commits = 0
    unroll = _lcm(*(m for b, m in mult.items() if b.endswith(("_f0", "_f1"))))
    for part in program.parts:
        n = _extent(program, part)
        for s in part.stmts:
            if isinstance(s, WaitStmt):
                w = program.waits[s.wait]
                vals = sorted({int(evaluate(w.in_flight, _env(program, part, i))) for i in range(n)})
                if part.name == "body":
                    waits["body"].extend(vals)
                else:
                    for i in range(n):
                        if s.guard is None or evaluate(s.guard, _env(program, part, i)):
                            waits[part.name].append(int(evaluate(w.in_flight, _env(program, part, i))))
            if part.name == "body":
                if isinstance(s, OpStmt) and s.op in LOADS:
                    cp += t.a_chunks_per_thread if s.op == "load_A" else t.b_chunks_per_thread
                if isinstance(s, CommitStmt):
                    commits += 1
    grid = (-(-cfg.N // cfg.BN), -(-cfg.M // cfg.BM), 1)
    return KernelInfo(smem, cfg.threads, grid, cfg.trip_count, unroll, bars, tuple(waits["body"]),
                      tuple(waits["prologue"]), tuple(waits["epilogue"]), cp, commits)


def _lcm(*xs: int) -> int:
    out = 1
    for x in xs:
        out = out * x // math.gcd(out, x)
    return out


def api_header() -> str:
    with open(API_HEADER, encoding="utf-8") as fh:
        return fh.read()


def emit_kernel(problem: Problem, schedule: Schedule, program: Program) -> str:
    """``kernel.cu`` implementing ``program`` for the gemm ``problem`` (see module docstring)."""
    info = kernel_info(problem, schedule, program)
    cfg = config_from_problem(problem)
    return _Writer(cfg, tiling(cfg), program, schedule, info).text()


class _Writer:
    def __init__(self, cfg: GemmConfig, t: Tiling, program: Program, schedule: Schedule, info: KernelInfo) -> None:
        self.cfg, self.t, self.p, self.s, self.info = cfg, t, program, schedule, info
        self.mult = {b.name: b.multiplicity for b in program.buffers}
        self.lines: list[str] = []
        self.nsync = 0
        self.bar = {(b.part, b.step, b.stmt): b for b in info.barriers}

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
        sched = self.s
        stages = ", ".join(f"{o.name}={o.stage}" for o in p.ops)
        mult = ", ".join(f"{b.name} x{b.multiplicity}" for b in p.buffers)
        self.w(f"// kernel.cu for '{p.name}', generated by synth (do not edit; re-run 'synth emit').")
        self.w(f"// C[M x N] (f32) = A[M x K] (f16, row-major) * B[N x K]^T (f16, row-major): "
               f"M={cfg.M} N={cfg.N} K={cfg.K}, {cfg.arch}")
        self.w(f"// CTA tile {cfg.BM}x{cfg.BN}x{cfg.BK}, {cfg.warps} warps as {t.WM}x{t.WN} "
               f"(warp tile {t.WTM}x{t.WTN}: {t.MI} m16 x {t.NI} n8 x {t.KI} k16 mma.sync per k-tile)")
        self.w(f"// stages: {stages}; order: {list(sched.order)}; slots: {mult}")
        self.w(f"// shared memory: {info.smem_bytes} B dynamic (tiles XOR-swizzled in 16-byte chunks: "
               "conflict-free cp.async and ldmatrix)")
        unrolled = f"unrolled x{info.body_unroll}" if info.body_unroll > 1 else "not unrolled"
        self.w(f"// k-tiles: {info.ktiles} = prologue {_extent(p, p.part('prologue'))} + body "
               f"{_extent(p, p.part('body'))} + epilogue {_extent(p, p.part('epilogue'))} steps; body {unrolled}")
        self.w(f"// barriers: {len(info.barriers)} placements (see the '// sync:' lines); "
               f"body waits: {list(info.body_waits)}")
        self.w("// launch: grid (ceil(N/BN), ceil(M/BM)), block SYNTH_THREADS, dynamic smem SYNTH_SMEM_BYTES;")
        self.w("// requires K % 8 == 0 and ceil(K / BK) == SYNTH_KTILES.")
        self.w("#include <stdint.h>")
        self.w("#ifdef SYNTH_EMULATE")
        self.w('#include "synth_emu.h"')
        self.w("#else")
        for line in api_header().rstrip("\n").split("\n"):
            self.lines.append(line)
        self.w("#endif")
        self.w("#ifndef SYNTH_UNROLL")
        self.w("#define SYNTH_UNROLL")
        self.w("#endif")
        self.w("#ifndef SYNTH_NO_UNROLL")
        self.w('#define SYNTH_NO_UNROLL')
        self.w("#endif")
        self.w("#ifndef SYNTH_LAUNCH_BOUNDS")
        self.w("#define SYNTH_LAUNCH_BOUNDS(n)")
        self.w("#endif")
        self.w()
        for k, v in (("M", cfg.M), ("N", cfg.N), ("K", cfg.K), ("BM", cfg.BM), ("BN", cfg.BN), ("BK", cfg.BK),
                     ("THREADS", cfg.threads), ("SMEM_BYTES", info.smem_bytes), ("KTILES", info.ktiles)):
            self.w(f"#define SYNTH_{k} {v}")
        self.w()
        cpr = cfg.BK // 8
        self.w("namespace synth_kernel {")
        consts = [("BM", cfg.BM), ("BN", cfg.BN), ("BK", cfg.BK), ("THREADS", cfg.threads),
                  ("WM", t.WM), ("WN", t.WN), ("WTM", t.WTM), ("WTN", t.WTN),
                  ("MI", t.MI), ("NI", t.NI), ("KI", t.KI), ("CPR", cpr), ("LD_ROWS", cfg.threads // cpr),
                  ("A_TILE", t.a_bytes), ("B_TILE", t.b_bytes),
                  ("A_CHUNKS", t.a_chunks_per_thread), ("B_CHUNKS", t.b_chunks_per_thread),
                  ("A_S_SLOTS", self.mult["A_s"]), ("B_S_SLOTS", self.mult["B_s"])]
        for k, v in consts:
            self.w(f"constexpr int {k} = {v};", 0)
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
        self.w("// swz(r + 16 * m, c + 2 * k) from o = swz(r, c), c < 2, k < CPR / 2: the k16 step flips chunk")
        self.w("// bits (and whole lines past 4 steps), 16 rows more are whole lines (with CPR = 2 the key")
        self.w("// changes by 4 every 16 rows): each ldmatrix address is a per-thread base and constants.")
        self.w("SYNTH_DEVICE int swz_step(int o, int m, int k) {")
        self.w("return (o ^ (((k & 3) << 5) ^ (CPR == 2 ? (m & 1) << 6 : 0))) + (k >> 2) * 128 + m * 256 * CPR;", 1)
        self.w("}")
        self.w("}  // namespace synth_kernel")
        self.w()

    # -- the kernel function
    def kernel(self) -> None:
        p = self.p
        self.w('extern "C" __global__ void SYNTH_LAUNCH_BOUNDS(SYNTH_THREADS)')
        self.w("synth_gemm(const half* A, const half* B, float* C, int M, int N, int K) {")
        self.w("using namespace synth_kernel;", 1)
        self.w("extern __shared__ __align__(16) unsigned char synth_smem[];", 1)
        self.w("unsigned char* const A_s = synth_smem;                       // A_S_SLOTS x [BM x BK] f16",
               1)
        self.w("unsigned char* const B_s = synth_smem + A_S_SLOTS * A_TILE;  // B_S_SLOTS x [BN x BK] f16", 1)
        self.w("const int tid = threadIdx.x;", 1)
        self.w("const int lane = (int)synth_lane_id();", 1)
        self.w("const int warp_m = (tid / 32) / WN, warp_n = (tid / 32) % WN;", 1)
        self.w("const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;", 1)
        self.w("// per-thread, loop-invariant: ldmatrix row addresses of m16 (n16) tile 0 at k16 step 0,", 1)
        self.w("// cp.async chunk 0 (row ld_r, k-chunk ld_kc; chunk c is LD_ROWS rows further down)", 1)
        self.w("const int a_ld = swz(warp_m * WTM + (lane & 15), lane >> 4);", 1)
        self.w("const int b_ld = swz(warp_n * WTN + ((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);", 1)
        self.w("const int ld_r = tid / CPR, ld_kc = tid % CPR;", 1)
        self.w("const int a_rows = M - m0 - ld_r, b_rows = N - n0 - ld_r;  // rows left below chunk 0", 1)
        self.w("const half* const a_src = A + (long long)(m0 + ld_r) * K + ld_kc * 8;", 1)
        self.w("const half* const b_src = B + (long long)(n0 + ld_r) * K + ld_kc * 8;", 1)
        self.w("const long long ld_step = (long long)LD_ROWS * K;  // elements between chunks", 1)
        self.w("float acc[MI][NI][4];                  // C_r (carried)", 1)
        self.w("SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)", 1)
        self.w("SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni)", 2)
        self.w("SYNTH_UNROLL for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;", 3)
        for b in self.frag_buffers():
            dims = "[MI][4]" if b.name[0] == "A" else "[NI][2]"
            slots = f"[{b.multiplicity}]" if b.multiplicity > 1 else ""
            steps = ", ".join(str(k) for k in range(self.t.KI) if f"{b.name[0]}_f{k % 2}" == b.name)
            self.w(f"uint32_t {b.name}{slots}{dims};{' ' * max(1, 20 - len(b.name + slots + dims))}"
                   f"// {b.name[0]} fragments of k16 step{'s' if ',' in steps else ''} {steps} (ldmatrix.x4)", 1)
        self.w()
        for part in p.parts:
            n = _extent(p, part)
            if part.name == "body":
                self.body(part, n)
            else:
                self.w(f"// ---- {part.name}: {n} step{'s' if n != 1 else ''}, fully unrolled", 1)
                for i in range(n):
                    self.w(f"{{  // {part.name} {part.var} = {i}", 1)
                    self.stmts(part, 2, (i,))
                    self.w("}", 1)
        self.w()
        self.epilogue_store()
        self.w("}")

    def body(self, part: Part, n: int) -> None:
        u = self.info.body_unroll
        self.w(f"// ---- body: {n} steps" + (f", unrolled x{u} (register fragment slots are static)" if u > 1
                                               else ""), 1)
        main = n - n % u
        if u == 1 and n:
            self.w("SYNTH_NO_UNROLL", 1)
            self.w(f"for (int {part.var} = 0; {part.var} < {n}; ++{part.var}) {{", 1)
            self.stmts(part, 2, tuple(range(n)))
            self.w("}", 1)
            return
        if main:
            self.w("SYNTH_NO_UNROLL", 1)
            self.w(f"for (int i0 = 0; i0 < {main}; i0 += {u}) {{", 1)
            for k in range(u):
                self.w(f"{{  // body {part.var} = i0 + {k}", 2)
                self.w(f"const int {part.var} = i0 + {k};", 3)
                self.stmts(part, 3, tuple(range(k, main, u)))
                self.w("}", 2)
            self.w("}", 1)
        for k in range(n % u):
            self.w(f"{{  // body remainder {part.var} = {main + k}", 1)
            self.stmts(part, 2, (main + k,))
            self.w("}", 1)

    # -- statements
    def const(self, part: Part, e: Expr, iset: tuple[int, ...]) -> Optional[int]:
        """The value of ``e`` when it is the same at every ``i`` in ``iset``, else None."""
        vals = {evaluate(e, _env(self.p, part, i)) for i in iset}
        return int(next(iter(vals))) if len(vals) == 1 else None

    def stmts(self, part: Part, ind: int, iset: tuple[int, ...]) -> None:
        """Statements of ``part`` for the steps ``iset`` (one copy of code runs them all)."""
        for k, s in enumerate(part.stmts):
            guard = None
            if s.guard is not None:
                g = self.const(part, s.guard, iset)
                if g is None:
                    guard = c_expr(simplify(s.guard))
                elif not g:
                    continue
            b = self.bar.get((part.name, iset[0] if part.name != "body" else None, k))
            gi = ind
            if guard is not None:
                self.w(f"if ({guard}) {{", ind)
                gi = ind + 1
            if b is not None:
                self.w(f"synth_syncthreads(); // sync:{self.nsync} {b.why}", gi)
                self.nsync += 1
            if isinstance(s, CommitStmt):
                self.w(f"synth_cp_async_commit();  // commit group {s.group} of queue {s.queue}", gi)
            elif isinstance(s, WaitStmt):
                self.wait(part, s, gi, iset)
            else:
                self.op(part, s, gi, iset)
            if guard is not None:
                self.w("}", ind)

    def wait(self, part: Part, s: WaitStmt, ind: int, iset: tuple[int, ...]) -> None:
        wt = self.p.waits[s.wait]
        note = f"wait #{s.wait} before {wt.before}"
        n = self.const(part, wt.in_flight, iset)
        if n is not None:
            self.w(f"synth_cp_async_wait<{n}>();  // {note}: groups in flight <= {n}", ind)
            return
        vals = sorted({int(evaluate(wt.in_flight, _env(self.p, part, i))) for i in iset})
        self.w(f"switch ({c_expr(wt.in_flight)}) {{  // {note}: count {to_str(wt.in_flight)}", ind)
        for v in vals[1:]:
            self.w(f"case {v}: synth_cp_async_wait<{v}>(); break;", ind + 1)
        self.w(f"default: synth_cp_async_wait<{vals[0]}>(); break;", ind + 1)
        self.w("}", ind)

    def slot(self, part: Part, buf: str, slot: Expr, iset: tuple[int, ...]) -> str:
        """C text of a slot index of ``buf``: a number when it is static over ``iset``."""
        if self.mult[buf] == 1:
            return "0"
        v = self.const(part, slot, iset)
        if v is not None:
            return str(v)
        if self.p.buffer(buf).space == "register":
            raise SynthError(None, f"slot {to_str(slot)} of register buffer {buf} is not static in the unrolled "
                             "body", "report this: the body unroll should make it static")
        return c_expr(slot)

    def op(self, part: Part, s: OpStmt, ind: int, iset: tuple[int, ...]) -> None:
        v = s.iteration
        vc = self.const(part, v, iset)
        vtxt = str(vc) if vc is not None else c_expr(v)
        vshow = vtxt if vc is not None else to_str(v)

        def sshow(a) -> str:
            x = self.const(part, a.slot, iset)
            return str(x) if x is not None else to_str(a.slot)

        def slot(a) -> str:
            return self.slot(part, a.buffer, a.slot, iset)

        if s.op in LOADS:
            buf, mat = LOADS[s.op]
            wacc = s.writes[0]
            sl = slot(wacc)
            self.w(f"{{  // {s.op}: k-tile {vshow} -> {buf}[{sshow(wacc)}] (cp.async, zero-fill)", ind)
            self.w(f"const int gk = ({vtxt}) * BK;", ind + 1)
            self.w("const int rem = (K - gk - ld_kc * 8) * 2;", ind + 1)
            self.w("const int kbytes = rem >= 16 ? 16 : (rem > 0 ? rem : 0);", ind + 1)
            self.w(f"unsigned char* const dst = {buf} + ({sl}) * {mat}_TILE;", ind + 1)
            self.w(f"const half* src = {mat.lower()}_src + gk;", ind + 1)
            self.w(f"SYNTH_UNROLL for (int c = 0; c < {mat}_CHUNKS; ++c) {{", ind + 1)
            self.w(f"const int bytes = c * LD_ROWS < {mat.lower()}_rows ? kbytes : 0;", ind + 2)
            self.w(f"synth_cp_async_16(dst + swz(ld_r + c * LD_ROWS, ld_kc), bytes > 0 ? src : {mat}, bytes);",
                   ind + 2)
            self.w("src += ld_step;", ind + 2)
            self.w("}", ind + 1)
            self.w("}", ind)
        elif S2R_RE.match(s.op):
            mat, kk = S2R_RE.match(s.op).group(1), int(S2R_RE.match(s.op).group(2))
            racc, wacc = s.reads[0], s.writes[0]
            sbuf = racc.buffer
            ssl = slot(racc)
            dst = self.frag(part, wacc, iset)
            self.w(f"{{  // {s.op}: k-tile {vshow}, k16 step {kk}: {sbuf}[{sshow(racc)}] -> {dst} (ldmatrix.x4)",
                   ind)
            self.w(f"const unsigned char* const src = {sbuf} + ({ssl}) * {mat}_TILE;", ind + 1)
            if mat == "A":
                self.w("SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)", ind + 1)
                self.w(f"synth_ldmatrix_x4({dst}[mi], src + swz_step(a_ld, mi, {kk}));", ind + 2)
            else:
                self.w("SYNTH_UNROLL for (int np = 0; np < NI / 2; ++np) {", ind + 1)
                self.w("uint32_t f[4];", ind + 2)
                self.w(f"synth_ldmatrix_x4(f, src + swz_step(b_ld, np, {kk}));", ind + 2)
                self.w(f"{dst}[2 * np][0] = f[0];", ind + 2)
                self.w(f"{dst}[2 * np][1] = f[1];", ind + 2)
                self.w(f"{dst}[2 * np + 1][0] = f[2];", ind + 2)
                self.w(f"{dst}[2 * np + 1][1] = f[3];", ind + 2)
                self.w("}", ind + 1)
            self.w("}", ind)
        elif MMA_RE.match(s.op):
            kk = int(MMA_RE.match(s.op).group(1))
            fa = self.frag(part, next(a for a in s.reads if a.buffer.startswith("A_f")), iset)
            fb = self.frag(part, next(a for a in s.reads if a.buffer.startswith("B_f")), iset)
            self.w(f"{{  // {s.op}: k-tile {vshow}, k16 step {kk}: C_r += {fa} * {fb} (mma.sync m16n8k16)", ind)
            self.w("SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)", ind + 1)
            self.w("SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni)", ind + 2)
            self.w(f"synth_mma_16816(acc[mi][ni], {fa}[mi], {fb}[ni], acc[mi][ni]);", ind + 3)
            self.w("}", ind)
        else:  # pragma: no cover - _check_supported
            raise SynthError(None, f"unknown gemm op {s.op}", "")

    def frag(self, part: Part, a, iset: tuple[int, ...]) -> str:
        """C text of the fragment buffer of access ``a`` (with its slot when multi-buffered)."""
        if self.mult[a.buffer] == 1:
            return a.buffer
        return f"{a.buffer}[{self.slot(part, a.buffer, a.slot, iset)}]"

    def epilogue_store(self) -> None:
        self.w("// ---- store C_r (bounds-checked: M and N need not be tile multiples)", 1)
        self.w("SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)", 1)
        self.w("SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni) {", 2)
        self.w("const int row = m0 + warp_m * WTM + mi * 16 + (lane >> 2);", 3)
        self.w("const int col = n0 + warp_n * WTN + ni * 8 + (lane & 3) * 2;", 3)
        self.w("SYNTH_UNROLL for (int h = 0; h < 2; ++h) {", 3)
        self.w("const int rr = row + 8 * h;", 4)
        self.w("if (rr < M) {", 4)
        self.w("if (col < N) C[(long long)rr * N + col] = acc[mi][ni][2 * h];", 5)
        self.w("if (col + 1 < N) C[(long long)rr * N + col + 1] = acc[mi][ni][2 * h + 1];", 5)
        self.w("}", 4)
        self.w("}", 3)
        self.w("}", 2)


__all__ = ["emit_kernel", "kernel_info", "KernelInfo", "Barrier", "barriers", "api_header", "c_expr"]

"""``kind: gemm`` problems: a GEMM configuration expanded into a loop body (docs/problem-format.md).

Input: a :class:`GemmConfig` (:mod:`synth.gemm_doc` reads one from a ``kind: gemm`` YAML document). Output: a
:class:`~synth.problem.Problem` whose loop is the k-tile loop of one CTA of a
multistage f16 tensor-core GEMM, with the ops the CUDA emitter
(:mod:`synth.emit.cuda`) implements, at k16 granularity (``KI = BK / 16``)::

    for j in 0 .. P - 1:
      load_j  cp_async  writes A_s, B_s     (share j of the thread's 16-byte cp.async of the next
                                             BM x BK A tile and BN x BK B tile; B is N x K, "TN")
    for kk in 0 .. KI - 1:
      s2r_A_kk  lsu     A_s -> A_f{kk % 2}  (ldmatrix.x4 of k16 slice kk of the warp's A rows)
      s2r_B_kk  lsu     B_s -> B_f{kk % 2}
      mma_kk    tensor  A_f{kk % 2}, B_f{kk % 2}, C_r -> C_r   (MI x NI mma.sync m16n8k16, f32 accumulate)

The global->shared copies of a k-tile are split into ``P = min(KI, max(A, B
chunks per thread))`` shares (:func:`load_shares`), as CUTLASS's
``MmaMultistage`` issues one group of its copies per warp-level k16 step, so
that the order the solver picks decides where the copies sit among the k16
steps (the emitter spreads the copies of a share over the ``mma.sync`` of the
same run of statements; docs/cuda_kernel.md).

The fragment buffers ``A_f0/A_f1``, ``B_f0/B_f1`` each hold one k16 slice of
the warp tile and alternate between the k16 steps, as CUTLASS's warp-level
fragment double buffering (``MmaMultistage``: load fragment ``kk + 1`` while
the mma of ``kk`` runs). They are ``carried`` register buffers: one register
set each, never multi-buffered, so the dependence graph makes every reuse a
hard edge (``mma_kk`` must read ``A_f{kk % 2}`` before ``s2r_A_{kk + 2}``
overwrites it; the next k-tile's ``s2r_A_0`` comes after ``mma_{KI - 2}``),
and ``s2r_*_{kk + 1}`` is free to run before ``mma_kk``. With ``BK = 16``
there is one step and one fragment buffer per operand.

Units: shared buffers are bytes per CTA; register buffers are bytes **per
thread** (``target.registers_bytes`` is the per-thread budget left after the
kernel's addressing registers).

Latency and issue cycles come from :mod:`synth.arch`, per op: issue = the
op's warp instructions times the SM cycles each occupies its unit (a
16-byte-per-lane cp.async or an ldmatrix.x4 moves 512 B through the 128 B/clk
shared-memory port: 4 cycles; an m16n8k16 is 2048 FMA at ``fma_per_clk_sm / 4``
per SM sub-partition). Loads and ldmatrix: latency = issue + the arch's latency
of one instruction (the last result). mma: latency = the arch's mma latency
alone: its consumers (the next k16 step's mma on the same accumulators, in the
same ``mi, ni`` order) need its ``i``-th result for their ``i``-th instruction,
and the tensor unit is busy for the issue cycles anyway.

``stages: S`` pins a CUTLASS-like schedule (:func:`stage_pins`, :func:`order_pins`):
loads in stage 0 (share ``j`` just before k16 step ``j``), the mma and ldmatrix in stage ``S - 1``, and for ``S >= 3``
the ldmatrix of the next k-tile's first k16 slice one stage earlier, right
after ``mma_{KI - 2}``: ``S`` shared slots, one barrier and one
``cp.async.wait_group S - 2`` per k-tile, exactly ``MmaMultistage``'s shape.

Left out on purpose: tf32/f32 operands (rejected with a clear error), split-K,
epilogue fusion, CTA rasterization.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from .arch import ArchSpec, get_arch
from .bounds import MAX_SPLIT_K
from .errors import Loc, SynthError
from .problem import Buffer, Loop, Objective, Op, Pins, Problem, Target, Unit

DTYPES = ("f16",)
"""Supported operand types; tf32/f32 are planned."""
REG_OVERHEAD = 40
"""Registers per thread the kernel needs besides fragments and accumulators
(pointers, tile offsets, loop counter, slot indices, zero-fill byte counts);
see :func:`register_estimate` for how it compares with ptxas."""
MAX_AUTO_STAGE = 6
"""Upper bound of ``max_stage`` when ``stages: auto``."""


def op_names(KI: int, shares: int = 1) -> tuple[str, ...]:
    """The ops of a k-tile with ``KI`` k16 steps and ``shares`` load shares, in program order."""
    out = [f"load_{j}" for j in range(shares)]
    for kk in range(KI):
        out += [f"s2r_A_{kk}", f"s2r_B_{kk}", f"mma_{kk}"]
    return tuple(out)


def load_shares(cfg: "GemmConfig") -> int:
    """Load ops per k-tile: ``min(KI, max(A chunks, B chunks per thread))`` (every share copies at
    least one chunk of the larger operand); 1 when the config has no valid tiling."""
    try:
        t = tiling(cfg)
    except ValueError:
        return 1
    return max(1, min(t.KI, max(t.a_chunks_per_thread, t.b_chunks_per_thread)))


def share_chunks(total: int, shares: int, j: int) -> range:
    """The chunks (of ``total`` per thread) that share ``j`` of ``shares`` copies: the
    ``j``-th of ``shares`` near-equal consecutive ranges (possibly empty for the smaller operand)."""
    return range(j * total // shares, (j + 1) * total // shares)


def frag_buffer(operand: str, kk: int) -> str:
    """The register buffer k16 step ``kk`` of ``operand`` (``A`` or ``B``) uses: ``A_f0``, ``A_f1``, ..."""
    return f"{operand}_f{kk % 2}"


@dataclass(frozen=True)
class GemmConfig:
    M: int
    N: int
    K: int
    dtype: str = "f16"
    BM: int = 128
    BN: int = 128
    BK: int = 32
    warps: int = 4
    stages: Optional[int] = None
    """Pipeline depth (``max_stage + 1``); None: the solver chooses."""
    arch: str = "sm_80"
    name: Optional[str] = None
    split_k: int = 1
    """K splits (``gridDim.z``): CTA ``z`` of a tile computes k-tiles ``[z T / S, (z + 1) T / S)`` and the
    tile's last CTA to finish sums the partial tiles (docs/cuda_kernel.md, "Split-K"); 1: no split."""
    stream_k: bool = False
    """Stream-K (docs/cuda_kernel.md, "Stream-K"): a 1-D grid of any size ``G`` (the launcher's choice, one
    wave) shares the ``tiles x ceil(K / BK)`` k-tile iterations evenly; CTA ``c`` runs iterations
    ``[c I / G, (c + 1) I / G)``, crossing tiles, and a tile's partial sums meet as split-K's do. Excludes
    ``split_k > 1``; the loop is proved for every trip count from 1."""

    @property
    def trip_count(self) -> int:
        """k-tiles of the whole K: ``ceil(K / BK)``."""
        return -(-self.K // self.BK)

    @property
    def split_trip_count(self) -> int:
        """k-tiles of the shortest split, the loop one CTA runs: ``ceil(K / BK) // split_k``."""
        return self.trip_count // self.split_k

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def problem_name(self) -> str:
        if self.name:
            return self.name
        st = "auto" if self.stages is None else str(self.stages)
        split = f"-split{self.split_k}" if self.split_k != 1 else ("-streamk" if self.stream_k else "")
        return (f"gemm-{self.M}x{self.N}x{self.K}-{self.dtype}-{self.BM}x{self.BN}x{self.BK}"
                f"-w{self.warps}-s{st}{split}-{self.arch}")


@dataclass(frozen=True)
class Tiling:
    """Derived per-CTA / per-warp / per-thread shapes of a config (what the kernel uses)."""

    WM: int
    """Warps along M."""
    WN: int
    """Warps along N."""
    WTM: int
    """Warp tile rows."""
    WTN: int
    """Warp tile columns."""
    MI: int
    """m16 tiles per warp."""
    NI: int
    """n8 tiles per warp (even: ldmatrix.x4 loads two)."""
    KI: int
    """k16 steps per k-tile."""
    a_bytes: int
    """A tile bytes (one shared slot)."""
    b_bytes: int
    a_chunks_per_thread: int
    """16-byte cp.async per thread for one A tile."""
    b_chunks_per_thread: int
    acc_regs: int
    """f32 accumulators per thread."""
    a_frag_regs: int
    """32-bit registers of one A fragment buffer (``A_f0``): one k16 slice of the warp's rows, ``MI * 4``."""
    b_frag_regs: int
    """Of one B fragment buffer: ``NI * 2``."""
    frag_buffers: int
    """Fragment buffers per operand: ``min(KI, 2)`` (``A_f0``, ``A_f1``)."""


def warp_layout(warps: int, BM: int, BN: int) -> Optional[tuple[int, int]]:
    """``(WM, WN)`` with ``WM * WN == warps`` and 16-aligned warp tiles, squarest first."""
    best = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if BM % wm or BN % wn or (BM // wm) % 16 or (BN // wn) % 16:
            continue
        key = (abs(BM // wm - BN // wn), wm)
        if best is None or key < best[0]:
            best = (key, (wm, wn))
    return None if best is None else best[1]


def tiling(cfg: GemmConfig) -> Tiling:
    """Derived shapes; raises ValueError when :func:`validate` would complain."""
    lay = warp_layout(cfg.warps, cfg.BM, cfg.BN)
    if lay is None:
        raise ValueError(f"no warp layout for {cfg.warps} warps on a {cfg.BM}x{cfg.BN} tile")
    wm, wn = lay
    wtm, wtn = cfg.BM // wm, cfg.BN // wn
    mi, ni, ki = wtm // 16, wtn // 8, cfg.BK // 16
    ab, bb = cfg.BM * cfg.BK * 2, cfg.BN * cfg.BK * 2
    t16 = cfg.threads * 16
    return Tiling(wm, wn, wtm, wtn, mi, ni, ki, ab, bb, ab // t16, bb // t16,
                  mi * ni * 4, mi * 4, ni * 2, min(ki, 2))


def register_estimate(cfg: GemmConfig) -> int:
    """Registers per thread: f32 accumulators + the fragment buffers (two k16 slices per
    operand, one when ``BK = 16``) + :data:`REG_OVERHEAD`.

    For a 64x64 warp tile (CUTLASS's default 128x256x64 with 8 warps, Triton's
    tutorial 128x128x64 with 4 warps): 128 + 2 x (16 + 16) + 40 = 232, the data
    CUTLASS's ``MmaMultistage`` holds too (a 64x64 ``FragmentC`` and
    ``warp_loaded_frag_A[2]``, ``warp_loaded_frag_B[2]`` of one k16 slice each).
    ptxas (nvcc 13.0, sm_80) compiles both emitted kernels without spills down to
    ``-maxrregcount 226`` (tests/test_sass.py checks 232); with the kernel's
    ``__launch_bounds__(THREADS, 1)`` it takes 254-255 because it may.
    """
    t = tiling(cfg)
    return t.acc_regs + t.frag_buffers * (t.a_frag_regs + t.b_frag_regs) + REG_OVERHEAD


def stage_pins(cfg: GemmConfig) -> Optional[tuple[int, ...]]:
    """The CUTLASS-like stages (one per op of :func:`op_names`) for a pinned depth
    ``S = cfg.stages``; None when auto.

    Loads in stage 0 (async); every ldmatrix and mma in stage ``S - 1``, except
    that for ``S >= 3`` the ldmatrix of the first k16 slice (``s2r_*_0``) is in
    stage ``S - 2``: it loads the fragments of the *next* k-tile during the last
    k16 step of the current one, as ``MmaMultistage`` does. (With ``S = 2`` that
    would put it in the loads' stage, reading a tile right after its copy.)
    Shared slots (:func:`smem_slots`): ``S``, CUTLASS's ``kStages``; ``S - 1``
    for ``BK = 16``, whose only ldmatrix is the early one.
    """
    S = cfg.stages
    if S is None:
        return None
    names = op_names(cfg.BK // 16, load_shares(cfg))
    last = S - 1
    out = []
    for n in names:
        if n.startswith("load_"):
            out.append(0)
        elif n.startswith("s2r_") and n.endswith("_0") and S >= 3:
            out.append(S - 2)
        else:
            out.append(last)
    return tuple(out)


def order_pins(cfg: GemmConfig) -> Optional[tuple[int, ...]]:
    """The body order (TVM's ``software_pipeline_order``: position of each op of
    :func:`op_names`) that goes with :func:`stage_pins`; None when auto.

    The k16 steps with the ldmatrix of step ``kk + 1`` before the mma of step
    ``kk`` (CUTLASS's warp-level double buffering), load share ``j`` right
    before k16 step ``j`` (CUTLASS issues one group of copies per step; every
    share precedes the step's commit and wait, so ``S - 1`` k-tiles stay in
    flight). For ``S >= 3`` the next k-tile's ``s2r_*_0`` comes after
    ``mma_{KI - 2}`` (it overwrites ``A_f0``) and before ``mma_{KI - 1}``::

        S >= 3, KI = 4, P = 4: load_0 s2r_1 mma_0  load_1 s2r_2 mma_1  load_2 s2r_3 mma_2  load_3 s2r_0' mma_3
        S >= 3, KI = 2, P = 2: load_0 s2r_1 mma_0  load_1 s2r_0' mma_1
        S >= 3, KI = 1:        load_0 mma_0 s2r_0'
        S <= 2, KI = 4:        load_0 .. load_{P-1}  s2r_0 s2r_1 mma_0  s2r_2 mma_1  s2r_3 mma_2  mma_3

    (``s2r_k`` is ``s2r_A_k, s2r_B_k``; ``'`` marks the next k-tile.) The first
    share precedes every ldmatrix of its k-tile's slot, so the slots stay ``S``
    (:func:`smem_slots`) and one barrier per k-tile suffices.
    """
    S = cfg.stages
    if S is None:
        return None
    KI = cfg.BK // 16
    P = load_shares(cfg)
    loads = [f"load_{j}" for j in range(P)]

    def s2r(k: int) -> list[str]:
        return [f"s2r_A_{k}", f"s2r_B_{k}"]

    seq: list[str] = []
    if S >= 3:
        for kk in range(KI):
            nxt = kk + 1 if kk + 1 < KI else 0
            seq += loads[kk:kk + 1] if kk + 1 < KI else loads[kk:]
            if KI == 1:
                seq += [f"mma_{kk}"] + s2r(0)
            else:
                seq += s2r(nxt) + [f"mma_{kk}"]
    else:
        seq += loads + s2r(0)
        for kk in range(KI):
            if kk + 1 < KI:
                seq += s2r(kk + 1)
            seq.append(f"mma_{kk}")
    pos = {n: i for i, n in enumerate(seq)}
    return tuple(pos[n] for n in op_names(KI, P))


def smem_slots(stages: tuple[int, ...]) -> int:
    """Shared slots per operand of pinned stages (one per op of :func:`op_names`) when
    the first load share precedes every ldmatrix in the body order, as
    :func:`order_pins` has it: the largest ``s_s2r - s_load + 1``
    (:func:`synth.schedule.multiplicity`). ``S`` for ``stages: S``: synth's depth
    is CUTLASS's ``kStages`` and Triton's ``num_stages``.
    """
    KI = next(k for k in (1, 2, 4, 8, 16) if 3 * k < len(stages) <= 4 * k)  # P + 3 KI ops, 1 <= P <= KI
    P = len(stages) - 3 * KI
    s2r = [stages[P + 3 * kk + j] for kk in range((len(stages) - P) // 3) for j in (0, 1)]
    return max(s2r) - min(stages[:P]) + 1


# ---------------------------------------------------------------------------
# validation


@dataclass(frozen=True)
class _Issue:
    key: str
    """Dotted key of the YAML document the issue is about (``tile.BK``)."""
    msg: str
    fix: str
    fixed_k_only: bool = False
    """True when the issue holds only for a kernel proved for ``cfg.K``'s k-tile count alone."""


def _issues(cfg: GemmConfig) -> list[_Issue]:
    out: list[_Issue] = []

    def bad(key: str, msg: str, fix: str, fixed_k_only: bool = False) -> None:
        out.append(_Issue(key, msg, fix, fixed_k_only))

    if cfg.dtype not in DTYPES:
        bad("dtype", f"dtype {cfg.dtype!r} is not yet supported (only f16 operands with f32 accumulation)",
            "use dtype: f16 (tf32/f32 GEMMs are planned)")
    try:
        arch: Optional[ArchSpec] = get_arch(cfg.arch)
    except KeyError as exc:
        arch = None
        bad("arch", str(exc.args[0]), "use one of sm_80, sm_86, sm_89, sm_90")
    for k in ("M", "N", "K"):
        if getattr(cfg, k) < 1:
            bad(f"shape.{k}", f"shape.{k} is {getattr(cfg, k)}", "use a positive size")
    if cfg.K >= 1 and cfg.K % 8:
        bad("shape.K", f"K = {cfg.K} is not a multiple of 8: rows of A and B (K f16 each) would not start "
            "16-byte aligned, which 16-byte cp.async needs", "pad K to a multiple of 8 with zeros")
    if cfg.BK < 16 or cfg.BK & (cfg.BK - 1):
        bad("tile.BK", f"BK = {cfg.BK} must be a power of two, at least 16 (mma k16 steps; the shared "
            "memory swizzle works on 128-byte lines)", "use BK 16, 32, 64 or 128")
    for k in ("BM", "BN"):
        v = getattr(cfg, k)
        if v < 16 or v % 16:
            bad(f"tile.{k}", f"{k} = {v} is not a positive multiple of 16 (mma m16 / ldmatrix.x4 n16)",
                f"use {k} 64, 128 or 256")
    if cfg.warps not in (1, 2, 4, 8, 16):
        bad("warps", f"warps = {cfg.warps}: use 1, 2, 4, 8 or 16 warps per CTA", "use warps: 4 or 8")
    if not 1 <= cfg.split_k <= MAX_SPLIT_K:
        bad("split_k", f"split_k = {cfg.split_k} is outside 1 .. {MAX_SPLIT_K}", "use split_k: 1 (no split) to "
            f"{MAX_SPLIT_K}")
    elif cfg.stream_k and cfg.split_k != 1:
        bad("stream_k", f"stream_k and split_k = {cfg.split_k} both decompose K: stream-K already splits "
            "tiles' k-ranges across CTAs as the work requires", "use stream_k: true or split_k, not both")
    elif cfg.K >= 1 and cfg.BK >= 1 and cfg.split_k > cfg.trip_count:
        bad("split_k", f"split_k = {cfg.split_k} exceeds the {cfg.trip_count} k-tiles of K = {cfg.K} / BK = "
            f"{cfg.BK}: a split would get no k-tile", f"use split_k at most {cfg.trip_count}")
    if out:
        return out
    if warp_layout(cfg.warps, cfg.BM, cfg.BN) is None:
        bad("warps", f"{cfg.warps} warps cannot split a {cfg.BM}x{cfg.BN} tile into warp tiles that are "
            "multiples of 16x16", "use fewer warps or a larger tile")
        return out
    t = tiling(cfg)
    for op, nbytes, rows in (("A", t.a_bytes, cfg.BM), ("B", t.b_bytes, cfg.BN)):
        if nbytes % (cfg.threads * 16):
            bad("warps", f"the {rows}x{cfg.BK} {op} tile ({nbytes} B) is not a whole number of 16-byte cp.async "
                f"per thread for {cfg.threads} threads", "use fewer warps or a larger tile")
    if arch is None:
        return out
    T = cfg.split_trip_count
    pins = stage_pins(cfg)
    if cfg.stages is not None:
        if cfg.stages < 1:
            bad("stages", f"stages = {cfg.stages}", "use at least 1, or auto")
            return out
        if cfg.stages > T:
            what = (f"the {T} k-tiles of K = {cfg.K} / BK = {cfg.BK}" if cfg.split_k == 1 else
                    f"the {T} k-tiles of each of the {cfg.split_k} splits of K = {cfg.K} / BK = {cfg.BK}")
            bad("stages", f"{cfg.stages} stages exceed {what} (the "
                "pipelined loop needs at least one body step)", f"use at most {T} stages, or a larger K"
                + (" or a smaller split_k" if cfg.split_k > 1 else ""),
                fixed_k_only=True)
    slots = smem_slots(pins) if pins else 1
    need = slots * (t.a_bytes + t.b_bytes)
    if need > arch.smem_per_block:
        what = f"{slots} slots" if pins else "even single-buffered,"
        bad("stages" if pins else "tile", f"shared memory: {what} A and B tiles need {need} B, above the "
            f"{arch.smem_per_block} B a CTA may use on {arch.name}",
            "use fewer stages or a smaller tile" if pins else "use a smaller tile")
    regs = register_estimate(cfg)
    if regs > arch.max_registers_per_thread:
        bad("warps", f"about {regs} registers per thread ({t.acc_regs} accumulators, {t.frag_buffers} x "
            f"{t.a_frag_regs + t.b_frag_regs} fragment registers of one k16 slice, {REG_OVERHEAD} others) exceed "
            f"{arch.max_registers_per_thread}", "use more warps or a smaller tile")
    return out


def validate(cfg: GemmConfig) -> list[str]:
    """Why ``cfg`` cannot be compiled (empty: it can): tile/warp legality, mma k16,
    16-byte cp.async alignment, shared memory of the pinned stages, registers."""
    return [i.msg for i in _issues(cfg)]


# ---------------------------------------------------------------------------
# expansion


def expand_gemm(cfg: GemmConfig, path: str = "<memory>", locs: Optional[dict[str, Loc]] = None,
                pins: Optional[Pins] = None, objective: Objective = Objective(),
                shared_bytes: Optional[int] = None, registers_bytes: Optional[int] = None,
                min_ktiles: Optional[int] = None) -> Problem:
    """The k-tile loop of ``cfg`` as a :class:`Problem` (``problem.gemm is cfg``).

    ``pins`` replaces the pins derived from ``cfg.stages``; ``locs`` maps dotted
    YAML keys to locations for errors. With ``min_ktiles`` (at least 1) the loop's trip count is the symbol
    ``T`` with that minimum, so the program is proved, and the kernel runs, for
    every K with ``ceil(K / BK) >= min_ktiles`` (``cfg.K`` then only names the
    shape the schedule is tuned for); loops shorter than the pipeline included
    (``T < stages``). Raises :class:`SynthError` on the first :func:`validate` issue.
    """
    locs = locs or {}
    check_config(cfg, path, locs, min_ktiles)
    arch = get_arch(cfg.arch)
    t = tiling(cfg)
    here = locs.get("", Loc(path))
    if min_ktiles is None and cfg.split_k > 1 and cfg.trip_count % cfg.split_k:
        raise SynthError(_loc_of(locs, "split_k", path), f"split_k = {cfg.split_k} does not divide the "
                         f"{cfg.trip_count} k-tiles of K = {cfg.K}: splits of a loop proved for one fixed trip "
                         "count would not all run it, so no K of this shape could be served",
                         "give min_ktiles (a trip count read at run time), or a split_k that divides the k-tiles")
    if min_ktiles != 1 and cfg.stream_k:
        raise SynthError(_loc_of(locs, "stream_k", path), "a stream-K CTA runs the loop over any number of "
                         f"k-tiles from 1 (its share of a tile), so the loop must be proved for every trip count "
                         f"from 1, not {'one fixed trip count' if min_ktiles is None else f'from {min_ktiles}'}",
                         "remove min_k_tiles (the default, 1)")
    T = cfg.split_trip_count

    bufs = [Buffer("A_s", "shared", t.a_bytes, loc=here), Buffer("B_s", "shared", t.b_bytes, loc=here)]
    for op, regs in (("A", t.a_frag_regs), ("B", t.b_frag_regs)):
        for f in range(t.frag_buffers):  # one register set each: reuse is ordered by hard WAR edges
            bufs.append(Buffer(frag_buffer(op, f), "register", regs * 4, carried=True, loc=here))
    bufs.append(Buffer("C_r", "register", t.acc_regs * 4, carried=True, loc=here))
    sub = min(cfg.warps, 4)  # SM sub-partitions (schedulers, tensor cores) the CTA's warps occupy
    smem_clk = 512 // arch.smem_bytes_per_clk  # cycles of the shared port per 512-byte warp access
    # cp.async: LDGSTS per thread x warps, one 512-byte warp instruction each, split into P shares
    P = load_shares(cfg)
    chunks = [len(share_chunks(t.a_chunks_per_thread, P, j)) + len(share_chunks(t.b_chunks_per_thread, P, j))
              for j in range(P)]
    port = [c * cfg.warps * smem_clk for c in chunks]
    # docs/latency_model.md, "Op figures of a gemm problem": a share occupies the copy unit for the longer of
    # its shared-port time and its bytes at the SM's share of the L2 bandwidth (every SM streams its tiles)
    ld = [max(p, copy_l2_cycles(c * cfg.threads * 16, arch)) for p, c in zip(port, chunks)]
    # per k16 step, ldmatrix.x4 per warp: MI for A, NI/2 for B
    s2r_a = t.MI * cfg.warps * smem_clk
    s2r_b = (t.NI // 2) * cfg.warps * smem_clk
    # a fragment is ready lat_shared after the whole k16 step's shared traffic has passed the port: both
    # operands' ldmatrix and the step's share of the copies, issued interleaved by lockstep warps
    s2r_lat = arch.lat_shared + s2r_a + s2r_b + math.ceil(sum(port) / t.KI)
    # per k16 step, mma: MI*NI per warp, 2048 FMA each, fma_per_clk_sm/4 per sub-partition
    mma_issue = math.ceil(t.MI * t.NI * cfg.warps * 2048 / (arch.fma_per_clk_sm * sub / 4))
    ops = [Op(f"load_{j}", "cp_async", (), ("A_s", "B_s"), arch.lat_global + ld[j], ld[j], loc=here)
           for j in range(P)]
    for kk in range(t.KI):
        fa, fb = frag_buffer("A", kk), frag_buffer("B", kk)
        ops += [
            Op(f"s2r_A_{kk}", "lsu", ("A_s",), (fa,), s2r_lat, s2r_a, loc=here),
            Op(f"s2r_B_{kk}", "lsu", ("B_s",), (fb,), s2r_lat, s2r_b, loc=here),
            Op(f"mma_{kk}", "tensor", (fa, fb, "C_r"), ("C_r",), arch.lat_mma, mma_issue, loc=here),
        ]
    reg_budget = (arch.max_registers_per_thread - REG_OVERHEAD) * 4
    target = Target(
        shared_bytes=arch.smem_per_block if shared_bytes is None else shared_bytes,
        registers_bytes=reg_budget if registers_bytes is None else registers_bytes,
        units=(Unit("cp_async", True, loc=here), Unit("lsu", False, loc=here), Unit("tensor", False, loc=here)),
        loc=here,
    )
    if pins is None:
        pins = default_pins(cfg, here)
    loop = Loop("k", T, T, here) if min_ktiles is None else Loop("k", "T", min_ktiles, here)
    return Problem(name=cfg.problem_name(), loop=loop, buffers=tuple(bufs), ops=tuple(ops),
                   target=target,
                   pins=pins, objective=objective, gemm=cfg, path=path)


def copy_l2_cycles(nbytes: int, arch: ArchSpec) -> int:
    """Cycles ``nbytes`` of one CTA's copies take at the SM's share of the L2 bandwidth,
    ``ceil(nbytes * sm_count / l2_bytes_per_clk)``: every SM streams its tiles at once in a GEMM
    of many CTAs (docs/latency_model.md, "Op figures of a gemm problem")."""
    return math.ceil(nbytes * arch.sm_count / arch.l2_bytes_per_clk)


def check_config(cfg: GemmConfig, path: str = "<memory>", locs: Optional[dict[str, Loc]] = None,
                 min_ktiles: Optional[int] = None) -> None:
    """Raise :class:`SynthError` at the offending key (``locs``: dotted YAML keys to locations) on the
    first :func:`validate` issue of ``cfg`` (with ``min_ktiles``, a symbolic trip count, issues that
    hold only for the tuned K are skipped); :func:`default_pins` and :func:`expand_gemm` need a valid one."""
    locs = locs or {}
    if min_ktiles is not None and min_ktiles < 1:
        raise SynthError(locs.get("", Loc(path)), f"min_ktiles is {min_ktiles}", "use at least 1 k-tile")
    issues = [i for i in _issues(cfg) if min_ktiles is None or not i.fixed_k_only]
    if issues:
        i = issues[0]
        raise SynthError(_loc_of(locs, i.key, path), i.msg, i.fix)


def default_pins(cfg: GemmConfig, loc: Loc = Loc("<none>")) -> Pins:
    """Pins for ``cfg.stages``: all stages (:func:`stage_pins`), the order (:func:`order_pins`)
    and async stage 0; with ``stages: auto`` only async stage 0 and
    ``max_stage <= min(6, k-tiles of one split of cfg.K - 1)`` (stages and order of every op free)."""
    st = stage_pins(cfg)
    if st is not None:
        return Pins(stage=st, order=order_pins(cfg), async_stages=(0,), max_stage=max(st), loc=loc,
                    stage_loc=loc, order_loc=loc)
    # Deeper than the tuned shape's k-tile count overlaps nothing for that shape; any K stays correct.
    return Pins(async_stages=(0,), max_stage=min(MAX_AUTO_STAGE, max(cfg.split_trip_count - 1, 0)), loc=loc)


def _loc_of(locs: dict[str, Loc], key: str, path: str) -> Loc:
    while key:
        if key in locs:
            return locs[key]
        key = key.rpartition(".")[0]
    return locs.get("", Loc(path))


def config_from_problem(problem: Problem) -> GemmConfig:
    """The config of a gemm problem; raises SynthError for hand-written loops."""
    if not isinstance(problem.gemm, GemmConfig):
        raise SynthError(None, f"problem {problem.name!r} is not a kind: gemm problem",
                         "CUDA kernels are emitted for kind: gemm problems only")
    return problem.gemm


__all__ = ["GemmConfig", "Tiling", "tiling", "warp_layout", "validate", "check_config", "expand_gemm", "default_pins",
           "stage_pins", "order_pins", "op_names", "load_shares", "share_chunks", "frag_buffer", "smem_slots", "register_estimate",
           "config_from_problem", "copy_l2_cycles", "DTYPES", "REG_OVERHEAD"]

"""The Hopper main loop's search space and performance model (``mainloop: tma_wgmma``, sm_90).

Input: a :class:`~synth.search.space.Context` on ``sm_90`` and a :class:`HopperPoint` (CTA tile
``BM x BN x 64``, ``stages``, ``k_pipe_mmas``). Output: the points of the space
(:func:`enumerate_hopper_space`), the legal ones with exclusion counts per named constraint
(:func:`prune_hopper`), and each legal point's :class:`HopperEstimate` (:func:`estimate_hopper`).
docs/search.md, section 10, gives every term and its source.

The points are exactly the kernels ``synth solve`` builds for a ``kind: gemm`` problem with
``mainloop: tma_wgmma`` (:class:`synth.hopper.problem.HopperGemm`, docs/hopper_kernel.md):
a producer warp group and ``BM / 64`` cooperative consumer warp groups, ``stages`` and
``k_pipe_mmas`` pinned. One CTA's k-tile loop is timed by the Hopper pipeline model itself
(:func:`synth.hopper.model.choose` with every choice pinned: the TMA round trip hidden by the
loads in flight, the wgmma drain when ``k_pipe_mmas = 0``), and the SM-level terms are added
here: tensor cores at the wgmma rate, L2 and DRAM traffic with the grid's rasterization
(:func:`synth.search.model.traffic`), occupancy, waves, fill, epilogue and launch. A persistent
point (``persistent=True``) runs one wave of CTAs walking the tiles: its prologue once per CTA, every
tile's epilogue, and per tile boundary the TMA round trip the epilogue does not hide (docs/search.md,
section 10, "Persistent tiles").

Pure: every function returns the same value for the same arguments (the pipeline model's
cycles are cached per process; they do not depend on ``M`` or ``N``).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from .model import WaveEstimate, kernel_time

HOPPER_BM_SPACE = (64, 128)
HOPPER_BN_SPACE = tuple(range(16, 257, 16))
HOPPER_STAGES_SPACE = tuple(range(1, 17))
HOPPER_KPIPE_SPACE = tuple(range(0, 16))
HOPPER_BK = 64  # the Hopper kernel's BK (synth.hopper.problem.BK)
C_BYTES = 4
"""The Hopper kernel writes C as f32 (docs/hopper_kernel.md)."""
HOPPER_SPLIT_BARRIERS = 2
"""CTA-level barriers of the Hopper kernel's split-K hand-off: named barrier 1 after the release fence,
and the same barrier as ``bar.red.or`` after the ticket (docs/hopper_kernel.md, "Split-K")."""
SETUP_BARRIERS = 3
"""CTA barriers outside the k-loop: after the mbarrier init (with its fence), before the
invalidation, and one for the epilogue's hand-over (docs/hopper_kernel.md, "Setup / teardown")."""


@dataclass(frozen=True)
class HopperPoint:
    """One Hopper kernel configuration (shape independent)."""

    BM: int
    BN: int
    stages: int
    k_pipe_mmas: int
    split_k: int = 1
    """K splits (docs/hopper_kernel.md, "Split-K"); 1: none. A split keeps its tile's pipeline choice."""
    persistent: bool = False
    """A persistent grid of ``P`` CTAs walking the tiles (docs/hopper_kernel.md, "Persistent tiles"); never with
    a split (the kernel refuses it). False: one CTA per tile."""

    @property
    def BK(self) -> int:
        return HOPPER_BK

    @property
    def consumers(self) -> int:
        from ..hopper.problem import consumers_of

        return consumers_of(self.BM)

    @property
    def warps(self) -> int:
        """A producer warp group and ``BM / 64`` consumer warp groups."""
        from ..hopper.problem import warps_of

        return warps_of(self.BM)

    @property
    def group(self) -> tuple[int, int]:
        """(BM, BN): configurations are ranked per tile, each at its best stages, k_pipe_mmas and split."""
        return (self.BM, self.BN)

    @property
    def label(self) -> str:
        split = f" split{self.split_k}" if self.split_k != 1 else ""
        return f"{self.BM}x{self.BN}x{self.BK} s{self.stages} k{self.k_pipe_mmas}{split}" + \
            (" persistent" if self.persistent else "")

    @property
    def base(self) -> "HopperPoint":
        """The point without its split, one CTA per tile."""
        return HopperPoint(self.BM, self.BN, self.stages, self.k_pipe_mmas)

    def smem_bytes(self) -> int:
        """Dynamic shared memory of the kernel: slots, two mbarriers per stage, the alignment pad."""
        from ..hopper.problem import ALIGN_PAD

        return self.stages * ((self.BM + self.BN) * self.BK * 2 + 16) + ALIGN_PAD

    def problem(self, M: int, N: int, K: int, dtype: str):
        """The :class:`~synth.hopper.problem.HopperGemm` of this point (stages and k_pipe_mmas pinned)."""
        from ..hopper.problem import HopperGemm

        split = f"-split{self.split_k}" if self.split_k != 1 else ""
        split += "-persistent" if self.persistent else ""
        name = (f"gemm-{M}x{N}x{K}-{dtype}-{self.BM}x{self.BN}x{self.BK}-s{self.stages}-k{self.k_pipe_mmas}"
                f"{split}-sm_90")
        return HopperGemm(name, M, N, K, dtype, self.BM, self.BN, self.stages, self.k_pipe_mmas,
                          split_k=self.split_k, persistent=self.persistent)


# ---------------------------------------------------------------------------
# constraints


@dataclass(frozen=True)
class HopperConstraint:
    name: str
    formula: str
    """The constraint as written in docs/search.md, section 10."""
    check: Callable[[object, HopperPoint], Optional[str]]
    """None when the point satisfies it, else why not."""


def _c_kpipe(ctx, p: HopperPoint) -> Optional[str]:
    if p.k_pipe_mmas >= p.stages:
        return (f"k_pipe_mmas {p.k_pipe_mmas} with {p.stages} stages: a consumer holding every slot "
                "starves the producer")
    return None


def _c_tma(ctx, p: HopperPoint) -> Optional[str]:
    if ctx.K % 8:
        return f"K = {ctx.K}: TMA needs the row stride of A and B (2 K bytes) to be a multiple of 16"
    return None


def _c_smem(ctx, p: HopperPoint) -> Optional[str]:
    from ..hopper.problem import SMEM_LIMIT

    if p.smem_bytes() > SMEM_LIMIT:
        return f"{p.stages} stages need {p.smem_bytes()} B of shared memory, above the {SMEM_LIMIT} B of sm_90"
    return None


def _c_kernel(ctx, p: HopperPoint) -> Optional[str]:
    from ..emit.sm90.config import Sm90Config

    try:
        Sm90Config(bm=p.BM, bn=p.BN, stages=p.stages, k_pipe_mmas=p.k_pipe_mmas, dtype=ctx.dtype).check()
    except ValueError as e:
        return str(e)
    return None


HOPPER_CONSTRAINTS: tuple[HopperConstraint, ...] = (
    HopperConstraint("k_pipe_mmas<stages", "k_pipe_mmas < stages", _c_kpipe),
    HopperConstraint("tma-16B", "K % 8 == 0", _c_tma),
    HopperConstraint("shared-memory", "stages * ((BM + BN) * 128 + 16) + 1024 <= 232448", _c_smem),
    HopperConstraint("Sm90Config.check", "synth.emit.sm90.config.Sm90Config(...).check() passes", _c_kernel),
)


def enumerate_hopper_space() -> list[HopperPoint]:
    """Every point: BM in {64, 128}, BN in 16..256 step 16, stages 1..16, k_pipe_mmas 0..15 (8192).

    ``stages`` is not bounded by the k-tiles of K: the Hopper program is proven for every ``T >= 1``
    and the pipeline model counts ``min(stages - k_pipe_mmas - 1, T)`` loads in flight."""
    return [HopperPoint(bm, bn, s, k) for bm, bn, s, k in
            itertools.product(HOPPER_BM_SPACE, HOPPER_BN_SPACE, HOPPER_STAGES_SPACE, HOPPER_KPIPE_SPACE)]


def prune_hopper(ctx, points: Sequence[HopperPoint]) -> tuple[list[HopperPoint], dict[str, int], dict[str, int]]:
    """Legal points, counts per first-broken constraint and per broken constraint.

    ``Sm90Config.check`` (the kernel's own bounds) adjudicates only the points every named
    constraint accepts, so its count shows what they miss: zero.
    """
    from .space import tally

    return tally(ctx, points, HOPPER_CONSTRAINTS, lambda fails, name: name == "Sm90Config.check")


def is_legal_hopper(ctx, p: HopperPoint) -> Optional[str]:
    """None when ``p`` is legal for the context's shape, else ``constraint: why`` (a split point: its base
    point's constraints, then :func:`hopper_split_issue`)."""
    for c in HOPPER_CONSTRAINTS:
        why = c.check(ctx, p.base)
        if why is not None:
            return f"{c.name}: {why}"
    if p.split_k != 1:
        why = hopper_split_issue(ctx, p)
        if why is not None:
            return f"split-k: {why}"
        if p.persistent:
            return f"persistent: a persistent CTA computes whole tiles, not split_k = {p.split_k} splits"
    return None


def hopper_split_issue(ctx, p: HopperPoint) -> Optional[str]:
    """None when ``p.split_k`` is legal (in :data:`synth.search.space.SPLIT_SPACE`, at most the k-tiles
    ``ceil(K / 64)``: the Hopper program is proven for every trip count, so a split needs one k-tile,
    not the stages), else why not."""
    from .space import SPLIT_SPACE

    if p.split_k not in SPLIT_SPACE:
        return f"split_k = {p.split_k} is not one of {SPLIT_SPACE}"
    T = -(-ctx.K // HOPPER_BK)
    if p.split_k > T:
        return f"split_k = {p.split_k} exceeds the {T} k-tiles of K"
    return None


# ---------------------------------------------------------------------------
# one CTA's k-loop: the Hopper pipeline model


@dataclass(frozen=True)
class Pipeline:
    """One CTA's k-tile loop alone, as :func:`synth.hopper.model.loop_cost` predicts it (the objective
    :func:`synth.hopper.model.choose` minimizes, for one pinned choice)."""

    fill: int
    """Cycles before the first k-tile's data has landed (one TMA round trip)."""
    per_tile: float
    """Cycles per k-tile at the shape's ``T`` (the TMA round trip over the loads in flight, or the wgmma
    time with its drain, whichever is longer; everything serial when no load can be in flight)."""
    cycles: int
    """``fill + T * per_tile``: the model's total for ``T`` k-tiles."""
    status: str = "OPTIMAL"
    """The cost of one fully pinned choice is exact (kept for the JSON's ``solver_status``)."""


@functools.lru_cache(maxsize=None)
def pipeline(dtype: str, BM: int, BN: int, stages: int, k_pipe: int, T: int) -> Pipeline:
    """The pipeline model's cycles of ``T`` k-tiles, split into fill and per-tile cycles
    (warp-specialized, ``BM / 64`` consumer warp groups, as the kernel is built)."""
    from ..gemm import GemmConfig
    from ..hopper.model import loop_cost

    cfg = GemmConfig(BM, BN, T * HOPPER_BK, dtype, BM, BN, HOPPER_BK, 4 * (1 + BM // 64), stages, "sm_90")
    c = loop_cost(cfg, stages, k_pipe, BM // 64, T, warp_specialized=True)
    return Pipeline(c.fill, float(c.per_tile), c.cycles)


@functools.lru_cache(maxsize=None)
def _auto(dtype: str, BM: int, BN: int, T: int) -> tuple[int, int]:
    from ..gemm import GemmConfig
    from ..hopper.model import choose
    from ..hopper.problem import ALIGN_PAD

    cfg = GemmConfig(BM, BN, T * HOPPER_BK, dtype, BM, BN, HOPPER_BK, 4 * (1 + BM // 64), None, "sm_90")
    c = choose(cfg, consumers=BM // 64, warp_specialized=True, reserve_bytes=ALIGN_PAD)
    return c.stages, c.k_pipe_mmas


def auto_point(ctx, BM: int, BN: int) -> Optional[HopperPoint]:
    """The point ``synth solve`` builds for the tile with ``stages: auto`` and ``k_pipe_mmas: auto``:
    the CP-SAT choice of :func:`synth.hopper.model.choose` for the shape's ``T`` (least k-loop cycles,
    then least shared memory), pinned to the kernel's shape (warp-specialized, ``BM / 64`` consumers,
    the alignment pad reserved). None when no pipeline of the tile fits."""
    try:
        s, k = _auto(ctx.dtype, BM, BN, -(-ctx.K // HOPPER_BK))
    except ValueError:
        return None
    return HopperPoint(BM, BN, s, k)


def clear_hopper_cache() -> None:
    """Forget the cached pipeline-model cycles and choices (tests)."""
    pipeline.cache_clear()
    _auto.cache_clear()


def pipeline_evaluations() -> int:
    """CP-SAT calls of the pipeline model run by this process so far (one per tile and ``T``, for the
    ``stages: auto`` choice; a pinned point's cost is evaluated directly)."""
    return _auto.cache_info().misses


# ---------------------------------------------------------------------------
# the SM and the grid


def launch_registers(arch, threads: int) -> int:
    """Registers per thread at launch: ``__launch_bounds__(threads, 1)`` lets ptxas take the whole register
    file (``setmaxnreg`` then moves them from the producer to the consumers), in whole units of 8."""
    return min(arch.max_registers_per_thread, arch.registers_per_sm // threads) // 8 * 8


def hopper_occupancy(arch, p: HopperPoint) -> tuple[int, str]:
    """CTAs per SM and what limits it (``registers`` for every point of this kernel)."""
    from ..arch import REG_ALLOC_UNIT, SMEM_RESERVED_PER_CTA

    threads = 32 * p.warps
    regs_warp = math.ceil(launch_registers(arch, threads) * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    limits = [
        (arch.registers_per_sm // (regs_warp * p.warps), "registers"),
        (arch.smem_per_sm // (p.smem_bytes() + SMEM_RESERVED_PER_CTA), "smem"),
        (arch.max_threads_per_sm // threads, "threads"),
        (arch.max_ctas_per_sm, "cta slots"),
    ]
    return min(limits, key=lambda x: x[0])


@dataclass(frozen=True)
class HopperEstimate(WaveEstimate):
    """The predicted time of one Hopper configuration on one shape, with every term (``bound``:
    tensor | l2 | dram | latency, the pipeline's TMA round trip or wgmma drain | dram overall)."""

    regs_per_thread: int
    ii: float
    """One CTA's cycles per k-tile alone (the pipeline model's)."""
    mma_cycles: int
    """wgmma cycles of one k-tile at the full tensor rate of the SM."""
    fill_cycles: int
    """The pipeline model's fill: one TMA round trip."""
    loads_in_flight: int
    """``min(stages - k_pipe_mmas - 1, T)``: TMA loads a consumer's k-tile overlaps."""
    status: str
    terms: tuple[tuple[str, float], ...] = ()
    l2_hit: float = 0.0
    round_exact: float = 0.0
    """``round_cycles`` before rounding (the explanations compare rates with it)."""
    persistent: bool = False
    """A persistent grid: ``ctas`` is ``P``, each CTA walks ``tiles_per_cta`` tiles at most."""
    tiles_per_cta: int = 1
    """Tiles the busiest CTA computes: ``ceil(tiles / P)`` when persistent, 1 otherwise."""
    epilogue_cycles: int = 0
    """One tile's end: the C store's latency and its bytes at the SM's L2 share (not overlapped in this kernel)."""
    boundary_cycles: int = 0
    """Persistent: the busiest CTA's tile-boundary cost, ``(tiles_per_cta - 1) x max(0, fill - epilogue)`` (the
    next tile's first TMA round trip the epilogue does not hide)."""
    prologue_cycles: int = 0
    """One CTA's start: its setup barriers and the pipeline fill (paid per wave without persistence, once per
    CTA with it)."""


def round_terms_hopper(arch, p: HopperPoint, k: int, pipe: Pipeline, l2_hit: float) -> dict[str, float]:
    """Per-round cycles of every term for ``k`` co-resident CTAs each advancing one k-tile."""
    tile_bytes = (p.BM + p.BN) * p.BK * 2
    mma = 2 * p.BM * p.BN * p.BK / arch.tensor_f16_f32_flop_per_clk_sm
    dram_per_sm = arch.dram_gb_s * 1e9 * arch.dram_efficiency / (arch.clock_ghz * 1e9) / arch.sm_count
    return {"tensor": k * mma, "l2": k * tile_bytes / (arch.l2_bytes_per_clk / arch.sm_count),
            "dram": k * tile_bytes * (1.0 - l2_hit) / dram_per_sm, "pipeline": pipe.per_tile,
            "fill": float(pipe.fill)}


def combine_hopper(t: dict[str, float]) -> tuple[float, str]:
    """``(round cycles, binding term)``: the throughput limits overlap as in the sm_80 model (an L4 norm,
    :data:`synth.search.model.OVERLAP_NORM`); one CTA's own pipeline is a floor (its latency overlaps
    the other CTAs' work, not its own)."""
    from .model import OVERLAP_NORM

    limits = (("tensor", t["tensor"]), ("l2", t["l2"]), ("dram", t["dram"]))
    name, top = max(limits, key=lambda x: x[1])
    busy = sum(v ** OVERLAP_NORM for _, v in limits) ** (1.0 / OVERLAP_NORM) if top > 0 else 0.0
    if t["pipeline"] > busy:
        return t["pipeline"], "latency"
    return busy, name


def estimate_hopper(ctx, p: HopperPoint) -> HopperEstimate:
    """Predicted kernel time of ``p`` on the context's shape (docs/search.md, section 10); a split point
    (``split_k = S > 1``) runs ``tiles x S`` CTAs of at most ``ceil(T / S)`` k-tiles and pays the sm_80
    model's reduction per wave (:func:`synth.search.model.reduction`, with the kernel's two barriers)."""
    from .model import OUT_BYTES, PARTIAL_BYTES, reduction, sum_waves, traffic, workspace_spill

    arch = ctx.arch
    M, N, K = ctx.M, ctx.N, ctx.K
    T = -(-K // p.BK)
    S = p.split_k
    Ts = -(-T // S)
    pipe = pipeline(ctx.dtype, p.BM, p.BN, p.stages, p.k_pipe_mmas, Ts)
    tm, tn = -(-M // p.BM), -(-N // p.BN)
    tiles = tm * tn
    ctas = tiles * S
    r, limit = hopper_occupancy(arch, p)
    r = max(r, 1)
    per_wave = arch.sm_count * r
    full, rem = divmod(ctas, per_wave)
    tr = traffic(arch, M, N, K, p.BM, p.BN, max(1, per_wave // S))
    w_spill, r_spill, ws_dram = workspace_spill(arch, tiles, S, p.BM, p.BN, per_wave)
    dram_bytes = tr.dram_bytes + M * N * (C_BYTES - OUT_BYTES) + ws_dram
    l2_per_sm = arch.l2_bytes_per_clk / arch.sm_count
    sms = min(arch.sm_count, ctas)
    reduced: dict[int, float] = {}

    def wave(k: int):
        t = round_terms_hopper(arch, p, k, pipe, tr.l2_hit)
        rc, what = combine_hopper(t)
        setup = SETUP_BARRIERS * arch.barrier_cycles
        red = reduction(arch, p.BM, p.BN, S, k, sms, w_spill, r_spill, barriers=HOPPER_SPLIT_BARRIERS)
        reduced[k] = red["write"] + red["handoff"] + red["read"]
        epi = arch.lat_global + red["lasts"] * p.BM * p.BN * C_BYTES / l2_per_sm
        return Ts * rc, setup + pipe.fill + reduced[k] + epi, what, rc, t

    prologue = SETUP_BARRIERS * arch.barrier_cycles + pipe.fill
    if p.persistent:
        # P CTAs (one wave), the busiest walks ceil(tiles / P) tiles back to back: setup and fill once, every tile's
        # epilogue in full (the consumers store C themselves), and per tile boundary the part of the next tile's
        # first TMA round trip that the producer's prefetch (stages - K_PIPE_MMAS free slots) during the epilogue
        # does not hide
        P = min(tiles, per_wave)
        k_act = -(-P // arch.sm_count)
        n = -(-tiles // P)
        lw, fw, bound, round_c, terms = wave(k_act)
        epi1 = fw - prologue
        boundary = max(0.0, pipe.fill - epi1)
        loop_cyc, fixed_cyc, k_bind = n * lw, prologue + n * epi1 + (n - 1) * boundary, k_act
        red_total, waves, ctas, full, rem = 0.0, 1, P, 1, 0
    else:
        n, boundary = 1, 0.0
        loop_cyc, fixed_cyc, bound, round_c, k_bind, terms = sum_waves(full, rem, arch.sm_count, r, wave,
                                                                       pipe.per_tile)
        red_total = (full * reduced[r] if full else 0.0) + (reduced[-(-rem // arch.sm_count)] if rem else 0.0)
        waves = full + (1 if rem else 0)
    time_us, compute_us, dram_us = kernel_time(arch, loop_cyc + fixed_cyc, dram_bytes)
    bound = "dram" if dram_us > compute_us else bound
    wl, wf, _, _, _ = wave(r)
    shown = ("tensor", "l2", "dram", "pipeline", "fill")
    return HopperEstimate(
        time_us=time_us, tflops=2.0 * M * N * K / (time_us * 1e-6) / 1e12, ctas=ctas, ctas_per_sm=r,
        occupancy_limit=limit, regs_per_thread=launch_registers(arch, 32 * p.warps), waves=waves,
        wave_efficiency=tiles / (n * ctas) if p.persistent else ctas / (waves * per_wave), k_tiles=T, ii=pipe.per_tile,
        mma_cycles=math.ceil(2 * p.BM * p.BN * p.BK / arch.tensor_f16_f32_flop_per_clk_sm),
        round_cycles=int(round(round_c)), round_exact=float(round_c), active_ctas_per_sm=k_bind, wave_cycles=int(round(wl + wf)),
        loop_cycles=int(round(loop_cyc)), fixed_cycles=int(round(fixed_cyc)), compute_us=compute_us,
        dram_us=dram_us, bound=bound, padding=1.0 - (M * N) / (tm * p.BM * tn * p.BN), fill_cycles=pipe.fill,
        loads_in_flight=max(0, min(p.stages - p.k_pipe_mmas - 1, T)), status=pipe.status,
        terms=tuple((n, round(terms[n], 1)) for n in shown if n in terms), l2_hit=round(tr.l2_hit, 4),
        split_k=S, tiles=tiles, split_k_tiles=Ts, busiest_ctas=-(-ctas // arch.sm_count),
        reduction_cycles=int(round(red_total)), workspace_bytes=tiles * S * p.BM * p.BN * PARTIAL_BYTES if S > 1 else 0,
        persistent=p.persistent, tiles_per_cta=n, epilogue_cycles=int(round(wf - prologue - reduced[r])),
        boundary_cycles=int(round((n - 1) * boundary)), prologue_cycles=int(round(prologue)))


__all__ = ["HopperPoint", "HopperConstraint", "HOPPER_CONSTRAINTS", "HopperEstimate", "Pipeline",
           "enumerate_hopper_space", "prune_hopper", "is_legal_hopper", "pipeline", "hopper_occupancy",
           "launch_registers", "estimate_hopper", "auto_point", "round_terms_hopper", "combine_hopper",
           "clear_hopper_cache", "pipeline_evaluations", "HOPPER_BM_SPACE", "HOPPER_BN_SPACE", "HOPPER_STAGES_SPACE",
           "HOPPER_KPIPE_SPACE", "HOPPER_BK", "C_BYTES", "HOPPER_SPLIT_BARRIERS", "hopper_split_issue"]

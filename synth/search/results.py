"""What a GEMM search returns: ranked candidates, reference ranks, measurements, the whole result.

Input: none (plain frozen dataclasses). Output: :class:`SearchResult` and its
parts, plus the :data:`Progress` callback type every phase reports through.
Equality ignores the figures that differ between identical runs
(``elapsed_s``, ``solver_calls``, ``measured``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .space import Point

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``; phases: ``space``, ``model``, ``solve``, ``write``, ``measure``."""


def _silent(phase: str, done: int, total: int) -> None:
    return None


def progress_or_silent(progress: Optional[Progress]) -> Progress:
    """``progress``, or a callback that ignores every report when it is None."""
    return progress or _silent


@dataclass(frozen=True)
class Candidate:
    """One ranked configuration with its predicted performance."""

    rank: int
    config: object
    """The :class:`synth.gemm.GemmConfig` (shape, tile, warps, stages, arch)."""
    time_us: float
    """Predicted kernel time."""
    tflops: float
    smem_bytes: int
    smem_slots: int
    """Shared-memory buffers per operand (CUTLASS's and Triton's "stages")."""
    regs_per_thread: int
    """Register estimate (accumulators + fragments + addressing)."""
    ctas_per_sm: int
    occupancy_limit: str
    ctas: int
    waves: int
    wave_efficiency: float
    k_tiles: int
    ktile_cycles: Optional[int]
    """The schedule's k-tile interval (``schedule.timing.ii``) for one CTA; None if not timed."""
    ktile_bound: int
    """The model's lower bound of it (unit issue, recurrences, stage distances)."""
    round_cycles: int
    """Cycles per k-tile with all co-resident CTAs of an SM sharing it."""
    bound: str
    """What limits the prediction: tensor | latency | smem-port | l2 | dram."""
    solver_status: Optional[str]
    why: str
    terms: tuple[tuple[str, float], ...] = ()
    """The model's per-round cycles of each limiter (docs/search.md, section 3)."""
    l2_hit: float = 0.0
    latency_cycles: float = 0.0
    mix_source: str = "estimate"
    """``sass``: the instruction mix was read from the compiled kernel; ``estimate``: from the tiling."""
    instructions_per_hmma: float = 0.0
    mainloop: str = "cp_async"
    """``cp_async`` (cp.async + mma.sync, ``config`` a GemmConfig) or ``tma_wgmma`` (the Hopper main loop,
    ``config`` a :class:`~synth.hopper.problem.HopperGemm`)."""
    k_pipe_mmas: Optional[int] = None
    """wgmma groups a consumer keeps in flight before releasing a slot (``tma_wgmma`` only)."""
    split_k_tiles: int = 0
    """k-tiles of the longest split (``k_tiles`` without a split)."""
    reduction_cycles: int = 0
    """Split-K: the busiest SM's cycles of partial writes, ticket and partial reads, over all waves."""
    workspace_bytes: int = 0
    """Split-K: bytes of f32 partial tiles (``tiles x split_k x BM x BN x 4``); stream-K: ``2 x ctas x BM x BN
    x 4``; 0 otherwise."""
    partial_tiles: int = 0
    """Stream-K: tiles shared by two or more CTAs, summed from f32 partials; 0 otherwise."""
    tiles_per_cta: int = 1
    """Hopper persistent: tiles the busiest CTA walks (``ceil(tiles / ctas)``); 1 otherwise."""
    epilogue_cycles: int = 0
    """Hopper: one tile's end (the C store), not overlapped with a main loop in this kernel."""
    boundary_cycles: int = 0
    """Hopper persistent: the busiest CTA's tile-boundary cycles (docs/search.md, "Persistent tiles")."""
    prologue_cycles: int = 0
    """Hopper: one CTA's setup barriers and pipeline fill (per wave, or once per persistent CTA)."""
    cluster: str = "1x1"
    """Hopper: the thread-block cluster (``1x1``; ``2x1`` sharing B; ``1x2`` sharing A); ``1x1`` otherwise."""
    idle_ctas: int = 0
    """Hopper cluster: CTAs of the grid rounded up to whole clusters that compute no tile; 0 otherwise."""
    why_short: str = ""
    """The reason in a sentence or two (the table's ``why #1``; ``--explain`` and the JSON's ``why`` give
    :attr:`why` in full); "" when :attr:`why` is already short (the cp.async search)."""

    @property
    def split_k(self) -> int:
        """K splits of the configuration (``config.split_k``: a GemmConfig's or a HopperGemm's)."""
        return getattr(self.config, "split_k", 1)

    @property
    def stream_k(self) -> bool:
        """Whether the configuration is the stream-K kernel (``config.stream_k``; ``ctas`` is then its grid)."""
        return bool(getattr(self.config, "stream_k", False))

    @property
    def persistent(self) -> bool:
        """Whether the configuration is a persistent Hopper grid (``config.persistent``; ``ctas`` is then ``P``)."""
        return bool(getattr(self.config, "persistent", False))

    @property
    def point(self) -> Point:
        c = self.config
        return Point(c.BM, c.BN, c.BK, c.warps, c.stages, self.split_k, self.stream_k)

    @property
    def name(self) -> str:
        """The problem name (and output folder suffix) of the configuration."""
        c = self.config
        return c.name if self.mainloop == "tma_wgmma" else c.problem_name()

    @property
    def label(self) -> str:
        if self.mainloop == "tma_wgmma":
            split = f" split{self.split_k}" if self.split_k != 1 else ""
            split += " persistent" if self.persistent else ""
            split += " pingpong" if getattr(self.config, "pingpong", False) else ""
            split += " tma_store" if getattr(self.config, "epilogue", "register") == "tma_store" else ""
            split += f" cluster{self.cluster}" if self.cluster != "1x1" else ""
            return f"{self.BM}x{self.BN}x{self.BK} s{self.stages} k{self.k_pipe_mmas}{split}"
        return self.point.label

    @property
    def BM(self) -> int:
        return self.config.BM

    @property
    def BN(self) -> int:
        return self.config.BN

    @property
    def BK(self) -> int:
        return self.config.BK

    @property
    def warps(self) -> int:
        return self.config.warps

    @property
    def stages(self) -> int:
        return self.config.stages


@dataclass(frozen=True)
class ReferenceRank:
    """Where a CUTLASS/Triton reference configuration ranks in this search."""

    name: str
    """``cutlass default``, ``triton default``, ``best cutlass sm80``, ``best triton tutorial``."""
    tile: tuple[int, int, int]
    warps: int
    slots: int
    """The reference's stage count = shared-memory buffers per operand."""
    stages: Optional[int]
    """synth's pipeline depth with that many slots (None when excluded)."""
    rank: Optional[int]
    """1-based; unsolved configurations count at their lower bound, so it is a rank at worst."""
    time_us: Optional[float]
    ratio: Optional[float]
    """Predicted time / the winner's (>= 1)."""
    excluded: Optional[str]
    """Why the reference is not in the legal space (None when it is)."""
    ranked_as: Optional[tuple[int, int, int, int, int]] = None
    """When the reference itself is excluded: the legal stand-in that was ranked instead
    (same BM, BN, warps and slots, BK halved until legal) as (BM, BN, BK, warps, stages)."""
    tflops: Optional[float] = None
    """Predicted TFLOP/s of the ranked configuration."""
    k_pipe_mmas: Optional[int] = None
    """The Hopper references' ``K_PIPE_MMAS`` (None for the cp.async loop)."""


@dataclass(frozen=True)
class Measurement:
    """One candidate timed on the GPU (:func:`synth.run.measure`)."""

    label: str
    ms: float
    """Median of the timed repeats."""
    tflops: float
    ok: bool
    """The kernel's C matched numpy."""
    predicted_us: float = 0.0
    """The model's prediction for this candidate."""
    repeats: int = 0

    @property
    def model_error(self) -> float:
        """Measured time / predicted time - 1: positive when the model was optimistic (predicted faster)."""
        if self.predicted_us <= 0 or self.ms <= 0:
            return float("nan")
        return self.ms * 1e3 / self.predicted_us - 1.0


@dataclass(frozen=True)
class SearchResult:
    """The outcome of :func:`synth.search.search_gemm` for one shape."""

    M: int
    N: int
    K: int
    dtype: str
    arch: str
    candidates: tuple[Candidate, ...]
    """Best first; at most ``top``."""
    space_size: int
    feasible: int
    excluded: tuple[tuple[str, int], ...]
    """(constraint, points it excluded first), in constraint order; sums to space - feasible."""
    violations: tuple[tuple[str, int], ...]
    """(constraint, points breaking it at all): a point may break several."""
    solved: int
    """Configurations the solver scheduled for this ranking (cached or not)."""
    complete: bool
    """The candidates are the model's best: all solved, none unsolved could beat them."""
    references: tuple[ReferenceRank, ...] = ()
    notes: tuple[str, ...] = ()
    elapsed_s: float = field(default=0.0, compare=False)
    solver_calls: int = field(default=0, compare=False)
    """Solves run by this call (the rest came from the cache)."""
    measured: tuple[Measurement, ...] = field(default=(), compare=False)
    ranked_by: str = field(default="model", compare=False)
    """``model``, or ``measurement`` after :func:`synth.run.measure`."""
    mainloop: str = "cp_async"
    """The main loop searched: ``cp_async`` or ``tma_wgmma`` (sm_90's default, docs/search.md section 10)."""
    split_points: int = 0
    """Legal split-K variants (``split_k > 1``) of the feasible configurations that the model also ranked
    (not counted in ``space_size`` or ``feasible``; the Hopper search's: of the evaluated points)."""
    stream_k_points: int = 0
    """Stream-K variants (one per feasible configuration of the cp.async loop) that the model also ranked (not
    counted in ``space_size``, ``feasible`` or ``split_points``; 0 for the Hopper search)."""
    persistent_points: int = 0
    """Hopper: persistent variants (one per evaluated unsplit point) that the model also ranked; 0 otherwise."""
    cluster_points: int = 0
    """Hopper: 2x1 and 1x2 cluster variants the model also ranked (those the emitter builds); 0 otherwise."""
    warnings: tuple[str, ...] = ()
    """Predictions above the fastest published figure for the same shape on the same GPU
    (:func:`synth.search.published.beats_published`): the model claims more than anyone measured there.
    ``synth search gemm`` prints them on stderr; the JSON has them under ``warnings``."""

    @property
    def winner(self) -> Optional[Candidate]:
        return self.candidates[0] if self.candidates else None

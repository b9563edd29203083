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
(:func:`synth.model.hopper.choose` with every choice pinned: the TMA round trip hidden by the
loads in flight, the wgmma drain when ``k_pipe_mmas = 0``), and the SM-level terms are added
here: tensor cores at the wgmma rate, L2 reads, each SM's L2 ingress (which a cluster's multicast does not lower)
and DRAM traffic with the grid's rasterization
(:func:`synth.search.model.traffic`), occupancy, waves, fill, epilogue and launch. A persistent
point (``persistent=True``) runs one wave of CTAs walking the tiles: its prologue once per CTA, every
tile's epilogue, and per tile boundary the TMA round trip the epilogue does not hide (docs/search.md,
section 10, "Persistent tiles"); a persistent cluster point one wave of whole clusters, each walking cluster-sized
tile groups with the same per-tile terms (docs/search.md, section 10, "Clusters"). A ping-pong point (``pingpong=True``, ``BM = 64``) has two consumer warp groups
alternating on the persistent CTA's tiles, each one's epilogue under the other's main loop; a TMA-store point
(``epilogue="tma_store"``) stages C in shared memory (at the SM's shared-memory bandwidth, with the slot
layout's bank conflicts) and writes it asynchronously (docs/search.md, section 10, "Ping-pong and the
TMA-store epilogue"). :func:`hopper_variants` lists a point's legal variants.

Pure: every function returns the same value for the same arguments (the pipeline model's
cycles are cached per process; they do not depend on ``M`` or ``N``).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..arch import REG_ALLOC_UNIT, SMEM_RESERVED_PER_CTA
from ..hopper.kernel_design import BK, SMEM_LIMIT, Epilogue, KernelDesign
from ..hopper.problem import HopperGemm
from .model import (OUT_BYTES, OVERLAP_NORM, PARTIAL_BYTES, WaveEstimate, kernel_time, reduction, sum_waves, traffic,
                    workspace_spill)
from .space import SPLIT_SPACE, tally

HOPPER_BM_SPACE = (64, 128)
HOPPER_BN_SPACE = tuple(range(16, 257, 16))
HOPPER_STAGES_SPACE = tuple(range(1, 17))
HOPPER_KPIPE_SPACE = tuple(range(0, 16))

C_BYTES = 4
"""The Hopper kernel writes C as f32 (docs/hopper_kernel.md)."""
NAME_LIMIT = 64
"""Characters of a problem name (synth.sections.check_name)."""
HOPPER_SPLIT_BARRIERS = 2
"""CTA-level barriers of the Hopper kernel's split-K hand-off: named barrier 1 after the release fence,
and the same barrier as ``bar.red.or`` after the ticket (docs/hopper_kernel.md, "Split-K")."""
SETUP_BARRIERS = 3
"""CTA barriers outside the k-loop: after the mbarrier init (with its fence), before the
invalidation, and one for the epilogue's hand-over (docs/hopper_kernel.md, "Setup / teardown")."""


@dataclass(frozen=True, init=False, repr=False)
class HopperPoint(KernelDesign):
    """One point of the Hopper search space: a :class:`~synth.hopper.kernel_design.KernelDesign` (shape
    independent), built from the search's names (``HopperPoint(BM, BN, stages, k_pipe_mmas, split_k, persistent,
    epilogue, pingpong, cluster)``) and named the way the search's tables name it (:attr:`label`, :attr:`group`).
    It holds nothing a design does not: every knob, count and bound is the design's."""

    def __init__(self, BM: int, BN: int, stages: int, k_pipe_mmas: int, split_k: int = 1, persistent: bool = False,
                 epilogue: str = "register", pingpong: bool = False, cluster: str = "1x1", dtype: str = "f16"):
        d = KernelDesign.of(bm=BM, bn=BN, stages=stages, k_pipe_mmas=k_pipe_mmas, split_k=split_k,
                            persistent=persistent, epilogue=epilogue, pingpong=pingpong, cluster=cluster, dtype=dtype)
        d.copy_into(self)

    BM = property(lambda self: self.bm)
    BN = property(lambda self: self.bn)
    BK = property(lambda self: self.bk)

    def __repr__(self) -> str:
        return f"HopperPoint({self.label})"

    @property
    def group(self) -> tuple[int, int]:
        """(BM, BN): configurations are ranked per tile, each at its best stages, k_pipe_mmas and split."""
        return (self.BM, self.BN)

    @property
    def label(self) -> str:
        split = f" split{self.split_k}" if self.split_k != 1 else ""
        return f"{self.BM}x{self.BN}x{self.BK} s{self.stages} k{self.k_pipe_mmas}{split}" + \
            (" persistent" if self.persistent else "") + (" pingpong" if self.pingpong else "") + \
            (" tma_store" if self.epilogue == "tma_store" else "") + \
            (f" cluster{self.cluster}" if self.cluster != "1x1" else "")

    @property
    def base(self) -> "HopperPoint":
        """The point without its split, one CTA per tile, register epilogue, cooperative, no cluster."""
        return HopperPoint(self.BM, self.BN, self.stages, self.k_pipe_mmas)

    @property
    def kernel(self) -> "HopperPoint":
        """The point without its split (the kernel whose constraints the split point must meet first)."""
        return self.with_(split_k=1)

    def gemm(self, M: int = 1, N: int = 1, K: Optional[int] = None, dtype: str = "f16", name: str = "point"):
        """The :class:`~synth.hopper.problem.HopperGemm` of this point's design (stages and k_pipe_mmas pinned; ``K``
        one k-tile unless given)."""
        return HopperGemm(name, M, N, self.bk if K is None else K, self.with_(name=name, dtype=dtype).as_design())

    def problem(self, M: int, N: int, K: int, dtype: str):
        """The :class:`~synth.hopper.problem.HopperGemm` of this point (stages and k_pipe_mmas pinned; its name
        says the split, ``persistent``, ``pingpong`` and ``tma_store``)."""
        return self.gemm(M, N, K, dtype, self.problem_name(M, N, K, dtype))

    def problem_name(self, M: int, N: int, K: int, dtype: str) -> str:
        """``gemm-MxNxK-dtype-BMxBNxBK-sS-kK[-splitS][-persistent|-pingpong][-tma_store][-cluster2x1|-cluster1x2]
        -sm_90`` (ping-pong implies persistent); where that is
        longer than a problem name may be (:data:`NAME_LIMIT`; 6 fewer with the TMA store, whose store program is
        named ``<name>.store``), the variant words shortened (``split`` -> ``sp``,
        ``persistent`` -> ``pers``, ``pingpong`` -> ``pp``, ``tma_store`` -> ``tmas``, ``cluster`` -> ``c``), then
        the shape left out (the folder's problem.yaml still has it)."""
        words = ([("split", "sp", self.split_k)] if self.split_k != 1 else []) + \
            ([("persistent", "pers", "")] if self.persistent and not self.pingpong else []) + \
            ([("pingpong", "pp", "")] if self.pingpong else []) + \
            ([("tma_store", "tmas", "")] if self.epilogue == "tma_store" else []) + \
            ([("cluster", "c", self.cluster)] if self.cluster != "1x1" else [])
        tile = f"{self.BM}x{self.BN}x{self.BK}-s{self.stages}-k{self.k_pipe_mmas}"
        # a TMA-store kernel's store program is named after the problem with ".store" (synth.lower.hopper_design.design_store_program),
        # itself a program name of at most NAME_LIMIT characters
        limit = NAME_LIMIT - (len(".store") if self.epilogue == "tma_store" else 0)
        for short, shape in ((False, True), (True, True), (True, False)):
            tail = "".join(f"-{w[1] if short else w[0]}{n}" for w in words for n in [w[2]])
            name = "gemm-" + (f"{M}x{N}x{K}-" if shape else "") + f"{dtype}-{tile}{tail}-sm_90"
            if len(name) <= limit:
                break
        return name


def point_of(design: KernelDesign) -> HopperPoint:
    """The search's point of ``design`` (the same parts: nothing is copied field by field)."""
    return design.recast(HopperPoint)


# ---------------------------------------------------------------------------
# constraints


@dataclass(frozen=True)
class HopperConstraint:
    name: str
    formula: str
    """The constraint as written in docs/search.md, section 10."""
    check: Callable[[object, HopperPoint], Optional[str]]
    """None when the point satisfies it, else why not."""


@functools.lru_cache(maxsize=65536)
def _issues(p: HopperPoint, dtype: str, M: int, N: int, K: int) -> tuple:
    d = p if p.dtype == dtype else p.with_(dtype=dtype)
    return tuple(d.issues() + d.shape_issues(M, N, K))


def _rule(name: str) -> Callable[[object, HopperPoint], Optional[str]]:
    """The check of the design's rule ``name`` (:class:`~synth.hopper.kernel_design.Issue.rule`) at the context's
    shape: the design states it, the search only counts it."""
    def check(ctx, p: HopperPoint) -> Optional[str]:
        return next((i.message for i in _issues(p, ctx.dtype, ctx.M, ctx.N, ctx.K) if i.rule == name), None)
    return check


def _c_kernel(ctx, p: HopperPoint) -> Optional[str]:
    return next((i.message for i in _issues(p, ctx.dtype, ctx.M, ctx.N, ctx.K)), None)


@functools.lru_cache(maxsize=None)
def cluster_kernel_issue(design: KernelDesign) -> Optional[str]:
    """None when the sm_90a emitter builds this cluster kernel (:func:`synth.emit.sm90.kernel.emit_sm90_kernel` of
    ``design`` returns a kernel), else the emitter's reason. A design the emitter cannot build is never ranked.
    Cached per process (a few milliseconds per design)."""
    # here, not at the top: the emitter loads when a cluster kernel is checked (synth's argument parser imports the
    # search package), and emit_sm90_kernel is looked up when called (tests replace it)
    from ..emit.sm90.kernel import emit_sm90_kernel

    try:
        emit_sm90_kernel(design.as_design().with_(split_k=1, name="gemm_sm90"))
    except Exception as e:  # noqa: BLE001 -- whatever stops the emitter, the kernel is not built: never ranked
        return f"the sm_90a emitter does not build it yet ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    return None


def _c_cluster(ctx, p: HopperPoint) -> Optional[str]:
    if p.cluster == "1x1":
        return None
    r = max(hopper_occupancy(ctx.arch, p)[0], 1)
    try:
        slots = cluster_slots(ctx.arch, r, p.cluster_size)
    except ValueError as e:
        return str(e)
    if slots < 1:
        return (f"{ctx.arch.name} ({ctx.arch.sm_count} SMs of {ctx.arch.sms_per_tpc} per TPC) has no GPC slot for a "
                f"cluster of {p.cluster_size} CTAs at {r}/SM")
    return cluster_kernel_issue(p.with_(dtype=ctx.dtype))


HOPPER_CONSTRAINTS: tuple[HopperConstraint, ...] = (
    HopperConstraint("k_pipe_mmas<stages", "k_pipe_mmas < stages", _rule("k_pipe_mmas<stages")),
    HopperConstraint("tma-16B", "K % 8 == 0", _rule("tma-16B")),
    HopperConstraint("shared-memory", "stages * ((BM + BN) * 128 + 16) + staging + order + 1024 <= 232448",
                     _rule("shared-memory")),
    HopperConstraint("ping-pong", "pingpong => persistent (the tile: KernelDesign.check)", _rule("ping-pong")),
    HopperConstraint("tma-store-16B", "epilogue == tma_store => N % 4 == 0", _rule("tma-store-16B")),
    HopperConstraint("KernelDesign.check", "synth.hopper.kernel_design.KernelDesign.check() passes", _c_kernel),
    HopperConstraint("cluster-kernel", "cluster != 1x1 => emit_sm90_kernel(the design) builds it",
                     _c_cluster),
)


def enumerate_hopper_space() -> list[HopperPoint]:
    """Every point: BM in {64, 128}, BN in 16..256 step 16, stages 1..16, k_pipe_mmas 0..15 (8192).

    ``stages`` is not bounded by the k-tiles of K: the Hopper program is proven for every ``T >= 1``
    and the pipeline model counts ``min(stages - k_pipe_mmas - 1, T)`` loads in flight. A new list each call (of
    the same immutable points, built once per process)."""
    return list(_hopper_space())


@functools.lru_cache(maxsize=1)
def _hopper_space() -> tuple[HopperPoint, ...]:
    return tuple(HopperPoint(bm, bn, s, k) for bm, bn, s, k in
                 itertools.product(HOPPER_BM_SPACE, HOPPER_BN_SPACE, HOPPER_STAGES_SPACE, HOPPER_KPIPE_SPACE))


def prune_hopper(ctx, points: Sequence[HopperPoint]) -> tuple[list[HopperPoint], dict[str, int], dict[str, int]]:
    """Legal points, counts per first-broken constraint and per broken constraint.

    ``KernelDesign.check`` (the kernel's own bounds) adjudicates only the points every named
    constraint accepts, so its count shows what they miss: zero.
    """
    return tally(ctx, points, HOPPER_CONSTRAINTS, lambda fails, name: name in ("KernelDesign.check", "cluster-kernel"))


SPLIT_RULES = {"split_k": "split-k", "persistent": "persistent", "pingpong": "persistent", "epilogue": "tma-store",
               "cluster": "cluster"}
"""The name a split point's refusal gives the design's issue at each key (:class:`~synth.hopper.kernel_design.Issue`
``key``): ``split-k`` the k-tile per split (:meth:`~synth.hopper.kernel_design.KernelDesign.k_tile_issues`),
``persistent`` a persistent or ping-pong scheduler, ``tma-store`` the TMA-store epilogue and ``cluster`` a cluster
with split-K (:meth:`~synth.hopper.kernel_design.TileScheduler.issues`, :meth:`KernelDesign.issues`); the design
states each rule and its words."""


def is_legal_hopper(ctx, p: HopperPoint) -> Optional[str]:
    """None when ``p`` is legal for the context's shape, else ``constraint: why`` (a split point: the constraints
    of the point unsplit, then :func:`hopper_split_issue` and the design's first issue with the split, named by
    :data:`SPLIT_RULES`: persistent, ping-pong, the TMA store and a cluster are never split)."""
    for c in HOPPER_CONSTRAINTS:
        why = c.check(ctx, p.kernel)
        if why is not None:
            return f"{c.name}: {why}"
    if p.split_k != 1:
        why = hopper_split_issue(ctx, p)
        if why is not None:
            return f"split-k: {why}"
        issue = next(iter(_issues(p, ctx.dtype, ctx.M, ctx.N, ctx.K)), None)
        if issue is not None:
            return f"{SPLIT_RULES.get(issue.key, 'KernelDesign.check')}: {issue.message}"
    return None


def hopper_split_issue(ctx, p: HopperPoint) -> Optional[str]:
    """None when ``p.split_k`` is legal (in :data:`synth.search.space.SPLIT_SPACE`, and the design's
    :meth:`~synth.hopper.kernel_design.KernelDesign.k_tile_issues` at the context's ``K``: a k-tile per split; the
    Hopper program is proven for every trip count, so a split needs no more, not the stages), else why not."""
    if p.split_k not in SPLIT_SPACE:
        return f"split_k = {p.split_k} is not one of {SPLIT_SPACE}"
    return next((i.message for i in p.k_tile_issues(ctx.K)), None)


def fit_stages(p: HopperPoint) -> Optional[HopperPoint]:
    """``p`` with the most stages, at most its own, whose shared memory fits sm_90 (the TMA-store staging slots and
    ping-pong's order barriers take room from the ring), ``k_pipe_mmas`` lowered below them if needed; None when
    not even one stage fits. The pipeline model's per-k-tile cycles never grow with the stages, so this is the
    variant's best depth at the base point's ``k_pipe_mmas``."""
    q = p
    while q.stages >= 1 and q.smem_bytes > SMEM_LIMIT:
        q = q.with_(stages=q.stages - 1, k_pipe_mmas=min(q.k_pipe_mmas, q.stages - 2))
    return q if q.stages >= 1 and q.k_pipe_mmas >= 0 else None


VARIANTS: tuple[tuple[bool, bool, str, str], ...] = (
    (False, False, "register", "1x1"), (True, False, "register", "1x1"), (True, False, "tma_store", "1x1"),
    (False, False, "tma_store", "1x1"), (True, True, "register", "1x1"), (True, True, "tma_store", "1x1"),
    (False, False, "register", "2x1"), (False, False, "register", "1x2"), (False, False, "tma_store", "2x1"),
    (False, False, "tma_store", "1x2"), (True, False, "register", "2x1"), (True, False, "register", "1x2"),
    (True, False, "tma_store", "2x1"), (True, False, "tma_store", "1x2"))
"""``(persistent, pingpong, epilogue, cluster)`` of the variants ranked for every evaluated point: one CTA per tile,
persistent, persistent + TMA store, one CTA per tile + TMA store, ping-pong and ping-pong + TMA store, the 2x1
and 1x2 clusters (one CTA per tile, either epilogue) and the persistent 2x1 and 1x2 clusters (either epilogue), each
where the kernel builds it (docs/search.md, section 10)."""


def design_variant(ctx, p: HopperPoint, persistent: bool, pingpong: bool, epilogue: str, cluster: str,
                   auto: bool = True) -> Optional[HopperPoint]:
    """``p``'s tile (and split) with the design ``(persistent, pingpong, epilogue, cluster)``: with ``auto``, at the
    stages and ``K_PIPE_MMAS`` ``synth solve`` chooses for that design (:func:`auto_choice`, the design's own
    pipeline input: its staging slots, order barriers and cluster); without, at ``p``'s pins (:func:`fit_stages`:
    the most of its stages that fit). None when no pipeline fits."""
    q = p.with_(persistent=persistent, pingpong=pingpong, epilogue=epilogue, cluster=cluster)
    return auto_choice(ctx, q) if auto else fit_stages(q)


def hopper_variants(ctx, p: HopperPoint, auto: bool = False) -> list[HopperPoint]:
    """The legal variants of the unsplit point ``p`` (:data:`VARIANTS`), ``p``'s own configuration (its base) first.
    ``auto``: ``p`` is its tile's ``stages: auto`` point (:func:`auto_point`) and each variant gets its own design's
    choice (:func:`design_variant`), exactly what ``synth solve`` builds for that design with ``stages: auto`` and
    ``k_pipe_mmas: auto``; otherwise each keeps ``p``'s ``k_pipe_mmas`` and the most of its stages that fit
    (:func:`fit_stages`). A variant the shape or the tile rules out (a ping-pong tile the kernel does not build, a TMA
    store with ``N % 4 != 0``, a cluster the emitter does not build) is left out; :func:`is_legal_hopper` says why."""
    out: list[HopperPoint] = []
    for persistent, pingpong, epilogue, cluster in VARIANTS:
        q = design_variant(ctx, p.base, persistent, pingpong, epilogue, cluster, auto)
        if q is not None and q not in out and is_legal_hopper(ctx, q) is None:
            out.append(q)
    return out


# ---------------------------------------------------------------------------
# one CTA's k-loop: the Hopper pipeline model


@dataclass(frozen=True)
class Pipeline:
    """One CTA's k-tile loop alone, as :func:`synth.model.hopper.loop_cost` predicts it (the objective
    :func:`synth.model.hopper.choose` minimizes, for one pinned choice)."""

    fill: int
    """Cycles before the first k-tile's data has landed (one TMA round trip)."""
    per_tile: float
    """Cycles per k-tile at the shape's ``T`` (the TMA round trip over the loads in flight, or the wgmma
    time with its drain, whichever is longer; everything serial when no load can be in flight)."""
    cycles: int
    """``fill + T * per_tile``: the model's total for ``T`` k-tiles."""
    status: str = "OPTIMAL"
    """The cost of one fully pinned choice is exact (kept for the JSON's ``solver_status``)."""


CHOICE_T = 16
"""Trip counts from which the pipeline model's choice no longer changes: its candidates share the fill, and with
``T >= 15`` every one has its ``stages - k_pipe_mmas - 1 <= 15`` loads in flight, so the cycles ``fill + T
per_tile`` order them as ``per_tile`` does (:func:`synth.model.hopper.loop_cost`). Choices are cached per
``min(T, CHOICE_T)``; the cost of a point is computed at its own ``T``."""


def point_input(p: HopperPoint, T: int, dtype: str):
    """The pipeline model's input (:func:`synth.model.hopper.pipeline_input`, the function ``synth solve`` prices a
    design with) of ``p``'s design for one CTA's loop of ``T`` k-tiles: the :class:`~synth.hopper.problem.HopperGemm`
    of the point, unsplit, with ``K = T x 64`` (``M`` and ``N`` do not enter it)."""
    # synth.model loads OR-Tools: here, as synth's argument parser and synth run import the search package
    from ..model.hopper import pipeline_input

    g = p.with_(split_k=1).gemm(1, 1, max(T, 1) * BK, dtype)
    return pipeline_input(g.with_(stages=None, k_pipe_mmas=None))


@functools.lru_cache(maxsize=None)
def _cost(inp, stages: int, k_pipe: int) -> Pipeline:
    c = inp.cost(stages, k_pipe)
    return Pipeline(c.fill, float(c.per_tile), c.cycles)


def point_pipeline(p: HopperPoint, T: int, dtype: str) -> Pipeline:
    """One CTA's k-loop of ``p`` (its pinned stages and ``k_pipe_mmas``) over ``T`` k-tiles: the pipeline model's
    cost on the design's input (:func:`point_input`), cached per process."""
    return _cost(point_input(p, T, dtype), p.stages, p.k_pipe_mmas)


def pipeline(dtype: str, BM: int, BN: int, stages: int, k_pipe: int, T: int, consumers: int = 0,
             cluster: int = 1) -> Pipeline:
    """The pipeline model's cycles of ``T`` k-tiles, split into fill and per-tile cycles
    (warp-specialized, ``consumers`` warp groups reading each slot: 0 stands for ``BM / 64``, the cooperative
    kernel; 1 with ``BM = 128`` is ping-pong, as the kernel is built; ``cluster`` CTAs per cluster, 1 or 2):
    :func:`point_pipeline` of that design."""
    pp = consumers == 1 and BM > 64
    p = HopperPoint(BM, BN, stages, k_pipe, persistent=pp, pingpong=pp, cluster="2x1" if cluster > 1 else "1x1")
    return point_pipeline(p, T, dtype)


@functools.lru_cache(maxsize=None)
def _choice(inp) -> tuple[int, int]:
    c = inp.choose()
    return c.stages, c.k_pipe_mmas


def auto_choice(ctx, p: HopperPoint) -> Optional[HopperPoint]:
    """``p`` at the ``stages`` and ``k_pipe_mmas`` ``synth solve`` chooses for its design on the context's shape with
    ``stages: auto`` and ``k_pipe_mmas: auto``: CP-SAT (:func:`synth.model.hopper.choose`) on the design's
    :func:`synth.model.hopper.pipeline_input` (one split's ``floor(T / split_k)`` k-tiles, the consumers per slot,
    the cluster, the shared memory its staging slots and order barriers take), cached per design and
    ``min(T, CHOICE_T)``. None when no pipeline fits."""
    # synth.model loads OR-Tools: here, as synth's argument parser and synth run import the search package
    from ..model.hopper import pipeline_input

    g = p.gemm(ctx.M, ctx.N, ctx.K, ctx.dtype).with_(stages=None, k_pipe_mmas=None)
    T = min(pipeline_input(g).trip_count, CHOICE_T)
    try:
        s, k = _choice(point_input(p.with_(split_k=1), T, ctx.dtype))
    except ValueError:
        return None
    return p.with_(stages=s, k_pipe_mmas=k)


def auto_point(ctx, BM: int, BN: int) -> Optional[HopperPoint]:
    """The point ``synth solve`` builds for the tile with ``stages: auto`` and ``k_pipe_mmas: auto`` (one CTA per
    tile, register epilogue, no cluster): :func:`auto_choice` (least k-loop cycles, then least shared memory).
    None when no pipeline of the tile fits."""
    return auto_choice(ctx, HopperPoint(BM, BN, 1, 0))


def clear_hopper_cache() -> None:
    """Forget the cached pipeline-model cycles and choices (tests)."""
    _cost.cache_clear()
    _choice.cache_clear()


def pipeline_evaluations() -> int:
    """CP-SAT calls of the pipeline model run by this process so far (one per design input and ``min(T,
    CHOICE_T)``, for the ``stages: auto`` choices; a pinned point's cost is evaluated directly)."""
    return _choice.cache_info().misses


# ---------------------------------------------------------------------------
# the SM and the grid


def launch_registers(arch, threads: int) -> int:
    """Registers per thread at launch: ``__launch_bounds__(threads, 1)`` lets ptxas take the whole register
    file (``setmaxnreg`` then moves them from the producer to the consumers), in whole units of 8."""
    return min(arch.max_registers_per_thread, arch.registers_per_sm // threads) // 8 * 8


def cluster_slots(arch, ctas_per_sm: int, size: int) -> int:
    """Clusters of ``size`` CTAs resident at once (one wave) at ``ctas_per_sm`` CTAs per SM. A cluster's CTAs are
    co-scheduled on one GPC; SMs are enabled in whole TPCs of ``arch.sms_per_tpc`` SMs (synth/arch.py), so for
    ``size`` dividing ``sms_per_tpc x ctas_per_sm`` every GPC holds whole clusters and every CTA slot is used:
    ``sm_count x ctas_per_sm / size``. ValueError for a cluster the TPC figure does not place (none is built)."""
    if size == 1:
        return arch.sm_count * ctas_per_sm
    per_tpc = arch.sms_per_tpc * ctas_per_sm
    if arch.sms_per_tpc <= 0 or per_tpc % size:
        raise ValueError(f"clusters of {size} CTAs at {ctas_per_sm}/SM on {arch.name}: no exact placement figure "
                         "(synth/arch.py, sms_per_tpc)")
    return arch.sm_count // arch.sms_per_tpc * (per_tpc // size)


def hopper_occupancy(arch, p: HopperPoint) -> tuple[int, str]:
    """CTAs per SM and what limits it (``registers`` for every point of this kernel)."""
    threads = 32 * p.warps
    regs_warp = math.ceil(launch_registers(arch, threads) * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    limits = [
        (arch.registers_per_sm // (regs_warp * p.warps), "registers"),
        (arch.smem_per_sm // (p.smem_bytes + SMEM_RESERVED_PER_CTA), "smem"),
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
    tiles_per_cta: int = 1
    """Tiles the busiest CTA computes: ``ceil(tiles / P)`` when persistent, 1 otherwise."""
    epilogue_cycles: int = 0
    """One tile's C store on the consumers' path: the register store's latency and bytes at the SM's L2 share, or the
    TMA store's staging writes and barriers (:func:`epilogue_cost`)."""
    boundary_cycles: int = 0
    """Persistent: the busiest CTA's tile-boundary cost, ``(tiles_per_cta - 1) x max(0, fill - epilogue)`` (the
    next tile's first TMA round trip the epilogue does not hide; plus TMA-store writes longer than a main loop);
    ping-pong: ``(tiles_per_cta - 1) x`` (a tile's step beyond its main loop: the order handoff, or half the
    epilogue's excess over the main loop)."""
    prologue_cycles: int = 0
    """One CTA's start: its setup barriers and the pipeline fill (paid per wave without persistence, once per
    CTA with it)."""
    loop_per_tile_cycles: int = 0
    """One tile's main loop on the busiest SM (``T x round``)."""
    staging_cycles: int = 0
    """TMA store: one tile's staging writes at the SM's shared-memory bandwidth (bank conflicts included)."""
    store_cycles: int = 0
    """TMA store: one tile's C writes by the TMA unit (``lat_global`` + bytes at the SM's L2 share), asynchronous."""
    hidden_cycles: int = 0
    """Epilogue cycles the busiest SM does not wait for: TMA-store writes behind the next main loop (or wave), and
    ping-pong epilogues behind the other warp group's main loop."""
    drain_cycles: int = 0
    """TMA store: the last tile's (or wave's) writes, landed before the kernel ends."""
    idle_ctas: int = 0
    """CTAs of the launched grid that compute no tile: the grid is rounded up to whole clusters along the cluster's
    axis (a 2x1 cluster over an odd count of tile rows adds one CTA per tile column); they still run the whole
    protocol on zero-filled loads and take a CTA slot. Persistent cluster: the tiles of the cluster-sized tile
    groups that lie outside C (computed on zero-filled loads by a CTA of the group's cluster)."""
    l2_ktile_bytes: int = 0
    """Bytes one CTA reads from L2 per k-tile: its A and B boxes, the shared operand's half only in a cluster (the
    other half arrives by the peer's multicast)."""
    cluster_sync_cycles: int = 0
    """A cluster CTA's two cluster barriers (after the barrier init, before exit), each a remote round of
    ``lat_remote_arrive``; 0 without a cluster."""
    design: Optional[KernelDesign] = None
    """The design estimated (its scheduler, consumers, epilogue and cluster are what the terms above price)."""

    persistent = property(lambda self: self.design.persistent, doc="A persistent grid: ``ctas`` is ``P``.")
    epilogue = property(lambda self: self.design.epilogue, doc="``register`` or ``tma_store``.")
    pingpong = property(lambda self: self.design.pingpong,
                        doc="Two consumer warp groups alternate on the persistent CTA's tiles.")
    cluster = property(lambda self: self.design.cluster, doc="The thread-block cluster (``1x1``, ``2x1``, ``1x2``).")


def staging_wavefronts(BN: int) -> int:
    """Shared-memory wavefronts of one warp's ``st.shared.v2.f32`` into a staging slot (docs/search.md, section 10,
    "The epilogues"): lane ``l`` writes row ``l / 4`` (plus 16 per warp and 8 per half), columns ``2 (l % 4)`` and
    ``2 (l % 4) + 1`` (plus 8 per step) of a row-major ``64 x W`` f32 slot, as the kernel emits it
    (docs/hopper_store.md). A wavefront serves one 4-byte word per bank (32 banks), so the count is the most
    distinct words one bank receives: 8 for ``W = 32`` (rows 128 bytes apart share their banks), 4 for
    ``W = 16``, against 2 for a conflict-free 256-byte access."""
    W = Epilogue.store_cols(BN)
    words: dict[int, set[int]] = {}
    for lane in range(32):
        for j in (0, 1):
            w = (lane // 4) * W + 2 * (lane % 4) + j
            words.setdefault(w % 32, set()).add(w)
    return max(len(v) for v in words.values())


@dataclass(frozen=True)
class EpilogueCost:
    """One tile's C store by the busiest SM's ``stores`` CTAs (docs/search.md, section 10, "The epilogues")."""

    critical: float
    """Cycles the consumers spend on it after the tile's main loop: the register store's latency and bytes at the
    SM's L2 share, or the TMA store's staging writes and named barriers."""
    write: float = 0.0
    """TMA store: the C bytes written by the TMA unit, ``lat_global`` plus the bytes at the SM's L2 share
    (asynchronous: after ``critical``, overlapping what follows); 0 for the register store (in ``critical``)."""
    tail: float = 0.0
    """TMA store: the last sub-tiles' shared-memory reads a CTA waits for (``wait_group.read 0``) before it exits."""
    staging: float = 0.0
    """TMA store: the staging writes at the SM's shared-memory bandwidth, with the slot layout's bank conflicts."""
    barriers: float = 0.0
    """TMA store: two named barriers per sub-tile (``free`` and ``publish``)."""


def epilogue_cost(arch, p: HopperPoint, stores: float) -> EpilogueCost:
    """The C store of one ``BM x BN`` f32 tile by ``stores`` CTAs of one SM (cooperative: its warp groups store their
    64 rows side by side; ping-pong: one warp group stores the whole tile, ``BM / 64`` row blocks of sub-tiles)."""
    c_bytes = stores * p.BM * p.BN * C_BYTES
    l2_per_sm = arch.l2_bytes_per_clk / arch.sm_count
    through_l2 = arch.lat_global + c_bytes / l2_per_sm
    if p.epilogue != "tma_store":
        return EpilogueCost(critical=through_l2)
    W = p.store_cols
    ideal = max(1, -(-32 * 8 // arch.smem_bytes_per_clk))  # a warp's 256 bytes without a conflict
    staging = c_bytes / arch.smem_bytes_per_clk * staging_wavefronts(p.BN) / ideal
    blocks = p.row_blocks  # 64-row blocks one warp group stores
    barriers = 2 * blocks * (p.BN // W) * arch.barrier_cycles  # cooperative warp groups run theirs side by side
    tail = stores * p.ring_consumers * 64 * W * C_BYTES / arch.tma_bytes_per_clk  # the warp groups storing a tile
    return EpilogueCost(critical=staging + barriers, write=through_l2, tail=tail, staging=staging, barriers=barriers)


def l2_ktile_bytes(p: HopperPoint) -> int:
    """Bytes one CTA of ``p`` reads from L2 per k-tile: ``(BM + BN) 64 x 2``, with the shared operand's tile
    counted half in a cluster (each CTA of the pair loads half of it, multicast into both: the tile is read from L2
    once per cluster instead of once per CTA)."""
    a, b = p.a_slot_bytes, p.b_slot_bytes
    share = p.shared_operand
    return (a // p.cluster_size if share == "A" else a) + (b // p.cluster_size if share == "B" else b)


def ingress_ktile_bytes(p: HopperPoint) -> int:
    """Bytes landing in one CTA's shared memory per k-tile: its whole A and B tiles, ``(BM + BN) 64 x 2``, with or
    without a cluster (a multicast copy lands whole in every CTA of the cluster: it saves L2 reads, not what each SM
    receives)."""
    return p.a_slot_bytes + p.b_slot_bytes


def round_terms_hopper(arch, p: HopperPoint, k: int, pipe: Pipeline, l2_hit: float,
                       store_bytes: float = 0.0) -> dict[str, float]:
    """Per-round cycles of every term for ``k`` co-resident CTAs each advancing one k-tile; ``store_bytes``: C bytes
    per CTA and round that asynchronous TMA stores write through L2 meanwhile (they share its bandwidth). The L2
    term counts the bytes a CTA reads from L2 (:func:`l2_ktile_bytes`: a cluster's shared operand once per
    cluster) at the SM's share of the L2 slices' bandwidth; the ingress term the bytes that land in its shared
    memory (:func:`ingress_ktile_bytes`, unchanged by multicast) at the SM's own port
    (``arch.l2_ingress_bytes_per_clk_sm``, else the same share); the DRAM term the part of the L2 reads that
    misses L2 (``l2_hit`` of the grid's rasterization, over cluster-sized tile blocks for a cluster)."""
    mma = 2 * p.BM * p.BN * p.BK / arch.tensor_f16_f32_flop_per_clk_sm
    dram_per_sm = arch.dram_gb_s * 1e9 * arch.dram_efficiency / (arch.clock_ghz * 1e9) / arch.sm_count
    share = arch.l2_bytes_per_clk / arch.sm_count
    port = arch.l2_ingress_bytes_per_clk_sm or share
    return {"tensor": k * mma, "l2": k * (l2_ktile_bytes(p) + store_bytes) / share,
            "ingress": k * ingress_ktile_bytes(p) / port,
            "dram": k * l2_ktile_bytes(p) * (1.0 - l2_hit) / dram_per_sm, "pipeline": pipe.per_tile,
            "fill": float(pipe.fill)}


def combine_hopper(t: dict[str, float]) -> tuple[float, str]:
    """``(round cycles, binding term)``: the throughput limits overlap as in the sm_80 model (an L4 norm,
    :data:`synth.search.model.OVERLAP_NORM`); one CTA's own pipeline is a floor (its latency overlaps
    the other CTAs' work, not its own). The L2 path is the slower of its two stages in series, the slices' reads
    (``l2``) and the SM's ingress (``ingress``), and binds as ``l2``."""
    limits = (("tensor", t["tensor"]), ("l2", max(t["l2"], t.get("ingress", 0.0))), ("dram", t["dram"]))
    name, top = max(limits, key=lambda x: x[1])
    busy = sum(v ** OVERLAP_NORM for _, v in limits) ** (1.0 / OVERLAP_NORM) if top > 0 else 0.0
    if t["pipeline"] > busy:
        return t["pipeline"], "latency"
    return busy, name


def estimate_hopper(ctx, p: HopperPoint) -> HopperEstimate:
    """Predicted kernel time of ``p`` on the context's shape (docs/search.md, section 10); a split point
    (``split_k = S > 1``) runs ``tiles x S`` CTAs of at most ``ceil(T / S)`` k-tiles and pays the sm_80
    model's reduction per wave (:func:`synth.search.model.reduction`, with the kernel's two barriers); a
    persistent point one wave of CTAs walking the tiles, a ping-pong point two consumer warp groups alternating
    on them; a TMA-store point the staging of C on the consumers' path and its writes overlapped."""
    arch = ctx.arch
    M, N, K = ctx.M, ctx.N, ctx.K
    T = -(-K // p.BK)
    S = p.split_k
    Ts = -(-T // S)
    tma = p.epilogue == "tma_store"
    cs = p.cluster_size
    pipe = point_pipeline(p, Ts, ctx.dtype)
    tm, tn = -(-M // p.BM), -(-N // p.BN)
    tiles = tm * tn
    # a cluster's grid is rounded up to whole clusters along its axis; the extra CTAs run on zero-filled loads
    ctas = -(-tm // p.cluster_m) * p.cluster_m * -(-tn // p.cluster_n) * p.cluster_n * S
    r, limit = hopper_occupancy(arch, p)
    r = max(r, 1)
    per_wave = cluster_slots(arch, r, cs) * cs  # waves counted in clusters, each co-scheduled on one GPC
    full, rem = divmod(ctas, per_wave)
    idle = ctas - tiles * S
    # a cluster's CTAs read their block of cluster_m x cluster_n tiles as one tile (the shared operand once), and the
    # clusters walk those blocks in the grouped raster order (synth.emit.raster.cluster_tile_of)
    tr = traffic(arch, M, N, K, p.BM * p.cluster_m, p.BN * p.cluster_n, max(1, per_wave // S // cs))
    w_spill, r_spill, ws_dram = workspace_spill(arch, tiles, S, p.BM, p.BN, per_wave)
    dram_bytes = tr.dram_bytes + M * N * (C_BYTES - OUT_BYTES) + ws_dram
    sms = min(arch.sm_count, ctas)
    store_bytes = p.BM * p.BN * C_BYTES / Ts if tma else 0.0
    reduced: dict[int, float] = {}
    epis: dict[int, EpilogueCost] = {}

    syncs = 2 * arch.lat_remote_arrive if cs > 1 else 0  # the cluster barriers after init and before exit

    def wave(k: int):
        t = round_terms_hopper(arch, p, k, pipe, tr.l2_hit, store_bytes)
        rc, what = combine_hopper(t)
        setup = SETUP_BARRIERS * arch.barrier_cycles + syncs
        red = reduction(arch, p.BM, p.BN, S, k, sms, w_spill, r_spill, barriers=HOPPER_SPLIT_BARRIERS)
        reduced[k] = red["write"] + red["handoff"] + red["read"]
        epis[k] = ep = epilogue_cost(arch, p, red["lasts"])
        # a CTA of one tile leaves after its store: the register store's bytes, or the TMA store's staging and
        # its last sub-tiles' shared-memory reads (the writes land while the next wave runs)
        return Ts * rc, setup + pipe.fill + reduced[k] + ep.critical + ep.tail, what, rc, t

    prologue = SETUP_BARRIERS * arch.barrier_cycles + syncs + pipe.fill
    hidden = drain = 0.0
    if p.persistent:
        # P CTAs in whole clusters (one wave: per_wave is whole clusters), at most one cluster per cluster-sized
        # tile group; each cluster walks groups q, q + Q, ... (a group is one tile without a cluster), so the tail
        # is counted in groups, as synth.emit.launch.persistent_ctas launches it
        groups = ctas // (cs * S)
        Q = max(1, min(groups, per_wave // cs))
        P = Q * cs
        k_act = -(-P // arch.sm_count)
        n = -(-groups // Q)
        lw, _, bound, round_c, terms = wave(k_act)  # lw: one tile's main loop
        ep = epis[k_act]
        E = ep.critical
        if tma:  # the last tile's stores land before the kernel ends; the others' writes overlap the next main loop
            drain = ep.write
            exposed = max(0.0, ep.write - lw)
            hidden = (n - 1) * (ep.write - exposed)
        else:
            exposed = 0.0
        if p.pingpong:
            # tile i + 1's main loop starts when tile i's ends and the order barrier hands over (one barrier); tile
            # i + 2's warp group must have stored tile i first: each warp group runs a main loop and an epilogue
            # every two tiles, so a tile costs max(ML + handoff, (ML + E) / 2); the last epilogue in full; no tile
            # boundary (the producer runs ahead across tiles)
            step = max(lw + arch.barrier_cycles, (lw + E + exposed) / 2)
            boundary = step - lw
            hidden += (n - 1) * max(0.0, E - boundary)
            loop_cyc = n * lw
            fixed_cyc = prologue + (n - 1) * boundary + E + drain
        else:
            # P CTAs (one wave), the busiest walks ceil(tiles / P) tiles back to back: setup and fill once, every
            # tile's epilogue on the consumers' path, and per tile boundary the part of the next tile's first TMA
            # round trip that the producer's prefetch (stages - K_PIPE_MMAS free slots) during the epilogue does
            # not hide (and, with the TMA store, the writes the next main loop does not cover)
            boundary = max(0.0, pipe.fill - E) + exposed
            loop_cyc, fixed_cyc = n * lw, prologue + n * E + (n - 1) * boundary + drain
        k_bind = k_act
        red_total, waves, ctas, full, rem = 0.0, 1, P, 1, 0
    else:
        n, boundary = 1, 0.0
        loop_cyc, fixed_cyc, bound, round_c, k_bind, terms = sum_waves(full, rem, arch.sm_count, r, wave,
                                                                       pipe.per_tile)
        red_total = (full * reduced[r] if full else 0.0) + (reduced[-(-rem // arch.sm_count)] if rem else 0.0)
        waves = full + (1 if rem else 0)
        if tma:  # the last wave's writes land before the kernel ends; the earlier waves' overlap the next wave
            last = epis[-(-rem // arch.sm_count)] if rem else epis[r]
            drain = max(0.0, last.write - last.tail)
            hidden = (waves - 1) * max(0.0, epis[r].write - epis[r].tail)
            fixed_cyc += drain
    time_us, compute_us, dram_us = kernel_time(arch, loop_cyc + fixed_cyc, dram_bytes)
    bound = "dram" if dram_us > compute_us else bound
    wl, wf, _, _, _ = wave(r)
    lw = lw if p.persistent else wl
    ep_r = epis[k_bind] if k_bind in epis else epis[r]
    shown = ("tensor", "l2", "ingress", "dram", "pipeline", "fill")
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
        tiles_per_cta=n, epilogue_cycles=int(round(ep_r.critical)),
        boundary_cycles=int(round((n - 1) * boundary)), prologue_cycles=int(round(prologue)),
        loop_per_tile_cycles=int(round(lw)),
        staging_cycles=int(round(ep_r.staging)), store_cycles=int(round(ep_r.write)),
        hidden_cycles=int(round(hidden)), drain_cycles=int(round(drain)), design=p.as_design(),
        idle_ctas=idle, l2_ktile_bytes=l2_ktile_bytes(p), cluster_sync_cycles=syncs)


__all__ = ["HopperPoint", "HopperConstraint", "HOPPER_CONSTRAINTS", "HopperEstimate", "Pipeline",
           "enumerate_hopper_space", "prune_hopper", "is_legal_hopper", "pipeline", "hopper_occupancy",
           "launch_registers", "estimate_hopper", "auto_point", "auto_choice", "design_variant", "point_input",
           "point_pipeline", "CHOICE_T", "round_terms_hopper", "combine_hopper",
           "clear_hopper_cache", "pipeline_evaluations", "VARIANTS", "hopper_variants", "fit_stages", "point_of", "EpilogueCost",
           "epilogue_cost", "staging_wavefronts", "cluster_slots", "cluster_kernel_issue", "l2_ktile_bytes",
           "ingress_ktile_bytes",
           "NAME_LIMIT", "HOPPER_BM_SPACE", "HOPPER_BN_SPACE", "HOPPER_STAGES_SPACE",
           "HOPPER_KPIPE_SPACE", "C_BYTES", "HOPPER_SPLIT_BARRIERS", "hopper_split_issue", "SPLIT_RULES"]

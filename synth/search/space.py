"""The configuration space of the GEMM search and the named legality constraints.

Input: a shape ``M x N x K``, a dtype and an arch name (:func:`make_context`
checks them). Output: the points of the space (:func:`enumerate_space`, a fixed
order), and for a shape the legal ones with how many points each constraint
excluded (:func:`prune`) or why one point is illegal (:func:`is_legal`), and each
legal point's split-K variants (:func:`split_points`, :data:`SPLIT_SPACE`).

Every function here is pure (the per-point slots/registers lookup is cached):
nothing is scheduled or timed.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..arch import ARCHS, ArchSpec, REG_ALLOC_UNIT, get_arch
from ..bounds import MAX_GEMM_DIM, MAX_SPLIT_K
from ..errors import SynthError
from ..gemm import DTYPES, GemmConfig, register_estimate, smem_slots, stage_pins, validate, warp_layout

BM_SPACE = (16, 32, 64, 128, 256)
BN_SPACE = (16, 32, 64, 128, 256)
BK_SPACE = (16, 32, 64, 128)
WARPS_SPACE = (1, 2, 4, 8)
STAGES_SPACE = tuple(range(1, 12))
SPLIT_SPACE = (1, 2, 3, 4, 6, 8, 12, 16)
"""K splits tried for each legal configuration (``split_k``, docs/search.md section 3, "Split-K"): the
divisors-friendly counts CUTLASS's split-K examples and Triton's ``SPLIT_K`` use, up to 16 (a split of
fewer k-tiles than the stages is illegal anyway; :data:`synth.bounds.MAX_SPLIT_K` is 64)."""
T_REF = 64
"""Solve k-loops of more than ``T_REF`` k-tiles at ``T_REF``: the interval does not
depend on the trip count, and ``cycles = (T - 1) ii + tail`` extrapolates."""


@dataclass(frozen=True)
class Point:
    """One point of the search space (shape independent)."""

    BM: int
    BN: int
    BK: int
    warps: int
    stages: int
    split_k: int = 1
    """K splits (``gridDim.z``); 1: no split. A split runs the same pipelined loop (same schedule,
    resources and SASS) over fewer k-tiles, so those are looked up by :attr:`base`."""
    stream_k: bool = False
    """Stream-K (docs/search.md section 3, "Stream-K"; excludes ``split_k > 1``): one wave of CTAs sharing
    the k-tiles of all tiles, each running the same pipelined loop over its segments (looked up by :attr:`base`)."""

    @property
    def label(self) -> str:
        split = f" split{self.split_k}" if self.split_k != 1 else (" stream-K" if self.stream_k else "")
        return f"{self.BM}x{self.BN}x{self.BK} w{self.warps} s{self.stages}{split}"

    @property
    def base(self) -> "Point":
        """The point without its split or stream-K: what is scheduled, timed and compiled."""
        if self.split_k == 1 and not self.stream_k:
            return self
        return Point(self.BM, self.BN, self.BK, self.warps, self.stages)

    @property
    def group(self) -> tuple[int, int, int, int]:
        """(BM, BN, BK, warps): configurations are ranked per group, each at its best stage count and split."""
        return (self.BM, self.BN, self.BK, self.warps)

    def config(self, M: int, N: int, K: int, dtype: str, arch: str):
        """The :class:`synth.gemm.GemmConfig` of this point for a shape."""
        return GemmConfig(M, N, K, dtype, self.BM, self.BN, self.BK, self.warps, self.stages, arch,
                          split_k=self.split_k, stream_k=self.stream_k)

    def loop_config(self, k_tiles: int, dtype: str, arch: str):
        """The config of one CTA's tile running a k-loop of ``k_tiles`` k-tiles (``M = BM``, ``N = BN``,
        no split)."""
        return self.base.config(self.BM, self.BN, k_tiles * self.BK, dtype, arch)


@dataclass(frozen=True)
class Context:
    """A checked shape, dtype and arch (see :func:`make_context`)."""

    M: int
    N: int
    K: int
    dtype: str
    arch: object
    """:class:`synth.arch.ArchSpec`."""
    elem: int = 2


def make_context(M: int, N: int, K: int, dtype: str, arch) -> Context:
    """The :class:`Context` of a search; raises :class:`SynthError` on a bad size, dtype or arch.

    ``arch``: a name of :data:`synth.arch.ARCHS`, or an :class:`~synth.arch.ArchSpec` (a known
    arch with other clock or launch figures, as the calibration against published timings uses).
    """
    for name, v in (("M", M), ("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SynthError(None, f"{name} = {v!r} is not a positive integer", f"pass --{name} 4096")
        if v > MAX_GEMM_DIM:
            raise SynthError(None, f"{name} = {v} is above the maximum {MAX_GEMM_DIM}",
                             f"pass --{name} in 1 .. {MAX_GEMM_DIM} (docs/bounds.md)")
    if dtype not in DTYPES:
        raise SynthError(None, f"dtype {dtype!r} is not supported by the GEMM expansion",
                         f"use --dtype {' or '.join(DTYPES)}")
    try:
        spec = arch if isinstance(arch, ArchSpec) and arch.name in ARCHS else get_arch(arch)
    except (KeyError, TypeError):
        raise SynthError(None, f"unknown arch {arch!r}", f"use --arch {' | '.join(ARCHS)}") from None
    return Context(M, N, K, dtype, spec, 2)


# ---------------------------------------------------------------------------
# constraints: each returns None when the point satisfies it, else why not


@dataclass(frozen=True)
class Constraint:
    name: str
    formula: str
    """The constraint as written in docs/search.md."""
    check: Callable[[Context, Point], Optional[str]]
    """None when the point satisfies it, else why not."""


@functools.lru_cache(maxsize=None)
def slots_regs(p: Point) -> tuple[int, int]:
    """(shared slots, registers per thread) of ``p``'s pinned stages (shape and arch independent)."""
    cfg = p.loop_config(T_REF, "f16", "sm_80")
    return smem_slots(stage_pins(cfg)), register_estimate(cfg)


def _c_mma(ctx: Context, p: Point) -> Optional[str]:
    if p.BM % 16 or p.BN % 16 or p.BK % 16 or p.BK & (p.BK - 1):
        return f"{p.BM}x{p.BN}x{p.BK} is not made of m16n8k16 mma / 16-row ldmatrix.x4 steps"
    return None


def _c_warps(ctx: Context, p: Point) -> Optional[str]:
    if warp_layout(p.warps, p.BM, p.BN) is None:
        return f"{p.warps} warps cannot split {p.BM}x{p.BN} into warp tiles that are multiples of 16x16"
    return None


def _c_cp_async(ctx: Context, p: Point) -> Optional[str]:
    if ctx.K % (16 // ctx.elem):
        return f"K = {ctx.K} rows are not 16-byte aligned for cp.async"
    chunk = 32 * p.warps * 16
    for op, rows in (("A", p.BM), ("B", p.BN)):
        if rows * p.BK * ctx.elem % chunk:
            return (f"the {rows}x{p.BK} {op} tile is not a whole number of 16-byte cp.async per thread "
                    f"for {32 * p.warps} threads")
    return None


def _c_ktiles(ctx: Context, p: Point) -> Optional[str]:
    T = -(-ctx.K // p.BK)
    if p.stages > T:
        return f"{p.stages} stages exceed the {T} k-tiles of K (the pipelined loop needs a body step)"
    return None


def _c_smem(ctx: Context, p: Point) -> Optional[str]:
    slots, _ = slots_regs(p)
    need = slots * (p.BM + p.BN) * p.BK * ctx.elem
    if need > ctx.arch.smem_per_block:
        return f"{slots} slots need {need} B of shared memory, above {ctx.arch.smem_per_block} B on {ctx.arch.name}"
    return None


def _c_regs(ctx: Context, p: Point) -> Optional[str]:
    _, regs = slots_regs(p)
    if regs > ctx.arch.max_registers_per_thread:
        return f"about {regs} registers per thread, above {ctx.arch.max_registers_per_thread}"
    return None


def _c_regs_sm(ctx: Context, p: Point) -> Optional[str]:
    _, regs = slots_regs(p)
    per_cta = math.ceil(regs * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT * p.warps
    if per_cta > ctx.arch.registers_per_sm:
        return f"{per_cta} registers per CTA, above the {ctx.arch.registers_per_sm} of an SM"
    return None


def _c_threads(ctx: Context, p: Point) -> Optional[str]:
    if 32 * p.warps > min(1024, ctx.arch.max_threads_per_sm):
        return f"{32 * p.warps} threads per CTA"
    return None


def _c_validate(ctx: Context, p: Point) -> Optional[str]:
    issues = validate(p.config(ctx.M, ctx.N, ctx.K, ctx.dtype, ctx.arch.name))
    return issues[0] if issues else None


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint("mma-shape", "BM % 16 == BN % 16 == BK % 16 == 0, BK a power of two", _c_mma),
    Constraint("warp-tiling", "exists WM * WN == warps: (BM / WM) % 16 == (BN / WN) % 16 == 0", _c_warps),
    Constraint("cp.async-16B", "K % 8 == 0 and BM*BK*2 % (16 * threads) == BN*BK*2 % (16 * threads) == 0",
               _c_cp_async),
    Constraint("k-tiles", "stages <= ceil(K / BK)", _c_ktiles),
    Constraint("shared-memory", "slots * (BM + BN) * BK * 2 <= smem_per_block(arch)", _c_smem),
    Constraint("registers/thread", "acc + min(BK/16, 2) * (A_f + B_f) + 40 <= 255", _c_regs),
    Constraint("registers/SM", "ceil(regs * 32 / 256) * 256 * warps <= registers_per_sm(arch)", _c_regs_sm),
    Constraint("threads", "32 * warps <= min(1024, max_threads_per_sm(arch))", _c_threads),
    Constraint("gemm.validate", "synth.gemm.validate(config) == []", _c_validate),
)

_STRUCTURAL = ("mma-shape", "warp-tiling")
"""Constraints without which slots and registers are undefined (later ones are then not evaluated)."""


def enumerate_space() -> list[Point]:
    """Every point, in a fixed order."""
    return [Point(bm, bn, bk, w, s) for bm, bn, bk, w, s in
            itertools.product(BM_SPACE, BN_SPACE, BK_SPACE, WARPS_SPACE, STAGES_SPACE)]


def prune(ctx: Context, points: Sequence[Point]) -> tuple[list[Point], dict[str, int], dict[str, int]]:
    """Legal points, counts per first-broken constraint, and counts per broken constraint.

    A point breaking a structural constraint is not checked against the ones
    that need a warp tiling; ``gemm.validate`` adjudicates only the points all
    named constraints accept (so its count shows what they miss: zero).
    """
    def skip(fails: list[str], name: str) -> bool:
        return (fails[0] in _STRUCTURAL or name == "gemm.validate") and name not in ("k-tiles", "threads")

    return tally(ctx, points, CONSTRAINTS, skip)


def tally(ctx, points: Sequence, constraints: Sequence, skip: Callable[[list[str], str], bool]):
    """``(legal points, counts per first-broken constraint, counts per broken constraint)``:
    each point checked against ``constraints`` in order (each with ``name`` and ``check(ctx, p)``,
    None when satisfied); once a point breaks one, a constraint for which ``skip(broken so far,
    name)`` holds is not checked."""
    first = {c.name: 0 for c in constraints}
    anyv = {c.name: 0 for c in constraints}
    legal: list = []
    for p in points:
        fails: list[str] = []
        for c in constraints:
            if fails and skip(fails, c.name):
                continue
            if c.check(ctx, p) is not None:
                fails.append(c.name)
        for name in fails:
            anyv[name] += 1
        if fails:
            first[fails[0]] += 1
        else:
            legal.append(p)
    return legal, first, anyv


def split_issue(ctx: Context, p: Point) -> Optional[str]:
    """None when ``p.split_k`` is legal for ``p`` (a point legal with ``split_k = 1``), else why not.

    ``synth.gemm.validate`` requires ``split_k <= ceil(K / BK)`` and that every split's loop,
    ``ceil(K / BK) // split_k`` k-tiles, reaches the pinned stages; the search also keeps to
    :data:`SPLIT_SPACE`. The rest of a split point's legality is its base point's: the tile, slots,
    registers and threads do not depend on the split.
    """
    if p.split_k not in SPLIT_SPACE or p.split_k > MAX_SPLIT_K:
        return f"split_k = {p.split_k} is not one of {SPLIT_SPACE}"
    T = -(-ctx.K // p.BK)
    if p.split_k > T:
        return f"split_k = {p.split_k} exceeds the {T} k-tiles of K"
    if T // p.split_k < p.stages:
        return (f"{p.stages} stages exceed the {T // p.split_k} k-tiles of each of the {p.split_k} splits "
                "(the pipelined loop needs a body step)")
    return None


SPLIT_CONSTRAINT = Constraint(
    "split-k", "split_k in SPLIT_SPACE, split_k <= ceil(K / BK), ceil(K / BK) // split_k >= stages", split_issue)
"""The split dimension's constraint, checked on configurations legal without a split."""


def split_points(ctx: Context, legal: Sequence[Point]) -> tuple[dict[Point, list[Point]], int]:
    """The split variants (``split_k > 1`` of :data:`SPLIT_SPACE`) of each legal point, and how many
    were excluded by :func:`split_issue` (the cp.async loop's; the Hopper search has its own,
    :func:`synth.search.hopper.hopper_split_issue`)."""
    out: dict[Point, list[Point]] = {}
    excluded = 0
    for p in legal:
        for s in SPLIT_SPACE[1:]:
            q = Point(p.BM, p.BN, p.BK, p.warps, p.stages, s)
            if split_issue(ctx, q) is None:
                out.setdefault(p, []).append(q)
            else:
                excluded += 1
    return out, excluded


def stream_k_points(legal: Sequence[Point]) -> list[Point]:
    """The stream-K variant of each legal point (``stream_k = True``, no split). It is legal wherever its base
    point is: the kernel's loop is proved for every trip count from 1 (a segment runs at least one k-tile), its
    tile, slots, registers and threads are the base point's, and ``synth.gemm.validate`` checks nothing else."""
    return [Point(p.BM, p.BN, p.BK, p.warps, p.stages, 1, True) for p in legal if p.split_k == 1 and not p.stream_k]


def is_legal(p: Point, M: int, N: int, K: int, *, dtype: str = "f16", arch: str = "sm_80") -> Optional[str]:
    """None when ``p`` is in the legal space of the shape, else the first constraint it breaks (``name: why``);
    a split point is legal when its :attr:`Point.base` is and :func:`split_issue` accepts its split, a stream-K
    point when its base is (:func:`stream_k_points`)."""
    ctx = make_context(M, N, K, dtype, arch)
    for c in CONSTRAINTS:
        why = c.check(ctx, p.base)
        if why is not None:
            return f"{c.name}: {why}"
    if p.stream_k and p.split_k != 1:
        return f"stream_k: stream-K excludes split_k = {p.split_k}"
    if p.split_k != 1:
        why = split_issue(ctx, p)
        if why is not None:
            return f"{SPLIT_CONSTRAINT.name}: {why}"
    return None

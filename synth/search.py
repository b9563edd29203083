"""``synth search gemm``: rank GEMM pipelines with constraints, an analytic model and exact schedule timings.

Input: a shape ``M x N x K``, a dtype and an arch. Output: a :class:`SearchResult`
— the best configurations (tile, warps, stages) with their predicted time, the
size of the space, how many points each constraint excluded, and where the
reference configurations of CUTLASS and Triton (synth/data/reference_configs.yaml)
rank. Nothing is compiled or timed unless ``--measure`` is given.

Phases (each a function below, in this order):

1. ``enumerate_space``: every point of BM, BN in {16..256}, BK in {16..128},
   warps in {1, 2, 4, 8}, stages in 1..11 (synth's pipeline depth, which is the
   number of shared slots for BK >= 32, as CUTLASS's ``kStages``; 10 = CUTLASS's
   deepest; 1 = no pipelining, for tiny K).
2. ``_prune``: named constraints (:data:`CONSTRAINTS`) exclude illegal points
   before any evaluation, counting each exclusion under the first constraint it
   breaks; ``gemm.validate`` is the last constraint, so nothing it rejects is
   ever proposed.
3. ``synth.search_model.estimate`` ranks every legal point cheaply (lower bounds
   of the k-tile interval taken from the expanded problem).
4. ``_refine``: best-first, the most promising points are scheduled and their
   k-tile interval replaces the bound (every point pins stages and order, so
   this is the exact least timing of that schedule, ``synth.sim.best_timing``;
   ``synth.model.solve`` for a free order). A solved estimate is never
   below the unsolved one, so once the ``top`` best are all solved they are the
   model's best (``complete``). Solver results are cached per (arch, tile,
   warps, stages, trip count), so they are shared between shapes.

Determinism: the space, the constraints and the model are pure; ties are broken
by a fixed key; the pinned CUTLASS-like schedules (stages and order fixed by
``gemm.stage_pins`` / ``gemm.order_pins``; ``2 + 3 BK/16`` ops) are timed
exactly, with no time limit involved. Only ``elapsed_s`` and the cache counters differ
between runs (they are excluded from equality).

Left out on purpose: split-K and stream-K, CTA rasterization (L2 reuse), epilogue
fusion, non-f16 operands (``synth.gemm`` does not expand them yet), and
measuring candidates (``--measure`` times the top ones when a GPU is there).
"""

from __future__ import annotations

import argparse
import csv
import functools
import heapq
import itertools
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Optional, Sequence

from .errors import Loc, SynthError

BM_SPACE = (16, 32, 64, 128, 256)
BN_SPACE = (16, 32, 64, 128, 256)
BK_SPACE = (16, 32, 64, 128)
WARPS_SPACE = (1, 2, 4, 8)
STAGES_SPACE = tuple(range(1, 12))
T_REF = 64
"""Solve k-loops of more than ``T_REF`` k-tiles at ``T_REF``: the interval does not
depend on the trip count, and ``cycles = (T - 1) ii + tail`` extrapolates."""
MAX_SOLVES = 256
"""At most this many schedule timings per search (a few dozen are typical; each takes milliseconds)."""
PER_SOLVE_LIMIT = 10.0
REFERENCE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "reference_configs.yaml")

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``; phases: ``space``, ``model``, ``solve``, ``write``, ``measure``."""


# ---------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Point:
    """One point of the search space (shape independent)."""

    BM: int
    BN: int
    BK: int
    warps: int
    stages: int

    @property
    def label(self) -> str:
        return f"{self.BM}x{self.BN}x{self.BK} w{self.warps} s{self.stages}"

    def config(self, M: int, N: int, K: int, dtype: str, arch: str):
        from .gemm import GemmConfig

        return GemmConfig(M, N, K, dtype, self.BM, self.BN, self.BK, self.warps, self.stages, arch)


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

    @property
    def point(self) -> Point:
        c = self.config
        return Point(c.BM, c.BN, c.BK, c.warps, c.stages)

    @property
    def label(self) -> str:
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


@dataclass(frozen=True)
class Measurement:
    label: str
    ms: float
    tflops: float
    ok: bool


@dataclass(frozen=True)
class SearchResult:
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

    @property
    def winner(self) -> Optional[Candidate]:
        return self.candidates[0] if self.candidates else None


# ---------------------------------------------------------------------------
# the space and its constraints


@dataclass(frozen=True)
class _Ctx:
    M: int
    N: int
    K: int
    dtype: str
    arch: object
    """:class:`synth.arch.ArchSpec`."""
    elem: int = 2


@dataclass(frozen=True)
class Constraint:
    name: str
    formula: str
    """The constraint as written in docs/search.md."""
    check: Callable[[_Ctx, Point], Optional[str]]
    """None when the point satisfies it, else why not."""


def _c_mma(ctx: _Ctx, p: Point) -> Optional[str]:
    if p.BM % 16 or p.BN % 16 or p.BK % 16 or p.BK & (p.BK - 1):
        return f"{p.BM}x{p.BN}x{p.BK} is not made of m16n8k16 mma / 16-row ldmatrix.x4 steps"
    return None


def _c_warps(ctx: _Ctx, p: Point) -> Optional[str]:
    from .gemm import warp_layout

    if warp_layout(p.warps, p.BM, p.BN) is None:
        return f"{p.warps} warps cannot split {p.BM}x{p.BN} into warp tiles that are multiples of 16x16"
    return None


def _c_cp_async(ctx: _Ctx, p: Point) -> Optional[str]:
    if ctx.K % (16 // ctx.elem):
        return f"K = {ctx.K} rows are not 16-byte aligned for cp.async"
    chunk = 32 * p.warps * 16
    for op, rows in (("A", p.BM), ("B", p.BN)):
        if rows * p.BK * ctx.elem % chunk:
            return (f"the {rows}x{p.BK} {op} tile is not a whole number of 16-byte cp.async per thread "
                    f"for {32 * p.warps} threads")
    return None


def _c_ktiles(ctx: _Ctx, p: Point) -> Optional[str]:
    T = -(-ctx.K // p.BK)
    if p.stages > T:
        return f"{p.stages} stages exceed the {T} k-tiles of K (the pipelined loop needs a body step)"
    return None


def _slots_regs(ctx: _Ctx, p: Point) -> tuple[int, int]:
    return _slots_regs_of(p)


@functools.lru_cache(maxsize=None)
def _slots_regs_of(p: Point) -> tuple[int, int]:
    """(shared slots, registers per thread) of ``p``'s pinned stages (shape and arch independent)."""
    from .gemm import register_estimate, smem_slots, stage_pins

    cfg = p.config(p.BM, p.BN, T_REF * p.BK, "f16", "sm_80")
    return smem_slots(stage_pins(cfg)), register_estimate(cfg)


def _c_smem(ctx: _Ctx, p: Point) -> Optional[str]:
    slots, _ = _slots_regs(ctx, p)
    need = slots * (p.BM + p.BN) * p.BK * ctx.elem
    if need > ctx.arch.smem_per_block:
        return f"{slots} slots need {need} B of shared memory, above {ctx.arch.smem_per_block} B on {ctx.arch.name}"
    return None


def _c_regs(ctx: _Ctx, p: Point) -> Optional[str]:
    _, regs = _slots_regs(ctx, p)
    if regs > ctx.arch.max_registers_per_thread:
        return f"about {regs} registers per thread, above {ctx.arch.max_registers_per_thread}"
    return None


def _c_regs_sm(ctx: _Ctx, p: Point) -> Optional[str]:
    from .search_model import REG_ALLOC_UNIT

    _, regs = _slots_regs(ctx, p)
    per_cta = math.ceil(regs * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT * p.warps
    if per_cta > ctx.arch.registers_per_sm:
        return f"{per_cta} registers per CTA, above the {ctx.arch.registers_per_sm} of an SM"
    return None


def _c_threads(ctx: _Ctx, p: Point) -> Optional[str]:
    if 32 * p.warps > min(1024, ctx.arch.max_threads_per_sm):
        return f"{32 * p.warps} threads per CTA"
    return None


def _c_validate(ctx: _Ctx, p: Point) -> Optional[str]:
    from .gemm import validate

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


def enumerate_space() -> list[Point]:
    """Every point, in a fixed order."""
    return [Point(bm, bn, bk, w, s) for bm, bn, bk, w, s in
            itertools.product(BM_SPACE, BN_SPACE, BK_SPACE, WARPS_SPACE, STAGES_SPACE)]


_STRUCTURAL = ("mma-shape", "warp-tiling")
"""Constraints without which slots and registers are undefined (later ones are then not evaluated)."""


def _prune(ctx: _Ctx, points: Sequence[Point]) -> tuple[list[Point], dict[str, int], dict[str, int]]:
    """Legal points, counts per first-broken constraint, and counts per broken constraint.

    A point breaking a structural constraint is not checked against the ones
    that need a warp tiling; ``gemm.validate`` adjudicates only the points all
    named constraints accept (so its count shows what they miss: zero).
    """
    first = {c.name: 0 for c in CONSTRAINTS}
    anyv = {c.name: 0 for c in CONSTRAINTS}
    legal: list[Point] = []
    for p in points:
        fails: list[str] = []
        for c in CONSTRAINTS:
            if fails and (fails[0] in _STRUCTURAL or c.name == "gemm.validate"):
                if c.name not in ("k-tiles", "threads"):
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


def is_legal(p: Point, M: int, N: int, K: int, *, dtype: str = "f16", arch: str = "sm_80") -> Optional[str]:
    """None when ``p`` is in the legal space of the shape, else the first constraint it breaks (``name: why``)."""
    ctx = _context(M, N, K, dtype, arch)
    for c in CONSTRAINTS:
        why = c.check(ctx, p)
        if why is not None:
            return f"{c.name}: {why}"
    return None


def _context(M: int, N: int, K: int, dtype: str, arch: str) -> _Ctx:
    from .arch import ARCHS, get_arch
    from .gemm import DTYPES

    for name, v in (("M", M), ("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SynthError(None, f"{name} = {v!r} is not a positive integer", f"pass --{name} 4096")
    if dtype not in DTYPES:
        raise SynthError(None, f"dtype {dtype!r} is not supported by the GEMM expansion",
                         f"use --dtype {' or '.join(DTYPES)}")
    try:
        spec = get_arch(arch)
    except KeyError:
        raise SynthError(None, f"unknown arch {arch!r}", f"use --arch {' | '.join(ARCHS)}") from None
    return _Ctx(M, N, K, dtype, spec, 2)


# ---------------------------------------------------------------------------
# solver results, cached across shapes (and calls) per process

_LOCK = threading.Lock()
_RESOURCES: dict[tuple, object] = {}
_SOLVES: dict[tuple, "_Solved"] = {}


@dataclass(frozen=True)
class _Solved:
    ii: Optional[int]
    tail: Optional[int]
    status: str
    """OPTIMAL | FEASIBLE | INFEASIBLE | UNAVAILABLE | ERROR"""
    note: str = ""


def clear_cache() -> None:
    """Forget cached resources and solver results (tests)."""
    with _LOCK:
        _RESOURCES.clear()
        _SOLVES.clear()


def _resources(ctx: _Ctx, p: Point):
    """:class:`synth.search_model.Resources` of ``p`` (independent of the shape; cached)."""
    from .search_model import resources

    key = (ctx.arch.name, ctx.dtype, p)
    with _LOCK:
        hit = _RESOURCES.get(key)
    if hit is None:
        hit = resources(p.config(p.BM, p.BN, T_REF * p.BK, ctx.dtype, ctx.arch.name), ctx.arch)
        with _LOCK:
            _RESOURCES[key] = hit
    return hit


def _solve(ctx: _Ctx, p: Point, time_limit: float, workers: int) -> tuple[_Solved, bool]:
    """The solver's (ii, tail) for ``p`` (cached); second value: whether it ran now."""
    T = min(-(-ctx.K // p.BK), T_REF)
    key = (ctx.arch.name, ctx.dtype, p, T, workers)
    with _LOCK:
        hit = _SOLVES.get(key)
    if hit is not None:
        return hit, False
    out = _solve_now(ctx, p, T, time_limit, workers)
    if out.status not in ("UNAVAILABLE",) and not (out.status == "FEASIBLE" and time_limit < PER_SOLVE_LIMIT):
        with _LOCK:
            _SOLVES[key] = out
    return out, True


def _solve_now(ctx: _Ctx, p: Point, T: int, time_limit: float, workers: int) -> _Solved:
    """The k-tile timing of ``p``'s expanded problem.

    Every search point pins its stages and its body order (``gemm.stage_pins``,
    ``gemm.order_pins``), so what is left to schedule is the issue offsets: the
    least timing of a fixed stage/order, which ``synth.sim.best_timing`` computes
    exactly (the figure CP-SAT proves optimal for the same pins, a test compares
    them) in milliseconds instead of the solver's II search. A problem whose order
    is free goes to ``synth.model.solve``.
    """
    from .gemm import expand_gemm
    from .graph import build_graph

    problem = expand_gemm(p.config(p.BM, p.BN, T * p.BK, ctx.dtype, ctx.arch.name))
    graph = build_graph(problem)
    if problem.pins.stage is not None and problem.pins.order is not None:
        from .schedule import check_schedule, schedule_from_pins
        from .sim import best_timing

        sched = schedule_from_pins(problem, graph)
        errs = check_schedule(problem, graph, sched)
        if errs:
            return _Solved(None, None, "INFEASIBLE", errs[0])
        try:
            timing = best_timing(problem, graph, sched)
        except ValueError as exc:
            return _Solved(None, None, "INFEASIBLE", str(exc))
        return _Solved(int(timing.ii), int(timing.cycles - (T - 1) * timing.ii), "OPTIMAL")
    try:
        from .model import solve
    except ImportError as exc:
        return _Solved(None, None, "UNAVAILABLE", f"synth.model is not available ({exc})")
    try:
        sched = solve(problem, graph, time_limit=time_limit, workers=workers)
    except SynthError as exc:
        return _Solved(None, None, "INFEASIBLE", exc.msg)
    timing = getattr(sched, "timing", None)
    info = getattr(sched, "info", None)
    status = getattr(info, "status", None) or "UNKNOWN"
    if timing is None:
        return _Solved(None, None, status, "the solver returned no timing")
    tail = timing.tail
    if timing.cycles is not None:
        tail = timing.cycles - (T - 1) * timing.ii
    return _Solved(int(timing.ii), int(tail), status)


# ---------------------------------------------------------------------------
# the search


@dataclass
class _Entry:
    point: Point
    res: object
    est: object
    solved: Optional[_Solved] = None


def _group(p: Point) -> tuple[int, int, int, int]:
    """Configurations are ranked per tile and warp count, each at its best stage count."""
    return (p.BM, p.BN, p.BK, p.warps)


def _ranker(alive: Sequence[_Entry]) -> Callable[[_Entry], int]:
    """``rank(e)``: 1 + the number of other (tile, warps) groups whose best prediction beats ``e``."""
    best: dict[tuple, tuple] = {}
    for e in alive:
        g, k = _group(e.point), _key(e)
        if g not in best or k < best[g]:
            best[g] = k
    ordered = sorted(best.items(), key=lambda gk: gk[1])

    def rank(e: _Entry) -> int:
        g, k = _group(e.point), _key(e)
        return 1 + sum(1 for h, kh in ordered if h != g and kh < k)

    return rank


def _key(e: _Entry) -> tuple:
    """Ranking key: predicted time; on ties fewer k-tiles (fewer barriers and waits, which the model
    leaves out), less shared memory, fewer stages, fewer warps, then the tile."""
    p = e.point
    return (round(e.est.time_us, 9), e.est.k_tiles, e.res.smem_bytes, p.stages, p.warps, p.BM, p.BN, p.BK)


def search_gemm(M: int, N: int, K: int, *, dtype: str = "f16", arch: str = "sm_80", time_limit: float = 30.0,
                workers: int = 2, top: int = 5, progress: Optional[Progress] = None,
                max_solves: int = MAX_SOLVES, references: bool = True) -> SearchResult:
    """Search tiles, warps and stages for ``M x N x K``; the ``top`` best, best first.

    ``time_limit`` bounds the whole search (wall clock); each solver call gets at
    most ``min(10 s, what is left)``. ``workers`` is CP-SAT's worker count.
    ``references`` also ranks the CUTLASS/Triton reference configurations.
    """
    t0 = time.monotonic()
    ctx = _context(M, N, K, dtype, arch)
    if top < 1:
        raise SynthError(None, f"--top {top}: nothing to rank", "use --top 1 or more")
    say = progress or (lambda phase, done, total: None)
    from .search_model import estimate

    space = enumerate_space()
    say("space", 0, len(space))
    legal, first, anyv = _prune(ctx, space)
    say("space", len(space), len(space))
    if not legal:
        worst = max(first.items(), key=lambda kv: kv[1])
        raise SynthError(None, f"no legal configuration for {M}x{N}x{K} {dtype} on {arch}: every point breaks a "
                         f"constraint (most often {worst[0]})",
                         "pad K to a multiple of 8" if worst[0] == "cp.async-16B" else "try another arch")
    entries: dict[Point, _Entry] = {}
    for i, p in enumerate(legal):
        res = _resources(ctx, p)
        entries[p] = _Entry(p, res, estimate(ctx.arch, M, N, K, p.BM, p.BN, p.BK, res))
        if i % 64 == 0:
            say("model", i, len(legal))
    say("model", len(legal), len(legal))

    deadline = t0 + time_limit
    state = {"calls": 0, "solves": 0, "truncated": False, "unavailable": "", "infeasible": 0}
    notes: list[str] = []

    def refine(e: _Entry) -> bool:
        """Solve ``e`` (or take it from the cache); False when no more solving is allowed."""
        if e.solved is not None:
            return True
        left = deadline - time.monotonic()
        if state["solves"] >= max_solves or left <= 0.05 or state["unavailable"]:
            state["truncated"] = not state["unavailable"]
            return False
        s, ran = _solve(ctx, e.point, min(PER_SOLVE_LIMIT, left), workers)
        state["solves"] += 1
        state["calls"] += int(ran)
        say("solve", state["solves"], max_solves)
        if s.status == "UNAVAILABLE":
            state["unavailable"] = s.note
            return False
        e.solved = s
        if s.ii is not None:
            e.est = estimate(ctx.arch, M, N, K, e.point.BM, e.point.BN, e.point.BK, e.res, ii=s.ii, tail=s.tail)
        return True

    def best_of(pool: Iterable[_Entry], k: int) -> tuple[list[_Entry], bool]:
        """The ``k`` best of ``pool`` with every one solved (best-first refinement)."""
        heap = [(_key(e), i, e) for i, e in enumerate(pool)]
        heapq.heapify(heap)
        out: list[_Entry] = []
        exact = True
        seen: set[tuple[int, int, int, int]] = set()
        while heap and len(out) < k:
            _, i, e = heapq.heappop(heap)
            if _group(e.point) in seen:
                continue  # a worse stage count of a tile already ranked
            if e.solved is None:
                if refine(e):
                    if e.solved.status == "INFEASIBLE":
                        state["infeasible"] += 1
                        continue
                    heapq.heappush(heap, (_key(e), i, e))
                    continue
                exact = False
            elif e.solved.status == "INFEASIBLE":
                continue
            out.append(e)
            seen.add(_group(e.point))
        return out, exact

    ranked_top, complete = best_of(entries.values(), top)
    refs: list[ReferenceRank] = []
    if references:
        refs = _rank_references(ctx, entries, ranked_top, best_of, refine)
    say("solve", state["solves"], state["solves"])
    alive = [e for e in entries.values() if e.solved is None or e.solved.status != "INFEASIBLE"]
    order = sorted(alive, key=_key)
    rank_of = _ranker(alive)
    if state["unavailable"]:
        notes.append(f"solver unavailable, ranking by the analytic model only: {state['unavailable']}")
        complete = False
    elif state["truncated"]:
        notes.append(f"solver budget reached ({state['solves']} solves, time limit {time_limit:g} s): "
                     "later candidates are ranked by their lower bound")
    if state["infeasible"]:
        notes.append(f"{state['infeasible']} configurations the solver found infeasible were dropped")
    if any(e.solved is not None and e.solved.status == "FEASIBLE" for e in ranked_top):
        notes.append("some schedules are FEASIBLE, not proven OPTIMAL, within the solver time limit")
    winner = ranked_top[0] if ranked_top else None
    cands = []
    if winner is not None:
        ties = len({_group(e.point) for e in order if _key(e)[0] == _key(winner)[0]} - {_group(winner.point)})
        runner = _runner_up(winner, order, refine)
        for e in ranked_top:
            why = _why_winner(ctx, e, ties, runner) if e is winner else _why_other(ctx, e, winner)
            cands.append(_candidate(ctx, e, rank_of(e), why))
    excluded = dict(first)
    if state["infeasible"]:
        excluded["solver-infeasible"] = state["infeasible"]
    return SearchResult(
        M=M, N=N, K=K, dtype=dtype, arch=ctx.arch.name, candidates=tuple(cands), space_size=len(space),
        feasible=len(legal), excluded=tuple(excluded.items()), violations=tuple(anyv.items()),
        solved=sum(1 for e in entries.values() if e.solved is not None and e.solved.ii is not None),
        complete=complete and bool(cands), references=tuple(refs), notes=tuple(notes),
        elapsed_s=time.monotonic() - t0, solver_calls=state["calls"])


def _runner_up(winner: _Entry, order: list[_Entry], refine) -> Optional[_Entry]:
    """The best entry with another tile or warp count and a worse prediction (solved when the budget allows)."""
    w = winner.point
    for _ in range(8):
        pool = [e for e in order if (e.point.BM, e.point.BN, e.point.BK, e.point.warps) != (w.BM, w.BN, w.BK, w.warps)
                and (e.solved is None or e.solved.status != "INFEASIBLE")]
        if not pool:
            return None
        best = min(pool, key=_key)
        if best.solved is not None or not refine(best):
            return best
    return min(pool, key=_key)


def _candidate(ctx: _Ctx, e: _Entry, rank: int, why: str) -> Candidate:
    est, res, p = e.est, e.res, e.point
    cfg = p.config(ctx.M, ctx.N, ctx.K, ctx.dtype, ctx.arch.name)
    return Candidate(
        rank=rank, config=cfg, time_us=est.time_us, tflops=est.tflops, smem_bytes=res.smem_bytes,
        smem_slots=res.smem_slots, regs_per_thread=res.regs_per_thread, ctas_per_sm=est.ctas_per_sm,
        occupancy_limit=est.occupancy_limit, ctas=est.ctas, waves=est.waves,
        wave_efficiency=round(est.wave_efficiency, 6), k_tiles=est.k_tiles,
        ktile_cycles=e.solved.ii if e.solved is not None else None, ktile_bound=res.ii_bound,
        round_cycles=est.round_cycles, bound=est.bound,
        solver_status=e.solved.status if e.solved is not None else None, why=why)


def _loop_rate(e: _Entry) -> float:
    """Main-loop FLOP per cycle of one SM: the active CTAs each finishing a k-tile per round."""
    p, est = e.point, e.est
    return 2.0 * p.BM * p.BN * p.BK * est.active_ctas_per_sm / max(est.round_cycles, 1)


def _describe(ctx: _Ctx, e: _Entry) -> str:
    """What bounds a configuration, in one clause."""
    from .search_model import extra_of

    est = e.est
    peak = ctx.arch.tensor_f16_f32_flop_per_clk_sm * extra_of(ctx.arch).mma_sync_efficiency
    return (f"{est.bound}-bound: {est.ctas} CTAs in {est.waves} wave{'s' if est.waves != 1 else ''} at "
            f"{est.ctas_per_sm}/SM ({est.occupancy_limit}-limited, last wave {est.wave_efficiency:.0%} full), "
            f"main loop at {_loop_rate(e) / peak:.0%} of the tensor peak")


def _why_winner(ctx: _Ctx, e: _Entry, ties: int, runner: Optional[_Entry]) -> str:
    text = _describe(ctx, e)
    if ties:
        text += (f"; {ties} other configuration{'s' if ties > 1 else ''} tie{'s' if ties == 1 else ''} "
                 "at this prediction (ties go to fewer k-tiles, then less shared memory, fewer stages)")
    if runner is not None and _key(runner)[0] == _key(e)[0]:
        text += f"; the best different tile ({runner.point.label}) is predicted equal and ranked after it"
    elif runner is not None:
        gain = runner.est.time_us / e.est.time_us - 1
        at_least = "" if runner.solved is not None else "at least "
        text += (f"; beats the best different tile ({runner.point.label}) by {at_least}{_pct(gain)}: "
                 f"{_difference(e, runner)}")
    return text


def _why_other(ctx: _Ctx, e: _Entry, winner: _Entry) -> str:
    loss = e.est.time_us / winner.est.time_us - 1
    if loss <= 1e-12:
        return _describe(ctx, e) + "; ties with #1 (ranked after it by fewer k-tiles, less shared memory, fewer stages)"
    return _describe(ctx, e) + f"; {_pct(loss)} slower than #1: {_difference(winner, e)}"


def _pct(x: float) -> str:
    return f"{x:.1%}" if x >= 0.001 else f"{x:.3%}"


def _difference(ea: _Entry, eb: _Entry) -> str:
    """Why ``ea`` is predicted faster than ``eb``: the terms of the model that differ the most."""
    a, b = ea.est, eb.est
    if a.dram_us >= a.compute_us and b.dram_us >= b.compute_us:
        return "both are DRAM-bound; ties go to fewer k-tiles, then less shared memory"
    facts = []
    dl, df = b.loop_cycles - a.loop_cycles, b.fixed_cycles - a.fixed_cycles
    if dl:
        if a.waves != b.waves:
            cause = f"{a.waves} wave{'s' if a.waves != 1 else ''} instead of {b.waves}"
        else:
            cause = (f"{_loop_rate(ea):.0f} instead of {_loop_rate(eb):.0f} FLOP/cycle per SM in the k-loop, "
                     f"{a.active_ctas_per_sm} vs {b.active_ctas_per_sm} CTA/SM, the other {b.bound}-bound")
            if abs(a.padding - b.padding) > 0.01:
                cause += f", {a.padding:.0%} vs {b.padding:.0%} of the tile area padding"
        facts.append((abs(dl), f"{'-' if dl > 0 else '+'}{abs(dl):,} main-loop cycles ({cause})"))
    if df:
        facts.append((abs(df), f"{'-' if df > 0 else '+'}{abs(df):,} cycles of pipeline fill, drain and epilogue"))
    if not facts:
        return "equal prediction"
    facts.sort(key=lambda f: -f[0])
    return "; ".join(f for _, f in facts)


# ---------------------------------------------------------------------------
# reference configurations (CUTLASS, Triton)


@dataclass(frozen=True)
class RefConfig:
    BM: int
    BN: int
    BK: int
    warps: int
    slots: int
    """The reference's "stages": shared-memory buffers per operand."""


def load_references(path: str = REFERENCE_FILE) -> dict[str, object]:
    """``{"cutlass_sm80_f16": [RefConfig...], "triton_matmul_tutorial": [...], "defaults": {"cutlass": RefConfig, ...}}``."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read reference configurations: {exc.strerror}",
                         "restore synth/data/reference_configs.yaml") from None

    def conv(d: dict) -> RefConfig:
        return RefConfig(int(d["BM"]), int(d["BN"]), int(d["BK"]), int(d["warps"]), int(d["stages"]))

    out: dict[str, object] = {}
    for k, v in doc.items():
        if k == "defaults":
            out[k] = {name: conv(d["config"]) for name, d in v.items()}
        else:
            out[k] = [conv(d) for d in v["configs"]]
    return out


def reference_points(ref: RefConfig, M: int, N: int, K: int, *, dtype: str = "f16",
                     arch: str = "sm_80") -> tuple[Optional[Point], Optional[str]]:
    """synth's point with the reference's tile, warps and number of shared slots, or why none is legal.

    synth's ``stages`` is the pipeline depth; with ``gemm.stage_pins`` it has that
    many shared slots for BK >= 32 (one fewer for BK = 16, whose only ldmatrix runs
    a stage ahead of the mma), so the depth with exactly ``ref.slots`` slots is looked up.
    """
    from .gemm import smem_slots, stage_pins

    first_reason = None
    for s in (ref.slots, ref.slots + 1):
        p = Point(ref.BM, ref.BN, ref.BK, ref.warps, s)
        cfg = p.config(M, N, K, dtype, arch)
        try:
            slots = smem_slots(stage_pins(cfg))
        except ValueError:
            slots = s
        if slots != ref.slots:
            continue
        why = is_legal(p, M, N, K, dtype=dtype, arch=arch)
        if why is None:
            if p.stages not in STAGES_SPACE:
                return None, f"{p.stages} stages are outside the search space"
            return p, None
        first_reason = first_reason or why
    return None, first_reason or "no pipeline depth gives that many shared slots"


def _rank_references(ctx: _Ctx, entries: dict[Point, _Entry], top: list[_Entry], best_of, refine) -> list[ReferenceRank]:
    refs = load_references()
    win = top[0] if top else None
    out: list[ReferenceRank] = []

    def rank_entry(e: _Entry) -> int:
        alive = [x for x in entries.values() if x.solved is None or x.solved.status != "INFEASIBLE"]
        return _ranker(alive)(e)

    def row(name: str, ref: RefConfig, e: Optional[_Entry], why: Optional[str],
            stand_in: bool = False) -> ReferenceRank:
        if e is None or (e.solved is not None and e.solved.status == "INFEASIBLE"):
            why = why or (e.solved.note if e is not None and e.solved is not None else None)
            return ReferenceRank(name, (ref.BM, ref.BN, ref.BK), ref.warps, ref.slots, None, None, None, None, why)
        p = e.point
        return ReferenceRank(name, (ref.BM, ref.BN, ref.BK), ref.warps, ref.slots, p.stages, rank_entry(e),
                             e.est.time_us, e.est.time_us / win.est.time_us if win else None, why,
                             (p.BM, p.BN, p.BK, p.warps, p.stages) if stand_in else None)

    for name, ref in refs.get("defaults", {}).items():
        p, why = reference_points(ref, ctx.M, ctx.N, ctx.K, dtype=ctx.dtype, arch=ctx.arch.name)
        e = entries.get(p) if p is not None else None
        stand_in = False
        bk = ref.BK // 2
        while e is None and bk >= 16:  # rank the nearest legal variant: same tile area and depth, smaller BK
            q, _ = reference_points(replace(ref, BK=bk), ctx.M, ctx.N, ctx.K, dtype=ctx.dtype, arch=ctx.arch.name)
            e = entries.get(q) if q is not None else None
            stand_in = e is not None
            bk //= 2
        if e is not None:
            refine(e)
        out.append(row(f"{name} default", ref, e, why, stand_in))
    for key, title in (("cutlass_sm80_f16", "best cutlass sm80"), ("triton_matmul_tutorial", "best triton tutorial")):
        pool = {}
        for ref in refs.get(key, []):
            p, _ = reference_points(ref, ctx.M, ctx.N, ctx.K, dtype=ctx.dtype, arch=ctx.arch.name)
            if p is not None and p in entries:
                pool[p] = ref
        if not pool:
            continue
        best, _ = best_of([entries[p] for p in pool], 1)
        if best:
            out.append(row(title, pool[best[0].point], best[0], None))
    # later refinements move entries: recompute ranks and ratios with the final estimates
    final = []
    for r in out:
        if r.rank is not None:
            bm, bn, bk, w, s = r.ranked_as or (r.tile[0], r.tile[1], r.tile[2], r.warps, r.stages)
            e = entries[Point(bm, bn, bk, w, s)]
            r = replace(r, rank=rank_entry(e), time_us=e.est.time_us,
                        ratio=e.est.time_us / win.est.time_us if win else None)
        final.append(r)
    return final


# ---------------------------------------------------------------------------
# many shapes: local processes or a Dask cluster


def _search_shape(args: tuple[tuple[int, int, int], dict]) -> SearchResult:
    (M, N, K), kw = args
    return search_gemm(M, N, K, **kw)


def search_many(shapes: Sequence[tuple[int, int, int]], *, scheduler: Optional[str] = None, processes: int = 2,
                **kw) -> list[SearchResult]:
    """:func:`search_gemm` for each shape, in the given order.

    Local processes (``concurrent.futures.ProcessPoolExecutor``, spawned) by
    default; with ``scheduler`` (``tcp://host:port``, or any address
    ``distributed.Client`` accepts) on that Dask cluster. The results are the
    same either way (see the module docstring on determinism).
    """
    shapes = [_shape(s) for s in shapes]
    kw = dict(kw)
    kw.pop("progress", None)
    jobs = [(s, kw) for s in shapes]
    if scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise SynthError(None, "--scheduler needs Dask, which is not installed",
                             "pip install 'dask[distributed]' (or drop --scheduler to use local processes)") from None
        try:
            client = Client(scheduler, timeout=10, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise SynthError(None, f"cannot reach the Dask scheduler at {scheduler}: {exc}",
                             "start one with 'dask scheduler' and workers with 'dask worker ADDRESS'") from None
        try:
            futures = client.map(_search_shape, jobs, pure=False)
            return list(client.gather(futures))
        finally:
            client.close()
    if processes <= 1 or len(jobs) <= 1:
        return [_search_shape(j) for j in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(processes, len(jobs)),
                             mp_context=multiprocessing.get_context("spawn")) as ex:
        return list(ex.map(_search_shape, jobs))


def _shape(s) -> tuple[int, int, int]:
    try:
        M, N, K = (int(x) for x in s)
    except (TypeError, ValueError):
        raise SynthError(None, f"shape {s!r} is not three integers M, N, K", "write shapes as (M, N, K)") from None
    return M, N, K


def read_shapes_csv(path: str) -> list[tuple[int, int, int]]:
    """Shapes from a CSV file with a header naming columns M, N and K (any order, other columns ignored).

    Blank lines and lines starting with ``#`` are skipped. Errors name the file,
    the line and the column.
    """
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read shapes: {exc.strerror}", "pass an existing CSV file") from None
    with fh:
        rows = [(n, line) for n, line in enumerate(fh.read().splitlines(), start=1)
                if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        raise SynthError(Loc(path, 1, 1), "no shapes: the file is empty", "write a header 'M,N,K' and one shape per line")
    head_line, head = rows[0]
    cols = [c.strip() for c in next(csv.reader([head]))]
    idx = {}
    for want in ("M", "N", "K"):
        hits = [i for i, c in enumerate(cols) if c.upper() == want]
        if not hits:
            raise SynthError(Loc(path, head_line, 1), f"the header has no column {want} (it has {', '.join(cols)})",
                             "start the file with a header line 'M,N,K'")
        idx[want] = hits[0]
    out = []
    for n, line in rows[1:]:
        cells = next(csv.reader([line]))
        vals = []
        for want in ("M", "N", "K"):
            i = idx[want]
            col = 1 + sum(len(c) + 1 for c in cells[:i])
            if i >= len(cells) or not cells[i].strip():
                raise SynthError(Loc(path, n, col), f"line has no value for {want}", "write M,N,K on every line")
            try:
                v = int(cells[i].strip())
            except ValueError:
                raise SynthError(Loc(path, n, col), f"{want} = {cells[i].strip()!r} is not an integer",
                                 "write sizes as plain integers such as 4096") from None
            if v < 1:
                raise SynthError(Loc(path, n, col), f"{want} = {v} is not positive", "use sizes of at least 1")
            vals.append(v)
        out.append((vals[0], vals[1], vals[2]))
    if not out:
        raise SynthError(Loc(path, head_line, 1), "no shapes after the header", "add lines such as 4096,4096,4096")
    return out


# ---------------------------------------------------------------------------
# JSON


def search_result_to_json(result: SearchResult) -> dict:
    """A JSON-ready dict of ``result`` (stable keys; see docs/search.md)."""

    def cand(c: Candidate) -> dict:
        return {
            "rank": c.rank, "name": c.config.problem_name(), "BM": c.BM, "BN": c.BN, "BK": c.BK,
            "warps": c.warps, "stages": c.stages, "smem_slots": c.smem_slots,
            "predicted_us": round(c.time_us, 3), "tflops": round(c.tflops, 2),
            "smem_bytes": c.smem_bytes, "regs_per_thread": c.regs_per_thread, "ctas_per_sm": c.ctas_per_sm,
            "occupancy_limit": c.occupancy_limit, "ctas": c.ctas, "waves": c.waves,
            "wave_efficiency": round(c.wave_efficiency, 4), "k_tiles": c.k_tiles,
            "ktile_cycles": c.ktile_cycles, "ktile_bound": c.ktile_bound, "round_cycles": c.round_cycles,
            "bound": c.bound, "solver_status": c.solver_status, "why": c.why,
        }

    def ref(r: ReferenceRank) -> dict:
        return {"name": r.name, "tile": list(r.tile), "warps": r.warps, "slots": r.slots, "stages": r.stages,
                "rank": r.rank, "predicted_us": None if r.time_us is None else round(r.time_us, 3),
                "ratio": None if r.ratio is None else round(r.ratio, 4), "excluded": r.excluded,
                "ranked_as": None if r.ranked_as is None else dict(zip(("BM", "BN", "BK", "warps", "stages"),
                                                                        r.ranked_as))}

    return {
        "shape": {"M": result.M, "N": result.N, "K": result.K}, "dtype": result.dtype, "arch": result.arch,
        "candidates": [cand(c) for c in result.candidates],
        "space_size": result.space_size, "feasible": result.feasible,
        "excluded": dict(result.excluded), "violations": dict(result.violations),
        "solved": result.solved, "solver_calls": result.solver_calls, "complete": result.complete,
        "references": [ref(r) for r in result.references], "notes": list(result.notes),
        "elapsed_s": round(result.elapsed_s, 3),
        "measured": [{"name": m.label, "ms": m.ms, "tflops": m.tflops, "ok": m.ok} for m in result.measured] or None,
        "predictions_only": not result.measured,
    }


# ---------------------------------------------------------------------------
# writing winners, measuring


def write_candidates(result: SearchResult, out_dir: str, *, k: Optional[int] = None, time_limit: float = 20.0,
                     workers: int = 2, force: bool = False, progress: Optional[Progress] = None) -> list[str]:
    """Run solve -> lower -> verify -> emit for the ``k`` best and write one folder each under ``out_dir``.

    Folder names: ``NN-<problem name>``. Returns the folders written.
    """
    from .gemm import expand_gemm
    from .pipeline import run, write_outputs

    say = progress or (lambda phase, done, total: None)
    cands = result.candidates[:k] if k else result.candidates
    out_dir = os.path.normpath(out_dir)
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise SynthError(Loc(out_dir), f"output folder '{out_dir}' already exists",
                         "pass --force to replace it, or choose another folder with --out")
    written = []
    for i, c in enumerate(cands):
        say("write", i, len(cands))
        problem = expand_gemm(c.config)
        res = run(problem, time_limit=time_limit, workers=workers)
        folder = os.path.join(out_dir, f"{c.rank:02d}-{problem.name}")
        write_outputs(res, folder, force=force)
        written.append(folder)
    say("write", len(cands), len(cands))
    return written


def gpu_available() -> tuple[bool, str]:
    """(True, device) when pycuda imports and sees a device, else (False, why not)."""
    try:
        import pycuda.driver as drv  # type: ignore[import-not-found]
    except Exception as exc:  # ImportError, or a broken CUDA install
        return False, f"pycuda is not importable ({type(exc).__name__})"
    try:
        drv.init()
        if drv.Device.count() < 1:
            return False, "no CUDA device"
        return True, drv.Device(0).name()
    except Exception as exc:
        return False, f"CUDA is not usable ({exc})"


def measure(result: SearchResult, folders: Sequence[str], *, repeats: int = 20,
            progress: Optional[Progress] = None) -> SearchResult:
    """Time each written folder's kernel with :func:`synth.run.run_output`; returns ``result`` with ``measured``."""
    from .run import run_output

    say = progress or (lambda phase, done, total: None)
    out = []
    for i, (c, folder) in enumerate(zip(result.candidates, folders)):
        say("measure", i, len(folders))
        rep = run_output(folder, repeats=repeats)
        out.append(Measurement(c.label, rep.ms, rep.tflops, rep.ok))
    say("measure", len(folders), len(folders))
    return replace(result, measured=tuple(out))


# ---------------------------------------------------------------------------
# command line


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``synth search gemm``."""
    parser.add_argument("--M", type=int, help="rows of A and C")
    parser.add_argument("--N", type=int, help="columns of B and C")
    parser.add_argument("--K", type=int, help="the reduction size")
    parser.add_argument("--dtype", default="f16", help="operand type (default %(default)s)")
    parser.add_argument("--arch", default="sm_80", help="sm_80 | sm_86 | sm_89 | sm_90 (default %(default)s)")
    parser.add_argument("--top", type=int, default=None, metavar="K",
                        help="write the K best configurations' folders (problem.yaml, schedule, program, "
                             "certificate, kernel.cu) under --out; without it the 5 best are ranked, nothing written")
    parser.add_argument("--time-limit", type=float, default=30.0, metavar="SECONDS",
                        help="wall-clock budget of the search per shape (default %(default)s)")
    parser.add_argument("--workers", type=int, default=2,
                        help="CP-SAT workers; with --shapes, local processes (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument("--shapes", metavar="CSV", help="search every shape of a CSV file with columns M,N,K")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="with --shapes: run on this Dask scheduler (tcp://host:port) instead of local processes")
    parser.add_argument("--measure", action="store_true",
                        help="time the top candidates on the GPU (pycuda); without one, say the figures are predictions")
    parser.add_argument("--out", metavar="DIR", help="folder for --top/--measure (default out/search-MxNxK-ARCH/)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print every constraint and reference")
    parser.add_argument("--force", action="store_true", help="replace existing output folders")


def cli_search(args: argparse.Namespace) -> int:
    """``synth search gemm``: returns the exit status (SynthError propagates to the CLI: status 2)."""
    from rich.console import Console

    quiet = bool(getattr(args, "quiet", False))
    as_json = bool(getattr(args, "json", False))
    import sys

    # a file or a pipe gets the whole table, not rich's 80-column default
    con = Console(quiet=quiet or as_json, highlight=False, width=None if sys.stdout.isatty() else 200)
    err = Console(stderr=True, quiet=quiet, highlight=False)
    if args.shapes:
        if any(getattr(args, k) is not None for k in ("M", "N", "K")):
            raise SynthError(None, "--shapes and --M/--N/--K were both given", "use one or the other")
        shapes = read_shapes_csv(args.shapes)
    else:
        missing = [k for k in ("M", "N", "K") if getattr(args, k) is None]
        if missing:
            raise SynthError(None, f"missing {', '.join('--' + k for k in missing)}",
                             "pass --M 4096 --N 4096 --K 4096, or --shapes shapes.csv")
        shapes = [(args.M, args.N, args.K)]
    if args.scheduler and not args.shapes:
        raise SynthError(None, "--scheduler distributes several shapes", "use it with --shapes shapes.csv")
    write_k = args.top
    if write_k is not None and write_k < 1:
        raise SynthError(None, f"--top {write_k}: nothing to write", "use --top 1 or more")
    top = write_k or 5
    kw = dict(dtype=args.dtype, arch=args.arch, time_limit=args.time_limit, top=top)

    if len(shapes) == 1:
        with _progress_bar(err, enabled=not (quiet or as_json)) as prog:
            results = [search_gemm(*shapes[0], workers=args.workers, progress=prog, **kw)]
    else:
        procs = max(1, args.workers)
        with err.status(f"searching {len(shapes)} shapes on "
                        f"{args.scheduler or f'{procs} local processes'}...") if not (quiet or as_json) else _null():
            results = search_many(shapes, scheduler=args.scheduler, processes=procs, workers=1, **kw)

    want_measure = bool(args.measure)
    gpu_ok, gpu_why = gpu_available() if want_measure else (False, "")
    if want_measure and gpu_ok and write_k is None:
        write_k = top
    docs = []
    for res in results:
        folders: list[str] = []
        if write_k is not None:
            base = args.out or os.path.join("out", f"search-{res.M}x{res.N}x{res.K}-{res.arch}")
            if len(results) > 1 and args.out:
                base = os.path.join(args.out, f"{res.M}x{res.N}x{res.K}-{res.arch}")
            with _progress_bar(err, enabled=not (quiet or as_json)) as prog:
                folders = write_candidates(res, base, k=write_k, time_limit=min(args.time_limit, 20.0),
                                           workers=args.workers, force=args.force, progress=prog)
        note = None
        if want_measure:
            if gpu_ok:
                with _progress_bar(err, enabled=not (quiet or as_json)) as prog:
                    res = measure(res, folders, progress=prog)
            else:
                note = (f"--measure: no GPU here ({gpu_why}); every figure is a prediction of the analytic "
                        "model and the solver, not a measurement")
        doc = search_result_to_json(res)
        doc["folders"] = folders
        if note:
            doc["notes"].append(note)
        docs.append(doc)
        if not as_json:
            print_result(con, res, verbose=bool(args.verbose), folders=folders, note=note)
    if as_json:
        print(json.dumps(docs[0] if len(docs) == 1 and not args.shapes else docs, indent=2))
    return 0


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


class _progress_bar:
    """A rich progress bar fed by :data:`Progress` callbacks (one task per phase)."""

    TITLES = {"space": "constraints", "model": "analytic model", "solve": "schedule timings",
              "write": "solve/lower/verify/emit", "measure": "measuring"}

    def __init__(self, console, enabled: bool = True) -> None:
        self.enabled = enabled
        self.console = console
        self.prog = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, \
            TimeElapsedColumn

        self.prog = RichProgress(TextColumn("{task.description:>24}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, transient=True)
        self.prog.__enter__()
        return self.update

    def update(self, phase: str, done: int, total: int) -> None:
        if phase not in self.tasks:
            self.tasks[phase] = self.prog.add_task(self.TITLES.get(phase, phase), total=total)
        self.prog.update(self.tasks[phase], completed=done, total=max(total, done))

    def __exit__(self, *exc):
        if self.prog is not None:
            self.prog.__exit__(*exc)
        return False


def print_result(con, res: SearchResult, *, verbose: bool = False, folders: Sequence[str] = (),
                 note: Optional[str] = None) -> None:
    """The ranking table, the winner's reason, exclusions and reference ranks (rich)."""
    from rich.table import Table

    measured = {m.label: m for m in res.measured}
    title = (f"synth search gemm {res.M}x{res.N}x{res.K} {res.dtype} {res.arch}: "
             f"{res.feasible} of {res.space_size} configurations legal, {res.solved} scheduled and timed, "
             f"{res.elapsed_s:.1f} s")
    t = Table(title=title, title_justify="left")
    cols = ["#", "tile BMxBNxBK", "warps", "stages (smem slots)", "smem KiB", "regs", "CTA/SM", "waves",
            "k-tile cyc (solver)", "pred µs", "TFLOP/s", "bound"]
    if measured:
        cols += ["meas. ms", "meas. TFLOP/s"]
    for c in cols:
        t.add_column(c, justify="right" if c not in ("tile BMxBNxBK", "bound") else "left")
    for c in res.candidates:
        row = [str(c.rank), f"{c.BM}x{c.BN}x{c.BK}", str(c.warps), f"{c.stages} ({c.smem_slots})",
               f"{c.smem_bytes / 1024:.0f}", str(c.regs_per_thread), str(c.ctas_per_sm),
               f"{c.waves} ({c.wave_efficiency:.0%})", "-" if c.ktile_cycles is None else str(c.ktile_cycles),
               f"{c.time_us:.1f}", f"{c.tflops:.1f}", c.bound]
        if measured:
            m = measured.get(c.label)
            row += ["-", "-"] if m is None else [f"{m.ms:.3f}", f"{m.tflops:.1f}"]
        t.add_row(*row)
    con.print(t)
    if res.candidates:
        con.print(f"[bold]why #1:[/bold] {res.candidates[0].why}")
    if verbose:
        for c in res.candidates[1:]:
            con.print(f"  #{c.rank}: {c.why}")
    ex = ", ".join(f"{n} {k}" for n, k in res.excluded if k or verbose)
    con.print(f"excluded before evaluation: {res.space_size - res.feasible} ({ex})")
    if res.references:
        r = Table(title="reference configurations", title_justify="left")
        for c in ("reference", "tile", "warps", "slots", "rank", "pred µs", "vs #1", "note"):
            r.add_column(c)
        for ref in res.references:
            tile = "x".join(map(str, ref.tile))
            if ref.rank is None:
                r.add_row(ref.name, tile, str(ref.warps), str(ref.slots), "excluded", "-", "-",
                          ref.excluded or "")
            else:
                stand_in = ""
                if ref.ranked_as:
                    bm, bn, bk, _, _ = ref.ranked_as
                    stand_in = f"excluded ({ref.excluded}); ranked {bm}x{bn}x{bk} instead"
                r.add_row(ref.name, tile, str(ref.warps), str(ref.slots), f"#{ref.rank}",
                          f"{ref.time_us:.1f}", f"{ref.ratio:.2f}x", stand_in)
        con.print(r)
    for n in res.notes:
        con.print(f"note: {n}")
    if not res.complete and not res.notes:
        con.print("note: ranking not proven complete")
    if note:
        con.print(f"[bold]{note}[/bold]")
    elif not res.measured:
        con.print("figures are predictions (analytic model + schedule timings), not measurements")
    for f in folders:
        con.print(f"wrote {f}/")


__all__ = ["search_gemm", "search_many", "read_shapes_csv", "search_result_to_json", "SearchResult", "Candidate",
           "ReferenceRank", "Point", "CONSTRAINTS", "enumerate_space", "is_legal", "load_references",
           "reference_points", "add_search_arguments", "cli_search", "write_candidates", "gpu_available",
           "measure", "clear_cache"]

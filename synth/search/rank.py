"""Ranking legal points: model estimates, best-first refinement with exact timings, rank numbers.

Input: a :class:`~synth.search.space.Context` and legal points. Output:
:class:`Entry` rows (point, resources, current estimate, timing), the order
they rank in (:func:`key`), 1-based ranks (:func:`ranker`) and, through a
:class:`Refiner`, the ``k`` best with every one timed (:meth:`Refiner.best_of`).

A timed estimate is never below the untimed one (the model's lower bound), so
best-first refinement stops as soon as the ``k`` best are all timed: they are
then the model's best. A split-K entry starts one step further down: a
:class:`Bound` of its untimed estimate (:func:`lazy_split_entries`), replaced by the
estimate when it reaches the front (:meth:`Refiner.exact`), then timed with its base
point's schedule; a stream-K entry likewise (:func:`lazy_stream_k_entry`). Ties are broken by a fixed key,
so rankings are deterministic.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

from .model import estimate, split_lower_bounds, stream_k_lower_bound
from .results import Candidate, Progress
from .sassmix import sass_mix
from .space import Context, Point
from .timing import PER_SOLVE_LIMIT, Timed, resources_of, timed


@dataclass(frozen=True)
class Bound:
    """A lower bound of a split entry's estimate (:func:`synth.search.model.split_lower_bound`), standing
    in for it until the entry could rank (:meth:`Refiner.exact`); it has what :func:`key` reads."""

    time_us: float
    k_tiles: int


@dataclass
class Entry:
    """One legal point with its resources, its current estimate and, once timed, its timing."""

    point: Point
    res: object
    est: object
    """The model's :class:`~synth.search.model.Estimate`, or a :class:`Bound` of it (lazy split entries)."""
    solved: Optional[Timed] = None
    mix: object = None
    """The SASS :class:`~synth.search.sassmix.InstructionMix` once compiled (None: the estimated one)."""
    keyed: Optional[tuple] = field(default=None, repr=False, compare=False)
    """``(est, key)``: :func:`key` of the estimate it was computed for (ranking calls it often)."""

    @property
    def infeasible(self) -> bool:
        """Timed and found infeasible: dropped from every ranking."""
        return self.solved is not None and self.solved.status == "INFEASIBLE"

    @property
    def estimated(self) -> bool:
        """The estimate is the model's (not a :class:`Bound` of it)."""
        return not isinstance(self.est, Bound)


def estimate_of(ctx: Context, p: Point, res, solved: Optional[Timed] = None, mix=None):
    """The model's :class:`~synth.search.model.Estimate` of ``p`` (with ``solved``'s timing and the
    SASS ``mix`` when given)."""
    ii, tail = (solved.ii, solved.tail) if solved is not None else (None, None)
    return estimate(ctx.arch, ctx.M, ctx.N, ctx.K, p.BM, p.BN, p.BK, res, ii=ii, tail=tail, mix=mix,
                    split_k=p.split_k, stream_k=p.stream_k)


def apply_sass(ctx: Context, e: Entry) -> str:
    """Read ``e``'s instruction mix from the SASS of its kernel and re-estimate it; returns why not ("" if done)."""
    if e.mix is not None:
        return ""
    mix, why = sass_mix(e.point.base, ctx.arch.name)  # a split runs the same main loop
    if mix is None:
        return why
    e.mix = mix
    e.est = estimate_of(ctx, e.point, e.res, e.solved, mix)
    return ""


def new_entry(ctx: Context, p: Point) -> Entry:
    """An untimed entry for ``p``: its (cached) resources and the model's lower-bound estimate."""
    res = resources_of(ctx, p)
    return Entry(p, res, estimate_of(ctx, p, res))


def lazy_split_entries(ctx: Context, base: Entry, points: Sequence[Point]) -> list[Entry]:
    """Untimed entries for split variants ``points`` of ``base.point``, each holding a :class:`Bound`
    of its estimate (:func:`synth.search.model.split_lower_bounds`) until :meth:`Refiner.exact`."""
    p0 = base.point
    bounds = split_lower_bounds(ctx.arch, ctx.M, ctx.N, ctx.K, p0.BM, p0.BN, p0.BK, base.res,
                                [q.split_k for q in points])
    T = -(-ctx.K // p0.BK)
    return [Entry(q, base.res, Bound(lb, T)) for q, lb in zip(points, bounds)]


def lazy_stream_k_entry(ctx: Context, base: Entry) -> Entry:
    """An untimed entry for the stream-K variant of ``base.point``, holding a :class:`Bound` of its estimate
    (:func:`synth.search.model.stream_k_lower_bound`) until :meth:`Refiner.exact`."""
    p0 = base.point
    lb = stream_k_lower_bound(ctx.arch, ctx.M, ctx.N, ctx.K, p0.BM, p0.BN, p0.BK, base.res)
    q = Point(p0.BM, p0.BN, p0.BK, p0.warps, p0.stages, 1, True)
    return Entry(q, base.res, Bound(lb, -(-ctx.K // p0.BK)))


def key(e: Entry) -> tuple:
    """Ranking key: predicted time; on ties no stream-K, then fewer K splits (no workspace), fewer k-tiles (fewer
    barriers and waits, which the model leaves out), less shared memory, fewer stages, fewer warps, then the tile."""
    if e.keyed is not None and e.keyed[0] is e.est:
        return e.keyed[1]
    p = e.point
    k = (round(e.est.time_us, 9), p.stream_k, p.split_k, e.est.k_tiles, e.res.smem_bytes, p.stages, p.warps, p.BM,
         p.BN, p.BK)
    e.keyed = (e.est, k)
    return k


def alive(entries: Iterable[Entry]) -> list[Entry]:
    """The entries not found infeasible, in the given order."""
    return [e for e in entries if not e.infeasible]


def ranker(entries: Iterable[Entry]) -> Callable[[Entry], int]:
    """``rank(e)``: 1 + the number of other (tile, warps) groups whose best prediction beats ``e``.

    Infeasible entries are left out, and so are the lazy variants still holding a :class:`Bound`: a bound
    is not a prediction (a group's base point always has one), and best-first refinement estimates every
    variant whose bound could beat an entry that ranks. The ranks are those of the entries' estimates now.
    """
    best: dict[tuple, tuple] = {}
    for e in alive(entries):
        if not e.estimated:
            continue
        g, k = e.point.group, key(e)
        if g not in best or k < best[g]:
            best[g] = k
    ordered = sorted(best.items(), key=lambda gk: gk[1])

    def rank(e: Entry) -> int:
        g, k = e.point.group, key(e)
        return 1 + sum(1 for h, kh in ordered if h != g and kh < k)

    return rank


class Refiner:
    """Times entries best first within a budget of ``max_solves`` timings and a wall-clock ``deadline``.

    Counters (read by the caller for notes): ``solves`` (configurations timed, cached or
    not; a split shares its base point's timing and counts once with it), ``calls`` (computed now), ``infeasible`` (dropped by :meth:`best_of`),
    ``truncated`` (the budget ran out) and ``unavailable`` (why no solver, or "").
    """

    def __init__(self, ctx: Context, *, deadline: float, max_solves: int, workers: int, say: Progress) -> None:
        self.ctx, self.deadline, self.max_solves, self.workers, self.say = ctx, deadline, max_solves, workers, say
        self.calls = 0
        self.solves = 0
        self.truncated = False
        self.unavailable = ""
        self.infeasible = 0
        self.estimated = 0
        self.bases: set[Point] = set()

    def exact(self, e: Entry) -> None:
        """Replace a lazy entry's :class:`Bound` by the model's estimate (with its timing, if any)."""
        if not e.estimated:
            e.est = estimate_of(self.ctx, e.point, e.res, e.solved if e.solved and e.solved.ii is not None else None,
                                e.mix)
            self.estimated += 1

    def refine(self, e: Entry) -> bool:
        """Time ``e`` (or take it from the cache); False when no more timing is allowed. A split entry whose
        base point this search has timed already takes that timing without counting against the budget."""
        self.exact(e)
        if e.solved is not None:
            return True
        base = e.point.base
        again = base in self.bases
        left = self.deadline - time.monotonic()
        if not again and (self.solves >= self.max_solves or left <= 0.05 or self.unavailable):
            self.truncated = not self.unavailable
            return False
        s, ran = timed(self.ctx, e.point, min(PER_SOLVE_LIMIT, max(left, 0.05)), self.workers)
        if not again:
            self.bases.add(base)
            self.solves += 1
            self.say("solve", self.solves, self.max_solves)
        self.calls += int(ran)
        if s.status == "UNAVAILABLE":
            self.unavailable = s.note
            return False
        e.solved = s
        if s.ii is not None:
            e.est = estimate_of(self.ctx, e.point, e.res, s, e.mix)
        return True

    def best_of(self, pool: Iterable[Entry], k: int) -> tuple[list[Entry], bool]:
        """The ``k`` best of ``pool``, one per (tile, warps) group, with every one timed; second value:
        whether they are exact (False when the budget ran out before they were all timed)."""
        heap = [(key(e), i, e) for i, e in enumerate(pool)]
        heapq.heapify(heap)
        out: list[Entry] = []
        exact = True
        seen: set[tuple[int, int, int, int]] = set()
        while heap and len(out) < k:
            _, i, e = heapq.heappop(heap)
            if e.point.group in seen:
                continue  # a worse stage count of a tile already ranked
            if not e.estimated:
                self.exact(e)
                heapq.heappush(heap, (key(e), i, e))
                continue
            if e.solved is None:
                if self.refine(e):
                    if e.infeasible:
                        self.infeasible += 1
                        continue
                    heapq.heappush(heap, (key(e), i, e))
                    continue
                exact = False
            elif e.infeasible:
                continue
            out.append(e)
            seen.add(e.point.group)
        return out, exact

    def runner_up(self, winner: Entry, order: list[Entry]) -> Optional[Entry]:
        """The best entry with another tile ``BM x BN x BK`` (timed when the budget allows: at most 8
        timings; estimated, never a :class:`Bound`)."""
        tile = winner.point.group[:3]
        heap = [(key(e), i, e) for i, e in enumerate(alive(order)) if e.point.group[:3] != tile]
        heapq.heapify(heap)
        timings = 0
        while heap:
            _, i, e = heapq.heappop(heap)
            if e.infeasible:
                continue
            if not e.estimated:
                self.exact(e)
            elif e.solved is not None or timings >= 8 or not self.refine(e):
                if not heap or key(e) <= heap[0][0]:
                    return e
                timings = 8  # no more timing: only the estimates decide from here
            else:
                timings += 1
                if e.infeasible:
                    continue
            heapq.heappush(heap, (key(e), i, e))
        return None


def to_candidate(ctx: Context, e: Entry, rank: int, why: str) -> Candidate:
    """The :class:`Candidate` of a ranked entry."""
    est, res, p = e.est, e.res, e.point
    cfg = p.config(ctx.M, ctx.N, ctx.K, ctx.dtype, ctx.arch.name)
    return Candidate(
        rank=rank, config=cfg, time_us=est.time_us, tflops=est.tflops, smem_bytes=res.smem_bytes,
        smem_slots=res.smem_slots, regs_per_thread=res.regs_per_thread, ctas_per_sm=est.ctas_per_sm,
        occupancy_limit=est.occupancy_limit, ctas=est.ctas, waves=est.waves,
        wave_efficiency=round(est.wave_efficiency, 6), k_tiles=est.k_tiles,
        ktile_cycles=e.solved.ii if e.solved is not None else None, ktile_bound=res.ii_bound,
        round_cycles=est.round_cycles, bound=est.bound,
        solver_status=e.solved.status if e.solved is not None else None, why=why,
        terms=est.terms, l2_hit=est.l2_hit, latency_cycles=est.latency_cycles, mix_source=est.mix_source,
        instructions_per_hmma=est.instructions_per_hmma, split_k_tiles=est.split_k_tiles,
        reduction_cycles=est.reduction_cycles, workspace_bytes=est.workspace_bytes,
        partial_tiles=getattr(est, "partial_tiles", 0))

"""Exact k-tile timings of search points, and the per-process caches behind them.

Input: a :class:`~synth.search.space.Context` and a legal
:class:`~synth.search.space.Point`. Output: its analytic-model resources
(:func:`resources_of`) and its k-tile timing as a :class:`Timed` ``(ii, tail,
status)`` (:func:`timed`: cached; :func:`time_now`: uncached).

Every point pins its stages and body order, so its timing is the exact least
timing of that schedule (``synth.sim.best_timing``); only a free order goes to
``synth.model.solve``. Both caches are keyed by arch, dtype and point (and the
trip count), so shapes share them; :func:`clear_cache` empties them. A split point
(``split_k > 1``) shares its :attr:`~synth.search.space.Point.base`'s entries: a
split runs the same pinned loop over fewer k-tiles, and ``(ii, tail)`` does not
depend on the trip count once it reaches the stages (docs/search.md, "Split-K").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

from ..errors import SynthError
from ..gemm import expand_gemm
from ..graph import build_graph
from ..schedule import check_schedule, schedule_from_pins
from ..sim import best_timing
from .model import resources
from .space import T_REF, Context, Point

PER_SOLVE_LIMIT = 10.0
"""At most this many seconds per solver call."""

_LOCK = threading.Lock()
_RESOURCES: dict[tuple, object] = {}
_TIMINGS: dict[tuple, "Timed"] = {}


@dataclass(frozen=True)
class Timed:
    """The k-tile interval ``ii`` and ``tail`` (= cycles - (T - 1) ii) of a point's schedule."""

    ii: Optional[int]
    tail: Optional[int]
    status: str
    """OPTIMAL | FEASIBLE | INFEASIBLE | UNAVAILABLE | ERROR"""
    note: str = ""


def clear_cache() -> None:
    """Forget cached resources and solver results (tests)."""
    with _LOCK:
        _RESOURCES.clear()
        _TIMINGS.clear()


def resources_of(ctx: Context, p: Point):
    """:class:`synth.search.model.Resources` of ``p`` (independent of the shape and the split; cached)."""
    p = p.base
    key = (ctx.arch.name, ctx.dtype, p)
    with _LOCK:
        hit = _RESOURCES.get(key)
    if hit is None:
        hit = resources(p.loop_config(T_REF, ctx.dtype, ctx.arch.name), ctx.arch)
        with _LOCK:
            _RESOURCES[key] = hit
    return hit


def timed(ctx: Context, p: Point, time_limit: float, workers: int) -> tuple[Timed, bool]:
    """The (ii, tail) of ``p``'s schedule (cached); second value: whether it was computed now.

    Unavailable solvers and FEASIBLE results under a shortened time limit are not cached.
    A split point gets its base point's timing (timed at the whole K's trip count).
    """
    p = p.base
    T = min(-(-ctx.K // p.BK), T_REF)
    key = (ctx.arch.name, ctx.dtype, p, T, workers)
    with _LOCK:
        hit = _TIMINGS.get(key)
    if hit is not None:
        return hit, False
    out = time_now(ctx, p, T, time_limit, workers)
    if out.status not in ("UNAVAILABLE",) and not (out.status == "FEASIBLE" and time_limit < PER_SOLVE_LIMIT):
        with _LOCK:
            _TIMINGS[key] = out
    return out, True


def time_now(ctx: Context, p: Point, T: int, time_limit: float, workers: int) -> Timed:
    """The k-tile timing of ``p``'s expanded problem with ``T`` k-tiles (not cached).

    Every search point pins its stages and its body order (``gemm.stage_pins``,
    ``gemm.order_pins``), so what is left to schedule is the issue offsets: the
    least timing of a fixed stage/order, which ``synth.sim.best_timing`` computes
    exactly (the figure CP-SAT proves optimal for the same pins, a test compares
    them) in milliseconds instead of the solver's II search. A problem whose order
    is free goes to ``synth.model.solve``.
    """
    problem = expand_gemm(p.loop_config(T, ctx.dtype, ctx.arch.name))
    graph = build_graph(problem)
    if problem.pins.stage is not None and problem.pins.order is not None:
        sched = schedule_from_pins(problem, graph)
        errs = check_schedule(problem, graph, sched)
        if errs:
            return Timed(None, None, "INFEASIBLE", errs[0])
        try:
            timing = best_timing(problem, graph, sched)
        except ValueError as exc:
            return Timed(None, None, "INFEASIBLE", str(exc))
        return Timed(int(timing.ii), int(timing.cycles - (T - 1) * timing.ii), "OPTIMAL")
    try:
        # synth.model loads OR-Tools: only for a free order, as synth's argument parser imports the search package
        from ..model import solve
    except ImportError as exc:
        return Timed(None, None, "UNAVAILABLE", f"synth.model is not available ({exc})")
    try:
        sched = solve(problem, graph, time_limit=time_limit, workers=workers)
    except SynthError as exc:
        return Timed(None, None, "INFEASIBLE", exc.msg)
    timing = getattr(sched, "timing", None)
    info = getattr(sched, "info", None)
    status = getattr(info, "status", None) or "UNKNOWN"
    if timing is None:
        return Timed(None, None, status, "the solver returned no timing")
    tail = timing.tail
    if timing.cycles is not None:
        tail = timing.cycles - (T - 1) * timing.ii
    return Timed(int(timing.ii), int(tail), status)

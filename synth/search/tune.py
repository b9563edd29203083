"""``search_gemm``: one shape through every phase of the search (space, model, timings, references).

Input: ``M x N x K``, dtype, arch and budgets. Output: a
:class:`~synth.search.results.SearchResult`. The phases are in
:mod:`synth.search.space` (enumerate, prune), :mod:`synth.search.rank` (model
estimates, best-first exact timings), :mod:`synth.search.references` and
:mod:`synth.search.explain`; this module only sequences them and writes the notes.
"""

from __future__ import annotations

import time
from typing import Optional

from ..errors import SynthError
from ..gemm import DTYPES
from .explain import model_error, why_other, why_winner
from .published import beats_published
from .hopper_search import hopper_context, resolve_mainloop, search_hopper
from .rank import (Refiner, alive, apply_sass, key, lazy_split_entries, lazy_stream_k_entry, new_entry, ranker,
                   to_candidate)
from .references import rank_references
from .results import Progress, ReferenceRank, SearchResult, progress_or_silent
from .space import enumerate_space, make_context, prune, split_points, stream_k_points

MAX_SOLVES = 256
"""At most this many schedule timings per search (a few dozen are typical; each takes milliseconds)."""


def _note_faster_ampere_loop(res: SearchResult, arch, time_limit: float, workers: int,
                              max_solves: int) -> SearchResult:
    """``res`` (a Hopper search the user did not pin to ``tma_wgmma``) with a note when the
    cp.async loop's best configuration is predicted faster for the shape (small grids, long K)."""
    from dataclasses import replace


    if not res.candidates or res.dtype not in DTYPES:
        return res
    try:
        alt = search_gemm(res.M, res.N, res.K, dtype=res.dtype, arch=arch, time_limit=min(time_limit, 10.0),
                          workers=workers, top=1, max_solves=max_solves, references=False, mainloop="cp_async")
    except SynthError:
        return res
    a, h = alt.candidates[0], res.candidates[0]
    if a.time_us >= h.time_us:
        return res
    note = (f"the cp.async + mma.sync main loop is predicted faster for this shape: {a.label} at "
            f"{a.tflops:.1f} TFLOP/s ({a.time_us:.1f} us) against {h.tflops:.1f} ({h.time_us:.1f} us); "
            "rerun with --mainloop cp_async to rank and write those kernels")
    return replace(res, notes=res.notes + (note,))


def search_gemm(M: int, N: int, K: int, *, dtype: str = "f16", arch="sm_80", time_limit: float = 30.0,
                workers: int = 2, top: int = 5, progress: Optional[Progress] = None,
                max_solves: int = MAX_SOLVES, references: bool = True, sass: int = 0,
                mainloop: Optional[str] = None, clusters: bool = True) -> SearchResult:
    """Search tiles, warps, stages, K splits and stream-K for ``M x N x K``; the ``top`` best, best first.

    ``time_limit`` bounds the whole search (wall clock); each solver call gets at
    most ``min(10 s, what is left)``. ``workers`` is CP-SAT's worker count.
    ``references`` also ranks the CUTLASS/Triton reference configurations.
    ``sass``: compile the ``sass`` best candidates (``True``: all ``top``) and
    the two default configurations with nvcc and use the instruction mix of their
    SASS (``sassmix.sass_mix``, cached on disk: the kernels do not depend on the
    shape, so a second search compiles nothing); the candidates are re-sorted by
    the new estimates. Without nvcc a note says so and the estimated mix is kept.
    ``arch``: an arch name, or an :class:`~synth.arch.ArchSpec` of a known arch (other clocks).
    ``mainloop``: ``cp_async`` (cp.async + mma.sync, every arch) or ``tma_wgmma`` (the Hopper
    TMA + mbarrier + wgmma kernel, sm_90 only; :func:`synth.search.hopper_search.search_hopper`,
    docs/search.md section 10); None: ``tma_wgmma`` on sm_90, else ``cp_async`` (as the problem
    key ``mainloop``). The Hopper search ignores ``time_limit``, ``workers``, ``max_solves`` and
    ``sass`` (its pipeline model is exact and cheap; it reads no SASS). When the Hopper loop is the
    default rather than asked for, the cp.async loop's best is also predicted (within ``time_limit``,
    at most 10 s) and a note says so when it is faster. ``clusters``: the Hopper search also ranks the 2x1 and
    1x2 thread-block clusters the emitter builds (False: none; the cp.async loop has none).
    Raises :class:`SynthError` on a bad shape, dtype, arch or mainloop, ``top < 1``, or an empty legal space.
    """
    t0 = time.monotonic()
    if resolve_mainloop(getattr(arch, "name", arch), mainloop) == "tma_wgmma":
        res = search_hopper(hopper_context(M, N, K, dtype, arch), top=top, references=references,
                            progress=progress, t0=t0, clusters=clusters)
        if mainloop is None:
            res = _note_faster_ampere_loop(res, arch, time_limit, workers, max_solves)
        return res
    ctx = make_context(M, N, K, dtype, arch)
    if top < 1:
        raise SynthError(None, f"--top {top}: nothing to rank", "use --top 1 or more")
    say = progress_or_silent(progress)

    space = enumerate_space()
    say("space", 0, len(space))
    legal, first, anyv = prune(ctx, space)
    say("space", len(space), len(space))
    if not legal:
        worst = max(first.items(), key=lambda kv: kv[1])
        raise SynthError(None, f"no legal configuration for {M}x{N}x{K} {dtype} on {ctx.arch.name}: every point breaks a "
                         f"constraint (most often {worst[0]})",
                         "pad K to a multiple of 8" if worst[0] == "cp.async-16B" else "try another arch")
    entries = {}
    for i, p in enumerate(legal):
        entries[p] = new_entry(ctx, p)
        if i % 64 == 0:
            say("model", i, len(legal))
    say("model", len(legal), len(legal))
    # split-K variants share their base point's resources and timing; each starts at a cheap lower bound
    # of its estimate and is estimated only when that bound could rank it (Refiner.exact)
    splits, _ = split_points(ctx, legal)
    for p, qs in splits.items():
        for e in lazy_split_entries(ctx, entries[p], qs):
            entries[e.point] = e
    n_splits = sum(len(qs) for qs in splits.values())
    # stream-K variants likewise (one per legal point: its loop is proved for every trip count from 1)
    streamk = stream_k_points(legal)
    for q in streamk:
        e = lazy_stream_k_entry(ctx, entries[q.base])
        entries[e.point] = e

    refiner = Refiner(ctx, deadline=t0 + time_limit, max_solves=max_solves, workers=workers, say=say)
    ranked_top, complete = refiner.best_of(entries.values(), top)
    notes: list[str] = []
    n_sass = len(ranked_top) if sass is True else max(0, int(sass))
    if n_sass:
        why = [w for w in (apply_sass(ctx, e) for e in ranked_top[:n_sass]) if w]
        # the SASS mix moves the compiled candidates' estimates, so configurations left out may now beat them:
        # choose again, compile the newcomers, until the top is stable (each round only adds compiled entries)
        for _ in range(4):
            compiled = {e.point for e in ranked_top if e.mix is not None}
            ranked_top, complete = refiner.best_of(entries.values(), top)
            if {e.point for e in ranked_top[:n_sass]} <= compiled:
                break
            why += [w for w in (apply_sass(ctx, e) for e in ranked_top[:n_sass]) if w]
        ranked_top.sort(key=key)
        done = sum(1 for e in ranked_top if e.mix is not None)
        notes.append(f"instruction mix read from the SASS of {done} of the {len(ranked_top)} candidates"
                     + (f" ({why[0]})" if why else "") + "; other configurations use the estimated mix")
    refs: list[ReferenceRank] = []
    if references:
        refs = rank_references(ctx, entries, ranked_top, refiner, sass=bool(n_sass))
    say("solve", refiner.solves, refiner.solves)
    order = sorted(alive(entries.values()), key=key)
    rank_of = ranker(entries.values())
    if refiner.unavailable:
        notes.append(f"solver unavailable, ranking by the analytic model only: {refiner.unavailable}")
        complete = False
    elif refiner.truncated:
        notes.append(f"solver budget reached ({refiner.solves} solves, time limit {time_limit:g} s): "
                     "later candidates are ranked by their lower bound")
    if refiner.infeasible:
        notes.append(f"{refiner.infeasible} configurations the solver found infeasible were dropped")
    if any(e.solved is not None and e.solved.status == "FEASIBLE" for e in ranked_top):
        notes.append("some schedules are FEASIBLE, not proven OPTIMAL, within the solver time limit")
    winner = ranked_top[0] if ranked_top else None
    cands = []
    if winner is not None:
        ties = len({e.point.group for e in order if key(e)[0] == key(winner)[0]} - {winner.point.group})
        runner = refiner.runner_up(winner, order)
        unsplit = entries.get(winner.point.base)
        for e in ranked_top:
            why = why_winner(ctx, e, ties, runner, unsplit) if e is winner else why_other(ctx, e, winner)
            cands.append(to_candidate(ctx, e, rank_of(e), why))
    excluded = dict(first)
    if refiner.infeasible:
        excluded["solver-infeasible"] = refiner.infeasible
    return SearchResult(
        M=M, N=N, K=K, dtype=dtype, arch=ctx.arch.name, candidates=tuple(cands), space_size=len(space),
        feasible=len(legal), excluded=tuple(excluded.items()), violations=tuple(anyv.items()),
        solved=len({p.base for p, e in entries.items() if e.solved is not None and e.solved.ii is not None}),
        complete=complete and bool(cands), references=tuple(refs), notes=tuple(notes),
        elapsed_s=time.monotonic() - t0, solver_calls=refiner.calls, split_points=n_splits,
        stream_k_points=len(streamk),
        warnings=beats_published(ctx.arch.name, (M, N, K), cands, model_error(ctx.arch.name)))

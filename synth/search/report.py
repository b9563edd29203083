"""A search result for people and programs: the rich tables and the JSON document.

Input: a :class:`~synth.search.results.SearchResult`. Output: a JSON-ready dict
with stable keys (:func:`search_result_to_json`, see docs/search.md) or the
ranking table, the winner's reason, the exclusions and the reference ranks on a
rich console (:func:`print_result`).
"""

from __future__ import annotations

from typing import Optional, Sequence

from .explain import model_error, spread_note
from .results import Candidate, ReferenceRank, SearchResult


def search_result_to_json(result: SearchResult) -> dict:
    """A JSON-ready dict of ``result`` (stable keys; see docs/search.md)."""

    def cand(c: Candidate) -> dict:
        return {
            "rank": c.rank, "name": c.name, "mainloop": c.mainloop, "BM": c.BM, "BN": c.BN, "BK": c.BK,
            "warps": c.warps, "stages": c.stages, "k_pipe_mmas": c.k_pipe_mmas, "split_k": c.split_k,
            "stream_k": c.stream_k, "persistent": c.persistent,
            "pingpong": bool(getattr(c.config, "pingpong", False)),
            "epilogue": getattr(c.config, "epilogue", "register") if c.mainloop == "tma_wgmma" else None,
            "cluster": c.cluster,
            "smem_slots": c.smem_slots,
            "predicted_us": round(c.time_us, 3), "tflops": round(c.tflops, 2),
            "smem_bytes": c.smem_bytes, "regs_per_thread": c.regs_per_thread, "ctas_per_sm": c.ctas_per_sm,
            "occupancy_limit": c.occupancy_limit, "ctas": c.ctas, "waves": c.waves,
            "wave_efficiency": round(c.wave_efficiency, 4), "k_tiles": c.k_tiles, "split_k_tiles": c.split_k_tiles,
            "ktile_cycles": c.ktile_cycles, "ktile_bound": c.ktile_bound, "round_cycles": c.round_cycles,
            "bound": c.bound, "solver_status": c.solver_status, "why": c.why, "why_short": c.why_short or c.why,
            "model": {"terms_cycles_per_round": dict(c.terms), "l2_hit": c.l2_hit,
                      "latency_cycles": c.latency_cycles, "mix_source": c.mix_source,
                      "instructions_per_hmma": c.instructions_per_hmma,
                      "reduction_cycles": c.reduction_cycles, "workspace_bytes": c.workspace_bytes,
                      "grid_ctas": c.ctas, "partial_tiles": c.partial_tiles, "tiles_per_cta": c.tiles_per_cta,
                      "epilogue_cycles": c.epilogue_cycles, "boundary_cycles": c.boundary_cycles,
                      "prologue_cycles": c.prologue_cycles, "idle_ctas": c.idle_ctas},
        }

    def ref(r: ReferenceRank) -> dict:
        return {"name": r.name, "tile": list(r.tile), "warps": r.warps, "slots": r.slots, "stages": r.stages,
                "k_pipe_mmas": r.k_pipe_mmas,
                "rank": r.rank, "predicted_us": None if r.time_us is None else round(r.time_us, 3),
                "ratio": None if r.ratio is None else round(r.ratio, 4), "excluded": r.excluded,
                "tflops": None if r.tflops is None else round(r.tflops, 2),
                "ranked_as": None if r.ranked_as is None else dict(zip(("BM", "BN", "BK", "warps", "stages"),
                                                                        r.ranked_as))}

    return {
        "shape": {"M": result.M, "N": result.N, "K": result.K}, "dtype": result.dtype, "arch": result.arch,
        "mainloop": result.mainloop,
        "candidates": [cand(c) for c in result.candidates],
        "space_size": result.space_size, "feasible": result.feasible, "split_points": result.split_points,
        "stream_k_points": result.stream_k_points, "persistent_points": result.persistent_points,
        "cluster_points": result.cluster_points,
        "excluded": dict(result.excluded), "violations": dict(result.violations),
        "solved": result.solved, "solver_calls": result.solver_calls, "complete": result.complete,
        "references": [ref(r) for r in result.references], "notes": list(result.notes),
        "warnings": list(result.warnings),
        "elapsed_s": round(result.elapsed_s, 3),
        "measured": [{"name": m.label, "ms": m.ms, "tflops": m.tflops, "ok": m.ok, "repeats": m.repeats,
                      "predicted_us": round(m.predicted_us, 3),
                      "model_error": None if m.model_error != m.model_error else round(m.model_error, 4)}
                     for m in result.measured] or None,
        "predictions_only": not result.measured,
        "ranked_by": result.ranked_by,
    }


def split_cell(c: Candidate) -> str:
    """The ``split K`` column of a candidate: its split count, or ``stream-K``."""
    return "stream-K" if c.stream_k else str(c.split_k)


def print_result(con, res: SearchResult, *, verbose: bool = False, folders: Sequence[str] = (),
                 note: Optional[str] = None, explain: bool = False) -> None:
    """The ranking table, the winner's reason (short; ``explain``: in full), exclusions and reference ranks
    (rich)."""
    # rich: only when a table is printed
    from rich.table import Table

    measured = {m.label: m for m in res.measured}
    hopper = res.mainloop == "tma_wgmma"
    done = "evaluated by the Hopper pipeline model" if hopper else "scheduled and timed"
    variants = [f"{res.split_points} split-K"] if res.split_points else []
    variants += [f"{res.stream_k_points} stream-K"] if res.stream_k_points else []
    variants += [f"{res.persistent_points} persistent"] if res.persistent_points else []
    variants += [f"{res.cluster_points} cluster"] if res.cluster_points else []
    splits = f" (and {' and '.join(variants)} variants)" if variants else ""
    title = (f"synth search gemm {res.M}x{res.N}x{res.K} {res.dtype} {res.arch} ({res.mainloop} main loop): "
             f"{res.feasible} of {res.space_size} configurations legal{splits}, {res.solved} {done}, "
             f"{res.elapsed_s:.1f} s")
    t = Table(title=title, title_justify="left")
    cols = ["#", "tile BMxBNxBK", "warps", "stages (K_PIPE_MMAS)" if hopper else "stages (smem slots)", "split K"]
    cols += ["persistent", "epilogue", "cluster"] if hopper else []
    cols += ["smem KiB", "regs", "CTA/SM", "waves", "k-tile cyc (pipeline)" if hopper else "k-tile cyc (solver)", "pred µs",
            "TFLOP/s", "bound"]
    if measured:
        cols += ["meas. ms", "meas. TFLOP/s", "model error"]
    for c in cols:
        t.add_column(c, justify="right" if c not in ("tile BMxBNxBK", "bound") else "left")
    for c in res.candidates:
        row = [str(c.rank), f"{c.BM}x{c.BN}x{c.BK}", str(c.warps),
               f"{c.stages} ({c.k_pipe_mmas if hopper else c.smem_slots})"]
        row += [split_cell(c)]
        row += [(f"yes{', ping-pong' if getattr(c.config, 'pingpong', False) else ''}: {c.tiles_per_cta} tiles/CTA "
                 f"({c.wave_efficiency:.0%})" if c.persistent else "no"),
                 "TMA store" if getattr(c.config, "epilogue", "register") == "tma_store" else "register",
                 "no" if c.cluster == "1x1" else f"{c.cluster} ({'B' if c.cluster == '2x1' else 'A'} multicast"
                 + (f", {c.idle_ctas} idle CTAs)" if c.idle_ctas else ")")] if hopper else []
        row += [f"{c.smem_bytes / 1024:.0f}", str(c.regs_per_thread), str(c.ctas_per_sm),
               str(c.waves) if c.persistent else f"{c.waves} ({c.wave_efficiency:.0%})", "-" if c.ktile_cycles is None else str(c.ktile_cycles),
               f"{c.time_us:.1f}", f"{c.tflops:.1f}", c.bound]
        if measured:
            m = measured.get(c.label)
            row += ["-", "-", "-"] if m is None else [f"{m.ms:.3f}", f"{m.tflops:.1f}", f"{m.model_error:+.1%}"]
        t.add_row(*row)
    con.print(t)
    tie = "" if res.measured else spread_note([c.time_us for c in res.candidates],
                                               model_error(res.arch, res.mainloop))
    if tie:
        con.print(f"note: {tie}")
    if res.candidates:
        w = res.candidates[0]
        con.print(f"[bold]why #1:[/bold] {w.why if explain or verbose else (w.why_short or w.why)}")
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
        con.print("figures are predictions of the performance model (docs/search.md), not measurements")
    for f in folders:
        con.print(f"wrote {f}/")

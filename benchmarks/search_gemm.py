"""Benchmark of ``synth search gemm``: search time, winner, and where CUTLASS's and Triton's defaults rank.

Usage::

    python benchmarks/search_gemm.py [--arch sm_80] [--workers 2] [--processes 1] [--sass] [--json results.json]

First it prints the calibration table: each published figure of
synth/data/published_gemm.yaml (CUTLASS's profiler documentation, cuBLAS and the
Triton tutorial on A100) beside the model's prediction for the same shape (the
named configuration for CUTLASS, the search's winner for cuBLAS, the best of the
Triton tutorial's configurations for Triton), predicted as the source's harness
measured it (its clock and per-call overhead, ``synth.search.calibrate``), and
the error; target: within 15 % each, and the same ordering. Then the shape sweep.

For each of ten shapes (square 512..8192, skinny, K-heavy) it runs the search
and prints: the search time, the winner (tile, warps, stages, K split or stream-K, predicted time
and TFLOP/s), and the rank and predicted-time ratio (default / winner) of

* CUTLASS's default sm80 f16 configuration (128x256x64, 8 warps, 3 stages) and
* Triton's default (the matmul tutorial's 128x128x64, 4 warps, 3 stages),

both from synth/data/reference_configs.yaml, plus the best member of each
reference list. Both defaults are in synth's space on sm_80 and sm_90 and are
ranked themselves; on an arch where one does not fit (CUTLASS's 144 KiB of
shared memory on the 99 KiB sm_86/sm_89) the cell says ``(as BMxBNxBK)``: the
nearest legal stand-in (same tile area and slots, BK halved) is ranked. The
first shape runs with a cold cache (the "one shape" figure); the sweep shares
schedule timings between shapes, as ``search_many`` does per process.

Targets: one shape < 30 s on 2 cores; the 10-shape sweep < 3 min.

With ``--arch sm_90`` the search ranks the Hopper kernels (``mainloop: tma_wgmma``,
docs/search.md section 10; ``--mainloop cp_async`` for the mma.sync loop): the table
then gives the winner's stages and K_PIPE_MMAS, where CUTLASS 3's cooperative 128x128x64
and 128x256x64 kernels rank, and, as the baseline measured in the same run, the best
prediction of the cp.async + mma.sync loop on the same arch (``cp_async winner``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHAPES = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 64, 8192),      # skinny N (N <= 64, K >= 4096)
    (64, 8192, 4096),      # skinny M
    (1024, 1024, 16384),   # large K
    (256, 256, 16384),     # large K, few CTAs
    (4096, 4096, 256),     # small K
    (4096, 512, 1024),     # wide and short
]


def fit_mix(con, arch: str) -> int:
    """Compile the fit points, fit ``other = a + b ldgsts + c ldsm`` and print the residuals."""
    import numpy as np

    from synth.search.sassmix import FIT_POINTS, OTHER_FIT, sass_mix, structural_counts

    X, y, rows = [], [], []
    for p in FIT_POINTS:
        mix, why = sass_mix(p, arch)
        if mix is None:
            con.print(f"{p.label}: {why}")
            continue
        c = structural_counts(p)
        X.append([1.0, c["ldgsts"], c["ldsm"]])
        y.append(mix.other)
        rows.append((p.label, mix))
    if len(y) < 3:
        con.print("not enough compiled points to fit")
        return 1
    coef, *_ = np.linalg.lstsq(np.array(X), np.array(y), rcond=None)
    pred = np.array(X) @ coef
    for (label, mix), f in zip(rows, pred):
        base = max(mix.hmma * 8, mix.total)
        con.print(f"{label:20s} other {mix.other:6.1f} fit {f:6.1f}  per HMMA {mix.per_hmma:.2f}  "
                  f"HMMA-free run {mix.hmma_free_run}  solo - max(tensor, issue) {mix.solo_cycles - base:+.1f}")
    con.print(f"OTHER_FIT = ({coef[0]:.1f}, {coef[1]:.1f}, {coef[2]:.1f})   (in synth/search/sassmix.py: {OTHER_FIT})")
    return 0


def calibration(con, arch: str, sass: bool) -> list[dict]:
    """Predicted vs published for every point of synth/data/published_gemm.yaml on ``arch``.

    Each point is predicted as its harness measured it (clock, per-call overhead):
    ``synth.search.calibrate``, docs/search.md section 8.
    """
    from rich.table import Table

    from synth.search.calibrate import TARGET, calibrate, summary

    cal = calibrate(arch, sass)
    t = Table(title=f"calibration on {arch}: predicted vs published TFLOP/s (target: within {TARGET:.0%})",
              title_justify="left")
    for c in ("point", "shape", "published", "predicted", "error", "harness (clock, overhead)", "compared with"):
        t.add_column(c)
    for r in cal:
        t.add_row(r.name, "x".join(map(str, r.shape)), f"{r.published:.1f}", f"{r.predicted:.1f}",
                  f"{r.error:+.1%}", f"{r.harness} ({r.clock_ghz:g} GHz, {r.overhead_us:.1f} us)", r.compared)
    con.print(t)
    if cal:
        s = summary(cal)
        con.print(f"within {TARGET:.0%}: {s.within}/{s.total}; same total ordering as published: {s.same_order}; "
                  f"pairs more than {TARGET:.0%} apart ordered as published: {s.pairs_agree}/{s.pairs}")
    return [{"name": r.name, "shape": list(r.shape), "published": r.published, "predicted": round(r.predicted, 1),
             "error": round(r.error, 4), "harness": r.harness, "clock_ghz": r.clock_ghz,
             "overhead_us": round(r.overhead_us, 2), "compared": r.compared, "source": r.source} for r in cal]


def _ref_cell(r) -> str:
    if r is None:
        return "-"
    if r.rank is None:
        return f"excluded ({r.excluded})"
    s = f"#{r.rank}  {r.tflops:.1f} TFLOP/s" if r.tflops is not None else f"#{r.rank}  {r.ratio:.2f}x"
    if r.ranked_as is not None:
        bm, bn, bk, _, _ = r.ranked_as
        s += f" (as {bm}x{bn}x{bk})"
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--mainloop", default=None, help="tma_wgmma | cp_async (default: the arch's, as synth search)")
    ap.add_argument("--workers", type=int, default=2, help="CP-SAT workers per search, for free-order schedules (default 2)")
    ap.add_argument("--processes", type=int, default=1,
                    help="also time the sweep with search_many on this many local processes (default: skip)")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    ap.add_argument("--fit-mix", action="store_true",
                    help="compile sassmix.FIT_POINTS, print the least-squares fit of OTHER_FIT and exit")
    ap.add_argument("--sass", action="store_true",
                    help="read the top candidates' instruction mix from their SASS (nvcc; cached on disk)")
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from synth.search import clear_cache, search_gemm, search_many, search_result_to_json
    from synth.search.report import split_cell

    con = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    if args.fit_mix:
        return fit_mix(con, args.arch)
    cal = calibration(con, args.arch, args.sass)
    rows, docs = [], []
    clear_cache()
    t_sweep = time.monotonic()
    for i, shape in enumerate(SHAPES):
        t0 = time.monotonic()
        res = search_gemm(*shape, arch=args.arch, workers=args.workers, time_limit=args.time_limit, top=5,
                          sass=args.sass, mainloop=args.mainloop)
        dt = time.monotonic() - t0
        refs = {r.name: r for r in res.references}
        if res.mainloop == "tma_wgmma":  # the mma.sync loop on the same arch, as the baseline
            base = search_gemm(*shape, arch=args.arch, workers=args.workers, time_limit=args.time_limit, top=1,
                               references=False, mainloop="cp_async")
            refs["cp_async winner"] = base.winner
        rows.append((shape, dt, res, refs))
        doc = search_result_to_json(res)
        doc["search_s"] = round(dt, 3)
        doc["cold_cache"] = i == 0
        if "cp_async winner" in refs:
            b = refs["cp_async winner"]
            doc["cp_async_winner"] = {"name": b.name, "predicted_us": round(b.time_us, 3), "tflops": round(b.tflops, 2)}
        docs.append(doc)
        con.print(f"[{i + 1}/{len(SHAPES)}] {shape[0]}x{shape[1]}x{shape[2]}: {dt:.1f} s", style="dim")
    sweep_s = time.monotonic() - t_sweep

    hopper = rows[0][2].mainloop == "tma_wgmma"
    what = "Hopper kernels (TMA + wgmma), pipeline model" if hopper else "pinned schedules timed exactly"
    t = Table(title=f"synth search gemm on {args.arch}, {what} "
                    "(figures are model predictions, not measurements)", title_justify="left")
    refcols = (("cutlass3 cooperative 128x128", "cutlass3 cooperative 128x256", "cp_async winner") if hopper else
               ("cutlass default", "triton default", "best cutlass sm80", "best triton tutorial"))
    for c in ("shape MxNxK", "search s", "solver calls", "winner", "stages (K_PIPE)" if hopper else "stages (slots)",
              "split K (or stream-K)", "pred µs", "TFLOP/s", "bound") + refcols:
        t.add_column(c)
    for shape, dt, res, refs in rows:
        w = res.winner
        cells = []
        for name in refcols:
            r = refs.get(name)
            cells.append(f"{r.label}  {r.tflops:.1f} TFLOP/s" if name == "cp_async winner" and r else _ref_cell(r))
        t.add_row(f"{shape[0]}x{shape[1]}x{shape[2]}", f"{dt:.1f}", str(res.solver_calls),
                  f"{w.BM}x{w.BN}x{w.BK} w{w.warps}",
                  f"{w.stages} ({w.k_pipe_mmas if hopper else w.smem_slots})", split_cell(w), f"{w.time_us:.1f}",
                  f"{w.tflops:.1f}", w.bound, *cells)
    con.print(t)
    first = rows[0][1]
    worst = max(r[1] for r in rows)
    con.print(f"one shape, cold cache: {first:.1f} s (target < 30 s); slowest shape: {worst:.1f} s; "
              f"{len(SHAPES)}-shape sweep: {sweep_s:.1f} s (target < 180 s)")
    summary = {"arch": args.arch, "workers": args.workers, "calibration": cal, "first_shape_s": round(first, 3),
               "slowest_shape_s": round(worst, 3), "sweep_s": round(sweep_s, 3), "shapes": docs}
    if args.processes > 1:
        clear_cache()
        t0 = time.monotonic()
        many = search_many(SHAPES, processes=args.processes, arch=args.arch, workers=1,
                           time_limit=args.time_limit, top=5, mainloop=args.mainloop)
        dt = time.monotonic() - t0
        same = [m.winner.point == r[2].winner.point for m, r in zip(many, rows)]
        con.print(f"search_many on {args.processes} processes: {dt:.1f} s; "
                  f"same winners as the sequential sweep: {sum(same)}/{len(same)}")
        summary["search_many_s"] = round(dt, 3)
        summary["search_many_processes"] = args.processes
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

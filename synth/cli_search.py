"""``synth search gemm`` on the command line: arguments, progress bars, output.

Input: the parsed ``argparse`` namespace (:func:`add_search_arguments` defines
it). Output: tables or JSON on stdout and the exit status; a
:class:`~synth.errors.SynthError` propagates to :mod:`synth.cli` (status 2).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys

from .bounds import MAX_GEMM_DIM, MAX_SEARCH_TOP
from .errors import Loc, SynthError
from .flow.candidates import TopIncomplete, write_candidates
from .run import gpu_available, measure


SASS_TOP = 3
"""Candidates whose kernels ``synth search gemm`` compiles to read their instruction mix
(plus the two default configurations; all cached on disk, so only a first search pays)."""


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``synth search gemm``."""
    parser.add_argument("--M", type=int, help="rows of A and C")
    parser.add_argument("--N", type=int, help="columns of B and C")
    parser.add_argument("--K", type=int, help="the reduction size")
    parser.add_argument("--dtype", default="f16", help="operand type (default %(default)s)")
    parser.add_argument("--arch", default="sm_80", help="sm_80 | sm_86 | sm_89 | sm_90 (default %(default)s)")
    parser.add_argument("--mainloop", default=None, metavar="LOOP",
                        help="tma_wgmma (the Hopper TMA + wgmma kernel, sm_90's default) or cp_async "
                             "(cp.async + mma.sync, every arch's default but sm_90), as the problem key mainloop")
    parser.add_argument("--top", type=int, default=None, metavar="K",
                        help="write the K best configurations' folders (problem.yaml, schedule, program, "
                             "certificate, kernel.cu) under --out; without it the 5 best are ranked, nothing written")
    parser.add_argument("--time-limit", type=float, default=30.0, metavar="SECONDS",
                        help="wall-clock budget of the search per shape, and of each --top folder's proofs (default %(default)s)")
    parser.add_argument("--workers", type=int, default=2,
                        help="CP-SAT workers; with --shapes, local processes (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument("--shapes", metavar="CSV", help="search every shape of a CSV file with columns M,N,K")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="with --shapes: run on this Dask scheduler (tcp://host:port) instead of local processes")
    parser.add_argument("--measure", action="store_true",
                        help="time the top candidates on the GPU (CUDA Python or pycuda); without one, say the figures "
                             "are predictions")
    parser.add_argument("--no-sass", action="store_true",
                        help="do not compile the 3 best candidates to read their instruction mix from SASS "
                             "(every configuration then uses the estimated mix)")
    parser.add_argument("--no-clusters", action="store_true",
                        help="sm_90: do not rank the 2x1 and 1x2 thread-block cluster kernels (docs/search.md, "
                             "section 10, \"Clusters\")")
    parser.add_argument("--out", metavar="DIR", help="folder for --top/--measure (default out/search-MxNxK-ARCH/)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print every constraint and reference")
    parser.add_argument("--explain", action="store_true",
                        help="print the winner's whole reasoning (every variant, cluster and kind it was compared "
                             "with) instead of the short reason; the JSON always has both (why, why_short)")
    parser.add_argument("--force", action="store_true", help="replace existing output folders")


def cli_search(args: argparse.Namespace) -> int:
    """``synth search gemm``: returns the exit status (SynthError propagates to the CLI: status 2)."""
    # rich: a terminal's output only (synth's argument parser imports this module)
    from rich.console import Console

    # here, not at the top: the search loads its modules when it runs (synth's argument parser imports this one)
    from .search.distribute import search_many
    from .search.report import print_result, search_result_to_json
    from .search.shapes import read_shapes_csv
    from .search.tune import search_gemm

    quiet = bool(getattr(args, "quiet", False))
    as_json = bool(getattr(args, "json", False))
    show_progress = not (quiet or as_json)

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
        for k in ("M", "N", "K"):  # the bounds --shapes holds its rows to (docs/bounds.md)
            v = getattr(args, k)
            if not 1 <= v <= MAX_GEMM_DIM:
                raise SynthError(None, f"--{k} {v} is {'not positive' if v < 1 else 'above the maximum'} "
                                 f"{'' if v < 1 else MAX_GEMM_DIM}".rstrip(),
                                 f"pass --{k} in 1 .. {MAX_GEMM_DIM} (docs/bounds.md)")
        shapes = [(args.M, args.N, args.K)]
    if args.scheduler and not args.shapes:
        raise SynthError(None, "--scheduler distributes several shapes", "use it with --shapes shapes.csv")
    if args.scheduler:
        check_scheduler_address(args.scheduler)
    write_k = args.top
    if write_k is not None and write_k < 1:
        raise SynthError(None, f"--top {write_k}: nothing to write", "use --top 1 or more")
    if write_k is not None and write_k > MAX_SEARCH_TOP:
        raise SynthError(None, f"--top {write_k} is above the maximum {MAX_SEARCH_TOP}",
                         f"use --top 1 .. {MAX_SEARCH_TOP}: each folder is solved, proved and emitted "
                         "(docs/bounds.md)")
    if args.out is not None:
        check_out_parent(args.out)
    top = write_k or 5
    kw = dict(dtype=args.dtype, arch=args.arch, time_limit=args.time_limit, top=top,
              sass=0 if getattr(args, "no_sass", False) else SASS_TOP, mainloop=getattr(args, "mainloop", None),
              clusters=not getattr(args, "no_clusters", False))

    if len(shapes) == 1:
        with _progress_bar(err, enabled=show_progress) as prog:
            results = [search_gemm(*shapes[0], workers=args.workers, progress=prog, **kw)]
    else:
        procs = max(1, args.workers)
        where = args.scheduler or f"{procs} local processes"
        with err.status(f"searching {len(shapes)} shapes on {where}...") if show_progress else contextlib.nullcontext():
            results = search_many(shapes, scheduler=args.scheduler, processes=procs, workers=1, **kw)

    want_measure = bool(args.measure)
    hopper = any(r.mainloop == "tma_wgmma" for r in results)  # the sm_90a kernel: an sm_90 GPU, CUDA Python
    gpu_ok, gpu_why = gpu_available(hopper=hopper) if want_measure else (False, "")
    if want_measure and gpu_ok and write_k is None:
        write_k = top
    docs = []
    incomplete: list[TopIncomplete] = []  # --top folders whose proofs ran out of time: raised after the ranking
    for res in results:
        for w in res.warnings:  # a prediction above what was published for the shape: on stderr, and in the JSON
            err.print(f"warning: {w}", markup=False)
        folders: list[str] = []
        missing: list[dict] = []
        if write_k is not None:
            base = args.out or os.path.join("out", f"search-{res.M}x{res.N}x{res.K}-{res.arch}")
            if len(results) > 1 and args.out:
                base = os.path.join(args.out, f"{res.M}x{res.N}x{res.K}-{res.arch}")
            try:
                with _progress_bar(err, enabled=show_progress) as prog:
                    folders = write_candidates(res, base, k=write_k, time_limit=args.time_limit,
                                               workers=args.workers, force=args.force, progress=prog)
            except TopIncomplete as e:  # the ranking stands: printed and in the JSON, the error after it
                folders, missing = e.written, e.to_json()
                incomplete.append(e)
        note = None
        if want_measure:
            if gpu_ok and missing:
                note = "--measure: not measured, since some --top folders were not written"
            elif gpu_ok:
                with _progress_bar(err, enabled=show_progress) as prog:
                    res = measure(res, folders, progress=prog)
            elif not docs:  # say it once, not once per shape
                note = (f"--measure: no GPU here ({gpu_why}); every figure is a prediction of the "
                        "performance model, not a measurement")
        doc = search_result_to_json(res)
        doc["folders"] = folders
        if missing:
            doc["not_written"] = missing
        if note:
            doc["notes"].append(note)
        docs.append(doc)
        if not as_json:
            print_result(con, res, verbose=bool(args.verbose), folders=folders, note=note,
                         explain=bool(getattr(args, "explain", False)))
    if as_json:
        print(json.dumps(docs[0] if len(docs) == 1 and not args.shapes else docs, indent=2))
    if incomplete:
        raise TopIncomplete([f for e in incomplete for f in e.written], [m for e in incomplete for m in e.missing],
                            args.time_limit)
    return 0


_ADDRESS = re.compile(r"(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})/?")


def check_scheduler_address(address: str) -> None:
    """SynthError unless ``address`` reads as a Dask scheduler address ``[tcp://]HOST:PORT`` (port 1..65535).

    An address of that form that nothing answers is refused by Dask's connect timeout (10 s)."""
    m = _ADDRESS.fullmatch(address)
    if m is None or not 1 <= int(m.group(1)) <= 65535:
        shown = address if len(address) <= 80 else address[:77] + "..."
        raise SynthError(None, f"--scheduler {shown!r} is not a scheduler address",
                         "write tcp://HOST:PORT (as 'dask scheduler' prints it), e.g. tcp://10.0.0.5:8786")


def check_out_parent(out: str) -> None:
    """SynthError unless ``out`` is a folder or can become one: it, and the nearest of its parents that
    exists, must be folders (a file there would fail only after the whole search)."""
    path = os.path.abspath(out)
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return
        probe = parent
    if not os.path.isdir(probe):
        what = "--out" if probe == path else f"--out's parent {probe}"
        raise SynthError(Loc(out), f"{what} is a file, not a folder", "pass a folder for --out (it is created "
                         "when missing)")


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
        # rich: a terminal's output only (synth's argument parser imports this module)
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

"""``synth check FILE``: arguments and exit status (0 all waits proven, 1 one is not, 2 bad input)."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import Loc, SynthError
from . import FORMS


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    """The ``check`` sub-command's arguments."""
    p.add_argument("file", help="TTGIR (.ttgir), TVMScript after InjectSoftwarePipeline (.py), MLIR with "
                   "nvgpu async copies (.mlir), or TileLang's lowered device TIR (.tir)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--trip-count", type=int, metavar="T", help="prove for this trip count only")
    g.add_argument("--min-trip-count", type=int, metavar="N",
                   help="prove for every trip count >= N (default: the smallest the loop allows)")
    p.add_argument("--func", metavar="NAME",
                   help="TVMScript: check this @T.prim_func only (default: every one with a pipelined loop)")
    p.add_argument("--form", choices=FORMS, help="input form (default: detected from the content)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="SECONDS",
                   help="solver time limit per proof obligation (default %(default)s)")
    p.add_argument("--without-lowering-barriers", action="store_true",
                   help="Triton sm_90 TTGIR: prove the TTGIR's own convergence points only, without the bar.sync "
                        "Triton's lowering (3.9) puts before each mbarrier arrive and expect")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on stdout; failures go to stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="also print the mapped program")


def cli_check(args) -> int:
    """Run ``synth check``; returns the exit status (SynthError propagates: exit 2)."""
    for flag, v in (("--trip-count", args.trip_count), ("--min-trip-count", args.min_trip_count)):
        if v is not None and not 0 <= v <= 1_000_000:
            raise SynthError(Loc(args.file), f"{flag} {v} is out of range", f"use {flag} between 0 and 1000000")
    if not 0 < args.time_limit <= 86400:
        raise SynthError(None, f"--time-limit {args.time_limit} is out of range", "use 0 < SECONDS <= 86400")
    from .check import check_file_all  # loads Z3: only when synth check runs

    results = check_file_all(args.file, trip_count=args.trip_count, min_trip_count=args.min_trip_count,
                             time_limit=args.time_limit, form=args.form, func=getattr(args, "func", None),
                             arrive_sync=not getattr(args, "without_lowering_barriers", False))
    ok = all(r.ok for r in results)
    if args.json:
        if len(results) == 1:
            doc = results[0].to_json()
        else:
            counts = {k: sum(r.counts()[k] for r in results) for k in ("proven", "refuted", "unknown")}
            doc = {"file": args.file, "source": results[0].loop.source, "ok": ok, "counts": counts,
                   "functions": [r.to_json() for r in results]}
        print(json.dumps(doc, indent=2))
    elif args.quiet:
        for r in results:
            if not r.ok:
                print(r.render(), file=sys.stderr)
    else:
        print("\n\n".join(r.render(verbose=args.verbose) for r in results))
    return 0 if ok else 1


__all__ = ["add_check_arguments", "cli_check"]

"""The ``synth`` command: arguments, printing and exit codes only (SPEC §2).

Exit status: 0 success; 1 a wait is refuted or unproven, a certificate fails,
or no GPU for ``run``; 2 bad input (:class:`~synth.errors.SynthError`), with one
message naming file, line and fix and no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from .errors import Loc, SynthError


def _common(p: argparse.ArgumentParser, *, time_limit: float = 20.0) -> None:
    p.add_argument("--time-limit", type=float, default=time_limit, metavar="SECONDS",
                   help="solver time limit per solve/proof (default %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="CP-SAT worker threads (default %(default)s)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    p.add_argument("-v", "--verbose", action="store_true", help="print more detail")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="synth", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("solve", help="synthesize, lower, prove and write everything under OUT/")
    p.add_argument("problem", help="problem.yaml")
    p.add_argument("-o", "--out", help="output folder (default out/<name>/)")
    p.add_argument("--force", action="store_true", help="replace an existing output folder")
    p.add_argument("--no-verify", action="store_true", help="skip the Z3 proof (not recommended)")
    _common(p)

    p = sub.add_parser("lower", help="lower the pinned schedule as given and print the pipelined program")
    p.add_argument("problem", help="problem.yaml with schedule.stage pinned")
    _common(p)

    p = sub.add_parser("verify", help="re-prove every wait of a program")
    p.add_argument("target", help="an output folder or a program.json")
    p.add_argument("--certificate", metavar="DIR", help="also write SMT-LIB2 certificates to DIR")
    _common(p, time_limit=10.0)

    p = sub.add_parser("check", help="prove or refute the waits of Triton, TVM or MLIR pipelined IR")
    from .frontends.cli import add_check_arguments

    add_check_arguments(p)

    p = sub.add_parser("certify", help="re-check a certificate with Z3 and cvc5 alone")
    p.add_argument("directory", help="OUT/certificate/")
    _common(p)

    p = sub.add_parser("emit", help="write a target from an output folder")
    p.add_argument("out", help="output folder written by 'synth solve'")
    p.add_argument("--target", choices=("cuda", "tvm", "mlir"), default="cuda")
    p.add_argument("--force", action="store_true", help="overwrite kernel.cu")
    _common(p)

    p = sub.add_parser("run", help="run OUT/kernel.cu on a GPU with pycuda and report TFLOP/s")
    p.add_argument("out", help="output folder with kernel.cu")
    p.add_argument("--repeats", type=int, default=20)
    _common(p)

    p = sub.add_parser("search", help="auto-search GEMM pipelines")
    ssub = p.add_subparsers(dest="what", metavar="WHAT")
    g = ssub.add_parser("gemm", help="search tiles, warps, stages and schedule for a GEMM")
    try:
        from .search import add_search_arguments
    except ImportError:  # pragma: no cover - search module always ships
        add_search_arguments = None
    if add_search_arguments is not None:
        add_search_arguments(g)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    if not args.command:
        build_parser().print_help()
        return 2
    try:
        return _COMMANDS[args.command](args)
    except SynthError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _console(args):
    from rich.console import Console

    return Console(quiet=bool(getattr(args, "quiet", False) or getattr(args, "json", False)), highlight=False)


def cmd_solve(args) -> int:
    from .load import load_problem
    from .outdir import check_out_dir
    from .pipeline import default_out_dir, run, write_outputs

    con = _console(args)
    problem = load_problem(args.problem)
    out = args.out or default_out_dir(problem)
    check_out_dir(out, force=args.force)
    with con.status("solving...") as status:
        result = run(problem, time_limit=args.time_limit, workers=args.workers, verify=not args.no_verify,
                     progress=lambda ph, d, t: status.update(f"{ph} {d}/{t}..."))
    files = write_outputs(result, out, force=args.force)
    if args.json:
        print(json.dumps(_solve_json(result, out, files), indent=2))
    else:
        _print_solve(con, result, out, files, verbose=args.verbose)
    if not result.proven:
        print(result.report.render(), file=sys.stderr)
        print(f"error: some wait counts are not proven correct; see {os.path.join(out, 'verify.txt')}",
              file=sys.stderr)
        return 1
    return 0


def _solve_json(result, out: str, files: list[str]) -> dict:
    from .program import program_to_json
    from .schedule import schedule_to_json

    doc = {"out": out, "files": files, "schedule": schedule_to_json(result.problem, result.schedule),
           "waits": program_to_json(result.program)["waits"]}
    if result.report is not None:
        doc["verified"] = bool(result.report.ok)
    return doc


def _print_solve(con, result, out: str, files: list[str], verbose: bool = False) -> None:
    from rich.table import Table

    from .schedule import buffer_bytes

    p, s = result.problem, result.schedule
    t = Table(title=f"schedule of {p.name}")
    for col in ("op", "unit", "stage", "order", "queue", "offset"):
        t.add_column(col)
    for i, op in enumerate(p.ops):
        q = s.queue[i]
        t.add_row(op.name, op.unit, str(s.stage[i]), str(s.order[i]), "-" if q is None else str(q),
                  str(s.timing.offsets[i]) if s.timing else "-")
    con.print(t)
    b = Table(title="buffers")
    for col in ("buffer", "space", "multiplicity", "bytes"):
        b.add_column(col)
    for buf in p.buffers:
        m = s.mult(buf.name)
        b.add_row(buf.name, buf.space, str(m), str(m * buf.bytes))
    con.print(b)
    info = s.info
    summ = Table(title="result", show_header=False)
    summ.add_column("k")
    summ.add_column("v")
    if s.timing:
        cyc = s.timing.cycles if s.timing.cycles is not None else \
            f"({p.loop.trip_count} - 1) * {s.timing.ii} + {s.timing.tail}"
        summ.add_row("predicted cycles", str(cyc))
        summ.add_row("cycles per step (II)", str(s.timing.ii))
    if info:
        summ.add_row("status", info.status)
        if info.bound is not None:
            summ.add_row("proven bound", str(info.bound))
        summ.add_row("gap", f"{100 * info.gap:.2f}%")
        if info.lower_bound is not None:
            summ.add_row("lower bound (resources, recurrences)", str(info.lower_bound))
        summ.add_row("solve time", f"{info.solve_time:.2f} s")
    summ.add_row("shared memory", f"{buffer_bytes(p, s.multiplicity, 'shared')} B")
    con.print(summ)
    _print_waits(con, result.program, result.report)
    con.print(f"wrote {out}/: {', '.join(files)}")


def _print_waits(con, program, report) -> None:
    from rich.table import Table

    from .expr import to_str

    w = Table(title="waits")
    for col in ("#", "part", "queue", "in_flight", "before", "verdict", "tight", "time"):
        w.add_column(col)
    verdicts = {v.index: v for v in report.verdicts} if report is not None else {}
    for i, wait in enumerate(program.waits):
        v = verdicts.get(i)
        w.add_row(str(i), wait.part, str(wait.queue), to_str(wait.in_flight), wait.before,
                  v.status if v else "not checked",
                  "-" if wait.tight is None else ("yes" if wait.tight else "no: " + _why_not_tight(wait.reason)),
                  f"{v.seconds:.2f} s" if v else "-")
    con.print(w)


def _why_not_tight(reason: str) -> str:
    """The short 'not tight: ...' clause of a wait's reason, for the table."""
    tail = reason.split("not tight:", 1)[-1].strip()
    return tail if len(tail) <= 60 else tail[:57] + "..."


def cmd_lower(args) -> int:
    from .graph import build_graph
    from .load import load_problem
    from .lower import lower
    from .printer import program_text
    from .program import program_to_json
    from .schedule import schedule_from_pins

    problem = load_problem(args.problem)
    graph = build_graph(problem)
    program = lower(problem, graph, schedule_from_pins(problem, graph))
    if args.json:
        print(json.dumps(program_to_json(program), indent=2))
    elif not args.quiet:
        print(program_text(program), end="")
    return 0


def cmd_verify(args) -> int:
    from .verify import load_program, verify_program, write_certificate

    con = _console(args)
    program = load_program(args.target)
    report = verify_program(program, time_limit=args.time_limit)
    if args.certificate:
        from .outdir import publish

        publish(args.certificate, lambda tmp: write_certificate(report, tmp), flag="--certificate")
    if args.json:
        print(json.dumps({"ok": report.ok, "waits": [
            {"index": v.index, "status": v.status, "tight": v.tight, "seconds": round(v.seconds, 4),
             "counterexample": str(v.counterexample) if v.counterexample else None}
            for v in report.verdicts]}, indent=2))
    else:
        _print_waits(con, report.program, report)
        if not report.ok or args.verbose:
            print(report.render(), file=sys.stderr if not report.ok else sys.stdout)
    return 0 if report.ok else 1


def cmd_check(args) -> int:
    from .frontends.cli import cli_check

    return cli_check(args)


def cmd_certify(args) -> int:
    from .verify import certify

    res = certify(args.directory)
    if args.json:
        print(json.dumps({"ok": res.ok, "messages": list(res.messages)}, indent=2))
    elif not args.quiet or not res.ok:
        for m in res.messages:
            print(m)
    return 0 if res.ok else 1


def cmd_emit(args) -> int:
    from .pipeline import load_output

    problem, schedule, program = load_output(args.out)
    if args.target == "tvm":
        from .emit.tvm import tvm_annotations

        print(tvm_annotations(problem, schedule), end="")
        return 0
    if args.target == "mlir":
        from .emit.mlir import mlir_pipelined_loop

        print(mlir_pipelined_loop(problem, schedule), end="")
        return 0
    if problem.gemm is None:
        raise SynthError(Loc(problem.path), f"problem '{problem.name}' is not a GEMM; only 'kind: gemm' "
                         "problems get CUDA kernels", "use --target tvm or --target mlir, or write a kind: gemm problem")
    path = os.path.join(args.out, "kernel.cu")
    if os.path.exists(path) and not args.force:
        raise SynthError(Loc(path), "kernel.cu already exists", "pass --force to overwrite it")
    from .emit.cuda import emit_kernel

    text = emit_kernel(problem, schedule, program)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    if not args.quiet:
        print(f"wrote {path}")
    return 0


def cmd_run(args) -> int:
    from .run import run_output

    try:
        rep = run_output(args.out, repeats=args.repeats)
    except SynthError as exc:
        if "no CUDA GPU" in exc.msg:
            print(exc.render(), file=sys.stderr)
            return 1
        raise
    print(rep.render() if hasattr(rep, "render") else rep)
    return 0 if getattr(rep, "ok", True) else 1


def cmd_search(args) -> int:
    if getattr(args, "what", None) != "gemm":
        raise SynthError(None, "unknown search target", "use 'synth search gemm --M ... --N ... --K ...'")
    from .search import cli_search

    return cli_search(args)


_COMMANDS = {
    "solve": cmd_solve,
    "lower": cmd_lower,
    "verify": cmd_verify,
    "certify": cmd_certify,
    "check": cmd_check,
    "emit": cmd_emit,
    "run": cmd_run,
    "search": cmd_search,
}

"""The ``synth`` command: arguments, printing and exit codes only (docs/commands.md).

Every command computes through :mod:`synth.api` (or the module the API wraps)
and returns an :class:`Outcome`; :func:`main` turns it into human output or,
with ``--json``, the one envelope of :mod:`synth.envelope` (docs/json.md).

Exit status (:data:`synth.envelope.EXIT`): 0 success; 1 the command ran but the
result does not hold (a refuted or unproven wait, a failed certificate, no GPU
for ``run``, a wrong kernel result, the time limit; ``search --measure`` without a
GPU says its figures are predictions and exits 0);
2 bad input or arguments, with one message naming file, line and fix and no
traceback; 3 an internal error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Callable, Optional, Sequence

from . import __version__
from .deadline import Deadline, TimeUp, enforced, install_interrupt, interrupted
from .envelope import CODES, EXIT, envelope, error_from_exception, error_object
from .errors import Loc, SynthError

# ---------------------------------------------------------------------------------------- arguments

TIME_LIMIT_MAX = 86400.0
"""--time-limit: seconds, 0 < value <= one day."""
WORKERS_MAX = 256
"""--workers: 1 .. 256 CP-SAT threads (or search processes)."""
REPEATS_MAX = 100000
"""--repeats: 1 .. 100000 timed launches."""


class UsageError(SynthError):
    """A bad command line (exit status 2, code ``usage``)."""


def _number(text: str, flag: str, kind, lo, hi, lo_open: bool = False):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") \
            from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    if (value <= lo if lo_open else value < lo) or value > hi:
        rng = f"{'>' if lo_open else '>='} {lo:g} and <= {hi:g}"
        raise argparse.ArgumentTypeError(f"{text} is out of range: {flag} must be {rng}")
    return value


def seconds(text: str) -> float:
    """``--time-limit``: a finite number of seconds, 0 < s <= :data:`TIME_LIMIT_MAX`."""
    return _number(text, "--time-limit", float, 0.0, TIME_LIMIT_MAX, lo_open=True)


def workers(text: str) -> int:
    """``--workers``: an integer in 1 .. :data:`WORKERS_MAX`."""
    return _number(text, "--workers", int, 1, WORKERS_MAX)


def repeats(text: str) -> int:
    """``--repeats``: an integer in 1 .. :data:`REPEATS_MAX`."""
    return _number(text, "--repeats", int, 1, REPEATS_MAX)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line raises :class:`UsageError` instead of exiting."""

    def error(self, message: str):  # noqa: D102 - argparse hook
        raise UsageError(None, f"{self.prog}: {message}", f"see '{self.prog} --help'")


def _output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (docs/json.md) on stdout instead of tables, errors included")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing on stdout except --json output; errors still go to stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="print more detail (see docs/commands.md)")


def _time_limit(p: argparse.ArgumentParser, default: float, what: str) -> None:
    p.add_argument("--time-limit", type=seconds, default=default, metavar="SECONDS",
                   help=f"wall-clock limit of the whole command: {what} (default %(default)s; "
                        f"0 < SECONDS <= {TIME_LIMIT_MAX:g})")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (docs/commands.md is its long form)."""
    ap = _Parser(prog="synth", description="synth: synthesize software-pipeline schedules (CP-SAT), lower them, prove "
                                             "their wait counts (Z3) and emit kernels.",
                 epilog="Documentation: docs/commands.md (commands), docs/problem-format.md (problem.yaml), "
                        "docs/outputs.md (OUT/), docs/json.md (--json).")
    ap.add_argument("--version", action="version", version=f"synth {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("solve", help="schedule (CP-SAT), lower, prove every wait (Z3), write OUT/",
                       description="Schedule a problem with CP-SAT, lower it, prove every wait count with Z3 and "
                                   "write the output folder (docs/outputs.md).")
    p.add_argument("problem", help="problem.yaml (docs/problem-format.md)")
    p.add_argument("-o", "--out", help="output folder (default out/<name>/)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output folder, only if synth wrote every file in it")
    p.add_argument("--no-verify", action="store_true", help="skip the Z3 proof (not recommended)")
    _time_limit(p, 60.0, "CP-SAT gets at most 60%% of it; lowering, the proof, the kernel and writing OUT/ the "
                         "rest; past it the command stops, exit 1, nothing written")
    p.add_argument("--workers", type=workers, default=2,
                   help=f"CP-SAT worker threads (default %(default)s; 1 .. {WORKERS_MAX})")
    _output_flags(p)

    p = sub.add_parser("lower", help="lower the pinned schedule as given and print the pipelined program",
                       description="Lower the schedule pinned in the problem file (schedule.stage, or stages: N "
                                   "for kind: gemm) and print the pipelined program; nothing is solved or proved.")
    p.add_argument("problem", help="problem.yaml with schedule.stage pinned")
    _output_flags(p)

    p = sub.add_parser("verify", help="re-prove every wait of a program",
                       description="Prove every wait count of program.json again with Z3 (edit an in_flight and "
                                   "it is checked); exit 1 with a counterexample when one is unsafe.")
    p.add_argument("target", help="an output folder or a program.json")
    p.add_argument("--certificate", metavar="DIR", help="also write SMT-LIB2 certificates to DIR")
    p.add_argument("--force", action="store_true",
                   help="with --certificate: replace an existing DIR, only if synth wrote every file in it")
    _time_limit(p, 60.0, "each Z3 query gets at most 10 s and none runs past it; writing DIR counts too")
    _output_flags(p)

    p = sub.add_parser("check", help="prove or refute the waits of Triton, TVM or MLIR pipelined IR",
                       description="Map a compiler's pipelined loop (Triton TTGIR, TVM TIR, MLIR nvgpu) onto a "
                                   "program and prove each wait (docs/check.md); exit 1 when one is refuted.")
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .frontends.cli import add_check_arguments

    add_check_arguments(p)

    p = sub.add_parser("certify", help="re-check a certificate with Z3 and cvc5 alone",
                       description="Re-check every SMT-LIB2 obligation of a certificate with Z3 and with cvc5.")
    p.add_argument("directory", help="OUT/ (the solve folder) or OUT/certificate/")
    _time_limit(p, 120.0, "each Z3 and cvc5 call gets at most what is left")
    _output_flags(p)

    p = sub.add_parser("emit", help="write kernel.cu, or print TVM annotations or an MLIR loop",
                       description="From an output folder: write kernel.cu (kind: gemm problems), or print the "
                                   "TVM schedule annotations or the MLIR pipelined loop.")
    p.add_argument("out", help="output folder written by 'synth solve'")
    p.add_argument("--target", choices=("cuda", "tvm", "mlir"), default="cuda",
                   help="cuda: write OUT/kernel.cu (replacing only a kernel.cu synth wrote and nobody "
                        "changed); tvm: print sch.annotate(...) lines; mlir: print the loop with pipelining "
                        "attributes (default %(default)s)")
    p.add_argument("--force", action="store_true",
                   help="accepted for compatibility; kernel.cu is replaced only when synth wrote it unchanged")
    _output_flags(p)

    p = sub.add_parser("run", help="run OUT/kernel.cu on a GPU (CUDA Python or pycuda) and report TFLOP/s",
                       description="Compile OUT/kernel.cu for the local GPU, check it against numpy and time it. "
                                   "Without a GPU: exit 1, code no_gpu (synth.kernel runs it on the CPU emulator).")
    p.add_argument("out", help="output folder with kernel.cu")
    p.add_argument("--repeats", type=repeats, default=20,
                   help=f"timed launches; the median is reported (default %(default)s; 1 .. {REPEATS_MAX})")
    _output_flags(p)

    p = sub.add_parser("search", help="auto-search GEMM pipelines",
                       description="Search tiles, warps, stages and schedules for a GEMM.")
    ssub = p.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    g = ssub.add_parser("gemm", help="search tiles, warps, stages and schedule for a GEMM")
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .cli_search import add_search_arguments

    add_search_arguments(g)
    return ap


# ---------------------------------------------------------------------------------------- outcome and main

@dataclass
class Outcome:
    """What a command hands back to :func:`main`: exit status, JSON result, errors, warnings."""

    status: int = 0
    result: Any = None
    errors: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def fail(self, code: str, message: str, fix: str = "", loc: Loc | None = None) -> "Outcome":
        """Record an error of ``code`` (and its exit status, unless a worse one is set)."""
        self.errors.append(error_object(code, message, file=loc.file if loc else None,
                                        line=loc.line if loc and loc.line > 0 else None,
                                        column=loc.col if loc and loc.line > 0 and loc.col > 0 else None, fix=fix))
        self.status = max(self.status, CODES[code])
        return self


def _guess_command(argv: Sequence[str]) -> Optional[str]:
    for a in argv:
        if not a.startswith("-"):
            return a if a in _COMMANDS else None
    return None


PIPE_CLOSED = 141
"""Exit status when standard output is closed before synth has written it all (``synth check ... | head``): the
shell's status for a process ended by SIGPIPE, with no traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status (docs/commands.md)."""
    try:
        return _main(argv)
    except BrokenPipeError:  # the reader of our output went away: nothing left to say, and nowhere to say it
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush must not fail again
        except OSError:
            pass
        return PIPE_CLOSED
    except KeyboardInterrupt:  # a Ctrl-C after the command's own handling (while its result was printed)
        return EXIT["interrupted"]
    finally:
        if argv is None:  # the process's own entry: the command has ended, and a Ctrl-C while the interpreter
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # exits must not turn its status into a death by SIGINT


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    command = _guess_command(argv)
    out = Outcome()
    try:
        install_interrupt()  # Ctrl-C: exit 130 at any moment, native solvers stopped (synth.deadline)
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UsageError(None, "synth: no command given", "run 'synth --help' for the list of commands")
        _check_numbers(args)
        out = _COMMANDS[args.command](args, _Ui(args))
        if interrupted():  # a Ctrl-C Python dropped (raised inside a __del__) still ends the command as one
            raise KeyboardInterrupt
    except SystemExit as exc:  # --help and --version print and exit 0
        return int(exc.code or 0)
    except UsageError as exc:
        out = Outcome().fail("usage", exc.msg, exc.fix)
        if not as_json:
            print(f"{exc.msg}\nfix: {exc.fix}", file=sys.stderr)
    except SynthError as exc:
        err = error_from_exception(exc, _code_of(exc))
        out = Outcome(status=CODES[err["code"]], errors=[err])
        if not as_json:
            print(exc.render(), file=sys.stderr)
    except KeyboardInterrupt:
        out = _interrupted(command, as_json)
    except BrokenPipeError:
        raise  # main's: standard output closed, not a bug
    except Exception as exc:
        if interrupted():  # the Ctrl-C surfaced wrapped (ctypes raises ArgumentError around it inside Z3's calls)
            out = _interrupted(command, as_json)
        else:  # a bug: say so, keep the traceback on stderr
            traceback.print_exc()
            out = Outcome().fail("internal", f"internal error: {type(exc).__name__}: {exc}",
                                 "please report this with the command and the input files")
    if as_json:
        print(json.dumps(envelope(command, out.status, _plain(out.result), out.errors, out.warnings), indent=2))
    return out.status


def _interrupted(command: str, as_json: bool) -> Outcome:
    """The outcome of a Ctrl-C (exit 130), its message printed unless ``--json``."""
    during = f" during 'synth {command}'" if command else ""
    out = Outcome().fail("interrupted", f"interrupted (Ctrl-C){during}; no output folder was left half-written",
                         "run the command again")
    if not as_json:
        print(f"error: {out.errors[0]['message']}", file=sys.stderr)
    return out


def _code_of(exc: SynthError) -> Optional[str]:
    if isinstance(exc, TimeUp):
        return "time_limit"
    if exc.msg.startswith("no CUDA GPU"):
        return "no_gpu"
    return None


def _check_numbers(args) -> None:
    """The bounds of :func:`seconds` and :func:`workers`, for options a subcommand declared itself."""
    for flag, attr, check in (("--time-limit", "time_limit", seconds), ("--workers", "workers", workers)):
        value = getattr(args, attr, None)
        if value is not None:
            try:
                check(str(value))
            except argparse.ArgumentTypeError as exc:
                raise UsageError(None, f"synth {args.command}: argument {flag}: {exc}",
                                 f"see 'synth {args.command} --help'") from None


def _plain(x: Any) -> Any:
    """``x`` as JSON-ready data (dataclasses to dicts, tuples to lists)."""
    if is_dataclass(x) and not isinstance(x, type):
        return _plain(asdict(x))
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)


class _Ui:
    """Where human output goes: stdout tables unless -q/--json; progress bars on stderr."""

    def __init__(self, args) -> None:
        # rich: a terminal's output only (a stock GPU image has none)
        from rich.console import Console

        self.quiet = bool(getattr(args, "quiet", False))
        self.json = bool(getattr(args, "json", False))
        self.verbose = bool(getattr(args, "verbose", False)) and not self.quiet
        self.silent = self.quiet or self.json
        self.out = Console(quiet=self.silent, highlight=False, soft_wrap=not sys.stdout.isatty())
        self.err = Console(stderr=True, highlight=False)

    def print(self, *a, **kw) -> None:
        self.out.print(*a, **kw)

    def text(self, text: str) -> None:
        """Plain text on stdout (program listings, exports), unless silent."""
        if not self.silent:
            sys.stdout.write(text)
            sys.stdout.flush()

    def warn(self, msg: str) -> None:
        if not self.json:
            print(f"warning: {msg}", file=sys.stderr)

    def progress(self):
        """A context giving a ``progress(phase, done, total)`` callback (a no-op when silent or not a tty)."""
        return _Progress(self.err, enabled=not self.silent and self.err.is_terminal)


class _Progress:
    """A rich progress bar, one row per phase with its count and elapsed time."""

    TITLES = {"graph": "dependence graph", "schedule": "schedule (CP-SAT)", "lower": "lower",
              "prove": "prove obligations (Z3)", "emit": "emit kernel.cu", "write": "write OUT/",
              "certify": "re-check (Z3, cvc5)"}

    def __init__(self, console, enabled: bool) -> None:
        self.console, self.enabled = console, enabled
        self.bar = None
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> Callable[[str, int, int], None]:
        if self.enabled:
            # rich: a terminal's output only (a stock GPU image has none)
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description:>24}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=self.console, transient=True)
            self.bar.__enter__()
        return self.update

    def update(self, phase: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(self.TITLES.get(phase, phase), total=total)
        self.bar.update(self.tasks[phase], completed=done, total=max(total, done))

    def __exit__(self, *exc) -> bool:
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


# ---------------------------------------------------------------------------------------- solve

def cmd_solve(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .load import is_ws_body, problem_from_doc, solve_document

    t_start = time.monotonic()
    deadline = Deadline(t_start + args.time_limit, args.time_limit)  # one deadline for every phase, writing included
    text, doc = solve_document(args.problem)
    # a problem is read and checked before the solvers load: a bad file is refused at once (exit 2)
    problem = None if is_ws_body(doc) else problem_from_doc(doc, args.problem)
    # the solvers' layers load once the problem is read (above)
    from .outdir import check_out_dir
    from .flow.pipeline import default_out_dir, run, write_outputs
    from .flow.ws import WsResult, ws_problem_text

    if problem is None:  # a warp-specialized body (kind: attention, ...)
        problem = ws_problem_text(text, args.problem)
    out = args.out or default_out_dir(problem)
    check_out_dir(out, force=args.force)
    t_load = time.monotonic() - t_start
    with ui.progress() as prog, enforced(deadline):
        result = run(problem, deadline=deadline, workers=args.workers, verify=not args.no_verify, progress=prog)
        t0 = time.monotonic()
        prog("write", 0, 1)
        files = write_outputs(result, out, force=args.force, deadline=deadline)
        prog("write", 1, 1)
    phases = [("load", t_load)] + list(result.phases) + [("write", time.monotonic() - t0)]
    wall = time.monotonic() - t_start
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .flow.hopper import HopperResult

    if isinstance(result, HopperResult):
        return _solve_hopper(ui, result, out, files, phases, wall)
    if isinstance(result, WsResult):
        return _solve_ws(ui, result, out, files, phases, wall)
    bound = stage_bound(problem, result.schedule)
    outcome = Outcome(result=_solve_json(result, out, files, phases, wall, bound))
    if bound["reached"]:
        outcome.warnings.append(bound["message"])
    _print_solve(ui, result, out, files, phases, wall, bound)
    if not result.proven:
        why = _unproven_summary(result.report)
        _fail_unproven(ui, outcome, result.report, why[0], f"some wait counts are not proven correct ({why[1]})",
                       "see the counterexample in verify.txt", out)
    return outcome


def _fail_unproven(ui: _Ui, outcome: Outcome, report, refuted: bool, what: str, see: str, out: str) -> None:
    """Exit 1 for a folder whose proof did not hold: ``refuted`` or ``unproven``, pointing at its verify.txt; the
    report on stderr unless the output is JSON."""
    verify_txt = os.path.join(out, "verify.txt")
    outcome.fail("refuted" if refuted else "unproven", f"{what}; see {verify_txt}",
                 f"{see}, or raise --time-limit if a proof was unknown", Loc(verify_txt))
    if not ui.json:
        print(report.render(), file=sys.stderr)
        print(f"error: {outcome.errors[-1]['message']}", file=sys.stderr)


def _hopper_design_line(result) -> str:
    """The design ``synth solve`` built, in words: the grid, the cluster, the epilogue and C's type, the split, and,
    when the problem left design keys ``auto``, which it chose and each candidate's prediction (µs)."""
    g = result.problem
    grid = "ping-pong (persistent)" if g.pingpong else "persistent" if g.persistent else "one CTA per tile"
    parts = [grid, "no cluster" if g.cluster == "1x1" else f"cluster {g.cluster}",
             f"{'TMA-store' if g.epilogue == 'tma_store' else 'register'} epilogue (C {g.out_dtype})"]
    if g.split_k > 1:
        parts.append(f"split-K {g.split_k}")
    line = ", ".join(parts)
    if result.design is not None:
        preds = ", ".join(f"{label} {us:g}" for label, us in result.design.predicted_us)
        line += f"; chosen for {', '.join(f'{k}: auto' for k in g.auto)} among {preds} us ({result.design.status})"
    return line


def _hopper_design_json(result) -> dict:
    """The design of a Hopper solve for the JSON: persistent, pingpong, epilogue, cluster, out_dtype, split_k, the
    keys the problem left ``auto`` and, for those, each candidate's prediction (µs)."""
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .hopper.design import design_json

    g = result.problem
    doc = {**design_json(g.design), "out_dtype": g.out_dtype, "split_k": g.split_k, "auto": list(g.auto)}
    if result.design is not None:
        doc["predicted_us"] = dict(result.design.predicted_us)
        doc["status"] = result.design.status
    return doc


def _solve_hopper(ui: _Ui, result, out: str, files: list[str], phases, wall: float) -> Outcome:
    """The report of ``synth solve`` on a Hopper problem: the choice, the obligations by class."""
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .hopper.choice_json import choice_to_json

    rep = result.report
    outcome = Outcome(result={"problem": result.problem.name, "out": out, "files": files, "mainloop": "tma_wgmma",
                              "schedule": choice_to_json(result.problem, result.choice),
                              "design": _hopper_design_json(result),
                              "verified": None if rep is None else bool(rep.ok),
                              "verify": None if rep is None else rep.to_json(),
                              "phases": [{"name": n, "seconds": round(s, 4)} for n, s in phases],
                              "wall_seconds": round(wall, 4)})
    if not ui.silent:
        g, c = result.problem, result.choice
        ui.print(f"{g.name}: Hopper main loop (TMA + mbarrier + wgmma), tile {g.BM}x{g.BN}x{g.BK} {g.dtype}, "
                 f"{c.explain()}", markup=False)
        ui.print(f"{g.name}: design {_hopper_design_line(result)}", markup=False)
        if rep is not None:
            ui.print(rep.render(), markup=False)
        ui.print(f"wall time {wall:.2f} s: " + ", ".join(f"{n} {t:.2f} s" for n, t in phases))
        ui.print(f"wrote {out}/: {', '.join(files)}")
    if rep is not None and not rep.ok:
        outcome.fail("refuted" if rep.refuted_classes() else "unproven",
                     f"the Hopper program is not proven ({', '.join(sorted(rep.refuted_classes())) or 'unknown'}); "
                     "no kernel.cu was written", "see verify.txt, or raise --time-limit if a proof was unknown",
                     Loc(os.path.join(out, "verify.txt")))
    return outcome


def _solve_ws(ui: _Ui, result, out: str, files: list[str], phases, wall: float) -> Outcome:
    """The report of ``synth solve`` on a warp-specialized body (synth.flow.ws): the schedule, the proof."""
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .flow.ws import summary_json, summary_lines

    outcome = Outcome(result=summary_json(result, out, files, phases, wall))
    s = result.schedule
    if s.status != "OPTIMAL":
        outcome.warnings.append(f"the schedule is {s.status}: II {s.ii}, the least II not refuted is {s.bound} "
                                f"(gap {100 * s.gap:.2f}%); raise --time-limit for a proof of the least II")
    if not ui.silent:
        for line in summary_lines(result):
            ui.print(line, markup=False)
        ui.print(f"wall time {wall:.2f} s: " + ", ".join(f"{n} {t:.2f} s" for n, t in phases))
        ui.print(f"wrote {out}/: {', '.join(files)}")
    for w in outcome.warnings:
        ui.warn(w)
    if not result.proven:
        refuted = bool(result.report.refutations)
        _fail_unproven(ui, outcome, result.report, refuted, f"the attention program of {result.problem.name} is not "
                       f"proven ({'refuted' if refuted else 'unknown'})", "see the refutation in verify.txt", out)
    return outcome


def stage_bound(problem, schedule) -> dict:
    """The stage bound the solver searched under, and whether the result reached it.

    A result that uses every allowed stage may be limited by the bound: a larger
    ``schedule.max_stage`` might give a shorter II.
    """
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .model.constraints import stage_bounds

    bounds = stage_bounds(problem)
    if not bounds:  # fully pinned stages on a symbolic loop: nothing was searched
        return {"max_stage": schedule.max_stage, "source": "pinned schedule.stage", "used": schedule.max_stage,
                "reached": False, "message": ""}
    tightest = min(bounds, key=lambda b: b.bound)
    pinned = problem.pins.stage is not None
    reached = not pinned and schedule.max_stage >= tightest.bound
    msg = (f"the schedule uses every stage allowed ({schedule.max_stage + 1} stages; bound: {tightest.text}): "
           "the result is optimal only among schedules within that bound; a larger bound might give a "
           "shorter II" if reached else "")
    if reached and "default" in tightest.text:
        msg += " (set schedule.max_stage in the problem file)"
    elif reached and "trip_count" in tightest.text:
        msg += " (more stages than iterations overlap nothing)"
    return {"max_stage": tightest.bound, "source": tightest.text, "used": schedule.max_stage,
            "reached": reached, "message": msg}


def _unproven_summary(report) -> tuple[bool, str]:
    """(any refuted, 'n refuted, m unknown')."""
    obs = report.obligations
    ref = sum(o.status == "refuted" for o in obs)
    unk = sum(o.status == "unknown" for o in obs)
    return ref > 0, f"{ref} obligation{'s' * (ref != 1)} refuted, {unk} unknown"


def _waits_json(program, report) -> list[dict]:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .program import program_to_json

    verdicts = {v.index: v for v in report.verdicts} if report is not None else {}
    rows = []
    for i, w in enumerate(program_to_json(program)["waits"]):
        v = verdicts.get(i)
        rows.append({"index": i, **w, "status": v.status if v else "not checked",
                     "tight": v.tight if v else None,
                     "reason": (v.reason or w.get("reason", "")) if v else w.get("reason", ""),
                     "seconds": round(v.seconds, 4) if v else None,
                     "counterexample": str(v.counterexample) if v and v.counterexample else None})
    return rows


def _solve_json(result, out: str, files: list[str], phases, wall: float, bound: dict) -> dict:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .schedule import schedule_to_json

    rep = result.report
    return {"problem": result.problem.name, "out": out, "files": files,
            "schedule": schedule_to_json(result.problem, result.schedule),
            "stage_bound": bound,
            "waits": _waits_json(result.program, rep),
            "verified": None if rep is None else bool(rep.ok),
            "obligations": None if rep is None else _obligation_counts(rep),
            "phases": [{"name": n, "seconds": round(s, 4)} for n, s in phases],
            "wall_seconds": round(wall, 4)}


def _obligation_counts(report) -> dict:
    obs = report.obligations
    return {"total": len(obs), **{s: sum(o.status == s for o in obs) for s in ("proven", "refuted", "unknown")}}


def _print_solve(ui: _Ui, result, out: str, files: list[str], phases, wall: float, bound: dict) -> None:
    # rich: a terminal's output only (a stock GPU image has none)
    from rich.table import Table

    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .schedule import buffer_bytes

    if ui.silent:
        return
    p, s = result.problem, result.schedule
    t = Table(title=f"schedule of {p.name}")
    for col in ("op", "unit", "stage", "order", "queue", "offset") + (("latency", "issue") if ui.verbose else ()):
        t.add_column(col)
    for i, op in enumerate(p.ops):
        q = s.queue[i]
        t.add_row(op.name, op.unit, str(s.stage[i]), str(s.order[i]), "-" if q is None else str(q),
                  str(s.timing.offsets[i]) if s.timing else "-",
                  *((str(op.latency), str(op.issue)) if ui.verbose else ()))
    ui.print(t)
    b = Table(title="buffers")
    for col in ("buffer", "space", "multiplicity", "bytes"):
        b.add_column(col)
    for buf in p.buffers:
        m = s.mult(buf.name)
        b.add_row(buf.name, buf.space, str(m), str(m * buf.bytes))
    ui.print(b)
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
    summ.add_row("stages", f"{s.max_stage + 1} of at most {bound['max_stage'] + 1}"
                 + (f" (bound reached: {bound['source']})" if bound["reached"] else ""))
    summ.add_row("shared memory", f"{buffer_bytes(p, s.multiplicity, 'shared')} B")
    if result.report is not None:
        c = _obligation_counts(result.report)
        summ.add_row("obligations", f"{c['proven']}/{c['total']} proven"
                     + (f", {c['refuted']} refuted" if c["refuted"] else "")
                     + (f", {c['unknown']} unknown" if c["unknown"] else ""))
    summ.add_row("wall time", f"{wall:.2f} s: " + ", ".join(f"{n} {t:.2f} s" for n, t in phases))
    if ui.verbose and info:
        summ.add_row("CP-SAT", f"{info.solve_time:.2f} s inside the schedule phase; " + "; ".join(info.notes))
    ui.print(summ)
    _print_waits(ui, result.program, result.report)
    if bound["reached"]:
        ui.print(f"note: {bound['message']}")
    if ui.verbose and result.report is not None:
        ui.print(result.report.render(), markup=False)
    ui.print(f"wrote {out}/: {', '.join(files)}")


def _print_waits(ui: _Ui, program, report) -> None:
    # rich: a terminal's output only (a stock GPU image has none)
    from rich.table import Table

    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .expr import to_str

    w = Table(title="waits")
    for col in ("#", "part", "queue", "in_flight", "before", "verdict", "tight", "time"):
        w.add_column(col)
    verdicts = {v.index: v for v in report.verdicts} if report is not None else {}
    for i, wait in enumerate(program.waits):
        v = verdicts.get(i)
        # Tightness is the verdict's (judged only for proven waits), never program.json's stale field.
        tight = "-" if v is None or v.tight is None else ("yes" if v.tight else "no: " + _why_not_tight(v.reason))
        w.add_row(str(i), wait.part, str(wait.queue), to_str(wait.in_flight), wait.before,
                  v.status if v else "not checked", tight, f"{v.seconds:.2f} s" if v else "-")
    ui.print(w)


def _why_not_tight(reason: str) -> str:
    """The short 'not tight: ...' clause of a wait's reason, for the table."""
    tail = reason.split("not tight:", 1)[-1].strip()
    return tail if len(tail) <= 60 else tail[:57] + "..."


# ---------------------------------------------------------------------------------------- lower

def cmd_lower(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import load, lower
    from .printer import program_text
    from .program import program_to_json

    program = lower(load(args.problem))
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .hopper.ir import HopperProgram

    if isinstance(program, HopperProgram):
        # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
        from .hopper.ir import hopper_to_json
        from .hopper.printer import hopper_text

        ui.text(hopper_text(program))
        return Outcome(result={"program": hopper_to_json(program)})
    ui.text(program_text(program))
    if ui.verbose and not ui.silent:
        # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
        from .expr import to_str

        for i, w in enumerate(program.waits):
            ui.text(f"# wait #{i} {w.part}: async_wait_queue({w.queue}, {to_str(w.in_flight)}) before "
                    f"{w.before}: {w.reason or '-'}\n")
    return Outcome(result={"program": program_to_json(program)})


# ---------------------------------------------------------------------------------------- verify, certify

def cmd_verify(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import verify
    from .flow.ws import ws_output_folder
    from .hopper.ir import is_hopper_file

    if ws_output_folder(args.target) is not None:
        return _verify_ws(args, ui)
    if is_hopper_file(args.target):
        return _verify_hopper(args, ui)
    with ui.progress() as prog, enforced(Deadline.after(args.time_limit)):
        report = verify(args.target, time_limit=args.time_limit, certificate=args.certificate, progress=prog,
                        force=args.force)
    out = Outcome(result={"program": report.program.name, "ok": bool(report.ok),
                          "obligations": _obligation_counts(report),
                          "waits": _waits_json(report.program, report),
                          "global_failures": [{"id": o.id, "status": o.status, "description": o.description,
                                               "reason": o.reason} for o in report.global_failures],
                          "certificate": args.certificate, "seconds": round(report.seconds, 4)})
    if not ui.silent:
        _print_waits(ui, report.program, report)
        if ui.verbose or not report.ok:
            ui.print(report.render(), markup=False)
    if not report.ok:
        refuted, counts = _unproven_summary(report)
        out.fail("refuted" if refuted else "unproven", f"{report.program.name}: not proven ({counts})",
                 "the counterexample above names the statement and the step; raise --time-limit if a proof "
                 "was unknown", Loc(args.target))
        if ui.silent and not ui.json:
            print(report.render(), file=sys.stderr)
    return out


def _verify_hopper(args, ui: _Ui) -> Outcome:
    """``synth verify`` of a Hopper program.json (docs/hopper.md): obligations listed by class."""
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import verify


    dl = Deadline.after(args.time_limit)
    with enforced(dl):
        report = verify(args.target, time_limit=args.time_limit, certificate=args.certificate, force=args.force)
        parts = _verify_folder_parts(args.target, dl) if report.ok else {}
    out = Outcome(result=dict(report.to_json(), certificate=args.certificate if report.ok else None,
                              parts={k: {"ok": ok} for k, (ok, _) in parts.items()}))
    if not ui.silent:
        ui.print(report.render(), markup=False)
        for name, (ok, text) in parts.items():
            ui.print(f"{name}/program.json: {'proven' if ok else 'NOT PROVEN'}\n{text}", markup=False)
    if not report.ok:
        out.fail("refuted" if report.refuted_classes() else "unproven",
                 f"{report.program.name}: not proven ({', '.join(sorted(report.refuted_classes())) or 'unknown'})",
                 "the counterexample names the warp group, iteration, barrier, phase and bytes", Loc(args.target))
    bad = [name for name, (ok, _) in parts.items() if not ok]
    if bad:
        out.fail("refuted", f"{', '.join(b + '/program.json' for b in bad)}: not proven",
                 "the text above names what fails; re-run 'synth solve'", Loc(args.target))
    return out


def _verify_ws(args, ui: _Ui) -> Outcome:
    """``synth verify`` of a warp-specialized body's folder (synth.flow.ws.verify_ws_output, docs/commands.md)."""
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import verify

    with enforced(Deadline.after(args.time_limit)):
        res = verify(args.target, time_limit=args.time_limit, certificate=args.certificate, force=args.force)
    out = Outcome(result=res.to_json())
    if not ui.silent:
        ui.print("\n".join(res.lines()), markup=False)
        if args.certificate is not None and res.ok and res.output.attention is not None:
            ui.print(f"wrote {args.certificate} (the independent checker's certificate of program.json: 'synth "
                     f"certify {args.certificate}' checks it)", markup=False)
    if not res.ok:
        out.fail("refuted" if res.report.refutations else "unproven", res.failure(),
                 "the refutation names its class, warp group, KV block, barrier[slot] and phase, and n; raise "
                 "--time-limit if a proof was unknown", Loc(os.path.join(res.output.folder, "program.json")))
        if ui.silent and not ui.json:
            print(res.report.render(), file=sys.stderr)
    return out


def _verify_folder_parts(target: str, dl) -> dict:
    """A Hopper output folder's other programs, proven again: ``store`` (the TMA-store epilogue: its waits and
    thread classes) and ``order/even``, ``order/odd`` (ping-pong's order protocol), as the folder's problem.yaml
    asks for them (:func:`synth.verify.load.hopper_folder_parts`). ``name -> (ok, text)``; empty for a
    program.json given alone."""
    import os

    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import verify
    from .verify.load import hopper_folder_parts

    out: dict = {}
    for name in hopper_folder_parts(target):  # the parts problem.yaml asks for; SynthError when one is missing
        path = os.path.join(target, *name.split("/"))
        rep = verify(path, time_limit=max(1.0, dl.left()))
        ok, text = bool(rep.ok), rep.render()
        if name == "store":
            # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
            from .verify.hopper_store import check_threads

            threads = check_threads(rep.program)
            ok = ok and all(t.ok for t in threads)
            text += "\n" + "\n".join(f"{t.cls}: {'proven' if t.ok else 'REFUTED: ' + t.detail}" for t in threads)
        out[name] = (ok, text)
    return out


def cmd_certify(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import certify


    with enforced(Deadline.after(args.time_limit)):
        res = certify(args.directory, time_limit=args.time_limit)  # both forms: one limit for the whole check
    files = [_plain(f) for f in res.files]
    out = Outcome(result={"directory": args.directory, "ok": bool(res.ok), "solvers": _plain(res.solvers),
                          "files": files, "messages": list(res.messages)})
    if not ui.silent:
        if ui.verbose:
            # rich: a terminal's output only (a stock GPU image has none)
            from rich.table import Table

            t = Table(title="obligations")
            keys = [k for k in ("id", "kind", "wait", "z3", "cvc5", "ok", "message") if files and k in files[0]]
            for k in keys:
                t.add_column(k)
            for f in files:
                t.add_row(*("-" if f.get(k) is None else str(f.get(k)) for k in keys))
            ui.print(t)
        for m in res.messages:
            ui.print(m, markup=False)
    if not res.ok:
        out.fail("certificate_failed", res.messages[0] if res.messages else "certificate FAILED",
                 "re-run 'synth solve' to write a fresh certificate; a sat answer means a wait is wrong",
                 Loc(args.directory))
        if ui.silent and not ui.json:
            for m in res.messages:
                print(m, file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------- emit, run

def cmd_emit(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import emit

    text = emit(args.out, target=args.target)
    if args.target != "cuda":
        ui.text(text)
        return Outcome(result={"target": args.target, "text": text})
    path, action = write_kernel(args.out, text)
    ui.print(f"{action} {path}")
    if ui.verbose:
        # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
        from .emit.emulate import kernel_macros

        ui.print(", ".join(f"SYNTH_{k} {v}" for k, v in kernel_macros(text).items()))
    return Outcome(result={"target": "cuda", "path": path, "action": action})


def write_kernel(out_dir: str, text: str) -> tuple[str, str]:
    """Write ``out_dir/kernel.cu`` under the ownership rule (docs/outputs.md); returns (path, what was done).

    The same text already there: nothing is written ("up to date"). A kernel.cu
    synth wrote and nobody changed since (its sha256 in the folder's marker): it
    is replaced. A kernel.cu synth did not write, or one changed since: refused.
    No kernel.cu: written.
    """
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .outdir import read_marker, replace_file, sha256_file
    from .readfile import read_regular_bytes

    path = os.path.join(out_dir, "kernel.cu")
    want = text.encode("utf-8")
    if os.path.isfile(path) and not os.path.islink(path):
        try:
            if read_regular_bytes(path, len(want), "kernel.cu", follow=False) == want:
                return path, "up to date:"
        except SynthError:
            pass  # larger than ours, or no longer a regular file: not up to date; the rules below decide
    listing = read_marker(out_dir)
    if listing is None:
        if os.path.lexists(path):
            raise SynthError(Loc(path), f"refusing to replace {path}: '{out_dir}' has no record that synth "
                             "wrote it", "move it elsewhere first, or solve again into a new folder")
        tmp = path + ".synth-tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        return path, "wrote"
    if os.path.lexists(path) and (os.path.islink(path) or listing.get("kernel.cu") != sha256_file(path)):
        raise SynthError(Loc(path), f"refusing to replace {path}: it changed since synth wrote it "
                         "(or synth did not write it)", "move your kernel.cu elsewhere first; synth never "
                         "overwrites a file it did not write")
    existed = os.path.lexists(path)
    replace_file(out_dir, "kernel.cu", text, force=True)
    return path, "replaced" if existed else "wrote"


def cmd_run(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .api import run

    rep = run(args.out, repeats=args.repeats)
    doc = _plain(rep)
    doc["fraction_of_peak"] = rep.fraction_of_peak
    doc["fraction_of_cublas"] = rep.fraction_of_cublas
    out = Outcome(result=doc)
    if not ui.silent:
        ui.print(rep.render(), markup=False)
        if ui.verbose:
            # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
            from .emit.emulate import kernel_macros

            # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
            from .kernel import MAX_FILE_BYTES
            from .readfile import read_regular_text

            path = os.path.join(args.out, "kernel.cu")
            facts = kernel_macros(read_regular_text(path, MAX_FILE_BYTES, "kernel.cu", follow=False))
            ui.print(f"{path}: " + ", ".join(f"SYNTH_{k} {v}" for k, v in facts.items())
                     + f"; {args.repeats} timed launches (median reported)")
    if not rep.ok:
        out.fail("wrong_result", f"{rep.name}: kernel.cu computes a wrong result (max |C - ref| = "
                 f"{rep.max_abs_err:.3g})", "run 'synth verify' on the folder and report the kernel",
                 Loc(os.path.join(args.out, "kernel.cu")))
        if not ui.json:
            print(f"error: {out.errors[-1]['message']}", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------- search

def cmd_search(args, ui: _Ui) -> Outcome:
    if getattr(args, "what", None) != "gemm":
        raise UsageError(None, "synth search: say what to search", "use 'synth search gemm --M ... --N ... --K ...'")
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .cli_search import cli_search
    from .flow.candidates import TopIncomplete
    from .run import gpu_available

    out = Outcome()
    partial = None  # --top folders not written (time limit): the ranking is still the result, then the error
    if ui.json:
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                out.status = cli_search(args)
        except TopIncomplete as e:
            partial = e
        text = buf.getvalue().strip()
        try:
            out.result = json.loads(text) if text else None
        except ValueError:
            out.result = {"text": text}
        # a prediction above the fastest figure published for the shape: the envelope's warnings too
        docs = out.result if isinstance(out.result, list) else [out.result]
        out.warnings += [w for d in docs if isinstance(d, dict) for w in d.get("warnings") or ()]
    else:
        try:
            out.status = cli_search(args)
        except TopIncomplete as e:
            partial = e
    if partial is not None:
        if not ui.json:
            print(partial.render(), file=sys.stderr)
        return out.fail("time_limit", partial.msg, partial.fix)
    if out.status == 0 and getattr(args, "measure", False):
        hopper = args.arch == "sm_90" and getattr(args, "mainloop", None) in (None, "tma_wgmma")
        ok, why = gpu_available(hopper=hopper)
        if not ok:
            # without a GPU, --measure says once that the figures are predictions and exits 0
            # (the table's note says it on the terminal; the JSON envelope carries it as a warning)
            out.warnings.append(f"--measure: no CUDA GPU available ({why}); every figure is a prediction "
                                "of the performance model, not a measurement")
    return out


def cmd_check(args, ui: _Ui) -> Outcome:
    # here, not at the top: a command's layers load when it runs (synth --help and synth run stay light)
    from .frontends.cli import cli_check

    out = Outcome()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf) if ui.json else contextlib.nullcontext():
        status = cli_check(args)
    if ui.json:
        out.result = json.loads(buf.getvalue())
    if status:
        out.fail("refuted", f"{args.file}: not every wait is proven", "see the counterexamples (docs/check.md)",
                 Loc(args.file))
    return out


_COMMANDS: dict[str, Callable[[Any, _Ui], Outcome]] = {
    "solve": cmd_solve,
    "lower": cmd_lower,
    "verify": cmd_verify,
    "certify": cmd_certify,
    "check": cmd_check,
    "emit": cmd_emit,
    "run": cmd_run,
    "search": cmd_search,
}

"""The whole flow, as pure steps plus one writer: problem -> graph -> schedule -> program -> proof/kernel.

``synth solve`` is :func:`run` followed by :func:`write_outputs`; the CLI only
parses arguments and prints. Output folders are written atomically: everything
goes to a temporary sibling folder that is renamed into place at the end, so a
failure never leaves a half-written ``OUT/``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Callable, Optional, Union

from ..deadline import NEVER, Deadline, TimeUp, as_deadline
from ..emit.cuda import emit_kernel
from ..emit.timeline import render_timeline
from ..emit.timeline_pingpong import design_timeline
from ..errors import Loc, SynthError
from ..graph import Graph, build_graph
from ..hopper.problem import HopperGemm
from ..load import given_source, load_problem
from ..lower import STRATEGIES, lower
from ..model import solve
from ..outdir import publish
from ..printer import program_text
from ..problem import Problem
from ..program import Program, program_to_json
from ..schedule import (Schedule, check_schedule, read_schedule_json, schedule_from_json, schedule_from_pins,
                        schedule_to_json)
from ..sections import NAME_RE
from ..verify import load_program, verify_program, write_certificate
from ..verify.certificate_phases import write_hopper_certificate
from .hopper import HopperResult, load_hopper_output, output_files, run_hopper
from .ws import WsProblem, WsResult, run_ws, write_ws
from .phases import Phase, run_phases, timings, verify_text


@dataclass(frozen=True)
class Result:
    """Everything ``synth solve`` computes for one problem."""

    problem: Problem
    graph: Graph
    schedule: Schedule
    program: Program
    report: Optional[object] = None
    """:class:`synth.verify.Report`, None when verification was skipped."""
    kernel: Optional[str] = None
    """kernel.cu text for GEMM problems."""
    phases: tuple[tuple[str, float], ...] = ()
    """Wall seconds of each phase run, in order: ``graph``, ``schedule``, ``lower``, ``prove``, ``emit``."""
    outcomes: tuple = ()
    """The :class:`~synth.flow.phases.PhaseOutcome` of each phase run, in order (``verify.txt`` is written from
    them)."""

    @property
    def proven(self) -> bool:
        return self.report is None or bool(getattr(self.report, "ok", False))


TimeLimitReached = TimeUp
"""The whole-command deadline passed (the CLI exits 1, code ``time_limit``): :class:`synth.deadline.TimeUp`."""


Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``, the shape :mod:`synth.search` uses too."""

PROVE_QUERY_LIMIT = 10.0
"""Seconds at most per Z3 query while proving (less when the command's deadline is nearer)."""

SOLVER_SHARE = 0.6
"""Fraction of the remaining time CP-SAT may use when the proof still has to run after it."""

SOLVER_SHARE_NO_PROOF = 0.8
"""Fraction CP-SAT may use without a proof (``--no-verify``): the lowering and the writing still follow."""


def solve_schedule(problem: Problem, graph: Graph, *, time_limit: float = 20.0, workers: int = 2) -> Schedule:
    """The optimal schedule (CP-SAT); a fully pinned problem is still checked by the solver."""
    return solve(problem, graph, time_limit=time_limit, workers=workers)


def run(problem: Problem, *, time_limit: float = 60.0, workers: int = 2, verify: bool = True,
        emit: bool = True, pinned_only: bool = False, progress: Progress | None = None,
        deadline: Union[Deadline, float, None] = None) -> Result:
    """Solve (or take the pins as the schedule when ``pinned_only``), lower, prove, emit: :data:`SM80_PHASES`,
    run by :func:`synth.flow.phases.run_phases`.

    ``time_limit`` is the wall-clock budget of the whole call in seconds, or
    ``deadline`` (a :class:`~synth.deadline.Deadline` or a :func:`time.monotonic`
    instant) when given; the caller's writing of the folder counts against the
    same deadline (:func:`write_outputs`). CP-SAT gets :data:`SOLVER_SHARE` of
    what is left when a proof follows it (:data:`SOLVER_SHARE_NO_PROOF`
    otherwise), each Z3 query
    at most :data:`PROVE_QUERY_LIMIT` seconds and none past the deadline. Once
    the deadline has passed, the phase running raises
    :class:`~synth.deadline.TimeUp` naming itself (``schedule``, ``lower``,
    ``prove``, ``emit``): a result is either complete or not returned. A step
    without a check of its own (lowering a very large body, drawing its
    timeline) runs to its end here; the CLI also interrupts
    it at the deadline (:func:`synth.deadline.enforced`).

    Pure apart from solver time: nothing is written. Raises :class:`SynthError`
    for user errors (including infeasible problems). A Hopper problem
    (:class:`~synth.hopper.problem.HopperGemm`, ``mainloop: tma_wgmma``) takes the
    Hopper flow and gives a :class:`~synth.flow.hopper.HopperResult`.
    """
    dl = as_deadline(deadline, time_limit)
    if isinstance(problem, WsProblem):  # a warp-specialized body (synth.flow.ws)
        return run_ws(problem, deadline=dl, verify=verify, workers=workers, progress=progress,
                      query_limit=PROVE_QUERY_LIMIT)
    if isinstance(problem, HopperGemm):
        dl.check("schedule", loc=Loc(problem.path))
        return run_hopper(problem, deadline=dl, verify=verify, emit=emit, progress=progress,
                          query_limit=PROVE_QUERY_LIMIT)
    s = SimpleNamespace(problem=problem, workers=workers, verify=verify, emit=emit, pinned_only=pinned_only, dl=dl,
                        say=progress or (lambda phase, done, total: None), report=None, kernel=None)
    outcomes = run_phases(SM80_PHASES, s, deadline=dl, progress=progress, loc=Loc(problem.path), name_done=True)
    return Result(problem, s.graph, s.schedule, s.program, s.report, s.kernel, timings(outcomes), outcomes)


def _solve(s) -> Schedule:
    budget = s.dl.left() * (SOLVER_SHARE if s.verify else SOLVER_SHARE_NO_PROOF)
    return solve_schedule(s.problem, s.graph, time_limit=budget, workers=s.workers)


def _prove(s):
    report = verify_program(s.program, time_limit=PROVE_QUERY_LIMIT, deadline=s.dl,
                            progress=lambda done, total: s.say("prove", done, total))
    s.program = report.program
    return report


SM80_PHASES = (
    Phase("graph", lambda s: build_graph(s.problem), key="graph"),
    Phase("schedule", lambda s: schedule_from_pins(s.problem, s.graph), key="schedule", when=lambda s: s.pinned_only),
    Phase("schedule", _solve, key="schedule", when=lambda s: not s.pinned_only),
    Phase("lower", lambda s: lower(s.problem, s.graph, s.schedule), key="program"),
    Phase("prove", _prove, key="report", when=lambda s: s.verify, verify_txt=lambda r: r.report.render() + "\n"),
    Phase("emit", lambda s: emit_kernel(s.problem, s.schedule, s.program), key="kernel",
          when=lambda s: s.emit and s.problem.gemm is not None and (s.report is None or s.report.ok)),
)
"""The flow of ``synth solve`` for an sm_80 problem (:func:`run`), in order."""


def default_out_dir(problem: Problem) -> str:
    """``out/<name>``; the loader restricts names to safe identifiers, and this re-checks it."""
    if not NAME_RE.match(problem.name):
        raise SynthError(Loc(problem.path),
                         f"problem name {problem.name!r} cannot name an output folder",
                         "use letters, digits, '_', '.' and '-' (starting with a letter, digit or '_'), "
                         "or choose a folder with -o")
    return os.path.join("out", problem.name)


def write_outputs(result: Result, out_dir: str, *, force: bool = False,
                  deadline: Union[Deadline, float, None] = None) -> list[str]:
    """Write schedule.json, program.txt/json, certificate/, timeline.svg/.png and kernel.cu under ``out_dir``.

    The folder is built aside and moved into place (:func:`synth.outdir.publish`):
    an existing folder is replaced only with ``force`` and only when synth wrote
    every file in it. Returns the written paths (relative to ``out_dir``).
    ``deadline`` (the command's, :class:`~synth.deadline.Deadline`) is checked
    between files and caps the certificate's solver re-checks; once it passes,
    :class:`~synth.deadline.TimeUp` (phase ``write``) is raised and nothing is
    left behind (no folder, no temporary folder).
    """
    dl = as_deadline(deadline)
    if isinstance(result, WsResult):  # a warp-specialized body's folder (synth.flow.ws)
        return write_ws(result, out_dir, force=force, deadline=dl)
    files: list[str] = []
    write = _write_hopper if isinstance(result, HopperResult) else (lambda r, d, t: _write_all(r, d, program_text, t))
    publish(out_dir, lambda tmp: files.extend(write(result, tmp, dl)), force=force)
    return files


def _write_files(d: str, files: dict[str, str], png: bytes) -> list[str]:
    """Write the text files and ``timeline.png`` into ``d``; their names, sorted."""
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)  # store/ of a TMA-store kernel
        with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    with open(os.path.join(d, "timeline.png"), "wb") as fh:
        fh.write(png)
    return sorted(list(files) + ["timeline.png"])


CERTIFICATE_QUERY_LIMIT = 60.0
"""Seconds at most per solver call of a certificate's re-check while writing (less near the deadline)."""


def hopper_certificate_by(report, directory: str, dl: Deadline, phase: str) -> None:
    """:func:`write_hopper_certificate` under the deadline: each re-check query is capped by what is left, so a
    query cut by the deadline answers unknown and the writer refuses; that is the time limit (:class:`TimeUp`),
    not a failed proof."""
    try:
        write_hopper_certificate(report, directory, timeout_s=dl.cap(CERTIFICATE_QUERY_LIMIT))
    except ValueError:
        if dl.left() < DEADLINE_SLACK:
            raise TimeUp(phase, dl.limit) from None
        raise


DEADLINE_SLACK = 0.1
"""Seconds: a certificate refused with less than this left of the deadline was cut by it."""


def _write_hopper(result, d: str, dl: Deadline = NEVER) -> list[str]:
    files = output_files(result)
    dl.check("write (timeline)")
    # the picture of the design (one CTA or a cluster; ping-pong, persistent TMA stores, or the ring as it is)
    files["timeline.svg"], png = design_timeline(result.program, result.config)
    written = _write_files(d, files, png)
    if result.report is not None and result.report.ok:
        dl.check("write (certificate)")
        hopper_certificate_by(result.report, os.path.join(d, "certificate"), dl, "write (certificate)")
        dl.check("write (certificate)")
        written.append("certificate/")
    for name, _, rep in result.orders:  # each order program is a Hopper program folder: 'synth certify OUT/order/even'
        dl.check("write (order certificate)")
        hopper_certificate_by(rep, os.path.join(d, "order", name, "certificate"), dl, "write (order certificate)")
        written.append(f"order/{name}/certificate/")
    if result.store_report is not None and result.store_report.ok:
        dl.check("write (store certificate)")  # store/ is an sm_80 program folder: 'synth certify OUT/store'
        write_certificate(result.store_report, os.path.join(d, "store", "certificate"),
                          timeout_s=dl.cap(CERTIFICATE_QUERY_LIMIT), deadline=dl,
                          program_bytes=files["store/program.json"].encode("utf-8"))
        written.append("store/certificate/")
    return sorted(written)


def _write_all(result: Result, d: str, program_text, dl: Deadline = NEVER) -> list[str]:
    files: dict[str, str] = {}
    files["schedule.json"] = json.dumps(schedule_to_json(result.problem, result.schedule), indent=2) + "\n"
    files["program.txt"] = program_text(result.program)
    files["program.json"] = json.dumps(program_to_json(result.program), indent=2) + "\n"
    files["problem.yaml"] = _problem_source(result.problem)
    if result.kernel is not None:
        files["kernel.cu"] = result.kernel
    dl.check("write (timeline)")
    files["timeline.svg"], png = render_timeline(result.problem, result.schedule, result.program)
    dl.check("write (timeline)")
    written = _write_files(d, files, png)
    if result.report is not None:
        write_certificate(result.report, os.path.join(d, "certificate"), timeout_s=CERTIFICATE_QUERY_LIMIT,
                          deadline=dl)
        with open(os.path.join(d, "verify.txt"), "w", encoding="utf-8") as fh:
            fh.write(verify_text(result))  # each proof phase's paragraph, in order
        written += ["certificate/", "verify.txt"]
    dl.check("write")
    return written


def _problem_source(problem: Problem) -> str:
    """The problem file as given (so an output folder is self-contained), or its gemm config."""
    text = given_source(problem.path)
    if text is not None:
        return text
    if problem.gemm is not None:
        return gemm_yaml(problem.gemm, problem.name)
    return f"# generated problem {problem.name}; no source file\n"


def load_output(out_dir: str) -> tuple[Problem, Schedule, Program]:
    """Read back an output folder written by :func:`write_outputs` (for ``synth emit``/``run``).

    A Hopper folder gives ``(HopperGemm, HopperChoice, HopperProgram)`` instead, each re-derived
    and checked against the others (:func:`synth.flow.hopper.load_hopper_output`).
    """
    for name in ("problem.yaml", "schedule.json", "program.json"):
        if not os.path.isfile(os.path.join(out_dir, name)):
            raise SynthError(Loc(out_dir), f"'{out_dir}' has no {name}",
                             "pass a folder written by 'synth solve'")
    problem = load_problem(os.path.join(out_dir, "problem.yaml"))
    problem = replace(problem, path=os.path.join(out_dir, "problem.yaml"))
    if isinstance(problem, HopperGemm):
        out = load_hopper_output(out_dir, problem)
        return out.problem, out.choice, out.program
    sched_path = os.path.join(out_dir, "schedule.json")
    doc = read_schedule_json(sched_path)  # a regular file, bounded, nested at most MAX_JSON_DEPTH deep
    schedule = _schedule_of(problem, doc, sched_path)
    program = load_program(os.path.join(out_dir, "program.json"))
    check_lowered(problem, schedule, program, os.path.join(out_dir, "program.json"))
    return problem, schedule, program


def _schedule_of(problem: Problem, doc, path: str) -> Schedule:
    """schedule.json read back for ``problem``; a SynthError naming the first op or buffer that does not match."""
    fix = "restore the folder's problem.yaml, or re-run 'synth solve' on the edited one"
    try:
        have = {o["name"] for o in doc["ops"]}
        bufs = {b["name"] for b in doc["buffers"]}
    except (KeyError, TypeError) as exc:
        raise SynthError(Loc(path), f"schedule.json lacks {exc}", "re-run 'synth solve'") from None
    for o in problem.ops:
        if o.name not in have:
            raise SynthError(Loc(path), f"schedule.json has no op '{o.name}' of problem.yaml: the schedule was "
                             "solved for another problem", fix)
    for b in problem.buffers:
        if b.name not in bufs:
            raise SynthError(Loc(path), f"schedule.json has no buffer '{b.name}' of problem.yaml", fix)
    try:
        return schedule_from_json(problem, doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise SynthError(Loc(path), f"schedule.json cannot be read back: {exc!r}", "re-run 'synth solve'") from None


def check_lowered(problem: Problem, schedule: Schedule, program: Program, path: str) -> None:
    """Raise SynthError unless ``program`` is what lowering ``schedule`` of ``problem`` gives, up to the wait
    counts (which ``synth verify`` proves, so a user may edit them): a folder whose problem.yaml, schedule.json
    and program.json disagree would emit a kernel of one problem with another's pipeline."""
    def shape(p: Program) -> Program:
        return replace(p, name="", notes=(), waits=tuple(replace(w, in_flight=None, tight=None, reason="") for w in p.waits))

    if isinstance(program.trip_count, int) and problem.loop.symbolic and \
            program.trip_count >= problem.loop.min_trip_count:
        # a program lowered for one trip count (the Python API's fixed-K gemm problems) of a problem file that
        # reads T at run time: problem files cannot state a fixed trip count, so compare at that one
        problem = replace(problem, loop=replace(problem.loop, trip_count=program.trip_count,
                                                min_trip_count=program.trip_count))
    graph = build_graph(problem)
    bad = check_schedule(problem, graph, schedule)
    if bad:
        raise SynthError(Loc(os.path.join(os.path.dirname(path), "schedule.json")), "schedule.json is not a valid "
                         f"schedule of the folder's problem.yaml: {bad[0]}",
                         "restore the folder's problem.yaml, or re-run 'synth solve' on the edited one")
    got, ref = shape(program), None
    for st in STRATEGIES:  # the default strategy first: the others are lowered only when it does not match
        try:
            want = shape(lower(problem, graph, schedule, predicate_strategy=st))
        except SynthError as exc:
            raise SynthError(Loc(path), f"schedule.json does not fit problem.yaml: {exc.msg}",
                             "restore the folder's files, or re-run 'synth solve'") from None
        if got == want:
            return
        ref = ref or want
    what = next((f for f in ("trip_count", "min_trip_count", "max_stage", "ops", "buffers", "queues", "parts",
                             "waits") if getattr(got, f) != getattr(ref, f)), "statements")
    raise SynthError(Loc(path), f"program.json is not the lowering of the folder's problem.yaml and "
                     f"schedule.json (its {what} differ): one of them was edited or comes from another folder",
                     "restore the folder's files, or re-run 'synth solve' on problem.yaml")


def gemm_yaml(cfg, name: str) -> str:
    """A ``kind: gemm`` problem file reproducing a :class:`synth.gemm.GemmConfig`."""
    stages = "auto" if cfg.stages is None else cfg.stages
    return (f"name: {name}\n"
            "kind: gemm\n"
            f"shape: {{M: {cfg.M}, N: {cfg.N}, K: {cfg.K}}}\n"
            f"dtype: {cfg.dtype}\n"
            f"tile: {{BM: {cfg.BM}, BN: {cfg.BN}, BK: {cfg.BK}}}\n"
            f"warps: {cfg.warps}\n"
            f"stages: {stages}\n"
            + (f"split_k: {cfg.split_k}\n" if cfg.split_k != 1 else "")
            + ("stream_k: true\n" if getattr(cfg, "stream_k", False) else "")
            + f"arch: {cfg.arch}\n"
            "mainloop: cp_async\n")

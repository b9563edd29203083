"""The warp-specialized body flow of ``synth solve``: a body file (``kind: attention | gemm_kloop | body``,
docs/problem-format.md, docs/ws_model.md) -> schedule -> program -> proof, as a list of phases (:data:`WS_PHASES`,
run by :func:`synth.flow.phases.run_phases`).

0. **load** (:func:`load_solve_problem`, ``synth solve``'s loader): a file whose ``kind:`` names a warp-specialized
   body is read by :func:`synth.model.ws_read.read_ws_text` into a :class:`WsProblem`; any other file by
   :func:`synth.load.problem_from_doc`;
1. **schedule** (:func:`synth.model.ws_schedule.solve_ws`): the least-II warp-specialized schedule under the
   command's time limit (a share of what is left, :data:`SOLVER_SHARE`); OPTIMAL, or FEASIBLE with its bound and
   gap when the limit ended the search;
2. **lower** (:func:`synth.lower.hopper_attention.lower_attention`, ``kind: attention`` only): the Hopper program
   for every number of KV blocks;
3. **prove** (:func:`synth.verify.hopper_attention.verify_attention`, unless ``--no-verify``): the barrier protocol,
   the consumers' registers, the once-loaded Q.

:func:`output_files` gives the text of each file of the output folder (``problem.yaml``, ``schedule.json``
(:func:`schedule_to_json`, docs/outputs.md), ``program.json`` and ``program.txt`` for attention, ``verify.txt``
when proven or refuted); :func:`write_ws` publishes them with :func:`synth.outdir.publish` (never a half-written
folder).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Optional, Union

from ..bounds import MAX_INPUT_BYTES
from ..deadline import Deadline, TimeUp, as_deadline
from ..errors import Loc, SynthError
from ..hopper.ir import HopperProgram, dumps
from ..hopper.printer import hopper_text
from ..load import problem_from_doc
from ..lower.hopper_attention import AttentionProgram, lower_attention
from ..model.ws_body import WsBody, WsMachine
from ..model.ws_read import KINDS, read_ws_text
from ..model.ws_schedule import OpPlace, Pins, WsSchedule, solve_ws
from ..outdir import publish
from ..readfile import read_regular_text
from ..verify.hopper_attention import AttentionReport, verify_attention
from ..yamlnodes import LDict, read_yaml_text
from .phases import Phase, run_phases, timings, verify_text

Progress = Callable[[str, int, int], None]

WS_KINDS = KINDS
"""The ``kind:`` values of a warp-specialized body file (``attention``, ``gemm_kloop``, ``body``)."""

SOLVER_SHARE = 0.6
"""Fraction of the time left that CP-SAT may use when the lowering and the proof follow it."""

SOLVER_SHARE_NO_PROOF = 0.8
"""Fraction CP-SAT may use when no proof follows (``--no-verify``, or a body that is not lowered)."""

UNTIMED_LIMIT = 60.0
"""CP-SAT's seconds when the caller gives no deadline (the Python API without one)."""

QUERY_LIMIT = 10.0
"""Seconds at most per Z3 query of the proof."""

SCHEDULE_FORMAT = "synth-ws-schedule"
SCHEDULE_VERSION = 1


@dataclass(frozen=True)
class WsProblem:
    """A warp-specialized body file as ``synth solve`` reads it."""

    name: str
    kind: str
    body: WsBody
    machine: WsMachine
    pins: Pins
    path: str
    source: str
    """The file's text, as given (the output folder's ``problem.yaml``)."""
    kind_loc: Loc
    """Where the file says ``kind:`` (errors about the body as a whole point there)."""


def ws_problem_text(text: str, path: str = "<string>") -> WsProblem:
    """The :class:`WsProblem` of a body file's text; :class:`SynthError` at ``file:line:col``."""
    doc = read_yaml_text(text, path)
    body, mach, pins = read_ws_text(text, path)
    kind = doc["kind"]
    return WsProblem(body.name, kind, body, mach, pins, path, text, doc.val_loc.get("kind", Loc(path)))


def load_solve_problem(path: str):
    """``synth solve``'s loader: a :class:`WsProblem` when the file's ``kind:`` names a warp-specialized body
    (:data:`WS_KINDS`), else what :func:`synth.load.load_problem` gives (a :class:`~synth.problem.Problem` or a
    :class:`~synth.hopper.problem.HopperGemm`)."""
    text = read_regular_text(path, MAX_INPUT_BYTES, "the problem file", fix="give the path of a problem.yaml file")
    doc = read_yaml_text(text, path)
    if isinstance(doc, LDict) and isinstance(doc.get("kind"), str) and doc["kind"] in WS_KINDS:
        return ws_problem_text(text, path)
    return problem_from_doc(doc, path)


@dataclass(frozen=True)
class WsResult:
    """Everything ``synth solve`` computes for a warp-specialized body: the problem, its schedule, the attention
    program and its proof (None where the body is not attention or the proof was skipped), and ``outcomes``, the
    :class:`~synth.flow.phases.PhaseOutcome` of each phase run, in order."""

    problem: WsProblem
    schedule: WsSchedule
    attention: Optional[AttentionProgram] = None
    report: Optional[AttentionReport] = None
    outcomes: tuple = ()

    @property
    def program(self) -> Optional[HopperProgram]:
        return None if self.attention is None else self.attention.program

    @property
    def phases(self) -> tuple[tuple[str, float], ...]:
        """``(name, seconds)`` of each timed phase run."""
        return timings(self.outcomes)

    @property
    def proven(self) -> bool:
        """The proof holds, or none was asked for (``--no-verify``, a body that is not lowered)."""
        return self.report is None or bool(self.report.ok)


def _schedule(s) -> WsSchedule:
    share = SOLVER_SHARE if s.verify and s.problem.kind == "attention" else SOLVER_SHARE_NO_PROOF
    left = s.dl.left()
    budget = max(0.1, left * share) if math.isfinite(left) else UNTIMED_LIMIT
    t0 = time.monotonic()
    try:
        return solve_ws(s.problem.body, s.problem.machine, pins=s.problem.pins, time_limit=budget, workers=s.workers)
    except TimeUp:
        raise
    except SynthError as e:
        if time.monotonic() - t0 >= 0.9 * budget:  # the search's own limit ended it before any schedule
            cut = TimeUp("schedule", s.dl.limit, loc=Loc(s.problem.path))
            cut.msg += f" (the search, after {budget:.2f} s of CP-SAT: {e.msg})"
            raise cut from None
        if e.loc is not None:
            raise
        raise SynthError(s.problem.kind_loc, e.msg, e.fix) from None


def _lower(s) -> AttentionProgram:
    try:
        return lower_attention(s.problem.body, s.schedule)
    except ValueError as e:
        sched = s.schedule
        if sched.status != "OPTIMAL":
            # the time limit ended the search at a schedule outside the lowering's form: the command's time limit
            # (exit 1), not a refusal of the file; a longer search may find the least II, which the lowering takes
            cut = TimeUp("lower", s.dl.limit, loc=Loc(s.problem.path))
            cut.msg = (f"the time limit{'' if s.dl.limit is None else f' ({s.dl.limit:g} s)'} ended the schedule "
                       f"search at a {sched.status} schedule (II {sched.ii}, least II not refuted {sched.bound}) that "
                       f"the attention lowering does not take: {e}; nothing was written")
            raise cut from None
        raise SynthError(s.problem.kind_loc, f"the schedule of {s.problem.name} cannot be lowered to an attention "
                         f"program: {e}", "remove the pins that force this arrangement (pins.producer, "
                         "pins.mode, pins.consumers); docs/attention.md says which schedules the lowering takes") from None


def _prove(s) -> AttentionReport:
    return verify_attention(s.attention, time_limit=s.dl.cap(s.query_limit))


def _prove_text(r: WsResult) -> str:
    return ("the attention program (program.json) for every number of KV blocks n >= 0: the barrier protocol, each "
            "consumer's registers, the once-loaded Q (docs/attention.md); a refutation names its class, warp "
            "group, KV block, barrier[slot] and phase, and n\n" + r.report.render() + "\n")


WS_PHASES = (
    Phase("schedule", _schedule, key="schedule"),
    Phase("lower", _lower, key="attention", when=lambda s: s.problem.kind == "attention"),
    Phase("prove", _prove, key="report", when=lambda s: s.verify and s.attention is not None,
          verify_txt=_prove_text),
)
"""The flow of ``synth solve`` for a warp-specialized body, in order (the module docstring)."""


def run_ws(problem: WsProblem, *, deadline: Union[Deadline, float], verify: bool = True, workers: int = 2,
           progress: Optional[Progress] = None, query_limit: float = QUERY_LIMIT) -> WsResult:
    """Schedule, lower (attention) and prove: :data:`WS_PHASES`, run by :func:`synth.flow.phases.run_phases`. Pure
    apart from solver time. Past the deadline the phase running raises :class:`~synth.deadline.TimeUp` naming
    itself: a result is complete or not returned."""
    dl = as_deadline(deadline)
    s = SimpleNamespace(problem=problem, verify=verify, workers=workers, dl=dl, query_limit=query_limit,
                        attention=None, report=None)
    outcomes = run_phases(WS_PHASES, s, deadline=dl, progress=progress, loc=Loc(problem.path), name_done=True)
    return WsResult(problem, s.schedule, s.attention, s.report, outcomes)


# ------------------------------------------------------------------------------------------------ schedule.json

def _op_json(o: OpPlace) -> dict:
    return {"name": o.name, "unit": o.unit, "warp_group": o.warp_group, "stage": o.stage, "start": o.start,
            "duration": o.duration, "wait_start": o.wait_start, "wait_end": o.wait_end, "groups": o.groups}


def schedule_to_json(problem: WsProblem, sched: WsSchedule) -> dict:
    """``schedule.json`` of a warp-specialized body (docs/outputs.md, "A warp-specialized body's folder")."""
    return {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION, "body": sched.body, "kind": problem.kind,
            "ii": sched.ii, "status": sched.status, "bound": sched.bound, "gap": sched.gap,
            "makespan": sched.makespan, "makespan_bound": sched.makespan_bound,
            "arrangement": {"design": sched.design, "producer": sched.producer, "consumers": sched.consumers,
                            "mode": sched.mode, "offsets": list(sched.offsets)},
            "ops": [_op_json(o) for o in sched.ops],
            "rings": {name: d for name, d in sched.depth},
            "register_copies": {name: k for name, k in sched.copies},
            "registers": {"producer": sched.registers[0], "consumer": sched.registers[1],
                          "consumer_need": sched.register_need},
            "smem": sched.smem, "named_barriers": sched.named_barriers,
            "solve_seconds": sched.solve_seconds, "solves": sched.solves, "notes": list(sched.notes)}


def schedule_from_json(doc: Any, path: str = "schedule.json") -> WsSchedule:
    """The :class:`WsSchedule` a ``schedule.json`` of :func:`schedule_to_json` states; SynthError (exit 2) when it is
    not one."""
    try:
        if doc.get("format") != SCHEDULE_FORMAT or doc.get("version") != SCHEDULE_VERSION:
            raise ValueError(f"format {doc.get('format')!r} version {doc.get('version')!r}, not "
                             f"{SCHEDULE_FORMAT!r} version {SCHEDULE_VERSION}")
        a, r = doc["arrangement"], doc["registers"]
        ops = tuple(OpPlace(o["name"], o["unit"], o["warp_group"], int(o["start"]), int(o["stage"]),
                            int(o["duration"]), o["wait_start"], o["wait_end"], o["groups"]) for o in doc["ops"])
        return WsSchedule(doc["body"], int(doc["ii"]), int(a["consumers"]), a["mode"],
                          tuple(int(x) for x in a["offsets"]), ops,
                          tuple((k, int(v)) for k, v in doc["rings"].items()),
                          tuple((k, int(v)) for k, v in doc["register_copies"].items()), bool(a["producer"]),
                          (int(r["producer"]), int(r["consumer"])), int(r["consumer_need"]), int(doc["smem"]),
                          int(doc["named_barriers"]), int(doc["makespan"]), doc["status"], int(doc["bound"]),
                          float(doc["gap"]), int(doc["makespan_bound"]), float(doc["solve_seconds"]),
                          int(doc["solves"]), tuple(doc["notes"]))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise SynthError(Loc(path), f"not a warp-specialized schedule.json: {type(e).__name__}: {e}",
                         "pass the schedule.json 'synth solve' wrote for a warp-specialized body") from None


# ------------------------------------------------------------------------------------------------ the folder

def output_files(result: WsResult) -> dict[str, str]:
    """The text files of a warp-specialized body's output folder, by name."""
    files = {"problem.yaml": result.problem.source,
             "schedule.json": json.dumps(schedule_to_json(result.problem, result.schedule), indent=2) + "\n"}
    if result.program is not None:
        files["program.json"] = dumps(result.program)
        files["program.txt"] = hopper_text(result.program)
    if result.report is not None:
        files["verify.txt"] = verify_text(result)
    return files


def write_ws(result: WsResult, out_dir: str, *, force: bool = False, deadline: Union[Deadline, float, None] = None
             ) -> list[str]:
    """Publish :func:`output_files` as ``out_dir`` (:func:`synth.outdir.publish`: built aside, moved into place; on
    any failure, a Ctrl-C or the deadline nothing is left). Returns the written names, sorted."""
    dl = as_deadline(deadline)
    files = output_files(result)

    def build(tmp: str) -> None:
        for name, text in files.items():
            dl.check("write")
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        dl.check("write")

    publish(out_dir, build, force=force)
    return sorted(files)


def summary_json(result: WsResult, out: str, files: list[str], phases, wall: float) -> dict:
    """``synth solve --json``'s ``result`` for a warp-specialized body (docs/json.md)."""
    rep = result.report
    return {"problem": result.problem.name, "kind": result.problem.kind, "out": out, "files": files,
            "schedule": schedule_to_json(result.problem, result.schedule),
            "verified": None if rep is None else bool(rep.ok),
            "obligations": None if rep is None else rep.by_class(),
            "refutations": [] if rep is None else [
                {"class": r.kind, "warp_group": r.warp_group, "block": r.block, "barrier": r.barrier, "slot": r.slot,
                 "phase": r.phase, "n": r.n, "summary": r.summary} for r in rep.refutations],
            "phases": [{"name": n, "seconds": round(sec, 4)} for n, sec in phases],
            "wall_seconds": round(wall, 4)}


def summary_lines(result: WsResult) -> list[str]:
    """What ``synth solve`` prints for a warp-specialized body: the schedule in words, the proof's summary."""
    s, p = result.schedule, result.problem
    lines = [f"{p.name} (kind: {p.kind}): II {s.ii} cycles, {s.status}"
             + (f" (bound {s.bound}, gap {100 * s.gap:.2f}%)" if s.status != "OPTIMAL" else "")
             + f", {s.design}{', producer warp group' if s.producer else ', no producer'}"
             + (f", offsets {', '.join(map(str, s.offsets))}" if s.mode == "stagger" else ""),
             f"  rings: {', '.join(f'{k} {v} slots' for k, v in s.depth) or 'none'}; register copies: "
             f"{', '.join(f'{k} {v}' for k, v in s.copies) or 'none'}; setmaxnreg {s.registers[0]}:{s.registers[1]} "
             f"(a consumer needs {s.register_need}); shared memory {s.smem} B; makespan {s.makespan}"]
    lines += [f"  note: {n}" for n in s.notes]
    if result.report is not None:
        lines.append(result.report.render())
    elif result.attention is None:
        lines.append(f"  kind: {p.kind} is scheduled only (no program is lowered, so nothing is proven); the "
                     "schedule passed the model's independent re-check")
    return lines


__all__ = ["WS_KINDS", "WS_PHASES", "WsProblem", "WsResult", "load_solve_problem", "ws_problem_text", "run_ws",
           "schedule_to_json", "schedule_from_json", "output_files", "write_ws", "summary_json", "summary_lines"]

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
   the consumers' registers, the once-loaded Q;
4. **emit** (:func:`synth.emit.sm90.attention_kernel.emit_attention_kernel`, ``kind: attention`` whose program is
   proven, or with ``--no-verify`` as the Hopper GEMM's flow does): the sm_90a ``kernel.cu`` of the program, with the
   file's ``causal`` mask and ``dtype``. A body outside the form the kernel is written for (head dim 64, 128 or 256,
   BN a multiple of 64, 64 rows per consumer, ...) gets no kernel: the result's ``kernel_note`` says why.

:func:`output_files` gives the text of each file of the output folder (``problem.yaml``, ``schedule.json``
(:func:`schedule_to_json`, docs/outputs.md), ``program.json``, ``program.txt`` and ``kernel.cu`` for attention,
``verify.txt`` when proven or refuted); :func:`write_ws` publishes them with :func:`synth.outdir.publish` (never a
half-written folder), with an attention body's timeline (``timeline.svg`` and ``timeline.png``,
:func:`synth.emit.timeline_ws.render_ws_timeline`: the steady state, one lane per warp group).

The folder read back (``synth verify OUT``): :func:`load_ws_output` re-checks ``schedule.json`` against
``problem.yaml`` and requires ``program.json`` to be the lowering of the two up to :data:`EDITABLE` and ``kernel.cu``, when there is one,
to be the kernel synth emits from that ``program.json``;
:func:`verify_ws_output` proves it again. ``synth certify`` of an attention folder is :func:`certify_ws` (the
independent checker writes ``certificate/`` when it is absent, then checks it); :func:`certify_refusal` is its
answer for a body's folder that holds no program (no certificate is written for it).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Optional, Union

from ..bounds import MAX_INPUT_BYTES
from ..deadline import Deadline, TimeUp, as_deadline
from ..emit.sm90.attention_kernel import emit_attention_kernel
from ..emit.timeline_ws import render_ws_timeline
from ..errors import Loc, SynthError
from ..hopper.ir import HopperProgram, dumps
from ..hopper.printer import hopper_text
from ..load import is_ws_body, problem_from_doc, solve_document
from ..lower.hopper_attention import AttentionProgram, lower_attention
from ..model.ws_body import WsBody, WsMachine
from ..model.ws_read import KINDS, attention_causal, attention_dtype, read_ws_text
from ..model.ws_schedule import OpPlace, Pins, WsSchedule, solve_ws
from ..outdir import MARKER, publish, read_marker, sha256_file
from ..readfile import load_json, read_regular_bytes, read_regular_text
from ..trusted import attention as trusted_attention
from ..trusted import certify as trusted_certify
from ..trusted import solvers as trusted_solvers
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
    causal: bool = False
    """``kind: attention``: the kernel applies the causal mask (the file's ``causal:``)."""
    dtype: str = "f16"
    """``kind: attention``: Q, K and V's element type (the file's ``dtype:``, ``f16`` or ``bf16``)."""


def ws_problem_text(text: str, path: str = "<string>") -> WsProblem:
    """The :class:`WsProblem` of a body file's text; :class:`SynthError` at ``file:line:col``."""
    doc = read_yaml_text(text, path)
    body, mach, pins = read_ws_text(text, path)
    kind = doc["kind"]
    causal, dtype = (attention_causal(doc), attention_dtype(doc)) if kind == "attention" else (False, "f16")
    return WsProblem(body.name, kind, body, mach, pins, path, text, doc.val_loc.get("kind", Loc(path)), causal, dtype)


def load_solve_problem(path: str):
    """``synth solve``'s loader: a :class:`WsProblem` when the file's ``kind:`` names a warp-specialized body
    (:data:`WS_KINDS`), else what :func:`synth.load.load_problem` gives (a :class:`~synth.problem.Problem` or a
    :class:`~synth.hopper.problem.HopperGemm`)."""
    text, doc = solve_document(path)
    return ws_problem_text(text, path) if is_ws_body(doc) else problem_from_doc(doc, path)


@dataclass(frozen=True)
class WsResult:
    """Everything ``synth solve`` computes for a warp-specialized body: the problem, its schedule, the attention
    program, its proof (None where the body is not attention or the proof was skipped) and its kernel (None where
    there is none: not attention, not proven, or outside the kernel's form, ``kernel_note`` saying which), and
    ``outcomes``, the :class:`~synth.flow.phases.PhaseOutcome` of each phase run, in order."""

    problem: WsProblem
    schedule: WsSchedule
    attention: Optional[AttentionProgram] = None
    report: Optional[AttentionReport] = None
    outcomes: tuple = ()
    kernel: Optional[str] = None
    """``kernel.cu`` (sm_90a), emitted only from a proven program (or with verification skipped)."""
    kernel_note: str = ""
    """Why an attention program has no kernel ('' when it has one, or is not attention)."""

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


def _emit(s) -> Optional[str]:
    p = s.problem
    try:
        return emit_attention_kernel(s.attention, p.body, s.schedule, causal=p.causal, dtype=p.dtype)
    except ValueError as e:  # a body the proof covers but the kernel is not written for: the folder has no kernel
        s.kernel_note = (f"no kernel.cu: the sm_90a attention kernel is not written for this body ({e}); the "
                         "program is proven all the same (docs/attention.md, \"The kernel\")")
        return None


def _unrefuted(s) -> bool:
    return s.report is None or bool(s.report.ok)


WS_PHASES = (
    Phase("schedule", _schedule, key="schedule"),
    Phase("lower", _lower, key="attention", when=lambda s: s.problem.kind == "attention"),
    Phase("prove", _prove, key="report", when=lambda s: s.verify and s.attention is not None,
          verify_txt=_prove_text),
    Phase("emit", _emit, key="kernel", when=lambda s: s.attention is not None and _unrefuted(s)),
)
"""The flow of ``synth solve`` for a warp-specialized body, in order (the module docstring)."""


def run_ws(problem: WsProblem, *, deadline: Union[Deadline, float], verify: bool = True, workers: int = 2,
           progress: Optional[Progress] = None, query_limit: float = QUERY_LIMIT) -> WsResult:
    """Schedule, lower (attention), prove and emit: :data:`WS_PHASES`, run by :func:`synth.flow.phases.run_phases`.
    Pure apart from solver time. Past the deadline the phase running raises :class:`~synth.deadline.TimeUp` naming
    itself: a result is complete or not returned. The kernel is emitted only when the program is proven (or
    ``verify`` is False)."""
    dl = as_deadline(deadline)
    s = SimpleNamespace(problem=problem, verify=verify, workers=workers, dl=dl, query_limit=query_limit,
                        attention=None, report=None, kernel=None, kernel_note="")
    outcomes = run_phases(WS_PHASES, s, deadline=dl, progress=progress, loc=Loc(problem.path), name_done=True)
    return WsResult(problem, s.schedule, s.attention, s.report, outcomes, s.kernel, s.kernel_note)


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
    if result.kernel is not None:
        files["kernel.cu"] = result.kernel
    if result.report is not None:
        files["verify.txt"] = verify_text(result)
    return files


def write_ws(result: WsResult, out_dir: str, *, force: bool = False, deadline: Union[Deadline, float, None] = None
             ) -> list[str]:
    """Publish :func:`output_files` as ``out_dir`` (:func:`synth.outdir.publish`: built aside, moved into place; on
    any failure, a Ctrl-C or the deadline nothing is left), with an attention body's timeline (``timeline.svg``,
    ``timeline.png``). Returns the written names, sorted."""
    dl = as_deadline(deadline)
    files = output_files(result)
    png = None
    if result.attention is not None:
        dl.check("write (timeline)")
        files["timeline.svg"], png = render_ws_timeline(result.schedule)
        dl.check("write (timeline)")

    def build(tmp: str) -> None:
        for name, text in files.items():
            dl.check("write")
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        if png is not None:
            with open(os.path.join(tmp, "timeline.png"), "wb") as fh:
                fh.write(png)
        dl.check("write")

    publish(out_dir, build, force=force)
    return sorted(list(files) + (["timeline.png"] if png is not None else []))


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
    if result.kernel is not None:
        lines.append(f"  kernel.cu: sm_90a, {p.dtype}, {'causal mask' if p.causal else 'no mask'}, emitted from the "
                     f"{'proven' if result.report is not None else 'unproven (--no-verify)'} program")
    elif result.kernel_note:
        lines.append(f"  {result.kernel_note}")
    if result.report is None and result.attention is None:
        lines.append(f"  kind: {p.kind} is scheduled only (no program is lowered, so nothing is proven); the "
                     "schedule passed the model's independent re-check")
    return lines


# ------------------------------------------------------------------------------------------------ the folder read back

PROGRAM_MAX_BYTES = 256 * 1024
"""Largest ``program.json`` and ``schedule.json`` read back (the Hopper program reader's bound)."""

KERNEL_MAX_BYTES = 4 << 20
"""Largest ``kernel.cu`` read back (an attention kernel is about 60 KB)."""

EDITABLE = "a wait's in_flight (and its tight and reason) and a barrier statement's state (count, stages, phase)"
"""What of ``program.json`` may differ from the lowering: the counts the proof checks (docs/outputs.md)."""


def ws_output_folder(target: Union[str, os.PathLike]) -> Optional[str]:
    """The output folder of a warp-specialized body that ``target`` names (the folder, or a file in it such as
    its ``program.json``), or None: the folder's ``problem.yaml`` names a warp-specialized ``kind:`` (or does not
    read, and its ``schedule.json`` is a warp-specialized one). Never raises (otherwise None: the target is then
    read as any other)."""
    t = os.fspath(target)
    folder = t if os.path.isdir(t) else os.path.dirname(t) or "."
    try:
        text = read_regular_text(os.path.join(folder, "problem.yaml"), MAX_INPUT_BYTES, "problem.yaml")
        doc = read_yaml_text(text, os.path.join(folder, "problem.yaml"))
    except (SynthError, OSError, ValueError, RecursionError):
        # a problem.yaml that does not read: the folder is a body's when its schedule.json says so (the folder's
        # reader then names problem.yaml's error at its line)
        try:
            sdoc = load_json(os.path.join(folder, "schedule.json"), PROGRAM_MAX_BYTES, "schedule.json")
        except (SynthError, OSError, ValueError, RecursionError):
            return None
        return folder if isinstance(sdoc, dict) and sdoc.get("format") == SCHEDULE_FORMAT else None
    if isinstance(doc, LDict) and isinstance(doc.get("kind"), str) and doc["kind"] in WS_KINDS:
        return folder
    return None


@dataclass(frozen=True)
class WsOutput:
    """A warp-specialized body's folder read back (:func:`load_ws_output`)."""

    folder: str
    problem: WsProblem
    schedule: WsSchedule
    attention: Optional[AttentionProgram]
    """The lowering of problem.yaml under schedule.json with program.json's program in it (as read: its wait
    counts and barrier states are what the proof checks); None for a body that is scheduled only."""
    kernel: Optional[str] = None
    """``kernel.cu`` as read, byte for byte the kernel synth emits from ``attention`` (None: the folder has none)."""


def _json_pos(text: str, path: list) -> tuple[int, int]:
    """Line and column (1-based) of the value at JSON ``path`` in ``text`` (the nearest enclosing value found)."""
    dec = json.JSONDecoder()

    def ws(p: int) -> int:
        while p < len(text) and text[p] in " \t\r\n":
            p += 1
        return p

    pos = best = ws(0)
    try:
        for key in path:
            if text[pos] == "{" and isinstance(key, str):
                pos = ws(pos + 1)
                while text[pos] != "}":
                    kpos = pos
                    k, pos = dec.raw_decode(text, pos)
                    pos = ws(ws(pos) + 1)  # past the colon
                    if k == key:
                        best = kpos
                        break
                    pos = ws(dec.raw_decode(text, pos)[1])
                    if text[pos] == ",":
                        pos = ws(pos + 1)
                else:
                    break
            elif text[pos] == "[" and isinstance(key, int):
                pos = ws(pos + 1)
                for _ in range(key):
                    pos = ws(dec.raw_decode(text, pos)[1])
                    if text[pos] == ",":
                        pos = ws(pos + 1)
                best = pos
            else:
                break
    except (ValueError, IndexError):
        pass
    line = text.count("\n", 0, best) + 1
    return line, best - (text.rfind("\n", 0, best) + 1) + 1


def _path_text(path: list) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _path_of(text: str) -> list:
    """The JSON path a reader's message starts with (``roles[1].parts[0].stmts[3]``), as a list."""
    out: list = []
    for name, index in re.findall(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]", text):
        out.append(int(index) if index else name)
    return out


def _at(path: str, text: str, where: list, msg: str, fix: str) -> SynthError:
    line, col = _json_pos(text, where)
    return SynthError(Loc(path, line, col), msg, fix)


def _first_difference(a: Any, b: Any, path: list) -> Optional[tuple[list, Any, Any]]:
    """The first JSON path where documents ``a`` and ``b`` differ, with the two values there."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return path + [k], a.get(k, "(absent)"), b.get(k, "(absent)")
            d = _first_difference(a[k], b[k], path + [k])
            if d is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for k, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, path + [k])
            if d is not None:
                return d
        if len(a) != len(b):
            k = min(len(a), len(b))
            return path + [k], a[k] if k < len(a) else "(absent)", b[k] if k < len(b) else "(absent)"
        return None
    same = a == b and type(a) is type(b)
    return None if same else (path, a, b)


def _up_to_counts(doc: Any) -> Any:
    """A Hopper program document without what the proof checks (:data:`EDITABLE`): each wait's ``in_flight``,
    ``tight`` and ``reason``, each barrier statement's ``state``."""
    if isinstance(doc, dict):
        return {k: ("(checked by the proof)" if k == "state" and isinstance(v, dict) else _up_to_counts(v))
                for k, v in doc.items()
                if not (k == "waits" and isinstance(v, list))} | (
            {"waits": [{k: v for k, v in w.items() if k not in ("in_flight", "tight", "reason")}
                       if isinstance(w, dict) else w for w in doc["waits"]]}
            if isinstance(doc.get("waits"), list) else {})
    if isinstance(doc, list):
        return [_up_to_counts(x) for x in doc]
    return doc


def _short(x: Any) -> str:
    t = x if isinstance(x, str) else json.dumps(x, sort_keys=True)
    return t if len(t) <= 160 else t[:157] + "..."


_SCHEDULE_KEYS = (("arrangement", ("arrangement", "consumer offsets", "producer", "without a producer", "warp groups",
                                   "rows do not split", "alternating")),
                  ("registers", ("register need", "registers", "setmaxnreg")), ("smem", ("shared memory",)),
                  ("named_barriers", ("named barriers",)), ("status", ("status",)), ("ops", ("the schedule's ops",)))


def _schedule_where(msg: str, doc: dict) -> list:
    """Where in ``schedule.json`` a re-check's sentence points: the op or buffer it names first, else its field."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", msg)
    name = words[0] if words else ""
    ops = {o.get("name"): k for k, o in enumerate(doc.get("ops", []) if isinstance(doc.get("ops"), list) else [])
           if isinstance(o, dict)}
    named = next((w for w in words if w in ops), None)  # the first op the sentence names
    if named is not None:
        return ["ops", ops[named]]
    for key in ("rings", "register_copies"):
        if isinstance(doc.get(key), dict) and name in doc[key]:
            return [key, name]
    for key, starts in _SCHEDULE_KEYS:
        if msg.startswith(starts):
            return [key]
    return ["ii"]


def _pin_errors(pins: Pins, s: WsSchedule) -> list[tuple[list, str]]:
    """The pins of problem.yaml a schedule breaks, each with where schedule.json says it."""
    out = []
    if pins.consumers is not None and s.consumers != pins.consumers:
        out.append((["arrangement", "consumers"], f"{s.consumers} consumer warp groups, problem.yaml pins "
                    f"{pins.consumers}"))
    if pins.mode is not None and s.mode != pins.mode:
        out.append((["arrangement", "mode"], f"mode {s.mode}, problem.yaml pins {pins.mode}"))
    if pins.producer is not None and s.producer != pins.producer:
        out.append((["arrangement", "producer"], f"producer {s.producer}, problem.yaml pins {pins.producer}"))
    if pins.ii is not None and s.ii != pins.ii:
        out.append((["ii"], f"II {s.ii}, problem.yaml pins {pins.ii}"))
    depth = dict(s.depth)
    for b, d in pins.depth:
        if depth.get(b) != d:
            out.append((["rings", b], f"{b}: {depth.get(b)} slots, problem.yaml pins {d}"))
    groups = {o.name: o.groups for o in s.ops}
    for o, g in pins.groups:
        if groups.get(o) != g:
            where = next((["ops", k] for k, p in enumerate(s.ops) if p.name == o), ["ops"])
            out.append((where, f"{o}: {groups.get(o)} groups in flight, problem.yaml pins {g}"))
    return out


def load_ws_output(target: Union[str, os.PathLike]) -> WsOutput:
    """Read a warp-specialized body's folder back (``target``: the folder or a file in it), re-deriving what can
    be derived; :class:`SynthError` (exit 2) at ``file:line:col`` with a fix where a file is not what ``synth
    solve`` writes:

    * ``problem.yaml`` is read as ``synth solve`` reads it (:func:`ws_problem_text`);
    * ``schedule.json`` must be a schedule of that body (:func:`schedule_from_json`, every field read and written
      again the same), keep its pins and pass the model's independent re-check (:func:`synth.model.ws_check.check_ws`);
    * ``kind: attention``: ``program.json`` is read by the Hopper program reader with trip counts from 0 (the
      program's ``n`` KV blocks, ``n >= 0``; :func:`synth.hopper.ir.load_hopper` ``zero_trips``, its
      well-formedness asked of Z3), and must be the lowering of the two
      (:func:`synth.lower.hopper_attention.lower_attention`) up to :data:`EDITABLE`, which the proof checks;
      ``kernel.cu``, when the folder has one, is read (a regular file of at most :data:`KERNEL_MAX_BYTES`); that it
      is the kernel of program.json is :func:`check_kernel`'s, after the proof (:func:`verify_ws_output`).
    """
    # here, not at the top: the model's re-check and the Hopper reader load with the command that reads a folder
    from ..hopper.ir import load_hopper
    from ..model.ws_check import check_ws

    folder = ws_output_folder(target)
    if folder is None:
        raise SynthError(Loc(os.fspath(target)), "not the output folder of a warp-specialized body (its problem.yaml "
                         "names no kind: attention, gemm_kloop or body)", "pass the folder 'synth solve' wrote")
    ypath = os.path.join(folder, "problem.yaml")
    problem = ws_problem_text(read_regular_text(ypath, MAX_INPUT_BYTES, "problem.yaml"), ypath)
    spath = os.path.join(folder, "schedule.json")
    stext = read_regular_text(spath, PROGRAM_MAX_BYTES, "schedule.json",
                              fix="run 'synth solve' on problem.yaml again to write the folder")
    sdoc = load_json(stext, PROGRAM_MAX_BYTES, "schedule.json", path=spath)
    sched = schedule_from_json(sdoc, spath)
    fix = "re-run 'synth solve' on problem.yaml: schedule.json is synth's choice, not an input"
    if sched.body != problem.name or sdoc.get("kind") != problem.kind:
        raise _at(spath, stext, ["body"], f"schedule.json is of body {sched.body!r} (kind {sdoc.get('kind')!r}), "
                  f"problem.yaml is {problem.name!r} (kind {problem.kind!r}): files of two folders", fix)
    again = schedule_to_json(problem, sched)
    d = _first_difference(sdoc, again, [])
    if d is not None:
        raise _at(spath, stext, d[0], f"schedule.json: {_path_text(d[0]) or 'the document'} is {_short(d[1])}, "
                  f"which does not read back as a schedule ({_short(d[2])})", fix)
    for where, why in _pin_errors(problem.pins, sched):
        raise _at(spath, stext, where, f"schedule.json breaks a pin of problem.yaml: {why}", fix)
    errs = check_ws(problem.body, problem.machine, sched)
    if errs:
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise _at(spath, stext, _schedule_where(errs[0], sdoc), f"schedule.json is not a valid schedule of "
                  f"problem.yaml (the model's re-check): {errs[0]}{more}", fix)
    if problem.kind != "attention":
        return WsOutput(folder, problem, sched, None)
    try:
        lowered = lower_attention(problem.body, sched)
    except ValueError as e:
        raise SynthError(Loc(spath), f"the attention lowering does not take this schedule: {e}", fix) from None
    ppath = os.path.join(folder, "program.json")
    ptext = read_regular_text(ppath, PROGRAM_MAX_BYTES, "program.json",
                              fix="run 'synth solve' on problem.yaml again to write the folder")
    pfix = ("program.json is synth's lowering of problem.yaml under schedule.json: only " + EDITABLE
            + " may be edited (synth verify proves them); re-run 'synth solve' for the rest")
    try:
        program = load_hopper(ppath, zero_trips=True)
    except SynthError as e:
        head = e.msg.split(": ", 1)[0]
        if e.loc is not None and e.loc.line <= 0 and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*|\[\d+\])*", head) \
                and _path_of(head)[0] in json.loads(ptext):  # the reader's JSON path: its line
            line, col = _json_pos(ptext, _path_of(head))
            raise SynthError(Loc(ppath, line, col), e.msg, e.fix) from None
        raise
    pdoc = json.loads(ptext)
    d = _first_difference(_up_to_counts(pdoc), _up_to_counts(json.loads(dumps(lowered.program))), [])
    if d is not None:
        roles = pdoc.get("roles") if isinstance(pdoc, dict) else None
        k = d[0][1] if d[0][:1] == ["roles"] and len(d[0]) > 1 else None
        role = ""
        if isinstance(roles, list) and isinstance(k, int) and k < len(roles) and isinstance(roles[k], dict):
            role = f" (role {roles[k].get('role')})"
        raise _at(ppath, ptext, d[0], f"program.json is not the lowering of problem.yaml under schedule.json: "
                  f"{_path_text(d[0])}{role} is {_short(d[1])}, the lowering has {_short(d[2])}", pfix)
    kpath = os.path.join(folder, "kernel.cu")
    kernel = read_regular_text(kpath, KERNEL_MAX_BYTES, "kernel.cu", fix=KERNEL_FIX) if os.path.lexists(kpath) \
        else None
    return WsOutput(folder, problem, sched, lowered.with_program(program), kernel)


KERNEL_FIX = "re-run 'synth solve' on problem.yaml: kernel.cu is emitted from the proven program.json, not edited"


def check_kernel(out: WsOutput) -> None:
    """That ``out``'s ``kernel.cu`` (if any) is byte for byte the kernel synth emits from its program.json as read,
    with problem.yaml's ``causal`` and ``dtype`` (:func:`synth.emit.sm90.attention_kernel.emit_attention_kernel`): a
    kernel is trusted only as the text of the program the proof covers. :class:`SynthError` (exit 2) at the first
    line that differs."""
    if out.kernel is None or out.attention is None:
        return
    problem, text = out.problem, out.kernel
    kpath = os.path.join(out.folder, "kernel.cu")
    try:
        want = emit_attention_kernel(out.attention, problem.body, out.schedule, causal=problem.causal,
                                     dtype=problem.dtype)
    except ValueError as e:
        raise SynthError(Loc(kpath), f"kernel.cu: synth writes no kernel for this body ({e})", KERNEL_FIX) from None
    if text != want:
        got, exp = text.split("\n"), want.split("\n")
        k = next((i for i, (a, b) in enumerate(zip(got, exp)) if a != b), min(len(got), len(exp)))
        raise SynthError(Loc(kpath, k + 1, 1), f"kernel.cu is not the kernel synth emits from program.json with "
                         f"problem.yaml's causal: {str(problem.causal).lower()} and dtype: {problem.dtype} (line "
                         f"{k + 1} differs: {_short(got[k].strip() if k < len(got) else '(end of file)')})",
                         KERNEL_FIX)


@dataclass(frozen=True)
class WsVerify:
    """``synth verify`` of a warp-specialized body's folder (:func:`verify_ws_output`)."""

    output: WsOutput
    report: Optional[AttentionReport]
    """The proof of program.json (None: a body that is scheduled only)."""
    seconds: float

    @property
    def ok(self) -> bool:
        return self.report is None or bool(self.report.ok)

    def failure(self) -> str:
        """One line: why the folder is not proven (its first refutation), '' when it is."""
        if self.ok:
            return ""
        rep = self.report
        refs = rep.refutations
        if not refs:
            return f"{rep.barriers.program.name}: not proven (an obligation is unknown)"
        r = refs[0]
        where = r.barrier + (f"[{r.slot}]" if r.slot is not None else "") + \
            (f" phase {r.phase}" if r.phase is not None else "")
        return (f"{rep.barriers.program.name}: not proven ({len(refs)} refuted; first: [{r.kind}] {r.warp_group}, "
                f"block {r.block}, {where}, n = {r.n})")

    def lines(self) -> list[str]:
        """What ``synth verify`` prints."""
        o = self.output
        head = (f"{o.folder}: a warp-specialized body's folder (kind: {o.problem.kind}); schedule.json is a schedule "
                f"of problem.yaml (its pins, the model's re-check)")
        if self.report is None:
            return [head, f"  kind: {o.problem.kind} is scheduled only: there is no program to prove"]
        kernel = " (kernel.cu is the kernel synth emits from it)" if o.kernel is not None and self.ok else ""
        return [head + "; program.json is their lowering (up to the counts the proof checks), proven again for "
                "every number of KV blocks n >= 0" + kernel + ":", self.report.render()]

    def to_json(self) -> dict:
        rep = self.report
        return {"folder": self.output.folder, "kind": self.output.problem.kind, "program": self.output.problem.name,
                "ok": self.ok, "proven": None if rep is None else bool(rep.ok),
                "obligations": None if rep is None else rep.by_class(),
                "refutations": [] if rep is None else [
                    {"class": r.kind, "warp_group": r.warp_group, "block": r.block, "barrier": r.barrier,
                     "slot": r.slot, "phase": r.phase, "n": r.n, "summary": r.summary} for r in rep.refutations],
                "seconds": round(self.seconds, 4)}


def verify_ws_output(target: Union[str, os.PathLike], *, deadline: Union[Deadline, float, None] = None,
                     query_limit: float = QUERY_LIMIT) -> WsVerify:
    """``synth verify`` of a warp-specialized body's folder: :func:`load_ws_output`, then (``kind: attention``)
    :func:`synth.verify.hopper_attention.verify_attention` of program.json as read, each Z3 query at most
    ``query_limit`` s and none past ``deadline``; when the proof holds, :func:`check_kernel` (a folder whose
    kernel.cu is not the proven program's is refused, exit 2; a refuted program is reported as such first)."""
    dl = as_deadline(deadline)
    t0 = time.perf_counter()
    dl.check("reading the folder")
    out = load_ws_output(target)
    report = None
    if out.attention is not None:
        dl.check("prove")
        report = verify_attention(out.attention, time_limit=dl.cap(query_limit))
        dl.check("prove")
        if report.ok:
            check_kernel(out)
    return WsVerify(out, report, time.perf_counter() - t0)


def _ws_folder_of(d: str) -> Optional[str]:
    """The warp-specialized body's folder that ``d`` names: the folder, or its ``certificate/`` (there or not)."""
    folder = ws_output_folder(d) if os.path.isdir(d) else None
    if folder is None and os.path.basename(os.path.normpath(d)) == "certificate":
        folder = ws_output_folder(os.path.dirname(os.path.normpath(d)) or ".")
    return folder


def _folder_kind(folder: str) -> str:
    try:
        kind = read_yaml_text(read_regular_text(os.path.join(folder, "problem.yaml"), MAX_INPUT_BYTES,
                                                "problem.yaml"), "problem.yaml")["kind"]
    except (SynthError, KeyError, TypeError):
        return "attention, gemm_kloop or body"
    return kind if isinstance(kind, str) else "attention, gemm_kloop or body"


def certify_refusal(directory: Union[str, os.PathLike]) -> Optional[SynthError]:
    """Why there is no certificate to check or write for ``directory`` when it is a warp-specialized body's folder
    that holds no program (``kind: gemm_kloop`` or ``body``, or its ``certificate/``, which is never written;
    ``synth certify``, ``synth verify --certificate``): the error to raise (exit 2), else None. An attention folder
    has a certificate (:func:`certify_ws`)."""
    d = os.fspath(directory)
    folder = _ws_folder_of(d)
    if folder is None:
        return None
    kind = _folder_kind(folder)
    if kind == "attention":
        return None
    return SynthError(Loc(d), f"no certificate is written for a warp-specialized body's folder (kind: {kind}): it "
                      "holds no program, only the schedule",
                      f"run 'synth verify {folder}' to re-check schedule.json against problem.yaml")


CERTIFICATE = "certificate"
"""An attention folder's certificate folder (written by :func:`certify_ws` when absent)."""


def _record(folder: str, sub: str) -> None:
    """List the files under ``folder/sub`` in ``folder``'s marker (:data:`synth.outdir.MARKER`), when ``folder`` has
    one, so that the folder stays wholly synth's (``synth solve --force`` may replace it)."""
    listing = read_marker(folder)
    if listing is None:
        return
    root = os.path.join(folder, sub)
    for dirpath, _, names in os.walk(root, followlinks=False):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), folder).replace(os.sep, "/")
            listing[rel] = sha256_file(os.path.join(dirpath, n))
    fd, tmp = tempfile.mkstemp(prefix=".synth-tmp-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"synth_output": 1, "files": listing}, indent=1, sort_keys=True) + "\n")
        os.chmod(tmp, os.stat(os.path.join(folder, MARKER)).st_mode & 0o777)
        os.replace(tmp, os.path.join(folder, MARKER))
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _is_attention_certificate(d: str) -> bool:
    try:
        return trusted_certify.read_manifest(os.path.join(d, trusted_certify.MANIFEST)).get("format") == \
            trusted_attention.FORMAT
    except (OSError, ValueError):
        return False


def certify_ws(directory: Union[str, os.PathLike], *, time_limit: float = 120.0
               ) -> Optional[trusted_certify.CertifyResult]:
    """``synth certify`` of an attention program's certificate, or None when ``directory`` is neither an attention
    folder (nor its ``certificate/``) nor a folder holding an attention certificate.

    An attention folder without ``certificate/``: the certificate is written first
    (:func:`synth.trusted.attention.write_attention_certificate` on the bytes of the folder's ``program.json``: the
    trusted checker derives every obligation of the barrier program, the consumers' registers and the once-loaded Q,
    and writes nothing unless Z3 and cvc5 prove each), built aside and moved into place
    (:func:`synth.outdir.publish`: never a half-written folder) and listed in the folder's marker. Then (or when it
    is there) the certificate is checked by :func:`synth.trusted.certify.certify_attention`, within ``time_limit``
    seconds for the whole command. A program the checker does not prove gives a failed result (exit 1), with
    nothing written."""
    t0 = time.monotonic()
    d = os.fspath(directory)
    folder = _ws_folder_of(d)
    if folder is None:
        here = d if _is_attention_certificate(d) else os.path.join(d, CERTIFICATE)
        if not _is_attention_certificate(here):
            return None
        return trusted_certify.certify_attention(here, timeout_s=time_limit, time_limit=time_limit)
    if _folder_kind(folder) != "attention":
        return None
    cert = os.path.join(folder, CERTIFICATE)
    wrote = ""
    if not os.path.lexists(cert):
        data = read_regular_bytes(os.path.join(folder, "program.json"), trusted_attention.MAX_PROGRAM_BYTES,
                                  "program.json", fix="run 'synth solve' on problem.yaml again to write the folder")
        failed: list = []

        def build(tmp: str) -> None:
            try:
                trusted_attention.write_attention_certificate(data, tmp, timeout_s=time_limit)
            except ValueError as e:
                failed.append(str(e))
                raise _NotProven() from None

        try:
            publish(cert, build, flag="certify")
        except _NotProven:
            v = trusted_solvers.versions()
            lines = failed[0].split("\n")
            return trusted_certify.CertifyResult(
                False, (), (f"certificate FAILED: {lines[0]} ({os.path.join(folder, 'program.json')})",)
                + tuple(x.strip() for x in lines[1:] if x.strip()), tuple((n, v[n] or "missing") for n in ("z3", "cvc5")),
                os.path.join(folder, "program.json"))
        _record(folder, CERTIFICATE)
        wrote = f"wrote {cert}{os.sep} (the trusted checker's obligations of program.json, each unsat with z3 and cvc5)"
    left = max(0.05, time_limit - (time.monotonic() - t0))
    res = trusted_certify.certify_attention(cert, timeout_s=left, time_limit=left)
    if wrote:
        res = trusted_certify.CertifyResult(res.ok, res.files, res.messages + (wrote,), res.solvers, res.program)
    return res


def write_ws_certificate(folder: str, directory: str, *, force: bool = False,
                         deadline: Union[Deadline, float, None] = None) -> None:
    """``synth verify OUT --certificate DIR`` of an attention folder ``folder`` (proven): the independent checker's
    certificate of its ``program.json`` (:func:`synth.trusted.attention.write_attention_certificate`) published as
    ``directory`` (:func:`synth.outdir.publish`: a new folder, an existing one only with ``force`` and only when synth
    wrote it). :class:`SynthError` (exit 2) when the checker does not prove every obligation: nothing is written."""
    dl = as_deadline(deadline)
    ppath = os.path.join(folder, "program.json")
    data = read_regular_bytes(ppath, trusted_attention.MAX_PROGRAM_BYTES, "program.json",
                              fix="run 'synth solve' on problem.yaml again to write the folder")

    def build(tmp: str) -> None:
        dl.check("write (certificate)")
        try:
            trusted_attention.write_attention_certificate(data, tmp, timeout_s=dl.cap(QUERY_LIMIT))
        except ValueError as e:
            dl.check("write (certificate)")
            raise SynthError(Loc(ppath), str(e).split("\n")[0] + ": " + " ".join(str(e).split("\n")[1:3]),
                             "synth verify proves it, the independent checker does not: report it") from None
        dl.check("write (certificate)")

    publish(directory, build, force=force, flag="--certificate")


class _NotProven(Exception):
    """The trusted checker did not prove the program: nothing is published."""


__all__ = ["WS_KINDS", "WS_PHASES", "WsProblem", "WsResult", "load_solve_problem", "ws_problem_text", "run_ws",
           "schedule_to_json", "schedule_from_json", "output_files", "write_ws", "summary_json", "summary_lines",
           "ws_output_folder", "WsOutput", "load_ws_output", "WsVerify", "verify_ws_output", "certify_refusal",
           "certify_ws", "write_ws_certificate", "CERTIFICATE",
           "EDITABLE", "KERNEL_MAX_BYTES", "check_kernel"]

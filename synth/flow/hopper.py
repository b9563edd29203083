"""The Hopper flow of ``synth solve``: problem -> choice -> program -> {proof, kernel}, as a list of phases
(:data:`HOPPER_PHASES`, run by :func:`synth.flow.phases.run_phases`).

For a ``kind: gemm`` problem with ``mainloop: tma_wgmma`` (a :class:`~synth.hopper.problem.HopperGemm`):

0. **design** (:func:`synth.flow.design.choose_design`, only when a design key is ``auto``): the design of
   least predicted time;
1. **schedule** (:func:`choose_pipeline`): CP-SAT picks ``stages`` and ``k_pipe_mmas`` under the
   shared-memory limit, for the kernel's shape of pipeline (warp-specialized, ``BM / 64``
   cooperative consumer warp groups; :func:`synth.model.hopper.choose`, docs/hopper.md);
2. **lower** (:func:`synth.emit.hopper_config.kernel_config`, :meth:`KernelDesign.program`): the warp-specialized
   barrier protocol for every ``T >= 1`` (:func:`synth.lower.barriers.lower_hopper`);
3. **prove** (:func:`synth.verify.hopper_cluster.prove_hopper`: :func:`synth.verify.phases.verify_hopper`, every
   obligation, wgmma wait tightness; for a ``cluster:`` other than ``1x1`` the cluster program of both CTAs and
   the cluster classes of :func:`synth.verify.hopper_cluster.verify_cluster`; a persistent kernel's tile ends,
   :mod:`synth.verify.hopper_persistent`); then each design variant's own proof phases
   (:data:`PINGPONG_PHASES`: the order programs and the carry, :mod:`synth.verify.hopper_pingpong`;
   :data:`TMA_STORE_PHASES`: the store program and its thread classes, :mod:`synth.verify.hopper_store`);
4. **emit** (:func:`synth.emit.sm90.kernel.emit_sm90_kernel`): kernel.cu for sm_90a, from the
   proven program only.

:func:`output_files` gives the text of each file of the output folder (the writer in
:mod:`synth.flow.pipeline` publishes them; ``schedule.json`` is :func:`synth.hopper.choice_json.choice_to_json`);
:func:`load_hopper_output` reads a folder back and
re-derives what it can: the program must be the lowering of ``problem.yaml`` under
``schedule.json``'s choice, so an edited ``program.json`` or ``schedule.json`` is refused rather
than trusted.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Callable, Optional, Union

from ..deadline import Deadline, as_deadline
from ..emit.hopper_config import kernel_config
from ..emit.sm90 import kernel as sm90_kernel  # emit_sm90_kernel looked up when called (tests replace it)
from ..errors import Loc, SynthError
from ..gemm import GemmConfig
from ..hopper.design import design_json, with_design
from ..hopper.ir import HopperProgram, dumps, load_hopper
from ..hopper.kernel_design import KernelDesign
from ..hopper.choice_json import choice_from_json, choice_to_json
from ..hopper.loop import HopperChoice
from ..hopper.printer import hopper_text
from ..hopper.problem import HopperGemm, hopper_problem_yaml
from ..load import load_problem_text
from ..lower.hopper_pingpong import order_program
from ..model.hopper import pipeline_input
from ..printer import program_text
from ..program import dumps as program_dumps
from ..schedule import read_schedule_json
from ..trusted import hopper as trusted_hopper  # read_persistent_flag looked up when called (tests replace it)
from ..trusted.flags import FlagError, read_cluster_flag, read_epilogue_flag, read_pingpong_flag
from ..trusted.program import read_regular
from ..verify import verify_program
from ..verify.hopper_cluster import prove_hopper
from ..verify.hopper_persistent import prove_tile_ends, tile_end_sizes
from ..verify.hopper_pingpong import verify_pingpong
from ..verify.hopper_store import check_threads
from ..verify.phases import STATS, ProofPhase, verify_hopper
from ..yamlnodes import read_yaml_text
from .design import choose_design
from .phases import Phase, run_phases, timings, verify_text
from ..lower.hopper_design import design_program
from ..lower.hopper_design import design_store_program

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class PingpongProof:
    """What the ping-pong proof phase found: the :class:`~synth.verify.hopper_pingpong.PingpongResult` (ring, order
    programs, carry) and ``orders``, ``(name, order program, its HopperReport)`` of the even and odd tile counts."""

    result: object
    orders: tuple

    @property
    def ok(self) -> bool:
        return bool(self.result.ok)

    def render(self) -> str:
        return self.result.render()


@dataclass(frozen=True)
class HopperResult:
    """Everything ``synth solve`` computes for a Hopper GEMM problem: the problem, the pipeline choice, the kernel's
    :class:`~synth.hopper.kernel_design.KernelDesign` (``config``), the program, the proof summary and the kernel,
    and ``outcomes``, the :class:`~synth.flow.phases.PhaseOutcome` of each phase run, in order (``verify.txt`` is
    written from them). What a design variant's phases computed is read from its outcome, by the phase's key
    (:meth:`value`), not held in a field per variant."""

    problem: HopperGemm
    choice: HopperChoice
    config: KernelDesign
    program: HopperProgram
    report: Optional[object] = None
    """:class:`~synth.verify.phases.HopperReport` naming every proof phase; None when verification was skipped."""
    kernel: Optional[str] = None
    """kernel.cu (sm_90a), emitted only from a proven program (or with verification skipped)."""
    outcomes: tuple = ()

    def value(self, key: str, default=None):
        """The value of the phase run that stored ``key`` (``default`` when none did)."""
        return next((o.value for o in reversed(self.outcomes) if o.phase.key == key), default)

    @property
    def phases(self) -> tuple[tuple[str, float], ...]:
        """``(name, seconds)`` of each timed phase run."""
        return timings(self.outcomes)

    @property
    def design(self):
        """The :class:`~synth.flow.design.DesignChoice` when the problem left a design key ``auto``."""
        return self.value("design")

    @property
    def store(self):
        """The TMA-store epilogue's :class:`~synth.program.Program` (None for the register epilogue)."""
        return self.value("store")

    @property
    def store_report(self):
        """Its :class:`~synth.verify.report.Report` (every wait, every ``E >= 1``); None when not verified."""
        return self.value("store_report")

    @property
    def store_threads(self) -> tuple:
        """Its :class:`~synth.hopper.store.ThreadCheck` verdicts (``converge``, ``proxy_fence``)."""
        return self.value("threads", ())

    @property
    def pingpong(self):
        """Ping-pong: the :class:`~synth.verify.hopper_pingpong.PingpongResult`; None otherwise."""
        proof = self.value("pingpong")
        return None if proof is None else proof.result

    @property
    def orders(self) -> tuple:
        """Ping-pong: ``(name, order program, its HopperReport)`` of the even and odd tile counts."""
        proof = self.value("pingpong")
        return () if proof is None else proof.orders

    @property
    def proven(self) -> bool:
        return self.report is None or (bool(self.report.ok) and
                                       (self.store_report is None or bool(self.store_report.ok)) and
                                       all(t.ok for t in self.store_threads) and
                                       (self.pingpong is None or bool(self.pingpong.ok)))


def gemm_config(g: HopperGemm) -> GemmConfig:
    """The :class:`GemmConfig` view of ``g`` the cost model reads (tile, dtype, arch, K, split); the rest of the
    design (consumers per slot, cluster, reserved shared memory) is in :func:`synth.model.hopper.pipeline_input`,
    whose ``cfg`` this is."""
    return pipeline_input(g).cfg


def choose_pipeline(g: HopperGemm, *, time_limit: float = 10.0) -> HopperChoice:
    """CP-SAT's ``stages`` / ``k_pipe_mmas`` for ``g`` (pins respected) on the design's whole pipeline input
    (:func:`synth.model.hopper.pipeline_input`: the cluster's remote release included, the same input the search
    prices); SynthError when nothing fits."""
    try:
        return pipeline_input(g).choose(time_limit=time_limit, stages=g.stages, k_pipe_mmas=g.k_pipe_mmas)
    except ValueError as e:
        raise SynthError(g.loc("stages"), f"no Hopper pipeline for {g.name}: {e}",
                         "use fewer stages, a smaller tile, or raise target.shared_bytes") from None


# ------------------------------------------------------------------------------------------ clusters

def declared_cluster(program_file: str) -> str:
    """The ``cluster:`` of the ``problem.yaml`` beside ``program_file`` (an output folder's; ``1x1`` when there is
    none, it has no such key or says ``auto``), read by the trusted checker's line reader
    (:func:`synth.trusted.flags.read_cluster_flag`, what ``synth certify`` reads). SynthError (exit 2, the file,
    the line, the fix) when the key is written in a way that reader refuses."""
    path = os.path.join(os.path.dirname(os.path.abspath(program_file)), "problem.yaml")
    if not os.path.lexists(path):
        return "1x1"
    try:
        value = read_cluster_flag(read_regular(path, trusted_hopper.MAX_FLAG_BYTES), path)
        return "1x1" if value == "auto" else value
    except FlagError as e:
        line = e.where.rpartition(":")[2]
        raise SynthError(Loc(path, int(line) if line.isdigit() else 0, 1 if line.isdigit() else 0), e.msg,
                         e.fix) from None
    except (OSError, ValueError) as e:
        raise SynthError(Loc(path), f"cannot read: {getattr(e, 'strerror', None) or e}",
                         "pass a folder written by 'synth solve'") from None


def _not_proven(s, key: str, what: str, why: str, fix: str):
    # a proof the deadline cut short is the command's time limit (exit 1), not a refusal of the problem
    s.dl.check("prove")
    raise SynthError(s.g.loc(key), f"{what} is not proven: {why}", fix)


def _design(s):
    """The design of least predicted time (``persistent`` / ``pingpong`` / ``epilogue`` / ``cluster``: auto)."""
    design = choose_design(s.g, choose_pipeline, time_limit=s.budget)
    s.g = with_design(s.g, design.design)
    return design


def _prove_ring(s):
    """The program's proof (a cluster's: the barrier classes of both CTAs' roles and the cluster classes); a
    persistent kernel's tile ends, once the ring is proven (its proof covers every tile count once each tile
    carries the state)."""
    q0 = STATS["queries"]
    rep = prove_hopper(s.program, cluster=s.cfg.cluster != "1x1", time_limit=s.query_limit, deadline=s.dl.at)
    s.proofs.append(ProofPhase("ring program" if s.cfg.persistent else "program", len(rep.obligations),
                               sum(o.status == "proven" for o in rep.obligations), rep.seconds,
                               STATS["queries"] - q0))
    if s.cfg.persistent and rep.ok:
        # the kernel's carry is the canonical one (the ring program's own expressions), which check_carry accepts
        # without a query: only the tile ends are asked
        ends = prove_tile_ends(s.program, tile_end_sizes(s.cfg.stages), time_limit=s.query_limit, deadline=s.dl.at)
        s.proofs.append(ends.phase())
        if not ends.ok:
            _not_proven(s, "persistent", "the persistent kernel", ends.why,
                        "remove persistent:, or raise --time-limit if a proof was unknown")
    return rep


def _ring_text(r) -> str:
    text = r.report.render() + "\n"
    if r.config.persistent:
        text += ("persistent tiles: the program above is each CTA's one ring over all its tiles "
                 "(N = tiles x T iterations, proven for every N >= 1); tile carry (each tile's "
                 "state is the running count's): by construction (the kernel indexes every "
                 "slot and parity by the running count), proven by the independent checker's "
                 "carry obligations in certificate/; the tile end's wait_group 0 in place: "
                 f"proven for every tile count at {cfg_tile_ends(r.config)} k-tiles per "
                 "tile; a CTA with no tile uses no barrier (docs/hopper.md, \"Persistent "
                 "tiles\")\n")
    if r.config.cluster != "1x1":
        text += (f"thread-block cluster {r.config.cluster} (docs/hopper_cluster.md): the "
                 "program above is both CTAs' roles (a name ends in its CTA's index); the "
                 "barrier classes are the whole cluster's (remote releases, the peer's "
                 "multicast bytes), cluster_form, init_visible and safe_exit its cluster "
                 "classes, all in certificate/\n")
    return text


def _proving(s) -> bool:
    return s.verify and s.report.ok


def _prove_pingpong(s):
    """Ping-pong consumers: the order programs (even and odd tile counts) and the carry over the partner's tile."""
    t0, q0 = time.perf_counter(), STATS["queries"]
    progs = tuple((name, order_program(odd)) for name, odd in (("even", False), ("odd", True)))
    reps = tuple((name, prog, verify_hopper(prog, time_limit=s.query_limit, deadline=s.dl.at)) for name, prog in progs)
    obs = [o for _, _, rep in reps for o in rep.obligations]
    s.proofs.append(ProofPhase("ping-pong order programs (even, odd)", len(obs),
                               sum(o.status == "proven" for o in obs), time.perf_counter() - t0,
                               STATS["queries"] - q0))
    t0 = time.perf_counter()
    out = verify_pingpong(s.program, time_limit=s.query_limit, deadline=s.dl.at, ring_report=s.report,
                          order_reports={name: rep for name, _, rep in reps})
    ok = out.checks.get("carry", (False, ""))[0]
    s.proofs.append(ProofPhase("ping-pong carry (the running count, by construction)", 1, int(bool(ok)),
                               time.perf_counter() - t0, 0))
    return PingpongProof(out, reps)


def _pingpong_verdict(s):
    if not s.pingpong.ok:
        _not_proven(s, "pingpong", "the ping-pong consumers", "\n" + s.pingpong.render(),
                    "remove pingpong:, or raise --time-limit if a proof was unknown")


def _pingpong_text(r) -> str:
    return ("\nping-pong consumers (docs/hopper_pingpong.md): the order protocol in order/even "
            "and order/odd (2 T and 2 T - 1 tiles, every T >= 1), each consumer warp group "
            "on the CTA's running count:\n" + r.pingpong.render() + "\n")


PINGPONG_PHASES = (
    Phase("prove (ping-pong)", _prove_pingpong, key="pingpong", when=lambda s: _proving(s) and s.cfg.pingpong,
          verify_txt=_pingpong_text),
    Phase("ping-pong verdict", _pingpong_verdict, when=lambda s: _proving(s) and s.cfg.pingpong, timed=False),
)
"""Ping-pong consumers' proof phases: the order programs and the carry, then the verdict."""


def _store_threads(s):
    """The TMA-store program's proof summary and its thread classes; the verdict on both."""
    s.proofs.append(ProofPhase("TMA-store program", len(s.store_report.obligations),
                               sum(o.status == "proven" for o in s.store_report.obligations), s.store_report.seconds))
    t0 = time.perf_counter()
    threads = check_threads(s.store)
    s.proofs.append(ProofPhase("TMA-store threads", len(threads), sum(bool(t.ok) for t in threads),
                               time.perf_counter() - t0))
    bad = [t for t in threads if not t.ok]
    if not s.store_report.ok or bad:
        why = s.store_report.render() if not s.store_report.ok else "; ".join(f"{t.cls}: {t.detail}" for t in bad)
        _not_proven(s, "epilogue", "the TMA-store epilogue", why,
                    "use epilogue: register, or raise --time-limit if a proof was unknown")
    return threads


def _store_text(r) -> str:
    return ("\nTMA-store epilogue (store/program.json: one consumer warp group's sub-tiles, "
            "every E >= 1; docs/hopper_store.md; its last wait, wait_group.read 0 before "
            "the exit, is the teardown class's: no read follows it in the program):\n" + r.store_report.render() +
            "\n" + "".join(f"{t.cls}: {'proven' if t.ok else 'REFUTED: ' + t.detail}\n" for t in r.store_threads))


TMA_STORE_PHASES = (
    Phase("store program", lambda s: design_store_program(s.cfg), key="store", timed=False),
    Phase("prove (TMA store)", lambda s: verify_program(s.store, time_limit=s.query_limit, deadline=s.dl),
          key="store_report", when=lambda s: _proving(s) and s.store is not None),
    Phase("TMA-store threads", _store_threads, key="threads", when=lambda s: _proving(s) and s.store is not None,
          timed=False, verify_txt=_store_text),
)
"""The TMA-store epilogue's phases: its store program, its proof, its thread classes and the verdict."""


def _emit(s) -> str:
    try:
        return sm90_kernel.emit_sm90_kernel(s.cfg, s.program)
    except ValueError as e:
        if s.cfg.cluster == "1x1":
            raise
        # the program is proven, but the emitter cannot build its kernel: nothing is written
        raise SynthError(s.g.loc("cluster"), f"the sm_90a emitter cannot build the cluster {s.cfg.cluster} "
                         f"kernel: {e}", "use cluster: 1x1; 'synth lower' prints the proven cluster "
                         "program and 'synth verify' proves it") from None


HOPPER_PHASES = (
    Phase("design", _design, key="design", when=lambda s: bool(s.g.auto)),
    # the folder's problem.yaml reads back as g, for synth and for the certificate checker, before any proof
    Phase("problem.yaml", lambda s: problem_source(s.g), timed=False),
    Phase("schedule", lambda s: choose_pipeline(s.g, time_limit=s.budget), key="choice"),
    Phase("kernel configuration", lambda s: kernel_config(s.g, s.choice), key="cfg", timed=False),
    Phase("lower", lambda s: design_program(s.cfg), key="program"),
    Phase("prove", _prove_ring, key="report", when=lambda s: s.verify, verify_txt=_ring_text),
    *PINGPONG_PHASES,
    *TMA_STORE_PHASES,
    Phase("emit", _emit, key="kernel", when=lambda s: s.emit and (s.report is None or s.report.ok)),
)
"""The Hopper flow of ``synth solve``, in order (the module docstring); a design variant's proof phases say when
they apply."""


def run_hopper(g: HopperGemm, *, deadline: Union[Deadline, float], verify: bool = True, emit: bool = True,
               progress: Optional[Progress] = None, query_limit: float = 10.0) -> HopperResult:
    """Choose, lower, prove and emit: :data:`HOPPER_PHASES`, run by :func:`synth.flow.phases.run_phases`. Pure
    apart from solver time.

    ``deadline`` is the command's :class:`~synth.deadline.Deadline` (or a :func:`time.monotonic`
    instant); CP-SAT gets at most a third of what is left, each Z3 query at most
    ``query_limit`` seconds and none past it. Once it has passed, the phase running raises
    :class:`~synth.deadline.TimeUp` naming itself: a result is complete or not returned.
    The kernel is emitted only when the program is proven (or ``verify`` is False).
    """
    dl = as_deadline(deadline)
    s = SimpleNamespace(g=g, verify=verify, emit=emit, dl=dl, query_limit=query_limit,
                        budget=max(0.5, dl.left() / 3),  # the choice is a small model: half a second always finds one
                        proofs=[],  # every proof phase, named with its obligations and time (the report's summary)
                        design=None, report=None, pingpong=None, store=None, store_report=None, threads=(),
                        kernel=None)
    outcomes = run_phases(HOPPER_PHASES, s, deadline=dl, progress=progress)
    report = s.report
    if report is not None and s.proofs:  # the summary names every proof phase, not the program's alone
        report = replace(report, proofs=tuple(s.proofs))
    return HopperResult(s.g, s.choice, s.cfg, s.program, report, s.kernel, tuple(outcomes))


def output_files(result: HopperResult) -> dict[str, str]:
    """The text files of a Hopper output folder, by name (certificate/ and the timeline aside)."""
    g = result.problem
    sched = choice_to_json(g, result.choice)
    if result.design is not None:
        sched["design"] = {**design_json(result.design.design), "auto": list(g.auto), "status": result.design.status,
                           "predicted_us": dict(result.design.predicted_us)}
    files = {"schedule.json": json.dumps(sched, indent=2) + "\n",
             "program.json": dumps(result.program),
             "program.txt": hopper_text(result.program),
             "problem.yaml": problem_source(g)}
    for name, prog, _ in result.orders:
        files[f"order/{name}/program.json"] = dumps(prog)
        files[f"order/{name}/program.txt"] = hopper_text(prog)
    if result.store is not None:
        files["store/program.json"] = program_dumps(result.store)
        files["store/program.txt"] = program_text(result.store)
    if result.kernel is not None:
        files["kernel.cu"] = result.kernel
    if result.report is not None:
        files["verify.txt"] = verify_text(result)  # each proof phase's paragraph, in order
    return files


def cfg_tile_ends(cfg) -> str:
    """The k-tile counts per tile at which ``synth solve`` checks a persistent kernel's tile end, as text."""
    sizes = list(tile_end_sizes(cfg.stages))
    return f"{sizes[0]} .. {sizes[-1]}"


def problem_source(g: HopperGemm) -> str:
    """The output folder's ``problem.yaml`` (:func:`synth.hopper.problem.hopper_problem_yaml`: the problem as given,
    written again by the one YAML writer, each ``auto`` design key replaced by the value chosen), checked to read
    back as ``g`` and to give the certificate checker's line readers (synth/trusted/: ``persistent``, ``pingpong``,
    ``epilogue``, ``cluster``) what YAML gives; :func:`run_hopper` calls it before any proof. A disagreement is a
    bug of synth's writer (RuntimeError, exit 3), never a problem file refused after the proof."""
    text = hopper_problem_yaml(g)
    back = load_problem_text(text, g.path)
    if not isinstance(back, HopperGemm) or replace(back, auto=g.auto, path=g.path) != g:
        raise RuntimeError(f"the output folder's problem.yaml does not read back as the problem solved:\n{text}")
    doc, data = read_yaml_text(text), text.encode("utf-8")
    for key, reader, default in (("persistent", trusted_hopper.read_persistent_flag, False), ("pingpong", read_pingpong_flag, False),
                                 ("epilogue", read_epilogue_flag, "register"), ("cluster", read_cluster_flag, "1x1")):
        try:
            got = reader(data, "problem.yaml")
        except ValueError as e:  # FlagError, HopperInputError
            got = e
        if got != doc.get(key, default):
            raise RuntimeError(f"the certificate checker reads {key} {got!r} in the output folder's problem.yaml, "
                               f"YAML reads {doc.get(key, default)!r}:\n{text}")
    return text


@dataclass(frozen=True)
class HopperOutput:
    """A Hopper output folder read back: every part re-derived and checked against the others."""

    problem: HopperGemm
    choice: HopperChoice
    config: object
    program: HopperProgram


def load_hopper_output(out_dir: str, problem: HopperGemm) -> HopperOutput:
    """Read ``schedule.json`` and ``program.json`` of a folder whose ``problem.yaml`` gave ``problem``.

    The program must equal the lowering of the problem under the schedule's choice (what
    ``synth solve`` wrote); anything else is refused with a SynthError.
    """
    spath = os.path.join(out_dir, "schedule.json")
    doc = read_schedule_json(spath)  # a regular file, bounded, nested at most MAX_JSON_DEPTH deep
    choice = choice_from_json(problem, doc, spath)
    cfg = kernel_config(problem, choice)
    program = load_hopper(os.path.join(out_dir, "program.json"))
    if program != design_program(cfg):
        raise SynthError(Loc(os.path.join(out_dir, "program.json")),
                         "program.json is not the lowering of problem.yaml under schedule.json (edited, or from "
                         "another folder)", "re-run 'synth solve'; 'synth verify' checks an edited program on its own")
    return HopperOutput(problem, choice, cfg, program)


def emit_from_output(out: HopperOutput) -> str:
    """kernel.cu of a folder read back (its program re-derived, so the text is synth's own)."""
    return sm90_kernel.emit_sm90_kernel(out.config, out.program)


__all__ = ["HopperResult", "HopperOutput", "run_hopper", "choose_pipeline", "gemm_config", "output_files",
           "problem_source", "load_hopper_output", "emit_from_output", "declared_cluster"]

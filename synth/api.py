"""synth as a library: one function per command (docs/api.md).

Call these from Python instead of the shell; the ``synth`` command is a thin
wrapper over them, so the results, errors and limits are the same:

======================  ======================  ==========================================
command                 function                returns
======================  ======================  ==========================================
(reading problem.yaml)  :func:`load`            :class:`synth.problem.Problem`
``synth solve``         :func:`solve`           :class:`synth.pipeline.Result`
``synth lower``         :func:`lower`           :class:`synth.program.Program`
``synth verify``        :func:`verify`          :class:`synth.verify.Report`
``synth certify``       :func:`certify`         :class:`synth.verify.CertifyResult`
``synth emit``          :func:`emit`            the text of kernel.cu, the TVM lines or the MLIR loop
``synth run``           :func:`run`             :class:`synth.run.RunReport`
``synth search gemm``   :func:`search`          :class:`synth.search.SearchResult`
======================  ======================  ==========================================

Why ``synth.api`` and not ``synth.solve`` and friends: ``synth.load``,
``synth.lower``, ``synth.verify``, ``synth.emit`` and ``synth.search`` already
name synth's modules, and Python's import system would replace a function of
that name with the module the first time it is imported. So write::

    import synth.api as synth

and ``synth.solve(...)`` reads as the command does.

Bad input raises :class:`synth.errors.SynthError` (its ``loc``, ``msg`` and
``fix`` are what the command prints); a refuted wait is not an exception but
``report.ok is False``. Nothing here prints; long steps report through an
optional ``progress(phase, done, total)`` callback.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Union

from .errors import Loc, SynthError
from .lower.hopper_design import design_program

Progress = Callable[[str, int, int], None]

PROVE_QUERY_LIMIT = 10.0
"""Seconds at most per Z3 query of :func:`verify` (less near its deadline)."""


def load(path: str):
    """The problem of a ``problem.yaml`` (docs/problem-format.md), checked; raises :class:`SynthError`."""
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .load import load_problem

    return load_problem(os.fspath(path))


def _problem(problem):
    return load(problem) if isinstance(problem, (str, os.PathLike)) else problem


def solve(problem, *, out: Optional[str] = None, force: bool = False, time_limit: float = 60.0, workers: int = 2,
          verify: bool = True, progress: Optional[Progress] = None):
    """Schedule (CP-SAT), lower, prove and, for ``kind: gemm``, emit: what ``synth solve`` computes.

    ``problem`` is a :class:`~synth.problem.Problem` or the path of a problem
    file. ``time_limit`` bounds the whole call in seconds (the CLI's
    ``--time-limit``). With ``out`` the output folder is also written, under
    the same rules as the command (docs/outputs.md; ``force`` replaces a folder
    synth wrote). Returns :class:`synth.pipeline.Result`: ``.schedule``,
    ``.program``, ``.report`` (None without ``verify``), ``.kernel``,
    ``.phases`` (wall seconds per phase) and ``.proven``. A warp-specialized body (its file, or a
    :class:`synth.flow.ws.WsProblem`) gives a :class:`synth.flow.ws.WsResult` (``.schedule``, ``.program``,
    ``.report``, ``.proven``).
    """
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .outdir import check_out_dir
    from .flow.pipeline import run as run_pipeline, write_outputs

    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .deadline import Deadline

    _check_limits(time_limit, workers)
    deadline = Deadline.after(time_limit)
    if isinstance(problem, (str, os.PathLike)):
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .flow.ws import load_solve_problem

        p = load_solve_problem(os.fspath(problem))  # as synth solve: a warp-specialized body file too
    else:
        p = problem
    if out is not None:
        check_out_dir(os.fspath(out), force=force)
    result = run_pipeline(p, deadline=deadline, workers=workers, verify=verify, progress=progress)
    if out is not None:
        write_outputs(result, os.fspath(out), force=force, deadline=deadline)
    return result


def lower(problem, schedule=None):
    """The pipelined program of ``problem`` under ``schedule`` (default: the schedule pinned in the file).

    This is ``synth lower``: nothing is solved or proved. A ``kind: gemm``
    problem with ``stages: auto`` has no pinned schedule; raises
    :class:`SynthError` saying to set ``stages:`` or to solve.
    """
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .graph import build_graph
    from .hopper.problem import HopperGemm
    from .lower import lower as lower_program
    from .schedule import schedule_from_pins

    p = _problem(problem)
    if isinstance(p, HopperGemm):  # the Hopper loop: a HopperProgram of the pinned (or given) choice
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .emit.hopper_config import kernel_config

        if schedule is None:
            if p.stages is None or p.k_pipe_mmas is None:
                raise SynthError(_key_loc(p.path, "stages" if p.stages is None else "k_pipe_mmas"),
                                 "'synth lower' lowers the pipeline as given, but this Hopper problem leaves "
                                 f"{'stages' if p.stages is None else 'k_pipe_mmas'} to the solver",
                                 "set stages: N and k_pipe_mmas: K, or run 'synth solve'")
            # here, not at the top: import synth.api loads a command's layers when the command is called
            from .hopper.loop import HopperChoice

            schedule = HopperChoice(p.stages, p.k_pipe_mmas, p.consumers, 0, p.smem_bytes(p.stages), "pinned")
        return design_program(kernel_config(p, schedule))
    graph = build_graph(p)
    if schedule is None:
        if p.gemm is not None and p.pins.stage is None:
            raise SynthError(_key_loc(p.path, "stages"),
                             "'synth lower' lowers the schedule as given, but this kind: gemm problem has "
                             "stages: auto, so there is no schedule to lower",
                             "set stages: N (2 or more; 3 pins CUTLASS's multistage schedule), or run "
                             "'synth solve' to let the solver choose")
        schedule = schedule_from_pins(p, graph)
    return lower_program(p, graph, schedule)


def _key_loc(path: str, key: str) -> Loc:
    """The location of a top-level ``key:`` in a YAML file (the file alone when not found)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, start=1):
                if line.startswith(f"{key}:"):
                    return Loc(path, n, 1)
    except OSError:
        pass
    return Loc(path)


def _check_undeclared_cluster(program, program_file: str) -> None:
    """SynthError at the ``problem.yaml`` beside ``program_file`` when it declares no cluster (``cluster: 1x1``
    or no such key; ``auto`` is a problem file's, left alone) and ``program`` is a thread-block cluster program
    (docs/hopper_cluster.md, "Which programs are cluster programs"): the folder does not describe its program."""
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .verify.hopper_cluster import is_cluster_program
    from .trusted.flags import FlagError, read_cluster_flag
    from .trusted.hopper import MAX_FLAG_BYTES
    from .trusted.program import read_regular

    problem = os.path.join(os.path.dirname(os.path.abspath(program_file)), "problem.yaml")
    if not os.path.lexists(problem) or not is_cluster_program(program):
        return
    try:
        shape = read_cluster_flag(read_regular(problem, MAX_FLAG_BYTES), problem)
    except (FlagError, OSError, ValueError):
        return  # declared_cluster read the same file just before; a file changed since is not this check's
    if shape == "1x1":
        raise SynthError(Loc(problem), "declares no cluster (cluster: 1x1, or no cluster: key), but program.json "
                         "is a thread-block cluster program (it multicasts or holds a cluster barrier): the folder "
                         "does not describe its program", "re-run 'synth solve'; a cluster folder says cluster: 2x1 "
                         "or 1x2")


def verify(target, *, time_limit: float = 60.0, certificate: Optional[str] = None,
           progress: Optional[Progress] = None, force: bool = False):
    """Prove every wait of a program again (``synth verify``); returns :class:`synth.verify.Report`.

    ``target`` is a :class:`~synth.program.Program`, a ``program.json`` or an
    output folder (whose ``program.json`` must then be the lowering of its ``problem.yaml`` and
    ``schedule.json`` up to the wait counts: :func:`synth.pipeline.check_lowered`); a Hopper program (``"protocol": "mbarrier"``, or a
    :class:`~synth.hopper.ir.HopperProgram`) gives a
    :class:`~synth.verify.phases.HopperReport` instead (docs/hopper.md), whose obligations include the cluster
    classes for a thread-block cluster program (the program's data, or its folder's ``cluster:``;
    docs/hopper_cluster.md, "Which programs are cluster programs").

    ``time_limit`` bounds the whole call, reading and writing included: each Z3
    query gets at most :data:`PROVE_QUERY_LIMIT` s and none past the deadline;
    once it has passed, :class:`synth.deadline.TimeUp` names the phase cut
    (``prove``, ``write``) and no certificate folder is left.

    With ``certificate`` the SMT-LIB2 files and manifest of the program *as
    given* (the target's bytes; verify changes nothing it proves, so ``synth
    certify`` of that folder checks the same program) are written to that
    folder, created atomically; an existing folder is replaced only with
    ``force`` and only if synth wrote every file in it (docs/outputs.md). A
    Hopper certificate is written only when every obligation is proven.
    ``report.ok`` is False when a wait is refuted or unproven; ``report.render()``
    explains it. A warp-specialized body's folder (or its ``program.json``) gives a
    :class:`~synth.flow.ws.WsVerify` (:func:`synth.flow.ws.verify_ws_output`: the folder re-checked, its
    attention program proven for every ``n >= 0``; with ``certificate``, the independent checker's certificate of
    its ``program.json``, :func:`synth.flow.ws.write_ws_certificate`; a body with no program gets none, exit 2). ``progress`` is called as
    ``progress("prove", done, total)`` per obligation.
    """
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .deadline import Deadline, TimeUp
    from .hopper.ir import HopperProgram, is_hopper_file, load_hopper
    from .outdir import check_out_dir, publish
    from .verify import load_program, verify_program, write_certificate

    _check_limits(time_limit)
    deadline = Deadline.after(time_limit)
    deadline.check("reading the program")
    if isinstance(target, (str, os.PathLike)):
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .flow.ws import certify_refusal, verify_ws_output, write_ws_certificate, ws_output_folder

        folder = ws_output_folder(target)
        if folder is not None:  # a warp-specialized body's folder: re-checked and proven by synth.flow.ws
            refusal = certify_refusal(folder)
            if certificate is not None and refusal is not None:
                raise SynthError(refusal.loc, refusal.msg, "drop --certificate: 'synth verify' re-checks "
                                 "schedule.json and proves program.json again without one")
            if certificate is not None:
                check_out_dir(os.fspath(certificate), force=force, flag="--certificate")
            out = verify_ws_output(target, deadline=deadline, query_limit=PROVE_QUERY_LIMIT)
            if certificate is not None and out.ok and out.output.attention is not None:  # the independent checker's
                write_ws_certificate(out.output.folder, os.fspath(certificate), force=force, deadline=deadline)
            return out
    if certificate is not None:
        check_out_dir(os.fspath(certificate), force=force, flag="--certificate")
    declared = False  # a folder's problem.yaml that says cluster: 2x1 / 1x2 (docs/hopper_cluster.md)
    if isinstance(target, (str, os.PathLike)) and is_hopper_file(os.fspath(target)):
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .flow.hopper import declared_cluster

        path = os.fspath(target)
        target = load_hopper(path)
        pfile = os.path.join(path, "program.json") if os.path.isdir(path) else path
        declared = declared_cluster(pfile) != "1x1"
        if not declared:
            _check_undeclared_cluster(target, pfile)
    if isinstance(target, HopperProgram):  # docs/hopper.md: a HopperReport, obligations by class
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .verify.hopper_cluster import prove_hopper
        from .flow.pipeline import hopper_certificate_by

        deadline.check("prove")
        report = prove_hopper(target, cluster=declared, time_limit=PROVE_QUERY_LIMIT, deadline=deadline.at)
        if deadline.expired() and not report.ok:
            raise TimeUp("prove", time_limit)
        if certificate is not None and report.ok:
            def build(tmp: str) -> None:
                deadline.check("write (certificate)")
                hopper_certificate_by(report, tmp, deadline, "write (certificate)")
                deadline.check("write (certificate)")

            publish(os.fspath(certificate), build, force=force, flag="--certificate")
        return report
    if isinstance(target, (str, os.PathLike)) and os.path.isdir(target) and \
            os.path.isfile(os.path.join(target, "problem.yaml")):
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .flow.pipeline import load_output

        load_output(os.fspath(target))  # a folder's three files must agree (SynthError at the one that does not)
        deadline.check("reading the folder")
    if isinstance(target, (str, os.PathLike)):
        program = load_program(os.fspath(target))
        data = _program_bytes(os.fspath(target))
    else:
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .program import dumps

        program, data = target, dumps(target).encode("utf-8")
    deadline.check("reading the program")
    report = verify_program(program, time_limit=PROVE_QUERY_LIMIT, deadline=deadline,
                            progress=None if progress is None else lambda done, total: progress("prove", done, total))
    if certificate is not None:
        publish(os.fspath(certificate),
                lambda tmp: write_certificate(report, tmp, deadline=deadline, program_bytes=data),
                force=force, flag="--certificate")
    return report


def _program_bytes(path: str) -> bytes:
    """The bytes of the ``program.json`` of ``path`` (the file, or the folder holding it), read as verify read it."""
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .readfile import read_regular_bytes
    from .trusted.program import MAX_BYTES

    file = os.path.join(path, "program.json") if os.path.isdir(path) else path
    return read_regular_bytes(file, MAX_BYTES, "program.json")


def certificate_dir(directory: str) -> str:
    """``directory`` itself when it holds a certificate manifest, else its ``certificate/`` folder if that does."""
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .verify.certificate import MANIFEST

    if not os.path.isfile(os.path.join(directory, MANIFEST)) and \
            os.path.isfile(os.path.join(directory, "certificate", MANIFEST)):
        return os.path.join(directory, "certificate")
    return directory


def certify(directory: str, *, time_limit: float = 120.0):
    """Re-check a certificate with Z3 and cvc5 alone (``synth certify``); returns :class:`CertifyResult`.

    ``directory`` is ``OUT/certificate/`` or ``OUT/`` itself. ``time_limit``
    bounds the whole check: each solver call gets at most what is left, and an
    obligation not asked in time fails as unknown. An attention folder without
    ``certificate/`` gets it written first by the independent checker
    (:func:`synth.flow.ws.certify_ws`).
    """
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .verify import certify as certify_dir
    from .verify.certificate_phases import certify_hopper, is_hopper_certificate

    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .deadline import Deadline

    _check_limits(time_limit)
    Deadline.after(time_limit).check("certify (reading and re-checking the certificate)")  # names the phase
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .flow.ws import certify_refusal

    refusal = certify_refusal(directory)  # a body's folder with no program: none is written (exit 2, the reason)
    if refusal is not None:
        raise refusal
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .flow.ws import certify_ws

    attention = certify_ws(directory, time_limit=time_limit)  # an attention folder: written when absent, checked
    if attention is not None:
        return attention
    d = certificate_dir(os.fspath(directory))
    if is_hopper_certificate(d):
        return certify_hopper(d, timeout_s=time_limit)
    return certify_dir(d, timeout_s=time_limit, time_limit=time_limit)


def _parts(source):
    """(problem, schedule, program) of an output folder or a :class:`~synth.pipeline.Result`."""
    if isinstance(source, (str, os.PathLike)):
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .flow.pipeline import load_output

        return load_output(os.fspath(source))
    return source.problem, source.schedule, source.program


def emit(source, *, target: str = "cuda") -> str:
    """The text ``synth emit`` produces: kernel.cu (``cuda``), TVM annotations (``tvm``) or MLIR (``mlir``).

    ``source`` is an output folder or a :class:`~synth.pipeline.Result`.
    Nothing is written (the command writes kernel.cu; see docs/outputs.md).
    """
    problem, schedule, program = _parts(source)
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .hopper.problem import HopperGemm

    if isinstance(problem, HopperGemm):
        if target != "cuda":
            raise SynthError(Loc(problem.path), f"a Hopper folder (mainloop: tma_wgmma) has no {target} export: "
                             "TVM's and MLIR's pipelining annotations describe cp.async loops",
                             "use --target cuda; the stages and k_pipe_mmas are in schedule.json")
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .emit.hopper_config import kernel_config
        from .emit.sm90.kernel import emit_sm90_kernel

        return emit_sm90_kernel(kernel_config(problem, schedule), program)
    if target == "tvm":
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .emit.tvm import tvm_annotations

        return tvm_annotations(problem, schedule)
    if target == "mlir":
        # here, not at the top: import synth.api loads a command's layers when the command is called
        from .emit.mlir import mlir_pipelined_loop

        return mlir_pipelined_loop(problem, schedule)
    if target != "cuda":
        raise SynthError(None, f"unknown target {target!r}", "use cuda, tvm or mlir")
    if problem.gemm is None:
        raise SynthError(Loc(problem.path), f"problem '{problem.name}' is not a GEMM; only 'kind: gemm' "
                         "problems get CUDA kernels", "use --target tvm or --target mlir, or write a kind: gemm problem")
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .emit.cuda import emit_kernel

    return emit_kernel(problem, schedule, program)


def run(out: str, *, repeats: int = 20):
    """Run ``OUT/kernel.cu`` on the local GPU (``synth run``); returns :class:`synth.run.RunReport`.

    Without a GPU raises :class:`SynthError` "no CUDA GPU available: ..." (the
    command exits 1); :func:`synth.kernel.load` runs a kernel on the CPU emulator instead.
    """
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .run import run_output

    if not 1 <= int(repeats) <= 100000:
        raise SynthError(None, f"repeats {repeats} is out of range", "use 1 .. 100000")
    return run_output(os.fspath(out), repeats=int(repeats))


def search(M: int, N: int, K: int, *, arch: str = "sm_80", dtype: str = "f16", top: int = 5,
           time_limit: float = 30.0, workers: int = 2, progress: Optional[Progress] = None,
           mainloop: Optional[str] = None):
    """Search GEMM pipelines for ``M x N x K`` (``synth search gemm``); returns :class:`SearchResult`.

    ``time_limit`` bounds the whole search; ``result.candidates`` are best first. ``mainloop``:
    ``tma_wgmma`` or ``cp_async`` (``--mainloop``); None: the arch's default (the Hopper loop on sm_90).
    """
    # here, not at the top: import synth.api loads a command's layers when the command is called
    from .search import search_gemm

    _check_limits(time_limit, workers)
    return search_gemm(M, N, K, dtype=dtype, arch=arch, time_limit=time_limit, workers=workers, top=top,
                       progress=progress, mainloop=mainloop)


def _check_limits(time_limit: float, workers: Union[int, None] = None) -> None:
    """The CLI's bounds: 0 < time_limit <= 86400 s, 1 <= workers <= 256."""
    import math

    if not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) or not 0 < time_limit <= 86400:
        raise SynthError(None, f"time_limit {time_limit!r} is out of range", "give seconds, 0 < time_limit <= 86400")
    if workers is not None and (not isinstance(workers, int) or not 1 <= workers <= 256):
        raise SynthError(None, f"workers {workers!r} is out of range", "give an integer, 1 <= workers <= 256")


__all__ = ["load", "solve", "lower", "verify", "certify", "emit", "run", "search", "certificate_dir"]

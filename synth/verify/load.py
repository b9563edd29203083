"""Reading ``program.json`` for ``synth verify``: checked by the trusted reader first, then built.

:func:`load_program` accepts the file or the ``OUT/`` folder holding it and
raises :class:`~synth.errors.SynthError` (exit status 2) naming the file, line,
column and JSON path, with a fix, when:

* the bytes, the JSON Schema or a semantic check of :mod:`synth.trusted.program`
  fail (sizes, types without coercion, every derived field against what it
  derives from: read distances, producers, ``before``, ``max_stage``,
  ``min_trip_count`` ...);
* the well-formedness or coverage obligations of :mod:`synth.trusted.obligations`
  fail (iteration = step - stage, version = iteration - distance, slot = version
  mod multiplicity, every iteration of every op run exactly once for every trip
  count): the message gives a trip count and step where they fail.

The waits' ``tight`` and ``reason`` are read back as written (so an output
folder round-trips) but nothing relies on them: ``synth verify`` reports its own
verdicts (:class:`~synth.verify.report.WaitVerdict`), tightness included.
"""

from __future__ import annotations

import json
import os

from ..errors import Loc, SynthError
from ..program import Program, program_from_json
from ..readfile import read_regular_bytes
from ..trusted.certify import PARTS, folder_disagreements, folder_parts
from ..trusted.check import form
from ..trusted.flags import MAX_BYTES as FLAG_MAX_BYTES, FlagError, read_design
from ..trusted.program import MAX_BYTES, InputError, read_bytes
from .obligations import ProgramError, validate_program

def load_program(path: str, *, check_form: bool = True) -> Program:
    """The program of ``path`` (``program.json`` or its folder), checked; errors are :class:`SynthError`.

    ``check_form=False`` skips the solver-backed well-formedness and coverage
    checks (tests that replay the RFC's malformed listings); the CLI never does.
    """
    file = os.path.join(path, "program.json") if os.path.isdir(path) else path
    data = read_regular_bytes(file, MAX_BYTES, "program.json",
                              fix="pass program.json or the output folder of 'synth solve'")
    try:
        checked = read_bytes(data, file)
    except InputError as e:
        raise SynthError(Loc(e.file, e.line, e.col), f"{e.path}: {e.msg}" if e.path else e.msg, e.fix) from None
    try:
        program = program_from_json(json.loads(data))
    except (KeyError, TypeError, ValueError) as e:  # a bound the trusted reader leaves to the builder
        raise SynthError(Loc(file), f"program.json: {e}", "pass the program.json written by 'synth solve'") from None
    try:
        validate_program(program)
    except ProgramError as e:
        raise SynthError(Loc(file), f"{e.path}: {e.msg}", e.fix) from None
    if check_form:
        bad = form(checked)
        if bad:
            v = bad[0]
            where = (f" (for example trip count {v.trip_count}, step {v.step})" if v.answer == "sat"
                     else f" (solver: {v.answer})")
            raise SynthError(Loc(file), f"{v.obligation.id}: not so: {v.obligation.description}{where}",
                             "program.json must run each iteration of each op once, at step iteration + stage, "
                             "with versions and slots derived from it; regenerate it with 'synth solve'")
    return program


def hopper_folder_parts(folder: str) -> tuple[str, ...]:
    """The proof parts of a Hopper output folder that ``synth verify OUT`` proves besides ``program.json``:
    ``store`` (a TMA-store epilogue) and ``order/even``, ``order/odd`` (ping-pong consumers), as the folder's
    ``problem.yaml`` asks for them, its design keys read by the trusted checker's reader
    (:func:`synth.trusted.flags.read_design`, what ``synth certify`` reads). The ring's ``program.json`` is the
    same bytes with one consumer or two, with either epilogue, so the design cannot be read from it.

    :class:`~synth.errors.SynthError` (exit status 2, ``problem.yaml``, its line and a fix) when that reader
    refuses the file, when a part the design asks for is missing, or when a part is there that it does not ask
    for. A folder without ``problem.yaml`` (or a ``program.json`` given alone): the parts that are there."""
    if not os.path.isdir(folder):
        return ()
    problem = os.path.join(folder, "problem.yaml")
    if not os.path.lexists(problem):
        need = tuple(name for name in PARTS if os.path.lexists(os.path.join(folder, name)))
    else:
        data = read_regular_bytes(problem, FLAG_MAX_BYTES, "problem.yaml", fix="pass a folder written by 'synth solve'")
        try:
            design = read_design(data, problem)
        except FlagError as e:
            line = e.where.rpartition(":")[2]
            raise SynthError(Loc(problem, int(line) if line.isdigit() else 0, 1 if line.isdigit() else 0),
                             f"{e.msg}: synth reads the folder's design keys with the trusted checker's reader",
                             e.fix) from None
        bad = folder_disagreements(folder, design)
        if bad:
            key, why = bad[0]
            line = design.lines.get(key, 0)
            raise SynthError(Loc(problem, line, 1 if line else 0), why,
                             "re-run 'synth solve': it writes every part the problem asks for")
        need = folder_parts(design)
    parts = []
    for name in need:
        parts += ["order/even", "order/odd"] if name == "order" else [name]
    for name in parts:
        if not os.path.lexists(os.path.join(folder, *name.split("/"), "program.json")):
            raise SynthError(Loc(os.path.join(folder, *name.split("/"))), f"{name}/program.json is missing",
                             "re-run 'synth solve': it writes every part the problem asks for")
    return tuple(parts)

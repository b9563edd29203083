"""Certificates: one SMT-LIB2 file per proof obligation, bound to ``program.json``, and their re-check.

:func:`write_certificate` writes ``certificate/``: a copy of the proved
``program.json``, for each obligation that the trusted checker
(:mod:`synth.trusted`) derives from that file the file holding its *negation*
(named definitions, assertions, ``(check-sat)``; expected ``unsat``), and
``manifest.json``::

    {"format": "synth-certificate/2", "program": ..., "program_sha256": ...,
     "trip_count": ..., "min_trip_count": ..., "solvers": {"z3": ..., "cvc5": ...},
     "obligations": [{"id", "file", "kind", "wait": {"index", "part", "queue", "before",
                      "in_flight"} | null, "description", "expected": "unsat",
                      "result": {"z3": ..., "cvc5": ...}, "sha256"}]}

:func:`certify` is :func:`synth.trusted.certify.certify`: it re-derives the
obligations from ``program.json`` alone, compares them with the files and asks
Z3 and cvc5 (docs/trust.md). The files are the trusted checker's, not synth's
prover's: the prover (:mod:`synth.verify.prove`) is an independent second
implementation whose verdicts the tests compare with these.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING

from ..program import dumps
from ..trusted import solvers
from ..trusted.certify import FORMAT, MANIFEST, PROGRAM, CertifyFile, CertifyResult, certify, sha256
from ..trusted.obligations import derive
from ..trusted.program import read_bytes

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report


def check_z3(text: str, timeout_s: float = 60.0) -> str:
    """``unsat`` / ``sat`` / ``unknown`` / ``error: ...`` of an SMT-LIB2 text with Z3."""
    return solvers.z3_answer(text, timeout_s)


def check_cvc5(text: str, timeout_s: float = 60.0) -> str:
    """The answer of cvc5's SMT-LIB2 parser and solver to the file's ``(check-sat)``."""
    return solvers.cvc5_answer(text, timeout_s)


def _file_name(n: int, oid: str) -> str:
    return f"{n:03d}-" + re.sub(r"[^A-Za-z0-9_.]+", "-", oid.replace("<-", "-from-")).strip("-") + ".smt2"


def write_certificate(report: "Report", directory: str, *, cvc5_check: bool = True,
                      timeout_s: float = 60.0, deadline=None, program_bytes: bytes | None = None) -> None:
    """Write the certificate of ``report.program`` into ``directory`` (see the module docstring).

    The obligations are derived by the trusted checker from the program's
    ``program.json`` bytes; each is solved by Z3 and (with ``cvc5_check``) cvc5 so
    the manifest records both answers. Files already in ``directory`` with the
    same names are replaced (the CLI refuses to write over outputs without
    ``--force``).

    ``deadline`` (a :class:`synth.deadline.Deadline`) caps each solver call by
    what is left and raises :class:`synth.deadline.TimeUp` (phase ``write``)
    once it has passed. ``program_bytes``: certify exactly these bytes (the
    ``program.json`` that was proved, as read) instead of ``report.program``
    printed anew.
    """
    os.makedirs(directory, exist_ok=True)
    data = dumps(report.program).encode("utf-8") if program_bytes is None else program_bytes
    program = read_bytes(data, PROGRAM)
    waits = {w.index: w for w in program.waits}
    v = solvers.versions()
    entries = []
    obligations = derive(program)
    for n, ob in enumerate(obligations):
        if deadline is not None:
            deadline.check("write (the certificate's re-check)", done=f"{n} of {len(obligations)} obligations")
            timeout_s = deadline.cap(timeout_s)
        name = _file_name(n, ob.id)
        text = ob.smt2.encode("utf-8")
        with open(os.path.join(directory, name), "wb") as fh:
            fh.write(text)
        wait = None
        if ob.wait is not None:
            w = waits[ob.wait]
            wait = {"index": w.index, "part": w.part, "queue": w.queue, "before": w.before,
                    "in_flight": _count(w.text)}
        result = {"z3": check_z3(ob.smt2, timeout_s),
                  "cvc5": check_cvc5(ob.smt2, timeout_s) if cvc5_check and v["cvc5"] else None}
        entries.append({"id": ob.id, "file": name, "kind": ob.kind, "wait": wait, "description": ob.description,
                        "expected": "unsat", "result": result, "sha256": sha256(text)})
    with open(os.path.join(directory, PROGRAM), "wb") as fh:
        fh.write(data)
    manifest = {
        "format": FORMAT,
        "program": program.name,
        "program_sha256": sha256(data),
        "trip_count": program.tsym or program.trip,
        "min_trip_count": program.min_trip,
        "solvers": v,
        "obligations": entries,
    }
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")


def _count(text: str):
    return int(text) if re.fullmatch(r"-?\d+", text) else text


__all__ = ["write_certificate", "certify", "CertifyResult", "CertifyFile", "check_z3", "check_cvc5", "MANIFEST",
           "FORMAT"]

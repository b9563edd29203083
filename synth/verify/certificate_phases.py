"""Certificates of Hopper programs: one SMT-LIB2 file per obligation, bound to ``program.json``.

:func:`write_hopper_certificate` writes ``program.json`` (the Hopper program), one file per
obligation of :func:`synth.verify.phases.enumerate_hopper` holding its negation (expected
``unsat``) and ``manifest.json``::

    {"format": "synth-certificate-hopper/1", "program", "program_sha256", "trip_count",
     "min_trip_count", "ranking": {role: lag}, "solvers": {"z3", "cvc5"},
     "obligations": [{"id", "file", "kind", "role", "description", "expected": "unsat",
                      "result": {"z3", "cvc5"}, "sha256"}]}

:func:`certify_hopper` reads the folder only: the program's hash, the obligations re-derived
from ``program.json`` (same ids, and each file's formula proven equal by Z3 to the obligation
built afresh with the manifest's ranking, which is a hint: any ranking whose files are unsat proves freedom
from deadlock), each file's hash, and Z3's and cvc5's answers; then the independent checker
(:func:`synth.trusted.hopper.check_hopper_program`) re-derives every obligation from the same
``program.json`` bytes with its own encoding and asks Z3 and cvc5: the certificate fails when it fails.
"""

from __future__ import annotations

import json
import os
import re

from ..hopper.ir import dumps, hopper_from_json
from ..trusted import solvers
from ..trusted.certify import MANIFEST, PROGRAM, CertifyFile, CertifyResult, sha256
from ..trusted.hopper import check_hopper_program
from .phases import HopperReport, enumerate_hopper, obligation_smt2

FORMAT = "synth-certificate-hopper/1"


def _file_name(n: int, oid: str) -> str:
    return f"{n:03d}-" + re.sub(r"[^A-Za-z0-9_.]+", "-", oid.replace("<-", "-from-")).strip("-") + ".smt2"


def write_hopper_certificate(report: HopperReport, directory: str, *, cvc5_check: bool = True,
                             timeout_s: float = 60.0) -> None:
    """Write the certificate of a proven Hopper report into ``directory`` (ValueError if not proven)."""
    if not report.ok:
        raise ValueError(f"{report.program.name}: not every obligation is proven; no certificate")
    os.makedirs(directory, exist_ok=True)
    p = report.program
    data = dumps(p).encode("utf-8")
    v = solvers.versions()
    entries = []
    for n, ob in enumerate(enumerate_hopper(p)):
        text = obligation_smt2(p, ob, report.lags)
        name = _file_name(n, ob.id)
        raw = text.encode("utf-8")
        with open(os.path.join(directory, name), "wb") as fh:
            fh.write(raw)
        result = {"z3": solvers.z3_answer(text, timeout_s),
                  "cvc5": solvers.cvc5_answer(text, timeout_s) if cvc5_check and v["cvc5"] else None}
        entries.append({"id": ob.id, "file": name, "kind": ob.kind, "role": ob.role, "description": ob.description,
                        "expected": "unsat", "result": result, "sha256": sha256(raw)})
    with open(os.path.join(directory, PROGRAM), "wb") as fh:
        fh.write(data)
    manifest = {"format": FORMAT, "program": p.name, "program_sha256": sha256(data), "trip_count": p.trip_count,
                "min_trip_count": p.min_trip_count, "ranking": dict(report.lags), "solvers": v,
                "obligations": entries}
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")


def _equivalent(a: str, b: str, timeout_s: float) -> bool:
    """The two files assert the same formula (Z3 proves their conjunctions equal): Z3 orders the
    arguments of sums by internal ids, so equal obligations need not print the same bytes."""
    import z3
    ctx = z3.Context()
    try:
        fa = z3.And(*z3.parse_smt2_string(a, ctx=ctx), ctx)
        fb = z3.And(*z3.parse_smt2_string(b, ctx=ctx), ctx)
    except z3.Z3Exception:
        return False
    s = z3.Solver(ctx=ctx)
    s.set("timeout", int(timeout_s * 1000))
    s.add(fa != fb)
    return s.check() == z3.unsat


def is_hopper_certificate(directory: str) -> bool:
    """Whether ``directory`` (or its ``certificate/``) holds a Hopper certificate's manifest."""
    for d in (directory, os.path.join(directory, "certificate")):
        try:
            with open(os.path.join(d, MANIFEST), encoding="utf-8") as fh:
                return json.load(fh).get("format") == FORMAT
        except (OSError, ValueError, AttributeError):
            continue
    return False


def certify_hopper(directory: str, *, timeout_s: float = 60.0) -> CertifyResult:
    """Re-check a Hopper certificate folder (or the folder holding ``certificate/``)."""
    if not os.path.isfile(os.path.join(directory, MANIFEST)) and \
            os.path.isfile(os.path.join(directory, "certificate", MANIFEST)):
        directory = os.path.join(directory, "certificate")
    sv = tuple((k, str(x) if x else "missing") for k, x in solvers.versions().items())

    def fail(msg: str) -> CertifyResult:
        return CertifyResult(False, (), (f"certificate FAILED: {msg}",), sv, os.path.join(directory, PROGRAM))
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as fh:
            man = json.load(fh)
        with open(os.path.join(directory, PROGRAM), "rb") as fh:
            data = fh.read()
    except (OSError, ValueError) as e:
        return fail(f"cannot read the certificate: {e}")
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        return fail(f"manifest format is not {FORMAT}")
    if man.get("program_sha256") != sha256(data):
        return fail("program.json does not match the manifest's program_sha256")
    try:
        program = hopper_from_json(json.loads(data))
        obs = enumerate_hopper(program)
    except (KeyError, ValueError, TypeError) as e:
        return fail(f"program.json is not a Hopper program: {e}")
    lags = man.get("ranking") or {}
    if not isinstance(lags, dict) or not all(isinstance(k, str) and type(x) is int and abs(x) <= 16
                                             for k, x in lags.items()):
        return fail("ranking: expected {role: integer lag} with lags in -16..16")
    entries = man.get("obligations")
    if not isinstance(entries, list) or [e.get("id") for e in entries if isinstance(e, dict)] != [o.id for o in obs]:
        return fail("the manifest's obligations are not those program.json derives")
    files, msgs = [], []
    for ob, e in zip(obs, entries):
        name = e.get("file")
        try:
            if not isinstance(name, str) or os.path.basename(name) != name:
                raise OSError("bad file name")
            with open(os.path.join(directory, name), "rb") as fh:
                raw = fh.read()
        except OSError as err:
            files.append(CertifyFile(ob.id, name if isinstance(name, str) else None, ob.kind, None, "", "", False,
                                     False, f"missing: {err}"))
            continue
        text = raw.decode("utf-8", "replace")
        hash_ok = e.get("sha256") == sha256(raw) and _equivalent(text, obligation_smt2(program, ob, lags), timeout_s)
        z = solvers.z3_answer(text, timeout_s)
        c = solvers.cvc5_answer(text, timeout_s)
        ok = hash_ok and z == "unsat" and c == "unsat"
        msg = "" if ok else ("file differs from the obligation program.json derives" if not hash_ok
                             else f"z3: {z}, cvc5: {c}")
        files.append(CertifyFile(ob.id, name, ob.kind, None, z, c, hash_ok, ok, msg))
        if not ok:
            msgs.append(f"{ob.id}: {msg}")
    # the independent verdict: synth.trusted re-derives every obligation from the same bytes
    independent = check_hopper_program(data, timeout_s=timeout_s)
    ok = all(f.ok for f in files) and len(files) == len(obs) and independent.ok
    head = (f"certificate {'OK' if ok else 'FAILED'}: {sum(f.ok for f in files)}/{len(obs)} obligations of "
            f"{program.name} unsat by z3 and cvc5")
    return CertifyResult(ok, tuple(files), (head,) + tuple(msgs) + independent.messages, sv,
                         os.path.join(directory, PROGRAM))


__all__ = ["write_hopper_certificate", "certify_hopper", "is_hopper_certificate", "FORMAT"]

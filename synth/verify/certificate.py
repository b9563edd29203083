"""Certificates: one SMT-LIB2 file per proof obligation, and their independent re-check.

:func:`write_certificate` writes ``certificate/``: for each obligation of a report
the file holding its *negation* (declarations, assertions, ``(check-sat)``;
expected ``unsat``), and ``manifest.json``::

    {"format": "synth-certificate/1", "program": ..., "solvers": {"z3": ..., "cvc5": ...},
     "obligations": [{"id", "file", "kind", "wait": {"index", "part", "queue", "before",
                      "in_flight"} | null, "description", "expected": "unsat",
                      "result": {"z3": ..., "cvc5": ...}, "sha256"}]}

:func:`certify` re-checks a certificate with Z3 and, independently, cvc5, using
nothing of synth but this file's reading of ``manifest.json``: a file whose
sha256 differs from the manifest, a missing file, or any answer other than
``unsat`` from either solver makes the certificate fail. It proves what the files
say; that they are the obligations of a given program is what ``synth verify``
re-derives.

This module imports nothing else from synth (so that ``certify`` trusts only the
solvers).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report

FORMAT = "synth-certificate/1"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class CertifyFile:
    id: str
    file: Optional[str]
    kind: str
    wait: Optional[int]
    z3: str
    cvc5: str
    hash_ok: bool
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class CertifyResult:
    ok: bool
    files: tuple[CertifyFile, ...]
    messages: tuple[str, ...]
    """A summary line first, then each failed file and other remarks (what the CLI prints)."""
    solvers: tuple[tuple[str, str], ...] = ()
    """``(solver, version)`` used for the re-check."""

    def render(self) -> str:
        """The summary line, then one line per failed file and any other message."""
        return "\n".join(self.messages[:1] + tuple(f"  {m}" for m in self.messages[1:]))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def z3_version() -> str:
    import z3

    return z3.get_version_string()


def cvc5_version() -> Optional[str]:
    try:
        import cvc5
    except ImportError:
        return None
    return getattr(cvc5, "__version__", "unknown")


def check_z3(text: str, timeout_s: float = 60.0) -> str:
    """``unsat`` / ``sat`` / ``unknown`` / ``error: ...`` of an SMT-LIB2 text with Z3."""
    import z3

    try:
        s = z3.Solver()
        s.set("timeout", max(1, int(timeout_s * 1000)))
        s.from_string(text)
        return str(s.check())
    except z3.Z3Exception as e:
        return f"error: {e}"


def check_cvc5(text: str, timeout_s: float = 60.0) -> str:
    """The answer of cvc5's SMT-LIB2 parser and solver to the file's ``(check-sat)``."""
    try:
        import cvc5
    except ImportError:
        return "error: cvc5 is not installed"
    try:
        tm = cvc5.TermManager()
        s = cvc5.Solver(tm)
        s.setOption("tlimit-per", str(max(1, int(timeout_s * 1000))))
        p = cvc5.InputParser(s)
        p.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "certificate.smt2")
        sm = p.getSymbolManager()
        answers = []
        while True:
            cmd = p.nextCommand()
            if cmd.isNull():
                break
            out = cmd.invoke(s, sm)
            if out and out.strip():
                answers.append(out.strip())
        if not answers:
            return "error: no (check-sat) in file"
        return answers[-1]
    except Exception as e:  # cvc5 raises RuntimeError on parse errors
        return f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}"


def _file_name(n: int, oid: str) -> str:
    return f"{n:03d}-" + re.sub(r"[^A-Za-z0-9_.]+", "-", oid.replace("<-", "-from-")).strip("-") + ".smt2"


def write_certificate(report: "Report", directory: str, *, cvc5_check: bool = True,
                      timeout_s: float = 60.0) -> None:
    """Write one SMT-LIB2 file per obligation of ``report`` and ``manifest.json`` into ``directory``.

    With ``cvc5_check`` each file is also solved by cvc5 so the manifest records
    both solvers' answers. Files already in ``directory`` with the same names are
    replaced (the CLI refuses to write over outputs without ``--force``).
    """
    os.makedirs(directory, exist_ok=True)
    program = report.program
    cv = cvc5_version()
    entries = []
    for n, ob in enumerate(report.obligations):
        wait = None
        if ob.wait is not None:
            w = program.waits[ob.wait]
            wait = {"index": ob.wait, "part": w.part, "queue": w.queue, "before": w.before,
                    "in_flight": _count_str(w.in_flight)}
        z3_result = {"proven": "unsat", "refuted": "sat"}.get(ob.status, "unknown")
        entry = {"id": ob.id, "file": None, "kind": ob.kind, "wait": wait, "description": ob.description,
                 "expected": "unsat", "result": {"z3": z3_result, "cvc5": None}, "sha256": None}
        if ob.smt2:
            name = _file_name(n, ob.id)
            data = ob.smt2.encode("utf-8")
            with open(os.path.join(directory, name), "wb") as fh:
                fh.write(data)
            entry["file"] = name
            entry["sha256"] = sha256(data)
            if cvc5_check and cv is not None:
                entry["result"]["cvc5"] = check_cvc5(ob.smt2, timeout_s)
        entries.append(entry)
    manifest = {
        "format": FORMAT,
        "program": program.name,
        "trip_count": program.trip_count,
        "min_trip_count": program.min_trip_count,
        "solvers": {"z3": z3_version(), "cvc5": cv},
        "obligations": entries,
    }
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")


def _count_str(e) -> object:
    from ..expr import Num, to_str

    return e.value if isinstance(e, Num) else to_str(e)


def certify(directory: str, *, timeout_s: float = 60.0) -> CertifyResult:
    """Re-check every file of a certificate with Z3 and cvc5; ``ok`` only if all are ``unsat``."""
    messages: list[str] = []
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        return CertifyResult(False, (), (f"{path}: no manifest (expected a folder written by 'synth solve')",))
    except (OSError, json.JSONDecodeError) as e:
        return CertifyResult(False, (), (f"{path}: unreadable manifest: {e}",))
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or \
            not isinstance(manifest.get("obligations"), list):
        return CertifyResult(False, (), (f"{path}: not a {FORMAT} manifest",))
    solvers = (("z3", z3_version()), ("cvc5", cvc5_version() or "missing"))
    if cvc5_version() is None:
        messages.append("cvc5 is not installed (pip install cvc5): the independent re-check cannot run")
    files: list[CertifyFile] = []
    listed = set()
    for n, e in enumerate(manifest["obligations"]):
        oid = str(e.get("id", f"#{n}")) if isinstance(e, dict) else f"#{n}"
        if not isinstance(e, dict):
            files.append(CertifyFile(oid, None, "?", None, "-", "-", False, False, "malformed manifest entry"))
            continue
        kind = str(e.get("kind", "?"))
        wait = e.get("wait", {}).get("index") if isinstance(e.get("wait"), dict) else None
        name = e.get("file")
        if e.get("expected") != "unsat":
            files.append(CertifyFile(oid, name, kind, wait, "-", "-", False, False,
                                     f"manifest expects {e.get('expected')!r}, every obligation must be unsat"))
            continue
        if not name:
            files.append(CertifyFile(oid, None, kind, wait, "-", "-", False, False,
                                     "no SMT-LIB2 file: the obligation could not be encoded"))
            continue
        listed.add(name)
        fpath = os.path.join(directory, name)
        if os.path.basename(name) != name:
            files.append(CertifyFile(oid, name, kind, wait, "-", "-", False, False, "file name escapes the folder"))
            continue
        try:
            with open(fpath, "rb") as fh:
                data = fh.read()
        except OSError:
            files.append(CertifyFile(oid, name, kind, wait, "-", "-", False, False, "file missing"))
            continue
        if sha256(data) != e.get("sha256"):
            files.append(CertifyFile(oid, name, kind, wait, "-", "-", False, False,
                                     "sha256 differs from the manifest: the file was changed"))
            continue
        text = data.decode("utf-8", errors="replace")
        rz = check_z3(text, timeout_s)
        rc = check_cvc5(text, timeout_s)
        ok = rz == "unsat" and rc == "unsat"
        msg = "" if ok else ("a counterexample exists (sat): the obligation does not hold"
                             if "sat" in (rz, rc) else "not proven unsat")
        files.append(CertifyFile(oid, name, kind, wait, rz, rc, True, ok, msg))
    try:
        extra = sorted(f for f in os.listdir(directory) if f.endswith(".smt2") and f not in listed)
    except OSError:
        extra = []
    if extra:
        messages.append(f"files not in the manifest (ignored): {', '.join(extra)}")
    ok = bool(files) and all(f.ok for f in files) and cvc5_version() is not None
    if not files:
        messages.append("the manifest lists no obligations")
    head = (f"certificate {'OK' if ok else 'FAILED'}: {sum(f.ok for f in files)}/{len(files)} obligations "
            f"unsat with " + " and ".join(f"{n} {v}" for n, v in solvers))
    failed = [f"{f.file or f.id}: {f.message} (z3 {f.z3}, cvc5 {f.cvc5})" for f in files if not f.ok]
    return CertifyResult(ok, tuple(files), tuple([head] + failed + messages), solvers)


__all__ = ["write_certificate", "certify", "CertifyResult", "CertifyFile", "check_z3", "check_cvc5"]

"""``synth certify``: is this certificate a proof of *this* ``program.json``?

A certificate folder holds ``manifest.json``, one SMT-LIB2 file per obligation
and a copy of the ``program.json`` it proves. :func:`certify`:

1. reads the manifest (format :data:`FORMAT`);
2. takes the program: ``program.json`` beside the certificate folder (an ``OUT/``
   written by ``synth solve``), else the copy inside it; its sha256 must be the
   manifest's ``program_sha256``;
3. re-derives from that file alone (:mod:`synth.trusted.program`,
   :mod:`synth.trusted.obligations`) the full list of obligations and each one's
   SMT-LIB2 text, and compares: an obligation missing from the manifest, one the
   program does not give, a file that differs from the derived text, or a
   charged wait that differs, fails;
4. asks Z3 and cvc5 each file; every answer must be ``unsat``.

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Optional

from . import solvers
from .obligations import derive
from .program import InputError, read_bytes
from .program import MAX_BYTES

FORMAT = "synth-certificate/2"
MANIFEST = "manifest.json"
PROGRAM = "program.json"


@dataclass(frozen=True)
class CertifyFile:
    id: str
    file: Optional[str]
    kind: str
    wait: Optional[int]
    z3: str
    cvc5: str
    hash_ok: bool
    """The file is the obligation derived from program.json (and its sha256 the manifest's)."""
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class CertifyResult:
    ok: bool
    files: tuple[CertifyFile, ...]
    messages: tuple[str, ...]
    """A summary line first, then each failure and other remarks (what the CLI prints)."""
    solvers: tuple[tuple[str, str], ...] = ()
    """``(solver, version)`` used for the re-check (``missing`` when not installed)."""
    program: str = ""
    """The program.json the certificate was checked against."""

    def render(self) -> str:
        """The summary line, then one line per failure and any other message."""
        return "\n".join(self.messages[:1] + tuple(f"  {m}" for m in self.messages[1:]))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def program_path(directory: str) -> str:
    """The program.json a certificate folder is checked against (see module docstring)."""
    outside = os.path.join(os.path.dirname(os.path.abspath(directory)), PROGRAM)
    return outside if os.path.isfile(outside) else os.path.join(directory, PROGRAM)


def _fail(msg: str, sv=(), program: str = "") -> CertifyResult:
    return CertifyResult(False, (), (f"certificate FAILED: {msg}",), tuple(sv), program)


def certify(directory: str, *, timeout_s: float = 60.0) -> CertifyResult:
    """Check the certificate in ``directory`` (``OUT/certificate/``; ``OUT/`` also accepted)."""
    if not os.path.isfile(os.path.join(directory, MANIFEST)) and \
            os.path.isfile(os.path.join(directory, "certificate", MANIFEST)):
        directory = os.path.join(directory, "certificate")
    v = solvers.versions()
    sv = tuple((n, v[n] or "missing") for n in ("z3", "cvc5"))
    path = os.path.join(directory, MANIFEST)
    try:
        if os.path.getsize(path) > MAX_BYTES:
            return _fail(f"{path}: manifest larger than {MAX_BYTES} bytes", sv)
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        return _fail(f"{path}: no manifest (pass OUT/ or OUT/certificate/ as written by 'synth solve')", sv)
    except (OSError, ValueError, RecursionError) as e:
        return _fail(f"{path}: unreadable manifest: {e}", sv)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or \
            not isinstance(manifest.get("obligations"), list) or \
            not all(isinstance(e, dict) for e in manifest["obligations"]):
        return _fail(f"{path}: not a {FORMAT} manifest (re-run 'synth solve' to write a current certificate)", sv)
    prog_file = program_path(directory)
    try:
        with open(prog_file, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError:
        return _fail(f"no {PROGRAM} beside or inside {directory}: the certificate proves a program, and "
                     "certify needs that program to re-derive the obligations", sv)
    digest = sha256(data)
    if manifest.get("program_sha256") != digest:
        return _fail(f"{prog_file} has sha256 {digest}, the manifest says {manifest.get('program_sha256')}: "
                     "this certificate is not for this program (or program.json was changed)", sv, prog_file)
    try:
        program = read_bytes(data, prog_file)
    except InputError as e:
        return _fail(f"{e}", sv, prog_file)
    derived = derive(program)

    messages: list[str] = []
    files: list[CertifyFile] = []
    listed = {}
    for e in manifest["obligations"]:
        oid = str(e.get("id"))
        if oid in listed:
            messages.append(f"obligation {oid} is listed twice in the manifest")
        listed[oid] = e
    for oid in listed:
        if oid not in {o.id for o in derived}:
            messages.append(f"the manifest lists obligation {oid}, which {PROGRAM} does not give")
    for n, ob in enumerate(derived):
        e = listed.get(ob.id)
        if e is None:
            files.append(CertifyFile(ob.id, None, ob.kind, ob.wait, "-", "-", False, False,
                                     f"obligation {ob.id} ({ob.kind}) of {PROGRAM} is missing from the manifest"))
            continue
        name = e.get("file")
        wait = e.get("wait")
        windex = wait.get("index") if isinstance(wait, dict) else None
        problem = ""
        text = b""
        if not isinstance(name, str) or os.path.basename(name) != name or not name.endswith(".smt2"):
            problem = f"file name {name!r} is not a .smt2 file of the folder"
        else:
            try:
                with open(os.path.join(directory, name), "rb") as fh:
                    text = fh.read(MAX_BYTES + 1)
            except OSError:
                problem = "file missing"
        want = ob.smt2.encode("utf-8")
        if not problem and text != want:
            problem = f"not obligation {ob.id} as derived from {PROGRAM} ({_first_diff(text, want)})"
        if not problem and e.get("sha256") != sha256(want):
            problem = "the manifest's sha256 is not the file's"
        if not problem and (windex != ob.wait or e.get("kind") != ob.kind):
            problem = (f"manifest entry {ob.id} says kind {e.get('kind')!r}, wait {windex}; {PROGRAM} gives "
                       f"kind {ob.kind!r}, wait {ob.wait}")
        if problem:
            files.append(CertifyFile(ob.id, name, ob.kind, ob.wait, "-", "-", False, False, problem))
            continue
        rz = solvers.z3_answer(ob.smt2, timeout_s)
        rc = solvers.cvc5_answer(ob.smt2, timeout_s)
        ok = rz == "unsat" and rc == "unsat"
        msg = "" if ok else (f"{ob.description}: a counterexample exists (sat)" if "sat" in (rz, rc)
                             else "not proven unsat")
        files.append(CertifyFile(ob.id, name, ob.kind, ob.wait, rz, rc, True, ok, msg))
    missing = solvers.missing()
    if missing:
        messages.append(f"missing solver(s): {', '.join(missing)}; certify needs both Z3 and cvc5")
    try:
        extra = sorted(f for f in os.listdir(directory) if f.endswith(".smt2")
                       and f not in {str(e.get("file")) for e in listed.values()})
    except OSError:
        extra = []
    if extra:
        messages.append(f"files not in the manifest (ignored): {', '.join(extra)}")
    ok = bool(files) and all(f.ok for f in files) and not missing and not any(
        m.startswith(("the manifest lists", "obligation ")) for m in messages)
    head = (f"certificate {'OK' if ok else 'FAILED'}: {sum(f.ok for f in files)}/{len(derived)} obligations of "
            f"{prog_file} re-derived and unsat with " + " and ".join(f"{n} {ver}" for n, ver in sv)
            + " (every obligation the checker derives on its own, including those the prover settles from the "
            "program's structure)")
    failed = [f"{f.file or f.id}: {f.message}" + (f" (z3 {f.z3}, cvc5 {f.cvc5})" if f.hash_ok else "")
              for f in files if not f.ok]
    return CertifyResult(ok, tuple(files), tuple([head] + failed + messages), sv, prog_file)


def _first_diff(got: bytes, want: bytes) -> str:
    a, b = got.decode("utf-8", "replace").splitlines(), want.decode("utf-8", "replace").splitlines()
    for n, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {n} differs: {x[:60]!r}"
    return f"{len(a)} lines instead of {len(b)}"

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

:func:`certify_hopper` does the same for a Hopper certificate (format :data:`HOPPER_FORMAT`):
the obligations are :func:`synth.trusted.hopper.derive_hopper`'s, under the manifest's deadlock
ranking (a hint: any ranking whose files are all unsat proves freedom from deadlock), and a wgmma
wait whose ``program.json`` claims ``"tight": true`` is tested (:func:`~synth.trusted.hopper.wgmma_tightness`).
The design keys of the ``problem.yaml`` beside the ``program.json`` checked are read by
:func:`synth.trusted.flags.read_design` (a real YAML parser, not synth's problem reader). A persistent
kernel's certificate (the manifest's ``"persistent": true``, or ``persistent: true`` in that ``problem.yaml``)
also holds the ``carry`` obligations of :func:`~synth.trusted.hopper.derive_carry`, compared and asked the
same way; so does a ping-pong kernel's (``pingpong: true`` there, which implies a persistent tile loop, or an
``order/`` folder beside the ``program.json``: its consumer warp groups index the ring by the CTA's running tile
count, the carry ``derive_carry`` states). A thread-block cluster program (:func:`is_cluster_program`, or
``cluster: 2x1`` / ``1x2`` in that ``problem.yaml``) must also list its cluster checks in the manifest's ``cluster`` (exactly those
:func:`synth.trusted.cluster.check_cluster_bytes` derives, each holding); a certificate that omits them fails.
``pingpong: true`` and ``epilogue: tma_store`` ask for the folders ``order/`` and ``store/``, which are
certified too; the folders and the keys must agree (:func:`folder_disagreements`).

Both read only regular files (:func:`~synth.trusted.program.read_regular`: never a FIFO or a
device, the size bound enforced while reading), a manifest of at most :data:`MAX_MANIFEST_BYTES`
nested at most :data:`MAX_MANIFEST_DEPTH` deep, and keep to one time limit for the whole check:
an obligation not asked before it runs out, or one a solver cannot answer, fails the
certificate as unknown with the reason.

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Optional

from . import solvers
from .hopper import MAX_FLAG_BYTES, derive_carry, derive_hopper, wgmma_tightness
from .hopper_program import MAX_BYTES as HOPPER_MAX_BYTES
from .hopper_program import HopperInputError, read_hopper_bytes
from .obligations import derive
from .program import MAX_BYTES, InputError, read_bytes, read_regular
from .cluster import check_cluster_bytes, cta
from .flags import Design, FlagError, read_design
from .store import check_store_threads
from .attention import FORMAT as ATTENTION_FORMAT
from .attention import AttentionInputError, derive_attention, read_attention_bytes

FORMAT = "synth-certificate/2"
HOPPER_FORMAT = "synth-certificate-hopper/4"
MANIFEST = "manifest.json"
PROGRAM = "program.json"
PROBLEM = "problem.yaml"
MAX_MANIFEST_BYTES = 8 << 20
"""Size of ``manifest.json`` (8 MiB; about 400 bytes per obligation)."""
MAX_MANIFEST_DEPTH = 8
"""Nesting of ``manifest.json`` (it needs 4)."""
MAX_LAG = 16
"""Largest role lag of a Hopper certificate's deadlock ranking, either sign."""


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
    # anything named program.json beside the certificate is the program (a FIFO or a folder there
    # fails when read, it never lets the copy inside stand in for it)
    return outside if os.path.lexists(outside) else os.path.join(directory, PROGRAM)


def _fail(msg: str, sv=(), program: str = "") -> CertifyResult:
    return CertifyResult(False, (), (f"certificate FAILED: {msg}",), tuple(sv), program)


class _Refused(ValueError):
    """The certificate cannot be checked: the message says why."""


def _no_dupes(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_manifest(path: str) -> dict:
    """The manifest at ``path``: a regular file of at most :data:`MAX_MANIFEST_BYTES`, UTF-8 JSON
    nested at most :data:`MAX_MANIFEST_DEPTH` deep, no duplicate keys or ``NaN``, an object whose
    ``obligations`` is a list of objects. Raises ``FileNotFoundError`` when absent and ValueError
    (the reason) otherwise."""
    try:
        data = read_regular(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise ValueError(f"cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 (offset {e.start})") from None
    depth = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', text):
        depth += 1 if ch in "[{" else (-1 if ch in "]}" else 0)
        if depth > MAX_MANIFEST_DEPTH:
            raise ValueError(f"JSON nested more than {MAX_MANIFEST_DEPTH} deep")
    try:
        doc = json.loads(text, object_pairs_hook=_no_dupes, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except (ValueError, RecursionError) as e:
        raise ValueError(f"not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
    obs = doc.get("obligations")
    if not isinstance(obs, list):
        raise ValueError("\"obligations\" is not a list")
    for n, e in enumerate(obs):
        if not isinstance(e, dict):
            raise ValueError(f"obligations[{n}] is {type(e).__name__}, not an object")
        for key in ("id", "file", "kind", "sha256"):
            if not isinstance(e.get(key), str):
                raise ValueError(f"obligations[{n}].{key} is {json.dumps(e.get(key))[:40]}, not a string")
    return doc


def _cert_dir(directory: str) -> str:
    if not os.path.lexists(os.path.join(directory, MANIFEST)) and \
            os.path.lexists(os.path.join(directory, "certificate", MANIFEST)):
        return os.path.join(directory, "certificate")
    return directory


def _load(directory: str, fmt: str, limit: int) -> tuple:
    """``(manifest, program file, its bytes)``, or raises :class:`_Refused` with the message."""
    path = os.path.join(directory, MANIFEST)
    try:
        manifest = read_manifest(path)
    except FileNotFoundError:
        raise _Refused(f"{path}: no manifest (pass OUT/ or OUT/certificate/ as written by 'synth solve')") from None
    except ValueError as e:
        if "is not a list" in str(e) or "expected a JSON object" in str(e):
            raise _Refused(f"{path}: not a {fmt} manifest ({e}; re-run 'synth solve' to write a current "
                           "certificate)") from None
        raise _Refused(f"{path}: unreadable manifest: {e}") from None
    if manifest.get("format") != fmt:
        raise _Refused(f"{path}: not a {fmt} manifest (re-run 'synth solve' to write a current certificate)")
    prog_file = program_path(directory)
    try:
        data = read_regular(prog_file, limit)
    except FileNotFoundError:
        raise _Refused(f"no {PROGRAM} beside or inside {directory}: the certificate proves a program, and "
                       "certify needs that program to re-derive the obligations") from None
    except (OSError, ValueError) as e:
        raise _Refused(f"{prog_file}: {getattr(e, 'strerror', None) or e}") from None
    digest = sha256(data)
    if manifest.get("program_sha256") != digest:
        raise _Refused(f"{prog_file} has sha256 {digest}, the manifest says {str(manifest.get('program_sha256'))[:80]}: "
                       "this certificate is not for this program (or program.json was changed)")
    return manifest, prog_file, data


def certify(directory: str, *, timeout_s: float = 60.0, time_limit: Optional[float] = None) -> CertifyResult:
    """Check the certificate in ``directory`` (``OUT/certificate/``; ``OUT/`` also accepted).

    ``timeout_s`` bounds each solver call; ``time_limit`` (seconds, optional) the whole check:
    obligations not asked in time fail as unknown."""
    directory = _cert_dir(directory)
    v = solvers.versions()
    sv = tuple((n, v[n] or "missing") for n in ("z3", "cvc5"))
    try:
        manifest, prog_file, data = _load(directory, FORMAT, MAX_BYTES)
    except _Refused as e:
        return _fail(str(e), sv)
    try:
        program = read_bytes(data, prog_file)
    except InputError as e:
        return _fail(f"{e}", sv, prog_file)
    return _compare_and_ask(directory, manifest, derive(program), prog_file, sv, timeout_s, time_limit)


def certify_hopper(directory: str, *, timeout_s: float = 60.0, time_limit: Optional[float] = None) -> CertifyResult:
    """Check the Hopper certificate in ``directory`` (``OUT/certificate/``; ``OUT/`` also accepted).

    As :func:`certify`, with the obligations of :func:`synth.trusted.hopper.derive_hopper` under
    the manifest's ``ranking`` (``{role: lag}``, lags in ``-MAX_LAG .. MAX_LAG``), and each wgmma
    wait that ``program.json`` claims tight tested. When the folder's ``problem.yaml`` says
    ``epilogue: tma_store`` (read by :func:`synth.trusted.flags.read_design`), the TMA-store epilogue too:
    ``store/certificate/`` against ``store/program.json`` (:func:`certify`) and the thread classes of
    :func:`synth.trusted.store.check_store_threads`. With ``pingpong: true``, ``order/even/`` and ``order/odd/``
    too (each a Hopper certificate of the order protocol). A folder the design asks for that is missing, or one
    there that it does not ask for, fails (:func:`folder_disagreements`). An output folder without its
    ``problem.yaml`` is judged by the parts it holds: ``order/`` and ``store/``, where there, are certified too."""
    t0 = time.monotonic()
    cdir = _cert_dir(directory)
    prog_file = program_path(cdir)
    problem_file = os.path.join(os.path.dirname(prog_file), PROBLEM)
    if os.path.dirname(os.path.abspath(prog_file)) == os.path.abspath(cdir):
        return _certify_hopper_protocol(directory, timeout_s=timeout_s, time_limit=time_limit)
    # the folder's design first: a folder that lacks a proof its problem asks for fails before any solver runs
    v = solvers.versions()
    sv = tuple((n, v[n] or "missing") for n in ("z3", "cvc5"))
    folder = os.path.dirname(prog_file)
    if not os.path.lexists(problem_file):
        # no problem.yaml to read the design from: the parts the folder holds are the design, each certified
        design = Design(epilogue="tma_store" if os.path.lexists(os.path.join(folder, "store")) else "register",
                        pingpong=os.path.lexists(os.path.join(folder, "order")))
    else:
        try:
            design = read_design(read_regular(problem_file, MAX_FLAG_BYTES), problem_file)
        except FlagError as e:
            return _fail(f"{e} (fix: {e.fix})", sv, prog_file)
        except (OSError, ValueError) as e:
            return _fail(f"{problem_file}: {getattr(e, 'strerror', None) or e}", sv, prog_file)
    bad = folder_disagreements(folder, design)
    if bad:
        return CertifyResult(False, (), (f"certificate FAILED: {os.path.dirname(prog_file)} does not hold the proofs "
                                         "its problem.yaml asks for",) + tuple(
            f"{problem_file}{':' + str(design.lines[k]) if k in design.lines else ''}: {why} (fix: re-run "
            "'synth solve')" for k, why in bad), sv, prog_file)
    epilogue, pingpong = design.epilogue, design.pingpong
    res = _certify_hopper_protocol(directory, timeout_s=timeout_s, time_limit=time_limit)
    if pingpong:  # the order protocol of both tile-count parities, each a Hopper program folder under order/
        for name in ("even", "odd"):
            left = None if time_limit is None else max(0.05, time_limit - (time.monotonic() - t0))
            sub = _certify_hopper_protocol(os.path.join(os.path.dirname(prog_file), "order", name, "certificate"),
                                           timeout_s=timeout_s, time_limit=left)
            if not sub.ok:
                head = res.messages[0].replace("certificate OK", "certificate FAILED", 1) if res.messages else \
                    "certificate FAILED"
                return CertifyResult(False, res.files + sub.files, (head,) + res.messages[1:] + tuple(
                    f"ping-pong order ({name} tile count): {m}" for m in sub.messages), res.solvers, res.program)
            res = CertifyResult(res.ok, res.files + sub.files,
                                res.messages + (f"ping-pong order ({name} tile count): {sub.messages[0]}",),
                                res.solvers, res.program)
    if epilogue != "tma_store":
        return res
    store_dir = os.path.join(os.path.dirname(prog_file), "store")
    left = None if time_limit is None else max(0.05, time_limit - (time.monotonic() - t0))
    store = certify(os.path.join(store_dir, "certificate"), timeout_s=timeout_s, time_limit=left)
    bad = [] if store.ok else [f"TMA-store epilogue: {m}" for m in store.messages]
    if store.ok:
        try:
            verdicts = check_store_threads(read_regular(os.path.join(store_dir, PROGRAM), MAX_BYTES),
                                           os.path.join(store_dir, PROGRAM))
        except (InputError, OSError, ValueError) as e:
            verdicts = {"read": (False, str(getattr(e, "strerror", None) or e))}
        bad = [f"TMA-store epilogue: {cls}: {why}" for cls, (ok, why) in verdicts.items() if not ok]
    if not bad:
        msgs = res.messages + (f"TMA-store epilogue: {store.messages[0]}; thread classes converge, proxy_fence, "
                               "teardown hold",)
        return CertifyResult(res.ok, res.files + store.files, msgs, res.solvers, res.program)
    head = res.messages[0].replace("certificate OK", "certificate FAILED", 1) if res.messages else "certificate FAILED"
    return CertifyResult(False, res.files + store.files, (head,) + res.messages[1:] + tuple(bad), res.solvers,
                         res.program)


PARTS = {"order": ("pingpong", "ping-pong consumers", "their order protocol", "pingpong: true"),
         "store": ("epilogue", "a TMA-store epilogue", "its store program", "epilogue: tma_store")}
"""The folders beside a Hopper ``program.json`` that a design key asks for: ``folder -> (key, design, what the
folder proves, the key's value)``."""


def folder_parts(design) -> tuple:
    """The folders (:data:`PARTS`) the :class:`~synth.trusted.flags.Design` ``design`` asks for."""
    return tuple(name for name, want in (("order", design.pingpong), ("store", design.epilogue == "tma_store"))
                 if want)


def folder_disagreements(folder: str, design) -> list:
    """``[(key, why)]``: where the output folder ``folder`` and its ``problem.yaml``'s ``design`` disagree (empty
    when they agree): a folder of :data:`PARTS` that the design asks for is missing, or one is there that it does
    not ask for. The ring's ``program.json`` is the same bytes for one consumer and for ping-pong, with either
    epilogue: these folders and the design keys are what show the design."""
    need, bad = folder_parts(design), []
    for name, (key, what, proof, value) in PARTS.items():
        there = os.path.lexists(os.path.join(folder, name))
        if name in need and not there:
            bad.append((key, f"says {value} ({what}), but {os.path.join(folder, name)}/ is missing: {proof} is "
                             "not proven"))
        elif there and name not in need:
            bad.append((key, f"does not say {value}, but {os.path.join(folder, name)}/ is there ({proof}): the "
                             "problem does not describe the folder"))
    return bad


def is_cluster_program(p) -> bool:
    """Whether the Hopper program ``p`` (:class:`~synth.trusted.hopper_program.HProgram`) is a thread-block
    cluster program by its own data: a ``cluster_sync`` in setup or teardown, or a copy (``tma``) of a role whose
    name ends in a CTA index that completes on, or writes into, a barrier or buffer whose name ends in another
    index (a multicast). A remote arrive alone does not count (docs/hopper_cluster.md)."""
    if any(kind == "cluster_sync" for kind, _ in tuple(p.setup) + tuple(p.teardown)):
        return True
    for r in p.roles:
        c = cta(r.name)
        if c is None:
            continue
        for pt in r.parts:
            for st in pt.stmts:
                if st.kind != "tma":
                    continue
                if any(cta(t) not in (None, c) for t in [st.barrier] + [w.buffer for w in st.writes]):
                    return True
    return False


def _cluster_verdict(manifest: dict, data: bytes, program, declared: bool, where: str) -> list:
    """The failures of a certificate's cluster classes (empty when they hold or do not apply): the program is a
    cluster program when its data says so (:func:`is_cluster_program`), the folder's ``problem.yaml`` declares a
    cluster, or the manifest lists cluster checks; then the manifest's ``cluster`` list must name exactly the
    checks :func:`synth.trusted.cluster.check_cluster_bytes` derives from the bytes, each holding."""
    listed = manifest.get("cluster")
    if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
        return [f"{where}: cluster: expected a list of cluster check ids (empty for a single-CTA program)"]
    if not (listed or declared or is_cluster_program(program)):
        return []
    ok, checks, msgs = check_cluster_bytes(data)
    want = [c.id for c in checks]
    bad = []
    if not checks:
        return [m for m in msgs]
    if not listed:
        bad.append(f"{where}: the certificate omits the cluster classes (cluster_form, init_visible, safe_exit) "
                   f"of a cluster program ({len(want)} checks)")
    else:
        missing, extra = [x for x in want if x not in listed], [x for x in listed if x not in want]
        if missing or extra or len(listed) != len(set(listed)):
            bad.append(f"{where}: cluster: the manifest's checks differ from the program's (missing "
                       f"{missing[:3]}, not derived {extra[:3]})")
    bad += [f"{c.id} [{c.kind}]: {c.reason}" for c in checks if not c.ok]
    return bad


def _certify_hopper_protocol(directory: str, *, timeout_s: float = 60.0,
                             time_limit: Optional[float] = None) -> CertifyResult:
    """:func:`certify_hopper` for ``program.json``'s protocol alone."""
    t0 = time.monotonic()
    directory = _cert_dir(directory)
    v = solvers.versions()
    sv = tuple((n, v[n] or "missing") for n in ("z3", "cvc5"))
    try:
        manifest, prog_file, data = _load(directory, HOPPER_FORMAT, HOPPER_MAX_BYTES)
    except _Refused as e:
        return _fail(str(e), sv)
    try:
        program = read_hopper_bytes(data)
    except HopperInputError as e:
        return _fail(f"{prog_file}: {e} (fix: {e.fix})", sv, prog_file)
    lags = manifest.get("ranking")
    roles = {r.name for r in program.roles}
    if not isinstance(lags, dict) or not all(k in roles and type(x) is int and abs(x) <= MAX_LAG
                                             for k, x in lags.items()):
        return _fail(f"{os.path.join(directory, MANIFEST)}: ranking: expected {{role: lag}} with roles of "
                     f"{PROGRAM} and integer lags in -{MAX_LAG}..{MAX_LAG}", sv, prog_file)
    persistent = manifest.get("persistent", False)
    if type(persistent) is not bool:
        return _fail(f"{os.path.join(directory, MANIFEST)}: persistent: expected true or false", sv, prog_file)
    problem_file = os.path.join(os.path.dirname(prog_file), PROBLEM)
    beside = os.path.dirname(os.path.abspath(prog_file)) != os.path.abspath(directory)
    declared = False
    pingpong = ""  # why the folder is a ping-pong kernel's (its carry is the CTA's running tile count)
    if beside and os.path.lexists(os.path.join(os.path.dirname(prog_file), "order")):
        # order/ beside the program: a ping-pong kernel's ring, whatever problem.yaml says (or when it is absent)
        pingpong = f"{os.path.join(os.path.dirname(prog_file), 'order')}/ is there"
    if beside and os.path.lexists(problem_file):
        # the folder's own problem.yaml decides too: a certificate that leaves out the carry of a
        # persistent or ping-pong kernel (or the cluster classes of a cluster kernel) fails, one that adds them is
        # checked
        try:
            design = read_design(read_regular(problem_file, MAX_FLAG_BYTES), problem_file)
            if design.pingpong:
                line = design.lines.get("pingpong")
                pingpong = f"{problem_file}{'' if line is None else ':' + str(line)} says pingpong: true"
            persistent = design.walks_tiles or persistent
            shape = design.cluster
            declared = shape in ("2x1", "1x2")
            if shape == "1x1" and is_cluster_program(program):  # the folder's kernel is one CTA per tile
                return _fail(f"{problem_file}: declares no cluster (cluster: 1x1, or no cluster: key), but {prog_file} "
                             "is a thread-block cluster program (it multicasts or holds a cluster barrier): the folder "
                             "does not describe its program (fix: re-run 'synth solve'; a cluster folder says "
                             "cluster: 2x1 or 1x2)", sv, prog_file)
        except FlagError as e:
            return _fail(f"{e} (fix: {e.fix})", sv, prog_file)
        except (OSError, ValueError) as e:
            return _fail(f"{problem_file}: {getattr(e, 'strerror', None) or e}", sv, prog_file)
    persistent = persistent or bool(pingpong)
    cluster_bad = _cluster_verdict(manifest, data, program, declared, os.path.join(directory, MANIFEST))
    if cluster_bad:  # decided from the bytes alone: no solver is asked
        return CertifyResult(False, (), (f"certificate FAILED: {prog_file} is a thread-block cluster program and its "
                                         "cluster classes are not certified",) + tuple(cluster_bad), sv, prog_file)
    try:
        derived = derive_hopper(program, dict(lags)) + (derive_carry(program) if persistent else [])
    except (ValueError, RecursionError) as e:
        return _fail(f"{prog_file}: program outside the checker's bounds: {e}", sv, prog_file)
    left = None if time_limit is None else time_limit - (time.monotonic() - t0)
    res = _compare_and_ask(directory, manifest, derived, prog_file, sv, timeout_s, left)
    if pingpong and not any(f.kind == "carry" and f.file for f in res.files):
        res = CertifyResult(False, res.files, res.messages + (
            f"{pingpong}: a ping-pong kernel's ring, whose two consumer warp groups index it by the CTA's running "
            "tile count, so its certificate holds the carry obligations (docs/hopper_pingpong.md, \"What is "
            "proved\", 4); this one leaves them out (written before ping-pong certificates held them?) (fix: "
            "re-run 'synth solve')",), res.solvers, res.program)
    if manifest.get("cluster"):
        res = CertifyResult(res.ok, res.files, res.messages + (f"cluster classes: {len(manifest['cluster'])} checks "
                                                               "of cluster_form, init_visible, safe_exit hold",),
                            res.solvers, res.program)
    claims = [(r.name, k) for r in program.roles for k, w in enumerate(r.waits) if w.claimed_tight is True]
    if not res.ok or not claims:
        return res
    left = None if time_limit is None else time_limit - (time.monotonic() - t0)
    if left is not None and left <= 0:
        bad = [f"wait_group #{k} of {r} claims \"tight\": true, which was not tested within the time limit"
               for r, k in claims]
    else:
        waits = wgmma_tightness(program, timeout_s if left is None else max(0.05, min(timeout_s, left)))
        bad = [f"the file claims \"tight\": true, but {w.reason}" for w in waits if not w.ok]
    if not bad:
        return res
    head = res.messages[0].replace("certificate OK", "certificate FAILED", 1)
    return CertifyResult(False, res.files, (head,) + res.messages[1:] + tuple(bad), res.solvers, res.program)


def certify_attention(directory: str, *, timeout_s: float = 60.0,
                      time_limit: Optional[float] = None) -> CertifyResult:
    """Check the certificate of an attention program in ``directory`` (``OUT/certificate/``; ``OUT/`` also
    accepted; format :data:`~synth.trusted.attention.FORMAT`): as :func:`certify_hopper`, with the obligations of
    :func:`synth.trusted.attention.derive_attention` (the barrier program's under the manifest's ``ranking``, a
    hint with lags in ``-MAX_LAG .. MAX_LAG``; each consumer's ``register`` class; the ``once`` class), every one
    derived from ``program.json``'s bytes alone (trip counts from 0). The manifest's ``hops`` and ``registers``, when
    given, must be what the checker derives."""
    t0 = time.monotonic()
    directory = _cert_dir(directory)
    v = solvers.versions()
    sv = tuple((n, v[n] or "missing") for n in ("z3", "cvc5"))
    try:
        manifest, prog_file, data = _load(directory, ATTENTION_FORMAT, HOPPER_MAX_BYTES)
    except _Refused as e:
        return _fail(str(e), sv)
    try:
        a = read_attention_bytes(data)
    except (HopperInputError, InputError, AttentionInputError) as e:
        fix = getattr(e, "fix", "")
        return _fail(f"{prog_file}: {e}" + (f" (fix: {fix})" if fix else ""), sv, prog_file)
    where = os.path.join(directory, MANIFEST)
    lags = manifest.get("ranking")
    roles = {r.name for r in a.program.roles}
    if not isinstance(lags, dict) or not all(k in roles and type(x) is int and abs(x) <= MAX_LAG
                                             for k, x in lags.items()):
        return _fail(f"{where}: ranking: expected {{role: lag}} with roles of {PROGRAM} and integer lags in "
                     f"-{MAX_LAG}..{MAX_LAG}", sv, prog_file)
    for key, want in (("hops", a.hops), ("registers", list(a.registers))):
        if key in manifest and manifest[key] != want:
            return _fail(f"{where}: {key} is {json.dumps(manifest[key])[:80]}, but {PROGRAM} gives {json.dumps(want)} "
                         "(the checker derives it: re-run 'synth certify' on the folder to write a current "
                         "certificate)", sv, prog_file)
    try:
        derived = derive_attention(a, dict(lags))
    except (ValueError, RecursionError) as e:
        return _fail(f"{prog_file}: program outside the checker's bounds: {e}", sv, prog_file)
    left = None if time_limit is None else time_limit - (time.monotonic() - t0)
    res = _compare_and_ask(directory, manifest, derived, prog_file, sv, timeout_s, left)
    classes: dict = {}
    for f in res.files:
        k = f.kind if f.kind in ("register", "once") else "barrier"
        held, asked = classes.get(k, (0, 0))
        classes[k] = (held + f.ok, asked + 1)
    line = ("attention program, every n >= 0: " + ", ".join(f"{k} {h}/{n}" for k, (h, n) in classes.items())
            + f" (barrier program with {a.hops} barrier hop{'s' if a.hops != 1 else ''}; registers "
            f"{', '.join(a.registers)})")
    return CertifyResult(res.ok, res.files, res.messages[:1] + (line,) + res.messages[1:], res.solvers, res.program)


def _compare_and_ask(directory: str, manifest: dict, derived: list, prog_file: str, sv, timeout_s: float,
                     time_limit: Optional[float]) -> CertifyResult:
    """Compare the manifest's entries and files with ``derived`` (objects with ``id``, ``kind``,
    ``smt2``, ``description`` and for cp.async ``wait``), then ask Z3 and cvc5 each matching file."""
    t0 = time.monotonic()
    messages: list[str] = []
    files: list[CertifyFile] = []
    listed: dict = {}
    ids = {o.id for o in derived}
    for e in manifest["obligations"]:
        oid = e["id"]
        if oid in listed:
            messages.append(f"obligation {oid[:200]} is listed twice in the manifest")
        listed[oid] = e
    for oid in listed:
        if oid not in ids:
            messages.append(f"the manifest lists obligation {oid[:200]}, which {PROGRAM} does not give")
    for ob in derived:
        ob_wait = getattr(ob, "wait", None)
        e = listed.get(ob.id)
        if e is None:
            files.append(CertifyFile(ob.id, None, ob.kind, ob_wait, "-", "-", False, False,
                                     f"obligation {ob.id} ({ob.kind}) of {PROGRAM} is missing from the manifest"))
            continue
        name = e["file"]
        wait = e.get("wait")
        # null for an obligation charged to no wait, else {"index": n, ...}: {} or a bare number is wrong
        windex = (wait["index"] if "index" in wait else "no index") if isinstance(wait, dict) else \
            (wait if wait is None else f"{str(wait)[:20]} (not an object)")
        problem = ""
        text = b""
        if os.path.basename(name) != name or not name.endswith(".smt2") or name.startswith("."):
            problem = f"file name {name[:80]!r} is not a .smt2 file of the folder"
        else:
            try:
                text = read_regular(os.path.join(directory, name), max(MAX_BYTES, HOPPER_MAX_BYTES))
            except FileNotFoundError:
                problem = "file missing"
            except (OSError, ValueError) as err:
                problem = f"file unreadable: {getattr(err, 'strerror', None) or err}"
        want = ob.smt2.encode("utf-8")
        if not problem and text != want:
            problem = f"not obligation {ob.id} as derived from {PROGRAM} ({_first_diff(text, want)})"
        if not problem and e["sha256"] != sha256(want):
            problem = "the manifest's sha256 is not the file's"
        if not problem and (windex != ob_wait or e["kind"] != ob.kind):
            problem = (f"manifest entry {ob.id} says kind {e['kind'][:40]!r}, wait {str(windex)[:20]}; {PROGRAM} "
                       f"gives kind {ob.kind!r}, wait {ob_wait}")
        if problem:
            files.append(CertifyFile(ob.id, name, ob.kind, ob_wait, "-", "-", False, False, problem))
            continue
        left = None if time_limit is None else time_limit - (time.monotonic() - t0)
        if left is not None and left <= 0.01:
            files.append(CertifyFile(ob.id, name, ob.kind, ob_wait, "unknown", "unknown", True, False,
                                     "unknown: not asked, the time limit ran out (pass a larger --time-limit)"))
            continue
        per = timeout_s if left is None else max(0.01, min(timeout_s, left / 2))
        rz = solvers.z3_answer(ob.smt2, per)
        rc = solvers.cvc5_answer(ob.smt2, per)
        ok = rz == "unsat" and rc == "unsat"
        msg = "" if ok else (f"{ob.description}: a counterexample exists (sat)" if "sat" in (rz, rc)
                             else f"not proven unsat ({_why(rz, rc)})")
        files.append(CertifyFile(ob.id, name, ob.kind, ob_wait, rz, rc, True, ok, msg))
    missing = solvers.missing()
    if missing:
        messages.append(f"missing solver(s): {', '.join(missing)}; certify needs both Z3 and cvc5")
    try:
        names = {e["file"] for e in listed.values()}
        extra = sorted(f for f in os.listdir(directory) if f.endswith(".smt2") and f not in names)
    except OSError:
        extra = []
    if extra:
        messages.append(f"files not in the manifest (ignored): {', '.join(extra[:20])}")
    ok = bool(files) and all(f.ok for f in files) and not missing and not any(
        m.startswith(("the manifest lists", "obligation ")) for m in messages)
    head = (f"certificate {'OK' if ok else 'FAILED'}: {sum(f.ok for f in files)}/{len(derived)} obligations of "
            f"{prog_file} re-derived and unsat with " + " and ".join(f"{n} {ver}" for n, ver in sv)
            + " (every obligation the checker derives on its own, including those the prover settles from the "
            "program's structure)")
    failed = [f"{f.file or f.id}: {f.message}" + (f" (z3 {f.z3}, cvc5 {f.cvc5})" if f.hash_ok else "")
              for f in files if not f.ok]
    return CertifyResult(ok, tuple(files), tuple([head] + failed + messages), sv, prog_file)


def _why(rz: str, rc: str) -> str:
    if "unknown" in (rz, rc):
        return "a solver answered unknown: it ran out of time or gave up"
    return "a solver could not answer"


def _first_diff(got: bytes, want: bytes) -> str:
    a, b = got.decode("utf-8", "replace").splitlines(), want.decode("utf-8", "replace").splitlines()
    for n, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {n} differs: {x[:60]!r}"
    return f"{len(a)} lines instead of {len(b)}"

"""Certificates of Hopper programs: one SMT-LIB2 file per obligation, bound to ``program.json``.

:func:`write_hopper_certificate` writes ``program.json`` (the Hopper program), one file per
obligation that the trusted checker derives from that file's bytes
(:func:`synth.trusted.hopper.derive_hopper`, the negation: expected ``unsat``) and
``manifest.json``::

    {"format": "synth-certificate-hopper/4", "program", "program_sha256", "trip_count",
     "min_trip_count", "ranking": {role: lag}, "persistent": bool, "cluster": [check id, ...],
     "solvers": {"z3", "cvc5"},
     "obligations": [{"id", "file", "kind", "description", "expected": "unsat",
                      "result": {"z3", "cvc5"}, "sha256"}]}

The files are the trusted checker's, not synth's prover's (as for ``cp.async`` certificates):
the writer runs :func:`synth.trusted.hopper.check_hopper_program` on the bytes, which finds the
deadlock ranking (``ranking``) and answers every obligation with Z3 and cvc5, and writes nothing
unless it proves every one. A persistent kernel's certificate (``"persistent": true``: the output
folder's ``problem.yaml`` says ``persistent: true``, or ``pingpong: true``, which implies it, or ``order/`` is
beside its ``program.json``: :func:`persistent_flag`) also holds the ``carry`` obligations of
:func:`synth.trusted.hopper.derive_carry` (docs/hopper.md, "Persistent tiles"). A thread-block cluster
program's (:func:`synth.trusted.certify.is_cluster_program` of the bytes, or ``cluster: 2x1`` / ``1x2`` in the
folder's ``problem.yaml``) lists its cluster checks in ``cluster`` (the ids of
:func:`synth.trusted.cluster.check_cluster_bytes`, every one holding; docs/hopper_cluster.md); ``[]`` for one
CTA.

:func:`certify_hopper` is :func:`synth.trusted.certify.certify_hopper`: it takes
``OUT/program.json`` when the certificate sits in an output folder (else the copy inside it),
checks its sha256, re-derives every obligation from those bytes alone under the manifest's
ranking, compares them byte for byte with the files (an obligation missing, added, edited or
replaced by another text with its hash recomputed fails, naming it) and asks Z3 and cvc5 each
(docs/trust.md, "Certificates").
"""

from __future__ import annotations

import json
import os
import re
from typing import Optional

from ..errors import Loc, SynthError
from ..hopper.ir import dumps
from ..trusted import certify as trusted_certify
from ..trusted import solvers
from ..trusted.certify import MANIFEST, PROGRAM, CertifyResult, sha256
from ..trusted.hopper import MAX_FLAG_BYTES, check_hopper_program, derive_carry, derive_hopper, read_carry_flag
from ..trusted.cluster import check_cluster_bytes
from ..trusted.flags import FlagError, read_cluster_flag
from ..trusted.hopper_program import HopperInputError, read_hopper_bytes
from ..trusted.program import read_regular
from .phases import HopperReport

FORMAT = trusted_certify.HOPPER_FORMAT


def _file_name(n: int, oid: str) -> str:
    return f"{n:03d}-" + re.sub(r"[^A-Za-z0-9_.]+", "-", oid.replace("<-", "-from-")).strip("-") + ".smt2"


def _folder_key(directory: str, reader, key: str):
    """The value ``reader`` (a trusted reader: ``(bytes, path) -> value``) finds in the ``problem.yaml`` of the
    output folder holding the certificate folder ``directory`` when a ``program.json`` sits beside it too (as
    ``synth certify`` reads it), else None. :class:`~synth.errors.SynthError` (``problem.yaml``, the line, the fix;
    exit status 2) when the reader refuses ``key``: the certificate would not certify."""
    parent = os.path.dirname(os.path.abspath(directory))
    path = os.path.join(parent, trusted_certify.PROBLEM)
    if not (os.path.lexists(path) and os.path.lexists(os.path.join(parent, PROGRAM))):
        return None
    try:
        return reader(read_regular(path, MAX_FLAG_BYTES), path)
    except (HopperInputError, FlagError) as e:
        line = str(getattr(e, "path", None) or getattr(e, "where", "")).rpartition(":")[2]
        raise SynthError(Loc(trusted_certify.PROBLEM, int(line) if line.isdigit() else 0, 1),
                         f"{e.msg}: the certificate's checker (synth certify) reads the {key} with its own "
                         "reader", e.fix) from None
    except OSError as e:
        raise SynthError(Loc(path), f"cannot read: {e.strerror or e}", "write the output folder again") from None


def persistent_flag(directory: str) -> bool:
    """Whether the output folder holding the certificate folder ``directory`` runs one ring over a persistent CTA's
    tiles (its certificate holds the carry), as ``synth certify`` decides it: ``persistent: true`` or
    ``pingpong: true`` in its ``problem.yaml`` (:func:`synth.trusted.hopper.read_carry_flag`, see
    :func:`_folder_key`), or an ``order/`` folder beside its ``program.json`` (a ping-pong kernel's)."""
    parent = os.path.dirname(os.path.abspath(directory))
    if os.path.lexists(os.path.join(parent, PROGRAM)) and os.path.lexists(os.path.join(parent, "order")):
        return True
    return bool(_folder_key(directory, read_carry_flag, "persistent flag"))


def cluster_flag(directory: str) -> bool:
    """Whether the output folder holding the certificate folder ``directory`` declares a thread-block cluster
    (``cluster: 2x1`` or ``1x2`` in its ``problem.yaml``, read by :func:`synth.trusted.flags.read_cluster_flag`),
    see :func:`_folder_key`."""
    return _folder_key(directory, read_cluster_flag, "cluster key") in ("2x1", "1x2")


def write_hopper_certificate(report: HopperReport, directory: str, *, cvc5_check: bool = True,
                             timeout_s: float = 60.0, persistent: Optional[bool] = None,
                             cluster: Optional[bool] = None) -> None:
    """Write the certificate of a proven Hopper report into ``directory``.

    ValueError (nothing written) when ``report`` is not proven, or when the trusted checker does
    not prove every obligation it derives from the program's bytes (the message names the
    first that fails). ``cvc5_check`` is accepted for the ``cp.async`` writer's signature: the
    trusted check always asks both solvers. ``timeout_s`` bounds each solver call.
    ``persistent`` (the kernel walks tiles: the certificate adds the ``carry`` obligations of
    :func:`synth.trusted.hopper.derive_carry` and the manifest says ``"persistent": true``); None:
    :func:`persistent_flag` of ``directory`` (the flag ``synth certify`` reads). ``cluster`` (the cluster
    classes go in too; ValueError when the independent checker refutes one); None: the program's bytes say so
    (:func:`synth.trusted.certify.is_cluster_program`) or :func:`cluster_flag` of ``directory``."""
    if not report.ok:
        raise ValueError(f"{report.program.name}: not every obligation is proven; no certificate")
    if persistent is None:
        persistent = persistent_flag(directory)
    p = report.program
    data = dumps(p).encode("utf-8")
    hp = read_hopper_bytes(data)
    if cluster is None:
        cluster = trusted_certify.is_cluster_program(hp) or cluster_flag(directory)
    checks = ()
    if cluster:  # decided from the bytes, before any solver runs
        ok, checks, msgs = check_cluster_bytes(data)
        if not ok:
            raise ValueError(f"{p.name}: the trusted checker refutes a cluster class; no certificate:\n"
                             + "\n".join(msgs))
    check = check_hopper_program(data, timeout_s=timeout_s, tightness=False,
                                 **({"persistent": True} if persistent else {}))
    if not check.ok:
        raise ValueError(f"{p.name}: the trusted checker does not prove it; no certificate:\n{check.render()}")
    lags = dict(check.lags)
    answers = {c.id: {"z3": c.z3, "cvc5": c.cvc5} for c in check.obligations}
    derived = derive_hopper(hp, lags) + (derive_carry(hp) if persistent else [])
    os.makedirs(directory, exist_ok=True)
    entries = []
    for n, ob in enumerate(derived):
        name = _file_name(n, ob.id)
        raw = ob.smt2.encode("utf-8")
        with open(os.path.join(directory, name), "wb") as fh:
            fh.write(raw)
        entries.append({"id": ob.id, "file": name, "kind": ob.kind, "description": ob.description,
                        "expected": "unsat", "result": answers.get(ob.id), "sha256": sha256(raw)})
    with open(os.path.join(directory, PROGRAM), "wb") as fh:
        fh.write(data)
    manifest = {"format": FORMAT, "program": p.name, "program_sha256": sha256(data), "trip_count": p.trip_count,
                "min_trip_count": p.min_trip_count, "ranking": lags, "persistent": persistent,
                "cluster": [c.id for c in checks],
                "solvers": solvers.versions(),
                "obligations": entries}
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")


def is_hopper_certificate(directory: str) -> bool:
    """Whether ``directory`` (or its ``certificate/``) holds a Hopper certificate's manifest (any
    ``synth-certificate-hopper/`` version, so that an old one is refused by name). Reads only a
    regular file, bounded; False when none can be read."""
    for d in (directory, os.path.join(directory, "certificate")):
        try:
            fmt = trusted_certify.read_manifest(os.path.join(d, MANIFEST)).get("format")
        except (OSError, ValueError):
            continue
        return isinstance(fmt, str) and fmt.startswith("synth-certificate-hopper/")
    return False


def certify_hopper(directory: str, *, timeout_s: float = 60.0) -> CertifyResult:
    """Re-check a Hopper certificate folder (or the folder holding ``certificate/``) with the
    trusted checker; ``timeout_s`` bounds the whole check (each solver call gets what is left)."""
    return trusted_certify.certify_hopper(directory, timeout_s=timeout_s, time_limit=timeout_s)


__all__ = ["write_hopper_certificate", "certify_hopper", "is_hopper_certificate", "persistent_flag", "cluster_flag",
           "FORMAT"]

"""Fuzz target: the certificate folder form (``synth certify`` through :func:`synth.api.certify`).

One ``cp.async`` and one Hopper output folder are certified per module; each example copies one
and tampers with it: a manifest value replaced, dropped or added anywhere (entries included), an
obligation file replaced by ``(assert false)``, its first inequality flipped, truncated or
appended to (with its sha256 recomputed in the manifest or not), ``program.json`` edited inside or
beside the certificate (its hash recomputed or not), or a file replaced by a FIFO, a link to
``/dev/zero``, a folder or JSON nested 100,000 deep. ``certify`` must answer within a time bound
without raising, and answer OK only where the edit is to a field it documents as informational
(``description``, ``result``, ``solvers``, ...) or leaves the bytes it checks unchanged.
A few examples by default; ``SYNTH_HYPOTHESIS=explore`` runs many more.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import bounded, json_paths

ROOT = pathlib.Path(__file__).resolve().parents[2]
LISTING = ROOT / "tests" / "rfc_listings" / "rfc0077-two-stage.json"
EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
SECONDS = 60.0
INFORMATIONAL = {"description", "result", "solvers", "program", "trip_count", "min_trip_count", "expected", "z3",
                 "cvc5", "in_flight", "part", "queue", "before"}
"""Manifest keys certify does not rely on (the certificate's program and files are what it checks)."""
VALUES = [-1, 0, 1, 10 ** 9, "x", "", None, True, [], {}, [[[[[[[[[[]]]]]]]]]], {"id": 1}, "../program.json",
          "manifest.json", "000-x.smt2"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    from synth.hopper.loop import HopperLoop, Load
    from synth.lower.barriers import lower_hopper
    from synth.verify import load_program, verify_program, write_certificate
    from synth.verify.certificate_phases import write_hopper_certificate
    from synth.verify.phases import verify_hopper

    tmp = tmp_path_factory.mktemp("certs")
    cp = tmp / "cp"
    write_certificate(verify_program(load_program(str(LISTING)), tightness=False), str(cp / "certificate"))
    hop = tmp / "hopper"
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 2, 1))
    write_hopper_certificate(verify_hopper(p, time_limit=20, tightness=False), str(hop / "certificate"))
    for out in (cp, hop):
        shutil.copy(out / "certificate" / "program.json", out / "program.json")
    return {"cp.async": cp, "hopper": hop}


def _rehash_program(out: pathlib.Path, data: bytes) -> None:
    m = out / "certificate" / "manifest.json"
    man = json.loads(m.read_text())
    man["program_sha256"] = hashlib.sha256(data).hexdigest()
    m.write_text(json.dumps(man, indent=2))


def tamper(data, out: pathlib.Path) -> tuple[str, bool]:
    """Apply one drawn edit to ``out``; ``(what, informational)``: whether certify may still answer OK."""
    cert = out / "certificate"
    man = json.loads((cert / "manifest.json").read_text())
    kind = data.draw(st.sampled_from(["manifest"] * 4 + ["file"] * 3 + ["program"] * 2 + ["special"]))
    if kind == "manifest":
        path = data.draw(st.sampled_from(list(json_paths(man))))
        node = man
        for k in path[:-1]:
            node = node[k]
        how = data.draw(st.sampled_from(["set", "set", "drop", "add"]))
        if how == "drop":
            del node[path[-1]]
        elif how == "add" and isinstance(node, list):
            node.append(data.draw(st.sampled_from(VALUES)))
        elif how == "add" and isinstance(node, dict):
            node["extra"] = data.draw(st.sampled_from(VALUES))
        else:
            node[path[-1]] = data.draw(st.sampled_from(VALUES))
        (cert / "manifest.json").write_text(json.dumps(man, indent=2))
        keys = {k for k in path if isinstance(k, str)}
        return f"manifest {how} {'.'.join(map(str, path))}", bool(keys & INFORMATIONAL) or (
            how == "add" and isinstance(node, dict) and path[-1] != "obligations")
    if kind == "file":
        e = data.draw(st.sampled_from(man["obligations"]))
        f = cert / e["file"]
        text = f.read_text()
        how = data.draw(st.sampled_from(["false", "flip", "truncate", "append"]))
        new = {"false": "(set-logic ALL)\n(assert false)\n(check-sat)\n", "flip": text.replace("(< ", "(>= ", 1),
               "truncate": text[:len(text) // 2], "append": text + "(assert false)\n"}[how]
        f.write_text(new)
        if data.draw(st.booleans()):
            e["sha256"] = hashlib.sha256(new.encode()).hexdigest()
            (cert / "manifest.json").write_text(json.dumps(man, indent=2))
        return f"file {how}", new == text
    if kind == "program":
        where = data.draw(st.sampled_from([out / "program.json", cert / "program.json"]))
        doc = json.loads(where.read_text())
        paths = list(json_paths(doc))
        path = data.draw(st.sampled_from(paths))
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = data.draw(st.sampled_from([0, -1, 99, 10 ** 9, "i + 1", None, "x"]))
        raw = json.dumps(doc, indent=2).encode()
        where.write_bytes(raw)
        if data.draw(st.booleans()):
            _rehash_program(out, raw)
        # the copy inside is ignored when OUT/program.json stands beside the certificate
        return f"program {where.parent.name}/{where.name}", where.parent.name == "certificate"
    target = data.draw(st.sampled_from([cert / "manifest.json", cert / "program.json", out / "program.json",
                                        cert / man["obligations"][0]["file"]]))
    how = data.draw(st.sampled_from(["fifo", "zero", "folder", "deep"]))
    target.unlink()
    if how == "fifo":
        os.mkfifo(target)
    elif how == "zero":
        target.symlink_to("/dev/zero")
    elif how == "folder":
        target.mkdir()
    else:
        target.write_text("[" * 100_000 + "]" * 100_000)
    return f"special {how} {target.name}", target == cert / "program.json"


@settings(max_examples=int(os.environ.get("SYNTH_FUZZ_EXAMPLES", 300)) if EXPLORE else 10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_tampered_certificate(folders, tmp_path_factory, data):
    from synth import api

    form = data.draw(st.sampled_from(sorted(folders)))
    out = tmp_path_factory.mktemp("t") / "out"
    shutil.copytree(folders[form], out, symlinks=True)
    what, informational = tamper(data, out)
    with bounded(SECONDS, f"certify after {what}"):
        res = api.certify(str(out), time_limit=30)
    assert res.messages and res.messages[0].startswith("certificate "), res.messages
    assert not res.ok or informational, f"{form}: certificate OK after {what}"
    event(f"{form}: {'OK' if res.ok else 'FAILED'}")
    event(f"{what.split(' ')[0]}: {'OK' if res.ok else 'FAILED'}")

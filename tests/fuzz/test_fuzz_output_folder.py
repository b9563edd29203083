"""Fuzz target: tampered output folders (``synth emit`` / ``synth verify`` in-process, ``synth.kernel.load``).

One GEMM folder is solved per module; each example copies it and tampers with one
file (a JSON value replaced or dropped anywhere in ``schedule.json`` or
``program.json``, a wait's ``in_flight`` made negative, nesting 100,000 deep, bytes
that are not UTF-8, truncation, the file replaced by a FIFO, a folder or a link to
``/dev/zero``), with the manifest's sha256 recomputed or not: every command answers
exit 0, 1 or 2 (the API: a result or a SynthError) within a time bound, with no
traceback. A few examples by default; ``SYNTH_HYPOTHESIS=explore`` runs many more.
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

from conftest import AT_ONCE_S
from synth.errors import SynthError
from tests.fuzz.harness import bounded, json_paths, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "problems" / "gemm-128x128x32-f16.yaml"
EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
SECONDS = 120.0
"""Time bound of one command on a tampered folder (verify proves in a few seconds)."""
MANIFEST = ".synth-output.json"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("solved") / "out"
    rc, _, err = run_cli(["solve", str(PROBLEM), "-o", str(out)], seconds=300)
    assert rc == 0, err
    return out


VALUES = [-1, 0, 1, 10**9, 10**30, -(10**18), 1.5, float("1e308"), "x", "", "i % 3", "T - i", "i + 1000000000",
          "(" * 40 + "1" + ")" * 40, None, True, [], {}, [[[[[]]]]]]


def _edit_json(draw, doc):
    paths = list(json_paths(doc))
    waits = [p for p in paths if len(p) == 3 and p[0] == "waits" and p[2] == "in_flight"]
    if waits and draw(st.integers(0, 3)) == 0:
        p, value, drop = draw(st.sampled_from(waits)), draw(st.sampled_from([-1, -5, 10**6, "i - 100"])), False
    else:
        p, value, drop = draw(st.sampled_from(paths)), draw(st.sampled_from(VALUES)), draw(st.integers(0, 5)) == 0
    node = doc
    for k in p[:-1]:
        node = node[k]
    if drop:
        del node[p[-1]]
    else:
        node[p[-1]] = value
    return json.dumps(doc, indent=2).encode()


@st.composite
def tampering(draw, files: dict):
    name = draw(st.sampled_from(["schedule.json", "program.json", "problem.yaml", MANIFEST]))
    kind = draw(st.sampled_from(["edit", "edit", "edit", "deep", "bytes", "truncate", "fifo", "folder", "zero",
                                 "scalar"]))
    data = files[name]
    if kind == "edit" and name.endswith(".json"):
        data = _edit_json(draw, json.loads(data))
    elif kind == "deep":
        data = b"[" * 100_000 + b"]" * 100_000
    elif kind == "bytes":
        i = draw(st.integers(0, len(data)))
        data = data[:i] + b"\xff\xfe" + data[i:]
    elif kind == "truncate":
        data = data[:draw(st.integers(0, len(data)))]
    elif kind == "scalar":
        data = draw(st.sampled_from([b"1", b"null", b"\"x\"", b"[]", b"{}", b"NaN"]))
    rehash = draw(st.booleans())
    command = draw(st.sampled_from(["emit-tvm", "emit-cuda", "load", "verify"] if EXPLORE else
                                   ["emit-tvm", "emit-cuda", "load"]))
    return name, kind, data, rehash, command


def _apply(out: pathlib.Path, name: str, kind: str, data: bytes, rehash: bool) -> None:
    target = out / name
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "zero":
        os.symlink("/dev/zero", target)
    else:
        target.write_bytes(data)
        if rehash and name != MANIFEST:
            man = json.loads((out / MANIFEST).read_text())
            if name in man.get("files", {}):
                man["files"][name] = hashlib.sha256(data).hexdigest()
                (out / MANIFEST).write_text(json.dumps(man, indent=1))


def _run(command: str, out: pathlib.Path) -> None:
    if command == "load":
        from synth.kernel import load

        with bounded(SECONDS, f"synth.kernel.load({out})"):
            try:
                load(str(out), backend="emulator")
            except SynthError:
                pass
        return
    argv = {"emit-tvm": ["emit", str(out), "--target", "tvm"], "emit-cuda": ["emit", str(out)],
            "verify": ["verify", str(out), "--time-limit", "30"]}[command]
    rc, _, err = run_cli(argv, SECONDS)
    assert rc in (0, 1, 2), (argv, rc, err[-3000:])
    assert "Traceback" not in err, (argv, err[-3000:])


@settings(max_examples=300 if EXPLORE else 10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_tampered_folder(folder, tmp_path_factory, data):
    files = {n: (folder / n).read_bytes() for n in ("schedule.json", "program.json", "problem.yaml", MANIFEST)}
    name, kind, content, rehash, command = data.draw(tampering(files))
    out = tmp_path_factory.mktemp("t") / "out"
    shutil.copytree(folder, out, symlinks=True)
    _apply(out, name, kind, content, rehash)
    event(f"{command} on {name} ({kind})")
    _run(command, out)


# ---- the classes the fuzzing found, one reproducer each -------------------------------------

def _tampered(folder, tmp_path, name: str, data: bytes, rehash: bool = True) -> pathlib.Path:
    out = tmp_path / "out"
    shutil.copytree(folder, out, symlinks=True)
    _apply(out, name, "edit", data, rehash)
    return out


def test_negative_in_flight_is_refused_when_read(folder, tmp_path):
    doc = json.loads((folder / "program.json").read_text())
    doc["waits"][0]["in_flight"] = -1
    out = _tampered(folder, tmp_path, "program.json", json.dumps(doc, indent=2).encode())
    rc, _, err = run_cli(["emit", str(out)], SECONDS)
    assert rc == 2 and "waits[0].in_flight is -1" in err and str(out / "program.json") in err, err
    from synth.kernel import load

    with pytest.raises(SynthError):
        load(str(out), backend="emulator")


@pytest.mark.parametrize("name, command", [("schedule.json", "emit"), ("program.json", "emit"),
                                           ("schedule.json", "verify"), ("program.json", "verify")])
def test_deep_json_is_a_located_error(folder, tmp_path, name, command):
    out = _tampered(folder, tmp_path, name, b"[" * 100_000 + b"]" * 100_000)
    rc, _, err = run_cli([command, str(out)], seconds=60)
    assert rc == 2 and "Traceback" not in err and name in err, err


def test_deep_manifest_is_a_synth_error(folder, tmp_path):
    out = _tampered(folder, tmp_path, MANIFEST, b"[" * 100_000 + b"]" * 100_000)
    from synth.kernel import load

    with pytest.raises(SynthError):
        load(str(out), backend="emulator")


def test_schedule_json_fifo_does_not_block(folder, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(folder, out, symlinks=True)
    _apply(out, "schedule.json", "fifo", b"", False)
    rc, _, err = run_cli(["emit", str(out), "--target", "tvm"], seconds=AT_ONCE_S)
    assert rc == 2 and "schedule.json" in err and "Traceback" not in err, err


@pytest.mark.parametrize("field, value", [("stage", "x"), ("stage", -1), ("order", 1.5), ("async", 1),
                                          ("queue", "0"), ("offset", 10**30)])
def test_schedule_fields_are_typed_when_read(folder, tmp_path, field, value):
    """An op field of schedule.json of the wrong type or range: exit 2 naming it (a string stage crashed
    emit with a TypeError; found by the output-folder fuzzing)."""
    doc = json.loads((folder / "schedule.json").read_text())
    doc["ops"][0][field] = value
    out = _tampered(folder, tmp_path, "schedule.json", json.dumps(doc, indent=2).encode())
    rc, _, err = run_cli(["emit", str(out), "--target", "tvm"], SECONDS)
    assert rc == 2 and f"ops[0].{field}" in err and "Traceback" not in err, err

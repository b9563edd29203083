"""Certificates: SMT-LIB2 files per obligation, re-checked by Z3 and cvc5 without synth."""

from __future__ import annotations

import functools
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from synth.verify import certify, load_program, verify_program, write_certificate
from synth.verify.certificate import check_cvc5, check_z3

LISTINGS = pathlib.Path(__file__).parent / "rfc_listings"


@functools.lru_cache(maxsize=None)
def report(name: str):
    return verify_program(load_program(str(LISTINGS / f"{name}.json")), tightness=False)


@pytest.fixture(scope="module")
def two_stage_cert(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("cert") / "certificate"
    write_certificate(report("rfc0077-two-stage"), str(d))
    return d


def test_manifest_describes_every_obligation(two_stage_cert: pathlib.Path) -> None:
    r = report("rfc0077-two-stage")
    m = json.loads((two_stage_cert / "manifest.json").read_text())
    assert m["format"] == "synth-certificate/1" and m["program"] == "rfc0077-two-stage"
    assert m["solvers"]["z3"] and m["solvers"]["cvc5"]
    assert len(m["obligations"]) == len(r.obligations)
    kinds = {e["kind"] for e in m["obligations"]}
    assert {"raw", "waw", "count-nonnegative", "wellformed"} <= kinds
    for e in m["obligations"]:
        f = two_stage_cert / e["file"]
        assert f.exists() and e["expected"] == "unsat"
        assert e["result"] == {"z3": "unsat", "cvc5": "unsat"}
        text = f.read_text()
        assert "(check-sat)" in text and "(assert" in text and "(set-logic ALL)" in text
        if e["kind"] == "raw":
            assert "(declare-fun j () Int)" in text
        if e["kind"] in ("raw", "count-nonnegative"):
            assert e["wait"]["index"] in (0, 1)
            assert set(e["wait"]) == {"index", "part", "queue", "before", "in_flight"}
    raw = [e for e in m["obligations"] if e["kind"] == "raw"]
    assert {e["wait"]["part"] for e in raw} == {"body", "epilogue"}


def test_certify_passes_with_both_solvers(two_stage_cert: pathlib.Path) -> None:
    res = certify(str(two_stage_cert))
    assert res.ok, res.render()
    assert all(f.z3 == "unsat" and f.cvc5 == "unsat" and f.hash_ok for f in res.files)
    assert dict(res.solvers).keys() == {"z3", "cvc5"}


def test_tampered_file_fails(two_stage_cert: pathlib.Path, tmp_path: pathlib.Path) -> None:
    d = tmp_path / "cert"
    shutil.copytree(two_stage_cert, d)
    m = json.loads((d / "manifest.json").read_text())
    f = d / m["obligations"][-1]["file"]
    f.write_text(f.read_text().replace("(check-sat)", "(assert false)\n(check-sat)"))  # now trivially unsat
    res = certify(str(d))
    assert not res.ok
    bad = [x for x in res.files if not x.ok]
    assert len(bad) == 1 and not bad[0].hash_ok and "sha256" in bad[0].message


def test_missing_file_fails(two_stage_cert: pathlib.Path, tmp_path: pathlib.Path) -> None:
    d = tmp_path / "cert"
    shutil.copytree(two_stage_cert, d)
    m = json.loads((d / "manifest.json").read_text())
    (d / m["obligations"][0]["file"]).unlink()
    assert not certify(str(d)).ok


def test_refuted_obligation_fails_certification(tmp_path: pathlib.Path) -> None:
    r = report("rfc0077-where-to-wait")
    d = tmp_path / "cert"
    write_certificate(r, str(d))
    m = json.loads((d / "manifest.json").read_text())
    sat = [e for e in m["obligations"] if e["result"]["z3"] == "sat"]
    assert sat and all(e["result"]["cvc5"] == "sat" for e in sat)
    res = certify(str(d))
    assert not res.ok
    failed = [f for f in res.files if not f.ok]
    assert [f.id for f in failed] == [e["id"] for e in sat]
    assert all(f.hash_ok and f.z3 == "sat" and f.cvc5 == "sat" for f in failed)
    assert "FAILED" in res.render()


def test_no_manifest(tmp_path: pathlib.Path) -> None:
    res = certify(str(tmp_path))
    assert not res.ok and "no manifest" in res.messages[0]


def test_messages_name_failed_files(two_stage_cert: pathlib.Path, tmp_path: pathlib.Path) -> None:
    d = tmp_path / "cert"
    shutil.copytree(two_stage_cert, d)
    m = json.loads((d / "manifest.json").read_text())
    name = m["obligations"][3]["file"]
    (d / name).write_text("(check-sat)\n")
    res = certify(str(d))
    assert res.messages[0].startswith("certificate FAILED:")
    assert any(name in msg and "sha256" in msg for msg in res.messages[1:])
    ok = certify(str(two_stage_cert))
    assert ok.messages[0].startswith("certificate OK:") and len(ok.messages) == 1


def test_certify_needs_nothing_of_synth(two_stage_cert: pathlib.Path) -> None:
    """Run certify's module in a fresh interpreter that cannot import synth's other modules."""
    src = pathlib.Path(__file__).resolve().parent.parent / "synth" / "verify" / "certificate.py"
    code = (
        "import importlib.util, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'synth' or name.startswith('synth.'):\n"
        "            raise ImportError('synth is not allowed here: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"spec = importlib.util.spec_from_file_location('cert', {str(src)!r})\n"
        "mod = importlib.util.module_from_spec(spec); sys.modules['cert'] = mod; spec.loader.exec_module(mod)\n"
        f"r = mod.certify({str(two_stage_cert)!r})\n"
        "print('OK' if r.ok else 'FAIL')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "OK", out.stderr


def test_solvers_agree_on_each_file_of_a_larger_program(tmp_path: pathlib.Path) -> None:
    r = report("rfc0077-three-stage-3-slots")
    for o in r.obligations:
        assert check_z3(o.smt2) == "unsat", o.id
        assert check_cvc5(o.smt2) == "unsat", o.id


def test_symbolic_trip_count_certificate(tmp_path: pathlib.Path) -> None:
    r = verify_program(load_program(str(LISTINGS / "predicated-opaque.json")), tightness=False)
    write_certificate(r, str(tmp_path / "c"))
    assert certify(str(tmp_path / "c")).ok

"""Certificates: the trusted checker's SMT-LIB2 files, bound to program.json, re-checked by Z3 and cvc5."""

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
    m = json.loads((two_stage_cert / "manifest.json").read_text())
    assert m["format"] == "synth-certificate/2" and m["program"] == "rfc0077-two-stage"
    assert len(m["program_sha256"]) == 64 and (two_stage_cert / "program.json").is_file()
    assert m["solvers"]["z3"] and m["solvers"]["cvc5"]
    kinds = {e["kind"] for e in m["obligations"]}
    assert {"raw", "waw", "count-nonnegative", "wellformed", "coverage"} <= kinds
    for e in m["obligations"]:
        text = (two_stage_cert / e["file"]).read_text()
        assert e["expected"] == "unsat" and e["result"] == {"z3": "unsat", "cvc5": "unsat"}
        assert "(check-sat)" in text and "(set-logic ALL)" in text and "(declare-const j Int)" in text
        if e["kind"] in ("raw", "count-nonnegative"):
            assert set(e["wait"]) == {"index", "part", "queue", "before", "in_flight"}
    raw = [e for e in m["obligations"] if e["kind"] == "raw"]
    assert {e["wait"]["part"] for e in raw} == {"body", "epilogue"}


def test_certify_passes_with_both_solvers(two_stage_cert: pathlib.Path) -> None:
    res = certify(str(two_stage_cert))
    assert res.ok, res.render()
    assert all(f.z3 == "unsat" and f.cvc5 == "unsat" and f.hash_ok for f in res.files)
    assert dict(res.solvers).keys() == {"z3", "cvc5"}
    assert res.messages[0].startswith("certificate OK:") and len(res.messages) == 1


def _copy(src: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    d = tmp / "certificate"
    shutil.copytree(src, d)
    return d


def _manifest(d: pathlib.Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _save(d: pathlib.Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m, indent=2))


def test_tampered_file_fails(two_stage_cert, tmp_path) -> None:
    d = _copy(two_stage_cert, tmp_path)
    f = sorted(d.glob("*raw*.smt2"))[0]
    f.write_text(f.read_text().replace("(check-sat)", "(assert false)\n(check-sat)"))
    res = certify(str(d))
    assert not res.ok and f.name in res.render() and "not obligation" in res.render()


def test_missing_file_fails(two_stage_cert, tmp_path) -> None:
    d = _copy(two_stage_cert, tmp_path)
    f = sorted(d.glob("*.smt2"))[3]
    f.unlink()
    res = certify(str(d))
    assert not res.ok and "file missing" in res.render()


def test_no_manifest(tmp_path) -> None:
    res = certify(str(tmp_path))
    assert not res.ok and "no manifest" in res.messages[0]


def test_refuted_program_does_not_certify(tmp_path) -> None:
    write_certificate(report("rfc0077-gemm"), str(tmp_path / "c"))
    res = certify(str(tmp_path / "c"))
    assert not res.ok and "count-epilogue" in res.render() and "(sat)" in res.render()


def test_certify_imports_only_the_trusted_checker(two_stage_cert) -> None:
    """A fresh interpreter certifies with no synth module loaded outside synth.trusted."""
    code = (
        "import sys\n"
        "from synth.trusted.certify import certify\n"
        f"r = certify({str(two_stage_cert)!r})\n"
        "bad = sorted(m for m in sys.modules if m.startswith('synth.') and not m.startswith('synth.trusted'))\n"
        "print('OK' if r.ok and not bad else f'FAIL {bad} {r.render()}')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "OK", out.stdout + out.stderr


def test_trusted_sources_import_nothing_else_of_synth() -> None:
    src = pathlib.Path(__file__).resolve().parent.parent / "synth" / "trusted"
    for f in src.glob("*.py"):
        for line in f.read_text().splitlines():
            s = line.strip()
            if s.startswith(("import ", "from ")):
                assert not s.startswith(("from ..", "import synth", "from synth")), (f.name, s)


def test_solvers_agree_on_each_file_of_a_larger_program(tmp_path) -> None:
    write_certificate(report("rfc0077-three-stage-3-slots"), str(tmp_path / "c"))
    for f in sorted((tmp_path / "c").glob("*.smt2")):
        assert check_z3(f.read_text()) == "unsat", f.name
        assert check_cvc5(f.read_text()) == "unsat", f.name


def test_symbolic_trip_count_certificate(tmp_path) -> None:
    write_certificate(report("predicated-opaque"), str(tmp_path / "c"))
    assert certify(str(tmp_path / "c")).ok


def test_out_folder_and_certificate_folder_both_accepted(two_stage_cert, tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(two_stage_cert, out / "certificate")
    shutil.copy(two_stage_cert / "program.json", out / "program.json")
    a, b = certify(str(out)), certify(str(out / "certificate"))
    assert a.ok and b.ok and a.program == b.program == str(out / "program.json")

"""Deliberate edits of a certificate must FAIL with a precise message (synth certify)."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

import pytest

from synth.verify import certify, load_program, verify_program, write_certificate

LISTINGS = pathlib.Path(__file__).resolve().parent.parent / "rfc_listings"


def _cert(tmp: pathlib.Path, name: str) -> pathlib.Path:
    """An OUT/ folder: program.json and certificate/."""
    out = tmp / name
    out.mkdir()
    r = verify_program(load_program(str(LISTINGS / f"{name}.json")), tightness=False)
    write_certificate(r, str(out / "certificate"))
    shutil.copy(out / "certificate" / "program.json", out / "program.json")
    return out


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> pathlib.Path:
    return _cert(tmp_path_factory.mktemp("good"), "rfc0077-two-stage")


def _clone(src: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    d = tmp / "clone"
    shutil.copytree(src, d)
    return d


def _edit(d: pathlib.Path, fn) -> None:
    m = json.loads((d / "certificate" / "manifest.json").read_text())
    fn(m)
    (d / "certificate" / "manifest.json").write_text(json.dumps(m, indent=2))


def test_untouched_certificate_passes(good) -> None:
    assert certify(str(good)).ok


def test_obligation_removed_from_manifest(good, tmp_path) -> None:
    d = _clone(good, tmp_path)
    gone = {}

    def drop(m):
        e = next(e for e in m["obligations"] if e["kind"] == "raw")
        gone["id"] = e["id"]
        m["obligations"].remove(e)
    _edit(d, drop)
    res = certify(str(d))
    assert not res.ok
    assert f"obligation {gone['id']} (raw) of program.json is missing from the manifest" in res.render()


def test_obligation_added_to_manifest(good, tmp_path) -> None:
    d = _clone(good, tmp_path)
    _edit(d, lambda m: m["obligations"].append(dict(m["obligations"][0], id="raw:body:99:r0")))
    res = certify(str(d))
    assert not res.ok and "lists obligation raw:body:99:r0, which program.json does not give" in res.render()


def test_another_programs_certificate_dropped_in(good, tmp_path) -> None:
    other = _cert(tmp_path, "rfc0077-interleaved")
    d = _clone(good, tmp_path)
    shutil.rmtree(d / "certificate")
    shutil.copytree(other / "certificate", d / "certificate")
    res = certify(str(d))
    assert not res.ok and "not for this program" in res.render()
    # ... and with the manifest's program hash forged to match, the obligations differ
    digest = hashlib.sha256((d / "program.json").read_bytes()).hexdigest()
    _edit(d, lambda m: m.update(program_sha256=digest))
    res = certify(str(d))
    assert not res.ok and ("missing from the manifest" in res.render() or ": not obligation" in res.render())


def test_refuted_obligation_replaced_by_assert_false_with_hash_recomputed(tmp_path) -> None:
    out = _cert(tmp_path, "rfc0077-gemm")   # its epilogue count 1 - i goes negative: refuted
    cert = out / "certificate"
    m = json.loads((cert / "manifest.json").read_text())
    bad = next(e for e in m["obligations"] if e["result"]["z3"] == "sat")
    forged = "(set-logic ALL)\n(assert false)\n(check-sat)\n"
    (cert / bad["file"]).write_text(forged)
    bad["sha256"] = hashlib.sha256(forged.encode()).hexdigest()
    bad["result"] = {"z3": "unsat", "cvc5": "unsat"}
    (cert / "manifest.json").write_text(json.dumps(m, indent=2))
    res = certify(str(out))
    assert not res.ok
    assert f"{bad['file']}: not obligation {bad['id']} as derived from program.json" in res.render()


def test_program_edited_after_certification(good, tmp_path) -> None:
    d = _clone(good, tmp_path)
    doc = json.loads((d / "program.json").read_text())
    doc["waits"][0]["in_flight"] = 2
    (d / "program.json").write_text(json.dumps(doc, indent=2))
    res = certify(str(d))
    assert not res.ok and "not for this program (or program.json was changed)" in res.render()


def test_old_format_manifest_is_refused(good, tmp_path) -> None:
    d = _clone(good, tmp_path)
    _edit(d, lambda m: m.update(format="synth-certificate/1"))
    res = certify(str(d))
    assert not res.ok and "not a synth-certificate/2 manifest" in res.render()


def test_missing_solver_is_named(good, monkeypatch) -> None:
    from synth.trusted import solvers

    monkeypatch.setattr(solvers, "versions", lambda: {"z3": "x", "cvc5": None})
    monkeypatch.setattr(solvers, "cvc5_answer", lambda text, t=60.0: "error: cvc5 is not installed (pip install cvc5)")
    res = certify(str(good))
    assert not res.ok and "missing solver(s): cvc5 (pip install cvc5)" in res.render()

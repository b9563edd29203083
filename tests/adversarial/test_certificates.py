"""Deliberate edits of a certificate must FAIL with a precise message (synth certify)."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

import pytest

from conftest import AT_ONCE_S
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


# -- the same tampering on both certificate forms (cp.async and Hopper), through synth.api.certify ------------

def _hopper_out(tmp: pathlib.Path, name: str, stages: int) -> pathlib.Path:
    """An OUT/ folder of a solved Hopper program: program.json and certificate/."""
    from synth.hopper.loop import HopperLoop, Load
    from synth.lower.barriers import lower_hopper
    from synth.verify.certificate_phases import write_hopper_certificate
    from synth.verify.phases import verify_hopper

    p = lower_hopper(HopperLoop(name, (Load("load_A", "A", 16384), Load("load_B", "B", 8192)), "mma", stages, 1))
    out = tmp / name
    out.mkdir()
    write_hopper_certificate(verify_hopper(p, time_limit=20, tightness=False), str(out / "certificate"))
    shutil.copy(out / "certificate" / "program.json", out / "program.json")
    return out


@pytest.fixture(scope="module")
def forms(tmp_path_factory) -> dict:
    """``{form: (OUT/, another solve's OUT/)}`` for the cp.async and the Hopper certificate."""
    tmp = tmp_path_factory.mktemp("forms")
    return {"cp.async": (_cert(tmp, "rfc0077-two-stage"), _cert(tmp, "rfc0077-interleaved")),
            "hopper": (_hopper_out(tmp, "g2", 2), _hopper_out(tmp, "g3", 3))}


FORMS = ("cp.async", "hopper")


def _api_certify(d: pathlib.Path, time_limit: float = 120.0):
    from synth import api
    return api.certify(str(d), time_limit=time_limit)


def _manifest(d: pathlib.Path) -> dict:
    return json.loads((d / "certificate" / "manifest.json").read_text())


def _forge(d: pathlib.Path, entry: dict, text: str) -> None:
    """Replace an obligation's file by ``text`` and recompute its sha256 in the manifest."""
    m = _manifest(d)
    e = next(x for x in m["obligations"] if x["id"] == entry["id"])
    (d / "certificate" / e["file"]).write_text(text)
    e["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    e["result"] = {"z3": "unsat", "cvc5": "unsat"}
    (d / "certificate" / "manifest.json").write_text(json.dumps(m, indent=2))


@pytest.mark.parametrize("form", FORMS)
def test_each_form_untouched_passes(forms, form) -> None:
    res = _api_certify(forms[form][0])
    assert res.ok, res.render()


@pytest.mark.parametrize("form", FORMS)
def test_each_form_obligation_replaced_by_assert_false_with_hash_recomputed(forms, form, tmp_path) -> None:
    d = _clone(forms[form][0], tmp_path)
    e = _manifest(d)["obligations"][-1]
    _forge(d, e, "(set-logic ALL)\n(assert false)\n(check-sat)\n")
    res = _api_certify(d)
    assert not res.ok and f"{e['file']}: not obligation {e['id']} as derived from program.json" in res.render()


@pytest.mark.parametrize("form", FORMS)
def test_each_form_obligation_with_its_inequality_flipped(forms, form, tmp_path) -> None:
    d = _clone(forms[form][0], tmp_path)
    m = _manifest(d)
    e = next(x for x in m["obligations"] if "(< " in (d / "certificate" / x["file"]).read_text())
    text = (d / "certificate" / e["file"]).read_text()
    _forge(d, e, text.replace("(< ", "(>= ", 1))
    res = _api_certify(d)
    assert not res.ok and f"not obligation {e['id']} as derived" in res.render()


@pytest.mark.parametrize("form", FORMS)
def test_each_form_certificate_copied_from_another_solve(forms, form, tmp_path) -> None:
    d = _clone(forms[form][0], tmp_path)
    shutil.rmtree(d / "certificate")
    shutil.copytree(forms[form][1] / "certificate", d / "certificate")
    res = _api_certify(d)
    assert not res.ok and "not for this program" in res.render()
    # ... and with the manifest's program hash forged to match OUT/program.json, the obligations differ
    digest = hashlib.sha256((d / "program.json").read_bytes()).hexdigest()
    _edit(d, lambda m: m.update(program_sha256=digest))
    text = _api_certify(d).render()
    assert "certificate FAILED" in text and ("missing from the manifest" in text or ": not obligation" in text)


@pytest.mark.parametrize("form", FORMS)
def test_each_form_obligation_removed_or_added(forms, form, tmp_path) -> None:
    d = _clone(forms[form][0], tmp_path)
    gone = _manifest(d)["obligations"][0]
    _edit(d, lambda m: m["obligations"].pop(0))
    res = _api_certify(d)
    assert not res.ok and f"obligation {gone['id']} ({gone['kind']}) of program.json is missing" in res.render()
    d = _clone(forms[form][0], tmp_path / "x")
    _edit(d, lambda m: m["obligations"].append(dict(m["obligations"][0], id="raw:made:up")))
    res = _api_certify(d)
    assert not res.ok and "lists obligation raw:made:up, which program.json does not give" in res.render()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("entry", [5, None, "x", [1], {"id": 7, "file": "a.smt2", "kind": "raw", "sha256": "0"}])
def test_each_form_manifest_with_a_non_object_or_mistyped_entry(forms, form, entry, tmp_path) -> None:
    d = _clone(forms[form][0], tmp_path)
    _edit(d, lambda m: m["obligations"].append(entry))
    res = _api_certify(d)
    assert not res.ok and "obligations[" in res.render(), res.render()


@pytest.mark.parametrize("form", FORMS)
def test_each_form_manifest_special_files_and_deep_nesting(forms, form, tmp_path) -> None:
    """A manifest nested thousands deep, /dev/zero or a FIFO in its place: FAILED at once, no crash or hang."""
    import os
    import time

    for n, make in enumerate((lambda p: p.write_text("[" * 5000 + "]" * 5000),
                              lambda p: p.symlink_to("/dev/zero"),
                              lambda p: os.mkfifo(p))):
        d = _clone(forms[form][0], tmp_path / str(n))
        (d / "certificate" / "manifest.json").unlink()
        make(d / "certificate" / "manifest.json")
        t0 = time.monotonic()
        res = _api_certify(d)
        assert not res.ok and "manifest" in res.render() and time.monotonic() - t0 < AT_ONCE_S, res.render()


@pytest.mark.parametrize("form", FORMS)
def test_each_form_program_edited_after_certification(forms, form, tmp_path) -> None:
    d = _clone(forms[form][0], tmp_path)
    doc = json.loads((d / "program.json").read_text())
    doc["name"] = "edited"
    (d / "program.json").write_text(json.dumps(doc, indent=2))
    res = _api_certify(d)
    assert not res.ok and "not for this program (or program.json was changed)" in res.render()


@pytest.mark.parametrize("edit", ["slots0", "wait99", "stages1e9", "extent1e9", "fifo"])
def test_hopper_certificate_program_edited_with_hash_recomputed(forms, edit, tmp_path) -> None:
    """The certificate's own program.json (no OUT/program.json beside it) edited, its sha256 recomputed:
    certify answers FAILED with the reason, never a crash (ZeroDivisionError, IndexError) or a hang."""
    import os

    d = _clone(forms["hopper"][0], tmp_path)
    (d / "program.json").unlink()
    prog = d / "certificate" / "program.json"
    doc = json.loads(prog.read_text())
    if edit == "slots0":
        doc["barriers"][0]["slots"] = 0
    elif edit == "wait99":
        next(s for r in doc["roles"] for pt in r["parts"] for s in pt["stmts"] if s["kind"] == "wait")["wait"] = 99
    elif edit == "stages1e9":
        next(s for r in doc["roles"] for pt in r["parts"] for s in pt["stmts"] if "state" in s)["state"]["stages"] \
            = 10 ** 9
    elif edit == "extent1e9":
        doc["roles"][0]["parts"][0]["extent"] = 10 ** 9
    if edit == "fifo":
        prog.unlink()
        os.mkfifo(prog)
    else:
        prog.write_text(json.dumps(doc))
        _edit(d, lambda m: m.update(program_sha256=hashlib.sha256(prog.read_bytes()).hexdigest()))
    res = _api_certify(d, time_limit=20)
    assert not res.ok and "certificate FAILED" in res.render(), res.render()


@pytest.mark.parametrize("form", FORMS)
def test_each_form_keeps_to_the_time_limit(forms, form) -> None:
    # what a cut certify says (how soon a time limit stops certify: test_promises'
    # test_verify_and_certify_time_limits_bound_the_whole_command)
    res = _api_certify(forms[form][0], time_limit=0.3)
    assert res.ok or "time limit" in res.render() or "unknown" in res.render(), res.render()


@pytest.mark.parametrize("edit", ["multiplicity0", "wait99", "fifo"])
def test_cp_async_certificate_program_edited_with_hash_recomputed(forms, edit, tmp_path) -> None:
    """The same for a cp.async certificate: multiplicity 0, a wait statement naming wait 99, a FIFO."""
    import os

    d = _clone(forms["cp.async"][0], tmp_path)
    (d / "program.json").unlink()
    prog = d / "certificate" / "program.json"
    doc = json.loads(prog.read_text())
    if edit == "multiplicity0":
        doc["buffers"][0]["multiplicity"] = 0
    elif edit == "wait99":
        next(s for pt in doc["parts"] for s in pt["stmts"] if s["kind"] == "wait")["wait"] = 99
    if edit == "fifo":
        prog.unlink()
        os.mkfifo(prog)
    else:
        prog.write_text(json.dumps(doc))
        _edit(d, lambda m: m.update(program_sha256=hashlib.sha256(prog.read_bytes()).hexdigest()))
    res = _api_certify(d, time_limit=20)
    assert not res.ok and "certificate FAILED" in res.render(), res.render()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("special", ["fifo", "dev_zero", "folder"])
def test_each_form_out_program_json_replaced_by_a_special_file(forms, form, special, tmp_path) -> None:
    """OUT/program.json a FIFO, /dev/zero or a folder: FAILED naming it (the fuzzer found the copy inside
    the certificate standing in for it, OK)."""
    import os

    d = _clone(forms[form][0], tmp_path)
    f = d / "program.json"
    f.unlink()
    {"fifo": os.mkfifo, "dev_zero": lambda p: p.symlink_to("/dev/zero"), "folder": os.mkdir}[special](f)
    res = _api_certify(d, time_limit=20)
    assert not res.ok and str(f) in res.render(), res.render()


@pytest.mark.parametrize("wait", [{}, 0, {"part": "body"}])
def test_a_mistyped_charged_wait_fails(forms, wait, tmp_path) -> None:
    """An obligation charged to no wait whose manifest entry says ``"wait": {}`` (the fuzzer: OK) fails."""
    d = _clone(forms["cp.async"][0], tmp_path)
    m = _manifest(d)
    n = next(k for k, e in enumerate(m["obligations"]) if e["wait"] is None)
    _edit(d, lambda m: m["obligations"][n].update(wait=wait))
    res = _api_certify(d, time_limit=30)
    assert not res.ok and f"manifest entry {m['obligations'][n]['id']} says kind" in res.render(), res.render()

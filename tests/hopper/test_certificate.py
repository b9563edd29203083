"""Hopper certificates: files bound to program.json, re-checked by Z3 and cvc5; tampering fails."""

import json
import os

import pytest

from synth.hopper.ir import dumps, hopper_from_json
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_hopper
from synth.verify.certificate_phases import certify_hopper, write_hopper_certificate
from synth.verify.phases import verify_hopper


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384), Load("load_B", "B", 8192, "k < T - 1")),
                                "mma", 2, 1))
    r = verify_hopper(p, time_limit=20)
    d = tmp_path_factory.mktemp("cert")
    write_hopper_certificate(r, str(d))
    return p, str(d)


def test_certificate_checks(cert):
    p, d = cert
    res = certify_hopper(d)
    assert res.ok, res.render()
    man = json.load(open(os.path.join(d, "manifest.json")))
    assert man["format"] == "synth-certificate-hopper/4" and man["cluster"] == []
    assert {o["kind"] for o in man["obligations"]} >= {"parity", "arrivals", "tx_bytes", "no_deadlock",
                                                        "release_after_wgmma", "slot_reuse", "fence"}
    assert all(o["result"]["z3"] == "unsat" for o in man["obligations"])


def test_tampered_file_and_program_fail(cert, tmp_path):
    p, d = cert
    import shutil
    t = tmp_path / "c"
    shutil.copytree(d, t)
    f = next(x for x in sorted(os.listdir(t)) if "tx_bytes-" in x and "16384" in (t / x).read_text())
    text = (t / f).read_text().replace("16384", "16400")
    (t / f).write_text(text)
    res = certify_hopper(str(t))
    assert not res.ok and "not obligation tx_bytes:" in res.render(), res.render()
    # a program edited after proving: its hash no longer matches
    shutil.rmtree(t)
    shutil.copytree(d, t)
    doc = json.loads((t / "program.json").read_text())
    doc["barriers"][1]["count"] = 2
    (t / "program.json").write_text(json.dumps(doc))
    assert "not for this program (or program.json was changed)" in certify_hopper(str(t)).render()


def test_refuted_program_has_no_certificate(tmp_path):
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 2, 1))
    bad = hopper_from_json(json.loads(dumps(p).replace('"count": 1,\n      "kind": "empty"',
                                                       '"count": 3,\n      "kind": "empty"')))
    r = verify_hopper(bad, time_limit=20, tightness=False)
    assert not r.ok
    with pytest.raises(ValueError):
        write_hopper_certificate(r, str(tmp_path / "c"))

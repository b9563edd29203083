"""synth verify / certify on a Hopper program.json: obligations by class, exit status, errors."""

import json

from conftest import synth_cli as synth
from synth.hopper.ir import dumps
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_hopper


def test_verify_json_lists_classes_and_certify(tmp_path):
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 2, 1))
    f = tmp_path / "program.json"
    f.write_text(dumps(p))
    r = synth("verify", str(f), "--json", "--certificate", str(tmp_path / "certificate"))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout)["result"]
    assert res["protocol"] == "mbarrier" and res["ok"]
    assert set(res["obligations"]) >= {"parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma",
                                       "wgmma_wait", "slot_reuse", "fence"}
    c = synth("certify", str(tmp_path), "--json")
    assert c.returncode == 0, c.stdout + c.stderr
    assert json.loads(c.stdout)["result"]["ok"]


def test_verify_refuted_and_malformed(tmp_path):
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 2, 1))
    doc = json.loads(dumps(p))
    doc["roles"][1]["waits"][0]["in_flight"] = 2
    f = tmp_path / "program.json"
    f.write_text(json.dumps(doc))
    r = synth("verify", str(f), "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert any(x["class"] == "release_after_wgmma" for x in out["result"]["failures"])
    doc["barriers"][0]["slots"] = "two"
    f.write_text(json.dumps(doc))
    r = synth("verify", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "barriers[0].slots" in r.stderr


def test_python_api_verifies_hopper_programs(tmp_path):
    from synth import api

    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 2, 1))
    assert api.verify(p, time_limit=60).ok
    f = tmp_path / "program.json"
    f.write_text(dumps(p))
    report = api.verify(str(f), time_limit=60, certificate=str(tmp_path / "cert"))
    assert report.ok and (tmp_path / "cert").is_dir()
    doc = json.loads(dumps(p))
    doc["roles"][1]["waits"][0]["in_flight"] = 2
    f.write_text(json.dumps(doc))
    bad = api.verify(str(f), time_limit=60)
    assert not bad.ok and "release_after_wgmma" in bad.refuted_classes()


def test_a_parity_on_an_arrive_or_complete_tx_is_refused_not_ignored(tmp_path):
    # arrive and complete_tx act on the current phase: an edited phase there changes nothing the
    # prover sees, so the loader refuses it rather than proving a program that says something else.
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 3, 1))
    base = json.loads(dumps(p))
    edits = []
    for r, role in enumerate(base["roles"]):
        for q, part in enumerate(role["parts"]):
            for k, s in enumerate(part["stmts"]):
                if s["kind"] == "arrive" or (s["kind"] == "op" and s.get("barrier")):
                    edits.append((r, q, k))
    assert any(base["roles"][r]["parts"][q]["stmts"][k]["kind"] == "op" for r, q, k in edits)
    for r, q, k in edits:
        doc = json.loads(json.dumps(base))
        s = doc["roles"][r]["parts"][q]["stmts"][k]
        (s["state"] if s["kind"] == "arrive" else s["barrier"]["state"])["phase"] = 1
        f = tmp_path / "program.json"
        f.write_text(json.dumps(doc))
        out = synth("verify", str(f))
        assert out.returncode == 2 and "takes no parity" in out.stderr and "Traceback" not in out.stderr

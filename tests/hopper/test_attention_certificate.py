"""The attention program certified (docs/attention.md, "What is proven"; docs/trust.md, "Attention programs"):
``synth certify OUT`` of an attention folder writes ``certificate/`` with the independent checker's obligations
(synth/trusted/attention.py: the barrier program's, each consumer's register program's in the cp.async form, the
once-loaded Q's) and checks it; the checker refuses the bug table's program mutants, a certificate with an
obligation dropped, added or altered, and a program.json edited after certification, for every n >= 0."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, synth_cli

from synth.flow.ws import certify_ws, load_ws_output
from synth.hopper.ir import dumps
from synth.lower.hopper_attention import MUTANTS, attention_mutant
from synth.outdir import foreign_files
from synth.trusted.attention import (FORMAT, check_attention_program, derive_attention, read_attention_bytes)
from synth.trusted.certify import certify_attention

D128 = ROOT / "problems" / "ws" / "attention-d128-f16.yaml"
D64 = ROOT / "problems" / "ws" / "attention-d64-f16.yaml"

REFUTED_AS = {
    "softmax_before_wait": "register",
    "rescale_races_pv": "register",
    "v_released_early": "release_after_wgmma",
    "order_wrong_parity": "parity",
    "q_load_before_exit": "teardown",
}
"""The class synth's prover refutes each bug of the table in (docs/attention.md, "The bug table")."""


@pytest.fixture(scope="module")
def certified(solve_once, tmp_path_factory):
    """The head-dim-128 folder (solved once for the run), copied, then ``synth certify COPY`` run once."""
    out = tmp_path_factory.mktemp("attention_cert") / "out"
    shutil.copytree(solve_once(D128).out, out)
    r = synth_cli("certify", out)
    return out, r


def copy(folder, dst):
    shutil.copytree(folder, dst)
    return dst


def rehash(cert, name: str) -> None:
    """Record ``name``'s sha256 in the certificate's manifest (as someone hiding an edit would)."""
    m = json.loads((cert / "manifest.json").read_text())
    for e in m["obligations"]:
        if e["file"] == name:
            e["sha256"] = hashlib.sha256((cert / name).read_bytes()).hexdigest()
    (cert / "manifest.json").write_text(json.dumps(m))


def test_certify_writes_and_checks_the_certificate(certified):
    """synth certify OUT (a subprocess): exit 0, certificate/ written (every obligation of the three classes, the
    independent checker's files) and checked; the folder stays wholly synth's. (The check of a certificate already
    there: the tampering tests below, and the slow test of verify --certificate, exit 0.)"""
    out, r = certified
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("certificate OK: 195/195 obligations of "), r.stdout
    assert "attention program, every n >= 0: barrier 161/161, register 30/30, once 4/4" in r.stdout
    assert f"wrote {out / 'certificate'}/" in r.stdout
    m = json.loads((out / "certificate" / "manifest.json").read_text())
    assert (m["format"], m["trip_count"], m["min_trip_count"], m["hops"]) == (FORMAT, "n", 0, 1)
    assert m["registers"] == ["S", "P", "O", "m", "l", "corr"]
    assert m["classes"] == {"barrier": 161, "register": 30, "once": 4}
    kinds = {e["kind"] for e in m["obligations"]}
    assert {"register", "once", "parity", "arrivals", "no_deadlock", "release_after_wgmma", "teardown"} <= kinds
    assert (out / "certificate" / "program.json").read_bytes() == (out / "program.json").read_bytes()
    assert foreign_files(str(out)) == []  # listed in the folder's marker: synth solve --force may replace it


@pytest.mark.slow  # the quick tier's certify subprocess writes and checks it; tests/test_layers.py the imports
def test_checked_in_a_fresh_interpreter_by_the_checker_alone(certified):
    """The certificate checked by synth.trusted alone, in a fresh interpreter that loads no other synth module:
    OK, every obligation."""
    out, _ = certified
    code = ("import sys, json\n"
            "from synth.trusted.certify import certify_attention\n"
            f"r = certify_attention({str(out / 'certificate')!r}, timeout_s=60)\n"
            "mods = sorted(m for m in sys.modules if m.startswith('synth') and m != 'synth'"
            " and not m.startswith('synth.trusted'))\n"
            "print(json.dumps({'ok': r.ok, 'head': r.messages[0], 'mods': mods}))\n"
            "sys.exit(0 if r.ok else 1)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc["ok"] and doc["mods"] == [] and doc["head"].startswith("certificate OK: 195/195"), doc


def test_n_zero_is_in_every_obligation(certified):
    """min_trip_count 0: every file's domain is n >= 0 (the barrier program's, the register programs' in the
    cp.async form and the once class), so the certificate covers a CTA whose KV blocks are all masked."""
    out, _ = certified
    m = json.loads((out / "certificate" / "manifest.json").read_text())
    for e in m["obligations"]:
        text = (out / "certificate" / e["file"]).read_text()
        assert "(assert (>= T 0))" in text and "(assert (>= T 1))" not in text, e["file"]


def test_the_derivation_is_the_program_s(certified):
    """The register class is each consumer's register program (every access a register's, charged to the role's
    waits), the once class every wgmma of a consumer after its wait on full_Q[0] phase 0."""
    out, _ = certified
    a = read_attention_bytes((out / "program.json").read_bytes())
    assert a.registers == ("S", "P", "O", "m", "l", "corr") and a.hops == 1
    assert [r for r, _ in a.register_programs] == ["consumer0", "consumer1"]
    assert sorted(a.once) == [(c, op, "Q_s", "full_Q") for c in ("consumer0", "consumer1") for op in ("pv", "qk")]
    obs = derive_attention(a)
    reg = [o for o in obs if o.kind == "register"]
    assert {o.id.split(":")[2] for o in reg} == {"raw", "war", "waw", "wellformed", "count"}
    assert all(o.wait in (None, 0, 1) for o in reg) and any(o.wait is not None for o in reg)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_refused_by_the_checker(certified, name):
    """Each bug of the table is refused by the independent checker in the class synth's prover refutes it in (only
    that class asked: the quick tier; every class: the slow test below)."""
    out, _ = certified
    ap = load_ws_output(out).attention
    data = dumps(attention_mutant(ap, name).program).encode("utf-8")
    cls = REFUTED_AS[name]
    res = check_attention_program(data, timeout_s=30, kinds=(cls,))
    assert res.checks and not res.ok, res.render()
    assert any(c.kind == cls and c.z3 == "sat" for c in res.checks), res.render()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_refused_by_every_class(certified, name):
    """The whole check of each mutant fails, and its failing classes include every class synth's prover refutes;
    the unmutated program's whole check holds."""
    from synth.verify.hopper_attention import verify_attention

    out, _ = certified
    ap = load_ws_output(out).attention
    mut = attention_mutant(ap, name)
    res = check_attention_program(dumps(mut.program).encode("utf-8"), timeout_s=30)
    assert not res.ok
    failed = {c.kind for c in res.checks if not c.ok}
    synth = {r.kind for r in verify_attention(mut).refutations}
    assert synth and synth <= failed, (synth, failed)
    assert check_attention_program((out / "program.json").read_bytes(), timeout_s=30).ok


def test_a_refused_program_gets_no_certificate(certified, tmp_path):
    """A program.json the checker refuses (a register declared shared memory): synth certify writes nothing."""
    out, _ = certified
    bad = copy(out, tmp_path / "bad")
    shutil.rmtree(bad / "certificate")
    doc = json.loads((bad / "program.json").read_text())
    next(b for b in doc["buffers"] if b["name"] == "S")["space"] = "shared"
    (bad / "program.json").write_text(json.dumps(doc))
    res = certify_ws(bad, time_limit=60)
    assert res is not None and not res.ok and res.messages[0].startswith("certificate FAILED: "), res.messages
    assert any("buffer S is shared but no TMA copy writes it" in m for m in res.messages), res.messages
    assert not (bad / "certificate").exists()


@pytest.mark.slow
def test_a_refuted_program_gets_no_certificate(certified, tmp_path):
    """program.json replaced by a mutant: synth certify writes nothing and fails, naming the obligation."""
    out, _ = certified
    bad = copy(out, tmp_path / "bad")
    shutil.rmtree(bad / "certificate")
    ap = load_ws_output(out).attention
    (bad / "program.json").write_text(dumps(attention_mutant(ap, "softmax_before_wait").program))
    res = certify_ws(bad, time_limit=60)
    assert res is not None and not res.ok
    assert res.messages[0].startswith("certificate FAILED: the trusted checker does not prove the attention "
                                      "program; no certificate"), res.messages
    assert any(m.startswith("register:consumer0:raw:") for m in res.messages), res.messages
    assert not (bad / "certificate").exists()


def test_dropped_obligation_refused(certified, tmp_path):
    """An obligation left out of the manifest (its file deleted): refused, the obligation named (the other files
    are asked within half a second: what is not asked fails too, as unknown)."""
    out, _ = certified
    t = copy(out, tmp_path / "t")
    m = json.loads((t / "certificate" / "manifest.json").read_text())
    gone = next(e for e in m["obligations"] if e["kind"] == "once")
    m["obligations"].remove(gone)
    (t / "certificate" / gone["file"]).unlink()
    (t / "certificate" / "manifest.json").write_text(json.dumps(m))
    res = certify_attention(str(t / "certificate"), timeout_s=30, time_limit=0.5)
    assert not res.ok and res.messages[0].startswith("certificate FAILED: "), res.messages
    assert any(f"obligation {gone['id']} (once) of program.json is missing from the manifest" in x
               for x in res.messages), res.messages


def test_flipped_verdict_and_extra_obligation_refused(certified, tmp_path):
    """A file whose claim is replaced (its hash recomputed), an obligation the program does not give, an edited
    hops or registers: each refused, named."""
    out, _ = certified
    t = copy(out, tmp_path / "t")
    cert = t / "certificate"
    m = json.loads((cert / "manifest.json").read_text())
    e = next(x for x in m["obligations"] if x["kind"] == "register")
    text = (cert / e["file"]).read_text()
    lines = text.splitlines()
    k = max(i for i, ln in enumerate(lines) if ln.startswith("(assert "))
    (cert / e["file"]).write_text("\n".join(lines[:k] + ["(assert false)"] + lines[k + 1:]) + "\n")
    rehash(cert, e["file"])
    res = certify_attention(str(cert), timeout_s=30, time_limit=0.5)
    assert not res.ok
    assert any(m_.startswith(f"{e['file']}: not obligation {e['id']} as derived from program.json") for m_ in
               res.messages), res.messages

    t2 = copy(out, tmp_path / "t2")
    m2 = json.loads((t2 / "certificate" / "manifest.json").read_text())
    extra = dict(m2["obligations"][0], id="once:consumer0:rowmax:Q_s")
    m2["obligations"].append(extra)
    (t2 / "certificate" / "manifest.json").write_text(json.dumps(m2))
    res = certify_attention(str(t2 / "certificate"), timeout_s=30, time_limit=0.5)
    assert not res.ok and any("the manifest lists obligation once:consumer0:rowmax:Q_s, which program.json does "
                              "not give" in x for x in res.messages), res.messages

    for key, value, says in (("hops", 2, "hops is 2, but program.json gives 1"),
                             ("registers", ["S", "P", "O"], "registers is [\"S\", \"P\", \"O\"], but program.json")):
        t3 = copy(out, tmp_path / f"t3{key}")
        m3 = json.loads((t3 / "certificate" / "manifest.json").read_text())
        m3[key] = value
        (t3 / "certificate" / "manifest.json").write_text(json.dumps(m3))
        res = certify_attention(str(t3 / "certificate"), timeout_s=30)
        assert not res.ok and says in res.messages[0], res.messages


def edit_program(folder, fn) -> None:
    """Edit program.json and record its new sha256 in the certificate's manifest (hiding the edit)."""
    doc = json.loads((folder / "program.json").read_text())
    fn(doc)
    data = json.dumps(doc, indent=2).encode("utf-8")
    (folder / "program.json").write_bytes(data)
    m = json.loads((folder / "certificate" / "manifest.json").read_text())
    m["program_sha256"] = hashlib.sha256(data).hexdigest()
    (folder / "certificate" / "manifest.json").write_text(json.dumps(m))


def test_program_edited_after_certification_refused(certified, tmp_path):
    """program.json edited with the manifest's hash recomputed: a wait count (the softmax-before-wait bug, in a
    count), a register declared shared memory: refused, exit 1 from the command line, with the reason."""
    out, _ = certified

    def wait_count(doc):
        c0 = next(r for r in doc["roles"] if r["role"] == "consumer0")
        w = next(w for w in c0["waits"] if w["before"] == "qk")
        w["in_flight"] = 1

    t = copy(out, tmp_path / "t")
    edit_program(t, wait_count)
    r = synth_cli("certify", t, "--time-limit", "20")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert r.stdout.startswith("certificate FAILED"), r.stdout
    assert "not obligation register:consumer0:" in r.stdout and "as derived from program.json" in r.stdout

    def shared_s(doc):
        next(b for b in doc["buffers"] if b["name"] == "S")["space"] = "shared"

    t2 = copy(out, tmp_path / "t2")
    edit_program(t2, shared_s)
    res = certify_attention(str(t2 / "certificate"), timeout_s=30)
    assert not res.ok and "buffer S is shared but no TMA copy writes it" in res.messages[0], res.messages

    t3 = copy(out, tmp_path / "t3")
    (t3 / "program.json").write_text((t3 / "program.json").read_text().replace('"in_flight": 0', '"in_flight": 1', 1))
    res = certify_attention(str(t3 / "certificate"), timeout_s=30)
    assert not res.ok and "this certificate is not for this program (or program.json was changed)" in \
        res.messages[0], res.messages


@pytest.mark.slow
def test_verify_certificate_writes_one_certify_accepts(solve_once, tmp_path):
    """synth verify OUT --certificate DIR on an attention folder proves it and writes the independent checker's
    certificate; synth certify DIR accepts it; an existing DIR is refused without --force, before any proof."""
    out = copy(solve_once(D128).out, tmp_path / "out")
    r = synth_cli("verify", out, "--certificate", tmp_path / "cert")
    assert r.returncode == 0 and f"wrote {tmp_path / 'cert'}" in r.stdout, r.stdout + r.stderr
    r = synth_cli("certify", tmp_path / "cert")
    assert r.returncode == 0 and r.stdout.startswith("certificate OK: 195/195"), r.stdout + r.stderr
    r = synth_cli("verify", out, "--certificate", tmp_path / "cert")
    assert r.returncode == 2 and "already exists" in r.stderr, r.stderr


@pytest.mark.slow
def test_three_consumers_certified_with_two_hops(solve_once, tmp_path):
    """The head-dim-64 program (three staggered consumers): two barrier hops, derived from the file; certified."""
    out = copy(solve_once(D64).out, tmp_path / "out")
    r = synth_cli("certify", out, "--time-limit", "600")
    assert r.returncode == 0, r.stdout + r.stderr
    m = json.loads((out / "certificate" / "manifest.json").read_text())
    assert m["hops"] == 2 and m["classes"]["register"] == 45 and m["classes"]["once"] == 6

"""The trusted checker reads a folder's design keys (``epilogue``, ``pingpong``, ``persistent``, ``cluster``) as YAML
reads them (synth/trusted/flags.py, docs/trust.md "The folder's design"), and a folder whose design asks for a
proof that is not there is refused by ``synth certify``, ``synth verify`` and ``synth.kernel.load``.

The table: every YAML form (flow and block mappings, quotes, a ``#`` inside quotes, escapes, multi-line and block
scalars, explicit keys, anchors, aliases, tags, merge keys, directives) is read by the trusted reader either as
PyYAML (both its parsers) and synth's own problem reader read it, or refused with a line and a fix; the forms a
problem file is written in are read, not refused. End to end: one ping-pong + TMA-store solve and one persistent
solve per module (about 15 s of CPU), tampered copies of them; the ping-pong folder's certificate holds the tile carry
(``pingpong: true`` implies a persistent tile loop), and one that leaves it out or tampers with it is refused.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

import synth.kernel
from conftest import ROOT
from synth.errors import SynthError
from synth.trusted import flags
from synth.trusted.flags import DESIGN_KEYS, Design, FlagError, read_design
from synth.trusted.hopper import read_carry_flag, read_persistent_flag
from synth.trusted.hopper_program import HopperInputError

# ------------------------------------------------------------------------------------------------ the table

READ = [
    "pingpong: true\nepilogue: tma_store\n",
    '{name: pp, description: "x #", kind: gemm, pingpong: true, epilogue: tma_store, persistent: true}\n',
    "{description: 'x #', pingpong: yes, cluster: 2x1}\n",
    "{description: x#y, pingpong: on}\n",
    "{\n  name: pp,\n  description: \"a # b\",\n  pingpong: true,\n  epilogue: tma_store\n}\n",
    '{"pingpong": true, "epilogue": "tma_store", "persistent": false}\n',
    "{pingpong: true,}\n",
    'description: "a # b"  # pingpong: false\npingpong: true\n',
    'description: "persist\\x65nt: true #"\npingpong: false\n',
    '"descr\\x69ption": x\npingpong: true\n',
    "'pingpong': true\n\"epilogue\": 'tma_store'\n",
    "pingpong:\n  true\nepilogue:\n  tma_store\n",
    "epilogue: >-\n  tma_store\n",
    "epilogue: |-\n  tma_store\n",
    "? pingpong\n: true\n",
    "{? epilogue : tma_store}\n",
    "---\npingpong: true\n...\n",
    "%YAML 1.1\n---\npingpong: true\n",
    "\ufeffpingpong: true\r\nepilogue: tma_store\r\n",
    "# pingpong: true\nname: x # epilogue: tma_store\n",
    'description: "x #\n  pingpong: false"\npingpong: true\n',
    "description: |\n  pingpong: false\n  epilogue: register\npingpong: true\n",
    "description: >\n  persistent: true\n\npersistent: false\n",
    "shape: &s {M: 1}\nother: *s\nname: !!str pp\npingpong: true\n",
    "base: &b {M: 1}\nshape:\n  <<: *b\npingpong: true\n",
    "base: &b {name: x}\n<<: *b\npingpong: true\n",
    "shape: {pingpong: false, epilogue: register}\npingpong: true\n",
    "pingpong: Yes\npersistent: OFF\n",
    'cluster: "2x1"\n',
    "cluster: '1x2'\n",
    "  pingpong: true\n  epilogue: tma_store\n",
    "name: pp\n",
    "",
]

REFUSED = [
    '"ping\\x70ong": true\n',
    '"\\u0070ingpong": true\n',
    '{"persist\\x65nt": true}\n',
    'epilogue: "tma_st\\x6fre"\n',
    "!!str pingpong: true\n",
    "pingpong: !!bool true\n",
    "? !!str cluster\n: 2x1\n",
    "epilogue: !!str tma_store\n",
    "! pingpong: true\n",
    "pingpong: ! true\n",
    "&a pingpong: true\n",
    "pingpong: &t true\n",
    "name: &k pingpong\n*k : true\n",
    "flag: &t true\npingpong: *t\n",
    "base: &b {pingpong: true}\n<<: *b\n",
    "<<: {epilogue: tma_store}\n",
    "<<: [{a: 1}, {persistent: true}]\n",
    "b1: &b1 {pingpong: true}\nb2: &b2 {<<: *b1}\n<<: *b2\n",
    "pingpong: false\npingpong: true\n",
    "{pingpong: false, 'pingpong': true}\n",
    "pingpong: 'true'\n",
    "pingpong: 1\n",
    "pingpong:\n",
    "epilogue: smem\n",
    "epilogue: |\n  tma_store\n",
    "cluster: 2x2\n",
    "cluster: 0x1\n",
    "pingpong: [true]\n",
    "pingpong: {a: 1}\n",
    "- pingpong: true\n",
    "pingpong\n",
    "a: 1\n---\npingpong: true\n",
    "{pingpong: true\n",
    'pingpong: "true\n',
    "pingpong: true\u2028epilogue: tma_store\n",
    "a: 1\x85pingpong: true\n",
    "a: \x01\n",
    "pingpong:\ttrue\n",  # libyaml reads it, PyYAML's pure-Python parser does not: refused
]


def _references(text: str) -> list:
    """The design keys of ``text`` as each reference reads it (PyYAML's two parsers and synth's problem reader),
    ``{key: value}`` of the keys present; the readers that refuse the text are left out."""
    from synth.yamlnodes import read_yaml_text

    out = []
    for read in (lambda t: yaml.load(t, Loader=yaml.SafeLoader), lambda t: yaml.load(t, Loader=yaml.CSafeLoader),
                 read_yaml_text):
        try:
            doc = read(text)
        except Exception:  # noqa: BLE001 - a reader that refuses the text gives no reading
            continue
        if doc is None:
            doc = {}
        if isinstance(doc, dict):
            out.append({k: doc[k] for k in DESIGN_KEYS if k in doc})
    return out


def _agrees(text: str):
    """The trusted reading of ``text`` (a :class:`Design`, or the :class:`FlagError`), after checking it against
    the references: a reading equals every reference's (value and type; a key absent from them is absent from it);
    a refusal names the line (when the text is YAML) and a fix."""
    try:
        d = read_design(text.encode("utf-8"), "p.yaml")
    except FlagError as e:
        assert e.fix and e.where.startswith("p.yaml"), (text, e)
        return e
    got = {k: getattr(d, k) for k in d.lines}
    refs = _references(text)
    assert refs, f"{text!r}: every reference refuses it, the trusted reader read {got}"
    for ref in refs:
        assert got == ref and all(type(got[k]) is type(ref[k]) for k in got), (text, got, ref)
    return d


@pytest.mark.parametrize("text", READ)
def test_every_yaml_form_is_read_as_yaml_reads_it(text):
    d = _agrees(text)
    assert isinstance(d, Design), f"{text!r} refused: {d}"


@pytest.mark.parametrize("text", REFUSED)
def test_forms_the_checker_cannot_read_for_sure_are_refused(text):
    e = _agrees(text)
    assert isinstance(e, FlagError), f"{text!r} read as {e}"


def test_a_flow_mapping_with_a_quoted_hash_is_read():
    """The flow mapping with ``description: "x #"``: a line reader took the ``#`` for a comment and read no design."""
    text = ('{name: pp, description: "x #", kind: gemm, shape: {M: 256, N: 256, K: 256}, arch: sm_90, '
            "pingpong: true, epilogue: tma_store, persistent: true, cluster: 1x1}\n")
    assert read_design(text.encode()) == Design("tma_store", True, True, "1x1")
    assert read_persistent_flag(text.encode()) is True
    assert flags.read_pingpong_flag(text.encode()) is True and flags.read_epilogue_flag(text.encode()) == "tma_store"


def test_refusals_name_the_line_and_persistent_raises_the_hopper_error():
    with pytest.raises(FlagError) as e:
        read_design(b"name: x\nkind: gemm\n!!str pingpong: true\n", "p.yaml")
    assert e.value.where == "p.yaml:3" and "tag" in e.value.msg
    with pytest.raises(HopperInputError) as h:
        read_persistent_flag(b"name: x\n&a persistent: true\n", "p.yaml")
    assert h.value.path == "p.yaml:2" and "anchor" in h.value.msg and h.value.fix


def test_bounds():
    with pytest.raises(FlagError, match="bound"):
        read_design(b"a: 1\n" + b" " * flags.MAX_BYTES)
    with pytest.raises(FlagError, match="nested"):
        read_design(b"a: " + b"[" * (flags.MAX_DEPTH + 1) + b"]" * (flags.MAX_DEPTH + 1) + b"\n")
    with pytest.raises(FlagError, match="UTF-8"):
        read_design(b"pingpong: \xff\n")


def test_parsers_that_disagree_are_refused(monkeypatch):
    """libyaml (what synth's problem reader parses with first) must read the same design as the pure-Python parser."""
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml")
    real = flags._parse

    def other(text, loader, source, path):
        found = real(text, loader, source, path)
        return {**found, "pingpong": (False, 1)} if loader is yaml.CSafeLoader else found

    monkeypatch.setattr(flags, "_parse", other)
    with pytest.raises(FlagError, match="differently"):
        read_design(b"pingpong: true\n")


# ------------------------------------------------------------------------------------------------ end to end

PINGPONG = ("name: pp\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 64, BN: 64, BK: 64}\narch: sm_90\n"
            "mainloop: tma_wgmma\npingpong: true\nepilogue: tma_store\nstages: 2\nk_pipe_mmas: 1\n")
PERSISTENT = PINGPONG.replace("name: pp", "name: pe").replace("pingpong: true\nepilogue: tma_store\n",
                                                              "persistent: true\n")


def synth_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def _solve(d: pathlib.Path, text: str) -> pathlib.Path:
    (d / "p.yaml").write_text(text)
    r = synth_cli("solve", str(d / "p.yaml"), "-o", str(d / "out"), "--time-limit", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    return d / "out"


@pytest.fixture(scope="module")
def pingpong(tmp_path_factory) -> pathlib.Path:
    return _solve(tmp_path_factory.mktemp("pp"), PINGPONG)


@pytest.fixture(scope="module")
def persistent(tmp_path_factory) -> pathlib.Path:
    return _solve(tmp_path_factory.mktemp("pe"), PERSISTENT)


def _flow(text: str) -> str:
    """``text``'s top-level ``key: value`` lines as one flow mapping, with ``description: "x #"`` first."""
    items = [line for line in text.splitlines() if line and not line.startswith("#")]
    return "{" + items[0] + ', description: "x #", ' + ", ".join(items[1:]) + "}\n"


def _tamper(src: pathlib.Path, dst: pathlib.Path, *, problem=None, delete=()) -> pathlib.Path:
    """A copy of ``src`` with ``problem.yaml`` replaced by ``problem`` (a function of its text) and the folders
    ``delete`` removed, its manifest (``.synth-output.json``) rewritten to match, as a careful forger would."""
    shutil.copytree(src, dst)
    marker = dst / ".synth-output.json"
    doc = json.loads(marker.read_text())
    if problem is not None:
        p = dst / "problem.yaml"
        p.write_text(problem(p.read_text()))
        doc["files"]["problem.yaml"] = hashlib.sha256(p.read_bytes()).hexdigest()
    for name in delete:
        shutil.rmtree(dst / name)
        doc["files"] = {k: v for k, v in doc["files"].items() if not k.startswith(name + "/")}
    marker.write_text(json.dumps(doc, indent=2) + "\n")
    return dst


def test_the_solved_folder_certifies_verifies_and_loads(pingpong):
    r = synth_cli("certify", str(pingpong))
    assert r.returncode == 0 and "ping-pong order (odd tile count): certificate OK" in r.stdout \
        and "TMA-store epilogue: certificate OK" in r.stdout, r.stdout + r.stderr
    r = synth_cli("verify", str(pingpong), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(json.loads(r.stdout)["result"]["parts"]) == {"store", "order/even", "order/odd"}
    synth.kernel.load(str(pingpong))


@pytest.mark.parametrize("flow", [True, False], ids=["flow-mapping-hiding-the-keys", "problem-untouched"])
def test_a_folder_without_its_order_and_store_proofs_is_refused(pingpong, tmp_path, flow):
    """problem.yaml as a flow mapping whose ``description: "x #"`` hid pingpong and epilogue from the
    line reader, order/ and store/ deleted (with their manifest entries): certify passed, verify and load too."""
    t = _tamper(pingpong, tmp_path / "t", problem=_flow if flow else None, delete=("order", "store"))
    if flow:
        assert (t / "problem.yaml").read_text().count("\n") == 1 and '"x #"' in (t / "problem.yaml").read_text()
    r = synth_cli("certify", str(t))
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "certificate FAILED" in out, out
    assert "says pingpong: true" in out and "order/ is missing" in out and "store/ is missing" in out, out
    r = synth_cli("verify", str(t))
    assert r.returncode == 2 and "problem.yaml:" in r.stderr and "order/ is missing" in r.stderr \
        and "Traceback" not in r.stderr, r.stdout + r.stderr
    with pytest.raises(SynthError, match="order/even/program.json: it is missing"):
        synth.kernel.load(str(t))


def test_a_store_proof_deleted_alone_is_refused(pingpong, tmp_path):
    t = _tamper(pingpong, tmp_path / "t", delete=("store",))
    r = synth_cli("certify", str(t))
    assert r.returncode == 1 and "store/ is missing" in r.stdout, r.stdout + r.stderr
    r = synth_cli("verify", str(t))
    assert r.returncode == 2 and "says epilogue: tma_store" in r.stderr, r.stderr
    with pytest.raises(SynthError, match="store/program.json: it is missing"):
        synth.kernel.load(str(t))


def test_an_edited_order_program_is_not_loaded(pingpong, tmp_path):
    t = _tamper(pingpong, tmp_path / "t")
    p = t / "order" / "odd" / "program.json"
    p.write_text(p.read_text().replace('"count": "i - 1"', '"count": "i"', 1))
    with pytest.raises(SynthError, match="changed since synth wrote it"):
        synth.kernel.load(str(t))
    marker = t / ".synth-output.json"  # the manifest rewritten to match: still not the order program synth proves
    doc = json.loads(marker.read_text())
    doc["files"]["order/odd/program.json"] = hashlib.sha256(p.read_bytes()).hexdigest()
    marker.write_text(json.dumps(doc))
    with pytest.raises(SynthError, match="not the program synth proves"):
        synth.kernel.load(str(t))


def test_a_proof_folder_the_problem_does_not_ask_for_is_refused(pingpong, tmp_path):
    """The folders and the design keys must agree both ways: order/ there, problem.yaml without pingpong."""
    t = _tamper(pingpong, tmp_path / "t", problem=lambda s: s.replace("pingpong: true\n", ""))
    r = synth_cli("certify", str(t))
    assert r.returncode == 1 and "does not say pingpong: true" in r.stdout, r.stdout + r.stderr
    r = synth_cli("verify", str(t))
    assert r.returncode == 2 and "does not say pingpong: true" in r.stderr, r.stderr


@pytest.mark.slow  # a variant of the carry tamper checks
def test_a_hidden_persistent_key_does_not_drop_the_carry(persistent, tmp_path):
    """The persistent folder's problem.yaml as a flow mapping with ``description: "x #"`` before ``persistent``,
    and its certificate without the carry obligations (manifest ``persistent: false``): certify fails, naming the
    carry missing from the manifest."""
    t = _tamper(persistent, tmp_path / "t", problem=_flow)
    cert = t / "certificate"
    man = json.loads((cert / "manifest.json").read_text())
    carry = [e for e in man["obligations"] if e["kind"] == "carry"]
    assert carry
    for e in carry:
        (cert / e["file"]).unlink()
    man["obligations"] = [e for e in man["obligations"] if e["kind"] != "carry"]
    man["persistent"] = False
    (cert / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    r = synth_cli("certify", str(t))
    assert r.returncode == 1 and "(carry) of program.json is missing from the manifest" in r.stdout, \
        r.stdout + r.stderr


def test_pingpong_implies_the_carry():
    """``pingpong: true`` walks a persistent CTA's tiles whatever ``persistent:`` says: its certificate holds the
    carry."""
    for text, want in (("pingpong: true\n", True), ("pingpong: true\npersistent: false\n", True),
                       ("persistent: true\n", True), ("{pingpong: off, persistent: no}\n", False), ("", False)):
        assert read_design(text.encode()).walks_tiles is want and read_carry_flag(text.encode()) is want, text
    with pytest.raises(HopperInputError) as h:
        read_carry_flag(b"name: x\npingpong: &a true\n", "p.yaml")
    assert h.value.path == "p.yaml:2" and h.value.fix


def _carry_entries(folder: pathlib.Path) -> list:
    return [e for e in json.loads((folder / "certificate" / "manifest.json").read_text())["obligations"]
            if e["kind"] == "carry"]


def test_the_pingpong_certificate_holds_the_carry(pingpong):
    """Each consumer warp group indexes the ring by the CTA's running tile count (kb = t T): the certificate holds
    derive_carry's obligations (both roles, the ring's drain too), and certify re-derives and asks them."""
    from synth.trusted.certify import certify_hopper

    man = json.loads((pingpong / "certificate" / "manifest.json").read_text())
    ids = {e["id"] for e in _carry_entries(pingpong)}
    assert man["persistent"] is True
    assert {"carry:ring", "carry:shape:producer", "carry:shape:consumer", "carry:consumer:body:0:barrier"} <= ids
    assert any(i.startswith("carry:consumer:epilogue:") for i in ids), ids
    res = certify_hopper(str(pingpong))
    assert res.ok, res.render()
    assert {f.id for f in res.files if f.kind == "carry" and f.ok and f.z3 == f.cvc5 == "unsat"} == ids


@pytest.mark.parametrize("how", ["problem-untouched", "persistent-false", "problem-deleted"])
def test_a_pingpong_certificate_without_its_carry_is_refused(pingpong, tmp_path, how):
    """The carry left out (its files deleted, the manifest saying persistent: false, as certificates written before
    ping-pong certificates held it): refused, by problem.yaml's pingpong: true (even with persistent: false written
    beside it) and, with problem.yaml deleted, by order/ beside program.json."""
    problem = {"persistent-false": lambda s: s.replace("pingpong: true\n", "pingpong: true\npersistent: false\n")}
    t = _tamper(pingpong, tmp_path / "t", problem=problem.get(how))
    cert = t / "certificate"
    man = json.loads((cert / "manifest.json").read_text())
    for e in _carry_entries(t):
        (cert / e["file"]).unlink()
    man["obligations"] = [e for e in man["obligations"] if e["kind"] != "carry"]
    man["persistent"] = False
    (cert / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    if how == "problem-deleted":
        (t / "problem.yaml").unlink()
    r = synth_cli("certify", str(t))
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "certificate FAILED" in out, out
    assert "obligation carry:consumer:body:0:barrier (carry) of program.json is missing from the manifest" in out, out
    why = "order/ is there" if how == "problem-deleted" else "problem.yaml:7 says pingpong: true"
    assert f"{why}: a ping-pong kernel's ring" in out and "re-run 'synth solve'" in out, out


def test_a_tampered_pingpong_carry_obligation_is_refused(pingpong, tmp_path):
    """A carry obligation edited with its hash recomputed: a weaker claim, or the partner-skip carry's (each warp
    group on its own tile count, (t / 2) T), which both solvers refute: neither is the obligation certify derives."""
    from synth.verify.hopper_pingpong import CARRY_MUTANTS
    from synth.trusted import solvers
    from synth.trusted.certify import certify_hopper
    from synth.trusted.hopper import derive_carry
    from synth.trusted.hopper_program import read_hopper_bytes

    m = CARRY_MUTANTS["partner_skip"]
    skip = {o.id: o.smt2 for o in derive_carry(read_hopper_bytes((pingpong / "program.json").read_bytes()),
                                               {"consumer": (m.slot_base, m.parity_base, m.flip)})}
    oid = "carry:consumer:body:0:barrier"
    assert solvers.z3_answer(skip[oid], 20) == "sat" and solvers.cvc5_answer(skip[oid], 20) == "sat"
    for n, edit in enumerate((lambda s: s.replace("(mod c 2)", "(mod c 1)", 1), lambda s: skip[oid])):
        t = _tamper(pingpong, tmp_path / f"t{n}")
        cert = t / "certificate"
        man = json.loads((cert / "manifest.json").read_text())
        e = next(e for e in man["obligations"] if e["id"] == oid)
        f = cert / e["file"]
        text = f.read_text()
        assert edit(text) != text
        f.write_text(edit(text))
        e["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
        (cert / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
        res = certify_hopper(str(t))
        assert not res.ok and f"not obligation {oid} as derived from program.json" in res.render(), res.render()


@pytest.mark.parametrize("part", ["order", "store"])
def test_a_folder_without_problem_yaml_certifies_the_parts_it_holds(pingpong, tmp_path, part):
    """With problem.yaml deleted, the order/ and store/ folders beside program.json still decide what is certified:
    one of them tampered fails ``synth certify`` (before, only the ring's certificate was checked)."""
    t = _tamper(pingpong, tmp_path / "t")
    (t / "problem.yaml").unlink()
    sub = t / part / ("even" if part == "order" else "") / "certificate"
    man = next(p for p in sorted(sub.rglob("*.smt2")))
    man.write_text(man.read_text().replace("(check-sat)", "(assert false)\n(check-sat)", 1))
    r = synth_cli("certify", str(t))
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "certificate FAILED" in out, out

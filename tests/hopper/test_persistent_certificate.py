"""A persistent kernel's certificate: the trusted checker (synth.trusted, none of synth's own code) derives the
tile-carry obligations from program.json and the folder's persistent flag (problem.yaml, read by its own tiny
reader), as SMT-LIB text asked of Z3 and cvc5; `synth certify OUT` re-derives and compares them byte for byte.
A solved persistent folder certifies; a tampered or left-out carry obligation fails; each known carry bug and a
program the ring proof does not cover at every tile count are refused by the trusted checker too."""

import contextlib
import io
import json
import shutil

import pytest

from synth.cli import main
from synth.verify.hopper_persistent import CARRY_MUTANTS, check_carry
from synth.trusted import solvers
from synth.trusted.certify import certify_hopper
from synth.trusted.hopper import derive_carry, read_persistent_flag
from synth.trusted.hopper_program import HopperInputError, read_hopper_bytes

PROBLEM = ("kind: gemm\nname: hop\nshape: {M: 300, N: 200, K: 448}\narch: sm_90\n"
           "tile: {BM: 128, BN: 64, BK: 64}\nstages: 3\nk_pipe_mmas: 1\npersistent: true\n")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    from synth import api

    d = tmp_path_factory.mktemp("persistent")
    (d / "p.yaml").write_text(PROBLEM)
    api.solve(str(d / "p.yaml"), out=str(d / "out"))
    return d / "out"


def _copy(out, tmp_path):
    t = tmp_path / "out"
    shutil.copytree(out, t)
    return t


def _certify_cli(path) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        rc = main(["certify", str(path)])
    return rc, buf.getvalue()


def _manifest(d):
    return json.loads((d / "certificate" / "manifest.json").read_text())


def test_persistent_folder_certifies_with_its_carry(out):
    man = _manifest(out)
    assert man["persistent"] is True
    carry = [o for o in man["obligations"] if o["kind"] == "carry"]
    ids = {o["id"] for o in carry}
    assert {"carry:ring", "carry:shape:producer", "carry:shape:consumer"} <= ids
    # every barrier statement and smem slot of both roles, the ring's drain included
    assert "carry:consumer:body:0:barrier" in ids and "carry:producer:body:2:w0" in ids
    assert any(i.startswith("carry:consumer:epilogue:") for i in ids)
    assert all(o["result"] == {"z3": "unsat", "cvc5": "unsat"} for o in carry)
    rc, text = _certify_cli(out)
    assert rc == 0 and "certificate OK" in text, text


def test_tampered_or_missing_carry_obligation_fails(out, tmp_path):
    t = _copy(out, tmp_path)
    cert = t / "certificate"
    man = _manifest(t)
    e = next(o for o in man["obligations"] if o["id"] == "carry:consumer:body:0:barrier")
    f = cert / e["file"]
    text = f.read_text()
    assert "(mod c 3)" in text
    f.write_text(text.replace("(mod c 3)", "(mod c 2)", 1))  # a weaker claim, its hash recomputed
    import hashlib
    e["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (cert / "manifest.json").write_text(json.dumps(man))
    rc, text = _certify_cli(t)
    assert rc != 0 and "not obligation carry:consumer:body:0:barrier" in text, text

    # the carry left out (manifest says not persistent): the folder's problem.yaml still says persistent: true
    shutil.rmtree(t)
    t = _copy(out, tmp_path)
    man = _manifest(t)
    man["persistent"] = False
    man["obligations"] = [o for o in man["obligations"] if o["kind"] != "carry"]
    (t / "certificate" / "manifest.json").write_text(json.dumps(man))
    res = certify_hopper(str(t))
    assert not res.ok and "obligation carry:ring (carry) of program.json is missing from the manifest" in res.render()
    man["persistent"] = "yes"
    (t / "certificate" / "manifest.json").write_text(json.dumps(man))
    assert "persistent: expected true or false" in certify_hopper(str(t)).render()


def test_flag_from_manifest_when_alone_and_bad_flag_refused(out, tmp_path):
    t = _copy(out, tmp_path)
    # the certificate folder alone (its program copy inside): the manifest's "persistent": true keeps the carry
    res = certify_hopper(str(t / "certificate"))
    assert res.ok and sum(f.kind == "carry" for f in res.files) >= 10, res.render()
    # a flag the trusted reader cannot read is refused with the file, the line and the fix
    y = t / "problem.yaml"
    y.write_text(y.read_text().replace("persistent: true", "persistent: 1"))
    res = certify_hopper(str(t))
    assert not res.ok and "problem.yaml:8" in res.render() and "fix:" in res.render(), res.render()


def test_flag_reader():
    ok = {"persistent: true\n": True, "persistent: yes  # walk the tiles\n": True, "persistent: false\n": False,
          "name: persistent_gemm\n# persistent: true\n": False, "": False, "kind: gemm\npersistent:   ON\n": True,
          "\ufeffpersistent: true\r\n": True, "'persistent': true\n": True, "name: a persistent kernel\n": False,
          "  persistent: true\n": True, "{persistent: true}\n": True, "kind: gemm\npersistent:\n  true\n": True,
          '{d: "x #", persistent: true}\n': True}  # read as YAML reads them (synth/trusted/flags.py)
    for text, want in ok.items():
        assert read_persistent_flag(text.encode()) is want, text
    for text, line in (("a: 1\n'persistent\": true\n", 2), ("{persistent: &a true}\n", 1),
                       ("persistent: true\npersistent: false\n", 2), ("persistent: 3\n", 1), ("? persistent\n", 1),
                       ("persistent: true # ok\n\"persistent\" : false\n", 2), ("persistent: !!bool true\n", 1),
                       ("kind: gemm\npersistent:\n  'true'\n", 2), ("persistent: *flag\n", 1)):
        with pytest.raises(HopperInputError) as e:
            read_persistent_flag(text.encode(), "p.yaml")
        assert e.value.path == f"p.yaml:{line}" and e.value.fix, text


def _refuted(obs) -> list[str]:
    """Ids of the obligations both solvers refute (sat)."""
    return [o.id for o in obs if solvers.z3_answer(o.smt2, 20) == "sat" and solvers.cvc5_answer(o.smt2, 20) == "sat"]


@pytest.mark.parametrize("name", sorted(CARRY_MUTANTS))
@pytest.mark.parametrize("role", ["producer", "consumer"])
def test_each_carry_bug_is_refused_by_the_trusted_checker(out, name, role):
    p = read_hopper_bytes((out / "program.json").read_bytes())
    m = CARRY_MUTANTS[name]
    bad = _refuted(derive_carry(p, {role: (m.slot_base, m.parity_base, m.flip)}))
    assert bad and all(i.startswith(f"carry:{role}:") for i in bad), bad
    assert f"carry:{role}:body:0:barrier" in bad  # the role's first try_wait (the parity the bugs get wrong)
    # synth's own prover agrees
    from synth.hopper.ir import load_hopper
    assert not check_carry(load_hopper(str(out / "program.json")), {role: m})[0]


def test_program_not_covering_every_tile_count_is_refused(out):
    doc = json.loads((out / "program.json").read_text())
    doc["loop"]["min_trip_count"] = 2  # the ring proof would miss a CTA of one tile of one k-tile
    assert _refuted(derive_carry(read_hopper_bytes(json.dumps(doc).encode()))) == ["carry:ring"]
    from synth.trusted.hopper import check_hopper_program
    res = check_hopper_program(json.dumps(doc).encode(), timeout_s=20, tightness=False, persistent=True)
    assert not res.ok and "carry:ring [carry]" in res.render(), res.render()


def test_a_flow_style_problem_solves_to_a_folder_the_checker_reads(tmp_path):
    """The whole problem as one flow mapping, its persistent key inside it: synth solve writes the folder's
    problem.yaml again with every key on a line of its own (synth.hopper.problem.hopper_problem_yaml), so the
    checker's line reader reads persistent: true, and the folder certifies with its carry obligations (solve used to
    refuse the valid problem after the whole proof, naming the folder's copy)."""
    flow = "{" + PROBLEM.strip().replace("\n", ", ") + "}\n"
    (tmp_path / "f.yaml").write_text(flow)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        rc = main(["solve", str(tmp_path / "f.yaml"), "--out", str(tmp_path / "o")])
    assert rc == 0, buf.getvalue()
    folder = tmp_path / "o"
    assert "persistent: true\n" in (folder / "problem.yaml").read_text()
    assert read_persistent_flag((folder / "problem.yaml").read_bytes()) is True and _manifest(folder)["persistent"]
    rc, text = _certify_cli(folder)
    assert rc == 0 and "certificate OK" in text, text

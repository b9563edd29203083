"""Bad input (or an unusual spelling of a good one) that reached an internal error, a folder synth or its
certificate checker could not read, or a path synth should not touch.

The promise (docs/commands.md, "Exit status"): bad input gets one message naming the file, line and fix, exit
status 2, no traceback, no output folder; synth never replaces what it did not write; and a folder ``synth solve``
writes reads back to the problem it solved, for synth and for ``synth certify``. The root cause of most items was
that a problem's design keys were read or rewritten as text lines; an output folder's ``problem.yaml`` is now
written again by one YAML writer (synth.yamlnodes.yaml_line, synth.hopper.problem.hopper_problem_yaml).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from dataclasses import replace

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMALL = ("kind: gemm\nshape: {M: 1024, N: 1024, K: 1024}\narch: sm_90\ntile: {BM: 128, BN: 64, BK: 64}\n"
         "stages: 2\nk_pipe_mmas: 1\n")


def synth(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)


def bad(r: subprocess.CompletedProcess, *words: str) -> None:
    """Exit status 2, one located message with a fix, no traceback."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "fix:" in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------- YAML tags


@pytest.mark.parametrize("value, kind", [("!!bool gemm", "bool"), ('!!int ""', "int"), ('!!float ""', "float")])
def test_a_tag_pyyaml_cannot_construct_is_a_located_error(tmp_path, value, kind):
    """PyYAML's constructors raise KeyError ('!!bool gemm') and IndexError ('!!int ""', '!!float ""'): exit 3."""
    f = tmp_path / "p.yaml"
    f.write_text(f"name: x\nkind: {value}\nshape: {{M: 128, N: 128, K: 128}}\n")
    r = synth("solve", str(f), "-o", str(tmp_path / "o"))
    bad(r, f"{f}:2:7: error: cannot read value", f"as {kind}")
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------ bf16 and auto


def test_bf16_with_an_auto_design_key_solves(tmp_path):
    """dtype: bf16 with persistent: auto was refused ("not supported by the GEMM expansion", no location, a fix
    naming --dtype, a flag solve does not have): the design is priced with the Hopper search's context."""
    f = tmp_path / "p.yaml"
    f.write_text("name: bfa\n" + SMALL + "dtype: bf16\npersistent: auto\nepilogue: auto\n")
    r = synth("solve", str(f), "-o", str(tmp_path / "o"), "--no-verify")
    assert r.returncode == 0, r.stdout + r.stderr
    text = (tmp_path / "o" / "problem.yaml").read_text()
    assert "dtype: bf16" in text and "# chosen by synth solve" in text and ": auto" not in text, text


# ------------------------------------------------------------------------- the folder's problem.yaml


def _solved_reads_back(tmp_path, text: str, *flags: str):
    from synth.load import load_problem

    f = tmp_path / "p.yaml"
    f.write_text(text)
    out = tmp_path / "o"
    r = synth("solve", str(f), "-o", str(out), *flags)
    assert r.returncode == 0, r.stdout + r.stderr
    given = load_problem(str(f))
    back = load_problem(str(out / "problem.yaml"))
    return given, back, out


@pytest.mark.slow  # a variant of the folder round trip
def test_a_quoted_numeric_name_stays_a_string_in_the_folder(tmp_path):
    """A flow-style auto problem named "123": the folder's problem.yaml used to say name: 123 (an int), which synth
    itself refused to read back."""
    text = "{name: \"123\", " + SMALL.strip().replace("\n", ", ") + ", persistent: auto}\n"
    given, back, out = _solved_reads_back(tmp_path, text, "--no-verify")
    assert back.name == "123" and back.auto == () and back.persistent is False
    assert 'name: "123"' in (out / "problem.yaml").read_text()
    r = synth("emit", str(out), "--target", "cuda", "--force")
    assert r.returncode == 0, r.stdout + r.stderr


def test_auto_is_resolved_at_the_key_not_inside_a_description(tmp_path):
    """A regex edited the line 'persistent: auto' inside a quoted multi-line description and left the real key
    (its value on the next line) auto."""
    text = ("name: d\ndescription: \"first line\npersistent: auto\n\"\n" + SMALL + "persistent:\n  auto\n")
    given, back, out = _solved_reads_back(tmp_path, text, "--no-verify")
    assert given.auto == ("persistent",) and back.auto == () and back.persistent is False
    folder = (out / "problem.yaml").read_text()
    assert "persistent: false  # chosen by synth solve" in folder and "# description: first line" in folder, folder


@pytest.mark.slow  # a flow-style variant of a certified folder
def test_flow_style_epilogue_and_pingpong_certify(tmp_path):
    """epilogue and pingpong in a flow mapping: solve wrote a folder (the file copied as given) whose certificate
    synth certify refused, its line reader not finding the keys."""
    text = ("{name: e, " + SMALL.replace("BM: 128", "BM: 64").strip().replace("\n", ", ")
            + ", pingpong: true, epilogue: tma_store}\n")
    given, back, out = _solved_reads_back(tmp_path, text)
    assert (back.pingpong, back.epilogue) == (True, "tma_store") and replace(back, path=given.path) == given
    r = synth("certify", str(out))
    assert r.returncode == 0 and "ping-pong order (odd tile count): certificate OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow  # a variant of the folder round trip
def test_a_description_mentioning_persistent_is_not_refused_after_the_proof(tmp_path):
    """A description whose second line reads 'persistent: false': solve proved the kernel, then refused the valid
    problem at the output folder's copy ("problem.yaml:3:1: the persistent key is not written as ...")."""
    text = "name: f\ndescription: \"a persistent kernel? no:\n  persistent: false\"\n" + SMALL
    given, back, out = _solved_reads_back(tmp_path, text)
    assert back.persistent is False
    r = synth("certify", str(out))
    assert r.returncode == 0 and "certificate OK" in r.stdout, r.stdout + r.stderr


def test_the_folder_text_is_checked_against_the_certificate_reader_before_the_proof(monkeypatch):
    """A folder text the certificate checker reads otherwise than YAML stops the flow before any proof (a bug of
    synth's writer: RuntimeError, exit 3), never after it."""
    import synth.trusted.hopper as trusted
    from synth.flow import hopper as flow
    from synth.load import load_problem_text

    g = load_problem_text("name: g\n" + SMALL + "persistent: true\n")
    assert "persistent: true\n" in flow.problem_source(g)
    monkeypatch.setattr(trusted, "read_persistent_flag", lambda data, path="": False)  # a reader that disagrees
    proved = []
    monkeypatch.setattr(flow, "prove_hopper", lambda *a, **k: proved.append(1))
    with pytest.raises(RuntimeError, match="certificate checker reads persistent"):
        flow.run_hopper(g, deadline=1e18)
    assert not proved


# ----------------------------------------------------------------------------------- output paths


@pytest.mark.parametrize("target", ["empty", "nowhere"])
@pytest.mark.parametrize("slash", ["/", "//"])
def test_a_link_with_a_trailing_slash_is_not_replaced(tmp_path, target, slash):
    """-o LINK/ (a link to an empty folder, or a dangling link): islink('LINK/') is False, so the link was replaced
    by a folder without --force (or, dangling, an internal error)."""
    if target == "empty":
        (tmp_path / "empty").mkdir()
    os.symlink(target, tmp_path / "link")
    r = synth("solve", str(ROOT / "problems" / "rfc0077-two-stage.yaml"), "-o", "link" + slash, cwd=tmp_path)
    bad(r, "is a symbolic link")
    assert os.path.islink(tmp_path / "link") and os.readlink(tmp_path / "link") == target
    assert target == "nowhere" or not os.listdir(tmp_path / "empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"link", target} - {"nowhere"})


def test_verify_certificate_into_a_link_with_a_trailing_slash_is_refused(tmp_path):
    out = tmp_path / "out"
    assert synth("solve", str(ROOT / "problems" / "rfc0077-two-stage.yaml"), "-o", str(out)).returncode == 0
    (tmp_path / "empty").mkdir()
    os.symlink("empty", tmp_path / "link")
    r = synth("verify", str(out / "program.json"), "--certificate", "link/", "--force", cwd=tmp_path)
    bad(r, "is a symbolic link")
    assert os.path.islink(tmp_path / "link") and not os.listdir(tmp_path / "empty")


# --------------------------------------------------------------------------------------------- search


@pytest.mark.parametrize("flag", ["--M", "--N", "--K"])
def test_search_sizes_have_the_shapes_bound(flag):
    """synth search --M 10^20 was searched (while --shapes refused the same row): the bound is MAX_GEMM_DIM."""
    args = {"--M": "128", "--N": "128", "--K": "128", flag: str(10 ** 20)}
    r = synth("search", "gemm", *[x for kv in args.items() for x in kv])
    bad(r, f"{flag} {10 ** 20} is above the maximum 1000000")


def test_search_api_has_the_bound():
    from synth.errors import SynthError
    from synth.search.space import make_context

    with pytest.raises(SynthError, match="above the maximum"):
        make_context(10 ** 20, 128, 128, "f16", "sm_80")


# ---------------------------------------------------------------------------------------------- check


def test_check_names_the_line_of_an_unclosed_region(tmp_path):
    src = (ROOT / "tests" / "check_inputs" / "triton-matmul-s3.ttgir").read_text()
    cut = src[: src.rindex("}")]  # the module's closing brace lost
    f = tmp_path / "cut.ttgir"
    f.write_text(cut)
    line = next(n for n, ln in enumerate(cut.splitlines(), 1) if ln.lstrip().startswith("module"))
    r = synth("check", str(f))
    bad(r, f"{f}:{line}:1: error: unbalanced '{{'", f"opens at line {line}")


def test_check_func_of_a_name_the_file_lacks_is_said_before_tvm_loads():
    """--func nosuch took 29 s: every function was parsed with TVM (imported first) before the name was looked up."""
    code = ("import sys\nfrom synth.errors import SynthError\nfrom synth.frontends.check import import_loops\n"
            f"p = {str(ROOT / 'tests' / 'check_inputs' / 'tvm-stream-s2.py')!r}\n"
            "try:\n    import_loops(open(p).read(), p, 'tvm', 'nosuch')\nexcept SynthError as e:\n    print(e.msg)\n"
            "print('tvm' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.splitlines() == ["no @T.prim_func named 'nosuch' in the file (it has main)", "False"], \
        r.stdout + r.stderr


# ----------------------------------------------------------------------------------------------- docs


def test_docs_name_every_check_form_and_bf16():
    from synth.frontends import FORMS

    commands = (ROOT / "docs" / "commands.md").read_text()
    row = next(ln for ln in commands.splitlines() if ln.startswith("| `--form`"))
    assert all(f"`{f}`" in row for f in FORMS), row
    fmt = (ROOT / "docs" / "problem-format.md").read_text()
    dtype = next(ln for ln in fmt.splitlines() if ln.startswith("| `dtype` | no (default `f16`)"))
    assert "only `f16`" not in dtype and "`bf16`" in dtype, dtype

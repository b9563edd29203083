"""synth only ever replaces what it wrote: --force, problem names and -o paths (data loss).

Each test runs ``synth solve`` in-process as a user would and checks the
user's files afterwards, byte for byte.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import shutil

import pytest

from synth.cli import main
from synth.outdir import MARKER, foreign_files

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "problems" / "rfc0077-two-stage.yaml"


def solve(*args: str, cwd: pathlib.Path) -> tuple[int, str, str]:
    """Run ``synth solve ARGS`` in ``cwd``; (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["solve", *args, "--time-limit", "10", "-q"])
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


def problem_named(tmp: pathlib.Path, name: str) -> pathlib.Path:
    text = EXAMPLE.read_text().replace("name: rfc0077-two-stage", f"name: {json.dumps(name)}")
    p = tmp / "p.yaml"
    p.write_text(text)
    return p


def snapshot(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def no_temp_left(root: pathlib.Path) -> bool:
    return not [p for p in root.rglob(".synth-*") if p.name != MARKER]


def test_force_refuses_a_folder_holding_a_users_file(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "notes.txt").write_text("mine")
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    code, _, err = solve("p.yaml", "-o", "scratch", "--force", cwd=tmp_path)
    assert code == 2
    assert "notes.txt" in err and "Traceback" not in err
    assert (scratch / "notes.txt").read_text() == "mine"
    assert no_temp_left(tmp_path)


@pytest.mark.parametrize("made", ["my_notes/drafts", "empty", "certificate/mine"])
def test_force_refuses_a_folder_the_user_made_even_empty(tmp_path, made):
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    assert solve("p.yaml", "-o", "o", cwd=tmp_path)[0] == 0
    (tmp_path / "o" / made).mkdir(parents=True)
    assert foreign_files(str(tmp_path / "o")), "a folder the user made is not synth's"
    code, _, err = solve("p.yaml", "-o", "o", "--force", cwd=tmp_path)
    assert code == 2 and made.split("/")[0] in err and "Traceback" not in err
    assert (tmp_path / "o" / made).is_dir()
    assert no_temp_left(tmp_path)


def test_force_on_the_current_folder_touches_nothing(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    (tmp_path / "other.txt").write_text("keep")
    before = snapshot(tmp_path)
    code, _, err = solve("p.yaml", "-o", ".", "--force", cwd=tmp_path)
    assert code == 2 and "Traceback" not in err
    assert snapshot(tmp_path) == before


def test_force_on_a_parent_folder_touches_nothing(tmp_path):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    shutil.copy(EXAMPLE, work / "p.yaml")
    before = snapshot(tmp_path)
    code, _, _ = solve("p.yaml", "-o", "..", "--force", cwd=work)
    assert code == 2
    assert snapshot(tmp_path) == before


def test_force_replaces_a_folder_synth_wrote(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    assert solve("p.yaml", "-o", "o", cwd=tmp_path)[0] == 0
    assert foreign_files(str(tmp_path / "o")) == []
    code, _, err = solve("p.yaml", "-o", "o", cwd=tmp_path)
    assert code == 2 and "already exists" in err
    assert solve("p.yaml", "-o", "o", "--force", cwd=tmp_path)[0] == 0
    assert (tmp_path / "o" / "program.json").is_file()
    assert no_temp_left(tmp_path)


@pytest.mark.parametrize("change", ["edit", "add", "add-dir"])
def test_force_refuses_a_synth_folder_the_user_changed(tmp_path, change):
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    assert solve("p.yaml", "-o", "o", cwd=tmp_path)[0] == 0
    if change == "edit":
        (tmp_path / "o" / "program.txt").write_text("my edits\n")
    elif change == "add":
        (tmp_path / "o" / "certificate" / "mine.smt2").write_text("(check-sat)\n")
    else:
        (tmp_path / "o" / "plots").mkdir()
        (tmp_path / "o" / "plots" / "fig.png").write_bytes(b"\x89PNG")
    before = snapshot(tmp_path / "o")
    code, _, err = solve("p.yaml", "-o", "o", "--force", cwd=tmp_path)
    assert code == 2 and "refusing to replace" in err
    assert snapshot(tmp_path / "o") == before


def test_a_forged_marker_does_not_cover_other_files(tmp_path):
    folder = tmp_path / "o"
    folder.mkdir()
    (folder / "data.csv").write_text("1,2\n")
    (folder / MARKER).write_text(json.dumps({"synth_output": 1, "files": {"data.csv": "0" * 64}}))
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    assert solve("p.yaml", "-o", "o", "--force", cwd=tmp_path)[0] == 2
    assert (folder / "data.csv").read_text() == "1,2\n"


def test_symlinked_output_folder_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("k")
    (tmp_path / "link").symlink_to(target)
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    code, _, err = solve("p.yaml", "-o", "link", "--force", cwd=tmp_path)
    assert code == 2 and "link" in err
    assert (target / "keep.txt").read_text() == "k"


def test_an_empty_existing_folder_is_used(tmp_path):
    (tmp_path / "o").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    assert solve("p.yaml", "-o", "o", cwd=tmp_path)[0] == 0
    assert (tmp_path / "o" / "program.json").is_file()


@pytest.mark.parametrize("where", ["file", "below-file"])
def test_output_path_at_or_below_a_file(tmp_path, where):
    (tmp_path / "f").write_text("x")
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    out = "f" if where == "file" else "f/sub"
    code, _, err = solve("p.yaml", "-o", out, "--force", cwd=tmp_path)
    assert code == 2 and "Traceback" not in err
    assert (tmp_path / "f").read_text() == "x"
    assert no_temp_left(tmp_path)


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../x", "x\n", "a" * 65, "a" * 300, "-x", ".hidden", "a\\b",
                                  "", "nul\x00"])
def test_unsafe_problem_names_are_refused(tmp_path, name):
    p = problem_named(tmp_path, name)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "other-result").mkdir()
    (tmp_path / "out" / "other-result" / "r.txt").write_text("r")
    (tmp_path / "keep.txt").write_text("k")
    before = snapshot(tmp_path)
    code, _, err = solve(str(p), "--force", cwd=tmp_path)
    assert code == 2, err
    assert "Traceback" not in err and "name" in err
    assert snapshot(tmp_path) == before


def test_default_folder_is_out_slash_name(tmp_path):
    p = problem_named(tmp_path, "my-loop.v2")
    assert solve(str(p), cwd=tmp_path)[0] == 0
    assert (tmp_path / "out" / "my-loop.v2" / "program.json").is_file()


def test_failed_solve_leaves_no_folder(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(EXAMPLE.read_text().replace("latency: 200", "latency: -3"))
    code, _, err = solve(str(p), "-o", "o", cwd=tmp_path)
    assert code == 2 and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    assert no_temp_left(tmp_path)


def test_verify_certificate_folder_never_overwrites_user_files(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "p.yaml")
    assert solve("p.yaml", "-o", "o", cwd=tmp_path)[0] == 0
    mine = tmp_path / "certs"
    mine.mkdir()
    (mine / "manifest.json").write_text("my manifest")
    err = io.StringIO()
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["verify", "o", "--certificate", "certs", "-q"])
    finally:
        os.chdir(old)
    assert code == 2 and "Traceback" not in err.getvalue()
    assert (mine / "manifest.json").read_text() == "my manifest"

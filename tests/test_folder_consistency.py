"""An output folder's three files must agree: problem.yaml, schedule.json and program.json.

What a user sees: after editing a folder's problem.yaml (a tile, the stages, the warps) or mixing files
of two folders, ``synth emit``, ``synth verify OUT`` and ``synth.kernel.load`` stop with a located error
(exit 2, no traceback) instead of emitting a kernel of one problem with another's pipeline; an edited
wait count in program.json is still what ``synth verify`` proves (or refutes).
"""

from __future__ import annotations

import json
import shutil

import pytest

from synth.api import solve
from synth.cli import main
from synth.errors import SynthError

DOC = """\
kind: gemm
shape: {M: 256, N: 256, K: 512}
tile: {BM: 64, BN: 64, BK: 32}
warps: 4
stages: 3
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("fc")
    (d / "p.yaml").write_text(DOC)
    solve(str(d / "p.yaml"), out=str(d / "out"))
    return d / "out"


def _synth(capsys, *args):
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.err


@pytest.mark.parametrize("edit, file, words", [
    (("BM: 64", "BM: 128"), "program.json", "not the lowering"),
    (("BK: 32", "BK: 64"), "schedule.json", "has no op 'load_"),
    (("stages: 3", "stages: 2"), "schedule.json", "not a valid schedule"),
    (("warps: 4", "warps: 8"), "schedule.json", "not a valid schedule"),
])
def test_an_edited_problem_is_refused_at_the_file_that_disagrees(folder, tmp_path, capsys, edit, file, words):
    out = tmp_path / "out"
    shutil.copytree(folder, out)
    (out / "problem.yaml").write_text((out / "problem.yaml").read_text().replace(*edit))
    for cmd in (("emit", str(out)), ("verify", str(out))):
        rc, err = _synth(capsys, *cmd)
        assert rc == 2, (cmd, err)
        assert f"{out / file}: error:" in err and words in err and "Traceback" not in err, err
    import synth.kernel

    with pytest.raises(SynthError) as e:  # the light runtime has no lowering: the folder's manifest refuses the edit
        synth.kernel.load(str(out), backend="emulator")
    assert f"{out / 'problem.yaml'}: error: problem.yaml changed since synth wrote it" in str(e.value)


def test_files_of_two_folders_do_not_mix(folder, tmp_path, capsys):
    other = tmp_path / "other"
    (tmp_path / "q.yaml").write_text(DOC.replace("BN: 64", "BN: 128"))
    solve(str(tmp_path / "q.yaml"), out=str(other))
    out = tmp_path / "out"
    shutil.copytree(folder, out)
    shutil.copy(other / "program.json", out / "program.json")
    rc, err = _synth(capsys, "emit", str(out))
    assert rc == 2 and "program.json: error:" in err, err


def test_an_edited_wait_count_is_still_proved_or_refuted(folder, tmp_path, capsys):
    for delta, rc in ((-1, 0), (1, 1)):
        out = tmp_path / f"out{delta}"
        shutil.copytree(folder, out)
        doc = json.loads((out / "program.json").read_text())
        w = next(w for w in doc["waits"] if w["part"] == "body")
        w["in_flight"] = w["in_flight"] + delta
        (out / "program.json").write_text(json.dumps(doc, indent=2))
        got, err = _synth(capsys, "verify", str(out), "-q")
        assert got == rc, (delta, err[-500:])

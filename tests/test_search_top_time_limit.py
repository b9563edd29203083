"""`synth search --top` when a folder's proofs run out of `--time-limit`: the ranking is kept (printed, and in the
JSON), the folders proven are written, each folder not written is named, exit 1 with code time_limit
(docs/commands.md, "The time limit")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = ["--M", "4096", "--N", "4096", "--K", "4096", "--arch", "sm_90"]


def _synth(*args: str, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "synth", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_top_time_limit_keeps_the_ranking_and_names_each_folder_not_written(tmp_path):
    """A tiny --time-limit: no candidate's proofs fit it. The ranking table is still printed on stdout, stderr names
    both folders not written, nothing is left on disk, exit 1."""
    out = tmp_path / "s"
    r = _synth("search", "gemm", *SHAPE, "--top", "2", "--no-sass", "--time-limit", "0.05", "--out", str(out),
               cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "128x256x64" in r.stdout and "reference configurations" in r.stdout  # the ranking, printed in full
    assert "error: the time limit (0.05 s) of each --top folder ran out for 2 of 2 folder(s)" in r.stderr
    assert "#1 " in r.stderr and "#2 " in r.stderr and "not written" in r.stderr and "no folder was written" in r.stderr
    assert "fix: raise --time-limit" in r.stderr
    assert not out.exists() or not any(out.iterdir())  # no folder, none half-written


@pytest.mark.slow  # the same promise as the test above, read from --json
def test_top_time_limit_json_has_the_ranking_and_the_folders_not_written(tmp_path):
    out = tmp_path / "s"
    r = _synth("search", "gemm", *SHAPE, "--top", "2", "--no-sass", "--time-limit", "0.05", "--out", str(out),
               "--json", cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr
    env = json.loads(r.stdout)
    assert env["ok"] is False and env["exit_status"] == 1
    assert [e["code"] for e in env["errors"]] == ["time_limit"]
    res = env["result"]
    assert res["candidates"] and res["candidates"][0]["rank"] == 1  # the ranking computed is not lost
    assert res["folders"] == []
    missing = res["not_written"]
    assert [m["rank"] for m in missing] == [1, 2]
    assert all(m["folder"].startswith(str(out)) and "ran out during" in m["reason"] for m in missing)
    assert missing[0]["folder"] in env["errors"][0]["message"]


@pytest.mark.slow  # the CLI's --top time limit stays in the quick tier
def test_write_candidates_writes_the_folders_proven_and_names_the_others(monkeypatch, tmp_path):
    """A candidate whose solve runs out of time is skipped (its folder not written) and the later ones are still
    written; TopIncomplete names both kinds."""
    import synth.pipeline as pipeline
    from synth.api import search
    from synth.deadline import TimeUp
    from synth.flow.candidates import TopIncomplete, write_candidates

    res = search(512, 512, 512, arch="sm_80", top=2, time_limit=30)
    real_run = pipeline.run
    calls = []

    def run(problem, **kw):
        calls.append(problem.name)
        if len(calls) == 1:
            raise TimeUp("prove", kw.get("time_limit"))
        return real_run(problem, **kw)

    monkeypatch.setattr(pipeline, "run", run)
    with pytest.raises(TopIncomplete) as ei:
        write_candidates(res, str(tmp_path / "o"), k=2, time_limit=60)
    e = ei.value
    assert len(calls) == 2 and len(e.written) == 1 and [m[0] for m in e.missing] == [1]
    assert os.path.isdir(e.written[0]) and os.path.basename(e.written[0]).startswith("02-")
    assert not os.path.exists(e.missing[0][1])
    assert "1 of 2 folder(s)" in e.msg and e.written[0] in e.msg and "ran out during prove" in e.msg

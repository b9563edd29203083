"""``synth solve`` on a warp-specialized body file (``kind: attention | gemm_kloop | body``; synth/flow/ws.py,
docs/problem-format.md "Warp-specialized bodies", docs/outputs.md "A warp-specialized body's folder"), from a
subprocess as a user runs it: the folder it writes, ``schedule.json`` read back, a bad key (exit 2 at file:line),
the time limit, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from synth.errors import SynthError

WS = ROOT / "problems" / "ws"


def start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "synth", *args], cwd=str(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def synth(*args: str, cwd: Path, timeout: float = 120) -> tuple[int, str, str]:
    proc = start(*args, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"synth {' '.join(args)} did not end within {timeout} s; stderr: {err[-2000:]}")
    return proc.returncode, out, err


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith((".synth-tmp-", ".synth-old-")))


def folder_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if not p.name.startswith("."))


def read_back(folder: Path):
    """The folder's problem.yaml and schedule.json read back: (problem, schedule, schedule.json's document)."""
    from synth.flow.ws import load_solve_problem, schedule_from_json

    problem = load_solve_problem(str(folder / "problem.yaml"))
    doc = json.loads((folder / "schedule.json").read_text())
    return problem, schedule_from_json(doc, str(folder / "schedule.json")), doc


@pytest.fixture(scope="module")
def attention_d128(tmp_path_factory):
    """``synth solve problems/ws/attention-d128-f16.yaml -o out --json``, run once: (folder, exit, envelope)."""
    d = tmp_path_factory.mktemp("ws_attention")
    rc, out, err = synth("solve", str(WS / "attention-d128-f16.yaml"), "-o", "out", "--json", cwd=d)
    return d / "out", rc, json.loads(out), err


def test_attention_d128_writes_the_proven_folder(attention_d128):
    folder, rc, doc, err = attention_d128
    assert rc == 0, (doc["errors"], err[-2000:])
    assert doc["command"] == "solve" and doc["ok"] and doc["errors"] == []
    assert folder_files(folder) == ["problem.yaml", "program.json", "program.txt", "schedule.json", "verify.txt"]
    assert (folder / "problem.yaml").read_bytes() == (WS / "attention-d128-f16.yaml").read_bytes()
    res = doc["result"]
    assert res["kind"] == "attention" and res["verified"] is True and res["refutations"] == []
    assert res["files"] == folder_files(folder)
    assert [p["name"] for p in res["phases"]] == ["load", "schedule", "lower", "prove", "write"]
    # docs/ws_model.md's row: II 2,048 (the tensor bound), OPTIMAL, a producer and two staggered consumers
    sched = json.loads((folder / "schedule.json").read_text())
    assert res["schedule"] == sched
    assert (sched["ii"], sched["status"], sched["gap"]) == (2048, "OPTIMAL", 0.0)
    assert sched["arrangement"]["producer"] and sched["arrangement"]["consumers"] == 2
    assert sched["arrangement"]["mode"] == "stagger"
    text = (folder / "verify.txt").read_text()
    assert "all obligations proven" in text and "every n >= 0" in text
    total = sum(c["proven"] for c in res["obligations"].values())
    assert f"({total}/{total} obligations" in text


def test_schedule_json_round_trips_and_program_json_is_its_lowering(attention_d128):
    """schedule.json reads back as the schedule written (again the same JSON), passes the model's independent
    re-check, and program.json is the lowering of that schedule, byte for byte."""
    from synth.flow.ws import schedule_to_json
    from synth.hopper.ir import dumps
    from synth.lower.hopper_attention import lower_attention
    from synth.model.ws_check import check_ws

    folder, rc, _, _ = attention_d128
    assert rc == 0
    problem, sched, doc = read_back(folder)
    assert schedule_to_json(problem, sched) == doc
    assert check_ws(problem.body, problem.machine, sched) == []
    assert (folder / "program.json").read_text() == dumps(lower_attention(problem.body, sched).program)
    # an edited schedule.json is still read, and the re-check names what it breaks
    bad = dict(doc, ii=doc["ii"] // 2)
    from synth.flow.ws import schedule_from_json
    assert check_ws(problem.body, problem.machine, schedule_from_json(bad)) != []


def test_a_schedule_json_of_another_format_is_refused():
    from synth.flow.ws import schedule_from_json

    for doc in ({"format": "synth-schedule", "version": 1}, {"format": "synth-ws-schedule", "version": 1},
                ["not", "a", "mapping"]):
        with pytest.raises(SynthError) as e:
            schedule_from_json(doc, "x/schedule.json")
        assert e.value.loc.file == "x/schedule.json" and "schedule.json" in e.value.msg


def test_gemm_kloop_writes_its_schedule(tmp_path):
    """A GEMM k-loop is scheduled only (no program is lowered, nothing to prove): problem.yaml and schedule.json,
    with the pins of the file (cooperative consumers behind a producer, 4 stages) and K_PIPE_MMAS chosen."""
    from synth.model.ws_check import check_ws

    rc, out, err = synth("solve", str(WS / "gemm-kloop-128x256x64-f16.yaml"), "-o", "out", cwd=tmp_path)
    assert rc == 0, err[-2000:]
    folder = tmp_path / "out"
    assert folder_files(folder) == ["problem.yaml", "schedule.json"]
    assert "scheduled only" in out and "wrote out/" in out
    problem, sched, doc = read_back(folder)
    assert problem.kind == "gemm_kloop" and doc["kind"] == "gemm_kloop"
    assert doc["arrangement"]["mode"] == "coop" and doc["arrangement"]["producer"] is True
    assert doc["rings"] == {"stage": 4}
    assert [o["groups"] for o in doc["ops"] if o["unit"] == "tensor"] == [1]  # docs/ws_model.md: K_PIPE_MMAS 1
    assert doc["ii"] == 1024 and check_ws(problem.body, problem.machine, sched) == []


def test_a_bad_key_exits_2_at_its_line(tmp_path):
    src = (WS / "attention-d128-f16.yaml").read_text()
    lines = src.splitlines()
    bad = tmp_path / "bad.yaml"
    bad.write_text(src + "BK: 64\n")
    rc, out, err = synth("solve", str(bad), "-o", "out", cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err, err
    assert err.startswith(f"{bad}:{len(lines) + 1}:1: error: 'BK' does not belong to kind: attention"), err
    assert "fix: keys of kind attention: head_dim, BM, BN, dtype" in err
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []
    # --json: the envelope names the file and the line
    rc, out, err = synth("solve", str(bad), "-o", "out", "--json", cwd=tmp_path)
    doc = json.loads(out)
    assert rc == 2 and doc["errors"][0]["code"] == "bad_input", doc
    assert (doc["errors"][0]["file"], doc["errors"][0]["line"]) == (str(bad), len(lines) + 1)
    # a misspelt pin, in a flow mapping: its column too
    kl = tmp_path / "kloop.yaml"
    kl.write_text((WS / "gemm-kloop-128x256x64-f16.yaml").read_text().replace("depth:", "depht:"))
    rc, _, err = synth("solve", str(kl), "-o", "out", cwd=tmp_path)
    row = next(i for i, ln in enumerate(kl.read_text().splitlines(), 1) if "depht" in ln)
    assert rc == 2 and err.startswith(f"{kl}:{row}:"), err
    assert "did you mean 'depth'?" in err and "Traceback" not in err


def test_other_commands_name_solve_for_a_body(tmp_path):
    """The problem loader (synth lower, synth.load) refuses a body file, naming the command that reads it; a
    misspelt kind gets a "did you mean"."""
    from synth.load import WS_BODY_KINDS
    from synth.model.ws_read import KINDS

    assert WS_BODY_KINDS == KINDS
    rc, _, err = synth("lower", str(WS / "attention-d128-f16.yaml"), cwd=tmp_path)
    assert rc == 2 and "warp-specialized loop body, which only 'synth solve' reads" in err, err
    bad = tmp_path / "typo.yaml"
    bad.write_text("name: x\nkind: atention\nhead_dim: 128\n")
    rc, _, err = synth("solve", str(bad), "-o", "out", cwd=tmp_path)
    assert rc == 2 and err.startswith(f"{bad}:2:7: error: unknown problem kind 'atention'"), err
    assert "did you mean 'attention'?" in err


def test_the_time_limit_is_honoured(tmp_path):
    """The three-consumer body (2 to 8.5 s of CP-SAT on 2 cores) under --time-limit 2: either the time limit
    (exit 1, code time_limit, the phase named, nothing written) or a folder whose schedule.json says what was
    proven (OPTIMAL, or FEASIBLE with its bound, its gap and a warning), and the command ends near the limit."""
    limit = 2.0
    t0 = time.monotonic()
    rc, out, err = synth("solve", str(WS / "attention-d64-f16.yaml"), "-o", "out", "--time-limit", str(limit),
                         "--no-verify", "--json", cwd=tmp_path)
    took = time.monotonic() - t0
    doc = json.loads(out)
    assert rc in (0, 1), (rc, doc, err[-2000:])
    assert took < limit + 15, took  # the interpreter's start and imports are not counted in the limit
    assert leftovers(tmp_path) == []
    if rc == 1:
        e = doc["errors"][0]
        assert e["code"] == "time_limit" and "time limit (2 s)" in e["message"], e
        assert "nothing was written" in e["message"]
        assert not (tmp_path / "out").exists()
        return
    sched = json.loads((tmp_path / "out" / "schedule.json").read_text())
    assert sched["solve_seconds"] <= limit
    assert sched["gap"] == (sched["ii"] - sched["bound"]) / sched["ii"]
    if sched["status"] == "FEASIBLE":
        assert any("FEASIBLE" in w and f"{100 * sched['gap']:.2f}%" in w for w in doc["warnings"]), doc
    else:
        assert sched["status"] == "OPTIMAL" and sched["gap"] == 0 and doc["warnings"] == []


def test_a_deadline_already_past_names_the_schedule_phase():
    from synth.deadline import Deadline, TimeUp
    from synth.flow.ws import load_solve_problem, run_ws

    problem = load_solve_problem(str(WS / "body-two-stage.yaml"))
    with pytest.raises(TimeUp) as e:
        run_ws(problem, deadline=Deadline(time.monotonic() - 1, 1.0))
    assert e.value.phase == "schedule"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the moment to interrupt is read from /proc")
def test_ctrl_c_mid_solve_leaves_no_folder(tmp_path):
    """SIGINT once the command has used 2 CPU seconds (its imports take under one; the three-consumer body's
    schedule and proof about four): exit 130, the envelope's code interrupted, no folder, no temporary folder."""
    proc = start("solve", str(WS / "attention-d64-f16.yaml"), "-o", "out", "--time-limit", "300", "--json",
                 cwd=tmp_path)
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
        assert time.monotonic() < deadline, "the moment to interrupt never came"
        try:
            if cpu_seconds(proc.pid) >= 2.0:
                break
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    doc = json.loads(out)
    assert doc["errors"][0]["code"] == "interrupted", doc
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_refuted_program_exits_1_naming_where(tmp_path, monkeypatch, capsys):
    """A bug put into the lowered program (the V slot released before pv's wait_group: a mutant of
    synth.lower.hopper_attention) is refuted: exit 1, code refuted, the folder written with verify.txt naming the
    class, the warp group, the KV block, the barrier with its slot and phase, and the trip count."""
    import synth.flow.ws as ws
    from synth.cli import main
    from synth.lower.hopper_attention import attention_mutant

    real = ws.lower_attention
    monkeypatch.setattr(ws, "lower_attention", lambda body, sched: attention_mutant(real(body, sched),
                                                                                    "v_released_early"))
    out = tmp_path / "out"
    rc = main(["solve", str(WS / "attention-d128-f16.yaml"), "-o", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["errors"][0]["code"] == "refuted", doc["errors"]
    assert doc["errors"][0]["file"] == str(out / "verify.txt")
    assert doc["result"]["verified"] is False
    ref = next(r for r in doc["result"]["refutations"] if r["class"] == "release_after_wgmma")
    assert (ref["warp_group"], ref["block"], ref["barrier"], ref["slot"], ref["phase"], ref["n"]) == \
        ("consumer0", 0, "empty_V", 0, 0, 1)
    text = (out / "verify.txt").read_text()
    assert "NOT PROVEN" in text
    assert "refuted [release_after_wgmma] consumer0, block 0, empty_V[0] phase 0, n = 1:" in text
    assert folder_files(out) == ["problem.yaml", "program.json", "program.txt", "schedule.json", "verify.txt"]


def test_the_api_solves_a_body_file_as_the_command_does(tmp_path):
    """synth.api.solve, the command's Python twin, reads a body file too and writes the same folder."""
    from synth import api
    from synth.flow.ws import WsResult

    r = api.solve(str(WS / "body-two-stage.yaml"), out=str(tmp_path / "out"), time_limit=60)
    assert isinstance(r, WsResult) and r.proven and r.program is None and r.report is None
    assert [n for n, _ in r.phases] == ["schedule"]
    problem, sched, doc = read_back(tmp_path / "out")
    assert sched == r.schedule
    assert (problem.body, problem.machine, problem.pins, problem.source) == \
        (r.problem.body, r.problem.machine, r.problem.pins, r.problem.source)
    assert folder_files(tmp_path / "out") == ["problem.yaml", "schedule.json"]

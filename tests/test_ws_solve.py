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
    assert folder_files(folder) == ["kernel.cu", "problem.yaml", "program.json", "program.txt", "schedule.json",
                                    "timeline.png", "timeline.svg", "verify.txt"]
    assert (folder / "problem.yaml").read_bytes() == (WS / "attention-d128-f16.yaml").read_bytes()
    res = doc["result"]
    assert res["kind"] == "attention" and res["verified"] is True and res["refutations"] == []
    assert res["files"] == folder_files(folder)
    assert [p["name"] for p in res["phases"]] == ["load", "schedule", "lower", "prove", "emit", "write"]
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
    # a refuted program gets no kernel.cu; the timeline is the schedule's picture
    assert folder_files(out) == ["problem.yaml", "program.json", "program.txt", "schedule.json", "timeline.png",
                                 "timeline.svg", "verify.txt"]


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


# ------------------------------------------------------------------------------------------------ synth verify, certify
# of a warp-specialized body's folder (synth.flow.ws.verify_ws_output, docs/commands.md "Warp-specialized bodies")

def copy_folder(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def edit_json(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def test_verify_proves_the_folder_again(attention_d128, tmp_path):
    """synth verify OUT (and OUT/program.json) re-checks the schedule and proves the program again for every n >= 0:
    exit 0, the obligations by class as solve counted them."""
    folder, rc, doc, _ = attention_d128
    assert rc == 0
    rc, out, err = synth("verify", str(folder), cwd=tmp_path)
    assert rc == 0, err[-2000:]
    assert "a warp-specialized body's folder (kind: attention)" in out and "all obligations proven" in out, out
    assert "every n >= 0" in out
    rc, out, err = synth("verify", str(folder / "program.json"), "--json", cwd=tmp_path)
    env = json.loads(out)
    assert rc == 0 and env["ok"] and env["errors"] == [], (env["errors"], err[-2000:])
    res = env["result"]
    assert (res["kind"], res["ok"], res["proven"], res["refutations"]) == ("attention", True, True, [])
    assert res["obligations"] == doc["result"]["obligations"]
    assert os.path.samefile(res["folder"], folder)


def test_verify_refuses_a_program_that_is_not_the_lowering(attention_d128, tmp_path):
    """A wait_group removed from program.json: not the lowering of problem.yaml under schedule.json, exit 2 at the
    statement's line, the fix naming what may be edited."""
    folder, rc, _, _ = attention_d128
    bad = copy_folder(folder, tmp_path / "bad")

    def drop_wait(doc):
        role = doc["roles"][1]
        stmts = role["parts"][0]["stmts"]
        k = next(i for i, s in enumerate(stmts) if s["kind"] == "wait")
        del stmts[k]
        del role["waits"][0]
        for s in stmts:
            if s["kind"] == "wait":
                s["wait"] -= 1

    edit_json(bad / "program.json", drop_wait)
    rc, out, err = synth("verify", str(bad), cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err, err
    head = err.splitlines()[0]
    assert head.startswith(f"{bad / 'program.json'}:") and "is not the lowering of problem.yaml under " \
        "schedule.json: roles[1].parts[0].stmts[" in head and "(role consumer0)" in head, err
    line = int(head.split(":")[1])
    assert '"kind"' in (bad / "program.json").read_text().splitlines()[line - 1]
    assert "fix: program.json is synth's lowering" in err and "in_flight" in err


def test_verify_refutes_an_edited_barrier_phase_or_wait_count(attention_d128, tmp_path):
    """What the proof checks may be edited, and is proven, not trusted: the producer's wait on empty_K for the
    consumers' release of phase 0 instead of the fresh barrier's phase 1 deadlocks (exit 1, the warp group, block,
    barrier, slot and phase); qk's wait_group 0 raised to 1 lets the softmax read S while qk may be running."""
    folder, rc, _, _ = attention_d128
    phase = copy_folder(folder, tmp_path / "phase")

    def wrong_phase(doc):
        stmts = doc["roles"][0]["parts"][0]["stmts"]
        s = next(s for s in stmts if s["kind"] == "try_wait" and s["barrier"] == "empty_K")
        assert s["state"]["phase"] == 1
        s["state"]["phase"] = 0

    edit_json(phase / "program.json", wrong_phase)
    rc, out, err = synth("verify", str(phase), "--json", cwd=tmp_path)
    env = json.loads(out)
    assert rc == 1 and env["errors"][0]["code"] == "refuted", (env["errors"], err[-2000:])
    assert env["errors"][0]["file"] == str(phase / "program.json")
    assert "[no_deadlock] producer, block 0, empty_K[0] phase 0, n = 1" in env["errors"][0]["message"]
    ref = env["result"]["refutations"][0]
    assert (ref["class"], ref["warp_group"], ref["block"], ref["barrier"], ref["slot"], ref["phase"], ref["n"]) == \
        ("no_deadlock", "producer", 0, "empty_K", 0, 0, 1)
    rc, out, err = synth("verify", str(phase), cwd=tmp_path)
    assert rc == 1 and "refuted [no_deadlock] producer, block 0, empty_K[0] phase 0, n = 1:" in out, (out, err)

    count = copy_folder(folder, tmp_path / "count")
    edit_json(count / "program.json", lambda doc: doc["roles"][1]["waits"][1].update(in_flight=1))
    rc, out, err = synth("verify", str(count), "--json", cwd=tmp_path)
    env = json.loads(out)
    assert rc == 1 and env["errors"][0]["code"] == "refuted", env["errors"]
    refs = env["result"]["refutations"]
    assert any((r["class"], r["warp_group"], r["block"], r["barrier"], r["n"]) ==
               ("register", "consumer0", 0, "wgmma group", 1) and "rowmax(0) against qk(0)" in r["summary"]
               for r in refs), refs


def test_verify_refuses_an_edited_schedule(attention_d128, tmp_path):
    """schedule.json is synth's choice: a start moved breaks the model's re-check, a deeper ring breaks its shared
    memory (each exit 2 at the line in schedule.json); a schedule of another body is named as such."""
    folder, rc, _, _ = attention_d128
    moved = copy_folder(folder, tmp_path / "moved")
    doc = json.loads((folder / "schedule.json").read_text())
    k = next(i for i, o in enumerate(doc["ops"]) if o["name"] == "rowmax")
    edit_json(moved / "schedule.json", lambda d: d["ops"][k].update(start=d["ops"][k]["start"] + 7))
    rc, _, err = synth("verify", str(moved), cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err, err
    head = err.splitlines()[0]
    assert head.startswith(f"{moved / 'schedule.json'}:") and "not a valid schedule of problem.yaml" in head, err
    line = int(head.split(":")[1])
    lines = (moved / "schedule.json").read_text().splitlines()
    assert any('"rowmax"' in ln for ln in lines[line - 1:line + 2]), (line, lines[line - 1:line + 2])
    assert "fix: re-run 'synth solve'" in err

    deeper = copy_folder(folder, tmp_path / "deeper")
    edit_json(deeper / "schedule.json", lambda d: d["rings"].update(K_s=d["rings"]["K_s"] + 1))
    rc, _, err = synth("verify", str(deeper), cwd=tmp_path)
    assert rc == 2 and err.startswith(f"{deeper / 'schedule.json'}:") and "shared memory" in err, err

    other = copy_folder(folder, tmp_path / "other")
    edit_json(other / "schedule.json", lambda d: d.update(body="another-body"))
    rc, _, err = synth("verify", str(other), cwd=tmp_path)
    assert rc == 2 and "files of two folders" in err, err


def test_trip_counts_from_zero_only_for_the_attention_program(attention_d128, tmp_path):
    """The Hopper reader takes min_trip_count 0 only where the caller says the loop may run zero times (the attention
    program of a body's folder): program.json alone, without its folder, is refused as before; a numeric trip count
    of 0 is refused even then."""
    from synth.hopper.ir import load_hopper

    folder, rc, _, _ = attention_d128
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "program.json").write_bytes((folder / "program.json").read_bytes())
    rc, _, err = synth("verify", str(alone / "program.json"), cwd=tmp_path)
    assert rc == 2 and "loop.min_trip_count: 0 is outside 1 .. 65536" in err, err
    with pytest.raises(SynthError, match="min_trip_count: 0 is outside 1"):
        load_hopper(str(folder / "program.json"))
    assert load_hopper(str(folder / "program.json"), zero_trips=True).min_trip_count == 0
    edit_json(alone / "program.json", lambda d: d["loop"].update(trip_count=0))
    with pytest.raises(SynthError, match="trip_count: 0 is outside 1"):
        load_hopper(str(alone / "program.json"), zero_trips=True)


@pytest.mark.slow  # the attention folder's verify runs in the quick tier
def test_verify_and_certify_a_body_that_is_scheduled_only(tmp_path):
    """kind: body has no program: synth verify re-checks its schedule (exit 0, saying nothing is proven), refuses an
    edited one, and synth certify says there is no certificate."""
    rc, _, err = synth("solve", str(WS / "body-two-stage.yaml"), "-o", "out", cwd=tmp_path)
    assert rc == 0, err[-2000:]
    rc, out, err = synth("verify", "out", "--json", cwd=tmp_path)
    res = json.loads(out)["result"]
    assert rc == 0 and (res["kind"], res["ok"], res["proven"], res["obligations"]) == ("body", True, None, None), err
    rc, out, _ = synth("verify", "out", cwd=tmp_path)
    assert rc == 0 and "kind: body is scheduled only: there is no program to prove" in out
    rc, _, err = synth("certify", "out", cwd=tmp_path)
    assert rc == 2 and "(kind: body): it holds no program" in err, err
    edit_json(tmp_path / "out" / "schedule.json", lambda d: d.update(ii=d["ii"] // 2))
    rc, _, err = synth("verify", "out", cwd=tmp_path)
    assert rc == 2 and err.startswith("out/schedule.json:") and "not a valid schedule" in err, err


def test_verify_names_the_line_of_a_malformed_file(attention_d128, tmp_path):
    """A schedule.json cut short, a problem.yaml that is not YAML, a program.json missing: exit 2, file:line:col
    (a file's name where there is no line) and a fix, no traceback."""
    folder, rc, _, _ = attention_d128
    cut = copy_folder(folder, tmp_path / "cut")
    text = (folder / "schedule.json").read_text()
    (cut / "schedule.json").write_text(text[: len(text) // 2])
    rc, _, err = synth("verify", str(cut), cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err, err
    assert err.startswith(f"{cut / 'schedule.json'}:") and err.split(":")[1].isdigit() and "fix:" in err, err
    yaml = copy_folder(folder, tmp_path / "yaml")
    (yaml / "problem.yaml").write_text("name: x\nkind: [\n")
    rc, _, err = synth("verify", str(yaml / "program.json"), cwd=tmp_path)
    assert rc == 2 and err.startswith(f"{yaml / 'problem.yaml'}:3:") and "fix:" in err, err
    gone = copy_folder(folder, tmp_path / "gone")
    (gone / "program.json").unlink()
    rc, _, err = synth("verify", str(gone), cwd=tmp_path)
    assert rc == 2 and err.startswith(f"{gone / 'program.json'}: error: cannot read program.json") and "fix:" in err

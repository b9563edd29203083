"""The ``synth`` command as a user runs it: exit codes, files written, clean errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import PROBLEMS, ROOT


def synth(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True,
                          cwd=cwd or str(ROOT), timeout=600)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "two-stage"
    r = synth("solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(out), "--time-limit", "10")
    assert r.returncode == 0, r.stderr
    return out, r


def test_solve_writes_the_spec_files(solved):
    out, r = solved
    for name in ("schedule.json", "program.txt", "program.json", "timeline.svg", "certificate/manifest.json"):
        assert (out / name).exists(), name
    doc = json.loads((out / "program.json").read_text())
    assert doc["waits"], "the two-stage example needs waits"
    for w in doc["waits"]:
        assert set(w) >= {"part", "queue", "in_flight", "before", "tight"}
    sched = json.loads((out / "schedule.json").read_text())
    assert sched["status"] in ("OPTIMAL", "FEASIBLE")
    assert "predicted cycles" in r.stdout


def test_solve_refuses_to_overwrite_without_force(solved, tmp_path):
    out, _ = solved
    before = sorted(os.listdir(out))
    r = synth("solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(out))
    assert r.returncode == 2
    assert "--force" in r.stderr and "Traceback" not in r.stderr
    assert sorted(os.listdir(out)) == before


def test_verify_and_certify_an_output_folder(solved):
    out, _ = solved
    assert synth("verify", str(out)).returncode == 0
    r = synth("certify", str(out / "certificate"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_verify_rejects_an_edited_wait_count(solved, tmp_path):
    out, _ = solved
    doc = json.loads((out / "program.json").read_text())
    tight = [i for i, w in enumerate(doc["waits"]) if w["tight"]]
    assert tight, "the two-stage example has a tight wait"
    w = doc["waits"][tight[0]]
    w["in_flight"] = f"({w['in_flight']}) + 1" if isinstance(w["in_flight"], str) else w["in_flight"] + 1
    edited = tmp_path / "program.json"
    edited.write_text(json.dumps(doc))
    r = synth("verify", str(edited))
    assert r.returncode == 1
    assert "refuted" in (r.stdout + r.stderr)


def test_bad_problem_exits_2_without_traceback_or_output(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace("latency: 200", "latncy: 200"))
    out = tmp_path / "out"
    r = synth("solve", str(bad), "-o", str(out))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"{bad}:" in r.stderr and "latncy" in r.stderr and "fix:" in r.stderr
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".synth-")]


def test_missing_file_is_a_clean_error(tmp_path):
    r = synth("solve", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "nope.yaml" in r.stderr


def test_lower_prints_the_rfc_program():
    r = synth("lower", str(PROBLEMS / "rfc0077-gemm.yaml"))
    assert r.returncode == 0, r.stderr
    assert "async_wait_queue(0, 2 - i)" in r.stdout
    assert "async_wait_queue(0, 1 - i)" in r.stdout


def test_lower_without_pins_is_a_clean_error():
    r = synth("lower", str(PROBLEMS / "gemm-sm80-f16.yaml"))
    assert r.returncode == 2 and "schedule.stage" in r.stderr and "Traceback" not in r.stderr


def test_emit_exports(solved):
    out, _ = solved
    r = synth("emit", str(out), "--target", "tvm")
    assert r.returncode == 0 and "software_pipeline_stage" in r.stdout
    r = synth("emit", str(out), "--target", "mlir")
    assert r.returncode == 0 and "__test_pipelining_stage__" in r.stdout
    r = synth("emit", str(out), "--target", "cuda")
    assert r.returncode == 2 and "not a GEMM" in r.stderr


def test_run_without_gpu_says_so(solved):
    out, _ = solved
    r = synth("run", str(out))
    assert r.returncode in (1, 2)
    assert "Traceback" not in r.stderr

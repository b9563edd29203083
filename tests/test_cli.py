"""The ``synth`` command as a user runs it: exit codes, files written, clean errors, one JSON envelope."""

from __future__ import annotations

import json
import os

import pytest

from conftest import PROBLEMS, ROOT
from conftest import synth_cli as synth
from synth import __version__
from synth.cli import main
from synth.envelope import CODES, FORMAT, VERSION

SMALL_GEMM = """\
name: small-gemm
kind: gemm
shape: {M: 64, N: 64, K: 256}
dtype: f16
tile: {BM: 64, BN: 64, BK: 64}
warps: 4
stages: 3
arch: sm_80
"""


def run_json(capsys, *args: str) -> tuple[int, dict]:
    """``synth ARGS --json`` in-process: (exit status, envelope), checking the envelope's fixed shape."""
    rc = main([*args, "--json"])
    out = capsys.readouterr().out
    env = json.loads(out)
    assert set(env) == {"format", "version", "synth", "command", "ok", "exit_status", "result", "errors",
                        "warnings"}
    assert env["format"] == FORMAT and env["version"] == VERSION and env["synth"] == __version__
    assert env["exit_status"] == rc and env["ok"] == (rc == 0)
    for e in env["errors"]:
        assert set(e) == {"code", "file", "line", "column", "message", "fix"} and e["code"] in CODES
        assert CODES[e["code"]] <= rc or rc == 130
    if rc:
        assert env["errors"], "a failing command names its error"
    return rc, env


@pytest.fixture(scope="module")
def solved(solve_once):
    """(folder, the solve's run): rfc0077-two-stage solved once for the run (shared: copy before editing)."""
    return solve_once(PROBLEMS / "rfc0077-two-stage.yaml", "--time-limit", "120")


@pytest.fixture(scope="module")
def gemm_out(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemm")
    (d / "small.yaml").write_text(SMALL_GEMM)
    out = d / "out"
    assert main(["solve", str(d / "small.yaml"), "-o", str(out), "-q", "--time-limit", "120"]) == 0
    return out


# ---------------------------------------------------------------------------------------------- solve

def test_solve_writes_the_documented_files(solved):
    out, r = solved
    for name in ("schedule.json", "program.txt", "program.json", "problem.yaml", "timeline.svg", "timeline.png",
                 "verify.txt", "certificate/manifest.json", ".synth-output.json"):
        assert (out / name).exists(), name
    assert (out / "timeline.png").read_bytes().startswith(b"\x89PNG")
    doc = json.loads((out / "program.json").read_text())
    assert doc["waits"], "the two-stage example needs waits"
    for w in doc["waits"]:
        assert set(w) >= {"part", "queue", "in_flight", "before", "tight"}
    sched = json.loads((out / "schedule.json").read_text())
    assert sched["status"] in ("OPTIMAL", "FEASIBLE")
    assert "predicted cycles" in r.stdout


def test_solve_summary_reports_wall_time_per_phase(solved):
    _, r = solved
    line = next(ln for ln in r.stdout.splitlines() if "wall time" in ln)
    for phase in ("load", "schedule", "lower", "prove", "write"):
        assert phase in r.stdout[r.stdout.index(line):], phase
    assert "solve time" not in r.stdout  # the CP-SAT figure alone misled users


def test_solve_json_envelope(capsys, tmp_path):
    rc, env = run_json(capsys, "solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(tmp_path / "o"),
                       "--time-limit", "30")
    assert rc == 0 and env["command"] == "solve"
    res = env["result"]
    assert res["verified"] is True and res["obligations"]["proven"] == res["obligations"]["total"] > 0
    assert [p["name"] for p in res["phases"]] == ["load", "graph", "schedule", "lower", "prove", "write"]
    assert res["wall_seconds"] >= sum(p["seconds"] for p in res["phases"]) * 0.99
    assert {w["status"] for w in res["waits"]} == {"proven"}
    assert res["stage_bound"]["max_stage"] >= res["stage_bound"]["used"]


def test_solve_says_when_the_stage_bound_limits_the_result(capsys, tmp_path):
    rc, env = run_json(capsys, "solve", str(PROBLEMS / "two-queues.yaml"), "-o", str(tmp_path / "o"),
                       "--time-limit", "60")
    assert rc == 0
    bound = env["result"]["stage_bound"]
    assert bound == {**bound, "max_stage": 6, "used": 6, "reached": True}
    assert any("max_stage" in w and "shorter II" in w for w in env["warnings"])
    # the README's "feeds an async tensor-core queue": both queues are used
    queues = {op["queue"] for op in env["result"]["schedule"]["ops"]} - {None}
    assert queues == {0, 1}


def test_solve_refuses_to_overwrite_without_force(solved):
    out, _ = solved
    before = sorted(os.listdir(out))
    r = synth("solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(out))
    assert r.returncode == 2
    assert "--force" in r.stderr and "Traceback" not in r.stderr
    assert sorted(os.listdir(out)) == before


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


def test_bad_problem_is_a_json_error_with_its_location(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace("latency: 200", "latncy: 200"))
    rc, env = run_json(capsys, "solve", str(bad), "-o", str(tmp_path / "out"))
    assert rc == 2 and env["result"] is None
    (err,) = env["errors"]
    assert err["code"] == "bad_input" and err["file"] == str(bad)
    assert err["line"] >= 1 and err["column"] >= 1 and "latncy" in err["message"] and err["fix"]
    assert not (tmp_path / "out").exists()


def test_missing_file_is_a_clean_error(tmp_path):
    r = synth("solve", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "nope.yaml" in r.stderr


# ---------------------------------------------------------------------------------------------- flags

@pytest.mark.parametrize("flag, value", [("--time-limit", "0"), ("--time-limit", "-1"), ("--time-limit", "nan"),
                                         ("--time-limit", "inf"), ("--time-limit", "1e9"), ("--workers", "0"),
                                         ("--workers", "-3"), ("--workers", "two")])
def test_out_of_range_numbers_are_rejected(capsys, tmp_path, flag, value):
    rc = main(["solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(tmp_path / "o"), flag, value])
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and value in err and "fix:" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    rc, env = run_json(capsys, "solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), flag, value)
    assert rc == 2 and env["errors"][0]["code"] == "usage" and flag in env["errors"][0]["message"]


def test_run_repeats_is_bounded(capsys, solved):
    out, _ = solved
    rc, env = run_json(capsys, "run", str(out), "--repeats", "0")
    assert rc == 2 and env["errors"][0]["code"] == "usage" and "--repeats" in env["errors"][0]["message"]


def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"synth {__version__}"
    r = synth("--help")
    assert r.returncode == 0 and "SPEC" not in r.stdout and "docs/commands.md" in r.stdout
    helps = {}
    for cmd in ("solve", "lower", "verify", "certify", "emit", "run"):
        assert main([cmd, "--help"]) == 0
        helps[cmd] = capsys.readouterr().out
        assert "SPEC" not in helps[cmd], cmd
        # --workers only where CP-SAT runs
        assert ("--workers" in helps[cmd]) == (cmd == "solve"), cmd
    assert "tvm:" in helps["emit"] and "mlir:" in helps["emit"]
    assert "median" in helps["run"]


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    rc, env = run_json(capsys, "frobnicate")
    assert rc == 2 and env["errors"][0]["code"] == "usage"


def test_time_limit_is_a_limit_for_the_whole_command(capsys, tmp_path):
    rc, env = run_json(capsys, "solve", str(PROBLEMS / "gemm-sm80-f16.yaml"), "-o", str(tmp_path / "o"),
                       "--time-limit", "3")
    # Either done within the limit, or stopped at it: every phase, writing included, counts (docs/commands.md;
    # how soon it stops is test_promises.test_time_limit_bounds_the_whole_solve's)
    assert rc in (0, 1), env["errors"]
    if rc == 1:
        assert env["errors"][0]["code"] == "time_limit" and "ran out during" in env["errors"][0]["message"]
        assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------- verify, certify

def test_verify_and_certify_an_output_folder(solved):
    out, _ = solved
    assert synth("verify", str(out)).returncode == 0
    r = synth("certify", str(out / "certificate"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = synth("certify", str(out))  # the solve folder itself
    assert r.returncode == 0 and "certificate OK" in r.stdout, r.stdout + r.stderr


def test_verify_and_certify_json(capsys, solved):
    out, _ = solved
    rc, env = run_json(capsys, "verify", str(out))
    assert rc == 0 and env["result"]["ok"] is True and env["result"]["waits"]
    for w in env["result"]["waits"]:
        assert {"index", "part", "queue", "in_flight", "before", "status", "tight", "reason"} <= set(w)
    rc, env = run_json(capsys, "certify", str(out))
    assert rc == 0 and env["result"]["ok"] is True
    assert env["result"]["files"] and all(f["ok"] for f in env["result"]["files"])


def _refuted_copy(out, tmp_path):
    doc = json.loads((out / "program.json").read_text())
    tight = [i for i, w in enumerate(doc["waits"]) if w["tight"]]
    assert tight, "the two-stage example has a tight wait"
    w = doc["waits"][tight[0]]
    w["in_flight"] = f"({w['in_flight']}) + 1" if isinstance(w["in_flight"], str) else w["in_flight"] + 1
    edited = tmp_path / "program.json"
    edited.write_text(json.dumps(doc))
    return edited, tight[0]


def test_verify_rejects_an_edited_wait_count(solved, tmp_path):
    out, _ = solved
    edited, index = _refuted_copy(out, tmp_path)
    r = synth("verify", str(edited))
    assert r.returncode == 1
    assert "refuted" in (r.stdout + r.stderr)
    # the table's "tight" column is the verdict's, not program.json's stale "tight": true
    row = next(ln for ln in r.stdout.splitlines() if ln.strip("│┃ ").startswith(f"{index} "))
    assert "refuted" in row and "yes" not in row


def test_verify_refuted_json(capsys, solved, tmp_path):
    out, _ = solved
    edited, index = _refuted_copy(out, tmp_path)
    rc, env = run_json(capsys, "verify", str(edited))
    assert rc == 1 and env["errors"][0]["code"] == "refuted"
    w = env["result"]["waits"][index]
    assert w["status"] == "refuted" and w["tight"] is None and w["counterexample"]


def test_certify_a_tampered_certificate_fails(capsys, solved, tmp_path):
    import shutil

    out, _ = solved
    cert = tmp_path / "cert"
    shutil.copytree(out / "certificate", cert)
    f = sorted(cert.glob("*.smt2"))[0]
    f.write_text(f.read_text() + "\n; edited\n")
    rc, env = run_json(capsys, "certify", str(cert))
    assert rc == 1 and env["errors"][0]["code"] == "certificate_failed" and env["result"]["ok"] is False


# ---------------------------------------------------------------------------------------------- lower

def test_lower_prints_the_rfc_program():
    r = synth("lower", str(PROBLEMS / "rfc0077-gemm.yaml"))
    assert r.returncode == 0, r.stderr
    assert "async_wait_queue(0, 2 - i)" in r.stdout
    assert "async_wait_queue(0, 1 - i)" in r.stdout


def test_lower_json_and_quiet(capsys):
    rc, env = run_json(capsys, "lower", str(PROBLEMS / "rfc0077-gemm.yaml"))
    assert rc == 0 and env["result"]["program"]["waits"]
    assert main(["lower", str(PROBLEMS / "rfc0077-gemm.yaml"), "-q"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["lower", str(PROBLEMS / "rfc0077-gemm.yaml"), "-v"]) == 0
    assert "# wait #0" in capsys.readouterr().out


def test_lower_without_pins_is_a_clean_error():
    r = synth("lower", str(PROBLEMS / "gemm-sm80-f16.yaml"))
    assert r.returncode == 2 and "schedule.stage" in r.stderr and "Traceback" not in r.stderr


def test_lower_gemm_with_stages_auto_says_to_set_stages(capsys, tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text(SMALL_GEMM.replace("stages: 3", "stages: auto"))
    rc, env = run_json(capsys, "lower", str(p))
    (err,) = env["errors"]
    assert rc == 2 and err["line"] == SMALL_GEMM.splitlines().index("stages: 3") + 1
    assert "stages: N" in err["fix"] and "synth solve" in err["fix"] and "schedule:" not in err["fix"]


# ---------------------------------------------------------------------------------------------- emit, run, search

def test_emit_exports(solved):
    out, _ = solved
    r = synth("emit", str(out), "--target", "tvm")
    assert r.returncode == 0 and "software_pipeline_stage" in r.stdout
    r = synth("emit", str(out), "--target", "mlir")
    assert r.returncode == 0 and "__test_pipelining_stage__" in r.stdout
    r = synth("emit", str(out), "--target", "cuda")
    assert r.returncode == 2 and "not a GEMM" in r.stderr


def test_emit_quiet_and_json(capsys, solved):
    out, _ = solved
    assert main(["emit", str(out), "--target", "tvm", "-q"]) == 0
    assert capsys.readouterr().out == ""
    rc, env = run_json(capsys, "emit", str(out), "--target", "mlir")
    assert rc == 0 and "__test_pipelining_stage__" in env["result"]["text"]
    rc, env = run_json(capsys, "emit", str(out), "--target", "cuda")
    assert rc == 2 and env["errors"][0]["code"] == "bad_input"


def test_emit_cuda_after_solve_and_user_edits(capsys, gemm_out):
    kernel = gemm_out / "kernel.cu"
    original = kernel.read_text()
    # as the README writes it, right after solve: nothing to do, exit 0
    rc, env = run_json(capsys, "emit", str(gemm_out), "--target", "cuda")
    assert rc == 0 and env["result"]["action"] == "up to date:"
    # a kernel.cu synth wrote (recorded in the folder's marker) is replaced, without --force
    from synth.outdir import replace_file

    replace_file(str(gemm_out), "kernel.cu", original + "// older synth\n", force=True)
    assert main(["emit", str(gemm_out), "--target", "cuda", "-q"]) == 0
    assert capsys.readouterr().out == "" and kernel.read_text() == original
    # a kernel.cu the user edited is never overwritten, --force or not
    kernel.write_text(original + "// my edit\n")
    for extra in ([], ["--force"]):
        rc, env = run_json(capsys, "emit", str(gemm_out), "--target", "cuda", *extra)
        assert rc == 2 and "changed since synth wrote it" in env["errors"][0]["message"]
        assert kernel.read_text().endswith("// my edit\n")
    kernel.write_text(original)


def test_run_exits_1_and_measure_exits_0_without_gpu(capsys, gemm_out):
    from synth.run import gpu_available

    if gpu_available()[0]:
        pytest.skip("a GPU is present: this checks the no-GPU exit status")
    out = gemm_out
    rc, env = run_json(capsys, "run", str(out))
    assert rc == 1 and env["errors"][0]["code"] == "no_gpu"
    r = synth("run", str(out))
    assert r.returncode == 1 and "no CUDA GPU" in r.stderr and "Traceback" not in r.stderr
    rc, env = run_json(capsys, "search", "gemm", "--M", "512", "--N", "512", "--K", "512", "--time-limit", "5",
                       "--no-sass", "--measure", "--out", str(out.parent / "m"))
    # --measure without a GPU says once that the figures are predictions and exits 0
    assert rc == 0 and env["errors"] == [] and env["result"]["candidates"]
    assert env["command"] == "search" and len(env["warnings"]) == 1 and "prediction" in env["warnings"][0]
    # --top 1 writes a proven candidate folder: its proof and certificate count against the time limit too
    r = synth("search", "gemm", "--M", "512", "--N", "512", "--K", "512", "--time-limit", "20", "--no-sass",
              "--measure", "--top", "1", "--out", str(out.parent / "m2"))
    assert r.returncode == 0 and "Traceback" not in r.stderr and "error" not in r.stderr
    assert (r.stdout + r.stderr).count("every figure is a prediction") == 1


def test_search_json_envelope(capsys):
    # (a full search's envelope is checked in test_run_and_measure_without_gpu_agree)
    rc, env = run_json(capsys, "search", "gemm", "--M", "512", "--N", "512", "--time-limit", "10")
    assert rc == 2 and "--K" in env["errors"][0]["message"]


def test_quiet_prints_nothing_on_stdout(capsys, solved, tmp_path):
    out, _ = solved
    for args in (["solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(tmp_path / "q")],
                 ["verify", str(out)], ["certify", str(out)], ["emit", str(out), "--target", "tvm"]):
        assert main([*args, "-q"]) == 0, args
        assert capsys.readouterr().out == "", args


def test_verbose_prints_more(capsys, solved, tmp_path):
    out, _ = solved
    cases = [(["verify", str(out)], "obligations"), (["certify", str(out)], "unsat"),
             (["solve", str(PROBLEMS / "rfc0077-two-stage.yaml"), "-o", str(tmp_path / "v")], "CP-SAT")]
    for args, word in cases:
        main(args)
        plain = capsys.readouterr().out
        tmp = tmp_path / "v"
        if tmp.exists():
            args = args + ["--force"]
        main([*args, "-v"])
        verbose = capsys.readouterr().out
        assert len(verbose) > len(plain) and word in verbose, args


def test_check_json_envelope(capsys, tmp_path):
    rc, env = run_json(capsys, "check", str(ROOT / "tests" / "check_inputs" / "triton-matmul-s3.ttgir"))
    assert rc == 0 and env["command"] == "check" and env["result"] is not None
    rc, env = run_json(capsys, "check", str(tmp_path / "missing.ttgir"))
    assert rc == 2 and env["errors"][0]["code"] == "bad_input" and env["result"] is None


def test_a_closed_pipe_is_no_traceback():
    # `synth check FILE | head`: the reader goes away before synth has printed everything: no traceback
    import subprocess
    import sys

    src = ROOT / "tests" / "check_inputs" / "triton-matmul-s3.ttgir"
    proc = subprocess.Popen([sys.executable, "-m", "synth", "check", str(src), "--verbose"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # nobody reads: the first write that reaches the OS fails with EPIPE
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert rc in (0, 141)

"""synth keeps the promises its docs make about a whole process (docs/commands.md, docs/outputs.md).

* ``--time-limit`` bounds the whole command: every phase counts against one deadline;
  past it the command stops within moments, exits 1 (code ``time_limit``) naming the
  phase that was cut, and leaves no folder (not even a temporary one).
* Ctrl-C (SIGINT) at any moment: exit 130, a message (the ``--json`` envelope with
  ``--json``), no output folder and no ``.synth-tmp-*`` folder left behind.
* ``synth verify OUT --certificate DIR`` writes a certificate that ``synth certify DIR``
  accepts: verify changes nothing it proves; DIR follows the ``--force`` rule.
* ``--force`` never deletes a folder the user made; new folders get the umask's modes.

The problems are generated (:mod:`synth.randgen`), written to a file and run by a
``synth`` subprocess, as a user would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from synth.cli import main

def bound(limit: float) -> float:
    """Seconds a command run under ``--time-limit limit`` may take in all: the limit, plus interpreter start-up,
    imports and clean-up (about 1 s alone) with room for a 2-core machine loaded many times over. Each
    time-limit promise has one test that holds it to this bound; the tight figures of an idle machine are
    benchmarks/speed_bounds.py's."""
    return limit + max(10.0, 2 * limit)


CTRL_C_S = 10.0
"""Seconds from SIGINT to the exit in the one test that times it (under 1 s alone; the same room for load)."""


def problem_file(directory: Path, seed: int, n_ops: int) -> Path:
    """:func:`synth.randgen.random_problem`'s problem file, written to ``directory``."""
    import synth.load as load
    from synth import randgen

    seen: list[str] = []
    real = load.load_problem_text

    def keep(text, path="<string>"):
        seen.append(text)
        return real(text, path)

    load.load_problem_text = keep
    try:
        randgen.random_problem(seed, n_ops)
    finally:
        load.load_problem_text = real
    path = directory / f"rand-{seed}-{n_ops}.yaml"
    path.write_text(seen[-1])
    return path


def start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "synth", *args], cwd=str(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the command did not end within {timeout:.1f} s; stderr: {err[-2000:]}")
    return proc.returncode, out, err


def envelope(out: str) -> dict:
    doc = json.loads(out)
    assert doc["exit_status"] in (0, 1, 2, 3, 130) and isinstance(doc["errors"], list)
    return doc


@pytest.fixture(scope="module")
def solved_40(solve_once, tmp_path_factory) -> Path:
    """The 40-op body (randgen seed 1, whose proof takes several seconds) solved and proved once for the run;
    shared: the tests below only read it."""
    return solve_once(problem_file(tmp_path_factory.mktemp("p40"), 1, 40).read_text(), "--time-limit", "300").out


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith((".synth-tmp-", ".synth-old-")))


# ---------------------------------------------------------------------------------------- the time limit

def cut_phase(doc: dict) -> str:
    err = doc["errors"][0]
    assert err["code"] == "time_limit", err
    m = re.search(r"ran out during (\w+)", err["message"])
    assert m, err["message"]
    return m.group(1)


def test_time_limit_bounds_the_whole_solve(tmp_path):
    """A body whose proof alone takes several seconds, under --time-limit 2: stopped near 2 s, nothing written."""
    prob = problem_file(tmp_path, 1, 40)
    t0 = time.monotonic()
    rc, out, err = finish(start("solve", str(prob), "-o", "out", "--time-limit", "2", "--json", cwd=tmp_path),
                          timeout=60)
    took = time.monotonic() - t0
    doc = envelope(out)
    assert rc == 1, (rc, doc["errors"], err[-2000:])
    assert cut_phase(doc) in ("schedule", "lower", "prove", "write", "emit"), doc["errors"]
    assert took < bound(2), took
    assert not (tmp_path / "out").exists()
    assert leftovers(tmp_path) == []


def test_time_limit_during_a_hopper_design_s_proofs_is_the_time_limit(tmp_path):
    """A ping-pong Hopper kernel chosen by auto, whose ring, tile-end, order and store proofs take seconds: a
    limit that runs out inside any of them ends the command as the time limit (exit 1, nothing written), never
    as a refusal of the problem (a proof cut short used to be reported as 'not proven', exit 2)."""
    prob = tmp_path / "p.yaml"
    prob.write_text("name: g\nkind: gemm\nshape: {M: 8192, N: 8192, K: 8192}\ntile: {BM: 64, BN: 256, BK: 64}\n"
                    "arch: sm_90\nmainloop: tma_wgmma\npersistent: auto\npingpong: auto\nepilogue: auto\n")
    for limit in ("1.5", "3"):
        rc, out, err = finish(start("solve", str(prob), "-o", "out", "--time-limit", limit, "--json", cwd=tmp_path),
                              timeout=120)
        doc = envelope(out)
        if rc == 0:  # a fast machine proved it all in time: nothing to judge at this limit
            shutil.rmtree(tmp_path / "out")
            continue
        assert rc == 1 and doc["errors"][0]["code"] == "time_limit", (rc, doc["errors"], err[-2000:])
        assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_huge_min_k_tiles_emits_within_the_time_limit(tmp_path):
    """min_k_tiles 31250 once made emit take about a minute (every k-tile simulated); the emitter
    now reads the body's repeating period, so the whole solve (a few seconds) ends inside --time-limit 60 even
    on a loaded machine (docs/commands.md). The emit phase's own figure (about 10 ms, 1 s allowed) is
    benchmarks/speed_bounds.py's."""
    prob = tmp_path / "bigk.yaml"
    prob.write_text("name: bigk\nkind: gemm\nshape: {M: 128, N: 128, K: 1000000}\ndtype: f16\n"
                    "tile: {BM: 128, BN: 128, BK: 32}\nwarps: 4\nstages: 3\narch: sm_80\nmin_k_tiles: 31250\n")
    rc, out, _ = finish(start("solve", str(prob), "-o", "out", "--time-limit", "60", "--json", cwd=tmp_path),
                        timeout=120)
    doc = envelope(out)
    assert rc == 0, doc["errors"]
    assert "emit" in {p["name"] for p in doc["result"]["phases"]}


@pytest.mark.slow
def test_verify_and_certify_time_limits_bound_the_whole_command(solved_40, tmp_path):
    """verify (the proof and the certificate's re-checks) and certify stop at their --time-limit."""
    for args in (("verify", str(solved_40), "--certificate", "cert"), ("certify", str(solved_40))):
        t0 = time.monotonic()
        rc, out, err = finish(start(*args, "--time-limit", "1.5", "--json", cwd=tmp_path), timeout=60)
        took = time.monotonic() - t0
        doc = envelope(out)
        assert rc == 1, (args, doc["errors"])
        assert took < bound(1.5), (args, took)
    assert not (tmp_path / "cert").exists() and leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------- Ctrl-C

def interrupted(proc: subprocess.Popen, when, parent: Path) -> tuple[dict, float]:
    """Send SIGINT once ``when()`` is true; the envelope, and the seconds from the signal to the exit (timed by
    one test, test_ctrl_c_during_the_cp_sat_search; the others judge the exit, its message and what is left)."""
    deadline = time.monotonic() + 600
    while not when():
        assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
        assert time.monotonic() < deadline, "the moment to interrupt never came"
        time.sleep(0.02)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc, timeout=120)
    took = time.monotonic() - t0
    assert rc == 130, (rc, out[-2000:], err[-2000:])
    doc = envelope(out)
    assert doc["exit_status"] == 130 and doc["errors"][0]["code"] == "interrupted", doc
    assert "interrupted" in doc["errors"][0]["message"]
    assert leftovers(parent) == [], leftovers(parent)
    return doc, took


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user and system, its threads included) process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def after(seconds: float, proc: subprocess.Popen):
    """True once ``proc`` has used ``seconds`` of CPU: the phase a command is in goes with the work it has done,
    which a loaded machine does not change (a wall-clock moment would fall into its imports there). Where there
    is no /proc: once ``seconds`` have passed."""
    if not os.path.isdir("/proc"):
        t = time.monotonic() + seconds
        return lambda: time.monotonic() >= t

    def done() -> bool:
        try:
            return cpu_seconds(proc.pid) >= seconds
        except (OSError, ValueError, IndexError):  # it ended: the caller's poll says so
            return True
    return done


def test_ctrl_c_during_the_cp_sat_search(tmp_path):
    """A 120-op body gives CP-SAT most of 300 s (it starts about 3 CPU-s in): SIGINT during its search ends the
    command at once (CP-SAT used to stop its search quietly and go on to write a FEASIBLE folder). The one test
    that times a Ctrl-C (CTRL_C_S)."""
    prob = problem_file(tmp_path, 1, 120)
    proc = start("solve", str(prob), "-o", "out", "--time-limit", "300", "--no-verify", "--workers", "1", "--json",
                 cwd=tmp_path)
    _, took = interrupted(proc, after(6.0, proc), tmp_path)
    assert took < CTRL_C_S, took
    assert not (tmp_path / "out").exists()


def test_ctrl_c_during_the_proof_and_without_json(tmp_path):
    """SIGINT a few CPU-seconds into a solve whose proof takes longer: exit 130 and a message on stderr."""
    prob = problem_file(tmp_path, 1, 40)
    proc = start("solve", str(prob), "-o", "out", "--time-limit", "300", cwd=tmp_path)
    when, deadline = after(4.0, proc), time.monotonic() + 600
    while not when():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc, timeout=120)
    assert rc == 130, (rc, err[-2000:])
    assert "interrupted" in err and "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


@pytest.mark.slow
def test_ctrl_c_while_writing_the_folder(tmp_path):
    """SIGINT once the folder is being built aside (its .synth-tmp-* sibling exists): nothing is left."""
    prob = problem_file(tmp_path, 1, 40)
    proc = start("solve", str(prob), "-o", "out", "--time-limit", "120", "--json", cwd=tmp_path)
    building = lambda: any(p.name.startswith(".synth-tmp-") for p in tmp_path.iterdir())  # noqa: E731
    interrupted(proc, building, tmp_path)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_ctrl_c_during_verify(solved_40, tmp_path):
    """synth verify stops its Z3 queries on SIGINT (Z3 would otherwise answer 'unknown' and go on)."""
    proc = start("verify", str(solved_40), "--certificate", "cert", "--json", cwd=tmp_path)
    interrupted(proc, after(2.5, proc), tmp_path)
    assert not (tmp_path / "cert").exists()


# ---------------------------------------------------------------------------------------- verify -> certify

def test_a_certificate_written_by_verify_passes_certify(tmp_path, capsys):
    """A program with a wait that is not tight: verify does not append its verdict to the program again."""
    prob = problem_file(tmp_path, 2, 6)
    out = tmp_path / "out"
    assert main(["solve", str(prob), "-o", str(out), "--time-limit", "30", "-q"]) == 0
    program = json.loads((out / "program.json").read_text())
    assert any(w.get("tight") is False for w in program["waits"]), "the test needs a wait that is not tight"
    for cert in (out / "again", tmp_path / "elsewhere"):
        assert main(["verify", str(out), "--certificate", str(cert), "-q"]) == 0
        assert main(["certify", str(cert), "-q"]) == 0, capsys.readouterr().err
    assert (tmp_path / "elsewhere" / "program.json").read_bytes() == (out / "program.json").read_bytes()
    capsys.readouterr()
    # an existing certificate folder: refused without --force, replaced with it (verify accepts --force)
    assert main(["verify", str(out), "--certificate", str(tmp_path / "elsewhere"), "-q"]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["verify", str(out), "--certificate", str(tmp_path / "elsewhere"), "--force", "-q"]) == 0
    assert main(["certify", str(tmp_path / "elsewhere"), "-q"]) == 0


def test_proving_a_program_again_changes_nothing():
    from synth import api, randgen
    from synth.verify import verify_program

    first = api.solve(randgen.random_problem(2, 6), time_limit=30).report.program
    again = verify_program(first).program
    assert again == first
    assert verify_program(again).program == first


# ---------------------------------------------------------------------------------------- --force, modes

def test_force_keeps_a_folder_the_user_made(tmp_path, capsys):
    """An empty folder the user made inside synth's folder makes --force refuse (tests/adversarial has more)."""
    prob = problem_file(tmp_path, 2, 6)
    out = tmp_path / "out"
    solve = ["solve", str(prob), "-o", str(out), "--time-limit", "30", "-q", "--no-verify"]
    assert main(solve) == 0
    (out / "my_notes" / "drafts").mkdir(parents=True)
    assert main(solve + ["--force"]) == 2
    err = capsys.readouterr().err
    assert "synth did not write" in err and "my_notes" in err, err
    assert (out / "my_notes" / "drafts").is_dir()
    shutil.rmtree(out / "my_notes")
    assert main(solve + ["--force"]) == 0


def test_output_folders_follow_the_umask(tmp_path):
    prob = problem_file(tmp_path, 2, 6)
    old = os.umask(0o027)
    try:
        assert main(["solve", str(prob), "-o", str(tmp_path / "out"), "--time-limit", "30", "-q"]) == 0
    finally:
        os.umask(old)
    out = tmp_path / "out"
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert stat.S_IMODE((out / "certificate").stat().st_mode) == 0o750
    assert stat.S_IMODE((out / "program.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((out / ".synth-output.json").stat().st_mode) == 0o640


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the worker processes from /proc")
def test_ctrl_c_during_a_search_stops_its_worker_processes(tmp_path):
    (tmp_path / "shapes.csv").write_text("M,N,K\n" + "".join(f"{m},{m},4096\n" for m in (1024, 2048, 3072, 4096)))
    proc = start("search", "gemm", "--shapes", "shapes.csv", "--workers", "2", "--time-limit", "60", "--no-sass",
                 "--json", cwd=tmp_path)
    deadline = time.monotonic() + 300
    while len(_children(proc.pid)) < 2:  # the pool's workers (and its resource tracker) are running
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)
    kids = _children(proc.pid)
    interrupted(proc, lambda: True, tmp_path)
    end = time.monotonic() + 30  # they go at once; room for a loaded machine
    while any(_alive(k) for k in kids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not any(_alive(k) for k in kids), "a worker outlived the interrupted search"


@pytest.mark.slow
def test_ctrl_c_during_check(tmp_path):
    """synth check proves a compiler's waits with Z3: SIGINT late in the run (its proof) exits 130 (Z3 used to
    answer 'unknown' and the check went on to exit 0)."""
    import resource

    src = ROOT / "tests" / "check_inputs" / "triton-matmul-s5.ttgir"
    used = lambda: (lambda r: r.ru_utime + r.ru_stime)(resource.getrusage(resource.RUSAGE_CHILDREN))  # noqa: E731
    t0 = used()
    rc, _, err = finish(start("check", str(src), "-q", cwd=tmp_path), timeout=300)
    whole = used() - t0  # CPU seconds: the same on a loaded machine
    assert rc == 0, err[-2000:]
    # late in the run's work, as measured once; a run that ends before its signal anyway (Z3's own timing varies)
    # is tried again earlier (never judged: only an interrupted run is)
    for frac in (0.8, 0.5, 0.3, 0.15):
        proc = start("check", str(src), "--json", cwd=tmp_path)
        signal_at = after(frac * whole, proc)
        while not signal_at() and proc.poll() is None:
            time.sleep(0.02)
        if proc.poll() is None:
            break
        finish(proc, timeout=120)
    else:
        pytest.fail(f"synth check always ended before its signal (a run takes {whole:.1f} CPU-s)")
    interrupted(proc, lambda: True, tmp_path)


def test_a_ctrl_c_python_drops_inside_a_destructor_still_stops_the_command():
    """Python prints and drops a KeyboardInterrupt raised inside ``__del__`` (Z3's terms have one): the
    SIGINT watcher's flag still stops the command at its next phase and before a folder is moved into place."""
    code = r'''
import os, signal, sys, time
from synth.deadline import Deadline, finishing, install_interrupt, interrupted
install_interrupt()
class Slow:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)          # the KeyboardInterrupt is raised here, inside __del__, and dropped
Slow()
t = time.monotonic() + 5
while not interrupted() and time.monotonic() < t:
    time.sleep(0.01)
print("flag", interrupted(), flush=True)
for step in (lambda: Deadline.after(60).check("prove"), lambda: finishing().__enter__()):
    try:
        step()
        print("not stopped", flush=True)
    except KeyboardInterrupt:
        print("stopped", flush=True)
'''
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "Traceback" not in proc.stderr, proc.stderr  # dropped quietly: the flag carries the Ctrl-C
    assert proc.stdout.split() == ["flag", "True", "stopped", "stopped"], (proc.stdout, proc.stderr)


def test_a_ctrl_c_that_surfaces_as_another_exception_still_exits_130(monkeypatch, capsys):
    """ctypes wraps a KeyboardInterrupt raised while it converts a Z3 call's arguments into ArgumentError: once
    the SIGINT watcher has seen the signal, whatever exception ends the command is the Ctrl-C (exit 130), not an
    internal error (exit 3)."""
    import ctypes

    import synth.cli as cli
    import synth.deadline as deadline

    def wrapped(args, ui):
        deadline._interrupted.set()  # what the watcher thread does on SIGINT
        raise ctypes.ArgumentError("argument 2: KeyboardInterrupt: ")

    monkeypatch.setitem(cli._COMMANDS, "check", wrapped)
    try:
        rc = main(["check", str(ROOT / "tests" / "check_inputs" / "triton-matmul-s2.ttgir")])
    finally:
        deadline._interrupted.clear()
    assert rc == 130
    assert "interrupted (Ctrl-C)" in capsys.readouterr().err


def test_the_ctrl_c_is_noted_before_its_keyboard_interrupt_is_raised():
    """The CLI tells a Ctrl-C from a bug by the flag :func:`synth.deadline.interrupted`: it must be set when the
    ``KeyboardInterrupt`` (or the ``ArgumentError`` ctypes wraps it in) reaches any handler, not later when the
    watcher thread gets round to it."""
    code = r'''
import os, signal
from synth.deadline import install_interrupt, interrupted
install_interrupt()
try:
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(10**6):
        pass
except KeyboardInterrupt:
    print("noted" if interrupted() else "not noted", flush=True)
'''
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.stdout.strip() == "noted", (proc.stdout, proc.stderr)


def test_an_alarm_that_native_code_turns_into_another_error_is_still_the_time_limit():
    """The backstop alarm raises inside whatever runs; native code may catch that exception and raise its own
    (matplotlib's path code answered it with "ValueError: Invalid affine transformation matrix" while a timeline
    was drawn under load, and solve exited 3 as an internal error). Once the alarm has rung, an error that is not
    synth's own is the time limit. In a subprocess: the alarm also interrupts Z3 (its context stays cancelled)."""
    code = """
import time
from synth.deadline import Deadline, TimeUp, enforced
try:
    with enforced(Deadline(time.monotonic() + 0.01, 0.01)):
        try:
            time.sleep(5)
        except BaseException:
            raise ValueError("Invalid affine transformation matrix") from None
except TimeUp as e:
    print("TimeUp", e.msg)
try:  # before the alarm, an error is what it is
    with enforced(Deadline(time.monotonic() + 5, 5)):
        raise ValueError("not the alarm")
except ValueError as e:
    print("ValueError", e)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("TimeUp the time limit (0.01 s) ran out") and lines[1] == "ValueError not the alarm", \
        proc.stdout

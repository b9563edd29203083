"""``synth solve`` on a Hopper GEMM (``arch: sm_90``, ``mainloop: tma_wgmma``): the folder, its proof,
its kernel through ``synth.kernel.load`` on the emulator, and the errors of bad problem files."""

import json
import pathlib

import numpy as np
import pytest

from conftest import synth_cli as synth
from synth import api
from synth.errors import SynthError

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "problems" / "gemm-hopper-128x128x64-f16.yaml"
CLASSES = {"parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma", "wgmma_wait", "slot_reuse",
           "fence"}


def synth_in_process(capsys, *args) -> tuple[int, str]:
    """(exit status, stderr) of ``synth ARGS`` run by :func:`synth.cli.main` in this process: the
    refusals below fail before any solving, where a fresh interpreter per case cost more than the
    check (an unexpected exception still prints its traceback on stderr, as ``main`` does)."""
    from synth.cli import main

    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def problem(tmp_path, body: str, name: str = "p.yaml") -> pathlib.Path:
    f = tmp_path / name
    f.write_text("kind: gemm\nname: hop\nshape: {M: 256, N: 256, K: 1024}\narch: sm_90\n" + body)
    return f


@pytest.fixture(scope="module")
def solved(solve_once):
    """(folder, the --json result) of the example, solved once for the run (shared: copy before editing)."""
    s = solve_once(EXAMPLE, "--json")
    return s.out, s.result


def test_solve_writes_a_proven_hopper_folder(solved):
    out, res = solved
    assert res["mainloop"] == "tma_wgmma" and res["verified"]
    assert set(res["verify"]["obligations"]) >= CLASSES
    names = {p.name for p in out.iterdir()}
    assert {"kernel.cu", "program.json", "program.txt", "schedule.json", "problem.yaml", "verify.txt",
            "timeline.svg", "timeline.png", "certificate"} <= names
    prog = json.loads((out / "program.json").read_text())
    assert prog["protocol"] == "mbarrier"
    sched = json.loads((out / "schedule.json").read_text())
    assert sched["stages"] == res["schedule"]["stages"] and 0 <= sched["k_pipe_mmas"] < sched["stages"]
    assert sched["consumer_warpgroups"] == 2 and sched["shared_bytes"] <= 232448
    kernel = (out / "kernel.cu").read_text()
    for needle in ("cp.async.bulk.tensor", "mbarrier.try_wait.parity", "wgmma.mma_async", "setmaxnreg"):
        assert needle in kernel
    assert "mma.sync" not in kernel and "cp.async.cg" not in kernel
    # the stages chosen are in the kernel's slots: one full and one empty barrier per stage
    assert len([b for b in prog["barriers"] if b["kind"] == "full"]) == 1
    assert all(b["slots"] == sched["stages"] for b in prog["barriers"])


def test_verify_certify_emit_on_the_folder(solved):
    out, _ = solved
    v = synth("verify", out, "--json")
    assert v.returncode == 0, v.stderr
    assert set(json.loads(v.stdout)["result"]["obligations"]) >= CLASSES
    # synth certify on a Hopper certificate folder: tests/hopper/test_cli.py (the same certify_hopper)
    assert api.certify(str(out), time_limit=120).ok
    e = synth("emit", out, "--target", "cuda")
    assert e.returncode == 0 and "up to date" in e.stdout
    t = synth("emit", out, "--target", "tvm")
    assert t.returncode == 2 and "Traceback" not in t.stderr and "--target cuda" in t.stderr
    r = synth("run", out)  # no GPU here: exit 1 with the reason, never a traceback
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr


@pytest.mark.parametrize("M,N,K", [(130, 70, 72), (64, 200, 64), (1, 1, 8), (129, 128, 1000)])
def test_kernel_load_runs_the_emitted_kernel_on_the_emulator(solved, M, N, K):
    from synth import kernel

    out, res = solved
    k = kernel.load(str(out), backend="emulator")
    rng = np.random.default_rng(M * N + K)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (N, K)).astype(np.float16)
    Cin = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    C = k(A, B, Cin, alpha=0.5, beta=-2.0)
    ref = 0.5 * (A.astype(np.float64) @ B.astype(np.float64).T) - 2.0 * Cin
    assert C.shape == (M, N) and np.allclose(C, ref, atol=1e-2, rtol=1e-2)
    with pytest.raises(SynthError, match="multiple of 8"):
        k(A[:, :K - 1].copy(), B[:, :K - 1].copy()) if K > 8 else k(A[:, :4].copy(), B[:, :4].copy())


def _bump_stages(text: str) -> str:
    doc = json.loads(text)
    doc["stages"] += 1
    return json.dumps(doc)


@pytest.mark.parametrize("name,edit", [
    ("kernel.cu", lambda t: t + "// edited\n"),
    ("program.json", lambda t: t.replace('"in_flight": 1', '"in_flight": 2', 1)),
    ("schedule.json", _bump_stages),
])
def test_tampered_folders_are_refused(solved, tmp_path, name, edit):
    import shutil

    from synth import kernel

    out, _ = solved
    d = tmp_path / "copy"
    shutil.copytree(out, d)
    f = d / name
    text = f.read_text()
    assert edit(text) != text
    f.write_text(edit(text))
    with pytest.raises(SynthError):
        kernel.load(str(d), backend="emulator")
    r = synth("emit", d, "--target", "cuda")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_mainloop_cp_async_keeps_the_ampere_loop(tmp_path):
    f = problem(tmp_path, "tile: {BM: 128, BN: 128, BK: 32}\nwarps: 4\nstages: 3\nmainloop: cp_async\n")
    res = api.solve(str(f), out=str(tmp_path / "o"), time_limit=120)
    assert res.proven
    assert "protocol" not in json.loads((tmp_path / "o" / "program.json").read_text())
    assert "mma.sync" in res.kernel and "wgmma" not in res.kernel


def test_pins_bf16_and_shared_memory_target(tmp_path):
    from synth import kernel

    f = problem(tmp_path, "dtype: bf16\ntile: {BM: 64, BN: 64, BK: 64}\nstages: 2\nk_pipe_mmas: 1\n")
    res = api.solve(str(f), out=str(tmp_path / "o"), time_limit=120)
    assert res.proven and (res.choice.stages, res.choice.k_pipe_mmas, res.choice.consumers) == (2, 1, 1)
    k = kernel.load(str(tmp_path / "o"), backend="emulator")
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (70, 200)).astype(np.float32)
    B = rng.uniform(-1, 1, (65, 200)).astype(np.float32)
    C = k(A, B)
    from synth.emit.sm90.emulate import bf16_bits, bf16_value

    ref = bf16_value(bf16_bits(A)).astype(np.float64) @ bf16_value(bf16_bits(B)).astype(np.float64).T
    assert np.allclose(C, ref, atol=1e-2, rtol=1e-2)
    # synth lower prints the pinned program
    low = synth("lower", f)
    assert low.returncode == 0 and "try_wait" in low.stdout
    # a shared-memory target bounds the stages CP-SAT may choose
    g = problem(tmp_path, "tile: {BM: 128, BN: 256, BK: 64}\ntarget: {shared_bytes: 100000}\n", "t.yaml")
    res = api.solve(str(g), time_limit=120)
    assert res.choice.smem_bytes <= 100000 and res.choice.stages == 2


@pytest.mark.parametrize("body,where,words", [
    ("tile: {BM: 128, BN: 128, BK: 32}\n", "BK: 32", "BK: 64"),
    ("tile: {BM: 256, BN: 128, BK: 64}\n", "BM: 256", "BM: 64 or BM: 128"),
    ("tile: {BM: 128, BN: 120, BK: 64}\n", "BN: 120", "multiple of 16"),
    ("warps: 4\n", "warps: 4", "warps: 12"),
    ("tile: {BM: 128, BN: 256, BK: 64}\nstages: 9\n", "stages: 9", "at most"),
    ("stages: 3\nk_pipe_mmas: 3\n", "k_pipe_mmas: 3", "below 3"),
    ("stages: 3\nschedule: {stage: [0, 0, 1]}\n", "schedule:", "k_pipe_mmas"),
    ("dtype: tf32\n", "dtype: tf32", "bf16"),
    ("mainloop: tma\n", "mainloop: tma", "tma_wgmma"),
    ("min_k_tiles: 2\n", "min_k_tiles: 2", "remove min_k_tiles"),
    ("target: {registers_bytes: 1000}\n", "registers_bytes", "setmaxnreg"),
])
def test_bad_hopper_problems_fail_cleanly(tmp_path, capsys, body, where, words):
    f = problem(tmp_path, body)
    code, err = synth_in_process(capsys, "solve", f, "-o", tmp_path / "out")
    assert code == 2, err
    assert "Traceback" not in err and words in err
    line = next(n for n, text in enumerate(f.read_text().splitlines(), 1) if where in text)
    assert f"{f}:{line}:" in err
    assert not (tmp_path / "out").exists()


def test_tma_wgmma_needs_sm90_and_k_pipe_mmas_needs_it(tmp_path, capsys):
    f = tmp_path / "a.yaml"
    f.write_text("kind: gemm\nshape: {M: 256, N: 256, K: 256}\narch: sm_80\nmainloop: tma_wgmma\n")
    code, err = synth_in_process(capsys, "solve", f)
    assert code == 2 and "arch: sm_90" in err and f"{f}:4:" in err
    f.write_text("kind: gemm\nshape: {M: 256, N: 256, K: 256}\nk_pipe_mmas: 1\n")
    code, err = synth_in_process(capsys, "solve", f)
    assert code == 2 and "k_pipe_mmas" in err and f"{f}:3:" in err
    f.write_text("kind: gemm\nshape: {M: 256, N: 256, K: 100}\narch: sm_90\n")
    code, err = synth_in_process(capsys, "solve", f)
    assert code == 2 and "multiple of 8" in err
    r = synth("solve", f)  # and through the console entry point, in a fresh interpreter
    assert r.returncode == 2 and "multiple of 8" in r.stderr and "Traceback" not in r.stderr


def test_the_solved_kernel_compiles_for_sm90a_and_meets_the_sass_targets(solved):
    from collections import Counter

    from synth.emit import sass
    from synth.emit.sm90.sass_mix import figures

    if sass.tool("nvcc") is None or sass.tool("cuobjdump") is None:
        pytest.skip("nvcc/cuobjdump needed")
    out, res = solved
    c = sass.compile_cuda((out / "kernel.cu").read_text(), "sm_90a", flags=("-DNDEBUG",))
    names = Counter(i.op for i in sass.parse_sass(c.sass))
    assert names["UTMALDG"] and names["HGMMA"] and names["SYNCS"]
    assert names["HMMA"] == 0 and names["LDGSTS"] == 0
    assert c.spill_stores == 0 and c.spill_loads == 0 and "C7514" not in c.log
    f = figures(c, 4)  # the targets of docs/hopper_kernel.md: at most CUTLASS cooperative's 11.25 instructions per HGMMA, run <= 28
    assert f["insn_per_hgmma"] <= 11.25 and f["longest_free"] <= 28, f


def test_a_cp_async_folder_on_sm90_written_from_memory_reads_back(tmp_path):
    """search writes folders of in-memory sm_90 problems: their problem.yaml must keep mainloop: cp_async."""
    from synth import kernel
    from synth.gemm import GemmConfig, expand_gemm

    p = expand_gemm(GemmConfig(256, 256, 256, arch="sm_90", stages=3, warps=4, BK=32, name="s90"))
    api.solve(p, out=str(tmp_path / "o"), time_limit=120)
    assert "mainloop: cp_async" in (tmp_path / "o" / "problem.yaml").read_text()
    assert isinstance(kernel.load(str(tmp_path / "o"), backend="emulator"), kernel.Kernel)


def test_verify_txt_prints_wait_counts_as_program_txt_does(solved):
    """A one-iteration epilogue's ``-i`` is printed as its value, the one ``program.txt`` shows."""
    out, _ = solved
    report = (out / "verify.txt").read_text()
    shown = {line.split("wgmma.wait_group ")[1].strip()
             for line in (out / "program.txt").read_text().splitlines() if "wgmma.wait_group " in line}
    printed = {line.split("wait_group(")[1].split(")")[0]
               for line in report.splitlines() if line.startswith("wait_group #")}
    assert printed and printed == shown
    assert "-i" not in report

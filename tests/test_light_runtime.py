"""The light runtime: ``synth.kernel.load`` and the kernel run with what a stock GPU image has.

A stock GPU image (torch, CUDA Python, numpy, PyYAML; no compiler toolchain, no network) has no
OR-Tools, Z3, cvc5, jsonschema, pycuda, rich or matplotlib. Loading a folder and running its kernel
must not need them: a subprocess installs an import hook that lets only the standard library and the
stock packages import, loads an sm_80 and a Hopper folder, and checks C on the emulator. The folder's
checks still happen without a solver: every file against the sha256 manifest, kernel.cu re-emitted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gemm_fixtures import NEEDS_GXX

import synth.kernel
from synth.errors import SynthError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STOCK_GPU_HOOK = r'''
import importlib.abc, importlib.machinery, json, os, sys, sysconfig
STOCK = {"numpy", "yaml", "_yaml", "torch", "cuda", "cupy", "cupy_backends", "fastrlock", "synth", "gpu_check"}
STOCK |= set(filter(None, os.environ.get("SYNTH_STOCK_EXTRA", "").split(",")))
STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])
BLOCKED_TRIES = []

class StockGpuImage(importlib.abc.MetaPathFinder):
    """An installed package outside the standard library and a stock GPU image's packages is missing."""
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in STOCK or top in sys.stdlib_module_names or name != top:
            return None
        spec = importlib.machinery.PathFinder.find_spec(top)
        if spec is None or spec.origin in (None, "built-in", "frozen") or \
                os.path.realpath(spec.origin).startswith(STDLIB + os.sep) and "-packages" not in spec.origin:
            return None  # not installed (the usual ImportError follows), or a part of the standard library
        BLOCKED_TRIES.append(name)
        raise ModuleNotFoundError(f"No module named {name!r} (not on a stock GPU image)", name=name)

sys.meta_path.insert(0, StockGpuImage())

def report_imports():
    tops = sorted({m.partition(".")[0] for m in sys.modules})
    path = os.environ.get("SYNTH_IMPORT_REPORT")
    if path:
        with open(path, "w") as fh:
            json.dump({"modules": tops, "blocked_tries": BLOCKED_TRIES}, fh)

import atexit
atexit.register(report_imports)
'''
"""Python source to run first in a subprocess: the import hook of a stock GPU image; at exit it writes
``{"modules": [top-level modules loaded], "blocked_tries": [imports refused]}`` to ``$SYNTH_IMPORT_REPORT``."""

HEAVY = {"ortools", "z3", "cvc5", "jsonschema", "pycuda", "rich", "matplotlib"}


def run_stock(code: str, tmp_path, *args: str, timeout: float = 240, extra: tuple[str, ...] = ()
              ) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``code`` (after :data:`STOCK_GPU_HOOK`; ``extra``: more packages allowed) in a fresh interpreter
    with the repository first on ``sys.path``; ``(process, import report)``."""
    report = tmp_path / "imports.json"
    env = dict(os.environ, PYTHONPATH=REPO, SYNTH_IMPORT_REPORT=str(report), SYNTH_STOCK_EXTRA=",".join(extra))
    env.pop("SYNTH_GPU_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", STOCK_GPU_HOOK + "\n" + code, *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=REPO)
    got = json.loads(report.read_text()) if report.exists() else {}
    return proc, got


def _solve(d, doc: str) -> str:
    from synth.api import solve

    (d / "p.yaml").write_text(doc)
    solve(str(d / "p.yaml"), out=str(d / "out"), time_limit=120, verify=False)  # the proof is not under test
    return str(d / "out")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """An sm_80 folder (64x64x32 tiles, 3 stages) and a Hopper one (128x128x64 f16, stages chosen)."""
    return {
        "sm80": _solve(tmp_path_factory.mktemp("sm80"),
                       "name: light80\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\n"
                       "tile: {BM: 64, BN: 64, BK: 32}\nwarps: 4\nstages: 3\narch: sm_80\n"),
        "hopper": _solve(tmp_path_factory.mktemp("hopper"),
                         "name: light90\nkind: gemm\nshape: {M: 512, N: 512, K: 512}\n"
                         "tile: {BM: 128, BN: 128, BK: 64}\narch: sm_90\nmainloop: tma_wgmma\n"),
    }


LOAD_AND_RUN = r'''
import sys
import numpy as np
import synth.kernel
out = {}
for folder in sys.argv[1:]:
    k = synth.kernel.load(folder)  # auto: no GPU here, so the emulator (pycuda and CUDA Python probed, optional)
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (70, 96)).astype(np.float16)
    B = rng.uniform(-1, 1, (130, 96)).astype(np.float16)
    C = k(A, B)
    ref = A.astype(np.float32) @ B.astype(np.float32).T
    assert C.shape == (70, 130) and np.allclose(C, ref, atol=1e-2, rtol=1e-2), float(np.abs(C - ref).max())
    print(type(k).__name__, k.backend, "ok")
'''


@NEEDS_GXX
def test_load_and_run_with_only_a_stock_gpu_image(folders, tmp_path):
    proc, got = run_stock(LOAD_AND_RUN, tmp_path, folders["sm80"], folders["hopper"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["Kernel emulator ok", "HopperKernel emulator ok"]
    assert not HEAVY & set(got["modules"]), got["modules"]
    # the only refused imports are optional probes of a GPU library this image does not have
    assert {t.partition(".")[0] for t in got["blocked_tries"]} <= {"pycuda"}, got["blocked_tries"]
    assert {"numpy", "yaml", "synth"} <= set(got["modules"])


def test_synth_run_reads_a_folder_with_only_a_stock_gpu_image(folders, tmp_path):
    # synth run's function on a machine without a GPU: the folder is loaded and checked, then "no CUDA GPU";
    # no solver, schema validator or plotting library was imported on the way
    code = ("import sys\nfrom synth.errors import SynthError\nfrom synth.run import run_output\n"
            "try:\n    run_output(sys.argv[1])\nexcept SynthError as e:\n    print(e.msg)\n")
    proc, got = run_stock(code, tmp_path, folders["hopper"])
    assert proc.returncode == 0 and proc.stdout.startswith("no CUDA GPU available: "), proc.stdout + proc.stderr
    assert not HEAVY & set(got["modules"]), got["modules"]
    # the command line adds its terminal UI (rich), and nothing heavier
    code = "import sys\nfrom synth.cli import main\nsys.exit(main(['run', sys.argv[1]]))\n"
    proc, got = run_stock(code, tmp_path, folders["sm80"], extra=("rich", "markdown_it", "mdurl", "pygments"))
    assert proc.returncode == 1 and "no CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not HEAVY - {"rich"} & set(got["modules"]), got["modules"]


def _edit(folder: str, tmp_path, name: str, old: str, new: str) -> str:
    d = tmp_path / "edited"
    shutil.copytree(folder, d)
    text = (d / name).read_text()
    assert old in text
    (d / name).write_text(text.replace(old, new, 1))
    return str(d)


def test_an_edited_sm80_kernel_is_refused(folders, tmp_path):
    d = _edit(folders["sm80"], tmp_path, "kernel.cu", "synth_cp_async_wait<2>", "synth_cp_async_wait<4>")
    with pytest.raises(SynthError) as e:
        synth.kernel.load(d, backend="emulator")
    assert e.value.loc.file.endswith("kernel.cu") and "changed since synth wrote it" in e.value.msg


@pytest.mark.parametrize("name, old, new", [("program.json", '"in_flight": 2', '"in_flight": 1'),
                                            ("schedule.json", '"stage"', '"stage" '),
                                            ("problem.yaml", "K: 256", "K: 512")])
def test_any_edited_file_of_a_folder_is_refused(folders, tmp_path, name, old, new):
    d = _edit(folders["sm80"], tmp_path, name, old, new)
    with pytest.raises(SynthError) as e:
        synth.kernel.load(d, backend="emulator")
    assert e.value.loc.file.endswith(name) and "changed since synth wrote it" in e.value.msg


def test_a_folder_without_its_manifest_is_refused(folders, tmp_path):
    d = tmp_path / "nomark"
    shutil.copytree(folders["hopper"], d)
    (d / ".synth-output.json").unlink()
    with pytest.raises(SynthError) as e:
        synth.kernel.load(str(d), backend="emulator")
    assert ".synth-output.json" in e.value.msg and "synth did not write" in e.value.msg


@NEEDS_GXX
def test_nan_from_finite_inputs_is_an_error(folders):
    # the edited kernel (it waits for no cp.async group) read by the emulator reads shared memory before the
    # copies land: those reads are NaN-poisoned, and the result is an error, not a C full of NaN
    src = open(os.path.join(folders["sm80"], "kernel.cu")).read().replace("synth_cp_async_wait<2>",
                                                                        "synth_cp_async_wait<4>")
    k = synth.kernel.load(folders["sm80"], backend="emulator")
    bad = synth.kernel.Kernel(k.path, src, k.facts, "emulator")
    A = np.ones((64, 256), np.float16)
    B = np.ones((64, 256), np.float16)
    with pytest.raises(synth.kernel.KernelError) as e:
        bad(A, B)
    assert "NaN" in e.value.msg and "finite inputs" in e.value.msg


def test_nan_bound():
    A = np.ones((2, 8), np.float16)
    out = np.array([[np.nan, 0.0], [0.0, 0.0]], np.float32)
    assert synth.kernel.unexplained_nans(out, A, A, None, 1.0, 0.0) == 1
    assert synth.kernel.unexplained_nans(np.zeros((2, 2), np.float32), A, A, None, 1.0, 0.0) == 0
    A2 = A.copy()
    A2[0, 0] = np.inf  # inf * 0 can make NaN: not the kernel's fault
    assert synth.kernel.unexplained_nans(out, A2, A, None, 1.0, 0.0) == 0
    C = np.full((2, 2), -3e38, np.float32)  # alpha * AB + beta * C may overflow to inf - inf
    assert synth.kernel.unexplained_nans(out, A, A, C, 1e38, 1.0) == 0

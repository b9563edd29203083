"""benchmarks/gpu_check.py, exercised here on every CI run: ``prepare`` a reduced pack, then ``run`` it with
the CPU emulator standing in for the GPU, in a subprocess that can import only what a stock GPU image has.

A missing import, a broken pack manifest or a wrong result fails here, not in the one GPU session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest

from gemm_fixtures import NEEDS_GXX, NVCC
from test_light_runtime import HEAVY, REPO, run_stock

GPU_CHECK = os.path.join(REPO, "benchmarks", "gpu_check.py")
RUN = ("import runpy, sys\nsys.argv = [sys.argv[0]] + sys.argv[1:]\n"
       f"runpy.run_path({GPU_CHECK!r}, run_name='__main__')\n")


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu") / "pack"
    _module().prepare(str(d), reduced=True, images=NVCC is not None)
    return d


pytestmark = [NEEDS_GXX, pytest.mark.slow]


def test_prepare_then_run_on_the_emulator_with_a_stock_gpu_image(pack, tmp_path):
    gc = _module()
    man = json.loads((pack / "manifest.json").read_text())
    assert man["format"] == gc.PACK_FORMAT and [f["arch"] for f in man["folders"]] == ["sm_80", "sm_90a"]
    if NVCC:
        assert [sorted(i["target"] for i in f["images"]) for f in man["folders"]] == [
            ["compute_80", "sm_80", "sm_90"], ["compute_90a", "sm_90a"]]
    assert gc._size(str(pack)) <= gc.MAX_PACK_BYTES and oct(os.stat(pack).st_mode & 0o777) != "0o700"
    proc, got = run_stock(RUN, tmp_path, "run", str(pack), "--backend", "emulator")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [ln.split()[:2] for ln in lines[:2]] == [[f["name"], "OK"] for f in man["folders"]], proc.stdout
    assert not HEAVY & set(got["modules"]) and {t.partition(".")[0] for t in got["blocked_tries"]} <= {"pycuda"}
    rep = json.loads((pack / "report.json").read_text())
    assert rep["status"] == "done" and rep["wrong"] == 0 and "numpy" in rep["reference"]
    assert all(k["ok"] and len(k["correctness"]) == 4 for k in rep["kernels"])
    assert any("K = 8" == c["what"] for c in rep["kernels"][0]["correctness"])
    assert "| s80-64x64x32-s3 (sm_80) | OK | 4/4 |" in (pack / "report.md").read_text()


@pytest.mark.parametrize("damage", ["image", "kernel", "manifest"])
def test_a_damaged_pack_is_refused(pack, tmp_path, damage):
    d = tmp_path / "pack"
    shutil.copytree(pack, d)
    man = json.loads((d / "manifest.json").read_text())
    if damage == "image":
        if not man["folders"][0]["images"]:
            pytest.skip("no nvcc: the pack has no images")
        f = d / man["folders"][0]["images"][0]["file"]
        f.write_bytes(f.read_bytes()[:-1] + b"x")
    elif damage == "kernel":
        k = d / man["folders"][1]["dir"] / "kernel.cu"
        k.write_text(k.read_text() + "// edited\n")
    else:
        (d / "manifest.json").write_text('{"format": "something else"}')
    proc, _ = run_stock(RUN, tmp_path, "run", str(d), "--backend", "emulator")
    assert proc.returncode == 2 and "gpu_check: error:" in proc.stderr and "fix:" in proc.stderr, proc.stderr


def test_a_kernel_that_is_not_synth_s_is_a_wrong_result(pack, tmp_path):
    # kernel.cu edited and every hash rewritten to match (the pack's and the folder's manifests): the light
    # runtime still derives the kernel from the program and refuses it; the run reports it and exits 1
    import hashlib

    d = tmp_path / "pack"
    shutil.copytree(pack, d)
    man = json.loads((d / "manifest.json").read_text())
    entry = man["folders"][0]
    k = d / entry["dir"] / "kernel.cu"
    text = k.read_text().replace("synth_cp_async_wait<2>", "synth_cp_async_wait<4>", 1)
    k.write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    entry["kernel_sha256"] = sha
    (d / "manifest.json").write_text(json.dumps(man))
    marker = d / entry["dir"] / ".synth-output.json"
    m = json.loads(marker.read_text())
    m["files"]["kernel.cu"] = sha
    marker.write_text(json.dumps(m))
    proc, _ = run_stock(RUN, tmp_path, "run", str(d), "--backend", "emulator", "--only", entry["name"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "WRONG" in proc.stdout and "not the kernel synth emits" in proc.stdout
    rep = json.loads((d / "report.json").read_text())
    assert rep["status"] == "done" and rep["wrong"] == 1

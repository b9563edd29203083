"""benchmarks/gpu_check.py, exercised here on every CI run: ``prepare`` a reduced pack, then ``run`` it with
the CPU emulator standing in for the GPU, in a subprocess that can import only what a stock GPU image has.

A missing import, a broken pack manifest or a wrong result fails here, not in the one GPU session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
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


def _heavy(test):
    """A test that prepares a pack (CP-SAT, Z3) or runs one on the emulator (g++)."""
    return NEEDS_GXX(pytest.mark.slow(test))


def _script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python benchmarks/gpu_check.py ARGS`` in a fresh interpreter (the promise is its exit status and stderr)."""
    return subprocess.run([sys.executable, GPU_CHECK, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))


def _refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 2 with a one-line error and its fix, no traceback."""
    err = proc.stderr
    assert proc.returncode == 2 and "Traceback" not in err and err.startswith("gpu_check: error: "), err
    assert "fix:" in err and all(w in err for w in words), err


@_heavy
def test_prepare_then_run_on_the_emulator_with_a_stock_gpu_image(pack, tmp_path):
    gc = _module()
    man = json.loads((pack / "manifest.json").read_text())
    assert man["format"] == gc.PACK_FORMAT and [f["arch"] for f in man["folders"]] == ["sm_80", "sm_90a", "sm_90a"]
    assert [f["kind"] for f in man["folders"]] == ["gemm", "gemm", "attention"]
    if NVCC:
        assert [sorted(i["target"] for i in f["images"]) for f in man["folders"]] == [
            ["compute_80", "sm_80", "sm_90"], ["compute_90a", "sm_90a"], ["compute_90a", "sm_90a"]]
    assert gc._size(str(pack)) <= gc.MAX_PACK_BYTES and oct(os.stat(pack).st_mode & 0o777) != "0o700"
    proc, got = run_stock(RUN, tmp_path, "run", str(pack), "--backend", "emulator")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [ln.split()[:2] for ln in lines[:3]] == [[f["name"], "OK"] for f in man["folders"]], proc.stdout
    assert not HEAVY & set(got["modules"]) and {t.partition(".")[0] for t in got["blocked_tries"]} <= {"pycuda"}
    rep = json.loads((pack / "report.json").read_text())
    assert rep["status"] == "done" and rep["wrong"] == 0 and "numpy" in rep["reference"]
    assert all(k["ok"] and len(k["correctness"]) == 4 for k in rep["kernels"][:2])
    attn = rep["kernels"][2]  # the attention folder: odd lengths, one key, more rows than keys, against numpy
    assert attn["ok"] and [c["what"] for c in attn["correctness"]] == ["odd lengths", "one key",
                                                                       "Sq > Sk, both ragged"]
    assert all(c["status"] == "ok" and c["max_abs_err"] < 1e-2 for c in attn["correctness"])
    assert "| attn-d128-f16-causal (sm_90a) | OK | 3/3 |" in (pack / "report.md").read_text()
    assert any("K = 8" == c["what"] for c in rep["kernels"][0]["correctness"])
    assert "| s80-64x64x32-s3 (sm_80) | OK | 4/4 |" in (pack / "report.md").read_text()


@_heavy
@pytest.mark.parametrize("damage", ["image", "kernel", "manifest", "arch"])
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
    elif damage == "arch":  # the sm_80 folder said to be sm_90a: it was loaded, then read as a Hopper kernel
        man["folders"][0]["arch"] = "sm_90a"
        (d / "manifest.json").write_text(json.dumps(man))
    else:
        (d / "manifest.json").write_text('{"format": "something else"}')
    proc, _ = run_stock(RUN, tmp_path, "run", str(d), "--backend", "emulator")
    assert proc.returncode == 2 and "gpu_check: error:" in proc.stderr and "fix:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


@_heavy
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


class _T:
    """A numpy-backed stand-in for the few torch tensor operations gpu_check uses."""

    def __init__(self, a) -> None:
        self.a = np.asarray(a)

    def half(self):
        return _T(self.a.astype(np.float16))

    def float(self):
        return _T(self.a.astype(np.float32))

    def t(self):
        return _T(self.a.T)

    def cpu(self):
        return self

    def cuda(self):
        return self

    def numpy(self):
        return self.a

    def abs(self):
        return _T(np.abs(self.a))

    def sum(self):
        return _T(self.a.sum())

    def max(self):
        return _T(self.a.max())

    def zero_(self):
        self.a[...] = 0
        return self

    def __matmul__(self, o):
        return _T(self.a.astype(np.float32) @ o.a.astype(np.float32))

    @property
    def shape(self):
        return self.a.shape

    def to(self, dtype):
        return _T(self.a.astype(dtype))

    def transpose(self, i, j):
        return _T(np.swapaxes(self.a, i, j))

    def masked_fill(self, mask, value):
        return _T(np.where(mask.a, value, self.a))

    def __getitem__(self, key):
        return _T(self.a[key])

    def __gt__(self, o):
        return _T(self.a > self._v(o))

    def _v(self, o):
        return o.a if isinstance(o, _T) else o

    def __mul__(self, o):
        return _T(self.a * self._v(o))

    __rmul__ = __mul__

    def __add__(self, o):
        return _T(self.a + self._v(o))

    __radd__ = __add__

    def __sub__(self, o):
        return _T(self.a - self._v(o))

    def __le__(self, o):
        return _T(self.a <= self._v(o))

    def __invert__(self):
        return _T(~self.a)

    def __float__(self):
        return float(self.a)

    def __int__(self):
        return int(self.a)


def _fake_torch():
    from types import SimpleNamespace

    class Gen:
        def __init__(self, device):
            assert device == "cuda"

        def manual_seed(self, s):
            self.rng = np.random.default_rng(s)
            return self

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 0.25

    torch = SimpleNamespace(
        __version__="0.fake", version=SimpleNamespace(cuda="12.fake"), float32=np.float32,
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=True)),
                                 cudnn=SimpleNamespace(allow_tf32=True)),
        cuda=SimpleNamespace(is_available=lambda: True, synchronize=lambda: None, Event=Event),
        Generator=Gen, rand=lambda *shape, device, generator: _T(generator.rng.random(shape, np.float32)),
        from_numpy=_T, isnan=lambda x: _T(np.isnan(x.a)), matmul=lambda a, b: _T(
            (a.a.astype(np.float32) @ b.a.astype(np.float32)).astype(np.float16)),
        nan_to_num=lambda x, nan: _T(np.nan_to_num(x.a, nan=nan)),
        empty=lambda n, dtype, device: _T(np.empty(n, dtype)),
        # attention: inputs, torch's float32 SDPA (its is_causal is top-left aligned: only Sq == Sk is asked of it)
        float16=np.float16, bfloat16=np.float32, randn=lambda *shape, device, generator: _T(
            generator.rng.standard_normal(shape).astype(np.float32)),
        arange=lambda n, device: _T(np.arange(n)), softmax=lambda x, dim: _T(_softmax(x.a, dim)),
        nn=SimpleNamespace(functional=SimpleNamespace(scaled_dot_product_attention=_sdpa)))
    return torch


def _softmax(a, dim):
    with np.errstate(invalid="ignore"):
        e = np.exp(a - a.max(axis=dim, keepdims=True))
        return e / e.sum(axis=dim, keepdims=True)


def _sdpa(q, k, v, is_causal=False, scale=None):
    from synth.emit.sm90.emulate_attention import reference

    assert not is_causal or q.shape[2] == k.shape[2]
    s = q.shape[-1] ** -0.5 if scale is None else scale
    return _T(reference(q.a, k.a, v.a, causal=is_causal, scale=s).astype(np.float32))


@_heavy
def test_the_gpu_run_with_a_fake_driver_and_torch(pack, tmp_path, monkeypatch):
    # the cuda branch of run (torch reference, cuBLAS, timing warm and flushed, clocks, images, the sanitizer
    # children) on the fake CUDA Python driver of test_run (launches run on the emulator) and a numpy torch;
    # the cubes timed are 192^3 here, the device has 3 SMs, compute-sanitizer is a stand-in script
    import sys

    from synth.emit.sm90 import runner
    from test_run import FakeDriver

    gc = _module()
    d = tmp_path / "pack"
    shutil.copytree(pack, d)
    man = json.loads((d / "manifest.json").read_text())
    sources = {}
    for f in man["folders"]:
        text = (d / f["dir"] / "kernel.cu").read_text()
        for im in f["images"]:
            sources[(d / im["file"]).read_bytes()] = text
    drv = FakeDriver(None, sources=sources, sms=3)
    monkeypatch.setattr(runner, "driver", lambda: drv)
    monkeypatch.setattr(runner, "nvcc_image", lambda text, arch, **kw: (sources.setdefault(text.encode(), text),
                                                                        text.encode())[1])
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    monkeypatch.setattr(gc, "BIG", (192,))
    monkeypatch.setattr(gc, "FLUSH_BYTES", 1 << 20)
    # attention: the wide run at 200 x 200, one timed shape of one 256-long sequence and head
    monkeypatch.setattr(gc, "ATTENTION_WIDE_SEQLEN", 200)
    monkeypatch.setattr(gc, "ATTENTION_SEQLENS", (256,))
    monkeypatch.setattr(gc, "ATTENTION_TOKENS", 256)
    monkeypatch.setattr(gc, "ATTENTION_HIDDEN", 128)
    san = tmp_path / "bin" / "compute-sanitizer"
    san.parent.mkdir()
    san.write_text("#!/bin/sh\necho '========= ERROR SUMMARY: 0 errors'\nexit 0\n")
    san.chmod(0o755)
    monkeypatch.setenv("PATH", f"{san.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SYNTH_GPU_BACKEND", raising=False)
    rc = gc.run(str(d), backend="cuda", budget_s=300)
    rep = json.loads((d / "report.json").read_text())
    assert rc == 0, json.dumps(rep, indent=1)[:4000]
    assert rep["status"] == "done" and "torch float32" in rep["reference"] and "fake H100" in rep["environment"]["gpu"]
    for k in rep["kernels"]:
        assert k["ok"] and [c["status"] for c in k["correctness"]].count("ok") >= 5, k
        assert "cubin" in k["image"] and k["registers"] == 128
        (t,) = k["timing"]
        if len(t["shape"]) == 4:  # attention: against torch SDPA, FLOPs 4 B H Sq Sk d halved under the mask
            assert t["shape"] == [1, 1, 256, 256] and t["ms_warm"] == 0.5 and t["sdpa_ms_flushed"] == 0.25
            assert t["flop"] == 4 * 256 * 256 * 128 / 2 and t["sdpa_backend"] == "default"
            assert t["tflops_warm"] == pytest.approx(t["flop"] / 0.5e-3 / 1e12)
            assert [c["what"] for c in k["correctness"]][3] == "batch x heads 4 > 3 SMs"
        else:
            assert t["shape"] == [192, 192, 192] and t["ms_warm"] == 0.5 and t["cublas_ms_flushed"] == 0.25
        assert "CUDA attribute" in t["clock_before"] or "sm MHz" in t["clock_before"]
        assert set(k["sanitizer"]) == {"racecheck", "synccheck"} and all(
            r["result"] == "ok" for r in k["sanitizer"].values())
    assert not drv.mem or all(n <= gc.FLUSH_BYTES for n in map(len, drv.mem.values()))


@_heavy
def test_a_crash_leaves_the_partial_report(pack, tmp_path, monkeypatch):
    gc = _module()
    d = tmp_path / "pack"
    shutil.copytree(pack, d)
    calls = []

    def line(k, seconds):  # the run dies after its first kernel
        calls.append(k["name"])
        raise RuntimeError("the machine went away")

    monkeypatch.setattr(gc, "line", line)
    with pytest.raises(RuntimeError):
        gc.run(str(d), backend="emulator")
    rep = json.loads((d / "report.json").read_text())
    assert rep["status"] == "crashed: RuntimeError: the machine went away" and rep["finished"]
    assert [k["name"] for k in rep["kernels"]] == calls and rep["kernels"][0]["ok"] is True
    assert len(rep["kernels"][0]["correctness"]) == 4 and "crashed" in (d / "report.md").read_text()


# --------------------------------------------------------------------------- no pack to build, no pack to run


def test_prepare_refuses_a_folder_it_cannot_make_with_exit_2(tmp_path):
    # a parent that is a file ended in a FileExistsError traceback; a name --only does not know, a time limit
    # out of range: refused before anything is solved
    (tmp_path / "afile").write_text("x")
    _refused(_script("prepare", str(tmp_path / "afile" / "pack")), "is not a folder")
    _refused(_script("prepare", str(tmp_path / "afile" / "deeper" / "pack")), "is not a folder")
    _refused(_script("prepare", str(tmp_path / "afile")), "not an empty folder")
    _refused(_script("prepare", str(tmp_path / "pack"), "--only", "s80-nope"), "s80-nope", "h90-128x128x64")
    gc = _module()
    full_only = next(n for n, _ in gc.DESIGNS if n not in {m for m, _ in gc.REDUCED})
    _refused(_script("prepare", str(tmp_path / "pack"), "--reduced", "--only", full_only),
             "not a folder of the reduced pack")
    _refused(_script("prepare", str(tmp_path / "pack"), "--time-limit", "0"), "--time-limit")
    assert sorted(os.listdir(tmp_path)) == ["afile"]


def _fake_pack(d, folders=(), arch="sm_80", kernel=b"// an sm_80 kernel.cu\n", manifest=None):
    """A pack folder with ``folders`` (names) each holding ``kernel`` as its kernel.cu under ``arch``."""
    import hashlib

    d.mkdir()
    entries = []
    for name in folders:
        (d / "folders" / name).mkdir(parents=True, exist_ok=True)
        (d / "folders" / name / "kernel.cu").write_bytes(kernel)
        entries.append({"name": name, "dir": f"folders/{name}", "arch": arch, "images": [], "notes": [],
                        "kernel_sha256": hashlib.sha256(kernel).hexdigest()})
    (d / "manifest.json").write_text(manifest if manifest is not None else json.dumps(
        {"format": "synth-gpu-pack/1", "folders": entries}))
    return d


@pytest.mark.parametrize("case", ["deep", "arch", "empty", "only-nothing", "only-unknown", "dir", "name"])
def test_a_corrupted_or_empty_pack_exits_2_without_a_traceback(tmp_path, case):
    # a 100,000-deep manifest (RecursionError) and an edited arch ended in tracebacks; an empty folder list and
    # --only naming nothing exited 0 having checked nothing
    args = []
    if case == "deep":
        d = _fake_pack(tmp_path / "p", manifest='{"format": "synth-gpu-pack/1", "folders": ' + "[" * 100_000
                       + "]" * 100_000 + "}")
        words = ["nested too deeply"]
    elif case == "arch":
        d = _fake_pack(tmp_path / "p", ["s80-a"], arch="sm_90a")
        words = ["arch sm_90a is not the arch of its kernel.cu"]
    elif case == "empty":
        d = _fake_pack(tmp_path / "p")
        words = ["no folders: nothing to check"]
    elif case == "only-nothing":
        d = _fake_pack(tmp_path / "p", ["s80-a"])
        args, words = ["--only", "s80-b"], ["--only: 's80-b': not a folder of the pack", "s80-a"]
    elif case == "only-unknown":  # one known, one not: refused, not half checked
        d = _fake_pack(tmp_path / "p", ["s80-a"])
        args, words = ["--only", "s80-a", "s80-b"], ["'s80-b'"]
    elif case == "dir":
        d = _fake_pack(tmp_path / "p", ["s80-a"])
        man = json.loads((d / "manifest.json").read_text())
        man["folders"][0]["dir"] = "folders/../folders/s80-a"
        (d / "manifest.json").write_text(json.dumps(man))
        words = ["is not one prepare writes"]
    else:
        d = _fake_pack(tmp_path / "p", ["s80-a", "s80-a"])
        words = ["named twice"]
    proc = _script("run", str(d), "--backend", "emulator", *args)
    _refused(proc, *words)
    assert not (d / "report.json").exists()
    if case in ("deep", "arch"):  # the sanitizer's child reads the pack the same way
        one = _script("one", str(d), "s80-a")
        assert one.returncode == 2 and "Traceback" not in one.stderr and "gpu_check: error:" in one.stderr, one.stderr


# --------------------------------------------------------------------------- a folder that cannot be built

PARTIAL = (f"import importlib.util, os, sys\nimport synth.api\nfrom synth.deadline import TimeUp\n"
           f"spec = importlib.util.spec_from_file_location('gpu_check', {GPU_CHECK!r})\n"
           "gc = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(gc)\nreal = synth.api.solve\n"
           "def solve(path, **kw):  # the Hopper folder runs out of its time limit\n"
           "    if os.path.basename(path).startswith('h90'):\n"
           "        raise TimeUp('the proof', kw['time_limit'])\n"
           "    return real(path, **kw)\n"
           "synth.api.solve = solve\n"
           "# the failing folder first: the next one is still prepared\n"
           "gc.REDUCED = (gc.HOPPER_DEFAULT, next(x for x in gc.REDUCED if x[0] == 's80-64x64x32-s3'))\n"
           "sys.exit(gc.main(sys.argv[1:]))\n")


@_heavy
def test_a_folder_that_runs_out_of_time_is_left_out_and_run_reports_it(tmp_path):
    # the 12th folder running out of the fixed 120 s discarded the whole pack with a traceback
    d = tmp_path / "pack"
    proc = subprocess.run([sys.executable, "-c", PARTIAL, "prepare", str(d), "--reduced", "--no-images",
                           "--time-limit", "300"], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "[1/2] h90-128x128x64: NOT BUILT" in proc.stderr and "time limit (300 s) ran out" in proc.stderr
    assert "[1/2] h90-128x128x64: solving and proving (time limit 300 s)" in proc.stdout, proc.stdout
    assert "[2/2] s80-64x64x32-s3: proven (sm_80" in proc.stdout and "NOT BUILT: h90-128x128x64" in proc.stdout
    man = json.loads((d / "manifest.json").read_text())
    assert [f["name"] for f in man["folders"]] == ["s80-64x64x32-s3"] and man["time_limit_s"] == 300
    ((nb),) = man["not_built"]
    assert nb["name"] == "h90-128x128x64" and "time limit" in nb["reason"] and not (d / "folders" / nb["name"]).exists()
    # the partial pack on a stock GPU image (no solver): the folder left out is NOT BUILT, never OK, exit 1
    run, got = run_stock(RUN, tmp_path, "run", str(d), "--backend", "emulator")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stdout + run.stderr[-3000:]
    assert not HEAVY & set(got["modules"])
    lines = run.stdout.splitlines()
    assert lines[0].split()[:3] == ["h90-128x128x64", "NOT", "BUILT"] and "time limit" in lines[0], run.stdout
    assert lines[1].split()[:2] == ["s80-64x64x32-s3", "OK"] and "1 not built" in run.stdout, run.stdout
    rep = json.loads((d / "report.json").read_text())
    assert rep["status"] == "done" and rep["wrong"] == 0 and rep["not_built"] == 1
    assert "| h90-128x128x64 (-) | NOT BUILT |" in (d / "report.md").read_text()
    run, _ = run_stock(RUN, tmp_path, "run", str(d), "--backend", "emulator", "--only", "s80-64x64x32-s3")
    assert run.returncode == 0 and "0 not built" in run.stdout, run.stdout + run.stderr[-3000:]
    run, _ = run_stock(RUN, tmp_path, "run", str(d), "--backend", "emulator", "--only", "h90-128x128x64")
    assert run.returncode == 1 and "NOT BUILT" in run.stdout, run.stdout + run.stderr[-3000:]


@_heavy
def test_the_sanitizer_child_runs_an_attention_folder(pack, monkeypatch, capsys):
    """``gpu_check.py one PACK NAME`` (what compute-sanitizer runs) on the attention folder: one launch through CUDA
    Python (the fake driver of test_run: the launch runs on the emulator), checked against numpy, exit 0."""
    from synth.emit.sm90 import runner
    from test_run import FakeDriver

    gc = _module()
    man = json.loads((pack / "manifest.json").read_text())
    entry = next(f for f in man["folders"] if f["kind"] == "attention")
    text = (pack / entry["dir"] / "kernel.cu").read_text()
    drv = FakeDriver(text, sources={(pack / im["file"]).read_bytes(): text for im in entry["images"]})
    monkeypatch.setattr(runner, "driver", lambda: drv)
    monkeypatch.setattr(runner, "nvcc_image", lambda src, arch, **kw: b"NVCC")
    assert gc.one(str(pack), entry["name"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == {"name": entry["name"], "shape": [1, 1, 136, 330], "ok": True}
    (launch,) = drv.launches
    assert launch["grid"] == (2, 1, 1) and launch["vals"]["seqlen_k"] == 330

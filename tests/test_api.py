"""synth.api (one function per command) and synth.kernel (an emitted GEMM as a numpy callable)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from conftest import PROBLEMS
import synth
import synth.api as api
import synth.kernel as kernel
from synth.errors import SynthError

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


@pytest.fixture(scope="module")
def two_stage(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "two-stage"
    result = api.solve(str(PROBLEMS / "rfc0077-two-stage.yaml"), out=str(out), time_limit=60)
    return result, out


@pytest.fixture(scope="module")
def gemm_folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("api-gemm")
    (d / "small.yaml").write_text(SMALL_GEMM)
    api.solve(str(d / "small.yaml"), out=str(d / "out"), time_limit=120)
    return d / "out"


def test_the_package_exposes_api_and_kernel_lazily():
    assert synth.api is api and synth.kernel is kernel
    import pathlib
    import tomllib

    meta = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert synth.__version__ == meta["project"]["version"]
    with pytest.raises(AttributeError):
        synth.no_such_thing  # noqa: B018


def test_solve_returns_the_result_and_writes_only_when_asked(two_stage, tmp_path, monkeypatch):
    result, out = two_stage
    assert result.proven and result.report.ok
    assert [n for n, _ in result.phases] == ["graph", "schedule", "lower", "prove"]
    assert all(s >= 0 for _, s in result.phases)
    assert (out / "program.json").exists() and (out / "timeline.png").exists()
    monkeypatch.chdir(tmp_path)
    again = api.solve(api.load(str(PROBLEMS / "rfc0077-two-stage.yaml")), time_limit=60, verify=False)
    assert again.report is None and os.listdir(tmp_path) == []
    assert again.schedule.stage == result.schedule.stage


def test_solve_reports_progress(tmp_path):
    seen = []
    api.solve(str(PROBLEMS / "rfc0077-two-stage.yaml"), time_limit=60, progress=lambda *a: seen.append(a))
    phases = [p for p, _, _ in seen]
    assert {"graph", "schedule", "lower", "prove"} <= set(phases)
    proofs = [(d, t) for p, d, t in seen if p == "prove"]
    assert proofs[-1][0] == proofs[-1][1] > 0  # every obligation counted


@pytest.mark.parametrize("kw", [dict(time_limit=0), dict(time_limit=-1), dict(time_limit=float("nan")),
                                dict(time_limit=1e9), dict(workers=0), dict(workers=1.5)])
def test_limits_are_checked(kw):
    with pytest.raises(SynthError, match="out of range"):
        api.solve(str(PROBLEMS / "rfc0077-two-stage.yaml"), **kw)


def test_bad_input_raises_with_location(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace("latency: 200", "latncy: 200"))
    with pytest.raises(SynthError) as e:
        api.load(str(bad))
    assert e.value.loc.file == str(bad) and e.value.loc.line > 0 and e.value.fix
    with pytest.raises(SynthError):
        api.solve(str(bad), out=str(tmp_path / "o"))
    assert not (tmp_path / "o").exists()


def test_lower_and_its_gemm_error(tmp_path):
    program = api.lower(str(PROBLEMS / "rfc0077-gemm.yaml"))
    assert len(program.waits) >= 3
    p = tmp_path / "auto.yaml"
    p.write_text(SMALL_GEMM.replace("stages: 3", "stages: auto"))
    with pytest.raises(SynthError) as e:
        api.lower(str(p))
    assert "stages: N" in e.value.fix and e.value.loc.line == 7


def test_verify_certify_emit(two_stage, tmp_path):
    result, out = two_stage
    assert api.verify(result.program, time_limit=30).ok
    report = api.verify(str(out), time_limit=30, certificate=str(tmp_path / "cert"))
    assert report.ok and (tmp_path / "cert" / "manifest.json").exists()
    assert api.certify(str(out), time_limit=60).ok  # the solve folder resolves to its certificate/
    assert api.certify(str(tmp_path / "cert"), time_limit=60).ok
    assert "software_pipeline_stage" in api.emit(result, target="tvm")
    assert api.emit(str(out), target="mlir") == api.emit(result, target="mlir")
    with pytest.raises(SynthError, match="not a GEMM"):
        api.emit(result, target="cuda")
    with pytest.raises(SynthError, match="unknown target"):
        api.emit(result, target="ptx")


def test_verify_refutes_an_edited_count(two_stage, tmp_path):
    _, out = two_stage
    doc = json.loads((out / "program.json").read_text())
    doc["waits"][0]["in_flight"] = doc["waits"][0]["in_flight"] + 1
    (tmp_path / "p.json").write_text(json.dumps(doc))
    report = api.verify(str(tmp_path / "p.json"), time_limit=30)
    assert not report.ok and report.verdicts[0].status == "refuted"


# ---------------------------------------------------------------------------------------------- synth.kernel

def _ab(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (M, K)).astype(np.float16), rng.uniform(-1, 1, (N, K)).astype(np.float16))


def test_kernel_runs_on_the_emulator(gemm_folder):
    g = kernel.load(str(gemm_folder), backend="emulator")
    assert g.backend == "emulator" and g.facts.ktiles == 0 and g.facts.BK == 64  # 0: proved for every K
    A, B = _ab(100, 72, 256)
    A0, B0 = A.copy(), B.copy()
    C = g(A, B)
    ref = A.astype(np.float32) @ B.astype(np.float32).T
    assert C.shape == (100, 72) and C.dtype == np.float32
    assert np.allclose(C, ref, atol=1e-2, rtol=1e-2)
    assert np.array_equal(A, A0) and np.array_equal(B, B0)  # inputs untouched
    Cin = np.random.default_rng(5).uniform(-1, 1, (100, 72)).astype(np.float32)
    D = g(A, B, Cin, alpha=0.5, beta=-2.0)
    assert np.allclose(D, 0.5 * ref - 2.0 * Cin, atol=1e-2, rtol=1e-2)
    assert g.last_run is not None and g.last_run.early_reads == 0 and g.last_run.hazards == 0
    # a K the kernel accepts but not a multiple of BK (the residue lands in k-tile 0)
    A2, B2 = _ab(64, 64, 200, seed=2)
    assert np.allclose(g(A2, B2), A2.astype(np.float32) @ B2.astype(np.float32).T, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("case, match", [
    ("f32", "dtype float32"),
    ("list", "not a numpy array"),
    ("3d", "dimensions"),
    ("k12", "K = 12"),
    ("k_mismatch", "B must be N x K"),
    ("beta_no_c", "needs C"),
    ("c_dtype", "float32 array"),
    ("c_shape", "float32 array"),
    ("alpha_nan", "not finite"),
])
def test_kernel_checks_its_arguments(gemm_folder, case, match):
    g = kernel.load(str(gemm_folder), backend="emulator")
    A, B = _ab(64, 64, 256)
    args, kw = {
        "f32": ((A.astype(np.float32), B), {}),
        "list": ((A.tolist(), B), {}),
        "3d": ((A[None], B), {}),
        "k12": ((A[:, :12], B[:, :12]), {}),  # K % 8 != 0: no 16-byte copies
        "k_mismatch": ((A, B[:, :248]), {}),
        "beta_no_c": ((A, B), {"beta": 1.0}),
        "c_dtype": ((A, B, np.zeros((64, 64), np.float64)), {"beta": 1.0}),
        "c_shape": ((A, B, np.zeros((64, 63), np.float32)), {"beta": 1.0}),
        "alpha_nan": ((A, B), {"alpha": float("nan")}),
    }[case]
    with pytest.raises(kernel.KernelError, match=match) as e:
        g(*args, **kw)
    assert isinstance(e.value, ValueError) and e.value.fix


def test_kernel_load_refuses_what_it_cannot_run(gemm_folder, two_stage, tmp_path):
    with pytest.raises(SynthError, match="not a GEMM"):
        kernel.load(str(two_stage[1]))
    with pytest.raises(SynthError, match="unknown backend"):
        kernel.load(str(gemm_folder), backend="opencl")
    other = tmp_path / "copy"
    shutil.copytree(gemm_folder, other)
    k = other / "kernel.cu"
    k.write_text(k.read_text().replace("#define SYNTH_BM 64", "#define SYNTH_BM 128"))
    with pytest.raises(SynthError, match="kernel.cu changed since synth wrote it"):
        kernel.load(str(other))
    k.unlink()
    with pytest.raises(SynthError, match="no kernel.cu"):
        kernel.load(str(other))
    if not kernel.gpu_ready()[0]:
        with pytest.raises(SynthError, match="no CUDA GPU"):
            kernel.load(str(gemm_folder), backend="cuda")
        assert kernel.load(str(gemm_folder)).backend == "emulator"
        with pytest.raises(SynthError, match="no CUDA GPU"):
            api.run(str(gemm_folder))


@pytest.mark.gpu
def test_kernel_on_the_gpu_matches_the_emulator(gemm_folder):
    if not kernel.gpu_ready()[0]:
        pytest.skip("no CUDA GPU")
    gpu = kernel.load(str(gemm_folder), backend="cuda")
    emu = kernel.load(str(gemm_folder), backend="emulator")
    A, B = _ab(96, 80, 256, seed=3)
    assert np.allclose(gpu(A, B), emu(A, B), atol=1e-2, rtol=1e-2)
    with pytest.raises(kernel.KernelError, match="K = 128"):
        gpu(A[:, :128], B[:, :128])


def test_verify_reports_progress_like_solve(two_stage):
    seen = []
    assert api.verify(two_stage[0].program, time_limit=30, progress=lambda *a: seen.append(a)).ok
    assert {p for p, _, _ in seen} == {"prove"} and seen[-1][1] == seen[-1][2] > 0

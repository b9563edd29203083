"""synth.run: the pycuda runner. Without a GPU (or pycuda) it must refuse clearly."""

from __future__ import annotations

import importlib.util

import pytest

from gemm_fixtures import gemm_problem
from synth.errors import SynthError
from synth.run import NO_GPU_FIX, RunReport, run_output


def _gpu_reason() -> str | None:
    """None when a CUDA GPU is usable through pycuda, else why not."""
    if importlib.util.find_spec("pycuda") is None:
        return "pycuda is not installed (pip install '.[gpu]')"
    try:
        import pycuda.driver as drv

        drv.init()
        if drv.Device.count() == 0:
            return "no CUDA device"
    except Exception as exc:  # noqa: BLE001
        return f"CUDA driver unavailable: {exc}"
    return None


GPU_REASON = _gpu_reason()


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    from synth.pipeline import run, write_outputs

    p = gemm_problem(M=1000, N=1000, K=512, stages=3, warps=8)
    res = run(p, verify=False, pinned_only=True)
    assert res.kernel is not None
    out = tmp_path_factory.mktemp("run") / p.name
    write_outputs(res, str(out))
    return str(out)


def test_report_renders():
    r = RunReport("g", "GPU", 4096, 4096, 4096, True, 1e-3, 1.0, 137.4, 312.0, 0.8, 171.8, "torch", 160, 32768)
    text = r.render()
    assert "OK" in text and "137.4 TFLOP/s" in text and "44% of the 312" in text
    assert "synth reaches 80%" in text
    assert r.fraction_of_cublas == pytest.approx(0.8, rel=1e-3)


@pytest.mark.skipif(GPU_REASON is None, reason="a GPU is available; the no-GPU path is not reachable")
def test_without_gpu_run_is_refused_with_a_fix(out_dir):
    with pytest.raises(SynthError) as ei:
        run_output(out_dir, repeats=1)
    assert ei.value.msg.startswith("no CUDA GPU available: ")
    assert ei.value.fix == NO_GPU_FIX


@pytest.mark.gpu
@pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU: {GPU_REASON}")
def test_runs_and_matches_numpy(out_dir):
    rep = run_output(out_dir, repeats=5)
    print(rep.render())
    assert rep.ok, rep.render()
    assert rep.tflops > 0 and rep.ms > 0
    assert rep.registers is not None and rep.registers <= 255

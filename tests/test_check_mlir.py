"""``synth check`` on MLIR nvgpu async-copy loops pipelined by mlir-opt in the test run."""

from __future__ import annotations

import pytest

from check_inputs import generate as gen
from check_inputs.helpers import run_check, run_text

pytestmark = pytest.mark.skipif(gen.mlir_opt() is None, reason="mlir-opt not installed (apt-get install mlir-NN-tools)")


def _pipelined(name: str) -> str:
    try:
        return gen.mlir_pipelined(name)
    except RuntimeError as e:
        if "transform-interpreter" in str(e) or "Unknown command line argument" in str(e):
            pytest.skip(f"this mlir-opt cannot run the transform interpreter: {e}")
        raise


@pytest.mark.parametrize("name", gen.mlir_names())
def test_mlir_pipelines_are_proven(tmp_path, name):
    path = tmp_path / f"{name}.mlir"
    path.write_text(_pipelined(name))
    rc, doc, err = run_check(str(path))
    assert rc == 0, err
    res = doc["result"]
    assert res["source"] == "mlir" and res["counts"]["refuted"] == 0 and res["counts"]["proven"] >= 1
    text = path.read_text().splitlines()
    for w in res["waits"]:
        assert "nvgpu.device_async_wait" in text[w["line"] - 1]


def test_peeled_epilogue_waits_are_tight(tmp_path):
    path = tmp_path / "peeled.mlir"
    path.write_text(_pipelined("mlir-two-buffers-depth2-peeled"))
    rc, doc, _ = run_check(str(path))
    epi = [w for w in doc["result"]["waits"] if w["part"] == "epilogue"]
    assert rc == 0 and [w["in_flight"] for w in epi] == ["1", "0"] and all(w["tight"] for w in epi)


def test_raising_the_body_wait_is_refuted(tmp_path):
    text = _pipelined("mlir-copy-depth3")
    assert "numGroups = 2" in text
    path = tmp_path / "bad.mlir"
    path.write_text(text.replace("numGroups = 2", "numGroups = 3"))
    rc, out, _ = run_text(str(path))
    assert rc == 1 and "RAW (stale read)" in out and "load_alloc" in out

"""benchmarks/check_corpus.py: synth check on one input per form and its mutants, side by side; a mutant
that is proven is a MISS and fails the run."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _corpus():
    spec = importlib.util.spec_from_file_location("check_corpus", ROOT / "benchmarks" / "check_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod


def _run(mod, *args) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = mod.main(list(args))
    return rc, out.getvalue() + err.getvalue()


@pytest.mark.slow  # every file is proven and refuted in its own form's tests
def test_quick_corpus_refutes_every_mutant_and_proves_every_input(tmp_path):
    mod = _corpus()
    rc, out = _run(mod, "--quick", "--json", str(tmp_path / "rows.json"))
    assert rc == 0, out
    assert "0 MISS, 0 WRONG" in out
    for form in ("triton cp.async", "triton-sm90", "triton-sm90-persistent", "triton-sm90-ws", "tvm cp.async",
                 "mlir cp.async"):
        assert form in out, form
    import json
    rows = json.loads((tmp_path / "rows.json").read_text())
    mutants = [r for r in rows if r["expect"] == "refuted"]
    assert len(mutants) >= 6 and all(r["verdict"] == "refuted" for r in mutants)
    assert all(r["verdict"] == "proven" for r in rows if r["expect"] == "proven")
    assert all(r["mark"] == "ok" for r in rows)
    zero = {r["source"]: r["zero"] for r in rows if r["expect"] == "proven"}
    assert zero["triton-matmul-s3.ttgir"] == zero["triton_ws/triton_ws_s2.ttgir"] == "proven", zero
    assert zero["mlir-copy-depth2.mlir"] == "fixed T", zero  # T >= 0: docs/check.md, "Zero trip count"
    assert "triton-viz" in out  # its column, or the line saying how to add it


def test_a_mutant_that_is_proven_is_a_miss(monkeypatch):
    """A mutant edit that changes nothing (so the input stays proven) is reported as a MISS, exit 1."""
    mod = _corpus()
    monkeypatch.setattr(mod, "QUICK", ("mlir-copy-depth2.mlir",))
    monkeypatch.setattr(mod.M, "raise_wait", lambda text, line: text)
    rc, out = _run(mod, "--quick")
    assert rc == 1 and "MISS" in out and "1 MISS" in out


@pytest.mark.parametrize("name", ["raise_pendings", "drop_barrier_wait", "flip_producer_parity",
                                  "unguard_prologue_copy"])
def test_a_mutant_that_does_not_apply_says_so(name):
    from synth.frontends import mutants

    with pytest.raises(ValueError):
        getattr(mutants, name)("tt.func @f() {\n  scf.for %i = %a to %b step %c {\n  scf.yield\n  }\n}\n")


def test_triton_viz_line_reads_what_is_installed(tmp_path, monkeypatch):
    """Absent, installed without a race detector (a tracer is not one), installed with one: three lines, and
    nothing imported (its clients import torch)."""
    import sys as _sys

    mod = _corpus()
    pkg = tmp_path / "triton_viz"
    (pkg / "clients").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('imported')\n")
    (pkg / "clients" / "tracer.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert "no race detector" in mod.triton_viz_line()
    (pkg / "clients" / "race_detector.py").write_text("")
    assert "installed with clients/race_detector.py" in mod.triton_viz_line()
    assert "triton_viz" not in _sys.modules

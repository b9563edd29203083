"""``synth check`` on Triton TTGIR compiled in the test run (sm_80, no GPU needed)."""

from __future__ import annotations

import re

import pytest

from check_inputs import generate as gen
from check_inputs.helpers import run_check, run_text

pytestmark = pytest.mark.skipif(bool(gen.triton_available()), reason=gen.triton_available() or "triton present")


def _write(tmp_path, name: str, text: str | None = None) -> str:
    path = tmp_path / f"{name}.ttgir"
    path.write_text(gen.triton_ttgir(name) if text is None else text)
    return str(path)


@pytest.mark.parametrize("name", gen.triton_names())
def test_triton_pipelines_are_proven(tmp_path, name):
    rc, doc, err = run_check(_write(tmp_path, name))
    assert rc == 0, err
    res = doc["result"]
    assert res["source"] == "triton" and res["ok"]
    assert res["counts"]["refuted"] == 0 and res["counts"]["unknown"] == 0
    assert res["counts"]["proven"] >= 2
    assert res["trip_count"] == "T" and res["min_trip_count"] == 1
    # every wait points back at a ttg.async_wait line of the input
    lines = (tmp_path / f"{name}.ttgir").read_text().splitlines()
    for w in res["waits"]:
        assert "ttg.async_wait" in lines[w["line"] - 1]


@pytest.mark.parametrize("name", ["triton-matmul-s3", "triton-matmul-s4"])
def test_raising_a_tight_wait_by_one_is_refuted(tmp_path, name):
    """Tight means n + 1 is wrong: raise each tight wait alone and the check must fail (exit 1)
    with a counterexample in the TTGIR's terms (op, iteration, slot)."""
    text = gen.triton_ttgir(name)
    rc, doc, _ = run_check(_write(tmp_path, name))
    tight = [w for w in doc["result"]["waits"] if w["tight"]]
    assert tight, "no wait is tight"
    lines = text.splitlines()
    for w in tight:
        bad = list(lines)
        n = int(re.search(r"num = (\d+)", bad[w["line"] - 1]).group(1))
        bad[w["line"] - 1] = bad[w["line"] - 1].replace(f"num = {n}", f"num = {n + 1}")
        path = _write(tmp_path, f"{name}-bad", "\n".join(bad) + "\n")
        rc, out, err = run_text(path)
        assert rc == 1, f"raising wait at line {w['line']} to {n + 1} was not refuted"
        assert "refuted" in out and "RAW (stale read)" in out
        m = re.search(r"(load_\w+) \(iteration (\d+)\) runs: reads (\w+)\[(\d+)\] \(version \d+\)", out)
        assert m, out


def test_trip_count_options(tmp_path):
    path = _write(tmp_path, "triton-matmul-s4")
    rc, doc, _ = run_check(path, "--trip-count", "2")
    assert rc == 0 and doc["result"]["trip_count"] == 2
    rc, doc, _ = run_check(path, "--min-trip-count", "5")
    assert rc == 0 and doc["result"]["min_trip_count"] == 5
    rc, _, err = run_text(path, "--trip-count", "-1")
    assert rc == 2 and "out of range" in err


def test_two_loads_at_different_distances(tmp_path):
    """The gather-matmul's row indices are copied one stage before the rows they select: the copies get
    different stages, and the program is still proven."""
    from synth.frontends import check_file

    r = check_file(_write(tmp_path, "triton-gather-matmul-s3"))
    stages = {o.name: o.stage for o in r.program.ops if o.is_async}
    assert len(set(stages.values())) == 2, stages
    assert r.ok


def test_sm90_pipelines_are_outside_the_model(tmp_path):
    """For sm_90 Triton pipelines with wgmma / TMA and mbarriers: exit 2 naming the op, never a verdict."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kname, sig, const, stages = gen.TRITON_PROGRAMS["triton-matmul-s3"]
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(sig) if sig[n] != "constexpr"}
    k = triton.compile(ASTSource(gen.triton_kernels()[kname], sig, constexprs=const, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_stages": stages, "num_warps": 4})
    rc, _, err = run_text(_write(tmp_path, "sm90", k.asm["ttgir"]))
    assert rc == 2 and "ttng." in err and "outside the model" in err and "fix:" in err

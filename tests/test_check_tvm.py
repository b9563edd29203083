"""``synth check`` on TVM TIR after InjectSoftwarePipeline, generated in the test run."""

from __future__ import annotations

import pytest

from check_inputs import generate as gen
from check_inputs.helpers import run_check, run_text

pytestmark = pytest.mark.skipif(bool(gen.tvm_available()), reason=gen.tvm_available() or "tvm present")

# TVM's expected output for two producers interleaved with their consumer commits both prologue copies
# as one group per step but waits as if each were its own group (docs/check.md).
REFUTED = {"tvm-producer-interleaving"}
# Two async stages feeding each other with a double-buffered first buffer: RFC 0077's three-stage race.
RACE = {"tvm-producer-interleaving", "tvm-two-async-stages"}


def _write(tmp_path, name: str, text: str | None = None) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(gen.tvm_script(name) if text is None else text)
    return str(path)


@pytest.mark.parametrize("name", gen.tvm_names())
def test_tvm_pipelines(tmp_path, name):
    rc, doc, err = run_check(_write(tmp_path, name))
    res = doc["result"]
    assert res["source"] == "tvm"
    if name in RACE:
        assert rc == 1 and not res["ok"]
        assert (res["counts"]["refuted"] >= 1) == (name in REFUTED)
        assert res["global_failures"]
    else:
        assert rc == 0, err
        assert res["counts"] == {"proven": len(res["waits"]), "refuted": 0, "unknown": 0}


def test_interleaving_counterexample_names_the_stale_read(tmp_path):
    rc, out, _ = run_text(_write(tmp_path, "tvm-producer-interleaving"))
    assert rc == 1
    assert "async_wait_queue(0, 5)" in out
    assert "at body i = 0" in out and "RAW (stale read)" in out
    assert "4 groups committed so far" in out  # the prologue committed 3 groups, not 6


def test_module_and_script_give_the_same_verdicts(tmp_path):
    from synth.frontends import check_loop
    from synth.frontends.tvm import tvm_to_loop

    for name in ("tvm-stream-s2", "tvm-producer-interleaving"):
        api = check_loop(tvm_to_loop(gen.tvm_module(name), name))
        rc, doc, _ = run_check(_write(tmp_path, name))
        assert [v.status for v in api.report.verdicts] == [w["status"] for w in doc["result"]["waits"]]


def test_symbolic_extent(tmp_path):
    path = _write(tmp_path, "tvm-dynamic-s2")
    rc, doc, _ = run_check(path)
    assert rc == 0 and doc["result"]["trip_count"] == "T" and doc["result"]["min_trip_count"] == 2
    rc, doc, _ = run_check(path, "--trip-count", "7")
    assert rc == 0 and doc["result"]["trip_count"] == 5  # the body runs T - 2 times
    rc, _, err = run_text(path, "--trip-count", "1")
    assert rc == 2 and "--trip-count 1 is below" in err


def test_lowering_a_body_wait_is_refuted(tmp_path):
    text = gen.tvm_script("tvm-stream-s2")
    assert '"async_wait_inflight_count": 2' in text
    rc, out, _ = run_text(_write(tmp_path, "bad", text.replace('"async_wait_inflight_count": 2',
                                                                 '"async_wait_inflight_count": 3', 1)))
    assert rc == 1 and "RAW (stale read)" in out


def test_two_async_stages_race_is_a_war_on_the_first_buffer(tmp_path):
    """TVM double-buffers S1 although S2's async copy still reads S1[k % 2] when S1[(k + 2) % 2] is refilled."""
    rc, out, _ = run_text(_write(tmp_path, "tvm-two-async-stages"))
    assert rc == 1
    assert "not charged to any wait" in out
    assert "WAR (slot overwritten while read)" in out and "S1_store (iteration 2) overwrites S1 slot 0" in out


# ---- TVMScript as written: imports, several functions, comments, a __main__ block ------------

def _functions(name: str, new_name: str, indent: int = 0) -> str:
    """The @T.prim_func of the generated script ``name`` renamed ``new_name``, at ``indent`` spaces."""
    lines = gen.tvm_script(name).splitlines()
    start = next(i for i, ln in enumerate(lines) if "@T.prim_func" in ln)
    body = [ln[4:] for ln in lines[start:]]
    body[1] = body[1].replace("def main(", f"def {new_name}(")
    return "\n".join((" " * indent + ln) if ln.strip() else ln for ln in body)


def _as_written(import_t: str = "from tvm.script import tir as T") -> str:
    bad = _functions("tvm-stream-s2", "stream_bad").replace('"async_wait_inflight_count": 2}',
                                                            '"async_wait_inflight_count": 3}', 1)
    return f'''# A test file as TVM's tests are written (the file is read, never run).
"""Pipelines after InjectSoftwarePipeline."""
import sys

import numpy as np
import tvm
import tvm.testing
{import_t}
from tvm.script import ir as I


def _check(original, expected):
    tvm.ir.assert_structural_equal(original, expected)


@T.prim_func
def not_pipelined(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        C[i] = A[i] * T.float32(2)  # no async copy here


{_functions("tvm-stream-s2", "stream_ok")}


{bad}


def test_pipeline():
    _check(stream_ok, stream_ok)


if __name__ == "__main__":
    tvm.testing.main()
'''


@pytest.mark.parametrize("import_t", ["from tvm.script import tir as T", "from tvm.script import tirx as T"])
def test_tvmscript_as_written_checks_every_pipelined_function(tmp_path, import_t):
    path = _write(tmp_path, "as_written", _as_written(import_t))
    rc, doc, err = run_check(path)
    res = doc["result"]
    assert rc == 1, err  # stream_bad's raised wait count is refuted
    assert [f["function"] for f in res["functions"]] == ["stream_ok", "stream_bad"]
    assert [f["ok"] for f in res["functions"]] == [True, False]
    rc, out, _ = run_text(path)
    assert "of function stream_ok" in out and "of function stream_bad" in out and "not_pipelined" not in out


def test_func_picks_one_function(tmp_path):
    path = _write(tmp_path, "as_written", _as_written())
    rc, doc, err = run_check(path, "--func", "stream_ok")
    assert rc == 0, err
    assert doc["result"]["function"] == "stream_ok" and doc["result"]["counts"]["refuted"] == 0
    rc, _, err = run_text(path, "--func", "stream_bad")
    assert rc == 1
    rc, _, err = run_text(path, "--func", "nope")
    assert rc == 2 and "no @T.prim_func named 'nope'" in err and "stream_ok" in err and "Traceback" not in err
    rc, _, err = run_text(path, "--func", "not_pipelined")
    assert rc == 2 and "no async pipeline" in err


def test_ir_module_with_two_functions(tmp_path):
    text = ("from tvm.script import ir as I\nfrom tvm.script import tirx as T\n\n\n@I.ir_module\nclass Module:\n"
            + _functions("tvm-stream-s2", "first", 4) + "\n\n" + _functions("tvm-stream-s3", "second", 4) + "\n")
    rc, doc, err = run_check(_write(tmp_path, "module", text))
    assert rc == 0, err
    assert [f["function"] for f in doc["result"]["functions"]] == ["first", "second"]


def test_run_out_loops_are_bounded(tmp_path):
    """A prologue loop of 10^7 iterations was run out one by one (synth check hung); the bound is 1024."""
    text = gen.tvm_script("tvm-stream-s2")
    assert "for k in T.unroll(2):" in text
    path = _write(tmp_path, "huge_prologue", text.replace("for k in T.unroll(2):", "for k in T.unroll(10000000):", 1))
    rc, _, err = run_text(path)
    assert rc == 2 and "more than the 1024" in err and "Traceback" not in err

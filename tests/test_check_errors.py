"""``synth check`` on the saved inputs (no compiler needed): verdicts, and what is outside the model (exit 2)."""

from __future__ import annotations

import pathlib
import re

import pytest

from check_inputs.helpers import run_check, run_text

INPUTS = pathlib.Path(__file__).parent / "check_inputs"
SAVED = sorted(p for p in INPUTS.iterdir() if p.suffix in (".ttgir", ".mlir"))


def _tvm_missing() -> bool:
    try:
        import tvm.s_tir  # noqa: F401
    except Exception:
        return True
    return False


@pytest.mark.parametrize("path", SAVED, ids=lambda p: p.name)
def test_saved_compiler_outputs_are_proven(path):
    rc, doc, err = run_check(str(path))
    assert rc == 0, err
    assert doc["result"]["counts"]["refuted"] == 0


@pytest.mark.skipif(_tvm_missing(), reason="apache-tvm is not installed (needed to parse TVMScript)")
def test_saved_tvm_scripts():
    for p in sorted(INPUTS.glob("tvm-*.py")):
        rc, doc, err = run_check(str(p))
        assert rc == (1 if "interleaving" in p.name or "two-async" in p.name else 0), (p, err)


def _matmul() -> str:
    return (INPUTS / "triton-matmul-s3.ttgir").read_text()


def _body_start(lines: list) -> int:
    return next(i for i, x in enumerate(lines) if "scf.for" in x)


def _mutate(tmp_path, text: str, name: str = "bad.ttgir") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_indirect_slot_index_is_outside_the_model(tmp_path):
    lines = _matmul().splitlines()
    b = _body_start(lines)
    k = next(i for i in range(b, len(lines)) if "ttg.memdesc_index %a[" in lines[i])
    lines[k] = re.sub(r"%a\[%[\w]+\]", "%a[%K]", lines[k])
    rc, _, err = run_text(_mutate(tmp_path, "\n".join(lines)))
    use = next(i for i in range(k, len(lines)) if "async_copy_global_to_local" in lines[i])
    assert rc == 2
    assert "slot index" in err and "indirect" in err and f":{use + 1}:" in err  # the copy into that slot


def test_control_flow_around_a_copy_is_outside_the_model(tmp_path):
    lines = _matmul().splitlines()
    b = _body_start(lines)
    k = next(i for i in range(b, len(lines)) if "async_copy_global_to_local" in lines[i])
    lines[k:k + 1] = ["      scf.if %K {", lines[k], "      }"]
    rc, _, err = run_text(_mutate(tmp_path, "\n".join(lines)))
    assert rc == 2 and "scf.if around async copies" in err


def test_data_dependent_lower_bound(tmp_path):
    """Triton's slots are counters carried in iter_args: a lower bound read from memory changes nothing
    but the trip count. MLIR's slots are computed from the induction variable: then they are unknown."""
    lines = _matmul().splitlines()
    b = _body_start(lines)
    lines[b] = re.sub(r"= %c0_i32 to", "= %K to", lines[b], count=1)
    rc, doc, err = run_check(_mutate(tmp_path, "\n".join(lines)))
    assert rc == 0 and doc["result"]["trip_count"] == "T", err
    text = (INPUTS / "mlir-copy-depth3.mlir").read_text()
    assert "scf.for %arg2 = %c0 to" in text
    rc, _, err = run_text(_mutate(tmp_path, text.replace("scf.for %arg2 = %c0 to", "scf.for %arg2 = %n to"),
                                  "lb.mlir"))
    assert rc == 2 and "data-dependent" in err


def test_prologue_that_does_not_rotate_is_reported(tmp_path):
    text = _matmul()
    assert "ttg.memdesc_index %a[%c1_i32]" in text
    rc, _, err = run_text(_mutate(tmp_path, text.replace("ttg.memdesc_index %a[%c1_i32]",
                                                         "ttg.memdesc_index %a[%c0_i32]", 1)))
    assert rc == 2 and "write #1 of a before the loop goes to slot 0, not 1" in err


def test_lowered_body_wait_on_saved_triton_is_refuted_at_every_trip_count(tmp_path):
    lines = _matmul().splitlines()
    b = _body_start(lines)
    for i in range(b, len(lines)):
        lines[i] = lines[i].replace("{num = 2 : i32}", "{num = 3 : i32}")
    path = _mutate(tmp_path, "\n".join(lines))
    for t in (1, 2, 5):
        rc, doc, _ = run_check(path, "--trip-count", str(t))
        assert rc == 1 and doc["result"]["counts"]["refuted"] >= 1, t
    rc, doc, _ = run_check(str(INPUTS / "triton-matmul-s3.ttgir"), "--trip-count", "1")
    assert rc == 0


def test_saved_mlir_mutation(tmp_path):
    text = (INPUTS / "mlir-copy-depth3.mlir").read_text()
    rc, out, _ = run_text(_mutate(tmp_path, text.replace("numGroups = 2", "numGroups = 3"), "bad.mlir"))
    assert rc == 1 and "RAW (stale read)" in out


@pytest.mark.parametrize("content, needle", [
    ("func.func @f() {\n  return\n}\n", "cannot tell the input form"),
    ("module {\n  ttg.async_wait {num = 0 : i32}\n}\n", "no pipelined loop"),
    ("module {\n  scf.for %i = %c0 to %c4 step %c1 {\n    ttg.async_wait {num = 0 : i32}\n", "unbalanced"),
])
def test_bad_inputs_exit_2(tmp_path, content, needle):
    rc, _, err = run_text(_mutate(tmp_path, content, "x.ttgir"))
    assert rc == 2 and needle in err and "fix:" in err and "Traceback" not in err


def test_missing_file_and_folder_exit_2(tmp_path):
    rc, _, err = run_text(str(tmp_path / "nope.ttgir"))
    assert rc == 2 and "no such file" in err
    rc, _, err = run_text(str(tmp_path))
    assert rc == 2 and "folder" in err


def test_trip_count_options_are_exclusive():
    rc, _, err = run_text(str(INPUTS / "mlir-copy-depth2.mlir"), "--trip-count", "3", "--min-trip-count", "2")
    assert rc == 2 and "not allowed with" in err


def test_func_is_for_tvmscript_only(tmp_path):
    rc, _, err = run_text(str(INPUTS / "mlir-copy-depth2.mlir"), "--func", "main")
    assert rc == 2 and "--func main: only a TVMScript file" in err and "Traceback" not in err


def test_affine_map_dividing_by_zero_is_outside_the_model(tmp_path):
    text = (INPUTS / "mlir-copy-depth2.mlir").read_text()
    assert "floordiv 4" in text
    rc, _, err = run_text(_mutate(tmp_path, text.replace("floordiv 4", "floordiv 0"), "x.mlir"))
    assert rc == 2 and "Traceback" not in err and "fix:" in err


def test_tvm_parse_error_is_located_in_the_file(tmp_path):
    """An error TVM's parser reports (after the screen) points at the file's own line and column."""
    pytest.importorskip("tvm")
    text = (INPUTS / "tvm-stream-s2.py").read_text()
    assert 'with T.sblock("use"):' in text
    bad = text.replace('with T.sblock("use"):', 'with T.block("use"):', 1)
    line = bad.splitlines().index(next(ln for ln in bad.splitlines() if 'T.block("use")' in ln)) + 1
    col = bad.splitlines()[line - 1].index("T.block") + 1
    rc, _, err = run_text(_mutate(tmp_path, bad, "x.py"))
    assert rc == 2 and f"x.py:{line}:{col}: error: TVMScript function main does not parse" in err, err


@pytest.mark.parametrize("name", ["mlir-copy-depth2.mlir", "triton-matmul-s3.ttgir"])
def test_a_number_of_thousands_of_digits_is_refused(tmp_path, name):
    """A 5000-digit constant crashed the MLIR reader (Python's int() refuses more than 4300 digits;
    found by the check fuzzing)."""
    text = (INPUTS / name).read_text()
    m = re.search(r"arith\.constant (\d+) :", text)
    bad = text[:m.start(1)] + "9" * 5000 + text[m.end(1):]
    line = text[:m.start(1)].count("\n") + 1
    rc, _, err = run_text(_mutate(tmp_path, bad, name))
    assert rc == 2 and f"{name}:{line}:" in err and "5000 digits" in err and "Traceback" not in err, err

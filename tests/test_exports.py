"""Schedule exports: TVM TensorIR annotations and an MLIR scf.for for the pipelining test pass."""

from __future__ import annotations

import dataclasses
import glob
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from synth.emit.mlir import mlir_pipelined_loop
from synth.emit.tvm import tvm_annotations
from synth.graph import build_graph
from synth.load import load_problem, load_problem_text
from synth.schedule import schedule_from_pins

ROOT = pathlib.Path(__file__).resolve().parent.parent
PINNED = ["rfc0077-gemm", "rfc0077-two-stage", "rfc0077-three-stage", "rfc0077-interleaved",
          "rfc0077-same-stage-consumer", "spec-predicated"]


def pinned(name: str):
    p = load_problem(str(ROOT / "problems" / f"{name}.yaml"))
    return p, schedule_from_pins(p, build_graph(p))


# --- TVM -----------------------------------------------------------------------------------

def test_tvm_rfc_gemm_reproduces_the_rfc_annotations():
    p, s = pinned("rfc0077-gemm")
    text = tvm_annotations(p, s, loop="k0")
    code = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert code == [
        'sch.annotate(k0, ann_key="software_pipeline_stage", ann_val=[0, 0, 2, 3, 3])',
        'sch.annotate(k0, ann_key="software_pipeline_order", ann_val=[0, 1, 3, 2, 4])',
        'sch.annotate(k0, ann_key="software_pipeline_async_stages", ann_val=[0])',
    ]
    # The same lines appear verbatim in RFC 0077.
    rfc = (ROOT.parent / "shared" / "seeds" / "tvm-rfc-0077-async-pipeline.txt")
    if rfc.exists():
        seed = rfc.read_text()
        for line in code:
            assert line in seed
    header = [ln for ln in text.splitlines() if ln.startswith("#")]
    assert "rfc0077-gemm" in header[0]
    assert any("0: load_A" in h and "stage 0" in h and "order 0" in h for h in header)
    assert "# pipelined body order: load_A, load_B, s2r_B, s2r_A, mma" in header


def test_tvm_default_loop_and_ast():
    import ast

    p, s = pinned("rfc0077-interleaved")
    text = tvm_annotations(p, s)
    tree = ast.parse(text)  # valid Python
    calls = [n.value for n in tree.body if isinstance(n, ast.Expr)]
    got = {c.keywords[0].value.value: ast.literal_eval(c.keywords[1].value) for c in calls}
    assert all(c.args[0].id == "k" for c in calls)
    assert got == {"software_pipeline_stage": [0, 0, 3], "software_pipeline_order": [0, 2, 1],
                   "software_pipeline_async_stages": [0]}


@pytest.mark.parametrize("name", PINNED)
def test_tvm_lists_match_schedule(name):
    p, s = pinned(name)
    text = tvm_annotations(p, s, loop=p.loop.var)
    vals = dict(re.findall(r'ann_key="(\w+)", ann_val=(\[[^\]]*\])', text))
    assert eval(vals["software_pipeline_stage"]) == list(s.stage)  # noqa: S307
    assert eval(vals["software_pipeline_order"]) == list(s.order)  # noqa: S307
    assert eval(vals["software_pipeline_async_stages"]) == list(p.pins.async_stages)  # noqa: S307


def test_tvm_no_async_stage_and_queue_note():
    p, s = pinned("rfc0077-gemm")
    sync = dataclasses.replace(s, is_async=(False,) * 5, queue=(None,) * 5)
    text = tvm_annotations(p, sync)
    assert "software_pipeline_async_stages" not in text and "no async stages" in text
    # One async unit in two async stages: TVM would give each stage its own queue.
    split = dataclasses.replace(s, stage=(0, 1, 2, 3, 3), is_async=(True, True, False, False, False))
    assert "# note: unit cp_async is async in several stages" in tvm_annotations(p, split)


def test_tvm_rejects_mismatched_schedule():
    p, s = pinned("rfc0077-gemm")
    with pytest.raises(ValueError):
        tvm_annotations(p, dataclasses.replace(s, stage=(0, 1)))
    with pytest.raises(ValueError):
        tvm_annotations(p, s, loop="k\nimport os")


# --- MLIR ----------------------------------------------------------------------------------

OP_RE = re.compile(r'"synth\.op"\(%(\w+)\) \{(.*)\} : \(index\) -> \(\)$')


def op_attrs(text: str) -> list[dict[str, str]]:
    out = []
    for line in text.splitlines():
        m = OP_RE.search(line.strip())
        if m:
            out.append(dict(kv.split(" = ", 1) for kv in re.split(r", (?=[\w.]+ = )", m.group(2))))
    return out


def check_generic_mlir(text: str) -> None:
    """Cheap syntax checks: balanced brackets outside strings, every line a known form."""
    depth = {"(": 0, "{": 0, "[": 0}
    close = {")": "(", "}": "{", "]": "["}
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', "\n".join(ln for ln in text.splitlines()
                                                          if not ln.lstrip().startswith("//"))):
        if ch in depth:
            depth[ch] += 1
        elif ch in close:
            depth[close[ch]] -= 1
            assert depth[close[ch]] >= 0
    assert all(v == 0 for v in depth.values()), depth
    defined: set[str] = set()
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        if s.startswith("^bb"):
            defs, uses = re.findall(r"%([\w$.-]+): index", s), []
        else:
            m = re.match(r"%([\w$.-]+) = ", s)
            defs = [m.group(1)] if m else []
            uses = re.findall(r"%([\w$.-]+)", s[m.end():] if m else s)
        for name in uses:
            assert name in defined, f"%{name} used before definition: {s}"
        for name in defs:
            assert name not in defined, f"%{name} defined twice"
            defined.add(name)


def test_mlir_rfc_gemm_attributes():
    p, s = pinned("rfc0077-gemm")
    text = mlir_pipelined_loop(p, s)
    check_generic_mlir(text)
    ops = op_attrs(text)
    assert [o["name"] for o in ops] == ['"load_A"', '"load_B"', '"s2r_A"', '"s2r_B"', '"mma"']
    assert [int(o["__test_pipelining_stage__"].split(" : ")[0]) for o in ops] == [0, 0, 2, 3, 3]
    assert [int(o["__test_pipelining_op_order__"].split(" : ")[0]) for o in ops] == [0, 1, 3, 2, 4]
    assert [o["async"] for o in ops] == ["true", "true", "false", "false", "false"]
    loop_line = next(ln for ln in text.splitlines() if "__test_pipelining_loop__" in ln)
    assert "synth.async_stages = [0 : i64]" in loop_line
    assert loop_line.strip().startswith("})") and loop_line.endswith(": (index, index, index) -> ()")
    assert '"scf.for"(%c0, %ub, %c1)' in text and "{value = 128 : index}" in text
    assert 'sym_name = "rfc0077_gemm"' in text


def test_mlir_symbolic_trip_count_and_predicate():
    p, s = pinned("spec-predicated")
    text = mlir_pipelined_loop(p, s)
    check_generic_mlir(text)
    assert "^bb0(%T: index):" in text and '"scf.for"(%c0, %T, %c1)' in text
    assert "function_type = (index) -> ()" in text
    assert 'when = "k + 3 < T"' in text


def test_mlir_renames_clashing_ssa_names():
    text = (ROOT / "problems" / "rfc0077-two-stage.yaml").read_text() \
        .replace("loop: {var: i, trip_count: 16}", "loop: {var: c0, trip_count: ub, min_trip_count: 2}")
    p = load_problem_text(text, "x.yaml")
    text = mlir_pipelined_loop(p, schedule_from_pins(p, build_graph(p)))
    check_generic_mlir(text)
    assert "^bb0(%ub_: index):" in text and "^bb0(%c0_: index):" in text


@pytest.mark.parametrize("name", PINNED)
def test_mlir_every_pinned_example_is_well_formed(name):
    p, s = pinned(name)
    text = mlir_pipelined_loop(p, s)
    check_generic_mlir(text)
    ops = op_attrs(text)
    assert len(ops) == len(p.ops)
    assert sorted(int(o["__test_pipelining_op_order__"].split(" : ")[0]) for o in ops) == list(range(len(p.ops)))


def test_mlir_parses_with_xdsl():
    xdsl = pytest.importorskip("xdsl")
    from xdsl.context import Context
    from xdsl.dialects import get_all_dialects
    from xdsl.parser import Parser

    ctx = Context(allow_unregistered=True)
    for dname, factory in get_all_dialects().items():
        ctx.register_dialect(dname, factory)
    for name in PINNED:
        p, s = pinned(name)
        module = Parser(ctx, mlir_pipelined_loop(p, s), name).parse_module()
        module.verify()
    assert xdsl


def _mlir_opt() -> str | None:
    """``$MLIR_OPT``, ``mlir-opt`` on PATH, or a Debian/Ubuntu ``mlir-NN-tools`` install."""
    found = os.environ.get("MLIR_OPT") or shutil.which("mlir-opt")
    if found:
        return found
    installed = sorted(glob.glob("/usr/lib/llvm-*/bin/mlir-opt"), key=lambda p: int(p.split("-")[1].split("/")[0]))
    return installed[-1] if installed else None


@pytest.mark.skipif(_mlir_opt() is None, reason="mlir-opt not installed (apt-get install mlir-NN-tools)")
def test_mlir_opt_pipelines_it_like_the_rfc(tmp_path):
    """Upstream's pass turns the RFC GEMM into RFC 0077's loop: 3 prologue steps, 125 body steps."""
    p, s = pinned("rfc0077-gemm")
    src = tmp_path / "gemm.mlir"
    src.write_text(mlir_pipelined_loop(p, s))
    run = subprocess.run([_mlir_opt(), "--allow-unregistered-dialect", "--test-scf-pipelining", str(src)],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0 and "test-scf-pipelining" in run.stderr:
        pytest.skip("this mlir-opt was built without MLIR's test passes")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "__test_pipelining_stage__" not in out  # the pass consumed the markers
    body = out[out.index("scf.for"):]
    body = body[: body.index("\n    }\n")]
    assert re.search(r"scf\.for %\w+ = %c0 to %c125 step %c1", body)
    assert re.findall(r'name = "(\w+)"', body) == ["load_A", "load_B", "s2r_B", "s2r_A", "mma"]
    prologue = out[: out.index("scf.for")]
    assert re.findall(r'name = "(\w+)"', prologue) == ["load_A", "load_B"] * 3 + ["s2r_A"]

"""Fuzz target: ``synth check`` inputs (TTGIR, TVMScript, MLIR text), in-process.

Mutants of the inputs in ``tests/check_inputs/`` (numbers out of range, dropped,
duplicated and swapped lines, truncation, bytes that are not UTF-8, deep nesting)
and, for TVMScript, Python payloads planted where TVM's parser would evaluate them
(annotations, decorator arguments, default values, calls, module-level statements):
every run answers exit 0, 1 or 2 within a time bound, with no traceback, and no
payload ever runs (its marker file never appears). A few examples by default;
``SYNTH_HYPOTHESIS=explore`` runs many more, drawn afresh.
"""

from __future__ import annotations

import os
import pathlib
import re

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import assert_contract, run_cli


ROOT = pathlib.Path(__file__).resolve().parents[2]
INPUTS = ROOT / "tests" / "check_inputs"
EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
TEXT = sorted(p for p in INPUTS.rglob("*") if p.suffix in (".ttgir", ".mlir") and (EXPLORE or "hopper" not in p.name))
"""TTGIR and MLIR inputs (the Hopper ones, whose proofs take longer, only under explore)."""
TVM = sorted(INPUTS.glob("tvm-*.py"))
SECONDS = 90.0
"""Time bound of one check (2 s per solver query; the inputs prove in 1 to 5 s)."""


NUMBERS = ["-1", "0", "1000000000", "10000000", "9" * 30, "9" * 5000, "2147483648", "-9223372036854775809"]


def _text_mutation(draw, text: str) -> str:
    kind = draw(st.sampled_from(["number", "drop", "duplicate", "swap", "truncate", "nesting", "token"]))
    lines = text.splitlines(keepends=True)
    if kind == "number":
        nums = list(re.finditer(r"(?<![\w.%#])\d+(?![\w.])", text))
        if nums:
            m = draw(st.sampled_from(nums))
            return text[:m.start()] + draw(st.sampled_from(NUMBERS)) + text[m.end():]
    if kind in ("drop", "duplicate", "swap") and len(lines) > 1:
        i = draw(st.integers(0, len(lines) - 2))
        if kind == "drop":
            return "".join(lines[:i] + lines[i + 1:])
        if kind == "duplicate":
            return "".join(lines[:i + 1] + lines[i:])
        return "".join(lines[:i] + [lines[i + 1], lines[i]] + lines[i + 2:])
    if kind == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    if kind == "nesting":
        i = draw(st.integers(0, len(text)))
        n = draw(st.sampled_from([65, 1000, 100_000]))
        return text[:i] + "(" * n + "0" + ")" * n + text[i:]
    if kind == "token":
        i = draw(st.integers(0, len(text)))
        tok = draw(st.sampled_from(["}", "{", "%", "@", "!", ":", "\"", "\\", "\x00", "#", "\u2028", "scf.for",
                                    "ttg.async_wait {num = 0 : i32}", "nvgpu.device_async_wait"]))
        return text[:i] + tok + text[i:]
    return text


def _payloads(marker: str) -> list[str]:
    p = f"open({marker!r}, 'w').close()"
    return [p, f"__import__('os').system('touch {marker}')", f"(lambda: {p})()", f"[{p} for i in range(1)]",
            f"f'{{{p}}}'", f"(z := {p})", f"T.Buffer.__init__.__globals__['__builtins__']['exec']({p!r})",
            f"T.meta_var({p})", f"T.parser.entry.parse({p!r})", f"tvm.ffi.get_global_func({p!r})"]


def _tvm_injection(draw, text: str, marker: str) -> str:
    payload = draw(st.sampled_from(_payloads(marker)))
    where = draw(st.sampled_from(["expression", "statement", "module", "decorator", "annotation", "default"]))
    lines = text.splitlines(keepends=True)
    if where == "expression":
        nums = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", text))
        m = draw(st.sampled_from(nums))
        return text[:m.start()] + f"({payload})" + text[m.end():]
    if where == "statement":
        body = [i for i, ln in enumerate(lines) if ln.strip().startswith("T.reads(")]
        i = draw(st.sampled_from(body))
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        return "".join(lines[:i] + [indent + payload + "\n"] + lines[i:])
    if where == "module":
        return payload + "\n" + text
    if where == "decorator":
        return text.replace("@T.prim_func(s_tir=True)", f"@T.prim_func(s_tir={payload})", 1)
    if where == "annotation":
        return re.sub(r'T\.Buffer\(\(([^)]*)\), "float32"\)', lambda m: f'T.Buffer(({m.group(1)}), {payload})',
                      text, count=1)
    return re.sub(r'"float32"\)\):', f'"float32") = {payload}):', text, count=1)


@st.composite
def check_input(draw, marker: str):
    form = draw(st.sampled_from(["text", "tvm", "tvm-attack"] if TVM else ["text"]))
    src = draw(st.sampled_from(TVM if form.startswith("tvm") else TEXT))
    text = src.read_text()
    if form.startswith("tvm"):
        text = "from tvm.script import ir as I\nfrom tvm.script import tirx as T\n" + text
    if form == "tvm-attack":
        text = _tvm_injection(draw, text, marker)
    for _ in range(draw(st.integers(0 if form == "tvm-attack" else 1, 2))):
        text = _text_mutation(draw, text)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:  # a byte that is not UTF-8
        i = draw(st.integers(0, len(data)))
        data = data[:i] + b"\xff" + data[i:]
    return form, src.suffix, data


@settings(max_examples=300 if EXPLORE else 8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_check_input_mutants(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("c")
    marker = d / "MARKER"
    form, suffix, content = data.draw(check_input(str(marker)))
    f = d / f"input{suffix}"
    f.write_bytes(content)
    rc, _, err = run_cli(["check", str(f), "--time-limit", "2"], SECONDS)
    event(f"{form} {suffix} exit {rc}")
    assert_contract(rc, err, f"check ({form})", strict=True)
    assert not marker.exists(), "the checked file ran"
    if form == "tvm-attack" and str(marker).encode() in content:  # a later mutation may have cut the payload
        assert rc == 2, err

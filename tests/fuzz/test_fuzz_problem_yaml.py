"""Fuzz target: problem YAML files (``synth lower FILE``, in-process).

Mutants of the example problems (numbers out of every bound, nesting, alias bombs,
YAML tags that would run code, bytes that are not UTF-8, control characters,
truncation, dropped and duplicated lines) and special files: every one answers exit
0, 1 or 2 within a time bound, with no traceback, and a YAML tag never runs (its
marker file never appears). A few examples run by default; ``SYNTH_HYPOTHESIS=explore``
runs many more, drawn afresh.
"""

from __future__ import annotations

import os
import pathlib
import re
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import AT_ONCE_S
from synth.bounds import MAX_INPUT_BYTES

from tests.fuzz.harness import assert_contract, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "problems").glob("*.yaml"))
EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
SECONDS = 30.0
"""Time bound of one run (the loader answers in milliseconds; lowering a pinned GEMM in about a second)."""


NUMBERS = ["-1", "0", "1000000000", "1" + "0" * 30, "1e309", "9" * 5000, "0x7fffffffffffffff", ".nan", "-.inf",
           "'12'", "[]", "{}", "~", "true"]


def _mutate(draw, text: str, marker: str) -> bytes:
    kind = draw(st.sampled_from(["number", "nesting", "alias", "tag", "bytes", "control", "truncate", "drop",
                                 "duplicate", "key", "long"]))
    lines = text.splitlines(keepends=True)
    if kind == "number":
        nums = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", text))
        if nums:
            m = draw(st.sampled_from(nums))
            return (text[:m.start()] + draw(st.sampled_from(NUMBERS)) + text[m.end():]).encode()
    if kind == "nesting":
        n = draw(st.sampled_from([33, 1000, 100_000]))
        return (text + "extra: " + "[" * n + "]" * n + "\n").encode()
    if kind == "alias":
        bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        for i, name in enumerate("bcdefghi"):
            prev = "abcdefghi"[i]
            bomb += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
        return (text + bomb).encode()
    if kind == "tag":
        tag = draw(st.sampled_from([f"!!python/object/apply:os.system ['touch {marker}']",
                                    f"!!python/object/new:os.system ['touch {marker}']", "!!binary aGVsbG8=",
                                    "!custom x", "!!timestamp 2020-99-99", "!!int abc"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        return ("".join(lines[:i]) + f"description: {tag}\n" + "".join(lines[i:])).encode()
    if kind == "bytes":
        data = bytearray(text.encode())
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        data[i:i] = draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xe2\x80", b"\xed\xa0\x80"]))
        return bytes(data)
    if kind == "control":
        i = draw(st.integers(0, len(text)))
        return (text[:i] + draw(st.sampled_from(["\x07", "\x1b", "\u0085", "\u2028", "\u2029", "\ufeff", "\t"]))
                + text[i:]).encode()
    if kind == "truncate":
        return text[:draw(st.integers(0, len(text)))].encode()
    if kind in ("drop", "duplicate") and lines:
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[:i] + ([] if kind == "drop" else [lines[i], lines[i]]) + lines[i + 1:]).encode()
    if kind == "key" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        junk = draw(st.text(alphabet="abc:-[]{}&*!|>'\" \n#%@`", max_size=12))
        return "".join(lines[:i] + [junk + lines[i]] + lines[i + 1:]).encode()
    if kind == "long":
        return (text + "description: " + "x" * draw(st.sampled_from([4097, 100_000])) + "\n").encode()
    return text.encode()


@st.composite
def problem_bytes(draw, marker: str):
    text = draw(st.sampled_from(EXAMPLES)).read_text()
    data = text.encode()
    for _ in range(draw(st.integers(1, 3))):
        data = _mutate(draw, data.decode("utf-8", "replace"), marker)
    return data


@settings(max_examples=400 if EXPLORE else 12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_problem_yaml_mutants(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("p")
    marker = d / "MARKER"
    f = d / "problem.yaml"
    f.write_bytes(data.draw(problem_bytes(str(marker))))
    rc, _, err = run_cli(["lower", str(f)], SECONDS)
    event(f"lower exit {rc}")
    assert_contract(rc, err, "lower")
    assert not marker.exists(), "a YAML tag ran"


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "folder", "oversized", "symlink_to_fifo"])
def test_problem_special_files(tmp_path, kind):
    if kind == "dev_zero":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        path = "/dev/zero"
    elif kind in ("fifo", "symlink_to_fifo"):
        path = str(tmp_path / "p.fifo")
        os.mkfifo(path)
        if kind == "symlink_to_fifo":
            os.symlink(path, tmp_path / "link.yaml")
            path = str(tmp_path / "link.yaml")
    elif kind == "folder":
        path = str(tmp_path)
    else:
        path = str(tmp_path / "big.yaml")
        with open(path, "wb") as fh:
            fh.truncate(MAX_INPUT_BYTES + 1)
    t0 = time.monotonic()
    rc, _, err = run_cli(["lower", path], seconds=AT_ONCE_S)
    assert rc == 2 and "Traceback" not in err and err.startswith(path), err
    assert time.monotonic() - t0 < AT_ONCE_S

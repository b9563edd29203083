"""The problem loader (SPEC §1): every bad input gets one located error, every example loads.

Each ``tests/bad/*.yaml`` opens with ``# expect: LINE:COL: <substring of the message>``
and may follow it with ``# fix: <substring of the fix>``; one parametrized test
checks them all.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from synth.errors import Loc, SynthError
from synth.load import load_problem, load_problem_text
from synth.yamlnodes import read_yaml_text

ROOT = pathlib.Path(__file__).resolve().parent.parent
BAD = sorted((ROOT / "tests" / "bad").glob("*.yaml"))
# YAML files in problems/ that are data for other tools, not problem files.
NOT_PROBLEMS: set[str] = set()
PROBLEMS = sorted(p for p in (ROOT / "problems").glob("*.yaml") if p.name not in NOT_PROBLEMS)

EXPECT_RE = re.compile(r"^# expect: (\d+):(\d+): (.+)$")
FIX_RE = re.compile(r"^# fix: (.+)$")


def expectation(path: pathlib.Path) -> tuple[int, int, str, str | None]:
    lines = path.read_text(encoding="utf-8").split("\n")
    m = EXPECT_RE.match(lines[0])
    assert m, f"{path.name}: the first line must be '# expect: LINE:COL: message'"
    f = FIX_RE.match(lines[1]) if len(lines) > 1 else None
    return int(m.group(1)), int(m.group(2)), m.group(3).strip(), f.group(1).strip() if f else None


def test_enough_bad_inputs():
    assert len(BAD) >= 25


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_input(path: pathlib.Path):
    line, col, msg, fix = expectation(path)
    with pytest.raises(SynthError) as info:
        load_problem(str(path))
    err = info.value
    assert err.loc is not None and err.loc.file == str(path)
    assert (err.loc.line, err.loc.col) == (line, col), f"{err.render()}\nexpected {line}:{col}"
    assert msg in err.msg, err.render()
    assert err.fix, "every error says how to fix it"
    if fix is not None:
        assert fix in err.fix, err.render()
    # The rendering: file:line:col: error: msg / the source line / a caret under the column / fix.
    out = err.render().split("\n")
    assert out[0] == f"{path}:{line}:{col}: error: {err.msg}"
    src = path.read_text(encoding="utf-8").split("\n")[line - 1]
    assert out[1] == "    " + src
    assert out[2].endswith("^") and len(out[2]) == 4 + col
    assert out[-1] == f"fix: {err.fix}"
    assert "Traceback" not in str(err)


@pytest.mark.parametrize("path", PROBLEMS, ids=[p.stem for p in PROBLEMS])
def test_example_problem_loads(path: pathlib.Path):
    problem = load_problem(str(path))
    assert problem.name and problem.ops
    assert problem.path == str(path)
    again = load_problem_text(path.read_text(encoding="utf-8"), str(path))
    assert again == problem


def test_rfc_gemm_pins():
    p = load_problem(str(ROOT / "problems" / "rfc0077-gemm.yaml"))
    assert [o.name for o in p.ops] == ["load_A", "load_B", "s2r_A", "s2r_B", "mma"]
    assert p.pins.stage == (0, 0, 2, 3, 3)
    assert p.pins.order == (0, 1, 3, 2, 4)
    assert p.pins.async_stages == (0,)
    assert p.target.async_units == ("cp_async",)
    assert p.buffer("C_r").carried
    # Locations point into the file: each op at its '{'.
    lines = (ROOT / "problems" / "rfc0077-gemm.yaml").read_text().split("\n")
    for op in p.ops:
        assert lines[op.loc.line - 1][op.loc.col - 1:].startswith("{name: " + op.name)


def test_cli_exit_status_2_without_traceback(capsys):
    from synth.cli import main

    for path in BAD:
        line, col, _, _ = expectation(path)
        assert main(["lower", str(path)]) == 2, path.name
        err = capsys.readouterr().err
        assert err.startswith(f"{path}:{line}:{col}: error: "), err
        assert "Traceback" not in err


# --- smaller loader behaviours -------------------------------------------------------------

MINI = """\
name: mini
loop: {var: k, trip_count: 8}
buffers:
  X: {space: shared, bytes: 64}
ops:
  - {name: produce, unit: dma, writes: [X], latency: 10}
  - {name: consume, unit: alu, reads: [X], latency: 2}
target:
  shared_bytes: 1024
  units: {dma: {async: true}, alu: {}}
"""


def _err(text: str) -> SynthError:
    with pytest.raises(SynthError) as info:
        load_problem_text(text, "p.yaml")
    return info.value


def test_minimal_problem_defaults():
    p = load_problem_text(MINI, "p.yaml")
    assert p.op("consume").issue == 1
    assert p.objective.terms == (("latency", 1),)
    assert p.pins.stage is None and p.deps == ()
    assert p.op("produce").loc == Loc("p.yaml", 6, 5)


def test_missing_file_and_non_utf8(tmp_path):
    with pytest.raises(SynthError) as info:
        load_problem(str(tmp_path / "nope.yaml"))
    assert info.value.loc == Loc(str(tmp_path / "nope.yaml")) and "cannot read" in info.value.msg
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SynthError) as info:
        load_problem(str(bad))
    assert "UTF-8" in info.value.msg


def test_yaml_merge_keys_and_anchors():
    text = MINI.replace("ops:\n", "ops:\n  - &base {name: first, unit: alu, latency: 3, issue: 2}\n") \
               .replace("- {name: consume, unit: alu, reads: [X], latency: 2}",
                        "- {<<: *base, name: consume, reads: [X]}")
    p = load_problem_text(text, "p.yaml")
    c = p.op("consume")
    assert (c.unit, c.latency, c.issue, c.reads) == ("alu", 3, 2, ("X",))


def test_recursive_alias_is_an_error_not_a_recursion():
    e = _err("name: &n [1, *n]\n")
    assert e.loc == Loc("p.yaml", 1, 7) and "contains it" in e.msg


def test_yaml_tag_is_an_error_not_a_traceback():
    for tagged in ("!cycles 10", "!!python/object:os.system 10"):
        text = MINI.replace("latency: 10", "latency: " + tagged)
        e = _err(text)
        assert e.loc == Loc("p.yaml", 6, text.split("\n")[5].index("!") + 1), e.render()
        assert "cannot read value" in e.msg


def test_non_string_key():
    e = _err(MINI.replace("  X: {", "  12: {"))
    assert e.loc == Loc("p.yaml", 4, 3) and "not a name" in e.msg


def test_weighted_objectives():
    p = load_problem_text(MINI + "objective: [{latency: 4}, {shared_memory: 1}]\n", "p.yaml")
    assert p.objective.terms == (("latency", 4), ("shared_memory", 1))
    p = load_problem_text(MINI + "objective: {latency: 2, shared_memory: 1}\n", "p.yaml")
    assert p.objective.terms == (("latency", 2), ("shared_memory", 1))
    p = load_problem_text(MINI + "objective: shared_memory\n", "p.yaml")
    assert p.objective.terms == (("shared_memory", 1),)
    assert "empty" in _err(MINI + "objective: []\n").msg
    assert "twice" in _err(MINI + "objective: [latency, latency]\n").msg
    e = _err(MINI + "objective: [{latency: -1}]\n")
    assert e.loc == Loc("p.yaml", 11, 23) and "non-negative" in e.msg


@pytest.mark.parametrize("when, ok", [
    ("k + 3 < T", True), ("k >= 1", True), ("opaque", True), ("k % 2 == 0 && k < T - 1", True),
    ("(k < 2) ? k < 1 : k > T - 3", True), ("not (k < 2)", True),
    ("k * T < 4", False), ("k / 0 < 1", False), ("k % T == 0", False), ("!k", False),
    ("k < 1 || 3", False), ("min(k, T < 2) > 0", False), ("foo(k) < 2", False),
])
def test_predicates(when: str, ok: bool):
    text = MINI.replace("trip_count: 8}", "trip_count: T, min_trip_count: 2}") \
               .replace("latency: 10}", f"latency: 10, when: \"{when}\"}}")
    if ok:
        pred = load_problem_text(text, "p.yaml").op("produce").when
        assert pred is not None and pred.text == when and pred.opaque == (when == "opaque")
    else:
        e = _err(text)
        assert e.loc.line == 6 and "predicate" in e.msg, e.render()


def test_predicate_error_columns_plain_and_quoted():
    base = MINI.replace("trip_count: 8}", "trip_count: T, min_trip_count: 2}")
    plain = base.replace("latency: 10}", "latency: 10, when: k < M}")
    quoted = base.replace("latency: 10}", "latency: 10, when: 'k < M'}")
    line = plain.split("\n")[5]
    assert _err(plain).loc.col == line.index("M") + 1
    assert _err(quoted).loc.col == quoted.split("\n")[5].index("M") + 1


def test_render_keeps_tabs_under_the_caret(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("name: x\nloop:\n\t var: k\n")
    with pytest.raises(SynthError) as info:
        read_yaml_text(path.read_text(), str(path))
    out = info.value.render().split("\n")
    assert out[0].startswith(f"{path}:3:1: error: YAML syntax error: tab")
    assert out[2] == "    ^"


def test_error_without_location_renders():
    assert SynthError(None, "boom", "do less").render() == "error: boom\nfix: do less"
    assert str(SynthError(Loc("f.yaml"), "boom")) == "f.yaml: error: boom"

"""The problem loader (docs/problem-format.md): every bad input gets one located error, every example loads.

Each ``tests/bad/*.yaml`` opens with ``# expect: LINE:COL: <substring of the message>``
and may follow it with ``# fix: <substring of the fix>``; one parametrized test
checks them all.
"""

from __future__ import annotations

import os
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
    from synth.hopper.problem import HopperGemm

    problem = load_problem(str(path))
    assert problem.name and (problem.consumers if isinstance(problem, HopperGemm) else problem.ops)
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


@pytest.mark.parametrize("col", [1, 50, 2000, 4001])
def test_render_shows_a_window_of_a_long_line_with_the_caret_on_the_error(tmp_path, col):
    """A minified JSON file is one long line: the error shows at most 120 columns of it (plus "...")
    around the column, and the caret still points at the offending character."""
    path = tmp_path / "p.json"
    text = "".join(chr(ord("a") + (i * 7) % 26) for i in range(4001))
    path.write_text(text + "\n")
    out = SynthError(Loc(str(path), 1, col), "bad").render().split("\n")
    shown, caret = out[1][4:], out[2][4:]
    assert len(shown) <= 126 and caret.strip() == "^"
    assert shown[len(caret) - 1] == text[col - 1]
    assert shown.startswith("...") == (col > 61) and shown.endswith("...") == (col < 4001 - 60)


def test_error_without_location_renders():
    assert SynthError(None, "boom", "do less").render() == "error: boom\nfix: do less"
    assert str(SynthError(Loc("f.yaml"), "boom")) == "f.yaml: error: boom"


# --- bounds (docs/bounds.md) ---------------------------------------------------------------

GEMM = "name: g\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 64, BN: 64, BK: 32}\nstages: 2\n"


def _edit(old: str, new: str) -> str:
    assert old in MINI
    return MINI.replace(old, new)


# (text with @N@ where the number goes, the name of its bound in synth.bounds)
BOUNDED = {
    "latency": (_edit("latency: 10", "latency: @N@"), "MAX_LATENCY"),
    "issue": (_edit("latency: 10}", "latency: 10, issue: @N@}"), "MAX_ISSUE"),
    "count": (_edit("alu: {}}", "alu: {count: @N@}}"), "MAX_UNIT_COUNT"),
    "bytes": (_edit("bytes: 64", "bytes: @N@").replace("shared_bytes: 1024", "shared_bytes: 16777216"), "MAX_BYTES"),
    "shared_bytes": (_edit("shared_bytes: 1024", "shared_bytes: @N@"), "MAX_BYTES"),
    "registers_bytes": (_edit("shared_bytes: 1024", "shared_bytes: 1024\n  registers_bytes: @N@"), "MAX_BYTES"),
    "trip_count": (_edit("trip_count: 8", "trip_count: @N@"), "MAX_TRIP_COUNT"),
    "min_trip_count": (_edit("trip_count: 8", "trip_count: T, min_trip_count: @N@"), "MAX_TRIP_COUNT"),
    "max_stage": (MINI + "schedule: {max_stage: @N@}\n", "MAX_STAGE"),
    "distance": (MINI + "deps: [{from: consume, to: produce, distance: @N@}]\n", "MAX_DISTANCE"),
    "weight": (MINI + "objective: {latency: @N@}\n", "MAX_WEIGHT"),
    "M": (GEMM.replace("M: 256", "M: @N@"), "MAX_GEMM_DIM"),
    "BK": (GEMM.replace("BK: 32", "BK: @N@"), "MAX_TILE_K"),
    "BM": (GEMM.replace("BM: 64", "BM: @N@"), "MAX_TILE_MN"),
    "stages": (GEMM.replace("stages: 2", "stages: @N@"), "MAX_GEMM_STAGES"),
}


@pytest.mark.parametrize("key", sorted(BOUNDED))
def test_number_above_its_bound_is_located_and_names_the_bound(key: str):
    from synth import bounds

    template, const = BOUNDED[key]
    hi = getattr(bounds, const)
    text = template.replace("@N@", str(hi + 1))
    e = _err(text)
    assert f"above the maximum {hi}" in e.msg, e.render()
    line = text.split("\n")[e.loc.line - 1]
    assert line[e.loc.col - 1:].startswith(str(hi + 1)), e.render()
    assert f"at most {hi}" in e.fix and "docs/bounds.md" in e.fix
    assert "above the maximum" in _err(template.replace("@N@", str(2**63))).msg
    assert "out of range" in _err(template.replace("@N@", str(10**30))).msg


def test_numbers_at_their_bounds_load():
    from synth.bounds import MAX_ISSUE, MAX_LATENCY, MAX_STAGE, MAX_TRIP_COUNT, MAX_UNIT_COUNT

    text = (_edit("latency: 10}", f"latency: {MAX_LATENCY}, issue: {MAX_ISSUE}}}")
            .replace("trip_count: 8", f"trip_count: {MAX_TRIP_COUNT}")
            .replace("alu: {}}", f"alu: {{count: {MAX_UNIT_COUNT}}}}}") + f"schedule: {{max_stage: {MAX_STAGE}}}\n")
    p = load_problem_text(text, "p.yaml")
    assert p.op("produce").latency == MAX_LATENCY and p.loop.trip_count == MAX_TRIP_COUNT


def test_bounds_doc_lists_every_bound():
    from synth.bounds import TABLE

    doc = (ROOT / "docs" / "bounds.md").read_text(encoding="utf-8")
    for what, rng, const in TABLE:
        assert f"| {what} | {rng} | `{const}` |" in doc, what


def test_schema_states_the_same_bounds():
    from synth import bounds
    from synth.problem_schema import problem_schema

    d = problem_schema()["$defs"]
    op = d["ops"]["items"]["properties"]
    assert op["latency"]["maximum"] == bounds.MAX_LATENCY and op["issue"]["maximum"] == bounds.MAX_ISSUE
    assert d["ops"]["maxItems"] == bounds.MAX_OPS and d["buffers"]["maxProperties"] == bounds.MAX_BUFFERS
    assert d["loop"]["properties"]["min_trip_count"]["maximum"] == bounds.MAX_TRIP_COUNT
    assert d["schedule"]["properties"]["max_stage"]["maximum"] == bounds.MAX_STAGE
    assert d["target"]["properties"]["shared_bytes"]["maximum"] == bounds.MAX_BYTES
    assert d["deps"]["items"]["properties"]["distance"]["maximum"] == bounds.MAX_DISTANCE
    g = d["gemm"]["properties"]
    assert g["shape"]["properties"]["K"]["maximum"] == bounds.MAX_GEMM_DIM
    assert g["tile"]["properties"]["BK"]["maximum"] == bounds.MAX_TILE_K
    assert g["split_k"]["maximum"] == bounds.MAX_SPLIT_K


def test_schema_is_valid_2020_12_and_accepts_every_example():
    from jsonschema import Draft202012Validator

    from synth.problem_schema import problem_schema, schema_errors
    from synth.yamlnodes import read_yaml

    Draft202012Validator.check_schema(problem_schema())
    assert problem_schema()["$schema"].endswith("2020-12/schema")
    for path in PROBLEMS + sorted((ROOT / "tests" / "ported").glob("*.yaml")):
        assert schema_errors(read_yaml(str(path))) == [], path


def test_schema_decides_even_where_the_hand_written_checks_would_accept():
    # target.arch is never read by the loop loader; only the schema says it must be a name.
    e = _err(_edit("shared_bytes: 1024", "shared_bytes: 1024\n  arch: [sm_80]"))
    assert e.loc == Loc("p.yaml", 10, 9) and "does not match the problem schema" in e.msg


def test_schema_covers_gemm_documents():
    from synth.problem_schema import schema_errors

    assert schema_errors(read_yaml_text(GEMM, "g.yaml")) == []
    errs = schema_errors(read_yaml_text(GEMM + "tiles: {BM: 1}\n", "g.yaml"))
    assert errs and errs[0].msg == "unknown key 'tiles' in the problem" and "did you mean 'tile'" in errs[0].fix
    errs = schema_errors(read_yaml_text(GEMM.replace("K: 256", "K: 0"), "g.yaml"))
    assert errs and errs[0].loc == Loc("g.yaml", 3, 28)
    e = _err(GEMM.replace("stages: 2", "stages: lots"))
    assert e.loc == Loc("p.yaml", 5, 9)


@pytest.mark.parametrize("text, where, what", [
    ("name: x\x1b\n", (1, 8), "U+001B"),
    ("name: x\ndescription: \"a\u2028b\"\n", (2, 16), "U+2028"),
    ("name: x\r\ndescription: \"a\x85b\"\n", (2, 16), "U+0085"),
    ("name: x\rloop: \u2029\n", (2, 7), "U+2029"),
])
def test_control_and_separator_characters_are_located_as_an_editor_shows(text, where, what):
    e = _err(text)
    assert (e.loc.line, e.loc.col) == where and what in e.msg


def test_yaml_limits():
    from synth.bounds import MAX_YAML_DEPTH

    e = _err("name: " + "[" * 200 + "]" * 200 + "\n")
    assert f"nested more than {MAX_YAML_DEPTH} deep" in e.msg and e.loc.line == 1
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    assert "expands to more than" in _err(bomb).msg
    chain = "a0: &a0 [1]\n" + "".join(f"a{k}: &a{k} [*a{k - 1}]\n" for k in range(1, 60))
    assert "nested more than" in _err(chain).msg  # aliases cannot build depth either
    for tag, kind in (("!!int abc", "int"), ("!!float abc", "float"), ("!!timestamp 2020-99-99", "timestamp")):
        e = _err(MINI.replace("latency: 10", f"latency: {tag}"))
        assert e.loc == Loc("p.yaml", 6, 54) and f"as {kind}" in e.msg
    e = _err(MINI.replace("latency: 10", "latency: " + "9" * 5000))
    assert "5000 digits" in e.msg and e.loc == Loc("p.yaml", 6, 54)
    assert "not supported" in _err(MINI.replace("buffers:", "buffers: !!set")).msg


def test_not_a_regular_file_and_too_large(tmp_path):
    from synth.bounds import MAX_INPUT_BYTES

    for special in ("/dev/zero", str(tmp_path)):
        if os.path.exists(special):
            with pytest.raises(SynthError) as info:
                load_problem(special)
            assert info.value.loc == Loc(special) and "regular file" in info.value.msg or "folder" in info.value.msg
    big = tmp_path / "big.yaml"
    big.write_text("#" * (MAX_INPUT_BYTES + 1))
    with pytest.raises(SynthError) as info:
        load_problem(str(big))
    assert f"more than the {MAX_INPUT_BYTES}" in info.value.msg


def test_non_utf8_is_located(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_bytes(b"name: x\nloop: {v\xff: 1}\n")
    with pytest.raises(SynthError) as info:
        load_problem(str(bad))
    assert info.value.loc == Loc(str(bad), 2, 9) and "0xff" in info.value.msg


@pytest.mark.parametrize("when, msg", [
    ("(" * 2000 + "k < 3" + ")" * 2000, "longer than 256 tokens"),
    ("(" * 40 + "k < 3" + ")" * 40, "nested more than 32 deep"),
    ("!" * 40 + "(k < 3)", "nested more than 32 deep"),
    ("k < " + "9" * 30, "30 digits"),
])
def test_predicate_parser_is_bounded(when: str, msg: str):
    e = _err(MINI.replace("latency: 10}", f'latency: 10, when: "{when}"}}'))
    assert msg in e.msg and e.loc.line == 6

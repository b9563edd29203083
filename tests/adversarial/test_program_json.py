"""``synth verify`` trusts no field of program.json it can derive or check.

Each test is a small reproducer of one attack: a derived field edited (refused with
exit 2 and a located message, or re-derived), a type coerced, or input that used to
crash or hang.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import AT_ONCE_S, write_file
from synth.errors import SynthError
from synth.verify import load_program, verify_program

LISTINGS = pathlib.Path(__file__).resolve().parent.parent / "rfc_listings"


def _doc(name: str = "rfc0077-two-stage") -> dict:
    return json.loads((LISTINGS / f"{name}.json").read_text())


def _refused(tmp: pathlib.Path, doc, *needles: str) -> SynthError:
    path = write_file(tmp, "program.json", doc)
    t0 = time.perf_counter()
    with pytest.raises(SynthError) as e:
        load_program(path)
    assert time.perf_counter() - t0 < AT_ONCE_S
    err = e.value
    assert err.loc is not None and err.loc.file == path and err.fix
    for n in needles:
        assert n in err.msg, err.msg
    return err


# -- a soundness attack: a tampered program.json ----------------------------------------------

def test_epilogue_version_moved_two_ahead_and_wait_deleted(tmp_path) -> None:
    """i + 15 -> i + 17 (same slot) and no epilogue wait(0, 0): was PROVEN, yet at T = 16 the read
    sees a group still in flight. The read's distance must follow from the op's other statements."""
    d = _doc()
    epi = d["parts"][2]["stmts"]
    epi[1]["reads"][0]["version"] = "i + 17"
    del epi[0]
    d["waits"].pop(1)
    err = _refused(tmp_path, d, "parts[2].stmts[0].reads[0].version", "different distances")
    assert err.loc.line > 0


def test_version_hidden_in_a_conditional_is_checked_by_the_solver(tmp_path) -> None:
    d = _doc()
    d["parts"][2]["stmts"][1]["reads"][0]["version"] = "(i >= 0) ? i + 17 : i + 15"
    _refused(tmp_path, d, "wellformed:epilogue", "trip count 16")


def test_read_of_a_later_iteration_everywhere(tmp_path) -> None:
    d = _doc()
    d["parts"][1]["stmts"][3]["reads"][0]["version"] = "i + 2"
    d["parts"][2]["stmts"][1]["reads"][0]["version"] = "i + 17"
    _refused(tmp_path, d, "a later iteration's value")


def test_producer_removed_or_changed(tmp_path) -> None:
    d = _doc()
    del d["parts"][1]["stmts"][3]["reads"][0]["producer"]
    _refused(tmp_path, d, "names no producer")
    d = _doc()
    d["parts"][1]["stmts"][3]["reads"][0]["producer"] = "consume_B"
    _refused(tmp_path, d, "producer 'consume_B' does not write B")


def test_producer_statement_deleted(tmp_path) -> None:
    """Without the body's produce_B every RAW obligation would be vacuous."""
    d = _doc()
    del d["parts"][1]["stmts"][0:2]
    _refused(tmp_path, d, "coverage:produce_B")


def test_trip_count_not_matching_the_extents(tmp_path) -> None:
    d = _doc("rfc0077-gemm-fixed")
    d["loop"]["trip_count"] = d["loop"]["min_trip_count"] = 1
    _refused(tmp_path, d, "coverage:", "trip count 1")


def test_min_trip_count_must_equal_a_numeric_trip_count(tmp_path) -> None:
    d = _doc()
    d["loop"]["min_trip_count"] = 3
    _refused(tmp_path, d, "loop.min_trip_count", "differs from the trip count 16")


def test_before_label_checked(tmp_path) -> None:
    d = _doc("rfc0077-gemm-fixed")
    d["waits"][1]["before"] = "mma0"
    _refused(tmp_path, d, "waits[1].before")


def test_slot_checked(tmp_path) -> None:
    d = _doc()
    d["parts"][1]["stmts"][3]["reads"][0]["slot"] = "(i + 1) % 2"
    _refused(tmp_path, d, "wellformed:body")


def test_max_stage_is_derived(tmp_path) -> None:
    d = _doc()
    d["max_stage"] = 5
    _refused(tmp_path, d, "max_stage", "largest op stage is 1")


@pytest.mark.parametrize("path, value, needle", [
    (("parts", 1, "stmts", 1, "queue"), "0", "parts[1].stmts[1].queue"),
    (("buffers", 0, "multiplicity"), 1.5, "1.5 is not an integer"),
    (("buffers", 0, "multiplicity"), 2.0, "2.0 is not an integer"),
    (("loop", "trip_count"), "T T", "loop.trip_count"),
    (("ops", 0, "async"), 1, "ops[0].async"),
    (("waits", 0, "in_flight"), True, "waits[0].in_flight"),
    (("buffers", 0, "multiplicity"), 10 ** 30, "out of every bound"),
    (("buffers", 0, "multiplicity"), 10 ** 9, "buffers[0].multiplicity"),
    (("ops", 0, "stage"), -1, "ops[0].stage"),
])
def test_no_type_coercion_and_bounds(tmp_path, path, value, needle) -> None:
    d = _doc()
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    _refused(tmp_path, d, needle)


def test_stale_tight_fields_are_not_trusted(tmp_path) -> None:
    d = _doc()
    d["waits"][0].update(in_flight=2, tight=True, reason="tight: trust me")
    r = verify_program(load_program(write_file(tmp_path, "program.json", d)))
    assert not r.ok and r.verdicts[0].status == "refuted" and r.verdicts[0].tight is None
    assert "trust me" not in r.render() and ", tight" not in r.render().splitlines()[2]


# -- crashes and hangs --------------------------------------------------------------------------

@pytest.mark.parametrize("text, needle", [
    (b'{"name": "x\xff\xfe"}', "not UTF-8"),
    (b'{"name": Infinity}', "Infinity is not a JSON number"),
    (b'{"name": NaN}', "NaN is not a JSON number"),
    (b"[" * 100_000 + b"]" * 100_000, "nested more than 32 deep"),
    (b'{"name": "a", "name": "b"}', "appears twice"),
    (b"1" * 5000, "out of every bound"),
    (b"", "not valid JSON"),
])
def test_hostile_bytes(tmp_path, text, needle) -> None:
    p = tmp_path / "program.json"
    p.write_bytes(text)
    t0 = time.perf_counter()
    with pytest.raises(SynthError) as e:
        load_program(str(p))
    assert time.perf_counter() - t0 < AT_ONCE_S
    assert needle in e.value.msg and e.value.fix


def test_huge_file(tmp_path) -> None:
    p = tmp_path / "program.json"
    p.write_bytes(b" " * (9 << 20) + b"{}")
    with pytest.raises(SynthError) as e:
        load_program(str(p))
    assert "more than the" in e.value.msg and "allowed" in e.value.msg


def test_error_names_the_line(tmp_path) -> None:
    d = _doc()
    d["buffers"][0]["multiplicity"] = "2"
    err = _refused(tmp_path, d, "buffers[0].multiplicity")
    line = (tmp_path / "program.json").read_text().splitlines()[err.loc.line - 1]
    assert '"multiplicity"' in line


def test_body_extent_of_a_billion_is_refuted_quickly(tmp_path) -> None:
    """A counterexample at T ~ 10^9 must not be replayed iteration by iteration."""
    d = _doc()
    n = 10 ** 9
    d["loop"]["trip_count"] = d["loop"]["min_trip_count"] = n + 1
    d["parts"][1]["extent"] = n
    epi = d["parts"][2]["stmts"][1]
    epi["iteration"] = f"i + {n}"
    epi["reads"][0]["version"] = f"i + {n}"
    epi["reads"][0]["slot"] = f"(i + {n}) % 2"
    d["waits"][0]["in_flight"] = 2
    t0 = time.perf_counter()
    r = verify_program(load_program(write_file(tmp_path, "program.json", d)), tightness=False)
    assert not r.ok and r.verdicts[0].status == "refuted"
    assert time.perf_counter() - t0 < AT_ONCE_S


def test_cli_exit_2_without_traceback(tmp_path) -> None:
    d = _doc()
    d["parts"][2]["stmts"][1]["reads"][0]["version"] = "i + 17"
    path = write_file(tmp_path, "program.json", d)
    out = subprocess.run([sys.executable, "-m", "synth", "verify", path], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "different distances" in out.stderr + out.stdout


# -- mutation property --------------------------------------------------------------------------

def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            yield from _leaves(v, path + (k,))
    yield path


_VALUES = [None, True, 0, -1, 1, 2, 3, 2 ** 31, 10 ** 30, 1.5, "", "0", "i", "i + 1", "T", "i +", "opaque",
           "x" * 5000, [], {}, [1], {"kind": "op"}, "prologue", "body", "load_A", "(i + 17) % 2", "1 / 0"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["rfc0077-two-stage", "rfc0077-gemm-fixed", "predicated-opaque"]), st.data())
def test_any_single_edit_loads_or_is_refused_with_a_location(tmp_path, name, data) -> None:
    """Every one-field edit of a listing either loads or is a located SynthError; no crash, no hang."""
    d = _doc(name)
    paths = [p for p in _leaves(d) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(st.sampled_from(_VALUES + ["__delete__"]))
    node = d
    for k in path[:-1]:
        node = node[k]
    if value == "__delete__":
        del node[path[-1]]
    else:
        node[path[-1]] = value
    p = write_file(tmp_path, "program.json", d)
    t0 = time.perf_counter()
    try:
        program = load_program(p)
    except SynthError as e:
        assert e.loc is not None and e.loc.file == p and e.fix and e.msg
    else:
        verify_program(program, tightness=False, smt2=False)   # a loaded program is proved or refuted
    assert time.perf_counter() - t0 < AT_ONCE_S

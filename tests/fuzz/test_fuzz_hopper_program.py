"""Fuzz target: the Hopper ``program.json`` form (``synth verify`` and the trusted checker).

A solved warp-specialized program is edited at a random JSON path (a value replaced by a
number, a huge number, an expression, another type; a key dropped or added), or its bytes are
broken (nesting 100,000 deep, not UTF-8, truncated, a duplicate key). Every answer must come
within a time bound, with no exception other than a located refusal: ``load_hopper`` raises
:class:`~synth.errors.SynthError` or gives a program whose proof is refuted, unknown or proven,
and a proof only where the explicit-state oracle finds no error at six trip counts (an edit that
changes nothing the proof is about). :func:`synth.trusted.hopper.check_hopper_program` on the
same bytes never raises. A few examples by default; ``SYNTH_HYPOTHESIS=explore`` runs many more.
"""

from __future__ import annotations

import copy
import json
import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from synth.errors import SynthError
from synth.hopper.ir import dumps, load_hopper
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_hopper
from synth.trusted.hopper import check_hopper_program
from synth.verify.oracle_phases import check as oracle
from synth.verify.phases import verify_hopper

from tests.fuzz.harness import bounded, json_paths

EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
SECONDS = 60.0
"""Time bound of one example (reading is milliseconds; a proof a few seconds)."""
BASE = json.loads(dumps(lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384), Load("load_B", "B", 8192,
                                                                                        "k < T - 1")), "mma", 2, 1))))
VALUES = [-1, 0, 1, 2, 3, 64, 65, 65537, 10 ** 9, 10 ** 30, 1.5, True, None, "", "x", "0", "i", "i + 1", "i - 1",
          "i % 2", "(i + 1) % 2", "T", "T - i", "T + i - 1", "i + 1000000000", "i * 100000", "1 <= i", "k < T",
          "(" * 40 + "1" + ")" * 40, "full", "empty", "A", "B", "load_A", "mma", [], {}, [[[[[[[[]]]]]]]]]


PATHS = list(json_paths(BASE))


@st.composite
def programs(draw) -> tuple[str, bytes]:
    """``(what was done, the bytes of program.json)``."""
    kind = draw(st.sampled_from(["edit"] * 6 + ["drop", "add", "deep", "bytes", "truncate", "dupe"]))
    doc = copy.deepcopy(BASE)
    if kind in ("edit", "drop", "add"):
        path = draw(st.sampled_from(PATHS))
        node = doc
        for k in path[:-1]:
            node = node[k]
        if kind == "drop":
            del node[path[-1]]
        elif kind == "add" and isinstance(node, dict):
            node["parity"] = draw(st.sampled_from(VALUES))
        else:
            node[path[-1]] = draw(st.sampled_from(VALUES))
        return f"{kind} {'.'.join(map(str, path))}", json.dumps(doc, indent=2).encode()
    data = json.dumps(doc, indent=2).encode()
    if kind == "deep":
        return kind, b'{"protocol": "mbarrier", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    if kind == "bytes":
        i = draw(st.integers(0, len(data)))
        return kind, data[:i] + b"\xff\xfe" + data[i:]
    if kind == "truncate":
        return kind, data[:draw(st.integers(0, len(data) - 1))]
    return kind, data.replace(b'"name": "g",', b'"name": "g", "name": "h",', 1)


def _oracle_clean(p) -> bool:
    lo = p.min_trip_count
    trips = [p.trip_count] if isinstance(p.trip_count, int) else list(range(lo, lo + 6))
    return not any(r.classes for r in oracle(p, trips).values())


def judge(data: bytes, tmp) -> str:
    """The verdict of synth (refused / refuted / unknown / proven) on ``data``; fails the test when a
    proof is wrong (the oracle finds an error), when anything raises or runs past :data:`SECONDS`."""
    f = tmp / "program.json"
    f.write_bytes(data)
    with bounded(SECONDS, "load_hopper and verify_hopper"):
        try:
            p = load_hopper(str(f))
        except SynthError as e:
            assert str(f) in str(e)
            verdict = "refused"
        else:
            r = verify_hopper(p, time_limit=20, tightness=False)
            verdict = "proven" if r.ok else ("refuted" if r.refuted_classes() else "unknown")
            if verdict == "proven":
                assert _oracle_clean(p), "proven, but the oracle finds an error"
    with bounded(SECONDS, "check_hopper_program"):
        trusted = check_hopper_program(data, timeout_s=10, tightness=False)
    if verdict == "refused" and trusted.ok:
        verdict = "refused by synth, proven by the trusted checker"  # e.g. an inval in a role (docs/trust.md)
    return verdict


@settings(max_examples=int(os.environ.get("SYNTH_FUZZ_EXAMPLES", 400)) if EXPLORE else 20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=programs())
def test_edited_hopper_program(tmp_path, case):
    what, data = case
    verdict = judge(data, tmp_path)
    event(verdict)
    event(f"{what.split(' ')[0]}: {verdict}")

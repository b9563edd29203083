"""A Hopper ``program.json`` is untrusted input: nothing derivable is believed, every number is bounded.

``synth verify`` on an edited Hopper program must refuse it (exit 2, located) or refute it (exit 1),
never prove it, unless the edit does not change what the program does (then the explicit-state
oracle agrees at every trip count tried). Special files and huge numbers answer at once, never a
hang or a crash (exit 3). One reproducer per class; the walk over every field is below.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import time

import pytest

from conftest import AT_ONCE_S
from synth.errors import SynthError
from synth.hopper.ir import dumps, load_hopper
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_hopper
from synth.verify.oracle_phases import check as oracle
from synth.verify.phases import verify_hopper

EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"


def _doc(stages: int = 3, loads=(("load_A", "A", 16384), ("load_B", "B", 8192))) -> dict:
    return json.loads(dumps(lower_hopper(HopperLoop("g", tuple(Load(*x) for x in loads), "mma", stages, 1))))


def _stmts(doc: dict, role: int) -> list:
    return doc["roles"][role]["parts"][0]["stmts"]


def _cli(capsys, *args) -> tuple[int, str]:
    from synth.cli import main

    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _verdict(doc: dict, tmp: pathlib.Path, time_limit: float = 20) -> str:
    """``refused`` (SynthError), ``refuted`` / ``unknown`` (not proven), or ``proven``."""
    f = tmp / "program.json"
    f.write_text(json.dumps(doc))
    try:
        p = load_hopper(str(f))
    except SynthError:
        return "refused"
    r = verify_hopper(p, time_limit=time_limit, tightness=False)
    return "proven" if r.ok else ("refuted" if r.refuted_classes() else "unknown")


# -- fields believed until now: each is refused (or refuted), never proven ----------------------------------

def _read_slot(d):
    _stmts(d, 1)[1]["reads"][0]["slot"] = "0"


def _write_slot(d):
    _stmts(d, 0)[2]["writes"][0]["slot"] = "0"


def _write_other_buffer(d):
    _stmts(d, 0)[2]["writes"][0]["buffer"] = "B"


def _read_version_minus_one(d):
    _stmts(d, 1)[1]["reads"][0].update(version="-1", slot="2")


def _iteration_never_arrives(d):
    _stmts(d, 1)[1]["iteration"] = "i + 1"


def _load_iteration_ahead(d):
    _stmts(d, 0)[2]["iteration"] = "i + 5"


@pytest.mark.parametrize("edit", [_read_slot, _write_slot, _write_other_buffer, _read_version_minus_one,
                                  _iteration_never_arrives, _load_iteration_ahead], ids=lambda f: f.__name__)
def test_a_believed_field_is_refused(edit, tmp_path, capsys) -> None:
    doc = _doc()
    edit(doc)
    f = tmp_path / "program.json"
    f.write_text(json.dumps(doc))
    code, err = _cli(capsys, "verify", f)
    assert code == 2 and "Traceback" not in err and str(f) in err and "fix:" in err, err


# -- numbers: bounded when read, never a hang or a solver crash ------------------------------------------------

def _set(path, value):
    def edit(d):
        at = d
        for k in path[:-1]:
            at = at[k] if not callable(k) else k(at)
        at[path[-1]] = value
    return edit


def _state(role: int, stmt: int):
    return lambda d: _stmts(d, role)[stmt]["state"]


@pytest.mark.parametrize("edit,needle", [
    (_set(("barriers", 0, "slots"), 10 ** 9), "barriers[0].slots"),
    (_set((_state(0, 0), "stages"), 10 ** 9), "state.stages"),
    (_set((_state(1, 0), "count"), "i + 1000000000"), "above the bound 65536"),
    (_set(("roles", 1, "parts", 0, "extent"), 10 ** 9), "above the bound 65536"),
    (_set((_state(1, 0), "count"), "T - i"), "wellformed:consumer:body"),
    (_set(("loop", "min_trip_count"), 10 ** 9), "loop.min_trip_count"),
    (_set(("roles", 1, "waits", 0, "in_flight"), "i * 100000"), "above the bound 65536"),
], ids=["slots", "stages", "count", "extent", "T-i", "min_trip", "in_flight"])
def test_a_huge_number_is_refused_at_once(edit, needle, tmp_path, capsys) -> None:
    doc = _doc()
    edit(doc)
    f = tmp_path / "program.json"
    f.write_text(json.dumps(doc))
    t0 = time.monotonic()
    code, err = _cli(capsys, "verify", f)
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert time.monotonic() - t0 < AT_ONCE_S


@pytest.mark.parametrize("make", ["fifo", "dev_zero", "deep", "folder"])
def test_a_special_or_deep_program_json_is_refused(make, tmp_path, capsys) -> None:
    """``synth verify OUT`` where OUT/program.json is a FIFO (hung), /dev/zero, nested 100,000 deep, a folder."""
    out = tmp_path / "out"
    out.mkdir()
    f = out / "program.json"
    if make == "fifo":
        os.mkfifo(f)
    elif make == "dev_zero":
        f.symlink_to("/dev/zero")
    elif make == "deep":
        f.write_text('{"protocol": "mbarrier", "x": ' + "[" * 100000 + "]" * 100000 + "}")
    else:
        f.mkdir()
    t0 = time.monotonic()
    code, err = _cli(capsys, "verify", out)
    assert code == 2 and "Traceback" not in err and "program.json" in err, err
    assert time.monotonic() - t0 < AT_ONCE_S


# -- every field of a solved program, edited: refused, refuted, or the oracle agrees it changes nothing --------

def _leaves(x, path=()):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(x, list):
        for k, v in enumerate(x):
            yield from _leaves(v, path + (k,))
    else:
        yield path, x


def _mutations(v) -> list:
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return [v + 1] + ([v - 1, -1] if EXPLORE else [])
    if v is None:
        return [0] + (["i"] if EXPLORE else [])
    if isinstance(v, str):
        return [v + " + 1"] + (["0", "nope"] if EXPLORE else [])
    return []


def _oracle_clean(doc: dict, tmp: pathlib.Path) -> bool:
    f = tmp / "program.json"
    f.write_text(json.dumps(doc))
    p = load_hopper(str(f))
    lo = p.min_trip_count
    trips = [p.trip_count] if isinstance(p.trip_count, int) else list(range(lo, lo + 6))
    return not any(r.classes for r in oracle(p, trips).values())


@pytest.mark.slow
def test_every_field_of_a_solved_program_edited_is_refused_refuted_or_harmless(tmp_path) -> None:
    """Each leaf of a solved warp-specialized program.json (one load, two stages) is edited; ``synth
    verify``'s answer must be refused or refuted, or, where it proves the edited program, the
    explicit-state oracle finds no error in it at six trip counts (a name, a note, a latency, a
    stronger wait, an unused barrier slot: the edit changes nothing the proof is about)."""
    base = _doc(2, (("load_A", "A", 16384),))
    tried, proven, wrong = 0, [], []
    for path, v in _leaves(base):
        for m in _mutations(v):
            doc = copy.deepcopy(base)
            at = doc
            for k in path[:-1]:
                at = at[k]
            at[path[-1]] = m
            tried += 1
            verdict = _verdict(doc, tmp_path, time_limit=5)
            if verdict == "proven":
                proven.append(path)
                if not _oracle_clean(doc, tmp_path):
                    wrong.append((path, v, m))
    assert tried > 60 and not wrong, wrong

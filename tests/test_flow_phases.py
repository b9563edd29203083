"""synth.flow.phases: the one runner of the flows (phases as data) and the flows as its phase lists."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from synth.deadline import NEVER, Deadline, TimeUp
from synth.errors import Loc
from synth.flow.hopper import HOPPER_PHASES, PINGPONG_PHASES, TMA_STORE_PHASES
from synth.flow.phases import Phase, run_phases, timings, verify_text
from synth.flow.pipeline import SM80_PHASES


def test_phases_run_in_order_each_when_it_applies_and_store_their_values():
    said = []
    phases = (Phase("a", lambda s: 1, key="x"),
              Phase("skipped", lambda s: pytest.fail("ran"), when=lambda s: False),
              Phase("derived", lambda s: s.x + 1, key="y", timed=False),
              Phase("b", lambda s: s.y * 10, key="z", verify_txt=lambda r: f"z is {r.z}\n"))
    s = SimpleNamespace()
    out = run_phases(phases, s, deadline=NEVER, progress=lambda *a: said.append(a))
    assert (s.x, s.y, s.z) == (1, 2, 20)
    assert [o.name for o in out] == ["a", "derived", "b"] and out[1].seconds is None
    assert [n for n, _ in timings(out)] == ["a", "b"]
    assert said == [("a", 0, 1), ("a", 1, 1), ("b", 0, 1), ("b", 1, 1)]  # an untimed step says nothing
    assert verify_text(SimpleNamespace(outcomes=out, z=20)) == "z is 20\n"


def test_the_deadline_names_the_phase_and_what_was_done():
    late = Deadline(time.monotonic() - 1, 5.0)
    with pytest.raises(TimeUp) as e:
        run_phases((Phase("graph", lambda s: 0),), SimpleNamespace(), deadline=late, loc=Loc("p.yaml"),
                   name_done=True)
    assert e.value.phase == "graph" and "nothing" in e.value.msg

    class After:  # expires once the first phase has run
        def __init__(self):
            self.calls = 0

        def check(self, name, **kw):
            self.calls += 1
            if self.calls > 2:
                raise TimeUp(name, 1.0, kw.get("loc"), kw.get("done", ""))

    with pytest.raises(TimeUp) as e:
        run_phases((Phase("graph", lambda s: 0), Phase("schedule", lambda s: 0)), SimpleNamespace(),
                   deadline=After(), name_done=True)
    assert e.value.phase == "schedule" and "graph" in e.value.msg


def test_the_flows_are_phase_lists_and_a_variant_brings_its_own_proof_phases():
    assert [p.name for p in SM80_PHASES if p.timed] == ["graph", "schedule", "schedule", "lower", "prove", "emit"]
    names = [p.name for p in HOPPER_PHASES if p.timed]
    assert names == ["design", "schedule", "lower", "prove", "prove (ping-pong)", "prove (TMA store)", "emit"]
    assert all(p in HOPPER_PHASES for p in PINGPONG_PHASES + TMA_STORE_PHASES)
    # verify.txt's paragraphs: the program's proof, then each variant's
    assert [p.name for p in HOPPER_PHASES if p.verify_txt] == ["prove", "prove (ping-pong)", "TMA-store threads"]

"""The importers' common mapping (synth/frontends/loop.py) on small hand-made loops: no compiler needed."""

from __future__ import annotations

import pytest

from synth.errors import SynthError
from synth.expr import Var, parse, to_str
from synth.frontends import Event, Loop, check_loop, to_program


def _loop(body_wait=1, epi_wait=0, slots=2, body_slot="(k + 1) % 2", guard=None, prologue=None, extent=Var("T")):
    w = lambda slot, g=None: Event("write", "copy", "S", slot, True, guard=g, text="copy")  # noqa: E731
    pro = prologue if prologue is not None else (w(0), Event("commit"))
    body = (w(parse(body_slot), guard), Event("commit"), Event("wait", count=body_wait),
            Event("read", "use", "S", parse("k % 2"), text="use"))
    epi = (Event("wait", count=epi_wait),)
    return Loop("double-buffer", "<test>", {"S": slots}, tuple(pro), body, epi, extent, "T", 1)


def test_double_buffer_is_proven_and_tight():
    r = check_loop(_loop())
    assert r.ok and [v.status for v in r.report.verdicts] == ["proven", "proven"]
    assert r.report.verdicts[0].tight  # wait(1) before the read: 2 would let the read see a stale slot
    prog = r.program
    assert prog.op("copy").stage == 0 and prog.op("use").stage == 1


def test_raised_count_is_refuted_with_a_trace():
    r = check_loop(_loop(body_wait=2))
    assert not r.ok and r.report.verdicts[0].status == "refuted"
    cex = r.report.verdicts[0].counterexample
    assert cex.kind == "raw" and cex.part == "body"


def test_fixed_trip_count():
    prog, _ = to_program(_loop(), trip_count=3)
    assert prog.trip_count == 3 and prog.min_trip_count == 3
    with pytest.raises(SynthError, match="below the smallest trip count"):
        to_program(_loop(), trip_count=0)


def test_slot_that_does_not_rotate_is_outside_the_model():
    with pytest.raises(SynthError, match="outside the model"):
        to_program(_loop(body_slot="(2 * k + 1) % 2"))


def test_prologue_must_rotate():
    bad = (Event("write", "copy", "S", 1, True, text="copy"), Event("commit"))
    with pytest.raises(SynthError, match="goes to slot 1, not 0"):
        to_program(_loop(prologue=bad))


def test_predicated_copy_is_outside_the_model():
    with pytest.raises(SynthError, match="runs only when"):
        to_program(_loop(guard=parse("k + 3 < T")))
    prog, _ = to_program(_loop(guard=parse("k < T")))  # always true in the body: dropped
    assert all(s.guard is None for s in prog.part("body").stmts)


def test_read_before_the_write_of_its_step_reads_the_older_version():
    """The read sees the last write to its slot in program order (here the previous step's)."""
    body = (Event("wait", count=0), Event("read", "use", "S", parse("k % 2"), text="use"),
            Event("write", "copy", "S", parse("(k + 1) % 2"), True, text="copy"), Event("commit"))
    lp = Loop("read-first", "<test>", {"S": 2}, (Event("write", "copy", "S", 0, True), Event("commit")), body, (),
              Var("T"), "T", 1)
    r = check_loop(lp)
    assert r.ok
    read = next(s for s in r.program.part("body").stmts if getattr(s, "op", "") == "use")
    assert to_str(read.reads[0].version) == "i"


def _two_async_stages(m1: int) -> Loop:
    """S1 <- X (queue 0), S2 <- S1 (async, queue 1), Y <- S2: the layout TVM emits for async stages [0, 1]."""
    def w1(slot):
        return Event("write", "s1", "S1", slot, True, 0, text="S1 = X")

    def w2(slot, rslot):
        return Event("write", "s2", "S2", slot, True, 1, text="S2 = S1", reads=(("S1", rslot),))

    def rd(slot):
        return Event("read", "y", "S2", slot, text="Y = S2")

    B = Var("T")
    pro = (w1(0), Event("commit", queue=0), w1(1), Event("commit", queue=0), Event("wait", queue=0, count=1),
           w2(0, 0), Event("commit", queue=1))
    body = (w1(parse(f"(k + 2) % {m1}")), Event("commit", queue=0), Event("wait", queue=0, count=1),
            w2(parse("(k + 1) % 2"), parse(f"(k + 1) % {m1}")), Event("commit", queue=1),
            Event("wait", queue=1, count=1), rd(parse("k % 2")))
    epi = (Event("wait", queue=0, count=0), w2(parse("(T + 1) % 2"), parse(f"(T + 1) % {m1}")),
           Event("commit", queue=1), Event("wait", queue=1, count=1), rd(parse("T % 2")),
           Event("wait", queue=1, count=0), rd(parse("(T + 1) % 2")))
    return Loop("two-async-stages", "<test>", {"S1": m1, "S2": 2}, pro, body, epi, B, "T", 1, queues=("q0", "q1"))


def test_async_stage_reading_a_double_buffer_races():
    """RFC 0077's three-stage race: S1 refilled while S2's async copy may still read it (no wait guards it)."""
    bad = check_loop(_two_async_stages(2))
    assert not bad.ok and all(v.status == "proven" for v in bad.report.verdicts)
    assert any(o.kind == "war" and o.status == "refuted" for o in bad.report.global_failures)
    good = check_loop(_two_async_stages(3))
    assert good.ok
    s2 = good.program.op("s2")
    assert s2.is_async and s2.stage == 1 and good.program.op("s1").stage == 0

"""The Hopper program form: PipelineState derivations, program.json round trip, loader errors,
program.txt, and the lowering's shape for every T (including T < stages)."""

import json

import pytest

from synth.completion import PipelineState
from synth.errors import SynthError
from synth.expr import evaluate, parse
from synth.hopper.ir import dumps, hopper_from_json, load_hopper
from synth.hopper.loop import HopperLoop, Load
from synth.hopper.printer import hopper_text
from synth.lower.barriers import lower_hopper
from synth.verify.oracle_phases import threads_of


def test_pipeline_state_derives_index_and_parity():
    prod = PipelineState(parse("i"), 4, 1)
    cons = PipelineState(parse("i"), 4, 0)
    for i in range(12):
        assert evaluate(prod.index(), {"i": i}) == i % 4
        assert evaluate(cons.parity(), {"i": i}) == (i // 4) % 2
        assert evaluate(prod.parity(), {"i": i}) == (i // 4 + 1) % 2


def test_round_trip_and_printer(tmp_path):
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384), Load("load_B", "B", 8192, "k < T - 1")),
                                "mma", 4, 1, 2))
    assert hopper_from_json(json.loads(dumps(p))) == p
    text = hopper_text(p)
    assert "try_wait.parity empty[i % 4], (i / 4 + 1) % 2" in text
    assert "arrive.expect_tx full[i % 4], 16384 + (load_B ? 8192 : 0) B" in text
    assert "mbarrier.init empty[0..3], 2" in text and "if 1 <= i: arrive empty[(i - 1) % 4]" in text
    f = tmp_path / "program.json"
    f.write_text(dumps(p))
    assert load_hopper(str(tmp_path)) == p


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["barriers"][0].update(kind="half"), "barriers.kind"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][0].update(barrier="nope"), "unknown barrier"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][0]["state"].update(stages=0), "stages"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][1]["tx"][0].update(bytes=-16), "tx.bytes"),
    (lambda d: d["roles"][1].update(warpgroups=True), "warpgroups"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][0].update(kind="sleep"), "unknown statement kind"),
])
def test_loader_errors_name_the_field(tmp_path, mutate, needle):
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 16384),), "mma", 2, 1))
    doc = json.loads(dumps(p))
    mutate(doc)
    f = tmp_path / "program.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(SynthError) as e:
        load_hopper(str(f))
    assert needle in str(e.value)


@pytest.mark.parametrize("T", [1, 2, 3, 4, 7])
def test_lowering_runs_every_iteration_once(T):
    """Each iteration is loaded once, multiplied once and released once by each consumer, T < S too."""
    p = lower_hopper(HopperLoop("g", (Load("load_A", "A", 4096),), "mma", 4, 2, 2))
    threads = dict(threads_of(p, T))
    prod = threads["producer"]
    assert [x.kind for x in prod].count("tma") == T
    for name in ("consumer[0]", "consumer[1]"):
        seq = threads[name]
        assert [x.kind for x in seq].count("wgmma") == T
        releases = [x for x in seq if x.kind == "arrive"]
        assert sorted(v for r in releases for (_, v) in r.release[:1]) == list(range(T))

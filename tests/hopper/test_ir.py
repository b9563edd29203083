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
    (lambda d: d["barriers"][0].update(kind="half"), "barriers[0].kind"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][0].update(barrier="nope"), "unknown barrier"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][0]["state"].update(stages=0), "stages"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][1]["tx"][0].update(bytes=-16), "tx[0].bytes"),
    (lambda d: d["roles"][1].update(warpgroups=True), "warpgroups"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"][0].update(kind="sleep"), "unknown statement kind"),
    # an inval (or init) inside a role is outside what the prover models: refused, not ignored
    (lambda d: d["roles"][1]["parts"][0]["stmts"].insert(0, {"kind": "inval", "barrier": "full", "guard": None}),
     "mbarrier.inval inside a role"),
    (lambda d: d["roles"][0]["parts"][-1]["stmts"].append({"kind": "init", "barrier": "empty", "guard": None}),
     "unknown statement kind \"init\""),
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


def test_tampered_programs_never_traceback(tmp_path):
    """Random edits of a program.json: either a SynthError naming the file, or a verdict."""
    import copy
    import random

    from synth.lower.barriers import lower_hopper_single
    from synth.verify.phases import verify_hopper
    base = json.loads(dumps(lower_hopper_single(HopperLoop("g", (Load("load_A", "A", 4096),), "mma", 2, 1))))
    vals = [None, True, 0, -1, 2 ** 40, "x", "i / 0", "i % 0", "T", "i + j", [], {}, 1.5, "(", "i < 2", "i"]

    def paths(d, pre=()):
        items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
        for k, v in items:
            yield pre + (k,)
            yield from paths(v, pre + (k,))
    ps = list(paths(base))
    rnd = random.Random(7)
    f = tmp_path / "program.json"
    for _ in range(40):
        d = copy.deepcopy(base)
        path = rnd.choice(ps)
        cur = d
        for k in path[:-1]:
            cur = cur[k]
        if isinstance(cur, dict) and rnd.random() < 0.3:
            del cur[path[-1]]
        else:
            cur[path[-1]] = rnd.choice(vals)
        f.write_text(json.dumps(d))
        try:
            q = load_hopper(str(f))
        except SynthError as e:
            assert "program.json" in str(e.loc.file)
            continue
        verify_hopper(q, time_limit=3, tightness=False)

"""The Hopper prover's shared work is sound: one :class:`Phases` per program, obligations over
a program's barrier view (its wgmma waits left out) shared by every program with the same view, and a negation
answered ``unsat`` once reused only for the very same Z3 term. A program that differs from a proven one only in its
waits still has its wait obligations encoded and asked (and refuted when wrong); verdicts, counterexamples and the
tile-end checks are those of a fresh process; ``synth solve`` names every proof phase with its obligations."""

from __future__ import annotations

import dataclasses

import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.expr import Num
from synth.lower.hopper_persistent import tile_end_program
from synth.verify.hopper_persistent import prove_tile_ends, tile_end_sizes
from synth.verify import phases
from synth.verify.encode import NeedsWaits
from synth.verify.phases import barrier_view, enumerate_hopper, verify_hopper
from synth.lower.hopper_design import design_program

CFG = KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1, persistent=True)


def _with_wait(p, role: str, idx: int, count: int):
    """``p`` with wait ``idx`` of ``role`` counting ``count`` groups."""
    prog = p.role(role).program
    waits = list(prog.waits)
    waits[idx] = dataclasses.replace(waits[idx], in_flight=Num(count))
    return p.with_role(role, dataclasses.replace(prog, waits=tuple(waits)))


def test_tile_end_programs_have_the_rings_view_and_wait_classes_need_the_waits():
    p = design_program(CFG)
    assert barrier_view(tile_end_program(p, 3)) == barrier_view(p)
    ph = phases.Phases(barrier_view(p), no_waits=True)
    kinds = {}
    for ob in enumerate_hopper(p):
        try:
            ob.build(ph)
            kinds.setdefault(ob.kind, set()).add("view")
        except NeedsWaits:
            kinds.setdefault(ob.kind, set()).add("waits")
    # what a wgmma wait decides is always encoded over the whole program
    assert kinds["wgmma_wait"] == kinds["wgmma_drain"] == kinds["release_after_wgmma"] == {"waits"}
    assert kinds["arrivals"] == kinds["parity"] == kinds["tx_bytes"] == kinds["no_deadlock"] == {"view"}


def test_a_wait_changed_after_the_proof_is_still_refuted_in_the_same_process():
    """The consumer's release waits for one more group than the ring allows: the barrier view is the proven
    ring's (its obligations shared), but the release obligations are asked again and refuted."""
    p = design_program(CFG)
    assert verify_hopper(p, tightness=False).ok
    before = dict(phases.STATS)
    bad = _with_wait(p, "consumer", 0, 2)  # wait_group(2) with 4 stages and a release one behind: too many
    assert barrier_view(bad) == barrier_view(p)
    r = verify_hopper(bad, tightness=False)
    assert not r.ok and r.refuted_classes() == {"release_after_wgmma"}
    assert phases.STATS["shared"] > before["shared"] and phases.STATS["queries"] > before["queries"]
    cex = next(o.counterexample for o in r.obligations if o.status == "refuted")
    assert cex is not None and cex.trip_count >= 1


def test_verdicts_and_counterexamples_match_a_cold_prover():
    """Proving the good ring first (every cache filled) changes nothing of a mutant's report: the same statuses
    and the same smallest trip count in each counterexample as with every cache emptied."""
    p = design_program(CFG)
    bad = _with_wait(p, "consumer", 0, 3)

    def report():
        r = verify_hopper(bad, tightness=False)
        return [(o.id, o.status, o.counterexample.trip_count if o.counterexample else None) for o in r.obligations]

    verify_hopper(p)
    warm = report()
    phases._PROVEN.clear()
    phases._VIEWS.clear()
    cold = report()
    assert warm == cold and any(s == "refuted" for _, s, _ in cold)


def test_tile_end_with_a_negative_wait_is_refuted_after_the_ring_is_proven():
    p = design_program(CFG)
    assert verify_hopper(p, tightness=False).ok
    q = tile_end_program(p, 2)
    q = _with_wait(q, "consumer", len(q.role("consumer").program.waits) - 1, -1)
    r = verify_hopper(q, tightness=False)
    assert not r.ok and "wgmma_wait" in r.refuted_classes()


def test_tile_ends_count_every_program_and_share_the_rings_queries():
    p = design_program(CFG)
    assert verify_hopper(p, tightness=False).ok
    r = prove_tile_ends(p, tile_end_sizes(CFG.stages))
    assert r.ok and r.kts == (1, 2, 3, 4, 5)
    assert r.obligations == r.proven == sum(len(enumerate_hopper(tile_end_program(p, kt))) for kt in r.kts)
    assert r.queries < r.obligations / 4  # only what reads the added wait_group 0 is asked
    ph = r.phase()
    assert ph.name == "tile ends at 1 .. 5 k-tiles per tile (5 programs)" and ph.obligations == r.obligations


@pytest.mark.parametrize("keys, phases_named", [
    ({"persistent": "true", "cluster": "2x1"}, ["ring program", "tile ends at 1 .. 5 k-tiles per tile"]),
    ({"pingpong": "true"}, ["ring program", "tile ends", "ping-pong order programs (even, odd)", "ping-pong carry"]),
    ({"epilogue": "tma_store"}, ["program", "TMA-store program", "TMA-store threads"]),
])
def test_solve_names_every_proof_phase(keys, phases_named):
    """The report's summary (printed by synth solve and written to verify.txt) names each proof phase with its
    obligations and seconds, and the total: no proof time is left unnamed."""
    from synth.deadline import Deadline
    from synth.flow.hopper import run_hopper
    from synth.load import load_problem_text

    text = "\n".join(["name: sharing", "kind: gemm", "shape: {M: 1024, N: 1024, K: 1024}", "dtype: f16",
                      "tile: {BM: 128, BN: 128, BK: 64}", "arch: sm_90", "mainloop: tma_wgmma", "stages: 4",
                      "k_pipe_mmas: 1"] + [f"{k}: {v}" for k, v in keys.items()]) + "\n"
    res = run_hopper(load_problem_text(text), deadline=Deadline.after(600), emit=False)
    rep = res.report
    names = [p.name for p in rep.proofs]
    for want in phases_named:
        assert any(n.startswith(want) for n in names), names
    assert all(p.proven == p.obligations for p in rep.proofs)
    line = rep.render().splitlines()[1]
    total = sum(p.obligations for p in rep.proofs)
    assert line.startswith("proofs: ") and f"total {total}/{total} obligations" in line
    assert rep.to_json()["proofs"][0]["obligations"] == len(rep.obligations)

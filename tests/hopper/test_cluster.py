"""A 2-CTA cluster (2x1: the two CTAs share the B tile) lowered to one Hopper program whose roles and
barriers name their CTA: proven for every T >= 1 by synth's prover and by the independent checker
(barrier classes over both CTAs, plus the cluster classes init_visible / safe_exit / cluster_form);
each known cluster bug, as a mutant of the lowered program, refuted by both with a counterexample
naming the CTA's role and barrier (docs/hopper_cluster.md)."""

import json
import re
from dataclasses import replace

import pytest

from synth.completion import ClusterSyncStmt, TryWaitStmt
from synth.verify.hopper_cluster import CLUSTER_BUGS, cluster_obligations, cta_of, verify_cluster
from synth.hopper.ir import HopperError, dumps, load_hopper, validate_hopper
from synth.hopper.loop import HopperLoop, Load
from synth.hopper.printer import hopper_text
from synth.lower.cluster import lower_hopper_cluster
from synth.trusted import solvers
from synth.trusted.cluster import check_cluster_bytes, derive_cluster
from synth.trusted.hopper import check_hopper_program, derive_hopper
from synth.trusted.hopper_program import HopperInputError, read_hopper_bytes
from synth.verify.oracle_phases import run

LOADS = (Load("load_A", "A", 16384), Load("load_B", "B", 8192))
# a role and a barrier of one of the two CTAs, in either order
CTA_NAME = re.compile(r"\b(producer|consumer)[01]\b.*\b(full|empty)[01]\b|"
                      r"\b(full|empty)[01]\b.*\b(producer|consumer)[01]\b")


def cluster(stages=2, k=1, consumers=1, loads=LOADS):
    return lower_hopper_cluster(HopperLoop("gemm", loads, "mma", stages, k, consumers))


@pytest.fixture(scope="module")
def lowered():
    return cluster()


def trusted_failures(p):
    """``(obligation id, class, description)`` of every independent-checker obligation Z3 does not prove,
    and every failing cluster check (reason in place of the description)."""
    tp = read_hopper_bytes(dumps(p).encode())
    bad = [(o.id, o.kind, o.description) for o in derive_hopper(tp) if solvers.z3_answer(o.smt2, 20) != "unsat"]
    return bad + [(c.id, c.kind, c.reason) for c in derive_cluster(tp) if not c.ok]


def test_lowered_cluster_program_form(lowered):
    p = lowered
    assert [r.name for r in p.roles] == ["producer0", "producer1", "consumer0", "consumer1"]
    assert {b.name: b.count for b in p.barriers} == {"full0": 1, "full1": 1, "empty0": 2, "empty1": 2}
    assert sorted(b.name for b in p.buffers) == ["A0", "A1", "B0", "B1"]
    for c in (0, 1):
        prod = p.role(f"producer{c}").program.parts[0].stmts
        expect = next(s for s in prod if getattr(s, "tx", ()))
        assert expect.barrier == f"full{c}" and sum(t.bytes for t in expect.tx) == 16384 + 8192  # the whole tile
        copies = [s for s in prod if getattr(s, "barrier", None) is not None and hasattr(s, "op")]
        # its own A, and its half of B into both CTAs, each on the destination's full barrier
        assert sorted((s.barrier.barrier, s.barrier.bytes, s.writes[0].buffer) for s in copies) == \
            sorted([(f"full{c}", 16384, f"A{c}"), ("full0", 4096, "B0"), ("full1", 4096, "B1")])
        cons = p.role(f"consumer{c}")
        releases = [s.barrier for pt in cons.program.parts for s in pt.stmts if getattr(s, "kind", "") == "arrive"]
        assert releases == [f"empty{c}", f"empty{1 - c}"] * 2  # body and epilogue: own, then the peer's
        assert cons.threads == 128 and cons.collective == (f"mma{c}",)
    assert [s.kind for s in p.setup][-2:] == ["fence", "cluster_sync"]
    assert p.teardown[0].kind == "cluster_sync" and [s.kind for s in p.teardown[1:]] == ["inval"] * 4
    assert all(cta_of(x) in (0, 1) for x in [r.name for r in p.roles] + [b.name for b in p.barriers])
    text = hopper_text(p)
    assert "barrier.cluster.arrive.release; barrier.cluster.wait.acquire" in text
    with pytest.raises(ValueError, match="cluster size 3"):
        lower_hopper_cluster(HopperLoop("gemm", LOADS, "mma", 2, 1, 1), cluster=3)
    with pytest.raises(ValueError, match="predicated loads"):
        lower_hopper_cluster(HopperLoop("gemm", (LOADS[0], Load("load_B", "B", 8192, "k < T - 1")), "mma", 2, 1, 1))
    with pytest.raises(ValueError, match="16-byte"):
        lower_hopper_cluster(HopperLoop("gemm", (LOADS[0], Load("load_B", "B", 48)), "mma", 2, 1, 1))


def test_lowered_cluster_proven_by_synth_and_the_independent_checker(lowered):
    r = verify_cluster(lowered, time_limit=20, tightness=True)
    assert r.ok, r.render()
    assert {o.kind for o in r.cluster} == {"cluster_form", "init_visible", "safe_exit"}
    assert all(v.tight for v in r.hopper.waits), r.hopper.render()
    res = check_hopper_program(dumps(lowered).encode(), timeout_s=30, tightness=False)
    assert res.ok, res.messages
    ok, checks, msgs = check_cluster_bytes(dumps(lowered).encode())
    assert ok and {c.kind for c in checks} == {"cluster_form", "init_visible", "safe_exit"}, msgs
    # the oracle (real mbarrier semantics, every interleaving of the four roles) agrees at T = 1, 2
    for T in (1, 2):
        assert not run(lowered, T, threads=1).violations


def test_cluster_program_json_round_trip_and_cluster_sync_only_in_setup_teardown(tmp_path, lowered):
    f = tmp_path / "program.json"
    f.write_text(dumps(lowered))
    back = load_hopper(str(f))  # the trusted reader and its wellformed / coverage obligations first
    assert back.setup == lowered.setup and back.teardown == lowered.teardown
    assert dumps(back) == dumps(lowered)
    doc = json.loads(dumps(lowered))
    doc["roles"][2]["parts"][0]["stmts"].insert(0, {"kind": "cluster_sync", "guard": None})
    with pytest.raises(HopperInputError, match="unknown statement kind"):
        read_hopper_bytes(json.dumps(doc).encode())
    prog = lowered.role("consumer0").program
    inner = lowered.with_role("consumer0", replace(prog, parts=(replace(prog.parts[0], stmts=(ClusterSyncStmt(),) +
                                                                        prog.parts[0].stmts),) + prog.parts[1:]))
    with pytest.raises(HopperError, match="cluster barrier inside a role"):
        validate_hopper(inner)
    doc = json.loads(dumps(lowered))
    doc["setup"][-1]["extra"] = 1
    with pytest.raises(HopperInputError, match="unknown key"):
        read_hopper_bytes(json.dumps(doc).encode())


def test_check_cluster_bytes_refuses_bad_input_without_a_traceback(lowered):
    for data in (b"{", b"[]", b"\xff", json.dumps({"protocol": "mbarrier"}).encode()):
        ok, checks, msgs = check_cluster_bytes(data)
        assert not ok and not checks and msgs[0].startswith("cluster check FAILED: program.json refused")
    doc = json.loads(dumps(lowered))
    doc["setup"].append({"kind": "cluster_sync", "guard": "1 <= T"})
    ok, _, msgs = check_cluster_bytes(json.dumps(doc).encode())
    assert not ok and "setup[6].guard: a guarded setup statement" in msgs[0]


BARRIER_BUGS = {
    # name: (synth's class, what its counterexample says, trusted class)
    "local_empty_count": ("arrivals", r"empty[01]\[0\] phase 0, 2 of 1 arrivals", "arrivals"),
    "own_part_expect_tx": ("tx_bytes", r"consumer0 .*full0\[0\] phase 0, 20480 bytes expected, 24576 delivered",
                           "tx_bytes"),
    "mask_missing_peer": ("tx_bytes", r"consumer0 .*full0\[0\] phase 0, 24576 bytes expected, 20480 delivered",
                          "tx_bytes"),
    "trip_mismatch": ("tx_bytes", r"consumer1 .*full1\[1\] phase 0, 24576 bytes expected, 20480 delivered",
                      "tx_bytes"),
}


@pytest.mark.parametrize("name", sorted(BARRIER_BUGS))
def test_cluster_barrier_bug_refuted_by_both(lowered, name):
    fn, what, classes = CLUSTER_BUGS[name]
    cls, says, tcls = BARRIER_BUGS[name]
    bad = fn(lowered)
    r = verify_cluster(bad, time_limit=20, tightness=False)
    assert not r.ok and cls in r.refuted_classes() and r.refuted_classes() & classes
    cex = [o.counterexample for o in r.hopper.obligations if o.status == "refuted" and o.kind == cls
           and o.counterexample is not None]
    assert any(re.search(says, c.summary) and c.trip_count == 1 for c in cex), [c.summary for c in cex]
    assert all(CTA_NAME.search(c.summary) for c in cex)  # the role and the barrier name their CTA
    fails = trusted_failures(bad)
    assert any(k == tcls and CTA_NAME.search(i + " " + d) for i, k, d in fails), fails
    assert {k for _, k, _ in fails} & classes
    # the oracle, which runs the real semantics, sees it at T = 1 (the corrected form: no violation)
    assert run(bad, 1, threads=1).classes & {"arrivals", "tx_bytes", "no_deadlock", "coverage"}
    assert not run(lowered, 1, threads=1).violations


def test_peers_with_different_trip_counts_also_leave_a_copy_unobserved(lowered):
    """The DeepGEMM #429 shape: CTA 1 runs T + 1 k-tiles; its last multicast into CTA 0 is never waited for."""
    r = verify_cluster(CLUSTER_BUGS["trip_mismatch"][0](lowered), time_limit=20, tightness=False)
    td = [o for o in r.hopper.obligations if o.kind == "teardown" and o.status == "refuted"]
    assert any("producer1" in o.description and "full0" in o.description for o in td), r.render()


SYNC_BUGS = {
    "cta_scope_init_fence": ("init_visible", "fence.mbarrier_init.release.cluster"),
    "no_cluster_sync_after_init": ("init_visible", "no cluster barrier"),
    "no_cluster_sync_before_exit": ("safe_exit", "consumer1 (CTA 1) arrives remotely on empty0 of CTA 0 (epilogue"),
}


@pytest.mark.parametrize("name", sorted(SYNC_BUGS))
def test_cluster_sync_bug_refuted_by_both(lowered, name):
    fn, what, classes = CLUSTER_BUGS[name]
    cls, says = SYNC_BUGS[name]
    bad = fn(lowered)
    assert bad.roles == lowered.roles and bad.barriers == lowered.barriers  # the barrier protocol is the proven one
    obs = cluster_obligations(bad)
    refuted = [o for o in obs if o.status == "refuted"]
    assert refuted and {o.kind for o in refuted} == {cls}
    assert any(says in o.reason and re.search(r"CTA [01]", o.reason) for o in refuted), [o.reason for o in refuted]
    # one obligation per barrier (init) or CTA (exit) touched by the other CTA: all four barriers, both CTAs
    assert len(refuted) == (4 if cls == "init_visible" else 2)
    ok, checks, msgs = check_cluster_bytes(dumps(bad).encode())
    assert not ok
    tbad = [c for c in checks if not c.ok]
    assert {c.id for c in tbad} == {o.id for o in refuted}, msgs  # the same verdicts, decided independently
    assert all(re.search(r"(producer|consumer)[01] \(CTA [01]\)", c.reason) for c in tbad)
    assert all(o.status == "proven" for o in cluster_obligations(lowered))


def test_cta_scope_fence_is_also_the_fence_class():
    bad = CLUSTER_BUGS["cta_scope_init_fence"][0](cluster())
    tp = read_hopper_bytes(dumps(bad).encode())
    assert {o.kind for o in derive_hopper(tp, kinds=("fence",)) if solvers.z3_answer(o.smt2, 10) == "sat"} == {"fence"}


def test_an_inval_before_the_exit_barrier_is_refuted(lowered):
    early = replace(lowered, teardown=lowered.teardown[1:2] + lowered.teardown[:1] + lowered.teardown[2:])
    bad = [o for o in cluster_obligations(early) if o.status == "refuted"]
    assert [o.id for o in bad] == ["safe_exit:cta0"] and "invalidates full0" in bad[0].reason
    ok, checks, _ = check_cluster_bytes(dumps(early).encode())
    assert not ok and [c.id for c in checks if not c.ok] == ["safe_exit:cta0"]


def test_cluster_form_refutes_a_wait_on_the_peers_barrier_and_an_unnamed_cta(lowered):
    prog = lowered.role("consumer0").program
    body = prog.parts[0]
    st = tuple(replace(s, barrier="full1") if isinstance(s, TryWaitStmt) else s for s in body.stmts)
    bad = lowered.with_role("consumer0", replace(prog, parts=(replace(body, stmts=st),) + prog.parts[1:]))
    mine = [o.id for o in cluster_obligations(bad) if o.status == "refuted"]
    theirs = [c.id for c in derive_cluster(read_hopper_bytes(dumps(bad).encode())) if not c.ok]
    assert mine == theirs == ["cluster_form:consumer0"]
    renamed = replace(lowered, barriers=lowered.barriers + (replace(lowered.barriers[0], name="x"),))
    mine = [o.id for o in cluster_obligations(renamed) if o.status == "refuted"]
    theirs = [c.id for c in derive_cluster(read_hopper_bytes(dumps(renamed).encode())) if not c.ok]
    assert mine == theirs == ["cluster_form:names"]


@pytest.mark.slow
@pytest.mark.parametrize("stages,k,consumers,shared", [(3, 1, 2, "B"), (4, 2, 1, "B"), (2, 0, 1, "B"), (1, 0, 1, "B"),
                                                       (3, 1, 1, "A")])
def test_other_cluster_pipelines_proven_by_both(stages, k, consumers, shared):
    """Other stages, K_PIPE_MMAS and consumer warp groups; shared A is the 1x2 cluster."""
    p = lower_hopper_cluster(HopperLoop("gemm", LOADS, "mma", stages, k, consumers), shared=shared)
    r = verify_cluster(p, time_limit=30, tightness=False)
    assert r.ok, r.render()
    assert not trusted_failures(p)
    for name, (fn, _, classes) in CLUSTER_BUGS.items():
        if name in BARRIER_BUGS:
            assert trusted_failures(fn(p)), name


@pytest.mark.slow
def test_cluster_mutation_sweep_synth_and_the_independent_checker_agree(lowered):
    """Single-field and single-statement mutants of the cluster program (a deterministic sample; all 207
    with SYNTH_HYPOTHESIS=explore, about 12 minutes): synth proves exactly the mutants the independent
    checker proves, and the oracle finds no violation in a proven one at T = 1..3 (the peer-copy hop
    proves nothing false)."""
    import os

    from synth.hopper.mutants import field_mutants
    ms = field_mutants(lowered)
    if os.environ.get("SYNTH_HYPOTHESIS") != "explore":
        ms = ms[::90] + [m for m in ms if m[0] in ("consumer0 body[5] arrive moved earlier",
                                                    "producer1 body[4] op moved earlier")]
    for name, q in ms:
        mine = verify_cluster(q, time_limit=10, tightness=False).ok
        try:
            theirs = not trusted_failures(q)
        except HopperInputError:
            continue  # the trusted reader refuses it (an op no statement names any more): nothing to compare
        assert mine == theirs, name
        if mine:
            for T in (1, 2, 3):
                assert not run(q, T, threads=1, max_states=60000).violations, (name, T)

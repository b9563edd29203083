"""Threads, not warp groups, wait: the ``converge`` proof class (docs/hopper.md, "Threads").

Every thread of a consumer warp group runs its ``try_wait`` on ``full``; one elected thread releases
the slot on ``empty`` for all of them. That is sound only when a convergence point (the collective
wgmma, or a ``bar.sync`` over the warp group) lies between every thread's wait and the elected
release. Without one (the wgmma replaced by plain shared-memory reads), a thread still waiting for
phase k sees phase k + 2 with the same parity: it hangs, first at T = stages + 1. synth's prover, the
independent checker and the per-thread oracle must all say so, and all accept the fixed form.
"""

import json
from dataclasses import replace

import pytest

from synth.completion import ArriveStmt, BarSyncStmt
from synth.errors import SynthError
from synth.expr import parse
from synth.hopper.ir import dumps, hopper_from_json, load_hopper
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_hopper, lower_hopper_single
from synth.program import CommitStmt, OpStmt, WaitStmt
from synth.trusted.hopper import check_hopper_program
from synth.trusted.hopper_program import HopperInputError, read_hopper_bytes
from synth.verify.oracle_phases import run, threads_of
from synth.verify.phases import verify_hopper

LOADS = (Load("load_A", "A", 16384), Load("load_B", "B", 8192))


def gemm(stages=2, k=0, consumers=1):
    return lower_hopper(HopperLoop("gemm", LOADS, "mma", stages, k, consumers))


def plain_reads(p, bar_sync=False):
    """The consumer's wgmma replaced by a synchronous shared-memory read of the same slots (no group,
    no commit_group / wait_group, no collective); ``bar_sync``: a named barrier over the warp group
    after the read, before the elected release (the fixed form). From a ``K_PIPE_MMAS = 0`` program."""
    ops = tuple(replace(o, unit="lds", is_async=False, queue=None) if o.name == "mma" else o for o in p.ops)
    roles = []
    for r in p.roles:
        prog = replace(r.program, ops=ops)
        if r.name == "consumer":
            body = prog.part("body")
            st = []
            for s in body.stmts:
                if isinstance(s, (CommitStmt, WaitStmt)):
                    continue
                st.append(replace(s, group=None) if isinstance(s, OpStmt) else s)
                if bar_sync and isinstance(s, OpStmt):
                    st.append(BarSyncStmt(1))
            prog = replace(prog, queues=(), parts=(replace(body, stmts=tuple(st)),), waits=())
            r = replace(r, collective=())
        roles.append(replace(r, program=prog))
    return replace(p, ops=ops, roles=tuple(roles))


def no_collective(p):
    """The lowered program with the wgmma no longer declared a convergence point."""
    return replace(p, roles=tuple(replace(r, collective=()) for r in p.roles))


def converge_refutations(report):
    return [o for o in report.obligations if o.kind == "converge" and o.status == "refuted"]


# ---------------------------------------------------------------------------------------------
# the program form
# ---------------------------------------------------------------------------------------------

def test_lowering_says_who_runs_what():
    """The producer is one elected thread; each consumer warp group runs on its 128 threads, releases
    with one elected thread, and its wgmma is the warp-group collective. program.json says so."""
    p = gemm(3, 1, 2)
    prod, cons = p.role("producer"), p.role("consumer")
    assert (prod.threads, prod.collective) == (1, ())
    assert (cons.threads, cons.collective) == (128, ("mma",))
    arrives = [s for pt in cons.program.parts for s in pt.stmts if isinstance(s, ArriveStmt)]
    assert arrives and all(s.elected for s in arrives)
    doc = json.loads(dumps(p))
    role = doc["roles"][1]
    assert role["threads"] == 128 and role["collective"] == ["mma"]
    assert all(s["elected"] is True for pt in role["parts"] for s in pt["stmts"] if s["kind"] == "arrive")
    assert hopper_from_json(doc) == p
    single = lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1, 1))
    assert (single.role("mainloop").threads, single.role("mainloop").collective) == (128, ("mma",))


def test_bar_sync_round_trips(tmp_path):
    p = plain_reads(gemm(2), bar_sync=True)
    f = tmp_path / "program.json"
    f.write_text(dumps(p))
    assert load_hopper(str(f)) == p
    assert '"kind": "bar_sync"' in f.read_text()


def _doc(p=None):
    return json.loads(dumps(p or gemm(2, 1)))


@pytest.mark.parametrize("edit, where, words", [
    (lambda d: d["roles"][1].pop("threads"), "roles[1]", "missing key(s) threads"),
    (lambda d: d["roles"][1].pop("collective"), "roles[1]", "missing key(s) collective"),
    (lambda d: d["roles"][1].update(threads=129), "roles[1].threads", "outside 1 .. 128"),
    (lambda d: d["roles"][1].update(collective=["load_A"]), "roles[1].collective[0]", "is not a wgmma op"),
    (lambda d: d["roles"][0].update(collective=["mma"]), "roles[0].collective", "a collective in a role of one "
     "thread"),
    (lambda d: d["roles"][1]["parts"][0]["stmts"][4].update(elected=False), "roles[1].parts[0].stmts[4].elected",
     "each of the 128 threads"),
    (lambda d: d["roles"][1]["parts"][0]["stmts"][4].pop("elected"), "roles[1].parts[0].stmts[4]",
     "missing key(s) elected"),
    (lambda d: d["roles"][0]["parts"][0]["stmts"].insert(0, {"kind": "bar_sync", "id": 1, "guard": None}),
     "roles[0].parts[0].stmts[0]", "converges nothing"),
    (lambda d: d["roles"][1]["parts"][0]["stmts"].insert(0, {"kind": "bar_sync", "id": 16, "guard": None}),
     "roles[1].parts[0].stmts[0].id", "outside 1 .. 15"),
])
def test_reader_refuses_thread_fields(tmp_path, edit, where, words):
    """Both readers refuse a program whose thread fields are missing or mean something synth does not
    model, naming the JSON path and a fix; load_hopper turns it into an error of exit status 2."""
    d = _doc()
    edit(d)
    data = json.dumps(d).encode()
    with pytest.raises(HopperInputError) as e:
        read_hopper_bytes(data)
    assert e.value.path == where and words in e.value.msg and e.value.fix
    f = tmp_path / "program.json"
    f.write_bytes(data)
    with pytest.raises(SynthError) as e2:
        load_hopper(str(f))
    assert "program.json" in str(e2.value) and words in str(e2.value)


# ---------------------------------------------------------------------------------------------
# the proof, the independent checker and the oracle
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stages, consumers", [(2, 1), (3, 1), (2, 2)])
def test_plain_reads_refuted_at_stages_plus_one(stages, consumers):
    """The wgmma replaced by plain reads: only ``converge`` fails, and its counterexample names the
    role, the elected release (barrier, slot, phase), the lagging thread's wait (barrier, slot, phase)
    and T = stages + 1, the first trip count where a slot is refilled and the lag shows."""
    bad = plain_reads(gemm(stages, 0, consumers))
    r = verify_hopper(bad, time_limit=20, tightness=False)
    assert not r.ok
    assert r.refuted_classes() == {"converge"}, r.render()
    cex = converge_refutations(r)[0].counterexample
    assert cex.trip_count == stages + 1, cex.summary
    s = cex.summary
    for words in ("consumer", "elected thread 0 arrives on empty[", "thread 1", "try_wait on full[",
                  "for phase 0", f"completes phase 1", "two phases behind", "no convergence point"):
        assert words in s, s


@pytest.mark.parametrize("stages, consumers", [(2, 1), (3, 1), (2, 2)])
def test_bar_sync_fixes_it(stages, consumers):
    good = plain_reads(gemm(stages, 0, consumers), bar_sync=True)
    r = verify_hopper(good, time_limit=20, tightness=False)
    assert r.ok, r.render()
    assert r.by_class()["converge"] == {"proven": 1, "refuted": 0, "unknown": 0}


def test_convergence_removed_from_the_lowering_is_refuted():
    """The lowered program with its wgmma no longer a convergence point (a wgmma without .sync.aligned
    semantics): refuted the same way, at every K_PIPE_MMAS."""
    for k in (0, 1):
        r = verify_hopper(no_collective(gemm(3, k)), time_limit=20, tightness=False)
        assert r.refuted_classes() == {"converge"}, r.render()
        assert converge_refutations(r)[0].counterexample.trip_count == 4


def test_lowered_programs_prove_converge():
    for p in (gemm(2, 0), gemm(3, 1, 2), gemm(4, 2), lower_hopper_single(HopperLoop("g", LOADS, "mma", 3, 1, 1))):
        r = verify_hopper(p, time_limit=20, tightness=False)
        assert r.ok, r.render()
        assert r.by_class()["converge"]["proven"] >= 1


@pytest.mark.parametrize("make, ok", [
    (lambda: plain_reads(gemm(2)), False),
    (lambda: plain_reads(gemm(2), bar_sync=True), True),
    (lambda: no_collective(gemm(3, 1)), False),
    (lambda: gemm(3, 1, 2), True),
])
def test_independent_checker_agrees(make, ok):
    p = make()
    res = check_hopper_program(dumps(p).encode(), timeout_s=30, tightness=False)
    assert res.ok == ok, res.render()
    held, asked = res.by_class()["converge"]
    assert asked >= 1 and (held == asked) == ok
    assert {c.kind for c in res.obligations if not c.ok} <= {"converge"}
    assert verify_hopper(p, time_limit=20, tightness=False).ok == ok


def test_oracle_runs_threads_and_hangs_at_stages_plus_one():
    """Two threads per consumer warp group (the elected one and another): the plain-read mutant hangs
    (the other thread waits at a parity that came round again) first at T = stages + 1, and reads a
    refilled slot; with a bar.sync, and in the lowered program, no violation. The warp group as one
    actor (threads=1) sees nothing wrong: the blind spot this class closes."""
    for stages in (2, 3):
        bad = plain_reads(gemm(stages))
        for T in range(1, stages + 1):
            assert not run(bad, T).violations, (stages, T)
        res = run(bad, stages + 1)
        assert {"no_deadlock", "raw"} <= res.classes, res.violations
        assert "consumer.t1" in res.violations["no_deadlock"]
        assert not run(bad, stages + 1, threads=1).violations
        good = plain_reads(gemm(stages), bar_sync=True)
        for T in range(1, stages + 3):
            assert not run(good, T).violations, (stages, T)
    p = gemm(3, 1, 2)
    names = [n for n, _ in threads_of(p, 2)]
    assert names == ["producer", "consumer[0]", "consumer[0].t1", "consumer[1]", "consumer[1].t1"]
    for T in (1, 4, 5):
        assert not run(p, T).violations
    assert "no_deadlock" in run(no_collective(gemm(3, 1)), 4).classes


def test_counterexample_replays_the_oracle_hang():
    r = verify_hopper(plain_reads(gemm(2)), time_limit=20, tightness=False)
    cex = converge_refutations(r)[0].counterexample
    assert any("no_deadlock" in line and "consumer.t1" in line for line in cex.trace), cex.trace


def test_certificate_holds_converge_and_refuses_a_collective_removed(tmp_path):
    """The certificate carries the converge obligations; a certificate whose program.json drops the
    wgmma's collective (its hash recomputed, so only the re-derivation can tell) fails naming it."""
    import hashlib
    import os
    from synth.verify.certificate_phases import certify_hopper, write_hopper_certificate
    p = gemm(2, 1)
    d = tmp_path / "cert"
    write_hopper_certificate(verify_hopper(p, time_limit=20), str(d))
    man = json.loads((d / "manifest.json").read_text())
    ids = [o["id"] for o in man["obligations"] if o["kind"] == "converge"]
    assert ids == ["converge:consumer:body:4<-body:0", "converge:consumer:epilogue:1<-body:0"]
    assert certify_hopper(str(d)).ok
    text = (d / "program.json").read_text().replace('"collective": [\n        "mma"\n      ]', '"collective": []')
    assert '"collective": []' in text
    (d / "program.json").write_text(text)
    man["program_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    res = certify_hopper(str(d))
    assert not res.ok
    assert any("converge:consumer:body:4<-body:0" in m for m in res.messages), res.render()
    assert os.path.exists(d / "program.json")


def _moved_bar_sync(p, where):
    """The fixed form's bar_sync moved: ``before_wait`` (ahead of the try_wait: it converges nothing the
    release needs), ``after_release`` (too late), or guarded off at ``i == 2``."""
    prog = p.role("consumer").program
    body = prog.part("body")
    st = [s for s in body.stmts if not isinstance(s, BarSyncStmt)]
    if where == "before_wait":
        st.insert(0, BarSyncStmt(1))
    elif where == "after_release":
        st.append(BarSyncStmt(1))
    else:
        st.insert(2, BarSyncStmt(1, parse("i != 2")))
    return p.with_role("consumer", replace(prog, parts=(replace(body, stmts=tuple(st)),)))


@pytest.mark.parametrize("where, first_t", [("before_wait", 3), ("after_release", 3), ("guarded", 5)])
def test_a_misplaced_bar_sync_is_refuted_where_the_oracle_hangs(where, first_t):
    """A bar.sync on the wrong side of the wait or of the release, or skipped at one iteration: refuted
    by both checkers, at the first T where the oracle's lagging thread hangs (none below)."""
    bad = _moved_bar_sync(plain_reads(gemm(2), bar_sync=True), where)
    r = verify_hopper(bad, time_limit=20, tightness=False)
    assert r.refuted_classes() == {"converge"}, r.render()
    assert min(o.counterexample.trip_count for o in converge_refutations(r)) == first_t
    assert not check_hopper_program(dumps(bad).encode(), timeout_s=30, tightness=False).ok
    assert "no_deadlock" in run(bad, first_t).classes
    assert not any(run(bad, T).violations for T in range(1, first_t))


def test_a_certificate_from_before_converge_is_refused_by_name(tmp_path):
    """The Hopper certificate format is synth-certificate-hopper/4 (/3 since program.json says who runs
    what and the converge obligations exist, /4 since the manifest lists the cluster classes): an older
    manifest is refused naming the format and the fix."""
    from synth.verify.certificate_phases import FORMAT, certify_hopper, write_hopper_certificate
    assert FORMAT == "synth-certificate-hopper/4"
    d = tmp_path / "cert"
    write_hopper_certificate(verify_hopper(gemm(2, 0), time_limit=20), str(d))
    man = json.loads((d / "manifest.json").read_text())
    man["format"] = "synth-certificate-hopper/2"
    (d / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    res = certify_hopper(str(d))
    assert not res.ok
    assert "not a synth-certificate-hopper/4 manifest" in res.render() and "synth solve" in res.render()

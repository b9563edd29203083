"""The known bug shapes of docs/hopper.md: each bug as a small Hopper program that synth refutes with a
counterexample in the program's terms, and its corrected form proven for every T >= 1.
The explicit-state oracle (real mbarrier semantics) judges both forms at small T."""

from dataclasses import replace

import pytest

from synth.completion import ArriveStmt, Barrier, BarrierRef, PipelineState, TryWaitStmt, Tx
from synth.expr import Num, Var, parse
from synth.hopper.loop import HopperLoop, Load
from synth.lower.barriers import lower_hopper
from synth.program import Access, CommitStmt, OpStmt, Part, WaitStmt
from synth.verify.oracle_phases import run
from synth.verify.phases import verify_hopper
from synth.lower.hopper_design import design_program

LOADS = (Load("load_A", "A", 16384), Load("load_B", "B", 8192))


def gemm(stages=2, k=1, consumers=1, loads=LOADS):
    return lower_hopper(HopperLoop("gemm", loads, "mma", stages, k, consumers))


def edit(p, role, part, fn):
    prog = p.role(role).program
    parts = tuple(replace(pt, stmts=tuple(fn(list(pt.stmts)))) if pt.name == part else pt for pt in prog.parts)
    return p.with_role(role, replace(prog, parts=parts))


def set_wait(p, role, idx, count):
    prog = p.role(role).program
    waits = list(prog.waits)
    waits[idx] = replace(waits[idx], in_flight=parse(str(count)))
    return p.with_role(role, replace(prog, waits=tuple(waits)))


def refuted(p, classes, trips=range(1, 5)):
    """Refuted by the prover (one of ``classes``, with a counterexample) and by the oracle."""
    r = verify_hopper(p, time_limit=20, tightness=False)
    assert not r.ok
    bad = [o for o in r.obligations if o.status == "refuted" and o.kind in classes]
    assert bad, r.render()
    assert all(o.counterexample is not None or o.reason for o in bad)
    cex = next(o.counterexample for o in bad if o.counterexample is not None)
    assert cex.trip_count >= 1 and cex.part in ("body", "prologue", "epilogue")
    seen = set()
    for T in trips:
        seen |= run(p, T).classes
    assert seen, "the oracle finds no violation"
    return r, cex, seen


def proven(p, trips=range(1, 5)):
    r = verify_hopper(p, time_limit=20, tightness=True)
    assert r.ok, r.render()
    for T in trips:
        assert not run(p, T).violations, (T, run(p, T).violations)
    return r


def test_parity_alias_two_phases_behind():
    """CUTLASS PR #3654: without the producer's wait on "empty" the producer laps the consumer; a
    consumer two phases behind sees the parity of a later phase."""
    good = gemm(stages=2, k=0)
    bad = edit(good, "producer", "body", lambda st: st[1:])
    r, cex, seen = refuted(bad, {"parity", "slot_reuse"})
    assert "parity" in r.refuted_classes()
    assert seen & {"parity", "slot_reuse", "raw", "arrivals", "tx_bytes"}
    proven(good)


def test_expect_tx_left_on_predicated_off_load():
    """CUTLASS #2641: expect_tx announces a load's bytes, the load is predicated off: hang."""
    loads = (Load("load_A", "A", 16384), Load("load_B", "B", 8192, "k < T - 1"))
    good = gemm(loads=loads)
    bad = edit(good, "producer", "body", lambda st: [replace(s, tx=tuple(Tx(t.bytes) for t in s.tx))
                                                     if isinstance(s, ArriveStmt) else s for s in st])
    r, cex, seen = refuted(bad, {"tx_bytes"})
    tx = next(o for o in r.obligations if o.kind == "tx_bytes" and o.status == "refuted"
              and o.counterexample is not None and "delivered" in o.counterexample.summary)
    assert "24576 bytes expected, 16384 delivered" in tx.counterexample.summary
    assert tx.counterexample.trip_count == 1
    assert "no_deadlock" in seen
    proven(good)


def test_init_count_differs_from_arrivals_per_phase():
    """CUTLASS #2404: "empty" initialized for two consumer warp groups, one arrives per phase."""
    good = gemm(stages=2, k=1)
    bad = replace(good, barriers=tuple(replace(b, count=2) if b.name == "empty" else b for b in good.barriers))
    r, cex, seen = refuted(bad, {"arrivals"})
    assert "1 of 2 arrivals" in " ".join(o.counterexample.summary for o in r.obligations
                                         if o.counterexample is not None)
    assert "no_deadlock" in seen


def test_wrong_wgmma_wait_count_and_tightness():
    """CUTLASS PR #2502: wait_group K + 1 lets the release free a slot a wgmma still reads."""
    good = gemm(stages=3, k=1)
    bad = set_wait(good, "consumer", 0, 2)
    r, cex, seen = refuted(bad, {"release_after_wgmma"})
    assert seen & {"release_after_wgmma"}
    ok = proven(good)
    assert all(v.tight for v in ok.waits), ok.render()


def test_release_before_wgmma_completes():
    """CUTLASS #2508, Triton #11047, NVIDIA/Fuser #3573 #3863: the arrive on "empty" is placed
    before the wait_group that completes the wgmma reading the slot."""
    good = gemm(stages=2, k=0)

    def swap(st):
        k = next(n for n, s in enumerate(st) if isinstance(s, WaitStmt))
        return st[:k] + [st[k + 1], st[k]] + st[k + 2:]
    bad = edit(good, "consumer", "body", swap)
    r, cex, seen = refuted(bad, {"release_after_wgmma"})
    assert "release_after_wgmma" in seen
    assert cex.trip_count == 1


def test_phase_never_flips():
    """Triton #2868 #6354, facebookexperimental/triton #3658: the consumer never releases."""
    good = gemm(stages=2, k=0)
    bad = edit(good, "consumer", "body", lambda st: [s for s in st if not isinstance(s, ArriveStmt)])
    r, cex, seen = refuted(bad, {"no_deadlock", "arrivals"})
    assert "no_deadlock" in seen
    dl = [o for o in r.obligations if o.kind == "no_deadlock" and o.status == "refuted"]
    assert dl and min(o.counterexample.trip_count for o in dl) == 3  # the first wait on a released slot


def _one_iteration_program(fixed: bool):
    """tile-ai/tilelang #2566: the producer announces bytes with expect_tx (no arrival) and
    arrives for iteration k one step later; the last arrival sits in an epilogue that only
    loops of two or more iterations run."""
    good = gemm(stages=2, k=0)
    S = 2
    i = Var("i")
    tx = tuple(Tx(ld.bytes) for ld in LOADS)

    ip1 = parse("i + 1")
    prologue = [TryWaitStmt("empty", PipelineState(i, S, 1)), ArriveStmt("full", PipelineState(i, S, 0), 0, tx)] + \
        [OpStmt(ld.op, i, None, None, (), (Access(ld.buffer, i, parse(f"i % {S}")),),
                BarrierRef("full", PipelineState(i, S, 0), ld.bytes)) for ld in LOADS]
    body = [TryWaitStmt("empty", PipelineState(ip1, S, 1)), ArriveStmt("full", PipelineState(i, S, 0)),
            ArriveStmt("full", PipelineState(ip1, S, 0), 0, tx)] + \
        [OpStmt(ld.op, ip1, None, None, (), (Access(ld.buffer, ip1, parse(f"(i + 1) % {S}")),),
                BarrierRef("full", PipelineState(ip1, S, 0), ld.bytes)) for ld in LOADS]
    last = parse("i + T - 1")
    guard = None if fixed else parse("2 <= i + T")
    epilogue = [ArriveStmt("full", PipelineState(last, S, 0), 1, (), guard)]
    prog = good.role("producer").program
    parts = (Part("prologue", "i", parse("min(T, 1)"), tuple(prologue)),
             Part("body", "i", parse("max(T - 1, 0)"), tuple(body)),
             Part("epilogue", "i", Num(1), tuple(epilogue)))
    return good.with_role("producer", replace(prog, parts=parts))


def test_one_iteration_loop_deadlocks():
    bad = _one_iteration_program(fixed=False)
    r, cex, seen = refuted(bad, {"arrivals", "no_deadlock"})
    assert min(o.counterexample.trip_count for o in r.obligations
               if o.status == "refuted" and o.counterexample is not None) == 1
    assert "no_deadlock" in run(bad, 1).classes
    assert not run(bad, 2).violations and not run(bad, 3).violations  # trip >= 2 works
    proven(_one_iteration_program(fixed=True))


def _flip_every_iteration(ring_parity: bool):
    """tile-ai/tilelang #3087: the consumer signals a one-slot barrier "done" every iteration; the
    producer, before refilling a slot, waits on it with the ring's parity (k / stages) % 2 instead
    of the barrier's own (every iteration)."""
    S = 2
    good = gemm(stages=S, k=0)
    p = replace(good, barriers=good.barriers + (Barrier("done", 1, 1, "empty", ("A", "B")),))
    st = PipelineState(parse("i - 1"), S if ring_parity else 1, 0)
    p = edit(p, "producer", "body", lambda s: [TryWaitStmt("done", st, parse("1 <= i"))] + s[1:])
    p = edit(p, "consumer", "body", lambda s: [x if not isinstance(x, ArriveStmt) else
                                               ArriveStmt("done", PipelineState(Var("i"), 1, 0)) for x in s])
    return replace(p, setup=p.setup[:2] + (replace(p.setup[0], barrier="done"),) + p.setup[2:],
                   teardown=p.teardown + (replace(p.teardown[0], barrier="done"),))


def test_ring_parity_on_a_barrier_that_flips_every_iteration():
    bad = _flip_every_iteration(ring_parity=True)
    r, cex, seen = refuted(bad, {"parity", "slot_reuse"})
    assert "parity" in r.refuted_classes()
    proven(_flip_every_iteration(ring_parity=False))


def _split_groups(count: int):
    """tile-ai/tilelang #2505: one stage's wgmma split in two commit groups; the wait count is
    the logical distance in groups of the unsplit stage."""
    good = gemm(stages=3, k=1)
    # the k-tile's second half is its own op: one op runs each k-tile once (coverage)
    hi = replace(good.op("mma"), name="mma_hi")
    good = replace(good, ops=good.ops + (hi,))
    good = good.with_role("consumer", replace(good.role("consumer").program, ops=good.ops))
    good = good.with_role("producer", replace(good.role("producer").program, ops=good.ops))

    def split(st):
        out = []
        for s in st:
            if isinstance(s, OpStmt) and s.op == "mma":
                out += [s, CommitStmt(0, 0), replace(s, op="mma_hi", group=1)]
            elif isinstance(s, CommitStmt):
                out.append(CommitStmt(0, 1))
            else:
                out.append(s)
        return out
    p = edit(good, "consumer", "body", split)
    return set_wait(p, "consumer", 0, count)


def test_split_commit_groups():
    bad = _split_groups(3)   # 1 stage in flight + both groups of the current stage
    refuted(bad, {"release_after_wgmma"})
    r = proven(_split_groups(2))
    assert r.waits[0].tight


def test_report_lists_obligations_by_class():
    r = verify_hopper(gemm(stages=3, k=2, consumers=2), time_limit=20)
    assert r.ok
    classes = r.by_class()
    for cls in ("parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma", "wgmma_wait",
                "slot_reuse", "fence"):
        assert classes[cls]["proven"] >= 1, cls
    assert "all obligations proven" in r.render()


def test_missing_init_fence_and_inval():
    good = gemm()
    bad = replace(good, setup=good.setup[:2], teardown=good.teardown[:1])
    r = verify_hopper(bad, time_limit=20, tightness=False)
    assert {o.id for o in r.obligations if o.status == "refuted"} >= {"fence:init:full", "fence:init:empty",
                                                                      "fence:inval:empty"}


@pytest.mark.parametrize("T", [1, 2, 3])
def test_every_trip_count_fixed(T):
    """The symbolic proof agrees with a proof at each fixed trip count."""
    r = verify_hopper(gemm(stages=3, k=1), time_limit=20, tightness=False, trip_count=T)
    assert r.ok


def test_generic_write_needs_proxy_fence():
    """A synchronous (generic-proxy) write of a slot that a wgmma (async proxy) then reads needs
    fence.proxy.async between them."""
    from synth.completion import FenceStmt
    from synth.program import ProgOp
    good = gemm(stages=2, k=0)
    p = replace(good, ops=good.ops + (ProgOp("fixup", "alu", 0, False, None, None),))
    p = p.with_role("consumer", replace(p.role("consumer").program, ops=p.ops))

    def add(fence):
        def f(st):
            k = next(n for n, s in enumerate(st) if isinstance(s, OpStmt))
            fix = OpStmt("fixup", Var("i"), None, None, (), (Access("A", Var("i"), parse("i % 2")),))
            return st[:k] + [fix] + ([FenceStmt("proxy_async")] if fence else []) + st[k:]
        return edit(p, "consumer", "body", f)
    bad = verify_hopper(add(False), time_limit=20, tightness=False)
    assert [o.id for o in bad.obligations if o.status == "refuted"] == ["fence:proxy:consumer:body:1"]
    assert verify_hopper(add(True), time_limit=20, tightness=False).ok


def test_an_arrival_naming_phase_minus_one_is_refuted():
    """A release counted ``i - 1`` with no ``i >= 1`` guard names phase -1 at ``i = 0``: the arrival
    really lands in phase 0, one too many there. Found by the independent checker (synth/trusted):
    the prover used to skip phases below 0."""
    from synth.hopper.kernel_design import KernelDesign

    p = design_program(KernelDesign.of(bm=64, stages=3, k_pipe_mmas=0))

    def shift(stmts):
        out, done = [], False
        for s in stmts:
            if isinstance(s, ArriveStmt) and s.barrier.startswith("empty") and not done:
                s, done = replace(s, state=replace(s.state, count=parse("i - 1"))), True
            out.append(s)
        return out

    part = p.role("consumer").program.parts[0].name
    refuted(edit(p, "consumer", part, shift), {"arrivals"}, trips=range(1, 3))


# -- holes found by an independent judge: a read with no load, a group left pending, a k-tile
# -- skipped or repeated, a refutation first showing at a large T, a whole-call time limit --------

def _one_warp_group(stages=3, k=1):
    from synth.lower.barriers import lower_hopper_single
    return lower_hopper_single(HopperLoop("one", LOADS, "mma", stages, k))


def _trusted(p):
    from synth.hopper.ir import dumps
    from synth.trusted.hopper import check_hopper_program
    r = check_hopper_program(dumps(p).encode("utf-8"), timeout_s=20, tightness=False)
    return r.ok, {c.kind for c in r.obligations if not c.ok}


def _epilogue_mma_guard(p, guard):
    return edit(p, "mainloop", "epilogue", lambda st: [replace(s, guard=guard) if isinstance(s, OpStmt) else s
                                                      for s in st])


@pytest.mark.parametrize("guard", [None, "1 <= i + T"])
def test_read_of_a_version_no_load_produces(guard):
    """The epilogue wgmma's guard `2 <= i + T` dropped or loosened: at T = 1 it issues the wgmma of
    iteration -1, reading a slot no TMA ever wrote. No copy of version -1 exists, so nothing is
    waited for: the read must still be refuted (`raw`), as must the k-tile it invents (`coverage`)."""
    good = _one_warp_group()
    bad = _epilogue_mma_guard(good, None if guard is None else parse(guard))
    r, cex, seen = refuted(bad, {"raw"}, trips=range(1, 3))
    raw = [o for o in r.obligations if o.kind == "raw" and o.status == "refuted"]
    assert min(o.counterexample.trip_count for o in raw) == 1
    assert "iteration -1" in " ".join(o.counterexample.summary for o in raw)
    assert "coverage" in r.refuted_classes()
    assert {"raw", "coverage"} <= seen
    ok, kinds = _trusted(bad)
    assert not ok and {"raw", "coverage"} <= kinds  # the unmutated program: test_the_real_drain_is_tight


def _drain_mutants():
    one = _one_warp_group()
    ws = gemm(stages=2, k=1)
    final = len(one.role("mainloop").program.waits) - 1

    def last_commit_off(st):
        k = max(n for n, s in enumerate(st) if isinstance(s, CommitStmt))
        return st[:k] + [replace(st[k], guard=parse("i + T < 2"))] + st[k + 1:]

    def no_wait(prog, part):
        stmts = [s for s in prog.part(part).stmts if not isinstance(s, WaitStmt)]
        parts = tuple(replace(pt, stmts=tuple(stmts)) if pt.name == part else pt for pt in prog.parts)
        return replace(prog, parts=parts, waits=tuple(w for w in prog.waits if w.part != part))
    return [
        ("final wait_group raised to 1", set_wait(one, "mainloop", final, 1)),
        ("last commit guarded off", edit(one, "mainloop", "epilogue", last_commit_off)),
        ("warp-specialized drain deleted", ws.with_role("consumer", no_wait(ws.role("consumer").program,
                                                                            "epilogue"))),
    ]


@pytest.mark.parametrize("case", range(3), ids=["final-wait-1", "last-commit-off", "ws-drain-deleted"])
def test_warp_group_finishes_with_a_wgmma_group_pending(case):
    """Raising the final wait_group to 1, guarding off the last commit, or deleting the epilogue's
    wait_group of the warp-specialized consumer lets a warp group finish (and the kernel read the
    accumulators) while a wgmma group is pending: `wgmma_drain`, for the prover, the oracle and the
    independent checker."""
    name, bad = _drain_mutants()[case]
    r, cex, seen = refuted(bad, {"wgmma_drain"}, trips=range(1, 4))
    assert "wgmma_drain" in seen, name
    ok, kinds = _trusted(bad)
    assert not ok and "wgmma_drain" in kinds, (name, kinds)


def test_the_real_drain_is_tight():
    """The one-warp-group program's last wait_group 0 has no release after it: it is tight because
    one more group in flight leaves a group pending at the end (it used to be reported "not tight
    ... redundant")."""
    r = proven(_one_warp_group(), trips=range(1, 3))
    last = r.waits[-1]
    assert last.tight is True and "complete (a later wait_group forces it)" in last.reason, last.reason
    assert all(v.tight for v in r.waits)


@pytest.mark.parametrize("how", ["deleted", "repeated"])
def test_every_k_tile_runs_exactly_once(how):
    """Deleting the consumer's wgmma, or issuing it twice, is refused (`coverage`), as is a copy
    deleted from the producer (its k-tiles never load)."""
    good = gemm(stages=2, k=0)

    def mma(st):
        k = next(n for n, s in enumerate(st) if isinstance(s, OpStmt) and s.op == "mma")
        return st[:k] + st[k + 1:] if how == "deleted" else st[:k + 1] + [st[k]] + st[k + 1:]
    bad = edit(good, "consumer", "body", mma)
    r = verify_hopper(bad, time_limit=20, tightness=False)
    cov = [o for o in r.obligations if o.kind == "coverage" and o.status == "refuted"]
    assert cov, r.render()
    assert ("op mma is run by some role" if how == "deleted" else "2 time(s)") in cov[0].counterexample.summary
    assert "coverage" in run(bad, 1).classes
    ok, kinds = _trusted(bad)
    assert not ok and "coverage" in kinds


def test_a_refutation_first_showing_at_a_large_trip_count():
    """A consumer release guarded `i != 15`: the producer's wait for that slot hangs only from T = 18
    on. The counterexample search reaches it (it used to search T <= 12, then crash asking Z3 for a
    model it had popped: "model is not available")."""
    good = gemm(stages=2, k=0)
    bad = edit(good, "consumer", "body", lambda st: [replace(s, guard=parse("i != 15")) if isinstance(s, ArriveStmt)
                                                     else s for s in st])
    r = verify_hopper(bad, time_limit=20, tightness=False)
    assert not r.ok
    dl = [o for o in r.obligations if o.kind == "no_deadlock" and o.status == "refuted"]
    assert dl and min(o.counterexample.trip_count for o in dl) == 18, r.render()
    assert "no_deadlock" in run(bad, 18, max_states=100_000).classes
    assert not run(bad, 17, max_states=100_000).violations


def test_teardown_compares_states_by_value():
    """A prologue copy whose state says `stages 4` where the ring has 3: at the prologue's iterations
    (0 and 1) slot and phase are the same, so the copy is observed as before and the program is
    proven (teardown used to compare the states as text)."""
    good = _one_warp_group()
    bad = edit(good, "mainloop", "prologue", lambda st: [
        replace(s, barrier=replace(s.barrier, state=replace(s.barrier.state, stages=4)))
        if isinstance(s, OpStmt) else s for s in st])
    assert bad != good
    proven(bad, trips=range(1, 4))
    assert _trusted(bad)[0]


def test_whole_call_deadline():
    """`deadline` bounds the whole verification: past it nothing more is asked, and what was not asked
    is unknown with the reason (never proven, never a crash)."""
    import time as _t
    from synth.hopper.kernel_design import KernelDesign
    from synth.verify import phases
    # a program whose proof takes seconds, none of it done before (the prover reuses what this process proved)
    p = design_program(KernelDesign.of(bm=64, bn=16, stages=16, k_pipe_mmas=1, cluster="2x1"))
    phases._PROVEN.clear()
    phases._VIEWS.clear()
    t0 = _t.monotonic()
    r = verify_hopper(p, time_limit=20, deadline=t0 + 0.3)
    assert _t.monotonic() - t0 < 0.3 + 10  # the one test of this promise: stopped near it, room for a loaded machine
    assert not r.ok
    unk = [o for o in r.obligations if o.status == "unknown"]
    assert unk and all("time limit of the whole verification ran out" in o.reason for o in unk[-1:])
    late = verify_hopper(p, time_limit=20, deadline=_t.monotonic() - 1)
    assert {o.status for o in late.obligations} == {"unknown"}
    assert "unknown" in late.render()


@pytest.mark.parametrize("stages", [2, 3])
def test_elected_release_without_a_convergence_point(stages):
    """Triton PR #10035 ("always insert bar sync before all mbarrier arrives"): a partition's leader warp
    arrives on the ring's empty barrier while the partition's other warps are still in their wait loop;
    the producer refills the slot and the late warps wait on a phase whose parity came round again:
    deadlock. Here: the consumer's wgmma (a warp-group collective) replaced by plain shared-memory reads,
    so nothing converges the 128 threads before the elected release. Refuted as `converge` only, at
    T = stages + 1, naming the lagging thread's wait; the two-thread oracle hangs there and not below.
    Corrected form: a bar.sync over the warp group before the release, proven."""
    from .test_converge import plain_reads
    bad = plain_reads(gemm(stages=stages, k=0))
    r, cex, seen = refuted(bad, {"converge"}, trips=range(1, stages + 2))
    assert r.refuted_classes() == {"converge"}
    assert cex.trip_count == stages + 1
    assert "thread 1" in cex.summary and "try_wait on full[" in cex.summary and "empty[" in cex.summary
    assert "no_deadlock" in seen
    assert not any(run(bad, T).violations for T in range(1, stages + 1))
    ok, kinds = _trusted(bad)
    assert not ok and kinds == {"converge"}
    good = plain_reads(gemm(stages=stages, k=0), bar_sync=True)
    proven(good, trips=range(1, stages + 3))
    assert _trusted(good)[0]

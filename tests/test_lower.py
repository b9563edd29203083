"""Lowering: RFC 0077's examples reproduced, predicate strategies, errors, and random
schedules checked by a small independent simulator (the real proofs are the verifier's)."""

from __future__ import annotations

import pathlib
import random
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.errors import SynthError
from synth.expr import Bin, Num, evaluate, parse, to_str
from synth.graph import build_graph
from synth.load import load_problem, load_problem_text
from synth.lower import STRATEGIES, lower, pretty_condition
from synth.program import CommitStmt, OpStmt, Program, WaitStmt, program_from_json, program_to_json
from synth.randgen import random_problem, random_schedule
from synth.schedule import schedule_from_pins

PROBLEMS = pathlib.Path(__file__).resolve().parent.parent / "problems"


# ---------------------------------------------------------------------------------------------
# A small independent simulator
# ---------------------------------------------------------------------------------------------
# Runs a program for one concrete trip count with the laziest queue RFC 0077 allows (a
# committed group completes only when a wait forces it) and reports every read that does
# not see the finished write of the version it names, every write into a slot an unfinished
# async read still needs, every negative wait count and every group that issued work but
# was not committed. It reads nothing but the Program.

@dataclass
class _Inst:
    queue: int
    work: bool = False
    done: bool = False


@dataclass
class SimResult:
    errors: list[str]
    issued: list[tuple[str, int]] = field(default_factory=list)
    skipped: set[tuple[str, int]] = field(default_factory=set)


def simulate(prog: Program, T: int, opaque: Optional[Callable[[str, int], bool]] = None) -> SimResult:
    opaque = opaque or (lambda op, it: True)
    sym = prog.trip_count if isinstance(prog.trip_count, str) else None
    res = SimResult([])
    content: dict[tuple[str, int], tuple[Optional[int], Optional[_Inst]]] = {}
    pending_reads: dict[tuple[str, int], list[_Inst]] = {}
    inflight: dict[int, list[_Inst]] = {}
    open_: dict[int, _Inst] = {}
    mult = {b.name: b.multiplicity for b in prog.buffers}

    def pred_on(op: str, it: int) -> bool:
        w = prog.op(op).when
        if w is None:
            return True
        if w == "opaque":
            return bool(opaque(op, it))
        env = {prog.loop_var: it, **({sym: T} if sym else {})}
        return bool(evaluate(parse(w), env))

    for part in prog.parts:
        base = {sym: T} if sym else {}
        for i in range(int(evaluate(part.extent, base))):
            env = {**base, part.var: i}
            where = f"{part.name} {part.var}={i} (T={T})"
            group_it: dict[int, tuple[list[str], int]] = {}
            for s in part.stmts:
                if s.guard is not None and not evaluate(s.guard, env):
                    continue
                if isinstance(s, WaitStmt):
                    w = prog.waits[s.wait]
                    n = int(evaluate(w.in_flight, env))
                    if n < 0:
                        res.errors.append(f"{where}: wait before {w.before} has count {n}")
                        n = 0
                    q = inflight.setdefault(w.queue, [])
                    while len(q) > n:
                        q.pop(0).done = True
                elif isinstance(s, OpStmt):
                    it = int(evaluate(s.iteration, env))
                    po = prog.op(s.op)
                    if not 0 <= it < T:
                        res.errors.append(f"{where}: {s.op} runs iteration {it}")
                    if s.group is not None:
                        names = group_it.get(s.group, ([], it))[0]
                        group_it[s.group] = (names + [s.op], it)
                    if not pred_on(s.op, it):
                        res.skipped.add((s.op, it))
                        continue
                    res.issued.append((s.op, it))
                    inst = open_.setdefault(s.group, _Inst(po.queue)) if po.is_async else None
                    if inst is not None:
                        inst.work = True
                    for a in s.reads:
                        ver, slot = int(evaluate(a.version, env)), int(evaluate(a.slot, env))
                        if slot != ver % mult[a.buffer]:
                            res.errors.append(f"{where}: {s.op} reads {a.buffer} version {ver} from slot {slot}")
                        have, by = content.get((a.buffer, slot), (None, None))
                        if ver < 0:
                            if have is not None:
                                res.errors.append(f"{where}: {s.op} wants the initial {a.buffer}, finds {have}")
                        elif (a.producer, ver) in res.skipped:
                            pass  # predicated off: nothing to wait for
                        elif have != ver:
                            res.errors.append(f"{where}: {s.op} reads {a.buffer} version {ver}, slot holds {have}")
                        elif by is not None and not by.done:
                            res.errors.append(f"{where}: {s.op} reads {a.buffer} version {ver} before its "
                                              f"async write completed")
                        if inst is not None:
                            pending_reads.setdefault((a.buffer, slot), []).append(inst)
                    for a in s.writes:
                        ver, slot = int(evaluate(a.version, env)), int(evaluate(a.slot, env))
                        if slot != ver % mult[a.buffer]:
                            res.errors.append(f"{where}: {s.op} writes {a.buffer} version {ver} to slot {slot}")
                        if any(not r.done and r is not inst for r in pending_reads.get((a.buffer, slot), [])):
                            res.errors.append(f"{where}: {s.op} overwrites {a.buffer} slot {slot} while an "
                                              f"async read of it is pending")
                        content[(a.buffer, slot)] = (ver, inst)
                elif isinstance(s, CommitStmt):
                    inst = open_.pop(s.group, None) or _Inst(s.queue)
                    names, it = group_it.get(s.group, ([], 0))
                    if not s.gate or any(pred_on(o, it) for o in s.gate if o in names):
                        inflight.setdefault(s.queue, []).append(inst)
                    elif inst.work:
                        res.errors.append(f"{where}: group {s.group} issued work but was not committed")
    return res


def check_order(problem, graph, T: int, res: SimResult) -> list[str]:
    """Each op of each iteration 0..T-1 issued exactly once (unless predicated off), in
    dependence order."""
    errs = []
    idx: dict[tuple[str, int], int] = {}
    for k, key in enumerate(res.issued):
        if key in idx:
            errs.append(f"{key} issued twice")
        idx[key] = k
    for o in problem.ops:
        errs += [f"{o.name}({v}) never runs" for v in range(T)
                 if (o.name, v) not in idx and (o.name, v) not in res.skipped]
    for e in graph.constraints():
        a, b = problem.ops[e.src].name, problem.ops[e.dst].name
        for v in range(T - e.distance):
            x, y = idx.get((a, v)), idx.get((b, v + e.distance))
            if x is not None and y is not None and x > y:
                errs.append(f"{b}({v + e.distance}) issued before {a}({v})")
    return errs


def opaque_patterns(seed: int) -> list[Callable[[str, int], bool]]:
    """All on, all off, and random data-dependent patterns."""
    out: list[Callable[[str, int], bool]] = [lambda op, it: True, lambda op, it: False]
    for k in range(3):
        rng = random.Random(seed * 31 + k)
        table: dict[tuple[str, int], bool] = {}
        out.append(lambda op, it, rng=rng, table=table: table.setdefault((op, it), rng.random() < 0.5))
    return out


def trip_counts(problem) -> list[int]:
    if problem.loop.symbolic:
        t = problem.loop.min_trip_count
        return [t, t + 1, t + 2, t + 5, t + 9]
    return [problem.loop.trip_count]


def sim_errors(problem, graph, prog: Program, patterns: int = 5) -> list[str]:
    errs: list[str] = []
    for T in trip_counts(problem):
        for pat in opaque_patterns(T)[:patterns]:
            r = simulate(prog, T, pat)
            errs += r.errors + check_order(problem, graph, T, r)
            if errs:
                return errs
    return errs


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _load(name: str):
    p = load_problem(str(PROBLEMS / f"{name}.yaml"))
    g = build_graph(p)
    return p, g, schedule_from_pins(p, g)


def _lower(name: str, **kw):
    p, g, s = _load(name)
    return p, g, lower(p, g, s, **kw)


def _waits(prog: Program, part: str) -> list[tuple[int, str, str]]:
    return [(w.queue, to_str(w.in_flight), w.before) for w in prog.waits if w.part == part]


def _shape(prog: Program, part: str) -> list[str]:
    """Statements of a part, compactly: op names, ``commit(q)``, ``wait(q, n)``."""
    out = []
    for s in prog.part(part).stmts:
        if isinstance(s, OpStmt):
            out.append(s.op)
        elif isinstance(s, CommitStmt):
            out.append(f"commit({s.queue})")
        else:
            w = prog.waits[s.wait]
            out.append(f"wait({w.queue}, {to_str(w.in_flight)})")
    return out


RFC = ["rfc0077-two-stage", "rfc0077-gemm", "rfc0077-interleaved", "rfc0077-same-stage-consumer",
       "rfc0077-three-stage"]


# ---------------------------------------------------------------------------------------------
# RFC 0077's examples
# ---------------------------------------------------------------------------------------------

def test_two_stage() -> None:
    _, _, prog = _lower("rfc0077-two-stage")
    assert [to_str(p.extent) for p in prog.parts] == ["1", "15", "1"]
    assert _shape(prog, "prologue") == ["produce_B", "commit(0)"]
    assert _shape(prog, "body") == ["produce_B", "commit(0)", "wait(0, 1)", "consume_B"]
    assert _shape(prog, "epilogue") == ["wait(0, 0)", "consume_B"]
    assert _waits(prog, "body") == [(0, "1", "consume_B")]
    assert _waits(prog, "epilogue") == [(0, "0", "consume_B")]


def test_gemm() -> None:
    """Body: wait(0, 2) before the stage-2 read; the stage-3 read's wait(0, 3) is implied by
    the previous iteration's wait(0, 2) (RFC 0077's remark). Epilogue: 2 - i and 1 - i."""
    _, _, prog = _lower("rfc0077-gemm")
    assert [to_str(p.extent) for p in prog.parts] == ["3", "125", "3"]
    assert _waits(prog, "prologue") == [(0, "2", "s2r_A")]
    assert _waits(prog, "body") == [(0, "2", "s2r_A")]
    assert _waits(prog, "epilogue") == [(0, "2 - i", "s2r_B"), (0, "1 - i", "s2r_A")]
    assert _shape(prog, "body") == ["load_A", "load_B", "commit(0)", "s2r_B", "wait(0, 2)", "s2r_A", "mma"]
    pro = prog.part("prologue").stmts
    assert [to_str(s.guard) for s in pro if isinstance(s, (WaitStmt, OpStmt)) and s.guard is not None] \
        == ["2 <= i", "2 <= i"]
    epi = {s.op: s for s in prog.part("epilogue").stmts if isinstance(s, OpStmt)}
    assert to_str(epi["s2r_A"].guard) == "i < 2" and epi["s2r_B"].guard is None
    assert "load_A" not in epi
    body = {s.op: s for s in prog.part("body").stmts if isinstance(s, OpStmt)}
    assert [to_str(a.slot) for a in body["load_A"].writes] == ["(i + 3) % 3"]
    assert [to_str(a.slot) for a in body["load_B"].writes] == ["(i + 3) % 4"]
    assert [(a.buffer, to_str(a.version), a.producer) for a in body["s2r_B"].reads] == [("B_s", "i", "load_B")]
    assert any("one iteration earlier" in n for n in prog.notes)


def test_interleaved() -> None:
    """Two commit groups per iteration; wait(0, 5) before compute."""
    _, _, prog = _lower("rfc0077-interleaved")
    assert to_str(prog.part("body").extent) == "13"
    assert _shape(prog, "body") == ["copy_A", "commit(0)", "wait(0, 5)", "compute", "copy_B", "commit(0)"]
    assert _shape(prog, "prologue") == ["copy_A", "commit(0)", "copy_B", "commit(0)"]
    assert _waits(prog, "epilogue") == [(0, "4 - 2 * i", "compute")]


def test_interleaved_rfc_prologue_races() -> None:
    """RFC 0077's listing commits both prologue copies as one group; with the body's
    wait(0, 5) (which counts two groups per step) the first body iterations then read
    unfinished copies. synth keeps the body's grouping in the prologue."""
    p, g, prog = _lower("rfc0077-interleaved")
    pro = prog.part("prologue")
    g_b = [s for s in pro.stmts if isinstance(s, CommitStmt)][1].group
    merged = tuple(replace(s, group=g_b) if isinstance(s, OpStmt) else s for s in pro.stmts
                   if not (isinstance(s, CommitStmt) and s.group != g_b))
    rfc = replace(prog, parts=(replace(pro, stmts=merged),) + prog.parts[1:])
    assert _shape(rfc, "prologue") == ["copy_A", "copy_B", "commit(0)"]
    errs = simulate(rfc, 16).errors
    assert errs and errs[0].startswith("body i=0 (T=16): compute reads A_shared version 0 before")


def test_same_stage_consumer() -> None:
    """A consumer in the producers' stage waits for everything: wait(0, 0)."""
    _, _, prog = _lower("rfc0077-same-stage-consumer")
    assert _waits(prog, "body") == [(0, "0", "s2r_A")]
    assert _waits(prog, "prologue") == [(0, "0", "s2r_A")]
    assert _waits(prog, "epilogue") == [(0, "2 - i", "s2r_B")]


def test_three_stage() -> None:
    """Queue 1's wait before store_D; the async make_C waits on queue 0 inside its own commit
    group; B gets 3 slots (the RFC's 2 would let make_B overwrite a slot make_C still reads)."""
    _, _, prog = _lower("rfc0077-three-stage")
    assert prog.buffer("B").multiplicity == 3 and prog.buffer("C").multiplicity == 2
    assert _shape(prog, "body") == ["make_B", "commit(0)", "wait(0, 1)", "make_C", "commit(1)",
                                    "wait(1, 1)", "store_D"]
    assert _shape(prog, "prologue") == ["make_B", "commit(0)", "wait(0, 1)", "make_C", "commit(1)"]
    assert _waits(prog, "epilogue") == [(0, "0", "make_C"), (1, "1 - i", "store_D")]
    assert any("B has 3 slots" in n for n in prog.notes)


def test_three_stage_rfc_slots_need_a_war_wait() -> None:
    """With the RFC's two slots for B, make_B must wait for queue 1 (make_C's read of the
    slot) before it reuses it; without that wait the simulator sees the race."""
    p, g, s = _load("rfc0077-three-stage")
    prog = lower(p, g, replace(s, multiplicity=(("B", 2), ("C", 2))))
    assert _waits(prog, "body") == [(1, "0", "make_B"), (0, "1", "make_C")]
    assert sim_errors(p, g, prog) == []
    k = next(k for k, w in enumerate(prog.waits) if w.part == "body" and w.before == "make_B")
    broken = prog.with_wait(k, in_flight=Num(1))
    assert any("overwrites B" in e for e in simulate(broken, 16).errors)


@pytest.mark.parametrize("name", RFC + ["spec-predicated"])
def test_examples_simulate_and_round_trip(name: str) -> None:
    p, g, prog = _lower(name)
    assert sim_errors(p, g, prog) == []
    assert program_from_json(program_to_json(prog)) == prog
    assert all(w.tight is None and w.reason for w in prog.waits)


@pytest.mark.parametrize("name", RFC)
def test_body_waits_are_tight(name: str) -> None:
    """One more in flight at any body wait lets some read see an unfinished write."""
    p, g, prog = _lower(name)
    for k, w in enumerate(prog.waits):
        if w.part == "body":
            looser = prog.with_wait(k, in_flight=Bin("+", w.in_flight, Num(1)))
            assert simulate(looser, p.loop.trip_count).errors, f"wait {k} before {w.before} is not tight"


def test_symbolic_trip_count() -> None:
    p, g, prog = _lower("spec-predicated")
    assert to_str(prog.part("body").extent) == "T - 3"
    assert _waits(prog, "body") == [(0, "2", "s2r_A")]
    assert _waits(prog, "epilogue") == [(0, "2 - i", "s2r_B"), (0, "1 - i", "s2r_A")]
    epi = {s.op: s for s in prog.part("epilogue").stmts if isinstance(s, OpStmt)}
    assert to_str(epi["s2r_B"].iteration) == "i + T - 3"
    # load_B shares its group with unpredicated load_A: that group is always committed.
    assert all(not s.gate for pt in prog.parts for s in pt.stmts if isinstance(s, CommitStmt))


# ---------------------------------------------------------------------------------------------
# errors and options
# ---------------------------------------------------------------------------------------------

def _with_trip(p, trip, tmin=None):
    """``p`` with another trip count (any T >= 1: lowering and verification handle loops
    shorter than the pipeline)."""
    import dataclasses

    loop = dataclasses.replace(p.loop, trip_count=trip, min_trip_count=tmin if tmin is not None else trip)
    return dataclasses.replace(p, loop=loop)


def _lower_short(name: str, trip, tmin=None, **kw):
    p, g, s = _load(name)
    p = _with_trip(p, trip, tmin)
    return p, g, lower(p, g, s, **kw)


def short_trips(prog: Program) -> list[int]:
    """Every trip count from the smallest allowed to two past the stage count (one if fixed)."""
    if isinstance(prog.trip_count, int):
        return [prog.trip_count]
    return list(range(prog.min_trip_count, max(prog.min_trip_count, prog.max_stage + 3) + 1))


def short_sim_errors(problem, graph, prog: Program, patterns: int = 3) -> list[str]:
    errs: list[str] = []
    for T in short_trips(prog):
        for pat in opaque_patterns(T)[:patterns]:
            r = simulate(prog, T, pat)
            errs += [f"T={T}: {e}" for e in r.errors + check_order(problem, graph, T, r)]
            if errs:
                return errs
    return errs


def test_short_loop_rfc_gemm_static() -> None:
    """Two iterations under a four-stage pipeline: no body; the prologue stops at step T = 2
    and the epilogue's guards keep each op inside its two iterations."""
    p, g, prog = _lower_short("rfc0077-gemm", 2)
    assert [to_str(pt.extent) for pt in prog.parts] == ["2", "0", "3"]
    assert _shape(prog, "prologue") == ["load_A", "load_B", "commit(0)"]
    epi = {s.op: to_str(s.guard) for s in prog.part("epilogue").stmts if isinstance(s, OpStmt)}
    assert epi == {"s2r_B": "1 <= i", "s2r_A": "i < 2", "mma": "1 <= i"}
    assert _waits(prog, "epilogue") == [(0, "2 - i", "s2r_B"), (0, "1 - i", "s2r_A")]
    assert short_sim_errors(p, g, prog) == []
    assert program_from_json(program_to_json(prog)) == prog


def test_short_loop_rfc_gemm_symbolic_from_one() -> None:
    """T >= 1 under four stages: prologue min(T, 3), body max(T - 3, 0); the epilogue's
    guards gain ``s <= i + T``; the counts are the long loop's (the stage-0 commits stop at
    step T whatever T is)."""
    p, g, prog = _lower_short("rfc0077-gemm", "T", 1)
    assert [to_str(pt.extent) for pt in prog.parts] == ["min(T, 3)", "max(T - 3, 0)", "3"]
    epi = {s.op: to_str(s.guard) for s in prog.part("epilogue").stmts if isinstance(s, OpStmt)}
    assert epi == {"s2r_B": "3 <= i + T", "s2r_A": "2 <= i + T && i < 2", "mma": "3 <= i + T"}
    assert _waits(prog, "prologue") == [(0, "2", "s2r_A")]
    assert _waits(prog, "body") == [(0, "2", "s2r_A")]
    assert _waits(prog, "epilogue") == [(0, "2 - i", "s2r_B"), (0, "1 - i", "s2r_A")]
    assert short_sim_errors(p, g, prog) == []
    # the same program as the long loop's wherever T >= 4
    long_ = _lower_short("rfc0077-gemm", "T", 4)[2]
    assert [s.op for s in long_.part("body").stmts if isinstance(s, OpStmt)] == \
        [s.op for s in prog.part("body").stmts if isinstance(s, OpStmt)]


@pytest.mark.parametrize("name", RFC)
@pytest.mark.parametrize("trip", [1, 2, ("T", 1), ("T", 2)], ids=str)
def test_short_loops_rfc_examples(name: str, trip) -> None:
    """RFC 0077's examples with one and two iterations (fixed, or the least of a symbolic T):
    every op of every iteration once, in dependence order, no stale read, no clobbered slot,
    no negative count, at every T from the least to S + 2."""
    t, tmin = trip if isinstance(trip, tuple) else (trip, None)
    p, g, prog = _lower_short(name, t, tmin)
    assert short_sim_errors(p, g, prog) == []
    assert program_from_json(program_to_json(prog)) == prog


@pytest.mark.parametrize("name", RFC)
def test_short_loop_waits_are_tight(name: str) -> None:
    """At T = 2 each wait that guards a read is tight: one more in flight breaks a read."""
    p, g, prog = _lower_short(name, 2)
    for k, w in enumerate(prog.waits):
        looser = prog.with_wait(k, in_flight=Bin("+", w.in_flight, Num(1)))
        errs = simulate(looser, 2).errors
        if w.part == "epilogue" and not errs:
            continue  # the epilogue keeps RFC 0077's per-consumer waits, some implied by another
        assert errs, f"{name}: wait {k} ({w.part}) before {w.before} is not tight"


def test_one_stage_shorter_than_two() -> None:
    """TVM's trivial pipeline: one iteration, stages [0, 1]: prologue and epilogue only."""
    p, g, prog = _lower_short("rfc0077-two-stage", 1)
    assert [to_str(pt.extent) for pt in prog.parts] == ["1", "0", "1"]
    assert _shape(prog, "prologue") == ["produce_B", "commit(0)"]
    assert _shape(prog, "epilogue") == ["wait(0, 0)", "consume_B"]
    assert short_sim_errors(p, g, prog) == []


def test_unknown_strategy() -> None:
    p, g, s = _load("rfc0077-two-stage")
    with pytest.raises(ValueError):
        lower(p, g, s, predicate_strategy="sometimes")
    assert STRATEGIES == ("auto", "always_commit", "naive")


GATED = """
name: gated
loop: {var: k, trip_count: T, min_trip_count: 4}
buffers:
  A_s: {space: shared, bytes: 1024}
  B_s: {space: shared, bytes: 1024}
ops:
  - {name: load_A, unit: cp_async, writes: [A_s], latency: 400}
  - {name: load_B, unit: cp_async, writes: [B_s], latency: 400, when: "k + 2 < T"}
  - {name: compute, unit: alu, reads: [A_s, B_s], latency: 20}
target:
  shared_bytes: 65536
  units: {cp_async: {async: true}, alu: {}}
schedule: {stage: [0, 0, 3], order: [0, 2, 1], async_stages: [0]}
"""


def _gated(strategy: str):
    p = load_problem_text(GATED, "gated.yaml")
    g = build_graph(p)
    return p, g, lower(p, g, schedule_from_pins(p, g), predicate_strategy=strategy)


def test_affine_predicate_auto_gates_commit_with_exact_counts() -> None:
    p, g, prog = _gated("auto")
    gates = {s.gate for pt in prog.parts for s in pt.stmts if isinstance(s, CommitStmt)}
    assert gates == {(), ("load_B",)}
    assert _waits(prog, "body") == [(0, "(i + 4 < T) ? 5 : 4", "compute")]
    assert _waits(prog, "epilogue") == [(0, "2 - i", "compute")]
    assert sim_errors(p, g, prog) == []
    assert any("committed only when the predicate holds" in n for n in prog.notes)


@pytest.mark.parametrize("when", ["k % 2 == 0", "k % 2 == 0 || k + 3 >= T", "k >= 1", "k + 1 < T && k >= 2"])
def test_affine_predicates_exact_counts_simulate(when: str) -> None:
    p = load_problem_text(GATED.replace("k + 2 < T", when), "gated.yaml")
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    assert sim_errors(p, g, prog) == []
    assert program_from_json(program_to_json(prog)) == prog


def test_always_commit_keeps_unpredicated_counts() -> None:
    p, g, prog = _gated("always_commit")
    assert all(not s.gate for pt in prog.parts for s in pt.stmts if isinstance(s, CommitStmt))
    assert _waits(prog, "body") == [(0, "5", "compute")]
    assert sim_errors(p, g, prog) == []


def test_naive_is_refuted_by_simulation() -> None:
    p, g, prog = _gated("naive")
    assert {s.gate for pt in prog.parts for s in pt.stmts if isinstance(s, CommitStmt)} == {(), ("load_B",)}
    assert _waits(prog, "body") == [(0, "5", "compute")]
    assert any("before its async write completed" in e for e in sim_errors(p, g, prog))


OPAQUE_PINNED = (PROBLEMS / "predicated-opaque.yaml").read_text().replace(
    "schedule:\n  max_stage: 3", "schedule: {stage: [0, 0, 2], order: [0, 2, 1], async_stages: [0]}")


def test_opaque_predicate_always_commits() -> None:
    p = load_problem_text(OPAQUE_PINNED, "opaque.yaml")
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    assert prog.op("load_mask_tile").when == "opaque"
    assert all(not s.gate for pt in prog.parts for s in pt.stmts if isinstance(s, CommitStmt))
    assert any("zero-fill" in n for n in prog.notes)
    assert sim_errors(p, g, prog) == []
    naive = lower(p, g, schedule_from_pins(p, g), predicate_strategy="naive")
    assert {s.gate for pt in naive.parts for s in pt.stmts if isinstance(s, CommitStmt)} == {(), ("load_mask_tile",)}
    assert sim_errors(p, g, naive) != []


def test_explicit_dep_on_async_op_gets_a_wait() -> None:
    text = """
name: dep
loop: {var: k, trip_count: 8}
buffers:
  A_s: {space: shared, bytes: 64}
  R: {space: register, bytes: 64}
ops:
  - {name: load, unit: dma, writes: [A_s], latency: 100}
  - {name: other, unit: alu, writes: [R], latency: 4}
deps: [{from: load, to: other, distance: 0}]
target: {shared_bytes: 1024, units: {dma: {async: true}, alu: {}}}
schedule: {stage: [0, 2], async_stages: [0]}
"""
    p = load_problem_text(text, "dep.yaml")
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    # Nobody reads the single slot of A_s, so each load must finish before the next one
    # writes it (else the older copy may land last): wait(0, 0) before load, which also
    # completes the load that 'other' depends on two steps later.
    assert _waits(prog, "body") == [(0, "0", "load")]
    from synth.verify import verify_program

    assert verify_program(prog, tightness=False, smt2=False).ok
    # With a reader keeping A_s's versions apart, the explicit dependence gets its own wait.
    read = text.replace("  - {name: other, unit: alu, writes: [R], latency: 4}",
                        "  - {name: other, unit: alu, writes: [R], latency: 4}\n"
                        "  - {name: use, unit: alu, reads: [A_s], latency: 4}")
    read = read.replace("schedule: {stage: [0, 2], async_stages: [0]}", "schedule: {stage: [0, 2, 2], async_stages: [0]}")
    p2 = load_problem_text(read, "dep2.yaml")
    g2 = build_graph(p2)
    prog2 = lower(p2, g2, schedule_from_pins(p2, g2))
    assert _waits(prog2, "body") == [(0, "2", "other")]
    assert _waits(prog2, "epilogue") == [(0, "1 - i", "other")]
    assert verify_program(prog2, tightness=False, smt2=False).ok


def test_no_pipelining_max_stage_zero() -> None:
    text = (PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace("stage: [0, 1]", "stage: [0, 0]")
    p = load_problem_text(text, "flat.yaml")
    g = build_graph(p)
    prog = lower(p, g, schedule_from_pins(p, g))
    assert [to_str(pt.extent) for pt in prog.parts] == ["0", "16", "0"]
    assert _shape(prog, "body") == ["produce_B", "commit(0)", "wait(0, 0)", "consume_B"]
    assert prog.part("prologue").stmts == () and prog.part("epilogue").stmts == ()


def test_pretty_condition() -> None:
    assert to_str(pretty_condition(parse("i - 2 >= 0"))) == "2 <= i"
    assert to_str(pretty_condition(parse("i + 1 <= 1"))) == "i < 1"
    assert to_str(pretty_condition(parse("i + 3 + 3 < T"))) == "i + 6 < T"
    assert to_str(pretty_condition(parse("!(i < 2)"))) == "2 <= i"


# ---------------------------------------------------------------------------------------------
# random schedules
# ---------------------------------------------------------------------------------------------

FLAGS = [{}, {"symbolic": True}, {"predicated": True, "symbolic": True}, {"predicated": True},
         {"hideable": False, "symbolic": True}, {"async_frac": 0.7}]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n_ops=st.integers(2, 7), flags=st.sampled_from(FLAGS),
       strategy=st.sampled_from(["auto", "always_commit"]))
def test_random_schedules(seed: int, n_ops: int, flags: dict, strategy: str) -> None:
    """Every op of every iteration issued once, in dependence order; every wait count is
    non-negative where it runs; every read sees the finished write of its version; no
    async read's slot is overwritten; program.json round-trips."""
    p = random_problem(seed, n_ops, **flags)
    g = build_graph(p)
    try:
        sched = random_schedule(p, g, seed)
    except ValueError:
        return
    prog = lower(p, g, sched, predicate_strategy=strategy)
    assert program_from_json(program_to_json(prog)) == prog
    assert sim_errors(p, g, prog, patterns=3) == []
    for w in prog.waits:
        assert w.reason and w.before in {o.name for o in p.ops}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n_ops=st.integers(2, 7), flags=st.sampled_from(FLAGS),
       strategy=st.sampled_from(["auto", "always_commit"]), short=st.integers(1, 4), symbolic=st.booleans())
def test_random_schedules_short_loops(seed: int, n_ops: int, flags: dict, strategy: str, short: int,
                                      symbolic: bool) -> None:
    """The random schedules again with a trip count from 1 to S + 1 (fixed, or the least of a
    symbolic T), simulated at every T up to S + 2."""
    p = random_problem(seed, n_ops, **flags)
    g = build_graph(p)
    try:
        sched = random_schedule(p, g, seed)
    except ValueError:
        return
    t = min(short, sched.max_stage + 1)
    q = _with_trip(p, "T", t) if symbolic or p.loop.symbolic else _with_trip(p, t)
    prog = lower(q, g, sched, predicate_strategy=strategy)
    assert program_from_json(program_to_json(prog)) == prog
    assert short_sim_errors(q, g, prog, patterns=2) == []


def test_random_body_waits_are_tight() -> None:
    """On unpredicated random schedules, one more in flight at a body wait is unsafe."""
    checked = 0
    for seed in range(12):
        p = random_problem(seed, 3 + seed % 5)
        g = build_graph(p)
        prog = lower(p, g, random_schedule(p, g, seed))
        for k, w in enumerate(prog.waits):
            if w.part != "body":
                continue
            looser = prog.with_wait(k, in_flight=Bin("+", w.in_flight, Num(1)))
            assert simulate(looser, p.loop.trip_count).errors, f"{p.name}: wait before {w.before}"
            checked += 1
    assert checked >= 5


def test_gemm_problem_symbolic_trip_from_one() -> None:
    """A kind: gemm problem's k-tile loop for T = ceil(K / BK) >= 1: one program for every K,
    proved by Z3 for all T >= 1 and run by the oracle at T = 1 .. S + 2."""
    from synth.verify import oracle, verify_program

    p, g, s = _load("gemm-128x128x32-f16")
    prog = lower(_with_trip(p, "T", 1), g, s)
    assert to_str(prog.part("prologue").extent) == f"min(T, {prog.max_stage})"
    r = verify_program(prog, smt2=False)
    assert r.ok, r.render()
    for T in range(1, prog.max_stage + 3):
        assert not oracle.check(prog, T).violations, T
    assert short_sim_errors(_with_trip(p, "T", 1), g, prog, patterns=1) == []


CLAMP = """
name: clamp
loop: {var: k, trip_count: 64}
buffers:
  C0: {space: register, bytes: 64, carried: true}
  S0: {space: shared, bytes: 64}
  R0: {space: register, bytes: 64}
  S1: {space: shared, bytes: 64}
  S2: {space: shared, bytes: 64}
  R1: {space: register, bytes: 64}
  R2: {space: register, bytes: 64}
ops:
  - {name: load_0, unit: cp_async, writes: [S0], latency: 400}
  - {name: s2r_0, unit: lsu, reads: [S0], writes: [R0], latency: 30}
  - {name: load_1, unit: cp_async, writes: [S1], latency: 400}
  - {name: load_2, unit: cp_async, writes: [S2], latency: 400}
  - {name: s2r_1, unit: lsu, reads: [S2], writes: [R1], latency: 30}
  - {name: s2r_2, unit: lsu, reads: [S1], writes: [R2], latency: 30}
  - {name: mma_0, unit: tensor, reads: [R0, R1, R2, C0], writes: [C0], latency: 64}
target:
  shared_bytes: 65536
  registers_bytes: 65536
  units: {cp_async: {async: true}, lsu: {}, tensor: {}}
schedule: {stage: [1, 2, 3, 0, 1, 3, 3], order: [4, 1, 2, 0, 3, 5, 6], async_stages: [0, 1, 3]}
"""


def test_short_loop_count_depending_on_T_is_a_clamp() -> None:
    """Copies committed in stages 1 and 3 as well as 0: in a loop that may run once, the
    groups committed after s2r_1's in the epilogue depend on T. Their exact sum
    ((2 <= i + T) + (3 <= i + T) + (4 <= i + T), under i < 1) is written min(i + T - 1, 3),
    proved equal by Z3, and the program is correct at every T."""
    from synth.verify import verify_program

    p = load_problem_text(CLAMP, "clamp.yaml")
    g = build_graph(p)
    q = _with_trip(p, "T", 1)
    prog = lower(q, g, schedule_from_pins(p, g))
    assert (0, "min(i + T - 1, 3)", "s2r_1") in _waits(prog, "epilogue")
    assert short_sim_errors(q, g, prog) == []
    assert verify_program(prog, tightness=False, smt2=False).ok
    # at least S + 1 iterations: no count depends on T
    long_ = lower(_with_trip(p, "T", 4), g, schedule_from_pins(p, g))
    assert all("T" not in c for _, c, _ in _waits(long_, "epilogue")), _waits(long_, "epilogue")

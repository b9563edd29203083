"""Explicit-state oracle: run a program for one concrete trip count, no solver.

Input: a :class:`~synth.program.Program`, a trip count ``T`` and a value for every
opaque predicate instance (``pred(op, iteration)``; :func:`check` enumerates them
all when there are few). Output: the violated obligations, named exactly like the
solver's (:mod:`synth.verify.obligations`), and readable traces.

Three levels, each checked against the next by the tests:

1. :func:`execute` runs the statements in order. Control flow (guards,
   predicates, which commits and waits run, each wait's count) is deterministic
   once ``T`` and the predicates are fixed; only *when* async effects happen is
   not. For each committed group it records the wait that first forces it
   (FIFO: the wait leaves at most ``n`` of the newest groups in flight).
2. :func:`analyze` judges the worst case: every group completes as late as the
   waits allow (just before the forcing wait returns; never if nothing forces it
   or it was never committed), while async writes may land and async reads may
   sample at any time between issue and completion. Then an access is safe
   exactly when its interval is ordered against the conflicting ones. Mode
   ``"obligations"`` checks the obligations as the solver states them (RAW,
   WAR/WAW against version ``V - M``); mode ``"exact"`` checks the ground
   truth: the next write to land on the slot, whatever its version distance.
3. :func:`explore` needs no worst-case argument: a depth-first search over all
   interleavings of statement steps, group completions (FIFO, a group completes
   only after its ops' writes landed and reads sampled), write landings and read
   samples, with memoised states, watching what each read actually sees and
   whether a write lands over newer data. Exponential; for tiny programs only,
   where it justifies level 2's worst case.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Union

from ..expr import evaluate, parse, to_str
from ..program import CommitStmt, OpStmt, Program, WaitStmt

INF = 1 << 60

Pred = Union[Callable[[str, int], bool], Mapping[tuple[str, int], bool]]


@dataclass(eq=False)
class Inst:
    """One executed op statement instance."""

    uid: int
    ev: int
    """Event index of its issue."""
    step: int
    part: str
    i: int
    pos: int
    op: str
    iteration: int
    is_async: bool
    reads: tuple[tuple[str, int, int, Optional[str]], ...]
    """``(buffer, version, slot, producer)``."""
    writes: tuple[tuple[str, int, int], ...]
    group: Optional["Group"] = None

    def where(self) -> str:
        return f"{self.part}:{self.pos}"


@dataclass(eq=False)
class Group:
    seq: int
    """Position in its queue (0 = first group ever committed to it)."""
    queue: int
    ev: int
    step: int
    ops: list[Inst]
    done: int = INF
    """Event index of the wait that forces it (INF: never forced)."""


@dataclass(eq=False)
class Event:
    ev: int
    step: int
    part: str
    i: int
    pos: int
    kind: str
    inst: Optional[Inst] = None
    group: Optional[Group] = None
    wait: int = -1
    queue: int = -1
    count: int = 0
    committed: int = 0
    """Groups committed to the queue before this wait."""
    in_flight: int = 0
    """Groups not yet forced before this wait."""
    forced: tuple[Group, ...] = ()


@dataclass
class Execution:
    program: Program
    T: int
    preds: dict[tuple[str, int], bool]
    """Opaque predicate values that were consulted."""
    events: list[Event]
    insts: list[Inst]
    groups: dict[int, list[Group]]
    count_bad: list[Event]

    def done(self, inst: Inst) -> int:
        """When an op instance is surely finished: its issue (sync) or its group's forcing wait."""
        if not inst.is_async:
            return inst.ev
        return inst.group.done if inst.group is not None else INF


@dataclass(frozen=True)
class Violation:
    key: str
    kind: str
    step: int
    part: str
    i: int
    T: int
    message: str
    anchor: int
    """Event index of the anchor (read, write or wait)."""
    partner: int = -1
    """Event index of the partner instance (-1: none)."""
    preds: tuple[tuple[str, int, bool], ...] = ()


def _pred_fn(pred: Optional[Pred], record: dict[tuple[str, int], bool]) -> Callable[[str, int], bool]:
    def fn(op: str, it: int) -> bool:
        key = (op, it)
        if key in record:
            return record[key]
        if pred is None:
            v = True
        elif callable(pred):
            v = bool(pred(op, it))
        else:
            v = bool(pred.get(key, True))
        record[key] = v
        return v
    return fn


def execute(program: Program, T: int, pred: Optional[Pred] = None) -> Execution:
    """Run ``program`` with trip count ``T``; ``pred`` gives opaque predicate values (default True)."""
    tsym = program.trip_count if isinstance(program.trip_count, str) else None
    tenv = {tsym: T} if tsym else {}
    ops = {o.name: o for o in program.ops}
    whens = {o.name: (None if o.when in (None, "opaque") else parse(o.when)) for o in program.ops}
    record: dict[tuple[str, int], bool] = {}
    pfn = _pred_fn(pred, record)

    def when(op: str, it: int) -> bool:
        o = ops[op]
        if o.when is None:
            return True
        if o.when == "opaque":
            return pfn(op, it)
        env = dict(tenv)
        env[program.loop_var] = it
        return bool(evaluate(whens[op], env))

    events: list[Event] = []
    insts: list[Inst] = []
    groups: dict[int, list[Group]] = {q: [] for q in range(len(program.queues))}
    count_bad: list[Event] = []
    off = 0
    for part in program.parts:
        extent = int(evaluate(part.extent, tenv))
        commit_of = _commit_positions(part.stmts)
        for i in range(max(extent, 0)):
            j = off + i
            env = dict(tenv)
            env[part.var] = i
            pending: dict[int, list[Inst]] = {}
            for pos, s in enumerate(part.stmts):
                if s.guard is not None and not evaluate(s.guard, env):
                    continue
                if isinstance(s, OpStmt):
                    it = int(evaluate(s.iteration, env))
                    if not when(s.op, it):
                        continue
                    o = ops[s.op]
                    reads = tuple((a.buffer, int(evaluate(a.version, env)), int(evaluate(a.slot, env)), a.producer)
                                  for a in s.reads)
                    writes = tuple((a.buffer, int(evaluate(a.version, env)), int(evaluate(a.slot, env)))
                                   for a in s.writes)
                    inst = Inst(len(insts), len(events), j, part.name, i, pos, s.op, it, o.is_async, reads, writes)
                    insts.append(inst)
                    events.append(Event(len(events), j, part.name, i, pos, "op", inst=inst))
                    if o.is_async and commit_of.get(pos) is not None:
                        pending.setdefault(commit_of[pos], []).append(inst)
                elif isinstance(s, CommitStmt):
                    members = pending.pop(pos, [])
                    if s.gate and not any(when(g, j - ops[g].stage) for g in s.gate):
                        continue
                    g = Group(len(groups[s.queue]), s.queue, len(events), j, members)
                    for m in members:
                        m.group = g
                    groups[s.queue].append(g)
                    events.append(Event(len(events), j, part.name, i, pos, "commit", group=g, queue=s.queue))
                elif isinstance(s, WaitStmt):
                    w = program.waits[s.wait]
                    n = int(evaluate(w.in_flight, env))
                    q = w.queue
                    flying = [g for g in groups[q] if g.done == INF]
                    keep = max(n, 0)
                    ev = Event(len(events), j, part.name, i, pos, "wait", wait=s.wait, queue=q, count=n,
                               committed=len(groups[q]), in_flight=len(flying))
                    forced = flying[:max(len(flying) - keep, 0)]
                    for g in forced:
                        g.done = ev.ev
                    ev.forced = tuple(forced)
                    events.append(ev)
                    if n < 0:
                        count_bad.append(ev)
        off += max(extent, 0)
    return Execution(program, T, record, events, insts, groups, count_bad)


def _commit_positions(stmts) -> dict[int, Optional[int]]:
    """For each async-able op statement, the position of the commit closing its group."""
    out: dict[int, Optional[int]] = {}
    for pos, s in enumerate(stmts):
        if isinstance(s, OpStmt) and s.group is not None:
            out[pos] = next((k for k in range(pos + 1, len(stmts))
                             if isinstance(stmts[k], CommitStmt) and stmts[k].group == s.group), None)
    return out


# --------------------------------------------------------------------------------------------
# worst-case analysis
# --------------------------------------------------------------------------------------------

def analyze(ex: Execution, mode: str = "obligations") -> dict[str, Violation]:
    """Violated obligations of one execution, first occurrence per key.

    ``mode="obligations"``: keys are the solver's obligation ids. ``mode="exact"``:
    ground truth, keyed coarsely (``raw:part:pos:rA``, ``war:part:pos:rA`` by the
    read, ``waw:part:pos:wA`` by the newer write, ``count:part:pos``).
    """
    if mode not in ("obligations", "exact"):
        raise ValueError(mode)
    program = ex.program
    mult = {b.name: b.multiplicity for b in program.buffers}
    opnames = {o.name for o in program.ops}
    by_op_iter: dict[tuple[str, int], list[Inst]] = {}
    readers: dict[tuple[str, int], list[tuple[Inst, int]]] = {}
    writers: dict[tuple[str, int], list[tuple[Inst, int]]] = {}
    for inst in ex.insts:
        by_op_iter.setdefault((inst.op, inst.iteration), []).append(inst)
        for a, (b, v, _s, _p) in enumerate(inst.reads):
            readers.setdefault((b, v), []).append((inst, a))
        for a, (b, v, _s) in enumerate(inst.writes):
            writers.setdefault((b, v), []).append((inst, a))
    out: dict[str, Violation] = {}
    preds = tuple(sorted((k[0], k[1], v) for k, v in ex.preds.items()))

    def add(key: str, kind: str, anchor: Inst | Event, partner: Optional[Inst], msg: str) -> None:
        if key in out:
            return
        ev = anchor.ev
        e = ex.events[ev]
        out[key] = Violation(key, kind, e.step, e.part, e.i, ex.T, msg, ev,
                             partner.ev if partner is not None else -1, preds)

    def needed(prod: Optional[str], version: int) -> bool:
        return prod is None or prod not in opnames or bool(by_op_iter.get((prod, version)))

    for e in ex.count_bad:
        add(f"count:{e.part}:{e.pos}", "count-nonnegative", e, None,
            f"async_wait_queue({e.queue}, {to_str(program.waits[e.wait].in_flight)}) has count {e.count}")

    for r in ex.insts:
        for a, (b, v, _slot, prod) in enumerate(r.reads):
            if prod is None or prod not in opnames:
                continue
            for p in by_op_iter.get((prod, v), ()):
                if ex.done(p) > r.ev:
                    add(f"raw:{r.where()}:r{a}", "raw", r, p,
                        f"{r.op} (iteration {r.iteration}) reads {b} version {v} before {p.op}'s write of it "
                        f"is complete")
    if mode == "obligations":
        for w in ex.insts:
            for a, (b, v, _slot) in enumerate(w.writes):
                m = mult[b]
                for r, ra in readers.get((b, v - m), ()):
                    if r is w or not needed(r.reads[ra][3], v - m):
                        continue
                    if ex.done(r) > w.ev:
                        add(f"war:{w.where()}:w{a}<-{r.where()}:r{ra}", "war", w, r,
                            f"{w.op} (iteration {w.iteration}) overwrites {b} slot {v % m} (version {v}) "
                            f"while {r.op}'s read of version {v - m} may still be pending")
                for p, pa in writers.get((b, v - m), ()):
                    if p is w:
                        continue
                    if ex.done(p) > w.ev:
                        add(f"waw:{w.where()}:w{a}<-{p.where()}:w{pa}", "waw", w, p,
                            f"{w.op} (iteration {w.iteration}) writes {b} slot {v % m} (version {v}) while "
                            f"{p.op}'s write of version {v - m} may still land after it")
        return out
    # exact: the next occupant / the previous occupant of the slot, whatever its distance
    for r in ex.insts:
        for a, (b, v, _slot, prod) in enumerate(r.reads):
            if not needed(prod, v) or prod is None:
                continue
            m = mult[b]
            later = [(w, wa) for (bb, vv), lst in writers.items() if bb == b and vv > v and (vv - v) % m == 0
                     for (w, wa) in lst if w is not r]
            if not later:
                continue
            w, _wa = min(later, key=lambda x: x[0].ev)
            if w.ev < ex.done(r):
                add(f"war:{r.where()}:r{a}", "war", r, w,
                    f"{w.op} overwrites {b} version {v} before {r.op}'s read of it is done")
    for w in ex.insts:
        for a, (b, v, _slot) in enumerate(w.writes):
            m = mult[b]
            older = [(vv, p) for (bb, vv), lst in writers.items() if bb == b and vv < v and (v - vv) % m == 0
                     for (p, _pa) in lst if p is not w]
            for vv, p in sorted(older, key=lambda x: -x[0]):
                if ex.done(p) > w.ev:
                    add(f"waw:{w.where()}:w{a}", "waw", w, p,
                        f"{p.op}'s write of {b} version {vv} may land after {w.op}'s write of version {v}")
    return out


def coarse(key: str) -> str:
    """The exact-mode key of an obligation id (``war``: the reader; ``waw``: the newer write)."""
    kind = key.split(":", 1)[0]
    if kind in ("war", "waw"):
        anchor, partner = key.split(":", 1)[1].split("<-")
        if kind == "war":
            return f"war:{partner}"
        part, pos, acc = anchor.split(":")
        return f"waw:{part}:{pos}:{acc}"
    return key


# --------------------------------------------------------------------------------------------
# brute force
# --------------------------------------------------------------------------------------------

def explore(ex: Execution, max_states: int = 200_000) -> set[str]:
    """Every interleaving of one execution's async effects; returns exact-mode keys violated.

    Raises RuntimeError past ``max_states`` states.
    """
    program = ex.program
    opnames = {o.name for o in program.ops}
    by_op_iter: set[tuple[str, int]] = {(x.op, x.iteration) for x in ex.insts}
    nq = len(program.queues)
    events = ex.events
    # groups committed to each queue before event index k
    committed_before = [[0] * nq]
    for e in events:
        row = list(committed_before[-1])
        if e.kind == "commit":
            row[e.queue] += 1
        committed_before.append(row)
    found: set[str] = set()
    uid_inst = {x.uid: x for x in ex.insts}

    prod_writes: dict[tuple[str, int, str], list[tuple[Inst, int]]] = {}
    for x in ex.insts:
        for a, (b, v, _s) in enumerate(x.writes):
            prod_writes.setdefault((x.op, v, b), []).append((x, a))

    def read_check(inst: Inst, a: int, mem: dict, pc: int, pw: frozenset) -> None:
        """What the read sees: stale (its producer's write has not landed: RAW), newer data (WAR);
        older data over a landed producer write is the WAW reported when it landed."""
        b, v, slot, prod = inst.reads[a]
        if prod is None or prod not in opnames or (prod, v) not in by_op_iter:
            return
        c = mem.get((b, slot))
        if c is not None and c[0] == v:
            return
        landed = all(p.ev < pc and (p.uid, pa) not in pw for p, pa in prod_writes.get((prod, v, b), ()))
        if not landed:
            found.add(f"raw:{inst.where()}:r{a}")
        elif c is not None and c[0] > v:
            found.add(f"war:{inst.where()}:r{a}")

    def land(inst: Inst, a: int, mem: dict) -> None:
        b, v, slot = inst.writes[a]
        c = mem.get((b, slot))
        if c is not None and c[0] > v:
            newer = uid_inst[c[1]]
            found.add(f"waw:{newer.where()}:w{c[2]}")
        mem[(b, slot)] = (v, inst.uid, a)

    start = (0, (0,) * nq, frozenset(), frozenset(), ())
    seen = {start}
    stack = [start]
    while stack:
        pc, done, pw, pr, memt = stack.pop()
        succ = []
        if pc < len(events):
            e = events[pc]
            mem = dict(memt)
            if e.kind == "op":
                inst = e.inst
                assert inst is not None
                if inst.is_async:
                    npw = pw | {(inst.uid, a) for a in range(len(inst.writes))}
                    npr = pr | {(inst.uid, a) for a in range(len(inst.reads))}
                    succ.append((pc + 1, done, npw, npr, memt))
                else:
                    for a in range(len(inst.reads)):
                        read_check(inst, a, mem, pc, pw)
                    for a in range(len(inst.writes)):
                        land(inst, a, mem)
                    succ.append((pc + 1, done, pw, pr, tuple(sorted(mem.items()))))
            elif e.kind == "commit":
                succ.append((pc + 1, done, pw, pr, memt))
            else:
                keep = max(e.count, 0)
                if done[e.queue] >= committed_before[pc][e.queue] - keep:
                    succ.append((pc + 1, done, pw, pr, memt))
        for q in range(nq):
            if done[q] < committed_before[pc][q]:
                g = ex.groups[q][done[q]]
                if all((m.uid, a) not in pw for m in g.ops for a in range(len(m.writes))) and \
                        all((m.uid, a) not in pr for m in g.ops for a in range(len(m.reads))):
                    nd = list(done)
                    nd[q] += 1
                    succ.append((pc, tuple(nd), pw, pr, memt))
        for (uid, a) in pw:
            mem = dict(memt)
            land(uid_inst[uid], a, mem)
            succ.append((pc, done, pw - {(uid, a)}, pr, tuple(sorted(mem.items()))))
        for (uid, a) in pr:
            read_check(uid_inst[uid], a, dict(memt), pc, pw)
            succ.append((pc, done, pw, pr - {(uid, a)}, memt))
        for s in succ:
            if s not in seen:
                seen.add(s)
                if len(seen) > max_states:
                    raise RuntimeError(f"more than {max_states} states")
                stack.append(s)
    for e in ex.count_bad:
        found.add(f"count:{e.part}:{e.pos}")
    return found


# --------------------------------------------------------------------------------------------
# all predicate assignments, verdicts, traces
# --------------------------------------------------------------------------------------------

@dataclass
class OracleResult:
    T: int
    violations: dict[str, Violation]
    runs: int
    exhaustive: bool
    """All opaque predicate assignments were tried (else a random sample)."""
    opaque: tuple[tuple[str, int], ...] = ()


def opaque_points(program: Program, T: int) -> tuple[tuple[str, int], ...]:
    """The opaque predicate instances an execution with trip count ``T`` consults."""
    return tuple(sorted(execute(program, T).preds))


def assignments(points: tuple[tuple[str, int], ...], limit: int = 4096,
                seed: int = 0) -> tuple[Iterable[dict[tuple[str, int], bool]], bool]:
    """All assignments of ``points`` (or ``limit`` random ones); second item: exhaustive."""
    if 2 ** len(points) <= limit:
        return ({p: v for p, v in zip(points, bits)} for bits in itertools.product((False, True),
                                                                                   repeat=len(points))), True
    rng = random.Random(seed)
    return ({p: rng.random() < 0.5 for p in points} for _ in range(limit)), False


def check(program: Program, T: int, *, mode: str = "obligations", limit: int = 4096,
          brute_force: bool = False) -> OracleResult:
    """Violations over every opaque predicate assignment (first found per key).

    ``brute_force`` uses :func:`explore` (exact-mode keys) instead of :func:`analyze`.
    """
    points = opaque_points(program, T)
    gen, exhaustive = assignments(points, limit)
    out: dict[str, Violation] = {}
    runs = 0
    for asg in gen:
        runs += 1
        ex = execute(program, T, asg)
        if brute_force:
            for k in explore(ex):
                out.setdefault(k, Violation(k, k.split(":")[0], 0, "", 0, T, "found by exploration", -1))
        else:
            for k, v in analyze(ex, mode).items():
                out.setdefault(k, v)
    return OracleResult(T, out, runs, exhaustive, points)


def blame(program: Program, key: str) -> Optional[int]:
    """The wait an obligation id is charged to (same rule as the solver side; no solver here)."""
    kind, rest = key.split(":", 1)
    if kind == "wellformed":
        return None
    anchor = rest.split("<-")[0]
    part, pos = anchor.split(":")[:2]
    stmts = program.part(part).stmts
    k = int(pos)
    if kind == "count":
        s = stmts[k]
        return s.wait if isinstance(s, WaitStmt) else None
    if kind == "raw":
        acc = int(anchor.split(":")[2][1:])
        s = stmts[k]
        assert isinstance(s, OpStmt)
        prod = s.reads[acc].producer
        queue = program.commit_queue(prod) if prod is not None and program.op(prod).is_async else None
    else:
        ppart, ppos = rest.split("<-")[1].split(":")[:2]
        ps = program.part(ppart).stmts[int(ppos)]
        assert isinstance(ps, OpStmt)
        queue = program.commit_queue(ps.op) if program.op(ps.op).is_async else None
    if queue is None:
        return None
    for x in range(k - 1, -1, -1):
        s = stmts[x]
        if isinstance(s, WaitStmt) and program.waits[s.wait].queue == queue:
            return s.wait
    return None




def wait_verdicts(program: Program, keys: Iterable[str]) -> tuple[dict[int, str], set[str]]:
    """Per wait ``"proven"``/``"refuted"`` from violated obligation ids, and the global ones."""
    out = {k: "proven" for k in range(len(program.waits))}
    glob: set[str] = set()
    for key in keys:
        w = blame(program, key)
        if w is None:
            glob.add(key)
        else:
            out[w] = "refuted"
    return out, glob


def explain(ex: Execution, v: Violation) -> list[str]:
    """Trace of the steps from the partner's to the anchor's, with queue state at each wait."""
    lo = ex.events[v.partner].step if v.partner >= 0 else ex.events[v.anchor].step
    hi = ex.events[v.anchor].step
    lo = min(lo, hi)
    partner = ex.events[v.partner] if v.partner >= 0 else None
    lines: list[str] = []
    cur = None
    for e in ex.events:
        if e.step < lo or e.step > hi or (e.step == hi and e.ev > v.anchor):
            continue
        if e.step != cur:
            cur = e.step
            lines.append(f"step {e.step} ({e.part}, i = {e.i}):")
        mark = "  <-- " + v.kind.upper() if e.ev == v.anchor else ""
        if e.kind == "op":
            x = e.inst
            assert x is not None
            acc = [f"reads {b}[{s}] (version {ver})" for b, ver, s, _p in x.reads]
            acc += [f"writes {b}[{s}] (version {ver})" for b, ver, s in x.writes]
            how = "issues async" if x.is_async else "runs"
            grp = ""
            if x.is_async:
                grp = (f"; in group #{x.group.seq} of queue {x.group.queue}" if x.group is not None
                       else "; its group is never committed")
            lines.append(f"  {x.op} (iteration {x.iteration}) {how}: {', '.join(acc) or 'no accesses'}{grp}{mark}")
        elif e.kind == "commit":
            g = e.group
            assert g is not None
            names = ", ".join(f"{m.op} it {m.iteration}" for m in g.ops) or "empty"
            lines.append(f"  async_commit_queue({g.queue}): group #{g.seq} ({names})")
        else:
            after = min(e.in_flight, max(e.count, 0))
            forced = (f"forces group{'s' if len(e.forced) > 1 else ''} "
                      f"#{e.forced[0].seq}{'..#' + str(e.forced[-1].seq) if len(e.forced) > 1 else ''}"
                      if e.forced else "forces nothing")
            lines.append(f"  async_wait_queue({e.queue}, {e.count}): {_n(e.committed, 'group')} committed so far, "
                         f"{e.in_flight} not yet forced; {forced}; up to {after} may stay in flight{mark}")
    if partner is not None and partner.inst is not None and partner.inst.is_async:
        g = partner.inst.group
        if g is None:
            lines.append(f"  => {partner.inst.op} (iteration {partner.inst.iteration})'s group was never committed")
        elif g.done > v.anchor:
            lines.append(f"  => group #{g.seq} of queue {g.queue} ({partner.inst.op} iteration "
                         f"{partner.inst.iteration}) may still be in flight here")
    return lines


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


__all__ = ["execute", "analyze", "explore", "check", "coarse", "blame", "wait_verdicts", "explain",
           "Execution", "Violation", "OracleResult", "opaque_points", "assignments", "INF"]

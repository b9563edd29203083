"""A small independent simulator of lowered programs, for the lowering's tests.

Runs a :class:`~synth.program.Program` for one concrete trip count with the
laziest queue RFC 0077 allows (a committed group completes only when a wait
forces it) and reports every read that does not see the finished write of the
version it names, every write into a slot an unfinished async read still
needs, and every negative wait count. It knows nothing of how the program was
lowered; the real proofs are the verifier's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Optional

from synth.expr import Var, evaluate, parse
from synth.program import CommitStmt, OpStmt, Program, WaitStmt


@dataclass
class _Inst:
    """One committed (or open) group instance."""

    queue: int
    writes: list = field(default_factory=list)
    reads: list = field(default_factory=list)
    done: bool = False


@dataclass
class SimResult:
    errors: list[str]
    issued: list[tuple[str, int]]
    """(op, iteration) in issue order."""
    skipped: set[tuple[str, int]]
    """(op, iteration) predicated off."""


def simulate(prog: Program, T: int, opaque: Optional[Callable[[str, int], bool]] = None) -> SimResult:
    """Run ``prog`` with trip count ``T``; ``opaque(op, iteration)`` decides opaque predicates."""
    opaque = opaque or (lambda op, it: True)
    sym = prog.trip_count if isinstance(prog.trip_count, str) else None
    errors: list[str] = []
    issued: list[tuple[str, int]] = []
    skipped: set[tuple[str, int]] = set()
    content: dict[tuple[str, int], tuple[Optional[int], Optional[_Inst]]] = {}
    pending_reads: dict[tuple[str, int], list[_Inst]] = {}
    inflight: dict[int, list[_Inst]] = {}
    open_: dict[int, _Inst] = {}
    mult = {b.name: b.multiplicity for b in prog.buffers}

    def complete(inst: _Inst) -> None:
        inst.done = True

    def pred_on(op: str, it: int) -> bool:
        w = prog.op(op).when
        if w is None:
            return True
        if w == "opaque":
            return bool(opaque(op, it))
        env = {prog.loop_var: it}
        if sym:
            env[sym] = T
        return bool(evaluate(parse(w), env))

    for part in prog.parts:
        base = {sym: T} if sym else {}
        ext = int(evaluate(part.extent, base))
        its_of_group: dict[int, tuple[list[str], int]] = {}
        for i in range(ext):
            env = dict(base)
            env[part.var] = i
            where = f"{part.name} {part.var}={i} (T={T})"
            for s in part.stmts:
                if s.guard is not None and not evaluate(s.guard, env):
                    continue
                if isinstance(s, WaitStmt):
                    w = prog.waits[s.wait]
                    n = int(evaluate(w.in_flight, env))
                    if n < 0:
                        errors.append(f"{where}: wait before {w.before} has count {n}")
                        n = 0
                    q = inflight.setdefault(w.queue, [])
                    while len(q) > n:
                        complete(q.pop(0))
                elif isinstance(s, OpStmt):
                    it = int(evaluate(s.iteration, env))
                    po = prog.op(s.op)
                    if not 0 <= it < T:
                        errors.append(f"{where}: {s.op} runs iteration {it} outside 0..{T - 1}")
                    if s.group is not None:
                        names, _ = its_of_group.get(s.group, ([], it))
                        its_of_group[s.group] = (names + [s.op], it)
                    if not pred_on(s.op, it):
                        skipped.add((s.op, it))
                        continue
                    issued.append((s.op, it))
                    inst = None
                    if po.is_async:
                        inst = open_.setdefault(s.group, _Inst(po.queue))
                    for a in s.reads:
                        ver, slot = int(evaluate(a.version, env)), int(evaluate(a.slot, env))
                        if slot != ver % mult[a.buffer]:
                            errors.append(f"{where}: {s.op} reads {a.buffer} version {ver} from slot {slot}")
                        have, by = content.get((a.buffer, slot), (None, None))
                        if ver < 0:
                            if have is not None:
                                errors.append(f"{where}: {s.op} reads the initial {a.buffer} but finds version {have}")
                        elif (a.producer, ver) in skipped:
                            pass
                        elif have != ver:
                            errors.append(f"{where}: {s.op} reads {a.buffer} version {ver} but slot {slot} holds {have}")
                        elif by is not None and not by.done:
                            errors.append(f"{where}: {s.op} reads {a.buffer} version {ver} before its async write completed")
                        if inst is not None:
                            inst.reads.append((a.buffer, slot))
                            pending_reads.setdefault((a.buffer, slot), []).append(inst)
                    for a in s.writes:
                        ver, slot = int(evaluate(a.version, env)), int(evaluate(a.slot, env))
                        if slot != ver % mult[a.buffer]:
                            errors.append(f"{where}: {s.op} writes {a.buffer} version {ver} to slot {slot}")
                        busy = [r for r in pending_reads.get((a.buffer, slot), []) if not r.done and r is not inst]
                        if busy:
                            errors.append(f"{where}: {s.op} overwrites {a.buffer} slot {slot} while an async read of it is pending")
                        content[(a.buffer, slot)] = (ver, inst)
                        if inst is not None:
                            inst.writes.append((a.buffer, slot))
                elif isinstance(s, CommitStmt):
                    inst = open_.pop(s.group, None) or _Inst(s.queue)
                    names, it = its_of_group.get(s.group, ([], 0))
                    go = True
                    if s.gate:
                        go = any(pred_on(op, it) for op in s.gate if op in names)
                    if go:
                        inflight.setdefault(s.queue, []).append(inst)
                    elif inst.writes or inst.reads:
                        errors.append(f"{where}: group {s.group} issued ops but was not committed")
    return SimResult(errors, issued, skipped)


def check_order(prog: Program, problem, graph, T: int, res: SimResult) -> list[str]:
    """Every op of every iteration 0..T-1 issued exactly once (or predicated off), in
    dependence order."""
    errs = []
    idx: dict[tuple[str, int], int] = {}
    for k, key in enumerate(res.issued):
        if key in idx:
            errs.append(f"{key} issued twice")
        idx[key] = k
    for o in problem.ops:
        for v in range(T):
            if (o.name, v) not in idx and (o.name, v) not in res.skipped:
                errs.append(f"{o.name} iteration {v} never runs")
    for e in graph.constraints():
        a, b = problem.ops[e.src].name, problem.ops[e.dst].name
        for v in range(T - e.distance):
            x, y = idx.get((a, v)), idx.get((b, v + e.distance))
            if x is not None and y is not None and (x > y or (x == y and e.src != e.dst)):
                errs.append(f"{b}({v + e.distance}) issued before {a}({v})")
    return errs


def opaque_patterns(seed: int) -> list[Callable[[str, int], bool]]:
    """All on, all off, and a few random data-dependent patterns."""
    out: list[Callable[[str, int], bool]] = [lambda op, it: True, lambda op, it: False]
    for k in range(3):
        rng = random.Random(seed * 31 + k)
        table: dict[tuple[str, int], bool] = {}
        out.append(lambda op, it, rng=rng, table=table: table.setdefault((op, it), rng.random() < 0.5))
    return out

"""Every proof obligation of a checked program, each as an SMT-LIB2 file (the negated claim).

Semantics (the one ``synth/program.py`` states): parts run in sequence, global
step ``j`` numbers their iterations; a statement instance at step ``j`` runs when
``j`` lies in its part (``off <= j < off + extent``), its guard holds at
``i = j - off``, and, for an op, the op's ``when`` holds at its iteration
``j - stage`` (an opaque ``when`` is a free Boolean per op and step). A commit
pushes its group when enabled and, if gated, when one gate op's ``when`` holds.
A group committed at point ``a`` is surely complete at a later point ``b`` iff a
wait on its queue, enabled strictly between them, had at least its count of
groups committed to the queue after ``a`` (FIFO completion, as late as allowed).

Each file declares ``T`` (the trip count: ``T = n``, or ``T >= min_trip_count``
when symbolic) and ``j`` (the anchor's step, free), defines the terms it needs
by name (``in.body.m2``: step ``j - 2`` is in the body; ``x.body.3.0``: statement
3 of the body runs at step ``j``; ``f.0...``: a group is complete), asserts the
domain and the negated claim, and ends with ``(check-sat)``: ``unsat`` proves it.

Obligations (ids as synth's prover names them; ``d`` is a constant derived from
stages and read distances, never from a written version):

* ``wellformed:extents``: every extent is ``>= 0``;
* ``wellformed:<part>``: iteration ``= j - stage``; where a statement is enabled,
  a read's version ``= iteration - distance``, a write's ``= iteration``, and
  ``slot = version mod multiplicity``;
* ``coverage:<op>``: every iteration ``0 <= v < T`` of every op runs in exactly
  one statement (at step ``v + stage``) unless its affine ``when`` is false there,
  and no other iteration runs;
* ``count:<part>:<k>``: the wait's count is ``>= 0`` wherever it runs;
* ``raw:<part>:<k>:r<a>``: when the read runs and the producer ran its version
  (``d = stage_reader + distance - stage_producer`` steps earlier), the producer is
  done: an async producer's group committed and complete, a synchronous one
  earlier in program order;
* ``war:...<-...:r<b>``: the write of version ``V`` (``M`` slots) comes after each
  read of ``V - M`` (whose producer ran) is done;
* ``waw:...<-...:w<b>``: ... after each write of ``V - M`` is done.

A pair whose partner is synchronous and earlier in program order at every
distance holds by program order and gets no file. An obligation is charged to
the last wait, in the anchor's part before the anchor, on the queue of the
async producer / reader / writer it waits for; otherwise it is global.

Part of the trusted base: imports nothing from synth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import expr as X
from .program import Program, Stmt


@dataclass(frozen=True)
class Obligation:
    id: str
    kind: str
    """``wellformed``, ``coverage``, ``count-nonnegative``, ``raw``, ``war`` or ``waw``."""
    wait: Optional[int]
    """The wait it is charged to (None: global)."""
    description: str
    smt2: str
    """The file: the negated claim, ``(check-sat)`` expects ``unsat``."""


def _r(r: int) -> str:
    return str(r) if r == 0 else (f"m{-r}" if r < 0 else f"p{r}")


def _step(r: int) -> str:
    return "j" if r == 0 else (f"(+ j {r})" if r > 0 else f"(- j {-r})")


class _File:
    """Named definitions of one file, in the order they are needed."""

    def __init__(self, prog: Program) -> None:
        self.p = prog
        self.defs: dict[str, str] = {}
        self.opaque: list[str] = []

    def define(self, name: str, sort: str, body) -> str:
        if name not in self.defs:
            text = body() if callable(body) else body
            self.defs[name] = f"(define-fun {name} () {sort} {text})"
        return name

    # -- parts and steps ----------------------------------------------------------------------
    def ext(self, part: str) -> str:
        env = {self.p.tsym: "T"} if self.p.tsym else {}
        return self.define(f"ext.{part}", "Int", lambda: X.smt(self.p.part(part).extent, env))

    def off(self, part: str) -> str:
        before = [q.name for q in self.p.parts[:[q.name for q in self.p.parts].index(part)]]
        if not before:
            return "0"
        return self.define(f"off.{part}", "Int", lambda: _sum([self.ext(q) for q in before]))

    def inp(self, part: str, r: int) -> str:
        def body():
            o, e, s = self.off(part), self.ext(part), _step(r)
            return f"(and (<= {o} {s}) (< {s} (+ {o} {e})))"
        return self.define(f"in.{part}.{_r(r)}", "Bool", body)

    def env(self, part: str, r: int) -> dict:
        i = self.define(f"i.{part}.{_r(r)}", "Int", lambda: f"(- {_step(r)} {self.off(part)})")
        env = {self.p.part(part).var: i}
        if self.p.tsym:
            env[self.p.tsym] = "T"
        return env

    def at(self, s: Stmt, e, r: int) -> str:
        return X.smt(e, self.env(s.part, r))

    def enabled(self, s: Stmt, r: int) -> str:
        """The statement's step is in its part and its guard holds."""
        def body():
            if s.guard is None:
                return self.inp(s.part, r)
            return f"(and {self.inp(s.part, r)} {self.at(s, s.guard, r)})"
        return self.define(f"e.{s.part}.{s.pos}.{_r(r)}", "Bool", body)

    def when(self, op: str, r: int) -> str:
        o = self.p.ops[op]
        if o.when is None:
            return "true"
        if o.when == "opaque":
            name = f"opq.{op}.{_r(r)}"
            if name not in self.opaque:
                self.opaque.append(name)
            return name
        env = {self.p.loop_var: f"(- {_step(r)} {o.stage})"}
        if self.p.tsym:
            env[self.p.tsym] = "T"
        return self.define(f"when.{op}.{_r(r)}", "Bool", lambda: X.smt(o.when, env))

    def runs(self, s: Stmt, r: int) -> str:
        """The statement instance executes (an op: also its ``when``; a commit: also its gate)."""
        if s.kind == "op":
            w = self.when(s.op, r)
            if w == "true":
                return self.enabled(s, r)
            return self.define(f"x.{s.part}.{s.pos}.{_r(r)}", "Bool", lambda: f"(and {self.enabled(s, r)} {w})")
        if s.kind == "commit" and s.gate:
            gates = " ".join(self.when(g, r) for g in s.gate)
            return self.define(f"x.{s.part}.{s.pos}.{_r(r)}", "Bool",
                               lambda: f"(and {self.enabled(s, r)} (or false {gates}))")
        return self.enabled(s, r)

    def count(self, s: Stmt, r: int) -> str:
        return self.define(f"n.{s.part}.{s.pos}.{_r(r)}", "Int", lambda: self.at(s, self.p.waits[s.wait].in_flight, r))

    def op_at(self, op: str, r: int) -> str:
        """Some statement of ``op`` runs at step ``j + r``."""
        return _or([self.runs(s, r) for s in _stmts_of(self.p, op)])

    # -- completion ---------------------------------------------------------------------------
    def forced(self, q: int, a: tuple, b: tuple) -> str:
        """The group committed to ``q`` at point ``a = (r, part, pos)`` is complete at point ``b``."""
        if not _before(a, b):
            return "false"
        aid = f"{a[1]}.{a[2]}.{_r(a[0])}"
        name = f"f.{q}.{aid}.{b[1]}.{b[2]}.{_r(b[0])}"
        if name in self.defs:
            return name
        total = "0"
        disj = []
        for r, s in _between(self.p, a, b):
            if s.kind == "commit" and s.queue == q:
                prev = total
                total = self.define(f"s.{q}.{aid}.{s.part}.{s.pos}.{_r(r)}", "Int",
                                    lambda: f"(+ {prev} (ite {self.runs(s, r)} 1 0))")
            elif s.kind == "wait" and self.p.waits[s.wait].queue == q:
                disj.append(f"(and {self.runs(s, r)} (>= {total} {self.count(s, r)}))")
        return self.define(name, "Bool", _or(disj))

    def done(self, s: Stmt, r: int, at: tuple) -> str:
        """The op instance ``s`` at step ``j + r`` is finished at point ``at``."""
        if not self.p.ops[s.op].is_async:
            return "true" if _before((r, s.part, s.pos), at) else "false"
        c = _commit_of(self.p, s)
        return f"(and {self.runs(c, r)} {self.forced(c.queue, (r, c.part, c.pos), at)})"

    def text(self, head: list[str], claim: str) -> str:
        dom = f"(>= T {self.p.min_trip})" if self.p.tsym else f"(= T {self.p.trip})"
        lines = [f"; {h}" for h in head]
        lines += ["; the NEGATED claim: unsat means the claim holds", "(set-logic ALL)",
                  "(declare-const T Int)", "(declare-const j Int)"]
        lines += [f"(declare-const {n} Bool)" for n in self.opaque]
        lines += list(self.defs.values())
        lines += [f"(assert {dom})", f"(assert {claim})", "(check-sat)"]
        return "\n".join(lines) + "\n"


def _sum(xs: list[str]) -> str:
    return "0" if not xs else (xs[0] if len(xs) == 1 else f"(+ {' '.join(xs)})")


def _or(xs: list[str]) -> str:
    xs = [x for x in xs if x != "false"]
    return "false" if not xs else (xs[0] if len(xs) == 1 else f"(or {' '.join(xs)})")


def _before(a: tuple, b: tuple) -> bool:
    """Point ``a`` is earlier than ``b`` (steps first; in one step, one part only)."""
    return a[0] < b[0] or (a[0] == b[0] and a[1] == b[1] and a[2] < b[2])


def _between(p: Program, a: tuple, b: tuple):
    """``(r, stmt)`` for the statements strictly between points ``a`` and ``b``, in order."""
    for r in range(a[0], b[0] + 1):
        for part in p.parts:
            if (r == a[0] and part.name != a[1]) or (r == b[0] and part.name != b[1]):
                continue
            lo = a[2] if r == a[0] else -1
            hi = b[2] if r == b[0] else len(part.stmts)
            for s in part.stmts[lo + 1:hi]:
                yield r, s


def _stmts_of(p: Program, op: str) -> list[Stmt]:
    return [s for part in p.parts for s in part.stmts if s.kind == "op" and s.op == op]


def _commit_of(p: Program, s: Stmt) -> Stmt:
    return next(c for c in p.part(s.part).stmts[s.pos + 1:] if c.kind == "commit" and c.group == s.group)


def _blame(p: Program, s: Stmt, queue: Optional[int]) -> Optional[int]:
    if queue is None:
        return None
    for w in reversed(p.part(s.part).stmts[:s.pos]):
        if w.kind == "wait" and p.waits[w.wait].queue == queue:
            return w.wait
    return None


def _static(d: int, anchor: Stmt, partner: Stmt) -> bool:
    """A synchronous partner ``d`` steps before the anchor is earlier in program order."""
    return d > 0 or (d == 0 and partner.part == anchor.part and partner.pos < anchor.pos)


def derive(p: Program) -> list[Obligation]:
    """All obligations of ``p``, in a stable order, each with its SMT-LIB2 file."""
    out: list[Obligation] = []

    def emit(oid: str, kind: str, wait: Optional[int], desc: str, build) -> None:
        f = _File(p)
        claim = build(f)
        charged = "none (global)" if wait is None else f"wait #{wait}"
        out.append(Obligation(oid, kind, wait, desc,
                              f.text([f"synth obligation {oid} ({kind}); charged to {charged}", desc,
                                      f"program {p.name}, program.json sha256 {p.sha256}"], claim)))

    emit("wellformed:extents", "wellformed", None, "every part's extent is >= 0",
         lambda f: _or([f"(< {f.ext(q.name)} 0)" for q in p.parts]))
    for part in p.parts:
        emit(f"wellformed:{part.name}", "wellformed", None,
             f"{part.name}: each op statement runs iteration j - stage; where it is enabled, each read's version is "
             "iteration - distance, each write's is its iteration, and each slot is version mod multiplicity",
             lambda f, part=part: _wellformed(f, p, part))
    for op in p.ops.values():
        emit(f"coverage:{op.name}", "coverage", None,
             f"{op.name} runs each iteration 0 <= v < T exactly once (unless its when is false there) and no other",
             lambda f, op=op: _coverage(f, p, op))
    for part in p.parts:
        for s in part.stmts:
            if s.kind == "wait":
                w = p.waits[s.wait]
                emit(f"count:{part.name}:{s.pos}", "count-nonnegative", s.wait,
                     f"{part.name}: async_wait_queue({w.queue}, {w.text}) before {w.before} has a count >= 0 "
                     "wherever it runs",
                     lambda f, s=s: f"(and {f.runs(s, 0)} (< {f.count(s, 0)} 0))")
    for part in p.parts:
        for s in part.stmts:
            if s.kind == "op":
                _pairs(p, s, emit)
    return out


def _wellformed(f: _File, p: Program, part) -> str:
    bad = []
    for s in part.stmts:
        if s.kind != "op":
            continue
        it = f.at(s, s.iteration, 0)
        bad.append(f"(not (= {it} (- j {p.ops[s.op].stage})))")
        g = f.enabled(s, 0)
        for a in s.reads + s.writes:
            ver = f.at(s, a.version, 0)
            want = it if a.distance == 0 else f"(- {it} {a.distance})"
            bad.append(f"(and {g} (not (= {ver} {want})))")
            bad.append(f"(and {g} (not (= {f.at(s, a.slot, 0)} (mod {ver} {p.mult[a.buffer]}))))")
    return f"(and {f.inp(part.name, 0)} {_or(bad)})" if bad else "false"


def _coverage(f: _File, p: Program, op) -> str:
    count = _sum([f"(ite {f.enabled(s, 0)} 1 0)" for s in _stmts_of(p, op.name)])
    c = f.define(f"runs.{op.name}", "Int", count)
    v = f"(- j {op.stage})"
    inside = f"(and (<= 0 {v}) (< {v} T))"
    may = "true" if op.when in (None, "opaque") else f.when(op.name, 0)
    return (f"(or (>= {c} 2) (and (= {c} 1) (not {inside})) (and (= {c} 0) {inside} {may}))")


def _pairs(p: Program, s: Stmt, emit) -> None:
    """RAW for each read of ``s``; WAR and WAW for each write of ``s`` against every partner statement."""
    me = p.ops[s.op]
    at = (0, s.part, s.pos)
    for a, acc in enumerate(s.reads):
        if acc.producer is None:
            continue
        prod = p.ops[acc.producer]
        d = me.stage + acc.distance - prod.stage
        stmts = _stmts_of(p, acc.producer)
        if not prod.is_async and all(_static(d, s, q) for q in stmts):
            continue
        desc = (f"{s.part}: {s.op} reads {acc.buffer} version iteration - {acc.distance} only after "
                f"{'async ' if prod.is_async else ''}{acc.producer}'s write of it ({d} steps earlier) is complete")
        wait = _blame(p, s, prod.queue if prod.is_async else None)

        def raw(f: _File, d=d, stmts=stmts) -> str:
            cases = [f"(and {f.runs(q, -d)} (not {f.done(q, -d, at)}))" for q in stmts]
            return f"(and {f.runs(s, 0)} {_or(cases)})"
        emit(f"raw:{s.part}:{s.pos}:r{a}", "raw", wait, desc, raw)
    for a, acc in enumerate(s.writes):
        m = p.mult[acc.buffer]
        for part in p.parts:
            for q in part.stmts:
                if q.kind != "op":
                    continue
                other = p.ops[q.op]
                for kind, accesses in (("war", q.reads), ("waw", q.writes)):
                    for b, oacc in enumerate(accesses):
                        if oacc.buffer != acc.buffer:
                            continue
                        dist = oacc.distance if kind == "war" else 0
                        d = me.stage + m - dist - other.stage
                        if q == s and d == 0:
                            continue  # an op's reads happen before its own writes
                        if not other.is_async and _static(d, s, q):
                            continue
                        _slot_reuse(p, s, a, acc, q, b, oacc, kind, d, emit)


def _slot_reuse(p: Program, s: Stmt, a: int, acc, q: Stmt, b: int, oacc, kind: str, d: int, emit) -> None:
    other = p.ops[q.op]
    tag = "r" if kind == "war" else "w"
    oid = f"{kind}:{s.part}:{s.pos}:w{a}<-{q.part}:{q.pos}:{tag}{b}"
    what = "read" if kind == "war" else "write"
    desc = (f"{s.part}: {s.op}'s write of {acc.buffer} version V is issued only after "
            f"{'async ' if other.is_async else ''}{q.op}'s {what} of version V - {p.mult[acc.buffer]} "
            f"(in {q.part}, {d} steps earlier) is {'done' if kind == 'war' else 'complete'}")
    wait = _blame(p, s, other.queue if other.is_async else None)
    at = (0, s.part, s.pos)

    def build(f: _File) -> str:
        premise = [f.runs(s, 0), f.runs(q, -d)]
        if kind == "war" and oacc.producer is not None:
            prod = p.ops[oacc.producer]
            premise.append(f.op_at(oacc.producer, -(p.ops[s.op].stage + p.mult[acc.buffer] - prod.stage)))
        return f"(and {' '.join(premise)} (not {f.done(q, -d, at)}))"
    emit(oid, kind, wait, desc, build)

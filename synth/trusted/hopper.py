"""The independent re-check of a Hopper program (``"protocol": "mbarrier"``): every obligation
re-derived from the bytes of ``program.json`` and asked of Z3 and cvc5.

:func:`check_hopper_program` reads the file with :mod:`synth.trusted.hopper_program`, derives
the obligations below as SMT-LIB2 texts (the negated claim; ``unsat`` proves it) over the trip
count ``T`` (``T >= min_trip_count``, or ``T = n``) and a free anchor step ``j``, quantifier-free
linear integer arithmetic with ``div``/``mod`` by constants, and asks both solvers each text.

Semantics (docs/hopper.md): each warp group of a role runs the role's parts in sequence; global
step ``k`` numbers their iterations; an instance runs where ``k`` lies in its part, its guard holds
at ``i = k - off`` and, for an op, the op's ``when`` holds at ``k - stage``. A statement with state
``(count, stages, phase)`` on a barrier of ``slots`` slots names slot ``(x mod stages) mod slots``
and phase ``x div stages`` (``x`` its count); a ``try_wait`` waits for phase
``x div stages - phase``. Every count and access version is ``step + c`` for a constant ``c``
found by evaluation and proved for every ``T`` (``wellformed``): the instance of a statement
whose count is ``x`` runs at step ``x - c``, so every partner is a term in ``j`` and ``T``.

"Phase ``n`` of a slot is complete before instance ``P``" is shown by a wait of ``P``'s warp
group at most ``D`` steps earlier (``D = 1 +`` the largest stages or slots) on that slot for a
phase ``>= n``, or by one hop: such an earlier wait, on any barrier, whose phase has an arrival
``A`` (arrivals >= 1) of another role that runs, or a copy of bytes > 0 of a role that never arrives
on that barrier (a peer CTA's multicast), with such a wait before ``A``. "``A`` happens
after wait ``W`` passed": ``A`` later in ``W``'s role, or an earlier wait of ``A``'s role whose
phase has an arrival of ``W``'s role later than ``W``. Reading "a passed wait means its phase
completed" is justified by induction on time with the ``parity``, ``arrivals`` and ``tx_bytes``
obligations (docs/trust.md, "Hopper programs").

Classes: ``wellformed``, ``parity``, ``arrivals``, ``tx_bytes``, ``no_deadlock`` (every
arrival and copy of a waited phase ranks below the wait in ``(step - lag(role), role,
position)``; the lags are searched here), ``release_after_wgmma``, ``wgmma_wait``,
``slot_reuse``, ``raw`` (also: a read version whose copy should run is written by some copy),
``wgmma_drain`` (every wgmma is committed and its group forced complete by a later ``wait_group``
of its warp group before the role ends), ``coverage`` (each role running an op runs each of its
iterations ``0 <= v < T`` whose ``when`` holds exactly once and no other; an op no role runs fails),
``fence``, ``teardown`` (every copy that runs is observed by a ``try_wait`` for its phase, so it
lands before ``mbarrier.inval``; an ``inval`` inside a role runs after every use of its barrier),
``converge`` (in a role of many threads per warp group, each statement one elected thread runs on a
waited barrier, an arrive or a TMA copy, comes after a convergence point, a collective wgmma or a
``bar_sync``, that follows every earlier ``try_wait`` instance of the role: the premise under which
the warp group is one actor in the other classes).
When all hold, :func:`wgmma_tightness` reports whether each ``wait_group N`` is the largest safe
count; a ``"tight": true`` in the file that it does not confirm fails the check. A persistent
kernel's program also gets ``carry`` (:func:`derive_carry`; the flag read from ``problem.yaml``
by :func:`read_carry_flag`: ``persistent: true`` or ``pingpong: true``, which implies it).

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from typing import Optional

from . import expr as X
from . import solvers
from .flags import MAX_BYTES as MAX_PROBLEM_BYTES
from .flags import FlagError, read_design
from .hopper_program import HopperInputError, HProgram, HStmt, read_hopper_bytes

CLASSES = ("wellformed", "parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma", "wgmma_wait",
           "wgmma_drain", "slot_reuse", "raw", "coverage", "fence", "teardown", "converge", "carry")
MAX_DEFINITIONS = 20000
"""Named terms of one file; a program needing more is refused as outside the checker's bounds."""
MAX_OBLIGATIONS = 3000
"""Obligations of one program (the lowered GEMM programs have 30 to 50)."""
LAGS = (0, 1, -1, 2, -2)
"""Lags tried per role after the first (at most two roles searched) for the deadlock ranking."""


@dataclass(frozen=True)
class HopperObligation:
    id: str
    kind: str
    description: str
    smt2: str = field(repr=False)


@dataclass(frozen=True)
class HopperCheck:
    id: str
    kind: str
    description: str
    z3: str
    cvc5: str
    ok: bool


@dataclass(frozen=True)
class WaitTightness:
    """Whether a wgmma ``wait_group N`` is the largest safe count (its safety is the obligations')."""

    role: str
    index: int
    part: str
    tight: Optional[bool]
    """True: ``N + 1`` refutes a release or refill obligation; False: ``N + 1`` is also safe; None: unknown."""
    reason: str
    claimed: Optional[bool]
    """The file's ``tight`` (a claim, tested here)."""

    @property
    def ok(self) -> bool:
        """False only when the file claims tightness that is not shown."""
        return self.claimed is not True or self.tight is True


@dataclass(frozen=True)
class TrustedHopperResult:
    ok: bool
    obligations: tuple
    """One :class:`HopperCheck` per obligation (empty when the file is refused)."""
    messages: tuple
    """A summary line first, then each failure."""
    lags: tuple = ()
    """``(role, lag)`` of the deadlock ranking that was checked."""
    seconds: float = 0.0
    sha256: str = ""
    waits: tuple = ()
    """One :class:`WaitTightness` per wgmma wait (when every obligation holds)."""

    def render(self) -> str:
        return "\n".join(self.messages[:1] + tuple(f"  {m}" for m in self.messages[1:]))

    def by_class(self) -> dict:
        """``{class: (held, asked)}`` in :data:`CLASSES` order, for the classes the program has."""
        out = {}
        for k in CLASSES:
            mine = [c for c in self.obligations if c.kind == k]
            if mine:
                out[k] = (sum(c.ok for c in mine), len(mine))
        return out


# ---------------------------------------------------------------------------------------------
# evaluation (offsets are found at a sample point, then proved for every T)
# ---------------------------------------------------------------------------------------------

def _ev(e: tuple, env: dict):
    tag = e[0]
    if tag in ("num", "bool"):
        return e[1]
    if tag == "var":
        return env[e[1]]
    if tag == "un":
        a = _ev(e[2], env)
        return -a if e[1] == "-" else not a
    if tag == "ite":
        return _ev(e[2], env) if _ev(e[1], env) else _ev(e[3], env)
    if tag == "call":
        vals = [_ev(a, env) for a in e[2]]
        return min(vals) if e[1] == "min" else max(vals)
    a, b, op = _ev(e[2], env), _ev(e[3], env), e[1]
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a // b, "%": lambda: a % b,
            "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
            "==": lambda: a == b, "!=": lambda: a != b, "&&": lambda: a and b, "||": lambda: a or b}[op]()


def _offsets(p: HProgram) -> dict:
    """``{(role, part, pos, key): c}`` with ``key`` ``count``, ``("r", a)``, ``("w", a)``: the value minus
    the step at the first sample point where the statement is enabled (0 when none is found; the
    ``wellformed`` obligations prove the offsets for every ``T``)."""
    trips = [p.trip] if p.trip is not None else list(range(p.min_trip, p.min_trip + 48))
    out: dict = {}
    for r in p.roles:
        for pt in r.parts:
            for s in pt.stmts:
                keys = []
                if s.state is not None:
                    keys.append(("count", s.state.count))
                keys += [(("r", a), acc.version) for a, acc in enumerate(s.reads)]
                keys += [(("w", a), acc.version) for a, acc in enumerate(s.writes)]
                if s.kind in ("op", "tma"):
                    keys.append(("it", s.iteration))
                if not keys:
                    continue
                at = _sample(p, r, pt, s, trips)
                for key, e in keys:
                    out[(r.name, pt.name, s.pos, key)] = 0 if at is None else _ev(e, at[0]) - at[1]
    return out


def _sample(p: HProgram, r, pt, s: HStmt, trips: list):
    for T in trips:
        tenv = {p.tsym: T} if p.tsym else {}
        off = 0
        for q in r.parts:
            if q.name == pt.name:
                break
            off += _ev(q.extent, tenv)
        for i in range(min(_ev(pt.extent, tenv), 16)):
            env = dict(tenv, **{pt.var: i})
            if s.guard is None or _ev(s.guard, env):
                return env, off + i
    return None


# ---------------------------------------------------------------------------------------------
# one SMT-LIB2 file
# ---------------------------------------------------------------------------------------------

def _and(*xs: str) -> str:
    xs = tuple(x for x in xs if x != "true")
    if "false" in xs:
        return "false"
    return "true" if not xs else (xs[0] if len(xs) == 1 else f"(and {' '.join(xs)})")


def _or(xs) -> str:
    xs = [x for x in xs if x != "false"]
    if "true" in xs:
        return "true"
    return "false" if not xs else (xs[0] if len(xs) == 1 else f"(or {' '.join(xs)})")


def _not(x: str) -> str:
    return {"true": "false", "false": "true"}.get(x, f"(not {x})")


def _sum(xs) -> str:
    xs = [x for x in xs if x != "0"]
    return "0" if not xs else (xs[0] if len(xs) == 1 else f"(+ {' '.join(xs)})")


def _add(t: str, c: int) -> str:
    return t if c == 0 else (f"(+ {t} {c})" if c > 0 else f"(- {t} {-c})")


class _TooLarge(ValueError):
    """A program outside the checker's size bounds."""


@dataclass(frozen=True)
class _Member:
    stmt: HStmt
    k: str
    cond: str
    x: str


class _File:
    """Named definitions of one file (``define-fun``), in the order they are needed."""

    def __init__(self, p: HProgram, offs: dict, lags: dict, D: int, hops: int = 1) -> None:
        self.p, self.offs, self.lags, self.D = p, offs, lags, D
        self.hops = hops
        """Barrier hops of "complete before" and "after" (1 unless the caller asks more: :func:`derive_hopper`)."""
        self.defs: dict[str, str] = {}
        self.steps: dict[str, str] = {"j": "j"}
        self.free: list[str] = []
        """Step variables beside ``j`` (declared, unconstrained)."""

    def free_step(self, name: str) -> str:
        """A second free step (an obligation about two unrelated instances)."""
        if name not in self.free:
            self.free.append(name)
            self.steps[name] = name
        return name

    def define(self, name: str, sort: str, body) -> str:
        if name not in self.defs:
            if len(self.defs) >= MAX_DEFINITIONS:
                raise _TooLarge(f"an obligation needs more than {MAX_DEFINITIONS} named terms")
            text = body() if callable(body) else body
            self.defs[name] = f"(define-fun {name} () {sort} {text})"
        return name

    def step(self, term: str) -> str:
        if term not in self.steps:
            name = f"k{len(self.steps)}"
            self.steps[term] = name
            self.define(name, "Int", term)
        return self.steps[term]

    def named(self, prefix: str, sort: str, text: str) -> str:
        """A name for the term ``text`` (one per distinct text)."""
        key = f"{prefix}|{text}"
        if key not in self.steps:
            self.steps[key] = f"{prefix}{len(self.steps)}"
            self.define(self.steps[key], sort, text)
        return self.steps[key]

    def rel(self, r: int) -> str:
        """The step ``j + r``."""
        return self.step(_add("j", r))

    # -- parts and statements -------------------------------------------------------------------
    def ext(self, role: str, part: str) -> str:
        pt = self.p.role(role).part(part)
        return self.define(f"ext.{role}.{part}", "Int", lambda: X.smt(pt.extent, self._tenv()))

    def off(self, role: str, part: str) -> str:
        before = []
        for q in self.p.role(role).parts:
            if q.name == part:
                break
            before.append(self.ext(role, q.name))
        return "0" if not before else self.define(f"off.{role}.{part}", "Int", _sum(before))

    def _tenv(self) -> dict:
        return {self.p.tsym: "T"} if self.p.tsym else {}

    def inp(self, role: str, part: str, k: str) -> str:
        o, e = self.off(role, part), self.ext(role, part)
        return self.define(f"in.{role}.{part}.{k}", "Bool", f"(and (<= {o} {k}) (< {k} (+ {o} {e})))")

    def env(self, s: HStmt, k: str) -> dict:
        pt = self.p.role(s.role).part(s.part)
        i = self.define(f"i.{s.role}.{s.part}.{k}", "Int", f"(- {k} {self.off(s.role, s.part)})")
        return dict(self._tenv(), **{pt.var: i})

    def at(self, s: HStmt, e: tuple, k: str) -> str:
        return X.smt(e, self.env(s, k))

    def enabled(self, s: HStmt, k: str) -> str:
        def body():
            g = self.inp(s.role, s.part, k)
            return g if s.guard is None else f"(and {g} {self.at(s, s.guard, k)})"
        return self.define(f"e.{s.role}.{s.part}.{s.pos}.{k}", "Bool", body)

    def when(self, op: str, k: str) -> str:
        o = self.p.ops[op]
        if o.when is None:
            return "true"
        env = dict(self._tenv(), **{self.p.loop_var: _add(k, -o.stage)})
        return self.define(f"w.{op}.{k}", "Bool", lambda: X.smt(o.when, env))

    def when_at(self, op: str, x: str) -> str:
        """``op``'s predicate at iteration ``x`` (a term)."""
        o = self.p.ops[op]
        if o.when is None:
            return "true"
        return X.smt(o.when, dict(self._tenv(), **{self.p.loop_var: x}))

    def runs(self, s: HStmt, k: str) -> str:
        if s.kind in ("op", "tma"):
            w = self.when(s.op, k)
            if w == "true":
                return self.enabled(s, k)
            return self.define(f"x.{s.role}.{s.part}.{s.pos}.{k}", "Bool", f"(and {self.enabled(s, k)} {w})")
        if s.kind == "commit" and s.gate:
            gates = " ".join(self.when(g, k) for g in s.gate)
            return self.define(f"x.{s.role}.{s.part}.{s.pos}.{k}", "Bool",
                               f"(and {self.enabled(s, k)} (or false {gates}))")
        return self.enabled(s, k)

    def count(self, s: HStmt, k: str) -> str:
        return self.define(f"c.{s.role}.{s.part}.{s.pos}.{k}", "Int", lambda: self.at(s, s.state.count, k))

    def offset(self, s: HStmt, key) -> int:
        return self.offs[(s.role, s.part, s.pos, key)]

    def slot_of(self, s: HStmt, x: str) -> str:
        st, slots = s.state.stages, self.p.barriers[s.barrier].slots
        if slots == 1:
            return "0"
        return f"(mod {x} {st})" if st == slots else f"(mod (mod {x} {st}) {slots})"

    def phase_of(self, s: HStmt, x: str) -> str:
        return x if s.state.stages == 1 else f"(div {x} {s.state.stages})"

    def slot(self, s: HStmt, k: str) -> str:
        return self.define(f"sl.{s.role}.{s.part}.{s.pos}.{k}", "Int", lambda: self.slot_of(s, self.count(s, k)))

    def phase(self, s: HStmt, k: str) -> str:
        """The phase a statement names (arrive, TMA) or waits for (try_wait)."""
        def body():
            ph = self.phase_of(s, self.count(s, k))
            return _add(ph, -s.state.phase) if s.kind == "try_wait" else ph
        return self.define(f"ph.{s.role}.{s.part}.{s.pos}.{k}", "Int", body)

    # -- phases ---------------------------------------------------------------------------------
    def members(self, barrier: str, sl: str, n: str, arrivals_only: bool = False,
                peer_copies: bool = False) -> list[_Member]:
        """Every statement instance naming phase ``n`` of slot ``sl`` of ``barrier`` (``arrivals_only``:
        the arrivals; ``peer_copies``: the copies of :func:`_peer_copy`)."""
        b = self.p.barriers[barrier]
        out = []
        for s in _stmts(self.p):
            if s.barrier != barrier or s.kind not in ("arrive", "tma"):
                continue
            if arrivals_only and (s.kind != "arrive" or s.arrivals == 0):
                continue
            if peer_copies and not _peer_copy(self.p, s):
                continue
            st = s.state.stages
            c = self.offset(s, "count")
            if st == b.slots:
                x = self.named("x", "Int", f"(+ (* {n} {st}) {sl})" if st > 1 else n)
                k = self.step(_add(x, -c))
                out.append(_Member(s, k, self.runs(s, k), x))
                continue
            for t in range(st):
                x = self.named("x", "Int", f"(+ (* {n} {st}) {t})")
                k = self.step(_add(x, -c))
                out.append(_Member(s, k, _and(f"(= {sl} {t % b.slots})", self.runs(s, k)), x))
        return out

    def waiters(self, barrier: str, sl: str, n: str) -> list[str]:
        """One condition per ``try_wait`` instance (any role) that waits for phase ``n`` of slot ``sl``
        of ``barrier``: that it runs (its count ``x`` has ``x div stages - phase = n``)."""
        b = self.p.barriers[barrier]
        out = []
        for w in _stmts(self.p):
            if w.kind != "try_wait" or w.barrier != barrier:
                continue
            st, c = w.state.stages, self.offset(w, "count")
            base = _add(n, w.state.phase)
            if st == b.slots:
                x = self.named("x", "Int", f"(+ (* {base} {st}) {sl})" if st > 1 else base)
                out.append(self.runs(w, self.step(_add(x, -c))))
                continue
            for t in range(st):
                x = self.named("x", "Int", f"(+ (* {base} {st}) {t})")
                out.append(_and(f"(= {sl} {t % b.slots})", self.runs(w, self.step(_add(x, -c)))))
        return out

    def arrivals(self, ms: list[_Member]) -> str:
        wg = {r.name: r.warpgroups for r in self.p.roles}
        return _sum([f"(ite {m.cond} {m.stmt.arrivals * wg[m.stmt.role]} 0)" for m in ms
                     if m.stmt.kind == "arrive" and m.stmt.arrivals])

    def expected(self, ms: list[_Member]) -> str:
        terms = []
        for m in ms:
            if m.stmt.kind != "arrive":
                continue
            for t in m.stmt.tx:
                cond = m.cond if t.gate is None else _and(m.cond, self.when_at(t.gate, m.x))
                terms.append(f"(ite {cond} {t.bytes} 0)")
        return _sum(terms)

    def delivered(self, ms: list[_Member]) -> str:
        return _sum([f"(ite {m.cond} {m.stmt.bytes} 0)" for m in ms if m.stmt.kind == "tma"])

    # -- order ----------------------------------------------------------------------------------
    def earlier_waits(self, s: HStmt, k: str, barrier: Optional[str] = None):
        """``(wait, its step)`` for try_waits of ``s``'s role at most ``D`` steps before ``(s, k)``."""
        out = []
        for w in _role_stmts(self.p, s.role):
            if w.kind != "try_wait" or (barrier is not None and w.barrier != barrier):
                continue
            for d in range(self.D + 1):
                if d == 0 and not (w.part == s.part and w.pos < s.pos):
                    continue
                out.append((w, self.step(_add(k, -d))))
        return out

    def complete_before(self, barrier: str, sl: str, n: str, s: HStmt, k: str, hops: Optional[int] = None) -> str:
        if hops is None:
            hops = self.hops
        cases = [f"(< {n} 0)"]
        for w, kw in self.earlier_waits(s, k, barrier):
            cases.append(_and(self.runs(w, kw), f"(= {self.slot(w, kw)} {sl})", f"(>= {self.phase(w, kw)} {n})"))
        if hops:
            for w, kw in self.earlier_waits(s, k):
                wn = self.phase(w, kw)
                hop = self.members(w.barrier, self.slot(w, kw), wn, arrivals_only=True) + \
                    self.members(w.barrier, self.slot(w, kw), wn, peer_copies=True)
                for m in hop:
                    if m.stmt.role == s.role:
                        continue
                    inner = self.complete_before(barrier, sl, n, m.stmt, m.k, hops - 1)
                    cases.append(_and(self.runs(w, kw), f"(>= {wn} 0)", m.cond, inner))
        return _or(cases)

    @staticmethod
    def po_before(s1: HStmt, k1: str, s2: HStmt, k2: str) -> str:
        """Instance 1 comes before instance 2 in one warp group's program order."""
        return f"(<= {k1} {k2})" if s1.part == s2.part and s1.pos < s2.pos else f"(< {k1} {k2})"

    def after(self, a: HStmt, ka: str, w: HStmt, kw: str, hops: Optional[int] = None) -> str:
        """Arrival ``(a, ka)`` happens after wait ``(w, kw)`` passed (through at most ``hops`` barrier hops; None:
        :attr:`hops`)."""
        if a.role == w.role:
            return self.po_before(w, kw, a, ka)
        if hops is None:
            hops = self.hops
        cases = []
        for w2, k2 in self.earlier_waits(a, ka):
            n2 = self.phase(w2, k2)
            for m in self.members(w2.barrier, self.slot(w2, k2), n2, arrivals_only=True):
                if m.stmt.role == w.role:
                    cases.append(_and(self.runs(w2, k2), f"(>= {n2} 0)", m.cond, self.po_before(w, kw, m.stmt, m.k)))
                elif hops > 1 and m.stmt.role != a.role:
                    cases.append(_and(self.runs(w2, k2), f"(>= {n2} 0)", m.cond,
                                      self.after(m.stmt, m.k, w, kw, hops - 1)))
        return _or(cases)

    def precedes_wait(self, s: HStmt, ks: str, v: HStmt, kv: str) -> str:
        """Instance ``(s, ks)`` of another role happens before ``(v, kv)``: it is, or comes before in its
        warp group, an arrival of the phase of a wait of ``v``'s warp group that passed earlier (the
        phase needs every warp group's arrival, so this holds for each warp group of ``s``'s role)."""
        cases = []
        for w, kw in self.earlier_waits(v, kv):
            n = self.phase(w, kw)
            for m in self.members(w.barrier, self.slot(w, kw), n, arrivals_only=True):
                if m.stmt.role != s.role:
                    continue
                le = self.po_before(s, ks, m.stmt, m.k)
                if m.stmt is s:
                    le = _or([le, f"(= {ks} {m.k})"])
                cases.append(_and(self.runs(w, kw), f"(>= {n} 0)", m.cond, le))
        return _or(cases)

    def rank_before(self, m: HStmt, km: str, w: HStmt, kw: str) -> str:
        rm, rw = self.p.role(m.role).index, self.p.role(w.role).index
        tie = rm < rw or (rm == rw and m.part == w.part and m.pos < w.pos)
        a, b = _add(km, -self.lags.get(m.role, 0)), _add(kw, -self.lags.get(w.role, 0))
        return f"(<= {a} {b})" if tie else f"(< {a} {b})"

    # -- wgmma groups ---------------------------------------------------------------------------
    def done(self, s: HStmt, r: int, at: HStmt) -> str:
        """The op instance ``s`` at step ``j + r`` is finished when ``at`` (at step ``j``, same role) runs."""
        if s.group is None:
            return "true" if _before((r, s.part, s.pos), (0, at.part, at.pos)) else "false"
        part = self.p.role(s.role).part(s.part)
        c = next(q for q in part.stmts[s.pos + 1:] if q.kind == "commit" and q.group == s.group
                 and q.queue == self.p.ops[s.op].queue)
        return _and(self.runs(c, self.rel(r)), self.forced(s.role, c.queue, (r, c.part, c.pos), (0, at.part, at.pos)))

    def forced(self, role: str, q: int, a: tuple, b: tuple) -> str:
        """The group committed to ``q`` at point ``a`` is complete at point ``b`` (FIFO, as late as allowed)."""
        if not _before(a, b):
            return "false"
        rl = self.p.role(role)
        total, disj, n = "0", [], 0
        for r, s in _between(rl, a, b):
            if s.kind == "commit" and s.queue == q:
                n += 1
                total = self.define(f"n.{role}.{a[1]}.{a[2]}.{a[0]}.{n}", "Int",
                                    f"(+ {total} (ite {self.runs(s, self.rel(r))} 1 0))")
            elif s.kind == "wait" and rl.waits[s.wait].queue == q:
                k = self.rel(r)
                cnt = self.at(s, rl.waits[s.wait].in_flight, k)
                disj.append(_and(self.runs(s, k), f"(>= {total} {cnt})"))
        return _or(disj)

    def text(self, head: list[str], claim: str) -> str:
        dom = f"(>= T {self.p.min_trip})" if self.p.tsym else f"(= T {self.p.trip})"
        lines = [f"; {h}" for h in head]
        lines += ["; the NEGATED claim: unsat means the claim holds", "(set-logic ALL)",
                  "(declare-const T Int)", "(declare-const j Int)"] + [f"(declare-const {v} Int)" for v in self.free]
        lines += list(self.defs.values())
        lines += [f"(assert {dom})", f"(assert {claim})", "(check-sat)"]
        return "\n".join(lines) + "\n"


def _before(a: tuple, b: tuple) -> bool:
    return a[0] < b[0] or (a[0] == b[0] and a[1] == b[1] and a[2] < b[2])


def _between(role, a: tuple, b: tuple):
    for r in range(a[0], b[0] + 1):
        for part in role.parts:
            if (r == a[0] and part.name != a[1]) or (r == b[0] and part.name != b[1]):
                continue
            lo = a[2] if r == a[0] else -1
            hi = b[2] if r == b[0] else len(part.stmts)
            for s in part.stmts[lo + 1:hi]:
                yield r, s


def _peer_copy(p: HProgram, s: HStmt) -> bool:
    """A copy that orders a hop of "complete before" like an arrival: a TMA delivering bytes (> 0) to a
    barrier its role never arrives on (a peer CTA's multicast). Its phase completes only once it has
    landed (``tx_bytes``), so every wait its role passed before issuing it precedes that completion."""
    return s.kind == "tma" and s.bytes > 0 and not any(x.kind == "arrive" and x.barrier == s.barrier
                                                       for x in _role_stmts(p, s.role))


def _role_stmts(p: HProgram, role: str) -> list[HStmt]:
    return [s for pt in p.role(role).parts for s in pt.stmts]


def _stmts(p: HProgram) -> list[HStmt]:
    return [s for r in p.roles for s in _role_stmts(p, r.name)]


# ---------------------------------------------------------------------------------------------
# the obligations
# ---------------------------------------------------------------------------------------------

def _tag(s: HStmt) -> str:
    return f"{s.role}:{s.part}:{s.pos}"


def _what(s: HStmt) -> str:
    if s.kind == "arrive":
        return "arrive.expect_tx" if s.tx and s.arrivals else ("expect_tx" if s.tx else "arrive")
    return {"tma": f"TMA {s.op}", "try_wait": "try_wait", "inval": "mbarrier.inval"}.get(s.kind, s.kind)


def derive_hopper(p: HProgram, lags: Optional[dict] = None, kinds: Optional[tuple] = None,
                  hops: int = 1) -> list[HopperObligation]:
    """Every obligation of ``p`` (the deadlock ranking with role ``lags``), in a stable order; only
    those of ``kinds`` when given. ``hops``: the barrier hops "complete before" and "after" may take (1: the
    files of every certificate; a ring of three warp groups handing a turn on needs 2)."""
    lags = lags or {}
    offs = _offsets(p)
    D = 1 + max([b.slots for b in p.barriers.values()] +
                [s.state.stages for s in _stmts(p) if s.state is not None] + [1])
    out: list[HopperObligation] = []

    def emit(oid: str, kind: str, desc: str, build) -> None:
        if kinds is not None and kind not in kinds:
            return
        if len(out) >= MAX_OBLIGATIONS:
            raise _TooLarge(f"more than {MAX_OBLIGATIONS} obligations")
        f = _File(p, offs, lags, D, hops)
        claim = build(f)
        out.append(HopperObligation(oid, kind, desc, f.text(
            [f"synth trusted Hopper obligation {oid} ({kind})", desc,
             f"program {p.name}, program.json sha256 {p.sha256}"], claim)))

    emit("wellformed:extents", "wellformed", "every part's extent is >= 0",
         lambda f: _or([f"(< {f.ext(r.name, pt.name)} 0)" for r in p.roles for pt in r.parts]))
    for r in p.roles:
        for pt in r.parts:
            emit(f"wellformed:{r.name}:{pt.name}", "wellformed",
                 f"{r.name} {pt.name}: every state count and access version is the step plus its constant; a "
                 "predicated op runs iteration step - stage; an op writes the version of its iteration; each "
                 "slot is version mod multiplicity", lambda f, r=r, pt=pt: _wellformed(f, p, r, pt))
    for s in _stmts(p):
        tag, head = _tag(s), f"{s.role} {s.part} statement {s.pos}: {_what(s)}"
        if s.kind == "try_wait":
            _wait_obligations(p, s, tag, f"{head} {s.barrier}", emit)
        elif s.kind == "arrive":
            _arrive_obligations(p, s, tag, f"{head} {s.barrier}", emit)
        elif s.kind == "tma":
            _tma_obligations(p, s, tag, f"{head} -> {s.barrier}", emit)
            _observed_obligation(s, tag, f"{head} -> {s.barrier}", emit)
        elif s.kind == "inval":
            _inval_obligations(p, s, tag, f"{head} {s.barrier}", emit)
        elif s.kind == "wait":
            w = p.role(s.role).waits[s.wait]
            emit(f"wgmma_wait:{tag}", "wgmma_wait", f"{head} (wait_group #{s.wait}) has a count >= 0 wherever it runs",
                 lambda f, s=s, w=w: _and(f.runs(s, "j"), f"(< {f.at(s, w.in_flight, 'j')} 0)"))
        if s.kind == "op":
            _raw_obligations(p, s, tag, head, emit)
    _drain_obligations(p, emit)
    _coverage_obligations(p, emit)
    _fence_obligations(p, emit)
    _converge_obligations(p, emit)
    return out


def _converge_obligations(p: HProgram, emit) -> None:
    """``converge``: in a role of ``threads > 1``, for each elected statement (an arrive; a TMA copy) on a
    barrier some ``try_wait`` waits on, and each ``try_wait`` statement ``W`` of the role: at every step
    ``j`` where it runs and every step ``jw`` where ``W`` runs before it in program order, a convergence
    instance (a collective op or a ``bar_sync``) runs between them, searched at ``jw .. jw + D`` and
    ``j - D .. j`` (a sufficient condition)."""
    waited = {s.barrier for s in _stmts(p) if s.kind == "try_wait"}
    for r in p.roles:
        if r.threads <= 1:
            continue
        stmts = _role_stmts(p, r.name)
        waits = [s for s in stmts if s.kind == "try_wait"]
        convs = [s for s in stmts if s.converges]
        for a in stmts:
            if a.kind not in ("arrive", "tma") or a.barrier not in waited:
                continue
            for w in waits:
                def build(f: _File, a=a, w=w) -> str:
                    kw = f.free_step("jw")
                    between = []
                    for c in convs:
                        for d in range(f.D + 1):
                            for kc in (f.step(_add(kw, d)), f.step(_add("j", -d))):
                                between.append(_and(f.runs(c, kc), f.po_before(w, kw, c, kc),
                                                    f.po_before(c, kc, a, "j")))
                    return _and(f.runs(a, "j"), f.runs(w, kw), f.po_before(w, kw, a, "j"), _not(_or(between)))
                emit(f"converge:{r.name}:{a.part}:{a.pos}<-{w.part}:{w.pos}", "converge",
                     f"{r.name} {a.part} statement {a.pos}: the elected {_what(a)} on {a.barrier} comes after a "
                     f"convergence point of the warp group that follows every earlier instance of try_wait "
                     f"{w.barrier} ({w.part} statement {w.pos}) of its {r.threads} threads", build)


def _drain_obligations(p: HProgram, emit) -> None:
    """``wgmma_drain``: every async op instance a warp group runs is in a group that is committed and
    forced complete by a later ``wait_group`` of that warp group at most ``D`` steps on (FIFO, as late as
    the waits allow), so no group is pending when the role ends and the accumulators are read."""
    for r in p.roles:
        for s in _role_stmts(p, r.name):
            if s.kind != "op" or not p.ops[s.op].is_async:
                continue

            def build(f: _File, s=s, r=r) -> str:
                part = r.part(s.part)
                c = None if s.group is None else next(
                    (q for q in part.stmts[s.pos + 1:] if q.kind == "commit" and q.group == s.group
                     and q.queue == p.ops[s.op].queue), None)
                if c is None:
                    return f.runs(s, "j")
                end = (f.D + 1, r.parts[0].name, 0)  # every statement of steps j .. j + D lies before it
                return _and(f.runs(s, "j"), _not(_and(f.runs(c, "j"), f.forced(r.name, c.queue, (0, c.part, c.pos),
                                                                                 end))))
            emit(f"wgmma_drain:{_tag(s)}", "wgmma_drain", f"{r.name} {s.part} statement {s.pos}: {s.op} is committed "
                 "and its group forced complete by a later wait_group before the warp group finishes", build)


def _coverage_obligations(p: HProgram, emit) -> None:
    """``coverage``: in each role running an op (TMA or not), each iteration ``0 <= v < T`` whose
    ``when`` holds runs exactly once, none where it is false, no other; an op no role runs fails."""
    for name in p.ops:
        roles = [r for r in p.roles if any(s.kind in ("op", "tma") and s.op == name for s in _role_stmts(p, r.name))]
        if not roles:
            emit(f"coverage:{name}", "coverage", f"op {name} is run by some role", lambda f: "true")
        for r in roles:
            stmts = [s for s in _role_stmts(p, r.name) if s.kind in ("op", "tma") and s.op == name]

            def build(f: _File, stmts=stmts, name=name) -> str:
                v = f.free_step("v")
                when = f.when_at(name, v)
                n = _sum([f"(ite {_and(f.enabled(s, f.step(_add(v, -f.offset(s, 'it')))), when)} 1 0)"
                          for s in stmts])
                inside = f"(and (<= 0 {v}) (< {v} T))"
                return _or([f"(>= {n} 2)", _and(f"(>= {n} 1)", _not(inside)), _and(f"(= {n} 0)", inside, when)])
            emit(f"coverage:{r.name}:{name}", "coverage", f"{r.name}: {name} runs each iteration 0 <= v < T exactly "
                 "once (unless its when is false there) and no other", build)


def _wellformed(f: _File, p: HProgram, r, pt) -> str:
    bad = []
    for s in pt.stmts:
        e = f.enabled(s, "j")
        if s.state is not None:
            bad.append(_and(e, f"(not (= {f.count(s, 'j')} {_add('j', f.offset(s, 'count'))}))"))
        if s.kind not in ("op", "tma"):
            continue
        it = f.at(s, s.iteration, "j")
        bad.append(_and(e, f"(not (= {it} {_add('j', f.offset(s, 'it'))}))"))
        if p.ops[s.op].when is not None:  # a predicate is read at step - stage: that must be the iteration
            bad.append(_and(e, f"(not (= {it} {_add('j', -p.ops[s.op].stage)}))"))
        for key, accs in (("r", s.reads), ("w", s.writes)):
            for a, acc in enumerate(accs):
                ver = f.at(s, acc.version, "j")
                bad.append(_and(e, f"(not (= {ver} {_add('j', f.offset(s, (key, a)))}))"))
                bad.append(_and(e, f"(not (= {f.at(s, acc.slot, 'j')} (mod {ver} {p.mult[acc.buffer]})))"))
                if key == "w":
                    bad.append(_and(e, f"(not (= {ver} {it}))"))
    return _and(f.inp(r.name, pt.name, "j"), _or(bad))


def _wait_obligations(p: HProgram, s: HStmt, tag: str, head: str, emit) -> None:
    b = p.barriers[s.barrier]

    def base(f: _File):
        return f.runs(s, "j"), f.slot(s, "j"), f.phase(s, "j")

    def ahead(f: _File) -> str:
        run, sl, w = base(f)
        return _and(run, f"(>= {w} 1)", _not(f.complete_before(s.barrier, sl, _add(w, -1), s, "j")))

    def behind(f: _File) -> str:
        run, sl, w = base(f)
        ms = f.members(s.barrier, sl, f.define("wn.next", "Int", _add(w, 1)), arrivals_only=True)
        ordered = _or([_and(m.cond, f.after(m.stmt, m.k, s, "j")) for m in ms])
        return _and(run, _or([m.cond for m in ms]), _not(ordered))

    def arrivals(f: _File) -> str:
        run, sl, w = base(f)
        return _and(run, f"(>= {w} 0)", f"(not (= {f.arrivals(f.members(s.barrier, sl, w))} {b.count}))")

    def tx(f: _File) -> str:
        run, sl, w = base(f)
        ms = f.members(s.barrier, sl, w)
        return _and(run, f"(>= {w} 0)", f"(not (= {f.expected(ms)} {f.delivered(ms)}))")

    def deadlock(f: _File) -> str:
        run, sl, w = base(f)
        ms = f.members(s.barrier, sl, w)
        late = [_and(m.cond, _not(f.rank_before(m.stmt, m.k, s, "j"))) for m in ms]
        return _and(run, f"(>= {w} 0)", _or([f"(not (= {f.arrivals(ms)} {b.count}))",
                                              f"(not (= {f.expected(ms)} {f.delivered(ms)}))"] + late))

    emit(f"parity:{tag}:ahead", "parity", f"{head}: the phase before the one it waits for is complete when it "
         "starts (it never runs one phase ahead)", ahead)
    emit(f"parity:{tag}:behind", "parity", f"{head}: the phase after the one it waits for cannot complete before "
         "it passes (it is never two phases behind)", behind)
    emit(f"arrivals:{tag}", "arrivals", f"{head}: the phase it waits for gets exactly {b.count} arrival(s)", arrivals)
    emit(f"tx_bytes:{tag}", "tx_bytes", f"{head}: the phase it waits for gets exactly the bytes it expects", tx)
    emit(f"no_deadlock:{tag}", "no_deadlock", f"{head}: its phase gets its arrivals and bytes, each from an instance "
         "ranked below the wait", deadlock)


def _arrive_obligations(p: HProgram, s: HStmt, tag: str, head: str, emit) -> None:
    b = p.barriers[s.barrier]

    def count(f: _File) -> str:
        ms = f.members(s.barrier, f.slot(s, "j"), f.phase(s, "j"))
        return _and(f.runs(s, "j"), f"(not (= {f.arrivals(ms)} {b.count}))")

    def order(f: _File) -> str:
        n = f.phase(s, "j")
        # a phase below 0 does not exist: such an instance acts on phase 0 or later
        return _and(f.runs(s, "j"), _or([f"(< {n} 0)", _and(f"(>= {n} 1)", _not(f.complete_before(
            s.barrier, f.slot(s, "j"), _add(n, -1), s, "j")))]))

    emit(f"arrivals:{tag}:count", "arrivals", f"{head}: the phase it names gets exactly {b.count} arrival(s)", count)
    if s.tx:
        emit(f"tx_bytes:{tag}:count", "tx_bytes", f"{head}: the phase it names gets exactly the bytes it expects",
             _bytes_builder(s))
    emit(f"{'arrivals' if s.arrivals else 'tx_bytes'}:{tag}:order", "arrivals" if s.arrivals else "tx_bytes",
         f"{head}: lands in the phase it names (it names a phase >= 0, and the previous phase is complete "
         "before it)", order)
    if not s.arrivals:
        def armed(f: _File) -> str:
            sl, n = f.slot(s, "j"), f.phase(s, "j")
            later = []
            for a in _role_stmts(p, s.role):
                if a.kind != "arrive" or a.barrier != s.barrier or not a.arrivals:
                    continue
                for d in range(f.D + 1):
                    if d == 0 and not (a.part == s.part and a.pos > s.pos):
                        continue
                    k = f.rel(d)
                    later.append(_and(f.runs(a, k), f"(= {f.slot(a, k)} {sl})", f"(= {f.phase(a, k)} {n})"))
            return _and(f.runs(s, "j"), _not(_or(later)))
        emit(f"tx_bytes:{tag}:armed", "tx_bytes", f"{head}: an arrival of its warp group on the same phase follows it "
             "(its bytes are expected before the phase can complete)", armed)
    if b.kind != "empty":
        return
    for rd in _role_stmts(p, s.role):
        if rd.kind != "op":
            continue
        for a, acc in enumerate(rd.reads):
            if acc.buffer not in b.guards:
                continue

            def build(f: _File, rd=rd, a=a) -> str:
                r = f.offset(s, "count") - f.offset(rd, ("r", a))
                return _and(f.runs(s, "j"), f.runs(rd, f.rel(r)), _not(f.done(rd, r, s)))
            emit(f"release_after_wgmma:{tag}<-{rd.part}:{rd.pos}:r{a}", "release_after_wgmma",
                 f"{head} releases the version its count names only after {rd.op}'s read of {acc.buffer} of "
                 "that version is complete in its warp group", build)


def _bytes_builder(s: HStmt):
    """The phase ``s`` names (waited for or not) gets exactly its expected bytes: no copy of it can
    land in a later phase."""
    def build(f: _File) -> str:
        ms = f.members(s.barrier, f.slot(s, "j"), f.phase(s, "j"))
        return _and(f.runs(s, "j"), f"(not (= {f.expected(ms)} {f.delivered(ms)}))")
    return build


def _tma_obligations(p: HProgram, s: HStmt, tag: str, head: str, emit) -> None:
    def order(f: _File) -> str:
        n = f.phase(s, "j")
        # a phase below 0 does not exist: such an instance acts on phase 0 or later
        return _and(f.runs(s, "j"), _or([f"(< {n} 0)", _and(f"(>= {n} 1)", _not(f.complete_before(
            s.barrier, f.slot(s, "j"), _add(n, -1), s, "j")))]))

    emit(f"tx_bytes:{tag}:order", "tx_bytes", f"{head}: its complete_tx lands in the phase it names (>= 0; the "
         "previous phase is complete before it)", order)
    emit(f"tx_bytes:{tag}:count", "tx_bytes", f"{head}: the phase it names gets exactly the bytes it expects",
         _bytes_builder(s))
    for wa, wacc in enumerate(s.writes):
        M = p.mult[wacc.buffer]
        for rd in _stmts(p):
            if rd.kind != "op":
                continue
            for a, racc in enumerate(rd.reads):
                if racc.buffer != wacc.buffer:
                    continue

                def build(f: _File, wa=wa, rd=rd, a=a, M=M, buf=wacc.buffer) -> str:
                    cw = f.offset(s, ("w", wa))
                    v = _add("j", cw)
                    kr = f.rel(cw - M - f.offset(rd, ("r", a)))
                    cases = []
                    if rd.role == s.role:
                        cases.append(f.done(rd, cw - M - f.offset(rd, ("r", a)), s))
                    for e in p.barriers.values():
                        if e.kind != "empty" or buf not in e.guards:
                            continue
                        for rel in _role_stmts(p, rd.role):
                            if rel.kind != "arrive" or rel.barrier != e.name or not rel.arrivals:
                                continue
                            x = f.define(f"old.{wa}.{M}", "Int", _add(v, -M))
                            krel = f.rel(cw - M - f.offset(rel, "count"))
                            cases.append(_and(f.runs(rel, krel), f.complete_before(
                                e.name, f.slot_of(rel, x), f.phase_of(rel, x), s, "j")))
                    return _and(f.runs(s, "j"), f"(>= {v} {M})", f.runs(rd, kr), _not(_or(cases)))
                emit(f"slot_reuse:{tag}:w{wa}<-{_tag(rd)}:r{a}", "slot_reuse",
                     f"{head} writes {wacc.buffer} version V only after {rd.role}'s {rd.op} is done with version "
                     f"V - {M} (its release is covered by a wait of the copy's warp group, or its own wgmma FIFO)",
                     build)


def _raw_obligations(p: HProgram, s: HStmt, tag: str, head: str, emit) -> None:
    for a, acc in enumerate(s.reads):
        tmas = [(t, wa) for t in _stmts(p) if t.kind == "tma" and t.op == acc.producer
                for wa, w in enumerate(t.writes) if w.buffer == acc.buffer]
        if not tmas:
            continue

        def build(f: _File, a=a, tmas=tmas, producer=acc.producer) -> str:
            cr = f.offset(s, ("r", a))
            v = f.define(f"ver.{a}", "Int", _add("j", cr))
            bad, written = [], []
            for t, wa in tmas:
                kt = f.rel(cr - f.offset(t, ("w", wa)))
                written.append(f.enabled(t, kt))
                bad.append(_and(f.runs(t, kt), _not(f.complete_before(t.barrier, f.slot(t, kt), f.phase(t, kt),
                                                                      s, "j"))))
            bad.append(_and(f.when_at(producer, v), _not(_or(written))))
            return _and(f.runs(s, "j"), _or(bad))
        emit(f"raw:{tag}:r{a}", "raw", f"{head} reads {acc.buffer} only after a wait of its warp group covers the "
             f"phase its copy by {acc.producer} completes on (and some copy writes that version)", build)


def _observed_obligation(s: HStmt, tag: str, head: str, emit) -> None:
    """``teardown``: a copy that runs completes on a phase some ``try_wait`` (any role) waits for, and
    that wait runs. All roles end before the teardown's ``mbarrier.inval`` (a CTA barrier), a passed
    wait means its phase completed (``parity``, ``arrivals``), and a phase completes only when every
    byte it expects has landed (``tx_bytes``): so the copy landed before the invalidation and before
    the CTA reuses its shared memory. Without such a wait it may still be in flight."""
    def build(f: _File) -> str:
        n = f.phase(s, "j")
        seen = _and(f"(>= {n} 0)", _or(f.waiters(s.barrier, f.slot(s, "j"), n)))
        return _and(f.runs(s, "j"), _not(seen))
    emit(f"teardown:{tag}", "teardown", f"{head}: the copy is observed before the teardown's mbarrier.inval (a "
         "try_wait waiting for the phase it completes on runs)", build)


def _inval_obligations(p: HProgram, v: HStmt, tag: str, head: str, emit) -> None:
    """``teardown`` of an ``mbarrier.inval`` inside a role: every instance of an arrive, a ``try_wait``
    or an inval on its barrier (any role, itself included) runs before it: earlier in the inval's warp
    group (a role of one warp group), or, for another role, it is (or precedes) an arrival of the
    phase of a wait the inval's warp group passed at most ``D`` steps earlier. A TMA needs no
    obligation of its own: its copy lands before the phase it completes on completes, and a wait
    for that phase runs (``teardown`` of the TMA) and, by these obligations, before the inval."""
    for s in _stmts(p):
        if s.barrier != v.barrier or s.kind not in ("arrive", "try_wait", "inval"):
            continue

        def build(f: _File, s=s) -> str:
            u = f.free_step("u")
            if s.role != v.role:
                before = f.precedes_wait(s, u, v, "j")
            elif p.role(v.role).warpgroups > 1:
                before = "false"  # the role's other warp group may still use the barrier
            else:
                before = f.po_before(s, u, v, "j")
            same = "(= u j)" if s is v else "false"
            return _and(f.runs(v, "j"), f.runs(s, u), _not(same), _not(before))
        emit(f"teardown:{tag}<-{_tag(s)}", "teardown", f"{head} runs after every {_what(s)} of {s.role} {s.part} "
             f"statement {s.pos} on {s.barrier}", build)


def _fence_obligations(p: HProgram, emit) -> None:
    def const(bad: bool):
        return lambda f: "true" if bad else "false"
    inits = [k for k, (kind, _) in enumerate(p.setup) if kind == "init"]
    fences = [k for k, (kind, v) in enumerate(p.setup) if kind == "fence" and v == "mbarrier_init"]
    invals = {v for kind, v in p.teardown if kind == "inval"}
    for b in p.barriers:
        mine = [k for k in inits if p.setup[k][1] == b]
        fenced = bool(mine) and any(x > max(mine) for x in fences)
        emit(f"fence:init:{b}", "fence", f"barrier {b} is initialized in setup and a fence.mbarrier_init follows "
             "its init", const(not fenced))
        emit(f"fence:inval:{b}", "fence", f"barrier {b} is invalidated in teardown", const(b not in invals))
    for r in p.roles:
        for pt in r.parts:
            for s in pt.stmts:
                if s.kind != "op" or p.ops[s.op].is_async or not s.writes:
                    continue
                bufs = {w.buffer for w in s.writes}
                for s2 in pt.stmts[s.pos + 1:]:
                    if s2.kind == "fence":
                        break
                    if s2.kind in ("op", "tma") and p.ops[s2.op].is_async and bufs & {a.buffer for a in s2.reads}:
                        emit(f"fence:proxy:{_tag(s)}", "fence", f"{r.name} {pt.name}: {s.op}'s generic-proxy write "
                             f"is fenced (fence.proxy.async) before {s2.op} reads it", const(True))
                        break


# ---------------------------------------------------------------------------------------------
# persistent tiles: the tile carry
# ---------------------------------------------------------------------------------------------

KERNEL_CARRY = ("t * T", "t * T", "0")
"""The persistent kernel's carry (docs/hopper.md, "Persistent tiles"): at its ``t``-th tile of ``T``
k-tiles a role uses, for a statement of running count ``c``, the slot of ``slot_base + (c - t T)`` and
the parity of ``parity_base + (c - t T)`` plus ``flip``: ``(slot_base, parity_base, flip)``,
expressions in ``t`` and ``T``. This is the kernel's contract, not read from a file: the obligations
show that the contract and ``program.json``'s own counts agree at every tile."""
MAX_FLAG_BYTES = MAX_PROBLEM_BYTES
"""Size of the ``problem.yaml`` the persistent flag is read from (:data:`synth.trusted.flags.MAX_BYTES`)."""


def read_persistent_flag(data: bytes, path: str = "problem.yaml") -> bool:
    """The top-level ``persistent:`` key of the ``problem.yaml`` in ``data`` (False when absent), read by
    :func:`synth.trusted.flags.read_design` with a real YAML parser (a YAML 1.1 boolean: ``true``, ``yes``,
    ``off``, ...). A key the checker cannot read for sure (given twice, written with a tag, an anchor, an alias
    or an escape, brought in by a merge key, another value, a text that is not YAML) raises
    :class:`~synth.trusted.hopper_program.HopperInputError` naming ``path``, the line and the fix: the checker
    never guesses whether a kernel is persistent."""
    try:
        return read_design(data, path).persistent
    except FlagError as e:
        raise HopperInputError(e.where, e.msg, e.fix) from None


def read_carry_flag(data: bytes, path: str = "problem.yaml") -> bool:
    """Whether the folder whose ``problem.yaml`` is ``data`` runs one ring over a persistent CTA's tiles, so that its
    certificate holds the :func:`derive_carry` obligations: ``persistent: true`` or ``pingpong: true``
    (:attr:`synth.trusted.flags.Design.walks_tiles`: a ping-pong consumer warp group indexes slots and parities by
    the CTA's running tile count ``t`` of the ring, ``kb = t T``, the carry :data:`KERNEL_CARRY` states for every
    ``t``, both warp groups' tiles alike). Refuses as :func:`read_persistent_flag` does."""
    try:
        return read_design(data, path).walks_tiles
    except FlagError as e:
        raise HopperInputError(e.where, e.msg, e.fix) from None


def _carry_text(oid: str, desc: str, p: HProgram, decls: list, defs: list, asserts: list) -> str:
    lines = [f"; synth trusted Hopper obligation {oid} (carry)", f"; {desc}",
             f"; program {p.name}, program.json sha256 {p.sha256}",
             "; persistent tiles: tile >= 0 of the CTA, KT >= 1 k-tiles per tile, k the k-tile (or drain step)",
             "; the NEGATED claim: unsat means the claim holds", "(set-logic ALL)"]
    lines += [f"(declare-const {v} Int)" for v in decls] + defs + [f"(assert {a})" for a in asserts]
    return "\n".join(lines + ["(check-sat)"]) + "\n"


def _carry_uses(p: HProgram, s: HStmt):
    """``(what, count, stages, phase, is_wait)`` of every barrier state and smem slot ``s`` computes."""
    if s.state is not None:
        yield "barrier", s.state.count, s.state.stages, s.state.phase, s.kind == "try_wait"
    for tag, accs in (("r", s.reads), ("w", s.writes)):
        for a, acc in enumerate(accs):
            yield f"{tag}{a}", acc.version, p.mult[acc.buffer], 0, False


def derive_carry(p: HProgram, carry: Optional[dict] = None) -> list[HopperObligation]:
    """The obligations of a persistent kernel running ``p`` as one ring over all its tiles (kind
    ``carry``; docs/hopper.md, "Persistent tiles"), each an SMT-LIB2 text whose ``unsat`` proves it:

    * ``carry:ring``: the ring proof covers every CTA: ``p``'s trip count is symbolic and every
      ``N = n T`` (``n >= 1`` tiles, ``T >= 1`` k-tiles) is at least its ``min_trip_count``;
    * ``carry:shape:ROLE``: each role's parts are a ``body`` of extent the trip count, then parts
      of constant extent (the ring's drain after the last tile), as the kernel runs them;
    * ``carry:ROLE:PART:POS:WHAT`` for every barrier state (``barrier``) and smem access (``r0``,
      ``w0``, ...) of every statement: at every tile ``t >= 0`` and k-tile ``0 <= k < T`` (the
      ring's iteration ``t T + k`` of a ring of ``N >= (t + 1) T``), and at every drain step after
      ``t >= 1`` tiles (``N = t T``), where the statement's guard holds and its count ``c >= 0``,
      the kernel's carried count ``base + (c - t T)`` is ``>= 0`` and names the slot (and, for a
      ``try_wait``, the parity) of ``c``.

    ``t`` is the CTA's tile, counted over all its tiles: a ping-pong kernel (docs/hopper_pingpong.md) runs the
    ring's one consumer role on two warp groups, warp group ``w`` taking tiles ``t = 2 j + w``, each at the
    CTA's running count ``t T`` (never its own ``j T``): the same obligations, over every ``t``, cover both.

    ``carry``: ``{role: (slot_base, parity_base, flip)}`` texts in ``t`` and ``T`` (default, and for
    a role not named, :data:`KERNEL_CARRY`). Non-linear (``t T``), asked of Z3 and cvc5 like the
    others. Pure; raises :class:`HopperInputError` on a carry text it cannot parse."""
    carry = dict(carry or {})
    out: list[HopperObligation] = []
    ring_ok = p.tsym is not None and p.min_trip <= 1
    out.append(HopperObligation("carry:ring", "carry", "the ring proof covers a CTA of any n >= 1 tiles of any "
                                "T >= 1 k-tiles: the trip count is symbolic and min_trip_count <= 1", _carry_text(
                                    "carry:ring", "the ring of N = n T iterations is one the proof covers", p,
                                    [], [], ["false" if ring_ok else "true"])))
    for r in p.roles:
        parts = list(r.parts)
        shape_ok = bool(parts) and parts[0].name == "body" and parts[0].extent == ("var", p.tsym) and \
            all(X.const(q.extent) is not None for q in parts[1:])
        out.append(HopperObligation(f"carry:shape:{r.name}", "carry", f"{r.name}'s parts are a body of extent the "
                                    "trip count, then the drain's parts of constant extent", _carry_text(
                                        f"carry:shape:{r.name}", "the role runs per tile as the kernel does", p, [],
                                        [], ["false" if shape_ok else "true"])))
        if not shape_ok or p.tsym is None:
            continue
        try:
            sb, pb, fl = (X.parse(x) for x in carry.get(r.name, KERNEL_CARRY))
        except ValueError as e:
            raise HopperInputError(f"carry.{r.name}", f"unreadable carry: {e}", "write expressions in t and T") \
                from None
        cenv = {"t": "tile", "T": "KT"}
        base = "(* tile KT)"
        for pt in parts:
            body = pt is parts[0]
            for s in pt.stmts:
                for what, count, stages, phase, is_wait in _carry_uses(p, s):
                    oid = f"carry:{_tag(s)}:{what}"
                    desc = (f"{r.name} {pt.name} statement {s.pos}: {_what(s)} {s.barrier if what == 'barrier' else ''}"
                            f"{'' if what == 'barrier' else ('read' if what[0] == 'r' else 'write') + ' ' + what[1:]}"
                            f": at every tile the carried count names the {'slot and parity' if is_wait else 'slot'}"
                            " of the running count")
                    if body:
                        env = {pt.var: "g", p.tsym: "N"}
                        defs = [f"(define-fun g () Int (+ {base} k))"]
                        dom = ["(>= tile 0)", "(>= KT 1)", "(>= k 0)", "(< k KT)", f"(>= N (+ {base} KT))"]
                    else:
                        env = {pt.var: "k", p.tsym: "N"}
                        defs = []
                        dom = ["(>= tile 1)", "(>= KT 1)", f"(= N {base})", "(>= k 0)",
                               f"(< k {X.smt(pt.extent, {p.tsym: 'N'})})"]
                    try:
                        if s.guard is not None:
                            dom.append(X.smt(s.guard, env))
                        defs += [f"(define-fun c () Int {X.smt(count, env)})",
                                 f"(define-fun ks () Int (+ {X.smt(sb, cenv)} (- c {base})))",
                                 f"(define-fun kp () Int (+ {X.smt(pb, cenv)} (- c {base})))",
                                 f"(define-fun fl () Int {X.smt(fl, cenv)})"]
                    except KeyError as e:  # a name the kernel does not know at a tile: the claim fails
                        out.append(HopperObligation(oid, "carry", f"{desc} (it names {e.args[0]}, which is not the "
                                                    "part's variable or the trip count)", _carry_text(
                                                        oid, desc, p, [], [], ["true"])))
                        continue
                    dom.append("(>= c 0)")
                    # a negative carried count is refused: C's / and % (truncating) agree with div/mod from 0 up
                    bad = ["(< ks 0)", f"(not (= (mod ks {stages}) (mod c {stages})))"]
                    if is_wait:
                        bad += ["(< kp 0)", f"(not (= (mod (+ (div kp {stages}) {phase} fl) 2) "
                                f"(mod (+ (div c {stages}) {phase}) 2)))"]
                    out.append(HopperObligation(oid, "carry", desc, _carry_text(
                        oid, desc, p, ["tile", "KT", "k", "N"], defs, dom + [f"(or {' '.join(bad)})"])))
    return out


def derive_once(p: HProgram, reads, hops: int = 1) -> list[HopperObligation]:
    """The ``once`` obligations of a program whose loop reads a buffer loaded once before it (the Q tile of the
    attention program, docs/attention.md): for each ``(role, op, buffer, barrier)`` of ``reads``, every instance of
    ``op`` in ``role`` runs after an instance of one of the role's ``try_wait`` statements on ``barrier`` whose state
    has one stage and phase offset 0 and whose count is 0 (slot 0, phase 0: the phase the load completes on), at an
    earlier step, or at the same step earlier in the part. The count is ``step + c`` (the offsets every other
    obligation uses, proved by the ``wellformed`` obligations), so that instance runs at step ``-c``. Kind
    ``once``, id ``once:<role>:<op>:<buffer>``; the file is the negated claim, as every other."""
    offs = _offsets(p)
    out: list[HopperObligation] = []
    for role, op, buffer, barrier in reads:
        f = _File(p, offs, {}, 1, hops)
        stmts = [s for s in _role_stmts(p, role) if s.kind == "op" and s.op == op]
        waits = [w for w in _role_stmts(p, role) if w.kind == "try_wait" and w.barrier == barrier
                 and w.state.stages == 1 and w.state.phase == 0]
        cases = []
        for s in stmts:
            seen = []
            for w in waits:
                c = -f.offset(w, "count")
                k0 = f.step(str(c) if c >= 0 else f"(- {-c})")
                same = w.part == s.part and w.pos < s.pos
                seen.append(_and(f.runs(w, k0), f"({'<=' if same else '<'} {k0} j)"))
            cases.append(_and(f.runs(s, "j"), _not(_or(seen))))
        oid = f"once:{role}:{op}:{buffer}"
        desc = (f"{role}: every {op} runs after its warp group's try_wait on {barrier}[0] phase 0, the phase the "
                f"copy of {buffer} completes on ({buffer} is loaded once and its reads are not listed)")
        out.append(HopperObligation(oid, "once", desc, f.text(
            [f"synth trusted attention obligation {oid} (once)", desc,
             f"program {p.name}, program.json sha256 {p.sha256}"], _or(cases))))
    return out


# ---------------------------------------------------------------------------------------------
# checking
# ---------------------------------------------------------------------------------------------

def _search_lags(p: HProgram, timeout_s: float, hops: int = 1) -> dict:
    """Role lags under which Z3 proves every no_deadlock obligation (all zero when none does)."""
    others = [r.name for r in p.roles[1:]][:2]
    for combo in itertools.product(LAGS, repeat=len(others)):
        lags = dict(zip(others, combo))
        if all(solvers.z3_answer(o.smt2, timeout_s) == "unsat" for o in derive_hopper(p, lags, hops=hops)
               if o.kind == "no_deadlock"):
            return lags
    return {r: 0 for r in others}


def search_lags(p: HProgram, timeout_s: float, hops: int = 1) -> dict:
    """Role lags of a deadlock ranking under which Z3 proves every ``no_deadlock`` obligation of ``p`` (all zero
    when none does): a hint a certificate records, never a fact (any ranking whose files are unsat proves it)."""
    return _search_lags(p, timeout_s, hops)


def wgmma_tightness(p: HProgram, timeout_s: float, hops: int = 1) -> tuple:
    """A :class:`WaitTightness` per wgmma wait of ``p`` (whose obligations are proven): ``N + 1``
    is substituted for its count and the ``release_after_wgmma``, ``slot_reuse`` and ``wgmma_drain``
    obligations whose text changes are asked of Z3; one satisfiable means ``N + 1`` lets a slot be
    released or refilled while a wgmma may still read it, or lets the warp group finish with a group
    pending, so ``N`` is tight. None changes: no release, refill or drain depends on the wait (it is
    redundant)."""
    kinds = ("release_after_wgmma", "slot_reuse", "wgmma_drain")
    base = {o.id: o.smt2 for o in derive_hopper(p, kinds=kinds, hops=hops)}
    out = []
    for r in p.roles:
        for idx, w in enumerate(r.waits):
            waits = list(r.waits)
            waits[idx] = replace(w, in_flight=("bin", "+", w.in_flight, ("num", 1)))
            q = replace(p, roles=tuple(replace(x, waits=tuple(waits)) if x.name == r.name else x for x in p.roles))
            what = f"wait_group #{idx} of {r.name} {w.part}"
            try:
                changed = [o for o in derive_hopper(q, kinds=kinds, hops=hops) if o.smt2 != base.get(o.id)]
            except (_TooLarge, RecursionError):
                out.append(WaitTightness(r.name, idx, w.part, None, f"{what}: tightness unknown (N + 1 is outside "
                                         "the checker's bounds)", w.claimed_tight))
                continue
            if not changed:
                out.append(WaitTightness(r.name, idx, w.part, False, f"{what}: not tight: no release, refill or "
                                         "drain depends on it (it is redundant)", w.claimed_tight))
                continue
            answers = [(o, solvers.z3_answer(o.smt2, timeout_s)) for o in changed]
            bad = next((o for o, a in answers if a == "sat"), None)
            if bad is not None:
                out.append(WaitTightness(r.name, idx, w.part, True, f"{what}: tight: with N + 1 in flight "
                                         f"{bad.id} fails", w.claimed_tight))
            elif all(a == "unsat" for _, a in answers):
                out.append(WaitTightness(r.name, idx, w.part, False, f"{what}: not tight: N + 1 in flight is also "
                                         "safe", w.claimed_tight))
            else:
                out.append(WaitTightness(r.name, idx, w.part, None, f"{what}: tightness unknown (z3 gave no answer "
                                         f"within {timeout_s:g} s)", w.claimed_tight))
    return tuple(out)


def _ask(o: HopperObligation, timeout_s: float) -> HopperCheck:
    z = solvers.z3_answer(o.smt2, timeout_s)
    # a refutation by Z3 fails the program whatever cvc5 says: do not spend its time limit on it
    c = solvers.cvc5_answer(o.smt2, timeout_s) if z == "unsat" else "not asked"
    return HopperCheck(o.id, o.kind, o.description, z, c, z == "unsat" and c == "unsat")


def check_hopper_program(data: bytes, *, timeout_s: float = 60.0, tightness: bool = True,
                         persistent: bool = False, hops: int = 1) -> TrustedHopperResult:
    """Re-derive every obligation of the Hopper ``program.json`` in ``data`` and ask Z3 and cvc5 each
    (``timeout_s`` per solver call); with ``persistent`` (the kernel walks tiles, the problem's
    ``persistent: true`` or ``pingpong: true``) also the ``carry`` obligations of :func:`derive_carry`. ``ok`` iff
    the file is accepted, both solvers answer ``unsat``
    to every obligation and no wgmma wait claims (``"tight": true``) a tightness the check does not
    show. With ``tightness`` (and every obligation proven) each wgmma wait's tightness is reported
    (:func:`wgmma_tightness`). Never raises on bad input: a refused file gives ``ok`` False with the
    reason (JSON path, problem, fix) in ``messages``. ``hops``: the barrier hops of "complete before" and "after"
    (1, what a certificate's files are derived with; the attention program of three consumer warp groups, whose
    ping-pong order is a ring, needs 2: docs/attention.md)."""
    t0 = time.perf_counter()
    try:
        p = read_hopper_bytes(data)
    except HopperInputError as e:
        return TrustedHopperResult(False, (), (f"independent Hopper check FAILED: program.json refused: {e} "
                                               f"(fix: {e.fix})",), seconds=time.perf_counter() - t0)
    missing = solvers.missing()
    if missing:
        return TrustedHopperResult(False, (), (f"independent Hopper check FAILED: missing solver(s): "
                                               f"{', '.join(missing)}",), sha256=p.sha256)
    try:
        first = derive_hopper(p, hops=hops)
        # the offsets every other obligation relies on: when they fail, the others mean nothing
        wf = [_ask(o, timeout_s) for o in first if o.kind == "wellformed"]
        if not all(c.ok for c in wf):
            fails = [f"{c.id} [{c.kind}]: {c.description} (z3 {c.z3}, cvc5 {c.cvc5})" for c in wf if not c.ok]
            return TrustedHopperResult(False, tuple(wf), tuple(
                [f"independent Hopper check FAILED: {p.name} is not well formed; the other {len(first) - len(wf)} "
                 "obligations were not asked"] + fails), (), time.perf_counter() - t0, p.sha256)
        lags = _search_lags(p, timeout_s, hops)
        obs = derive_hopper(p, lags, hops=hops)
    except (_TooLarge, RecursionError) as e:
        return TrustedHopperResult(False, (), (f"independent Hopper check FAILED: {p.name}: program outside the "
                                               f"checker's bounds: {e!s} (split the loop or use fewer stages)",),
                                   sha256=p.sha256)
    checks = wf + [_ask(o, timeout_s) for o in obs if o.kind != "wellformed"]
    if persistent:
        checks += [_ask(o, timeout_s) for o in derive_carry(p)]
    proven = all(c.ok for c in checks)
    waits = wgmma_tightness(p, timeout_s, hops) if proven and tightness else ()
    # a claim of tightness is tested, never believed: unchecked (tightness off) it fails too
    unchecked = [] if waits or not proven else [(r.name, k) for r in p.roles for k, w in enumerate(r.waits)
                                  if w.claimed_tight is True]
    ok = proven and all(w.ok for w in waits) and not unchecked
    rank = ", ".join(f"{k} {v:+d}" for k, v in lags.items()) or "none needed"
    classes = ", ".join(f"{k} {a}/{b}" for k, (a, b) in TrustedHopperResult(ok, tuple(checks), ()).by_class().items())
    head = (f"independent Hopper check {'OK' if ok else 'FAILED'}: {sum(c.ok for c in checks)}/{len(checks)} "
            f"obligations of {p.name} re-derived by synth.trusted and unsat with z3 and cvc5 ({classes}; "
            f"deadlock ranking lags: {rank})")
    fails = [f"{c.id} [{c.kind}]: {c.description} (z3 {c.z3}, cvc5 {c.cvc5})" for c in checks if not c.ok]
    fails += [f"the file claims \"tight\": true, but {w.reason}" for w in waits if not w.ok]
    fails += [f"wait_group #{k} of {role} claims \"tight\": true, which was not checked" for role, k in unchecked]
    return TrustedHopperResult(ok, tuple(checks), tuple([head] + [w.reason for w in waits] + fails),
                               tuple(lags.items()), time.perf_counter() - t0, p.sha256, waits)


__all__ = ["check_hopper_program", "derive_hopper", "derive_carry", "derive_once", "search_lags", "read_persistent_flag", "read_carry_flag",
           "wgmma_tightness",
           "TrustedHopperResult", "HopperCheck", "HopperObligation", "WaitTightness", "CLASSES", "KERNEL_CARRY",
           "MAX_FLAG_BYTES"]

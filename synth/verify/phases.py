"""Proofs for Hopper programs: mbarrier phases, transaction bytes and wgmma groups, every ``T``.

Input: a :class:`~synth.hopper.ir.HopperProgram`. Output: a :class:`HopperReport` with one
Z3 query per obligation (the negation; ``unsat`` proves it), classes ``arrivals``,
``tx_bytes``, ``parity``, ``no_deadlock``, ``release_after_wgmma``, ``wgmma_wait``,
``wgmma_drain``, ``slot_reuse``, ``raw``, ``coverage``, ``fence``, ``teardown``, ``converge``,
``wellformed`` (docs/hopper.md gives each claim). One deadline may bound the whole call (:func:`verify_hopper`).

One encoder, two completion variants: every role is a :class:`~synth.program.Program`
encoded by :class:`synth.verify.encode.Encoder` (part membership, guards, predicates and
the **group FIFO** variant: ``done_before`` of a wgmma through its ``wait_group``); this
module adds the **barrier phase** variant. Each query is anchored at a statement instance of
a role at a symbolic step (the role encoder's ``j``); partner instances are found through
their state counts, which must be ``step + c`` for a constant ``c`` (``wellformed``): the
instance of statement ``A`` whose count is ``x`` runs at step ``x - c``, a fresh encoder's
step defined by an equation at the top of the query (never under a negation).

A barrier statement with state ``(count, stages, phase)`` on a barrier of ``slots`` slots
names slot ``(x % stages) % slots`` and phase ``x / stages`` (``x`` its count); a
``try_wait`` waits for phase ``x / stages - phase`` (``-1``: passes at once). The phase of
(barrier, slot) ``n`` *gets* the arrivals of the statement instances naming it (times the
role's warp groups), the bytes of the ``expect_tx`` entries whose gate holds, and the box
bytes of the TMA copies that run.

"Phase ``n`` complete before instance ``P``" (``_done_before``) is shown by a wait of ``P``'s
role at most ``D`` steps earlier on the same slot and a phase ``>= n``, or by one hop: an
earlier wait of ``P``'s role on any barrier whose phase has an arrival ``A'`` (that runs) with
such a wait before ``A'`` in ``A'``'s role. "``A`` happens after ``W`` passes" (``_after``):
``A`` later in ``W``'s role, or one hop the other way. Both are sufficient conditions (the
search is bounded: ``D = max(slots, stages) + 1`` steps, one hop); the induction on time that
justifies reading a passed wait as a completed phase is that every phase gets exactly its
arrivals and bytes (``arrivals``, ``tx_bytes``) and no waiter runs ahead or falls two behind
(``parity``).
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import z3

from ..completion import ArriveStmt, BarSyncStmt, FenceStmt, InitStmt, InvalStmt, TryWaitStmt
from ..deadline import Deadline
from ..errors import SynthError
from ..expr import Bin, Expr, Num, parse, simplify, to_str, to_z3
from ..hopper.ir import HopperError, HopperProgram, validate_hopper
from ..hopper.printer import wait_count
from ..program import OpStmt, WaitStmt
from .encode import And, Encoder, Ind, NeedsWaits, Not, Or, Point, Sum, Unsupported
from .obligations import blame
from .oracle_phases import run
from .report import Counterexample, ObligationResult

CLASSES = ("parity", "arrivals", "tx_bytes", "no_deadlock", "release_after_wgmma", "wgmma_wait", "wgmma_drain",
           "slot_reuse", "raw", "coverage", "fence", "teardown", "converge", "wellformed")


@dataclass(frozen=True)
class Ref:
    """A statement of a role."""

    role: str
    part: str
    pos: int
    stmt: object


class Phases:
    """Terms of the queries over a Hopper program: one encoder per role instance.

    A partner instance is the role's encoder at a step *term* (``anchor + c``, or a count minus its offset),
    simplified by Z3 and shared: every query that places an instance of a role at the same step term gets the
    same encoder and the same terms (no fresh step variable and no defining equation). One :class:`Phases`
    serves every obligation of a program (for one trip count, one set of wait overrides and one deadlock
    ranking): the terms of the phases, their members and the waits before an instance are built once."""

    def __init__(self, program: HopperProgram, *, trip: Optional[int] = None,
                 overrides: Optional[dict[str, dict[int, Expr]]] = None,
                 lags: Optional[dict[str, int]] = None, no_waits: bool = False, hops: int = 1) -> None:
        self.p = program
        self.hops = hops
        """Barrier hops the "complete before" and "after" searches may take (1: the default; a ring of ``C``
        warp groups handing a turn on, as the attention program's ping-pong order of three consumers, needs
        ``C - 1``: :func:`verify_hopper`'s ``hops``)."""
        self.lags = lags or {}
        """Per role, steps subtracted from its step in the deadlock ranking (:meth:`rank_before`)."""
        self.trip = trip
        self.overrides = overrides or {}
        self.roles = {r.name: r for r in program.roles}
        self.order = {r.name: k for k, r in enumerate(program.roles)}
        self.bars = {b.name: b for b in program.barriers}
        self.tsym = program.trip_count if isinstance(program.trip_count, str) else None
        self.defs: list = []
        """Definitions a query needs beside its formula (none: instances are placed by step terms)."""
        self._n = 0
        self._proto = {r.name: Encoder(r.program, trip=self.trip, overrides=self.overrides.get(r.name, {}),
                                       step=f"j.{r.name}.a", no_waits=no_waits) for r in program.roles}
        self.base = dict(self._proto)
        """Each role's anchor encoder (step variable ``j.<role>.a``)."""
        self.T = self.base[program.roles[0].name].T
        self._refs = _all_refs(program)
        self._role_refs = {r.name: _role_refs(program, r.name) for r in program.roles}
        self.D = max([b.slots for b in program.barriers] + [_stages(s) for s in self._refs] + [1]) + 1
        self._offsets: dict = {}
        self._at: dict = {}
        self._memo: dict = {}
        self._pins: list = []

    def fresh(self, role: str, tag: Optional[str] = None) -> Encoder:
        """An instance of ``role`` at a step of its own (a free variable ``j.<role>.<tag>``; the same encoder for
        the same ``tag``, a new one each time without)."""
        if tag is None:
            self._n += 1
            return self._proto[role].moved(z3.Int(f"j.{role}.{self._n}"))
        key = ("fresh", role, tag)
        if key not in self._memo:
            self._memo[key] = self._proto[role].moved(z3.Int(f"j.{role}.{tag}"))
        return self._memo[key]

    def enc_at(self, role: str, j) -> Encoder:
        """The instance of ``role`` at step term ``j`` (simplified; one encoder per role and term)."""
        raw = ("raw", role) + self._key(j)  # the term as built (hash-consed: rebuilt, it has the same id)
        enc = self._at.get(raw)
        if enc is not None:
            return enc
        j = z3.simplify(j)
        key = (role, j.get_id())
        enc = self._at.get(key)
        if enc is None:
            enc = self._at[key] = self._proto[role].moved(j)  # the encoder holds j: its id stays its own
        self._at[raw] = enc
        return enc

    def _key(self, *terms) -> tuple:
        """Ids of ``terms`` (None stays None) for a memo key; the terms are kept alive so no id is reused."""
        self._pins.extend(t for t in terms if t is not None)
        return tuple(None if t is None else t.get_id() for t in terms)

    def domain(self) -> list:
        return self.base[self.p.roles[0].name].domain()

    # -- statements ---------------------------------------------------------------------------
    def offset(self, ref: Ref, e: Expr) -> int:
        key = (ref.role, ref.part, e)
        if key not in self._offsets:
            self._offsets[key] = self.base[ref.role].offset(ref.part, e)
        c = self._offsets[key]
        if c is None:
            raise Unsupported(f"{ref.role} {ref.part} statement {ref.pos}: {to_str(e)} is not the step plus a "
                              f"constant")
        return c

    def exec(self, enc: Encoder, ref: Ref):
        key = ("exec", ref.part, ref.pos)
        hit = enc._memo.get(key)
        if hit is None:
            if isinstance(ref.stmt, OpStmt):
                hit = enc.op_exec(ref.part, ref.pos, 0)
            else:
                hit = And(enc.in_part(ref.part, 0), enc.guard(ref.part, ref.pos, 0))
            enc._memo[key] = hit
        return hit

    def count(self, enc: Encoder, ref: Ref):
        key = ("count", ref.part, ref.pos)
        hit = enc._memo.get(key)
        if hit is None:
            hit = enc._memo[key] = enc.int_term(enc.expr(_state(ref.stmt).count, ref.part, 0))
        return hit

    def at(self, ref: Ref, x, e: Optional[Expr] = None) -> Encoder:
        """The instance of ``ref`` whose count (or expression ``e``) is ``x``."""
        c = self.offset(ref, e if e is not None else _state(ref.stmt).count)
        return self.enc_at(ref.role, x - c)

    def slot_phase(self, ref: Ref, x):
        key = ("slot_phase", ref.role, ref.part, ref.pos) + self._key(x)
        hit = self._memo.get(key)
        if hit is None:
            st = _state(ref.stmt)
            b = self.bars[stmt_barrier(ref.stmt)]
            hit = self._memo[key] = ((x % st.stages) % b.slots, x / st.stages)
        return hit

    def ring(self, ref: Ref, x, shift: int = 0):
        """``n * slots + sl`` for the (slot ``sl``, phase ``n``) that :meth:`slot_phase` (``shift`` 0) or
        :meth:`waited` (``shift``: the wait's phase) gives for count ``x``, as a term equal to it for every value:
        ``x - shift * slots`` when the statement's stages are the barrier's slots (``x = st (x / st) + x % st``),
        else None. A member whose stages are the slots has this count: its instance is placed at it."""
        st = _state(ref.stmt).stages
        if st != self.bars[stmt_barrier(ref.stmt)].slots:
            return None
        return x - shift * st if shift else x

    def waited(self, ref: Ref, x):
        """(slot, phase waited for) of a try_wait whose count is ``x``."""
        sl, n = self.slot_phase(ref, x)
        return sl, n - _state(ref.stmt).phase

    def holds(self, op: str, x):
        o = self.p.op(op)
        if o.when is None:
            return z3.BoolVal(True)
        env = {self.p.loop_var: x}
        if self.tsym:
            env[self.tsym] = self.T
        return to_z3(parse(o.when), env)

    # -- phases -------------------------------------------------------------------------------
    def members(self, barrier: str, sl, n, kinds=("arrive", "tma"), keep: Optional[Callable] = None, x=None):
        """``(ref, encoder, runs, count)`` for every statement instance that names phase ``n`` of slot
        ``sl`` of ``barrier`` (only the statements ``keep`` accepts, when given). ``x``, when given, equals
        ``n * slots + sl`` (:meth:`ring`): the count of a member whose stages are the slots."""
        key = ("members", barrier, kinds, keep.__name__ if keep is not None else None) + self._key(sl, n, x)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        b = self.bars[barrier]
        out = []
        for ref in self._refs:
            kind = stmt_kind(ref.stmt)
            if kind not in kinds or stmt_barrier(ref.stmt) != barrier or (keep is not None and not keep(ref)):
                continue
            st = _state(ref.stmt).stages
            if st == b.slots:  # the slot is the ring index: one instance, count n * st + sl
                xx = x if x is not None else n * st + sl
                enc = self.at(ref, xx)
                out.append((ref, enc, self.exec(enc, ref), xx))
                continue
            for t in range(st):
                xx = n * st + t
                enc = self.at(ref, xx)
                out.append((ref, enc, And(sl == (t % b.slots), self.exec(enc, ref)), xx))
        self._memo[key] = out
        return out

    def waiters(self, barrier: str, sl, n, x=None):
        """One condition per ``try_wait`` instance (any role) that waits for phase ``n`` of slot ``sl``
        of ``barrier``: that it runs. States are compared by value (slot and phase), never as text. ``x``:
        as for :meth:`members`."""
        b = self.bars[barrier]
        out = []
        for ref in self._refs:
            if not isinstance(ref.stmt, TryWaitStmt) or ref.stmt.barrier != barrier:
                continue
            st, base = ref.stmt.state.stages, n + ref.stmt.state.phase
            for t in ([None] if st == b.slots else range(st)):
                if t is None:
                    xx = x + ref.stmt.state.phase * st if x is not None else base * st + sl
                else:
                    xx = base * st + t
                try:
                    enc = self.at(ref, xx)
                except Unsupported:  # a count that is not the step plus a constant is not counted
                    continue
                out.append(self.exec(enc, ref) if t is None else And(sl == (t % b.slots), self.exec(enc, ref)))
        return out

    def arrivals(self, ms):
        return Sum([z3.If(r, z3.IntVal(ref.stmt.arrivals * self.roles[ref.role].warpgroups), z3.IntVal(0))
                    for ref, _, r, _ in ms if isinstance(ref.stmt, ArriveStmt)])

    def expected(self, ms):
        terms = []
        for ref, _, r, x in ms:
            if isinstance(ref.stmt, ArriveStmt):
                for t in ref.stmt.tx:
                    cond = r if t.gate is None else And(r, self.holds(t.gate, x))
                    terms.append(z3.If(cond, z3.IntVal(t.bytes * self.roles[ref.role].warpgroups), z3.IntVal(0)))
        return Sum(terms)

    def delivered(self, ms):
        return Sum([z3.If(r, z3.IntVal(ref.stmt.barrier.bytes * self.roles[ref.role].warpgroups), z3.IntVal(0))
                    for ref, _, r, _ in ms if isinstance(ref.stmt, OpStmt)])

    # -- order --------------------------------------------------------------------------------
    @staticmethod
    def po_before(e1: Encoder, r1: Ref, e2: Encoder, r2: Ref):
        """Instance 1 comes before instance 2 of the same role."""
        same = r1.part == r2.part and r1.pos < r2.pos
        return Or(e1.j < e2.j, And(e1.j == e2.j, z3.BoolVal(same)))

    def earlier_waits(self, enc: Encoder, ref: Ref, barrier: Optional[str] = None):
        """``(wait ref, encoder, runs-and-earlier)`` for waits of ``ref``'s role at most ``D`` steps back."""
        key = ("earlier", ref.role, ref.part, ref.pos, barrier) + self._key(enc.j)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = []
        for w in self._role_refs[ref.role]:
            if not isinstance(w.stmt, TryWaitStmt) or (barrier is not None and w.stmt.barrier != barrier):
                continue
            for d in range(self.D + 1):
                if d == 0 and not (w.part == ref.part and w.pos < ref.pos):
                    continue
                e = self.enc_at(ref.role, enc.j - d)
                out.append((w, e, self.exec(e, w)))
        self._memo[key] = out
        return out

    def done_before(self, barrier: str, sl, n, enc: Encoder, ref: Ref, hops: Optional[int] = None):
        """Phase ``n`` of slot ``sl`` of ``barrier`` is complete before instance ``(enc, ref)`` runs (through at
        most ``hops`` barrier hops; None: :attr:`hops`)."""
        if hops is None:
            hops = self.hops
        key = ("done", barrier, ref.role, ref.part, ref.pos, hops) + self._key(sl, n, enc.j)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        cases = [n < 0]
        for w, e, runs in self.earlier_waits(enc, ref, barrier):
            wsl, wn = self.waited(w, self.count(e, w))
            cases.append(And(runs, wsl == sl, wn >= n))
        if hops and len(self.roles) > 1:  # a hop goes through another role's arrival, or a peer's copy
            for w, e, runs in self.earlier_waits(enc, ref):
                wx = self.count(e, w)
                wsl, wn = self.waited(w, wx)
                wr = self.ring(w, wx, w.stmt.state.phase)
                hop = self.members(w.stmt.barrier, wsl, wn, ("arrive",), x=wr) + \
                    self.members(w.stmt.barrier, wsl, wn, ("tma",), keep=self.peer_copy, x=wr)
                for aref, ae, ar, _ in hop:
                    if aref.role == ref.role:
                        continue
                    cases.append(And(runs, wn >= 0, ar, self.done_before(barrier, sl, n, ae, aref, hops - 1)))
        out = self._memo[key] = Or(cases)
        return out

    def peer_copy(self, ref: Ref) -> bool:
        """A TMA copy that orders a hop of :meth:`done_before` like an arrival: it delivers bytes (> 0) to
        a barrier its role never arrives on (a peer CTA's multicast, docs/hopper_cluster.md). Its phase
        completes only after it lands (``tx_bytes``: the phase gets exactly the bytes it expects), so what
        its role waited for before issuing it is complete when that phase is. A copy of a role that also
        arrives on the barrier adds nothing its arrival does not already give, and is left out."""
        b = stmt_barrier(ref.stmt)
        return ref.stmt.barrier.bytes > 0 and not any(
            isinstance(x.stmt, ArriveStmt) and x.stmt.barrier == b for x in self._role_refs[ref.role])

    def after(self, aenc: Encoder, aref: Ref, wenc: Encoder, wref: Ref, hops: Optional[int] = None):
        """Instance ``A`` runs after wait ``W`` has passed (through at most ``hops`` barrier hops; None:
        :attr:`hops`)."""
        if aref.role == wref.role:  # one thread: after in program order, or before it
            return self.po_before(wenc, wref, aenc, aref)
        if hops is None:
            hops = self.hops
        key = ("after", aref.role, aref.part, aref.pos, wref.role, wref.part, wref.pos) + self._key(aenc.j, wenc.j)
        if hops != 1:
            key += (hops,)
        if key in self._memo:
            return self._memo[key]
        cases = []
        for w2, e2, runs in self.earlier_waits(aenc, aref):
            x2 = self.count(e2, w2)
            sl2, n2 = self.waited(w2, x2)
            for a2, ae2, ar2, _ in self.members(w2.stmt.barrier, sl2, n2, ("arrive",),
                                                x=self.ring(w2, x2, w2.stmt.state.phase)):
                if a2.role == wref.role:
                    cases.append(And(runs, n2 >= 0, ar2, self.po_before(wenc, wref, ae2, a2)))
                elif hops > 1 and a2.role != aref.role:
                    cases.append(And(runs, n2 >= 0, ar2, self.after(ae2, a2, wenc, wref, hops - 1)))
        out = self._memo[key] = Or(cases)
        return out

    def rank_before(self, e1: Encoder, r1: Ref, e2: Encoder, r2: Ref):
        """(step - lag of its role, role, position) of instance 1 is below that of instance 2."""
        o1, o2 = self.order[r1.role], self.order[r2.role]
        tie = o1 < o2 or (o1 == o2 and r1.part == r2.part and r1.pos < r2.pos)
        a = e1.j - self.lags.get(r1.role, 0)
        b = e2.j - self.lags.get(r2.role, 0)
        return Or(a < b, And(a == b, z3.BoolVal(tie)))


def _state(s):
    return s.barrier.state if isinstance(s, OpStmt) else s.state


def stmt_barrier(s) -> str:
    """The barrier a Hopper statement names (a TMA copy's: the barrier it completes on)."""
    return s.barrier.barrier if isinstance(s, OpStmt) else s.barrier


def stmt_kind(s) -> str:
    """``tma`` for a TMA copy, ``op`` for another op, else the statement's own kind (``arrive``, ``try_wait``, ...)."""
    if isinstance(s, OpStmt):
        return "tma" if s.barrier is not None else "op"
    return s.kind


def _stages(ref: Ref) -> int:
    return _state(ref.stmt).stages if stmt_kind(ref.stmt) in ("arrive", "try_wait", "tma") else 1


def _role_refs(p: HopperProgram, role: str) -> list[Ref]:
    r = p.role(role)
    return [Ref(role, pt.name, k, s) for pt in r.program.parts for k, s in enumerate(pt.stmts)]


def _all_refs(p: HopperProgram) -> list[Ref]:
    return [x for r in p.roles for x in _role_refs(p, r.name)]


# --------------------------------------------------------------------------------------------
# obligations
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HObligation:
    id: str
    kind: str
    role: str
    part: str
    pos: int
    wait: Optional[int]
    """The role's wgmma wait this obligation is charged to (release_after_wgmma, wgmma_wait)."""
    description: str
    build: Callable = field(compare=False, repr=False)
    """``build(ph) -> (negated formula, {name: term})`` for a fresh :class:`Phases`."""


def _where(ref: Ref) -> str:
    return f"{ref.role} {ref.part} statement {ref.pos}"


def enumerate_hopper(p: HopperProgram) -> list[HObligation]:
    """Every obligation of ``p`` in a stable order."""
    out: list[HObligation] = []
    for ref in _all_refs(p):
        s = ref.stmt
        tag = f"{ref.role}:{ref.part}:{ref.pos}"
        if isinstance(s, TryWaitStmt):
            out += _wait_obligations(p, ref, tag)
        elif isinstance(s, ArriveStmt):
            out += _arrive_obligations(p, ref, tag)
        elif isinstance(s, OpStmt) and s.barrier is not None:
            out += _tma_obligations(p, ref, tag)
        elif isinstance(s, WaitStmt):
            w = p.role(ref.role).program.waits[s.wait]
            out.append(HObligation(f"wgmma_wait:{tag}", "wgmma_wait", ref.role, ref.part, ref.pos, s.wait,
                                   f"{ref.role} {ref.part}: wait_group {to_str(w.in_flight)} has a count >= 0 "
                                   f"wherever it runs", _count_builder(ref)))
        if isinstance(s, OpStmt):
            for a, acc in enumerate(s.reads):
                if acc.producer is not None and any(_is_tma_of(r, acc.producer, acc.buffer) for r in _all_refs(p)):
                    out.append(HObligation(f"raw:{tag}:r{a}", "raw", ref.role, ref.part, ref.pos, None,
                                           f"{ref.role} {ref.part}: {s.op} reads {acc.buffer} version "
                                           f"{to_str(acc.version)} after a wait on the phase its TMA "
                                           f"{acc.producer} completes on (and some TMA writes that version)",
                                           _raw_builder(p, ref, a)))
    out += _drain_obligations(p)
    out += _coverage_obligations(p)
    out += _fence_obligations(p)
    out += _converge_obligations(p)
    return out


def converges(role, s) -> bool:
    """Whether statement ``s`` of ``role`` is a warp-group convergence point: an instance of an op the
    role issues as a collective (``wgmma.mma_async.sync.aligned``) or a ``bar_sync``."""
    return isinstance(s, BarSyncStmt) or (isinstance(s, OpStmt) and s.op in role.collective)


def _converge_obligations(p: HopperProgram) -> list[HObligation]:
    """``converge``: in a role of many threads per warp group, every statement one elected thread runs
    for the warp group on a barrier some ``try_wait`` waits on (an arrive, a TMA copy) is preceded, in
    the role's program order, by a convergence point that runs after each all-thread ``try_wait``
    instance before it. Then no thread of the warp group is still before such a wait when the elected
    thread acts for all of them, and the one-actor proofs (``parity``, ``no_deadlock``, the releases)
    hold for every thread. One obligation per (elected statement, wait statement) of the role."""
    waited = {r.stmt.barrier for r in _all_refs(p) if isinstance(r.stmt, TryWaitStmt)}
    out = []
    for r in p.roles:
        if r.threads <= 1:
            continue
        refs = _role_refs(p, r.name)
        waits = [x for x in refs if isinstance(x.stmt, TryWaitStmt)]
        convs = [x for x in refs if converges(r, x.stmt)]
        for a in refs:
            if stmt_kind(a.stmt) not in ("arrive", "tma") or stmt_barrier(a.stmt) not in waited:
                continue
            what = f"TMA {a.stmt.op}" if stmt_kind(a.stmt) == "tma" else "arrive"
            for w in waits:
                out.append(HObligation(
                    f"converge:{r.name}:{a.part}:{a.pos}<-{w.part}:{w.pos}", "converge", r.name, a.part, a.pos, None,
                    f"{r.name} {a.part}: the elected thread's {what} on {stmt_barrier(a.stmt)}"
                    f"[{to_str(_state(a.stmt).index())}] comes after a convergence point (collective wgmma or "
                    f"bar_sync) that follows every earlier try_wait {w.stmt.barrier}[{to_str(w.stmt.state.index())}] "
                    f"({w.part} statement {w.pos}) of its warp group's {r.threads} threads",
                    _converge_builder(a, w, convs)))
    return out


def _converge_builder(aref: Ref, wref: Ref, convs: list[Ref]):
    """The negation: the elected instance ``A`` (step ``j``) runs, an instance of wait ``W`` runs before
    it, and no convergence instance runs between them. Candidates: each convergence statement at the
    wait's step and up to ``D`` steps after it, and at ``A``'s step and up to ``D`` steps before (a
    sufficient condition). ``harm``: the phase after the one ``W`` waits for gets an arrival or a copy
    that runs, so a thread still before ``W`` would see its parity again (two phases behind)."""
    def build(ph: Phases):
        enc = ph.base[aref.role]
        wenc = ph.fresh(aref.role, "w")  # the wait's instance: any step (a free variable)
        between = []
        for c in convs:
            for d in range(ph.D + 1):
                for anchor, sign in ((wenc, 1), (enc, -1)):
                    ce = ph.enc_at(aref.role, anchor.j + sign * d)
                    between.append(And(ph.exec(ce, c), ph.po_before(wenc, wref, ce, c), ph.po_before(ce, c, enc, aref)))
        wx = ph.count(wenc, wref)
        wsl, wn = ph.waited(wref, wx)
        wr = ph.ring(wref, wx, wref.stmt.state.phase)
        harm = Or([r for _, _, r, _ in ph.members(wref.stmt.barrier, wsl, wn + 1,
                                                   x=None if wr is None else wr + ph.bars[wref.stmt.barrier].slots)])
        x = ph.count(enc, aref)
        sl, n = ph.slot_phase(aref, x)
        f = And(ph.exec(enc, aref), ph.exec(wenc, wref), ph.po_before(wenc, wref, enc, aref), Not(Or(between)))
        return f, {"x": x, "slot": sl, "phase": n, "wx": wx, "wslot": wsl, "wphase": wn, "wj": wenc.j, "harm": harm}
    return build


def _drain_obligations(p: HopperProgram) -> list[HObligation]:
    """``wgmma_drain``: every wgmma a warp group issues is in a committed group that a later
    ``wait_group`` of the same warp group forces complete (at most ``D`` steps later), so no group is
    pending when the role ends and the accumulators are read. Charged to the role's last wait on the
    queue (the drain)."""
    out = []
    for r in p.roles:
        prog = r.program
        for ref in _role_refs(p, r.name):
            s = ref.stmt
            if not isinstance(s, OpStmt) or s.barrier is not None or not prog.op(s.op).is_async:
                continue
            q = prog.commit_queue(s.op)
            last = [w.stmt.wait for w in _role_refs(p, r.name) if isinstance(w.stmt, WaitStmt)
                    and prog.waits[w.stmt.wait].queue == q]
            out.append(HObligation(f"wgmma_drain:{r.name}:{ref.part}:{ref.pos}", "wgmma_drain", r.name, ref.part,
                                   ref.pos, last[-1] if last else None,
                                   f"{r.name} {ref.part}: wgmma {s.op}({to_str(s.iteration)}) is committed and its "
                                   f"group complete (a later wait_group forces it) before the warp group finishes",
                                   _drain_builder(ref)))
    return out


def _drain_builder(ref: Ref):
    def build(ph: Phases):
        enc = ph.base[ref.role]
        runs = enc.op_exec(ref.part, ref.pos, 0)
        c = enc.commit_of(ref.part, ref.pos)
        if c is None:
            return runs, {}
        q = enc.part[ref.part].stmts[c].queue
        # the window ends after step j + D: every statement of those steps is between
        done = And(enc.commit_exec(ref.part, c, 0), enc.forced(q, Point(0, ref.part, c),
                                                               Point(ph.D + 1, enc.parts[0], 0)))
        return And(runs, Not(done)), {}
    return build


def _coverage_obligations(p: HopperProgram) -> list[HObligation]:
    """``coverage``: in every role that runs an op, each warp group runs each of its iterations
    ``0 <= v < T`` exactly once (none where its ``when`` is false) and no other; an op that no role
    runs is refuted (a k-tile whose copy or wgmma never happens)."""
    out = []
    for o in p.ops:
        roles = [r for r in p.roles if any(isinstance(x.stmt, OpStmt) and x.stmt.op == o.name
                                           for x in _role_refs(p, r.name))]
        if not roles:
            out.append(HObligation(f"coverage:{o.name}", "coverage", "program", "ops", 0, None,
                                   f"op {o.name} is run by some role", _const(True, {})))
        for r in roles:
            refs = [x for x in _role_refs(p, r.name) if isinstance(x.stmt, OpStmt) and x.stmt.op == o.name]
            out.append(HObligation(f"coverage:{r.name}:{o.name}", "coverage", r.name, refs[0].part, refs[0].pos,
                                   None, f"{r.name}: {o.name} runs each iteration 0 <= v < T exactly once (unless "
                                   f"its when is false there) and no other", _coverage_builder(o.name, refs)))
    return out


def _coverage_builder(op: str, refs: list[Ref]):
    def build(ph: Phases):
        v = z3.Int(f"cov.{op}")
        runs = []
        for ref in refs:
            enc = ph.at(ref, v, ref.stmt.iteration)
            runs.append(And(enc.in_part(ref.part, 0), enc.guard(ref.part, ref.pos, 0), ph.holds(op, v)))
        n = Sum([Ind(x) for x in runs])
        inside = And(0 <= v, v < ph.T)
        f = Or(n >= 2, And(n >= 1, Not(inside)), And(n == 0, inside, ph.holds(op, v)))
        return f, {"x": v, "runs": n}
    return build


def _is_tma_of(ref: Ref, op: str, buffer: str) -> bool:
    s = ref.stmt
    return isinstance(s, OpStmt) and s.barrier is not None and s.op == op and any(w.buffer == buffer
                                                                                 for w in s.writes)


def _wait_obligations(p: HopperProgram, ref: Ref, tag: str) -> list[HObligation]:
    s = ref.stmt
    b = p.barrier(s.barrier)
    head = f"{ref.role} {ref.part}: try_wait {s.barrier}[{to_str(s.state.index())}] parity " \
           f"{to_str(s.state.parity())}"

    def common(ph: Phases):
        enc = ph.base[ref.role]
        x = ph.count(enc, ref)
        sl, w = ph.waited(ref, x)
        return enc, x, sl, w

    def ring(ph: Phases, x, k: int = 0):
        """``w + k`` times the slots plus ``sl``, as :meth:`Phases.ring` gives it (None: not known)."""
        r = ph.ring(ref, x, s.state.phase)
        return None if r is None else r + k * b.slots

    def arrivals(ph: Phases):
        enc, x, sl, w = common(ph)
        ms = ph.members(s.barrier, sl, w, x=ring(ph, x))
        got = ph.arrivals(ms)
        return And(ph.exec(enc, ref), w >= 0, got != b.count), {"x": x, "slot": sl, "phase": w, "got": got}

    def tx(ph: Phases):
        enc, x, sl, w = common(ph)
        ms = ph.members(s.barrier, sl, w, x=ring(ph, x))
        exp, dlv = ph.expected(ms), ph.delivered(ms)
        return And(ph.exec(enc, ref), w >= 0, exp != dlv), {"x": x, "slot": sl, "phase": w, "expected": exp,
                                                           "delivered": dlv}

    def deadlock(ph: Phases):
        enc, x, sl, w = common(ph)
        ms = ph.members(s.barrier, sl, w, x=ring(ph, x))
        late = [And(r, Not(ph.rank_before(e, m, enc, ref))) for m, e, r, _ in ms]
        got, exp, dlv = ph.arrivals(ms), ph.expected(ms), ph.delivered(ms)
        # a phase short of arrivals or bytes never completes; one over them completes early and
        # leaves the surplus to the next phase, which then never matches its own count
        f = And(ph.exec(enc, ref), w >= 0, Or(got != b.count, dlv != exp, *late))
        return f, {"x": x, "slot": sl, "phase": w, "got": got, "expected": exp, "delivered": dlv}

    def ahead(ph: Phases):
        enc, x, sl, w = common(ph)
        f = And(ph.exec(enc, ref), w >= 1, Not(ph.done_before(s.barrier, sl, w - 1, enc, ref)))
        return f, {"x": x, "slot": sl, "phase": w}

    def behind(ph: Phases):
        enc, x, sl, w = common(ph)
        ms = ph.members(s.barrier, sl, w + 1, ("arrive",), x=ring(ph, x, 1))
        some = Or([r for _, _, r, _ in ms])
        ordered = Or([And(r, ph.after(e, m, enc, ref)) for m, e, r, _ in ms])
        return And(ph.exec(enc, ref), some, Not(ordered)), {"x": x, "slot": sl, "phase": w}

    return [
        HObligation(f"arrivals:{tag}", "arrivals", ref.role, ref.part, ref.pos, None,
                    f"{head}: the phase it waits for gets exactly {b.count} arrival(s)", arrivals),
        HObligation(f"tx_bytes:{tag}", "tx_bytes", ref.role, ref.part, ref.pos, None,
                    f"{head}: the phase it waits for gets exactly the bytes it expects", tx),
        HObligation(f"no_deadlock:{tag}", "no_deadlock", ref.role, ref.part, ref.pos, None,
                    f"{head}: every arrival and copy of its phase is issued earlier and the phase completes",
                    deadlock),
        HObligation(f"parity:{tag}:ahead", "parity", ref.role, ref.part, ref.pos, None,
                    f"{head}: the phase before the one it waits for is complete when it starts", ahead),
        HObligation(f"parity:{tag}:behind", "parity", ref.role, ref.part, ref.pos, None,
                    f"{head}: the phase after the one it waits for cannot complete before it passes", behind),
    ]


def _arrive_obligations(p: HopperProgram, ref: Ref, tag: str) -> list[HObligation]:
    s = ref.stmt
    b = p.barrier(s.barrier)
    what = "arrive.expect_tx" if s.tx and s.arrivals else ("expect_tx" if s.tx else "arrive")
    head = f"{ref.role} {ref.part}: {what} {s.barrier}[{to_str(s.state.index())}]"
    out = []

    def count(ph: Phases):
        enc = ph.base[ref.role]
        x = ph.count(enc, ref)
        sl, n = ph.slot_phase(ref, x)
        got = ph.arrivals(ph.members(s.barrier, sl, n, x=ph.ring(ref, x)))
        return And(ph.exec(enc, ref), got != b.count), {"x": x, "slot": sl, "phase": n, "got": got}

    def order(ph: Phases):
        enc = ph.base[ref.role]
        x = ph.count(enc, ref)
        sl, n = ph.slot_phase(ref, x)
        # a phase below 0 does not exist: such an arrival really lands in phase 0 (or later)
        return And(ph.exec(enc, ref), Or(n < 0, And(n >= 1, Not(ph.done_before(s.barrier, sl, n - 1, enc, ref))))), \
            {"x": x, "slot": sl, "phase": n}

    cls = "arrivals" if s.arrivals else "tx_bytes"
    out.append(HObligation(f"arrivals:{tag}:count", "arrivals", ref.role, ref.part, ref.pos, None,
                           f"{head}: the phase it names gets exactly {b.count} arrival(s)", count))
    out.append(HObligation(f"{cls}:{tag}:order", cls, ref.role, ref.part, ref.pos, None,
                           f"{head}: lands in the phase it names (the previous phase is complete before it)", order))
    if b.kind == "empty":
        program = p.role(ref.role).program
        for rref in _role_refs(p, ref.role):
            rs = rref.stmt
            if not isinstance(rs, OpStmt):
                continue
            for a, acc in enumerate(rs.reads):
                if acc.buffer not in b.guards:
                    continue
                queue = program.commit_queue(rs.op) if program.op(rs.op).is_async else None
                out.append(HObligation(
                    f"release_after_wgmma:{tag}<-{rref.part}:{rref.pos}:r{a}", "release_after_wgmma", ref.role,
                    ref.part, ref.pos, blame(program, ref.part, ref.pos, queue),
                    f"{head} releases version {to_str(s.state.count)} only after {rs.op}'s read of "
                    f"{acc.buffer} version {to_str(s.state.count)} is complete",
                    _release_builder(ref, rref, a)))
    return out


def _release_builder(ref: Ref, rref: Ref, a: int):
    def build(ph: Phases):
        enc = ph.base[ref.role]
        x = ph.count(enc, ref)
        acc = rref.stmt.reads[a]
        r = ph.offset(ref, ref.stmt.state.count) - ph.offset(rref, acc.version)
        runs = enc.op_exec(rref.part, rref.pos, r)
        done = enc.done_before(rref.part, rref.pos, r, Point(0, ref.part, ref.pos))
        return And(ph.exec(enc, ref), runs, Not(done)), {"x": x}
    return build


def _count_builder(ref: Ref):
    def build(ph: Phases):
        enc = ph.base[ref.role]
        n = enc.wait_count(ref.part, ref.pos, 0)
        return And(enc.wait_exec(ref.part, ref.pos, 0), n < 0), {"count": n}
    return build


def _tma_obligations(p: HopperProgram, ref: Ref, tag: str) -> list[HObligation]:
    s = ref.stmt
    out = []
    head = f"{ref.role} {ref.part}: TMA {s.op} -> {s.barrier.barrier}[{to_str(s.barrier.state.index())}]"

    def order(ph: Phases):
        enc = ph.base[ref.role]
        x = ph.count(enc, ref)
        sl, n = ph.slot_phase(ref, x)
        return And(ph.exec(enc, ref), Or(n < 0, And(n >= 1, Not(ph.done_before(s.barrier.barrier, sl, n - 1, enc,
                                                                                  ref))))), \
            {"x": x, "slot": sl, "phase": n}

    out.append(HObligation(f"tx_bytes:{tag}:order", "tx_bytes", ref.role, ref.part, ref.pos, None,
                           f"{head}: its complete_tx lands in the phase it names", order))
    out.append(HObligation(f"teardown:{tag}", "teardown", ref.role, ref.part, ref.pos, None,
                           f"{head}: lands before the teardown (a wait on the phase it completes runs)",
                           _teardown_builder(p, ref)))
    for k, wacc in enumerate(s.writes):
        buf = p_buffer(p, wacc.buffer)
        for rref in _all_refs(p):
            rs = rref.stmt
            if not isinstance(rs, OpStmt):
                continue
            for a, racc in enumerate(rs.reads):
                if racc.buffer != wacc.buffer:
                    continue
                wait = None
                if rref.role == ref.role:  # one warp group: the reader's wgmma FIFO orders the refill
                    prog = p.role(ref.role).program
                    if prog.op(rs.op).is_async:
                        wait = blame(prog, ref.part, ref.pos, prog.commit_queue(rs.op))
                out.append(HObligation(
                    f"slot_reuse:{tag}:w{k}<-{rref.role}:{rref.part}:{rref.pos}:r{a}", "slot_reuse", ref.role,
                    ref.part, ref.pos, wait,
                    f"{head} writes {wacc.buffer} version {to_str(wacc.version)} only after {rref.role}'s "
                    f"{rs.op} released version {to_str(wacc.version)} - {buf.multiplicity}",
                    _reuse_builder(p, ref, k, rref, a, buf.multiplicity)))
    return out


def _teardown_builder(p: HopperProgram, ref: Ref):
    """Some ``try_wait`` (any role) waiting for the phase the copy completes on (slot and phase compared
    by value) runs: else the copy may still be in flight at ``mbarrier.inval`` and when the CTA reuses
    its shared memory. A sufficient condition: a wait whose count is not the step plus a constant is
    not counted."""
    def build(ph: Phases):
        enc = ph.base[ref.role]
        x = ph.count(enc, ref)
        sl, n = ph.slot_phase(ref, x)
        seen = And(n >= 0, Or(ph.waiters(ref.stmt.barrier.barrier, sl, n, x=ph.ring(ref, x))))
        return And(ph.exec(enc, ref), Not(seen)), {"x": x, "slot": sl, "phase": n}
    return build


def p_buffer(p: HopperProgram, name: str):
    for b in p.buffers:
        if b.name == name:
            return b
    raise KeyError(name)


def _reuse_builder(p: HopperProgram, ref: Ref, k: int, rref: Ref, a: int, m: int):
    def build(ph: Phases):
        enc = ph.base[ref.role]
        wacc = ref.stmt.writes[k]
        v = enc.int_term(enc.expr(wacc.version, ref.part, 0))
        racc = rref.stmt.reads[a]
        renc = ph.at(rref, v - m, racc.version)
        reader_runs = ph.exec(renc, rref)
        cases = []
        if rref.role == ref.role:
            r = ph.offset(ref, wacc.version) - m - ph.offset(rref, racc.version)
            cases.append(enc.done_before(rref.part, rref.pos, r, Point(0, ref.part, ref.pos)))
        for b in p.barriers:
            if b.kind != "empty" or wacc.buffer not in b.guards:
                continue
            for rel in _role_refs(p, rref.role):
                if not (isinstance(rel.stmt, ArriveStmt) and rel.stmt.barrier == b.name):
                    continue
                lenc = ph.at(rel, v - m)
                lsl, ln = ph.slot_phase(rel, v - m)
                cases.append(And(ph.exec(lenc, rel), ph.done_before(b.name, lsl, ln, enc, ref)))
        return And(ph.exec(enc, ref), v >= m, reader_runs, Not(Or(cases))), {"x": v}
    return build


def _raw_builder(p: HopperProgram, ref: Ref, a: int):
    """The read of version ``v`` runs => each copy of ``v`` that runs is waited for (its phase complete
    before the read), and, unless the producer's predicate is false at ``v``, some copy statement
    writes ``v`` at this trip count (a version no iteration loads, such as ``-1`` or ``T``, is never
    waited for: nothing would ever land there)."""
    def build(ph: Phases):
        enc = ph.base[ref.role]
        acc = ref.stmt.reads[a]
        v = enc.int_term(enc.expr(acc.version, ref.part, 0))
        bad, written = [], []
        for tref in _all_refs(p):
            if not _is_tma_of(tref, acc.producer, acc.buffer):
                continue
            wacc = next(w for w in tref.stmt.writes if w.buffer == acc.buffer)
            tenc = ph.at(tref, v, wacc.version)
            written.append(And(tenc.in_part(tref.part, 0), tenc.guard(tref.part, tref.pos, 0)))
            tx = ph.count(tenc, tref)
            sl, n = ph.slot_phase(tref, tx)
            bad.append(And(ph.exec(tenc, tref), Not(ph.done_before(tref.stmt.barrier.barrier, sl, n, enc, ref))))
        bad.append(And(ph.holds(acc.producer, v), Not(Or(written))))
        return And(ph.exec(enc, ref), Or(bad)), {"x": v}
    return build


def _fence_obligations(p: HopperProgram) -> list[HObligation]:
    out = []
    used = {stmt_barrier(r.stmt) for r in _all_refs(p) if stmt_kind(r.stmt) in ("arrive", "try_wait", "tma")}
    inits = [k for k, s in enumerate(p.setup) if isinstance(s, InitStmt)]
    fences = [k for k, s in enumerate(p.setup) if isinstance(s, FenceStmt) and s.fence == "mbarrier_init"]
    invals = {s.barrier for s in p.teardown if isinstance(s, InvalStmt)}
    for b in sorted(used):
        # an init under a guard leaves the barrier uninitialized where the guard is false (and a guarded fence
        # fences nothing there): neither counts
        has_init = any(p.setup[k].barrier == b and p.setup[k].guard is None for k in inits)
        fenced = has_init and any(f > max(k for k in inits if p.setup[k].barrier == b) and p.setup[f].guard is None
                                  for f in fences)
        out.append(HObligation(f"fence:init:{b}", "fence", "setup", "setup", 0, None,
                               f"barrier {b} is initialized in setup and the init is fenced before use",
                               _const(not fenced, {})))
        out.append(HObligation(f"fence:inval:{b}", "fence", "teardown", "teardown", 0, None,
                               f"barrier {b} is invalidated in teardown", _const(b not in invals, {})))
    for r in p.roles:
        for pt in r.program.parts:
            for k, s in enumerate(pt.stmts):
                if not isinstance(s, OpStmt) or r.program.op(s.op).is_async or not s.writes:
                    continue
                bufs = {w.buffer for w in s.writes}
                for k2 in range(k + 1, len(pt.stmts)):
                    s2 = pt.stmts[k2]
                    if isinstance(s2, FenceStmt) and s2.fence == "proxy_async":
                        break
                    if isinstance(s2, OpStmt) and r.program.op(s2.op).is_async and \
                            bufs & {a.buffer for a in s2.reads}:
                        out.append(HObligation(f"fence:proxy:{r.name}:{pt.name}:{k}", "fence", r.name, pt.name, k,
                                               None, f"{r.name} {pt.name}: {s.op}'s generic-proxy write is fenced "
                                               f"(fence.proxy.async) before {s2.op} reads it through the async "
                                               f"proxy", _const(True, {})))
                        break
    return out


def _const(bad: bool, detail: dict):
    def build(ph: Phases):
        return z3.BoolVal(bad), detail
    return build


# --------------------------------------------------------------------------------------------
# proving
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WgmmaVerdict:
    role: str
    index: int
    status: str
    tight: Optional[bool] = None
    reason: str = ""


@dataclass(frozen=True)
class ProofPhase:
    """One proof a command made: its name, the obligations (or checks) it discharged, how many were proven,
    its wall-clock seconds, and the Z3 queries it asked (None: not counted; an obligation identical to one
    already proven in the process is answered without a query, :func:`_solve`)."""

    name: str
    obligations: int
    proven: int
    seconds: float
    queries: Optional[int] = None

    def text(self) -> str:
        q = "" if self.queries is None else f", {self.queries} Z3 quer{'y' if self.queries == 1 else 'ies'}"
        return f"{self.name}: {self.proven}/{self.obligations} proven{q}, {self.seconds:.2f} s"

    def to_json(self) -> dict:
        return {"name": self.name, "obligations": self.obligations, "proven": self.proven,
                "seconds": round(self.seconds, 4), "queries": self.queries}


def proofs_text(proofs) -> str:
    """``proofs: <each phase>; total <n>/<m> obligations, <s> s``: every proof phase of a command, named and
    counted, with its time (what ``synth solve``'s ``prove`` phase spent)."""
    n = sum(p.obligations for p in proofs)
    ok = sum(p.proven for p in proofs)
    secs = sum(p.seconds for p in proofs)
    return "proofs: " + "; ".join(p.text() for p in proofs) + f"; total {ok}/{n} obligations, {secs:.2f} s"


@dataclass(frozen=True)
class HopperReport:
    ok: bool
    program: HopperProgram
    obligations: tuple[ObligationResult, ...]
    waits: tuple[WgmmaVerdict, ...]
    seconds: float = 0.0
    lags: dict = field(default_factory=dict)
    """Role lags of the deadlock ranking the no_deadlock proofs use (a hint; certificates record it)."""
    proofs: tuple[ProofPhase, ...] = ()
    """Every proof phase of the command that made this report (``synth solve``: this program's, a persistent
    kernel's tile ends, ping-pong's order programs, the TMA-store program), each named with its obligations,
    Z3 queries and time; empty from ``verify_hopper`` alone. ``ok`` is this program's verdict."""

    def by_class(self) -> dict[str, dict[str, int]]:
        """``{class: {proven: n, refuted: n, unknown: n}}``."""
        out: dict[str, dict[str, int]] = {}
        for o in self.obligations:
            out.setdefault(o.kind, {"proven": 0, "refuted": 0, "unknown": 0})[o.status] += 1
        return out

    def refuted_classes(self) -> set[str]:
        return {o.kind for o in self.obligations if o.status == "refuted"}

    def to_json(self) -> dict:
        """The ``synth verify --json`` result: obligations by class, wgmma waits, failures."""
        return {"program": self.program.name, "protocol": "mbarrier", "ok": bool(self.ok),
                "obligations": self.by_class(),
                "waits": [{"role": v.role, "index": v.index, "status": v.status, "tight": v.tight,
                           "reason": v.reason} for v in self.waits],
                "failures": [{"id": o.id, "class": o.kind, "status": o.status, "description": o.description,
                              "reason": o.reason} for o in self.obligations if o.status != "proven"],
                "ranking": dict(self.lags), "seconds": round(self.seconds, 4),
                **({"proofs": [p.to_json() for p in self.proofs]} if self.proofs else {})}

    def render(self) -> str:
        n_ok = sum(1 for o in self.obligations if o.status == "proven")
        lines = [f"{self.program.name}: {'all obligations proven' if self.ok else 'NOT PROVEN'} "
                 f"({n_ok}/{len(self.obligations)} obligations, {self.seconds:.2f} s)"]
        if len(self.proofs) > 1:  # one phase: the line above says it all
            lines.append(proofs_text(self.proofs))
        for cls, c in sorted(self.by_class().items()):
            lines.append(f"  {cls}: {c['proven']} proven, {c['refuted']} refuted, {c['unknown']} unknown")
        for v in self.waits:
            w = self.program.role(v.role).program.waits[v.index]
            t = "" if v.tight is None else (", tight" if v.tight else ", not tight")
            part = self.program.role(v.role).program.part(w.part)
            lines.append(f"wait_group #{v.index} {v.role} {w.part}: wait_group({wait_count(part, w.in_flight)}): "
                         f"{v.status}{t}" + (f" ({v.reason})" if v.reason else ""))
        for o in self.obligations:
            if o.status != "proven":
                lines.append(f"{o.status} [{o.kind}] {o.description}")
                if o.counterexample is not None:
                    lines.append(o.counterexample.render("    "))
                elif o.reason:
                    lines.append(f"    {o.reason}")
        return "\n".join(lines)


def _limit(time_limit: float, deadline: Optional[float]) -> float:
    """Seconds for the next query: ``time_limit``, less when ``deadline`` is nearer (:meth:`Deadline.cap`)."""
    return time_limit if deadline is None else Deadline(deadline).cap(time_limit)


def _late(deadline: Optional[float]) -> bool:
    return deadline is not None and Deadline(deadline).expired()


@dataclass(frozen=True)
class _Hole:
    """Where a ``wait_group`` stood, in a program's barrier view (:func:`barrier_view`)."""

    guard: None = None
    kind: str = "hole"


_HOLE = _Hole()


def barrier_view(p: HopperProgram) -> HopperProgram:
    """``p`` without its wgmma waits: each role's ``wait_group`` statements replaced by holes (every other
    statement keeps its position), the holes ending a part dropped, no ``waits``, and no names or notes. The
    obligations whose terms never count commits or read a wait (:class:`~synth.verify.encode.NeedsWaits` is
    raised by any that does) are encoded over this view: a program that differs from another only in its waits
    (a persistent kernel's tile-end programs beside its ring: a ``wait_group 0`` added at the end of each
    consumer's body) has the same view, hence the same terms and the same queries, built once."""
    roles = []
    for r in p.roles:
        prog = r.program
        parts = []
        for pt in prog.parts:
            st = [_HOLE if isinstance(x, WaitStmt) else x for x in pt.stmts]
            while st and st[-1] is _HOLE:
                st.pop()
            parts.append(replace(pt, stmts=tuple(st)))
        roles.append(replace(r, program=replace(prog, name="", parts=tuple(parts), waits=())))
    return replace(p, name="", roles=tuple(roles), notes=())


VIEW_PHASES = 8
"""Barrier views whose :class:`Phases` (their terms) are kept across verifications (least recently used
dropped)."""
_VIEWS: "OrderedDict[tuple, Phases]" = OrderedDict()


def view_phases(p: HopperProgram, trip: Optional[int] = None, lags: Optional[dict] = None,
                cache: Optional[dict] = None, hops: int = 1) -> Phases:
    """The :class:`Phases` (``no_waits``) of :func:`barrier_view` of ``p``, shared by every program with the same
    view, trip count, ranking and hops in this process."""
    lkey = tuple(sorted((lags or {}).items())) + ((("hops", hops),) if hops != 1 else ())
    mine = None if cache is None else cache.get(("view", id(p), trip, lkey))
    if mine is not None and mine[0] is p:
        return mine[1]
    key = (barrier_view(p), trip, lkey)
    ph = _VIEWS.get(key)
    if ph is None:
        ph = _VIEWS[key] = Phases(key[0], trip=trip, lags=lags, no_waits=True, hops=hops)
        if len(_VIEWS) > VIEW_PHASES:
            _VIEWS.popitem(last=False)
    else:
        _VIEWS.move_to_end(key)
    if cache is not None:
        cache[("view", id(p), trip, lkey)] = (p, ph)  # holds p: its id is not reused while the cache lives
    return ph


PROVEN_CACHE = 50_000
"""Negated obligations (Z3 terms) answered ``unsat``, at most this many kept (least recently used dropped)."""
_PROVEN: "OrderedDict[int, z3.BoolRef]" = OrderedDict()
STATS = {"queries": 0, "shared": 0, "constant": 0}
"""Process-wide counts: Z3 queries asked, obligations answered by an identical query already proven
(:func:`_solve`), and obligations whose negation is a constant (decided without a solver)."""


def phases_for(p: HopperProgram, trip: Optional[int] = None, overrides: Optional[dict] = None,
               lags: Optional[dict] = None, cache: Optional[dict] = None, hops: int = 1) -> Phases:
    """The :class:`Phases` of ``p`` for one trip count, wait overrides and ranking; from ``cache`` (a dict
    one verification keeps) when it holds one, so the obligations of a program share their terms."""
    if cache is None:
        return Phases(p, trip=trip, overrides=overrides, lags=lags, hops=hops)
    key = (id(p), trip, repr(sorted((r, sorted(o.items())) for r, o in (overrides or {}).items())),
           repr(sorted((lags or {}).items())), hops)
    hit = cache.get(key)
    if hit is None or hit.p is not p:
        hit = cache[key] = Phases(p, trip=trip, overrides=overrides, lags=lags, hops=hops)
    return hit


def _solve(p: HopperProgram, ob: HObligation, time_limit: float, trip: Optional[int],
           overrides: Optional[dict] = None, lags: Optional[dict] = None, cache: Optional[dict] = None,
           text: bool = False, hops: int = 1):
    """``(status, solver, phases, detail)`` of one obligation. Its negation is asked of Z3 unless it is the
    constant false (proven: a class decided by the program's structure, such as ``fence``) or the very term
    (Z3 terms are hash-consed: the same formula over the same variables) of a negation already answered
    ``unsat`` in this process: the tile-end programs of a persistent kernel repeat most of the ring's
    obligations, a cluster's CTAs and ping-pong's order programs their own. Only ``unsat`` is reused: a
    model or an unknown is always asked again. The solver returned holds the query, checked when it was asked;
    None for a proof given without asking unless ``text`` (its SMT-LIB2 text is wanted)."""
    try:  # over the barrier view when the obligation reads no wait; else over the whole program
        ph = view_phases(p, trip, lags, cache, hops)
        f, detail = ob.build(ph)
    except NeedsWaits:
        ph = phases_for(p, trip, overrides, lags, cache, hops)
        f, detail = ob.build(ph)
    dom = ph.domain()

    def solver():
        s = z3.SimpleSolver()
        s.set("timeout", max(1, int(time_limit * 1000)))
        s.add(*dom, *ph.defs, f)
        return s
    if z3.is_false(f):
        STATS["constant"] += 1
        return "proven", solver() if text else None, ph, detail
    q = And(*dom, *ph.defs, f)
    known = _PROVEN.get(q.get_id())
    if known is not None and known.eq(q):
        _PROVEN.move_to_end(q.get_id())
        STATS["shared"] += 1
        return "proven", solver() if text else None, ph, detail
    STATS["queries"] += 1
    s = solver()
    r = s.check()
    if r == z3.unsat:
        _PROVEN[q.get_id()] = q  # the entry holds q: its id is not reused while it is kept
        if len(_PROVEN) > PROVEN_CACHE:
            _PROVEN.popitem(last=False)
    return ("proven" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"), s, ph, detail


def _same_step(s: z3.Solver, ph: Phases, ob: HObligation, detail: dict, m: z3.ModelRef):
    """A ``converge`` model at the same trip count whose lagging wait is in the elected statement's own
    step, when there is one (the clearer story); else ``m``."""
    s.push()
    s.add(ph.T == m.eval(ph.T, model_completion=True), detail["wj"] == ph.base[ob.role].j)
    better = s.model() if s.check() == z3.sat else m
    s.pop()
    return better


def _smallest_model(p: HopperProgram, s: z3.Solver, ph: Phases, time_limit: float, deadline: Optional[float]):
    """The model of ``s`` (just found ``sat``) with the smallest trip count the re-checks can show: a
    binary search on ``T <= b`` between ``min_trip_count`` and the first model's ``T`` (so a failure
    that first shows at a large ``T`` is still reported there). A re-check that answers unknown is
    read as "not below", never as a model: the first model stands when none is found."""
    m = s.model()
    if ph.tsym is None:
        return m
    lo, hi = p.min_trip_count, m.eval(ph.T, model_completion=True).as_long()
    best = m
    while lo < hi and not _late(deadline):
        mid = (lo + hi) // 2
        s.push()
        s.add(ph.T <= mid)
        s.set("timeout", max(1, int(_limit(min(time_limit, 5.0), deadline) * 1000)))
        if s.check() == z3.sat:
            best = s.model()
            hi = best.eval(ph.T, model_completion=True).as_long()
        else:
            lo = mid + 1
        s.pop()
    return best


def _counterexample(p: HopperProgram, ob: HObligation, m: z3.ModelRef, ph: Phases, detail: dict,
                    deadline: Optional[float] = None) -> Counterexample:
    ev = lambda t: m.eval(t, model_completion=True)  # noqa: E731
    T = ev(ph.T).as_long()
    if ob.role in ph.base and ob.kind != "coverage":
        enc = ph.base[ob.role]
        j = ev(enc.j).as_long()
        off = ev(enc.off[ob.part]).as_long() if ob.part in enc.off else 0
        i = j - off
    else:
        j, i = -1, -1
    vals = {k: ev(v) for k, v in detail.items()}
    if ob.kind == "converge":
        return _converge_counterexample(p, ob, ph, vals, T, j, i, deadline, ev)
    bits = []
    if "x" in vals:
        bits.append(f"iteration {vals['x']}")
    if "runs" in vals:
        bits.append(f"run {vals['runs']} time(s)")
    s_ = ph.bars.get(stmt_barrier(_stmt_of(p, ob))) if _stmt_of(p, ob) is not None and \
        stmt_kind(_stmt_of(p, ob)) in ("arrive", "try_wait", "tma") else None
    if "slot" in vals and s_ is not None:
        bits.append(f"barrier {s_.name}[{vals['slot']}] phase {vals['phase']}")
    if "got" in vals:
        bits.append(f"{vals['got']} of {s_.count if s_ else '?'} arrivals")
    if "expected" in vals:
        bits.append(f"{vals['expected']} bytes expected, {vals['delivered']} delivered")
    if "count" in vals:
        bits.append(f"count {vals['count']}")
    who = ob.role
    if ob.role in ph.roles:
        n = ph.roles[ob.role].warpgroups
        who = f"warp group {ob.role}" if n == 1 else f"each of the {n} warp groups of {ob.role}"
    where = f"{who} {ob.part} i = {i}" if i >= 0 or ob.kind != "coverage" else who
    summary = (f"{ob.kind}: with trip count {T}, {where}: "
               f"{', '.join(bits) + ': ' if bits else ''}this fails: {ob.description}")
    return Counterexample(ob.kind, T, j, ob.part, i, summary, () if _late(deadline) else _replay(p, T))


def _converge_counterexample(p: HopperProgram, ob: HObligation, ph: Phases, vals: dict, T: int, j: int, i: int,
                            deadline: Optional[float], ev) -> Counterexample:
    """A ``converge`` refutation: the role, the elected statement's barrier slot and phase, the lagging
    thread's wait (its barrier, slot, phase) and whether the lag shows at this ``T``."""
    role = ph.roles[ob.role]
    a = _stmt_of(p, ob)
    wpart, wpos = ob.id.rsplit("<-", 1)[1].split(":")
    w = role.program.part(wpart).stmts[int(wpos)]
    wj = vals["wj"].as_long()
    off = ph.base[ob.role].off
    wi = wj - (ev(off[wpart]).as_long() if wpart in off else 0)
    what = "arrives" if stmt_kind(a) == "arrive" else f"issues TMA {a.op}"
    who = f"warp group {ob.role}" if role.warpgroups == 1 else f"each of the {role.warpgroups} warp groups of {ob.role}"
    wn = vals["wphase"].as_long()
    lag = (f"thread 1 of {who} may still be waiting in its try_wait on {w.barrier}[{vals['wslot']}] for phase {wn} "
           f"(iteration {vals['wx']}, {wpart} i = {wi})")
    if "harmful" in vals:
        tail = (f"{w.barrier}[{vals['wslot']}] completes phase {wn + 1} at this trip count, so that thread sees "
                f"parity {wn % 2} again (two phases behind): it hangs, or reads a slot already refilled")
    else:
        tail = (f"no later phase of {w.barrier}[{vals['wslot']}] completes at this trip count: the lag shows once "
                f"one does")
    summary = (f"converge: with trip count {T}, {who} {ob.part} i = {i}: the elected thread 0 {what} on "
               f"{stmt_barrier(a)}[{vals['slot']}] phase {vals['phase']} (iteration {vals['x']}) while {lag}: no "
               f"convergence point (a collective wgmma or a bar_sync over the warp group) lies between them; {tail}: "
               f"this fails: {ob.description}")
    return Counterexample(ob.kind, T, j, ob.part, i, summary, () if _late(deadline) else _replay(p, T))


REPLAY_MAX_T = 8
"""Counterexamples up to this trip count are replayed by the oracle (its first violations are the trace)."""


@functools.lru_cache(maxsize=32)
def _replay(p: HopperProgram, T: int) -> tuple[str, ...]:
    """What the explicit-state oracle sees when it runs ``p`` at ``T`` (empty when ``T`` is large). Cached:
    every refuted obligation of one program at one trip count replays the same run (a pure function of both)."""
    if T > REPLAY_MAX_T:
        return ()
    res = run(p, T, max_states=50_000)
    lines = [f"oracle at trip count {T}: {cls}: {msg}" for cls, msg in sorted(res.violations.items())]
    if not lines:
        lines = [f"oracle at trip count {T}: no violation in {res.states} states"
                 + ("" if res.complete else " (search cut at its state limit)")]
    return tuple(lines)


def _stmt_of(p: HopperProgram, ob: HObligation):
    if ob.role not in {r.name for r in p.roles}:
        return None
    return p.role(ob.role).program.part(ob.part).stmts[ob.pos]


def smt2_file(ob: HObligation, s: z3.Solver) -> str:
    """The self-contained SMT-LIB2 file of an obligation (its negation; expected ``unsat``)."""
    lines = s.to_smt2().splitlines()
    if lines and lines[0].startswith(";"):
        lines = lines[1:]
    head = [f"; synth Hopper obligation {ob.id} ({ob.kind})", f"; {ob.description}",
            "; this is the NEGATED obligation: unsat means the obligation holds", "(set-logic ALL)"]
    return _canonical_lets("\n".join(head + lines) + "\n")


def _canonical_lets(text: str) -> str:
    """Z3 names let-bound terms after internal ids (``?x85``); number them by first appearance so
    the same obligation always prints the same file."""
    import re
    names: dict[str, str] = {}

    def sub(m):
        return names.setdefault(m.group(0), f"{m.group(1)}t{len(names) + 1}")
    return re.sub(r"([?$])x\d+\b", sub, text)


def prove_hopper_obligation(p: HopperProgram, ob: HObligation, time_limit: float = 10.0,
                            trip: Optional[int] = None, lags: Optional[dict] = None,
                            deadline: Optional[float] = None, cache: Optional[dict] = None,
                            smt2: bool = False, hops: int = 1) -> ObligationResult:
    """Prove one obligation (each query at most ``time_limit`` s, less near ``deadline``, a
    :func:`time.monotonic` instant); a refutation carries a counterexample in the program's terms. Past
    ``deadline`` nothing is asked: the result is ``unknown`` with that reason. ``cache``: a dict kept across
    the obligations of one verification (:func:`phases_for`). ``smt2``: keep the query's SMT-LIB2 text
    (:func:`smt2_file`) in the result (a Hopper certificate holds the trusted checker's files, not these). ``hops``:
    :attr:`Phases.hops`."""
    t0 = time.perf_counter()
    if _late(deadline):
        return ObligationResult(ob.id, ob.kind, ob.wait, None, ob.part, ob.description, "unknown", 0.0,
                                reason="not asked: the time limit of the whole verification ran out")
    limit = _limit(time_limit, deadline)
    try:
        status, s, ph, detail = _solve(p, ob, limit, trip, lags=lags, cache=cache, text=smt2, hops=hops)
    except Unsupported as e:
        return ObligationResult(ob.id, ob.kind, ob.wait, None, ob.part, ob.description, "refuted",
                                time.perf_counter() - t0, reason=f"wellformed: {e}")
    cex = None
    reason = ""
    if status == "refuted":
        harm = detail.pop("harm", None)
        if harm is not None:  # converge: report the smallest T where the lagging thread is harmed, if any
            s.push()
            s.add(harm)
            s.set("timeout", max(1, int(_limit(min(limit, 5.0), deadline) * 1000)))
            if s.check() == z3.sat:
                detail["harmful"] = z3.BoolVal(True)
            else:
                s.pop()
                s.check()
        try:
            model = _smallest_model(p, s, ph, limit, deadline) if trip is None else s.model()
            if harm is not None and not _late(deadline):
                model = _same_step(s, ph, ob, detail, model)
        except z3.Z3Exception as e:  # no model although Z3 said sat: report what is known, never crash
            status, reason = "unknown", f"solver found the obligation refutable but gave no model ({e})"
        else:
            cex = _counterexample(p, ob, model, ph, detail, deadline)
            reason = cex.summary
    elif status == "unknown":
        why = s.reason_unknown()
        reason = f"solver returned unknown ({why}) within {limit:g} s" + \
            (" (the time limit of the whole verification ran out)" if _late(deadline) else "")
    text = smt2_file(ob, s) if status != "refuted" and smt2 else ""
    return ObligationResult(ob.id, ob.kind, ob.wait, None, ob.part, ob.description, status,
                            time.perf_counter() - t0, text, cex, reason)


def refutation_values(p: HopperProgram, ob: HObligation, *, time_limit: float = 10.0, trip: Optional[int] = None,
                      lags: Optional[dict] = None, hops: int = 1) -> Optional[dict]:
    """The numbers of a refuted obligation's counterexample, for a caller that names them (the attention proof's
    refutations): ``T`` (the smallest trip count the re-checks show, as :func:`prove_hopper_obligation`'s), ``j``
    and ``i`` (the anchor's step and its part's index) and each detail term of the obligation (``x``: the state
    count or version, ``slot``, ``phase``, ``got``, ...), as ints (Booleans as 0 / 1). None when the obligation is
    not refuted within ``time_limit``."""
    try:
        status, s, ph, detail = _solve(p, ob, time_limit, trip, lags=lags, hops=hops)
    except Unsupported:
        return None
    if status != "refuted":
        return None
    detail.pop("harm", None)
    m = _smallest_model(p, s, ph, time_limit, None) if trip is None else s.model()

    def ev(t) -> int:
        v = m.eval(t, model_completion=True)
        return int(z3.is_true(v)) if z3.is_bool(v) else v.as_long()
    out = {"T": ev(ph.T)}
    if ob.role in ph.base:
        enc = ph.base[ob.role]
        out["j"] = ev(enc.j)
        out["i"] = out["j"] - (ev(enc.off[ob.part]) if ob.part in enc.off else 0)
    for k, t in detail.items():
        out[k] = ev(t)
    return out


def verify_hopper(p: HopperProgram, *, time_limit: float = 10.0, tightness: bool = True,
                  trip_count: Optional[int] = None, deadline: Optional[float] = None,
                  smt2: bool = False, hops: int = 1) -> HopperReport:
    """Prove every obligation of ``p`` for every allowed trip count (or ``trip_count``) and judge
    the wgmma waits' tightness. ``time_limit`` bounds each Z3 query (seconds); ``deadline`` (a
    :func:`time.monotonic` instant) bounds the whole call: queries are cut to what is left, and
    obligations not asked by then are ``unknown`` ("the time limit of the whole verification ran
    out"), tightness then unjudged. ``smt2``: keep each query's SMT-LIB2 text in its result (off: nothing reads
    it; certificates are the trusted checker's). ``hops``: the barrier hops "complete before" and "after" may
    take (:attr:`Phases.hops`; 1 unless a ring of more than two warp groups hands a turn on). Raises
    :class:`SynthError` on a malformed program."""
    t0 = time.perf_counter()
    try:
        # T >= 0 (a loop that may run zero times) is proven like any bound: every obligation is quantified over
        # T >= min_trip_count and the oracle replays T = 0; the reader's "trip counts start at 1" guards
        # program.json, not this prover (docs/verification.md)
        validate_hopper(replace(p, min_trip_count=1) if p.min_trip_count == 0 else p)
    except HopperError as e:
        raise SynthError(None, f"program {p.name}: {e.path}: {e.msg}", e.fix) from None
    if any(o.when == "opaque" for o in p.ops):
        raise SynthError(None, f"program {p.name}: opaque predicates are not supported in Hopper programs",
                         "write the predicate as a condition in the loop variable and T")
    obs = enumerate_hopper(p)
    cache: dict = {}  # the program's Phases, shared by its obligations
    lags = _ranking(p, [ob for ob in obs if ob.kind == "no_deadlock"], time_limit, trip_count, deadline, cache,
                    hops)
    results = [prove_hopper_obligation(p, ob, time_limit, trip_count, lags, deadline, cache, smt2, hops)
               for ob in obs]
    verdicts = []
    for r in p.roles:
        drains = [ob for ob in obs if ob.kind == "wgmma_drain" and ob.role == r.name]
        for idx, w in enumerate(r.program.waits):
            mine = [(ob, res) for ob, res in zip(obs, results) if ob.role == r.name and ob.wait == idx]
            status = "refuted" if any(x.status == "refuted" for _, x in mine) else \
                "unknown" if any(x.status == "unknown" for _, x in mine) else "proven"
            tight, reason = None, ""
            if status == "proven" and tightness:
                if _late(deadline):
                    reason = "tightness not judged: the time limit of the whole verification ran out"
                else:
                    rel = [ob for ob, _ in mine] + [ob for ob in drains if ob.wait != idx]
                    tight, reason = _tightness(p, r.name, idx, rel, time_limit, trip_count, deadline, cache, hops)
            verdicts.append(WgmmaVerdict(r.name, idx, status, tight, reason))
    ok = all(x.status == "proven" for x in results)
    return HopperReport(ok, p, tuple(results), tuple(verdicts), time.perf_counter() - t0, lags)


LAGS = (0, 1, -1, 2, -2)
"""Lags tried per role (after the first) for the deadlock ranking; 5 ** 2 combinations at most."""


def _ranking(p: HopperProgram, obs: list[HObligation], time_limit: float, trip: Optional[int],
             deadline: Optional[float] = None, cache: Optional[dict] = None, hops: int = 1) -> dict:
    """Role lags under which every ``no_deadlock`` obligation holds (all zero when none does: the
    refutations are then reported under the plain (step, role, position) order)."""
    import itertools
    others = [r.name for r in p.roles[1:]][:2]
    for combo in itertools.product(LAGS, repeat=len(others)):
        if _late(deadline):
            return {}
        lags = dict(zip(others, combo))
        try:
            if all(_solve(p, ob, _limit(time_limit, deadline), trip, lags=lags, cache=cache, hops=hops)[0] == "proven"
                   for ob in obs):
                return lags
        except Unsupported:
            return {}
    return {}


def _tightness(p: HopperProgram, role: str, idx: int, obs: list[HObligation], time_limit: float,
               trip: Optional[int], deadline: Optional[float] = None,
               cache: Optional[dict] = None, hops: int = 1) -> tuple[Optional[bool], str]:
    """Tight when ``N + 1`` breaks a release, a refill (one warp group) or a drain (every group complete
    before the warp group finishes) that depends on the wait."""
    w = p.role(role).program.waits[idx]
    plus = {role: {idx: simplify(Bin("+", w.in_flight, Num(1)))}}
    rel = [ob for ob in obs if ob.kind in ("release_after_wgmma", "slot_reuse", "wgmma_drain")]
    unknown = False
    for ob in rel:
        if _late(deadline):
            return None, "tightness not judged: the time limit of the whole verification ran out"
        try:
            status, *_ = _solve(p, ob, _limit(time_limit, deadline), trip, plus, cache=cache, hops=hops)
        except Unsupported:
            return None, "tightness unknown: the program is outside the encoding"
        if status == "refuted":
            more = wait_count(p.role(role).program.part(w.part), plus[role][idx])
            return True, f"tight: with {more} in flight, {ob.description} fails"
        unknown |= status == "unknown"
    if unknown:
        return None, "tightness unknown: a query with one more group in flight gave no answer in time"
    if not rel:
        return False, "not tight: no release, refill or drain depends on it (redundant)"
    return False, f"not tight: {to_str(plus[role][idx])} in flight is also correct"


__all__ = ["verify_hopper", "enumerate_hopper", "prove_hopper_obligation", "smt2_file", "HopperReport", "HObligation",
           "WgmmaVerdict", "Phases", "CLASSES", "converges", "refutation_values", "ProofPhase", "proofs_text",
           "barrier_view", "STATS", "stmt_barrier", "stmt_kind"]

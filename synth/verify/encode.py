"""Z3 encoding of a :class:`~synth.program.Program`'s proof obligations (docs/verification.md).

Input: a program (and the obligation descriptors of :mod:`synth.verify.obligations`).
Output: for each obligation one quantifier-free formula, the *negation* of the
claim, over linear integer arithmetic with ``mod``/``div`` by constants and Booleans:
``unsat`` means the claim holds.

What is quantified (every model of a negated obligation is a counterexample):

* ``T``, the trip count: symbolic with ``T >= min_trip_count`` (or the fixed
  integer when the program's trip count is one). Never sampled. Nothing assumes
  ``T > max_stage``: with extents such as ``min(T, 3)`` and ``max(T - 3, 0)``
  which part a step lies in depends on ``T``, so one formula covers loops shorter
  than the pipeline and long ones alike.
* ``j``, the global step of the *anchor* statement instance (the read for RAW,
  the write for WAR/WAW, the wait for count obligations), anywhere in its part:
  ``off(part) <= j < off(part) + extent(part)``, the part's ``i`` being ``j - off``.
* The *partner* instance (the producer for RAW, the earlier reader / writer for
  WAR / WAW) lies ``d`` steps before the anchor. ``d`` is computed from the
  versions: usually a constant (``version = j + c``); otherwise every value in
  the exact range of ``d`` is a case, and a last disjunct claims the range is
  exhaustive (so the file proves that too).
* Every step between partner and anchor is in *some* part, decided by comparing
  ``j + r`` with the part extents (expressions in ``T``). Each commit and wait
  statement of each part contributes a term guarded by its part membership.
* Predicates: an affine ``when`` is translated as written (at the op's iteration
  ``j + r - stage``). An opaque ``when`` is a fresh Boolean per op and step offset
  ``r`` (hence per iteration), shared by the op statement and any commit gated on
  it at that step: an arbitrary value per op per iteration.
* Completion: groups complete in FIFO order at any time after their commit, so
  the group committed at point ``a`` is surely complete at point ``b`` iff some
  wait on its queue executed strictly between them has
  ``#(groups committed to the queue strictly after a and before the wait) >= n``
  (``n`` the wait's ``in_flight`` at its ``i``). Commits are 0/1 terms (guard
  and gate), counts are running sums along the window. Any execution violating
  this is one where the group completes as late as the waits allow, which FIFO
  permits (the oracle's brute-force exploration checks this argument).

Obligations (one query each, see :mod:`synth.verify.obligations`):

* ``raw``: reader executes and the producer instance of the version it reads
  executed (guard and predicate) => the producer's group was committed and is
  complete before the read's issue (an async reader reads from its issue on);
  a synchronous producer must come earlier in program order.
* ``war``: writer of version ``V`` executes, a read of ``V - M`` (multiplicity
  ``M``: the previous occupant of the slot) executes and the producer of that
  version executed => that read is done before the write is issued (a
  synchronous read earlier in program order; an async read's group complete).
* ``waw``: writer of ``V`` and writer of ``V - M`` execute => the earlier write
  is done (complete, if async) before the later one is issued.
* ``count-nonnegative``: wherever a wait executes its count is ``>= 0``.
* ``wellformed``: the identities the encoding relies on: each op statement's
  ``iteration`` is ``j - stage`` (so a step offset names an iteration), each
  executed access's ``slot`` is ``version % multiplicity``, and extents are
  ``>= 0``.

Pair obligations also have a *premise-only* form ("both instances execute"),
weaker than the negation: when it is unsat it is the proof (and the certificate).
A *parametric* encoder adds per-wait literals (count + 1, wait removed) so that
tightness questions are solver assumptions on one formula per obligation.

Assumed, not proved:

* A write covers the whole slot and writes of the same version by different
  ops touch disjoint data (so only versions ``V`` and ``V - M`` conflict).
* A WAR/WAW check against version ``V - M`` stands for every other occupant of
  the slot: exact for opaque predicates (an op's predicate at one iteration only
  changes commits after that op's issue) and for predicates that hold on an
  interval of iterations (every affine ``when`` of docs/problem-format.md); an op left uncommitted
  is reported, though perhaps at fewer statements than the ground truth would
  name. See docs/verification.md; the oracle tests check it.
* An op's reads happen before its own writes (an op never races with itself).
* An async op whose group's commit does not execute is never complete (PTX
  would fold it into the next commit; we don't rely on that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Mapping, Optional, Sequence

import z3

from ..expr import Bin, Expr, Num, Var, parse, simplify, to_z3
from ..program import CommitStmt, OpStmt, Program, WaitStmt


# -- fast term builders: z3's Python And/Or/If/Sum re-check sorts argument by argument; these
# call the C API directly (arguments are always well-sorted terms here). -----------------------
_CTX = z3.main_ctx()
_TRUE = z3.BoolVal(True)
_FALSE = z3.BoolVal(False)
_ZERO = z3.IntVal(0)
_ONE = z3.IntVal(1)
_TRUE_ID = _TRUE.get_id()
_FALSE_ID = _FALSE.get_id()
_ZERO_ID = _ZERO.get_id()


def _is_true(a) -> bool:
    return a.get_id() == _TRUE_ID


def _is_false(a) -> bool:
    return a.get_id() == _FALSE_ID


def _arr(args):
    a = (z3.Ast * len(args))()
    for k, x in enumerate(args):
        a[k] = x.as_ast()
    return a


def _flat(args):
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)


def And(*args) -> z3.BoolRef:
    args = _flat(args)
    xs = [a for a in args if not _is_true(a)]
    if any(_is_false(a) for a in xs):
        return _FALSE
    if not xs:
        return _TRUE
    if len(xs) == 1:
        return xs[0]
    return z3.BoolRef(z3.Z3_mk_and(_CTX.ref(), len(xs), _arr(xs)), _CTX)


def Or(*args) -> z3.BoolRef:
    args = _flat(args)
    xs = [a for a in args if not _is_false(a)]
    if any(_is_true(a) for a in xs):
        return _TRUE
    if not xs:
        return _FALSE
    if len(xs) == 1:
        return xs[0]
    return z3.BoolRef(z3.Z3_mk_or(_CTX.ref(), len(xs), _arr(xs)), _CTX)


def Not(a: z3.BoolRef) -> z3.BoolRef:
    if _is_true(a):
        return _FALSE
    if _is_false(a):
        return _TRUE
    return z3.BoolRef(z3.Z3_mk_not(_CTX.ref(), a.as_ast()), _CTX)


def Ind(c: z3.BoolRef) -> z3.ArithRef:
    """``If(c, 1, 0)``."""
    if _is_true(c):
        return _ONE
    if _is_false(c):
        return _ZERO
    return z3.ArithRef(z3.Z3_mk_ite(_CTX.ref(), c.as_ast(), _ONE.as_ast(), _ZERO.as_ast()), _CTX)


def Sum(xs) -> z3.ArithRef:
    xs = [x for x in xs if x.get_id() != _ZERO_ID]
    if not xs:
        return _ZERO
    if len(xs) == 1:
        return xs[0]
    return z3.ArithRef(z3.Z3_mk_add(_CTX.ref(), len(xs), _arr(xs)), _CTX)


def _memo(fn):
    """Cache a term builder per encoder (terms are relative to ``j``, so obligations share them)."""
    name = fn.__name__

    def wrapper(self, *args):
        key = (name,) + args
        hit = self._memo.get(key)
        if hit is None:
            hit = fn(self, *args)
            self._memo[key] = hit
        return hit
    wrapper.__name__ = name
    wrapper.__doc__ = fn.__doc__
    return wrapper


class Unsupported(Exception):
    """The program uses a shape the encoding cannot bound (reported as ``unknown``)."""


class NeedsWaits(Exception):
    """A term asked of an encoder built with ``no_waits`` depends on the program's waits (commits counted,
    a group forced, a wait's count): the caller encodes the obligation over the whole program instead."""


@dataclass(frozen=True)
class Point:
    """A statement position relative to the anchor: step ``j + r``, in ``part``, statement ``pos``."""

    r: int
    part: str
    pos: int


def before(a: Point, b: Point) -> bool:
    """``a`` is statically earlier than ``b`` in execution order (same part when same step)."""
    return a.r < b.r or (a.r == b.r and a.part == b.part and a.pos < b.pos)


class Encoder:
    """Terms over the anchor step ``j`` and the trip count ``T`` of one program.

    ``overrides`` replaces wait counts (tightness: ``n + 1``), ``dropped`` removes
    waits (subsumption checks). ``trip`` fixes ``T`` (differential tests).
    Terms are shared between obligations; :meth:`begin` resets the record of
    which waits an obligation mentions. ``parametric`` adds per-wait switches
    (:meth:`plus`, :meth:`drop`) instead of fixed overrides.
    """

    def __init__(self, program: Program, *, trip: Optional[int] = None,
                 overrides: Optional[Mapping[int, Expr]] = None,
                 dropped: AbstractSet[int] = frozenset(), parametric: bool = False, step: str = "j",
                 no_waits: bool = False) -> None:
        self.program = program
        self.no_waits = no_waits
        """The program's waits are left out (a Hopper program's barrier view): every term that counts commits or
        reads a wait raises :class:`NeedsWaits` rather than be encoded without them."""
        self.parametric = parametric
        """Each wait ``w`` gets literals :meth:`plus` (count + 1) and :meth:`drop` (wait removed),
        for tightness checks by assumptions on one formula."""
        self.tsym: Optional[str] = program.trip_count if isinstance(program.trip_count, str) else None
        self.T = z3.Int("T")
        self.j = z3.Int(step)
        """The anchor's step; ``step`` names it (several roles' encoders in one Hopper query)."""
        self.overrides = dict(overrides or {})
        self.dropped = frozenset(dropped)
        if trip is not None:
            self.trip_facts = [self.T == trip]
        elif self.tsym is None:
            self.trip_facts = [self.T == int(program.trip_count)]
        else:
            self.trip_facts = [self.T >= program.min_trip_count]
        self.parts = [p.name for p in program.parts]
        self.part = {p.name: p for p in program.parts}
        self.ops = {o.name: o for o in program.ops}
        self.mult = {b.name: b.multiplicity for b in program.buffers}
        self.ext: dict[str, z3.ArithRef] = {}
        self.off: dict[str, z3.ArithRef] = {}
        self.off_expr: dict[str, Expr] = {}
        acc: z3.ArithRef = z3.IntVal(0)
        acc_e: Expr = Num(0)
        for p in program.parts:
            self.off[p.name] = acc
            self.off_expr[p.name] = acc_e
            e = self.int_term(to_z3(p.extent, self.trip_env()))
            self.ext[p.name] = e
            acc = acc + e
            acc_e = simplify(Bin("+", acc_e, p.extent))
        self.N = acc
        self._opq: dict[tuple[str, int], z3.BoolRef] = {}
        self._memo: dict[tuple, object] = {}
        self._offset_cache: dict[tuple[str, Expr], Optional[int]] = {}
        self.waits_used: set[int] = set()

    def moved(self, j: z3.ArithRef) -> "Encoder":
        """The same program's encoder anchored at step term ``j`` (any integer term: a Hopper query places
        a partner instance at ``anchor + c``). Shares what does not depend on the step (part offsets and
        extents, version offsets); term caches start empty."""
        enc = object.__new__(Encoder)
        enc.__dict__.update(self.__dict__)
        enc.j = j
        enc._opq, enc._memo, enc.waits_used = {}, {}, set()
        return enc

    def opaque_predicates(self) -> list[tuple[tuple[str, int], z3.BoolRef]]:
        """``((op, r), constant)`` of every opaque predicate this encoder has made (:meth:`when`): the only opaque
        constants a query built with it can mention."""
        return list(self._opq.items())

    # -- bookkeeping ---------------------------------------------------------------------------
    def begin(self) -> None:
        self.waits_used = set()

    def trip_env(self) -> dict[str, object]:
        """``{T: the trip-count term}`` when the trip count is a symbol, else empty."""
        return {self.tsym: self.T} if self.tsym else {}

    @staticmethod
    def int_term(t) -> z3.ArithRef:
        """``t`` as a Z3 integer term (a Python int becomes a constant)."""
        return z3.IntVal(t) if isinstance(t, int) else t

    @staticmethod
    def bool_term(t) -> z3.BoolRef:
        """``t`` as a Z3 Boolean term (a Python bool becomes a constant)."""
        return z3.BoolVal(t) if isinstance(t, bool) else t

    # -- steps and parts ---------------------------------------------------------------------
    def step(self, r: int) -> z3.ArithRef:
        return self.j + r if r else self.j

    @_memo
    def in_part(self, part: str, r: int) -> z3.BoolRef:
        m = self.step(r)
        return And(self.off[part] <= m, m < self.off[part] + self.ext[part])

    def i_of(self, part: str, r: int) -> z3.ArithRef:
        return self.step(r) - self.off[part]

    def env(self, part: str, r: int) -> dict[str, object]:
        env = self.trip_env()
        env[self.part[part].var] = self.i_of(part, r)
        return env

    def domain(self) -> list[z3.BoolRef]:
        """Facts on ``T`` (the anchor's part membership is added by each obligation)."""
        return list(self.trip_facts)

    def expr(self, e: Expr, part: str, r: int):
        return to_z3(e, self.env(part, r))

    # -- statement instances -----------------------------------------------------------------
    @_memo
    def guard(self, part: str, pos: int, r: int) -> z3.BoolRef:
        g = self.part[part].stmts[pos].guard
        return _TRUE if g is None else self.bool_term(self.expr(g, part, r))

    def when(self, op: str, r: int) -> z3.BoolRef:
        """The op's predicate at its iteration in step ``j + r``."""
        o = self.ops[op]
        if o.when is None:
            return _TRUE
        if o.when == "opaque":
            key = (op, r)
            if key not in self._opq:
                self._opq[key] = z3.Bool(opaque_name(op, r))
            return self._opq[key]
        env = self.trip_env()
        env[self.program.loop_var] = self.step(r) - o.stage
        return self.bool_term(to_z3(parse(o.when), env))

    @_memo
    def op_exec(self, part: str, pos: int, r: int) -> z3.BoolRef:
        s = self.part[part].stmts[pos]
        assert isinstance(s, OpStmt)
        return And(self.in_part(part, r), self.guard(part, pos, r), self.when(s.op, r))

    def op_at(self, op: str, r: int) -> z3.BoolRef:
        """Some statement of ``op`` executes in step ``j + r``."""
        terms = [self.op_exec(p, k, r) for p in self.parts
                 for k, s in enumerate(self.part[p].stmts) if isinstance(s, OpStmt) and s.op == op]
        return Or(terms) if terms else _FALSE

    @_memo
    def commit_exec(self, part: str, pos: int, r: int) -> z3.BoolRef:
        s = self.part[part].stmts[pos]
        assert isinstance(s, CommitStmt)
        conds = [self.in_part(part, r), self.guard(part, pos, r)]
        if s.gate:
            conds.append(Or([self.when(g, r) for g in s.gate]))
        return And(conds)

    def _needs_waits(self) -> None:
        if self.no_waits:
            raise NeedsWaits()

    def wait_index(self, part: str, pos: int) -> int:
        self._needs_waits()
        s = self.part[part].stmts[pos]
        assert isinstance(s, WaitStmt)
        return s.wait

    @_memo
    def wait_count(self, part: str, pos: int, r: int) -> z3.ArithRef:
        self._needs_waits()
        w = self.wait_index(part, pos)
        e = self.overrides.get(w, self.program.waits[w].in_flight)
        n = self.int_term(self.expr(e, part, r))
        return Sum([n, Ind(self.plus(w))]) if self.parametric else n

    @_memo
    def wait_exec(self, part: str, pos: int, r: int) -> z3.BoolRef:
        self._needs_waits()
        g = And(self.in_part(part, r), self.guard(part, pos, r))
        return And(g, Not(self.drop(self.wait_index(part, pos)))) if self.parametric else g

    def plus(self, w: int) -> z3.BoolRef:
        """Parametric encoders: wait ``w`` allows one more group in flight."""
        return z3.Bool(f"tight.plus.{w}")

    def drop(self, w: int) -> z3.BoolRef:
        """Parametric encoders: wait ``w`` is removed."""
        return z3.Bool(f"tight.drop.{w}")

    # -- counting and completion -------------------------------------------------------------
    def _span(self, a: Point, b: Point):
        """``(r, part, lo, hi)``: statements strictly between ``a`` and ``b`` by step and part."""
        for r in range(a.r, b.r + 1):
            for p in self.parts:
                if r == a.r and p != a.part:
                    continue
                if r == b.r and p != b.part:
                    continue
                lo = a.pos if r == a.r else -1
                hi = b.pos if r == b.r else len(self.part[p].stmts)
                if lo < hi:
                    yield r, p, lo, hi

    @_memo
    def commits_between(self, q: int, a: Point, b: Point) -> z3.ArithRef:
        """Groups committed to ``q`` strictly after ``a`` and strictly before ``b``."""
        self._needs_waits()
        terms = []
        for r, p, lo, hi in self._span(a, b):
            for k in range(lo + 1, hi):
                s = self.part[p].stmts[k]
                if isinstance(s, CommitStmt) and s.queue == q:
                    terms.append(Ind(self.commit_exec(p, k, r)))
        return Sum(terms)

    def forced(self, q: int, a: Point, b: Point) -> z3.BoolRef:
        """The group committed at ``a`` (a commit on ``q``) is complete at ``b``."""
        self._needs_waits()
        key = ("forced", q, a, b)
        hit = self._memo.get(key)
        if hit is None:
            used: set[int] = set()
            hit = (self._forced(q, a, b, used), frozenset(used))
            self._memo[key] = hit
        self.waits_used |= hit[1]
        return hit[0]

    def _forced(self, q: int, a: Point, b: Point, used: set[int]) -> z3.BoolRef:
        """Some wait on ``q`` strictly between ``a`` and ``b`` has as many later commits as its count.

        Commits are counted by a running sum along the window (``base`` before each step, plus the
        commits met so far in the step's part), so each wait reuses the sum of the one before it.
        """
        if not before(a, b):
            return _FALSE
        disj = []
        base = _ZERO
        for r in range(a.r, b.r + 1):
            step_terms = []
            for p in self.parts:
                if (r == a.r and p != a.part) or (r == b.r and p != b.part):
                    continue
                lo = a.pos if r == a.r else -1
                hi = b.pos if r == b.r else len(self.part[p].stmts)
                run = base
                for k in range(lo + 1, hi):
                    s = self.part[p].stmts[k]
                    if isinstance(s, CommitStmt) and s.queue == q:
                        ind = Ind(self.commit_exec(p, k, r))
                        step_terms.append(ind)
                        run = Sum([run, ind])
                    elif isinstance(s, WaitStmt) and self.program.waits[s.wait].queue == q \
                            and s.wait not in self.dropped:
                        used.add(s.wait)
                        disj.append(And(self.wait_exec(p, k, r), run >= self.wait_count(p, k, r)))
            base = Sum([base] + step_terms)
        return Or(disj)

    def commit_of(self, part: str, pos: int) -> Optional[int]:
        """Position of the commit closing the group of the async op statement at ``pos``."""
        s = self.part[part].stmts[pos]
        assert isinstance(s, OpStmt)
        if s.group is None:
            return None
        for k in range(pos + 1, len(self.part[part].stmts)):
            c = self.part[part].stmts[k]
            if isinstance(c, CommitStmt) and c.group == s.group:
                return k
        return None

    def complete(self, part: str, pos: int, r: int, at: Point) -> z3.BoolRef:
        """The async op instance (statement ``pos`` of ``part`` in step ``j + r``) is complete at ``at``."""
        self._needs_waits()
        c = self.commit_of(part, pos)
        if c is None:
            return _FALSE
        q = self.part[part].stmts[c].queue
        return And(self.commit_exec(part, c, r), self.forced(q, Point(r, part, c), at))

    def done_before(self, part: str, pos: int, r: int, at: Point) -> z3.BoolRef:
        """The op instance at ``(part, pos, r)`` is finished (sync: earlier; async: complete) at ``at``."""
        s = self.part[part].stmts[pos]
        assert isinstance(s, OpStmt)
        if self.ops[s.op].is_async:
            return self.complete(part, pos, r, at)
        return z3.BoolVal(before(Point(r, part, pos), at))

    # -- version offsets ---------------------------------------------------------------------
    def offset(self, part: str, e: Expr) -> Optional[int]:
        """``c`` with ``e == j + c`` over the whole part (``e`` in the part's ``i``), else None."""
        key = (part, e)
        if key in self._offset_cache:
            return self._offset_cache[key]
        var = self.part[part].var
        diff = simplify(Bin("-", e, Bin("+", Var(var), self.off_expr[part])))
        out: Optional[int]
        if isinstance(diff, Num):
            out = diff.value
        else:
            out = self._offset_z3(part, e)
        self._offset_cache[key] = out
        return out

    def _offset_z3(self, part: str, e: Expr) -> Optional[int]:
        s = z3.Solver()
        s.set("timeout", 5000)
        s.add(self.domain())
        s.add(self.in_part(part, 0))
        val = self.int_term(self.expr(e, part, 0)) - self.j
        if s.check() != z3.sat:
            return 0  # the part never runs: any offset will do
        c = s.model().eval(val, model_completion=True).as_long()
        s.add(val != c)
        return c if s.check() == z3.unsat else None

    def delta_range(self, facts: Sequence[z3.BoolRef], delta: z3.ArithRef, limit: int = 64) -> list[int]:
        """All values ``delta`` takes under ``facts`` (with the trip facts); raises :class:`Unsupported`."""
        lo_hi = []
        for sense in ("min", "max"):
            o = z3.Optimize()
            o.set("timeout", 10000)
            o.add(self.domain())
            o.add(*facts)
            h = o.minimize(delta) if sense == "min" else o.maximize(delta)
            res = o.check()
            if res == z3.unsat:
                return []
            if res != z3.sat:
                raise Unsupported("could not bound the distance between the two statements")
            v = (o.lower(h) if sense == "min" else o.upper(h))
            if not z3.is_int_value(v):
                raise Unsupported("the distance between the two statements is unbounded")
            lo_hi.append(v.as_long())
        lo, hi = lo_hi
        if hi - lo > limit:
            raise Unsupported(f"the distance between the two statements spans {hi - lo + 1} steps")
        return list(range(lo, hi + 1))


def opaque_name(op: str, r: int) -> str:
    """SMT name of op ``op``'s opaque predicate at step offset ``r``."""
    return f"opq.{op}.{'m' if r < 0 else 'p'}{abs(r)}"


def parse_opaque_name(name: str) -> Optional[tuple[str, int]]:
    """Inverse of :func:`opaque_name` (None for other names)."""
    if not name.startswith("opq."):
        return None
    op, tail = name[4:].rsplit(".", 1)
    return op, (-1 if tail[0] == "m" else 1) * int(tail[1:])


# --------------------------------------------------------------------------------------------
# formulas (negated obligations)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Encoded:
    formula: z3.BoolRef
    """The negated obligation (``unsat``: proven)."""
    waits: frozenset[int]
    """Waits whose statements the formula mentions."""


def _finish(enc: Encoder, f: z3.BoolRef) -> Encoded:
    return Encoded(f, frozenset(enc.waits_used))


def encode_raw(enc: Encoder, part: str, pos: int, k: int, deltas: Sequence[int],
               producer_stmts: Sequence[tuple[str, int]], premise_only: bool = False) -> Encoded:
    """Read ``k`` of statement ``pos`` of ``part`` sees its producer's finished write."""
    enc.begin()
    s = enc.part[part].stmts[pos]
    assert isinstance(s, OpStmt)
    acc = s.reads[k]
    prod = enc.ops[acc.producer]  # type: ignore[index]
    at = Point(0, part, pos)
    version = enc.int_term(enc.expr(acc.version, part, 0))
    delta = enc.j - (version + prod.stage)
    cases = []
    for d in deltas:
        for (pp, pk) in producer_stmts:
            runs = And(delta == d, enc.op_exec(pp, pk, -d))
            cases.append(runs if premise_only else And(runs, Not(enc.done_before(pp, pk, -d, at))))
    pstep = enc.j - delta
    cases.append(And(0 <= pstep, pstep < enc.N, *[delta != d for d in deltas]))
    f = And(*enc.domain(), enc.op_exec(part, pos, 0), Or(cases))
    return _finish(enc, f)


def _producer_ran(enc: Encoder, rpart: str, rpos: int, k: int, r: int) -> z3.BoolRef:
    """The producer of read ``k`` of ``(rpart, rpos)`` in step ``j + r`` executed (True if unknown)."""
    s = enc.part[rpart].stmts[rpos]
    assert isinstance(s, OpStmt)
    acc = s.reads[k]
    if acc.producer is None or acc.producer not in enc.ops:
        return _TRUE
    c = enc.offset(rpart, acc.version)
    if c is None:
        return _TRUE
    return enc.op_at(acc.producer, r + c + enc.ops[acc.producer].stage)


def encode_war(enc: Encoder, wpart: str, wpos: int, wk: int, rpart: str, rpos: int, rk: int,
               deltas: Sequence[int], premise_only: bool = False) -> Encoded:
    """The write ``wk`` of ``(wpart, wpos)`` happens after the read ``rk`` of ``(rpart, rpos)`` of
    the slot's previous version is done."""
    return _encode_slot_reuse(enc, wpart, wpos, wk, rpart, rpos, rk, deltas, premise_only, "read")


def encode_waw(enc: Encoder, wpart: str, wpos: int, wk: int, ppart: str, ppos: int, pk: int,
               deltas: Sequence[int], premise_only: bool = False) -> Encoded:
    """The write ``wk`` of ``(wpart, wpos)`` is issued after the previous write of its slot is done."""
    return _encode_slot_reuse(enc, wpart, wpos, wk, ppart, ppos, pk, deltas, premise_only, "write")


def _encode_slot_reuse(enc: Encoder, wpart: str, wpos: int, wk: int, opart: str, opos: int, ok: int,
                       deltas: Sequence[int], premise_only: bool, other: str) -> Encoded:
    """The write ``wk`` of ``(wpart, wpos)`` comes after the access ``ok`` (a read or a write,
    per ``other``) of ``(opart, opos)`` to the slot's previous version (``version - M``) is done."""
    enc.begin()
    w = enc.part[wpart].stmts[wpos]
    o = enc.part[opart].stmts[opos]
    assert isinstance(w, OpStmt) and isinstance(o, OpStmt)
    wa = w.writes[wk]
    oa = o.reads[ok] if other == "read" else o.writes[ok]
    m = enc.mult[wa.buffer]
    at = Point(0, wpart, wpos)
    vw = enc.int_term(enc.expr(wa.version, wpart, 0))
    cases = []
    for d in deltas:
        vo = enc.int_term(enc.expr(oa.version, opart, -d))
        runs = And(vo == vw - m, enc.op_exec(opart, opos, -d))
        if other == "read":
            runs = And(runs, _producer_ran(enc, opart, opos, ok, -d))
        cases.append(runs if premise_only else And(runs, Not(enc.done_before(opart, opos, -d, at))))
    cases.append(_exhaustive(enc, opart, oa.version, vw - m, deltas, "jr" if other == "read" else "jp"))
    f = And(*enc.domain(), enc.op_exec(wpart, wpos, 0), Or(cases))
    return _finish(enc, f)


def _exhaustive(enc: Encoder, part: str, version: Expr, target: z3.ArithRef, deltas: Sequence[int],
                name: str) -> z3.BoolRef:
    """Some step of ``part`` has ``version == target`` at a distance not among ``deltas``."""
    jr = z3.Int(name)
    env = enc.trip_env()
    env[enc.part[part].var] = jr - enc.off[part]
    v = enc.int_term(to_z3(version, env))
    return And(enc.off[part] <= jr, jr < enc.off[part] + enc.ext[part], v == target,
                  *[enc.j - jr != d for d in deltas])


def pair_deltas(enc: Encoder, apart: str, apos: int, aversion: z3.ArithRef, bpart: str,
                bversion: Expr, shift: int) -> list[int]:
    """Distances ``d`` such that statement instance in ``bpart`` at step ``j - d`` has
    ``bversion == aversion - shift`` with the anchor ``(apart, apos)`` executing at ``j``."""
    jr = z3.Int("jr")
    env = enc.trip_env()
    env[enc.part[bpart].var] = jr - enc.off[bpart]
    v = enc.int_term(to_z3(bversion, env))
    facts = [enc.in_part(apart, 0), enc.guard(apart, apos, 0),
             enc.off[bpart] <= jr, jr < enc.off[bpart] + enc.ext[bpart], v == aversion - shift]
    return enc.delta_range(facts, enc.j - jr)


def encode_count(enc: Encoder, part: str, pos: int) -> Encoded:
    """The wait at ``(part, pos)`` has a count ``>= 0`` wherever it executes."""
    enc.begin()
    enc.waits_used.add(enc.wait_index(part, pos))
    f = And(*enc.domain(), enc.wait_exec(part, pos, 0), enc.wait_count(part, pos, 0) < 0)
    return _finish(enc, f)


def encode_wellformed(enc: Encoder, part: str) -> Encoded:
    """Iterations are ``j - stage`` and executed accesses' slots ``version % multiplicity`` in ``part``."""
    enc.begin()
    bad: list[z3.BoolRef] = []
    for k, s in enumerate(enc.part[part].stmts):
        if not isinstance(s, OpStmt):
            continue
        stage = enc.ops[s.op].stage
        bad.append(enc.int_term(enc.expr(s.iteration, part, 0)) != enc.j - stage)
        g = enc.guard(part, k, 0)
        for a in s.reads + s.writes:
            m = enc.mult[a.buffer]
            slot = enc.int_term(enc.expr(a.slot, part, 0))
            ver = enc.int_term(enc.expr(a.version, part, 0))
            bad.append(And(g, slot != ver % m))
    f = And(*enc.domain(), enc.in_part(part, 0), Or(bad)) if bad else _FALSE
    return _finish(enc, f)


def encode_extents(enc: Encoder) -> Encoded:
    """Every part's extent is ``>= 0`` for every allowed trip count."""
    enc.begin()
    f = And(*enc.domain(), Or([enc.ext[p] < 0 for p in enc.parts]))
    return _finish(enc, f)

"""The Z3 helper of the lowering: validity and satisfiability of conditions in a
part's ``i`` and the trip count ``T``.

Input: conditions as :class:`~synth.expr.Expr` (and ``T >= min_trip_count`` when
``T`` is symbolic). Output: booleans, cached; a cheap refutation by sample points
is tried before Z3. Raises ``RuntimeError`` if Z3 answers unknown.
"""

from __future__ import annotations

from ..expr import Bin, Call, Expr, Ite, Num, Un, Var, apply_binary, to_str
from .exprs import conj


class _Key:
    """An expression as a cache key: its structural hash computed once (:meth:`Prover._hash`),
    equality structural (a hash collision never answers for another expression)."""

    __slots__ = ("e", "h")

    def __init__(self, e: Expr, h: int) -> None:
        self.e = e
        self.h = h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.h == other.h and (self.e is other.e or self.e == other.e)


class Prover:
    """Validity and satisfiability of conditions in the part variable and ``T`` (with
    ``T >= tmin`` when ``T`` is a symbol), with a cheap refutation by sample points
    first and a cache. One per lowering (not thread-safe).

    The lowering asks about many large conditions that share sub-trees (sums of
    commit indicators), so everything computed per sub-tree is memoised by the
    sub-tree's identity (the tree is kept alive, so its id is not reused): its Z3
    term, its structural hash (cache keys) and its free names. Z3 terms are also
    shared by structure (one term per operator and operand terms), so equal
    sub-trees built apart cost one translation."""

    def __init__(self, T: Expr, tmin: int) -> None:
        # z3: only when a count is proven; the light runtime imports the lowering (KernelDesign.program)
        import z3

        self.z3 = z3
        self.T = T
        self.tmin = tmin
        self.solver = z3.SolverFor("QF_LIA")
        self.cache: dict[tuple, bool] = {}
        self.vars: dict[str, object] = {}
        self.memo: dict[int, tuple[Expr, object]] = {}
        self.terms: dict[tuple, object] = {}
        self.hashes: dict[int, tuple[Expr, int]] = {}
        self.names: dict[int, tuple[Expr, frozenset]] = {}
        self.values: dict[tuple, dict[int, tuple[Expr, object]]] = {}
        self.sample = True
        self._tmin_term = None

    def t_big(self, S: int) -> int:
        """A trip count past every short-loop effect of an ``S``-stage pipeline (``T`` when fixed)."""
        if isinstance(self.T, Num):
            return self.T.value
        return self.tmin + 6 * S + 40

    def _hash(self, e: Expr) -> int:
        """A structural hash of ``e`` (equal trees, equal hashes), memoised per sub-tree."""
        hit = self.hashes.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, (Num, Var)):
            h = hash(e)
        elif isinstance(e, Un):
            h = hash(("u", e.op, self._hash(e.arg)))
        elif isinstance(e, Bin):
            h = hash(("b", e.op, self._hash(e.lhs), self._hash(e.rhs)))
        elif isinstance(e, Ite):
            h = hash(("?", self._hash(e.cond), self._hash(e.then), self._hash(e.other)))
        else:
            h = hash(("c", e.fn) + tuple(self._hash(a) for a in e.args))
        self.hashes[id(e)] = (e, h)
        return h

    def _key(self, e: Expr) -> _Key:
        return _Key(e, self._hash(e))

    def _free(self, e: Expr) -> frozenset:
        """:func:`~synth.expr.free_vars`, memoised per sub-tree."""
        hit = self.names.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, Var):
            out = frozenset([e.name])
        elif isinstance(e, Num):
            out = frozenset()
        elif isinstance(e, Un):
            out = self._free(e.arg)
        elif isinstance(e, Bin):
            out = self._free(e.lhs) | self._free(e.rhs)
        elif isinstance(e, Ite):
            out = self._free(e.cond) | self._free(e.then) | self._free(e.other)
        else:
            out = frozenset().union(*(self._free(a) for a in e.args))
        self.names[id(e)] = (e, out)
        return out

    def _term(self, e: Expr):
        """``e`` as a Z3 term; memoised per sub-tree, and shared by structure."""
        z3 = self.z3
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, Num):
            key: tuple = ("n", e.value)
            t = self.terms.get(key)
            if t is None:
                t = self.terms[key] = z3.IntVal(e.value)
        elif isinstance(e, Var):
            if e.name not in self.vars:
                self.vars[e.name] = z3.Int(e.name)
            t = self.vars[e.name]
        elif isinstance(e, Un):
            a = self._term(e.arg)
            key = ("u", e.op, a.get_id())
            t = self.terms.get(key)
            if t is None:
                t = self.terms[key] = z3.Not(a) if e.op == "!" else -a
        elif isinstance(e, Ite):
            c, a, b = self._term(e.cond), self._term(e.then), self._term(e.other)
            key = ("?", c.get_id(), a.get_id(), b.get_id())
            t = self.terms.get(key)
            if t is None:
                t = self.terms[key] = z3.If(c, a, b)
        elif isinstance(e, Call):
            args = [self._term(x) for x in e.args]
            t = args[0]
            for x in args[1:]:
                t = z3.If(x < t, x, t) if e.fn == "min" else z3.If(x > t, x, t)
        else:
            a, b = self._term(e.lhs), self._term(e.rhs)
            op = e.op
            key = ("b", op, a.get_id(), b.get_id())
            t = self.terms.get(key)
            if t is None:
                if op == "&&":
                    t = z3.And(a, b)
                elif op == "||":
                    t = z3.Or(a, b)
                else:
                    t = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                         "%": lambda: a % b, "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
                         ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b}[op]()
                self.terms[key] = t
        self.memo[id(e)] = (e, t)  # keeps e alive, so its id is not reused
        return t

    def _check(self, formula: Expr) -> bool:
        """Whether ``formula`` is satisfiable (with T >= tmin when T is symbolic)."""
        key = ("sat", self._key(formula))
        if key in self.cache:
            return self.cache[key]
        s = self.solver
        s.push()
        s.add(self._term(formula))
        if isinstance(self.T, Var):
            if self._tmin_term is None:
                self._tmin_term = self._term(Bin(">=", self.T, Num(self.tmin)))
            s.add(self._tmin_term)
        res = s.check()
        s.pop()
        if res == self.z3.unknown:
            raise RuntimeError(f"z3 returned unknown on {to_str(formula)}")
        out = res == self.z3.sat
        self.cache[key] = out
        return out

    def sat(self, e: Expr) -> bool:
        """``e`` holds for some values of its free names (and an allowed ``T``)."""
        return self._check(e)

    def valid(self, hyp: Expr, concl: Expr) -> bool:
        """``hyp => concl`` for all values of the free names (and every allowed ``T``)."""
        key = ("valid", self._key(hyp), self._key(concl))
        out = self.cache.get(key)
        if out is not None:
            return out
        if self.sample and self._refuted(hyp, concl):
            self.cache[key] = False
            return False
        out = not self._check(conj(hyp, Un("!", concl)))
        self.cache[key] = out
        return out

    def _refuted(self, hyp: Expr, concl: Expr) -> bool:
        names = self._free(hyp) | self._free(concl)
        tname = self.T.name if isinstance(self.T, Var) else None
        others = names - {tname}
        if len(others) > 1:
            return False
        v = next(iter(others)) if others else None
        ts = [self.tmin, self.tmin + 9] if tname else [None]
        for t in ts:
            for x in (0, 1, 3, 8) if v else (0,):
                env = {}
                if tname:
                    env[tname] = t
                if v:
                    env[v] = x
                memo = self.values.setdefault((tname, t, v, x), {})
                try:
                    if self._eval(hyp, env, memo) and not self._eval(concl, env, memo):
                        return True
                except KeyError:
                    return False
        return False

    def _eval(self, e: Expr, env: dict, memo: dict):
        """:func:`~synth.expr.evaluate` of ``e`` in ``env``, memoised per sub-tree in ``memo``
        (one memo per sample point)."""
        hit = memo.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, Num):
            out = e.value
        elif isinstance(e, Var):
            out = env[e.name]
        elif isinstance(e, Bin):
            out = apply_binary(e.op, self._eval(e.lhs, env, memo), self._eval(e.rhs, env, memo))
        elif isinstance(e, Ite):
            out = self._eval(e.then, env, memo) if self._eval(e.cond, env, memo) else self._eval(e.other, env, memo)
        elif isinstance(e, Un):
            a = self._eval(e.arg, env, memo)
            out = (not a) if e.op == "!" else -int(a)
        else:
            vals = [int(self._eval(a, env, memo)) for a in e.args]
            out = min(vals) if e.fn == "min" else max(vals)
        memo[id(e)] = (e, out)  # keeps e alive, so its id is not reused
        return out

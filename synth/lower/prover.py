"""The Z3 helper of the lowering: validity and satisfiability of conditions in a
part's ``i`` and the trip count ``T``.

Input: conditions as :class:`~synth.expr.Expr` (and ``T >= min_trip_count`` when
``T`` is symbolic). Output: booleans, cached; a cheap refutation by sample points
is tried before Z3. Raises ``RuntimeError`` if Z3 answers unknown.
"""

from __future__ import annotations

from ..expr import Bin, Call, Expr, Ite, Num, Un, Var, evaluate, free_vars, to_str
from .exprs import conj


class Prover:
    """Validity and satisfiability of conditions in the part variable and ``T`` (with
    ``T >= tmin`` when ``T`` is a symbol), with a cheap refutation by sample points
    first and a cache. One per lowering (not thread-safe)."""

    def __init__(self, T: Expr, tmin: int) -> None:
        import z3

        self.z3 = z3
        self.T = T
        self.tmin = tmin
        self.solver = z3.SolverFor("QF_LIA")
        self.cache: dict[tuple, bool] = {}
        self.vars: dict[str, object] = {}
        self.memo: dict[int, tuple[Expr, object]] = {}
        self.sample = True

    def t_big(self, S: int) -> int:
        """A trip count past every short-loop effect of an ``S``-stage pipeline (``T`` when fixed)."""
        if isinstance(self.T, Num):
            return self.T.value
        return self.tmin + 6 * S + 40

    def _term(self, e: Expr):
        """``e`` as a Z3 term; sub-terms are memoised (counts share many conditions)."""
        z3 = self.z3
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, Num):
            t = z3.IntVal(e.value)
        elif isinstance(e, Var):
            if e.name not in self.vars:
                self.vars[e.name] = z3.Int(e.name)
            t = self.vars[e.name]
        elif isinstance(e, Un):
            a = self._term(e.arg)
            t = z3.Not(a) if e.op == "!" else -a
        elif isinstance(e, Ite):
            t = z3.If(self._term(e.cond), self._term(e.then), self._term(e.other))
        elif isinstance(e, Call):
            args = [self._term(x) for x in e.args]
            t = args[0]
            for x in args[1:]:
                t = z3.If(x < t, x, t) if e.fn == "min" else z3.If(x > t, x, t)
        else:
            a, b = self._term(e.lhs), self._term(e.rhs)
            op = e.op
            if op == "&&":
                t = z3.And(a, b)
            elif op == "||":
                t = z3.Or(a, b)
            else:
                t = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                     "%": lambda: a % b, "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
                     ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b}[op]()
        self.memo[id(e)] = (e, t)  # keeps e alive, so its id is not reused
        return t

    def _check(self, formula: Expr) -> bool:
        """Whether ``formula`` is satisfiable (with T >= tmin when T is symbolic)."""
        key = ("sat", formula)
        if key in self.cache:
            return self.cache[key]
        s = self.solver
        s.push()
        s.add(self._term(formula))
        if isinstance(self.T, Var):
            s.add(self._term(Bin(">=", self.T, Num(self.tmin))))
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
        key = ("valid", hyp, concl)
        if key in self.cache:
            return self.cache[key]
        if self.sample and self._refuted(hyp, concl):
            self.cache[key] = False
            return False
        out = not self._check(conj(hyp, Un("!", concl)))
        self.cache[key] = out
        return out

    def _refuted(self, hyp: Expr, concl: Expr) -> bool:
        names = free_vars(hyp) | free_vars(concl)
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
                try:
                    if evaluate(hyp, env) and not evaluate(concl, env):
                        return True
                except KeyError:
                    return False
        return False

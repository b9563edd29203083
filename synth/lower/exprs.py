"""Expression helpers of the lowering: constants ``TRUE``/``FALSE``, short-circuit
conjunction, ``+ k``/``- k`` with simplification, and readable affine forms.

Input: :class:`~synth.expr.Expr` trees. Output: equal-valued trees in the form
RFC 0077 prints (``2 <= i``, ``i < 1``, ``i + 6 < T``; ``2 - i`` rather than
``-i + 2``). :func:`pretty_condition` is the entry point for other packages; the
other public names serve the modules of :mod:`synth.lower`. Pure; imports nothing
from the rest of the package.
"""

from __future__ import annotations

from typing import Optional

from ..expr import Bin, Expr, Num, Un, Var, as_affine, evaluate, free_vars, is_bool, parse, simplify, to_str


TRUE: Expr = Bin("==", Num(0), Num(0))
FALSE: Expr = Bin("!=", Num(0), Num(0))


def norm(e: Expr) -> Expr:
    """The form ``parse(to_str(e))`` (what program.json reads back)."""
    return parse(to_str(e))


def conj(a: Expr, b: Expr) -> Expr:
    """``a && b``, dropping a ``TRUE`` side."""
    if a == TRUE:
        return b
    if b == TRUE:
        return a
    return Bin("&&", a, b)


def add_k(e: Expr, k: int) -> Expr:
    """``e + k``, simplified."""
    return simplify(Bin("+", e, Num(k)))


def sub_k(e: Expr, k: int) -> Expr:
    """``e - k``, simplified."""
    return simplify(Bin("-", e, Num(k)))


def add_e(a: Expr, b: Expr) -> Expr:
    """``a + b``, simplified."""
    return simplify(Bin("+", a, b))


def sub_e(a: Expr, b: Expr) -> Expr:
    """``a - b``, simplified."""
    return simplify(Bin("-", a, b))


def conjuncts(e: Expr) -> list[Expr]:
    """The operands of a tree of ``&&`` (``[e]`` for anything else)."""
    if isinstance(e, Bin) and e.op == "&&":
        return conjuncts(e.lhs) + conjuncts(e.rhs)
    return [e]


def aff(coeffs: dict[str, int], const: int, first: str) -> Expr:
    """``sum(c * x) + const``, readable: ``first`` var leads, positive terms before
    negative ones, ``2 - i`` rather than ``-i + 2``; never a negative literal."""
    names = sorted((n for n, c in coeffs.items() if c), key=lambda n: (n != first, n))
    pos = [(n, coeffs[n]) for n in names if coeffs[n] > 0]
    neg = [(n, -coeffs[n]) for n in names if coeffs[n] < 0]

    def term(n: str, c: int) -> Expr:
        return Var(n) if c == 1 else Bin("*", Num(c), Var(n))

    out: Optional[Expr] = None
    for n, c in pos:
        out = term(n, c) if out is None else Bin("+", out, term(n, c))
    if out is None and const > 0:
        out, const = Num(const), 0
    for n, c in neg:
        out = Un("-", term(n, c)) if out is None else Bin("-", out, term(n, c))
    if out is None:
        return Num(const) if const >= 0 else Un("-", Num(-const))
    if const > 0:
        out = Bin("+", out, Num(const))
    elif const < 0:
        out = Bin("-", out, Num(-const))
    return out


def aff_expr(e: Expr, first: str) -> Expr:
    """``e`` rewritten by :func:`aff` when it is affine."""
    a = as_affine(e) if not is_bool(e) else None
    return e if a is None else aff(a[0], a[1], first)


def _ge0(coeffs: dict[str, int], c: int, first: str) -> Expr:
    """``sum(coeffs) + c >= 0`` in the form RFC 0077 prints (``2 <= i``, ``i < 1``, ``i + 6 < T``;
    a constant lower bound of a sum as ``3 <= i + T``)."""
    coeffs = {n: v for n, v in coeffs.items() if v}
    if not coeffs:
        return TRUE if c >= 0 else FALSE
    if len(coeffs) == 1:
        (x, a), = coeffs.items()
        if a == 1 and c <= 0:
            return Bin("<=", Num(-c), Var(x))
        if a == -1 and c >= 0:
            return Bin("<", Var(x), Num(c + 1))
    if c <= 0 and all(v > 0 for v in coeffs.values()):
        return Bin("<=", Num(-c), aff(coeffs, 0, first))
    # sum + c + 1 > 0  <=>  L < R
    k = c + 1
    lhs = aff({n: -v for n, v in coeffs.items() if v < 0}, max(-k, 0), first)
    rhs = aff({n: v for n, v in coeffs.items() if v > 0}, max(k, 0), first)
    return Bin("<", lhs, rhs)


def pretty_bool(e: Expr, first: str) -> Expr:
    """Comparisons of affine sides in :func:`_ge0`'s form, constants folded."""
    e = simplify(e)
    if not free_vars(e):
        return TRUE if evaluate(e, {}) else FALSE
    if isinstance(e, Bin) and e.op in ("&&", "||"):
        a, b = pretty_bool(e.lhs, first), pretty_bool(e.rhs, first)
        if e.op == "&&":
            if FALSE in (a, b):
                return FALSE
            return conj(a, b)
        if TRUE in (a, b):
            return TRUE
        return b if a == FALSE else a if b == FALSE else Bin("||", a, b)
    if isinstance(e, Un) and e.op == "!":
        a = pretty_bool(e.arg, first)
        if a in (TRUE, FALSE):
            return FALSE if a == TRUE else TRUE
        if isinstance(a, Bin) and a.op in ("<", "<="):
            d = as_affine(Bin("-", a.rhs, a.lhs))
            if d is not None:  # !(l < r) <=> l - r >= 0 ; !(l <= r) <=> l - r - 1 >= 0
                return _ge0({n: -v for n, v in d[0].items()}, -d[1] - (0 if a.op == "<" else 1), first)
        return Un("!", a)
    if isinstance(e, Bin) and e.op in ("<", "<=", ">", ">="):
        d = as_affine(Bin("-", e.rhs, e.lhs))
        if d is not None:
            coeffs, c = d
            if e.op == "<":      # r - l > 0
                return _ge0(coeffs, c - 1, first)
            if e.op == "<=":
                return _ge0(coeffs, c, first)
            neg = {n: -v for n, v in coeffs.items()}
            if e.op == ">":      # l - r > 0
                return _ge0(neg, -c - 1, first)
            return _ge0(neg, -c, first)
    return e


def pretty_condition(e: Expr, var: str = "i") -> Expr:
    """A condition with its comparisons in RFC 0077's form (``2 <= i``, ``i < 1``,
    ``i + 6 < T``) and constants folded; same value as ``e``."""
    return norm(pretty_bool(e, var))

"""Expressions of ``program.json`` (guards, versions, counts, extents, ``when``), for the trusted checker.

Grammar (C precedence, lowest first), the one ``docs/verification.md`` states::

    e := e ? e : e | e || e | e && e | !e | e (< <= > >= == !=) e
       | e (+ -) e | e (* / %) e | -e | int | name | min(e, e, ...) | max(e, ...) | (e)

``and``/``or``/``not`` stand for ``&&``/``||``/``!``; ``true``/``false`` are
conditions. ``*`` needs a constant on one side, ``/`` and ``%`` a positive
constant divisor (floor division and a non-negative remainder: SMT-LIB's ``div``
and ``mod``). Bounds: :data:`MAX_TOKENS` tokens, :data:`MAX_DEPTH` levels of
nesting, integer literals of at most :data:`MAX_DIGITS` digits.

A parsed expression is a tuple tree; :func:`smt` prints it as an SMT-LIB2 term
with the names replaced by terms, :func:`linear` gives its affine form when it
has one. This module is part of the trusted base: it imports nothing from synth.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Union

MAX_TOKENS = 256
MAX_DEPTH = 32
MAX_DIGITS = 12

Node = tuple
"""``("num", n)``, ``("var", name)``, ``("un", op, a)``, ``("bin", op, a, b)``, ``("ite", c, a, b)``,
``("call", fn, args)``."""

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<op>&&|\|\||<=|>=|==|!=|[-+*/%<>!?:(),]))")
_PREC = {"||": 1, "&&": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_WORDS = {"and": "&&", "or": "||", "not": "!"}
_BOOL_BIN = {"&&", "||"}
_CMP = {"<", "<=", ">", ">=", "==", "!="}


class ExprError(ValueError):
    """Not an expression of the grammar above (or the wrong kind: integer vs condition)."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while text[pos:].strip():
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos:].lstrip()[0]!r}")
        kind = m.lastgroup or "op"
        val = m.group(kind)
        if kind == "name" and val in _WORDS:
            kind, val = "op", _WORDS[val]
        if kind == "num" and len(val) > MAX_DIGITS:
            raise ExprError(f"integer literal with more than {MAX_DIGITS} digits")
        out.append((kind, val))
        if len(out) > MAX_TOKENS:
            raise ExprError(f"expression longer than {MAX_TOKENS} tokens")
        pos = m.end()
    out.append(("end", ""))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.k = 0
        self.depth = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.k]

    def take(self, val: Optional[str] = None) -> tuple[str, str]:
        tok = self.toks[self.k]
        if val is not None and tok[1] != val:
            raise ExprError(f"expected {val!r}, found {tok[1] or 'the end'!r}")
        self.k += 1
        return tok

    def nest(self, d: int) -> None:
        self.depth += d
        if self.depth > MAX_DEPTH:
            raise ExprError(f"expression nested more than {MAX_DEPTH} deep")

    def expr(self) -> Node:
        self.nest(1)
        c = self.binary(1)
        if self.peek()[1] == "?":
            self.take("?")
            a = self.expr()
            self.take(":")
            b = self.expr()
            c = ("ite", c, a, b)
        self.nest(-1)
        return c

    def binary(self, lo: int) -> Node:
        lhs = self.unary()
        while True:
            kind, op = self.peek()
            prec = _PREC.get(op) if kind == "op" else None
            if prec is None or prec < lo:
                return lhs
            self.take()
            lhs = ("bin", op, lhs, self.binary(prec + 1))

    def unary(self) -> Node:
        kind, val = self.peek()
        if val in ("-", "!"):
            self.take()
            self.nest(1)
            a = self.unary()
            self.nest(-1)
            return ("un", val, a)
        if val == "(":
            self.take()
            e = self.expr()
            self.take(")")
            return e
        if kind == "num":
            self.take()
            return ("num", int(val))
        if kind == "name":
            self.take()
            if val in ("true", "false"):
                return ("bool", val == "true")
            if self.peek()[1] == "(":
                if val not in ("min", "max"):
                    raise ExprError(f"unknown function {val!r} (only min and max)")
                self.take("(")
                args = [self.expr()]
                while self.peek()[1] == ",":
                    self.take(",")
                    args.append(self.expr())
                self.take(")")
                return ("call", val, tuple(args))
            return ("var", val)
        raise ExprError(f"unexpected {val or 'end of expression'!r}")


def parse(text: Union[str, int]) -> Node:
    """The tree of ``text`` (an int stands for itself); raises :class:`ExprError`."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ExprError("expected an integer or an expression string")
    if isinstance(text, int):
        return ("num", text)
    p = _Parser(text)
    e = p.expr()
    if p.peek()[0] != "end":
        raise ExprError(f"unexpected {p.peek()[1]!r} after the expression")
    return e


def sort(e: Node) -> str:
    """``"Int"`` or ``"Bool"``; raises :class:`ExprError` on an ill-sorted tree."""
    tag = e[0]
    if tag in ("num", "var"):
        return "Int"
    if tag == "bool":
        return "Bool"
    if tag == "un":
        want = "Int" if e[1] == "-" else "Bool"
        _want(e[2], want)
        return want
    if tag == "bin":
        op, a, b = e[1], e[2], e[3]
        if op in _BOOL_BIN:
            _want(a, "Bool")
            _want(b, "Bool")
            return "Bool"
        _want(a, "Int")
        _want(b, "Int")
        if op == "*" and const(a) is None and const(b) is None:
            raise ExprError("'*' needs a constant on one side")
        if op in ("/", "%"):
            c = const(b)
            if c is None or c <= 0:
                raise ExprError(f"'{op}' needs a positive constant divisor")
        return "Bool" if op in _CMP else "Int"
    if tag == "ite":
        _want(e[1], "Bool")
        s = sort(e[2])
        _want(e[3], s)
        return s
    for a in e[2]:
        _want(a, "Int")
    return "Int"


def _want(e: Node, s: str) -> None:
    if sort(e) != s:
        raise ExprError("a condition where an integer is expected" if s == "Int"
                        else "an integer where a condition is expected")


def names(e: Node) -> frozenset:
    """The variable names ``e`` mentions."""
    out: set = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if x[0] == "var":
            out.add(x[1])
        elif x[0] == "un":
            stack.append(x[2])
        elif x[0] == "bin":
            stack += [x[2], x[3]]
        elif x[0] == "ite":
            stack += [x[1], x[2], x[3]]
        elif x[0] == "call":
            stack += list(x[2])
    return frozenset(out)


def linear(e: Node) -> Optional[dict]:
    """``{name: coefficient, "": constant}`` when ``e`` is affine in its names, else None."""
    tag = e[0]
    if tag == "num":
        return {"": e[1]}
    if tag == "var":
        return {e[1]: 1, "": 0}
    if tag == "un" and e[1] == "-":
        a = linear(e[2])
        return None if a is None else {k: -v for k, v in a.items()}
    if tag == "bin" and e[1] in ("+", "-", "*"):
        a, b = linear(e[2]), linear(e[3])
        if a is None or b is None:
            return None
        if e[1] == "*":
            ca, cb = _lin_const(a), _lin_const(b)
            if ca is None and cb is None:
                return None
            k, other = (ca, b) if ca is not None else (cb, a)
            return {n: k * v for n, v in other.items()}
        sign = 1 if e[1] == "+" else -1
        out = dict(a)
        out.setdefault("", 0)
        for n, v in b.items():
            out[n] = out.get(n, 0) + sign * v
        return out
    return None


def _lin_const(f: dict) -> Optional[int]:
    return f.get("", 0) if all(v == 0 for n, v in f.items() if n) else None


def const(e: Node) -> Optional[int]:
    """The value of ``e`` when it is an integer constant (affine with no names)."""
    f = linear(e)
    return None if f is None else _lin_const(f)


def minus(a: Node, b: Node) -> Optional[int]:
    """``a - b`` when it is a constant (both affine), else None."""
    fa, fb = linear(a), linear(b)
    if fa is None or fb is None:
        return None
    diff = dict(fa)
    for n, v in fb.items():
        diff[n] = diff.get(n, 0) - v
    return _lin_const(diff)


def num(n: int) -> str:
    """An SMT-LIB2 integer literal."""
    return str(n) if n >= 0 else f"(- {-n})"


_SMT_BIN = {"&&": "and", "||": "or", "==": "=", "/": "div", "%": "mod", "+": "+", "-": "-", "*": "*",
            "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def smt(e: Node, env: Mapping[str, str]) -> str:
    """``e`` as an SMT-LIB2 term, each name replaced by ``env[name]`` (a term)."""
    tag = e[0]
    if tag == "num":
        return num(e[1])
    if tag == "bool":
        return "true" if e[1] else "false"
    if tag == "var":
        return env[e[1]]
    if tag == "un":
        return f"({'-' if e[1] == '-' else 'not'} {smt(e[2], env)})"
    if tag == "bin":
        a, b = smt(e[2], env), smt(e[3], env)
        if e[1] == "!=":
            return f"(not (= {a} {b}))"
        return f"({_SMT_BIN[e[1]]} {a} {b})"
    if tag == "ite":
        return f"(ite {smt(e[1], env)} {smt(e[2], env)} {smt(e[3], env)})"
    # let keeps nested min/max linear in size (the bound names never occur in env's terms)
    out = smt(e[2][0], env)
    for a in e[2][1:]:
        cmp = "<=" if e[1] == "min" else ">="
        out = f"(let ((mm.a {out}) (mm.b {smt(a, env)})) (ite ({cmp} mm.a mm.b) mm.a mm.b))"
    return out

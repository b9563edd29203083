"""MLIR affine maps (``#map = affine_map<(d0)[s0] -> ((d0 floordiv 4) mod 3)>``) as functions.

:func:`parse_maps` reads every single-result map alias of a module; each becomes a
function of its operands (dims, then symbols) over Python ints or Z3 terms.
``floordiv``, ``ceildiv`` and ``mod`` take a positive integer literal as right operand,
as MLIR's affine expressions require (a map with anything else, or nested more than
:data:`MAX_DEPTH` parentheses deep, is not read); ``mod`` is non-negative.
"""

from __future__ import annotations

import re
from typing import Callable

_MAP = re.compile(r"^\s*(#[\w$.-]+)\s*=\s*affine_map<\(([^)]*)\)(?:\[([^\]]*)\])?\s*->\s*\((.*)\)>\s*$", re.M)
_TOK = re.compile(r"\s*(floordiv|ceildiv|mod|-?\d+|[ds]\d+|[-+*()])")


def _tokens(text: str) -> list:
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOK.match(text, pos)
        if not m:
            raise ValueError(f"bad affine expression at {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos] == " ":
            pos += 1
    return out


def _floordiv(a, b):
    return a // b if isinstance(a, int) else a / b


def _ceildiv(a, b):
    return -((-a) // b) if isinstance(a, int) else -((-a) / b)


class _P:
    def __init__(self, toks: list, names: list) -> None:
        self.t, self.i, self.names = toks, 0, names

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self):
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expr(self):
        left = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            right = self.term()
            left = (lambda a, b: (lambda env: a(env) + b(env)))(left, right) if op == "+" else \
                (lambda a, b: (lambda env: a(env) - b(env)))(left, right)
        return left

    def term(self):
        left = self.unary()
        while self.peek() in ("*", "floordiv", "ceildiv", "mod"):
            op = self.take()
            if op != "*" and not (re.fullmatch(r"\d+", self.peek() or "") and int(self.peek()) > 0):
                raise ValueError(f"{op} takes a positive constant right operand")
            right = self.unary()
            fn = {"*": lambda a, b: a * b, "floordiv": _floordiv, "ceildiv": _ceildiv, "mod": lambda a, b: a % b}[op]
            left = (lambda f, a, b: (lambda env: f(a(env), b(env))))(fn, left, right)
        return left

    def unary(self):
        tok = self.peek()
        if tok == "-":
            self.take()
            inner = self.unary()
            return lambda env: -inner(env)
        if tok == "(":
            self.take()
            e = self.expr()
            if self.take() != ")":
                raise ValueError("expected )")
            return e
        tok = self.take()
        if re.fullmatch(r"-?\d+", tok):
            v = int(tok)
            return lambda env: v
        if tok in self.names:
            idx = self.names.index(tok)
            return lambda env: env[idx]
        raise ValueError(f"unknown name {tok!r} in an affine map")


MAX_DEPTH = 32
"""Parentheses nesting of one affine map's expression (deeper maps are not read: the parser recurses)."""


def _depth(body: str) -> int:
    depth = deepest = 0
    for ch in body:
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    return deepest


def parse_maps(text: str) -> dict:
    """``{"#map": f}`` for every single-result ``affine_map`` alias; ``f(operands)`` -> value."""
    out: dict[str, Callable] = {}
    for m in _MAP.finditer(text):
        dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
        syms = [s.strip() for s in (m.group(3) or "").split(",") if s.strip()]
        body = m.group(4)
        if "," in body or _depth(body) > MAX_DEPTH:
            continue
        try:
            e = _P(_tokens(body), dims + syms).expr()
        except (ValueError, IndexError):
            continue
        out[m.group(1)] = (lambda f: (lambda args: f(list(args))))(e)
    return out


__all__ = ["parse_maps"]

"""Integer/boolean expressions over the loop variable and trip-count symbols.

One small language serves predicates (``when: "k + 3 < T"``), symbolic trip
counts, guards and wait counts in programs (``"2 - i"``, ``"(i < 1) ? 1 : 0"``).

Grammar (C precedence, lowest first)::

    e := e ? e : e | e || e | e && e | !e | e (< <= > >= == !=) e
       | e (+ -) e | e (* / %) e | -e | int | name | min(e, e) | max(e, e) | (e)

``and``/``or``/``not`` are accepted for ``&&``/``||``/``!``. ``/`` and ``%``
are floor division and a non-negative modulo (Python's), as the divisor is
always a positive constant here. Values are immutable trees; every function is
pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping, Union

from .bounds import MAX_EXPR_DEPTH, MAX_EXPR_TOKENS, MAX_INT_DIGITS

Value = Union[int, bool]


class ExprError(ValueError):
    """A string that is not a valid expression; ``pos`` is the 0-based column."""

    def __init__(self, msg: str, pos: int = 0) -> None:
        super().__init__(msg)
        self.pos = pos


class _Printed:
    """Printing an expression gives its source form (``2 - i``, ``1``), as programs write it;
    ``repr`` keeps the dataclass form for debugging."""

    def __str__(self) -> str:
        return to_str(self)


@dataclass(frozen=True)
class Num(_Printed):
    value: int


@dataclass(frozen=True)
class Var(_Printed):
    name: str


@dataclass(frozen=True)
class Un(_Printed):
    op: str  # "-" or "!"
    arg: "Expr"


@dataclass(frozen=True)
class Bin(_Printed):
    op: str
    lhs: "Expr"
    rhs: "Expr"


@dataclass(frozen=True)
class Ite(_Printed):
    cond: "Expr"
    then: "Expr"
    other: "Expr"


@dataclass(frozen=True)
class Call(_Printed):
    fn: str  # "min" | "max"
    args: tuple["Expr", ...]


Expr = Union[Num, Var, Un, Bin, Ite, Call]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>&&|\|\||<=|>=|==|!=|//|[-+*/%<>!?:(),]))"
)
_BOOL_OPS = {"&&", "||", "<", "<=", ">", ">=", "==", "!="}
_PREC = {
    "||": 1, "&&": 2,
    "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
    "+": 5, "-": 5, "*": 6, "/": 6, "%": 6,
}
_WORDS = {"and": "&&", "or": "||", "not": "!"}


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            at = len(text) - len(text[pos:].lstrip())
            raise ExprError(f"unexpected character {text[at]!r}", at)
        kind = m.lastgroup or "op"
        val = m.group(kind)
        start = m.start(kind)
        if kind == "name" and val in _WORDS:
            kind, val = "op", _WORDS[val]
        if val == "//":
            val = "/"
        if kind == "num" and len(val) > MAX_INT_DIGITS:
            raise ExprError(f"number with {len(val)} digits is out of range (at most {MAX_INT_DIGITS})", start)
        out.append((kind, val, start))
        if len(out) > MAX_EXPR_TOKENS:
            raise ExprError(f"expression longer than {MAX_EXPR_TOKENS} tokens", start)
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def nest(self) -> None:
        """Enter one level of ``(``, unary operator or ``?:``; bounded so parsing never recurses deeply."""
        self.depth += 1
        if self.depth > MAX_EXPR_DEPTH:
            raise ExprError(f"expression nested more than {MAX_EXPR_DEPTH} deep", self.peek()[2])

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def take(self, val: str | None = None) -> tuple[str, str, int]:
        tok = self.toks[self.i]
        if val is not None and tok[1] != val:
            raise ExprError(f"expected {val!r}, found {tok[1] or 'end of expression'!r}", tok[2])
        self.i += 1
        return tok

    def expr(self) -> Expr:
        self.nest()
        cond = self.binary(1)
        if self.peek()[1] == "?":
            self.take("?")
            then = self.expr()
            self.take(":")
            other = self.expr()
            cond = Ite(cond, then, other)
        self.depth -= 1
        return cond

    def binary(self, min_prec: int) -> Expr:
        lhs = self.unary()
        while True:
            kind, op, _ = self.peek()
            prec = _PREC.get(op) if kind == "op" else None
            if prec is None or prec < min_prec:
                return lhs
            self.take()
            rhs = self.binary(prec + 1)
            lhs = Bin(op, lhs, rhs)

    def unary(self) -> Expr:
        kind, val, pos = self.peek()
        if val in ("-", "!"):
            self.take()
            self.nest()
            arg = self.unary()
            self.depth -= 1
            return Un(val, arg)
        if val == "(":
            self.take()
            inner = self.expr()
            self.take(")")
            return inner
        if kind == "num":
            self.take()
            return Num(int(val))
        if kind == "name":
            self.take()
            if val in ("true", "True"):
                return Bin("==", Num(0), Num(0))
            if val in ("false", "False"):
                return Bin("!=", Num(0), Num(0))
            if self.peek()[1] == "(":
                if val not in ("min", "max"):
                    raise ExprError(f"unknown function {val!r} (only min and max)", pos)
                self.take("(")
                args = [self.expr()]
                while self.peek()[1] == ",":
                    self.take(",")
                    args.append(self.expr())
                self.take(")")
                return Call(val, tuple(args))
            return Var(val)
        raise ExprError(f"unexpected {val or 'end of expression'!r}", pos)


def parse(text: str | int | bool) -> Expr:
    """Parse ``text`` (or wrap an int) into an expression; raises :class:`ExprError`."""
    if isinstance(text, bool):
        return Bin("==" if text else "!=", Num(0), Num(0))
    if isinstance(text, int):
        return Num(text)
    p = _Parser(str(text))
    e = p.expr()
    kind, val, pos = p.peek()
    if kind != "end":
        raise ExprError(f"unexpected {val!r}", pos)
    return e


def is_bool(e: Expr) -> bool:
    """True when ``e`` denotes a condition rather than an integer."""
    if isinstance(e, Bin):
        return e.op in _BOOL_OPS
    if isinstance(e, Un):
        return e.op == "!"
    if isinstance(e, Ite):
        return is_bool(e.then)
    return False


def check_expr(e: Expr) -> str | None:
    """Why ``e`` is not well formed, or None.

    Well formed: arithmetic (``+ - * / %``, unary ``-``, ``min``/``max``) on numbers,
    comparisons of two numbers (``==``/``!=`` also of two conditions), ``&& || !``
    on conditions, a condition before ``?`` and two branches of one kind; ``*``
    has a constant side and ``/``, ``%`` a positive constant divisor (so the
    expression stays affine and never divides by zero).
    """
    try:
        _kind(e)
    except ExprError as exc:
        return str(exc)
    return None


def _kind(e: Expr) -> str:
    """``"int"`` or ``"bool"``; raises :class:`ExprError` when ``e`` is not well formed."""
    if isinstance(e, Num):
        return "int"
    if isinstance(e, Var):
        return "int"
    if isinstance(e, Un):
        want = "bool" if e.op == "!" else "int"
        if _kind(e.arg) != want:
            raise ExprError(f"'{e.op}' needs a {'condition' if want == 'bool' else 'number'}: {to_str(e)}")
        return want
    if isinstance(e, Ite):
        if _kind(e.cond) != "bool":
            raise ExprError(f"the part before '?' must be a condition: {to_str(e.cond)}")
        a, b = _kind(e.then), _kind(e.other)
        if a != b:
            raise ExprError(f"the branches of '?:' mix a number and a condition: {to_str(e)}")
        return a
    if isinstance(e, Call):
        for a in e.args:
            if _kind(a) != "int":
                raise ExprError(f"{e.fn}() takes numbers, not the condition {to_str(a)}")
        return "int"
    a, b = _kind(e.lhs), _kind(e.rhs)
    if e.op in ("&&", "||"):
        if a != "bool" or b != "bool":
            raise ExprError(f"'{e.op}' joins conditions, not numbers: {to_str(e)}")
        return "bool"
    if e.op in ("==", "!="):
        if a != b:
            raise ExprError(f"'{e.op}' compares a number with a condition: {to_str(e)}")
        return "bool"
    if a != "int" or b != "int":
        what = "compares" if e.op in _BOOL_OPS else "applies to"
        raise ExprError(f"'{e.op}' {what} numbers, not conditions: {to_str(e)}")
    if e.op == "*" and free_vars(e.lhs) and free_vars(e.rhs):
        raise ExprError(f"product of two variables is not affine: {to_str(e)}")
    if e.op in ("/", "%"):
        if free_vars(e.rhs):
            raise ExprError(f"'{e.op}' needs a constant divisor: {to_str(e)}")
        d = evaluate(e.rhs, {})
        if not isinstance(d, bool) and d <= 0:
            raise ExprError(f"'{e.op}' needs a positive divisor: {to_str(e)}")
    return "bool" if e.op in _BOOL_OPS else "int"


def free_vars(e: Expr) -> frozenset[str]:
    """Names that occur in ``e``."""
    if isinstance(e, Var):
        return frozenset([e.name])
    if isinstance(e, Num):
        return frozenset()
    if isinstance(e, Un):
        return free_vars(e.arg)
    if isinstance(e, Bin):
        return free_vars(e.lhs) | free_vars(e.rhs)
    if isinstance(e, Ite):
        return free_vars(e.cond) | free_vars(e.then) | free_vars(e.other)
    return frozenset().union(*(free_vars(a) for a in e.args))


def evaluate(e: Expr, env: Mapping[str, int]) -> Value:
    """Value of ``e`` with every free name bound in ``env`` (KeyError otherwise)."""
    if isinstance(e, Num):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Un):
        v = evaluate(e.arg, env)
        return (not v) if e.op == "!" else -int(v)
    if isinstance(e, Ite):
        return evaluate(e.then, env) if evaluate(e.cond, env) else evaluate(e.other, env)
    if isinstance(e, Call):
        vals = [int(evaluate(a, env)) for a in e.args]
        return min(vals) if e.fn == "min" else max(vals)
    a, b = evaluate(e.lhs, env), evaluate(e.rhs, env)
    return apply_binary(e.op, a, b)


BIN_EVAL: dict[str, Callable[[Value, Value], Value]] = {
    "+": lambda a, b: int(a) + int(b),
    "-": lambda a, b: int(a) - int(b),
    "*": lambda a, b: int(a) * int(b),
    "/": lambda a, b: int(a) // int(b),
    "%": lambda a, b: int(a) % int(b),
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "&&": lambda a, b: bool(a) and bool(b),
    "||": lambda a, b: bool(a) or bool(b),
}
"""The value of each binary operator on two values (``/`` and ``%`` floor, as in the expression language)."""


def apply_binary(op: str, a: Value, b: Value) -> Value:
    """``a op b`` for a binary operator of the expression language (KeyError for another)."""
    return BIN_EVAL[op](a, b)


def substitute(e: Expr, binding: Mapping[str, Expr]) -> Expr:
    """Replace free names by expressions (simultaneously), then fold constants."""
    if isinstance(e, Var):
        return binding.get(e.name, e)
    if isinstance(e, Num):
        return e
    if isinstance(e, Un):
        return simplify(Un(e.op, substitute(e.arg, binding)))
    if isinstance(e, Bin):
        return simplify(Bin(e.op, substitute(e.lhs, binding), substitute(e.rhs, binding)))
    if isinstance(e, Ite):
        return simplify(Ite(substitute(e.cond, binding), substitute(e.then, binding),
                            substitute(e.other, binding)))
    return simplify(Call(e.fn, tuple(substitute(a, binding) for a in e.args)))


def affine(coeffs: Mapping[str, int], const: int = 0) -> Expr:
    """Build ``sum(c * name) + const`` in a readable canonical form (``i + 3``, ``2 - i``)."""
    terms = [(n, c) for n, c in sorted(coeffs.items()) if c != 0]
    out: Expr | None = None
    for name, c in terms:
        mag = Var(name) if abs(c) == 1 else Bin("*", Num(abs(c)), Var(name))
        if out is None:
            out = mag if c > 0 else None
            if c < 0:
                out = Un("-", mag)
        else:
            out = Bin("+" if c > 0 else "-", out, mag)
    if out is None:
        return Num(const)
    if const > 0:
        return Bin("+", out, Num(const))
    if const < 0:
        return Bin("-", out, Num(-const))
    return out


def as_affine(e: Expr) -> tuple[dict[str, int], int] | None:
    """``(coeffs, const)`` when ``e`` is affine in its names, else None."""
    if isinstance(e, Num):
        return {}, e.value
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, Un) and e.op == "-":
        inner = as_affine(e.arg)
        if inner is None:
            return None
        return {k: -v for k, v in inner[0].items()}, -inner[1]
    if isinstance(e, Bin) and e.op in ("+", "-", "*"):
        a, b = as_affine(e.lhs), as_affine(e.rhs)
        if a is None or b is None:
            return None
        if e.op == "*":
            if not a[0]:
                a, b = b, a
            if b[0]:
                return None
            return {k: v * b[1] for k, v in a[0].items()}, a[1] * b[1]
        sign = 1 if e.op == "+" else -1
        coeffs = dict(a[0])
        for k, v in b[0].items():
            coeffs[k] = coeffs.get(k, 0) + sign * v
        return {k: v for k, v in coeffs.items() if v}, a[1] + sign * b[1]
    return None


def simplify(e: Expr) -> Expr:
    """Fold constants and normalise affine integer sub-expressions; never changes the value."""
    if isinstance(e, (Num, Var)):
        return e
    if not free_vars(e):
        v = evaluate(e, {})
        return parse(bool(v)) if isinstance(v, bool) else Num(int(v))
    if not is_bool(e):
        aff = as_affine(e)
        if aff is not None:
            return affine(*aff)
    if isinstance(e, Ite):
        c = simplify(e.cond)
        if not free_vars(c):
            return simplify(e.then) if evaluate(c, {}) else simplify(e.other)
        t, o = simplify(e.then), simplify(e.other)
        return t if t == o else Ite(c, t, o)
    if isinstance(e, Bin):
        return Bin(e.op, simplify(e.lhs), simplify(e.rhs))
    if isinstance(e, Un):
        return Un(e.op, simplify(e.arg))
    return Call(e.fn, tuple(simplify(a) for a in e.args))


def to_str(e: Expr) -> str:
    """Print ``e`` in the grammar above (C style), parenthesised only where needed."""
    return _fmt(e, 0)


def _fmt(e: Expr, outer: int) -> str:
    if isinstance(e, Num):
        return str(e.value) if e.value >= 0 or outer == 0 else f"({e.value})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Un):
        s = e.op + _fmt(e.arg, 7)
        return s if outer < 7 else f"({s})"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(_fmt(a, 0) for a in e.args)})"
    if isinstance(e, Ite):
        s = f"({_fmt(e.cond, 0)}) ? {_fmt(e.then, 1)} : {_fmt(e.other, 0)}"
        return s if outer == 0 else f"({s})"
    if e.op == "==" and e.lhs == Num(0) and e.rhs == Num(0):
        return "true"
    if e.op == "!=" and e.lhs == Num(0) and e.rhs == Num(0):
        return "false"
    prec = _PREC[e.op]
    s = f"{_fmt(e.lhs, prec)} {e.op} {_fmt(e.rhs, prec + 1)}"
    return s if prec >= outer else f"({s})"


def to_z3(e: Expr, env: Mapping[str, object]):
    """Translate to a Z3 term; ``env`` maps each free name to a Z3 Int (or int)."""
    # z3: only to build solver terms; the light runtime (synth.kernel) imports this module
    import z3

    def go(x: Expr):
        if isinstance(x, Num):
            return z3.IntVal(x.value)
        if isinstance(x, Var):
            v = env[x.name]
            return z3.IntVal(v) if isinstance(v, int) else v
        if isinstance(x, Un):
            a = go(x.arg)
            return z3.Not(a) if x.op == "!" else -a
        if isinstance(x, Ite):
            return z3.If(go(x.cond), go(x.then), go(x.other))
        if isinstance(x, Call):
            args = [go(a) for a in x.args]
            acc = args[0]
            for a in args[1:]:
                acc = z3.If(a < acc, a, acc) if x.fn == "min" else z3.If(a > acc, a, acc)
            return acc
        a, b = go(x.lhs), go(x.rhs)
        ops = {
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: a / b, "%": lambda: a % b,
            "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
            ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b,
            "&&": lambda: z3.And(a, b), "||": lambda: z3.Or(a, b),
        }
        return ops[x.op]()

    return go(e)

"""Scalar integer semantics of MLIR's ``arith`` ops, over Python ints or Z3 terms.

:func:`eval_op` gives the value of one scalar op from its operands' values, or
None when the op is not a scalar integer op this module knows (tensor ops,
loads, calls): a value that depends on such an op is unknown, and an importer
that needs it (a slot index) reports it as outside the model. Division and
remainder follow the ops' definitions (``divsi`` truncates, ``floordivsi`` floors).
"""

from __future__ import annotations

import re

import z3

from .mlirtext import Op, int_type


def is_sym(x) -> bool:
    return isinstance(x, (z3.ExprRef,))


def _ite(c, a, b):
    if is_sym(c) or is_sym(a) or is_sym(b):
        return z3.If(_b(c), _i(a), _i(b))
    return a if c else b


def _i(x):
    if is_sym(x):
        return z3.If(x, z3.IntVal(1), z3.IntVal(0)) if z3.is_bool(x) else x
    return int(x)


def _b(x):
    if is_sym(x):
        return x if z3.is_bool(x) else x != 0
    return bool(x)


def _tdiv(a, b):
    if is_sym(a) or is_sym(b):
        a, b = _i(a), _i(b)
        q = z3.If(a >= 0, a / b, -((-a) / b))
        return z3.If(b > 0, q, -(z3.If(a >= 0, a / (-b), -((-a) / (-b)))))
    if b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _fdiv(a, b):
    if is_sym(a) or is_sym(b):
        a, b = _i(a), _i(b)
        return z3.If(b > 0, a / b, -(a / -b)) if not isinstance(b, int) else (a / b if b > 0 else -(a / -b))
    return None if b == 0 else a // b


def _cmp(pred: str, a, b):
    a, b = _i(a), _i(b)
    return {"eq": lambda: a == b, "ne": lambda: a != b, "slt": lambda: a < b, "sle": lambda: a <= b,
            "sgt": lambda: a > b, "sge": lambda: a >= b, "ult": lambda: a < b, "ule": lambda: a <= b,
            "ugt": lambda: a > b, "uge": lambda: a >= b}[pred]()


_CONST = re.compile(r"^\s*(-?\d+|true|false)\b")


def constant(op: Op):
    """Value of ``arith.constant`` when scalar, else None."""
    m = _CONST.match(op.rest())
    if not m or not int_type(op):
        return None
    v = m.group(1)
    if v not in ("true", "false") and len(v.lstrip("-")) > 40:
        return None  # wider than any MLIR integer type (i64 has 20 digits): unknown, never converted
    return True if v == "true" else False if v == "false" else int(v)


def eval_op(op: Op, args: list):
    """Value of a scalar arith op given its operands' values (None: unknown)."""
    n = op.name
    if n == "arith.constant":
        return constant(op)
    if not int_type(op) or any(a is None for a in args):
        return None
    try:
        if n in ("arith.addi",):
            return _i(args[0]) + _i(args[1])
        if n == "arith.subi":
            return _i(args[0]) - _i(args[1])
        if n == "arith.muli":
            return _i(args[0]) * _i(args[1])
        if n in ("arith.divsi", "arith.divui"):
            return _tdiv(_i(args[0]), _i(args[1]))
        if n == "arith.floordivsi":
            return _fdiv(_i(args[0]), _i(args[1]))
        if n == "arith.ceildivsi":
            q = _fdiv(-_i(args[0]), _i(args[1]))
            return None if q is None else -q
        if n in ("arith.remsi", "arith.remui"):
            q = _tdiv(_i(args[0]), _i(args[1]))
            return None if q is None else _i(args[0]) - _i(args[1]) * q
        if n in ("arith.maxsi", "arith.maxui"):
            return _ite(_i(args[0]) >= _i(args[1]), args[0], args[1])
        if n in ("arith.minsi", "arith.minui"):
            return _ite(_i(args[0]) <= _i(args[1]), args[0], args[1])
        if n == "arith.cmpi":
            pred = op.rest().strip().split(",")[0].strip()
            return _cmp(pred, args[0], args[1])
        if n == "arith.select":
            c, a, b = args
            if is_sym(c) or is_sym(a) or is_sym(b):
                if (is_sym(a) and z3.is_bool(a)) or isinstance(a, bool):
                    return z3.If(_b(c), _b(a), _b(b))
                return z3.If(_b(c), _i(a), _i(b))
            return a if c else b
        if n in ("arith.andi", "arith.ori", "arith.xori"):
            a, b = args
            if (is_sym(a) and z3.is_bool(a)) or isinstance(a, bool):
                if is_sym(a) or is_sym(b):
                    return {"arith.andi": z3.And, "arith.ori": z3.Or, "arith.xori": z3.Xor}[n](_b(a), _b(b))
                return {"arith.andi": a and b, "arith.ori": a or b, "arith.xori": a != b}[n]
            return None
        if n in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"):
            a = args[0]
            if n == "arith.extui" and ((is_sym(a) and z3.is_bool(a)) or isinstance(a, bool)):
                return _i(a)
            return a
    except (IndexError, KeyError, TypeError):
        return None
    return None


def is_arith(op: Op) -> bool:
    return op.name.startswith("arith.")


__all__ = ["eval_op", "constant", "is_sym", "is_arith"]

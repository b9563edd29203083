"""Expressions (``synth.expr``): printing and parsing agree, and every evaluator agrees.

Properties over generated well-formed expressions: ``parse(to_str(e)) == e``;
``evaluate`` matches Python's own arithmetic; ``simplify``, ``substitute`` and
``as_affine`` keep the value; ``to_z3`` agrees with ``evaluate``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synth.expr import (Bin, Call, ExprError, Ite, Num, Un, Var, affine, as_affine, check_expr, evaluate,
                        free_vars, is_bool, parse, simplify, substitute, to_str, to_z3)

NAMES = ("k", "T", "i")
CMP = ("<", "<=", ">", ">=", "==", "!=")

# --- generated expressions -----------------------------------------------------------------

_leaf = st.one_of(st.builds(Num, st.integers(0, 40)), st.builds(Var, st.sampled_from(NAMES)))


def _conds(ints: st.SearchStrategy) -> st.SearchStrategy:
    cmp = st.builds(Bin, st.sampled_from(CMP), ints, ints)
    return st.one_of(
        cmp,
        st.builds(Bin, st.sampled_from(("&&", "||")), cmp, cmp),
        st.builds(lambda c: Un("!", c), cmp),
    )


def _extend(ints: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda a: Un("-", a), ints),
        st.builds(Bin, st.sampled_from(("+", "-")), ints, ints),
        st.builds(lambda a, c: Bin("*", a, Num(c)), ints, st.integers(0, 5)),
        st.builds(lambda c, a: Bin("*", Num(c), a), st.integers(0, 5), ints),
        st.builds(lambda op, a, c: Bin(op, a, Num(c)), st.sampled_from(("/", "%")), ints, st.integers(1, 6)),
        st.builds(lambda fn, a, b: Call(fn, (a, b)), st.sampled_from(("min", "max")), ints, ints),
        st.builds(Ite, _conds(ints), ints, ints),
    )


INTS = st.recursive(_leaf, _extend, max_leaves=10)
BOOLS = st.recursive(_conds(INTS), lambda c: st.one_of(
    st.builds(Bin, st.sampled_from(("&&", "||")), c, c),
    st.builds(lambda x: Un("!", x), c),
    st.builds(Ite, c, c, c),
), max_leaves=4)
EXPRS = st.one_of(INTS, BOOLS)
ENVS = st.fixed_dictionaries({n: st.integers(-50, 200) for n in NAMES})


def py(e) -> str:
    """An independent translation to Python source (floor division and modulo, as documented)."""
    if isinstance(e, Num):
        return f"({e.value})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Un):
        return f"(not {py(e.arg)})" if e.op == "!" else f"(-{py(e.arg)})"
    if isinstance(e, Ite):
        return f"({py(e.then)} if {py(e.cond)} else {py(e.other)})"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(py(a) for a in e.args)})"
    op = {"&&": "and", "||": "or", "/": "//"}.get(e.op, e.op)
    return f"({py(e.lhs)} {op} {py(e.rhs)})"


# --- properties ----------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(EXPRS)
def test_print_parse_round_trip(e):
    text = to_str(e)
    assert parse(text) == e, text
    assert to_str(parse(text)) == text
    assert check_expr(e) is None, text  # the generator only builds well-formed expressions
    assert free_vars(e) <= set(NAMES)


@settings(max_examples=150, deadline=None)
@given(EXPRS, ENVS)
def test_evaluators_agree(e, env):
    """``evaluate`` = Python's own arithmetic = ``evaluate . simplify`` = Z3 on constants."""
    import z3

    want = eval(py(e), {"min": min, "max": max}, dict(env))  # noqa: S307 - our own generated source
    got = evaluate(e, env)
    assert got == want and isinstance(got, bool) == is_bool(e), to_str(e)
    s = simplify(e)
    assert evaluate(s, env) == want, f"{to_str(e)}  ~>  {to_str(s)}"
    assert free_vars(s) <= free_vars(e)
    term = z3.simplify(to_z3(e, {n: z3.IntVal(v) for n, v in env.items()}))
    if isinstance(want, bool):
        assert z3.is_true(term) if want else z3.is_false(term), to_str(e)
    else:
        assert term.as_long() == want, to_str(e)


@settings(max_examples=60, deadline=None)
@given(EXPRS, ENVS, INTS)
def test_substitute_is_evaluation_in_an_extended_env(e, env, repl):
    v = evaluate(repl, env)
    assert evaluate(substitute(e, {"k": repl}), env) == evaluate(e, {**env, "k": v})


@settings(max_examples=100, deadline=None)
@given(INTS, ENVS)
def test_affine_form_preserves_value(e, env):
    aff = as_affine(e)
    if aff is not None:
        coeffs, const = aff
        assert evaluate(affine(coeffs, const), env) == evaluate(e, env)
        assert sum(c * env[n] for n, c in coeffs.items()) + const == evaluate(e, env)


@settings(max_examples=50, deadline=None)
@given(EXPRS)
def test_to_z3_with_symbols_proves_simplify_equivalent(e):
    import z3

    env = {n: z3.Int(n) for n in NAMES}
    s = z3.Solver()
    s.add(to_z3(e, env) != to_z3(simplify(e), env))
    assert s.check() == z3.unsat, to_str(e)


# --- examples ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fn", [
    ("k + 3 < T", lambda k, T: k + 3 < T),
    ("k >= 1", lambda k, T: k >= 1),
    ("(i < 1) ? 1 : 0".replace("i", "k"), lambda k, T: 1 if k < 1 else 0),
    ("2 - k", lambda k, T: 2 - k),
    ("(k + 3) % 4", lambda k, T: (k + 3) % 4),
    ("k / 2 - T // 3", lambda k, T: k // 2 - T // 3),
    ("min(k, T - 1) * 2", lambda k, T: min(k, T - 1) * 2),
    ("max(0, 2 - k)", lambda k, T: max(0, 2 - k)),
    ("k < 2 and not k == 0 or T > 9", lambda k, T: (k < 2 and not k == 0) or T > 9),
    ("!(k < 1) && k + 1 != T", lambda k, T: (not k < 1) and k + 1 != T),
    ("-k + -(-3)", lambda k, T: -k + 3),
    ("true || k < 0", lambda k, T: True),
    ("false", lambda k, T: False),
    ("k < 1 ? 5 : k < 3 ? 6 : 7", lambda k, T: 5 if k < 1 else (6 if k < 3 else 7)),
])
def test_examples_evaluate_like_python(text, fn):
    e = parse(text)
    for k in range(-3, 8):
        for T in (0, 4, 10):
            assert evaluate(e, {"k": k, "T": T}) == fn(k, T), (text, k, T)


def test_precedence_prints_minimal_parentheses():
    assert to_str(parse("(k + 1) * 2")) == "(k + 1) * 2"
    assert to_str(parse("k + (1 * 2)")) == "k + 1 * 2"
    assert to_str(parse("k - (T - 1)")) == "k - (T - 1)"
    assert to_str(parse("(k - T) - 1")) == "k - T - 1"
    assert to_str(parse("(i < 1) ? 1 : 0")) == "(i < 1) ? 1 : 0"
    assert to_str(parse("!(k < 1)")) == "!(k < 1)"


def test_simplify_readable_forms():
    assert to_str(simplify(parse("(k + 3) - 1"))) == "k + 2"
    assert to_str(simplify(parse("0 - k + 2"))) == "-k + 2"
    assert to_str(simplify(parse("2 * k - k"))) == "k"
    assert simplify(parse("3 < 4")) == parse("true")
    assert simplify(parse("(1 < 2) ? k : T")) == Var("k")
    assert to_str(substitute(parse("(i + 3) % 4"), {"i": parse("i + 1")})) == "(i + 4) % 4"


def test_affine_builder():
    assert to_str(affine({"i": 1}, 3)) == "i + 3"
    assert to_str(affine({"i": -1}, 2)) == "-i + 2"
    assert to_str(affine({"i": 2, "T": -1}, 0)) == "-T + 2 * i"
    assert affine({}, -4) == Num(-4)
    assert as_affine(parse("k * k")) is None
    assert as_affine(parse("3 * (k - 1)")) == ({"k": 3}, -3)


@pytest.mark.parametrize("text, pos, words", [
    ("k + < T", 4, "unexpected '<'"),
    ("k < $T", 4, "unexpected character '$'"),
    ("   @", 3, "unexpected character '@'"),
    ("(k + 1", 6, "expected ')'"),
    ("foo(k) < 1", 0, "unknown function 'foo'"),
    ("k < 1 )", 6, "unexpected ')'"),
    ("", 0, "end of expression"),
    ("k ? 1", 5, "expected ':'"),
])
def test_parse_errors_carry_positions(text, pos, words):
    with pytest.raises(ExprError) as info:
        parse(text)
    assert info.value.pos == pos and words in str(info.value)


@pytest.mark.parametrize("text, words", [
    ("k < 1 < 2", "compares numbers"),
    ("k * T", "not affine"),
    ("k / 0", "positive divisor"),
    ("k % T", "constant divisor"),
    ("!k", "needs a condition"),
    ("-(k < 1)", "needs a number"),
    ("k < 1 && 3", "joins conditions"),
    ("(k < 1) == 2", "compares a number with a condition"),
    ("k ? 1 : 2", "must be a condition"),
    ("(k < 1) ? 1 : k < 2", "mix a number and a condition"),
    ("max(k, k < 1)", "takes numbers"),
])
def test_check_expr_rejects(text, words):
    msg = check_expr(parse(text))
    assert msg is not None and words in msg, msg


def test_parse_accepts_python_values():
    assert parse(7) == Num(7)
    assert evaluate(parse(True), {}) is True and evaluate(parse(False), {}) is False

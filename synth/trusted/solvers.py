"""Asking Z3 and cvc5 about one SMT-LIB2 text (each through its own SMT-LIB2 parser).

Part of the trusted base: imports nothing from synth.
"""

from __future__ import annotations

from typing import Optional


def versions() -> dict:
    """``{"z3": version or None, "cvc5": version or None}`` (None: not installed)."""
    out: dict = {}
    try:
        # the solvers load when a query is asked (either may be absent: the answer says so)
        import z3
        out["z3"] = z3.get_version_string()
    except ImportError:
        out["z3"] = None
    try:
        # the solvers load when a query is asked (either may be absent: the answer says so)
        import cvc5
        out["cvc5"] = getattr(cvc5, "__version__", "unknown")
    except ImportError:
        out["cvc5"] = None
    return out


def missing() -> list[str]:
    """What is not installed, as the pip requirement that fixes it."""
    v = versions()
    return [f"{name} (pip install {pkg})" for name, pkg in (("z3", "z3-solver"), ("cvc5", "cvc5"))
            if v[name] is None]


def z3_answer(text: str, timeout_s: float = 60.0) -> str:
    """``unsat`` / ``sat`` / ``unknown`` / ``error: ...`` of Z3 on ``text``; never raises: an exception of
    Z3 (a parse error, an internal assertion) is an ``error:`` answer, which proves nothing."""
    try:
        # the solvers load when a query is asked (either may be absent: the answer says so)
        import z3
    except ImportError:
        return "error: z3 is not installed (pip install z3-solver)"
    try:
        s = z3.Solver()
        s.set("timeout", max(1, int(timeout_s * 1000)))
        s.from_string(text)
        return str(s.check())
    except Exception as e:  # z3.Z3Exception, and whatever an internal error of Z3 raises
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"error: {first[:200]}"


def cvc5_answer(text: str, timeout_s: float = 60.0) -> str:
    """The answer of cvc5 (its own SMT-LIB2 parser) to the last ``(check-sat)`` of ``text``."""
    try:
        # the solvers load when a query is asked (either may be absent: the answer says so)
        import cvc5
    except ImportError:
        return "error: cvc5 is not installed (pip install cvc5)"
    try:
        tm = cvc5.TermManager()
        s = cvc5.Solver(tm)
        s.setOption("tlimit-per", str(max(1, int(timeout_s * 1000))))
        p = cvc5.InputParser(s)
        p.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "certificate.smt2")
        sm = p.getSymbolManager()
        answers = []
        while True:
            cmd = p.nextCommand()
            if cmd.isNull():
                break
            out = cmd.invoke(s, sm)
            if out and out.strip():
                answers.append(out.strip())
        return answers[-1] if answers else "error: no (check-sat) in the file"
    except Exception as e:  # cvc5 raises RuntimeError on parse errors
        first: Optional[str] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"error: {first}"

"""Verdicts of a program by the trusted checker alone (no certificate): one Z3 call per obligation.

:func:`verdicts` is what the tests compare with synth's prover; :func:`form`
checks just the well-formedness and coverage obligations, with the trip count
and step of a counterexample (``synth verify`` refuses such a program).

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .obligations import Obligation, derive
from .program import Program


@dataclass(frozen=True)
class Verdict:
    obligation: Obligation
    answer: str
    """Z3's answer to the negated obligation: ``unsat`` proves it."""
    trip_count: Optional[int] = None
    step: Optional[int] = None
    """For ``sat``: a counterexample's ``T`` and anchor step ``j``."""


def _solve(ob: Obligation, timeout_s: float) -> Verdict:
    # the solver loads when a query is asked, not when the checker is imported
    import z3

    s = z3.Solver()
    s.set("timeout", max(1, int(timeout_s * 1000)))
    s.from_string(ob.smt2)
    r = s.check()
    if r != z3.sat:
        return Verdict(ob, str(r))
    m = s.model()
    vals = {d.name(): m[d] for d in m.decls() if d.name() in ("T", "j")}
    get = (lambda k: vals[k].as_long() if k in vals else None)
    return Verdict(ob, "sat", get("T"), get("j"))


def verdicts(program: Program, timeout_s: float = 60.0) -> list[Verdict]:
    """Every obligation of ``program`` with Z3's answer."""
    return [_solve(ob, timeout_s) for ob in derive(program)]


def waits(program: Program, timeout_s: float = 60.0) -> tuple[dict, list]:
    """``({wait: "proven" | "refuted" | "unknown"}, [global obligations not proven])``."""
    out = {w.index: "proven" for w in program.waits}
    glob = []
    for v in verdicts(program, timeout_s):
        w = v.obligation.wait
        if v.answer == "unsat":
            continue
        if w is None:
            glob.append(v.obligation.id)
        elif v.answer == "sat":
            out[w] = "refuted"
        elif out[w] == "proven":
            out[w] = "unknown"
    return out, glob


def form(program: Program, timeout_s: float = 60.0) -> list[Verdict]:
    """The well-formedness and coverage obligations that are not proven (empty: the program is well formed)."""
    obs = [ob for ob in derive(program) if ob.kind in ("wellformed", "coverage")]
    return [v for v in (_solve(ob, timeout_s) for ob in obs) if v.answer != "unsat"]

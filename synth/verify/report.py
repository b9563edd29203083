"""What :func:`synth.verify.verify_program` returns: verdicts per wait and per obligation.

Plain data (frozen dataclasses) and a plain-text :meth:`Report.render`; no
solver, no ``rich``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..expr import to_str
from ..program import Program

STATUSES = ("proven", "refuted", "unknown")


@dataclass(frozen=True)
class Counterexample:
    """One execution that breaks an obligation, as a person reads it."""

    kind: str
    """raw | war | waw | count-nonnegative | wellformed"""
    trip_count: int
    step: int
    """Global step of the failing statement (-1 when not known)."""
    part: str
    i: int
    """The part's loop index at that step."""
    summary: str
    trace: tuple[str, ...] = ()
    """Statements from the producer's (or earlier reader's) step to the failing one."""
    predicates: tuple[tuple[str, int, bool], ...] = ()
    """Opaque predicate values of this execution: ``(op, iteration, value)`` (others: true)."""

    def __str__(self) -> str:
        return self.render("")

    def render(self, indent: str = "  ") -> str:
        lines = [f"{indent}{self.summary}"]
        preds = [f"{op}@{it}={'true' if v else 'false'}" for op, it, v in self.predicates]
        if preds:
            lines.append(f"{indent}opaque predicates: {', '.join(preds)} (all others true)")
        lines += [f"{indent}{t}" for t in self.trace]
        return "\n".join(lines)


@dataclass(frozen=True)
class ObligationResult:
    id: str
    kind: str
    wait: Optional[int]
    """The wait it is charged to (None: global)."""
    queue: Optional[int]
    part: str
    description: str
    status: str
    seconds: float
    smt2: str = field(default="", repr=False, compare=False)
    """The negated obligation in SMT-LIB2 (the certificate file's content)."""
    counterexample: Optional[Counterexample] = None
    reason: str = ""
    """Why it is unknown, or what the counterexample shows, in one line."""
    waits_used: tuple[int, ...] = ()
    """Waits whose statements the formula mentions."""


@dataclass(frozen=True)
class WaitVerdict:
    index: int
    status: str
    """proven | refuted | unknown"""
    seconds: float
    counterexample: Optional[Counterexample] = None
    tight: Optional[bool] = None
    """``n + 1`` would be incorrect (None when not proven or not checked)."""
    reason: str = ""


@dataclass(frozen=True)
class Report:
    ok: bool
    verdicts: tuple[WaitVerdict, ...]
    obligations: tuple[ObligationResult, ...]
    global_failures: tuple[ObligationResult, ...]
    """Refuted or unknown obligations charged to no wait (a race no wait can fix, a missing wait)."""
    program: Program
    """The input with each wait's ``tight`` and ``reason`` filled in."""
    seconds: float = 0.0
    solver: str = ""
    """``z3 <version>``."""

    def failures(self) -> tuple[ObligationResult, ...]:
        return tuple(o for o in self.obligations if o.status != "proven")

    def render(self) -> str:
        p = self.program
        n_ok = sum(1 for o in self.obligations if o.status == "proven")
        head = (f"{p.name}: {'all waits proven' if self.ok else 'NOT PROVEN'} "
                f"({n_ok}/{len(self.obligations)} obligations sent to Z3, the rest settled by the program's "
                f"structure; {self.seconds:.2f} s, {self.solver})")
        lines = [head]
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        lines.append(f"trip count: {trip}")
        for v in self.verdicts:
            w = p.waits[v.index]
            tight = "" if v.tight is None else (", tight" if v.tight else ", not tight")
            lines.append(f"wait #{v.index} {w.part}: async_wait_queue({w.queue}, {to_str(w.in_flight)}) before "
                         f"{w.before}: {v.status}{tight} ({v.seconds:.2f} s)")
            if v.tight is False and v.reason:
                lines.append(f"  {v.reason}")
            if v.status != "proven":
                for o in self.obligations:
                    if o.wait == v.index and o.status != "proven":
                        lines.append(f"  {o.status}: {o.description}")
                        lines += _detail(o)
        if self.global_failures:
            lines.append("not charged to any wait:")
            for o in self.global_failures:
                lines.append(f"  {o.status}: {o.description}")
                lines += _detail(o)
        return "\n".join(lines)


def _detail(o: ObligationResult) -> list[str]:
    if o.counterexample is not None:
        return [o.counterexample.render("    ")]
    return [f"    {o.reason}"] if o.reason else []


__all__ = ["Report", "WaitVerdict", "ObligationResult", "Counterexample", "STATUSES"]

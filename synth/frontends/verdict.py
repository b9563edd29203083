"""The verdict on one imported loop: :func:`check_loop` maps a :class:`~synth.frontends.loop.Loop` to a program and
proves its waits (a :class:`CheckResult`); :func:`zero_trip_program` quantifies an imported Hopper program over every
trip count from 0. The importers (Triton, TVM, MLIR, TileLang) and :mod:`synth.frontends.check`, which picks the
importer, all use these; none of them is imported here."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from ..errors import Loc, SynthError
from ..expr import Num, evaluate, to_str
from ..printer import program_text
from ..program import Program
from ..verify import Report, verify_program
from .loop import Loop, SourceMap, to_program


@dataclass(frozen=True)
class CheckResult:
    loop: Loop
    program: Program
    source: SourceMap
    report: Report

    @property
    def ok(self) -> bool:
        return self.report.ok

    def counts(self) -> dict:
        """Waits proven / refuted / unknown."""
        out = {"proven": 0, "refuted": 0, "unknown": 0}
        for v in self.report.verdicts:
            out[v.status] += 1
        return out

    def render(self, verbose: bool = False) -> str:
        """Per wait: its source line, verdict, tightness and (refuted) the counterexample."""
        lp, p, rep = self.loop, self.report.program, self.report
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        c = self.counts()
        fn = f" of function {lp.name}" if lp.source == "tvm" else ""
        lines = [f"{lp.path}: {lp.source} loop at line {lp.body_line}{fn}, trip count {trip}: "
                 f"{len(p.waits)} waits, {c['proven']} proven, {c['refuted']} refuted, {c['unknown']} unknown"
                 + ("" if rep.ok else " -- NOT PROVEN")]
        # "subsumed by wait #k": this wait may go while #k stays. Read alone, two such verdicts (#k redundant,
        # this one subsumed by #k) say both could go; only one may.
        subsumed = {v.index: int(m.group(1)) for v in rep.verdicts if v.tight is False
                    for m in [re.search(r"subsumed by wait #(\d+)", v.reason or "")] if m}
        for v in rep.verdicts:
            w = p.waits[v.index]
            line, text = self.source.waits[v.index]
            tight = "" if v.tight is None else (", tight" if v.tight else ", not tight")
            lines.append(f"  wait #{v.index} line {line} ({w.part}) {text}: keeps <= {to_str(w.in_flight)} groups "
                         f"in flight before {w.before}: {v.status}{tight}")
            if v.tight is False and v.reason:
                lines.append(f"    {v.reason}")
                if v.index in subsumed:
                    lines.append(f"    may be removed while wait #{subsumed[v.index]} stays")
                for j in sorted(j for j, k in subsumed.items() if k == v.index):
                    lines.append(f"    wait #{j} is subsumed by this one: remove one of the two, not both")
            if v.status != "proven":
                for o in rep.obligations:
                    if o.wait == v.index and o.status != "proven":
                        lines.append(f"    {o.status}: {o.description}")
                        if o.counterexample is not None:
                            lines.append(o.counterexample.render("      "))
                            lines += self._source_of(o.counterexample, "      ")
                        elif o.reason:
                            lines.append(f"      {o.reason}")
        if rep.global_failures:
            lines.append("  not charged to any wait (a race no wait guards):")
            for o in rep.global_failures:
                lines.append(f"    {o.status}: {o.description}")
                if o.counterexample is not None:
                    lines.append(o.counterexample.render("      "))
                    lines += self._source_of(o.counterexample, "      ")
        lines.append("  ops (synth name <- source lines):")
        for name, where in self.source.ops.items():
            locs = ", ".join(f"{part} line {ln}" for part, ln, _ in where)
            lines.append(f"    {name} ({'async ' if p.op(name).is_async else ''}stage {p.op(name).stage}): "
                         f"{where[0][2]}  [{locs}]")
        if verbose:
            lines.append("  mapped program:")
            lines += ["    " + x for x in program_text(p).splitlines()]
        return "\n".join(lines)

    def _source_of(self, cex, indent: str) -> list:
        """The source line of each statement the trace marks (``<--``), in the part it ran in."""
        out = []
        part = None
        for t in cex.trace:
            m = re.match(r"\s*step \d+ \((\w+), i = ", t)
            if m:
                part = m.group(1)
            if "<--" in t:
                name = t.strip().split(" ", 1)[0]
                hits = [(p, ln, txt) for p, ln, txt in self.source.ops.get(name, []) if p == part]
                for p, ln, txt in hits[:1]:
                    out.append(f"{indent}source: {name} in the {p} is line {ln}: {txt}")
        return out

    def to_json(self) -> dict:
        p = self.report.program
        return {"file": self.loop.path, "source": self.loop.source, "function": self.loop.name, "ok": self.ok,
                "counts": self.counts(),
                "trip_count": p.trip_count, "min_trip_count": p.min_trip_count,
                "waits": [{"index": v.index, "line": self.source.waits[v.index][0],
                           "text": self.source.waits[v.index][1], "part": p.waits[v.index].part,
                           "in_flight": to_str(p.waits[v.index].in_flight), "status": v.status, "tight": v.tight,
                           "reason": v.reason,
                           "counterexample": v.counterexample.render("") if v.counterexample else None}
                          for v in self.report.verdicts],
                "global_failures": [o.description for o in self.report.global_failures]}


def lower_min_trip(loop: Loop, min_trip_count: Optional[int]) -> Loop:
    """``loop`` allowing every trip count down to ``min_trip_count`` when that is below the smallest the
    front-end assumed (``--min-trip-count 0``: a loop that may run zero times). Every trip count in between
    must give the body a non-negative extent (else a SynthError at the loop's line); a loop with a fixed
    trip count, or a bound at or above the front-end's, is returned unchanged."""
    if min_trip_count is None or loop.trip_symbol is None or min_trip_count >= loop.min_trip:
        return loop
    extent = Num(loop.body_extent) if isinstance(loop.body_extent, int) else loop.body_extent
    for t in range(min_trip_count, loop.min_trip):
        try:
            b = evaluate(extent, {loop.trip_symbol: t})
        except (KeyError, ValueError, ZeroDivisionError):  # another free name, a division by zero
            b = None
        if b is None or isinstance(b, bool) or b < 0:
            value = "not a number of iterations" if b is None or isinstance(b, bool) else f"{b}"
            raise SynthError(Loc(loop.path, loop.body_line, 1),
                             f"--min-trip-count {min_trip_count}: at trip count {t} the loop's extent "
                             f"{to_str(extent)} is {value}, and the mapping reads the extent as the number of "
                             "body iterations (a negative one is outside the model)",
                             f"use --min-trip-count {loop.min_trip} or more")
    return replace(loop, min_trip=min_trip_count)


def check_loop(loop: Loop, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
               time_limit: float = 10.0, tightness: bool = True) -> CheckResult:
    """Map ``loop`` and prove its waits for every trip count >= ``min_trip_count`` (default: the smallest the
    loop allows; 0 is honoured through :func:`lower_min_trip`, and what the mapping cannot express at the lower
    counts, such as a prologue copy guarded by ``0 < T``, is a SynthError naming the flag and the line)."""
    lowered = lower_min_trip(loop, min_trip_count) if trip_count is None else loop
    try:
        program, smap = to_program(lowered, min_trip=min_trip_count, trip_count=trip_count)
    except SynthError as e:
        if lowered is loop:
            raise
        raise SynthError(e.loc, f"--min-trip-count {min_trip_count}: {e.msg}", e.fix) from None
    report = verify_program(program, time_limit=time_limit, tightness=tightness, smt2=False)
    return CheckResult(loop, program, smap, report)


def zero_trip_program(p):
    """The Hopper program ``p`` (:class:`~synth.hopper.ir.HopperProgram`) quantified over every trip count
    T >= 0: ``min_trip_count`` 0 in it and in each role's program. The mapping of a Triton TTGIR does not
    depend on the bound (the guards are the IR's own predicates), so only the bound changes."""
    roles = tuple(replace(r, program=replace(r.program, min_trip_count=0)) for r in p.roles)
    return replace(p, min_trip_count=0, roles=roles)


__all__ = ["CheckResult", "check_loop", "lower_min_trip", "zero_trip_program"]

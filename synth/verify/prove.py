"""Prove a program's obligations with Z3, one timed query each; tightness; counterexamples.

Input: a program. Output: a :class:`~synth.verify.report.Report`. Each obligation
of :mod:`synth.verify.obligations` is encoded (:mod:`synth.verify.encode`) and
handed to its own ``z3.Solver`` with a time limit: ``unsat`` is proven, ``sat``
refuted (the model becomes a :class:`Counterexample`, replayed by the
explicit-state oracle so that its trace is an actual execution), anything else
unknown. The solver's ``to_smt2()`` of that query is kept as the certificate file.

Tightness of a proven wait ``w``: the obligations that mention ``w`` and were
proven are re-proven with ``w``'s count plus one. If one fails, ``w`` is tight.
Otherwise the reason is found by further checks: with ``w`` removed its
obligations still hold -> "subsumed by wait #k" (the other wait whose count, plus
one, then breaks them); a predicated producer on the queue -> "predicated
producer"; else "conservative fallback".
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import AbstractSet, Callable, Optional, Union

import z3

from ..deadline import Deadline, TimeUp, as_deadline
from ..errors import SynthError
from ..expr import Bin, Expr, Num, as_affine, evaluate, simplify, to_str
from ..program import CommitStmt, OpStmt, Program, WaitStmt
from . import oracle
from .encode import Encoder
from .obligations import (Obligation, ProgramError, enumerate_obligations, validate_program, wait_text)
from .report import Counterexample, ObligationResult, Report, WaitVerdict

REPLAY_MAX_T = 20_000
"""Counterexamples with a larger trip count are described from the model alone."""


def z3_version() -> str:
    return z3.get_version_string()


def smt2_text(ob: Obligation, solver: z3.Solver) -> str:
    """The self-contained SMT-LIB2 file of one obligation (its negation; expected ``unsat``)."""
    body = solver.to_smt2()
    lines = body.splitlines()
    if lines and lines[0].startswith(";"):
        lines = lines[1:]
    head = [f"; synth proof obligation {ob.id} ({ob.kind})",
            f"; {ob.description}",
            "; this is the NEGATED obligation: unsat means the obligation holds",
            "(set-logic ALL)"]
    return "\n".join(head + lines) + "\n"


def _check(formula: z3.BoolRef, time_limit: float) -> tuple[str, z3.Solver]:
    s = z3.SimpleSolver()
    s.set("timeout", max(1, int(time_limit * 1000)))
    s.add(formula)
    r = s.check()
    return ("proven" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"), s


def _solve(ob: Obligation, enc: Encoder, time_limit: float) -> tuple[str, z3.Solver, frozenset[int]]:
    """``(status, solver, waits mentioned)`` of one obligation.

    Pair obligations (RAW, WAR, WAW) first try the formula "both instances execute": when
    that is unsat (the pair never co-occurs) it is the proof and the certificate."""
    if ob.kind in ("raw", "war", "waw"):
        status, s = _check(ob.encode(enc, premise_only=True).formula, time_limit)
        if status == "proven":
            return status, s, frozenset()
    e = ob.encode(enc)
    status, s = _check(e.formula, time_limit)
    return status, s, e.waits


def prove_obligation(program: Program, ob: Obligation, enc: Encoder, time_limit: float,
                     trip: Optional[int] = None, smt2: bool = True) -> ObligationResult:
    """Prove one obligation; a refutation comes with a counterexample (``smt2``: keep the file text)."""
    t0 = time.perf_counter()
    if ob.error:
        return ObligationResult(ob.id, ob.kind, ob.wait, ob.queue, ob.part, ob.description, "unknown",
                                time.perf_counter() - t0, reason=ob.error)
    status, s, waits = _solve(ob, enc, time_limit)
    text = smt2_text(ob, s) if smt2 else ""
    reason = ""
    cex = None
    if status == "refuted":
        cex = _counterexample(program, ob, enc, s, trip)
        reason = cex.summary
    elif status == "unknown":
        reason = f"solver returned unknown ({s.reason_unknown()}) within {time_limit:g} s"
    return ObligationResult(ob.id, ob.kind, ob.wait, ob.queue, ob.part, ob.description, status,
                            time.perf_counter() - t0, text, cex, reason, tuple(sorted(waits)))


# --------------------------------------------------------------------------------------------
# counterexamples
# --------------------------------------------------------------------------------------------

def _counterexample(program: Program, ob: Obligation, enc: Encoder, s: z3.Solver,
                    trip: Optional[int]) -> Counterexample:
    m = s.model()
    T = m.eval(enc.T, model_completion=True).as_long()
    if enc.tsym is not None and trip is None and T > program.min_trip_count:
        for bound in (0, 1, 2, 4, 8, 16, 32, 64, 128, 1024):
            b = program.min_trip_count + bound
            if b >= T:
                break
            s.push()
            s.add(enc.T <= b)
            if s.check() == z3.sat:
                m = s.model()
                T = m.eval(enc.T, model_completion=True).as_long()
                s.pop()
                break
            s.pop()
    j = m.eval(enc.j, model_completion=True).as_long()
    preds: dict[tuple[str, int], bool] = {}
    # the encoder's own opaque constants, looked up (a model holds every constant of the query: listing them all
    # and reading their names costs more than the proof)
    for (op, r), c in enc.opaque_predicates():
        val = m[c]
        if val is not None:
            preds[(op, j + r - program.op(op).stage)] = z3.is_true(val)
    part, i = _locate_step(program, enc, m, j)
    kind = ob.kind
    if T <= REPLAY_MAX_T and kind != "wellformed":
        ex = oracle.execute(program, T, preds)
        found = oracle.analyze(ex, "obligations")
        v = found.get(ob.id)
        if v is not None:
            shown = tuple(sorted((op, it, val) for (op, it), val in ex.preds.items() if not val))
            summary = (f"{_kind_word(kind)}: with trip count {T}, at {v.part} i = {v.i} (step {v.step}): "
                       f"{v.message}")
            return Counterexample(kind, T, v.step, v.part, v.i, summary, tuple(oracle.explain(ex, v)), shown)
    shown = tuple(sorted((op, it, val) for (op, it), val in preds.items() if not val))
    if kind == "count-nonnegative" and ob.wait is not None:
        n = m.eval(enc.wait_count(ob.part, ob.pos, 0), model_completion=True)
        summary = (f"negative count: with trip count {T}, at {ob.part} i = {i} (step {j}) "
                   f"{wait_text(program, ob.wait)} has count {n}")
    elif kind == "wellformed":
        summary = f"malformed program: with trip count {T}, {_wellformed_detail(program, part, i, T)}"
    else:
        summary = (f"{_kind_word(kind)}: with trip count {T}, at {part} i = {i} (step {j}) this fails: "
                   f"{ob.description}")
    return Counterexample(kind, T, j, part, i, summary, (), shown)


def _wellformed_detail(program: Program, part: str, i: int, T: int) -> str:
    """Which identity of a ``wellformed`` obligation fails at ``(part, i)`` (no solver)."""
    tenv = {program.trip_count: T} if isinstance(program.trip_count, str) else {}
    off = 0
    for p in program.parts:
        ext = int(evaluate(p.extent, tenv))
        if ext < 0:
            return f"part {p.name} has extent {to_str(p.extent)} = {ext} < 0"
        if p.name == part:
            break
        off += ext
    if part not in [p.name for p in program.parts]:
        return "a part has a negative extent"
    mult = {b.name: b.multiplicity for b in program.buffers}
    pt = program.part(part)
    env = dict(tenv)
    env[pt.var] = i
    for k, st in enumerate(pt.stmts):
        if not isinstance(st, OpStmt):
            continue
        stage = program.op(st.op).stage
        it = int(evaluate(st.iteration, env))
        if it != off + i - stage:
            return (f"at {part} i = {i} (step {off + i}) statement {k} ({st.op}) runs iteration "
                    f"{to_str(st.iteration)} = {it}, but stage {stage} means iteration {off + i - stage}")
        if st.guard is not None and not evaluate(st.guard, env):
            continue
        for a in st.reads + st.writes:
            v, sl = int(evaluate(a.version, env)), int(evaluate(a.slot, env))
            if sl != v % mult[a.buffer]:
                return (f"at {part} i = {i} statement {k} ({st.op}) uses {a.buffer} slot {to_str(a.slot)} = {sl} "
                        f"for version {v}, but the buffer has {mult[a.buffer]} slots ({v} % {mult[a.buffer]} = "
                        f"{v % mult[a.buffer]})")
    return f"at {part} i = {i}"


def _kind_word(kind: str) -> str:
    return {"raw": "RAW (stale read)", "war": "WAR (slot overwritten while read)",
            "waw": "WAW (older write may land last)", "count-nonnegative": "negative count",
            "wellformed": "malformed program"}[kind]


def _locate_step(program: Program, enc: Encoder, m: z3.ModelRef, j: int) -> tuple[str, int]:
    for p in program.parts:
        off = m.eval(enc.off[p.name], model_completion=True).as_long()
        ext = m.eval(enc.ext[p.name], model_completion=True).as_long()
        if off <= j < off + ext:
            return p.name, j - off
    return "?", j


# --------------------------------------------------------------------------------------------
# tightness
# --------------------------------------------------------------------------------------------

def _plus_one(e: Expr) -> str:
    """``e + 1`` as a person writes it: ``3 - i`` rather than ``-i + 3``."""
    s = simplify(Bin("+", e, Num(1)))
    a = as_affine(s)
    if a is None or not a[0] or all(c > 0 for c in a[0].values()):
        return to_str(s)
    coeffs, const = a
    pos = [(n, c) for n, c in sorted(coeffs.items()) if c > 0]
    neg = [(n, -c) for n, c in sorted(coeffs.items()) if c < 0]
    term = lambda n, c: n if c == 1 else f"{c} * {n}"  # noqa: E731
    head = " + ".join([term(n, c) for n, c in pos] + ([str(const)] if const > 0 else []))
    tail = " - ".join(term(n, c) for n, c in neg)
    if not head:
        return to_str(s)
    return f"{head} - {tail}" + (f" - {-const}" if const < 0 else "")


class _Switches:
    """Every obligation encoded once with per-wait switches (count + 1, wait removed); each
    question is one check under assumptions on those literals."""

    def __init__(self, program: Program, obs: list[Obligation], time_limit: float, trip: Optional[int]) -> None:
        self.enc = Encoder(program, trip=trip, parametric=True)
        self.nw = len(program.waits)
        self.time_limit = time_limit
        self.deadline: Optional[Deadline] = None
        """When set, every check is capped by what is left of it."""
        self.solvers: dict[str, z3.Solver] = {}
        self.lits: dict[tuple[str, int, bool], z3.BoolRef] = {}

    def check(self, ob: Obligation, plus: AbstractSet[int] = frozenset(),
              drop: AbstractSet[int] = frozenset()) -> str:
        s = self.solvers.get(ob.id)
        if s is None:
            s = z3.SimpleSolver()
            s.add(ob.encode(self.enc).formula)
            self.solvers[ob.id] = s
        limit = self.time_limit if self.deadline is None else self.deadline.cap(self.time_limit)
        s.set("timeout", max(1, int(limit * 1000)))  # the deadline nears between checks
        lits = [self._lit("plus", w, w in plus) for w in range(self.nw)]
        lits += [self._lit("drop", w, w in drop) for w in range(self.nw)]
        r = s.check(*lits)
        return "proven" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"

    def _lit(self, kind: str, w: int, on: bool) -> z3.BoolRef:
        """The assumption literal of switch ``kind`` of wait ``w``, built once (a check passes
        all ``2 * waits`` of them, and building Z3 terms in Python is slow)."""
        key = (kind, w, on)
        lit = self.lits.get(key)
        if lit is None:
            b = self.enc.plus(w) if kind == "plus" else self.enc.drop(w)
            lit = self.lits[key] = b if on else z3.Not(b)
        return lit

    def all_proven(self, obs: list[Obligation], plus: AbstractSet[int] = frozenset(),
                   drop: AbstractSet[int] = frozenset()) -> Optional[bool]:
        """True: all proven; False: one refuted; None: one unknown (none refuted)."""
        unknown = False
        for ob in obs:
            st = self.check(ob, plus, drop)
            if st == "refuted":
                return False
            unknown |= st == "unknown"
        return None if unknown else True


def judge_tightness(program: Program, obs: list[Obligation], results: list[ObligationResult], index: int,
                    switches: _Switches) -> tuple[Optional[bool], str]:
    """``(tight, reason)`` of proven wait ``index``."""
    w = program.waits[index]
    involved = [ob for ob, r in zip(obs, results)
                if r.status == "proven" and index in r.waits_used and ob.kind != "count-nonnegative"]
    first_fail = None
    unknown = False
    for ob in involved:
        status = switches.check(ob, plus={index})
        if status == "refuted":
            first_fail = ob
            break
        unknown |= status == "unknown"
    if first_fail is not None:
        return True, f"tight: with {_plus_one(w.in_flight)} in flight, {first_fail.description} fails"
    if unknown:
        return None, "tightness unknown: the solver timed out on n + 1"
    own = [ob for ob in obs if ob.wait == index and ob.kind in ("raw", "war", "waw")]
    pred = _predicated_producer(program, w.queue)
    if switches.all_proven(involved, drop={index}):
        mentioned = set().union(*(r.waits_used for ob, r in zip(obs, results) if ob.wait == index))
        for k in [k for k in _neighbours(program, index) if k in mentioned]:
            if own and switches.all_proven(own, plus={k}, drop={index}) is False:
                return False, f"not tight: subsumed by wait {wait_text(program, k)}"
        if pred:
            return False, (f"not tight: predicated producer {pred}: the reads it guards are complete without "
                           f"it where the producer runs")
        if not own:
            return False, "not tight: no read or write depends on it (redundant)"
        return False, "not tight: subsumed by the other waits on its queue (redundant)"
    if pred:
        return False, (f"not tight: predicated producer {pred}: fewer groups may be in flight than the "
                       f"count allows, so {_plus_one(w.in_flight)} is also correct")
    return False, (f"not tight: conservative fallback: {_plus_one(w.in_flight)} in flight is also "
                   f"correct")


def _neighbours(program: Program, index: int) -> list[int]:
    """Other waits on the same queue: same part nearest-before first, then the rest."""
    w = program.waits[index]
    stmts = program.part(w.part).stmts
    pos = next(k for k, s in enumerate(stmts) if isinstance(s, WaitStmt) and s.wait == index)
    same = [s.wait for s in reversed(stmts[:pos]) if isinstance(s, WaitStmt)]
    same += [s.wait for s in stmts[pos + 1:] if isinstance(s, WaitStmt)]
    rest = [k for k in range(len(program.waits)) if k not in same]
    return [k for k in same + rest if k != index and program.waits[k].queue == w.queue]


def _predicated_producer(program: Program, queue: int) -> str:
    for p in program.parts:
        for s in p.stmts:
            if isinstance(s, OpStmt):
                o = program.op(s.op)
                if o.is_async and o.queue == queue and o.when is not None:
                    return f"{o.name} (when: {o.when})"
            if isinstance(s, CommitStmt) and s.queue == queue and s.gate:
                return f"{', '.join(s.gate)} (conditional commit)"
    return ""


# --------------------------------------------------------------------------------------------
# the entry point

VERDICT_PREFIXES = ("tight:", "not tight:", "tightness unknown")
"""How the clauses :func:`verify_program` adds to a wait's ``reason`` start."""


def own_reason(reason: str) -> str:
    """A wait's reason without the tightness clauses an earlier proof added (so proving is idempotent)."""
    return "; ".join(c for c in reason.split("; ") if c and not c.startswith(VERDICT_PREFIXES))

# --------------------------------------------------------------------------------------------

def verify_program(program: Program, *, time_limit: float = 10.0, tightness: bool = True,
                   trip_count: Optional[int] = None, smt2: bool = True,
                   progress: Optional[Callable[[int, int], None]] = None,
                   deadline: Union[Deadline, float, None] = None) -> Report:
    """Prove every obligation of ``program`` (docs/verification.md) and judge each wait.

    ``time_limit`` is per solver query, in seconds. ``trip_count`` fixes the trip
    count instead of quantifying over all ``T >= min_trip_count`` (for tests).
    ``smt2=False`` skips keeping each query's SMT-LIB2 text (no certificate can
    then be written from the report). ``progress(done, total)`` is called after
    each obligation is decided (for a progress bar; it must not raise).
    ``deadline`` (a :class:`~synth.deadline.Deadline`, or a :func:`time.monotonic`
    instant) caps every query so the whole call ends near it; once it has passed
    with an obligation or a tightness question left undecided,
    :class:`~synth.deadline.TimeUp` (phase ``prove``) is raised instead of a
    report that would claim less than a full proof as a result.

    The program is not changed by proving it beyond its waits' ``tight`` and the
    tightness clause of their ``reason``, which are replaced, never appended to:
    proving ``report.program`` again gives the same program.
    Raises :class:`SynthError` on a malformed program.
    """
    dl = as_deadline(deadline)
    t0 = time.perf_counter()
    try:
        validate_program(program)
    except ProgramError as e:
        raise SynthError(None, f"program {program.name}: {e.path}: {e.msg}", e.fix) from None
    if trip_count is not None and trip_count < program.min_trip_count:
        raise ValueError(f"trip_count {trip_count} < min_trip_count {program.min_trip_count}")
    enc = Encoder(program, trip=trip_count)
    obs = enumerate_obligations(program, enc)
    results = []
    for ob in obs:
        if progress is not None:
            progress(len(results), len(obs))
        dl.check("prove", done=f"{len(results)} of {len(obs)} obligations")
        results.append(prove_obligation(program, ob, enc, dl.cap(time_limit), trip_count, smt2))
    if dl.expired() and any(r.status == "unknown" for r in results):
        raise TimeUp("prove", dl.limit, done=f"{len(obs)} obligations, the last cut short")
    if progress is not None:
        progress(len(results), len(obs))
    verdicts = []
    waits = list(program.waits)
    switches = _Switches(program, obs, time_limit, trip_count) if tightness else None
    for idx, w in enumerate(program.waits):
        mine = [r for r in results if r.wait == idx]
        secs = sum(r.seconds for r in mine)
        if any(r.status == "refuted" for r in mine):
            status = "refuted"
        elif any(r.status == "unknown" for r in mine):
            status = "unknown"
        else:
            status = "proven"
        cex = next((r.counterexample for r in mine if r.status == "refuted"), None)
        tight: Optional[bool] = None
        reason = ""
        if status == "proven" and switches is not None:
            t1 = time.perf_counter()
            dl.check("prove (tightness)", done=f"{len(obs)} obligations, tightness of {idx} of "
                     f"{len(program.waits)} waits")
            switches.deadline = dl
            tight, reason = judge_tightness(program, obs, results, idx, switches)
            if tight is None and dl.expired():
                raise TimeUp("prove (tightness)", dl.limit)
            secs += time.perf_counter() - t1
        elif status == "refuted":
            bad = next(r for r in mine if r.status == "refuted")
            reason = bad.reason
        elif status == "unknown":
            reason = next(r.reason for r in mine if r.status == "unknown")
        verdicts.append(WaitVerdict(idx, status, secs, cex, tight, reason))
        # The program's tight field always reflects this run's verdict, never what a file said.
        base = own_reason(w.reason)
        if tight:
            waits[idx] = replace(w, tight=True, reason=base)
        else:
            waits[idx] = replace(w, tight=tight, reason=f"{base}; {reason}" if base and reason else
                                 (reason or base))
    glob = tuple(r for r in results if r.wait is None and r.status != "proven")
    ok = all(r.status == "proven" for r in results)
    return Report(ok, tuple(verdicts), tuple(results), glob, replace(program, waits=tuple(waits)),
                  time.perf_counter() - t0, f"z3 {z3_version()}")



__all__ = ["verify_program", "prove_obligation", "judge_tightness", "smt2_text", "z3_version", "own_reason"]

"""Proof obligations of a program, and reading ``program.json``.

Input: a :class:`~synth.program.Program`. Output: a list of :class:`Obligation`
descriptors, each naming one claim (kind ``raw`` / ``war`` / ``waw`` /
``count-nonnegative`` / ``wellformed``), the statement instance it is anchored at,
and the wait it is charged to; :meth:`Obligation.encode` turns one into its Z3
formula (:mod:`synth.verify.encode`).

Which wait an obligation is charged to: the last wait statement on the relevant
queue (the producer's for RAW, the async reader's for WAR, the earlier writer's
for WAW) before the anchor statement in the anchor's part. An obligation with no
such wait (a synchronous race, a missing wait) is *global*.

Left out on purpose: obligations that hold by program order alone (a synchronous
producer earlier in the same or an earlier step, a synchronous reader before the
writer) are not emitted; well-formedness (``wellformed``) covers the identities
that make "earlier" mean what it says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..expr import ExprError, Expr, free_vars, is_bool, parse, to_str
from ..program import PARTS, CommitStmt, OpStmt, Program, WaitStmt
from . import encode as E

KINDS = ("raw", "war", "waw", "count-nonnegative", "wellformed")


@dataclass(frozen=True)
class Obligation:
    id: str
    """Stable name: ``raw:body:3:r0``, ``war:body:0:w0<-body:4:r0``, ``count:epilogue:0``..."""
    kind: str
    part: str
    """Part of the anchor statement."""
    pos: int
    """Index of the anchor statement in its part."""
    wait: Optional[int]
    """The wait this obligation is charged to (None: global)."""
    queue: Optional[int]
    description: str
    access: int = 0
    partner: Optional[tuple[str, int, int]] = None
    """``(part, stmt, access)`` of the producer / earlier reader / earlier writer."""
    deltas: tuple[int, ...] = ()
    """Step distances anchor - partner considered."""
    producers: tuple[tuple[str, int], ...] = ()
    """RAW: statements of the producer op."""
    error: str = ""
    """Set when the encoding cannot handle this obligation (reported as unknown)."""

    def encode(self, enc: E.Encoder, premise_only: bool = False) -> E.Encoded:
        """The negated obligation; ``premise_only``: just "anchor and partner both execute" (a
        weaker formula: when it is unsat, so is the obligation's, and it is a valid certificate)."""
        if self.kind == "raw":
            return E.encode_raw(enc, self.part, self.pos, self.access, self.deltas, self.producers, premise_only)
        if self.kind == "war":
            assert self.partner is not None
            return E.encode_war(enc, self.part, self.pos, self.access, *self.partner, self.deltas, premise_only)
        if self.kind == "waw":
            assert self.partner is not None
            return E.encode_waw(enc, self.part, self.pos, self.access, *self.partner, self.deltas, premise_only)
        if self.kind == "count-nonnegative":
            return E.encode_count(enc, self.part, self.pos)
        if self.part == "*":
            return E.encode_extents(enc)
        return E.encode_wellformed(enc, self.part)


def blame(program: Program, part: str, pos: int, queue: Optional[int]) -> Optional[int]:
    """The last wait on ``queue`` before statement ``pos`` of ``part``."""
    if queue is None:
        return None
    stmts = program.part(part).stmts
    for k in range(pos - 1, -1, -1):
        s = stmts[k]
        if isinstance(s, WaitStmt) and program.waits[s.wait].queue == queue:
            return s.wait
    return None


def wait_text(program: Program, index: int) -> str:
    w = program.waits[index]
    return f"#{index} {w.part} async_wait_queue({w.queue}, {to_str(w.in_flight)}) before {w.before}"


def _static_ok(deltas: tuple[int, ...], apart: str, apos: int, ppart: str, ppos: int) -> bool:
    """A synchronous partner ``d`` steps before the anchor is earlier in every case (``d = 0`` in
    another part cannot happen: a step lies in one part)."""
    return all(d > 0 or (d == 0 and (ppart != apart or ppos < apos)) for d in deltas)


def enumerate_obligations(program: Program, enc: E.Encoder) -> list[Obligation]:
    """All obligations of ``program`` (validated), in a stable order."""
    out: list[Obligation] = []
    ops = {o.name: o for o in program.ops}
    mult = {b.name: b.multiplicity for b in program.buffers}
    op_stmts: dict[str, list[tuple[str, int]]] = {}
    for p in program.parts:
        for k, s in enumerate(p.stmts):
            if isinstance(s, OpStmt):
                op_stmts.setdefault(s.op, []).append((p.name, k))

    out.append(Obligation("wellformed:extents", "wellformed", "*", 0, None, None,
                          "every part's extent is >= 0 for every allowed trip count"))
    for p in program.parts:
        out.append(Obligation(f"wellformed:{p.name}", "wellformed", p.name, 0, None, None,
                              f"{p.name}: each op statement runs iteration j - stage and each executed "
                              f"access uses slot version % multiplicity"))

    for p in program.parts:
        for k, s in enumerate(p.stmts):
            if isinstance(s, WaitStmt):
                w = program.waits[s.wait]
                out.append(Obligation(f"count:{p.name}:{k}", "count-nonnegative", p.name, k, s.wait, w.queue,
                                      f"{p.name}: async_wait_queue({w.queue}, {to_str(w.in_flight)}) before "
                                      f"{w.before} has a count >= 0 wherever it runs"))

    for p in program.parts:
        for k, s in enumerate(p.stmts):
            if not isinstance(s, OpStmt):
                continue
            # RAW -------------------------------------------------------------------------------
            for a, acc in enumerate(s.reads):
                if acc.producer is None or acc.producer not in ops:
                    continue
                prod = ops[acc.producer]
                queue = program.commit_queue(acc.producer) if prod.is_async else None
                oid = f"raw:{p.name}:{k}:r{a}"
                desc = (f"{p.name}: {s.op} reads {acc.buffer} version {to_str(acc.version)} only after "
                        f"{'async ' if prod.is_async else ''}{acc.producer}'s write of it is complete")
                try:
                    c = enc.offset(p.name, acc.version)
                    if c is not None:
                        deltas = (-(c + prod.stage),)
                    else:
                        deltas = tuple(_raw_deltas(enc, p.name, k, acc.version, prod.stage))
                except E.Unsupported as e:
                    out.append(Obligation(oid, "raw", p.name, k, blame(program, p.name, k, queue), queue, desc,
                                          a, error=str(e)))
                    continue
                prods = tuple(op_stmts.get(acc.producer, ()))
                if not prod.is_async and all(_static_ok(deltas, p.name, k, pp, pk) for pp, pk in prods):
                    continue
                if not deltas:
                    continue
                out.append(Obligation(oid, "raw", p.name, k, blame(program, p.name, k, queue), queue, desc, a,
                                      None, deltas, prods))
            # WAR and WAW -----------------------------------------------------------------------
            for a, acc in enumerate(s.writes):
                m = mult[acc.buffer]
                for q in program.parts:
                    for rk, rs in enumerate(q.stmts):
                        if not isinstance(rs, OpStmt):
                            continue
                        for kind, accesses in (("war", rs.reads), ("waw", rs.writes)):
                            for oa, oacc in enumerate(accesses):
                                if oacc.buffer != acc.buffer:
                                    continue
                                ob = _pair(program, enc, kind, p.name, k, a, acc.version, q.name, rk, oa,
                                           oacc.version, m, ops[rs.op].is_async, rs.op, s.op, acc.buffer)
                                if ob is not None:
                                    out.append(ob)
    return out




def _raw_deltas(enc: E.Encoder, part: str, pos: int, version: Expr, stage: int) -> list[int]:
    v = enc.int_term(enc.expr(version, part, 0))
    delta = enc.j - (v + stage)
    pstep = enc.j - delta
    facts = [enc.in_part(part, 0), enc.guard(part, pos, 0), 0 <= pstep, pstep < enc.N]
    return enc.delta_range(facts, delta)


def _pair(program: Program, enc: E.Encoder, kind: str, wpart: str, wpos: int, wk: int, wversion: Expr,
          ppart: str, ppos: int, pk: int, pversion: Expr, m: int, partner_async: bool,
          partner_op: str, writer_op: str, buffer: str) -> Optional[Obligation]:
    """A WAR (partner reads) or WAW (partner writes) obligation, or None when trivial."""
    tag = "r" if kind == "war" else "w"
    oid = f"{kind}:{wpart}:{wpos}:w{wk}<-{ppart}:{ppos}:{tag}{pk}"
    queue = program.commit_queue(partner_op) if partner_async else None
    wait_blame = blame(program, wpart, wpos, queue)
    if kind == "war":
        desc = (f"{wpart}: {writer_op}'s write of {buffer} version {to_str(wversion)} is issued only after "
                f"{'async ' if partner_async else ''}{partner_op}'s read of the slot's previous version "
                f"(in {ppart}) is done")
    else:
        desc = (f"{wpart}: {writer_op}'s write of {buffer} version {to_str(wversion)} is issued only after "
                f"{'async ' if partner_async else ''}{partner_op}'s write of the slot's previous version "
                f"(in {ppart}) is complete")
    try:
        cw = enc.offset(wpart, wversion)
        cp = enc.offset(ppart, pversion)
        if cw is not None and cp is not None:
            deltas = [cp + m - cw]
        else:
            vw = enc.int_term(enc.expr(wversion, wpart, 0))
            deltas = E.pair_deltas(enc, wpart, wpos, vw, ppart, pversion, m)
    except E.Unsupported as e:
        return Obligation(oid, kind, wpart, wpos, wait_blame, queue, desc, wk, (ppart, ppos, pk), error=str(e))
    same = ppart == wpart and ppos == wpos
    if same:
        deltas = [d for d in deltas if d != 0]
    if not deltas:
        return None
    if not partner_async and _static_ok(tuple(deltas), wpart, wpos, ppart, ppos):
        return None
    return Obligation(oid, kind, wpart, wpos, wait_blame, queue, desc, wk, (ppart, ppos, pk), tuple(deltas))


# --------------------------------------------------------------------------------------------
# validation and program.json
# --------------------------------------------------------------------------------------------

class ProgramError(ValueError):
    """A malformed program: ``path`` is where in program.json (``waits[2].in_flight``)."""

    def __init__(self, path: str, msg: str, fix: str, needle: str = "") -> None:
        super().__init__(f"{path}: {msg}")
        self.path = path
        self.msg = msg
        self.fix = fix
        self.needle = needle


def validate_program(program: Program) -> None:
    """Raise :class:`ProgramError` on anything the verifier cannot give a meaning to."""
    tsym = program.trip_count if isinstance(program.trip_count, str) else None
    if isinstance(program.trip_count, bool) or not isinstance(program.trip_count, (int, str)):
        raise ProgramError("loop.trip_count", "trip count must be an integer or a symbol", "write 128 or \"T\"")
    if isinstance(program.trip_count, int) and program.trip_count < 0:
        raise ProgramError("loop.trip_count", "trip count is negative", "use a trip count >= 0")
    ops = {o.name: o for o in program.ops}
    if len(ops) != len(program.ops):
        raise ProgramError("ops", "duplicate op names", "give every op a distinct name")
    bufs = {b.name: b for b in program.buffers}
    for b in program.buffers:
        if b.multiplicity < 1:
            raise ProgramError(f"buffers[{b.name}].multiplicity", f"buffer {b.name} has {b.multiplicity} slots",
                               "use multiplicity >= 1", f'"{b.name}"')
    nq = len(program.queues)
    for o in program.ops:
        if o.when not in (None, "opaque"):
            _check_expr(f"ops[{o.name}].when", o.when, {program.loop_var} | ({tsym} if tsym else set()), True)
        if o.is_async and (o.queue is None or not 0 <= o.queue < nq):
            raise ProgramError(f"ops[{o.name}].queue", f"async op {o.name} has queue {o.queue}",
                               f"use a queue in 0..{nq - 1}", f'"{o.name}"')
    names = [p.name for p in program.parts]
    if len(set(names)) != len(names) or any(n not in PARTS for n in names):
        raise ProgramError("parts", f"parts must be distinct among {PARTS}, got {names}",
                           "name the parts prologue, body, epilogue")
    seen_waits: dict[int, str] = {}
    tv = {tsym} if tsym else set()
    for p in program.parts:
        _check_expr(f"parts[{p.name}].extent", p.extent, tv, False)
        allowed = {p.var} | tv
        for k, s in enumerate(p.stmts):
            where = f"parts[{p.name}].stmts[{k}]"
            if s.guard is not None:
                _check_expr(f"{where}.guard", s.guard, allowed, True)
            if isinstance(s, OpStmt):
                if s.op not in ops:
                    raise ProgramError(f"{where}.op", f"unknown op {s.op!r}", "use an op listed in \"ops\"",
                                       f'"{s.op}"')
                _check_expr(f"{where}.iteration", s.iteration, allowed, False)
                for kind, accs in (("reads", s.reads), ("writes", s.writes)):
                    for a, acc in enumerate(accs):
                        aw = f"{where}.{kind}[{a}]"
                        if acc.buffer not in bufs:
                            raise ProgramError(f"{aw}.buffer", f"unknown buffer {acc.buffer!r}",
                                               "use a buffer listed in \"buffers\"", f'"{acc.buffer}"')
                        _check_expr(f"{aw}.version", acc.version, allowed, False)
                        _check_expr(f"{aw}.slot", acc.slot, allowed, False)
                        if acc.producer is not None and acc.producer not in ops:
                            raise ProgramError(f"{aw}.producer", f"unknown producer {acc.producer!r}",
                                               "name the op that writes this version", f'"{acc.producer}"')
                o = ops[s.op]
                if o.is_async and s.group is not None:
                    c = next((c for c in p.stmts[k + 1:] if isinstance(c, CommitStmt) and c.group == s.group), None)
                    if c is not None and c.queue != o.queue:
                        raise ProgramError(f"{where}.group",
                                           f"async op {s.op} (queue {o.queue}) is committed to queue {c.queue}",
                                           f"commit group {s.group} to queue {o.queue}, or move {s.op} to another group")
            elif isinstance(s, CommitStmt):
                if not 0 <= s.queue < nq:
                    raise ProgramError(f"{where}.queue", f"commit to unknown queue {s.queue}",
                                       f"use a queue in 0..{nq - 1}")
                for g in s.gate:
                    if g not in ops:
                        raise ProgramError(f"{where}.gate", f"unknown op {g!r} in gate", "name ops of this group",
                                           f'"{g}"')
            elif isinstance(s, WaitStmt):
                if not 0 <= s.wait < len(program.waits):
                    raise ProgramError(f"{where}.wait", f"wait index {s.wait} out of range",
                                       f"use an index into \"waits\" (0..{len(program.waits) - 1})")
                if s.wait in seen_waits:
                    raise ProgramError(f"{where}.wait", f"wait #{s.wait} is used twice",
                                       "give each wait statement its own entry in \"waits\"")
                seen_waits[s.wait] = p.name
                w = program.waits[s.wait]
                if w.part != p.name:
                    raise ProgramError(f"waits[{s.wait}].part", f"wait #{s.wait} says part {w.part!r} but its "
                                       f"statement is in {p.name!r}", f"set \"part\": \"{p.name}\"",
                                       f'"{w.part}"')
                if not 0 <= w.queue < nq:
                    raise ProgramError(f"waits[{s.wait}].queue", f"wait #{s.wait} on unknown queue {w.queue}",
                                       f"use a queue in 0..{nq - 1}")
                _check_expr(f"waits[{s.wait}].in_flight", w.in_flight, allowed, False)
    for idx, w in enumerate(program.waits):
        if idx not in seen_waits:
            raise ProgramError(f"waits[{idx}]", f"wait #{idx} ({w.part}, before {w.before}) has no wait statement",
                               "add a {\"kind\": \"wait\", \"wait\": %d} statement or remove the entry" % idx,
                               f'"{w.before}"')


def _check_expr(path: str, e, allowed: set, want_bool: bool) -> None:
    text = e if isinstance(e, str) else to_str(e)
    try:
        ex = parse(e) if isinstance(e, str) else e
    except ExprError as err:
        raise ProgramError(path, f"bad expression {text!r}: {err}", "use C syntax: i + 3, (i < 1) ? 1 : 0, k + 3 < T",
                           text) from None
    extra = free_vars(ex) - allowed
    if extra:
        raise ProgramError(path, f"{text!r} uses unknown name(s) {', '.join(sorted(extra))}",
                           f"only {', '.join(sorted(allowed)) or 'constants'} may appear here", text)
    if is_bool(ex) != want_bool:
        raise ProgramError(path, f"{text!r} is {'an integer' if want_bool else 'a condition'}",
                           "write a condition such as i < 2" if want_bool else "write an integer expression",
                           text)


_REQUIRED = {
    "": ("name", "loop", "max_stage", "ops", "buffers", "queues", "parts", "waits"),
    "loop": ("var", "trip_count", "min_trip_count"),
    "ops": ("name", "unit", "stage", "async"),
    "buffers": ("name", "multiplicity"),
    "queues": ("queue", "unit"),
    "parts": ("part", "extent", "stmts"),
    "waits": ("part", "queue", "in_flight", "before"),
}
_STMT_REQUIRED = {"op": ("op", "iteration"), "commit": ("queue", "group"), "wait": ("wait",)}


def _names(text: str) -> set:
    try:
        return set(free_vars(parse(text)))
    except ExprError:
        return set()


__all__ = ["Obligation", "KINDS", "enumerate_obligations", "blame", "wait_text", "validate_program",
           "ProgramError"]

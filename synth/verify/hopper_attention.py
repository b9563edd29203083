"""The proof of a lowered attention program (:func:`synth.lower.hopper_attention.lower_attention`), for every
number of KV blocks ``n >= 0`` (docs/attention.md).

Three parts, each over the same :class:`~synth.lower.hopper_attention.AttentionProgram`:

1. **The barrier protocol** (:func:`synth.verify.phases.verify_hopper`, every class of docs/hopper.md, every
   ``n >= 0``): the program's *barrier program* (:func:`barrier_program`: the register accesses left out of the
   op statements; registers are a warp group's own and take no part in a barrier). Its ``K`` / ``V`` rings, the
   once-loaded Q's barrier, the ping-pong order barriers, the wgmma waits and the releases they allow. With three or
   more staggered consumers the order is a ring of ``C`` warp groups: a turn's hand-off reaches the warp group
   after next through ``C - 1`` barrier hops, so the proof runs with ``hops = C - 1`` (:attr:`Phases.hops`).
2. **``register``**: each consumer's register buffers (``S``, ``P``, ``O``, ``m``, ``l``, ``corr``, at the
   schedule's copies) through the warp group's wgmma FIFO, by the sm_80 prover's classes over the consumer role's
   program (:func:`synth.verify.obligations.enumerate_obligations`: ``raw``, ``war``, ``waw``, ``wellformed``,
   ``count-nonnegative``; only accesses of register buffers): the softmax reads ``S`` after the wait that
   completes ``qk``'s group, the rescale of ``O`` comes after ``pv``'s group (which reads and accumulates the old
   ``O``) is complete, the next block's ``P`` is written after the ``pv`` reading the old one is complete. PTX ISA,
   "wgmma.mma_async": accessing the accumulator or the A-fragment registers of a ``wgmma.mma_async`` before a
   ``wgmma.wait_group`` that completes it is undefined.
3. **``once``**: each op reading a buffer loaded once before the loop (Q) runs after its warp group's ``try_wait``
   on the phase the load completes on (slot 0, phase 0), at every block: an instance of the reader at step ``j``
   implies the wait's instance (its count 0) runs at an earlier point of the same warp group; and a TMA statement
   of the load writes the buffer and completes on that barrier.

A refutation is a :class:`Refutation`: the class, the warp group (role), the KV block, the barrier (an mbarrier;
``wgmma group`` for a register hazard) with its slot and phase (a register hazard: the wgmma group's position in
the warp group's FIFO, 0 the first), the trip count ``n``, and the prover's sentence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Optional

import z3

from ..completion import TryWaitStmt
from ..expr import evaluate
from ..hopper.instances import role_instances
from ..hopper.ir import HopperProgram
from ..lower.hopper_attention import AttentionProgram, OnceRead
from ..program import OpStmt
from .encode import And, Encoder, Not, Or
from .obligations import enumerate_obligations
from .phases import HopperReport, enumerate_hopper, refutation_values, stmt_barrier, stmt_kind, verify_hopper
from .report import ObligationResult

REGISTER_KINDS = ("raw", "war", "waw", "wellformed", "count-nonnegative")


@dataclass(frozen=True)
class Refutation:
    """A refuted obligation of the attention proof, in the program's terms."""

    kind: str
    """The obligation class (``parity``, ``release_after_wgmma``, ``register``, ``once``, ...)."""
    obligation: str
    warp_group: str
    """The role: ``producer``, ``consumer0`` ..."""
    block: int
    """The KV block the failing statement is about (its state count or iteration); an order barrier's count is
    the turn, which is the consumer's step."""
    barrier: str
    """The mbarrier (``full_K``, ``empty_V``, ``order1`` ...) or ``wgmma group`` (a register hazard)."""
    slot: Optional[int]
    phase: Optional[int]
    """The barrier phase the statement names or waits for; a register hazard: the position of the wgmma's group
    in its warp group's FIFO (0: the first group it commits)."""
    n: int
    """The number of KV blocks of the counterexample (the smallest the re-checks show)."""
    summary: str


@dataclass(frozen=True)
class AttentionReport:
    ok: bool
    barriers: HopperReport
    register: tuple[ObligationResult, ...]
    once: tuple[ObligationResult, ...]
    refutations: tuple[Refutation, ...]
    seconds: float
    hops: int

    def by_class(self) -> dict[str, dict[str, int]]:
        out = self.barriers.by_class()
        for cls, rs in (("register", self.register), ("once", self.once)):
            for r in rs:
                out.setdefault(cls, {"proven": 0, "refuted": 0, "unknown": 0})[r.status] += 1
        return out

    @property
    def obligations(self) -> int:
        return len(self.barriers.obligations) + len(self.register) + len(self.once)

    def refuted(self, kind: str) -> list[Refutation]:
        return [r for r in self.refutations if r.kind == kind]

    def render(self) -> str:
        ok = sum(c["proven"] for c in self.by_class().values())
        lines = [f"{self.barriers.program.name}: {'all obligations proven' if self.ok else 'NOT PROVEN'} "
                 f"({ok}/{self.obligations} obligations, every n >= 0, {self.seconds:.2f} s"
                 + (f", {self.hops} barrier hops" if self.hops != 1 else "") + ")"]
        for cls, c in sorted(self.by_class().items()):
            lines.append(f"  {cls}: {c['proven']} proven, {c['refuted']} refuted, {c['unknown']} unknown")
        for r in self.refutations:
            where = f"{r.barrier}" + (f"[{r.slot}]" if r.slot is not None else "") + \
                (f" phase {r.phase}" if r.phase is not None else "")
            lines.append(f"refuted [{r.kind}] {r.warp_group}, block {r.block}, {where}, n = {r.n}: {r.summary}")
        for r in list(self.register) + list(self.once):
            if r.status == "unknown":
                lines.append(f"unknown [{r.kind}] {r.description}: {r.reason}")
        return "\n".join(lines)


def barrier_program(p: HopperProgram, registers) -> HopperProgram:
    """``p`` with every access of a buffer in ``registers`` left out of its op statements (the program
    :func:`verify_hopper` proves: a warp group's registers take no part in a barrier, and the explicit-state oracle
    that replays a counterexample treats every buffer as the CTA's shared memory)."""
    regs = set(registers)
    roles = []
    for r in p.roles:
        parts = []
        for pt in r.program.parts:
            stmts = tuple(replace(s, reads=tuple(a for a in s.reads if a.buffer not in regs),
                                  writes=tuple(a for a in s.writes if a.buffer not in regs))
                          if isinstance(s, OpStmt) else s for s in pt.stmts)
            parts.append(replace(pt, stmts=stmts))
        roles.append(replace(r, program=replace(r.program, parts=tuple(parts))))
    return replace(p, roles=tuple(roles))


def hops_for(ap: AttentionProgram) -> int:
    """Barrier hops the proof needs: ``C - 1`` for a ring of ``C >= 3`` staggered consumers, else 1."""
    return max(1, len(ap.order) - 1)


def verify_attention(ap: AttentionProgram, *, time_limit: float = 10.0, tightness: bool = False,
                     hops: Optional[int] = None) -> AttentionReport:
    """Prove ``ap`` for every ``n >= 0`` (module docstring); ``time_limit`` bounds each Z3 query. ``hops``: None,
    :func:`hops_for`."""
    t0 = time.perf_counter()
    hops = hops_for(ap) if hops is None else hops
    bp = barrier_program(ap.program, ap.registers)
    rep = verify_hopper(bp, time_limit=time_limit, tightness=tightness, hops=hops)
    refs: list[Refutation] = []
    obs = enumerate_hopper(bp)
    for ob, res in zip(obs, rep.obligations):
        if res.status == "refuted":
            refs.append(_barrier_refutation(bp, ob, res, rep.lags, hops, time_limit))
    reg: list[ObligationResult] = []
    for role in ap.consumers:
        rr, rf = _register(ap, role, time_limit)
        reg += rr
        refs += rf
    once: list[ObligationResult] = []
    for o in ap.once:
        r, f = _once(ap, o, time_limit)
        once.append(r)
        if f is not None:
            refs.append(f)
    ok = rep.ok and all(r.status == "proven" for r in reg + once)
    return AttentionReport(ok, rep, tuple(reg), tuple(once), tuple(refs), time.perf_counter() - t0, hops)


# ---------------------------------------------------------------------------------------------- barrier classes


def _barrier_refutation(p: HopperProgram, ob, res: ObligationResult, lags: dict, hops: int,
                        time_limit: float) -> Refutation:
    vals = refutation_values(p, ob, time_limit=time_limit, lags=lags, hops=hops) or {}
    stmt = None
    if ob.role in {r.name for r in p.roles}:
        stmt = p.role(ob.role).program.part(ob.part).stmts[ob.pos]
    barrier, slot, phase = "", None, None
    if stmt is not None and stmt_kind(stmt) in ("arrive", "try_wait", "tma"):
        barrier = stmt_barrier(stmt)
        st = stmt.barrier.state if isinstance(stmt, OpStmt) else stmt.state
        slots = p.barrier(barrier).slots
        if "x" in vals:
            slot = vals.get("slot", (vals["x"] % st.stages) % slots)
            phase = vals.get("phase", vals["x"] // st.stages - (st.phase if isinstance(stmt, TryWaitStmt) else 0))
    n = vals.get("T", res.counterexample.trip_count if res.counterexample is not None else -1)
    block = vals.get("x", vals.get("i", -1))
    return Refutation(ob.kind, ob.id, ob.role, block, barrier, slot, phase, n, res.reason or res.description)


# ---------------------------------------------------------------------------------------------- registers


def _register(ap: AttentionProgram, role: str, time_limit: float) -> tuple[list[ObligationResult], list[Refutation]]:
    prog = ap.program.role(role).program
    regs = set(ap.registers)
    enc = Encoder(prog)
    out, refs = [], []
    for ob in enumerate_obligations(prog, enc):
        if ob.kind not in REGISTER_KINDS:
            continue
        if ob.kind in ("raw", "war", "waw"):
            s = prog.part(ob.part).stmts[ob.pos]
            acc = s.reads[ob.access] if ob.kind == "raw" else s.writes[ob.access]
            if acc.buffer not in regs:
                continue  # shared memory: the barrier protocol's raw and slot_reuse
        t0 = time.perf_counter()
        desc = f"{role}: {ob.description}"
        if ob.error:
            out.append(ObligationResult(f"register:{role}:{ob.id}", "register", ob.wait, ob.queue, ob.part, desc,
                                        "unknown", 0.0, reason=ob.error))
            continue
        f = ob.encode(enc).formula
        s = z3.SimpleSolver()
        s.set("timeout", max(1, int(time_limit * 1000)))
        s.add(f)
        r = s.check()
        status = "proven" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"
        reason = ""
        if status == "refuted":
            ref = _register_refutation(ap, role, prog, ob, enc, s, desc)
            refs.append(ref)
            reason = ref.summary
        elif status == "unknown":
            reason = f"solver returned unknown ({s.reason_unknown()}) within {time_limit:g} s"
        out.append(ObligationResult(f"register:{role}:{ob.id}", "register", ob.wait, ob.queue, ob.part, desc,
                                    status, time.perf_counter() - t0, reason=reason))
    return out, refs


def _smallest(s: z3.Solver, T: z3.ArithRef, lo: int) -> z3.ModelRef:
    m = s.model()
    hi = m.eval(T, model_completion=True).as_long()
    while lo < hi:
        mid = (lo + hi) // 2
        s.push()
        s.add(T <= mid)
        if s.check() == z3.sat:
            m = s.model()
            hi = m.eval(T, model_completion=True).as_long()
        else:
            lo = mid + 1
        s.pop()
    return m


def _register_refutation(ap: AttentionProgram, role: str, prog, ob, enc: Encoder, s: z3.Solver,
                         desc: str) -> Refutation:
    m = _smallest(s, enc.T, prog.min_trip_count)
    T = m.eval(enc.T, model_completion=True).as_long()
    j = m.eval(enc.j, model_completion=True).as_long()
    stmt = prog.part(ob.part).stmts[ob.pos]
    env = {prog.part(ob.part).var: j - m.eval(enc.off[ob.part], model_completion=True).as_long(),
           str(prog.trip_count): T}
    block = evaluate(stmt.iteration, env)
    # the wgmma whose group is not complete: the producer (raw) or the earlier access (war, waw)
    if ob.kind == "raw":
        acc = stmt.reads[ob.access]
        partner, pversion = acc.producer, evaluate(acc.version, env)
    elif ob.partner is not None:
        pp, pk, pa = ob.partner
        pst = prog.part(pp).stmts[pk]
        partner = pst.op
        wacc = stmt.writes[ob.access]
        pversion = evaluate(wacc.version, env) - prog.buffer(wacc.buffer).multiplicity
    else:
        partner, pversion = None, None
    # the wgmma group of the hazard: the partner's when it is async, else the anchor's (an async reader)
    if partner is not None and prog.op(partner).is_async:
        gop, gver = partner, pversion
    elif prog.op(stmt.op).is_async:
        gop, gver = stmt.op, block
    else:
        gop, gver = None, None
    phase = None
    if gop is not None:
        commits = 0
        for inst in role_instances(ap.program, T, ap.program.role(role)):
            if inst.kind == "commit":
                commits += 1
            elif inst.kind == "wgmma" and inst.op == gop and inst.tile == gver:
                phase = commits  # the group it joins: the next commit closes it
                break
    group = f"the wgmma group of {gop}({gver}) (group {phase} of its FIFO)" if gop is not None else "no wgmma group"
    summary = (f"register: with n = {T}, warp group {role} {ob.part} i = {env[prog.part(ob.part).var]}: "
               f"{stmt.op}({block}) against {partner}({pversion}), {group} not complete between them: "
               f"this fails: {desc}")
    return Refutation("register", f"register:{role}:{ob.id}", role, block, "wgmma group", None, phase, T, summary)


# ---------------------------------------------------------------------------------------------- once


def _once(ap: AttentionProgram, o: OnceRead, time_limit: float) -> tuple[ObligationResult, Optional[Refutation]]:
    t0 = time.perf_counter()
    p = ap.program
    prog = p.role(o.role).program
    oid = f"once:{o.role}:{o.op}:{o.buffer}"
    desc = (f"{o.role}: every {o.op} reads {o.buffer} after its warp group's try_wait on {o.barrier}[0] phase 0, "
            f"the phase {o.load} completes on")
    loads = [s for r in p.roles for pt in r.program.parts for s in pt.stmts
             if isinstance(s, OpStmt) and s.op == o.load and s.barrier is not None and s.barrier.barrier == o.barrier
             and any(w.buffer == o.buffer for w in s.writes)]
    if not loads:
        why = f"no TMA {o.load} writes {o.buffer} completing on {o.barrier}"
        return (ObligationResult(oid, "once", None, None, "body", desc, "refuted", 0.0, reason=why),
                Refutation("once", oid, o.role, 0, o.barrier, 0, 0, 0, why))
    enc = Encoder(prog)
    readers = [(pt.name, k) for pt in prog.parts for k, s in enumerate(pt.stmts)
               if isinstance(s, OpStmt) and s.op == o.op]
    waits = [(pt.name, k, s) for pt in prog.parts for k, s in enumerate(pt.stmts)
             if isinstance(s, TryWaitStmt) and s.barrier == o.barrier]
    cases = []
    for rpart, rk in readers:
        runs = enc.op_exec(rpart, rk, 0)
        seen = []
        for wpart, wk, w in waits:
            c = enc.offset(wpart, w.state.count)
            if c is None or w.state.stages != 1:
                continue
            we = enc.moved(z3.IntVal(-c))
            # the instance whose count is 0 (slot 0, phase 0): step -c; it runs, and is earlier than the read
            earlier = Or(we.j < enc.j, And(we.j == enc.j, z3.BoolVal(wpart == rpart and wk < rk)))
            seen.append(And(we.in_part(wpart, 0), we.guard(wpart, wk, 0), earlier))
        cases.append(And(runs, Not(Or(seen))))
    f = And(*enc.domain(), Or(cases))
    s = z3.SimpleSolver()
    s.set("timeout", max(1, int(time_limit * 1000)))
    s.add(f)
    r = s.check()
    status = "proven" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"
    ref = None
    reason = ""
    if status == "refuted":
        m = _smallest(s, enc.T, prog.min_trip_count)
        T = m.eval(enc.T, model_completion=True).as_long()
        j = m.eval(enc.j, model_completion=True).as_long()
        stage = prog.op(o.op).stage
        reason = (f"once: with n = {T}, warp group {o.role} step {j}: {o.op}({j - stage}) reads {o.buffer} with no "
                  f"earlier try_wait on {o.barrier}[0] phase 0: this fails: {desc}")
        ref = Refutation("once", oid, o.role, j - stage, o.barrier, 0, 0, T, reason)
    elif status == "unknown":
        reason = f"solver returned unknown ({s.reason_unknown()}) within {time_limit:g} s"
    return ObligationResult(oid, "once", None, None, "body", desc, status, time.perf_counter() - t0,
                            reason=reason), ref


__all__ = ["verify_attention", "AttentionReport", "Refutation", "barrier_program", "hops_for", "REGISTER_KINDS"]

"""Lowering a solved FlashAttention-forward schedule to a Hopper program (docs/attention.md).

Input: the loop body (:func:`synth.model.ws_bodies.attention_body`, or any :class:`~synth.model.ws_body.WsBody` of
the same shape: TMA copies, wgmma ops, synchronous ops on the consumers' pipes) and its
:class:`~synth.model.ws_schedule.WsSchedule` (``solve_ws``): a producer warp group, ``C`` consumer warp groups,
staggered (the ping-pong order) or in lockstep, each op's stage and start, the rings' depths, the register
buffers' copies. Output: an :class:`AttentionProgram`: a :class:`~synth.hopper.ir.HopperProgram` whose trip count
is the symbol ``n``, the number of KV blocks, for every ``n >= 0`` (``min_trip_count`` 0: a causal CTA whose
blocks are all masked runs none), and what the proof needs beside it (the reads of the once-loaded Q).

The program (every barrier an mbarrier of the IR):

* ``full_Q`` (1 slot, count 1): the producer's ``arrive.expect_tx`` and TMA ``load_Q`` at block 0 only (guard
  ``i < 1``; the op's ``when`` is ``i < 1``); each consumer's ``try_wait`` on it at its step 0, before its first
  ``qk``. Q is read by every ``qk`` but is not a ring: those reads are not listed in the op statements (a version
  that is not the step plus a constant is outside the prover's encoding); the proof's ``once`` class covers them.
* ``full_X`` / ``empty_X`` for each ring ``X`` (``K_s``, ``V_s``) of the schedule's depth ``D_X``: the producer's
  body (extent ``n``, or ``n + L_p min(n, 1)`` when a copy's start lies ``L_p`` steps on), each copy of stage ``s``
  for block ``i - s``: ``try_wait empty_X (i - s, D_X, phase 1)``, ``arrive.expect_tx full_X``, the copy;
  ``empty_X`` is initialized with ``C`` (each consumer warp group releases each slot).
* Each consumer warp group is a role of its own (``consumer0`` ..), one warp group of 128 threads, its wgmma ops
  collective. Its body has extent ``n + L min(n, 1)`` (``L``: the last stage): step ``i`` runs each op of stage
  ``s`` for block ``i - s`` (guards ``s <= i`` and ``i < n + s``), in the order of the ops' starts in the
  schedule's step (their offset ``start - stage II``); before the first reader of a ring slot its ``try_wait full``;
  after each wgmma its ``commit_group``; each wgmma's ``wait_group`` where the schedule put it (``wait_start``),
  counting the groups the warp group committed since (an expression in ``i`` and ``n`` where an issue between is
  guarded), followed by the release (``arrive empty``) of the shared slots that wgmma read.
* Staggered consumers: one-slot ``order0`` .. ``order{C-1}`` (count 1), the ping-pong order: consumer ``w`` waits on
  ``order{w}`` before the first wgmma it issues in a step (consumer 0 not in its first step) and, after the last
  wgmma of the step is committed, arrives on ``order{w + 1 mod C}``: the consumers issue their wgmmas in turns
  ``0, 1, .., C - 1, 0, ..`` (FA3's warp scheduler barrier, as mbarriers: the IR's named barrier is a warp-group
  convergence point only). Every step of a staggered consumer issues a wgmma (checked), so turn ``i`` is step
  ``i``. Lockstep consumers (``coop``) have no order barrier.
* Register buffers (``S``, ``P``, ``O``, ``m``, ``l``, ``corr``) have the schedule's copies as multiplicity (1 for
  a carried one); an op of block ``b`` writes version ``b`` and reads the same iteration's version ``b`` (its last
  writer before it) or, for a carried read, version ``b - 1`` (the body's last writer). A buffer the schedule
  keeps in another's registers (an ``alias`` given no copies: P in S) is accessed as that buffer.

Pure; ValueError on a schedule outside this form (alternating consumers, a staggered step without a wgmma, no
producer warp group).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ..completion import (ArriveStmt, Barrier, BarrierRef, FenceStmt, InitStmt, InvalStmt, PipelineState,
                          TryWaitStmt, Tx)
from ..expr import Expr, Num, Var, parse, simplify, substitute, to_str
from ..hopper.ir import HopperProgram, Role
from ..model.ws_body import WsBody
from ..model.ws_schedule import WsSchedule, last_writer
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from .barriers import WARPGROUP_THREADS

TRIP = "n"
"""The trip count symbol: KV blocks of the CTA's Q tile (0 when a causal mask leaves none)."""
VAR = "i"
ONCE_PREFIX = "load_"


@dataclass(frozen=True)
class OnceRead:
    """An op of a consumer role reading a buffer loaded once before the loop (Q): the op's every instance must come
    after the role's ``try_wait`` on ``barrier`` (slot 0, phase 0), the phase the load completes on."""

    role: str
    op: str
    buffer: str
    barrier: str
    load: str


@dataclass(frozen=True)
class AttentionProgram:
    """A lowered attention schedule: the Hopper program and what its proof needs beside it."""

    program: HopperProgram
    consumers: tuple[str, ...]
    """The consumer roles, ``consumer0`` ..; their order is the ping-pong turn order."""
    order: tuple[str, ...]
    """The order barriers (``order{w}``: what consumer ``w`` waits on), empty when the consumers are in lockstep."""
    once: tuple[OnceRead, ...]
    registers: tuple[str, ...]
    """The register buffers (their hazards: the ``register`` class of the proof)."""
    rings: tuple[tuple[str, int], ...]
    """``(shared buffer, slots)``."""
    stages: int
    """``L``: the last consumer stage (a consumer runs ``n + L`` steps when ``n >= 1``)."""
    design: str

    def with_program(self, p: HopperProgram) -> "AttentionProgram":
        """The same lowering with the program replaced (mutants)."""
        return replace(self, program=p)


def _extent(last: int) -> Expr:
    """``n + last min(n, 1)``: the steps of a role whose ops span stages ``0 .. last`` (none when ``n = 0``)."""
    if not last:
        return Var(TRIP)
    return parse(f"{TRIP} + " + (f"{last} * " if last > 1 else "") + f"min({TRIP}, 1)")


def _guard(stage: int, last: int) -> Optional[Expr]:
    """Block ``i - stage`` exists: ``stage <= i`` and ``i - stage < n`` (implied when ``stage`` is the last stage:
    the extent is ``n + last``)."""
    conds = []
    if stage > 0:
        conds.append(f"{stage} <= {VAR}")
    if stage < last:
        conds.append(f"{VAR} < {TRIP} + {stage}" if stage else f"{VAR} < {TRIP}")
    return parse(" && ".join(conds)) if conds else None


def _block(stage: int) -> Expr:
    return simplify(parse(f"{VAR} - {stage}"))


def _and(*gs: Optional[Expr]) -> Optional[Expr]:
    parts = [g for g in gs if g is not None]
    if not parts:
        return None
    return parse(" && ".join(f"({to_str(g)})" for g in parts))


@dataclass(frozen=True)
class _Event:
    t: int
    rank: int
    """At equal offsets: a wgmma wait (0) before an op (1)."""
    order: int
    kind: str
    """``op`` or ``wait``."""
    op: str
    stage: int


def _events(body: WsBody, sched: WsSchedule) -> list[_Event]:
    ii = sched.ii
    out = []
    for k, o in enumerate(body.ops):
        if o.is_copy:
            continue
        pl = sched.op(o.name)
        out.append(_Event(pl.start - pl.stage * ii, 1, k, "op", o.name, pl.stage))
        if o.is_wgmma:
            if pl.wait_start is None:
                raise ValueError(f"wgmma {o.name} has no wait in the schedule")
            ws = pl.wait_start // ii
            out.append(_Event(pl.wait_start - ws * ii, 0, k, "wait", o.name, ws))
    return sorted(out, key=lambda e: (e.t, e.rank, e.order))


def lower_attention(body: WsBody, sched: WsSchedule, *, name: Optional[str] = None) -> AttentionProgram:
    """The Hopper program of ``sched`` (module docstring). ValueError on a schedule outside its form."""
    if not sched.producer:
        raise ValueError("the attention program has a producer warp group (the schedule has none)")
    if sched.mode == "alternate":
        raise ValueError("alternating consumers keep no carried state: not an attention schedule")
    C = sched.consumers
    staggered = sched.mode == "stagger" and C > 1

    i = Var(VAR)
    depth = dict(sched.depth)
    copies = dict(sched.copies)
    copy_ops = [o for o in body.ops if o.is_copy]
    comp_ops = [o for o in body.ops if not o.is_copy]
    wgmmas = [o.name for o in comp_ops if o.is_wgmma]
    events = _events(body, sched)
    last = max(e.stage for e in events)
    wg_stages = {sched.op(w).stage for w in wgmmas}
    if staggered and wg_stages != set(range(last + 1)):
        raise ValueError(f"the wgmma ops' stages {sorted(wg_stages)} do not cover every step 0 .. {last}: a step "
                         "without a wgmma has no ping-pong turn")
    ring_of = {}  # TMA op -> the ring buffer it fills
    for o in copy_ops:
        if len(o.writes) != 1 or body.buffer(o.writes[0]).space != "smem":
            raise ValueError(f"copy {o.name} must write one shared ring")
        ring_of[o.name] = o.writes[0]
    filler = {b: op for op, b in ring_of.items()}

    def idx_of(op: str) -> int:
        return next(k for k, o in enumerate(body.ops) if o.name == op)
    once_bufs = [b for b in body.buffers if b.space == "smem" and b.once]
    # a register buffer written into another's registers (the schedule gave it no copies: P in S) is that buffer
    home = {b.name: (b.alias if b.space == "reg" and b.alias and copies.get(b.name, 1) == 0 else b.name)
            for b in body.buffers}
    regs = [b for b in body.buffers if b.space == "reg" and home[b.name] == b.name]

    # ---- declarations
    ops = [ProgOp(f"{ONCE_PREFIX}{b.name.split('_')[0]}", "tma", 0, True, None, f"{VAR} < 1") for b in once_bufs]
    pstage = {o.name: sched.op(o.name).stage for o in copy_ops}
    plast = max(pstage.values(), default=0)
    ops += [ProgOp(o.name, "tma", pstage[o.name], True, None, None) for o in copy_ops]
    ops += [ProgOp(o.name, "wgmma" if o.is_wgmma else o.unit, sched.op(o.name).stage, o.is_wgmma,
                   0 if o.is_wgmma else None, None) for o in comp_ops]
    ops_t = tuple(ops)
    buffers = [ProgBuffer(b.name, "shared", 1, b.size) for b in once_bufs]
    buffers += [ProgBuffer(b, "shared", depth[b], body.buffer(b).size) for b in filler]
    buffers += [ProgBuffer(b.name, "register", 1 if b.carried else copies.get(b.name, 1), b.size * 4 * 128)
                for b in regs]
    bufs_t = tuple(buffers)
    mult = {b.name: b.multiplicity for b in buffers}
    once_load = {b.name: f"{ONCE_PREFIX}{b.name.split('_')[0]}" for b in once_bufs}
    once_bar = {b.name: f"full_{b.name.split('_')[0]}" for b in once_bufs}
    barriers = [Barrier(once_bar[b.name], 1, 1, "full", (b.name,)) for b in once_bufs]
    for b in filler:
        tag = b.split("_")[0]
        barriers += [Barrier(f"full_{tag}", depth[b], 1, "full", (b,)),
                     Barrier(f"empty_{tag}", depth[b], C, "empty", (b,))]
    order = tuple(f"order{w}" for w in range(C)) if staggered else ()
    barriers += [Barrier(o, 1, 1, "full", ()) for o in order]
    full = {b: f"full_{b.split('_')[0]}" for b in filler}
    empty = {b: f"empty_{b.split('_')[0]}" for b in filler}

    # ---- the producer: Q once, then each ring's copy of block i
    prod: list = []
    for b in once_bufs:
        g = parse(f"{VAR} < 1")
        st = PipelineState(i, 1, 0)
        prod += [ArriveStmt(once_bar[b.name], st, 1, (Tx(b.size),), g),
                 OpStmt(once_load[b.name], i, None, None, (), (Access(b.name, i, Num(0)),),
                        BarrierRef(once_bar[b.name], st, b.size))]
    # a copy of stage s (its start in the schedule's step s) loads block i - s at the producer's step i
    for o in sorted(copy_ops, key=lambda o: (sched.op(o.name).start - pstage[o.name] * sched.ii, idx_of(o.name))):
        b = ring_of[o.name]
        D = depth[b]
        st = pstage[o.name]
        blk = _block(st)
        g = _guard(st, plast)
        slot = simplify(parse(f"({VAR} - {st}) % {D}"))
        prod += [TryWaitStmt(empty[b], PipelineState(blk, D, 1), g),
                 ArriveStmt(full[b], PipelineState(blk, D, 0), 1, (Tx(body.buffer(b).size),), g),
                 OpStmt(o.name, blk, g, None, (), (Access(b, blk, slot),),
                        BarrierRef(full[b], PipelineState(blk, D, 0), body.buffer(b).size))]
    producer = Program(f"{name or body.name}.producer", VAR, TRIP, 0, plast, ops_t, bufs_t, (),
                       (Part("body", VAR, _extent(plast), tuple(prod)),), ())

    # ---- the consumers' step
    extent = _extent(last)
    idx = {o.name: k for k, o in enumerate(body.ops)}

    def accesses(o, stage: int):
        blk = _block(stage)
        reads, writes = [], []
        for bname in o.reads:
            buf = body.buffer(bname)
            if buf.once:
                continue  # the once class covers it (module docstring)
            if buf.space == "smem":
                sl = simplify(parse(f"({VAR} - {stage}) % {mult[bname]}"))
                reads.append(Access(bname, blk, sl, filler[bname]))
            else:
                w = last_writer(body, bname, idx[o.name])
                h = home[bname]
                sl = simplify(parse(f"({VAR} - {stage}) % {mult[h]}"))
                reads.append(Access(h, blk, sl, body.ops[w].name))
        for bname in o.reads_prev:
            w = last_writer(body, bname, None)
            h = home[bname]
            v = _block(stage + 1)
            sl = simplify(parse(f"({VAR} - {stage + 1}) % {mult[h]}"))
            reads.append(Access(h, v, sl, body.ops[w].name))
        for bname in o.writes:
            h = home[bname]
            sl = simplify(parse(f"({VAR} - {stage}) % {mult[h]}"))
            writes.append(Access(h, blk, sl))
        return tuple(reads), tuple(writes)

    def consumer(w: int) -> Role:
        stmts: list = []
        waits: list[Wait] = []
        first_wg = next(k for k, e in enumerate(events) if e.kind == "op" and e.op in wgmmas)
        last_wg = max(k for k, e in enumerate(events) if e.kind == "op" and e.op in wgmmas)
        waited: set = set()
        group = 0
        for k, e in enumerate(events):
            o = body.op(e.op)
            g = _guard(e.stage, last)
            if e.kind == "op":
                # data waits before the first reader of a slot in the step
                for bname in o.reads:
                    buf = body.buffer(bname)
                    if buf.space != "smem":
                        continue
                    if buf.once:
                        if bname not in waited:
                            waited.add(bname)
                            stmts.append(TryWaitStmt(once_bar[bname], PipelineState(i, 1, 0), parse(f"{VAR} < 1")))
                        continue
                    if (bname, e.stage) in waited:
                        continue
                    waited.add((bname, e.stage))
                    stmts.append(TryWaitStmt(full[bname], PipelineState(_block(e.stage), depth[bname], 0), g))
                if order and k == first_wg:
                    if w == 0:
                        stmts.append(TryWaitStmt(order[0], PipelineState(simplify(parse(f"{VAR} - 1")), 1, 0),
                                                 parse(f"1 <= {VAR}")))
                    else:
                        stmts.append(TryWaitStmt(order[w], PipelineState(i, 1, 0)))
                reads, writes = accesses(o, e.stage)
                if o.is_wgmma:
                    stmts.append(OpStmt(o.name, _block(e.stage), g, group, reads, writes))
                    stmts.append(CommitStmt(0, group, g))
                    group += 1
                else:
                    stmts.append(OpStmt(o.name, _block(e.stage), g, None, reads, writes))
                if order and k == last_wg:
                    stmts.append(ArriveStmt(order[(w + 1) % C], PipelineState(i, 1, 0), 1, (), None, elected=True))
            else:
                # the wgmma's wait: the groups committed after it, up to here
                count = _in_flight(events, e, sched.op(e.op).stage, last)
                part_wait = len(waits)
                waits.append(Wait("body", 0, count, e.op,
                                  reason=f"{e.op}'s group complete: its results are read and its shared "
                                         f"operands released after it"))
                stmts.append(WaitStmt(part_wait, g))
                blk = _block(e.stage)
                for bname in o.reads:
                    buf = body.buffer(bname)
                    if buf.space == "smem" and not buf.once:
                        stmts.append(ArriveStmt(empty[bname], PipelineState(blk, depth[bname], 0), 1, (), g,
                                                elected=True))
        prog = Program(f"{name or body.name}.consumer{w}", VAR, TRIP, 0, last, ops_t, bufs_t, ("wgmma",),
                       (Part("body", VAR, extent, tuple(stmts)),), tuple(waits))
        return Role(f"consumer{w}", 1, prog, threads=WARPGROUP_THREADS, collective=tuple(wgmmas))

    roles = (Role("producer", 1, producer, threads=1),) + tuple(consumer(w) for w in range(C))
    setup = tuple(InitStmt(b.name) for b in barriers) + (FenceStmt("mbarrier_init"),)
    teardown = tuple(InvalStmt(b.name) for b in barriers)
    notes = (f"attention forward: producer + {C} consumer warp group(s), {sched.design}, II {sched.ii}, rings "
             + ", ".join(f"{b} {depth[b]}" for b in filler) + f"; KV blocks n >= 0 (symbolic), {last + 1} stage(s)",)
    p = HopperProgram(name or body.name, VAR, TRIP, 0, ops_t, bufs_t, tuple(barriers), setup, roles, teardown, notes)
    once = tuple(OnceRead(f"consumer{w}", o.name, b, once_bar[b], once_load[b])
                 for w in range(C) for o in comp_ops for b in o.reads if b in once_bar)
    return AttentionProgram(p, tuple(f"consumer{w}" for w in range(C)), order, once, tuple(b.name for b in regs),
                            tuple((b, depth[b]) for b in filler), last, sched.design)


def _in_flight(events: list[_Event], wait: _Event, stage: int, last: int) -> Expr:
    """The groups a warp group commits after the wgmma ``wait.op`` (issued at stage ``stage``) and before its wait
    (at stage ``wait.stage``), as an expression in the wait's step ``i``: each wgmma issue between counts 1 where
    its guard holds."""
    issue = next(e for e in events if e.kind == "op" and e.op == wait.op)
    key_w = (wait.stage, wait.t, wait.rank, wait.order)
    key_i = (stage, issue.t, issue.rank, issue.order)
    terms: list[str] = []
    for s_off in range(stage, wait.stage + 1):
        for e in events:
            if e.kind != "op" or e.op == wait.op and s_off == stage:
                continue
            k = (s_off, e.t, e.rank, e.order)
            if not key_i < k < key_w:
                continue
            if not _is_wgmma_event(events, e):
                continue
            # the event runs at step (i - wait.stage + s_off) for block (that step - e.stage)
            shift = wait.stage - s_off
            g = _guard(e.stage, last)
            if g is None:
                terms.append("1")
            else:
                gs = substitute(g, {VAR: parse(f"{VAR} - {shift}")}) if shift else g
                terms.append(f"(({to_str(gs)}) ? 1 : 0)")
    return simplify(parse(" + ".join(terms))) if terms else Num(0)


def _is_wgmma_event(events: list[_Event], e: _Event) -> bool:
    return any(x.kind == "wait" and x.op == e.op for x in events)


MUTANTS = {
    "softmax_before_wait": "consumer0's wait_group for qk (and the K release after it) moved to the end of its "
                           "step: rowmax and scale read S while qk's wgmma group may still be writing it",
    "rescale_races_pv": "consumer0's rescale of O moved after the pv issue: it scales O while the pv wgmma that "
                        "reads and accumulates the old O is in flight",
    "v_released_early": "consumer0 releases the V slot (arrive empty_V) right after issuing pv, before the "
                        "wait_group that completes it: the producer may refill the slot pv still reads",
    "order_wrong_parity": "consumer1 waits on order1 with the parity of turn i + 1",
    "q_load_before_exit": "the producer issues Q's arrive.expect_tx and copy before the loop, unconditionally, while "
                          "the consumers' causal early exit (n = 0 KV blocks) never waits on full_Q: phase 0 "
                          "completes unobserved and the copy may land after mbarrier.inval",
}
"""The attention program's bug table (docs/attention.md), each a change of a lowered program
(:func:`attention_mutant`)."""


def _body_edit(p: HopperProgram, role: str, fn) -> HopperProgram:
    prog = p.role(role).program
    parts = tuple(replace(pt, stmts=tuple(fn(list(pt.stmts)))) if pt.name == "body" else pt for pt in prog.parts)
    return p.with_role(role, replace(prog, parts=parts))


def _index(stmts: list, pred) -> int:
    return next(k for k, s in enumerate(stmts) if pred(s))


def _wait_of(prog: Program, op: str):
    return lambda s: isinstance(s, WaitStmt) and prog.waits[s.wait].before == op


def attention_mutant(ap: AttentionProgram, name: str, *, qk: str = "qk", pv: str = "pv",
                     rescale: str = "rescale_O") -> AttentionProgram:
    """``ap`` with bug ``name`` of :data:`MUTANTS` (KeyError for another name; ValueError where it does not apply:
    ``order_wrong_parity`` needs staggered consumers)."""
    if name not in MUTANTS:
        raise KeyError(name)
    p = ap.program
    c0 = ap.consumers[0]
    prog = p.role(c0).program
    if name == "softmax_before_wait":
        def fn(st):
            k = _index(st, _wait_of(prog, qk))
            moved = [st[k]]
            while k + len(moved) < len(st) and isinstance(st[k + len(moved)], ArriveStmt):
                moved.append(st[k + len(moved)])
            return st[:k] + st[k + len(moved):] + moved
        return ap.with_program(_body_edit(p, c0, fn))
    if name == "rescale_races_pv":
        def fn(st):
            r = _index(st, lambda s: isinstance(s, OpStmt) and s.op == rescale)
            x = st.pop(r)
            c = _index(st, lambda s: isinstance(s, OpStmt) and s.op == pv) + 1  # pv's commit
            return st[:c + 1] + [x] + st[c + 1:]
        return ap.with_program(_body_edit(p, c0, fn))
    if name == "v_released_early":
        def fn(st):
            w = _index(st, _wait_of(prog, pv))
            a = st.pop(w + 1)
            c = _index(st, lambda s: isinstance(s, OpStmt) and s.op == pv) + 1
            return st[:c + 1] + [a] + st[c + 1:]
        return ap.with_program(_body_edit(p, c0, fn))
    if name == "order_wrong_parity":
        if len(ap.order) < 2:
            raise ValueError("order_wrong_parity: the consumers are not staggered")
        bar = ap.order[1]

        def fn(st):
            k = _index(st, lambda s: isinstance(s, TryWaitStmt) and s.barrier == bar)
            s = st[k]
            st[k] = replace(s, state=replace(s.state, count=simplify(parse(f"{to_str(s.state.count)} + 1"))))
            return st
        return ap.with_program(_body_edit(p, ap.consumers[1], fn))
    # q_load_before_exit: the producer's loop runs at least once (extent max(its extent, 1)); its once-loads keep
    # their guard i < 1, every other statement is guarded 1 <= n too: at n = 0 it loads Q and nothing else
    once_bars = {o.barrier for o in ap.once}
    once_loads = {o.load for o in ap.once}
    prod = p.role("producer").program
    body = prod.part("body")

    def is_once(s) -> bool:
        return (isinstance(s, ArriveStmt) and s.barrier in once_bars) or (isinstance(s, OpStmt) and s.op in once_loads)
    stmts = tuple(s if is_once(s) else replace(s, guard=_and(s.guard, parse(f"1 <= {TRIP}"))) for s in body.stmts)
    new_body = replace(body, extent=parse(f"max({to_str(body.extent)}, 1)"), stmts=stmts)
    return ap.with_program(p.with_role("producer", replace(prod, parts=(new_body,))))


__all__ = ["lower_attention", "attention_mutant", "AttentionProgram", "OnceRead", "TRIP", "MUTANTS"]

"""Step 6 of the lowering: assembly of the program.

Input: the context, the kept waits and the dropped ones. Output: the
:class:`~synth.program.Program`: statements of each part (ops with guards, buffer
accesses with versions and slots, commits, waits), the program's waits, and notes
(predicates, dropped waits, slot counts).
"""

from __future__ import annotations

from typing import Optional

from ..expr import Bin, Expr, Num, Var, evaluate, free_vars, simplify, to_str
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Stmt, Wait, WaitStmt
from ..schedule import multiplicity
from .exprs import FALSE, norm, add_e, sub_e, aff_expr
from .context import PartInfo, Context
from .requirements import Req, producer_edges, req_text
from .counts import WaitKey, WaitPlan
from .implied import Cover


def _iteration(ctx: Context, part: PartInfo, stage: int) -> Expr:
    return aff_expr(simplify(sub_e(add_e(Var(ctx.var), part.offset), Num(stage))), ctx.var)


def _access(ctx: Context, part: PartInfo, buf: str, version: Expr, stage: int, producer: Optional[str]) -> Access:
    m = ctx.sched.mult(buf)
    version = aff_expr(simplify(version), ctx.var)
    slot: Expr = Bin("%", version, Num(m))
    if m == 1:
        slot = Num(0)
    else:
        rng = _range(ctx, part, stage, version)
        if rng is not None and 0 <= rng[0] and rng[1] < m:
            slot = Num(rng[0]) if rng[0] == rng[1] else version
    return Access(buf, norm(version), norm(slot), producer)


def _range(ctx: Context, part: PartInfo, stage: int, version: Expr) -> Optional[tuple[int, int]]:
    """Values of ``version`` where a stage-``stage`` op may run in ``part`` (a superset when
    the extent depends on ``T``: every ``i`` below its bound); None if unbounded."""
    g = ctx.guard(part, stage)
    if free_vars(version) - {ctx.var} or part.bound is None or (g is not None and free_vars(g) - {ctx.var}):
        return None
    env_ok = []
    for i in range(part.bound):
        if g is None or evaluate(g, {ctx.var: i}):
            env_ok.append(int(evaluate(version, {ctx.var: i})))
    return (min(env_ok), max(env_ok)) if env_ok else None


def assemble(ctx: Context, waits: dict[WaitKey, WaitPlan],
             dropped: list[tuple[WaitPlan, list[tuple[Req, Cover]]]]) -> Program:
    """The program: each part's statements in body order (ops with guards, accesses, commits,
    the kept waits), its waits, and notes (predicates, dropped waits, slot counts)."""
    p, s = ctx.problem, ctx.sched
    prog_waits: list[Wait] = []
    parts = []
    for part in ctx.parts:
        stmts: list[Stmt] = []
        for posn, o in enumerate(ctx.body):
            guard = ctx.guard(part, s.stage[o])
            if guard == FALSE or part.extent == Num(0):
                continue
            for q in range(len(p.target.async_units)):
                w = waits.get(WaitKey(part.name, posn, q))
                if w is None:
                    continue
                prog_waits.append(Wait(part.name, q, w.count, p.ops[o].name, None, w.reason))
                stmts.append(WaitStmt(len(prog_waits) - 1, w.guard))
            it = _iteration(ctx, part, s.stage[o])
            reads = []
            for buf, a, d in producer_edges(ctx, o):
                reads.append(_access(ctx, part, buf, sub_e(it, Num(d)), s.stage[o], p.ops[a].name))
            writes = [_access(ctx, part, buf, it, s.stage[o], None) for buf in p.ops[o].writes]
            gid = ctx.group_of.get(o)
            stmts.append(OpStmt(p.ops[o].name, it, guard, gid, tuple(reads), tuple(writes)))
            if gid is not None and ctx.groups[gid].last == posn:
                g = ctx.groups[gid]
                stmts.append(CommitStmt(g.queue, gid, guard, tuple(p.ops[x].name for x in g.gate)))
        parts.append(Part(part.name, ctx.var, part.extent, tuple(stmts)))
    notes = list(ctx.notes)
    for w, covers in dropped:
        for r, c in covers:
            assert c is not None
            if c.m == 0:
                continue  # a later statement of the same step under an equal or stricter wait
            by = waits.get(WaitKey(w.key.part, c.pos, r.queue))
            by_name = p.ops[ctx.body[c.pos]].name
            when = "one iteration earlier" if c.m == 1 else f"{c.m} iterations earlier"
            cnt = to_str(by.count) if by is not None else "?"
            notes.append(f"{w.key.part}: no async_wait_queue({r.queue}, {to_str(w.count)}) before "
                         f"{p.ops[w.op].name}: {req_text(ctx, r)} is already complete after "
                         f"async_wait_queue({r.queue}, {cnt}) before {by_name} {when}")
    notes += _slot_notes(ctx)
    return Program(
        name=p.name, loop_var=p.loop.var, trip_count=p.loop.trip_count, min_trip_count=p.loop.min_trip_count,
        max_stage=ctx.S,
        ops=tuple(ProgOp(o.name, o.unit, s.stage[k], s.is_async[k], s.queue[k],
                         None if o.when is None else o.when.text, o.latency) for k, o in enumerate(p.ops)),
        buffers=tuple(ProgBuffer(b.name, b.space, s.mult(b.name), b.bytes) for b in p.buffers),
        queues=tuple(p.target.async_units),
        parts=tuple(parts), waits=tuple(prog_waits), notes=tuple(dict.fromkeys(notes)))


def _slot_notes(ctx: Context) -> list[str]:
    """Buffers given an extra slot because an async op reads them."""
    p, s = ctx.problem, ctx.sched
    sync_need = dict(multiplicity(p, ctx.graph, s.stage, s.order))
    out = []
    for b in p.buffers:
        if b.carried:
            continue
        readers = [r for r in range(len(p.ops)) if s.is_async[r] and b.name in p.ops[r].reads]
        if readers and s.mult(b.name) > sync_need[b.name]:
            names = ", ".join(p.ops[r].name for r in readers)
            out.append(f"{b.name} has {s.mult(b.name)} slots: {names} reads it asynchronously, so a slot stays "
                       f"busy until that group completes (one slot more than a synchronous reader needs)")
    return out

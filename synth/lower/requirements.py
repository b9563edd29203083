"""Step 3 of the lowering: requirements, and their wording in wait reasons.

Input: the lowering context. Output: every group instance (:class:`Req`) that must
be complete before a statement runs: reads (and explicit deps) of async results
(RAW), and slots an async reader may still be reading when a writer reuses them
(WAR/WAW); raises :class:`SynthError` when a buffer has too few slots.
:func:`req_text` and :func:`reason` describe requirements in program notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import SynthError
from ..expr import Expr, to_str
from .context import Context


@dataclass(frozen=True)
class Req:
    """A group instance that must be complete before a statement runs (see the module docstring)."""

    kind: str
    """raw | dep | war | waw"""
    op: int
    """The statement's op: a consumer (raw, dep) or a writer reusing a slot (war)."""
    queue: int
    group: int
    """The awaited group: the producer's (raw, dep) or the async reader's (war)."""
    delta: int
    """The awaited instance was committed in step ``J - delta``."""
    other: int
    """Producer (raw, dep) or async reader (war)."""
    buffer: Optional[str] = None
    distance: int = 0
    """raw: the read's iteration distance; war: the overwritten version's distance."""


def producer_edges(ctx: Context, op: int) -> list[tuple[str, int, int]]:
    """``(buffer, producer, distance)`` of each buffer ``op`` reads: the last writer
    before it in program order (distance 0), else the last writer (distance 1)."""
    p = ctx.problem
    out = []
    for buf in p.ops[op].reads:
        writers = [w for w, o in enumerate(p.ops) if buf in o.writes]
        before = [w for w in writers if w < op]
        if before:
            out.append((buf, before[-1], 0))
        elif writers:
            out.append((buf, writers[-1], 1))
    return out


def requirements(ctx: Context) -> list[Req]:
    """Group instances that must be complete before a statement (RAW, explicit deps, WAR)."""
    p, s = ctx.problem, ctx.sched
    out: list[Req] = []
    for b in range(len(p.ops)):
        for buf, a, d in producer_edges(ctx, b):
            if s.is_async[a]:
                out.append(_req(ctx, "raw", b, a, s.stage[b] + d - s.stage[a], buf, d))
    for e in ctx.graph.edges:
        if e.kind == "explicit" and s.is_async[e.src]:
            out.append(_req(ctx, "dep", e.dst, e.src, s.stage[e.dst] + e.distance - s.stage[e.src], None,
                            e.distance))
    # WAR: a writer of x reusing the slot of version v - M, which an async reader R read at
    # iteration v - M + d_R in step v - M + d_R + s_R: R's group must be complete.
    for r in range(len(p.ops)):
        for buf, a, d in producer_edges(ctx, r):
            m = s.mult(buf)
            for w in (w for w, o in enumerate(p.ops) if buf in o.writes):
                delta = s.stage[w] + m - d - s.stage[r]
                if s.is_async[r] and r != w:
                    out.append(_req(ctx, "war", w, r, delta, buf, d))
                elif delta < 0 or (delta == 0 and ctx.pos[r] > ctx.pos[w]):
                    _too_few_slots(ctx, buf, w, r)
    # WAW: a buffer nobody reads has no read whose wait completes an async write before the
    # next write of its slot (version v - M), so that older write could land last.
    read = {buf for o in p.ops for buf in o.reads}
    for buf in (b.name for b in p.buffers if b.name not in read):
        m = s.mult(buf)
        writers = [w for w, o in enumerate(p.ops) if buf in o.writes]
        for w0 in (w for w in writers if s.is_async[w]):
            for w in writers:
                out.append(_req(ctx, "waw", w, w0, s.stage[w] + m - s.stage[w0], buf, 0))
    return list(dict.fromkeys(out))


def _req(ctx: Context, kind: str, op: int, other: int, delta: int, buf: Optional[str], d: int) -> Req:
    g = ctx.groups[ctx.group_of[other]]
    if delta < 0 or (delta == 0 and g.last >= ctx.pos[op]):
        if kind in ("war", "waw"):
            _too_few_slots(ctx, buf or "", op, other)
        p = ctx.problem
        raise SynthError(p.ops[op].loc, f"{p.ops[op].name} needs the result of async {p.ops[other].name} "
                         f"before its group is committed (stage {ctx.sched.stage[op]} vs "
                         f"{ctx.sched.stage[other]})",
                         f"give {p.ops[op].name} a later stage or order it after {p.ops[other].name}")
    return Req(kind, op, g.queue, g.gid, delta, other, buf, d)


def _too_few_slots(ctx: Context, buf: str, writer: int, reader: int) -> None:
    p = ctx.problem
    raise SynthError(p.buffer(buf).loc, f"buffer {buf} has {ctx.sched.mult(buf)} slots, so "
                     f"{p.ops[writer].name} overwrites a version {p.ops[reader].name} still reads",
                     "use the multiplicity synth.schedule.multiplicity computes for this schedule")


def req_text(ctx: Context, r: Req) -> str:
    """What ``r`` waits for, as a phrase (``load_A's write of A_s read by s2r_A``)."""
    p = ctx.problem
    a, b = p.ops[r.other].name, p.ops[r.op].name
    if r.kind == "raw":
        return f"{a}'s write of {r.buffer} read by {b}"
    if r.kind == "dep":
        return f"{a}, which {b} depends on,"
    if r.kind == "waw":
        return f"{a}'s earlier asynchronous write of the {r.buffer} slot {b} overwrites"
    return f"{a}'s asynchronous read of the {r.buffer} slot {b} overwrites"


def reason(ctx: Context, reqs: list[Req], count: Expr) -> str:
    """The ``reason`` of a wait with count ``count`` serving ``reqs`` (one queue)."""
    p = ctx.problem
    parts = []
    for r in reqs:
        g = ctx.groups[r.group]
        a, b = p.ops[r.other].name, p.ops[r.op].name
        steps = "in the same step" if r.delta == 0 else (
            "one step earlier" if r.delta == 1 else f"{r.delta} steps earlier")
        if r.kind == "raw":
            what = f"{b} reads {r.buffer} written by async {a} (queue {g.queue}, committed {steps})"
        elif r.kind == "dep":
            what = f"{b} depends on async {a} (queue {g.queue}, committed {steps})"
        elif r.kind == "waw":
            what = (f"{b} overwrites the {r.buffer} slot that async {a} wrote (queue {g.queue}, "
                    f"committed {steps}) and nobody reads")
        else:
            what = (f"{b} overwrites the {r.buffer} slot that async {a} read (queue {g.queue}, "
                    f"committed {steps})")
        parts.append(what)
    tail = (f"; {to_str(count)} = the groups of queue {reqs[0].queue} committed after it by this point"
            + (" (the least over these reads)" if len(reqs) > 1 else ""))
    return "; ".join(parts) + tail

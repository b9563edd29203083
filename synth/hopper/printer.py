"""``program.txt`` of a Hopper program: barriers, setup, each role's parts, teardown.

Parities, slot indices and expected bytes are printed as derived from each statement's
:class:`~synth.completion.PipelineState` (they are never stored): ``try_wait.parity
empty[i % 4], (i / 4 + 1) % 2``.
"""

from __future__ import annotations

from ..completion import ArriveStmt, BarSyncStmt, FenceStmt, InitStmt, InvalStmt, TryWaitStmt
from ..expr import as_affine, evaluate, free_vars, to_str
from ..program import CommitStmt, OpStmt, WaitStmt
from .ir import HopperProgram


def wait_count(part, e) -> str:
    """How ``wgmma.wait_group`` prints its count ``e`` in ``part``: the one value when every iteration of a
    constant-extent part gives the same (``-i`` over ``range(1)`` is ``0``), else the expression with its
    constant first (``1 - i``, not ``-i + 1``)."""
    if part is not None and not free_vars(part.extent) and free_vars(e) <= {part.var}:
        n = evaluate(part.extent, {})
        if 1 <= n <= 64:
            values = {evaluate(e, {part.var: i}) for i in range(n)}
            if len(values) == 1:
                return str(values.pop())
    lin = as_affine(e)
    if lin is not None and len(lin[0]) == 1:
        (var, a), c = next(iter(lin[0].items())), lin[1]
        if a < 0 < c:
            return f"{c} - {var}" if a == -1 else f"{c} - {-a} * {var}"
    return to_str(e)


def _stmt(p: HopperProgram, role, s, part=None) -> str:
    if isinstance(s, TryWaitStmt):
        return f"try_wait.parity {s.barrier}[{to_str(s.state.index())}], {to_str(s.state.parity())}"
    if isinstance(s, ArriveStmt):
        tx = " + ".join(str(t.bytes) if t.gate is None else f"({t.gate} ? {t.bytes} : 0)" for t in s.tx)
        what = ("arrive.expect_tx" if s.arrivals else "expect_tx") if s.tx else "arrive"
        n = f" x{s.arrivals}" if s.arrivals > 1 else ""
        who = "  (one elected thread)" if role is not None and role.threads > 1 and s.elected else ""
        return f"{what}{n} {s.barrier}[{to_str(s.state.index())}]" + (f", {tx} B" if tx else "") + who
    if isinstance(s, OpStmt):
        w = ", ".join(f"{a.buffer}[{to_str(a.slot)}]" for a in s.writes)
        r = ", ".join(f"{a.buffer}[{to_str(a.slot)}]" for a in s.reads)
        io = " ".join(x for x in (f"reads {r}" if r else "", f"writes {w}" if w else "") if x)
        if s.barrier is not None:
            b = s.barrier
            return (f"tma {s.op}({to_str(s.iteration)}) {io}, complete_tx {b.barrier}[{to_str(b.state.index())}] "
                    f"{b.bytes} B")
        unit = role.program.op(s.op).unit
        coll = "  (warp-group collective)" if s.op in role.collective else ""
        return f"{unit} {s.op}({to_str(s.iteration)}) {io}{coll}"
    if isinstance(s, CommitStmt):
        return "wgmma.commit_group"
    if isinstance(s, WaitStmt):
        return f"wgmma.wait_group {wait_count(part, role.program.waits[s.wait].in_flight)}"
    if isinstance(s, FenceStmt):
        return "fence.mbarrier_init" if s.fence == "mbarrier_init" else "fence.proxy.async"
    if isinstance(s, InitStmt):
        b = p.barrier(s.barrier)
        return f"mbarrier.init {s.barrier}[0..{b.slots - 1}], {b.count}"
    if isinstance(s, InvalStmt):
        return f"mbarrier.inval {s.barrier}"
    if getattr(s, "kind", None) == "cluster_sync":
        return "barrier.cluster.arrive.release; barrier.cluster.wait.acquire  (every thread of every CTA)"
    if isinstance(s, BarSyncStmt):
        return f"bar.sync {s.id} + warp group, {role.threads if role is not None else '?'}  (converges the warp group)"
    return repr(s)


def hopper_text(p: HopperProgram) -> str:
    """The program as a person reads it (one statement a line, guards as ``if``)."""
    trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
    lines = [f"# {p.name}: mbarrier protocol, trip count {trip}"]
    lines += [f"# {n}" for n in p.notes]
    for b in p.barriers:
        lines.append(f"barrier {b.name}[{b.slots}] count {b.count} ({b.kind}: {', '.join(b.guards) or '-'})")
    lines.append("setup:")
    lines += [f"  {_stmt(p, None, s)}" for s in p.setup]
    for r in p.roles:
        threads = "one elected thread" if r.threads == 1 else f"{r.threads} threads"
        lines.append(f"role {r.name} ({r.warpgroups} warp group{'s' if r.warpgroups > 1 else ''}, {threads} each):")
        for pt in r.program.parts:
            lines.append(f"  {pt.name}: for {pt.var} in range({to_str(pt.extent)}):")
            for s in pt.stmts:
                g = f"if {to_str(s.guard)}: " if s.guard is not None else ""
                lines.append(f"    {g}{_stmt(p, r, s, pt)}")
    lines.append("teardown:")
    lines += [f"  {_stmt(p, None, s)}" for s in p.teardown]
    return "\n".join(lines) + "\n"


__all__ = ["hopper_text"]

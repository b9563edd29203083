"""Step 2 of the lowering: commit groups and how predicated ops commit.

Input: the lowering context (problem, graph, schedule, body order,
``predicate_strategy``). Output: the list of :class:`_Group` (maximal runs of async
ops of one queue and one stage, adjacent in body order, split where an op needs a
result of its own run), each with its commit gate; appends the predicate notes to
``ctx.notes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from .context import _Ctx


@dataclass(frozen=True)
class _Group:
    gid: int
    queue: int
    stage: int
    ops: tuple[int, ...]
    """Op indices, body order."""
    first: int
    """Body position of the first op."""
    last: int
    """Body position of the last op; the commit follows it."""
    gate: tuple[int, ...]
    """Ops whose predicates gate the commit (empty: committed unconditionally)."""
    counted_gate: bool
    """Whether wait counts account for the gate (False only for ``naive``)."""


def _commit_groups(ctx: _Ctx) -> list[_Group]:
    """Maximal runs of async ops with one queue and one stage, adjacent in body order.

    A run is split before an op that needs (distance 0) a result of an op already in
    the run: a group cannot be awaited before it is committed.
    """
    p, s = ctx.problem, ctx.sched
    deps0: dict[int, set[int]] = {}
    for e in ctx.graph.edges:
        if e.kind in ("raw", "explicit") and e.distance == 0:
            deps0.setdefault(e.dst, set()).add(e.src)
    runs: list[list[int]] = []
    for o in ctx.body:
        if not s.is_async[o]:
            runs.append([])
            continue
        cur = runs[-1] if runs else []
        if (cur and s.queue[cur[0]] == s.queue[o] and s.stage[cur[0]] == s.stage[o]
                and not (deps0.get(o, set()) & set(cur))):
            cur.append(o)
        else:
            runs.append([o])
    groups = []
    for run in runs:
        if not run:
            continue
        whens = [p.ops[o].when for o in run]
        strategy = ctx.strategy
        gate: tuple[int, ...] = ()
        counted = True
        all_pred = all(w is not None for w in whens)
        if strategy == "auto" and all_pred and all(not w.opaque for w in whens):
            gate = tuple(run)
        elif strategy == "naive" and all_pred:
            gate, counted = tuple(run), False
        groups.append(_Group(len(groups), s.queue[run[0]], s.stage[run[0]], tuple(run),
                             ctx.pos[run[0]], ctx.pos[run[-1]], gate, counted))
    _predicate_notes(ctx, groups)
    return groups


def _predicate_notes(ctx: _Ctx, groups: list[_Group]) -> None:
    p = ctx.problem
    for g in groups:
        for o in g.ops:
            w = p.ops[o].when
            if w is None:
                continue
            name = p.ops[o].name
            if not g.gate:
                mixed = "" if w.opaque or ctx.strategy != "auto" else " (its group also holds unpredicated ops)"
                ctx.notes.append(
                    f"{name} is predicated ({w.text}){mixed}: its group is committed on every iteration, "
                    f"empty when {name} is off (CUTLASS's zero-fill idiom), so the wait counts are those "
                    f"of the unpredicated loop")
            elif g.counted_gate:
                ctx.notes.append(
                    f"{name} is predicated ({w.text}): its group is committed only when the predicate "
                    f"holds (as TVM does) and the wait counts count exactly those commits")
            else:
                ctx.notes.append(
                    f"predicate strategy 'naive': {name}'s group is committed only when its predicate "
                    f"({w.text}) holds, but the wait counts assume it is always committed (unsafe)")

"""Step 2 of the lowering: commit groups and how predicated ops commit.

Input: problem, graph, schedule, its body order and ``predicate_strategy``.
Output: the list of :class:`Group` (maximal runs of async ops of one queue and one
stage, adjacent in body order, split where an op needs a result of its own run),
each with its commit gate, and the notes that explain the predicated ones. Pure;
imports nothing from the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Graph
from ..problem import Problem
from ..schedule import Schedule


@dataclass(frozen=True)
class Group:
    """One commit group: async ops of one queue and stage, committed together each step."""

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


def commit_groups(p: Problem, graph: Graph, s: Schedule, strategy: str, body: list[int]
                  ) -> tuple[list[Group], list[str]]:
    """``(groups, notes)``: maximal runs of async ops with one queue and one stage, adjacent
    in the body order ``body`` (op indices), and the notes on predicated ops.

    A run is split before an op that needs (distance 0) a result of an op already in
    the run: a group cannot be awaited before it is committed.
    """
    pos = {o: k for k, o in enumerate(body)}
    deps0: dict[int, set[int]] = {}
    for e in graph.edges:
        if e.kind in ("raw", "explicit") and e.distance == 0:
            deps0.setdefault(e.dst, set()).add(e.src)
    runs: list[list[int]] = []
    for o in body:
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
        gate: tuple[int, ...] = ()
        counted = True
        all_pred = all(w is not None for w in whens)
        if strategy == "auto" and all_pred and all(not w.opaque for w in whens):
            gate = tuple(run)
        elif strategy == "naive" and all_pred:
            gate, counted = tuple(run), False
        groups.append(Group(len(groups), s.queue[run[0]], s.stage[run[0]], tuple(run),
                            pos[run[0]], pos[run[-1]], gate, counted))
    return groups, _predicate_notes(p, strategy, groups)


def _predicate_notes(p: Problem, strategy: str, groups: list[Group]) -> list[str]:
    notes: list[str] = []
    for g in groups:
        for o in g.ops:
            w = p.ops[o].when
            if w is None:
                continue
            name = p.ops[o].name
            if not g.gate:
                mixed = "" if w.opaque or strategy != "auto" else " (its group also holds unpredicated ops)"
                notes.append(
                    f"{name} is predicated ({w.text}){mixed}: its group is committed on every iteration, "
                    f"empty when {name} is off (CUTLASS's zero-fill idiom), so the wait counts are those "
                    f"of the unpredicated loop")
            elif g.counted_gate:
                notes.append(
                    f"{name} is predicated ({w.text}): its group is committed only when the predicate "
                    f"holds (as TVM does) and the wait counts count exactly those commits")
            else:
                notes.append(
                    f"predicate strategy 'naive': {name}'s group is committed only when its predicate "
                    f"({w.text}) holds, but the wait counts assume it is always committed (unsafe)")
    return notes

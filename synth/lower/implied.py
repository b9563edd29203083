"""Step 5 of the lowering: dropping implied waits.

Input: the context and the waits of step 4. Output: the waits kept, and for each
dropped one the kept waits (position, steps back) that cover its requirements: an
earlier wait of the same step, and in the body the previous steps' waits (RFC
0077's remark that ``wait(0, 3)`` is redundant after the previous iteration's
``wait(0, 2)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..expr import Bin, Expr, substitute
from .exprs import FALSE, conj, sub_e
from .context import PartInfo, Context
from .requirements import Req
from .counts import between, count_of, needed, executes, WaitKey, WaitPlan


@dataclass(frozen=True)
class Cover:
    """The kept wait that makes a dropped one redundant: its body position, steps back."""

    pos: int
    m: int
    """Steps back: 0 this step, 1 the previous one..."""


def _covers(ctx: Context, r: Req, part: PartInfo, waits: dict[WaitKey, WaitPlan]) -> Optional[Cover]:
    """A kept wait (position, steps back) that completes ``r``'s awaited instance whenever
    ``r`` is live in ``part``; None if none does alone."""
    own = WaitKey(part.name, ctx.pos[r.op], r.queue)
    if own in waits:
        return Cover(own.pos, 0)
    ga = ctx.groups[r.group]
    hyp = conj(conj(ctx.domain(part), executes(ctx, part, r.op)), needed(ctx, part, r))
    if not ctx.z3.sat(hyp):
        return Cover(own.pos, 0)
    max_m = r.delta if part.name == "body" else 0
    for m in range(0, max_m + 1):
        for pos in sorted({k.pos for k in waits if k.queue == r.queue}):
            if m == 0 and pos >= own.pos:
                continue
            if m == r.delta and pos <= ga.last:
                continue
            n_here = count_of(between(ctx, part, r, m, pos))
            j = ctx.step(part, m)
            alts: Expr = FALSE
            for p2 in ctx.parts:
                w = waits.get(WaitKey(p2.name, pos, r.queue))
                if w is None:
                    continue
                at = {ctx.var: sub_e(j, p2.offset)}
                cond = ctx.in_part(p2, j)
                if w.guard is not None:
                    cond = conj(cond, substitute(w.guard, at))
                cond = conj(cond, Bin(">=", n_here, substitute(w.count, at)))
                alts = cond if alts == FALSE else Bin("||", alts, cond)
            if alts == FALSE:
                continue
            if ctx.z3.valid(hyp, alts):
                return Cover(pos, m)
    return None


def drop_implied(ctx: Context, waits: dict[WaitKey, WaitPlan]
                  ) -> tuple[dict[WaitKey, WaitPlan], list[tuple[WaitPlan, list[tuple[Req, Cover]]]]]:
    """Greedily drop each wait (part order, then body order) whose requirements, and those
    of the waits dropped before it, are all covered by the remaining waits."""
    kept = dict(waits)
    dropped: list[WaitPlan] = []
    cover_of: dict[tuple[int, int], Cover] = {}  # (id of dropped wait, req index) -> its cover
    for key in list(waits):
        trial = {k: v for k, v in kept.items() if k != key}
        found: dict[tuple[int, int], Cover] = {}
        ok = True
        # the new wait's requirements, and those of dropped waits that relied on this position
        todo = [(w, n, r) for w in dropped for n, r in enumerate(w.reqs)
                if cover_of[(id(w), n)].pos == key.pos and r.queue == key.queue]
        todo += [(waits[key], n, r) for n, r in enumerate(waits[key].reqs)]
        for w, n, r in todo:
            c = _covers(ctx, r, ctx.part(w.key.part), trial)
            if c is None:
                ok = False
                break
            found[(id(w), n)] = c
        if ok:
            kept = trial
            dropped.append(waits[key])
            cover_of.update(found)
    report = []
    for w in dropped:
        report.append((w, [(r, _covers(ctx, r, ctx.part(w.key.part), kept)) for r in w.reqs]))
    return kept, report

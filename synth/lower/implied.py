"""Step 5 of the lowering: dropping implied waits.

Input: the context and the waits of step 4. Output: the waits kept, and for each
dropped one the kept waits (position, steps back) that cover its requirements: an
earlier wait of the same step, and in the body the previous steps' waits (RFC
0077's remark that ``wait(0, 3)`` is redundant after the previous iteration's
``wait(0, 2)``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Optional

from ..expr import Bin, Expr, Ite, Num, substitute
from .exprs import FALSE, conj, sub_e
from .context import PartInfo, Context
from .requirements import Req
from .counts import needed, executes, WaitKey, WaitPlan
from .groups import Group


@dataclass(frozen=True)
class Cover:
    """The kept wait that makes a dropped one redundant: its body position, steps back."""

    pos: int
    m: int
    """Steps back: 0 this step, 1 the previous one..."""


ZERO: Expr = Num(0)
ONE: Expr = Num(1)


def _plus(a: Expr, b: Expr) -> Expr:
    """``a + b``, without a zero side."""
    if a == ZERO:
        return b
    if b == ZERO:
        return a
    return Bin("+", a, b)


def _awaited(ctx: Context, r: Req) -> tuple[int, int, int]:
    """What :func:`~.counts.between`'s groups depend on in ``r``: its queue, its ``delta`` and the
    body position of the awaited group's commit."""
    return r.queue, r.delta, ctx.groups[r.group].last


class _Covers:
    """The covers of requirements during one run of :func:`drop_implied` (call it).

    The greedy drop asks the same question many times: whether ``r`` is covered by the
    waits at one position ``m`` steps back. The answer depends only on the requirement,
    its part, ``m``, the position and which waits are kept there, so it is memoised on
    exactly those (the waits by identity: they live as long as the run). The hypothesis
    of each requirement and the counts of groups between the awaited one and a position
    are memoised too, and the counts share their sub-sums, so that the prover meets the
    same sub-trees again (it memoises per sub-tree). Every answer is the one the plain
    search gets, so the lowered program is too; only repeated work is saved."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.hyps: dict[tuple[int, str], tuple[Req, Expr, bool]] = {}
        self.counts: dict[tuple, Expr] = {}
        self.sums: dict[tuple, object] = {}
        self.answers: dict[tuple, bool] = {}

    def _hyp(self, r: Req, part: PartInfo) -> tuple[Expr, bool]:
        key = (id(r), part.name)
        hit = self.hyps.get(key)
        if hit is None:
            ctx = self.ctx
            hyp = conj(conj(ctx.domain(part), executes(ctx, part, r.op)), needed(ctx, part, r))
            hit = self.hyps[key] = (r, hyp, ctx.z3.sat(hyp))  # r kept alive: its id stays its own
        return hit[1], hit[2]

    def _n_here(self, r: Req, part: PartInfo, m: int, pos: int) -> Expr:
        """The number of ``r.queue``'s groups committed after the awaited instance and before
        position ``pos`` of step ``J - m``: :func:`~.counts.between`'s conditions, counted.

        The same count as ``sum(c ? 1 : 0)`` over ``between(...)``'s conditions, built so
        that the counts of every ``(m, pos)`` share their terms: group ``g`` contributes its commits in steps
        ``J - a .. J - k_hi`` with ``a = m`` if it commits before ``pos`` and ``m + 1``
        otherwise, so the count is a prefix sum (groups before ``pos``, from ``m``) plus
        a suffix sum (the others, from ``m + 1``), each memoised."""
        key = (_awaited(self.ctx, r), part.name, m, pos)
        out = self.counts.get(key)
        if out is None:
            order = self._order(r.queue)
            n = bisect.bisect_left([g.last for g in order], pos)  # groups committed before pos
            out = self.counts[key] = _plus(self._prefix(r, part, m, n), self._suffix(r, part, m + 1, n))
        return out

    def _order(self, queue: int) -> list[Group]:
        """The groups of ``queue`` by the body position of their commit."""
        key = ("order", queue)
        hit = self.sums.get(key)
        if hit is None:
            hit = self.sums[key] = sorted((g for g in self.ctx.groups if g.queue == queue), key=lambda g: g.last)
        return hit

    def _commits(self, r: Req, part: PartInfo, g: Group, a: int) -> Expr:
        """``g``'s commits in steps ``J - a .. J - k_hi`` (``k_hi`` as in :func:`~.counts.between`)."""
        ctx = self.ctx
        k_hi = r.delta - (0 if g.last > ctx.groups[r.group].last else 1)
        key = ("commits", part.name, g.gid, a, k_hi)
        out = self.sums.get(key)
        if out is None:
            out = ZERO
            for k in range(a, k_hi + 1):
                out = _plus(out, Ite(ctx.present(g, ctx.step(part, k)), ONE, ZERO))
            self.sums[key] = out
        return out

    def _prefix(self, r: Req, part: PartInfo, a: int, n: int) -> Expr:
        """The commits of the first ``n`` groups (by last position), each from step ``J - a``."""
        ak = _awaited(self.ctx, r)
        key = ("pre", ak, part.name, a, n)
        out = self.sums.get(key)
        if out is None:
            order = self._order(r.queue)
            start = n
            while start > 0 and ("pre", ak, part.name, a, start) not in self.sums:
                start -= 1
            out = self.sums.get(("pre", ak, part.name, a, start), ZERO)
            for k in range(start, n):
                out = _plus(out, self._commits(r, part, order[k], a))
                self.sums[("pre", ak, part.name, a, k + 1)] = out
        return out

    def _suffix(self, r: Req, part: PartInfo, a: int, n: int) -> Expr:
        """The commits of the groups from the ``n``-th on (by last position), each from step ``J - a``."""
        order = self._order(r.queue)
        ak = _awaited(self.ctx, r)
        key = ("suf", ak, part.name, a, n)
        out = self.sums.get(key)
        if out is None:
            end = n
            while end < len(order) and ("suf", ak, part.name, a, end) not in self.sums:
                end += 1
            out = self.sums.get(("suf", ak, part.name, a, end), ZERO)
            for k in range(end - 1, n - 1, -1):
                out = _plus(self._commits(r, part, order[k], a), out)
                self.sums[("suf", ak, part.name, a, k)] = out
        return out

    def __call__(self, r: Req, part: PartInfo, waits: dict[WaitKey, WaitPlan]) -> Optional[Cover]:
        """A kept wait (position, steps back) that completes ``r``'s awaited instance whenever
        ``r`` is live in ``part``; None if none does alone."""
        ctx = self.ctx
        own = WaitKey(part.name, ctx.pos[r.op], r.queue)
        if own in waits:
            return Cover(own.pos, 0)
        ga = ctx.groups[r.group]
        hyp, live = self._hyp(r, part)
        if not live:
            return Cover(own.pos, 0)
        max_m = r.delta if part.name == "body" else 0
        positions = sorted({k.pos for k in waits if k.queue == r.queue})
        for m in range(0, max_m + 1):
            for pos in positions:
                if m == 0 and pos >= own.pos:
                    continue
                if m == r.delta and pos <= ga.last:
                    continue
                at_pos = [(p2, waits.get(WaitKey(p2.name, pos, r.queue))) for p2 in ctx.parts]
                at_pos = [(p2, w) for p2, w in at_pos if w is not None]
                if not at_pos:
                    continue
                key = (id(r), part.name, m, pos, tuple(id(w) for _, w in at_pos))
                ok = self.answers.get(key)
                if ok is None:
                    ok = self.answers[key] = self._covered(r, part, hyp, m, pos, at_pos)
                if ok:
                    return Cover(pos, m)
        return None

    def _covered(self, r: Req, part: PartInfo, hyp: Expr, m: int, pos: int,
                 at_pos: list[tuple[PartInfo, WaitPlan]]) -> bool:
        ctx = self.ctx
        n_here = self._n_here(r, part, m, pos)
        j = ctx.step(part, m)
        alts: Expr = FALSE
        for p2, w in at_pos:
            at = {ctx.var: sub_e(j, p2.offset)}
            cond = ctx.in_part(p2, j)
            if w.guard is not None:
                cond = conj(cond, substitute(w.guard, at))
            cond = conj(cond, Bin(">=", n_here, substitute(w.count, at)))
            alts = cond if alts == FALSE else Bin("||", alts, cond)
        return ctx.z3.valid(hyp, alts)


def drop_implied(ctx: Context, waits: dict[WaitKey, WaitPlan]
                  ) -> tuple[dict[WaitKey, WaitPlan], list[tuple[WaitPlan, list[tuple[Req, Cover]]]]]:
    """Greedily drop each wait (part order, then body order) whose requirements, and those
    of the waits dropped before it, are all covered by the remaining waits."""
    covers = _Covers(ctx)
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
            c = covers(r, ctx.part(w.key.part), trial)
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
        report.append((w, [(r, covers(r, ctx.part(w.key.part), kept)) for r in w.reqs]))
    return kept, report

"""Step 4 of the lowering: wait counts.

Input: the context and the requirements. Output: one :class:`WaitPlan` per part,
statement and queue that some live requirement needs: its count is the number of
groups committed after the awaited one (an exact sum of indicators), rewritten as
the simplest expression in the part's ``i`` equal to it (constant, affine,
piecewise, or the exact sum); every candidate is checked with Z3 over the part's
whole domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..expr import Bin, Call, Expr, Ite, Num, Un, Var, evaluate, free_vars, simplify
from .exprs import TRUE, FALSE, norm, conj, conjuncts, aff_expr, pretty_bool
from .context import PartInfo, Context
from .requirements import Req, reason


def between(ctx: Context, part: PartInfo, r: Req, m: int, pos: int) -> list[Expr]:
    """Groups of ``r.queue`` committed after the awaited instance (step ``J - r.delta``)
    and before position ``pos`` of step ``J - m``: one condition per possible commit
    (the count is the number that hold), in ``part``'s i."""
    ga = ctx.groups[r.group]
    out = []
    for g in ctx.groups:
        if g.queue != r.queue:
            continue
        k_lo = m + (0 if g.last < pos else 1)
        k_hi = r.delta - (0 if g.last > ga.last else 1)
        for k in range(k_lo, k_hi + 1):
            out.append(ctx.present(g, ctx.step(part, k)))
    return out


def needed(ctx: Context, part: PartInfo, r: Req) -> Expr:
    """The awaited instance exists: its group runs in step ``J - delta``."""
    return ctx.runs(ctx.groups[r.group].stage, ctx.step(part, r.delta))


def executes(ctx: Context, part: PartInfo, op: int) -> Expr:
    """``op``'s statement runs in the step: its stage's ``0 <= J - s < T``, in ``part``'s i."""
    return ctx.runs(ctx.sched.stage[op], ctx.step(part))


@dataclass(frozen=True)
class WaitKey:
    """Where a wait goes: the part, the body position of the op it precedes, the queue."""

    part: str
    pos: int
    queue: int


@dataclass
class WaitPlan:
    """A wait before it is assembled: its count, guard, the requirements it serves, why."""

    key: WaitKey
    op: int
    count: Expr
    guard: Optional[Expr]
    reqs: list[Req]
    reason: str


def initial_waits(ctx: Context, reqs: list[Req]) -> dict[WaitKey, WaitPlan]:
    """One wait per part, statement and queue that some requirement needs there."""
    by_key: dict[WaitKey, list[Req]] = {}
    for part in ctx.parts:
        for r in reqs:
            by_key.setdefault(WaitKey(part.name, ctx.pos[r.op], r.queue), []).append(r)
    out: dict[WaitKey, WaitPlan] = {}
    for key in sorted(by_key, key=lambda k: (_PART_IDX[k.part], k.pos, k.queue)):
        w = _wait_count(ctx, key, by_key[key])
        if w is not None:
            out[key] = w
    return out


_PART_IDX = {"prologue": 0, "body": 1, "epilogue": 2}


def _wait_count(ctx: Context, key: WaitKey, reqs: list[Req]) -> Optional[WaitPlan]:
    """The count of the wait at ``key``: the least, over its requirements that are live,
    of the groups committed after the awaited one; None when none is ever live there."""
    part = ctx.part(key.part)
    op = reqs[0].op
    guard = ctx.guard(part, ctx.sched.stage[op])
    if guard == FALSE:
        return None
    hyp = conj(ctx.domain(part), executes(ctx, part, op))
    live = [r for r in reqs if ctx.z3.sat(conj(hyp, needed(ctx, part, r)))]
    if not live:
        return None
    needs = []
    for r in live:
        n = _simplify_count(ctx, part, hyp, between(ctx, part, r, 0, key.pos))
        needs.append((needed(ctx, part, r), n))
    count = _fit(ctx, part, hyp, needs)
    return WaitPlan(key, op, count, guard, live, reason(ctx, live, count))


def _simplify_count(ctx: Context, part: PartInfo, hyp: Expr, conds: list[Expr]) -> Expr:
    """``c + sum(cond ? 1 : 0)`` with each condition decided or reduced under ``hyp``: a
    conjunct implied by ``hyp`` and the others is dropped, the terms in ``i`` alone become
    one expression where one fits (``2 - i``), and thresholds ``a, a + 1, ..`` of one sum
    become a ``min``/``max`` (``min(i + T - 1, 3)``). Exact: every rewrite is proved by Z3."""
    const = 0
    terms: dict[Expr, int] = {}
    for t in conds:
        kept: list[Expr] = []
        dead = False
        for c in conjuncts(t):
            c = pretty_bool(c, ctx.var)
            if c == TRUE or ctx.z3.valid(hyp, c):
                continue
            if c == FALSE or ctx.z3.valid(hyp, Un("!", c)):
                dead = True
                break
            kept.append(c)
        if dead:
            continue
        kept = _drop_implied_conjuncts(ctx, hyp, kept)
        if not kept:
            const += 1
            continue
        cond = kept[0]
        for c in kept[1:]:
            cond = Bin("&&", cond, c)
        terms[cond] = terms.get(cond, 0) + 1
    if len(terms) == 1:
        (cond, n), = terms.items()
        return norm(Ite(cond, Num(const + n), Num(const)))
    terms, clamps = _clamps(ctx, hyp, terms)
    head: Optional[Expr] = Num(const) if const else None
    mixed = {c: n for c, n in terms.items() if free_vars(c) - {ctx.var}}
    if len(mixed) < len(terms):
        # the terms in i alone: one expression (2 - i), if one fits everywhere
        only_i = _sum_of(Num(const), {c: n for c, n in terms.items() if c not in mixed})
        fit = _fit(ctx, part, hyp, [(TRUE, only_i)]) if mixed or clamps else None
        if (fit is not None and not isinstance(fit, Call) and fit != only_i
                and ctx.z3.valid(hyp, Bin("==", fit, only_i))):
            head, terms = fit, mixed
    return norm(_sum_of(head, terms, clamps))


def _drop_implied_conjuncts(ctx: Context, hyp: Expr, items: list[Expr]) -> list[Expr]:
    """``items`` (a conjunction) without the conjuncts that ``hyp`` and the remaining ones imply."""
    out = list(items)
    k = 0
    while len(out) > 1 and k < len(out):
        rest = hyp
        for m, c in enumerate(out):
            if m != k:
                rest = conj(rest, c)
        if ctx.z3.valid(rest, out[k]):
            out.pop(k)
        else:
            k += 1
    return out


def _clamps(ctx: Context, hyp: Expr, terms: dict[Expr, int]) -> tuple[dict[Expr, int], list[Expr]]:
    """Terms ``(a <= L) ? n : 0`` for consecutive ``a`` (one ``L``, one ``n``) as one
    ``n * min(max(L - a + 1, 0), m)``, the ``min``/``max`` left out where ``hyp`` makes them
    idle; the other terms unchanged."""
    groups: dict[tuple[Expr, int], list[int]] = {}
    for cond, n in terms.items():
        if isinstance(cond, Bin) and cond.op == "<=" and isinstance(cond.lhs, Num) and free_vars(cond.rhs):
            groups.setdefault((cond.rhs, n), []).append(cond.lhs.value)
    rest = dict(terms)
    out: list[Expr] = []
    for (L, n), ths in groups.items():
        runs: list[list[int]] = []
        for a in sorted(set(ths)):
            if runs and a == runs[-1][-1] + 1:
                runs[-1].append(a)
            else:
                runs.append([a])
        for run in runs:
            if len(run) < 2:
                continue
            a, m = run[0], len(run)
            x = aff_expr(simplify(Bin("-", L, Num(a - 1))), ctx.var)
            e: Expr = x
            if not ctx.z3.valid(hyp, Bin(">=", x, Num(0))):
                e = Call("max", (e, Num(0)))
            if not ctx.z3.valid(hyp, Bin("<=", x, Num(m))):
                e = Call("min", (e, Num(m)))
            if n != 1:
                e = Bin("*", Num(n), e)
            group = _sum_of(None, {Bin("<=", Num(t), L): n for t in run})
            if ctx.z3.valid(hyp, Bin("==", e, group)):
                for t in run:
                    del rest[Bin("<=", Num(t), L)]
                out.append(e)
    return rest, out


def _sum_of(head: Optional[Expr], terms: dict[Expr, int], extra: list[Expr] = ()) -> Expr:  # type: ignore[assignment]
    """``head + extra + sum(cond ? n : 0)``."""
    out = head if head != Num(0) else None
    for t in list(extra) + [Ite(cond, Num(n), Num(0)) for cond, n in terms.items()]:
        out = t if out is None else Bin("+", out, t)
    return out if out is not None else Num(0)


def _fit(ctx: Context, part: PartInfo, hyp: Expr, needs: list[tuple[Expr, Expr]]) -> Expr:
    """The simplest expression equal, wherever the wait runs and some requirement is
    live, to the least live count; checked with Z3 (safe, non-negative, tight)."""
    table = _table(ctx, part, hyp, needs)
    exact = needs[0][1] if len(needs) == 1 else norm(Call("min", tuple(n for _, n in needs)))
    cands = _candidates(ctx, part, table) + [n for _, n in needs] + [exact]
    live_any = needs[0][0]
    for nv, _ in needs[1:]:
        live_any = Bin("||", live_any, nv)
    safe_ok: list[Expr] = []
    for c in dict.fromkeys(cands):
        safe = all(ctx.z3.valid(conj(hyp, nv), Bin("<=", c, n)) for nv, n in needs)
        if not safe or not ctx.z3.valid(hyp, Bin(">=", c, Num(0))):
            continue
        tight_c: Expr = FALSE
        for nv, n in needs:
            tight_c = Bin("||", tight_c, conj(nv, Bin("==", c, n)))
        if ctx.z3.valid(conj(hyp, live_any), tight_c):
            return c
        safe_ok.append(c)
    return safe_ok[0] if safe_ok else exact


def _table(ctx: Context, part: PartInfo, hyp: Expr, needs: list[tuple[Expr, Expr]]
           ) -> tuple[list[tuple[int, Optional[int]]], bool]:
    """``([(i, least live count or None)], open_ended)`` at a representative trip count;
    open-ended: the body of a symbolic loop, whose last value repeats for all larger i."""
    tval = ctx.z3.t_big(ctx.S)
    env = {} if not isinstance(ctx.T, Var) else {ctx.T.name: tval}
    ext = int(evaluate(part.extent, env))
    open_ended = part.name == "body" and isinstance(ctx.T, Var)
    if open_ended:
        ext = min(ext, 5 * ctx.S + 12)
    rows = []
    for i in range(ext):
        e = dict(env)
        e[ctx.var] = i
        if not evaluate(hyp, e):
            continue
        vals = [int(evaluate(n, e)) for nv, n in needs if evaluate(nv, e)]
        rows.append((i, min(vals) if vals else None))
    return rows, open_ended


def _candidates(ctx: Context, part: PartInfo, table) -> list[Expr]:
    rows, open_ended = table
    known = [(i, v) for i, v in rows if v is not None]
    if not known:
        return [Num(0)]
    i = Var(ctx.var)
    out: list[Expr] = []
    vals = {v for _, v in known}
    if len(vals) == 1:
        return [Num(known[0][1])]
    if not open_ended and len(known) >= 2:
        (i0, v0), (i1, v1) = known[0], known[1]
        if (v1 - v0) % (i1 - i0) == 0:
            b = (v1 - v0) // (i1 - i0)
            a = v0 - b * i0
            if all(a + b * x == v for x, v in known) and all(a + b * x >= 0 for x, _ in rows):
                out.append(norm(aff_expr(simplify(Bin("+", Num(a), Bin("*", Num(b), i))), ctx.var)))
    # piecewise: runs of equal values (free points join the run before them)
    runs: list[tuple[int, int]] = []  # (first i, value)
    for x, v in rows:
        if v is None:
            continue
        if not runs or runs[-1][1] != v:
            runs.append((x, v))
    expr: Expr = Num(runs[-1][1])
    for k in range(len(runs) - 2, -1, -1):
        expr = Ite(Bin("<", i, Num(runs[k + 1][0])), Num(runs[k][1]), expr)
    out.append(norm(expr))
    return out

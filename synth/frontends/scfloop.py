"""The part the MLIR-based importers share: one pipelined ``scf.for`` -> :class:`~synth.frontends.loop.Loop`.

A dialect walker (:class:`Walker` subclass: Triton's ``ttg`` ops, MLIR's ``nvgpu``
and ``memref`` ops) turns each op of a block into events and values; this module
finds the loop, runs the straight-line code before and after it, and derives the
loop body's slot indices:

* Values are scalars (Python ints or Z3 terms, :mod:`~synth.frontends.arith`),
  ``("buf", name)`` for a shared buffer and ``("view", buf, slot, tag)`` for one of
  its slots (``tag`` names a sub-slice).
* The body is run concretely for its first iterations. Each ``iter_args`` value
  that is an integer or a view is fitted to ``a*k + b`` or ``(k + b) % N`` on
  iterations ``k >= 1``; the fit is then proven by induction with Z3 (the yield of
  the fitted value at ``k`` equals the fit at ``k + 1``), all carried values at once.
* Each body access's slot must then be ``(k + c) % M`` for every ``k``: checked
  on the concrete runs and proven with Z3 under the induction hypotheses.

Loop results (the carried views after the loop) are the fits at ``k = T``, so a
peeled epilogue can read them.
"""

from __future__ import annotations

import math
import re
from typing import Optional

import z3

from ..errors import Loc, SynthError
from ..expr import Expr, Num, Var, parse, to_str
from .affine import parse_maps
from .arith import eval_op, is_sym
from .loop import Event, Loop
from .mlirtext import Op, parse_module, walk


def err(path: str, line: int, msg: str, fix: str) -> SynthError:
    return SynthError(Loc(path, line, 1 if line else 0), msg, fix)


def find_block(ops: list, target: Op) -> Optional[list]:
    """The op list (block) holding ``target``."""
    for op in ops:
        if op is target:
            return ops
        for r in op.regions:
            b = find_block(r, target)
            if b is not None:
                return b
    return None


def short(op: Op) -> str:
    """The op's line without its trailing type signature."""
    t = op.text
    depth = 0
    for i, ch in enumerate(t):
        depth += (ch in "{<([") - (ch in "}>)]")
        if depth == 0 and t.startswith(" : ", i):
            t = t[:i]
            break
    return t if len(t) <= 110 else t[:107] + "..."


class Walker:
    """Evaluates a block's values and collects its events; dialects override :meth:`dialect`.

    ``events_ops`` are the op names whose presence inside a nested region (an
    ``scf.if``) puts the loop outside the model."""

    event_ops: tuple = ()

    def __init__(self, path: str, maps: dict) -> None:
        self.path = path
        self.maps = maps
        self.buffers: dict = {}
        self.shapes: dict = {}

    def block(self, ops: list, env: dict, events: list, where: str) -> None:
        for op in ops:
            self.op(op, env, events, where)

    def op(self, op: Op, env: dict, events: list, where: str) -> None:
        n = op.name
        if op.regions:
            if any(x.name in self.event_ops for r in op.regions for x in walk(r)):
                raise err(self.path, op.line, f"{n} around async copies, commits, waits or shared loads ({where})",
                          "control flow around the pipeline's events (an scf.if, a nested loop) is outside the "
                          "model")
            for r in op.results:
                env[r] = None
            return
        if n == "scf.yield":
            env["__yield__"] = [env.get(o) for o in op.operands]
            return
        if self.dialect(op, env, events, where):
            return
        if any(isinstance(env.get(o), tuple) and env.get(o)[0] == "view" for o in op.operands):
            raise err(self.path, op.line, f"{n} uses a slot of a multi-buffered shared buffer and is not modeled",
                      "see docs/check.md for the ops each importer reads")
        if n == "affine.apply":
            v = self.affine(op, env)
        else:
            v = eval_op(op, [env.get(o) for o in op.operands])
        for r in op.results[:1]:
            env[r] = v

    def affine(self, op: Op, env: dict):
        m = re.match(r"\s*(#[\w$.-]+)", op.rest())
        f = self.maps.get(m.group(1)) if m else None
        if f is None:
            inline = re.search(r"affine_map<(.*?)>\s*\(", op.rest())
            f = parse_maps(f"#inline = affine_map<{inline.group(1)}>").get("#inline") if inline else None
        if f is None:
            return None
        args = [env.get(o) for o in op.operands]
        if any(a is None or isinstance(a, tuple) for a in args):
            return None
        return f(args)

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        """Handle a dialect op (record events, bind views); False: not one of this dialect's."""
        return False

    def need_view(self, op: Op, view) -> None:
        if not (isinstance(view, tuple) and view[0] == "view"):
            raise err(self.path, op.line, f"{op.name}: cannot tell which shared buffer slot this uses",
                      "the slot must be a view of a shared allocation indexed by a constant or a value the loop "
                      "carries or computes from its induction variable")


def for_header(op: Op, path: str):
    m = re.search(r"scf\.for\s+(%[\w$.-]+)\s*=\s*(%[\w$.-]+(?:#\d+)?)\s+to\s+(%[\w$.-]+(?:#\d+)?)\s+step\s+"
                  r"(%[\w$.-]+(?:#\d+)?)", op.text)
    if not m:
        raise err(path, op.line, "cannot read this scf.for header", "print the IR with MLIR's default printer")
    iters = re.findall(r"(%[\w$.-]+)\s*=\s*(%[\w$.-]+(?:#\d+)?)", op.text[op.text.find("iter_args"):]) \
        if "iter_args" in op.text else []
    return m.group(1), m.group(2), m.group(3), m.group(4), iters


def fit(seq: list, mods: list):
    """``("aff", a, b)`` or ``("mod", b, N)`` describing ``seq[k]`` for ``k >= 1``, or None."""
    if len(seq) < 4 or any(not isinstance(x, int) or isinstance(x, bool) for x in seq[1:]):
        return None
    a = seq[2] - seq[1]
    b = seq[1] - a
    if all(seq[k] == a * k + b for k in range(1, len(seq))):
        return ("aff", a, b)
    for N in mods:
        b = (seq[1] - 1) % N
        if all(seq[k] == (k + b) % N for k in range(1, len(seq))):
            return ("mod", b, N)
    return None


def fit_at(f, k):
    """The fitted value at ``k`` (an int or a Z3 term)."""
    return f[1] * k + f[2] if f[0] == "aff" else (k + f[1]) % f[2]


def fit_expr(f, at: Expr) -> Expr:
    """The fitted value at a synth expression (``T``)."""
    t = to_str(at)
    return parse(f"{f[1]} * ({t}) + {f[2]}") if f[0] == "aff" else parse(f"(({t}) + {f[1]}) % {f[2]}")


def _z(x):
    return x if is_sym(x) else z3.IntVal(int(x))


def valid(claim, facts) -> bool:
    s = z3.Solver()
    s.set("timeout", 5000)
    s.add(*facts)
    s.add(z3.Not(claim))
    return s.check() == z3.unsat


def _same(y, nxt, k) -> bool:
    if isinstance(nxt, tuple):
        if not (isinstance(y, tuple) and y[0] == "view" and y[1] == nxt[1] and y[3] == nxt[3]) or y[2] is None:
            return False
        return valid(_z(y[2]) == nxt[2], [k >= 1])
    if y is None or isinstance(y, tuple):
        return False
    return valid(_z(y) == nxt, [k >= 1])


def fit_carried(w, body: list, env: dict, names: list, inits: list, iv_at, iv: str, fit_fn, at_fn, same_fn):
    """Run the loop body concretely for its first iterations, fit each carried value (``iter_args``)
    with ``fit_fn(sequence, mods)``, and keep the fits proven by induction with Z3: assuming every
    fit at ``k`` (``at_fn(fit, k)``), each yielded value equals the fit at ``k + 1`` (``same_fn``);
    a fit that fails is dropped and the rest proven again. ``iv_at(k)`` is the induction variable at
    iteration ``k`` (an int, or a Z3 term when ``k`` is). Returns ``(runs, symbolic events, fits, k)``:
    the events of each concrete iteration, those of iteration ``k`` and the fit per carried value
    (``None`` when none holds; ``("view", buffer, tags, fit)`` for a slot view)."""
    mods = sorted({m for m in w.buffers.values() if m > 1})
    nsim = max(8, 3 * max(mods + [1]) + 2)
    seqs: list = [[] for _ in names]
    cur = list(inits)
    runs = []
    for kk in range(nsim):
        e2 = dict(env)
        e2[iv] = iv_at(kk)
        for nme, v in zip(names, cur):
            e2[nme] = v
        evs: list = []
        w.block(body, e2, evs, "in the loop")
        runs.append(evs)
        for i, v in enumerate(cur):
            seqs[i].append(v)
        cur = e2.get("__yield__", [None] * len(names))
    mods = sorted({m for m in w.buffers.values() if m > 1})
    fits = []
    for seq in seqs:
        if all(isinstance(v, tuple) and v[0] == "view" for v in seq):
            same = len({(v[1], v[3]) for v in seq[1:]}) == 1
            f = fit_fn([v[2] for v in seq], mods) if same else None
            fits.append(("view", seq[1][1], seq[1][3], f) if f else None)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in seq):
            fits.append(fit_fn(seq, mods))
        else:
            fits.append(None)
    k = z3.Int("k")
    while True:
        e3 = dict(env)
        e3[iv] = iv_at(k)
        for i, nme in enumerate(names):
            f = fits[i]
            if f is None:
                e3[nme] = z3.Int(f"free_{i}") if isinstance(inits[i], int) else None
            elif f[0] == "view":
                e3[nme] = ("view", f[1], at_fn(f[3], k), f[2])
            else:
                e3[nme] = at_fn(f, k)
        sym_events: list = []
        w.block(body, e3, sym_events, "in the loop")
        ys = e3.get("__yield__", [None] * len(names))
        changed = False
        for i, f in enumerate(fits):
            if f is None:
                continue
            nxt = ("view", f[1], at_fn(f[3], k + 1), f[2]) if f[0] == "view" else at_fn(f, k + 1)
            if not same_fn(ys[i], nxt, k):
                fits[i] = None
                changed = True
        if not changed:
            break
    return runs, sym_events, fits, k


def import_scf(text: str, path: str, walker: Walker, is_copy, source: str, what: str, fix: str) -> Loop:
    """The :class:`Loop` of the one ``scf.for`` holding ops for which ``is_copy(op)`` holds."""
    mod = parse_module(text, path)
    walker.maps.update(parse_maps(text))
    loops = [op for op in walk(mod) if op.name == "scf.for" and op.regions
             and any(is_copy(x) for x in walk(op.regions[0]))]
    if not loops:
        raise err(path, 0, f"no pipelined loop: no scf.for holds {what}", fix)
    outer = [lp for lp in loops if not any(lp is not o and find_block(o.regions[0], lp) is not None for o in loops)]
    if len(outer) > 1 or len(loops) > 1:
        raise err(path, (outer[1] if len(outer) > 1 else loops[1]).line,
                  "several pipelined loops (or a nested one) in one module", "pass a kernel with one pipelined loop")
    lp = outer[0]
    block = find_block(mod, lp)
    pos = next(i for i, op in enumerate(block) if op is lp)
    w = walker
    env: dict = {}
    pro: list = []
    w.block(block[:pos], env, pro, "before the loop")
    iv, lb, ub, st, iters = for_header(lp, path)
    lbv, stv = env.get(lb), env.get(st)
    if isinstance(stv, int) and stv <= 0:
        raise err(path, lp.line, f"the pipelined loop's step is {stv}", "pass a loop with a positive step")
    # A bound that is not a constant makes the trip count a symbol and the induction variable unknown:
    # fine as long as no slot index depends on it (a slot that does is reported as data-dependent).
    known = isinstance(lbv, int) and isinstance(stv, int) and not isinstance(lbv, bool)
    ubv = env.get(ub)
    for e in pro:
        if e.kind in ("write", "read") and not isinstance(e.slot, int):
            raise err(path, e.line, f"slot index of {e.text} before the loop is not a constant",
                      "indirect or data-dependent slot indices are outside the model")
    names = [a for a, _ in iters]
    inits = [env.get(i) for _, i in iters]
    body = lp.regions[0]
    runs, sym_events, fits, k = fit_carried(
        w, body, env, names, inits,
        lambda kk: (lbv + kk * stv if known else None) if isinstance(kk, int) else
        (lbv + kk * stv if known else z3.Int("iv")), iv, fit, fit_at, _same)
    body_events = []
    for n_ev, ev in enumerate(sym_events):
        if ev.kind in ("write", "read"):
            m = w.buffers.get(ev.buffer, 1)
            s0 = runs[0][n_ev].slot
            if not isinstance(s0, int) or any(not isinstance(r[n_ev].slot, int) for r in runs):
                raise err(path, ev.line, f"slot index of {ev.text} is not a constant per iteration "
                          "(indirect or data-dependent)", "indirect slot indices are outside the model")
            c = s0 % m
            if any(r[n_ev].slot != (j + c) % m for j, r in enumerate(runs)) or not valid(
                    _z(ev.slot) == (k + c) % m, [k >= 1]):
                raise err(path, ev.line, f"slot index of {ev.text} is not (k + c) % {m} in iteration k "
                          "(could not be derived from the loop's induction variable or iter_args)",
                          "only rotating slot indices are supported; indirect slot indices are outside the model")
            ev = Event(ev.kind, ev.key, ev.buffer, parse(f"(k + {c}) % {m}"), ev.is_async, ev.queue, ev.count,
                       None, ev.line, ev.text)
        body_events.append(ev)
    if known and isinstance(ubv, int) and not isinstance(ubv, bool):
        extent: Expr = Num(max(0, math.ceil((ubv - lbv) / stv)))
        sym, min_trip = None, extent.value
    else:
        extent, sym, min_trip = Var("T"), "T", 1
    # after the loop: its results are the carried values at k = T
    env_after = dict(env)
    res = [r for r in lp.results if "#" in r] or lp.results[:1]
    for i, r in enumerate(res[:len(names)]):
        f = fits[i]
        if f is None:
            env_after[r] = None
        elif f[0] == "view":
            env_after[r] = ("view", f[1], fit_at(f[3], extent.value) if sym is None else fit_expr(f[3], extent),
                            f[2])
        else:
            env_after[r] = fit_at(f, extent.value) if sym is None else None
    epi: list = []
    w.block(block[pos + 1:], env_after, epi, "after the loop")
    for e in epi:
        if e.kind in ("write", "read") and e.slot is None:
            raise err(path, e.line, f"slot index of {e.text} after the loop is unknown",
                      "only views the loop carries (or constants) are supported after the loop")
    return Loop(name=_func_name(mod, lp), path=path, buffers=dict(w.buffers), prologue=tuple(pro),
                body=tuple(body_events), epilogue=tuple(epi), body_extent=extent, trip_symbol=sym, min_trip=min_trip,
                source=source, body_line=lp.line,
                notes=(f"{source} {path}: loop at line {lp.line}, trip count "
                       f"{'T = iterations up to ' + ub if sym else extent.value}",))


def _func_name(mod: list, lp: Op) -> str:
    for op in walk(mod):
        if op.name in ("tt.func", "func.func", "gpu.func") and op.regions and find_block(op.regions[0], lp):
            m = re.search(r"@([\w$.]+)", op.text)
            if m:
                return m.group(1)
    return "kernel"


__all__ = ["fit_carried", "Walker", "import_scf", "find_block", "short", "err", "fit", "fit_at", "valid"]

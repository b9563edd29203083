"""Triton TTGIR after the software pipeliner -> :class:`~synth.frontends.loop.Loop`.

Input: the text of ``.ttgir`` (``compiled_kernel.asm["ttgir"]``) for sm_80-style
``cp.async`` pipelining. The pipelined loop is the ``scf.for`` holding
``ttg.async_copy_global_to_local``; the ops before it in the same block are the
prologue, those after it the epilogue. Events:

* ``ttg.async_copy_global_to_local %ptr, %view ...`` -- an async write of the slot
  ``%view`` denotes. Its mask is ignored: a masked-off ``cp.async`` still zero-fills
  its destination (src-size 0), so the write happens either way.
* ``ttg.async_commit_group`` -- a commit on the one ``cp.async`` queue;
  ``ttg.async_wait {num = N}`` -- ``cp.async.wait_group N`` (its tokens are not used,
  as PTX does not use them).
* ``ttg.local_load %view`` -- a read of that slot.

Slots: ``ttg.memdesc_index %buf[%i]`` (or ``memdesc_subview``) of a
``ttg.local_alloc`` with ``M`` leading entries is slot ``%i`` of ``M``; subslices,
transposes and reinterprets keep buffer and slot. Slot indices inside the loop are
usually carried in ``iter_args`` (``select(i + 1 >= M, 0, i + 1)``): each carried
integer or view is fitted to ``a*k + b`` or ``(k + b) % N`` on the first
iterations and the fit is proven by induction with Z3 (the yield of the fitted
value at ``k`` equals the fit at ``k + 1``). What cannot be fitted and proven is
outside the model: a slot read from memory, an ``scf.if`` around copies, waits or
loads, sm_90 async ops (TMA, wgmma) touching a multi-buffered slot.
"""

from __future__ import annotations

import math
import re
from typing import Optional

import z3

from ..errors import Loc, SynthError
from ..expr import Num, Var, parse
from .arith import eval_op, is_sym
from .loop import Event, Loop
from .mlirtext import Op, parse_module, walk

COPY = "ttg.async_copy_global_to_local"
VIEW_OPS = ("ttg.memdesc_subslice", "ttg.memdesc_trans", "ttg.memdesc_reinterpret", "ttg.memdesc_reshape")
EVENT_OPS = (COPY, "ttg.async_commit_group", "ttg.async_wait", "ttg.local_load", "ttg.local_store")


def _err(path: str, line: int, msg: str, fix: str) -> SynthError:
    return SynthError(Loc(path, line, 1 if line else 0), msg, fix)


def _find_block(ops: list, target: Op) -> Optional[list]:
    for op in ops:
        if op is target:
            return ops
        for r in op.regions:
            b = _find_block(r, target)
            if b is not None:
                return b
    return None


def _shape(op: Op) -> list:
    m = re.search(r"memdesc<([\dx]+)x[a-z]", op.text)
    return [int(x) for x in m.group(1).split("x")] if m else []


class _Walker:
    """Evaluates a block's scalar values and collects its events (one domain: ints or Z3)."""

    def __init__(self, path: str, buffers: dict, sync_init: set) -> None:
        self.path = path
        self.buffers = buffers
        self.sync_init = sync_init
        self.shapes: dict = {}

    def block(self, ops: list, env: dict, events: list, where: str) -> None:
        for op in ops:
            self.op(op, env, events, where)

    def op(self, op: Op, env: dict, events: list, where: str) -> None:
        n = op.name
        if op.regions and n != "scf.for":
            if any(x.name in EVENT_OPS for r in op.regions for x in walk(r)):
                raise _err(self.path, op.line, f"{n} around async copies, commits, waits or shared loads "
                           f"({where})", "data-dependent control flow around the pipeline's events is outside "
                           "the model")
            return
        if n == "scf.for" and where != "prologue-scan":
            if any(x.name in EVENT_OPS for r in op.regions for x in walk(r)):
                raise _err(self.path, op.line, f"a nested loop with async copies or waits ({where})",
                           "only one pipelined loop, not nested in another, is supported")
            return
        if n == "ttg.local_alloc":
            shape = _shape(op)
            name = op.results[0].lstrip("%") if op.results else f"buf{op.line}"
            self.buffers.setdefault(name, 1)
            self.shapes[name] = shape
            if op.operands:
                self.sync_init.add(name)
            env[op.results[0]] = ("buf", name)
            return
        if n in ("ttg.memdesc_index", "ttg.memdesc_subview"):
            base = env.get(op.operands[0])
            if not (isinstance(base, tuple) and base[0] == "buf"):
                self._no_view(op, env)
                return
            idx = env.get(op.operands[1]) if len(op.operands) > 1 else None
            if len(op.operands) < 2:
                m = re.search(r"\[(\-?\d+)", op.rest())
                idx = int(m.group(1)) if m else None
            shape = self.shapes.get(base[1]) or [1]
            self.buffers[base[1]] = shape[0]  # memdesc_index selects along the leading dimension
            env[op.results[0]] = ("view", base[1], idx, ())
            return
        if n in VIEW_OPS:
            base = env.get(op.operands[0]) if op.operands else None
            if isinstance(base, tuple) and base[0] == "view":
                tag = base[3]
                if n == "ttg.memdesc_subslice":
                    m = re.search(r"\[([\d,\s]+)\]", op.rest())
                    tag = tag + ((m.group(1).replace(" ", ""),) if m else ("?",))
                env[op.results[0]] = ("view", base[1], base[2], tag)
            return
        if n == COPY:
            view = env.get(op.operands[1]) if len(op.operands) > 1 else None
            self._need_view(op, view)
            events.append(Event("write", _key("copy", view), view[1], view[2], True, 0, line=op.line,
                                text=_short(op)))
            return
        if n == "ttg.async_commit_group":
            events.append(Event("commit", line=op.line, text=_short(op)))
            return
        if n == "ttg.async_wait":
            if "num" not in op.attrs:
                raise _err(self.path, op.line, "ttg.async_wait without {num = N}", "print the TTGIR with attributes")
            events.append(Event("wait", count=int(op.attrs["num"]), line=op.line, text=_short(op)))
            return
        if n == "ttg.local_load":
            view = env.get(op.operands[0]) if op.operands else None
            if isinstance(view, tuple) and view[0] == "buf":
                view = ("view", view[1], 0, ())
            self._need_view(op, view)
            events.append(Event("read", _key("load", view), view[1], view[2], line=op.line, text=_short(op)))
            return
        if n == "ttg.local_store":
            view = env.get(op.operands[1]) if len(op.operands) > 1 else None
            if isinstance(view, tuple) and view[0] == "view":
                events.append(Event("write", _key("store", view), view[1], view[2], False, line=op.line,
                                    text=_short(op)))
            return
        if n in ("ttg.local_dealloc",):
            return
        if n == "scf.yield":
            env["__yield__"] = [env.get(o) for o in op.operands]
            return
        touched = [env.get(o) for o in op.operands]
        if any(isinstance(t, tuple) and t[0] == "view" for t in touched):
            raise _err(self.path, op.line, f"{n} uses a slot of a multi-buffered shared buffer and is not modeled",
                       "only cp.async copies (ttg.async_copy_global_to_local) and ttg.local_load are supported; "
                       "sm_90 TMA/wgmma pipelines are outside the model")
        if n.startswith("ttng.") and ("async" in n or "tma" in n or "barrier" in n):
            raise _err(self.path, op.line, f"{n}: sm_90 async ops are outside the model",
                       "compile for sm_80 (GPUTarget('cuda', 80, 32)) to get cp.async pipelining")
        if op.results:
            v = eval_op(op, [env.get(o) for o in op.operands])
            env[op.results[0]] = v

    def _no_view(self, op: Op, env: dict) -> None:
        if op.results:
            env[op.results[0]] = None

    def _need_view(self, op: Op, view) -> None:
        if not (isinstance(view, tuple) and view[0] == "view"):
            raise _err(self.path, op.line, f"{op.name}: cannot tell which shared buffer slot this uses",
                       "the slot must be a ttg.memdesc_index of a ttg.local_alloc (or one carried in iter_args)")


def _key(kind: str, view) -> str:
    tag = "".join("_" + t.replace(",", "_") for t in view[3])
    return f"{kind}_{view[1]}{tag}"


def _short(op: Op) -> str:
    """The op's line without its trailing type signature."""
    t = op.text
    depth = 0
    for i, ch in enumerate(t):
        depth += (ch in "{<(") - (ch in "}>)")
        if depth == 0 and t.startswith(" : ", i):
            t = t[:i]
            break
    return t if len(t) <= 110 else t[:107] + "..."


def _for_header(op: Op, path: str):
    m = re.search(r"scf\.for\s+(%[\w$.-]+)\s*=\s*(%[\w$.-]+)\s+to\s+(%[\w$.-]+)\s+step\s+(%[\w$.-]+)", op.text)
    if not m:
        raise _err(path, op.line, "cannot read this scf.for header", "print the TTGIR with mlir's default printer")
    iters = re.findall(r"(%[\w$.-]+)\s*=\s*(%[\w$.-]+(?:#\d+)?)", op.text[op.text.find("iter_args"):]) \
        if "iter_args" in op.text else []
    return m.group(1), m.group(2), m.group(3), m.group(4), iters


def _fit(seq: list, mods: list):
    """``("aff", a, b)`` or ``("mod", b, N)`` describing seq[k] for k >= 1, or None."""
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


def _fit_z3(f, k):
    return f[1] * k + f[2] if f[0] == "aff" else (k + f[1]) % f[2]


def ttgir_to_loop(text: str, path: str) -> Loop:
    """Read a pipelined TTGIR module; raises SynthError for what is outside the model (docstring)."""
    mod = parse_module(text, path)
    loops = [op for op in walk(mod) if op.name == "scf.for" and op.regions
             and any(x.name == COPY for x in walk(op.regions[0]))]
    if not loops:
        raise _err(path, 0, "no pipelined loop: no scf.for holds a ttg.async_copy_global_to_local",
                   "pass the TTGIR of a kernel compiled with num_stages >= 2 for sm_80 (cp.async)")
    outer = [lp for lp in loops if not any(lp is not o and _find_block(o.regions[0], lp) is not None for o in loops)]
    if len(outer) > 1 or any(x.name == COPY for lp in outer for x in walk([y for y in lp.regions[0]
                                                                            if y.name == "scf.for"])):
        raise _err(path, outer[1].line if len(outer) > 1 else outer[0].line,
                   "several pipelined loops (or a nested one) in one module", "pass a kernel with one pipelined loop")
    lp = outer[0]
    block = _find_block(mod, lp)
    pos = next(i for i, op in enumerate(block) if op is lp)
    buffers: dict = {}
    sync_init: set = set()
    w = _Walker(path, buffers, sync_init)
    # prologue (concrete)
    env: dict = {}
    for op in _func_args(mod, lp):
        env[op] = None
    pro: list = []
    w.block(block[:pos], env, pro, "before the loop")
    iv, lb, ub, st, iters = _for_header(lp, path)
    lbv, stv = env.get(lb), env.get(st)
    if not isinstance(lbv, int) or not isinstance(stv, int) or stv <= 0 or isinstance(lbv, bool):
        raise _err(path, lp.line, "the pipelined loop's lower bound or step is not a constant",
                   "data-dependent loop bounds other than the upper bound are outside the model")
    ubv = env.get(ub)
    for e in pro:
        if e.kind in ("write", "read") and not isinstance(e.slot, int):
            raise _err(path, e.line, f"slot index of {e.text} before the loop is not a constant",
                       "indirect or data-dependent slot indices are outside the model")
    names = [a for a, _ in iters]
    inits = [env.get(i) for _, i in iters]
    body = lp.regions[0]
    mods = sorted({m for m in buffers.values() if m > 1})
    nsim = max(8, 3 * max(mods + [1]) + 2)
    # concrete simulation
    seqs = [[] for _ in names]
    cur = list(inits)
    runs = []
    for k in range(nsim):
        e2 = dict(env)
        e2[iv] = lbv + k * stv
        for nme, v in zip(names, cur):
            e2[nme] = v
        evs: list = []
        w.block(body, e2, evs, "in the loop")
        runs.append(evs)
        for i, v in enumerate(cur):
            seqs[i].append(v)
        cur = e2.get("__yield__", [None] * len(names))
    # fit and prove by induction
    fits = []
    for i, seq in enumerate(seqs):
        if all(isinstance(v, tuple) and v[0] == "view" for v in seq):
            if len({(v[1], v[3]) for v in seq[1:]}) == 1:
                f = _fit([v[2] for v in seq], mods)
                fits.append(("view", seq[1][1], seq[1][3], f) if f else None)
            else:
                fits.append(None)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in seq):
            fits.append(_fit(seq, mods))
        else:
            fits.append(None)
    k = z3.Int("k")
    while True:
        e3 = dict(env)
        e3[iv] = lbv + k * stv
        for i, nme in enumerate(names):
            f = fits[i]
            if f is None:
                e3[nme] = z3.Int(f"free_{i}") if isinstance(inits[i], int) else None
            elif f[0] == "view":
                e3[nme] = ("view", f[1], _fit_z3(f[3], k), f[2])
            else:
                e3[nme] = _fit_z3(f, k)
        sym_events: list = []
        w.block(body, e3, sym_events, "in the loop")
        ys = e3.get("__yield__", [None] * len(names))
        changed = False
        for i, f in enumerate(fits):
            if f is None:
                continue
            y = ys[i]
            nxt = ("view", f[1], _fit_z3(f[3], k + 1), f[2]) if f[0] == "view" else _fit_z3(f, k + 1)
            ok = _same(y, nxt, k)
            if not ok:
                fits[i] = None
                changed = True
        if not changed:
            break
    # body events with proven slot forms
    body_events = []
    for n_ev, ev in enumerate(sym_events):
        if ev.kind in ("write", "read"):
            m = buffers.get(ev.buffer, 1)
            s0 = runs[0][n_ev].slot
            if not isinstance(s0, int) or any(not isinstance(r[n_ev].slot, int) for r in runs):
                raise _err(path, ev.line, f"slot index of {ev.text} is not a constant per iteration "
                           "(indirect or data-dependent)", "indirect slot indices are outside the model")
            c = s0 % m
            if any(r[n_ev].slot != (kk + c) % m for kk, r in enumerate(runs)) or not _valid(
                    _z(ev.slot) == (k + c) % m, [k >= 1]):
                raise _err(path, ev.line, f"slot index of {ev.text} is not (k + c) % {m} in iteration k "
                           "(could not be derived from the loop's iter_args)",
                           "only rotating slot indices are supported; indirect slot indices are outside the model")
            ev = Event(ev.kind, ev.key, ev.buffer, parse(f"(k + {c}) % {m}"), ev.is_async, ev.queue, ev.count,
                       None, ev.line, ev.text)
        body_events.append(ev)
    epi: list = []
    w.block(block[pos + 1:], dict(env), epi, "after the loop")
    for e in epi:
        if e.kind in ("write", "read") and e.buffer in buffers and buffers[e.buffer] > 1:
            raise _err(path, e.line, f"{e.text} after the loop touches a multi-buffered slot",
                       "a peeled epilogue that reads pipelined buffers is not supported by this importer")
    epi = [e for e in epi if e.kind in ("commit", "wait")]
    pro = [e for e in pro if e.kind in ("commit", "wait") or buffers.get(e.buffer, 1) >= 1]
    if isinstance(ubv, int) and not isinstance(ubv, bool):
        extent = parse(max(0, math.ceil((ubv - lbv) / stv)))
        sym, min_trip = None, extent.value
    else:
        extent, sym, min_trip = Var("T"), "T", 1
    fname = next((m.group(1) for op in walk(mod) if op.name == "tt.func"
                  for m in [re.search(r"@([\w$.]+)", op.text)] if m), "kernel")
    return Loop(name=f"{fname}", path=path, buffers=buffers, prologue=tuple(pro), body=tuple(body_events),
                epilogue=tuple(epi), body_extent=extent, trip_symbol=sym, min_trip=min_trip, source="triton",
                body_line=lp.line, notes=(f"Triton TTGIR {path}: loop at line {lp.line}, trip count "
                                          f"{'T = iterations of ' + ub if sym else extent}",))


def _z(x):
    return x if is_sym(x) else z3.IntVal(int(x))


def _valid(claim, facts) -> bool:
    s = z3.Solver()
    s.set("timeout", 5000)
    s.add(*facts)
    s.add(z3.Not(claim))
    return s.check() == z3.unsat


def _same(y, nxt, k) -> bool:
    if isinstance(nxt, tuple):
        if not (isinstance(y, tuple) and y[0] == "view" and y[1] == nxt[1] and y[3] == nxt[3]) or y[2] is None:
            return False
        return _valid(_z(y[2]) == nxt[2], [k >= 1])
    if y is None or isinstance(y, tuple):
        return False
    return _valid(_z(y) == nxt, [k >= 1])


def _func_args(mod: list, lp: Op) -> list:
    for op in walk(mod):
        if op.name == "tt.func" and op.regions and _find_block(op.regions[0], lp) is not None:
            head = op.text.split("{", 1)[0] if ") attributes" not in op.text else op.text.split(") attributes")[0]
            return re.findall(r"(%[\w$.-]+)\s*:", head)
    return []


__all__ = ["ttgir_to_loop"]

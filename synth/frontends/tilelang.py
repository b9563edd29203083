"""TileLang's lowered device TIR -> synth's program (docs/check.md, "TileLang").

Input: ``device_mod.script()`` of a TileLang kernel lowered for ``cuda`` sm_80 or sm_90
(``tilelang.engine.lower.lower_to_host_device_ir``: no GPU, no driver), e.g. the files
``scripts/gen_tilelang_fixtures.sh`` writes. :mod:`.tilelang_tir` reads the text
(Python's ``ast`` only: nothing is run) into events; this module maps them:

* **cp.async** (sm_80, or sm_90 with warp specialization disabled) -> a
  :class:`~synth.frontends.loop.Loop` (one queue: the thread's commit groups), mapped and
  proven by :func:`synth.frontends.verdict.check_loop` like Triton's and TVM's loops. The
  pipelined loop is the non-unrolled ``for`` holding ``T.ptx_cp_async``; a buffer written by
  ``cp.async`` is multi-buffered when the loop's offsets into it read ``(k + c) % M * S + r``
  (``S`` elements per slot, ``0 <= r < S`` proven with Z3 for every thread and inner loop
  index); an access's slot is its offset's ``/ S`` (proven constant, or ``(k + c) % M``, or
  ``(B + d) % M`` after the loop). ``ptx_ldmatrix``, loads and a wgmma's descriptors
  (``initialize_wgmma_descriptor`` + ``increase_descriptor_offset``, each wgmma batch drained
  by ``warpgroup_wait(0)``) are reads. A kernel parameter in the loop's extent (``K`` of
  ``T.dynamic("K")``) is the trip-count symbol, renamed ``T``.
* **Warp-specialized TMA** (sm_90, TileLang's default) -> a
  :class:`~synth.hopper.ir.HopperProgram` of two roles (``producer``: the branch issuing
  ``T.tma_load``; ``consumer``: the other), proven by
  :func:`synth.verify.phases.verify_hopper` for every trip count. The one ``mbarrier``
  array is split into barriers by the loop's indices (``k % M + base``: slots
  ``base .. base + M - 1``; without a loop, by runs of equal init counts);
  ``mbarrier_expect_tx`` -> an arrive of 0 arrivals with its bytes,
  ``ptx_arrive_barrier_expect_tx`` -> one arrival with bytes (under ``tl_shuffle_elect``),
  ``ptx_arrive_barrier`` -> one arrival per thread of the role (128 per warp group),
  ``mbarrier_wait_parity(b, p)`` -> a wait whose phase field is read from ``p`` against the
  ring count (split into two guarded waits where it is sometimes one, sometimes the other),
  ``tma_load`` -> a TMA copy (the unrolled copies of one slot: one op of their bytes),
  ``ptx_wgmma_ss`` + ``warpgroup_commit_batch`` + ``warpgroup_wait(n)`` -> a wgmma group.

Outside the model (SynthError, exit 2, file:line and a fix): what :mod:`.tilelang_tir`
refuses, a slot or parity that is not a function of the iteration synth can prove, a
copy under a condition that may be false, roles whose loops run different numbers of times.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import z3

from ..completion import (ArriveStmt, Barrier, BarrierRef, BarSyncStmt, FenceStmt, InitStmt, InvalStmt, PipelineState, TryWaitStmt,
                          Tx)
from ..expr import Bin, Expr, Num, Var, evaluate, free_vars, parse, simplify, substitute, to_str, to_z3
from ..hopper.ir import HopperError, HopperProgram, Role, validate_hopper
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from ..verify.phases import verify_hopper
from .loop import Event, Loop
from .tilelang_tir import FIX, Kernel, TEvent, read_tir, tir_error
from .ttgir_hopper import HopperImport, prove_mapped
from .ttgir_ws import WSCheck
from .verdict import check_loop, zero_trip_program

MARKERS = ("T.ptx_cp_async(", "T.tma_load(", "T.mbarrier_wait_parity(", "T.ptx_wait_group(")
MAX_SLOTS = 64
"""Slots of a multi-buffer or barrier ring read from TileLang TIR (docs/check.md, "TileLang")."""


def is_tilelang(text: str) -> bool:
    """Whether ``text`` looks like TileLang's lowered device TIR (TVMScript with TileLang's PTX intrinsics,
    not TVM's ``InjectSoftwarePipeline`` output)."""
    return ("@T.prim_func" in text and any(m in text for m in MARKERS)
            and "async_commit_queue_scope" not in text and "async_wait_queue_scope" not in text)


# ------------------------------------------------------------------------------------------ proofs


def _zenv(names) -> dict:
    return {n: z3.Int(n) for n in names}


def _valid(claim, facts) -> bool:
    s = z3.Solver()
    s.set("timeout", 10000)
    s.add(*facts)
    s.add(z3.Not(claim))
    return s.check() == z3.unsat


def _facts(e: TEvent, env: dict, extra=()) -> list:
    f = [z3.And(env[v] >= lo, env[v] < hi) for v, lo, hi in e.bounds if v in env]
    f += [env[p] >= 0 for p in env if not p.endswith("__thread") and p not in {v for v, _, _ in e.bounds}]
    return f + list(extra)


def _terms(e: Expr, sign: int = 1) -> list:
    """The additive terms of ``e`` as ``(sign, term)``."""
    if isinstance(e, Bin) and e.op in ("+", "-"):
        return _terms(e.lhs, sign) + _terms(e.rhs, sign if e.op == "+" else -sign)
    return [(sign, e)]


def _mod_k(e: Expr, n: Optional[int]) -> Expr:
    """``e`` with an additive term ``k`` or ``k * S`` written ``k % n`` / ``k % n * S``: the same value in a loop
    of the constant extent ``n`` (TileLang drops the modulo when the loop runs exactly one pass over the ring)."""
    if not n:
        return e
    out: Expr = Num(0)
    changed = False
    for sg, t in _terms(e):
        if t == Var("k"):
            t, changed = Bin("%", t, Num(n)), True
        elif isinstance(t, Bin) and t.op == "*" and t.lhs == Var("k") and isinstance(t.rhs, Num):
            t, changed = Bin("*", Bin("%", t.lhs, Num(n)), t.rhs), True
        out = Bin("+" if sg == 1 else "-", out, t)
    return simplify(out) if changed else e


def _rotating_term(e: Expr, loop_vars: set, n: Optional[int] = None):
    """``(X, M, S, rest)`` when ``e`` is ``X % M * S + rest`` with ``X`` mentioning a loop variable or parameter
    (in a loop of constant extent ``n``, ``k * S`` reads ``k % n * S``)."""
    ts = _terms(_mod_k(e, n))
    for j, (sg, t) in enumerate(ts):
        if sg == 1 and isinstance(t, Bin) and t.op == "*" and isinstance(t.rhs, Num) and isinstance(t.lhs, Bin) \
                and t.lhs.op == "%" and isinstance(t.lhs.rhs, Num) and free_vars(t.lhs.lhs) & loop_vars:
            rest = Num(0)
            for i, (s2, t2) in enumerate(ts):
                if i != j:
                    rest = Bin("+" if s2 == 1 else "-", rest, t2)
            return t.lhs.lhs, t.lhs.rhs.value, t.rhs.value, simplify(rest)
        if sg == 1 and isinstance(t, Bin) and t.op == "/" and isinstance(t.rhs, Num):
            inner = _rotating_term(t.lhs, loop_vars, n)  # (k % 3 * 8192) / 2: a descriptor's byte offset
            if inner is not None and inner[3] == Num(0) and inner[2] % t.rhs.value == 0:
                rest = Num(0)
                for i, (s2, t2) in enumerate(ts):
                    if i != j:
                        rest = Bin("+" if s2 == 1 else "-", rest, t2)
                return inner[0], inner[1], inner[2] // t.rhs.value, simplify(rest)
    return None


@dataclass(frozen=True)
class _Layout:
    slots: int
    size: int
    """Elements per slot."""


def _layouts(path: str, events: list, bufs: set, symbols: set, n: Optional[int] = None) -> dict:
    """Slots and slot size of each buffer in ``bufs``, from the rotating offsets of the loop's accesses."""
    out: dict = {}
    for e in events:
        for b, off in ([(e.buffer, e.offset)] if e.buffer in bufs else []) + [r for r in e.reads if r[0] in bufs]:
            if off is None:
                continue
            rt = _rotating_term(off, symbols, n)
            if rt is None:
                continue
            lay = _Layout(rt[1], rt[2])
            if out.setdefault(b, lay) != lay:
                raise tir_error(path, e.line, f"{b} is indexed as {lay.slots} slots of {lay.size} elements here and "
                                f"{out[b].slots} slots of {out[b].size} elsewhere", "pass TileLang's output unedited")
            if not 1 <= lay.slots <= MAX_SLOTS:
                raise tir_error(path, e.line, f"{b} has {lay.slots} slots", f"at most {MAX_SLOTS} are supported")
    return out


def _slot(path: str, e: TEvent, off: Optional[Expr], buf: str, lay: Optional[_Layout], symbols: set,
          n: Optional[int] = None):
    """The slot of an access at element ``off``: an int, or an Expr in ``symbols`` (``X % M``); proven."""
    if lay is None or lay.slots == 1:
        return 0
    if off is None:
        raise tir_error(path, e.line, f"the offset of {e.text} into {buf} is not known (indirect or "
                        "data-dependent)", "only rotating multi-buffers are supported")
    names = free_vars(off) | {v for v, _, _ in e.bounds}
    env = _zenv(names)
    rt = _rotating_term(off, symbols, n)
    if rt is not None:
        x, m, s, rest = rt
        if (m, s) != (lay.slots, lay.size) or free_vars(x) - symbols:
            raise tir_error(path, e.line, f"the offset of {e.text} into {buf} is not (k + c) % {lay.slots} * "
                            f"{lay.size} + r", "only rotating multi-buffers are supported")
        zr = to_z3(rest, env)
        if not _valid(z3.And(zr >= 0, zr < s), _facts(e, env)):
            raise tir_error(path, e.line, f"the offset of {e.text} into {buf} leaves its slot (the part besides "
                            f"{to_str(Bin('%', x, Num(m)))} * {s} is not within 0..{s - 1} for every thread)",
                            "only accesses within one slot are supported")
        return simplify(Bin("%", x, Num(m)))
    if free_vars(off) & symbols:
        raise tir_error(path, e.line, f"the offset of {e.text} into {buf} depends on the iteration but not as "
                        f"(k + c) % {lay.slots} * {lay.size} + r", "only rotating multi-buffers are supported")
    at0 = substitute(off, {v: Num(lo) for v, lo, _ in e.bounds})
    at0 = simplify(substitute(at0, {n: Num(0) for n in free_vars(at0)}))
    if not isinstance(at0, Num):
        raise tir_error(path, e.line, f"the offset of {e.text} into {buf} is not known", FIX)
    c = at0.value // lay.size
    z = to_z3(off, env)
    if not 0 <= c < lay.slots or not _valid(z3.And(z >= c * lay.size, z < (c + 1) * lay.size), _facts(e, env)):
        raise tir_error(path, e.line, f"the offset of {e.text} into {buf} is not within one slot for every thread",
                        "only accesses within one slot are supported")
    return c


def _guard(path: str, e: TEvent, ren: dict) -> Optional[Expr]:
    g = None
    for c in e.guard:
        if c is None:
            raise tir_error(path, e.line, f"{e.text} runs under a condition synth cannot read",
                            "conditions must be functions of the loop variable and the kernel's integer parameters")
        g = c if g is None else Bin("&&", g, c)
    if g is None:
        return None
    if any(v.endswith("__thread") or "__" in v for v in free_vars(g)):
        raise tir_error(path, e.line, f"{e.text} runs under a condition on the thread index or an inner loop",
                        "only conditions on the loop variable and the kernel's integer parameters are supported")
    return simplify(substitute(g, ren))


# ------------------------------------------------------------------------------------------ cp.async


def tilelang_to_loop(text: str, path: str, kernel: Optional[Kernel] = None) -> Loop:
    """The cp.async pipeline of TileLang TIR ``text`` as a :class:`Loop` (module docstring); SynthError
    (exit 2) for what is outside the model."""
    k = kernel or read_tir(text, path)
    if k.roles:
        raise tir_error(path, k.ws_line, "a warp-specialized kernel is read as a Hopper program, not a cp.async loop",
                        "call tilelang_to_hopper")
    if len(k.loops) != 1:
        raise tir_error(path, k.loops[1][1] if k.loops else 0, f"{'no' if not k.loops else len(k.loops)} pipelined "
                        "loops (a non-unrolled loop holding T.ptx_cp_async)", "pass a kernel with one pipelined loop")
    _role, line, extent, _lo = k.loops[0]
    syms = sorted(free_vars(extent))
    if len(syms) > 1 or (syms and syms[0] not in k.params):
        raise tir_error(path, line, f"the pipelined loop's extent {to_str(extent)} is not a constant or a function "
                        "of one integer parameter", "one symbolic size (K) is supported")
    ren = {syms[0]: Var("T")} if syms else {}
    async_bufs = {e.buffer for e in k.events if e.kind == "cp_async"}
    n_fixed = extent.value if isinstance(extent, Num) and extent.value > 0 else None
    lays = _layouts(path, k.events, async_bufs, {"k"} | set(k.params), n_fixed)
    for e in k.events:
        if e.kind == "store" and e.buffer in async_bufs:
            raise tir_error(path, e.line, f"{e.buffer} is written both by cp.async and by a synchronous store",
                            "a buffer written both asynchronously and synchronously is outside the model")
    parts: dict = {"pre": [], "body": [], "post": []}
    pending_wg = None
    for e in k.events:
        if e.where not in parts:
            continue
        out = parts[e.where]
        if pending_wg is not None and e.kind not in ("wg_commit", "wg_wait", "wgmma"):
            raise tir_error(path, pending_wg, "a wgmma batch not drained by warpgroup_wait(0) before the next "
                            "statement is outside the cp.async model", "disable asynchronous wgmma overlap")
        syms_here = {"k"} | set(k.params)
        if e.kind in ("cp_async", "read"):
            if e.buffer not in async_bufs:
                continue
            sl = _slot(path, e, e.offset, e.buffer, lays.get(e.buffer), syms_here,
                       n_fixed if e.where == "body" else None)
            sl = sl if isinstance(sl, int) else simplify(substitute(sl, ren))
            g = _guard(path, e, ren)
            if e.kind == "cp_async":
                out.append(Event("write", f"copy_{e.buffer}", e.buffer, _num(sl), True, 0, guard=g, line=e.line,
                                 text=e.text))
            else:
                out.append(Event("read", f"read_{e.buffer}", e.buffer, _num(sl), guard=g, line=e.line, text=e.text))
        elif e.kind == "wgmma":
            pending_wg = pending_wg or e.line  # its reads last until warpgroup_wait(0)
            for b, off in e.reads:
                if b not in async_bufs:
                    continue
                sl = _slot(path, e, off, b, lays.get(b), syms_here, n_fixed if e.where == "body" else None)
                sl = sl if isinstance(sl, int) else simplify(substitute(sl, ren))
                out.append(Event("read", f"wgmma_{b}", b, _num(sl), guard=_guard(path, e, ren), line=e.line,
                                 text=e.text))
        elif e.kind == "wg_commit":
            pending_wg = pending_wg or e.line
        elif e.kind == "wg_wait":
            if not isinstance(e.count, Num) or e.count.value != 0:
                raise tir_error(path, e.line, f"{e.text}: a wgmma batch left in flight is outside the cp.async model",
                                "only warpgroup_wait(0) after each wgmma batch is supported here")
            pending_wg = None
        elif e.kind in ("commit", "wait"):
            cnt = None
            if e.kind == "wait":
                if e.count is None or free_vars(e.count) - set(k.params) - {"k"}:
                    raise tir_error(path, e.line, f"the count of {e.text} is not known", FIX)
                cnt = _num(simplify(substitute(e.count, ren)))
            out.append(Event(e.kind, "", line=e.line, text=e.text, count=cnt, guard=_guard(path, e, ren)))
        elif e.kind in ("init", "bwait", "arrive", "expect", "tma"):
            raise tir_error(path, e.line, f"{e.text}: mbarrier or TMA traffic in a cp.async kernel outside a "
                            "warp-specialized scope is outside the model", FIX)
    ext = simplify(substitute(extent, ren))
    if syms:
        min_trip = next((t for t in range(0, 1 << 16) if evaluate(ext, {"T": t}) >= 0), None)
        if min_trip is None:
            raise tir_error(path, line, f"the loop's extent {to_str(ext)} is negative for every T below 65536",
                            FIX)
        min_trip = max(min_trip, 1)
    else:
        min_trip = ext.value if isinstance(ext, Num) else 1
        if min_trip < 0:
            raise tir_error(path, line, f"the pipelined loop runs {min_trip} times", FIX)
    note = (f"TileLang TIR {path}: pipelined loop at line {line} of {k.name}, extent {to_str(ext)}"
            + (f" ({syms[0]} renamed T)" if syms else ""))
    return Loop(name=k.name, path=path, buffers={b: (lays[b].slots if b in lays else 1) for b in sorted(async_bufs)},
                prologue=tuple(parts["pre"]), body=tuple(parts["body"]), epilogue=tuple(parts["post"]),
                body_extent=ext, trip_symbol="T" if syms else None, min_trip=min_trip, queues=("cp.async",),
                source="tilelang", body_line=line, notes=(note,))


def _num(x):
    return x.value if isinstance(x, Num) else x


# ------------------------------------------------------------------------------------------ Hopper


def _split_index(e: Optional[Expr], n: Optional[int] = None):
    """``(X, M, base)`` of a barrier index ``X % M + base`` (``M`` None: a constant index ``base``; in a loop of
    constant extent ``n``, ``k + base`` reads ``k % n + base``)."""
    if e is None:
        return None
    e = _mod_k(simplify(e), n)
    if isinstance(e, Num):
        return None, None, e.value
    base = 0
    core = None
    for sg, t in _terms(e):
        if isinstance(t, Num):
            base += sg * t.value
        elif sg == 1 and core is None and isinstance(t, Bin) and t.op == "%" and isinstance(t.rhs, Num):
            core = t
        else:
            return "bad"
    if core is None:
        return "bad"
    return core.lhs, core.rhs.value, base


def _barriers(path: str, k: Kernel, loop_roles: set, n: Optional[int] = None) -> dict:
    """Barrier name -> (base index, slots, init count, init lines) from the loop's indices (or init runs)."""
    inits = {}
    for e in k.events:
        if e.kind == "init":
            if not isinstance(e.bar_index, Num) or not isinstance(e.count, Num):
                raise tir_error(path, e.line, f"{e.text}: the barrier index or count is not a constant", FIX)
            if e.bar_index.value in inits:
                raise tir_error(path, e.line, f"barrier {e.bar_index.value} is initialized twice", FIX)
            inits[e.bar_index.value] = (e.count.value, e.line)
    ranges = {}
    for e in k.events:
        if e.kind not in ("bwait", "arrive", "expect", "tma") or (e.role in loop_roles and e.where != "body"):
            continue
        sp = _split_index(e.bar_index, n)
        if sp is None or sp == "bad":
            raise tir_error(path, e.line, f"the barrier index of {e.text} is not k % M + base or a constant",
                            "only rotating barrier rings are supported")
        x, m, base = sp
        if m is None:
            if e.role in loop_roles:
                m = 1
            else:
                continue
        ranges.setdefault(base, set()).add(m)
    if not any(e.role in loop_roles for e in k.events):  # no loop: runs of equal init counts
        run_start = None
        for i in sorted(inits):
            if run_start is None or inits[i][0] != inits[run_start][0] or i - 1 not in inits:
                run_start = i
            ranges.setdefault(run_start, set())
        out = {}
        starts = sorted(ranges)
        for j, b in enumerate(starts):
            end = starts[j + 1] if j + 1 < len(starts) else max(inits) + 1
            ranges[b] = {end - b}
    out = {}
    for base, ms in sorted(ranges.items()):
        if len(ms) != 1:
            raise tir_error(path, 0, f"barriers from index {base} are used as rings of {sorted(ms)} slots", FIX)
        m = ms.pop()
        if not 1 <= m <= MAX_SLOTS:
            raise tir_error(path, 0, f"a barrier ring of {m} slots", f"at most {MAX_SLOTS} are supported")
        counts = {inits[i][0] for i in range(base, base + m) if i in inits}
        if len(counts) > 1:
            raise tir_error(path, inits[base][1] if base in inits else 0, f"the slots of the barrier at index "
                            f"{base} are initialized with different counts {sorted(counts)}",
                            "initialize every slot with the same arrival count")
        full_init = all(i in inits for i in range(base, base + m))
        out[f"bar{base}"] = (base, m, counts.pop() if counts else 1, full_init)
    names = sorted(out, key=lambda n: out[n][0])
    for a, b in zip(names, names[1:]):
        if out[a][0] + out[a][1] > out[b][0]:
            raise tir_error(path, 0, f"barrier rings {a} and {b} overlap", FIX)
    return out


def tilelang_to_hopper(text: str, path: str, *, min_trip_count: Optional[int] = None,
                       kernel: Optional[Kernel] = None) -> HopperImport:
    """The warp-specialized TMA pipeline of TileLang TIR ``text`` as a Hopper program of a producer and a
    consumer role (module docstring); SynthError (exit 2) for what is outside the model."""
    k = kernel or read_tir(text, path)
    if not k.roles:
        raise tir_error(path, 0, "no warp-specialization scope (kWarpSpecializationScope)", FIX)
    loops = {r: (line, ext) for r, line, ext, _lo in k.loops}
    roles = [r for r, _n, _l in k.roles]
    if loops and set(loops) != set(roles):
        raise tir_error(path, k.ws_line, "one role has a pipelined loop and the other does not", FIX)
    trip: object = 1
    if loops:
        exts = [loops[r][1] for r in roles]
        env = _zenv(set().union(*[free_vars(x) for x in exts]))
        if not _valid(to_z3(exts[0], env) == to_z3(exts[1], env), [v >= 0 for v in env.values()]):
            raise tir_error(path, loops[roles[1]][0], f"the loop of {roles[1]} may run a different number of times "
                            f"than the loop of {roles[0]} (line {loops[roles[0]][0]})", "both roles run one loop")
        e0 = simplify(exts[0])
        trip = e0.value if isinstance(e0, Num) else "T"
        if isinstance(trip, int) and trip < 1:
            raise tir_error(path, loops[roles[0]][0], f"the loops run {trip} times", "a Hopper pipeline needs T >= 1")
    for e in k.events:
        if not e.role and e.kind in ("expect", "tma"):
            raise tir_error(path, e.line, f"{e.text}: a TMA tile loaded once before the warp-specialized roles "
                            "(FlashAttention's Q) and read in every iteration is outside the model: synth's Hopper "
                            "programs version every TMA tile by the loop's iteration",
                            "check a kernel whose TMA tiles are all loaded inside the pipelined loop")
        if not e.role and e.kind not in ("init", "fence_init") and not (e.kind in ("read", "store")
                                                                        and e.buffer not in tma_bufs_of(k)):
            raise tir_error(path, e.line, f"{e.text} outside the warp-specialized roles is outside the model", FIX)
    fixed_n = trip if isinstance(trip, int) and loops else None
    bars = _barriers(path, k, set(loops), fixed_n)
    by_index = {}
    for name, (base, m, _c, _f) in bars.items():
        for i in range(base, base + m):
            by_index[i] = name
    tma_bufs = sorted({e.buffer for e in k.events if e.kind == "tma"})
    lays = _layouts(path, k.events, set(tma_bufs), {"k"}, fixed_n)
    kz = z3.Int("k")
    # without a loop the one iteration is k = 0; a loop of constant extent n runs k < n
    kfacts = ([kz >= 0] + ([kz < fixed_n] if fixed_n else [])) if loops else [kz == 0]

    def bar_of(e: TEvent):
        x, m, base = _split_index(e.bar_index, fixed_n)
        name = by_index.get(base)
        if name is None or bars[name][0] != base:
            raise tir_error(path, e.line, f"the barrier index of {e.text} is not the first slot of a ring", FIX)
        bm = bars[name][1]
        if m is None:
            return name, base - bars[name][0], bm
        if bm != m:
            raise tir_error(path, e.line, f"{e.text} indexes barrier {name} as a ring of {m}, not {bm}", FIX)
        c0 = simplify(substitute(x, {"k": Num(0)}))
        if not isinstance(c0, Num):
            raise tir_error(path, e.line, f"the barrier index of {e.text} is not a function of k", FIX)
        c = c0.value % m
        zx = to_z3(x, {"k": kz})
        if not _valid(zx % m == (kz + c) % m, [kz >= 0]):
            raise tir_error(path, e.line, f"the barrier slot of {e.text} is not (k + c) % {m}",
                            "only rotating barrier rings are supported")
        return name, c, m

    def state(c: int, m: int, phase: int = 0) -> PipelineState:
        return PipelineState(parse(f"i + {c}"), m, phase)

    ops: dict = {f"tma_{b}": ProgOp(f"tma_{b}", "tma", 0, True, None, None) for b in tma_bufs}
    sources: dict = {}
    out_roles = []
    arrived, completed, reads_of = set(), {}, {}
    def own_slot(sl, lay: _Layout) -> bool:
        """Whether slot ``sl`` (an int, or an Expr in ``k``) of a buffer laid out as ``lay`` is ``k % slots``:
        a ring's slot that does not move with ``k`` is not (in a loop; without one, k = 0)."""
        if lay.slots <= 1:
            return True
        if isinstance(sl, int):
            return not loops and sl == 0
        return _valid(to_z3(sl, {"k": kz}) == kz % lay.slots, kfacts)

    def role_guard(e: TEvent, role: str):
        """The guard of a role's statement (``k`` written ``i``) and its Z3 fact; ``(None, [])`` when unguarded."""
        if not e.guard:
            return None, []
        if None in e.guard or e.kind in ("wgmma", "wg_commit", "wg_wait"):
            raise tir_error(path, e.line, f"{e.text} runs under a condition synth cannot read in {role}'s code",
                            "only barrier and TMA statements may be guarded, by conditions on k")
        g = e.guard[0]
        for c in e.guard[1:]:
            g = Bin("&&", g, c)
        extra = free_vars(g) - {"k"}
        if extra:
            raise tir_error(path, e.line, f"{e.text} runs under a condition on {', '.join(sorted(extra))} in "
                            f"{role}'s code", "only conditions on the loop variable k are supported")
        return simplify(substitute(g, {"k": Var("i")})), [to_z3(g, {"k": kz})]

    def role_part(role: str, part: str, evs: list, wgs: int, waits: list) -> list:
        """The statements of one part of a role (iteration ``k`` is ``i``; counts ``i + c``)."""
        stmts: list = []
        last_tma = None

        def add(st, e: TEvent) -> None:
            sources[(role, part, len(stmts))] = (e.line, e.text)
            stmts.append(st)

        for e in evs:
            if e.kind != "tma":
                last_tma = None
            if e.kind == "store" and e.buffer in tma_bufs:
                raise tir_error(path, e.line, f"{e.text}: a synchronous write of the TMA-loaded buffer {e.buffer} "
                                "is outside the model", FIX)
            if e.kind == "read" and e.buffer in tma_bufs:
                # a plain load (ld.shared) of its iteration's tile: a synchronous read, done at the statement
                lay = lays.get(e.buffer, _Layout(1, 0))
                sl = _slot(path, e, e.offset, e.buffer, lay if lay.slots > 1 else None, {"k"}, fixed_n)
                if not own_slot(sl, lay) or e.guard:
                    raise tir_error(path, e.line, f"{role}: {e.text} reads a slot of {e.buffer} other than "
                                    f"k % {lay.slots}, or under a condition", "only reads of the iteration's own tile")
                opn = f"load_{e.buffer}_{role}"
                ops.setdefault(opn, ProgOp(opn, "lds", 0, False, None, None))
                reads_of.setdefault(role, set()).add(e.buffer)
                if not (stmts and isinstance(stmts[-1], OpStmt) and stmts[-1].op == opn):
                    add(OpStmt(opn, parse("i"), None, None,
                               (Access(e.buffer, parse("i"), parse(f"i % {lay.slots}"), f"tma_{e.buffer}"),), ()), e)
                continue
            if e.kind in ("read", "store"):
                continue
            if e.kind in ("init", "fence_init"):
                continue
            if e.kind == "sync":
                if (role not in loops or e.where == "body") and not e.guard:
                    add(BarSyncStmt(1 + [r for r, _n, _l in k.roles].index(role)), e)
                continue
            g, gf = role_guard(e, role)
            if e.kind == "expect":
                bn, c, m = bar_of(e)
                completed.setdefault(bn, set())
                add(ArriveStmt(bn, state(c, m), e.count.value if e.count.value == 0 else 1, (Tx(e.nbytes),), g), e)
            elif e.kind == "arrive":
                bn, c, m = bar_of(e)
                arrived.add(bn)
                arr = e.count.value if e.count.value == 1 else e.count.value // max(wgs, 1)
                add(ArriveStmt(bn, state(c, m), arr, (), g), e)
            elif e.kind == "bwait":
                bn, c, m = bar_of(e)
                for st, sg in _wait_states(path, e, c, m, kz, kfacts + gf):
                    add(TryWaitStmt(bn, st, g if sg is None else (sg if g is None else Bin("&&", g, sg))), e)
            elif e.kind == "tma":
                bn, c, m = bar_of(e)
                lay = lays.get(e.buffer, _Layout(1, 0))
                sl = _slot(path, e, e.offset, e.buffer, lay if lay.slots > 1 else None, {"k"}, fixed_n)
                if not own_slot(sl, lay):
                    raise tir_error(path, e.line, f"the TMA copy of iteration k does not write slot k % {lay.slots} of "
                                    f"{e.buffer}", "only rotating multi-buffers are supported")
                completed.setdefault(bn, set()).add(e.buffer)
                if last_tma is not None and last_tma[0] == (e.buffer, bn, c, g):
                    j = last_tma[1]
                    prev = stmts[j]
                    stmts[j] = replace(prev, barrier=replace(prev.barrier, bytes=prev.barrier.bytes + e.nbytes))
                    continue
                add(OpStmt(f"tma_{e.buffer}", parse("i"), g, None, (),
                           (Access(e.buffer, parse("i"), parse(f"i % {lay.slots}")),),
                           BarrierRef(bn, state(c, m), e.nbytes)), e)
                last_tma = ((e.buffer, bn, c, g), len(stmts) - 1)
            elif e.kind == "wgmma":
                reads = []
                for b, off in e.reads:
                    if b not in tma_bufs:
                        continue
                    lay = lays.get(b, _Layout(1, 0))
                    sl = _slot(path, e, off, b, lay if lay.slots > 1 else None, {"k"}, fixed_n)
                    if not own_slot(sl, lay):
                        raise tir_error(path, e.line, f"{role}: the wgmma of iteration k reads a slot of {b} other "
                                        f"than k % {lay.slots}", "only a wgmma reading its own iteration's tiles")
                    reads.append(Access(b, parse("i"), parse(f"i % {lay.slots}"), f"tma_{b}"))
                    reads_of.setdefault(role, set()).add(b)
                if not reads:
                    raise tir_error(path, e.line, f"{role}: this wgmma reads no TMA-written slot", FIX)
                opn = f"wgmma_{role}"
                if stmts and isinstance(stmts[-1], OpStmt) and stmts[-1].op.startswith(opn) \
                        and set(stmts[-1].reads) == set(reads):
                    continue  # the unrolled wgmma instructions of one batch: one op
                n = sum(1 for x in ops if x.startswith(opn))
                opn = opn if n == 0 else f"{opn}_{n}"
                ops[opn] = ProgOp(opn, "wgmma", 0, True, 0, None)
                add(OpStmt(opn, parse("i"), None, 0, tuple(reads), ()), e)
            elif e.kind == "wg_commit":
                add(CommitStmt(0, 0), e)
            elif e.kind == "wg_wait":
                if not isinstance(e.count, Num):
                    raise tir_error(path, e.line, f"the count of {e.text} is not a constant", FIX)
                waits.append(Wait(part, 0, Num(e.count.value), "the next statement", reason=e.text))
                add(WaitStmt(len(waits) - 1), e)
            elif e.kind in ("cp_async", "commit", "wait"):
                raise tir_error(path, e.line, f"{e.text}: cp.async in a warp-specialized TMA kernel is outside the "
                                "model", FIX)
        return stmts

    for n_role, (role, threads, rline) in enumerate(k.roles):
        if threads % 128:
            raise tir_error(path, rline, f"role {role} runs {threads} threads, not whole warp groups", FIX)
        wgs = threads // 128
        evs = [e for e in k.events if e.role == role]
        if role in loops:
            stray = [e for e in evs if e.where != "body" and e.kind in ("bwait", "arrive", "expect", "tma", "wgmma",
                                                                         "wg_commit", "wg_wait")]
            if stray:
                raise tir_error(path, stray[0].line, f"{stray[0].text} outside {role}'s loop is outside the model", FIX)
        waits: list = []
        parts = []
        stmts = role_part(role, "body", evs, wgs, waits)
        parts.append(Part("body", "i", Num(int(trip)) if isinstance(trip, int) else Var("T"), tuple(stmts)))
        prog = Program(f"{k.name}.{role}", "k", trip, max(1, min_trip_count or 1), 0, (), (), ("wgmma",),
                       tuple(parts), tuple(waits))
        # a role whose every release is by each thread (T.ptx_arrive_barrier outside T.tl_shuffle_elect: the
        # phase completes only once every thread arrived, after its own earlier waits) and which issues nothing
        # from one elected thread (a TMA copy, an elected arrive or expect) and holds no bar.sync is one actor:
        # no release of it can run ahead of a thread. Otherwise its warp groups run 128 threads each.
        elected = any(e.kind == "tma" or (e.kind in ("arrive", "expect") and isinstance(e.count, Num) and
                                           e.count.value <= 1) for e in evs) \
            or any(isinstance(st, BarSyncStmt) for st in stmts)  # a bar.sync over one thread converges nothing
        out_roles.append((role, wgs, prog, 128 if elected else 1))
    refills: dict = {}
    for role, _n, _l in k.roles:
        cur = None
        for e in k.events:
            if e.role != role:
                continue
            if e.kind == "bwait" and bar_of(e)[0] in arrived:
                cur = bar_of(e)[0]
            elif e.kind == "tma" and cur is not None:
                refills.setdefault(cur, set()).add(e.buffer)
    both = arrived & set(completed)
    if both:
        raise tir_error(path, k.ws_line, f"barrier {sorted(both)[0]} is completed by TMA bytes and arrived on by "
                        "releases", "a barrier is either full (TMA) or empty (releases)")
    barriers, setup, teardown = [], [], []
    used = arrived | set(completed)
    for name, (base, m, count, full_init) in sorted(bars.items(), key=lambda x: x[1][0]):
        if name not in used:
            continue
        if name in arrived:
            # the buffers a TMA refills after a wait on this barrier (before the next wait on a released one);
            # none such: the TMA buffers the releasing roles read
            guards = sorted(refills.get(name, set()) or set().union(
                *[reads_of.get(r, set()) for r, _n, _l in k.roles
                  if any(e.role == r and e.kind == "arrive" and bar_of(e)[0] == name for e in k.events)]))
            kind = "empty"
        else:
            guards, kind = sorted(completed[name]), "full"
        barriers.append(Barrier(name, m, count, kind, tuple(guards)))
        if full_init:
            setup.append(InitStmt(name))
        # TileLang emits no mbarrier.inval: the kernel ends after its loops and no later code reuses the
        # barriers' or the tiles' shared memory, so the end of the kernel is the teardown (docs/check.md)
        teardown.append(InvalStmt(name))
    if setup and any(e.kind == "fence_init" for e in k.events):
        setup.append(FenceStmt("mbarrier_init"))
    buffers = []
    for b in tma_bufs:
        box = {st.barrier.bytes for _r, _w, p, _t in out_roles for pt in p.parts for st in pt.stmts
               if isinstance(st, OpStmt) and st.op == f"tma_{b}"}
        if len(box) != 1:
            raise tir_error(path, k.ws_line, f"TMA copies into {b} have different sizes {sorted(box)}", FIX)
        buffers.append(ProgBuffer(b, "shared", lays.get(b, _Layout(1, 0)).slots, box.pop()))
    opl = tuple(ops.values())
    mt = max(1, min_trip_count or 1)
    # every thread of a role of 128 runs its waits and wgmmas; its arrives and TMA copies are elected (an
    # arrive by each thread in such a role is taken as one elected arrive of the warp group's count: sound,
    # it is never a convergence point)
    roles_out = tuple(Role(r, w, replace(p, ops=opl, buffers=tuple(buffers)), th,
                           tuple(dict.fromkeys(st.op for pt in p.parts for st in pt.stmts
                                               if isinstance(st, OpStmt) and ops[st.op].unit == "wgmma"))
                           if th > 1 else ())
                      for r, w, p, th in out_roles)
    unused = sorted(set(bars) - used)
    notes = (f"TileLang warp-specialized TIR {path}: scope at line {k.ws_line}, roles "
             + ", ".join(f"{r} ({n} threads, line {ln})" for r, n, ln in k.roles)
             + (f", loops at lines {', '.join(str(loops[r][0]) for r in roles)}" if loops else ", no loop (one "
                "iteration)")
             + (f"; barriers no role uses, left out: {', '.join(unused)}" if unused else ""),)
    prog = HopperProgram(k.name, "k", trip, mt, opl, tuple(buffers), tuple(barriers), tuple(setup), roles_out,
                         tuple(teardown), notes)
    try:
        validate_hopper(prog)
    except HopperError as x:
        raise tir_error(path, k.ws_line, f"the mapped program is malformed: {x.path}: {x.msg}", x.fix) from None
    return HopperImport(prog, path, k.ws_line, sources, notes)


def tma_bufs_of(k: Kernel) -> set:
    """The shared buffers some ``T.tma_load`` writes."""
    return {e.buffer for e in k.events if e.kind == "tma"}


def _wait_states(path: str, e: TEvent, c: int, m: int, kz, kfacts: list) -> list:
    """``(PipelineState, guard)`` of ``mbarrier_wait_parity(b, p)`` at ring count ``k + c`` of ``m`` slots:
    phase field 0 where ``p``'s low bit is that count's parity, 1 (the phase before) where it is the other."""
    p = e.count
    if p is None or free_vars(p) - {"k"}:
        raise tir_error(path, e.line, f"the parity of {e.text} is not a function of the iteration", FIX)
    zp = to_z3(p, {"k": kz}) % 2
    par = ((kz + c) / m) % 2
    st = lambda ph: PipelineState(parse(f"i + {c}"), m, ph)  # noqa: E731
    if _valid(zp == par, kfacts):
        return [(st(0), None)]
    if _valid(zp != par, kfacts):
        return [(st(1), None)]
    pi = to_str(substitute(p, {"k": Var("i")}))
    return [(st(0), parse(f"({pi}) % 2 == ((i + {c}) / {m}) % 2")),
            (st(1), parse(f"({pi}) % 2 != ((i + {c}) / {m}) % 2"))]


@dataclass(frozen=True)
class TileLangHopperCheck(WSCheck):
    """``synth check`` of a warp-specialized TileLang kernel: the report of :class:`~.ttgir_ws.WSCheck`
    (failures by role, barrier, slot and phase) with TileLang's title and ``source``."""

    def title(self) -> str:
        imp, p = self.imported, self.imported.program
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        return (f"{imp.path}: TileLang warp-specialized sm_90 pipeline (scope at line {imp.loop_line}, roles "
                f"{', '.join(r.name for r in p.roles)}), trip count {trip}: "
                f"{'PROVEN' if self.report.ok else 'NOT PROVEN'}")

    def to_json(self) -> dict:
        d = super().to_json()
        d["source"] = "tilelang-sm90-ws"
        return d


def check_tilelang(text: str, path: str, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
                   time_limit: float = 10.0, tightness: bool = True):
    """Read TileLang TIR and prove it: a :class:`TileLangHopperCheck` for a warp-specialized kernel, else the
    :class:`~synth.frontends.verdict.CheckResult` of its cp.async loop."""
    k = read_tir(text, path)
    if k.roles and min_trip_count == 0 and trip_count is None:
        # every T >= 0: the roles' loops run T times (K = 0: none), the mapping does not depend on the bound
        imp = tilelang_to_hopper(text, path, kernel=k)
        if not isinstance(imp.program.trip_count, int):
            imp = replace(imp, program=zero_trip_program(imp.program))
        return TileLangHopperCheck(imp, verify_hopper(imp.program, time_limit=time_limit, tightness=tightness))
    if k.roles:
        mapper = lambda t, p, min_trip_count=None: tilelang_to_hopper(t, p, min_trip_count=min_trip_count,  # noqa
                                                                      kernel=k)
        return TileLangHopperCheck(*prove_mapped(mapper, text, path, trip_count=trip_count,
                                                 min_trip_count=min_trip_count, time_limit=time_limit,
                                                 tightness=tightness, runs="the loops run"))
    return check_loop(tilelang_to_loop(text, path, k), trip_count=trip_count, min_trip_count=min_trip_count,
                      time_limit=time_limit, tightness=tightness)


__all__ = ["is_tilelang", "tilelang_to_loop", "tilelang_to_hopper", "check_tilelang", "TileLangHopperCheck"]

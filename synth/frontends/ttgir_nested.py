"""Triton sm_90a TTGIR with a tile loop around the k-loop, and C stored by TMA -> Hopper and store programs.

Triton 3.9 writes three forms that the one-loop readers (:mod:`.ttgir_hopper`, :mod:`.ttgir_ws`,
:mod:`.ttgir_persistent`) refuse; this module reads them by what their ops do (docs/check.md, "Tile loops,
warp specialization and TMA stores"):

* **one warp group, tile loop** (tutorial 09 with ``flatten=False``): an ``scf.for`` over the CTA's tiles
  (``n >= 0`` of them) holds, per tile, the allocation and ``ttng.init_barrier`` of the TMA ring, its
  prologue, the pipelined k-loop (``T >= 0`` k-tiles), the drain ``warp_group_dot_wait {pendings = 0}``,
  the ``ttng.inval_barrier`` of every slot, and C's epilogue: ``async_tma_store_wait {pendings = 0,
  read_only}``, ``local_store`` into one staging buffer allocated before the tile loop (reused by every
  tile), ``fence_async_shared``, ``async_tma_copy_local_to_global``; after the tile loop the last
  ``async_tma_store_wait``. Each tile is one run of the one-warp-group program (:func:`.ttgir_hopper`'s
  mapping) from freshly initialized barriers, proven for every ``T >= 0``; since every tile re-initializes
  its barriers (its phases restart with the re-init) and the proven program leaves no copy or wgmma group in
  flight at its teardown, the proof holds for every tile of every tile count. A barrier initialized once
  *before* the tile loop while the k-loop's slots and phases still restart at every tile is refuted
  (``phase_reset``): after a tile that completed an odd number of phases of a slot, the next tile waits for
  the wrong parity.
* **warp-specialized, tile loop** (the same kernel with ``warp_specialize=True``): each ``ttg.warp_specialize``
  partition runs the tile loop around its copy of the k-loop, its stage counter carried across tiles (the
  tile loop's ``iter_args`` feeds the k-loop's, the k-loop's result is yielded back), the barriers
  initialized once before the op. That is synth's persistent ring (docs/hopper.md, "Persistent tiles"):
  iteration ``t T + k`` of one warp-specialized program of ``N = n T`` iterations, proven for every
  ``N >= 0``, plus ``carry``: in every partition the count entering tile ``t`` is ``t T`` (proven by
  induction: the tile loop starts it at 0 and yields the k-loop's count after its ``T`` iterations), and
  the k-loop's slots and phases are functions of that count alone. A k-loop whose count restarts at every
  tile (barriers not re-initialized) is refuted by ``carry`` naming the tile, the k-step, the partition,
  the barrier and both phases.
* **warp-specialized, one tile, TMA store**: the warp-specialized k-loop of :mod:`.ttgir_ws`, then each
  consumer partition's ``local_alloc`` of C, ``fence_async_shared``, ``async_tma_copy_local_to_global`` and
  ``async_tma_store_wait {pendings = 0}``.

Every TMA store becomes the store program of its role (:mod:`synth.hopper.store`, one staging slot, the
role's sub-tiles in order ``e = r t + j``): ``war`` (a staging write after the previous store read the
buffer, proven by :func:`synth.verify.verify_program` for every tile count), ``converge`` and
``proxy_fence`` (:func:`synth.verify.hopper_store.check_threads`: a ``fence_async_shared`` between the threads'
writes and the elected store) and ``teardown`` (a store wait with pending count 0 after the role's last
store). Assumed from Triton 3.9's lowering (checked in its PTX for the saved inputs): the ``bar.sync`` its
membar pass puts after every ``async_tma_store_wait`` (before the staging buffer is written again) and
before every TMA store (after the threads' writes and fence); ``--without-lowering-barriers`` drops them.

An ``scf.if`` after the k-loop whose condition is a function of the tile loop's counter (``tile_id + P <
num_tiles``: every tile but the last) guards the waits inside it: a wgmma wait is checked on both paths
(the per-tile program with and without it; a refutation names the tile where the condition is false), a
store wait becomes a guard of the store program (``i < E - 1``).

Outside the model (exit 2 with the op and its line): deeper nesting, several tile loops, a ring carried
across tiles by a one-warp-group kernel, a warp-specialized k-loop whose counter is not carried as ``t T +
k`` (other than a constant restart), slots computed from the tile-local ``k`` in a ring, a per-tile
predicate in a ring, more than one staging buffer per role, a condition that is not a function of the tile
loop's counter, TMA stores from a TMA-loaded buffer.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import time
from dataclasses import dataclass, field
from typing import Optional

import z3

from ..completion import ArriveStmt, TryWaitStmt
from ..errors import Loc, SynthError
from ..expr import Num, evaluate, parse, to_str, to_z3 as _to_z3
from ..hopper.instances import role_instances
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from ..verify import verify_program
from ..verify.hopper_store import check_threads
from ..verify.phases import verify_hopper
from .arith import is_sym
from .mlirtext import Op, parse_module, walk
from .verdict import zero_trip_program
from .scfloop import err, find_block, fit_carried, for_header, short, valid
from .ttgir import new_dialect_names
from .ttgir_hopper import (DOT_WAIT, FIX, HEvent, HopperCheck, HopperImport, HopperWalker, Ctx, build_program,
                           fit_phase, fit_phase_at, func_name, module_warps, pipelined_loops, read_one_loop,
                           same_carried, symbolic_bound)
from .ttgir_oneshot import exchange_loads
from .ttgir_persistent import PersistentCheck, is_persistent_ttgir, persistent_to_hopper
from .ttgir_ws import (TASK_ATTR, WS_OP, Region, WSCheck, WSWalker, as_int_term, build_ws_program, func_args,
                       ws_regions)

TMA_STORE = "ttng.async_tma_copy_local_to_global"
STORE_WAIT = "ttng.async_tma_store_wait"
FENCE = "ttng.fence_async_shared"
STORE_EVENT_OPS = (TMA_STORE, STORE_WAIT, FENCE, "ttg.local_store")
STORE_KINDS = ("stwrite", "fence", "tstore", "stwait")
NESTED_FIX = ("pass the TTGIR of Triton's tile-loop matmul for sm_90a (docs/check.md, 'Tile loops, warp "
              "specialization and TMA stores')")
AFTER_K = "after the loop"          # the tile body after the k-loop (HopperWalker reads "in the loop" only)
AFTER_TILES = "after the tile loop"
BEFORE_TILES = "before the tile loop"


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# ----------------------------------------------------------------------------------------------
# the walkers: TMA stores, program ids and tile-level scf.if

class _TileMixin:
    """The ops of C's TMA-store epilogue as events (``stwrite``, ``fence``, ``tstore``, ``stwait``),
    ``tt.get_program_id`` as a symbol, and an ``scf.if`` after the k-loop: its events carry its condition
    (attribute ``cond``: a Z3 Boolean)."""

    event_ops = ()

    def op(self, op: Op, env: dict, events: list, where: str) -> None:
        if op.name == "scf.if" and op.regions and where in (AFTER_K, AFTER_TILES):
            inner = [x for r in op.regions for x in walk(r)]
            if any(x.name in self.event_ops or x.name in STORE_EVENT_OPS for x in inner):
                self._cond_if(op, env, events, where)
                return
        super().op(op, env, events, where)

    def _cond_if(self, op: Op, env: dict, events: list, where: str) -> None:
        c = env.get(op.operands[0]) if op.operands else None
        if c is None or isinstance(c, tuple):
            raise err(self.path, op.line, "the condition of this scf.if around waits or stores is not a function "
                      "of the kernel's integers and the tile loop's counter", NESTED_FIX)
        c = c if is_sym(c) and z3.is_bool(c) else (z3.BoolVal(bool(c)) if not is_sym(c) else c != 0)
        for ri, region in enumerate(op.regions[:2]):
            sub: list = []
            self.block(region, dict(env), sub, where)
            rc = c if ri == 0 else z3.Not(c)
            for e in sub:
                prev = getattr(e, "cond", None)
                e.cond = rc if prev is None else z3.And(prev, rc)
                e.if_line = getattr(e, "if_line", op.line)
                events.append(e)
        for r in op.results:
            env[r] = None

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        n = op.name
        if op.results and op.results[0] in self.bind:
            env[op.results[0]] = self.bind[op.results[0]]
            return True
        if n == "tt.get_program_id" and op.results:
            m = re.search(r"get_program_id\s+(\w+)", op.text)
            env[op.results[0]] = z3.Int(f"pid_{m.group(1) if m else 'x'}")
            return True
        if n in STORE_EVENT_OPS[:3] and where == "in the loop":
            if n == FENCE:
                return True
            raise err(self.path, op.line, f"{n} inside the pipelined k-loop is outside the model", NESTED_FIX)
        if n == TMA_STORE:
            srcs = [o for o in op.operands if isinstance(env.get(o), tuple)]
            if not srcs:
                raise err(self.path, op.line, "cannot tell the shared buffer this TMA store reads",
                          "the source must be a shared allocation")
            v = env[srcs[-1]]
            events.append(HEvent("tstore", op.line, short(op), buf=v[1], slot=v[2] if v[0] == "view" else 0))
            return True
        if n == STORE_WAIT:
            if "pendings" not in op.attrs:
                raise err(self.path, op.line, f"{n} without {{pendings = N}}", "print the TTGIR with attributes")
            events.append(HEvent("stwait", op.line, short(op), count=int(op.attrs["pendings"])))
            return True
        if n == FENCE:
            events.append(HEvent("fence", op.line, short(op)))
            return True
        if n == "ttg.local_store" and len(op.operands) >= 2:
            v = env.get(op.operands[1])
            if isinstance(v, tuple) and v[0] in ("buf", "view"):
                if where == "in the loop":
                    raise err(self.path, op.line, "ttg.local_store into shared memory inside the pipelined k-loop "
                              "is outside the model", NESTED_FIX)
                events.append(HEvent("stwrite", op.line, short(op), buf=v[1], slot=v[2] if v[0] == "view" else 0,
                                     is_async=False))
                return True
        if n == "ttg.local_alloc" and op.operands and where != "in the loop":
            done = super().dialect(op, env, events, where)
            v = env.get(op.results[0]) if op.results else None
            if isinstance(v, tuple):
                events.append(HEvent("stwrite", op.line, short(op), buf=v[1], slot=0, is_async=False))
            return done
        return super().dialect(op, env, events, where)


class TileWalker(_TileMixin, HopperWalker):
    """:class:`~.ttgir_hopper.HopperWalker` with :class:`_TileMixin`."""

    event_ops = HopperWalker.event_ops + STORE_EVENT_OPS


class TileWSWalker(_TileMixin, WSWalker):
    """:class:`~.ttgir_ws.WSWalker` with :class:`_TileMixin`."""

    event_ops = WSWalker.event_ops + STORE_EVENT_OPS


# ----------------------------------------------------------------------------------------------
# detection

def _event_loops(ops: list, names: tuple) -> list:
    return [op for op in ops if op.name == "scf.for" and op.regions and any(x.name in names for x in walk(op.regions[0]))]


_PROTO = ("ttng.async_tma_copy_global_to_local", "ttng.wait_barrier", "ttng.arrive_barrier")


def is_nested_ttgir(text: str) -> bool:
    """Whether an sm_90 TTGIR holds a form of this module: a TMA k-loop inside another loop, or a TMA store in
    a warp-specialized kernel."""
    if not any(t in text for t in ("scf.for", TMA_STORE)) or "ttng." not in text:
        return False
    ws = bool(re.search(r"\bttg\.warp_specialize\b", text))
    if ws and TMA_STORE in text:
        return True
    if not ws and TMA_STORE in text and is_persistent_ttgir(text):
        return True  # the flattened persistent kernel: its ring by ttgir_persistent, its stores here
    try:
        mod = parse_module(new_dialect_names(_strip_tasks(text)), "<text>")
    except SynthError:
        return False
    for lp in walk(mod):
        if lp.name == "scf.for" and lp.regions and _event_loops([x for x in walk(lp.regions[0])], _PROTO):
            return True
    return not ws and _is_store_after_loop(mod)


def _is_store_after_loop(mod: list) -> bool:
    """One warp group, no tile loop: one TMA k-loop and a TMA store in the same block after it (attention's
    O, a one-tile matmul's C; the flattened persistent kernel's stores sit inside its loop: not this form)."""
    loops = _event_loops(list(walk(mod)), _PROTO)
    if not loops:
        return False
    block = find_block(mod, loops[0])
    if not all(any(op is lp for op in block) for lp in loops):
        return False
    pos = next(i for i, op in enumerate(block) if op is loops[-1])
    stores = [x for x in walk(mod) if x.name == TMA_STORE]
    after = [x for op in block[pos + 1:] for x in ([op] + list(walk(op.regions[0]) if op.regions else []))]
    return bool(stores) and all(any(x is y for y in after) for x in stores)


def _strip_tasks(text: str) -> str:
    text = re.sub(r"\s*\{" + TASK_ATTR.pattern + r"\}", "", text)
    text = re.sub(TASK_ATTR.pattern + r",\s*", "", text)
    return re.sub(r",\s*" + TASK_ATTR.pattern, "", text)


# ----------------------------------------------------------------------------------------------
# the tile loop

@dataclass
class TileLoop:
    """A tile loop: ``lb + t * step`` for ``t`` in ``0 .. n - 1``, ``n`` the tile count (``ub`` bound to a
    fresh symbol so conditions can be read as functions of ``t`` and ``n``)."""

    line: int
    lb: object
    step: int
    ub: object
    t: object = field(default_factory=lambda: z3.Int("t"))
    n: object = field(default_factory=lambda: z3.Int("n"))

    def facts(self) -> list:
        f = [self.n >= 0, self.t >= 0, self.t < self.n]
        lb = self.lb if is_sym(self.lb) else z3.IntVal(int(self.lb))
        ub = self.ub if is_sym(self.ub) else z3.IntVal(int(self.ub))
        if is_sym(self.lb):
            f.append(self.lb >= 0)
        f += [z3.Or(z3.And(self.n == 0, ub <= lb), z3.And(self.n >= 1, lb + (self.n - 1) * self.step < ub,
                                                          ub <= lb + self.n * self.step))]
        return f

    def iv(self):
        return (self.lb if is_sym(self.lb) else z3.IntVal(int(self.lb))) + self.t * self.step


GUARD_TEMPLATES = ("i < E - 1", "i == E - 1", "i == 0", "i > 0", "i < E - 2", "i >= E - 2", "i != E - 1")


def tile_guard(tl: TileLoop, cond) -> tuple:
    """``(kind, guard text, witness)`` of a tile-level condition: ``always``, ``never``, or ``guard`` with a
    synth expression in ``i`` (the tile index) and ``E`` (the tile count) equal to it for every tile, and a
    witness ``(t, n)`` where it is false (the smallest tile count); ``unknown`` when no template fits."""
    facts = tl.facts()
    if valid(cond, facts):
        return "always", None, None
    if valid(z3.Not(cond), facts):
        return "never", "0 != 0", _witness(tl, z3.Not(cond))
    for g in GUARD_TEMPLATES:
        gz = _to_z3(parse(g), {"i": tl.t, "E": tl.n})
        if valid(cond == gz, facts):
            return "guard", g, _witness(tl, z3.Not(cond))
    return "unknown", None, _witness(tl, z3.Not(cond))


def _witness(tl: TileLoop, c) -> Optional[tuple]:
    for n in range(1, 8):
        s = z3.Solver()
        s.set("timeout", 5000)
        s.add(*tl.facts(), c, tl.n == n)
        if s.check() == z3.sat:
            m = s.model()
            return m.eval(tl.t, model_completion=True).as_long(), n
    return None


# ----------------------------------------------------------------------------------------------
# the store program (synth.hopper.store's form, read from the TTGIR)

@dataclass
class StoreCheck:
    """One role's TMA-store epilogue: its program, the prover's report, the thread checks and the source
    line of each statement."""

    role: str
    program: Program
    report: object
    threads: tuple
    teardown: tuple
    """``(ok, detail)``."""
    sources: dict
    """op or wait name -> (line, text)."""
    subtiles: int
    notes: tuple = ()

    @property
    def ok(self) -> bool:
        return bool(self.report.ok) and all(t.ok for t in self.threads if t.cls != "teardown") and self.teardown[0]

    def render(self) -> list:
        p = self.program
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        lines = [f"  TMA store of {self.role}: {'proven' if self.ok else 'NOT PROVEN'} "
                 f"({self.subtiles} store(s) per tile through one staging buffer, sub-tiles {trip})"]
        for v in self.report.verdicts:
            w = p.waits[v.index]
            src = self.sources.get(f"wait{v.index}")
            where = f"line {src[0]}: {src[1]}" if src else w.reason
            lines.append(f"    store wait #{v.index} ({w.part}) {where}: keeps <= {to_str(w.in_flight)} stores "
                         f"reading: {v.status}")
            if v.status != "proven":
                for o in self.report.obligations:
                    if o.wait == v.index and o.status != "proven":
                        lines.append(f"      {o.status}: {o.description}")
                        if o.counterexample is not None:
                            lines.append(o.counterexample.render("        "))
        for o in self.report.global_failures:
            lines.append(f"    {o.status}: {o.description}")
            if o.counterexample is not None:
                lines.append(o.counterexample.render("      "))
        for t in self.threads:
            if t.cls == "teardown":
                continue
            lines.append(f"    {t.cls}: {'proven' if t.ok else 'refuted'}" + ("" if t.ok else f": {t.detail}"))
        lines.append(f"    teardown: {'proven' if self.teardown[0] else 'refuted'}: {self.teardown[1]}")
        for name, (line, text) in self.sources.items():
            if not name.startswith("wait"):
                lines.append(f"    {name}: line {line}: {text}")
        return lines

    def to_json(self) -> dict:
        return {"role": self.role, "ok": self.ok, "subtiles": self.subtiles,
                "waits": [{"index": v.index, "status": v.status, "line": self.sources.get(f"wait{v.index}", (None,))[0],
                           "counterexample": v.counterexample.render("") if v.counterexample else None}
                          for v in self.report.verdicts],
                "failures": [{"status": o.status, "description": o.description,
                              "counterexample": o.counterexample.render("") if o.counterexample else None}
                             for o in self.report.global_failures],
                "threads": {t.cls: {"ok": t.ok, "detail": t.detail} for t in self.threads if t.cls != "teardown"},
                "teardown": {"ok": self.teardown[0], "detail": self.teardown[1]}}


def store_program(path: str, role: str, tile: list, final: list, tiles, tl: Optional[TileLoop], *,
                  protected: set, arrive_sync: bool = True) -> tuple:
    """``(war program, thread program, sources, subtiles)`` of a role's TMA stores: ``tile`` the store events of
    one tile (in order; those with ``cond`` guarded), ``final`` those after the tile loop, ``tiles`` the tile
    count (``"E"`` or 1). The ``r`` stores of a tile are sub-tiles ``e = r t + j`` of the war program (sub-tile
    ``j``'s statements guarded ``i % r == j`` when ``r > 1``: one staging buffer, each store's write after the
    previous store read it); the thread program runs one tile per iteration, its statements in the tile's
    order (what :func:`synth.verify.hopper_store.check_threads` judges). With ``arrive_sync`` a ``bar_sync`` follows
    every store wait and precedes every TMA store (Triton's membar)."""
    bufs = {e.buf for e in tile + final if e.kind in ("stwrite", "tstore")}
    for e in tile + final:
        if e.kind in ("stwrite", "tstore") and e.buf in protected:
            raise err(path, e.line, f"{role}: {e.text} touches {e.buf}, a buffer or barrier of the TMA ring", NESTED_FIX)
    merged = ""
    if len(bufs) > 1:
        # several staging allocations (Triton's warp-specialized subtiled epilogue allocates one per store): read
        # as one buffer, the case where the allocator gives them the same shared memory. Every write must then
        # wait for every earlier store, a stronger condition than with separate buffers: proven here, proven
        # for any placement.
        first = sorted(bufs)[0]
        merged = (f"staging buffers {', '.join(sorted(bufs))} read as one (they may share shared memory: the "
                  "stronger condition)")
        tile = [_rebuf(e, first) for e in tile]
        final = [_rebuf(e, first) for e in final]
        bufs = {first}
    stores = [k for k, e in enumerate(tile) if e.kind == "tstore"]
    if not stores:
        e = next((e for e in tile + final if e.kind in STORE_KINDS), None)
        raise err(path, e.line if e else 0, f"{role}: store ops without a TMA store in the tile", NESTED_FIX)
    for e in final:
        if e.kind not in ("stwait", "fence"):
            raise err(path, e.line, f"{role}: {e.text} after the tile loop is outside the model", NESTED_FIX)
    r = len(stores)
    # sub-tile j: from after store j - 1's commit (its trailing waits belong to it) up to store j
    bounds, start = [], 0
    for j, k in enumerate(stores):
        end = stores[j + 1] if j + 1 < r else len(tile)
        if j + 1 < r:
            end = next((m for m in range(k + 1, stores[j + 1]) if tile[m].kind != "stwait"), stores[j + 1])
        bounds.append((start, end))
        start = end
    buf = sorted(bufs)[0]
    sources: dict = {}

    def guard_of_event(e, per_tile: bool):
        cond = getattr(e, "cond", None)
        if cond is None:
            return None
        kind, text, _w = tile_guard(tl, cond) if tl is not None else ("unknown", None, None)
        if kind == "always":
            return None
        if kind in ("guard", "never"):
            # the war program counts sub-tiles e = r t + j: its tile index is e / r (the tile count stays E)
            return parse(text if per_tile or r == 1 else re.sub(r"\bi\b", f"(i / {r})", text))
        raise err(path, getattr(e, "if_line", e.line), f"{role}: the condition of the scf.if around {e.text} is not "
                  "one synth can write as a function of the tile index (i < E - 1, i == 0, ...)", NESTED_FIX)

    def build(per_tile: bool):
        ops, stmts, waits, names = [], [], [], {}

        def op(kind: str, unit: str, is_async: bool = False) -> str:
            names[kind] = names.get(kind, 0) + 1
            nm = kind if names[kind] == 1 else f"{kind}{names[kind]}"
            ops.append(ProgOp(nm, unit, 0, is_async, 0 if is_async else None, None))
            return nm

        i = parse("i")
        slot = parse("i % 1")
        for j, (s0, s1) in enumerate(bounds):
            sub = parse(f"i % {r} == {j}") if (r > 1 and not per_tile) else None
            ver = parse(f"{r} * i + {j}") if (per_tile and r > 1) else i
            writer = None
            for e in tile[s0:s1]:
                g = guard_of_event(e, per_tile)
                if sub is not None:
                    g = sub if g is None else parse(f"({to_str(sub)}) && ({to_str(g)})")
                if e.kind == "stwait":
                    waits.append(Wait("body", 0, Num(e.count), "", reason=e.text))
                    sources[f"wait{len(waits) - 1}"] = (e.line, e.text)
                    stmts.append(WaitStmt(len(waits) - 1, g))
                    if arrive_sync:
                        nm = op("free", "bar_sync")
                        sources[nm] = (e.line, "bar.sync after the store wait (Triton's membar)")
                        stmts.append(OpStmt(nm, i, g))
                elif e.kind == "stwrite":
                    writer = op("stage", "st_shared")
                    sources[writer] = (e.line, e.text)
                    stmts.append(OpStmt(writer, i, g, writes=(Access(buf, ver, slot),)))
                elif e.kind == "fence":
                    nm = op("fence", "fence_proxy_async")
                    sources[nm] = (e.line, e.text)
                    stmts.append(OpStmt(nm, i, g))
                elif e.kind == "tstore":
                    if writer is None:
                        raise err(path, e.line, f"{role}: the staging buffer is not written before this TMA store",
                                  NESTED_FIX)
                    if arrive_sync:
                        nm = op("publish", "bar_sync")
                        sources[nm] = (e.line, "bar.sync before the TMA store (Triton's membar)")
                        stmts.append(OpStmt(nm, i, g))
                    nm = op("store", "tma_store", True)
                    sources[nm] = (e.line, e.text)
                    stmts.append(OpStmt(nm, i, g, 0, reads=(Access(buf, ver, slot, writer),)))
                    stmts.append(CommitStmt(0, 0, g))
        epi = []
        for e in final:
            if e.kind == "stwait":
                waits.append(Wait("epilogue", 0, Num(e.count), "", reason=e.text))
                sources[f"wait{len(waits) - 1}"] = (e.line, e.text)
                epi.append(WaitStmt(len(waits) - 1))
        if _is_int(tiles):
            trip = tiles if per_tile else tiles * r
        else:
            trip = "E" if (per_tile or r == 1) else f"{r} * E"
        parts = [Part("body", "i", parse(str(trip)), tuple(stmts))]
        if epi:
            parts.append(Part("epilogue", "i", Num(1), tuple(epi)))
        tc = trip if _is_int(trip) else "E"
        return Program(f"{role}.tma_store", "i", tc, 1, 0, tuple(ops), (ProgBuffer(buf, "shared", 1, 0),),
                       ("tma_store",), tuple(parts), tuple(waits)).with_befores()

    war = build(False)
    threads = build(True)
    if merged:
        sources["staging"] = (0, merged)
    return war, threads, sources, r


def _rebuf(e: HEvent, buf: str) -> HEvent:
    """A copy of a staging write or TMA store event on ``buf`` (its ``cond`` / ``if_line`` attributes kept)."""
    if e.kind not in ("stwrite", "tstore"):
        return e
    x = copy.copy(e)
    x.buf = buf
    return x


def store_teardown(p: Program) -> tuple:
    """``(ok, detail)``: after the role's last TMA store, an unguarded store wait with pending count 0 runs
    before the role exits (in the epilogue, or at the end of the body after its last commit)."""
    for pt in p.parts[1:]:
        for k, s in enumerate(pt.stmts):
            if isinstance(s, WaitStmt) and s.guard is None and p.waits[s.wait].in_flight == Num(0) and \
                    not any(isinstance(x, (CommitStmt,)) or (isinstance(x, OpStmt) and p.op(x.op).is_async)
                            for x in pt.stmts[k + 1:]):
                return True, (f"every store has read its staging buffer before {p.name.split('.')[0]} exits "
                              f"(wait #{s.wait} after the tile loop: {p.waits[s.wait].reason})")
    body = p.parts[0].stmts
    last_commit = max((k for k, s in enumerate(body) if isinstance(s, CommitStmt)), default=-1)
    for k in range(last_commit + 1, len(body)):
        s = body[k]
        if isinstance(s, WaitStmt) and s.guard is None and p.waits[s.wait].in_flight == Num(0):
            return True, f"every store has read its staging buffer before {p.name.split('.')[0]} exits " \
                         f"(wait #{s.wait} after the last store of every tile)"
    worst = [s for pt in p.parts for s in pt.stmts if isinstance(s, WaitStmt)]
    why = ", ".join(f"wait #{s.wait} ({p.waits[s.wait].reason}) keeps {to_str(p.waits[s.wait].in_flight)}"
                    + (f" and runs only where {to_str(s.guard)}: not at the last tile, i = E - 1" if s.guard else "")
                    for s in worst) or "no store wait"
    return False, (f"after the last tile no store wait with pending count 0 runs ({why}): the last TMA store may "
                   "still read shared memory when the role exits and the CTA's shared memory is reused")


def prove_store(role: str, progs: tuple, sources: dict, r: int, time_limit: float) -> StoreCheck:
    """The store check of a role: ``progs`` the war and thread programs of :func:`store_program`."""
    war, threads = progs
    rep = verify_program(war, time_limit=time_limit, tightness=False, smt2=False)
    return StoreCheck(role, war, rep, check_threads(threads), store_teardown(threads), sources, r)


# ----------------------------------------------------------------------------------------------
# tile-level obligations beside the programs

@dataclass
class TileObligation:
    """``carry``, ``phase_reset``, ``condition``: decided here (Z3 or a bounded search of the instances)."""

    cls: str
    ok: bool
    description: str
    detail: str = ""
    line: Optional[int] = None

    def to_json(self) -> dict:
        return {"class": self.cls, "ok": self.ok, "description": self.description, "detail": self.detail,
                "line": self.line}


# ----------------------------------------------------------------------------------------------
# one warp group: tile loop around the k-loop

@dataclass(frozen=True)
class NestedImport:
    form: str
    """``tiles`` (one warp group), ``ws_tiles`` (warp-specialized ring), ``ws_store`` (warp-specialized, one
    tile)."""
    imported: HopperImport
    tile_line: Optional[int]
    stores: tuple
    """``(role, Program, sources, subtiles)`` per role with TMA stores."""
    obligations: tuple = ()
    variants: tuple = ()
    """``(label, HopperProgram, witness text)``: the per-tile program without a wait an scf.if skips on some
    tiles."""
    notes: tuple = ()
    segments: tuple = ()
    """``(label, HopperImport)``: the programs of the pipelined loops before the last one (several loops one
    after the other, :func:`store_to_hopper`), each proven on its own."""


def _split(events: list) -> tuple:
    return [e for e in events if e.kind not in STORE_KINDS], [e for e in events if e.kind in STORE_KINDS]


def tiles_to_hopper(text: str, path: str, *, arrive_sync: bool = True) -> NestedImport:
    """The one-warp-group tile-loop form (module docstring) -> the per-tile Hopper program (for every k-trip
    count; ``min_trip_count`` 1 here, lowered to 0 by :func:`check_nested`), its store program and tile
    obligations. SynthError (exit 2) for what is outside the model."""
    text = new_dialect_names(text)
    mod = parse_module(text, path)
    names = ("ttng.async_tma_copy_global_to_local", "ttng.wait_barrier")
    loops = [op for op in walk(mod) if op.name == "scf.for" and op.regions
             and any(x.name in names for x in walk(op.regions[0]))]
    outer = [lp for lp in loops if not any(o is not lp and find_block(o.regions[0], lp) is not None for o in loops)]
    if len(outer) != 1:
        raise err(path, outer[1].line if len(outer) > 1 else 0, "several tile loops in one module", NESTED_FIX)
    tile = outer[0]
    inner = [lp for lp in loops if lp is not tile]
    if len(inner) != 1 or not any(x is inner[0] for x in tile.regions[0]):
        raise err(path, inner[1].line if len(inner) > 1 else tile.line, "the tile loop must hold one pipelined "
                  "k-loop directly (deeper nesting is outside the model)", NESTED_FIX)
    kl = inner[0]
    fblock = find_block(mod, tile)
    opos = next(i for i, op in enumerate(fblock) if op is tile)
    tbody = tile.regions[0]
    kpos = next(i for i, op in enumerate(tbody) if op is kl)
    tiv, tlb, tub, tst, titers = for_header(tile, path)
    kiv, klb, kub, kst, kiters = for_header(kl, path)
    # pass 1: the bounds
    probe: dict = dict(func_args(mod, tile))
    pw = TileWalker(path, {})
    pw.block(fblock[:opos], probe, [], BEFORE_TILES)
    tstv, tlbv = probe.get(tst), probe.get(tlb)
    if not _is_int(tstv) or tstv <= 0:
        raise err(path, tile.line, "the tile loop's step is not a positive constant", NESTED_FIX)
    probe2 = dict(probe)
    probe2[tiv] = None
    for a, _ in titers:
        probe2[a] = None
    pw.block(tbody[:kpos], probe2, [], "before the loop")
    ubv, lb0, st0 = probe2.get(kub), probe2.get(klb), probe2.get(kst)
    fixed = _is_int(ubv)
    if not fixed and not (_is_int(lb0) and st0 == 1):
        raise err(path, kl.line, "the k-loop's lower bound is not a constant or its step is not 1", NESTED_FIX)
    T = z3.Int("T")
    U = z3.Int("tiles_ub")
    bind = {} if fixed else {kub: T + lb0}
    if not _is_int(probe.get(tub)):
        bind[tub] = U
    w = TileWalker(path, bind)
    env: dict = dict(func_args(mod, tile))
    env.update(bind)
    pre: list = []
    w.block(fblock[:opos], env, pre, BEFORE_TILES)
    tl = TileLoop(tile.line, env.get(tlb), tstv, env.get(tub))
    if tl.lb is None or tl.ub is None:
        raise err(path, tile.line, "the tile loop's bounds are not functions of the kernel's integers", NESTED_FIX)
    env[tiv] = tl.iv()
    tile_names = [a for a, _ in titers]
    for a in tile_names:
        env[a] = None
    pro: list = []
    w.block(tbody[:kpos], env, pro, "before the loop")
    pro, pro_s = _split(pro)
    if pro_s:
        raise err(path, pro_s[0].line, f"{pro_s[0].text} in the tile loop before the k-loop is outside the model",
                  NESTED_FIX)
    lbv, stv = env.get(klb), env.get(kst)
    if not (_is_int(lbv) and _is_int(stv)) or stv <= 0:
        raise err(path, kl.line, "the k-loop's lower bound and step must be constants (step > 0)", NESTED_FIX)
    trip: object = max(0, math.ceil((ubv - lbv) / stv)) if fixed else T
    knames = [a for a, _ in kiters]
    carried = [(a, i) for a, i in kiters if i in tile_names]
    kinits = [env.get(i) for _, i in kiters]
    runs, sym, fits, k = fit_carried(w, kl.regions[0], env, knames, kinits, lambda kk: lbv + kk * stv, kiv,
                                     fit_phase, fit_phase_at, same_carried)
    env_after = dict(env)
    for r in kl.results:
        env_after[r] = None
    epi: list = []
    w.block(tbody[kpos + 1:], env_after, epi, AFTER_K)
    post: list = []
    env_post = dict(env)
    for r in tile.results:
        env_post[r] = None
    w.block(fblock[opos + 1:], env_post, post, AFTER_TILES)
    for e in pre:
        if e.kind not in ("init", "stwrite"):
            raise err(path, e.line, f"{e.text} before the tile loop is outside the model", NESTED_FIX)
    pre = [e for e in pre if e.kind == "init"]
    epi_h, epi_s = _split(epi)
    post_h, post_s = _split(post)
    for e in post_h:
        if e.kind not in ("inval", "dotwait"):
            raise err(path, e.line, f"{e.text} after the tile loop is outside the model", NESTED_FIX)
    for e in epi_h + pro:
        if getattr(e, "cond", None) is not None and e.kind != "dotwait":
            raise err(path, getattr(e, "if_line", e.line), f"{e.text} under an scf.if in the tile loop is outside "
                      "the model (only waits may be conditional)", NESTED_FIX)
    pro_inits = [e for e in pro if e.kind == "init"]
    hoisted = [e for e in pre if e.kind == "init"]
    if hoisted and pro_inits:
        raise err(path, pro_inits[0].line, "barriers initialized both before and inside the tile loop", NESTED_FIX)
    if carried and hoisted:
        raise err(path, kl.line, f"the k-loop's {carried[0][0]} is carried across tiles: a one-warp-group ring over "
                  "tiles is outside the model (Triton re-initializes the barriers at every tile)", NESTED_FIX)
    if carried and any(fits[knames.index(a)] is not None for a, _ in carried):
        raise err(path, kl.line, f"the k-loop's {carried[0][0]} is carried across tiles while its barriers are "
                  "re-initialized at every tile: outside the model", NESTED_FIX)
    # the per-tile program: guarded dotwaits become variants
    uncond_epi = [e for e in epi_h if getattr(e, "cond", None) is None]
    guarded = [e for e in epi_h if getattr(e, "cond", None) is not None]
    ctx = Ctx(path, k, T, fixed)
    name = func_name(mod, tile)
    warps = module_warps(text)

    def build(extra_epi: list) -> HopperImport:
        epi_all = sorted(uncond_epi + extra_epi, key=lambda e: e.line) + post_h
        return build_program(ctx, w, kl, hoisted + pro, sym, runs, epi_all, trip, None, name, warps=warps,
                             arrive_sync=arrive_sync)

    obligations: list = []
    variants: list = []
    always = []
    for e in guarded:
        kind, _g, wit = tile_guard(tl, e.cond)
        if kind == "always":
            always.append(e)
        elif kind == "unknown" and wit is None:
            raise err(path, getattr(e, "if_line", e.line), "the condition of the scf.if around this wait is not a "
                      "function of the tile loop's counter synth can decide", NESTED_FIX)
        else:
            variants.append((e, wit))
    imp = build(always + [e for e, _ in variants])
    var_out = []
    for e, wit in variants:
        others = [x for x, _ in variants if x is not e]
        vimp = build(always + others)
        where = (f"tile {wit[0]} of {wit[1]}{' (the last tile)' if wit[0] == wit[1] - 1 else ''}: the scf.if at line "
                 f"{getattr(e, 'if_line', e.line)} is false there"
                 if wit else f"a tile where the scf.if at line {getattr(e, 'if_line', e.line)} is false")
        var_out.append((f"without line {e.line} ({e.text})", vimp, where))
    protected = {b.name for b in imp.program.buffers} | {b.name for b in imp.program.barriers}
    stores = []
    if epi_s or post_s:
        war, thr, sources, r = store_program(path, "mainloop", epi_s, post_s, "E", tl, protected=protected,
                                             arrive_sync=arrive_sync)
        stores.append(("mainloop", (war, thr), sources, r))
    if hoisted:
        obligations.append(_phase_reset(imp, hoisted, tile.line))
    notes = imp.notes + (f"tile loop at line {tile.line} (tiles n >= 0), k-loop at line {kl.line}: "
                         + ("each tile initializes its barriers (line "
                            f"{pro_inits[0].line if pro_inits else '?'}) and invalidates them; the per-tile "
                            "program is proven for every k-trip count" if not hoisted else
                            f"barriers initialized once before the tile loop (line {hoisted[0].line})"),)
    return NestedImport("tiles", dataclasses.replace(imp, notes=notes), tile.line, tuple(stores),
                        tuple(obligations), tuple(var_out), notes)


def store_to_hopper(text: str, path: str, *, arrive_sync: bool = True) -> NestedImport:
    """One warp group, one pipelined k-loop, C (or attention's O) stored by TMA after it: the one-loop program
    of :mod:`.ttgir_hopper` (every ``T >= 1``; ``T >= 0`` by :func:`check_nested`), and the store program of
    its one tile (:func:`store_program` with one tile). Several pipelined loops one after the other (the causal
    attention's blocks left of the diagonal, then the diagonal band), each with its own buffers and barriers
    ended by ``inval_barrier`` before the next begins (:func:`.ttgir_hopper.loop_segments`): one program per
    loop, each proven on its own -- sound because each proves ``teardown`` (every copy observed before its
    barriers are invalidated) and ``wgmma_drain`` (every wgmma group complete), so the next loop starts with
    nothing in flight, and no two loops share a buffer or barrier (checked). SynthError (exit 2) for what is
    outside the model."""
    mod = parse_module(new_dialect_names(_strip_tasks(text)), path)
    n = max(1, len(pipelined_loops(mod)))
    segs = []
    for j in range(n):
        r = read_one_loop(text, path, TileWalker, segment=j if n > 1 else None)
        pro_h, pro_s = _split(r.pro)
        if pro_s:
            raise err(path, pro_s[0].line, f"{pro_s[0].text} before the pipelined loop is outside the model",
                      NESTED_FIX)
        epi_h, epi_s = _split(r.epi)
        if epi_s and j < n - 1:
            raise err(path, epi_s[0].line, f"{epi_s[0].text} between two pipelined loops is outside the model",
                      NESTED_FIX)
        for e in epi_h + epi_s:
            if getattr(e, "cond", None) is not None:
                raise err(path, getattr(e, "if_line", e.line), f"{e.text} under an scf.if after the loop (no tile "
                          "loop) is outside the model", NESTED_FIX)
        imp = build_program(r.ctx, r.walker, r.loop, pro_h, r.body, r.runs, epi_h, r.trip, None,
                            func_name(r.mod, r.loop), warps=module_warps(r.text), arrive_sync=arrive_sync)
        segs.append((r, imp, epi_s))
    used: dict = {}
    for r, imp, _s in segs:
        for x in [b.name for b in imp.program.buffers] + [b.name for b in imp.program.barriers]:
            if x in used and used[x] != r.loop.line:
                raise err(path, r.loop.line, f"the pipelined loops at lines {used[x]} and {r.loop.line} share {x}: "
                          "outside the model (each loop must have its own buffers and barriers)", NESTED_FIX)
            used[x] = r.loop.line
    r, imp, epi_s = segs[-1]
    protected = set(used)
    war, thr, sources, sub = store_program(path, "mainloop", epi_s, [], 1, None, protected=protected,
                                           arrive_sync=arrive_sync)
    seg_lines = ", ".join(str(x.loop.line) for x, _i, _s in segs)
    loops_note = (f"one pipelined loop at line {r.loop.line}" if n == 1 else
                  f"{n} pipelined loops one after the other (lines {seg_lines}), each with its own barriers, proven "
                  "one by one")
    notes = imp.notes + tuple(x for q, _i, _s in segs for x in q.notes) + (f"{loops_note}, then C stored by TMA "
                                                                            "(one tile)",)
    shots = tuple(TileObligation("one_shot", s.ok, f"the one-shot TMA load through barrier {s.barrier} (lines "
                                 f"{', '.join(map(str, s.lines))}) lands before it is read and before the inval",
                                 s.why, s.line or None) for q, _i, _s in segs for s in q.shots)
    earlier = tuple((f"the pipelined loop at line {q.loop.line}", i) for q, i, _s in segs[:-1])
    return NestedImport("store", dataclasses.replace(imp, notes=notes), None,
                        (("mainloop", (war, thr), sources, sub),), shots, (), notes, earlier)


_VIEWS = ("ttg.memdesc_subslice", "ttg.memdesc_reinterpret", "ttg.memdesc_trans", "ttg.memdesc_reshape")


def _store_events(path: str, ops: list, defs: dict) -> list:
    """The TMA-store events of the straight-line ``ops`` (staging buffers named by their allocation, through
    views); an op with a region holding store ops is outside the model."""
    def base(v: str, line: int) -> str:
        seen = 0
        while v in defs and defs[v].name in _VIEWS + ("ttg.memdesc_index",) and seen < 64:
            if defs[v].name == "ttg.memdesc_index":
                raise err(path, line, f"a TMA store through a slot of a multi-buffered staging buffer ({v}) is "
                          "outside the model", NESTED_FIX)
            v, seen = defs[v].operands[0], seen + 1
        return v.lstrip("%")

    out = []
    for x in ops:
        n = x.name
        if n == STORE_WAIT:
            if "pendings" not in x.attrs:
                raise err(path, x.line, f"{n} without {{pendings = N}}", "print the TTGIR with attributes")
            out.append(HEvent("stwait", x.line, short(x), count=int(x.attrs["pendings"])))
        elif n == FENCE:
            out.append(HEvent("fence", x.line, short(x)))
        elif n == "ttg.local_store" and len(x.operands) >= 2:
            out.append(HEvent("stwrite", x.line, short(x), buf=base(x.operands[1], x.line), slot=0, is_async=False))
        elif n == "ttg.local_alloc" and x.operands and x.results:
            out.append(HEvent("stwrite", x.line, short(x), buf=x.results[0].lstrip("%"), slot=0, is_async=False))
        elif n == TMA_STORE:
            out.append(HEvent("tstore", x.line, short(x), buf=base(x.operands[-1], x.line), slot=0))
        elif x.regions and any(y.name in STORE_EVENT_OPS for r in x.regions for y in walk(r)):
            raise err(path, x.line, f"TMA-store ops under {n} inside a tile's epilogue are outside the model",
                      NESTED_FIX)
    return out


def flat_to_hopper(text: str, path: str, *, arrive_sync: bool = True) -> NestedImport:
    """Triton's flattened persistent kernel (``flatten=True``): the fused loop's one-role program of
    :func:`.ttgir_persistent.persistent_to_hopper` (its TMA ring carried across tiles), and the store program
    of its per-tile epilogue (the ``scf.if`` in the fused loop that stores C by TMA: it runs once per tile,
    and the store program is proven for every number ``E >= 0`` of its runs, so whichever k-steps run it) with
    the store wait after the loop; the ``k_tiles <= 0`` branch's own tile loop of stores, when it has one, is
    a second store program. SynthError (exit 2) for what is outside the model."""
    drains: list = []
    imp = persistent_to_hopper(text, path, arrive_sync=arrive_sync, stores_checked=True, drains=drains)
    mod = parse_module(new_dialect_names(text), path)
    defs = {r: op for op in walk(mod) for r in op.results}
    names = ("ttng.async_tma_copy_global_to_local", "ttng.wait_barrier")
    lp = next(op for op in walk(mod) if op.name == "scf.for" and op.regions and
              any(x.name in names for x in walk(op.regions[0])))
    protected = {b.name for b in imp.program.buffers} | {b.name for b in imp.program.barriers}
    ifs = [x for x in lp.regions[0] if x.name == "scf.if" and any(y.name == TMA_STORE for r in x.regions
                                                                   for y in walk(r))]
    if len(ifs) > 1:
        raise err(path, ifs[1].line, "several scf.if epilogues with TMA stores in the fused loop", NESTED_FIX)
    deep = [y for y in walk(lp.regions[0]) if y.name in STORE_EVENT_OPS[:3]
            and not any(y is z for x in ifs for z in x.regions[0])]
    if deep:
        raise err(path, deep[0].line, f"{deep[0].name} in the fused loop outside its per-tile epilogue's scf.if (or "
                  "nested deeper in it) is outside the model", NESTED_FIX)
    stores = []
    if ifs:
        block = find_block(mod, lp)
        pos = next(i for i, op in enumerate(block) if op is lp)
        tile = _store_events(path, ifs[0].regions[0], defs)
        final = _store_events(path, block[pos + 1:], defs)
        war, thr, sources, sub = store_program(path, "mainloop", tile, final, "E", None, protected=protected,
                                               arrive_sync=arrive_sync)
        stores.append(("mainloop", (war, thr), sources, sub))
    # the k_tiles <= 0 branch: a tile loop of zero tiles' stores, no barrier
    for op in walk(mod):
        if op.name == "scf.if" and len(op.regions) == 2 and any(x is lp for r in op.regions for x in walk(r)):
            other = next(r for r in op.regions if not any(x is lp for x in walk(r)))
            zl = [x for x in other if x.name == "scf.for" and any(y.name == TMA_STORE for y in walk(x.regions[0]))]
            if zl:
                zpos = next(i for i, x in enumerate(other) if x is zl[0])
                tile = _store_events(path, zl[0].regions[0], defs)
                final = _store_events(path, other[zpos + 1:], defs)
                war, thr, sources, sub = store_program(path, "mainloop (k_tiles <= 0)", tile, final, "E", None,
                                                       protected=protected, arrive_sync=arrive_sync)
                stores.append(("mainloop (k_tiles <= 0)", (war, thr), sources, sub))
            break
    return NestedImport("flat", imp, None, tuple(stores), tuple(_partial_drain(path, lp, x, i) for x, i in
                                                          {x.line: (x, i) for x, i in drains}.values()),
                        (), imp.notes)


def _partial_drain(path: str, lp: Op, wait: Op, cond_if: Op) -> TileObligation:
    """A per-tile epilogue's ``warp_group_dot_wait {pendings = N > 0}`` in the fused loop: the accumulator it
    releases to the epilogue is the result of the tile's last wgmma, the group committed last before the
    ``scf.if`` (the body's last async ``warp_group_dot``); with ``N >= 1`` pending groups allowed, that group
    may still be running when the epilogue reads the accumulator registers (converts and stages C): refuted
    (class ``wgmma_wait``). Exit 2 when no async wgmma precedes the ``scf.if`` in the loop body."""
    body = lp.regions[0]
    ipos = next((i for i, x in enumerate(body) if x.line == cond_if.line), len(body))  # another parse's ops
    dots = [x for x in body[:ipos] if x.name == "ttng.warp_group_dot" and str(x.attrs.get("isAsync")) == "true"]
    n = wait.attrs.get("pendings")
    if not dots:
        raise err(path, wait.line, f"{wait.name} {{pendings = {n}}} in a per-tile epilogue with no asynchronous wgmma "
                  "before it in the loop body is outside the model", NESTED_FIX)
    d = dots[-1]
    detail = (f"on the last k-step of any tile (the scf.if at line {cond_if.line} runs): the wgmma at line {d.line} is "
              f"the last group committed before the wait at line {wait.line}, which lets {n} group(s) stay pending: "
              "that wgmma may still be writing the accumulator when the epilogue reads it (converts it and writes the "
              "staging buffer); the drain must be pendings = 0")
    return TileObligation("wgmma_wait", False, "the per-tile epilogue reads the accumulator after its last wgmma "
                          "completes", detail, wait.line)


def _phase_reset(imp: HopperImport, hoisted: list, tile_line: int) -> TileObligation:
    """Barriers initialized once before the tile loop while the k-loop restarts its slots and phases at every
    tile: tile ``t + 1`` starts where tile ``t`` left each barrier slot, so every slot must complete an even
    number of phases per tile. Searched at every k-trip count up to ``2 S + 2`` with the per-tile program's
    instances (an odd count is a counterexample; none found is reported unknown, never proven)."""
    p = imp.program
    bars = {b.name: b for b in p.barriers}
    smax = max(b.slots for b in p.barriers)
    role = p.roles[0]
    for T in range(1, 2 * smax + 3):
        seq = role_instances(p, T, role)
        arr: dict = {}
        for x in seq:
            if x.kind == "arrive":
                arr[(x.barrier, x.slot)] = arr.get((x.barrier, x.slot), 0) + x.arrivals
        for (b, s), a in sorted(arr.items()):
            phases = a // bars[b].count
            if phases % 2:
                wait = next((x for x in seq if x.kind == "wait" and x.barrier == b and x.slot == s), None)
                line = next((ln for (part, pos), (ln, _t) in imp.sources.items()), None)
                k = wait.tile if wait else 0
                detail = (f"tile 1, k-step {k}, with T = {T} k-tile(s) per tile: role mainloop's wait on barrier {b} "
                          f"slot {s} for phase {wait.phase if wait else 0} (parity {wait.parity if wait else 0}); "
                          f"{b} is initialized once before the tile loop (line {hoisted[0].line}) and tile 0 "
                          f"completed {phases} phase(s) of slot {s}, so in tile 1 the slot's current parity is "
                          f"{phases % 2} and this wait passes on tile 0's phase, before tile 1's TMA lands (the "
                          "phase restarts at every tile but the barrier is not re-initialized)")
                return TileObligation("phase_reset", False, "every barrier slot completes an even number of phases "
                                      "per tile (its phase restarts at every tile while the barrier lives across "
                                      "tiles)", detail, line)
    return TileObligation("phase_reset", False, "every barrier slot completes an even number of phases per tile",
                          "no tile with an odd phase count found up to T = {}: not proven for every T (unknown)"
                          .format(2 * smax + 2), None)


# ----------------------------------------------------------------------------------------------
# warp-specialized: the tile loop inside every partition

def ws_nested_to_hopper(text: str, path: str, *, arrive_sync: bool = True) -> NestedImport:
    """The warp-specialized forms (module docstring): ring or one-tile program, store programs, ``carry``."""
    text = new_dialect_names(_strip_tasks(text))
    mod = parse_module(text, path)
    wss = [op for op in walk(mod) if op.name == WS_OP]
    if len(wss) != 1:
        raise err(path, wss[1].line if wss else 0, f"{'several' if wss else 'no'} {WS_OP} ops", NESTED_FIX)
    ws = wss[0]
    block = find_block(mod, ws)
    pos = next(i for i, op in enumerate(block) if op is ws)
    mw = module_warps(text)
    regions = ws_regions(path, block, pos, ws, mw)
    end = pos + 1 + len(regions)
    args = func_args(mod, ws)
    T = z3.Int("T")
    probe_w = TileWSWalker(path, {})
    env: dict = dict(args)
    pre: list = []
    probe_w.block(block[:pos], env, pre, "before the loop")
    for e in pre:
        if e.kind != "init":
            raise err(path, e.line, f"{e.text} before {WS_OP}: only barrier initializations are read there", NESTED_FIX)
    post: list = []
    probe_w.block(block[end:], dict(env), post, AFTER_TILES)
    for e in post:
        if e.kind != "inval":
            raise err(path, e.line, f"{e.text} after {WS_OP} is outside the model", NESTED_FIX)
    w = TileWSWalker(path, {})
    w.buffers, w.shapes, w.elem = probe_w.buffers, probe_w.shapes, probe_w.elem
    roles: list = []
    for reg in regions:
        r = Region(reg.role, reg.warps, reg.ops, reg.line)  # a fresh role: reg.env maps arguments to captures
        r.env = dict(env) if reg.role == "default" else {a: env.get(c) for a, c in reg.env.items()}
        if reg.role != "default":
            r.env.update({k_: v for k_, v in args.items() if k_ not in r.env})
        if _ws_region(w, r, path, T):
            if r.warps > 4:
                raise err(path, r.line, f"{r.role} runs {r.warps} warps; synth reads partitions of at most 4 warps",
                          "compile with num_warps = 4")
            roles.append(r)
    if not roles:
        raise err(path, ws.line, f"no region of {WS_OP} waits on or arrives at a barrier", NESTED_FIX)
    tiled = [r for r in roles if r.tile is not None]
    if tiled and len(tiled) != len(roles):
        r = next(r for r in roles if r.tile is None)
        raise err(path, r.loop.line, f"{r.role} has no tile loop while {tiled[0].role} has one", NESTED_FIX)
    first = roles[0]
    for r in roles[1:]:
        if r.step != first.step:
            raise err(path, r.loop.line, f"the k-loop of {r.role} steps by {r.step}, the k-loop of {first.role} (line "
                      f"{first.loop.line}) by {first.step}", "every partition must run the same loop")
        if not valid(as_int_term(r.ub) == as_int_term(first.ub), []):
            raise err(path, r.loop.line, f"the k-loop of {r.role} may run a different number of times than the k-loop "
                      f"of {first.role} (line {first.loop.line})", "every partition must run the same loop")
        if tiled and not all(valid(as_int_term(a) == as_int_term(b), [])
                             for a, b in zip(r.tile_bounds, first.tile_bounds)):
            raise err(path, r.tile.line, f"the tile loop of {r.role} may run a different number of times than the tile "
                      f"loop of {first.role} (line {first.tile.line})", NESTED_FIX)
    fixed_k = _is_int(first.ub)
    ring = bool(tiled)
    if ring:
        for r in roles:
            r.ub = T  # the ring: N = tiles x k-tiles iterations, symbolic
    trip = T if (ring or not fixed_k) else max(0, math.ceil(first.ub / first.step))
    fixed = not ring and fixed_k
    if fixed and trip < 1:
        raise err(path, first.loop.line, f"the loops run {trip} times", "a Hopper pipeline needs T >= 1")
    for r in roles:
        _ws_fit(w, r, path, None if fixed else T)
    obligations = []
    if any(r.pre or r.post for r in roles):
        inits = {(e.bar, e.bar_slot): e.count for e in pre if e.kind == "init"}
        shots, unread = exchange_loads([(r.role, r.pre, r.post, r.sym) for r in roles], inits)
        if unread:
            e = min(unread, key=lambda x: x.line)
            role = next(r.role for r in roles if any(e is x for x in r.pre + r.post))
            raise err(path, e.line, f"{e.text}: {role} uses barriers or shared slots before or after its loop in a way "
                      "synth does not read (not a one-shot load handed between roles)", NESTED_FIX)
        obligations += [TileObligation("one_shot", s.ok, f"the one-shot exchange through barrier {s.barrier} (lines "
                                       f"{', '.join(map(str, s.lines))}): "
                                       + ("the load lands before any role reads it and before the inval" if s.buffers
                                          else "its producer's wait for parity 1 passes on the fresh barrier"),
                                       s.why, s.line or None) for s in shots]
    imp = build_ws_program(path, w, ws, mod, roles, pre, post, trip, fixed, None, arrive_sync)
    if ring:
        for r in roles:
            for role in imp.program.roles:
                if role.name == r.role:
                    for pt in role.program.parts:
                        for s in pt.stmts:
                            if getattr(s, "guard", None) is not None:
                                raise err(path, r.loop.line, f"{r.role}: a predicate that depends on the k-tile in a "
                                          "ring carried across tiles is outside the model", NESTED_FIX)
        obligations.append(_carry(w, imp, roles, path))
    protected = {b.name for b in imp.program.buffers} | {b.name for b in imp.program.barriers}
    raw_protected = set()
    for r in roles:
        for e in r.sym:
            raw_protected |= {e.buf, e.bar} - {""}
    stores = []
    tl = tiled[0].tl if tiled else None
    for r in roles:
        if r.tile_stores or r.final_stores:
            war, thr, sources, sub = store_program(path, r.role, r.tile_stores, r.final_stores, "E" if ring else 1,
                                                   r.tl, protected=protected | raw_protected, arrive_sync=arrive_sync)
            stores.append((r.role, (war, thr), sources, sub))
    form = "ws_tiles" if ring else "ws_store"
    notes = imp.notes + ((f"tile loop at line {tiled[0].tile.line} in every partition: one ring of N = tiles x "
                          "k-tiles iterations (each partition's count carried across tiles)",) if ring else ())
    del tl
    return NestedImport(form, dataclasses.replace(imp, notes=notes), tiled[0].tile.line if ring else None,
                        tuple(stores), tuple(obligations), (), notes)


def _ws_region(w, r: Region, path: str, T) -> bool:
    """Find the region's loops (a tile loop around the k-loop, or the k-loop alone), evaluate what is around
    them and collect its store events; False when the region has no barrier traffic."""
    evs = WSWalker.event_ops
    if not any(x.name in evs for x in walk(r.ops)):
        return False
    loops = _event_loops(r.ops, evs)
    if len(loops) != 1:
        raise err(path, loops[1].line if len(loops) > 1 else r.line, f"{r.role}: "
                  f"{'several loops' if loops else 'barrier traffic outside a loop'} in the partition", NESTED_FIX)
    top = loops[0]
    pos = next(i for i, op in enumerate(r.ops) if op is top)
    before: list = []
    w.block(r.ops[:pos], r.env, before, "before the loop")
    inner = _event_loops(top.regions[0], evs)
    if before and (inner or any(e.kind not in ("wait", "expect", "tma", "arrive") for e in before)):
        raise err(path, before[0].line, f"{before[0].text}: {r.role} uses barriers or shared slots before its loop",
                  NESTED_FIX)
    r.pre = before  # judged with every role's by exchange_loads (one-shot loads handed between roles)
    if inner:
        kl = inner[0]
        if len(inner) > 1 or _event_loops([x for x in walk(kl.regions[0])], evs):
            raise err(path, (inner[1] if len(inner) > 1 else kl).line, f"{r.role}: deeper nesting than a tile loop "
                      "around the k-loop is outside the model", NESTED_FIX)
        r.tile = top
        tiv, tlb, tub, tst, titers = for_header(top, path)
        lbv, ubv, stv = r.env.get(tlb), r.env.get(tub), r.env.get(tst)
        if not _is_int(stv) or stv <= 0 or lbv is None or ubv is None or isinstance(lbv, tuple) or isinstance(ubv, tuple):
            raise err(path, top.line, f"{r.role}: the tile loop's bounds must be functions of the kernel's integers "
                      "and its step a positive constant", NESTED_FIX)
        r.tile_bounds = (lbv, ubv, stv)
        U = z3.Int("tiles_ub")
        r.tl = TileLoop(top.line, lbv, stv, U)
        env = dict(r.env)
        env[tiv] = r.tl.iv()
        env[tub] = U  # conditions in the tile body read the tile count through this symbol
        tnames = [a for a, _ in titers]
        tinits = {a: r.env.get(i) for a, i in titers}
        for a in tnames:
            env[a] = None
        tb = top.regions[0]
        kpos = next(i for i, op in enumerate(tb) if op is kl)
        pro: list = []
        w.block(tb[:kpos], env, pro, "before the loop")
        if pro:
            raise err(path, pro[0].line, f"{pro[0].text}: {r.role} uses barriers in the tile loop before its k-loop",
                      NESTED_FIX)
        kiv, klb, kub, kst, kiters = for_header(kl, path)
        # the ring: each k-loop value carried from the tile loop starts at the tile loop's initial value
        r.mode = "reset"
        fit_env = dict(env)
        for a, i in kiters:
            if i in tnames:
                r.mode = "carried"
                fit_env[i] = tinits[i]
        r.carry = (tnames, tinits, kiters, titers)
        after: list = []
        env_after = dict(fit_env)
        for x in kl.results:
            env_after[x] = None
        w.block(tb[kpos + 1:], env_after, after, AFTER_K)
        r.tile_yield = env_after.get("__yield__")
        r.tile_yield_names = next((op.operands for op in tb if op.name == "scf.yield"), [])
        fin: list = []
        env_fin = dict(r.env)
        for x in top.results:
            env_fin[x] = None
        w.block(r.ops[pos + 1:], env_fin, fin, AFTER_TILES)
        r.env = fit_env
        loop = kl
    else:
        loop = top
        after = []
        env_after = dict(r.env)
        for x in top.results:
            env_after[x] = None
        w.block(r.ops[pos + 1:], env_after, after, AFTER_K)
        fin = []
    iv, lb, ub, st, _iters = for_header(loop, path)
    lbv, stv, ubv = r.env.get(lb), r.env.get(st), r.env.get(ub)
    if not (_is_int(lbv) and _is_int(stv)) or stv < 1 or (stv != 1 and r.tile is not None):
        raise err(path, loop.line, f"{r.role}: the k-loop's lower bound must be a constant and its step a positive "
                  "constant (1 in a tile loop)", NESTED_FIX)
    r.step = stv
    if ubv is None or isinstance(ubv, (bool, tuple)) or (is_sym(ubv) and z3.is_bool(ubv)):
        raise err(path, loop.line, f"{r.role}: the k-loop's upper bound is not a function of the kernel's integer "
                  "arguments", NESTED_FIX)
    r.loop = loop
    r.ub = ubv - lbv if _is_int(ubv) else z3.simplify(as_int_term(ubv) - lbv)
    h_after, s_after = _split(after)
    h_fin, s_fin = _split(fin)
    if r.tile is None:  # a release after the loop (attention's Q): judged by exchange_loads
        r.post = [e for e in h_after if e.kind == "arrive" and getattr(e, "cond", None) is None]
        h_after = [e for e in h_after if not any(e is x for x in r.post)]
    for e in h_after + h_fin:
        if e.kind != "dotwait" or (r.tile is not None and e.count != 0) or getattr(e, "cond", None) is not None:
            raise err(path, e.line, f"{e.text} after {r.role}'s k-loop is outside the model", NESTED_FIX)
    r.after = h_after + h_fin
    if r.tile is None:
        r.tile_stores, r.final_stores = s_after, s_fin
    else:
        r.tile_stores, r.final_stores = s_after, s_fin
    return True


def _ws_fit(w, r: Region, path: str, T) -> None:
    """Run the role's k-loop on its first iterations and symbolically (as :func:`.ttgir_ws._run_loop`); in a
    ring, from the count the tile loop starts with."""
    lp = r.loop
    iv, lb, ub, st, iters = for_header(lp, path)
    lbv = r.env[lb]
    env = dict(r.env)
    if T is not None:
        env[ub] = symbolic_bound(lbv, r.step, T)[0]  # lb + s T - d, d in [0, s): every bound of T iterations
    names = [a for a, _ in iters]
    inits = [env.get(i) for _, i in iters]
    r.runs, r.sym, r.fits, r.k = fit_carried(w, lp.regions[0], env, names, inits, lambda kk: lbv + kk * r.step, iv,
                                             fit_phase, fit_phase_at, same_carried)
    r.fit_env = env


def _carry(w, imp: HopperImport, roles: list, path: str) -> TileObligation:
    """``carry``: in every partition the k-loop's carried count enters tile ``t`` as ``t T`` and the k-loop's
    barrier slots and phases are functions of it alone (then tile ``t``'s k-step ``k`` is ring iteration
    ``t T + k``). Proven with Z3 by induction over tiles; a restart is refuted with the first barrier
    statement whose slot or parity differs from the ring's."""
    B, K, Tk = z3.Int("base"), z3.Int("k"), z3.Int("T")
    for r in roles:
        tnames, tinits, kiters, titers = r.carry
        iv, lb, ub, st, _ = for_header(r.loop, path)
        knames = [a for a, _ in kiters]
        if r.mode == "reset":
            return _carry_refute(imp, [x for x in roles if x.mode == "reset"], path)
        for j, (a, i) in enumerate(kiters):
            f = r.fits[j]
            if i not in tnames:
                if f is not None and isinstance(f, tuple) and f[0] != "view":
                    return _carry_refute(imp, [r], path)
                continue
            if f is None or f[0] != "aff" or f[1] != 1:
                raise err(path, r.loop.line, f"{r.role}: the k-loop's {a}, carried across tiles, is not a counter "
                          "(k + c): outside the model", NESTED_FIX)
            # the tile loop yields the k-loop's result for this value
            ti = tnames.index(i)
            res = r.loop.results
            rname = res[0] if len(res) == 1 else f"{res[0]}#{j}"
            yn = r.tile_yield_names
            if ti >= len(yn) or yn[ti] != rname:
                return TileObligation("carry", False, f"{r.role}: the tile loop carries the k-loop's count {a}",
                                      f"the tile loop yields {yn[ti] if ti < len(yn) else 'nothing'} for {i}, not the "
                                      f"k-loop's count {rname} after its T iterations", r.tile.line)
            if not _is_int(tinits[i]) or tinits[i] != f[2]:
                pass  # the fit was run from the tile loop's initial value: the ring starts there
        # the k-loop's events depend on the carried count only (not on its own induction variable)
        env = dict(r.fit_env)
        env[iv] = z3.Int("kiv_free")
        for j, (a, i) in enumerate(kiters):
            f = r.fits[j]
            env[a] = None if f is None else (("view", f[1], fit_phase_at(f[3], r.k), f[2]) if f[0] == "view"
                                             else fit_phase_at(f, r.k))
        evs: list = []
        try:
            w.block(r.loop.regions[0], env, evs, "in the loop")
        except SynthError:
            evs = []
        if len(evs) != len(r.sym) or not all(_same_event(a, b) for a, b in zip(evs, r.sym)):
            found = _local_k_refute(w, r, kiters, iv, path)
            if found is not None:
                return found
            raise err(path, r.loop.line, f"{r.role}: a slot or phase in the k-loop depends on the tile-local k, not "
                      "on the count carried across tiles, and no tile where it differs from the ring's was found: "
                      "outside the model of the ring", NESTED_FIX)
    del B, K, Tk
    return TileObligation("carry", True, "every partition enters tile t with count t T (the tile loop starts the "
                          "count at 0 and yields the k-loop's count after its T iterations), and its slots and "
                          "phases are functions of that count: tile t's k-step k is ring iteration t T + k",
                          "proven by induction over tiles", roles[0].tile.line)


def _conc(x, var, i: int):
    """``x`` (an int, a Z3 term in ``var``, a bool) at ``var = i`` as an int, or None when it is not known."""
    if x is None or isinstance(x, tuple):
        return None
    if is_sym(x):
        v = z3.simplify(z3.substitute(x, (var, z3.IntVal(i))))
        if z3.is_true(v) or z3.is_false(v):
            return int(z3.is_true(v))
        return v.as_long() if z3.is_int_value(v) else None
    return int(x)


def _local_k_refute(w, r: Region, kiters: list, iv: str, path: str) -> Optional[TileObligation]:
    """A k-loop whose slots or phases depend on its own (tile-local) induction variable in a ring: the first
    ``(tile t, T, k-step k)`` and barrier statement where, run with the count the ring carries there (``t T +
    k``) and the tile-local ``k``, its slot or phase differs from the ring's iteration ``t T + k`` (the
    statement in the ring program). None when no such place is found in tiles 1..2, ``T`` 1..8."""
    _iv, lb, _ub, _st, _ = for_header(r.loop, path)
    lbv = r.fit_env.get(lb, 0)
    if not _is_int(lbv):
        return None
    for tt in (1, 2):
        for TT in range(1, 9):
            for kk in range(TT):
                ring = tt * TT + kk
                env = dict(r.fit_env)
                env[iv] = lbv + kk
                for j, (a, _i) in enumerate(kiters):
                    f = r.fits[j]
                    env[a] = None if f is None else (("view", f[1], fit_phase_at(f[3], ring), f[2]) if f[0] == "view"
                                                     else fit_phase_at(f, ring))
                evs: list = []
                try:
                    w.block(r.loop.regions[0], env, evs, "in the loop")
                except SynthError:
                    return None
                if len(evs) != len(r.sym):
                    return None
                for got, want in zip(evs, r.sym):
                    if not got.bar:
                        continue
                    gs, ws_ = _conc(got.bar_slot, r.k, ring), _conc(want.bar_slot, r.k, ring)
                    gp, wp = _conc(got.phase, r.k, ring), _conc(want.phase, r.k, ring)
                    if gs == ws_ and (gp is None or wp is None or gp % 2 == wp % 2):
                        continue
                    what = ("waits on" if got.kind == "wait" else "arrives on" if got.kind == "arrive" else
                            "completes on")
                    detail = (f"tile {tt}, k-step {kk}, with T = {TT} k-tile(s) per tile: partition {r.role} {what} "
                              f"barrier {got.bar} at line {got.line} ({got.text}) with slot {gs} and parity {gp}, "
                              f"computed from the tile-local k = {kk}; the ring is at count {ring} = t T + k there, "
                              f"which means slot {ws_} and parity {wp}: "
                              + ("the wait passes on a phase of an earlier tile, before this tile's data lands (or "
                                 "waits for a phase that never completes)" if got.kind == "wait" else
                                 "it names a phase the ring does not expect") +
                              f". The barriers live across tiles (initialized once before {WS_OP}), so a parity "
                              "from the tile-local k is wrong unless T is a multiple of twice the stages")
                    return TileObligation("carry", False, f"{r.role}: the k-loop's slots and phases follow the count "
                                          "carried across tiles", detail, got.line)
    return None


def _same_event(a: HEvent, b: HEvent) -> bool:
    if a.kind != b.kind or a.bar != b.bar or a.buf != b.buf:
        return False
    for x, y in ((a.slot, b.slot), (a.bar_slot, b.bar_slot), (a.phase, b.phase)):
        if x is None and y is None:
            continue
        if x is None or y is None or isinstance(x, tuple) or isinstance(y, tuple):
            return False
        xz = x if is_sym(x) else z3.IntVal(int(x))
        yz = y if is_sym(y) else z3.IntVal(int(y))
        if z3.is_bool(xz) != z3.is_bool(yz) or not valid(xz == yz, []):
            return False
    return True


def _carry_refute(imp: HopperImport, resets: list, path: str) -> TileObligation:
    """The k-loop's count restarts at every tile (its init is not the tile loop's carried count) while the
    barriers are initialized once: at tile ``t`` a role uses the tile-local count ``k + c`` where the ring is at
    ``t T + k + c``. The counterexample: the smallest ``(t, T, k)`` and barrier statement (a wait on a ``full``
    barrier first, then any wait, then the rest) whose slot is the ring's but whose parity is not (the wait
    passes one phase early), else whose slot differs."""
    cands = []
    for r in resets:
        body = imp.program.role(r.role).program.part("body")
        for pos, s in enumerate(body.stmts):
            st = s.barrier.state if isinstance(s, OpStmt) and s.barrier is not None else getattr(s, "state", None)
            bar = s.barrier.barrier if isinstance(s, OpStmt) and s.barrier is not None else getattr(s, "barrier", None)
            if st is None or not isinstance(bar, str):
                continue
            kind = imp.program.barrier(bar).kind
            rank = 0 if isinstance(s, TryWaitStmt) and kind == "full" else 1 if isinstance(s, TryWaitStmt) else 2
            cands.append((rank, r, pos, s, st, bar))
    cands.sort(key=lambda x: x[0])
    found = None
    for same_slot in (True, False):
        for tt in range(1, 3):
            for TT in range(1, 9):
                for kk in range(TT):
                    for _rank, r, pos, s, st, bar in cands:
                        S, slots = st.stages, imp.program.barrier(bar).slots
                        lc = int(evaluate(st.count, {"i": kk, "T": TT}))
                        rc = int(evaluate(st.count, {"i": tt * TT + kk, "T": TT}))
                        ls, rs = (lc % S) % slots, (rc % S) % slots
                        lp, rp = (lc // S + st.phase) % 2, (rc // S + st.phase) % 2
                        if lp != rp and (ls == rs or not same_slot):
                            found = (tt, TT, kk, r, pos, s, st, bar, lc, rc, ls, rs, lp, rp)
                            break
                    if found:
                        break
                if found:
                    break
            if found:
                break
        if found:
            break
    if found is None:
        return TileObligation("carry", False, f"{resets[0].role}: the k-loop's count restarts at every tile",
                              "no barrier statement found to name", resets[0].loop.line)
    tt, TT, kk, r, pos, s, st, bar, lc, rc, ls, rs, lp, rp = found
    S = st.stages
    kind = imp.program.barrier(bar).kind
    line, text = imp.sources.get((r.role, "body", pos), (r.loop.line, ""))
    ring_phase = rc // S - st.phase
    if isinstance(s, TryWaitStmt):
        what = f"waits on barrier {bar} slot {ls} with parity {lp} (the tile-local count {lc}: phase {lc // S - st.phase})"
        harm = ("it reads the slot before tile {}'s copy of k-step {} lands".format(tt, kk) if kind == "full" else
                "its refill may overwrite the slot while a consumer still reads it")
        why = (f"; the ring means phase {ring_phase} of slot {rs} (count {rc} = t T + k), and a wait for parity {lp} "
               f"passes once {ring_phase} phase(s) of the slot completed, one phase early: {harm}"
               if ls == rs else f"; the ring uses slot {rs} there (count {rc} = t T + k)")
    else:
        what = (f"{'arrives on' if isinstance(s, ArriveStmt) else 'completes its copy on'} barrier {bar} slot {ls} "
                f"naming phase {lc // S} (parity {lp})")
        why = f"; the ring's phase there is {rc // S} of slot {rs} (parity {rp}, count {rc} = t T + k)"
    detail = (f"tile {tt}, k-step {kk}, with T = {TT} k-tile(s) per tile: partition {r.role} {what} at line {line} "
              f"({text}); {bar} is initialized once before {WS_OP}, so its phases run on across tiles{why}. The "
              f"k-loop's count restarts at every tile (its init at line {r.loop.line} is not the tile loop's "
              "carried count) while the barrier is not re-initialized")
    return TileObligation("carry", False, f"{r.role}: the count entering tile t is the ring's, t T", detail, line)


# ----------------------------------------------------------------------------------------------
# the check

class _TilesCheck(HopperCheck):
    """:class:`~.ttgir_hopper.HopperCheck` of the per-tile program: a failure also says where it stands in the
    tile loop (every tile runs the program from freshly initialized barriers)."""

    def failure_lines(self, ob) -> list:
        cex = ob.counterexample
        at = WSCheck.where(self, ob)
        if cex is None:
            return super().failure_lines(ob)
        m = re.match(r"[^:]+:[^:]+:(\w+):", ob.id)
        part = m.group(1) if m else "body"
        step = {"prologue": "the k-loop's prologue, step", "body": "k-loop iteration", "epilogue": "after the k-loop, step"}
        return super().failure_lines(ob) + [
            f"      at: {at + '; ' if at else ''}in every tile (each tile re-initializes its barriers): "
            f"{step.get(part, part)} {cex.i}, with T = {cex.trip_count} k-tile(s) per tile (tile 0 of any tile count)"]


class _RingCheck(WSCheck):
    """:class:`~.ttgir_ws.WSCheck` of the ring: ring iteration ``i`` is tile ``t``'s k-step ``k`` for every
    ``t T + k = i``."""

    def failure_lines(self, ob) -> list:
        out = super().failure_lines(ob)
        cex = ob.counterexample
        if cex is not None and cex.i >= 0:
            out.append(f"      in the tile loop: ring iteration {cex.i} of N = {cex.trip_count} = tiles x k-tiles, i.e. "
                       f"tile t, k-step k for every t T + k = {cex.i} (e.g. tile 0, k-step {cex.i} of one tile of "
                       f"{cex.trip_count} k-tiles)")
        return out


@dataclass(frozen=True)
class NestedCheck:
    """``synth check`` of a tile-loop / TMA-store TTGIR: the per-tile or ring program's report, its variants,
    the store programs' checks and the tile obligations; the interface of :class:`~.ttgir_hopper.HopperCheck`."""

    nested: NestedImport
    report: object
    variant_reports: tuple = ()
    stores: tuple = ()
    seconds: float = 0.0
    trip_count: Optional[int] = None
    segment_reports: tuple = ()
    """``(label, report)`` of each earlier pipelined loop (:attr:`NestedImport.segments`)."""

    @property
    def imported(self) -> HopperImport:
        return self.nested.imported

    @property
    def ok(self) -> bool:
        return (bool(self.report.ok) and all(r.ok for _, r, _ in self.variant_reports)
                and all(r.ok for _, r in self.segment_reports)
                and all(s.ok for s in self.stores) and all(o.ok for o in self.nested.obligations))

    def _inner(self, report=None):
        cls = {"tiles": _TilesCheck, "ws_tiles": _RingCheck, "store": HopperCheck,
               "flat": PersistentCheck}.get(self.nested.form, WSCheck)
        return cls(self.nested.imported, report if report is not None else self.report)

    def title(self) -> str:
        n, p = self.nested, self.nested.imported.program
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        if self.trip_count is not None:
            trip = f"{p.trip_count} = {self.trip_count}"
        what = {"tiles": f"Triton sm_90 tile loop (line {n.tile_line}, every tile count n >= 0) around a pipelined "
                         f"k-loop (line {n.imported.loop_line}, k-tiles {trip}), one warp group, barriers "
                         f"{'re-initialized per tile' if not any(o.cls == 'phase_reset' for o in n.obligations) else 'initialized once'}",
                "ws_tiles": f"Triton warp-specialized sm_90 tile loop (line {n.tile_line}) in every partition "
                            f"({WS_OP} at line {n.imported.loop_line}, roles "
                            f"{', '.join(r.name for r in p.roles)}): one ring of {trip} iterations "
                            "(T = tiles x k-tiles)",
                "ws_store": f"Triton warp-specialized sm_90 pipeline ({WS_OP} at line {n.imported.loop_line}, roles "
                            f"{', '.join(r.name for r in p.roles)}), trip count {trip}, C stored by TMA",
                "store": f"Triton sm_90 TMA + mbarrier + wgmma pipeline, loop at line {n.imported.loop_line}, trip "
                         f"count {trip}, one warp group, its result stored by TMA",
                "flat": f"Triton sm_90 persistent matmul (flattened: tiles x k-tiles in one loop at line "
                        f"{n.imported.loop_line}, trip count {trip}), C stored by TMA per tile"}[n.form]
        return f"{n.imported.path}: {what}: {'PROVEN' if self.ok else 'NOT PROVEN'}"

    def render(self, verbose: bool = False) -> str:
        lines = [self.title()]
        inner = self._inner().render(verbose).splitlines()
        lines += inner[1:]
        for (label, _vimp, where), (_l, rep, _w) in zip(self.nested.variants, self.variant_reports):
            lines.append(f"  on the tiles where a conditional wait does not run ({label}), e.g. {where}: "
                         f"{'proven' if rep.ok else 'NOT PROVEN'}")
            if not rep.ok:
                sub = self._inner(rep).render().splitlines()
                cut = next((k for k, x in enumerate(sub) if x.startswith("  statements")), len(sub))
                lines += ["  " + x for x in sub[1:cut]]
        for (label, imp), (_l, rep) in zip(self.nested.segments, self.segment_reports):
            lines.append(f"  {label} (its own barriers, ended before the next loop): "
                         f"{'proven' if rep.ok else 'NOT PROVEN'}")
            sub = HopperCheck(imp, rep).render().splitlines()
            cut = next((k for k, x in enumerate(sub) if x.startswith("  statements")), len(sub))
            lines += ["  " + x for x in sub[1:cut]]
        for s in self.stores:
            lines += s.render()
        for o in self.nested.obligations:
            lines.append(f"  {o.cls}: {'proven' if o.ok else 'refuted'}: {o.description}")
            if o.detail:
                lines.append(f"    {o.detail}")
        for n in self.nested.notes[-1:]:
            lines.append(f"  note: {n}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        d = self._inner().to_json()
        d["ok"] = self.ok
        d["source"] = {"tiles": "triton-sm90-tiles", "ws_tiles": "triton-sm90-ws-tiles",
                       "ws_store": "triton-sm90-ws-store", "store": "triton-sm90-store",
                       "flat": "triton-sm90-persistent"}[self.nested.form]
        d["tile_line"] = self.nested.tile_line
        d["tile_obligations"] = [o.to_json() for o in self.nested.obligations]
        d["stores"] = [s.to_json() for s in self.stores]
        d["variants"] = [{"label": label, "where": where, "ok": bool(rep.ok), "report": rep.to_json()}
                         for (label, _v, where), (_l, rep, _w) in zip(self.nested.variants, self.variant_reports)]
        d["segments"] = [dict(HopperCheck(imp, rep).to_json(), label=label)
                         for (label, imp), (_l, rep) in zip(self.nested.segments, self.segment_reports)]
        if d["segments"]:
            for seg in d["segments"]:
                d["failures"] = d.get("failures", []) + seg.get("failures", [])
        d["seconds"] = round(self.seconds, 3)
        return d


def nested_to_hopper(text: str, path: str, *, arrive_sync: bool = True) -> NestedImport:
    """:func:`ws_nested_to_hopper` for a warp-specialized TTGIR, else :func:`tiles_to_hopper`."""
    if re.search(r"\bttg\.warp_specialize\b", text):
        return ws_nested_to_hopper(text, path, arrive_sync=arrive_sync)
    if TMA_STORE in text and is_persistent_ttgir(text):
        return flat_to_hopper(text, path, arrive_sync=arrive_sync)
    try:
        mod = parse_module(new_dialect_names(_strip_tasks(text)), path)
    except SynthError:
        mod = None
    if mod is not None and not any(lp.name == "scf.for" and lp.regions and
                                   _event_loops(list(walk(lp.regions[0])), _PROTO) for lp in walk(mod)):
        return store_to_hopper(text, path, arrive_sync=arrive_sync)
    return tiles_to_hopper(text, path, arrive_sync=arrive_sync)


def _with_min(p, m: int):
    if isinstance(p.trip_count, int) or m >= p.min_trip_count:
        if m > p.min_trip_count and not isinstance(p.trip_count, int):
            roles = tuple(dataclasses.replace(r, program=dataclasses.replace(r.program, min_trip_count=m))
                          for r in p.roles)
            return dataclasses.replace(p, min_trip_count=m, roles=roles)
        return p
    return zero_trip_program(p) if m == 0 else p


def check_nested(text: str, path: str, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
                 time_limit: float = 10.0, tightness: bool = True, arrive_sync: bool = True) -> NestedCheck:
    """Map (:func:`nested_to_hopper`) and prove: the per-tile or ring program with
    :func:`synth.verify.phases.verify_hopper` for every k-trip count (ring length) ``>= min_trip_count``
    (default 0: a CTA without a tile, a tile without a k-tile), each variant, each store program."""
    t0 = time.perf_counter()
    n = nested_to_hopper(text, path, arrive_sync=arrive_sync)
    m = 0 if min_trip_count is None else min_trip_count
    if trip_count is not None and trip_count < 1:
        raise SynthError(Loc_(path), f"--trip-count {trip_count}: a Hopper pipeline is checked for one trip count "
                         ">= 1 (the default covers 0)", "drop --trip-count")
    p = _with_min(n.imported.program, m)
    if trip_count is not None and isinstance(p.trip_count, int) and trip_count != p.trip_count:
        raise SynthError(Loc_(path, n.imported.loop_line), f"the loops run {p.trip_count} times, not {trip_count}",
                         "drop --trip-count")
    n = dataclasses.replace(n, imported=dataclasses.replace(n.imported, program=p))
    rep = verify_hopper(p, time_limit=time_limit, tightness=tightness, trip_count=trip_count)
    vreps = []
    for label, vimp, where in n.variants:
        vp = _with_min(vimp.program, m)
        vreps.append((label, verify_hopper(vp, time_limit=time_limit, tightness=False, trip_count=trip_count), where))
    sreps, segs = [], []
    for label, simp in n.segments:
        sp = _with_min(simp.program, m)
        segs.append((label, dataclasses.replace(simp, program=sp)))
        sreps.append((label, verify_hopper(sp, time_limit=time_limit, tightness=tightness)))
    n = dataclasses.replace(n, segments=tuple(segs))
    stores = tuple(prove_store(role, prog, sources, sub, time_limit) for role, prog, sources, sub in n.stores)
    return NestedCheck(n, rep, tuple(vreps), stores, time.perf_counter() - t0, trip_count, tuple(sreps))


def Loc_(path: str, line: int = 0):
    return Loc(path, line, 1 if line else 0)


__all__ = ["is_nested_ttgir", "nested_to_hopper", "tiles_to_hopper", "store_to_hopper", "flat_to_hopper", "ws_nested_to_hopper", "check_nested",
           "NestedCheck", "NestedImport", "StoreCheck", "TileObligation", "store_program", "tile_guard", "TileLoop"]

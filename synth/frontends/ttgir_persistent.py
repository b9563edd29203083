"""Triton's persistent TMA matmul, flattened (``tl.range(..., flatten=True)``) -> one-loop Hopper program.

Triton 3.9's ``add_fuse_nested_loops`` pass (sm_80/sm_90) fuses a persistent kernel's tile loop and its
k-loop into **one** ``scf.for`` of ``tiles * max(k_tiles, 1)`` iterations, which its pipeliner then
pipelines like any other loop: the TMA ring's slots and phase bits are carried across tiles, and the
per-tile epilogue (the accumulator drain ``warp_group_dot_wait {pendings = 0}`` and the C tile's TMA
store) runs inside the loop under ``scf.if`` on the k-tile counter. The fused loop sits in the ``else``
branch of an ``scf.if`` on ``k_tiles <= 0`` (the ``then`` branch stores zeros and has no barriers).

This front-end reads that shape with :mod:`.ttgir_hopper`'s reader and prover, for every trip count
``T >= 1`` of the fused loop (every tile count and every K with ``k_tiles >= 1``):

* the values before the ``scf.if`` are evaluated first (the loop's bounds and constants live there);
* the branch without the loop must hold no barrier, TMA load or wgmma op;
* each per-tile epilogue ``scf.if`` inside the loop is **left out** of the program, after checking that
  it holds only ``warp_group_dot_wait {pendings = 0}`` (a wait that only makes the program stricter: the
  proof without it holds with it), the TMA store of the C tile (``async_tma_copy_local_to_global``,
  ``async_tma_store_wait``, ``fence_async_shared``, ``local_store``) and scalar code, and that these touch
  no TMA-loaded buffer or barrier; the TMA stores (a bulk-group protocol on their own buffer) and the
  ``async_tma_store_wait`` after the loop are not checked. The report names each part left out.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import z3

from ..errors import SynthError
from .mlirtext import Op, parse_module, walk
from .scfloop import err, find_block, fit_carried, for_header
from .ttgir import new_dialect_names
from .ttgir_hopper import (DOT_WAIT, FIX, TMA, WAIT, Ctx, HopperCheck, HopperImport, HopperWalker, build_program,
                           fit_phase, fit_phase_at, func_name, module_warps, prove_mapped, same_carried)

STORE_OPS = ("ttng.async_tma_copy_local_to_global", "ttng.async_tma_store_wait", "ttng.fence_async_shared",
             "ttg.local_store", "ttg.local_dealloc", "ttg.local_alloc")
"""The TMA store of a tile's epilogue: not mbarrier traffic; read past, never checked."""
EPILOGUE_OPS = STORE_OPS + (DOT_WAIT,)
PROTOCOL_OPS = (TMA, WAIT, "ttng.barrier_expect", "ttng.init_barrier", "ttng.inval_barrier", "ttng.warp_group_dot",
                "ttng.arrive_barrier", "ttg.async_copy_global_to_local")


class PersistentWalker(HopperWalker):
    """:class:`~.ttgir_hopper.HopperWalker` that reads past a per-tile epilogue ``scf.if`` in the loop and the
    TMA-store ops around it (each recorded in :attr:`left_out`)."""

    stores_checked = False
    """Set by a caller that checks the TMA stores itself (:func:`.ttgir_nested.flat_to_hopper`): the notes say
    so instead of "not checked"."""

    def __init__(self, path: str, bind: dict) -> None:
        super().__init__(path, bind)
        self.left_out: list = []
        self.touched: dict = {}
        """Shared allocations the left-out epilogue stores through (name -> op)."""
        self.partial_drains: list = []
        """``(warp_group_dot_wait op, its scf.if)`` with ``pendings > 0`` in a per-tile epilogue (read only with
        :attr:`stores_checked`; otherwise exit 2)."""

    def op(self, op: Op, env: dict, events: list, where: str) -> None:
        if op.name == "scf.if" and op.regions and where == "in the loop":
            inner = [x for r in op.regions for x in walk(r)]
            if any(x.name in self.event_ops or x.name in STORE_OPS for x in inner):
                self._epilogue(op, inner, env)
                for r in op.results:
                    env[r] = None
                return
        super().op(op, env, events, where)

    def _epilogue(self, op: Op, inner: list, env: dict) -> None:
        for x in inner:
            if x.name in PROTOCOL_OPS or (x.name.startswith("ttng.") and x.name not in EPILOGUE_OPS):
                raise err(self.path, x.line, f"{x.name} under scf.if (line {op.line}) inside the pipelined loop is "
                          "outside the model: only a per-tile epilogue (warp_group_dot_wait {pendings = 0} and the "
                          "TMA store of the C tile) may be conditional", FIX)
            if x.name == DOT_WAIT and x.attrs.get("pendings") != 0:
                if not self.stores_checked:  # the caller that checks the stores judges it (flat_to_hopper)
                    raise err(self.path, x.line, f"{x.name} {{pendings = {x.attrs.get('pendings')}}} under scf.if: a "
                              "conditional wait is left out only when it waits for every group (pendings = 0)", FIX)
                self.partial_drains.append((x, op))
            if x.name in STORE_OPS:
                for o in x.operands:
                    v = env.get(o)
                    if isinstance(v, tuple):  # checked against the pipeline's buffers and barriers once known
                        self.touched.setdefault(v[1], x)
        if not self.left_out or self.left_out[-1][0] != op.line:
            waits = sum(1 for x in inner if x.name == DOT_WAIT and x.attrs.get("pendings") == 0)
            partial = sum(1 for x in inner if x.name == DOT_WAIT and x.attrs.get("pendings") != 0)
            stores = sum(1 for x in inner if x.name == "ttng.async_tma_copy_local_to_global")
            self.left_out.append((op.line, f"line {op.line}: the per-tile epilogue (scf.if): {waits} "
                                  f"warp_group_dot_wait {{pendings = 0}} (stricter than the program without it)"
                                  + (f", {partial} with pendings > 0 (judged below: wgmma_wait)" if partial else "")
                                  + f" and {stores} TMA store(s) of the C tile "
                                  + ("(checked as the store program below)" if self.stores_checked else
                                     "(not checked)")))

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        if op.name in STORE_OPS[:3] and where != "in the loop":
            note = (op.line, f"line {op.line}: {op.name} (the TMA stores' drain, "
                             + ("checked as the store program's teardown)" if self.stores_checked else "not checked)"))
            if note not in self.left_out:
                self.left_out.append(note)
            return True
        return super().dialect(op, env, events, where)


def _tma_loops(mod: list) -> list:
    """The ``scf.for`` loops of ``mod`` whose body holds a TMA load or a barrier wait."""
    return [op for op in walk(mod) if op.name == "scf.for" and op.regions
            and any(x.name in (TMA, WAIT) for x in walk(op.regions[0]))]


def _pipelined_loop(mod: list) -> Optional[Op]:
    loops = _tma_loops(mod)
    return loops[0] if len(loops) == 1 else None


def _enclosing_if(mod: list, lp: Op) -> Optional[tuple]:
    """``(block holding the scf.if, the scf.if, index of the region holding lp)`` when the pipelined loop's
    block is a branch of an ``scf.if`` of the function body."""
    for op in walk(mod):
        if op.name == "scf.if" and len(op.regions) == 2:
            for ri, r in enumerate(op.regions):
                if any(x is lp for x in r):
                    return find_block(mod, op), op, ri
    return None


def is_persistent_ttgir(text: str) -> bool:
    """Whether an sm_90 TTGIR holds Triton's flattened persistent shape: its one TMA loop inside a branch of
    an ``scf.if``, or holding an ``scf.if`` with a wgmma wait or a TMA store."""
    if "scf.if" not in text or not any(t in text for t in (TMA, WAIT)):
        return False
    try:
        mod = parse_module(new_dialect_names(text), "<text>")
    except SynthError:
        return False
    lp = _pipelined_loop(mod)
    if lp is None:
        return False
    if _enclosing_if(mod, lp) is not None:
        return True
    return any(x.name == "scf.if" and any(y.name in EPILOGUE_OPS for r in x.regions for y in walk(r))
               for x in walk(lp.regions[0]))


def persistent_to_hopper(text: str, path: str, *, min_trip_count: Optional[int] = None,
                         arrive_sync: bool = True, stores_checked: bool = False,
                         drains: Optional[list] = None) -> HopperImport:
    """Read Triton's flattened persistent sm_90 TTGIR (module docstring) into a one-role Hopper program of
    the fused loop; SynthError (exit 2) for what is outside the model. Threads, collectives and
    ``arrive_sync`` as :func:`~.ttgir_hopper.ttgir_to_hopper`. ``stores_checked``: the caller checks the TMA
    stores (the notes say so) and judges each per-tile ``warp_group_dot_wait`` with ``pendings > 0``, appended
    to ``drains`` as ``(op, its scf.if)`` instead of exit 2."""
    text = new_dialect_names(text)
    mod = parse_module(text, path)
    loops = _tma_loops(mod)
    if len(loops) != 1:
        raise err(path, loops[1].line if loops else 0, "the persistent kernel must have one pipelined (fused) loop: "
                  "compile it with tl.range(..., flatten=True)", FIX)
    lp = loops[0]
    block = find_block(mod, lp)
    pos = next(i for i, op in enumerate(block) if op is lp)
    outer = _enclosing_if(mod, lp)
    w = PersistentWalker(path, {})
    w.stores_checked = stores_checked
    env: dict = {}
    pre: list = []
    if outer is not None:
        oblock, oif, ri = outer
        other = oif.regions[1 - ri]
        bad = next((x for x in walk(other) if x.name in PROTOCOL_OPS), None)
        if bad is not None:
            raise err(path, bad.line, f"{bad.name} in the other branch of the scf.if (line {oif.line}) around the "
                      "pipelined loop: both branches pipeline, which is outside the model", FIX)
        w.block(oblock[:next(i for i, op in enumerate(oblock) if op is oif)], env, pre, "before the loop")
        w.left_out.append((oif.line, f"line {oif.line}: the scf.if around the loop: its branch without the loop "
                           "(no barrier, TMA load or wgmma) is not checked"))
    iv, lb, ub, st, iters = for_header(lp, path)
    probe = dict(env)
    PersistentWalker(path, {}).block(block[:pos], probe, [], "before the loop")
    T = z3.Int("T")
    ubv, lb0, st0 = probe.get(ub), probe.get(lb), probe.get(st)
    fixed = isinstance(ubv, int) and not isinstance(ubv, bool)
    if not fixed and not (isinstance(lb0, int) and not isinstance(lb0, bool) and st0 == 1):
        raise err(path, lp.line, "the fused loop's lower bound is not a constant or its step is not 1", FIX)
    w.bind = {} if fixed else {ub: T + lb0}
    env.update(w.bind)
    w.block(block[:pos], env, pre, "before the loop")
    lbv, stv = env.get(lb), env.get(st)
    if not (isinstance(lbv, int) and isinstance(stv, int)) or isinstance(lbv, bool) or stv <= 0:
        raise err(path, lp.line, "the fused loop's lower bound and step must be constants (step > 0)", FIX)
    trip: object = max(0, math.ceil((ubv - lbv) / stv)) if fixed else T
    if fixed and trip < 1:
        raise err(path, lp.line, f"the fused loop runs {trip} times", "a Hopper pipeline needs T >= 1")
    names = [a for a, _ in iters]
    inits = [env.get(i) for _, i in iters]
    runs, sym, _fits, k = fit_carried(w, lp.regions[0], env, names, inits, lambda kk: lbv + kk * stv, iv, fit_phase,
                                      fit_phase_at, same_carried)
    epi: list = []
    env_after = dict(env)
    for r in lp.results:
        env_after[r] = None
    w.block(block[pos + 1:], env_after, epi, "after the loop")
    imp = build_program(Ctx(path, k, T, fixed), w, lp, pre, sym, runs, epi, trip, min_trip_count,
                        func_name(mod, lp), warps=module_warps(text), arrive_sync=arrive_sync)
    p = imp.program
    for name, x in w.touched.items():
        if name in {b.name for b in p.buffers} | {b.name for b in p.barriers}:
            raise err(path, x.line, f"{x.name} in the per-tile epilogue uses {name}, a buffer or barrier of the "
                      "pipeline: the epilogue cannot be left out", FIX)
    if drains is not None:
        drains.extend(w.partial_drains)
    notes = imp.notes + (f"Triton persistent matmul, flattened: one loop of tiles x k-tiles iterations at line "
                         f"{lp.line}; left out: " + "; ".join(t for _, t in sorted(set(w.left_out))),)
    prog = dataclasses.replace(imp.program, notes=notes)
    return dataclasses.replace(imp, program=prog, notes=notes)


@dataclasses.dataclass(frozen=True)
class PersistentCheck(HopperCheck):
    """:class:`~.ttgir_hopper.HopperCheck` of the fused persistent loop; the report names what is left out."""

    def render(self, verbose: bool = False) -> str:
        lines = super().render(verbose).splitlines()
        lines[0] = lines[0].replace("Triton sm_90 TMA + mbarrier + wgmma pipeline",
                                    "Triton sm_90 persistent matmul (flattened: tiles x k-tiles in one loop)")
        left = self.imported.notes[-1].split("left out: ", 1)[-1]
        return "\n".join(lines[:1] + [f"  left out (not checked): {x}" for x in left.split("; ")] + lines[1:])

    def to_json(self) -> dict:
        d = super().to_json()
        d["source"] = "triton-sm90-persistent"
        d["left_out"] = self.imported.notes[-1].split("left out: ", 1)[-1].split("; ")
        return d


def check_persistent(text: str, path: str, *, trip_count: Optional[int] = None,
                     min_trip_count: Optional[int] = None, time_limit: float = 10.0,
                     tightness: bool = True, arrive_sync: bool = True) -> PersistentCheck:
    """Map the flattened persistent loop (:func:`persistent_to_hopper`, ``arrive_sync`` as there) and prove it
    with :func:`synth.verify.phases.verify_hopper` for every trip count of the fused loop (or ``trip_count``)."""
    return PersistentCheck(*prove_mapped(persistent_to_hopper, text, path, trip_count=trip_count,
                                         min_trip_count=min_trip_count, time_limit=time_limit, tightness=tightness,
                                         arrive_sync=arrive_sync))


__all__ = ["persistent_to_hopper", "check_persistent", "is_persistent_ttgir", "PersistentCheck", "PersistentWalker"]

"""Warp-specialized Triton TTGIR (``ttg.warp_specialize``) -> :class:`~synth.hopper.ir.HopperProgram`.

Input: ``compiled_kernel.asm["ttgir"]`` of a loop written ``tl.range(..., warp_specialize=True)`` and
compiled for ``GPUTarget("cuda", 90, 32)`` with tensor descriptors. Triton 3.9's Hopper pass
(``add_hopper_warpspec``) splits the loop into a ``ttg.warp_specialize`` op: a ``default`` region (the
producer: TMA copies) and ``partitionN`` regions (the consumers: wgmma), each with its own copy of the
loop, talking through barriers allocated and initialized before the op (``{ttg.ws_generated_barrier}``)
and invalidated after it. Each region with barrier traffic becomes a **role** of one warp group
(``default``, ``partition0``, ...); :func:`synth.verify.phases.verify_hopper` proves the program by class
for every trip count. Mapping (docs/check.md, "Warp-specialized Triton"):

* a barrier allocation whose slots every ``ttng.init_barrier`` before the op initializes with the same
  count -> a barrier with that count; ``full`` when TMA copies complete on it (its guards: their
  buffers), ``empty`` when ``ttng.arrive_barrier`` arrives on it (its guards: the TMA buffers the
  arriving roles read); a barrier no region uses is left out (Triton allocates one of each pair it
  does not need);
* ``ttng.barrier_expect``, ``ttng.async_tma_copy_global_to_local``, ``ttng.wait_barrier``,
  ``ttng.warp_group_dot`` (+ ``_wait``) as in :mod:`.ttgir_hopper`; ``ttng.arrive_barrier %b, N``
  -> ``arrive`` with ``arrivals`` ``N`` (Triton lowers it to one ``mbarrier.arrive`` of count ``N`` by
  the thread with ``tid % 128 == 0`` after the partition's named barrier, as its PTX shows: one arrival
  per warp group, so a region of more than 4 warps is refused);
* counts: each region's loop carries its own iteration counter; an access of slot ``(k + c) % M`` at
  iteration ``k`` names count ``k + c``; a write must be version ``k`` (slot ``k % M``), a wgmma must read
  the tile of its own iteration (slot ``k % M``); a wait's parity against its count decides its phase
  field (0: the phase of that count, 1: the one before) as in :mod:`.ttgir_hopper`;
* every region's loop must run the same number of times (its bounds proven equal with Z3 over the
  kernel's integer arguments); the ``ttng.inval_barrier`` of every slot after the op -> ``inval``.

Outside the model (SynthError, exit 2, naming file, line and why): barrier traffic outside a region's
loop, nested loops or several loops in a region, regions with different trip counts, a barrier both
completed by TMA and arrived on, two roles issuing the same barrier's ``barrier_expect``, a write or
read that is not the iteration's own slot, and everything :mod:`.ttgir_hopper` refuses.

:func:`blackwell_ops` / :func:`refuse_blackwell`: Blackwell's ``tcgen05`` ops (``ttng.tc_gen5_mma``,
``ttng.tmem_*``: tensor memory and its MMA completion) are outside every model of ``synth check``; a
TTGIR that holds them is refused up front with each op and its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import z3

from ..completion import ArriveStmt, Barrier, BarrierRef, BarSyncStmt, FenceStmt, InitStmt, InvalStmt, PipelineState, TryWaitStmt, Tx
from ..errors import Loc, SynthError
from ..expr import Num, Var, evaluate, parse
from ..hopper.ir import HopperError, HopperProgram, Role, validate_hopper
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from .arith import is_sym
from .mlirtext import Op, parse_module, walk
from .scfloop import err, find_block, fit_carried, for_header, short, valid
from .ttgir import new_dialect_names
from .ttgir_hopper import (MAX_SLOTS, Ctx, HEvent, HopperCheck, HopperImport, HopperWalker, and_guards,
                           fit_phase, fit_phase_at, func_name, guard_of, prove_mapped, same_carried, slot_rotation,
                           wait_states)

WS_OP = "ttg.warp_specialize"
ARRIVE = "ttng.arrive_barrier"
WS_FIX = ("pass the TTGIR of a loop `tl.range(..., warp_specialize=True)` compiled for sm_90 with tensor "
          "descriptors (docs/check.md, 'Warp-specialized Triton')")
BLACKWELL_FIX = ("synth check models sm_80 cp.async and sm_90 TMA + mbarrier + wgmma (one warp group or "
                 "ttg.warp_specialize partitions): compile the same kernel for GPUTarget('cuda', 90, 32) "
                 "to check its pipeline; tcgen05 MMAs and tensor memory are not modelled")
TASK_ATTR = re.compile(r"async_task_id = array<i32(?::\s*[\d,\s]*)?>")


def is_ws_ttgir(text: str) -> bool:
    """Whether a TTGIR text holds a ``ttg.warp_specialize`` op (this front-end's input)."""
    return bool(re.search(r"\b(?:ttg|triton_gpu)\.warp_specialize\b", text))


# ----------------------------------------------------------------------------------------------
# Blackwell (tcgen05): refused with the ops named

def _is_blackwell_op(name: str) -> bool:
    return name.startswith(("ttng.", "triton_nvidia_gpu.")) and ("tc_gen5" in name or "tmem" in name)


def blackwell_ops(text: str) -> list:
    """``(line, column, op name)`` of every Blackwell ``tcgen05`` op (``ttng.tc_gen5_*``, ``ttng.tmem_*``)
    in a TTGIR text, in file order (columns 1-based)."""
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        for m in re.finditer(r"(?<![\w.#!])((?:ttng|triton_nvidia_gpu)\.[A-Za-z_]\w*)", raw):
            if _is_blackwell_op(m.group(1)) and not raw.lstrip().startswith("//"):
                out.append((n, m.start(1) + 1, m.group(1)))
    return out


def refuse_blackwell(text: str, path: str) -> None:
    """Raise a SynthError (exit 2) at the first Blackwell ``tcgen05`` op of a TTGIR text, naming every
    such op and the lines it is on; return when there is none."""
    ops = blackwell_ops(text)
    if not ops:
        return
    seen: dict = {}
    for line, _col, name in ops:
        seen.setdefault(name, []).append(line)
    listing = ", ".join(f"{name} (line{'s' if len(ls) > 1 else ''} {', '.join(map(str, ls[:6]))}"
                        f"{', ...' if len(ls) > 6 else ''})" for name, ls in seen.items())
    line, col, name = ops[0]
    raise SynthError(Loc(path, line, col), f"Blackwell TTGIR (tcgen05): {name} is outside the model of synth "
                     f"check; the ops outside it are {listing}", BLACKWELL_FIX)


# ----------------------------------------------------------------------------------------------
# the regions of ttg.warp_specialize

class WSWalker(HopperWalker):
    """:class:`~.ttgir_hopper.HopperWalker` plus ``ttng.arrive_barrier``, the ``i1`` phase bits of the
    partitions' counters (``trunci`` to ``i1``, ``xori`` with ``true``) and the region terminators."""

    event_ops = HopperWalker.event_ops + (ARRIVE,)

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        n = op.name
        if n in ("ttg.warp_yield", "ttg.warp_return"):
            return True
        if n == "ttg.local_load" and where == "in the loop" and op.operands:
            v = env.get(op.operands[0])
            if isinstance(v, tuple) and v[0] in ("view", "buf"):
                # a per-thread read of a slot (ld.shared / ldmatrix): no warp-group convergence
                events.append(HEvent("load", op.line, short(op), reads=((v[1], v[2] if v[0] == "view" else 0),)))
                for x in op.results:
                    env[x] = None
                return True
        if n == "arith.trunci" and re.search(r"\bto\s+i1\b", op.text) and op.operands:
            x = env.get(op.operands[0])
            if isinstance(x, bool) or x is None or isinstance(x, tuple) or (is_sym(x) and z3.is_bool(x)):
                env[op.results[0]] = None if x is None or isinstance(x, tuple) else x
            else:
                env[op.results[0]] = x % 2  # bit 0 (Z3's and Python's % 2 of a negative value is 1 for odd)
            return True
        if n in ("arith.xori", "arith.andi", "arith.ori") and len(op.operands) == 2:
            a, b = (env.get(o) for o in op.operands)
            ints = [x for x in (a, b) if not isinstance(x, bool) and (isinstance(x, int) or
                                                                      (is_sym(x) and not z3.is_bool(x)))]
            if len(ints) == 1 and any(isinstance(x, bool) for x in (a, b)):
                x, c = ints[0], int(a if isinstance(a, bool) else b)
                env[op.results[0]] = {"arith.xori": x + c - 2 * c * (x % 2) if c else x,
                                      "arith.andi": x % 2 if c else 0,
                                      "arith.ori": x + 1 - x % 2 if c else x}[n]
                return True
        if n == ARRIVE:
            v = self._view(op, env, 0)
            m = re.search(r"%[\w$.#-]+\s*,\s*(\d+)\s*(?:,|:|$)", op.text)
            if not m:
                raise err(self.path, op.line, "cannot read the arrival count of ttng.arrive_barrier", WS_FIX)
            pred = env.get(op.operands[1]) if len(op.operands) > 1 else True
            events.append(HEvent("arrive", op.line, short(op), bar=v[1], bar_slot=v[2], count=int(m.group(1)),
                                 pred=pred))
            return True
        return super().dialect(op, env, events, where)


@dataclass
class Region:
    """One region of ``ttg.warp_specialize`` read as a role (``default`` or ``partitionN``): its warps, ops and
    line, the environment its values are read in, its pipelined k-loop with the loop's concrete runs, symbolic
    events, induction symbol and trip count, and the events after the loop. The tile-loop reader
    (:mod:`.ttgir_nested`) also fills the tile loop around the k-loop (``tile``, ``tl``, ``tile_bounds``), the
    TMA-store events of a tile and after the tile loop, how the k-loop's count crosses tiles (``mode``) and what
    it needs to prove ``carry``; :func:`ws_to_hopper` leaves those at their defaults."""

    role: str
    warps: int
    ops: list
    line: int
    env: dict = field(default_factory=dict)
    loop: Optional[Op] = None
    runs: list = field(default_factory=list)
    sym: list = field(default_factory=list)
    k: object = None
    ub: object = None
    after: list = field(default_factory=list)
    # the tile loop (ttgir_nested)
    tile: Optional[Op] = None
    tl: object = None
    """The tile loop (:class:`.ttgir_nested.TileLoop`) when the region has one."""
    tile_bounds: tuple = ()
    tile_stores: list = field(default_factory=list)
    final_stores: list = field(default_factory=list)
    mode: str = "single"
    """``single`` (no tile loop), ``carried`` (the count carried across tiles), ``reset`` (restarted)."""
    carry: tuple = ()
    """``(tile iter_args names, their initial values, the k-loop's iter_args, the tile loop's iter_args)``."""
    tile_yield: object = None
    pre: list = field(default_factory=list)
    """Barrier events before the region's loop (one-shot exchanges, :func:`.ttgir_oneshot.exchange_loads`)."""
    post: list = field(default_factory=list)
    """Barrier events after the region's loop (their arrivals)."""
    step: int = 1
    """The k-loop's step (attention's ``tl.range(0, N_CTX, BLOCK_N)``: BLOCK_N)."""
    tile_yield_names: list = field(default_factory=list)
    fits: list = field(default_factory=list)
    fit_env: dict = field(default_factory=dict)


def func_args(mod: list, ws: Op) -> dict:
    """The kernel's integer arguments as Z3 integers (so region bounds can be compared)."""
    for op in walk(mod):
        if op.name in ("tt.func", "func.func") and op.regions and find_block(op.regions[0], ws):
            head = op.text.split("attributes", 1)[0]
            return {m.group(1): z3.Int(m.group(1).lstrip("%"))
                    for m in re.finditer(r"(%[\w$.-]+)\s*:\s*(?:i32|i64|index)\b", head)}
    return {}


def ws_regions(path: str, block: list, pos: int, ws: Op, module_warps: int) -> list:
    """The ``default`` and ``partitionN`` regions that follow the op in the printed form, with their
    block arguments bound to the op's operands."""
    caps = re.match(r"[^(]*\(([^)]*)\)", ws.text[ws.text.find(WS_OP):])
    captures = re.findall(r"%[\w$.-]+(?:#\d+)?", caps.group(1)) if caps else []
    out = []
    for op in block[pos + 1:]:
        if op.name == "default" and op.regions:
            out.append(Region("default", module_warps, op.regions[0], op.line))
        elif re.fullmatch(r"partition\d+", op.name) and op.regions:
            inner = op.text[op.text.find("(") + 1:op.text.rfind(")")] if "(" in op.text else ""
            args = re.findall(r"(%[\w$.-]+)\s*:", inner)
            if len(args) != len(captures):
                raise err(path, op.line, f"{op.name} has {len(args)} arguments, {WS_OP} passes {len(captures)}",
                          "pass the whole printed module")
            w = re.search(r"num_warps\((\d+)\)", op.text)
            r = Region(op.name, int(w.group(1)) if w else module_warps, op.regions[0], op.line)
            r.env = dict(zip(args, captures))  # argument -> capture name, resolved below
            out.append(r)
        else:
            break
    if not out or out[0].role != "default":
        raise err(path, ws.line, f"{WS_OP} without its default region after it", "pass the whole printed module")
    return out


def _refilled_after(roles: list, b: str) -> set:
    """The TMA buffers a role writes after a wait on barrier ``b`` in its loop, before its next wait that
    follows a copy (the producer's ``wait empty; expect full; copy`` group): the buffers ``b`` releases."""
    out: set = set()
    for r in roles:
        evs = r.sym
        for i, e in enumerate(evs):
            if e.kind != "wait" or e.bar != b:
                continue
            copied = False
            for x in evs[i + 1:]:
                if x.kind == "tma":
                    out.add(x.buf)
                    copied = True
                elif x.kind == "wait" and copied:
                    break
    return out


def ws_to_hopper(text: str, path: str, *, min_trip_count: Optional[int] = None,
                 arrive_sync: bool = True) -> HopperImport:
    """Read a warp-specialized sm_90 TTGIR module (module docstring) into a Hopper program of one role per
    region; SynthError (exit 2) for what is outside the model.

    Each role runs ``32 x num_warps`` threads (its partition's warps); its arrives, expects and TMA copies are
    elected (Triton lowers them under ``thread id == 0`` of the partition), its wgmmas are warp-group
    collectives, a ``ttg.barrier`` / ``gpu.barrier`` in its loop is a ``bar_sync`` and a ``ttg.local_load`` of
    a slot a per-thread read. ``arrive_sync``: each ``ttng.arrive_barrier`` and ``ttng.barrier_expect`` is
    preceded by a ``bar_sync`` over the partition, as Triton's lowering emits it since its fix for a leader
    warp releasing before the other warps leave their wait (checked in Triton 3.9's PTX: ``bar.sync id, 128``
    right before each ``mbarrier.arrive``); ``False`` proves the TTGIR's own convergence points only."""
    text = new_dialect_names(text)
    # the partitioner's task ids sit inside attribute dictionaries between operands: drop them (same lines)
    text = re.sub(r"\s*\{" + TASK_ATTR.pattern + r"\}", "", text)
    text = re.sub(TASK_ATTR.pattern + r",\s*", "", text)
    text = re.sub(r",\s*" + TASK_ATTR.pattern, "", text)
    mod = parse_module(text, path)
    wss = [op for op in walk(mod) if op.name == WS_OP]
    if not wss:
        raise err(path, 0, f"no {WS_OP} op", WS_FIX)
    if len(wss) > 1:
        raise err(path, wss[1].line, f"several {WS_OP} ops in one module",
                  "pass a kernel with one warp-specialized loop")
    ws = wss[0]
    block = find_block(mod, ws)
    pos = next(i for i, op in enumerate(block) if op is ws)
    mw = re.search(r'"ttg.num-warps"\s*=\s*(\d+)', text)
    regions = ws_regions(path, block, pos, ws, int(mw.group(1)) if mw else 4)
    end = pos + 1 + len(regions)

    w = WSWalker(path, {})
    env: dict = dict(func_args(mod, ws))
    pre: list = []
    w.block(block[:pos], env, pre, "before the loop")
    for e in pre:
        if e.kind != "init":
            raise err(path, e.line, f"{e.text} before {WS_OP}: only barrier initializations are read there", WS_FIX)
    post: list = []
    w.block(block[end:], dict(env), post, "after the loop")
    for e in post:
        if e.kind != "inval":
            raise err(path, e.line, f"{e.text} after {WS_OP} is outside the model", WS_FIX)
    T = z3.Int("T")
    roles = []
    for r in regions:
        # the default region sees the values above it; a partition (isolated from above) only its arguments
        r.env = dict(env) if r.role == "default" else {a: env.get(c) for a, c in r.env.items()}
        if _walk_region(w, r, path):
            if r.warps > 4:
                raise err(path, r.line, f"{r.role} runs {r.warps} warps: several warp groups, each of whose first "
                          "thread arrives (Triton lowers ttng.arrive_barrier under tid % 128 == 0); synth reads "
                          "partitions of at most 4 warps (one warp group)", "compile with num_warps = 4")
            roles.append(r)
    if not roles:
        raise err(path, ws.line, f"no region of {WS_OP} waits on or arrives at a barrier", WS_FIX)
    # every role's loop runs the same number of times
    first = roles[0]
    fixed = all(isinstance(r.ub, int) and not isinstance(r.ub, bool) for r in roles)
    for r in roles[1:]:
        if fixed and r.ub != first.ub or not fixed and (isinstance(r.ub, int) != isinstance(first.ub, int) or
                                                        not valid(as_int_term(r.ub) == as_int_term(first.ub), [])):
            raise err(path, r.loop.line, f"the loop of {r.role} may run a different number of times than the loop "
                      f"of {first.role} (line {first.loop.line})", "every partition must run the same loop")
    trip = first.ub if fixed else T
    if fixed and trip < 1:
        raise err(path, first.loop.line, f"the loops run {trip} times", "a Hopper pipeline needs T >= 1")
    for r in roles:
        _run_loop(w, r, path, None if fixed else T)
    return build_ws_program(path, w, ws, mod, roles, pre, post, trip, fixed, min_trip_count, arrive_sync)


def as_int_term(x):
    """An integer or a Z3 integer term as a Z3 term."""
    return x if is_sym(x) else z3.IntVal(int(x))


def _walk_region(w: WSWalker, r: Region, path: str) -> bool:
    """Find the region's loop and evaluate what comes before it; False when the region has no barrier
    traffic (it takes no part in the protocol)."""
    evs = w.event_ops
    if not any(x.name in evs for x in walk(r.ops)):
        return False
    loops = [op for op in r.ops if op.name == "scf.for" and op.regions and
             any(x.name in evs for x in walk(op.regions[0]))]
    if len(loops) != 1:
        raise err(path, (loops[1].line if len(loops) > 1 else r.line),
                  f"{r.role}: {'several loops' if loops else 'barrier traffic outside a loop'} (nested or persistent "
                  "loops, or statements outside the partition's loop, are outside the model)", WS_FIX)
    lp = loops[0]
    nested = [x for x in walk(lp.regions[0]) if x.name == "scf.for" and x.regions and
              any(y.name in evs for y in walk(x.regions[0]))]
    if nested:
        raise err(path, nested[0].line, f"{r.role}: a nested loop (a persistent kernel's tile loop around the "
                  "k-loop) is outside the model of the warp-specialized check", WS_FIX)
    pos = next(i for i, op in enumerate(r.ops) if op is lp)
    before: list = []
    w.block(r.ops[:pos], r.env, before, "before the loop")
    if before:
        raise err(path, before[0].line, f"{before[0].text}: {r.role} uses barriers or shared slots before its "
                  "loop, which is outside the model (Triton 3.9's partitions start with their loop)", WS_FIX)
    after: list = []
    env_after = dict(r.env)
    for x in lp.results:
        env_after[x] = None
    w.block(r.ops[pos + 1:], env_after, after, "after the loop")
    r.after = after  # checked in _role_parts: only wgmma waits may follow the loop
    iv, lb, ub, st, _iters = for_header(lp, path)
    lbv, stv, ubv = r.env.get(lb), r.env.get(st), r.env.get(ub)
    if not (isinstance(lbv, int) and isinstance(stv, int)) or isinstance(lbv, bool) or stv != 1:
        raise err(path, lp.line, f"{r.role}: the loop's lower bound must be a constant and its step 1",
                  "pass a loop `tl.range(c, n, warp_specialize=True)`")
    if ubv is None or isinstance(ubv, (bool, tuple)) or (is_sym(ubv) and z3.is_bool(ubv)):
        raise err(path, lp.line, f"{r.role}: the loop's upper bound is not a function of the kernel's integer "
                  "arguments", WS_FIX)
    r.loop = lp
    r.ub = ubv - lbv if isinstance(ubv, int) else z3.simplify(as_int_term(ubv) - lbv)
    return True


def _run_loop(w: WSWalker, r: Region, path: str, T) -> None:
    """Run the region's loop body on its first iterations and symbolically (carried values fitted)."""
    lp = r.loop
    iv, lb, ub, st, iters = for_header(lp, path)
    lbv = r.env[lb]
    if T is not None:
        r.env[ub] = T + lbv  # T iterations
    names = [a for a, _ in iters]
    inits = [r.env.get(i) for _, i in iters]
    r.runs, events, _fits, r.k = fit_carried(w, lp.regions[0], r.env, names, inits, lambda kk: lbv + kk, iv,
                                             fit_phase, fit_phase_at, same_carried)
    r.sym = events


# ----------------------------------------------------------------------------------------------

def build_ws_program(path: str, w: WSWalker, ws: Op, mod: list, roles: list, pre: list, post: list, trip, fixed: bool,
           min_trip: Optional[int], arrive_sync: bool = True) -> HopperImport:
    names = {}  # allocation -> program name (Triton's SSA numbers become bar3 / buf44)

    def nm(x: str, what: str) -> str:
        return names.setdefault(x, f"{what}{x}" if re.fullmatch(r"\d+", x) else x)

    tma_bufs = sorted({e.buf for r in roles for e in r.sym if e.kind == "tma"})
    if not tma_bufs:
        raise err(path, ws.line, f"no region of {WS_OP} issues a TMA copy", WS_FIX)
    used = sorted({e.bar for r in roles for e in r.sym if e.kind in ("expect", "tma", "wait", "arrive")})
    if set(used) & set(tma_bufs):
        raise err(path, ws.line, "a shared allocation is used both as a barrier and as a TMA destination", WS_FIX)
    completed = {e.bar for r in roles for e in r.sym if e.kind in ("expect", "tma")}
    arrived = {e.bar for r in roles for e in r.sym if e.kind == "arrive"}
    both = completed & arrived
    if both:
        b = sorted(both)[0]
        e = next(e for r in roles for e in r.sym if e.kind == "arrive" and e.bar == b)
        raise err(path, e.line, f"barrier {nm(b, 'bar')} is completed by TMA bytes and arrived on by "
                  "ttng.arrive_barrier", "a barrier is either a full barrier (TMA) or an empty one (releases)")
    expecters = {}
    for r in roles:
        for e in r.sym:
            if e.kind == "expect" and expecters.setdefault(e.bar, r.role) != r.role:
                raise err(path, e.line, f"two regions expect bytes on barrier {nm(e.bar, 'bar')}", WS_FIX)
    slots = {}
    for b in used + tma_bufs:
        s = w.buffers.get(b, 1)
        if not 1 <= s <= MAX_SLOTS:
            raise err(path, ws.line, f"{b} has {s} slots", f"at most {MAX_SLOTS} slots are supported")
        slots[b] = s
    # barriers: init counts before the op, kinds and guards from their use
    init: dict = {}
    for e in pre:
        s = e.bar_slot
        if not isinstance(s, int) or isinstance(s, bool):
            raise err(path, e.line, f"{e.text}: the barrier slot is not a constant", WS_FIX)
        init.setdefault(e.bar, {})
        if s in init[e.bar]:
            raise err(path, e.line, f"slot {s} of {nm(e.bar, 'bar')} is initialized twice", WS_FIX)
        init[e.bar][s] = e.count
    reads_of = {r.role: {b for e in r.sym if e.kind in ("dot", "load") for b, _ in e.reads if b in tma_bufs}
                for r in roles}
    barriers, setup, teardown = [], [], []
    for b in used:
        counts = init.get(b, {})
        if len(set(counts.values())) > 1:
            raise err(path, ws.line, f"the slots of barrier {nm(b, 'bar')} are initialized with different counts "
                      f"{sorted(set(counts.values()))}", "initialize every slot with the same arrival count")
        count = next(iter(counts.values()), 1)
        if not 1 <= count <= 4096:
            raise err(path, ws.line, f"barrier {nm(b, 'bar')} init count {count} out of range", "use 1..4096")
        if b in arrived:
            guards = sorted({x for r in roles if any(e.kind == "arrive" and e.bar == b for e in r.sym)
                             for x in reads_of[r.role]})
            # the buffers a role refills after waiting on b (up to its next wait after a copy): what b releases
            refilled = _refilled_after(roles, b)
            if refilled and refilled & set(guards):
                guards = sorted(refilled & set(guards))
            kind = "empty"
        else:
            guards = sorted({e.buf for r in roles for e in r.sym if e.kind == "tma" and e.bar == b})
            kind = "full"
        barriers.append(Barrier(nm(b, "bar"), slots[b], count, kind, tuple(nm(g, "buf") for g in guards)))
        if set(counts) == set(range(slots[b])):
            setup.append(InitStmt(nm(b, "bar")))
        inv = {e.bar_slot for e in post if e.kind == "inval" and e.bar == b}
        if inv == set(range(slots[b])):
            teardown.append(InvalStmt(nm(b, "bar")))
    if setup:
        setup.append(FenceStmt("mbarrier_init"))
    buffers = []
    for b in tma_bufs:
        box = {e.bytes for r in roles for e in r.sym if e.kind == "tma" and e.buf == b}
        if len(box) != 1:
            raise err(path, ws.line, f"TMA copies into {b} have different box sizes {sorted(box)}", WS_FIX)
        buffers.append(ProgBuffer(nm(b, "buf"), "shared", slots[b], box.pop()))
    writer = {}
    for r in roles:
        for e in r.sym:
            if e.kind == "tma" and writer.setdefault(e.buf, r.role) != r.role:
                raise err(path, e.line, f"two regions copy into {nm(e.buf, 'buf')}", WS_FIX)
    ops = {f"tma_{nm(b, 'buf')}": ProgOp(f"tma_{nm(b, 'buf')}", "tma", 0, True, None, None) for b in tma_bufs}
    T = z3.Int("T")
    sources: dict = {}
    role_parts = []
    for n_role, r in enumerate(roles):
        ctx = Ctx(path, r.k, T, True)
        # named barrier 1 + role index: one per partition (bar.sync 0 is the whole CTA's)
        parts, waits = _role_parts(ctx, r, slots, tma_bufs, nm, ops, sources, 1 + n_role, arrive_sync)
        role_parts.append((r, parts, waits))
    mt = max(1, min_trip or 1)
    tc = int(trip) if fixed else "T"
    opl = tuple(ops.values())
    name = func_name(mod, ws)
    out_roles = []
    for r, parts, waits in role_parts:
        prog = Program(f"{name}.{r.role}", "k", tc, mt, 0, opl, tuple(buffers), ("wgmma",), tuple(parts), tuple(waits))
        threads = min(128, 32 * r.warps)
        coll = tuple(dict.fromkeys(s.op for pt in parts for s in pt.stmts
                                   if isinstance(s, OpStmt) and ops[s.op].unit == "wgmma")) if threads > 1 else ()
        out_roles.append(Role(r.role, 1, prog, threads, coll))
    dropped = sorted(set(init) - set(used))
    notes = (f"Triton warp-specialized TTGIR {path}: {WS_OP} at line {ws.line}, roles "
             + ", ".join(f"{r.role} (line {r.loop.line}, {r.warps} warps, {min(128, 32 * r.warps)} threads)"
                         for r in roles)
             + ("; a bar.sync over the partition before each arrive and expect (Triton's lowering)" if arrive_sync
                else "; no bar.sync before an arrive or expect but the TTGIR's own")
             + (f"; barriers no region uses, left out: {', '.join(nm(b, 'bar') for b in dropped)}" if dropped else ""),)
    prog = HopperProgram(name, "k", tc, mt, opl, tuple(buffers), tuple(barriers), tuple(setup), tuple(out_roles),
                         tuple(teardown), notes)
    try:
        validate_hopper(prog)
    except HopperError as x:
        raise err(path, ws.line, f"the mapped program is malformed: {x.path}: {x.msg}", x.fix) from None
    return HopperImport(prog, path, ws.line, sources, notes)


def _role_parts(ctx: Ctx, r: Region, slots: dict, tma_bufs: list, nm, ops: dict, sources: dict,
                bar_id: int = 1, arrive_sync: bool = True):
    """The body part (iteration ``k`` is ``i``) and the epilogue (wgmma waits after the loop) of one role."""
    path = ctx.path
    stmts: list = []
    waits: list = []
    n_dot = 0

    def add(stmt, e: HEvent, part: str, out: list) -> None:
        sources[(r.role, part, len(out))] = (e.line, e.text)
        out.append(stmt)

    def rot(e: HEvent, n_ev: int, attr: str, m: int) -> int:
        return slot_rotation(ctx, e, [getattr(run[n_ev], attr) for run in r.runs], getattr(e, attr), m)

    if any(len(run) != len(r.sym) for run in r.runs):
        raise err(path, r.loop.line, f"{r.role}: the loop's statements differ between iterations", WS_FIX)
    for n_ev, e in enumerate(r.sym):
        preds = [run[n_ev].pred for run in r.runs]
        if e.kind in ("expect", "arrive"):
            c = rot(e, n_ev, "bar_slot", slots[e.bar])
            st = PipelineState(parse(f"i + {c}"), slots[e.bar], 0)
            g = guard_of(ctx, e, e.pred, preds, "i")
            if arrive_sync:
                # Triton's lowering: bar.sync over the partition, then thread 0 arrives
                add(BarSyncStmt(bar_id, g), e, "body", stmts)
            if e.kind == "expect":
                add(ArriveStmt(nm(e.bar, "bar"), st, 1, (Tx(e.bytes),), g), e, "body", stmts)
            else:
                add(ArriveStmt(nm(e.bar, "bar"), st, e.count, (), g), e, "body", stmts)
        elif e.kind == "tma":
            c = rot(e, n_ev, "slot", slots[e.buf])
            if c != 0:
                raise err(path, e.line, f"{r.role}: the TMA copy of iteration k writes slot (k + {c}) % "
                          f"{slots[e.buf]}, not k % {slots[e.buf]}", "only rotating multi-buffers are supported")
            cb = rot(e, n_ev, "bar_slot", slots[e.bar])
            b = nm(e.buf, "buf")
            add(OpStmt(f"tma_{b}", parse("i"), guard_of(ctx, e, e.pred, preds, "i"), None, (),
                       (Access(b, parse("i"), parse(f"i % {slots[e.buf]}")),),
                       BarrierRef(nm(e.bar, "bar"), PipelineState(parse(f"i + {cb}"), slots[e.bar], 0), e.bytes)),
                e, "body", stmts)
        elif e.kind == "wait":
            c = rot(e, n_ev, "bar_slot", slots[e.bar])
            g = guard_of(ctx, e, e.pred, preds, "i")
            for st, sg in wait_states(ctx, e, n_ev, r.runs, c, slots[e.bar]):
                add(TryWaitStmt(nm(e.bar, "bar"), st, and_guards(g, sg)), e, "body", stmts)
        elif e.kind == "dot":
            reads = []
            for j, (b, _s) in enumerate(e.reads):
                if b not in tma_bufs:
                    continue
                c = slot_rotation(ctx, e, [run[n_ev].reads[j][1] for run in r.runs], e.reads[j][1], slots[b])
                if c != 0:
                    raise err(path, e.line, f"{r.role}: the wgmma of iteration k reads slot (k + {c}) % {slots[b]} "
                              f"of {nm(b, 'buf')}: the tile of another iteration", "only a wgmma reading its own "
                              "iteration's tiles is supported")
                reads.append(Access(nm(b, "buf"), parse("i"), parse(f"i % {slots[b]}"), f"tma_{nm(b, 'buf')}"))
            if not reads:
                raise err(path, e.line, f"{r.role}: this wgmma reads no TMA-written slot", WS_FIX)
            opn = f"wgmma_{r.role}" + ("" if n_dot == 0 else f"_{n_dot}")
            n_dot += 1
            ops[opn] = ProgOp(opn, "wgmma", 0, True, 0, None)
            add(OpStmt(opn, parse("i"), None, 0, tuple(reads), ()), e, "body", stmts)
            add(CommitStmt(0, 0), e, "body", stmts)
            if not e.is_async:
                waits.append(Wait("body", 0, Num(0), opn, reason="synchronous warp_group_dot"))
                add(WaitStmt(len(waits) - 1), e, "body", stmts)
        elif e.kind == "barsync":
            add(BarSyncStmt(bar_id), e, "body", stmts)
        elif e.kind == "load":
            reads = []
            for b, _s in e.reads:
                if b not in tma_bufs:
                    continue
                c = slot_rotation(ctx, e, [run[n_ev].reads[0][1] for run in r.runs], _s, slots[b])
                if c != 0:
                    raise err(path, e.line, f"{r.role}: the load of iteration k reads slot (k + {c}) % {slots[b]} "
                              f"of {nm(b, 'buf')}: the tile of another iteration", "only a load reading its own "
                              "iteration's tiles is supported")
                reads.append(Access(nm(b, "buf"), parse("i"), parse(f"i % {slots[b]}"), f"tma_{nm(b, 'buf')}"))
            if reads:
                opn = f"load_{r.role}_{n_ev}"
                ops[opn] = ProgOp(opn, "lds", 0, False, None, None)
                add(OpStmt(opn, parse("i"), None, None, tuple(reads), ()), e, "body", stmts)
        elif e.kind == "dotwait":
            waits.append(Wait("body", 0, Num(e.count), "the next statement", reason=e.text))
            add(WaitStmt(len(waits) - 1), e, "body", stmts)
        else:
            raise err(path, e.line, f"{e.text} inside {r.role}'s loop is outside the model", WS_FIX)
    est: list = []
    for e in r.after:
        if e.kind != "dotwait":
            raise err(path, e.line, f"{e.text} after {r.role}'s loop is outside the model", WS_FIX)
        waits.append(Wait("epilogue", 0, Num(e.count), "the end of the partition", reason=e.text))
        add(WaitStmt(len(waits) - 1), e, "epilogue", est)
    parts = [Part("body", "i", Var("T") if not isinstance(r.ub, int) else Num(int(r.ub)), tuple(stmts))]
    if est:
        parts.append(Part("epilogue", "i", Num(1), tuple(est)))
    return parts, waits


def _anchor(ob_id: str) -> Optional[tuple]:
    """``(role, part, position)`` of the statement an obligation id (``class:role:part:pos...``) is anchored at."""
    m = re.match(r"[^:]+:([^:]+):(\w+):(\d+)", ob_id)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


@dataclass(frozen=True)
class WSCheck(HopperCheck):
    """``synth check`` of a warp-specialized TTGIR: :class:`~.ttgir_hopper.HopperCheck` with one role per
    region; a failure's source line is looked up by role."""

    def _source(self, ob_id: str) -> Optional[tuple]:
        a = _anchor(ob_id)
        return self.imported.sources.get(a) if a else None

    def title(self) -> str:
        imp, p = self.imported, self.imported.program
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        return (f"{imp.path}: Triton warp-specialized sm_90 pipeline ({WS_OP} at line {imp.loop_line}, roles "
                f"{', '.join(r.name for r in p.roles)}), trip count {trip}: "
                f"{'PROVEN' if self.report.ok else 'NOT PROVEN'}")

    def failure_lines(self, ob) -> list:
        """The source line, then where (role, barrier, slot, phase) a counterexample stands."""
        at = self.where(ob)
        return super().failure_lines(ob) + ([f"      at: {at}"] if at else [])

    def statement_lines(self) -> list:
        lines = ["  statements (role part position <- source line):"]
        for (role, part, pos), (line, text) in sorted(self.imported.sources.items(),
                                                      key=lambda x: (x[1][0], x[0][2])):
            lines.append(f"    {role} {part} {pos}: line {line}: {text}")
        return lines

    def where(self, ob) -> Optional[str]:
        """``role R, barrier B slot S, phase P (count C)`` of the barrier statement a refuted obligation is
        anchored at, at its counterexample's iteration (None when it has no counterexample or no barrier)."""
        cex = ob.counterexample
        a = _anchor(ob.id)
        if cex is None or cex.i < 0 or a is None:
            return None
        p = self.imported.program
        role = next((r for r in p.roles if r.name == a[0]), None)
        part = next((pt for pt in role.program.parts if pt.name == a[1]), None) if role else None
        if part is None or a[2] >= len(part.stmts):
            return None
        st = part.stmts[a[2]]
        ref = st.barrier if isinstance(st, OpStmt) and st.barrier is not None else st
        state, bar, count = getattr(ref, "state", None), getattr(ref, "barrier", None), None
        if state is None and isinstance(st, OpStmt) and st.reads:
            # a read (raw): the full barrier its version's TMA completes on, at the phase of that version
            m = re.search(r":r(\d+)$", ob.id)
            acc = st.reads[int(m.group(1)) if m and int(m.group(1)) < len(st.reads) else 0]
            full = next((b for b in p.barriers if b.kind == "full" and acc.buffer in b.guards), None)
            if full is None:
                return None
            state, bar, count = PipelineState(acc.version, full.slots, 0), full.name, acc.version
        if state is None or not isinstance(bar, str):
            return None
        try:
            c = int(evaluate(count if count is not None else state.count, {part.var: cex.i, "T": cex.trip_count}))
        except Exception:  # noqa: BLE001 -- an expression the evaluator cannot take: no line
            return None
        slots = next(b.slots for b in p.barriers if b.name == bar)
        n = c - state.phase * state.stages  # the count of the phase it names (field 1: the one before)
        return (f"role {role.name}, iteration {cex.i}: barrier {bar} slot {(c % state.stages) % slots}, "
                f"phase {n // state.stages} (parity {(n // state.stages) % 2}, count {n}), trip count "
                f"{cex.trip_count}")

    def to_json(self) -> dict:
        d = super().to_json()
        d["source"] = "triton-sm90-ws"
        d["roles"] = [r.name for r in self.imported.program.roles]
        obs = {o.id: o for o in self.report.obligations}
        for f in d.get("failures", []):
            a = _anchor(f["id"])
            f["role"] = a[0] if a else None
            f["at"] = self.where(obs[f["id"]]) if f["id"] in obs else None
        return d


def check_ws(text: str, path: str, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
             time_limit: float = 10.0, tightness: bool = True, arrive_sync: bool = True) -> WSCheck:
    """Map a warp-specialized TTGIR (:func:`ws_to_hopper`, ``arrive_sync`` as there) and prove it with
    :func:`synth.verify.phases.verify_hopper` for every trip count (or ``trip_count``)."""
    return WSCheck(*prove_mapped(ws_to_hopper, text, path, trip_count=trip_count, min_trip_count=min_trip_count,
                                 time_limit=time_limit, tightness=tightness, runs="the loops run",
                                 arrive_sync=arrive_sync))


__all__ = ["ws_to_hopper", "check_ws", "is_ws_ttgir", "blackwell_ops", "refuse_blackwell", "WSCheck", "WSWalker",
           "Region", "ws_regions", "func_args", "build_ws_program", "as_int_term", "TASK_ATTR", "WS_OP"]

"""Triton TTGIR for sm_90 (TMA + mbarrier + wgmma pipelining) -> :class:`~synth.hopper.ir.HopperProgram`.

Input: ``compiled_kernel.asm["ttgir"]`` of a kernel Triton's software pipeliner
pipelined for ``GPUTarget("cuda", 90, 32)`` with tensor descriptors: one ``scf.for``
holding ``ttng.async_tma_copy_global_to_local`` / ``ttng.wait_barrier``. The result is
a Hopper program of one role (``mainloop``, one warp group: Triton issues the copies and
the wgmma from the same warps, the shape of :func:`synth.lower.barriers.lower_hopper_single`)
that :func:`synth.verify.phases.verify_hopper` proves for every trip count. Mapping:

* ``ttg.local_alloc`` of ``NxMxi64`` used by ``ttng.init_barrier`` -> a ``full`` barrier of
  ``N`` slots (init count from ``init_barrier``; every slot initialized before the loop with
  the same count, else no ``init`` statement and the ``fence`` class refutes). Other
  allocations written by TMA -> buffers of ``N`` slots (``ttg.memdesc_index`` selects one).
* ``ttng.barrier_expect %bar, BYTES, %pred`` -> ``arrive`` with ``arrivals`` 1 and ``tx``
  ``BYTES``, guarded by ``%pred``: Triton lowers it to ``@(thread 0 && pred)
  mbarrier.arrive.expect_tx`` (BarrierOpToLLVM.cpp, ``BarrierExpectConversion``), so a
  false predicate skips the arrival and the bytes together.
* ``ttng.async_tma_copy_global_to_local %desc[...] %slot, %bar, %pred`` -> a TMA op
  statement writing the slot and completing the full box bytes (the destination memdesc's
  shape times its element size) on the barrier, guarded by ``%pred``.
* ``ttng.wait_barrier %bar, %phase`` -> ``try_wait`` with the :class:`PipelineState` fitted
  from the SSA slot and phase values; ``ttng.warp_group_dot ... {isAsync = true}`` -> the
  wgmma op (reading the TMA slots it is given, directly or through ``ttg.memdesc_trans`` /
  subslices) and ``commit_group``; a synchronous one adds ``wait_group 0``;
  ``ttng.warp_group_dot_wait {pendings = N}`` -> ``wait_group N``; ``ttng.inval_barrier``
  of every slot after the loop -> ``inval``.

Counts (the ``PipelineState.count`` of each statement) follow the rules of
docs/check.md for ``cp.async``: the ``n``-th TMA write of a buffer (program order,
prologue first) is version ``n`` and must land in slot ``n % N``; the ``n``-th
``barrier_expect`` on a barrier names count ``n`` and must use slot ``n % N``; a TMA's
completion, a ``wait_barrier`` and a wgmma read name the last ``barrier_expect`` (resp.
TMA write) of their slot before them in program order. A wait's parity is then checked
against that count: ``(count / N) % 2`` gives phase 0, the opposite parity phase 1 (the
phase before), and a parity that is sometimes one and sometimes the other splits the wait
into two guarded statements, so the prover judges each. Slot indices and phase bits
carried in ``iter_args`` are fitted on the first iterations (``a*k + b``, ``(k + b) % N``,
``((k + b) / N) % 2``) and proven by induction with Z3 (all at once); predicates become
guards, rendered from their Z3 terms and checked equal to them.

:func:`check_hopper` proves the program with ``verify_hopper``, whose class ``teardown`` (every
TMA copy that runs is observed by a wait before the teardown's ``inval``) catches a copy that
Triton's epilogue would race with.

Outside the model (SynthError, exit 2): barriers allocated or initialized inside the loop
(``num_stages = 1``), ``cp.async`` or other async ops in the same loop, TMA stores,
``ttng.arrive_barrier``, a TMA, wait or wgmma reading a slot after the loop, slots that
do not rotate, a phase or predicate that cannot be fitted or rendered.
Assumed (not in TTGIR; Triton's lowering inserts them): the CTA barrier after the inits
and ``fence.proxy.async`` before the first TMA, modelled as the init fence.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Optional

import z3

from ..completion import (ArriveStmt, Barrier, BarrierRef, BarSyncStmt, FenceStmt, InitStmt, InvalStmt, PipelineState,
                          TryWaitStmt, Tx)
from ..errors import Loc, SynthError
from ..expr import Num, Var, parse, to_str, to_z3
from ..hopper.ir import HopperError, HopperProgram, Role, validate_hopper
from ..hopper.printer import hopper_text
from ..program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from ..verify.phases import verify_hopper
from .arith import is_sym
from .mlirtext import Op, int_type, parse_module, walk
from .scfloop import Walker, err, find_block, fit, fit_at, fit_carried, short, valid
from .ttgir import new_dialect_names, slot_view
from .ttgir_oneshot import drop_invals, one_shot_loads

TMA = "ttng.async_tma_copy_global_to_local"
WAIT = "ttng.wait_barrier"
EXPECT = "ttng.barrier_expect"
DOT = "ttng.warp_group_dot"
DOT_WAIT = "ttng.warp_group_dot_wait"
INIT = "ttng.init_barrier"
INVAL = "ttng.inval_barrier"
EVENT_OPS = (TMA, WAIT, EXPECT, DOT, DOT_WAIT, INIT, INVAL, "ttg.async_copy_global_to_local", "ttg.local_load",
             "ttng.arrive_barrier", "ttg.async_wait", "ttg.async_commit_group")
ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
              "f8E4M3FN": 1, "f8E5M2": 1, "f8E4M3FNUZ": 1, "f8E5M2FNUZ": 1, "f8E4M3B11FNUZ": 1}
MAX_SLOTS = 16
"""Most slots of a barrier or buffer (Triton's num_stages is small; synth's Hopper bound)."""
FIX = "pass the TTGIR of a kernel Triton pipelined for sm_90 with tensor descriptors and num_stages >= 2"


def is_hopper_ttgir(text: str) -> bool:
    """Whether a TTGIR text holds sm_90 TMA / mbarrier pipelining (this front-end's input)."""
    return any(t in text for t in (TMA, WAIT, "triton_nvidia_gpu.async_tma_copy_global_to_local",
                                   "triton_nvidia_gpu.wait_barrier"))


@dataclass
class HEvent:
    """One statement of the source that matters to the protocol (slots are ints or Z3 terms)."""

    kind: str
    """init | inval | expect | tma | wait | dot | dotwait | barsync (a CTA or partition bar.sync) | load (a
    per-thread ``ttg.local_load`` of a slot: warp-specialized partitions)"""
    line: int
    text: str
    buf: str = ""
    slot: object = None
    bar: str = ""
    bar_slot: object = None
    pred: object = True
    bytes: int = 0
    count: int = 0
    phase: object = None
    reads: tuple = ()
    is_async: bool = True


def _memdesc(text: str, path: str, line: int, which: int = -1) -> tuple[list, str]:
    """Shape and element type of the ``which``-th ``memdesc<...>`` / ``tensordesc<...>`` of a line."""
    ms = re.findall(r"(?:memdesc|tensordesc)<([\dx]+)x([A-Za-z]\w*)", text)
    if not ms:
        raise err(path, line, "cannot read the shared memory type of this op", "print the TTGIR with its types")
    dims, elem = ms[which]
    return [int(x) for x in dims.split("x")], elem


def _xor_like(op: Op, args: list):
    """``arith.xori/andi/ori`` of an integer and the constant 1 (a phase bit), exactly; None otherwise."""
    a, b = args
    if any(isinstance(x, bool) or (is_sym(x) and z3.is_bool(x)) or x is None for x in (a, b)):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return {"arith.xori": a ^ b, "arith.andi": a & b, "arith.ori": a | b}[op.name]
    x, c = (a, b) if isinstance(b, int) else (b, a)
    if c != 1 or not is_sym(x):
        return None
    # two's complement bit 0 of x is x % 2 (Z3's % by a positive constant is non-negative)
    return {"arith.xori": x + 1 - 2 * (x % 2), "arith.andi": x % 2, "arith.ori": x + 1 - x % 2}[op.name]


class HopperWalker(Walker):
    """The ``ttg`` / ``ttng`` ops of sm_90 TMA pipelining (module docstring)."""

    event_ops = EVENT_OPS

    def __init__(self, path: str, bind: dict) -> None:
        super().__init__(path, {})
        self.bind = bind
        self.elem: dict = {}

    def _view(self, op: Op, env: dict, k: int):
        v = env.get(op.operands[k]) if len(op.operands) > k else None
        if isinstance(v, tuple) and v[0] == "buf":
            v = ("view", v[1], 0, ())
        self.need_view(op, v)
        return v

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        n = op.name
        if op.results and op.results[0] in self.bind:
            env[op.results[0]] = self.bind[op.results[0]]
            return True
        if n in ("arith.xori", "arith.andi", "arith.ori") and int_type(op) and len(op.operands) == 2:
            v = _xor_like(op, [env.get(o) for o in op.operands])
            if v is not None:
                env[op.results[0]] = v
                return True
            return False
        if n == "ttg.local_alloc":
            if where == "in the loop":
                raise err(self.path, op.line, "ttg.local_alloc inside the loop: every iteration allocates, loads, "
                          "waits and frees, nothing is pipelined (Triton's output for num_stages = 1, or for a TMA "
                          "load it does not pipeline)", "compile with num_stages >= 2 a loop whose TMA loads feed "
                          "a tl.dot")
            name = op.results[0].lstrip("%") if op.results else f"buf{op.line}"
            shape, elem = _memdesc(op.text, self.path, op.line)
            self.buffers.setdefault(name, 1)
            self.shapes[name] = shape
            self.elem[name] = elem
            env[op.results[0]] = ("buf", name)
            return True
        if slot_view(self, op, env, whole_buffer=True):
            return True
        if n in (INIT, INVAL):
            if where == "in the loop":
                raise err(self.path, op.line, f"{n} inside the loop: barriers of a pipelined loop live across it "
                          "(this is Triton's output when it does not pipeline the loop, e.g. num_stages = 1)",
                          "compile with num_stages >= 2 a loop whose TMA loads feed a tl.dot")
            v = self._view(op, env, 0)
            m = re.search(r",\s*(\d+)\s*(?::|$)", op.text)
            if n == INIT and not m:
                raise err(self.path, op.line, "ttng.init_barrier without an arrival count", FIX)
            events.append(HEvent("init" if n == INIT else "inval", op.line, short(op), bar=v[1], bar_slot=v[2],
                                 count=int(m.group(1)) if n == INIT else 0))
            return True
        if n == EXPECT:
            v = self._view(op, env, 0)
            m = re.search(r"%[\w$.#-]+\s*,\s*(\d+)\s*(?:,|:|$)", op.text)
            if not m:
                raise err(self.path, op.line, "cannot read the byte count of ttng.barrier_expect", FIX)
            pred = env.get(op.operands[1]) if len(op.operands) > 1 else True
            events.append(HEvent("expect", op.line, short(op), bar=v[1], bar_slot=v[2], bytes=int(m.group(1)),
                                 pred=pred))
            return True
        if n == TMA:
            if len(op.operands) < 3:
                raise err(self.path, op.line, "cannot read the operands of this TMA copy", FIX)
            # operands: descriptor, coordinates..., destination, barrier, predicate
            dst_i = next((k for k in range(1, len(op.operands))
                          if isinstance(env.get(op.operands[k]), tuple)), None)
            if dst_i is None or dst_i + 1 >= len(op.operands):
                raise err(self.path, op.line, "cannot tell the destination slot and barrier of this TMA copy",
                          "the destination and the barrier must be views of shared allocations")
            dst = self._view(op, env, dst_i)
            bar = self._view(op, env, dst_i + 1)
            pred = env.get(op.operands[dst_i + 2]) if dst_i + 2 < len(op.operands) else True
            shape, elem = _memdesc(op.text, self.path, op.line)
            box = re.search(r"tensordesc<([\dx]+)x([A-Za-z]\w*)", op.text)
            if box and (math.prod(int(x) for x in box.group(1).split("x")), box.group(2)) != (math.prod(shape), elem):
                raise err(self.path, op.line, f"the TMA box {box.group(1)}x{box.group(2)} and its destination "
                          f"{'x'.join(map(str, shape))}x{elem} differ in size", FIX)
            if elem not in ELEM_BYTES:
                raise err(self.path, op.line, f"element type {elem} of the TMA box is not known",
                          f"use one of {', '.join(sorted(ELEM_BYTES))}")
            events.append(HEvent("tma", op.line, short(op), buf=dst[1], slot=dst[2], bar=bar[1], bar_slot=bar[2],
                                 pred=pred, bytes=math.prod(shape) * ELEM_BYTES[elem]))
            return True
        if n == WAIT:
            v = self._view(op, env, 0)
            if len(op.operands) < 2:
                raise err(self.path, op.line, "ttng.wait_barrier without a phase", FIX)
            pred = env.get(op.operands[2]) if len(op.operands) > 2 else True
            events.append(HEvent("wait", op.line, short(op), bar=v[1], bar_slot=v[2], phase=env.get(op.operands[1]),
                                 pred=pred))
            return True
        if n == DOT:
            for o in op.operands[:2]:
                if o not in env:
                    raise err(self.path, op.line, f"{n} reads {o}, which is not defined before it",
                              "pass the whole printed module")
            reads = tuple((v[1], v[2] if v[0] == "view" else 0) for o in op.operands[:2] for v in [env.get(o)]
                          if isinstance(v, tuple) and v[0] in ("view", "buf"))
            events.append(HEvent("dot", op.line, short(op), reads=reads,
                                 is_async=str(op.attrs.get("isAsync", "false")) == "true"))
            for r in op.results[:1]:
                env[r] = None
            return True
        if n == DOT_WAIT:
            if "pendings" not in op.attrs:
                raise err(self.path, op.line, "ttng.warp_group_dot_wait without {pendings = N}",
                          "print the TTGIR with attributes")
            events.append(HEvent("dotwait", op.line, short(op), count=int(op.attrs["pendings"])))
            for r in op.results:
                env[r] = None
            return True
        if n in ("ttg.barrier", "gpu.barrier"):
            # a CTA bar.sync: a convergence point of the role's threads (in the loop; elsewhere nothing to prove)
            if where == "in the loop":
                events.append(HEvent("barsync", op.line, short(op)))
            return True
        if n in ("ttg.local_dealloc", "ttng.fence_async_shared"):
            return True
        if n in ("ttg.async_copy_global_to_local", "ttg.async_commit_group", "ttg.async_wait"):
            raise err(self.path, op.line, f"{n}: cp.async in the same loop as TMA copies is outside the model of "
                      "this check", "check a kernel whose pipelined loads are all tensor-descriptor (TMA) loads")
        if n.startswith("ttng.") and any(t in n for t in ("async", "tma", "barrier", "dot", "mma", "tmem")):
            raise err(self.path, op.line, f"{n} is outside the model of the sm_90 TMA pipeline check",
                      "see docs/check.md, 'Triton Hopper TTGIR', for the ops it reads")
        return False


# ----------------------------------------------------------------------------------------------
# fits of carried values (slot indices and phase bits), proven by induction

def _fit(seq: list, mods: list):
    """``fit`` of :mod:`.scfloop`, or ``("par", b, N)``: ``((k + b) / N) % 2`` for ``k >= 1``."""
    f = fit(seq, mods)
    if f is not None or len(seq) < 4 or any(not isinstance(x, int) or isinstance(x, bool) for x in seq[1:]):
        return f
    for N in sorted(set(mods) | {1}):
        for b in range(2 * N):
            if all(seq[k] == ((k + b) // N) % 2 for k in range(1, len(seq))):
                return ("par", b, N)
    return None


def _at(f, k):
    if f[0] == "par":
        return ((k + f[1]) / f[2]) % 2 if is_sym(k) else ((k + f[1]) // f[2]) % 2
    return fit_at(f, k)


def _same(y, nxt, k) -> bool:
    if isinstance(nxt, tuple):
        if not (isinstance(y, tuple) and y[0] == "view" and y[1] == nxt[1] and y[3] == nxt[3]) or y[2] is None:
            return False
        return valid(_z(y[2]) == nxt[2], [k >= 1])
    if y is None or isinstance(y, tuple) or (is_sym(y) and z3.is_bool(y)):
        return False
    return valid(_z(y) == nxt, [k >= 1])


def _z(x):
    if is_sym(x):
        return z3.If(x, z3.IntVal(1), z3.IntVal(0)) if z3.is_bool(x) else x
    return z3.IntVal(int(x))


def _zb(x):
    if is_sym(x):
        return x if z3.is_bool(x) else x != 0
    return z3.BoolVal(bool(x))


# ----------------------------------------------------------------------------------------------
# Z3 terms -> synth expressions (guards)

def render(t, names: dict) -> str:
    """A synth expression (docs: synth/expr.py) equal to the Z3 term ``t``; ValueError if it has none."""
    t = z3.simplify(t)
    return _render(t, names)


def _render(t, names: dict) -> str:
    if z3.is_true(t):
        return "(0 == 0)"
    if z3.is_false(t):
        return "(0 != 0)"
    if z3.is_int_value(t):
        v = t.as_long()
        return str(v) if v >= 0 else f"(0 - {-v})"
    if z3.is_const(t):
        if t.decl().name() not in names:
            raise ValueError(f"unknown value {t}")
        return names[t.decl().name()]
    k = t.decl().kind()
    a = [_render(c, names) for c in t.children()]
    binop = {z3.Z3_OP_LT: "<", z3.Z3_OP_LE: "<=", z3.Z3_OP_GT: ">", z3.Z3_OP_GE: ">=", z3.Z3_OP_SUB: "-"}
    if k in binop and len(a) == 2:
        return f"({a[0]} {binop[k]} {a[1]})"
    if k == z3.Z3_OP_ADD:
        return "(" + " + ".join(a) + ")"
    if k == z3.Z3_OP_MUL:
        return "(" + " * ".join(a) + ")"
    if k == z3.Z3_OP_UMINUS:
        return f"(0 - {a[0]})"
    if k in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
        d = t.children()[1]
        if not (z3.is_int_value(d) and d.as_long() > 0):
            raise ValueError(f"division by a non-constant in {t}")
        return f"({a[0]} {'/' if k == z3.Z3_OP_IDIV else '%'} {a[1]})"
    if k == z3.Z3_OP_ITE:
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if k == z3.Z3_OP_NOT:
        return f"(!{a[0]})"
    if k == z3.Z3_OP_AND:
        return "(" + " && ".join(a) + ")"
    if k == z3.Z3_OP_OR:
        return "(" + " || ".join(a) + ")"
    if k in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) and len(a) == 2:
        if z3.is_bool(t.children()[0]):
            eq = f"(({a[0]} && {a[1]}) || (!{a[0]} && !{a[1]}))"
            return eq if k == z3.Z3_OP_EQ else f"(!{eq})"
        return f"({a[0]} {'==' if k == z3.Z3_OP_EQ else '!='} {a[1]})"
    if k == z3.Z3_OP_IMPLIES:
        return f"((!{a[0]}) || {a[1]})"
    if k == z3.Z3_OP_XOR:
        return f"(({a[0]} && !{a[1]}) || (!{a[0]} && {a[1]}))"
    raise ValueError(f"cannot write {t.decl().name()} as a synth expression")


# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HopperImport:
    """The mapped program and where each of its statements comes from."""

    program: HopperProgram
    path: str
    loop_line: int
    sources: dict = field(default_factory=dict)
    """``(part, position)`` of the mainloop role -> (source line, text)."""
    notes: tuple = ()


@dataclass
class _Ctx:
    path: str
    k: object
    T: object
    iv_known: bool
    slack: object = None
    """The Z3 symbol ``d`` of :func:`symbolic_bound` when the loop's step is ``s > 1`` (its facts:
    :func:`slack_facts`), else None."""
    step: int = 1


def symbolic_bound(lb: int, step: int, T):
    """``(value, slack)``: what a loop's symbolic upper bound is read as so that the loop runs ``T`` times.
    Step 1: ``lb + T``, no slack. Step ``s > 1`` (attention's ``tl.range(0, N_CTX, BLOCK_N)``): ``lb + s T -
    d`` with a fresh ``d`` in ``[0, s)`` -- every bound in ``(lb + s (T - 1), lb + s T]`` gives ``T``
    iterations, so ``d`` ranges over all of them; each predicate must be the same for every ``d``
    (:func:`_guard` renders it at ``d = 0`` and proves it equal for all ``d``), never assumed."""
    if step == 1:
        return T + lb, None
    d = z3.Int("ub_slack")
    return lb + step * T - d, d


def slack_facts(ctx) -> list:
    """``0 <= d < s`` for a loop read with :func:`symbolic_bound`'s slack, else nothing."""
    d = getattr(ctx, "slack", None)
    return [] if d is None else [d >= 0, d < ctx.step]


def ttgir_to_hopper(text: str, path: str, *, min_trip_count: Optional[int] = None,
                    arrive_sync: bool = True) -> HopperImport:
    """Read an sm_90 pipelined TTGIR module (module docstring); SynthError for what is outside the model.

    The one role runs the module's ``32 x num-warps`` threads (at most 128 are modeled: one warp group's
    worth, each thread of any warp group a "thread 1"); its expects and TMA copies are elected (Triton lowers
    them under ``thread id == 0``); its wgmmas are collective when ``num-warps`` is at most 4 (one warp group:
    a wgmma converges every thread of the role; with more warps each warp group converges alone, so a wgmma
    is no convergence point of the role). ``arrive_sync``: each ``ttng.barrier_expect`` is preceded by a
    ``bar_sync`` of the role's threads, as Triton's lowering emits (``bar.sync 0`` before the elected
    ``mbarrier.arrive.expect_tx``); ``False`` proves the TTGIR's own convergence points only."""
    r = read_one_loop(text, path)
    bad = next((s for s in r.shots if not s.ok), None)
    if bad is not None:  # this reader has no obligation to put it in: the reader of TMA stores does
        raise err(path, bad.line, f"one-shot TMA load through barrier {bad.barrier} before the loop: {bad.why}", FIX)
    imp = _build(r.ctx, r.walker, r.loop, r.pro, r.body, r.runs, r.epi, r.trip, min_trip_count,
                 _func_name(r.mod, r.loop), warps=module_warps(r.text), arrive_sync=arrive_sync)
    return dataclasses.replace(imp, notes=imp.notes + r.notes) if r.notes else imp


@dataclass
class OneLoop:
    """What :func:`read_one_loop` reads: the module, the pipelined loop, its walker and context, the events
    before the loop (one-shot loads taken out: :mod:`.ttgir_oneshot`), of one symbolic iteration, of the
    concrete first iterations and after the loop, the trip count, notes."""

    mod: list
    text: str
    loop: Op
    walker: object
    ctx: object
    pro: list
    body: list
    runs: list
    epi: list
    trip: object
    notes: tuple
    shots: tuple = ()
    """The one-shot loads taken out of ``pro`` (:class:`.ttgir_oneshot.OneShot`, each ``ok`` or not)."""


def pipelined_loops(mod: list) -> list:
    """The ``scf.for`` loops of ``mod`` holding a TMA copy or a barrier wait, in program order."""
    return [op for op in walk(mod) if op.name == "scf.for" and op.regions
            and any(x.name in (TMA, WAIT) for x in walk(op.regions[0]))]


def loop_segments(path: str, mod: list, loops: list) -> list:
    """``(block, start, pos, end)`` per pipelined loop when every one is an op of the same block and the code
    between two of them ends the first one's barriers (a ``ttng.inval_barrier`` after it) before the next
    begins: segment ``j`` is ``block[start:end]``, its loop at ``pos`` (the code after the last
    ``inval_barrier`` that follows loop ``j - 1`` starts segment ``j``). Exit 2 otherwise."""
    block = find_block(mod, loops[0])
    pos = [next((i for i, op in enumerate(block) if op is lp), None) for lp in loops]
    if any(p is None for p in pos):
        lp = next(lp for lp, p in zip(loops, pos) if p is None)
        raise err(path, lp.line, "several pipelined loops (or a nested one) in one module, not all in one block",
                  "pass a kernel whose pipelined loops run one after the other")
    starts = [0]
    for j in range(1, len(loops)):
        inv = [i for i in range(pos[j - 1] + 1, pos[j]) if block[i].name == INVAL]
        if not inv:
            raise err(path, loops[j].line, f"the pipelined loop at line {loops[j].line} starts before the barriers of "
                      f"the loop at line {loops[j - 1].line} are invalidated: several pipelines sharing barriers are "
                      "outside the model", "pass a kernel whose pipelined loops run one after the other")
        starts.append(inv[-1] + 1)
    ends = starts[1:] + [len(block)]
    return [(block, starts[j], pos[j], ends[j]) for j in range(len(loops))]


def read_one_loop(text: str, path: str, walker=None, segment: Optional[int] = None) -> OneLoop:
    """The events of a module with one pipelined TMA loop (``walker``: a :class:`HopperWalker` class, the
    default, or one that reads more ops); SynthError (exit 2) for what is outside the model. ``segment`` j:
    the module has several pipelined loops one after the other (:func:`loop_segments`), and this reads the
    j-th with the code of its segment (the values of the code before it are evaluated, its events dropped)."""
    walker = walker or HopperWalker
    text = new_dialect_names(text)
    mod = parse_module(text, path)
    loops = pipelined_loops(mod)
    if not loops:
        raise err(path, 0, "no pipelined loop: no scf.for holds a ttng.async_tma_copy_global_to_local or "
                  "ttng.wait_barrier", FIX)
    if len(loops) > 1 and segment is None:
        raise err(path, loops[1].line, "several pipelined loops (or a nested one) in one module",
                  "pass a kernel with one pipelined loop")
    if segment is None:
        lp = loops[0]
        block = find_block(mod, lp)
        pos = next(i for i, op in enumerate(block) if op is lp)
        start, end = 0, len(block)
    else:
        block, start, pos, end = loop_segments(path, mod, loops)[segment]
        lp = block[pos]
    m = re.search(r"scf\.for\s+(%[\w$.-]+)\s*=\s*(%[\w$.-]+(?:#\d+)?)\s+to\s+(%[\w$.-]+(?:#\d+)?)\s+step\s+"
                  r"(%[\w$.-]+(?:#\d+)?)", lp.text)
    if not m:
        raise err(path, lp.line, "cannot read this scf.for header", "print the IR with MLIR's default printer")
    iv, lb, ub, st = m.groups()
    iters = re.findall(r"(%[\w$.-]+)\s*=\s*(%[\w$.-]+(?:#\d+)?)", lp.text[lp.text.find("iter_args"):]) \
        if "iter_args" in lp.text else []

    def values_before(w, env: dict) -> None:
        """The values of the code before the segment (its loops' results unknown, its events dropped)."""
        for op in block[:start]:
            if any(op is x for x in loops):
                for r in op.results:
                    env[r] = None
            else:
                w.op(op, env, [], "before the loop")

    # pass 1: is the upper bound a constant, or a constant away from the lower bound?
    probe: dict = {}
    pw = walker(path, {})
    values_before(pw, probe)
    pw.block(block[start:pos], probe, [], "before the loop")
    T = z3.Int("T")
    ubv = probe.get(ub)
    lb0, st0 = probe.get(lb), probe.get(st)
    fixed = isinstance(ubv, int) and not isinstance(ubv, bool)
    span = None  # ub - lb when both are symbolic and their difference is a constant
    if not fixed and is_sym(ubv) and is_sym(lb0) and not z3.is_bool(ubv) and not z3.is_bool(lb0):
        d = z3.simplify(ubv - lb0)
        span = d.as_long() if z3.is_int_value(d) else None
        fixed = span is not None
    if not fixed and not (isinstance(lb0, int) and not isinstance(lb0, bool) and isinstance(st0, int)
                          and not isinstance(st0, bool) and st0 >= 1):
        raise err(path, lp.line, "the pipelined loop's bound is not a constant and its lower bound or step is not "
                  "a constant", "pass a loop `range(c, n, s)` with constants c and s > 0")
    ubsym, slack = (None, None) if fixed else symbolic_bound(lb0, st0, T)
    bind = {} if fixed else {ub: ubsym}  # T iterations: the upper bound is lb + s T - d
    w = walker(path, bind)
    env: dict = dict(bind)
    values_before(w, env)
    pro: list = []
    w.block(block[start:pos], env, pro, "before the loop")
    lbv, stv = env.get(lb), env.get(st)
    if not ((isinstance(lbv, int) or span is not None) and isinstance(stv, int)) or isinstance(lbv, bool) or stv <= 0:
        raise err(path, lp.line, "the pipelined loop's lower bound and step must be constants (step > 0)", FIX)
    trip: object = max(0, math.ceil(((ubv - lbv) if span is None else span) / stv)) if fixed else T
    if fixed and trip < 1:
        raise err(path, lp.line, f"the pipelined loop runs {trip} times", "a Hopper pipeline needs T >= 1")

    names = [a for a, _ in iters]
    inits = [env.get(i) for _, i in iters]
    body = lp.regions[0]
    runs, sym, fits, k = fit_carried(w, body, env, names, inits, lambda kk: lbv + kk * stv, iv, _fit, _at, _same)
    epi: list = []
    env_after = dict(env)
    for r in lp.results:
        env_after[r] = None
    w.block(block[pos + 1:end], env_after, epi, "after the loop")
    ctx = _Ctx(path, k, T, fixed, slack, stv)
    pro, shots = one_shot_loads(pro, sym + epi)
    epi = drop_invals(epi, shots)
    return OneLoop(mod, text, lp, w, ctx, pro, sym, runs, epi, trip, tuple(s.note() for s in shots), tuple(shots))


def module_warps(text: str) -> int:
    """The module's ``"ttg.num-warps"`` (4 when it does not say)."""
    m = re.search(r'"ttg\.num-warps"\s*=\s*(\d+)', text)
    return int(m.group(1)) if m else 4


def _func_name(mod: list, lp: Op) -> str:
    for op in walk(mod):
        if op.name in ("tt.func", "func.func") and op.regions and find_block(op.regions[0], lp):
            m = re.search(r"@([\w$.]+)", op.text)
            if m:
                return m.group(1)
    return "kernel"


def _const_slot(ctx: _Ctx, e: HEvent, what: str, slot) -> int:
    if not isinstance(slot, int) or isinstance(slot, bool):
        raise err(ctx.path, e.line, f"{what} of {e.text} before or after the loop is not a constant",
                  "indirect or data-dependent slot indices are outside the model")
    return slot


def _rot(ctx: _Ctx, e: HEvent, vals: list, symval, m: int) -> int:
    """``c`` with a body slot (``vals`` per concrete run, ``symval`` at ``k``) ``== (k + c) % m``
    (every concrete run, and Z3 for ``k >= 1``)."""
    if any(not isinstance(v, int) or isinstance(v, bool) for v in vals):
        raise err(ctx.path, e.line, f"slot index of {e.text} is not a constant per iteration (indirect or "
                  "data-dependent)", "indirect slot indices are outside the model")
    c = vals[0] % m
    if symval is None or any(v != (j + c) % m for j, v in enumerate(vals)) or \
            not valid(_z(symval) == (ctx.k + c) % m, [ctx.k >= 1]):
        raise err(ctx.path, e.line, f"slot index of {e.text} is not (k + c) % {m} in iteration k (could not be "
                  "derived from the loop's induction variable or iter_args)",
                  "only rotating slot indices are supported")
    return c


def _last(e: int, c: int, m: int) -> int:
    """The largest ``a <= e`` with ``a % m == c % m``."""
    return e - ((e - c) % m)


def _guard(ctx: _Ctx, e: HEvent, pred, runs_preds: Optional[list], var: str):
    """The guard Expr of a predicate (None: always), rendered and checked equal to the Z3 term."""
    if pred is None:
        raise err(ctx.path, e.line, f"the predicate of {e.text} is not known (it depends on a value synth does "
                  "not model)", "predicates must be functions of the induction variable and the trip count")
    p = _zb(pred)
    facts = slack_facts(ctx)
    if runs_preds is not None:
        for j, rp in enumerate(runs_preds):
            if rp is None or not valid(_zb(rp) == z3.substitute(p, (ctx.k, z3.IntVal(j))), [ctx.T >= 1] + facts):
                raise err(ctx.path, e.line, f"the predicate of {e.text} in iteration {j} differs from the one "
                          "synth derived for every iteration", "predicates must be functions of k and T")
    p = z3.simplify(p)
    # a loop of step s > 1 with a symbolic bound: the predicate at d = 0, proven equal for every d below
    p0 = p if not facts else z3.simplify(z3.substitute(p, (ctx.slack, z3.IntVal(0))))
    if z3.is_true(p0) and valid(p, facts):
        return None
    try:
        s = render(p0, {"k": var, "T": "T"})
        g = parse(s)
    except Exception as x:  # noqa: BLE001 -- ValueError or ExprError: reported as outside the model
        raise err(ctx.path, e.line, f"the predicate of {e.text} cannot be written as a guard ({x})",
                  "predicates must be affine conditions on k and T") from None
    back = to_z3(g, {var: ctx.k, "T": ctx.T})
    if not valid(back == p, facts):
        raise err(ctx.path, e.line, f"the predicate of {e.text} " + ("depends on where the loop's bound falls "
                  f"between two multiples of its step {ctx.step}" if facts else "could not be rendered exactly"),
                  FIX)
    return g


def _and(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return parse(f"({to_str(a)}) && ({to_str(b)})")


def _build(ctx: _Ctx, w: HopperWalker, lp: Op, pro: list, body: list, runs: list, epi: list, trip,
           min_trip: Optional[int], name: str, *, warps: int = 4, arrive_sync: bool = True) -> HopperImport:
    """The Hopper program of the loop's events (module docstring: counts, steps, guards), its role on
    ``32 x warps`` threads (:func:`ttgir_to_hopper`)."""
    path = ctx.path
    tma_bufs = sorted({e.buf for e in pro + body if e.kind == "tma"})
    for e in epi:
        if e.kind in ("tma", "expect", "wait", "init") or (e.kind == "dot" and
                                                             any(b in tma_bufs for b, _ in e.reads)):
            raise err(path, e.line, f"{e.text} after the pipelined loop is outside the model (Triton's sm_90 "
                      "pipeliner does not peel its epilogue)", FIX)
    for e in pro:
        if e.kind == "inval":
            raise err(path, e.line, f"{e.text} before the pipelined loop: a barrier invalidated before the loop "
                      "that uses it is outside the model", FIX)
    bars = sorted({e.bar for e in pro + body + epi if e.kind in ("init", "inval", "expect", "wait")}
                  | {e.bar for e in pro + body if e.kind == "tma"})
    if not any(e.kind == "tma" for e in body):
        raise err(path, lp.line, "the pipelined loop issues no TMA copy", FIX)
    if set(bars) & set(tma_bufs):
        raise err(path, lp.line, "a shared allocation is used both as a barrier and as a TMA destination", FIX)
    slots = {}
    for b in bars + tma_bufs:
        s = w.buffers.get(b, 1)
        if not 1 <= s <= MAX_SLOTS:
            raise err(path, lp.line, f"{b} has {s} slots", f"at most {MAX_SLOTS} slots are supported")
        slots[b] = s
    barriers, setup, teardown = _barriers(ctx, lp, pro, body, epi, bars, slots)
    p_writes = {b: sum(1 for e in pro if e.kind == "tma" and e.buf == b) for b in tma_bufs}
    p_expects = {b: sum(1 for e in pro if e.kind == "expect" and e.bar == b) for b in bars}
    P = max(p_writes.values())
    ops = {f"tma_{b}": ProgOp(f"tma_{b}", "tma", P - p_writes[b], True, None, None) for b in tma_bufs}
    buffers = []
    for b in tma_bufs:
        box = {e.bytes for e in pro + body if e.kind == "tma" and e.buf == b}
        if len(box) != 1:
            raise err(path, lp.line, f"TMA copies into {b} have different box sizes {sorted(box)}", FIX)
        buffers.append(ProgBuffer(b, "shared", slots[b], box.pop()))
    lay = _Layout(ctx, slots, tma_bufs, bars, p_writes, p_expects, P, ops, arrive_sync=arrive_sync)
    stmts = _body_part(lay, lp, body, runs)
    pstmts = _prologue_part(lay, pro)
    estmts: list = []
    for e in epi:
        if e.kind == "dotwait":
            lay.waits.append(Wait("epilogue", 0, Num(e.count), "the end of the kernel", reason=e.text))
            lay.add(WaitStmt(len(lay.waits) - 1), e, "epilogue", estmts)
    fixed = ctx.iv_known and isinstance(trip, int) and not is_sym(trip)
    parts = []
    if pstmts:
        parts.append(Part("prologue", "i", Num(P), tuple(pstmts)))
    parts.append(Part("body", "i", Num(int(trip)) if fixed else Var("T"), tuple(stmts)))
    if estmts:
        parts.append(Part("epilogue", "i", Num(1), tuple(estmts)))
    # renumber the waits in statement order (prologue, body, epilogue)
    order = [s.wait for pt in parts for s in pt.stmts if isinstance(s, WaitStmt)]
    remap = {old: new for new, old in enumerate(order)}
    parts = [Part(pt.name, pt.var, pt.extent, tuple(WaitStmt(remap[s.wait], s.guard) if isinstance(s, WaitStmt)
                                                    else s for s in pt.stmts)) for pt in parts]
    waits = [lay.waits[old] for old in order]
    mt = max(1, min_trip or 1)
    tc = int(trip) if fixed else "T"
    opl = tuple(ops.values())
    role = Program(f"{name}.mainloop", "k", tc, mt, max(o.stage for o in opl), opl, tuple(buffers), ("wgmma",),
                   tuple(parts), tuple(waits))
    threads = min(128, 32 * warps)
    coll = tuple(o.name for o in opl if o.unit == "wgmma" and any(
        isinstance(s, OpStmt) and s.op == o.name for pt in parts for s in pt.stmts)) if warps <= 4 else ()
    notes = (f"Triton sm_90 TTGIR {path}: loop at line {lp.line}, {P} prologue step(s), one role of {warps} "
             f"warps ({threads} threads modeled{', wgmma collective' if coll else ''})"
             + ("; a CTA bar.sync before each expect (Triton's lowering)" if arrive_sync else
                "; no bar.sync before an expect but the TTGIR's own"),)
    prog = HopperProgram(name, "k", tc, mt, opl, tuple(buffers), tuple(barriers), tuple(setup),
                         (Role("mainloop", 1, role, threads, coll),), tuple(teardown), notes)
    try:
        validate_hopper(prog)
    except HopperError as x:
        raise err(path, lp.line, f"the mapped program is malformed: {x.path}: {x.msg}", x.fix) from None
    return HopperImport(prog, path, lp.line, lay.sources, notes)


def _barriers(ctx: _Ctx, lp: Op, pro: list, body: list, epi: list, bars: list, slots: dict):
    """``(barriers, setup, teardown)``: a barrier's ``init`` when every slot is initialized once, with the
    same count, before its first use (then the init fence); its ``inval`` when every slot is invalidated
    after the loop."""
    path = ctx.path
    init_count: dict = {}
    seen_use = False
    for e in pro:
        if e.kind == "init":
            if seen_use:
                raise err(path, e.line, "ttng.init_barrier after the barriers are used", FIX)
            s = _const_slot(ctx, e, "barrier slot", e.bar_slot)
            init_count.setdefault(e.bar, {})
            if s in init_count[e.bar]:
                raise err(path, e.line, f"slot {s} of {e.bar} is initialized twice", FIX)
            init_count[e.bar][s] = e.count
        else:
            seen_use = True
    barriers, setup, teardown = [], [], []
    for b in bars:
        counts = init_count.get(b, {})
        if len(set(counts.values())) > 1:
            raise err(path, lp.line, f"the slots of barrier {b} are initialized with different counts "
                      f"{sorted(set(counts.values()))}", "initialize every slot with the same arrival count")
        count = next(iter(counts.values()), 1)
        if not 1 <= count <= 1024:
            raise err(path, lp.line, f"barrier {b} init count {count} out of range", "use 1..1024")
        guards = tuple(sorted({e.buf for e in pro + body if e.kind == "tma" and e.bar == b}))
        barriers.append(Barrier(b, slots[b], count, "full", guards))
        if set(counts) == set(range(slots[b])):
            setup.append(InitStmt(b))
        inv = {_const_slot(ctx, e, "barrier slot", e.bar_slot) for e in epi if e.kind == "inval" and e.bar == b}
        if inv == set(range(slots[b])):
            teardown.append(InvalStmt(b))
    if setup:
        setup.append(FenceStmt("mbarrier_init"))
    return barriers, setup, teardown


@dataclass
class _Layout:
    """What the parts share: slot counts, prologue writes / expects per buffer / barrier, the prologue's
    steps ``P``, the ops, the wgmma waits, the wgmma stage and each statement's source line."""

    ctx: _Ctx
    slots: dict
    tma_bufs: list
    bars: list
    p_writes: dict
    p_expects: dict
    P: int
    ops: dict
    sources: dict = field(default_factory=dict)
    waits: list = field(default_factory=list)
    dot_stage: Optional[int] = None
    arrive_sync: bool = True

    def add(self, stmt, e: HEvent, part: str, out: list) -> None:
        if self.arrive_sync and isinstance(stmt, ArriveStmt):
            # Triton's lowering of ttng.barrier_expect: a CTA bar.sync, then thread 0 arrives
            self.sources[(part, len(out))] = (e.line, e.text)
            out.append(BarSyncStmt(1, stmt.guard))
        self.sources[(part, len(out))] = (e.line, e.text)
        out.append(stmt)


def _body_part(lay: _Layout, lp: Op, body: list, runs: list) -> list:
    """The body's statements (iteration ``k`` is ``i``; counts ``i + c``)."""
    ctx, path, slots, P = lay.ctx, lay.ctx.path, lay.slots, lay.P
    stmts: list = []
    n_writes = {b: 0 for b in lay.tma_bufs}     # writes / expects so far in this iteration
    n_expects = {b: 0 for b in lay.bars}
    n_dot = 0

    def count_of(bar: str, c: int) -> int:
        """Offset ``a``: the last expect on slot ``(k + c) % M`` before here names count ``k + a``."""
        return _last(lay.p_expects[bar] + n_expects[bar] - 1, c, slots[bar])

    for n_ev, e in enumerate(body):
        preds = [r[n_ev].pred for r in runs]
        if e.kind == "expect":
            if n_expects[e.bar]:
                raise err(path, e.line, f"two ttng.barrier_expect on {e.bar} in one iteration", FIX)
            c = _rot(ctx, e, [r[n_ev].bar_slot for r in runs], e.bar_slot, slots[e.bar])
            if c != lay.p_expects[e.bar] % slots[e.bar]:
                raise err(path, e.line, f"barrier_expect number n on {e.bar} does not use slot n % "
                          f"{slots[e.bar]} (slot (k + {c}) % {slots[e.bar]}, {lay.p_expects[e.bar]} before the "
                          "loop)", "only barriers whose slots rotate with the pipeline are supported")
            n_expects[e.bar] += 1
            lay.add(ArriveStmt(e.bar, PipelineState(parse(f"i + {lay.p_expects[e.bar]}"), slots[e.bar], 0), 1,
                               (Tx(e.bytes),), _guard(ctx, e, e.pred, preds, "i")), e, "body", stmts)
        elif e.kind == "tma":
            pw = lay.p_writes[e.buf]
            c = _rot(ctx, e, [r[n_ev].slot for r in runs], e.slot, slots[e.buf])
            if c != pw % slots[e.buf]:
                raise err(path, e.line, f"TMA write number n into {e.buf} does not land in slot n % {slots[e.buf]}",
                          "only rotating multi-buffers are supported")
            if n_writes[e.buf]:
                raise err(path, e.line, f"two TMA copies into {e.buf} in one iteration", FIX)
            n_writes[e.buf] += 1
            a = count_of(e.bar, _rot(ctx, e, [r[n_ev].bar_slot for r in runs], e.bar_slot, slots[e.bar]))
            ver = parse(f"i + {pw}")
            lay.add(OpStmt(f"tma_{e.buf}", ver, _guard(ctx, e, e.pred, preds, "i"), None, (),
                           (Access(e.buf, ver, parse(f"(i + {pw}) % {slots[e.buf]}")),),
                           BarrierRef(e.bar, PipelineState(parse(f"i + {a}"), slots[e.bar], 0), e.bytes)),
                    e, "body", stmts)
        elif e.kind == "wait":
            a = count_of(e.bar, _rot(ctx, e, [r[n_ev].bar_slot for r in runs], e.bar_slot, slots[e.bar]))
            g = _guard(ctx, e, e.pred, preds, "i")
            for st, sg in _wait_states(ctx, e, n_ev, runs, a, slots[e.bar]):
                lay.add(TryWaitStmt(e.bar, st, _and(g, sg)), e, "body", stmts)
        elif e.kind == "dot":
            acc = []
            for j, (b, _s) in enumerate(e.reads):
                if b not in lay.tma_bufs:
                    continue  # a buffer no async copy writes: nothing to wait for
                c = _rot(ctx, e, [r[n_ev].reads[j][1] for r in runs], e.reads[j][1], slots[b])
                acc.append((b, _last(lay.p_writes[b] + n_writes[b] - 1, c, slots[b])))
            if not acc:
                raise err(path, e.line, "this wgmma reads no TMA-written slot", FIX)
            stg = {P - a for _, a in acc}
            if len(stg) > 1 or (lay.dot_stage is not None and lay.dot_stage not in stg):
                raise err(path, e.line, "the wgmma ops of one iteration read TMA slots of different iterations", FIX)
            lay.dot_stage = stg.pop()
            opn = "wgmma" if n_dot == 0 else f"wgmma_{n_dot}"
            n_dot += 1
            lay.ops[opn] = ProgOp(opn, "wgmma", lay.dot_stage, True, 0, None)
            reads = tuple(Access(b, parse(f"i + {a}"), parse(f"(i + {a}) % {slots[b]}"), f"tma_{b}") for b, a in acc)
            lay.add(OpStmt(opn, parse(f"i + {P - lay.dot_stage}"), None, 0, reads, ()), e, "body", stmts)
            lay.add(CommitStmt(0, 0), e, "body", stmts)
            if not e.is_async:
                lay.waits.append(Wait("body", 0, Num(0), opn, reason="synchronous warp_group_dot"))
                lay.add(WaitStmt(len(lay.waits) - 1), e, "body", stmts)
        elif e.kind == "dotwait":
            lay.waits.append(Wait("body", 0, Num(e.count), "the next statement", reason=e.text))
            lay.add(WaitStmt(len(lay.waits) - 1), e, "body", stmts)
        elif e.kind == "barsync":
            lay.add(BarSyncStmt(1), e, "body", stmts)
    if n_dot == 0:
        raise err(path, lp.line, "the pipelined loop has no ttng.warp_group_dot", FIX)
    for b in lay.tma_bufs:
        if not n_writes[b]:
            raise err(path, lp.line, f"{b} is written by TMA only before the loop", FIX)
    return stmts


def _prologue_part(lay: _Layout, pro: list) -> list:
    """The prologue's statements: Triton unrolls it, so each statement runs at its step ``s`` (a TMA:
    its version plus its op's stage; a wgmma: the version it reads plus the wgmma stage; any other
    statement: the step of the next op statement), guarded ``i == s``, its counts written ``i + c``."""
    ctx, path, slots = lay.ctx, lay.ctx.path, lay.slots
    pw = {b: 0 for b in lay.tma_bufs}
    pe = {b: 0 for b in lay.bars}
    last_expect: dict = {}
    last_write: dict = {}
    planned = []
    for e in pro:
        if e.kind == "tma":
            s_ = _const_slot(ctx, e, "slot", e.slot)
            if s_ != pw[e.buf] % slots[e.buf]:
                raise err(path, e.line, f"TMA write number {pw[e.buf]} into {e.buf} lands in slot {s_}, not "
                          f"{pw[e.buf] % slots[e.buf]}", "only rotating multi-buffers are supported")
            bs = _const_slot(ctx, e, "barrier slot", e.bar_slot)
            cnt = last_expect.get((e.bar, bs), bs - slots[e.bar])
            planned.append((pw[e.buf] + lay.ops[f"tma_{e.buf}"].stage, e, ("tma", pw[e.buf], cnt)))
            last_write[(e.buf, s_)] = pw[e.buf]
            pw[e.buf] += 1
        elif e.kind == "expect":
            bs = _const_slot(ctx, e, "barrier slot", e.bar_slot)
            if bs != pe[e.bar] % slots[e.bar]:
                raise err(path, e.line, f"barrier_expect number {pe[e.bar]} on {e.bar} uses slot {bs}", FIX)
            last_expect[(e.bar, bs)] = pe[e.bar]
            planned.append((None, e, ("expect", pe[e.bar])))
            pe[e.bar] += 1
        elif e.kind == "wait":
            bs = _const_slot(ctx, e, "barrier slot", e.bar_slot)
            ph = e.phase
            if not isinstance(ph, int) or isinstance(ph, bool):
                raise err(path, e.line, "the phase of this wait before the loop is not a constant", FIX)
            cnt = last_expect.get((e.bar, bs), bs - slots[e.bar])
            planned.append((None, e, ("wait", cnt, 0 if ph % 2 == (cnt // slots[e.bar]) % 2 else 1)))
        elif e.kind == "dot":
            vers = [(b, last_write.get((b, s_), s_ - slots[b])) for b, s_ in
                    ((b, _const_slot(ctx, e, "slot", s_)) for b, s_ in e.reads if b in lay.tma_bufs)]
            if lay.dot_stage is None or not vers or len({v for _, v in vers}) > 1:
                raise err(path, e.line, "a wgmma before the loop that synth cannot place", FIX)
            planned.append((vers[0][1] + lay.dot_stage, e, ("dot", vers)))
        elif e.kind == "dotwait":
            planned.append((None, e, ("dotwait", e.count)))
    nxt = None  # a statement without a step of its own runs at the step of the next op statement
    for n in range(len(planned) - 1, -1, -1):
        step, e, what = planned[n]
        nxt = step if step is not None else nxt
        planned[n] = (nxt, e, what)
    out: list = []
    prev = 0
    for step, e, what in planned:
        step = prev if step is None else step
        if step < prev or not 0 <= step < max(lay.P, 1):
            raise err(path, e.line, f"{e.text} before the loop is out of pipeline order (step {step})", FIX)
        prev = step
        g = _and(parse(f"i == {step}"),
                 _guard(ctx, e, e.pred, None, "i") if e.kind in ("tma", "expect", "wait") else None)
        d = lambda v: parse(f"i + {v - step}")  # noqa: E731 -- a count at this step, as i + c
        if what[0] == "expect":
            lay.add(ArriveStmt(e.bar, PipelineState(d(what[1]), slots[e.bar], 0), 1, (Tx(e.bytes),), g), e,
                    "prologue", out)
        elif what[0] == "tma":
            ver = d(what[1])
            lay.add(OpStmt(f"tma_{e.buf}", ver, g, None, (), (Access(e.buf, ver, parse(
                f"(i + {what[1] - step}) % {slots[e.buf]}")),), BarrierRef(e.bar, PipelineState(
                    d(what[2]), slots[e.bar], 0), e.bytes)), e, "prologue", out)
        elif what[0] == "wait":
            lay.add(TryWaitStmt(e.bar, PipelineState(d(what[1]), slots[e.bar], what[2]), g), e, "prologue", out)
        elif what[0] == "dot":
            reads = tuple(Access(b, d(v), parse(f"(i + {v - step}) % {slots[b]}"), f"tma_{b}") for b, v in what[1])
            lay.add(OpStmt("wgmma", d(what[1][0][1]), g, 0, reads, ()), e, "prologue", out)
            lay.add(CommitStmt(0, 0, g), e, "prologue", out)
        else:
            lay.waits.append(Wait("prologue", 0, Num(what[1]), "the next statement", reason=e.text))
            lay.add(WaitStmt(len(lay.waits) - 1, g), e, "prologue", out)
    return out


def _wait_states(ctx: _Ctx, e: HEvent, n_ev: int, runs: list, a: int, m: int) -> list:
    """``(PipelineState, guard)`` pairs of a body wait whose count is ``k + a`` on a barrier of ``m`` slots:
    phase 0 where its parity is ``((k + a) / m) % 2``, phase 1 (the phase before) where it is the other."""
    k = ctx.k
    vals = [r[n_ev].phase for r in runs]
    if any(not isinstance(v, int) or isinstance(v, bool) for v in vals) or e.phase is None:
        raise err(ctx.path, e.line, f"the phase of {e.text} is not a constant per iteration",
                  "the phase must be carried in iter_args or computed from the induction variable")
    par = lambda x: ((x + a) // m) % 2  # noqa: E731
    zpar = ((k + a) / m) % 2
    ph = _z(e.phase) % 2
    st = lambda p: PipelineState(parse(f"i + {a}"), m, p)  # noqa: E731
    for p in (0, 1):
        if all(v % 2 == (par(j) + p) % 2 for j, v in enumerate(vals)) and valid(ph == (zpar + p) % 2, [k >= 1]):
            return [(st(p), None)]
    # mixed: split on the fitted parity (the concrete runs decide k = 0)
    try:
        f = _fit([v % 2 for v in vals], sorted({m, 1, 2}))
    except Exception:  # noqa: BLE001
        f = None
    if f is None or not valid(ph == _at(f, k) % 2, [k >= 1]) or vals[0] % 2 != _at(f, 0) % 2:
        raise err(ctx.path, e.line, f"the phase of {e.text} is not a function of the iteration synth can fit "
                  "(a*k + b, (k + b) % N or ((k + b) / N) % 2)", "carry the phase bit in iter_args as Triton does")
    fe = {"aff": lambda: f"({f[1]} * i + {f[2]})", "mod": lambda: f"((i + {f[1]}) % {f[2]})",
          "par": lambda: f"(((i + {f[1]}) / {f[2]}) % 2)"}[f[0]]()
    same = parse(f"({fe}) % 2 == ((i + {a}) / {m}) % 2")
    other = parse(f"({fe}) % 2 != ((i + {a}) / {m}) % 2")
    return [(st(0), same), (st(1), other)]


@dataclass(frozen=True)
class HopperCheck:
    """``synth check`` of an sm_90 TTGIR: the mapped program, the prover's report (plus ``teardown``)
    and the source line of each statement; the same interface as :class:`~synth.frontends.verdict.CheckResult`."""

    imported: HopperImport
    report: object
    """A :class:`~synth.verify.phases.HopperReport` whose obligations include the ``teardown`` class."""

    @property
    def ok(self) -> bool:
        return bool(self.report.ok)

    def _source(self, ob_id: str) -> Optional[tuple]:
        bits = ob_id.split(":")
        if len(bits) >= 4 and bits[3].isdigit():
            return self.imported.sources.get((bits[2], int(bits[3])))
        return None

    def title(self) -> str:
        """The first line of :meth:`render`: the file, the loop, the trip count and the verdict."""
        imp, p = self.imported, self.imported.program
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        return (f"{imp.path}: Triton sm_90 TMA + mbarrier + wgmma pipeline, loop at line {imp.loop_line}, "
                f"trip count {trip}: {'PROVEN' if self.report.ok else 'NOT PROVEN'}")

    def failure_lines(self, ob) -> list:
        """The lines under a refuted or unknown obligation ``ob`` in :meth:`render`: its statement's source line."""
        src = self._source(ob.id)
        return [f"      source: line {src[0]}: {src[1]}"] if src else []

    def statement_lines(self) -> list:
        """The ``statements`` section of :meth:`render`: each statement beside its source line."""
        lines = ["  statements (part position <- source line):"]
        for (part, pos), (line, text) in sorted(self.imported.sources.items(), key=lambda x: (x[1][0], x[0][1])):
            lines.append(f"    {part} {pos}: line {line}: {text}")
        return lines

    def render(self, verbose: bool = False) -> str:
        """The report by class, each failure with :meth:`failure_lines`, then :meth:`statement_lines`
        (and the mapped program when ``verbose``)."""
        rep = self.report
        lines = [self.title()]
        for ln in rep.render().splitlines():
            lines.append("  " + ln)
            m = re.match(r"(refuted|unknown) \[(\w+)\] (.*)", ln)
            if m:
                ob = next((o for o in rep.obligations if o.status == m.group(1) and o.description == m.group(3)),
                          None)
                if ob is not None:
                    lines += self.failure_lines(ob)
        lines += self.statement_lines()
        if verbose:
            lines.append("  mapped program:")
            lines += ["    " + x for x in hopper_text(self.imported.program).splitlines()]
        return "\n".join(lines)

    def to_json(self) -> dict:
        """HopperReport.to_json() plus the file, the loop line and each failure's source line."""
        d = dict(self.report.to_json())
        p = self.imported.program
        counts = {"proven": 0, "refuted": 0, "unknown": 0}
        for o in self.report.obligations:
            counts[o.status] += 1
        d.update({"counts": counts, "file": self.imported.path, "source": "triton-sm90",
                  "loop_line": self.imported.loop_line, "trip_count": p.trip_count,
                  "min_trip_count": p.min_trip_count})
        for f in d.get("failures", []):
            src = self._source(f["id"])
            f["line"], f["text"] = (src if src else (None, None))
        return d


def check_hopper(text: str, path: str, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
                 time_limit: float = 10.0, tightness: bool = True, arrive_sync: bool = True) -> HopperCheck:
    """Map an sm_90 TTGIR (:func:`ttgir_to_hopper`, ``arrive_sync`` as there) and prove it with
    :func:`synth.verify.phases.verify_hopper` (its ``teardown`` class catches a copy no wait observes)."""
    return HopperCheck(*prove_mapped(ttgir_to_hopper, text, path, trip_count=trip_count,
                                     min_trip_count=min_trip_count, time_limit=time_limit, tightness=tightness,
                                     arrive_sync=arrive_sync))


def prove_mapped(mapper, text: str, path: str, *, trip_count: Optional[int], min_trip_count: Optional[int],
                 time_limit: float, tightness: bool, runs: str = "the loop runs", **mapper_kw) -> tuple:
    """``(import, report)``: ``mapper(text, path, min_trip_count=...)`` (a TTGIR to :class:`HopperImport`
    mapping; ``mapper_kw`` passed on, e.g. ``arrive_sync``) proven with
    :func:`synth.verify.phases.verify_hopper` for every trip count (or ``trip_count``).
    Raises :class:`SynthError` for a ``--trip-count`` or ``--min-trip-count`` below 1, and for a ``trip_count``
    other than the constant one the file runs (``runs``, e.g. ``the loops run``, starts that message)."""
    for flag, v in (("--trip-count", trip_count), ("--min-trip-count", min_trip_count)):
        if v is not None and v < 1:
            raise SynthError(Loc(path), f"{flag} {v}: a Hopper pipeline is checked for trip counts >= 1",
                             f"use {flag} 1 or more")
    imp = mapper(text, path, min_trip_count=min_trip_count, **mapper_kw)
    p = imp.program
    if trip_count is not None and isinstance(p.trip_count, int) and trip_count != p.trip_count:
        raise SynthError(Loc(path, imp.loop_line, 1), f"{runs} {p.trip_count} times, not {trip_count}",
                         "drop --trip-count")
    return imp, verify_hopper(p, time_limit=time_limit, tightness=tightness, trip_count=trip_count)


# shared with ttgir_ws.py (warp-specialized TTGIR): the carried-value fits, slot rotations, guards and
# wait states are the same there, per partition
Ctx = _Ctx
fit_phase, fit_phase_at, same_carried = _fit, _at, _same
slot_rotation, guard_of, wait_states, and_guards = _rot, _guard, _wait_states, _and
build_program, func_name = _build, _func_name  # and the flattened persistent loop (ttgir_persistent.py)

__all__ = ["ttgir_to_hopper", "is_hopper_ttgir", "check_hopper", "HopperImport", "HopperCheck",
           "HopperWalker", "render", "HEvent", "Ctx", "fit_phase", "fit_phase_at", "same_carried", "slot_rotation",
           "guard_of", "wait_states", "FIX", "build_program", "func_name", "and_guards", "prove_mapped", "module_warps",
           "symbolic_bound", "slack_facts", "read_one_loop", "OneLoop", "pipelined_loops", "loop_segments"]

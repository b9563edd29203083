"""The input of the Hopper loop-body model (docs/ws_model.md): a loop body and the machine facts.

A :class:`WsBody` is one iteration of a loop that a CTA runs many times (a k-tile of a GEMM main loop, a tile of a
persistent GEMM, a KV block of attention): its ops, the buffers they read and write, and for each op the unit it runs
on, the cycles that unit is busy with the whole CTA tile, and the latency of its result. A :class:`WsMachine` holds
what bounds a schedule: warp groups per CTA, the register file and the ``setmaxnreg`` range, shared memory, named
barriers, the barrier and wgmma drain latencies. :func:`machine` reads them from :mod:`synth.arch`.

Units (one of each per SM, shared by every warp group of the CTA):

* ``tma``: the TMA engine (async; issued by the producer warp group, or by consumer 0 when the CTA has none; busy
  ``bytes / tma_bytes_per_clk``);
* ``tensor``: the tensor cores (``wgmma``: async, waited with ``wgmma.wait_group``; or a *blocking* compound op,
  a whole inner loop that holds its warp group and the tensor cores for its duration);
* ``fma``, ``mufu``, ``alu``: the FP32, special-function (``ex2``) and integer / compare pipes (synchronous);
* ``lsu``: the load/store path through L1 and shared memory (``st.shared``, ``st.global``; synchronous).

Nothing here solves; :mod:`synth.model.ws_schedule` builds the CP-SAT model, :mod:`synth.model.ws_check` checks a
schedule without it, :mod:`synth.model.ws_bodies` poses the GEMM and attention bodies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..arch import get_arch
from ..errors import SynthError

UNITS = ("tma", "tensor", "fma", "mufu", "alu", "lsu")
"""The per-SM units a body's ops run on."""
SYNC_UNITS = frozenset({"fma", "mufu", "alu", "lsu"})
"""Units whose ops hold their warp group's instruction stream for their whole duration."""
MODES = ("coop", "stagger", "alternate")
"""How ``C`` consumer warp groups share the iterations (docs/ws_model.md, "Consumer modes"):
``coop``: each iteration's rows split among them, run in lockstep (CUTLASS's cooperative kernel);
``stagger``: rows split, each warp group on its own offset, ordered by named barriers (FA3's ping-pong);
``alternate``: iteration ``i`` whole on warp group ``i mod C`` (CUTLASS's and synth's ping-pong GEMM)."""


@dataclass(frozen=True)
class WsBuffer:
    """A buffer of the body: a shared-memory ring slot or a register fragment."""

    name: str
    space: str
    """``smem`` or ``reg``."""
    size: int
    """``smem``: bytes of one slot; ``reg``: registers per thread when one warp group holds all the tile's rows."""
    carried: bool = False
    """Loop-carried state updated in place (an accumulator, a running max): one copy, never expanded."""
    once: bool = False
    """Loaded once before the loop (attention's Q tile): one slot, no ring, no writer in the body."""
    rows: bool = True
    """``reg``: split among the consumer warp groups with the rows (False: every warp group holds it whole)."""
    alias: Optional[str] = None
    """``reg``: another register buffer this one may be written into, in place (attention's P into S's registers:
    its writer reads S); the model chooses, and the host's copies then cover this buffer's reads too."""


@dataclass(frozen=True)
class WsOp:
    """One op of the body."""

    name: str
    unit: str
    """One of :data:`UNITS`."""
    work: int
    """Cycles the unit is busy with the op for the whole CTA tile (all rows)."""
    latency: int = 0
    """Cycles after the unit's work until the result can be used (TMA: DRAM latency; wgmma: the drain)."""
    reads: tuple[str, ...] = ()
    """Buffers read, as written in the same iteration."""
    reads_prev: tuple[str, ...] = ()
    """Buffers read as written by the previous iteration (loop-carried)."""
    writes: tuple[str, ...] = ()
    split: bool = True
    """The work divides among the consumer warp groups by rows (False: the whole tile, whoever runs it)."""
    issue: int = 0
    """Cycles an async op (TMA, wgmma) holds its warp group's stream to issue."""
    blocking: bool = False
    """A ``tensor`` op that is a whole inner loop: holds its warp group's stream for its duration, no wait."""
    hold: int = 0
    """Steps a wgmma keeps its shared operands after its wait (0: released right after ``wait_group``; 1: the
    release at the end of the step after it, the convention of :func:`synth.model.hopper.loop_cost`)."""

    @property
    def is_wgmma(self) -> bool:
        """An async tensor-core op, waited with ``wgmma.wait_group``."""
        return self.unit == "tensor" and not self.blocking

    @property
    def is_copy(self) -> bool:
        """A TMA copy: on the producer warp group, or issued by consumer 0 when there is none."""
        return self.unit == "tma"


@dataclass(frozen=True)
class WsBody:
    """One iteration of a loop: ops in program order, buffers, the tile's rows."""

    name: str
    ops: tuple[WsOp, ...]
    buffers: tuple[WsBuffer, ...]
    rows: int
    """Rows of the CTA tile (``BM``); a consumer warp group takes a multiple of :attr:`row_quantum`."""
    row_quantum: int = 64
    """Rows one warp group's wgmma covers (``m64``)."""
    smem_extra: int = 0
    """Shared bytes outside the body's buffers (an inner loop's ring, the alignment pad)."""
    max_consumers: int = 3
    """Consumer warp groups the model may use (besides the machine's limit)."""
    max_stage: int = 4
    """Steps an iteration may span on the consumers (its prologue / epilogue in steps)."""
    max_depth: int = 8
    """Slots a shared-memory ring may have."""
    max_groups: int = 3
    """``wgmma`` groups in flight a warp group may keep (``K_PIPE_MMAS`` and beyond)."""
    producer: Optional[bool] = None
    """A producer warp group issues the TMA copies: None, the model chooses (a body without copies has none); True
    or False pinned (True for a body whose inner loop has one, as the GEMM tile body)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Where the numbers came from (docs/ws_model.md lists them)."""

    def op(self, name: str) -> WsOp:
        return next(o for o in self.ops if o.name == name)

    def buffer(self, name: str) -> WsBuffer:
        return next(b for b in self.buffers if b.name == name)

    def writers(self, buf: str) -> list[int]:
        return [i for i, o in enumerate(self.ops) if buf in o.writes]

    def readers(self, buf: str) -> list[int]:
        return [i for i, o in enumerate(self.ops) if buf in o.reads or buf in o.reads_prev]


@dataclass(frozen=True)
class WsMachine:
    """The machine facts a schedule must respect (one CTA per SM)."""

    arch: str = "sm_90"
    warp_groups: int = 8
    """Warp groups per CTA (1024 threads)."""
    registers: int = 65536
    """Registers of the SM's file, all the CTA's."""
    reg_min: int = 24
    reg_max: int = 256
    reg_step: int = 8
    """``setmaxnreg`` takes ``reg_min .. reg_max`` in steps of ``reg_step`` (PTX ISA)."""
    max_registers_per_thread: int = 255
    producer_registers: int = 24
    """Registers the producer warp group needs (it issues TMA copies and waits on barriers)."""
    reg_overhead: int = 24
    """Registers a consumer thread needs besides the body's register buffers (addresses, loop counters, barrier
    phases): an assumption, the producer's figure (docs/ws_model.md)."""
    smem: int = 227 * 1024
    named_barriers: int = 16
    barrier_cycles: int = 20
    """One barrier hand-off (an mbarrier arrive seen by the waiter, a named barrier)."""
    wgmma_drain: int = 132
    """Cycles from a wgmma group's last tensor work to its ``wait_group`` returning (``4 lat_mma``)."""
    mbarrier_bytes: int = 8

    def register_limit(self, consumers: int, producer: bool) -> int:
        """The most registers per consumer thread the split allows (a multiple of ``reg_step``)."""
        left = self.registers // 128 - (self.producer_registers if producer else 0)
        per = min(left // consumers, self.reg_max, self.max_registers_per_thread)
        return per // self.reg_step * self.reg_step


def machine(arch: str = "sm_90", **over) -> WsMachine:
    """The machine facts of ``arch`` from :mod:`synth.arch` (``over``: replace any field)."""
    a = get_arch(arch)
    if not a.tma_bytes_per_clk:
        raise SynthError(None, f"{arch} has no TMA and no wgmma: the warp-specialized body model is for sm_90",
                         "use arch sm_90")
    base = dict(arch=arch, registers=a.registers_per_sm, max_registers_per_thread=a.max_registers_per_thread,
                smem=a.smem_per_block, barrier_cycles=a.barrier_cycles, wgmma_drain=4 * a.lat_mma,
                warp_groups=a.max_threads_per_sm // 128 if a.max_threads_per_sm < 1024 else 8)
    base.update(over)
    return WsMachine(**base)


def validate(body: WsBody, mach: WsMachine) -> None:
    """Raise :class:`SynthError` naming what is malformed in ``body`` (names, units, writers, reads)."""
    names = [o.name for o in body.ops]
    bufs = {b.name: b for b in body.buffers}
    def bad(msg: str, fix: str = "") -> SynthError:
        return SynthError(None, f"body {body.name}: {msg}", fix)
    if not body.ops:
        raise bad("no ops")
    if len(set(names)) != len(names):
        raise bad(f"op names repeat: {sorted(n for n in set(names) if names.count(n) > 1)}")
    if len(bufs) != len(body.buffers):
        raise bad("buffer names repeat")
    if body.rows <= 0 or body.row_quantum <= 0 or body.rows % body.row_quantum:
        raise bad(f"rows {body.rows} is not a positive multiple of {body.row_quantum}")
    for o in body.ops:
        if o.unit not in UNITS:
            raise bad(f"op {o.name}: unknown unit {o.unit!r} (units: {', '.join(UNITS)})")
        if o.work <= 0 or o.latency < 0 or o.issue < 0 or o.hold not in (0, 1):
            raise bad(f"op {o.name}: work must be > 0, latency and issue >= 0, hold 0 or 1")
        if o.blocking and o.unit != "tensor":
            raise bad(f"op {o.name}: only a tensor op can be a blocking inner loop")
        for b in o.reads + o.reads_prev + o.writes:
            if b not in bufs:
                raise bad(f"op {o.name}: unknown buffer {b!r}")
        if o.is_copy:
            if o.split:
                raise bad(f"op {o.name}: a TMA copy moves the whole tile (split: false)")
            if any(bufs[b].space != "smem" for b in o.writes) or o.reads or o.reads_prev:
                raise bad(f"op {o.name}: a TMA op writes shared buffers and reads nothing of the body")
    for b in body.buffers:
        if b.space not in ("smem", "reg") or b.size <= 0:
            raise bad(f"buffer {b.name}: space must be smem or reg and size > 0")
        w = body.writers(b.name)
        if b.once:
            if w or b.space != "smem":
                raise bad(f"buffer {b.name}: a once-loaded buffer is shared memory with no writer in the body")
            continue
        if not w:
            raise bad(f"buffer {b.name} has no writer", "mark it once: true if it is loaded before the loop")
        if b.space == "smem" and b.carried:
            raise bad(f"buffer {b.name}: only register buffers are loop-carried")
        if b.space == "smem" and any(not body.ops[i].is_copy for i in w):
            raise bad(f"buffer {b.name}: a shared ring is written by TMA ops only")
        if b.carried and not any(b.name in body.ops[i].reads_prev for i in body.readers(b.name)):
            raise bad(f"buffer {b.name} is carried but nothing reads it from the previous iteration")
        if not b.carried and any(b.name in body.ops[i].reads_prev for i in body.readers(b.name)):
            raise bad(f"buffer {b.name} is read from the previous iteration but not marked carried")
    for b in body.buffers:
        if b.alias is None:
            continue
        h = bufs.get(b.alias)
        if b.space != "reg" or h is None or h.space != "reg" or h.carried or b.carried or h.alias or \
                h.size < b.size or h.rows != b.rows or \
                any(b.alias not in body.ops[i].reads for i in body.writers(b.name)):
            raise bad(f"buffer {b.name}: alias {b.alias!r} must be a larger non-carried register buffer that every "
                      f"writer of {b.name} reads")
    for o in body.ops:
        for b in o.reads:
            if not bufs[b].once and not body.writers(b):
                raise bad(f"op {o.name} reads {b}, which nothing writes")
    if mach.warp_groups < 1:
        raise SynthError(None, f"machine: {mach.warp_groups} warp groups per CTA", "warp_groups >= 1")


__all__ = ["UNITS", "SYNC_UNITS", "MODES", "WsBuffer", "WsOp", "WsBody", "WsMachine", "machine", "validate"]

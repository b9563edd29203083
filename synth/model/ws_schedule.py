"""The Hopper loop-body model in CP-SAT: warp specialization and the modulo schedule, chosen together.

Input: a :class:`~synth.model.ws_body.WsBody` and a :class:`~synth.model.ws_body.WsMachine`. Output: a
:class:`WsSchedule`: the consumer warp groups and how they share the iterations (``coop``, ``stagger``,
``alternate``; :data:`~synth.model.ws_body.MODES`), each op's warp group, stage and start in the steady state, each
ring's depth, each register buffer's copies, each wgmma's groups in flight, the ``setmaxnreg`` split, the initiation
interval ``II`` and the solver's status, bound and gap. The formulation, each variable, constraint and cost term, is
docs/ws_model.md; this module is its encoding.

**Why an external II loop** (as :mod:`synth.model.solve`): with ``II`` fixed every constraint is linear (``D * II``,
``q * P``). Feasibility is monotone in ``II`` (docs/ws_model.md, "Search"), so the least ``II`` is found by galloping
from the resource bound and bisecting; each fixed-II model holds every consumer mode as an alternative (one Boolean
per ``(C, mode)``, exactly one true), and the one at the least ``II`` minimizes, in order, the iteration's length
(prologue + epilogue), shared bytes, consumer registers and warp groups.

A returned schedule is re-checked by :func:`synth.model.ws_check.check_ws`, which does not use CP-SAT; a
disagreement raises :class:`~synth.model.solve.InternalError`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Optional

from ortools.sat.python import cp_model

from ..deadline import solve_cp_sat
from ..errors import SynthError
from .solve import InternalError
from .ws_check import check_ws
from .ws_body import MODES, SYNC_UNITS, UNITS, WsBody, WsMachine, machine, validate


@dataclass(frozen=True)
class Combo:
    """``C`` consumer warp groups sharing the iterations in ``mode``."""

    consumers: int
    mode: str
    producer: bool = True
    """A producer warp group issues the copies (False: consumer 0 issues them, one consumer only)."""

    @property
    def label(self) -> str:
        return {"coop": "cooperative", "stagger": "staggered (ping-pong order)",
                "alternate": "alternating iterations (ping-pong)"}[self.mode] + \
            f", {self.consumers} consumer(s)" + ("" if self.producer else ", no producer")

    @property
    def tag(self) -> str:
        return f"{self.consumers}{self.mode[0]}{'p' if self.producer else 'n'}"

    def on_producer(self, op) -> bool:
        """The op runs on the producer warp group."""
        return op.unit == "tma" and self.producer


@dataclass(frozen=True)
class Pins:
    """Choices fixed by the caller (None: free)."""

    consumers: Optional[int] = None
    mode: Optional[str] = None
    depth: tuple[tuple[str, int], ...] = ()
    """``(smem buffer, slots)``."""
    groups: tuple[tuple[str, int], ...] = ()
    """``(wgmma op, groups in flight at its wait)``."""
    ii: Optional[int] = None
    producer: Optional[bool] = None
    """A producer warp group issues the copies (None: free)."""


@dataclass(frozen=True)
class OpPlace:
    """Where one op of the body runs in the steady state."""

    name: str
    unit: str
    warp_group: str
    """``producer``, ``consumers`` (every consumer its rows), ``consumer w`` offsets, or ``consumer i mod C``."""
    start: int
    """Cycle of iteration 0's op (consumer 0's copy); iteration ``i``'s at ``start + i * II``."""
    stage: int
    """``start // II``."""
    duration: int
    """Cycles its unit is busy with one copy."""
    wait_start: Optional[int] = None
    """wgmma: when its warp group reaches ``wait_group`` for it."""
    wait_end: Optional[int] = None
    """wgmma: when that wait returns (its results usable, its shared operands releasable)."""
    groups: Optional[int] = None
    """wgmma: groups of its warp group issued after it and before its wait (``K_PIPE_MMAS``)."""


@dataclass(frozen=True)
class WsSchedule:
    """A solved body (docs/ws_model.md, "Output")."""

    body: str
    ii: int
    consumers: int
    mode: str
    offsets: tuple[int, ...]
    """Consumer ``w``'s offset (``stagger``; zeros otherwise)."""
    ops: tuple[OpPlace, ...]
    depth: tuple[tuple[str, int], ...]
    """Slots of each shared ring."""
    copies: tuple[tuple[str, int], ...]
    """Copies of each register buffer per warp group (modulo variable expansion)."""
    producer: bool
    registers: tuple[int, int]
    """``setmaxnreg`` of the producer and of each consumer (the most the file allows them)."""
    register_need: int
    """Registers a consumer thread needs (buffers and overhead)."""
    smem: int
    named_barriers: int
    makespan: int
    """Cycles from iteration 0's first op to its last result (the prologue plus the epilogue plus ``II``)."""
    status: str
    """``OPTIMAL``: ``II`` proven least and the tie-breakers proven; ``FEASIBLE``: see ``bound`` and ``gap``."""
    bound: int
    """The least ``II`` not proven infeasible."""
    gap: float
    """``(II - bound) / II``."""
    makespan_bound: int
    solve_seconds: float
    solves: int
    notes: tuple[str, ...] = ()

    @property
    def period(self) -> int:
        """Cycles between two iterations of one consumer warp group."""
        return self.ii * (self.consumers if self.mode == "alternate" else 1)

    @property
    def combo(self) -> Combo:
        return Combo(self.consumers, self.mode)

    def op(self, name: str) -> OpPlace:
        return next(o for o in self.ops if o.name == name)

    def depth_of(self, buf: str) -> int:
        return dict(self.depth)[buf]

    def copies_of(self, buf: str) -> int:
        return dict(self.copies)[buf]

    @property
    def design(self) -> str:
        return Combo(self.consumers, self.mode).label


# ---------------------------------------------------------------------------- shared arithmetic (the checker's too)


def duration(body: WsBody, op_index: int, combo: Combo) -> int:
    """Cycles one copy of the op keeps its unit (and, synchronous, its warp group) busy."""
    o = body.ops[op_index]
    if o.is_copy or not o.split or combo.mode != "stagger":
        return o.work
    return -(-o.work // combo.consumers)


def copies_on_unit(combo: Combo, op) -> int:
    """Copies of the op the unit sees per iteration: one per consumer when staggered, else one."""
    return combo.consumers if (combo.mode == "stagger" and not op.is_copy) else 1


def reg_size(buf, combo: Combo) -> int:
    """Registers per consumer thread of one copy of ``buf``."""
    if buf.rows and combo.mode != "alternate":
        return -(-buf.size // combo.consumers)
    return buf.size


def period(ii: int, combo: Combo) -> int:
    return ii * (combo.consumers if combo.mode == "alternate" else 1)


def last_writer(body: WsBody, buf: str, before: Optional[int]) -> Optional[int]:
    """The last op writing ``buf`` before op ``before`` in program order (``None``: the last of the body)."""
    ws = [i for i in body.writers(buf) if before is None or i < before]
    return ws[-1] if ws else None


def edges(body: WsBody) -> list[tuple[int, int, int, str]]:
    """Read-after-write dependences ``(writer, reader, distance, buffer)``: a same-iteration read of a register buffer
    depends on the last writer before it in program order, of a ring slot on every TMA op before it that fills the
    slot; a previous-iteration read on the body's last writer."""
    out = []
    for r, o in enumerate(body.ops):
        for b in o.reads:
            if body.buffer(b).once:
                continue
            if body.buffer(b).space == "smem":  # a ring slot: every TMA op filling it
                ws = [w for w in body.writers(b) if w < r]
            else:  # registers updated in place: the last writer before
                w = last_writer(body, b, r)
                ws = [] if w is None else [w]
            if not ws:
                raise SynthError(None, f"body {body.name}: op {o.name} reads {b} before any op of the iteration "
                                 "writes it", f"list {b} in reads_prev if it is the previous iteration's value")
            out.extend((w, r, 0, b) for w in ws)
        for b in o.reads_prev:
            out.append((last_writer(body, b, None), r, 1, b))
    return out


def combo_issues(body: WsBody, mach: WsMachine, pins: Pins = Pins()) -> tuple[list[Combo], list[str]]:
    """The consumer arrangements the body and machine allow, and why each other one is out."""
    copies = any(o.is_copy for o in body.ops)
    pinned = body.producer if pins.producer is None else pins.producer
    producers = [pinned] if pinned is not None else ([True, False] if copies else [False])
    carried_regs = [b.name for b in body.buffers if b.carried and b.space == "reg"]
    ok, why = [], []
    for C, mode, producer in ((C, mode, p) for C in range(1, body.max_consumers + 1) for mode in MODES
                              for p in producers):
        cb = Combo(C, mode, producer)
        if C == 1 and mode != "coop" or pins.consumers not in (None, C) or pins.mode not in (None, mode):
            continue
        lim = mach.register_limit(C, producer)
        need = mach.reg_overhead + sum(reg_size(b, cb) for b in body.buffers if b.space == "reg" and not b.alias)
        if copies and not producer and C > 1:
            why.append(f"{cb.label}: without a producer only one consumer warp group issues its own copies (with "
                       "more, the issuer would wait for the others' releases)")
        elif C + int(producer) > mach.warp_groups:
            why.append(f"{cb.label}: {C + int(producer)} warp groups, the machine has {mach.warp_groups}")
        elif mode != "alternate" and body.rows % (body.row_quantum * C):
            why.append(f"{cb.label}: {body.rows} rows do not split into {C} x {body.row_quantum}")
        elif mode == "alternate" and carried_regs:
            why.append(f"{cb.label}: loop-carried registers ({', '.join(carried_regs)}) cannot move between "
                       "warp groups")
        elif mode == "stagger" and C + 1 > mach.named_barriers:
            why.append(f"{cb.label}: needs {C} named barriers beside the CTA's, the machine has "
                       f"{mach.named_barriers}")
        elif lim < mach.reg_min:
            why.append(f"{cb.label}: {mach.registers} registers leave under {mach.reg_min} per consumer thread")
        elif need > lim:
            why.append(f"{cb.label}: a consumer thread needs at least {need} registers, the split allows {lim}")
        else:
            ok.append(cb)
    return ok, why


def smem_bytes(body: WsBody, mach: WsMachine, depth: dict[str, int], combo: Combo) -> int:
    """Rings (slots and their full / empty mbarriers), once-loaded buffers, ``smem_extra``, ping-pong order barriers."""
    total = body.smem_extra
    for b in body.buffers:
        if b.space != "smem":
            continue
        total += b.size if b.once else depth[b.name] * (b.size + 2 * mach.mbarrier_bytes)
    if combo.mode == "alternate":
        total += combo.consumers * mach.mbarrier_bytes
    return total


def named_barriers(combo: Combo) -> int:
    return combo.consumers if combo.mode == "stagger" and combo.consumers > 1 else 0


def ii_lower_bound(body: WsBody, combos: list[Combo]) -> int:
    """Every unit's work fits in one II; a consumer warp group's stream fits in its period."""
    lb = 1
    for u in UNITS:
        lb = max(lb, sum(o.work for o in body.ops if o.unit == u))
    streams = []
    for cb in combos:
        occ = sum(duration(body, i, cb) for i, o in enumerate(body.ops)
                  if not cb.on_producer(o) and (o.unit in SYNC_UNITS or o.blocking))
        occ += sum(o.issue for o in body.ops if o.is_wgmma or (o.is_copy and not cb.producer))
        streams.append(-(-occ // (cb.consumers if cb.mode == "alternate" else 1)))
    return max(lb, min(streams) if streams else 1)


# ---------------------------------------------------------------------------- the fixed-II model


class _ComboModel:
    """The variables and constraints of one consumer arrangement at a fixed II, all enforced by ``lit``."""

    def __init__(self, m: cp_model.CpModel, body: WsBody, mach: WsMachine, ii: int, cb: Combo, pins: Pins):
        self.m, self.body, self.mach, self.ii, self.cb = m, body, mach, ii, cb
        self.lit = m.NewBoolVar(f"use[{cb.tag}]")
        lit = self.lit
        P = period(ii, cb)
        self.P = P
        n = len(body.ops)
        S = body.max_stage
        H = (S + 2) * P + sum(o.work + o.latency for o in body.ops) + mach.wgmma_drain + 4 * mach.barrier_cycles
        self.H = H
        tag = cb.tag
        C = cb.consumers
        stag = cb.mode == "stagger"
        self.ok = True
        # offsets of the staggered consumers
        self.delta = [m.NewConstant(0)] + [m.NewIntVar(0, ii - 1, f"delta{w}[{tag}]") for w in range(1, C if stag else 1)]
        for a, b in zip(self.delta, self.delta[1:]):
            m.Add(b >= a).OnlyEnforceIf(lit)
        dmax = self.delta[-1]
        self.d = [duration(body, i, cb) for i in range(n)]
        # op starts: consumer s = q P + t (occupancy inside the step), producer s = q II + t
        self.q, self.t, self.s = [], [], []
        for i, o in enumerate(body.ops):
            prod = cb.on_producer(o)
            step = ii if prod else P
            occ = 0 if prod else (self.d[i] if (o.unit in SYNC_UNITS or o.blocking or o.hold) else o.issue)
            if occ > step:
                self.ok = False
                occ = step
            q = m.NewIntVar(0, S, f"q[{o.name},{tag}]")
            t = m.NewIntVar(0, step - occ if occ else step - 1, f"t[{o.name},{tag}]")
            s = m.NewIntVar(0, H, f"s[{o.name},{tag}]")
            m.Add(s == q * step + t)
            self.q.append(q)
            self.t.append(t)
            self.s.append(s)
        # wgmma waits: [w, W) blocks the warp group; W >= completion
        self.w, self.W, self.qW = {}, {}, {}
        for i, o in enumerate(body.ops):
            if not o.is_wgmma:
                continue
            w = m.NewIntVar(0, H, f"wait[{o.name},{tag}]")
            W = m.NewIntVar(0, H, f"done[{o.name},{tag}]")
            m.Add(w >= self.s[i] + o.issue).OnlyEnforceIf(lit)
            m.Add(W >= w).OnlyEnforceIf(lit)
            m.Add(W >= self.s[i] + self.d[i] + mach.wgmma_drain).OnlyEnforceIf(lit)
            m.Add(W - w <= P).OnlyEnforceIf(lit)
            self.w[i], self.W[i] = w, W
            if o.hold:
                qW = m.NewIntVar(0, H // P + 1, f"qdone[{o.name},{tag}]")
                m.Add(W >= qW * P + 1).OnlyEnforceIf(lit)
                m.Add(W <= qW * P + P).OnlyEnforceIf(lit)
                self.qW[i] = qW
        self._streams()
        self._units()
        self._deps()
        self._rings(pins)
        self._registers()
        self._smem_objective()
        if not self.ok:
            m.Add(lit == 0)

    # -- helpers
    def _mod_interval(self, name: str, start, size: int, mod: int, bucket: list) -> None:
        """``[start, start + size)`` modulo ``mod``: the interval at ``start mod mod`` and once more ``mod`` later."""
        m, lit = self.m, self.lit
        if size <= 0:
            return
        if size > mod:
            self.ok = False
            return
        r = m.NewIntVar(0, mod - 1, f"r[{name}]")
        x = m.NewIntVar(0, self.H + self.ii, f"x[{name}]")
        m.Add(x == start).OnlyEnforceIf(lit)
        m.AddModuloEquality(r, x, mod)
        bucket.append(m.NewOptionalFixedSizeIntervalVar(r, size, lit, f"i[{name}]"))
        bucket.append(m.NewOptionalFixedSizeIntervalVar(r + mod, size, lit, f"i2[{name}]"))

    def _var_interval(self, name: str, start, end, mod: int, bucket: list) -> None:
        """A variable-length interval ``[start, end)`` (``end - start <= mod``) modulo ``mod``."""
        m, lit = self.m, self.lit
        r = m.NewIntVar(0, mod - 1, f"r[{name}]")
        x = m.NewIntVar(0, self.H + self.ii, f"x[{name}]")
        ln = m.NewIntVar(0, mod, f"len[{name}]")
        m.Add(x == start).OnlyEnforceIf(lit)
        m.Add(ln == end - start).OnlyEnforceIf(lit)
        m.AddModuloEquality(r, x, mod)
        e1 = m.NewIntVar(0, 3 * mod, f"e1[{name}]")
        e2 = m.NewIntVar(0, 3 * mod, f"e2[{name}]")
        m.Add(e1 == r + ln)
        m.Add(e2 == r + mod + ln)
        bucket.append(m.NewOptionalIntervalVar(r, ln, e1, lit, f"v[{name}]"))
        bucket.append(m.NewOptionalIntervalVar(r + mod, ln, e2, lit, f"v2[{name}]"))

    def _streams(self) -> None:
        """A consumer warp group runs its synchronous ops, issues and waits one at a time (modulo its period)."""
        body, P = self.body, self.P
        tag = self.cb.tag
        bucket: list = []
        for i, o in enumerate(body.ops):
            if self.cb.on_producer(o):
                continue
            if o.unit in SYNC_UNITS or o.blocking:
                self._mod_interval(f"wg:{o.name}:{tag}", self.s[i], self.d[i], P, bucket)
            elif o.issue:
                self._mod_interval(f"wg:{o.name}:{tag}", self.s[i], o.issue, P, bucket)
            if o.is_wgmma:
                self._var_interval(f"wgwait:{o.name}:{tag}", self.w[i], self.W[i], P, bucket)
        if len(bucket) > 2:
            self.m.AddNoOverlap(bucket)

    def _units(self) -> None:
        """Each unit of the SM serves one op copy at a time (modulo II), every warp group's copies together."""
        body, ii = self.body, self.ii
        tag = self.cb.tag
        for u in UNITS:
            bucket: list = []
            for i, o in enumerate(body.ops):
                if o.unit != u:
                    continue
                for w in range(copies_on_unit(self.cb, o)):
                    self._mod_interval(f"{u}:{o.name}:{w}:{tag}", self.s[i] + self.delta[w], self.d[i], ii, bucket)
            if len(bucket) > 2:
                self.m.AddNoOverlap(bucket)

    def ready(self, w: int, reader: int) -> cp_model.LinearExpr:
        """When writer ``w``'s result may be used by ``reader`` (same warp-group frame)."""
        o, r = self.body.ops[w], self.body.ops[reader]
        if o.is_copy:  # the copy completes on the slot's full barrier, which the reader waits on
            return self.s[w] + self.d[w] + o.latency + self.mach.barrier_cycles
        if o.is_wgmma:
            return self.s[w] + self.d[w] if r.is_wgmma else self.W[w]
        return self.s[w] + self.d[w] + o.latency

    def read_end(self, r: int):
        """When op ``r`` is done reading its inputs."""
        o = self.body.ops[r]
        return self.W[r] if o.is_wgmma else self.s[r] + self.d[r]

    def _deps(self) -> None:
        m, lit, ii = self.m, self.lit, self.ii
        for w, r, dist, b in edges(self.body):
            m.Add(self.s[r] + dist * ii >= self.ready(w, r)).OnlyEnforceIf(lit)
        # carried registers are updated in place: the next iteration's writer after this iteration's reads
        for buf in self.body.buffers:
            if not buf.carried:
                continue
            for r in self.body.readers(buf.name):
                if buf.name not in self.body.ops[r].reads:
                    continue
                for w in self.body.writers(buf.name):
                    if w != r:
                        m.Add(self.s[w] + ii >= self.read_end(r)).OnlyEnforceIf(lit)

    def release(self, r: int):
        """When consumer op ``r`` gives back the shared slot it read (the last consumer's copy)."""
        o = self.body.ops[r]
        if o.is_wgmma and o.hold:
            base = (self.qW[r] + 1) * self.P
        else:
            base = self.read_end(r)
        return base + self.delta[-1]

    def _rings(self, pins: Pins) -> None:
        m, lit, ii, body = self.m, self.lit, self.ii, self.body
        pinned = dict(pins.depth)
        self.depth = {}
        for b in body.buffers:
            if b.space != "smem" or b.once:
                continue
            lo, hi = (pinned[b.name], pinned[b.name]) if b.name in pinned else (1, body.max_depth)
            D = m.NewIntVar(lo, hi, f"depth[{b.name},{self.cb.tag}]")
            self.depth[b.name] = D
            # the producer learns of the release through the empty barrier; a consumer refills after its own release
            hand = self.mach.barrier_cycles if self.cb.producer else 0
            for w in body.writers(b.name):
                for r in body.readers(b.name):
                    m.Add(self.s[w] + D * ii >= self.release(r) + hand).OnlyEnforceIf(lit)

    def _registers(self) -> None:
        m, lit, body, P = self.m, self.lit, self.body, self.P
        self.mult = {}
        need = self.mach.reg_overhead
        regs = [b for b in body.buffers if b.space == "reg" and not b.carried]
        for b in regs:
            self.mult[b.name] = m.NewIntVar(0 if b.alias else 1, body.max_stage + 2, f"copies[{b.name},{self.cb.tag}]")
        for b in body.buffers:
            if b.space == "reg" and b.carried:
                need += reg_size(b, self.cb)
        for b in regs:
            k = self.mult[b.name]
            own = [lit]
            if b.alias:  # 0 copies: written into the host's registers, whose copies then cover its reads
                inside = m.NewBoolVar(f"alias[{b.name},{self.cb.tag}]")
                m.Add(k == 0).OnlyEnforceIf([lit, inside])
                m.Add(k >= 1).OnlyEnforceIf([lit, inside.Not()])
                own = [lit, inside.Not()]
                for w in body.writers(b.alias):
                    for r in body.readers(b.name):
                        m.Add(self.mult[b.alias] * P >= self.read_end(r) - self.s[w]).OnlyEnforceIf([lit, inside])
            for w in body.writers(b.name):
                for r in body.readers(b.name):
                    m.Add(k * P >= self.read_end(r) - self.s[w]).OnlyEnforceIf(own)
            need += k * reg_size(b, self.cb)
        self.need = m.NewIntVar(0, 4096, f"regneed[{self.cb.tag}]")
        m.Add(self.need == need).OnlyEnforceIf(lit)
        m.Add(self.need <= self.mach.register_limit(self.cb.consumers, self.cb.producer)).OnlyEnforceIf(lit)

    def _smem_objective(self) -> None:
        m, lit, body, mach = self.m, self.lit, self.body, self.mach
        fixed = body.smem_extra + sum(b.size for b in body.buffers if b.space == "smem" and b.once)
        if self.cb.mode == "alternate":
            fixed += self.cb.consumers * mach.mbarrier_bytes
        expr = fixed + sum(D * (body.buffer(name).size + 2 * mach.mbarrier_bytes) for name, D in self.depth.items())
        self.smem = m.NewIntVar(0, 1 << 40, f"smem[{self.cb.tag}]")
        m.Add(self.smem == expr).OnlyEnforceIf(lit)
        m.Add(self.smem <= mach.smem).OnlyEnforceIf(lit)
        self.span = m.NewIntVar(0, 4 * self.H, f"span[{self.cb.tag}]")
        for i, o in enumerate(body.ops):
            end = self.s[i] + self.d[i] + o.latency + (0 if self.cb.on_producer(o) else self.delta[-1])
            m.Add(self.span >= end).OnlyEnforceIf(lit)
            if o.is_wgmma:
                m.Add(self.span >= self.W[i] + self.delta[-1]).OnlyEnforceIf(lit)


@dataclass
class _Run:
    status: str
    sched: Optional[WsSchedule]
    span_bound: int = 0


def _solve_fixed(body: WsBody, mach: WsMachine, ii: int, combos: list[Combo], pins: Pins, *, optimize: bool,
                 time_limit: float, workers: int) -> _Run:
    m = cp_model.CpModel()
    cms = [_ComboModel(m, body, mach, ii, cb, pins) for cb in combos]
    m.AddExactlyOne([c.lit for c in cms])
    for c in cms:
        for name, k in dict(pins.groups).items():
            i = [o.name for o in body.ops].index(name)
            _pin_groups(m, c, i, k)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.linearization_level = 2  # the makespan's LP bound: attention's optimum proven 2-3x sooner
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    t0 = time.monotonic()
    st = solve_cp_sat(solver, m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE) or not optimize:
        return _finish(body, mach, ii, cms, solver, st, combos, optimize=False)
    # optimize from the feasible solution: every variable hinted with its value
    hint = m.Proto().solution_hint
    hint.vars.extend(range(len(m.Proto().variables)))
    hint.values.extend(solver.ResponseProto().solution)
    if optimize:
        smem_q, w_reg, w_smem, w_span = _weights(mach, combos)
        w_nb = (mach.reg_max + mach.reg_overhead + 4096 + 1) * w_reg  # after shared memory, before registers
        span_hi = max(4 * c.H for c in cms)
        obj = []
        for c in cms:
            v = m.NewIntVar(0, span_hi * w_span + w_smem, f"obj[{c.cb.tag}]")
            m.Add(v == c.span * w_span + c.need * w_reg + c.cb.consumers + named_barriers(c.cb) * w_nb
                  ).OnlyEnforceIf(c.lit)
            m.Add(v == 0).OnlyEnforceIf(c.lit.Not())
            sq = m.NewIntVar(0, smem_q, f"smemq[{c.cb.tag}]")
            m.Add(8 * sq >= c.smem).OnlyEnforceIf(c.lit)
            m.Add(sq == 0).OnlyEnforceIf(c.lit.Not())
            obj.append(v + sq * w_smem)
        m.Minimize(sum(obj))
    first = _finish(body, mach, ii, cms, solver, st, combos, optimize=False)
    solver.parameters.max_time_in_seconds = max(time_limit - (time.monotonic() - t0), 0.01)
    st = solve_cp_sat(solver, m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Run("FEASIBLE", first.sched, 0)
    return _finish(body, mach, ii, cms, solver, st, combos, optimize=True)


def _finish(body: WsBody, mach: WsMachine, ii: int, cms: list, solver, st, combos: list[Combo], *,
            optimize: bool) -> _Run:
    name = solver.StatusName(st)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Run(name, None)
    c = next(c for c in cms if solver.Value(c.lit))
    sched = _decode(body, mach, ii, c, solver)
    span_bound = sched.makespan
    if optimize:
        w_span = _weights(mach, combos)[3]
        span_bound = int(solver.BestObjectiveBound()) // w_span
    return _Run(name, sched, min(span_bound, sched.makespan))


def _weights(mach: WsMachine, combos: list[Combo]) -> tuple[int, int, int, int]:
    """The lexicographic objective's units: shared memory in 8-byte units, and the weights of consumer registers,
    shared memory and the makespan (each larger than everything after it can add)."""
    smem_q = mach.smem // 8 + 1
    w_reg = max(c.consumers for c in combos) + 1
    w_smem = (mach.reg_max + mach.reg_overhead + 4096 + 1) * w_reg * 16
    w_span = (smem_q + 1) * w_smem
    return smem_q, w_reg, w_smem, w_span


def _pin_groups(m: cp_model.CpModel, c: _ComboModel, i: int, k: int) -> None:
    """Pin the wgmma groups in flight of op ``i`` to ``k``: exactly ``k`` issues of the warp group's wgmma ops fall in
    ``(s_i, w_i]`` (its own later copies count; with one wgmma op, ``k`` periods)."""
    body = c.body
    wg = [j for j, o in enumerate(body.ops) if o.is_wgmma]
    if wg == [i]:
        m.Add(c.w[i] >= c.s[i] + k * c.P + body.ops[i].issue).OnlyEnforceIf(c.lit)
        m.Add(c.w[i] < c.s[i] + (k + 1) * c.P + body.ops[i].issue).OnlyEnforceIf(c.lit)
        return
    raise SynthError(None, f"body {body.name}: groups in flight are pinned only for a body with one wgmma op")


def _decode(body: WsBody, mach: WsMachine, ii: int, c: _ComboModel, solver) -> WsSchedule:
    cb = c.cb
    s = [solver.Value(v) for v in c.s]
    delta = tuple(solver.Value(v) for v in c.delta) + (0,) * (cb.consumers - len(c.delta))
    ops = []
    for i, o in enumerate(body.ops):
        if cb.on_producer(o):
            wg = "producer"
        elif o.is_copy:
            wg = "consumer 0"
        elif cb.mode == "alternate":
            wg = f"consumer i mod {cb.consumers}"
        elif cb.mode == "stagger":
            wg = "consumers at offsets " + ", ".join(str(x) for x in delta)
        else:
            wg = "consumers" if cb.consumers > 1 else "consumer"
        w = W = k = None
        if o.is_wgmma:
            w, W = solver.Value(c.w[i]), solver.Value(c.W[i])
            k = groups_in_flight(body, s, i, w, period(ii, cb))
        ops.append(OpPlace(o.name, o.unit, wg, s[i], s[i] // ii, c.d[i], w, W, k))
    depth = tuple((n, solver.Value(v)) for n, v in c.depth.items())
    copies = tuple((n, solver.Value(v)) for n, v in c.mult.items())
    producer = cb.producer
    return WsSchedule(body.name, ii, cb.consumers, cb.mode, delta, tuple(ops), depth, copies, producer,
                      (mach.producer_registers if producer else 0, mach.register_limit(cb.consumers, producer)),
                      solver.Value(c.need), solver.Value(c.smem), named_barriers(cb), solver.Value(c.span),
                      "", 0, 0.0, 0, 0.0, 0)


def groups_in_flight(body: WsBody, starts: list[int], i: int, wait: int, P: int) -> int:
    """wgmma issues of the warp group after op ``i``'s and finished by its wait (every later iteration counted)."""
    k = 0
    for j, o in enumerate(body.ops):
        if not o.is_wgmma:
            continue
        n = 0 if j != i else 1
        while starts[j] + n * P + o.issue <= wait:
            if starts[j] + n * P > starts[i]:
                k += 1
            n += 1
    return k


# ---------------------------------------------------------------------------- the II search


def solve_ws(body: WsBody, mach: Optional[WsMachine] = None, *, pins: Pins = Pins(), time_limit: float = 10.0,
             workers: int = 2) -> WsSchedule:
    """The least-II schedule of ``body`` on ``mach`` (docs/ws_model.md), re-checked without the solver.

    Raises :class:`~synth.errors.SynthError` naming why when nothing fits (every consumer arrangement refused by the
    machine facts, or no II up to the serial bound) or when the time limit ends before any schedule is found.
    """
    mach = mach or machine()
    validate(body, mach)
    start = time.monotonic()
    deadline = start + time_limit
    combos, why = combo_issues(body, mach, pins)
    if not combos:
        raise SynthError(None, f"body {body.name}: no consumer arrangement fits the machine: " + "; ".join(why),
                         "raise the machine's registers, warp groups or named barriers, or shrink the tile")
    least = min(smem_bytes(body, mach, {b.name: dict(pins.depth).get(b.name, 1) for b in body.buffers
                                        if b.space == "smem" and not b.once}, cb) for cb in combos)
    if least > mach.smem:
        raise SynthError(None, f"body {body.name}: shared memory: the rings at their least depth "
                         f"({', '.join(f'{k} {v}' for k, v in pins.depth) or 'one slot each'}) and the fixed buffers "
                         f"need {least} bytes, the machine has {mach.smem}", "fewer slots or a smaller tile")
    lb = ii_lower_bound(body, combos)
    serial = sum(o.work + o.latency + o.issue for o in body.ops) + \
        (len(body.ops) + 2) * (mach.wgmma_drain + 2 * mach.barrier_cycles)
    hi_cap = max(serial * (body.max_depth + 1), lb)
    solves = 0
    refuted: list[int] = []
    unknown: list[int] = []
    feasible: dict[int, _Run] = {}

    def left() -> float:
        return deadline - time.monotonic()

    def feas(ii: int) -> Optional[bool]:
        nonlocal solves
        if ii in feasible:
            return True
        if pins.ii is not None and ii != pins.ii:
            return False
        solves += 1
        # a probe gets a third of what is left (at least a second): one hard II does not eat the whole budget
        run = _solve_fixed(body, mach, ii, combos, pins, optimize=False, workers=workers,
                           time_limit=min(left(), max(1.0, left() / 3)))
        if run.sched is not None:
            feasible[ii] = run
            return True
        if run.status == "INFEASIBLE":
            refuted.append(ii)
            return False
        unknown.append(ii)
        return None

    # gallop from the bound, then bisect between the last refuted II and the first feasible one
    if pins.ii is not None:
        lo, hi = pins.ii - 1, pins.ii
        if not feas(pins.ii):
            raise SynthError(None, f"body {body.name}: no schedule at the pinned II {pins.ii}")
    else:
        lo, step, ii = lb - 1, max(1, lb // 16), lb
        while True:
            if left() <= 0:
                break
            r = feas(ii)
            if r:
                break
            lo = ii if r is False else lo
            if ii >= hi_cap and not unknown:
                raise SynthError(None, f"body {body.name}: no schedule up to II {ii} (the serial bound): "
                                 "a ring or register limit forbids every arrangement",
                                 "raise shared memory or registers, or the body's max_depth / max_stage")
            if ii >= hi_cap:
                break
            ii = min(ii + step, hi_cap)
            step *= 2
        if not feasible:
            raise SynthError(None, f"body {body.name}: the time limit ({time_limit:g} s) ran out before any schedule "
                             f"(II tried up to {ii})", "raise the time limit")
        hi = min(feasible)
        while hi - lo > 1 and left() > 0:
            mid = (lo + hi) // 2
            r = feas(mid)
            if r:
                hi = mid
            else:
                lo = mid if r is False else lo
                if r is None:
                    break
    best_ii = min(feasible)
    solves += 1
    run = _solve_fixed(body, mach, best_ii, combos, pins, optimize=True, time_limit=max(left(), 0.05),
                       workers=workers)
    if run.sched is None:
        run = feasible[best_ii]
        run = _Run("FEASIBLE", run.sched, 0)
    proven = best_ii == lb or (best_ii - 1) in refuted or pins.ii is not None
    bound = best_ii if proven else max([lb] + [x + 1 for x in refuted if x < best_ii])
    status = "OPTIMAL" if proven and run.status == "OPTIMAL" else "FEASIBLE"
    notes = []
    if proven and run.status != "OPTIMAL":
        notes.append("II is proven least; the tie-breakers (makespan, shared memory, registers) are not proven")
    sched = replace(run.sched, status=status, bound=bound, gap=(best_ii - bound) / best_ii,
                    makespan_bound=run.span_bound, solve_seconds=time.monotonic() - start, solves=solves,
                    notes=tuple(notes) + tuple(f"II {u}: not decided in time" for u in sorted(unknown)))
    errs = check_ws(body, mach, sched)
    if errs:
        raise InternalError(f"the ws model returned a schedule its checker rejects for {body.name}: " + "; ".join(errs))
    return sched


__all__ = ["Combo", "Pins", "OpPlace", "WsSchedule", "solve_ws", "combo_issues", "duration", "copies_on_unit",
           "reg_size", "period", "edges", "smem_bytes", "named_barriers", "groups_in_flight", "ii_lower_bound"]

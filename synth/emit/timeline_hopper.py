"""The protocol picture of a Hopper program: TMA issues, mbarrier phases, wgmma groups, waits and
releases per warp group, over time (docs/hopper.md, "Hopper timeline").

Input: a lowered :class:`~synth.hopper.ir.HopperProgram`, a concrete trip count ``T`` and a
:class:`HopperLatency`. :func:`hopper_timeline_events` runs the program once, deterministically,
under that latency model and returns what happened as :class:`HopperEvent` values;
:func:`render_hopper_timeline` draws them. Unlike the oracle (:mod:`synth.verify.oracle_phases`),
which explores every interleaving, this is one plausible execution, to be looked at.

Execution (the semantics of docs/hopper.md, "Semantics"):

* every warp group of every role is a thread running its statement instances in program order
  (parts in order, each ``for i in range(extent)``; guards and op predicates evaluated at ``T``);
  the threads run concurrently, each with its own clock;
* a TMA copy lands ``tma_cycles`` after its issue and then performs ``complete_tx`` of its box
  bytes on the barrier slot its state names; ``arrive`` / ``expect_tx`` act on that slot's current
  phase. A slot keeps ``(phases completed, pending arrivals, tx-count)``; its current phase
  completes when both counts are 0 (the pending count resets to the init count);
* ``try_wait.parity P`` blocks until the slot's completed-phase count ``c`` has ``c % 2 != P``;
  ``wgmma.wait_group N`` blocks until at most ``N`` groups of the warp group are pending. A
  blocked wait resumes ``wake_cycles`` after the event that satisfies it;
* a wgmma group starts executing at its commit or when the warp group's previous group completes,
  whichever is later, and completes ``wgmma_cycles`` later (so groups complete in FIFO order); a
  group without ops completes with its predecessor;
* ties: asynchronous completions at time ``t`` are seen by every thread running at ``t``; threads
  at the same clock run in role order.

Everything is bounded: the trip count (:data:`MAX_TRIP`), the drawn k-tiles (:data:`MAX_ITERS`),
the simulation steps (each statement instance runs once, each async completion happens once; a
wait that nothing can satisfy ends the run with a ``hang`` event instead of looping). Besides
hangs the run reports, as ``violation`` events, what it sees go wrong on the way (the oracle's
classes: a wait passing on another phase than it means, an arrival or ``complete_tx`` landing in
another phase, an over-arrival, a TMA onto a slot an issued wgmma may still read, a wgmma reading
a slot that does not hold its version).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, fields
from typing import Optional

from ..expr import evaluate
from ..hopper.instances import role_instances
from ..hopper.ir import HopperProgram
from .timeline import RC, figure_files, place_legend

MAX_TRIP = 4096
"""Largest trip count simulated (the run is linear in it; only the first k-tiles are drawn)."""
MAX_ITERS = 64
"""Most k-tiles drawn (``n_iters``)."""
MAX_CYCLES = 1_000_000
"""Bound on every latency of :class:`HopperLatency`."""
MAX_VIOLATIONS = 12
"""At most this many violation events are reported (the first ones in time)."""
ROW_INCHES = 0.26
"""Height of one drawn row."""
ASYNC_STORE_UNIT = "bulk_store"
"""Unit of a drawing view's synchronous op that stands for an asynchronous TMA store: it is issued, drawn
on its own row for its latency, and the warp group goes on (synth.emit.timeline_pingpong)."""
MIN_WIDTH_INCHES = 10.0
MAX_WIDTH_INCHES = 24.0
"""The figure is between these widths (longer runs are compressed, labels are not)."""


@dataclass(frozen=True)
class HopperLatency:
    """The latency model of the run, in cycles (each 0..:data:`MAX_CYCLES`; the two async
    latencies at least 1). Defaults are H100 figures for a 128x128x64 f16 tile with two consumer
    warp groups (the numbers :mod:`synth.model.hopper` uses)."""

    tma_cycles: int = 900
    """Issue to landing of a TMA copy: ``lat_global`` 650 + a 16 KiB box at 64 B/clk."""
    wgmma_cycles: int = 512
    """Execution of one wgmma group: 64x128x64 f16 (1 MFLOP) per consumer warp group, two warp
    groups sharing the SM's 4096 flop/clk."""
    issue_cycles: int = 4
    """Issuing a TMA copy, a wgmma, a commit or a synchronous op."""
    arrive_cycles: int = 10
    """An ``arrive`` / ``expect_tx``; the arrival counts at its issue."""
    wake_cycles: int = 20
    """A wait that passes: from the satisfying event (or the wait's start) to the next statement
    (one ``try_wait`` round trip, ``barrier_cycles`` of sm_90)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            low = 1 if f.name in ("tma_cycles", "wgmma_cycles") else 0
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= MAX_CYCLES:
                raise ValueError(f"HopperLatency.{f.name} = {v!r}: expected an integer in {low}..{MAX_CYCLES}")


@dataclass(frozen=True)
class HopperEvent:
    """One thing that happened. ``lane`` is a warp group (``producer``, ``consumer 0``) or, for
    ``phase``, a barrier slot (``full[2]``). ``iteration`` is the k-tile (-1: none)."""

    kind: str
    """``tma`` (issue -> landing), ``wgmma`` (group: first op issued -> completion), ``wait``
    (``try_wait``: reached -> passed), ``wgwait`` (``wait_group``: reached -> passed), ``arrive``
    (``arrive`` / ``expect_tx`` on a ``full``-kind barrier), ``release`` (an arrive on an
    ``empty``-kind barrier), ``op`` (a synchronous op), ``store`` (a view's asynchronous TMA store), ``phase`` (a barrier slot's phase: the
    previous phase's completion, or 0 -> its completion), ``hang`` (a wait never satisfied: reached
    -> end of the run), ``violation``."""
    lane: str
    start: int
    end: int
    iteration: int = -1
    label: str = ""
    barrier: str = ""
    slot: int = -1
    phase: int = -1
    """``phase``: the phase index that completed; ``wait``: the phase it waits for; arrive,
    release, tma: the phase its state names."""
    parity: int = -1
    """``wait``: the parity of its ``try_wait.parity``; ``phase``: the parity of the completed phase."""
    active_from: int = -1
    """``wgmma``: when the group starts executing (after the warp group's previous group);
    ``phase``: its first arrival or ``complete_tx`` (``start`` is the previous phase's completion)."""
    count: int = -1
    """``wgwait``: its ``N``; ``wgmma``: the group's index in its warp group."""


def stages_of(program: HopperProgram) -> int:
    """The pipeline depth: the most slots of a barrier (1 without barriers)."""
    return max((b.slots for b in program.barriers), default=1)


def k_pipe_mmas_of(program: HopperProgram) -> Optional[int]:
    """``K_PIPE_MMAS`` as the program states it: the constant count of the main-loop (``body``)
    ``wait_group`` of a role issuing wgmma (None when there is none or it is not a constant)."""
    for r in program.roles:
        for w in r.program.waits:
            if w.part == "body":
                try:
                    return int(evaluate(w.in_flight, {}))
                except (KeyError, ValueError, ZeroDivisionError):
                    return None
    return None


def default_trip(program: HopperProgram) -> int:
    """The trip count drawn by default: the program's own when fixed, else ``stages + 2`` (every slot
    refilled once or twice, the epilogue drained), at least ``min_trip_count``."""
    if isinstance(program.trip_count, int):
        return program.trip_count
    return max(program.min_trip_count, stages_of(program) + 2)


def _lanes(program: HopperProgram) -> list[tuple[str, object]]:
    out = []
    for r in program.roles:
        for w in range(r.warpgroups):
            out.append((f"{r.name} {w}" if r.warpgroups > 1 else r.name, r))
    return out


def _check_trip(program: HopperProgram, trip: Optional[int]) -> int:
    T = default_trip(program) if trip is None else trip
    if isinstance(T, bool) or not isinstance(T, int):
        raise ValueError(f"trip count {T!r}: expected an integer")
    if isinstance(program.trip_count, int) and T != program.trip_count:
        raise ValueError(f"trip count {T}: program {program.name} has the fixed trip count {program.trip_count}")
    if not max(program.min_trip_count, 1) <= T <= MAX_TRIP:
        raise ValueError(f"trip count {T} outside {max(program.min_trip_count, 1)}..{MAX_TRIP} "
                         f"(the program's min_trip_count and the timeline's bound)")
    return T


def simulate(program: HopperProgram, trip: Optional[int] = None,
             latency: Optional[HopperLatency] = None) -> tuple[int, list[HopperEvent]]:
    """``(T, every event of the run at trip count T)``, in the order they happened (module docstring).

    Pure and deterministic; ValueError on a trip count out of bounds."""
    T = _check_trip(program, trip)
    lat = latency or HopperLatency()
    op_latency = {o.name: min(o.latency, MAX_CYCLES) for o in program.ops if not o.is_async}
    # a synchronous op of unit ASYNC_STORE_UNIT (a drawing view's TMA store of C) is issued and runs on its own
    bulk_store = {o.name for o in program.ops if not o.is_async and o.unit == ASYNC_STORE_UNIT}
    lanes = _lanes(program)
    names = [n for n, _ in lanes]
    seqs = [role_instances(program, T, r) for _, r in lanes]
    bars = {b.name: b for b in program.barriers}
    # barrier slot -> [completed, pending, tx, first activity of the open phase, tile of its last contributor,
    # completion of the previous phase]
    bstate = {(b.name, s): [0, b.count, 0, -1, -1, 0] for b in program.barriers for s in range(b.slots)}
    n = len(seqs)
    pc, clock = [0] * n, [0] * n
    blocked: dict[int, int] = {}  # thread -> time it reached its wait
    fifo: list[list[dict]] = [[] for _ in range(n)]  # committed, not completed groups
    open_grp: list[Optional[dict]] = [None] * n
    last_done, ngroups = [0] * n, [0] * n
    released: set = set()  # (thread, buffer, version)
    forced_tile: dict[int, int] = {}  # thread at a wait_group -> tile of the newest group it must see complete
    mem: dict = {}  # (buffer, slot) -> version landed
    heap: list = []
    seq_no = 0
    events: list[HopperEvent] = []
    nviol = 0

    def violation(t: int, cls: str, msg: str, lane: str) -> None:
        nonlocal nviol
        if nviol < MAX_VIOLATIONS:
            events.append(HopperEvent("violation", lane, t, t, -1, f"{cls}: {msg}"))
        nviol += 1

    def push(t: int, kind: str, payload) -> None:
        nonlocal seq_no
        heapq.heappush(heap, (t, seq_no, kind, payload))
        seq_no += 1

    def touch(key, now: int, tile: int, n_arr: int, delta_tx: int, phase: int, who: str, lane: str) -> None:
        st = bstate[key]
        if st[3] < 0:
            st[3] = now
        st[4] = tile
        if n_arr and st[0] != phase:
            violation(now, "arrivals", f"{who}: arrival on {key[0]}[{key[1]}] meant for phase {phase} lands in "
                                       f"phase {st[0]}", lane)
        if delta_tx and st[0] != phase:
            violation(now, "tx_bytes", f"{who}: {abs(delta_tx)} bytes on {key[0]}[{key[1]}] meant for phase "
                                       f"{phase} land in phase {st[0]}", lane)
        st[1] -= n_arr
        st[2] += delta_tx
        if st[1] < 0:
            violation(now, "arrivals", f"{who}: {key[0]}[{key[1]}] phase {st[0]} receives more than its "
                                       f"{bars[key[0]].count} arrivals", lane)
            st[1] = 0
        if st[1] == 0 and st[2] == 0:
            events.append(HopperEvent("phase", f"{key[0]}[{key[1]}]", st[5], now, st[4],
                                      f"ph{st[0]} p{st[0] % 2}", key[0], key[1], st[0], st[0] % 2, active_from=st[3]))
            st[0], st[1], st[2], st[3], st[5] = st[0] + 1, bars[key[0]].count, 0, -1, now

    def satisfied(t: int) -> bool:
        ins = seqs[t][pc[t]]
        if ins.kind == "wait":
            return bstate[(ins.barrier, ins.slot)][0] % 2 != ins.parity
        return len(fifo[t]) <= max(ins.count, 0)

    def finish_wait(t: int, since: int, now: int) -> None:
        """Thread ``t`` passes its wait (reached at ``since``) at ``now``."""
        ins = seqs[t][pc[t]]
        if ins.kind == "wait":
            c = bstate[(ins.barrier, ins.slot)][0]
            if c != ins.need:
                violation(now, "parity", f"{names[t]} at {ins.where}: try_wait.parity {ins.parity} on "
                                         f"{ins.barrier}[{ins.slot}] means {ins.need} completed phases but passes "
                                         f"with {c}", names[t])
            events.append(HopperEvent("wait", names[t], since, now, ins.tile,
                                      f"{ins.barrier}[{ins.slot}] p{ins.parity}", ins.barrier, ins.slot, ins.phase,
                                      ins.parity))
        else:
            events.append(HopperEvent("wgwait", names[t], since, now, forced_tile.pop(t, -1), f"wait_group {ins.count}",
                                      count=ins.count))
        pc[t] += 1
        clock[t] = now

    def wake(now: int) -> None:
        for t in sorted(blocked):
            if satisfied(t):
                since = blocked.pop(t)
                finish_wait(t, since, max(since, now) + lat.wake_cycles)

    max_steps = 4 * sum(len(s) for s in seqs) + 16
    for _ in range(max_steps):
        run = [(clock[t], t) for t in range(n) if t not in blocked and pc[t] < len(seqs[t])]
        if heap and (not run or heap[0][0] <= min(run)[0]):
            now, _, kind, payload = heapq.heappop(heap)
            if kind == "land":
                t, ins = payload
                for (buf, sl, v) in ins.writes:
                    mem[(buf, sl)] = v
                touch((ins.barrier, ins.slot), now, ins.tile, 0, -ins.bytes, ins.phase,
                      f"{names[t]} {ins.op}({ins.tile}) complete_tx", names[t])
            else:
                t = payload
                fifo[t].pop(0)
            wake(now)
            continue
        if not run:
            break
        now, t = min(run)
        ins = seqs[t][pc[t]]
        lane = names[t]
        if ins.kind in ("wait", "wgwait"):
            if ins.kind == "wgwait":
                if ins.count < 0:
                    violation(now, "wgmma_wait", f"{lane} at {ins.where}: wait_group {ins.count} < 0", lane)
                forced = fifo[t][: max(len(fifo[t]) - max(ins.count, 0), 0)]
                forced_tile[t] = forced[-1]["tile"] if forced else -1
            if satisfied(t):
                finish_wait(t, now, now + lat.wake_cycles)
            else:
                blocked[t] = now
            continue
        pc[t] += 1
        if ins.kind == "arrive":
            kind = "release" if bars[ins.barrier].kind == "empty" else "arrive"
            what = ("arrive.expect_tx" if ins.arrivals else "expect_tx") if ins.bytes else "arrive"
            label = f"{what} {ins.barrier}[{ins.slot}]" + (f" {ins.bytes} B" if ins.bytes else "")
            events.append(HopperEvent(kind, lane, now, now + lat.arrive_cycles, ins.tile, label, ins.barrier,
                                      ins.slot, ins.phase))
            for buf, v in ins.release:
                released.add((t, buf, v))
            key = (ins.barrier, ins.slot)
            if ins.bytes:
                touch(key, now, ins.tile, 0, ins.bytes, ins.phase, f"{lane} at {ins.where}", lane)
            if ins.arrivals:
                touch(key, now, ins.tile, ins.arrivals, 0, ins.phase, f"{lane} at {ins.where}", lane)
            clock[t] = now + lat.arrive_cycles
            wake(now)
        elif ins.kind == "tma":
            for (buf, sl, v) in ins.writes:
                for u in range(n):
                    grp = [g for g in fifo[u]] + ([open_grp[u]] if open_grp[u] else [])
                    for (rb, rs, rv) in (r for g in grp for r in g["reads"]):
                        if (rb, rs) == (buf, sl):
                            cls = "release_after_wgmma" if (u, rb, rv) in released else "slot_reuse"
                            violation(now, cls, f"{lane} {ins.op}({ins.tile}) writes {buf}[{sl}] while "
                                                f"{names[u]}'s wgmma reading version {rv} may still run", lane)
            events.append(HopperEvent("tma", lane, now, now + lat.tma_cycles, ins.tile, ins.op, ins.barrier, ins.slot,
                                      ins.phase))
            push(now + lat.tma_cycles, "land", (t, ins))
            clock[t] = now + lat.issue_cycles
        elif ins.kind in ("wgmma", "op"):
            for (buf, sl, v) in ins.reads:
                if mem.get((buf, sl)) != v:
                    have = mem.get((buf, sl))
                    violation(now, "raw", f"{lane} {ins.op}({ins.tile}) reads {buf}[{sl}] version {v} but the slot "
                                          f"holds {'nothing landed' if have is None else f'version {have}'}", lane)
            # a synchronous op lasts its own latency when the program gives one (a ping-pong view's epilogue)
            dur = lat.issue_cycles if ins.kind == "wgmma" else max(lat.issue_cycles, op_latency.get(ins.op, 0))
            if ins.kind == "wgmma":
                g = open_grp[t] or {"first": now, "tile": ins.tile, "reads": ()}
                g["reads"] = g["reads"] + ins.reads
                open_grp[t] = g
            elif ins.op in bulk_store:  # issued, then on its own: the thread goes on at once
                events.append(HopperEvent("store", lane, now, now + dur, ins.tile, ins.op))
                dur = lat.issue_cycles
            else:
                for (buf, sl, v) in ins.writes:
                    mem[(buf, sl)] = v
                events.append(HopperEvent("op", lane, now, now + dur, ins.tile, ins.op))
            clock[t] = now + dur
        elif ins.kind == "commit":
            g = open_grp[t] or {"first": now, "tile": -1, "reads": ()}
            open_grp[t] = None
            start = max(now, last_done[t])
            done = start + (lat.wgmma_cycles if g["reads"] or g["tile"] >= 0 else 0)
            last_done[t] = done
            fifo[t].append(g)
            events.append(HopperEvent("wgmma", lane, g["first"], done, g["tile"], f"wgmma {g['tile']}",
                                      active_from=start, count=ngroups[t]))
            ngroups[t] += 1
            push(done, "done", t)
            clock[t] = now + lat.issue_cycles
    else:
        events.append(HopperEvent("hang", names[0], max(clock), max(clock), -1, "step bound reached"))
    end = max([e.end for e in events] + clock)
    for t, since in sorted(blocked.items()):
        ins = seqs[t][pc[t]]
        if ins.kind == "wait":
            c = bstate[(ins.barrier, ins.slot)][0]
            what = (f"try_wait.parity {ins.parity} on {ins.barrier}[{ins.slot}] never passes "
                    f"({c} phase{'s' if c != 1 else ''} completed)")
        else:
            what = f"wait_group {ins.count} never passes ({len(fifo[t])} groups pending)"
        events.append(HopperEvent("hang", names[t], since, max(end, since + 1), ins.tile, f"hang: {what}",
                                  ins.barrier, ins.slot if ins.kind == "wait" else -1,
                                  ins.phase if ins.kind == "wait" else -1))
    return T, events


def drawn_iters(program: HopperProgram, T: int, n_iters: Optional[int]) -> int:
    """The k-tiles drawn: ``n_iters`` (1..:data:`MAX_ITERS`, ValueError otherwise), by default
    ``min(T, max(6, stages + 2))`` (the whole run at the default trip count)."""
    if n_iters is None:
        return min(T, max(6, stages_of(program) + 2), MAX_ITERS)
    if isinstance(n_iters, bool) or not isinstance(n_iters, int) or not 1 <= n_iters <= MAX_ITERS:
        raise ValueError(f"n_iters {n_iters!r}: expected an integer in 1..{MAX_ITERS}")
    return n_iters


def hopper_timeline_events(program: HopperProgram, *, trip: Optional[int] = None, n_iters: Optional[int] = None,
                           latency: Optional[HopperLatency] = None) -> list[HopperEvent]:
    """The events drawn for ``program`` at trip count ``trip`` (default :func:`default_trip`): those
    of k-tiles ``0 .. n_iters - 1`` (default :func:`drawn_iters`; every tile when ``n_iters >= trip``),
    events without a tile that start before the last of them ends, and every ``hang`` and
    ``violation``. Pure and deterministic (see :func:`simulate`); ValueError when ``trip`` or
    ``n_iters`` is out of bounds."""
    T = _check_trip(program, trip)
    n_iters = drawn_iters(program, T, n_iters)
    _, events = simulate(program, T, latency)
    kept = [e for e in events if 0 <= e.iteration < n_iters]
    horizon = max((e.end for e in kept), default=0)
    return [e for e in events if 0 <= e.iteration < n_iters or e.kind in ("hang", "violation")
            or (e.iteration < 0 and e.start <= horizon)]


# ---------------------------------------------------------------------------------------------- drawing

def _rows(program: HopperProgram, events: list[HopperEvent]):
    """Drawn rows, top to bottom: per warp group its statement row, then its async rows (TMA copies
    of one tile merged, packed into sub-rows; wgmma groups); then one row per barrier slot."""
    lanes = [n for n, _ in _lanes(program)]
    rows: list[tuple[str, str]] = []  # (key, label)
    where: dict = {}
    for lane in lanes:
        rows.append((f"s:{lane}", lane))
        copies: dict = {}
        for e in events:
            if e.kind == "tma" and e.lane == lane:
                k = (e.iteration, e.barrier, e.slot, e.phase)
                a = copies.get(k)
                ops = (a[2] + "+" + e.label) if a and e.label not in a[2].split("+") else (a[2] if a else e.label)
                copies[k] = (min(a[0], e.start) if a else e.start, max(a[1], e.end) if a else e.end, ops)
        ends: list[int] = []
        for k, (s, f, ops) in sorted(copies.items(), key=lambda kv: (kv[1][0], kv[0])):
            sub = next((j for j, x in enumerate(ends) if x <= s), len(ends))
            if sub == len(ends):
                ends.append(f)
            else:
                ends[sub] = f
            where[("tma", lane, k)] = (f"t:{lane}:{sub}", s, f, ops)
        rows += [(f"t:{lane}:{j}", f"{lane} TMA" if j == 0 else "") for j in range(len(ends))]
        if any(e.kind == "wgmma" and e.lane == lane for e in events):
            rows.append((f"g:{lane}", f"{lane} wgmma"))
        if any(e.kind == "store" and e.lane == lane for e in events):
            rows.append((f"st:{lane}", f"{lane} TMA store"))
    for b in program.barriers:
        for s in range(b.slots):
            rows.append((f"b:{b.name}[{s}]", f"{b.name}[{s}] ({b.kind}, count {b.count})"))
    return rows, where


def _figure(program: HopperProgram, events: list[HopperEvent], T: int, n_iters: int, lat: HopperLatency):
    # matplotlib: only when a timeline is drawn (a stock GPU image has none)
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows, where = _rows(program, events)
    y_of = {key: len(rows) - 1 - n for n, (key, _) in enumerate(rows)}
    end = max([e.end for e in events] + [1])
    hang_end = end * 1.04
    width = max(MIN_WIDTH_INCHES, min(MAX_WIDTH_INCHES, 8 + end / 600))
    height = 1.9 + ROW_INCHES * len(rows)
    cmap = matplotlib.colormaps["tab10"]
    grey = (0.55, 0.55, 0.55, 1.0)

    def color(it: int):
        return cmap(it % 10) if it >= 0 else grey

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height))
        ax = fig.add_subplot(1, 1, 1)
        px = width * 72 * 0.78 / end
        bars: dict[tuple, list] = {}

        def bar(style: str, y: float, x0: float, w: float, c) -> None:
            bars.setdefault((style, y), []).append((x0, max(w, 0.5), c))

        def text(x: float, y: float, s: str, room: float, **kw) -> None:
            if room * px >= 4.2 * len(s):
                ax.text(x, y, s, fontsize=5, va="center", **kw)

        markers: dict[tuple, list] = {}
        for (kind, lane, k), (row, s, f, ops) in sorted(where.items(), key=lambda kv: (kv[1][0], kv[1][1])):
            y = y_of[row]
            bar("tma", y, s, f - s, color(k[0])[:3] + (0.55,))
            text(s + 8 / px, y, f"k{k[0]} {ops}", f - s)
        for e in events:
            c = color(e.iteration)
            if e.kind == "wgmma":
                y = y_of[f"g:{e.lane}"]
                if e.active_from > e.start:
                    bar("queued", y - 0.33, e.start, e.active_from - e.start, c[:3] + (0.45,))
                bar("exec", y, e.active_from, e.end - e.active_from, c)
                text(e.active_from + 6 / px, y, f"k{e.iteration}", e.end - e.active_from)
            elif e.kind in ("wait", "wgwait"):
                if e.end - e.start > 2 * lat.wake_cycles:
                    y = y_of[f"s:{e.lane}"]
                    bar("wait" if e.kind == "wait" else "wgwait", y, e.start, e.end - e.start, c[:3] + (0.25,))
                    lab = e.label if e.kind == "wait" else f"wait_group {e.count}"
                    text(e.start + 6 / px, y, lab, e.end - e.start)
            elif e.kind == "store":  # a view's asynchronous TMA store of C (its own row)
                y = y_of[f"st:{e.lane}"]
                bar("tma", y, e.start, e.end - e.start, c[:3] + (0.55,))
                text(e.start + 6 / px, y, f"{e.label} (k-tile {e.iteration})", e.end - e.start)
            elif e.kind == "op" and e.end - e.start > 2 * lat.issue_cycles:  # a long synchronous op (a C store)
                y = y_of[f"s:{e.lane}"]
                bar("op", y, e.start, e.end - e.start, c[:3] + (0.8,))
                text(e.start + 6 / px, y, f"{e.label} (k-tile {e.iteration})", e.end - e.start)
            elif e.kind in ("arrive", "release"):
                markers.setdefault((e.kind, y_of[f"s:{e.lane}"]), []).append((e.start, c))
            elif e.kind == "phase":
                y = y_of[f"b:{e.lane}"]
                bar("open", y, e.start, e.end - e.start, c[:3] + (0.18,))
                bar("phase", y, e.active_from, e.end - e.active_from, c[:3] + (0.5,))
                markers.setdefault(("phase", y), []).append((e.end, c))
                ax.text(e.end + 6 / px, y, e.label, fontsize=5, va="center", ha="left")
            elif e.kind == "hang":
                y = y_of[f"s:{e.lane}"]
                bar("hang", y, e.start, hang_end - e.start, (0.9, 0.0, 0.0, 0.45))
                late = e.start > 0.55 * hang_end
                ax.text(hang_end - 6 / px if late else e.start + 6 / px, y + 0.34, e.label, fontsize=5.5,
                        color=(0.8, 0, 0), va="bottom", ha="right" if late else "left", fontweight="bold")
            elif e.kind == "violation":
                y = y_of.get(f"s:{e.lane}", 0)
                markers.setdefault(("violation", y), []).append((e.start, (0.85, 0.0, 0.0, 1.0)))
        style = {"tma": dict(height=0.62, edgecolor="black", linewidth=0.3),
                 "exec": dict(height=0.5, edgecolor="black", linewidth=0.3),
                 "queued": dict(height=0.1, linewidth=0),
                 "op": dict(height=0.5, edgecolor="black", linewidth=0.6),
                 "wait": dict(height=0.5, edgecolor="grey", linewidth=0.3, hatch="////"),
                 "wgwait": dict(height=0.5, edgecolor="grey", linewidth=0.3, hatch="\\\\\\\\"),
                 "open": dict(height=0.22, linewidth=0),
                 "phase": dict(height=0.45, linewidth=0),
                 "hang": dict(height=0.6, linewidth=0)}
        order = list(style)
        for key in sorted(bars, key=lambda k: (order.index(k[0]), k[1])):
            st = dict(style[key[0]])
            h = st.pop("height")
            segs = bars[key]
            ax.broken_barh([(x, w) for x, w, _ in segs], (key[1] - h / 2, h), facecolors=[c for _, _, c in segs],
                           **st)
        mstyle = {"arrive": dict(marker="v", s=16, edgecolors="black", linewidths=0.3),
                  "release": dict(marker="^", s=22, edgecolors="black", linewidths=0.3),
                  "phase": dict(marker="D", s=16, edgecolors="black", linewidths=0.4),
                  "violation": dict(marker="X", s=40, edgecolors="black", linewidths=0.3)}
        for key in sorted(markers, key=lambda k: (list(mstyle).index(k[0]), k[1])):
            pts = markers[key]
            ax.scatter([x for x, _ in pts], [key[1]] * len(pts), c=[c for _, c in pts], zorder=3, **mstyle[key[0]])
        labels = [lab for _, lab in rows]
        ax.set_yticks([y_of[k] for k, _ in rows])
        ax.set_yticklabels(labels)
        for key, _ in rows:
            if key.startswith("s:") and y_of[key] < len(rows) - 1:
                ax.axhline(y_of[key] + 0.5, color="grey", linewidth=0.4)
        first_bar = next((y_of[k] for k, _ in rows if k.startswith("b:")), None)
        if first_bar is not None and first_bar < len(rows) - 1:
            ax.axhline(first_bar + 0.5, color="black", linewidth=0.6)
        ax.set_xlim(0, hang_end if any(e.kind == "hang" for e in events) else end * 1.045)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xlabel("cycles (latency model: TMA %d, wgmma group %d, arrive %d, wake %d)"
                      % (lat.tma_cycles, lat.wgmma_cycles, lat.arrive_cycles, lat.wake_cycles))
        k = k_pipe_mmas_of(program)
        bits = [f"{stages_of(program)} stages"] + ([f"K_PIPE_MMAS = {k}"] if k is not None else [])
        bits.append("warp groups: " + ", ".join(f"{r.name} {r.warpgroups}" for r in program.roles))
        drawn = min(n_iters, T)
        bits.append(f"T = {T}" + (f", first {drawn} k-tiles drawn" if drawn < T else ""))
        n_hang = sum(e.kind == "hang" for e in events)
        n_bad = sum(e.kind == "violation" for e in events)
        trouble = (f"  HANG ({n_hang} warp group{'s' if n_hang > 1 else ''} blocked)" if n_hang else "") + \
                  (f"  {n_bad} violation{'s' if n_bad > 1 else ''}" if n_bad else "")
        ax.set_title(f"{program.name}: " + ", ".join(bits) + trouble, loc="left",
                     color=(0.8, 0, 0) if trouble else "black")
        tiles = sorted({e.iteration for e in events if e.iteration >= 0})
        handles = [Patch(color=cmap(v % 10), label=f"k-tile {v}") for v in tiles[:10]]
        kinds = {e.kind for e in events}
        marker = dict(color="w", markerfacecolor="grey", markeredgecolor="black")
        extra = [("wgmma", Patch(facecolor="grey", edgecolor="black", linewidth=0.3,
                                 label="wgmma group executing (thin: committed, queued)")),
                 ("wait", Patch(facecolor="white", edgecolor="grey", hatch="////", label="try_wait blocked")),
                 ("wgwait", Patch(facecolor="white", edgecolor="grey", hatch="\\\\\\\\", label="wait_group blocked")),
                 ("arrive", Line2D([], [], marker="v", label="arrive / expect_tx", **marker)),
                 ("release", Line2D([], [], marker="^", label="release (arrive on empty)", **marker)),
                 ("phase", Line2D([], [], marker="D", label="phase completes (ph n, parity)", **marker))]
        handles += [h for kind, h in extra if kind in kinds]
        if any(e.kind == "op" and e.end - e.start > 2 * lat.issue_cycles for e in events):
            handles.append(Patch(facecolor="grey", edgecolor="black", linewidth=0.6,
                                 label="synchronous op (C store, or the TMA store's staging writes)"))
        if any(e.kind == "store" for e in events):
            handles.append(Patch(facecolor="grey", alpha=0.55, edgecolor="black", linewidth=0.3,
                                 label="TMA store of C (asynchronous: drawn, not waited on)"))
        if n_hang:
            handles.append(Patch(color=(0.9, 0, 0), alpha=0.45, label="hang"))
        if n_bad:
            handles.append(Line2D([], [], marker="X", color="w", markerfacecolor=(0.85, 0, 0), label="violation"))
        left = min(0.45, (0.3 + 0.05 * max(len(t) for t in labels)) / width)
        legend_h = place_legend(fig, handles, left)
        height += legend_h
        fig.set_size_inches(width, height)
        if n_bad:
            msgs = [e.label for e in events if e.kind == "violation"][:3]
            fig.text(0.01, 0.005, "\n".join(m if len(m) < 160 else m[:157] + "..." for m in msgs), fontsize=5,
                     color=(0.8, 0, 0), va="bottom")
        bottom = (0.5 + (0.3 if n_bad else 0)) / height
        fig.subplots_adjust(left=left, right=1 - 0.25 / width, bottom=bottom, top=1 - (0.45 + legend_h) / height)
    return fig


def hopper_timeline_figure(program: HopperProgram, *, trip: Optional[int] = None, n_iters: Optional[int] = None,
                           latency: Optional[HopperLatency] = None):
    """The matplotlib ``Figure`` that :func:`render_hopper_timeline` saves, at the same arguments."""
    lat = latency or HopperLatency()
    T = _check_trip(program, trip)
    n_iters = drawn_iters(program, T, n_iters)
    return _figure(program, hopper_timeline_events(program, trip=T, n_iters=n_iters, latency=lat), T, n_iters, lat)


def render_hopper_timeline(program: HopperProgram, *, trip: Optional[int] = None, n_iters: Optional[int] = None,
                           latency: Optional[HopperLatency] = None) -> tuple[str, bytes]:
    """``(svg text, png bytes)`` of the protocol picture of ``program`` (:func:`hopper_timeline_events`
    at the same arguments): one row per warp group (waits, arrivals, releases, hangs) with its TMA
    copies and wgmma groups below it, one row per barrier slot (phases, completion marked with
    the phase number and parity); colour is the k-tile. Deterministic bytes."""
    return figure_files(hopper_timeline_figure(program, trip=trip, n_iters=n_iters, latency=latency))


__all__ = ["hopper_timeline_events", "render_hopper_timeline", "hopper_timeline_figure", "simulate", "HopperEvent", "HopperLatency",
           "default_trip", "drawn_iters", "stages_of", "k_pipe_mmas_of", "MAX_TRIP", "MAX_ITERS", "ASYNC_STORE_UNIT"]

"""``timeline.svg`` / ``timeline.png``: the pipelined loop over time, with its commit groups and waits.

Layout (docs/outputs.md):

* **one row per op**, in body order, labelled ``name  s<stage>`` (plus ``async q<n>``);
  op ``a`` of iteration ``v`` issues at ``(v + s_a) * II + t_a``
  (docs/latency_model.md). A solid bar is the op's busy time on its unit
  (``issue`` cycles), the faint bar behind it runs until its result is ready
  (``latency``). The colour is the iteration, so one iteration can be followed
  down the rows; the iteration number is written in a bar wide enough for it.
* **one lane per async queue** on top: each commit group as a bar from its
  commit to its completion (the last result of its ops), tagged with the
  iteration it loads; each ``async_wait_queue(q, n)`` as a tick with its count
  ``n``. Several groups in flight stack in sub-rows.
* **waits** also on the row of the op they guard (``w<n>``), and **stalls** in
  red: the cycles a wait would hold the op past its issue time under the
  latency model (all but the newest ``n`` groups must be complete), and the
  cycles a synchronous op on an async unit blocks issue (``issue`` to ``latency``).
* dashed lines are step boundaries.

Rows have a fixed height and labels sit on the axis, so names stay legible at
100 ops and more; the figure grows instead. Commit groups and waits need the
lowered :class:`~synth.program.Program`; without one only the ops are drawn.
matplotlib is imported lazily and drawn with its Agg/SVG canvases only (no
global backend switch); both outputs are deterministic.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Optional

from ..expr import evaluate
from ..graph import build_graph
from ..problem import Problem
from ..program import CommitStmt, OpStmt, Program, WaitStmt
from ..schedule import Schedule, Timing
from ..sim import best_timing

ROW_INCHES = 0.24
"""Height of one op row."""
RC = {"svg.hashsalt": "synth", "svg.fonttype": "none", "font.size": 7}
"""matplotlib settings for drawing and saving: text stays text in the SVG, ids are deterministic."""
MAX_WIDTH_INCHES = 40.0
"""The time axis never gets longer than this, over all panels (long loops are compressed, labels are not)."""
PANEL_INCHES = 16.0
"""A time axis longer than this is folded into panels stacked top to bottom, each this wide (at most
:data:`MAX_PANELS`), so the picture keeps a screen's proportions instead of becoming a strip."""
MAX_PANELS = 3
MAX_OP_ROWS = 160
"""At most this many op rows are drawn (the first in body order); the title says how many were left out.
Drawing time grows with the rows: 160 keep a solve's outputs within seconds."""


@dataclass(frozen=True)
class Event:
    """One drawn instance: an op of an iteration, a commit group, or a wait."""

    kind: str
    """op | block (a sync op holding issue) | group | qwait (on a queue lane) | wait (on an op row) | stall"""
    row: str
    """The op's name, or ``q<n>`` for a queue lane."""
    start: int
    end: int
    label: str = ""
    iteration: int = -1


def _timing(problem: Problem, schedule: Schedule) -> Timing:
    if schedule.timing is not None:
        return schedule.timing
    return best_timing(problem, build_graph(problem), schedule)


def drawn_trip(problem: Problem, n_iters: int = 6) -> int:
    """The trip count the picture runs the loop at: a fixed loop's own; for a symbolic ``T`` the least
    ``T`` that has ``n_iters`` iterations and is allowed (at least ``min_trip_count``), so a GEMM whose
    ``T`` may be 1 still shows ``n_iters`` iterations overlapping (the title says which ``T``)."""
    if not problem.loop.symbolic:
        return int(problem.loop.trip_count)
    return max(int(problem.loop.min_trip_count), max(1, n_iters))


def timeline_events(problem: Problem, schedule: Schedule, program: Optional[Program] = None,
                    n_iters: int = 6) -> tuple[list[Event], int]:
    """The events drawn for iterations ``0 .. n_iters - 1`` (fewer when a fixed loop is shorter), and
    ``n_iters``; a symbolic loop runs at :func:`drawn_trip`.

    Pure: the picture is a rendering of this list, which tests check directly.
    """
    timing = _timing(problem, schedule)
    ii, off = timing.ii, timing.offsets
    trip = drawn_trip(problem, n_iters)
    n_iters = max(1, min(n_iters, trip))
    index = {op.name: a for a, op in enumerate(problem.ops)}
    events: list[Event] = []

    def issue_at(a: int, v: int) -> int:
        return (v + schedule.stage[a]) * ii + off[a]

    for a, op in enumerate(problem.ops):
        for v in range(n_iters):
            x0 = issue_at(a, v)
            events.append(Event("op", op.name, x0, x0 + max(op.latency, op.issue, 1), str(v), v))
            unit_async = problem.queue_of_unit(op.unit) is not None
            if unit_async and not schedule.is_async[a] and op.latency > op.issue:
                events.append(Event("block", op.name, x0 + op.issue, x0 + op.latency, "blocks", v))
    if program is not None:
        events += _queue_events(problem, schedule, program, ii, off, index, n_iters, int(trip))
    return events, n_iters


def _queue_events(problem: Problem, schedule: Schedule, program: Program, ii: int, off, index, n_iters: int,
                  trip: int) -> list[Event]:
    """Commit groups, waits and wait stalls, by running the program's statements step by step."""
    S = program.max_stage
    parts = {p.name: p for p in program.parts}
    env0 = {program.loop_var: 0}
    if isinstance(program.trip_count, str):
        env0[program.trip_count] = trip
    last_step = min(n_iters - 1 + S, trip + S - 1)
    events: list[Event] = []
    committed: dict[int, list[tuple[int, int, int]]] = {}  # queue -> [(commit time, done time, iteration)]
    for J in range(last_step + 1):
        if J < S:
            part, i = parts.get("prologue"), J
        elif J < trip:
            part, i = parts.get("body"), J - S
        else:
            part, i = parts.get("epilogue"), J - trip
        if part is None:
            continue
        env = dict(env0, **{part.var: i})
        pending: dict[int, tuple[int, int, int]] = {}  # queue -> (first issue, done, iteration) of the open group
        stmts = part.stmts
        for k, st in enumerate(stmts):
            if st.guard is not None and not evaluate(st.guard, env):
                continue
            if isinstance(st, OpStmt):
                a = index[st.op]
                v = J - schedule.stage[a]
                t = J * ii + off[a]
                q = schedule.queue[a] if schedule.is_async[a] else None
                if q is not None:
                    first, done, it = pending.get(q, (t, t, v))
                    pending[q] = (min(first, t), max(done, t + problem.ops[a].latency), it)
            elif isinstance(st, CommitStmt):
                first, done, it = pending.pop(st.queue, (None, None, -1))
                when = _next_time(stmts, k, J, ii, off, index, env)
                if first is None:  # an empty group (an opaque predicate was off): complete at once
                    first = done = when
                committed.setdefault(st.queue, []).append((first, done, it))
                if it < n_iters:
                    events.append(Event("group", f"q{st.queue}", first, max(done, first + 1),
                                     f"{it}" if it >= 0 else "", it))
            elif isinstance(st, WaitStmt):
                w = program.waits[st.wait]
                n = int(evaluate(w.in_flight, env))
                when = _next_time(stmts, k, J, ii, off, index, env)
                groups = committed.get(w.queue, [])
                must = groups[: max(len(groups) - n, 0)]
                ready = max((d for _, d, _ in must), default=when)
                before = index.get(w.before)
                v = J - schedule.stage[before] if before is not None else -1
                events.append(Event("qwait", f"q{w.queue}", when, when, f"{n}", v))
                if before is not None and 0 <= v < n_iters:
                    events.append(Event("wait", w.before, when, when, f"w{n}", v))
                    if ready > when:
                        events.append(Event("stall", w.before, when, ready, f"stall {ready - when}", v))
    return events


def _next_time(stmts, k: int, J: int, ii: int, off, index, env) -> int:
    """Issue time of the first op statement after position ``k`` in step ``J`` (else the step's end)."""
    for st in stmts[k + 1:]:
        if isinstance(st, OpStmt) and (st.guard is None or evaluate(st.guard, env)):
            return J * ii + off[index[st.op]]
    for st in reversed(stmts[:k]):
        if isinstance(st, OpStmt) and (st.guard is None or evaluate(st.guard, env)):
            return J * ii + off[index[st.op]]
    return J * ii


def _figure(problem: Problem, schedule: Schedule, program: Optional[Program], n_iters: int):
    # matplotlib: only when a timeline is drawn (a stock GPU image has none)
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    timing = _timing(problem, schedule)
    ii = timing.ii
    events, n_iters = timeline_events(problem, schedule, program, n_iters)
    body = [problem.ops[a] for a in schedule.body_order()]
    hidden = max(len(body) - MAX_OP_ROWS, 0)
    if hidden:
        body = body[:MAX_OP_ROWS]
        drawn = {op.name for op in body}
        events = [e for e in events if e.kind in ("group", "qwait") or e.row in drawn]
    queues = sorted({int(e.row[1:]) for e in events if e.kind in ("group", "qwait")})
    # Sub-rows of a queue lane: greedy interval packing of its groups.
    lanes: list[tuple[str, int]] = []
    group_row: dict[int, int] = {}
    for q in queues:
        ends: list[int] = []
        for n, e in enumerate(events):
            if e.kind == "group" and e.row == f"q{q}":
                slot = next((s for s, end in enumerate(ends) if end <= e.start), len(ends))
                if slot == len(ends):
                    ends.append(e.end)
                else:
                    ends[slot] = e.end
                group_row[n] = slot
        lanes += [(f"q{q}", s) for s in range(max(len(ends), 1))]
    rows = [f"op:{op.name}" for op in reversed(body)] + [f"lane:{q}:{s}" for q, s in reversed(lanes)]
    y_of = {r: y for y, r in enumerate(rows)}
    end = max(e.end for e in events)
    length = min(MAX_WIDTH_INCHES, 8 + end / 200)
    n_panels = min(MAX_PANELS, -(-int(length) // int(PANEL_INCHES)))
    width = length if n_panels == 1 else PANEL_INCHES
    panel_h = 0.9 + ROW_INCHES * len(rows)
    height = 0.7 + panel_h * n_panels
    window = end * 1.01 / n_panels
    cmap = matplotlib.colormaps["tab10"]
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height))
        axes = [fig.add_subplot(n_panels, 1, k + 1) for k in range(n_panels)]
        for k, ax in enumerate(axes):
            _draw_panel(ax, problem, schedule, events, group_row, y_of, cmap, width * 72 * 0.8 / max(window, 1))
            ax.set_xlim(k * window, (k + 1) * window)
        ax = axes[0]
        n_steps = n_iters + schedule.max_stage
        for a in axes:
            for k in range(0, n_steps + 1):
                a.axvline(k * ii, color="grey", linestyle="--", linewidth=0.4)
        labels = []
        for r in rows:
            if r.startswith("op:"):
                name = r[3:]
                a = next(i for i, op in enumerate(problem.ops) if op.name == name)
                extra = f"  async q{schedule.queue[a]}" if schedule.is_async[a] else ""
                labels.append(f"{name}  s{schedule.stage[a]}{extra}")
            else:
                _, q, s = r.split(":")
                labels.append(f"{q} groups" if s == "0" else "")
        for a in axes:
            a.set_yticks(range(len(rows)))
            a.set_yticklabels(labels)
            a.set_ylim(-0.7, len(rows) - 0.1)
        axes[-1].set_xlabel("cycles" if n_panels == 1 else f"cycles (the time axis folded into {n_panels} panels)")
        n_stages = schedule.max_stage + 1
        cyc = (f"{timing.cycles} cycles for T={problem.loop.trip_count}" if timing.cycles is not None
               else f"cycles = ({problem.loop.trip_count} - 1) * {ii} + {timing.tail}")
        more = f" ({hidden} more ops not drawn)" if hidden else ""
        at = f"; drawn for T = {drawn_trip(problem, n_iters)}" if problem.loop.symbolic else ""
        ax.set_title(f"{problem.name}: II = {ii}, {n_stages} stage{'s' if n_stages > 1 else ''}, {cyc}{at}{more}",
                     loc="left")
        handles = [Patch(color=cmap(v % 10), label=f"iter {v}") for v in range(n_iters)]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="async op"))
        if any(e.kind in ("stall", "block") for e in events):
            handles.append(Patch(color="red", alpha=0.35, label="stall / blocked issue"))
        if program is not None and queues:
            handles.append(Patch(facecolor="grey", alpha=0.55, edgecolor="black",
                                 label="commit group, from commit to completion (tick: wait n)"))
        # Margins from the label lengths (tight_layout would cost one more full draw).
        left = min(0.5, (0.3 + 0.055 * max(len(t) for t in labels)) / width)
        legend_h = place_legend(fig, handles, left)
        height += legend_h
        fig.set_size_inches(width, height)
        fig.subplots_adjust(left=left, right=1 - 0.2 / width, bottom=0.5 / height, top=1 - (0.4 + legend_h) / height,
                            hspace=0.9 / panel_h)
    return fig


def _draw_panel(ax, problem: Problem, schedule: Schedule, events: list, group_row: dict, y_of: dict, cmap,
                px_per_cycle: float) -> None:
    """Every event of the picture drawn on ``ax`` (text clipped to the panel's time window)."""
    op_of = {op.name: a for a, op in enumerate(problem.ops)}
    # One broken_barh call per row and style: thousands of bars stay fast to draw.
    bars: dict[tuple, list] = {}

    def bar(key, x0, w, color) -> None:
        bars.setdefault(key, []).append((x0, w, color))

    for n, e in enumerate(events):
        color = cmap(e.iteration % 10) if e.iteration >= 0 else (0.5, 0.5, 0.5, 1.0)
        if e.kind == "op":
            a = op_of[e.row]
            op = problem.ops[a]
            y = y_of[f"op:{e.row}"]
            busy = max(op.issue, 1)
            bar(("ready", y), e.start, e.end - e.start, color[:3] + (0.2,))
            bar(("busy", y, schedule.is_async[a]), e.start, busy, color)
            if busy * px_per_cycle >= 9:
                ax.text(e.start + 0.5 * busy, y, e.label, fontsize=5, ha="center", va="center", clip_on=True)
        elif e.kind == "block":
            bar(("block", y_of[f"op:{e.row}"]), e.start, e.end - e.start, (1.0, 0.0, 0.0, 0.6))
        elif e.kind == "stall":
            y = y_of[f"op:{e.row}"]
            bar(("stall", y), e.start, e.end - e.start, (1.0, 0.0, 0.0, 0.35))
            ax.text(e.start, y - 0.42, e.label, fontsize=5, color="red", ha="left", va="top", clip_on=True)
        elif e.kind == "group":
            y = y_of[f"lane:{e.row}:{group_row[n]}"]
            bar(("group", y), e.start, e.end - e.start, color[:3] + (0.55,))
            if (e.end - e.start) * px_per_cycle >= 12:
                ax.text(e.start + 2, y, f"g{e.label}", fontsize=5, ha="left", va="center", clip_on=True)
        elif e.kind == "qwait":
            ys = [y_of[r] for r in y_of if r.startswith(f"lane:{e.row}:")]
            ax.vlines(e.start, min(ys) - 0.4, max(ys) + 0.4, color="black", linewidth=0.8)
            ax.text(e.start, max(ys) + 0.45, e.label, fontsize=5, ha="center", va="bottom", clip_on=True)
        elif e.kind == "wait":
            y = y_of[f"op:{e.row}"]
            ax.plot([e.start], [y + 0.38], marker="v", markersize=3, color="black", linewidth=0)
            ax.text(e.start, y + 0.42, e.label, fontsize=5, ha="right", va="bottom", clip_on=True)
    style = {"ready": dict(height=0.6, linewidth=0),
             "busy": dict(height=0.6, edgecolor="black", linewidth=0.3),
             "block": dict(height=0.25, linewidth=0),
             "stall": dict(height=0.6, linewidth=0),
             "group": dict(height=0.6, edgecolor="black", linewidth=0.3)}
    for key in sorted(bars, key=lambda k: (["ready", "busy", "block", "stall", "group"].index(k[0]), k[1:])):
        segs = bars[key]
        st = dict(style[key[0]])
        h = st.pop("height")
        if key[0] == "busy" and key[2]:
            st["hatch"] = "//"
        ax.broken_barh([(x, w) for x, w, _ in segs], (key[1] - h / 2, h),
                       facecolors=[c for _, _, c in segs], **st)


def place_legend(fig, handles, left: float, fontsize: float = 6) -> float:
    """Put ``handles`` in a legend at the top of ``fig``, left-aligned at ``left`` (a fraction of the width),
    in the most columns (at most 8) whose measured width fits the figure; returns its height in inches.

    The figure then grows by that height and its axes start below it: nothing of the legend is clipped
    at any width (each column is measured with matplotlib's own text layout, not estimated)."""
    # matplotlib: only when a timeline is drawn (a stock GPU image has none)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    pad = 0.1  # inches kept clear between the legend and the figure's top and right edges
    room = fig.get_figwidth() * fig.dpi * (1 - left) - 2 * pad * fig.dpi
    for ncol in range(min(len(handles), 8), 0, -1):
        leg = fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(left, 1.0), fontsize=fontsize,
                         ncol=ncol, frameon=False, borderaxespad=pad * 72 / fontsize)
        box = leg.get_window_extent(renderer)
        if box.width <= room or ncol == 1:
            return box.height / fig.dpi + pad + 0.05
        leg.remove()
    return 0.0


def timeline_figure(problem: Problem, schedule: Schedule, program: Optional[Program] = None, n_iters: int = 6):
    """The matplotlib ``Figure`` that :func:`render_timeline` saves (for tests and notebooks)."""
    return _figure(problem, schedule, program, n_iters)


def figure_files(fig) -> tuple[str, bytes]:
    """``(svg text, png bytes)`` of a timeline figure, with deterministic bytes (:data:`RC`: text stays text, ids
    are salted; no date or software stamp), the PNG at 110 dpi. Every timeline synth writes is saved here."""
    # matplotlib: only when a timeline is drawn (a stock GPU image has none)
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    with matplotlib.rc_context(RC):
        FigureCanvasSVG(fig)
        sbuf = io.StringIO()
        fig.savefig(sbuf, format="svg", metadata={"Date": None})
        FigureCanvasAgg(fig)
        pbuf = io.BytesIO()
        fig.savefig(pbuf, format="png", dpi=110, metadata={"Software": None})
    return sbuf.getvalue(), pbuf.getvalue()


def render_timeline(problem: Problem, schedule: Schedule, program: Optional[Program] = None,
                    n_iters: int = 6) -> tuple[str, bytes]:
    """``(svg text, png bytes)`` of the same picture (docs/outputs.md)."""
    return figure_files(_figure(problem, schedule, program, n_iters))


def timeline_svg(problem: Problem, schedule: Schedule, n_iters: int = 6, program: Optional[Program] = None) -> str:
    """The SVG text of the picture (``n_iters`` iterations, fewer if the loop is shorter)."""
    # matplotlib: only when a timeline is drawn (a stock GPU image has none)
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    fig = _figure(problem, schedule, program, n_iters)
    with matplotlib.rc_context(RC):
        FigureCanvasSVG(fig)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


__all__ = ["timeline_svg", "render_timeline", "figure_files", "RC", "timeline_events", "timeline_figure", "drawn_trip", "place_legend", "Event"]

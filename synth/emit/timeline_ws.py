"""The steady state of a warp-specialized schedule, drawn: ``timeline.svg`` / ``timeline.png`` of an attention
body's folder (docs/outputs.md, "A warp-specialized body's folder").

Input: a :class:`~synth.model.ws_schedule.WsSchedule` (``schedule.json``: each op's unit, warp group, start and
duration, a wgmma's ``wait_group`` interval, the II, the consumers' mode and offsets). Output: one lane per warp
group (``producer``, ``consumer 0``, ``consumer 1``, ...), each of two rows: what the warp group issues to run on
its own (the producer's TMA copies, a consumer's wgmma on the tensor core) and its own instruction stream (the
softmax's ALU, FMA and MUFU ops, and the time it is blocked in ``wait_group``). Every op of every KV block is placed
at its schedule start (iteration ``j`` of op ``o`` at ``start_o + j II``, plus consumer ``w``'s offset when the
consumers are staggered; iteration ``j`` on consumer ``j mod C`` when they alternate), and a window of
:data:`WINDOW_IIS` initiation intervals past the fill is drawn, so every block in it is in the steady state: the ops
of three consecutive KV blocks (``j``, ``j+1``, ``j+2``) appear, coloured by unit. With staggered consumers the
picture shows their ping-pong (one consumer's ``qk`` / ``pv`` on the tensor core while the other's ``exp2`` runs on
MUFU) and each consumer's softmax under the other's GEMMs. Not a simulation: the times are the schedule's, as the
model placed them (docs/ws_model.md); the proof is docs/attention.md's.
"""

from __future__ import annotations


from ..model.ws_schedule import WsSchedule
from .timeline import RC, figure_files

WINDOW_IIS = 2
"""Initiation intervals drawn (each holds a stage of two or three KV blocks)."""
UNIT_COLORS = {"tma": "#4c78a8", "tensor": "#e45756", "mufu": "#b279a2", "fma": "#54a24b", "alu": "#eeca3b",
               "lsu": "#9d755d"}
"""The colour of each unit's ops (the model's units, docs/ws_model.md)."""
UNIT_NAMES = {"tma": "TMA", "tensor": "tensor core (wgmma)", "mufu": "MUFU", "fma": "FMA", "alu": "ALU",
              "lsu": "LSU"}
ASYNC_UNITS = ("tma", "tensor")
"""Units whose ops run on their own once issued: drawn on the lane's first row."""
WIDTH_INCHES = 16.0


def lanes(schedule: WsSchedule) -> list[str]:
    """The warp groups drawn, in order: ``producer`` (when the schedule has one), ``consumer 0`` ..."""
    return (["producer"] if schedule.producer else []) + [f"consumer {w}" for w in range(schedule.consumers)]


def instances(schedule: WsSchedule, blocks: range) -> list[tuple[str, str, str, int, int, int]]:
    """``(lane, op, unit, KV block, start, end)`` of every op of the KV blocks ``blocks`` on every warp group that
    runs it, in cycles from block 0's first op; a wgmma's ``wait_group`` as op ``wait <op>`` (unit ``wait``, from
    where the warp group reaches it to where it returns)."""
    C, ii = schedule.consumers, schedule.ii
    out = []
    for o in schedule.ops:
        for j in blocks:
            base = o.start + j * ii
            if o.warp_group == "producer":
                where = [("producer", 0)]
            elif o.warp_group == "consumer 0":
                where = [("consumer 0", 0)]
            elif schedule.mode == "alternate":
                where = [(f"consumer {j % C}", 0)]
            else:  # every consumer its rows: lockstep (coop) or at its offset (stagger)
                offs = schedule.offsets if schedule.mode == "stagger" else (0,) * C
                where = [(f"consumer {w}", offs[w]) for w in range(C)]
            for lane, off in where:
                out.append((lane, o.name, o.unit, j, base + off, base + off + o.duration))
                if o.wait_start is not None and o.wait_end is not None and o.wait_end > o.wait_start:
                    w0 = o.wait_start + j * ii + off
                    out.append((lane, f"wait {o.name}", "wait", j, w0, w0 + o.wait_end - o.wait_start))
    return out


def window(schedule: WsSchedule) -> tuple[int, int, int]:
    """``(first block, start, end)`` of the drawn window: from the first KV block whose ops all start after the fill
    (every stage of the pipeline in flight), :data:`WINDOW_IIS` initiation intervals long."""
    first = max(o.stage for o in schedule.ops) + 1
    return first, first * schedule.ii, (first + WINDOW_IIS) * schedule.ii


def ws_timeline_figure(schedule: WsSchedule):
    """The matplotlib ``Figure`` that :func:`render_ws_timeline` saves."""
    # matplotlib: only when a timeline is drawn (a stock GPU image has none)
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    first, t0, t1 = window(schedule)
    span = t1 - t0
    reach = max(max(o.start + o.duration, o.wait_end or 0) for o in schedule.ops) + max(schedule.offsets or (0,))
    lo = first - (reach // schedule.ii + 2)  # every earlier block whose ops reach into the window
    names = lanes(schedule)
    rows = []  # (lane, row kind) top to bottom
    for lane in names:
        rows.append((lane, "async"))
        if lane != "producer":
            rows.append((lane, "stream"))
    y_of = {r: len(rows) - 1 - i for i, r in enumerate(rows)}
    with matplotlib.rc_context(RC):
        row_inches = 0.55
        height = row_inches * len(rows) + 1.25
        fig = Figure(figsize=(WIDTH_INCHES, height))
        left = 0.11
        ax = fig.add_axes((left, 0.55 / height, 0.87, row_inches * (len(rows) + 0.6) / height))
        axis_inches = WIDTH_INCHES * 0.87
        bar_points = 0.76 * row_inches * 72  # a bar's height

        def room(w: float, text: str, size: float) -> bool:
            return w / span * axis_inches * 72 >= 0.62 * size * max(len(t) for t in text.split("\n")) + 2

        def upright(w: float, text: str, size: float) -> bool:  # the label turned 90 degrees
            return w / span * axis_inches * 72 >= 1.2 * size + 1 and bar_points >= 0.62 * size * len(text) + 2

        for lane, op, unit, j, a, b in instances(schedule, range(lo, first + WINDOW_IIS + 1)):
            if b <= t0 or a >= t1:
                continue
            kind = "async" if unit in ASYNC_UNITS and lane != "producer" or lane == "producer" else "stream"
            y = y_of[(lane, kind)]
            x0, x1 = max(a, t0) - t0, min(b, t1) - t0
            tag = "j" if j == first else f"j{j - first:+d}"
            if unit == "wait":
                ax.broken_barh([(x0, x1 - x0)], (y - 0.3, 0.6), facecolors="white", edgecolors="#888888",
                               hatch="///", linewidth=0.5)
                label = f"wait {op[5:]} {tag}"
                if room(x1 - x0, label, 5.5):
                    ax.text((x0 + x1) / 2, y, label, ha="center", va="center", fontsize=5.5, color="#555555")
                continue
            ax.broken_barh([(x0, x1 - x0)], (y - 0.38, 0.76), facecolors=UNIT_COLORS.get(unit, "#bbbbbb"),
                           edgecolors="black", linewidth=0.4)
            for label, size in ((f"{op} {tag}", 6.5), (f"{op}\n{tag}", 6.0), (f"{op}\n{tag}", 5.0)):
                if room(x1 - x0, label, size):
                    ax.text((x0 + x1) / 2, y, label, ha="center", va="center", fontsize=size, linespacing=0.95)
                    break
            else:
                for label, size in ((f"{op} {tag}", 5.0), (op, 5.0), (op, 4.0)):
                    if upright(x1 - x0, label, size):
                        ax.text((x0 + x1) / 2, y, label, ha="center", va="center", fontsize=size, rotation=90)
                        break
        for k in range(WINDOW_IIS + 1):
            ax.axvline(k * schedule.ii, color="#333333", linewidth=0.6, linestyle="--")
            if k < WINDOW_IIS:
                ax.text(k * schedule.ii + 8, len(rows) - 0.45, f"II {k + 1}: block j{k:+d} issues its first copy"
                        if k else "II 1: block j issues its first copy", fontsize=6, va="bottom", color="#333333")
        ax.set_yticks([y_of[r] for r in rows])
        ax.set_yticklabels([(f"{lane}: TMA" if lane == "producer" else f"{lane}: wgmma") if kind == "async"
                            else f"{lane}: softmax" for lane, kind in rows])
        for lane in names:  # a faint band per warp group
            ys = [y_of[r] for r in rows if r[0] == lane]
            if names.index(lane) % 2:
                ax.axhspan(min(ys) - 0.5, max(ys) + 0.5, color="#f2f2f2", zorder=0)
        ax.set_ylim(-0.5, len(rows) + 0.1)
        ax.set_xlim(0, span)
        ax.set_xlabel(f"cycles (window of {WINDOW_IIS} x II = {span} cycles after the fill; each op at its schedule "
                      "start; j, j+1: KV blocks)")
        ax.tick_params(axis="y", length=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        used = sorted({o.unit for o in schedule.ops}, key=lambda u: list(UNIT_COLORS).index(u)
                      if u in UNIT_COLORS else 99)
        handles = [Patch(facecolor=UNIT_COLORS.get(u, "#bbbbbb"), edgecolor="black", linewidth=0.4,
                         label=UNIT_NAMES.get(u, u)) for u in used]
        if any(o.wait_start is not None for o in schedule.ops):
            handles.append(Patch(facecolor="white", edgecolor="#888888", hatch="///", label="blocked in wait_group"))
        mode = {"stagger": "staggered consumers (ping-pong), offsets " + ", ".join(map(str, schedule.offsets)),
                "alternate": "consumers alternating blocks", "coop": "cooperative consumers"}.get(schedule.mode,
                                                                                                  schedule.mode)
        fig.text(left, 1 - 0.12 / height, f"{schedule.body}: steady state, II {schedule.ii} cycles "
                 f"({schedule.status}), {'a producer warp group, ' if schedule.producer else ''}"
                 f"{schedule.consumers} consumer warp group(s), {mode}", ha="left", va="top", fontsize=8)
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(left, 1 - 0.3 / height), ncol=len(handles),
                   fontsize=6.5, frameon=False, borderaxespad=0)
    return fig


def render_ws_timeline(schedule: WsSchedule) -> tuple[str, bytes]:
    """``(svg text, png bytes)`` of :func:`ws_timeline_figure` (deterministic bytes)."""
    return figure_files(ws_timeline_figure(schedule))


__all__ = ["render_ws_timeline", "ws_timeline_figure", "instances", "lanes", "window", "WINDOW_IIS", "UNIT_COLORS"]

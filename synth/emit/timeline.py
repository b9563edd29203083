"""``timeline.svg``: successive iterations of the pipelined loop laid out over time.

One row per original iteration; op ``a`` of iteration ``v`` issues at
``(v + s_a) * II + t_a`` (docs/latency_model.md). A solid bar is the op's busy
time on its unit (``issue`` cycles), a faint bar behind it runs until its result
is ready (``latency``); colours are stages, hatching marks async ops; dashed
lines are step boundaries. matplotlib is imported lazily and drawn with its
SVG canvas only (no global backend switch); the output is deterministic.
"""

from __future__ import annotations

import io

from ..problem import Problem
from ..schedule import Schedule


def timeline_svg(problem: Problem, schedule: Schedule, n_iters: int = 6) -> str:
    """The SVG text of the pipeline picture (``n_iters`` iterations, fewer if the loop is shorter)."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    timing = schedule.timing
    if timing is None:
        from ..graph import build_graph
        from ..sim import best_timing

        timing = best_timing(problem, build_graph(problem), schedule)
    ii, off = timing.ii, timing.offsets
    if not problem.loop.symbolic:
        n_iters = max(1, min(n_iters, int(problem.loop.trip_count)))
    n_stages = schedule.max_stage + 1
    cmap = matplotlib.colormaps["tab10"]
    body = schedule.body_order()
    end = max((v + schedule.stage[a]) * ii + off[a] + op.latency
              for v in range(n_iters) for a, op in enumerate(problem.ops))
    with matplotlib.rc_context({"svg.hashsalt": "synth", "svg.fonttype": "none", "font.size": 8}):
        fig = Figure(figsize=(min(18, 6 + end / 250), 1.2 + 0.45 * n_iters))
        FigureCanvasSVG(fig)
        ax = fig.add_subplot(1, 1, 1)
        for v in range(n_iters):
            y = n_iters - 1 - v
            for k, a in enumerate(body):
                op = problem.ops[a]
                s = schedule.stage[a]
                x0 = (v + s) * ii + off[a]
                color = cmap(s % 10)
                ax.barh(y, op.latency or 1, left=x0, height=0.5, color=color, alpha=0.18, linewidth=0)
                ax.barh(y, op.issue, left=x0, height=0.5, color=color, edgecolor="black", linewidth=0.4,
                        hatch="//" if schedule.is_async[a] else None)
                above = k % 2 == 0  # alternate above/below so neighbours' names do not collide
                ax.text(x0, y + (0.3 if above else -0.3), op.name, fontsize=6, va="bottom" if above else "top",
                        ha="left", clip_on=True)
        for k in range(0, n_iters + n_stages + 1):
            ax.axvline(k * ii, color="grey", linestyle="--", linewidth=0.5)
        ax.set_yticks(range(n_iters))
        ax.set_yticklabels([f"iter {n_iters - 1 - y}" for y in range(n_iters)])
        ax.set_xlim(0, end * 1.02)
        ax.set_ylim(-0.6, n_iters + 0.2)
        ax.set_xlabel("cycles")
        cyc = (f"{timing.cycles} cycles for T={problem.loop.trip_count}" if timing.cycles is not None
               else f"cycles = ({problem.loop.trip_count} - 1) * {ii} + {timing.tail}")
        ax.set_title(f"{problem.name}: II = {ii}, {n_stages} stage{'s' if n_stages > 1 else ''}, {cyc}")
        handles = [Patch(color=cmap(s % 10), label=f"stage {s}") for s in sorted(set(schedule.stage))]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="async"))
        ax.legend(handles=handles, loc="upper right", fontsize=6, ncol=min(len(handles), 6))
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


__all__ = ["timeline_svg"]

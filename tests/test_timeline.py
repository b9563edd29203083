"""timeline.svg / timeline.png: valid, deterministic pictures naming the ops, with commit groups, waits and stalls."""

from __future__ import annotations

import pathlib
import re
import xml.etree.ElementTree as ET

import pytest

from synth.emit.timeline import ROW_INCHES, render_timeline, timeline_events, timeline_svg
from synth.expr import evaluate
from synth.graph import build_graph
from synth.load import load_problem
from synth.lower import lower
from synth.model import solve
from synth.randgen import random_problem, random_schedule
from synth.schedule import schedule_from_pins
from synth.lower.hopper_design import design_program

PROBLEMS = pathlib.Path(__file__).resolve().parent.parent / "problems"


def _texts(svg: str) -> str:
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    return " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))


def _pinned(name: str):
    p = load_problem(str(PROBLEMS / name))
    g = build_graph(p)
    s = schedule_from_pins(p, g)
    return p, s, lower(p, g, s)


def test_solved_gemm_timeline() -> None:
    p = load_problem(str(PROBLEMS / "gemm-sm80-f16.yaml"))
    s = solve(p, build_graph(p))
    svg = timeline_svg(p, s)
    text = _texts(svg)
    for op in p.ops:
        assert op.name in text
    assert "iter 0" in text and "II = 95" in text and f"s{max(s.stage)}" in text
    assert timeline_svg(p, s) == svg  # deterministic


def test_pinned_schedule_without_timing_symbolic() -> None:
    p = load_problem(str(PROBLEMS / "spec-predicated.yaml"))
    s = schedule_from_pins(p, build_graph(p))
    assert s.timing is None
    svg = timeline_svg(p, s, n_iters=3)
    text = _texts(svg)
    assert "cycles = (T - 1) * 211 + 875" in text and "iter 2" in text and "iter 3" not in text


def test_waits_and_commit_groups_are_drawn_with_their_counts() -> None:
    p, s, prog = _pinned("rfc0077-gemm.yaml")
    events, n = timeline_events(p, s, prog, n_iters=6)
    groups = [e for e in events if e.kind == "group"]
    lane_waits = [e for e in events if e.kind == "qwait"]
    assert groups and lane_waits
    # Every wait statement that runs in the drawn steps is on the queue lane with its count.
    S, T = prog.max_stage, p.loop.trip_count
    parts = {x.name: x for x in prog.parts}
    want = []
    for J in range(n - 1 + S + 1):
        part, i = (parts["prologue"], J) if J < S else (parts["body"], J - S) if J < T else (parts["epilogue"], J - T)
        env = {part.var: i, prog.loop_var: 0}
        for st in part.stmts:
            if st.kind == "wait" and (st.guard is None or evaluate(st.guard, env)):
                want.append(str(evaluate(prog.waits[st.wait].in_flight, env)))
    assert [e.label for e in lane_waits] == want
    assert "2" in want  # the RFC's body wait(0, 2)
    # Groups are committed before they complete, and each is tagged with the iteration it loads.
    assert all(e.end > e.start and 0 <= e.iteration < n for e in groups)
    svg, png = render_timeline(p, s, prog)
    text = _texts(svg)
    assert "q0 groups" in text and "w2" in text
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_stalls_are_the_time_a_wait_holds_its_op() -> None:
    p, s, prog = _pinned("rfc0077-gemm.yaml")
    events, _ = timeline_events(p, s, prog)
    waits = {(e.row, e.start) for e in events if e.kind == "wait"}
    for e in events:
        if e.kind == "stall":
            assert (e.row, e.start) in waits and e.end > e.start
            assert e.label == f"stall {e.end - e.start}"


def test_no_program_no_queue_lanes() -> None:
    p, s, _ = _pinned("rfc0077-two-stage.yaml")
    events, _ = timeline_events(p, s)
    assert {e.kind for e in events} <= {"op", "block"}


def test_labels_stay_legible_at_100_ops() -> None:
    p = random_problem(3, 100)
    g = build_graph(p)
    s = random_schedule(p, g, 3)
    prog = lower(p, g, s)
    svg = timeline_svg(p, s, n_iters=2, program=prog)
    text = _texts(svg)
    for op in p.ops:
        assert re.search(rf"\b{re.escape(op.name)}  s\d", text), op.name
    # One row per op at a fixed height: the picture grows, the labels do not shrink.
    height_pt = float(re.search(r'height="([\d.]+)pt"', svg).group(1))
    assert height_pt >= 100 * ROW_INCHES * 72
    assert 'font-size="7' in svg or "font: 7" in svg or "font-size: 7" in svg


@pytest.mark.slow  # a very long body drawn; the quick tier draws the examples
def test_very_long_bodies_draw_the_first_rows_and_say_how_many_are_left_out() -> None:
    from synth.emit.timeline import MAX_OP_ROWS

    p = random_problem(5, MAX_OP_ROWS + 12)
    g = build_graph(p)
    s = random_schedule(p, g, 5)
    svg = timeline_svg(p, s, n_iters=2, program=lower(p, g, s))
    assert "(12 more ops not drawn)" in _texts(svg)
    first = p.ops[s.body_order()[0]].name
    last = p.ops[s.body_order()[-1]].name
    assert re.search(rf"\b{re.escape(first)}  s\d", _texts(svg))
    assert not re.search(rf"\b{re.escape(last)}  s\d", _texts(svg))


def test_random_programs_with_predicates_draw() -> None:
    """Guards, gated commits, symbolic trip counts: every lowered program's events are computed."""
    drawn = 0
    for seed in range(12):
        p = random_problem(seed, 7, predicated=seed % 2 == 1)
        g = build_graph(p)
        s = random_schedule(p, g, seed)
        try:
            prog = lower(p, g, s)
        except Exception:  # a random schedule the lowering refuses (too few iterations, ...)
            continue
        events, n = timeline_events(p, s, prog)
        assert {e.row for e in events if e.kind == "op"} == {op.name for op in p.ops}
        assert all(e.end >= e.start for e in events)
        drawn += 1
    assert drawn >= 6


def test_symbolic_gemm_draws_six_overlapping_iterations() -> None:
    """A kind: gemm loop has a symbolic T that may be 1: the picture runs it at T = 6 (and says so), so six
    iterations are drawn, overlapping, not iteration 0 alone."""
    from synth.emit.timeline import drawn_trip, timeline_figure

    p, s, prog = _pinned("gemm-128x128x32-f16.yaml")
    assert p.loop.symbolic and drawn_trip(p) == 6
    events, n = timeline_events(p, s, prog)
    assert n == 6
    for op in p.ops:  # every op row has one bar per iteration
        assert sorted(e.iteration for e in events if e.kind == "op" and e.row == op.name) == list(range(6))
    load = [e for e in events if e.kind == "op" and e.row == "load_0"]
    assert max(e.start for e in load) < max(e.end for e in events if e.row == "mma_0") - 1  # they overlap in time
    fig = timeline_figure(p, s, prog)
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert [f"iter {v}" for v in range(6)] == [t for t in legend if t.startswith("iter")]
    title = fig.axes[0].get_title(loc="left")
    assert "drawn for T = 6" in title
    # the bars drawn: per op and iteration one busy bar and one faint bar up to its result
    assert sum(len(c.get_paths()) for c in fig.axes[0].collections) >= 2 * 6 * len(p.ops)


def _inside(fig, *artists) -> None:
    """Each artist lies within the figure, at least 0.08 inch from every edge, drawn at the PNG's 110 dpi (a
    legend flush with the edge, as before, reads as cut off)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from synth.emit.timeline import RC

    with matplotlib.rc_context(RC):
        fig.set_dpi(110)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        W, H, m = fig.bbox.width, fig.bbox.height, 0.08 * 110
        for a in artists:
            box = a.get_window_extent(renderer)
            assert box.x0 >= m and box.y0 >= m and box.x1 <= W - m and box.y1 <= H - m, (a, box, W, H)


def test_the_legend_lies_within_the_figure() -> None:
    """The legend once ran off the right edge of every PNG: at every figure width (a narrow pinned
    GEMM, the wide symbolic one, a Hopper protocol picture) it lies within the figure, as does the title."""
    from synth.hopper.kernel_design import KernelDesign
    from synth.emit.timeline import timeline_figure
    from synth.emit.timeline_hopper import hopper_timeline_figure

    for name in ("rfc0077-gemm.yaml", "gemm-128x128x32-f16.yaml", "rfc0077-two-stage.yaml"):
        p, s, prog = _pinned(name)
        fig = timeline_figure(p, s, prog)
        assert fig.legends, name
        _inside(fig, *fig.legends, _title(fig))
    fig = hopper_timeline_figure(design_program(KernelDesign.of(bm=128, bn=128, stages=4, k_pipe_mmas=1)))
    _inside(fig, *fig.legends, _title(fig))


def _title(fig):
    from matplotlib.text import Text

    ax = fig.axes[0]
    return next(t for t in ax.findobj(Text) if t.get_text() == ax.get_title(loc="left"))


def test_a_long_loop_is_folded_into_panels_a_screen_can_show() -> None:
    """The example GEMM's six iterations span 5,000 cycles: the PNG keeps a screen's proportions (it was a
    3828 x 473 strip), every cycle is on exactly one panel, in order."""
    import io

    import matplotlib.image as mpimg

    from synth.emit.timeline import timeline_figure

    p, s, prog = _pinned("gemm-128x128x32-f16.yaml")
    _, png = render_timeline(p, s, prog)
    h, w = mpimg.imread(io.BytesIO(png)).shape[:2]
    assert w <= 2000 and w / h <= 3, (w, h)
    fig = timeline_figure(p, s, prog)
    windows = [ax.get_xlim() for ax in fig.axes]
    assert len(windows) > 1 and windows[0][0] == 0
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
    end = max(e.end for e in timeline_events(p, s, prog)[0])
    assert windows[-1][1] >= end

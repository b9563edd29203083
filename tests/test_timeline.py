"""timeline.svg: valid, deterministic SVG naming the ops."""

from __future__ import annotations

import pathlib
import xml.etree.ElementTree as ET

from synth.emit.timeline import timeline_svg
from synth.graph import build_graph
from synth.load import load_problem
from synth.model import solve
from synth.schedule import schedule_from_pins

PROBLEMS = pathlib.Path(__file__).resolve().parent.parent / "problems"


def test_solved_gemm_timeline() -> None:
    p = load_problem(str(PROBLEMS / "gemm-sm80-f16.yaml"))
    s = solve(p, build_graph(p))
    svg = timeline_svg(p, s)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    for op in p.ops:
        assert op.name in text
    assert "iter 0" in text and "II = 95" in text and "stage 5" in text
    assert timeline_svg(p, s) == svg  # deterministic


def test_pinned_schedule_without_timing_symbolic() -> None:
    p = load_problem(str(PROBLEMS / "spec-predicated.yaml"))
    s = schedule_from_pins(p, build_graph(p))
    assert s.timing is None
    svg = timeline_svg(p, s, n_iters=3)
    ET.fromstring(svg)
    assert "cycles = (T - 1) * 211 + 875" in svg and "iter 2" in svg and "iter 3" not in svg

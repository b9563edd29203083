"""Every example problem goes through the whole flow: solve, lower, prove (and emit for GEMMs)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import PROBLEMS
from synth.errors import SynthError
from synth.load import load_problem
from synth.pipeline import load_output, run, write_outputs
from synth.schedule import check_schedule
from synth.sim import simulate

EXAMPLES = sorted(p for p in PROBLEMS.glob("*.yaml") if "mainloop: tma_wgmma" not in p.read_text())
"""The cp.async examples (the Hopper one is solved end to end by tests/hopper/test_solve.py)."""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_solves_lowers_and_proves(path):
    problem = load_problem(str(path))
    result = run(problem, time_limit=20.0)
    assert check_schedule(problem, result.graph, result.schedule) == []
    assert result.schedule.info.status in ("OPTIMAL", "FEASIBLE")
    assert result.report is not None and result.report.ok, result.report.render()
    assert all(w.tight is not None for w in result.program.waits)
    if problem.pins.stage is not None:
        assert result.schedule.stage == tuple(problem.pins.stage)
    if result.schedule.timing and result.schedule.timing.cycles is not None:
        assert simulate(problem, result.graph, result.schedule).cycles == result.schedule.timing.cycles
    assert (result.kernel is not None) == (problem.gemm is not None)


def test_output_folder_round_trips(tmp_path):
    problem = load_problem(str(PROBLEMS / "rfc0077-interleaved.yaml"))
    result = run(problem, time_limit=10.0)
    out = tmp_path / "o"
    files = write_outputs(result, str(out))
    assert "certificate/" in files and "timeline.svg" in files
    p2, s2, prog2 = load_output(str(out))
    assert s2.stage == result.schedule.stage and s2.order == result.schedule.order
    assert prog2 == result.program
    with pytest.raises(SynthError, match="already exists"):
        write_outputs(result, str(out))
    write_outputs(result, str(out), force=True)
    assert json.loads((out / "program.json").read_text())["waits"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".synth-")]

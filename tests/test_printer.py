"""program.txt: golden files for every pinned problem, and the RFC 0077 notation."""

from __future__ import annotations

import pathlib

import pytest

from conftest import check_golden
from synth.errors import SynthError
from synth.graph import build_graph
from synth.load import load_problem, load_problem_text
from synth.lower import lower
from synth.printer import program_text
from synth.program import program_from_json, program_to_json
from synth.schedule import schedule_from_pins
from synth.lower.hopper_design import design_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"
GOLDEN = ROOT / "tests" / "golden"


def _pinned() -> list[pathlib.Path]:
    """Problems whose schedule.stage is pinned (the others are solved; see test_solved_examples_lower)."""
    out = []
    for path in sorted(PROBLEMS.glob("*.yaml")):
        p = load_problem(str(path))
        if getattr(p, "pins", None) is not None and p.pins.stage is not None:
            out.append(path)
    return out


def _text(path: pathlib.Path, **kw) -> tuple[str, object]:
    p = load_problem(str(path))
    g = build_graph(p)
    return program_text(lower(p, g, schedule_from_pins(p, g), **kw)), p


@pytest.mark.parametrize("path", _pinned(), ids=lambda p: p.stem)
def test_golden(path: pathlib.Path, update_golden: bool) -> None:
    p = load_problem(str(path))
    text, _ = _text(path)
    check_golden(GOLDEN / p.name / "program.txt", text, update_golden)


def test_gemm_listing() -> None:
    text, _ = _text(PROBLEMS / "rfc0077-gemm.yaml")
    body = text.split("# Body\n")[1].split("\n\n")[0]
    assert body == """\
for i in range(125):
    async_commit_queue(0):
        async_scope:
            load_A: A_s[(i + 3) % 3]  # k = i + 3
        async_scope:
            load_B: B_s[(i + 3) % 4]  # k = i + 3
    s2r_B: B_r[0] <- B_s[i % 4]  # k = i
    async_wait_queue(0, 2):
        s2r_A: A_r[(i + 1) % 2] <- A_s[(i + 1) % 3]  # k = i + 1
        mma: C_r[0] <- A_r[i % 2], B_r[0], C_r[0]  # k = i"""
    assert "    if 2 <= i:\n        async_wait_queue(0, 2):\n            s2r_A: A_r[0] <- A_s[0]  # k = i - 2" in text
    assert "    async_wait_queue(0, 2 - i):\n        s2r_B: B_r[0] <- B_s[(i + 125) % 4]" in text
    assert "    if i < 2:\n        async_wait_queue(0, 1 - i):\n" in text
    assert text.startswith("# rfc0077-gemm: for k in range(128), pipelined in 4 stages\n# queue 0: cp_async\n")


def test_three_stage_wait_inside_commit_scope() -> None:
    text, _ = _text(PROBLEMS / "rfc0077-three-stage.yaml")
    assert """\
    async_commit_queue(1):
        async_wait_queue(0, 1):
            async_scope:
                make_C: C[(i + 1) % 2] <- B[(i + 1) % 3]  # iteration i + 1
    async_wait_queue(1, 1):
        store_D(C[i % 2])  # iteration i""" in text
    assert "    if i < 1:\n        async_commit_queue(1):\n" in text


def test_interleaved_wait_scope_ends_at_next_commit() -> None:
    text, _ = _text(PROBLEMS / "rfc0077-interleaved.yaml")
    assert """\
    async_wait_queue(0, 5):
        compute(A_shared[i % 4], B_shared[i % 3])  # iteration i
    async_commit_queue(0):
        async_scope:
            copy_B: B_shared[(i + 3) % 3]  # iteration i + 3""" in text


def test_predicates_printed_at_their_iteration() -> None:
    text, _ = _text(PROBLEMS / "spec-predicated.yaml")
    assert "        if i + 6 < T:\n            async_scope:\n                load_B: B_s[(i + 3) % 4]" in text
    assert "for i in range(T - 3):" in text
    gated = (PROBLEMS / "rfc0077-interleaved.yaml").read_text().replace(
        "writes: [B_shared], latency: 400", "writes: [B_shared], latency: 400, when: \"i + 2 < 16\"")
    p = load_problem_text(gated, "g.yaml")
    g = build_graph(p)
    t = program_text(lower(p, g, schedule_from_pins(p, g)))
    # a gated commit: the condition wraps the commit scope and is not repeated inside
    assert "    if i < 11:\n        async_commit_queue(0):\n            async_scope:\n" in t
    # in the prologue the predicate always holds: no if
    assert "for i in range(3):\n    async_commit_queue(0):\n        async_scope:\n            copy_A" in t


def test_opaque_predicate() -> None:
    text = (PROBLEMS / "predicated-opaque.yaml").read_text().replace(
        "schedule:\n  max_stage: 3", "schedule: {stage: [0, 0, 2], async_stages: [0]}")
    p = load_problem_text(text, "o.yaml")
    g = build_graph(p)
    t = program_text(lower(p, g, schedule_from_pins(p, g)))
    assert "        if opaque(i + 2):\n            async_scope:\n                load_mask_tile: M_s[" in t
    assert "# note: load_mask_tile is predicated (opaque): its group is committed on every iteration" in t


def test_from_json_prints_the_same() -> None:
    for name in ("rfc0077-gemm", "rfc0077-three-stage", "spec-predicated"):
        p = load_problem(str(PROBLEMS / f"{name}.yaml"))
        g = build_graph(p)
        prog = lower(p, g, schedule_from_pins(p, g))
        assert program_text(program_from_json(program_to_json(prog))) == program_text(prog)


def test_unpipelined_loop_has_only_a_body() -> None:
    text = (PROBLEMS / "rfc0077-two-stage.yaml").read_text().replace("stage: [0, 1]", "stage: [0, 0]")
    p = load_problem_text(text, "flat.yaml")
    g = build_graph(p)
    t = program_text(lower(p, g, schedule_from_pins(p, g)))
    assert "# Prologue" not in t and "# Epilogue" not in t
    assert "# Body\nfor i in range(16):\n" in t


def test_unpinned_problem_is_an_error() -> None:
    p = load_problem(str(PROBLEMS / "two-queues.yaml"))
    with pytest.raises(SynthError):
        schedule_from_pins(p, build_graph(p))


SHORT = [("rfc0077-gemm", 2, 2), ("rfc0077-gemm", "T", 1), ("rfc0077-three-stage", "T", 1),
         ("rfc0077-interleaved", 1, 1), ("rfc0077-two-stage", "T", 1)]


def _short_text(name: str, trip, tmin: int) -> str:
    import dataclasses

    p = load_problem(str(PROBLEMS / f"{name}.yaml"))
    p = dataclasses.replace(p, loop=dataclasses.replace(p.loop, trip_count=trip, min_trip_count=tmin))
    g = build_graph(p)
    return program_text(lower(p, g, schedule_from_pins(p, g)))


@pytest.mark.parametrize("name,trip,tmin", SHORT, ids=lambda x: str(x))
def test_golden_short_loops(name: str, trip, tmin: int, update_golden: bool) -> None:
    """RFC 0077's examples lowered for loops that may be shorter than the pipeline."""
    tag = f"T{tmin}" if isinstance(trip, str) else f"{trip}"
    check_golden(GOLDEN / "short" / f"{name}-{tag}" / "program.txt", _short_text(name, trip, tmin), update_golden)


def test_short_loop_listing() -> None:
    """The prologue and body extents name min/max only where the loop may be short; the
    epilogue guards test T."""
    text = _short_text("rfc0077-gemm", "T", 1)
    assert "for i in range(min(T, 3)):" in text and "for i in range(max(T - 3, 0)):" in text
    assert "    if 2 <= i + T && i < 2:\n        async_wait_queue(0, 1 - i):" in text
    assert "(trip count at least 1)" in text.splitlines()[0]
    fixed = _short_text("rfc0077-gemm", 2, 2)
    assert "# Body" not in fixed and "for i in range(2):" in fixed and "    if 1 <= i:\n" in fixed


@pytest.mark.parametrize("k_pipe_mmas", [0, 1, 2, 3])
def test_hopper_wait_group_counts_print_as_non_negative_counts(k_pipe_mmas):
    """program.txt of a Hopper program once printed ``wgmma.wait_group -i`` in a one-iteration epilogue
    (it is 0 there) and ``-i + 1`` in a two-iteration one: a count is a non-negative value or reads as one
    (``1 - i``), and it equals the program's own expression at every iteration of its part."""
    import re

    from synth.hopper.kernel_design import KernelDesign
    from synth.expr import evaluate, parse
    from synth.hopper.printer import hopper_text

    prog = design_program(KernelDesign.of(bm=128, bn=128, stages=5, k_pipe_mmas=k_pipe_mmas))
    text = hopper_text(prog)
    counts = re.findall(r"wgmma\.wait_group (.+)$", text, re.M)
    assert counts and all(not c.lstrip().startswith("-") for c in counts), counts
    role = next(r for r in prog.roles if any(w for w in r.program.waits))
    for part in role.program.parts:
        for st in part.stmts:
            if type(st).__name__ == "WaitStmt":
                shown = re.search(rf"{part.name}: for .*?wgmma\.wait_group ([^\n]+)", text, re.S).group(1)
                e = role.program.waits[st.wait].in_flight
                n = evaluate(part.extent, {"T": 8})
                for i in range(n):
                    got = evaluate(parse(shown), {part.var: i})
                    assert got == evaluate(e, {part.var: i, "T": 8}) and got >= 0, (part.name, shown, i)


def test_check_verdicts_say_which_of_two_mutually_subsuming_waits_may_go():
    """Triton's matmul has two back-to-back waits: one with nothing charged to it ("redundant"), the other
    "subsumed by" the first. Read alone the two verdicts say both could go; the rendering says one of the
    two may go while the other stays, not both."""
    import re

    from synth.frontends.check import check_file

    res = check_file(str(ROOT / "tests" / "check_inputs" / "triton-matmul-s3.ttgir"))
    text = res.render()
    blocks = re.split(r"\n  (?=wait #)", text.split("\n  ops (")[0])
    by = {int(re.match(r"wait #(\d+)", b).group(1)): b for b in blocks[1:]}
    pairs = [(i, int(m.group(1))) for i, b in by.items() for m in [re.search(r"subsumed by wait #(\d+)", b)] if m]
    assert pairs, text
    for i, k in pairs:
        assert f"may be removed while wait #{k} stays" in by[i], by[i]
        if "not tight" in by[k]:
            assert f"wait #{i} is subsumed by this one: remove one of the two, not both" in by[k], by[k]

"""The dependence graph (``synth.graph``): edges from reads/writes and deps, cycles, pins."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from synth.errors import Loc, SynthError
from synth.graph import Edge, build_graph, check_pins, describe
from synth.load import load_problem, load_problem_text
from synth.problem import Pins

ROOT = pathlib.Path(__file__).resolve().parent.parent


def problem(ops: str, buffers: str, extra: str = "", units: str = "{dma: {async: true}, alu: {}}"):
    text = (f"name: g\nloop: {{var: k, trip_count: 16}}\nbuffers:\n{buffers}ops:\n{ops}"
            f"target:\n  shared_bytes: 65536\n  units: {units}\n{extra}")
    return load_problem_text(text, "g.yaml")


def edges(p, kind: str | None = None) -> set[tuple[str, str, int, int, str | None, bool]]:
    """Edges as (src, dst, distance, latency, buffer, buffered), by op name."""
    g = build_graph(p)
    return {(p.ops[e.src].name, p.ops[e.dst].name, e.distance, e.latency, e.buffer, e.buffered)
            for e in g.edges if kind is None or e.kind == kind}


PRODUCER_CONSUMER = dict(
    buffers="  X: {space: shared, bytes: 64}\n",
    ops="  - {name: produce, unit: dma, writes: [X], latency: 100}\n"
        "  - {name: consume, unit: alu, reads: [X], latency: 4}\n",
)


def test_raw_same_iteration_is_distance_0():
    p = problem(**PRODUCER_CONSUMER)
    assert edges(p, "raw") == {("produce", "consume", 0, 100, "X", False)}
    # The next iteration's write must not clobber X before it is read: multi-buffering removes it.
    assert edges(p, "war") == {("consume", "produce", 1, 0, "X", True)}
    assert build_graph(p).constraints() == tuple(e for e in build_graph(p).edges if e.kind == "raw")


def test_raw_read_before_write_is_distance_1():
    p = problem(buffers="  X: {space: shared, bytes: 64}\n",
                ops="  - {name: consume, unit: alu, reads: [X], latency: 4}\n"
                    "  - {name: produce, unit: dma, writes: [X], latency: 100}\n")
    assert edges(p, "raw") == {("produce", "consume", 1, 100, "X", False)}
    # consume (iteration v) reads the version produce writes later in v: WAR in the same iteration.
    assert edges(p, "war") == {("consume", "produce", 0, 0, "X", True)}


def test_carried_accumulator_self_edges_and_hard_war():
    p = load_problem(str(ROOT / "problems" / "rfc0077-gemm.yaml"))
    raw = edges(p, "raw")
    assert ("mma", "mma", 1, 64, "C_r", False) in raw
    assert ("load_A", "s2r_A", 0, 500, "A_s", False) in raw
    assert ("s2r_B", "mma", 0, 30, "B_r", False) in raw
    war = edges(p, "war")
    assert ("mma", "mma", 1, 0, "C_r", False) in war  # carried: a real constraint
    assert ("s2r_A", "load_A", 1, 0, "A_s", True) in war  # multi-bufferable: not a constraint
    hard = {(p.ops[e.src].name, p.ops[e.dst].name, e.kind) for e in build_graph(p).constraints()}
    assert hard == {("load_A", "s2r_A", "raw"), ("load_B", "s2r_B", "raw"), ("s2r_A", "mma", "raw"),
                    ("s2r_B", "mma", "raw"), ("mma", "mma", "raw"), ("mma", "mma", "war")}


def test_carried_buffer_with_two_writers_gets_waw_and_war_edges():
    p = problem(buffers="  X: {space: shared, bytes: 64}\n  C: {space: register, bytes: 64, carried: true}\n",
                ops="  - {name: load, unit: dma, writes: [X], latency: 100}\n"
                    "  - {name: acc1, unit: alu, reads: [X, C], writes: [C], latency: 4}\n"
                    "  - {name: acc2, unit: alu, reads: [C], writes: [C], latency: 6}\n")
    assert edges(p, "waw") == {("acc1", "acc2", 0, 0, "C", False), ("acc2", "acc1", 1, 0, "C", False)}
    raw_c = {e for e in edges(p, "raw") if e[4] == "C"}
    assert raw_c == {("acc1", "acc1", 1, 4, "C", False), ("acc2", "acc1", 1, 6, "C", False),
                     ("acc1", "acc2", 0, 4, "C", False), ("acc2", "acc2", 1, 6, "C", False)}
    war_c = {e for e in edges(p, "war") if e[4] == "C"}
    assert all(not buffered for *_, buffered in war_c)
    assert ("acc2", "acc1", 1, 0, "C", False) in war_c  # acc2 of v reads C before acc1 of v+1 writes it


def test_explicit_deps_default_to_producer_latency():
    p = problem(**PRODUCER_CONSUMER, extra="deps:\n  - {from: consume, to: produce, distance: 2}\n"
                                           "  - {from: produce, to: consume, latency: 7}\n")
    assert edges(p, "explicit") == {("consume", "produce", 2, 4, None, False),
                                    ("produce", "consume", 0, 7, None, False)}


def test_edges_are_deduplicated():
    p = problem(buffers="  X: {space: shared, bytes: 64}\n",
                ops="  - {name: produce, unit: dma, writes: [X, X], latency: 100}\n"
                    "  - {name: consume, unit: alu, reads: [X, X], latency: 4}\n")
    g = build_graph(p)
    assert len(g.edges) == len(set(g.edges)) == 2


def test_zero_distance_cycle_is_reported_at_a_dep():
    with pytest.raises(SynthError) as info:
        problem(**PRODUCER_CONSUMER, extra="deps:\n  - {from: consume, to: produce, distance: 0}\n")
    e = info.value
    assert "cycle with zero iteration distance: produce -> consume -> produce" in e.msg
    assert e.loc == Loc("g.yaml", 12, 5) and "distance: 1" in e.fix  # the dep item


def test_zero_distance_self_dep_is_a_cycle():
    with pytest.raises(SynthError) as info:
        problem(**PRODUCER_CONSUMER, extra="deps:\n  - {from: consume, to: consume}\n")
    assert "consume -> consume" in info.value.msg


def test_cycle_with_a_carried_edge_is_fine():
    p = problem(**PRODUCER_CONSUMER, extra="deps:\n  - {from: consume, to: produce, distance: 1}\n")
    assert build_graph(p).n == 2


def test_long_cycle_found_through_raw_edges():
    p = problem(buffers="  X: {space: shared, bytes: 64}\n  Y: {space: shared, bytes: 64}\n",
                ops="  - {name: a, unit: dma, writes: [X], latency: 1}\n"
                    "  - {name: b, unit: alu, reads: [X], writes: [Y], latency: 1}\n"
                    "  - {name: c, unit: alu, reads: [Y], latency: 1}\n")
    bad = dataclasses.replace(p, deps=(_dep("c", "a", 0),))
    with pytest.raises(SynthError) as info:
        build_graph(bad)
    assert "a -> b -> c -> a" in info.value.msg


def _dep(src: str, dst: str, distance: int):
    from synth.problem import Dep

    return Dep(src, dst, distance, None, Loc("g.yaml", 1, 1))


def test_describe():
    p = load_problem(str(ROOT / "problems" / "rfc0077-gemm.yaml"))
    mma = p.op_index("mma")
    assert describe(p, Edge(mma, mma, 1, 64, "raw", "C_r")) == "raw dependence mma->mma on C_r, distance 1"


# --- pins ----------------------------------------------------------------------------------

def _pinned(stage, order=None):
    p = load_problem(str(ROOT / "problems" / "rfc0077-gemm.yaml"))
    pins = Pins(tuple(stage), None if order is None else tuple(order), (0,), None,
                Loc("s.yaml", 30, 3), Loc("s.yaml", 31, 10), Loc("s.yaml", 32, 10))
    return dataclasses.replace(p, pins=pins)


@pytest.mark.parametrize("stage, order", [
    ([0, 0, 2, 3, 3], [0, 1, 3, 2, 4]),  # RFC 0077
    ([0, 0, 0, 3, 3], [0, 1, 2, 3, 4]),  # RFC 0077, the same-stage consumer
    ([0, 0, 1, 1, 1], None),  # free order: producers can be placed first
    ([0, 0, 0, 0, 0], [0, 1, 2, 3, 4]),
    ([0, 0, 1, 1, 2], [4, 3, 2, 1, 0]),  # every producer a stage ahead: any order
])
def test_pins_that_respect_dependences(stage, order):
    p = _pinned(stage, order)
    check_pins(p, build_graph(p))


def test_pin_breaking_a_stage_dependence_points_at_the_stages():
    p = _pinned([0, 0, 2, 3, 2], [0, 1, 3, 2, 4])
    with pytest.raises(SynthError) as info:
        check_pins(p, build_graph(p))
    e = info.value
    assert e.loc == Loc("s.yaml", 31, 10)
    assert "raw dependence s2r_B->mma on B_r, distance 0" in e.msg and "stage 2 of 'mma'" in e.msg
    assert e.fix == "give 'mma' a stage of at least 3"


def test_pin_breaking_an_order_dependence_points_at_the_order():
    p = _pinned([0, 0, 0, 0, 0], [0, 1, 2, 4, 3])
    with pytest.raises(SynthError) as info:
        check_pins(p, build_graph(p))
    e = info.value
    assert e.loc == Loc("s.yaml", 32, 10)
    assert "'mma' is ordered before 's2r_B'" in e.msg
    assert "order 's2r_B' before 'mma'" in e.fix and "stage of at least 1" in e.fix


def test_no_stage_pins_nothing_to_check():
    p = load_problem(str(ROOT / "problems" / "gemm-sm80-f16.yaml"))
    check_pins(p, build_graph(p))


def _chain(n: int, extra: str = ""):
    bufs = "\n".join(f"  B{j}: {{space: register, bytes: 4}}" for j in range(n))
    ops = "\n".join(f"  - {{name: o{j}, unit: alu, {f'reads: [B{j - 1}], ' if j else ''}writes: [B{j}], latency: 1}}"
                    for j in range(n))
    return load_problem_text(f"name: chain\nloop: {{var: i, trip_count: 4}}\nbuffers:\n{bufs}\nops:\n{ops}\n"
                             f"{extra}target:\n  shared_bytes: 0\n  units: {{alu: {{}}}}\n", "c.yaml")


def test_thousand_op_chain_has_no_recursion_limit():
    p = _chain(1000)
    g = build_graph(p)
    assert len(g.raw_edges()) == 999 and g.raw_edges("B5") == (g.raw_edges("B5")[0],)


def test_cycle_through_a_thousand_ops_is_reported():
    with pytest.raises(SynthError) as info:
        _chain(1000, "deps:\n  - {from: o999, to: o0}\n")
    msg = info.value.msg
    assert msg.startswith("dependence cycle with zero iteration distance: o0 -> o1 -> o2")
    assert msg.endswith("o4 -> ... 991 more ... -> o996 -> o997 -> o998 -> o999 -> o0")
    assert info.value.loc.line == 2006  # the dep that closes it

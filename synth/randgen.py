"""Random but valid loop bodies and schedules, for property tests and benchmarks.

:func:`random_problem` writes a GPU-like loop body as ``problem.yaml`` text and
loads it with :func:`synth.load.load_problem_text`, so a generated problem is
validated exactly like a user's file. :func:`random_schedule` draws a random
schedule that respects every hard dependence (stages, order, async stages,
multiplicities), for tests of the lowering and the verifier.

Both are pure functions of their arguments: the same seed gives the same result.

Left out on purpose: explicit ``deps:`` edges with distance 0 (the generated
data flow already has them), and ``schedule:`` pins other than ``max_stage``
(tests pin a solved schedule themselves).
"""

from __future__ import annotations

import random

from .graph import Graph
from . import load  # load.load_problem_text looked up when called (tests replace it)
from .problem import Problem
from .schedule import Schedule, lift_stages, multiplicity, same_step_order

ASYNC_LAT = (200, 700)
"""Latency range of async copies (global -> shared), cycles."""

#: unit -> (latency range, issue range) of the synchronous ops.
SYNC_UNITS = {
    "lsu": ((20, 40), (2, 6)),
    "alu": ((4, 20), (2, 8)),
    "tensor": ((32, 96), (16, 48)),
}


def random_problem(seed: int, n_ops: int, *, async_frac: float = 0.4, predicated: bool = False,
                   symbolic: bool = False, hideable: bool = True, inplace: bool = False) -> Problem:
    """A random valid loop body of ``n_ops`` ops (deterministic in ``seed``).

    Async copies (unit ``cp_async``, sometimes a second async unit ``tma``) write
    shared buffers; ``lsu`` ops read them into register buffers; ``alu`` and
    ``tensor`` ops combine register buffers; the last op is an accumulator
    (``tensor``) that reads and writes a carried buffer. About ``async_frac`` of
    the ops are async copies.

    ``predicated`` puts ``when:`` predicates (affine, such as ``k + 2 < T``, or
    ``opaque``) on some async copies; ``symbolic`` makes the trip count ``T`` with
    a ``min_trip_count``. ``inplace`` turns about half of the async copies into
    in-place updates (the copy also reads the shared buffer it writes, an async
    read-modify-write). ``hideable=False`` adds a pointer-chasing recurrence
    (the next iteration's first copy needs an index computed from this
    iteration's data), so no schedule can hide the copy latency: stalls are forced.
    """
    if n_ops < 1:
        raise ValueError("n_ops must be at least 1")
    rng = random.Random(seed * 1_000_003 + n_ops)
    chase = not hideable and n_ops >= 4
    n_body = n_ops - (1 if chase else 0)  # the index op of the recurrence is extra
    if n_body >= 2:
        n_async = min(max(1, round(n_ops * async_frac)), n_body - 1)
    else:
        n_async = 0
    if chase:
        n_async = min(max(n_async, 1), n_body - 2)  # keep room for an lsu reader and the accumulator
    two_queues = n_async >= 3 and rng.random() < 0.3

    buffers: dict[str, dict] = {}
    ops: list[dict] = []
    trip = "T" if symbolic else rng.choice([16, 32, 64, 128])
    min_trip = rng.randint(3, 8) if symbolic else trip

    # Program order: async copies at random places in the first ~2/3 of the body,
    # the first op always a copy (so sync readers have something to read).
    positions = list(range(max(1, (2 * n_body) // 3)))
    kinds = ["sync"] * n_body
    if n_async:
        chosen = [0] + rng.sample(positions[1:], min(n_async - 1, len(positions) - 1))
        while len(chosen) < n_async:  # not enough room up front: spill after
            chosen.append(next(i for i in range(n_body) if i not in chosen and i < n_body - 1))
        for i in chosen:
            kinds[i] = "async"
    kinds[-1] = "acc"

    shared_written: list[str] = []   # in program order
    reg_written: list[str] = []
    consumed: set[str] = set()
    n_acc = 2 if n_ops >= 12 and rng.random() < 0.5 else 1
    accs = [f"C{i}" for i in range(n_acc)]
    for c in accs:
        buffers[c] = {"space": "register", "bytes": rng.choice([256, 512, 1024]), "carried": True}
    counters = {"load": 0, "s2r": 0, "alu": 0, "mma": 0}

    def new_name(kind: str) -> str:
        counters[kind] += 1
        return f"{kind}_{counters[kind] - 1}"

    def pick_unread(cands: list[str], k: int) -> list[str]:
        fresh = [b for b in cands if b not in consumed]
        pool = fresh[:] if fresh else cands[:]
        rng.shuffle(pool)
        return sorted(pool[:k], key=cands.index)

    for kind in kinds:
        if kind == "async":
            i = len(shared_written)
            buf = f"S{i}"
            buffers[buf] = {"space": "shared", "bytes": rng.choice([1024, 2048, 4096, 8192])}
            unit = "tma" if two_queues and rng.random() < 0.4 else "cp_async"
            op = {"name": new_name("load"), "unit": unit, "writes": [buf],
                  "latency": rng.randint(*ASYNC_LAT), "issue": rng.randint(2, 8)}
            if predicated and rng.random() < 0.5:
                op["when"] = _predicate(rng, trip)
            ops.append(op)
            shared_written.append(buf)
        elif kind == "sync":
            unread_shared = [b for b in shared_written if b not in consumed]
            if unread_shared or not reg_written:
                if not shared_written:  # nothing to read yet: an alu op producing a register value
                    unit, reads = "alu", []
                else:
                    unit, reads = "lsu", pick_unread(shared_written, 1)
            else:
                unit = rng.choice(["alu", "tensor", "lsu"]) if shared_written else rng.choice(["alu", "tensor"])
                if unit == "lsu":
                    reads = pick_unread(shared_written, 1)
                else:
                    reads = pick_unread(reg_written, rng.randint(1, 2))
            buf = f"R{len(reg_written)}"
            buffers[buf] = {"space": "register", "bytes": rng.choice([32, 64, 128, 256])}
            (lat_lo, lat_hi), (is_lo, is_hi) = SYNC_UNITS[unit]
            kname = {"lsu": "s2r", "alu": "alu", "tensor": "mma"}[unit]
            ops.append({"name": new_name(kname), "unit": unit, "reads": reads, "writes": [buf],
                        "latency": rng.randint(lat_lo, lat_hi), "issue": rng.randint(is_lo, is_hi)})
            consumed.update(reads)
            reg_written.append(buf)
        else:  # the accumulator(s): read every value nobody read yet
            left = [b for b in shared_written + reg_written if b not in consumed]
            if not left and reg_written:
                left = [reg_written[-1]]
            lat = rng.randint(32, 96)
            issue = rng.randint(16, 48)
            if hideable:
                lat = min(lat, 2 * issue)  # a short accumulator recurrence
            reads = left + accs[:1]
            ops.append({"name": new_name("mma"), "unit": "tensor", "reads": reads, "writes": accs[:1],
                        "latency": lat, "issue": issue})
            consumed.update(left)

    if n_acc == 2:
        # A second accumulator, updated by a sync op in the middle of the body.
        cands = [o for o in ops if o["unit"] in ("alu", "tensor") and o is not ops[-1]]
        if cands:
            o = rng.choice(cands)
            o["reads"] = list(o["reads"]) + ["C1"]
            o["writes"] = list(o["writes"]) + ["C1"]
        else:
            del buffers["C1"]

    if inplace:
        copies = [o for o in ops if o["unit"] in ("cp_async", "tma")]
        for o in copies:
            if rng.random() < 0.5:
                o["reads"] = list(o.get("reads", ())) + list(o["writes"])

    if chase:
        # next_idx reads data derived from the first copy and feeds the next
        # iteration's first copy: load_0 -> s2r -> next_idx -> load_0 (distance 1).
        first = next(o for o in ops if o["unit"] in ("cp_async", "tma"))
        reader = next((o for o in ops if first["writes"][0] in o.get("reads", ()) and o["unit"] == "lsu"), None)
        src = reader["writes"][0] if reader else first["writes"][0]
        buffers["IDX"] = {"space": "register", "bytes": 16}
        idx_op = {"name": "next_idx", "unit": "alu", "reads": [src], "writes": ["IDX"],
                  "latency": rng.randint(4, 12), "issue": 2}
        ops.insert(len(ops) - 1, idx_op)
        first["reads"] = ["IDX"]

    shared = sum(b["bytes"] for b in buffers.values() if b["space"] == "shared")
    regs = sum(b["bytes"] for b in buffers.values() if b["space"] == "register")
    target_shared = max(shared, 1024) * rng.choice([2, 3, 4, 6])
    regs_line = f"\n  registers_bytes: {regs * rng.choice([3, 4, 8])}" if rng.random() < 0.5 else ""
    units = ["    cp_async: {async: true}"]
    if two_queues and any(o["unit"] == "tma" for o in ops):
        units.append("    tma: {async: true}")
    lsu_count = rng.choice([1, 1, 2])
    units += [f"    lsu: {{count: {lsu_count}}}" if lsu_count > 1 else "    lsu: {}",
              "    alu: {}", "    tensor: {}"]
    loop = (f"loop: {{var: k, trip_count: T, min_trip_count: {min_trip}}}" if symbolic
            else f"loop: {{var: k, trip_count: {trip}}}")
    lines = [f"name: rand-{seed}-{n_ops}{'-stall' if chase else ''}", loop, "buffers:"]
    for name, b in buffers.items():
        extra = ", carried: true" if b.get("carried") else ""
        lines.append(f"  {name}: {{space: {b['space']}, bytes: {b['bytes']}{extra}}}")
    lines.append("ops:")
    for o in ops:
        parts = [f"name: {o['name']}", f"unit: {o['unit']}"]
        if o.get("reads"):
            parts.append(f"reads: [{', '.join(o['reads'])}]")
        if o.get("writes"):
            parts.append(f"writes: [{', '.join(o['writes'])}]")
        parts += [f"latency: {o['latency']}", f"issue: {o['issue']}"]
        if "when" in o:
            parts.append(f"when: \"{o['when']}\"")
        lines.append(f"  - {{{', '.join(parts)}}}")
    lines.append("target:")
    lines.append(f"  shared_bytes: {target_shared}{regs_line}")
    lines.append("  units:")
    lines += units
    return load.load_problem_text("\n".join(lines) + "\n", f"<random {seed}/{n_ops}>")


def _predicate(rng: random.Random, trip: int | str) -> str:
    t = str(trip)
    return rng.choice([f"k + 2 < {t}", f"k + 1 < {t}", "k >= 1", "opaque", f"k + 3 < {t}"])


def random_schedule(problem: Problem, graph: Graph, seed: int, max_stage: int = 3) -> Schedule:
    """A random schedule satisfying every hard edge of ``graph`` (deterministic in ``seed``).

    Stages lie in ``0..S`` with ``S = min(max_stage, min_trip_count - 1, pins.max_stage)``;
    pinned stages, order and async stages are kept. For each edge ``a -> b`` with
    distance ``d``: ``s_b + d - s_a >= 0``, and when that is 0, ``a`` comes first
    in the body. A random set of stages is made async (ops of async units in
    those stages run async). Multiplicities are the least that
    :func:`synth.schedule.multiplicity` allows; shared-memory capacity is NOT
    enforced (``check_schedule`` may report it), everything else passes.
    """
    rng = random.Random(seed)
    n = len(problem.ops)
    pins = problem.pins
    top = min(max_stage, problem.loop.min_trip_count - 1)
    if pins.max_stage is not None:
        top = min(top, pins.max_stage)
    top = max(top, 0)
    edges = graph.constraints()
    if pins.stage is not None:
        stage = list(pins.stage)
    else:
        stage = [rng.randint(0, top) for _ in range(n)]
        stage = lift_stages(edges, stage, pins.order)
        if max(stage) > top:
            raise ValueError(f"no schedule of {problem.name} fits in {top + 1} stages with its pinned order")
    if pins.order is not None:
        order = list(pins.order)
    else:
        # Random topological order of the edges that stay inside one pipelined step.
        found = same_step_order(edges, stage, pick=lambda ready: rng.randrange(len(ready)))
        assert found is not None, "zero-distance cycle slipped through graph checks"
        order = list(found)
    used = sorted(set(stage))
    if pins.async_stages is not None:
        astages = set(pins.async_stages)
    else:
        astages = {s for s in used if rng.random() < 0.6}
    is_async = tuple(stage[i] in astages and problem.queue_of_unit(op.unit) is not None
                     for i, op in enumerate(problem.ops))
    queue = tuple(problem.queue_of_unit(op.unit) if a else None for op, a in zip(problem.ops, is_async))
    mult = multiplicity(problem, graph, tuple(stage), tuple(order), is_async)
    return Schedule(problem.name, tuple(stage), tuple(order), is_async, queue, mult)


__all__ = ["random_problem", "random_schedule"]

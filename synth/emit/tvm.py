"""A schedule as TVM TensorIR software-pipelining annotations (RFC 0077).

Input: a :class:`~synth.problem.Problem` and a :class:`~synth.schedule.Schedule`.
Output: Python lines a TVM user pastes after getting the loop (``k = sch.get_loops(...)[i]``)::

    sch.annotate(k, ann_key="software_pipeline_stage", ann_val=[0, 0, 2, 3, 3])
    sch.annotate(k, ann_key="software_pipeline_order", ann_val=[0, 1, 3, 2, 4])
    sch.annotate(k, ann_key="software_pipeline_async_stages", ann_val=[0])

under a comment header naming the problem, the ops in program order (TVM's lists
are indexed by the loop body's statements in that order) and the pipelined body
order. Left out on purpose: TVM computes the buffer versions itself, and numbers
its async queues by stage, so synth's queue per async unit is only stated in
the header (with a note where the two numberings differ).
"""

from __future__ import annotations

from ..problem import Problem
from ..schedule import Schedule

STAGE_KEY = "software_pipeline_stage"
ORDER_KEY = "software_pipeline_order"
ASYNC_KEY = "software_pipeline_async_stages"


def tvm_annotations(problem: Problem, schedule: Schedule, loop: str = "k") -> str:
    """The ``sch.annotate`` lines for ``schedule`` on the loop handle named ``loop``."""
    n = len(problem.ops)
    if len(schedule.stage) != n or len(schedule.order) != n:
        raise ValueError(f"schedule has {len(schedule.stage)} stages and {len(schedule.order)} orders "
                         f"for the {n} ops of {problem.name}")
    if not loop.strip() or "\n" in loop:
        raise ValueError(f"loop handle {loop!r} is not a Python expression")
    names = [op.name for op in problem.ops]
    width = max(len(x) for x in names)
    lines = [
        f"# synth: software pipeline of problem '{problem.name}' "
        f"(loop {problem.loop.var}, trip count {problem.loop.trip_count})",
        "# TVM TensorIR annotations (RFC 0077); one entry per statement of the loop body, in program order:",
    ]
    for i, op in enumerate(problem.ops):
        mode = f"async, queue {schedule.queue[i]}" if schedule.is_async[i] else "sync"
        lines.append(f"#   {i}: {op.name:<{width}}  stage {schedule.stage[i]}  order {schedule.order[i]}  "
                     f"{op.unit} ({mode})")
    lines.append(f"# pipelined body order: {', '.join(names[i] for i in schedule.body_order())}")
    if schedule.multiplicity:
        lines.append("# buffer versions: " + ", ".join(f"{b} x{m}" for b, m in schedule.multiplicity))
    note = _queue_note(problem, schedule)
    if note:
        lines.append(f"# note: {note}")
    split = split_note(problem)
    if split:
        lines.append(f"# {split}")
    lines.append(_annotate(loop, STAGE_KEY, schedule.stage))
    lines.append(_annotate(loop, ORDER_KEY, schedule.order))
    if schedule.async_stages:
        lines.append(_annotate(loop, ASYNC_KEY, schedule.async_stages))
    else:
        lines.append("# no async stages: every op runs synchronously")
    return "\n".join(lines) + "\n"


def split_note(problem: Problem) -> str:
    """For a ``split_k: S > 1`` or ``stream_k: true`` gemm problem, what the pipelined loop is a part of
    (else empty)."""
    if getattr(problem.gemm, "stream_k", False):
        return ("stream-K: a CTA runs this loop once per segment, over its share of one tile's k-tiles (any count "
                "from 1); the trip count is the segment's, and the tile's partial sums meet after the loop "
                "(CUTLASS's DecompositionMode::StreamK is the nearest)")
    S = getattr(problem.gemm, "split_k", 1)
    if S <= 1:
        return ""
    return (f"split-K: the kernel splits K into {S} parts (gridDim.z); this is the loop of one part: split the k "
            f"loop by [{S}, None] (rfactor, or bind the outer loop to blockIdx.z) and pipeline the inner one")


def _annotate(loop: str, key: str, values: tuple[int, ...]) -> str:
    return f'sch.annotate({loop}, ann_key="{key}", ann_val=[{", ".join(str(v) for v in values)}])'


def _queue_note(problem: Problem, schedule: Schedule) -> str:
    """Where TVM's one-queue-per-async-stage differs from synth's one queue per async unit."""
    queues_of_stage: dict[int, set[int]] = {}
    for s, a, q in zip(schedule.stage, schedule.is_async, schedule.queue):
        if a and q is not None:
            queues_of_stage.setdefault(s, set()).add(q)
    stages_of_queue: dict[int, set[int]] = {}
    for s, qs in queues_of_stage.items():
        for q in qs:
            stages_of_queue.setdefault(q, set()).add(s)
    mixed = [s for s, qs in queues_of_stage.items() if len(qs) > 1]
    split = [q for q, ss in stages_of_queue.items() if len(ss) > 1]
    if not mixed and not split:
        return ""
    units = problem.target.async_units
    parts = []
    if mixed:
        parts.append(f"stage {mixed[0]} holds ops of several async units, which synth keeps on separate queues")
    if split:
        parts.append(f"unit {units[split[0]]} is async in several stages, which synth keeps on one queue")
    return "; ".join(parts) + " (TVM numbers its queues by stage, so its waits are counted differently)"

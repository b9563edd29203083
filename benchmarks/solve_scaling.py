"""How solve time and quality scale with the body size, against two baselines.

For random loop bodies of 5, 10, 20, 50 and 100 ops (latency hideable, and
stall-bound: a pointer-chasing recurrence through an async copy) and for the
examples in problems/: CP-SAT solve time, status, gap to the proven bound,
the objective (cycles for a static trip count, cycles per iteration = II for a
symbolic one), the resource/recurrence lower bound, and two baselines timed by
the independent simulator in the same run:

* ``stage 0``: everything in stage 0 (no pipelining; copies async when that is better);
* ``N ahead``: the best uniform "every async copy N stages ahead" schedule,
  N = 2..5, as CUTLASS multistage kernels do (``-`` when none fits).

``--phases`` prints instead the CPU time of the phases after the solve that grow with the
input (docs/commands.md quotes them): lowering and proving the 120-op body under the
schedule CP-SAT chose for it (``tests/golden/lower_perf/rand-1-120.schedule.json``), lowering
random 300- and 500-op bodies, and emitting ``kernel.cu`` for GEMMs with growing ``min_k_tiles``.

Usage: ``python benchmarks/solve_scaling.py [--time-limit 60] [--workers 2] [--quick] [--phases]``.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from synth.errors import SynthError  # noqa: E402
from synth.graph import build_graph  # noqa: E402
from synth.load import load_problem  # noqa: E402
from synth.model import heuristic_schedules, solve  # noqa: E402
from synth.problem import Problem  # noqa: E402
from synth.randgen import random_problem  # noqa: E402


def _value(problem: Problem, timing) -> int:
    return timing.ii if problem.loop.symbolic else timing.cycles


def row(problem: Problem, label: str, time_limit: float, workers: int) -> list[str]:
    g = build_graph(problem)
    t0 = time.perf_counter()
    try:
        s = solve(problem, g, time_limit=time_limit, workers=workers)
    except SynthError as exc:
        return [label, str(len(problem.ops)), f"{time.perf_counter() - t0:.2f}", type(exc).__name__,
                "", "", "", "", "", ""]
    wall = time.perf_counter() - t0
    info = s.info
    assert info is not None and s.timing is not None
    obj = _value(problem, s.timing)
    def best(ns: range) -> tuple[int, int] | None:
        """(value, N) of the best uniform schedule with N in ``ns``, by the simulator."""
        out = None
        for n in ns:
            for h in heuristic_schedules(problem, g, range(n, n + 1)):
                assert h.timing is not None
                v = _value(problem, h.timing)
                out = (v, n) if out is None or v < out[0] else out
        return out

    def vs(b: tuple[int, int] | None, show_n: bool) -> str:
        if b is None:
            return "-"
        return f"{b[0]} ({b[0] / obj:.2f}x)" + (f" N={b[1]}" if show_n else "")

    unit = "/iter" if problem.loop.symbolic else ""
    pinned = " (pinned)" if problem.pins.stage is not None else ""
    base = ["n/a", "n/a"] if pinned else [vs(best(range(0, 1)), False), vs(best(range(2, 6)), True)]
    return [label + pinned, str(len(problem.ops)), f"{wall:.2f}", info.status, f"{100 * info.gap:.1f}%",
            f"{obj}{unit}", str(info.lower_bound), f"II={s.timing.ii} S={s.max_stage}", *base]


def _cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def phases_table() -> Table:
    """CPU seconds of lowering, proving and emitting on inputs that make them long."""
    from synth.emit.cuda import emit_kernel
    from synth.load import load_problem_text
    from synth.lower import lower
    from synth.randgen import random_schedule
    from synth.schedule import read_schedule_json, schedule_from_json, schedule_from_pins
    from synth.verify import verify_program

    table = Table(title="phase costs that grow with the input (CPU seconds, one core)")
    for col in ("phase", "input", "CPU s"):
        table.add_column(col, justify="left" if col != "CPU s" else "right")
    p = random_problem(1, 120)
    g = build_graph(p)
    s = schedule_from_json(p, read_schedule_json(str(ROOT / "tests/golden/lower_perf/rand-1-120.schedule.json")))
    prog, secs = _cpu(lambda: lower(p, g, s))
    table.add_row("lower", "120 ops, randgen seed 1, CP-SAT's schedule", f"{secs:.2f}")
    _, secs = _cpu(lambda: verify_program(prog, time_limit=60))
    table.add_row("prove (tightness included)", f"the same, {len(prog.waits)} waits", f"{secs:.2f}")
    for seed, n in ((5, 300), (7, 500)):
        q = random_problem(seed, n)
        gq = build_graph(q)
        sq = random_schedule(q, gq, seed)
        _, secs = _cpu(lambda: lower(q, gq, sq))
        table.add_row("lower", f"{n} ops, randgen seed {seed}, random schedule", f"{secs:.2f}")
    for mk in (100, 3000, 31250):
        q = load_problem_text(f"name: bigk\nkind: gemm\nshape: {{M: 128, N: 128, K: {32 * mk}}}\ndtype: f16\n"
                              "tile: {BM: 128, BN: 128, BK: 32}\nwarps: 4\nstages: 3\narch: sm_80\n"
                              f"min_k_tiles: {mk}\n", "bigk.yaml")
        gq = build_graph(q)
        sq = schedule_from_pins(q, gq)
        pq = lower(q, gq, sq)
        _, secs = _cpu(lambda: emit_kernel(q, sq, pq))
        table.add_row("emit kernel.cu", f"GEMM 128x128x32, 3 stages, min_k_tiles {mk}", f"{secs:.3f}")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="5..20 ops, one seed, 10 s limit")
    ap.add_argument("--seeds", type=int, default=2, help="random bodies per size and kind")
    ap.add_argument("--phases", action="store_true", help="the CPU time of lowering, proving and emitting on "
                    "inputs that make them long, instead of the solve table")
    args = ap.parse_args(argv)
    if args.phases:
        Console(width=200).print(phases_table())
        return 0
    sizes = [5, 10, 20] if args.quick else [5, 10, 20, 50, 100]
    seeds = 1 if args.quick else args.seeds
    limit = min(args.time_limit, 10.0) if args.quick else args.time_limit
    console = Console(width=200)
    table = Table(title=f"synth solve scaling (time limit {limit:g} s, {args.workers} workers)")
    for col in ("problem", "ops", "time s", "status", "gap", "objective", "lower bound", "schedule",
                "stage 0 (no pipelining)", "best N ahead (N=2..5)"):
        table.add_column(col, justify="left" if col in ("problem", "status", "schedule") else "right")
    jobs: list[tuple[str, Problem]] = []
    for n in sizes:
        for seed in range(seeds):
            jobs.append((f"random {n} hideable #{seed}", random_problem(seed, n)))
            jobs.append((f"random {n} stall #{seed}", random_problem(seed, n, hideable=False)))
    for path in sorted((ROOT / "problems").glob("*.yaml")):
        text = path.read_text()
        if not re.search(r"^name:", text, re.M):
            continue
        try:
            jobs.append((path.stem, load_problem(str(path))))
        except SynthError as exc:
            console.print(f"[yellow]skipping {path.name}: {exc.msg}")
    for label, p in jobs:
        table.add_row(*row(p, label, limit, args.workers))
        console.print(f"[dim]done {label}", highlight=False)
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

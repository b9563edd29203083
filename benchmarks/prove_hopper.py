"""Proof time of every shipped Hopper design: what ``synth solve`` proves, per proof phase.

Usage::

    python benchmarks/prove_hopper.py                 # the table (CPU seconds; wall beside them)
    python benchmarks/prove_hopper.py --solve         # also the whole 'synth solve' of each (certificate included)
    python benchmarks/prove_hopper.py --quick         # the flagship and one design of each kind
    python benchmarks/prove_hopper.py --json out.json

Each design runs in a process of its own (as ``synth solve`` does: nothing proven by an earlier design is
reused). The designs: one CTA per tile, persistent, ping-pong, TMA store, 2x1 and 1x2 clusters, persistent clusters
with and without the TMA store, at the tiles ``synth search gemm --arch sm_90`` ranks first at 4096^3 and 8192^3
(persistent 2x1 cluster 128x256x64, 4 stages; 128x240 with the TMA store), and the winners the search ranks first
at other shapes with the most stages (ping-pong 64x16 with 16 stages at 16384x16x4096, one CTA per tile 64x16 with
16 stages and 16 K splits at 64x16x65536, 128x16 with 12 stages, the 1x2 cluster 64x128 and the 2x1 cluster 128x64
with 8 stages at 64x16384x65536 and 16384x64x65536). For each: ``run_hopper`` (choose, lower, prove, emit), every
proof phase with its obligations and Z3 queries, the proof's CPU seconds (``time.process_time``: Z3 runs in the
process, one thread) and wall seconds; with ``--solve`` the whole ``synth solve`` (its certificate's Z3 and cvc5
re-check and the timeline included) in wall and CPU seconds.

Targets (checked at the end, exit 1 when missed): every design's proof under 15 CPU s on the shared 2-core
machine; the default ``--time-limit`` of each ``synth search --top`` folder's solve (docs/commands.md) at least 3x
the slowest ``run_hopper`` wall time, and, with ``--solve``, ``synth solve``'s default at least 3x the slowest
whole solve's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TARGET_CPU_S = 15.0
MARGIN = 3.0
SOLVE_LIMIT_S = 60.0
"""``synth solve``'s default ``--time-limit`` (docs/commands.md)."""
TOP_LIMIT_S = 30.0
"""``synth search --top``'s default ``--time-limit``, each folder's solve (docs/commands.md)."""

S8192 = (8192, 8192, 8192)
# name, shape, tile (BM, BN), stages, k_pipe_mmas, design keys
DESIGNS = [
    ("one tile", S8192, (128, 256), 4, 1, {}),
    ("persistent", S8192, (128, 256), 4, 1, {"persistent": "true"}),
    ("ping-pong", S8192, (128, 128), 5, 1, {"pingpong": "true"}),
    ("TMA store", S8192, (128, 256), 4, 1, {"epilogue": "tma_store"}),
    ("persistent + TMA store", S8192, (128, 256), 4, 1, {"persistent": "true", "epilogue": "tma_store"}),
    ("cluster 2x1", S8192, (128, 256), 4, 1, {"cluster": "2x1"}),
    ("cluster 1x2", S8192, (128, 256), 4, 1, {"cluster": "1x2"}),
    ("persistent cluster 2x1 (flagship)", S8192, (128, 256), 4, 1, {"persistent": "true", "cluster": "2x1"}),
    ("persistent cluster 2x1 + TMA store", S8192, (128, 240), 4, 1,
     {"persistent": "true", "cluster": "2x1", "epilogue": "tma_store"}),
    ("persistent cluster 1x2", S8192, (128, 256), 4, 1, {"persistent": "true", "cluster": "1x2"}),
    ("ping-pong, 16 stages", (16384, 16, 4096), (64, 16), 16, 1, {"pingpong": "true"}),
    ("ping-pong, K_PIPE 0", (16384, 64, 256), (64, 32), 5, 0, {"pingpong": "true"}),
    ("one tile, 16 stages, 16 K splits", (64, 16, 65536), (64, 16), 16, 1, {"split_k": 16}),
    ("one tile, 12 stages", (16384, 16, 65536), (128, 16), 12, 1, {}),
    ("cluster 1x2, 8 stages", (64, 16384, 65536), (64, 128), 8, 1, {"cluster": "1x2"}),
    ("cluster 2x1, 8 stages", (16384, 64, 65536), (128, 64), 8, 1, {"cluster": "2x1"}),
    ("persistent cluster 2x1, 16 stages (not ranked first)", S8192, (64, 16), 16, 1,
     {"persistent": "true", "cluster": "2x1"}),
]
QUICK = {"one tile", "persistent", "ping-pong", "TMA store", "cluster 2x1", "persistent cluster 2x1 (flagship)",
         "persistent cluster 2x1 + TMA store", "ping-pong, 16 stages"}


def slug(label: str) -> str:
    return "bench_" + "".join(c if c.isalnum() else "_" for c in label)[:48].strip("_")


def problem_text(name: str, shape, tile, stages: int, kpipe: int, keys: dict) -> str:
    lines = [f"name: {name}", "kind: gemm", f"shape: {{M: {shape[0]}, N: {shape[1]}, K: {shape[2]}}}", "dtype: f16",
             f"tile: {{BM: {tile[0]}, BN: {tile[1]}, BK: 64}}", "arch: sm_90", "mainloop: tma_wgmma",
             f"stages: {stages}", f"k_pipe_mmas: {kpipe}"]
    lines += [f"{k}: {v}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


class _Phase:
    def __init__(self, name, obligations, proven, seconds, queries=None):
        self.name, self.obligations, self.proven = name, obligations, proven
        self.seconds, self.queries = seconds, queries


def measure_one(index: int) -> dict:
    """One design, in this process: run_hopper with every proof phase timed."""
    from synth.deadline import Deadline
    from synth.errors import SynthError
    from synth.flow.hopper import run_hopper
    from synth.load import load_problem_text

    label, shape, tile, stages, kpipe, keys = DESIGNS[index]
    g = load_problem_text(problem_text(slug(label), shape, tile, stages, kpipe, keys))
    cpu: dict[str, float] = {}
    start: dict[str, float] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if done == 0:
            start[phase] = time.process_time()
        else:
            cpu[phase] = cpu.get(phase, 0.0) + time.process_time() - start.pop(phase)

    w0, c0 = time.perf_counter(), time.process_time()
    row = {"design": label, "shape": "x".join(map(str, shape)), "tile": f"{tile[0]}x{tile[1]}x64"}
    try:
        res = run_hopper(g, deadline=Deadline.after(3600.0), progress=progress)
    except SynthError as e:  # not proven (an unknown query, a refutation): the row says so, with its time
        wall, total_cpu = time.perf_counter() - w0, time.process_time() - c0
        return {**row, "stages": stages, "k_pipe_mmas": kpipe, "proven": False, "obligations": 0, "queries": 0,
                "proofs": [], "error": e.msg.splitlines()[0],
                "prove_cpu_s": round(sum(v for k, v in cpu.items() if k.startswith("prove"))
                                     + sum(time.process_time() - t for k, t in start.items()
                                           if k.startswith("prove")), 2),
                "prove_wall_s": round(wall, 2), "run_cpu_s": round(total_cpu, 2), "run_wall_s": round(wall, 2)}
    wall, total_cpu = time.perf_counter() - w0, time.process_time() - c0
    proofs = getattr(res.report, "proofs", ()) or [  # (a report from before the proof phases were named)
        _Phase("program", len(res.report.obligations), sum(o.status == "proven" for o in res.report.obligations),
               res.report.seconds)]
    return {**row, "stages": res.choice.stages, "k_pipe_mmas": res.choice.k_pipe_mmas, "proven": bool(res.proven),
            "obligations": sum(p.obligations for p in proofs),
            "queries": sum(p.queries or 0 for p in proofs),
            "proofs": [{"name": p.name, "obligations": p.obligations, "proven": p.proven, "queries": p.queries,
                        "seconds": round(p.seconds, 3)} for p in proofs],
            "prove_cpu_s": round(sum(v for k, v in cpu.items() if k.startswith("prove")), 2),
            "prove_wall_s": round(sum(s for n, s in res.phases if n.startswith("prove")), 2),
            "run_cpu_s": round(total_cpu, 2), "run_wall_s": round(wall, 2)}


def solve_one(index: int) -> dict:
    """The whole ``synth solve`` of one design (a process of its own), wall and CPU seconds."""
    label, shape, tile, stages, kpipe, keys = DESIGNS[index]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "problem.yaml")
        with open(path, "w") as f:
            f.write(problem_text(slug(label), shape, tile, stages, kpipe, keys))
        r0 = os.times()
        w0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "synth", "solve", path, "--out", os.path.join(d, "out"),
                            "--time-limit", "3600", "--json"], cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - w0
        r1 = os.times()
    env = json.loads(p.stdout)
    return {"solve_ok": p.returncode == 0, "solve_wall_s": round(wall, 2),
            "solve_cpu_s": round((r1.children_user - r0.children_user) + (r1.children_system - r0.children_system), 2),
            "solve_phases": {ph["name"]: ph["seconds"] for ph in (env.get("result") or {}).get("phases", [])}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the flagship and one design of each kind")
    ap.add_argument("--only", default="", help="designs whose name contains this text")
    ap.add_argument("--solve", action="store_true", help="also time each design's whole 'synth solve'")
    ap.add_argument("--json", default="", help="write the rows to this file")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:  # a child: one design, its row as JSON on stdout
        print(json.dumps(measure_one(args.one)))
        return 0
    from rich.console import Console
    from rich.table import Table

    rows = []
    for i, (label, *_) in enumerate(DESIGNS):
        if (args.quick and label not in QUICK) or args.only not in label:
            continue
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(i)], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 2
        row = json.loads(p.stdout.strip().splitlines()[-1])
        if args.solve:
            row.update(solve_one(i))
        rows.append(row)
        print(f"{row['design']}: {row['obligations']} obligations, prove {row['prove_cpu_s']} CPU s "
              f"({row['prove_wall_s']} s wall)" + (f"; synth solve {row['solve_wall_s']} s wall, "
                                                   f"{row['solve_cpu_s']} CPU s" if args.solve else ""),
              file=sys.stderr)
    t = Table(title="Hopper proofs per design (a process each; CPU seconds, wall in parentheses)")
    for col in ("design", "shape", "tile", "stages (K)", "obligations", "Z3 queries", "proof phases", "prove",
                "choose + lower + prove + emit") + (("synth solve",) if args.solve else ()):
        t.add_column(col)
    for r in rows:
        phases = "; ".join(f"{p['name']}: {p['obligations']}" for p in r["proofs"])
        t.add_row(r["design"], r["shape"], r["tile"], f"{r['stages']} ({r['k_pipe_mmas']})", str(r["obligations"]),
                  str(r["queries"]), phases, f"{r['prove_cpu_s']:.2f} s ({r['prove_wall_s']:.2f})",
                  f"{r['run_cpu_s']:.2f} s ({r['run_wall_s']:.2f})",
                  *((f"{r['solve_cpu_s']:.2f} s ({r['solve_wall_s']:.2f})",) if args.solve else ()))
    Console(width=220).print(t)
    worst_cpu = max(r["prove_cpu_s"] for r in rows)
    worst_run = max(r["run_wall_s"] for r in rows)
    ok = all(r["proven"] for r in rows) and worst_cpu < TARGET_CPU_S and TOP_LIMIT_S >= MARGIN * worst_run
    print(f"slowest proof {worst_cpu:.2f} CPU s (target < {TARGET_CPU_S:g} s); slowest choose + lower + prove + emit "
          f"{worst_run:.2f} s wall: each --top folder's default --time-limit {TOP_LIMIT_S:g} s is "
          f"{TOP_LIMIT_S / worst_run:.1f}x it (target >= {MARGIN:g}x)")
    if args.solve:
        worst_solve = max(r["solve_wall_s"] for r in rows)
        ok = ok and all(r["solve_ok"] for r in rows) and SOLVE_LIMIT_S >= MARGIN * worst_solve
        print(f"slowest synth solve {worst_solve:.2f} s wall: its default --time-limit {SOLVE_LIMIT_S:g} s is "
              f"{SOLVE_LIMIT_S / worst_solve:.1f}x it (target >= {MARGIN:g}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

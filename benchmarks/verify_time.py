"""Time the verifier: per wait and per obligation, on RFC 0077's listings, the lowered example
problems and random lowered programs of 5 to 100 ops.

    python benchmarks/verify_time.py            # everything
    python benchmarks/verify_time.py --quick    # listings and problems only
    python benchmarks/verify_time.py --json out.json

Target (checked at the end): every wait of the GEMM and of each RFC 0077 example is
proven (or refuted) in under 2 s, tightness included.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from synth.verify import load_program, verify_program  # noqa: E402

TARGET_S = 2.0


def _lowered(path: pathlib.Path):
    from synth.graph import build_graph
    from synth.load import load_problem
    from synth.lower import lower
    from synth.schedule import schedule_from_pins

    pr = load_problem(str(path))
    if pr.pins.stage is None:
        return None
    g = build_graph(pr)
    return lower(pr, g, schedule_from_pins(pr, g))


def _random(n_ops: int, seed: int):
    from synth.graph import build_graph
    from synth.lower import lower
    from synth.randgen import random_problem, random_schedule

    pr = random_problem(seed, n_ops, symbolic=True)
    g = build_graph(pr)
    return lower(pr, g, random_schedule(pr, g, seed))


def measure(name: str, program) -> dict:
    t0 = time.perf_counter()
    r = verify_program(program)
    total = time.perf_counter() - t0
    per_ob = [o.seconds for o in r.obligations]
    return {
        "name": name,
        "ops": len(program.ops),
        "stmts": sum(len(p.stmts) for p in program.parts),
        "waits": len(program.waits),
        "obligations": len(r.obligations),
        "ok": r.ok,
        "total_s": round(total, 3),
        "obligation_mean_ms": round(1000 * statistics.mean(per_ob), 2) if per_ob else 0.0,
        "obligation_max_ms": round(1000 * max(per_ob), 2) if per_ob else 0.0,
        "wait_max_s": round(max((v.seconds for v in r.verdicts), default=0.0), 3),
        "waits_detail": [(v.index, v.status, v.tight, round(v.seconds, 3)) for v in r.verdicts],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the random programs")
    ap.add_argument("--sizes", default="5,10,20,50,100", help="op counts of the random programs")
    ap.add_argument("--seeds", type=int, default=2, help="random programs per size")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)

    rows = []
    for f in sorted((ROOT / "tests" / "rfc_listings").glob("*.json")):
        rows.append(measure(f"listing {f.stem}", load_program(str(f))))
    for f in sorted((ROOT / "problems").glob("*.yaml")):
        try:
            p = _lowered(f)
        except Exception as e:  # a problem the lowering rejects is not a verifier benchmark
            print(f"skip {f.name}: {type(e).__name__}", file=sys.stderr)
            continue
        if p is not None:
            rows.append(measure(f"lowered {f.stem}", p))
    if not args.quick:
        for n in (int(x) for x in args.sizes.split(",")):
            for seed in range(args.seeds):
                rows.append(measure(f"random n={n} seed={seed}", _random(n, seed)))

    head = f"{'program':44} {'ops':>4} {'stmts':>5} {'waits':>5} {'obl':>4} {'ok':>3} " \
           f"{'total s':>8} {'mean ms':>8} {'max ms':>7} {'wait max s':>10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:44} {r['ops']:>4} {r['stmts']:>5} {r['waits']:>5} {r['obligations']:>4} "
              f"{'yes' if r['ok'] else 'no':>3} {r['total_s']:>8.2f} {r['obligation_mean_ms']:>8.1f} "
              f"{r['obligation_max_ms']:>7.1f} {r['wait_max_s']:>10.2f}")
    target = [r for r in rows if r["name"].startswith("listing rfc0077") or "gemm" in r["name"]
              or r["name"].startswith("lowered rfc0077")]
    slow = [r for r in target if r["wait_max_s"] >= TARGET_S]
    print()
    print(f"target: every wait of the GEMM and RFC 0077 examples under {TARGET_S:g} s: "
          + ("met" if not slow else "MISSED by " + ", ".join(r["name"] for r in slow)))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if not slow else 1


if __name__ == "__main__":
    raise SystemExit(main())

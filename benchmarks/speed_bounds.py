"""The speed figures the tests used to assert, held to their tight bounds on an idle machine.

A test asserts on what the code computes, not on how fast a shared machine is (a CI machine running the suite
beside other work made these fail with nothing wrong). The tests keep one check per time-limit promise with a
margin for load (``tests/test_promises.py``: ``--time-limit`` and Ctrl-C; ``tests/hopper/test_bugs.py``: the whole
verification's deadline) and generous "at once" bounds (``tests/conftest.py: AT_ONCE_S``); the figures below, which
only an idle machine meets, are checked here:

* CP-SAT proves the sm_80 GEMM example optimal in under 2 CPU-s with 2 workers (tests/test_model.py);
* a trip count of 65536 keeps the stage domain small: solved in under 10 s (tests/test_model.py);
* the 120-op body lowers in under 4 CPU-s (5.4 before the implied-wait speed-up; tests/test_lower_perf.py);
* kernel.cu is emitted in under 1 CPU-s whatever min_k_tiles (up to 31250; tests/test_lower_perf.py), and a
  ``synth solve`` of the min_k_tiles 31250 GEMM ends inside ``--time-limit 6`` with emit under 1 s
  (tests/test_promises.py);
* ``--time-limit`` stops solve (a 40-op body), verify and certify, and a Hopper design's proofs, within 3 s of the
  limit, interpreter start-up included (tests/test_promises.py);
* SIGINT during CP-SAT's search ends ``synth solve`` within 3 s (tests/test_promises.py);
* ``verify_hopper``'s whole-call deadline of 0.3 s returns within 2 s (tests/hopper/test_bugs.py);
* the independent Hopper checker accepts the 5-stage two-consumer program in under 30 s (about 1 s;
  tests/test_trusted_hopper.py);
* hostile program.json bytes are refused in under 5 s, a program whose counterexample is at T ~ 10^9 is refuted in
  under 30 s, a 256 KiB problem file is refused in under 10 s (tests/adversarial/).

    python benchmarks/speed_bounds.py              # every check; exit 1 if one misses its bound
    python benchmarks/speed_bounds.py --only emit  # the checks whose name holds "emit"
    python benchmarks/speed_bounds.py --json out.json

Run it on an otherwise idle machine: every bound is wall-clock or CPU time of this process and its children.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import sys
import tempfile
import time
from synth.lower.hopper_design import design_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

CHECKS = []


def check(name: str, bound: float, unit: str):
    """Register ``fn() -> measured`` as a check that passes when measured < bound."""
    def wrap(fn):
        CHECKS.append((name, bound, unit, fn))
        return fn
    return wrap


def cpu() -> float:
    return time.process_time()


# ------------------------------------------------------------------------------------------------ model, lower, emit

@check("model: sm_80 GEMM example proven optimal (2 workers)", 2.0, "CPU-s")
def gemm_example() -> float:
    from synth.graph import build_graph
    from synth.load import load_problem
    from synth.model import solve

    p = load_problem(str(ROOT / "problems" / "gemm-sm80-f16.yaml"))
    g = build_graph(p)
    solve(p, g, time_limit=5)  # warm up imports
    t0 = cpu()
    s = solve(p, g, time_limit=20, workers=2)
    assert s.info is not None and s.info.status == "OPTIMAL", s.info
    return cpu() - t0


@check("model: trip count 65536 solved", 10.0, "s")
def long_loop() -> float:
    from test_model import IN_PLACE

    from synth.graph import build_graph
    from synth.load import load_problem_text
    from synth.model import solve

    p = load_problem_text(IN_PLACE.replace("SHARED", "1024").replace("trip_count: 16", "trip_count: 65536"))
    g = build_graph(p)
    t0 = time.monotonic()
    s = solve(p, g, time_limit=10)
    assert s.info is not None and s.info.status == "OPTIMAL", s.info
    return time.monotonic() - t0


@check("lower: the 120-op body", 4.0, "CPU-s")
def lower_120() -> float:
    from test_lower_perf import rand_1_120

    from synth.lower import lower

    p, g, s = rand_1_120()
    t0 = cpu()
    lower(p, g, s)
    return cpu() - t0


@check("emit: kernel.cu of each min_k_tiles golden (the slowest)", 1.0, "CPU-s")
def emit_min_k_tiles() -> float:
    from test_lower_perf import GEMM_CASES, gemm_case

    from synth.emit.cuda import emit_kernel

    worst = 0.0
    for case in GEMM_CASES:
        p, s, prog = gemm_case(*case)
        t0 = cpu()
        emit_kernel(p, s, prog)
        worst = max(worst, cpu() - t0)
    return worst


# ------------------------------------------------------------------------------------------------ whole commands

def _solve_bigk(tmp: pathlib.Path) -> dict:
    from test_promises import envelope, finish, start

    prob = tmp / "bigk.yaml"
    prob.write_text("name: bigk\nkind: gemm\nshape: {M: 128, N: 128, K: 1000000}\ndtype: f16\n"
                    "tile: {BM: 128, BN: 128, BK: 32}\nwarps: 4\nstages: 3\narch: sm_80\nmin_k_tiles: 31250\n")
    t0 = time.monotonic()
    rc, out, _ = finish(start("solve", str(prob), "-o", "out", "--time-limit", "6", "--json", cwd=tmp), timeout=120)
    took = time.monotonic() - t0
    doc = envelope(out)
    assert rc == 0, doc["errors"]
    return {"took": took, "emit": {p["name"]: p["seconds"] for p in doc["result"]["phases"]}["emit"]}


_BIGK: dict = {}


@check("solve: min_k_tiles 31250 under --time-limit 6, whole command", 6.0 + 3.0, "s")
def bigk_whole() -> float:
    with tempfile.TemporaryDirectory() as d:
        _BIGK.update(_solve_bigk(pathlib.Path(d)))
    return _BIGK["took"]


@check("solve: min_k_tiles 31250, the emit phase", 1.0, "s")
def bigk_emit() -> float:
    if not _BIGK:
        bigk_whole()
    return _BIGK["emit"]


@check("solve --time-limit 2 (40-op body): stopped", 2.0 + 3.0, "s")
def solve_time_limit() -> float:
    from test_promises import envelope, finish, problem_file, start

    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        prob = problem_file(tmp, 1, 40)
        t0 = time.monotonic()
        rc, out, _ = finish(start("solve", str(prob), "-o", "out", "--time-limit", "2", "--json", cwd=tmp), 60)
        took = time.monotonic() - t0
        assert rc == 1 and envelope(out)["errors"][0]["code"] == "time_limit"
    return took


@check("verify / certify --time-limit 1.5: stopped (the slower)", 1.5 + 3.0, "s")
def verify_certify_time_limit() -> float:
    from test_promises import finish, problem_file, start

    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        prob = problem_file(tmp, 1, 40)
        rc, _, err = finish(start("solve", str(prob), "-o", "out", "--time-limit", "120", "-q", cwd=tmp), 300)
        assert rc == 0, err[-2000:]
        worst = 0.0
        for args in (("verify", "out", "--certificate", "cert"), ("certify", "out")):
            t0 = time.monotonic()
            rc, _, _ = finish(start(*args, "--time-limit", "1.5", "--json", cwd=tmp), timeout=60)
            worst = max(worst, time.monotonic() - t0)
            assert rc == 1, args
    return worst


@check("solve --time-limit 1.5 / 3, a Hopper design's proofs: past the limit", 3.0, "s")
def hopper_design_time_limit() -> float:
    from test_promises import finish, start

    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        prob = tmp / "p.yaml"
        prob.write_text("name: g\nkind: gemm\nshape: {M: 8192, N: 8192, K: 8192}\ntile: {BM: 64, BN: 256, BK: 64}\n"
                        "arch: sm_90\nmainloop: tma_wgmma\npersistent: auto\npingpong: auto\nepilogue: auto\n")
        for limit in ("1.5", "3"):
            t0 = time.monotonic()
            rc, _, _ = finish(start("solve", str(prob), "-o", "out", "--time-limit", limit, "--json", cwd=tmp), 60)
            took = time.monotonic() - t0
            shutil.rmtree(tmp / "out", ignore_errors=True)
            if rc == 1:
                worst = max(worst, took - float(limit))
    return worst


@check("Ctrl-C during CP-SAT's search: signal to exit", 3.0, "s")
def ctrl_c_cp_sat() -> float:
    from test_promises import finish, problem_file, start

    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        prob = problem_file(tmp, 1, 120)
        proc = start("solve", str(prob), "-o", "out", "--time-limit", "60", "--no-verify", "--workers", "1",
                     "--json", cwd=tmp)
        time.sleep(6.0)
        assert proc.poll() is None
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc, _, _ = finish(proc, timeout=60)
        assert rc == 130, rc
        return time.monotonic() - t0


# ------------------------------------------------------------------------------------------------ Hopper proofs

@check("verify_hopper: whole-call deadline 0.3 s, returned after", 2.0, "s")
def hopper_deadline() -> float:
    from synth.hopper.kernel_design import KernelDesign
    from synth.verify import phases
    from synth.verify.phases import verify_hopper

    # a program whose proof takes seconds, none of it done before (the prover reuses what this process proved)
    p = design_program(KernelDesign.of(bm=64, bn=16, stages=16, k_pipe_mmas=1, cluster="2x1"))
    for memo in ("_PROVEN", "_VIEWS"):
        getattr(phases, memo, {}).clear()
    t0 = time.monotonic()
    r = verify_hopper(p, time_limit=20, deadline=t0 + 0.3)
    assert not r.ok
    return time.monotonic() - t0


@check("trusted: the 5-stage two-consumer program accepted", 30.0, "s")
def trusted_five_stage() -> float:
    from synth.hopper.kernel_design import KernelDesign
    from synth.hopper.ir import dumps
    from synth.trusted.hopper import check_hopper_program

    p = design_program(KernelDesign.of(bm=128, stages=5, k_pipe_mmas=1))
    t0 = time.monotonic()
    r = check_hopper_program(dumps(p).encode("utf-8"), timeout_s=30)
    assert r.ok, r.render()
    return time.monotonic() - t0


# ------------------------------------------------------------------------------------------------ hostile inputs

@check("program.json: hostile bytes refused (the slowest)", 5.0, "s")
def hostile_program_bytes() -> float:
    from synth.errors import SynthError
    from synth.verify import load_program

    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "program.json"
        for text in (b'{"name": NaN}', b"[" * 100_000 + b"]" * 100_000, b"1" * 5000, b""):
            p.write_bytes(text)
            t0 = time.monotonic()
            try:
                load_program(str(p))
            except SynthError:
                pass
            worst = max(worst, time.monotonic() - t0)
    return worst


@check("program.json: a counterexample at T ~ 10^9 refuted", 30.0, "s")
def billion_refuted() -> float:
    from synth.verify import load_program, verify_program

    d = json.loads((ROOT / "tests" / "rfc_listings" / "rfc0077-two-stage.json").read_text())
    n = 10 ** 9
    d["loop"]["trip_count"] = d["loop"]["min_trip_count"] = n + 1
    d["parts"][1]["extent"] = n
    epi = d["parts"][2]["stmts"][1]
    epi["iteration"] = f"i + {n}"
    epi["reads"][0]["version"] = f"i + {n}"
    epi["reads"][0]["slot"] = f"(i + {n}) % 2"
    d["waits"][0]["in_flight"] = 2
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "program.json"
        path.write_text(json.dumps(d))
        t0 = time.monotonic()
        r = verify_program(load_program(str(path)), tightness=False)
        assert not r.ok
        return time.monotonic() - t0


@check("problem file: 256 KiB refused", 10.0, "s")
def oversized_problem() -> float:
    import contextlib
    import io

    from synth.bounds import MAX_INPUT_BYTES
    from synth.cli import main

    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "big.yaml"
        p.write_text("name: x\n" + "#" * MAX_INPUT_BYTES + "\n")
        t0 = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = main(["solve", str(p), "-o", str(pathlib.Path(d) / "out"), "-q"])
        assert rc == 2
        return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run the checks whose name holds this text (case-insensitive)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    rows, failed = [], 0
    for name, bound, unit, fn in CHECKS:
        if args.only and not re.search(re.escape(args.only), name, re.I):
            continue
        try:
            got, err = fn(), None
        except Exception as e:  # noqa: BLE001 - a check that cannot run is reported, not fatal
            got, err = None, f"{type(e).__name__}: {e}"
        ok = err is None and got < bound
        failed += not ok
        rows.append({"check": name, "measured": None if got is None else round(got, 3), "bound": bound,
                     "unit": unit, "ok": ok, "error": err})
        shown = err if err else f"{got:8.3f} {unit:5s} (bound {bound:g})"
        print(f"{'ok  ' if ok else 'MISS'}  {name:72s} {shown}", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{len(rows) - failed}/{len(rows)} within their bounds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

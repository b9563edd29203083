"""``synth check`` on every input under tests/check_inputs/ and on its mutants, side by side.

    python benchmarks/check_corpus.py            # every input and its mutants
    python benchmarks/check_corpus.py --quick    # one input per form (the test's set, a few seconds)
    python benchmarks/check_corpus.py --json out.json
    python benchmarks/check_corpus.py --under triton_nested   # the inputs of one folder only
    python benchmarks/check_corpus.py --under triton_sm90a    # Triton's tutorials on sm_90a, per kernel form

Each row: the input (or mutant), its form, the programs checked (loops, or Hopper roles), the waits and the
obligations proven / refuted / unknown, the verdict, the time. The originals must be proven (the refused
forms under triton_hopper_refused/ and the Blackwell file must exit 2; the two TVM outputs with a real race,
:data:`RACES`, must be refuted); each mutant must be refuted (a wait raised by one past a tight count is a
read-after-write race; a wgmma pendings raised by one lets a TMA refill a slot still read, a write-after-read
race; the zero-trip mutant is wrong only at T = 0 and checked with --min-trip-count 0). A mutant or race that
is proven is a MISS, any other verdict than the expected one is WRONG: either makes the exit status 1.
Column "T >= 0": each proven original checked again with --min-trip-count 0 (proven, or refused at a line,
or "fixed T"); informative, not a MISS.
The mutants are :mod:`synth.frontends.mutants`; docs/check.md, "Corpus benchmark".

triton-viz (PyPI 3.0) has no race detector over TTGIR -- its sanitizer checks out-of-bounds accesses, imports
torch and runs the kernels in Triton's interpreter -- so there is no column for it: one line says whether it
is installed and what it offers (:func:`triton_viz_line`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from synth.errors import SynthError  # noqa: E402
from synth.frontends import mutants as M  # noqa: E402
from synth.frontends import tilelang_mutants as TLM  # noqa: E402
from synth.frontends import ttgir_mutants as NM  # noqa: E402
from synth.frontends.check import check_file_all  # noqa: E402

INPUTS = ROOT / "tests" / "check_inputs"
SM90A = "triton_sm90a"
"""The folder of the sm_90a corpus of Triton's tutorials (tests/check_inputs/generate_hopper.py): its rows are
grouped by the kernel form the generator names (``generate_hopper.form_of``); its mutants are
:mod:`.ttgir_mutants`'."""


def _hopper_generator():
    """tests/check_inputs/generate_hopper.py as a module (it imports Triton only when it compiles)."""
    spec = importlib.util.spec_from_file_location("generate_hopper", INPUTS / "generate_hopper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
QUICK = ("triton-matmul-s3.ttgir", "triton_hopper_s3.ttgir", "triton_persistent/triton_persistent_s2.ttgir",
         "triton_ws/triton_ws_s2.ttgir", "triton_nested/triton_tiles_s2.ttgir", "tvm-stream-s2.py",
         "mlir-copy-depth2.mlir",
         "tilelang/tilelang_sm80_dynk_s3.tir", "tilelang/tilelang_sm90_ws_s3.tir")
"""One input per form (Triton sm_80, sm_90 one warp group, persistent, warp-specialized, tile loop, TVM, MLIR,
TileLang cp.async and warp-specialized)."""


@dataclass
class Row:
    source: str
    form: str = ""
    expect: str = "proven"
    """proven, refuted, or refused (exit 2)."""
    programs: int = 0
    waits: dict = field(default_factory=lambda: {"proven": 0, "refuted": 0, "unknown": 0})
    obligations: dict = field(default_factory=lambda: {"proven": 0, "refuted": 0, "unknown": 0})
    verdict: str = ""
    seconds: float = 0.0
    note: str = ""
    kform: str = ""
    """The kernel's form (the sm_90a corpus: persistent flatten=False, warp-specialized, attention, ...), the
    per-form table's key; else the reader's form."""
    zero: str = ""
    """An original's verdict with --min-trip-count 0 (tightness not judged): proven, refuted, refused at a
    line, or "fixed T" (its trip count is fixed in the IR)."""

    @property
    def mark(self) -> str:
        if self.verdict == self.expect:
            return "ok"
        return "MISS" if self.expect == "refuted" else "WRONG"


def inputs(quick: bool) -> list[pathlib.Path]:
    """The corpus: every .ttgir / .mlir / TVMScript .py / TileLang .tir under tests/check_inputs/ (or
    :data:`QUICK`)."""
    if quick:
        return [INPUTS / q for q in QUICK]
    out = [p for p in sorted(INPUTS.rglob("*")) if p.suffix in (".ttgir", ".mlir", ".py", ".tir")
           and p.name not in ("generate.py", "generate_hopper.py", "helpers.py", "__init__.py")]
    return out


RACES = {"tvm-producer-interleaving.py": "TVM's interleaved producer reads a stale slot (docs/check.md)",
         "tvm-two-async-stages.py": "TVM's two async stages: a write-after-read race on the first buffer",
         **{f"tilelang_{n}.tir": "TileLang's warp-specialized producer: its threads' waits not converged before "
            "the elected refill (converge; docs/check.md, TileLang)" for n in
            ("sm90_ws_s2", "sm90_ws_s3", "sm90_ws_s4", "sm90_ws_k32_s3", "rowsum_bulk1d_sm90_t1",
             "rowsum_bulk1d_sm90_t2")},
         "tl3087_ring_parity_fixed.tir": "its producer's threads not converged, as TileLang's (converge)"}
"""Inputs that hold a real race in the compiler's own output: refuted, not proven."""


def expected(path: pathlib.Path) -> str:
    """What the original must give: refused for the forms outside the model, refuted for :data:`RACES`,
    else proven."""
    if path.parent.name == "triton_hopper_refused" or "sm100" in path.name:
        return "refused"
    if path.suffix == ".tir" and path.stem.endswith("_bug"):  # TileLang's bug trail (tilelang/bugs/)
        return "refuted"
    if path.parent.name == SM90A and "_bug" in path.stem:  # Gluon's hand-made bugs (generate_hopper.GLUON_BUGS)
        return "refuted"
    if path.suffix == ".tir" and path.stem.endswith("_refused"):  # TileLang outside the model
        return "refused"
    return "refuted" if path.name in RACES else "proven"


def run_check(row: Row, path: str, min_trip_count: Optional[int] = None) -> list:
    """Check ``path`` into ``row``; the results (empty when refused)."""
    t0 = time.perf_counter()
    try:
        results = check_file_all(path, min_trip_count=min_trip_count, time_limit=10.0)
    except SynthError as e:
        row.seconds = time.perf_counter() - t0
        row.verdict, row.note = "refused", e.msg[:70]
        return []
    row.seconds = time.perf_counter() - t0
    row.programs = 0
    for r in results:
        rep = r.report
        if hasattr(rep, "verdicts"):  # cp.async: one program, its waits
            row.form = row.form or f"{r.loop.source} cp.async"
            row.programs += 1
            statuses = [v.status for v in rep.verdicts]
        else:  # Hopper: one program per role, the wgmma waits
            row.form = row.form or r.to_json().get("source", "hopper")
            row.programs += len(rep.program.roles)
            statuses = [v.status for v in rep.waits]
        for s in statuses:
            row.waits[s] += 1
        for o in rep.obligations:
            row.obligations[o.status] += 1
        for status in _nested_statuses(r):
            row.obligations[status] += 1
    ok = all(r.ok for r in results)
    row.verdict = "proven" if ok else ("refuted" if row.obligations["refuted"] else "unknown")
    return list(results)


def _nested_statuses(r) -> list:
    """The statuses a tile-loop / TMA-store check (:mod:`synth.frontends.ttgir_nested`) adds beside its
    program's obligations: the variants' obligations, each store program's obligations and thread checks,
    the tile obligations (carry, phase_reset)."""
    n = getattr(r, "nested", None)
    if n is None:
        return []
    out = [o.status for _l, rep, _w in r.variant_reports for o in rep.obligations]
    out += [o.status for _l, rep in getattr(r, "segment_reports", ()) for o in rep.obligations]
    for s in r.stores:
        out += [o.status for o in s.report.obligations]
        out += ["proven" if t.ok else "refuted" for t in s.threads if t.cls != "teardown"]
        out.append("proven" if s.teardown[0] else "refuted")
    out += ["proven" if o.ok else ("unknown" if "unknown" in o.detail else "refuted") for o in n.obligations]
    return out


def zero_trip_verdict(path: str) -> str:
    """``path`` checked for every trip count T >= 0 (docs/check.md, "Zero trip count")."""
    try:
        results = check_file_all(path, min_trip_count=0, time_limit=10.0, tightness=False)
    except SynthError as e:
        return f"refused (line {e.loc.line})" if e.loc is not None and e.loc.line else "refused"
    trips = [(r.program if hasattr(r, "program") else r.imported.program).trip_count for r in results]
    if all(isinstance(t, int) for t in trips):
        return "fixed T"
    return "proven" if all(r.ok for r in results) else "refuted"


def mutants_of(path: pathlib.Path, results: list) -> list[tuple[str, Callable[[str], str], Optional[int]]]:
    """``(name, text -> text, --min-trip-count)`` of each mutant that applies to the proven input ``path``."""
    text = path.read_text()
    out = []
    if path.suffix == ".tir":  # TileLang: its own mutants (synth.frontends.tilelang_mutants)
        return _tilelang_mutants(text, results)
    if path.parent.name in ("triton_nested", SM90A):  # tile loops and TMA stores: synth.frontends.ttgir_mutants
        for name, fn in NM.MUTANTS.items():
            try:
                fn(text)
            except ValueError:
                continue
            out.append((name.replace("_", " "), fn, None))
        return out
    if results and hasattr(results[0].report, "verdicts"):  # cp.async: raise the first tight wait
        for r in results:
            tight = [v for v in r.report.verdicts if v.tight]
            if tight:
                line = r.source.waits[tight[0].index][0]
                out.append((f"wait line {line} + 1", lambda t, ln=line: M.raise_wait(t, ln), None))
                break
        return out
    for name, fn, mt in (("pendings + 1", M.raise_pendings, None), ("wait_barrier dropped", M.drop_barrier_wait, None),
                         ("producer parity flipped", M.flip_producer_parity, None),
                         ("prologue copy unguarded", M.unguard_prologue_copy, 0)):
        if "ttg.warp_specialize" in text and name != "producer parity flipped":
            continue  # the warp-specialized mutants that refute fast; the others run in the tests
        if "ttg.warp_specialize" not in text and name == "producer parity flipped":
            continue
        try:
            fn(text)
        except ValueError:
            continue
        out.append((name, fn, mt))
    return out


def _tilelang_mutants(text: str, results: list) -> list:
    """A TileLang input's mutants: the first tight ``T.ptx_wait_group`` raised by one (cp.async), or the
    producer's release wait dropped and the consumer's parity flipped (warp-specialized)."""
    if results and hasattr(results[0].report, "verdicts"):
        tight = [v for r in results for v in r.report.verdicts if v.tight]
        if not tight:
            return []
        line = results[0].source.waits[tight[0].index][0]
        return [(f"wait_group line {line} + 1", lambda t, ln=line: TLM.raise_wait_group(t, ln), None)]
    out = []
    for name, fn in (("release wait dropped", TLM.drop_release_wait), ("consumer parity flipped",
                                                                          TLM.flip_consumer_parity)):
        try:
            fn(text)
        except ValueError:
            continue
        out.append((name, fn, None))
    return out


def triton_viz_line() -> str:
    """One line on triton-viz: not installed (and how to add it), or what the installed version offers.

    triton-viz 3.0 (PyPI, the newest there when this was written) ships a sanitizer for out-of-bounds
    accesses that imports torch and runs the kernels under Triton's interpreter; it has no race detector
    over TTGIR, so there is no verdict to put beside synth's."""
    if importlib.util.find_spec("triton_viz") is None:
        return ("triton-viz: not installed, no column (pip install triton-viz in a separate venv; 3.0 ships an "
                "out-of-bounds sanitizer that imports torch and runs kernels in Triton's interpreter, no race "
                "detector over TTGIR)")
    # read the installed files, import nothing: its clients import torch
    spec = importlib.util.find_spec("triton_viz")
    roots = [pathlib.Path(x) for x in (spec.submodule_search_locations or ())]
    races = sorted(str(f.relative_to(r)) for r in roots for f in r.rglob("*.py") if re.search(r"(^|_)races?(_|$)", f.stem.lower()))
    if races:
        return f"triton-viz: installed with {', '.join(races)}; it launches the kernels, which this script does not"
    return "triton-viz: installed, but this version has no race detector (its sanitizer checks bounds): no column"


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one input per form and its mutants")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--under", metavar="DIR", help="only the inputs under tests/check_inputs/DIR (e.g. triton_nested)")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in inputs(args.quick):
            rel = str(path.relative_to(INPUTS))
            if args.under and not rel.startswith(args.under.rstrip("/") + "/"):
                continue
            row = Row(rel, expect=expected(path))
            if path.parent.name == SM90A:
                row.kform = _hopper_generator().form_of(path.name)
            results = run_check(row, str(path))
            rows.append(row)
            if row.verdict != "proven" or row.expect != "proven":
                continue
            row.zero = zero_trip_verdict(str(path))
            for name, fn, mt in mutants_of(path, results):
                m = Row(f"  {rel}: {name}" + (" (T >= 0)" if mt == 0 else ""), form=row.form, kform=row.kform,
                        expect="refuted")
                mpath = pathlib.Path(tmp) / f"m{len(rows)}{path.suffix}"
                mpath.write_text(fn(path.read_text()))
                run_check(m, str(mpath), min_trip_count=mt)
                rows.append(m)
    _print(rows, triton_viz_line())
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps([r.__dict__ | {"mark": r.mark} for r in rows], indent=1))
    return 1 if any(r.mark != "ok" for r in rows) else 0


def _print(rows: list[Row], viz: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="synth check on tests/check_inputs/ and its mutants")
    for c in ("source", "form", "programs", "waits p/r/u", "obligations p/r/u", "verdict", "expected", "mark",
              "time (s)", "T >= 0"):
        t.add_column(c, justify="right" if c in ("programs", "time (s)") else "left")
    pru = ("proven", "refuted", "unknown")
    for r in rows:
        t.add_row(r.source, r.form, str(r.programs), "/".join(str(r.waits[k]) for k in pru),
                  "/".join(str(r.obligations[k]) for k in pru),
                  r.verdict + (f" ({r.note})" if r.note else ""), r.expect, r.mark, f"{r.seconds:.2f}", r.zero)
    Console(width=220).print(t)
    bad = [r for r in rows if r.mark != "ok"]
    print(f"{len(rows)} rows, {sum(r.source.startswith('  ') for r in rows)} mutants, "
          f"{sum(r.mark == 'MISS' for r in rows)} MISS, {sum(r.mark == 'WRONG' for r in rows)} WRONG, "
          f"{sum(r.seconds for r in rows):.1f} s")
    _print_forms(rows)
    print(viz)
    for r in bad:
        print(f"{r.mark}: {r.source.strip()} expected {r.expect}, got {r.verdict}", file=sys.stderr)


def form_summary(rows: list[Row]) -> list[dict]:
    """Per form: the inputs (files), how many are proven, refuted, outside the model (refused), the mean and
    largest time per file, and the mutants and how many are refuted."""
    forms: dict = {}
    form_of: dict = {}
    for r in rows:
        mutant = r.source.startswith("  ")
        key = r.source.strip().split(":")[0] if mutant else r.source
        form = r.kform or r.form or form_of.get(key) or ("refused" if r.verdict == "refused" else "?")
        if not mutant:
            form_of[key] = form
        f = forms.setdefault(form, {"form": form, "files": 0, "proven": 0, "refuted": 0, "refused": 0,
                                    "seconds": [], "mutants": 0, "mutants_refuted": 0})
        if mutant:
            f["mutants"] += 1
            f["mutants_refuted"] += r.verdict == "refuted"
        else:
            f["files"] += 1
            f[r.verdict if r.verdict in ("proven", "refuted", "refused") else "refuted"] += 1
            f["seconds"].append(r.seconds)
    out = []
    for f in forms.values():
        s = f.pop("seconds")
        out.append(dict(f, mean_s=round(sum(s) / len(s), 2) if s else 0.0, max_s=round(max(s), 2) if s else 0.0))
    return out


def _print_forms(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="per form")
    for c in ("form", "files", "proven", "refuted", "outside the model", "s / file (mean)", "s / file (max)",
              "mutants", "mutants refuted"):
        t.add_column(c, justify="left" if c == "form" else "right")
    for f in form_summary(rows):
        t.add_row(f["form"], str(f["files"]), str(f["proven"]), str(f["refuted"]), str(f["refused"]),
                  f"{f['mean_s']:.2f}", f"{f['max_s']:.2f}", str(f["mutants"]), str(f["mutants_refuted"]))
    Console(width=220).print(t)


if __name__ == "__main__":
    sys.exit(main())

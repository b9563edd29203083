"""A hostile soundness sweep of the Hopper prover against the explicit-state oracle.

For the lowered programs of several designs and every single-field / single-statement mutant of each
(:func:`synth.hopper.mutants.field_mutants`, plus the bug table's :func:`~synth.hopper.mutants.mutants` and the
ping-pong and attention bug mutants), ``verify_hopper`` (``verify_cluster`` for a cluster program) is run in one
process, so that its shared terms and its cache of negations already proven (``synth.verify.phases``) carry from
one mutant to the next, as they do in ``synth solve``; the explicit-state oracle
(:func:`synth.verify.oracle_phases.run`) then replays each mutant at ``T = min_trip_count .. 12``, stopping at the
first violation. Each proven mutant is proven a second time with both caches emptied (``--no-recheck``: not),
and the two verdicts must agree.

Verdicts:

* **unsound**: the prover proves a mutant in which the oracle finds a violation, or the cached and the uncached
  proofs disagree. Exit 1.
* **imprecise**: the prover refutes a mutant and the oracle, having explored every state at every ``T``, finds no
  violation, and the refuted classes are not the documented strict cases (docs/hopper.md, "The mutation sweep":
  the fence class, which the oracle does not model; an epilogue's release or commit; a cluster class).
  A refutation not confirmed at ``T <= 12`` is replayed at its counterexamples' trip counts up to 40 first
  (a stages - 1 wait on a 4-slot ring deadlocks first at ``T = 13``): counted confirmed, and listed.
* **strict**: as imprecise, but a documented strict case. **unconfirmed**: as imprecise, but the oracle's state
  limit cut a search (it may have missed the violation).
* **empty**: proven, and the oracle's only violation is an empty wgmma group (a commit whose ops are all predicated
  off) pending at a thread's end: gone once no empty group is committed. The oracle counts it as a drain
  violation; the prover's ``wgmma_drain`` is per wgmma, and an empty group holds none. Not counted unsound.

Nothing here is shared between two runs; the whole default sample takes about 20 minutes on one core, every
mutant (explore) several hours (the oracle on a two-consumer ring of 3..5 stages at T up to 12 dominates).

Usage::

    python benchmarks/soundness_sweep.py                 # a deterministic sample of each program's mutants
    SYNTH_HYPOTHESIS=explore python benchmarks/soundness_sweep.py   # every mutant (hours)
    python benchmarks/soundness_sweep.py --only one-tile --explore --json out.json

Groups (``--only``, comma separated): one-tile (bm 64/128, stages 1..5, k_pipe_mmas 0..stages-1), persistent
(tile-end programs at 1 .. stages + 1 k-tiles per tile), pingpong (the order programs, even and odd), cluster
(2x1, 1x2), attention (head dim 128, its barrier program, n = 0 .. 12).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from synth.hopper.kernel_design import KernelDesign  # noqa: E402
from synth.hopper.mutants import field_mutants, mutants  # noqa: E402
from synth.lower.hopper_design import design_program  # noqa: E402
from synth.program import CommitStmt, OpStmt  # noqa: E402
from synth.verify import phases  # noqa: E402
from synth.verify.hopper_cluster import verify_cluster  # noqa: E402
from synth.verify.oracle_phases import run  # noqa: E402
from synth.verify.phases import verify_hopper  # noqa: E402

TRIPS_MAX = 12
BEYOND_MAX = 40
"""A refutation the oracle does not confirm at T <= 12 is replayed at its counterexamples' trip counts up to this."""
GROUPS = ("one-tile", "persistent", "pingpong", "cluster", "attention")
ORACLE_FREE = {"fence", "init_visible", "safe_exit", "cluster_form"}
"""Classes the oracle does not model: a refutation of these alone it cannot confirm."""


@dataclass
class Subject:
    group: str
    name: str
    program: object
    extra: list = field(default_factory=list)
    """(name, program) bug mutants beside the field mutants."""
    hops: int = 1
    threads: int = 2
    max_states: int = 60_000
    cluster: bool = False
    sample: int = 12


@dataclass
class Row:
    group: str
    design: str
    mutants: int = 0
    proven: int = 0
    refuted: int = 0
    unknown: int = 0
    confirmed: int = 0
    unsound: list = field(default_factory=list)
    imprecise: list = field(default_factory=list)
    strict: int = 0
    unconfirmed: list = field(default_factory=list)
    beyond: list = field(default_factory=list)
    """Refuted, confirmed by the oracle only at a counterexample's trip count beyond 12 (counted confirmed)."""
    empty_group: list = field(default_factory=list)
    """Proven, the oracle's only violation an empty wgmma group pending at a thread's end (oracle-strict)."""
    errors: list = field(default_factory=list)
    seconds: float = 0.0


def _strict(name: str, classes: set) -> bool:
    """The refutations the oracle cannot confirm by design (tests/hopper/test_mutation_sweep.py, docs/hopper.md)."""
    if classes <= ORACLE_FREE:
        return True
    late = {"release_after_wgmma", "arrivals", "no_deadlock", "wgmma_drain"}
    if "epilogue" in name and classes <= late | ORACLE_FREE:
        return True
    return False


def subjects(groups) -> list[Subject]:
    out = []
    if "one-tile" in groups:
        for bm in (64, 128):
            for s in range(1, 6):
                for k in range(s):
                    p = design_program(KernelDesign.of(bm=bm, stages=s, k_pipe_mmas=k))
                    out.append(Subject("one-tile", f"bm{bm} s{s} k{k}", p, [(f"bug: {n}", m) for n, m, _ in mutants(p)],
                                       sample=12 if (s <= 2 or (bm == 64 and s == k + 1)) else 4))
    if "persistent" in groups:
        from synth.lower.hopper_persistent import tile_end_program
        for bm, s, k in ((64, 2, 1), (128, 4, 2), (64, 3, 0)):
            ring = design_program(KernelDesign.of(bm=bm, stages=s, k_pipe_mmas=k))
            for kt in range(1, s + 2):
                out.append(Subject("persistent", f"bm{bm} s{s} k{k} kt{kt}", tile_end_program(ring, kt), sample=6))
    if "pingpong" in groups:
        from synth.lower.hopper_pingpong import MUTANTS, order_program
        for odd in (False, True):
            out.append(Subject("pingpong", f"order {'odd' if odd else 'even'}", order_program(odd),
                               [(f"bug: {n}", order_program(odd, n)) for n in MUTANTS], sample=1000))
    if "cluster" in groups:
        from synth.verify.hopper_cluster import CLUSTER_BUGS
        for c in ("2x1", "1x2"):
            p = design_program(KernelDesign.of(cluster=c))
            bugs = []
            for n, (fn, _, _) in CLUSTER_BUGS.items():
                try:
                    bugs.append((f"bug: {n}", fn(p)))
                except Exception:  # a bug shape that does not apply to this cluster shape
                    pass
            out.append(Subject("cluster", f"cluster {c}", p, bugs, threads=1, cluster=True, sample=10))
    if "attention" in groups:
        from synth.lower.hopper_attention import MUTANTS as AMUT, attention_mutant, lower_attention
        from synth.model.ws_bodies import attention_body
        from synth.model.ws_schedule import solve_ws
        from synth.verify.hopper_attention import barrier_program, hops_for
        body = attention_body(128, 128, 128)
        sched = solve_ws(body, time_limit=60, workers=1)
        ap = lower_attention(body, sched)
        bp = barrier_program(ap.program, ap.registers)
        bugs = [(f"bug: {n}", barrier_program(attention_mutant(ap, n).program, ap.registers)) for n in AMUT]
        out.append(Subject("attention", "attention d128", bp, bugs, hops=hops_for(ap), threads=1,
                           max_states=100_000, sample=10))
    return out


def _sample(ms: list, k: int, explore: bool) -> list:
    if explore or len(ms) <= k:
        return ms
    step = len(ms) / k
    return [ms[int(j * step)] for j in range(k)]


def _trips(obs) -> tuple:
    """The trip counts of the refutations' counterexamples, smallest first."""
    return tuple(sorted({o.counterexample.trip_count for o in obs
                         if o.status == "refuted" and o.counterexample is not None}))


def _prove(sub: Subject, m):
    """``(ok, refuted classes, unknown count, hopper-only ok, counterexample trip counts)``."""
    if sub.cluster:
        rep = verify_cluster(m, time_limit=20, tightness=False, hops=sub.hops)
        h = rep.hopper
        cls = {o.kind for o in h.obligations if o.status == "refuted"} | \
              {o.kind for o in rep.cluster if o.status == "refuted"}
        unk = sum(o.status == "unknown" for o in list(h.obligations) + list(rep.cluster))
        return bool(rep.ok), cls, unk, bool(h.ok), _trips(h.obligations)
    r = verify_hopper(m, time_limit=20, tightness=False, hops=sub.hops)
    return (bool(r.ok), set(r.refuted_classes()), sum(o.status == "unknown" for o in r.obligations), bool(r.ok),
            _trips(r.obligations))


def _uncached(sub: Subject, m):
    """:func:`_prove` with the process-wide caches (barrier views' terms, negations proven) emptied, then put back."""
    saved = phases._PROVEN, phases._VIEWS
    phases._PROVEN, phases._VIEWS = OrderedDict(), OrderedDict()
    try:
        return _prove(sub, m)
    finally:
        phases._PROVEN, phases._VIEWS = saved


def _oracle(sub: Subject, m):
    """``(T, classes)`` of the first violation at T = min .. 12, or ``(None, complete)``."""
    complete = True
    for T in range(m.min_trip_count, TRIPS_MAX + 1):
        res = run(m, T, max_states=sub.max_states, threads=sub.threads)
        if res.violations:
            return T, res.classes
        complete = complete and res.complete
    return None, complete


def _gated(m):
    """``m`` with each unconditional commit gated by the ops of its group (the same part's op statements of that
    group): no empty wgmma group is ever committed, nothing else changes."""
    roles = []
    for r in m.roles:
        parts = []
        for pt in r.program.parts:
            st = list(pt.stmts)
            for k, s in enumerate(st):
                if isinstance(s, CommitStmt) and not s.gate:
                    ops = tuple(dict.fromkeys(x.op for x in st if isinstance(x, OpStmt) and x.group == s.group))
                    if ops:
                        st[k] = replace(s, gate=ops)
            parts.append(replace(pt, stmts=tuple(st)))
        roles.append(replace(r, program=replace(r.program, parts=tuple(parts))))
    return replace(m, roles=tuple(roles))


def _empty_group_only(sub: Subject, m, T: int, what: set) -> bool:
    """Whether the oracle's violation at ``T`` is only a ``wgmma_drain`` of empty groups: gone once no empty group
    is committed (:func:`_gated`). The oracle counts an empty group still pending at a thread's end as a drain
    violation; the prover's ``wgmma_drain`` is per wgmma (an empty group holds none: complete at once)."""
    if what != {"wgmma_drain"}:
        return False
    return not run(_gated(m), T, max_states=sub.max_states, threads=sub.threads).violations


def sweep(sub: Subject, explore: bool, recheck: bool, log) -> Row:
    row = Row(sub.group, sub.name)
    t0 = time.perf_counter()
    ms = [("(the program)", sub.program)] + _sample(field_mutants(sub.program), sub.sample, explore) + sub.extra
    for name, m in ms:
        row.mutants += 1
        try:
            ok, cls, unk, hok, cex = _prove(sub, m)
        except Exception as e:  # a crash is a finding too
            row.errors.append(f"{name}: prover raised {type(e).__name__}: {e}")
            continue
        if recheck and (ok or hok):
            ok2, _, _, hok2, _ = _uncached(sub, m)
            if (ok2, hok2) != (ok, hok):
                row.unsound.append(f"{name}: cached proof {ok}/{hok}, uncached {ok2}/{hok2}")
        try:
            T, what = _oracle(sub, m)
        except Exception as e:
            row.errors.append(f"{name}: oracle raised {type(e).__name__}: {e}")
            continue
        if ok:
            row.proven += 1
            if T is not None:
                if _empty_group_only(sub, m, T, what):
                    row.empty_group.append(f"{name}: proven, oracle finds {sorted(what)} at T = {T} (empty groups)")
                else:
                    row.unsound.append(f"{name}: proven, oracle finds {sorted(what)} at T = {T}")
        elif unk and not cls:
            row.unknown += 1
        else:
            row.refuted += 1
            if T is None:  # the prover's counterexamples beyond T = 12: the oracle at the smallest few of them
                for T2 in [t for t in cex if TRIPS_MAX < t <= BEYOND_MAX][:3]:
                    res = run(m, T2, max_states=sub.max_states, threads=sub.threads)
                    if res.violations:
                        T = T2
                        row.beyond.append(f"{name}: refuted {sorted(cls)}; oracle finds {sorted(res.classes)} "
                                          f"at T = {T2} (none at T <= {TRIPS_MAX})")
                        break
            if T is not None:
                row.confirmed += 1
            elif _strict(name, cls):
                row.strict += 1
            elif not what:
                row.unconfirmed.append(f"{name}: refuted {sorted(cls)}; oracle cut by its state limit")
            else:
                row.imprecise.append(f"{name}: refuted {sorted(cls)}; oracle finds nothing at T <= {TRIPS_MAX}")
        if sub.cluster and hok and not ok and T is not None and not (what <= ORACLE_FREE):
            # verify_hopper alone proves a mutant whose barrier classes the oracle breaks
            row.unsound.append(f"{name}: verify_hopper proves it, oracle finds {sorted(what)} at T = {T}")
    row.seconds = time.perf_counter() - t0
    log(row)
    return row


def _line(r: Row) -> str:
    return (f"{r.group:<11} {r.design:<22} {r.mutants:>7} {r.proven:>6} {r.refuted:>7} {r.confirmed:>9} "
            f"{len(r.unsound):>7} {len(r.imprecise):>9} {r.strict:>6} {len(r.empty_group):>5} {len(r.unconfirmed):>6} "
            f"{len(r.errors):>6} "
            f"{r.seconds:>7.1f}")


HEAD = (f"{'group':<11} {'design':<22} {'mutants':>7} {'proven':>6} {'refuted':>7} {'confirmed':>9} "
        f"{'unsound':>7} {'imprecise':>9} {'strict':>6} {'empty':>5} {'uncut':>6} {'errors':>6} {'seconds':>7}")


def _log(r: Row) -> None:
    """A row as soon as its design is done, with what it found (the summary repeats it at the end)."""
    print(_line(r), flush=True)
    for tag, xs in (("UNSOUND", r.unsound), ("imprecise", r.imprecise), ("empty group", r.empty_group),
                    ("confirmed beyond 12", r.beyond),
                    ("error", r.errors)):
        for x in xs:
            print(f"    {tag}: {x}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(GROUPS), help="groups, comma separated: " + ", ".join(GROUPS))
    ap.add_argument("--design", default="", help="only designs whose name contains this")
    ap.add_argument("--explore", action="store_true", help="every mutant (also SYNTH_HYPOTHESIS=explore)")
    ap.add_argument("--no-recheck", action="store_true", help="do not re-prove proven mutants without the caches")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    explore = a.explore or os.environ.get("SYNTH_HYPOTHESIS") == "explore"
    groups = [g for g in a.only.split(",") if g]
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        ap.error(f"unknown group(s) {bad}")
    print(HEAD, flush=True)
    rows = []
    for sub in subjects(groups):
        if a.design and a.design not in sub.name:
            continue
        rows.append(sweep(sub, explore, not a.no_recheck, _log))
    tot = Row("total", "")
    for r in rows:
        for f in ("mutants", "proven", "refuted", "unknown", "confirmed", "strict", "seconds"):
            setattr(tot, f, getattr(tot, f) + getattr(r, f))
        for f in ("unsound", "imprecise", "unconfirmed", "empty_group", "beyond", "errors"):
            getattr(tot, f).extend(f"{r.design}: {x}" for x in getattr(r, f))
    print(_line(tot))
    for title, xs in (("UNSOUND", tot.unsound), ("imprecise", tot.imprecise),
                      ("unconfirmed (oracle cut)", tot.unconfirmed),
                      ("proven, the oracle's violation only an empty group (oracle-strict)", tot.empty_group),
                      (f"refuted, confirmed by the oracle only beyond T = {TRIPS_MAX}", tot.beyond),
                      ("errors", tot.errors)):
        if xs:
            print(f"\n{title}:")
            for x in xs:
                print("  " + x)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([r.__dict__ for r in rows], f, indent=1)
    return 1 if tot.unsound else 0


if __name__ == "__main__":
    sys.exit(main())

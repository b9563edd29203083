"""Proofs for a thread-block cluster program: the classes only a cluster has, and its known bugs
(docs/hopper_cluster.md).

A cluster program (:func:`synth.lower.cluster.lower_hopper_cluster`) is a Hopper program whose
roles, barriers and buffers name their CTA by the decimal index that ends their name
(:func:`cta_of`: ``consumer1``, ``empty1``, ``B1`` belong to CTA 1). Every role runs concurrently
with every other, and a barrier or a buffer is one object wherever the statement that touches it
runs, which is what distributed shared memory is: so :func:`synth.verify.phases.verify_hopper`
proves the barrier protocol of the whole cluster (arrivals counting remote consumers, bytes
including the peer's multicast, no deadlock across the CTAs, slot reuse only after every CTA's
release), and this module adds what the program's setup and teardown must do for the CTAs:

``cluster_form``
    every role, barrier and buffer names a CTA ``0 .. n - 1`` (``n >= 2``: the CTAs the roles name); a
    ``try_wait`` waits on its own CTA's barrier (``mbarrier.try_wait`` takes a ``shared::cta``
    address); an op reads its own CTA's buffers; a copy writes the CTA whose barrier it completes
    on (a multicast lands in each destination CTA's slot and signals that CTA's barrier).
``init_visible``
    for each barrier a role of another CTA touches (a remote arrive, a multicast's ``complete_tx``):
    ``setup`` holds, in this order, its ``mbarrier.init``, ``fence.mbarrier_init.release.cluster``
    (fence ``mbarrier_init``) and a cluster barrier (``cluster_sync``), none guarded. Setup runs
    before any role statement, so no remote arrive or multicast reaches an uninitialized barrier,
    and the peer CTA has started before its shared memory is written.
``safe_exit``
    for each CTA whose barriers or buffers a role of another CTA touches: ``teardown`` starts with
    a cluster barrier, before any ``mbarrier.inval`` of that CTA's barriers and before the CTA
    exits. Teardown runs after every role's last statement, so no CTA leaves (or invalidates a
    barrier) while a peer may still arrive on it or multicast into it.

These are rules on the program's text (the statements that exist, whatever their guards): they
hold for every ``T`` or for none. :func:`verify_cluster` runs both; :func:`prove_hopper` proves any Hopper program,
with the cluster classes when it is a cluster program (:func:`is_cluster_program`). :data:`CLUSTER_BUGS` are the
known cluster bugs as mutants of a lowered cluster program.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

from ..completion import ArriveStmt, ClusterSyncStmt, FenceStmt, InitStmt, InvalStmt, TryWaitStmt, Tx
from ..expr import Bin, Num, Var, simplify, substitute
from ..hopper.ir import HopperProgram
from ..program import OpStmt, Part
from .phases import verify_hopper
from .report import Counterexample, ObligationResult

CLUSTER_CLASSES = ("cluster_form", "init_visible", "safe_exit")
_SUFFIX = re.compile(r"([0-9]+)\Z")


def cta_of(name: str) -> Optional[int]:
    """The CTA a role, barrier or buffer belongs to: the decimal number ending its name (None: none)."""
    m = _SUFFIX.search(name)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Remote:
    """A statement of a role of CTA ``cta`` that touches ``target`` (a barrier or buffer) of CTA ``to``."""

    role: str
    cta: int
    part: str
    pos: int
    what: str
    target: str
    to: int

    def text(self) -> str:
        return (f"{self.role} (CTA {self.cta}) {self.what} {self.target} of CTA {self.to} ({self.part} statement "
                f"{self.pos})")


def _stmts(p: HopperProgram):
    for r in p.roles:
        for pt in r.program.parts:
            for k, s in enumerate(pt.stmts):
                yield r, pt, k, s


def remote_uses(p: HopperProgram) -> list[Remote]:
    """Every remote touch, in program order per role: an arrive on another CTA's barrier, a copy
    completing on another CTA's barrier or writing another CTA's buffer."""
    out = []
    for r, pt, k, s in _stmts(p):
        c = cta_of(r.name)
        if c is None:
            continue
        if isinstance(s, ArriveStmt) and cta_of(s.barrier) not in (None, c):
            out.append(Remote(r.name, c, pt.name, k, "arrives remotely on", s.barrier, cta_of(s.barrier)))
        if isinstance(s, OpStmt) and s.barrier is not None:
            b = s.barrier.barrier
            if cta_of(b) not in (None, c):
                out.append(Remote(r.name, c, pt.name, k, f"multicasts {s.op} (complete_tx) onto", b, cta_of(b)))
            for w in s.writes:
                if cta_of(w.buffer) not in (None, c):
                    out.append(Remote(r.name, c, pt.name, k, f"multicasts {s.op} into", w.buffer, cta_of(w.buffer)))
    return out


def _result(oid: str, kind: str, part: str, desc: str, bad: Optional[str]) -> ObligationResult:
    cex = None if bad is None else Counterexample(kind, 1, -1, part, -1, f"{kind}: {bad} (for every T >= 1)")
    return ObligationResult(oid, kind, None, None, part, desc, "proven" if bad is None else "refuted", 0.0,
                            counterexample=cex, reason="" if bad is None else bad)


def _form(p: HopperProgram) -> list[ObligationResult]:
    out = []
    ctas = sorted({cta_of(r.name) for r in p.roles if cta_of(r.name) is not None})
    named = [("role", r.name) for r in p.roles] + [("barrier", b.name) for b in p.barriers] + \
        [("buffer", b.name) for b in p.buffers]
    n = len(ctas)
    bad = next((f"{what} {name} names no CTA of 0 .. {n - 1} (end its name with the CTA's index)"
                for what, name in named if cta_of(name) is None or cta_of(name) >= n), None)
    if bad is None and ctas != list(range(n)):
        bad = f"the roles name CTAs {ctas}, not 0 .. {n - 1}"
    if bad is None and n < 2:  # a folder declaring a cluster, or a cluster barrier, around one CTA's program
        bad = (f"the roles name one CTA ({ctas[0] if ctas else 'none'}): a cluster program's roles name the CTAs "
               "0 .. n - 1 of a cluster of n >= 2")
    out.append(_result("cluster_form:names", "cluster_form", "program",
                       "every role, barrier and buffer ends its name with its CTA's index 0 .. n - 1", bad))
    for r in p.roles:
        c = cta_of(r.name)
        bad = None
        for pt in r.program.parts:
            for k, s in enumerate(pt.stmts):
                at = f"{r.name} (CTA {c}) {pt.name} statement {k}"
                if bad is None and isinstance(s, TryWaitStmt) and cta_of(s.barrier) != c:
                    bad = f"{at} waits on {s.barrier} of CTA {cta_of(s.barrier)}: try_wait takes its own CTA's barrier"
                if bad is None and isinstance(s, OpStmt):
                    for a in s.reads:
                        if cta_of(a.buffer) != c:
                            bad = f"{at}: {s.op} reads {a.buffer} of CTA {cta_of(a.buffer)}, not its own CTA's"
                    if s.barrier is not None:
                        for w in s.writes:
                            if cta_of(w.buffer) != cta_of(s.barrier.barrier):
                                bad = (f"{at}: {s.op} writes {w.buffer} (CTA {cta_of(w.buffer)}) but completes on "
                                       f"{s.barrier.barrier} (CTA {cta_of(s.barrier.barrier)})")
        out.append(_result(f"cluster_form:{r.name}", "cluster_form", "roles",
                           f"{r.name}: waits on its own CTA's barriers, reads its own CTA's buffers, and each copy "
                           "writes the CTA whose barrier it completes on", bad))
    return out


def _init_visible(p: HopperProgram, uses: list[Remote]) -> list[ObligationResult]:
    out = []
    for b in p.barriers:
        mine = [u for u in uses if u.target == b.name]
        if not mine:
            continue
        u = mine[0]
        inits = [k for k, s in enumerate(p.setup) if isinstance(s, InitStmt) and s.barrier == b.name]
        guarded = next((k for k in inits if p.setup[k].guard is not None), None)
        fence = next((k for k, s in enumerate(p.setup) if inits and k > max(inits) and isinstance(s, FenceStmt)
                      and s.fence == "mbarrier_init" and s.guard is None), None)
        sync = next((k for k, s in enumerate(p.setup) if fence is not None and k > fence
                     and isinstance(s, ClusterSyncStmt) and s.guard is None), None)
        if not inits:
            why = f"setup never initializes {b.name}"
        elif guarded is not None:  # where the guard is false the barrier is never initialized
            why = (f"setup initializes {b.name} only under the guard {p.setup[guarded].guard} "
                   f"(setup statement {guarded})")
        elif fence is None:
            why = (f"setup has no fence.mbarrier_init.release.cluster after {b.name}'s init (a CTA-scope fence and "
                   f"the CTA barrier make it visible to CTA {u.to}'s own threads only)")
        elif sync is None:
            why = (f"setup has no cluster barrier after {b.name}'s init and its fence (the CTA barrier ending setup "
                   f"orders CTA {u.to}'s own threads only)")
        else:
            why = None
        bad = None if why is None else \
            f"{u.text()}, but {why}: it may reach {b.name} before CTA {u.to} has initialized it"
        out.append(_result(f"init_visible:{b.name}", "init_visible", "setup",
                           f"{b.name} (CTA {cta_of(b.name)}), touched by another CTA, is initialized, fenced with "
                           "fence.mbarrier_init.release.cluster and followed by a cluster barrier in setup", bad))
    return out


def _safe_exit(p: HopperProgram, uses: list[Remote]) -> list[ObligationResult]:
    out = []
    order = {(r.name, pt.name, k): n for n, (r, pt, k, _) in enumerate(_stmts(p))}
    for d in sorted({u.to for u in uses}):
        mine = [u for u in uses if u.to == d]
        last = max(mine, key=lambda u: order[(u.role, u.part, u.pos)])
        sync = next((k for k, s in enumerate(p.teardown) if isinstance(s, ClusterSyncStmt) and s.guard is None), None)
        early = next((k for k, s in enumerate(p.teardown) if isinstance(s, InvalStmt) and cta_of(s.barrier) == d
                      and (sync is None or k < sync)), None)
        if sync is None:
            why = f"teardown has no cluster barrier: CTA {d} may exit (and invalidate its barriers) before it"
        elif early is not None:
            why = f"teardown invalidates {p.teardown[early].barrier} (teardown[{early}]) before its cluster barrier"
        else:
            why = None
        bad = None if why is None else f"the last remote use of CTA {d}: {last.text()}; {why}"
        out.append(_result(f"safe_exit:cta{d}", "safe_exit", "teardown",
                           f"CTA {d}, which other CTAs arrive on or write into, leaves only after a cluster barrier "
                           "that ends every role of the cluster (teardown starts with it)", bad))
    return out


def cluster_obligations(p: HopperProgram) -> tuple[ObligationResult, ...]:
    """The :data:`CLUSTER_CLASSES` obligations of cluster program ``p``, each proven or refuted with a
    counterexample naming the role, its CTA and the barrier (or CTA) at stake."""
    uses = remote_uses(p)
    return tuple(_form(p) + _init_visible(p, uses) + _safe_exit(p, uses))


@dataclass(frozen=True)
class ClusterReport:
    ok: bool
    hopper: object
    """The :class:`synth.verify.phases.HopperReport` of the whole cluster's barrier protocol."""
    cluster: tuple[ObligationResult, ...]
    seconds: float = 0.0

    @property
    def obligations(self) -> tuple:
        return tuple(self.hopper.obligations) + self.cluster

    def refuted_classes(self) -> set[str]:
        return {o.kind for o in self.obligations if o.status == "refuted"}

    def render(self) -> str:
        lines = [self.hopper.render()]
        n_ok = sum(o.status == "proven" for o in self.cluster)
        lines.append(f"cluster: {n_ok}/{len(self.cluster)} cluster obligations proven")
        for o in self.cluster:
            if o.status != "proven":
                lines.append(f"{o.status} [{o.kind}] {o.description}")
                lines.append(f"    {o.reason}")
        return "\n".join(lines)


def verify_cluster(p: HopperProgram, **kw) -> ClusterReport:
    """``verify_hopper(p, **kw)`` (every barrier class over all the cluster's roles, every ``T``) and the
    :data:`CLUSTER_CLASSES` obligations; ``ok`` iff every obligation of both is proven."""
    t0 = time.perf_counter()
    h = verify_hopper(p, **kw)
    c = cluster_obligations(p)
    return ClusterReport(h.ok and all(o.status == "proven" for o in c), h, c, time.perf_counter() - t0)


def is_cluster_program(p: HopperProgram) -> bool:
    """Whether ``p`` is checked as a thread-block cluster program from its own data (docs/hopper_cluster.md,
    "Which programs are cluster programs"): it holds a ``cluster_sync`` statement (setup or teardown), or a
    role whose name ends in a CTA index issues a copy that completes on, or writes into, a barrier or buffer
    whose name ends in another index (a multicast). A remote *arrive* alone does not count: ping-pong's order
    program (``pp0`` arrives on ``order1``) is one CTA. The same rule is
    :func:`synth.trusted.certify.is_cluster_program`'s, on the file's bytes."""
    if any(isinstance(s, ClusterSyncStmt) for s in tuple(p.setup) + tuple(p.teardown)):
        return True
    return any(u.what.startswith("multicasts") for u in remote_uses(p))


def prove_hopper(p: HopperProgram, *, cluster: bool = False, time_limit: float = 10.0,
                 deadline: Optional[float] = None):
    """The :class:`~synth.verify.phases.HopperReport` of ``p``: every barrier class of
    :func:`~synth.verify.phases.verify_hopper` and, for a cluster program, the cluster classes of
    :func:`verify_cluster` (``cluster_form``, ``init_visible``, ``safe_exit``) among its
    obligations (``ok`` only when all are proven). The cluster classes are checked when ``cluster`` (the folder
    declares a cluster) or :func:`is_cluster_program` (the program's own data says so: a program that
    multicasts is never proven as one CTA)."""
    if not (cluster or is_cluster_program(p)):
        return verify_hopper(p, time_limit=time_limit, deadline=deadline)
    rep = verify_cluster(p, time_limit=time_limit, deadline=deadline)
    return replace(rep.hopper, ok=bool(rep.ok), obligations=tuple(rep.hopper.obligations) + tuple(rep.cluster),
                   seconds=rep.seconds)


# --------------------------------------------------------------------------------------------
# the known cluster bugs, as mutants of a lowered cluster program
# --------------------------------------------------------------------------------------------

def _edit(p: HopperProgram, role: str, fn: Callable) -> HopperProgram:
    prog = p.role(role).program
    return p.with_role(role, replace(prog, parts=tuple(replace(pt, stmts=tuple(fn(pt, list(pt.stmts))))
                                                       for pt in prog.parts)))


def local_empty_count(p: HopperProgram) -> HopperProgram:
    """Each CTA's empty barrier initialized for its own consumer warp groups only (the remote releases
    still arrive): a phase completes on the local releases alone."""
    n = len({cta_of(r.name) for r in p.roles})
    return replace(p, barriers=tuple(replace(b, count=b.count // n) if b.kind == "empty" else b for b in p.barriers))


def own_part_expect_tx(p: HopperProgram, cta: int = 0) -> HopperProgram:
    """CTA ``cta``'s ``expect_tx`` counts its own part of the shared box, not the peers' multicast: the
    entries gated by a peer's copy are dropped, or (ungated entries) the bytes of the peers' copies
    onto its barrier are taken off the last entries."""
    peer_ops = {s.op: s.barrier for r, _, _, s in _stmts(p) if isinstance(s, OpStmt) and s.barrier is not None
                and cta_of(r.name) != cta}

    def fn(pt, st):
        out = []
        for s in st:
            if isinstance(s, ArriveStmt) and s.tx:
                onto = {op: ref.bytes for op, ref in peer_ops.items() if ref.barrier == s.barrier}
                keep = tuple(t for t in s.tx if t.gate not in onto)
                if keep == s.tx:
                    keep = _less(s.tx, sum(onto.values()))
                s = replace(s, tx=keep)
            out.append(s)
        return out
    return _edit(p, f"producer{cta}", fn)


def _less(tx: tuple, nbytes: int) -> tuple:
    """``tx`` with ``nbytes`` taken off its last entries."""
    out = list(tx)
    while nbytes and out:
        t = out.pop()
        if t.bytes > nbytes:
            out.append(Tx(t.bytes - nbytes, t.gate))
            nbytes = 0
        else:
            nbytes -= t.bytes
    return tuple(out)


def mask_missing_peer(p: HopperProgram, src: int = 1, dst: int = 0) -> HopperProgram:
    """CTA ``src``'s multicast mask lacks CTA ``dst``: its part of the shared box never lands there (the
    copy statement is gone; CTA ``dst``'s consumers read the slot with no producer for that part)."""
    gone: set = set()
    for r, _, _, s in _stmts(p):
        if r.name == f"producer{src}" and isinstance(s, OpStmt) and s.barrier is not None \
                and cta_of(s.barrier.barrier) == dst:
            gone.add(s.op)

    def drop_copy(pt, st):
        return [s for s in st if not (isinstance(s, OpStmt) and s.op in gone)]

    def drop_read(pt, st):
        return [replace(s, reads=tuple(a for a in s.reads if a.producer not in gone)) if isinstance(s, OpStmt) else s
                for s in st]
    q = _edit(p, f"producer{src}", drop_copy)
    for r in q.roles:
        if cta_of(r.name) == dst:
            q = _edit(q, r.name, drop_read)
    return q


def cta_scope_init_fence(p: HopperProgram) -> HopperProgram:
    """The init made visible at CTA scope only: ``fence.proxy.async`` and the CTA barrier, as in a kernel
    of one CTA (no cluster-scope fence, no cluster barrier)."""
    setup = tuple(FenceStmt("proxy_async") if isinstance(s, FenceStmt) and s.fence == "mbarrier_init" else s
                  for s in p.setup if not isinstance(s, ClusterSyncStmt))
    return replace(p, setup=setup)


def no_cluster_sync_after_init(p: HopperProgram) -> HopperProgram:
    """The cluster-scope fence after the inits, but no cluster barrier: a peer may arrive first."""
    return replace(p, setup=tuple(s for s in p.setup if not isinstance(s, ClusterSyncStmt)))


def no_cluster_sync_before_exit(p: HopperProgram) -> HopperProgram:
    """No cluster barrier before the invalidations and the exit: a CTA may leave before its peer's last
    remote arrive (the consumers' final releases on the peer's empty barrier)."""
    return replace(p, teardown=tuple(s for s in p.teardown if not isinstance(s, ClusterSyncStmt)))


def trip_mismatch(p: HopperProgram, cta: int = 1, extra: int = 1) -> HopperProgram:
    """CTA ``cta``'s roles run ``T + extra`` k-tiles while the others run ``T`` (two CTAs of one cluster
    with different K trip counts sharing barriers and the multicast, the DeepGEMM #429 shape): every
    part of extent ``T`` gets ``T + extra``, and every ``T`` in its statements reads ``T + extra``."""
    T = p.trip_count
    if not isinstance(T, str):
        raise ValueError("trip_mismatch needs a symbolic trip count")
    more = simplify(Bin("+", Var(T), Num(extra)))

    def fix(e):
        return None if e is None else simplify(substitute(e, {T: more}))

    def stmt(s):
        if isinstance(s, OpStmt):
            b = None if s.barrier is None else replace(s.barrier, state=replace(s.barrier.state,
                                                                               count=fix(s.barrier.state.count)))
            return replace(s, iteration=fix(s.iteration), guard=fix(s.guard), barrier=b,
                           reads=tuple(replace(a, version=fix(a.version), slot=fix(a.slot)) for a in s.reads),
                           writes=tuple(replace(a, version=fix(a.version), slot=fix(a.slot)) for a in s.writes))
        if hasattr(s, "state"):
            return replace(s, state=replace(s.state, count=fix(s.state.count)), guard=fix(s.guard))
        return replace(s, guard=fix(s.guard)) if hasattr(s, "guard") else s

    out = p
    for r in p.roles:
        if cta_of(r.name) != cta:
            continue
        prog = r.program
        parts = tuple(Part(pt.name, pt.var, fix(pt.extent), tuple(stmt(s) for s in pt.stmts)) for pt in prog.parts)
        waits = tuple(replace(w, in_flight=fix(w.in_flight)) for w in prog.waits)
        out = out.with_role(r.name, replace(prog, parts=parts, waits=waits))
    return out


CLUSTER_BUGS: dict[str, tuple[Callable, str, frozenset]] = {
    "local_empty_count": (local_empty_count, "empty barrier counting only local consumers",
                          frozenset({"arrivals", "no_deadlock"})),
    "own_part_expect_tx": (own_part_expect_tx, "expect_tx counting only the CTA's own half",
                           frozenset({"tx_bytes", "no_deadlock"})),
    "mask_missing_peer": (mask_missing_peer, "multicast mask missing the peer",
                          frozenset({"tx_bytes", "no_deadlock"})),
    "cta_scope_init_fence": (cta_scope_init_fence, "init fence at CTA scope only (no cluster-scope fence, no "
                             "cluster barrier)", frozenset({"init_visible"})),
    "no_cluster_sync_after_init": (no_cluster_sync_after_init, "no cluster barrier after init",
                                   frozenset({"init_visible"})),
    "no_cluster_sync_before_exit": (no_cluster_sync_before_exit, "a CTA leaving before its peer's last remote arrive",
                                    frozenset({"safe_exit"})),
    "trip_mismatch": (trip_mismatch, "peers with different trip counts sharing barriers (DeepGEMM #429)",
                      frozenset({"tx_bytes", "no_deadlock"})),
}
"""``name: (mutant of a lowered cluster program, the bug, classes that must be refuted)``."""


__all__ = ["cta_of", "remote_uses", "Remote", "cluster_obligations", "verify_cluster", "ClusterReport",
           "is_cluster_program", "prove_hopper",
           "CLUSTER_CLASSES", "CLUSTER_BUGS", "local_empty_count", "own_part_expect_tx", "mask_missing_peer",
           "cta_scope_init_fence", "no_cluster_sync_after_init", "no_cluster_sync_before_exit", "trip_mismatch"]

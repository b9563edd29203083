"""How async ops complete: group FIFOs and barrier phases, one model (docs/hopper.md).

An async op statement of :mod:`synth.program` completes either through a **group
FIFO** (its ``group``: ``cp.async``, ``wgmma``; observed by ``wait_group N``) or
through a **barrier phase** (its ``barrier``, a :class:`BarrierRef`: a TMA copy's
``complete_tx``; observed by ``try_wait.parity``). This module holds the second
variant's vocabulary: :class:`PipelineState` (the value CUTLASS 3.x keeps for a
pipeline position; slot and parity are derived from it, never stored), barrier
declarations and the barrier statements (init, arrive / expect_tx, try_wait,
fence, inval, and ``bar_sync``: a named barrier over a warp group, a convergence point), with
their JSON forms. It imports nothing from synth but
:mod:`synth.expr`, so :mod:`synth.program` can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .expr import Bin, Expr, Num, parse, simplify, to_str
from .trusted.hopper_program import BOUNDS

BARRIER_KINDS = ("full", "empty")
FENCES = ("mbarrier_init", "proxy_async")


@dataclass(frozen=True)
class PipelineState:
    """A pipeline position: iteration ``count`` (an expression in the part's ``i`` and ``T``)
    on a ring of ``stages`` slots; ``phase`` is the parity of the first pass (1 for producers
    waiting on slots that start empty)."""

    count: Expr
    stages: int
    phase: int = 0

    def index(self) -> Expr:
        """The slot: ``count % stages``."""
        return simplify(Bin("%", self.count, Num(self.stages)))

    def ring_phase(self) -> Expr:
        """Which pass over the ring: ``count / stages``."""
        return simplify(Bin("/", self.count, Num(self.stages)))

    def parity(self) -> Expr:
        """The parity a ``try_wait.parity`` on this state passes: ``(count / stages + phase) % 2``."""
        e: Expr = Bin("/", self.count, Num(self.stages))
        if self.phase:
            e = Bin("+", e, Num(self.phase))
        return simplify(Bin("%", e, Num(2)))

    def to_json(self) -> dict:
        return {"count": to_str(self.count), "stages": self.stages, "phase": self.phase}


def _bound(field: str) -> int:
    """The largest value of an integer field of the Hopper form: the trusted reader's bound (docs/bounds.md)."""
    return BOUNDS[field][1]


def state_from_json(d: dict, *, waits: bool = True) -> PipelineState:
    """A :class:`PipelineState`; ``waits=False`` for an arrive or a TMA's ``complete_tx``, which act on
    the barrier's current phase and take no parity: their ``phase`` must then be 0, so an edited one is
    refused instead of ignored."""
    c = d["count"]
    if isinstance(c, bool) or not isinstance(c, (str, int)):
        raise ValueError(f"state.count: expected an expression, got {c!r}")
    st, ph = d["stages"], d.get("phase", 0)
    for name, v in (("stages", st), ("phase", ph)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"state.{name}: expected an integer, got {v!r}")
    hi = _bound("stages")
    if not 1 <= st <= hi or ph not in (0, 1):
        raise ValueError(f"state: stages must be in 1..{hi} and phase 0 or 1, got {st}, {ph}")
    if not waits and ph:
        raise ValueError(f"state.phase is {ph}, but an arrive or complete_tx acts on the current phase and "
                         "takes no parity: write phase 0")
    return PipelineState(parse(c), st, ph)


@dataclass(frozen=True)
class Barrier:
    """An array of ``slots`` mbarriers, each initialized with arrival count ``count``."""

    name: str
    slots: int
    count: int
    kind: str
    """``full`` (completed by TMA bytes, waited before reads) or ``empty`` (released by readers)."""
    guards: tuple[str, ...] = ()
    """Buffers whose slots this barrier hands over."""

    def to_json(self) -> dict:
        return {"name": self.name, "slots": self.slots, "count": self.count, "kind": self.kind,
                "guards": list(self.guards)}


@dataclass(frozen=True)
class BarrierRef:
    """The barrier-phase completion of a TMA op statement: ``complete_tx`` of ``bytes`` (the full
    box, out-of-bound parts included) on the slot and phase ``state`` names."""

    barrier: str
    state: PipelineState
    bytes: int

    def to_json(self) -> dict:
        return {"barrier": self.barrier, "state": self.state.to_json(), "bytes": self.bytes}


def barrier_ref_from_json(d: dict) -> BarrierRef:
    b = d["bytes"]
    if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= _bound("bytes"):
        raise ValueError(f"barrier.bytes: expected an integer in 0..{_bound('bytes')}, got {b!r}")
    return BarrierRef(_name(d["barrier"]), state_from_json(d["state"], waits=False), b)


@dataclass(frozen=True)
class Tx:
    """Bytes an ``expect_tx`` announces: always, or only when op ``gate``'s predicate holds at the
    statement's iteration (``state.count``)."""

    bytes: int
    gate: Optional[str] = None


@dataclass(frozen=True)
class ArriveStmt:
    """``mbarrier.arrive`` (``arrivals`` 1), ``arrive.expect_tx`` (with ``tx``) or ``expect_tx``
    alone (``arrivals`` 0), on the slot and current phase of ``barrier`` that ``state`` names."""

    barrier: str
    state: PipelineState
    arrivals: int = 1
    tx: tuple[Tx, ...] = ()
    guard: Optional[Expr] = None
    elected: bool = True
    """Run by one elected thread of each warp group while the role's other threads skip it (the
    kernel's ``if (wt == 0)``; ``False``: by every thread). In a role of one thread every statement
    runs on that thread; in a role of many threads (:attr:`synth.hopper.ir.Role.threads`) an arrive
    must be elected (synth counts one arrival per warp group), and the ``converge`` proof asks that
    the warp group's threads be converged before it (docs/hopper.md)."""
    kind: str = field(default="arrive", init=False)


@dataclass(frozen=True)
class TryWaitStmt:
    """Loop on ``mbarrier.try_wait.parity`` of the slot ``state`` names, parity derived."""

    barrier: str
    state: PipelineState
    guard: Optional[Expr] = None
    kind: str = field(default="try_wait", init=False)


@dataclass(frozen=True)
class BarSyncStmt:
    """``bar.sync id, threads``: a named CTA barrier over the threads of one warp group of the role
    (warp group ``w`` of the role uses barrier ``id + w``; the thread count is the role's ``threads``).
    No thread passes it before every thread of its warp group has reached it: a convergence point
    (docs/hopper.md, "Threads"; the PTX citation is in docs/trust.md)."""

    id: int
    guard: Optional[Expr] = None
    kind: str = field(default="bar_sync", init=False)


@dataclass(frozen=True)
class InitStmt:
    barrier: str
    guard: Optional[Expr] = None
    kind: str = field(default="init", init=False)


@dataclass(frozen=True)
class InvalStmt:
    barrier: str
    guard: Optional[Expr] = None
    kind: str = field(default="inval", init=False)


@dataclass(frozen=True)
class FenceStmt:
    fence: str
    guard: Optional[Expr] = None
    kind: str = field(default="fence", init=False)


@dataclass(frozen=True)
class ClusterSyncStmt:
    """``barrier.cluster.arrive.release`` then ``barrier.cluster.wait.acquire`` by every thread of every CTA
    of the cluster: a ``setup`` or ``teardown`` statement only (a role never holds one). In ``setup``, after
    the inits and the init fence, it makes every CTA's barrier inits visible to its peers before any remote
    arrive or multicast; in ``teardown``, before the invalidations, no CTA leaves while a peer may still
    arrive on its barriers or write into its shared memory (docs/hopper_cluster.md)."""

    guard: Optional[Expr] = None
    kind: str = field(default="cluster_sync", init=False)


BARRIER_STMTS = (ArriveStmt, TryWaitStmt, InitStmt, InvalStmt, FenceStmt, BarSyncStmt)


def _name(x) -> str:
    if not isinstance(x, str):
        raise ValueError(f"expected a name, got {x!r}")
    return x


def _guard(d: dict) -> Optional[Expr]:
    g = d.get("guard")
    if g is None:
        return None
    if isinstance(g, bool) or not isinstance(g, (str, int)):
        raise ValueError(f"guard: expected an expression, got {g!r}")
    return parse(g)


def barrier_stmt_json(s) -> dict:
    """The JSON object of a barrier statement."""
    g = None if s.guard is None else to_str(s.guard)
    if isinstance(s, ArriveStmt):
        return {"kind": "arrive", "barrier": s.barrier, "state": s.state.to_json(), "arrivals": s.arrivals,
                "tx": [{"bytes": t.bytes, "gate": t.gate} for t in s.tx], "guard": g, "elected": s.elected}
    if isinstance(s, TryWaitStmt):
        return {"kind": "try_wait", "barrier": s.barrier, "state": s.state.to_json(), "guard": g}
    if isinstance(s, FenceStmt):
        return {"kind": "fence", "fence": s.fence, "guard": g}
    if isinstance(s, BarSyncStmt):
        return {"kind": "bar_sync", "id": s.id, "guard": g}
    if isinstance(s, ClusterSyncStmt):
        return {"kind": "cluster_sync", "guard": g}
    return {"kind": s.kind, "barrier": s.barrier, "guard": g}


def barrier_stmt_from_json(d: dict):
    """Inverse of :func:`barrier_stmt_json`; ValueError on a malformed object."""
    kind = d["kind"]
    if kind == "arrive":
        n = d.get("arrivals", 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _bound("arrivals"):
            raise ValueError(f"arrive.arrivals: expected an integer in 0..{_bound('arrivals')}, got {n!r}")
        tx = []
        for t in d.get("tx", []):
            b = t["bytes"]
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= _bound("bytes"):
                raise ValueError(f"tx.bytes: expected an integer in 0..{_bound('bytes')}, got {b!r}")
            gate = t.get("gate")
            tx.append(Tx(b, None if gate is None else _name(gate)))
        el = d.get("elected", True)
        if not isinstance(el, bool):
            raise ValueError(f"arrive.elected: expected true or false, got {el!r}")
        return ArriveStmt(_name(d["barrier"]), state_from_json(d["state"], waits=False), n, tuple(tx), _guard(d), el)
    if kind == "try_wait":
        return TryWaitStmt(_name(d["barrier"]), state_from_json(d["state"]), _guard(d))
    if kind == "fence":
        f = d["fence"]
        if f not in FENCES:
            raise ValueError(f"fence: expected one of {FENCES}, got {f!r}")
        return FenceStmt(f, _guard(d))
    if kind == "bar_sync":
        b = d["id"]
        lo, hi = 1, _bound("bar_id")
        if isinstance(b, bool) or not isinstance(b, int) or not lo <= b <= hi:
            raise ValueError(f"bar_sync.id: expected an integer in {lo}..{hi}, got {b!r}")
        return BarSyncStmt(b, _guard(d))
    if kind == "cluster_sync":
        return ClusterSyncStmt(_guard(d))
    if kind == "init":
        return InitStmt(_name(d["barrier"]), _guard(d))
    if kind == "inval":
        return InvalStmt(_name(d["barrier"]), _guard(d))
    raise ValueError(f"unknown statement kind {kind!r}")


STMT_KINDS = ("arrive", "try_wait", "fence", "init", "inval", "bar_sync")
"""Statement kinds of this module (beside :mod:`synth.program`'s op, commit, wait) a role's part may hold;
``cluster_sync`` (:class:`ClusterSyncStmt`) stands only in ``setup`` and ``teardown``, so a part refuses it."""


__all__ = ["PipelineState", "Barrier", "BarrierRef", "Tx", "ArriveStmt", "TryWaitStmt", "InitStmt", "InvalStmt",
           "FenceStmt", "BarSyncStmt", "ClusterSyncStmt", "BARRIER_STMTS", "BARRIER_KINDS", "FENCES", "STMT_KINDS", "barrier_stmt_json",
           "barrier_stmt_from_json", "state_from_json", "barrier_ref_from_json"]

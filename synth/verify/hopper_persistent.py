"""Persistent tiles: a CTA's pipeline state carried across its output tiles, and its proof (docs/hopper.md,
"Persistent tiles").

A persistent CTA computes ``n >= 0`` output tiles of ``T >= 1`` k-tiles each. Its producer and
consumers run the warp-specialized program of :func:`synth.lower.barriers.lower_hopper` as ONE ring
of ``N = n T`` iterations: iteration ``g = t T + k`` is k-tile ``k`` of the CTA's ``t``-th tile, and
every barrier slot, smem slot and parity is the program's at the running count ``g`` (never reset at
a tile). The per-tile kernel code only adds, at each tile's end, the consumer's ``wait_group 0`` (so
the accumulators can be read) and the C store; the slot releases stay where the ring program puts
them (the last ``K_PIPE_MMAS`` of a tile are released in the next tile's first iterations, or by the
ring's drain after the last tile).

A :class:`~synth.lower.hopper_persistent.TileCarry` (the lowering's, with :func:`~synth.lower.hopper_persistent.tile_end_program`)
is how a role's kernel code computes the state of tile ``t`` from the tile-local ``k``: the running count at the tile start used for the slot (``slot_base``), the one used for the
parity (``parity_base``), and a parity flip (``flip``), each an expression in ``t`` and ``T``. The
correct carry is ``t * T``, ``t * T``, ``0``; the known bugs are other carries (:data:`CARRY_MUTANTS`).

:func:`verify_persistent` proves a persistent kernel's protocol for every ``n >= 0`` and ``T >= 1``:
the ring program by :func:`synth.verify.phases.verify_hopper` for every trip count ``N >= 1``;
``carry`` (new): every barrier statement and smem slot of every role computes, at every tile ``t``
and k-tile ``k``, the slot and parity of the running count (Z3, ``t`` and ``T`` symbolic). A CTA with
no tile (``n = 0``) skips both roles (the kernel's ``if (tiles > 0)``): it initializes and
invalidates its barriers and uses none. Pure.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Mapping, Optional
import z3

from ..completion import ArriveStmt, TryWaitStmt
from ..expr import Num, parse, to_z3
from ..hopper.ir import HopperProgram
from ..lower.hopper_persistent import CANONICAL, TileCarry, role_carry, role_kind, tile_end_program
from ..program import OpStmt
from .hopper_cluster import verify_cluster
from .phases import STATS, ProofPhase, verify_hopper

_CTA = re.compile(r"[0-9]+\Z")

CARRY_MUTANTS: dict[str, TileCarry] = {
    # the phase restarted on each (dynamically scheduled) tile: the state rebuilt from the tile-local k
    "phase_reset": TileCarry("0", "0", "0"),
    # the slot from the running count, the parity from the tile-local k: ((k / S) % 2)
    "tile_local_parity": TileCarry(CANONICAL, "0", "0"),
    # the parity inverted only on a CTA's second tile
    "second_tile_parity_flip": TileCarry(CANONICAL, CANONICAL, "(t == 1) ? 1 : 0"),
}
"""Carries of the bugs a persistent kernel is known to have (docs/hopper.md, "Persistent tiles")."""


@dataclass(frozen=True)
class PersistentResult:
    """``ring``: the ring program's :class:`~synth.verify.phases.HopperReport`; ``checks``: obligation ->
    ``(ok, detail)`` (``carry``, ``tile_end``)."""

    ring: object
    checks: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.ring.ok) and all(ok for ok, _ in self.checks.values())

    def render(self) -> str:
        lines = [f"ring program (every N >= 1): {'proven' if self.ring.ok else 'REFUTED'}"]
        if not self.ring.ok:
            lines.append(self.ring.render())
        for name, (ok, detail) in self.checks.items():
            lines.append(f"{name}: {'proven' if ok else 'REFUTED'}{': ' + detail if detail else ''}")
        return "\n".join(lines)


def _barrier_uses(program: HopperProgram):
    """``(role, part, statement text, count expression, stages, phase, is_wait, guard)`` of every barrier
    statement and smem slot access of every role."""
    for role in program.roles:
        for part in role.program.parts:
            for s in part.stmts:
                guard = getattr(s, "guard", None)
                if isinstance(s, TryWaitStmt):
                    yield role.name, part, f"try_wait {s.barrier}", s.state.count, s.state.stages, s.state.phase, \
                        True, guard
                elif isinstance(s, ArriveStmt):
                    yield role.name, part, f"arrive {s.barrier}", s.state.count, s.state.stages, 0, False, guard
                elif isinstance(s, OpStmt):
                    if s.barrier is not None:
                        yield role.name, part, f"{s.op} complete_tx {s.barrier.barrier}", s.barrier.state.count, \
                            s.barrier.state.stages, 0, False, guard
                    for a in (*s.reads, *s.writes):
                        stages = next(b.multiplicity for b in program.buffers if b.name == a.buffer)
                        yield role.name, part, f"{s.op} slot of {a.buffer}", a.version, stages, 0, False, guard


def _smallest(solver, variables, rounds: int = 32):
    """The model of a satisfiable ``solver`` with each of ``variables`` in turn pushed as low as it goes
    (at most ``rounds`` tightenings in all), so a counterexample names the first tile, the smallest T and
    the first k-tile that show the bug rather than whichever one Z3 happened to pick."""
    model = solver.model()
    for v in variables:
        while rounds > 0:
            rounds -= 1
            cur = model.eval(v, model_completion=True)
            solver.push()
            solver.add(v < cur)
            r = solver.check()
            if r == z3.sat:
                model = solver.model()
                solver.pop()
                solver.add(v <= model.eval(v, model_completion=True))
                continue
            solver.pop()
            solver.add(v == cur)  # fixed, so the next variable's search keeps it
            break
    return model


def _cta_of(role: str) -> str:
    """``'CTA c, '`` for a cluster program's role of CTA ``c`` (a counterexample names it), else ``''``."""
    m = _CTA.search(role)
    return f"CTA {int(m.group(0))}, " if m else ""


def check_carry(program: HopperProgram, carry: Mapping[str, TileCarry], *, time_limit: float = 20.0) -> tuple[bool, str]:
    """``(True, '')`` when, for every role (each role of each CTA of a cluster program: :func:`role_carry` gives
    its carry), every barrier statement and smem access computes at every tile ``t >= 0`` (body: k-tile
    ``0 <= k < T``; the ring's drain after the ``n``-th tile: ``t = n``) the slot (and, for a wait, the parity)
    of the running count; else ``(False, counterexample)`` naming the role (and its CTA), the statement, the
    barrier or buffer, the tile, the k-tile, ``T`` and both parities. Z3, ``t``, ``T``, ``k`` symbolic
    (non-linear: ``t T``)."""
    t, T, k = z3.Int("t"), z3.Int("T"), z3.Int("k")
    for role, part, what, count, stages, phase, is_wait, guard in _barrier_uses(program):
        c = role_carry(carry, role)
        if c.canonical:
            continue  # the kernel writes the ring program's own expressions
        base = t * T
        env = {"t": t, "T": T}
        sb, pb, fl = (to_z3(parse(x), env) for x in (c.slot_base, c.parity_base, c.flip))
        s = z3.Solver()
        s.set("timeout", int(time_limit * 1000))
        s.add(t >= 0, T >= 1)
        if part.name == "body":
            g = base + k
            s.add(k >= 0, k < T)
            ring_env = {part.var: g, "T": z3.Int("N")}
            s.add(z3.Int("N") >= base + T)  # the CTA has at least t + 1 tiles
        else:  # the ring's drain after the last tile: t = n, N = n T
            s.add(k >= 0)
            if isinstance(part.extent, Num):
                s.add(k < part.extent.value)
            ring_env = {part.var: k, "T": base}
            s.add(t >= 1)
        cnt = to_z3(count, ring_env)
        if guard is not None:
            s.add(to_z3(guard, ring_env))
        local = cnt - base
        ks, kp = sb + local, pb + local
        s.add(cnt >= 0)
        # a negative count is refused too: C's / and % (truncating) agree with Z3's only from 0 up
        bad = z3.Or(ks < 0, ks % stages != cnt % stages)
        if is_wait:
            bad = z3.Or(bad, kp < 0, (kp / stages + phase + fl) % 2 != (cnt / stages + phase) % 2)
        s.add(bad)
        r = s.check()
        if r == z3.unsat:
            continue
        who = f"{role} ({_cta_of(role)}carry slot {c.slot_base}, parity {c.parity_base}, flip {c.flip})"
        if r != z3.sat:
            return False, f"{who}: {what}: undecided ({s.reason_unknown()})"
        m = _smallest(s, (t, T, k))
        val = lambda e: m.eval(e, model_completion=True).as_long()  # noqa: E731
        tile, kt, TT, g = val(t), val(k), val(T), val(cnt)
        par = f"; parity {(val(kp) // stages + phase + val(fl)) % 2}, the running count's {(g // stages + phase) % 2}" \
            if is_wait else ""
        where = f"k-tile {kt}" if part.name == "body" else f"drain step {kt} after the last tile"
        if val(ks) < 0 or (is_wait and val(kp) < 0):
            return False, (f"{who}: {what} at the CTA's tile {tile}, {where}, T = {TT}: the carried count is "
                           f"negative (running count {g})")
        return False, (f"{who}: {what} at the CTA's tile {tile}, {where}, T = {TT}: running count {g}, slot "
                       f"{val(ks) % stages} (should be {g % stages}){par}")
    return True, ""


def tile_end_sizes(stages: int) -> range:
    """The k-tile counts per tile at which ``synth solve`` checks the tile end in place: 1 .. ``stages + 1``
    (a tile shorter than the ring, as long as it, one longer)."""
    return range(1, stages + 2)


@dataclass(frozen=True)
class TileEnds:
    """What :func:`prove_tile_ends` proved: ``ok`` and, when not, ``why`` (the failing program's report); the
    tile sizes checked, the obligations of their programs (all of them, proven or not, until the first program
    that failed), how many were proven, the wall-clock seconds and the Z3 queries asked (an obligation of a
    tile-end program identical to the ring's, or another tile end's, is answered without one)."""

    ok: bool
    why: str
    kts: tuple
    obligations: int
    proven: int
    seconds: float
    queries: int

    def phase(self):
        """The :class:`~synth.verify.phases.ProofPhase` of this check (``synth solve``'s summary)."""
        sizes = f"{self.kts[0]} .. {self.kts[-1]}" if len(self.kts) > 1 else str(self.kts[0]) if self.kts else "none"
        return ProofPhase(f"tile ends at {sizes} k-tiles per tile ({len(self.kts)} programs)", self.obligations,
                          self.proven, self.seconds, self.queries)


def prove_tile_ends(program: HopperProgram, kts, *, time_limit: float = 20.0,
                    deadline: Optional[float] = None) -> TileEnds:
    """:func:`tile_end_program` at each ``kt`` of ``kts`` proven by ``verify_hopper`` for every trip count (the
    kernel's tile-end ``wait_group 0`` checked in place, at those tile sizes, for every tile count; for other
    sizes it rests on the argument of docs/hopper.md, "Persistent tiles"), stopping at the first program not
    proven; ``deadline``: a :func:`time.monotonic` instant bounding each proof (``verify_hopper``'s). Each
    program is the ring plus one ``wait_group`` per consumer: its obligations that read no wait have the ring's
    terms and are answered by the ring's proof (:func:`synth.verify.phases.barrier_view`)."""
    t0, q0 = time.perf_counter(), STATS["queries"]
    kts = tuple(kts)
    n = ok_n = 0
    for kt in kts:
        r = verify_hopper(tile_end_program(program, kt), time_limit=time_limit, tightness=False, deadline=deadline)
        n += len(r.obligations)
        ok_n += sum(o.status == "proven" for o in r.obligations)
        if not r.ok:
            return TileEnds(False, f"with the tile-end wait_group 0 at {kt} k-tile(s) per tile:\n{r.render()}", kts,
                            n, ok_n, time.perf_counter() - t0, STATS["queries"] - q0)
    return TileEnds(True, "", kts, n, ok_n, time.perf_counter() - t0, STATS["queries"] - q0)


def check_tile_ends(program: HopperProgram, kts, *, time_limit: float = 20.0,
                    deadline: Optional[float] = None) -> tuple[bool, str]:
    """``(True, '')`` when :func:`prove_tile_ends` proves every program, else ``(False, why)``."""
    r = prove_tile_ends(program, kts, time_limit=time_limit, deadline=deadline)
    return r.ok, r.why


def is_cluster_ring(program: HopperProgram) -> bool:
    """Whether ``program`` is a thread-block cluster's (its roles name their CTA: ``producer0``, ``consumer1``, ...,
    as :func:`synth.lower.cluster.lower_hopper_cluster` writes them)."""
    return any(r.name != role_kind(r.name) for r in program.roles)


def verify_persistent(program: HopperProgram, carry: Optional[Mapping[str, TileCarry]] = None, *,
                      time_limit: float = 60.0, tile_ends=(), cluster: Optional[bool] = None) -> PersistentResult:
    """The persistent kernel's proof (module docstring): the ring program for every ``N >= 1``
    (:func:`synth.verify.phases.verify_hopper`; a cluster program, ``cluster`` or by default
    :func:`is_cluster_ring`, by :func:`synth.verify.hopper_cluster.verify_cluster`: the barrier classes of every CTA's
    roles and the cluster classes, the ring of each CTA of a cluster being one trip count ``N`` for all, as the
    kernel's clusters take the same tile groups), the tile carry of each role of each CTA (default: the running
    count) (a CTA with no tile skips both roles in the kernel: its barriers are initialized and invalidated, and
    the ring proof's ``fence`` class covers those statements whatever the trip count; in a cluster both CTAs
    skip alike); with ``tile_ends`` (k-tile counts per tile) also :func:`check_tile_ends` (``tile_end``: every
    consumer role's)."""
    carry = dict(carry or {})
    if cluster is None:
        cluster = is_cluster_ring(program)
    if cluster:
        ring = verify_cluster(program, time_limit=time_limit, tightness=False)
    else:
        ring = verify_hopper(program, time_limit=time_limit, tightness=False)
    checks = {"carry": check_carry(program, carry)}
    if tile_ends:
        checks["tile_end"] = check_tile_ends(program, tile_ends)
    return PersistentResult(ring, checks)


__all__ = ["CARRY_MUTANTS", "PersistentResult", "check_carry", "check_tile_ends", "prove_tile_ends", "TileEnds",
           "tile_end_sizes", "is_cluster_ring", "verify_persistent"]

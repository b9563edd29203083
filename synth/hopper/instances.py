"""The statement instances a Hopper program's warp groups run at one trip count.

Input: a :class:`~synth.hopper.ir.HopperProgram`, a concrete trip count ``T`` and a role.
Output: the :class:`Instance` list one warp group of that role executes, in program order,
with every guard, op predicate (``when``) and commit gate evaluated and every barrier state
resolved to its slot, phase and parity. Both the explicit-state oracle
(:mod:`synth.verify.oracle_phases`) and the protocol timeline
(:mod:`synth.emit.timeline_hopper`) run these sequences; they differ only in what they do with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..completion import ArriveStmt, BarSyncStmt, TryWaitStmt
from ..expr import evaluate, parse
from ..program import CommitStmt, OpStmt, WaitStmt
from .ir import HopperProgram

OP_KINDS = ("tma", "wgmma", "op")


@dataclass(frozen=True)
class Instance:
    """One statement instance of a warp group."""

    kind: str
    """``wait`` (try_wait), ``arrive``, ``tma``, ``op`` (synchronous), ``wgmma``, ``commit``, ``wgwait``,
    ``bar_sync`` (a named barrier over the warp group)."""
    where: str
    """``role part i = ..``."""
    tile: int = -1
    """``wait``/``arrive``: the barrier state's count (the k-tile it is about); ops: the iteration."""
    barrier: str = ""
    slot: int = 0
    phase: int = 0
    """``arrive``/``tma``: the phase index its state names; ``wait``: the phase it waits for."""
    parity: int = 0
    """``wait``: the parity of its ``try_wait.parity``."""
    arrivals: int = 0
    bytes: int = 0
    """``arrive``: ``expect_tx`` bytes (gated ones only when their gate runs); ``tma``: its bytes."""
    count: int = 0
    """``wgwait``: its ``N``."""
    op: str = ""
    reads: tuple = ()
    """((buffer, slot, version), ...), only versions whose producer ran."""
    writes: tuple = ()
    release: tuple = ()
    """``arrive`` on an ``empty``-kind barrier: the (buffer, version) pairs it releases."""

    @property
    def need(self) -> int:
        """``wait``: how many phases of its barrier slot must have completed for it to pass."""
        return self.phase + 1

    @property
    def at(self) -> str:
        """Where it is, for messages: ``where`` and, for an op, ``op iteration k``."""
        return f"{self.where} {self.op} iteration {self.tile}" if self.kind in OP_KINDS else self.where


def role_instances(program: HopperProgram, T: int, role) -> list[Instance]:
    """The instances one warp group of ``role`` (one of ``program.roles``) runs at trip count ``T``.

    A gated commit is kept only when one of its gating ops runs; a read whose producer did not run
    at that version is dropped (there is nothing to wait for, as for cp.async)."""
    tsym = program.trip_count if isinstance(program.trip_count, str) else None
    tenv = {tsym: T} if tsym else {}
    whens = {o.name: (None if o.when in (None, "opaque") else parse(o.when)) for o in program.ops}
    is_async = {o.name: o.is_async for o in program.ops}
    bars = {b.name: b for b in program.barriers}

    def holds(op: str, it: int) -> bool:
        w = whens.get(op)
        return True if w is None else bool(evaluate(w, dict(tenv, **{program.loop_var: it})))

    def slot(bname: str, state, env) -> tuple[int, int, int]:
        x = int(evaluate(state.count, env))
        return x, (x % state.stages) % bars[bname].slots, x // state.stages

    def accesses(accs, env, producers: bool) -> tuple:
        return tuple((a.buffer, int(evaluate(a.slot, env)), int(evaluate(a.version, env))) for a in accs
                     if not producers or a.producer is None or holds(a.producer, int(evaluate(a.version, env))))

    seq: list[Instance] = []
    prog = role.program
    for part in prog.parts:
        for i in range(max(int(evaluate(part.extent, tenv)), 0)):
            env = dict(tenv, **{part.var: i})
            where = f"{role.name} {part.name} i = {i}"
            for s in part.stmts:
                if s.guard is not None and not evaluate(s.guard, env):
                    continue
                if isinstance(s, TryWaitStmt):
                    x, sl, n = slot(s.barrier, s.state, env)
                    seq.append(Instance("wait", where, x, s.barrier, sl, n - s.state.phase,
                                        int(evaluate(s.state.parity(), env))))
                elif isinstance(s, ArriveStmt):
                    x, sl, n = slot(s.barrier, s.state, env)
                    nbytes = sum(t.bytes for t in s.tx if t.gate is None or holds(t.gate, x))
                    rel = tuple((buf, x) for buf in bars[s.barrier].guards) if bars[s.barrier].kind == "empty" else ()
                    seq.append(Instance("arrive", where, x, s.barrier, sl, n, arrivals=s.arrivals, bytes=nbytes,
                                        release=rel))
                elif isinstance(s, OpStmt):
                    it = int(evaluate(s.iteration, env))
                    if not holds(s.op, it):
                        continue
                    reads, writes = accesses(s.reads, env, True), accesses(s.writes, env, False)
                    if s.barrier is not None:
                        x, sl, n = slot(s.barrier.barrier, s.barrier.state, env)
                        seq.append(Instance("tma", where, it, s.barrier.barrier, sl, n, bytes=s.barrier.bytes,
                                            op=s.op, reads=reads, writes=writes))
                    else:
                        seq.append(Instance("wgmma" if is_async[s.op] else "op", where, it, op=s.op, reads=reads,
                                            writes=writes))
                elif isinstance(s, CommitStmt):
                    if s.gate and not any(holds(g, int(evaluate(o.iteration, env))) for g in s.gate
                                          for o in part.stmts if isinstance(o, OpStmt) and o.op == g):
                        continue
                    seq.append(Instance("commit", where))
                elif isinstance(s, WaitStmt):
                    seq.append(Instance("wgwait", where, count=int(evaluate(prog.waits[s.wait].in_flight, env))))
                elif isinstance(s, BarSyncStmt):
                    seq.append(Instance("bar_sync", where, count=s.id))
    return seq


__all__ = ["Instance", "role_instances", "OP_KINDS"]

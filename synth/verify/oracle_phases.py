"""Explicit-state oracle for Hopper programs: the real mbarrier and wgmma semantics, one ``T``.

Input: a :class:`~synth.hopper.ir.HopperProgram` and a concrete trip count. Every warp
group of every role is a thread running its statement instances in order (guards and
predicates evaluated). A depth-first search with memoised states explores every
interleaving of the threads and every order of the asynchronous events: a TMA copy lands
(its ``complete_tx``) at any time after its issue; the oldest pending wgmma group of a
thread completes at any time after its commit (FIFO, the group variant). Barriers keep the
PTX state (docs/hopper.md): phases completed ``c``, pending arrivals, tx-count; a phase
completes when both reach 0, then the pending count resets to the init count.

Violations, by the prover's class names (:mod:`synth.verify.phases`):

* ``parity``: a ``try_wait`` passes while the barrier has completed a number of phases
  other than the one its state means;
* ``arrivals``: an arrival lands in another phase than its state names, or over-arrives;
* ``tx_bytes``: an ``expect_tx`` or a ``complete_tx`` lands in another phase than its
  state names;
* ``no_deadlock``: a state where no thread can move, no async event is left and a
  thread is not finished;
* ``release_after_wgmma`` / ``slot_reuse``: a TMA is issued onto a slot an issued wgmma
  may still read (the reader's thread had released that version already / had not);
* ``raw``: an op reads a slot that does not hold the landed version it needs;
* ``wgmma_wait``: a ``wait_group`` with a negative count;
* ``teardown``: every thread is done while a TMA may still be in flight (it lands after
  ``mbarrier.inval``, on shared memory the CTA may reuse);
* ``wgmma_drain``: a thread finishes while one of its wgmma groups may still be pending, or with
  wgmmas never committed (the accumulators are read after the role ends);
* ``coverage`` (no search needed): in a role that runs an op, the iterations it runs are not each
  ``0 <= v < T`` with the op's ``when`` true exactly once, or no role runs an op at all.

``fence`` and ``wellformed`` are syntactic; the oracle leaves them to the prover.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collections import Counter

from ..expr import evaluate, parse
from ..hopper.instances import OP_KINDS, Instance, role_instances
from ..hopper.ir import HopperProgram
from ..program import OpStmt


@dataclass
class HopperOracleResult:
    T: int
    violations: dict = field(default_factory=dict)
    """class -> first message found."""
    states: int = 0
    complete: bool = True
    """False when the state limit cut the search."""

    @property
    def classes(self) -> set:
        return set(self.violations)


def threads_of(program: HopperProgram, T: int) -> list[tuple[str, list[Instance]]]:
    """The statement instances of each thread (role warp groups), in program order."""
    out = []
    for role in program.roles:
        seq = role_instances(program, T, role)
        for w in range(role.warpgroups):
            out.append((f"{role.name}[{w}]" if role.warpgroups > 1 else role.name, seq))
    return out


def coverage(program: HopperProgram, T: int) -> list[str]:
    """The ``coverage`` violations at trip count ``T``: per role running an op, each iteration
    ``0 <= v < T`` whose ``when`` holds must run exactly once and no other; an op no role runs."""
    tsym = program.trip_count if isinstance(program.trip_count, str) else None
    out = []
    for o in program.ops:
        when = None if o.when in (None, "opaque") else parse(o.when)
        want = Counter(v for v in range(T) if when is None
                       or evaluate(when, dict({tsym: T} if tsym else {}, **{program.loop_var: v})))
        roles = [r for r in program.roles if any(isinstance(s, OpStmt) and s.op == o.name
                                                 for pt in r.program.parts for s in pt.stmts)]
        if not roles:
            out.append(f"op {o.name} is run by no role")
        for r in roles:
            got = Counter(ins.tile for ins in role_instances(program, T, r) if ins.kind in OP_KINDS
                          and ins.op == o.name)
            if got != want:
                bad = sorted(v for v in set(got) | set(want) if got[v] != want[v])
                out.append(f"{r.name}: {o.name} runs iteration(s) " + ", ".join(
                    f"{v} {got[v]} time(s)" for v in bad[:4]) + f" (each 0 <= v < {T} whose when holds: once)")
    return out


def run(program: HopperProgram, T: int, max_states: int = 400_000) -> HopperOracleResult:
    """Explore every execution of ``program`` at trip count ``T`` (see the module docstring)."""
    threads = threads_of(program, T)
    names = [n for n, _ in threads]
    seqs = [s for _, s in threads]
    bars = {b.name: b for b in program.barriers}
    bar_keys = sorted({(b.name, s) for b in program.barriers for s in range(b.slots)})
    bidx = {k: n for n, k in enumerate(bar_keys)}
    # TMA instances: (thread, pc) ids
    res = HopperOracleResult(T)

    def bad(cls: str, msg: str) -> None:
        res.violations.setdefault(cls, msg)

    for msg in coverage(program, T):
        bad("coverage", msg)

    def released(t: int, pc: int, buf: str, version: int) -> bool:
        return any((buf, version) in ins.release for ins in seqs[t][:pc])

    init_bars = tuple((0, bars[name].count, 0) for name, _ in bar_keys)
    # state: pcs, fifos (per thread: tuple of groups, each a tuple of (buf, slot, version)), open group,
    # barriers (c, pending, tx), flying TMAs (frozenset of (thread, pc)), slot contents (frozenset of
    # ((buf, slot), version))
    start = (tuple(0 for _ in seqs), tuple(() for _ in seqs), tuple(() for _ in seqs), init_bars, frozenset(),
             frozenset())
    seen = {start}
    stack = [start]

    def arrive_on(barrs: list, key, n_arr: int, nbytes: int, phase: int, where: str, cls_tx: bool) -> None:
        k = bidx[key]
        c, pend, tx = barrs[k]
        if n_arr and c != phase:
            bad("arrivals", f"{where}: arrival on {key[0]}[{key[1]}] meant for phase {phase} lands in phase {c}")
        if nbytes and c != phase:
            bad("tx_bytes", f"{where}: {'complete_tx' if cls_tx else 'expect_tx'} of {nbytes} bytes on "
                            f"{key[0]}[{key[1]}] meant for phase {phase} lands in phase {c}")
        pend -= n_arr
        tx += (-nbytes if cls_tx else nbytes)
        if pend < 0:
            bad("arrivals", f"{where}: {key[0]}[{key[1]}] phase {c} receives more than its "
                            f"{bars[key[0]].count} arrivals")
            pend = 0
        if pend == 0 and tx == 0:
            c, pend, tx = c + 1, bars[key[0]].count, 0
        barrs[k] = (c, pend, tx)

    while stack:
        if len(seen) > max_states:
            res.complete = False
            break
        st = stack.pop()
        pcs, fifos, opens, barrs, flying, mem = st
        if flying and all(pc >= len(seqs[t]) for t, pc in enumerate(pcs)):
            t, pc = min(flying)
            ins = seqs[t][pc]
            bad("teardown", f"{names[t]} at {ins.at}: its TMA on {ins.barrier}[{ins.slot}] phase {ins.phase} may "
                            "still be in flight when every thread is done (mbarrier.inval, shared memory reused)")
        for t, pc in enumerate(pcs):
            if pc >= len(seqs[t]) and (fifos[t] or opens[t]):
                bad("wgmma_drain", f"{names[t]} finishes with {len(fifos[t])} wgmma group(s) pending"
                    + (" and wgmmas never committed" if opens[t] else ""))
        succ = []
        memd = dict(mem)
        # async events: TMA landings
        for (t, pc) in flying:
            ins = seqs[t][pc]
            b2 = list(barrs)
            m2 = dict(memd)
            for (buf, sl, v) in ins.writes:
                m2[(buf, sl)] = v
            arrive_on(b2, (ins.barrier, ins.slot), 0, ins.bytes, ins.phase, ins.at, True)
            succ.append((pcs, fifos, opens, tuple(b2), flying - {(t, pc)}, frozenset(m2.items())))
        # wgmma group completions (FIFO per thread)
        for t, f in enumerate(fifos):
            if f:
                f2 = list(fifos)
                f2[t] = f[1:]
                succ.append((pcs, tuple(f2), opens, barrs, flying, mem))
        # thread steps
        blocked = []
        for t, pc in enumerate(pcs):
            if pc >= len(seqs[t]):
                continue
            ins = seqs[t][pc]
            p2 = list(pcs)
            p2[t] = pc + 1
            p2 = tuple(p2)
            if ins.kind == "wait":
                c = barrs[bidx[(ins.barrier, ins.slot)]][0]
                if c % 2 == ins.parity:
                    blocked.append(f"{names[t]} at {ins.at}: try_wait on {ins.barrier}[{ins.slot}] "
                                   f"(parity {ins.parity}, {c} phases completed)")
                    continue
                if c != ins.need:
                    bad("parity", f"{names[t]} at {ins.at}: try_wait.parity {ins.parity} on "
                                  f"{ins.barrier}[{ins.slot}] means {ins.need} completed phases but passes "
                                  f"with {c}")
                succ.append((p2, fifos, opens, barrs, flying, mem))
            elif ins.kind == "arrive":
                b2 = list(barrs)
                if ins.bytes:
                    arrive_on(b2, (ins.barrier, ins.slot), 0, ins.bytes, ins.phase, f"{names[t]} at {ins.at}",
                              False)
                if ins.arrivals:
                    arrive_on(b2, (ins.barrier, ins.slot), ins.arrivals, 0, ins.phase,
                              f"{names[t]} at {ins.at}", False)
                succ.append((p2, fifos, opens, tuple(b2), flying, mem))
            elif ins.kind in ("tma", "op", "wgmma"):
                for (buf, sl, v) in ins.reads:
                    if memd.get((buf, sl)) != v:
                        bad("raw", f"{names[t]} at {ins.at}: reads {buf}[{sl}] version {v} but the slot holds "
                                   f"{'nothing landed' if memd.get((buf, sl)) is None else 'version %d' % memd[(buf, sl)]}"
                                   f" (its TMA may not have landed)")
                for (buf, sl, v) in ins.writes:
                    for u, f in enumerate(fifos):
                        readers = [r for g in f for r in g] + list(opens[u])
                        for (rb, rs, rv) in readers:
                            if rb == buf and rs == sl:
                                cls = "release_after_wgmma" if released(u, pcs[u], rb, rv) else "slot_reuse"
                                bad(cls, f"{names[t]} at {ins.at}: writes {buf}[{sl}] (version {v}) while "
                                         f"{names[u]}'s wgmma reading version {rv} may still be in flight"
                                         + (" although that slot was released" if cls == "release_after_wgmma"
                                            else ""))
                fl = flying | {(t, pc)} if ins.kind == "tma" else flying
                o2 = opens
                if ins.kind == "wgmma":
                    o2 = list(opens)
                    o2[t] = opens[t] + ins.reads
                    o2 = tuple(o2)
                m2 = mem
                if ins.kind == "op" and ins.writes:
                    d = dict(memd)
                    for (buf, sl, v) in ins.writes:
                        d[(buf, sl)] = v
                    m2 = frozenset(d.items())
                succ.append((p2, fifos, o2, barrs, fl, m2))
            elif ins.kind == "commit":
                f2 = list(fifos)
                f2[t] = fifos[t] + (opens[t],)
                o2 = list(opens)
                o2[t] = ()
                succ.append((p2, tuple(f2), tuple(o2), barrs, flying, mem))
            elif ins.kind == "wgwait":
                if ins.count < 0:
                    bad("wgmma_wait", f"{names[t]} at {ins.at}: wait_group {ins.count} < 0")
                if len(fifos[t]) > max(ins.count, 0):
                    blocked.append(f"{names[t]} at {ins.at}: wait_group {ins.count}")
                    continue
                succ.append((p2, fifos, opens, barrs, flying, mem))
        if not succ:
            if any(pc < len(seqs[t]) for t, pc in enumerate(pcs)):
                bad("no_deadlock", "no thread can move: " + "; ".join(blocked))
            continue
        for s2 in succ:
            if s2 not in seen:
                seen.add(s2)
                stack.append(s2)
    res.states = len(seen)
    return res


def check(program: HopperProgram, trips, max_states: int = 400_000) -> dict[int, HopperOracleResult]:
    """:func:`run` at each trip count of ``trips``."""
    return {T: run(program, T, max_states) for T in trips}


__all__ = ["run", "check", "threads_of", "HopperOracleResult"]

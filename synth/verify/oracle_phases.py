"""Explicit-state oracle for Hopper programs: the real mbarrier and wgmma semantics, one ``T``.

Input: a :class:`~synth.hopper.ir.HopperProgram` and a concrete trip count. Every warp
group of every role runs its statement instances in order (guards and predicates evaluated):
a role of one thread per warp group (the producer) as one thread; a role of many threads
(``Role.threads > 1``) as ``threads`` simulated threads per warp group (default 2): thread 0,
the elected one, runs every instance; each other thread runs the all-thread instances only
(``try_wait``, synchronous ops, collective wgmmas, ``bar_sync``), not the elected arrives, the
TMA copies or the warp group's ``commit_group`` / ``wait_group`` (the wgmma FIFO is the warp
group's, kept by thread 0). A convergence instance (a collective wgmma, a ``bar_sync``) is a
rendezvous: the warp group's threads pass it together, once all have reached it. A depth-first search with memoised states explores every
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
  thread is not finished (a thread left behind at a ``try_wait`` whose parity came round
  again: the waiter two phases behind, when nothing converges a warp group's threads);
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


ALL_THREAD_KINDS = ("wait", "op", "wgmma", "bar_sync")
"""Instance kinds every thread of a warp group runs (the others are the elected thread's or the FIFO's)."""


def threads_of(program: HopperProgram, T: int, threads: int = 2) -> list[tuple[str, list[Instance]]]:
    """The statement instances of each simulated thread, in program order: one per warp group of a role
    of one thread; ``threads`` per warp group of a role of many (``threads=1``: the warp group as one
    actor). Thread 0, the elected one, is named after its warp group (``consumer[1]``), the others
    ``consumer[1].t1``, ..."""
    return [(n, seq) for n, seq, _ in _threads(program, T, threads)]


def _threads(program: HopperProgram, T: int, threads: int) -> list[tuple[str, list[Instance], tuple]]:
    """``(name, instances, group)``: ``group`` is ``(role, warp group)`` for the threads of a warp group
    of a role of many threads (they meet at its convergence instances), else ``()``."""
    out = []
    for role in program.roles:
        seq = role_instances(program, T, role)
        n = threads if role.threads > 1 else 1
        for w in range(role.warpgroups):
            base = f"{role.name}[{w}]" if role.warpgroups > 1 else role.name
            for t in range(n):
                mine = seq if t == 0 else [x for x in seq if x.kind in ALL_THREAD_KINDS
                                           and (x.kind != "wgmma" or x.op in role.collective)]
                out.append((base if t == 0 else f"{base}.t{t}", mine, (role.name, w) if n > 1 else ()))
    return out


def _is_converge(role, ins: Instance) -> bool:
    return ins.kind == "bar_sync" or (ins.kind == "wgmma" and ins.op in role.collective)


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


def run(program: HopperProgram, T: int, max_states: int = 400_000, threads: int = 2) -> HopperOracleResult:
    """Explore every execution of ``program`` at trip count ``T`` (see the module docstring), with
    ``threads`` simulated threads per warp group of a role of many threads."""
    ths = _threads(program, T, threads)
    names = [n for n, _, _ in ths]
    seqs = [s for _, s, _ in ths]
    roles = {r.name: r for r in program.roles}
    # convergence: per thread, pc -> ordinal of its convergence instances; the threads of each group
    conv = []
    for _, seq, g in ths:
        d, k = {}, 0
        for pc, ins in enumerate(seq):
            if g and _is_converge(roles[g[0]], ins):
                d[pc] = k
                k += 1
        conv.append(d)
    mates = [[u for u, (_, _, g2) in enumerate(ths) if g and g2 == g] for _, _, g in ths]
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
            if pc in conv[t]:
                # a rendezvous: the first thread of the group moves all of them, once each has reached it
                if t != mates[t][0]:
                    continue
                late = [u for u in mates[t] if pcs[u] >= len(seqs[u]) or conv[u].get(pcs[u]) != conv[t][pc]]
                if late:
                    blocked.append(f"{names[t]} at {ins.at}: {'bar.sync' if ins.kind == 'bar_sync' else 'wgmma'} "
                                   f"waits for {', '.join(names[u] for u in late)}")
                    continue
                for u in mates[t]:
                    p2[u] = pcs[u] + 1
            p2 = tuple(p2)
            if ins.kind == "bar_sync":
                succ.append((p2, fifos, opens, barrs, flying, mem))
            elif ins.kind == "wait":
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


def check(program: HopperProgram, trips, max_states: int = 400_000, threads: int = 2) -> dict[int, HopperOracleResult]:
    """:func:`run` at each trip count of ``trips``."""
    return {T: run(program, T, max_states, threads) for T in trips}


__all__ = ["run", "check", "threads_of", "HopperOracleResult", "ALL_THREAD_KINDS"]

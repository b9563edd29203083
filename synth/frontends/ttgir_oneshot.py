"""One-shot TMA loads before a pipelined loop: a barrier that completes once, checked in straight-line code.

Triton's attention forward (tutorial 06) loads its Q tile once, before the k-loop, through a barrier of its
own: ``init_barrier %b, 1``, ``barrier_expect %b, BYTES, %true``, ``async_tma_copy_global_to_local ... %q,
%b, %true``, ``wait_barrier %b, %c0``, ``inval_barrier %b`` -- all in the straight-line code before the loop.
An attention kernel written by hand in Gluon does the same but invalidates the barrier after the loop, with
the ring's barriers; that ``inval_barrier`` follows the wait in program order, so it is read as the shot's own.
That barrier completes exactly one phase, so the ring's reasoning (counts, slots, parities for every ``T``) has
nothing to say about it; what matters is decided here, on the events in program order:

* the barrier has one slot, is initialized with count 1 before anything else touches it, and gets exactly one
  ``barrier_expect`` (one arrival: phase 0 completes when its bytes land) whose predicate is true;
* the TMA copies completing on it are unconditional and deliver exactly the expected bytes (``tx_bytes``);
* a ``wait_barrier`` for phase 0 (parity 0), unconditional, follows the copies and precedes every read of
  the loaded buffer and the ``inval_barrier`` (so the copy has landed before it is read, and no copy is in
  flight on an invalidated barrier: ``raw`` and ``teardown``);
* neither the barrier nor the buffer is used again by a TMA copy, an expect or a wait anywhere else (the
  buffer is then read-only for the rest of the kernel, so no write-after-read can arise).

A barrier that fits is taken out of the event list (the loaded buffer becomes a buffer no TMA of the
pipeline writes, whose reads need no wait); one that does not fit is left in place, where the pipeline
reader judges or refuses it as before. Pure functions over :class:`.ttgir_hopper.HEvent` lists.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arith import is_sym

__all__ = ["OneShot", "one_shot_loads", "drop_invals", "exchange_loads"]


@dataclass(frozen=True)
class OneShot:
    """A one-shot load: its barrier, the buffers its copies fill, the lines of its statements, and whether it
    satisfies the conditions of the module docstring (``why``: the first that fails, naming the class)."""

    barrier: str
    buffers: tuple
    lines: tuple
    bytes: int
    ok: bool = True
    why: str = ""
    line: int = 0
    """The line of the statement ``why`` names."""

    def note(self) -> str:
        if not self.ok:
            return f"one-shot TMA load through barrier {self.barrier}: {self.why}"
        return (f"one-shot TMA load into {', '.join(self.buffers)} through barrier {self.barrier} (lines "
                f"{', '.join(map(str, self.lines))}): init count 1, one expect of {self.bytes} bytes, copies of "
                f"{self.bytes} bytes, a wait for phase 0 before every read and before the inval; checked in "
                "straight-line code (docs/check.md, 'One-shot loads')")


def _true(x) -> bool:
    return x is True or (not is_sym(x) and not isinstance(x, tuple) and x is not None and bool(x) and x == 1)


def _zero(x) -> bool:
    return not is_sym(x) and not isinstance(x, tuple) and x is not None and not isinstance(x, bool) and x == 0


def _judge(b: str, evs: list, before: list) -> tuple:
    """``(ok, why, line)`` of the one-shot barrier ``b`` (its events ``evs``: ``(index in before, event)``)."""
    kinds = [e.kind for _i, e in evs]
    init = evs[0][1]
    if kinds[0] != "init":
        return False, f"fence: {init.text} uses the barrier before its ttng.init_barrier", init.line
    if kinds.count("init") != 1:
        e = [e for _i, e in evs if e.kind == "init"][1]
        return False, f"fence: the barrier is initialized twice (line {e.line})", e.line
    if any(e.bar_slot not in (0, None) for _i, e in evs):
        return False, "a one-shot barrier of several slots is outside the model", init.line
    exps = [e for _i, e in evs if e.kind == "expect"]
    tmas = [e for _i, e in evs if e.kind == "tma"]
    waits = [(k, e) for k, (_i, e) in enumerate(evs) if e.kind == "wait"]
    if not waits:
        return False, (f"raw: no ttng.wait_barrier observes the copy at line {tmas[0].line}: its buffer is read "
                       "before it lands, and the barrier is invalidated with the copy in flight"), tmas[0].line
    if len(exps) + sum(1 for e in evs if e[1].kind == "arrive") != init.count:
        got = len(exps) + sum(1 for e in evs if e[1].kind == "arrive")
        what = "never completes, the wait never returns" if got < init.count else "completes before the bytes land"
        return False, (f"arrivals / no_deadlock: the barrier is initialized with count {init.count} at line "
                       f"{init.line} and gets {got} arrival(s) before its wait at line {waits[0][1].line}: phase 0 "
                       f"{what}"), init.line
    if len(exps) != 1:
        return False, f"tx_bytes: {len(exps)} barrier_expect on a one-shot barrier", init.line
    first_wait = waits[0][0]
    exp_k = next(k for k, (_i, e) in enumerate(evs) if e.kind == "expect")
    if not _true(exps[0].pred) or not all(_true(e.pred) for e in tmas):
        e = next(e for e in exps + tmas if not _true(e.pred))
        return False, f"a conditional statement of a one-shot load ({e.text}) is outside the model", e.line
    late = [e for k, (_i, e) in enumerate(evs) if e.kind == "tma" and not exp_k < k < first_wait]
    if late:
        return False, (f"raw: the copy at line {late[0].line} is not between the expect and the wait for phase 0: "
                       "the wait does not cover it"), late[0].line
    if sum(e.bytes for e in tmas) != exps[0].bytes:
        return False, (f"tx_bytes: the expect at line {exps[0].line} announces {exps[0].bytes} bytes, the copies "
                       f"deliver {sum(e.bytes for e in tmas)}"), exps[0].line
    for _k, e in waits:
        if not _zero(e.phase) or not _true(e.pred):
            return False, (f"parity: {e.text} waits for parity {e.phase} of a barrier that completes only phase 0: "
                           "it passes at once, before the copy lands" if _true(e.pred) else
                           f"a conditional wait on a one-shot barrier ({e.text}) is outside the model"), e.line
    bad = [e for k, (_i, e) in enumerate(evs) if k > first_wait and e.kind not in ("wait", "inval")]
    if bad:
        return False, f"{bad[0].text} after the wait on a one-shot barrier is outside the model", bad[0].line
    bufs = {e.buf for e in tmas}
    wait_pos = evs[first_wait][0]
    for i, e in enumerate(before):
        if i < wait_pos and e.kind in ("dot", "load") and (any(r[0] in bufs for r in e.reads) or e.buf in bufs):
            return False, f"raw: {e.text} reads the loaded buffer before the wait at line {waits[0][1].line}", e.line
        if e.kind == "tma" and e.buf in bufs and e.bar != b:
            return False, f"{e.text} writes the one-shot buffer through another barrier", e.line
    invals = [k for k, (_i, e) in enumerate(evs) if e.kind == "inval"]
    if invals and invals[0] < first_wait:
        e = evs[invals[0]][1]
        return False, f"teardown: the barrier is invalidated at line {e.line} before the wait observes its copy", e.line
    return True, "", 0


def one_shot_loads(before: list, later: list) -> tuple:
    """``(kept, shots)``: ``before`` (the events of the straight-line code before the loop, in order) without
    the events of each one-shot load, and the :class:`OneShot` records (``ok`` or the first condition of the
    module docstring that fails); ``later`` the events of the loop and after it. A barrier is a one-shot load
    when it is initialized before the loop, a TMA copy completes on it there, and neither it nor the buffers
    those copies fill is used by the loop or after it, but for the barrier's ``inval_barrier`` after the loop
    (a Gluon kernel invalidates its Q barrier with the ring's): that one follows the wait before the loop in
    program order, so the copy has landed when it runs; the caller drops it with :func:`drop_invals`."""
    later_bars = {e.bar for e in later if e.bar and e.kind != "inval"}
    later_bufs = {e.buf for e in later if e.kind == "tma" and e.buf}
    shots, drop = [], set()
    for b in dict.fromkeys(e.bar for e in before if e.kind == "init" and e.bar):
        if b in later_bars:
            continue
        evs = [(i, e) for i, e in enumerate(before) if e.bar == b]
        tmas = [e for _i, e in evs if e.kind == "tma"]
        if not tmas or any(e.buf in later_bufs for e in tmas):
            continue
        ok, why, line = _judge(b, evs, before)
        shots.append(OneShot(b, tuple(dict.fromkeys(e.buf for e in tmas)), tuple(e.line for _i, e in evs),
                             sum(e.bytes for _i, e in evs if e.kind == "expect"), ok, why, line))
        drop |= {i for i, _e in evs}
    return [e for i, e in enumerate(before) if i not in drop], shots


def drop_invals(later: list, shots: list) -> list:
    """``later`` without the ``inval`` events of the one-shot barriers ``shots`` (judged by
    :func:`one_shot_loads`: they follow the shot's wait)."""
    bars = {s.barrier for s in shots}
    return [e for e in later if not (e.kind == "inval" and e.bar in bars)]


def exchange_loads(roles: list, inits: dict) -> tuple:
    """One-shot loads handed from one role to others (Triton's warp-specialized attention: the producer loads
    Q once before its loop through a barrier pair of one phase). ``roles``: ``(name, pre, post, loop)`` per role
    -- the barrier events before its loop, after it, and in it; ``inits``: ``(barrier, slot) -> init count``.
    Returns ``(shots, unread)``: a :class:`OneShot` per one-shot barrier that TMA copies complete on, and the
    events of barriers used before or after a loop that are not such an exchange (the caller refuses them).

    A barrier ``F`` used outside every loop with an expect and copies is a one-shot **full** barrier: its
    expects (one arrival each, count ``init``), copies and predicates in one role ``P`` (expect before copies,
    bytes equal: ``tx_bytes``); every wait on it is for parity 0 (phase 0) and some role waits on it before
    its loop (``raw``: the buffer is read in the loop; ``teardown``: the copy is observed before the
    barriers are invalidated after the partitions join). A barrier ``E`` used outside every loop with only
    waits and arrives is its **empty** partner: each wait on it is in ``P``, for parity 1 (on a fresh barrier
    it returns at once), before ``P``'s expect on ``F``; each role arriving on ``E`` waits on ``F`` before it
    arrives, so every arrival happens after ``F``'s copy, hence after ``P``'s wait on ``E``: the wait cannot
    see a completed phase 0 and block for ever (``no_deadlock``). Nothing waits on ``E`` after the arrivals."""
    loop_bars = {(e.bar, e.bar_slot) for _n, _pre, _post, lp in roles for e in lp if e.bar}
    outside = {}
    for name, pre, post, _lp in roles:
        for where, evs in (("pre", pre), ("post", post)):
            for k, e in enumerate(evs):
                if e.bar:
                    outside.setdefault((e.bar, e.bar_slot), []).append((name, where, k, e))
    shots, unread, partners, prod = [], [], set(), {}
    fulls = {b for b, xs in outside.items() if any(e.kind in ("expect", "tma") for *_x, e in xs)}
    for b, xs in outside.items():
        if b in loop_bars:
            unread += [e for *_x, e in xs]
    for b in sorted(fulls - loop_bars, key=str):
        xs = outside[b]
        exps = [(n, w, k, e) for n, w, k, e in xs if e.kind == "expect"]
        tmas = [(n, w, k, e) for n, w, k, e in xs if e.kind == "tma"]
        waits = [(n, w, k, e) for n, w, k, e in xs if e.kind == "wait"]
        lines = tuple(sorted(e.line for *_x, e in xs))
        bufs = tuple(dict.fromkeys(e.buf for *_x, e in tmas))
        nbytes = sum(e.bytes for *_x, e in exps)

        def shot(ok, why="", line=0):
            shots.append(OneShot(f"{b[0]}[{b[1]}]", bufs, lines, nbytes, ok, why, line))

        producers = {n for n, *_x in exps + tmas}
        if len(producers) != 1 or any(w != "pre" for _n, w, _k, _e in exps + tmas):
            unread += [e for *_x, e in xs]
            continue
        P = next(iter(producers))
        count = inits.get(b)
        if count is None:
            shot(False, f"fence: barrier {b[0]} slot {b[1]} is not initialized before the partitions start",
                 exps[0][3].line if exps else tmas[0][3].line)
            continue
        if len(exps) != count:
            shot(False, f"arrivals / no_deadlock: {len(exps)} expect(s) on a barrier initialized with count {count}: "
                 f"phase 0 {'never completes' if len(exps) < count else 'completes early'}",
                 exps[0][3].line if exps else tmas[0][3].line)
            continue
        if not all(_true(e.pred) for *_x, e in exps + tmas):
            e = next(e for *_x, e in exps + tmas if not _true(e.pred))
            shot(False, f"a conditional statement of a one-shot load ({e.text}) is outside the model", e.line)
            continue
        if sum(e.bytes for *_x, e in tmas) != nbytes:
            shot(False, f"tx_bytes: the expect(s) announce {nbytes} bytes, the copies deliver "
                 f"{sum(e.bytes for *_x, e in tmas)}", exps[0][3].line)
            continue
        if min(k for *_x, k, _e in tmas) < min(k for *_x, k, _e in exps):
            shot(False, "tx_bytes: a copy is issued before the expect that announces its bytes", tmas[0][3].line)
            continue
        if not waits:
            shot(False, f"raw: no role waits on barrier {b[0]} slot {b[1]}: the loaded buffer is read before the copy "
                 "lands, and the copy may be in flight when the barriers are invalidated", tmas[0][3].line)
            continue
        bad = next(((n, w, k, e) for n, w, k, e in waits if not _zero(e.phase) or not _true(e.pred) or w != "pre"),
                   None)
        if bad is not None:
            n, w, k, e = bad
            why = (f"parity: {n} waits for parity {e.phase} on a barrier that completes only phase 0: the wait "
                   "passes at once, before the copy lands" if w == "pre" and _true(e.pred) else
                   f"{n}'s wait ({e.text}) is not an unconditional wait before its loop")
            shot(False, why, e.line)
            continue
        prod[b] = (P, min(k for *_x, k, _e in exps))
        shot(True)
    # the empty partners: barriers used outside every loop with waits and arrives only
    for eb in sorted(set(outside) - fulls - loop_bars, key=str):
        ys = outside[eb]
        pw = [(n, w, k, e) for n, w, k, e in ys if e.kind == "wait"]
        ar = [(n, w, k, e) for n, w, k, e in ys if e.kind == "arrive"]
        if not pw or any(e.kind not in ("wait", "arrive") for *_x, e in ys):
            continue
        PE = {n for n, *_x in pw}
        kE = min(k for *_x, k, _e in pw)
        G = {f for f, (pf, kf) in prod.items() if PE == {pf} and kf > kE}
        if not G:
            continue
        partners.add(eb)
        lines = tuple(sorted(e.line for *_x, e in ys))

        def eshot(ok, why="", line=0, eb=eb, lines=lines):
            shots.append(OneShot(f"{eb[0]}[{eb[1]}]", (), lines, 0, ok, why, line))

        bad = next(((n, w, k, e) for n, w, k, e in pw if w != "pre" or not _true(e.pred) or _zero(e.phase)), None)
        if bad is not None:
            n, w, k, e = bad
            eshot(False, f"no_deadlock: {n} waits on barrier {eb[0]} slot {eb[1]} ({e.text}) for parity {e.phase}: "
                  "on a fresh barrier only a wait for parity 1 returns at once; this one waits for a phase that only "
                  "the consumers' arrivals complete, after they have waited for the load it guards", e.line)
            continue
        wrong = None
        for n in dict.fromkeys(n for n, *_x in ar):
            if not any(m == n and w == "pre" and e.kind == "wait" for f in G for m, w, _k, e in outside[f]):
                wrong = next(e for m, _w, _k, e in ar if m == n)
                break
        if wrong is not None:
            eshot(False, f"no_deadlock: {n} arrives on barrier {eb[0]} slot {eb[1]} at line {wrong.line} without "
                  f"waiting first on the load the wait at line {pw[0][3].line} guards: its arrivals may complete "
                  "phase 0 before that wait for parity 1, which then waits for ever", wrong.line)
            continue
        eshot(True)
    for b, xs in outside.items():
        if b in loop_bars or b in fulls or b in partners:
            continue
        if any(e.kind == "wait" for *_x, e in xs):  # a wait on a barrier of no exchange synth reads
            unread += [e for *_x, e in xs]
        # arrivals only: a release nobody waits for, harmless
    return shots, unread

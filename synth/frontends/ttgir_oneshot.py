"""One-shot TMA loads before a pipelined loop: a barrier that completes once, checked in straight-line code.

Triton's attention forward (tutorial 06) loads its Q tile once, before the k-loop, through a barrier of its
own: ``init_barrier %b, 1``, ``barrier_expect %b, BYTES, %true``, ``async_tma_copy_global_to_local ... %q,
%b, %true``, ``wait_barrier %b, %c0``, ``inval_barrier %b`` -- all in the straight-line code before the loop.
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

__all__ = ["OneShot", "one_shot_loads"]


@dataclass(frozen=True)
class OneShot:
    """A one-shot load: its barrier, the buffers its copies fill and the lines of its statements."""

    barrier: str
    buffers: tuple
    lines: tuple
    bytes: int

    def note(self) -> str:
        return (f"one-shot TMA load into {', '.join(self.buffers)} through barrier {self.barrier} (lines "
                f"{', '.join(map(str, self.lines))}): init count 1, one expect of {self.bytes} bytes, copies of "
                f"{self.bytes} bytes, a wait for phase 0 before every read and before the inval; checked in "
                "straight-line code (docs/check.md, 'One-shot loads')")


def _true(x) -> bool:
    return x is True or (not is_sym(x) and not isinstance(x, tuple) and x is not None and bool(x) and x == 1)


def _zero(x) -> bool:
    return not is_sym(x) and not isinstance(x, tuple) and x is not None and not isinstance(x, bool) and x == 0


def one_shot_loads(before: list, later: list) -> tuple:
    """``(kept, shots)``: ``before`` (the events of the straight-line code before the loop, in order) without
    the events of each one-shot load (module docstring), and the :class:`OneShot` records; ``later`` the
    events of the loop and after it (a barrier or buffer used there is not one-shot)."""
    later_bars = {e.bar for e in later if e.bar}
    later_bufs = {e.buf for e in later if e.kind == "tma" and e.buf}
    shots, drop = [], set()
    for b in dict.fromkeys(e.bar for e in before if e.kind == "init" and e.bar):
        if b in later_bars:
            continue
        evs = [(i, e) for i, e in enumerate(before) if e.bar == b]
        kinds = [e.kind for _i, e in evs]
        if not kinds or kinds[0] != "init" or evs[0][1].count != 1 or any(e.bar_slot not in (0, None)
                                                                          for _i, e in evs):
            continue
        if kinds.count("init") != 1 or kinds.count("expect") != 1 or kinds.count("wait") < 1 or "tma" not in kinds:
            continue
        exp = next(i for i, (_j, e) in enumerate(evs) if e.kind == "expect")
        first_wait = next(i for i, (_j, e) in enumerate(evs) if e.kind == "wait")
        tmas = [e for _j, e in evs if e.kind == "tma"]
        if not (exp < first_wait and all(exp < k < first_wait for k, (_j, e) in enumerate(evs) if e.kind == "tma")):
            continue
        if not _true(evs[exp][1].pred) or not all(_true(e.pred) for e in tmas):
            continue
        if sum(e.bytes for e in tmas) != evs[exp][1].bytes:
            continue
        waits = [e for _j, e in evs if e.kind == "wait"]
        if not all(_zero(e.phase) and _true(e.pred) for e in waits):
            continue
        if any(k > first_wait and e.kind not in ("wait", "inval") for k, (_j, e) in enumerate(evs)):
            continue
        bufs = tuple(dict.fromkeys(e.buf for e in tmas))
        if any(x in later_bufs for x in bufs):
            continue
        wait_pos = evs[first_wait][0]
        # every read of the buffers before the loop comes after the wait; no other copy writes them
        if any(e.kind == "tma" and e.buf in bufs and e.bar != b for e in before):
            continue
        if any(e.kind in ("dot", "load") and (any(r[0] in bufs for r in e.reads) or e.buf in bufs) and i < wait_pos
               for i, e in enumerate(before)):
            continue
        shots.append(OneShot(b, bufs, tuple(e.line for _j, e in evs), evs[exp][1].bytes))
        drop |= {i for i, _e in evs}
    return [e for i, e in enumerate(before) if i not in drop], shots

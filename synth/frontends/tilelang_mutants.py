"""Mutants of TileLang device TIR (``synth check`` inputs): one-line edits that make a correct pipeline wrong.

Pure text -> text functions for ``benchmarks/check_corpus.py`` and the tests, in the manner of
:mod:`synth.frontends.mutants`; each raises :class:`ValueError` when its edit does not apply.

* :func:`raise_wait_group` -- the ``T.ptx_wait_group(n)`` at a line made ``n + 1`` (a read-after-write race
  when the wait was tight).
* :func:`drop_release_wait` -- a warp-specialized producer's wait on the empty barrier (the consumer's
  release of the slot) deleted: the TMA copy of tile ``k`` overwrites the slot of tile ``k - M`` while the
  consumer's wgmma may still read it (write-after-read).
* :func:`flip_consumer_parity` -- the consumer's full-barrier wait parity ``p`` made ``T.bitwise_xor(p, 1)``:
  it waits for the phase before, which is complete, and reads a slot its TMA may not have filled.
* :func:`converge_producer` -- not a bug but a fix: a named ``bar.sync`` over the producer's threads
  (``T.tvm_storage_sync("shared", 1, n)``) before each elected block (``if T.tl_shuffle_elect(n):``) that
  follows a wait: every producer thread has left its wait on the empty barrier before the elected thread
  refills the slot (the ``converge`` obligation TileLang 0.1.15's producer fails).
"""

from __future__ import annotations

import re


def raise_wait_group(text: str, line: int) -> str:
    """``text`` with the constant ``T.ptx_wait_group(n)`` at 1-based ``line`` made ``n + 1``."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines):
        raise ValueError(f"line {line} is outside the text ({len(lines)} lines)")
    new, n = re.subn(r"(T\.ptx_wait_group\()(\d+)(\))", lambda m: f"{m.group(1)}{int(m.group(2)) + 1}{m.group(3)}",
                     lines[line - 1], count=1)
    if not n:
        raise ValueError(f"line {line} holds no constant T.ptx_wait_group: {lines[line - 1].strip()}")
    lines[line - 1] = new
    return "".join(lines)


def _producer_consumer(text: str) -> tuple:
    lines = text.splitlines(keepends=True)
    waits = [i for i, x in enumerate(lines) if "T.mbarrier_wait_parity(" in x]
    if len(waits) < 2:
        raise ValueError("fewer than two T.mbarrier_wait_parity statements (not a warp-specialized kernel)")
    return lines, waits


def drop_release_wait(text: str) -> str:
    """``text`` without the producer's first ``T.mbarrier_wait_parity`` whose parity is negated
    (``T.bitwise_xor(..., 1)``: the wait on the consumer's release)."""
    lines, waits = _producer_consumer(text)
    i = next((i for i in waits if "T.bitwise_xor(" in lines[i]), None)
    if i is None:
        raise ValueError("no producer wait with a negated parity (T.bitwise_xor(..., 1))")
    del lines[i]
    return "".join(lines)


def flip_consumer_parity(text: str) -> str:
    """``text`` with the first ``T.mbarrier_wait_parity(b, p)`` whose parity is not negated made
    ``T.mbarrier_wait_parity(b, T.bitwise_xor(p, 1))``."""
    lines, waits = _producer_consumer(text)
    for i in waits:
        if "T.bitwise_xor(" in lines[i]:
            continue
        m = re.search(r"T\.mbarrier_wait_parity\((\w+\[[^\]]*\]), (.*)\)\s*$", lines[i])
        if m:
            end = "\n" if lines[i].endswith("\n") else ""
            lines[i] = lines[i][:m.start()] + f"T.mbarrier_wait_parity({m.group(1)}, T.bitwise_xor({m.group(2)}, 1))" + end
            return "".join(lines)
    raise ValueError("no T.mbarrier_wait_parity with a parity that is not negated")


__all__ = ["raise_wait_group", "drop_release_wait", "flip_consumer_parity"]


def converge_producer(text: str) -> str:
    """``text`` with ``T.tvm_storage_sync("shared", 1, n)`` (``bar.sync 1, n``: TileLang's partial thread
    sync over the ``n`` threads of the role) inserted before every ``if T.tl_shuffle_elect(n):`` with
    ``n > 0`` that comes after a ``T.mbarrier_wait_parity`` (the producer's elected expect and TMA block)."""
    lines = text.splitlines(keepends=True)
    out, waited, n_edits = [], False, 0
    for ln in lines:
        waited = waited or "T.mbarrier_wait_parity(" in ln
        m = re.match(r"(\s*)if T\.tl_shuffle_elect\((\d+)\):", ln)
        if m and waited and int(m.group(2)) > 0:
            out.append(f'{m.group(1)}T.tvm_storage_sync("shared", 1, {m.group(2)})\n')
            n_edits += 1
        out.append(ln)
    if not n_edits:
        raise ValueError("no if T.tl_shuffle_elect(n) after a T.mbarrier_wait_parity")
    return "".join(out)

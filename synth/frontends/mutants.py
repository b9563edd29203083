"""Mutants of ``synth check`` inputs: each a one-line edit that makes a correct pipeline wrong.

Pure text -> text functions, used by ``benchmarks/check_corpus.py`` (docs/check.md, "Corpus benchmark") and
the tests to show that the checker refutes what it should. Each raises :class:`ValueError` when its edit
does not apply (no such statement), so a mutant is never silently the original.

* :func:`raise_wait` -- a cp.async wait (Triton ``ttg.async_wait {num}``, MLIR ``numGroups``, TVM
  ``async_wait_inflight_count``) keeps one more group in flight: a read-after-write race when the wait was
  tight.
* :func:`raise_pendings` -- the loop's ``warp_group_dot_wait {pendings = n}`` made ``n + 1``: a TMA refills a
  slot a wgmma may still read (a write-after-read race).
* :func:`drop_barrier_wait` -- the loop's first ``ttng.wait_barrier`` deleted: a wgmma reads a slot its TMA
  may not have filled (read-after-write).
* :func:`flip_producer_parity` -- a warp-specialized producer's phase bit no longer negated: it waits for
  the current release of each slot instead of the previous one.
* :func:`wgmma_to_local_load` -- a warp-specialized consumer's wgmma replaced by per-thread
  ``ttg.local_load`` of each of its operands: nothing converges the partition's threads between their wait and
  the leader's release (a lagging thread two phases behind); :func:`barrier_before_arrives` is the fix.
* :func:`unguard_prologue_copy` -- the first prologue TMA copy guarded by ``T >= 0`` instead of ``T > 0``:
  wrong only when the loop runs zero times (``--min-trip-count 0``).
"""

from __future__ import annotations

import re

_COUNT = (r"(\{num = )(\d+)( : i32\})", r"(numGroups = )(\d+)( : i32)", r"(\"async_wait_inflight_count\": )(\d+)(\})",
          r"(async_wait_inflight_count\", )(\d+)(\))")


def raise_wait(text: str, line: int) -> str:
    """``text`` with the cp.async wait count at 1-based ``line`` raised by one. A TVMScript wait is located at
    its block (``with T.sblock``): the count is the first ``async_wait_inflight_count`` of that block, within
    the next :data:`BLOCK_LINES` lines."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines):
        raise ValueError(f"line {line} is outside the text ({len(lines)} lines)")
    for i in range(line - 1, min(len(lines), line - 1 + BLOCK_LINES)):
        for pat in _COUNT:
            new, n = re.subn(pat, lambda m: f"{m.group(1)}{int(m.group(2)) + 1}{m.group(3)}", lines[i], count=1)
            if n:
                lines[i] = new
                return "".join(lines)
        if i > line - 1 and "T.sblock" in lines[i]:
            break
    raise ValueError(f"line {line} holds no constant wait count: {lines[line - 1].strip()}")


BLOCK_LINES = 12
"""How far below a TVMScript block's line its wait attribute is looked for."""


def _loop_span(lines: list) -> tuple[int, int]:
    """``(first, end)`` line indices of the pipelined loop: the last ``scf.for`` before the first wgmma (the
    first ``scf.for`` when there is none) up to its ``scf.yield`` (a persistent loop's tile loop and the
    fused loop before it are skipped that way)."""
    dot = next((i for i, x in enumerate(lines) if "ttng.warp_group_dot " in x), len(lines))
    fors = [i for i, x in enumerate(lines[:dot]) if "scf.for" in x]
    if not fors:
        raise ValueError("no scf.for loop")
    a = fors[-1] if dot < len(lines) else fors[0]
    b = next((i for i in range(a, len(lines)) if "scf.yield" in lines[i] and i > dot), len(lines))
    return a, b


def raise_pendings(text: str) -> str:
    """``text`` with the loop's first ``warp_group_dot_wait {pendings = n : i32}`` (n >= 1) made ``n + 1``."""
    lines = text.splitlines(keepends=True)
    a, b = _loop_span(lines)
    for i in range(a, b):
        m = re.search(r"(warp_group_dot_wait .*\{pendings = )(\d+)( : i32\})", lines[i])
        if m and int(m.group(2)) >= 1:
            lines[i] = lines[i][:m.start(2)] + str(int(m.group(2)) + 1) + lines[i][m.end(2):]
            return "".join(lines)
    raise ValueError("no warp_group_dot_wait with pendings >= 1 in the loop")


def drop_barrier_wait(text: str) -> str:
    """``text`` without the loop's first ``ttng.wait_barrier``."""
    lines = text.splitlines(keepends=True)
    a, b = _loop_span(lines)
    i = next((i for i in range(a, b) if "ttng.wait_barrier" in lines[i]), None)
    if i is None:
        raise ValueError("no ttng.wait_barrier in the loop")
    del lines[i]
    return "".join(lines)


def flip_producer_parity(text: str) -> str:
    """``text`` (a warp-specialized TTGIR) with the producer's negated phase bit (``arith.xori ..., %true``)
    replaced by the bit itself where it is widened for the wait."""
    lines = text.splitlines(keepends=True)
    i = next((i for i, ln in enumerate(lines) if re.search(r"= arith\.xori %\S+, %true : i1", ln)), None)
    if i is None:
        raise ValueError("no negated phase bit (arith.xori ..., %true)")
    res, src = re.search(r"(%\S+) = arith\.xori (%\S+), %true", lines[i]).groups()
    j = next((j for j in range(i, len(lines)) if f"arith.extui {res} " in lines[j]), None)
    if j is None:
        raise ValueError(f"the negated phase bit {res} is never widened (arith.extui)")
    lines[j] = lines[j].replace(f"arith.extui {res} ", f"arith.extui {src} ")
    return "".join(lines)


def unguard_prologue_copy(text: str) -> str:
    """``text`` with the first prologue guard ``arith.cmpi sgt, %T, %c0_i32`` made ``sge`` (true at T = 0)."""
    a, _ = _loop_span(text.splitlines(keepends=True))
    head = "".join(text.splitlines(keepends=True)[:a])
    new, n = re.subn(r"(= arith\.cmpi )sgt(, %\w+, %c0_i32)", r"\1sge\2", head, count=1)
    if not n:
        raise ValueError("no prologue guard arith.cmpi sgt, %T, %c0_i32 before the loop")
    return new + text[len(head):]


__all__ = ["raise_wait", "raise_pendings", "drop_barrier_wait", "flip_producer_parity", "unguard_prologue_copy"]


def wgmma_to_local_load(text: str) -> str:
    """The first ``ttng.warp_group_dot`` of a warp-specialized consumer partition (one inside a
    ``partitionN`` region) replaced by a per-thread ``ttg.local_load`` of each shared operand (ld.shared /
    ldmatrix; no warp-group convergence): the shape of a leader warp releasing a slot while the partition's
    other warps may still wait for it. Refuted by ``converge`` when the arrive has no barrier before it
    (``arrive_sync=False``); :func:`barrier_before_arrives` is its fix."""
    lines = text.splitlines(keepends=True)
    in_partition = False
    for i, ln in enumerate(lines):
        if re.match(r"\s*partition\d+\(", ln):
            in_partition = True
        m = re.match(r"(\s*)(%[\w$.#-]+) = ttng\.warp_group_dot (%[\w$.#-]+), (%[\w$.#-]+), .*?: "
                     r"(!ttg\.memdesc<[^>]*>) \* (!ttg\.memdesc<[^>]*>) -> (tensor<[^>]*>)(.*)$", ln)
        if in_partition and m:
            ind, res, a, b, ta, tb, tacc, rest = m.groups()
            loc = re.search(r"\s(loc\(.*\))\s*$", rest)
            tail = f" {loc.group(1)}" if loc else ""
            lines[i] = (f"{ind}{res}_a = ttg.local_load {a} : {ta} -> tensor<1xf16>{tail}\n"
                        f"{ind}{res}_b = ttg.local_load {b} : {tb} -> tensor<1xf16>{tail}\n"
                        f"{ind}{res} = arith.addf {res}_a, {res}_b : {tacc}{tail}\n")
            return "".join(lines)
    raise ValueError("no ttng.warp_group_dot with two shared operands inside a partition region")


def barrier_before_arrives(text: str) -> str:
    """A ``gpu.barrier`` (``bar.sync`` over the partition) inserted before every ``ttng.arrive_barrier`` and
    ``ttng.barrier_expect`` inside a loop: what Triton's lowering emits since its fix for a leader warp
    releasing early, written in the TTGIR."""
    lines = text.splitlines(keepends=True)
    out, in_loop, n = [], False, 0
    for ln in lines:
        in_loop = in_loop or bool(re.search(r"\bscf\.for\b", ln))
        if in_loop and re.match(r"\s*ttng\.(arrive_barrier|barrier_expect)\b", ln):
            out.append(re.match(r"\s*", ln).group(0) + "gpu.barrier\n")
            n += 1
        out.append(ln)
    if not n:
        raise ValueError("no ttng.arrive_barrier or ttng.barrier_expect inside a loop")
    return "".join(out)

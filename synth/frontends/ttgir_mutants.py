"""Mutants of Triton's tile-loop and TMA-store TTGIR (:mod:`.ttgir_nested`): each a small edit of the text
that makes the compiler's correct output wrong, the shape of a known bug.

Pure text -> text functions (as :mod:`.mutants`), used by ``benchmarks/check_corpus.py`` and
``tests/test_check_triton_nested.py``. Each raises :class:`ValueError` when its edit does not apply, so a
mutant is never silently the original.

* :func:`reset_phase_per_tile` -- the phase restarts at every tile while the barriers live across tiles:
  warp-specialized, each partition's k-loop count starts at 0 instead of the count the tile loop carries;
  one warp group, the barriers allocated and initialized once before the tile loop (and invalidated after
  it) while the k-loop still restarts its slots and phases at every tile.
* :func:`raise_store_wait` -- the first ``async_tma_store_wait {pendings = N}`` in a tile made ``N + 1``:
  the staging buffer is rewritten while the previous tile's TMA store may still read it, or the role exits
  with a store still reading shared memory.
* :func:`drop_store_fence` -- the ``fence_async_shared`` before the first TMA store deleted: the store (async
  proxy) may read the staging buffer's old bytes.
* :func:`skip_last_tile_wait` -- a wait of the tile's epilogue put under ``scf.if`` on ``tile_id + step <
  num_tiles``: skipped on the last tile (one warp group: the accumulator drain ``warp_group_dot_wait
  {pendings = 0}``; warp-specialized: the store wait after the TMA store).
* :func:`arrive_count_off_by_one` -- warp-specialized: the first ``ttng.arrive_barrier %b, 128`` made 127;
  one warp group: the ring's barrier initialized with count 2 (one ``barrier_expect`` arrives per phase).
* :func:`parity_from_tile_local_k` -- warp-specialized ring: every partition's k-loop computes its phase bit
  from the tile-local k (the k-loop's induction variable) instead of the count carried across tiles; the
  slots still follow the carried count.
* :func:`rewrite_staging_before_read` -- the store wait before a staging write moved after it: the staging
  buffer is rewritten while the previous TMA store may still read it.
"""

from __future__ import annotations

import re


def _lines(text: str) -> list:
    return text.splitlines(keepends=True)


def _indent(s: str) -> str:
    return s[:len(s) - len(s.lstrip())]


def _close(lines: list, i: int) -> int:
    """The line index of the ``}`` closing the region opened at line ``i``."""
    ind = _indent(lines[i])
    for j in range(i + 1, len(lines)):
        if lines[j].startswith(ind + "}") and _indent(lines[j]) == ind:
            return j
    raise ValueError(f"the region opened at line {i + 1} is not closed")


def _tile_loops(lines: list) -> list:
    """Indices of the ``scf.for`` lines that hold another ``scf.for`` (tile loops), outermost first."""
    out = []
    for i, ln in enumerate(lines):
        if re.search(r"\bscf\.for\b", ln) and ln.rstrip().endswith("{"):
            end = _close(lines, i)
            if any(re.search(r"\bscf\.for\b", lines[j]) for j in range(i + 1, end)):
                out.append(i)
    if not out:
        raise ValueError("no tile loop (an scf.for around another scf.for)")
    return out


def reset_phase_per_tile(text: str) -> str:
    """The k-loop's pipeline state restarted at every tile while the barriers are not re-initialized (module
    docstring)."""
    lines = _lines(text)
    if re.search(r"\bttg\.warp_specialize\b", text):
        n = 0
        for i in reversed(_tile_loops(lines)):  # bottom up: an inserted line shifts only what follows it
            m = re.search(r"iter_args\((.*?)\)\s*->", lines[i])
            tnames = re.findall(r"(%[\w$.-]+)\s*=", m.group(1)) if m else []
            for j in range(i + 1, _close(lines, i)):
                km = re.search(r"scf\.for .*iter_args\((.*?)\)\s*->\s*\(([^)]*)\)", lines[j])
                if not km:
                    continue
                pairs = re.findall(r"(%[\w$.-]+)\s*=\s*(%[\w$.#-]+)", km.group(1))
                types = [t.strip() for t in re.split(r",\s*(?![^<]*>)", km.group(2))]
                for p, (_a, init) in enumerate(pairs):
                    if init in tnames and p < len(types) and re.fullmatch(r"i\d+", types[p]):
                        zero = f"%synth_reset{n}"
                        lines[j] = lines[j].replace(f"= {init}", f"= {zero}", 1)
                        lines.insert(j, f"{_indent(lines[j])}{zero} = arith.constant 0 : {types[p]}\n")
                        n += 1
                        break
                break
        if not n:
            raise ValueError("no k-loop count carried from a tile loop")
        return "".join(lines)
    i = _tile_loops(lines)[0]
    end = _close(lines, i)
    alloc = next((j for j in range(i + 1, end) if re.search(r"= ttg\.local_alloc .*memdesc<\d+x1xi64", lines[j])), None)
    if alloc is None:
        raise ValueError("no barrier allocated in the tile loop")
    bar = re.match(r"\s*(%[\w$.-]+)", lines[alloc]).group(1)
    views = {bar}
    hoist, sink = [alloc], []
    for j in range(alloc + 1, end):
        m = re.match(rf"\s*(%[\w$.-]+) = ttg\.memdesc_index {re.escape(bar)}\[%c\d+_i32\]", lines[j])
        if m:
            views.add(m.group(1))
            hoist.append(j)
        elif re.match(r"\s*ttng\.init_barrier (%[\w$.-]+),", lines[j]) and \
                re.match(r"\s*ttng\.init_barrier (%[\w$.-]+),", lines[j]).group(1) in views:
            hoist.append(j)
        elif re.match(r"\s*ttng\.inval_barrier (%[\w$.-]+)", lines[j]) and \
                re.match(r"\s*ttng\.inval_barrier (%[\w$.-]+)", lines[j]).group(1) in views:
            sink.append(j)
        elif re.match(rf"\s*ttg\.local_dealloc {re.escape(bar)}\b", lines[j]):
            sink.append(j)
    if not any("init_barrier" in lines[j] for j in hoist) or not sink:
        raise ValueError("the tile loop does not initialize and invalidate its barriers")
    ind_out = _indent(lines[i])
    moved_up = [ind_out + lines[j].lstrip() for j in hoist]
    moved_down = [ind_out + lines[j].lstrip() for j in sink]
    keep = [ln for j, ln in enumerate(lines) if j not in set(hoist) | set(sink)]
    # positions in the kept list: the tile loop's line and its closing brace
    i2 = i - sum(1 for j in hoist + sink if j < i)
    end2 = end - sum(1 for j in hoist + sink if j < end)
    return "".join(keep[:i2] + moved_up + keep[i2:end2 + 1] + moved_down + keep[end2 + 1:])


def raise_store_wait(text: str) -> str:
    """The first ``ttng.async_tma_store_wait {pendings = N ...}`` inside a loop or partition, ``N + 1``."""
    lines = _lines(text)
    first = next((i for i, ln in enumerate(lines) if re.search(r"\bscf\.for\b", ln)), len(lines))
    for i in range(first, len(lines)):
        m = re.search(r"(ttng\.async_tma_store_wait \{pendings = )(\d+)", lines[i])
        if m:
            lines[i] = lines[i][:m.start(2)] + str(int(m.group(2)) + 1) + lines[i][m.end(2):]
            return "".join(lines)
    raise ValueError("no ttng.async_tma_store_wait after the first loop")


def drop_store_fence(text: str) -> str:
    """The ``ttng.fence_async_shared`` before the first ``ttng.async_tma_copy_local_to_global`` deleted."""
    lines = _lines(text)
    st = next((i for i, ln in enumerate(lines) if "ttng.async_tma_copy_local_to_global" in ln), None)
    if st is None:
        raise ValueError("no TMA store")
    f = next((i for i in range(st - 1, -1, -1) if "ttng.fence_async_shared" in lines[i]), None)
    if f is None:
        raise ValueError("no ttng.fence_async_shared before the first TMA store")
    del lines[f]
    return "".join(lines)


def skip_last_tile_wait(text: str) -> str:
    """A tile epilogue's wait put under ``scf.if`` on ``tile_id + step < num_tiles`` (module docstring)."""
    lines = _lines(text)
    ws = bool(re.search(r"\bttg\.warp_specialize\b", text))
    loops = _tile_loops(lines)
    for i in loops:
        h = re.search(r"scf\.for (%[\w$.-]+) = (%[\w$.#-]+) to (%[\w$.#-]+) step (%[\w$.#-]+)", lines[i])
        if not h:
            continue
        iv, _lb, ub, step = h.groups()
        end = _close(lines, i)
        inner_end = max(_close(lines, j) for j in range(i + 1, end) if re.search(r"\bscf\.for\b", lines[j]))
        for j in range(inner_end + 1, end):
            ln = lines[j]
            ind = _indent(ln)
            head = (f"{ind}%synth_next = arith.addi {iv}, {step} : i32\n"
                    f"{ind}%synth_more = arith.cmpi slt, %synth_next, {ub} : i32\n")
            if not ws:
                m = re.match(r"\s*(%[\w$.-]+) = ttng\.warp_group_dot_wait (%[\w$.#-]+) (\{pendings = 0 : i32\}) : "
                             r"(tensor<[^>]*>)(.*)$", ln)
                if m:
                    res, acc, attr, ty, rest = m.groups()
                    loc = re.search(r"\s(loc\(.*\))\s*$", rest)
                    tail = f" {loc.group(1)}" if loc else ""
                    lines[j] = (head + f"{ind}{res} = scf.if %synth_more -> ({ty}) {{\n"
                                f"{ind}  %synth_w = ttng.warp_group_dot_wait {acc} {attr} : {ty}{tail}\n"
                                f"{ind}  scf.yield %synth_w : {ty}\n{ind}}} else {{\n"
                                f"{ind}  scf.yield {acc} : {ty}\n{ind}}}\n")
                    return "".join(lines)
            elif re.match(r"\s*ttng\.async_tma_store_wait \{pendings = 0 : i32\}", ln):
                lines[j] = head + f"{ind}scf.if %synth_more {{\n{ind}  {ln.lstrip()}{ind}}}\n"
                return "".join(lines)
    raise ValueError("no tile epilogue wait (warp_group_dot_wait {pendings = 0} or async_tma_store_wait) after a "
                     "k-loop in a tile loop")


def arrive_count_off_by_one(text: str) -> str:
    """Warp-specialized: the first ``ttng.arrive_barrier %b, N`` made ``N - 1``; one warp group: every
    ``ttng.init_barrier %b, 1`` of the tile loop's ring made 2."""
    if re.search(r"\bttg\.warp_specialize\b", text):
        new, n = re.subn(r"(ttng\.arrive_barrier %[\w$.#-]+, )(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) - 1}",
                         text, count=1)
        if not n:
            raise ValueError("no ttng.arrive_barrier")
        return new
    new, n = re.subn(r"(ttng\.init_barrier %[\w$.#-]+, )1\b", r"\g<1>2", text)
    if not n:
        raise ValueError("no ttng.init_barrier ..., 1")
    return new


def parity_from_tile_local_k(text: str) -> str:
    """Warp-specialized ring (module docstring): in every k-loop inside a tile loop, the phase bit ``(count /
    N) & 1`` computed from the k-loop's own induction variable instead of the carried count."""
    if not re.search(r"\bttg\.warp_specialize\b", text):
        raise ValueError("not a warp-specialized kernel")
    lines = _lines(text)
    n = 0
    for i in reversed(_tile_loops(lines)):  # bottom up: an inserted line shifts only what follows it
        end = _close(lines, i)
        for j in range(i + 1, end):
            km = re.search(r"scf\.for (%[\w$.-]+) = \S+ to \S+ step \S+ iter_args\((.*?)\)\s*->", lines[j])
            if not km:
                continue
            iv = km.group(1)
            carried = re.findall(r"(%[\w$.-]+)\s*=", km.group(2))
            kend = _close(lines, j)
            for m in range(j + 1, kend):
                dm = re.match(r"\s*(%[\w$.-]+) = arith\.divui (%[\w$.-]+), (%c\d+_i64)\b", lines[m])
                if not dm or dm.group(2) not in carried:
                    continue
                q, stages = dm.group(1), dm.group(3)
                am = next((a for a in range(m + 1, kend)
                           if re.match(rf"\s*%[\w$.-]+ = arith\.andi {re.escape(q)}, %c1_i64\b", lines[a])), None)
                if am is None:
                    continue
                kl, kq = f"%synth_kl{n}", f"%synth_kq{n}"
                lines[am] = lines[am].replace(f"arith.andi {q},", f"arith.andi {kq},", 1)
                ind = _indent(lines[j + 1])
                lines[j + 1:j + 1] = [f"{ind}{kl} = arith.extsi {iv} : i32 to i64\n",
                                      f"{ind}{kq} = arith.divui {kl}, {stages} : i64\n"]
                n += 1
                break
            break
    if not n:
        raise ValueError("no phase bit (count / N) & 1 of a carried count in a k-loop inside a tile loop")
    return "".join(lines)


def rewrite_staging_before_read(text: str) -> str:
    """The first ``ttng.async_tma_store_wait`` directly before a staging write (``ttg.local_store`` or
    ``ttg.local_alloc`` of a value) swapped with it: the write no longer waits for the previous store's read."""
    lines = _lines(text)
    for i, ln in enumerate(lines[:-1]):
        if "ttng.async_tma_store_wait" in ln and re.search(r"ttg\.local_store |= ttg\.local_alloc %", lines[i + 1]):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            return "".join(lines)
    raise ValueError("no ttng.async_tma_store_wait directly before a staging write")


MUTANTS = {
    "reset_phase_per_tile": reset_phase_per_tile,
    "raise_store_wait": raise_store_wait,
    "drop_store_fence": drop_store_fence,
    "skip_last_tile_wait": skip_last_tile_wait,
    "arrive_count_off_by_one": arrive_count_off_by_one,
    "parity_from_tile_local_k": parity_from_tile_local_k,
    "rewrite_staging_before_read": rewrite_staging_before_read,
}
"""Every mutant of this module by name (each applies to the tile-loop and TMA-store fixtures it can edit)."""

__all__ = ["reset_phase_per_tile", "raise_store_wait", "drop_store_fence", "skip_last_tile_wait",
           "arrive_count_off_by_one", "parity_from_tile_local_k", "rewrite_staging_before_read", "MUTANTS"]

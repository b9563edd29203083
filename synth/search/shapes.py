"""GEMM shapes for a many-shape search: checked tuples and CSV files.

Input: ``(M, N, K)`` triples or a CSV file whose header names columns M, N and K.
Output: a list of ``(M, N, K)`` tuples of positive integers; malformed input
raises :class:`~synth.errors.SynthError` naming the file, line and column.
"""

from __future__ import annotations

import csv

from ..bounds import MAX_GEMM_DIM, MAX_SHAPES, MAX_SHAPES_BYTES
from ..errors import Loc, SynthError
from ..readfile import read_regular_text


def as_shape(s) -> tuple[int, int, int]:
    """``s`` as three integers ``(M, N, K)``; raises SynthError when it is not."""
    try:
        M, N, K = (int(x) for x in s)
    except (TypeError, ValueError):
        raise SynthError(None, f"shape {s!r} is not three integers M, N, K", "write shapes as (M, N, K)") from None
    return M, N, K


def read_shapes_csv(path: str) -> list[tuple[int, int, int]]:
    """Shapes from a CSV file with a header naming columns M, N and K (any order, other columns ignored).

    Blank lines and lines starting with ``#`` are skipped. Errors name the file,
    the line and the column. Only a regular file of at most
    :data:`~synth.bounds.MAX_SHAPES_BYTES` of UTF-8 text is read (:mod:`synth.readfile`: never a
    device or a FIFO), with at most :data:`~synth.bounds.MAX_SHAPES` shapes, each size in
    ``1 .. MAX_GEMM_DIM``.
    """
    text = read_regular_text(path, MAX_SHAPES_BYTES, "the --shapes file",
                             fix="pass a CSV file with a header M,N,K and one shape per line")
    rows = [(n, line) for n, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        raise SynthError(Loc(path, 1, 1), "no shapes: the file is empty", "write a header 'M,N,K' and one shape per line")
    head_line, head = rows[0]
    cols = [c.strip() for c in next(csv.reader([head]))]
    idx = {}
    for want in ("M", "N", "K"):
        hits = [i for i, c in enumerate(cols) if c.upper() == want]
        if not hits:
            raise SynthError(Loc(path, head_line, 1), f"the header has no column {want} (it has {', '.join(cols)})",
                             "start the file with a header line 'M,N,K'")
        idx[want] = hits[0]
    out = []
    if len(rows) - 1 > MAX_SHAPES:
        n = rows[MAX_SHAPES + 1][0]
        raise SynthError(Loc(path, n, 1), f"more than {MAX_SHAPES} shapes", "split the file (see docs/bounds.md)")
    for n, line in rows[1:]:
        try:
            cells = next(csv.reader([line]))
        except csv.Error as exc:
            raise SynthError(Loc(path, n, 1), f"not a CSV line: {exc}", "write M,N,K on every line") from None
        vals = []
        for want in ("M", "N", "K"):
            i = idx[want]
            col = 1 + sum(len(c) + 1 for c in cells[:i])
            if i >= len(cells) or not cells[i].strip():
                raise SynthError(Loc(path, n, col), f"line has no value for {want}", "write M,N,K on every line")
            cell = cells[i].strip()
            if not cell.isascii() or not cell.lstrip("+-").isdigit() or len(cell) > 24:
                shown = cell if len(cell) <= 30 else cell[:27] + "..."
                raise SynthError(Loc(path, n, col), f"{want} = {shown!r} is not an integer",
                                 "write sizes as plain integers such as 4096")
            v = int(cell)
            if v < 1:
                raise SynthError(Loc(path, n, col), f"{want} = {v} is not positive", "use sizes of at least 1")
            if v > MAX_GEMM_DIM:
                raise SynthError(Loc(path, n, col), f"{want} = {v} is above the maximum {MAX_GEMM_DIM}",
                                 "see docs/bounds.md")
            vals.append(v)
        out.append((vals[0], vals[1], vals[2]))
    if not out:
        raise SynthError(Loc(path, head_line, 1), "no shapes after the header", "add lines such as 4096,4096,4096")
    return out

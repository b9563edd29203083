"""One root exception for everything a user can get wrong, with a source location.

Only ``synth.cli`` turns a :class:`SynthError` into exit status 2; library code
raises and never prints.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in an input file (1-based line and column)."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


class SynthError(Exception):
    """A user-facing error: where it is, what is wrong, and how to fix it."""

    def __init__(self, loc: Loc | None, msg: str, fix: str = "") -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg
        self.fix = fix

    def render(self) -> str:
        """Format as ``file:line:col: error: msg``, the offending line with a caret, then ``fix: ...``."""
        head = f"{self.loc}: error: {self.msg}" if self.loc else f"error: {self.msg}"
        lines = [head]
        if self.loc and self.loc.line > 0:
            src = _source_line(self.loc.file, self.loc.line)
            if src is not None:
                src, col = _window(_printable(src.rstrip("\r\n")), max(self.loc.col - 1, 0))
                # Keep tabs in the caret's indent so it lines up under the same column.
                pad = "".join("\t" if ch == "\t" else " " for ch in src[:col])
                lines.append("    " + src)
                lines.append("    " + pad + "^")
        if self.fix:
            lines.append(f"fix: {self.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class Infeasible(SynthError):
    """The problem has no schedule; ``reasons`` name the user constraints that clash."""

    def __init__(self, loc: Loc | None, reasons: list[str], fix: str = "") -> None:
        msg = "problem is infeasible: " + "; ".join(reasons)
        super().__init__(loc, msg, fix)
        self.reasons = list(reasons)


_SOURCE_LIMIT = 1 << 20
"""Bytes of a file searched for the offending line (the loader's input bound)."""


def _source_line(path: str, line: int) -> str | None:
    """Line ``line`` of a regular file, lines ending at LF, CRLF or CR as in an editor."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(_SOURCE_LIMIT)
    except OSError:
        return None
    lines = re.split("\r\n|\r|\n", text)
    return lines[line - 1] if 0 < line <= len(lines) else None


SHOWN_COLUMNS = 120
"""An offending line longer than this (minified JSON, say) is shown as this many columns around the error."""


def _window(src: str, col: int) -> tuple[str, int]:
    """``(shown text, caret column in it)``: the whole line, or :data:`SHOWN_COLUMNS` around ``col``
    with ``...`` marking what was cut."""
    if len(src) <= SHOWN_COLUMNS:
        return src, col
    start = max(0, min(col - SHOWN_COLUMNS // 2, len(src) - SHOWN_COLUMNS))
    head = "..." if start > 0 else ""
    tail = "..." if start + SHOWN_COLUMNS < len(src) else ""
    return head + src[start:start + SHOWN_COLUMNS] + tail, col - start + len(head)


def _printable(src: str) -> str:
    """``src`` with control characters shown as ``?`` (one column each, so the caret stays put)."""
    return "".join(ch if ch == "\t" or ch.isprintable() else "?" for ch in src)

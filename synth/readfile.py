"""The one reader of files a user hands synth: regular files only, bounded while reading.

Every command that reads a user-supplied file (a problem, a ``schedule.json`` or
``program.json`` of an output folder, a ``synth check`` input, a ``--shapes`` CSV)
goes through :func:`read_regular_bytes`, :func:`read_regular_text` or :func:`load_json`:

* the file is opened with ``O_NONBLOCK`` (a FIFO with no writer does not block the
  open) and ``O_NOFOLLOW`` where asked, then ``fstat`` of the open descriptor must
  say a regular file: a folder, a device (``/dev/zero``), a FIFO or a socket is
  refused before one byte is read, and the check and the read are on the same file;
* at most ``limit + 1`` bytes are read, so the size limit holds while reading (a file
  that grows, or lies about its size, is still cut at the limit);
* JSON is scanned for its nesting depth before :func:`json.loads` (whose decoder
  recurses), so a document nested 100,000 deep is a located error, not a
  ``RecursionError``; a syntax error names the line and column.

Every failure is a :class:`~synth.errors.SynthError` (exit status 2) naming the file,
what it should have been and how to fix it. ``synth/trusted/`` keeps its own reader
(the trusted base imports nothing of synth).
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Optional, Union

from .errors import Loc, SynthError

MAX_JSON_DEPTH = 64
"""Nesting of JSON arrays and objects (synth's deepest document needs 6)."""

_LINE_BREAK = re.compile("\r\n|\r|\n")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} bytes"


def read_regular_bytes(path: str, limit: int, what: str, *, follow: bool = True, fix: str = "") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    ``what`` names the file in messages ("the problem file", "program.json").
    Raises :class:`SynthError` (located at ``path``) when the path does not exist, is
    not a regular file (checked with ``fstat`` on the opened descriptor; the open never
    blocks on a FIFO), is a symbolic link and ``follow`` is False, cannot be read, or
    holds more than ``limit`` bytes (read stops at ``limit + 1``).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fix = fix or f"give the path of {what}, a regular file"
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise SynthError(Loc(path), f"cannot read {what}: no such file", fix) from None
    except IsADirectoryError:
        raise SynthError(Loc(path), f"{what} is a folder, not a regular file", fix) from None
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise SynthError(Loc(path), f"{what} is a symbolic link", "give the file itself, not a link to it") \
                from None
        raise SynthError(Loc(path), f"cannot read {what}: {exc.strerror or exc}", fix) from None
    except (ValueError, TypeError) as exc:  # an embedded NUL byte in the path
        raise SynthError(Loc(str(path)), f"cannot read {what}: {exc}", fix) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SynthError(Loc(path), f"{what} is {_kind(st.st_mode)}, not a regular file", fix)
        if st.st_size > limit:
            raise SynthError(Loc(path), f"{what} has {st.st_size} bytes, more than the {limit} allowed ({_size(limit)})",
                             "see docs/bounds.md")
        # A regular file never blocks; clear O_NONBLOCK anyway so a short read means end of file.
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read {what}: {exc.strerror or exc}", fix) from None
    finally:
        os.close(fd)
    if got > limit:
        raise SynthError(Loc(path), f"{what} has more than the {limit} bytes allowed ({_size(limit)})",
                         "see docs/bounds.md")
    return b"".join(chunks)


def decode_utf8(data: bytes, path: str, what: str) -> str:
    """``data`` as UTF-8 text; a byte that is not UTF-8 is a :class:`SynthError` at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = len(_LINE_BREAK.findall(before.decode("utf-8", "replace"))) + 1
        start = max(before.rfind(b"\n"), before.rfind(b"\r")) + 1
        col = len(before[start:].decode("utf-8", "replace")) + 1
        raise SynthError(Loc(path, line, col), f"{what} is not UTF-8 text (byte {exc.start}, "
                         f"0x{data[exc.start]:02x}: {exc.reason})", "save the file as UTF-8") from None


def read_regular_text(path: str, limit: int, what: str, *, follow: bool = True, fix: str = "") -> str:
    """:func:`read_regular_bytes` decoded as UTF-8 (:func:`decode_utf8`)."""
    return decode_utf8(read_regular_bytes(path, limit, what, follow=follow, fix=fix), path, what)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    before = text[:pos]
    line = len(_LINE_BREAK.findall(before)) + 1
    start = max(before.rfind("\n"), before.rfind("\r")) + 1
    return line, pos - start + 1


def json_depth_error(text: str, max_depth: int = MAX_JSON_DEPTH) -> Optional[int]:
    """The offset of the first ``[`` or ``{`` nested deeper than ``max_depth`` (outside strings), else None.

    A linear scan that never recurses: it runs before :func:`json.loads`, whose decoder does.
    """
    depth = 0
    in_str = False
    esc = False
    for m in re.finditer(r'[\[\]{}"\\]', text):
        ch = m.group()
        if in_str:
            if esc:
                esc = False
                # an escaped character right after a backslash: skip it only if this match is that character
                continue
            if ch == "\\":
                # the escaped character is the next one; it is matched only when it is one of ours
                nxt = text[m.end():m.end() + 1]
                if nxt in '"\\[]{}':
                    esc = True
                continue
            if ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif ch in "]}":
            depth -= 1
    return None


def load_json(source: Union[str, bytes, os.PathLike], limit: int, what: str, *, path: Optional[str] = None,
              max_depth: int = MAX_JSON_DEPTH, follow: bool = True) -> Any:
    """The JSON document of a regular file (``source`` a path) or of bytes/text already read.

    With bytes or text, ``path`` names where they came from. The size limit is
    :func:`read_regular_bytes`'s; nesting deeper than ``max_depth`` arrays/objects, a
    byte that is not UTF-8, a syntax error, ``NaN``/``Infinity`` and a number with more
    than 4300 digits are a :class:`SynthError` at the line and column (exit 2).
    """
    if isinstance(source, (bytes, bytearray)):
        where = path or "<bytes>"
        if len(source) > limit:
            raise SynthError(Loc(where), f"{what} has more than the {_size(limit)} allowed", "see docs/bounds.md")
        text = decode_utf8(bytes(source), where, what)
    elif isinstance(source, str) and path is not None:
        where = path
        if len(source) > limit:
            raise SynthError(Loc(where), f"{what} has more than the {_size(limit)} allowed", "see docs/bounds.md")
        text = source
    else:
        where = os.fspath(source)
        text = read_regular_text(where, limit, what, follow=follow)
    at = json_depth_error(text, max_depth)
    if at is not None:
        line, col = _line_col(text, at)
        raise SynthError(Loc(where, line, col), f"{what} nests arrays and objects more than {max_depth} deep",
                         f"{what} is written by synth and is at most a few levels deep; regenerate it")

    def _const(name: str):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=_const)
    except json.JSONDecodeError as exc:
        raise SynthError(Loc(where, exc.lineno, exc.colno), f"{what} is not valid JSON: {exc.msg}",
                         f"{what} is written by synth; regenerate it") from None
    except (ValueError, RecursionError) as exc:
        raise SynthError(Loc(where), f"{what} is not valid JSON: {exc}",
                         f"{what} is written by synth; regenerate it") from None


__all__ = ["MAX_JSON_DEPTH", "read_regular_bytes", "read_regular_text", "decode_utf8", "load_json",
           "json_depth_error"]

"""YAML documents as plain dicts/lists that remember where each key and value came from.

``yaml.compose`` gives nodes with 0-based marks; :func:`read_yaml` turns them into
:class:`LDict`/:class:`LList` so validation code reads ordinary Python values and
still reports ``file:line:col``.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable

import yaml

from .errors import Loc, SynthError


class LDict(dict):
    """A mapping with ``key_loc[k]`` and ``val_loc[k]`` for every key, and ``loc`` for itself."""

    loc: Loc
    key_loc: dict[str, Loc]
    val_loc: dict[str, Loc]


class LList(list):
    """A sequence with ``item_loc[i]`` for every item, and ``loc`` for itself."""

    loc: Loc
    item_loc: list[Loc]


def _loc(path: str, node: yaml.Node) -> Loc:
    return Loc(path, node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(path: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        out = LDict()
        out.loc, out.key_loc, out.val_loc = _loc(path, node), {}, {}
        for knode, vnode in node.value:
            key = _convert(path, knode)
            if not isinstance(key, str):
                raise SynthError(_loc(path, knode), f"key {key!r} is not a name",
                                 "write keys as plain words")
            if key in out:
                raise SynthError(_loc(path, knode), f"duplicate key '{key}'",
                                 "give each key once")
            out[key] = _convert(path, vnode)
            out.key_loc[key] = _loc(path, knode)
            out.val_loc[key] = _loc(path, vnode)
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LList(_convert(path, n) for n in node.value)
        seq.loc, seq.item_loc = _loc(path, node), [_loc(path, n) for n in node.value]
        return seq
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def read_yaml(path: str) -> LDict:
    """Read one YAML mapping from ``path``; syntax errors become :class:`SynthError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read problem file: {exc.strerror}",
                         "check the path") from None
    return read_yaml_text(text, path)


def read_yaml_text(text: str, path: str = "<string>") -> LDict:
    """Like :func:`read_yaml` for text already in memory."""
    try:
        node = yaml.compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Loc(path, mark.line + 1, mark.column + 1) if mark else Loc(path)
        raise SynthError(loc, f"YAML syntax error: {exc.problem or exc.context}",
                         "fix the YAML syntax at this line (indentation, brackets, quotes)") from None
    except yaml.YAMLError as exc:
        raise SynthError(Loc(path), f"YAML error: {exc}", "fix the YAML syntax") from None
    if node is None:
        raise SynthError(Loc(path, 1, 1), "the problem file is empty",
                         "write a mapping with name, loop, buffers, ops and target")
    doc = _convert(path, node)
    if not isinstance(doc, LDict):
        raise SynthError(_loc(path, node), "the problem file must be a YAML mapping",
                         "write keys such as 'name:', 'loop:', 'ops:' at the top level")
    return doc


def check_keys(d: LDict, allowed: Iterable[str], what: str) -> None:
    """Raise on the first key of ``d`` not in ``allowed``, suggesting the closest one."""
    allowed = list(allowed)
    for key in d:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"allowed keys in {what}: {', '.join(allowed)}"
            raise SynthError(d.key_loc[key], f"unknown key '{key}' in {what}", fix)


def require(d: LDict, key: str, what: str, fix: str = "") -> Any:
    """``d[key]``, or an error at ``d`` saying the key is missing."""
    if key not in d:
        raise SynthError(d.loc, f"{what} is missing '{key}'", fix or f"add '{key}:' to {what}")
    return d[key]


def want_int(d: LDict, key: str, what: str, lo: int | None = None, default: Any = ...) -> Any:
    """``d[key]`` as an int ``>= lo``; ``default`` when absent (required when no default)."""
    if key not in d:
        if default is ...:
            require(d, key, what)
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise SynthError(d.val_loc[key], f"'{key}' of {what} must be an integer, not {v!r}",
                         f"write a whole number for '{key}'")
    if lo is not None and v < lo:
        raise SynthError(d.val_loc[key], f"'{key}' of {what} is {v}, below the minimum {lo}",
                         f"use a value of at least {lo}")
    return v


def suggest(name: str, known: Iterable[str]) -> str:
    """A ``did you mean`` hint, or the list of known names."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return f"known: {', '.join(known) if known else '(none)'}"

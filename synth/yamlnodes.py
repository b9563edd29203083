"""YAML documents as plain dicts/lists that remember where each key and value came from.

``yaml.compose`` gives nodes with 0-based marks; :func:`read_yaml` turns them into
:class:`LDict`/:class:`LList` so validation code reads ordinary Python values and
still reports ``file:line:col``.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Any, Iterable

import yaml

from .bounds import MAX_INPUT_BYTES, MAX_INT_DIGITS, MAX_STRING, MAX_YAML_DEPTH, MAX_YAML_NODES
from .errors import Loc, SynthError
from .readfile import read_regular_text


class LDict(dict):
    """A mapping with ``key_loc[k]`` and ``val_loc[k]`` for every key, and ``loc`` for itself.

    ``val_style[k]`` is the YAML scalar style of a scalar value (``None`` plain,
    ``"'"`` or ``'"'`` quoted, ``"|"``/``">"`` block), so a column inside a string
    can be mapped back to the file.
    """

    loc: Loc
    key_loc: dict[str, Loc]
    val_loc: dict[str, Loc]
    val_style: dict[str, str | None]
    source: str | None = None
    """The text the document was read from (set on the root of :func:`read_yaml_text`'s result)."""


class LList(list):
    """A sequence with ``item_loc[i]`` for every item, and ``loc`` for itself."""

    loc: Loc
    item_loc: list[Loc]


def empty_ldict(loc: Loc) -> LDict:
    """An empty :class:`LDict` located at ``loc`` (for ``key:`` with no value)."""
    out = LDict()
    out.loc, out.key_loc, out.val_loc, out.val_style = loc, {}, {}, {}
    return out


def _loc(path: str, node: yaml.Node) -> Loc:
    return Loc(path, node.start_mark.line + 1, node.start_mark.column + 1)


_MERGE_TAG = "tag:yaml.org,2002:merge"
_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_BOUNDS = "see docs/bounds.md"

# What PyYAML rejects (its Reader's NON_PRINTABLE), plus the characters it takes as line
# breaks but editors do not (NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR): rejecting them keeps
# every reported line number equal to the one an editor shows.
_BAD_CHAR = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\u2028\u2029]")
_LINE_BREAK = re.compile("\r\n|\r|\n")


class _Limits:
    """Nodes built so far while converting (aliases and merge keys expand)."""

    def __init__(self) -> None:
        self.nodes = 0


def _convert(path: str, node: yaml.Node, active: frozenset[int] = frozenset(), depth: int = 0,
             limits: _Limits | None = None) -> Any:
    limits = limits or _Limits()
    limits.nodes += 1
    if limits.nodes > MAX_YAML_NODES:
        raise SynthError(_loc(path, node), f"the document expands to more than {MAX_YAML_NODES} YAML nodes "
                         "(aliases and merge keys are copied where they are used)",
                         f"write the values out instead of nesting aliases ({_BOUNDS})")
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if id(node) in active:
            raise SynthError(_loc(path, node), "an alias ('*name') refers to a mapping or list that contains it",
                             "copy the values instead of nesting an anchor inside itself")
        if depth >= MAX_YAML_DEPTH:
            raise SynthError(_loc(path, node), f"mappings and lists are nested more than {MAX_YAML_DEPTH} deep "
                             "(aliases included)", f"a problem file needs 4 levels; flatten it ({_BOUNDS})")
        want = _CORE + ("map" if isinstance(node, yaml.MappingNode) else "seq")
        if node.tag != want:
            raise SynthError(_loc(path, node), f"cannot read value: YAML tag {node.tag!r} is not supported",
                             "remove the tag: write a plain mapping or list")
        active = active | {id(node)}
    if isinstance(node, yaml.MappingNode):
        out = empty_ldict(_loc(path, node))
        merged: list[tuple[str, Any, Loc, Loc, str | None]] = []
        for knode, vnode in node.value:
            if knode.tag == _MERGE_TAG:
                merged.extend(_merge_items(path, vnode, active, depth, limits))
                continue
            key = _convert(path, knode, frozenset(), depth + 1, limits)
            if not isinstance(key, str):
                raise SynthError(_loc(path, knode), f"key {key!r} is not a name",
                                 "write keys as plain words (quote a key that looks like a number)")
            if key in out:
                first = out.key_loc[key]
                raise SynthError(_loc(path, knode), f"duplicate key '{key}' (first given at line {first.line})",
                                 f"give '{key}' once: delete or rename one of the two")
            out[key] = _convert(path, vnode, active, depth + 1, limits)
            out.key_loc[key] = _loc(path, knode)
            out.val_loc[key] = _loc(path, vnode)
            out.val_style[key] = vnode.style if isinstance(vnode, yaml.ScalarNode) else None
        for key, val, kloc, vloc, style in merged:  # explicit keys win over merged ones
            if key not in out:
                out[key], out.key_loc[key], out.val_loc[key], out.val_style[key] = val, kloc, vloc, style
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LList(_convert(path, n, active, depth + 1, limits) for n in node.value)
        seq.loc, seq.item_loc = _loc(path, node), [_loc(path, n) for n in node.value]
        return seq
    return _scalar(path, node)


def _scalar(path: str, node: yaml.Node) -> Any:
    """The value of a scalar node: core YAML types only, integers and strings within bounds."""
    loc = _loc(path, node)
    if node.tag not in _SCALAR_TAGS:
        raise SynthError(loc, f"cannot read value: YAML tag {node.tag!r} is not supported",
                         "write a plain number, word or quoted string (no YAML tags such as !!binary)")
    text = str(node.value)
    if node.tag == _CORE + "int":
        digits = sum(ch.isdigit() for ch in text)
        if digits > MAX_INT_DIGITS:
            raise SynthError(loc, f"integer with {digits} digits is out of range (at most {MAX_INT_DIGITS} "
                             "digits; every number in a problem file has a smaller bound)",
                             f"use a number within the bound of this key ({_BOUNDS})")
    if len(text) > MAX_STRING:
        raise SynthError(loc, f"value of {len(text)} characters is longer than {MAX_STRING}",
                         f"shorten it ({_BOUNDS})")
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except Exception as exc:  # noqa: BLE001 - PyYAML's constructors on a tag that does not fit the text
        # raise what they happen to: KeyError ('!!bool gemm'), IndexError ('!!int ""', '!!float ""'),
        # AttributeError (an explicit !!timestamp that is not one), ValueError, OverflowError, ...
        why = getattr(exc, "problem", None) or (str(exc) if not isinstance(exc, (KeyError, IndexError)) else "") \
            or f"not a {node.tag[len(_CORE):]} value"
        kind = node.tag[len(_CORE):]
        raise SynthError(loc, f"cannot read value {text[:40]!r} as {kind}: {why}",
                         "write a plain number, word or quoted string (no YAML tags such as !!int)") from None


def _merge_items(path: str, vnode: yaml.Node, active: frozenset[int], depth: int,
                 limits: _Limits) -> list[tuple[str, Any, Loc, Loc, str | None]]:
    """The entries a YAML merge key (``<<: *base`` or ``<<: [*a, *b]``) brings in, first source first."""
    sources = vnode.value if isinstance(vnode, yaml.SequenceNode) else [vnode]
    items: list[tuple[str, Any, Loc, Loc, str | None]] = []
    seen: set[str] = set()
    for src in sources:
        if not isinstance(src, yaml.MappingNode):
            raise SynthError(_loc(path, src), "'<<' must merge a mapping",
                             "write '<<: *anchor' where the anchor names a mapping")
        d = _convert(path, src, active, depth, limits)
        for key, val in d.items():
            if key not in seen:
                seen.add(key)
                items.append((key, val, d.key_loc[key], d.val_loc[key], d.val_style.get(key)))
    return items


class _Composer(yaml.SafeLoader):
    """PyYAML's safe loader, composing with bounded nesting (its composer recurses)."""

    path = "<string>"
    depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            mark = self.peek_event().start_mark
            self.depth += 1
            if self.depth > MAX_YAML_DEPTH:
                raise SynthError(Loc(self.path, mark.line + 1, mark.column + 1),
                                 f"mappings and lists are nested more than {MAX_YAML_DEPTH} deep",
                                 f"a problem file needs 4 levels; flatten it ({_BOUNDS})")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
        return super().compose_node(parent, index)


def read_yaml(path: str) -> LDict:
    """Read one YAML mapping from ``path``; syntax errors become :class:`SynthError`.

    Only a regular file of at most :data:`~synth.bounds.MAX_INPUT_BYTES` bytes of
    UTF-8 text is read (never a device or a FIFO: ``/dev/zero`` is refused at once).
    """
    text = read_regular_text(path, MAX_INPUT_BYTES, "the problem file", fix="give the path of a problem.yaml file")
    return read_yaml_text(text, path)


def read_yaml_text(text: str, path: str = "<string>") -> LDict:
    """Like :func:`read_yaml` for text already in memory."""
    if len(text) > MAX_INPUT_BYTES:
        raise SynthError(Loc(path), f"the problem text has {len(text)} characters, more than the "
                         f"{MAX_INPUT_BYTES} allowed", f"a problem file is a few KiB ({_BOUNDS})")
    bad = _BAD_CHAR.search(text)
    if bad is not None:
        raise _bad_char_error(text, bad.start(), path)
    node = _compose_fast(text, path)
    if node is ...:
        loader = _Composer(text)
        loader.path = path
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            raise _syntax_error(exc, text, path) from None
        except yaml.YAMLError as exc:
            raise SynthError(Loc(path), f"YAML error: {exc}", "fix the YAML syntax") from None
        finally:
            loader.dispose()
    if node is None:
        raise SynthError(Loc(path, 1, 1), "the problem file is empty",
                         "write a mapping with name, loop, buffers, ops and target")
    doc = _convert(path, node)
    if not isinstance(doc, LDict):
        kind = "a list" if isinstance(doc, list) else f"the value {doc!r}"
        raise SynthError(_loc(path, node), f"the problem file must be a YAML mapping, but it is {kind}",
                         "write keys such as 'name:', 'loop:', 'ops:' at the top level, without a leading '-'")
    doc.source = text
    return doc


def _compose_fast(text: str, path: str) -> Any:
    """Compose with libyaml when PyYAML has it (ten times faster); ``...`` when it has not, or
    the text has a syntax error (the pure-Python composer then words it as the tests expect).

    libyaml's composer recurses, so the events are first streamed (iteratively) to
    bound the nesting at :data:`~synth.bounds.MAX_YAML_DEPTH`.
    """
    if not getattr(yaml, "__with_libyaml__", False):
        return ...
    depth = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    mark = ev.start_mark
                    raise SynthError(Loc(path, mark.line + 1, mark.column + 1),
                                     f"mappings and lists are nested more than {MAX_YAML_DEPTH} deep",
                                     f"a problem file needs 4 levels; flatten it ({_BOUNDS})")
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        return yaml.compose(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return ...


def _bad_char_error(text: str, at: int, path: str) -> SynthError:
    """A located error for a control or line-separator character at offset ``at``."""
    before = text[:at]
    breaks = list(_LINE_BREAK.finditer(before))
    line = len(breaks) + 1
    col = at - (breaks[-1].end() if breaks else 0) + 1
    ch = text[at]
    name = unicodedata.name(ch, "a control character")
    return SynthError(Loc(path, line, col), f"character U+{ord(ch):04X} ({name}) is not allowed in a problem file",
                      "delete it (editors may not show it); use plain spaces and newlines")


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, path: str) -> SynthError:
    """One readable :class:`SynthError` for a PyYAML scanner/parser/composer error."""
    mark = exc.problem_mark or exc.context_mark
    loc = Loc(path, mark.line + 1, mark.column + 1) if mark else Loc(path)
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    lines = _LINE_BREAK.split(text)
    src = lines[mark.line] if mark and mark.line < len(lines) else ""
    lead = src[: len(src) - len(src.lstrip(" \t"))]
    at_tab = mark is not None and mark.column < len(src) and src[mark.column] == "\t"
    if mark and ("\t" in lead or at_tab):
        col = lead.index("\t") if "\t" in lead else mark.column
        return SynthError(Loc(path, mark.line + 1, col + 1),
                          "YAML syntax error: tab character in indentation" if "\t" in lead
                          else "YAML syntax error: a tab cannot start a YAML token here",
                          "indent with spaces only; replace the tab with spaces")
    msg = f"YAML syntax error: {problem}"
    ctx = exc.context_mark
    context = exc.context or ""
    if context and exc.problem and ctx is not None and (mark is None or ctx.line != mark.line):
        msg += f" ({context} at line {ctx.line + 1})"
    if "expected a single document" in context:
        msg = "YAML syntax error: a second YAML document starts here"
        problem = context
    elif problem.startswith("expected <block end>") and ctx is not None:
        what = "items of the list" if "collection" in context or "sequence" in context else "keys of the mapping"
        msg = (f"YAML syntax error: bad indentation: this line does not line up with the {what} "
               f"that starts at line {ctx.line + 1}")
    if "expected a single document" in problem:
        fix = "a problem file holds one YAML document: remove the '---' separator and what follows"
    elif "mapping values are not allowed" in problem:
        fix = "quote a value that contains ': ', or check the indentation of this line"
    elif "could not find expected ':'" in problem:
        fix = "write 'key: value' (a space after ':'), or quote the value"
    elif "expected ',' or ']'" in problem or "expected ',' or '}'" in problem:
        fix = "close the bracket and separate the items with ','"
    elif "found undefined alias" in problem:
        fix = "define the anchor ('&name') before using it ('*name')"
    elif "expected <block end>" in problem or "indentation" in problem:
        fix = "indent all keys of one mapping (and all items of one list) by the same number of spaces"
    elif "found unexpected end of stream" in problem or "found unknown escape" in problem:
        fix = "close the quoted string"
    else:
        fix = "fix the YAML syntax at this line (indentation, brackets, quotes)"
    return SynthError(loc, msg, fix)


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


def want_int(d: LDict, key: str, what: str, lo: int | None = None, default: Any = ...,
             hi: int | None = None) -> Any:
    """``d[key]`` as an int in ``lo .. hi``; ``default`` when absent (required when no default).

    ``hi`` is the documented bound (:mod:`synth.bounds`); the message names it.
    """
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
    check_bound(v, hi, d.val_loc[key], f"'{key}' of {what}")
    return v


def check_bound(v: int, hi: int | None, loc: Loc, what: str) -> None:
    """Raise at ``loc`` when ``v`` exceeds the documented bound ``hi`` (None: unbounded)."""
    if hi is not None and v > hi:
        raise SynthError(loc, f"{what} is {v}, above the maximum {hi}",
                         f"use a value of at most {hi} ({_BOUNDS})")


# ------------------------------------------------------------------------------------------------ writing
#
# The one writer of problem files (an output folder's problem.yaml): every top-level key on a line of its own
# at column 0, its value on that line (a mapping or list in flow style), every scalar written so that PyYAML
# reads it back as the same value and type. A file written so reads back to the same document, and a line
# reader of ``key: value`` lines (the trusted checker's, synth/trusted/flags.py) reads the keys it knows as
# YAML does.

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}
_RESOLVER = yaml.resolver.Resolver()


def _escape(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def yaml_scalar(value: Any) -> str:
    """``value`` (None, a bool, an int, a float or a string) as YAML on one line that reads back as the same
    value and type. A string is written plain only when it is a word that YAML reads as that string (``f16``,
    ``sm_90``, ``2x1``; never ``123``, ``true``, ``null``, ``0x10`` or ``1e3``), else double-quoted, with every
    character a problem file may not hold literally escaped."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text:  # YAML 1.1 (PyYAML) reads 1e+20 as a string: write 1.0e+20
            mant, exp = text.split("e")
            text = f"{mant}.0e{exp}"
        return text
    if isinstance(value, str):
        if _PLAIN.match(value) and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _CORE + "str":
            return value
        body = "".join(_ESCAPES.get(ch) or (_escape(ch) if _BAD_CHAR.match(ch) or ch == "\ufeff" else ch)
                       for ch in value)
        return f'"{body}"'
    raise TypeError(f"cannot write {type(value).__name__} {value!r} in a problem file")


def yaml_flow(value: Any) -> str:
    """``value`` on one line: a mapping as ``{k: v, ...}``, a list as ``[a, b]``, a scalar by :func:`yaml_scalar`."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_scalar(k)}: {yaml_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_flow(v) for v in value) + "]"
    return yaml_scalar(value)


def comment_text(text: str) -> str:
    """``text`` made safe for one YAML comment line: line breaks and characters a problem file may not hold
    escaped (a comment ends at a line break, and PyYAML also takes NEL and U+2028 for one)."""
    return "".join(_ESCAPES.get(ch) if ch in "\n\r\0" else _escape(ch) if _BAD_CHAR.match(ch) else ch
                   for ch in text)


def yaml_line(key: str, value: Any, comment: str | None = None) -> str:
    """One top-level ``key: value`` line (column 0, the value in flow style), with an optional ``# comment``."""
    line = f"{yaml_scalar(key)}: {yaml_flow(value)}"
    return line + (f"  # {comment_text(comment)}" if comment else "")


def comment_block(label: str, text: str) -> list[str]:
    """``text`` (any string, several lines included) as comment lines: ``# label: line 1``, ``#   line 2``, ..."""
    parts = [comment_text(p).rstrip() for p in _LINE_BREAK.split(text)]
    return [f"# {label}: {parts[0]}".rstrip()] + [f"#   {p}".rstrip() for p in parts[1:]]


def leading_comments(doc: LDict) -> list[str]:
    """The comment (and blank) lines of the text ``doc`` was read from that come before its first key."""
    text = getattr(doc, "source", None)
    if not text or doc.loc.line <= 1:
        return []
    lines = _LINE_BREAK.split(text.lstrip("\ufeff"))[: max(0, doc.loc.line - 1)]
    out = [ln.rstrip() for ln in lines if not ln.strip() or ln.lstrip().startswith("#")]
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def suggest(name: str, known: Iterable[str]) -> str:
    """A ``did you mean`` hint, or the list of known names."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return f"known: {', '.join(known) if known else '(none)'}"

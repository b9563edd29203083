"""The design keys of a folder's ``problem.yaml``, read by the trusted checker with a real YAML parser
(docs/trust.md, "The folder's design"): ``epilogue`` (a TMA-store epilogue adds ``store/``), ``pingpong``
(ping-pong consumers add ``order/``), ``persistent`` (the tile carry, which ``pingpong`` implies:
:attr:`Design.walks_tiles`) and ``cluster`` (a thread-block cluster
adds the cluster classes). Part of the trusted base: imports nothing from synth outside this package.

**The parser.** The text is parsed by PyYAML's pure-Python scanner and parser (``yaml.SafeLoader``'s), and
their events are composed and walked here; synth's own problem reader (``synth.yamlnodes``) composes with
libyaml and converts the nodes with its own code, none of which is used here. Every YAML form is read as
YAML reads it: flow and block mappings, quoted keys and values (a ``#`` inside quotes is not a comment),
escapes, multi-line and block scalars, explicit ``?`` keys, comments, a byte-order mark, ``---``.
When PyYAML has libyaml, the same events from libyaml's parser are walked too and must give the same
design (synth's reader uses that parser first): a text the two parsers read differently is refused.

**What is refused** (:class:`FlagError`, naming the file, the line and the fix; the checker never guesses):
a text that is not one YAML mapping (a syntax error, a second document, a list); a design key given twice
(also when one spelling is quoted or escaped); a design key, or its value, written with a tag (``!!str``), an
anchor (``&a``), an alias (``*a``) or an escape (``"clu\\x73ter"``); a design key brought in by a merge key
(``<<: *base``); a value that is not one of the allowed words (``pingpong`` a YAML 1.1 boolean as the
resolver reads a plain scalar: ``true``, ``yes``, ``off``...; a quoted ``"true"`` is a string).
The characters U+0085, U+2028 and U+2029 are refused (YAML breaks lines there, editors do not; synth's
problem reader refuses them too). At most :data:`MAX_BYTES` bytes, nested at most :data:`MAX_DEPTH` deep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import yaml

EPILOGUES = ("register", "tma_store")
CLUSTERS = ("1x1", "2x1", "1x2")
MAX_BYTES = 1 << 18
"""Size of a ``problem.yaml`` the design is read from (256 KiB, synth's bound on a problem file)."""
MAX_DEPTH = 32
"""Nesting of mappings and lists (synth's bound on a problem file)."""
DESIGN_KEYS = ("epilogue", "pingpong", "persistent", "cluster")
"""The top-level keys the checker reads."""
_BOOL_KEYS = ("pingpong", "persistent")
_CORE = "tag:yaml.org,2002:"
_BREAKS = re.compile("[\x85\u2028\u2029]")


class FlagError(ValueError):
    """A ``problem.yaml`` whose design key the checker cannot read for sure: ``where`` and ``fix``."""

    def __init__(self, where: str, msg: str, fix: str) -> None:
        super().__init__(f"{where}: {msg}")
        self.where, self.msg, self.fix = where, msg, fix


@dataclass(frozen=True)
class Design:
    """The design keys of one ``problem.yaml`` (the defaults where a key is absent) and their lines."""

    epilogue: str = "register"
    pingpong: bool = False
    persistent: bool = False
    cluster: str = "1x1"
    lines: dict = field(default_factory=dict, compare=False)
    """``key -> line`` of each key written."""

    @property
    def walks_tiles(self) -> bool:
        """Whether the kernel runs one ring over a persistent CTA's tiles, so that its certificate holds the tile
        ``carry``: ``persistent: true``, or ``pingpong: true`` (which implies it: each consumer warp group indexes the
        ring by the CTA's running tile count, whatever ``persistent:`` says)."""
        return self.persistent or self.pingpong


class _Node:
    """A composed node: ``kind`` is ``scalar``, ``map``, ``seq`` or ``alias`` (then ``target``)."""

    __slots__ = ("kind", "tag", "anchor", "value", "style", "implicit", "line", "escaped", "items", "target")

    def __init__(self, kind: str, ev, line: int) -> None:
        self.kind, self.line = kind, line
        self.tag = getattr(ev, "tag", None)
        self.anchor = getattr(ev, "anchor", None) if kind != "alias" else None
        self.value = getattr(ev, "value", None)
        self.style = getattr(ev, "style", None) or None  # libyaml gives '' for a plain scalar
        self.implicit = getattr(ev, "implicit", None)
        self.escaped = False
        self.items: list = []
        self.target: Optional[_Node] = None

    def deref(self) -> "_Node":
        return self.target if self.kind == "alias" else self


_RESOLVER = yaml.resolver.Resolver()


def _scalar_tag(n: _Node) -> str:
    """The tag a YAML composer gives the scalar ``n`` (PyYAML's resolver for a plain or ``!`` scalar)."""
    if n.tag is None or n.tag == "!":
        return _RESOLVER.resolve(yaml.ScalarNode, n.value, n.implicit if n.tag is None else (False, False))
    return n.tag


def _compose(events, text: Optional[str], path: str) -> Optional[_Node]:
    """The document of ``events`` as :class:`_Node` (None when the stream holds none); an escape is noted on a
    double-quoted scalar whose source (``text``, when given) holds a backslash."""
    stack: list[_Node] = []
    anchors: dict = {}
    root, docs = None, 0

    def where(ev) -> str:
        return f"{path}:{ev.start_mark.line + 1}"

    def attach(n: _Node) -> None:
        nonlocal root
        if stack:
            stack[-1].items.append(n)
        else:
            root = n

    for ev in events:
        line = ev.start_mark.line + 1
        if isinstance(ev, yaml.DocumentStartEvent):
            docs += 1
            if docs > 1:
                raise FlagError(where(ev), "a second YAML document starts here", "a problem file holds one document")
        elif isinstance(ev, yaml.AliasEvent):
            if ev.anchor not in anchors:
                raise FlagError(where(ev), f"alias *{ev.anchor} names no anchor", "write the value out")
            n = _Node("alias", ev, line)
            n.target = anchors[ev.anchor]
            attach(n)
        elif isinstance(ev, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            kind = "scalar" if isinstance(ev, yaml.ScalarEvent) else \
                "map" if isinstance(ev, yaml.MappingStartEvent) else "seq"
            n = _Node(kind, ev, line)
            if kind == "scalar" and n.style == '"' and text is not None:
                n.escaped = "\\" in text[ev.start_mark.index:ev.end_mark.index]
            if n.anchor is not None:
                if n.anchor in anchors:
                    raise FlagError(where(ev), f"anchor &{n.anchor} is defined twice", "give each anchor once")
                anchors[n.anchor] = n
            attach(n)
            if kind != "scalar":
                if len(stack) >= MAX_DEPTH:
                    raise FlagError(where(ev), f"mappings and lists are nested more than {MAX_DEPTH} deep",
                                    "a problem file needs 4 levels; flatten it")
                stack.append(n)
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
    return root


def _pairs(m: _Node):
    return zip(m.items[0::2], m.items[1::2])


def _merged_keys(n: _Node, active: frozenset = frozenset()) -> set:
    """The keys a merge key's value ``n`` brings in (mappings, lists of mappings, merges inside them)."""
    n = n.deref()
    if id(n) in active or n.kind == "scalar":
        return set()
    active = active | {id(n)}
    if n.kind == "seq":
        return set().union(*(_merged_keys(x, active) for x in n.items))
    out: set = set()
    for k, v in _pairs(n):
        kd = k.deref()
        if kd.kind == "scalar" and _scalar_tag(kd) == _CORE + "merge":
            out |= _merged_keys(v, active)
        elif kd.kind == "scalar":
            out.add(kd.value)
    return out


def _written(n: _Node) -> str:
    """How a scalar is written, if not plainly: an alias, a tag, an anchor or an escape ('' when plain)."""
    if n.kind == "alias":
        return f"an alias (*{n.target.anchor})"
    if n.tag is not None:
        return f"a tag ({n.tag})"
    if n.anchor is not None:
        return f"an anchor (&{n.anchor})"
    return "an escape" if n.escaped else ""


def _design(root: Optional[_Node], path: str) -> dict:
    """``key -> (value, line)`` of the design keys of the document ``root``."""
    if root is None:
        return {}
    if root.kind != "map" or root.tag not in (None, "!", _CORE + "map"):
        raise FlagError(f"{path}:{root.line}", "the file is not a YAML mapping",
                        "write the keys (name:, kind:, ...) at the top level")
    found: dict = {}
    for k, v in _pairs(root):
        kd = k.deref()
        if kd.kind != "scalar":
            continue
        if _scalar_tag(kd) == _CORE + "merge":
            hidden = sorted(_merged_keys(v) & set(DESIGN_KEYS))
            if hidden:
                raise FlagError(f"{path}:{k.line}", f"a merge key ('<<') brings in the {hidden[0]} key",
                                f"write {hidden[0]}: at the top level itself")
            continue
        key = kd.value
        if key not in DESIGN_KEYS:
            continue
        how = _written(k)
        if how:
            raise FlagError(f"{path}:{k.line}", f"the {key} key is written with {how}",
                            f"write the key plainly, as {key}: VALUE")
        if key in found:
            raise FlagError(f"{path}:{k.line}", f"{key} is given twice (first at line {found[key][1]})", "keep one")
        if v.kind in ("map", "seq"):
            raise FlagError(f"{path}:{k.line}", f"the value of {key} is a {'mapping' if v.kind == 'map' else 'list'}",
                            f"write {key}: VALUE")
        if _written(v):
            raise FlagError(f"{path}:{k.line}", f"the value of {key} is written with {_written(v)}",
                            f"write {key}: VALUE plainly")
        tag = _scalar_tag(v)
        if key in _BOOL_KEYS:
            if tag != _CORE + "bool":
                raise FlagError(f"{path}:{k.line}", f"{key}: {v.value[:40]!r} is not true or false",
                                f"write {key}: true (or false)")
            value = v.value.lower() in ("yes", "true", "on")
        else:
            allowed = EPILOGUES if key == "epilogue" else CLUSTERS + ("auto",)
            if tag != _CORE + "str" or v.value not in allowed:
                raise FlagError(f"{path}:{k.line}", f"{key}: {str(v.value)[:40]!r} is not one of "
                                f"{', '.join(allowed)}", f"write {key}: VALUE with VALUE one of {', '.join(allowed)}")
            value = v.value
        found[key] = (value, k.line)
    return found


class _Syntax(FlagError):
    """The text is not YAML to this parser."""


def _parse(text: str, loader, source: Optional[str], path: str) -> dict:
    try:
        return _design(_compose(yaml.parse(text, Loader=loader), source, path), path)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if e.context_mark is not None and mark is not None and mark.index >= len(text.rstrip()):
            mark = e.context_mark  # an unclosed quote or bracket: where it opens
        line = f":{mark.line + 1}" if mark is not None else ""
        raise _Syntax(f"{path}{line}", f"not valid YAML: {(e.problem or e.context or 'invalid').strip()}",
                      "write the problem.yaml synth solve accepts") from None
    except yaml.YAMLError as e:  # a reader error (a control character) has no mark
        raise _Syntax(path, f"not valid YAML: {' '.join(str(e).split())}",
                      "write the problem.yaml synth solve accepts") from None


def read_design(data: bytes, path: str = "problem.yaml") -> Design:
    """The design keys of the ``problem.yaml`` bytes ``data`` (module docstring); :class:`FlagError` when the
    checker cannot read them for sure."""
    if len(data) > MAX_BYTES:
        raise FlagError(path, f"{len(data)} bytes, more than the bound {MAX_BYTES}",
                        "pass the problem.yaml written by synth solve")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FlagError(path, f"not UTF-8 (offset {e.start})", "save the file as UTF-8") from None
    bad = _BREAKS.search(text)
    if bad is not None:
        raise FlagError(f"{path}:{text.count(chr(10), 0, bad.start()) + 1}",
                        f"character U+{ord(bad.group()):04X} (a line break to YAML, not to an editor)", "delete it")
    found = _parse(text, yaml.SafeLoader, text, path)
    if getattr(yaml, "__with_libyaml__", False):
        try:
            other = _parse(text, yaml.CSafeLoader, None, path)
        except _Syntax:  # libyaml refuses the text: synth's problem reader then composes it in pure Python too
            other = found
        except FlagError as e:
            other = e
        if other != found:
            raise FlagError(path, "PyYAML's two parsers (pure Python and libyaml) read the design keys differently",
                            "write each design key plainly, as key: VALUE on a line of its own")
    kw = {k: v for k, (v, _) in found.items()}
    return Design(**kw, lines={k: n for k, (_, n) in found.items()})


def read_key(data: bytes, key: str, allowed, path: str = "problem.yaml"):
    """The value of the design key ``key`` (one of :data:`DESIGN_KEYS`) in the ``problem.yaml`` bytes ``data``, None
    when absent; :class:`FlagError` when it is not one of ``allowed`` or not read for sure."""
    d = read_design(data, path)
    if key not in d.lines:
        return None
    value = getattr(d, key)
    if value not in allowed:
        raise FlagError(f"{path}:{d.lines[key]}", f"{key}: {value!r} is not one of {', '.join(map(str, allowed))}",
                        f"write {key}: VALUE with VALUE one of {', '.join(map(str, allowed))}")
    return value


def read_epilogue_flag(data: bytes, path: str = "problem.yaml") -> str:
    """``epilogue:`` of the problem (``register`` when absent)."""
    return read_design(data, path).epilogue


def read_pingpong_flag(data: bytes, path: str = "problem.yaml") -> bool:
    """``pingpong:`` of the problem (False when absent), a YAML 1.1 boolean."""
    return read_design(data, path).pingpong


def read_cluster_flag(data: bytes, path: str = "problem.yaml") -> str:
    """``cluster:`` of the problem (``1x1`` when absent): ``1x1``, ``2x1``, ``1x2``, or ``auto`` (a problem file
    as written, not an output folder's, which pins the choice): only ``2x1`` and ``1x2`` declare a cluster."""
    return read_design(data, path).cluster


__all__ = ["read_design", "read_key", "read_epilogue_flag", "read_pingpong_flag", "read_cluster_flag", "Design",
           "FlagError", "EPILOGUES", "CLUSTERS", "DESIGN_KEYS", "MAX_BYTES", "MAX_DEPTH"]

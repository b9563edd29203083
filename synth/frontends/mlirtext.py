"""A small reader for MLIR's printed form, enough for the importers (Triton TTGIR, nvgpu).

It reads one op per line (how ``mlir-opt`` and Triton print), with nested regions
opened by a trailing ``{`` and closed by ``}``; ``loc(...)`` annotations are dropped.
Each :class:`Op` keeps its results, name, operand names in order, a dict of simple
attributes, the rest of its line and its regions. The importers interpret the ops
they know and reject the ones that matter and they do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import Loc, SynthError


@dataclass
class Op:
    results: list
    """Result names (``%x``; ``%x:3`` gives ``%x#0``..``%x#2`` and ``%x`` itself)."""
    name: str
    operands: list
    attrs: dict
    text: str
    """The line without ``loc(...)``."""
    line: int
    regions: list = field(default_factory=list)
    """Each region a list of ops."""

    def rest(self) -> str:
        """The line after the op name."""
        i = self.text.find(self.name)
        return self.text[i + len(self.name):] if i >= 0 else self.text


_RES = re.compile(r"^\s*((?:%[\w$.#-]+(?::\d+)?)(?:\s*,\s*%[\w$.#-]+(?::\d+)?)*)\s*=\s*")
_NAME = re.compile(r'^\s*("[^"]+"|[A-Za-z_][\w$.]*)')
_VAL = re.compile(r"%[\w$.-]+(?:#\d+)?")
_ATTR = re.compile(r"([A-Za-z_][\w$.]*)\s*=\s*(-?\d+|true|false|\"[^\"]*\")")


def strip_locs(line: str) -> str:
    """Remove every ``loc(...)`` (balanced parentheses)."""
    out = []
    i = 0
    while True:
        j = line.find("loc(", i)
        if j < 0 or (j > 0 and (line[j - 1].isalnum() or line[j - 1] in "_.")):
            if j < 0:
                out.append(line[i:])
                break
            out.append(line[i:j + 4])
            i = j + 4
            continue
        out.append(line[i:j])
        depth = 0
        k = j + 3
        while k < len(line):
            if line[k] == "(":
                depth += 1
            elif line[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            elif line[k] == '"':
                k = line.find('"', k + 1)
                if k < 0:
                    k = len(line)
            k += 1
        i = k + 1
    return "".join(out).rstrip()


def _braces(s: str) -> int:
    """Net ``{`` minus ``}`` outside string literals."""
    n = 0
    in_str = False
    for ch in s:
        if ch == '"':
            in_str = not in_str
        elif not in_str:
            n += (ch == "{") - (ch == "}")
    return n


MAX_RESULTS = 4096
"""Results of one op (``%r:N``) read; a larger count is not expanded (its results are then unknown names)."""


def parse_op(text: str, lineno: int) -> Optional[Op]:
    m = _RES.match(text)
    results: list = []
    rest = text
    if m:
        for r in re.split(r"\s*,\s*", m.group(1)):
            if ":" in r:
                base, n = r.split(":", 1)
                results.append(base)
                count = int(n) if n.isdigit() and len(n) <= 6 else 0
                if count > MAX_RESULTS:  # a real op returns a handful; an edited count must not allocate millions
                    count = 0
                results += [f"{base}#{i}" for i in range(count)]
            else:
                results.append(r)
        rest = text[m.end():]
    nm = _NAME.match(rest)
    if not nm:
        return None
    name = nm.group(1).strip('"')
    tail = rest[nm.end():]
    # operands: value names before the trailing type signature (" : ")
    head = tail.split(" : ", 1)[0] if " : " in tail else tail
    ops = _VAL.findall(head)
    attrs = {}
    for am in _ATTR.finditer(_attr_text(tail)):
        v = am.group(2)
        attrs[am.group(1)] = int(v) if re.fullmatch(r"-?\d+", v) else v.strip('"')
    return Op(results, name, ops, attrs, text.strip(), lineno)


def _attr_text(tail: str) -> str:
    """The ``{...}`` attribute dictionaries of a line (not region braces)."""
    out = []
    depth = 0
    start = -1
    for i, ch in enumerate(tail):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append(tail[start + 1:i])
    return " , ".join(out)


def parse_module(text: str, path: str) -> list:
    """The top-level ops of ``text`` (regions nested). Raises SynthError on unbalanced braces."""
    root: list = []
    stack: list = [(None, root)]
    for n, raw in enumerate(text.splitlines(), start=1):
        line = strip_locs(raw)
        s = line.strip()
        if not s or s.startswith("//") or s.startswith("#") or s.startswith("^"):
            continue
        if s.startswith("}"):
            if len(stack) == 1:
                raise SynthError(Loc(path, n, 1), "unbalanced '}'", "pass the whole printed module")
            op, _ = stack.pop()
            s2 = s[1:].strip()
            if _braces(s2) > 0:  # "} else {"
                region: list = []
                op.regions.append(region)
                stack.append((op, region))
            continue
        op = parse_op(s, n)
        if op is None:
            continue
        stack[-1][1].append(op)
        net = _braces(s)
        if net > 0:
            region = []
            op.regions.append(region)
            stack.append((op, region))
    if len(stack) != 1:
        op = stack[-1][0]  # the innermost region left open: the op whose line opened it
        raw = text.splitlines()[op.line - 1]
        raise SynthError(Loc(path, op.line, len(raw) - len(raw.lstrip()) + 1),
                         f"unbalanced '{{': the region {op.name} opens at line {op.line} is not closed by the end "
                         f"of the file ({len(stack) - 1} region(s) open)",
                         "pass the whole printed module (a file cut short loses its closing '}')")
    return root


def walk(ops: list):
    """Every op, depth first, in program order."""
    for op in ops:
        yield op
        for r in op.regions:
            yield from walk(r)


def int_type(op: Op) -> bool:
    """True when the op's result is a scalar integer or index (not a tensor or vector)."""
    sig = op.text.rsplit(" : ", 1)[-1] if " : " in op.text else ""
    return "tensor<" not in sig and "vector<" not in sig and "memref<" not in sig and "memdesc<" not in sig


__all__ = ["Op", "parse_module", "parse_op", "walk", "strip_locs", "int_type"]

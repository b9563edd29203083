"""Reading ``program.json`` for the trusted checker: bytes in, a checked :class:`Program` out.

In order, each step failing with an :class:`InputError` that names the file, the
line and column, the JSON path and a fix:

1. bounds on the bytes: at most :data:`MAX_BYTES`, UTF-8, JSON nesting at most
   :data:`MAX_DEPTH`; no ``NaN``/``Infinity``, no fractions, no duplicate keys;
2. the JSON Schema ``synth/schema/program.schema.json`` (types and ranges: no
   coercion, ``"queue": "0"`` and ``1.5`` are errors), with the ``jsonschema``
   library;
3. semantic checks that tie every derived field to what it derives from (listed
   in :func:`_check`); the identities that depend on ``T`` and the guards
   (iteration = step - stage, version = iteration - distance, slot = version mod
   multiplicity, every iteration run once) are obligations of
   :mod:`synth.trusted.obligations`, proved by the solvers.

What is derived rather than read: the dependence distance of each read (from
its op's statements: ``version = iteration - distance``, one distance per op and
read, at least 0), hence the step distance between every pair of statement
instances an obligation relates; which wait an obligation is charged to. The
``tight`` and ``reason`` fields of waits are never used.

Part of the trusted base: imports nothing from synth.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Optional

from . import expr as X

MAX_BYTES = 8 << 20
"""Size of ``program.json`` (8 MiB; a 1,000-op program is about 1 MiB)."""
MAX_DEPTH = 32
"""Nesting of JSON objects and arrays (``program.json`` needs 6)."""
PARTS = ("prologue", "body", "epilogue")
SCHEMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schema",
                      "program.schema.json")


class InputError(ValueError):
    """A ``program.json`` that cannot be given a meaning: where, what, and the fix."""

    def __init__(self, file: str, line: int, col: int, path: str, msg: str, fix: str) -> None:
        super().__init__(f"{file}:{line}:{col}: {path + ': ' if path else ''}{msg}")
        self.file, self.line, self.col, self.path, self.msg, self.fix = file, line, col, path, msg, fix


@dataclass(frozen=True)
class Access:
    buffer: str
    version: tuple
    slot: tuple
    producer: Optional[str]
    distance: int
    """Derived: ``iteration - version`` (reads; 0 for writes)."""


@dataclass(frozen=True)
class Stmt:
    kind: str
    part: str
    pos: int
    guard: Optional[tuple]
    op: str = ""
    iteration: tuple = ("num", 0)
    group: Optional[int] = None
    reads: tuple = ()
    writes: tuple = ()
    queue: int = -1
    gate: tuple = ()
    wait: int = -1


@dataclass(frozen=True)
class Op:
    name: str
    stage: int
    is_async: bool
    queue: Optional[int]
    when: object
    """None, ``"opaque"`` or a condition tree in the loop variable and the trip-count symbol."""


@dataclass(frozen=True)
class Wait:
    index: int
    part: str
    queue: int
    in_flight: tuple
    before: str
    text: str
    """``in_flight`` as written (for the manifest)."""


@dataclass(frozen=True)
class Part:
    name: str
    var: str
    extent: tuple
    stmts: tuple


@dataclass(frozen=True)
class Program:
    name: str
    loop_var: str
    tsym: Optional[str]
    trip: Optional[int]
    min_trip: int
    ops: dict
    mult: dict
    parts: tuple
    waits: tuple
    sha256: str
    """Of the file's bytes: what a certificate is bound to."""

    def part(self, name: str) -> Part:
        return next(p for p in self.parts if p.name == name)


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes.

    Raises :class:`OSError` when it cannot be opened and :class:`ValueError` (the reason) when it
    is not a regular file (a FIFO, a device such as ``/dev/zero``, a folder) or holds more than
    ``limit`` bytes. Never blocks on a FIFO and never reads more than ``limit + 1`` bytes, whatever
    the file's reported size."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
            raise ValueError(f"is {what}: only a regular file is read")
        chunks, n = [], 0
        while n <= limit:
            b = os.read(fd, min(1 << 16, limit + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > limit:
            raise ValueError(f"is larger than the bound of {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_file(path: str) -> Program:
    """Read and check ``path`` (a ``program.json``, a regular file); raises :class:`InputError`."""
    try:
        data = read_regular(path, MAX_BYTES)
    except OSError as e:
        raise InputError(path, 0, 0, "", f"cannot read: {e.strerror or e}",
                         "pass program.json or the output folder of 'synth solve'") from None
    except ValueError as e:
        raise InputError(path, 0, 0, "", str(e), "pass the program.json written by 'synth solve'") from None
    return read_bytes(data, path)


def read_bytes(data: bytes, file: str = "program.json", *, zero_trips: bool = False) -> Program:
    """Check ``data`` (the bytes of a ``program.json``) and return its program; raises :class:`InputError`.

    ``zero_trips``: the caller reads a program whose loop may run zero times (a consumer warp group's register
    program of an attention program, ``n >= 0`` KV blocks: :mod:`synth.trusted.attention`), so a *symbolic* trip
    count may have ``min_trip_count`` 0 (the schema's bound is 1 otherwise)."""
    if len(data) > MAX_BYTES:
        raise InputError(file, 0, 0, "", f"more than {MAX_BYTES} bytes", "pass the program.json of 'synth solve'")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(data[:e.start].decode("utf-8", "replace"), len(data[:e.start].decode("utf-8", "replace")))
        raise InputError(file, line, col, "", f"not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})",
                         "save the file as UTF-8") from None
    _check_depth(text, file)
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=Decimal, object_pairs_hook=_no_dupes,
                         parse_int=_int)
    except json.JSONDecodeError as e:
        raise InputError(file, e.lineno, e.colno, "", f"not valid JSON: {e.msg}", "fix the JSON syntax") from None
    except _Reject as e:
        line, col = _find(text, e.needle)
        raise InputError(file, line, col, "", e.msg, e.fix) from None
    loop = doc.get("loop") if isinstance(doc, dict) else None
    zero = zero_trips and isinstance(loop, dict) and isinstance(loop.get("trip_count"), str) and \
        type(loop.get("min_trip_count")) is int and loop["min_trip_count"] == 0
    if zero:
        loop["min_trip_count"] = 1  # the schema's bound; the program's is 0 (below)
    _check_schema(doc, text, file)
    prog = _check(doc, text, file, hashlib.sha256(data).hexdigest())
    return replace(prog, min_trip=0) if zero else prog


class _Reject(ValueError):
    def __init__(self, msg: str, fix: str, needle: str) -> None:
        super().__init__(msg)
        self.msg, self.fix, self.needle = msg, fix, needle


def _no_constant(name: str):
    raise _Reject(f"{name} is not a JSON number", "use an integer", name)


def _int(s: str) -> int:
    if len(s.lstrip("-")) > 24:
        raise _Reject(f"integer with {len(s)} digits is out of every bound", "use an integer within the bounds of "
                      "docs/verification.md", s[:40])
    return int(s)


def _no_dupes(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Reject(f"key {k!r} appears twice in one object", "keep one of them", json.dumps(k))
        out[k] = v
    return out


def _check_depth(text: str, file: str) -> None:
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: " " * len(m.group(0)), text)
    depth = 0
    for m in re.finditer(r"[\[\]{}]", stripped):
        depth += 1 if m.group(0) in "[{" else -1
        if depth > MAX_DEPTH:
            line, col = _line_col(text, m.start())
            raise InputError(file, line, col, "", f"JSON nested more than {MAX_DEPTH} deep",
                             "program.json nests 6 levels; pass the file written by 'synth solve'")


_VALIDATOR = None


def _check_schema(doc, text: str, file: str) -> None:
    global _VALIDATOR
    # jsonschema loads when a program is read, not when the checker is imported
    import jsonschema

    if _VALIDATOR is None:
        with open(SCHEMA, encoding="utf-8") as fh:
            _VALIDATOR = jsonschema.Draft202012Validator(json.load(fh))
    err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(doc))
    if err is None:
        return
    # the innermost failing alternative says most (oneOf / if-then)
    while err.context:
        err = jsonschema.exceptions.best_match(err.context)
    path = list(err.absolute_path)
    line, col = _locate(text, path)
    inst = err.instance
    shown = json.dumps(inst if not isinstance(inst, Decimal) else str(inst), default=str)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    msg = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    if isinstance(inst, Decimal):
        msg = f"{inst} is not an integer"
    elif err.validator == "required":
        msg = "missing key " + err.message.split(" is a required")[0]
        shown = ""
    elif err.validator == "additionalProperties":
        msg = "unknown key(s): " + ", ".join(repr(k) for k in inst if k not in err.schema.get("properties", {}))
        shown = ""
    elif path and path[-1] == "kind":
        msg = f"unknown statement kind {inst!r} (op, commit or wait)"
    raise InputError(file, line, col, _path_text(path), msg if shown in msg else f"{shown}: {msg}",
                     _schema_fix(err))


def _schema_fix(err) -> str:
    v = err.validator
    if v == "type":
        return f"write a JSON {err.validator_value if isinstance(err.validator_value, str) else ' or '.join(err.validator_value)} (no quotes around numbers, no fractions)"
    if v in ("minimum", "maximum"):
        return f"use a value in the documented range ({err.schema.get('minimum')} .. {err.schema.get('maximum')})"
    if v == "additionalProperties":
        return "remove the unknown key (see docs/verification.md for the keys of program.json)"
    if v == "required":
        return "add the missing key (see docs/verification.md)"
    if v == "pattern":
        return "use letters, digits and '_' (an identifier, at most 64 characters)"
    if v in ("maxItems", "maxLength"):
        return "stay within the documented bounds (docs/verification.md)"
    return "compare with synth/schema/program.schema.json"


def _path_text(path: list) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _find(text: str, needle: str) -> tuple[int, int]:
    pos = text.find(needle) if needle else -1
    return _line_col(text, pos) if pos >= 0 else (0, 0)


def _ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _locate(text: str, path: list) -> tuple[int, int]:
    """Line and column of the value at JSON ``path`` (the nearest enclosing value found)."""
    dec = json.JSONDecoder()
    pos = _ws(text, 0)
    best = pos
    try:
        for key in path:
            if text[pos] == "{" and isinstance(key, str):
                pos = _ws(text, pos + 1)
                while text[pos] != "}":
                    kpos = pos
                    k, pos = dec.raw_decode(text, pos)
                    pos = _ws(text, _ws(text, pos) + 1)
                    if k == key:
                        best = kpos
                        break
                    _, pos = dec.raw_decode(text, pos)
                    pos = _ws(text, pos)
                    if text[pos] == ",":
                        pos = _ws(text, pos + 1)
                else:
                    break
            elif text[pos] == "[" and isinstance(key, int):
                pos = _ws(text, pos + 1)
                for _ in range(key):
                    _, pos = dec.raw_decode(text, pos)
                    pos = _ws(text, pos)
                    if text[pos] == ",":
                        pos = _ws(text, pos + 1)
                best = pos
            else:
                break
    except (ValueError, IndexError):
        pass
    return _line_col(text, best)


# ---------------------------------------------------------------------------------------------
# semantic checks
# ---------------------------------------------------------------------------------------------

class _Fail(Exception):
    def __init__(self, path: list, msg: str, fix: str) -> None:
        super().__init__(msg)
        self.path, self.msg, self.fix = path, msg, fix


def _expr(path: list, value, allowed: set, want: str) -> tuple:
    try:
        e = X.parse(value)
        s = X.sort(e)
    except X.ExprError as err:
        raise _Fail(path, f"bad expression {value!r}: {err}", "use C syntax: i + 3, (i < 1) ? 1 : 0, k + 3 < T") \
            from None
    if s != want:
        raise _Fail(path, f"{value!r} is {'a condition' if s == 'Bool' else 'an integer'}",
                    "write an integer expression" if want == "Int" else "write a condition such as i < 2")
    extra = X.names(e) - allowed
    if extra:
        raise _Fail(path, f"{value!r} uses unknown name(s) {', '.join(sorted(extra))}",
                    f"only {', '.join(sorted(allowed)) or 'constants'} may appear here")
    return e


def _check(doc: dict, text: str, file: str, digest: str) -> Program:
    try:
        return _build(doc, digest)
    except _Fail as f:
        line, col = _locate(text, f.path)
        raise InputError(file, line, col, _path_text(f.path), f.msg, f.fix) from None


def _build(doc: dict, digest: str) -> Program:
    """The semantic checks (after the schema):

    * names are unique (ops, buffers), queues are numbered 0, 1, ... in order, parts
      are distinct and in the order prologue, body, epilogue;
    * a numeric trip count equals ``min_trip_count``; a symbolic one is an
      identifier other than the loop and part variables; ``max_stage`` is the
      largest op stage;
    * an op is async exactly when it has a queue, and its unit is its queue's;
    * every expression parses, has the right kind and names only the variables
      allowed where it stands;
    * op statements name known ops; an async op's statement has a group closed
      by a later commit of its part, on the op's queue; a synchronous op's has none;
      every statement of an op has the same reads (buffer, producer) and writes
      (buffer);
    * a read of a buffer that some statement writes names a producer, an op that
      writes that buffer; a read of a buffer nobody writes names none;
    * each read's distance ``iteration - version`` is a constant wherever both
      are affine, the same constant in every statement of the op, and ``>= 0``
      (a read never sees a later iteration's value); a write's version is its
      iteration wherever both are affine;
    * a commit's gate names async ops of its group;
    * every entry of ``waits`` has exactly one wait statement, in its part; its
      ``before`` is the op of the first op statement after that statement.
    """
    loop = doc["loop"]
    var = loop["var"]
    tc = loop["trip_count"]
    tsym = tc if isinstance(tc, str) else None
    if tsym is not None and tsym == var:
        raise _Fail(["loop", "trip_count"], f"trip-count symbol {tsym!r} is the loop variable",
                    "name the trip count differently, e.g. T")
    if tsym is None and loop["min_trip_count"] != tc:
        raise _Fail(["loop", "min_trip_count"], f"min_trip_count {loop['min_trip_count']} differs from the "
                    f"trip count {tc}", f"set min_trip_count to {tc}")
    tv = {tsym} if tsym else set()

    ops: dict[str, Op] = {}
    queues = doc["queues"]
    for n, q in enumerate(queues):
        if q["queue"] != n:
            raise _Fail(["queues", n, "queue"], f"queue {q['queue']} listed at position {n}",
                        "number the queues 0, 1, ... in order")
    for n, o in enumerate(doc["ops"]):
        name = o["name"]
        if name in ops:
            raise _Fail(["ops", n, "name"], f"op {name!r} is listed twice", "give every op a distinct name")
        qn = o.get("queue")
        if o["async"] != (qn is not None):
            raise _Fail(["ops", n, "queue"], f"op {name} is {'async' if o['async'] else 'synchronous'} but has "
                        f"queue {qn}", "an async op has a queue, a synchronous op has \"queue\": null")
        if qn is not None:
            if qn >= len(queues):
                raise _Fail(["ops", n, "queue"], f"queue {qn} of op {name} is not listed in \"queues\"",
                            f"use a queue in 0..{len(queues) - 1}")
            if queues[qn]["unit"] != o["unit"]:
                raise _Fail(["ops", n, "unit"], f"op {name} runs on {o['unit']} but queue {qn} is "
                            f"{queues[qn]['unit']}'s", "put the op on its unit's queue")
        when = o.get("when")
        if when is not None and when != "opaque":
            when = _expr(["ops", n, "when"], when, {var} | tv, "Bool")
        ops[name] = Op(name, o["stage"], o["async"], qn, when)
    top = max(o.stage for o in ops.values())
    if doc["max_stage"] != top:
        raise _Fail(["max_stage"], f"max_stage is {doc['max_stage']} but the largest op stage is {top}",
                    f"set max_stage to {top}")

    mult: dict[str, int] = {}
    for n, b in enumerate(doc["buffers"]):
        if b["name"] in mult:
            raise _Fail(["buffers", n, "name"], f"buffer {b['name']!r} is listed twice", "give every buffer a "
                        "distinct name")
        mult[b["name"]] = b["multiplicity"]

    names = [p["part"] for p in doc["parts"]]
    if len(set(names)) != len(names) or names != sorted(names, key=PARTS.index):
        raise _Fail(["parts"], f"parts {names} are not distinct and in the order prologue, body, epilogue",
                    "list each part once, in execution order")

    writers: dict[str, set] = {}
    for n, p in enumerate(doc["parts"]):
        for k, s in enumerate(p["stmts"]):
            if s["kind"] == "op":
                for a in s.get("writes", []):
                    writers.setdefault(a["buffer"], set()).add(s["op"])

    waits_doc = doc["waits"]
    wait_pos: dict[int, tuple] = {}
    parts = []
    shapes: dict[str, tuple] = {}
    dist: dict[tuple, tuple] = {}
    for n, p in enumerate(doc["parts"]):
        pvar = p.get("var", "i")
        if pvar in tv:
            raise _Fail(["parts", n, "var"], f"part variable {pvar!r} is the trip-count symbol", "use i")
        extent = _expr(["parts", n, "extent"], p["extent"], tv, "Int")
        allowed = {pvar} | tv
        stmts = []
        raw = p["stmts"]
        for k, s in enumerate(raw):
            at = ["parts", n, "stmts", k]
            guard = None if s.get("guard") is None else _expr(at + ["guard"], s["guard"], allowed, "Bool")
            if s["kind"] == "op":
                stmts.append(_op_stmt(s, at, p["part"], k, guard, allowed, ops, mult, writers, raw, shapes, dist))
            elif s["kind"] == "commit":
                if s["queue"] >= len(queues):
                    raise _Fail(at + ["queue"], f"commit to queue {s['queue']}, which is not listed",
                                f"use a queue in 0..{len(queues) - 1}")
                members = {r["op"] for r in raw[:k] if r["kind"] == "op" and r.get("group") == s["group"]}
                for g, gop in enumerate(s.get("gate", [])):
                    if gop not in members:
                        raise _Fail(at + ["gate", g], f"gate names {gop!r}, not an op of group {s['group']} "
                                    "before this commit", "name ops of this commit's group")
                stmts.append(Stmt("commit", p["part"], k, guard, queue=s["queue"], group=s["group"],
                                  gate=tuple(s.get("gate", []))))
            else:
                w = s["wait"]
                if w >= len(waits_doc):
                    raise _Fail(at + ["wait"], f"wait index {w} out of range", f"use an index into \"waits\" "
                                f"(0..{len(waits_doc) - 1})")
                if w in wait_pos:
                    raise _Fail(at + ["wait"], f"wait #{w} is used twice", "give each wait statement its own "
                                "entry in \"waits\"")
                after = next((r["op"] for r in raw[k + 1:] if r["kind"] == "op"), None)
                wait_pos[w] = (p["part"], k, allowed, after)
                wd = waits_doc[w]
                if wd["part"] != p["part"]:
                    raise _Fail(["waits", w, "part"], f"wait #{w} says part {wd['part']!r} but its statement is "
                                f"in {p['part']!r}", f"set \"part\": \"{p['part']}\"")
                stmts.append(Stmt("wait", p["part"], k, guard, wait=w))
        parts.append(Part(p["part"], pvar, extent, tuple(stmts)))

    waits = []
    for w, wd in enumerate(waits_doc):
        if w not in wait_pos:
            raise _Fail(["waits", w], f"wait #{w} ({wd['part']}, before {wd['before']}) has no wait statement",
                        f"add a {{\"kind\": \"wait\", \"wait\": {w}}} statement or remove the entry")
        if wd["queue"] >= len(queues):
            raise _Fail(["waits", w, "queue"], f"wait #{w} on queue {wd['queue']}, which is not listed",
                        f"use a queue in 0..{len(queues) - 1}")
        after = wait_pos[w][3] or ""  # "": no op statement follows in its part (a wait before the exit)
        if wd["before"] != after:
            raise _Fail(["waits", w, "before"], f"wait #{w} says it comes before {wd['before']!r}, but "
                        f"the next op statement is {after!r}", f"set \"before\": \"{after}\"")
        e = _expr(["waits", w, "in_flight"], wd["in_flight"], wait_pos[w][2], "Int")
        waits.append(Wait(w, wd["part"], wd["queue"], e, wd["before"], str(wd["in_flight"])))

    # reads' distances: one constant per op and read, from the statements where it is affine; the
    # steady state (the body's statement) is the reference when they differ
    body = names.index("body") if "body" in names else -1
    distance: dict[tuple, int] = {}
    for (op, a), found in dist.items():
        known = [(d, path) for d, path in found if d is not None]
        if not known:
            raise _Fail(found[0][1], f"no statement of {op} reads a version of the form iteration - constant, so "
                        "its dependence distance cannot be derived", "write the version as the iteration minus "
                        "the distance (i + 3 for iteration i + 3)")
        ref = next((d for d, path in known if path[1] == body), known[0][0])
        bad = next((path for d, path in known if d != ref), None)
        if bad is not None:
            raise _Fail(bad, f"{op}'s statements read versions at different distances from their iteration "
                        f"({', '.join(str(c) for c in sorted({d for d, _ in known}))})",
                        "every statement of an op reads the same dependence: version = iteration - distance")
        if ref < 0:
            raise _Fail(known[0][1], f"{op} reads version iteration + {-ref}, a later iteration's value",
                        "a read's version is its iteration minus the dependence distance (>= 0)")
        distance[(op, a)] = ref
    final_parts = []
    for p in parts:
        stmts = []
        for s in p.stmts:
            if s.kind == "op":
                reads = tuple(Access(r.buffer, r.version, r.slot, r.producer, distance[(s.op, a)])
                              for a, r in enumerate(s.reads))
                s = Stmt("op", s.part, s.pos, s.guard, s.op, s.iteration, s.group, reads, s.writes)
            stmts.append(s)
        final_parts.append(Part(p.name, p.var, p.extent, tuple(stmts)))
    return Program(doc["name"], var, tsym, tc if tsym is None else None, loop["min_trip_count"], ops, mult,
                   tuple(final_parts), tuple(waits), digest)


def _op_stmt(s: dict, at: list, part: str, k: int, guard, allowed: set, ops: dict, mult: dict, writers: dict,
             raw: list, shapes: dict, dist: dict) -> Stmt:
    name = s["op"]
    if name not in ops:
        raise _Fail(at + ["op"], f"unknown op {name!r}", "use an op listed in \"ops\"")
    o = ops[name]
    it = _expr(at + ["iteration"], s["iteration"], allowed, "Int")
    group = s.get("group")
    if o.is_async:
        if group is None:
            raise _Fail(at, f"async op {name} has no \"group\"", "add the id of the commit that closes its group")
        c = next((r for r in raw[k + 1:] if r["kind"] == "commit" and r["group"] == group), None)
        if c is None:
            raise _Fail(at + ["group"], f"no commit of group {group} follows {name} in its part",
                        "add an async_commit_queue for the group after the op")
        if c["queue"] != o.queue:
            raise _Fail(at + ["group"], f"async op {name} (queue {o.queue}) is committed to queue {c['queue']}",
                        f"commit group {group} to queue {o.queue}, or move {name} to another group")
    elif group is not None:
        raise _Fail(at + ["group"], f"synchronous op {name} has a group", "remove \"group\"")
    accs = {}
    for key in ("reads", "writes"):
        out = []
        for a, d in enumerate(s.get(key, [])):
            ap = at + [key, a]
            buf = d["buffer"]
            if buf not in mult:
                raise _Fail(ap + ["buffer"], f"unknown buffer {buf!r}", "use a buffer listed in \"buffers\"")
            ver = _expr(ap + ["version"], d["version"], allowed, "Int")
            slot = _expr(ap + ["slot"], d["slot"], allowed, "Int")
            prod = d.get("producer")
            if key == "writes":
                if prod is not None:
                    raise _Fail(ap + ["producer"], "a write names a producer", "remove \"producer\"")
                off = X.minus(ver, it)
                if off not in (None, 0):
                    raise _Fail(ap + ["version"], f"{name} writes version iteration {off:+d}",
                                "an op writes the version of its own iteration: version = iteration")
            else:
                w = writers.get(buf, set())
                if w and prod is None:
                    raise _Fail(ap, f"read of {buf}, which {', '.join(sorted(w))} write(s), names no producer",
                                f"add \"producer\": one of {', '.join(sorted(w))}")
                if prod is not None and prod not in w:
                    raise _Fail(ap + ["producer"], f"producer {prod!r} does not write {buf}",
                                f"name the op that writes {buf}" + (f" ({', '.join(sorted(w))})" if w else
                                                                     " or remove \"producer\" (an input buffer)"))
                off = X.minus(ver, it)
                dist.setdefault((name, a), []).append((None if off is None else -off, ap + ["version"]))
            out.append(Access(buf, ver, slot, prod, 0))
        accs[key] = tuple(out)
    shape = (tuple((r.buffer, r.producer) for r in accs["reads"]), tuple(w.buffer for w in accs["writes"]))
    if name in shapes and shapes[name] != shape:
        raise _Fail(at, f"this statement of {name} accesses other buffers than its first statement",
                    "every statement of an op has the same reads and writes (buffer and producer)")
    shapes.setdefault(name, shape)
    return Stmt("op", part, k, guard, name, it, group, accs["reads"], accs["writes"])

"""Reading a Hopper ``program.json`` (``"protocol": "mbarrier"``) for the trusted checker.

Bytes in, a checked :class:`HProgram` out, or :class:`HopperInputError` naming the JSON
path, the problem and a fix. Strict: every object has exactly its documented keys
(docs/hopper.md, "The program"), every field its JSON type (no coercion: ``"1"`` is not
1, ``true`` is not 1, ``1.0`` is not an integer) and a bound (:data:`BOUNDS`); every
name resolves; every expression parses with :mod:`synth.trusted.expr` and names only
the variables allowed where it stands.

What is derived rather than read: a ``try_wait``'s parity (from its ``PipelineState``:
the field does not exist, and an arrive's or a TMA's ``phase`` must be 0, since they act
on the current phase); each statement's step offset (``count = step + c``, found by
evaluation and then proved for every ``T`` as a ``wellformed`` obligation); an access's
``slot`` (checked against ``version mod multiplicity`` by the same obligation). The
``before`` and ``reason`` fields of waits and the ``notes`` are never used; a wait's ``tight``
is kept as a claim (:attr:`HWait.claimed_tight`) that the checker tests, never trusts.

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Optional

from . import expr as X

MAX_BYTES = 1 << 20
"""Size of a Hopper ``program.json`` (1 MiB; the lowered programs are a few KiB)."""
MAX_DEPTH = 16
"""JSON nesting (a Hopper program nests 9 levels)."""
BOUNDS = {
    "trip_count": (1, 65536), "stage": (0, 63), "multiplicity": (1, 1024), "bytes_per_slot": (0, 2 ** 31 - 1),
    "latency": (0, 10 ** 9), "queue": (0, 63), "slots": (1, 64), "count": (1, 4096), "stages": (1, 64),
    "phase": (0, 1), "bytes": (0, 2 ** 20 - 1), "arrivals": (0, 4096), "warpgroups": (1, 4), "group": (0, 10 ** 6),
    "wait": (0, 999), "threads": (1, 128), "bar_id": (1, 15),
}
"""Inclusive ranges of the integer fields (``bytes``: the mbarrier tx-count range, 2^20 - 1; trip counts
as a problem file's)."""
MAX_LITERAL = 65536
"""Largest magnitude of an integer in an expression (a count, version, slot, extent, guard, wait):
the lowered programs use offsets up to the stages and divisors up to a multiplicity; a count of
``i + 10**9`` or an extent of ``10**9`` is refused at read time instead of reaching the solvers."""
MAX_ITEMS = {"ops": 64, "buffers": 64, "barriers": 64, "roles": 8, "stmts": 1000, "waits": 1000, "tx": 16,
             "reads": 16, "writes": 16, "guards": 64, "gate": 16, "queues": 64, "setup": 256, "teardown": 256,
             "notes": 64, "parts": 3, "collective": 64}
PARTS = ("prologue", "body", "epilogue")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


class HopperInputError(ValueError):
    """A Hopper ``program.json`` the checker cannot give a meaning: where (JSON path), what, the fix."""

    def __init__(self, path: str, msg: str, fix: str) -> None:
        super().__init__(f"{path + ': ' if path else ''}{msg}")
        self.path, self.msg, self.fix = path, msg, fix


@dataclass(frozen=True)
class State:
    count: tuple
    stages: int
    phase: int


@dataclass(frozen=True)
class Acc:
    buffer: str
    version: tuple
    slot: tuple
    producer: Optional[str]


@dataclass(frozen=True)
class Tx:
    bytes: int
    gate: Optional[str]


@dataclass(frozen=True)
class HStmt:
    """A statement of a role's part; ``kind`` is ``op``, ``tma`` (an op completing on a barrier),
    ``commit``, ``wait``, ``arrive``, ``try_wait``, ``inval`` (``mbarrier.inval`` inside a role,
    judged by the ``teardown`` class), ``fence`` or ``bar_sync`` (a named barrier over the warp
    group, ``bar_id``). ``collective``: an op the role runs as a warp-group collective (wgmma);
    ``elected``: an arrive one thread of the warp group runs."""

    kind: str
    role: str
    part: str
    pos: int
    guard: Optional[tuple]
    op: str = ""
    iteration: tuple = ("num", 0)
    group: Optional[int] = None
    reads: tuple = ()
    writes: tuple = ()
    barrier: str = ""
    state: Optional[State] = None
    bytes: int = 0
    arrivals: int = 0
    tx: tuple = ()
    queue: int = -1
    gate: tuple = ()
    wait: int = -1
    fence: str = ""
    elected: bool = False
    collective: bool = False
    bar_id: int = 0

    @property
    def converges(self) -> bool:
        """A warp-group convergence point: a collective wgmma or a ``bar.sync``."""
        return self.kind == "bar_sync" or self.collective


@dataclass(frozen=True)
class HPart:
    name: str
    var: str
    extent: tuple
    stmts: tuple


@dataclass(frozen=True)
class HWait:
    part: str
    queue: int
    in_flight: tuple
    claimed_tight: Optional[bool] = None
    """The file's ``tight``: a claim checked by the tightness test, never used as a fact."""


@dataclass(frozen=True)
class HRole:
    name: str
    index: int
    warpgroups: int
    queues: int
    parts: tuple
    waits: tuple
    threads: int = 1
    """Threads per warp group running the role (1: one elected thread runs every statement)."""
    collective: tuple = ()

    def part(self, name: str) -> HPart:
        return next(p for p in self.parts if p.name == name)


@dataclass(frozen=True)
class HOp:
    name: str
    unit: str
    stage: int
    is_async: bool
    queue: Optional[int]
    when: Optional[tuple]


@dataclass(frozen=True)
class HBarrier:
    name: str
    slots: int
    count: int
    kind: str
    guards: tuple


@dataclass(frozen=True)
class HProgram:
    name: str
    loop_var: str
    tsym: Optional[str]
    trip: Optional[int]
    min_trip: int
    ops: dict
    mult: dict
    barriers: dict
    setup: tuple
    """``(kind, barrier or fence)`` pairs, in order (``("cluster_sync", "")`` for a cluster barrier)."""
    roles: tuple
    teardown: tuple
    sha256: str

    def role(self, name: str) -> HRole:
        return next(r for r in self.roles if r.name == name)


def read_hopper_bytes(data: bytes, *, zero_trips: bool = False) -> HProgram:
    """Check ``data`` (the bytes of a Hopper ``program.json``); raises :class:`HopperInputError`.

    Trip counts start at 1. ``zero_trips``: the caller reads a program whose loop may run zero times (the
    attention program of a warp-specialized body's folder: ``n`` KV blocks, ``n >= 0``), so a *symbolic* trip count
    may have ``min_trip_count`` 0; a numeric trip count is still at least 1."""
    if not isinstance(data, (bytes, bytearray)):
        raise HopperInputError("", "expected the bytes of program.json", "pass the file's contents as bytes")
    if len(data) > MAX_BYTES:
        raise HopperInputError("", f"{len(data)} bytes, more than the bound {MAX_BYTES}",
                               "pass the program.json written by synth")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise HopperInputError("", f"not UTF-8 (offset {e.start})", "save the file as UTF-8") from None
    depth = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', text):
        depth += 1 if ch in "[{" else (-1 if ch in "]}" else 0)
        if depth > MAX_DEPTH:
            raise HopperInputError("", f"JSON nested more than {MAX_DEPTH} deep", "pass the file written by synth")
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=Decimal, parse_int=_int,
                         object_pairs_hook=_no_dupes)
    except json.JSONDecodeError as e:
        raise HopperInputError("", f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                               "fix the JSON syntax") from None
    except _Reject as e:
        raise HopperInputError("", str(e), "write plain integers and distinct keys") from None
    return _build(doc, hashlib.sha256(bytes(data)).hexdigest(), zero_trips)


class _Reject(ValueError):
    pass


def _no_constant(name: str):
    raise _Reject(f"{name} is not a JSON number")


def _int(s: str) -> int:
    if len(s.lstrip("-")) > 24:
        raise _Reject(f"integer with {len(s)} digits is out of every bound")
    return int(s)


def _no_dupes(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Reject(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


# ---------------------------------------------------------------------------------------------
# field checks
# ---------------------------------------------------------------------------------------------

def _p(path: list) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _fail(path: list, msg: str, fix: str):
    raise HopperInputError(_p(path), msg, fix)


def _obj(x, path: list, required: tuple, optional: tuple = ()) -> dict:
    if not isinstance(x, dict):
        _fail(path, f"expected an object, got {type(x).__name__}", "compare with docs/hopper.md")
    missing = [k for k in required if k not in x]
    if missing:
        _fail(path, f"missing key(s) {', '.join(missing)}", "add them (docs/hopper.md, \"The program\")")
    extra = sorted(k for k in x if k not in required and k not in optional)
    if extra:
        _fail(path, f"unknown key(s) {', '.join(repr(k) for k in extra)}",
              "remove them: the checker refuses fields it does not know")
    return x


def _list(x, path: list, what: str) -> list:
    if not isinstance(x, list):
        _fail(path, f"expected a list, got {type(x).__name__}", "write a JSON array")
    if len(x) > MAX_ITEMS[what]:
        _fail(path, f"{len(x)} entries, more than the bound {MAX_ITEMS[what]}", "stay within the bounds")
    return x


def _intv(x, path: list, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        _fail(path, f"expected an integer, got {json.dumps(x, default=str)[:40]}",
              "write a JSON integer (no quotes, no fraction, not a boolean)")
    lo, hi = BOUNDS[what]
    if not lo <= x <= hi:
        _fail(path, f"{x} is outside {lo} .. {hi}", f"use a value in {lo} .. {hi}")
    return x


def _name(x, path: list) -> str:
    if not isinstance(x, str) or not _IDENT.match(x):
        _fail(path, f"expected an identifier of at most 64 characters, got {json.dumps(x, default=str)[:40]}",
              "use letters, digits and '_'")
    return x


def _text(x, path: list, nullable: bool = False) -> Optional[str]:
    if x is None and nullable:
        return None
    if not isinstance(x, str) or len(x) > 1000:
        _fail(path, "expected a string of at most 1000 characters", "write a short JSON string")
    return x


def _bool(x, path: list) -> bool:
    if not isinstance(x, bool):
        _fail(path, f"expected true or false, got {json.dumps(x, default=str)[:40]}", "write a JSON boolean")
    return x


def _expr(x, path: list, allowed: set, want: str) -> tuple:
    if isinstance(x, bool) or not isinstance(x, (str, int)):
        _fail(path, f"expected an expression (string or integer), got {json.dumps(x, default=str)[:40]}",
              "write an expression such as i + 1")
    if isinstance(x, int) and abs(x) >= 10 ** X.MAX_DIGITS:
        _fail(path, f"{x} has more than {X.MAX_DIGITS} digits", "use a smaller constant")
    try:
        e = X.parse(x)
        s = X.sort(e)
    except X.ExprError as err:
        _fail(path, f"bad expression {x!r}: {err}", "use C syntax: i + 3, (i == 2) ? 0 : 1, k < T - 1")
    if s != want:
        _fail(path, f"{x!r} is {'a condition' if s == 'Bool' else 'an integer'}",
              "write an integer expression" if want == "Int" else "write a condition such as 1 <= i")
    extra = X.names(e) - allowed
    if extra:
        _fail(path, f"{x!r} uses unknown name(s) {', '.join(sorted(extra))}",
              f"only {', '.join(sorted(allowed)) or 'constants'} may appear here")
    big = _largest_literal(e)
    if big > MAX_LITERAL:
        _fail(path, f"{x!r} holds the integer {big}, above the bound {MAX_LITERAL}",
              f"use integers of magnitude at most {MAX_LITERAL} in expressions (docs/bounds.md)")
    return e


def _largest_literal(e) -> int:
    """The largest magnitude of an integer literal in the parsed expression ``e`` (no recursion)."""
    out, todo = 0, [e]
    while todo:
        x = todo.pop()
        if isinstance(x, tuple):
            if len(x) == 2 and x[0] == "num" and isinstance(x[1], int) and not isinstance(x[1], bool):
                out = max(out, abs(x[1]))
            else:
                todo.extend(x)
        elif isinstance(x, list):
            todo.extend(x)
    return out


def _guard(x, path: list, allowed: set) -> Optional[tuple]:
    return None if x is None else _expr(x, path, allowed, "Bool")


# ---------------------------------------------------------------------------------------------
# the program
# ---------------------------------------------------------------------------------------------

def _build(doc, digest: str, zero_trips: bool = False) -> HProgram:
    """Field checks, then the semantic checks: names unique and resolved; queues numbered 0, 1, ...;
    parts distinct and in the order prologue, body, epilogue; a TMA op (its statements name a
    barrier) is async with no queue, writes at least one buffer and reads none, in a role of one
    warp group; a wgmma-style op (its statements name a group) is async with a queue, and its
    group is closed by a later commit of its part on that queue; a synchronous op has neither;
    every statement of an op is of one of these shapes; a read of a buffer some op writes names
    such a producer; each wait entry has exactly one statement, in its part, on a listed queue;
    an arrive with ``tx`` bytes is in a role of one warp group; setup holds inits, fences and cluster
    barriers (``cluster_sync``), teardown invalidations, fences and cluster barriers, none guarded (an ``inval`` may also stand in a role's part:
    the ``teardown`` obligations judge when it runs)."""
    top = _obj(doc, [], ("protocol", "name", "loop", "ops", "buffers", "barriers", "setup", "roles", "teardown"),
               ("notes",))
    if top["protocol"] != "mbarrier":
        _fail(["protocol"], f"protocol {top['protocol']!r} is not 'mbarrier'", "this checker reads Hopper programs")
    name = _text(top["name"], ["name"])
    for k, n in enumerate(_list(top.get("notes", []), ["notes"], "notes")):
        _text(n, ["notes", k])
    loop = _obj(top["loop"], ["loop"], ("var", "trip_count", "min_trip_count"))
    var = _name(loop["var"], ["loop", "var"])
    tc = loop["trip_count"]
    if isinstance(tc, str):
        tsym, trip = _name(tc, ["loop", "trip_count"]), None
        if tsym == var:
            _fail(["loop", "trip_count"], "the trip-count symbol is the loop variable", "name it T")
    else:
        tsym, trip = None, _intv(tc, ["loop", "trip_count"], "trip_count")
    mt = loop["min_trip_count"]
    if not (zero_trips and tsym is not None and type(mt) is int and mt == 0):
        mt = _intv(mt, ["loop", "min_trip_count"], "trip_count")
    if trip is not None and mt != trip:
        _fail(["loop", "min_trip_count"], f"min_trip_count {mt} differs from the trip count {trip}",
              f"set it to {trip}")
    tv = {tsym} if tsym else set()

    ops: dict[str, HOp] = {}
    for k, o in enumerate(_list(top["ops"], ["ops"], "ops")):
        at = ["ops", k]
        _obj(o, at, ("name", "unit", "stage", "async", "queue", "when", "latency"))
        n = _name(o["name"], at + ["name"])
        if n in ops:
            _fail(at + ["name"], f"op {n!r} listed twice", "give every op a distinct name")
        unit = _name(o["unit"], at + ["unit"])
        _intv(o["latency"], at + ["latency"], "latency")
        q = None if o["queue"] is None else _intv(o["queue"], at + ["queue"], "queue")
        w = o["when"]
        if w == "opaque":
            _fail(at + ["when"], "opaque predicates are outside the Hopper model",
                  "write the predicate as a condition in the loop variable and T")
        ops[n] = HOp(n, unit, _intv(o["stage"], at + ["stage"], "stage"), _bool(o["async"], at + ["async"]), q,
                     _guard(w, at + ["when"], {var} | tv))
    mult: dict[str, int] = {}
    for k, b in enumerate(_list(top["buffers"], ["buffers"], "buffers")):
        at = ["buffers", k]
        _obj(b, at, ("name", "space", "multiplicity", "bytes_per_slot"))
        n = _name(b["name"], at + ["name"])
        if n in mult:
            _fail(at + ["name"], f"buffer {n!r} listed twice", "give every buffer a distinct name")
        _name(b["space"], at + ["space"])
        _intv(b["bytes_per_slot"], at + ["bytes_per_slot"], "bytes_per_slot")
        mult[n] = _intv(b["multiplicity"], at + ["multiplicity"], "multiplicity")
    bars: dict[str, HBarrier] = {}
    for k, b in enumerate(_list(top["barriers"], ["barriers"], "barriers")):
        at = ["barriers", k]
        _obj(b, at, ("name", "slots", "count", "kind", "guards"))
        n = _name(b["name"], at + ["name"])
        if n in bars:
            _fail(at + ["name"], f"barrier {n!r} listed twice", "give every barrier a distinct name")
        if b["kind"] not in ("full", "empty"):
            _fail(at + ["kind"], f"kind {b['kind']!r} is not full or empty", "use full or empty")
        guards = []
        for g, x in enumerate(_list(b["guards"], at + ["guards"], "guards")):
            if _name(x, at + ["guards", g]) not in mult:
                _fail(at + ["guards", g], f"unknown buffer {x!r}", "name a buffer listed in \"buffers\"")
            guards.append(x)
        bars[n] = HBarrier(n, _intv(b["slots"], at + ["slots"], "slots"), _intv(b["count"], at + ["count"], "count"),
                           b["kind"], tuple(guards))
    setup = _lifecycle(top["setup"], "setup", ("init", "fence", "cluster_sync"), bars)
    teardown = _lifecycle(top["teardown"], "teardown", ("inval", "fence", "cluster_sync"), bars)

    roles = []
    raw_roles = _list(top["roles"], ["roles"], "roles")
    if not raw_roles:
        _fail(["roles"], "no roles", "add the warp groups' programs")
    for k, r in enumerate(raw_roles):
        roles.append(_role(r, ["roles", k], k, var, tv, ops, mult, bars))
    if len({r.name for r in roles}) != len(roles):
        _fail(["roles"], "two roles share a name", "name each role once")
    _cross_checks(roles, ops, mult)
    return HProgram(name, var, tsym, trip, mt, ops, mult, bars, setup, tuple(roles), teardown, digest)


def _lifecycle(items, where: str, kinds: tuple, bars: dict) -> tuple:
    out = []
    for k, s in enumerate(_list(items, [where], where)):
        at = [where, k]
        if not isinstance(s, dict) or s.get("kind") not in kinds:
            _fail(at + ["kind"], f"{where} holds only {' and '.join(kinds)} statements", "move the statement")
        if s["kind"] == "fence":
            _obj(s, at, ("kind", "fence", "guard"))
            if s["fence"] not in ("mbarrier_init", "proxy_async"):
                _fail(at + ["fence"], f"unknown fence {s['fence']!r}", "use mbarrier_init or proxy_async")
            val = s["fence"]
        elif s["kind"] == "cluster_sync":  # barrier.cluster arrive.release + wait.acquire: no operand
            _obj(s, at, ("kind", "guard"))
            val = ""
        else:
            _obj(s, at, ("kind", "barrier", "guard"))
            val = _name(s["barrier"], at + ["barrier"])
            if val not in bars:
                _fail(at + ["barrier"], f"unknown barrier {val!r}", "declare it in \"barriers\"")
        if s["guard"] is not None:
            _fail(at + ["guard"], f"a guarded {where} statement is outside the model", "remove the guard")
        out.append((s["kind"], val))
    return tuple(out)


def _state(x, path: list, allowed: set, waits: bool) -> State:
    _obj(x, path, ("count", "stages", "phase"))
    ph = _intv(x["phase"], path + ["phase"], "phase")
    if not waits and ph:
        _fail(path + ["phase"], "an arrive or a complete_tx acts on the current phase and takes no parity",
              "write phase 0")
    return State(_expr(x["count"], path + ["count"], allowed, "Int"), _intv(x["stages"], path + ["stages"], "stages"),
                 ph)


def _role(r, at: list, index: int, var: str, tv: set, ops: dict, mult: dict, bars: dict) -> HRole:
    _obj(r, at, ("role", "warpgroups", "threads", "collective", "queues", "parts", "waits"))
    name = _name(r["role"], at + ["role"])
    wg = _intv(r["warpgroups"], at + ["warpgroups"], "warpgroups")
    threads = _intv(r["threads"], at + ["threads"], "threads")
    coll = []
    for n, c in enumerate(_list(r["collective"], at + ["collective"], "collective")):
        o = ops.get(_name(c, at + ["collective", n]))
        if o is None or not o.is_async or o.queue is None or o.unit != "wgmma":
            _fail(at + ["collective", n], f"{c!r} is not a wgmma op (async, with a queue, unit wgmma)",
                  "list only wgmma ops: a warp-group collective is a wgmma.mma_async.sync.aligned; converge "
                  "other code with bar_sync")
        if c in coll:
            _fail(at + ["collective", n], f"{c!r} listed twice", "list each op once")
        coll.append(c)
    if coll and threads == 1:
        _fail(at + ["collective"], "a collective in a role of one thread",
              "set threads to 128: a wgmma is executed by every thread of its warp group")
    queues = _list(r["queues"], at + ["queues"], "queues")
    for n, q in enumerate(queues):
        _obj(q, at + ["queues", n], ("queue", "unit"))
        if _intv(q["queue"], at + ["queues", n, "queue"], "queue") != n:
            _fail(at + ["queues", n, "queue"], f"queue {q['queue']} listed at position {n}", "number them 0, 1, ...")
        _name(q["unit"], at + ["queues", n, "unit"])
    raw_waits = _list(r["waits"], at + ["waits"], "waits")
    parts = []
    wait_at: dict[int, str] = {}
    order = []
    for pk, pt in enumerate(_list(r["parts"], at + ["parts"], "parts")):
        pat = at + ["parts", pk]
        _obj(pt, pat, ("part", "var", "extent", "stmts"))
        pname = pt["part"]
        if pname not in PARTS or pname in order:
            _fail(pat + ["part"], f"part {pname!r} is not one of prologue, body, epilogue, or repeats",
                  "use each of prologue, body, epilogue at most once")
        order.append(pname)
        pvar = _name(pt["var"], pat + ["var"])
        if pvar in tv:
            _fail(pat + ["var"], "the part variable is the trip-count symbol", "name it i")
        extent = _expr(pt["extent"], pat + ["extent"], tv, "Int")
        allowed = {pvar} | tv
        raw = _list(pt["stmts"], pat + ["stmts"], "stmts")
        stmts = []
        for k, s in enumerate(raw):
            stmts.append(_stmt(s, pat + ["stmts", k], name, pname, k, raw, allowed, ops, mult, bars, len(queues), wg,
                               threads, tuple(coll)))
            if stmts[-1].kind == "wait":
                w = stmts[-1].wait
                if w in wait_at or w >= len(raw_waits):
                    _fail(pat + ["stmts", k, "wait"], f"wait index {w} is out of range or used twice",
                          "give each wait_group statement its own entry in \"waits\"")
                wait_at[w] = pname
        parts.append(HPart(pname, pvar, extent, tuple(stmts)))
    if order != sorted(order, key=PARTS.index):
        _fail(at + ["parts"], f"parts in the order {order}", "order them prologue, body, epilogue")
    waits = []
    for w, wd in enumerate(raw_waits):
        wat = at + ["waits", w]
        _obj(wd, wat, ("part", "queue", "in_flight", "before", "tight", "reason"))
        if w not in wait_at:
            _fail(wat, f"wait #{w} has no wait_group statement", "remove the entry or add its statement")
        if wd["part"] != wait_at[w]:
            _fail(wat + ["part"], f"wait #{w}'s statement is in {wait_at[w]}, not {wd['part']!r}",
                  f"set \"part\": \"{wait_at[w]}\"")
        q = _intv(wd["queue"], wat + ["queue"], "queue")
        if q >= len(queues):
            _fail(wat + ["queue"], f"queue {q} is not listed", f"use a queue in 0..{len(queues) - 1}")
        _text(wd["before"], wat + ["before"])
        _text(wd["reason"], wat + ["reason"], nullable=True)
        if wd["tight"] is not None:
            _bool(wd["tight"], wat + ["tight"])
        pvar = next(p.var for p in parts if p.name == wait_at[w])
        waits.append(HWait(wait_at[w], q, _expr(wd["in_flight"], wat + ["in_flight"], {pvar} | tv, "Int"),
                           wd["tight"]))
    return HRole(name, index, wg, len(queues), tuple(parts), tuple(waits), threads, tuple(coll))


def _access(d, at: list, allowed: set, mult: dict, write: bool) -> Acc:
    _obj(d, at, ("buffer", "version", "slot"), () if write else ("producer",))
    buf = _name(d["buffer"], at + ["buffer"])
    if buf not in mult:
        _fail(at + ["buffer"], f"unknown buffer {buf!r}", "use a buffer listed in \"buffers\"")
    prod = d.get("producer")
    if prod is not None:
        _name(prod, at + ["producer"])
    return Acc(buf, _expr(d["version"], at + ["version"], allowed, "Int"),
               _expr(d["slot"], at + ["slot"], allowed, "Int"), prod)


def _stmt(s, at: list, role: str, part: str, k: int, raw: list, allowed: set, ops: dict, mult: dict, bars: dict,
          nqueues: int, wg: int, threads: int = 1, coll: tuple = ()) -> HStmt:
    if not isinstance(s, dict):
        _fail(at, "expected a statement object", "compare with docs/hopper.md")
    kind = s.get("kind")
    base = dict(role=role, part=part, pos=k)
    if kind == "op":
        _obj(s, at, ("kind", "op", "iteration", "guard", "reads", "writes"), ("group", "barrier"))
        op = _name(s["op"], at + ["op"])
        if op not in ops:
            _fail(at + ["op"], f"unknown op {op!r}", "use an op listed in \"ops\"")
        o = ops[op]
        reads = tuple(_access(a, at + ["reads", n], allowed, mult, False)
                      for n, a in enumerate(_list(s["reads"], at + ["reads"], "reads")))
        writes = tuple(_access(a, at + ["writes", n], allowed, mult, True)
                       for n, a in enumerate(_list(s["writes"], at + ["writes"], "writes")))
        it = _expr(s["iteration"], at + ["iteration"], allowed, "Int")
        guard = _guard(s["guard"], at + ["guard"], allowed)
        group = s.get("group")
        ref = s.get("barrier")
        if ref is not None:
            if group is not None:
                _fail(at, "an op with both a group and a barrier", "a TMA completes on its barrier only")
            if not o.is_async or o.queue is not None:
                _fail(at + ["barrier"], f"op {op} completes on a barrier, so it is async with no queue",
                      f"set \"async\": true, \"queue\": null for {op}")
            if reads or not writes:
                _fail(at, "a TMA copy reads no shared buffer and writes at least one", "fix its accesses")
            if wg != 1:
                _fail(at, f"a TMA copy in role {role} of {wg} warp groups", "issue TMA copies from one warp group")
            _obj(ref, at + ["barrier"], ("barrier", "state", "bytes"))
            b = _name(ref["barrier"], at + ["barrier", "barrier"])
            if b not in bars:
                _fail(at + ["barrier", "barrier"], f"unknown barrier {b!r}", "declare it in \"barriers\"")
            return HStmt("tma", guard=guard, op=op, iteration=it, writes=writes, barrier=b,
                         state=_state(ref["state"], at + ["barrier", "state"], allowed, False),
                         bytes=_intv(ref["bytes"], at + ["barrier", "bytes"], "bytes"), **base)
        if group is not None:
            group = _intv(group, at + ["group"], "group")
            if not o.is_async or o.queue is None:
                _fail(at + ["group"], f"op {op} has a group, so it is async with a queue", "fix the op's entry")
            c = next((n for n in range(k + 1, len(raw)) if isinstance(raw[n], dict) and raw[n].get("kind") == "commit"
                      and raw[n].get("group") == group and raw[n].get("queue") == o.queue), None)
            if c is None:
                _fail(at + ["group"], f"no commit of group {group} on queue {o.queue} follows {op} in its part",
                      "add the commit_group that closes its group")
        elif o.is_async:
            _fail(at, f"async op {op} has neither a group nor a barrier", "give a wgmma a group, a TMA its barrier")
        return HStmt("op", guard=guard, op=op, iteration=it, group=group, reads=reads, writes=writes,
                     collective=op in coll, **base)
    if kind == "commit":
        _obj(s, at, ("kind", "queue", "group", "guard", "gate"))
        q = _intv(s["queue"], at + ["queue"], "queue")
        if q >= nqueues:
            _fail(at + ["queue"], f"commit to queue {q}, which is not listed", "list the queue in \"queues\"")
        gate = tuple(_name(g, at + ["gate", n]) for n, g in enumerate(_list(s["gate"], at + ["gate"], "gate")))
        for n, g in enumerate(gate):
            if g not in ops or ops[g].queue != q:
                _fail(at + ["gate", n], f"gate {g!r} is not an op of this queue", "name ops of the group")
        return HStmt("commit", guard=_guard(s["guard"], at + ["guard"], allowed), queue=q,
                     group=_intv(s["group"], at + ["group"], "group"), gate=gate, **base)
    if kind == "wait":
        _obj(s, at, ("kind", "wait", "guard"))
        return HStmt("wait", guard=_guard(s["guard"], at + ["guard"], allowed),
                     wait=_intv(s["wait"], at + ["wait"], "wait"), **base)
    if kind == "bar_sync":
        _obj(s, at, ("kind", "id", "guard"))
        bid = _intv(s["id"], at + ["id"], "bar_id")
        if threads == 1:
            _fail(at, "bar_sync in a role of one thread converges nothing",
                  "remove it, or give the role its warp group's threads")
        if bid + wg - 1 > BOUNDS["bar_id"][1]:
            _fail(at + ["id"], f"named barriers {bid} .. {bid + wg - 1} (one per warp group) exceed "
                  f"{BOUNDS['bar_id'][1]}", "use a smaller id")
        return HStmt("bar_sync", guard=_guard(s["guard"], at + ["guard"], allowed), bar_id=bid, **base)
    if kind in ("arrive", "try_wait"):
        keys = ("kind", "barrier", "state", "guard") + (("arrivals", "tx", "elected") if kind == "arrive" else ())
        _obj(s, at, keys)
        b = _name(s["barrier"], at + ["barrier"])
        if b not in bars:
            _fail(at + ["barrier"], f"unknown barrier {b!r}", "declare it in \"barriers\"")
        guard = _guard(s["guard"], at + ["guard"], allowed)
        st = _state(s["state"], at + ["state"], allowed, kind == "try_wait")
        if kind == "try_wait":
            return HStmt("try_wait", guard=guard, barrier=b, state=st, **base)
        tx = []
        for n, t in enumerate(_list(s["tx"], at + ["tx"], "tx")):
            _obj(t, at + ["tx", n], ("bytes", "gate"))
            g = t["gate"]
            if g is not None and _name(g, at + ["tx", n, "gate"]) not in ops:
                _fail(at + ["tx", n, "gate"], f"gate {g!r} is not an op", "name the TMA op whose bytes it is")
            tx.append(Tx(_intv(t["bytes"], at + ["tx", n, "bytes"], "bytes"), g))
        if tx and wg != 1:
            _fail(at + ["tx"], f"expect_tx in role {role} of {wg} warp groups", "announce bytes from one warp group")
        arrivals = _intv(s["arrivals"], at + ["arrivals"], "arrivals")
        if not arrivals and not tx:
            _fail(at, "an arrive with no arrival and no bytes does nothing", "remove it")
        elected = _bool(s["elected"], at + ["elected"])
        if threads > 1 and not elected:
            _fail(at + ["elected"], f"an arrive by each of the {threads} threads of a warp group: the checker counts "
                  "one arrival per warp group", "mark it \"elected\": true (one thread arrives)")
        return HStmt("arrive", guard=guard, barrier=b, state=st, arrivals=arrivals, tx=tuple(tx), elected=elected,
                     **base)
    if kind == "inval":
        _obj(s, at, ("kind", "barrier", "guard"))
        b = _name(s["barrier"], at + ["barrier"])
        if b not in bars:
            _fail(at + ["barrier"], f"unknown barrier {b!r}", "declare it in \"barriers\"")
        return HStmt("inval", guard=_guard(s["guard"], at + ["guard"], allowed), barrier=b, **base)
    if kind == "fence":
        _obj(s, at, ("kind", "fence", "guard"))
        if s["fence"] != "proxy_async":
            _fail(at + ["fence"], f"fence {s['fence']!r} in a role", "the init fence belongs in setup")
        return HStmt("fence", guard=_guard(s["guard"], at + ["guard"], allowed), fence="proxy_async", **base)
    _fail(at + ["kind"], f"unknown statement kind {json.dumps(kind, default=str)[:40]}",
          "use op, commit, wait, arrive, try_wait, inval, fence or bar_sync")
    raise AssertionError  # unreachable: _fail raises


def _cross_checks(roles: list, ops: dict, mult: dict) -> None:
    shape: dict[str, str] = {}
    writers: dict[str, set] = {}
    for r in roles:
        for pt in r.parts:
            for s in pt.stmts:
                if s.kind not in ("op", "tma"):
                    continue
                kind = s.kind if s.kind == "tma" else ("group" if s.group is not None else "sync")
                if shape.setdefault(s.op, kind) != kind:
                    _fail(["roles", r.index, "parts"], f"op {s.op}'s statements complete in different ways",
                          "every statement of an op is a TMA, a grouped op or a synchronous op")
                for w in s.writes:
                    writers.setdefault(w.buffer, set()).add(s.op)
    for r in roles:
        for pt in r.parts:
            for s in pt.stmts:
                for a in s.reads:
                    w = writers.get(a.buffer, set())
                    if w and a.producer is None:
                        _fail(["roles", r.index, "parts"], f"{r.name} {pt.name} statement {s.pos}: a read of "
                              f"{a.buffer} names no producer", f"name one of {', '.join(sorted(w))}")
                    if a.producer is not None and a.producer not in w:
                        _fail(["roles", r.index, "parts"], f"{r.name} {pt.name} statement {s.pos}: producer "
                              f"{a.producer!r} does not write {a.buffer}", "name the op that writes it")

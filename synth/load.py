"""``problem.yaml`` to a validated :class:`~synth.problem.Problem` (SPEC §1).

Every check that can be made without solving happens here or in
:mod:`synth.graph`, and raises :class:`~synth.errors.SynthError` naming file,
line and fix. ``kind: gemm`` documents are handed to :mod:`synth.gemm`.
"""

from __future__ import annotations

import re

from .errors import Loc, SynthError
from .expr import ExprError, free_vars, is_bool, parse
from .problem import (Buffer, Dep, Loop, Objective, Op, Pins, Predicate, Problem,
                      Target, Unit)
from .yamlnodes import LDict, LList, check_keys, read_yaml, read_yaml_text, require, suggest, want_int

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TOP_KEYS = ("name", "description", "loop", "buffers", "ops", "deps", "target", "schedule", "objective")
GEMM_KEYS = ("name", "description", "kind", "shape", "dtype", "tile", "warps", "stages", "arch",
             "loop", "schedule", "objective", "target")
OBJECTIVES = ("latency", "shared_memory", "stages")


def load_problem(path: str) -> Problem:
    """Read and validate ``path``; raise :class:`SynthError` on the first problem found."""
    return problem_from_doc(read_yaml(path), path)


def load_problem_text(text: str, path: str = "<string>") -> Problem:
    """Same as :func:`load_problem` for YAML text (tests, generated problems)."""
    return problem_from_doc(read_yaml_text(text, path), path)


def problem_from_doc(doc: LDict, path: str) -> Problem:
    """Validate a parsed document (see :func:`synth.yamlnodes.read_yaml`)."""
    if doc.get("kind") is not None:
        if doc["kind"] != "gemm":
            raise SynthError(doc.val_loc["kind"], f"unknown problem kind {doc['kind']!r}",
                             "the only kind is 'gemm'; omit 'kind' for a hand-written loop")
        check_keys(doc, GEMM_KEYS, "a gemm problem")
        from .gemm import problem_from_gemm_doc

        return problem_from_gemm_doc(doc, path)
    check_keys(doc, TOP_KEYS, "the problem")
    name = _name(doc)
    loop = _loop(require(doc, "loop", "the problem"), doc)
    target = _target(require(doc, "target", "the problem"), doc)
    buffers = _buffers(require(doc, "buffers", "the problem"), doc)
    ops = _ops(require(doc, "ops", "the problem"), doc, buffers, target, loop)
    deps = _deps(doc.get("deps"), doc, ops)
    pins = _pins(doc.get("schedule"), doc, len(ops))
    objective = _objective(doc.get("objective"), doc)
    problem = Problem(name=name, loop=loop, buffers=buffers, ops=ops, target=target, deps=deps,
                      pins=pins, objective=objective, path=path)
    check_problem(problem)
    return problem


def check_problem(problem: Problem) -> None:
    """Whole-problem checks shared by hand-written and generated problems.

    Buffers nobody writes, shared memory that cannot fit single-buffered,
    zero-distance cycles and pins that break a dependence (via :mod:`synth.graph`).
    """
    from .graph import build_graph, check_pins

    written = {b for op in problem.ops for b in op.writes}
    for buf in problem.buffers:
        if buf.name not in written:
            readers = [op.name for op in problem.ops if buf.name in op.reads]
            what = f"read by {', '.join(readers)} but " if readers else ""
            raise SynthError(buf.loc, f"buffer '{buf.name}' is {what}never written by any op",
                             f"add '{buf.name}' to the 'writes' of the op that produces it, or remove the buffer")
    need = sum(b.bytes for b in problem.buffers if b.space == "shared")
    if need > problem.target.shared_bytes:
        raise SynthError(problem.target.loc,
                         f"shared buffers need {need} bytes even single-buffered, but target.shared_bytes is "
                         f"{problem.target.shared_bytes}",
                         f"raise target.shared_bytes to at least {need} or shrink the shared buffers")
    regs = problem.target.registers_bytes
    need_r = sum(b.bytes for b in problem.buffers if b.space == "register")
    if regs is not None and need_r > regs:
        raise SynthError(problem.target.loc,
                         f"register buffers need {need_r} bytes even single-buffered, but "
                         f"target.registers_bytes is {regs}",
                         f"raise target.registers_bytes to at least {need_r} or shrink the register buffers")
    graph = build_graph(problem)
    check_pins(problem, graph)


def _name(doc: LDict) -> str:
    name = require(doc, "name", "the problem", "add 'name: my-loop' (letters, digits, '_', '.', '-')")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SynthError(doc.val_loc["name"], f"invalid name {name!r}",
                         "use only letters, digits, '_', '.' and '-'")
    return name


def _loop(d: object, doc: LDict) -> Loop:
    if not isinstance(d, LDict):
        raise SynthError(doc.val_loc["loop"], "'loop' must be a mapping",
                         "write loop: {var: k, trip_count: 128}")
    check_keys(d, ("var", "trip_count", "min_trip_count"), "loop")
    var = d.get("var", "k")
    if not isinstance(var, str) or not IDENT_RE.match(var):
        raise SynthError(d.val_loc.get("var", d.loc), f"loop var {var!r} is not an identifier",
                         "use a name such as k")
    tc = require(d, "trip_count", "loop", "add 'trip_count: 128' (or a symbol such as T with min_trip_count)")
    if isinstance(tc, bool) or not isinstance(tc, (int, str)):
        raise SynthError(d.val_loc["trip_count"], f"trip_count {tc!r} is neither an integer nor a symbol",
                         "write an integer (128) or a symbol (T)")
    if isinstance(tc, str):
        if not IDENT_RE.match(tc) or tc == var:
            raise SynthError(d.val_loc["trip_count"], f"trip_count {tc!r} is not a symbol name",
                             "write an integer or a single name such as T, different from the loop var")
        if "min_trip_count" not in d:
            raise SynthError(d.val_loc["trip_count"], f"symbolic trip_count '{tc}' has no min_trip_count",
                             "add 'min_trip_count: N' with the smallest trip count the loop may run")
        mn = want_int(d, "min_trip_count", "loop", lo=1)
        return Loop(var, tc, mn, d.loc)
    if tc < 1:
        raise SynthError(d.val_loc["trip_count"], f"trip_count is {tc}", "use a trip count of at least 1")
    mn = want_int(d, "min_trip_count", "loop", lo=1, default=tc)
    if mn != tc:
        raise SynthError(d.val_loc["min_trip_count"], f"min_trip_count {mn} differs from the static trip_count {tc}",
                         "drop min_trip_count when the trip count is a number")
    return Loop(var, tc, tc, d.loc)


def _target(d: object, doc: LDict) -> Target:
    if not isinstance(d, LDict):
        raise SynthError(doc.val_loc["target"], "'target' must be a mapping",
                         "write target: {shared_bytes: 167936, units: {...}}")
    check_keys(d, ("shared_bytes", "registers_bytes", "units", "arch"), "target")
    shared = want_int(d, "shared_bytes", "target", lo=0)
    regs = want_int(d, "registers_bytes", "target", lo=0, default=None)
    units_d = require(d, "units", "target", "add units: {cp_async: {async: true}, lsu: {}, ...}")
    if not isinstance(units_d, LDict) or not units_d:
        raise SynthError(d.val_loc["units"], "'units' must be a non-empty mapping of unit names",
                         "write units: {cp_async: {async: true}, lsu: {}}")
    units = []
    for uname, ud in units_d.items():
        if ud is None:
            ud = LDict()
            ud.loc, ud.key_loc, ud.val_loc = units_d.val_loc[uname], {}, {}
        if not isinstance(ud, LDict):
            raise SynthError(units_d.val_loc[uname], f"unit '{uname}' must be a mapping",
                             "write {} or {async: true}")
        check_keys(ud, ("async", "count"), f"unit '{uname}'")
        is_async = ud.get("async", False)
        if not isinstance(is_async, bool):
            raise SynthError(ud.val_loc["async"], f"'async' of unit '{uname}' must be true or false",
                             "write async: true")
        count = want_int(ud, "count", f"unit '{uname}'", lo=1, default=1)
        units.append(Unit(uname, is_async, count, units_d.key_loc[uname]))
    return Target(shared, regs, tuple(units), d.loc)


def _buffers(d: object, doc: LDict) -> tuple[Buffer, ...]:
    if not isinstance(d, LDict) or not d:
        raise SynthError(doc.val_loc["buffers"], "'buffers' must be a non-empty mapping",
                         "write buffers: {A_s: {space: shared, bytes: 8192}}")
    out = []
    for name, bd in d.items():
        loc = d.key_loc[name]
        if not IDENT_RE.match(name):
            raise SynthError(loc, f"buffer name {name!r} is not an identifier", "use letters, digits and '_'")
        if not isinstance(bd, LDict):
            raise SynthError(d.val_loc[name], f"buffer '{name}' must be a mapping",
                             "write {space: shared, bytes: 8192}")
        check_keys(bd, ("space", "bytes", "carried"), f"buffer '{name}'")
        space = require(bd, "space", f"buffer '{name}'", "add 'space: shared' or 'space: register'")
        if space not in ("shared", "register"):
            raise SynthError(bd.val_loc["space"], f"unknown space {space!r} for buffer '{name}'",
                             "use 'shared' or 'register'")
        size = want_int(bd, "bytes", f"buffer '{name}'", lo=1)
        carried = bd.get("carried", False)
        if not isinstance(carried, bool):
            raise SynthError(bd.val_loc["carried"], "'carried' must be true or false", "write carried: true")
        out.append(Buffer(name, space, size, carried, loc))
    return tuple(out)


def _name_list(od: LDict, key: str, what: str, known: dict[str, Buffer]) -> tuple[str, ...]:
    v = od.get(key, [])
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        raise SynthError(od.val_loc[key], f"'{key}' of {what} must be a list of buffer names",
                         f"write {key}: [A_s]")
    for i, b in enumerate(v):
        loc = v.item_loc[i] if isinstance(v, LList) else od.val_loc[key]
        if b not in known:
            raise SynthError(loc, f"{what} {key} unknown buffer {b!r}", suggest(str(b), known))
    return tuple(v)


def _ops(d: object, doc: LDict, buffers: tuple[Buffer, ...], target: Target, loop: Loop) -> tuple[Op, ...]:
    if not isinstance(d, LList) or not d:
        raise SynthError(doc.val_loc["ops"], "'ops' must be a non-empty list",
                         "write ops: [{name: load_A, unit: cp_async, writes: [A_s], latency: 600}]")
    known = {b.name: b for b in buffers}
    units = [u.name for u in target.units]
    seen: set[str] = set()
    out = []
    for i, od in enumerate(d):
        if not isinstance(od, LDict):
            raise SynthError(d.item_loc[i], f"op #{i} must be a mapping", "write {name: ..., unit: ..., ...}")
        check_keys(od, ("name", "unit", "reads", "writes", "latency", "issue", "when"), "an op")
        name = require(od, "name", f"op #{i}")
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise SynthError(od.val_loc["name"], f"op name {name!r} is not an identifier",
                             "use letters, digits and '_'")
        if name in seen:
            raise SynthError(od.val_loc["name"], f"op name '{name}' is used twice", "give each op its own name")
        seen.add(name)
        what = f"op '{name}'"
        unit = require(od, "unit", what, f"add 'unit:' naming one of {', '.join(units)}")
        if unit not in units:
            raise SynthError(od.val_loc["unit"], f"{what} uses unknown unit {unit!r}",
                             suggest(str(unit), units) + " (declare units under target.units)")
        reads = _name_list(od, "reads", what, known)
        writes = _name_list(od, "writes", what, known)
        latency = want_int(od, "latency", what, lo=0)
        issue = want_int(od, "issue", what, lo=1, default=1)
        when = _predicate(od, what, loop) if "when" in od else None
        out.append(Op(name, unit, reads, writes, latency, issue, when, od.loc))
    return tuple(out)


def _predicate(od: LDict, what: str, loop: Loop) -> Predicate:
    text = od["when"]
    loc = od.val_loc["when"]
    if not isinstance(text, str):
        raise SynthError(loc, f"'when' of {what} must be a string", f"write when: \"{loop.var} + 3 < T\" or opaque")
    if text.strip() == "opaque":
        return Predicate("opaque", None)
    try:
        e = parse(text)
    except ExprError as exc:
        raise SynthError(Loc(loc.file, loc.line, loc.col + exc.pos + (1 if od.val_loc else 0)),
                         f"cannot parse predicate {text!r} of {what}: {exc}",
                         f"write an affine condition such as \"{loop.var} + 3 < T\", or opaque") from None
    names = {loop.var} | ({loop.trip_count} if loop.symbolic else set())
    unknown = sorted(free_vars(e) - names)
    if unknown:
        raise SynthError(loc, f"predicate of {what} names unknown symbol '{unknown[0]}'",
                         f"use only the loop var '{loop.var}'"
                         + (f" and the trip count '{loop.trip_count}'" if loop.symbolic else "")
                         + ", or write opaque for a data-dependent condition")
    if not is_bool(e):
        raise SynthError(loc, f"predicate {text!r} of {what} is not a condition",
                         f"compare something, e.g. \"{loop.var} + 3 < T\"")
    return Predicate(text.strip(), e)


def _deps(d: object, doc: LDict, ops: tuple[Op, ...]) -> tuple[Dep, ...]:
    if d is None:
        return ()
    if not isinstance(d, LList):
        raise SynthError(doc.val_loc["deps"], "'deps' must be a list", "write deps: [{from: a, to: b, distance: 1}]")
    names = [o.name for o in ops]
    out = []
    for i, dd in enumerate(d):
        if not isinstance(dd, LDict):
            raise SynthError(d.item_loc[i], "each dep must be a mapping", "write {from: a, to: b, distance: 1}")
        check_keys(dd, ("from", "to", "distance", "latency"), "a dep")
        for k in ("from", "to"):
            n = require(dd, k, "a dep")
            if n not in names:
                raise SynthError(dd.val_loc[k], f"dep '{k}' names unknown op {n!r}", suggest(str(n), names))
        dist = want_int(dd, "distance", "a dep", lo=0, default=0)
        lat = want_int(dd, "latency", "a dep", lo=0, default=None)
        out.append(Dep(dd["from"], dd["to"], dist, lat, dd.loc))
    return tuple(out)


def _int_list(d: LDict, key: str, n: int | None, lo: int = 0) -> tuple[int, ...]:
    v = d[key]
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise SynthError(d.val_loc[key], f"schedule.{key} must be a list of integers", f"write {key}: [0, 0, 1]")
    if n is not None and len(v) != n:
        raise SynthError(d.val_loc[key], f"schedule.{key} has {len(v)} entries but there are {n} ops",
                         f"give exactly one entry per op, in program order ({n} entries)")
    for i, x in enumerate(v):
        if x < lo:
            loc = v.item_loc[i] if isinstance(v, LList) else d.val_loc[key]
            raise SynthError(loc, f"schedule.{key}[{i}] is {x}, below {lo}", f"use values of at least {lo}")
    return tuple(v)


def _pins(d: object, doc: LDict, n_ops: int) -> Pins:
    if d is None:
        return Pins()
    if not isinstance(d, LDict):
        raise SynthError(doc.val_loc["schedule"], "'schedule' must be a mapping",
                         "write schedule: {stage: [...], order: [...]}")
    check_keys(d, ("stage", "order", "async_stages", "max_stage"), "schedule")
    stage = _int_list(d, "stage", n_ops) if "stage" in d else None
    order = _int_list(d, "order", n_ops) if "order" in d else None
    if order is not None and sorted(order) != list(range(n_ops)):
        raise SynthError(d.val_loc["order"], f"schedule.order {list(order)} is not a permutation of 0..{n_ops - 1}",
                         "give each op a distinct position 0..n-1")
    asyn = _int_list(d, "async_stages", None) if "async_stages" in d else None
    max_stage = want_int(d, "max_stage", "schedule", lo=0, default=None)
    if stage is not None and max_stage is not None and max(stage) > max_stage:
        raise SynthError(d.val_loc["stage"], f"schedule.stage uses stage {max(stage)} above max_stage {max_stage}",
                         "raise max_stage or lower the pinned stages")
    if asyn is not None:
        top = max(stage) if stage is not None else max_stage
        for i, s in enumerate(asyn):
            if top is not None and s > top:
                raise SynthError(d.val_loc["async_stages"], f"async stage {s} does not exist (highest stage is {top})",
                                 "list only stages that some op uses")
    return Pins(stage, order, asyn, max_stage, d.loc, d.val_loc.get("stage"), d.val_loc.get("order"))


def _objective(d: object, doc: LDict) -> Objective:
    if d is None:
        return Objective()
    loc = doc.val_loc["objective"]
    if isinstance(d, str):
        d = [d]
    terms: list[tuple[str, int]] = []
    if isinstance(d, LDict):
        for k, w in d.items():
            if isinstance(w, bool) or not isinstance(w, int) or w < 0:
                raise SynthError(d.val_loc[k], f"objective weight of '{k}' must be a non-negative integer",
                                 "write objective: {latency: 1, shared_memory: 1}")
            terms.append((k, w))
    elif isinstance(d, list):
        terms = [(t, 1) for t in d]
    else:
        raise SynthError(loc, f"objective {d!r} is not understood", "write latency, shared_memory, or a list of them")
    for k, _ in terms:
        if k not in OBJECTIVES:
            raise SynthError(loc, f"unknown objective {k!r}", suggest(str(k), OBJECTIVES))
    return Objective(tuple(terms))

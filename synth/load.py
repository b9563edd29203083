"""``problem.yaml`` to a validated :class:`~synth.problem.Problem` (SPEC §1).

Every check that can be made without solving happens here or in
:mod:`synth.graph`, and raises :class:`~synth.errors.SynthError` naming file,
line and fix. ``kind: gemm`` documents are handed to :mod:`synth.gemm`.
"""

from __future__ import annotations

import re

from .errors import Loc, SynthError
from .expr import ExprError, check_expr, free_vars, is_bool, parse
from .problem import (Buffer, Dep, Loop, Objective, Op, Pins, Predicate, Problem,
                      Target, Unit)
from .yamlnodes import (LDict, LList, check_keys, empty_ldict, read_yaml, read_yaml_text, require, suggest,
                        want_int)

NAME_RE = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
"""A problem name: it names the default output folder out/<name>, so no path separators, no '.' or '..'."""
IDENT_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
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
    target_doc = require(doc, "target", "the problem")
    target = _target(target_doc, doc)
    buffers = _buffers(require(doc, "buffers", "the problem"), doc)
    ops = _ops(require(doc, "ops", "the problem"), doc, buffers, target, loop)
    deps = _deps(doc.get("deps"), doc, ops)
    pins = _pins(doc.get("schedule"), doc, ops, loop)
    objective = _objective(doc.get("objective"), doc)
    problem = Problem(name=name, loop=loop, buffers=buffers, ops=ops, target=target, deps=deps,
                      pins=pins, objective=objective, path=path)
    check_problem(problem, {k: target_doc.val_loc[k] for k in ("shared_bytes", "registers_bytes")
                            if k in target_doc.val_loc})
    return problem


def check_problem(problem: Problem, locs: dict[str, Loc] | None = None) -> None:
    """Whole-problem checks shared by hand-written and generated problems.

    Buffers nobody writes, shared memory that cannot fit single-buffered,
    zero-distance cycles and pins that break a dependence (via :mod:`synth.graph`).
    ``locs`` may give the exact place of ``shared_bytes``/``registers_bytes`` (default:
    the target).
    """
    locs = locs or {}
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
        raise SynthError(locs.get("shared_bytes", problem.target.loc),
                         f"shared buffers need {need} bytes even single-buffered, but target.shared_bytes is "
                         f"{problem.target.shared_bytes}",
                         f"raise target.shared_bytes to at least {need} or shrink the shared buffers")
    regs = problem.target.registers_bytes
    need_r = sum(b.bytes for b in problem.buffers if b.space == "register")
    if regs is not None and need_r > regs:
        raise SynthError(locs.get("registers_bytes", problem.target.loc),
                         f"register buffers need {need_r} bytes even single-buffered, but "
                         f"target.registers_bytes is {regs}",
                         f"raise target.registers_bytes to at least {need_r} or shrink the register buffers")
    graph = build_graph(problem)
    check_pins(problem, graph)


def _name(doc: LDict) -> str:
    name = require(doc, "name", "the problem", "add 'name: my-loop' (letters, digits, '_', '.', '-')")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SynthError(doc.val_loc["name"], f"invalid name {name!r}",
                         "use only letters, digits, '_', '.' and '-' (at most 64, not starting with '.' or '-')")
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
        if not IDENT_RE.match(uname):
            raise SynthError(units_d.key_loc[uname], f"unit name {uname!r} is not an identifier",
                             "use letters, digits and '_', starting with a letter")
        if ud is None:
            ud = empty_ldict(units_d.val_loc[uname])
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
        if not isinstance(b, str):
            raise SynthError(loc, f"'{key}' of {what} lists {b!r}, which is not a buffer name",
                             f"write {key}: [A_s, B_s] with names from 'buffers'")
        if b not in known:
            raise SynthError(loc, f"{what} {key} unknown buffer '{b}'",
                             suggest(b, known) + " (declare buffers under 'buffers')")
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
    cond = f"{loop.var} + 3 < {loop.trip_count}"
    example = f"write an affine condition such as \"{cond}\", or opaque"
    if not isinstance(text, str):
        raise SynthError(loc, f"'when' of {what} must be a string, not {text!r}",
                         f"write when: \"{cond}\" or when: opaque")
    if text.strip() == "opaque":
        return Predicate("opaque", None)
    try:
        e = parse(text)
    except ExprError as exc:
        raise SynthError(_in_value(od, "when", exc.pos), f"cannot parse predicate {text!r} of {what}: {exc}",
                         example) from None
    names = {loop.var} | ({loop.trip_count} if loop.symbolic else set())
    unknown = sorted(free_vars(e) - names)
    if unknown:
        m = re.search(rf"\b{re.escape(unknown[0])}\b", text)
        raise SynthError(_in_value(od, "when", m.start() if m else 0),
                         f"predicate of {what} names unknown symbol '{unknown[0]}'",
                         f"use only the loop var '{loop.var}'"
                         + (f" and the trip count '{loop.trip_count}'" if loop.symbolic else "")
                         + ", or write opaque for a data-dependent condition")
    bad = check_expr(e)
    if bad is not None:
        if "compares numbers, not conditions" in bad:
            example = f"join comparisons with &&, e.g. \"0 <= {loop.var} && {loop.var} < {loop.trip_count}\""
        raise SynthError(loc, f"predicate {text!r} of {what} is not well formed: {bad}", example)
    if not is_bool(e):
        raise SynthError(loc, f"predicate {text!r} of {what} is not a condition",
                         f"compare something, e.g. \"{cond}\"")
    return Predicate(text.strip(), e)


def _in_value(d: LDict, key: str, offset: int) -> Loc:
    """The location of character ``offset`` of the one-line string value ``d[key]``."""
    loc = d.val_loc[key]
    style = getattr(d, "val_style", {}).get(key)
    if style in ("|", ">") or "\n" in str(d[key]):
        return loc
    return Loc(loc.file, loc.line, loc.col + offset + (1 if style in ("'", '"') else 0))


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
    if not isinstance(v, list):
        raise SynthError(d.val_loc[key], f"schedule.{key} must be a list of integers, not {v!r}",
                         f"write {key}: [0, 0, 1]")
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, int):
            raise SynthError(_item_loc(d, key, i), f"schedule.{key}[{i}] is {x!r}, not an integer",
                             f"write whole numbers, e.g. {key}: [0, 0, 1]")
    if n is not None and len(v) != n:
        raise SynthError(d.val_loc[key], f"schedule.{key} has {len(v)} entries but there are {n} ops",
                         f"give exactly one entry per op, in program order ({n} entries)")
    for i, x in enumerate(v):
        if x < lo:
            raise SynthError(_item_loc(d, key, i), f"schedule.{key}[{i}] is {x}, below {lo}",
                             f"use values of at least {lo}")
    return tuple(v)


def _item_loc(d: LDict, key: str, i: int) -> Loc:
    v = d[key]
    return v.item_loc[i] if isinstance(v, LList) and i < len(v.item_loc) else d.val_loc[key]


def _pins(d: object, doc: LDict, ops: tuple[Op, ...], loop: Loop) -> Pins:
    if d is None:
        return Pins()
    if not isinstance(d, LDict):
        raise SynthError(doc.val_loc["schedule"], "'schedule' must be a mapping",
                         "write schedule: {stage: [...], order: [...]}")
    n_ops = len(ops)
    check_keys(d, ("stage", "order", "async_stages", "max_stage"), "schedule")
    stage = _int_list(d, "stage", n_ops) if "stage" in d else None
    order = _int_list(d, "order", n_ops) if "order" in d else None
    if order is not None and sorted(order) != list(range(n_ops)):
        seen: dict[int, int] = {}
        for i, x in enumerate(order):
            if x >= n_ops:
                raise SynthError(_item_loc(d, "order", i),
                                 f"schedule.order[{i}] is {x}, but positions run 0..{n_ops - 1}",
                                 f"give each op a distinct position 0..{n_ops - 1} (a permutation)")
            if x in seen:
                raise SynthError(_item_loc(d, "order", i),
                                 f"schedule.order is not a permutation: position {x} is given to both "
                                 f"'{ops[seen[x]].name}' and '{ops[i].name}'",
                                 f"give each op a distinct position 0..{n_ops - 1}; position "
                                 f"{min(set(range(n_ops)) - set(order))} is unused")
            seen[x] = i
    asyn = _int_list(d, "async_stages", None) if "async_stages" in d else None
    max_stage = want_int(d, "max_stage", "schedule", lo=0, default=None)
    if stage is not None and max_stage is not None and max(stage) > max_stage:
        i = stage.index(max(stage))
        raise SynthError(d.val_loc["max_stage"],
                         f"schedule.max_stage is {max_stage}, below stage {stage[i]} pinned for '{ops[i].name}'",
                         f"raise max_stage to at least {stage[i]}, or lower the pinned stages")
    if stage is not None and max(stage) >= loop.min_trip_count:
        i = stage.index(max(stage))
        what = "min_trip_count" if loop.symbolic else "trip_count"
        raise SynthError(_item_loc(d, "stage", i),
                         f"stage {stage[i]} of '{ops[i].name}' needs at least {stage[i] + 1} iterations (one per "
                         f"pipeline stage), but the loop may run only {loop.min_trip_count} ({what})",
                         f"use stages of at most {loop.min_trip_count - 1}, or raise {what}")
    if asyn is not None:
        used = sorted(set(stage)) if stage is not None else None
        top = max(stage) if stage is not None else max_stage
        for i, s in enumerate(asyn):
            if top is not None and s > top:
                raise SynthError(_item_loc(d, "async_stages", i),
                                 f"async stage {s} does not exist (the highest stage is {top})",
                                 "list only stages that some op uses")
            if used is not None and s not in used:
                raise SynthError(_item_loc(d, "async_stages", i),
                                 f"async stage {s} has no op (the pinned stages are {', '.join(map(str, used))})",
                                 "list only stages that some op uses")
    return Pins(stage, order, asyn, max_stage, d.loc, d.val_loc.get("stage"), d.val_loc.get("order"))


def _objective(d: object, doc: LDict) -> Objective:
    """``latency`` | ``shared_memory`` | a list of them | weights: ``{latency: 4, shared_memory: 1}``
    or ``[{latency: 4}, {shared_memory: 1}]``."""
    if d is None:
        return Objective()
    loc = doc.val_loc["objective"]
    fix = "write latency, shared_memory, or a weighted list such as [{latency: 4}, {shared_memory: 1}]"
    terms: list[tuple[str, int, Loc]] = []
    if isinstance(d, str):
        terms = [(d, 1, loc)]
    elif isinstance(d, LDict):
        terms = [(k, w, d.val_loc[k]) for k, w in d.items()]
    elif isinstance(d, LList):
        if not d:
            raise SynthError(loc, "objective is an empty list", fix)
        for i, t in enumerate(d):
            if isinstance(t, LDict) and len(t) == 1:
                (k, w), = t.items()
                terms.append((k, w, t.val_loc[k]))
            elif isinstance(t, str):
                terms.append((t, 1, d.item_loc[i]))
            else:
                raise SynthError(d.item_loc[i], f"objective term {t!r} is not understood", fix)
    else:
        raise SynthError(loc, f"objective {d!r} is not understood", fix)
    seen: set[str] = set()
    for k, w, wloc in terms:
        if k not in OBJECTIVES:
            kloc = d.key_loc[k] if isinstance(d, LDict) else wloc
            if isinstance(d, LList):
                item = d[[t for t, *_ in terms].index(k)]
                kloc = item.key_loc[k] if isinstance(item, LDict) else kloc
            raise SynthError(kloc, f"unknown objective '{k}'", suggest(k, OBJECTIVES))
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise SynthError(wloc, f"objective weight of '{k}' must be a non-negative integer, not {w!r}",
                             "write objective: [{latency: 4}, {shared_memory: 1}]")
        if k in seen:
            raise SynthError(wloc, f"objective '{k}' is given twice", "give each objective once")
        seen.add(k)
    return Objective(tuple((k, w) for k, w, _ in terms))

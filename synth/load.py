"""``problem.yaml`` to a validated :class:`~synth.problem.Problem` (docs/problem-format.md).

Every check that can be made without solving happens here or in
:mod:`synth.graph`, and raises :class:`~synth.errors.SynthError` naming file,
line and fix. ``kind: gemm`` documents are handed to :mod:`synth.gemm_doc`.
Every document first passes the JSON Schema of :mod:`synth.problem_schema`; every
number is checked against its bound in :mod:`synth.bounds` (docs/bounds.md).
"""

from __future__ import annotations

import os
import re
from typing import Optional

from .bounds import (MAX_BUFFERS, MAX_BYTES, MAX_DEPS, MAX_DISTANCE, MAX_INPUT_BYTES, MAX_ISSUE, MAX_LATENCY, MAX_OPS,
                     MAX_TRIP_COUNT, MAX_UNITS, MAX_UNIT_COUNT)
from .errors import Loc, SynthError
from .expr import ExprError, check_expr, free_vars, is_bool, parse
from .gemm_doc import GEMM_KEYS, problem_from_gemm_doc
from .problem import Buffer, Dep, Loop, Op, Predicate, Problem, Target, Unit
from .problem_schema import schema_errors
from .readfile import read_regular_text
from .sections import IDENT_RE, NAME_RE, check_name, check_problem, parse_objective, parse_pins
from .yamlnodes import (LDict, LList, check_keys, empty_ldict, read_yaml, read_yaml_text, require, suggest,
                        want_int)

TOP_KEYS = ("name", "description", "loop", "buffers", "ops", "deps", "target", "schedule", "objective")

WS_BODY_KINDS = ("attention", "gemm_kloop", "body")
"""The ``kind:`` of a warp-specialized loop body (:mod:`synth.model.ws_read`, docs/ws_model.md): ``synth solve``
reads such a file (:func:`synth.flow.ws.load_solve_problem`); :func:`load_problem` refuses it, naming that."""


def solve_document(path: str) -> tuple[str, object]:
    """``synth solve``'s one read of ``path``: its text and its YAML document (:class:`SynthError` at
    ``file:line:col``)."""
    text = read_regular_text(path, MAX_INPUT_BYTES, "the problem file", fix="give the path of a problem.yaml file")
    return text, read_yaml_text(text, path)


def is_ws_body(doc) -> bool:
    """Whether a document is a warp-specialized loop body (its ``kind:`` one of :data:`WS_BODY_KINDS`), which
    :func:`synth.flow.ws.ws_problem_text` reads, rather than a problem :func:`problem_from_doc` reads."""
    return isinstance(doc, LDict) and isinstance(doc.get("kind"), str) and doc["kind"] in WS_BODY_KINDS


def given_source(path: str) -> Optional[str]:
    """The text of the problem file at ``path`` as the user gave it (so an output folder is
    self-contained), or None when there is no such file (a problem built in memory)."""
    if not path or not os.path.isfile(path):
        return None
    return read_regular_text(path, MAX_INPUT_BYTES, "the problem file")


def load_problem(path: str) -> Problem:
    """Read and validate ``path``; raise :class:`SynthError` on the first problem found."""
    return problem_from_doc(read_yaml(path), path)


def load_problem_text(text: str, path: str = "<string>") -> Problem:
    """Same as :func:`load_problem` for YAML text (tests, generated problems)."""
    return problem_from_doc(read_yaml_text(text, path), path)


def problem_from_doc(doc: LDict, path: str) -> Problem:
    """Validate a parsed document (see :func:`synth.yamlnodes.read_yaml`).

    The JSON Schema (:mod:`synth.problem_schema`) decides first: a document it
    rejects is never accepted. The error reported is the hand-written check's
    when that check also rejects the document (its message names the problem in
    the user's words: "did you mean", the op's name), else the schema's.
    """
    errors = schema_errors(doc)
    if not errors:
        return _problem(doc, path)
    try:
        _problem(doc, path)
    except SynthError:
        raise
    except Exception:  # noqa: BLE001 - the schema's own error is reported below
        pass
    raise errors[0]


def _problem(doc: LDict, path: str) -> Problem:
    if doc.get("kind") is not None:
        if doc["kind"] in WS_BODY_KINDS:
            raise SynthError(doc.val_loc["kind"], f"kind: {doc['kind']} is a warp-specialized loop body, which only "
                             "'synth solve' reads", "run 'synth solve FILE -o OUT' (docs/problem-format.md, "
                             "\"Warp-specialized bodies\")")
        if doc["kind"] != "gemm":
            raise SynthError(doc.val_loc["kind"], f"unknown problem kind {doc['kind']!r}",
                             _did_you_mean(str(doc["kind"]), ("gemm",) + WS_BODY_KINDS) + "the kinds are 'gemm' and "
                             "the warp-specialized bodies 'attention', 'gemm_kloop', 'body' ('synth solve' only); omit "
                             "'kind' for a hand-written loop")
        check_keys(doc, GEMM_KEYS, "a gemm problem")
        return problem_from_gemm_doc(doc, path)
    check_keys(doc, TOP_KEYS, "the problem")
    name = check_name(doc)
    assert name is not None
    loop = _loop(require(doc, "loop", "the problem"), doc)
    target_doc = require(doc, "target", "the problem")
    target = _target(target_doc, doc)
    buffers = _buffers(require(doc, "buffers", "the problem"), doc)
    ops = _ops(require(doc, "ops", "the problem"), doc, buffers, target, loop)
    deps = _deps(doc.get("deps"), doc, ops)
    pins = parse_pins(doc.get("schedule"), doc, ops, loop)
    objective = parse_objective(doc.get("objective"), doc)
    problem = Problem(name=name, loop=loop, buffers=buffers, ops=ops, target=target, deps=deps,
                      pins=pins, objective=objective, path=path)
    check_problem(problem, {k: target_doc.val_loc[k] for k in ("shared_bytes", "registers_bytes")
                            if k in target_doc.val_loc})
    return problem


def _did_you_mean(name: str, known: tuple[str, ...]) -> str:
    """``did you mean 'x'? `` when a known name is close, else nothing."""
    hint = suggest(name, known)
    return hint + " " if hint.startswith("did you mean") else ""


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
        mn = want_int(d, "min_trip_count", "loop", lo=1, hi=MAX_TRIP_COUNT)
        return Loop(var, tc, mn, d.loc)
    if tc < 1:
        raise SynthError(d.val_loc["trip_count"], f"trip_count is {tc}", "use a trip count of at least 1")
    tc = want_int(d, "trip_count", "loop", lo=1, hi=MAX_TRIP_COUNT)
    mn = want_int(d, "min_trip_count", "loop", lo=1, default=tc, hi=MAX_TRIP_COUNT)
    if mn != tc:
        raise SynthError(d.val_loc["min_trip_count"], f"min_trip_count {mn} differs from the static trip_count {tc}",
                         "drop min_trip_count when the trip count is a number")
    return Loop(var, tc, tc, d.loc)


def _target(d: object, doc: LDict) -> Target:
    if not isinstance(d, LDict):
        raise SynthError(doc.val_loc["target"], "'target' must be a mapping",
                         "write target: {shared_bytes: 167936, units: {...}}")
    check_keys(d, ("shared_bytes", "registers_bytes", "units", "arch"), "target")
    shared = want_int(d, "shared_bytes", "target", lo=0, hi=MAX_BYTES)
    regs = want_int(d, "registers_bytes", "target", lo=0, default=None, hi=MAX_BYTES)
    units_d = require(d, "units", "target", "add units: {cp_async: {async: true}, lsu: {}, ...}")
    if not isinstance(units_d, LDict) or not units_d:
        raise SynthError(d.val_loc["units"], "'units' must be a non-empty mapping of unit names",
                         "write units: {cp_async: {async: true}, lsu: {}}")
    _at_most(len(units_d), MAX_UNITS, d.val_loc["units"], "units")
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
        count = want_int(ud, "count", f"unit '{uname}'", lo=1, default=1, hi=MAX_UNIT_COUNT)
        units.append(Unit(uname, is_async, count, units_d.key_loc[uname]))
    return Target(shared, regs, tuple(units), d.loc)


def _buffers(d: object, doc: LDict) -> tuple[Buffer, ...]:
    if not isinstance(d, LDict) or not d:
        raise SynthError(doc.val_loc["buffers"], "'buffers' must be a non-empty mapping",
                         "write buffers: {A_s: {space: shared, bytes: 8192}}")
    _at_most(len(d), MAX_BUFFERS, doc.val_loc["buffers"], "buffers")
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
        size = want_int(bd, "bytes", f"buffer '{name}'", lo=1, hi=MAX_BYTES)
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
    _at_most(len(d), MAX_OPS, doc.val_loc["ops"], "ops")
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
        latency = want_int(od, "latency", what, lo=0, hi=MAX_LATENCY)
        issue = want_int(od, "issue", what, lo=1, default=1, hi=MAX_ISSUE)
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
    _at_most(len(d), MAX_DEPS, doc.val_loc["deps"], "deps")
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
        dist = want_int(dd, "distance", "a dep", lo=0, default=0, hi=MAX_DISTANCE)
        lat = want_int(dd, "latency", "a dep", lo=0, default=None, hi=MAX_LATENCY)
        out.append(Dep(dd["from"], dd["to"], dist, lat, dd.loc))
    return tuple(out)


def _at_most(n: int, hi: int, loc: Loc, what: str) -> None:
    if n > hi:
        raise SynthError(loc, f"{n} {what}, more than the {hi} allowed",
                         f"split the loop or merge {what} (see docs/bounds.md)")


__all__ = ["given_source", "load_problem", "load_problem_text", "problem_from_doc", "check_problem", "NAME_RE", "IDENT_RE",
           "TOP_KEYS"]

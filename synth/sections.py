"""Validators for the parts of a problem file that both kinds share, and the whole-problem checks.

Used by :mod:`synth.load` (hand-written loops) and :mod:`synth.gemm_doc`
(``kind: gemm``): the problem ``name``, ``schedule:`` pins, ``objective:``, and
:func:`check_problem` (buffers nobody writes, capacities, the dependence graph
and pins). Every error is a located :class:`~synth.errors.SynthError`; every
number is checked against its bound in :mod:`synth.bounds`.
"""

from __future__ import annotations

import re

from .bounds import MAX_STAGE, MAX_WEIGHT
from .errors import Loc, SynthError
from .graph import build_graph, check_pins
from .problem import Loop, Objective, Op, Pins, Problem
from .yamlnodes import LDict, LList, check_bound, check_keys, require, suggest, want_int

NAME_RE = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
"""A problem name: it names the default output folder out/<name>, so no path separators, no '.' or '..'."""
IDENT_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
"""Names of ops, buffers, units and the loop variable."""
OBJECTIVES = ("latency", "shared_memory", "stages")


def check_name(doc: LDict, required: bool = True) -> str | None:
    """The document's ``name`` (None when absent and not ``required``); a safe folder name."""
    if "name" not in doc and not required:
        return None
    name = require(doc, "name", "the problem", "add 'name: my-loop' (letters, digits, '_', '.', '-')")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SynthError(doc.val_loc["name"], f"invalid name {name!r}",
                         "use only letters, digits, '_', '.' and '-' (at most 64, not starting with '.' or '-')")
    return name


def check_problem(problem: Problem, locs: dict[str, Loc] | None = None) -> None:
    """Whole-problem checks shared by hand-written and generated problems.

    Buffers nobody writes, shared memory that cannot fit single-buffered,
    zero-distance cycles and pins that break a dependence (via :mod:`synth.graph`).
    ``locs`` may give the exact place of ``shared_bytes``/``registers_bytes`` (default:
    the target).
    """
    locs = locs or {}
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


def int_list(d: LDict, key: str, n: int | None, lo: int = 0, hi: int | None = None) -> tuple[int, ...]:
    """``schedule.<key>`` as integers in ``lo .. hi``, ``n`` of them when ``n`` is given."""
    v = d[key]
    if not isinstance(v, list):
        raise SynthError(d.val_loc[key], f"schedule.{key} must be a list of integers, not {v!r}",
                         f"write {key}: [0, 0, 1]")
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, int):
            raise SynthError(item_loc(d, key, i), f"schedule.{key}[{i}] is {x!r}, not an integer",
                             f"write whole numbers, e.g. {key}: [0, 0, 1]")
    if n is not None and len(v) != n:
        raise SynthError(d.val_loc[key], f"schedule.{key} has {len(v)} entries but there are {n} ops",
                         f"give exactly one entry per op, in program order ({n} entries)")
    for i, x in enumerate(v):
        if x < lo:
            raise SynthError(item_loc(d, key, i), f"schedule.{key}[{i}] is {x}, below {lo}",
                             f"use values of at least {lo}")
        check_bound(x, hi, item_loc(d, key, i), f"schedule.{key}[{i}]")
    return tuple(v)


def item_loc(d: LDict, key: str, i: int) -> Loc:
    """Where item ``i`` of the list ``d[key]`` is (the list's place when unknown)."""
    v = d[key]
    return v.item_loc[i] if isinstance(v, LList) and i < len(v.item_loc) else d.val_loc[key]


def parse_pins(d: object, doc: LDict, ops: tuple[Op, ...], loop: Loop) -> Pins:
    """``schedule:`` (``stage``, ``order``, ``async_stages``, ``max_stage``) checked against ``ops``. No pin is
    checked against ``loop``: a stage may exceed the trip count (the lowering handles loops shorter than the
    pipeline)."""
    if d is None:
        return Pins()
    if not isinstance(d, LDict):
        raise SynthError(doc.val_loc["schedule"], "'schedule' must be a mapping",
                         "write schedule: {stage: [...], order: [...]}")
    n_ops = len(ops)
    check_keys(d, ("stage", "order", "async_stages", "max_stage"), "schedule")
    stage = int_list(d, "stage", n_ops, hi=MAX_STAGE) if "stage" in d else None
    order = int_list(d, "order", n_ops) if "order" in d else None
    if order is not None and sorted(order) != list(range(n_ops)):
        seen: dict[int, int] = {}
        for i, x in enumerate(order):
            if x >= n_ops:
                raise SynthError(item_loc(d, "order", i),
                                 f"schedule.order[{i}] is {x}, but positions run 0..{n_ops - 1}",
                                 f"give each op a distinct position 0..{n_ops - 1} (a permutation)")
            if x in seen:
                raise SynthError(item_loc(d, "order", i),
                                 f"schedule.order is not a permutation: position {x} is given to both "
                                 f"'{ops[seen[x]].name}' and '{ops[i].name}'",
                                 f"give each op a distinct position 0..{n_ops - 1}; position "
                                 f"{min(set(range(n_ops)) - set(order))} is unused")
            seen[x] = i
    asyn = int_list(d, "async_stages", None, hi=MAX_STAGE) if "async_stages" in d else None
    max_stage = want_int(d, "max_stage", "schedule", lo=0, default=None, hi=MAX_STAGE)
    if stage is not None and max_stage is not None and max(stage) > max_stage:
        i = stage.index(max(stage))
        raise SynthError(d.val_loc["max_stage"],
                         f"schedule.max_stage is {max_stage}, below stage {stage[i]} pinned for '{ops[i].name}'",
                         f"raise max_stage to at least {stage[i]}, or lower the pinned stages")
    if asyn is not None:
        used = sorted(set(stage)) if stage is not None else None
        top = max(stage) if stage is not None else max_stage
        for i, s in enumerate(asyn):
            if top is not None and s > top:
                raise SynthError(item_loc(d, "async_stages", i),
                                 f"async stage {s} does not exist (the highest stage is {top})",
                                 "list only stages that some op uses")
            if used is not None and s not in used:
                raise SynthError(item_loc(d, "async_stages", i),
                                 f"async stage {s} has no op (the pinned stages are {', '.join(map(str, used))})",
                                 "list only stages that some op uses")
    return Pins(stage, order, asyn, max_stage, d.loc, d.val_loc.get("stage"), d.val_loc.get("order"))


def parse_objective(d: object, doc: LDict) -> Objective:
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
        check_bound(w, MAX_WEIGHT, wloc, f"objective weight of '{k}'")
        if k in seen:
            raise SynthError(wloc, f"objective '{k}' is given twice", "give each objective once")
        seen.add(k)
    return Objective(tuple((k, w) for k, w, _ in terms))

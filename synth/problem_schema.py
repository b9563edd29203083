"""The JSON Schema of ``problem.yaml`` (``synth/schema/problem.schema.json``, draft 2020-12).

The schema states the structure of both kinds of problem file (keys, types,
required keys, names, and every numeric bound of :mod:`synth.bounds`); the
``jsonschema`` package validates a parsed document against it before any other
check (:func:`schema_errors`). Each validation error becomes a
:class:`~synth.errors.SynthError` located at the offending key or value of the
YAML file. What a schema cannot say (a read of an undeclared buffer, a pinned
stage that breaks a dependence, a predicate's grammar) is checked by
:mod:`synth.load` afterwards.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib import resources
from typing import Any

from .errors import Loc, SynthError
from .yamlnodes import LDict, LList


@lru_cache(maxsize=1)
def problem_schema() -> dict:
    """The schema document (package data)."""
    text = resources.files("synth").joinpath("schema/problem.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> Any:
    # jsonschema: only when a problem is checked against the schema (a stock GPU image has none)
    from jsonschema import Draft202012Validator

    schema = problem_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_errors(doc: LDict) -> list[SynthError]:
    """Every schema violation of ``doc`` as a located error, in file order (empty: valid)."""
    out = [_located(doc, e) for e in _validator().iter_errors(doc)]
    return sorted(out, key=lambda e: (e.loc.line, e.loc.col) if e.loc else (0, 0))


def _deepest(err: Any) -> Any:
    """For ``oneOf``/``anyOf``, the alternative that came closest (jsonschema's best match)."""
    # jsonschema: only when a problem is checked against the schema (a stock GPU image has none)
    from jsonschema.exceptions import best_match

    while err.context:
        nxt = best_match(err.context)
        if nxt is None or nxt is err:
            break
        err = nxt
    return err


def _walk(doc: Any, path: list) -> tuple[Any, Any, Any]:
    """(parent, key, node) along ``path`` from the document root."""
    parent, key, node = None, None, doc
    for k in path:
        parent, key = node, k
        node = node[k]
    return parent, key, node


def _value_loc(doc: LDict, parent: Any, key: Any, node: Any) -> Loc:
    if isinstance(parent, LDict) and key in parent.val_loc:
        return parent.val_loc[key]
    if isinstance(parent, LList) and isinstance(key, int) and key < len(parent.item_loc):
        return parent.item_loc[key]
    return getattr(node, "loc", doc.loc)


def _what(doc: LDict, path: list) -> str:
    """The path in the user's words: ``op 'mma'``, ``buffer 'A_s'``, ``target.units``."""
    if not path:
        return "the problem"
    if path[0] == "ops" and len(path) >= 2:
        op = doc["ops"][path[1]]
        name = op.get("name") if isinstance(op, dict) else None
        return f"op '{name}'" if isinstance(name, str) else f"op #{path[1]}"
    if path[0] == "buffers" and len(path) >= 2:
        return f"buffer '{path[1]}'"
    if path[:2] == ["target", "units"] and len(path) >= 3:
        return f"unit '{path[2]}'"
    if path[0] == "deps" and len(path) >= 2:
        return "a dep"
    return ".".join(str(p) for p in path)


def _located(doc: LDict, err: Any) -> SynthError:
    err = _deepest(err)
    path = list(err.absolute_path)
    parent, key, node = _walk(doc, path)
    kind = err.validator
    more = "see docs/problem-format.md and docs/bounds.md"
    if kind == "additionalProperties" and isinstance(node, LDict):
        allowed = list((err.schema.get("properties") or {}).keys())
        extra = next((k for k in node if k not in allowed), None)
        if extra is not None:
            close = difflib.get_close_matches(extra, allowed, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
            return SynthError(node.key_loc[extra], f"unknown key '{extra}' in {_what(doc, path)}", fix)
    if kind == "required" and isinstance(node, LDict):
        missing = next((k for k in err.validator_value if k not in node), "?")
        return SynthError(node.loc, f"{_what(doc, path)} is missing '{missing}'", f"add '{missing}:' ({more})")
    if kind == "propertyNames" and isinstance(node, LDict) and err.instance in node.key_loc:
        return SynthError(node.key_loc[err.instance], f"{err.instance!r} is not allowed as a name in "
                          f"{_what(doc, path)}: {err.message}", "use letters, digits and '_', starting with a letter")
    loc = _value_loc(doc, parent, key, node)
    where = _what(doc, path)
    if kind == "maximum":
        fix = f"use a value of at most {err.validator_value} (docs/bounds.md)"
    elif kind == "minimum":
        fix = f"use a value of at least {err.validator_value}"
    elif kind == "type":
        fix = f"write a value of type {err.validator_value} ({more})"
    else:
        fix = more
    return SynthError(loc, f"{where} does not match the problem schema: {_short(err.message)}", fix)


def _short(msg: str, limit: int = 160) -> str:
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


__all__ = ["problem_schema", "schema_errors"]

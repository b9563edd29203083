"""The file form of a warp-specialized body (docs/ws_model.md, "The file form"), read with :mod:`synth.yamlnodes`.

A file names one body, either a named one (``kind: attention`` with ``head_dim``, ``BM``, ``BN``, ``dtype`` and
``causal``, the mask its kernel applies (:func:`attention_causal`);
``kind: gemm_kloop`` with ``BM``, ``BN``, ``BK``, ``dtype``) or one written out (``kind: body`` with ``rows``,
``buffers`` and ``ops``), with optional ``machine`` facts and ``pins``. Every error names ``file:line:col``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import Loc, SynthError
from ..yamlnodes import LDict, LList, check_keys, read_yaml, read_yaml_text, require, suggest, want_int
from .ws_bodies import attention_body, gemm_kloop_body
from .ws_body import MODES, UNITS, WsBody, WsBuffer, WsMachine, WsOp, machine, validate
from .ws_schedule import Pins

TOP_KEYS = ("name", "kind", "head_dim", "BM", "BN", "BK", "dtype", "causal", "rows", "buffers", "ops", "machine", "pins",
            "max_consumers", "max_stage", "max_depth", "producer")
KINDS = ("attention", "gemm_kloop", "body")
MACHINE_KEYS = ("arch", "warp_groups", "registers", "reg_overhead", "producer_registers", "smem", "named_barriers",
                "barrier_cycles", "wgmma_drain")
PIN_KEYS = ("consumers", "mode", "producer", "depth", "groups", "ii")
BUFFER_KEYS = ("name", "space", "size", "carried", "once", "rows", "alias")
OP_KEYS = ("name", "unit", "work", "latency", "reads", "reads_prev", "writes", "split", "issue", "blocking", "hold")
BIG = 1 << 30


def _mapping(v: Any, loc: Loc, what: str) -> LDict:
    if not isinstance(v, LDict):
        raise SynthError(loc, f"{what} must be a mapping", f"write {what} as 'key: value' lines")
    return v


def _list(d: LDict, key: str, what: str) -> LList:
    v = require(d, key, what)
    if not isinstance(v, LList):
        raise SynthError(d.val_loc[key], f"'{key}' of {what} must be a list", f"write '{key}:' as a '- ...' list")
    return v


def _str(d: LDict, key: str, what: str, default: Any = ..., choices: tuple[str, ...] = ()) -> Any:
    if key not in d:
        if default is ...:
            require(d, key, what)
        return default
    v = d[key]
    if not isinstance(v, str) or not v:
        raise SynthError(d.val_loc[key], f"'{key}' of {what} must be a name, not {v!r}")
    if choices and v not in choices:
        raise SynthError(d.val_loc[key], f"'{key}' of {what} is {v!r}, not one of {', '.join(choices)}",
                         suggest(v, choices))
    return v


def _bool(d: LDict, key: str, what: str, default: bool) -> bool:
    if key not in d:
        return default
    if not isinstance(d[key], bool):
        raise SynthError(d.val_loc[key], f"'{key}' of {what} must be true or false, not {d[key]!r}")
    return d[key]


def _names(d: LDict, key: str, what: str) -> tuple[str, ...]:
    if key not in d:
        return ()
    v = d[key]
    if isinstance(v, str):
        return (v,)
    if not isinstance(v, LList) or not all(isinstance(x, str) for x in v):
        raise SynthError(d.val_loc[key], f"'{key}' of {what} must be a list of buffer names")
    return tuple(v)


def _machine(doc: LDict) -> WsMachine:
    if "machine" not in doc:
        return machine()
    m = _mapping(doc["machine"], doc.val_loc["machine"], "machine")
    check_keys(m, MACHINE_KEYS, "machine")
    over = {k: want_int(m, k, "machine", lo=0, hi=BIG) for k in MACHINE_KEYS if k != "arch" and k in m}
    try:
        return machine(_str(m, "arch", "machine", "sm_90"), **over)
    except (KeyError, SynthError) as exc:
        raise SynthError(m.val_loc.get("arch", m.loc), str(exc.args[0] if isinstance(exc, KeyError) else exc.msg),
                         "arch: sm_90") from None


def _pins(doc: LDict, body: WsBody) -> Pins:
    if "pins" not in doc:
        return Pins()
    p = _mapping(doc["pins"], doc.val_loc["pins"], "pins")
    check_keys(p, PIN_KEYS, "pins")
    out: dict[str, Any] = {}
    if "consumers" in p:
        out["consumers"] = want_int(p, "consumers", "pins", lo=1, hi=16)
    if "mode" in p:
        out["mode"] = _str(p, "mode", "pins", choices=MODES)
    if "producer" in p:
        out["producer"] = _bool(p, "producer", "pins", True)
    if "ii" in p:
        out["ii"] = want_int(p, "ii", "pins", lo=1, hi=BIG)
    for key, names, what in (("depth", [b.name for b in body.buffers if b.space == "smem" and not b.once],
                              "a shared ring"), ("groups", [o.name for o in body.ops if o.is_wgmma], "a wgmma op")):
        if key not in p:
            continue
        m = _mapping(p[key], p.val_loc[key], f"pins.{key}")
        for name in m:
            if name not in names:
                raise SynthError(m.key_loc[name], f"pins.{key}: {name!r} is not {what} of the body", suggest(name, names))
        out[key] = tuple((name, want_int(m, name, f"pins.{key}", lo=0 if key == "groups" else 1, hi=64)) for name in m)
    return Pins(**out)


def _explicit(doc: LDict, name: str) -> WsBody:
    bufs, locs = [], {}
    for i, b in enumerate(_list(doc, "buffers", "the body")):
        b = _mapping(b, doc["buffers"].item_loc[i], "a buffer")
        check_keys(b, BUFFER_KEYS, "a buffer")
        bn = _str(b, "name", "a buffer")
        if bn in locs:
            raise SynthError(b.val_loc["name"], f"buffer {bn!r} is listed twice")
        locs[bn] = b.loc
        bufs.append(WsBuffer(bn, _str(b, "space", f"buffer {bn}", choices=("smem", "reg")),
                             want_int(b, "size", f"buffer {bn}", lo=1, hi=BIG), _bool(b, "carried", bn, False),
                             _bool(b, "once", bn, False), _bool(b, "rows", bn, True),
                             _str(b, "alias", f"buffer {bn}", None)))
    ops, seen = [], set()
    for i, o in enumerate(_list(doc, "ops", "the body")):
        o = _mapping(o, doc["ops"].item_loc[i], "an op")
        check_keys(o, OP_KEYS, "an op")
        on = _str(o, "name", "an op")
        if on in seen:
            raise SynthError(o.val_loc["name"], f"op {on!r} is listed twice")
        seen.add(on)
        what = f"op {on}"
        for key in ("reads", "reads_prev", "writes"):
            for bn in _names(o, key, what):
                if bn not in locs:
                    raise SynthError(o.val_loc[key], f"{what}: unknown buffer {bn!r} in '{key}'", suggest(bn, locs))
        ops.append(WsOp(on, _str(o, "unit", what, choices=UNITS), want_int(o, "work", what, lo=1, hi=BIG),
                        want_int(o, "latency", what, lo=0, default=0, hi=BIG), _names(o, "reads", what),
                        _names(o, "reads_prev", what), _names(o, "writes", what), _bool(o, "split", what, True),
                        want_int(o, "issue", what, lo=0, default=0, hi=BIG), _bool(o, "blocking", what, False),
                        want_int(o, "hold", what, lo=0, default=0, hi=1)))
    extra: dict[str, Any] = {k: want_int(doc, k, "the body", lo=1, hi=64)
                             for k in ("max_consumers", "max_stage", "max_depth") if k in doc}
    if "producer" in doc:
        extra["producer"] = _bool(doc, "producer", "the body", True)
    return WsBody(name, tuple(ops), tuple(bufs), want_int(doc, "rows", "the body", lo=1, hi=BIG), **extra)


def attention_causal(doc: LDict) -> bool:
    """``causal:`` of an attention body file (default false): whether its kernel applies the causal mask (bottom-right
    aligned, docs/attention.md). It changes neither the body, its schedule nor its program (each CTA's number of KV
    blocks is the trip count ``n >= 0`` the proof covers), only the kernel. :class:`SynthError` at the value's line
    for anything but true or false."""
    if "causal" not in doc:
        return False
    v = doc["causal"]
    if not isinstance(v, bool):
        raise SynthError(doc.val_loc["causal"], f"'causal' of the attention body must be true or false, not {v!r}",
                         "write 'causal: true' (the causal mask) or 'causal: false' (none; the default)")
    return v


def attention_dtype(doc: LDict) -> str:
    """``dtype:`` of an attention body file (``f16``, the default, or ``bf16``); :class:`SynthError` at its line."""
    return _str(doc, "dtype", "the attention body", "f16", ("f16", "bf16"))


def read_ws_text(text: str, path: str = "<string>") -> tuple[WsBody, WsMachine, Pins]:
    """The body, machine facts and pins a file of the form above states; :class:`SynthError` at ``file:line:col``."""
    return _from_doc(read_yaml_text(text, path))


def read_ws(path: str) -> tuple[WsBody, WsMachine, Pins]:
    """:func:`read_ws_text` of the file at ``path`` (a regular file of bounded size, :func:`synth.yamlnodes.read_yaml`)."""
    return _from_doc(read_yaml(path))


def _from_doc(doc: LDict) -> tuple[WsBody, WsMachine, Pins]:
    check_keys(doc, TOP_KEYS, "a ws body file")
    kind = _str(doc, "kind", "a ws body file", choices=KINDS)
    name = _str(doc, "name", "a ws body file", kind)
    mach = _machine(doc)
    allowed = {"attention": ("head_dim", "BM", "BN", "dtype", "causal"), "gemm_kloop": ("BM", "BN", "BK", "dtype"),
               "body": ("rows", "buffers", "ops", "max_consumers", "max_stage", "max_depth", "producer")}[kind]
    for key in doc:
        if key not in allowed and key not in ("name", "kind", "machine", "pins"):
            raise SynthError(doc.key_loc[key], f"'{key}' does not belong to kind: {kind}",
                             f"keys of kind {kind}: {', '.join(allowed)}")
    if kind == "attention":
        attention_causal(doc)
    try:
        if kind == "attention":
            body = attention_body(want_int(doc, "head_dim", "the attention body", lo=16, hi=256),
                                  want_int(doc, "BM", "the attention body", lo=64, hi=256),
                                  want_int(doc, "BN", "the attention body", lo=16, hi=256),
                                  attention_dtype(doc), mach.arch)
        elif kind == "gemm_kloop":
            body = gemm_kloop_body(want_int(doc, "BM", "the GEMM body", lo=64, hi=256),
                                   want_int(doc, "BN", "the GEMM body", lo=8, hi=256),
                                   want_int(doc, "BK", "the GEMM body", lo=16, hi=256),
                                   _str(doc, "dtype", "the GEMM body", "f16", ("f16", "bf16")), mach.arch)
        else:
            body = _explicit(doc, name)
        if kind != "body" and "name" in doc:
            body = replace(body, name=name)
        validate(body, mach)
    except SynthError as exc:
        if exc.loc is not None:
            raise
        where = (doc.val_loc.get("BM") if kind != "body" else doc.key_loc.get("ops")) or doc.loc
        raise SynthError(where, exc.msg, exc.fix) from None
    return body, mach, _pins(doc, body)



__all__ = ["read_ws", "read_ws_text", "attention_causal", "attention_dtype", "KINDS"]

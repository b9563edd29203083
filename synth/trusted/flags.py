"""Top-level keys of a folder's ``problem.yaml`` that decide what a certificate must hold, read by the trusted
checker without a YAML library (docs/trust.md): ``epilogue`` (a TMA-store epilogue adds ``store/``),
``pingpong`` (ping-pong consumers add ``order/``) and ``cluster`` (a thread-block cluster adds the cluster
classes). Part of the trusted base: imports nothing from synth
outside this package.

A key is read only when written the one plain way: a block key at column 0 (bare or quoted), once, its
value one of the allowed words (optionally quoted), an optional ``# comment`` after it. Any other spelling
of the key (indented, inside a flow mapping, an explicit ``?`` key, twice, another value), and any key written
through an escape (``"clu\\x73ter"``), an alias (``*k``), a tag or an anchor, raises
:class:`FlagError` naming the file, the line and the fix: the checker never guesses.
"""

from __future__ import annotations

import re

EPILOGUES = ("register", "tma_store")
CLUSTERS = ("1x1", "2x1", "1x2")
_BOOLS = {v: b for b, vs in ((True, ("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON")),
                             (False, ("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF")))
          for v in vs}


class FlagError(ValueError):
    """A ``problem.yaml`` whose key the checker cannot read for sure: ``where`` and ``fix``."""

    def __init__(self, where: str, msg: str, fix: str) -> None:
        super().__init__(f"{where}: {msg}")
        self.where, self.msg, self.fix = where, msg, fix


def read_key(data: bytes, key: str, allowed, path: str = "problem.yaml"):
    """The word written for top-level ``key`` in the ``problem.yaml`` bytes ``data`` (None when absent), one of
    ``allowed``; :class:`FlagError` otherwise (module docstring)."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FlagError(path, f"not UTF-8 (offset {e.start})", "save the file as UTF-8") from None
    probe = re.compile(r"""(^|[{,?])\s*["']?""" + re.escape(key) + r"""\b["']?\s*(:|$)""")
    # a key YAML reads through an escape, an alias, a tag or an anchor may be this key: not read for sure
    hidden = re.compile(r"""(^|[{,?])\s*([*!&]|"[^"]*\\)""")
    found = None
    for n, line in enumerate(text.lstrip("\ufeff").splitlines(), 1):
        code = re.sub(r"(^|\s)#.*", "", line)
        if hidden.search(code):
            raise FlagError(f"{path}:{n}", f"a key written with an escape, an alias, a tag or an anchor, which may be "
                            f"the {key} key", "write every top-level key plainly, as 'key: value' at column 0")
        if not probe.search(code):
            continue
        m = re.fullmatch(r"""(["']?)""" + re.escape(key) + r"""\1[ \t]*:[ \t]*(["']?)([A-Za-z0-9_]+)\2[ \t]*""", code)
        if m is None or m.group(3) not in allowed:
            raise FlagError(f"{path}:{n}", f"the {key} key is not written as '{key}: VALUE' at the top level with "
                            f"VALUE one of {', '.join(sorted(set(allowed)))}", "write it on a line of its own, at column 0")
        if found is not None:
            raise FlagError(f"{path}:{n}", f"{key} is given twice (first at line {found[0]})", "keep one")
        found = (n, m.group(3))
    return None if found is None else found[1]


def read_epilogue_flag(data: bytes, path: str = "problem.yaml") -> str:
    """``epilogue:`` of the problem (``register`` when absent)."""
    return read_key(data, "epilogue", EPILOGUES, path) or "register"


def read_pingpong_flag(data: bytes, path: str = "problem.yaml") -> bool:
    """``pingpong:`` of the problem (False when absent), a YAML 1.1 boolean."""
    v = read_key(data, "pingpong", tuple(_BOOLS), path)
    return False if v is None else _BOOLS[v]


def read_cluster_flag(data: bytes, path: str = "problem.yaml") -> str:
    """``cluster:`` of the problem (``1x1`` when absent): ``1x1``, ``2x1``, ``1x2``, or ``auto`` (a problem file
    as written, not an output folder's, which pins the choice): only ``2x1`` and ``1x2`` declare a cluster."""
    return read_key(data, "cluster", CLUSTERS + ("auto",), path) or "1x1"


__all__ = ["read_key", "read_epilogue_flag", "read_pingpong_flag", "read_cluster_flag", "FlagError", "EPILOGUES",
           "CLUSTERS"]

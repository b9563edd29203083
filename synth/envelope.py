"""The one JSON document every ``synth <command> --json`` prints (docs/json.md).

Shape (``version`` 1)::

    {"format": "synth-json", "version": 1, "synth": "0.2.0", "command": "solve",
     "ok": true, "exit_status": 0, "result": {...} | null,
     "errors": [{"code", "file", "line", "column", "message", "fix"}], "warnings": ["..."]}

``result`` is the command's own object (documented per command in docs/json.md),
null when the command failed before producing one. Errors and warnings are
lists even when empty. A consumer checks ``format`` and ``version`` first: a
field is only ever added within a version; renaming or removing one bumps it.
"""

from __future__ import annotations

from typing import Any, Optional

from . import __version__
from .errors import Infeasible, SynthError

FORMAT = "synth-json"
VERSION = 1

EXIT = {"ok": 0, "failed": 1, "bad_input": 2, "internal": 3, "interrupted": 130}
"""Exit statuses: 0 success; 1 the command ran but the result does not hold (a refuted or
unproven wait, a failed certificate, no GPU, a wrong kernel result, the time limit); 2 bad
input or arguments; 3 an internal error (a bug in synth); 130 interrupted."""

CODES = {
    "usage": 2, "bad_input": 2, "infeasible": 2,
    "refuted": 1, "unproven": 1, "certificate_failed": 1, "no_gpu": 1, "wrong_result": 1, "time_limit": 1,
    "internal": 3, "interrupted": 130,
}
"""Every error ``code`` and the exit status it implies."""


def error_object(code: str, message: str, *, file: Optional[str] = None, line: Optional[int] = None,
                 column: Optional[int] = None, fix: str = "") -> dict[str, Any]:
    """One entry of ``errors``; ``code`` must be one of :data:`CODES`."""
    if code not in CODES:
        raise ValueError(f"unknown error code {code!r}")
    return {"code": code, "file": file, "line": line, "column": column, "message": message, "fix": fix}


def error_from_exception(exc: SynthError, code: Optional[str] = None) -> dict[str, Any]:
    """The ``errors`` entry of a :class:`SynthError` (its location, message and fix)."""
    if code is None:
        code = "infeasible" if isinstance(exc, Infeasible) else "bad_input"
    loc = exc.loc
    return error_object(code, exc.msg, file=loc.file if loc else None,
                        line=loc.line if loc and loc.line > 0 else None,
                        column=loc.col if loc and loc.line > 0 and loc.col > 0 else None, fix=exc.fix)


def envelope(command: Optional[str], exit_status: int, result: Any = None, errors: list | None = None,
             warnings: list | None = None) -> dict[str, Any]:
    """The whole document; ``ok`` is ``exit_status == 0``."""
    return {"format": FORMAT, "version": VERSION, "synth": __version__, "command": command,
            "ok": exit_status == 0, "exit_status": exit_status, "result": result,
            "errors": list(errors or []), "warnings": [str(w) for w in warnings or []]}


__all__ = ["FORMAT", "VERSION", "EXIT", "CODES", "error_object", "error_from_exception", "envelope"]

"""Helpers shared by tests/test_check_*.py: run ``synth check`` and read its JSON result."""

from __future__ import annotations

import contextlib
import io
import json

from synth.cli import main


def run_check(*args: str) -> tuple[int, dict, str]:
    """``(exit status, JSON result or {}, stderr)`` of ``synth check ARGS --json``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["check", *args, "--json"])
    doc = json.loads(out.getvalue()) if out.getvalue().strip() else {}
    return rc, doc, err.getvalue()


def run_text(*args: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``synth check ARGS`` (human output)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["check", *args])
    return rc, out.getvalue(), err.getvalue()

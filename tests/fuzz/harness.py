"""What the fuzz targets share: a time bound on one step, ``synth`` run in-process, and the CLI's contract.

A module, not a test file (pytest collects only ``test_*.py``); the targets import it as
``from tests.fuzz.harness import ...`` (the repository root is on ``sys.path`` under pytest).
"""

from __future__ import annotations

import contextlib
import io
import signal

import pytest

from synth.cli import main


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` in the code under test swallows it."""


@contextlib.contextmanager
def bounded(seconds: float, what: str):
    """Run the ``with`` body under a ``SIGALRM`` timer of ``seconds``; past it, fail the test with
    ``WHAT ran past SECONDS s`` (``what`` cut to 200 characters). The previous handler is restored either way.
    Main thread only (signals)."""
    def alarm(*_):
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Hang:
        pytest.fail(f"{what[:200]} ran past {seconds} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str], seconds: float) -> tuple[int, str, str]:
    """``synth ARGV`` in-process (:func:`synth.cli.main`) with stdout and stderr captured:
    ``(exit status, stdout, stderr)``; fails the test past ``seconds`` (:func:`bounded`)."""
    out, err = io.StringIO(), io.StringIO()
    with bounded(seconds, "synth " + " ".join(argv)):
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def assert_contract(rc: int, err: str, what: str, *, strict: bool = False) -> None:
    """The CLI's contract on any input: exit 0, 1 or 2, no traceback on stderr, and exit 2 only with an
    ``error`` message (and, when ``strict``, a ``fix:`` too). ``what`` names the run in the failure."""
    assert rc in (0, 1, 2), f"{what}: exit {rc}\n{err[-3000:]}"
    assert "Traceback" not in err, f"{what}: traceback\n{err[-3000:]}"
    if rc == 2:
        if strict:
            assert "error" in err and "fix:" in err, f"{what}: exit 2 without a message and a fix\n{err[-2000:]}"
        else:
            assert "error" in err, f"{what}: exit 2 without a message"


def json_paths(doc, prefix: tuple = ()):
    """Every path below ``doc`` (a key or index tuple for each object value and list element, parent before
    children, in document order); the root's empty path is not among them."""
    if prefix:
        yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from json_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from json_paths(v, prefix + (i,))


__all__ = ["bounded", "run_cli", "assert_contract", "json_paths"]

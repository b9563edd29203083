"""Shared pytest options and fixtures.

``pytest --update-golden`` rewrites golden files (tests/golden/...) instead of
comparing against them; review the rewrite in the diff.

Property tests (hypothesis) draw the same examples on every run by default, so a
run of the suite (CI's included) is reproducible; ``SYNTH_HYPOTHESIS=explore``
draws new examples each run, which is how to hunt for new failures while
developing (a failure it finds prints the example to add as an ``@example``).
"""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import settings

# no per-example deadline: an example's time says how loaded the machine is, not whether the code is right
settings.register_profile("reproducible", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile("explore" if os.environ.get("SYNTH_HYPOTHESIS") == "explore" else "reproducible")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"

AT_ONCE_S = 60.0
"""The bound of a "refused at once" / "does not block" / "no blow-up" check: what takes milliseconds to a second
alone (a FIFO, /dev/zero, a 100,000-deep document, a billion-iteration program), with room for a 2-core machine
loaded many times over and for first imports. A hang or a blow-up still fails it; the figures of an idle machine
are benchmarks/speed_bounds.py's. Tests assert on what the code computes, not on how fast a shared machine is."""


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files instead of comparing with them")


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))


def check_golden(path: pathlib.Path, text: str, update: bool) -> None:
    """Compare ``text`` with the golden file at ``path`` byte for byte (or rewrite it)."""
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not update:
            pytest.fail(f"golden file {path} was missing and has been written; re-run")
        return
    assert path.read_text() == text, f"output differs from golden {path} (run pytest --update-golden to accept)"

"""Shared pytest options and fixtures.

``pytest --update-golden`` rewrites golden files (tests/golden/...) instead of
comparing against them; review the rewrite in the diff.

Property tests (hypothesis) draw the same examples on every run by default, so a
run of the suite (CI's included) is reproducible; ``SYNTH_HYPOTHESIS=explore``
draws new examples each run, which is how to hunt for new failures while
developing (a failure it finds prints the example to add as an ``@example``).

What the test files share lives here: :func:`synth_cli` (``python -m synth`` as a user runs it),
:func:`write_file`, the ``solve_once`` fixture, which solves a problem once for the whole run (both
xdist workers) and hands every test that asks for it the same folder, and :func:`gxx_build` for the tests'
own C++ programs (the CuTe comparisons, the emulator probes). Every compiled binary is kept by content for
the whole run and across runs: the emulators' kernels by the emulators themselves (``$SYNTH_EMU_CACHE``,
default ``~/.cache/synth/emu``), nvcc's cubins by synth.emit.sass (``~/.cache/synth/sass``), the tests'
programs under ``$SYNTH_EMU_CACHE/tests``: a source built once is not built again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import NamedTuple

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


SLOW_ENV = "SYNTH_SLOW"
"""``SYNTH_SLOW=1`` runs the checks marked ``slow`` (sweeps over many shapes, mutants, orders and examples, each of
whose cases the default run checks at least once); ``.ci/run`` sets it, so CI runs every test. An explicit ``-m``
expression chooses for itself."""


def pytest_collection_modifyitems(config, items):
    if not _slow_left_out(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)


def _slow_left_out(config) -> bool:
    return os.environ.get(SLOW_ENV) != "1" and not config.getoption("markexpr", "")


def pytest_report_header(config):
    if _slow_left_out(config):
        return f"checks marked slow are left out; {SLOW_ENV}=1 runs them too (CI does: .ci/run sets it)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _slow_left_out(config):
        terminalreporter.write_line(f"checks marked slow were left out: {SLOW_ENV}=1 runs them too (.ci/run sets it)")


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


# ---------------------------------------------------------------------------------------------------------------
# helpers the test files share

def synth_cli(*args, cwd=None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m synth ARGS`` as a user runs it: a subprocess in ``cwd`` (default the repository root), its
    stdout and stderr as text. ``timeout`` only guards against a hang."""
    return subprocess.run([sys.executable, "-m", "synth", *map(str, args)], capture_output=True, text=True,
                          cwd=str(cwd or ROOT), timeout=timeout)


def write_file(directory, name: str, content) -> str:
    """Write ``content`` to ``directory/name`` (text, bytes, or any other value as indented JSON); the path."""
    path = pathlib.Path(directory) / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return str(path)


def run_dir(tmp_path_factory) -> pathlib.Path:
    """A folder this whole test run shares: the xdist workers' basetemps' parent, or this process's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def run_lock(path: pathlib.Path):
    """Hold an exclusive lock on ``path`` (created) against the other workers of the run."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def gxx_build(src: pathlib.Path, flags, depends=()) -> pathlib.Path:
    """``g++ FLAGS SRC``: a test's own C++ program, built once and kept by content like the emulators' kernels
    (under ``$SYNTH_EMU_CACHE/tests``, keyed by the source, the flags, the compiler and the text of ``depends``,
    the headers it reads that can change); the xdist workers build it once between them."""
    from synth.emit.emulate import cache_dir

    gxx = shutil.which("g++")
    assert gxx, "g++ is needed"
    h = hashlib.sha256()
    for part in (src.read_text(), *map(str, flags), gxx, *(pathlib.Path(d).read_text() for d in depends)):
        h.update(part.encode())
        h.update(b"\0")
    out = cache_dir() / "tests" / f"{src.stem}-{h.hexdigest()[:24]}"
    with run_lock(out.with_name(out.name + ".lock")):
        if not out.exists():
            tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
            proc = subprocess.run([gxx, *map(str, flags), str(src), "-o", str(tmp)], capture_output=True, text=True,
                                  timeout=900)
            assert proc.returncode == 0, f"g++ failed on {src.name}:\n{proc.stderr[-4000:]}"
            os.replace(tmp, out)
    return out


class Solved(NamedTuple):
    """A folder ``synth solve`` wrote (``out``) and the run that wrote it."""

    out: pathlib.Path
    run: subprocess.CompletedProcess

    @property
    def result(self) -> dict:
        """The ``--json`` envelope's result (the solve ran with ``--json``)."""
        return json.loads(self.run.stdout)["result"]


@pytest.fixture(scope="session")
def solve_once(tmp_path_factory):
    """``solve_once(problem, *flags) -> Solved``: ``synth solve PROBLEM -o OUT FLAGS`` run as a subprocess once
    for the whole test run, the xdist workers included (the first to ask solves, the other waits for it), keyed
    by the problem's text and the flags. ``problem`` is a problem file's path or a problem's text. Every test
    that asks gets the same folder: copy it before changing anything in it."""
    root = run_dir(tmp_path_factory) / "solved"

    def solve(problem, *flags) -> Solved:
        text = problem.read_text() if isinstance(problem, pathlib.Path) else problem
        flags = tuple(map(str, flags))
        key = hashlib.sha256("\0".join((text,) + flags).encode()).hexdigest()[:20]
        d = root / key
        with run_lock(root / f"{key}.lock"):
            record = d / "run.json"
            if not record.exists():
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                src = problem if isinstance(problem, pathlib.Path) else pathlib.Path(write_file(d, "p.yaml", text))
                r = synth_cli("solve", src, "-o", d / "out", *flags)
                assert r.returncode == 0, f"synth solve {src} {' '.join(flags)}: exit {r.returncode}\n" \
                                          f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
                record.write_text(json.dumps({"args": r.args, "stdout": r.stdout, "stderr": r.stderr}))
            doc = json.loads(record.read_text())
        return Solved(d / "out", subprocess.CompletedProcess(doc["args"], 0, doc["stdout"], doc["stderr"]))

    return solve

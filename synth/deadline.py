"""One deadline per command, and Ctrl-C that stops a native solver at once.

**The deadline.** ``--time-limit`` bounds a whole command (docs/commands.md,
"The time limit"). The command makes one :class:`Deadline` when it starts and
passes it down through every phase: CP-SAT gets at most what is left, each Z3
or cvc5 query at most ``min(its own limit, what is left)``, and between steps a
phase calls :meth:`Deadline.check`, which raises :class:`TimeUp` naming the
phase once the instant has passed. :class:`TimeUp` is a
:class:`~synth.errors.SynthError`; the CLI answers it with exit 1, code
``time_limit``, and writes nothing (an output folder is built aside and only
moved into place when every phase finished, :mod:`synth.outdir`).

A step with no check of its own (lowering a very large body, drawing its
timeline) would still run past the
deadline, so the CLI wraps each command in :func:`enforced`: SIGALRM half a
second past the deadline stops the native solver running (through the same
watcher thread as Ctrl-C) and raises :class:`TimeUp` naming the phase the last
check named. Moving a finished folder into place is not cut (:func:`finishing`).

**Ctrl-C.** Z3 and CP-SAT each catch SIGINT by default and turn it into an
early, ordinary-looking answer ("unknown", a FEASIBLE schedule), and CP-SAT
leaves SIGINT at the C default handler afterwards (a second Ctrl-C kills the
process with no message and no clean-up). :func:`install_interrupt` (called
once by the CLI, from the main thread) switches both solvers' own handling
off, installs a Python handler that notes the Ctrl-C and raises ``KeyboardInterrupt``, and starts a watcher
thread on :func:`signal.set_wakeup_fd`: when SIGINT arrives while a native
solver runs (with the GIL released), the watcher stops every solver registered
with :func:`stoppable` and interrupts Z3, so the native call returns within
moments and ``KeyboardInterrupt`` is raised in the main thread; ``finally``
blocks then remove temporary folders and the CLI exits 130.
"""

from __future__ import annotations

import contextlib
import math
import signal
import socket
import sys
import threading
import time
from typing import Callable, Iterator, Optional, Union

from .errors import Loc, SynthError

MIN_QUERY = 0.001
"""Seconds: the smallest time limit handed to a solver (a limit must be positive)."""


class TimeUp(SynthError):
    """The command's deadline passed during ``phase`` (the CLI exits 1, code ``time_limit``)."""

    def __init__(self, phase: str, limit: Optional[float] = None, loc: Optional[Loc] = None,
                 done: str = "") -> None:
        lim = f" ({limit:g} s)" if limit is not None else ""
        msg = f"the time limit{lim} ran out during {phase}; nothing was written"
        if done:
            msg += f" (done before it: {done})"
        super().__init__(loc, msg, "raise --time-limit")
        self.phase = phase


class Deadline:
    """A :func:`time.monotonic` instant and the limit it came from; immutable.

    ``left()`` is the seconds remaining (negative once passed); ``check(phase)``
    raises :class:`TimeUp` once it has passed; ``cap(s)`` is ``s`` limited to
    what is left (at least :data:`MIN_QUERY`). :data:`NEVER` has no instant.
    """

    __slots__ = ("_at", "_limit")

    def __init__(self, at: float, limit: Optional[float] = None) -> None:
        object.__setattr__(self, "_at", float(at))
        object.__setattr__(self, "_limit", limit)

    def __setattr__(self, name, value):  # noqa: D105 - frozen
        raise AttributeError("Deadline is immutable")

    @classmethod
    def after(cls, seconds: float) -> "Deadline":
        """The deadline ``seconds`` from now (``math.inf``: never)."""
        return cls(time.monotonic() + seconds, seconds)

    @property
    def at(self) -> float:
        """The monotonic instant (``math.inf`` for :data:`NEVER`)."""
        return self._at

    @property
    def limit(self) -> Optional[float]:
        """The seconds the deadline was made from, for messages (None when not known)."""
        return self._limit

    def left(self) -> float:
        return self._at - time.monotonic()

    def expired(self) -> bool:
        return self.left() <= 0

    def check(self, phase: str, *, loc: Optional[Loc] = None, done: str = "") -> None:
        """Raise :class:`TimeUp` for ``phase`` when the deadline has passed (and note ``phase`` as the one running)."""
        global _phase
        _phase = phase
        if _interrupted.is_set():
            # a KeyboardInterrupt Python delivered inside a __del__ (a Z3 term's) is printed and
            # dropped; the flag the watcher set still stops the command at its next phase
            raise KeyboardInterrupt
        if self.expired():
            raise TimeUp(phase, self._limit, loc, done)

    def cap(self, seconds: float) -> float:
        """``seconds`` limited to what is left, and at least :data:`MIN_QUERY`."""
        return max(MIN_QUERY, min(seconds, self.left()))

    def __repr__(self) -> str:
        return f"Deadline(left={self.left():.3f}s)" if math.isfinite(self._at) else "Deadline(never)"


_phase = "the command"
"""The phase named by the latest :meth:`Deadline.check` (what :func:`enforced` reports when it cuts)."""

ALARM_GRACE = 0.5
"""Seconds after the deadline at which :func:`enforced` interrupts a step that has no check of its own."""


class _Alarm(BaseException):
    """Raised by SIGALRM inside :func:`enforced` (a BaseException: no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def enforced(deadline: "Deadline") -> Iterator[None]:
    """Stop the block at ``deadline`` + :data:`ALARM_GRACE` wherever it is (the CLI's backstop).

    The phases check the deadline between steps themselves; a long step with no
    check of its own (lowering a very large body, drawing a
    timeline) is interrupted by SIGALRM and :class:`TimeUp` names the phase the
    last check named (as is any error not synth's own raised once the alarm rang: native code may have
    caught the alarm's exception and raised its own). Main thread only (elsewhere, or without SIGALRM, a no-op);
    for command-line use, not for library calls that may run in threads.
    """
    if not math.isfinite(deadline.at) or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    rang = False

    def ring(signum, frame):
        nonlocal rang
        if _shield:  # moving a finished folder into place: let it complete (it is done, not cut)
            return
        rang = True
        raise _Alarm()

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline.left() + ALARM_GRACE))
    _enforcing.set()
    try:
        yield
    except _Alarm:
        raise TimeUp(_phase, deadline.limit) from None
    except Exception as e:
        # native code that caught the alarm's exception may raise its own instead (matplotlib's path code:
        # "Invalid affine transformation matrix"): once the alarm rang, an error not synth's own is the time limit
        if rang and not isinstance(e, SynthError):
            raise TimeUp(_phase, deadline.limit) from None
        raise
    finally:
        _enforcing.clear()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_shield = 0


@contextlib.contextmanager
def finishing() -> Iterator[None]:
    """A block the deadline's alarm does not cut (moving a complete folder into place: it either
    happens whole or the folder stays aside and is removed). Ctrl-C still interrupts it."""
    global _shield
    if _interrupted.is_set():
        raise KeyboardInterrupt  # never move a folder into place after a Ctrl-C (see Deadline.check)
    _shield += 1
    try:
        yield
    finally:
        _shield -= 1


NEVER = Deadline(math.inf)
"""A deadline that never passes (library calls without a limit)."""


def as_deadline(value: Union["Deadline", float, None], time_limit: Optional[float] = None) -> Deadline:
    """A :class:`Deadline` from a Deadline, a monotonic instant, or (when None) ``time_limit`` seconds from now."""
    if isinstance(value, Deadline):
        return value
    if value is not None:
        return Deadline(float(value), time_limit)
    if time_limit is None:
        return NEVER
    return Deadline.after(time_limit)


# ---------------------------------------------------------------------------------------- Ctrl-C

_lock = threading.Lock()
_stoppers: dict[int, Callable[[], None]] = {}
_next = 0
_interrupted = threading.Event()
_enforcing = threading.Event()
"""Set while :func:`enforced` has an alarm armed (the watcher then stops native calls on SIGALRM too)."""
_installed = False
_sockets: list[socket.socket] = []


def interrupted() -> bool:
    """True once SIGINT arrived while :func:`install_interrupt` was active."""
    return _interrupted.is_set()


@contextlib.contextmanager
def stoppable(stop: Callable[[], None]) -> Iterator[None]:
    """Register ``stop`` (e.g. a CP-SAT solver's ``stop_search``) for the duration of a native call.

    When SIGINT arrives meanwhile, the watcher thread calls it; ``stop`` must be
    safe to call from another thread. After the block, a pending
    ``KeyboardInterrupt`` is raised by Python as usual.
    """
    global _next
    with _lock:
        key = _next
        _next += 1
        _stoppers[key] = stop
    try:
        if _interrupted.is_set():
            _call(stop)
        yield
    finally:
        with _lock:
            _stoppers.pop(key, None)


def _call(stop: Callable[[], None]) -> None:
    try:
        stop()
    except Exception:  # a solver already finished: nothing to stop
        pass


def _stop_all() -> None:
    _interrupted.set()
    _stop_native()


def _stop_native() -> None:
    with _lock:
        stops = list(_stoppers.values())
    for s in stops:
        _call(s)
    try:
        # z3 may be absent (a stock GPU image), and the light runtime (synth.kernel) imports this module
        import z3

        z3.main_ctx().interrupt()
    except Exception:
        pass


def _watch(sock: socket.socket) -> None:
    while True:
        try:
            data = sock.recv(256)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            _stop_all()
        elif _enforcing.is_set() and hasattr(signal, "SIGALRM") and signal.SIGALRM in data:
            _stop_native()  # the deadline's alarm: a native call returns, then Python raises


def _on_sigint(signum, frame) -> None:
    """Python's SIGINT handler while :func:`install_interrupt` is active: note the Ctrl-C, then raise
    ``KeyboardInterrupt`` as Python's default handler does. The flag is set here, in the main thread, before the
    exception exists, so whatever exception the interrupt turns into (ctypes wraps it in ``ArgumentError``
    inside a Z3 call) the CLI can tell it was the Ctrl-C; the watcher thread sets it too, for native code."""
    _interrupted.set()
    raise KeyboardInterrupt


def _quiet_interrupt(previous):
    """An unraisable hook that drops a ``KeyboardInterrupt`` raised inside a ``__del__`` (Z3's terms and solvers
    have one) without printing a traceback: the Ctrl-C is already noted and ends the command at its next
    phase; any other unraisable exception goes to ``previous``."""
    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _interrupted.is_set():
            return
        previous(unraisable)
    return hook


def install_interrupt() -> None:
    """Make Ctrl-C stop the command promptly (see the module docstring); main thread only, idempotent.

    Switches off Z3's and CP-SAT's own SIGINT handling (CP-SAT's per solver:
    :func:`cp_sat_parameters`), installs a handler that notes the Ctrl-C and raises ``KeyboardInterrupt``, and starts
    the watcher thread.
    """
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        # z3 may be absent (a stock GPU image), and the light runtime (synth.kernel) imports this module
        import z3

        z3.set_param("ctrl_c", False)
    except Exception:
        pass
    signal.signal(signal.SIGINT, _on_sigint)
    sys.unraisablehook = _quiet_interrupt(sys.unraisablehook)
    r, w = socket.socketpair()
    w.setblocking(False)
    _sockets.extend((r, w))  # kept open for the life of the process (the wakeup fd must stay valid)
    signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(r,), name="synth-sigint", daemon=True).start()
    _installed = True


def ignore_sigint() -> None:
    """A worker process's initializer: ignore SIGINT (the parent stops its workers on Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def restore_sigint() -> None:
    """Put Python's SIGINT handler back if a native library replaced it (a no-op otherwise)."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is not _on_sigint and _installed:
        signal.signal(signal.SIGINT, _on_sigint)


def cp_sat_parameters(solver) -> None:
    """Switch off CP-SAT's own SIGINT catching on ``solver`` (it would swallow Ctrl-C)."""
    try:
        solver.parameters.catch_sigint_signal = False
    except (AttributeError, ValueError):
        pass


def solve_cp_sat(solver, model, callback=None):
    """``solver.Solve(model)`` that Ctrl-C stops at once (``stop_search`` from the watcher); returns the status."""
    cp_sat_parameters(solver)
    stop = getattr(solver, "stop_search", None) or getattr(solver, "StopSearch")
    with stoppable(stop):
        try:
            status = solver.Solve(model, callback) if callback is not None else solver.Solve(model)
        finally:
            restore_sigint()
    return status


__all__ = ["Deadline", "TimeUp", "NEVER", "MIN_QUERY", "ALARM_GRACE", "as_deadline", "enforced", "finishing", "install_interrupt", "interrupted",
           "stoppable", "restore_sigint", "ignore_sigint", "cp_sat_parameters", "solve_cp_sat"]

"""Phases as data: a flow is a tuple of :class:`Phase` records, and :func:`run_phases` is the one runner.

A phase reads the flow's state (a namespace holding the problem, the options and what earlier phases computed),
computes one value and stores it under its ``key``. The runner owns what every phase shares:

* the deadline: before each timed phase and after it, :meth:`synth.deadline.Deadline.check` names the phase
  (:class:`~synth.deadline.TimeUp` once the command's time is up; a Ctrl-C that Python dropped stops the flow
  there too);
* the timing: each timed phase's wall seconds, in the order run (``Result.phases``);
* the progress output: ``progress(name, 0, 1)`` before, ``progress(name, 1, 1)`` after;
* the outcomes: one :class:`PhaseOutcome` per phase run, the flow's record of what it did, from which
  ``verify.txt`` is written (:func:`verify_text`: each proof phase says its own paragraph).

A phase runs only when its ``when`` holds for the state: a design variant (ping-pong consumers, a TMA-store
epilogue) adds its own proof phases to the flow's tuple, each saying when it applies, rather than an ``if``
in the flow. A step that is a derivation rather than a phase (the kernel's configuration, the output
folder's ``problem.yaml``) is a phase with ``timed=False``: run in its place, with no deadline check, no
timing and no progress.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..deadline import Deadline
from ..errors import Loc


def always(state) -> bool:
    return True


@dataclass(frozen=True)
class Phase:
    """One step of a flow."""

    name: str
    """What progress, the timing and a :class:`~synth.deadline.TimeUp` call it."""
    run: Callable[[Any], Any]
    """The step: ``run(state)`` -> its value (it may also set attributes of ``state``)."""
    key: Optional[str] = None
    """The state attribute the value is stored under (None: not stored)."""
    when: Callable[[Any], bool] = always
    """Whether the phase applies to this state."""
    timed: bool = True
    """False: a derivation run in its place, without deadline checks, timing or progress."""
    verify_txt: Optional[Callable[[Any], str]] = None
    """A proof phase's paragraph of ``verify.txt``, from the flow's result (:func:`verify_text`)."""


@dataclass(frozen=True)
class PhaseOutcome:
    """What one phase did: the phase, its wall seconds (None for an untimed one) and its value."""

    phase: Phase
    seconds: Optional[float]
    value: Any

    @property
    def name(self) -> str:
        return self.phase.name


def run_phases(phases, state, *, deadline: Deadline, progress: Optional[Callable[[str, int, int], None]] = None,
               loc: Optional[Loc] = None, name_done: bool = False) -> tuple[PhaseOutcome, ...]:
    """Run ``phases`` in order on ``state`` (module docstring) and return their outcomes. ``loc`` and
    ``name_done``: a :class:`~synth.deadline.TimeUp` names the problem's file and the phases already done."""
    say = progress or (lambda phase, done, total: None)
    outcomes: list[PhaseOutcome] = []

    def check(name: str) -> None:
        if name_done:
            done = ", ".join(f"{o.name} {o.seconds:.2f} s" for o in outcomes if o.seconds is not None) or "nothing"
            deadline.check(name, loc=loc, done=done)
        else:
            deadline.check(name)

    for ph in phases:
        if not ph.when(state):
            continue
        if not ph.timed:
            value = ph.run(state)
            seconds = None
        else:
            check(ph.name)
            t0 = time.monotonic()
            say(ph.name, 0, 1)
            value = ph.run(state)
            check(ph.name)  # a phase that ended past the deadline was cut
            seconds = time.monotonic() - t0
        if ph.key is not None:
            setattr(state, ph.key, value)
        outcomes.append(PhaseOutcome(ph, seconds, value))
        if seconds is not None:
            say(ph.name, 1, 1)
    return tuple(outcomes)


def timings(outcomes) -> tuple[tuple[str, float], ...]:
    """``(name, seconds)`` of each timed phase run, in order."""
    return tuple((o.name, o.seconds) for o in outcomes if o.seconds is not None)


def verify_text(result) -> str:
    """``verify.txt`` of a flow's result: the paragraph of each proof phase it ran, in order."""
    return "".join(o.phase.verify_txt(result) for o in result.outcomes if o.phase.verify_txt is not None)


__all__ = ["Phase", "PhaseOutcome", "run_phases", "timings", "verify_text", "always"]

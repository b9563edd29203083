"""Lowering: a :class:`~synth.schedule.Schedule` to the pipelined :class:`~synth.program.Program`.

Input: a validated problem, its dependence graph and a schedule (stage, order and
async queue of every op, slots of every buffer). Output: prologue / body /
epilogue with commit groups, waits, guards and slot indices, with the execution
semantics of :mod:`synth.program` (RFC 0077's notation). Pure: never modifies
its inputs.

Global step ``J`` runs over ``0 .. T + S - 1`` (``S`` = max stage); an op of
stage ``s`` works on original iteration ``J - s`` when ``0 <= J - s < T``. The
prologue is ``J = i`` (extent ``min(T, S)``), the body ``J = i + S`` (extent
``max(T - S, 0)``), the epilogue ``J = i + T`` (extent ``S``). Any trip count
``T >= 1`` is allowed, symbolic or not: a loop shorter than the pipeline has no
body step, and guards in ``i`` and ``T`` keep every op inside its iterations.

Steps, one module each:

1. :mod:`.context` -- the parts, the structural guards, the commit groups and the
   memoised conditions every later step asks for (:class:`~.context.Context`).
2. :mod:`.groups` -- maximal runs of async ops of one queue and one stage, adjacent
   in the body order (split where an op needs a result of its own run); how
   predicated ops commit (``predicate_strategy``).
3. :mod:`.requirements` -- every group instance that must be complete before a
   statement runs: reads (and explicit deps) of async results (RAW), and slots an
   async reader may still be reading when a writer reuses them (WAR).
4. :mod:`.counts` -- per part, statement and queue: the number of groups
   committed after the awaited one (an exact sum of indicators), then the simplest
   expression in the part's ``i`` (and ``T``) equal to it (constant, affine,
   piecewise, ``min`` with an affine cap, or the exact sum); every candidate is
   checked with Z3 over the part's whole domain, every allowed ``T`` included.
5. :mod:`.implied` -- waits implied by others: by an earlier wait of the same
   step, and in the body by the previous steps' waits (RFC 0077's remark that
   ``wait(0, 3)`` is redundant after the previous iteration's ``wait(0, 2)``).
6. :mod:`.assemble` -- statements of each part.

Helpers: :mod:`.prover` (Z3) and :mod:`.exprs` (expression helpers,
:func:`pretty_condition`). Imports go one way: exprs <- prover, groups <- context
<- requirements <- counts <- implied <- assemble <- this module.

Left out on purpose: no dynamic in-flight counter for predicated producers (the
predicate strategies cover them, see ``docs/lowering.md``); no hoisting of a
stricter wait to an earlier statement (it would block earlier than needed); no
cross-step dropping in prologue and epilogue (their waits stay as RFC 0077
prints them, each consumer with its own count).
"""

from __future__ import annotations

from ..graph import Graph
from ..problem import Problem
from ..program import Program
from ..schedule import Schedule
from .assemble import assemble
from .context import Context
from .counts import initial_waits
from .exprs import pretty_condition
from .implied import drop_implied
from .requirements import requirements


STRATEGIES = ("auto", "always_commit", "naive")
"""``predicate_strategy`` values, see :func:`lower` and docs/lowering.md."""


def lower(problem: Problem, graph: Graph, schedule: Schedule, *,
          predicate_strategy: str = "auto") -> Program:
    """The pipelined program of ``schedule``, correct for every trip count the problem
    allows (``T >= min_trip_count >= 1``), loops shorter than the pipeline included.

    ``predicate_strategy`` says how a predicated async op (``when:``) keeps the
    queue accounting right:

    * ``"auto"``: an opaque predicate commits its group every iteration (empty when
      the op is off, CUTLASS's zero-fill idiom); a group whose ops all have affine
      predicates is committed only when one holds (as TVM does) and the counts
      count those commits exactly.
    * ``"always_commit"``: every group is committed every iteration.
    * ``"naive"``: groups of predicated ops commit only when a predicate holds, but
      the counts assume every group commits. Unsafe on purpose: it lets the
      verifier's tests show such a program refuted.

    Raises :class:`ValueError` for an unknown strategy and :class:`SynthError` for a
    schedule whose slots are too few or whose consumer needs an uncommitted group.
    """
    if predicate_strategy not in STRATEGIES:
        raise ValueError(f"predicate_strategy must be one of {STRATEGIES}, not {predicate_strategy!r}")
    if problem.loop.min_trip_count < 1:
        raise ValueError(f"min_trip_count must be at least 1, not {problem.loop.min_trip_count}")
    ctx = Context.make(problem, graph, schedule, predicate_strategy)
    reqs = requirements(ctx)
    waits = initial_waits(ctx, reqs)
    waits, dropped = drop_implied(ctx, waits)
    return assemble(ctx, waits, dropped)


__all__ = ["lower", "pretty_condition", "STRATEGIES"]

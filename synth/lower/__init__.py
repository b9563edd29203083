"""Lowering: a :class:`~synth.schedule.Schedule` to the pipelined :class:`~synth.program.Program`.

Input: a validated problem, its dependence graph and a schedule (stage, order and
async queue of every op, slots of every buffer). Output: prologue / body /
epilogue with commit groups, waits, guards and slot indices, with the execution
semantics of :mod:`synth.program` (RFC 0077's notation). Pure: never modifies
its inputs.

Global step ``J`` runs over ``0 .. T + S - 1`` (``S`` = max stage); an op of
stage ``s`` works on original iteration ``J - s`` when ``0 <= J - s < T``. The
prologue is ``J = i`` (extent ``S``), the body ``J = i + S`` (extent ``T - S``),
the epilogue ``J = i + T`` (extent ``S``).

Steps, one function each:

1. :func:`_check_trip_count` -- the pipeline needs ``min_trip_count >= S + 1``.
2. :func:`_commit_groups` -- maximal runs of async ops of one queue and one stage,
   adjacent in the body order (split where an op needs a result of its own run);
   how predicated ops commit (``predicate_strategy``).
3. :func:`_requirements` -- every group instance that must be complete before a
   statement runs: reads (and explicit deps) of async results (RAW), and slots an
   async reader may still be reading when a writer reuses them (WAR).
4. :func:`_wait_count` -- per part, statement and queue: the number of groups
   committed after the awaited one (an exact sum of indicators), then the simplest
   expression in the part's ``i`` equal to it (constant, affine, piecewise, or the
   exact sum); every candidate is checked with Z3 over the part's whole domain.
5. :func:`_drop_implied` -- waits implied by others: by an earlier wait of the same
   step, and in the body by the previous steps' waits (RFC 0077's remark that
   ``wait(0, 3)`` is redundant after the previous iteration's ``wait(0, 2)``).
6. :func:`_assemble` -- statements of each part.

Modules, in step order: :mod:`.context` (step 1, parts and the context),
:mod:`.groups` (step 2), :mod:`.requirements` (step 3), :mod:`.counts` (step 4),
:mod:`.implied` (step 5), :mod:`.assemble` (step 6), with :mod:`.prover` (Z3) and
:mod:`.exprs` (expression helpers, :func:`pretty_condition`).

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
from .exprs import pretty_condition
from .context import _check_trip_count, _Ctx
from .requirements import _requirements
from .counts import _initial_waits
from .implied import _drop_implied
from .assemble import _assemble


STRATEGIES = ("auto", "always_commit", "naive")
"""``predicate_strategy`` values, see :func:`lower` and docs/lowering.md."""


def lower(problem: Problem, graph: Graph, schedule: Schedule, *,
          predicate_strategy: str = "auto") -> Program:
    """The pipelined program of ``schedule``; raises :class:`SynthError` when the
    trip count may be smaller than the number of stages.

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
    """
    if predicate_strategy not in STRATEGIES:
        raise ValueError(f"predicate_strategy must be one of {STRATEGIES}, not {predicate_strategy!r}")
    _check_trip_count(problem, schedule)
    ctx = _Ctx.make(problem, graph, schedule, predicate_strategy)
    reqs = _requirements(ctx)
    waits = _initial_waits(ctx, reqs)
    waits, dropped = _drop_implied(ctx, waits)
    return _assemble(ctx, waits, dropped)


__all__ = ["lower", "pretty_condition", "STRATEGIES"]

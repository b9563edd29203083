"""``synth search gemm``: rank GEMM pipelines with constraints, an analytic model and exact schedule timings.

Input: a shape ``M x N x K``, a dtype and an arch. Output: a :class:`SearchResult`
— the best configurations (tile, warps, stages) with their predicted time, the
size of the space, how many points each constraint excluded, and where the
reference configurations of CUTLASS and Triton (synth/data/reference_configs.yaml)
rank. Nothing runs on a GPU unless ``--measure`` is given; with ``sass=N`` the N
best kernels are compiled (nvcc, no GPU) to read their instruction mix.

Phases, one module each (:func:`search_gemm` in ``tune.py`` runs them in order):

1. ``space.enumerate_space``: every point of BM, BN in {16..256}, BK in {16..128},
   warps in {1, 2, 4, 8}, stages in 1..11 (synth's pipeline depth, which is the
   number of shared slots for BK >= 32, as CUTLASS's ``kStages``; 10 = CUTLASS's
   deepest; 1 = no pipelining, for tiny K).
2. ``space.prune``: named constraints (:data:`CONSTRAINTS`) exclude illegal points
   before any evaluation, counting each exclusion under the first constraint it
   breaks; ``gemm.validate`` is the last constraint, so nothing it rejects is
   ever proposed.
3. ``space.split_points``: each legal point's split-K variants (``split_k`` in
   :data:`SPLIT_SPACE`, every split's loop at least ``stages`` k-tiles), which share
   its resources, schedule timing and SASS; each starts at a cheap lower bound of its
   estimate (``model.split_lower_bounds``) and is estimated when that bound could rank it;
   likewise each legal point's stream-K variant (``space.stream_k_points``: one wave of CTAs
   sharing all k-tiles, ``model.estimate_stream_k``, bound ``model.stream_k_lower_bound``).
4. ``model.estimate`` ranks every legal point cheaply: a performance model of
   what limits the GEMM (tensor cores and instruction issue per SM
   sub-partition, shared memory, L2 and DRAM traffic with the grid's
   rasterization, Little's law on the stages, barriers, waves, sustained
   clock, and for a split or stream-K the partial tiles' reduction through L2), with the
   instruction mix estimated from the tiling (``sassmix.estimated_mix``).
5. ``rank.Refiner``: best-first, the most promising points are scheduled and their
   k-tile interval replaces the bound (every point pins stages and order, so
   this is the exact least timing of that schedule, ``synth.sim.best_timing``;
   ``synth.model.solve`` for a free order; ``timing.py``). A solved estimate is
   never below the unsolved one, so once the ``top`` best are all solved they are
   the model's best (``complete``). Timings are cached per (arch, tile, warps,
   stages, trip count), so they are shared between shapes.
6. ``sassmix.sass_mix`` (optional): the best candidates are compiled and their
   instruction mix, read from the SASS main loop, replaces the estimate.
7. ``references.rank_references`` and ``explain``: where CUTLASS's and Triton's
   configurations rank, and why #1 wins.

On sm_90 the default main loop is Hopper's (``mainloop: tma_wgmma``): ``hopper`` (its space,
constraints and model: the pipeline model of :mod:`synth.model.hopper` per CTA, tensor cores at
the wgmma rate, L2/DRAM traffic, occupancy, waves) and ``hopper_search`` (ranking, reasons,
CUTLASS 3 references, split-K included) replace phases 1-7; ``mainloop="cp_async"`` keeps the phases above.

Around them: ``distribute`` (many shapes in processes or on Dask), ``shapes``
(CSV input), ``report`` (JSON and rich tables), ``results`` (the dataclasses),
``published`` (the published figures that bound and calibrate the model). Above
the search (docs/architecture.md): writing the best candidates' folders is the
flow's (:mod:`synth.flow.candidates`), measuring them on a GPU ``synth run``'s
(:func:`synth.run.measure`), and ``synth search gemm`` on the command line
:mod:`synth.cli_search`.

Determinism: the space, the constraints and the model are pure; ties are broken
by a fixed key; the pinned CUTLASS-like schedules (stages and order fixed by
``gemm.stage_pins`` / ``gemm.order_pins``; ``2 + 3 BK/16`` ops) are timed
exactly, with no time limit involved. Only ``elapsed_s`` and the cache counters differ
between runs (they are excluded from equality).

Left out on purpose: stream-K on the Hopper main loop (its kernel splits K with ``split_k``), epilogue fusion, non-f16 operands (``synth.gemm``
does not expand them yet). (The grid's rasterization is grouped, as the kernels'.)
"""

from __future__ import annotations

from .distribute import search_many
from .published import best_published, calibration_points
from .sassmix import InstructionMix, estimated_mix, sass_mix
from .references import REFERENCE_FILE, RefConfig, load_references, reference_points
from .report import print_result, search_result_to_json
from .results import Candidate, Measurement, Progress, ReferenceRank, SearchResult
from .shapes import read_shapes_csv
from .space import (BK_SPACE, BM_SPACE, BN_SPACE, CONSTRAINTS, SPLIT_CONSTRAINT, SPLIT_SPACE, STAGES_SPACE, T_REF,
                    WARPS_SPACE, Constraint, Context, Point, enumerate_space, is_legal, make_context, prune,
                    split_issue, split_points, stream_k_points)
from .timing import PER_SOLVE_LIMIT, clear_cache, time_now
from .tune import MAX_SOLVES, search_gemm
from .hopper import HOPPER_CONSTRAINTS, HopperEstimate, HopperPoint, enumerate_hopper_space, estimate_hopper, \
    prune_hopper
from .hopper_search import hopper_context, resolve_mainloop, search_hopper

__all__ = ["search_gemm", "search_many", "read_shapes_csv", "search_result_to_json", "SearchResult", "Candidate",
           "ReferenceRank", "Measurement", "Progress", "Point", "Context", "Constraint", "CONSTRAINTS",
           "enumerate_space", "prune", "is_legal", "make_context", "load_references", "reference_points",
           "RefConfig", "REFERENCE_FILE", "print_result", "clear_cache", "time_now", "BM_SPACE", "BN_SPACE", "BK_SPACE",
           "WARPS_SPACE", "STAGES_SPACE", "SPLIT_SPACE", "SPLIT_CONSTRAINT", "split_issue", "split_points", "stream_k_points", "T_REF", "MAX_SOLVES", "PER_SOLVE_LIMIT", "best_published",
           "calibration_points", "InstructionMix", "estimated_mix", "sass_mix", "search_hopper", "hopper_context",
           "resolve_mainloop", "HopperPoint", "HopperEstimate", "HOPPER_CONSTRAINTS", "enumerate_hopper_space",
           "prune_hopper", "estimate_hopper"]

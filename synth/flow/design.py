"""Choosing the Hopper kernel's design: persistent or not, cooperative or ping-pong, register or TMA-store
epilogue, one CTA or a thread-block cluster (docs/hopper_design.md).

A problem may leave any of ``persistent``, ``pingpong``, ``epilogue`` and ``cluster`` to synth by writing
``auto`` (:attr:`synth.hopper.problem.HopperGemm.auto`). :func:`choose_design` enumerates the designs its pins
allow (:func:`synth.hopper.design.candidate_designs`: ping-pong needs ``BM`` 64 and a persistent grid; the TMA-store epilogue
``N`` a multiple of 4; neither split-K; a ``2x1`` or ``1x2`` cluster, one CTA per tile or persistent, no
ping-pong or split-K, and a kernel the emitter builds), gives each its own CP-SAT pipeline choice (stages and
``K_PIPE_MMAS`` under its shared memory: staging slots and order barriers count) and its predicted time on
the problem's shape by the search's model (:func:`synth.search.hopper.estimate_hopper`: waves or a
persistent grid, the epilogue hidden by the other warp group's main loop or by the next tile's, the TMA
store's staging writes, the shared operand read once per cluster, a persistent grid of whole clusters walking
cluster-sized tile groups), and lets CP-SAT pick the one of least
predicted time (ties: the simpler design, fewer of persistent, ping-pong, TMA store, cluster). The answer is optimal for that model; the model's own error
(docs/search.md) is larger than the gaps between designs at many shapes, which ``schedule.json`` shows by
listing every candidate's prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from ..deadline import solve_cp_sat
from ..errors import SynthError
from ..hopper.design import candidate_designs, with_design
from ..hopper.kernel_design import KernelDesign
from ..hopper.problem import HopperGemm
from ..search.hopper import cluster_kernel_issue, estimate_hopper, point_of
from ..search.hopper_search import hopper_context


@dataclass(frozen=True)
class DesignChoice:
    """The chosen :class:`~synth.hopper.kernel_design.KernelDesign` (its ``stages`` and ``k_pipe_mmas`` as the problem
    pins them), each candidate's predicted microseconds (``label -> us``) and CP-SAT's status."""

    design: KernelDesign
    predicted_us: tuple[tuple[str, float], ...]
    status: str


def choose_design(g: HopperGemm, pipeline, *, time_limit: float = 10.0) -> DesignChoice:
    """The design of least predicted time among :func:`candidate_designs` (module docstring); ``pipeline(g,
    time_limit=)`` gives a design's CP-SAT pipeline choice (:func:`synth.flow.hopper.choose_pipeline`).
    SynthError when no candidate is legal or none has a pipeline that fits."""
    cands = candidate_designs(g)
    if not cands:
        raise SynthError(g.loc(g.auto[0] if g.auto else ""), "no design of the Hopper kernel fits these pins",
                         "remove a pin (persistent:, pingpong:, epilogue:, cluster:) or use tile BM: 64 for ping-pong")
    ctx = hopper_context(g.M, g.N, g.K, g.dtype, g.arch)  # the Hopper search's context: f16 or bf16 operands
    scored = []
    for d in cands:
        gd = with_design(g, d)
        try:
            ch = pipeline(gd, time_limit=max(0.5, time_limit / (2 * len(cands))))
        except SynthError:
            continue  # its shared memory leaves no stage: not a candidate
        chosen = gd.design.with_(stages=ch.stages, k_pipe_mmas=ch.k_pipe_mmas)
        if d.cluster != "1x1" and "cluster" in g.auto and cluster_kernel_issue(chosen):
            continue  # a cluster kernel the emitter does not build is never chosen
        p = point_of(chosen)
        scored.append((d, estimate_hopper(ctx, p).time_us))
    if not scored:
        raise SynthError(g.loc("stages"), "no design of the Hopper kernel has a pipeline that fits",
                         "use a smaller tile or raise target.shared_bytes")
    m = cp_model.CpModel()
    pick = [m.NewBoolVar(f"d{n}") for n in range(len(scored))]
    m.AddExactlyOne(pick)
    # nanoseconds first, then the simpler design
    m.Minimize(sum(x * (int(round(us * 1000)) * 4 + d.features) for x, (d, us) in zip(pick, scored)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.5, time_limit)
    solver.parameters.num_workers = 1
    st = solve_cp_sat(solver, m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise SynthError(g.loc(g.auto[0]), f"CP-SAT found no design ({solver.StatusName(st)})",
                         "pin persistent:, pingpong:, epilogue: and cluster:")
    d = next(d for x, (d, _) in zip(pick, scored) if solver.Value(x))
    return DesignChoice(d, tuple((dd.variant, round(us, 3)) for dd, us in scored), solver.StatusName(st))


__all__ = ["DesignChoice", "choose_design"]

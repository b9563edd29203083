"""The Hopper GEMM main loop's choices, by CP-SAT: stages, K_PIPE_MMAS and consumer warp groups.

Input: a :class:`~synth.gemm.GemmConfig` with ``arch: sm_90`` (tile ``BM x BN x BK``, dtype).
Output: a :class:`HopperChoice` and the :class:`~synth.hopper.loop.HopperLoop` to lower
(:func:`synth.lower.barriers.lower_hopper`): a TMA load per operand per k-tile (box bytes
``BM * BK`` and ``BN * BK`` elements; the K residue is zero-filled by TMA and still counts its
full box, so no load is predicated), a wgmma per k-tile, warp-specialized (one producer warp
group). The trip count is symbolic (``T = ceil(K / BK) >= 1``): one program for every K.

The model (docs/hopper.md, "Choosing the pipeline"): one Boolean per candidate
``(stages S, K_PIPE_MMAS K, consumers C)``, exactly one chosen, under the shared-memory limit
``S * (A box + B box) + 8 B per barrier * 2S <= smem_per_block`` (227 KiB on H100), minimizing
the predicted cycles of the k-tile loop for ``T`` tiles:

* ``mma`` = wgmma cycles of one k-tile = ``2 * BM * BN * BK / tensor flop per clk``, divided
  among nothing (the tensor cores are shared by the consumer warp groups);
* ``wait`` = the wgmma latency exposed per k-tile when ``K = 0`` (each wgmma is drained before
  its release): ``lat_wgmma = 4 * lat_mma`` cycles, else 0. It is not shared among the ``C``
  consumer warp groups: in the warp-specialized kernel every consumer reads every slot (or, ping-pong,
  one consumer takes the tile), so the cooperative warp groups wait on the same full barrier, issue
  the same k-tile and drain together; no other warp group's wgmma fills the drain (before the sm_90
  calibration, docs/search.md section 8, the model divided it by ``C``, and so preferred
  ``K_PIPE_MMAS = 0`` at 4 stages for 128x128, where CUTLASS keeps one wgmma group in flight);
* ``fill`` = TMA round trip = ``lat_global + box bytes / 64 B per clk + 2 * barrier`` where a
  barrier round trip is ``barrier_cycles``;
* loads in flight while a consumer computes: ``ahead = min(S - K - 1, T)`` (the consumer holds
  ``K + 1`` slots; there are ``T`` loads in all); per k-tile the loop needs
  ``max(mma + wait, fill / ahead)``, or ``mma + wait + fill`` when ``ahead = 0`` (no slot is free
  while the consumer computes, so nothing overlaps: one stage, or ``K = S - 1``);
* warp specialization (``ws``): a producer warp group issues the copies, so the consumer's
  k-tile carries no issue cost, but a refill waits for the consumer's release (two barrier
  round trips in ``fill``); one warp group (``C = 1``, :func:`synth.lower.barriers.lower_hopper_single`)
  issues ``arrive.expect_tx`` and the copies itself (``2 * barrier_cycles`` per k-tile) and
  refills after its own ``wait_group`` (one barrier round trip in ``fill``);
* total = ``fill + T * per-tile``; among equal totals less shared memory, then fewer consumer
  warp groups, then warp specialization;
* a cluster of ``n > 1`` CTAs (:func:`loop_cost`'s ``cluster``; docs/hopper_cluster.md): a slot is refilled
  only when the consumers of every CTA of the cluster have released it, the peer's release arriving remotely,
  so ``fill`` grows by one remote arrive (``ArchSpec.lat_remote_arrive``, an upper bound). The bytes landing in
  each CTA's slot are the whole tile either way (its own A box and both halves of the shared B tile, one of
  them multicast by the peer), so the transfer term is unchanged; the producer issues as many copies per
  k-tile as without a cluster (the shared operand's a half box with a CTA mask). What multicast saves, the L2
  reads of the shared operand, and what it does not, the bytes each SM receives through its L2 port
  (``ArchSpec.l2_ingress_bytes_per_clk_sm``), are throughput terms of the search's model
  (:func:`synth.search.hopper.round_terms_hopper`), not of one CTA's loop.

``C`` consumer warp groups split ``BM`` in ``m64`` slices: ``C`` must divide ``BM / 64``.
Every number is bounded: 1 <= S <= 16, 0 <= K < S, C in 1..2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
from ortools.sat.python import cp_model

from ..arch import get_arch
from ..deadline import solve_cp_sat
from ..gemm import GemmConfig
from ..hopper.cluster_shape import cluster_dims
from ..hopper.loop import DTYPE_BYTES, MAX_STAGES, HopperChoice, hopper_loop
from ..hopper.kernel_design import BARRIER_BYTES
from ..hopper.problem import HopperGemm


@dataclass(frozen=True)
class LoopCost:
    """The model's cycles of a k-tile loop: ``fill + T * per_tile``."""

    fill: int
    """One TMA round trip before the first k-tile can start (independent of ``T``)."""
    per_tile: int
    """Cycles per k-tile at this ``T`` (constant once ``T >= stages - k_pipe_mmas - 1``)."""
    T: int

    @property
    def cycles(self) -> int:
        return self.fill + self.T * self.per_tile


def loop_cost(cfg: GemmConfig, stages: int, k_pipe_mmas: int, consumers: int, T: int,
              warp_specialized: bool = True, cluster: int = 1) -> LoopCost:
    """The model's cost (module docstring) of one pipeline choice for ``T >= 1`` k-tiles of ``cfg``'s
    tile; the objective :func:`choose` minimizes. Shared memory is not checked here. ``cluster``: CTAs of the
    thread-block cluster (1 or 2; with 2 the refill waits for the peer's remote release, warp-specialized only)."""
    S, K, C, ws = stages, k_pipe_mmas, consumers, warp_specialized
    if cluster not in (1, 2) or (cluster > 1 and not ws):
        raise ValueError(f"cluster {cluster}: the kernel builds clusters of 1 or 2 warp-specialized CTAs")
    arch = get_arch(cfg.arch)
    b = DTYPE_BYTES[cfg.dtype]
    box = (cfg.BM + cfg.BN) * cfg.BK * b
    mma = -(-2 * cfg.BM * cfg.BN * cfg.BK // arch.tensor_f16_f32_flop_per_clk_sm)
    wait = 4 * arch.lat_mma if K == 0 else 0  # the cooperative warp groups drain together (module docstring)
    fill = arch.lat_global + box // arch.tma_bytes_per_clk + (2 if ws else 1) * arch.barrier_cycles
    if cluster > 1:  # the peer consumers' release of the slot arrives remotely before the refill
        fill += arch.lat_remote_arrive
    issue = 0 if ws else 2 * arch.barrier_cycles
    ahead = min(S - K - 1, T)
    # no slot free while a consumer computes: the next load starts only after the release
    per_tile = mma + wait + issue + fill if ahead <= 0 else max(mma + wait + issue, -(-fill // ahead))
    return LoopCost(fill, per_tile, T)


def choose(cfg: GemmConfig, *, time_limit: float = 10.0, stages: Optional[int] = None,
           k_pipe_mmas: Optional[int] = None, consumers: Optional[int] = None,
           warp_specialized: Optional[bool] = None, smem_limit: Optional[int] = None,
           reserve_bytes: int = 0, cluster: int = 1) -> HopperChoice:
    """The CP-SAT choice for ``cfg``; ValueError when nothing fits.

    ``stages``, ``k_pipe_mmas``, ``consumers`` and ``warp_specialized`` pin that choice (None: free);
    ``smem_limit`` replaces the arch's per-CTA limit and ``reserve_bytes`` is added to every
    candidate's shared memory (the kernel's alignment pad); ``cluster``: CTAs of the thread-block
    cluster, whose refill waits for the peer's remote release (:func:`loop_cost`). A design's whole
    input is :func:`synth.model.hopper.pipeline_input`, which ``synth solve`` and ``synth search`` share.
    """
    arch = get_arch(cfg.arch)
    limit = arch.smem_per_block if smem_limit is None else smem_limit
    if cfg.dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {cfg.dtype} has no TMA element size here")
    b = DTYPE_BYTES[cfg.dtype]
    stage_bytes = (cfg.BM + cfg.BN) * cfg.BK * b + BARRIER_BYTES  # the slots and their full/empty mbarriers
    T = max(cfg.split_trip_count, 1)  # one CTA's loop: one split's k-tiles
    m = cp_model.CpModel()
    cands = []
    for S in range(1, MAX_STAGES + 1):
        if stages is not None and S != stages:
            continue
        smem = S * stage_bytes + reserve_bytes
        if smem > limit:
            continue
        for K in range(S):
            if k_pipe_mmas is not None and K != k_pipe_mmas:
                continue
            for C in (1, 2):
                if consumers is not None and C != consumers:
                    continue
                for ws in (True, False):
                    if cfg.BM % (64 * C) or (not ws and C > 1) or (not ws and cluster > 1):
                        continue
                    if warp_specialized is not None and ws != warp_specialized:
                        continue
                    cands.append((S, K, C, smem, loop_cost(cfg, S, K, C, T, ws, cluster).cycles, ws))
    if not cands:
        raise ValueError(f"no pipeline fits: one stage needs {stage_bytes + reserve_bytes} B "
                         f"of the {limit} B a CTA may use on {arch.name} (with the pins given)")
    pick = [m.NewBoolVar(f"c{n}") for n in range(len(cands))]
    m.AddExactlyOne(pick)
    m.Add(sum(p * c[3] for p, c in zip(pick, cands)) <= limit)
    # lexicographic: cycles, then shared memory, then consumers (scaled so ties never overflow)
    scale_smem = 4
    scale_cyc = (limit + 1) * scale_smem
    m.Minimize(sum(p * (c[4] * scale_cyc * 2 + c[3] * scale_smem * 2 + c[2] * 2 + (0 if c[5] else 1))
                   for p, c in zip(pick, cands)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    st = solve_cp_sat(solver, m)  # Ctrl-C stops it and reaches Python (synth.deadline)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise ValueError(f"CP-SAT found no pipeline ({solver.StatusName(st)})")
    S, K, C, smem, cyc, ws = next(c for p, c in zip(pick, cands) if solver.Value(p))
    return HopperChoice(S, K, C, cyc, smem, solver.StatusName(st), ws)


@dataclass(frozen=True)
class PipelineInput:
    """What the Hopper pipeline model (:func:`choose`, :func:`loop_cost`)
    reads of one design of a problem: the one input ``synth solve`` (:func:`synth.flow.hopper.choose_pipeline`)
    and ``synth search`` (:func:`synth.search.hopper.point_input`) both price, so a design gets the same stages,
    ``K_PIPE_MMAS`` and k-loop cycles from either (:func:`pipeline_input`)."""

    cfg: object
    """The :class:`~synth.gemm.GemmConfig` view: tile, dtype, arch, ``K`` and ``split_k`` (one CTA's loop runs
    ``cfg.split_trip_count`` k-tiles)."""
    consumers: int
    """Consumer warp groups reading each slot (:attr:`HopperGemm.ring_consumers`: 1 for ping-pong, else
    ``BM / 64``)."""
    cluster: int = 1
    """CTAs of the thread-block cluster (a refill waits for the peer's remote release)."""
    reserve_bytes: int = 0
    """Shared memory outside the ring: the alignment pad, the TMA-store staging slots, ping-pong's order barriers."""
    smem_limit: int = 0
    """Shared memory the kernel may use (``target.shared_bytes`` or 227 KiB)."""

    @property
    def trip_count(self) -> int:
        """k-tiles of one CTA's loop (one split's)."""
        return max(self.cfg.split_trip_count, 1)

    def choose(self, *, time_limit: float = 10.0, stages: Optional[int] = None,
               k_pipe_mmas: Optional[int] = None):
        """CP-SAT's :class:`~synth.hopper.loop.HopperChoice` for this input (``stages`` / ``k_pipe_mmas``: pins);
        ValueError when nothing fits."""
        return choose(self.cfg, time_limit=time_limit, stages=stages, k_pipe_mmas=k_pipe_mmas,
                      consumers=self.consumers, warp_specialized=True, smem_limit=self.smem_limit,
                      reserve_bytes=self.reserve_bytes, cluster=self.cluster)

    def cost(self, stages: int, k_pipe_mmas: int):
        """The :class:`LoopCost` of one pinned choice at :attr:`trip_count` (the objective
        :meth:`choose` minimizes)."""
        return loop_cost(self.cfg, stages, k_pipe_mmas, self.consumers, self.trip_count, warp_specialized=True,
                         cluster=self.cluster)


def pipeline_input(g: HopperGemm) -> PipelineInput:
    """The pipeline model's input for ``g`` as designed (tile, dtype, K and split, the consumers reading a slot, the
    cluster, the shared memory its staging slots, order barriers and pad take from the ring, the limit). Before
    this function ``synth solve`` priced a cluster design as one CTA (the refill's remote release left out: 64x128
    at K 1024 got 7 stages where the cluster kernel's own model wants 8) and the search priced a design's variants
    at the one-CTA point's stages; both now read this."""
    cfg = GemmConfig(g.M, g.N, g.K, g.dtype, g.BM, g.BN, g.BK, g.warps, g.stages, g.arch, g.name, g.split_k)
    m, n = cluster_dims(g.cluster)
    return PipelineInput(cfg, g.ring_consumers, m * n, g.at(1).fixed_smem_bytes(),
                         g.shared_limit)


__all__ = ["choose", "hopper_loop", "loop_cost", "HopperChoice", "LoopCost", "DTYPE_BYTES",
           "PipelineInput", "pipeline_input"]

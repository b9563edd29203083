"""The analytic performance model behind ``synth search gemm`` (see docs/search.md, section 3).

Input: an :class:`~synth.arch.ArchSpec`, a GEMM shape and one configuration
(tile, warps, stages), plus optionally the solver's timing of the k-tile loop.
Output: an :class:`Estimate` — predicted kernel time and every term it came from.

The model, per CTA and per SM (cycles at the SM boost clock):

* **k-tile interval** ``ii``: from the expanded problem (:func:`synth.gemm.expand_gemm`)
  a lower bound (:func:`problem_bounds`: unit issue sums, the accumulator
  recurrence, latency over the pinned stage distance), replaced by the timing of
  the configuration's pinned schedule once it is scheduled (``timing.ii``; never
  below the bound, so refining only ever raises a prediction).
* **co-resident CTAs** ``r`` (occupancy: shared memory, registers, threads, CTA
  slots) share the SM: ``k`` of them advance one k-tile each per round of
  ``max(k x tensor / busy sub-partitions, k x shared-port, k x L2->SM)`` cycles.
* **one wave** = ``max((T - 1) ii + tail, T rounds + one k-tile's pipeline
  latency)`` + the epilogue (C store): the CTA's own scheduled loop or the shared
  resources, whichever is slower.
* **waves**: ``ceil(CTAs / (SMs x r))``; the last, partial wave runs with fewer
  CTAs per SM (wave quantization).
* **kernel** = ``max(sum of waves, DRAM roofline) + launch overhead``; DRAM bytes
  are the compulsory ones (A and B read once, C written once).

Left out on purpose (and said so in docs/search.md): L2 hit rates and CTA
rasterization (perfect L2 reuse is assumed), shared-memory bank conflicts,
instruction issue limits other than the units the problem models, clock
throttling and power limits, split-K, and the tensor-core rate wgmma reaches on
sm_90 (kernels here use mma.sync).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..arch import ArchSpec

# ---------------------------------------------------------------------------
# machine facts the model needs beyond synth.arch (per SM, cycles at boost clock)


@dataclass(frozen=True)
class ModelExtra:
    """Figures the analytic model needs that :mod:`synth.arch` does not carry."""

    l2_bytes_per_clk_sm: float
    """Sustained L2 -> SM bandwidth per SM (measured aggregate / SMs / clock)."""
    mma_sync_efficiency: float
    """Fraction of ``tensor_f16_f32_flop_per_clk_sm`` that mma.sync reaches."""
    launch_us: float
    """Kernel launch + grid drain overhead."""


EXTRA: dict[str, ModelExtra] = {
    # A100: ~5 TB/s measured L2 read bandwidth (Chips and Cheese; NVIDIA quotes 2.3x V100).
    "sm_80": ModelExtra(l2_bytes_per_clk_sm=32.0, mma_sync_efficiency=1.0, launch_us=3.0),
    # RTX 3090: ~2 TB/s L2.
    "sm_86": ModelExtra(l2_bytes_per_clk_sm=16.0, mma_sync_efficiency=1.0, launch_us=3.0),
    # RTX 4090: ~5 TB/s L2.
    "sm_89": ModelExtra(l2_bytes_per_clk_sm=16.0, mma_sync_efficiency=1.0, launch_us=3.0),
    # H100 SXM: ~7 TB/s L2; mma.sync reaches about 2/3 of the wgmma peak (synth.arch note).
    "sm_90": ModelExtra(l2_bytes_per_clk_sm=32.0, mma_sync_efficiency=2.0 / 3.0, launch_us=3.0),
}
DEFAULT_EXTRA = ModelExtra(l2_bytes_per_clk_sm=16.0, mma_sync_efficiency=1.0, launch_us=3.0)
SMEM_RESERVED_PER_CTA = 1024
"""Shared memory the system reserves per resident CTA (sm_80 and later)."""
REG_ALLOC_UNIT = 256
"""Registers are allocated per warp in units of 256 (8 per thread)."""
OUT_BYTES = 2
"""C is written as f16."""


def extra_of(arch: ArchSpec) -> ModelExtra:
    """The model's extra machine figures for ``arch`` (:data:`DEFAULT_EXTRA` when it has none)."""
    return EXTRA.get(arch.name, DEFAULT_EXTRA)


# ---------------------------------------------------------------------------
# per-configuration resources


@dataclass(frozen=True)
class Resources:
    """What one CTA of a configuration uses and does per k-tile (shape independent)."""

    threads: int
    smem_bytes: int
    """All shared slots of A and B (multiplicity x tile bytes)."""
    smem_slots: int
    regs_per_thread: int
    tile_bytes: int
    """A + B bytes loaded per k-tile (global -> shared)."""
    smem_port_cycles: int
    """Shared-memory port cycles per k-tile (cp.async writes + ldmatrix reads)."""
    tensor_cycles: int
    """mma cycles per k-tile with the whole SM's tensor cores (4 sub-partitions)."""
    ii_bound: int
    """Lower bound of the k-tile interval of one CTA alone (see :func:`problem_bounds`)."""
    tail_bound: int
    """Lower bound of one k-tile's latency through the pipeline (load -> ldmatrix -> mma)."""
    tail_terms: tuple[tuple[int, int], ...] = ()
    """``(s_a, c_a)`` per op: ``tail >= s_a ii + c_a`` (see :func:`problem_bounds`)."""

    def tail_at(self, ii: int) -> int:
        """Lower bound of the schedule's tail at interval ``ii`` (monotone in ``ii``)."""
        return max([self.tail_bound] + [s * ii + c for s, c in self.tail_terms])


def problem_bounds(problem, stage: tuple[int, ...]) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    """``(ii_lb, path_lb, tail_terms)`` of a problem whose stages are pinned to ``stage``.

    The solver's timing (docs/latency_model.md): op ``a`` of iteration ``v`` issues
    at ``(v + s_a) ii + t_a`` with ``0 <= t_a <= ii - issue_a``; an edge ``a -> b``
    of latency ``L`` and distance ``d`` needs ``(s_b + d - s_a) ii + t_b >= t_a + L``.

    * each unit: ``ii >= sum(issue of its ops) / count``;
    * each edge with ``D = s_b + d - s_a``: self-loops ``D ii >= L``, others
      ``(D + 1) ii >= L + issue_b`` (``t_a >= 0``, ``t_b <= ii - issue_b``);
    * same-step predecessors of ``b`` on one unit of count 1 issue one after the
      other, so the last of a set ``P`` is done at ``>= sum issue(P) - issue(x) + L(x)``
      for some ``x``: that bounds ``t_b`` from below (``tmin_b``) and ``ii >= tmin_b + issue_b``;
    * ``cycles = (T - 1) ii + tail`` with ``tail >= s_a ii + tmin_a + L_a`` for every
      op (``tail_terms`` = ``(s_a, tmin_a + L_a)``) and ``>=`` the longest distance-0
      latency path (``path_lb``).
    """
    from ..graph import build_graph

    graph = build_graph(problem)
    edges = graph.constraints()
    ops = problem.ops
    n = len(ops)
    lb = 1
    for u in problem.target.units:
        busy = sum(o.issue for o in ops if o.unit == u.name)
        lb = max(lb, math.ceil(busy / u.count), max((o.issue for o in ops if o.unit == u.name), default=1))
    same_step: list[dict[str, dict[int, int]]] = [{} for _ in range(n)]
    for e in edges:
        d = stage[e.dst] + e.distance - stage[e.src]
        if e.src == e.dst:
            if d > 0:
                lb = max(lb, math.ceil(e.latency / d))
            continue
        if d >= 0:
            lb = max(lb, math.ceil((e.latency + ops[e.dst].issue) / (d + 1)))
        if d == 0:
            preds = same_step[e.dst].setdefault(ops[e.src].unit, {})
            preds[e.src] = max(preds.get(e.src, 0), e.latency)
    serial = {u.name: u.count == 1 for u in problem.target.units}
    tmin = [0] * n
    for _ in range(n):  # same-step chains (a DAG over distance-0, same-stage edges), to a fixpoint
        changed = False
        for b in range(n):
            best = tmin[b]
            for unit, preds in same_step[b].items():
                if serial[unit]:
                    total = sum(ops[a].issue for a in preds)
                    best = max(best, min(max(total - ops[a].issue, tmin[a]) + lat for a, lat in preds.items()))
                else:
                    best = max(best, max(tmin[a] + lat for a, lat in preds.items()))
            if best > tmin[b]:
                tmin[b] = best
                changed = True
        if not changed:
            break
    for b in range(n):
        lb = max(lb, tmin[b] + ops[b].issue)
    longest = [ops[i].latency for i in range(n)]
    zero = sorted((e for e in edges if e.distance == 0 and e.src < e.dst), key=lambda e: e.dst)
    for e in zero:
        longest[e.dst] = max(longest[e.dst], longest[e.src] + ops[e.dst].latency)
    terms = tuple((stage[a], tmin[a] + ops[a].latency) for a in range(n))
    return lb, max(longest), terms


def resources(cfg, arch: ArchSpec) -> Resources:
    """Resources of a valid configuration (``gemm.validate(cfg) == []``, ``cfg.stages`` set)."""
    from ..gemm import expand_gemm, register_estimate, smem_slots, stage_pins, tiling

    t = tiling(cfg)
    pins = stage_pins(cfg)
    slots = smem_slots(pins)
    regs = register_estimate(cfg)
    problem = expand_gemm(cfg)
    ii_lb, tail_lb, terms = problem_bounds(problem, pins)
    port = sum(o.issue for o in problem.ops if o.unit in ("cp_async", "lsu"))
    # the mma_kk issue cycles are for min(warps, 4) sub-partitions
    mma = sum(o.issue for o in problem.ops if o.unit == "tensor") * min(cfg.warps, 4) // 4
    return Resources(threads=cfg.threads, smem_bytes=slots * (t.a_bytes + t.b_bytes), smem_slots=slots,
                     regs_per_thread=regs, tile_bytes=t.a_bytes + t.b_bytes, smem_port_cycles=port,
                     tensor_cycles=max(mma, 1), ii_bound=ii_lb, tail_bound=tail_lb, tail_terms=terms)


def occupancy(arch: ArchSpec, res: Resources) -> tuple[int, str]:
    """CTAs per SM and what limits it (``smem`` | ``registers`` | ``threads`` | ``cta slots``)."""
    regs_warp = math.ceil(res.regs_per_thread * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    warps = res.threads // 32
    limits = [
        (arch.smem_per_sm // (res.smem_bytes + SMEM_RESERVED_PER_CTA), "smem"),
        (arch.registers_per_sm // (regs_warp * warps), "registers"),
        (arch.max_threads_per_sm // res.threads, "threads"),
        (arch.max_ctas_per_sm, "cta slots"),
    ]
    n, why = min(limits, key=lambda x: x[0])
    return n, why


# ---------------------------------------------------------------------------
# the estimate


@dataclass(frozen=True)
class Estimate:
    """The predicted time of one configuration on one shape, with every term."""

    time_us: float
    tflops: float
    ctas: int
    """Grid size: ceil(M/BM) x ceil(N/BN)."""
    ctas_per_sm: int
    occupancy_limit: str
    waves: int
    wave_efficiency: float
    """CTAs / (waves x SMs x CTAs per SM): 1.0 when the last wave is full."""
    k_tiles: int
    ii: int
    """k-tile interval of one CTA alone (solver's when solved, else the lower bound)."""
    round_cycles: int
    """Cycles for each of the ``active_ctas_per_sm`` co-resident CTAs to advance one k-tile
    (in a full wave; in the only wave when there is no full one)."""
    active_ctas_per_sm: int
    """CTAs per SM in that wave (``ctas_per_sm``, fewer in a lone partial wave)."""
    wave_cycles: int
    """Cycles of one wave at ``ctas_per_sm`` (main loop + fill/drain + epilogue)."""
    loop_cycles: int
    """Main-loop cycles summed over the waves."""
    fixed_cycles: int
    """Pipeline fill, drain and epilogue cycles summed over the waves."""
    compute_us: float
    """Sum over waves (the latency/throughput-bound part)."""
    dram_us: float
    bound: str
    """What dominates: tensor | latency | smem-port | l2 | dram."""
    padding: float
    """Fraction of the computed tile area outside M x N (wasted work)."""
    solved: bool


def estimate(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, BK: int, res: Resources, *,
             ii: Optional[int] = None, tail: Optional[int] = None) -> Estimate:
    """Predicted kernel time of a configuration with resources ``res`` on ``M x N x K``.

    ``ii``/``tail``: the solver's timing (``cycles = (T - 1) ii + tail``); the
    problem's lower bounds stand in for them when absent, and bound them from
    below when present, so a solved estimate is never faster than the unsolved one.
    """
    ex = extra_of(arch)
    solved = ii is not None
    ii_c = max(res.ii_bound, ii or 0)
    tail_c = max(res.tail_at(ii_c), tail or 0, ii_c)
    T = -(-K // BK)
    tm, tn = -(-M // BM), -(-N // BN)
    ctas = tm * tn
    r, limit = occupancy(arch, res)
    r = max(r, 1)
    per_wave = arch.sm_count * r
    full, rem = divmod(ctas, per_wave)
    tensor_sm = res.tensor_cycles / ex.mma_sync_efficiency
    warps = res.threads // 32
    l2 = res.tile_bytes / ex.l2_bytes_per_clk_sm
    epilogue = arch.lat_global + math.ceil(BM * BN * OUT_BYTES / arch.smem_bytes_per_clk)

    own_tensor = tensor_sm / (min(warps, 4) / 4)

    def shared_round(k: int) -> tuple[float, str]:
        # k CTAs on one SM share its 4 sub-partitions, its shared-memory port and its L2 bandwidth
        busy = min(4, k * warps) / 4
        terms = [(k * tensor_sm / busy, "tensor"), (float(k * res.smem_port_cycles), "smem-port"), (k * l2, "l2")]
        return max(terms, key=lambda x: x[0])

    def wave(k: int) -> tuple[float, float, str, float]:
        """(main-loop cycles, fixed cycles, bound, cycles per round) of a wave with k CTAs per SM.

        max(one CTA's own pipelined loop, (T - 1) ii + tail, and the shared
        resources' T rounds plus one k-tile's latency through the pipeline);
        both terms only grow with ii and tail, so refining never lowers it.
        The main loop is ``T`` rounds; the rest (fill, drain, epilogue) is fixed.
        """
        alone = (T - 1) * ii_c + tail_c
        rc, what = shared_round(k)
        shared = T * rc + res.tail_bound
        if alone >= shared:  # the CTA's own k-tile loop binds: name the unit behind its interval
            what = ("tensor" if ii_c <= 1.05 * own_tensor else
                    "smem-port" if ii_c <= 1.05 * res.smem_port_cycles else "latency")
        per_round = max(float(ii_c), rc)
        loop = T * per_round
        return loop, max(alone, shared) + epilogue - loop, what, per_round

    loop_cyc = fixed_cyc = 0.0
    bound, round_c, k_bind = "latency", float(ii_c), r
    if full:
        lw, fw, bound, round_c = wave(r)
        loop_cyc += full * lw
        fixed_cyc += full * fw
    if rem:
        k_last = -(-rem // arch.sm_count)
        lw, fw, what, rc_last = wave(k_last)
        loop_cyc += lw
        fixed_cyc += fw
        if not full:
            bound, round_c, k_bind = what, rc_last, k_last
    cyc = loop_cyc + fixed_cyc
    waves = full + (1 if rem else 0)
    clock_hz = arch.boost_clock_ghz * 1e9
    compute_us = cyc / clock_hz * 1e6
    dram_bytes = (M * K + N * K) * 2 + M * N * OUT_BYTES
    dram_us = dram_bytes / (arch.dram_gb_s * 1e9) * 1e6
    if dram_us > compute_us:
        bound = "dram"
    time_us = max(compute_us, dram_us) + ex.launch_us
    tflops = 2.0 * M * N * K / (time_us * 1e-6) / 1e12
    wl, wf, _, _ = wave(r)
    return Estimate(time_us=time_us, tflops=tflops, ctas=ctas, ctas_per_sm=r, occupancy_limit=limit,
                    waves=waves, wave_efficiency=ctas / (waves * per_wave), k_tiles=T, ii=ii_c,
                    round_cycles=int(round(round_c)), active_ctas_per_sm=k_bind, wave_cycles=int(round(wl + wf)),
                    loop_cycles=int(round(loop_cyc)), fixed_cycles=int(round(fixed_cyc)), compute_us=compute_us,
                    dram_us=dram_us, bound=bound, padding=1.0 - (M * N) / (tm * BM * tn * BN), solved=solved)


__all__ = ["ModelExtra", "EXTRA", "Resources", "Estimate", "resources", "occupancy", "estimate",
           "problem_bounds", "extra_of"]

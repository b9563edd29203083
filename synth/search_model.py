"""The analytic performance model behind ``synth search gemm`` (see docs/search.md).

Input: an :class:`~synth.arch.ArchSpec`, a GEMM shape and one configuration
(tile, warps, stages), plus optionally the solver's timing of the k-tile loop.
Output: an :class:`Estimate` — predicted kernel time and every term it came from.

The model, per CTA and per SM (cycles at the SM boost clock):

* **k-tile interval** ``ii``: from the expanded problem (:func:`synth.gemm.expand_gemm`)
  a lower bound (:func:`problem_bounds`: unit issue sums, the accumulator
  recurrence, latency over the pinned stage distance), replaced by the solver's
  ``schedule.timing.ii`` once the configuration is solved (never below the bound,
  so refining only ever raises a prediction).
* **co-resident CTAs** ``r`` (occupancy: shared memory, registers, threads, CTA
  slots) share the SM: a round in which each advances one k-tile takes
  ``max(ii, r x tensor, r x shared-port, r x L2->SM)`` cycles.
* **one wave** = ``T`` rounds + the pipeline fill/drain (``tail - ii`` of the
  schedule, ``cycles = (T - 1) ii + tail``) + the epilogue (C store).
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

from .arch import ArchSpec

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


def problem_bounds(problem, stage: tuple[int, ...]) -> tuple[int, int]:
    """``(ii_lb, tail_lb)`` of a problem whose stages are pinned to ``stage``.

    * each unit: ``ii >= sum(issue of its ops) / count``;
    * each dependence ``a -> b`` with latency ``L`` over ``D = s_b + distance - s_a``
      pipelined steps (offsets within a step lie in ``[0, ii)``):
      ``(D + 1) ii >= L + 1``; for a self-loop (the accumulator): ``D ii >= L``;
    * one iteration must finish: ``tail >=`` the longest zero-distance latency path.
    """
    from .graph import build_graph

    graph = build_graph(problem)
    lb = 1
    for u in problem.target.units:
        busy = sum(o.issue for o in problem.ops if o.unit == u.name)
        lb = max(lb, math.ceil(busy / u.count))
    for e in graph.constraints():
        lat = e.latency
        d = stage[e.dst] + e.distance - stage[e.src]
        if e.src == e.dst:
            if d > 0:
                lb = max(lb, math.ceil(lat / d))
        elif d >= 0:
            lb = max(lb, math.ceil((lat + 1) / (d + 1)))
    # longest path over zero-distance edges (program order is topological for them)
    n = len(problem.ops)
    longest = [problem.ops[i].latency for i in range(n)]
    for i in range(n):
        for e in graph.constraints():
            if e.dst == i and e.distance == 0 and e.src < i:
                longest[i] = max(longest[i], longest[e.src] + problem.ops[i].latency)
    return lb, max(longest)


def resources(cfg, arch: ArchSpec) -> Resources:
    """Resources of a valid configuration (``gemm.validate(cfg) == []``, ``cfg.stages`` set)."""
    from .gemm import expand_gemm, register_estimate, smem_slots, stage_pins, tiling

    t = tiling(cfg)
    pins = stage_pins(cfg)
    slots = smem_slots(pins)
    frag = 2 if pins[2] < pins[4] else 1
    regs = register_estimate(cfg, frag)
    problem = expand_gemm(cfg)
    ii_lb, tail_lb = problem_bounds(problem, pins)
    by = {o.name: o for o in problem.ops}
    port = sum(o.issue for o in problem.ops if o.unit in ("cp_async", "lsu"))
    mma = by["mma"].issue * min(cfg.warps, 4) // 4  # issue is for min(warps, 4) sub-partitions
    return Resources(threads=cfg.threads, smem_bytes=slots * (t.a_bytes + t.b_bytes), smem_slots=slots,
                     regs_per_thread=regs, tile_bytes=t.a_bytes + t.b_bytes, smem_port_cycles=port,
                     tensor_cycles=max(mma, 1), ii_bound=ii_lb, tail_bound=tail_lb)


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
    """Cycles for each of the r co-resident CTAs to advance one k-tile."""
    wave_cycles: int
    """Cycles of one full wave (main loop + fill/drain + epilogue)."""
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
    tail_c = max(res.tail_bound, tail or 0, ii_c)
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

    def round_of(k: int) -> tuple[float, str]:
        # k CTAs on one SM share its 4 sub-partitions, its shared-memory port and its L2 bandwidth
        busy = min(4, k * warps) / 4
        terms = [(float(ii_c), "ii"), (k * tensor_sm / busy, "tensor"),
                 (float(k * res.smem_port_cycles), "smem-port"), (k * l2, "l2")]
        val, what = max(terms, key=lambda x: x[0])
        if what == "ii":  # the CTA's own k-tile loop binds: name the unit behind its interval
            what = ("tensor" if ii_c <= 1.05 * own_tensor else
                    "smem-port" if ii_c <= 1.05 * res.smem_port_cycles else "latency")
        return val, what

    def wave(k: int) -> tuple[float, str]:
        rc, what = round_of(k)
        return T * rc + (tail_c - ii_c) + epilogue, what

    cyc = 0.0
    bound = "latency"
    if full:
        w, bound = wave(r)
        cyc += full * w
    if rem:
        k_last = -(-rem // arch.sm_count)
        w_last, what = wave(k_last)
        cyc += w_last
        if not full:
            bound = what
    waves = full + (1 if rem else 0)
    clock_hz = arch.boost_clock_ghz * 1e9
    compute_us = cyc / clock_hz * 1e6
    dram_bytes = (M * K + N * K) * 2 + M * N * OUT_BYTES
    dram_us = dram_bytes / (arch.dram_gb_s * 1e9) * 1e6
    if dram_us > compute_us:
        bound = "dram"
    time_us = max(compute_us, dram_us) + ex.launch_us
    tflops = 2.0 * M * N * K / (time_us * 1e-6) / 1e12
    wave_cycles = int(round(wave(r)[0]))
    return Estimate(time_us=time_us, tflops=tflops, ctas=ctas, ctas_per_sm=r, occupancy_limit=limit,
                    waves=waves, wave_efficiency=ctas / (waves * per_wave), k_tiles=T, ii=ii_c,
                    round_cycles=int(round(round_of(r)[0])), wave_cycles=wave_cycles, compute_us=compute_us,
                    dram_us=dram_us, bound=bound, padding=1.0 - (M * N) / (tm * BM * tn * BN), solved=solved)


__all__ = ["ModelExtra", "EXTRA", "Resources", "Estimate", "resources", "occupancy", "estimate",
           "problem_bounds", "extra_of"]

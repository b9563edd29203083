"""The performance model behind ``synth search gemm`` (docs/search.md, section 3, names each term's source).

Input: an :class:`~synth.arch.ArchSpec`, a GEMM shape, one configuration's
:class:`Resources` and optionally the schedule's timing (``ii``, ``tail``) and the
kernel's :class:`~synth.search.sassmix.InstructionMix` read from its SASS, and its K
split. Output: an :class:`Estimate`: predicted time and every term it came from (and
:func:`split_lower_bounds`, a cheap lower bound of it per split).

One **round** is each of the ``k`` CTAs resident on an SM advancing one k-tile.
Co-resident CTAs are modelled in **lockstep**: they start together, meet the same
barriers and compete for the same units, so one CTA's stall is not hidden by
another's (CUTLASS 3's "ping-pong" kernels need explicit ordered barriers to
stagger their consumers for exactly this reason). Per round, cycles at the
sustained clock:

* ``core``: the busiest sub-partition (SMSP) runs ``n = ceil(k warps / 4)`` warps,
  each needing ``solo`` cycles per k-tile: the in-order issue of its main-loop
  instructions with every HMMA holding the tensor core ``hmma_cycles`` (from the
  SASS when compiled, else ``max(HMMAs x hmma_cycles, instructions)``); this is
  the tensor-core and the instruction-issue limit in one term;
* ``smem``: ldmatrix reads and cp.async writes through the 128 B/clk shared port;
* ``l2``: the tile's bytes from L2 at the SM's share of the L2 bandwidth;
* ``dram``: the tile's L2 misses at the SM's share of sustained DRAM bandwidth;
* ``exposed``: what the pinned schedule cannot overlap (``ii - unit bound``) when
  ``S <= 2`` or one shared slot: the first ldmatrix after the wait, the load
  itself at ``S = 1``. For ``S >= 3`` the schedule's coarse ops (one op per k16
  slice of the whole CTA) overstate the dependences inside a k-tile; the SASS
  issue simulation in ``core`` and the boundary term account for them instead;
* ``barrier``: ``bar.sync`` per k-tile times ``barrier_cycles``;
* ``latency``: Little's law — each CTA has ``S - 2 + w`` k-tiles of copies in
  flight while it computes (``S`` shared slots, ``w`` the fraction of a k-tile's
  HMMAs issued after its copies), so ``round >= L / (S - 2 + w)`` with ``L`` the
  mean load latency at the L2 hit rate (two slots: the DRAM latency, because their
  only wait drains the queue and waits for the tile's slowest copy); one slot
  serializes: ``round = busy + barrier + max(exposed, L)``.

``round = |core, smem, l2, dram|_4 + exposed + barrier``, at least ``latency``
(the throughput limits overlap imperfectly: an L4 norm, :data:`OVERLAP_NORM`).
A wave runs ``T`` rounds plus the pipeline fill (one load latency and the
schedule's tail) and the epilogue; the last wave runs with fewer CTAs per SM;
the kernel adds the launch overhead, and is never below its DRAM roofline.
DRAM bytes follow the grid's grouped rasterization: A once, B once when it
stays in half the L2 between waves, else once per band; C once, as f32.

**Split-K** (``split_k = S > 1``, docs/search.md section 3, "Split-K"): the grid has
``S`` CTAs per tile, each running ``ceil(T / S)`` k-tiles at most (waves over
``tiles x S`` CTAs); after its loop each CTA counts its arrival (an atomic in L2);
every CTA but the tile's last to arrive writes its f32 partial tile to the
workspace through L2, fences and counts it; the last waits for those counts, reads
the ``S - 1`` partials and runs the epilogue (:func:`reduction`). When the written
partials do not fit the L2 left to them, each partial write evicts a dirty line of
an earlier one: that share of the writes runs at the DRAM rate, and its bytes count
in the DRAM roofline.

Left out on purpose (and said so in docs/search.md): latency growth under load
(queueing), bank conflicts (the kernel swizzles), register spills (ptxas'
count is reported, not modelled), stream-K, power throttling beyond the
sustained clock, and wgmma on sm_90 (kernels here use mma.sync).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..arch import REG_ALLOC_UNIT, SMEM_RESERVED_PER_CTA, ArchSpec
from ..emit.raster import GROUP_M
from ..emit.streamk import contributors, cta_range, grid_ctas
from ..gemm import expand_gemm, register_estimate, smem_slots, stage_pins, tiling
from ..graph import build_graph
from .sassmix import estimated_mix
from .space import Point
OUT_BYTES = 4
"""C is written as f32 (docs/cuda_kernel.md: ``C`` is ``float*``); the optional ``C_in`` is not read by a
``beta = 0`` call (the published harnesses' ``C = A B``), so it is not counted."""
PARTIAL_BYTES = 4
"""A split-K partial tile is f32: ``BM x BN x 4`` bytes per CTA (docs/cuda_kernel.md, "Split-K")."""
SPLIT_BARRIERS = 3
"""``__syncthreads()`` per CTA in the split-K hand-off besides the C staging's: two around the arrival flag,
one after the release fence or after the last CTA's wait (``synth.emit.splitk``)."""


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
    """Shared-memory port cycles per k-tile (cp.async writes + ldmatrix reads at 128 B/clk)."""
    tensor_cycles: int
    """mma cycles per k-tile with the whole SM's tensor cores (4 sub-partitions)."""
    ii_bound: int
    """Lower bound of the k-tile interval of one CTA alone (see :func:`problem_bounds`)."""
    tail_bound: int
    """Lower bound of one k-tile's latency through the pipeline (load -> ldmatrix -> mma)."""
    tail_terms: tuple[tuple[int, int], ...] = ()
    """``(s_a, c_a)`` per op: ``tail >= s_a ii + c_a`` (see :func:`problem_bounds`)."""
    unit_bound: int = 0
    """The units' share of ``ii_bound``: ``max over units of issue cycles / count``."""
    stages: int = 0
    """synth's pipeline depth (``max_stage + 1``)."""
    ldsm_bytes: int = 0
    """Shared bytes the CTA's ldmatrix read per k-tile (each warp reads its rows of A and B)."""
    mix: object = None
    """:class:`~synth.search.sassmix.InstructionMix` estimated from the tiling (no compile)."""

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
    t = tiling(cfg)
    pins = stage_pins(cfg)
    slots = smem_slots(pins)
    regs = register_estimate(cfg)
    problem = expand_gemm(cfg)
    ii_lb, tail_lb, terms = problem_bounds(problem, pins)
    unit_lb = 1
    for u in problem.target.units:
        busy = sum(o.issue for o in problem.ops if o.unit == u.name)
        unit_lb = max(unit_lb, math.ceil(busy / u.count))
    ldsm = cfg.warps * (t.WTM + t.WTN) * cfg.BK * 2
    copy = t.a_bytes + t.b_bytes
    mma = sum(o.issue for o in problem.ops if o.unit == "tensor") * min(cfg.warps, 4) // 4
    return Resources(threads=cfg.threads, smem_bytes=slots * copy, smem_slots=slots,
                     regs_per_thread=regs, tile_bytes=copy,
                     smem_port_cycles=math.ceil((ldsm + copy) / arch.smem_bytes_per_clk),
                     tensor_cycles=max(mma, 1), ii_bound=ii_lb, tail_bound=tail_lb, tail_terms=terms,
                     unit_bound=unit_lb, stages=cfg.stages or 0, ldsm_bytes=ldsm,
                     mix=estimated_mix(Point(cfg.BM, cfg.BN, cfg.BK, cfg.warps, cfg.stages)))


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
class Traffic:
    """Bytes a kernel moves, with the grid's grouped rasterization (:mod:`synth.emit.raster`)."""

    l2_bytes: int
    """L2 -> SM: every CTA loads its A rows and B columns for all k-tiles."""
    dram_bytes: int
    """DRAM reads of A and B (at least once each) plus the C writes."""
    l2_hit: float
    """1 - DRAM operand reads / L2 -> SM bytes."""
    b_passes: int
    """How many times B is read from DRAM (1 when it stays in L2 between waves)."""
    a_passes: float = 1.0
    """How many times A is read from DRAM on average (1 when a band's A rows stay in L2 while the band
    sweeps the columns)."""


def traffic(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, per_wave: int,
            group_m: int = GROUP_M) -> Traffic:
    """L2 and DRAM bytes of the grid ``ceil(M/BM) x ceil(N/BN)`` run ``per_wave`` CTAs at a time.

    Grouped rasterization (:mod:`synth.emit.raster`, as synth's kernels; ``group_m = 1`` is
    row-major): CTAs in launch order walk down bands of ``group_m`` tile rows, so a wave of
    ``P`` CTAs covers ``r = min(tm, max(group_m, ceil(P / tn)))`` tile rows and
    ``c = min(tn, ceil(P / r))`` tile columns. With the arch's ``l2_operand_fraction`` of the L2 for operands
    (:class:`~synth.arch.ArchSpec`):

    * B is read from DRAM once when all of it fits next to a wave's A rows; otherwise once per
      band of ``r`` rows (each band sweeps every column): ``ceil(tm / r)`` times;
    * A is read once when a band's A rows fit next to a wave's B columns (the band's next wave
      finds them), otherwise once per wave for the rows it covers.

    Each is at most what the CTAs load themselves (every CTA from DRAM).
    """
    tm, tn = -(-M // BM), -(-N // BN)
    ctas = tm * tn
    Kp = K * 2
    l2 = ctas * (BM + BN) * Kp
    P = min(per_wave, ctas)
    waves = -(-ctas // per_wave)
    r = min(tm, max(min(group_m, tm), -(-P // tn)))
    c = min(tn, -(-P // r))
    a_bytes, b_bytes = M * Kp, N * Kp
    room = arch.l2_operand_fraction * arch.l2_bytes
    if b_bytes + r * BM * Kp <= room:
        b_passes, b_read = 1, b_bytes
    else:
        b_passes = -(-tm // r)
        b_read = min(b_passes * b_bytes, ctas * BN * Kp)
    if r * BM * Kp + c * BN * Kp <= room or c >= tn:
        a_read = a_bytes
    else:
        a_read = min(waves * r * BM * Kp, ctas * BM * Kp)
    dram_ops = a_read + b_read
    return Traffic(l2_bytes=l2, dram_bytes=dram_ops + M * N * OUT_BYTES,
                   l2_hit=max(0.0, 1.0 - dram_ops / l2), b_passes=b_passes, a_passes=a_read / a_bytes)


@dataclass(frozen=True)
class WaveEstimate:
    """What every predicted time has, for either main loop: waves of co-resident CTAs, each
    advancing a k-tile per round (the explanations, :mod:`synth.search.explain`, read these)."""

    time_us: float
    tflops: float
    ctas: int
    """Grid size: ceil(M/BM) x ceil(N/BN) (times ``split_k`` for a split-K estimate)."""
    ctas_per_sm: int
    occupancy_limit: str
    waves: int
    wave_efficiency: float
    """CTAs / (waves x SMs x CTAs per SM): 1.0 when the last wave is full."""
    k_tiles: int
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
    """What dominates the round: tensor | issue | smem | l2 | dram | latency | exposed (or dram overall)."""
    padding: float
    """Fraction of the computed tile area outside M x N (wasted work)."""
    split_k: int = field(default=1, kw_only=True)
    """K splits: ``ctas`` is ``tiles x split_k`` (1: no split, no workspace)."""
    tiles: int = field(default=0, kw_only=True)
    """Output tiles: ceil(M/BM) x ceil(N/BN)."""
    split_k_tiles: int = field(default=0, kw_only=True)
    """k-tiles of the longest split, the loop every wave runs: ``ceil(k_tiles / split_k)``."""
    busiest_ctas: int = field(default=0, kw_only=True)
    """CTAs the busiest SM runs over the kernel: ``ceil(ctas / SMs)``."""
    reduction_cycles: int = field(default=0, kw_only=True)
    """Split-K only: cycles of the partial writes, the hand-offs and the partial reads, summed over the
    waves (the busiest SM's; included in ``fixed_cycles``)."""
    workspace_bytes: int = field(default=0, kw_only=True)
    """Split-K: the workspace to allocate, ``tiles x split_k x BM x BN x 4`` bytes; stream-K: ``2 G BM BN 4``."""
    stream_k: bool = field(default=False, kw_only=True)
    """Stream-K (docs/search.md section 3, "Stream-K"): ``ctas`` is the one wave's ``G`` CTAs sharing the
    ``tiles x k_tiles`` iterations, ``split_k_tiles`` the most k-tiles one CTA runs."""
    partial_tiles: int = field(default=0, kw_only=True)
    """Stream-K: tiles shared by two or more CTAs (summed from f32 partials); 0 otherwise."""
    segments: int = field(default=0, kw_only=True)
    """Stream-K: the most segments (tiles touched) of one CTA; 0 otherwise."""


@dataclass(frozen=True)
class Estimate(WaveEstimate):
    """The predicted time of one cp.async + mma.sync configuration on one shape, with every term."""

    ii: int
    """k-tile interval of one CTA alone (the schedule's when timed, else the lower bound)."""
    solved: bool
    terms: tuple[tuple[str, float], ...] = ()
    """Per-round cycles of each term (``core`` split into tensor and issue) in the binding wave."""
    l2_hit: float = 0.0
    latency_cycles: float = 0.0
    """Mean load latency at that hit rate (cycles)."""
    mix_source: str = "estimate"
    """Where the instruction mix came from: ``sass`` or ``estimate``."""
    round_exact: float = 0.0
    """``round_cycles`` before rounding (the explanations compare rates with it)."""
    instructions_per_hmma: float = 0.0


def round_terms(arch: ArchSpec, res: Resources, mix, k: int, ii: int, l2_hit: float) -> dict[str, float]:
    """Per-round cycles of every term for ``k`` co-resident CTAs (see the module docstring)."""
    warps = res.threads // 32
    n = -(-k * warps // 4)
    solo = mix.solo(arch.hmma_cycles, arch.issue_per_clk_smsp)
    tensor = n * mix.hmma * arch.hmma_cycles
    clock = arch.clock_ghz * 1e9
    l2_per_sm = arch.l2_bytes_per_clk / arch.sm_count
    dram_per_sm = arch.dram_gb_s * 1e9 * arch.dram_efficiency / clock / arch.sm_count
    L = l2_hit * arch.lat_l2 + (1.0 - l2_hit) * arch.lat_global
    core = n * solo
    bar = arch.barrier_cycles * mix.bar
    inflight = res.smem_slots - 2 + min(max(mix.copy_window, 0.05), 1.0)
    if res.smem_slots <= 1:
        latency = 0.0  # serial: added to the round in combine()
    elif res.smem_slots == 2:
        # the only wait a 2-slot pipeline allows drains the queue (wait_group 0): it waits for the
        # slowest copy of the tile, a DRAM access whenever any of them misses L2, not the mean
        latency = max(L, arch.lat_global if l2_hit < 1.0 else L) / inflight
    else:
        latency = L / inflight
    return {
        "tensor": tensor, "issue": core - tensor if core > tensor else 0.0, "core": core,
        "smem": k * (res.ldsm_bytes + res.tile_bytes) / arch.smem_bytes_per_clk,
        "l2": k * res.tile_bytes / l2_per_sm,
        "dram": k * res.tile_bytes * (1.0 - l2_hit) / dram_per_sm,
        "exposed": float(max(0, ii - res.unit_bound)) if min(res.smem_slots, res.stages) <= 2 else 0.0,
        "barrier": float(bar), "latency": latency, "L": L, "slots": float(res.smem_slots),
    }


OVERLAP_NORM = 4
"""The SM's concurrent throughput limits (core, shared port, L2, DRAM) overlap imperfectly: they are
combined as an L-p norm with this p (p = infinity would be a perfect overlap, their max; p = 1 none).
Two limits at 70 % of each other cost 5 % over their max, one alone costs nothing: an assumption of
this model, in the spirit of the partial-overlap ECM model (Hager, Treibig, Wellein)."""


def combine(t: dict[str, float]) -> tuple[float, str]:
    """``(round cycles, binding term)`` from :func:`round_terms`."""
    limits = (("tensor" if t["issue"] <= 0.05 * t["core"] else "issue", t["core"]),
              ("smem", t["smem"]), ("l2", t["l2"]), ("dram", t["dram"]))
    busy_name, top = max(limits, key=lambda x: x[1])
    busy = sum(v ** OVERLAP_NORM for _, v in limits) ** (1.0 / OVERLAP_NORM) if top > 0 else 0.0
    if t.get("slots", 2.0) <= 1:
        # one slot: each k-tile's copies are issued after its barrier and waited for before its
        # compute, so the load latency (or the schedule's longer chain) adds to the round
        wait = max(t["exposed"], t["L"])
        return busy + t["barrier"] + wait, ("latency" if wait > busy else busy_name)
    work = busy + t["exposed"] + t["barrier"]
    if t["latency"] > work:
        return t["latency"], "latency"
    if t["exposed"] > busy:
        return work, "exposed"
    return work, busy_name


def sum_waves(full: int, rem: int, sm_count: int, r: int, wave, idle_round: float):
    """``(loop cycles, fixed cycles, bound, round cycles, CTAs per SM, terms)`` of ``full`` waves at ``r``
    CTAs per SM and a last wave of ``rem`` CTAs spread over ``sm_count`` SMs (``ceil(rem / SMs)`` per SM);
    the bound, round, CTAs per SM and terms are the full waves', or the last wave's when there is no full
    one. ``wave(k)`` gives ``(main-loop cycles, fixed cycles, bound, round cycles, terms)`` of a wave with
    ``k`` CTAs per SM; ``idle_round`` stands for the round when there is no wave at all."""
    loop_cyc = fixed_cyc = 0.0
    bound, round_c, k_bind, terms = "latency", idle_round, r, {}
    if full:
        lw, fw, bound, round_c, terms = wave(r)
        loop_cyc += full * lw
        fixed_cyc += full * fw
    if rem:
        k_last = -(-rem // sm_count)
        lw, fw, what, rc_last, t_last = wave(k_last)
        loop_cyc += lw
        fixed_cyc += fw
        if not full:
            bound, round_c, k_bind, terms = what, rc_last, k_last, t_last
    return loop_cyc, fixed_cyc, bound, round_c, k_bind, terms


@functools.lru_cache(maxsize=4096)
def last_ctas(k: int, split_k: int, sms: int) -> int:
    """How many of the ``k`` co-resident CTAs of the busiest of ``sms`` SMs reduce their tile.

    Without a split every CTA stores its own tile (``k``). With ``S`` splits, the splits of a tile run
    on different SMs and finish together (lockstep), so each CTA draws its tile's last ticket with
    probability ``1 / S``: the result is the largest ``j`` for which at least one SM is expected to hold
    ``j`` or more last CTAs (``sms x P(Binomial(k, 1/S) >= j) >= 1``), at least 1.
    """
    if split_k <= 1:
        return k
    q = 1.0 / split_k
    pmf = [math.comb(k, i) * q ** i * (1 - q) ** (k - i) for i in range(k + 1)]
    best, tail = 1, 0.0
    for j in range(k, 0, -1):
        tail += pmf[j]
        if sms * tail >= 1.0:
            best = j
            break
    return best


def partial_cycles(arch: ArchSpec, BM: int, BN: int, count: float, spill: float = 0.0) -> float:
    """Cycles for one SM to move ``count`` f32 partial tiles (``BM BN 4`` bytes each) to or from the workspace:
    at the SM's share of the L2 bandwidth, the ``spill`` fraction (bytes past the L2 left to the workspace,
    :func:`workspace_spill`) at its share of the DRAM bandwidth."""
    l2_sm = arch.l2_bytes_per_clk / arch.sm_count
    dram_sm = arch.dram_gb_s * 1e9 * arch.dram_efficiency / (arch.clock_ghz * 1e9) / arch.sm_count
    return count * BM * BN * PARTIAL_BYTES * ((1.0 - spill) / l2_sm + spill / dram_sm)


def handoff_cycles(arch: ArchSpec, barriers: int = SPLIT_BARRIERS) -> float:
    """A partial tile's hand-off: the arrival ``atomicAdd`` (performed in L2, its value returned: one L2 latency),
    the release ``__threadfence()`` before the published count (one more) and ``barriers`` CTA barriers."""
    return 2.0 * arch.lat_l2 + barriers * arch.barrier_cycles


def fold_latency(arch: ArchSpec, read_spill: float = 0.0) -> float:
    """The latencies of a tile's last CTA summing partials: the acquire fence after its wait (one L2 latency) and
    one load latency for the partial loads in flight together (``read_spill`` of them from DRAM)."""
    return arch.lat_l2 + (1.0 - read_spill) * arch.lat_l2 + read_spill * arch.lat_global


def reduction(arch: ArchSpec, BM: int, BN: int, split_k: int, k: int, sms: int, write_spill: float = 0.0,
              read_spill: float = 0.0, barriers: int = SPLIT_BARRIERS) -> dict[str, float]:
    """Split-K cycles of a wave at ``k`` CTAs per SM after the main loop (docs/search.md, "Split-K").

    * ``write``: the busiest SM's CTAs that did not arrive last (``k - j``, ``j`` from :func:`last_ctas`:
      a CTA either stores its partial or, arriving last, loads the others) store their f32 partials
      (:func:`partial_cycles`, ``write_spill`` of them past the L2 left to the workspace);
    * ``handoff``: :func:`handoff_cycles` (three ``__syncthreads()`` on sm_80, docs/cuda_kernel.md,
      "Split-K"; the Hopper kernel's ``bar.red.or`` and named barrier: two);
    * ``read``: the busiest SM's last CTAs (:func:`last_ctas`) see the count, fence and read the other
      ``S - 1`` partials in the C store (:func:`fold_latency` and :func:`partial_cycles`; the kernel's loop
      over the splits is unrolled: their loads are in flight together); the f32 adds (``BM BN`` per partial
      at 64 lanes/clk/SM) hide under the reads.

    ``lasts``: the CTAs that then run the epilogue. Zero cycles (and ``lasts = k``) when ``split_k == 1``.
    """
    if split_k <= 1:
        return {"write": 0.0, "handoff": 0.0, "read": 0.0, "lasts": float(k)}
    j = last_ctas(k, split_k, sms)
    # a CTA either stores its partial (it did not arrive last) or loads the S - 1 others (it did): the busiest
    # SM holds the most last CTAs (j), the rest of its k store
    write = partial_cycles(arch, BM, BN, k - j, write_spill)
    read = fold_latency(arch, read_spill) + partial_cycles(arch, BM, BN, j * (split_k - 1), read_spill)
    return {"write": write, "handoff": handoff_cycles(arch, barriers), "read": read, "lasts": float(j)}


def spill(arch: ArchSpec, written: float, wave_written: float) -> tuple[float, float, int]:
    """``(write spill, read spill, extra DRAM bytes)`` of ``written`` bytes of f32 partials over a kernel, of
    which ``wave_written`` are written (and read back) within one wave.

    The operands keep the arch's ``l2_operand_fraction`` of the L2; the partials get the rest (``room``). The first ``room``
    bytes written are absorbed by L2; past it each partial written evicts a dirty one to DRAM (write spill
    ``(written - room) / written``). A partial is read in the wave that wrote it, so the reads miss only when
    one wave's partials exceed the room. The extra bytes: the spilled writes and, when the reads miss, every
    partial read.
    """
    if written <= 0:
        return 0.0, 0.0, 0
    room = (1.0 - arch.l2_operand_fraction) * arch.l2_bytes
    w = max(0.0, written - room) / written
    r = max(0.0, wave_written - room) / wave_written if wave_written > 0 else 0.0
    return w, r, int(round(max(0.0, written - room) + r * written))


def workspace_spill(arch: ArchSpec, tiles: int, split_k: int, BM: int, BN: int, per_wave: int) -> tuple[float, float, int]:
    """:func:`spill` of a split-K workspace (0 without a split): ``S - 1`` of a tile's ``S`` CTAs write a
    partial (the last to arrive keeps its own), a wave of ``per_wave`` CTAs its share of them."""
    if split_k <= 1:
        return 0.0, 0.0, 0
    part = BM * BN * PARTIAL_BYTES
    share = (split_k - 1) / split_k
    return spill(arch, tiles * (split_k - 1) * part, min(tiles * split_k, per_wave) * share * part)


def bound_parts(arch: ArchSpec, res: Resources, ii: Optional[int] = None, mix=None) -> tuple[float, float, float, float]:
    """What the lower bounds of :func:`split_lower_bounds` and :func:`stream_k_lower_bound` share: ``(solo,
    on_chip, dram_sm, fixed)``: one warp's ``solo`` cycles per k-tile (the mix's issue simulation), one CTA's
    on-chip cycles per k-tile (shared port or L2 share, the larger), the SM's DRAM bytes per cycle, and the least
    fixed cycles of a pipeline run (the smaller load latency, the schedule's tail excess, the C store's DRAM
    latency)."""
    mix = mix if mix is not None else res.mix
    ii_c = max(res.ii_bound, ii or 0)
    solo = mix.solo(arch.hmma_cycles, arch.issue_per_clk_smsp)
    l2_sm = arch.l2_bytes_per_clk / arch.sm_count
    dram_sm = arch.dram_gb_s * arch.dram_efficiency * 1e9 / (arch.clock_ghz * 1e9) / arch.sm_count
    on_chip = max((res.ldsm_bytes + res.tile_bytes) / arch.smem_bytes_per_clk, res.tile_bytes / l2_sm)
    fixed = (min(arch.lat_l2, arch.lat_global) + max(0, res.tail_at(ii_c) - ii_c, res.tail_at(res.ii_bound)
                                                       - res.ii_bound) + arch.lat_global)
    return solo, on_chip, dram_sm, fixed


def kernel_time(arch: ArchSpec, busiest_sm_cycles: float, dram_bytes: float) -> tuple[float, float, float]:
    """``(µs, compute µs, DRAM µs)``: the busiest SM's cycles at the sustained clock or the DRAM roofline of
    ``dram_bytes``, whichever is longer, plus the launch (section 3, "Per shape")."""
    compute_us = busiest_sm_cycles / (arch.clock_ghz * 1e9) * 1e6
    dram_us = dram_bytes / (arch.dram_gb_s * arch.dram_efficiency * 1e9) * 1e6
    return max(compute_us, dram_us) + arch.launch_us, compute_us, dram_us


def stream_k_lower_bound(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, BK: int, res: Resources, *,
                         ii: Optional[int] = None, mix=None) -> float:
    """A lower bound (µs) of :func:`estimate_stream_k`'s ``time_us`` with the same arguments, in a few arithmetic
    operations (the search estimates a stream-K variant only when this could rank it).

    Every CTA runs at least ``floor(I / G)`` k-tiles and some SM holds ``ceil(G / SMs)`` CTAs, whose rounds are
    at least their largest throughput term (:func:`split_lower_bounds`); a CTA runs at least one segment (one
    fill, one store latency) and each of that SM's CTAs stores at least one tile (C or a partial) at the L2
    share; the DRAM roofline is at least :func:`stream_k_traffic`'s (the workspace's spill only adds).
    (A segment's store latency: ``lat_global`` for C, the hand-off for a partial; the bound takes the smaller.)
    A tile has at least ``ceil(T / ceil(I / G))`` contributors ``n``: when ``n > 1`` the SM of the CTA that folds
    it also loads ``n - 1`` partials and stores C (``n`` tiles at the L2 share) after its own C store latency.
    """
    T = -(-K // BK)
    tiles = -(-M // BM) * -(-N // BN)
    r = max(occupancy(arch, res)[0], 1)
    G = stream_k_grid(arch, M, N, K, BM, BN, BK, r)
    k = -(-G // arch.sm_count)
    solo, on_chip, dram_sm, fixed = bound_parts(arch, res, ii, mix)
    tr = stream_k_traffic(arch, M, N, K, BM, BN)
    per_cta = max(on_chip, res.tile_bytes * (1.0 - tr.l2_hit) / dram_sm)
    core = -(-k * (res.threads // 32) // 4) * solo
    # a segment ends in a C store (its DRAM latency) or a partial's hand-off, whichever is shorter
    store = min(arch.lat_global, handoff_cycles(arch))
    least = tiles * T // G
    l2_sm = arch.l2_bytes_per_clk / arch.sm_count
    tile_store = BM * BN * min(OUT_BYTES, PARTIAL_BYTES) / l2_sm  # a C tile or a partial, whichever is smaller
    cyc = least * max(core, k * per_cta) + fixed - arch.lat_global + store + k * tile_store
    # a tile has at least ceil(T / ceil(I / G)) contributors; the one that folds it loads the others' partials and
    # stores C, on an SM of at least floor(G / SMs) CTAs
    n = -(-T // -(-tiles * T // G))
    if n > 1:
        k0 = max(1, G // arch.sm_count)
        core0 = -(-k0 * (res.threads // 32) // 4) * solo
        fold = partial_cycles(arch, BM, BN, n - 1) + BM * BN * OUT_BYTES / l2_sm
        cyc = max(cyc, least * max(core0, k0 * per_cta) + fixed + fold)
    return kernel_time(arch, cyc, tr.dram_bytes)[0]


def split_lower_bounds(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, BK: int, res: Resources,
                       splits: Sequence[int], *, ii: Optional[int] = None, mix=None) -> list[float]:
    """For each ``split_k`` of ``splits``, a lower bound (µs) of :func:`estimate`'s ``time_us`` with the
    same arguments, in a few arithmetic operations (the search estimates a split only when its bound
    could rank it).

    Each round is at least its largest throughput term, and ``core``, ``smem``, ``l2`` and ``dram`` grow
    with the CTAs per SM (``ceil(k warps / 4) solo``, the others linearly), so the busiest SM's main loop
    takes at least ``ceil(T / S)`` times the sum of those over its waves; each wave adds at least the
    fill's smaller latency and the schedule's tail excess, the epilogue's DRAM latency and, split, the
    hand-off, the acquire fence and one load latency; the partials add one per CTA of the busiest SM at the
    L2 share (a CTA stores its own or loads ``S - 1 >= 1``). The DRAM roofline is :func:`estimate`'s own (same traffic and
    workspace).
    """
    T = -(-K // BK)
    tiles = -(-M // BM) * -(-N // BN)
    r = max(occupancy(arch, res)[0], 1)
    per_wave = arch.sm_count * r
    warps = res.threads // 32
    solo, on_chip, dram_sm, per_wave_fixed = bound_parts(arch, res, ii, mix)
    l2_sm = arch.l2_bytes_per_clk / arch.sm_count
    lat = min(arch.lat_l2, arch.lat_global)
    part = BM * BN * PARTIAL_BYTES
    out = []
    for split_k in splits:
        S = max(1, split_k)
        ctas = tiles * S
        full, rem = divmod(ctas, per_wave)
        k_last = -(-rem // arch.sm_count)
        waves = full + (1 if rem else 0)
        busiest = full * r + k_last
        tr = traffic(arch, M, N, K, BM, BN, max(1, per_wave // S))
        core = (full * -(-r * warps // 4) + (-(-k_last * warps // 4) if rem else 0)) * solo
        per_cta = max(on_chip, res.tile_bytes * (1.0 - tr.l2_hit) / dram_sm)
        fixed = waves * per_wave_fixed
        if S > 1:
            fixed += waves * (3 * arch.lat_l2 + SPLIT_BARRIERS * arch.barrier_cycles + lat)
            fixed += busiest * part / l2_sm  # each CTA moves at least one partial (stores its own, or loads S - 1)
        ws_dram = workspace_spill(arch, tiles, S, BM, BN, per_wave)[2]
        out.append(kernel_time(arch, -(-T // S) * max(core, busiest * per_cta) + fixed, tr.dram_bytes + ws_dram)[0])
    return out


# ---------------------------------------------------------------------------
# stream-K (docs/search.md section 3, "Stream-K")


def stream_k_traffic(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int) -> Traffic:
    """L2 and DRAM bytes of a stream-K grid: every tile's A rows and B columns over all of K, as :func:`traffic`.

    All tiles run in the one wave, and at any moment the CTAs are on tiles spread over the whole grouped order,
    each at its own k-tile (CTA ``c`` starts ``c I / G`` iterations in). So no band of tiles shares a k-slice
    while it is in L2, as a wave of the unsplit kernel does: A and B are read from DRAM once when both fit the
    ``l2_operand_fraction`` room together (every later read then hits); otherwise each read after the first hits with
    the chance that its line is still there, ``room / (A + B)`` (a working set read with no locality; an
    assumption of this model), and misses otherwise. C is written once, as f32.
    """
    tm, tn = -(-M // BM), -(-N // BN)
    Kp = K * 2
    l2 = tm * tn * (BM + BN) * Kp
    ops = (M + N) * Kp
    room = arch.l2_operand_fraction * arch.l2_bytes
    dram_ops = ops if ops <= room else ops + (l2 - ops) * (1.0 - room / ops)
    dram_ops = min(float(l2), max(float(ops), dram_ops))
    return Traffic(l2_bytes=l2, dram_bytes=int(round(dram_ops)) + M * N * OUT_BYTES,
                   l2_hit=max(0.0, 1.0 - dram_ops / l2), b_passes=1, a_passes=dram_ops / ops)


@functools.lru_cache(maxsize=512)
def stream_k_plan(tiles: int, k_tiles: int, ctas: int) -> tuple[tuple[int, int, int, int, int, int, int], ...]:
    """Per CTA of a stream-K launch of ``ctas`` CTAs over ``tiles`` tiles of ``k_tiles`` k-tiles (the kernel's
    ranges, :mod:`synth.emit.streamk`): ``(k-tiles, segments, C stores, partial stores, folds, partial loads,
    waits)``.

    CTA ``c`` runs iterations ``[c I / G, (c + 1) I / G)``, one segment per tile they touch. A segment covering
    its tile stores C. A tile shared by ``n >= 2`` CTAs is summed by its last contributor to arrive: each
    contributor arrives when its segment ends, after the same number of lockstep rounds from its own start for
    every CTA, so the one whose segment ends furthest into its range (the tile's first contributor, which runs
    the tile's first k-tiles at the end of its range; ties to the lowest ``c``). It *folds*: loads the
    ``n - 1`` partials and stores C, and it *waits* when a partner's segment ends with its own (that partner's
    partial is stored only then). Every other contributor stores its partial.
    """
    iters = tiles * k_tiles
    span = [cta_range(c, iters, ctas) for c in range(ctas)]
    # O(G), not O(tiles): a CTA's whole tiles are counted, only the tiles a range boundary cuts are visited
    segs = [(e - 1) // k_tiles - b // k_tiles + 1 for b, e in span]
    c_st = [max(0, e // k_tiles + b // -k_tiles) for b, e in span]
    p_st, folds, p_ld, waits = ([0] * ctas for _ in range(4))
    cut = sorted({b // k_tiles for b, _ in span if b % k_tiles})
    for t in cut:  # every CTA range is non-empty (G <= I), so a cut tile has n >= 2 contributors
        first, n = contributors(t, k_tiles, iters, ctas)
        who = range(first, first + n)
        hi = (t + 1) * k_tiles
        ends = [(min(span[d][1], hi) - span[d][0], -d) for d in who]
        end, last = max(ends)
        last = -last
        folds[last] += 1
        c_st[last] += 1
        p_ld[last] += n - 1
        waits[last] += int(any(off == end and -d != last for off, d in ends))
        for d in who:
            if d != last:
                p_st[d] += 1
    rows = [(span[c][1] - span[c][0], segs[c], c_st[c], p_st[c], folds[c], p_ld[c], waits[c]) for c in range(ctas)]
    return tuple(rows)


def stream_k_grid(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, BK: int, ctas_per_sm: int) -> int:
    """The stream-K launch's ``G`` (:func:`synth.emit.streamk.grid_ctas`: one wave of resident CTAs, at most
    one per k-tile iteration)."""
    return grid_ctas(M, N, K, BM, BN, BK, arch.sm_count, ctas_per_sm)


@functools.lru_cache(maxsize=512)
def stream_k_sms(tiles: int, k_tiles: int, ctas: int, sms: int) -> tuple[tuple, ...]:
    """The SMs of a stream-K launch (:func:`stream_k_plan`), CTA ``c`` on SM ``c % sms``, as distinct summaries
    ``(CTAs, distinct CTA rows, C stores, partial stores, partial loads)`` (SMs with the same summary take
    the same time)."""
    plan = stream_k_plan(tiles, k_tiles, ctas)
    out = set()
    for s in range(min(sms, ctas)):
        mine = plan[s::sms]
        out.add((len(mine), tuple(sorted(set(mine))), sum(r[2] for r in mine), sum(r[3] for r in mine),
                 sum(r[5] for r in mine)))
    return tuple(sorted(out))


def stream_k_sm(arch: ArchSpec, BM: int, BN: int, summary: tuple, round_of, fill: float, w_spill: float,
                r_spill: float) -> dict[str, float]:
    """Cycles of one SM running its CTAs of a stream-K launch in lockstep (``summary``: one of
    :func:`stream_k_sms`; docs/search.md, "Stream-K"). ``round_of(k)``: the round's cycles with ``k`` CTAs on
    the SM; ``fill``: one segment's pipeline fill.

    Latencies are one CTA's chain (the longest of the SM's): its k-tiles at the round, per segment the fill and
    the store's latency (``lat_global`` for C), per partial store the hand-off (:func:`handoff_cycles`), per fold
    the hand-off, :func:`fold_latency` and the C store, and per wait one partner's partial written at its SM's
    L2 share. Bytes are the SM's: every C tile (``BM BN`` x :data:`OUT_BYTES`), partial stored and partial loaded
    by its CTAs (:func:`partial_cycles`), at its L2 share. Keys: ``loop``, ``fill``,
    ``epilogue``, ``reduction`` (latency and bytes of the partials), ``total``, ``ctas`` and ``round``.
    """
    k, rows, c_sum, p_sum, l_sum = summary
    rc = round_of(k)
    hand = handoff_cycles(arch)
    fold = hand + fold_latency(arch, r_spill)
    wait = partial_cycles(arch, BM, BN, 1, w_spill)
    best = (-1.0, 0.0, 0.0, 0.0, 0.0)
    for iters, segs, c_st, p_st, folds, p_ld, waits in rows:
        loop, fl, epi = iters * rc, segs * fill, c_st * arch.lat_global
        red = p_st * hand + folds * fold + waits * wait
        chain = loop + fl + epi + red
        if chain > best[0]:
            best = (chain, loop, fl, epi, red)
    c_bytes = c_sum * BM * BN * OUT_BYTES / (arch.l2_bytes_per_clk / arch.sm_count)
    red_bytes = partial_cycles(arch, BM, BN, p_sum, w_spill) + partial_cycles(arch, BM, BN, l_sum, r_spill)
    chain, loop, fl, epi, red = best
    return {"loop": loop, "fill": fl, "epilogue": epi + c_bytes, "reduction": red + red_bytes,
            "total": chain + c_bytes + red_bytes, "ctas": float(k), "round": rc}


def estimate_stream_k(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, BK: int, res: Resources, *,
                      ii: Optional[int] = None, tail: Optional[int] = None, mix=None) -> Estimate:
    """:func:`estimate` of the stream-K kernel (docs/search.md section 3, "Stream-K"): one wave of
    ``G`` (:func:`stream_k_grid`) CTAs sharing the ``tiles x T`` k-tile iterations (:func:`stream_k_plan`),
    the busiest SM's time (:func:`stream_k_sm` of :func:`stream_k_sms`: CTA ``c`` on SM ``c % SMs``) at the
    sustained clock, the DRAM
    roofline of :func:`stream_k_traffic` and the workspace's :func:`spill`, plus the launch."""
    mix = mix if mix is not None else res.mix
    solved = ii is not None
    ii_c = max(res.ii_bound, ii or 0)
    tail_c = max(res.tail_at(ii_c), tail or 0, ii_c)
    T = -(-K // BK)
    tm, tn = -(-M // BM), -(-N // BN)
    tiles = tm * tn
    r, limit = occupancy(arch, res)
    r = max(r, 1)
    G = stream_k_grid(arch, M, N, K, BM, BN, BK, r)
    plan = stream_k_plan(tiles, T, G)
    tr = stream_k_traffic(arch, M, N, K, BM, BN)
    part = BM * BN * PARTIAL_BYTES
    written = sum(row[3] for row in plan) * part
    w_spill, r_spill, ws_dram = spill(arch, written, written)
    fill_excess = max(0, tail_c - ii_c, res.tail_at(res.ii_bound) - res.ii_bound)
    memo: dict[int, tuple] = {}

    def round_of(k: int) -> float:
        if k not in memo:
            t = round_terms(arch, res, mix, k, ii_c, tr.l2_hit)
            memo[k] = (combine(t), t)
        return memo[k][0][0]

    round_of(r)
    fill = memo[r][1]["L"] + fill_excess
    sms = [stream_k_sm(arch, BM, BN, sm, round_of, fill, w_spill, r_spill)
           for sm in stream_k_sms(tiles, T, G, arch.sm_count)]
    busy = max(sms, key=lambda d: d["total"])
    k_b = int(busy["ctas"])
    (rc, bound), terms = memo[k_b]
    cyc = busy["total"]
    time_us, compute_us, dram_us = kernel_time(arch, cyc, tr.dram_bytes + ws_dram)
    bound = "dram" if dram_us > compute_us else bound
    shown = ("tensor", "issue", "smem", "l2", "dram", "exposed", "barrier", "latency")
    per_wave = arch.sm_count * r
    return Estimate(time_us=time_us, tflops=2.0 * M * N * K / (time_us * 1e-6) / 1e12, ctas=G, ctas_per_sm=r,
                    occupancy_limit=limit, waves=1, wave_efficiency=G / per_wave, k_tiles=T, ii=ii_c,
                    round_cycles=int(round(rc)), round_exact=float(rc), active_ctas_per_sm=k_b,
                    wave_cycles=int(round(cyc)), loop_cycles=int(round(busy["loop"])),
                    fixed_cycles=int(round(cyc - busy["loop"])), compute_us=compute_us, dram_us=dram_us, bound=bound,
                    padding=1.0 - (M * N) / (tm * BM * tn * BN), solved=solved,
                    terms=tuple((n, round(terms[n], 1)) for n in shown if n in terms),
                    l2_hit=round(tr.l2_hit, 4), latency_cycles=round(terms.get("L", 0.0), 1),
                    mix_source=getattr(mix, "source", "estimate"),
                    instructions_per_hmma=round(getattr(mix, "per_hmma", 0.0), 3),
                    split_k=1, tiles=tiles, split_k_tiles=max(row[0] for row in plan),
                    busiest_ctas=-(-G // arch.sm_count), reduction_cycles=int(round(busy["reduction"])),
                    workspace_bytes=2 * G * part, stream_k=True,
                    partial_tiles=sum(row[4] for row in plan), segments=max(row[1] for row in plan))


def estimate(arch: ArchSpec, M: int, N: int, K: int, BM: int, BN: int, BK: int, res: Resources, *,
             ii: Optional[int] = None, tail: Optional[int] = None, mix=None, split_k: int = 1,
             stream_k: bool = False) -> Estimate:
    """Predicted kernel time of a configuration with resources ``res`` on ``M x N x K``.

    ``ii``/``tail``: the schedule's timing (``cycles = (T - 1) ii + tail``); the
    problem's lower bounds stand in for them when absent, and bound them from
    below when present, so a timed estimate is never faster than the untimed one.
    The timing of a split's loop is the same (``ii`` and ``tail`` do not depend on the
    trip count once it reaches the stages: docs/search.md, "Split-K").
    ``mix``: the kernel's SASS instruction mix (default: ``res.mix``, estimated).
    ``split_k``: K splits (``1 <= split_k <= ceil(K / BK)``): waves over ``tiles x split_k``
    CTAs of at most ``ceil(T / split_k)`` k-tiles, plus :func:`reduction` per wave.
    ``stream_k``: the stream-K kernel instead (:func:`estimate_stream_k`; ``split_k`` must be 1).
    """
    if stream_k:
        if split_k != 1:
            raise ValueError(f"stream_k excludes split_k = {split_k}")
        return estimate_stream_k(arch, M, N, K, BM, BN, BK, res, ii=ii, tail=tail, mix=mix)
    mix = mix if mix is not None else res.mix
    solved = ii is not None
    ii_c = max(res.ii_bound, ii or 0)
    tail_c = max(res.tail_at(ii_c), tail or 0, ii_c)
    T = -(-K // BK)
    S = max(1, split_k)
    Ts = -(-T // S)
    tm, tn = -(-M // BM), -(-N // BN)
    tiles = tm * tn
    ctas = tiles * S
    r, limit = occupancy(arch, res)
    r = max(r, 1)
    per_wave = arch.sm_count * r
    full, rem = divmod(ctas, per_wave)
    tr = traffic(arch, M, N, K, BM, BN, max(1, per_wave // S))
    w_spill, r_spill, ws_dram = workspace_spill(arch, tiles, S, BM, BN, per_wave)
    sms = min(arch.sm_count, ctas)
    epilogue_bytes = BM * BN * OUT_BYTES

    fill_excess = max(0, tail_c - ii_c, res.tail_at(res.ii_bound) - res.ii_bound)
    l2_per_sm = arch.l2_bytes_per_clk / arch.sm_count
    memo: dict[int, tuple] = {}

    def wave(k: int) -> tuple[float, float, str, float, dict]:
        """(main-loop cycles, fixed cycles, bound, round cycles, terms) of a wave with k CTAs per SM."""
        if k not in memo:
            t = round_terms(arch, res, mix, k, ii_c, tr.l2_hit)
            rc, what = combine(t)
            # never below the untimed fill: a solved ii above the bound must not shorten the tail's excess
            fill = t["L"] + fill_excess
            red = reduction(arch, BM, BN, S, k, sms, w_spill, r_spill)
            red_c = red["write"] + red["handoff"] + red["read"]
            epi = arch.lat_global + red["lasts"] * epilogue_bytes / l2_per_sm
            memo[k] = (Ts * rc, fill + red_c + epi, what, rc, t, red_c)
        return memo[k][:5]

    loop_cyc, fixed_cyc, bound, round_c, k_bind, terms = sum_waves(full, rem, arch.sm_count, r, wave, float(ii_c))
    red_total = (full * memo[r][5] if full else 0.0) + (memo[-(-rem // arch.sm_count)][5] if rem else 0.0)
    cyc = loop_cyc + fixed_cyc
    waves = full + (1 if rem else 0)
    time_us, compute_us, dram_us = kernel_time(arch, cyc, tr.dram_bytes + ws_dram)
    bound = "dram" if dram_us > compute_us else bound
    tflops = 2.0 * M * N * K / (time_us * 1e-6) / 1e12
    wl, wf, _, _, _ = wave(r)
    shown = ("tensor", "issue", "smem", "l2", "dram", "exposed", "barrier", "latency")
    return Estimate(time_us=time_us, tflops=tflops, ctas=ctas, ctas_per_sm=r, occupancy_limit=limit,
                    waves=waves, wave_efficiency=ctas / (waves * per_wave), k_tiles=T, ii=ii_c,
                    round_cycles=int(round(round_c)), round_exact=float(round_c), active_ctas_per_sm=k_bind, wave_cycles=int(round(wl + wf)),
                    loop_cycles=int(round(loop_cyc)), fixed_cycles=int(round(fixed_cyc)), compute_us=compute_us,
                    dram_us=dram_us, bound=bound, padding=1.0 - (M * N) / (tm * BM * tn * BN), solved=solved,
                    terms=tuple((n, round(terms[n], 1)) for n in shown if n in terms),
                    l2_hit=round(tr.l2_hit, 4), latency_cycles=round(terms.get("L", 0.0), 1),
                    mix_source=getattr(mix, "source", "estimate"),
                    instructions_per_hmma=round(getattr(mix, "per_hmma", 0.0), 3),
                    split_k=S, tiles=tiles, split_k_tiles=Ts, busiest_ctas=-(-ctas // arch.sm_count),
                    reduction_cycles=int(round(red_total)),
                    workspace_bytes=tiles * S * BM * BN * PARTIAL_BYTES if S > 1 else 0)


__all__ = ["Resources", "kernel_time", "WaveEstimate", "Estimate", "Traffic", "resources", "occupancy", "estimate", "traffic", "round_terms",
           "combine", "sum_waves", "problem_bounds", "last_ctas", "reduction", "workspace_spill", "split_lower_bounds",
           "partial_cycles", "handoff_cycles", "fold_latency", "spill", "bound_parts", "stream_k_traffic",
           "stream_k_plan", "stream_k_sms", "stream_k_grid", "stream_k_sm", "estimate_stream_k", "stream_k_lower_bound",
           "OVERLAP_NORM", "OUT_BYTES", "PARTIAL_BYTES", "SPLIT_BARRIERS"]

"""A FlashAttention-forward TFLOP/s prediction from a warp-specialized schedule (docs/attention_perf.md).

Input: a :class:`~synth.model.ws_schedule.WsSchedule` of ``attention_body(d, BM, BN)`` (its ``ii``: cycles per KV
block of one CTA in the steady state; its ``makespan``: one block from its first op to its last result), the tile
(:class:`AttentionTile`), a problem shape (:class:`AttentionShape`: batch, heads, sequence length, causal) and an
arch (``synth/arch.py``, ``sm_90``: H100 SXM5). Output: :class:`AttentionEstimate`, every term named.

The model, each term with its bound:

* **Steady state**: a CTA computes one KV block of its ``BM`` query rows every ``II`` cycles (all its consumer warp
  groups together). ``II >= 4 BM BN d / tensor FLOP per clock``: the schedule's II is at least the tensor work
  (``solve_ws`` starts its search there), so the steady state alone is at most the tensor peak.
* **The tensor pipe's achieved rate**: a block takes at least its tensor work at the rate the best published dense
  f16 GEMM on the arch reaches (``synth.search.published.best_published``: 822.8 TFLOP/s on H100 SXM, 86.7 % of the
  peak at the sustained clock): an attention kernel issues the same wgmmas and more besides, so its tensor pipe
  runs no faster. Per block: ``max(II, tensor work / that share)``. An assumption bounded by the data: the share
  is the highest any published kernel shows, so this term never lowers a prediction below a reachable figure.
* **Instruction issue** (optional, from SASS: ``loop_instructions``, a consumer warp's instructions per KV block,
  ``benchmarks/sass_attention.py`` reads them): each of the SM's four sub-partitions issues one warp instruction per
  clock (``issue_per_clk_smsp``) and holds ``C`` of the ``4 C`` consumer warps, so a block takes at least
  ``C x loop_instructions`` cycles. A lower bound of the cycles (stalls only add), so the prediction stays a ceiling.
* **Per tile**: ``n`` KV blocks (``ceil(seqlen / BN)``; causal: the blocks at or left of the diagonal, ``ceil(min((j +
  1) BM, seqlen) / BN)`` for row tile ``j``), the pipeline's fill once (``makespan - II``: the first block's latency
  the steady state does not hide; an upper bound, since FA3's producer prefetches the next tile's Q and K during the
  epilogue) and the O epilogue (the f16 O tile written to shared memory at ``smem_bytes_per_clk`` for its TMA store,
  plus one barrier; the store itself is asynchronous and overlaps the next tile).
* **Waves**: one CTA per SM (the schedules' shared memory, over half an SM's, allows no second; two would share
  one tensor pipe, which the II already charges whole). Persistent (FA3): the ``batch x heads x ceil(seqlen / BM)``
  tiles are dealt to ``sm_count`` CTAs, the non-causal ones round robin (FA3's static persistent scheduler: the
  busiest SM takes ``ceil(tiles / SMs)`` equal tiles), the causal ones longest first to the least loaded SM (FA3's
  dynamic scheduler with its longest-first order). A grid of one CTA per tile (``persistent=False``): the tiles in
  launch order (row tile fastest, then batch x head), each to the SM that frees first, and each CTA pays its setup
  besides (Q's TMA load: ``lat_global`` plus its bytes at ``tma_bytes_per_clk``, and one barrier). The kernel takes
  the busiest SM's cycles.
* **Clock, DRAM and launch**: ``synth.search.model.kernel_time``, as the GEMM model does: the busiest SM's cycles at
  the sustained clock (``ArchSpec.clock_ghz``, 1.755 GHz on H100 SXM5), or Q, K, V and O read / written once
  from DRAM (K and V re-read by every row tile are assumed L2 hits: a lower bound of the traffic), whichever is
  longer, plus ``launch_us``.
* **FLOPs**: FA3's count, ``4 batch heads seqlen^2 d``, halved with a causal mask (the blocks a causal kernel computes
  are more than half: the diagonal blocks count whole in time, half in FLOPs).

Not modelled: L2 misses of K and V, the register spills or instruction-issue limits a real kernel has beyond the
schedule's unit costs (benchmarks/sass_attention.py reads those from SASS), and clock throttling under load.
"""

from __future__ import annotations

import heapq
import math
import os
from dataclasses import dataclass
from typing import Optional

from ..arch import ArchSpec, get_arch
from ..errors import Loc, SynthError
from .model import kernel_time
from .published import best_published

PUBLISHED_ATTENTION_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                                        "published_attention.yaml")
OUT_BYTES = 2
"""Bytes of one O element (f16 out, as FA3 writes for f16 in)."""
IN_BYTES = 2
"""Bytes of one Q, K or V element (f16)."""


@dataclass(frozen=True)
class AttentionTile:
    """The CTA's tile: ``BM`` query rows, ``BN`` keys per KV block, head dim ``d``."""

    BM: int
    BN: int
    d: int

    @property
    def block_flops(self) -> int:
        """FLOPs of one KV block: ``S = Q K^T`` and ``O += P V``, ``2 x 2 BM BN d``."""
        return 4 * self.BM * self.BN * self.d


@dataclass(frozen=True)
class AttentionShape:
    """A forward problem: ``batch x heads`` independent heads of ``seqlen`` queries and keys, head dim ``d``."""

    batch: int
    heads: int
    seqlen: int
    d: int
    causal: bool = False

    @property
    def flops(self) -> float:
        """FA3's count: ``4 batch heads seqlen^2 d``, halved with a causal mask."""
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.d
        return f / 2 if self.causal else f

    @classmethod
    def fa3_benchmark(cls, seqlen: int, d: int, causal: bool = False, tokens: int = 16384,
                      hidden: int = 2048) -> "AttentionShape":
        """The FA3 paper's sizing: ``batch = tokens / seqlen``, ``heads = hidden / d`` (synth/data/published_attention.yaml)."""
        return cls(max(1, tokens // seqlen), max(1, hidden // d), seqlen, d, causal)


@dataclass(frozen=True)
class AttentionEstimate:
    """The predicted forward time of one schedule on one shape, with its terms (cycles are the busiest SM's)."""

    tflops: float
    time_us: float
    compute_us: float
    dram_us: float
    bound: str
    """``dram`` (Q, K, V, O at the DRAM rate take longer than the busiest SM), else what sets a block's cycles:
    ``schedule`` (the II), ``tensor rate`` (the tensor work at the best published GEMM's share of the peak) or
    ``issue`` (the SASS loop's instructions)."""
    ii: int
    tensor_cycles: int
    """One KV block's tensor work at the SM's full rate: the least II."""
    block_cycles: int
    """One KV block's cycles: ``max(II, tensor_cycles / tensor_share, issue_cycles)``."""
    tensor_share: float
    """The best published dense GEMM figure of the arch over its tensor peak at the sustained clock (at most 1)."""
    fill_cycles: int
    """Per tile: ``makespan - II``."""
    epilogue_cycles: int
    """Per tile: the O tile's shared-memory writes and a barrier."""
    setup_cycles: int
    """Per tile without a persistent scheduler: Q's TMA load and a barrier (0 when persistent)."""
    issue_cycles: int
    """One KV block's instruction issue on a sub-partition: consumers x the SASS loop's instructions per block (0
    when not given)."""
    tiles: int
    tiles_busiest: int
    """Tiles the busiest SM computes."""
    blocks_busiest: int
    """KV blocks the busiest SM computes."""
    busiest_cycles: int
    steady_tflops: float
    """The steady state alone: ``4 BM BN d / II`` per SM per cycle, all SMs, the sustained clock."""
    peak_tflops: float
    """The tensor peak at the sustained clock (``tensor_f16_f32_flop_per_clk_sm x SMs x clock``)."""
    wave_efficiency: float
    """Mean over the SMs of their cycles / the busiest's."""


def kv_blocks(tile: AttentionTile, shape: AttentionShape, row_tile: int) -> int:
    """KV blocks row tile ``row_tile`` computes: every block, or with a causal mask those holding a key at or before
    its last query (``ceil(min((j + 1) BM, seqlen) / BN)``)."""
    if not shape.causal:
        return -(-shape.seqlen // tile.BN)
    last = min((row_tile + 1) * tile.BM, shape.seqlen)
    return -(-last // tile.BN)


def _busiest(costs: list[int], sms: int, order: str) -> tuple[int, int, float]:
    """(cycles, tiles) of the busiest SM and the wave efficiency: the tiles dealt round robin (``static``), longest
    first to the least loaded SM (``lpt``), or in their order to the least loaded SM (``grid``)."""
    if not costs:
        return 0, 0, 1.0
    if order == "static":
        loads = [0] * min(sms, len(costs))
        counts = [0] * len(loads)
        for k, c in enumerate(costs):
            loads[k % len(loads)] += c
            counts[k % len(loads)] += 1
    else:
        heap = [(0, k, 0) for k in range(min(sms, len(costs)))]
        for c in (sorted(costs, reverse=True) if order == "lpt" else costs):
            load, k, n = heapq.heappop(heap)
            heapq.heappush(heap, (load + c, k, n + 1))
        loads = [0] * len(heap)
        counts = [0] * len(heap)
        for load, k, n in heap:
            loads[k], counts[k] = load, n
    top = max(range(len(loads)), key=lambda k: loads[k])
    eff = sum(loads) / (len(loads) * loads[top]) if loads[top] else 1.0
    return loads[top], counts[top], eff


def predict_attention(schedule, tile: AttentionTile, shape: AttentionShape, arch: str | ArchSpec = "sm_90", *,
                      persistent: bool = True, loop_instructions: Optional[float] = None) -> AttentionEstimate:
    """Predicted forward TFLOP/s of ``schedule`` (a ``WsSchedule``: ``ii``, ``makespan``) for ``tile`` on ``shape``
    (module docstring); ``persistent``: FA3's persistent schedulers, else one CTA per tile; ``loop_instructions``: a
    consumer warp's instructions per KV block in the kernel's SASS (the issue term; None: not counted). Contract: the TFLOP/s
    does not rise as the II grows (the rest fixed), and never exceeds the tensor peak at the sustained clock nor
    the best published dense GEMM figure of the arch (the II is at least the tensor work, which ``ValueError``
    enforces); ``ValueError`` when the shape's head dim is not the tile's or a size is not positive."""
    a = arch if isinstance(arch, ArchSpec) else get_arch(arch)
    if shape.d != tile.d:
        raise ValueError(f"head dim {shape.d} of the shape is not the tile's {tile.d}")
    if min(shape.batch, shape.heads, shape.seqlen, tile.BM, tile.BN, tile.d) <= 0:
        raise ValueError("batch, heads, seqlen and the tile must be positive")
    tensor = -(-tile.block_flops // a.tensor_f16_f32_flop_per_clk_sm)
    ii = int(schedule.ii)
    if ii < tensor:
        raise ValueError(f"II {ii} is below the tensor work of one KV block ({tensor} cycles): not a schedule of "
                         f"this tile on {a.name}")
    peak = a.tensor_f16_f32_flop_per_clk_sm * a.sm_count * a.clock_ghz / 1e3
    share = min(1.0, best_published(a.name)[0] / peak)
    consumers = int(getattr(schedule, "consumers", 1) or 1)
    issue = math.ceil(consumers * loop_instructions / a.issue_per_clk_smsp) if loop_instructions else 0
    per_block = max(ii, -(-tensor * 1000 // int(share * 1000)), issue)
    fill = max(0, int(schedule.makespan) - ii)
    epilogue = -(-tile.BM * tile.d * OUT_BYTES // a.smem_bytes_per_clk) + a.barrier_cycles
    setup = 0 if persistent else \
        a.lat_global + -(-tile.BM * tile.d * IN_BYTES // a.tma_bytes_per_clk) + a.barrier_cycles
    row_tiles = -(-shape.seqlen // tile.BM)
    per_head = [kv_blocks(tile, shape, j) for j in range(row_tiles)]
    fixed = fill + epilogue + setup
    costs = [n * per_block + fixed for n in per_head] * (shape.batch * shape.heads)
    order = "grid" if not persistent else ("lpt" if shape.causal else "static")
    cycles, ntiles, eff = _busiest(costs, a.sm_count, order)
    # the busiest SM's blocks: its cycles less the per-tile terms, over the block's cycles
    blocks = (cycles - ntiles * fixed) // per_block if ntiles else 0
    qkvo = 4 * shape.batch * shape.heads * shape.seqlen * shape.d * IN_BYTES
    time_us, compute_us, dram_us = kernel_time(a, cycles, qkvo)
    clock = a.clock_ghz
    return AttentionEstimate(
        tflops=shape.flops / (time_us * 1e-6) / 1e12, time_us=time_us, compute_us=compute_us, dram_us=dram_us,
        bound="dram" if dram_us > compute_us else ("schedule" if per_block == ii else
                                                   "issue" if per_block == issue else "tensor rate"), ii=ii,
        tensor_cycles=tensor, block_cycles=per_block, tensor_share=share, fill_cycles=fill, epilogue_cycles=epilogue,
        setup_cycles=setup, issue_cycles=issue, tiles=len(costs), tiles_busiest=ntiles, blocks_busiest=int(blocks),
        busiest_cycles=int(cycles), steady_tflops=tile.block_flops / ii * a.sm_count * clock / 1e3,
        peak_tflops=peak, wave_efficiency=eff)


@dataclass(frozen=True)
class PublishedAttention:
    """One published FlashAttention-3 figure (synth/data/published_attention.yaml)."""

    name: str
    tflops: float
    utilization: Optional[float]
    dtype: str
    gpu: str
    config: str
    source: str


def published_attention(path: str = PUBLISHED_ATTENTION_FILE) -> tuple[list[PublishedAttention], dict]:
    """The published FA3 figures and the benchmark sizing (``tokens``, ``hidden``, ``seqlens``, ``source``) of
    ``path``; :class:`SynthError` at the file when it is unreadable or an entry lacks a field."""
    import yaml  # kept off the import of synth.search: only the attention report reads this file

    fix = "restore synth/data/published_attention.yaml"
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read published attention figures: {exc.strerror}", fix) from None
    except yaml.YAMLError as exc:
        raise SynthError(Loc(path), f"published attention figures are not valid YAML: {exc}", fix) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("fa3"), list) or not isinstance(doc.get("benchmark"), dict):
        raise SynthError(Loc(path), "published attention figures need an 'fa3' list and a 'benchmark' mapping", fix)
    out = []
    for e in doc["fa3"]:
        keys = ("name", "tflops", "dtype", "gpu", "config", "source")
        if not isinstance(e, dict) or any(e.get(k) in (None, "") for k in keys) \
                or not isinstance(e["tflops"], (int, float)) or e["tflops"] <= 0:
            raise SynthError(Loc(path), f"an fa3 entry needs {', '.join(keys)} (tflops positive): {e!r}", fix)
        out.append(PublishedAttention(str(e["name"]), float(e["tflops"]), e.get("utilization"), str(e["dtype"]),
                                      str(e["gpu"]), " ".join(str(e["config"]).split()),
                                      " ".join(str(e["source"]).split())))
    bench = doc["benchmark"]
    if not all(k in bench for k in ("tokens", "hidden", "seqlens", "source")):
        raise SynthError(Loc(path), "'benchmark' needs tokens, hidden, seqlens and source", fix)
    return out, {**bench, "source": " ".join(str(bench["source"]).split())}


__all__ = ["AttentionTile", "AttentionShape", "AttentionEstimate", "PublishedAttention", "kv_blocks",
           "predict_attention", "published_attention", "PUBLISHED_ATTENTION_FILE", "OUT_BYTES", "IN_BYTES"]

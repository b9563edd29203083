"""Machine facts of the GPUs synth targets, as data (SLOTHY's ``targets/`` style).

One frozen :class:`ArchSpec` per compute capability in :data:`ARCHS`. Nothing
here computes; :mod:`synth.gemm` turns these numbers into op latencies and
issue cycles, and :mod:`synth.search` into roofline bounds.

Sources (figures are per SM unless named otherwise):

* SM counts, boost clocks, tensor throughput, DRAM bandwidth, L2 size: the
  NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020, A100 SXM4 40 GB),
  the NVIDIA Ampere GA102 GPU Architecture whitepaper (2020, GeForce RTX 3090),
  the NVIDIA Ada GPU Architecture whitepaper (2022, GeForce RTX 4090) and the
  NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022, H100 SXM5).
  FLOP/clk/SM = peak dense TFLOPS / (SMs x boost clock), rounded to the power of
  two the hardware implements. GeForce parts (sm_86 RTX 3090, sm_89 RTX 4090)
  run f16 mma with f32 accumulation at half the f16-accumulate rate; the
  professional parts of the same chips (A40, L40) do not.
* Shared memory, registers, thread/warp/CTA limits: CUDA C++ Programming Guide,
  "Features and Technical Specifications" table (per compute capability), as
  in the CUDA occupancy calculator. ``smem_per_block`` is the opt-in maximum
  (``cudaFuncAttributeMaxDynamicSharedMemorySize``); 1 KiB per SM is reserved
  by the system, hence per-SM minus 1 KiB.
* Latencies (cycles at the SM clock):
  sm_80: Abdelkhalik, Arafa, Santhi, Badawy, "Demystifying the Nvidia Ampere
  Architecture through Microbenchmarking and Instruction-level Analysis"
  (arXiv:2208.11174, 2022): global (DRAM) load ~470 cycles, L2 hit ~290,
  shared ~23-30 (ldmatrix ~30), HMMA m16n8k16 f32 ~33.
  sm_86: Jia, Maggioni, Smith, Scarpazza style microbenchmarks (Jia et al.,
  "Dissecting the Ampere GPU Architecture", GTC 2021) and Chips and Cheese's
  RTX 3090 memory-latency measurements; sm_89: Chips and Cheese, "Microbenchmarking
  Nvidia's RTX 4090" (2022); sm_90: Chips and Cheese, "Nvidia's H100: Funny L2,
  and Tons of Bandwidth" (2023) and Luo et al., "Benchmarking and Dissecting the
  Nvidia Hopper GPU Architecture" (arXiv:2402.13499, 2024). These are
  approximate, rounded, and measured with pointer chasing on an idle GPU; a
  streaming GEMM sees more (queueing), which the schedule tolerates by design
  and :mod:`synth.search.model` adds (Little's law, docs/search.md).
* Throughput figures of the GEMM model (:class:`ArchSpec` fields after ``lat_mma``):
  ``l2_bytes_per_clk``: sm_80 5120 B/clk, the A100 whitepaper's "2.3x the L2 read
  bandwidth of V100" (V100: 2048 B/clk; 5120 x 1.41 GHz = 7.2 TB/s). sm_90: NVIDIA
  publishes no L2 bandwidth for H100. The figure is scaled from one benchmark run on
  both chips, the L2 read benchmark of D. Ernst's GPU microbenchmark suite
  (gpu-benches, NHR@FAU, "gpu-l2-cache", with its published results per GPU): an
  L2-resident set read by every SM streams 5.4 TB/s on A100 SXM4 80 GB (the 108 SMs and
  40 MB L2 of the 40 GB part, 1.41 GHz: 3,830 B/clk, 75 % of the whitepaper's 5120) and 9.75 TB/s on H200 (GH100 with 132 SMs and the 50 MB L2 of
  H100 SXM5; only its HBM differs) at no more than its 1.98 GHz boost: at least 4,920
  B/clk. The model keeps the whitepaper convention of sm_80 (nominal, not the 75 % a
  benchmark reaches), so sm_90 = 5120 x 4,920 / 3,830 = 6,580, rounded to 6,600 B/clk (50 B/clk per SM
  against the A100's 47; if the H200 ran below 1.98 GHz the true figure is higher, so
  this errs low). sm_86 and sm_89 have no NVIDIA figure: 2048 B/clk (GA102: 12 L2
  slices x 64 B x 2 ports, an assumption) and 5120 B/clk (AD102, an assumption).
  ``l2_operand_fraction``: the fraction of the L2 a GEMM's A and B may keep between
  waves, 0.5 on every arch (an assumption of this model: the L2 of A100 and of H100 is
  two partitions that each keep a copy of lines the SMs of both read (A100 whitepaper,
  "L2 cache"; Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of Bandwidth", 2023),
  and the rest holds C, split-K partials and other traffic; GA102 and AD102 keep the
  same half for the same other traffic).
  ``mma_sync_fraction``: 2/3 on sm_90, the share of the wgmma peak that ``mma.sync``
  m16n8k16 reaches on Hopper (Luo et al., arXiv:2402.13499, mma versus wgmma
  throughput), 1 elsewhere (``mma.sync`` is the tensor path of sm_80 to sm_89).
  ``lat_shared`` and ``lat_mma`` of sm_90 are the sm_80 measurements reused (an
  assumption: the cited Hopper sources time wgmma and the memory hierarchy, and this
  table takes no separate ldmatrix or ``mma.sync`` latency from them). The Hopper pipeline
  model charges a drained wgmma group ``4 lat_mma`` (132 cycles) per k-tile when
  ``K_PIPE_MMAS = 0`` (synth/model/hopper.py), the whole of it since the sm_90 calibration
  (the cooperative warp groups drain together); no published figure of the drain exists, and
  the 11 calibration points do not move with it (their rounds are bound by the wgmma and L2
  terms).
  ``issue_per_clk_smsp``:
  one warp instruction per clock per SM sub-partition (each of the 4 partitions
  has "one warp scheduler, one dispatch unit (32 thread/clk)", Ampere GA102
  whitepaper, SM section; the same for GA100, AD102 and GH100).
  ``sustained_clock_ghz``: the clock a long dense f16 GEMM runs at. A100 SXM4:
  1.305 GHz, the clock NVIDIA uses for the A100's HPL Rpeak because it is what
  the GPU sustains at its 400 W power limit under dense math (G. Lockwood,
  "Peak FLOPS", glennklockwood.com/garden/peak-FLOPS), inside the datasheet's
  1.095 GHz base to 1.41 GHz boost. H100 SXM5: 1.755 GHz (the H100 whitepaper's preliminary
  figures use 1.755; sustained 700 W operation throttles below the 1.98 GHz
  maximum: an assumption, checked by the sm_90 calibration: the least-squares clock of the 11
  published H100 points of synth/data/published_gemm.yaml, every other figure of this table
  kept, is 1.750 GHz, RMS error 3.0 %, 0.3 % from this figure, which is kept; docs/search.md
  section 8, benchmarks/calibrate_sm90.py), GeForce parts at their rated boost (RTX 3090
  1.695 GHz, RTX 4090 2.52 GHz; real cards often exceed it, so this errs low).
  ``dram_efficiency``: sustained / nominal DRAM bandwidth, 0.9 (HBM2/HBM3 and
  GDDR6X stream at 85-93 % of nominal in STREAM-like copies; an assumption of
  this model). ``barrier_cycles``: the cost of one ``bar.sync`` of a CTA whose
  warps arrive together, 20 cycles (Volta/Turing microbenchmarks report ~20;
  no published Ampere/Hopper figure: an assumption). ``launch_us``: kernel
  launch + drain seen by back-to-back timing (CUDA events), 3 us (an
  assumption; Triton's do_bench and the CUTLASS profiler measure this way).
* Thread-block clusters (sm_90 only; 0 elsewhere: no clusters before Hopper).
  ``sms_per_tpc``: 2, the SMs of one TPC, the unit in which SMs are enabled: the H100
  whitepaper's table of GH100 configurations gives the full GH100 as 8 GPCs x 9 TPCs x 2 SMs
  (144 SMs) and H100 SXM5 as 66 TPCs, 132 SMs. So every GPC of an H100 SXM5 holds an even
  number of SMs, and clusters of 2 CTAs at 1 CTA per SM (a cluster's CTAs are co-scheduled on
  one GPC: CUDA C++ Programming Guide, "Thread Block Clusters") fill all 132 SMs: 66 clusters
  per wave. The split of the 66 TPCs over the 8 GPCs is not published, so clusters of more than
  one TPC's SMs have no exact figure here (synth builds clusters of 2 only).
  ``lat_remote_arrive``: an ``mbarrier.arrive.release.cluster`` on a peer CTA's barrier (or
  one ``barrier.cluster`` arrive/wait), cycles until the peer sees it. NVIDIA publishes no
  figure; the arrive crosses the GPC's SM-to-SM network, which the H100 whitepaper presents
  as faster than exchanging data through global memory (distributed shared memory section),
  so the model takes the L2 hit latency (``lat_l2``, 260) as an upper bound: a cluster's
  synchronization cost errs high, never low.
  ``l2_ingress_bytes_per_clk_sm``: the bytes one SM can receive from L2 per clock through its own
  port, a limit separate from what the L2 slices serve (``l2_bytes_per_clk``). A TMA multicast
  (``cp.async.bulk.tensor ... .multicast::cluster``, PTX ISA) reads the shared operand's tile from L2
  once per cluster, but the copy still lands whole in the shared memory of each CTA of the cluster:
  every SM receives its whole A and B tiles per k-tile with or without a cluster, so multicast lowers
  the slices' reads and not an SM's ingress. NVIDIA publishes no figure. Lower bound, 50 B/clk (in the
  model's units): in the L2 benchmark behind ``l2_bytes_per_clk`` every SM received its share, 6,600 /
  132, so its port carries at least that (the benchmark cannot tell which of the two limits it met;
  the model takes the slices as the limit of a kernel without multicast, so no other prediction
  moves). Upper bound, 53.3 B/clk, derived from fast.cu's measurement (P. Shankhdhar's handwritten
  H100 matmul kernels, fast.cu, README "Benchmarks": H100 SXM, bf16, 8192^3): its kernel 7 adds 2-CTA
  clusters with TMA multicast to the persistent kernel 6, 777.5 -> 799.1 TFLOP/s, +2.8 %, together
  with a move from three to two consumer warp groups (128x256 tiles) that its README reports as a
  gain of its own, so the cluster gains at most 2.8 % there. In synth's Hopper model the main-loop
  round of a 128x256x64 tile is the L4 overlap of 1,024 wgmma cycles with its L2 path, 49,152 bytes
  per k-tile: 983 cycles at 50 B/clk, a round of 1,194. With multicast the slices serve 32,768 bytes
  (655 cycles) but the SM still receives 49,152, ``49,152 / I`` cycles; the round gains at most 2.8 %
  while ``(1,194 / 1.0278)^4 - 1,024^4 <= (49,152 / I)^4``, i.e. ``I <= 53.3`` (the same for A
  shared). The cluster's fixed cycles on a persistent CTA (its first round trip 260 longer, two cluster
  barriers, 520) are under 0.1 % of that kernel's 2.4 M cycles, so the round carries the measurement.
  sm_90: 53, rounded down (the round gains 2.5 %); the same step at 6144^3 measured +1.1 %
  (766.3 -> 774.4), below the bound. 0 elsewhere (no clusters; the SM's share of the L2 figure).
"""

from __future__ import annotations

from dataclasses import dataclass


SMEM_RESERVED_PER_CTA = 1024
"""Shared memory the system reserves per resident CTA (sm_80 and later; CUDA occupancy calculator)."""
REG_ALLOC_UNIT = 256
"""Registers are allocated per warp in units of 256 (8 per thread; CUDA occupancy calculator)."""


@dataclass(frozen=True)
class ArchSpec:
    name: str
    """``sm_80`` ..."""
    gpu: str
    """The part the throughput numbers describe."""
    sm_count: int
    boost_clock_ghz: float
    tensor_f16_f32_flop_per_clk_sm: int
    """Dense mma f16 inputs, f32 accumulate (2 FLOP per FMA)."""
    tensor_tf32_flop_per_clk_sm: int
    dram_gb_s: float
    l2_bytes: int
    smem_per_block: int
    """Opt-in maximum dynamic shared memory of one CTA, bytes."""
    smem_per_sm: int
    registers_per_sm: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    lat_global: int
    """cp.async global->shared (DRAM) latency, cycles."""
    lat_l2: int
    """Global load that hits L2, cycles."""
    lat_shared: int
    """ldmatrix / ld.shared latency, cycles."""
    lat_mma: int
    """mma.sync m16n8k16 f32 latency (issue to result), cycles."""
    smem_bytes_per_clk: int = 128
    """Shared-memory bandwidth per SM (32 banks x 4 bytes)."""
    max_registers_per_thread: int = 255
    l2_bytes_per_clk: int = 5120
    """L2 -> SM read bandwidth of the whole chip, bytes per SM clock."""
    l2_operand_fraction: float = 0.5
    """Fraction of the L2 a GEMM's A and B may keep between waves (the rest: C, partials, other traffic)."""
    sustained_clock_ghz: float = 0.0
    """The SM clock a long dense f16 GEMM runs at (0: the boost clock)."""
    mma_sync_fraction: float = 1.0
    """Fraction of ``tensor_f16_f32_flop_per_clk_sm`` that ``mma.sync`` m16n8k16 reaches
    (sm_90: the peak is wgmma's; mma.sync reaches about 2/3 of it)."""
    issue_per_clk_smsp: int = 1
    """Warp instructions issued per clock by each of the 4 SM sub-partitions."""
    dram_efficiency: float = 0.9
    """Sustained / nominal DRAM bandwidth."""
    tma_bytes_per_clk: int = 0
    """Bytes per SM clock one SM's TMA unit lands in shared memory (0: no TMA). sm_90: 64, an
    assumption of synth's Hopper model (one 128-byte swizzle row every two clocks), not a
    published or measured figure; it only sets how long a stage's fill takes after its latency."""
    barrier_cycles: int = 20
    """One ``bar.sync`` when the CTA's warps arrive together, cycles."""
    launch_us: float = 3.0
    """Launch and drain overhead of one kernel timed back to back, microseconds."""
    sms_per_tpc: int = 0
    """SMs per TPC, the unit in which SMs are enabled and clusters of 2 are placed (sm_90: 2; 0: no clusters)."""
    lat_remote_arrive: int = 0
    """Cycles until a remote ``mbarrier`` arrive (or a cluster barrier) is seen by the peer CTA (sm_90: the L2
    hit latency, an upper bound; 0: no clusters)."""
    l2_ingress_bytes_per_clk_sm: int = 0
    """Bytes per SM clock one SM can receive from L2 through its own port, whatever the L2 slices serve: a multicast
    copy still lands whole in every CTA of the cluster (sm_90: 53, between 50 and 53.3, derived from fast.cu's
    cluster measurement, module docstring; 0: no separate limit, the SM's share of ``l2_bytes_per_clk``)."""

    def __post_init__(self) -> None:
        assert self.name.startswith("sm_"), self.name
        assert self.smem_per_block <= self.smem_per_sm
        assert self.max_warps_per_sm * 32 == self.max_threads_per_sm

    @property
    def peak_tflops_f16(self) -> float:
        """Dense f16->f32 tensor peak, TFLOP/s."""
        return self.tensor_f16_f32_flop_per_clk_sm * self.sm_count * self.boost_clock_ghz / 1e3

    @property
    def fma_per_clk_sm(self) -> int:
        return self.tensor_f16_f32_flop_per_clk_sm // 2

    @property
    def clock_ghz(self) -> float:
        """The sustained clock the GEMM model uses (``sustained_clock_ghz``, else the boost clock)."""
        return self.sustained_clock_ghz or self.boost_clock_ghz

    @property
    def hmma_cycles(self) -> float:
        """Cycles one sub-partition's tensor core is busy with one m16n8k16 (2048 FMA) ``mma.sync``."""
        return 2048 / (self.fma_per_clk_sm / 4 * self.mma_sync_fraction)

    @property
    def mma_sync_peak_tflops(self) -> float:
        """f16->f32 ``mma.sync`` peak at the sustained clock, TFLOP/s (what synth's kernels can reach)."""
        return (self.tensor_f16_f32_flop_per_clk_sm * self.mma_sync_fraction * self.sm_count
                * self.clock_ghz / 1e3)


ARCHS: dict[str, ArchSpec] = {
    "sm_80": ArchSpec(
        name="sm_80", gpu="A100 SXM4 40GB", sm_count=108, boost_clock_ghz=1.41,
        tensor_f16_f32_flop_per_clk_sm=2048,   # 312 TFLOPS dense
        tensor_tf32_flop_per_clk_sm=1024,      # 156 TFLOPS dense
        dram_gb_s=1555.0, l2_bytes=40 * 2**20,
        smem_per_block=163 * 1024, smem_per_sm=164 * 1024, registers_per_sm=65536,
        max_threads_per_sm=2048, max_warps_per_sm=64, max_ctas_per_sm=32,
        lat_global=470, lat_l2=290, lat_shared=30, lat_mma=33,
        l2_bytes_per_clk=5120, sustained_clock_ghz=1.305,
    ),
    "sm_86": ArchSpec(
        name="sm_86", gpu="GeForce RTX 3090", sm_count=82, boost_clock_ghz=1.695,
        tensor_f16_f32_flop_per_clk_sm=512,    # 71 TFLOPS dense with f32 accumulate (GeForce half rate)
        tensor_tf32_flop_per_clk_sm=256,       # 35.6 TFLOPS dense
        dram_gb_s=936.0, l2_bytes=6 * 2**20,
        smem_per_block=99 * 1024, smem_per_sm=100 * 1024, registers_per_sm=65536,
        max_threads_per_sm=1536, max_warps_per_sm=48, max_ctas_per_sm=16,
        lat_global=520, lat_l2=300, lat_shared=30, lat_mma=33,
        l2_bytes_per_clk=2048, sustained_clock_ghz=1.695,
    ),
    "sm_89": ArchSpec(
        name="sm_89", gpu="GeForce RTX 4090", sm_count=128, boost_clock_ghz=2.52,
        tensor_f16_f32_flop_per_clk_sm=512,    # 165 TFLOPS dense with f32 accumulate (GeForce half rate)
        tensor_tf32_flop_per_clk_sm=256,       # 82.6 TFLOPS dense
        dram_gb_s=1008.0, l2_bytes=72 * 2**20,
        smem_per_block=99 * 1024, smem_per_sm=100 * 1024, registers_per_sm=65536,
        max_threads_per_sm=1536, max_warps_per_sm=48, max_ctas_per_sm=24,
        lat_global=600, lat_l2=280, lat_shared=30, lat_mma=33,
        l2_bytes_per_clk=5120, sustained_clock_ghz=2.52,
    ),
    "sm_90": ArchSpec(
        name="sm_90", gpu="H100 SXM5 80GB", sm_count=132, boost_clock_ghz=1.83,
        tensor_f16_f32_flop_per_clk_sm=4096,   # 989 TFLOPS dense (wgmma; mma.sync reaches about 2/3 of it)
        tensor_tf32_flop_per_clk_sm=2048,      # 495 TFLOPS dense
        dram_gb_s=3352.0, l2_bytes=50 * 2**20,
        smem_per_block=227 * 1024, smem_per_sm=228 * 1024, registers_per_sm=65536,
        max_threads_per_sm=2048, max_warps_per_sm=64, max_ctas_per_sm=32,
        lat_global=650, lat_l2=260, lat_shared=30, lat_mma=33,
        l2_bytes_per_clk=6600, sustained_clock_ghz=1.755, mma_sync_fraction=2.0 / 3.0,
        tma_bytes_per_clk=64, sms_per_tpc=2, lat_remote_arrive=260, l2_ingress_bytes_per_clk_sm=53,
    ),
}


def get_arch(name: str) -> ArchSpec:
    """The spec of ``name`` (``sm_80`` ...); raises KeyError naming the known archs.

    Callers turn the KeyError into a located :class:`~synth.errors.SynthError`.
    """
    try:
        return ARCHS[name]
    except KeyError:
        raise KeyError(f"unknown arch {name!r} (known: {', '.join(ARCHS)})") from None


__all__ = ["ArchSpec", "ARCHS", "get_arch", "REG_ALLOC_UNIT", "SMEM_RESERVED_PER_CTA"]

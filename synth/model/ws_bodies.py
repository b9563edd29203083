"""The sm_90 loop bodies posed to the warp-specialized model: the GEMM main loop, the persistent GEMM's tile loop,
and the FlashAttention forward KV loop; and :func:`gemm_design`, GEMM's design as the model's solutions.

Every cycle figure comes from :mod:`synth.arch` (sm_90) or :mod:`synth.model.hopper`'s conventions, or is one of the
figures docs/ws_model.md ("Costs") adds with its source and bound:

* TMA: ``bytes / tma_bytes_per_clk`` busy, ``lat_global`` latency (as :func:`synth.model.hopper.loop_cost`);
* wgmma: ``2 M N K / tensor_f16_f32_flop_per_clk_sm`` busy, the drain ``4 lat_mma`` before ``wait_group`` returns;
* FP32 pipe (FFMA / FADD / FMUL) 128 results per clock per SM, MUFU ``ex2`` 16, ALU (FMNMX, F2FP pack) 64
  (:data:`FMA_PER_CLK`, :data:`MUFU_PER_CLK`, :data:`ALU_PER_CLK`);
* a register C store (``st.global`` of f32) at ``smem_bytes_per_clk`` (the L1 / shared port).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..arch import get_arch
from .ws_body import WsBody, WsBuffer, WsMachine, WsOp, machine
from .ws_schedule import Pins, WsSchedule, solve_ws

FMA_PER_CLK = 128
"""FP32 FFMA / FADD / FMUL results per clock per SM on sm_90 (4 sub-partitions x 32 FP32 lanes: H100 whitepaper, SM
section; CUDA C++ Programming Guide, arithmetic instruction throughput, compute capability 9.0)."""
MUFU_PER_CLK = 16
"""``ex2`` results per clock per SM on sm_90: 4 per sub-partition (the same throughput table; the FlashAttention-3
paper's "3.9 TFLOPS of special functions" on H100 SXM5: 3.9e12 / (132 SMs x 1.83 GHz) = 16.1)."""
ALU_PER_CLK = 64
"""FMNMX and F2FP (f32 -> f16x2 pack) results per clock per SM: an assumption, half the FP32 rate (the throughput
table gives 64 for compare / min / max on recent compute capabilities; the pack's row varies, 16 to 64). Bound: at 16
the attention body's ALU work grows 4x, 384 -> 1,536 cycles at 128x128, still under its tensor work (2,048)."""
WGMMA_ISSUE = 1
"""Cycles a wgmma holds its warp group's stream to issue (one instruction; the descriptors are precomputed)."""
COPY_ISSUE = 20
"""Cycles a TMA copy holds the stream of the warp group issuing it (``arrive.expect_tx`` and the copy):
``barrier_cycles``, as :func:`synth.model.hopper.loop_cost` charges a warp group that issues its own two copies
``2 barrier_cycles`` per k-tile."""
DTYPE_BYTES = {"f16": 2, "bf16": 2}


def _mma_cycles(arch: str, m: int, n: int, k: int) -> int:
    return -(-2 * m * n * k // get_arch(arch).tensor_f16_f32_flop_per_clk_sm)


def _dtype(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype}: the sm_90 bodies take f16 or bf16")
    return DTYPE_BYTES[dtype]


def gemm_kloop_body(BM: int, BN: int, BK: int, dtype: str = "f16", arch: str = "sm_90", *, hold: int = 1,
                    max_depth: int = 16) -> WsBody:
    """One k-tile of the sm_90 GEMM main loop: TMA A and B into one ring slot (a stage), a wgmma accumulating into
    the ``BM x BN`` f32 accumulator. ``hold = 1`` releases a slot at the end of the step after its wait, the
    convention of :func:`synth.model.hopper.loop_cost` (the consumer holds ``K + 1`` slots); ``hold = 0`` right
    after ``wait_group`` (CUTLASS's and synth's kernels)."""
    a = get_arch(arch)
    b = _dtype(dtype)
    A, B = BM * BK * b, BN * BK * b
    ops = (
        WsOp("load_A", "tma", A // a.tma_bytes_per_clk, a.lat_global, writes=("stage",), split=False,
             issue=COPY_ISSUE),
        WsOp("load_B", "tma", B // a.tma_bytes_per_clk, a.lat_global, writes=("stage",), split=False,
             issue=COPY_ISSUE),
        WsOp("mma", "tensor", _mma_cycles(arch, BM, BN, BK), 0, reads=("stage",), reads_prev=("acc",),
             writes=("acc",), issue=WGMMA_ISSUE, hold=hold),
    )
    bufs = (WsBuffer("stage", "smem", A + B), WsBuffer("acc", "reg", BM * BN // 128, carried=True))
    return WsBody(f"gemm-kloop-{BM}x{BN}x{BK}-{dtype}", ops, bufs, BM, max_consumers=max(BM // 64, 2),
                  max_depth=max_depth, max_stage=max_depth + 1)


def gemm_tile_body(BM: int, BN: int, T: int, kloop: WsSchedule, arch: str = "sm_90") -> WsBody:
    """One output tile of a persistent sm_90 GEMM CTA: the main loop (``T`` k-tiles at the k-loop's II, a blocking
    inner loop that holds its warp group and the tensor cores) writing the accumulator, then the register epilogue
    storing ``BM x BN`` f32 through the L1 port. The k-loop's ring is ``smem_extra``."""
    a = get_arch(arch)
    ops = (
        WsOp("mainloop", "tensor", T * kloop.ii, 0, writes=("acc",), blocking=True, split=False),
        WsOp("epilogue", "lsu", -(-BM * BN * 4 // a.smem_bytes_per_clk), 0, reads=("acc",)),
    )
    bufs = (WsBuffer("acc", "reg", BM * BN // 128),)
    return WsBody(f"gemm-tiles-{BM}x{BN}-T{T}", ops, bufs, BM, smem_extra=kloop.smem, max_consumers=2,
                  max_stage=3, producer=True)


@dataclass(frozen=True)
class GemmDesign:
    """GEMM's design read off the two bodies' solutions."""

    kloop: WsSchedule
    tiles: WsSchedule

    @property
    def stages(self) -> int:
        return self.kloop.depth_of("stage")

    @property
    def k_pipe_mmas(self) -> int:
        return self.kloop.op("mma").groups

    @property
    def kind(self) -> str:
        """``ping-pong`` (alternating whole tiles), ``cooperative`` (rows split), or ``one consumer``."""
        if self.tiles.mode == "alternate":
            return "ping-pong"
        return "cooperative" if self.tiles.consumers > 1 else "one consumer"


def gemm_design(BM: int, BN: int, BK: int = 64, K: int = 4096, dtype: str = "f16", *,
                stages: Optional[int] = None, mach: Optional[WsMachine] = None, time_limit: float = 10.0,
                hold: int = 1) -> GemmDesign:
    """The k-loop body solved (stages, ``K_PIPE_MMAS``), then the tile body at its II (cooperative or ping-pong)."""
    mach = mach or machine()
    body = gemm_kloop_body(BM, BN, BK, dtype, mach.arch, hold=hold)
    # the main loop's consumers issue each k-tile together behind a producer (today's kernels): lockstep, one or
    # BM / 64 of them
    pins = Pins(mode="coop", producer=True, depth=(("stage", stages),) if stages is not None else ())
    kl = solve_ws(body, mach, pins=pins, time_limit=time_limit / 2)
    T = max(-(-K // BK), 1)
    tl = solve_ws(gemm_tile_body(BM, BN, T, kl, mach.arch), mach, time_limit=time_limit / 2)
    return GemmDesign(kl, tl)


def attention_body(head_dim: int, BM: int, BN: int, dtype: str = "f16", arch: str = "sm_90", *,
                   p_in_s: bool = False) -> WsBody:
    """One KV block of FlashAttention forward for a ``BM``-row Q tile: K and V through TMA rings, ``S = Q K^T`` and
    ``O += P V`` (P from registers) on wgmma, the online softmax on the consumers' pipes (row max, scale, ``exp2``,
    row sum, the f16 pack of P, the rescale of O). ``p_in_s``: P may be packed into S's registers (FA3's in-place
    conversion; the model chooses, at 3-5x the solve time), else P has registers of its own."""
    a = get_arch(arch)
    b = _dtype(dtype)
    d = head_dim
    kv = BN * d * b
    rows = BM // 64  # a per-row f32 vector: each thread of a 64-row warp group holds 2 of its rows (m64 layout)
    ops = (
        WsOp("load_K", "tma", kv // a.tma_bytes_per_clk, a.lat_global, writes=("K_s",), split=False,
             issue=COPY_ISSUE),
        WsOp("load_V", "tma", kv // a.tma_bytes_per_clk, a.lat_global, writes=("V_s",), split=False,
             issue=COPY_ISSUE),
        WsOp("qk", "tensor", _mma_cycles(arch, BM, BN, d), 0, reads=("Q_s", "K_s"), writes=("S",),
             issue=WGMMA_ISSUE),
        WsOp("rowmax", "alu", -(-BM * BN // ALU_PER_CLK), 0, reads=("S",), reads_prev=("m",),
             writes=("m", "corr")),
        WsOp("scale", "fma", -(-BM * BN // FMA_PER_CLK), 0, reads=("S", "m"), writes=("S",)),
        WsOp("exp2", "mufu", -(-BM * BN // MUFU_PER_CLK), 0, reads=("S",), writes=("S",)),
        WsOp("rowsum", "fma", -(-BM * BN // FMA_PER_CLK), 0, reads=("S", "corr"), reads_prev=("l",),
             writes=("l",)),
        WsOp("pack_P", "alu", -(-BM * BN // 2 // ALU_PER_CLK), 0, reads=("S",), writes=("P",)),
        WsOp("rescale_O", "fma", -(-BM * d // FMA_PER_CLK), 0, reads=("corr",), reads_prev=("O",),
             writes=("O",)),
        WsOp("pv", "tensor", _mma_cycles(arch, BM, d, BN), 0, reads=("P", "V_s", "O"), writes=("O",),
             issue=WGMMA_ISSUE),
    )
    bufs = (
        WsBuffer("Q_s", "smem", BM * d * b, once=True),
        WsBuffer("K_s", "smem", kv), WsBuffer("V_s", "smem", kv),
        WsBuffer("S", "reg", BM * BN // 128), WsBuffer("P", "reg", BM * BN // 256, alias="S" if p_in_s else None),
        WsBuffer("O", "reg", BM * d // 128, carried=True),
        WsBuffer("m", "reg", rows, carried=True), WsBuffer("l", "reg", rows, carried=True),
        WsBuffer("corr", "reg", rows),
    )
    return WsBody(f"attention-fwd-d{d}-{BM}x{BN}-{dtype}", ops, bufs, BM, max_consumers=4, max_depth=4,
                  max_stage=3)


@dataclass(frozen=True)
class Overlap:
    """A synchronous op of one consumer warp group running while a wgmma keeps the tensor cores busy."""

    sync_op: str
    sync_wg: int
    wgmma: str
    wgmma_wg: int
    iteration: int
    """The wgmma's iteration minus the synchronous op's (``+1``: the next block's wgmma)."""

    @property
    def kind(self) -> str:
        return "ping-pong" if self.sync_wg != self.wgmma_wg else "intra-warp-group"


def overlaps(body: WsBody, sched: WsSchedule) -> list[Overlap]:
    """Every (synchronous op, wgmma) pair whose busy intervals meet in the steady state, with the warp groups and
    the iteration distance: how a schedule hides the softmax under the tensor cores (FA3's two overlaps)."""
    ii, out = sched.ii, []
    offs = sched.offsets if sched.mode == "stagger" else (0,)
    for x in sched.ops:
        ox = body.op(x.name)
        if ox.unit not in ("fma", "mufu", "alu", "lsu"):
            continue
        for y in sched.ops:
            if not body.op(y.name).is_wgmma:
                continue
            for a, da in enumerate(offs):
                for b, db in enumerate(offs):
                    x0, x1 = x.start + da, x.start + da + x.duration
                    for n in range(-body.max_stage - 2, body.max_stage + 3):
                        y0 = y.start + db + n * ii
                        if x0 < y0 + y.duration and y0 < x1:
                            out.append(Overlap(x.name, a, y.name, b, n))
    return out


__all__ = ["Overlap", "overlaps", "gemm_kloop_body", "gemm_tile_body", "gemm_design", "GemmDesign", "attention_body", "FMA_PER_CLK",
           "MUFU_PER_CLK", "ALU_PER_CLK", "WGMMA_ISSUE"]

"""Tile configuration of the sm_90a GEMM and the Hopper loop it lowers to.

A :class:`Sm90Config` fixes the CTA tile (``bm`` x ``bn``, ``bk`` = 64 so that a K-major
f16 row of the tile is one 128-byte swizzle row), the pipeline depth ``stages``, the wgmma
groups a consumer keeps in flight before releasing a slot (``k_pipe_mmas``, CUTLASS's
``K_PIPE_MMAS``) and whether loads carry a predicate (``when``). Consumers are ``bm / 64``
warp groups (cooperative: each owns 64 rows of the tile, ``m64nBNk16`` wgmma).

Bounds (checked by :meth:`Sm90Config.check`): bm in {64, 128}; bn a multiple of 16 in
16..256 (wgmma N and the TMA box limit); stages 1..16 with shared memory
``stages * (bm + bn) * 128 + 1024`` bytes <= 232448 (227 KB, the sm_90 opt-in limit);
0 <= k_pipe_mmas < stages; split_k 1..64 (``synth.bounds.MAX_SPLIT_K``), without a load predicate;
persistent without split-K or a load predicate; ping-pong persistent, at most 128 accumulators per thread; epilogue ``register`` or ``tma_store`` (without split-K), with
1..4 staging buffers of ``64 x store_cols`` f32 per consumer warp group counted in the shared memory;
cluster ``1x1``, ``2x1`` (two CTAs of one tile column share B) or ``1x2`` (two CTAs of one tile row share A),
a cluster other than ``1x1`` without split-K, a load predicate or ping-pong (persistent: the clusters walk
cluster-sized tile groups, docs/hopper_cluster.md "Persistent clusters"), and with the shared operand's rows (``bn`` for ``2x1``, ``bm`` for ``1x2``) splitting into halves of whole 8-row swizzle atoms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...arch import get_arch
from ...bounds import MAX_SPLIT_K
from ...hopper.cluster_shape import CLUSTERS, ClusterShaped
from ...hopper.ir import HopperProgram
from ...hopper.loop import HopperLoop, Load
from ...hopper.store import MAX_STAGING
from ...lower.hopper_store import store_program
from ...lower.barriers import lower_hopper
from ...lower.cluster import lower_hopper_cluster

BK = 64
"""k-tile depth: 64 f16 = 128 bytes, one row of the 128-byte TMA/wgmma swizzle."""
SMEM_LIMIT = get_arch("sm_90").smem_per_block
"""Dynamic shared memory per CTA on sm_90 (227 KiB, the opt-in maximum: synth/arch.py)."""
ALIGN_PAD = 1024
"""Bytes added to the dynamic shared memory so the kernel can align its base to 1024 (swizzle atom)."""
DTYPES = ("f16", "bf16")
"""Element types of A and B (2 bytes each: the tile and byte counts do not depend on it)."""
EPILOGUES = ("register", "tma_store")
OUT_DTYPES = ("f32", "f16", "bf16")
"""Element types of C as stored (``Sm90Config.out_dtype``)."""
"""How C is stored (docs/hopper_kernel.md; docs/hopper_store.md for ``tma_store``)."""
ACTIVATIONS = ("none", "relu")
"""The activation applied to C's value as stored (``Sm90Config.activation``; docs/hopper_kernel.md, "Activation")."""
MAX_ACC_REGS = 128
"""f32 accumulators per consumer thread at most (of the 232 registers ``setmaxnreg`` gives it: the rest hold
descriptors, addresses and the epilogue's values; more spills)."""
PRODUCER_REGS = 40
"""``setmaxnreg.dec`` target of the producer warp group (CUTLASS's value)."""


@dataclass(frozen=True)
class Sm90Config(ClusterShaped):
    bm: int = 128
    bn: int = 128
    stages: int = 4
    k_pipe_mmas: int = 1
    load_when: Optional[str] = None
    """Predicate in ``k`` (the k-tile) and ``T`` for both loads (None: always). A k-tile whose
    loads are predicated off contributes nothing (the consumer skips its wgmma)."""
    bk: int = BK
    dtype: str = "f16"
    """Element type of A and B: ``f16`` or ``bf16`` (f32 accumulation either way)."""
    name: str = "gemm_sm90"
    """The lowered program's name (the problem's, in an output folder)."""
    split_k: int = 1
    """K splits (``gridDim.z``); each CTA runs the proven loop over its share of the k-tiles and the
    tile's last CTA sums the partials (docs/hopper_kernel.md, "Split-K"); 1: no split."""
    persistent: bool = False
    """A grid of any ``P >= 1`` CTAs walks the output tiles (grouped raster order, CTA ``b`` takes tiles
    ``b, b + P, ...``) with the pipeline state carried across its tiles (docs/hopper_kernel.md,
    "Persistent tiles"); with a cluster, ``P`` a multiple of its size and cluster ``q`` of ``P / 2`` takes the
    cluster-sized tile groups ``q, q + P / 2, ...`` (docs/hopper_cluster.md, "Persistent clusters"); False: one
    CTA per tile."""
    pingpong: bool = False
    """Two consumer warp groups take the persistent CTA's tiles in turn, each a whole ``64 x bn`` tile
    (``bm`` 64), their main loops serialized by the order barrier (docs/hopper_pingpong.md); needs
    ``persistent``. False: cooperative (the ``bm / 64`` warp groups split each tile's rows)."""
    epilogue: str = "register"
    """How C leaves the consumers: ``register`` (``st.global`` from the accumulators) or ``tma_store``
    (through shared staging buffers and ``cp.async.bulk.tensor`` stores, docs/hopper_store.md)."""
    staging: int = 2
    """TMA-store epilogue: staging buffers per consumer warp group (1 .. 4)."""
    out_dtype: str = "f32"
    """The element type of C as stored: ``f32``, or ``f16`` / ``bf16`` (rounded to nearest even from the f32
    result; the TMA-store epilogue only). ``C_in`` is f32 either way."""
    cluster: str = "1x1"
    """Thread-block cluster shape (:data:`CLUSTERS`): ``1x1`` none; ``2x1`` / ``1x2`` a pair of CTAs that load the
    shared operand's tile once, each half multicast into both (docs/hopper_cluster.md)."""
    activation: str = "none"
    """The activation of C's value as stored (:data:`ACTIVATIONS`): ``none``, or ``relu``: ``C = max(alpha acc + beta
    C_in, 0)`` at the final write only (after split-K's reduction, before the rounding to ``out_dtype``); it changes
    no synchronization (docs/hopper_kernel.md, "Activation")."""

    @property
    def a_box_rows(self) -> int:
        """Rows of A one TMA copy loads: ``bm``, or ``bm / 2`` where A is shared (each CTA loads half)."""
        return self.bm // 2 if self.shared_operand == "A" else self.bm

    @property
    def b_box_rows(self) -> int:
        """Rows of B one TMA copy loads: ``bn``, or ``bn / 2`` where B is shared (each CTA loads half)."""
        return self.bn // 2 if self.shared_operand == "B" else self.bn

    @property
    def store_cols(self) -> int:
        """Columns of one TMA-store sub-tile (64 rows of f32): 32, or 16 where ``bn`` is not a multiple of 32."""
        return 32 if self.bn % 32 == 0 else 16

    @property
    def staging_bytes(self) -> int:
        """Shared memory of the TMA-store staging buffers, all consumer warp groups (0 for ``register``)."""
        if self.epilogue != "tma_store":
            return 0
        return self.consumers * self.staging * 64 * self.store_cols * self.out_bytes

    @property
    def out_bytes(self) -> int:
        """Bytes of one element of C as stored: 4 for f32, 2 for f16 and bf16."""
        return 4 if self.out_dtype == "f32" else 2

    @property
    def consumers(self) -> int:
        """Consumer warp groups of the CTA: 2 for ping-pong, else ``bm / 64``."""
        return 2 if self.pingpong else self.bm // 64

    @property
    def row_blocks(self) -> int:
        """64-row wgmma blocks of one consumer warp group's tile: ``bm / 64`` for ping-pong (each warp group
        computes a whole tile), 1 for cooperative (each its 64 rows)."""
        return self.bm // 64 if self.pingpong else 1

    @property
    def ring_consumers(self) -> int:
        """Consumer warp groups that read each ring slot: 1 for ping-pong (one takes the tile), else all."""
        return 1 if self.pingpong else self.consumers

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def a_slot_bytes(self) -> int:
        return self.bm * self.bk * 2

    @property
    def b_slot_bytes(self) -> int:
        return self.bn * self.bk * 2

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory to launch with: slots, 2 * stages barriers, alignment pad."""
        return (self.stages * (self.a_slot_bytes + self.b_slot_bytes) + self.staging_bytes + 16 * self.stages
                + (16 if self.pingpong else 0) + ALIGN_PAD)

    @property
    def consumer_regs(self) -> int:
        """``setmaxnreg.inc`` target: the registers the producer gives up, shared by the consumers
        (a multiple of 8, at most 240)."""
        total = 65536 // 128
        return min(240, ((total - PRODUCER_REGS) // self.consumers) // 8 * 8)

    def check(self) -> None:
        """ValueError naming the bound a field breaks."""
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: expected one of {DTYPES}")
        if self.bk != BK:
            raise ValueError(f"bk must be {BK} (one 128-byte swizzle row of f16)")
        if self.bm not in (64, 128):
            raise ValueError(f"bm {self.bm}: expected 64 or 128 (one or two consumer warp groups)")
        if self.bn % 16 or not 16 <= self.bn <= 256:
            raise ValueError(f"bn {self.bn}: expected a multiple of 16 in 16..256")
        if not 1 <= self.stages <= 16:
            raise ValueError(f"stages {self.stages} outside 1..16")
        if not 0 <= self.k_pipe_mmas < self.stages:
            raise ValueError(f"k_pipe_mmas {self.k_pipe_mmas} outside 0..stages - 1")
        if not 1 <= self.split_k <= MAX_SPLIT_K:
            raise ValueError(f"split_k {self.split_k} outside 1..{MAX_SPLIT_K}")
        if self.split_k > 1 and self.load_when is not None:
            raise ValueError("a load predicate names k and T of the whole loop; split-K runs parts of it")
        if self.persistent and self.split_k > 1:
            raise ValueError("persistent tiles with split-K are not built: a persistent CTA computes whole tiles")
        if self.persistent and self.load_when is not None:
            raise ValueError("a load predicate names k and T of one tile's loop; a persistent CTA's ring runs "
                             "many tiles")
        if self.epilogue not in EPILOGUES:
            raise ValueError(f"epilogue {self.epilogue!r}: expected one of {EPILOGUES}")
        if self.epilogue == "tma_store" and self.split_k > 1:
            raise ValueError("a TMA-store epilogue with split-K is not built: the split's last CTA sums through "
                             "global memory")
        if self.out_dtype not in OUT_DTYPES:
            raise ValueError(f"out_dtype {self.out_dtype!r}: expected one of {OUT_DTYPES}")
        if self.out_dtype != "f32" and self.epilogue != "tma_store":
            raise ValueError(f"out_dtype {self.out_dtype}: C is stored as f16 or bf16 by the TMA-store epilogue only")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r}: expected one of {ACTIVATIONS}")
        if not 1 <= self.staging <= MAX_STAGING:
            raise ValueError(f"staging {self.staging} outside 1..{MAX_STAGING}")
        if self.pingpong and not self.persistent:
            raise ValueError("ping-pong consumers take whole tiles of a persistent CTA: set persistent")
        if self.row_blocks * self.bn // 2 > MAX_ACC_REGS:
            raise ValueError(f"a {self.bm}x{self.bn} tile per warp group holds {self.row_blocks * self.bn // 2} "
                             f"accumulators per thread, above {MAX_ACC_REGS}: the kernel would spill (CUTLASS's "
                             "128x256 ping-pong does); use bn <= 128 with bm 128")
        if self.cluster not in CLUSTERS:
            raise ValueError(f"cluster {self.cluster!r}: expected one of {CLUSTERS}")
        if self.cluster != "1x1":
            for flag, why in ((self.split_k > 1, "split-K"), (self.load_when is not None, "a load predicate"),
                              (self.pingpong, "ping-pong consumers")):
                if flag:
                    raise ValueError(f"cluster {self.cluster} with {why} is not built (docs/hopper_cluster.md, "
                                     "\"Not done\"): use cluster 1x1")
            rows = self.bn if self.shared_operand == "B" else self.bm
            if rows % 16:
                raise ValueError(f"cluster {self.cluster}: the shared operand's {rows} rows do not split into two "
                                 "halves of whole 8-row swizzle atoms (use a multiple of 16)")
        if self.smem_bytes > SMEM_LIMIT:
            raise ValueError(f"{self.smem_bytes} bytes of shared memory exceed {SMEM_LIMIT}: use fewer stages")

    def hopper_loop(self) -> HopperLoop:
        """The main loop to lower: TMA loads of A and B (full box bytes), the wgmma op."""
        loads = (Load("load_A", "A", self.a_slot_bytes, self.load_when),
                 Load("load_B", "B", self.b_slot_bytes, self.load_when))
        return HopperLoop(self.name, loads, "mma", self.stages, self.k_pipe_mmas, self.ring_consumers)

    def program(self) -> HopperProgram:
        """The lowered warp-specialized program (pure; see :func:`synth.lower.barriers.lower_hopper`, and for a
        cluster :func:`synth.lower.cluster.lower_hopper_cluster`, whose roles and barriers name their CTA)."""
        self.check()
        if self.cluster != "1x1":
            return lower_hopper_cluster(self.hopper_loop(), self.cluster_size, self.shared_operand)
        return lower_hopper(self.hopper_loop())

    def store_program(self):
        """The TMA-store epilogue's program of one consumer warp group (:func:`synth.hopper.store.store_program`);
        None for the register epilogue."""
        self.check()
        return store_program(self.staging, name=f"{self.name}.store") if self.epilogue == "tma_store" else None


__all__ = ["Sm90Config", "BK", "CLUSTERS", "SMEM_LIMIT", "PRODUCER_REGS", "DTYPES", "EPILOGUES", "OUT_DTYPES",
           "ACTIVATIONS"]

"""The sm_90a GEMM kernel's design: one frozen value composed of three parts, the way CUTLASS 3.x composes
``GemmUniversal<CollectiveMainloop, CollectiveEpilogue, TileScheduler>`` (docs/architecture.md, "The design value").

* :class:`Mainloop`: the CTA tile ``bm x bn x bk`` (``bk`` = 64: a K-major row of the tile is one 128-byte swizzle
  row), the operand type, the TMA/wgmma ring (``stages`` slots per operand, ``k_pipe_mmas`` wgmma groups a consumer
  keeps in flight before releasing a slot, CUTLASS's ``K_PIPE_MMAS``), the consumer warp groups (cooperative: the
  ``bm / 64`` warp groups split each tile's rows; ping-pong: two warp groups take whole ``bm x bn`` tiles in turn)
  and an optional load predicate.
* :class:`TileScheduler`: which tiles a CTA computes: one tile per CTA (or ``split_k`` CTAs per tile), or a
  persistent grid walking the tiles; on one CTA or a ``2x1`` / ``1x2`` thread-block cluster sharing an operand.
* :class:`Epilogue`: how C leaves the consumers: from registers or through shared staging buffers and TMA stores,
  its element type as stored and its activation.

Every reader of a design takes this value: the problem reader (:mod:`synth.hopper.problem`) builds it, CP-SAT's
pipeline choice and the design choice price it, the search ranks it, the lowering turns it into the proven program
(:func:`synth.lower.hopper_design.design_program`), the emitter composes its kernel from one component per part
(:mod:`synth.emit.sm90`), the runner launches it. The one other reader of a design is the trusted checker
(synth/trusted/), which reads the folder's problem.yaml on purpose without this module.

Each part states its own legality (:meth:`Mainloop.issues` ...), keyed by the problem file's key so a refusal keeps
its file and line, worded for the problem file with its fix (:class:`Issue`); :meth:`KernelDesign.issues` adds the
rules that join two parts and the shared-memory bound, and with a problem's shape the shape's rules, in the order a
reader fixes them. This is the one statement of each rule: the problem reader reads the file and reports the first
of these (docs/architecture.md, "The design value"). The shared memory (:meth:`KernelDesign.smem_bytes`), the
consumer counts, the accumulators per thread and the store sub-tile width are computed here and nowhere else. The kernel's constants (the machine facts the kernel is built on) are the module's constants.

Pure: no solver, no file, nothing of the layers above.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field, fields
from typing import Optional

from ..arch import get_arch
from ..bounds import MAX_SPLIT_K
from .cluster_shape import CLUSTERS, ClusterShaped
from .loop import MAX_STAGES, HopperLoop, Load
from .store import DEFAULT_STAGING, MAX_STAGING

BK = 64
"""k-tile depth: 64 two-byte elements are one 128-byte swizzle row (of the TMA box and the wgmma descriptor)."""
BM_CHOICES = (64, 128)
"""Tile rows: one or two consumer warp groups of 64 rows (wgmma m64)."""
SMEM_LIMIT = get_arch("sm_90").smem_per_block
"""Dynamic shared memory per CTA on sm_90 (227 KiB, the opt-in maximum: synth/arch.py)."""
ALIGN_PAD = 1024
"""Bytes added to the dynamic shared memory so the kernel can align its base to 1024 (the swizzle atom)."""
BARRIER_BYTES = 16
"""Shared memory of one stage's two mbarriers (full and empty, 8 bytes each); ping-pong's two order mbarriers
take as much again."""
DTYPES = ("f16", "bf16")
"""Element types of A and B (2 bytes each: the tile and byte counts do not depend on it; f32 accumulation)."""
EPILOGUES = ("register", "tma_store")
"""How C leaves the consumers (docs/hopper_kernel.md; docs/hopper_store.md for ``tma_store``)."""
OUT_DTYPES = ("f32", "f16", "bf16")
"""Element types of C as stored (f16 and bf16 by the TMA-store epilogue only)."""
ACTIVATIONS = ("none", "relu")
"""The activation applied to C's value as stored (docs/hopper_kernel.md, "Activation")."""
MAX_ACC_REGS = 128
"""f32 accumulators per consumer thread at most (of the 232 registers ``setmaxnreg`` gives it: the rest hold
descriptors, addresses and the epilogue's values; more spills)."""
PRODUCER_REGS = 40
"""``setmaxnreg.dec`` target of the producer warp group (CUTLASS's value)."""
WARP_GROUP_THREADS = 128
"""Threads of one warp group (four warps)."""


@dataclass(frozen=True)
class Issue:
    """Why a design cannot be built: the problem file's ``key`` the refusal belongs to (``tile.BN``, ``stages``,
    ``cluster``, ``shape``, ...; its line is where the refusal points), the reason, the ``rule`` broken (the
    search's exclusion table counts points per rule: docs/search.md, section 10) and the ``fix``: what to change, in
    the problem file's terms. The problem reader (:func:`synth.hopper.problem.hopper_gemm_from_doc`) refuses a file
    with the message and the fix as they are written here."""

    key: str
    message: str
    rule: str = "kernel"
    fix: str = field(kw_only=True)
    other: str = field(default="", kw_only=True)
    """Another problem key the rule joins (``split_k``, ``pingpong``, ``epilogue``), or empty. Where the message
    names its value as ``(key: value)``, :meth:`text` can add that value's line; a problem whose ``other`` key is
    ``auto`` reports the issue after the others (synth's choice of that key is still to come)."""

    def text(self, other_line: Optional[int] = None) -> str:
        """The message, with ``at line N`` after :attr:`other`'s ``(key: value)`` where ``other_line`` is given
        (the line of that key in the problem file) and the message names it; else the message itself."""
        mark = f"({self.other}: "
        start = self.message.find(mark) if self.other and other_line else -1
        if start < 0:
            return self.message
        end = self.message.index(")", start)
        return f"{self.message[:end]} at line {other_line}{self.message[end:]}"


UNCHOSEN = "pipeline-chosen"
"""The rule of a design whose ``stages`` or ``k_pipe_mmas`` is not chosen yet (None): CP-SAT chooses them for a
problem that leaves them ``auto``, so the problem reader does not refuse it."""


def consumers_of(bm: int, pingpong: bool = False) -> int:
    """Consumer warp groups of a CTA: 2 for ping-pong, else one per 64 rows of a ``bm``-row tile (wgmma m64)."""
    return 2 if pingpong else bm // 64


def warps_of(bm: int, pingpong: bool = False) -> int:
    """Warps of the kernel: a producer warp group and the consumers' (:func:`consumers_of`)."""
    return 4 * (1 + consumers_of(bm, pingpong))


@dataclass(frozen=True)
class Mainloop:
    """The TMA/wgmma main loop (module docstring): the tile, the ring and the consumer warp groups."""

    bm: int = 128
    bn: int = 128
    stages: Optional[int] = 4
    """Slots per operand (1 .. :data:`MAX_STAGES`); None in a problem's design until CP-SAT chooses it."""
    k_pipe_mmas: Optional[int] = 1
    """wgmma groups a consumer keeps in flight before releasing a slot (0 .. stages - 1); None until chosen."""
    dtype: str = "f16"
    """Element type of A and B: ``f16`` or ``bf16`` (f32 accumulation either way)."""
    pingpong: bool = False
    """Two consumer warp groups take the persistent CTA's tiles in turn, each a whole ``bm x bn`` tile, their main
    loops serialized by the order barrier (docs/hopper_pingpong.md); needs a persistent scheduler. False:
    cooperative (the ``bm / 64`` warp groups split each tile's rows)."""
    load_when: Optional[str] = None
    """Predicate in ``k`` (the k-tile) and ``T`` for both loads (None: always). A k-tile whose loads are predicated
    off contributes nothing (the consumer skips its wgmma)."""
    bk: int = BK

    @property
    def consumers(self) -> int:
        """Consumer warp groups of the CTA: 2 for ping-pong, else ``bm / 64``."""
        return consumers_of(self.bm, self.pingpong)

    @property
    def ring_consumers(self) -> int:
        """Consumer warp groups that read each ring slot: 1 for ping-pong (one takes the tile), else all."""
        return 1 if self.pingpong else self.consumers

    @property
    def row_blocks(self) -> int:
        """64-row wgmma blocks of one consumer warp group's tile: ``bm / 64`` for ping-pong (each warp group
        computes a whole tile), 1 for cooperative (each its 64 rows)."""
        return self.bm // 64 if self.pingpong else 1

    @property
    def a_slot_bytes(self) -> int:
        return self.bm * self.bk * 2

    @property
    def b_slot_bytes(self) -> int:
        return self.bn * self.bk * 2

    @property
    def stage_bytes(self) -> int:
        """Shared memory of one stage: an A and a B slot and their two mbarriers."""
        return self.a_slot_bytes + self.b_slot_bytes + BARRIER_BYTES

    @property
    def order_bytes(self) -> int:
        """Shared memory of ping-pong's two order mbarriers (0 for cooperative consumers)."""
        return BARRIER_BYTES if self.pingpong else 0

    def smem_bytes(self) -> int:
        """Shared memory of the ring: ``stages`` stages and the order mbarriers."""
        return self.stages * self.stage_bytes + self.order_bytes

    @property
    def accumulators(self) -> int:
        """f32 accumulators per consumer thread: a warp group's share of the tile (64 rows, or a ping-pong warp
        group's whole ``bm``) times ``bn``, over its 128 threads."""
        return self.row_blocks * 64 * self.bn // WARP_GROUP_THREADS

    def issues(self, K: Optional[int] = None) -> list[Issue]:
        """The bounds of the part alone (module docstring), in the order a reader fixes them; with ``K`` (a
        problem's), :meth:`shape_issues` after the pipeline's."""
        out = []
        if self.dtype not in DTYPES:
            out.append(Issue("dtype", f"dtype {self.dtype!r}: expected one of {DTYPES}",
                             fix=f"use dtype: {' or dtype: '.join(DTYPES)}"))
        if self.bk != BK:
            out.append(Issue("tile.BK", f"tile.BK {self.bk}: the Hopper main loop loads k-tiles of {BK} elements (one "
                             "128-byte swizzle row of 2-byte operands)", fix=f"use BK: {BK}, or mainloop: cp_async"))
        if self.bm not in BM_CHOICES:
            out.append(Issue("tile.BM", f"tile.BM {self.bm}: the Hopper kernel has one consumer warp group per 64 rows, "
                             "one or two of them", fix=f"use BM: {' or BM: '.join(map(str, BM_CHOICES))}"))
        if self.bn % 16 or not 16 <= self.bn <= 256:
            out.append(Issue("tile.BN", f"tile.BN {self.bn}: wgmma's N and the TMA box take a multiple of 16 in 16..256",
                             fix="use BN: 64, 128, 192 or 256 (any multiple of 16 up to 256)"))
        if self.stages is None or self.k_pipe_mmas is None:
            out.append(Issue("stages", "stages and k_pipe_mmas are not chosen yet", UNCHOSEN,
                             fix="pin stages: and k_pipe_mmas:, or leave them auto for synth solve (CP-SAT) to choose"))
        elif not 1 <= self.stages <= MAX_STAGES:
            out.append(Issue("stages", f"stages {self.stages} outside 1..{MAX_STAGES}",
                             fix=f"use a value in 1..{MAX_STAGES}, or auto"))
        elif self.k_pipe_mmas < 0:
            out.append(Issue("k_pipe_mmas", f"k_pipe_mmas {self.k_pipe_mmas} outside 0..{MAX_STAGES - 1}",
                             "k_pipe_mmas<stages", fix=f"use a value in 0..{self.stages - 1}, or auto"))
        elif self.k_pipe_mmas >= self.stages:
            out.append(Issue("k_pipe_mmas", f"k_pipe_mmas {self.k_pipe_mmas} with {self.stages} stages: a consumer "
                             "holding as many groups as there are slots starves the producer", "k_pipe_mmas<stages",
                             fix=f"use k_pipe_mmas below {self.stages}, or auto"))
        if K is not None:
            out += self.shape_issues(K)
        if self.accumulators > MAX_ACC_REGS:
            if self.pingpong:
                out.append(Issue("pingpong", f"ping-pong consumers each hold a whole {self.bm}x{self.bn} tile: "
                                 f"{self.accumulators} accumulators per thread, above {MAX_ACC_REGS} (the kernel would "
                                 "spill, as CUTLASS's 128x256 ping-pong does)",
                                 fix="use BN <= 128 with BM 128, or BM 64, or remove pingpong:"))
            else:
                out.append(Issue("tile.BN", f"a consumer warp group's 64x{self.bn} tile holds {self.accumulators} "
                                 f"accumulators per thread, above {MAX_ACC_REGS}: the kernel would spill",
                                 fix="use BN <= 256"))
        return out

    def shape_issues(self, K: int) -> list[Issue]:
        """What keeps the main loop from a problem's ``K``: TMA's 16-byte row strides of A and B (``K`` a multiple
        of 8)."""
        if K % 8:
            return [Issue("shape", f"shape.K {K}: TMA needs the row stride of A and B (2 K bytes) to be a multiple of "
                          "16", "tma-16B", fix="use K a multiple of 8")]
        return []


@dataclass(frozen=True)
class TileScheduler(ClusterShaped):
    """Which output tiles a CTA computes (module docstring)."""

    persistent: bool = False
    """A grid of any ``P >= 1`` CTAs walks the output tiles (grouped raster order, CTA ``b`` takes tiles ``b, b + P,
    ...``) with the pipeline state carried across its tiles (docs/hopper_kernel.md, "Persistent tiles"); with a
    cluster, ``P`` a multiple of its size and cluster ``q`` of ``P / 2`` takes the cluster-sized tile groups ``q, q
    + P / 2, ...`` (docs/hopper_cluster.md, "Persistent clusters"); False: one CTA per tile."""
    split_k: int = 1
    """K splits (``gridDim.z``); each CTA runs the proven loop over its share of the k-tiles and the tile's last
    CTA sums the partials (docs/hopper_kernel.md, "Split-K"); 1: no split."""
    cluster: str = "1x1"
    """Thread-block cluster shape (:data:`CLUSTERS`): ``1x1`` none; ``2x1`` / ``1x2`` a pair of CTAs that load the
    shared operand's tile once, each half multicast into both (docs/hopper_cluster.md)."""

    def issues(self) -> list[Issue]:
        """The bounds of the part alone, in the order a reader fixes them."""
        out = []
        if not 1 <= self.split_k <= MAX_SPLIT_K:
            out.append(Issue("split_k", f"split_k {self.split_k} outside 1..{MAX_SPLIT_K}",
                             fix=f"use a value in 1..{MAX_SPLIT_K}"))
        if self.persistent and self.split_k > 1:
            out.append(Issue("persistent", f"persistent tiles with split_k = {self.split_k} are not built: a "
                             "persistent CTA computes whole tiles", fix="remove persistent:, or use split_k: 1"))
        if self.cluster not in CLUSTERS:
            out.append(Issue("cluster", f"cluster {self.cluster!r}: expected one of {CLUSTERS}",
                             fix="write cluster: 2x1 or 1x2, or remove it (1x1: no cluster)"))
        elif self.cluster != "1x1" and self.split_k > 1:
            out.append(Issue("cluster", f"cluster {self.cluster} with split_k = {self.split_k} (split_k: "
                             f"{self.split_k}) is not built: {CLUSTER_NOT_DONE}", fix="use split_k: 1, or use cluster: 1x1",
                             other="split_k"))
        return out


CLUSTER_NOT_DONE = ("a cluster kernel's CTA pair computes whole tiles with cooperative consumers (docs/hopper_cluster.md, "
                    "\"Not done\")")
"""Why a cluster kernel is not built with split-K or ping-pong consumers."""


@dataclass(frozen=True)
class Epilogue:
    """How C leaves the consumers (module docstring)."""

    kind: str = "register"
    """``register`` (``st.global`` from the accumulators) or ``tma_store`` (through shared staging buffers and
    ``cp.async.bulk.tensor`` stores, docs/hopper_store.md)."""
    out_dtype: str = "f32"
    """The element type of C as stored: ``f32``, or ``f16`` / ``bf16`` (rounded to nearest even from the f32
    result; the TMA-store epilogue only). ``C_in`` is f32 either way."""
    activation: str = "none"
    """:data:`ACTIVATIONS`: ``none``, or ``relu``: ``C = max(alpha acc + beta C_in, 0)`` at the final write only
    (after split-K's reduction, before the rounding to ``out_dtype``); it changes no synchronization."""
    staging: int = DEFAULT_STAGING
    """TMA-store epilogue: staging buffers per consumer warp group (1 .. :data:`MAX_STAGING`)."""

    @property
    def out_bytes(self) -> int:
        """Bytes of one element of C as stored: 4 for f32, 2 for f16 and bf16."""
        return 4 if self.out_dtype == "f32" else 2

    @staticmethod
    def store_cols(bn: int) -> int:
        """Columns of one TMA-store sub-tile (64 rows): 32, or 16 where ``bn`` is not a multiple of 32."""
        return 32 if bn % 32 == 0 else 16

    def smem_bytes(self, consumers: int, bn: int) -> int:
        """Shared memory of the staging buffers of ``consumers`` warp groups (0 for ``register``)."""
        if self.kind != "tma_store":
            return 0
        return consumers * self.staging * 64 * self.store_cols(bn) * self.out_bytes

    def issues(self, N: Optional[int] = None) -> list[Issue]:
        """The bounds of the part alone, in the order a reader fixes them; with ``N`` (a problem's),
        :meth:`shape_issues` last."""
        out = []
        if self.kind not in EPILOGUES:
            out.append(Issue("epilogue", f"epilogue {self.kind!r}: expected one of {EPILOGUES}",
                             fix="write epilogue: tma_store, or remove it (register)"))
        if self.out_dtype not in OUT_DTYPES:
            out.append(Issue("out_dtype", f"out_dtype {self.out_dtype!r}: expected one of {OUT_DTYPES}",
                             fix="write out_dtype: f16 or bf16 (with epilogue: tma_store), or remove it (f32)"))
        elif self.out_dtype != "f32" and self.kind != "tma_store":
            out.append(Issue("out_dtype", f"out_dtype {self.out_dtype}: C is stored as f16 or bf16 by the TMA-store "
                             "epilogue only", fix="add epilogue: tma_store, or remove out_dtype:", other="epilogue"))
        if self.activation not in ACTIVATIONS:
            out.append(Issue("activation", f"activation {self.activation!r}: expected one of {ACTIVATIONS}",
                             fix="write activation: relu, or remove it (none)"))
        if not 1 <= self.staging <= MAX_STAGING:
            out.append(Issue("epilogue", f"staging {self.staging} outside 1..{MAX_STAGING}",
                             fix=f"use a value in 1..{MAX_STAGING}"))
        if N is not None:
            out += self.shape_issues(N)
        return out

    def shape_issues(self, N: int) -> list[Issue]:
        """What keeps the epilogue from a problem's ``N``: a TMA store (the ``tma_store`` kind, and every f16 or
        bf16 C) needs C's row stride, ``out_bytes N``, a multiple of 16 bytes."""
        per = 16 // self.out_bytes
        if (self.kind == "tma_store" or self.out_dtype != "f32") and N % per:
            of = "" if self.out_dtype == "f32" else f" of {self.out_dtype}"
            other = "epilogue: register" if self.out_dtype == "f32" else "out_dtype: f32"
            return [Issue("shape", f"shape.N {N}: a TMA store{of} needs C's row stride ({self.out_bytes} N bytes) to be "
                          "a multiple of 16", "tma-store-16B", fix=f"use N a multiple of {per}, or {other}")]
        return []


FLAT = {"bm": "mainloop", "bn": "mainloop", "stages": "mainloop", "k_pipe_mmas": "mainloop", "dtype": "mainloop",
        "pingpong": "mainloop", "load_when": "mainloop", "bk": "mainloop",
        "persistent": "scheduler", "split_k": "scheduler", "cluster": "scheduler",
        "out_dtype": "output", "activation": "output", "staging": "output"}
"""Each knob's part (``epilogue``, the kind, is the epilogue part's ``kind``)."""


AUTO_VALUES = {"persistent": (False, True), "pingpong": (False, True), "epilogue": EPILOGUES, "cluster": CLUSTERS}
"""The values of each design key a problem may leave ``auto`` (docs/hopper_design.md), in the order synth tries
them (:meth:`KernelDesign.auto_variants`)."""


@dataclass(frozen=True)
class KernelDesign(ClusterShaped):
    """The sm_90a GEMM kernel (module docstring): a :class:`Mainloop`, a :class:`TileScheduler` and an
    :class:`Epilogue` (the field ``output``), and the lowered program's ``name``.

    The knobs read flat (``d.bm``, ``d.stages``, ``d.persistent``, ``d.epilogue`` for the epilogue's kind, ...)
    and are set by :meth:`of` / :meth:`with_`; each is stored once, in its part."""

    mainloop: Mainloop = Mainloop()
    scheduler: TileScheduler = TileScheduler()
    output: Epilogue = Epilogue()
    name: str = "gemm_sm90"
    """The lowered program's name (the problem's, in an output folder)."""

    @classmethod
    def of(cls, *, name: str = "gemm_sm90", epilogue: str = "register", **knobs) -> "KernelDesign":
        """The design with these knobs (:data:`FLAT`; ``epilogue`` the epilogue's kind), the rest at their
        defaults. TypeError for a knob that is not one."""
        return cls(name=name).with_(epilogue=epilogue, **knobs)

    def with_(self, **knobs) -> "KernelDesign":
        """This design with some knobs changed (:meth:`of`'s names, and ``name``)."""
        parts = {"mainloop": {}, "scheduler": {}, "output": {}}
        name = knobs.pop("name", self.name)
        if "epilogue" in knobs:
            parts["output"]["kind"] = knobs.pop("epilogue")
        for k, v in knobs.items():
            if k not in FLAT:
                raise TypeError(f"KernelDesign has no knob {k!r}")
            parts[FLAT[k]][k] = v
        new = {p: (_replaced(getattr(self, p), kv) if kv else getattr(self, p)) for p, kv in parts.items()}
        return KernelDesign(new["mainloop"], new["scheduler"], new["output"], name).recast(type(self))

    def as_design(self) -> "KernelDesign":
        """The design itself (a subclass's value, such as the search's point, as a plain :class:`KernelDesign`)."""
        return self.recast(KernelDesign)

    def recast(self, cls: type) -> "KernelDesign":
        """The same parts and name as a value of ``cls`` (this class or a subclass that adds no field, such as the
        search's point, whose constructor may take other names: the fields are set, not passed)."""
        out = object.__new__(cls)
        self.copy_into(out)
        return out

    def copy_into(self, other: "KernelDesign") -> None:
        """Set ``other``'s fields (a value under construction) to this design's."""
        for name in field_names(KernelDesign):
            object.__setattr__(other, name, getattr(self, name))

    # The search hashes a design millions of times (its caches are keyed by it): the hash of the value is kept once
    # computed. It is left out of the pickled state, since str hashes differ between processes (Dask workers).
    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.mainloop, self.scheduler, self.output, self.name))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    # the knobs, read flat -------------------------------------------------------------------------------------
    bm = property(lambda self: self.mainloop.bm)
    bn = property(lambda self: self.mainloop.bn)
    bk = property(lambda self: self.mainloop.bk)
    stages = property(lambda self: self.mainloop.stages)
    k_pipe_mmas = property(lambda self: self.mainloop.k_pipe_mmas)
    dtype = property(lambda self: self.mainloop.dtype)
    pingpong = property(lambda self: self.mainloop.pingpong)
    load_when = property(lambda self: self.mainloop.load_when)
    persistent = property(lambda self: self.scheduler.persistent)
    split_k = property(lambda self: self.scheduler.split_k)
    cluster = property(lambda self: self.scheduler.cluster)
    epilogue = property(lambda self: self.output.kind, doc="The epilogue's kind: ``register`` or ``tma_store``.")
    out_dtype = property(lambda self: self.output.out_dtype)
    activation = property(lambda self: self.output.activation)
    staging = property(lambda self: self.output.staging)

    def knobs(self) -> dict:
        """Every knob by its flat name (:meth:`of` rebuilds the design from them)."""
        return {"name": self.name, "epilogue": self.epilogue, **{k: getattr(self, k) for k in FLAT}}

    # derived counts -------------------------------------------------------------------------------------------
    @property
    def consumers(self) -> int:
        return self.mainloop.consumers

    @property
    def ring_consumers(self) -> int:
        return self.mainloop.ring_consumers

    @property
    def row_blocks(self) -> int:
        return self.mainloop.row_blocks

    @property
    def warps(self) -> int:
        return 4 * (1 + self.consumers)

    @property
    def threads(self) -> int:
        return WARP_GROUP_THREADS * (1 + self.consumers)

    @property
    def a_slot_bytes(self) -> int:
        return self.mainloop.a_slot_bytes

    @property
    def b_slot_bytes(self) -> int:
        return self.mainloop.b_slot_bytes

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
        """Columns of one TMA-store sub-tile: 32, or 16 where ``bn`` is not a multiple of 32."""
        return Epilogue.store_cols(self.bn)

    @property
    def out_bytes(self) -> int:
        return self.output.out_bytes

    @property
    def staging_bytes(self) -> int:
        """Shared memory of the TMA-store staging buffers, all consumer warp groups (0 for ``register``)."""
        return self.output.smem_bytes(self.consumers, self.bn)

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory to launch with: the ring (slots, two mbarriers per stage, ping-pong's order
        mbarriers), the staging buffers, the alignment pad."""
        return self.mainloop.smem_bytes() + self.staging_bytes + ALIGN_PAD

    def fixed_smem_bytes(self) -> int:
        """The shared memory that does not grow with ``stages`` (ping-pong's order mbarriers, the staging buffers,
        the alignment pad; whether ``stages`` is chosen or not)."""
        return self.mainloop.order_bytes + self.staging_bytes + ALIGN_PAD

    def max_stages(self, limit: int = SMEM_LIMIT) -> int:
        """Most stages within ``limit`` bytes and :data:`MAX_STAGES` (0 when not even one fits)."""
        return max(0, min(MAX_STAGES, (limit - self.fixed_smem_bytes()) // self.mainloop.stage_bytes))

    @property
    def consumer_regs(self) -> int:
        """``setmaxnreg.inc`` target: the registers the producer gives up, shared by the consumers (a multiple of
        8, at most 240)."""
        total = 65536 // WARP_GROUP_THREADS
        return min(240, ((total - PRODUCER_REGS) // self.consumers) // 8 * 8)

    @property
    def variant(self) -> str:
        """The scheduler, consumers and epilogue in words: ``one CTA per tile``, ``persistent``, ``ping-pong``,
        ``2x1 cluster``, ``persistent 2x1 cluster``, each with ``+ TMA store`` for the TMA-store epilogue."""
        grid = "ping-pong" if self.pingpong else "persistent" if self.persistent else "one CTA per tile"
        if self.cluster != "1x1":
            grid = ("persistent " if self.persistent else "") + f"{self.cluster} cluster"
        return grid + (" + TMA store" if self.epilogue == "tma_store" else "")

    @property
    def features(self) -> int:
        """How many of persistent, ping-pong, the TMA store and a cluster it uses (a tie-break: fewer first)."""
        return int(self.persistent) + int(self.pingpong) + int(self.epilogue == "tma_store") + \
            int(self.cluster != "1x1")

    # legality -------------------------------------------------------------------------------------------------
    def issues(self, limit: int = SMEM_LIMIT, shape: Optional[tuple[int, int, int]] = None) -> list[Issue]:
        """Everything that keeps the kernel from being built, in the order a reader fixes them: the main loop's
        issues, the scheduler's, the rules that join parts, the epilogue's, and the shared memory within ``limit``
        bytes. With ``shape`` (a problem's ``M, N, K``), :meth:`shape_issues` too, each after the part it bounds.
        Empty: the emitter builds it."""
        M, N, K = shape if shape is not None else (None, None, None)
        out = self.mainloop.issues(K) + (self.k_tile_issues(K) if K is not None else []) + self.scheduler.issues()
        s = self.split_k
        if self.load_when is not None and s > 1:
            out.append(Issue("split_k", "a load predicate names k and T of the whole loop; split-K runs parts of it",
                             fix="use split_k: 1, or no load predicate"))
        if self.load_when is not None and self.persistent:
            out.append(Issue("persistent", "a load predicate names k and T of one tile's loop; a persistent CTA's "
                             "ring runs many tiles", fix="remove persistent:, or the load predicate"))
        if self.epilogue == "tma_store" and s > 1:
            out.append(Issue("epilogue", f"a TMA-store epilogue with split_k = {s} is not built: the split's last CTA "
                             "sums the partials through global memory", fix="remove epilogue:, or use split_k: 1"))
        if self.pingpong and s > 1:
            out.append(Issue("pingpong", f"ping-pong with split_k = {s} is not built: the consumers take whole tiles "
                             "of a persistent CTA", fix="remove pingpong:, or use split_k: 1"))
        if self.pingpong and not self.persistent:
            out.append(Issue("persistent", "ping-pong consumers take a persistent CTA's tiles in turn", "ping-pong",
                             fix="write persistent: true, or remove it (pingpong: true implies it)"))
        if self.cluster in CLUSTERS and self.cluster != "1x1":
            if self.load_when is not None:
                out.append(Issue("cluster", f"cluster {self.cluster} with a load predicate is not built "
                                 "(docs/hopper_cluster.md, \"Not done\")",
                                 fix="use cluster: 1x1, or no load predicate"))
            if self.pingpong:
                out.append(Issue("cluster", f"cluster {self.cluster} with ping-pong consumers (pingpong: true) is not "
                                 f"built: {CLUSTER_NOT_DONE}", fix="remove pingpong:, or use cluster: 1x1",
                                 other="pingpong"))
            key = "BN" if self.shared_operand == "B" else "BM"
            rows = self.bn if key == "BN" else self.bm
            if rows % 16:  # each CTA loads half of the shared tile
                out.append(Issue("cluster", f"cluster {self.cluster}: the shared operand's {rows} rows do not split "
                                 "into two halves of whole 8-row swizzle atoms",
                                 fix=f"use a tile {key} that is a multiple of 16"))
        out += self.output.issues(N)
        return out + self.smem_issues(limit)

    def smem_issues(self, limit: int = SMEM_LIMIT) -> list[Issue]:
        """The shared memory within ``limit`` bytes: one stage at least (whether ``stages`` is chosen or not),
        and the chosen ``stages``."""
        one = self.fixed_smem_bytes() + self.mainloop.stage_bytes
        if one > limit:
            return [Issue("target.shared_bytes", f"one stage needs {one} B of shared memory, above the {limit} B "
                          "allowed", "shared-memory", fix="raise target.shared_bytes or use a smaller tile")]
        if self.stages is not None and self.smem_bytes > limit:
            staged = " (with the TMA-store staging buffers)" if self.epilogue == "tma_store" else ""
            return [Issue("stages", f"{self.stages} stages need {self.smem_bytes} B of shared memory{staged}, above "
                          f"the {limit} B allowed", "shared-memory", fix=f"use at most {self.max_stages(limit)} stages, "
                          "or auto")]
        return []

    def k_tile_issues(self, K: int) -> list[Issue]:
        """What keeps the split from a problem's ``K``: each of the ``split_k`` CTAs of a tile needs a k-tile."""
        tiles = -(-K // self.bk)
        if self.split_k > tiles:
            return [Issue("split_k", f"split_k = {self.split_k} exceeds the {tiles} k-tiles of K = {K} / BK = "
                          f"{self.bk}: a split would get no k-tile", fix=f"use split_k at most {tiles}")]
        return []

    def shape_issues(self, M: int, N: int, K: int) -> list[Issue]:
        """What keeps the kernel from a problem of shape ``M x N x K``: TMA's 16-byte row strides (A and B: ``K``
        a multiple of 8, :meth:`Mainloop.shape_issues`; C through TMA stores: ``N`` a multiple of 4 for f32, of 8
        for f16 and bf16, :meth:`Epilogue.shape_issues`) and a k-tile for each split (:meth:`k_tile_issues`)."""
        return self.mainloop.shape_issues(K) + self.k_tile_issues(K) + self.output.shape_issues(N)

    def warp_issues(self, warps: Optional[int]) -> list[Issue]:
        """What keeps the kernel from a problem's ``warps:`` (None: the problem leaves it out): the kernel runs
        :attr:`warps` warps, a producer warp group and its consumers' (:func:`warps_of`: two for ping-pong, else
        one per 64 rows). Joined to ``pingpong``, which changes the count."""
        if warps is None or warps == self.warps:
            return []
        if self.pingpong:
            why = f"two ping-pong consumer warp groups (pingpong: true), {self.warps} warps"
        else:
            why = f"{self.consumers} consumer warp group(s) for BM {self.bm}, {self.warps} warps"
        return [Issue("warps", f"warps {warps}: the Hopper kernel runs one producer warp group and {why}", "warps",
                      fix=f"remove warps:, or write warps: {self.warps}", other="pingpong")]

    def auto_variants(self, keys) -> list["KernelDesign"]:
        """This design with each of ``keys`` (design keys a problem leaves ``auto``: :data:`AUTO_VALUES`'s) taking
        each of its values, in the order ``persistent``, ``pingpong``, ``epilogue``, ``cluster`` vary (the last
        fastest); the other knobs as they are. Legal or not: the caller keeps those without issues."""
        axes = [AUTO_VALUES[k] if k in keys else (getattr(self, k),) for k in AUTO_VALUES]
        return [self.with_(persistent=p, pingpong=pp, epilogue=e, cluster=c)
                for p, pp, e, c in itertools.product(*axes)]

    def check(self) -> None:
        """ValueError with the first of :meth:`issues` (its message)."""
        bad = self.issues()
        if bad:
            raise ValueError(bad[0].message)

    def hopper_loop(self) -> HopperLoop:
        """The main loop to lower: TMA loads of A and B (full box bytes), the wgmma op."""
        loads = (Load("load_A", "A", self.a_slot_bytes, self.load_when),
                 Load("load_B", "B", self.b_slot_bytes, self.load_when))
        return HopperLoop(self.name, loads, "mma", self.stages, self.k_pipe_mmas, self.ring_consumers)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k}={v!r}" for k, v in self.knobs().items()
                          if v != getattr(DEFAULT, k) or k in ("bm", "bn", "stages", "k_pipe_mmas"))
        return f"KernelDesign({knobs})"


@functools.cache
def field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of ``cls``, by name (``dataclasses.fields`` computed once per class)."""
    return tuple(f.name for f in fields(cls))


def _values(part) -> dict:
    return {name: getattr(part, name) for name in field_names(type(part))}


def _replaced(part, changes: dict):
    """``dataclasses.replace(part, **changes)`` for a part (no ``__post_init__``; ``changes`` names its fields):
    the search builds millions of designs, and ``replace`` reads the class's fields each time."""
    out = object.__new__(type(part))
    out.__dict__.update(part.__dict__)
    out.__dict__.update(changes)
    return out


DEFAULT = KernelDesign()
"""The design every knob of which is at its default (128x128, 4 stages, one wgmma group in flight, one CTA per tile,
register epilogue)."""


__all__ = ["KernelDesign", "Mainloop", "TileScheduler", "Epilogue", "Issue", "FLAT", "DEFAULT", "consumers_of",
           "warps_of", "BK", "BM_CHOICES", "SMEM_LIMIT", "ALIGN_PAD", "BARRIER_BYTES", "DTYPES", "EPILOGUES",
           "OUT_DTYPES", "ACTIVATIONS", "MAX_ACC_REGS", "PRODUCER_REGS", "CLUSTERS", "MAX_STAGES", "MAX_STAGING",
           "WARP_GROUP_THREADS", "UNCHOSEN", "CLUSTER_NOT_DONE", "AUTO_VALUES"]

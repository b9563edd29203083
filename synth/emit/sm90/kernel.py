"""Write the sm_90a GEMM ``kernel.cu`` from a lowered Hopper program (docs/hopper_kernel.md): the parts composed.

Input: an :class:`~.config.KernelDesign` and the :class:`~synth.hopper.ir.HopperProgram` of its
loop (default: ``design_program(cfg)``; a mutant of it for the emulator's bug tests). Output: CUDA C++
text. Every synchronization line comes from one statement of the program, in the program's
order: ``try_wait`` -> ``synth_mbar_wait(bar, parity)`` with the parity
``PipelineState.parity()`` of the statement, ``arrive`` -> ``arrive`` / ``arrive.expect_tx`` /
``expect_tx`` with the statement's ``tx`` bytes (each gated by its load's predicate at
``state.count``), TMA op statements -> ``cp.async.bulk.tensor.2d`` into the slot of their write
access completing on their ``BarrierRef``, the wgmma op -> ``BK / 16`` ``wgmma.mma_async``
reading the slots of its read accesses, ``commit`` / ``wait`` -> ``wgmma.commit_group`` /
``wgmma.wait_group N`` with ``N`` the program's wait count, ``init`` / ``fence`` / ``inval``
from setup and teardown. Nothing is re-derived here.

The kernel is ``synth_gemm_sm90(tmA, tmB, C, C_in, M, N, K, ldc, alpha, beta)``: A is M x K and
B is N x K, row-major f16 or bf16 (``cfg.dtype``; K contiguous, both operands K-major), described by 2-D tensor maps
(box ``BK x BM`` and ``BK x BN``, 128-byte swizzle, out-of-bound elements zero-filled); C is
M x N f32 with row stride ``ldc``; ``C = alpha A B^T (+ beta C_in)``. Grid ``(ceil(N/BN),
ceil(M/BM))``, block ``128 * (1 + BM/64)`` threads, dynamic shared memory ``cfg.smem_bytes``.
The k-tile count ``T = ceil(K / BK)`` is a run-time value; ``K < 1`` writes nothing.
The same text compiles with nvcc for sm_90a (inline PTX) and with g++ against
``runtime/synth_emu_sm90.h`` (``-DSYNTH_EMULATE``).

A cluster configuration (``cfg.cluster`` ``2x1`` or ``1x2``) takes the cluster program of
:func:`synth.lower.cluster.lower_hopper_cluster`: the kernel is declared ``__cluster_dims__``, each CTA runs
its own CTA's roles (one body relative to ``crank`` when the program is symmetric under the swap of the
CTAs), a statement on another CTA's barrier is a remote arrive through ``mapa``, a run of one producer's
copies of its part of the shared operand into several CTAs is one multicast copy with their mask, and
setup and teardown hold the cluster barriers (docs/hopper_cluster.md, "The kernel"). A persistent cluster
configuration runs each CTA's roles as the persistent ring over its cluster's cluster-sized tile groups, the tile
count from the cluster's index (docs/hopper_cluster.md, "Persistent clusters").

The kernel is composed of parts, each selected once from the configuration (:func:`kernel_parts`), as CUTLASS 3.x
composes ``GemmUniversal<CollectiveMainloop, CollectiveEpilogue, TileScheduler>``: the CTA arrangement
(:mod:`.cluster`: one CTA or a cluster), the tile scheduler (:mod:`.scheduler`: one tile, a cluster's tile, split-K,
persistent, persistent clusters), the mainloop (:mod:`.mainloop`: the ring's TMA copies, multicast and wgmma), the
consumer warp groups (:mod:`.consumers`: cooperative or ping-pong) and the epilogue (:mod:`.epilogue`: registers or
TMA store). :class:`synth.emit.sm90.writer.Writer` writes the program's statements for all of them. This module
writes the frame: the defines, device functions and signature the parts bring, the shared memory (the parts'
storage side by side, then the barriers), setup, the warp-specialized roles (the producer warp group's elected
thread, the consumer warp groups, each driven by the tile scheduler), teardown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...errors import SynthError
from ...hopper.ir import HopperProgram
from .cluster import SingleCta, ctas_of
from ...hopper.kernel_design import ALIGN_PAD, PRODUCER_REGS, KernelDesign
from .consumers import Cooperative, consumers_of
from .epilogue import Epilogue, epilogue_of
from .mainloop import DESCRIPTOR, Mainloop
from .ptx import BASE_PTX
from .scheduler import SCHEDULERS, OneTile, scheduler_of
from .writer import Writer
from ...lower.hopper_design import design_program

KERNEL = "synth_gemm_sm90"


@dataclass(frozen=True)
class KernelParts:
    """The parts of one kernel (:func:`kernel_parts`)."""

    ctas: SingleCta
    """One CTA or a cluster (:func:`synth.emit.sm90.cluster.ctas_of`)."""
    scheduler: OneTile
    """Which tiles a CTA computes, and the roles' tile loop (:func:`synth.emit.sm90.scheduler.scheduler_of`)."""
    mainloop: Mainloop
    """The ring's ops: TMA copies, multicast, wgmma."""
    consumers: Cooperative
    """Cooperative or ping-pong consumer warp groups (:func:`synth.emit.sm90.consumers.consumers_of`)."""
    epilogue: Epilogue
    """How C leaves (:func:`synth.emit.sm90.epilogue.epilogue_of`)."""


def kernel_parts(cfg: KernelDesign, store=None, order=None, scheduler: str = "cluster") -> KernelParts:
    """The parts of ``cfg``'s kernel, each chosen by its design field: ``cluster``, ``persistent`` / ``split_k``,
    ``pingpong``, ``epilogue``; ``store``, ``order`` and ``scheduler`` as :func:`emit_sm90_kernel` takes them."""
    tiles = scheduler_of(cfg, scheduler)
    return KernelParts(ctas_of(cfg), tiles, Mainloop(cfg, tiles.k_tile), consumers_of(cfg, order),
                       epilogue_of(cfg, store))


def emit_sm90_kernel(cfg: KernelDesign, program: Optional[HopperProgram] = None, carry=None, store=None,
                     order=None, scheduler: str = "cluster") -> str:
    """The ``kernel.cu`` text of ``cfg`` with its synchronization taken from ``program``
    (default: the proven lowering ``design_program(cfg)``). ValueError when the program is not of the
    shape this emitter knows (roles ``producer`` of 1 warp group and ``consumer`` of
    ``bm / 64``, TMA into buffers A and B, one wgmma op reading both). ``cfg.persistent``: the
    program is the CTA's ring over all its tiles (docs/hopper_kernel.md, "Persistent tiles"), each
    role's parts a ``body`` of extent ``T`` then at most a constant-extent ``epilogue``; ``carry``
    (role -> :class:`synth.lower.hopper_persistent.TileCarry`) replaces the running count of a role's
    states (the bug tests' mutants; default: the running count). ``cfg.epilogue == "tma_store"``: C leaves
    through the store program ``store`` (default ``design_store_program(cfg)``; a mutant for the bug tests), each
    of its statements one line of the consumers' epilogue (docs/hopper_store.md). A cluster ``cfg`` takes a cluster
    program (roles ``producer{c}``, ``consumer{c}`` for each CTA ``c``, its barriers and buffers naming their CTA);
    ValueError for a statement the cluster kernel cannot be (a wait on another CTA's barrier, a copy into
    another CTA that is not a part of the shared operand's box, a part whose bytes are not the half box, ...),
    docs/hopper_cluster.md "The kernel". A persistent cluster ``cfg``: the grid's clusters walk cluster-sized
    tile groups, each CTA's roles the ring over its cluster's groups (docs/hopper_cluster.md, "Persistent
    clusters"); ``carry`` keys may name a role (``consumer1``) or a role kind (``consumer``: every CTA's);
    ``scheduler`` (:data:`SCHEDULERS`) ``cta`` writes the scheduler bug of the emulator's test."""
    cfg.check()
    p = program if program is not None else design_program(cfg)
    if store is not None and cfg.epilogue != "tma_store":
        raise ValueError("a store program applies to a TMA-store epilogue only")
    if order is not None and not cfg.pingpong:
        raise ValueError("an order program applies to ping-pong consumers only")
    if carry and not cfg.persistent:
        raise ValueError("a tile carry applies to a persistent kernel only")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler {scheduler!r}: expected one of {SCHEDULERS}")
    if scheduler != "cluster" and not (cfg.persistent and cfg.cluster_size > 1):
        raise ValueError(f"scheduler {scheduler!r} applies to a persistent cluster kernel only")
    parts = kernel_parts(cfg, store, order, scheduler)
    parts.ctas.check_roles(p)
    if p.trip_count != "T":
        raise ValueError("the kernel computes T = ceil(K / BK) at run time: the program needs a symbolic trip count T")
    parts.scheduler.check(p)
    others = parts.consumers.others
    w = Writer(cfg, p, parts.mainloop, carry, others)
    w.lines = _head(w, parts)
    w.lines += parts.scheduler.head()
    w.lines += [
        "  // the warp group index made warp-uniform (a broadcast) so descriptor arithmetic stays in uniform registers",
        "  const int wg = synth_uniform(threadIdx.x / 128), wt = threadIdx.x % 128;",
        *parts.ctas.rank_lines(),
    ]
    parts.ctas.setup(w, others)
    _roles(w, parts)
    parts.ctas.teardown(w, others)
    w.lines.append("}")
    return "\n".join(w.lines) + "\n"


def _head(w: Writer, parts: KernelParts) -> list[str]:
    """The kernel's text up to its shared-memory layout: the first comment, the defines, the device functions
    (each part's), the signature, the parts' storage and the barriers after it."""
    cfg, p = w.cfg, w.p
    ctas, tiles, epi = parts.ctas, parts.scheduler, parts.epilogue
    head = [
        f"// synth: sm_90a GEMM {cfg.bm}x{cfg.bn}x{cfg.bk}, {cfg.stages} stages, K_PIPE_MMAS {cfg.k_pipe_mmas}, "
        f"{cfg.consumers} consumer warp group(s) ({parts.consumers.name}), TMA 128B swizzle, "
        f"wgmma m64n{cfg.bn}k16 {cfg.dtype}" + tiles.title() + epi.title(),
        *(f"// {n}" for n in p.notes),
        "// Synchronization emitted statement by statement from the Hopper program (docs/hopper_kernel.md).",
        f"#define SYNTH_BM {cfg.bm}", f"#define SYNTH_BN {cfg.bn}", f"#define SYNTH_BK {cfg.bk}",
        f"#define SYNTH_STAGES {cfg.stages}", f"#define SYNTH_THREADS {cfg.threads}",
        f"#define SYNTH_SMEM_BYTES {cfg.smem_bytes}", f"#define SYNTH_SPLIT_K {cfg.split_k}",
        *tiles.defines(), *ctas.defines(), *epi.defines(),
        "#ifdef SYNTH_EMULATE",
        '#include "synth_emu_sm90.h"',
        *ctas.emulate(),
        "#else",
        BASE_PTX.strip(), *ctas.ptx(), *epi.ptx(), *parts.mainloop.ptx(),
        "#endif",
        *DESCRIPTOR,
        "",
        *epi.device_lines(),
        'extern "C" __global__ void ' + ctas.attribute() + f"__launch_bounds__({cfg.threads}, 1)",
        f"{KERNEL}(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,",
        *epi.params(),
        "               float* __restrict__ C, const float* __restrict__ C_in, int M, int N, int K, int ldc,",
        tiles.params_end(),
        "  extern __shared__ unsigned char synth_smem_raw[];",
        "  unsigned char* smem = synth_smem_raw + ((1024 - (synth_smem_u32(synth_smem_raw) & 1023)) & 1023);",
        "  // shared-memory addresses (32-bit, the state space of every TMA, mbarrier and descriptor operand)",
        "  // pinned: otherwise ptxas recomputes the shared window base at every loop head (S2UR SR_CgaCtaId)",
    ]
    lines, off = parts.mainloop.storage()
    head += lines
    lines, size = epi.storage(off)
    head += lines
    off += size
    laid: dict = {}
    for b in p.barriers + sum((o.barriers for o in w.others), ()):
        name = w.base(b.name)  # a cluster's full0, full1: one offset, each CTA's own barrier there
        if name in laid:
            if laid[name] != b.slots:
                raise ValueError(f"barrier {b.name}: {b.slots} slots, but its peer at the same offset has {laid[name]}")
            continue
        laid[name] = b.slots
        peers = [x.name for x in p.barriers if w.base(x.name) == name]
        head.append(f"  const uint32_t bar_{name} = sA + {off};  // {b.kind}, "
                    f"{b.slots} slots" + (f" ({', '.join(peers)}: each CTA's own at this offset)" if w.cluster else ""))
        off += 8 * b.slots
    if off + ALIGN_PAD > cfg.smem_bytes:
        raise ValueError("the program's barriers do not fit the shared memory of the configuration")
    return head


def _roles(w: Writer, parts: KernelParts) -> None:
    """The warp-specialized roles: warp group 0 gives up registers and its elected thread runs the producer's role,
    the other warp groups take them and run the consumers' role; the tile scheduler drives both (and may open a
    block around them: a persistent CTA without a tile skips both)."""
    w.lines += parts.scheduler.open()
    w.w(1, "if (wg == 0) {")
    w.w(2, f"synth_setmaxnreg_dec<{PRODUCER_REGS}>();")
    w.w(2, "if (wt == 0) {  // one elected thread issues the producer's statements")
    parts.scheduler.producer(w, parts.ctas)
    w.w(2, "}")
    w.w(1, "} else {")
    w.w(2, f"synth_setmaxnreg_inc<{w.cfg.consumer_regs}>();")
    w.w(2, parts.consumers.warp_group_line())
    parts.scheduler.consumer(w, parts.ctas, parts.consumers, parts.epilogue)
    w.w(1, "}")
    w.lines += parts.scheduler.close()


def emit_proven(cfg: KernelDesign, *, time_limit: float = 60.0, carry=None):
    """``(kernel.cu text, report)`` for ``design_program(cfg)`` once it is proven for every ``T >= 1``: by
    :func:`synth.verify.phases.verify_hopper` (a ``HopperReport``), or for a cluster by
    :func:`synth.verify.hopper_cluster.verify_cluster` (a ``ClusterReport``: the barrier classes of every CTA's
    roles and the cluster classes); a persistent ``cfg`` also needs the tile carry of every role (of every CTA)
    that the kernel is emitted with (``carry``, role or role kind -> :class:`synth.lower.hopper_persistent.TileCarry`;
    default the running count) proven by :func:`synth.verify.hopper_persistent.check_carry`. SynthError naming
    what is refuted otherwise (nothing emitted)."""
    # the provers (Z3), for emit_proven only: the light runtime emits kernels without them
    from ...verify.phases import verify_hopper

    p = design_program(cfg)
    if cfg.cluster_size > 1:  # the barrier classes of the whole cluster and the cluster classes
        # the provers (Z3), for emit_proven only: the light runtime emits kernels without them
        from ...verify.hopper_cluster import verify_cluster

        report = verify_cluster(p, time_limit=time_limit, tightness=False)
    else:
        report = verify_hopper(p, time_limit=time_limit, tightness=False)
    if not report.ok:
        raise SynthError(None, f"the Hopper program of {cfg} is not proven:\n{report.render()}",
                         "use another configuration or raise the time limit")
    if cfg.persistent:  # each tile's state carried from the previous one, for every role of every CTA
        # the provers (Z3), for emit_proven only: the light runtime emits kernels without them
        from ...verify.hopper_persistent import check_carry

        ok, why = check_carry(p, dict(carry or {}), time_limit=time_limit)
        if not ok:
            raise SynthError(None, f"the tile carry of the persistent kernel of {cfg} is not proven: {why}",
                             "emit the kernel with the running count's carry (carry=None)")
    return emit_sm90_kernel(cfg, p, carry=carry), report


__all__ = ["emit_sm90_kernel", "emit_proven", "kernel_parts", "KernelParts", "KERNEL", "SCHEDULERS"]

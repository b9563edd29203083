"""The CTA arrangement of the sm_90a kernel: one CTA, or a thread-block cluster (docs/hopper_cluster.md, "The kernel").

Selected by ``KernelDesign.cluster`` (:func:`ctas_of`). :class:`SingleCta`: each role is the program's one role of
its kind, thread 0 runs setup and teardown around a CTA barrier. :class:`Cluster`: the kernel is declared
``__cluster_dims__``, each CTA runs its own CTA's roles (one body relative to ``crank`` when the program is
symmetric under the swap of the CTAs, else one ``if (crank == c)`` per CTA), setup and teardown hold the cluster
barriers (``barrier.cluster``) and an ``init`` / ``inval`` runs in the CTA owning its barrier. The writer
(:class:`synth.emit.sm90.writer.Writer`) names a cluster's barriers, remote arrives and multicasts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...completion import ClusterSyncStmt
from ...hopper.ir import HopperProgram
from ...hopper.kernel_design import KernelDesign
from .writer import Writer

CLUSTER_PTX = r"""// thread-block cluster (docs/hopper_cluster.md, "The kernel")
SYNTH_DEV uint32_t synth_cluster_ctarank() {
  uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
SYNTH_DEV uint32_t synth_mapa(uint32_t a, uint32_t rank) {
  uint32_t d; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(rank)); return d; }
// CUTLASS's remote arrive (.release at the default .cta scope): .release.cluster puts a MEMBAR.ALL.GPU before every
// remote release of the main loop, and the slot's reads it orders are wgmma reads that wgmma.wait_group completed
SYNTH_DEV void synth_mbar_arrive_cluster(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(cluster_addr) : "memory"); }
SYNTH_DEV void synth_tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t b,
                                           uint16_t mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(b), "h"(mask) : "memory"); }
// not .aligned: the teardown's threads come from diverged role branches
SYNTH_DEV void synth_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;" ::: "memory"); }
"""
"""The cluster's device functions outside the emulator."""


@dataclass(frozen=True)
class SingleCta:
    """A kernel of one CTA per block: roles ``producer`` and ``consumer``."""

    cfg: KernelDesign

    inner = 0
    """Levels of nesting :meth:`roles` adds around a role's text."""

    def check_roles(self, p: HopperProgram) -> None:
        """ValueError unless ``p`` has a producer role of 1 warp group and a consumer role of the ring's consumers."""
        roles = {r.name: r for r in p.roles}
        if set(roles) != {"producer", "consumer"} or roles["producer"].warpgroups != 1 or \
                roles["consumer"].warpgroups != self.cfg.ring_consumers:
            raise ValueError("expected a producer role of 1 warp group and a consumer role of "
                             f"{self.cfg.ring_consumers}")

    def program(self, p: HopperProgram, role: str):
        """The program of role ``role`` of ``p``."""
        return p.role(role).program

    def defines(self) -> list[str]:
        """``#define`` lines: none."""
        return []

    def emulate(self) -> list[str]:
        """Lines for the emulator's build only: none."""
        return []

    def ptx(self) -> list[str]:
        """Device functions outside the emulator: none beyond the base ones."""
        return []

    def attribute(self) -> str:
        """The kernel's launch attribute before ``__launch_bounds__``: none."""
        return ""

    def rank_lines(self) -> list[str]:
        """Lines after the warp group index: none."""
        return []

    def roles(self, w: Writer, depth: int, kind: str, emit_role) -> None:
        """The role of kind ``kind`` (``producer`` or ``consumer``), written by ``emit_role(depth, role name)``."""
        emit_role(depth, kind)

    def setup(self, w: Writer, others=()) -> None:
        """The program's setup statements (then those of ``others``) by thread 0, then a CTA barrier."""
        w.w(1, "// ---- setup")
        w.w(1, "if (threadIdx.x == 0) {")
        for s in w.p.setup + sum((o.setup for o in others), ()):
            w.setup_stmt(2, s)
        w.w(1, "}")
        w.w(1, "synth_syncthreads();")

    def teardown(self, w: Writer, others=()) -> None:
        """A CTA barrier, then the program's teardown statements (then those of ``others``) by thread 0."""
        w.w(1, "// ---- teardown")
        w.w(1, "synth_syncthreads();")
        w.w(1, "if (threadIdx.x == 0) {")
        for s in w.p.teardown + sum((o.teardown for o in others), ()):
            w.setup_stmt(2, s)
        w.w(1, "}")


@dataclass(frozen=True)
class Cluster(SingleCta):
    """A thread-block cluster of ``cfg.cluster_size`` CTAs: roles ``producer{c}``, ``consumer{c}`` of each CTA
    ``c``, barriers and buffers named after their CTA."""

    inner = 1

    def check_roles(self, p: HopperProgram) -> None:
        """ValueError unless ``p`` has the roles ``producer{c}`` (1 warp group) and ``consumer{c}`` of every CTA."""
        cfg, n = self.cfg, self.cfg.cluster_size
        roles = {r.name: r for r in p.roles}
        want = [f"{k}{c}" for k in ("producer", "consumer") for c in range(n)]
        if sorted(roles) != sorted(want) or any(roles[f"producer{c}"].warpgroups != 1 or
                                                roles[f"consumer{c}"].warpgroups != cfg.ring_consumers
                                                for c in range(n)):
            raise ValueError(f"cluster {cfg.cluster}: expected roles {', '.join(want)} (producers of 1 warp group, "
                             f"consumers of {cfg.ring_consumers}), got {', '.join(roles)}")

    def defines(self) -> list[str]:
        """The cluster shape and the TMA box rows (the shared operand's is half the tile)."""
        cfg = self.cfg
        return [f"#define SYNTH_CLUSTER_M {cfg.cluster_m}  // CTAs of a cluster along M (grid y)",
                f"#define SYNTH_CLUSTER_N {cfg.cluster_n}  // CTAs of a cluster along N (grid x)",
                f"#define SYNTH_A_BOX_ROWS {cfg.a_box_rows}  // rows of tmA's box",
                f"#define SYNTH_B_BOX_ROWS {cfg.b_box_rows}  // rows of tmB's box"]

    def emulate(self) -> list[str]:
        """``__cluster_dims__`` made empty for the emulator (it reads the shape from the defines)."""
        return ["#ifndef __cluster_dims__  // the emulator reads the cluster shape from SYNTH_CLUSTER_M / N",
                "#define __cluster_dims__(...)",
                "#endif"]

    def ptx(self) -> list[str]:
        """:data:`CLUSTER_PTX`."""
        return [CLUSTER_PTX.strip()]

    def attribute(self) -> str:
        """``__cluster_dims__`` of the shape."""
        return "__cluster_dims__(SYNTH_CLUSTER_N, SYNTH_CLUSTER_M, 1) "

    def rank_lines(self) -> list[str]:
        """``crank``: the CTA's rank in its cluster, whose roles it runs."""
        return ["  const uint32_t crank = synth_cluster_ctarank();  // this CTA's rank in its cluster: it runs the "
                "roles of CTA crank"]

    def setup(self, w: Writer, others=()) -> None:
        """The cluster program's setup (:meth:`sync_stmts`), then a CTA barrier unless it ends with a cluster
        barrier."""
        stmts = w.p.setup + sum((o.setup for o in others), ())
        w.w(1, "// ---- setup")
        self.sync_stmts(w, stmts)
        if not (stmts and isinstance(stmts[-1], ClusterSyncStmt)):
            w.w(1, "synth_syncthreads();")

    def teardown(self, w: Writer, others=()) -> None:
        """A CTA barrier unless the teardown starts with a cluster barrier, then the teardown (:meth:`sync_stmts`)."""
        stmts = w.p.teardown + sum((o.teardown for o in others), ())
        w.w(1, "// ---- teardown")
        if not (stmts and isinstance(stmts[0], ClusterSyncStmt)):
            w.w(1, "synth_syncthreads();")
        self.sync_stmts(w, stmts)

    def sync_stmts(self, w: Writer, stmts) -> None:
        """A cluster program's setup or teardown in its order: a cluster barrier (``cluster_sync``) by every thread of
        the CTA, each other statement by thread 0 (an ``init`` / ``inval`` by the CTA owning its barrier only)."""
        open_ = False
        for s in stmts:
            if isinstance(s, ClusterSyncStmt):
                if s.guard is not None:
                    raise ValueError("a cluster barrier is run by every thread of every CTA: it takes no guard")
                if open_:
                    w.w(1, "}")
                    open_ = False
                w.w(1, "synth_cluster_sync();  // barrier.cluster arrive.release + wait.acquire: every thread of "
                       "every CTA")
                continue
            if not open_:
                w.w(1, "if (threadIdx.x == 0) {")
                open_ = True
            w.setup_stmt(2, s)
        if open_:
            w.w(1, "}")


    def roles(self, w: Writer, depth: int, kind: str, emit_role) -> None:
        """The roles of kind ``kind`` of a cluster program, each CTA's written by ``emit_role(depth, role name)`` with
        ``w.cta`` the CTA: when their texts written relative to the running CTA (:attr:`Writer.relative`) are the same
        for every CTA (the program is symmetric under the swap of the CTAs), one block run by every CTA; otherwise
        each CTA's role as it is, in its own ``if (crank == c)`` (a mutant that differs per CTA is emitted as it is)."""
        def body(d: int, c: int, relative: bool) -> list[str]:
            saved, w.lines = w.lines, []
            w.cta, w.relative, w.remote = c, relative, {}
            emit_role(d, f"{kind}{c}")
            out, w.lines = w.lines, saved
            # each peer barrier array's shared::cluster base once, before the role's loops: a remote release is then the
            # base plus the slot's offset (mapa maps an address to the same offset in the peer's shared memory), which
            # ptxas keeps in a uniform register and carries from one k-tile to the next as it does the local release's
            # address (a mapa per release cost 3 to 5 instructions per HGMMA and 10 to 18 of the longest HGMMA-free run
            # with 3, 5 or 6 stages); pinned by a warp broadcast where every lane runs the role (not the producer's
            # elected thread)
            decl = []
            for var, (local, rank, label) in sorted(w.remote.items()):
                addr = f"synth_mapa({local}, {rank})"
                value = addr if kind == "producer" else f"synth_pinned_uniform({addr})"
                decl.append("  " * d + f"const uint32_t {var} = {value};  // {label}'s barriers in the peer's "
                            "shared memory (shared::cluster)")
            w.cta, w.relative, w.remote = None, False, {}
            return decl + out

        n = self.cfg.cluster_size
        if n == 2:
            same = [body(depth + 1, c, True) for c in range(n)]
            if all(x == same[0] for x in same):  # the roles of CTA 1 are CTA 0's with the CTAs swapped
                w.w(depth, f"{{  // every CTA: role {kind}<crank>, written relative to this CTA (crank) and its peer "
                           "(crank ^ 1)")
                w.lines += same[0]
                w.w(depth, "}")
                return
        for c in range(n):
            w.w(depth, f"{'if' if c == 0 else '} else if'} (crank == {c}u) {{  // CTA {c}: role {kind}{c}")
            w.lines += body(depth + 1, c, False)
        w.w(depth, "}")


def ctas_of(cfg: KernelDesign) -> SingleCta:
    """The CTA arrangement of ``cfg.cluster``: :class:`SingleCta` for ``1x1``, else :class:`Cluster`."""
    return Cluster(cfg) if cfg.cluster_size > 1 else SingleCta(cfg)


__all__ = ["SingleCta", "Cluster", "ctas_of", "CLUSTER_PTX"]

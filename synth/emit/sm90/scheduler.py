"""The tile scheduler component of the sm_90a kernel: which output tiles a CTA computes (docs/hopper_kernel.md).

Selected by ``KernelDesign.persistent``, ``split_k`` and ``cluster`` (:func:`scheduler_of`):

* :class:`OneTile`: one tile per CTA, the grid ``(ceil(N/BN), ceil(M/BM))`` in grouped raster order
  (:mod:`synth.emit.raster`); each role runs the program's parts once, ``T = ceil(K / BK)``.
* :class:`ClusterTile`: one tile per CTA of a cluster, the CTA's tile at its offset in its cluster's tile group.
* :class:`SplitK`: one tile's split per CTA (``gridDim.z`` splits, docs/hopper_kernel.md "Split-K"): each role
  reads its split's k-tiles (:mod:`synth.emit.splitk`), the tile's last CTA sums the partials in split order
  (:func:`split_reduction_lines`) where the others store theirs.
* :class:`Persistent`: a 1-D grid of ``P`` CTAs walks the tiles (CTA ``b`` takes ``b, b + P, ...``); each role
  runs the program's ring over all its tiles (:func:`ring`, ``T = n_tiles * KT``), the consumers draining and
  storing C at each tile's end (docs/hopper_kernel.md, "Persistent tiles").
* :class:`PersistentClusters`: the grid's clusters walk cluster-sized tile groups, the tile count from the
  cluster's index (docs/hopper_cluster.md, "Persistent clusters"); ``count_by`` ``cta`` writes the scheduler bug
  of the emulator's test instead.

A scheduler drives the roles' tile loop: :meth:`OneTile.producer` and :meth:`OneTile.consumer` write the producer's
and the consumers' roles (through the CTA arrangement's ``roles``, the consumer arrangement's registers and tile
ends, the epilogue's C); the kernel module writes the warp-specialized frame around them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...expr import Num, parse
from ...hopper.ir import HopperProgram
from ..raster import cluster_cuda_lines, cuda_lines as raster_lines
from ..splitk import index_lines as split_index_lines, range_lines as split_range_lines
from .cluster import SingleCta
from ...hopper.kernel_design import KernelDesign
from .epilogue import Epilogue, register_lines
from .writer import Writer

SCHEDULERS = ("cluster", "cta")
"""How a persistent cluster kernel counts a CTA's tiles: ``cluster`` (the kernel's) from its cluster's index, so
the CTAs of a cluster take the same tile groups and run the same ring trip count; ``cta`` (a bug, for the
emulator's test) from the CTA's own index, as the one-CTA scheduler, so peers may run different trip counts."""
SPLIT_BARRIER = 1
"""Named barrier (``bar.sync``) of the consumer warp groups in the split-K reduction (0 is __syncthreads)."""


@dataclass(frozen=True)
class Turns:
    """Which of its CTA's tiles a persistent role takes: ``loop``, the C ``for`` over ``t`` (the tiles taken, as
    a C ``for`` head); ``last``, the block opening the ring's epilogue after the last tile (by the role that took
    it); ``phase``: the ring's parities carried too (:meth:`synth.emit.sm90.writer.Writer.carried_loop`)."""

    loop: str
    last: str
    phase: bool = False


EVERY_TILE = Turns("for (int t = 0; t < n_tiles; ++t) {", "{  // after the last tile: the ring's epilogue")
"""Every tile of the CTA, in order (the producer's, the cooperative consumers')."""


def ring(w: Writer, depth: int, role: str, kind: str, program, per_tile_head, per_tile_tail,
         turns: Turns = EVERY_TILE) -> None:
    """Role ``role`` (of kind ``producer`` or ``consumer``) of a persistent CTA: the ring program's body once per
    tile it takes (``turns``; ``i = kb + k``, ``kb`` the running count at the tile start), ``per_tile_head``
    before it and ``per_tile_tail`` after it (lines, or lists of lines taken as they are), then the ring's
    epilogue once after the last tile."""
    w.role = role
    body, rest = program.parts[0], program.parts[1:]
    w.w(depth, turns.loop)
    w.w(depth + 1, "const unsigned kb = (unsigned)t * (unsigned)KT;  // the running count at this tile's start "
                   "(carried, never reset)")
    w.carry_lines(depth + 1)
    for line in per_tile_head:
        w.w(depth + 1, line)
    # the ring's iteration as the loop variable, unsigned: ptxas then unrolls the loop with slots and parities
    # as shifts and masks (from t = 0, k it was 10.9 instructions per HGMMA at 128x128, with it 6.6)
    w.w(depth + 1, f"// ---- {w.label(role)} body: the ring's iterations kb .. kb + KT - 1 (k-tile {body.var} - kb)")
    # ping-pong consumers: slots and parities carried over the iterations where that is shorter
    # (synth.emit.sm90.consumers.pingpong_carries)
    w.carried_loop(depth + 1, body.var, "kb", phase=turns.phase)
    w.w(depth + 1, f"for (unsigned {body.var} = kb; {body.var} < kb + (unsigned)KT; ++{body.var}) {{")
    for st in w.grouped(body.stmts):
        w.stmt(depth + 2, kind, st, program.waits)
    w.carried_step(depth + 2)
    w.w(depth + 1, "}")
    for line in per_tile_tail:
        w.w(depth + 1, line) if isinstance(line, str) else w.lines.extend(line)
    w.w(depth, "}")
    if rest:
        w.w(depth, turns.last)
        if w.mutant_carry() is not None:
            w.w(depth + 1, "const int t = n_tiles;")
            w.w(depth + 1, "const unsigned kb = (unsigned)T;")
            w.carry_lines(depth + 1)
        for pt in rest:
            w.part(depth + 1, kind, pt, program.waits)
        w.w(depth, "}")
    w.role = ""


def split_reduction_lines(cfg: KernelDesign) -> list[str]:
    """Split-K (docs/hopper_kernel.md): the consumers learn whether their CTA arrived last at the tile
    (one thread counts it, ``bar.red.or`` tells the others); the others store their partial tile (after
    ``alpha``, in tile rows: 16-byte ``st.global.cg``), release it and count it; the last waits for
    their count and runs the epilogue with each vector summed in split order."""
    ct = 128 * cfg.consumers
    one = "cw == 0 && wt == 0"
    return [
        "    // ---- split-K (synth.emit.splitk): the tile's last CTA to arrive sums the partials in split order",
        "    unsigned* const counters = tickets + 2 * synth_tile;  // [0] CTAs arrived, [1] partials published",
        f"    float* const ws_tile = workspace + (size_t)synth_tile * SYNTH_SPLIT_K * {cfg.bm * cfg.bn};",
        "    bool arrived_last = false;",
        f"    if ({one}) arrived_last = synth_atomic_add_u32(counters, 1u) == SYNTH_SPLIT_K - 1;",
        f"    const bool last = synth_bar_red_or({SPLIT_BARRIER}, {ct}, arrived_last);",
        "    if (!last) {  // store this split's partial tile, release it, count it",
        *("  " + line for line in register_lines(cfg, "partial")),
        "      synth_threadfence();  // release: this thread's partials before the count",
        f"      synth_bar_sync({SPLIT_BARRIER}, {ct});  // every consumer thread's partials are fenced",
        f"      if ({one}) synth_atomic_add_u32(counters + 1, 1u);  // published",
        "    } else {",
        f"      if ({one}) {{",
        "        // the other CTAs of the tile arrived before this one and after arriving only store and count:",
        "        // this wait ends whatever the launch order or residency",
        "        while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {",
        "        }",
        "        counters[0] = 0u;  // zeroed for the next launch: no CTA of this tile touches them again",
        "        counters[1] = 0u;",
        "      }",
        f"      synth_bar_sync({SPLIT_BARRIER}, {ct});",
        "      synth_threadfence();  // acquire: the other splits' partials after their count",
        *("  " + line for line in register_lines(cfg, "fold")),
        "    }",
    ]


@dataclass(frozen=True)
class OneTile:
    """One output tile per CTA (the grid ``(ceil(N/BN), ceil(M/BM))``, grouped raster order)."""

    cfg: KernelDesign

    def title(self) -> str:
        """What the kernel's first comment line adds: nothing."""
        return ""

    def defines(self) -> list[str]:
        """``#define`` lines: none."""
        return []

    def params_end(self) -> str:
        """The kernel signature's last line (after ``ldc``)."""
        return "               float alpha, float beta) {"

    def k_tile(self, iteration: str) -> str:
        """The C k-tile of a copy at ring iteration ``iteration`` (C text): the iteration itself."""
        return iteration

    def check(self, p: HopperProgram) -> None:
        """ValueError for a program this scheduler cannot run: none (every role's parts run once)."""

    def head(self) -> list[str]:
        """Kernel lines after the shared-memory layout: ``T``, and the return of an empty launch (``K < 1``)."""
        cfg = self.cfg
        return [f"  const int T = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles", "  if (K < 1) return;"]

    def tile_lines(self) -> list[str]:
        """The lines giving the tile's ``m0`` and ``n0``."""
        return raster_lines(self.cfg.bm, self.cfg.bn)

    def open(self) -> list[str]:
        """Lines opening the roles (closed by :meth:`close`): none."""
        return []

    def close(self) -> list[str]:
        """Lines closing :meth:`open`."""
        return []

    def producer_head(self) -> list[str]:
        """The producer's lines before its statements (depth 3): the tile, before its loads."""
        return self.tile_lines()

    def producer(self, w: Writer, ctas: SingleCta) -> None:
        """The producer's role (in the elected thread, depth 3): :meth:`producer_head`, then the program's parts."""
        for line in self.producer_head():
            w.w(3, line)
        ctas.roles(w, 3, "producer", lambda depth, role: self._parts(w, ctas, depth, role, "producer"))

    def consumer_head(self) -> list[str]:
        """The consumers' lines before their registers (depth 2): none."""
        return []

    def consumer_tile(self) -> list[str]:
        """The consumers' lines after their main loop, before C (depth 2): the tile, computed where it is used
        (``m0`` and ``n0`` live across no consumer main loop, whose SASS then keeps the uniform registers it had)."""
        return self.tile_lines()

    def consumer_c(self, consumers, epilogue: Epilogue) -> list[str]:
        """C of the consumers' tile, then the epilogue's drain."""
        return consumers.tile_c(epilogue, "0u") + epilogue.drain()

    def consumer(self, w: Writer, ctas: SingleCta, consumers, epilogue: Epilogue) -> None:
        """The consumer warp groups' role (depth 2): registers, the accumulators zeroed, the program's parts (main
        loop and drain), the tile (:meth:`consumer_tile`), C (:meth:`consumer_c`)."""
        for line in self.consumer_head():
            w.w(2, line)
        consumers.registers(w)
        for line in consumers.zero():
            w.w(2, line)
        ctas.roles(w, 2, "consumer", lambda depth, role: self._parts(w, ctas, depth, role, "consumer"))
        for line in self.consumer_tile():
            w.w(2, line)
        w.lines += self.consumer_c(consumers, epilogue)

    @staticmethod
    def _parts(w: Writer, ctas: SingleCta, depth: int, role: str, kind: str) -> None:
        prog = ctas.program(w.p, role)
        for pt in prog.parts:
            w.part(depth, kind, pt, prog.waits)


@dataclass(frozen=True)
class ClusterTile(OneTile):
    """One output tile per CTA of a cluster: the cluster's tile group from the grid, the CTA's tile in it
    (:func:`synth.emit.raster.cluster_cuda_lines`)."""

    def tile_lines(self) -> list[str]:
        """The CTA's tile at its offset in its cluster's tile group."""
        cfg = self.cfg
        return cluster_cuda_lines(cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n)


@dataclass(frozen=True)
class SplitK(OneTile):
    """One split of one tile per CTA (``gridDim.z`` splits; CTA ``L`` in launch order runs split ``L % S`` of tile
    ``L / S``): each role reads its split where it needs it, the tile's last CTA sums the partials."""

    def params_end(self) -> str:
        """The signature's last line: the workspace of the partials and the tiles' tickets after ``beta``."""
        return ("               float alpha, float beta, float* __restrict__ workspace, "
                "unsigned* __restrict__ tickets) {")

    def k_tile(self, iteration: str) -> str:
        """The split's first k-tile ``kt0`` plus the iteration."""
        return f"kt0 + {iteration}"

    def head(self) -> list[str]:
        """The k-tiles of the whole K, and the return of a launch without its grid, buffers or a k-tile per split."""
        cfg = self.cfg
        # the split and its k-tiles here; each role computes its tile (synth_tile, m0, n0) where it uses it
        return [
            f"  const int T_all = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles of the whole K",
            "  // every split gets at least one k-tile, and a split-K launch has its grid and buffers, or nothing runs",
            "  if (K < 1 || T_all < SYNTH_SPLIT_K || gridDim.z != SYNTH_SPLIT_K || workspace == nullptr ||",
            "      tickets == nullptr || (reinterpret_cast<uintptr_t>(workspace) & 15) != 0) return;",
        ]

    def tile_lines(self) -> list[str]:
        """The split's tile (``synth_tile`` from the split index)."""
        return raster_lines(self.cfg.bm, self.cfg.bn, "synth_tile")

    def producer_head(self) -> list[str]:
        """The split, its k-tiles (``T``, ``kt0``) and its tile, before the loads."""
        # each role reads its split where it needs it (as its tile): the producer before its loads; the
        # consumers before the loop only for T, and again after it, so that no split value lives across the
        # consumer loop (they would take uniform registers its descriptors need, and ptxas would recompute those)
        return [*split_index_lines(), *split_range_lines("T", self.cfg.bk, all_tiles=False), *self.tile_lines()]

    def consumer_head(self) -> list[str]:
        """The split's k-tile count ``T`` only (its other values read again after the main loop)."""
        return ["int T;  // this split's k-tiles",
                "{",
                *("  " + line for line in split_index_lines() + split_range_lines("T_split", self.cfg.bk,
                                                                                   all_tiles=False)),
                "  T = T_split;",
                "}"]

    def consumer_tile(self) -> list[str]:
        """The split index again, then its tile."""
        return [*split_index_lines(), *self.tile_lines()]

    def consumer_c(self, consumers, epilogue: Epilogue) -> list[str]:
        """The split-K reduction (:func:`split_reduction_lines`) in place of the epilogue's C."""
        return split_reduction_lines(self.cfg)


@dataclass(frozen=True)
class Persistent(OneTile):
    """A 1-D grid of any ``P >= 1`` CTAs: CTA ``b`` takes tiles ``b, b + P, ...`` in grouped raster order, each
    role the program's ring over all of them (:func:`ring`)."""

    def title(self) -> str:
        """``, persistent tiles``."""
        return ", persistent tiles"

    def defines(self) -> list[str]:
        """``SYNTH_PERSISTENT``."""
        return ["#define SYNTH_PERSISTENT 1  // a 1-D grid of any P >= 1 CTAs walks the tiles"]

    def k_tile(self, iteration: str) -> str:
        """The ring's iteration ``i`` is k-tile ``i - kb`` of this tile."""
        return f"(int)(({iteration}) - kb)"

    def check(self, p: HopperProgram) -> None:
        """ValueError unless every role's parts are a body of extent ``T`` (the ring, per tile) and at most a
        constant-extent epilogue (after the last tile)."""
        for r in p.roles:
            names = [pt.name for pt in r.program.parts]
            if names not in (["body"], ["body", "epilogue"]) or r.program.parts[0].extent != parse("T") or \
                    any(not isinstance(pt.extent, Num) for pt in r.program.parts[1:]):
                raise ValueError(f"role {r.name}: a persistent kernel runs a body of extent T per tile and a "
                                 f"constant-extent epilogue after the last tile, got parts {names}")

    def count_lines(self) -> list[str]:
        """The tiles and the CTA's tile count ``n_tiles``."""
        return [
            "  const int tiles = tiles_n * tiles_m;",
            "  // persistent: CTA b takes tiles b, b + P, ... (P = gridDim.x, any P >= 1) in grouped raster order",
            "  const int n_tiles = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;",
        ]

    def head(self) -> list[str]:
        """``KT`` (k-tiles per tile), the tile counts, ``n_tiles`` (:meth:`count_lines`) and the ring's ``T``."""
        cfg = self.cfg
        return [
            f"  const int KT = (K + {cfg.bk - 1}) / {cfg.bk};  // k-tiles per output tile",
            "  if (K < 1) return;",
            f"  const int tiles_n = (N + {cfg.bn - 1}) / {cfg.bn}, tiles_m = (M + {cfg.bm - 1}) / {cfg.bm};",
            *self.count_lines(),
            "  // the program's trip count: the CTA's ring of every k-tile of every tile it takes (state never reset)",
            "  const int T = n_tiles * KT;",
        ]

    def tile_lines(self) -> list[str]:
        """Tile ``t`` of the CTA's (in the ring's tile loop)."""
        cfg = self.cfg
        return ["const int tile = (int)blockIdx.x + t * (int)gridDim.x;",
                *raster_lines(cfg.bm, cfg.bn, "tile", "tiles_n", "tiles_m")]

    def open(self) -> list[str]:
        """Roles only where the CTA has a tile."""
        return ["  if (n_tiles > 0) {  // a CTA with no tile initializes and invalidates its barriers, nothing else"]

    def close(self) -> list[str]:
        """Closes :meth:`open`."""
        return ["  }"]

    def producer(self, w: Writer, ctas: SingleCta) -> None:
        """The producer's ring, the tile computed at each tile's start."""
        tile = self.tile_lines()
        ctas.roles(w, 3, "producer",
                   lambda depth, role: ring(w, depth, role, "producer", ctas.program(w.p, role), tile, []))

    def consumer(self, w: Writer, ctas: SingleCta, consumers, epilogue: Epilogue) -> None:
        """The consumers' ring over their tiles (``consumers.turns``): each tile's head (the accumulators zeroed,
        ping-pong's order waits), main loop, drain, tile and C; the epilogue's drain after the last."""
        consumers.registers(w)
        head = consumers.tile_head(w)
        # C's lines (at a consumer's depth 2) indented to the ring's tile loop, one level deeper per level the
        # CTA arrangement adds
        indent = "  " * (1 + ctas.inner)
        c_lines = [indent + ln for ln in consumers.tile_c(epilogue, consumers.first_subtile(epilogue.subtiles))]
        tail = [*consumers.tile_drain(w), *self.tile_lines(), c_lines]
        ctas.roles(w, 2, "consumer", lambda depth, role: ring(w, depth, role, "consumer", ctas.program(w.p, role),
                                                              head, tail, consumers.turns))
        w.lines += epilogue.drain()


@dataclass(frozen=True)
class PersistentClusters(Persistent):
    """The persistent grid's clusters walk cluster-sized tile groups (cluster ``q`` of ``Q`` takes groups ``q,
    q + Q, ...``), every CTA of a cluster the same groups (the same ring ``T``), its tile at its offset in each.
    ``count_by`` (:data:`SCHEDULERS`) ``cta`` counts a CTA's tiles from its own index (the emulator's bug)."""

    count_by: str = "cluster"

    def count_lines(self) -> list[str]:
        """The tile groups, the cluster's index, and ``n_tiles`` from it (or, the bug, from the CTA's)."""
        cfg = self.cfg
        cm, cn, n = cfg.cluster_m, cfg.cluster_n, cfg.cluster_size

        def per(x: str, c: int) -> str:  # x / c rounded up (C text)
            return x if c == 1 else f"({x} + {c - 1}) / {c}"

        def over(x: str, c: int) -> str:  # x / c (C text)
            return x if c == 1 else f"{x} / {c}"
        out = [
            f"  // persistent clusters: the tiles in groups of {cm} x {cn} (a cluster's), a group's tiles outside C "
            "computed and clipped",
            f"  const int groups_n = {per('tiles_n', cn)}, groups_m = {per('tiles_m', cm)};",
            "  const int groups = groups_n * groups_m;",
            f"  // the grid is (P / {n}) * {cn} x {cm} CTAs: cluster q = blockIdx.x / {cn} of Q = gridDim.x / {cn} "
            "takes groups q, q + Q, ...",
            f"  const int cluster_q = {over('(int)blockIdx.x', cn)}, clusters = {over('(int)gridDim.x', cn)};",
        ]
        if self.count_by == "cluster":
            return out + [
                "  // from the CLUSTER's index: every CTA of the cluster takes the same groups, so the same tile count",
                "  // and ring trip count T (peers with different trip counts sharing barriers deadlock)",
                "  const int n_tiles = cluster_q < groups ? (groups - 1 - cluster_q) / clusters + 1 : 0;",
            ]
        # the bug: each CTA counts its tiles from its own index, as the one-CTA scheduler does
        return out + [
            "  const int tiles = tiles_n * tiles_m, cta_b = (int)(blockIdx.y * gridDim.x + blockIdx.x);",
            "  const int n_tiles = cta_b < tiles ? (tiles - 1 - cta_b) / (int)(gridDim.x * gridDim.y) + 1 : 0;"
            "  // BUG (scheduler 'cta'): the CTA's own index",
        ]

    def tile_lines(self) -> list[str]:
        """The CTA's tile in its cluster's ``t``-th tile group."""
        cfg = self.cfg
        return ["const int group = cluster_q + t * clusters;  // the cluster's t-th tile group",
                *cluster_cuda_lines(cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n, "group", "groups_n", "groups_m")]

    def open(self) -> list[str]:
        """Roles only where the cluster has a tile group."""
        return ["  if (n_tiles > 0) {  // a cluster with no tile group initializes and invalidates its barriers, "
                "nothing else"]


def scheduler_of(cfg: KernelDesign, count_by: str = "cluster") -> OneTile:
    """The tile scheduler of ``cfg``: persistent (with a cluster, :class:`PersistentClusters` counting by
    ``count_by``), else split-K, else one tile per CTA (of a cluster: :class:`ClusterTile`)."""
    if cfg.persistent:
        return PersistentClusters(cfg, count_by) if cfg.cluster_size > 1 else Persistent(cfg)
    if cfg.split_k > 1:
        return SplitK(cfg)
    return ClusterTile(cfg) if cfg.cluster_size > 1 else OneTile(cfg)


__all__ = ["OneTile", "ClusterTile", "SplitK", "Persistent", "PersistentClusters", "scheduler_of", "ring", "Turns",
           "EVERY_TILE", "SCHEDULERS", "SPLIT_BARRIER", "split_reduction_lines"]

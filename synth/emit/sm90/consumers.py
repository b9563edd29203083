"""The consumer warp groups of the sm_90a kernel: cooperative or ping-pong (docs/hopper_kernel.md,
docs/hopper_pingpong.md).

Selected by ``KernelDesign.pingpong`` (:func:`consumers_of`). :class:`Cooperative`: the ``bm / 64`` consumer warp
groups split each tile's rows (warp group ``cw`` rows ``cw * 64 ..``), all reading every ring slot, each tile
drained by ``wgmma.wait_group 0`` before C. :class:`PingPong`: two warp groups take a persistent CTA's tiles in
turn (tile ``t`` by warp group ``t % 2``), each a whole ``bm x bn`` tile (``bm / 64`` row blocks), their main
loops serialized by the proven order program (:func:`synth.lower.hopper_pingpong.order_program`): its waits before a
turn's main loop, its drain and hand-over after it, C overlapping the other warp group's main loop; the ring's
slots and parities carried where that is shorter (:func:`pingpong_carries`). Each brings its registers (the
slot-0 wgmma descriptors, the accumulators), its tile head and drain, the rows and sub-tile count of its C, and
the tiles it takes (:class:`synth.emit.sm90.scheduler.Turns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...completion import ArriveStmt
from ...hopper.ir import HopperProgram
from ...lower.hopper_pingpong import order_program
from ...program import CommitStmt, OpStmt
from ...hopper.kernel_design import KernelDesign
from .epilogue import Epilogue
from .scheduler import EVERY_TILE, Turns
from .writer import Writer, carries_slots


def pingpong_carries(cfg: KernelDesign) -> bool:
    """Whether the ping-pong consumer's ring carries its slots and parities (:meth:`Writer.carried_loop`): with a
    128-row tile per warp group (two wgmma per k16: the 4-stage loop's masks and shifts of ``i % 4`` and
    ``i / 4 % 2`` made 5.62 instructions per HGMMA and a longest HGMMA-free run of 29, carried 5.5 / 22; with 2, 3,
    5, 6 or 7 stages 5.44-6.25 / 26-28 -> 5.44-5.5 / 22-23), and with 64-row tiles where
    :func:`~synth.emit.sm90.writer.carries_slots` (3 to 8 stages but 4: 8.5-9.25 / 24-31 -> 7.19-7.38 / 20-23);
    64-row tiles with 2 or 4 stages keep the masks (4 stages: 6.56 / 18, carried 7.19 / 23)."""
    return cfg.row_blocks > 1 or carries_slots(cfg.stages)


@dataclass(frozen=True)
class Cooperative:
    """The ``bm / 64`` consumer warp groups split each tile's rows; every tile of the CTA is theirs."""

    cfg: KernelDesign

    name = "cooperative"
    rows = "cw * 64"
    """The C expression of the warp group's first row in the tile."""

    @property
    def others(self) -> tuple[HopperProgram, ...]:
        """Programs besides the ring whose statements the consumers run: none."""
        return ()

    @property
    def turns(self) -> Turns:
        """Every tile of the CTA."""
        return EVERY_TILE

    def warp_group_line(self) -> str:
        """The consumer warp group's index ``cw`` (depth 2)."""
        return "const int cw = wg - 1;  // consumer warp group: rows cw * 64 .. + 63 of the tile"

    def registers(self, w: Writer) -> None:
        """A consumer warp group's slot-0 wgmma descriptors (pinned) and its accumulators."""
        cfg = self.cfg
        w.w(2, "// descriptors of slot 0 (start address >> 4 in the low bits: a slot adds its bytes >> 4)")
        w.w(2, f"const uint64_t desc_a0 = synth_desc_k128({self.a_origin()}), desc_b0 = synth_desc_k128(sB);")
        # held, not rematerialized: otherwise ptxas may recompute them from sA / sB every k-tile (it did once the
        # split-K epilogue took uniform registers of its own)
        w.w(2, "synth_pin_u64(desc_a0);")
        w.w(2, "synth_pin_u64(desc_b0);")
        w.w(2, f"float acc[{cfg.row_blocks * cfg.bn // 2}];")

    def a_origin(self) -> str:
        """The shared address of the warp group's rows of A in slot 0: its 64 rows of the tile."""
        return f"sA + cw * {64 * 128}"

    def zero(self) -> list[str]:
        """The accumulators zeroed (before a tile's main loop)."""
        return ["#pragma unroll", f"for (int j = 0; j < {self.cfg.row_blocks * self.cfg.bn // 2}; ++j) acc[j] = 0.0f;"]

    def first_subtile(self, subtiles: int) -> str:
        """The C count of tile ``t``'s first store sub-tile in the warp group's run (``subtiles`` per 64-row
        block): the warp group stores a block of every tile."""
        return f"(unsigned)t * {subtiles}u"

    def tile_head(self, w: Writer) -> list[str]:
        """Lines before a persistent tile's main loop: the accumulators zeroed."""
        return self.zero()

    def tile_drain(self, w: Writer) -> list[str]:
        """Lines after a persistent tile's main loop: every wgmma group complete before the accumulators are read
        (``wait_group 0`` only completes more groups than the ring program's own waits)."""
        return ["synth_wgmma_wait_n<0>();  // the tile's accumulators are complete"]

    def tile_c(self, epilogue: Epilogue, first: str) -> list[str]:
        """C of the warp group's tile (depth-2 lines): the epilogue's, once per 64-row block (its accumulators at
        ``acc + r BN / 2``, its store sub-tiles from ``first + r * subtiles``)."""
        cfg = self.cfg
        if cfg.row_blocks == 1:
            return epilogue.tile(self.rows, first)
        # each 64-row block of the warp group's tile in turn, its accumulators at acc + r BN / 2
        out = []
        for r in range(cfg.row_blocks):
            part = epilogue.tile(str(64 * r), f"{first} + {r * epilogue.subtiles}u")
            out += ["    {  // rows " + f"{64 * r} .. {64 * r + 63} of the tile"] + \
                [ln.replace("acc[", f"acc[{r * cfg.bn // 2} + ") for ln in part] + ["    }"]
        return out


@dataclass(frozen=True)
class PingPong(Cooperative):
    """Two consumer warp groups taking a persistent CTA's tiles in turn, each a whole tile, their main loops
    ordered by the order program ``order`` (:func:`~synth.lower.hopper_pingpong.order_program`, or a mutant of it for
    the bug tests)."""

    order: HopperProgram

    name = "ping-pong"
    rows = "0"

    @property
    def others(self) -> tuple[HopperProgram, ...]:
        """The order program (its barriers laid out, set up and torn down with the ring's)."""
        return (self.order,)

    @property
    def turns(self) -> Turns:
        """Tiles ``t = cw, cw + 2, ...``; the ring's epilogue by the warp group that took the last tile."""
        return Turns("for (int t = cw; t < n_tiles; t += 2) {  // ping-pong: this warp group's turns, tiles "
                     "t = 2 j + cw",
                     "if ((n_tiles - 1) % 2 == cw) {  // after the last tile, by the warp group that took it: "
                     "the ring's epilogue", pingpong_carries(self.cfg))

    def warp_group_line(self) -> str:
        """The consumer warp group's index ``cw``: whole tiles, every other one."""
        return "const int cw = wg - 1;  // consumer warp group: whole 64-row tiles, every other one of the CTA's"

    def a_origin(self) -> str:
        """The whole tile's rows of A: slot 0 itself."""
        return "sA"

    def first_subtile(self, subtiles: int) -> str:
        """The warp group's ``t / 2``-th tile, ``bm / 64`` blocks of ``subtiles`` each."""
        return f"(unsigned)(t / 2) * {subtiles * self.cfg.row_blocks}u"

    def tile_head(self, w: Writer) -> list[str]:
        """The order program's waits before the turn's main loop, then the accumulators zeroed."""
        return self.order_lines(w, "head") + self.zero()

    def tile_drain(self, w: Writer) -> list[str]:
        """The order program's drain (``wait_group 0``) and the arrive that hands the ring to the other warp group;
        C then overlaps the other's main loop."""
        return self.order_lines(w, "tail")

    def order_lines(self, w: Writer, where: str) -> list[str]:
        """The order program's statements of this warp group's turn ``j = t / 2`` (``if (cw == 0)``: role ``pp0``,
        else ``pp1``): ``head``, those before the role's collective op (its main loop); ``tail``, those after it
        but the commit (the ring's body commits its own groups: the op and its commit stand for the main loop)."""
        out: list[str] = []
        saved, w.lines = w.lines, out
        w.w(0, "{  // ping-pong order barrier: this warp group's turn j = t / 2 (" + where + ")")
        w.w(1, "const int i = t / 2;")
        for k, rname in enumerate(("pp0", "pp1")):
            role = self.order.role(rname)
            body = role.program.parts[0].stmts
            at = next(n for n, st in enumerate(body) if isinstance(st, OpStmt) and st.op in role.collective)
            stmts = body[:at] if where == "head" else [st for st in body[at + 1:] if not isinstance(st, CommitStmt)]
            w.w(1, "if (cw == 0) {" if k == 0 else "} else {")
            for st in stmts:
                if isinstance(st, ArriveStmt):
                    w.w(2, "// order: hand the ring over to the other warp group")
                w.stmt(2, rname, st, role.program.waits)
        w.w(1, "}")
        w.w(0, "}")
        w.lines = saved
        return out


def consumers_of(cfg: KernelDesign, order: Optional[HopperProgram] = None) -> Cooperative:
    """The consumer warp groups of ``cfg.pingpong``: :class:`PingPong` with the order program ``order`` (default
    ``order_program(False)``), else :class:`Cooperative`."""
    if cfg.pingpong:
        return PingPong(cfg, order if order is not None else order_program(False))
    return Cooperative(cfg)


__all__ = ["Cooperative", "PingPong", "consumers_of", "pingpong_carries"]

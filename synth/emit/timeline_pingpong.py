"""The ping-pong timeline: two consumer warp groups taking tiles in turn, drawn (docs/hopper_pingpong.md).

The proven ring program has one consumer role; the picture needs two. :func:`pingpong_view` builds, for a
fixed ``kt`` k-tiles per tile and ``tiles`` tiles, a drawing-only Hopper program: the ring's producer
unchanged, and consumer roles ``consumer0`` / ``consumer1`` running the ring consumer's statements of
their own tiles (guards ``i / kt % 2 == w``), with the order barrier's wait before each main loop but the
first, ``wait_group 0`` and the order arrive after it, and the C store as a synchronous op of
``epilogue_cycles`` (it overlaps the other warp group's main loop). :func:`render_pingpong_timeline` draws
it with :mod:`synth.emit.timeline_hopper`. Not a proof: the proof is :mod:`synth.verify.hopper_pingpong`'s.

The view also draws a persistent cooperative CTA's tiles (``pingpong=False``), of one CTA (roles ``producer``,
``consumer``) or of a thread-block cluster's ring (roles ``producer0``, ``producer1``, ``consumer0``, ``consumer1``:
each CTA's consumer stores its own tile). :func:`design_timeline` picks the picture of an output folder from its
design flags (:func:`timeline_kind`), for every combination the problem reader accepts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..completion import ArriveStmt, Barrier, InitStmt, InvalStmt, PipelineState, TryWaitStmt
from ..expr import Bin, Num, parse, simplify
from ..hopper.ir import HopperProgram, Role
from ..program import OpStmt, ProgOp, Wait, WaitStmt
from .timeline_hopper import ASYNC_STORE_UNIT, render_hopper_timeline

EPILOGUE_CYCLES = 1500
"""Default cycles of one tile's C store drawn: a 64x128 f32 tile (32 KiB) at about 22 B/clk, the SM's
share of the L2 write bandwidth (synth/arch.py), plus one global latency."""


def _and(a, b):
    return a if b is None else b if a is None else simplify(Bin("&&", a, b))


STAGING_CYCLES = 400
"""Default cycles of one tile's staging writes before its TMA stores (a 64x128 f32 tile through shared memory)."""


def _ring_roles(ring: HopperProgram, pingpong: bool) -> tuple[list, list]:
    """``(producers, consumers)`` of a ring program: ``producer`` / ``consumer``, or a cluster's ``producer0 ..
    producer{n-1}`` / ``consumer0 .. consumer{n-1}`` (not with ``pingpong``). ValueError otherwise."""
    names = [r.name for r in ring.roles]
    if names == ["producer", "consumer"]:
        return [ring.role("producer")], [ring.role("consumer")]
    n = len(names) // 2
    cluster = [f"producer{c}" for c in range(n)] + [f"consumer{c}" for c in range(n)]
    if n >= 2 and sorted(names) == sorted(cluster):
        if pingpong:
            raise ValueError(f"ping-pong consumers on a cluster's ring (roles {names}): not a design synth builds")
        return [ring.role(f"producer{c}") for c in range(n)], [ring.role(f"consumer{c}") for c in range(n)]
    raise ValueError(f"expected roles producer and consumer (or a cluster's producer0, ..., consumer0, ...), "
                     f"got {names}")


def pingpong_view(ring: HopperProgram, kt: int = 3, tiles: int = 4, epilogue_cycles: int = EPILOGUE_CYCLES,
                  *, pingpong: bool = True, tma_store: bool = False) -> HopperProgram:
    """The drawing program (module docstring) of the proven ring program ``ring`` (roles ``producer`` and
    ``consumer``, or a cluster ring's ``producer{c}`` and ``consumer{c}``); ``pingpong`` False: one consumer role
    takes every tile (a cooperative persistent CTA; in a cluster, each CTA's consumer role its CTA's tile, the
    store ops named after the CTA); ``tma_store``: the C store is the staging writes (:data:`STAGING_CYCLES`,
    synchronous) then a TMA store of ``epilogue_cycles`` that runs on its own
    (:data:`synth.emit.timeline_hopper.ASYNC_STORE_UNIT`). ValueError when ``kt`` or ``tiles`` is below 1 or the
    ring is not of that shape (ping-pong on a cluster ring included)."""
    if kt < 1 or tiles < 1:
        raise ValueError("kt and tiles must be at least 1")
    producers, consumers = _ring_roles(ring, pingpong)
    # (drawn role name, the ring's consumer role it runs, the tile parity it takes or None, the store ops' suffix)
    if pingpong:
        lanes = [(f"consumer{w}", consumers[0], w, str(w)) for w in (0, 1)]
    else:
        lanes = [(c.name, c, None, c.name[len("consumer"):] or "0") for c in consumers]
    extra = []
    for _, _, _, sfx in lanes:
        if tma_store:
            extra += [ProgOp(f"stage_C{sfx}", "epilogue", 0, False, None, None, STAGING_CYCLES),
                      ProgOp(f"tma_store_C{sfx}", ASYNC_STORE_UNIT, 0, False, None, None, epilogue_cycles)]
        else:
            extra.append(ProgOp(f"store_C{sfx}", "epilogue", 0, False, None, None, epilogue_cycles))
    ops = ring.ops + tuple(extra)
    roles = [replace(r, program=replace(r.program, ops=ops)) for r in producers]
    turn = f"i / {2 * kt}"
    for name, cons, w, sfx in lanes:
        prog = cons.program
        body, rest = prog.parts[0], prog.parts[1:]
        mine = parse(f"i / {kt} % 2 == {w}") if pingpong else None
        start, end = parse(f"i % {kt} == 0"), parse(f"i % {kt} == {kt - 1}")
        head = []
        if pingpong and w == 0:
            head.append(TryWaitStmt("order0", PipelineState(parse(f"{turn} - 1"), 1, 0),
                                    _and(_and(mine, start), parse(f"1 <= {turn}"))))
        elif pingpong:
            head.append(TryWaitStmt("order1", PipelineState(parse(turn), 1, 0), _and(mine, start)))
        stmts = head + [replace(s, guard=_and(mine, s.guard)) for s in body.stmts]
        drain = len(prog.waits)
        stmts.append(WaitStmt(drain, _and(mine, end)))
        if pingpong:
            stmts.append(ArriveStmt(f"order{1 - w}", PipelineState(parse(turn), 1, 0), 1, (), _and(mine, end)))
        if tma_store:
            stmts += [OpStmt(f"stage_C{sfx}", parse("i"), _and(mine, end)),
                      OpStmt(f"tma_store_C{sfx}", parse("i"), _and(mine, end))]
        else:
            stmts.append(OpStmt(f"store_C{sfx}", parse("i"), _and(mine, end)))
        last = not pingpong or (tiles - 1) % 2 == w  # the ring's drain: the warp group of the last tile
        parts = (replace(body, stmts=tuple(stmts)),) + (tuple(rest) if last else ())
        waits = prog.waits + (Wait("body", 0, Num(0), f"order{1 - w}" if pingpong else "the C store",
                                   reason="the tile's groups drained"),)
        if not last:
            waits = tuple(replace(x, part="body") if x.part != "body" else x for x in waits)
            keep = [k for k, x in enumerate(prog.waits) if x.part == "body"] + [drain]
            remap = {old: new for new, old in enumerate(keep)}
            parts = (replace(parts[0], stmts=tuple(replace(s, wait=remap[s.wait]) if isinstance(s, WaitStmt) else s
                                                   for s in parts[0].stmts)),)
            waits = tuple(waits[k] for k in keep)
        roles.append(Role(name, 1 if pingpong else cons.warpgroups,
                          replace(prog, ops=ops, parts=parts, waits=waits),
                          threads=cons.threads, collective=cons.collective))
    order = tuple(Barrier(f"order{w}", 1, 1, "full", ()) for w in (0, 1)) if pingpong else ()
    what = ("ping-pong" if pingpong else "persistent") + (" + TMA store" if tma_store else "")
    return replace(ring, name=f"{ring.name} ({what} view, {tiles} tiles of {kt} k-tiles)", ops=ops,
                   barriers=ring.barriers + order,
                   setup=ring.setup + tuple(InitStmt(b.name) for b in order), roles=tuple(roles),
                   teardown=ring.teardown + tuple(InvalStmt(b.name) for b in order))


def render_pingpong_timeline(ring: HopperProgram, kt: int = 3, tiles: int = 4,
                             epilogue_cycles: int = EPILOGUE_CYCLES, *, pingpong: bool = True,
                             tma_store: bool = False) -> tuple[str, bytes]:
    """``(SVG text, PNG bytes)`` of :func:`pingpong_view` over all its ``kt x tiles`` k-tiles."""
    view = pingpong_view(ring, kt, tiles, epilogue_cycles, pingpong=pingpong, tma_store=tma_store)
    return render_hopper_timeline(view, trip=kt * tiles, n_iters=min(kt * tiles, 64))


TIMELINE_KINDS = ("ring", "pingpong", "persistent_store")
"""What :func:`design_timeline` draws: ``ring`` the proven program as it is (one CTA per tile: the tile's k-loop;
persistent with the register epilogue: the CTA's ring over its tiles), ``pingpong`` the ping-pong view,
``persistent_store`` the persistent view with each tile's TMA stores under the next tile's main loop."""


def timeline_kind(*, persistent: bool = False, pingpong: bool = False, epilogue: str = "register") -> str:
    """The picture (:data:`TIMELINE_KINDS`) of a folder of these design flags; the cluster shape does not change
    it (:func:`pingpong_view` takes a cluster's ring)."""
    if pingpong:
        return "pingpong"
    if persistent and epilogue == "tma_store":
        return "persistent_store"
    return "ring"


def _flags(cfg) -> tuple[bool, bool, str]:
    """``(persistent, pingpong, epilogue)`` of a kernel configuration."""
    return (bool(getattr(cfg, "persistent", False)), bool(getattr(cfg, "pingpong", False)),
            getattr(cfg, "epilogue", "register"))


def design_view(program: HopperProgram, cfg, kt: int = 3, tiles: int = 4) -> tuple[HopperProgram, Optional[int]]:
    """``(the program drawn, its trip count or None for the default)`` of an output folder's timeline: the proven
    ``program`` of the kernel configuration ``cfg`` (an :class:`~synth.hopper.kernel_design.KernelDesign`, or anything
    with its ``persistent``, ``pingpong`` and ``epilogue``) as it is, or its :func:`pingpong_view` of ``tiles``
    tiles of ``kt`` k-tiles, as :func:`timeline_kind` says."""
    persistent, pingpong, epilogue = _flags(cfg)
    kind = timeline_kind(persistent=persistent, pingpong=pingpong, epilogue=epilogue)
    if kind == "ring":
        return program, None
    return pingpong_view(program, kt, tiles, pingpong=kind == "pingpong", tma_store=epilogue == "tma_store"), kt * tiles


def design_timeline(program: HopperProgram, cfg) -> tuple[str, bytes]:
    """``(SVG text, PNG bytes)`` of an output folder's ``timeline.png``: :func:`design_view` drawn."""
    view, trip = design_view(program, cfg)
    if trip is None:
        return render_hopper_timeline(view)
    return render_hopper_timeline(view, trip=trip, n_iters=min(trip, 64))


__all__ = ["pingpong_view", "render_pingpong_timeline", "design_timeline", "design_view", "timeline_kind",
           "TIMELINE_KINDS", "EPILOGUE_CYCLES", "STAGING_CYCLES"]

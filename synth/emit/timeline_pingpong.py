"""The ping-pong timeline: two consumer warp groups taking tiles in turn, drawn (docs/hopper_pingpong.md).

The proven ring program has one consumer role; the picture needs two. :func:`pingpong_view` builds, for a
fixed ``kt`` k-tiles per tile and ``tiles`` tiles, a drawing-only Hopper program: the ring's producer
unchanged, and consumer roles ``consumer0`` / ``consumer1`` running the ring consumer's statements of
their own tiles (guards ``i / kt % 2 == w``), with the order barrier's wait before each main loop but the
first, ``wait_group 0`` and the order arrive after it, and the C store as a synchronous op of
``epilogue_cycles`` (it overlaps the other warp group's main loop). :func:`render_pingpong_timeline` draws
it with :mod:`synth.emit.timeline_hopper`. Not a proof: the proof is :mod:`synth.hopper.pingpong`'s.
"""

from __future__ import annotations

from dataclasses import replace

from ..completion import ArriveStmt, Barrier, InitStmt, InvalStmt, PipelineState, TryWaitStmt
from ..expr import Bin, Num, parse, simplify
from ..hopper.ir import HopperProgram, Role
from ..program import OpStmt, ProgOp, Wait, WaitStmt

EPILOGUE_CYCLES = 1500
"""Default cycles of one tile's C store drawn: a 64x128 f32 tile (32 KiB) at about 22 B/clk, the SM's
share of the L2 write bandwidth (synth/arch.py), plus one global latency."""


def _and(a, b):
    return a if b is None else b if a is None else simplify(Bin("&&", a, b))


STAGING_CYCLES = 400
"""Default cycles of one tile's staging writes before its TMA stores (a 64x128 f32 tile through shared memory)."""


def pingpong_view(ring: HopperProgram, kt: int = 3, tiles: int = 4, epilogue_cycles: int = EPILOGUE_CYCLES,
                  *, pingpong: bool = True, tma_store: bool = False) -> HopperProgram:
    """The drawing program (module docstring) of the proven ring program ``ring`` (roles ``producer`` and
    ``consumer``); ``pingpong`` False: one consumer role takes every tile (a cooperative persistent CTA);
    ``tma_store``: the C store is the staging writes (:data:`STAGING_CYCLES`, synchronous) then a TMA store of
    ``epilogue_cycles`` that runs on its own (:data:`synth.emit.timeline_hopper.ASYNC_STORE_UNIT`). ValueError
    when ``kt`` or ``tiles`` is below 1 or the ring is not of that shape."""
    if kt < 1 or tiles < 1:
        raise ValueError("kt and tiles must be at least 1")
    names = [r.name for r in ring.roles]
    if names != ["producer", "consumer"]:
        raise ValueError(f"expected roles producer and consumer, got {names}")
    cons = ring.role("consumer")
    prog = cons.program
    body, rest = prog.parts[0], prog.parts[1:]
    from .timeline_hopper import ASYNC_STORE_UNIT

    lanes = (0, 1) if pingpong else (0,)
    extra = []
    for w in lanes:
        if tma_store:
            extra += [ProgOp(f"stage_C{w}", "epilogue", 0, False, None, None, STAGING_CYCLES),
                      ProgOp(f"tma_store_C{w}", ASYNC_STORE_UNIT, 0, False, None, None, epilogue_cycles)]
        else:
            extra.append(ProgOp(f"store_C{w}", "epilogue", 0, False, None, None, epilogue_cycles))
    ops = ring.ops + tuple(extra)
    roles = [ring.role("producer")]
    turn = f"i / {2 * kt}"
    for w in lanes:
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
            stmts += [OpStmt(f"stage_C{w}", parse("i"), _and(mine, end)),
                      OpStmt(f"tma_store_C{w}", parse("i"), _and(mine, end))]
        else:
            stmts.append(OpStmt(f"store_C{w}", parse("i"), _and(mine, end)))
        last = (tiles - 1) % 2 == w or not pingpong  # the ring's drain: the warp group of the last tile
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
        roles.append(Role(f"consumer{w}" if pingpong else "consumer", 1 if pingpong else cons.warpgroups,
                          replace(prog, ops=ops, parts=parts, waits=waits),
                          threads=cons.threads, collective=cons.collective))
    roles[0] = replace(roles[0], program=replace(roles[0].program, ops=ops))
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
    from .timeline_hopper import render_hopper_timeline

    view = pingpong_view(ring, kt, tiles, epilogue_cycles, pingpong=pingpong, tma_store=tma_store)
    return render_hopper_timeline(view, trip=kt * tiles, n_iters=min(kt * tiles, 64))


__all__ = ["pingpong_view", "render_pingpong_timeline", "EPILOGUE_CYCLES", "STAGING_CYCLES"]

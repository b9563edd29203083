"""A Hopper folder's ``schedule.json`` (docs/outputs.md): :func:`choice_to_json` writes a problem's pipeline choice,
:func:`choice_from_json` reads it back, checked against the problem (only ``stages`` and ``k_pipe_mmas`` are read as
choices; the rest is derived again)."""

from __future__ import annotations

from ..errors import Loc, SynthError
from .loop import MAINLOOP, SCHEDULE_FORMAT, HopperChoice
from .problem import HopperGemm


def choice_to_json(g: HopperGemm, c: HopperChoice) -> dict:
    """``schedule.json`` of a Hopper folder (docs/outputs.md)."""
    return {"format": SCHEDULE_FORMAT, "problem": g.name, "mainloop": MAINLOOP, "stages": c.stages,
            "k_pipe_mmas": c.k_pipe_mmas, "consumer_warpgroups": g.consumers,
            "warp_specialized": c.warp_specialized, "predicted_cycles": c.cycles,
            "predicted_for_k_tiles": g.trip_count // g.split_k, "shared_bytes": c.smem_bytes, "status": c.status,
            **({"cluster": g.cluster} if g.cluster != "1x1" else {})}


def choice_from_json(g: HopperGemm, doc, path: str) -> HopperChoice:
    """The choice of a Hopper ``schedule.json``; SynthError when a field is missing, out of bounds or
    disagrees with the problem. Only ``stages`` and ``k_pipe_mmas`` are read as choices; the rest is
    derived again (consumers from the tile, shared memory from the stages)."""
    loc = Loc(path)
    if not isinstance(doc, dict) or doc.get("format") != SCHEDULE_FORMAT:
        raise SynthError(loc, f"not a Hopper schedule (format {SCHEDULE_FORMAT})", "re-run 'synth solve'")
    vals = {}
    for key, lo, hi in (("stages", 1, g.max_stages()), ("k_pipe_mmas", 0, 15)):
        v = doc.get(key)
        if type(v) is not int or not lo <= v <= hi:
            raise SynthError(loc, f"{key} {v!r} is not an integer in {lo}..{hi}", "re-run 'synth solve'")
        vals[key] = v
    if vals["k_pipe_mmas"] >= vals["stages"]:
        raise SynthError(loc, f"k_pipe_mmas {vals['k_pipe_mmas']} must be below stages {vals['stages']}",
                         "re-run 'synth solve'")
    for key in ("stages", "k_pipe_mmas"):
        pin = getattr(g, key)
        if pin is not None and pin != vals[key]:
            raise SynthError(loc, f"{key} {vals[key]} differs from the problem's {key}: {pin}", "re-run 'synth solve'")
    cyc = doc.get("predicted_cycles")
    return HopperChoice(vals["stages"], vals["k_pipe_mmas"], g.consumers, cyc if type(cyc) is int else 0,
                        g.smem_bytes(vals["stages"]), str(doc.get("status", "")), True)


__all__ = ["choice_to_json", "choice_from_json"]

"""The Hopper kernel's design: persistent or not, cooperative or ping-pong, register or TMA-store epilogue, one
CTA or a thread-block cluster (docs/hopper_design.md), and which designs a problem's pins allow.

A problem may leave any of ``persistent``, ``pingpong``, ``epilogue`` and ``cluster`` to synth by writing
``auto`` (:attr:`synth.hopper.problem.HopperGemm.auto`). :func:`candidate_designs` enumerates the designs its pins
allow (:func:`legal`: ping-pong needs ``BM`` 64 and a persistent grid; the TMA-store epilogue ``N`` a multiple of
4; neither split-K; a ``2x1`` or ``1x2`` cluster, one CTA per tile or persistent, no ping-pong or split-K);
:func:`synth.flow.design.choose_design` picks the one of least predicted time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Optional

from .cluster_shape import CLUSTERS
from .problem import EPILOGUES, HopperGemm

DESIGN_KEYS = ("persistent", "pingpong", "epilogue", "cluster")
"""Problem keys that may be ``auto``."""


@dataclass(frozen=True)
class Design:
    persistent: bool = False
    pingpong: bool = False
    epilogue: str = "register"
    cluster: str = "1x1"

    @property
    def label(self) -> str:
        grid = "ping-pong" if self.pingpong else "persistent" if self.persistent else "one CTA per tile"
        if self.cluster != "1x1":
            grid = ("persistent " if self.persistent else "") + f"{self.cluster} cluster"
        return grid + (" + TMA store" if self.epilogue == "tma_store" else "")

    @property
    def features(self) -> int:
        """How many of persistent, ping-pong, the TMA store and a cluster it uses (the tie-break: fewer first)."""
        return int(self.persistent) + int(self.pingpong) + int(self.epilogue == "tma_store") + int(self.cluster != "1x1")

    def to_json(self) -> dict:
        return {"persistent": self.persistent, "pingpong": self.pingpong, "epilogue": self.epilogue,
                "cluster": self.cluster}


def design_of(g: HopperGemm) -> Design:
    return Design(g.persistent, g.pingpong, g.epilogue, g.cluster)


def with_design(g: HopperGemm, d: Design) -> HopperGemm:
    """``g`` with the design ``d`` (its ``auto`` keys kept: they say what was chosen)."""
    return replace(g, persistent=d.persistent or d.pingpong, pingpong=d.pingpong, epilogue=d.epilogue,
                   cluster=d.cluster)


def legal(g: HopperGemm, d: Design) -> Optional[str]:
    """None when the kernel can be built with design ``d`` for ``g``, else why not."""
    if d.pingpong and not d.persistent:
        return "ping-pong consumers take a persistent CTA's tiles"
    if d.pingpong and g.BM * g.BN // 128 > 128:
        return f"a {g.BM}x{g.BN} ping-pong tile per warp group would spill (over 128 accumulators per thread)"
    if g.split_k > 1 and (d.persistent or d.pingpong or d.epilogue == "tma_store"):
        return f"split_k = {g.split_k} takes one CTA per split and the register epilogue"
    if g.out_dtype != "f32" and d.epilogue != "tma_store":
        return f"out_dtype {g.out_dtype} is stored by the TMA-store epilogue only"
    if d.epilogue == "tma_store" and g.N % 4:
        return f"N = {g.N}: a TMA store needs a row stride that is a multiple of 16 bytes"
    if d.cluster != "1x1" and (d.pingpong or g.split_k > 1):
        return (f"a {d.cluster} cluster runs one CTA per tile or a persistent grid of whole clusters, without "
                "ping-pong or split-K (docs/hopper_cluster.md)")
    return None


def candidate_designs(g: HopperGemm) -> list[Design]:
    """The designs the problem's pins allow (an ``auto`` key takes each of its values), legal ones only."""
    values = {"persistent": (False, True), "pingpong": (False, True), "epilogue": EPILOGUES, "cluster": CLUSTERS}
    pinned = design_of(g)
    axes = [values[k] if k in g.auto else (getattr(pinned, k),) for k in DESIGN_KEYS]
    out = []
    for p, pp, e, c in itertools.product(*axes):
        d = Design(p, pp, e, c)
        if legal(g, d) is None:
            out.append(d)
    return out


__all__ = ["Design", "DESIGN_KEYS", "candidate_designs", "design_of", "with_design", "legal"]

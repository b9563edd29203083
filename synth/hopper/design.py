"""Which kernel designs a Hopper problem allows: persistent or not, cooperative or ping-pong, register or TMA-store
epilogue, one CTA or a thread-block cluster (docs/hopper_design.md).

A problem may leave any of ``persistent``, ``pingpong``, ``epilogue`` and ``cluster`` to synth by writing
``auto`` (:attr:`synth.hopper.problem.HopperGemm.auto`). :func:`candidate_designs` enumerates the
:class:`~synth.hopper.kernel_design.KernelDesign` values its pins allow (:func:`legal`: the design's own
:meth:`~synth.hopper.kernel_design.KernelDesign.issues` and the problem shape's, e.g. ping-pong needs a persistent
grid and at most 128 accumulators per thread, the TMA-store epilogue ``N`` a multiple of 4, neither split-K, a
cluster neither ping-pong nor split-K, an f16 or bf16 C the TMA-store epilogue, a ``warps:`` pin its count of
consumer warp groups); :func:`synth.flow.design.choose_design` picks the one of least predicted
time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from .kernel_design import AUTO_VALUES, KernelDesign
from .problem import HopperGemm

DESIGN_KEYS = tuple(AUTO_VALUES)
"""Problem keys that may be ``auto``."""


def design_json(d: KernelDesign) -> dict:
    """The design keys of ``d`` (:data:`DESIGN_KEYS`) as ``schedule.json`` and ``synth solve --json`` write them."""
    return {"persistent": d.persistent, "pingpong": d.pingpong, "epilogue": d.epilogue, "cluster": d.cluster}


def with_design(g: HopperGemm, d: KernelDesign) -> HopperGemm:
    """``g`` computed by the design ``d`` (its ``auto`` keys kept: they say what was chosen)."""
    return replace(g, design=d.as_design())


def legal(g: HopperGemm, d: KernelDesign) -> Optional[str]:
    """None when the kernel can be built with design ``d`` for ``g``'s shape and ``warps:`` (where the problem
    gives it), else why not (the pipeline choice, ``stages`` and ``k_pipe_mmas``, is not judged here: it is made
    for each design afterwards)."""
    for i in d.issues(g.shared_limit) + d.shape_issues(g.M, g.N, g.K) + d.warp_issues(g.pinned_warps):
        if i.key not in ("stages", "k_pipe_mmas"):
            return i.message
    return None


def candidate_designs(g: HopperGemm) -> list[KernelDesign]:
    """The designs the problem's pins allow (an ``auto`` key takes each of its values), legal ones only, in the
    order persistent, pingpong, epilogue, cluster vary (the last fastest:
    :meth:`~synth.hopper.kernel_design.KernelDesign.auto_variants`). An ``out_dtype`` of f16 or bf16 leaves the
    TMA-store epilogue alone to an ``epilogue: auto`` (the register epilogue stores f32 only); a ``warps:`` the
    designs of its count."""
    return [d for d in g.design.auto_variants(g.auto) if legal(g, d) is None]


__all__ = ["DESIGN_KEYS", "candidate_designs", "design_json", "with_design", "legal"]

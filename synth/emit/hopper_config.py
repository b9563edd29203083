"""The sm_90a kernel of a Hopper problem under a pipeline choice: what ``synth solve`` emits the kernel from and
:mod:`synth.kernel` derives again when it reads a Hopper folder back (no solver needed).
"""

from __future__ import annotations

from ..errors import SynthError
from ..hopper.kernel_design import KernelDesign
from ..hopper.loop import HopperChoice
from ..hopper.problem import HopperGemm


def kernel_config(g: HopperGemm, choice: HopperChoice) -> KernelDesign:
    """The problem's :class:`~synth.hopper.kernel_design.KernelDesign` with ``choice``'s stages and ``k_pipe_mmas``
    (checked: SynthError at the key the refusal belongs to)."""
    d = g.design.with_(stages=choice.stages, k_pipe_mmas=choice.k_pipe_mmas, name=g.name)
    bad = d.issues()
    if bad:
        raise SynthError(g.loc("cluster" if g.cluster != "1x1" else ""), f"the kernel cannot take this choice: "
                         f"{bad[0].message}", "use another tile or stages")
    return d


__all__ = ["kernel_config"]

"""The sm_90a kernel's configuration of a Hopper problem under a pipeline choice: what ``synth solve`` emits the
kernel from and :mod:`synth.kernel` derives again when it reads a Hopper folder back (no solver needed).
"""

from __future__ import annotations

from ..errors import SynthError
from ..hopper.loop import HopperChoice
from ..hopper.problem import HopperGemm
from .sm90.config import Sm90Config


def kernel_config(g: HopperGemm, choice: HopperChoice) -> Sm90Config:
    """The :class:`~synth.emit.sm90.config.Sm90Config` of ``g`` under ``choice`` (checked)."""
    cfg = Sm90Config(bm=g.BM, bn=g.BN, stages=choice.stages, k_pipe_mmas=choice.k_pipe_mmas, dtype=g.dtype,
                     name=g.name, split_k=g.split_k, persistent=g.persistent, epilogue=g.epilogue,
                     pingpong=g.pingpong, out_dtype=g.out_dtype, cluster=g.cluster,
                     activation=g.activation)
    try:
        cfg.check()
    except ValueError as e:
        raise SynthError(g.loc("cluster" if g.cluster != "1x1" else ""), f"the kernel cannot take this choice: {e}",
                         "use another tile or stages") from None
    return cfg


__all__ = ["kernel_config"]

"""What a :class:`~synth.hopper.kernel_design.KernelDesign` adds to the proven program, part by part: the main loop's
warp-specialized ring (:func:`synth.lower.barriers.lower_hopper`; on a cluster
:func:`synth.lower.cluster.lower_hopper_cluster`, whose roles and barriers name their CTA) and the TMA-store
epilogue's bulk-store FIFO (:func:`synth.lower.hopper_store.store_program`). The persistent scheduler's and the
ping-pong consumers' programs are built from the ring by :mod:`synth.lower.hopper_persistent` and
:mod:`synth.lower.hopper_pingpong`. Pure.
"""

from __future__ import annotations

from typing import Optional

from ..hopper.ir import HopperProgram
from ..program import Program
from ..hopper.kernel_design import KernelDesign
from .barriers import lower_hopper
from .cluster import lower_hopper_cluster
from .hopper_store import store_program


def design_program(design: KernelDesign) -> HopperProgram:
    """The lowered warp-specialized main loop of ``design`` (ValueError when the design cannot be built)."""
    design.check()
    if design.cluster != "1x1":
        return lower_hopper_cluster(design.hopper_loop(), design.cluster_size, design.shared_operand)
    return lower_hopper(design.hopper_loop())


def design_store_program(design: KernelDesign) -> Optional[Program]:
    """The TMA-store epilogue's program of one consumer warp group; None for the register epilogue."""
    design.check()
    if design.epilogue != "tma_store":
        return None
    return store_program(design.staging, name=f"{design.name}.store")


__all__ = ["design_program", "design_store_program"]

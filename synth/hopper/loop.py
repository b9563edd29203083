"""The Hopper main loop to lower: TMA loads feeding one wgmma op, and the pipeline's choices.

A :class:`HopperLoop` is what :func:`synth.lower.barriers.lower_hopper` needs: the loads
(each a TMA copy of one tile per iteration, ``bytes`` the full box), the wgmma op reading
them, ``stages`` (slots per buffer), ``k_pipe_mmas`` (wgmma groups a consumer keeps in
flight before it releases a slot, CUTLASS's ``K_PIPE_MMAS``) and the number of consumer
warp groups. Bounds: 1 <= stages <= 16, 0 <= k_pipe_mmas < stages, 1..4 consumers.

A :class:`HopperChoice` is the pipeline's choice (stages, ``K_PIPE_MMAS``, consumers: what
:func:`synth.model.hopper.choose` picks and a Hopper folder's ``schedule.json`` holds), and
:func:`hopper_loop` the GEMM main loop it gives (:mod:`synth.hopper.choice_json` writes and reads its ``schedule.json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ..gemm import GemmConfig

SCHEDULE_FORMAT = "synth-hopper-schedule/1"
"""``schedule.json`` of a Hopper folder."""
MAINLOOP = "tma_wgmma"
MAX_STAGES = 16
MAX_CONSUMERS = 4
DTYPE_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "f32": 4}


@dataclass(frozen=True)
class Load:
    op: str
    buffer: str
    bytes: int
    """Bytes of the whole TMA box (complete_tx counts them even where the box is zero-filled)."""
    when: Optional[str] = None
    """Predicate in the loop variable and trip symbol (``None``: always), as in problem files."""


@dataclass(frozen=True)
class HopperLoop:
    name: str
    loads: tuple[Load, ...]
    mma: str
    stages: int
    k_pipe_mmas: int = 1
    consumers: int = 1
    trip_count: Union[int, str] = "T"
    min_trip_count: int = 1
    loop_var: str = "k"

    def check(self) -> None:
        """ValueError naming the bound a field breaks."""
        if not 1 <= self.stages <= MAX_STAGES:
            raise ValueError(f"stages {self.stages} outside 1..{MAX_STAGES}")
        if not 0 <= self.k_pipe_mmas < self.stages:
            raise ValueError(f"k_pipe_mmas {self.k_pipe_mmas} outside 0..stages - 1 ({self.stages - 1}): a "
                             "consumer holding as many groups as slots starves the producer")
        if not 1 <= self.consumers <= MAX_CONSUMERS:
            raise ValueError(f"consumers {self.consumers} outside 1..{MAX_CONSUMERS}")
        if not self.loads:
            raise ValueError("a Hopper loop needs at least one TMA load")
        if self.min_trip_count < 1:
            raise ValueError("min_trip_count must be >= 1")
        if len({ld.buffer for ld in self.loads}) != len(self.loads):
            raise ValueError("each load writes its own buffer")
        for ld in self.loads:
            if ld.bytes <= 0 or ld.bytes % 16:
                raise ValueError(f"load {ld.op}: box bytes {ld.bytes} must be a positive multiple of 16")


@dataclass(frozen=True)
class HopperChoice:
    stages: int
    k_pipe_mmas: int
    consumers: int
    cycles: int
    """Predicted cycles of the k-tile loop at the model's ``T``."""
    smem_bytes: int
    status: str
    """CP-SAT's status name (OPTIMAL when proven best)."""
    warp_specialized: bool = True

    def explain(self) -> str:
        ws = "warp-specialized" if self.warp_specialized else "one warp group"
        return (f"{ws}, {self.stages} stages, K_PIPE_MMAS = {self.k_pipe_mmas}, {self.consumers} consumer warp "
                f"group(s): "
                f"{self.smem_bytes} B of shared memory, {self.cycles} predicted cycles ({self.status})")


def hopper_loop(cfg: GemmConfig, choice: HopperChoice) -> HopperLoop:
    """The main loop of ``cfg`` with ``choice``: TMA boxes for A and B, one wgmma per k-tile."""
    b = DTYPE_BYTES[cfg.dtype]
    return HopperLoop(cfg.problem_name(), (Load("tma_A", "A_s", cfg.BM * cfg.BK * b),
                                           Load("tma_B", "B_s", cfg.BN * cfg.BK * b)),
                      "wgmma", choice.stages, choice.k_pipe_mmas, choice.consumers, "T", 1)



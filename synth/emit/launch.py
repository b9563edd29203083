"""How the sm_80 GEMM kernel is launched: its grid and the split-K or stream-K buffers.

One statement for every launcher: :mod:`synth.kernel` (both backends, through
:meth:`synth.kernel.KernelFacts.launch`), ``synth run`` and the emulator's :func:`synth.emit.emulate.emulate_gemm`.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import splitk, streamk


@dataclass(frozen=True)
class Launch:
    """How an sm_80 kernel is launched: ``synth_gemm(A, B, C, C_in, M, N, K, lda, ldb, ldc, alpha, beta,
    [workspace, tickets,] status)`` on ``grid``, the buffers present when ``tickets > 0``."""

    grid: tuple[int, int, int]
    workspace_floats: int
    """f32 elements of the workspace (split-K and stream-K; 16-byte aligned; contents free)."""
    tickets: int
    """32-bit counters, zeroed before the first launch (every launch leaves them zeroed); 0: no buffers."""

    def buffers(self, alloc_floats, zeros_u32) -> list:
        """The ``[workspace, tickets]`` arguments made by the caller's allocators (empty without them)."""
        if self.tickets == 0:
            return []
        return [alloc_floats(max(self.workspace_floats, 4)), zeros_u32(self.tickets)]


def gemm_launch(M: int, N: int, BM: int, BN: int, *, split_k: int = 1, stream_k: bool = False, ctas: int = 1,
                splits: int | None = None) -> Launch:
    """The :class:`Launch` of a kernel with tiles ``BM x BN`` on an ``M x N`` C: a stream-K kernel's 1-D grid of
    ``ctas`` CTAs (as given: the kernel refuses more than its k-tile iterations), else the tile grid with
    ``gridDim.z = splits`` (default ``split_k``; buffers sized for ``split_k``)."""
    if stream_k:
        return Launch((ctas, 1, 1), streamk.workspace_floats(BM, BN, ctas), streamk.ticket_count(M, N, BM, BN))
    return Launch((-(-N // BN), -(-M // BM), split_k if splits is None else splits),
                  splitk.workspace_floats(M, N, BM, BN, split_k), splitk.ticket_count(M, N, BM, BN, split_k))


__all__ = ["Launch", "gemm_launch"]

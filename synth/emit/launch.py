"""How the sm_80 GEMM kernel is launched: its grid, block, shared memory, buffers and argument list.

One statement for every launcher: :mod:`synth.kernel` (the ``cuda-python``, ``pycuda`` and
``emulator`` backends, through :meth:`synth.kernel.KernelFacts.launch`), ``synth run``,
``benchmarks/gpu_check.py`` and the emulator's :func:`synth.emit.emulate.emulate_gemm`. Each backend
turns :meth:`Launch.params` into its own argument objects (device pointers, ``np.int32`` or
``ctypes.c_int``, emulator buffers); none writes the order or the types again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from . import splitk, streamk

PARAM_TYPES = ("ptr", "i32", "f32")
"""The kinds of a kernel parameter: a device pointer (8 bytes; None is nullptr), a C ``int``, a C ``float``."""


@dataclass(frozen=True)
class Param:
    """One argument of a launch: its name in kernel.cu, its kind (:data:`PARAM_TYPES`) and the caller's value."""

    name: str
    kind: str
    value: Any


@dataclass(frozen=True)
class Launch:
    """How an sm_80 kernel is launched: ``synth_gemm(A, B, C, C_in, M, N, K, lda, ldb, ldc, alpha, beta,
    [workspace, tickets,] status)`` on ``grid`` x ``block`` with ``smem_bytes`` of dynamic shared memory,
    the buffers present when ``tickets > 0``."""

    grid: tuple[int, int, int]
    workspace_floats: int
    """f32 elements of the workspace (split-K and stream-K; 16-byte aligned; contents free)."""
    tickets: int
    """32-bit counters, zeroed before the first launch (every launch leaves them zeroed); 0: no buffers."""
    block: tuple[int, int, int] = (1, 1, 1)
    """Threads per CTA (``SYNTH_THREADS``, 1-D)."""
    smem_bytes: int = 0
    """Dynamic shared memory per CTA (``SYNTH_SMEM_BYTES``; above 48 KiB the function's limit must be raised)."""

    def buffers(self, alloc_floats, zeros_u32) -> list:
        """The ``[workspace, tickets]`` arguments made by the caller's allocators (empty without them)."""
        if self.tickets == 0:
            return []
        return [alloc_floats(max(self.workspace_floats, 4)), zeros_u32(self.tickets)]

    def params(self, A, B, C, C_in, M: int, N: int, K: int, ldc: int, alpha: float, beta: float,
               extra: list, status, *, lda: Optional[int] = None, ldb: Optional[int] = None) -> tuple[Param, ...]:
        """The kernel's arguments in order, typed: ``A``, ``B``, ``C``, ``C_in`` (None: nullptr), ``status`` and
        ``extra`` (:meth:`buffers`' result) are the caller's device buffers; ``lda``/``ldb`` default to K."""
        if len(extra) != (2 if self.tickets else 0):
            raise ValueError(f"this launch takes {2 if self.tickets else 0} workspace/ticket buffers, got {len(extra)}")
        ps = [Param("A", "ptr", A), Param("B", "ptr", B), Param("C", "ptr", C), Param("C_in", "ptr", C_in),
              Param("M", "i32", int(M)), Param("N", "i32", int(N)), Param("K", "i32", int(K)),
              Param("lda", "i32", int(K if lda is None else lda)), Param("ldb", "i32", int(K if ldb is None else ldb)),
              Param("ldc", "i32", int(ldc)), Param("alpha", "f32", float(alpha)), Param("beta", "f32", float(beta))]
        ps += [Param(n, "ptr", v) for n, v in zip(("workspace", "tickets"), extra)]
        ps.append(Param("status", "ptr", status))
        return tuple(ps)


def gemm_launch(M: int, N: int, BM: int, BN: int, *, split_k: int = 1, stream_k: bool = False, ctas: int = 1,
                splits: int | None = None, threads: int = 1, smem_bytes: int = 0) -> Launch:
    """The :class:`Launch` of a kernel with tiles ``BM x BN`` on an ``M x N`` C: a stream-K kernel's 1-D grid of
    ``ctas`` CTAs (as given: the kernel refuses more than its k-tile iterations), else the tile grid with
    ``gridDim.z = splits`` (default ``split_k``; buffers sized for ``split_k``); ``threads`` per CTA and
    ``smem_bytes`` of dynamic shared memory."""
    block, smem = (threads, 1, 1), smem_bytes
    if stream_k:
        return Launch((ctas, 1, 1), streamk.workspace_floats(BM, BN, ctas), streamk.ticket_count(M, N, BM, BN),
                      block, smem)
    return Launch((-(-N // BN), -(-M // BM), split_k if splits is None else splits),
                  splitk.workspace_floats(M, N, BM, BN, split_k), splitk.ticket_count(M, N, BM, BN, split_k),
                  block, smem)


def sm90_grid(M: int, N: int, bm: int, bn: int, *, split_k: int = 1, cluster_m: int = 1,
              cluster_n: int = 1) -> tuple[int, int, int]:
    """The grid of a non-persistent sm_90a kernel (docs/hopper_kernel.md; docs/hopper_cluster.md, "The kernel"):
    ``(ceil(N / bn), ceil(M / bm), split_k)`` with x rounded up to a multiple of ``cluster_n`` and y to a multiple
    of ``cluster_m`` (a kernel declared ``__cluster_dims__(cluster_n, cluster_m, 1)`` launches only on such a grid;
    a CTA of the rounding has its tile outside C and still runs the whole protocol). ValueError for M, N < 1."""
    if M < 1 or N < 1:
        raise ValueError(f"M = {M}, N = {N}: a launch needs M, N >= 1")

    def up(tiles: int, c: int) -> int:
        return -(-tiles // c) * c
    return up(-(-N // bn), cluster_n), up(-(-M // bm), cluster_m), split_k


EMULATOR_SMS = 132
"""SMs of the wave a persistent kernel gets on the CPU emulator by default (an H100 SXM's)."""
INT_MAX = 2**31 - 1
"""The largest C ``int``: M, N, K, a persistent grid and its ring trip count are passed or counted as one."""


def persistent_ctas(tiles: int, wave: int, ctas: Optional[int] = None, cluster: int = 1) -> int:
    """The number of CTAs ``P`` of a persistent sm_90a kernel (docs/hopper_kernel.md, "Persistent tiles") over
    ``tiles`` output tiles (a cluster kernel: ``tiles`` is its count of cluster-sized tile groups, and ``cluster``
    its CTAs per cluster; docs/hopper_cluster.md, "Persistent clusters"): ``ctas`` when given (any
    ``1 <= ctas <= 2**31 - 1`` that is a multiple of ``cluster``: CTAs beyond the tile count get no tile), else one
    wave, ``wave`` CTAs (SMs x CTAs per SM; the kernel's ``setmaxnreg`` split takes a whole SM's registers, so one
    per SM) in whole clusters, at most ``tiles`` clusters and at least one. ValueError for a ``ctas`` outside its
    bounds or not a whole number of clusters."""
    if ctas is not None:
        if isinstance(ctas, bool) or not isinstance(ctas, int) or not 1 <= ctas <= INT_MAX:
            raise ValueError(f"ctas {ctas!r}: a persistent grid takes 1 .. {INT_MAX} CTAs")
        if ctas % cluster:
            raise ValueError(f"ctas {ctas}: a persistent grid of {cluster}-CTA clusters takes a multiple of "
                             f"{cluster} CTAs")
        return ctas
    return cluster * max(1, min(tiles, wave // cluster))


def persistent_grid(ctas: int, cluster_m: int = 1, cluster_n: int = 1) -> tuple[int, int, int]:
    """The launch grid of a persistent kernel of ``ctas`` CTAs (:func:`persistent_ctas`): ``(ctas, 1, 1)``, or for a
    ``cluster_m x cluster_n`` cluster ``(ctas / (cluster_m cluster_n) * cluster_n, cluster_m, 1)`` (each cluster
    ``cluster_n`` CTAs along x by all ``cluster_m`` of y, as ``__cluster_dims__(cluster_n, cluster_m, 1)`` groups
    them; cluster ``q`` is ``blockIdx.x / cluster_n``). ValueError when ``ctas`` is not a whole number of clusters."""
    size = cluster_m * cluster_n
    if ctas < 1 or ctas % size:
        raise ValueError(f"ctas {ctas}: a persistent grid of {size}-CTA clusters takes a positive multiple of {size}")
    return ctas // size * cluster_n, cluster_m, 1


def persistent_ring(tiles: int, ctas: int, ktiles: int, cluster: int = 1) -> int:
    """k-tile iterations of the busiest CTA of a persistent grid of ``ctas`` CTAs (``ceil(tiles / ctas)``
    tiles of ``ktiles`` k-tiles; a cluster kernel: ``tiles`` tile groups over ``ctas / cluster`` clusters, each
    CTA one tile of each of its cluster's groups): the kernel's ring trip count, a C ``int``, so at most
    ``2**31 - 1``."""
    return -(-tiles // (ctas // cluster)) * ktiles


def tile_groups(M: int, N: int, bm: int, bn: int, cluster_m: int = 1, cluster_n: int = 1) -> int:
    """The cluster-sized tile groups of an ``M x N`` C in ``bm x bn`` tiles (``cluster_m`` tile rows by
    ``cluster_n`` tile columns each; the tiles for ``1 x 1``): what a persistent grid's clusters walk."""
    return -(-(-(-M // bm)) // cluster_m) * -(-(-(-N // bn)) // cluster_n)


__all__ = ["Launch", "Param", "PARAM_TYPES", "gemm_launch", "persistent_ctas", "persistent_grid", "persistent_ring",
           "sm90_grid", "tile_groups",
           "EMULATOR_SMS"]

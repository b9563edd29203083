"""Which output tile a CTA computes: grouped rasterization, shared by the sm_80 and sm_90a kernels.

The grid is ``(ceil(N / BN), ceil(M / BM))`` and the hardware launches CTAs in linear
order (``blockIdx.x`` fastest). Taken row-major, a wave of CTAs would cover one row of
tiles across all of N and sweep B once per tile row. Instead, as the Triton matmul
tutorial's ``GROUP_SIZE_M`` and CUTLASS's threadblock swizzles do, consecutive CTAs walk
down a band of :data:`GROUP_M` tile rows before moving one tile column right, so a wave
covers a ``GROUP_M``-tall block of tiles whose A band and B columns stay in the L2 while
they are reused. The mapping is a bijection of the grid onto the tiles (the last band may
be shorter); :func:`tile_of` is its Python statement, :func:`cuda_lines` the kernel's.
"""

from __future__ import annotations

GROUP_M = 8
"""Tile rows per band (the Triton tutorial's ``GROUP_SIZE_M``)."""


def tile_of(pid: int, tiles_m: int, tiles_n: int, group_m: int = GROUP_M) -> tuple[int, int]:
    """``(tile row, tile column)`` of the CTA with linear launch index ``pid``."""
    in_group = group_m * tiles_n
    first_m = (pid // in_group) * group_m
    rows = min(tiles_m - first_m, group_m)
    return first_m + (pid % in_group) % rows, (pid % in_group) // rows


def cuda_lines(bm, bn, pid: str = "blockIdx.y * gridDim.x + blockIdx.x", tiles_n: str = "gridDim.x",
               tiles_m: str = "gridDim.y") -> list[str]:
    """CUDA statements (one per line, no indent) defining ``const int m0, n0``: the first row and column
    of this CTA's tile, ``bm`` and ``bn`` being the tile's C expressions or numbers, ``pid`` the tile's
    index in launch order (a C expression below ``tiles_n * tiles_m``) and ``tiles_n``, ``tiles_m`` the
    tile columns and rows (C expressions; the grid's by default)."""
    return [
        f"// grouped rasterization (synth.emit.raster): CTAs in launch order walk down bands of {GROUP_M} tile",
        "// rows, so a wave's A band and B columns are reused from the L2",
        f"const int synth_pid = {pid}, synth_in_group = "
        f"{GROUP_M} * {tiles_n};",
        f"const int synth_first_m = (synth_pid / synth_in_group) * {GROUP_M};",
        f"const int synth_rows = (int){tiles_m} - synth_first_m < {GROUP_M} ? (int){tiles_m} - synth_first_m : "
        f"{GROUP_M};",
        f"const int m0 = (synth_first_m + (synth_pid % synth_in_group) % synth_rows) * {bm};",
        f"const int n0 = ((synth_pid % synth_in_group) / synth_rows) * {bn};",
    ]


__all__ = ["GROUP_M", "tile_of", "cuda_lines"]

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


def cluster_tile_of(bx: int, by: int, grid_x: int, grid_y: int, cluster_m: int, cluster_n: int,
                    group_m: int = GROUP_M) -> tuple[int, int]:
    """``(tile row, tile column)`` of CTA ``(bx, by)`` of a grid of ``grid_x x grid_y`` CTAs (multiples of the
    cluster: ``cluster_n`` CTAs along x, ``cluster_m`` along y). The clusters walk the grid of cluster-sized
    tile blocks in :func:`tile_of`'s grouped order; inside its cluster the CTA takes the tile at its offset
    ``(by % cluster_m, bx % cluster_n)``. So the CTAs of a 2x1 cluster (``cluster_m`` 2) compute two tile rows
    of one tile column (they share the B tile), those of a 1x2 cluster two columns of one row (sharing A)."""
    cm, cn = tile_of((by // cluster_m) * (grid_x // cluster_n) + bx // cluster_n, grid_y // cluster_m,
                     grid_x // cluster_n, group_m)
    return cm * cluster_m + by % cluster_m, cn * cluster_n + bx % cluster_n


def cluster_cuda_lines(bm: int, bn: int, cluster_m: int, cluster_n: int, group: str = "", groups_n: str = "",
                       groups_m: str = "") -> list[str]:
    """:func:`cuda_lines` for a grid of clusters (:func:`cluster_tile_of`): ``const int m0, n0`` of this CTA's
    tile (``bm`` x ``bn`` tiles), the grid's dimensions being multiples of the cluster's. ``group``, ``groups_n``,
    ``groups_m`` (C expressions; a persistent grid's): the index of the cluster-sized tile group the cluster
    computes (in grouped order, below ``groups_n * groups_m``) and the groups' columns and rows; default the
    cluster's place in the grid (one group per cluster)."""
    return cuda_lines(
        cluster_m * bm, cluster_n * bn,
        group or f"(blockIdx.y / {cluster_m}) * (gridDim.x / {cluster_n}) + blockIdx.x / {cluster_n}",
        groups_n or f"(gridDim.x / {cluster_n})", groups_m or f"(gridDim.y / {cluster_m})")[:-2] + [
        f"// the cluster's block of {cluster_m} x {cluster_n} tiles; this CTA's tile at its offset in the cluster",
        f"const int m0 = (synth_first_m + (synth_pid % synth_in_group) % synth_rows) * {cluster_m * bm} + "
        f"(int)(blockIdx.y % {cluster_m}) * {bm};",
        f"const int n0 = ((synth_pid % synth_in_group) / synth_rows) * {cluster_n * bn} + "
        f"(int)(blockIdx.x % {cluster_n}) * {bn};",
    ]


__all__ = ["GROUP_M", "tile_of", "cuda_lines", "cluster_tile_of", "cluster_cuda_lines"]

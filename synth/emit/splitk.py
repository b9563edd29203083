"""Split-K in synth's GEMM kernels: which k-tiles a CTA runs, and how a tile's partial sums meet.

The sm_80 kernel (:mod:`synth.emit.cuda`) takes every statement below; the sm_90a kernel
(:mod:`synth.emit.sm90.kernel`) takes the split's index and k-tile range and follows the same
protocol in its own epilogue (its consumers' named barrier in place of ``__syncthreads``).

With ``split_k: S > 1`` (docs/cuda_kernel.md, "Split-K") the grid is
``(ceil(N / BN), ceil(M / BM), S)``. CTA ``L`` in launch order (``blockIdx.x``
fastest) computes split ``L % S`` of tile ``L / S`` (tiles in the grouped order of
:mod:`synth.emit.raster`), so the S CTAs of one tile are neighbours in launch order
and run in the same wave. Split ``z`` runs the whole proved pipeline over k-tiles
``[z T / S, (z + 1) T / S)`` of ``T = ceil(K / BK)`` (:func:`split_range`); split 0
holds the partial k-tile. Then each CTA

1. counts itself in the tile's **arrival** counter (one ``atomicAdd`` by thread 0);
2. unless it arrived last: stores its f32 partial tile to slot ``z`` of the tile's
   ``S`` workspace slots, through the C store's shared-memory staging (16-byte
   ``st.global.cg`` of tile rows: coalesced, the tile's row-major layout), fences
   (release), counts itself in the tile's **published** counter and exits;
3. the last to arrive waits until the published counter reaches ``S - 1``: the
   others arrived before it and, after arriving, only store and count, so this wait
   ends whatever the launch order or residency. It resets both counters (the next
   launch finds them zeroed) and fences (acquire);
4. in the C store, each 16-byte vector becomes ``p0 + p1 + p2 + ...`` in split
   order, its own term taken from the staging (the same bits it would have stored),
   and is stored as an unsplit kernel stores it (``alpha``, ``beta``, ``C_in``).

So a tile costs ``S - 1`` partial stores and ``S - 1`` partial loads (only of the rows
and columns inside C), no register array beyond the accumulators, and the result is the
same bits whichever CTA arrives last. The caller provides a workspace of :func:`workspace_floats` floats
(16-byte aligned) and :func:`ticket_count` unsigned ints (two per tile), zeroed once
before the first launch; the kernel leaves them zeroed after a launch that completed.
"""

from __future__ import annotations

SPLIT_STATUS = 64
"""``*status`` bit of a split-K launch the kernel refuses (gridDim.z, workspace, tickets)."""


def split_range(z: int, ktiles: int, splits: int) -> tuple[int, int]:
    """k-tiles ``[begin, end)`` of split ``z`` of ``ktiles`` (every split non-empty when ``splits <= ktiles``)."""
    return z * ktiles // splits, (z + 1) * ktiles // splits


def workspace_floats(M: int, N: int, BM: int, BN: int, splits: int) -> int:
    """f32 elements of the workspace a launch with ``splits`` needs (0 without a split)."""
    if splits <= 1:
        return 0
    return -(-M // BM) * -(-N // BN) * splits * BM * BN


def ticket_count(M: int, N: int, BM: int, BN: int, splits: int) -> int:
    """Counters (32-bit unsigned, zeroed) a launch with ``splits`` needs: two per tile (0 without a split)."""
    return 0 if splits <= 1 else 2 * -(-M // BM) * -(-N // BN)


def index_lines() -> list[str]:
    """CUDA statements defining ``const int split, synth_tile``: this CTA's split and its tile's
    launch-order index (the input of the grouped rasterization), from the CTA's launch-order index read
    afresh (the API's ``synth_block_linear``: a volatile read, so the compiler keeps no earlier value of
    it live across the main loop)."""
    return [
        "// split-K (synth.emit.splitk): CTA L in launch order computes split L % SYNTH_SPLIT_K of tile",
        "// L / SYNTH_SPLIT_K, so the splits of a tile run side by side",
        "const int synth_lin = synth_block_linear();",
        "const int split = synth_lin % SYNTH_SPLIT_K, synth_tile = synth_lin / SYNTH_SPLIT_K;",
    ]


def range_lines(trip: str, bk="BK", all_tiles: bool = True) -> list[str]:
    """CUDA statements defining ``T_all`` (k-tiles of K, unless ``all_tiles`` is False: defined before),
    ``kt0`` (this split's first k-tile) and ``trip`` (its k-tile count); they need ``split``, ``K`` and
    the k-tile depth ``bk`` (a C expression or number)."""
    return [
        *([f"const int T_all = (K + {bk} - 1) / {bk};  // k-tiles of the whole K"] if all_tiles else []),
        "const int kt0 = (int)((long long)split * T_all / SYNTH_SPLIT_K);  // this split's first k-tile",
        f"const int {trip} = (int)((long long)(split + 1) * T_all / SYNTH_SPLIT_K) - kt0;  // its k-tiles",
    ]


def arrival_lines() -> list[str]:
    """CUDA statements (unindented) after the main loop has drained (no copy in flight, every warp past the
    pipeline's slots): this CTA's split and tile read afresh, the tile's workspace ``ws_tile`` and
    counters ``counters``, and ``last``: whether this CTA arrived last (step 1 above)."""
    return [
        "// ---- the tile's last CTA to arrive sums the partials in split order; the split is read afresh:",
        "// nothing of it stays live across the main loop",
        *index_lines(),
        "unsigned* const counters = tickets + 2 * synth_tile;  // [0] CTAs arrived, [1] partials published",
        "float* const ws_tile = workspace + (size_t)synth_tile * SYNTH_SPLIT_K * (BM * BN);  // slot z: split z",
        "int* const last_flag = reinterpret_cast<int*>(smem);",
        "if (tid == 0) synth_sts(last_flag, synth_atomic_add_u32(counters, 1u) == SYNTH_SPLIT_K - 1 ? 1 : 0);",
        "synth_syncthreads();",
        "const int last = synth_lds(last_flag);",
        "synth_syncthreads();  // the flag is read before the C staging reuses its bytes",
    ]


def partial_store(x: str, row: str, col: str) -> str:
    """The statement storing the f32x4 ``x`` at tile-local ``row``, ``col`` to this split's slot (step 2)."""
    return (f"synth_st_cg_f32x4(ws_tile + (size_t)split * (BM * BN) + (size_t)({row}) * BN + ({col}), "
            f"{x}.x, {x}.y, {x}.z, {x}.w);")


def publish_lines() -> list[str]:
    """After every partial store of a CTA that did not arrive last: release them, count, exit (step 2)."""
    return [
        "synth_threadfence();  // release: this thread's partials before the count",
        "synth_syncthreads();  // every thread's partials are fenced",
        "if (tid == 0) synth_atomic_add_u32(counters + 1, 1u);  // published",
        "return;",
    ]


def wait_lines() -> list[str]:
    """The last CTA's wait for the others' partials, the counters' reset and the acquire (step 3)."""
    return [
        "if (tid == 0) {",
        "// the other CTAs of the tile arrived before this one, and after arriving a CTA only stores and",
        "// counts: this wait ends whatever the launch order or residency",
        "while (synth_ld_acquire_u32(counters + 1) < SYNTH_SPLIT_K - 1) {",
        "}",
        "counters[0] = 0u;  // zeroed for the next launch: no CTA of this tile touches them again",
        "counters[1] = 0u;",
        "}",
        "synth_syncthreads();",
        "synth_threadfence();  // acquire: the other splits' partials after their count",
    ]


def fold_lines(x: str, row: str, col: str) -> list[str]:
    """Statements replacing the f32x4 ``x`` (this CTA's partial at tile-local ``row``, ``col``) by
    ``p0 + p1 + ...`` in split order, its own term taken from ``x`` (step 4)."""
    return [
        "{  // split-K: p0 + p1 + ... in split order: the same bits whichever CTA is last",
        f"const float* const wp = ws_tile + (size_t)({row}) * BN + ({col});",
        "float s[4], v[4];",
        f"if (split == 0) {{ s[0] = {x}.x; s[1] = {x}.y; s[2] = {x}.z; s[3] = {x}.w; }}",
        "else synth_ld_cg_f32x4(s, wp);",
        "SYNTH_UNROLL for (int z = 1; z < SYNTH_SPLIT_K; ++z) {",
        f"if (z == split) {{ v[0] = {x}.x; v[1] = {x}.y; v[2] = {x}.z; v[3] = {x}.w; }}",
        "else synth_ld_cg_f32x4(v, wp + (size_t)z * (BM * BN));",
        "s[0] += v[0]; s[1] += v[1]; s[2] += v[2]; s[3] += v[3];",
        "}",
        f"{x} = f32x4{{s[0], s[1], s[2], s[3]}};",
        "}",
    ]


__all__ = ["SPLIT_STATUS", "split_range", "workspace_floats", "ticket_count", "index_lines", "range_lines",
           "arrival_lines", "partial_store", "publish_lines", "wait_lines", "fold_lines"]

"""Split-K in the sm_80 kernel: which k-tiles a CTA runs, and how a tile's partial sums meet.

With ``split_k: S > 1`` (docs/cuda_kernel.md, "Split-K") the grid is
``(ceil(N / BN), ceil(M / BM), S)``. CTA ``L`` in launch order (``blockIdx.x``
fastest) computes split ``L % S`` of tile ``L / S`` (tiles in the grouped order of
:mod:`synth.emit.raster`), so the S CTAs of one tile are neighbours in launch order
and run in the same wave. Split ``z`` runs the whole proved pipeline over k-tiles
``[z T / S, (z + 1) T / S)`` of ``T = ceil(K / BK)`` (:func:`split_range`); split 0
holds the partial k-tile. Then each CTA

1. stores its f32 partial tile to the workspace (slot ``z`` of the tile's ``S``),
   16-byte ``st.global.cg`` in fragment order (coalesced), and fences (release);
2. takes the tile's **ticket** (one ``atomicAdd`` by thread 0);
3. exits, unless its ticket is ``S - 1``: the last CTA of the tile resets the ticket
   to 0 (so the next launch finds it zeroed), fences (acquire), sums the S partials
   **in split order**, each read back from the workspace (its own too: one accumulator
   array, no spill), and stores C as an unsplit kernel does.

No CTA waits for another, so no launch order or residency can deadlock it, and the
sum's order does not depend on which CTA finishes last: the result is the same bits
on every run. The caller provides a workspace of :func:`workspace_floats` floats
(16-byte aligned) and :func:`ticket_count` unsigned ints, zeroed once before the first
launch; the kernel leaves them zeroed after a launch that completed.
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
    """Tickets (32-bit unsigned, zeroed) a launch with ``splits`` needs: one per tile (0 without a split)."""
    return 0 if splits <= 1 else -(-M // BM) * -(-N // BN)


LINEAR = "((int)blockIdx.z * (int)gridDim.y + (int)blockIdx.y) * (int)gridDim.x + (int)blockIdx.x"
"""The CTA's index in launch order (``blockIdx.x`` fastest)."""


def index_lines(linear: str = LINEAR) -> list[str]:
    """CUDA statements defining ``const int split, synth_tile``: this CTA's split and its tile's
    launch-order index (the input of the grouped rasterization); ``linear`` is the C expression of
    the CTA's launch-order index (default :data:`LINEAR`)."""
    return [
        "// split-K (synth.emit.splitk): CTA L in launch order computes split L % SYNTH_SPLIT_K of tile",
        "// L / SYNTH_SPLIT_K, so the splits of a tile run side by side",
        f"const int synth_lin = {linear};",
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


def reduction_lines() -> list[str]:
    """CUDA statements (unindented, one per line, ``{``/``}`` balanced) of steps 1-3 above, after the main
    loop has drained (no copy in flight, every warp past the pipeline's slots): on exit every CTA but
    the tile's last has returned, and the last one holds the tile's full sum in ``acc``."""
    return [
        "{  // split-K: partial tile to the workspace; the tile's last CTA to arrive sums them in split order",
        "float* const ws = workspace + (size_t)synth_tile * SYNTH_SPLIT_K * (BM * BN) + tid * 4;",
        "SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)",
        "SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni)",
        "synth_st_cg_f32x4(ws + (size_t)split * (BM * BN) + (mi * NI + ni) * (THREADS * 4), acc[mi][ni][0], "
        "acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]);",
        "synth_threadfence();  // release: this thread's partial before the ticket",
        "synth_syncthreads();  // every thread's partial is fenced",
        "int* const last_flag = reinterpret_cast<int*>(smem);",
        "if (tid == 0) {",
        "const unsigned ticket = synth_atomic_add_u32(tickets + synth_tile, 1u);",
        "if (ticket == SYNTH_SPLIT_K - 1) tickets[synth_tile] = 0u;  // every split has arrived: zeroed for the "
        "next launch",
        "synth_sts(last_flag, ticket == SYNTH_SPLIT_K - 1 ? 1 : 0);",
        "}",
        "synth_syncthreads();",
        "const int last = synth_lds(last_flag);",
        "synth_syncthreads();  // the flag is read before the C staging reuses its bytes",
        "if (!last) return;",
        "synth_threadfence();  // acquire: the other splits' partials after their tickets",
        "// acc = p0 + p1 + ... in split order, every partial read back (this CTA's too): the same bits",
        "// whichever CTA is last, and no second accumulator array (registers)",
        "SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)",
        "SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni)",
        "synth_ld_cg_f32x4(acc[mi][ni], ws + (mi * NI + ni) * (THREADS * 4));",
        "SYNTH_NO_UNROLL for (int z = 1; z < SYNTH_SPLIT_K; ++z) {",
        "SYNTH_UNROLL for (int mi = 0; mi < MI; ++mi)",
        "SYNTH_UNROLL for (int ni = 0; ni < NI; ++ni) {",
        "float v[4];",
        "synth_ld_cg_f32x4(v, ws + (size_t)z * (BM * BN) + (mi * NI + ni) * (THREADS * 4));",
        "acc[mi][ni][0] += v[0]; acc[mi][ni][1] += v[1]; acc[mi][ni][2] += v[2]; acc[mi][ni][3] += v[3];",
        "}",
        "}",
        "}",
    ]


__all__ = ["SPLIT_STATUS", "LINEAR", "split_range", "workspace_floats", "ticket_count", "index_lines", "range_lines",
           "reduction_lines"]

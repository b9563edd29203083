"""Stream-K in synth's sm_80 GEMM kernel: which k-tiles a CTA runs, across tiles, and how partial tiles meet.

With ``stream_k: true`` (docs/cuda_kernel.md, "Stream-K") the grid is one-dimensional, of any size
``G`` the launcher chooses (:func:`grid_ctas`: one wave of resident CTAs). The ``I = tiles x T``
k-tile iterations (``T = ceil(K / BK)``; iteration ``x`` is k-tile ``x % T`` of tile ``x / T``, tiles
in the grouped order of :mod:`synth.emit.raster`) are shared evenly: CTA ``c`` runs iterations
``[c I / G, (c + 1) I / G)`` (:func:`cta_range`). For each tile its range touches, in increasing
order, it runs a *segment*: the whole proved pipeline over that tile's k-tiles in its range (at
least one: the loop is proved for every trip count from 1), then the tile's epilogue. The CTAs whose
ranges touch a tile, its *contributors* ``first .. first + n - 1`` (:func:`contributors`), are
consecutive, in k order. A segment covering the whole tile (``n = 1``) stores C as the unsplit
kernel does. Otherwise the tile's partial sums meet as in split-K (:mod:`synth.emit.splitk`):

1. thread 0 counts the CTA in the tile's **arrival** counter (one ``atomicAdd``);
2. every contributor but the last to arrive stores its f32 partial tile (rows inside C) to its
   workspace slot (:func:`slot`), fences (release), counts itself in the tile's **published**
   counter and goes on to its next segment;
3. the last to arrive waits until ``n - 1`` partials are published: the others arrived before it and,
   after arriving, only store and count, so the wait ends whatever the launch order or residency.
   It resets both counters and fences (acquire);
4. its C store sums the ``n`` terms in k order (contributor order), its own from the staging.

A CTA's partial segments are its first and its last (the tiles between are whole), so two workspace
slots per CTA suffice: slot ``2c`` for the tile its range starts inside (it is not the tile's first
contributor) and ``2c + 1`` for the tile whose first k-tile it runs (it is the first contributor,
``z = 0``). The result is the same bits whichever CTA arrives last, for a given ``G``; a tile with one
contributor gets exactly the unsplit kernel's bits.
"""

from __future__ import annotations


def cta_range(c: int, iters: int, ctas: int) -> tuple[int, int]:
    """Iterations ``[begin, end)`` of CTA ``c`` of ``ctas`` sharing ``iters`` (empty when ``ctas > iters``)."""
    return c * iters // ctas, (c + 1) * iters // ctas


def owner(x: int, iters: int, ctas: int) -> int:
    """The CTA whose range holds iteration ``x`` (``0 <= x < iters``): the largest ``c`` with
    ``c iters / ctas <= x``, i.e. ``((x + 1) ctas - 1) // iters``."""
    return ((x + 1) * ctas - 1) // iters


def contributors(tile: int, ktiles: int, iters: int, ctas: int) -> tuple[int, int]:
    """``(first, n)``: the CTAs ``first .. first + n - 1`` whose ranges touch ``tile`` of ``ktiles`` k-tiles."""
    first = owner(tile * ktiles, iters, ctas)
    return first, owner(tile * ktiles + ktiles - 1, iters, ctas) - first + 1


def slot(c: int, z: int) -> int:
    """The workspace slot (of ``BM x BN`` floats) where contributor ``z`` of a tile, CTA ``c``, stores its partial."""
    return 2 * c + (1 if z == 0 else 0)


def workspace_floats(BM: int, BN: int, ctas: int) -> int:
    """f32 elements of the workspace a launch of ``ctas`` CTAs needs: two ``BM x BN`` slots per CTA."""
    return 2 * ctas * BM * BN


def ticket_count(M: int, N: int, BM: int, BN: int) -> int:
    """Counters (32-bit unsigned, zeroed once; every launch leaves them zeroed): two per tile."""
    return 2 * -(-M // BM) * -(-N // BN)


def grid_ctas(M: int, N: int, K: int, BM: int, BN: int, BK: int, sms: int, per_sm: int) -> int:
    """The launcher's ``G``: one wave, ``sms x per_sm`` CTAs, but no more than there are iterations."""
    iters = -(-M // BM) * -(-N // BN) * -(-K // BK)
    return max(1, min(iters, sms * max(1, per_sm)))


def loop_lines(trip: str) -> list[str]:
    """CUDA statements opening the segment loop (closed by ``}`` after the C store): ``T_all``, the tile grid
    ``sk_tiles_m x sk_tiles_n``, the iterations ``sk_iters`` and this CTA's range, then per segment
    ``synth_tile``, ``kt0`` (its first k-tile) and ``trip`` (its k-tile count). ``sk_it`` is the segment's end
    in the loop body."""
    return [
        "// stream-K (synth.emit.streamk): CTA c runs iterations [c I / G, (c + 1) I / G) of the I = tiles x T_all",
        "// k-tiles (iteration x: k-tile x % T_all of tile x / T_all), one segment per tile its range touches",
        "const int T_all = (K + BK - 1) / BK;  // k-tiles of the whole K",
        "const int sk_tiles_n = (N + BN - 1) / BN, sk_tiles_m = (M + BM - 1) / BM;",
        "const long long sk_iters = (long long)sk_tiles_m * sk_tiles_n * T_all;",
        "const long long sk_end = (long long)(blockIdx.x + 1) * sk_iters / gridDim.x;",
        "for (long long sk_it = (long long)blockIdx.x * sk_iters / gridDim.x; sk_it < sk_end;) {",
        "const int synth_tile = (int)(sk_it / T_all), kt0 = (int)(sk_it - (long long)synth_tile * T_all);",
        f"const int {trip} = (int)(sk_end - sk_it < T_all - kt0 ? sk_end - sk_it : T_all - kt0);  // this segment's k-tiles",
        f"sk_it += {trip};",
    ]


def arrival_lines() -> list[str]:
    """CUDA statements after the segment's loop has drained: the tile's contributors read afresh from the
    segment's end ``sk_it`` (``sk_first``, ``sk_n``, this CTA's ``sk_z``), its counters ``counters``, this CTA's
    slot ``ws_slot`` and ``last``: whether this CTA arrived last (1 for a whole tile; step 1)."""
    return [
        "// ---- the tile's last contributor to arrive sums the partials in k order",
        "const int synth_c = synth_block_linear();  // this CTA (a 1-D grid), read afresh",
        "const long long sk_tb = (sk_it - 1) / T_all * T_all;  // the tile's first iteration",
        "const int sk_first = (int)(((sk_tb + 1) * gridDim.x - 1) / sk_iters);  // its first contributor",
        "const int sk_n = (int)(((sk_tb + T_all) * gridDim.x - 1) / sk_iters) - sk_first + 1;  // contributors",
        "const int sk_z = synth_c - sk_first;  // this CTA's place among them (k order)",
        "unsigned* const counters = tickets + 2 * (sk_tb / T_all);  // [0] CTAs arrived, [1] partials published",
        "float* const ws_slot = workspace + (size_t)(2 * synth_c + (sk_z == 0 ? 1 : 0)) * (BM * BN);",
        "int* const last_flag = reinterpret_cast<int*>(smem);",
        "if (tid == 0) synth_sts(last_flag, sk_n == 1 || synth_atomic_add_u32(counters, 1u) == (unsigned)sk_n - 1u ? 1 : 0);",
        "synth_syncthreads();",
        "const int last = synth_lds(last_flag);",
        "synth_syncthreads();  // the flag is read before the C staging reuses its bytes",
    ]


def partial_store(x: str, row: str, col: str) -> str:
    """The statement storing the f32x4 ``x`` at tile-local ``row``, ``col`` to this CTA's slot (step 2)."""
    return (f"synth_st_cg_f32x4(ws_slot + (size_t)({row}) * BN + ({col}), {x}.x, {x}.y, {x}.z, {x}.w);")


def publish_lines() -> list[str]:
    """After every partial store of a CTA that did not arrive last: release them and count (step 2); the CTA
    then goes on to its next segment (the kernel's ``else`` holds the last CTA's sum: no ``continue``, so the
    segment loop's control stays uniform and the main loop keeps its uniform registers)."""
    return [
        "synth_threadfence();  // release: this thread's partials before the count",
        "synth_syncthreads();  // every thread's partials are fenced (and the staging read)",
        "if (tid == 0) synth_atomic_add_u32(counters + 1, 1u);  // published",
    ]


def wait_lines() -> list[str]:
    """The last contributor's wait for the others' partials, the counters' reset and the acquire (step 3)."""
    return [
        "if (tid == 0 && sk_n > 1) {",
        "// the other contributors arrived before this one, and after arriving a CTA only stores and",
        "// counts before its next segment: this wait ends whatever the launch order or residency",
        "while (synth_ld_acquire_u32(counters + 1) < (unsigned)sk_n - 1u) {",
        "}",
        "counters[0] = 0u;  // zeroed for the next launch: no CTA of this tile touches them again",
        "counters[1] = 0u;",
        "}",
        "synth_syncthreads();",
        "if (sk_n > 1) synth_threadfence();  // acquire: the others' partials after their count",
    ]


def fold_lines(x: str, row: str, col: str) -> list[str]:
    """Statements replacing the f32x4 ``x`` (this CTA's partial at tile-local ``row``, ``col``) by the sum of
    the tile's ``sk_n`` terms in k order, its own taken from ``x`` (step 4; ``x`` itself when ``sk_n == 1``)."""
    return [
        "{  // stream-K: the contributors' terms in k order: the same bits whichever CTA is last",
        f"const size_t wo = (size_t)({row}) * BN + ({col});",
        "float s[4], v[4];",
        "for (int z = 0; z < sk_n; ++z) {",
        f"if (z == sk_z) {{ v[0] = {x}.x; v[1] = {x}.y; v[2] = {x}.z; v[3] = {x}.w; }}",
        "else synth_ld_cg_f32x4(v, workspace + (size_t)(2 * (sk_first + z) + (z == 0 ? 1 : 0)) * (BM * BN) + wo);",
        "if (z == 0) { s[0] = v[0]; s[1] = v[1]; s[2] = v[2]; s[3] = v[3]; }",
        "else { s[0] += v[0]; s[1] += v[1]; s[2] += v[2]; s[3] += v[3]; }",
        "}",
        f"{x} = f32x4{{s[0], s[1], s[2], s[3]}};",
        "}",
    ]




def resident_ctas(threads: int, registers: int, smem_bytes: int, *, sm_smem: int, sm_registers: int,
                  sm_threads: int, sm_ctas: int, reserved_smem: int = 1024) -> int:
    """CTAs of one kernel resident on an SM (at least 1): the fewest its threads, registers (allocated per warp
    in units of 256) and shared memory (each CTA's plus ``reserved_smem``, what the driver keeps per CTA on
    sm_80 and later) allow, and the SM's CTA limit; the CUDA occupancy calculator's arithmetic."""
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    limits = [sm_ctas, sm_threads // max(threads, 1), sm_registers // (per_warp * warps),
              sm_smem // (smem_bytes + reserved_smem)]
    return max(1, min(limits))


__all__ = ["cta_range", "owner", "contributors", "slot", "workspace_floats", "ticket_count", "grid_ctas",
           "resident_ctas", "loop_lines", "arrival_lines", "partial_store", "publish_lines", "wait_lines",
           "fold_lines"]

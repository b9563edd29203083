"""Generate the TileLang inputs of ``synth check`` (run by ``scripts/gen_tilelang_fixtures.sh``).

TileLang pulls torch, so it is not in synth's dev extra: the script makes a separate
virtual environment with ``tilelang`` and runs this file there. Every program is
lowered **without a GPU** (``tilelang.engine.lower.lower_to_host_device_ir`` under a
``cuda`` target: no driver, no nvcc) and its device module's TIR text
(``device_mod.script()``) is saved here, headed by the TileLang version and the
call that made it. ``synth check`` reads that text (``synth/frontends/tilelang.py``).

Programs: TileLang's pipelined GEMM example (``T.Pipelined(T.ceildiv(K, block_K),
num_stages=s)``, 128x128x32 f16 tiles, 128 threads):

* ``sm80_s{2,3,4}``: sm_80, K = 1024 (the trip count is fixed in the IR);
* ``sm80_dynk_s{2,3,4}``: sm_80, ``K = T.dynamic("K")`` (every K: the trip count is a
  symbol; A's K-masked tile becomes a synchronous store, B's a ``cp.async``);
* ``sm90_ws_s{2,3,4}``: sm_90, dynamic K, TileLang's default warp-specialized TMA
  pipeline (a producer and a consumer warp group on full/empty mbarriers);
* ``sm90_ws_k32_s3``: the same with K = 32: a loop of one iteration;
* ``sm90_cpasync_s3``: sm_90 with ``tl.disable_warp_specialized``: cp.async + wgmma;
* ``flash_sm80_s2``, ``flash_sm90_s2_refused``: TileLang's FlashAttention forward (K and V tiles,
  two gemms); on sm_90 its Q tile is loaded once by TMA before the roles, which synth refuses;
* ``rowsum_bulk1d_sm90_t{1,2}``: a column sum, one contiguous row per iteration: a 1D bulk TMA copy read
  by plain loads (tilelang #2566's kernel shape), at one and two rows.

``MUTANTS`` are the bug-trail inputs (docs/check.md, "TileLang"): each is a generated
file with a small hand edit, named in its header; :func:`write_mutants` writes them
from the generated files and needs no TileLang.

Usage: ``python generate.py [--out DIR] [--mutants-only]`` (default DIR: this folder).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUGS = "bugs"

PROGRAMS = (
    # name, arch, num_stages, K (None: T.dynamic), warp specialization disabled
    ("sm80_s2", 80, 2, 1024, False),
    ("sm80_s3", 80, 3, 1024, False),
    ("sm80_s4", 80, 4, 1024, False),
    ("sm80_dynk_s2", 80, 2, None, False),
    ("sm80_dynk_s3", 80, 3, None, False),
    ("sm80_dynk_s4", 80, 4, None, False),
    ("sm90_ws_s2", 90, 2, None, False),
    ("sm90_ws_s3", 90, 3, None, False),
    ("sm90_ws_s4", 90, 4, None, False),
    ("sm90_ws_k32_s3", 90, 3, 32, False),
    ("sm90_cpasync_s3", 90, 3, 1024, True),
)
FLASH = (
    # name, arch: FlashAttention forward (batch 1, 8 heads, seq 1024, dim 64, 64x64 tiles, num_stages 2)
    ("flash_sm80_s2", 80),
    ("flash_sm90_s2_refused", 90),
)
"""``flash_sm90_s2_refused``: TileLang loads the Q tile once by TMA before its warp-specialized roles; synth
refuses that (exit 2, docs/check.md "TileLang"), the corpus expects it."""
ROWSUM = (
    # name, rows (the loop's trip count): a column sum over rows of 256 f32, num_stages 2, 256 threads, sm_90
    ("rowsum_bulk1d_sm90_t1", 1),
    ("rowsum_bulk1d_sm90_t2", 2),
)
"""The shape of tilelang #2566's reproducer: each row is one contiguous slice copied into a plain (unswizzled)
shared tile, which TileLang lowers to a 1D bulk TMA copy (``T.tma_load(dst, src, barrier, bytes)``) read by plain
loads; at one row the loop is gone."""


def file_name(name: str) -> str:
    return f"tilelang_{name}.tir"


def matmul(M, N, K, block_M, block_N, block_K, num_stages, dtype="float16", accum_dtype="float"):
    """TileLang's pipelined GEMM example (examples/gemm), C = A @ B."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def flash_attention(batch, heads, seq_len, dim, block_M, block_N, num_stages):
    """TileLang's FlashAttention forward example (examples/flash_attention, non-causal), O = softmax(Q K^T) V."""
    import tilelang.language as T

    scale = 1.44269504 / dim ** 0.5  # log2(e) / sqrt(dim)

    # the annotations name only values the body uses too: TileLang resolves them from the closure
    @T.prim_func
    def main(Q: T.Tensor((batch, seq_len, heads, dim), "float16"), K: T.Tensor((batch, seq_len, heads, dim), "float16"),
             V: T.Tensor((batch, seq_len, heads, dim), "float16"),
             Output: T.Tensor((batch, seq_len, heads, dim), "float16")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], "float16")
            K_shared = T.alloc_shared([block_N, dim], "float16")
            V_shared = T.alloc_shared([block_N, dim], "float16")
            acc_s = T.alloc_fragment([block_M, block_N], "float")
            acc_s_cast = T.alloc_fragment([block_M, block_N], "float16")
            acc_o = T.alloc_fragment([block_M, dim], "float")
            scores_max = T.alloc_fragment([block_M], "float")
            scores_max_prev = T.alloc_fragment([block_M], "float")
            scores_scale = T.alloc_fragment([block_M], "float")
            scores_sum = T.alloc_fragment([block_M], "float")
            logsum = T.alloc_fragment([block_M], "float")
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity("float"))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


def row_sum(rows, N=256, num_stages=2):
    """Out[j] = sum_i A[i, j], one row per pipelined iteration (the kernel shape of tilelang #2566)."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((rows, N), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            A_shared = T.alloc_shared((N,), "float32")
            acc = T.alloc_fragment((N,), "float32")
            T.clear(acc)
            for k in T.Pipelined(rows, num_stages=num_stages):
                T.copy(A[k, :], A_shared)
                for i in T.Parallel(N):
                    acc[i] += A_shared[i]
            T.copy(acc, Out)

    return main


def lowered_tir(arch: int, num_stages: int, K, no_ws: bool, func=None) -> str:
    """The device module's TIR text of :func:`matmul` (or ``func``) lowered for sm_<arch> without a GPU."""
    import tilelang
    import tilelang.language as T
    from tilelang import tvm
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import lower_to_host_device_ir

    if func is None:
        func = matmul(1024, 1024, T.dynamic("K") if K is None else K, 128, 128, 32, num_stages)
    target = tvm.target.Target({"kind": "cuda", "arch": f"sm_{arch}"})
    config = {"tl.disable_warp_specialized": True} if no_ws else {}
    with target, tvm.transform.PassContext(config=config):
        _host, device, *_ = lower_to_host_device_ir(func, create_backend_context(target, None, "auto"))
    del tilelang
    return device.script()


def header(name: str, arch: int, num_stages: int, K, no_ws: bool) -> str:
    import tilelang

    k = 'T.dynamic("K")' if K is None else str(K)
    ws = ", tl.disable_warp_specialized" if no_ws else ""
    return (f"# tilelang {tilelang.__version__}: {name}: matmul(1024, 1024, K={k}, 128, 128, 32, num_stages={num_stages})"
            f" lowered for sm_{arch}{ws} (device TIR)\n"
            "# generated by scripts/gen_tilelang_fixtures.sh (tests/check_inputs/tilelang/generate.py)\n")


def generate(out: str = HERE) -> list:
    """Lower every program of :data:`PROGRAMS` and write ``tilelang_<name>.tir`` under ``out``; the paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for name, arch, s, K, no_ws in PROGRAMS:
        text = header(name, arch, s, K, no_ws) + lowered_tir(arch, s, K, no_ws)
        path = os.path.join(out, file_name(name))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        paths.append(path)
    import tilelang
    for name, arch in FLASH:
        text = (f"# tilelang {tilelang.__version__}: {name}: flash_attention(1, 8, 1024, 64, 64, 64, num_stages=2) "
                f"lowered for sm_{arch} (device TIR)\n"
                "# generated by scripts/gen_tilelang_fixtures.sh (tests/check_inputs/tilelang/generate.py)\n"
                + lowered_tir(arch, 2, None, False, flash_attention(1, 8, 1024, 64, 64, 64, 2)))
        path = os.path.join(out, file_name(name))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        paths.append(path)
    for name, rows in ROWSUM:
        text = (f"# tilelang {tilelang.__version__}: {name}: row_sum(rows={rows}, N=256, num_stages=2) lowered for "
                "sm_90 (device TIR)\n"
                "# generated by scripts/gen_tilelang_fixtures.sh (tests/check_inputs/tilelang/generate.py)\n"
                + lowered_tir(90, 2, None, False, row_sum(rows)))
        path = os.path.join(out, file_name(name))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------ bug trail


def _sub(text: str, pattern: str, repl: str, count: int = 0, where: str = "") -> str:
    """``re.sub`` that must change something (a generated file that no longer has the pattern fails loudly)."""
    new, n = re.subn(pattern, repl, text, count=count)
    if n == 0:
        raise ValueError(f"mutant edit {where or pattern!r}: pattern not found")
    return new


def _split_groups(text: str, count: int) -> str:
    """sm80_s3: commit A's copies and B's copies as two groups (every step), the loop's wait set to ``count``."""
    # a commit after A's copies: before each `for i in T.unroll(4):` that copies into B_shared
    lines = text.split("\n")
    out = []
    for n, ln in enumerate(lines):
        nxt = lines[n + 1] if n + 1 < len(lines) else ""
        out.append(ln)
        if re.match(r"\s*for i in T\.unroll\(4\):$", ln) and "B_shared" in nxt and "ptx_cp_async" in nxt:
            ind = re.match(r"\s*", ln).group(0)
            out.insert(len(out) - 1, f"{ind}T.ptx_commit_group()")
    text = "\n".join(out)
    text = _sub(text, r"T\.ptx_wait_group\(2\)", f"T.ptx_wait_group({count})", count=1, where="loop wait")
    # the epilogue's waits keep their physical meaning: 2 groups per step
    text = _sub(text, r"T\.ptx_wait_group\(1\)", "T.ptx_wait_group(2)", count=1, where="epilogue wait")
    return text


def _no_release_wait(text: str) -> str:
    """sm90_ws_s3: the producer's wait on the empty barrier (the consumer's release of the slot) deleted."""
    return _sub(text, r"\n *T\.mbarrier_wait_parity\(mbarrier_1\[k % 3 \+ 3\], T\.bitwise_xor\(k % 6 // 3, 1\)\)",
                "", count=1, where="producer's empty wait")


def _one_slot_empty(text: str, ring_parity: bool) -> str:
    """sm90_ws_s3: the empty barrier is one mbarrier (index 3) released every iteration; the producer waits
    with the ring parity ``(k % 6 // 3) ^ 1`` (``ring_parity``) or with the per-iteration one ``(k % 2) ^ 1``."""
    text = _sub(text, r"mbarrier_1\[k % 3 \+ 3\]", "mbarrier_1[3]", where="empty barrier index")
    if not ring_parity:
        text = _sub(text, r"T\.bitwise_xor\(k % 6 // 3, 1\)", "T.bitwise_xor(k % 2, 1)", where="producer parity")
    return text


def _no_arrive(text: str) -> str:
    """sm90_ws_k32_s3: the producer's ``arrive.expect_tx`` becomes a bare ``expect_tx`` (no arrival)."""
    return _sub(text, r"T\.ptx_arrive_barrier_expect_tx\(", "T.mbarrier_expect_tx(", where="arrive.expect_tx")


MUTANTS = (
    # file, base program, what the edit does (the header line), edit, expected verdict
    ("tl2505_split_groups_bug.tir", "sm80_s3",
     "A and B committed as two cp.async groups per step; the loop's wait_group counted for A's group (5), "
     "not for B's, the last group the consumer reads", lambda t: _split_groups(t, 5), "refuted"),
    ("tl2505_split_groups_fixed.tir", "sm80_s3",
     "A and B committed as two cp.async groups per step; the loop's wait_group from the physical FIFO "
     "distance of B's group (4)", lambda t: _split_groups(t, 4), "proven"),
    ("tl2668_war_bug.tir", "sm90_ws_s3",
     "the producer's wait on the empty barrier deleted: the TMA copy of tile k overwrites the slot of tile "
     "k - 3 and nothing awaits the consumer's read of it", _no_release_wait, "refuted"),
    ("tl3087_ring_parity_bug.tir", "sm90_ws_s3",
     "one empty mbarrier (index 3) flipping every iteration, the producer waiting with the ring parity "
     "(k % 6 // 3) ^ 1", lambda t: _one_slot_empty(t, True), "refuted"),
    ("tl3087_ring_parity_fixed.tir", "sm90_ws_s3",
     "one empty mbarrier (index 3) flipping every iteration, the producer waiting with the iteration "
     "parity (k % 2) ^ 1", lambda t: _one_slot_empty(t, False), "proven"),
    ("tl2566_one_iteration_bug.tir", "rowsum_bulk1d_sm90_t1",
     "one row (one iteration, a 1D bulk TMA copy): the producer's mbarrier arrive.expect_tx made a bare "
     "expect_tx, so the full barrier (init count 1) never gets its arrival", _no_arrive, "refuted"),
    ("tl2566_gemm_k32_bug.tir", "sm90_ws_k32_s3",
     "K = 32 (one iteration): the producer's arrive.expect_tx made a bare expect_tx, so the full barrier "
     "(init count 1) never gets its arrival", _no_arrive, "refuted"),
)
"""The bug-trail inputs. The fixed form of #2668 is ``tilelang_sm90_ws_s3.tir`` itself, of #2566
``tilelang_rowsum_bulk1d_sm90_t1.tir`` and ``tilelang_sm90_ws_k32_s3.tir`` (TileLang 0.1.15 emits
``arrive.expect_tx`` at one iteration, on the 1D bulk path and the tensor-map path)."""


def mutant_text(base_text: str, name: str, what: str, edit) -> str:
    """The mutant of a generated file: a header naming the hand edit, then the edited text."""
    return (f"# HAND EDIT of {file_name(name)} (synth's bug-trail input, not TileLang output): {what}\n"
            + edit(base_text))


def write_mutants(src: str = HERE, out: str = None) -> list:
    """Write :data:`MUTANTS` under ``out`` (default ``src/bugs``) from the generated files in ``src``."""
    out = out or os.path.join(src, BUGS)
    os.makedirs(out, exist_ok=True)
    paths = []
    for fname, base, what, edit, _verdict in MUTANTS:
        with open(os.path.join(src, file_name(base)), encoding="utf-8") as f:
            text = mutant_text(f.read(), base, what, edit)
        path = os.path.join(out, fname)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        paths.append(path)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE, help="folder for the generated files (default: this folder)")
    ap.add_argument("--mutants-only", action="store_true", help="only rewrite the bug-trail files (no TileLang)")
    a = ap.parse_args(argv)
    if not a.mutants_only:
        for p in generate(a.out):
            print("wrote", p)
    for p in write_mutants(a.out):
        print("wrote", p)
    return 0


if __name__ == "__main__":
    sys.exit(main())

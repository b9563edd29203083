"""SASS side by side for sm_90a: synth's TMA + mbarrier + wgmma kernel vs CUTLASS 3.x and Triton.

Static proxies read from the binaries (no GPU): for the consumer's innermost k-loop (the
backward branch holding the most HGMMA and no global store; NOP and ``@!PT`` excluded),
instructions per HGMMA, the longest HGMMA-free run (wrapping around the loop), UTMALDG and SYNCS
per k-tile (whole-kernel count of UTMALDG over the producer's loop), registers (ptxas: the
launch value; setmaxnreg targets from USETMAXREG are listed separately), shared memory, spills.

* synth: ``synth.emit.sm90`` (the kernel emitted from the proven Hopper program);
* CUTLASS 3.x: ``CollectiveBuilder`` with ``KernelTmaWarpSpecializedCooperative`` and
  ``KernelTmaWarpSpecializedPingpong``, f16 in, f32 accumulate and out, cluster 1x1x1, headers
  from the ``nvidia-cutlass`` wheel;
* clusters (``--clusters``, on by default): synth's 2x1 cluster kernel (``KernelDesign.of(cluster="2x1")``: two CTAs
  of a tile column, each loading half of the B tile and multicasting it into both) beside CUTLASS 3.x cooperative
  built with ``ClusterShape<_2,_1,_1>`` (B multicast across the cluster's M) for the same tiles, with three more
  columns: the producer's UTMALDG per k-tile (plain + ``.MULTICAST``, in the innermost loop with UTMALDG and an
  mbarrier arrive; k-tiles counted by its ``arrive.expect_tx``, one per k-tile), the consumer main loop's remote arrives per k-tile
  (``SYNCS.ARRIVE...RED``: ``mbarrier.arrive...shared::cluster`` on a peer's barrier) and the cluster barriers
  (``UCGABAR_ARV``) in the kernel;
* Triton: the tutorial matmul (benchmarks/sass_vs_cutlass.py, pointers) and a matmul loading
  through tensor descriptors (TMA), both for ``GPUTarget("cuda", 90, 32)``, 8 warps, 3 stages.

All compiled with nvcc ``-arch=sm_90a -O3 -DNDEBUG`` (ptxas for Triton's PTX), cached by
synth.emit.sass. Usage::

    python benchmarks/sass_sm90.py [--no-cutlass] [--no-triton] [--only-clusters] [--tiles 128x128,128x256]
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from synth.emit import sass  # noqa: E402
from synth.hopper.kernel_design import SMEM_LIMIT, KernelDesign  # noqa: E402
from synth.emit.sm90.kernel import emit_sm90_kernel  # noqa: E402
from synth.emit.sm90.sass_mix import consumer_loop, figures  # noqa: E402
from synth.lower.hopper_design import design_program

FLAGS = ("-DNDEBUG",)

CUTLASS3_SRC = r"""
#include <cute/tensor.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
using namespace cute;
using TileShape = Shape<_{BM}, _{BN}, _64>;
using ClusterShape = Shape<_{CM}, _{CN}, _1>;
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    float, cutlass::layout::RowMajor, 4, float, cutlass::layout::RowMajor, 4,
    cutlass::epilogue::{EPI}>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    cutlass::half_t, cutlass::layout::RowMajor, 8, cutlass::half_t, cutlass::layout::ColumnMajor, 8, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
    cutlass::gemm::{SCHED}>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Main, Epi>;
void* synth_bench_entry() {{ return reinterpret_cast<void*>(&cutlass::device_kernel<GemmKernel>); }}
"""

SCHEDULES = {"cooperative": ("KernelTmaWarpSpecializedCooperative", "TmaWarpSpecializedCooperative"),
             "pingpong": ("KernelTmaWarpSpecializedPingpong", "TmaWarpSpecialized")}


def synth_row(bm: int, bn: int, stages: int, persistent: bool = False, epilogue: str = "register",
              pingpong: bool = False) -> tuple[str, dict]:
    cfg = KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=1, persistent=persistent, epilogue=epilogue,
                          pingpong=pingpong)
    c = sass.compile_cuda(emit_sm90_kernel(cfg), "sm_90a", flags=FLAGS)
    f = figures(c, cfg.bk // 16 * cfg.row_blocks)
    f["smem"] = cfg.smem_bytes
    return (f"synth {bm}x{bn}x64 s{stages} K_PIPE_MMAS 1" + (" persistent" if persistent else "")
            + (" TMA store" if epilogue == "tma_store" else "") + (" ping-pong (2 warp groups)" if pingpong else "")), f


def synth_solve_row(bm: int, bn: int, size: int = 4096) -> tuple[str, dict]:
    """The kernel ``synth solve`` writes for a ``size``^3 f16 problem with this tile (CP-SAT's choice)."""
    from synth.flow.hopper import choose_pipeline, kernel_config
    from synth.hopper.problem import HopperGemm

    g = HopperGemm.of("bench", size, size, size, "f16", bm, bn)
    choice = choose_pipeline(g)
    cfg = kernel_config(g, choice)
    c = sass.compile_cuda(emit_sm90_kernel(cfg, design_program(cfg)), "sm_90a", flags=FLAGS)
    f = figures(c, cfg.bk // 16 * cfg.row_blocks)
    f["smem"] = cfg.smem_bytes
    return f"synth solve {bm}x{bn}x64 (chose s{choice.stages} K_PIPE_MMAS {choice.k_pipe_mmas})", f


def cluster_figures(c: sass.Compiled, hgmma_per_ktile: int) -> dict:
    """The cluster columns of ``c``: UTMALDG per k-tile (plain + multicast) in the producer's main loop (the
    innermost loop with UTMALDG and an mbarrier arrive, no HGMMA; k-tiles counted by its arrives, the one
    ``arrive.expect_tx`` per k-tile), remote arrives per k-tile in the consumer's main loop, cluster barrier arrives
    in the whole kernel."""
    insns = sass.parse_sass(c.sass)
    def arrives(b):  # the producer's arrive.expect_tx: one per k-tile (a consumer's release is not in this loop)
        return sum(x.op == "SYNCS" and "ARRIVE" in x.opcode for x in b)

    loads = [b for b in sass.backward_loops(insns) if any(x.op == "UTMALDG" for x in b) and arrives(b)
             and not any(x.op == "HGMMA" for x in b)]
    per_ktile = "-"
    if loads:
        body = min(loads, key=len)
        kt = arrives(body)
        mc = sum(x.op == "UTMALDG" and "MULTICAST" in x.opcode for x in body)
        plain = sum(x.op == "UTMALDG" and "MULTICAST" not in x.opcode for x in body)
        per_ktile = f"{plain / kt:g} + {mc / kt:g} multicast"
    loop = consumer_loop(insns) or []
    n = sum(x.op == "HGMMA" for x in loop)
    remote = sum(x.op == "SYNCS" and "ARRIVE" in x.opcode and ".RED" in x.opcode for x in loop)
    return {"utmaldg_per_ktile": per_ktile,
            "remote_arrives_per_ktile": round(remote / (n / hgmma_per_ktile), 2) if n else "-",
            "cluster_barriers": sum(x.op == "UCGABAR_ARV" for x in insns)}


def synth_cluster_row(bm: int, bn: int, stages: int, cluster: str = "2x1") -> tuple[str, dict]:
    """synth's cluster kernel; ``(name, {"error": "not available: <reason>"})`` where the emitter cannot build it."""
    name = f"synth {bm}x{bn}x64 s{stages} K_PIPE_MMAS 1 cluster {cluster} ({'B' if cluster == '2x1' else 'A'} multicast)"
    try:
        cfg = KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=1, cluster=cluster)
        text = emit_sm90_kernel(cfg)
    except (ValueError, NotImplementedError, TypeError) as exc:
        return name, {"error": f"not available: {str(exc).splitlines()[0][:100]}"}
    c = sass.compile_cuda(text, "sm_90a", flags=FLAGS)
    f = figures(c, cfg.bk // 16 * cfg.row_blocks)
    f.update(cluster_figures(c, cfg.bk // 16 * cfg.row_blocks))
    f["smem"] = cfg.smem_bytes
    return name, f


def cutlass_row(bm: int, bn: int, sched: str, cluster: tuple[int, int] = (1, 1)) -> tuple[str, dict]:
    from sass_vs_cutlass import cutlass_include
    inc = cutlass_include()
    if inc is None:
        raise RuntimeError("nvidia-cutlass headers not found")
    k, e = SCHEDULES[sched]
    src = CUTLASS3_SRC.format(BM=bm, BN=bn, SCHED=k, EPI=e, CM=cluster[0], CN=cluster[1])
    c = sass.compile_cuda(src, "sm_90a", flags=("-std=c++17", "--expt-relaxed-constexpr", *FLAGS),
                          include_dirs=(inc,))
    # k-tile = 64 deep = 4 HGMMA k16 per consumer warp group
    f = figures(c, 4)
    if cluster != (1, 1):
        f.update(cluster_figures(c, 4))
    f["smem"] = "dynamic"
    return (f"CUTLASS {sched} {bm}x{bn}x64" +
            (f" ClusterShape<{cluster[0]},{cluster[1]},1>" if cluster != (1, 1) else "")), f


def triton_row(bm: int, bn: int) -> tuple[str, dict]:
    from sass_vs_cutlass import triton_ptx
    c = _assemble_triton(triton_ptx({"BM": bm, "BN": bn, "BK": 64, "warps": 8, "stages": 3}, "sm_90"))
    f = figures(c, 4)
    f["smem"] = "dynamic"
    return f"Triton tutorial {bm}x{bn}x64 w8 s3", f


def triton_tma_ptx(bm: int, bn: int) -> str:
    """Triton with tensor descriptors (TMA loads), 8 warps, 3 stages, f32 out, for sm_90."""
    from triton_sm90 import compile_sm90, mm_tma

    return compile_sm90(mm_tma, 3, bm=bm, bn=bn).asm["ptx"]


def _assemble_triton(ptx: str) -> sass.Compiled:
    # Triton 3.9 writes PTX ISA 9.4; nvcc 13.0's ptxas reads up to 9.0: the same ptxas for every row,
    # so the version line is lowered (the kernels use nothing newer; ptxas would refuse them otherwise)
    return sass.compile_ptx(re.sub(r"^\.version \d+\.\d+", ".version 9.0", ptx, count=1, flags=re.M), "sm_90a")


def triton_tma_row(bm: int, bn: int) -> tuple[str, dict]:
    f = figures(_assemble_triton(triton_tma_ptx(bm, bn)), 4)
    f["smem"] = "dynamic"
    return f"Triton descriptors (TMA) {bm}x{bn}x64 w8 s3", f


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiles", default="128x128,128x256")
    ap.add_argument("--no-cutlass", action="store_true")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--only-clusters", action="store_true",
                    help="only the cluster rows: synth 2x1 and CUTLASS ClusterShape<2,1,1> (and the 1x1 rows they "
                         "are compared with)")
    args = ap.parse_args(argv)
    rows = []
    for t in args.tiles.split(","):
        bm, bn = (int(x) for x in t.split("x"))
        stages = 4
        rows.append(synth_row(bm, bn, stages))
        # the cluster rows, side by side: synth's 2x1 kernel and CUTLASS's cooperative kernel with ClusterShape<2,1,1>
        rows.append(synth_cluster_row(bm, bn, stages))
        if not args.no_cutlass:
            try:
                rows.append(cutlass_row(bm, bn, "cooperative", (2, 1)))
            except Exception as exc:  # reported, not hidden
                rows.append((f"CUTLASS cooperative {bm}x{bn}x64 ClusterShape<2,1,1>",
                             {"error": str(exc).splitlines()[0][:80]}))
        if args.only_clusters:
            if not args.no_cutlass:
                try:
                    rows.append(cutlass_row(bm, bn, "cooperative"))
                except Exception as exc:
                    rows.append((f"CUTLASS cooperative {bm}x{bn}x64", {"error": str(exc).splitlines()[0][:80]}))
            continue
        rows.append(synth_row(bm, bn, stages, persistent=True))
        # the TMA-store epilogue's staging (2 x 8 KiB per consumer warp group) may cost a stage at 128x256
        store = KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=1, epilogue="tma_store")
        st = stages if store.smem_bytes <= SMEM_LIMIT else stages - 1
        rows.append(synth_row(bm, bn, st, persistent=True, epilogue="tma_store"))
        if bm == 128:  # ping-pong: two warp groups with a 64-row tile each, the same 128 rows in flight
            rows.append(synth_row(64, bn, stages, persistent=True, pingpong=True))
            if bn <= 128:  # and CUTLASS's shape: a whole 128-row tile per warp group (8 HGMMA per k-tile), at the
                # 5 stages the search ranks it with (at 4 its longest HGMMA-free run is 29, one above CUTLASS's)
                rows.append(synth_row(128, bn, 5, persistent=True, pingpong=True))
        rows.append(synth_solve_row(bm, bn))
        if not args.no_cutlass:
            for sched in SCHEDULES:
                try:
                    rows.append(cutlass_row(bm, bn, sched))
                except Exception as exc:  # reported, not hidden
                    rows.append((f"CUTLASS {sched} {bm}x{bn}x64", {"error": str(exc).splitlines()[0][:80]}))
        if not args.no_triton:
            for fn, label in ((triton_row, "Triton tutorial"), (triton_tma_row, "Triton descriptors")):
                try:
                    rows.append(fn(bm, bn))
                except Exception as exc:
                    rows.append((f"{label} {bm}x{bn}x64", {"error": str(exc).splitlines()[0][:80]}))
    cols = ["hgmma_shape", "loop_hgmma", "insn_per_hgmma", "longest_free", "syncs_per_ktile", "utmaldg_total",
            "utmaldg_per_ktile", "remote_arrives_per_ktile", "cluster_barriers",
            "utmastg_total", "ldgsts", "hmma", "registers", "setmaxnreg", "spills", "smem"]
    print("| kernel | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, f in rows:
        if "error" in f:
            print(f"| {name} | error: {f['error']} |")
            continue
        print(f"| {name} | " + " | ".join(str(f.get(c, "")) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

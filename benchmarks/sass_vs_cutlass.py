"""Main loops in SASS: synth's kernel.cu against CUTLASS 2.x and Triton, compiled in the same run.

For each configuration (default: 128x128x32 with 4 warps at 3 and 4 stages,
128x256x64 with 8 warps at 3 stages) this compiles, with the same nvcc/ptxas
and the same flags (``-arch=sm_80 -cubin -O3 -Xptxas -v``):

* CUTLASS 2.x ``cutlass::gemm::device::Gemm`` (headers from the ``nvidia-cutlass``
  wheel): TN (A row-major, B column-major), f16 operands, f32 accumulate and
  output, ``OpClassTensorOp``, ``Sm80``, warp tile 64x64, mma 16x8x16;
* Triton's tutorial matmul (``triton.compile`` for ``GPUTarget("cuda", 80, 32)``,
  no GPU needed; pointers and sizes marked 16-divisible as a launch with these
  shapes would specialize them), its PTX assembled by the same ptxas;
* synth's ``kernel.cu`` for the pinned ``stages: S`` schedule (CUTLASS's shape),
  once proved for K = 4096 and once for every K (trip count ``T >= 1`` at run
  time, ``expand_gemm(min_ktiles=1)``), and, with ``--auto``, for ``stages:
  auto`` (the solver's choice, K = 4096);
* with ``--stream-k``, CUTLASS 2.x's stream-K kernel (``device::GemmUniversal`` with
  ``ThreadblockSwizzleStreamK``, alignment 8) and synth's ``stream_k: true`` kernel, whose
  main loop sits inside a loop over tile segments;

then finds each main loop (the innermost loop holding the most HMMA) with
``cuobjdump -sass`` and prints, per k-tile: live instructions per HMMA (NOP and
never-executed ``@!PT`` excluded), the longest run with no HMMA (cyclic), the
fewest HMMAs between an LDSM and the first HMMA reading it, the largest share
of the k-tile's LDGSTS in one HMMA-free run, integer/address instructions, the
k-tile loop's waits, C stores by width, registers, shared memory and spills.
Static proxies read from the binary, measured without a GPU: no timing.

    python benchmarks/sass_vs_cutlass.py [--auto] [--stream-k] [--configs 128x128x32w4s3,...]

Compiles are cached (``~/.cache/synth/sass``): a second run costs no compile.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from synth.emit import sass  # noqa: E402

CONFIGS = {
    "128x128x32w4s3": dict(BM=128, BN=128, BK=32, warps=4, stages=3),
    "128x128x32w4s4": dict(BM=128, BN=128, BK=32, warps=4, stages=4),
    "128x256x64w8s3": dict(BM=128, BN=256, BK=64, warps=8, stages=3),
}
SHAPE = dict(M=4096, N=4096, K=4096)

CUTLASS_SRC = """
#include <cutlass/gemm/device/{header}.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle_streamk.h>
using Gemm = cutlass::gemm::device::{device}<
    cutlass::half_t, cutlass::layout::RowMajor, cutlass::half_t, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<{BM}, {BN}, {BK}>, cutlass::gemm::GemmShape<{WTM}, {WTN}, {BK}>,
    cutlass::gemm::GemmShape<16, 8, 16>, cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::{swizzle}, {stages}{align}>;
template __global__ void cutlass::{entry}<Gemm::GemmKernel>(Gemm::GemmKernel::Params);
"""
CUTLASS_KINDS = {
    False: dict(header="gemm", device="Gemm", swizzle="GemmIdentityThreadblockSwizzle<>", align="", entry="Kernel"),
    True: dict(header="gemm_universal", device="GemmUniversal", swizzle="ThreadblockSwizzleStreamK", align=", 8, 8",
               entry="Kernel2"),
}
"""The data-parallel ``device::Gemm`` and the stream-K ``device::GemmUniversal`` (alignment 8)."""


def cutlass_include():
    """The CUTLASS headers of the nvidia-cutlass wheel, or None."""
    try:
        import cutlass_library
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include")
    return d if os.path.isfile(os.path.join(d, "cutlass", "gemm", "device", "gemm.h")) else None


def compile_cutlass(cfg: dict, arch: str, stream_k: bool = False) -> sass.Compiled:
    inc = cutlass_include()
    wtm, wtn = warp_tile(cfg)
    src = CUTLASS_SRC.format(WTM=wtm, WTN=wtn, **CUTLASS_KINDS[stream_k], **cfg)
    return sass.compile_cuda(src, arch, flags=("-std=c++17",), include_dirs=(inc,))


def warp_tile(cfg: dict) -> tuple[int, int]:
    from synth.gemm import GemmConfig, tiling

    t = tiling(GemmConfig(1024, 1024, 1024, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], warps=cfg["warps"]))
    return t.WTM, t.WTN


def triton_ptx(cfg: dict, arch: str) -> str:
    """Triton's tutorial matmul (f32 output, B read as N x K: "TN") as PTX for ``arch``."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                      stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        num_pid_in_group = GROUP_M * num_pid_n
        first_pid_m = (pid // num_pid_in_group) * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, acc, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "constexpr", "stride_bn": "i32",
           "stride_cm": "i32", "stride_cn": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    cst = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1, "BLOCK_M": cfg["BM"], "BLOCK_N": cfg["BN"],
           "BLOCK_K": cfg["BK"], "GROUP_M": 8}
    names = list(sig)
    div16 = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bn", "stride_cm")
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div16}
    src = ASTSource(fn=matmul_kernel, signature=sig, constexprs=cst, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", int(arch.split("_")[1]), 32),
                       options={"num_warps": cfg["warps"], "num_stages": cfg["stages"]})
    return k.asm["ptx"]


def synth_kernel(cfg: dict, auto: bool, arch: str, any_k: bool = False, stream_k: bool = False) -> tuple[str, dict]:
    from synth.emit.cuda import emit_kernel
    from synth.gemm import GemmConfig, expand_gemm
    from synth.graph import build_graph
    from synth.lower import lower
    from synth.schedule import schedule_from_pins

    g = GemmConfig(SHAPE["M"], SHAPE["N"], SHAPE["K"], BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
                   warps=cfg["warps"], stages=None if auto else cfg["stages"], arch=arch, stream_k=stream_k)
    p = expand_gemm(g, min_ktiles=1 if any_k or stream_k else None)
    graph = build_graph(p)
    if auto:
        from synth.model import solve

        sched = solve(p, graph, time_limit=60.0, workers=2)
    else:
        sched = schedule_from_pins(p, graph)
    prog = lower(p, graph, sched)
    return emit_kernel(p, sched, prog), {"slots": sched.mult("A_s"), "stages": sched.max_stage + 1}


def row(name: str, comp: sass.Compiled, hmma_per_ktile: int, smem: str) -> list[str]:
    insns = sass.parse_sass(comp.sass)
    st = sass.loop_stats(sass.main_loop(insns), hmma_per_ktile)
    stg = sass.stg_widths(insns)
    kt = st.ktiles
    return [name, f"{st.per_hmma:.2f}", str(st.longest_hmma_free),
            "-" if st.min_ldsm_to_use is None else str(st.min_ldsm_to_use),
            f"{st.max_ldgsts_run_share:.2f} of {st.ldgsts / kt:g}", f"{st.int_ops / kt:g} (+{st.uniform_ops / kt:g})",
            ",".join(str(x) for x in st.depbar) or "-",
            " ".join(f"{n}x{w}" for w, n in sorted(stg.items(), reverse=True)) or "-",
            str(comp.registers), smem, f"{comp.spill_stores}/{comp.spill_loads}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated keys of CONFIGS")
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--auto", action="store_true", help="also synth's stages: auto kernel (runs the solver)")
    ap.add_argument("--stream-k", action="store_true", help="also CUTLASS 2.x's and synth's stream-K kernels")
    args = ap.parse_args(argv)
    console = Console(width=240)
    if sass.tool("nvcc") is None or sass.tool("cuobjdump") is None:
        console.print("needs nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump)")
        return 2
    console.print(f"nvcc flags: -arch={args.arch} -cubin {' '.join(sass.NVCC_FLAGS)}; shape "
                  f"{SHAPE['M']}x{SHAPE['N']}x{SHAPE['K']}; per k-tile; static proxies, no GPU")
    from synth.gemm import GemmConfig, tiling

    for key in args.configs.split(","):
        cfg = CONFIGS[key]
        t = tiling(GemmConfig(1024, 1024, 1024, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], warps=cfg["warps"]))
        hpk = t.MI * t.NI * t.KI
        tab = Table(title=f"{key}: {cfg['BM']}x{cfg['BN']}x{cfg['BK']}, {cfg['warps']} warps, "
                          f"{cfg['stages']} stages (warp tile {t.WTM}x{t.WTN}, {hpk} HMMA per warp and k-tile)")
        for col in ("kernel", "live insns / HMMA", "longest HMMA-free run", "min HMMAs LDSM->use",
                    "max LDGSTS share in one HMMA-free run", "int/addr insns (+uniform)", "loop DEPBAR", "C stores (STG)",
                    "registers", "smem B", "spill st/ld"):
            tab.add_column(col)
        if cutlass_include():
            smem = (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2 * cfg["stages"]
            for sk in (False, True) if args.stream_k else (False,):
                c = compile_cutlass(cfg, args.arch, sk)
                tab.add_row(*row("CUTLASS 2.x " + ("GemmUniversal stream-K" if sk else "device::Gemm"), c, hpk,
                                 f"{smem} (dyn)"))
        else:
            tab.add_row("CUTLASS: pip install nvidia-cutlass", *[""] * 10)
        try:
            ptx = triton_ptx(cfg, args.arch)
            smem = "see PTX"
            tab.add_row(*row("Triton tutorial matmul", sass.compile_ptx(ptx, args.arch), hpk, smem))
        except ImportError:
            tab.add_row("Triton: pip install triton", *[""] * 10)
        for auto, any_k in [(False, False), (False, True)] + ([(True, False)] if args.auto else []):
            text, facts = synth_kernel(cfg, auto, args.arch, any_k)
            from synth.emit.emulate import kernel_macros

            name = (f"synth stages: {'auto' if auto else cfg['stages']} ({facts['stages']} stages, {facts['slots']} "
                    f"slots), {'any K (T >= 1 at run time)' if any_k else 'K = 4096'}")
            tab.add_row(*row(name, sass.compile_cuda(text, args.arch), hpk,
                             f"{kernel_macros(text)['SMEM_BYTES']} (dyn)"))
        if args.stream_k:
            from synth.emit.emulate import kernel_macros

            text, facts = synth_kernel(cfg, False, args.arch, True, stream_k=True)
            tab.add_row(*row(f"synth stages: {cfg['stages']}, stream_k: true (any K)", sass.compile_cuda(text, args.arch),
                             hpk, f"{kernel_macros(text)['SMEM_BYTES']} (dyn)"))
        console.print(tab)
    return 0


if __name__ == "__main__":
    sys.exit(main())

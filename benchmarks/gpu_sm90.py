"""TFLOP/s of synth's sm_90a GEMM against cuBLAS, measured in the same run on an H100/H200.

For each size (M = N = K), dtype and tile: the Hopper flow of ``synth solve`` (CP-SAT choice of
stages and K_PIPE_MMAS, lowering, proof of every obligation, kernel.cu), then the kernel launched
through CUDA Python with tensor maps (``synth.emit.sm90.runner.time_gpu``: one checked launch,
then ``--repeats`` launches timed with CUDA events, median, warm L2), and cuBLAS through torch
(``torch.matmul`` on the same operands, f32 accumulation, f16/bf16 output, median of as many
launches). Correctness: C against torch's f32 product of the same operands on the GPU,
``|C - ref| <= 1e-2 + 1e-2 |ref|`` (f16) or ``5e-2`` (bf16).

    python benchmarks/gpu_sm90.py                      # 4096^3 and 8192^3, f16 and bf16, 128x128 and 128x256
    python benchmarks/gpu_sm90.py --sizes 4096 --dtypes f16 --tiles 128x256
    python benchmarks/gpu_sm90.py --dry-run            # no GPU: solve, prove, compile only

Without an sm_90 GPU (and without ``--dry-run``) it prints why and exits 0: nothing is measured.
Needs ``pip install '.[gpu]'`` and torch for the cuBLAS column, and the full installation (it runs CP-SAT
and Z3 on the GPU machine): on a lent GPU with a stock image, use ``benchmarks/gpu_check.py`` (docs/gpu.md),
whose folders are solved beforehand. The launch goes through :class:`synth.emit.sm90.runner.CudaDevice`,
the driver layer the sm_80 kernel shares.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from synth.emit.sm90.kernel import emit_sm90_kernel  # noqa: E402
from synth.emit.sm90.runner import gpu_status, time_gpu  # noqa: E402
from synth.flow.hopper import choose_pipeline, kernel_config  # noqa: E402
from synth.hopper.problem import HopperGemm  # noqa: E402
from synth.run import cublas_ms  # noqa: E402
from synth.verify.phases import verify_hopper  # noqa: E402
from synth.lower.hopper_design import design_program

TOL = {"f16": 1e-2, "bf16": 5e-2}


def build(size: int, dtype: str, bm: int, bn: int):
    """(config, kernel.cu, seconds to choose, seconds to prove) of the Hopper flow for this GEMM."""
    g = HopperGemm.of(f"bench-{size}-{dtype}-{bm}x{bn}", size, size, size, dtype, bm, bn)
    t0 = time.perf_counter()
    choice = choose_pipeline(g)
    t1 = time.perf_counter()
    cfg = kernel_config(g, choice)
    program = design_program(cfg)
    report = verify_hopper(program)
    t2 = time.perf_counter()
    if not report.ok:
        raise RuntimeError(f"{g.name}: not proven:\n{report.render()}")
    return cfg, emit_sm90_kernel(cfg, program), t1 - t0, t2 - t1


def measure(size: int, dtype: str, cfg, kernel_cu: str, repeats: int) -> dict:
    import numpy as np
    import torch

    tdt = torch.float16 if dtype == "f16" else torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(size)
    a = (torch.rand((size, size), generator=gen, device="cuda") * 2 - 1).to(tdt)
    b = (torch.rand((size, size), generator=gen, device="cuda") * 2 - 1).to(tdt)
    A = a.view(torch.int16).cpu().numpy().view(np.uint16) if dtype == "bf16" else a.cpu().numpy()
    B = b.view(torch.int16).cpu().numpy().view(np.uint16) if dtype == "bf16" else b.cpu().numpy()
    C, times, regs, device = time_gpu(kernel_cu, cfg, A, B, repeats=repeats)
    ref = (a.float() @ b.float().t()).cpu().numpy()
    err = float(np.abs(C - ref).max())
    ok = bool(np.all(np.abs(C - ref) <= TOL[dtype] + TOL[dtype] * np.abs(ref)))
    ms = statistics.median(times)
    cms, _ = cublas_ms(A, B, repeats, dtype)
    flop = 2.0 * size ** 3
    return {"device": device, "ms": ms, "tflops": flop / ms / 1e9, "cublas_tflops": flop / cms / 1e9,
            "ok": ok, "max_err": err, "registers": regs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--tiles", default="128x128,128x256")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: choose, prove and build the kernels only")
    args = ap.parse_args(argv)
    ready, why = gpu_status()
    if not ready and not args.dry_run:
        print(f"no sm_90 GPU: {why}; nothing measured (use --dry-run to build the kernels)")
        return 0
    print("| size | dtype | tile | stages | K_PIPE_MMAS | choose s | prove s | synth TFLOP/s | cuBLAS TFLOP/s "
          "| synth / cuBLAS | correct (max err) | regs |")
    print("|---" * 12 + "|")
    for size in (int(x) for x in args.sizes.split(",")):
        for dtype in args.dtypes.split(","):
            for t in args.tiles.split(","):
                bm, bn = (int(x) for x in t.split("x"))
                cfg, text, t_choose, t_prove = build(size, dtype, bm, bn)
                head = (f"| {size}^3 | {dtype} | {bm}x{bn}x64 | {cfg.stages} | {cfg.k_pipe_mmas} | {t_choose:.2f} "
                        f"| {t_prove:.2f} ")
                if args.dry_run:
                    from synth.emit import sass

                    c = sass.compile_cuda(text, "sm_90a", flags=("-DNDEBUG",))
                    print(head + f"| (dry run) | - | - | compiled, {c.registers} regs, {c.spill_stores} B spilled | "
                          f"{c.registers} |")
                    continue
                m = measure(size, dtype, cfg, text, args.repeats)
                print(head + f"| {m['tflops']:.1f} | {m['cublas_tflops']:.1f} | {m['tflops'] / m['cublas_tflops']:.2f} "
                      f"| {'yes' if m['ok'] else 'NO'} ({m['max_err']:.2g}) | {m['registers']} |", flush=True)
    if ready:
        print(f"device: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

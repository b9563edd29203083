"""``synth run OUT/``: run an output folder's ``kernel.cu`` on a GPU and measure it.

Input: a folder written by ``synth solve`` for a ``kind: gemm`` problem.
Output: a :class:`RunReport`: correctness against numpy, time, TFLOP/s, the
fraction of the arch's tensor peak and, when torch or cupy is importable, of
cuBLAS on the same shape.

pycuda (``pip install '.[gpu]'``) is imported inside :func:`run_output`, never at
module import; without it or without a GPU the function raises
:class:`~synth.errors.SynthError` ("no CUDA GPU available: ..."), which the CLI
maps to exit status 1.

Left out on purpose: L2 flushing between repeats (the numbers are warm-L2, as
most GEMM benchmarks report) and autotuning of launch parameters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from .errors import Loc, SynthError

NO_GPU_FIX = "run on a machine with an NVIDIA GPU and pip install '.[gpu]'"
ATOL = 1e-2
RTOL = 1e-2
"""f16 inputs with f32 accumulation: |C - ref| <= ATOL + RTOL * |ref| (K-dependent ordering)."""


@dataclass(frozen=True)
class RunReport:
    name: str
    device: str
    M: int
    N: int
    K: int
    ok: bool
    """Every entry within tolerance of numpy's f32 product."""
    max_abs_err: float
    ms: float
    """Median kernel time over the repeats."""
    tflops: float
    peak_tflops: float
    """Dense f16->f32 tensor peak of the arch table (synth.arch)."""
    cublas_ms: Optional[float] = None
    cublas_tflops: Optional[float] = None
    cublas_via: Optional[str] = None
    registers: Optional[int] = None
    smem_bytes: int = 0

    @property
    def fraction_of_peak(self) -> float:
        return self.tflops / self.peak_tflops if self.peak_tflops else 0.0

    @property
    def fraction_of_cublas(self) -> Optional[float]:
        return None if not self.cublas_tflops else self.tflops / self.cublas_tflops

    def render(self) -> str:
        lines = [
            f"{self.name} on {self.device}: {'OK' if self.ok else 'WRONG RESULT'} "
            f"(max |C - ref| = {self.max_abs_err:.3g})",
            f"  {self.M}x{self.N}x{self.K}: {self.ms:.3f} ms, {self.tflops:.1f} TFLOP/s, "
            f"{100 * self.fraction_of_peak:.0f}% of the {self.peak_tflops:.0f} TFLOP/s tensor peak",
        ]
        if self.cublas_tflops:
            lines.append(f"  cuBLAS ({self.cublas_via}): {self.cublas_ms:.3f} ms, "
                         f"{self.cublas_tflops:.1f} TFLOP/s; synth reaches {100 * self.fraction_of_cublas:.0f}%")
        else:
            lines.append("  cuBLAS: not measured (install torch or cupy)")
        lines.append(f"  {self.registers if self.registers is not None else '?'} registers/thread, "
                     f"{self.smem_bytes} B dynamic shared memory")
        return "\n".join(lines)


def _no_gpu(reason: str) -> SynthError:
    return SynthError(None, f"no CUDA GPU available: {reason}", NO_GPU_FIX)


def _open_device():
    """``(driver module, context, device)``; raises the no-GPU SynthError."""
    try:
        import pycuda.driver as drv  # noqa: PLC0415 - optional dependency
    except ImportError as exc:
        raise _no_gpu(f"pycuda is not installed ({exc})") from None
    try:
        drv.init()
        if drv.Device.count() == 0:
            raise _no_gpu("the CUDA driver sees no device")
        dev = drv.Device(0)
        ctx = dev.make_context()
    except SynthError:
        raise
    except Exception as exc:  # pycuda raises its own LogicError/RuntimeError types
        raise _no_gpu(f"{type(exc).__name__}: {exc}") from None
    return drv, ctx, dev


def run_output(out_dir: str, *, repeats: int = 20, seed: int = 0) -> RunReport:
    """Compile ``out_dir/kernel.cu`` for the local GPU, run it, check and time it."""
    import numpy as np

    from .arch import get_arch
    from .gemm import config_from_problem
    from .pipeline import load_output

    from .hopper.ir import is_hopper_file

    if is_hopper_file(out_dir):  # the folder is read and checked once, by synth.kernel.load
        return _run_hopper(out_dir, repeats, seed)
    path = os.path.join(out_dir, "kernel.cu")
    problem, schedule, program = load_output(out_dir)
    cfg = config_from_problem(problem)
    if not os.path.isfile(path):
        raise SynthError(Loc(out_dir), f"'{out_dir}' has no kernel.cu", f"run 'synth emit {out_dir} --target cuda'")
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    from .emit.cuda import kernel_info
    from .kernel import device_ctas, facts_of

    info = kernel_info(problem, schedule, program)
    if info.ktiles and -(-cfg.K // cfg.BK) != info.ktiles:  # pragma: no cover - a config invariant
        raise SynthError(None, "K does not match the kernel's k-tile count", "re-run synth solve")

    drv, ctx, dev = _open_device()
    try:
        from pycuda.compiler import compile as nvcc_compile  # noqa: PLC0415

        major, minor = dev.compute_capability()
        arch = f"sm_{major}{minor}"
        try:
            cubin = nvcc_compile(source, no_extern_c=True, arch=arch, options=["-std=c++17", "-O3"])
        except Exception as exc:
            raise SynthError(Loc(path), f"nvcc failed on kernel.cu: {exc}", "check the CUDA toolkit version") from None
        mod = drv.module_from_buffer(cubin)
        fn = mod.get_function("synth_gemm")
        if info.smem_bytes > 48 * 1024:
            fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, info.smem_bytes)
        regs = fn.get_attribute(drv.function_attribute.NUM_REGS)

        M, N, K = cfg.M, cfg.N, cfg.K
        rng = np.random.default_rng(seed)
        A = rng.uniform(-1, 1, size=(M, K)).astype(np.float16)
        B = rng.uniform(-1, 1, size=(N, K)).astype(np.float16)
        ldc = N + (-N) % 4  # the kernel stores C rows in 16-byte vectors
        C = np.zeros((M, ldc), dtype=np.float32)
        status = np.zeros(1, dtype=np.int32)
        dA, dB, dC = drv.to_device(A), drv.to_device(B), drv.mem_alloc(C.nbytes)
        dS = drv.to_device(status)
        block = (info.threads, 1, 1)
        # C = A B^T, no C_in (synth.kernel.Launch: the grid and split-K's or stream-K's buffers, whose tickets
        # are zeroed once: each launch leaves them zeroed)
        facts = facts_of(source, path)
        plan = facts.launch(M, N, K, device_ctas(drv, dev, fn, facts))
        extra = plan.buffers(lambda n: drv.mem_alloc(4 * n), lambda n: drv.to_device(np.zeros(n, np.uint32)))
        args = (dA, dB, dC, np.intp(0), np.int32(M), np.int32(N), np.int32(K), np.int32(K), np.int32(K),
                np.int32(ldc), np.float32(1.0), np.float32(0.0), *extra, dS)

        def launch():
            fn(*args, block=block, grid=plan.grid, shared=info.smem_bytes)

        launch()
        drv.Context.synchronize()
        drv.memcpy_dtoh(C, dC)
        drv.memcpy_dtoh(status, dS)
        if status[0]:
            from .emit.cuda import STATUS_CODES

            why = "; ".join(w for code, (_, w) in STATUS_CODES.items() if status[0] & code)
            raise SynthError(Loc(path), f"kernel.cu refused the launch (status {int(status[0])}): {why}",
                             "re-emit the kernel for this problem ('synth emit')")
        C = C[:, :N]
        ref = A.astype(np.float32) @ B.astype(np.float32).T
        diff = np.abs(C - ref)
        ok = bool(np.all(np.isfinite(C)) and np.all(diff <= ATOL + RTOL * np.abs(ref)))
        max_err = float(diff.max()) if np.all(np.isfinite(C)) else float("inf")

        times = []
        start, stop = drv.Event(), drv.Event()
        for _ in range(max(repeats, 1)):
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            times.append(stop.time_since(start))
        ms = float(np.median(times))
        tflops = 2.0 * M * N * K / (ms * 1e-3) / 1e12
        cu_ms, via = cublas_ms(A, B, repeats)
    finally:
        ctx.pop()
    spec = get_arch(cfg.arch)
    return RunReport(problem.name, dev.name(), M, N, K, ok, max_err, ms, tflops, spec.peak_tflops_f16,
                     cu_ms, (2.0 * M * N * K / (cu_ms * 1e-3) / 1e12) if cu_ms else None, via, regs,
                     info.smem_bytes)


def _run_hopper(out_dir: str, repeats: int, seed: int) -> RunReport:
    """``synth run`` of a Hopper folder: the checked kernel (:func:`synth.kernel.load`) launched on an
    sm_90 GPU through CUDA Python, checked against numpy, timed, and cuBLAS timed on the same operands."""
    import numpy as np

    from .arch import get_arch
    from .kernel import load

    kernel = load(out_dir, backend="emulator")  # the folder's checks; the launch below uses the GPU
    problem = kernel.problem
    from .emit.sm90.runner import GpuError, gpu_status, time_gpu

    ready, why = gpu_status()
    if not ready:
        raise _no_gpu(why)

    M, N, K = problem.M, problem.N, problem.K
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, size=(N, K)).astype(np.float16)
    if problem.dtype == "bf16":
        from .emit.sm90.emulate import bf16_bits, bf16_value

        A, B = bf16_bits(A.astype(np.float32)), bf16_bits(B.astype(np.float32))
        A32, B32 = bf16_value(A).astype(np.float32), bf16_value(B).astype(np.float32)
    else:
        A32, B32 = A.astype(np.float32), B.astype(np.float32)
    try:
        C, times, regs, device = time_gpu(kernel.source, kernel.config, A, B, repeats=max(repeats, 1))
    except GpuError as exc:
        raise _no_gpu(str(exc)) from None
    ref = A32 @ B32.T
    diff = np.abs(C - ref)
    ok = bool(np.all(np.isfinite(C)) and np.all(diff <= ATOL + RTOL * np.abs(ref)))
    max_err = float(diff.max()) if np.all(np.isfinite(C)) else float("inf")
    ms = float(np.median(times))
    cu_ms, via = cublas_ms(A, B, repeats, problem.dtype)
    spec = get_arch(problem.arch)
    flop = 2.0 * M * N * K
    return RunReport(problem.name, device, M, N, K, ok, max_err, ms, flop / (ms * 1e-3) / 1e12, spec.peak_tflops_f16,
                     cu_ms, (flop / (cu_ms * 1e-3) / 1e12) if cu_ms else None, via, regs, kernel.config.smem_bytes)


def cublas_ms(A, B, repeats: int, dtype: str = "f16") -> tuple[Optional[float], Optional[str]]:
    """Median ms of cuBLAS's ``A @ B.T`` (f32 accumulate, output in the operands' type) via torch or
    cupy, if importable; ``(None, None)`` otherwise. A and B are float16 arrays, or for ``dtype``
    ``bf16`` bfloat16 bit patterns (uint16; torch only)."""
    try:
        import torch  # noqa: PLC0415

        if torch.cuda.is_available():
            import numpy as np

            if dtype == "bf16":
                a = torch.from_numpy(A.view(np.int16)).view(torch.bfloat16).cuda()
                b = torch.from_numpy(B.view(np.int16)).view(torch.bfloat16).cuda()
            else:
                a = torch.from_numpy(A).cuda()
                b = torch.from_numpy(B).cuda()
            torch.matmul(a, b.t())
            times = []
            for _ in range(max(repeats, 1)):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                torch.matmul(a, b.t())
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            return sorted(times)[len(times) // 2], "torch"
    except Exception:  # noqa: BLE001 - optional comparison only
        pass
    if dtype != "f16":
        return None, None
    try:
        import cupy  # noqa: PLC0415

        a, b = cupy.asarray(A), cupy.asarray(B)
        cupy.matmul(a, b.T)
        times = []
        for _ in range(max(repeats, 1)):
            s, e = cupy.cuda.Event(), cupy.cuda.Event()
            s.record()
            cupy.matmul(a, b.T)
            e.record()
            e.synchronize()
            times.append(cupy.cuda.get_elapsed_time(s, e))
        return sorted(times)[len(times) // 2], "cupy"
    except Exception:  # noqa: BLE001
        return None, None


__all__ = ["RunReport", "run_output", "cublas_ms", "NO_GPU_FIX"]

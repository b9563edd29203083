"""``synth run OUT/``: run an output folder's ``kernel.cu`` on a GPU and measure it; ``synth search --measure``:
time the folders of the best candidates and rank them by measurement (:func:`measure`, :func:`gpu_available`).

Input: a folder written by ``synth solve`` for a ``kind: gemm`` problem.
Output: a :class:`RunReport`: correctness against numpy, time, TFLOP/s, the
fraction of the arch's tensor peak and, when torch or cupy is importable, of
cuBLAS on the same shape.

The kernel runs through :mod:`synth.kernel` (the light runtime: no solver is
imported) on CUDA Python or pycuda (``SYNTH_GPU_BACKEND``), imported only inside
:func:`run_output`; without either or without a GPU the function raises
:class:`~synth.errors.SynthError` ("no CUDA GPU available: ..."), which the CLI
maps to exit status 1.

Left out on purpose: L2 flushing between repeats (the numbers are warm-L2, as
most GEMM benchmarks report; ``benchmarks/gpu_check.py`` reports both) and
autotuning of launch parameters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional, Sequence

from .errors import Loc, SynthError

if TYPE_CHECKING:
    from .search.results import Progress, SearchResult

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


def run_output(out_dir: str, *, repeats: int = 20, seed: int = 0) -> RunReport:
    """Load ``out_dir``'s kernel (:func:`synth.kernel.load`: the folder's checks, no solver), run it once on the
    GPU (CUDA Python or pycuda, ``SYNTH_GPU_BACKEND``; a Hopper folder: CUDA Python) on the problem's shape,
    check it against numpy and time ``repeats`` more launches (CUDA events, warm L2)."""
    import numpy as np

    # here, not at the top: synth run loads the light runtime when it runs a folder
    from .arch import get_arch
    from .kernel import HopperKernel, KernelError, load

    kernel = load(out_dir, backend="emulator")  # the folder's checks; the launch below uses the GPU
    if not hasattr(kernel, "problem"):  # an attention folder's kernel: no GEMM shape to run and compare with cuBLAS
        raise SynthError(Loc(out_dir), f"synth run measures a GEMM folder; {out_dir} holds an attention kernel",
                         "call synth.kernel.load(OUT)(q, k, v) (docs/api.md), or time it against torch's "
                         "scaled_dot_product_attention with benchmarks/gpu_check.py (docs/gpu.md)")
    hopper = isinstance(kernel, HopperKernel)
    if hopper:
        problem = kernel.problem
        M, N, K, arch, dtype, smem = problem.M, problem.N, problem.K, problem.arch, problem.dtype, \
            kernel.config.smem_bytes
    else:
        cfg = kernel.problem.gemm
        M, N, K, arch, dtype, smem = cfg.M, cfg.N, cfg.K, cfg.arch, "f16", kernel.facts.smem_bytes
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, size=(N, K)).astype(np.float16)
    if dtype == "bf16":
        # here, not at the top: synth run loads the light runtime when it runs a folder
        from .emit.sm90.emulate import bf16_bits, bf16_value

        A, B = bf16_bits(A.astype(np.float32)), bf16_bits(B.astype(np.float32))
        A32, B32 = bf16_value(A).astype(np.float32), bf16_value(B).astype(np.float32)
    else:
        A32, B32 = A.astype(np.float32), B.astype(np.float32)
    try:
        job = kernel.prepare(A, B)
    except KernelError:
        raise
    except SynthError as exc:
        raise _no_gpu(exc.msg.removeprefix("no CUDA GPU available: ").removeprefix("no sm_90 GPU available: ")) \
            from None
    with job:
        job.run()
        C, status = job.fetch()
        if status:
            # here, not at the top: synth run loads the light runtime when it runs a folder
            from .emit.cuda import status_reasons

            why = status_reasons(status)
            raise SynthError(Loc(kernel.path), f"kernel.cu refused the launch (status {status}): {why}",
                             "re-emit the kernel for this problem ('synth emit')")
        times = job.time_ms(max(repeats, 1))
        regs, device = job.registers, job.device
    ref = A32 @ B32.T
    diff = np.abs(C - ref)
    ok = bool(np.all(np.isfinite(C)) and np.all(diff <= ATOL + RTOL * np.abs(ref)))
    max_err = float(diff.max()) if np.all(np.isfinite(C)) else float("inf")
    ms = float(np.median(times))
    cu_ms, via = cublas_ms(A, B, repeats, dtype)
    flop = 2.0 * M * N * K
    return RunReport(kernel.problem.name if hopper else kernel.facts.name, device, M, N, K, ok, max_err, ms,
                     flop / (ms * 1e-3) / 1e12, get_arch(arch).peak_tflops_f16, cu_ms,
                     (flop / (cu_ms * 1e-3) / 1e12) if cu_ms else None, via, regs, smem)


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


def gpu_available(*, hopper: bool = False) -> tuple[bool, str]:
    """``(True, "<library>: <device>")`` when the kernels :func:`measure` runs can run here, else
    ``(False, why not)``; never raises.

    The same choice as :func:`synth.kernel.gpu_ready`, which :func:`measure`'s runner loads through:
    ``SYNTH_GPU_BACKEND`` when set, else CUDA Python (``cuda.bindings``) and then pycuda, the first that
    imports and sees a GPU. With ``hopper`` (``tma_wgmma`` candidates) GPU 0 must be an sm_90 device seen by
    CUDA Python (:func:`synth.emit.sm90.runner.gpu_status`: the sm_90a kernel needs its tensor maps).
    """
    if hopper:
        # here, not at the top: synth run loads the light runtime when it runs a folder
        from .emit.sm90.runner import gpu_status

        ok, why = gpu_status()
        return (True, f"cuda-python: {why}") if ok else (False, why)
    # here, not at the top: synth run loads the light runtime when it runs a folder
    from .kernel import gpu_ready

    return gpu_ready()


def measure(result: SearchResult, folders: Sequence[str], *, repeats: int = 25,
            progress: Optional[Progress] = None, runner=None) -> SearchResult:
    """Time each written folder's kernel on the GPU and rank the candidates by measurement.

    ``runner(folder, repeats=...)`` (default :func:`run_output`, which
    imports CUDA Python or pycuda only when called) compiles the kernel, launches it once as a
    warm-up and correctness check against numpy, then times ``repeats`` launches
    with CUDA events and reports the median, as Triton's ``do_bench`` does.
    Returns ``result`` with ``measured`` (one :class:`Measurement` per folder,
    with the model's prediction, so ``model_error`` says how far the model was
    off) and ``candidates`` re-ordered fastest measured first (a kernel whose
    result is wrong goes last).
    """
    # here, not at the top: synth run (this module) loads only the light runtime
    from .search.results import Measurement, progress_or_silent

    if runner is None:
        runner = run_output
    say = progress_or_silent(progress)
    out = []
    for i, (c, folder) in enumerate(zip(result.candidates, folders)):
        say("measure", i, len(folders))
        rep = runner(folder, repeats=repeats)
        out.append(Measurement(c.label, rep.ms, rep.tflops, rep.ok, predicted_us=c.time_us, repeats=repeats))
    say("measure", len(folders), len(folders))
    timed = {m.label: m for m in out}
    order = sorted(result.candidates, key=lambda c: (c.label not in timed, not timed[c.label].ok if c.label in timed
                                                     else True, timed[c.label].ms if c.label in timed else 0.0))
    return replace(result, measured=tuple(sorted(out, key=lambda m: (not m.ok, m.ms))),
                   candidates=tuple(order), ranked_by="measurement")


__all__ = ["RunReport", "run_output", "cublas_ms", "NO_GPU_FIX", "gpu_available", "measure"]

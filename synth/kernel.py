"""An emitted GEMM as a Python callable: ``synth.kernel.load(OUT)(A, B)`` (docs/api.md).

Input: an output folder of a ``kind: gemm`` problem (``problem.yaml``,
``schedule.json``, ``program.json`` and ``kernel.cu``). Output: a
:class:`Kernel` computing ``alpha * A @ B.T + beta * C`` on numpy arrays with
the kernel in the folder:

* on a machine with an NVIDIA GPU and pycuda (``pip install '.[gpu]'``), on the
  GPU (``backend="cuda"``);
* otherwise on the CPU emulator of :mod:`synth.emit.emulate`
  (``backend="emulator"``: g++ needed, slow: meant for small shapes, where it
  also reports early reads, hazards and bank conflicts).

Both backends take the same arguments and make the same checks, in Python
before the launch (:class:`KernelError`, a :class:`~synth.errors.SynthError`
and a ``ValueError``): A is ``M x K`` float16, B is ``N x K`` float16 (the
"TN" layout: C = A B^T), C (optional, needed when ``beta != 0``) ``M x N``
float32; ``K`` must give the kernel's k-tile count (``ceil(K / BK) ==
SYNTH_KTILES``, the trip count the waits were proved for) and be a multiple
of 8; ``M`` and ``N`` are free (1 .. 2^31 - 1). The kernel's own run-time
preconditions (``*status``) are reported the same way. Inputs are never
modified; the result is a new ``M x N`` float32 array.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .emit.launch import Launch, gemm_launch
from .errors import Loc, SynthError

BACKENDS = ("auto", "cuda", "emulator")
INT_MAX = 2**31 - 1
"""M, N and K are passed as C ``int``."""


class KernelError(SynthError, ValueError):
    """Arguments the kernel cannot take, or a launch the kernel refused."""


@dataclass(frozen=True)
class KernelFacts:
    """What kernel.cu states about itself (its ``#define SYNTH_*`` lines)."""

    name: str
    BM: int
    BN: int
    BK: int
    ktiles: int
    threads: int
    smem_bytes: int
    split_k: int = 1
    """``SYNTH_SPLIT_K``: the launch's ``gridDim.z`` (1 for a kernel.cu that does not state it)."""
    min_ktiles: int = 1
    """``SYNTH_MIN_KTILES``: the fewest k-tiles a split of a symbolic-trip-count kernel was proved for."""
    stream_k: bool = False
    """``SYNTH_STREAM_K 1``: a stream-K kernel (a 1-D grid of any size up to the k-tile iterations)."""

    def k_allowed(self, K: int) -> bool:
        """K gives this kernel's k-tile count (each split's, with split-K) and 16-byte rows (``ktiles == 0``:
        a kernel proved for a symbolic trip count takes every K whose splits get SYNTH_MIN_KTILES k-tiles)."""
        T = -(-K // self.BK)
        if self.ktiles == 0:
            return K >= 1 and K % 8 == 0 and T >= self.min_ktiles * self.split_k
        return K >= 1 and K % 8 == 0 and T == self.ktiles * self.split_k

    def launch(self, M: int, N: int, K: int, ctas: int) -> Launch:
        """The :class:`Launch` of this kernel on an ``M x N x K`` product; ``ctas`` is a stream-K kernel's grid
        (clamped to 1 .. its k-tile iterations; ignored by the others, whose grid is the tile grid)."""
        iters = -(-N // self.BN) * -(-M // self.BM) * -(-K // self.BK)
        return gemm_launch(M, N, self.BM, self.BN, split_k=self.split_k, stream_k=self.stream_k,
                           ctas=max(1, min(ctas, iters)))


def device_ctas(drv, dev, fn, facts: KernelFacts) -> int:
    """One wave of ``facts``' kernel on pycuda device ``dev`` (``fn`` its function): SMs x resident CTAs
    (:func:`synth.emit.streamk.resident_ctas` with the device's limits and ``fn``'s registers)."""
    from .emit.streamk import resident_ctas

    a = drv.device_attribute
    per_sm = resident_ctas(facts.threads, fn.get_attribute(drv.function_attribute.NUM_REGS), facts.smem_bytes,
                           sm_smem=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
                           sm_registers=dev.get_attribute(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
                           sm_threads=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR),
                           sm_ctas=dev.get_attribute(a.MAX_BLOCKS_PER_MULTIPROCESSOR)
                           if hasattr(a, "MAX_BLOCKS_PER_MULTIPROCESSOR") else 16)
    return dev.get_attribute(a.MULTIPROCESSOR_COUNT) * per_sm


def check_epilogue(loc: Loc, C, M: int, N: int, alpha, beta) -> Optional[np.ndarray]:
    """C (contiguous) or None after checking ``alpha``, ``beta`` and C's shape; raises :class:`KernelError`."""
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not np.isfinite(float(v)):
            raise KernelError(loc, f"{name} = {v} is not finite", f"pass a finite {name}")
    if C is None:
        if float(beta) != 0.0:
            raise KernelError(loc, f"beta = {beta} needs C", "pass C (M x N float32) or beta=0")
        return None
    if not isinstance(C, np.ndarray) or C.dtype != np.float32 or C.shape != (M, N):
        got = f"{C.shape} {C.dtype}" if isinstance(C, np.ndarray) else type(C).__name__
        raise KernelError(loc, f"C must be an {M} x {N} float32 array, got {got}",
                          "pass np.asarray(C, dtype=np.float32) of shape (M, N)")
    return np.ascontiguousarray(C)


class Kernel:
    """``kernel(A, B, C=None, *, alpha=1.0, beta=0.0) -> numpy.ndarray`` (see the module docstring)."""

    def __init__(self, path: str, source: str, facts: KernelFacts, backend: str) -> None:
        self.path = path
        self.source = source
        self.facts = facts
        self.backend = backend
        self._gpu = None
        self.last_run = None
        """The emulator's :class:`~synth.emit.emulate.EmuRun` of the last call (emulator backend)."""

    def __repr__(self) -> str:
        f = self.facts
        return (f"<synth.kernel.Kernel {f.name}: {f.BM}x{f.BN}x{f.BK} tiles, K in {self.k_range()}, "
                f"backend {self.backend}>")

    def k_range(self) -> str:
        """The values of K this kernel takes, as text."""
        f = self.facts
        if f.ktiles == 0:
            least = f.min_ktiles * f.split_k
            if least <= 1:
                return "any multiple of 8"
            lo = (least - 1) * f.BK + 1
            return f"multiples of 8 from {lo + (-lo) % 8}"
        lo = (f.ktiles * f.split_k - 1) * f.BK + 1
        lo += (-lo) % 8
        return f"{lo} .. {f.ktiles * f.split_k * f.BK} (multiples of 8)"

    def check(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0):
        """The checked, contiguous arrays ``(A, B, C or None)`` and ``(M, N, K)``; raises :class:`KernelError`."""
        loc = Loc(self.path)
        for name, x in (("A", A), ("B", B)):
            if not isinstance(x, np.ndarray):
                raise KernelError(loc, f"{name} is a {type(x).__name__}, not a numpy array",
                                  f"pass numpy arrays, e.g. np.asarray({name}, dtype=np.float16)")
            if x.dtype != np.float16:
                raise KernelError(loc, f"{name} has dtype {x.dtype}; the kernel reads float16",
                                  f"convert it: {name}.astype(np.float16)")
            if x.ndim != 2:
                raise KernelError(loc, f"{name} has {x.ndim} dimensions; the kernel takes a matrix", "pass a 2-D array")
        M, K = A.shape
        N, KB = B.shape
        if KB != K:
            raise KernelError(loc, f"A is {M} x {K} but B is {N} x {KB}: B must be N x K (C = A @ B.T)",
                              "pass B transposed (np.ascontiguousarray(B.T)) if it is K x N")
        if not (1 <= M <= INT_MAX and 1 <= N <= INT_MAX):
            raise KernelError(loc, f"M = {M}, N = {N}: both must be in 1 .. {INT_MAX}", "pass non-empty matrices")
        if not self.facts.k_allowed(K):
            f = self.facts
            proved = (f"{f.ktiles} k-tiles" if f.ktiles else f"at least {f.min_ktiles} k-tile(s)") + f" of {f.BK}"
            split = f" in each of {f.split_k} splits of K" if f.split_k > 1 else ""
            raise KernelError(loc, f"K = {K}: this kernel was proved for {proved}{split}, so K must be: "
                              f"{self.k_range()}",
                              "solve a kind: gemm problem with this K and load its folder")
        C = check_epilogue(loc, C, M, N, alpha, beta)
        return np.ascontiguousarray(A), np.ascontiguousarray(B), C, (M, N, K)

    def __call__(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        A, B, C, (M, N, K) = self.check(A, B, C, alpha=alpha, beta=beta)
        # the kernel stores C rows in 16-byte vectors (ldc % 4 == 0): pad the rows, hand back M x N
        ldc = N + (-N) % 4
        if C is not None and ldc != N:
            C = np.pad(C, ((0, 0), (0, ldc - N)))
        if self.backend == "cuda":
            out, status = self._run_gpu(A, B, C, M, N, K, ldc, float(alpha), float(beta))
        else:
            out, status = self._run_emulator(A, B, C, M, N, K, ldc, float(alpha), float(beta))
        out = np.ascontiguousarray(out[:, :N])
        if status:
            from .emit.cuda import STATUS_CODES

            why = "; ".join(w for code, (_, w) in STATUS_CODES.items() if status & code)
            raise KernelError(Loc(self.path), f"the kernel refused the launch (status {status}): {why}",
                              "pass arrays the kernel's preconditions allow")
        return out

    def _run_emulator(self, A, B, C, M, N, K, ldc, alpha, beta):
        from .emit.emulate import GEMM_KERNEL, STREAM_K_CTAS, Buf, compile_and_run

        out = np.zeros((M, ldc), np.float32)
        status = np.zeros(1, np.int32)
        args = [Buf("A", A), Buf("B", B), Buf("C", out, out=True), Buf("C_in", C) if C is not None else None,
                M, N, K, K, K, ldc, alpha, beta]
        launch = self.facts.launch(M, N, K, STREAM_K_CTAS)
        args += launch.buffers(lambda n: Buf("workspace", np.full(n, np.nan, np.float32)),
                               lambda n: Buf("tickets", np.zeros(n, np.uint32)))
        args.append(Buf("status", status, out=True))
        run = compile_and_run(self.source, GEMM_KERNEL, args, grid=launch.grid,
                              block=(self.facts.threads, 1, 1), smem_bytes=self.facts.smem_bytes)
        self.last_run = run
        if run.errors:
            raise KernelError(Loc(self.path), "the emulator reports: " + "; ".join(run.errors[:3]),
                              "run 'synth verify' on the folder; see docs/emulator.md")
        return run.outputs["C"], int(run.outputs["status"][0])

    def _run_gpu(self, A, B, C, M, N, K, ldc, alpha, beta):
        drv, fn, ctx = self._gpu_function()
        ctx.push()
        try:
            dA, dB = drv.to_device(A), drv.to_device(B)
            out = np.zeros((M, ldc), np.float32)
            dC = drv.mem_alloc(out.nbytes)
            dCin = drv.to_device(C) if C is not None else np.intp(0)
            status = np.zeros(1, np.int32)
            dS = drv.to_device(status)
            launch = self.facts.launch(M, N, K, device_ctas(drv, drv.Context.get_device(), fn, self.facts))
            extra = launch.buffers(lambda n: drv.mem_alloc(4 * n), lambda n: drv.to_device(np.zeros(n, np.uint32)))
            fn(dA, dB, dC, dCin, np.int32(M), np.int32(N), np.int32(K), np.int32(K), np.int32(K), np.int32(ldc),
               np.float32(alpha), np.float32(beta), *extra, dS, block=(self.facts.threads, 1, 1),
               grid=launch.grid, shared=self.facts.smem_bytes)
            drv.Context.synchronize()
            drv.memcpy_dtoh(out, dC)
            drv.memcpy_dtoh(status, dS)
        finally:
            ctx.pop()
        return out, int(status[0])

    def _gpu_function(self):
        if self._gpu is None:
            import pycuda.driver as drv  # noqa: PLC0415 - optional dependency
            from pycuda.compiler import compile as nvcc_compile  # noqa: PLC0415

            drv.init()
            dev = drv.Device(0)
            ctx = dev.make_context()
            try:
                major, minor = dev.compute_capability()
                try:
                    cubin = nvcc_compile(self.source, no_extern_c=True, arch=f"sm_{major}{minor}",
                                         options=["-std=c++17", "-O3"])
                except Exception as exc:
                    raise KernelError(Loc(self.path), f"nvcc failed on kernel.cu: {exc}",
                                      "check the CUDA toolkit version") from None
                fn = drv.module_from_buffer(cubin).get_function("synth_gemm")
                if self.facts.smem_bytes > 48 * 1024:
                    fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, self.facts.smem_bytes)
            finally:
                ctx.pop()
            self._gpu = (drv, fn, ctx)
        return self._gpu


def facts_of(source: str, path: str = "kernel.cu") -> KernelFacts:
    """The :class:`KernelFacts` of a kernel.cu text; raises :class:`KernelError` when a fact is missing."""
    from .emit.emulate import kernel_macros

    m = kernel_macros(source)
    need = ("BM", "BN", "BK", "KTILES", "THREADS", "SMEM_BYTES")
    missing = [k for k in need if k not in m]
    if missing:
        raise KernelError(Loc(path), f"kernel.cu does not state {', '.join('SYNTH_' + k for k in missing)}",
                          "emit it with 'synth emit OUT --target cuda'")
    return KernelFacts(os.path.basename(os.path.dirname(os.path.abspath(path))), m["BM"], m["BN"], m["BK"],
                       m["KTILES"], m["THREADS"], m["SMEM_BYTES"], m.get("SPLIT_K", 1), m.get("MIN_KTILES", 1),
                       m.get("STREAM_K", 0) == 1)


def gpu_ready() -> tuple[bool, str]:
    """(True, device name) when pycuda imports and sees a GPU, else (False, why not)."""
    from .search import gpu_available

    return gpu_available()


def load(out: str, *, backend: str = "auto") -> Kernel:
    """The kernel of output folder ``out`` as a callable (``backend``: ``auto``, ``cuda`` or ``emulator``).

    ``auto`` picks ``cuda`` when :func:`gpu_ready`, else ``emulator``. The
    folder must be one ``synth solve`` wrote for a ``kind: gemm`` problem; its
    kernel.cu must state the tile sizes its program was lowered with
    (:func:`synth.emit.cuda.kernel_info`), so a kernel.cu from another folder
    or configuration is refused. Raises :class:`SynthError`.
    """
    from .emit.cuda import kernel_info
    from .hopper.problem import HopperGemm
    from .pipeline import load_output

    if backend not in BACKENDS:
        raise SynthError(None, f"unknown backend {backend!r}", f"use one of {', '.join(BACKENDS)}")
    out = os.fspath(out)
    problem, schedule, program = load_output(out)
    if isinstance(problem, HopperGemm):
        return _load_hopper(out, problem, schedule, program, backend)
    if problem.gemm is None:
        raise SynthError(Loc(problem.path), f"problem '{problem.name}' is not a GEMM; only kind: gemm folders "
                         "have a kernel", "solve a kind: gemm problem")
    path = os.path.join(out, "kernel.cu")
    if not os.path.isfile(path):
        raise SynthError(Loc(out), f"'{out}' has no kernel.cu", f"run 'synth emit {out} --target cuda'")
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    facts = facts_of(source, path)
    info = kernel_info(problem, schedule, program)
    cfg = problem.gemm
    want = {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK, "KTILES": info.ktiles, "THREADS": info.threads,
            "SMEM_BYTES": info.smem_bytes, "SPLIT_K": cfg.split_k, "STREAM_K": int(cfg.stream_k)}
    got = {"BM": facts.BM, "BN": facts.BN, "BK": facts.BK, "KTILES": facts.ktiles, "THREADS": facts.threads,
           "SMEM_BYTES": facts.smem_bytes, "SPLIT_K": facts.split_k, "STREAM_K": int(facts.stream_k)}
    diff = [f"SYNTH_{k} {got[k]} (program: {want[k]})" for k in want if got[k] != want[k]]
    if diff:
        raise SynthError(Loc(path), f"kernel.cu does not match the folder's program: {', '.join(diff)}",
                         f"re-emit it with 'synth emit {out} --target cuda'")
    facts = KernelFacts(problem.name, facts.BM, facts.BN, facts.BK, facts.ktiles, facts.threads, facts.smem_bytes,
                        facts.split_k, facts.min_ktiles, facts.stream_k)
    return Kernel(path, source, facts, _backend(backend, gpu_ready, "CUDA GPU", "an NVIDIA GPU"))


def _backend(backend: str, ready, what: str, where: str) -> str:
    """``backend`` with ``auto`` resolved by ``ready()``; SynthError when ``cuda`` is asked for and not ready."""
    if backend == "auto":
        return "cuda" if ready()[0] else "emulator"
    if backend == "cuda":
        ok, why = ready()
        if not ok:
            raise SynthError(None, f"no {what} available: {why}",
                             f"run on a machine with {where} and pip install '.[gpu]', or use backend='emulator'")
    return backend


class HopperKernel:
    """The sm_90a kernel of a Hopper folder: ``kernel(A, B, C=None, *, alpha=1.0, beta=0.0)``.

    A is ``M x K`` and B ``N x K`` (C = A B^T): float16 for ``dtype: f16``; for ``bf16``, uint16
    arrays are bfloat16 bit patterns and float arrays are rounded to bfloat16 (nearest even). Any
    ``K >= 1`` that is a multiple of 8 (TMA's 16-byte row stride); M, N free. The ``emulator``
    backend runs it on the CPU emulator of :mod:`synth.emit.sm90.emulate` (TMA boxes land as late
    as their barriers allow, wgmma operands are read as late as ``wait_group`` allows: a hang or a
    stale read is a :class:`KernelError`); ``cuda`` launches it on the GPU with tensor maps
    (:func:`synth.emit.sm90.runner.run_gpu`, CUDA Python needed).
    """

    def __init__(self, path: str, source: str, config, backend: str, problem) -> None:
        self.path = path
        self.source = source
        self.config = config
        self.backend = backend
        self.problem = problem
        """The folder's :class:`~synth.hopper.problem.HopperGemm`."""
        self.name = problem.name
        self.last_info: Optional[dict] = None
        """The emulator's report of the last call (emulator backend)."""

    def __repr__(self) -> str:
        c = self.config
        ks = "K any multiple of 8" if c.split_k == 1 else f"split-K {c.split_k}, K a multiple of 8 above {(c.split_k - 1) * c.bk}"
        return (f"<synth.kernel.HopperKernel {self.name}: {c.bm}x{c.bn}x{c.bk} tiles {c.dtype}, {c.stages} stages, "
                f"{ks}, backend {self.backend}>")

    def _operand(self, name: str, x) -> np.ndarray:
        loc = Loc(self.path)
        if not isinstance(x, np.ndarray) or x.ndim != 2:
            raise KernelError(loc, f"{name} must be a 2-D numpy array", f"pass np.asarray({name})")
        if self.config.dtype == "f16":
            if x.dtype != np.float16:
                raise KernelError(loc, f"{name} has dtype {x.dtype}; the kernel reads float16",
                                  f"convert it: {name}.astype(np.float16)")
            return np.ascontiguousarray(x).view(np.uint16)
        from .emit.sm90.emulate import bf16_bits

        if x.dtype == np.uint16:
            return np.ascontiguousarray(x)
        if x.dtype.kind != "f":
            raise KernelError(loc, f"{name} has dtype {x.dtype}; the kernel reads bfloat16",
                              "pass float values (rounded to bfloat16) or uint16 bfloat16 bit patterns")
        return bf16_bits(np.asarray(x, np.float32))

    def __call__(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        loc = Loc(self.path)
        a, b = self._operand("A", A), self._operand("B", B)
        (M, K), (N, KB) = a.shape, b.shape
        if KB != K:
            raise KernelError(loc, f"A is {M} x {K} but B is {N} x {KB}: B must be N x K (C = A @ B.T)",
                              "pass B transposed (np.ascontiguousarray(B.T)) if it is K x N")
        if not (1 <= M <= INT_MAX and 1 <= N <= INT_MAX and 1 <= K <= INT_MAX) or K % 8:
            raise KernelError(loc, f"M = {M}, N = {N}, K = {K}: need non-empty matrices and K a multiple of 8 "
                              "(TMA row strides are multiples of 16 bytes)", "pad K with zeros to a multiple of 8")
        split = self.config.split_k
        if -(-K // self.config.bk) < split:
            raise KernelError(loc, f"K = {K} has {-(-K // self.config.bk)} k-tile(s) of {self.config.bk}; this kernel "
                              f"splits K in {split}, and every split needs one", f"pass K > {(split - 1) * self.config.bk}")
        C = check_epilogue(loc, C, M, N, alpha, beta)
        if self.backend == "cuda":
            from .emit.sm90.runner import run_gpu

            return run_gpu(self.source, self.config, a, b, C, float(alpha), float(beta))
        from .emit.sm90.emulate import EmulatorError, run_emulated

        try:
            out, info = run_emulated(self.source, a, b, C, alpha=float(alpha), beta=float(beta))
        except EmulatorError as e:
            raise KernelError(loc, f"the emulator could not run the kernel: {e}", "see docs/emulator.md") from None
        self.last_info = info
        if info.get("kind") or not info.get("ok", False):
            raise KernelError(loc, f"the emulator reports: {info.get('kind') or 'a hazard'}: {info.get('message', '')}",
                              "run 'synth verify' on the folder; see docs/emulator.md")
        return np.ascontiguousarray(out[:, :N])


def _load_hopper(out: str, problem, choice, program, backend: str) -> HopperKernel:
    from .hopper.flow import kernel_config
    from .emit.sm90.kernel import emit_sm90_kernel

    path = os.path.join(out, "kernel.cu")
    if not os.path.isfile(path):
        raise SynthError(Loc(out), f"'{out}' has no kernel.cu", f"run 'synth emit {out} --target cuda'")
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    cfg = kernel_config(problem, choice)
    if source != emit_sm90_kernel(cfg, program):
        raise SynthError(Loc(path), "kernel.cu is not the kernel synth emits for this folder's proven program "
                         "(edited, or from another folder)", f"re-emit it with 'synth emit {out} --target cuda'")
    from .emit.sm90.runner import gpu_status

    return HopperKernel(path, source, cfg, _backend(backend, gpu_status, "sm_90 GPU", "an H100/H200"), problem)


__all__ = ["load", "Kernel", "HopperKernel", "KernelFacts", "KernelError", "Launch", "device_ctas", "facts_of",
           "gpu_ready", "BACKENDS"]

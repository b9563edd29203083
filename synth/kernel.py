"""An emitted GEMM as a Python callable: ``synth.kernel.load(OUT)(A, B)`` (docs/api.md).

Input: an output folder of a ``kind: gemm`` problem (``problem.yaml``,
``schedule.json``, ``program.json``, ``kernel.cu`` and the folder's sha256 manifest
``.synth-output.json``). Output: a :class:`Kernel` (a :class:`HopperKernel` for a
``mainloop: tma_wgmma`` folder) computing ``alpha * A @ B.T + beta * C`` on numpy arrays
with the kernel in the folder:

* on a machine with an NVIDIA GPU, on the GPU (``backend="cuda"``) through CUDA Python
  (``cuda.bindings``, :mod:`synth.emit.sm90.runner`) or pycuda: ``SYNTH_GPU_BACKEND=cuda-python|pycuda``,
  default the first of the two that imports and sees a GPU (the sm_90a kernel needs CUDA Python's tensor maps);
* otherwise on the CPU emulator of :mod:`synth.emit.emulate` (``backend="emulator"``: g++ needed, slow:
  meant for small shapes, where it also reports early reads, hazards and bank conflicts).

This module is the light runtime: loading a folder and running its kernel import neither OR-Tools,
Z3, cvc5 nor jsonschema (only numpy, PyYAML and synth's own modules; CUDA Python or pycuda when a GPU
is used). What :func:`load` checks is in its docstring.

Both backends take the same arguments and make the same checks, in Python
before the launch (:class:`KernelError`, a :class:`~synth.errors.SynthError`
and a ``ValueError``): A is ``M x K`` float16, B is ``N x K`` float16 (the
"TN" layout: C = A B^T), C (optional, needed when ``beta != 0``) ``M x N``
float32; ``K`` must give the kernel's k-tile count (``ceil(K / BK) ==
SYNTH_KTILES``, the trip count the waits were proved for) and be a multiple
of 8, or be 0; ``M`` and ``N`` are free (1 .. 2^31 - 1). ``K = 0`` (A is
``M x 0``, B ``N x 0``) is a legal, empty product, as in cuBLAS: the host
returns ``alpha * 0 + beta * C`` (zeros without C) and launches nothing, on
every backend and for every kernel (:func:`k_zero_result`); kernel.cu itself
still refuses ``K < 1`` (``SYNTH_ERR_K``, docs/cuda_kernel.md). The kernel's own run-time
preconditions (``*status``) are reported the same way, and so is a NaN in a result
computed from finite inputs whose exact product cannot overflow (:func:`unexplained_nans`).
Inputs are never modified; the result is a new ``M x N`` float32 array.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .emit.launch import INT_MAX, Launch, Param, gemm_launch  # INT_MAX: M, N and K are passed as C ``int``
from .errors import Loc, SynthError
from .lower.hopper_design import design_program
from .lower.hopper_design import design_store_program

BACKENDS = ("auto", "cuda", "emulator")
GPU_LIBRARIES = ("cuda-python", "pycuda")
"""The GPU libraries of the ``cuda`` backend, in the order ``auto`` tries them (``SYNTH_GPU_BACKEND`` picks one)."""
RUNTIME_FILES = ("problem.yaml", "schedule.json", "program.json", "kernel.cu")
"""The files :func:`load` reads; each must be listed in the folder's manifest with its sha256."""
MAX_FILE_BYTES = 16 << 20
"""A folder file larger than this (16 MiB) is refused before it is parsed (problem.yaml: 256 KiB)."""


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
                           ctas=max(1, min(ctas, iters)), threads=self.threads, smem_bytes=self.smem_bytes)


def wave_ctas(facts: KernelFacts, registers: int, limits) -> int:
    """One wave of ``facts``' kernel: SMs x resident CTAs (:func:`synth.emit.streamk.resident_ctas` with
    ``registers`` per thread); ``limits(name)`` answers the device attributes ``MULTIPROCESSOR_COUNT``,
    ``MAX_SHARED_MEMORY_PER_MULTIPROCESSOR``, ``MAX_REGISTERS_PER_MULTIPROCESSOR``,
    ``MAX_THREADS_PER_MULTIPROCESSOR`` and ``MAX_BLOCKS_PER_MULTIPROCESSOR`` (None: 16)."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .emit.streamk import resident_ctas

    ctas = limits("MAX_BLOCKS_PER_MULTIPROCESSOR")
    per_sm = resident_ctas(facts.threads, registers, facts.smem_bytes,
                           sm_smem=limits("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
                           sm_registers=limits("MAX_REGISTERS_PER_MULTIPROCESSOR"),
                           sm_threads=limits("MAX_THREADS_PER_MULTIPROCESSOR"), sm_ctas=16 if ctas is None else ctas)
    return limits("MULTIPROCESSOR_COUNT") * per_sm


def device_ctas(drv, dev, fn, facts: KernelFacts) -> int:
    """:func:`wave_ctas` on pycuda device ``dev`` (``fn`` its function)."""
    a = drv.device_attribute

    def limits(name: str):
        return dev.get_attribute(getattr(a, name)) if hasattr(a, name) else None

    return wave_ctas(facts, fn.get_attribute(drv.function_attribute.NUM_REGS), limits)


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


def k_zero_result(C: Optional[np.ndarray], M: int, N: int, alpha: float, beta: float) -> np.ndarray:
    """The ``M x N`` float32 result of a product with ``K = 0``: ``alpha * 0 + beta * C`` in float32 (as the
    kernels' epilogue computes it with zero accumulators; zeros when C is None). ``C`` is checked already
    (:func:`check_epilogue`); it is not modified."""
    zero = np.float32(alpha) * np.float32(0.0)
    if C is None:
        return np.full((M, N), zero, np.float32)
    return (zero + np.float32(beta) * C).astype(np.float32, copy=False)


def _k_zero_prepare(path: str) -> KernelError:
    return KernelError(Loc(path), "K = 0: the product is empty and launches no kernel, so there is nothing to "
                       "prepare or time", "call the kernel itself (it returns alpha * 0 + beta * C), or use K >= 8")


def unexplained_nans(out: np.ndarray, A: np.ndarray, B: np.ndarray, C, alpha: float, beta: float) -> int:
    """How many NaNs of ``out`` (an ``alpha A B^T + beta C`` result) no arithmetic explains: 0 unless every
    input is finite and ``|alpha| K max|A| max|B| + |beta| max|C|`` is below float32's largest value (so no
    partial sum can overflow to inf and no inf - inf can appear), else the NaN count: a kernel bug."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .emit.emulate import nan_from_finite

    return nan_from_finite(out, A, B, C, alpha, beta)


def _raise_status(path: str, status: int) -> None:
    if status:
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.cuda import status_reasons

        why = status_reasons(status)
        raise KernelError(Loc(path), f"the kernel refused the launch (status {status}): {why}",
                          "pass arrays the kernel's preconditions allow")


def _raise_nans(path: str, out, A, B, C, alpha, beta, where: str) -> None:
    bad = unexplained_nans(out, A, B, C, alpha, beta)
    if bad:
        raise KernelError(Loc(path), f"{where} returned {bad} NaN(s) from finite inputs whose product cannot "
                          "overflow: the kernel computed garbage (an edited or broken kernel.cu)",
                          "re-run 'synth solve' for this problem; see docs/emulator.md")


def gpu_library() -> str:
    """The GPU library the ``cuda`` backend uses: ``SYNTH_GPU_BACKEND`` when set (``cuda-python`` or
    ``pycuda``), else the first of :data:`GPU_LIBRARIES` that imports and sees a GPU. SynthError when the
    variable names another library or no library sees a GPU (the message says why for each)."""
    return _pick_library()[0]


def _pick_library() -> tuple[str, str]:
    """:func:`gpu_library`'s choice and what its probe said (the device name)."""
    want = os.environ.get("SYNTH_GPU_BACKEND", "").strip()
    if want and want not in GPU_LIBRARIES:
        raise SynthError(None, f"SYNTH_GPU_BACKEND={want!r} is not a GPU library synth knows",
                         f"set it to one of {', '.join(GPU_LIBRARIES)}, or unset it")
    why = []
    for lib in ([want] if want else GPU_LIBRARIES):
        ok, msg = _library_status(lib)
        if ok:
            return lib, msg
        why.append(f"{lib}: {msg}")
    raise SynthError(None, f"no CUDA GPU available: {'; '.join(why)}",
                     "run on a machine with an NVIDIA GPU and pip install '.[gpu]', or use backend='emulator'")


def _library_status(lib: str) -> tuple[bool, str]:
    if lib == "cuda-python":
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.sm90.runner import device_status

        return device_status()
    try:
        import pycuda.driver as drv  # noqa: PLC0415 - optional dependency
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken CUDA install
        return False, f"pycuda is not importable ({type(exc).__name__}: {exc})"
    try:
        drv.init()
        if drv.Device.count() < 1:
            return False, "the CUDA driver sees no device"
        return True, drv.Device(0).name()
    except Exception as exc:  # noqa: BLE001 - pycuda raises its own error types
        return False, f"CUDA is not usable ({type(exc).__name__}: {exc})"


def gpu_ready() -> tuple[bool, str]:
    """``(True, "<library>: <device name>")`` when :func:`gpu_library` finds a GPU, else ``(False, why not)``."""
    try:
        lib, name = _pick_library()  # one probe: the library's status is not asked again
    except SynthError as e:
        return False, e.msg
    return True, f"{lib}: {name}"


class Prepared:
    """A launch made ready on the GPU (operands uploaded once): :meth:`run` it, :meth:`fetch` its result,
    :meth:`time_ms` it; :meth:`close` frees its buffers. Made by :meth:`Kernel.prepare` and
    :meth:`HopperKernel.prepare` (both GPU libraries)."""

    def __init__(self, run, fetch, time_ms, close, registers: Optional[int], device: str, image: str) -> None:
        self.run, self.fetch, self.time_ms, self.close = run, fetch, time_ms, close
        self.registers = registers
        """Registers per thread of the launched function."""
        self.device = device
        self.image = image
        """Where the function came from (a precompiled image's label, ``nvcc -arch=...``, ``pycuda``)."""

    def __enter__(self) -> "Prepared":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Kernel:
    """``kernel(A, B, C=None, *, alpha=1.0, beta=0.0) -> numpy.ndarray`` (see the module docstring)."""

    def __init__(self, path: str, source: str, facts: KernelFacts, backend: str,
                 images: Sequence[tuple[str, bytes]] = (), problem=None) -> None:
        self.path = path
        self.source = source
        self.facts = facts
        self.backend = backend
        self.problem = problem
        """The folder's :class:`~synth.problem.Problem` (its ``gemm`` config: the solved shape), when loaded."""
        self.images = tuple(images)
        """Precompiled ``(label, cubin or PTX)`` of kernel.cu, tried before nvcc (CUDA Python only)."""
        self._gpu = None
        """pycuda's ``(driver, function, context)`` once compiled."""
        self._cp = None
        """CUDA Python's ``(CudaDevice, function)`` once loaded."""
        self.last_run = None
        """The emulator's :class:`~synth.emit.emulate.EmuRun` of the last call (emulator backend)."""

    def __repr__(self) -> str:
        f = self.facts
        return (f"<synth.kernel.Kernel {f.name}: {f.BM}x{f.BN}x{f.BK} tiles, K in {self.k_range()}, "
                f"backend {self.backend}>")

    def k_range(self) -> str:
        """The values of K this kernel takes, as text (0 too: an empty product, computed on the host)."""
        f = self.facts
        if f.ktiles == 0:
            least = f.min_ktiles * f.split_k
            if least <= 1:
                return "any multiple of 8 (0: an empty product)"
            lo = (least - 1) * f.BK + 1
            return f"multiples of 8 from {lo + (-lo) % 8}, or 0 (an empty product)"
        lo = (f.ktiles * f.split_k - 1) * f.BK + 1
        lo += (-lo) % 8
        return f"{lo} .. {f.ktiles * f.split_k * f.BK} (multiples of 8), or 0 (an empty product)"

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
        if K != 0 and not self.facts.k_allowed(K):  # K = 0: an empty product, computed on the host
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
        if K == 0:  # nothing to multiply: no launch (kernel.cu refuses K < 1), on every backend
            return k_zero_result(C, M, N, float(alpha), float(beta))
        if self.backend == "cuda":
            with self.prepare(A, B, C, alpha=alpha, beta=beta) as job:
                job.run()
                out, status = job.fetch()
            where = "the GPU"
        else:
            out, status = self._run_emulator(A, B, C, M, N, K, float(alpha), float(beta))
            where = "the emulator"
        _raise_status(self.path, status)
        _raise_nans(self.path, out, A, B, C, float(alpha), float(beta), where)
        return out

    @staticmethod
    def _ldc(N: int) -> int:
        return N + (-N) % 4  # the kernel stores C rows in 16-byte vectors: pad the rows, hand back M x N

    def _run_emulator(self, A, B, C, M, N, K, alpha, beta):
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.emulate import GEMM_KERNEL, STREAM_K_CTAS, Buf, compile_and_run

        ldc = self._ldc(N)
        if C is not None and ldc != N:
            C = np.pad(C, ((0, 0), (0, ldc - N)))
        out = np.zeros((M, ldc), np.float32)
        status = np.zeros(1, np.int32)
        launch = self.facts.launch(M, N, K, STREAM_K_CTAS)
        extra = launch.buffers(lambda n: Buf("workspace", np.full(n, np.nan, np.float32)),
                               lambda n: Buf("tickets", np.zeros(n, np.uint32)))
        params = launch.params(Buf("A", A), Buf("B", B), Buf("C", out, out=True),
                               Buf("C_in", C) if C is not None else None, M, N, K, ldc, alpha, beta, extra,
                               Buf("status", status, out=True))
        run = compile_and_run(self.source, GEMM_KERNEL, [p.value for p in params], grid=launch.grid,
                              block=launch.block, smem_bytes=launch.smem_bytes)
        self.last_run = run
        if run.errors:
            raise KernelError(Loc(self.path), "the emulator reports: " + "; ".join(run.errors[:3]),
                              "run 'synth verify' on the folder; see docs/emulator.md")
        return np.ascontiguousarray(run.outputs["C"][:, :N]), int(run.outputs["status"][0])

    def prepare(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0) -> Prepared:
        """The launch of ``self(A, B, C, alpha=, beta=)`` made ready on the GPU (``cuda`` backend's library,
        :func:`gpu_library`): ``fetch()`` gives ``(M x N result, status)``. Raises :class:`KernelError` for
        bad arguments and for ``K = 0`` (no launch to prepare), SynthError without a GPU."""
        A, B, C, (M, N, K) = self.check(A, B, C, alpha=alpha, beta=beta)
        if K == 0:
            raise _k_zero_prepare(self.path)
        ldc = self._ldc(N)
        if C is not None and ldc != N:
            C = np.pad(C, ((0, 0), (0, ldc - N)))
        if self._gpu is None and self._cp is None:
            lib = gpu_library()
            if lib == "pycuda":
                self._pycuda_function()
            else:
                self._cuda_python_function()
        if self._gpu is not None:
            return self._prepare_pycuda(A, B, C, M, N, K, ldc, float(alpha), float(beta))
        return self._prepare_cuda_python(A, B, C, M, N, K, ldc, float(alpha), float(beta))

    def _prepare_cuda_python(self, A, B, C, M, N, K, ldc, alpha, beta) -> Prepared:
        dev, fn = self._cp
        bufs: list[int] = []

        def keep(p: int) -> int:
            bufs.append(p)
            return p

        dA, dB = keep(dev.upload(A)), keep(dev.upload(B))
        out = np.zeros((M, ldc), np.float32)
        dC = keep(dev.alloc(out.nbytes))
        dCin = keep(dev.upload(C)) if C is not None else None
        status = np.zeros(1, np.int32)
        dS = keep(dev.upload(status))
        launch = self.facts.launch(M, N, K, wave_ctas(self.facts, dev.registers(fn), _cp_limits(dev)))
        extra = launch.buffers(lambda n: keep(dev.alloc(4 * n)), lambda n: keep(dev.upload(np.zeros(n, np.uint32))))
        params = launch.params(dA, dB, dC, dCin, M, N, K, ldc, alpha, beta, extra, dS)

        def run():
            dev.launch(fn, launch.grid, launch.block, launch.smem_bytes, params)

        def fetch():
            dev.synchronize()
            dev.download(out, dC)
            dev.download(status, dS)
            return out[:, :N].copy(), int(status[0])  # a copy: the next fetch reuses ``out``

        def close():
            while bufs:
                dev.release(bufs.pop())

        return Prepared(run, fetch, lambda repeats, before=None: dev.time_ms(run, repeats, before), close,
                        dev.registers(fn), dev.name, dev.loaded_from.get(int(fn), "?"))

    def _cuda_python_function(self):
        if self._cp is None:
            # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
            from .emit.sm90.runner import CudaDevice, GpuError

            try:
                dev = CudaDevice()
                fn = dev.function(self.source, "synth_gemm", self.facts.smem_bytes, images=self.images)
            except GpuError as exc:
                raise KernelError(Loc(self.path), f"the GPU could not load kernel.cu: {exc}",
                                  "check the CUDA toolkit and driver versions (docs/gpu.md)") from None
            self._cp = (dev, fn)
        return self._cp

    def _prepare_pycuda(self, A, B, C, M, N, K, ldc, alpha, beta) -> Prepared:
        drv, fn, ctx = self._gpu
        ctx.push()
        try:
            dA, dB = drv.to_device(A), drv.to_device(B)
            out = np.zeros((M, ldc), np.float32)
            dC = drv.mem_alloc(out.nbytes)
            dCin = drv.to_device(C) if C is not None else None
            status = np.zeros(1, np.int32)
            dS = drv.to_device(status)
            launch = self.facts.launch(M, N, K, device_ctas(drv, drv.Context.get_device(), fn, self.facts))
            extra = launch.buffers(lambda n: drv.mem_alloc(4 * n), lambda n: drv.to_device(np.zeros(n, np.uint32)))
            conv = {"ptr": lambda v: np.intp(0) if v is None else v, "i32": np.int32, "f32": np.float32}
            args = [conv[p.kind](p.value) for p in launch.params(dA, dB, dC, dCin, M, N, K, ldc, alpha, beta,
                                                                 extra, dS)]
            regs = fn.get_attribute(drv.function_attribute.NUM_REGS)
            device = drv.Context.get_device().name()
        finally:
            ctx.pop()

        def run():
            ctx.push()
            try:
                fn(*args, block=launch.block, grid=launch.grid, shared=launch.smem_bytes)
            finally:
                ctx.pop()

        def fetch():
            ctx.push()
            try:
                drv.Context.synchronize()
                drv.memcpy_dtoh(out, dC)
                drv.memcpy_dtoh(status, dS)
            finally:
                ctx.pop()
            return out[:, :N].copy(), int(status[0])

        def time_ms(repeats: int, before=None):
            times = []
            ctx.push()
            try:
                start, stop = drv.Event(), drv.Event()
                for _ in range(repeats):
                    if before is not None:
                        before()
                    start.record()
                    fn(*args, block=launch.block, grid=launch.grid, shared=launch.smem_bytes)
                    stop.record()
                    stop.synchronize()
                    times.append(stop.time_since(start))
            finally:
                ctx.pop()
            return times

        return Prepared(run, fetch, time_ms, lambda: None, regs, device, "pycuda (nvcc)")

    def _pycuda_function(self):
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


def _cp_limits(dev):
    def limits(name: str):
        try:
            return dev.attribute(name)
        except Exception:  # noqa: BLE001 - an attribute this driver does not know
            return None

    return limits


def facts_of(source: str, path: str = "kernel.cu") -> KernelFacts:
    """The :class:`KernelFacts` of a kernel.cu text; raises :class:`KernelError` when a fact is missing."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
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


def read_folder(out: str, names: Sequence[str] = RUNTIME_FILES) -> dict[str, bytes]:
    """The bytes of ``names`` (default :data:`RUNTIME_FILES`) in output folder ``out``, each checked against the
    folder's sha256 manifest (``.synth-output.json``, :mod:`synth.outdir`): a missing file, one not in the
    manifest, changed since synth wrote it, not a regular file or larger than :data:`MAX_FILE_BYTES` is a
    SynthError naming it."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .outdir import MARKER, read_marker
    from .readfile import read_regular_bytes

    loc = Loc(out)
    if not os.path.isdir(out):
        raise SynthError(loc, f"'{out}' is not a folder", "pass a folder written by 'synth solve'")
    for name in names:
        if not os.path.lexists(os.path.join(out, name)):
            fix = (f"run 'synth emit {out} --target cuda'" if name == "kernel.cu"
                   else "pass a folder written by 'synth solve'")
            raise SynthError(loc, f"'{out}' has no {name}", fix)
    listing = read_marker(out)
    if listing is None:
        raise SynthError(Loc(os.path.join(out, MARKER)), f"'{out}' has no valid {MARKER}: synth did not write "
                         "this folder, so nothing says its files are the ones synth proved",
                         "load a folder written by 'synth solve' (or re-run it on the problem)")
    files = {}
    for name in names:
        path = os.path.join(out, name)
        limit = (1 << 18) if name == "problem.yaml" else MAX_FILE_BYTES
        data = read_regular_bytes(path, limit, name, follow=False,
                                  fix=f"restore {name} as 'synth solve' wrote it, or re-run 'synth solve'")
        want = listing.get(name)
        if want is None:
            raise SynthError(Loc(path), f"{name} is not listed in {MARKER}: synth did not write it",
                             "re-run 'synth solve' on the problem")
        if hashlib.sha256(data).hexdigest() != want:
            raise SynthError(Loc(path), f"{name} changed since synth wrote it (its sha256 is not the one {MARKER} "
                             "records); an edited file is never loaded: the waits are proved only for the texts "
                             "synth wrote", f"restore {name}, or re-run 'synth solve' on the problem "
                             "('synth verify' proves an edited program.json on its own)")
        files[name] = data
    return files


def _problem_of(out: str, files: dict[str, bytes]):
    """The folder's problem: problem.yaml parsed by the hand-written GEMM checks (:mod:`synth.gemm_doc`;
    the manifest vouches that ``synth solve`` validated this very text against the JSON Schema)."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .gemm_doc import GEMM_KEYS, problem_from_gemm_doc
    from .readfile import decode_utf8
    from .yamlnodes import check_keys, read_yaml_text

    path = os.path.join(out, "problem.yaml")
    doc = read_yaml_text(decode_utf8(files["problem.yaml"], path, "problem.yaml"), path)
    if doc.get("kind") != "gemm":
        raise SynthError(Loc(path), f"problem '{doc.get('name', '?')}' is not a GEMM; only kind: gemm folders "
                         "have a kernel", "solve a kind: gemm problem")
    check_keys(doc, GEMM_KEYS, "a gemm problem")
    return problem_from_gemm_doc(doc, path)


def _json(out: str, files: dict[str, bytes], name: str):
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .readfile import load_json

    return load_json(files[name], MAX_FILE_BYTES, name, path=os.path.join(out, name))


def load(out: str, *, backend: str = "auto", images: Sequence[tuple[str, bytes]] = ()):
    """The kernel of output folder ``out`` as a callable (``backend``: ``auto``, ``cuda`` or ``emulator``).

    A ``kind: attention`` folder gives an :class:`~synth.emit.sm90.attention_runtime.AttentionKernel`
    (``kernel(q, k, v, *, causal=None, scale=None) -> o``, docs/api.md "An attention folder"): its files are read
    against the manifest as below and kernel.cu's head dim, tile, mask and dtype checked against problem.yaml;
    that kernel.cu is the proven program's is left to the manifest (``synth verify OUT`` re-emits it: the solver's
    model is not loaded here).

    ``auto`` picks ``cuda`` when :func:`gpu_ready` (a Hopper folder: an sm_90 GPU and CUDA Python), else
    ``emulator``. ``images``: precompiled ``(label, cubin or PTX)`` of the folder's kernel.cu, tried
    before nvcc by the CUDA Python library (the caller vouches that they were built from this kernel.cu).

    Checked at load, with no solver (docs/api.md): every file read (problem.yaml, schedule.json,
    program.json, kernel.cu) is listed in the folder's manifest ``.synth-output.json`` with an unchanged
    sha256 (:func:`read_folder`: synth proved and wrote exactly these texts); problem.yaml is a valid
    ``kind: gemm`` problem; schedule.json and program.json read back for it; and kernel.cu is byte for
    byte the kernel synth emits from them. Left to the manifest: that program.json is the proven lowering
    of schedule.json (``synth verify OUT`` re-proves it with Z3). Raises :class:`SynthError`.
    """
    if backend not in BACKENDS:
        raise SynthError(None, f"unknown backend {backend!r}", f"use one of {', '.join(BACKENDS)}")
    out = os.fspath(out)
    for name in ("problem.yaml", "schedule.json", "program.json"):  # every output folder has these
        if not os.path.lexists(os.path.join(out, name)):
            raise SynthError(Loc(out), f"'{out}' has no {name}", "pass a folder written by 'synth solve'")
    files = read_folder(out, ("problem.yaml",))
    if _is_attention(out, files):  # a kind: attention folder: its kernel is softmax attention, not a GEMM
        return _load_attention(out, files, backend, images)
    problem = _problem_of(out, files)  # a folder without a kernel: say why first
    files.update(read_folder(out, tuple(n for n in RUNTIME_FILES if n not in files)))  # problem.yaml read once
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .hopper.problem import HopperGemm

    source = files["kernel.cu"].decode("utf-8", errors="replace")
    path = os.path.join(out, "kernel.cu")
    if isinstance(problem, HopperGemm):
        return _load_hopper(out, problem, files, source, backend, images)
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .emit.cuda import emit_kernel
    from .program import program_from_json
    from .schedule import schedule_from_json

    try:
        schedule = schedule_from_json(problem, _json(out, files, "schedule.json"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SynthError(Loc(os.path.join(out, "schedule.json")), f"schedule.json does not read back for "
                         f"problem.yaml: {exc!r}", "re-run 'synth solve'") from None
    try:
        program = program_from_json(_json(out, files, "program.json"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SynthError(Loc(os.path.join(out, "program.json")), f"program.json does not read back: {exc!r}",
                         "re-run 'synth solve'") from None
    if emit_kernel(problem, schedule, program) != source:
        raise SynthError(Loc(path), "kernel.cu is not the kernel synth emits for this folder's program (edited, "
                         "or from another folder or another synth version)",
                         f"re-emit it with 'synth emit {out} --target cuda --force', or re-run 'synth solve'")
    f = facts_of(source, path)
    facts = KernelFacts(problem.name, f.BM, f.BN, f.BK, f.ktiles, f.threads, f.smem_bytes, f.split_k, f.min_ktiles,
                        f.stream_k)
    return Kernel(path, source, facts, _backend(backend, gpu_ready, "CUDA GPU", "an NVIDIA GPU"), images, problem)


def _is_attention(out: str, files: dict[str, bytes]) -> bool:
    """Whether the folder's problem.yaml (read against the manifest) says ``kind: attention``."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .readfile import decode_utf8
    from .yamlnodes import read_yaml_text

    path = os.path.join(out, "problem.yaml")
    doc = read_yaml_text(decode_utf8(files["problem.yaml"], path, "problem.yaml"), path)
    return hasattr(doc, "get") and doc.get("kind") == "attention"


def _load_attention(out: str, files: dict[str, bytes], backend: str, images):
    """An attention folder's kernel (:class:`synth.emit.sm90.attention_runtime.AttentionKernel`): every file read
    against the manifest, kernel.cu's facts checked against problem.yaml and schedule.json."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .emit.sm90.attention_runtime import AttentionKernel, attention_facts
    from .emit.sm90.runner import gpu_status

    if not os.path.lexists(os.path.join(out, "kernel.cu")):
        raise SynthError(Loc(out), f"'{out}' has no kernel.cu: 'synth solve' writes one for a proven attention program "
                         "whose body the kernel is written for (its summary says why not)",
                         "re-run 'synth solve' on problem.yaml (docs/attention.md, \"From the command line\")")
    files.update(read_folder(out, tuple(n for n in RUNTIME_FILES if n not in files)))
    facts = attention_facts(out, files)
    return AttentionKernel(os.path.join(out, "kernel.cu"), files["kernel.cu"].decode("utf-8", errors="replace"),
                           facts, _backend(backend, gpu_status, "sm_90 GPU", "an H100/H200"), images, KernelError)


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
    ``K >= 1`` that is a multiple of 8 (TMA's 16-byte row stride), or ``K = 0``: an empty product the
    host computes (``alpha * 0 + beta * C``, zeros without C) without a launch; M, N free. The ``emulator``
    backend runs it on the CPU emulator of :mod:`synth.emit.sm90.emulate` (TMA boxes land as late
    as their barriers allow, wgmma operands are read as late as ``wait_group`` allows: a hang or a
    stale read is a :class:`KernelError`); ``cuda`` launches it on the GPU with tensor maps
    (:mod:`synth.emit.sm90.runner`, CUDA Python needed).
    """

    def __init__(self, path: str, source: str, config, backend: str, problem,
                 images: Sequence[tuple[str, bytes]] = ()) -> None:
        self.path = path
        self.source = source
        self.config = config
        self.backend = backend
        self.problem = problem
        """The folder's :class:`~synth.hopper.problem.HopperGemm`."""
        self.name = problem.name
        self.images = tuple(images)
        """Precompiled ``(label, cubin or PTX)`` of kernel.cu for sm_90a, tried before nvcc."""
        self.last_info: Optional[dict] = None
        """The emulator's report of the last call (emulator backend)."""

    def __repr__(self) -> str:
        """Every part of the design: tile and dtype, stages and K_PIPE_MMAS, the grid (one CTA per tile, persistent,
        ping-pong), the consumers, the cluster, the epilogue and C's type, the K accepted, the backend."""
        c = self.config
        ks = ("K any multiple of 8" if c.split_k == 1
              else f"split-K {c.split_k}, K 0 or a multiple of 8 above {(c.split_k - 1) * c.bk}")
        grid = ("ping-pong (persistent tiles, 2 consumer warp groups taking turns)" if c.pingpong else
                ("persistent tiles" if c.persistent else "one CTA per tile") +
                f", {c.bm // 64} cooperative consumer warp group{'s' if c.bm > 64 else ''}")
        cluster = getattr(c, "cluster", "1x1")
        cl = "no cluster" if cluster == "1x1" else \
            f"cluster {cluster} ({'B' if cluster == '2x1' else 'A'} multicast)"
        epi = ("TMA-store epilogue" if c.epilogue == "tma_store" else "register epilogue") + \
            f", C {getattr(c, 'out_dtype', 'f32')}" + \
            (f", activation {c.activation}" if getattr(c, "activation", "none") != "none" else "")
        return (f"<synth.kernel.HopperKernel {self.name}: {c.bm}x{c.bn}x{c.bk} tiles {c.dtype}, {c.stages} stages, "
                f"K_PIPE_MMAS {c.k_pipe_mmas}, {grid}, {cl}, {epi}, {ks}, backend {self.backend}>")

    def _operand(self, name: str, x) -> np.ndarray:
        loc = Loc(self.path)
        if not isinstance(x, np.ndarray) or x.ndim != 2:
            raise KernelError(loc, f"{name} must be a 2-D numpy array", f"pass np.asarray({name})")
        if self.config.dtype == "f16":
            if x.dtype != np.float16:
                raise KernelError(loc, f"{name} has dtype {x.dtype}; the kernel reads float16",
                                  f"convert it: {name}.astype(np.float16)")
            return np.ascontiguousarray(x).view(np.uint16)
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.sm90.emulate import bf16_bits

        if x.dtype == np.uint16:
            return np.ascontiguousarray(x)
        if x.dtype.kind != "f":
            raise KernelError(loc, f"{name} has dtype {x.dtype}; the kernel reads bfloat16",
                              "pass float values (rounded to bfloat16) or uint16 bfloat16 bit patterns")
        return bf16_bits(np.asarray(x, np.float32))

    def check(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, ctas: Optional[int] = None):
        """``(A bits, B bits, C or None, (M, N, K))`` checked (``ctas``: a persistent kernel's grid, None for
        the default); raises :class:`KernelError`."""
        loc = Loc(self.path)
        a, b = self._operand("A", A), self._operand("B", B)
        (M, K), (N, KB) = a.shape, b.shape
        if KB != K:
            raise KernelError(loc, f"A is {M} x {K} but B is {N} x {KB}: B must be N x K (C = A @ B.T)",
                              "pass B transposed (np.ascontiguousarray(B.T)) if it is K x N")
        if not (1 <= M <= INT_MAX and 1 <= N <= INT_MAX and 0 <= K <= INT_MAX) or K % 8:
            raise KernelError(loc, f"M = {M}, N = {N}, K = {K}: need M, N >= 1 and K a multiple of 8 (0 included; "
                              "TMA row strides are multiples of 16 bytes)", "pad K with zeros to a multiple of 8")
        # any N: a TMA-store kernel stores a C whose row is not a multiple of 16 bytes from registers (that launch)
        split = self.config.split_k
        if K and -(-K // self.config.bk) < split:  # K = 0: an empty product, computed on the host
            raise KernelError(loc, f"K = {K} has {-(-K // self.config.bk)} k-tile(s) of {self.config.bk}; this kernel "
                              f"splits K in {split}, and every split needs one",
                              f"pass K > {(split - 1) * self.config.bk}, or K = 0 (an empty product)")
        C = check_epilogue(loc, C, M, N, alpha, beta)
        self._grid_ctas(M, N, K, ctas, 1)
        return a, b, C, (M, N, K)

    def _grid_ctas(self, M: int, N: int, K: int, ctas: Optional[int], wave: int) -> int:
        """A persistent kernel's grid (:func:`synth.emit.launch.persistent_ctas`; 0 for the others, which take
        no ``ctas``); raises :class:`KernelError`."""
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.launch import persistent_ctas, persistent_ring, tile_groups

        cfg, loc = self.config, Loc(self.path)
        if not cfg.persistent:
            if ctas is not None:
                raise KernelError(loc, "ctas sets a persistent kernel's grid; this kernel runs one CTA per tile",
                                  "leave ctas out, or solve the problem with persistent: true")
            return 0
        tiles = -(-M // cfg.bm) * -(-N // cfg.bn)
        if tiles > INT_MAX:
            raise KernelError(loc, f"{tiles} output tiles: a persistent kernel counts its tiles in a C int",
                              f"use at most {INT_MAX} tiles of {cfg.bm} x {cfg.bn}")
        # a cluster kernel's clusters walk cluster-sized tile groups (docs/hopper_cluster.md, "Persistent clusters")
        groups = tile_groups(M, N, cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n)
        try:
            P = persistent_ctas(groups, wave, ctas, cfg.cluster_size)
        except ValueError as e:
            raise KernelError(loc, str(e), f"pass ctas >= 1 (a multiple of {cfg.cluster_size}), or leave it out for "
                              "one wave") from None
        ring = persistent_ring(groups, P, -(-K // cfg.bk), cfg.cluster_size)
        if ring > INT_MAX:
            raise KernelError(loc, f"{P} CTA(s) over {tiles} tiles of {-(-K // cfg.bk)} k-tiles give a CTA {ring} "
                              "k-tile iterations, above the kernel's int", "use more CTAs (ctas=) or a smaller problem")
        return P

    def _values(self, bits: np.ndarray) -> np.ndarray:
        if self.config.dtype == "f16":
            return bits.view(np.float16)
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.sm90.emulate import bf16_value

        return bf16_value(bits)

    def __call__(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0,
                 ctas: Optional[int] = None) -> np.ndarray:
        """``alpha A B^T (+ beta C)``; ``ctas``: a persistent kernel's grid (any ``>= 1``, a multiple of the cluster
        size for a cluster kernel; default one wave:
        the GPU's SMs, or :data:`synth.emit.launch.EMULATOR_SMS` on the emulator, at most the tile count)."""
        loc = Loc(self.path)
        a, b, C, (M, N, K) = self.check(A, B, C, alpha=alpha, beta=beta, ctas=ctas)
        if K == 0:  # nothing to multiply: no launch (kernel.cu returns at once for K < 1), on every backend
            # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
            from .emit.sm90.runner import round_out

            out = k_zero_result(C, M, N, float(alpha), float(beta))
            if getattr(self.config, "activation", "none") == "relu":  # as the epilogue writes C
                out = np.maximum(out, np.float32(0.0))
            return round_out(out, self.config.out_dtype)
        if self.backend == "cuda":
            with self.prepare(A, B, C, alpha=alpha, beta=beta, ctas=ctas) as job:
                job.run()
                out, _ = job.fetch()
            where = "the GPU"
        else:
            # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
            from .emit.sm90.emulate import EmulatorError, run_emulated

            try:
                # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
                from .emit.launch import EMULATOR_SMS

                grid = self._grid_ctas(M, N, K, ctas, EMULATOR_SMS)
                full, info = run_emulated(self.source, a, b, C, alpha=float(alpha), beta=float(beta), ctas=grid)
            except EmulatorError as e:
                raise KernelError(loc, f"the emulator could not run the kernel: {e}", "see docs/emulator.md") from None
            self.last_info = info
            if info.get("kind") or not info.get("ok", False):
                raise KernelError(loc, f"the emulator reports: {info.get('kind') or 'a hazard'}: "
                                  f"{info.get('message', '')}", "run 'synth verify' on the folder; see docs/emulator.md")
            out, where = np.ascontiguousarray(full[:, :N]), "the emulator"
        _raise_nans(self.path, out, self._values(a), self._values(b), C, float(alpha), float(beta), where)
        return out

    def prepare(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, ctas: Optional[int] = None) -> Prepared:
        """The launch of ``self(A, B, C, alpha=, beta=, ctas=)`` made ready on the GPU through CUDA Python:
        ``fetch()`` gives ``(M x N result, 0)``. Raises :class:`KernelError` for bad arguments, ``K = 0`` (no
        launch to prepare) or a kernel that does not load, SynthError without an sm_90 GPU."""
        a, b, C, (M, N, K) = self.check(A, B, C, alpha=alpha, beta=beta, ctas=ctas)
        if K == 0:
            raise _k_zero_prepare(self.path)
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .emit.sm90.kernel import KERNEL
        from .emit.sm90.runner import CudaDevice, GpuError, gpu_status, sm90_params

        ok, why = gpu_status()
        if not ok:
            raise SynthError(None, f"no sm_90 GPU available: {why}",
                             "run on an H100/H200 with CUDA Python (pip install '.[gpu]'), or use backend='emulator'")
        cfg = self.config
        dev = CudaDevice()
        try:
            fn = dev.function(self.source, KERNEL, cfg.smem_bytes, arch="sm_90a", images=self.images)
            out = np.zeros((M, N), np.float32 if cfg.out_bytes == 4 else np.uint16)  # C as stored (f16/bf16 bits)
            dA, dB, dC = dev.upload(a), dev.upload(b), dev.upload(out)
            dCin = dev.upload(C) if C is not None else None
            if cfg.persistent:  # the busiest CTA's ring within an int at this device's wave
                self._grid_ctas(M, N, K, ctas, dev.attribute("MULTIPROCESSOR_COUNT"))
            params, grid = sm90_params(dev, cfg, dA, dB, dC, dCin, M, N, K, float(alpha), float(beta), ctas)
        except KernelError:
            dev.close()
            raise
        except GpuError as exc:
            dev.close()
            raise KernelError(Loc(self.path), f"the GPU could not run kernel.cu: {exc}",
                              "check the CUDA toolkit and driver versions (docs/gpu.md)") from None

        def run():
            dev.launch(fn, grid, (cfg.threads, 1, 1), cfg.smem_bytes, params)

        def fetch():
            # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
            from .emit.sm90.runner import widen_out

            dev.synchronize()
            return widen_out(dev.download(out, dC).copy(), cfg.out_dtype), 0

        return Prepared(run, fetch, lambda repeats, before=None: dev.time_ms(run, repeats, before), dev.close,
                        dev.registers(fn), dev.name, dev.loaded_from.get(int(fn), "?"))


def _load_hopper(out: str, problem, files: dict[str, bytes], source: str, backend: str, images) -> HopperKernel:
    """A Hopper folder's kernel: schedule.json's choice, program.json equal to the lowering of problem.yaml
    under it, and kernel.cu equal to the kernel synth emits from that program (all derived again; a program
    equal to synth's own lowering needs no further validation, so no solver is loaded)."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .emit.sm90.kernel import emit_sm90_kernel
    from .emit.hopper_config import kernel_config
    from .hopper.choice_json import choice_from_json
    from .hopper.ir import hopper_from_json

    cfg = kernel_config(problem, choice_from_json(problem, _json(out, files, "schedule.json"),
                                                  os.path.join(out, "schedule.json")))
    ppath = os.path.join(out, "program.json")
    try:
        program = hopper_from_json(_json(out, files, "program.json"))
    except SynthError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed document: it is not synth's lowering
        raise SynthError(Loc(ppath), f"program.json does not read back as a Hopper program: {exc!s}",
                         "re-run 'synth solve'") from None
    if program != design_program(cfg):
        raise SynthError(Loc(ppath), "program.json is not the lowering of problem.yaml under schedule.json "
                         "(edited, or from another folder)", "re-run 'synth solve'; 'synth verify' checks an "
                         "edited program on its own")
    if source != emit_sm90_kernel(cfg, program):
        raise SynthError(Loc(os.path.join(out, "kernel.cu")), "kernel.cu is not the kernel synth emits for this "
                         "folder's proven program (edited, or from another folder)",
                         f"re-emit it with 'synth emit {out} --target cuda'")
    _check_hopper_parts(out, cfg)
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .emit.sm90.runner import gpu_status

    return HopperKernel(os.path.join(out, "kernel.cu"), source, cfg,
                        _backend(backend, gpu_status, "sm_90 GPU", "an H100/H200"), problem, images)


def _check_hopper_parts(out: str, cfg) -> None:
    """The proofs a Hopper kernel's design adds, present as synth wrote them: ping-pong's order programs
    (``order/even``, ``order/odd``) and the TMA-store epilogue's store program (``store/``), each
    ``program.json`` listed in the manifest, unchanged, and equal to the program synth derives (the ring's
    ``program.json`` is the same for those designs, so only these show that their proofs were written).
    A folder without ``certificate/`` (``synth solve --no-verify``: nothing in it was proven) needs none of
    them; those it holds are checked all the same."""
    # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
    from .hopper.ir import dumps

    want = {}
    if cfg.pingpong:
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .lower.hopper_pingpong import order_program

        for n, odd in (("even", False), ("odd", True)):
            want[f"order/{n}/program.json"] = dumps(order_program(odd))
    store = design_store_program(cfg)
    if store is not None:
        # here, not at the top: the light runtime loads what this folder's kernel needs, when it needs it
        from .program import dumps as program_dumps

        want["store/program.json"] = program_dumps(store)
    if not os.path.lexists(os.path.join(out, "certificate")):
        # a folder written with --no-verify proves nothing (its ring included): the parts are checked only
        # where they were written
        want = {name: text for name, text in want.items() if os.path.lexists(os.path.join(out, name))}
    for name in want:
        if not os.path.lexists(os.path.join(out, name)):
            what = "ping-pong consumers, whose order proof" if name.startswith("order/") else \
                "a TMA-store epilogue, whose store proof"
            raise SynthError(Loc(os.path.join(out, name)), f"problem.yaml asks for {what} is {name}: it is missing",
                             "re-run 'synth solve': a kernel is loaded only with every proof its design needs")
    files = read_folder(out, tuple(want))
    for name, text in want.items():
        if files[name] != text.encode("utf-8"):
            raise SynthError(Loc(os.path.join(out, name)), f"{name} is not the program synth proves for this "
                             "folder's design", "re-run 'synth solve'")


__all__ = ["load", "Kernel", "HopperKernel", "KernelFacts", "KernelError", "Launch", "Param", "Prepared",
           "device_ctas", "wave_ctas", "k_zero_result", "facts_of", "gpu_ready", "gpu_library", "read_folder",
           "unexplained_nans",
           "BACKENDS", "GPU_LIBRARIES", "RUNTIME_FILES", "MAX_FILE_BYTES"]

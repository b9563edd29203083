"""synth's kernels on a GPU through CUDA Python (``cuda.bindings.driver``): the sm_80 and the sm_90a GEMM, and the
sm_90a FlashAttention-forward kernel's arguments (:func:`attention_params`).

CUDA Python is imported only when a GPU is used (:func:`driver`), so this module loads on machines
without one; it is what stock GPU images ship (``pip install cuda-python``: wheels, no compiler).
:class:`CudaDevice` is the one driver layer both kernels use: the primary context of GPU 0 (shared
with torch in the same process), modules from a precompiled cubin/PTX image or from ``nvcc``, device
buffers, launches from a typed argument list (:class:`synth.emit.launch.Param`) and CUDA-event timing.

The sm_90a GEMM (:func:`run_gpu`, :func:`time_gpu`) adds tensor maps (``cuTensorMapEncodeTiled``;
pycuda has none, so a Hopper folder always runs here): A is M x K f16 row-major (dims ``{K, M}``,
row stride ``2 K`` bytes, box ``{64, BM}``), B is N x K (``{K, N}``, box ``{64, BN}``), 128-byte
swizzle, out-of-bound elements zero-filled (``FLOAT_OOB_FILL_NONE``: zeros). K must be a multiple
of 8 (TMA: global strides are multiples of 16 bytes). A cluster kernel (``KernelDesign.cluster`` ``2x1`` /
``1x2``, docs/hopper_cluster.md "The kernel") gets the shared operand's map with a half box
(``cfg.a_box_rows`` / ``cfg.b_box_rows``) and a grid of whole clusters; its ``__cluster_dims__`` makes the
plain ``cuLaunchKernel`` a cluster launch. Not run in this repository's CI (no GPU
there): the emulator (:mod:`.emulate`) checks the kernels, and a fake driver answering these
calls with the emulator checks this module's calls (tests/test_run.py).
"""

from __future__ import annotations

import ctypes
import pathlib
import subprocess
import tempfile
from typing import Optional, Sequence

import numpy as np

from ..launch import Param, persistent_ctas, persistent_grid, sm90_grid, tile_groups
from ..sass import tool
from ..splitk import ticket_count, workspace_floats
from ...hopper.kernel_design import KernelDesign
from .emulate import bf16_bits, bf16_value
from .kernel import KERNEL


class GpuError(RuntimeError):
    """A CUDA driver call failed (its name and error code in the message), or no image would load."""


def driver():
    """The CUDA driver module of CUDA Python: ``cuda.bindings.driver`` (cuda-python >= 12.6) or the older
    ``cuda.cuda``; ImportError when neither imports."""
    try:
        from cuda.bindings import driver as cu  # lazy: only where a GPU is used
    except ImportError:
        from cuda import cuda as cu  # cuda-python before 12.6
    return cu


def _check(res, what: str):
    """The value of a CUDA Python call returning ``(error, *values)``; GpuError on an error."""
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        raise GpuError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else (tuple(rest) or None)


def _name(raw) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)


NVCC_FLAGS = ("-std=c++17", "-O3", "-DNDEBUG")
"""nvcc flags of every image synth builds (``-arch`` and the output kind added)."""


def nvcc_image(kernel_cu: str, arch: str, *, ptx: bool = False, timeout: float = 900.0) -> bytes:
    """kernel.cu compiled by nvcc: a cubin for ``arch`` (``sm_80``, ``sm_90``, ``sm_90a``) or, with ``ptx``,
    PTX for its virtual arch (``compute_80``...). GpuError when nvcc is missing or fails."""
    nvcc = tool("nvcc")
    if nvcc is None:
        raise GpuError("nvcc is not on PATH (and no precompiled image loaded)")
    kind, suffix = ("-ptx", "ptx") if ptx else ("-cubin", "cubin")
    target = [f"-arch={arch.replace('sm_', 'compute_')}"] if ptx else [f"-arch={arch}"]
    with tempfile.TemporaryDirectory(prefix="synth-gpu-") as d:
        src, out = pathlib.Path(d) / "kernel.cu", pathlib.Path(d) / f"kernel.{suffix}"
        src.write_text(kernel_cu)
        proc = subprocess.run([nvcc, *target, *NVCC_FLAGS, kind, "-o", str(out), str(src)],
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode:
            raise GpuError(f"nvcc -arch={arch} failed:\n{proc.stderr[-3000:]}")
        data = out.read_bytes()
    return data + b"\0" if ptx else data  # cuModuleLoadData reads PTX as a NUL-terminated string


def device_status(sm90: bool = False) -> tuple[bool, str]:
    """``(True, device name)`` when CUDA Python loads the driver and sees GPU 0 (with ``sm90``: an sm_90
    device), else ``(False, why not)``. Never raises."""
    try:
        cu = driver()
    except ImportError as exc:
        return False, f"CUDA Python (cuda.bindings) is not installed ({exc})"
    try:
        _check(cu.cuInit(0), "cuInit")
        if int(_check(cu.cuDeviceGetCount(), "cuDeviceGetCount")) < 1:
            return False, "the CUDA driver sees no device"
        dev = _check(cu.cuDeviceGet(0), "cuDeviceGet")
        major = _check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
        name = _name(_check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName"))
    except Exception as exc:  # noqa: BLE001 - no driver, no device: the reason is the message
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    if sm90 and int(major) != 9:
        return False, f"{name} is not an sm_90 GPU (compute capability {major}.x)"
    return True, name


def gpu_status() -> tuple[bool, str]:
    """:func:`device_status` for the sm_90a kernel: GPU 0 must be an sm_90 device. Never raises."""
    return device_status(sm90=True)


class CudaDevice:
    """GPU 0's primary context through CUDA Python; raises :class:`GpuError` (ImportError without CUDA Python).

    Buffers made by :meth:`alloc`/:meth:`upload` are freed by :meth:`free` or :meth:`close`; the context is
    retained once per object and released by :meth:`close` (torch in the same process shares it).
    """

    def __init__(self, ordinal: int = 0) -> None:
        self.cu = cu = driver()
        _check(cu.cuInit(0), "cuInit")
        self.dev = _check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = _check(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.name = _name(_check(cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName"))
        self.cc = (self.attribute("COMPUTE_CAPABILITY_MAJOR"), self.attribute("COMPUTE_CAPABILITY_MINOR"))
        self._bufs: list = []
        self._modules: list = []
        self.loaded_from: dict[int, str] = {}
        """Per function (``int(fn)``), which image it was loaded from (a label of :meth:`function`)."""

    @property
    def arch(self) -> str:
        """The device's real arch, ``sm_<major><minor>`` (``sm_90`` on an H100)."""
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def attribute(self, name: str) -> int:
        """``cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_<name>)``."""
        a = getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(_check(self.cu.cuDeviceGetAttribute(a, self.dev), f"cuDeviceGetAttribute({name})"))

    def function(self, kernel_cu: str, name: str, smem_bytes: int, *, arch: Optional[str] = None,
                 images: Sequence[tuple[str, bytes]] = ()):
        """Function ``name`` of the first of ``images`` (``(label, cubin or PTX)``) the driver loads, else of
        kernel.cu compiled by nvcc for ``arch`` (default the device's); its dynamic shared memory limit
        raised to ``smem_bytes``. GpuError with every image's failure when none loads."""
        cu, why = self.cu, []
        todo = list(images) + [(f"nvcc -arch={arch or self.arch}", None)]
        for label, image in todo:
            try:
                if image is None:
                    image = nvcc_image(kernel_cu, arch or self.arch)
                mod = _check(cu.cuModuleLoadData(image), f"cuModuleLoadData({label})")
            except GpuError as e:
                why.append(f"{label}: {str(e)[:600]}")
                continue
            self._modules.append(mod)
            fn = _check(cu.cuModuleGetFunction(mod, name.encode()), "cuModuleGetFunction")
            if smem_bytes > 48 * 1024:
                _check(cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes),
                    "cuFuncSetAttribute")
            self.loaded_from[int(fn)] = label
            return fn
        raise GpuError("no image of the kernel loads: " + "; ".join(why))

    def registers(self, fn) -> int:
        """Registers per thread of ``fn``."""
        return int(_check(self.cu.cuFuncGetAttribute(self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn),
                          "cuFuncGetAttribute"))

    def alloc(self, nbytes: int) -> int:
        """A device buffer of ``nbytes`` (at least 16), contents undefined; its address."""
        p = _check(self.cu.cuMemAlloc(max(int(nbytes), 16)), "cuMemAlloc")
        self._bufs.append(p)
        return int(p)

    def upload(self, x: np.ndarray) -> int:
        """A device copy of ``x`` (C-contiguous); its address."""
        x = np.ascontiguousarray(x)
        p = self.alloc(x.nbytes)
        if x.nbytes:
            _check(self.cu.cuMemcpyHtoD(p, x.ctypes.data, x.nbytes), "cuMemcpyHtoD")
        return p

    def release(self, ptr: int) -> None:
        """Free one buffer of :meth:`alloc`/:meth:`upload` now (not again at :meth:`free`)."""
        for i, p in enumerate(self._bufs):
            if int(p) == int(ptr):
                self._bufs.pop(i)
                _check(self.cu.cuMemFree(p), "cuMemFree")
                return
        raise ValueError(f"0x{int(ptr):x} is not a buffer of this device object")

    def download(self, host: np.ndarray, ptr: int) -> np.ndarray:
        """``host`` (C-contiguous, written in place) filled from device address ``ptr``."""
        _check(self.cu.cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), "cuMemcpyDtoH")
        return host

    def memset(self, ptr: int, nbytes: int, value: int = 0) -> None:
        """Write ``value`` into every byte of ``ptr[0:nbytes]`` (stream 0; a full write: evicts L2 lines)."""
        _check(self.cu.cuMemsetD8(ptr, value, nbytes), "cuMemsetD8")

    def launch(self, fn, grid: tuple, block: tuple, smem_bytes: int, params: Sequence) -> None:
        """``cuLaunchKernel`` on stream 0 with ``params`` (:class:`synth.emit.launch.Param`: ``ptr`` an
        address or None, ``i32``, ``f32``, ``u64``, ``raw`` bytes such as a tensor map)."""
        vals = []
        for p in params:
            if p.kind == "ptr":
                vals.append(ctypes.c_uint64(0 if p.value is None else int(p.value)))
            elif p.kind == "i32":
                vals.append(ctypes.c_int32(int(p.value)))
            elif p.kind == "f32":
                vals.append(ctypes.c_float(float(p.value)))
            elif p.kind == "u64":
                vals.append(ctypes.c_uint64(int(p.value)))
            elif p.kind == "raw":
                vals.append(ctypes.create_string_buffer(bytes(p.value), len(p.value)))
            else:
                raise ValueError(f"parameter {p.name}: unknown kind {p.kind!r}")
        arr = (ctypes.c_void_p * max(len(vals), 1))(*[ctypes.addressof(v) for v in vals])
        _check(self.cu.cuLaunchKernel(fn, *(int(g) for g in grid), *(int(b) for b in block), int(smem_bytes), 0,
                                      ctypes.addressof(arr), 0), "cuLaunchKernel")

    def synchronize(self) -> None:
        _check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def time_ms(self, launch, repeats: int, before=None) -> list[float]:
        """``repeats`` runs of ``launch()`` each timed with CUDA events (``before()`` first, outside the timing,
        e.g. an L2 flush); ms per run."""
        cu = self.cu
        start = _check(cu.cuEventCreate(0), "cuEventCreate")
        stop = _check(cu.cuEventCreate(0), "cuEventCreate")
        times = []
        try:
            for _ in range(repeats):
                if before is not None:
                    before()
                _check(cu.cuEventRecord(start, 0), "cuEventRecord")
                launch()
                _check(cu.cuEventRecord(stop, 0), "cuEventRecord")
                _check(cu.cuEventSynchronize(stop), "cuEventSynchronize")
                times.append(float(_check(cu.cuEventElapsedTime(start, stop), "cuEventElapsedTime")))
        finally:
            cu.cuEventDestroy(start)
            cu.cuEventDestroy(stop)
        return times

    def free(self) -> None:
        """Free every buffer this object allocated."""
        for p in self._bufs:
            self.cu.cuMemFree(p)
        self._bufs = []

    def close(self) -> None:
        """Free the buffers, unload the modules and release the primary context."""
        self.free()
        for m in self._modules:
            self.cu.cuModuleUnload(m)
        self._modules = []
        self.cu.cuDevicePrimaryCtxRelease(self.dev)


def sm90_params(dev: CudaDevice, cfg: KernelDesign, dA: int, dB: int, dC: int, dCin: Optional[int], M: int, N: int,
                K: int, alpha: float, beta: float, ctas: Optional[int] = None) -> tuple[list, tuple[int, int, int]]:
    """The sm_90a kernel's typed arguments (tensor maps of A and B, with a TMA-store epilogue C's, C, C_in, M, N, K, ldc = N, alpha, beta and,
    with split-K, a workspace and zeroed tickets allocated on ``dev``) and its grid (a persistent kernel's:
    ``ctas`` CTAs, default one wave of the device's SMs, :func:`synth.emit.launch.persistent_ctas`; the others'
    :func:`synth.emit.launch.sm90_grid`, rounded up to whole clusters). A and B's boxes have ``cfg.a_box_rows`` and
    ``cfg.b_box_rows`` rows (a cluster's shared operand: the part of the tile one CTA loads and multicasts)."""
    cu = dev.cu

    def tmap(ptr, rows: int, box_rows: int) -> bytes:
        t = _check(cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16 if cfg.dtype == "f16"
            else cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, int(ptr), [K, rows], [K * 2],
            [cfg.bk, box_rows], [1, 1], cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,  # as CuTe's make_tma_copy
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
        return bytes(ctypes.string_at(t.getPtr(), 128))

    # a cluster's shared operand: each CTA loads its part of the tile (cfg.a_box_rows / b_box_rows rows) and
    # multicasts it; the other operand's box is the whole tile
    params = [Param("tmap_A", "raw", tmap(dA, M, cfg.a_box_rows)), Param("tmap_B", "raw", tmap(dB, N, cfg.b_box_rows))]
    if cfg.epilogue == "tma_store" and not c_tma_aligned(int(dC), N, cfg.out_bytes):
        # C's base or row stride is not a multiple of 16 bytes: cuTensorMapEncodeTiled refuses such a map, so a
        # zeroed one is passed and the kernel stores this launch's C from registers (it decides from C and ldc)
        params.append(Param("tmap_C", "raw", bytes(128)))
    elif cfg.epilogue == "tma_store":  # C (out_dtype, row stride ldc = N) written by TMA stores of 64 x store_cols boxes
        ctype = {"f32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                 "f16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                 "bf16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16}[cfg.out_dtype]
        t = _check(cu.cuTensorMapEncodeTiled(
            ctype, 2, int(dC), [N, M], [N * cfg.out_bytes], [cfg.store_cols, 64],
            [1, 1], cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
        params.append(Param("tmap_C", "raw", bytes(ctypes.string_at(t.getPtr(), 128))))
    params += [Param("C", "ptr", dC), Param("C_in", "ptr", dCin), Param("M", "i32", M), Param("N", "i32", N),
              Param("K", "i32", K), Param("ldc", "i32", N), Param("alpha", "f32", alpha), Param("beta", "f32", beta)]
    if cfg.split_k > 1:  # split-K: a workspace, and tickets zeroed once (every launch leaves them zeroed)
        ws = dev.alloc(4 * workspace_floats(M, N, cfg.bm, cfg.bn, cfg.split_k))
        tickets = dev.upload(np.zeros(ticket_count(M, N, cfg.bm, cfg.bn, cfg.split_k), np.uint32))
        params += [Param("workspace", "ptr", ws), Param("tickets", "ptr", tickets)]
    if cfg.persistent:  # a cluster kernel's clusters walk cluster-sized tile groups
        groups = tile_groups(M, N, cfg.bm, cfg.bn, cfg.cluster_m, cfg.cluster_n)
        P = persistent_ctas(groups, dev.attribute("MULTIPROCESSOR_COUNT"), ctas, cfg.cluster_size)
        return params, persistent_grid(P, cfg.cluster_m, cfg.cluster_n)
    # a cluster kernel (__cluster_dims__ in kernel.cu): this plain launch is a cluster launch, on a grid rounded up
    # to whole clusters
    return params, sm90_grid(M, N, cfg.bm, cfg.bn, split_k=cfg.split_k, cluster_m=cfg.cluster_m,
                             cluster_n=cfg.cluster_n)


def attention_params(dev: CudaDevice, *, head_dim: int, bm: int, bn: int, dtype: str, dQ: int, dK: int, dV: int,
                     dO: int, batch_heads: int, seqlen_q: int, seqlen_k: int, scale: float) -> list:
    """The FlashAttention-forward kernel's typed arguments (``synth_attention_sm90(tmQ, tmK, tmV, Out, seqlen_q,
    seqlen_k, softmax_scale)``, docs/attention.md "The kernel"): Q, K and V (``dtype`` f16 or bf16, row-major
    ``[B H, S, head_dim]``) each described by a 2-D tensor map over the flattened ``[B H S, head_dim]`` tensor (dims
    ``{head_dim, B H S}``, row stride ``2 head_dim`` bytes, box ``{64, bm}`` for Q and ``{64, bn}`` for K and V,
    128-byte swizzle, out-of-bound rows zero-filled), then O (f32 ``[B H, seqlen_q, head_dim]``), the two lengths
    and the softmax scale."""
    cu = dev.cu

    def tmap(ptr: int, rows: int, box_rows: int) -> bytes:
        t = _check(cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16 if dtype == "f16"
            else cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, int(ptr), [head_dim, rows],
            [head_dim * 2], [64, box_rows], [1, 1], cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
        return bytes(ctypes.string_at(t.getPtr(), 128))

    return [Param("tmQ", "raw", tmap(dQ, batch_heads * seqlen_q, bm)),
            Param("tmK", "raw", tmap(dK, batch_heads * seqlen_k, bn)),
            Param("tmV", "raw", tmap(dV, batch_heads * seqlen_k, bn)),
            Param("Out", "ptr", dO), Param("seqlen_q", "i32", int(seqlen_q)), Param("seqlen_k", "i32", int(seqlen_k)),
            Param("softmax_scale", "f32", float(scale))]


def c_tma_aligned(address: int, ldc: int, out_bytes: int) -> bool:
    """Whether a TMA-store kernel's launch stores C with TMA: C's base ``address`` and row stride (``ldc`` elements
    of ``out_bytes``) multiples of 16 bytes, as ``cuTensorMapEncodeTiled`` needs (the kernel's ``synth_c_tma``
    decides the same from its ``C`` and ``ldc``); otherwise its consumers store C from registers
    (docs/hopper_store.md, "C not TMA-aligned")."""
    return (address | ldc * out_bytes) % 16 == 0


def round_out(C: np.ndarray, out_dtype: str) -> np.ndarray:
    """float32 values rounded (nearest even) to the element type C is stored in, back as float32."""
    if out_dtype == "f32":
        return C
    if out_dtype == "f16":
        return C.astype(np.float16).astype(np.float32)
    return bf16_value(bf16_bits(C))


def widen_out(C: np.ndarray, out_dtype: str) -> np.ndarray:
    """C as the kernel stored it (float32, or the f16 / bf16 bits as uint16) -> float32 values (exact)."""
    if out_dtype == "f32":
        return C
    if out_dtype == "f16":
        return C.view(np.float16).astype(np.float32)
    return bf16_value(C)


def sm90_operands(cfg: KernelDesign, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A and B as the kernel reads them: float16 for ``f16``; for ``bf16``, uint16 arrays are taken as bfloat16
    bits and anything else is rounded to bfloat16. ValueError unless N x K with one K, a multiple of 8."""
    if cfg.dtype == "f16":
        A = np.ascontiguousarray(A, np.float16)
        B = np.ascontiguousarray(B, np.float16)
    else:
        A = np.ascontiguousarray(A if A.dtype == np.uint16 else bf16_bits(np.asarray(A, np.float32)))
        B = np.ascontiguousarray(B if B.dtype == np.uint16 else bf16_bits(np.asarray(B, np.float32)))
    M, K = A.shape
    if B.shape[1] != K or K % 8 or K < 1:
        raise ValueError(f"A is {A.shape}, B is {B.shape}: need N x K with the same K, K a multiple of 8")
    return A, B


def run_gpu(kernel_cu: str, cfg: KernelDesign, A: np.ndarray, B: np.ndarray, C_in: Optional[np.ndarray] = None,
            alpha: float = 1.0, beta: float = 0.0, *, images: Sequence[tuple[str, bytes]] = ()) -> np.ndarray:
    """``alpha A @ B.T (+ beta C_in)`` computed by the kernel on GPU 0 (a new M x N float32 array).
    A is M x K and B is N x K: float16 for ``cfg.dtype == "f16"``; for ``bf16``, bfloat16 bits as
    uint16 or values rounded to bfloat16. ``images``: precompiled ``(label, cubin/PTX)`` tried before nvcc."""
    return time_gpu(kernel_cu, cfg, A, B, C_in, alpha, beta, repeats=0, images=images)[0]


def time_gpu(kernel_cu: str, cfg: KernelDesign, A: np.ndarray, B: np.ndarray, C_in: Optional[np.ndarray] = None,
             alpha: float = 1.0, beta: float = 0.0, *, repeats: int = 20,
             images: Sequence[tuple[str, bytes]] = ()) -> tuple[np.ndarray, list, int, str]:
    """As :func:`run_gpu`, then ``repeats`` more launches timed with CUDA events (warm L2). Returns
    ``(C of the first launch, [ms per timed launch], registers per thread, device name)``."""
    A, B = sm90_operands(cfg, A, B)
    M, K = A.shape
    N = B.shape[0]
    dev = CudaDevice()
    try:
        fn = dev.function(kernel_cu, KERNEL, cfg.smem_bytes, arch="sm_90a", images=images)
        C = np.zeros((M, N), np.float32 if cfg.out_bytes == 4 else np.uint16)
        dA, dB, dC = dev.upload(A), dev.upload(B), dev.upload(C)
        dCin = dev.upload(np.ascontiguousarray(C_in, np.float32)) if C_in is not None else None
        params, grid = sm90_params(dev, cfg, dA, dB, dC, dCin, M, N, K, alpha, beta)

        def launch():
            dev.launch(fn, grid, (cfg.threads, 1, 1), cfg.smem_bytes, params)

        launch()
        dev.synchronize()
        dev.download(C, dC)
        C = widen_out(C, cfg.out_dtype)
        times = dev.time_ms(launch, repeats) if repeats else []
        return C, times, dev.registers(fn), dev.name
    finally:
        dev.close()


__all__ = ["run_gpu", "time_gpu", "gpu_status", "device_status", "GpuError", "CudaDevice", "driver", "nvcc_image",
           "sm90_params", "attention_params", "c_tma_aligned", "sm90_operands", "widen_out", "round_out", "NVCC_FLAGS"]

"""Launch the sm_90a GEMM on a GPU: tensor maps (``cuTensorMapEncodeTiled``) and the launch.

CUDA Python (``cuda.bindings.driver``) is imported only when :func:`run_gpu` is called, so this
module loads on machines without a GPU. The kernel is compiled with nvcc (``-arch=sm_90a -O3
-cubin``) and loaded with ``cuModuleLoadData``. Tensor maps: A is M x K f16 row-major (dims
``{K, M}``, row stride ``2 K`` bytes, box ``{64, BM}``), B is N x K (``{K, N}``, box ``{64,
BN}``), 128-byte swizzle, out-of-bound elements zero-filled (``FLOAT_OOB_FILL_NONE``: zeros).
K must be a multiple of 8 (TMA: global strides are multiples of 16 bytes). Not run in this
repository's CI (no GPU there): the emulator (:mod:`.emulate`) is what checks the kernel.
"""

from __future__ import annotations

import ctypes
import pathlib
import subprocess
import tempfile
from typing import Optional

import numpy as np

from ..sass import tool
from .config import Sm90Config
from .emulate import bf16_bits
from .kernel import KERNEL


class GpuError(RuntimeError):
    """A CUDA driver call failed (its name and error code in the message)."""


def _check(res, what: str):
    """The value of a CUDA Python call returning ``(error, *values)``; GpuError on an error."""
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        raise GpuError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else (tuple(rest) or None)


def _cubin(kernel_cu: str) -> bytes:
    nvcc = tool("nvcc")
    if nvcc is None:
        raise GpuError("nvcc is not on PATH")
    with tempfile.TemporaryDirectory(prefix="synth-sm90-gpu-") as d:
        src, out = pathlib.Path(d) / "kernel.cu", pathlib.Path(d) / "kernel.cubin"
        src.write_text(kernel_cu)
        proc = subprocess.run([nvcc, "-arch=sm_90a", "-O3", "-DNDEBUG", "-cubin", "-o", str(out), str(src)],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode:
            raise GpuError(f"nvcc failed:\n{proc.stderr[-3000:]}")
        return out.read_bytes()


def gpu_status() -> tuple[bool, str]:
    """``(True, device name)`` when CUDA Python loads the driver and GPU 0 is an sm_90 device, else
    ``(False, why not)``. Never raises."""
    try:
        from cuda.bindings import driver as cu  # lazy: only where a GPU is used
    except ImportError as exc:
        return False, f"CUDA Python (cuda.bindings) is not installed ({exc})"
    try:
        _check(cu.cuInit(0), "cuInit")
        dev = _check(cu.cuDeviceGet(0), "cuDeviceGet")
        major = _check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
        name = _check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
        name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
    except Exception as exc:  # noqa: BLE001 - no driver, no device: the reason is the message
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    if int(major) != 9:
        return False, f"{name} is not an sm_90 GPU (compute capability {major}.x)"
    return True, name


def run_gpu(kernel_cu: str, cfg: Sm90Config, A: np.ndarray, B: np.ndarray, C_in: Optional[np.ndarray] = None,
            alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """``alpha A @ B.T (+ beta C_in)`` computed by the kernel on GPU 0 (a new M x N float32 array).
    A is M x K and B is N x K: float16 for ``cfg.dtype == "f16"``; for ``bf16``, bfloat16 bits as
    uint16 or values rounded to bfloat16."""
    return time_gpu(kernel_cu, cfg, A, B, C_in, alpha, beta, repeats=0)[0]


def time_gpu(kernel_cu: str, cfg: Sm90Config, A: np.ndarray, B: np.ndarray, C_in: Optional[np.ndarray] = None,
             alpha: float = 1.0, beta: float = 0.0, *, repeats: int = 20) -> tuple[np.ndarray, list, int, str]:
    """As :func:`run_gpu`, then ``repeats`` more launches timed with CUDA events (warm L2). Returns
    ``(C of the first launch, [ms per timed launch], registers per thread, device name)``."""
    from cuda.bindings import driver as cu  # lazy: only where a GPU is used

    if cfg.dtype == "f16":
        A = np.ascontiguousarray(A, np.float16)
        B = np.ascontiguousarray(B, np.float16)
    else:  # bf16: uint16 arrays are taken as bfloat16 bits, anything else is rounded to bfloat16
        A = np.ascontiguousarray(A if A.dtype == np.uint16 else bf16_bits(np.asarray(A, np.float32)))
        B = np.ascontiguousarray(B if B.dtype == np.uint16 else bf16_bits(np.asarray(B, np.float32)))
    M, K = A.shape
    N = B.shape[0]
    if B.shape[1] != K or K % 8 or K < 1:
        raise ValueError(f"A is {A.shape}, B is {B.shape}: need N x K with the same K, K a multiple of 8")
    _check(cu.cuInit(0), "cuInit")
    dev = _check(cu.cuDeviceGet(0), "cuDeviceGet")
    ctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    mod = _check(cu.cuModuleLoadData(_cubin(kernel_cu)), "cuModuleLoadData")
    fn = _check(cu.cuModuleGetFunction(mod, KERNEL.encode()), "cuModuleGetFunction")
    _check(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 cfg.smem_bytes), "cuFuncSetAttribute")
    bufs = []

    def upload(x: np.ndarray):
        p = _check(cu.cuMemAlloc(max(x.nbytes, 16)), "cuMemAlloc")
        _check(cu.cuMemcpyHtoD(p, x.ctypes.data, x.nbytes), "cuMemcpyHtoD")
        bufs.append(p)
        return p

    try:
        dA, dB = upload(A), upload(B)
        C = np.zeros((M, N), np.float32)
        dC = upload(C)
        dCin = upload(np.ascontiguousarray(C_in, np.float32)) if C_in is not None else 0

        def tmap(ptr, rows: int, box_rows: int):
            return _check(cu.cuTensorMapEncodeTiled(
                cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16 if cfg.dtype == "f16"
                else cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, int(ptr), [K, rows], [K * 2],
                [cfg.bk, box_rows], [1, 1], cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")

        tA, tB = tmap(dA, M, cfg.bm), tmap(dB, N, cfg.bn)
        raw = [ctypes.create_string_buffer(bytes(ctypes.string_at(t.getPtr(), 128)), 128) for t in (tA, tB)]
        vals = [ctypes.c_uint64(int(dC)), ctypes.c_uint64(int(dCin)), ctypes.c_int(M), ctypes.c_int(N),
                ctypes.c_int(K), ctypes.c_int(N), ctypes.c_float(alpha), ctypes.c_float(beta)]
        if cfg.split_k > 1:  # split-K: a workspace, and tickets zeroed once (every launch leaves them zeroed)
            from ..splitk import ticket_count, workspace_floats

            ws = upload(np.zeros(workspace_floats(M, N, cfg.bm, cfg.bn, cfg.split_k), np.float32))
            tickets = upload(np.zeros(ticket_count(M, N, cfg.bm, cfg.bn, cfg.split_k), np.uint32))
            vals += [ctypes.c_uint64(int(ws)), ctypes.c_uint64(int(tickets))]
        ptrs = (ctypes.c_void_p * (2 + len(vals)))(*[ctypes.addressof(x) for x in raw + vals])
        grid = ((N + cfg.bn - 1) // cfg.bn, (M + cfg.bm - 1) // cfg.bm, cfg.split_k)
        def launch():
            _check(cu.cuLaunchKernel(fn, *grid, cfg.threads, 1, 1, cfg.smem_bytes, 0, ctypes.addressof(ptrs), 0),
                   "cuLaunchKernel")

        launch()
        _check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        _check(cu.cuMemcpyDtoH(C.ctypes.data, dC, C.nbytes), "cuMemcpyDtoH")
        times = []
        if repeats:
            start = _check(cu.cuEventCreate(0), "cuEventCreate")
            stop = _check(cu.cuEventCreate(0), "cuEventCreate")
            for _ in range(repeats):
                _check(cu.cuEventRecord(start, 0), "cuEventRecord")
                launch()
                _check(cu.cuEventRecord(stop, 0), "cuEventRecord")
                _check(cu.cuEventSynchronize(stop), "cuEventSynchronize")
                times.append(float(_check(cu.cuEventElapsedTime(start, stop), "cuEventElapsedTime")))
            cu.cuEventDestroy(start)
            cu.cuEventDestroy(stop)
        regs = int(_check(cu.cuFuncGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn),
                          "cuFuncGetAttribute"))
        name = _check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
        name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        return C, times, regs, name
    finally:
        for p in bufs:
            cu.cuMemFree(p)
        cu.cuDevicePrimaryCtxRelease(dev)


__all__ = ["run_gpu", "time_gpu", "gpu_status", "GpuError"]

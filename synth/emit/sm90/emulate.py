"""Run the sm_90a GEMM kernel on the CPU emulator (``runtime/synth_emu_sm90.h``).

Input: a ``kernel.cu`` written by :func:`synth.emit.sm90.kernel.emit_sm90_kernel` (the same text
nvcc compiles), a shape and a scheduling order. Output: :class:`Sm90Result` with C, the
comparison with numpy and what the emulator saw (a hang is reported as such, with the waiting
threads' barriers and parities). A cluster kernel (``SYNTH_CLUSTER_M`` / ``SYNTH_CLUSTER_N``) runs each
cluster's CTAs together (docs/emulator.md, "Clusters"). The emulator proper (``runtime/sm90_runtime.cpp``: the
functions ``synth_emu_sm90.h`` declares as its runtime, and the harness's main, ``sm90_harness.h``) is compiled once
into an object, and each kernel's binary is ``sm90_harness.cpp`` with the kernel (its facts and its launch, handed
to that main), compiled against the runtime's declarations only and linked with it
(:func:`runtime_object`, :func:`binary`), with ``g++ -std=c++20 -O2 -DSYNTH_EMULATE``. Both are cached under
``$SYNTH_EMU_CACHE/sm90`` (default ``~/.cache/synth/emu``) by the hash of what goes into them (the kernel, the
runtime sources, the compiler and its flags), built by one process at a time (the others wait for it, then use it)
and written under a temporary name renamed into place; shapes and orders are run-time inputs. A build says so in
one line on stderr unless ``$SYNTH_EMU_QUIET`` is set (:func:`synth.emit.emulate.build_notice`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ...expr import evaluate, parse
from ..emulate import EmulatorError, build_lock, build_notice, cache_dir, describe_kernel
from .kernel import KERNEL

RUNTIME = pathlib.Path(__file__).resolve().parent.parent / "runtime"
SOURCES = ("synth_emu_sm90.h", "sm90_harness.h", "sm90_harness.cpp", "sm90_runtime.cpp")
RUNTIME_SOURCES = ("synth_emu_sm90.h", "sm90_harness.h", "sm90_runtime.cpp")
"""What the runtime object is compiled from (its cache key, with the compiler and :data:`CXXFLAGS`)."""
CXXFLAGS = ("-std=c++20", "-O2", "-DSYNTH_EMULATE", "-w")
"""g++ flags of the runtime object and of every kernel's binary (the same: the two link together)."""
ORDERS = ("forward", "reverse", "random", "starve", "cta0_first", "cta1_first")
"""Thread orders: round robin with the producer warp group first, or the consumers first, or a random
thread at every switch (seeded by ``seed``: deterministic), or round robin with thread 1 of every consumer
warp group held back while any other thread can progress (``starve``: a thread as far behind its warp
group as the hardware allows, where only a convergence point makes it catch up).
``cta0_first`` / ``cta1_first`` (clusters): round robin over the threads of CTA rank 0 (1) only, the other
CTA's threads running only while every thread of that CTA is blocked or done, so that one CTA races ahead
of its peer to its exit and into the peer's barriers (on a cluster of one CTA: ``forward``). The CTAs of
a cluster always run together; the other orders interleave all their threads."""
STARVE = 100000
"""The harness's code of order ``starve`` (codes 0, 1 and 2 + seed are the others)."""
CTA_FIRST = 100001
"""The harness's code of order ``ctaR_first`` is ``CTA_FIRST + R``."""


def order_code(order: str, seed: int = 0) -> int:
    """The harness's code of thread order ``order`` (one of :data:`ORDERS`; ``seed`` for ``random``)."""
    if order not in ORDERS:
        raise EmulatorError(f"order {order!r}: expected one of {ORDERS}")
    if order == "starve":
        return STARVE
    if order.startswith("cta"):
        return CTA_FIRST + int(order[3])
    return ORDERS.index(order) + (seed % 1000 if order == "random" else 0)
TIMEOUT_S = 300
"""A run that takes longer is stopped and reported (the emulator itself detects hangs)."""


@dataclass(frozen=True)
class EmulatorRun:
    """What one run of a kernel on the sm_90a emulator gave, beside numpy's reference (the result itself is the
    subclass's field: :class:`Sm90Result`'s ``C``, the attention run's ``O``)."""

    ref: np.ndarray
    ok: bool
    """Ran to the end, no NaN, within the kernel's tolerance of ``ref`` everywhere."""
    kind: str
    """'' when it ran to the end; else what the emulator reported ('hang', 'fault', 'protocol', 'race')."""
    message: str
    max_abs_err: float
    nan_count: int
    stats: dict = field(default_factory=dict)

    def summary(self) -> str:
        if self.kind:
            return f"{self.kind}: {self.message}"
        return f"ok={self.ok} max_abs_err={self.max_abs_err:.3g} nan={self.nan_count} stats={self.stats}"


@dataclass(frozen=True)
class Sm90Result(EmulatorRun):
    """A GEMM run: ``ok`` when |C - ref| <= 1e-2 + 1e-2 |ref| everywhere."""

    C: np.ndarray = field(kw_only=True)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits -> float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        raise EmulatorError("g++ is not on PATH", "install g++ (C++20)")
    return gxx


def _compiler_id(gxx: str) -> str:
    """The compiler as a cache key: its path and the size and time of the file it resolves to (an upgraded g++ at
    the same path builds anew)."""
    try:
        st = os.stat(os.path.realpath(gxx))
        return f"{gxx} {st.st_size} {st.st_mtime_ns}"
    except OSError:
        return gxx


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _compile(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise EmulatorError(f"g++ failed on {what}:\n{proc.stderr[-3000:]}", "fix the kernel source")


def runtime_object() -> pathlib.Path:
    """The compiled ``runtime/sm90_runtime.cpp`` (the emulator proper, which every kernel's binary links with): built
    once per version of :data:`RUNTIME_SOURCES`, compiler and :data:`CXXFLAGS`, and cached."""
    gxx = _gxx()
    d = cache_dir() / "sm90"
    key = _key(*((RUNTIME / s).read_text() for s in RUNTIME_SOURCES), " ".join(CXXFLAGS), _compiler_id(gxx))
    obj = d / f"runtime-{key}.o"
    if obj.exists():
        return obj
    d.mkdir(parents=True, exist_ok=True)
    with build_lock(obj):
        if not obj.exists():  # another process built it while this one waited
            build_notice("the sm_90a emulator runtime (10 s to a minute)", "every sm_90a kernel", d)
            tmp = obj.with_name(f"{obj.name}.{os.getpid()}.tmp")
            _compile([gxx, *CXXFLAGS, f"-I{RUNTIME}", "-c", str(RUNTIME / "sm90_runtime.cpp"), "-o", str(tmp)],
                     "the sm_90a emulator runtime")
            os.replace(tmp, obj)  # atomic: no process sees a partial object
    return obj


def binary(kernel_cu: str, harness: str = "sm90_harness.cpp") -> pathlib.Path:
    """The emulator binary of ``kernel_cu`` (compiled once, cached): the harness (a file of ``runtime/``: the GEMM's
    ``sm90_harness.cpp`` by default, the attention kernel's ``attn_harness.cpp``) and the kernel, linked with
    :func:`runtime_object`."""
    gxx = _gxx()
    runtime = runtime_object()
    d = cache_dir() / "sm90"
    key = _key(kernel_cu, (RUNTIME / harness).read_text(), runtime.name, " ".join(CXXFLAGS),
               _compiler_id(gxx))
    exe = d / f"{'gemm' if harness == 'sm90_harness.cpp' else pathlib.Path(harness).stem}-{key}"
    if exe.exists():
        return exe
    with build_lock(exe):
        if not exe.exists():
            build_notice("the sm_90a emulator binary (5 to 30 s)", describe_kernel(kernel_cu), d)
            with tempfile.TemporaryDirectory(prefix="synth-sm90-") as tmp:
                (pathlib.Path(tmp) / "kernel.cu").write_text(kernel_cu)
                out = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
                _compile([gxx, *CXXFLAGS, "-DSYNTH_EMU_SM90_LINKED", f"-I{tmp}", f"-I{RUNTIME}",
                          str(RUNTIME / harness), str(runtime), "-o", str(out)], "the sm_90a kernel")
                os.replace(out, exe)  # atomic
    return exe


def run_emulated(kernel_cu: str, A_bits: np.ndarray, B_bits: np.ndarray, C_in: Optional[np.ndarray] = None, *,
                 alpha: float = 1.0, beta: float = 0.0, order: str = "forward", seed: int = 0,
                 ldc: Optional[int] = None, block_order: str = "forward", ctas: int = 0) -> tuple[np.ndarray, dict]:
    """Run the kernel once on the emulator: A (M x K) and B (N x K) as 16-bit patterns (uint16: f16 or
    bf16 bits, as the kernel's dtype reads them; K = 0 is run too: the kernel returns at once and writes
    nothing, which this shows), ``C_in`` (M x ldc float32) when given. Returns
    ``(C, info)``: C is M x ``ldc`` float32 starting as NaN, ``info`` the emulator's report (``ok``,
    ``kind`` '' / 'hang' / 'fault' / 'protocol', ``message``, counters, ``tickets_left``, ``wgmma_descs``:
    the distinct ``[A, B]`` wgmma descriptor pairs the kernel issued, ``tensor_maps``: the A and B maps its
    TMA read, each ``dims``, ``stride``, ``box``, ``elem_bytes``, ``swizzle_bytes``; the cluster counters
    ``cluster_size``, ``clusters`` (clusters run), ``multicasts`` (multicast instructions), ``multicast_copies``
    (one per destination CTA), ``remote_arrivals``, ``cluster_syncs`` (cluster barriers completed); ``stores``: TMA
    stores of C completed, ``c_tma``: whether the harness encoded C's tensor map (a TMA-store kernel whose C has a
    base and row stride of multiples of 16 bytes, as the host does; else the kernel stores C from registers)). Clusters
    (``SYNTH_CLUSTER_N`` x ``SYNTH_CLUSTER_M`` CTAs, default 1 x 1; the grid rounded up to whole clusters) run
    one at a time, their CTAs together, in ``block_order``: ``forward`` (launch order), ``reverse`` or
    ``shuffle:SEED`` of the clusters; a split-K
    kernel (``SYNTH_SPLIT_K > 1``) gets ``gridDim.z`` splits, a NaN-filled workspace and zeroed tickets; a
    persistent kernel (``SYNTH_PERSISTENT``) a grid of ``ctas`` CTAs (0: one per tile; a cluster kernel's: a
    multiple of the cluster size, 0: one cluster per cluster-sized tile group; ignored by the others).
    EmulatorError when it cannot run."""
    if not 0 <= ctas <= 1 << 20:
        raise EmulatorError(f"ctas {ctas}: expected 0 (one per tile) .. {1 << 20}")
    size = 1
    for axis in ("M", "N"):
        m = re.search(rf"^#define SYNTH_CLUSTER_{axis} ([0-9]+)", kernel_cu, re.M)
        size *= int(m.group(1)) if m else 1
    if ctas % size and re.search(r"^#define SYNTH_PERSISTENT 1", kernel_cu, re.M):
        raise EmulatorError(f"ctas {ctas}: a persistent grid of {size}-CTA clusters takes a multiple of {size} CTAs",
                            f"pass ctas = {ctas + size - ctas % size} (whole clusters), or 0")
    if order not in ORDERS:
        raise EmulatorError(f"order {order!r}: expected one of {ORDERS}")
    kind, _, bseed = block_order.partition(":")
    if kind not in ("forward", "reverse", "shuffle") or (kind == "shuffle") != bseed.isdigit():
        raise EmulatorError(f"block order {block_order!r}: expected forward, reverse or shuffle:SEED")
    border = {"forward": 0, "reverse": 1}.get(kind, 2 + int(bseed or 0) % 100000)
    A_bits = np.ascontiguousarray(A_bits, np.uint16)
    B_bits = np.ascontiguousarray(B_bits, np.uint16)
    M, K = A_bits.shape
    N = B_bits.shape[0]
    ldc = N if ldc is None else ldc
    if B_bits.shape[1] != K or min(M, N) < 1 or K < 0 or ldc < N or K % 8:
        raise EmulatorError(f"A is {A_bits.shape}, B is {B_bits.shape}, ldc {ldc}: need N x K with the same K >= 0, "
                            "K a multiple of 8, M, N >= 1 and ldc >= N")
    exe = binary(kernel_cu)
    with tempfile.TemporaryDirectory(prefix="synth-sm90-run-") as tmp:
        inp, outp = pathlib.Path(tmp) / "in.bin", pathlib.Path(tmp) / "out.bin"
        head = np.array([M, N, K, ldc, K, K, int(C_in is not None),
                         order_code(order, seed), border, ctas], np.int32)
        with open(inp, "wb") as f:
            f.write(head.tobytes())
            f.write(np.array([alpha, beta], np.float32).tobytes())
            f.write(A_bits.tobytes())
            f.write(B_bits.tobytes())
            if C_in is not None:
                f.write(np.ascontiguousarray(C_in, np.float32).reshape(M, ldc).tobytes())
        try:
            proc = subprocess.run([str(exe), str(inp), str(outp)], capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EmulatorError(f"the emulator ran past {TIMEOUT_S} s") from None
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise EmulatorError(f"the emulator crashed (status {proc.returncode}): {proc.stderr[-2000:]}")
        info = json.loads(lines[-1])
        C = np.fromfile(outp, np.float32).reshape(M, ldc)
    return C, info


def emulate_sm90(kernel_cu: str, M: int, N: int, K: int, *, order: str = "forward", alpha: float = 1.0,
                 beta: float = 0.0, with_c: bool = False, ldc: Optional[int] = None, seed: int = 0,
                 load_when: Optional[str] = None, bk: int = 64, dtype: str = "f16",
                 block_order: str = "forward", ctas: int = 0, activation: str = "none") -> Sm90Result:
    """Run the kernel on A (M x K), B (N x K) f16 drawn from [-1, 1) and compare C with
    ``alpha A @ B.T (+ beta C_in)`` in float64. C starts as NaN so an entry never written shows.
    ``load_when`` (the configuration's load predicate in ``k`` and ``T``): the reference sums only
    the k-tiles (``bk`` wide) where it holds. ``dtype`` ``bf16``: A and B are rounded to bfloat16
    (nearest even) and passed as its bits. ``block_order``, ``ctas``: as :func:`run_emulated`. ``activation``
    ``relu`` (the kernel's ``KernelDesign.activation``): the reference is ``max(..., 0)``."""
    if order not in ORDERS:
        raise EmulatorError(f"order {order!r}: expected one of {ORDERS}")
    ldc = N if ldc is None else ldc
    if min(M, N) < 1 or K < 1 or ldc < N:
        raise EmulatorError(f"shape M={M} N={N} K={K} ldc={ldc}: need M, N, K >= 1 and ldc >= N")
    if K % 8:
        raise EmulatorError(f"K={K}: a tensor map's row stride (2 K bytes) must be a multiple of 16",
                            "use K a multiple of 8 (cuTensorMapEncodeTiled refuses other strides)")
    rng = np.random.default_rng(seed)
    if dtype not in ("f16", "bf16"):
        raise EmulatorError(f"dtype {dtype!r}: expected f16 or bf16")
    A32 = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B32 = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    if dtype == "f16":
        A, B = A32.astype(np.float16), B32.astype(np.float16)
        A_bits, B_bits = A.view(np.uint16), B.view(np.uint16)
    else:
        A_bits, B_bits = bf16_bits(A32), bf16_bits(B32)
        A, B = bf16_value(A_bits), bf16_value(B_bits)
    Cin = rng.uniform(-1, 1, (M, ldc)).astype(np.float32)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    if load_when is not None:
        T = -(-K // bk)
        pred = parse(load_when)
        for k in range(T):
            if not evaluate(pred, {"k": k, "T": T}):
                A64[:, k * bk:(k + 1) * bk] = 0.0
    ref = alpha * (A64 @ B64.T)
    if with_c:
        ref = ref + beta * Cin[:, :N].astype(np.float64)
    if activation == "relu":
        ref = np.maximum(ref, 0.0)
    elif activation != "none":
        raise EmulatorError(f"activation {activation!r}: expected none or relu")
    C, info = run_emulated(kernel_cu, A_bits, B_bits, Cin if with_c else None, alpha=alpha, beta=beta,
                           order=order, seed=seed, ldc=ldc, block_order=block_order, ctas=ctas)
    Cv = C[:, :N].astype(np.float64)
    nan = int(np.isnan(Cv).sum())
    err = float(np.nanmax(np.abs(Cv - ref))) if nan < Cv.size else float("inf")
    pad_ok = bool(np.isnan(C[:, N:]).all()) and not info["guard_written"]
    ok = (info["ok"] and nan == 0 and bool(np.all(np.abs(Cv - ref) <= 1e-2 + 1e-2 * np.abs(ref))) and pad_ok
          and info["tickets_left"] == 0)
    stats = {k: info[k] for k in ("landed", "tx_bytes", "wgmma", "poisoned_ops", "waw", "arrivals", "tickets_left",
                                  "multicasts", "multicast_copies", "remote_arrivals", "cluster_syncs", "stores",
                                  "c_tma")}
    return Sm90Result(ref, ok, info["kind"], info["message"], err, nan, stats, C=C)


__all__ = ["emulate_sm90", "run_emulated", "Sm90Result", "EmulatorRun", "binary", "runtime_object", "ORDERS", "STARVE", "CTA_FIRST", "order_code",
           "KERNEL", "bf16_bits", "bf16_value"]

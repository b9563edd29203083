"""Run a CUDA kernel written against synth's portability API on the CPU.

Input: the text of a ``kernel.cu`` (docs/cuda_kernel.md) and its launch.
Output: the output buffers and what the emulator saw (docs/emulator.md):
NaN-poisoned early reads, unsynchronized reads, write-after-read and
write-after-write hazards, and shared-memory bank conflicts.

The kernel is compiled with ``g++ -std=c++20 -O2 -pthread -DSYNTH_EMULATE``
against ``runtime/synth_emu.h`` (a light header: the API's declarations) and
``runtime/emu_harness.cpp`` (``main``), and linked with
``runtime/synth_emu_runtime.cpp`` (the emulator proper), which is compiled once
per version. Objects and binaries are cached (:func:`cache_dir`) by the hash of
everything that goes into them, so re-running a kernel with another shape or
scheduling policy costs no compile. A build that starts says so in one line on
stderr (what is built, for which kernel, where it is cached: the sm_90a emulator's
takes 20 s to over a minute), unless ``$SYNTH_EMU_QUIET`` is set (:func:`build_notice`).

Left out on purpose: a model of timing (the emulator says whether a kernel is
right, not how fast it is) and plain C++ shared loads/stores, which are not
instrumented (poison still shows in the result).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence, Union

import numpy as np

from ..errors import SynthError
from .launch import gemm_launch

RUNTIME = pathlib.Path(__file__).resolve().parent / "runtime"
POLICIES = ("forward", "reverse", "interleave", "parallel")
"""Thread scheduling policies of the emulator; ``"default"`` means ``"reverse"``."""
BLOCK_ORDERS = ("forward", "reverse", "shuffle")
"""Orders the emulator runs a grid's blocks in: launch order, its reverse, or shuffled (``"shuffle:SEED"``)."""
GEMM_KERNEL = "synth_gemm"
CXXFLAGS = ("-std=c++20", "-O2", "-pthread", "-DSYNTH_EMULATE")

_CTYPES = {
    np.dtype(np.float16): "half",
    np.dtype(np.float32): "float",
    np.dtype(np.int32): "int",
    np.dtype(np.uint32): "uint32_t",
    np.dtype(np.uint8): "unsigned char",
}


class EmulatorError(SynthError):
    """The kernel could not be compiled or run under the emulator."""

    def __init__(self, msg: str, fix: str = "") -> None:
        super().__init__(None, msg, fix)


@dataclass(frozen=True)
class Buf:
    """A global-memory buffer argument of the kernel."""

    name: str
    array: np.ndarray
    """Initial contents (its dtype gives the pointer type: float16 -> ``half*``)."""
    out: bool = False
    """Read the buffer back after the launch."""

    def __post_init__(self) -> None:
        if np.dtype(self.array.dtype) not in _CTYPES:
            raise EmulatorError(f"buffer {self.name}: unsupported dtype {self.array.dtype}")


Arg = Union[Buf, int, float, None]
"""A kernel argument: a buffer, an ``int``, a ``float`` (C++ ``float``) or None (``nullptr``)."""


@dataclass(frozen=True)
class BankConflicts:
    """Shared-memory bank conflicts: extra wavefronts beyond one per phase."""

    main: int
    """In the main loop (``synth_emu_region(1)``, or the loop emulate_gemm marks)."""
    total: int
    by_kind: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """``{"ldmatrix": {"main": n, "other": n}, "cp_async": ..., "lds": ..., "sts": ...}``."""

    def __str__(self) -> str:
        return f"{self.main} in the main loop, {self.total} in total"


@dataclass(frozen=True)
class EmuRun:
    """One launch under the emulator."""

    outputs: Mapping[str, np.ndarray]
    stats: Mapping[str, object]
    """stats.json of the run (counts, ``bank``, ``warnings``, ``errors``)."""
    returncode: int
    stderr: str
    seconds: float
    """Wall time of the run (without compiling)."""
    compile_seconds: float

    @property
    def errors(self) -> list[str]:
        return list(self.stats.get("errors", []))  # type: ignore[arg-type]

    @property
    def warnings(self) -> list[str]:
        return list(self.stats.get("warnings", []))  # type: ignore[arg-type]

    def count(self, key: str) -> int:
        return int(self.stats.get(key, 0))  # type: ignore[arg-type]

    @property
    def early_reads(self) -> int:
        """Reads not ordered after the data they read: not landed yet, or landed/stored
        by another warp in the same barrier interval."""
        return self.count("early_reads") + self.count("unsync_reads")

    @property
    def hazards(self) -> int:
        """Writes into a chunk another warp still reads or a copy still fills."""
        return self.count("war_hazards") + self.count("waw_hazards")

    @property
    def bank_conflicts(self) -> BankConflicts:
        bank = self.stats.get("bank", {})
        assert isinstance(bank, dict)
        by_kind = {k: {r: int(v[r]["conflicts"]) for r in ("main", "other")} for k, v in bank.items()}
        main = sum(v["main"] for v in by_kind.values())
        return BankConflicts(main=main, total=main + sum(v["other"] for v in by_kind.values()), by_kind=by_kind)


@dataclass(frozen=True)
class EmuResult:
    """A GEMM run under the emulator, checked against numpy."""

    C: np.ndarray
    max_abs_err: float
    """max |C - A @ B^T| over the finite entries (inf when C has a NaN/inf)."""
    ok: bool
    """No NaN and every entry within f16 tolerance of the reference."""
    nan_count: int
    early_reads: int
    """Reads of shared memory not ordered after the data's landing (EmuRun.early_reads)."""
    hazards: int
    """Write-after-read and write-after-write hazards on shared memory."""
    bank_conflicts: BankConflicts
    seconds: float
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    policy: str
    stats: Mapping[str, object]
    status: int = 0
    """What the kernel wrote to ``*status`` (0: its run-time preconditions held)."""

    @property
    def clean(self) -> bool:
        """Correct, and the emulator saw nothing wrong on the way."""
        return (self.ok and self.early_reads == 0 and self.hazards == 0 and not self.errors
                and int(self.stats.get("uncommitted_at_exit", 0)) == 0)  # type: ignore[arg-type]

    def summary(self) -> str:
        return (f"[{self.policy}] ok={self.ok} max_abs_err={self.max_abs_err:.3g} nan={self.nan_count} "
                f"early_reads={self.early_reads} hazards={self.hazards} bank_conflicts=({self.bank_conflicts}) "
                f"errors={list(self.errors)} {self.seconds:.2f}s")


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------

def cache_dir() -> pathlib.Path:
    """``$SYNTH_EMU_CACHE`` or ``~/.cache/synth/emu``."""
    env = os.environ.get("SYNTH_EMU_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "synth" / "emu"


def launch_inc(kernel_name: str, args: Sequence[Arg]) -> str:
    """The ``SYNTH_EMU_LAUNCH(run)`` macro calling ``kernel_name`` with ``args``."""
    parts = []
    for i, a in enumerate(args):
        if isinstance(a, Buf):
            parts.append(f"run.buf<{_CTYPES[np.dtype(a.array.dtype)]}>({i})")
        elif a is None:
            parts.append("nullptr")
        elif isinstance(a, (bool, np.bool_)):
            raise EmulatorError(f"argument {i}: a bool; pass an int")
        elif isinstance(a, (int, np.integer)):
            parts.append(f"run.i32({i})")
        elif isinstance(a, (float, np.floating)):
            parts.append(f"run.f32({i})")
        else:
            raise EmulatorError(f"argument {i}: expected Buf, int, float or None, got {type(a).__name__}")
    call = ", ".join([kernel_name] + parts)
    return f"#define SYNTH_EMU_LAUNCH(run) run.launch({call})\n"


def describe_kernel(kernel_cu: str) -> str:
    """A kernel.cu in a few words for :func:`build_notice`: its ``// synth: ...`` first line (the sm_90a kernels'),
    else its problem's name and its ``SYNTH_*`` tile facts."""
    first = kernel_cu.split("\n", 1)[0]
    if first.startswith("// synth: "):
        return first[len("// synth: "):][:160]
    m = re.match(r"// kernel\.cu for '([^']{1,80})'", first)
    facts = kernel_macros(kernel_cu)
    shown = ", ".join(f"{k} {facts[k]}" for k in ("BM", "BN", "BK", "STAGES", "THREADS", "SPLIT_K") if k in facts)
    return (f"'{m.group(1)}'" if m else "a kernel") + (f" ({shown})" if shown else "")


def build_notice(what: str, about: str, cached: Union[str, pathlib.Path]) -> None:
    """One line on stderr as a g++ build of the emulator starts (``what``, ``about``: for what, ``cached``: where the
    result is kept), so that a first run is not a silent wait; nothing when ``$SYNTH_EMU_QUIET`` is set (not ``0``)."""
    if os.environ.get("SYNTH_EMU_QUIET", "") not in ("", "0"):
        return
    print(f"synth emulator: building {what} with g++ for {about} (once; cached in {cached}; "
          "SYNTH_EMU_QUIET=1 silences this)", file=sys.stderr, flush=True)


@contextlib.contextmanager
def build_lock(target: pathlib.Path):
    """Hold an exclusive lock on ``.TARGET.lock`` (beside it) while building ``target``: of the processes that need
    the same build at once (pytest-xdist's workers), one builds and the others wait for it, then find it built. The
    build itself writes a temporary file renamed into place, so that no process ever reads a partial one."""
    import fcntl

    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(f".{target.name}.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _hash(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _gxx() -> str:
    gxx = shutil.which(os.environ.get("CXX", "g++"))
    if gxx is None:
        raise EmulatorError("g++ not found", fix="install g++ 12 or newer, or set CXX")
    return gxx


def _build(cmd: list[str], what: str) -> None:
    """Run the compiler command ``cmd``; raise with its diagnostics when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EmulatorError(f"{what} does not compile against the emulator:\n" + proc.stderr[-6000:],
                            fix="see docs/emulator.md for the API the emulator provides")


def runtime_object() -> pathlib.Path:
    """The compiled ``synth_emu_runtime.cpp`` (built once per version and cached)."""
    gxx = _gxx()
    header = (RUNTIME / "synth_emu.h").read_text()
    source = (RUNTIME / "synth_emu_runtime.cpp").read_text()
    obj = cache_dir() / f"runtime-{_hash(header, source, ' '.join(CXXFLAGS), gxx)}.o"
    if obj.exists():
        return obj
    with build_lock(obj):
        if not obj.exists():  # another process built it while this one waited
            build_notice("the emulator runtime (about 10 s)", "every kernel", obj.parent)
            tmp = obj.with_name(f"{obj.name}.{os.getpid()}.tmp")
            _build([gxx, *CXXFLAGS, f"-I{RUNTIME}", "-c", str(RUNTIME / "synth_emu_runtime.cpp"), "-o", str(tmp)],
                   "the emulator runtime")
            os.replace(tmp, obj)  # atomic: parallel test workers may race here
    return obj


def compile_kernel(kernel_cu: str, kernel_name: str, args: Sequence[Arg],
                   defines: Mapping[str, object] | None = None) -> tuple[pathlib.Path, float]:
    """Compile (or find in the cache) the emulator binary; returns (path, compile seconds)."""
    gxx = _gxx()
    t0 = time.perf_counter()
    runtime = runtime_object()
    inc = launch_inc(kernel_name, args)
    flags = list(CXXFLAGS) + [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
    key = _hash(kernel_cu, inc, " ".join(flags), gxx, runtime.name, (RUNTIME / "emu_harness.cpp").read_text())
    binary = cache_dir() / f"emu-{key}"
    if binary.exists():
        os.utime(binary)  # most recently used: kept by _prune
        return binary, time.perf_counter() - t0
    with build_lock(binary):
        if binary.exists():  # another process built it while this one waited
            return binary, time.perf_counter() - t0
        build_notice(f"the emulator binary of {kernel_name} (seconds)", describe_kernel(kernel_cu), binary.parent)
        with tempfile.TemporaryDirectory(prefix="synth-emu-build-") as tmp:
            src = pathlib.Path(tmp)
            (src / "kernel.cu").write_text(kernel_cu)
            (src / "emu_launch.inc").write_text(inc)
            shutil.copy(RUNTIME / "emu_harness.cpp", src / "emu_harness.cpp")
            out = binary.with_name(f"{binary.name}.{os.getpid()}.tmp")
            _build([gxx, *flags, f"-I{RUNTIME}", f"-I{src}", str(src / "emu_harness.cpp"), str(runtime), "-o",
                    str(out)], "the kernel")
            os.replace(out, binary)
    _prune(cache_dir())
    return binary, time.perf_counter() - t0


CACHE_KEEP = 300
"""Kernel binaries kept in the cache (least recently used go first)."""


def _prune(directory: pathlib.Path, keep: int = CACHE_KEEP) -> None:
    entries = []
    for p in directory.glob("emu-*"):
        try:
            entries.append((p.stat().st_mtime, p))
        except FileNotFoundError:  # another worker pruned it
            pass
    for _, p in sorted(entries, reverse=True)[keep:]:
        p.unlink(missing_ok=True)
        p.with_name(f".{p.name}.lock").unlink(missing_ok=True)  # its build_lock's file


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------

def compile_and_run(kernel_cu: str, kernel_name: str, args: Sequence[Arg], *,
                    grid: tuple[int, int, int], block: tuple[int, int, int], smem_bytes: int,
                    policy: str = "default", defines: Mapping[str, object] | None = None,
                    workdir: str | None = None, timeout: float = 300.0, order: str = "forward") -> EmuRun:
    """Compile ``kernel_cu`` against the emulator and launch ``kernel_name(*args)``.

    Blocks run one at a time in ``order`` (:data:`BLOCK_ORDERS`: ``"forward"``, ``"reverse"`` or
    ``"shuffle:SEED"``). A fatal emulation error (deadlock, divergent warp-collective op, access
    outside shared memory or the buffers) or a crash is returned in
    ``EmuRun.errors``, not raised; only a compile error raises.
    """
    if policy != "default" and policy not in POLICIES:
        raise EmulatorError(f"unknown policy {policy!r}", fix=f"use one of default, {', '.join(POLICIES)}")
    kind, _, seed = order.partition(":")
    if kind not in BLOCK_ORDERS or (kind == "shuffle") != bool(seed) or (seed and not seed.isdigit()):
        raise EmulatorError(f"unknown block order {order!r}", fix="use forward, reverse or shuffle:SEED")
    binary, csec = compile_kernel(kernel_cu, kernel_name, args, defines)
    own = workdir is None
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="synth-emu-run-") if own else workdir)  # type: ignore[arg-type]
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        if not own:
            (run_dir / "kernel.cu").write_text(kernel_cu)
            (run_dir / "emu_launch.inc").write_text(launch_inc(kernel_name, args))
        lines = [f"grid {grid[0]} {grid[1]} {grid[2]}", f"block {block[0]} {block[1]} {block[2]}",
                 f"smem {smem_bytes}", f"policy {policy}", f"timeout {timeout}", f"order {kind} {seed}".rstrip()]
        for i, a in enumerate(args):
            if isinstance(a, Buf):
                arr = np.ascontiguousarray(a.array)
                (run_dir / f"in{i}.bin").write_bytes(arr.tobytes())
                out = f"out{i}.bin" if a.out else "-"
                lines.append(f"arg buf {a.name} {arr.dtype.itemsize} {arr.nbytes} in{i}.bin {out}")
            elif a is None:
                lines.append("arg int 0")  # keeps the argument positions; the kernel gets nullptr
            elif isinstance(a, (float, np.floating)):
                lines.append(f"arg float {float(a)!r}")
            else:
                lines.append(f"arg int {int(a)}")
        (run_dir / "launch.txt").write_text("\n".join(lines) + "\n")
        stats_path = run_dir / "stats.json"
        stats_path.unlink(missing_ok=True)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([str(binary), str(run_dir)], capture_output=True, text=True,
                                  timeout=timeout + 30)
            rc, stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            rc, stderr = -9, f"timed out after {timeout + 30:.0f} s\n{e.stderr or ''}"
        seconds = time.perf_counter() - t0
        stats: dict[str, object] = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        errors = list(stats.get("errors", []))  # type: ignore[call-overload]
        if rc not in (0, 3) or not stats:
            errors.append(f"emulator exited with status {rc}: {stderr.strip()[-2000:]}")
        stats["errors"] = errors
        outputs: dict[str, np.ndarray] = {}
        for i, a in enumerate(args):
            if isinstance(a, Buf) and a.out and rc == 0:
                data = (run_dir / f"out{i}.bin").read_bytes()
                outputs[a.name] = np.frombuffer(data, dtype=a.array.dtype).reshape(a.array.shape).copy()
        return EmuRun(outputs=outputs, stats=stats, returncode=rc, stderr=stderr, seconds=seconds,
                      compile_seconds=csec)
    finally:
        if own:
            shutil.rmtree(run_dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------

STREAM_K_CTAS = 7
"""CTAs of an emulated stream-K launch by default: a prime, so ranges cross tiles at varied k-tiles."""
F16_ATOL = 1e-2
F16_RTOL = 1e-2
"""f16 inputs, f32 accumulation: |C - ref| <= atol + rtol * |ref| (order of summation differs)."""


def gemm_inputs(M: int, N: int, K: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (N x K), f16 in [-1, 1)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, size=(M, K)).astype(np.float16)
    B = rng.uniform(-1.0, 1.0, size=(N, K)).astype(np.float16)
    return A, B


def emulate_gemm(kernel_cu: str, M: int, N: int, K: int, *, BM: int, BN: int, warps: int, smem_bytes: int,
                 seed: int = 0, policy: str = "default", workdir: str | None = None,
                 timeout: float = 300.0, alpha: float = 1.0, beta: float = 0.0, with_c: bool = False,
                 lda: int | None = None, ldb: int | None = None, ldc: int | None = None,
                 order: str = "forward", splits: int | None = None, ctas: int | None = None) -> EmuResult:
    """Run ``synth_gemm`` from ``kernel_cu`` and check ``C = alpha A B^T (+ beta C_in)``.

    A is M x K (row stride ``lda``, default K) f16, B is N x K (``ldb``) f16 ("TN"),
    C is M x N f32 with row stride ``ldc`` (default N); ``with_c`` passes a random
    ``C_in`` (same strides), else nullptr. Grid (ceil(N/BN), ceil(M/BM)), block
    32 * warps threads. Padding columns of C (``ldc > N``) must stay untouched.
    ``EmuResult.status`` is what the kernel reported (a precondition's code, 0 if none).
    A split-K kernel (``SYNTH_SPLIT_K > 1``) gets ``gridDim.z = splits`` (default its own) and a
    NaN-filled workspace and zeroed tickets, which it must leave zeroed (else not ``ok``).
    A stream-K kernel (``SYNTH_STREAM_K 1``) gets a 1-D grid of ``ctas`` CTAs (default
    :data:`STREAM_K_CTAS`, at most one per k-tile iteration), the same workspace and tickets.
    Blocks run in ``order`` (:func:`compile_and_run`).
    """
    lda, ldb, ldc = lda or K, ldb or K, ldc or N
    _check_launch(kernel_cu, BM, BN, warps, smem_bytes)
    split_k = kernel_macros(kernel_cu).get("SPLIT_K", 1)
    splits = split_k if splits is None else splits
    stream_k = kernel_macros(kernel_cu).get("STREAM_K", 0) == 1
    if ctas is None:
        ctas = min(STREAM_K_CTAS, -(-N // BN) * -(-M // BM) * -(-K // kernel_macros(kernel_cu).get("BK", 1)))
    launch = gemm_launch(M, N, BM, BN, split_k=split_k, stream_k=stream_k, ctas=ctas, splits=splits)
    A, B = gemm_inputs(M, N, K, seed)
    rng = np.random.default_rng(seed + 1)
    # buffers at least as wide as the data even when a stride is (deliberately) too small
    Ap = np.zeros((M, max(lda, K)), np.float16)
    Ap[:, :K] = A
    Bp = np.zeros((N, max(ldb, K)), np.float16)
    Bp[:, :K] = B
    wc = max(ldc, N)
    Cin = rng.uniform(-1.0, 1.0, size=(M, wc)).astype(np.float32) if with_c else None
    C0 = np.full((M, wc), np.nan, dtype=np.float32)  # every entry must be written
    status = np.zeros(1, np.int32)
    args: list[Arg] = [Buf("A", Ap), Buf("B", Bp), Buf("C", C0, out=True)]
    args.append(Buf("C_in", Cin) if Cin is not None else None)
    args += [M, N, K, lda, ldb, ldc, float(alpha), float(beta)]
    args += launch.buffers(lambda n: Buf("workspace", np.full(n, np.nan, np.float32)),
                           lambda n: Buf("tickets", np.zeros(n, np.uint32), out=True))
    args.append(Buf("status", status, out=True))
    run = compile_and_run(mark_main_loop(kernel_cu), GEMM_KERNEL, args,
                          grid=launch.grid, block=(32 * warps, 1, 1), smem_bytes=smem_bytes,
                          policy=policy, workdir=workdir, timeout=timeout, order=order)
    ref = alpha * (A.astype(np.float32) @ B.astype(np.float32).T)
    if Cin is not None:
        ref = ref + beta * Cin[:, :N]
    Cfull = run.outputs.get("C", np.full((M, wc), np.nan, dtype=np.float32))
    C = Cfull[:, :N]
    pad_touched = bool(wc > N and np.any(~np.isnan(Cfull[:, N:])))
    nan_count = int(np.count_nonzero(~np.isfinite(C)))
    diff = np.abs(C.astype(np.float64) - ref)
    max_abs_err = float(np.max(diff)) if nan_count == 0 and C.size else float("inf")
    tickets_left = int(np.count_nonzero(run.outputs["tickets"])) if "tickets" in run.outputs else 0
    ok = (nan_count == 0 and not run.errors and not pad_touched and tickets_left == 0
          and bool(np.all(diff <= F16_ATOL + F16_RTOL * np.abs(ref))))
    st = run.outputs.get("status", np.zeros(1, np.int32))
    return EmuResult(C=C, max_abs_err=max_abs_err, ok=ok, nan_count=nan_count, early_reads=run.early_reads,
                     hazards=run.hazards, bank_conflicts=run.bank_conflicts, seconds=run.seconds,
                     errors=tuple(run.errors), warnings=tuple(run.warnings),
                     policy=str(run.stats.get("policy", policy)), stats=run.stats, status=int(st[0]))


F32_MAX = float(np.finfo(np.float32).max)


def nan_from_finite(out: np.ndarray, A: np.ndarray, B: np.ndarray, C_in, alpha: float, beta: float) -> int:
    """The NaN count of ``out``, an ``alpha A B^T + beta C_in`` result, when no arithmetic can explain one: every
    input finite and ``|alpha| K max|A| max|B| + |beta| max|C_in|`` below float32's largest value (no partial sum
    overflows to inf, so no inf - inf). Else 0. A NaN counted here is a kernel reading memory it must not
    (NaN-poisoned early reads, an unwritten workspace): an error, never a value."""
    nans = int(np.count_nonzero(np.isnan(out)))
    if nans == 0:
        return 0
    ins = [np.asarray(A, np.float64), np.asarray(B, np.float64)]
    if C_in is not None:
        ins.append(np.asarray(C_in, np.float64))
    if not all(np.all(np.isfinite(x)) for x in ins) or not (np.isfinite(alpha) and np.isfinite(beta)):
        return 0
    K = ins[0].shape[-1] if ins[0].ndim == 2 else 1
    amax = float(np.max(np.abs(ins[0]))) if ins[0].size else 0.0
    bmax = float(np.max(np.abs(ins[1]))) if ins[1].size else 0.0
    cmax = float(np.max(np.abs(ins[2]))) if len(ins) > 2 and ins[2].size else 0.0
    bound = abs(alpha) * K * amax * bmax + abs(beta) * cmax
    return nans if bound < F32_MAX / 2 else 0


def mark_main_loop(kernel_cu: str) -> str:
    """Return ``kernel_cu`` with its main loop marked for the bank-conflict split.

    synth's kernels open each part with a ``// ---- <part>`` comment line; the
    ``// ---- body`` part (the pipelined loop, remainder steps included) runs
    as region 1 until the next ``// ---- `` line. Kernels that call
    ``synth_emu_region`` themselves are left alone.
    """
    if "synth_emu_region(" in kernel_cu:
        return kernel_cu
    out: list[str] = []
    inside = False
    for line in kernel_cu.split("\n"):
        text = line.strip()
        if text.startswith("// ---- "):
            indent = line[: len(line) - len(line.lstrip())]
            if inside:
                out.append(f"{indent}synth_emu_region(0);")
                inside = False
            if text.startswith("// ---- body"):
                out.append(f"{indent}synth_emu_region(1);")
                inside = True
        out.append(line)
    return "\n".join(out)


def kernel_macros(kernel_cu: str) -> dict[str, int]:
    """The ``#define SYNTH_<NAME> <int>`` facts a kernel.cu states (SYNTH_BM, SYNTH_SMEM_BYTES, ...)."""
    out = {}
    for m in re.finditer(r"^#define SYNTH_([A-Z_]+) (\d+)\s*$", kernel_cu, re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def _check_launch(kernel_cu: str, BM: int, BN: int, warps: int, smem_bytes: int) -> None:
    facts = kernel_macros(kernel_cu)
    given = {"BM": BM, "BN": BN, "THREADS": 32 * warps, "SMEM_BYTES": smem_bytes}
    for name, value in given.items():
        if name in facts and facts[name] != value:
            raise EmulatorError(f"kernel.cu says SYNTH_{name} {facts[name]} but the launch uses {value}",
                                fix="launch with the kernel's own tile, thread and shared-memory sizes")

"""An attention folder's kernel as a Python callable: ``synth.kernel.load(OUT)(q, k, v)`` (docs/api.md, "An attention
folder").

Input: the files of a ``kind: attention`` output folder that :func:`synth.kernel.load` has read against the folder's
sha256 manifest (``problem.yaml``, ``schedule.json``, ``program.json``, ``kernel.cu``). Output: an
:class:`AttentionKernel`, ``kernel(q, k, v, *, causal=None, scale=None) -> o``: softmax attention
``softmax(scale q k^T) v`` per batch and head, computed by the folder's sm_90a kernel

* on the CPU emulator (``backend="emulator"``: ``runtime/attn_harness.cpp`` linked with the emulator's runtime, the
  binary cached by :func:`synth.emit.sm90.emulate.binary`; slow, for small shapes; its adversarial semantics report
  a hang, a race or a late read as an error), or
* on an sm_90 GPU (``backend="cuda"``) through CUDA Python: the folder's cubin (``images``, tried first) or nvcc's,
  tensor maps of :func:`synth.emit.sm90.runner.attention_params`, the kernel's grid ``(ceil(Sq / BM), B H)``, its
  threads and dynamic shared memory (its ``SYNTH_ATTN_*`` defines).

Arguments, checked before any launch (the ``error`` class :func:`synth.kernel.load` gives: its
:class:`~synth.kernel.KernelError`): q ``[B, H, Sq, d]``, k and v ``[B, H, Sk, d]`` numpy arrays, ``d`` the folder's
head dim, ``B, H, Sq, Sk >= 1``, ``B H <= 65535`` (the grid's y extent) and ``B H S < 2^31`` rows. Their type: for
``dtype: f16`` float16; for ``bf16`` uint16 arrays are bfloat16 bit patterns, ``ml_dtypes.bfloat16`` arrays are
taken as they are (their bits) and float arrays are rounded to bfloat16 (nearest even). ``causal`` (None: the
folder's) must be the mask the kernel was emitted with (``causal:`` of problem.yaml: the mask is compiled in);
``scale`` (None: ``1 / sqrt(d)``) any finite number. The result is a new float32 array the shape of q (the kernel
writes O in f32); a row that sees no key (causal, ``Sq > Sk``) is 0, as FlashAttention returns it. Inputs are never
modified.

Light: numpy, PyYAML and synth's base and emitter modules only (no OR-Tools, no Z3: the solver's model package is not
imported; that kernel.cu is the proven program's is the manifest's word here, and ``synth verify OUT`` re-emits it).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from ...errors import Loc, SynthError
from ..emulate import EmulatorError
from .emulate import bf16_bits, order_code
from .emulate_attention import kernel_facts, run_harness

KERNEL = "synth_attention_sm90"
"""The kernel's name in kernel.cu (:data:`synth.emit.sm90.attention_kernel.KERNEL`, which is not imported here: that
module loads the solver's model package)."""
MAX_BATCH_HEADS = 65535
"""``B H`` at most: the grid's y extent."""
ROWS_MAX = 2**31 - 1
"""``B H Sq`` and ``B H Sk`` at most: the kernel indexes rows in a C ``int``."""


@dataclass(frozen=True)
class AttentionFacts:
    """What an attention folder's kernel.cu states (its ``SYNTH_ATTN_*`` defines), checked against problem.yaml."""

    name: str
    head_dim: int
    bm: int
    bn: int
    threads: int
    smem_bytes: int
    causal: bool
    dtype: str
    """``f16`` or ``bf16``: Q, K and V's element type."""

    def grid(self, batch_heads: int, seqlen_q: int) -> tuple[int, int, int]:
        """The launch grid: ``(ceil(Sq / BM), B H, 1)``."""
        return (-(-seqlen_q // self.bm), batch_heads, 1)

    def flops(self, batch: int, heads: int, seqlen_q: int, seqlen_k: int) -> float:
        """``4 B H Sq Sk d`` (the two GEMMs), halved under the causal mask (FlashAttention's count)."""
        f = 4.0 * batch * heads * seqlen_q * seqlen_k * self.head_dim
        return f / 2 if self.causal else f


def _int(doc, key: str, path: str) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise SynthError(Loc(path), f"problem.yaml: {key} is {v!r}, not an integer", "re-run 'synth solve'")
    return v


def attention_facts(out: str, files: dict) -> AttentionFacts:
    """The :class:`AttentionFacts` of an attention folder's files (``problem.yaml``, ``schedule.json`` and
    ``kernel.cu`` bytes, read by :func:`synth.kernel.read_folder` against the manifest): kernel.cu's head dim, tile,
    mask and dtype must be problem.yaml's, its threads schedule.json's warp groups. SynthError (exit 2) naming the
    file otherwise."""
    # here, not at the top: YAML and the readers load when a folder is read
    from ...readfile import decode_utf8, load_json
    from ...yamlnodes import read_yaml_text

    ypath, spath, kpath = (os.path.join(out, n) for n in ("problem.yaml", "schedule.json", "kernel.cu"))
    doc = read_yaml_text(decode_utf8(files["problem.yaml"], ypath, "problem.yaml"), ypath)
    if doc.get("kind") != "attention":
        raise SynthError(Loc(ypath), f"problem '{doc.get('name', '?')}' is kind: {doc.get('kind')}, not attention",
                         "load a folder 'synth solve' wrote for a kind: attention file")
    want = {"D": _int(doc, "head_dim", ypath), "BM": _int(doc, "BM", ypath), "BN": _int(doc, "BN", ypath),
            "CAUSAL": int(doc.get("causal", False) is True), "BF16": int(doc.get("dtype", "f16") == "bf16")}
    sdoc = load_json(files["schedule.json"], 1 << 20, "schedule.json", path=spath)
    if not isinstance(sdoc, dict) or sdoc.get("format") != "synth-ws-schedule" or sdoc.get("kind") != "attention":
        raise SynthError(Loc(spath), "schedule.json is not an attention body's schedule", "re-run 'synth solve'")
    arr = sdoc.get("arrangement") if isinstance(sdoc.get("arrangement"), dict) else {}
    consumers = arr.get("consumers")
    source = files["kernel.cu"].decode("utf-8", errors="replace")
    try:
        got = kernel_facts(source)
    except EmulatorError as e:
        raise SynthError(Loc(kpath), f"kernel.cu: {e.msg}", "re-run 'synth solve' on problem.yaml") from None
    for key, value in want.items():
        if got.get(key) != value:
            raise SynthError(Loc(kpath), f"kernel.cu states SYNTH_ATTN_{key} {got.get(key)}, problem.yaml asks for "
                             f"{value}: files of two folders", "re-run 'synth solve' on problem.yaml")
    if not isinstance(consumers, int) or got.get("THREADS") != 128 * (1 + consumers) or "SMEM_BYTES" not in got:
        raise SynthError(Loc(kpath), f"kernel.cu states {got.get('THREADS')} threads, schedule.json has "
                         f"{consumers} consumer warp groups and a producer: files of two folders",
                         "re-run 'synth solve' on problem.yaml")
    name = doc.get("name") if isinstance(doc.get("name"), str) else "attention"
    return AttentionFacts(name, got["D"], got["BM"], got["BN"], got["THREADS"], got["SMEM_BYTES"],
                          bool(got["CAUSAL"]), "bf16" if got["BF16"] else "f16")


def run_attention_emulated(kernel_cu: str, q_bits: np.ndarray, k_bits: np.ndarray, v_bits: np.ndarray, *,
                           scale: float, order: str = "forward", seed: int = 0) -> tuple[np.ndarray, dict]:
    """``kernel_cu`` run on the emulator over its whole grid (one CTA at a time, each CTA's threads in ``order``,
    :data:`synth.emit.sm90.emulate.ORDERS` less the cluster ones) on the given inputs: q ``[B, H, Sq, d]``, k and v
    ``[B, H, Sk, d]`` as 16-bit patterns (uint16: f16 or bf16, the kernel's). Returns ``(O [B, H, Sq, d] float32, NaN
    where the kernel wrote nothing; the harness's report: ok, kind, message, guard_written, counters)``.
    EmulatorError when it cannot run (g++ missing, the emulator crashing or running past its time)."""
    return run_harness(kernel_cu, q_bits, k_bits, v_bits, scale=scale, code=order_code(order, seed))


class AttentionJob:
    """A launch made ready on the GPU (inputs uploaded once): :meth:`run`, :meth:`fetch` (``(o, 0)``),
    :meth:`time_ms` (CUDA events), :meth:`close`; ``registers``, ``device``, ``image`` as :class:`synth.kernel.Prepared`
    has them."""

    def __init__(self, run, fetch, time_ms, close, registers: Optional[int], device: str, image: str) -> None:
        self.run, self.fetch, self.time_ms, self.close = run, fetch, time_ms, close
        self.registers, self.device, self.image = registers, device, image

    def __enter__(self) -> "AttentionJob":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AttentionKernel:
    """``kernel(q, k, v, *, causal=None, scale=None) -> o`` (the module docstring)."""

    def __init__(self, path: str, source: str, facts: AttentionFacts, backend: str,
                 images: Sequence[tuple[str, bytes]] = (), error: Callable = SynthError) -> None:
        self.path = path
        self.source = source
        self.facts = facts
        self.backend = backend
        self.images = tuple(images)
        """Precompiled ``(label, cubin or PTX)`` of kernel.cu for sm_90a, tried before nvcc."""
        self.error = error
        """The error class of a refused argument or launch: ``error(loc, message, fix)``."""
        self.last_info: Optional[dict] = None
        """The emulator's report of the last call (emulator backend)."""

    @property
    def name(self) -> str:
        return self.facts.name

    def __repr__(self) -> str:
        f = self.facts
        return (f"<synth.kernel.AttentionKernel {f.name}: head dim {f.head_dim}, {f.bm}x{f.bn} tiles, {f.dtype}, "
                f"{'causal' if f.causal else 'no mask'}, {f.threads // 128 - 1} consumer warp groups, "
                f"backend {self.backend}>")

    def _fail(self, msg: str, fix: str):
        return self.error(Loc(self.path), msg, fix)

    def _bits(self, name: str, x) -> np.ndarray:
        f = self.facts
        if not isinstance(x, np.ndarray):
            raise self._fail(f"{name} is a {type(x).__name__}, not a numpy array",
                             f"pass a numpy array, e.g. np.asarray({name}, dtype=np.float16)")
        if x.ndim != 4:
            raise self._fail(f"{name} has {x.ndim} dimension(s) {x.shape}; the kernel takes [batch, heads, seqlen, "
                             f"{f.head_dim}]", f"reshape {name} to 4 dimensions (a single head: {name}[None, None])")
        if f.dtype == "f16":
            if x.dtype != np.float16:
                raise self._fail(f"{name} has dtype {x.dtype}; this kernel reads float16 (problem.yaml's dtype: f16)",
                                 f"convert it: {name}.astype(np.float16)")
            return np.ascontiguousarray(x).view(np.uint16)
        if x.dtype == np.uint16:
            return np.ascontiguousarray(x)
        if x.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: its bits as they are
            return np.ascontiguousarray(x).view(np.uint16)
        if x.dtype.kind != "f":
            raise self._fail(f"{name} has dtype {x.dtype}; this kernel reads bfloat16 (problem.yaml's dtype: bf16)",
                             "pass float values (rounded to bfloat16), uint16 bfloat16 bit patterns or "
                             "ml_dtypes.bfloat16 arrays")
        with np.errstate(invalid="ignore", over="ignore"):
            return bf16_bits(np.asarray(x, np.float32))

    def check(self, q, k, v, *, causal: Optional[bool] = None, scale: Optional[float] = None):
        """``(q bits, k bits, v bits, scale)`` checked (the module docstring); raises the kernel's error class."""
        f = self.facts
        if causal is not None and bool(causal) != f.causal:
            raise self._fail(f"causal={bool(causal)}, but this kernel was emitted with causal: "
                             f"{str(f.causal).lower()} (the mask is compiled into kernel.cu)",
                             "leave causal out, or solve the problem with causal: "
                             f"{str(bool(causal)).lower()} and load that folder")
        qb, kb, vb = self._bits("q", q), self._bits("k", k), self._bits("v", v)
        (B, H, Sq, d), (Bk, Hk, Sk, dk) = qb.shape, kb.shape
        if vb.shape != kb.shape:
            raise self._fail(f"k is {kb.shape} but v is {vb.shape}: they must have one shape [batch, heads, "
                             "seqlen_k, d]", "pass v with k's shape")
        if (Bk, Hk) != (B, H):
            raise self._fail(f"q is {qb.shape} and k is {kb.shape}: batch and heads differ",
                             "pass q, k and v of the same batch and heads (repeat k and v's heads for grouped "
                             "queries)")
        if d != f.head_dim or dk != f.head_dim:
            raise self._fail(f"head dim {d if d != f.head_dim else dk}: this kernel was emitted for head dim "
                             f"{f.head_dim}", f"solve an attention problem with head_dim: {d} and load that folder")
        if min(B, H, Sq, Sk) < 1:
            raise self._fail(f"q is {qb.shape}, k is {kb.shape}: batch, heads, seqlen_q and seqlen_k must be >= 1",
                             "pass non-empty arrays")
        if B * H > MAX_BATCH_HEADS or B * H * max(Sq, Sk) > ROWS_MAX:
            raise self._fail(f"batch x heads = {B * H}, seqlen {max(Sq, Sk)}: the kernel takes batch x heads <= "
                             f"{MAX_BATCH_HEADS} (its grid's y) and batch x heads x seqlen < 2^31 rows",
                             "split the batch into several calls")
        if scale is None:
            scale = 1.0 / math.sqrt(f.head_dim)
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            raise self._fail(f"scale = {scale!r} is not a number", "pass a float, or leave it out for "
                             "1 / sqrt(head_dim)") from None
        if not math.isfinite(scale):
            raise self._fail(f"scale = {scale} is not finite", "pass a finite scale")
        return qb, kb, vb, scale

    def __call__(self, q, k, v, *, causal: Optional[bool] = None, scale: Optional[float] = None) -> np.ndarray:
        """``softmax(scale q k^T) v`` (the module docstring): a new float32 ``[B, H, Sq, d]`` array."""
        qb, kb, vb, scale = self.check(q, k, v, causal=causal, scale=scale)
        if self.backend == "cuda":
            with self.prepare(q, k, v, causal=causal, scale=scale) as job:
                job.run()
                out, _ = job.fetch()
            where = "the GPU"
        else:
            try:
                out, info = run_attention_emulated(self.source, qb, kb, vb, scale=scale)
            except EmulatorError as e:
                raise self._fail(f"the emulator could not run the kernel: {e.msg}", "see docs/emulator.md") from None
            self.last_info = info
            if info.get("kind") or not info.get("ok", False) or info.get("guard_written"):
                what = info.get("kind") or ("a store past O" if info.get("guard_written") else "a hazard")
                raise self._fail(f"the emulator reports: {what}: {info.get('message', '')}",
                                 "run 'synth verify' on the folder; see docs/emulator.md")
            where = "the emulator"
        nan = int(np.count_nonzero(np.isnan(out)))
        if nan and self._finite_inputs(qb, kb, vb, scale):
            raise self._fail(f"{where} returned {nan} NaN(s) from finite inputs: the kernel left rows unwritten or "
                             "computed garbage (an edited or broken kernel.cu)",
                             "re-run 'synth solve' for this problem; see docs/emulator.md")
        return out

    def _finite_inputs(self, qb, kb, vb, scale: float) -> bool:
        exp = 0x7C00 if self.facts.dtype == "f16" else 0x7F80  # all exponent bits: inf or NaN
        return all(not np.any((x & exp) == exp) for x in (qb, kb, vb)) and math.isfinite(scale)

    def prepare(self, q, k, v, *, causal: Optional[bool] = None, scale: Optional[float] = None) -> AttentionJob:
        """The launch of ``self(q, k, v, causal=, scale=)`` made ready on the GPU through CUDA Python: ``fetch()``
        gives ``(o, 0)``. Raises the kernel's error class for bad arguments or a kernel that does not load,
        SynthError without an sm_90 GPU."""
        qb, kb, vb, scale = self.check(q, k, v, causal=causal, scale=scale)
        # here, not at the top: CUDA Python loads only when a GPU is used
        from .runner import CudaDevice, GpuError, attention_params, gpu_status

        ok, why = gpu_status()
        if not ok:
            raise SynthError(None, f"no sm_90 GPU available: {why}",
                             "run on an H100/H200 with CUDA Python (pip install '.[gpu]'), or use backend='emulator'")
        f = self.facts
        B, H, Sq, d = qb.shape
        Sk = kb.shape[2]
        out = np.empty((B, H, Sq, d), np.float32)
        dev = CudaDevice()
        try:
            fn = dev.function(self.source, KERNEL, f.smem_bytes, arch="sm_90a", images=self.images)
            dq, dk, dv = dev.upload(qb), dev.upload(kb), dev.upload(vb)
            do = dev.alloc(out.nbytes)
            dev.memset(do, out.nbytes, 0xFF)  # NaN: a row the kernel does not write shows
            params = attention_params(dev, head_dim=d, bm=f.bm, bn=f.bn, dtype=f.dtype, dQ=dq, dK=dk, dV=dv, dO=do,
                                      batch_heads=B * H, seqlen_q=Sq, seqlen_k=Sk, scale=scale)
        except GpuError as exc:
            dev.close()
            raise self._fail(f"the GPU could not run kernel.cu: {exc}",
                             "check the CUDA toolkit and driver versions (docs/gpu.md)") from None
        except BaseException:
            dev.close()
            raise
        grid = f.grid(B * H, Sq)

        def run():
            dev.launch(fn, grid, (f.threads, 1, 1), f.smem_bytes, params)

        def fetch():
            dev.synchronize()
            return dev.download(out, do).copy(), 0

        return AttentionJob(run, fetch, lambda repeats, before=None: dev.time_ms(run, repeats, before), dev.close,
                            dev.registers(fn), dev.name, dev.loaded_from.get(int(fn), "?"))


__all__ = ["AttentionKernel", "AttentionFacts", "AttentionJob", "attention_facts", "run_attention_emulated", "KERNEL",
           "MAX_BATCH_HEADS", "ROWS_MAX"]

"""Run the FlashAttention-forward kernel on the CPU emulator and compare with numpy (docs/attention.md, "The kernel").

:func:`emulate_attention` draws q ``[B, H, Sq, d]``, k and v ``[B, H, Sk, d]`` (standard normal from ``seed``, rounded
to the kernel's f16 or bf16), runs ``kernel.cu`` over its whole grid on the emulator (``runtime/attn_harness.cpp``
linked with the emulator's runtime object; the binary cached by :func:`synth.emit.sm90.emulate.binary`), in a thread
``order`` of :data:`synth.emit.sm90.emulate.ORDERS` (the cluster ones excepted: the kernel is one CTA) or one consumer
lagging alone (:func:`consumer_orders`), and returns O
beside the reference: f32 softmax attention of the same rounded inputs (float64 arithmetic, scale ``1 / sqrt(d)``, the
causal mask bottom-right aligned, a row that sees no key 0).
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import subprocess
import tempfile
from dataclasses import dataclass, field

import numpy as np

from ..emulate import EmulatorError
from .emulate import ORDERS, TIMEOUT_S, EmulatorRun, bf16_bits, bf16_value, binary, order_code

HARNESS = "attn_harness.cpp"
ATTENTION_ORDERS = tuple(o for o in ORDERS if not o.startswith("cta"))
"""The thread orders that apply to a one-CTA kernel: ``forward``, ``reverse``, ``random`` (seeded), ``starve``."""
STARVE_WG = 200000
"""The harness's code of order ``starve_consumerW``: ``STARVE_WG + W + 1`` (the emulator's ``starve_wgW`` of the
consumer's warp group)."""


def consumer_orders(kernel_cu: str) -> tuple[str, ...]:
    """The orders ``starve_consumer0`` .. ``starve_consumer{C-1}`` of a kernel of ``C`` consumer warp groups: thread 1 of
    that consumer's warp group runs only when no other thread can, so that one consumer lags while the producer and
    the other consumers run ahead of it (``starve`` holds back every consumer's thread 1 alike)."""
    return tuple(f"starve_consumer{w}" for w in range(kernel_facts(kernel_cu)["THREADS"] // 128 - 1))


def attention_orders(kernel_cu: str) -> tuple[str, ...]:
    """Every thread order of the kernel: :data:`ATTENTION_ORDERS` and its :func:`consumer_orders`."""
    return ATTENTION_ORDERS + consumer_orders(kernel_cu)
TOLERANCE = {"f16": 5e-3, "bf16": 1e-2}
"""``|O - ref| <= tol (1 + |ref|)`` everywhere: P is rounded to the input dtype before ``pv`` (as FlashAttention does),
the rest is f32. Measured errors are ten times smaller: at most 4.3e-4 (f16) and 9.2e-4 (bf16)."""


@dataclass(frozen=True)
class AttentionRun(EmulatorRun):
    """One emulator run of the attention kernel: ``ok`` when it ran to the end, no NaN, within :data:`TOLERANCE`,
    nothing written past O."""

    O: np.ndarray = field(kw_only=True)
    """``[B, H, Sq, d]`` f32, NaN where the kernel wrote nothing."""


def kernel_facts(kernel_cu: str) -> dict:
    """The kernel's ``SYNTH_ATTN_*`` defines (``D``, ``BM``, ``BN``, ``THREADS``, ``CAUSAL``, ``BF16``, ...).
    EmulatorError for a text that is not an attention kernel."""
    facts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define SYNTH_ATTN_([A-Z0-9_]+) ([0-9]+)$",
                                                                 kernel_cu, re.M)}
    if not {"D", "BM", "BN", "CAUSAL", "BF16"} <= set(facts):
        raise EmulatorError("not an attention kernel: no SYNTH_ATTN_D / BM / BN / CAUSAL / BF16 defines",
                            "emit it with synth.emit.sm90.attention_kernel.emit_attention_kernel")
    return facts


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool, scale: float) -> np.ndarray:
    """Softmax attention in float64: ``softmax(scale q k^T) v`` per batch and head, the causal mask bottom-right
    aligned (row ``r`` sees key ``c`` iff ``c <= r + Sk - Sq``), a row that sees no key 0 (FlashAttention's)."""
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * scale
    sq, sk = q.shape[2], k.shape[2]
    if causal:
        r = np.arange(sq)[:, None]
        c = np.arange(sk)[None, :]
        s = np.where(c <= r + sk - sq, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    seen = np.isfinite(mx)
    p = np.exp(s - np.where(seen, mx, 0.0))
    p = np.where(seen, p, 0.0)
    lsum = p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bhqd", p / np.where(lsum > 0, lsum, 1.0), v.astype(np.float64))
    return out


def emulate_attention(kernel_cu: str, *, batch: int, heads: int, seqlen_q: int, seqlen_k: int, causal: bool,
                      order: str = "forward", seed: int = 0, block_order: str = "forward") -> AttentionRun:
    """Run ``kernel_cu`` (an :func:`~synth.emit.sm90.attention_kernel.emit_attention_kernel` text) on the emulator:
    inputs drawn from ``seed``, the grid ``(ceil(Sq / BM), batch heads)`` run one CTA at a time in ``block_order``
    (``forward``, ``reverse`` or ``shuffle:SEED``), each CTA's threads in ``order`` (:func:`attention_orders`;
    ``random`` seeded by ``seed``). ``causal`` must be the kernel's mask (the reference's). EmulatorError when it
    cannot run (a shape below 1, an order that does not apply, g++ missing, the emulator crashing)."""
    facts = kernel_facts(kernel_cu)
    if bool(facts["CAUSAL"]) != causal:
        raise EmulatorError(f"causal={causal}, but the kernel was emitted with causal={bool(facts['CAUSAL'])}")
    if min(batch, heads, seqlen_q, seqlen_k) < 1:
        raise EmulatorError(f"batch {batch}, heads {heads}, seqlen_q {seqlen_q}, seqlen_k {seqlen_k}: each >= 1")
    orders = attention_orders(kernel_cu)
    if order not in orders:
        raise EmulatorError(f"order {order!r}: expected one of {orders}")
    code = STARVE_WG + int(order[15:]) + 1 if order.startswith("starve_consumer") else order_code(order, seed)
    kind, _, bseed = block_order.partition(":")
    if kind not in ("forward", "reverse", "shuffle") or (kind == "shuffle") != bseed.isdigit():
        raise EmulatorError(f"block order {block_order!r}: expected forward, reverse or shuffle:SEED")
    border = {"forward": 0, "reverse": 1}.get(kind, 2 + int(bseed or 0) % 100000)
    d = facts["D"]
    dtype = "bf16" if facts["BF16"] else "f16"
    rng = np.random.default_rng(seed)
    shapes = {"q": (batch, heads, seqlen_q, d), "k": (batch, heads, seqlen_k, d), "v": (batch, heads, seqlen_k, d)}
    bits, vals = {}, {}
    for name, shp in shapes.items():
        x = rng.standard_normal(shp).astype(np.float32)
        if dtype == "f16":
            h = x.astype(np.float16)
            bits[name], vals[name] = h.view(np.uint16), h.astype(np.float32)
        else:
            bits[name] = bf16_bits(x)
            vals[name] = bf16_value(bits[name])
    scale = 1.0 / math.sqrt(d)
    ref = reference(vals["q"], vals["k"], vals["v"], causal=causal, scale=scale)
    O, info = run_harness(kernel_cu, bits["q"], bits["k"], bits["v"], scale=scale, code=code, border=border)
    nan = int(np.isnan(O).sum())
    diff = np.abs(O.astype(np.float64) - ref)
    err = float(np.nanmax(diff)) if nan < O.size else float("inf")
    tol = TOLERANCE[dtype]
    ok = bool(info["ok"] and nan == 0 and not info["guard_written"] and np.all(diff <= tol * (1 + np.abs(ref))))
    stats = {k: info[k] for k in ("ctas", "landed", "tx_bytes", "wgmma", "poisoned_ops", "waw", "arrivals")}
    return AttentionRun(ref, ok, info["kind"], info["message"], err, nan, stats, O=O)


def run_harness(kernel_cu: str, q_bits: np.ndarray, k_bits: np.ndarray, v_bits: np.ndarray, *, scale: float,
                code: int, border: int = 0) -> tuple[np.ndarray, dict]:
    """One run of ``kernel_cu`` in the attention harness (``runtime/attn_harness.cpp``): q ``[B, H, Sq, d]``, k and v
    ``[B, H, Sk, d]`` as 16-bit patterns (the kernel's f16 or bf16), the thread order's harness ``code``
    (:func:`synth.emit.sm90.emulate.order_code`, or a ``starve_consumerW`` code) and the CTA order ``border`` (0
    forward, 1 reverse, 2 + seed shuffled). Returns ``(O [B, H, Sq, d] float32, NaN where the kernel wrote nothing;
    the harness's report)``. EmulatorError when it cannot run (g++ missing, the emulator crashing or running past
    its time)."""
    B, H, Sq, d = q_bits.shape
    Sk = k_bits.shape[2]
    exe = binary(kernel_cu, HARNESS)
    with tempfile.TemporaryDirectory(prefix="synth-attn-run-") as tmp:
        inp, outp = pathlib.Path(tmp) / "in.bin", pathlib.Path(tmp) / "out.bin"
        with open(inp, "wb") as f:  # the harness's input: the launch, the scale, q, k and v
            f.write(np.array([B * H, Sq, Sk, code, border], np.int32).tobytes())
            f.write(np.array([scale], np.float32).tobytes())
            for x in (q_bits, k_bits, v_bits):
                f.write(np.ascontiguousarray(x, np.uint16).tobytes())
        try:
            proc = subprocess.run([str(exe), str(inp), str(outp)], capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EmulatorError(f"the emulator ran past {TIMEOUT_S} s") from None
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise EmulatorError(f"the emulator crashed (status {proc.returncode}): {proc.stderr[-2000:]}")
        return np.fromfile(outp, np.float32).reshape(B, H, Sq, d), json.loads(lines[-1])


__all__ = ["emulate_attention", "AttentionRun", "reference", "kernel_facts", "ATTENTION_ORDERS", "TOLERANCE",
           "attention_orders", "consumer_orders", "STARVE_WG",
           "HARNESS", "run_harness"]

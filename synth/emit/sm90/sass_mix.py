"""Static figures of an sm_90a kernel's SASS: the consumer's main loop, read with synth.emit.sass.

:func:`consumer_loop` finds the innermost loop with the most HGMMA and no global or shared
store (the consumer's k-loop, not the epilogue); :func:`figures` measures it: instructions per
HGMMA and the longest HGMMA-free run (wrapping around the loop), NOP and ``@!PT`` excluded,
SYNCS per k-tile, and kernel-wide counts (UTMALDG, LDGSTS, HMMA), registers, setmaxnreg
operands, spills. Static proxies, not timings (benchmarks/sass_sm90.py, docs/hopper_kernel.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

from .. import sass


def consumer_loop(insns) -> Optional[list]:
    """The innermost loop with the most HGMMA and no STG (the consumer's main loop)."""
    best, best_key = None, None
    for body in sass.backward_loops(insns):
        n = sum(x.op == "HGMMA" for x in body)
        if not n or any(x.op in ("STG", "STS", "UTMASTG") for x in body):
            continue
        key = (n, -len(body))
        if best_key is None or key > best_key:
            best, best_key = body, key
    return best


def figures(c: sass.Compiled, hgmma_per_ktile: int) -> dict:
    """The figures of ``c`` with ``hgmma_per_ktile`` HGMMA per k-tile and consumer warp group."""
    insns = sass.parse_sass(c.sass)
    ops = Counter(i.op for i in insns)
    loop = consumer_loop(insns) or []
    real = [x for x in loop if x.op != "NOP" and x.pred != "@!PT"]
    n = sum(x.op == "HGMMA" for x in real)
    run = longest = 0
    if n:
        seq = real + real
        for x in seq:
            run = 0 if x.op == "HGMMA" else run + 1
            longest = max(longest, run)
        longest = min(longest, len(real))
    ktiles = n / hgmma_per_ktile if n else 0
    setmax = sorted({x.operands for x in insns if x.op == "USETMAXREG"})
    shapes = sorted({x.opcode for x in real if x.op == "HGMMA"})
    return {
        "hgmma_shape": ",".join(s.split(".")[1] for s in shapes) or "-",
        "loop_hgmma": n,
        "insn_per_hgmma": round(len(real) / n, 2) if n else float("nan"),
        "longest_free": longest,
        "syncs_per_ktile": round(sum(x.op == "SYNCS" for x in real) / ktiles, 2) if ktiles else float("nan"),
        "utmaldg_total": ops["UTMALDG"],
        "utmastg_total": ops["UTMASTG"],
        "ldgsts": ops["LDGSTS"],
        "hmma": ops["HMMA"],
        "registers": c.registers,
        "setmaxnreg": " ".join(setmax) or "-",
        "spills": c.spill_stores + c.spill_loads,
        "static_smem": c.static_smem,
    }


__all__ = ["consumer_loop", "figures"]

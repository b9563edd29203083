"""The per-k-tile instruction mix of the kernel synth would emit, read from its SASS.

Input: a search :class:`~synth.search.space.Point` and an arch. Output: an
:class:`InstructionMix` — per warp and per k-tile, the HMMA, LDSM, LDGSTS,
BAR, DEPBAR and other instructions of the main loop of the compiled kernel,
plus the longest HMMA-free run and where the copies sit among the HMMAs.

How (:func:`sass_mix`): expand the configuration (``synth.gemm.expand_gemm``) on
a canonical shape (``4 BM x 4 BN x 64 BK``: the main loop is the one any large
shape runs), pin its schedule, lower it, ``synth.emit.cuda.emit_kernel``, then
the emitter's own SASS reader ``synth.emit.sass`` (``compile_cuda``: ``nvcc
-cubin -O3``, ``cuobjdump -sass``, cached by the emitter; ``parse_sass``;
``main_loop``: the backward branch holding the most HMMAs). Counts are divided
by the k-tiles one trip of that loop covers (its HMMAs / the warp's HMMAs per
k-tile). The mix is cached on disk by the sha256 of (format, kernel text, arch,
nvcc version) in the user cache folder (``$SYNTH_CACHE_DIR`` or
``$XDG_CACHE_HOME/synth`` or ``~/.cache/synth``, sub-folder ``mix/``), never in
the repository. Where ``synth.emit.sass`` is missing, :func:`mix_of_sass` reads
the listing itself.

:func:`estimated_mix` gives the same record without compiling: the structural
counts are exact (they follow from the tiling), ``other`` comes from a linear
fit to compiled kernels (:data:`OTHER_FIT`, re-fitted by
``benchmarks/search_gemm.py --fit-mix``). The search ranks every point with the
estimate and replaces it by the SASS mix for the top candidates.

"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Optional

from ..arch import get_arch
from ..emit.cuda import emit_kernel
from ..gemm import GemmConfig, expand_gemm, tiling
from ..graph import build_graph
from ..lower import lower
from ..schedule import schedule_from_pins
from .space import Point

CATEGORIES = ("hmma", "ldsm", "ldgsts", "bar", "depbar", "other")
CACHE_FORMAT = "mix-3"
"""Part of every cache key: bump it when :class:`InstructionMix` or the counting changes."""


@dataclass(frozen=True)
class InstructionMix:
    """Warp instructions per k-tile in the main loop (one warp's instruction stream)."""

    hmma: float
    ldsm: float
    ldgsts: float
    bar: float
    """BAR.SYNC (``__syncthreads``)."""
    depbar: float
    """DEPBAR (``cp.async.wait_group``) and LDGDEPBAR (``commit_group``)."""
    other: float
    """Everything else: address arithmetic, predicates, moves, the loop branch."""
    hmma_free_run: int = 0
    """Longest run of main-loop instructions without an HMMA (0 when estimated)."""
    copy_window: float = 1.0
    """Fraction of the k-tile's HMMAs issued after the median LDGSTS: how much of a k-tile's
    compute overlaps the copies it issues (1.0: copies at the top of the k-tile)."""
    registers: int = 0
    """ptxas' registers per thread (0 when estimated)."""
    solo_cycles: float = 0.0
    """Cycles one warp alone needs per k-tile to issue the loop in order, each HMMA holding its
    sub-partition's tensor core ``ArchSpec.hmma_cycles`` (0 when estimated: see :meth:`solo`)."""
    source: str = "estimate"
    """``sass`` (compiled and counted) or ``estimate`` (:func:`estimated_mix`)."""

    @property
    def total(self) -> float:
        return self.hmma + self.ldsm + self.ldgsts + self.bar + self.depbar + self.other

    def solo(self, hmma_cycles: float, issue_per_clk: int = 1) -> float:
        """Cycles per k-tile of one warp alone on its sub-partition: the in-order issue simulation
        when read from SASS; else ``max(HMMAs x hmma_cycles, instructions / issue rate)`` plus
        :data:`ISSUE_RESIDUAL`, the k-tile boundary no HMMA overlaps."""
        if self.solo_cycles:
            return self.solo_cycles
        return max(self.hmma * hmma_cycles, self.total / issue_per_clk) + ISSUE_RESIDUAL

    @property
    def per_hmma(self) -> float:
        """Instructions per HMMA (the emitter's figure of merit, docs/cuda_kernel.md; CUTLASS 2.x: 2.1-2.5)."""
        return self.total / max(self.hmma, 1e-9)


# ---------------------------------------------------------------------------
# estimate without compiling

OTHER_FIT = (4.7, 3.8, 0.6)
"""``other = a + b * ldgsts + c * ldsm`` per warp and k-tile: a fixed part (loop counter, slot
rotation, branch) plus address arithmetic per copy and per ldmatrix. Fitted (least squares,
rounded) on the SASS of the emitted kernel for the configurations of :data:`FIT_POINTS` (nvcc
13.0, sm_80, the emitter of commit d992915; residuals within 6.5 instructions);
``benchmarks/search_gemm.py --fit-mix`` compiles them again and prints the fit."""
ISSUE_RESIDUAL = 2.0
"""Cycles per k-tile by which the in-order issue simulation of those kernels exceeds
``max(HMMAs x hmma_cycles, instructions)`` (1-8, mean 2): the k-tile boundary no HMMA overlaps."""

FIT_POINTS = (Point(128, 128, 32, 4, 3), Point(128, 128, 32, 4, 4), Point(128, 256, 64, 8, 3),
              Point(128, 128, 64, 4, 3), Point(64, 64, 32, 4, 5), Point(256, 128, 32, 8, 3),
              Point(64, 128, 64, 4, 3), Point(128, 64, 16, 2, 4), Point(32, 32, 32, 1, 4))


def structural_counts(p: Point) -> dict[str, float]:
    """HMMA, LDSM, LDGSTS, BAR and DEPBAR per warp and k-tile, from the tiling alone.

    HMMA.16816: ``MI * NI * KI``; ldmatrix.x4: ``MI`` for A and ``NI / 2`` for B per k16 step;
    16-byte cp.async: ``(BM + BN) BK 2 / 16 / threads`` per thread (one instruction per warp
    each); one barrier; one commit and one wait per k16 slice's copies (``KI + 1``, at least 2),
    as the emitter spreads them.
    """
    t = tiling(GemmConfig(p.BM, p.BN, 64 * p.BK, "f16", p.BM, p.BN, p.BK, p.warps, p.stages))
    return {"hmma": t.MI * t.NI * t.KI, "ldsm": (t.MI + t.NI // 2) * t.KI,
            "ldgsts": t.a_chunks_per_thread + t.b_chunks_per_thread, "bar": 1.0,
            "depbar": float(max(t.KI + 1, 2))}


def estimated_mix(p: Point) -> InstructionMix:
    """The mix of ``p`` without compiling: exact structural counts, ``other`` from :data:`OTHER_FIT`."""
    c = structural_counts(p)
    a, b, k = OTHER_FIT
    return InstructionMix(other=a + b * c["ldgsts"] + k * c["ldsm"], **c)


# ---------------------------------------------------------------------------
# compile and count


def cache_dir() -> str:
    """The user cache folder of SASS mixes (created on demand; never inside the repository)."""
    root = os.environ.get("SYNTH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "synth")
    return os.path.join(root, "mix")


def find_tool(name: str) -> Optional[str]:
    """``name`` on PATH, else in an ``nvidia-*`` wheel of this interpreter (``nvidia/*/bin``)."""
    hit = shutil.which(name)
    if hit:
        return hit
    for root in sys.path:
        for pat in ("nvidia/*/bin", "nvidia/*/*/bin"):
            found = glob.glob(os.path.join(root, pat, name))
            if found:
                return found[0]
    return None


def tools_available() -> tuple[bool, str]:
    """(True, "") when nvcc and cuobjdump are found, else (False, which one is missing)."""
    missing = [t for t in ("nvcc", "cuobjdump") if find_tool(t) is None]
    if missing:
        return False, f"{' and '.join(missing)} not found (install the CUDA toolkit / nvidia-cuda-cuobjdump)"
    return True, ""


def kernel_text(p: Point, arch: str) -> str:
    """The kernel.cu synth emits for ``p`` on the canonical shape ``4 BM x 4 BN x 64 BK``."""
    cfg = GemmConfig(4 * p.BM, 4 * p.BN, 64 * p.BK, "f16", p.BM, p.BN, p.BK, p.warps, p.stages, arch)
    problem = expand_gemm(cfg)
    graph = build_graph(problem)
    sched = schedule_from_pins(problem, graph)
    return emit_kernel(problem, sched, lower(problem, graph, sched))


_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRA = re.compile(r"\bBRA\s+(?:`\(\.L_x_\d+\)|)?(0x[0-9a-f]+)")


def classify(ins: str) -> str:
    """The category of one SASS instruction (predicate stripped)."""
    op = re.sub(r"^@!?U?P\w+\s+", "", ins).split(" ")[0]
    base = op.split(".")[0]
    if base == "HMMA":
        return "hmma"
    if base == "LDSM":
        return "ldsm"
    if base == "LDGSTS":
        return "ldgsts"
    if base == "BAR":
        return "bar"
    if base in ("DEPBAR", "LDGDEPBAR"):
        return "depbar"
    return "other"


def main_loop(sass: str) -> list[str]:
    """Instructions of the backward branch whose body holds the most HMMAs (empty if none)."""
    insns = [(int(a, 16), i) for a, i in _INSN.findall(sass)]
    best: list[str] = []
    best_h = 0
    for addr, ins in insns:
        m = _BRA.search(ins)
        if m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            body = [i for a, i in insns if lo <= a <= addr]
            h = sum(1 for i in body if classify(i) == "hmma")
            if h > best_h:
                best, best_h = body, h
    return best


def issue_cycles(cats: list[str], hmma_cycles: float) -> float:
    """Cycles for one warp to issue ``cats`` in order, one instruction per clock, an HMMA waiting
    until its sub-partition's tensor core is free and holding it ``hmma_cycles``."""
    t = 0.0
    free = 0.0
    for c in cats:
        if c == "hmma":
            t = max(t, free)
            free = t + hmma_cycles
        t += 1
    return max(t, free)


def mix_of_sass(sass: str, hmma_per_ktile: int, registers: int = 0,
                hmma_cycles: float = 8.0) -> Optional[InstructionMix]:
    """The :class:`InstructionMix` of a kernel's SASS listing (None when no loop holds an HMMA)."""
    cats = [classify(i) for i in main_loop(sass) if not re.match(r"(@!?U?P\w+\s+)?NOP\b", i)]
    return mix_of_ops(cats, hmma_per_ktile, registers, hmma_cycles)


def mix_of_ops(cats: list[str], hmma_per_ktile: int, registers: int = 0,
               hmma_cycles: float = 8.0) -> Optional[InstructionMix]:
    """The :class:`InstructionMix` of a main loop given as categories (:func:`classify`), in order."""
    nh = cats.count("hmma")
    if nh == 0:
        return None
    ktiles = max(nh / hmma_per_ktile, 1e-9)
    counts = {c: cats.count(c) / ktiles for c in CATEGORIES}
    run = longest = 0
    for c in cats:
        run = 0 if c == "hmma" else run + 1
        longest = max(longest, run)
    # where the copies sit: each LDGSTS's position within its k-tile, counted in HMMAs issued before it
    window, seen, pos = 1.0, 0, []
    for c in cats:
        if c == "hmma":
            seen += 1
        elif c == "ldgsts":
            pos.append((seen % hmma_per_ktile) / hmma_per_ktile)
    if pos:
        window = 1.0 - sum(pos) / len(pos)
    return InstructionMix(hmma_free_run=longest, copy_window=round(window, 4), registers=registers,
                          solo_cycles=round(issue_cycles(cats, hmma_cycles) / ktiles, 2), source="sass", **counts)


def _nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return m.group(2) if m else "unknown"


def sass_mix(p: Point, arch: str, *, use_cache: bool = True) -> tuple[Optional[InstructionMix], str]:
    """(mix, "") from the compiled kernel of ``p`` on ``arch``, or (None, why not). Cached on disk."""
    ok, why = tools_available()
    if not ok:
        return None, why
    nvcc = find_tool("nvcc")
    try:
        text = kernel_text(p, arch)
    except Exception as exc:  # an emitter limitation is a reason to fall back, not to fail the search
        return None, f"emit failed for {p.label}: {type(exc).__name__}: {exc}"
    key = hashlib.sha256("\0".join((CACHE_FORMAT, text, arch, _nvcc_version(nvcc))).encode()).hexdigest()[:32]
    path = os.path.join(cache_dir(), f"{key}.json")
    if use_cache and os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as fh:
                return InstructionMix(**json.load(fh)), ""
        except (OSError, ValueError, TypeError):
            pass  # a damaged cache entry is recomputed
    t = tiling(GemmConfig(p.BM, p.BN, 64 * p.BK, "f16", p.BM, p.BN, p.BK, p.warps, p.stages))
    hpk, hc = t.MI * t.NI * t.KI, get_arch(arch).hmma_cycles
    try:
        # the SASS reader only when a mix is read from SASS; without it the mix is estimated
        from ..emit import sass as emit_sass
    except ImportError:
        emit_sass = None
    try:
        if emit_sass is not None:
            comp = emit_sass.compile_cuda(text, arch)
            loop = emit_sass.main_loop(emit_sass.parse_sass(comp.sass))
            mix = mix_of_ops([classify(x.text) for x in loop if x.op != "NOP"], hpk, comp.registers, hc)
        else:
            mix = _compile_and_count(text, arch, hpk, hc)
    except Exception as exc:  # nvcc/cuobjdump failures (SassError, OSError, timeouts): fall back, say why
        return None, f"could not read the SASS of {p.label}: {type(exc).__name__}: {str(exc)[-300:]}"
    if mix is None:
        return None, f"no main loop with HMMAs in the SASS of {p.label}"
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(asdict(mix), fh)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs a recompile
    return mix, ""


def _compile_and_count(text: str, arch: str, hmma_per_ktile: int, hmma_cycles: float) -> Optional[InstructionMix]:
    """nvcc + cuobjdump without ``synth.emit.sass`` (no cache of the compile: the mix is cached)."""
    nvcc, cuobjdump = find_tool("nvcc"), find_tool("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="synth-sassmix-") as d:
        src, cubin = os.path.join(d, "kernel.cu"), os.path.join(d, "kernel.cubin")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(text)
        proc = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-O3", "-Xptxas", "-v", "-o", cubin, src],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed: {proc.stderr.strip()[-300:]}")
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, timeout=300).stdout
    regs = re.search(r"Used (\d+) registers", proc.stderr + proc.stdout)
    return mix_of_sass(sass, hmma_per_ktile, int(regs.group(1)) if regs else 0, hmma_cycles)


__all__ = ["InstructionMix", "estimated_mix", "structural_counts", "sass_mix", "mix_of_sass", "mix_of_ops", "main_loop",
           "classify", "issue_cycles", "cache_dir", "find_tool", "tools_available", "kernel_text", "OTHER_FIT", "FIT_POINTS"]

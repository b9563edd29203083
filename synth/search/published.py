"""Published GEMM figures that calibrate and bound the performance model.

Input: synth/data/published_gemm.yaml. Output: the best published figure per
arch (:func:`best_published`, the cap no prediction may exceed), the named
calibration points (:func:`calibration_points`), each with its source, and the
timing harnesses they were measured with (:func:`harnesses`).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Optional

from ..errors import Loc, SynthError
from .hopper import HopperPoint

PUBLISHED_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                              "published_gemm.yaml")


@dataclass(frozen=True)
class PublishedPoint:
    """One published measurement."""

    name: str
    arch: str
    shape: tuple[int, int, int]
    tflops: float
    source: str
    config: Optional[tuple[int, int, int, int, int]] = None
    """(BM, BN, BK, warps, stages) when the source names the kernel's configuration."""
    library: str = "cublas"
    """``cutlass`` (config named), ``cublas`` (compare with the search's winner), ``triton``
    (compare with the best of the Triton tutorial's configurations) or ``handwritten`` (sm_90: a kernel whose
    :attr:`design` is named)."""
    harness: str = ""
    """The name of the :class:`Harness` that measured it ("": the arch's sustained clock and launch_us)."""
    design: Optional[tuple[tuple[str, object], ...]] = None
    """sm_90: the Hopper design the source names, ``(key, value)`` pairs of :data:`DESIGN_KEYS` (a
    :class:`synth.search.hopper.HopperPoint`'s fields); None when the source names none (a library's choice)."""
    gpu: str = ""
    """The GPU the source ran on, as it says (``H100 SXM``); "" when the arch's part."""
    dtype: str = "f16"
    """The operand type measured (f16 and bf16 run at the same tensor-core rate)."""

    def hopper_point(self):
        """The :class:`synth.search.hopper.HopperPoint` of :attr:`design` (None without one)."""
        if self.design is None:
            return None
        return HopperPoint(**dict(self.design))


DESIGN_KEYS = {"BM": int, "BN": int, "stages": int, "k_pipe_mmas": int, "persistent": bool, "pingpong": bool,
               "epilogue": str, "cluster": str, "split_k": int}
"""Keys a sm_90 point's ``design`` may give, with their types (``BM``, ``BN``, ``stages`` and ``k_pipe_mmas``
required)."""


@dataclass(frozen=True)
class Harness:
    """How a source timed its kernels: the clock the GPU ran at and what each call adds."""

    name: str
    clock: str
    """``boost`` (the datasheet's boost clock) or ``sustained`` (``ArchSpec.sustained_clock_ghz``)."""
    source: str
    floor: tuple[tuple[tuple[int, int, int], float], ...] = ()
    """The source's own figures at its smallest shapes, ``((M, N, K), TFLOP/s)``: the per-call overhead
    is the least (published time - model kernel time) over them; empty: the arch's ``launch_us``."""


@functools.lru_cache(maxsize=None)
def _doc(path: str) -> dict:
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read published GEMM figures: {exc.strerror}",
                         "restore synth/data/published_gemm.yaml") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = Loc(path, mark.line + 1, mark.column + 1) if mark is not None else Loc(path)
        raise SynthError(loc, f"published GEMM figures are not valid YAML: {exc}",
                         "restore synth/data/published_gemm.yaml") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("best"), dict) or not isinstance(doc.get("points"), list):
        raise SynthError(Loc(path), "published GEMM figures need a 'best' mapping and a 'points' list",
                         "restore synth/data/published_gemm.yaml")
    return doc


def best_published(arch: str, path: str = PUBLISHED_FILE) -> tuple[float, str]:
    """(TFLOP/s, source) of the best published dense f16 GEMM figure on ``arch``; SynthError if none."""
    best = _doc(path)["best"]
    d = best.get(arch)
    if not isinstance(d, dict) or not _positive(d.get("tflops"), float) or not d.get("source"):
        raise SynthError(Loc(path), f"no published figure (tflops, source) for {arch!r}",
                         f"add best.{arch} to synth/data/published_gemm.yaml")
    return float(d["tflops"]), " ".join(str(d["source"]).split())


def _positive(x, kind=int) -> bool:
    """``x`` is a positive int (``kind=int``) or a positive finite number (``kind=float``)."""
    ok = isinstance(x, int) if kind is int else isinstance(x, (int, float)) and math.isfinite(x)
    return ok and not isinstance(x, bool) and x > 0


def harnesses(path: str = PUBLISHED_FILE) -> dict[str, Harness]:
    """The timing harnesses of the published figures, by name; SynthError on a malformed entry."""
    out = {}
    hs = _doc(path).get("harnesses") or {}
    if not isinstance(hs, dict):
        raise SynthError(Loc(path), "'harnesses' must be a mapping of name -> {clock, source, floor}",
                         "restore synth/data/published_gemm.yaml")
    for name, d in hs.items():
        fix = "restore synth/data/published_gemm.yaml"
        if not isinstance(d, dict) or d.get("clock") not in ("boost", "sustained") or not d.get("source"):
            raise SynthError(Loc(path), f"harness {name!r} needs 'clock' (boost or sustained) and 'source'", fix)
        floor = []
        for row in d.get("floor") or ():
            if not (isinstance(row, list) and len(row) == 4 and all(_positive(x) for x in row[:3])
                    and _positive(row[3], float)):
                raise SynthError(Loc(path), f"harness {name!r}: floor row {row!r} is not [M, N, K, TFLOP/s]", fix)
            floor.append(((int(row[0]), int(row[1]), int(row[2])), float(row[3])))
        out[str(name)] = Harness(str(name), d["clock"], " ".join(str(d["source"]).split()), tuple(floor))
    return out


def calibration_points(path: str = PUBLISHED_FILE) -> list[PublishedPoint]:
    """The named published measurements, in file order; SynthError naming an unknown harness."""
    out = []
    known = harnesses(path)
    fix = "restore synth/data/published_gemm.yaml"
    for n, d in enumerate(_doc(path)["points"]):
        shape, cfg = (d.get("shape"), d.get("config")) if isinstance(d, dict) else (None, None)
        ok = (isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("arch"), str)
              and isinstance(shape, list) and len(shape) == 3 and all(_positive(x) for x in shape)
              and _positive(d.get("tflops"), float) and d.get("source")
              and (cfg is None or (isinstance(cfg, dict)
                                   and all(_positive(cfg.get(k)) for k in ("BM", "BN", "BK", "warps", "stages")))))
        if not ok:
            raise SynthError(Loc(path), f"published point #{n + 1} needs name, arch, shape [M, N, K] (positive "
                             "integers), tflops > 0, source and optionally config {BM, BN, BK, warps, stages}", fix)
        conf = None if not cfg else (int(cfg["BM"]), int(cfg["BN"]), int(cfg["BK"]), int(cfg["warps"]),
                                     int(cfg["stages"]))
        lib = d.get("library") or ("cutlass" if conf else "cublas")
        harness = str(d.get("harness") or "")
        if harness and harness not in known:
            raise SynthError(Loc(path), f"point {d.get('name')!r} names an unknown harness {harness!r}",
                             f"use one of {', '.join(known) or '(none defined)'}")
        design = _design(d.get("design"), d.get("name"), path)
        if design is not None and d.get("library") is None:
            lib = "handwritten"
        out.append(PublishedPoint(str(d["name"]), str(d["arch"]), tuple(int(x) for x in d["shape"]),
                                  float(d["tflops"]), " ".join(str(d["source"]).split()), conf, lib, harness,
                                  design, str(d.get("gpu") or ""), str(d.get("dtype") or "f16")))
    return out


def _design(d, name, path: str) -> Optional[tuple[tuple[str, object], ...]]:
    """A point's ``design`` mapping as sorted ``(key, value)`` pairs; SynthError naming the point when a key is
    unknown, has the wrong type, or a required one is missing."""
    if d is None:
        return None
    fix = "restore synth/data/published_gemm.yaml"
    if not isinstance(d, dict):
        raise SynthError(Loc(path), f"point {name!r}: design must be a mapping of {', '.join(DESIGN_KEYS)}", fix)
    for k, v in d.items():
        kind = DESIGN_KEYS.get(k)
        if kind is None or not isinstance(v, kind) or (kind is int and (isinstance(v, bool) or v < 0)):
            raise SynthError(Loc(path), f"point {name!r}: design key {k!r} = {v!r} is not one of "
                             f"{', '.join(f'{n} ({t.__name__})' for n, t in DESIGN_KEYS.items())}", fix)
    missing = [k for k in ("BM", "BN", "stages", "k_pipe_mmas") if k not in d]
    if missing:
        raise SynthError(Loc(path), f"point {name!r}: design needs {', '.join(missing)}", fix)
    return tuple(sorted(d.items()))


def tie_error(arch: str, path: str = PUBLISHED_FILE) -> tuple[float, str]:
    """(fraction, source) of the error bar ``why`` uses for ties on ``arch`` (``calibration.<arch>.tie_error`` of
    the data file: sm_80 its calibration's target, sm_90 the largest error of its calibration after the fit,
    benchmarks/calibrate_sm90.py); the sm_80 figure for an arch without one (sm_86, sm_89: no calibration point).
    SynthError when the entry is malformed."""
    cal = _doc(path).get("calibration") or {}
    fix = "restore synth/data/published_gemm.yaml"
    if not isinstance(cal, dict):
        raise SynthError(Loc(path), "'calibration' must be a mapping of arch -> {tie_error, source}", fix)
    d = cal.get(arch, cal.get("sm_80"))
    if not isinstance(d, dict) or not _positive(d.get("tie_error"), float) or not d["tie_error"] < 1 \
            or not d.get("source"):
        raise SynthError(Loc(path), f"calibration.{arch} needs tie_error (a fraction in (0, 1)) and source", fix)
    return float(d["tie_error"]), " ".join(str(d["source"]).split())


def beats_published(arch: str, shape: tuple[int, int, int], cands, error: Optional[float] = None,
                    path: str = PUBLISHED_FILE) -> tuple[str, ...]:
    """One warning per candidate (``rank``, ``label``, ``tflops``) predicted above the fastest published figure
    on ``arch`` at exactly ``shape`` (:func:`published_at`); ``error``: the model's error bar, said in the
    warning. Empty where nothing was published for the shape, or nothing is predicted above it."""
    top = published_at(arch, shape, path)
    if top is None:
        return ()
    out = []
    for c in cands:
        if c.tflops > top.tflops:
            bar = f"; the model's error bar there is {error:.0%}" if error is not None else ""
            out.append(f"#{c.rank} {c.label} is predicted at {c.tflops:.1f} TFLOP/s, above the fastest figure "
                       f"published for {'x'.join(map(str, shape))} on {arch}"
                       f"{' (' + top.gpu + ')' if top.gpu else ''}: {top.tflops:g} TFLOP/s, {top.name} "
                       f"(synth/data/published_gemm.yaml), by {c.tflops / top.tflops - 1:.1%}{bar}. Read it as "
                       "the model's optimism, not a kernel faster than any measured; --measure on a GPU")
    return tuple(out)


def published_at(arch: str, shape: tuple[int, int, int], path: str = PUBLISHED_FILE) -> Optional[PublishedPoint]:
    """The fastest published point on ``arch`` at exactly ``shape`` (any design or library) that a search's
    prediction can be held to: one whose harness adds no more than a launch per call (no ``floor``: the kernel's own
    time, as the search predicts it; a harness whose calls carry a measured overhead, Triton's do_bench with its L2
    flush, times small shapes well below their kernels). None when there is none. A prediction above it claims more
    than anyone has measured for that shape."""
    hs = harnesses(path)
    at = [p for p in calibration_points(path) if p.arch == arch and tuple(p.shape) == tuple(shape)
          and not (p.harness and hs[p.harness].floor)]
    return max(at, key=lambda p: p.tflops) if at else None


__all__ = ["PublishedPoint", "Harness", "best_published", "calibration_points", "harnesses", "PUBLISHED_FILE",
           "DESIGN_KEYS", "tie_error", "published_at", "beats_published"]

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
    """``cutlass`` (config named), ``cublas`` (compare with the search's winner) or ``triton``
    (compare with the best of the Triton tutorial's configurations)."""
    harness: str = ""
    """The name of the :class:`Harness` that measured it ("": the arch's sustained clock and launch_us)."""


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
        out.append(PublishedPoint(str(d["name"]), str(d["arch"]), tuple(int(x) for x in d["shape"]),
                                  float(d["tflops"]), " ".join(str(d["source"]).split()), conf, lib, harness))
    return out


__all__ = ["PublishedPoint", "Harness", "best_published", "calibration_points", "harnesses", "PUBLISHED_FILE"]

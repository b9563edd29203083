"""Published GEMM figures that calibrate and bound the performance model.

Input: synth/data/published_gemm.yaml. Output: the best published figure per
arch (:func:`best_published`, the cap no prediction may exceed) and the named
calibration points (:func:`calibration_points`), each with its source.
"""

from __future__ import annotations

import functools
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
    if not isinstance(d, dict) or "tflops" not in d or "source" not in d:
        raise SynthError(Loc(path), f"no published figure (tflops, source) for {arch!r}",
                         f"add best.{arch} to synth/data/published_gemm.yaml")
    return float(d["tflops"]), " ".join(str(d["source"]).split())


def calibration_points(path: str = PUBLISHED_FILE) -> list[PublishedPoint]:
    """The named published measurements, in file order."""
    out = []
    for d in _doc(path)["points"]:
        cfg = d.get("config")
        conf = None if not cfg else (int(cfg["BM"]), int(cfg["BN"]), int(cfg["BK"]), int(cfg["warps"]),
                                     int(cfg["stages"]))
        lib = d.get("library") or ("cutlass" if conf else "cublas")
        out.append(PublishedPoint(str(d["name"]), str(d["arch"]), tuple(int(x) for x in d["shape"]),
                                  float(d["tflops"]), " ".join(str(d["source"]).split()), conf, lib))
    return out


__all__ = ["PublishedPoint", "best_published", "calibration_points", "PUBLISHED_FILE"]

"""The performance model against published GEMM timings, each predicted as its harness measured it.

Input: the points and harnesses of synth/data/published_gemm.yaml
(:mod:`synth.search.published`). Output: one :class:`CalibrationRow` per point
(published and predicted TFLOP/s, the error, what was compared) and
:func:`summary` (how many within the target, how the ordering agrees).

A published figure is the kernel's time plus what its harness adds, at the
clock the GPU ran at under that harness. So each point is predicted with the
arch's figures changed in two places only (:func:`harness_arch`): the clock
(``boost`` or ``sustained``) and the per-call overhead in place of
``launch_us`` (:func:`harness_overhead`: the least gap between the source's
own smallest-shape timings and the model's kernel time there). Nothing here
changes what ``synth search`` ranks or prints.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Optional, Sequence

from ..arch import get_arch
from .hopper import HopperPoint, estimate_hopper
from .hopper_search import hopper_context, search_hopper
from .published import Harness, PublishedPoint, calibration_points, harnesses
from .rank import apply_sass, estimate_of, new_entry
from .space import Point, make_context
from .timing import timed
from .tune import search_gemm

TARGET = 0.15
"""The stated target: every point within 15 % (docs/search.md, section 8)."""


@dataclass(frozen=True)
class CalibrationRow:
    """One published point beside the model's prediction of what its harness measured."""

    name: str
    shape: tuple[int, int, int]
    published: float
    """TFLOP/s as published."""
    predicted: float
    """TFLOP/s the model predicts under the point's harness."""
    compared: str
    """What was predicted: the named configuration, the search's winner or the best Triton-list one."""
    harness: str
    clock_ghz: float
    overhead_us: float
    source: str

    @property
    def error(self) -> float:
        """predicted / published - 1 (positive: the model is optimistic)."""
        return self.predicted / self.published - 1.0


def harness_arch(arch: str, harness: Optional[Harness], overhead_us: Optional[float] = None):
    """``arch``'s :class:`~synth.arch.ArchSpec` at ``harness``'s clock, with ``overhead_us`` in place of
    ``launch_us`` (None: keep it). Without a harness: the arch unchanged."""
    spec = get_arch(arch)
    if harness is None:
        return spec
    clock = spec.boost_clock_ghz if harness.clock == "boost" else spec.clock_ghz
    return dataclasses.replace(spec, sustained_clock_ghz=clock,
                               launch_us=spec.launch_us if overhead_us is None else overhead_us)


def _kernel_us(shape: tuple[int, int, int], spec, sass: bool) -> float:
    return search_gemm(*shape, arch=spec, top=1, references=False, sass=sass).candidates[0].time_us


@functools.lru_cache(maxsize=None)
def harness_overhead(arch: str, harness: Harness, sass: bool = False) -> float:
    """Per-call overhead (µs) of ``harness`` on ``arch``: the least (published time - the model's kernel
    time at the harness's clock, without launch) over its floor rows, at least 0; ``launch_us`` without rows."""
    if not harness.floor:
        return harness_arch(arch, None).launch_us
    bare = harness_arch(arch, harness, 0.0)
    gaps = []
    for (M, N, K), tflops in harness.floor:
        published_us = 2.0 * M * N * K / (tflops * 1e12) * 1e6
        gaps.append(published_us - _kernel_us((M, N, K), bare, sass))
    return max(0.0, min(gaps))


def predict(pt: PublishedPoint, sass: bool = False, clock_ghz: Optional[float] = None,
            winner=None) -> CalibrationRow:
    """The model's prediction of ``pt`` as its harness measured it (see the module docstring). ``clock_ghz``
    replaces the harness's clock (the sm_90 fit, :func:`fit_clock`); ``winner``: for a library point on sm_90, the
    Hopper point to predict instead of searching again (the fit keeps the winner found at the model's clock)."""
    h = harnesses().get(pt.harness) if pt.harness else None
    overhead = harness_overhead(pt.arch, h, sass) if h is not None else None
    spec = harness_arch(pt.arch, h, overhead)
    if clock_ghz is not None:
        spec = dataclasses.replace(spec, sustained_clock_ghz=clock_ghz)
    if pt.arch == "sm_90":
        pred, what = predict_hopper(pt, spec, winner)
    elif pt.config is not None:
        ctx = make_context(*pt.shape, "f16", spec)
        p = Point(*pt.config)
        e = new_entry(ctx, p)
        e.solved, _ = timed(ctx, p, 10.0, 1)
        e.est = estimate_of(ctx, p, e.res, e.solved)
        if sass:
            apply_sass(ctx, e)
        pred, what = e.est.tflops, p.label
    else:
        res = search_gemm(*pt.shape, arch=spec, top=1, sass=sass)
        if pt.library == "triton":
            r = next(r for r in res.references if r.name == "best triton tutorial")
            pred, what = r.tflops, f"best Triton-list {'x'.join(map(str, r.tile))} w{r.warps} s{r.stages}"
        else:
            pred, what = res.winner.tflops, f"winner {res.winner.label}"
    return CalibrationRow(pt.name, tuple(pt.shape), pt.tflops, float(pred), what, pt.harness or "-",
                          spec.clock_ghz, spec.launch_us, pt.source)


def predict_hopper(pt: PublishedPoint, spec, winner=None) -> tuple[float, str]:
    """(TFLOP/s, what was compared) of an sm_90 point on ``spec``: its named design through
    :func:`synth.search.hopper.estimate_hopper`, else the Hopper search's winner (``winner``: that point, given)."""
    ctx = hopper_context(*pt.shape, pt.dtype, spec)
    p = pt.hopper_point() or winner
    if p is not None:
        return estimate_hopper(ctx, p).tflops, ("that design, " if pt.design else "the winner, ") + p.label
    res = search_hopper(ctx, top=1, references=False)
    return res.winner.tflops, f"the winner, {hopper_point_of(res.winner).label}"


def hopper_point_of(c):
    """The :class:`synth.search.hopper.HopperPoint` of a Hopper :class:`~synth.search.results.Candidate`."""
    g = c.config
    return HopperPoint(g.BM, g.BN, g.stages, g.k_pipe_mmas, split_k=g.split_k, persistent=g.persistent,
                       epilogue=g.epilogue, pingpong=g.pingpong, cluster=g.cluster)


def calibrate(arch: str = "sm_80", sass: bool = False, clock_ghz: Optional[float] = None,
              winners: Optional[dict] = None) -> list[CalibrationRow]:
    """:func:`predict` for every published point on ``arch``, in file order (``clock_ghz``, ``winners``: as
    :func:`predict`'s, ``winners`` by point name)."""
    return [predict(pt, sass, clock_ghz, (winners or {}).get(pt.name))
            for pt in calibration_points() if pt.arch == arch]


def log_errors(rows: Sequence[CalibrationRow]) -> list[float]:
    """``log(predicted / published)`` of each row."""
    import math

    return [math.log(r.predicted / r.published) for r in rows]


@dataclass(frozen=True)
class ClockFit:
    """The sm_90 fit: the one clock that best explains every sm_90 point (least squares of the log errors)."""

    clock_ghz: float
    rms: float
    """Root mean square of the log errors at the fitted clock."""
    max_abs_error: float
    """The largest ``|predicted / published - 1|`` at the fitted clock."""
    rows: tuple[CalibrationRow, ...]


def fit_clock(arch: str = "sm_90", lo: float = 1.5, hi: float = 1.98, step: float = 0.005) -> ClockFit:
    """Least-squares fit of the clock over ``arch``'s points (benchmarks/calibrate_sm90.py): each library point
    keeps the search's winner at the model's own clock (a clock changes every kernel's cycles alike, so it changes
    no ranking beyond the launch overhead's share), every clock in ``[lo, hi]`` by ``step`` is tried."""
    pts = [p for p in calibration_points() if p.arch == arch]
    winners = {}
    for p in pts:
        if p.design is None:
            h = harnesses().get(p.harness) if p.harness else None
            ctx = hopper_context(*p.shape, p.dtype, harness_arch(arch, h, None))
            winners[p.name] = hopper_point_of(search_hopper(ctx, top=1, references=False).winner)
    best = None
    n = int(round((hi - lo) / step))
    for i in range(n + 1):
        clock = round(lo + i * step, 6)
        rows = calibrate(arch, clock_ghz=clock, winners=winners)
        errs = log_errors(rows)
        rms = (sum(e * e for e in errs) / len(errs)) ** 0.5
        if best is None or rms < best.rms - 1e-12:
            best = ClockFit(clock, rms, max(abs(r.error) for r in rows), tuple(rows))
    return best


@dataclass(frozen=True)
class Summary:
    within: int
    """Points within :data:`TARGET`."""
    total: int
    same_order: bool
    """The predictions sort the points as the published figures do."""
    pairs_agree: int
    """Pairs whose published figures differ by more than :data:`TARGET`, ordered as published."""
    pairs: int


def summary(rows: Sequence[CalibrationRow]) -> Summary:
    """How the predictions agree with the published figures (see :class:`Summary`)."""
    pub = sorted(range(len(rows)), key=lambda i: rows[i].published)
    pred = sorted(range(len(rows)), key=lambda i: rows[i].predicted)
    pairs = [(i, j) for i in range(len(rows)) for j in range(len(rows))
             if rows[j].published > (1 + TARGET) * rows[i].published]
    agree = sum(1 for i, j in pairs if rows[j].predicted > rows[i].predicted)
    within = sum(1 for r in rows if abs(r.error) <= TARGET)
    return Summary(within, len(rows), pub == pred, agree, len(pairs))


__all__ = ["CalibrationRow", "Summary", "TARGET", "calibrate", "harness_arch", "harness_overhead", "predict",
           "summary", "predict_hopper", "fit_clock", "ClockFit", "log_errors", "hopper_point_of"]

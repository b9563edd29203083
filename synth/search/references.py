"""CUTLASS and Triton reference configurations, and where they rank in a search.

Input: synth/data/reference_configs.yaml (:func:`load_references`) and, for
ranking, a search's entries and :class:`~synth.search.rank.Refiner`. Output:
:class:`RefConfig` rows, synth's legal :class:`~synth.search.space.Point` with a
reference's tile, warps and shared slots (:func:`reference_points`), and one
:class:`~synth.search.results.ReferenceRank` per reference (:func:`rank_references`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Optional

from ..errors import Loc, SynthError
from ..gemm import smem_slots, stage_pins
from .rank import Entry, Refiner, apply_sass, ranker
from .results import ReferenceRank
from .space import STAGES_SPACE, Context, Point, is_legal

REFERENCE_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                              "reference_configs.yaml")


HOPPER_SECTION = "sm90_cutlass3"


@dataclass(frozen=True)
class HopperRef:
    """A Hopper reference kernel: tile, stages (None: CUTLASS's StageCountAuto, the most that fit) and
    K_PIPE_MMAS."""

    name: str
    BM: int
    BN: int
    BK: int
    stages: Optional[int]
    k_pipe_mmas: int


def _reference_doc(path: str, build):
    """``build(doc)`` of the reference file's YAML; a located SynthError when the file cannot be read,
    is not YAML, or lacks what ``build`` reads (a missing key, a value that is not an integer)."""
    import yaml

    fix = "restore synth/data/reference_configs.yaml"
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise SynthError(Loc(path), f"cannot read reference configurations: {exc.strerror}", fix) from None
    except yaml.YAMLError as exc:
        raise SynthError(Loc(path), f"reference configurations are not valid YAML: {exc}", fix) from None
    try:
        return build(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SynthError(Loc(path), f"malformed reference configurations ({type(exc).__name__}: {exc})", fix) from None


def load_hopper_references(path: str = REFERENCE_FILE) -> list[HopperRef]:
    """The ``sm90_cutlass3`` configurations of the reference file (docs/search.md, section 10)."""
    def build(doc) -> list[HopperRef]:
        out = []
        for d in (doc.get(HOPPER_SECTION) or {}).get("configs", []):
            st = d.get("stages", "auto")
            out.append(HopperRef(str(d["name"]), int(d["BM"]), int(d["BN"]), int(d["BK"]),
                                 None if st == "auto" else int(st), int(d.get("k_pipe_mmas", 1))))
        return out

    return _reference_doc(path, build)


@dataclass(frozen=True)
class RefConfig:
    """One reference configuration as its library writes it."""

    BM: int
    BN: int
    BK: int
    warps: int
    slots: int
    """The reference's "stages": shared-memory buffers per operand."""


def load_references(path: str = REFERENCE_FILE) -> dict[str, object]:
    """``{"cutlass_sm80_f16": [RefConfig...], "triton_matmul_tutorial": [...], "defaults": {"cutlass": RefConfig, ...}}``."""
    def conv(d: dict) -> RefConfig:
        return RefConfig(int(d["BM"]), int(d["BN"]), int(d["BK"]), int(d["warps"]), int(d["stages"]))

    def build(doc) -> dict[str, object]:
        out: dict[str, object] = {}
        for k, v in doc.items():
            if k == HOPPER_SECTION:
                continue  # the Hopper main loop's references: load_hopper_references
            if k == "defaults":
                out[k] = {name: conv(d["config"]) for name, d in v.items()}
            else:
                out[k] = [conv(d) for d in v["configs"]]
        return out

    return _reference_doc(path, build)


def reference_points(ref: RefConfig, M: int, N: int, K: int, *, dtype: str = "f16",
                     arch: str = "sm_80") -> tuple[Optional[Point], Optional[str]]:
    """synth's point with the reference's tile, warps and number of shared slots, or why none is legal.

    synth's ``stages`` is the pipeline depth; with ``gemm.stage_pins`` it has that
    many shared slots for BK >= 32 (one fewer for BK = 16, whose only ldmatrix runs
    a stage ahead of the mma), so the depth with exactly ``ref.slots`` slots is looked up.
    """
    first_reason = None
    for s in (ref.slots, ref.slots + 1):
        p = Point(ref.BM, ref.BN, ref.BK, ref.warps, s)
        cfg = p.config(M, N, K, dtype, arch)
        try:
            slots = smem_slots(stage_pins(cfg))
        except ValueError:
            slots = s
        if slots != ref.slots:
            continue
        why = is_legal(p, M, N, K, dtype=dtype, arch=arch)
        if why is None:
            if p.stages not in STAGES_SPACE:
                return None, f"{p.stages} stages are outside the search space"
            return p, None
        first_reason = first_reason or why
    return None, first_reason or "no pipeline depth gives that many shared slots"


def rank_references(ctx: Context, entries: dict[Point, Entry], top: list[Entry],
                    refiner: Refiner, *, sass: bool = False) -> list[ReferenceRank]:
    """Where each reference of :func:`load_references` ranks among ``entries`` (``top[0]``: the winner).

    A default configuration that is not legal is ranked through a legal stand-in
    (same BM, BN, warps and slots, BK halved until legal); of each library's list
    the best legal one is ranked. Ranks and ratios use the final estimates. With
    ``sass`` the defaults' instruction mix is read from their SASS too.
    """
    refs = load_references()
    win = top[0] if top else None
    out: list[ReferenceRank] = []

    def point_of(ref: RefConfig) -> tuple[Optional[Point], Optional[str]]:
        return reference_points(ref, ctx.M, ctx.N, ctx.K, dtype=ctx.dtype, arch=ctx.arch.name)

    def ratio(e: Entry) -> Optional[float]:
        return e.est.time_us / win.est.time_us if win else None

    def row(name: str, ref: RefConfig, e: Optional[Entry], why: Optional[str],
            stand_in: bool = False) -> ReferenceRank:
        if e is None or e.infeasible:
            why = why or (e.solved.note if e is not None and e.solved is not None else None)
            return ReferenceRank(name, (ref.BM, ref.BN, ref.BK), ref.warps, ref.slots, None, None, None, None, why)
        p = e.point
        # rank 0 until the final ranks below (a rank needs every entry's final estimate)
        return ReferenceRank(name, (ref.BM, ref.BN, ref.BK), ref.warps, ref.slots, p.stages, 0,
                             e.est.time_us, ratio(e), why,
                             (p.BM, p.BN, p.BK, p.warps, p.stages) if stand_in else None)

    for name, ref in refs.get("defaults", {}).items():
        p, why = point_of(ref)
        e = entries.get(p) if p is not None else None
        stand_in = False
        bk = ref.BK // 2
        while e is None and bk >= 16:  # rank the nearest legal variant: same tile area and depth, smaller BK
            q, _ = point_of(replace(ref, BK=bk))
            e = entries.get(q) if q is not None else None
            stand_in = e is not None
            bk //= 2
        if e is not None:
            refiner.refine(e)
            if sass:
                apply_sass(ctx, e)
        out.append(row(f"{name} default", ref, e, why, stand_in))
    for lib, title in (("cutlass_sm80_f16", "best cutlass sm80"), ("triton_matmul_tutorial", "best triton tutorial")):
        pool = {}
        for ref in refs.get(lib, []):
            p, _ = point_of(ref)
            if p is not None and p in entries:
                pool[p] = ref
        if not pool:
            continue
        best, _ = refiner.best_of([entries[p] for p in pool], 1)
        if best:
            out.append(row(title, pool[best[0].point], best[0], None))
    # later refinements move entries: recompute ranks and ratios with the final estimates
    final = []
    rank_entry = ranker(entries.values()) if any(r.rank is not None for r in out) else None
    for r in out:
        if r.rank is not None:
            bm, bn, bk, w, s = r.ranked_as or (r.tile[0], r.tile[1], r.tile[2], r.warps, r.stages)
            e = entries[Point(bm, bn, bk, w, s)]
            r = replace(r, rank=rank_entry(e), time_us=e.est.time_us, ratio=ratio(e), tflops=e.est.tflops)
        final.append(r)
    return final

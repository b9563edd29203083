"""``search_gemm`` on the Hopper main loop (sm_90, ``mainloop: tma_wgmma``): rank, explain, reference.

Input: a checked :class:`~synth.search.space.Context` on ``sm_90``. Output: a
:class:`~synth.search.results.SearchResult` whose candidates are Hopper kernels
(:class:`~synth.hopper.problem.HopperGemm` configs with ``stages`` and ``k_pipe_mmas`` pinned),
ranked by :func:`synth.search.hopper.estimate_hopper` (docs/search.md, section 10).

Each tile ``BM x BN`` is ranked at the pipeline model's own choice of ``stages`` and
``k_pipe_mmas`` for the shape (:func:`synth.search.hopper.auto_point`, what ``synth solve`` builds
with ``stages: auto``). That choice minimizes one CTA's k-loop cycles; every other SM-level term
is the same for every depth of a tile when they all run the same number of CTAs per SM (the
kernel's ``setmaxnreg`` split makes that one CTA for every legal point), so it is also the
tile's best prediction. A tile whose depths differ in occupancy has every legal point estimated.
Each evaluated point is ranked one CTA per tile, split in K, as a persistent grid, with the TMA-store
epilogue, with ping-pong consumers, and as 2x1 / 1x2 clusters, one CTA per tile and persistent
(:func:`synth.search.hopper.hopper_variants`); ``why`` says which of one CTA per tile and persistent won and why
(:func:`why_hopper_persistent`), which variant won and why (:func:`why_hopper_variant`: its clusters against one
CTA per tile, its persistent clusters against the persistent kernel, :func:`why_hopper_cluster`), and what the
winner saves over the best ping-pong, TMA-store and cluster kernels when it is none of them (:func:`why_not_kinds`).
Nothing here is timed or compiled; the ranking is deterministic (a fixed tie key).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Optional

from ..errors import SynthError
from ..hopper.problem import DTYPES, HopperGemm, MAINLOOPS
from .explain import beats, behind, difference, loop_rate, model_error, pct, tie_text
from .hopper import (HopperEstimate, HopperPoint, auto_choice, auto_point, cluster_slots, design_variant,
                     enumerate_hopper_space, estimate_hopper, hopper_occupancy, hopper_split_issue,
                     hopper_variants, is_legal_hopper, pipeline_evaluations, prune_hopper, staging_wavefronts)
from . import published  # published.best_published looked up when called (tests replace it)
from .published import beats_published
from .references import load_hopper_references
from .results import Candidate, Progress, ReferenceRank, SearchResult, progress_or_silent
from .space import SPLIT_SPACE, make_context


@dataclass(frozen=True)
class HopperEntry:
    """One evaluated Hopper point and its estimate."""

    point: HopperPoint
    est: HopperEstimate
    source: Optional[HopperPoint] = None
    """The evaluated point (one CTA per tile, register epilogue) whose variant this is (None: ``point.base``)."""

    @property
    def origin(self) -> HopperPoint:
        """The point whose variants :func:`why_hopper_variant` compares."""
        return self.source if self.source is not None else self.point.base


def hopper_error() -> float:
    """The Hopper model's error bar (:func:`synth.search.explain.model_error` of ``sm_90``, ``tma_wgmma``: the
    largest error of the sm_90 calibration after its fit, docs/search.md section 8): a gap below it is a tie within
    the model's error."""
    return model_error("sm_90", "tma_wgmma")


def resolve_mainloop(arch_name: str, mainloop: Optional[str]) -> str:
    """The main loop to search: ``mainloop``, or the arch's default (``tma_wgmma`` on sm_90, as
    ``synth solve``'s problem key). Raises :class:`SynthError` on an unknown value or a Hopper loop
    on an arch without TMA and wgmma."""
    if mainloop is None:
        return "tma_wgmma" if arch_name == "sm_90" else "cp_async"
    if mainloop not in MAINLOOPS:
        raise SynthError(None, f"unknown mainloop {mainloop!r}", f"use --mainloop {' or --mainloop '.join(MAINLOOPS)}")
    if mainloop == "tma_wgmma" and arch_name != "sm_90":
        raise SynthError(None, f"mainloop tma_wgmma needs TMA and wgmma, which {arch_name} does not have",
                         "use --arch sm_90, or --mainloop cp_async")
    return mainloop


def hopper_key(e: HopperEntry) -> tuple:
    """Ranking key: predicted time; on ties fewer K splits, one CTA per tile before persistent before ping-pong,
    no cluster before a cluster (2x1 before 1x2), the register epilogue before the TMA store, less shared memory,
    fewer stages, fewer wgmma groups held, then the tile."""
    p = e.point
    return (round(e.est.time_us, 9), p.split_k, p.persistent, p.pingpong, p.cluster != "1x1", p.cluster != "2x1",
            p.epilogue != "register", p.smem_bytes, p.stages, p.k_pipe_mmas, p.BM, p.BN)


def evaluate_tiles(ctx, legal: list[HopperPoint], say: Progress, clusters: bool = True
                   ) -> dict[HopperPoint, HopperEntry]:
    """The evaluated points: per tile the pipeline model's choice, or every legal point of a tile whose
    depths differ in CTAs per SM (or whose choice is not legal); each with its legal K splits
    (:func:`synth.search.hopper.hopper_split_issue`: the design's k-tile per split) and its legal variants
    (:func:`synth.search.hopper.hopper_variants`: persistent, the TMA store, ping-pong, the clusters; never
    split). From a tile's ``stages: auto`` point every variant and split gets its own design's choice
    (:func:`synth.search.hopper.auto_choice`: the split's k-tiles, the staging slots, order barriers and the
    cluster's remote release in the pipeline input), exactly what ``synth solve`` builds for that design with
    ``stages: auto``; from a pinned point they keep its pins (the most of its stages that fit). ``clusters`` False
    leaves the cluster variants out."""
    by_tile: dict[tuple[int, int], list[HopperPoint]] = {}
    for p in legal:
        by_tile.setdefault(p.group, []).append(p)
    legal_set = set(legal)
    out: dict[HopperPoint, HopperEntry] = {}
    tiles = sorted(by_tile)
    for i, (bm, bn) in enumerate(tiles):
        pts = by_tile[(bm, bn)]
        q = auto_point(ctx, bm, bn)
        occ = {hopper_occupancy(ctx.arch, p)[0] for p in pts}
        auto = q in legal_set and len(occ) == 1
        for p in ([q] if auto else pts):
            for v in hopper_variants(ctx, p, auto):
                if not clusters and v.cluster != "1x1":
                    continue
                if v not in out or v == p:
                    out[v] = HopperEntry(v, estimate_hopper(ctx, v), p)
            for s in SPLIT_SPACE[1:]:
                ps = p.with_(split_k=s)
                if hopper_split_issue(ctx, ps) is not None:
                    continue
                ps = auto_choice(ctx, ps) if auto else ps
                if ps is not None and is_legal_hopper(ctx, ps) is None:
                    out[ps] = HopperEntry(ps, estimate_hopper(ctx, ps))
        say("model", i + 1, len(tiles))
    return out


def is_auto_point(ctx, p: HopperPoint) -> bool:
    """Whether ``p`` is its tile's ``stages: auto`` point (:func:`synth.search.hopper.auto_point`), whose variants
    get their own design's choice."""
    return p == auto_point(ctx, p.BM, p.BN)


def variant_or_pins(ctx, base: HopperPoint, **design) -> HopperPoint:
    """``base`` with ``design`` (keys of :class:`HopperPoint`: persistent, pingpong, epilogue, cluster) as the search
    ranks it (:func:`synth.search.hopper.design_variant`), or, where no pipeline fits, with ``base``'s pins (for the
    reason :func:`is_legal_hopper` gives)."""
    d = dict(persistent=base.persistent, pingpong=base.pingpong, epilogue=base.epilogue, cluster=base.cluster)
    d.update(design)
    q = design_variant(ctx, base.base, d["persistent"], d["pingpong"], d["epilogue"], d["cluster"],
                       is_auto_point(ctx, base))
    return q if q is not None else base.with_(**design)


def _best_per_tile(entries) -> dict[tuple[int, int], HopperEntry]:
    best: dict[tuple[int, int], HopperEntry] = {}
    for e in entries:
        g = e.point.group
        if g not in best or hopper_key(e) < hopper_key(best[g]):
            best[g] = e
    return best


def _ranker(best: dict[tuple[int, int], HopperEntry]):
    keys = sorted((hopper_key(e), g) for g, e in best.items())

    def rank(e: HopperEntry) -> int:
        k = hopper_key(e)
        return 1 + sum(1 for kh, g in keys if g != e.point.group and kh < k)

    return rank


def describe_hopper(ctx, e: HopperEntry) -> str:
    """What bounds a Hopper configuration, in one clause."""
    est, p = e.est, e.point
    peak = ctx.arch.tensor_f16_f32_flop_per_clk_sm
    if est.pingpong:
        grid = (f"{est.ctas} persistent CTAs at {est.ctas_per_sm}/SM ({est.occupancy_limit}-limited, 384 threads), "
                f"two ping-pong consumer warp groups taking turns on {est.tiles} tiles of {p.BM}x{p.BN}, the busiest CTA "
                f"{est.tiles_per_cta} (the tiles fill {est.wave_efficiency:.0%} of {est.tiles_per_cta} x {est.ctas} "
                "tile slots)")
    elif est.persistent and p.cluster != "1x1":
        groups = (est.tiles + est.idle_ctas) // p.cluster_size
        grid = (f"{est.ctas} persistent CTAs at {est.ctas_per_sm}/SM ({est.occupancy_limit}-limited) in "
                f"{est.ctas // p.cluster_size} {p.cluster} clusters walking {groups} groups of {p.cluster_size} tiles "
                f"({est.tiles} tiles), the busiest cluster {est.tiles_per_cta} (the tiles fill "
                f"{est.wave_efficiency:.0%} of {est.tiles_per_cta} x {est.ctas} tile slots)")
    elif est.persistent:
        grid = (f"{est.ctas} persistent CTAs at {est.ctas_per_sm}/SM ({est.occupancy_limit}-limited) walking "
                f"{est.tiles} tiles, the busiest {est.tiles_per_cta} (the tiles fill {est.wave_efficiency:.0%} of "
                f"{est.tiles_per_cta} x {est.ctas} tile slots)")
    else:
        grid = (f"{est.tiles} tiles split {est.split_k} ways in K, {est.ctas} CTAs of at most {est.split_k_tiles} "
                "k-tiles," if est.split_k > 1 else f"{est.ctas} CTAs")
        grid += (f" in {est.waves} wave{'s' if est.waves != 1 else ''} at {est.ctas_per_sm}/SM "
                 f"({est.occupancy_limit}-limited, last wave {est.wave_efficiency:.0%} full)")
    if est.epilogue == "tma_store":
        grid += ", C through shared staging slots and TMA stores"
    return (f"{est.bound}-bound: {grid}, "
            f"main loop at {loop_rate(e) / peak:.0%} of the wgmma peak; one CTA's k-tile takes {est.ii:.0f} "
            f"cycles in the pipeline model ({est.mma_cycles} of wgmma; {p.stages} stages, K_PIPE_MMAS "
            f"{p.k_pipe_mmas}: {est.loads_in_flight} TMA load{'s' if est.loads_in_flight != 1 else ''} in flight "
            f"against a {est.fill_cycles}-cycle round trip)")


def why_hopper_split(ctx, e: HopperEntry) -> str:
    """Why ``e``'s K split pays (empty without a split): the busiest SM's CTAs and k-tiles without and with
    it, the reduction, and the prediction of the same point unsplit."""
    est = e.est
    if est.split_k <= 1:
        return ""
    one = estimate_hopper(ctx, e.point.base)
    text = (f"split {est.split_k} ways in K because {one.ctas} tiles on {ctx.arch.sm_count} SMs at "
            f"{one.ctas_per_sm}/SM put {one.busiest_ctas} CTA{'s' if one.busiest_ctas != 1 else ''} of "
            f"{one.k_tiles} k-tiles ({one.busiest_ctas * one.k_tiles} in all) on the busiest SM; split, "
            f"{est.ctas} CTAs put {est.busiest_ctas} of at most {est.split_k_tiles} "
            f"({est.busiest_ctas * est.split_k_tiles} in all) there, for {est.reduction_cycles:,} cycles of "
            "reduction (f32 partials through L2, the tile's ticket)")
    if one.time_us > est.time_us:
        text += f"; the split cuts the prediction from {one.time_us:.1f} us unsplit to {est.time_us:.1f} us"
    return text


def why_hopper_persistent(ctx, e: HopperEntry) -> str:
    """Why ``e`` is persistent or not (empty for a split point): one CTA per tile against the persistent grid
    of the same point, with wave quantization, the prologue and fill saved per extra tile, the tile-boundary
    cost and the two predictions (a gap below :data:`synth.search.explain.MODEL_ERROR` is a tie within the
    model's error)."""
    if e.est.split_k > 1:
        return ""
    arch, base = ctx.arch, e.origin
    one, per = estimate_hopper(ctx, base), estimate_hopper(ctx, base.with_(persistent=True))
    slots = arch.sm_count * one.ctas_per_sm
    exact = one.ctas / slots
    idle = (one.waves * slots - one.ctas) / slots
    quant = (f"one CTA per tile: {one.ctas} CTAs on {arch.sm_count} SMs x {one.ctas_per_sm}/SM = {exact:.2f} waves, "
             f"run as {one.waves}" + (f" (wave quantization: {pct(idle)} of the CTA slots idle in the last wave)"
                                      if idle > 1e-9 else " (no wave quantization)") +
             f", a {one.prologue_cycles:,}-cycle prologue (setup barriers and the pipeline fill) per wave")
    pers = (f"persistent: {per.ctas} CTAs, the busiest walks {per.tiles_per_cta} tile"
            f"{'s' if per.tiles_per_cta != 1 else ''} (ceil({per.tiles} / {per.ctas}): the same quantization), "
            f"its prologue once ({one.fixed_cycles - per.fixed_cycles:,} fewer fixed cycles on the busiest SM)")
    if per.tiles_per_cta > 1:
        pers += (f", {per.boundary_cycles:,} cycles at its {per.tiles_per_cta - 1} tile boundar"
                 f"{'ies' if per.tiles_per_cta > 2 else 'y'} (the next tile's first TMA round trip beyond the "
                 f"{per.epilogue_cycles:,}-cycle epilogue, during which the producer fills the "
                 f"{base.stages - base.k_pipe_mmas} slots K_PIPE_MMAS {base.k_pipe_mmas} leaves free)")
    gap = one.time_us / per.time_us - 1
    if abs(gap) <= 1e-9:
        verdict = "predicted equal: nothing to save, so one CTA per tile (ties go to it)"
    elif gap > 0:
        verdict = (f"persistent predicted {pct(gap)} faster ({one.time_us:.1f} -> {per.time_us:.1f} us)" +
                   (f", {tie_text(hopper_error())}" if gap < hopper_error() else ""))
    else:
        loss = per.time_us / one.time_us - 1
        verdict = (f"persistent predicted {pct(loss)} slower ({per.time_us:.1f} vs {one.time_us:.1f} us)" +
                   (f", {tie_text(hopper_error())}" if loss < hopper_error() else ""))
    return f"{quant}; {pers}; {verdict}"


def _versus(a: HopperEstimate, b: HopperEstimate, name_a: str, name_b: str) -> str:
    """``name_a predicted X% faster/slower than name_b (a vs b us)``, a tie within the model's error below it."""
    if abs(a.time_us - b.time_us) <= 1e-9 * b.time_us:
        return f"{name_a} predicted equal to {name_b} ({a.time_us:.1f} us)"
    if a.time_us < b.time_us:
        gap, word = b.time_us / a.time_us - 1, "faster"
    else:
        gap, word = a.time_us / b.time_us - 1, "slower"
    return (f"{name_a} predicted {pct(gap)} {word} than {name_b} ({a.time_us:.1f} vs {b.time_us:.1f} us)" +
            (f", {tie_text(hopper_error())}" if gap < hopper_error() else ""))


def why_hopper_variant(ctx, e: HopperEntry, clusters: bool = True) -> str:
    """Which variant of ``e``'s point won and why (empty for a split point): the predictions of one CTA per tile,
    persistent, ping-pong (``BM = 64``) and the TMA store (:func:`synth.search.hopper.hopper_variants`); ping-pong
    against the cooperative persistent kernel (its epilogue hidden behind the other warp group's main loop, the
    handoffs), the TMA store against the register store of the same grid (staging writes with their bank
    conflicts and barriers against the register store; its writes overlapped); each gap below
    :data:`synth.search.explain.MODEL_ERROR` is a tie within the model's error."""
    if e.est.split_k > 1:
        return ""
    base = e.origin
    auto = is_auto_point(ctx, base)
    found = [HopperEntry(q, estimate_hopper(ctx, q), base) for q in hopper_variants(ctx, base, auto)
             if clusters or q.cluster == "1x1"]
    found.sort(key=hopper_key)
    if e.point not in {f.point for f in found}:
        found.insert(0, e)
    by = {(f.point.persistent, f.point.pingpong, f.point.epilogue): f for f in found if f.point.cluster == "1x1"}
    p = e.point
    parts = []
    co = by.get((True, False, "register"))
    pp = by.get((True, True, "register"))
    if pp is None:
        why = is_legal_hopper(ctx, variant_or_pins(ctx, base, persistent=True, pingpong=True))
        parts.append(f"ping-pong is not ranked for this tile ({why})")
    elif co is not None:
        s = pp.est
        text = ("ping-pong: one tile per CTA, so the second warp group has no main loop to hide the first one's C "
                "store behind" if s.tiles_per_cta <= 1 else
                f"ping-pong: each warp group's {s.epilogue_cycles:,}-cycle C store runs while the other computes its "
                f"{s.loop_per_tile_cycles:,}-cycle main loop ({s.hidden_cycles:,} epilogue cycles hidden on the busiest "
                f"SM, {s.boundary_cycles:,} paid at its {max(s.tiles_per_cta - 1, 0)} handoff"
                f"{'s' if s.tiles_per_cta != 2 else ''}), where the cooperative persistent kernel stores "
                f"{co.est.epilogue_cycles:,} cycles after every main loop")
        parts.append(text + "; " + _versus(s, co.est, "ping-pong", "cooperative persistent"))
    if clusters:
        parts.append(why_hopper_cluster(ctx, base, found))
    grid = (p.persistent, p.pingpong)
    if p.cluster != "1x1":
        cl = {f.point.epilogue: f for f in found if f.point.cluster == p.cluster and f.point.persistent == p.persistent}
        ts, rg = cl.get("tma_store"), cl.get("register")
    else:
        ts, rg = by.get(grid + ("tma_store",)), by.get(grid + ("register",))
    no_store = next(iter(p.with_(epilogue="tma_store").output.shape_issues(ctx.N)), None)  # the design's rule
    if no_store is not None:
        parts.append(f"no TMA store: {no_store.message}")
    elif ts is not None and rg is not None:
        s = ts.est
        W = p.store_cols
        text = (f"TMA store ({p.variant.replace(' + TMA store', '')}): "
                f"{s.staging_cycles:,} cycles of staging writes ({staging_wavefronts(p.BN)} shared-memory wavefronts "
                f"per warp store where 2 carry no bank conflict: the rows of the {W}-column f32 slot share banks) "
                f"and {s.epilogue_cycles - s.staging_cycles:,} of named barriers per tile on the consumers' path, "
                f"against the register store's {rg.est.epilogue_cycles:,} (latency and the bytes at the SM's L2 "
                f"share); the TMA unit's writes ({s.store_cycles:,} cycles a tile) overlap what follows "
                f"({s.hidden_cycles:,} cycles hidden on the busiest SM, {s.drain_cycles:,} at the end) and share L2 "
                "with the main loop")
        if ts.point.stages != rg.point.stages:
            text += f" (the staging slots leave room for {ts.point.stages} stages, not {rg.point.stages})"
        parts.append(text + "; " + _versus(s, rg.est, "the TMA store", "the register store"))
    listing = ", ".join(f"{f.point.variant} {f.est.time_us:.1f}" for f in found)
    won = f"{p.variant} is the fastest of the {len(found)} variants of {base.BM}x{base.BN}x{base.BK} ({listing} us)"
    other = next((f for f in found if f.point != p), None)
    if other is not None:
        gap = other.est.time_us / e.est.time_us - 1
        won += (f", {other.point.variant} next, {pct(gap)} behind" + (f", {tie_text(hopper_error())}" if gap < hopper_error() else "")
                if gap > 1e-9 else f", predicted equal to {other.point.variant} (ties go to the simpler kernel)")
    return "; ".join([won] + parts)


def why_hopper_cluster(ctx, base: HopperPoint, found: list[HopperEntry]) -> str:
    """The 2x1 and 1x2 clusters of ``base`` against its one-CTA-per-tile kernel (same epilogue: the register
    store): the L2 bytes a CTA reads per k-tile (the shared operand's tile once per cluster), the resulting L2 term
    of a round, the bytes each SM still receives (the whole tile) and their cycles at its L2 ingress port, the grid
    rounded up to whole clusters (idle CTAs), the remote release in the refill round trip and the two cluster barriers, and the two predictions (a gap below :data:`synth.search.explain.MODEL_ERROR` is a
    tie within the model's error); then each persistent cluster against the persistent kernel without a cluster and
    the cluster of one CTA per tile (:func:`why_persistent_cluster`); or why no cluster of this tile is ranked."""
    one = next((f for f in found if f.point.cluster == "1x1" and not f.point.persistent
                and f.point.epilogue == "register"), None)
    shown = []
    for c in ("2x1", "1x2"):
        f = next((f for f in found if f.point.cluster == c and not f.point.persistent
                  and f.point.epilogue == "register"), None)
        per = why_persistent_cluster(ctx, base, found, c, f)
        if f is None:
            q = variant_or_pins(ctx, base, cluster=c)
            shown.append(f"cluster {c} is not ranked for this tile ({is_legal_hopper(ctx, q)})")
            continue
        if one is None:
            continue
        s, o = f.est, one.est
        tl2 = dict(s.terms).get("l2", 0.0)
        ol2 = dict(o.terms).get("l2", 0.0)
        share = f.point.shared_operand
        axis = "tile rows" if c == "2x1" else "tile columns"
        count = -(-ctx.M // base.BM) if c == "2x1" else -(-ctx.N // base.BN)
        grid = (f"{count} {axis} round up to {count + 1}: {s.idle_ctas} CTA{'s' if s.idle_ctas != 1 else ''} run "
                "no tile (zero-filled loads) and take CTA slots" if s.idle_ctas else
                f"{count} {axis}, an even count: no idle CTA")
        port = ctx.arch.l2_ingress_bytes_per_clk_sm or ctx.arch.l2_bytes_per_clk / ctx.arch.sm_count
        text = (f"cluster {c} ({share} multicast): a CTA reads {s.l2_ktile_bytes / 1024:g} KiB per k-tile from L2 "
                f"instead of {o.l2_ktile_bytes / 1024:g} ({share} once per pair), an L2 term of {tl2:,.0f} instead of "
                f"{ol2:,.0f} cycles a round, but each SM still receives {o.l2_ktile_bytes / 1024:g} KiB (its own half of "
                f"{share} and the peer's multicast half) through its {port:g} B/clk port, "
                f"{dict(s.terms).get('ingress', 0.0):,.0f} cycles, against {dict(s.terms).get('tensor', 0.0):,.0f} of "
                f"wgmma; {grid}; "
                f"{s.ctas} CTAs in {s.waves} wave{'s' if s.waves != 1 else ''} of at most "
                f"{cluster_slots(ctx.arch, s.ctas_per_sm, 2)} clusters of 2 (one CTA per tile: {o.waves}); the peer's "
                "remote release adds "
                f"{s.fill_cycles - o.fill_cycles:,} cycles to each refill round trip ({s.fill_cycles:,}) and the two "
                f"cluster barriers {s.cluster_sync_cycles:,} to each CTA")
        shown.append(text + "; " + _versus(s, o, f"cluster {c}", "one CTA per tile"))
        shown += [per] if per else []
    return "; ".join(shown)


def why_persistent_cluster(ctx, base: HopperPoint, found: list[HopperEntry], c: str,
                           one_tile: Optional[HopperEntry]) -> str:
    """The persistent ``c`` cluster of ``base`` (register store) against the persistent kernel without a cluster and
    against the ``c`` cluster of one CTA per tile (``one_tile``, when ranked): its clusters, the cluster-sized tile
    groups they walk (the busiest's count, against the tiles of the persistent CTA), its prologue once, its
    tile-group boundaries and the predictions; why it is not ranked where it is not (empty where the one-tile cluster
    is not ranked either: that reason is given)."""
    f = next((f for f in found if f.point.cluster == c and f.point.persistent and f.point.epilogue == "register"),
             None)
    if f is None:
        if one_tile is None:
            return ""
        q = variant_or_pins(ctx, base, persistent=True, cluster=c)
        return f"persistent cluster {c} is not ranked for this tile ({is_legal_hopper(ctx, q)})"
    per = next((g for g in found if g.point.cluster == "1x1" and g.point.persistent and not g.point.pingpong
                and g.point.epilogue == "register"), None)
    s = f.est
    groups = (s.tiles + s.idle_ctas) // 2
    text = (f"persistent cluster {c}: {s.ctas} CTAs in {s.ctas // 2} clusters walk {groups} groups of 2 tiles"
            + (f" ({s.idle_ctas} of their tiles outside C, computed on zero-filled loads)" if s.idle_ctas else "")
            + f", the busiest {s.tiles_per_cta} (ceil({groups} / {s.ctas // 2})"
            + (f"; persistent without a cluster: {per.est.tiles_per_cta} tiles per CTA" if per is not None else "")
            + f"), its {s.prologue_cycles:,}-cycle prologue (the cluster barriers and the longer round trip "
              f"included) once, {s.boundary_cycles:,} cycles at its tile-group boundaries")
    vs = ([_versus(s, per.est, f"persistent cluster {c}", "persistent without a cluster")] if per is not None else []) \
        + ([_versus(s, one_tile.est, f"persistent cluster {c}", f"cluster {c} of one CTA per tile")]
           if one_tile is not None else [])
    return "; ".join([text] + vs)


VARIANT_KINDS: tuple[tuple[str, object], ...] = (
    ("ping-pong", lambda p: p.pingpong), ("TMA-store", lambda p: p.epilogue == "tma_store"),
    ("cluster", lambda p: p.cluster != "1x1"))
"""The variant kinds the winner's reason compares it with, when it is not one: its best kernel over every tile."""


def best_of_kinds(entries) -> dict[str, HopperEntry]:
    """The best entry (:func:`hopper_key`) of each kind of :data:`VARIANT_KINDS` among ``entries``."""
    out: dict[str, HopperEntry] = {}
    for e in entries:
        for kind, has in VARIANT_KINDS:
            if has(e.point) and (kind not in out or hopper_key(e) < hopper_key(out[kind])):
                out[kind] = e
    return out


def why_not_kinds(e: HopperEntry, kinds: dict[str, HopperEntry]) -> str:
    """Why ``e`` beats the best kernel of each variant kind it is not (empty when there is none): its prediction,
    the gap (a tie within the model's error below it) and what ``e`` saves (:func:`synth.search.explain.difference`)."""
    parts = []
    for kind, has in VARIANT_KINDS:
        o = kinds.get(kind)
        if o is None or has(e.point):
            continue
        gap = o.est.time_us / e.est.time_us - 1
        if gap <= 1e-9:
            parts.append(f"the best {kind} kernel ({o.point.label}) is predicted equal and ranked after it (ties go "
                         "to the simpler kernel)")
        else:
            parts.append(f"the best {kind} kernel ({o.point.label}) is predicted {pct(gap)} slower" +
                         (f", {tie_text(hopper_error())}" if gap < hopper_error() else "") + f"; #1 {difference(e, o)}")
    return "; ".join(parts)


def why_hopper_winner(ctx, e: HopperEntry, ties: int, runner: Optional[HopperEntry],
                      kinds: Optional[dict[str, HopperEntry]] = None, clusters: bool = True) -> str:
    """Why ``e`` ranks first; ``runner`` is the best entry of another tile (never ``e``'s own); ``kinds`` the best
    entry of each variant kind (:func:`best_of_kinds`), compared when ``e`` is not of that kind."""
    text = describe_hopper(ctx, e)
    split = why_hopper_split(ctx, e)
    if split:
        text += "; " + split
    persistent = why_hopper_persistent(ctx, e)
    if persistent:
        text += "; " + persistent
    variant = why_hopper_variant(ctx, e, clusters)
    if variant:
        text += "; " + variant
    other_kinds = why_not_kinds(e, kinds or {})
    if other_kinds:
        text += "; " + other_kinds
    if ties:
        text += (f"; {ties} other tile{'s' if ties > 1 else ''} tie{'s' if ties == 1 else ''} at this prediction "
                 "(ties go to less shared memory, then fewer stages)")
    if runner is None or runner.point.group == e.point.group:
        return text
    gain = runner.est.time_us / e.est.time_us - 1
    if gain <= 1e-9:
        return text + f"; the best other tile ({runner.point.label}) is predicted equal and ranked after it"
    return text + "; " + beats(runner.point.label, gain, difference(e, runner), error=hopper_error())


def why_hopper_short(ctx, e: HopperEntry, runner: Optional[HopperEntry]) -> str:
    """The winner's reason in one or two lines (the table's ``why #1``): its bound, design and main-loop rate, the
    variant it beats of its own tile, and the verdict against the best other tile, with the sm_90 error bar
    (:func:`hopper_error`). :func:`why_hopper_winner` gives the whole reasoning (``--explain``, the JSON's
    ``why``)."""
    est, p = e.est, e.point
    err = hopper_error()
    peak = ctx.arch.tensor_f16_f32_flop_per_clk_sm
    grid = (f"{est.tiles_per_cta} tiles per CTA" if est.persistent else
            f"{est.waves} wave{'s' if est.waves != 1 else ''}") + (f", split {est.split_k} in K" if est.split_k > 1
                                                                   else "")
    text = (f"{est.bound}-bound {p.variant} {p.BM}x{p.BN}x{p.BK} ({p.stages} stages, K_PIPE_MMAS {p.k_pipe_mmas}; "
            f"{grid}), main loop at {loop_rate(e) / peak:.0%} of the wgmma peak")
    if est.split_k == 1:
        base = e.origin
        auto = is_auto_point(ctx, base)
        others = sorted((HopperEntry(q, estimate_hopper(ctx, q), base) for q in hopper_variants(ctx, base, auto)
                         if q != p), key=hopper_key)
        if others:
            o = others[0]
            gap = o.est.time_us / est.time_us - 1
            text += (f"; next variant of the tile: {o.point.variant}, " +
                     (f"{pct(gap)} slower" + (f" ({tie_text(err)})" if gap < err else "") if gap > 1e-9
                      else "predicted equal"))
    if runner is not None and runner.point.group != p.group:
        gain = runner.est.time_us / est.time_us - 1
        text += (f"; best other tile {runner.point.label}: " +
                 (f"{pct(gain)} slower" + (f", {tie_text(err)}" if gain < err else "") if gain > 1e-9
                  else "predicted equal"))
    return text + " (--explain gives the whole reasoning)"


def why_hopper_other(ctx, e: HopperEntry, winner: HopperEntry) -> str:
    """Why ``e`` ranks after ``winner``."""
    loss = e.est.time_us / winner.est.time_us - 1
    if loss <= 1e-12:
        return describe_hopper(ctx, e) + "; ties with #1 (ranked after it by shared memory, stages, then the tile)"
    return describe_hopper(ctx, e) + "; " + behind(loss, difference(winner, e), error=hopper_error())


def hopper_candidate(ctx, e: HopperEntry, rank: int, why: str, why_short: str = "") -> Candidate:
    """The :class:`Candidate` of a ranked Hopper entry (``config``: its pinned HopperGemm)."""
    p, est = e.point, e.est
    return Candidate(
        rank=rank, config=p.problem(ctx.M, ctx.N, ctx.K, ctx.dtype), time_us=est.time_us, tflops=est.tflops,
        smem_bytes=p.smem_bytes, smem_slots=p.stages, regs_per_thread=est.regs_per_thread,
        ctas_per_sm=est.ctas_per_sm, occupancy_limit=est.occupancy_limit, ctas=est.ctas, waves=est.waves,
        wave_efficiency=round(est.wave_efficiency, 6), k_tiles=est.k_tiles, ktile_cycles=int(round(est.ii)),
        ktile_bound=est.mma_cycles, round_cycles=est.round_cycles, bound=est.bound, solver_status=est.status,
        why=why, terms=est.terms, l2_hit=est.l2_hit, latency_cycles=float(est.fill_cycles), mix_source="none",
        instructions_per_hmma=0.0, mainloop="tma_wgmma", k_pipe_mmas=p.k_pipe_mmas,
        split_k_tiles=est.split_k_tiles, reduction_cycles=est.reduction_cycles,
        workspace_bytes=est.workspace_bytes, tiles_per_cta=est.tiles_per_cta, epilogue_cycles=est.epilogue_cycles,
        boundary_cycles=est.boundary_cycles, prologue_cycles=est.prologue_cycles, cluster=p.cluster,
        idle_ctas=est.idle_ctas, why_short=why_short)


def rank_hopper_references(ctx, entries: dict[HopperPoint, HopperEntry], best, winner: Optional[HopperEntry]
                           ) -> list[ReferenceRank]:
    """Where CUTLASS 3's cooperative kernels (``sm90_cutlass3`` of the reference file) rank.

    ``stages: auto`` is the most stages that fit; with fewer k-tiles than that the pipeline still
    has them (the program is proven for every ``T``). A reference that is not legal is reported
    with the first constraint it breaks.
    """
    rank_of = _ranker(best)
    out = []
    for ref in load_hopper_references():
        g = HopperGemm.of("ref", ctx.M, ctx.N, ctx.K, ctx.dtype, ref.BM, ref.BN)
        stages = ref.stages if ref.stages is not None else g.max_stages()
        k = min(ref.k_pipe_mmas, max(stages - 1, 0))
        p = HopperPoint(ref.BM, ref.BN, stages, k)
        why = "shared-memory: not even one stage fits" if stages < 1 else is_legal_hopper(ctx, p)
        bk = next((i for i in p.with_(bk=ref.BK).mainloop.issues() if i.key == "tile.BK"), None)
        if bk is not None:  # the design's tile.BK rule
            why = f"KernelDesign.check: {bk.message}"
        if why is not None:
            out.append(ReferenceRank(ref.name, (ref.BM, ref.BN, ref.BK), p.warps, stages, None, None, None, None,
                                     why, k_pipe_mmas=k))
            continue
        e = entries.get(p) or HopperEntry(p, estimate_hopper(ctx, p))
        ratio = e.est.time_us / winner.est.time_us if winner is not None else None
        out.append(ReferenceRank(ref.name, (ref.BM, ref.BN, ref.BK), p.warps, stages, stages, rank_of(e),
                                 e.est.time_us, ratio, None, None, e.est.tflops, k_pipe_mmas=k))
    return out


def search_hopper(ctx, *, top: int = 5, references: bool = True, progress: Optional[Progress] = None,
                  t0: Optional[float] = None, clusters: bool = True) -> SearchResult:
    """Rank the Hopper kernels for the context's shape; the ``top`` best tiles, best first.

    ``clusters`` False: no cluster variant is ranked. Raises :class:`SynthError` when ``top < 1`` or no point is
    legal (K not a multiple of 8).
    """
    t0 = time.monotonic() if t0 is None else t0
    if top < 1:
        raise SynthError(None, f"--top {top}: nothing to rank", "use --top 1 or more")
    say = progress_or_silent(progress)
    calls0 = pipeline_evaluations()
    space = enumerate_hopper_space()
    say("space", 0, len(space))
    legal, first, anyv = prune_hopper(ctx, space)
    say("space", len(space), len(space))
    if not legal:
        worst = max(first.items(), key=lambda kv: kv[1] if kv[0] != "k_pipe_mmas<stages" else -1)
        raise SynthError(None, f"no legal Hopper configuration for {ctx.M}x{ctx.N}x{ctx.K} {ctx.dtype} on sm_90 "
                         f"(most often {worst[0]})",
                         "pad K to a multiple of 8" if worst[0] == "tma-16B" else "use --mainloop cp_async")
    entries = evaluate_tiles(ctx, legal, say, clusters)
    best = _best_per_tile(entries.values())
    order = sorted(best.values(), key=hopper_key)
    rank_of = _ranker(best)
    chosen = order[:top]
    winner = chosen[0] if chosen else None
    cands = []
    if winner is not None:
        ties = sum(1 for e in order[1:] if round(e.est.time_us, 9) == round(winner.est.time_us, 9))
        runner = order[1] if len(order) > 1 else None
        for e in chosen:
            why = (why_hopper_winner(ctx, e, ties, runner, best_of_kinds(entries.values()), clusters) if e is winner
                   else why_hopper_other(ctx, e, winner))
            short = why_hopper_short(ctx, e, runner) if e is winner else ""
            cands.append(hopper_candidate(ctx, e, rank_of(e), why, short))
    refs = rank_hopper_references(ctx, entries, best, winner) if references else []
    return SearchResult(
        M=ctx.M, N=ctx.N, K=ctx.K, dtype=ctx.dtype, arch=ctx.arch.name, candidates=tuple(cands),
        space_size=len(space), feasible=len(legal), excluded=tuple(first.items()), violations=tuple(anyv.items()),
        solved=len(entries), complete=bool(cands), references=tuple(refs), notes=above_published_note(ctx, cands),
        elapsed_s=time.monotonic() - t0, solver_calls=pipeline_evaluations() - calls0, mainloop="tma_wgmma",
        split_points=sum(1 for p in entries if p.split_k > 1),
        persistent_points=sum(1 for p in entries if p.persistent),
        cluster_points=sum(1 for p in entries if p.cluster != "1x1"),
        warnings=beats_published(ctx.arch.name, (ctx.M, ctx.N, ctx.K), cands, hopper_error()))


def above_published_note(ctx, cands) -> tuple[str, ...]:
    """A note (or none) naming the candidates predicted above the best published figure of the arch
    (:func:`synth.search.published.best_published`): the model is then outside the range its figures were checked
    against. No square or skinny shape of the tests gets there; a shape of whole waves and a long k-loop can, with
    or without a cluster (1536x2816x65536: 132 tiles of 128x256 in one wave; docs/search.md, section 10, "What it
    leaves out")."""
    try:
        cap, source = published.best_published(ctx.arch.name)
    except SynthError:
        return ()
    over = [c for c in cands if c.tflops > cap]
    if not over:
        return ()
    names = ", ".join(f"#{c.rank} {c.label} {c.tflops:.1f}" for c in over)
    return (f"{len(over)} candidate{'s are' if len(over) > 1 else ' is'} predicted above the best published "
            f"{ctx.arch.name} figure, {cap:g} TFLOP/s ({source}): {names}. The model is outside the range its "
            "figures were checked against there (whole waves and a long k-loop leave only the overlap of the wgmma "
            "and L2 terms, and the L2 figure is not published); read the margin over the other kernels as a tie "
            "within the model's error, and --measure on a GPU",)


def hopper_context(M: int, N: int, K: int, dtype: str, arch):
    """The :class:`~synth.search.space.Context` of a Hopper search (f16 or bf16 operands)."""
    ctx = make_context(M, N, K, "f16", arch)
    if dtype not in DTYPES:
        raise SynthError(None, f"dtype {dtype!r}: the Hopper main loop takes f16 or bf16 operands (f32 accumulation)",
                         "use --dtype f16 or --dtype bf16")
    return replace(ctx, dtype=dtype)


__all__ = ["search_hopper", "resolve_mainloop", "hopper_context", "HopperEntry", "hopper_key", "evaluate_tiles",
           "describe_hopper", "why_hopper_split", "why_hopper_persistent", "why_hopper_variant", "why_hopper_cluster",
           "why_persistent_cluster",
           "best_of_kinds", "why_not_kinds", "above_published_note", "VARIANT_KINDS", "why_hopper_winner", "why_hopper_other", "why_hopper_short", "hopper_error",
           "is_auto_point", "variant_or_pins", "hopper_candidate", "rank_hopper_references"]

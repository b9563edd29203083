"""One-sentence reasons for a ranking: why #1 wins, why the others rank where they do.

Input: the search :class:`~synth.search.space.Context` and ranked
:class:`~synth.search.rank.Entry` rows. Output: plain-text reasons built from
the model's terms (bound, waves, occupancy, main-loop rate, fill and drain),
stored in :attr:`Candidate.why`. Pure: nothing is timed here.
"""

from __future__ import annotations

from typing import Optional

from . import published  # published.tie_error looked up when called (tests replace it)
from .rank import Entry, estimate_of
from .space import Context

def model_error(arch: str = "sm_80", mainloop: str = "cp_async") -> float:
    """The error bar of the model that ranks ``mainloop`` on ``arch``: two predictions closer than it are a tie
    within the model's error. Read from synth/data/published_gemm.yaml (``calibration``,
    :func:`synth.search.published.tie_error`): the cp.async + mma.sync model (every arch) has the sm_80
    calibration's 15 % (docs/search.md, section 8: every published A100 point within it); the Hopper model
    (``tma_wgmma``) the sm_90 calibration's bar, the largest error of its published H100 points after the fit
    (benchmarks/calibrate_sm90.py)."""
    return published.tie_error(arch if mainloop == "tma_wgmma" else "sm_80")[0]


def tie_text(error: float) -> str:
    """How a gap below ``error`` is said, in every explanation and the search's table."""
    return f"a tie within the model's error (up to {error:.0%})"


MODEL_ERROR = model_error("sm_80")
"""The cp.async + mma.sync model's calibration error (15 %: every published A100 point it is calibrated on is
predicted within it, docs/search.md, section 8; from the data file). Two predictions closer than this are a tie
within the model's error. The Hopper model's bar is :func:`model_error` of ``sm_90``."""

TIE = tie_text(MODEL_ERROR)
"""How a gap below :data:`MODEL_ERROR` is said (the cp.async model's explanations and table)."""


def beats(label: str, gain: float, detail: str, at_least: str = "", error: Optional[float] = None) -> str:
    """The winner's clause against the best other tile ``label``, predicted ``gain`` (a fraction) slower.

    Below ``error`` (:data:`MODEL_ERROR` when None) the clause says the two are a tie within the model's error (the
    prediction orders them, nothing more); ``detail`` (what the winner saves) follows either way.
    """
    error = MODEL_ERROR if error is None else error
    if gain < error:
        return (f"{tie_text(error)} with the best other tile ({label}), predicted {at_least}{pct(gain)} slower: "
                f"#1 {detail}")
    return f"beats the best other tile ({label}) by {at_least}{pct(gain)}: {detail}"


def behind(loss: float, detail: str, error: Optional[float] = None) -> str:
    """A runner-up's clause: predicted ``loss`` (a fraction) slower than #1, which ``detail``; a tie within the
    model's error below ``error`` (:data:`MODEL_ERROR` when None)."""
    error = MODEL_ERROR if error is None else error
    if loss < error:
        return f"{pct(loss)} slower than #1 ({tie_text(error)}), which {detail}"
    return f"{pct(loss)} slower than #1, which {detail}"


def spread_note(times_us, error: Optional[float] = None) -> str:
    """One line for the ranked table when its predictions (microseconds, best first; at least two) lie within
    ``error`` (:data:`MODEL_ERROR` when None) of the first: they are a tie within the model's error. Empty
    otherwise."""
    error = MODEL_ERROR if error is None else error
    times = list(times_us)
    if len(times) < 2 or times[0] <= 0:
        return ""
    spread = max(times) / times[0] - 1
    if spread >= error:
        return ""
    return (f"the {len(times)} candidates shown are predicted within {pct(spread)} of each other: "
            f"{tie_text(error)}, so the ranking among them is not a prediction the model can make; --measure "
            "times them")


def loop_rate(e: Entry) -> float:
    """Main-loop FLOP per cycle of one SM: the active CTAs each finishing a k-tile per round."""
    p, est = e.point, e.est
    return 2.0 * p.BM * p.BN * p.BK * est.active_ctas_per_sm / max(est.round_exact or est.round_cycles, 1)


def describe(ctx: Context, e: Entry) -> str:
    """What bounds a configuration, in one clause."""
    est = e.est
    peak = ctx.arch.tensor_f16_f32_flop_per_clk_sm * ctx.arch.mma_sync_fraction
    mix = f", {est.instructions_per_hmma:.2f} instructions per HMMA ({est.mix_source})" \
        if est.instructions_per_hmma else ""
    if getattr(est, "stream_k", False):
        grid = (f"{est.tiles} tiles of {est.k_tiles} k-tiles shared by {est.ctas} stream-K CTAs of at most "
                f"{est.split_k_tiles} k-tiles,")
    elif est.split_k > 1:
        grid = f"{est.tiles} tiles split {est.split_k} ways in K, {est.ctas} CTAs of at most {est.split_k_tiles} k-tiles,"
    else:
        grid = f"{est.ctas} CTAs"
    return (f"{est.bound}-bound: {grid} in {est.waves} wave{'s' if est.waves != 1 else ''} at "
            f"{est.ctas_per_sm}/SM ({est.occupancy_limit}-limited, last wave {est.wave_efficiency:.0%} full), "
            f"main loop at {loop_rate(e) / peak:.0%} of the mma.sync peak{mix}")


def why_split(ctx: Context, e: Entry, unsplit: Optional[Entry] = None) -> str:
    """Why ``e``'s K split or stream-K pays (empty without either): the busiest SM's CTAs and k-tiles without
    and with it, the reduction it costs, and the gain over the same configuration unsplit.

    ``unsplit``: the entry of ``e.point.base``; it is re-estimated with ``e``'s timing and mix (the same
    loop), so the comparison is between two equally timed predictions.
    """
    est = e.est
    stream = getattr(est, "stream_k", False)
    if est.split_k <= 1 and not stream:
        return ""
    base = e.point.base
    res = unsplit.res if unsplit is not None else e.res
    one = estimate_of(ctx, base, res, e.solved, e.mix)
    sms = ctx.arch.sm_count
    before = (f"{one.ctas} tiles on {sms} SMs at {one.ctas_per_sm}/SM put {one.busiest_ctas} "
              f"CTA{'s' if one.busiest_ctas != 1 else ''} of {one.k_tiles} k-tiles "
              f"({one.busiest_ctas * one.k_tiles} in all) on the busiest SM")
    after = f"{est.busiest_ctas} of at most {est.split_k_tiles} ({est.busiest_ctas * est.split_k_tiles} in all)"
    cost = f"{est.reduction_cycles:,} cycles of reduction (f32 partials through L2, the tile's ticket)"
    if stream:
        text = (f"stream-K because {before}; stream-K's {est.ctas} CTAs, one wave, share the "
                f"{est.tiles * est.k_tiles} k-tiles: {after} there, in up to {est.segments} segments each, "
                f"{est.partial_tiles} tiles summed from partials, for {cost}")
    else:
        text = f"split {est.split_k} ways in K because {before}; split, {est.ctas} CTAs put {after} there, for {cost}"
    if one.time_us > est.time_us:
        a, b = _distinct(one.time_us, est.time_us)
        text += f"; {'stream-K' if stream else 'the split'} cuts the prediction from {a} us unsplit to {b} us"
    return text


def why_winner(ctx: Context, e: Entry, ties: int, runner: Optional[Entry], unsplit: Optional[Entry] = None) -> str:
    """Why ``e`` ranks first: what bounds it, its ties, why it splits K (:func:`why_split`, with
    ``unsplit`` the entry of its base point) and how it beats the best other tile ``runner``.

    ``runner`` must have another tile than ``e`` (its ``BM x BN x BK``); a runner
    predicted equal or faster (possible when the budget left it at its bound) is
    said as such, never as a negative gain.
    """
    text = describe(ctx, e)
    split = why_split(ctx, e, unsplit)
    if split:
        text += "; " + split
    if ties:
        text += (f"; {ties} other configuration{'s' if ties > 1 else ''} tie{'s' if ties == 1 else ''} "
                 "at this prediction (ties go to no stream-K, fewer K splits, fewer k-tiles, then less shared memory, "
                 "fewer stages)")
    if runner is None or runner.point.group[:3] == e.point.group[:3]:
        return text
    gain = runner.est.time_us / e.est.time_us - 1
    if gain <= 1e-9:
        return text + f"; the best other tile ({runner.point.label}) is predicted equal and ranked after it"
    at_least = "" if runner.solved is not None else "at least "
    return text + "; " + beats(runner.point.label, gain, difference(e, runner), at_least)


def why_other(ctx: Context, e: Entry, winner: Entry) -> str:
    """Why ``e`` ranks after ``winner``."""
    loss = e.est.time_us / winner.est.time_us - 1
    if loss <= 1e-12:
        return describe(ctx, e) + ("; ties with #1 (ranked after it by no stream-K, fewer K splits, fewer k-tiles, "
                                   "less shared memory, fewer stages)")
    return describe(ctx, e) + "; " + behind(loss, difference(winner, e))


def pct(x: float) -> str:
    """A fraction as a percentage: one decimal, three below 0.1 % (so a small gap never reads 0.0 %)."""
    return f"{x:.1%}" if x >= 0.001 else f"{x:.3%}"


def difference(ea: Entry, eb: Entry) -> str:
    """Why ``ea`` is predicted faster than ``eb``: the model terms that favour it, largest first.

    Every figure is a saving of ``ea`` over ``eb`` (a positive number of cycles or
    microseconds); a term where ``ea`` is worse is named as the cost it pays.
    """
    a, b = ea.est, eb.est
    if a.dram_us >= a.compute_us and b.dram_us >= b.compute_us:
        return "both are DRAM-bound; ties go to fewer k-tiles, then less shared memory"
    gains, costs = [], []
    dl, df = b.loop_cycles - a.loop_cycles, b.fixed_cycles - a.fixed_cycles
    if dl:
        if a.waves != b.waves:
            cause = f"{a.waves} wave{'s' if a.waves != 1 else ''} instead of {b.waves}"
        else:
            ra, rb = _distinct(loop_rate(ea), loop_rate(eb))
            cause = f"{ra} instead of {rb} FLOP/cycle per SM in the k-loop; "
            if a.bound == b.bound and a.active_ctas_per_sm == b.active_ctas_per_sm:
                cause += f"both {a.bound}-bound at {a.active_ctas_per_sm} CTA/SM"
            else:
                cause += (f"{a.bound}-bound at {a.active_ctas_per_sm} CTA/SM against {b.bound}-bound at "
                          f"{b.active_ctas_per_sm}")
            if abs(a.padding - b.padding) > 0.01:
                cause += f"; {a.padding:.0%} against {b.padding:.0%} of the tile area is padding"
        what = "main-loop cycles"
        (gains if dl > 0 else costs).append((abs(dl), what, f" ({cause})"))
    if df:
        (gains if df > 0 else costs).append((abs(df), "cycles of pipeline fill, drain and epilogue", ""))
    if not gains:
        return "equal prediction"
    gains.sort(key=lambda f: -f[0])
    text = "saves " + "; ".join(f"{n:,} {what}{cause}" for n, what, cause in gains)
    if costs:
        costs.sort(key=lambda f: -f[0])
        text += ", and spends " + "; ".join(f"{n:,} more {what}{cause}" for n, what, cause in costs)
    return text


def _distinct(x: float, y: float) -> tuple[str, str]:
    """``x`` and ``y`` printed with the fewest decimals (0 to 2) that tell them apart."""
    for d in range(3):
        sx, sy = f"{x:.{d}f}", f"{y:.{d}f}"
        if sx != sy:
            return sx, sy
    return sx, sy

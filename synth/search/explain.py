"""One-sentence reasons for a ranking: why #1 wins, why the others rank where they do.

Input: the search :class:`~synth.search.space.Context` and ranked
:class:`~synth.search.rank.Entry` rows. Output: plain-text reasons built from
the model's terms (bound, waves, occupancy, main-loop rate, fill and drain),
stored in :attr:`Candidate.why`. Pure: nothing is timed here.
"""

from __future__ import annotations

from typing import Optional

from .rank import Entry, key
from .space import Context


def loop_rate(e: Entry) -> float:
    """Main-loop FLOP per cycle of one SM: the active CTAs each finishing a k-tile per round."""
    p, est = e.point, e.est
    return 2.0 * p.BM * p.BN * p.BK * est.active_ctas_per_sm / max(est.round_cycles, 1)


def describe(ctx: Context, e: Entry) -> str:
    """What bounds a configuration, in one clause."""
    from .model import extra_of

    est = e.est
    peak = ctx.arch.tensor_f16_f32_flop_per_clk_sm * extra_of(ctx.arch).mma_sync_efficiency
    return (f"{est.bound}-bound: {est.ctas} CTAs in {est.waves} wave{'s' if est.waves != 1 else ''} at "
            f"{est.ctas_per_sm}/SM ({est.occupancy_limit}-limited, last wave {est.wave_efficiency:.0%} full), "
            f"main loop at {loop_rate(e) / peak:.0%} of the tensor peak")


def why_winner(ctx: Context, e: Entry, ties: int, runner: Optional[Entry]) -> str:
    """Why ``e`` ranks first: what bounds it, its ties, and how it beats the best different tile ``runner``."""
    text = describe(ctx, e)
    if ties:
        text += (f"; {ties} other configuration{'s' if ties > 1 else ''} tie{'s' if ties == 1 else ''} "
                 "at this prediction (ties go to fewer k-tiles, then less shared memory, fewer stages)")
    if runner is not None and key(runner)[0] == key(e)[0]:
        text += f"; the best different tile ({runner.point.label}) is predicted equal and ranked after it"
    elif runner is not None:
        gain = runner.est.time_us / e.est.time_us - 1
        at_least = "" if runner.solved is not None else "at least "
        text += (f"; beats the best different tile ({runner.point.label}) by {at_least}{_pct(gain)}: "
                 f"{difference(e, runner)}")
    return text


def why_other(ctx: Context, e: Entry, winner: Entry) -> str:
    """Why ``e`` ranks after ``winner``."""
    loss = e.est.time_us / winner.est.time_us - 1
    if loss <= 1e-12:
        return describe(ctx, e) + "; ties with #1 (ranked after it by fewer k-tiles, less shared memory, fewer stages)"
    return describe(ctx, e) + f"; {_pct(loss)} slower than #1: {difference(winner, e)}"


def _pct(x: float) -> str:
    return f"{x:.1%}" if x >= 0.001 else f"{x:.3%}"


def difference(ea: Entry, eb: Entry) -> str:
    """Why ``ea`` is predicted faster than ``eb``: the terms of the model that differ the most."""
    a, b = ea.est, eb.est
    if a.dram_us >= a.compute_us and b.dram_us >= b.compute_us:
        return "both are DRAM-bound; ties go to fewer k-tiles, then less shared memory"
    facts = []
    dl, df = b.loop_cycles - a.loop_cycles, b.fixed_cycles - a.fixed_cycles
    if dl:
        if a.waves != b.waves:
            cause = f"{a.waves} wave{'s' if a.waves != 1 else ''} instead of {b.waves}"
        else:
            cause = (f"{loop_rate(ea):.0f} instead of {loop_rate(eb):.0f} FLOP/cycle per SM in the k-loop, "
                     f"{a.active_ctas_per_sm} vs {b.active_ctas_per_sm} CTA/SM, the other {b.bound}-bound")
            if abs(a.padding - b.padding) > 0.01:
                cause += f", {a.padding:.0%} vs {b.padding:.0%} of the tile area padding"
        facts.append((abs(dl), f"{'-' if dl > 0 else '+'}{abs(dl):,} main-loop cycles ({cause})"))
    if df:
        facts.append((abs(df), f"{'-' if df > 0 else '+'}{abs(df):,} cycles of pipeline fill, drain and epilogue"))
    if not facts:
        return "equal prediction"
    facts.sort(key=lambda f: -f[0])
    return "; ".join(f for _, f in facts)

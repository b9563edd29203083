"""Stream-K in ``synth search gemm`` (docs/search.md): the variants, their model, the ranking, the reasons, the JSON and
table, and the folder the search writes (docs/search.md section 3, "Stream-K")."""

from __future__ import annotations

import random
import re

import pytest

from synth.emit.streamk import contributors, cta_range
from synth.search import (Point, enumerate_space, is_legal, make_context, prune, search_gemm, search_result_to_json,
                          stream_k_points)
from synth.search.model import (PARTIAL_BYTES, estimate, partial_cycles, stream_k_grid, stream_k_lower_bound,
                                stream_k_plan, stream_k_sm, stream_k_sms)
from synth.search.rank import new_entry
from synth.search.timing import timed


@pytest.fixture(scope="module")
def square_2048():
    """2048^3 on sm_80: 256 tiles of 128x128 at 2/SM are 1.19 waves on 108 SMs; stream-K wins there."""
    return search_gemm(2048, 2048, 2048, top=3, references=False)


def _est(shape, p, arch="sm_80", **kw):
    ctx = make_context(*shape, "f16", arch)
    e = new_entry(ctx, p)
    t, _ = timed(ctx, p, 10.0, 1)
    return ctx, e, estimate(ctx.arch, *shape, p.BM, p.BN, p.BK, e.res, ii=t.ii, tail=t.tail, **kw)


@pytest.mark.parametrize("tiles,T,G", [(256, 64, 216), (4, 256, 216), (432, 32, 216), (7, 5, 30), (3, 100, 132)])
def test_the_plan_follows_the_kernels_ranges(tiles, T, G):
    """Per CTA: its k-tiles are its range's, its segments the tiles the range touches; every tile is stored once
    (C) and a tile of n contributors costs n - 1 partial stores, n - 1 partial loads and one fold."""
    plan = stream_k_plan(tiles, T, G)
    I = tiles * T
    assert [r[0] for r in plan] == [cta_range(c, I, G)[1] - cta_range(c, I, G)[0] for c in range(G)]
    shared = [contributors(t, T, I, G)[1] for t in range(tiles)]
    assert sum(r[1] for r in plan) == sum(shared)  # each segment is one (CTA, tile) pair
    assert sum(r[2] for r in plan) == tiles
    assert sum(r[4] for r in plan) == sum(1 for n in shared if n > 1)
    assert sum(r[3] for r in plan) == sum(r[5] for r in plan) == sum(n - 1 for n in shared)
    assert all(r[3] <= 1 and r[4] <= 1 for r in plan)  # only a CTA's first and last segments are partial
    sms = stream_k_sms(tiles, T, G, 108)  # CTA c on SM c % 108, SMs with equal work merged
    assert max(s[0] for s in sms) == -(-G // 108) and min(s[0] for s in sms) == max(1, G // 108)
    assert {row for s in sms for row in s[1]} == set(plan)


def test_stream_k_estimate_terms_and_where_it_pays():
    """One wave of G = 108 x 2 CTAs at 2048^3; no partial tile (and no gain) when every CTA gets whole tiles; more
    partials cost more reduction; stream-K is never faster than the unsplit kernel unless the wave quantization
    it removes outweighs its reduction."""
    p = Point(128, 128, 32, 4, 3)
    ctx, e, one = _est((2048, 2048, 2048), p)
    _, _, sk = _est((2048, 2048, 2048), p, stream_k=True)
    assert (sk.stream_k, sk.split_k, sk.ctas, sk.waves, sk.tiles, sk.k_tiles) == (True, 1, 216, 1, 256, 64)
    assert sk.split_k_tiles == 76 and sk.busiest_ctas == 2 and sk.segments >= 2
    assert sk.workspace_bytes == 2 * 216 * 128 * 128 * PARTIAL_BYTES and 0 < sk.partial_tiles <= 256
    assert sk.reduction_cycles > 0 and sk.time_us < one.time_us  # 1.19 waves: quantization outweighs reduction
    assert one.loop_cycles > sk.loop_cycles and sk.fixed_cycles > one.fixed_cycles
    assert stream_k_grid(ctx.arch, 2048, 2048, 2048, 128, 128, 32, 2) == 216
    # 216 tiles (12 x 18): one full wave, every CTA one whole tile: no partial, no gain
    _, _, one_f = _est((1536, 2304, 2048), p)
    _, _, sk_f = _est((1536, 2304, 2048), p, stream_k=True)
    assert sk_f.partial_tiles == 0 and sk_f.reduction_cycles == 0 and one_f.waves == 1
    assert sk_f.time_us >= one_f.time_us - 1e-9
    # 4 tiles over 216 CTAs: ~54 contributors per tile, each fold loads ~53 partials
    _, _, sk_few = _est((256, 256, 16384), p, stream_k=True)
    assert sk_few.reduction_cycles > sk.reduction_cycles > sk_f.reduction_cycles
    # one SM's cycles grow with its partials (stored or loaded), at the L2 share
    rows = ((10, 2, 1, 1, 0, 0, 0),)
    base = stream_k_sm(ctx.arch, 128, 128, (1, rows, 1, 1, 0), lambda k: 1000.0, 500.0, 0.0, 0.0)
    more = stream_k_sm(ctx.arch, 128, 128, (1, rows, 1, 1, 3), lambda k: 1000.0, 500.0, 0.0, 0.0)
    assert more["reduction"] - base["reduction"] == pytest.approx(partial_cycles(ctx.arch, 128, 128, 3))
    with pytest.raises(ValueError):
        estimate(ctx.arch, 2048, 2048, 2048, 128, 128, 32, e.res, split_k=2, stream_k=True)


def test_the_lazy_bound_of_stream_k_never_exceeds_its_estimate():
    """The search estimates a stream-K variant only when its bound could rank it: it must be a lower bound
    (sm_90 included: its DRAM latency exceeds a partial's hand-off)."""
    rng = random.Random(7)
    for shape, arch in (((2048, 2048, 2048), "sm_80"), ((256, 256, 16384), "sm_80"), ((4096, 4096, 4096), "sm_80"),
                        ((64, 64, 16384), "sm_90"), ((1000, 777, 520), "sm_86")):
        ctx = make_context(*shape, "f16", arch)
        legal, _, _ = prune(ctx, enumerate_space())
        for p in rng.sample(legal, 12):
            e = new_entry(ctx, p)
            t, _ = timed(ctx, p, 10.0, 1)
            for ii, tail in ((None, None), (t.ii, t.tail)):
                lb = stream_k_lower_bound(ctx.arch, *shape, p.BM, p.BN, p.BK, e.res, ii=ii)
                est = estimate(ctx.arch, *shape, p.BM, p.BN, p.BK, e.res, ii=ii, tail=tail, stream_k=True)
                assert lb <= est.time_us + 1e-9, (shape, arch, p.label, lb, est.time_us)


def test_stream_k_variants_are_legal_exactly_where_their_base_is():
    shape = (1000, 777, 520)
    ctx = make_context(*shape, "f16", "sm_86")
    legal, _, _ = prune(ctx, enumerate_space())
    sk = stream_k_points(legal)
    assert len(sk) == len(legal) and all(q.stream_k and q.split_k == 1 and q.base in set(legal) for q in sk)
    q = sk[0]
    assert is_legal(q, *shape, arch="sm_86") is None and q.config(*shape, "f16", "sm_86").stream_k
    assert q.label.endswith(" stream-K") and q.config(*shape, "f16", "sm_86").problem_name().endswith("-streamk-sm_86")
    assert is_legal(Point(q.BM, q.BN, q.BK, q.warps, q.stages, 2, True), *shape, arch="sm_86").startswith("stream_k")


def test_a_partial_last_wave_ranks_stream_k_first_and_says_why(square_2048):
    res = square_2048
    w = res.winner
    assert w.stream_k and w.config.stream_k and w.split_k == 1 and res.stream_k_points == res.feasible
    assert w.waves == 1 and w.ctas == 108 * w.ctas_per_sm and w.partial_tiles > 0 and w.reduction_cycles > 0
    m = re.search(r"stream-K because (\d+) tiles on 108 SMs at (\d+)/SM put (\d+) CTAs? of (\d+) k-tiles \((\d+) in "
                  r"all\) on the busiest SM; stream-K's (\d+) CTAs, one wave, share the (\d+) k-tiles: (\d+) of at "
                  r"most (\d+) \((\d+) in all\) there, in up to (\d+) segments each, (\d+) tiles summed from "
                  r"partials, for ([\d,]+) cycles of reduction", w.why)
    assert m, w.why
    tiles, r, b1, t1, all1, G, I, bs, ts, alls, segs, parts, red = m.groups()
    assert int(G) == w.ctas and int(I) == int(tiles) * w.k_tiles and int(ts) == w.split_k_tiles
    assert int(all1) == int(b1) * int(t1) > int(alls) == int(bs) * int(ts)
    assert int(parts) == w.partial_tiles and int(red.replace(",", "")) == w.reduction_cycles
    assert "stream-K cuts the prediction from" in w.why and "stream-K CTAs" in w.why
    doc = search_result_to_json(res)
    c = doc["candidates"][0]
    assert c["stream_k"] is True and c["split_k"] == 1 and c["name"].endswith("-streamk-sm_80")
    assert c["model"]["grid_ctas"] == w.ctas and c["model"]["partial_tiles"] == w.partial_tiles
    assert c["model"]["workspace_bytes"] == 2 * w.ctas * w.BM * w.BN * PARTIAL_BYTES
    assert doc["stream_k_points"] == res.stream_k_points
    assert all(d["stream_k"] is False for d in search_result_to_json(search_gemm(
        8192, 8192, 8192, top=2, references=False))["candidates"])  # 19 waves: nothing to balance


def test_the_table_marks_stream_k(square_2048):
    from rich.console import Console

    from synth.search import print_result

    con = Console(record=True, width=200)
    print_result(con, square_2048)
    out = con.export_text()
    assert "stream-K variants" in out and "stream-K because" in out
    row = next(line for line in out.splitlines() if line.lstrip("│ ").startswith("1 "))
    assert "stream-K" in row, out


def test_a_stream_k_winner_writes_a_folder_that_loads_and_verifies(square_2048, tmp_path, capsys):
    from synth.cli import main
    from synth.load import load_problem
    from synth.flow.candidates import write_candidates

    (folder,) = write_candidates(square_2048, str(tmp_path / "out"), k=1)
    assert re.search(r"/01-gemm-2048x2048x2048-f16-\d+x\d+x\d+-w\d-s\d+-streamk-sm_80$", folder), folder
    text = open(f"{folder}/problem.yaml").read()
    assert re.search(r"^stream_k: true$", text, re.M) and "split_k" not in text
    p = load_problem(f"{folder}/problem.yaml")
    assert p.gemm.stream_k and p.gemm.split_k == 1
    assert main(["verify", folder]) == 0
    capsys.readouterr()


def test_ranks_count_predictions_not_bounds(square_2048):
    """A lazy variant's bound is not a prediction: the listed candidates rank 1, 2, 3 in order (the stream-K
    bounds, looser than split-K's, once pushed the winner of 2048^3 to rank 50 under groups never estimated)."""
    from synth.search.rank import Bound, Entry, ranker

    assert [c.rank for c in square_2048.candidates] == list(range(1, len(square_2048.candidates) + 1))
    ctx = make_context(2048, 2048, 2048, "f16", "sm_80")
    a = new_entry(ctx, Point(128, 128, 32, 4, 3))
    lazy = Entry(Point(64, 64, 32, 4, 3, 1, True), a.res, Bound(a.est.time_us / 2, 64))
    assert ranker([a, lazy])(a) == 1

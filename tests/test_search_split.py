"""Split-K in ``synth search gemm`` (docs/search.md): the split dimension of the space, its model, the ranking,
the reasons, the JSON and table, and the folders the search writes."""

from __future__ import annotations

import json
import os
import random
import re

import pytest

from synth.gemm import validate
from synth.search import (SPLIT_SPACE, Point, enumerate_space, is_legal, make_context, prune, search_gemm,
                          search_result_to_json, split_issue, split_points, stream_k_points)
from synth.search.model import PARTIAL_BYTES, estimate, reduction, split_lower_bounds, workspace_spill
from synth.search.rank import new_entry
from synth.search.timing import time_now, timed


@pytest.mark.parametrize("shape,arch", [((256, 256, 16384), "sm_80"), ((1000, 777, 520), "sm_86"),
                                        ((4096, 64, 8192), "sm_89"), ((512, 512, 96), "sm_80")])
def test_splits_are_in_the_space_exactly_where_the_kernel_accepts_them(shape, arch):
    """A split variant of a legal point is proposed iff synth.gemm.validate accepts its config (split_k at most
    the k-tiles, every split's loop at least the stages), for every split of SPLIT_SPACE."""
    ctx = make_context(*shape, "f16", arch)
    legal, _, _ = prune(ctx, enumerate_space())
    rng = random.Random(11)
    sample = rng.sample(legal, min(120, len(legal)))
    splits, excluded = split_points(ctx, sample)
    proposed = {q for qs in splits.values() for q in qs}
    assert len(proposed) + excluded == len(sample) * (len(SPLIT_SPACE) - 1)
    for p in sample:
        for s in SPLIT_SPACE[1:]:
            q = Point(p.BM, p.BN, p.BK, p.warps, p.stages, s)
            ok = validate(q.config(*shape, "f16", arch)) == []
            assert (q in proposed) == ok == (split_issue(ctx, q) is None), (q.label, ok)
            assert (is_legal(q, *shape, arch=arch) is None) == ok
    T = -(-shape[2] // 16)
    assert all(q.split_k <= T and T // q.split_k >= q.stages for q in proposed if q.BK == 16)


def test_a_split_runs_the_same_schedule_over_fewer_k_tiles():
    """The search times a split's loop once, at the whole K: (ii, tail) do not depend on the trip count once it
    reaches the stages, so a split point's timing is its base point's."""
    ctx = make_context(4096, 4096, 4096, "f16", "sm_80")
    for p in (Point(128, 128, 32, 4, 3), Point(64, 64, 64, 4, 2), Point(32, 32, 64, 1, 5)):
        whole = time_now(ctx, p, 64, 10.0, 1)
        for T in (p.stages, p.stages + 1, 21):
            assert time_now(ctx, p, T, 10.0, 1) == whole, (p.label, T)
        assert timed(ctx, Point(p.BM, p.BN, p.BK, p.warps, p.stages, 4), 10.0, 1)[0] == timed(ctx, p, 10.0, 1)[0]


def test_split_one_is_the_unsplit_model_and_splits_cost_a_reduction():
    ctx = make_context(2048, 2048, 2048, "f16", "sm_80")
    p = Point(128, 128, 32, 4, 3)
    e = new_entry(ctx, p)
    args = (ctx.arch, 2048, 2048, 2048, 128, 128, 32, e.res)
    one = estimate(*args)
    assert estimate(*args, split_k=1) == one
    assert one.split_k == 1 and one.reduction_cycles == 0 and one.workspace_bytes == 0 and one.ctas == one.tiles
    two, four = estimate(*args, split_k=2), estimate(*args, split_k=4)
    assert two.ctas == 2 * one.ctas and two.split_k_tiles == 32 and four.split_k_tiles == 16
    assert two.workspace_bytes == 256 * 2 * 128 * 128 * PARTIAL_BYTES
    assert 0 < two.reduction_cycles < four.reduction_cycles
    assert two.busiest_ctas == 5 and one.busiest_ctas == 3  # 512 and 256 CTAs on 108 SMs
    # the reduction's terms: a CTA stores its partial unless it arrives last, and then it loads the S - 1
    # others (docs/cuda_kernel.md, "Split-K"); the busiest SM is the one holding the most last CTAs
    part_cycles = 128 * 128 * PARTIAL_BYTES / (ctx.arch.l2_bytes_per_clk / ctx.arch.sm_count)
    r2 = reduction(ctx.arch, 128, 128, 2, 1, 108)
    r4 = reduction(ctx.arch, 128, 128, 4, 1, 108)
    assert r2["lasts"] == r4["lasts"] == 1 and r2["write"] == r4["write"] == 0  # 108 SMs: one holds a last CTA
    assert r4["read"] - r2["read"] == pytest.approx(2 * part_cycles) and r2["handoff"] > 2 * ctx.arch.lat_l2
    # 4 CTAs per SM of 4 splits: some SM is expected to hold 3 last CTAs (108 P(Bin(4, 1/4) >= 3) = 5.5)
    mixed = reduction(ctx.arch, 128, 128, 4, 4, 108)
    assert mixed["lasts"] == 3 and mixed["write"] == pytest.approx(part_cycles)
    assert mixed["read"] == pytest.approx(2 * ctx.arch.lat_l2 + 3 * 3 * part_cycles)
    assert reduction(ctx.arch, 128, 128, 1, 2, 108) == {"write": 0.0, "handoff": 0.0, "read": 0.0, "lasts": 2.0}
    # a workspace larger than the L2 left to it spills its writes to DRAM, and its bytes count there
    w, r, extra = workspace_spill(ctx.arch, 256, 8, 128, 128, 216)
    assert 0 < w < 1 and extra > 0
    assert workspace_spill(ctx.arch, 16, 2, 64, 64, 432) == (0.0, 0.0, 0)


def test_the_lazy_bound_of_a_split_never_exceeds_its_estimate():
    """The search estimates a split only when its bound could rank it: the bound must be a lower bound."""
    rng = random.Random(5)
    for shape in ((4096, 4096, 4096), (256, 256, 16384), (8192, 64, 8192), (1000, 1000, 1000)):
        ctx = make_context(*shape, "f16", "sm_80")
        legal, _, _ = prune(ctx, enumerate_space())
        for p in rng.sample(legal, 25):
            e = new_entry(ctx, p)
            t, _ = timed(ctx, p, 10.0, 1)
            splits = [1] + [q.split_k for q in split_points(ctx, [p])[0].get(p, [])]
            for ii, tail in ((None, None), (t.ii, t.tail)):
                bounds = split_lower_bounds(ctx.arch, *shape, p.BM, p.BN, p.BK, e.res, splits, ii=ii)
                for s, lb in zip(splits, bounds):
                    est = estimate(ctx.arch, *shape, p.BM, p.BN, p.BK, e.res, ii=ii, tail=tail, split_k=s)
                    assert lb <= est.time_us + 1e-9, (shape, p.label, s, lb, est.time_us)


@pytest.mark.parametrize("shape", [(256, 256, 16384), (1024, 1024, 16384)])
def test_few_tiles_and_a_long_k_rank_a_split_first_and_say_why(shape):
    res = search_gemm(*shape, top=3, references=False)
    w = res.winner
    assert w.split_k > 1 and w.config.split_k == w.split_k and res.split_points > 0
    assert w.split_k_tiles == -(-w.k_tiles // w.split_k) and w.reduction_cycles > 0 and w.workspace_bytes > 0
    # the reason names the busiest SM's CTAs and k-tiles without and with the split, and the reduction
    m = re.search(r"split (\d+) ways in K because (\d+) tiles on 108 SMs at \d+/SM put (\d+) CTAs? of (\d+) "
                  r"k-tiles \((\d+) in all\) on the busiest SM; split, (\d+) CTAs put (\d+) of at most (\d+) "
                  r"\((\d+) in all\) there, for ([\d,]+) cycles of reduction", w.why)
    assert m, w.why
    s, tiles, b1, t1, all1, ctas, bs, ts, alls, red = m.groups()
    assert int(s) == w.split_k and int(ctas) == int(tiles) * w.split_k == w.ctas and int(ts) == w.split_k_tiles
    assert int(all1) == int(b1) * int(t1) > int(alls) == int(bs) * int(ts)
    assert int(red.replace(",", "")) == w.reduction_cycles
    assert "the split cuts the prediction from" in w.why
    doc = search_result_to_json(res)
    c = doc["candidates"][0]
    assert c["split_k"] == w.split_k and c["split_k_tiles"] == w.split_k_tiles and f"-split{w.split_k}-" in c["name"]
    assert c["model"]["reduction_cycles"] == w.reduction_cycles and c["model"]["workspace_bytes"] == w.workspace_bytes
    assert doc["split_points"] == res.split_points


def test_many_tiles_do_not_split():
    """8192^3: 2048 tiles of 128x256 fill 19 waves; a split saves little wave quantization and pays a
    workspace far beyond the L2 plus a reduction per CTA."""
    res = search_gemm(8192, 8192, 8192, top=5, references=False)
    assert res.split_points > 0
    assert all(c.split_k == 1 and c.workspace_bytes == 0 for c in res.candidates), [c.label for c in res.candidates]
    assert "split" not in res.winner.why


def test_sm90_splits_both_main_loops_where_tiles_are_few():
    """The Hopper kernel splits K as the sm_80 one does (docs/hopper_kernel.md, "Split-K"): its search ranks
    splits too (keeping each tile's pipeline choice), and neither loop splits at 8192^3."""
    res = search_gemm(256, 256, 16384, arch="sm_90", top=2, references=False)
    w = res.winner
    assert res.mainloop == "tma_wgmma" and res.split_points > 0 and w.split_k > 1 and w.config.split_k == w.split_k
    assert f" split{w.split_k}" in w.label and f"-split{w.split_k}-sm_90" in w.name
    assert "ways in K because 16 tiles on 132 SMs" in w.why and "the split cuts the prediction from" in w.why
    assert w.reduction_cycles > 0 and w.workspace_bytes == 16 * w.split_k * w.BM * w.BN * PARTIAL_BYTES
    assert search_result_to_json(res)["candidates"][0]["split_k"] == w.split_k
    cp = search_gemm(256, 256, 16384, arch="sm_90", top=1, references=False, mainloop="cp_async")
    assert cp.split_points > 0 and cp.winner.split_k > 1
    big = search_gemm(8192, 8192, 8192, arch="sm_90", top=3, references=False)
    assert all(c.split_k == 1 for c in big.candidates)


@pytest.mark.slow  # the quick tier's CLI --top folder: tests/test_search.py::test_cli_top_writes_folders
def test_cli_top_one_with_a_split_writes_a_folder_that_loads_and_verifies(tmp_path, capsys):
    from synth.cli import main
    from synth.load import load_problem

    out = tmp_path / "s"
    rc = main(["search", "gemm", "--M", "256", "--N", "256", "--K", "16384", "--top", "1", "--out", str(out),
               "--no-sass"])
    text = capsys.readouterr().out
    assert rc == 0 and "split K" in text and "ways in K because" in text
    (folder,) = list(out.iterdir())
    assert re.match(r"01-gemm-256x256x16384-f16-\d+x\d+x\d+-w\d-s\d+-split\d+-sm_80$", folder.name), folder.name
    yaml_text = (folder / "problem.yaml").read_text()
    split = int(re.search(r"^split_k: (\d+)$", yaml_text, re.M).group(1))
    assert split > 1 and f"-split{split}-" in folder.name
    p = load_problem(str(folder / "problem.yaml"))
    assert p.gemm.split_k == split
    assert main(["verify", str(folder)]) == 0
    # the folder's kernel serves its own K (256 k-tiles need not divide by the split): a loop proved for
    # every trip count, as synth solve on the folder's problem.yaml gives
    assert "#define SYNTH_KTILES 0" in (folder / "kernel.cu").read_text()
    capsys.readouterr()
    rc = main(["search", "gemm", "--M", "256", "--N", "256", "--K", "16384", "--json", "--no-sass"])
    doc = json.loads(capsys.readouterr().out)["result"]
    assert rc == 0 and doc["candidates"][0]["split_k"] == split and os.path.isdir(folder)


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (8192, 64, 8192)])
def test_shallow_pipelines_rank_below_deep_ones_with_splits_too(shape):
    """test_search_model's stage sanity over the split and stream-K variants as well: for K >= 1024, every 1- and
    2-stage configuration (any split, or stream-K) of a tile of at least 64x64, BK <= 64, 4 or 8 warps, is
    predicted slower than the best 3+-stage configuration (any split, or stream-K) of the same tile and warps."""
    ctx = make_context(*shape, "f16", "sm_80")
    legal, _, _ = prune(ctx, enumerate_space())
    keep = [p for p in legal if min(p.BM, p.BN) >= 64 and p.BK <= 64 and p.warps >= 4]
    splits, _ = split_points(ctx, keep)
    groups: dict[tuple, list[tuple[int, float]]] = {}
    for p in keep:
        e = new_entry(ctx, p)
        t, _ = timed(ctx, p, 10.0, 1)
        for q in [p] + splits.get(p, []) + stream_k_points([p]):
            est = estimate(ctx.arch, *shape, q.BM, q.BN, q.BK, e.res, ii=t.ii, tail=t.tail, split_k=q.split_k,
                           stream_k=q.stream_k)
            groups.setdefault(p.group, []).append((q.stages, est.time_us))
    checked = 0
    for g, rows in groups.items():
        deep = [t for s, t in rows if s >= 3]
        if not deep:
            continue
        for s, t in rows:
            if s <= 2:
                assert t > min(deep), (shape, g, s, t, min(deep))
                checked += 1
    assert checked > 40


def test_hopper_splits_are_proposed_exactly_where_the_problem_loader_accepts_them(tmp_path):
    """A Hopper split is legal iff split_k <= ceil(K / 64) (every split gets a k-tile): what loading the
    candidate's problem.yaml accepts."""
    from synth.errors import SynthError
    from synth.hopper.problem import hopper_gemm_yaml
    from synth.load import load_problem
    from synth.search import hopper_context
    from synth.search.hopper import HopperPoint, hopper_split_issue

    for K in (64, 200, 512, 1000):
        ctx = hopper_context(256, 256, K, "f16", "sm_90")
        for s in SPLIT_SPACE[1:]:
            p = HopperPoint(128, 128, 4, 1, s)
            f = tmp_path / f"k{K}-s{s}.yaml"
            f.write_text(hopper_gemm_yaml(p.problem(256, 256, K, "f16")))
            try:
                load_problem(str(f))
                ok = True
            except SynthError:
                ok = False
            assert ok == (hopper_split_issue(ctx, p) is None) == (s <= -(-K // 64)), (K, s, ok)

"""The Hopper kernel's design chosen by synth (docs/hopper_design.md): ``persistent``, ``pingpong`` and
``epilogue`` written ``auto`` are chosen among the legal designs by CP-SAT on the search model's predicted
time; pins and legality are respected; the output folder's problem.yaml pins the choice, so the folder loads,
certifies and solves again to the same kernel."""

import json
import subprocess
import sys

import pytest

from synth.errors import SynthError
from synth.flow.design import choose_design
from synth.hopper.design import DESIGN_KEYS, candidate_designs, legal
from synth.flow.hopper import choose_pipeline
from synth.hopper.problem import HopperGemm

BASE = ("name: g\nkind: gemm\nshape: {M: 4096, N: 4096, K: 4096}\ntile: {BM: 64, BN: 128, BK: 64}\n"
        "arch: sm_90\nmainloop: tma_wgmma\n")


def D(persistent=False, pingpong=False, epilogue="register", cluster="1x1"):
    """A design's keys (:data:`DESIGN_KEYS`), as :func:`keys` reads them from a KernelDesign."""
    return (persistent, pingpong, epilogue, cluster)


def keys(d) -> tuple:
    return tuple(getattr(d, k) for k in DESIGN_KEYS)


def _g(**kw):
    args = dict(name="g", M=4096, N=4096, K=4096, BM=64, BN=128)
    args.update(kw)
    return HopperGemm.of(**args)


def test_candidates_follow_pins_and_legality():
    every = candidate_designs(_g(auto=("persistent", "pingpong", "epilogue")))
    assert len(every) == 6 and all(legal(_g(), d) is None for d in every)  # ping-pong without persistence is not one
    assert D(False, True) not in [keys(d) for d in every]
    # a 128x256 tile per warp group would spill: no ping-pong there; 128x128 has it
    assert all(not d.pingpong for d in candidate_designs(_g(BM=128, BN=256, auto=("persistent", "pingpong"))))
    assert any(d.pingpong for d in candidate_designs(_g(BM=128, BN=128, auto=("persistent", "pingpong"))))
    assert all(d.epilogue == "tma_store" for d in candidate_designs(_g(out_dtype="f16", auto=("epilogue",))))
    assert all(d.epilogue == "register" for d in candidate_designs(_g(N=4098, auto=("epilogue",))))
    assert [keys(d) for d in candidate_designs(_g(split_k=2, auto=("persistent", "epilogue")))] == [D()]
    # a pinned key stays as written
    assert {d.epilogue for d in candidate_designs(_g(epilogue="tma_store", auto=("persistent",)))} == {"tma_store"}


def test_the_choice_is_the_least_predicted_time():
    from synth.search.hopper import HopperPoint, estimate_hopper
    from synth.search.space import make_context

    g = _g(M=8192, N=8192, K=8192, BN=256, auto=("persistent", "pingpong", "epilogue"))
    c = choose_design(g, choose_pipeline)
    assert c.status == "OPTIMAL" and len(c.predicted_us) == 6
    assert c.design.variant == min(c.predicted_us, key=lambda kv: kv[1])[0]
    # the figures are the search model's own
    ctx = make_context(g.M, g.N, g.K, g.dtype, g.arch)
    ch = choose_pipeline(g)
    one = estimate_hopper(ctx, HopperPoint(g.BM, g.BN, ch.stages, ch.k_pipe_mmas)).time_us
    assert dict(c.predicted_us)["one CTA per tile"] == pytest.approx(one, rel=1e-6)


def test_the_folder_problem_yaml_pins_the_choice():
    """The folder's problem.yaml is written by the YAML writer (synth.hopper.problem.hopper_problem_yaml), not
    edited as text: each auto key is replaced by the choice however it was spelled (quoted, or in a flow mapping)."""
    from synth.hopper.problem import hopper_problem_yaml
    from synth.load import load_problem_text

    for text in (BASE + "persistent: auto\npingpong: 'auto'  # please\n",
                 "{" + BASE.strip().replace("\n", ", ") + ", persistent: auto, pingpong: auto}\n"):
        g = load_problem_text(text)
        assert set(g.auto) == {"persistent", "pingpong"}
        out = hopper_problem_yaml(g.with_(persistent=True, pingpong=True))
        assert "persistent: true  # chosen by synth solve" in out and "pingpong: true  # chosen" in out, out
        back = load_problem_text(out)
        assert (back.auto, back.persistent, back.pingpong) == ((), True, True)


def test_auto_in_the_problem_and_its_refusals(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(BASE + "pingpong: maybe\n")
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "auto" in r.stderr and "Traceback" not in r.stderr
    f.write_text(BASE.replace("mainloop: tma_wgmma", "mainloop: cp_async").replace("sm_90", "sm_80") + "pingpong: auto\n")
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Hopper main loop only" in r.stderr


def test_a_solved_auto_folder_pins_its_design_and_round_trips(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(BASE.replace("BN: 128", "BN: 64").replace("4096", "1024") + "stages: 2\nk_pipe_mmas: 1\n"
                 "persistent: auto\npingpong: auto\nepilogue: auto\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "-o", str(out), "--no-verify"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rec = json.loads((out / "schedule.json").read_text())["design"]
    assert rec["auto"] == ["persistent", "pingpong", "epilogue"] and len(rec["predicted_us"]) == 6
    text = (out / "problem.yaml").read_text()
    assert "auto" not in text.replace("the problem said auto", "")
    # the folder's problem.yaml solves again to the same kernel
    again = tmp_path / "again"
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(out / "problem.yaml"), "-o", str(again),
                        "--no-verify"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (again / "kernel.cu").read_text() == (out / "kernel.cu").read_text()
    import synth.kernel

    k = synth.kernel.load(str(out))
    assert (k.config.persistent, k.config.pingpong, k.config.epilogue) == (
        rec["persistent"] or rec["pingpong"], rec["pingpong"], rec["epilogue"])


def test_no_candidate_is_an_error():
    # a TMA-store epilogue pinned with split-K: no design is legal, whatever persistent: auto takes
    with pytest.raises(SynthError, match="no design"):
        choose_design(_g(split_k=2, epilogue="tma_store", auto=("persistent",)), choose_pipeline)


def test_a_cluster_pairs_with_one_cta_per_tile_or_a_persistent_grid_never_ping_pong():
    g = _g(BM=128, BN=128, auto=("persistent", "pingpong", "cluster"))
    assert legal(g, g.design.with_(persistent=True, cluster="2x1")) is None
    assert "ping-pong" in legal(g, g.design.with_(persistent=True, pingpong=True, cluster="1x2"))
    designs = candidate_designs(g)
    assert {D(persistent=True, cluster="2x1"), D(persistent=True, cluster="1x2")} <= {keys(d) for d in designs}
    assert all(not d.pingpong for d in designs if d.cluster != "1x1")
    assert g.design.with_(persistent=True, cluster="2x1").variant == "persistent 2x1 cluster"
    assert len({d.variant for d in designs}) == len(designs)  # every candidate's prediction is listed under its own name


@pytest.mark.parametrize("shape,tile,want", [
    ((8192, 8192, 8192), (128, 256), D(persistent=True, cluster="2x1")),  # fast.cu's configuration
    ((1024, 1024, 512), (64, 64), D(persistent=True)),  # 128 k-tile rounds: the cluster's fixed cycles lose
])
def test_auto_picks_a_persistent_cluster_where_the_model_says_so(shape, tile, want):
    from synth.search.hopper import HopperPoint, estimate_hopper
    from synth.search.space import make_context

    g = _g(M=shape[0], N=shape[1], K=shape[2], BM=tile[0], BN=tile[1], auto=("persistent", "cluster"))
    c = choose_design(g, choose_pipeline)
    assert keys(c.design) == want, c.predicted_us
    pred = dict(c.predicted_us)
    assert set(pred) == {"one CTA per tile", "persistent", "2x1 cluster", "1x2 cluster", "persistent 2x1 cluster",
                         "persistent 1x2 cluster"}
    assert pred[g.design.with_(**dict(zip(DESIGN_KEYS, want))).variant] == min(pred.values())
    # the persistent cluster's figure is the search model's own
    ctx = make_context(g.M, g.N, g.K, g.dtype, g.arch)
    ch = choose_pipeline(g.with_(persistent=True, cluster="2x1"))
    p = HopperPoint(g.BM, g.BN, ch.stages, ch.k_pipe_mmas, persistent=True, cluster="2x1")
    assert pred["persistent 2x1 cluster"] == pytest.approx(estimate_hopper(ctx, p).time_us, abs=1e-3)


def test_a_persistent_cluster_folder_pins_both_keys(tmp_path):
    """2048x2048x1024 in 128x128 tiles: 256 tiles, 128 groups of 2 over 66 clusters; the model puts the persistent 2x1
    cluster first, so the folder's problem.yaml says persistent: true and cluster: 2x1, and its kernel is the
    persistent cluster kernel."""
    f = tmp_path / "p.yaml"
    f.write_text(BASE.replace("4096, N: 4096, K: 4096", "2048, N: 2048, K: 1024").replace("BM: 64", "BM: 128") + "persistent: auto\ncluster: auto\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "synth", "solve", str(f), "-o", str(out), "--no-verify"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rec = json.loads((out / "schedule.json").read_text())["design"]
    assert (rec["persistent"], rec["cluster"]) == (True, "2x1"), rec
    text = (out / "problem.yaml").read_text()
    assert "persistent: true  # chosen by synth solve" in text and "cluster: 2x1  # chosen by synth solve" in text
    import synth.kernel

    k = synth.kernel.load(str(out))
    assert (k.config.persistent, k.config.cluster) == (True, "2x1")
    assert "__cluster_dims__" in (out / "kernel.cu").read_text()

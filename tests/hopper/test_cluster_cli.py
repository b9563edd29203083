"""Thread-block clusters from the command line (docs/hopper_cluster.md, "From a problem file"): ``cluster:`` in a
Hopper problem, ``synth solve`` writing the cluster program, its proof, its certificate and its kernel, ``synth
verify`` running the cluster classes on a folder and on a program.json alone, ``synth certify`` refusing a
certificate that leaves them out, and bad ``cluster:`` values refused with the line and the fix.

Each command runs as a subprocess (``python -m synth``), as a user runs it; one 2-stage solve is shared.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import PROBLEMS
from conftest import synth_cli as synth
from gemm_fixtures import CLUSTER_SOLVED, SOLVE_FLAGS
from synth.lower.hopper_design import design_program

CLUSTER_CLASSES = {"cluster_form", "init_visible", "safe_exit"}

PROBLEM = CLUSTER_SOLVED


@pytest.fixture(scope="module")
def solved(solve_once) -> pathlib.Path:
    """The 2x1 cluster folder, solved once for the run (test_cluster_hostile's too; copy before editing)."""
    return solve_once(CLUSTER_SOLVED, *SOLVE_FLAGS).out


def _edited(src: pathlib.Path, dst: pathlib.Path, edit) -> pathlib.Path:
    doc = json.loads((src / "program.json").read_text())
    edit(doc)
    dst.write_text(json.dumps(doc, indent=2))
    return dst


def test_solve_writes_the_cluster_program_its_proof_and_certificate(solved):
    files = {p.name for p in solved.iterdir()}
    assert {"program.json", "program.txt", "verify.txt", "certificate", "schedule.json", "problem.yaml"} <= files
    doc = json.loads((solved / "program.json").read_text())
    assert [r["role"] for r in doc["roles"]] == ["producer0", "producer1", "consumer0", "consumer1"]
    assert {"kind": "cluster_sync", "guard": None} in doc["setup"]
    assert "barrier.cluster.arrive.release; barrier.cluster.wait.acquire" in (solved / "program.txt").read_text()
    verify_txt = (solved / "verify.txt").read_text()
    for cls in CLUSTER_CLASSES:
        assert f"  {cls}: " in verify_txt and f"{cls}: 0 proven" not in verify_txt, cls
    man = json.loads((solved / "certificate" / "manifest.json").read_text())
    assert man["format"] == "synth-certificate-hopper/4"
    assert {c.split(":")[0] for c in man["cluster"]} == CLUSTER_CLASSES
    assert json.loads((solved / "schedule.json").read_text())["cluster"] == "2x1"
    assert "timeline.png" in files  # the Hopper timeline draws the four roles
    kernel = (solved / "kernel.cu").read_text()  # emitted by the sm_90a emitter from the proven cluster program
    assert "__cluster_dims__(SYNTH_CLUSTER_N, SYNTH_CLUSTER_M, 1)" in kernel and "synth_tma_load_2d_multicast(" in kernel


def test_verify_and_certify_run_the_cluster_classes(solved):
    for target in (solved, solved / "program.json"):
        r = synth("verify", str(target), "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        classes = json.loads(r.stdout)["result"]["obligations"]
        assert CLUSTER_CLASSES <= set(classes) and all(classes[c]["refuted"] == 0 for c in CLUSTER_CLASSES)
    r = synth("certify", str(solved))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cluster classes: 11 checks" in r.stdout


def test_a_dropped_cluster_barrier_or_init_fence_fails_verify(solved, tmp_path):
    # a folder whose program.json lost the cluster barrier after init: init_visible, naming the remote use
    folder = tmp_path / "f"
    shutil.copytree(solved, folder)
    _edited(solved, folder / "program.json",
            lambda d: d.update(setup=[s for s in d["setup"] if s["kind"] != "cluster_sync"]))
    r = synth("verify", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refuted [init_visible]" in r.stdout and "producer1 (CTA 1) multicasts load_B_h1_to0" in r.stdout
    assert "no cluster barrier after full0's init" in r.stdout
    # a program.json alone without the init fence
    alone = _edited(solved, tmp_path / "no_fence.json",
                    lambda d: d.update(setup=[s for s in d["setup"] if s["kind"] != "fence"]))
    r = synth("verify", str(alone))
    assert r.returncode == 1 and "refuted [init_visible]" in r.stdout, r.stdout + r.stderr
    assert "no fence.mbarrier_init.release.cluster" in r.stdout
    # without any cluster barrier it is still a cluster program (its copies multicast into the peer)
    bare = _edited(solved, tmp_path / "bare.json", lambda d: d.update(
        setup=[s for s in d["setup"] if s["kind"] != "cluster_sync"],
        teardown=[s for s in d["teardown"] if s["kind"] != "cluster_sync"]))
    r = synth("verify", str(bare))
    assert r.returncode == 1 and "refuted [safe_exit]" in r.stdout, r.stdout + r.stderr
    assert "consumer1 (CTA 1) arrives remotely on empty0 of CTA 0" in r.stdout


@pytest.mark.slow  # tampering: tests/hopper/test_cluster_hostile.py
def test_a_certificate_without_the_cluster_classes_is_refused(solved, tmp_path):
    from synth.hopper.ir import dumps, load_hopper
    from synth.verify.certificate_phases import write_hopper_certificate
    from synth.verify.phases import verify_hopper

    # the barrier classes alone, certified by a writer told it is not a cluster program
    folder = tmp_path / "omit"
    shutil.copytree(solved, folder)
    shutil.rmtree(folder / "certificate")
    rep = verify_hopper(load_hopper(str(folder / "program.json")), time_limit=10)
    assert rep.ok
    write_hopper_certificate(rep, str(folder / "certificate"), cluster=False)
    assert json.loads((folder / "certificate" / "manifest.json").read_text())["cluster"] == []
    r = synth("certify", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "omits the cluster classes" in r.stdout + r.stderr
    # a program without its cluster barriers, certified without the cluster classes: its multicasts make it a
    # cluster program all the same, and the checker names what fails
    from synth.api import certify

    bare = tmp_path / "bare"
    bare.mkdir()
    _edited(solved, bare / "program.json", lambda d: d.update(
        setup=[s for s in d["setup"] if s["kind"] != "cluster_sync"],
        teardown=[s for s in d["teardown"] if s["kind"] != "cluster_sync"]))
    prog = load_hopper(str(bare / "program.json"))
    (bare / "program.json").write_text(dumps(prog))  # the bytes the certificate is written for
    rep = verify_hopper(prog, time_limit=10)
    assert rep.ok  # the barrier classes hold: only the cluster classes see the bug
    write_hopper_certificate(rep, str(bare / "certificate"), cluster=False)
    res = certify(str(bare))
    text = res.render()
    assert not res.ok and "init_visible:full0 [init_visible]" in text and "safe_exit:cta0 [safe_exit]" in text
    # and the writer itself refuses to certify it as what it is
    with pytest.raises(ValueError, match="refutes a cluster class"):
        write_hopper_certificate(rep, str(tmp_path / "c2"))


@pytest.mark.parametrize("line, expect", [
    ("cluster: 3x1", "cluster '3x1': expected one of 1x1, 2x1, 1x2"),
    ("cluster: auto\nsplit_k: 2", "cluster: auto with split_k = 2: a cluster kernel has no split-K"),
    ("cluster: 2x1\npingpong: true", "cluster 2x1 with ping-pong consumers (pingpong: true at line 9)"),
])
def test_bad_cluster_values_exit_2_with_the_line(tmp_path, line, expect):
    text = PROBLEM.replace("cluster: 2x1", line)
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    r = synth("solve", str(p), "-o", str(tmp_path / "out"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"{p}:8:10: error: "), r.stderr
    assert expect in r.stderr and "\nfix: " in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_cluster_on_the_cp_async_loop_and_split_k_are_refused(tmp_path):
    from synth.errors import SynthError
    from synth.load import load_problem

    for text, at, expect in ((PROBLEM.replace("arch: sm_90\nmainloop: tma_wgmma\n", "arch: sm_80\n")
                              .replace("k_pipe_mmas: 1\n", ""), 7, "built for the Hopper main loop only"),
                             (PROBLEM + "split_k: 2\n", 8, "cluster 2x1 with split_k = 2")):
        p = tmp_path / "p.yaml"
        p.write_text(text)
        with pytest.raises(SynthError) as e:
            load_problem(str(p))
        assert e.value.loc.line == at and expect in e.value.msg, e.value


def test_an_emitter_that_cannot_build_the_cluster_kernel_writes_nothing(tmp_path, monkeypatch, capsys):
    import synth.emit.sm90.kernel as kernel
    from synth.cli import main

    def refuse(cfg, program=None, **kw):
        raise ValueError("no cluster kernel")

    monkeypatch.setattr(kernel, "emit_sm90_kernel", refuse)
    p = tmp_path / "cl2.yaml"
    p.write_text(PROBLEM)
    code = main(["solve", str(p), "-o", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"{p}:8:10: error: the sm_90a emitter cannot build the cluster 2x1 kernel: "
                                        "no cluster kernel"), err
    assert not (tmp_path / "out").exists()


def test_the_example_problem_is_a_2x1_cluster():
    from synth.load import load_problem

    g = load_problem(str(PROBLEMS / "gemm-hopper-cluster-128x128x64-f16.yaml"))
    assert g.cluster == "2x1" and (g.BM, g.BN) == (128, 128)


def test_cluster_auto_is_chosen_with_the_design_and_pinned_in_the_folder(tmp_path):
    from synth.api import certify, solve
    from synth.hopper.design import candidate_designs
    from synth.load import load_problem

    p = tmp_path / "auto.yaml"
    p.write_text(PROBLEM.replace("cluster: 2x1", "cluster: auto\npersistent: auto"))
    # persistent: auto and cluster: auto give three shapes, each one CTA per tile or a persistent grid
    assert {d.variant for d in candidate_designs(load_problem(str(p)))} == \
        {"one CTA per tile", "persistent", "2x1 cluster", "1x2 cluster", "persistent 2x1 cluster",
         "persistent 1x2 cluster"}
    out = tmp_path / "out"
    solve(str(p), out=str(out), time_limit=60)
    design = json.loads((out / "schedule.json").read_text())["design"]
    assert design["auto"] == ["persistent", "cluster"] and "2x1 cluster" in design["predicted_us"]
    assert f"cluster: {design['cluster']}  # chosen by synth solve" in (out / "problem.yaml").read_text()
    res = certify(str(out))
    assert res.ok, res.render()
    assert ("cluster classes" in res.render()) == (design["cluster"] != "1x1")


@pytest.mark.slow
def test_the_solved_folder_s_cluster_kernel_computes_c_on_the_emulator(solved):
    """synth.kernel.load of the solved folder (no GPU: the sm_90a emulator runs both CTAs of each cluster): three
    tile rows, so the grid is rounded up to two clusters and one CTA lies outside C; N and K off the tile grid."""
    import numpy as np

    import synth.kernel

    k = synth.kernel.load(str(solved), backend="emulator")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((384, 1000)).astype(np.float16)
    B = rng.standard_normal((200, 1000)).astype(np.float16)
    C = k(A, B)
    assert np.abs(C - A.astype(np.float32) @ B.astype(np.float32).T).max() < 1e-3


def test_a_folder_that_declares_a_cluster_is_checked_as_one(solved, tmp_path):
    """Rule 3: the folder's problem.yaml says cluster: 2x1, its program.json is a one-CTA program (names without
    CTA indices, no multicast): verify refutes cluster_form, and certify refuses a certificate without the
    cluster classes."""
    from synth.api import certify, verify
    from synth.hopper.kernel_design import KernelDesign
    from synth.hopper.ir import dumps
    from synth.verify.certificate_phases import write_hopper_certificate
    from synth.verify.phases import verify_hopper

    folder = tmp_path / "one"
    shutil.copytree(solved, folder)
    shutil.rmtree(folder / "certificate")
    one = design_program(KernelDesign.of(stages=2, name="cl2"))
    (folder / "program.json").write_text(dumps(one))
    rep = verify(str(folder))
    assert not rep.ok and rep.refuted_classes() == {"cluster_form"}
    assert "role producer names no CTA" in rep.render()
    write_hopper_certificate(verify_hopper(one, time_limit=10), str(folder / "certificate"), cluster=False)
    res = certify(str(folder))
    assert not res.ok and "omits the cluster classes" in res.render(), res.render()

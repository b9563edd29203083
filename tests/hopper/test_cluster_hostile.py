"""Hostile checks of thread-block clusters (docs/hopper_cluster.md): a solved cluster folder tampered with in
each way a cluster program can go wrong is refused by ``synth verify``, ``synth certify`` and
``synth.kernel.load``, each naming what is wrong; bad ``cluster:`` values and combinations are refused at their
line; random legal cluster configurations compute C on the sm_90a emulator under random thread and block
orders; and the multicast's half boxes land where NVIDIA's CuTe puts each CTA's part of the shared tile.

Default run: one 2-stage solve, a handful of tampers, two emulator builds (about 25 s of CPU); the persistent
cluster folder, the rest of the tampers, the CuTe comparison and more fuzzing are ``slow``
(``SYNTH_HYPOTHESIS=explore`` draws more examples).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import synth_cli as synth
from gemm_fixtures import CLUSTER_SOLVED, NEEDS_GXX, PERSISTENT_CLUSTER_PROBLEM, SOLVE_FLAGS
from synth.lower.hopper_design import design_program

EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"

PROBLEM = CLUSTER_SOLVED
CLUSTER_LINE = 8

# The folders are solved once for the whole run (solve_once) and shared with test_cluster_cli and
# test_persistent_cluster: every tamper below works on a copy (_copy).


@pytest.fixture(scope="module")
def solved(solve_once) -> pathlib.Path:
    return solve_once(PROBLEM, *SOLVE_FLAGS).out


@pytest.fixture(scope="module")
def solved_one(solve_once) -> pathlib.Path:
    """PROBLEM without its cluster: the one-CTA folder whose program and certificate are swapped in."""
    return solve_once(PROBLEM.replace("cluster: 2x1\n", ""), *SOLVE_FLAGS).out


@pytest.fixture(scope="module")
def solved_persistent(solve_once) -> pathlib.Path:
    """A persistent 2x1 cluster folder (test_persistent_cluster's problem)."""
    return solve_once(PERSISTENT_CLUSTER_PROBLEM, *SOLVE_FLAGS).out


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    shutil.copytree(src, dst)
    return dst


def _rehash(folder: pathlib.Path, name: str) -> None:
    """Record ``name``'s new sha256 in the folder's manifest, as a tamperer covering their tracks would: what
    load refuses then, it refuses by deriving the file again, not by its hash."""
    m = json.loads((folder / ".synth-output.json").read_text())
    m["files"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / ".synth-output.json").write_text(json.dumps(m))


# ---------------------------------------------------------------------------------------------------------------
# tampered program.json: each edit, and the class synth verify refutes (or the reader's refusal)

def _role(d, name):
    return next(r for r in d["roles"] if r["role"] == name)


def _part(d, role, part="body"):
    return next(p for p in _role(d, role)["parts"] if p["part"] == part)["stmts"]


def drop_teardown_sync(d):
    d["teardown"] = [s for s in d["teardown"] if s["kind"] != "cluster_sync"]


def drop_setup_sync(d):
    d["setup"] = [s for s in d["setup"] if s["kind"] != "cluster_sync"]


def drop_every_cluster_sync(d):
    drop_teardown_sync(d)
    drop_setup_sync(d)


def drop_init_fence(d):
    d["setup"] = [s for s in d["setup"] if s["kind"] != "fence"]


def drop_one_multicast(d):
    body = _part(d, "producer1")
    body[:] = [s for s in body if not (s["kind"] == "op" and s["op"] == "load_B_h1_to0")]


def empty_counts_local_only(d):
    next(b for b in d["barriers"] if b["name"] == "empty0")["count"] = 2


def roles_lose_their_cta(d):
    for r in d["roles"]:
        r["role"] = r["role"][:-1] + "AB"[int(r["role"][-1])]


def roles_lose_their_cta_no_sync(d):
    roles_lose_their_cta(d)
    drop_every_cluster_sync(d)


def consumer1_waits_on_full0(d):
    for s in _part(d, "consumer1"):
        if s["kind"] == "try_wait":
            s["barrier"] = "full0"


def remote_release_swapped(d):
    for part in ("body", "epilogue"):
        for s in _part(d, "consumer0", part):
            if s["kind"] == "arrive" and s["barrier"] == "empty1":
                s["barrier"] = "empty0"


# the edit -> the classes synth verify refutes (None: the reader refuses the file, exit 2)
PROGRAM_TAMPERS = {
    drop_teardown_sync: {"safe_exit"},
    drop_setup_sync: {"init_visible"},
    drop_every_cluster_sync: {"init_visible", "safe_exit"},
    drop_init_fence: {"init_visible", "fence"},
    drop_one_multicast: None,
    empty_counts_local_only: {"arrivals", "no_deadlock"},
    roles_lose_their_cta: {"cluster_form"},
    consumer1_waits_on_full0: {"cluster_form"},
    remote_release_swapped: {"arrivals"},
}
DEFAULT_TAMPERS = (drop_teardown_sync, drop_one_multicast, roles_lose_their_cta, remote_release_swapped)


def _tampered(solved, tmp_path, edit) -> pathlib.Path:
    folder = _copy(solved, tmp_path / edit.__name__)
    doc = json.loads((folder / "program.json").read_text())
    edit(doc)
    (folder / "program.json").write_text(json.dumps(doc, indent=2))
    _rehash(folder, "program.json")
    return folder


def _check_program_tamper(solved, tmp_path, edit):
    from synth.api import certify, verify
    from synth.errors import SynthError
    import synth.kernel

    want = PROGRAM_TAMPERS[edit]
    folder = _tampered(solved, tmp_path, edit)
    if want is None:
        with pytest.raises(SynthError) as e:
            verify(str(folder))
        assert e.value.loc is not None and "program.json" in str(e.value.loc) and e.value.fix, e.value.render()
    else:
        rep = verify(str(folder))
        assert not rep.ok and want <= rep.refuted_classes(), (edit.__name__, rep.refuted_classes())
    res = certify(str(folder))
    assert not res.ok and "not for this program" in res.render(), res.render()
    with pytest.raises(SynthError) as e:
        synth.kernel.load(str(folder), backend="emulator")
    assert "program.json is not the lowering" in e.value.msg, e.value.render()


@pytest.mark.parametrize("edit", DEFAULT_TAMPERS, ids=lambda f: f.__name__)
def test_a_tampered_cluster_program_is_refused(solved, tmp_path, edit):
    _check_program_tamper(solved, tmp_path, edit)


@pytest.mark.slow
@pytest.mark.parametrize("edit", [t for t in PROGRAM_TAMPERS if t not in DEFAULT_TAMPERS], ids=lambda f: f.__name__)
def test_more_tampered_cluster_programs_are_refused(solved, tmp_path, edit):
    _check_program_tamper(solved, tmp_path, edit)


def test_a_tampered_folder_exits_1_or_2_with_a_message_never_a_traceback(solved, tmp_path):
    """The same refusals from the command line: ``synth verify`` and ``synth certify`` of a folder whose
    program.json lost its exit barrier (exit 1, the refuted class and the remote use at stake), and of one whose
    program.json the reader refuses (exit 2, the file and the fix)."""
    for edit, code, says in ((drop_teardown_sync, 1, "safe_exit"), (drop_one_multicast, 2, "does not write B0")):
        folder = _tampered(solved, tmp_path, edit)
        for cmd in ("verify", "certify"):
            r = synth(cmd, str(folder))
            text = r.stdout + r.stderr
            assert r.returncode in (1, 2) and "Traceback" not in text, text
            if cmd == "verify":
                assert r.returncode == code and says in text, text


# ---------------------------------------------------------------------------------------------------------------
# problem.yaml, certificate and kernel.cu tampers

def _manifest(folder: pathlib.Path, edit) -> None:
    p = folder / "certificate" / "manifest.json"
    doc = json.loads(p.read_text())
    edit(doc)
    p.write_text(json.dumps(doc, indent=2))


CERT_TAMPERS = {
    "cluster list removed": lambda d: d.pop("cluster"),
    "cluster list emptied": lambda d: d.__setitem__("cluster", []),
    "one check renamed": lambda d: d.__setitem__("cluster", d["cluster"][:-1] + ["safe_exit:cta2"]),
    "one check dropped": lambda d: d.__setitem__("cluster", d["cluster"][:-1]),
    "one check twice": lambda d: d.__setitem__("cluster", d["cluster"][:-1] + d["cluster"][:1]),
    "not a list": lambda d: d.__setitem__("cluster", "cluster_form:names"),
}


@pytest.mark.parametrize("what", list(CERT_TAMPERS))
def test_a_certificate_with_a_tampered_cluster_list_is_refused(solved, tmp_path, what):
    from synth.api import certify

    folder = _copy(solved, tmp_path / "f")
    _manifest(folder, CERT_TAMPERS[what])
    res = certify(str(folder))
    text = res.render()
    assert not res.ok and "manifest.json" in text and "cluster" in text, text


def test_a_one_cta_certificate_swapped_in_is_refused(solved, solved_one, tmp_path):
    """A 1x1 solve's certificate in the cluster folder: not for this program; with its program.json too (the
    folder's problem.yaml still says 2x1): refused as a cluster program without its cluster classes, and verify
    refutes cluster_form."""
    from synth.api import certify, verify

    one = solved_one
    folder = _copy(solved, tmp_path / "f")
    shutil.rmtree(folder / "certificate")
    shutil.copytree(one / "certificate", folder / "certificate")
    res = certify(str(folder))
    assert not res.ok and "not for this program" in res.render(), res.render()
    shutil.copy(one / "program.json", folder / "program.json")
    res = certify(str(folder))
    assert not res.ok and "cluster classes are not certified" in res.render(), res.render()
    rep = verify(str(folder))
    assert not rep.ok and rep.refuted_classes() == {"cluster_form"}


@pytest.mark.parametrize("old, new", [("cluster: 2x1", "cluster: 1x1"), ("cluster: 2x1", "cluster: 1x2"),
                                      ("cluster: 2x1\n", "")])
def test_load_refuses_a_problem_yaml_that_lost_or_changed_its_cluster(solved, tmp_path, old, new):
    """problem.yaml edited (its hash recorded again): the folder's program.json and kernel.cu are no longer what
    synth derives from it."""
    from synth.errors import SynthError
    import synth.kernel

    folder = _copy(solved, tmp_path / "f")
    p = folder / "problem.yaml"
    p.write_text(p.read_text().replace(old, new))
    _rehash(folder, "problem.yaml")
    with pytest.raises(SynthError) as e:
        synth.kernel.load(str(folder), backend="emulator")
    assert "is not the lowering" in e.value.msg or "schedule.json" in str(e.value.loc), e.value.render()


@pytest.mark.parametrize("what", ["mask", "mapa"])
def test_load_refuses_an_edited_cluster_kernel(solved, tmp_path, what):
    """kernel.cu with the multicast mask narrowed to this CTA, or a remote release without its mapa (an arrive on
    the own CTA's barrier), its hash recorded again: load derives the kernel again and refuses it."""
    from synth.errors import SynthError
    import synth.kernel

    folder = _copy(solved, tmp_path / "f")
    p = folder / "kernel.cu"
    text = p.read_text()
    if what == "mask":
        new = text.replace("(uint16_t)(0x3)", "(uint16_t)(0x1)", 1)
    else:
        new = re.sub(r"synth_mapa\(([^;]*?), \(crank \^ 1u\)\)", r"\1", text, count=1)
    assert new != text
    p.write_text(new)
    _rehash(folder, "kernel.cu")
    with pytest.raises(SynthError) as e:
        synth.kernel.load(str(folder), backend="emulator")
    assert "kernel.cu is not the kernel synth emits" in e.value.msg, e.value.render()


@pytest.mark.slow
def test_a_tampered_persistent_cluster_folder_is_refused(solved_persistent, tmp_path):
    """The persistent 2x1 folder: the exit barrier dropped (verify refutes safe_exit, load refuses), the carry
    left out of the certificate (certify fails), a 1x1 program swapped in (cluster_form)."""
    from synth.api import certify, verify
    from synth.errors import SynthError
    import synth.kernel

    folder = _tampered(solved_persistent, tmp_path, drop_teardown_sync)
    rep = verify(str(folder))
    assert not rep.ok and "safe_exit" in rep.refuted_classes()
    with pytest.raises(SynthError):
        synth.kernel.load(str(folder), backend="emulator")
    folder = _copy(solved_persistent, tmp_path / "nocarry")
    _manifest(folder, lambda d: d.__setitem__("obligations", [o for o in d["obligations"] if o["kind"] != "carry"]))
    res = certify(str(folder))
    assert not res.ok and "missing from the manifest" in res.render(), res.render()
    folder = _copy(solved_persistent, tmp_path / "ring")
    _manifest(folder, lambda d: d.__setitem__("persistent", False))  # problem.yaml still says persistent: true
    assert certify(str(folder)).ok  # the flag only adds obligations: all still certified


# ---------------------------------------------------------------------------------------------------------------
# bad cluster: values and combinations: exit 2 at the line, the fix, no folder

BAD_VALUES = ["2X1", "2x2", "1x1x1", '" 2x1"', "2", "21", "2.1", "[2, 1]", "{M: 2, N: 1}", "true", '""', "AUTO",
              "2x1x1", "x", "-2x1"]


@pytest.mark.parametrize("value", BAD_VALUES)
def test_a_bad_cluster_value_is_refused_at_its_line(tmp_path, value):
    from synth.errors import SynthError
    from synth.load import load_problem

    p = tmp_path / "p.yaml"
    p.write_text(PROBLEM.replace("cluster: 2x1", f"cluster: {value}"))
    with pytest.raises(SynthError) as e:
        load_problem(str(p))
    assert e.value.loc.line == CLUSTER_LINE and "expected one of 1x1, 2x1, 1x2" in e.value.msg and e.value.fix


BAD_COMBOS = [("cluster: 2x1\nsplit_k: 2", CLUSTER_LINE, "split_k = 2"),
              ("cluster: 2x1\npingpong: true", CLUSTER_LINE, "ping-pong"),
              ("cluster: auto\nsplit_k: 2", CLUSTER_LINE, "no split-K"),
              ("cluster: 1x2\nsplit_k: 4", CLUSTER_LINE, "split_k = 4"),
              ("cluster: 2x1\npersistent: true\npingpong: true", CLUSTER_LINE, "ping-pong"),
              ("cluster: 2x1\nstream_k: true", 9, "stream-K"),
              ("cluster: 2x1\nmin_k_tiles: 2", 9, "min_k_tiles"),
              ("cluster: 2x1\ncluster: 1x2", 9, "duplicate key")]


@pytest.mark.parametrize("text, line, says", BAD_COMBOS)
def test_cluster_with_a_key_it_cannot_take_is_refused_at_its_line(tmp_path, text, line, says):
    from synth.errors import SynthError
    from synth.load import load_problem

    p = tmp_path / "p.yaml"
    p.write_text(PROBLEM.replace("cluster: 2x1", text))
    with pytest.raises(SynthError) as e:
        load_problem(str(p))
    assert e.value.loc.line == line and says in e.value.msg and e.value.fix, e.value.render()


@pytest.mark.parametrize("text", ["cluster: 2x2", "cluster: 2x1\nsplit_k: 2"])
def test_a_refused_cluster_exits_2_without_a_folder(tmp_path, text):
    p = tmp_path / "p.yaml"
    p.write_text(PROBLEM.replace("cluster: 2x1", text))
    r = synth("solve", str(p), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.startswith(f"{p}:{CLUSTER_LINE}:"), r.stderr
    assert "\nfix: " in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------------------------
# fuzz: random legal cluster configurations compute C on the emulator

@st.composite
def cluster_cases(draw):
    """A legal cluster KernelDesign (KernelDesign.check accepts it) and M, N, K around its tile: M or N below one
    tile, an odd tile count along the cluster axis (a CTA outside C), K below BK or off it, and a thread and
    block order (cta0_first / cta1_first: one CTA of each cluster runs ahead)."""
    from synth.hopper.kernel_design import KernelDesign
    from synth.emit.sm90.emulate import ORDERS

    cluster = draw(st.sampled_from(["2x1", "1x2"]))
    bm = draw(st.sampled_from([64, 128]))
    bn = 16 * draw(st.integers(1, 8 if bm == 128 else 16))  # at most 128 accumulators per thread
    stages = draw(st.integers(1, 5))
    epilogue = draw(st.sampled_from(["register", "tma_store"]))
    cfg = KernelDesign.of(bm=bm, bn=bn, stages=stages, k_pipe_mmas=draw(st.integers(0, stages - 1)),
                     dtype=draw(st.sampled_from(["f16", "bf16"])), epilogue=epilogue,
                     out_dtype=draw(st.sampled_from(["f32", "f16", "bf16"])) if epilogue == "tma_store" else "f32",
                     persistent=draw(st.booleans()), cluster=cluster)
    try:
        cfg.check()
    except ValueError:
        from hypothesis import assume

        assume(False)
    along, across = draw(st.sampled_from([1, 2, 3, 5])), draw(st.sampled_from([1, 2, 3]))
    tm, tn = (along, across) if cluster == "2x1" else (across, along)
    M = max(1, tm * bm - draw(st.integers(0, bm - 1)))
    N = max(1, tn * bn - draw(st.integers(0, bn - 1)))
    if epilogue == "tma_store":  # C's row stride: 16 bytes
        q = 4 if cfg.out_dtype == "f32" else 8
        N = max(q, N // q * q)
    K = 8 * draw(st.sampled_from([1, 3, 8, 9, 17, 40]))
    order = draw(st.sampled_from(ORDERS))
    block = draw(st.sampled_from(["forward", "reverse", "shuffle:5"]))
    ctas = draw(st.sampled_from([0, 2, 4, 6])) if cfg.persistent else 0
    return cfg, M, N, K, order, block, ctas


def _fuzz(case):
    from synth.emit.sm90.emulate import emulate_sm90
    from synth.emit.sm90.kernel import emit_sm90_kernel

    cfg, M, N, K, order, block, ctas = case
    r = emulate_sm90(emit_sm90_kernel(cfg), M, N, K, order=order, dtype=cfg.dtype, with_c=True, alpha=1.5, beta=0.5,
                     block_order=block, ctas=ctas, seed=M + N + K)
    assert r.ok, (cfg, M, N, K, order, block, ctas, r.summary())
    ktiles = -(-K // 64)
    # every k-tile of every CTA's tile: one multicast per CTA, two copies, one remote release
    assert r.stats["multicast_copies"] == 2 * r.stats["multicasts"] and r.stats["multicasts"] % ktiles == 0


@NEEDS_GXX
@settings(max_examples=40 if EXPLORE else 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(cluster_cases())
def test_random_cluster_kernels_compute_c_on_the_emulator(case):
    _fuzz(case)


# ---------------------------------------------------------------------------------------------------------------
# the multicast's half boxes against CuTe's multicast partition of the shared tile

def _cute_multicast(tmp: pathlib.Path) -> dict:
    from test_cute_layouts import CUDA_INC, CUTE, GXX, cute_build

    if GXX is None or CUTE is None or not CUDA_INC:
        pytest.skip("g++, the CuTe headers (nvidia-cutlass) and the CUDA headers are needed")
    exe = cute_build(pathlib.Path(__file__).with_name("cute_multicast.cpp"),
                     ["-std=c++17", "-O0", "-w", "-D__CUDACC_VER_MAJOR__=12"])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_the_multicast_halves_land_where_cute_puts_each_cta_s_part(tmp_path):
    """For shared tiles of 16 to 256 rows: CuTe's make_tma_copy(SM90_TMA_LOAD_MULTICAST, cluster size 2) boxes
    half the rows, and CTA c's part (partition_D and tma_partition) is exactly where the emulator's TMA lands the
    half box the kernel issues for part c (at slot + c * rows / 2 * 128 bytes, global rows from c * rows / 2),
    which is where CuTe's whole-tile layout (the one the wgmma descriptors read) has those rows. The emitted
    kernels' multicast lines use that offset and those rows."""
    from test_cute_layouts import probe_build

    from synth.hopper.kernel_design import KernelDesign
    from synth.emit.sm90.kernel import emit_sm90_kernel

    cute = _cute_multicast(tmp_path)
    exe = probe_build()
    queries, expect = [], []
    for rows, c in cute.items():
        rows, base = int(rows), c["addr"][0][0]
        half = rows // 2
        assert c["box"] == [64, half], (rows, c["box"])
        for part in range(2):
            queries.append(f"tma {base + part * half * 128} {half} 2")
            expect.append((rows, part, c["addr"][part * half:(part + 1) * half], c["part"][part], c["tma_part"][part]))
    proc = subprocess.run([str(exe)], input="\n".join(queries) + "\n", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for got, (rows, part, tile_rows, cute_part, cute_tma_part) in zip(proc.stdout.splitlines(), expect):
        landed = json.loads(got)
        assert landed == tile_rows, (rows, part)
        flat = sorted(a for row in landed for a in row)
        assert flat == sorted(cute_part) == sorted(cute_tma_part), (rows, part)
    for cluster, bm, bn in (("2x1", 128, 48), ("2x1", 64, 256), ("1x2", 64, 128), ("1x2", 128, 16)):
        cfg = KernelDesign.of(bm=bm, bn=bn, stages=2, cluster=cluster)
        rows = bn if cluster == "2x1" else bm
        (line,) = [ln for ln in emit_sm90_kernel(cfg).splitlines() if "synth_tma_load_2d_multicast(s" in ln]
        assert f"crank * {rows // 2 * 128}u" in line and f"+ (int)crank * {rows // 2}" in line, line
        assert (cfg.b_box_rows if cluster == "2x1" else cfg.a_box_rows) == rows // 2


# ---------------------------------------------------------------------------------------------------------------
# setup and teardown edits that only the cluster classes see, on a program given to synth.api.verify as an object

def _with(doc, setup=None, teardown=None):
    from synth.hopper.ir import hopper_from_json

    d = copy.deepcopy(doc)
    if setup is not None:
        d["setup"] = setup
    if teardown is not None:
        d["teardown"] = teardown
    return hopper_from_json(d)


def test_a_guarded_init_does_not_make_a_barrier_visible_to_the_peer(solved, tmp_path):
    """A HopperProgram object (synth.api.verify's other target: no file, so no trusted reader in front of the
    prover) whose init of full0 runs only when T > 1: at T = 1 CTA 1 multicasts into a barrier CTA 0 never
    initialized. docs/hopper_cluster.md's init_visible takes the init, the fence and the cluster barrier
    unguarded; the guarded fence and cluster barrier were refuted, the guarded init was not."""
    from synth.api import verify

    doc = json.loads((solved / "program.json").read_text())
    setup = copy.deepcopy(doc["setup"])
    assert setup[0] == {"kind": "init", "barrier": "full0", "guard": None}
    setup[0]["guard"] = "T > 1"
    rep = verify(_with(doc, setup=setup))
    assert not rep.ok and "init_visible" in rep.refuted_classes(), rep.render()
    assert "full0" in rep.render() and "guard" in rep.render()
    # the same edit as a file: the reader refuses it (exit 2), as it did
    from synth.errors import SynthError
    from synth.hopper.ir import load_hopper

    bad = tmp_path / "guarded_init.json"
    doc["setup"] = setup
    bad.write_text(json.dumps(doc))
    with pytest.raises(SynthError, match="guarded setup statement"):
        load_hopper(str(bad))


def _one_cta_named_cta0(tmp_path) -> dict:
    """The 1x1 lowering of PROBLEM's tile with every role, barrier and buffer renamed to end in 0 (CTA 0)."""
    from synth.hopper.kernel_design import KernelDesign
    from synth.hopper.ir import dumps

    one = json.loads(dumps(design_program(KernelDesign.of(stages=2, name="cl2"))))
    names = {r["role"] for r in one["roles"]} | {b["name"] for b in one["barriers"]} | \
        {b["name"] for b in one["buffers"]}

    def walk(x, key=None):
        if isinstance(x, dict):
            return {k: walk(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v, key) for v in x]
        if isinstance(x, str) and key in ("role", "barrier", "buffer", "name", "guards") and x in names:
            return x + "0"
        return x
    return walk(one)


def test_a_folder_declaring_a_cluster_with_a_one_cta_program_named_cta0_fails(solved, tmp_path):
    """problem.yaml says cluster: 2x1; program.json is the one-CTA program with every name ending in 0, so every
    name ends in a CTA index of the one CTA its roles name. docs/hopper_cluster.md: a folder that declares a
    cluster but holds a one-CTA program fails cluster_form, and a cluster program's roles name its CTAs 0 .. n - 1
    of a cluster of two: verify refutes cluster_form:names, the trusted checker too, and certify refuses a
    certificate listing the three checks synth used to derive for it."""
    from synth.api import certify, verify
    from synth.hopper.ir import hopper_from_json
    from synth.trusted.cluster import check_cluster_bytes
    from synth.verify.certificate_phases import write_hopper_certificate
    from synth.verify.phases import verify_hopper

    from synth.hopper.ir import dumps

    doc = _one_cta_named_cta0(tmp_path)
    folder = _copy(solved, tmp_path / "f")
    shutil.rmtree(folder / "certificate")
    (folder / "program.json").write_text(dumps(hopper_from_json(doc)))
    rep = verify(str(folder))
    assert not rep.ok and rep.refuted_classes() == {"cluster_form"}, rep.render()
    assert "one CTA" in rep.render(), rep.render()
    ok, checks, _ = check_cluster_bytes((folder / "program.json").read_bytes())
    assert not ok and [c.id for c in checks if not c.ok] == ["cluster_form:names"]
    one = verify_hopper(hopper_from_json(doc), time_limit=10)
    assert one.ok
    with pytest.raises(ValueError, match="refutes a cluster class"):
        write_hopper_certificate(one, str(tmp_path / "c"), cluster=True)
    write_hopper_certificate(one, str(folder / "certificate"), cluster=False)
    _manifest(folder, lambda d: d.__setitem__("cluster", ["cluster_form:names", "cluster_form:producer0",
                                                          "cluster_form:consumer0"]))
    res = certify(str(folder))
    assert not res.ok and "cluster_form:names [cluster_form]" in res.render(), res.render()


# ---------------------------------------------------------------------------------------------------------------
# problem.yaml's cluster key spelled so that YAML reads it and the trusted line reader would not

HIDDEN_KEYS = ['"clu\\x73ter": 2x1', '"\\u0063luster": 2x1', "!!str cluster: 2x1", "&a cluster: 2x1",
               "? !!str cluster\n: 2x1"]


@pytest.mark.parametrize("spelled", HIDDEN_KEYS)
def test_a_cluster_key_the_line_reader_cannot_read_for_sure_is_refused(tmp_path, spelled):
    """Each spelling is cluster: 2x1 to synth's YAML loader; the trusted reader (what synth verify and synth
    certify decide rule 3 with) must refuse it at its line rather than read "no cluster"."""
    from synth.load import load_problem
    from synth.trusted.flags import FlagError, read_cluster_flag

    text = PROBLEM.replace("cluster: 2x1", spelled)
    p = tmp_path / "p.yaml"
    p.write_text(text)
    assert load_problem(str(p)).cluster == "2x1"
    with pytest.raises(FlagError) as e:
        read_cluster_flag(text.encode(), str(p))
    assert e.value.where == f"{p}:{CLUSTER_LINE}" and e.value.fix


def test_an_aliased_cluster_key_is_refused(tmp_path):
    from synth.load import load_problem
    from synth.trusted.flags import FlagError, read_cluster_flag

    text = PROBLEM.replace("name: cl2", "name: &k cluster").replace("cluster: 2x1", "*k : 2x1")
    p = tmp_path / "p.yaml"
    p.write_text(text)
    assert load_problem(str(p)).cluster == "2x1"
    with pytest.raises(FlagError) as e:
        read_cluster_flag(text.encode(), str(p))
    assert e.value.where == f"{p}:{CLUSTER_LINE}"


def test_a_folder_hiding_its_cluster_key_is_not_checked_as_one_cta(solved, solved_one, tmp_path):
    """The cluster folder with the 1x1 program.json and problem.yaml's key written "clu\\x73ter": 2x1 (YAML: a
    cluster of two): synth verify and synth certify refuse it at problem.yaml's line (exit 2) instead of
    proving the one-CTA program of a folder that declares a cluster."""
    one = solved_one
    folder = _copy(solved, tmp_path / "f")
    for name in ("program.json", "certificate"):
        (shutil.rmtree if name == "certificate" else os.remove)(folder / name)
    shutil.copy(one / "program.json", folder / "program.json")
    shutil.copytree(one / "certificate", folder / "certificate")
    p = folder / "problem.yaml"
    p.write_text(p.read_text().replace("cluster: 2x1", '"clu\\x73ter": 2x1'))
    r = synth("verify", str(folder))
    assert r.returncode == 2 and f"problem.yaml:{CLUSTER_LINE}" in r.stderr and "Traceback" not in r.stderr, \
        r.stdout + r.stderr
    r = synth("certify", str(folder))
    assert r.returncode in (1, 2) and f"problem.yaml:{CLUSTER_LINE}" in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("spelled", ['"persist\\x65nt": true', "!!str persistent: true", "&p persistent: true"])
def test_a_persistent_key_the_line_reader_cannot_read_for_sure_is_refused(tmp_path, spelled):
    from synth.load import load_problem
    from synth.trusted.hopper import read_persistent_flag
    from synth.trusted.hopper_program import HopperInputError

    text = PROBLEM + spelled + "\n"
    p = tmp_path / "p.yaml"
    p.write_text(text)
    assert load_problem(str(p)).persistent is True
    with pytest.raises(HopperInputError) as e:
        read_persistent_flag(text.encode(), str(p))
    assert str(e.value).startswith(f"{p}:11")


@pytest.mark.slow
def test_a_persistent_cluster_folder_hiding_its_persistent_key_is_refused(solved_persistent, tmp_path):
    """The persistent 2x1 folder's certificate without its carry obligations (manifest persistent: false) and its
    problem.yaml saying "persist\\x65nt": true (YAML: persistent): certify fails at that line instead of
    certifying the ring without the carry."""
    from synth.api import certify

    folder = _copy(solved_persistent, tmp_path / "f")

    def no_carry(d):
        d["persistent"] = False
        d["obligations"] = [o for o in d["obligations"] if o["kind"] != "carry"]
    _manifest(folder, no_carry)
    p = folder / "problem.yaml"
    p.write_text(p.read_text().replace("persistent: true", '"persist\\x65nt": true'))
    res = certify(str(folder))
    assert not res.ok and "problem.yaml:" in res.render(), res.render()


@pytest.mark.parametrize("old, new", [("cluster: 2x1", "cluster: 1x1"), ("cluster: 2x1\n", "")])
def test_a_folder_declaring_no_cluster_around_a_cluster_program_is_refused(solved, tmp_path, old, new):
    """The reverse of rule 3: problem.yaml says cluster: 1x1 (or nothing) while program.json multicasts and holds
    cluster barriers. The program alone is a proven cluster program, but the folder says its kernel is one CTA:
    synth verify and synth certify refuse the folder at problem.yaml (exit 2 / 1) instead of passing it."""
    folder = _copy(solved, tmp_path / "f")
    p = folder / "problem.yaml"
    p.write_text(p.read_text().replace(old, new))
    r = synth("verify", str(folder))
    text = r.stdout + r.stderr
    assert r.returncode == 2 and "problem.yaml" in r.stderr and "cluster program" in r.stderr, text
    assert "Traceback" not in text
    r = synth("certify", str(folder))
    text = r.stdout + r.stderr
    assert r.returncode == 1 and "problem.yaml" in text and "cluster program" in text, text


@pytest.mark.parametrize("barrier", ["full", "empty"])
def test_a_guarded_init_is_not_an_init_for_one_cta_either(barrier):
    """The one-CTA program given to synth.api.verify as an object with a barrier's init under T > 1 (at T = 1
    it is never initialized): the fence class's "initialized in setup and fenced before use" is refuted, as the
    cluster's init_visible is (the trusted reader refuses the file)."""
    from synth.api import verify
    from synth.hopper.kernel_design import KernelDesign
    from synth.hopper.ir import dumps, hopper_from_json

    doc = json.loads(dumps(design_program(KernelDesign.of(stages=2))))
    (k,) = [k for k, s in enumerate(doc["setup"]) if s == {"kind": "init", "barrier": barrier, "guard": None}]
    doc["setup"][k]["guard"] = "T > 1"
    rep = verify(hopper_from_json(doc))
    assert not rep.ok and rep.refuted_classes() == {"fence"}, rep.render()
    assert f"barrier {barrier} is initialized in setup and the init is fenced before use" in rep.render()

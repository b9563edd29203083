"""synth.search and synth.search.model: the GEMM autotuner (space, constraints, model, solver, many shapes)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.arch import ARCHS, get_arch
from synth.errors import SynthError
from synth.gemm import GemmConfig, register_estimate, smem_slots, stage_pins, validate
from synth.search import (CONSTRAINTS, STAGES_SPACE, Point, clear_cache, enumerate_space, is_legal, load_references,
                          read_shapes_csv, reference_points, search_gemm, search_many, search_result_to_json)
from synth.search import make_context as _context
from synth.search import prune as _prune
from synth.arch import REG_ALLOC_UNIT
from synth.search.model import estimate, occupancy, resources


# ---------------------------------------------------------------------------
# the space and its constraints


def test_space_is_the_documented_product():
    space = enumerate_space()
    assert len(space) == 5 * 5 * 4 * 4 * len(STAGES_SPACE) == 4400
    assert len(set(space)) == len(space)
    assert {p.BK for p in space} == {16, 32, 64, 128}
    assert {p.warps for p in space} == {1, 2, 4, 8}
    assert set(range(2, 9)) <= set(STAGES_SPACE)


def _check_within_limits(p: Point, M: int, N: int, K: int, arch_name: str, model: bool = True) -> None:
    arch = get_arch(arch_name)
    cfg = GemmConfig(M, N, K, "f16", p.BM, p.BN, p.BK, p.warps, p.stages, arch_name)
    assert validate(cfg) == [], (p, validate(cfg))
    slots = smem_slots(stage_pins(cfg))
    regs = register_estimate(cfg)
    assert slots * (p.BM + p.BN) * p.BK * 2 <= arch.smem_per_block
    assert regs <= arch.max_registers_per_thread
    assert -(-regs * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT * p.warps <= arch.registers_per_sm
    assert (p.BM * p.BK * 2) % (p.warps * 32 * 16) == 0 and (p.BN * p.BK * 2) % (p.warps * 32 * 16) == 0
    assert p.stages <= -(-K // p.BK)
    if model:
        res = resources(GemmConfig(p.BM, p.BN, 64 * p.BK, "f16", p.BM, p.BN, p.BK, p.warps, p.stages, arch_name),
                        arch)
        assert res.smem_bytes == slots * (p.BM + p.BN) * p.BK * 2 and res.regs_per_thread == regs


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(1, 2048).map(lambda x: 8 * x), N=st.integers(1, 2048).map(lambda x: 8 * x),
       K=st.integers(1, 2048).map(lambda x: 8 * x), arch=st.sampled_from(sorted(ARCHS)))
def test_no_legal_point_exceeds_shared_memory_or_registers(M, N, K, arch):
    ctx = _context(M, N, K, "f16", arch)
    legal, first, anyv = _prune(ctx, enumerate_space())
    assert legal, "some configuration is always legal for K % 8 == 0"
    for p in legal:
        _check_within_limits(p, M, N, K, arch, model=False)
    assert sum(first.values()) == len(enumerate_space()) - len(legal)
    assert first["gemm.validate"] == 0, "the named constraints must catch everything validate rejects"
    assert all(anyv[k] >= first[k] for k in first)


FIT_SHAPES = ((4096, 4096, 4096), (8192, 128, 8192), (1000, 777, 1024))


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_proposed_candidates_fit_the_arch(arch):
    i = sorted(ARCHS).index(arch)  # two of the three shapes per arch, each shape on most archs
    for shape in (FIT_SHAPES[i % 3], FIT_SHAPES[(i + 1) % 3]):
        # the cp.async + mma.sync loop on every arch (sm_90's default Hopper loop: tests/test_search_hopper.py)
        res = search_gemm(*shape, arch=arch, top=5, time_limit=20.0, references=False, mainloop="cp_async")
        assert len(res.candidates) == 5
        for c in res.candidates:
            _check_within_limits(c.point, *shape, arch)
            assert c.smem_bytes <= get_arch(arch).smem_per_block
            assert c.regs_per_thread <= 255
            assert c.ctas_per_sm >= 1 and c.waves >= 1 and c.time_us > 0 and c.tflops > 0
            assert c.why
        times = [c.time_us for c in res.candidates]
        assert times == sorted(times)
        assert [c.rank for c in res.candidates] == [1, 2, 3, 4, 5]


def test_exclusions_are_counted_per_constraint():
    res = search_gemm(4096, 4096, 4096, arch="sm_86", top=3, time_limit=20.0, references=False)
    ex = dict(res.excluded)
    assert [name for name, _ in res.excluded][:len(CONSTRAINTS)] == [c.name for c in CONSTRAINTS]
    assert sum(ex.values()) == res.space_size - res.feasible
    assert ex["warp-tiling"] > 0 and ex["cp.async-16B"] > 0 and ex["shared-memory"] > 0
    assert ex["registers/thread"] > 0 and ex["gemm.validate"] == 0
    big = search_gemm(4096, 4096, 4096, arch="sm_80", top=3, time_limit=20.0, references=False)
    assert dict(big.excluded)["shared-memory"] < ex["shared-memory"], "sm_86 has 99 KiB per CTA, sm_80 163 KiB"
    short = search_gemm(256, 256, 64, top=3, time_limit=20.0, references=False)
    assert dict(short.excluded)["k-tiles"] > 0  # K = 64 has 1..4 k-tiles: deep pipelines are excluded
    doc = search_result_to_json(res)
    assert doc["excluded"] == ex and doc["space_size"] == 4400


def test_bad_shapes_and_options_are_clear_errors():
    with pytest.raises(SynthError, match="cp.async-16B"):
        search_gemm(512, 512, 100)
    with pytest.raises(SynthError, match="unknown arch"):
        search_gemm(512, 512, 512, arch="sm_75")
    with pytest.raises(SynthError, match="dtype"):
        search_gemm(512, 512, 512, dtype="tf32")
    with pytest.raises(SynthError, match="positive"):
        search_gemm(0, 512, 512)


# ---------------------------------------------------------------------------
# reference configurations


def test_every_reference_is_in_the_space_or_excluded_with_a_reason():
    refs = load_references()
    assert len(refs["cutlass_sm80_f16"]) == 22 and len(refs["triton_matmul_tutorial"]) == 16
    space = set(enumerate_space())
    all_refs = refs["cutlass_sm80_f16"] + refs["triton_matmul_tutorial"] + list(refs["defaults"].values())
    for arch in sorted(ARCHS):
        for ref in all_refs:
            assert Point(ref.BM, ref.BN, ref.BK, ref.warps, ref.slots) in space
            p, why = reference_points(ref, 4096, 4096, 4096, arch=arch)
            if p is None:
                assert why and ":" in why, (ref, arch)
                assert why.split(":")[0] in {c.name for c in CONSTRAINTS}
            else:
                assert p in space and is_legal(p, 4096, 4096, 4096, arch=arch) is None
    # on sm_80 and sm_90 every CUTLASS sm80 f16 multistage config (BK 32 and 64) and both defaults are
    # in the legal space themselves, with exactly their number of shared slots (synth's stages)
    for arch in ("sm_80", "sm_90"):
        for ref in refs["cutlass_sm80_f16"] + list(refs["defaults"].values()):
            p, why = reference_points(ref, 4096, 4096, 4096, arch=arch)
            assert p is not None, (arch, ref, why)
            assert (p.BM, p.BN, p.BK, p.warps, p.stages) == (ref.BM, ref.BN, ref.BK, ref.warps, ref.slots)
            res = resources(p.config(p.BM, p.BN, 4096, "f16", arch), get_arch(arch))
            assert res.smem_slots == ref.slots and res.regs_per_thread <= 232
    # every Triton tutorial config that fits shared memory at f16 (all but the five BK = 128 ones)
    for arch in sorted(ARCHS):
        for ref in refs["triton_matmul_tutorial"]:
            need = ref.slots * (ref.BM + ref.BN) * ref.BK * 2
            p, why = reference_points(ref, 4096, 4096, 4096, arch=arch)
            if need <= get_arch(arch).smem_per_block:
                assert p is not None and p.stages == ref.slots, (arch, ref, why)
            else:
                assert p is None and why.startswith("shared-memory"), (arch, ref, why)
    # CUTLASS's default (144 KiB of shared memory) does not fit the 99 KiB of sm_86 / sm_89
    for arch in ("sm_86", "sm_89"):
        p, why = reference_points(refs["defaults"]["cutlass"], 4096, 4096, 4096, arch=arch)
        assert p is None and why.startswith("shared-memory"), why
    # Triton's fp8 128x128x128 with 4 slots needs 256 KiB at f16: over every arch
    fp8 = next(r for r in refs["triton_matmul_tutorial"] if (r.BM, r.BN, r.BK, r.slots) == (128, 128, 128, 4))
    for arch in sorted(ARCHS):
        p, why = reference_points(fp8, 4096, 4096, 4096, arch=arch)
        assert p is None and why.startswith("shared-memory"), why
    # 128x256x32 with 5 slots needs 120 KiB: legal on sm_80 (163 KiB), not on sm_86 (99 KiB)
    from synth.search import RefConfig

    deep = RefConfig(128, 256, 32, 8, 5)
    assert reference_points(deep, 4096, 4096, 4096, arch="sm_80")[0] is not None
    p, why = reference_points(deep, 4096, 4096, 4096, arch="sm_86")
    assert p is None and why.startswith("shared-memory") and "101376" in why


def test_references_are_ranked_against_the_winner():
    res = search_gemm(4096, 4096, 4096, top=3, time_limit=20.0)
    names = [r.name for r in res.references]
    assert names[:2] == ["cutlass default", "triton default"]
    for r in res.references:
        assert r.rank is not None and r.rank >= 1 and r.ratio >= 1.0 - 1e-9, r
    # on sm_80 both defaults are ranked themselves, not stand-ins
    cut, tri = res.references[0], res.references[1]
    assert (cut.tile, cut.warps, cut.stages) == ((128, 256, 64), 8, 3) and cut.ranked_as is None and not cut.excluded
    assert (tri.tile, tri.warps, tri.stages) == ((128, 128, 64), 4, 3) and tri.ranked_as is None and not tri.excluded
    doc = search_result_to_json(res)
    assert doc["references"][0]["name"] == "cutlass default" and doc["references"][0]["ranked_as"] is None
    # where the default does not fit (sm_86: 99 KiB per CTA) it is excluded with the reason and a
    # legal stand-in (same tile area and slots, BK halved) is ranked
    small = search_gemm(4096, 4096, 4096, arch="sm_86", top=1, time_limit=20.0)
    c86 = small.references[0]
    assert c86.name == "cutlass default" and c86.excluded.startswith("shared-memory")
    assert c86.ranked_as == (128, 256, 32, 8, 3) and c86.rank is not None


# ---------------------------------------------------------------------------
# the analytic model


def test_model_terms_behave():
    a100 = get_arch("sm_80")
    cfg = GemmConfig(128, 128, 64 * 32, "f16", 128, 128, 32, 4, 4, "sm_80")
    res = resources(cfg, a100)
    assert res.smem_slots == 4 and res.smem_bytes == 4 * 16384
    assert res.tensor_cycles == 2 * 128 * 128 * 32 // a100.tensor_f16_f32_flop_per_clk_sm
    assert occupancy(a100, res)[0] == 2  # 64 KiB + 1 KiB reserved of 164 KiB; 232 regs x 128 threads of 64 Ki
    e = estimate(a100, 4096, 4096, 4096, 128, 128, 32, res)
    assert e.ctas == 1024 and e.ctas_per_sm == 2 and e.waves == 5 and e.k_tiles == 128
    assert 0.5 * a100.peak_tflops_f16 < e.tflops <= a100.peak_tflops_f16
    slow = estimate(a100, 4096, 4096, 4096, 128, 128, 32, res, ii=4 * res.ii_bound, tail=10 * res.tail_bound)
    assert slow.time_us > e.time_us and slow.solved and not e.solved
    # one wave more costs a wave: 1025 CTAs instead of 1024 do not fit in 5 waves of 216
    assert estimate(a100, 4096 + 128, 4096, 4096, 128, 128, 32, res).waves == 5
    assert estimate(a100, 4096 * 2, 4096 * 2, 4096, 128, 128, 32, res).waves == 19
    # tiny problems are DRAM- or latency-bound, never above peak
    tiny = estimate(a100, 128, 128, 128, 128, 128, 32, res)
    assert tiny.tflops < 0.1 * a100.peak_tflops_f16


def test_model_bounds_never_exceed_the_solver():
    from synth.gemm import expand_gemm
    from synth.graph import build_graph
    from synth.model import solve

    for arch, (bm, bn, bk, w, s) in [("sm_80", (128, 128, 32, 4, 4)), ("sm_80", (64, 64, 32, 4, 11)),
                                    ("sm_86", (128, 256, 32, 8, 3)), ("sm_90", (32, 64, 16, 2, 5)),
                                    ("sm_89", (128, 64, 64, 4, 3))]:
        cfg = GemmConfig(bm, bn, 64 * bk, "f16", bm, bn, bk, w, s, arch)
        res = resources(cfg, get_arch(arch))
        problem = expand_gemm(cfg)
        t = solve(problem, build_graph(problem), time_limit=10.0, workers=2).timing
        assert res.ii_bound <= t.ii and res.tail_at(t.ii) <= t.tail, (cfg, res, t)


def test_search_timing_of_pinned_schedules_equals_the_solver():
    """The search times its (fully pinned) points with synth.sim.best_timing: the same (ii, tail) as
    CP-SAT's optimum for the same pins."""
    from synth.gemm import expand_gemm
    from synth.graph import build_graph
    from synth.model import solve
    from synth.search import time_now as _solve_now

    for arch, (bm, bn, bk, w, s) in [("sm_80", (128, 256, 64, 8, 3)), ("sm_80", (128, 128, 64, 4, 3)),
                                    ("sm_80", (128, 128, 16, 4, 4)), ("sm_86", (64, 64, 32, 4, 2)),
                                    ("sm_90", (64, 128, 128, 4, 1))]:
        T = 64
        got = _solve_now(_context(bm, bn, T * bk, "f16", arch), Point(bm, bn, bk, w, s), T, 10.0, 2)
        problem = expand_gemm(GemmConfig(bm, bn, T * bk, "f16", bm, bn, bk, w, s, arch))
        t = solve(problem, build_graph(problem), time_limit=10.0, workers=2).timing
        assert got.status == "OPTIMAL" and (got.ii, got.tail) == (t.ii, t.cycles - (T - 1) * t.ii), (arch, bm, bn, bk)


# ---------------------------------------------------------------------------
# determinism, many shapes


@pytest.mark.slow  # many shapes searched twice
def test_ranking_is_deterministic():
    clear_cache()
    a = search_gemm(2048, 1024, 4096, top=5, time_limit=20.0)
    clear_cache()
    b = search_gemm(2048, 1024, 4096, top=5, time_limit=20.0)
    c = search_gemm(2048, 1024, 4096, top=5, time_limit=20.0)  # from the cache
    assert a == b == c
    assert search_result_to_json(a)["candidates"] == search_result_to_json(c)["candidates"]


SHAPES = [(1024, 1024, 1024), (4096, 256, 2048), (512, 2048, 8192)]


@pytest.mark.slow
def test_search_many_dask_equals_local_processes():
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    kw = dict(top=3, time_limit=20.0, workers=1)
    shapes = SHAPES[1:]  # two shapes: the order of the results and their equality across the three ways
    local = search_many(shapes, processes=2, **kw)
    with LocalCluster(n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None) as cluster:
        remote = search_many(shapes, scheduler=cluster.scheduler_address, **kw)
    serial = [search_gemm(*s, **kw) for s in shapes]
    assert [(r.M, r.N, r.K) for r in local] == shapes
    assert local == remote == serial


def test_search_many_without_dask_is_a_clear_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *a, **kw):
        if name.split(".")[0] in ("distributed", "dask"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(SynthError, match="Dask"):
        search_many(SHAPES[:1], scheduler="tcp://127.0.0.1:1")


def test_read_shapes_csv(tmp_path):
    f = tmp_path / "shapes.csv"
    f.write_text("# shapes\nK, M, N\n64,128,256\n\n4096,4096,4096\n")
    assert read_shapes_csv(str(f)) == [(128, 256, 64), (4096, 4096, 4096)]
    f.write_text("M,N,K\n128,256,64\n128,abc,64\n")
    with pytest.raises(SynthError) as exc:
        read_shapes_csv(str(f))
    assert exc.value.loc.file == str(f) and exc.value.loc.line == 3 and exc.value.loc.col == 5
    assert "N = 'abc' is not an integer" in exc.value.msg
    f.write_text("M,N\n1,2\n")
    with pytest.raises(SynthError, match="no column K") as exc:
        read_shapes_csv(str(f))
    assert exc.value.loc.line == 1
    f.write_text("M,N,K\n1,2,-3\n")
    with pytest.raises(SynthError, match="not positive"):
        read_shapes_csv(str(f))
    with pytest.raises(SynthError, match="cannot read"):
        read_shapes_csv(str(tmp_path / "missing.csv"))


# ---------------------------------------------------------------------------
# command line and end to end


def test_cli_json_and_prediction_notice(capsys, tmp_path):
    from synth.cli import main

    rc = main(["search", "gemm", "--M", "2048", "--N", "2048", "--K", "2048", "--json", "--time-limit", "20",
               "--measure", "--no-sass", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    from synth.run import gpu_available

    gpu = gpu_available()[0]
    assert rc == 0  # --measure without a GPU says the figures are predictions and exits 0
    env = json.loads(out)
    assert env["format"] == "synth-json" and env["command"] == "search"
    doc = env["result"]
    assert doc["shape"] == {"M": 2048, "N": 2048, "K": 2048} and len(doc["candidates"]) == 5
    if not gpu:
        assert doc["predictions_only"] and any("prediction" in n for n in doc["notes"])
        assert env["errors"] == [] and len(env["warnings"]) == 1
    rc = main(["search", "gemm", "--M", "2048", "--N", "2048", "--time-limit", "20"])
    assert rc == 2 and "--K" in capsys.readouterr().err


def test_cli_table(capsys):
    from synth.cli import main

    from synth.run import gpu_available

    rc = main(["search", "gemm", "--M", "4096", "--N", "4096", "--K", "4096", "--time-limit", "20", "--measure",
               "--no-sass"])
    out = capsys.readouterr().out
    assert rc == 0  # with or without a GPU
    assert "pred µs" in out and "TFLOP/s" in out and "why #1" in out and "excluded before evaluation" in out
    assert "cutlass default" in out and "triton default" in out and "stages (smem slots)" in out
    if not gpu_available()[0]:
        assert "--measure: no GPU here" in out and "not a measurement" in out


def test_end_to_end_one_shape_writes_the_winner(tmp_path):
    from synth.load import load_problem
    from synth.flow.candidates import write_candidates

    res = search_gemm(1024, 1024, 1024, top=2, time_limit=10.0)
    assert res.candidates[0].ktile_cycles is not None, res.notes
    assert res.candidates[0].solver_status in ("OPTIMAL", "FEASIBLE")
    assert res.candidates[0].ktile_cycles >= res.candidates[0].ktile_bound
    folders = write_candidates(res, str(tmp_path / "out"), k=1, time_limit=10.0)
    assert len(folders) == 1
    d = folders[0]
    for name in ("problem.yaml", "schedule.json", "program.json", "kernel.cu", "certificate"):
        assert os.path.exists(os.path.join(d, name)), name
    text = open(os.path.join(d, "problem.yaml")).read()
    assert "kind: gemm" in text
    p = load_problem(os.path.join(d, "problem.yaml"))
    w = res.candidates[0]
    assert (p.gemm.BM, p.gemm.BN, p.gemm.BK, p.gemm.warps, p.gemm.stages) == (w.BM, w.BN, w.BK, w.warps, w.stages)
    with pytest.raises(SynthError, match="already exists"):
        write_candidates(res, str(tmp_path / "out"), k=1)


def test_cli_top_writes_folders(tmp_path, capsys):
    from synth.cli import main

    out = tmp_path / "s"
    rc = main(["search", "gemm", "--M", "512", "--N", "512", "--K", "1024", "--top", "1", "--out", str(out),
               "--time-limit", "10", "-q", "--no-sass"])
    assert rc == 0
    (folder,) = list(out.iterdir())
    assert folder.name.startswith("01-gemm-512x512x1024-f16-") and (folder / "kernel.cu").exists()
    rc = main(["search", "gemm", "--M", "512", "--N", "512", "--K", "1024", "--top", "1", "--out", str(out),
               "--time-limit", "10", "-q", "--no-sass"])
    assert rc == 2 and "--force" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# --measure sees a GPU through the GPU library synth.kernel uses (CUDA Python or pycuda)


class _FakeCudaPython:
    """The ``cuda.bindings.driver`` calls :func:`synth.emit.sm90.runner.device_status` makes: one GPU of
    compute capability ``major``."""

    def __init__(self, major: int) -> None:
        from types import SimpleNamespace

        self.major = major
        self.CUdevice_attribute = SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major")

    def cuInit(self, flags):
        return (0,)

    def cuDeviceGetCount(self):
        return (0, 1)

    def cuDeviceGet(self, i):
        return (0, i)

    def cuDeviceGetAttribute(self, attr, dev):
        return (0, self.major)

    def cuDeviceGetName(self, n, dev):
        return (0, b"fake CUDA Python GPU\0")


def _fake_gpu_libraries(monkeypatch, *, cuda_python: int | None, pycuda: bool) -> None:
    """CUDA Python importable with a GPU of compute capability ``cuda_python`` (None: not installed), and
    pycuda importable with one GPU or not installed."""
    import sys
    from types import ModuleType

    from synth.emit.sm90 import runner

    def driver():
        if cuda_python is None:
            raise ImportError("No module named 'cuda'")
        return _FakeCudaPython(cuda_python)

    monkeypatch.setattr(runner, "driver", driver)
    if pycuda:
        drv = ModuleType("pycuda.driver")
        drv.init = lambda: None
        drv.Device = type("Device", (), {"count": staticmethod(lambda: 1), "__init__": lambda self, i: None,
                                         "name": lambda self: "fake pycuda GPU"})
        pkg = ModuleType("pycuda")
        pkg.driver = drv
        monkeypatch.setitem(sys.modules, "pycuda", pkg)
        monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    else:
        monkeypatch.setitem(sys.modules, "pycuda", None)  # import pycuda raises ImportError
        monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.delenv("SYNTH_GPU_BACKEND", raising=False)


@pytest.mark.parametrize("cuda_python, pycuda, env, seen", [
    (8, False, None, "cuda-python: fake CUDA Python GPU"),   # CUDA Python only: --measure sees the GPU
    (None, True, None, "pycuda: fake pycuda GPU"),           # pycuda only
    (9, True, None, "cuda-python: fake CUDA Python GPU"),    # both: CUDA Python first, as synth.kernel
    (9, True, "pycuda", "pycuda: fake pycuda GPU"),          # SYNTH_GPU_BACKEND picks the library
    (None, False, None, None),                               # neither
    (None, True, "cuda-python", None),                       # the library asked for is not there
])
def test_measure_sees_the_gpu_through_the_library_synth_kernel_uses(monkeypatch, cuda_python, pycuda, env, seen):
    from synth.run import gpu_available

    _fake_gpu_libraries(monkeypatch, cuda_python=cuda_python, pycuda=pycuda)
    if env:
        monkeypatch.setenv("SYNTH_GPU_BACKEND", env)
    ok, why = gpu_available()
    if seen:
        assert (ok, why) == (True, seen)
    else:
        assert ok is False and "cuda-python" in why
        if env is None:
            assert "pycuda" in why and "not importable" in why and "not installed" in why


def test_measure_of_hopper_kernels_needs_an_sm90_gpu_and_cuda_python(monkeypatch):
    from synth.run import gpu_available

    _fake_gpu_libraries(monkeypatch, cuda_python=9, pycuda=True)
    assert gpu_available(hopper=True) == (True, "cuda-python: fake CUDA Python GPU")
    _fake_gpu_libraries(monkeypatch, cuda_python=8, pycuda=True)  # an A100: the sm_90a kernel cannot run
    ok, why = gpu_available(hopper=True)
    assert not ok and "not an sm_90 GPU" in why
    assert gpu_available() == (True, "cuda-python: fake CUDA Python GPU")  # the sm_80 kernels can
    _fake_gpu_libraries(monkeypatch, cuda_python=None, pycuda=True)  # pycuda has no tensor maps
    ok, why = gpu_available(hopper=True)
    assert not ok and "CUDA Python" in why


@pytest.mark.parametrize("arch, major, measured", [("sm_80", 8, True), ("sm_90", 8, False), ("sm_90", 9, True)])
def test_synth_search_measure_uses_a_gpu_only_cuda_python_sees(monkeypatch, capsys, tmp_path, arch, major, measured):
    # a stock GPU image: CUDA Python, no pycuda. --measure writes and times the candidates there; Hopper
    # candidates only on an sm_90 GPU (else: once, the figures are predictions, exit 0)
    import synth.cli_search as search_cli
    from synth.cli import main

    _fake_gpu_libraries(monkeypatch, cuda_python=major, pycuda=False)
    calls = []
    monkeypatch.setattr(search_cli, "write_candidates", lambda res, base, k, **kw: calls.append(("write", k)) or [])
    monkeypatch.setattr(search_cli, "measure", lambda res, folders, **kw: calls.append(("measure", len(folders))) or res)
    rc = main(["search", "gemm", "--M", "512", "--N", "512", "--K", "512", "--arch", arch, "--measure", "--no-sass",
               "--time-limit", "10", "--json", "--out", str(tmp_path / "o")])
    env = json.loads(capsys.readouterr().out)
    assert rc == 0
    if measured:
        assert calls == [("write", 5), ("measure", 0)] and env["warnings"] == []
    else:
        assert calls == [] and len(env["warnings"]) == 1 and "not an sm_90 GPU" in env["warnings"][0]
        assert any("not an sm_90 GPU" in n for n in env["result"]["notes"])


def test_top_folder_proofs_get_the_whole_time_limit(monkeypatch, tmp_path):
    """`--time-limit` reaches each --top folder's proofs uncapped (a refused folder says "raise --time-limit")."""
    import synth.cli_search as search_cli
    from synth.cli import main

    seen = []

    def fake_write(res, base, *, k, time_limit, **kw):
        seen.append(time_limit)
        return []

    monkeypatch.setattr(search_cli, "write_candidates", fake_write)
    rc = main(["search", "gemm", "--M", "256", "--N", "256", "--K", "256", "--time-limit", "75", "--top", "1",
               "--no-sass", "--out", str(tmp_path / "o"), "--json"])
    assert rc == 0 and seen == [75.0]

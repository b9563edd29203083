"""Stream-K (``stream_k: true``): the problem key, the decomposition, the kernel, and the kernel on the emulator.

What a user sees: a problem with ``stream_k`` loads (or fails at the key, with a fix); its kernel
computes the same C as numpy for any grid size up to the k-tile iterations, ragged shapes and every
order the CTAs may finish in, bit for bit the same C in every order (and the unsplit kernel's bits
when every CTA gets whole tiles); the tickets are left zeroed; a grid the kernel cannot serve is
refused with C untouched; and a kernel whose protocol is broken fails on the emulator.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gemm_fixtures import NEEDS_GXX, NVCC, emitted_kernel, emulate_emitted, gemm_doc, program_for
from synth.emit import streamk
from synth.emit.cuda import emit_kernel, kernel_info
from synth.errors import SynthError
from synth.gemm import GemmConfig, expand_gemm
from synth.load import load_problem_text

needs_gxx = NEEDS_GXX

DOC = gemm_doc("stream_k: true")


def _kernel(stream_k: bool = True, **kw):
    return emitted_kernel(stream_k=stream_k, **kw)


# ---------------------------------------------------------------------------
# the problem key


def test_stream_k_loads_and_names_the_problem():
    p = load_problem_text(DOC, "sk.yaml")
    assert p.gemm.stream_k and p.loop.min_trip_count == 1
    assert "-streamk-" in load_problem_text(DOC.replace("name: sk\n", ""), "sk.yaml").name
    assert not load_problem_text(DOC.replace("stream_k: true", "stream_k: false"), "sk.yaml").gemm.stream_k


@pytest.mark.parametrize("edit, line, words", [
    (("stream_k: true", "stream_k: 1"), 7, "true or false"),
    (("stream_k: true", "stream_k: yes please"), 7, "true or false"),
    (("stream_k: true", "stream_k: true\nsplit_k: 2"), 7, "not both"),
    (("stream_k: true", "stream_k: true\nmin_k_tiles: 2"), 8, "above the maximum 1"),
])
def test_bad_stream_k_fails_at_the_key(edit, line, words):
    with pytest.raises(SynthError) as e:
        load_problem_text(DOC.replace(*edit), "sk.yaml")
    assert e.value.loc.line == line and words in str(e.value), str(e.value)
    assert e.value.fix


def test_hopper_main_loop_refuses_stream_k():
    doc = DOC.replace("arch: sm_80", "arch: sm_90").replace("BK: 32", "BK: 64").replace("warps: 4\n", "")
    with pytest.raises(SynthError) as e:
        load_problem_text(doc, "sk.yaml")
    assert e.value.loc.line == 6 and "cp.async main loop only" in str(e.value)
    assert load_problem_text(doc.replace("stream_k: true", "stream_k: false"), "sk.yaml").split_k == 1


def test_a_fixed_trip_count_is_refused():
    with pytest.raises(SynthError) as e:
        expand_gemm(GemmConfig(M=256, N=256, K=1024, BM=64, BN=64, BK=64, stages=3, stream_k=True))
    assert "every trip count from 1" in str(e.value)


# ---------------------------------------------------------------------------
# the decomposition (the Python statement of what the kernel computes)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tiles=st.integers(1, 40), ktiles=st.integers(1, 40), data=st.data())
def test_every_iteration_runs_once_and_contributors_meet_in_k_order(tiles, ktiles, data):
    iters = tiles * ktiles
    G = data.draw(st.integers(1, iters))
    ranges = [streamk.cta_range(c, iters, G) for c in range(G)]
    assert ranges[0][0] == 0 and ranges[-1][1] == iters and all(b > a for a, b in ranges)
    assert all(r[1] == q[0] for r, q in zip(ranges, ranges[1:]))
    slots = set()
    for t in range(tiles):
        first, n = streamk.contributors(t, ktiles, iters, G)
        touching = [c for c, (a, b) in enumerate(ranges) if a < (t + 1) * ktiles and b > t * ktiles]
        assert touching == list(range(first, first + n))
        if n > 1:  # a partial tile: each contributor's slot is its own, never another tile's
            for z in range(n):
                s = streamk.slot(first + z, z)
                assert s not in slots and 0 <= s < 2 * G
                slots.add(s)
    assert len(slots) * 4 <= streamk.workspace_floats(2, 2, G)


def test_grid_and_buffers():
    assert streamk.grid_ctas(2048, 2048, 2048, 128, 128, 32, sms=108, per_sm=2) == 216
    assert streamk.grid_ctas(64, 64, 64, 64, 64, 32, sms=108, per_sm=2) == 2  # one tile of 2 k-tiles
    assert streamk.ticket_count(130, 200, 128, 128) == 2 * 2 * 2
    # A100, 128x128x32 w4 s4: 228 registers, 64 KiB + staging: two CTAs per SM (shared memory binds)
    assert streamk.resident_ctas(128, 228, 65536, sm_smem=164 * 1024, sm_registers=65536, sm_threads=2048,
                                 sm_ctas=32) == 2
    assert streamk.resident_ctas(256, 255, 1024, sm_smem=164 * 1024, sm_registers=65536, sm_threads=2048,
                                 sm_ctas=32) == 1  # registers bind


# ---------------------------------------------------------------------------
# the kernel text


def test_stream_k_kernel_takes_the_buffers_and_a_1d_grid():
    p, s, prog, text = _kernel()
    assert "float beta, float* workspace, unsigned* tickets, int* status)" in text
    assert "#define SYNTH_STREAM_K 1" in text and "#define SYNTH_SPLIT_K 1" in text
    assert kernel_info(p, s, prog).grid == (64, 1, 1)
    *_, plain = _kernel(False)
    assert "#define SYNTH_STREAM_K 0" in plain and "sk_it" not in plain


@pytest.mark.skipif(NVCC is None, reason="nvcc is needed to compile the kernel")
@pytest.mark.parametrize("BM, BN, BK, warps", [(128, 128, 32, 4), (128, 256, 64, 8)])
def test_no_spills_and_the_main_loop_keeps_its_sass(BM, BN, BK, warps):
    # the segment loop around the pipeline must cost the main loop nothing: ptxas spills nothing (the thread's
    # indices are read again in each segment), and the loop's SASS is the unsplit kernel's (128x128: the same
    # instructions; 128x256: at most one more uniform instruction)
    from synth.emit.sass import compile_cuda, loop_stats, main_loop, parse_sass

    stats = []
    for stream_k in (False, True):
        p = expand_gemm(GemmConfig(M=2048, N=2048, K=2048, BM=BM, BN=BN, BK=BK, warps=warps, stages=3,
                                   stream_k=stream_k), min_ktiles=1)
        s, prog = program_for(p)
        comp = compile_cuda(emit_kernel(p, s, prog), "sm_80")
        assert comp.spill_stores == comp.spill_loads == 0, comp.log
        stats.append(loop_stats(main_loop(parse_sass(comp.sass)), BM * BN * BK // (warps * 2048)))
    unsplit, streamed = stats
    assert streamed.hmma == unsplit.hmma and streamed.ldsm == unsplit.ldsm and streamed.ldgsts == unsplit.ldgsts
    assert streamed.bar_sync == unsplit.bar_sync and streamed.depbar == unsplit.depbar
    assert unsplit.instructions <= streamed.instructions <= unsplit.instructions + (BN == 256)


def test_exports_say_the_loop_is_one_segment():
    from synth.emit.mlir import mlir_pipelined_loop
    from synth.emit.tvm import tvm_annotations

    p, s, _, _ = _kernel()
    for text in (tvm_annotations(p, s), mlir_pipelined_loop(p, s)):
        assert "stream-K" in text


# ---------------------------------------------------------------------------
# on the emulator

MUTANTS = {  # name: (text, its replacement, the grid and block order that show it)
    "release fence dropped": ("synth_threadfence();  // release", "(void)0;  //", 7, "forward"),
    "acquire fence dropped": ("synth_threadfence();  // acquire", "(void)0;  //", 7, "forward"),
    "no wait for the count": ("while (synth_ld_acquire_u32(counters + 1) < (unsigned)sk_n - 1u) {",
                              "if (synth_ld_acquire_u32(counters + 1) < (unsigned)sk_n - 1u) {", 7, "reverse"),
    "a weaker wait": ("< (unsigned)sk_n - 1u) {", "< (unsigned)sk_n - 2u) {", 13, "reverse"),
    "counter not reset": ("counters[0] = 0u;", "", 7, "forward"),
    "a CTA stops after its first partial": ("1u);  // published", "1u); return;", 7, "forward"),
    "slots swapped": ("(sk_z == 0 ? 1 : 0)) * (BM * BN);", "(sk_z == 0 ? 0 : 1)) * (BM * BN);", 7, "forward"),
    "contributors miscounted": ("const int sk_first = (int)(((sk_tb + 1) * gridDim.x - 1) / sk_iters);",
                                "const int sk_first = (int)((sk_tb * gridDim.x) / sk_iters);", 7, "forward"),
    "a CTA starts one k-tile late": ("sk_iters / gridDim.x; sk_it < sk_end;)",
                                     "sk_iters / gridDim.x + (blockIdx.x > 0); sk_it < sk_end;)", 7, "forward"),
}


_emulate = emulate_emitted


@needs_gxx
def test_stream_k_kernel_is_right_and_the_same_bits_in_every_block_order():
    p, s, prog, text = _kernel()
    # 2 x 2 tiles of 10 k-tiles (296 = 9 k-tiles of 32 and a partial one) over 7 CTAs: 5 or 6 each
    runs = {order: _emulate(p, s, prog, text, 70, 126, 296, order=order, with_c=True, alpha=1.5, beta=-0.5,
                            ldc=128, ctas=7)
            for order in ("forward", "reverse", "shuffle:11")}
    for order, r in runs.items():
        assert r.clean and r.status == 0, (order, r.summary())
        assert r.stats["unordered_global"] == 0
    assert all(np.array_equal(runs["forward"].C, r.C) for r in runs.values())


@needs_gxx
@pytest.mark.parametrize("ctas", [1, 3, 4, 40])
def test_any_grid_up_to_the_iterations(ctas):
    # 4 tiles of 10 k-tiles: one CTA for all, tiles cut unevenly, one CTA per tile (whole tiles: the unsplit
    # kernel's bits), one CTA per iteration (every tile summed from 10 partials)
    p, s, prog, text = _kernel(stages=2)
    r = _emulate(p, s, prog, text, 65, 128, 296, ctas=ctas, order="reverse")
    assert r.clean and r.status == 0, r.summary()
    if ctas == 4:
        *_, plain = _kernel(False, stages=2)
        unsplit = _emulate(p, s, prog, plain, 65, 128, 296)
        assert np.array_equal(r.C, unsplit.C) and r.stats["atomics"] == 0


@needs_gxx
def test_a_grid_the_kernel_cannot_serve_is_refused_and_c_untouched():
    p, s, prog, text = _kernel()
    big = _emulate(p, s, prog, text, 64, 64, 64, ctas=3)  # one tile of 2 k-tiles: at most 2 CTAs
    assert big.status == 64 and big.nan_count == big.C.size


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_broken_protocol_fails_on_the_emulator(name):
    p, s, prog, text = _kernel()
    old, new, ctas, order = MUTANTS[name]
    assert old in text
    assert not _emulate(p, s, prog, text.replace(old, new), 70, 126, 296, ctas=ctas, order=order,
                        timeout=60).clean, name


def _solve_small(d, stream_k: bool = True) -> str:
    """A solved folder of a 70 x 90 x 200 problem with 64 x 64 tiles: stream-K, or else split_k: 2."""
    from synth.api import solve

    doc = DOC.replace("BM: 128, BN: 128", "BM: 64, BN: 64").replace("{M: 2048, N: 2048, K: 2048}",
                                                                     "{M: 70, N: 90, K: 200}")
    (d / "p.yaml").write_text(doc if stream_k else doc.replace("stream_k: true", "split_k: 2"))
    solve(str(d / "p.yaml"), out=str(d / "out"))
    return str(d / "out")


@pytest.fixture(scope="module")
def small_folders(tmp_path_factory):
    """``{True: stream-K folder, False: split-K folder}``, solved once for the tests that only read them."""
    return {sk: _solve_small(tmp_path_factory.mktemp(f"sk{int(sk)}"), sk) for sk in (True, False)}


@needs_gxx
def test_solved_folder_runs_through_the_python_api(small_folders, tmp_path):
    import shutil as sh

    import synth.kernel

    out = tmp_path / "out"
    sh.copytree(small_folders[True], out)
    assert "stream_k: true" in (out / "problem.yaml").read_text()
    kern = synth.kernel.load(str(out), backend="emulator")
    assert kern.facts.stream_k
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (70, 200)).astype(np.float16)
    B = rng.uniform(-1, 1, (90, 200)).astype(np.float16)
    Cin = rng.uniform(-1, 1, (70, 90)).astype(np.float32)
    C = kern(A, B, Cin, alpha=2.0, beta=0.5)
    assert np.allclose(C, 2.0 * (A.astype(np.float32) @ B.astype(np.float32).T) + 0.5 * Cin, atol=1e-3)
    text = (out / "kernel.cu").read_text()
    (out / "kernel.cu").write_text(text.replace("#define SYNTH_STREAM_K 1", "#define SYNTH_STREAM_K 0"))
    with pytest.raises(SynthError) as e:
        synth.kernel.load(str(out), backend="emulator")
    assert "kernel.cu changed since synth wrote it" in str(e.value)  # the manifest refuses any edit


def test_one_wave_on_a_device():
    # synth.kernel.device_ctas reads the device's limits and the compiled kernel's registers (pycuda's
    # names); an A100 and the 128x128x32 w4 s4 kernel (228 registers, 64 KiB + 1 KiB of shared memory per CTA)
    from types import SimpleNamespace

    import synth.kernel

    limits = {"MULTIPROCESSOR_COUNT": 108, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 164 * 1024,
              "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
              "MAX_BLOCKS_PER_MULTIPROCESSOR": 32}
    drv = SimpleNamespace(device_attribute=SimpleNamespace(**{k: k for k in limits}),
                          function_attribute=SimpleNamespace(NUM_REGS="NUM_REGS"))
    dev = SimpleNamespace(get_attribute=limits.__getitem__)
    fn = SimpleNamespace(get_attribute=lambda a: 228)
    facts = synth.kernel.KernelFacts("k", 128, 128, 32, 0, 128, 65536, stream_k=True)
    G = synth.kernel.device_ctas(drv, dev, fn, facts)
    assert G == 216
    launch = facts.launch(2048, 2048, 2048, G)
    assert launch.grid == (216, 1, 1) and launch.workspace_floats == 2 * 216 * 128 * 128 and launch.tickets == 512
    assert facts.launch(128, 128, 64, G).grid == (2, 1, 1)  # one tile of 2 k-tiles: at most 2 CTAs
    split = synth.kernel.KernelFacts("k", 128, 128, 32, 0, 128, 65536, split_k=3)
    assert split.launch(2048, 2048, 2048, G).grid == (16, 16, 3)
    assert synth.kernel.KernelFacts("k", 128, 128, 32, 0, 128, 65536).launch(200, 300, 64, G).buffers(
        list, list) == []


class _DeviceArray:
    """A fake pycuda device allocation: a numpy array the fake launch hands to the emulator."""

    def __init__(self, array):
        self.array = np.array(array, copy=True)


A100 = {"MULTIPROCESSOR_COUNT": 108, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 164 * 1024,
        "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
        "MAX_BLOCKS_PER_MULTIPROCESSOR": 32}


def _fake_pycuda(source: str):
    """``(drv, compiler, launches)``: the pycuda calls ``synth.kernel`` and ``synth run`` make, answered on the CPU
    (a launch runs ``source`` on the emulator; the device is an A100's limits), so the CUDA paths' argument lists,
    grids and buffers are checked without a GPU. ``launches`` records each launch's grid and argument count."""
    from types import SimpleNamespace

    from synth.emit.emulate import GEMM_KERNEL, Buf, compile_and_run

    launches = []

    def fn(*args, block, grid, shared):
        emu = []
        for i, a in enumerate(args):
            if isinstance(a, _DeviceArray):
                emu.append(Buf(f"b{i}", a.array, out=True))
            elif isinstance(a, np.intp):
                assert int(a) == 0
                emu.append(None)
            else:
                emu.append(int(a) if isinstance(a, np.int32) else float(a))
        run = compile_and_run(source, GEMM_KERNEL, emu, grid=grid, block=block, smem_bytes=shared)
        assert not run.errors, run.errors
        for i, a in enumerate(args):
            if isinstance(a, _DeviceArray):
                a.array[...] = run.outputs[f"b{i}"]
        launches.append((grid, len(args)))

    fn.get_attribute = lambda attr: 128
    fn.set_attribute = lambda attr, value: None
    device = SimpleNamespace(get_attribute=A100.__getitem__, name=lambda: "fake A100",
                             compute_capability=lambda: (8, 0),
                             make_context=lambda: SimpleNamespace(push=lambda: None, pop=lambda: None))
    event = SimpleNamespace(record=lambda: None, synchronize=lambda: None, time_since=lambda other: 1.0)
    drv = SimpleNamespace(
        init=lambda: None, Event=lambda: event,
        to_device=_DeviceArray, mem_alloc=lambda n: _DeviceArray(np.full(n // 4, np.nan, np.float32)),
        memcpy_dtoh=lambda host, dev: host.__setitem__(..., dev.array.view(host.dtype).reshape(host.shape)),
        Context=SimpleNamespace(synchronize=lambda: None, get_device=lambda: device),
        module_from_buffer=lambda cubin: SimpleNamespace(get_function=lambda name: fn),
        device_attribute=SimpleNamespace(**{k: k for k in A100}),
        function_attribute=SimpleNamespace(NUM_REGS="NUM_REGS", MAX_DYNAMIC_SHARED_SIZE_BYTES="MAX_DYN"))
    drv.Device = type("Device", (), {"count": staticmethod(lambda: 1), "__new__": lambda cls, i: device})  # Device(0)
    compiler = SimpleNamespace(compile=lambda text, **kw: text)
    return drv, compiler, fn, launches


@needs_gxx
@pytest.mark.parametrize("stream_k", [True, False])
def test_the_cuda_backend_launches_what_the_kernel_takes(small_folders, stream_k):
    # Kernel._run_gpu with pycuda's calls answered by the emulator: the grid (one wave of 108 SMs x 16
    # resident CTAs, capped at the 28 k-tile iterations for stream-K; the tile grid otherwise), the buffers and
    # the argument order the kernel takes
    from types import SimpleNamespace

    import synth.kernel

    kern = synth.kernel.load(small_folders[stream_k], backend="emulator")
    drv, _, fn, launches = _fake_pycuda(kern.source)
    kern.backend = "cuda"
    kern._gpu = (drv, fn, SimpleNamespace(push=lambda: None, pop=lambda: None))
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (70, 200)).astype(np.float16)
    B = rng.uniform(-1, 1, (90, 200)).astype(np.float16)
    C = kern(A, B)
    assert np.allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, atol=1e-3)
    assert launches == [((28, 1, 1) if stream_k else (2, 2, 2), 15)]


@needs_gxx
def test_synth_run_launches_a_stream_k_folder(small_folders, monkeypatch):
    # synth run (run_output) with pycuda answered on the CPU: one checking launch and one timed, each a
    # one-wave grid capped at the iterations, and the check against numpy passes
    import sys

    from synth.run import run_output

    out = small_folders[True]
    drv, compiler, _, launches = _fake_pycuda(open(f"{out}/kernel.cu").read())
    monkeypatch.setitem(sys.modules, "pycuda", type(sys)("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.setitem(sys.modules, "pycuda.compiler", compiler)
    sys.modules["pycuda"].driver, sys.modules["pycuda"].compiler = drv, compiler
    rep = run_output(out, repeats=1)
    assert rep.ok and rep.device == "fake A100" and rep.registers == 128
    assert launches == [((28, 1, 1), 15)] * 2

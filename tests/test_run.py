"""synth.run and the GPU path of synth.kernel: both GPU libraries, the one launch description, no-GPU refusals.

Without a GPU, the CUDA Python path is checked with a fake ``cuda.bindings.driver``: every call the runner
makes is answered on the CPU, and a launch runs the launched kernel.cu on synth's emulator with the
arguments decoded from the raw ``kernelParams`` array by the kernel's own C signature (not by synth's
launch description), so a wrong argument order, type, grid, block, shared-memory size or tensor map
computes a wrong C or fails here.
"""

from __future__ import annotations

import ctypes
import re
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from gemm_fixtures import NEEDS_GXX, gemm_problem
from synth.errors import SynthError
from synth.run import NO_GPU_FIX, RunReport, run_output

import synth.kernel
from synth.emit.sm90 import runner


def _gpu_reason() -> str | None:
    """None when a CUDA GPU is usable (CUDA Python or pycuda), else why not."""
    ok, why = synth.kernel.gpu_ready()
    return None if ok else why


GPU_REASON = _gpu_reason()


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    from synth.pipeline import run, write_outputs

    p = gemm_problem(M=1000, N=1000, K=512, stages=3, warps=8)
    res = run(p, verify=False, pinned_only=True)
    assert res.kernel is not None
    out = tmp_path_factory.mktemp("run") / p.name
    write_outputs(res, str(out))
    return str(out)


def _solve(d, doc: str) -> str:
    from synth.api import solve

    (d / "p.yaml").write_text(doc)
    solve(str(d / "p.yaml"), out=str(d / "out"), time_limit=120, verify=False)  # the proof is not under test
    return str(d / "out")


SMALL = ("name: small\nkind: gemm\nshape: {M: 70, N: 90, K: 200}\ntile: {BM: 64, BN: 64, BK: 32}\n"
         "warps: 4\nstages: 3\narch: sm_80\n")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Small solved folders: sm_80 plain, split-K 2 and stream-K, and a Hopper 128x64 f16 one."""
    return {
        "plain": _solve(tmp_path_factory.mktemp("plain"), SMALL),
        "split": _solve(tmp_path_factory.mktemp("split"), SMALL + "split_k: 2\n"),
        "stream": _solve(tmp_path_factory.mktemp("stream"), SMALL + "stream_k: true\n"),
        "hopper": _solve(tmp_path_factory.mktemp("hopper"),
                         "name: hop\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 128, BN: 64, BK: 64}\n"
                         "arch: sm_90\nmainloop: tma_wgmma\nstages: 2\nk_pipe_mmas: 1\n"),
    }


def test_report_renders():
    r = RunReport("g", "GPU", 4096, 4096, 4096, True, 1e-3, 1.0, 137.4, 312.0, 0.8, 171.8, "torch", 160, 32768)
    text = r.render()
    assert "OK" in text and "137.4 TFLOP/s" in text and "44% of the 312" in text
    assert "synth reaches 80%" in text
    assert r.fraction_of_cublas == pytest.approx(0.8, rel=1e-3)


@pytest.mark.skipif(GPU_REASON is None, reason="a GPU is available; the no-GPU path is not reachable")
def test_without_gpu_run_is_refused_with_a_fix(out_dir):
    with pytest.raises(SynthError) as ei:
        run_output(out_dir, repeats=1)
    assert ei.value.msg.startswith("no CUDA GPU available: ")
    assert ei.value.fix == NO_GPU_FIX


@pytest.mark.gpu
@pytest.mark.skipif(GPU_REASON is not None, reason=f"no CUDA GPU: {GPU_REASON}")
def test_runs_and_matches_numpy(out_dir):
    rep = run_output(out_dir, repeats=5)
    print(rep.render())
    assert rep.ok, rep.render()
    assert rep.tflops > 0 and rep.ms > 0
    assert rep.registers is not None and rep.registers <= 255


def test_an_unknown_gpu_library_is_refused(monkeypatch):
    monkeypatch.setenv("SYNTH_GPU_BACKEND", "opencl")
    with pytest.raises(SynthError) as e:
        synth.kernel.gpu_library()
    assert "SYNTH_GPU_BACKEND='opencl'" in e.value.msg and "cuda-python, pycuda" in e.value.fix
    assert synth.kernel.gpu_ready()[0] is False


# --- a fake CUDA Python driver: the calls answered on the CPU, launches run on the emulator -------------

_CTYPE = {"half": np.float16, "float": np.float32, "int": np.int32, "unsigned": np.uint32,
          "uint32_t": np.uint32, "unsigned int": np.uint32}


def _signature(source: str, name: str) -> list[tuple[str, str]]:
    """``[(C type, parameter name)]`` of ``name``'s definition in ``source`` (pointers keep their ``*``)."""
    m = re.search(rf"\b{name}\(([^)]*)\)\s*{{", source)
    assert m, name
    out = []
    for p in m.group(1).split(","):
        words = [w for w in p.replace("*", " * ").split() if w not in ("const", "__restrict__", "__grid_constant__")]
        out.append((" ".join(words[:-1]).replace(" *", "*"), words[-1]))
    return out


class FakeDriver:
    """The ``cuda.bindings.driver`` calls synth makes, on an H100's limits (132 SMs). ``images`` that are
    ``b"bad"`` fail to load, as an image for another GPU would; every launch is recorded."""

    H100 = {"MULTIPROCESSOR_COUNT": 132, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 228 * 1024,
            "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
            "MAX_BLOCKS_PER_MULTIPROCESSOR": 32, "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0}

    def __init__(self, source: str | None, sources=None, sms: int = 132) -> None:
        self.source = source
        self.sources = sources or {}
        """Image bytes -> kernel.cu text (a pack's cubins); an image not listed runs ``source``."""
        self.H100 = dict(self.H100, MULTIPROCESSOR_COUNT=sms)
        self.modules: list[str] = []
        self.fns: dict[int, tuple[str, str]] = {}
        self.emulated: set[str] = set()
        self.mem: dict[int, np.ndarray] = {}
        self.next = 1 << 32
        self.launches: list[dict] = []
        self.tmaps: dict[int, dict] = {}
        self.loaded: list[bytes] = []
        names = list(self.H100) + ["CLOCK_RATE"]
        self.CUdevice_attribute = SimpleNamespace(**{f"CU_DEVICE_ATTRIBUTE_{k}": k for k in names})
        self.CUfunction_attribute = SimpleNamespace(CU_FUNC_ATTRIBUTE_NUM_REGS="regs",
                                                    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="smem")
        self.CUtensorMapDataType = SimpleNamespace(CU_TENSOR_MAP_DATA_TYPE_FLOAT16="f16",
                                                   CU_TENSOR_MAP_DATA_TYPE_BFLOAT16="bf16",
                                                   CU_TENSOR_MAP_DATA_TYPE_FLOAT32="f32")
        # (the same names stand for A's and B's element types and C's)
        self.CUtensorMapInterleave = SimpleNamespace(CU_TENSOR_MAP_INTERLEAVE_NONE="none")
        self.CUtensorMapSwizzle = SimpleNamespace(CU_TENSOR_MAP_SWIZZLE_128B="128B", CU_TENSOR_MAP_SWIZZLE_NONE="none")
        self.CUtensorMapL2promotion = SimpleNamespace(CU_TENSOR_MAP_L2_PROMOTION_L2_128B="128B",
                                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B="256B",
                                                      CU_TENSOR_MAP_L2_PROMOTION_NONE="none")
        self.CUtensorMapFloatOOBfill = SimpleNamespace(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE="zeros")
        self._keep = []

    # device and context
    def cuInit(self, flags):
        return (0,)

    def cuDriverGetVersion(self):
        return (0, 12080)

    def cuDeviceGetCount(self):
        return (0, 1)

    def cuDeviceGet(self, i):
        return (0, i)

    def cuDeviceGetAttribute(self, attr, dev):
        return (0, self.H100.get(attr, 1980000))

    def cuDeviceGetName(self, n, dev):
        return (0, b"fake H100\0" + bytes(n - 10))

    def cuDevicePrimaryCtxRetain(self, dev):
        return (0, "ctx")

    def cuDevicePrimaryCtxRelease(self, dev):
        return (0,)

    def cuCtxSetCurrent(self, ctx):
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    # modules
    def cuModuleLoadData(self, image):
        if bytes(image) == b"bad":
            return (218, None)  # CUDA_ERROR_INVALID_PTX / no image for this GPU
        self.loaded.append(bytes(image))
        self.modules.append(self.sources.get(bytes(image), self.source))
        return (0, len(self.modules) - 1)

    def cuModuleUnload(self, mod):
        return (0,)

    def cuModuleGetFunction(self, mod, name):
        fn = 1000 + len(self.fns)
        self.fns[fn] = (self.modules[mod], name.decode())
        return (0, fn)

    def cuFuncSetAttribute(self, fn, attr, value):
        self.smem_limit = value
        return (0,)

    def cuFuncGetAttribute(self, attr, fn):
        return (0, 128)

    # memory
    def cuMemAlloc(self, n):
        addr = self.next
        self.next += (n + 255) // 256 * 256 + 256
        self.mem[addr] = np.full(n, 0xFF, np.uint8)  # uninitialized memory: NaN patterns
        return (0, addr)

    def cuMemFree(self, p):
        self.mem.pop(int(p))
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        ctypes.memmove(self.mem[int(dst)].ctypes.data, src, n)
        return (0,)

    def cuMemcpyDtoH(self, dst, src, n):
        ctypes.memmove(dst, self.mem[int(src)].ctypes.data, n)
        return (0,)

    def cuMemsetD8(self, p, v, n):
        self.mem[int(p)][:n] = v
        return (0,)

    # events
    def cuEventCreate(self, flags):
        return (0, "event")

    def cuEventRecord(self, e, stream):
        return (0,)

    def cuEventSynchronize(self, e):
        return (0,)

    def cuEventElapsedTime(self, a, b):
        return (0, 0.5)

    def cuEventDestroy(self, e):
        return (0,)

    # tensor maps: the 128 bytes hold a key to what was encoded
    def cuTensorMapEncodeTiled(self, dtype, rank, addr, dims, strides, box, elem, interleave, swizzle, l2, oob):
        key = len(self.tmaps) + 1
        self.tmaps[key] = dict(dtype=dtype, rank=rank, addr=int(addr), dims=list(dims), strides=list(strides),
                               box=list(box), elem=list(elem), interleave=interleave, swizzle=swizzle, oob=oob)
        raw = ctypes.create_string_buffer(key.to_bytes(8, "little") + bytes(120), 128)
        self._keep.append(raw)
        return (0, SimpleNamespace(getPtr=lambda: ctypes.addressof(raw)))

    def _array(self, ptr: int, dtype) -> np.ndarray:
        return self.mem[ptr].view(dtype)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        source, kernel = self.fns[int(fn)]
        sig = _signature(source, kernel)
        slots = (ctypes.c_void_p * len(sig)).from_address(params)
        vals = {}
        for (ctype, name), at in zip(sig, slots):
            if ctype.endswith("*"):
                vals[name] = (ctype[:-1], ctypes.c_uint64.from_address(at).value)
            elif ctype == "CUtensorMap":  # a zeroed map (key 0): one the host did not encode
                key = int.from_bytes(ctypes.string_at(at, 8), "little")
                vals[name] = self.tmaps[key] if key else None
            elif ctype == "int":
                vals[name] = ctypes.c_int32.from_address(at).value
            elif ctype == "float":
                vals[name] = ctypes.c_float.from_address(at).value
            else:
                raise AssertionError(f"parameter type {ctype}")
        self.launches.append(dict(grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, vals=vals))
        key = repr((fn, gx, gy, gz, bx, by, bz, smem, sorted(vals.items(), key=str)))
        if key in self.emulated:  # a timed repeat of a launch already run: the kernel writes the same C
            return (0,)
        self.emulated.add(key)
        if kernel == "synth_gemm":
            self._run_sm80(source, sig, vals, (gx, gy, gz), (bx, by, bz), smem)
        elif kernel == "synth_attention_sm90":
            self._run_attention(source, vals, (gx, gy, gz), (bx, by, bz), smem)
        else:
            self._run_sm90(source, vals)
        return (0,)

    def _run_attention(self, source, vals, grid, block, smem):
        """The FlashAttention-forward kernel: Q, K and V read back from their tensor maps as the emulator's harness
        builds them (2-D over [B H S, d], box {64, BM} / {64, BN}, 128-byte swizzle, zero fill), run on the emulator
        with the launch's lengths and scale; the launch's grid, block and shared memory must be kernel.cu's."""
        from synth.emit.sm90.attention_runtime import run_attention_emulated

        facts = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define SYNTH_ATTN_(\w+) (\d+)", source)}
        d, Sq, Sk = facts["D"], vals["seqlen_q"], vals["seqlen_k"]
        dtype = "bf16" if facts["BF16"] else "f16"
        arrays = []
        for name, box, S in (("tmQ", facts["BM"], Sq), ("tmK", facts["BN"], Sk), ("tmV", facts["BN"], Sk)):
            t = vals[name]
            assert t["rank"] == 2 and t["dims"][0] == d and t["dims"][1] % S == 0 and t["strides"] == [2 * d], t
            assert t["box"] == [64, box] and t["dtype"] == dtype, t
            assert (t["swizzle"], t["oob"], t["interleave"], t["elem"]) == ("128B", "zeros", "none", [1, 1])
            arrays.append(self._array(t["addr"], np.uint16)[:t["dims"][1] * d].reshape(1, t["dims"][1] // S, S, d))
        BH = arrays[0].shape[1]
        assert grid == (-(-Sq // facts["BM"]), BH, 1) and block == (facts["THREADS"], 1, 1), (grid, block)
        assert smem == facts["SMEM_BYTES"] and self.smem_limit >= smem
        O, info = run_attention_emulated(source, *arrays, scale=vals["softmax_scale"])
        assert info["ok"] and not info["kind"], info
        self._array(vals["Out"][1], np.float32)[:O.size] = O.reshape(-1)

    def _run_sm80(self, source, sig, vals, grid, block, smem):
        from synth.emit.emulate import Buf, compile_and_run

        args = []
        for ctype, name in sig:
            v = vals[name]
            if isinstance(v, tuple):
                args.append(None if v[1] == 0 else Buf(name, self._array(v[1], _CTYPE[v[0]]).copy(), out=True))
            else:
                args.append(v)
        run = compile_and_run(source, "synth_gemm", args, grid=grid, block=block, smem_bytes=smem)
        assert not run.errors, run.errors
        for a, (ctype, name) in zip(args, sig):
            if a is not None and not isinstance(a, (int, float)):
                self._array(vals[name][1], _CTYPE[ctype[:-1]])[...] = run.outputs[name]

    def _run_sm90(self, source, vals):
        from synth.emit.sm90.emulate import run_emulated

        M, N, K, ldc = vals["M"], vals["N"], vals["K"], vals["ldc"]
        ops = []
        for t, rows in ((vals["tmA"], M), (vals["tmB"], N)):
            assert t["dims"] == [K, rows] and t["strides"] == [2 * K] and t["box"][0] == 64 and t["rank"] == 2
            assert (t["swizzle"], t["oob"], t["interleave"], t["elem"]) == ("128B", "zeros", "none", [1, 1])
            ops.append(self._array(t["addr"], np.uint16)[:rows * K].reshape(rows, K))
        out_bytes = 4
        if "tmC" in vals:
            out_bytes = int(re.search(r"#define SYNTH_OUT_BYTES (\d+)", source).group(1))
        if "tmC" in vals and vals["tmC"] is None:  # C not TMA-aligned: no map, the kernel stores from registers
            assert (vals["C"][1] | out_bytes * ldc) % 16, "a zeroed C map for a TMA-aligned C"
        elif "tmC" in vals:  # a TMA-store epilogue: C's map as the emulator's harness builds it (no swizzle)
            t, cols = vals["tmC"], int(re.search(r"#define SYNTH_TMA_STORE (\d+)", source).group(1))
            out = "f32" if out_bytes == 4 else "bf16" if "SYNTH_OUT_BF16" in source else "f16"
            assert t["dims"] == [N, M] and t["strides"] == [out_bytes * ldc] and t["box"] == [cols, 64], t
            assert (t["dtype"], t["swizzle"], t["interleave"], t["elem"]) == (out, "none", "none", [1, 1])
            assert t["addr"] == vals["C"][1]
        cin = vals["C_in"][1]
        C_in = self._array(cin, np.float32)[:M * ldc].reshape(M, ldc) if cin else None
        out, info = run_emulated(source, ops[0], ops[1], C_in, alpha=vals["alpha"], beta=vals["beta"], ldc=ldc)
        assert info.get("ok"), info
        if out_bytes == 4:
            self._array(vals["C"][1], np.float32)[:M * ldc] = out.reshape(-1)
        else:  # the emulator widened C to f32; the device buffer holds the f16 / bf16 bits
            from synth.emit.sm90.emulate import bf16_bits

            bits = bf16_bits(out) if "SYNTH_OUT_BF16" in source else out.astype(np.float16).view(np.uint16)
            self._array(vals["C"][1], np.uint16)[:M * ldc] = bits.reshape(-1)


@pytest.fixture
def fake(monkeypatch):
    """``install(source) -> FakeDriver``: the fake answers ``synth.emit.sm90.runner.driver()``."""
    def install(source: str) -> FakeDriver:
        drv = FakeDriver(source)
        monkeypatch.setattr(runner, "driver", lambda: drv)
        monkeypatch.setenv("SYNTH_GPU_BACKEND", "cuda-python")
        return drv

    return install


def _ab(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (M, K)).astype(np.float16), rng.uniform(-1, 1, (N, K)).astype(np.float16))


@NEEDS_GXX
@pytest.mark.parametrize("kind, grid", [("plain", (2, 2, 1)), ("split", (2, 2, 2)), ("stream", (28, 1, 1))])
def test_the_cuda_python_library_launches_what_the_kernel_takes(folders, fake, kind, grid):
    # synth.kernel on the cuda backend through CUDA Python: the precompiled image is tried first (one that
    # does not load is skipped), the grid is the tile grid (split-K: z = 2) or one wave of 132 SMs capped at
    # the 28 k-tile iterations (stream-K), and the result matches numpy, C_in and alpha/beta included
    src = open(f"{folders[kind]}/kernel.cu").read()
    drv = fake(src)
    kern = synth.kernel.load(folders[kind], backend="cuda", images=[("bad image", b"bad"), ("sm_90 cubin", b"CUBIN")])
    assert kern.backend == "cuda"
    A, B = _ab(70, 90, 200, seed=5)
    Cin = np.random.default_rng(6).uniform(-1, 1, (70, 90)).astype(np.float32)
    C = kern(A, B, Cin, alpha=2.0, beta=0.5)
    assert np.allclose(C, 2.0 * (A.astype(np.float32) @ B.astype(np.float32).T) + 0.5 * Cin, atol=1e-3)
    (launch,) = drv.launches
    assert drv.loaded == [b"CUBIN"]
    facts = kern.facts
    assert launch["grid"] == grid and launch["block"] == (facts.threads, 1, 1) and launch["smem"] == facts.smem_bytes
    assert launch["vals"]["ldc"] == 92 and launch["vals"]["lda"] == 200
    assert not drv.mem  # every buffer freed


@NEEDS_GXX
def test_synth_run_through_cuda_python(folders, fake, monkeypatch):
    drv = fake(open(f"{folders['stream']}/kernel.cu").read())
    # no image given: nvcc compiles for the device (stood in for: the fake loads whatever it is given)
    monkeypatch.setattr(runner, "nvcc_image", lambda text, arch, **kw: b"NVCC " + arch.encode())
    rep = run_output(folders["stream"], repeats=3)
    assert rep.ok and rep.device == "fake H100" and rep.registers == 128 and rep.ms == 0.5
    assert drv.loaded == [b"NVCC sm_90"]  # the sm_80 kernel compiled for the device's own arch
    assert [x["grid"] for x in drv.launches] == [(28, 1, 1)] * 4  # one checked launch, three timed


@NEEDS_GXX
def test_the_hopper_kernel_through_cuda_python(folders, fake):
    # HopperKernel on the cuda backend: tensor maps as the kernel reads them (dims {K, rows}, 16-byte row
    # stride, box {64, BM}, 128-byte swizzle, zero fill), arguments in the kernel's order, sm_90a image
    src = open(f"{folders['hopper']}/kernel.cu").read()
    drv = fake(src)
    kern = synth.kernel.load(folders["hopper"], backend="cuda", images=[("sm_90a cubin", b"CUBIN")])
    assert isinstance(kern, synth.kernel.HopperKernel) and kern.backend == "cuda"
    A, B = _ab(70, 130, 136, seed=7)
    C = kern(A, B)
    assert np.allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, atol=1e-2)
    (launch,) = drv.launches
    cfg = kern.config
    assert launch["grid"] == (3, 1, 1) and launch["block"] == (cfg.threads, 1, 1) and launch["smem"] == cfg.smem_bytes
    assert [t["box"] for t in drv.tmaps.values()] == [[64, cfg.bm], [64, cfg.bn]]
    assert not drv.mem


@NEEDS_GXX
@pytest.mark.parametrize("out_dtype", ["f32", "f16"])
def test_the_tma_store_kernel_through_cuda_python(tmp_path, fake, out_dtype):
    # a TMA-store epilogue: a third tensor map (C in out_dtype, row stride N elements, box 64 rows x 32 columns,
    # no swizzle) after B's, in the kernel's argument order; an f16 C comes back as float32 values of f16
    out = _solve(tmp_path, "name: gs\nkind: gemm\nshape: {M: 256, N: 256, K: 256}\ntile: {BM: 128, BN: 64, BK: 64}\n"
                           f"arch: sm_90\nmainloop: tma_wgmma\nepilogue: tma_store\nstages: 3\nout_dtype: {out_dtype}\n")
    drv = fake(open(f"{out}/kernel.cu").read())
    kern = synth.kernel.load(out, backend="cuda", images=[("sm_90a cubin", b"CUBIN")])
    A, B = _ab(70, 136, 136, seed=8)
    C = kern(A, B)
    assert C.dtype == np.float32 and np.allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, atol=2e-2)
    if out_dtype == "f16":
        assert np.array_equal(C, C.astype(np.float16).astype(np.float32))
    assert [t["box"] for t in drv.tmaps.values()] == [[64, 128], [64, 64], [32, 64]]
    # N = 137 (f32: 548-byte rows; f16: 274): no C map is encoded (a zeroed one is passed), the kernel stores C
    # from registers for that launch
    A, B = _ab(70, 137, 136, seed=9)
    C = kern(A, B)
    assert C.shape == (70, 137) and np.allclose(C, A.astype(np.float32) @ B.astype(np.float32).T, atol=2e-2)
    if out_dtype == "f16":
        assert np.array_equal(C, C.astype(np.float16).astype(np.float32))
    assert len(drv.tmaps) == 5 and drv.launches[-1]["vals"]["tmC"] is None
    assert not drv.mem


@NEEDS_GXX
def test_no_image_and_no_nvcc_is_a_located_error(folders, fake, monkeypatch):
    fake(open(f"{folders['plain']}/kernel.cu").read())
    monkeypatch.setattr(runner, "tool", lambda name: None)
    kern = synth.kernel.load(folders["plain"], backend="cuda", images=[("old cubin", b"bad")])
    A, B = _ab(64, 64, 64)
    with pytest.raises(synth.kernel.KernelError) as e:
        kern(A, B)
    assert "old cubin" in e.value.msg and "nvcc is not on PATH" in e.value.msg and "docs/gpu.md" in e.value.fix


def test_a_copied_folder_keeps_working(folders, tmp_path):
    # the manifest travels with the folder: a copy loads (what gpu_check's pack relies on)
    shutil.copytree(folders["plain"], tmp_path / "copy")
    assert synth.kernel.load(str(tmp_path / "copy"), backend="emulator").facts.BM == 64

"""The emulators' layouts checked against NVIDIA's own code (docs/emulator.md, "Checked against CuTe").

``tests/cute/cute_layouts.cpp`` is compiled once per session with g++ against the CuTe/CUTLASS headers of
the ``nvidia-cutlass`` wheel and the CUDA toolkit's headers (host code only, no GPU) and prints, as JSON,
what CuTe says: the ``mma.sync.m16n8k16`` and ``ldmatrix.x4`` fragment layouts, the 128-byte swizzle, the
wgmma accumulator layout, the GmmaDescriptor bitfields and the descriptors and element addresses of the
CollectiveBuilder's shared-memory tiles, the register-A wgmma's A fragment and the MN-major 128-byte-swizzle B
(descriptors and addresses) the attention kernel's P V reads, and the arguments ``make_tma_copy`` passes to
``cuTensorMapEncodeTiled``. Each test sets that beside what synth actually executes: the sm_80 emulator
running probe kernels (``tests/cute/sm80_probe.cu``), the sm_90a emulator's own layout functions
(``tests/cute/emu_sm90_probe.cpp`` calls the functions its wgmma and TMA use), the descriptors an emitted
Hopper kernel issues on the emulator, the swizzle an emitted sm_80 kernel computes, and the tensor maps
the GPU runner encodes. Skipped, with the reason, where g++, the CuTe headers or the CUDA headers are
missing.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest

from conftest import gxx_build
from gemm_fixtures import emitted_kernel
from synth.emit.emulate import Buf, compile_and_run
from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.emulate import run_emulated
from synth.emit.sm90.kernel import emit_sm90_kernel

HERE = pathlib.Path(__file__).resolve().parent
CUTE_DIR = HERE / "cute"
RUNTIME = HERE.parent / "synth" / "emit" / "runtime"
GXX = shutil.which("g++")


def _cute_include() -> pathlib.Path | None:
    """The include directory holding cute/ and cutlass/: the nvidia-cutlass wheel's, else TVM's copy."""
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    for d in (site / "cutlass_library" / "source" / "include", site / "tvm" / "3rdparty" / "cutlass" / "include"):
        if (d / "cute" / "tensor.hpp").is_file() and (d / "cutlass" / "cutlass.h").is_file():
            return d
    return None


def _cuda_includes() -> list[pathlib.Path]:
    """The CUDA toolkit's include directories (cuda.h, cuda_runtime_api.h, and libcu++ under cccl/)."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(pathlib.Path(nvcc).resolve().parent.parent))
    for r in roots:
        if r and (pathlib.Path(r) / "include" / "cuda.h").is_file() and \
                (pathlib.Path(r) / "include" / "cuda_runtime_api.h").is_file():
            inc = pathlib.Path(r) / "include"
            return [inc] + ([inc / "cccl"] if (inc / "cccl").is_dir() else [])
    return []


CUTE = _cute_include()
CUDA_INC = _cuda_includes()
pytestmark = [
    pytest.mark.skipif(GXX is None, reason="g++ is needed to compile the CuTe host program and the emulators"),
    pytest.mark.skipif(CUTE is None, reason="the CuTe headers (pip package nvidia-cutlass) are not installed"),
    pytest.mark.skipif(not CUDA_INC, reason="the CUDA toolkit headers (cuda.h, cuda_runtime_api.h) are not found"),
]


def cute_build(src: pathlib.Path, flags: list[str]) -> pathlib.Path:
    """A CuTe host program, built once (conftest.gxx_build: kept by its text, the flags, CUTLASS's version and
    cuda.h)."""
    return gxx_build(src, [*flags, f"-I{CUTE}", *(f"-I{i}" for i in CUDA_INC)],
                     depends=[CUTE / "cutlass" / "version.h", CUDA_INC[0] / "cuda.h"])


def probe_build() -> pathlib.Path:
    """tests/cute/emu_sm90_probe.cpp (the sm_90a emulator's layout functions), built once (conftest.gxx_build)."""
    return gxx_build(CUTE_DIR / "emu_sm90_probe.cpp", ["-std=c++20", "-O1", "-w", f"-I{RUNTIME}"],
                     depends=sorted(RUNTIME.glob("*.h")))


@pytest.fixture(scope="session")
def cute() -> dict:
    """CuTe's layouts, descriptors and tensor-map arguments (the JSON of tests/cute/cute_layouts.cpp)."""
    # -D__CUDACC_VER_MAJOR__=12: CUTLASS builds its cuTensorMapEncodeTiled call only for CUDA >= 12 (host
    # code); the program defines that driver function itself to record the arguments.
    exe = cute_build(CUTE_DIR / "cute_layouts.cpp",
                     ["-std=c++17", "-O0", "-w", "-DSYNTH_CUTE_TMA", "-D__CUDACC_VER_MAJOR__=12"])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def sm90_probe():
    """``query(lines) -> [answer per line]`` from the sm_90a emulator's layout functions."""
    exe = probe_build()

    def query(lines: list[str]) -> list:
        proc = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return [json.loads(x) for x in proc.stdout.splitlines()]

    return query


# ---- sm_80: mma.sync.m16n8k16 and ldmatrix.x4 on the sm_80 emulator


def _f16_bits(x: float) -> int:
    return int(np.array([x], np.float16).view(np.uint16)[0])


def test_sm80_mma_fragments_match_cute(cute):
    """MMA_Traits<SM80_16x8x16_F32F16F16F32_TN> against the emulator's mma.sync, register by register:
    256 experiments, experiment e puts 1.0 in the A register half that CuTe's A layout gives value e%8 of
    lane e/8 (element (m, k)), B register halves hold distinct codes, C registers distinct offsets. CuTe
    predicts D register (lane, i) at (m', n): C + (the code of the B half at (k, n) when m' == m, else 0)."""
    L = cute["sm80_mma"]
    A, B, C = L["A"], L["B"], L["C"]
    assert len(A) == len(B) == len(C) == 32 and len(A[0]) == 8 and len(B[0]) == 4 and len(C[0]) == 4
    bcode = {}  # (k, n) -> code of the B register half CuTe puts it in
    breg = np.zeros((32, 2), np.uint32)
    for lane in range(32):
        for v, (n, k) in enumerate(B[lane]):
            code = 1 + lane * 4 + v
            bcode[(k, n)] = code
            breg[lane, v // 2] |= _f16_bits(code) << (16 * (v % 2))
    assert len(bcode) == 16 * 8
    creg = (256.0 * (1 + np.arange(32 * 4, dtype=np.float32))).reshape(32, 4)
    n_exp = 32 * 8
    Areg = np.zeros((n_exp, 32, 4), np.uint32)
    expect = np.zeros((n_exp, 32, 4), np.float32)
    for e in range(n_exp):
        lane_a, v = divmod(e, 8)
        Areg[e, lane_a, v // 2] = _f16_bits(1.0) << (16 * (v % 2))
        m, k = A[lane_a][v]
        for lane in range(32):
            for i, (m2, n) in enumerate(C[lane]):
                expect[e, lane, i] = creg[lane, i] + (bcode[(k, n)] if m2 == m else 0.0)
    run = compile_and_run((CUTE_DIR / "sm80_probe.cu").read_text(), "mma_probe",
                          [Buf("Areg", Areg.reshape(-1)), Buf("Breg", np.tile(breg, (n_exp, 1, 1)).reshape(-1)),
                           Buf("Creg", np.tile(creg, (n_exp, 1, 1)).reshape(-1)),
                           Buf("D", np.zeros(n_exp * 32 * 4, np.float32), out=True), n_exp],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=16, policy="forward")
    assert run.errors == [], run.errors
    D = run.outputs["D"].reshape(n_exp, 32, 4)
    bad = np.argwhere(D != expect)
    assert bad.size == 0, f"{len(bad)} registers differ from CuTe's layouts, first (experiment, lane, i): {bad[:5]}"


def test_sm80_ldmatrix_x4_matches_cute(cute):
    """Copy_Traits<SM75_U32x4_LDSM_N>: lane t's register q, half h holds column c of the row whose address
    lane s passed. The emulator's ldmatrix.x4, with lane s passing row s of a 32 x 8 matrix of codes."""
    M = np.arange(32 * 8, dtype=np.float16).reshape(32, 8)  # code = 8 row + col, exact in f16
    run = compile_and_run((CUTE_DIR / "sm80_probe.cu").read_text(), "ldsm_probe",
                          [Buf("M", M), Buf("R", np.zeros(128, np.uint32), out=True)],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=512, policy="forward")
    assert run.errors == [], run.errors
    R = run.outputs["R"].reshape(32, 4)
    for t in range(32):
        for q in range(4):
            for h in range(2):
                got = np.array([(R[t, q] >> (16 * h)) & 0xFFFF], np.uint16).view(np.float16)[0]
                s, c = cute["ldsm_n"][t][q][h]
                assert int(got) == 8 * s + c, (t, q, h, int(got), (s, c))


def _cute_asm(header: str, struct: str, prefix: str) -> str:
    """The instruction (mnemonic with its modifiers) of the first asm string starting with ``prefix`` in
    ``struct``'s definition in CuTe's ``header``."""
    import re

    text = (CUTE / "cute" / "arch" / header).read_text()
    body = text[text.index(f"struct {struct}\n"):]
    body = body[:body.index("\nstruct ", 1)] if "\nstruct " in body[1:] else body
    m = re.search(r'"(' + re.escape(prefix) + r'\.[^ "]*)', body)  # a mnemonic: more modifiers follow
    assert m, (header, struct, prefix)
    return m.group(1)


def test_sm80_instructions_are_cutes():
    """The sm_80 kernel's CUDA API (synth.emit.cuda.api_header) issues the instructions whose semantics the
    emulator implements and CuTe's atoms state: mma.sync with CuTe's mnemonic (shape, row.col, types),
    ldmatrix with the same modifiers (PTX orders them .m8n8.x4; CuTe writes .x4.m8n8), and the 16-byte
    cp.async with a source size (bytes past it zero-filled) of CuTe's ZFILL atom, without its L2
    prefetch hint."""
    import re

    from synth.emit.cuda import api_header

    api = api_header()
    mma = _cute_asm("mma_sm80.hpp", "SM80_16x8x16_F32F16F16F32_TN", "mma.sync")
    assert re.search(r'asm volatile\("' + re.escape(mma) + " ", api), mma
    ldsm = _cute_asm("copy_sm75.hpp", "SM75_U32x4_LDSM_N", "ldmatrix")
    (ours,) = re.findall(r'"(ldmatrix[^ "]*)', api)
    assert sorted(ours.split(".")) == sorted(ldsm.split(".")), (ours, ldsm)
    # cp.async with a source size (zero fill): CuTe's ZFILL atom, but for its L2 prefetch hint
    cp = _cute_asm("copy_sm80.hpp", "SM80_CP_ASYNC_CACHEGLOBAL_ZFILL", "cp.async")
    (ours,) = re.findall(r'"(cp\.async\.[^ "]*) \[%0\], \[%1\], 16, %2;', api)
    assert ours == cp.removesuffix(".L2::128B"), (ours, cp)


@pytest.mark.parametrize("bk", [16, 32, 64, 128])
def test_sm80_kernel_swizzle_is_cutes_swizzle(cute, bk):
    """The emitted kernel's ``swz(r, c)`` (byte offset of 16-byte chunk c of tile row r), run on the
    emulator, equals CuTe's Swizzle<3,4,S> of the row-major byte offset: S = 3 while a row is at most
    128 bytes (BK <= 64), S = log2(row bytes / 16) for longer rows (the XOR key is then the row mod 8)."""
    *_, text = emitted_kernel(BK=bk, K=512)
    cpr = bk // 8
    rows = 1024 // cpr  # 1024 chunks (16 KiB): the pattern repeats at least 4 times
    probe = text + ("\nextern \"C\" __global__ void swz_probe(int* O) {\n"
                    f"  if (threadIdx.x == 0) for (int r = 0; r < {rows}; ++r) for (int c = 0; c < {cpr}; ++c)\n"
                    f"    O[r * {cpr} + c] = synth_kernel::swz(r, c);\n}}\n")
    run = compile_and_run(probe, "swz_probe", [Buf("O", np.zeros(rows * cpr, np.int32), out=True)],
                          grid=(1, 1, 1), block=(32, 1, 1), smem_bytes=16)
    assert run.errors == [], run.errors
    s = max(3, cpr.bit_length() - 1)  # the row bits [4 + S, 7 + S) that are the key: r % 8 once CPR >= 8
    table = cute["swizzle"][str(s)]
    assert len(table) == rows * cpr
    assert list(run.outputs["O"]) == table


# ---- sm_90a: wgmma, its descriptors, the 128-byte swizzle, TMA


def test_gmma_descriptor_fields_match_cute(cute, sm90_probe):
    """GmmaDescriptor with a distinct value in every field: the emulator decodes each field from the bits
    CuTe's union puts it in (PTX ISA, "Matrix Descriptor Format" of the asynchronous warpgroup matrix
    shared memory layout), and refuses what it does not emulate (base offset, other swizzles)."""
    f = cute["gmma_desc_fields"]
    word = f["word"]
    (got,) = sm90_probe([f"fields {word}"])
    assert got["start"] == f["start_address"] << 4
    assert got["lbo"] == f["leading_byte_offset"] << 4
    assert got["sbo"] == f["stride_byte_offset"] << 4
    assert got["base_offset"] == f["base_offset"]
    assert got["layout"] == f["layout_type"] == f["B128"]
    assert "base offset" in got["unsupported"]  # base offset 5: not emulated, so refused, not misread
    no_base = word & ~(7 << 49)
    for layout in ("B64", "B32", "INTERLEAVE"):
        other = (no_base & ~(3 << 62)) | (f[layout] << 62)
        (g,) = sm90_probe([f"fields {other}"])
        assert g["layout"] == f[layout] and "128-byte" in g["unsupported"]
    (g,) = sm90_probe([f"fields {no_base}"])
    assert g["unsupported"] == ""


def test_gmma_accumulator_layout_matches_cute(cute, sm90_probe):
    """CLayout_64xN (N = 16 .. 256 step 16): value i of thread t holds C[m][n], as the emulator's wgmma
    writes it (the epilogue reads the same registers: docs/hopper_kernel.md)."""
    ns = sorted(int(n) for n in cute["gmma_c"])
    assert ns == list(range(16, 257, 16))
    got = sm90_probe([f"acc {n}" for n in ns])
    for n, g in zip(ns, got):
        assert g == cute["gmma_c"][str(n)], n


@pytest.mark.parametrize("cfg", [KernelDesign.of(), KernelDesign.of(bm=64, bn=48, stages=2, dtype="bf16")],
                         ids=lambda c: f"{c.bm}x{c.bn}{c.dtype}")
def test_kernel_wgmma_instruction_is_cutes(cute, cfg):
    """The emulator reads operands as K-major, unscaled and untransposed and accumulates into D; the
    emitted wgmma must ask the GPU for exactly that: the same mnemonic as CuTe's MMA_64xNx16 SS atom of
    that shape and type, N/2 accumulator registers, scale-d ``p`` set from ScaleOut::One, and the
    immediates scale-a, scale-b = ScaleIn::One, transpose-a, transpose-b = Major::K (CuTe's operand order)."""
    import re

    e = cute["gmma_enums"]
    text = emit_sm90_kernel(cfg)
    t = cfg.dtype
    mnemonic = f"wgmma.mma_async.sync.aligned.m64n{cfg.bn}k16.f32.{t}.{t}"
    headers = "".join((CUTE / "cute" / "arch" / h).read_text() for h in ("mma_sm90_gmma.hpp", "mma_sm90_gmma_ext.hpp")
                      if (CUTE / "cute" / "arch" / h).is_file())
    assert f'"{mnemonic} "' in headers, f"CuTe has no {mnemonic}"
    m = re.search(r"setp\.ne\.b32 p, (\d+), 0;\\n " + re.escape(mnemonic) +
                  r" \{([^}]*)\}, %(\d+), %(\d+), p, (\d+), (\d+), (\d+), (\d+);", text)
    assert m, "the emitted wgmma asm is not in the expected form"
    scale_d, regs, da, db, *imm = m.groups()
    assert int(scale_d) == e["ScaleOut_One"]
    assert len(regs.split(",")) == cfg.bn // 2 and (int(da), int(db)) == (cfg.bn // 2, cfg.bn // 2 + 1)
    assert [int(x) for x in imm] == [e["ScaleIn_One"], e["ScaleIn_One"], e["Major_K"], e["Major_K"]]


def test_kernel_tma_instruction_is_cutes():
    """The emitted TMA load is CuTe's SM90_TMA_LOAD_2D instruction (cluster-shared destination, mbarrier
    complete_tx in bytes) but for two modifiers that change no data: synth names the default load mode
    ``.tile``, and asks for no L2 cache hint (CuTe passes one, its default being evict-normal)."""
    import re

    text = emit_sm90_kernel(KernelDesign.of())
    (ours,) = set(re.findall(r'"(cp\.async\.bulk\.tensor[^ "]*)', text))
    cutes = _cute_asm("copy_sm90_tma.hpp", "SM90_TMA_LOAD_2D", "cp.async.bulk.tensor.2d.shared::cluster")
    assert set(ours.split(".")) - {"tile"} == set(cutes.split(".")) - {"L2::cache_hint"}, (ours, cutes)


CONFIGS = [KernelDesign.of(bm=128, bn=128, stages=4), KernelDesign.of(bm=128, bn=64, stages=3)]
SLOW_CONFIGS = [KernelDesign.of(bm=64, bn=256, stages=3), KernelDesign.of(bm=128, bn=48, stages=2, dtype="bf16")]


def _cute_config(cute, cfg: KernelDesign) -> dict:
    (c,) = [c for c in cute["configs"] if (c["bm"], c["bn"], c["stages"], c["dtype"]) ==
            (cfg.bm, cfg.bn, cfg.stages, cfg.dtype)]
    return c


def _check_descriptors(cute, sm90_probe, cfg: KernelDesign) -> None:
    """Every wgmma the kernel issues on the emulator (one CTA, every slot used) uses CuTe's descriptors
    for the same tiles; the emulator reads through each one the shared address CuTe's tile layout gives
    each element; and its TMA reads tensor maps of the form make_tma_copy builds (dims {K, rows}, row
    stride 2 K bytes, box {64, rows}, 2-byte elements, 128-byte swizzle)."""
    c = _cute_config(cute, cfg)
    A, B = c["A"], c["B"]
    want = {(A["desc"][wg][s][kb], B["desc"][0][s][kb])
            for wg in range(cfg.bm // 64) for s in range(cfg.stages) for kb in range(4)}
    K = 64 * (cfg.stages + 1)
    _, info = run_emulated(emit_sm90_kernel(cfg), np.zeros((cfg.bm, K), np.uint16), np.zeros((cfg.bn, K), np.uint16))
    assert info["ok"], info
    got = {tuple(p) for p in info["wgmma_descs"]}
    assert got == want, f"kernel issues {sorted(got - want)[:4]}..., CuTe {sorted(want - got)[:4]}..."
    swizzle_128 = _by_name(cute, A["tma"]["swizzle"], "CU_TENSOR_MAP_SWIZZLE_") == "CU_TENSOR_MAP_SWIZZLE_128B"
    for m, op, rows in zip(info["tensor_maps"], (A, B), (cfg.bm, cfg.bn)):
        t = op["tma"]
        assert t["strides"] == [2 * t["K"]] and t["dims"] == [t["K"], t["gmem_rows"]] and swizzle_128
        assert m == {"dims": [K, rows], "stride": 2 * K, "box": t["box"], "elem_bytes": 2, "swizzle_bytes": 128}, m
    eb = 2
    queries, expect = [], []
    for op, slices, rows in ((A, cfg.bm // 64, 64), (B, 1, cfg.bn)):
        for wg in range(slices):
            for s in range(cfg.stages):
                for kb in range(4):
                    queries.append(f"desc {op['desc'][wg][s][kb]} {rows} {eb}")
                    expect.append([[op["addr"][s][wg * 64 + r][16 * kb + k] for k in range(16)] for r in range(rows)])
    for q, g, w in zip(queries, sm90_probe(queries), expect):
        assert g == w, q


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.bm}x{c.bn}s{c.stages}")
def test_kernel_wgmma_descriptors_match_cute(cute, sm90_probe, cfg):
    _check_descriptors(cute, sm90_probe, cfg)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", SLOW_CONFIGS, ids=lambda c: f"{c.bm}x{c.bn}s{c.stages}{c.dtype}")
def test_kernel_wgmma_descriptors_match_cute_more_tiles(cute, sm90_probe, cfg):
    _check_descriptors(cute, sm90_probe, cfg)


def test_tma_landing_matches_cute_tile(cute, sm90_probe):
    """A TMA box with the 128-byte swizzle lands element (r, e) where CuTe's tile layout (the one its
    make_tma_copy and make_gmma_desc are built on) puts it, for every slot of every configuration."""
    queries, expect = [], []
    for c in cute["configs"]:
        for op, rows in ((c["A"], c["bm"]), (c["B"], c["bn"])):
            for s in range(c["stages"]):
                dst = op["addr"][s][0][0]
                queries.append(f"tma {dst} {rows} 2")
                expect.append(op["addr"][s])
    for q, g, w in zip(queries, sm90_probe(queries), expect):
        assert g == w, q


class _FakeDriver:
    """Stands in for cuda.bindings.driver: records cuTensorMapEncodeTiled's arguments by enum name."""

    class _Enum:
        def __getattr__(self, name):
            return name

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.CUtensorMapDataType = self.CUtensorMapInterleave = self.CUtensorMapSwizzle = self._Enum()
        self.CUtensorMapL2promotion = self.CUtensorMapFloatOOBfill = self._Enum()
        self._keep: list = []

    def cuTensorMapEncodeTiled(self, dtype, rank, ptr, dims, strides, box, estrides, interleave, swizzle, l2, oob):
        self.calls.append(dict(dtype=dtype, rank=int(rank), dims=[int(x) for x in dims],
                               strides=[int(x) for x in strides], box=[int(x) for x in box],
                               element_strides=[int(x) for x in estrides], interleave=interleave, swizzle=swizzle,
                               l2_promotion=l2, oob_fill=oob))
        buf = ctypes.create_string_buffer(128)
        self._keep.append(buf)

        class Map:
            def getPtr(self):
                return ctypes.addressof(buf)

        return 0, Map()


def _runner_tensor_maps(cfg: KernelDesign, M: int, N: int, K: int) -> list[dict]:
    from synth.emit.sm90 import runner

    class Dev:
        cu = _FakeDriver()

    runner.sm90_params(Dev(), cfg, 0x10000, 0x20000, 0x30000, None, M, N, K, 1.0, 0.0)
    return Dev.cu.calls


def _by_name(cute: dict, value: int, prefix: str) -> str:
    """The CUDA driver's name of enum value ``value`` among the names starting with ``prefix``."""
    names = [k for k, v in cute["tma_enums"].items() if v == value and k.startswith(prefix)]
    assert len(names) == 1, (value, prefix, names)
    return names[0]


@pytest.mark.parametrize("cfg", CONFIGS + SLOW_CONFIGS, ids=lambda c: f"{c.bm}x{c.bn}s{c.stages}{c.dtype}")
def test_runner_tensor_maps_match_make_tma_copy(cute, cfg):
    """The arguments synth's runner passes to cuTensorMapEncodeTiled for A and B equal those CuTe's
    make_tma_copy(SM90_TMA_LOAD) passes for the same global operand and shared tile (recorded by the
    CuTe program's own cuTensorMapEncodeTiled, so no driver or GPU is needed)."""
    c = _cute_config(cute, cfg)
    ta, tb = c["A"]["tma"], c["B"]["tma"]
    assert ta["K"] == tb["K"]
    calls = _runner_tensor_maps(cfg, ta["gmem_rows"], tb["gmem_rows"], ta["K"])
    assert len(calls) == 2
    for got, want in zip(calls, (ta, tb)):
        assert got["dtype"] == _by_name(cute, want["dtype"], "CU_TENSOR_MAP_DATA_TYPE_")
        for k in ("rank", "dims", "strides", "box", "element_strides"):
            assert got[k] == want[k], (k, got[k], want[k])
        assert got["interleave"] == _by_name(cute, want["interleave"], "CU_TENSOR_MAP_INTERLEAVE_")
        assert got["swizzle"] == _by_name(cute, want["swizzle"], "CU_TENSOR_MAP_SWIZZLE_")
        assert got["oob_fill"] == _by_name(cute, want["oob_fill"], "CU_TENSOR_MAP_FLOAT_OOB_FILL_")


def test_runner_l2_promotion_matches_make_tma_copy(cute):
    """The L2 promotion hint too: CuTe's make_tma_copy asks for 128-byte promotion (the runner asked for
    256 bytes before; a hint that changes no value, but the one CUTLASS's kernels run with)."""
    cfg = CONFIGS[0]
    c = _cute_config(cute, cfg)
    calls = _runner_tensor_maps(cfg, c["A"]["tma"]["gmem_rows"], c["B"]["tma"]["gmem_rows"], c["A"]["tma"]["K"])
    for got, want in zip(calls, (c["A"]["tma"], c["B"]["tma"])):
        assert got["l2_promotion"] == _by_name(cute, want["l2_promotion"], "CU_TENSOR_MAP_L2_PROMOTION_")



# ---- the attention kernel's register-A wgmma and its MN-major B (docs/emulator.md, "Register-operand wgmma and
# MN-major B")


def test_rs_a_fragment_matches_cute(cute, sm90_probe):
    """ALayout of CuTe's register-A atoms (SM90_64x64x16_F32F16F16_RS and the bf16 one): value j of thread t holds
    A[m][k]; the emulator's register-A wgmma reads value j from that (row, k) (gmma_a_frag_coord), for all 128
    threads and 8 values."""
    (got,) = sm90_probe(["afrag"])
    assert len(got) == 128 and all(len(v) == 8 for v in got)
    assert got == cute["gmma_rs_a"]["f16"] == cute["gmma_rs_a"]["bf16"]
    assert sorted(tuple(x) for v in got for x in v) == [(m, k) for m in range(64) for k in range(16)]


@pytest.fixture(scope="session")
def desc_mn128_ptx(tmp_path_factory):
    """``(a, chunk_bytes) -> descriptor`` from the kernel's own text of synth_desc_mn128
    (:data:`synth.emit.sm90.attention_ptx.DESC_MN128`, the nvcc side), compiled with g++ (built once)."""
    from synth.emit.sm90.attention_ptx import DESC_MN128

    src = tmp_path_factory.mktemp("descmn") / "desc_mn128_ptx.cpp"
    src.write_text("#include <cstdint>\n#include <cstdio>\n#define SYNTH_DEV inline\n" + "\n".join(DESC_MN128) +
                   "\nint main() {\n  unsigned a, c;\n  while (std::scanf(\"%u %u\", &a, &c) == 2)\n"
                   "    std::printf(\"%llu\\n\", (unsigned long long)synth_desc_mn128(a, c));\n}\n")
    exe = gxx_build(src, ["-std=c++17", "-O1"])

    def desc(pairs):
        proc = subprocess.run([str(exe)], input="".join(f"{a} {c}\n" for a, c in pairs), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return [int(x) for x in proc.stdout.split()]

    return desc


LBO_FIELD = 0x3FFF << 16


@pytest.mark.parametrize("case", range(5), ids=lambda i: ["f16-n64", "f16-n128", "f16-n256", "f16-n128-kt128",
                                                          "bf16-n128"][i])
def test_mn_major_b_descriptor_matches_cute(cute, sm90_probe, desc_mn128_ptx, case):
    """An MN-major B of N x KT (N = 64, 128, 256) as two or more TMA boxes of [KT rows x 64 elements] (the 128-byte
    swizzle) ``KT * 128`` bytes apart, CuTe's tile_to_shape(Layout_MN_SW128_Atom, (N, KT), Step<_2,_1>):

    * synth_desc_mn128(base + 2048 kb, KT * 128), the emulator's and the nvcc text's, is the descriptor CuTe's
      make_fragment_B (make_gmma_desc<Major::MN>) builds for k-block kb, bit for bit; for N = 64 (one chunk) but
      for the leading byte offset, which CuTe leaves 0 there (no second chunk to point at);
    * the emulator reads element (n, k) of k-block kb, through synth's descriptor and through CuTe's, at the address
      CuTe's tile gives (n, 16 kb + k), every element;
    * TMA box c lands element (row k, e) at CuTe's address of (n = 64 c + e, k)."""
    m = cute["mn_b"][case]
    n, kt, base, chunk = m["n"], m["kt"], m["base"], m["chunk_bytes"]
    assert (n, chunk) == ([64, 128, 256, 128, 128][case], kt * 128) and len(m["desc"]) == kt // 16
    pairs = [(base + 2048 * kb, chunk) for kb in range(kt // 16)]
    ours = [int(x) for x in sm90_probe([f"descmn {a} {c}" for a, c in pairs])]
    assert ours == desc_mn128_ptx(pairs)
    mask = ~LBO_FIELD if n == 64 else ~0
    assert [d & mask for d in ours] == [d & mask for d in m["desc"]]
    if n > 64:
        assert all((d >> 16) & 0x3FFF == chunk >> 4 for d in m["desc"])
    queries, expect = [], []
    for kb in range(kt // 16):
        want = [[m["addr"][j][16 * kb + k] for k in range(16)] for j in range(n)]
        for d in (ours[kb], m["desc"][kb]):
            queries.append(f"mn {d} {n} 2")
            expect.append(want)
    for c in range(n // 64):
        queries.append(f"tma {base + c * chunk} {kt} 2")
        expect.append([[m["addr"][64 * c + e][k] for e in range(64)] for k in range(kt)])
    for q, g, w in zip(queries, sm90_probe(queries), expect):
        assert g == w, q


@pytest.mark.parametrize("n, dtype", [(64, "f16"), (128, "bf16"), (256, "f16")])
def test_rs_wgmma_instruction_is_cutes(cute, n, dtype):
    """The register-A wgmma's inline PTX asks the GPU for what the emulator computes: CuTe's RS atom's mnemonic,
    N/2 accumulators, four A registers, one B descriptor, scale-d ``p`` set from ScaleOut::One (accumulate), and the
    immediates scale-a, scale-b = ScaleIn::One, transpose-b = Major::MN (B MN-major, read by gmma_mn_major_addr)."""
    import re

    from synth.emit.sm90.attention_ptx import rs_wgmma_ptx

    e = cute["gmma_enums"]
    mnemonic = f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}"
    text = (CUTE / "cute" / "arch" / "mma_sm90_gmma.hpp").read_text()
    t = "F16F16" if dtype == "f16" else "BF16BF16"
    body = text[text.index(f"struct MMA_{64}x{n}x16_F32{t}_RS\n"):]
    body = body[:body.index("\nstruct ", 1)]
    assert f'"{mnemonic} "' in body and "ARegisters = uint32_t[4]" in body
    # CuTe's immediates after p, in order: scale-a, scale-b, transpose-b (no transpose-a: A is in registers)
    assert re.search(r'"n"\(int32_t\(scaleA\)\),\s*"n"\(int32_t\(scaleB\)\),\s*"n"\(int32_t\(tnspB\)\)\)', body)
    ours = rs_wgmma_ptx(n, dtype)
    mt = re.search(r"setp\.ne\.b32 p, (\d+), 0;\\n " + re.escape(mnemonic) +
                   r" \{([^}]*)\}, \{([^}]*)\}, %(\d+), p, (\d+), (\d+), (\d+);", ours)
    assert mt, ours
    scale_d, dregs, aregs, db, *imm = mt.groups()
    assert int(scale_d) == e["ScaleOut_One"]
    assert len(dregs.split(",")) == n // 2 and len(aregs.split(",")) == 4 and int(db) == n // 2 + 4
    assert [int(x) for x in imm] == [e["ScaleIn_One"], e["ScaleIn_One"], e["Major_MN"]]

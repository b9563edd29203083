"""The epilogue component of the sm_90a kernel: how C leaves the consumers (docs/hopper_kernel.md, "Epilogue";
docs/hopper_store.md).

Selected by ``KernelDesign.epilogue`` (:func:`epilogue_of`): :class:`RegisterEpilogue` stores C from the
accumulators (``C = alpha acc (+ beta C_in)``, 128-bit stores where aligned, per element at the edges);
:class:`TmaStoreEpilogue` writes each tile through shared staging slots and ``cp.async.bulk.tensor`` stores,
one line per statement of its proven store program (:func:`synth.lower.hopper_store.store_program`), C stored as
``out_dtype``, and falls back to register stores for a launch whose C is not TMA-aligned. Each brings its own
defines, device functions, kernel parameter and shared memory. :func:`register_lines` is also the split-K
reduction's store (:func:`synth.emit.sm90.scheduler.split_reduction_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...expr import Num, evaluate
from ...hopper.store import UNITS
from ...program import CommitStmt, Program, WaitStmt
from ..cuda import c_expr
from ...hopper.kernel_design import KernelDesign
from ...lower.hopper_design import design_store_program

STORE_BARRIER = 2
"""Named barrier of consumer warp group ``cw`` in the TMA-store epilogue: ``STORE_BARRIER + cw`` (128 threads)."""

STORE_PTX = r"""
// TMA-store epilogue (docs/hopper_store.md): staging writes, the bulk store, its group FIFO
#include <cuda_fp16.h>
#include <cuda_bf16.h>
SYNTH_DEV void synth_st_shared_f32x2(uint32_t a, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(a), "f"(x), "f"(y) : "memory"); }
SYNTH_DEV void synth_st_shared_f16x2(uint32_t a, float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(*reinterpret_cast<const uint32_t*>(&h)) : "memory"); }
SYNTH_DEV void synth_st_shared_bf16x2(uint32_t a, float x, float y) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(*reinterpret_cast<const uint32_t*>(&h)) : "memory"); }
SYNTH_DEV void synth_tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               :: "l"(reinterpret_cast<uint64_t>(map)), "r"(src), "r"(c0), "r"(c1) : "memory"); }
SYNTH_DEV void synth_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> SYNTH_DEV void synth_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
// the register stores of a launch whose C is not TMA-aligned: one f16 / bf16 element, rounded to nearest even
SYNTH_DEV void synth_st_global_f16(void* p, float v) { *reinterpret_cast<__half*>(p) = __float2half_rn(v); }
SYNTH_DEV void synth_st_global_bf16(void* p, float v) { *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(v); }
"""
"""The TMA-store epilogue's device functions outside the emulator."""


def _store_unit(store, s) -> str:
    if isinstance(s, (WaitStmt, CommitStmt)):
        return s.kind
    unit = store.op(s.op).unit
    if unit not in UNITS:
        raise ValueError(f"store program op {s.op}: unit {unit!r} is not one of {sorted(UNITS)}")
    return unit


def _store_wait(store, s) -> str:
    n = store.waits[s.wait].in_flight
    if not isinstance(n, Num) or not 0 <= n.value <= 7:
        raise ValueError(f"store program wait {s.wait}: in_flight {n} is not a constant 0..7")
    return f"if (wt == 0) synth_bulk_wait_read<{n.value}>();  // wait_group.read {n.value}: the slot's last store has read it"


def _store_slot(cfg: KernelDesign, acc) -> str:
    sub = 64 * cfg.store_cols * cfg.out_bytes
    return (f"sStage + (uint32_t)cw * {cfg.staging * sub}u + ((unsigned)({c_expr(acc.slot)}) % {cfg.staging}u) * "
            f"{sub}u")


_STAGE_WRITE = {"f32": "synth_st_shared_f32x2", "f16": "synth_st_shared_f16x2", "bf16": "synth_st_shared_bf16x2"}
"""The staging write of a pair of C values, by the element type C is stored in (f16 / bf16: rounded to nearest)."""


def _store_lines(cfg: KernelDesign, store, e0: str, rows: str = "cw * 64") -> list[str]:
    """The consumers' TMA-store epilogue of one tile: sub-tile ``jj`` (columns ``jj * W ..``) is the store
    program's body at ``i = e0 + jj``, each statement one line (module docstring of
    :mod:`synth.hopper.store`); lines indented as :func:`register_lines`'s."""
    w = cfg.store_cols
    body = store.part("body")
    out = [
        f"    // ---- epilogue: TMA store, 64 x {w} f32 sub-tiles through {cfg.staging} staging slot(s) (store program)",
        "    const int lane = wt % 32, sr0 = (wt / 32) * 16 + lane / 4, sc0 = 2 * (lane % 4);",
        "#pragma unroll",
        f"    for (int jj = 0; jj < {cfg.bn // w}; ++jj) {{",
        f"      const unsigned {body.var} = {e0} + (unsigned)jj;  // the warp group's running sub-tile count",
    ]
    for s in body.stmts:
        unit = _store_unit(store, s)
        if unit == "wait":
            lines = [_store_wait(store, s)]
        elif unit == "commit":
            lines = ["if (wt == 0) synth_bulk_commit();"]
        elif unit == "bar_sync":
            lines = [f"synth_bar_sync({STORE_BARRIER} + cw, 128);  // {s.op}: the warp group's threads meet"]
        elif unit == "fence_proxy_async":
            lines = ["synth_fence_proxy_async();  // this thread's st.shared visible to the TMA store (async proxy)"]
        elif unit == "st_shared":
            (acc,) = s.writes
            lines = [
                "{",
                f"  const uint32_t dst = {_store_slot(cfg, acc)};",
                "#pragma unroll",
                f"  for (int q = 0; q < {w // 8}; ++q) {{",
                "#pragma unroll",
                "    for (int h = 0; h < 2; ++h) {",
                f"      const int r = sr0 + 8 * h, c = 8 * q + sc0, g = jj * {w // 8} + q;",
                "      float v0 = alpha * acc[4 * g + 2 * h], v1 = alpha * acc[4 * g + 2 * h + 1];",
                "      if (C_in != nullptr) {",
                f"        const int row = m0 + {rows} + r, col = n0 + jj * {w} + c;",
                "        if (row < M && col < N) v0 += beta * C_in[(size_t)row * ldc + col];",
                "        if (row < M && col + 1 < N) v1 += beta * C_in[(size_t)row * ldc + col + 1];",
                "      }",
                *([f"      v0 = {_act(cfg, 'v0')}; v1 = {_act(cfg, 'v1')};  // activation: {cfg.activation}"]
                  if cfg.activation != "none" else []),
                f"      {_STAGE_WRITE[cfg.out_dtype]}(dst + (uint32_t)(r * {w} + c) * {cfg.out_bytes}u, v0, v1);",
                "    }",
                "  }",
                "}",
            ]
        elif unit == "tma_store":
            (acc,) = s.reads
            lines = [f"if (wt == 0) synth_tma_store_2d(&tmC, {_store_slot(cfg, acc)}, n0 + jj * {w}, m0 + {rows});"
                     "  // out-of-range rows and columns clipped by the tensor map"]
        else:
            raise ValueError(f"store program op {s.op} of unit {unit} cannot run per sub-tile")
        if s.guard is not None:
            lines = [f"if ({c_expr(s.guard)}) {{"] + ["  " + ln for ln in lines] + ["}"]
        out += ["      " + ln if not ln.startswith("#") else ln for ln in lines]
    out.append("    }")
    return out


def _store_or_registers(cfg: KernelDesign, store, e0: str, rows: str = "cw * 64") -> list[str]:
    """A TMA-store kernel's C of one tile (lines indented as :func:`register_lines`'s): the store program's sub-tiles
    (:func:`_store_lines`) when this launch's C is TMA-aligned (``synth_c_tma``, uniform over the launch), else
    the register epilogue's lines (:func:`register_lines`, in ``cfg.out_dtype``): no staging write, no bulk group,
    so the store program runs no sub-tile in such a launch and its final ``wait_group.read 0`` waits for
    nothing (docs/hopper_store.md, "C not TMA-aligned")."""
    def inner(lines: list[str]) -> list[str]:
        return ["  " + ln if not ln.startswith("#") else ln for ln in lines]
    return [
        "    if (synth_c_tma(C, ldc)) {  // this launch's C is TMA-aligned: the store program's sub-tiles",
        *inner(_store_lines(cfg, store, e0, rows=rows)),
        "    } else {  // C's base or row stride is not a multiple of 16 bytes: register stores, bounds-checked",
        *inner(register_lines(cfg, rows=rows, out_dtype=cfg.out_dtype)),
        "    }",
    ]


def _store_drain(store) -> list[str]:
    """The store program's parts after the body, at the consumer's end (after its last tile): waits only."""
    out = ["    // ---- after the last tile: every TMA store has read its staging slot before the CTA exits"]
    for pt in store.parts[1:]:
        if not isinstance(pt.extent, Num):
            raise ValueError(f"store program part {pt.name}: extent {pt.extent} is not a constant")
        for c in range(pt.extent.value):
            env = {pt.var: c}
            for s in pt.stmts:
                unit = _store_unit(store, s)
                if s.guard is not None and not evaluate(s.guard, env):
                    continue
                if unit == "wait":
                    out.append("    " + _store_wait(store, s))
                else:
                    raise ValueError(f"store program {pt.name}: only waits run after the last tile")
    return out



def _act(cfg: KernelDesign, value: str) -> str:
    """C's value ``value`` (a CUDA expression, f32) under ``cfg.activation``: itself, or ``fmaxf(value, 0.0f)`` for
    ``relu``. Applied where C is written, never to a split-K partial (after the reduction, before the rounding to
    ``out_dtype``)."""
    return f"fmaxf({value}, 0.0f)" if cfg.activation == "relu" else value


def register_lines(cfg: KernelDesign, split: str = "", rows: str = "cw * 64", out_dtype: str = "f32") -> list[str]:
    """C = alpha acc (+ beta C_in): lanes of a pair swap halves so each holds 4 consecutive
    columns of one row (one 128-bit store); ragged or unaligned edges store per element.
    ``split`` ``partial``: store each vector inside C to this split's workspace slot instead;
    ``fold``: first replace it by the split-order sum of every split's (:func:`synth.emit.splitk.fold_lines`).
    ``out_dtype`` ``f16`` / ``bf16`` (a TMA-store kernel's launch whose C is not TMA-aligned): C holds 2-byte
    elements (row stride ``ldc`` of them), each stored on its own, rounded to nearest even. ``cfg.activation``
    (:func:`_act`) wraps each value C is written with, never a ``partial``'s."""
    head = [
        "    // ---- epilogue: quad pairs exchange so each lane owns 4 consecutive columns of one row",
        "    const int lane = wt % 32, odd = lane & 1;",
        f"    const int row = m0 + {rows} + (wt / 32) * 16 + lane / 4 + (odd ? 8 : 0);",
    ]
    loop = [
        "#pragma unroll",
        f"    for (int j = 0; j < {cfg.bn // 8}; ++j) {{",
        "      // alpha first: ptxas serializes every wgmma when a shfl reads an accumulator register",
        "      const float a0 = alpha * acc[4 * j], a1 = alpha * acc[4 * j + 1];",
        "      const float a2 = alpha * acc[4 * j + 2], a3 = alpha * acc[4 * j + 3];",
        "      const float r0 = synth_shfl_xor(odd ? a0 : a2, 1), r1 = synth_shfl_xor(odd ? a1 : a3, 1);",
        "      float v[4];",
        "      if (odd) { v[0] = r0; v[1] = r1; v[2] = a2; v[3] = a3; }",
        "      else { v[0] = a0; v[1] = a1; v[2] = r0; v[3] = r1; }",
        "      const int col = n0 + 8 * j + 4 * ((lane % 4) / 2);",
    ]
    if split == "partial":
        return head + loop + [
            "      if (row >= M || col >= N) continue;",
            f"      synth_st_cg_f32x4(ws_tile + (size_t)split * {cfg.bm * cfg.bn} + (size_t)(row - m0) * {cfg.bn} + "
            "(col - n0), v[0], v[1], v[2], v[3]);",
            "    }",
        ]
    fold = []
    if split == "fold":
        fold = [
            "      if (col < N) {  // split-K: p0 + p1 + ... in split order: the same bits whichever CTA is last",
            f"        const float* const wp = ws_tile + (size_t)(row - m0) * {cfg.bn} + (col - n0);",
            "        float s[4], w[4];",
            "        if (split == 0) { s[0] = v[0]; s[1] = v[1]; s[2] = v[2]; s[3] = v[3]; }",
            "        else synth_ld_cg_f32x4(s, wp);",
            "#pragma unroll",
            "        for (int z = 1; z < SYNTH_SPLIT_K; ++z) {",
            "          if (z == split) { w[0] = v[0]; w[1] = v[1]; w[2] = v[2]; w[3] = v[3]; }",
            f"          else synth_ld_cg_f32x4(w, wp + (size_t)z * {cfg.bm * cfg.bn});",
            "          s[0] += w[0]; s[1] += w[1]; s[2] += w[2]; s[3] += w[3];",
            "        }",
            "        v[0] = s[0]; v[1] = s[1]; v[2] = s[2]; v[3] = s[3];",
            "      }",
        ]
    if out_dtype != "f32":
        store = {"f16": "synth_st_global_f16", "bf16": "synth_st_global_bf16"}[out_dtype]
        return head + loop + [
            "      if (row >= M) continue;",
            "      unsigned short* out = reinterpret_cast<unsigned short*>(C) + (size_t)row * ldc + col;",
            "      const float* in = C_in == nullptr ? nullptr : C_in + (size_t)row * ldc + col;",
            "      for (int e = 0; e < 4; ++e)",
            f"        if (col + e < N) {store}(out + e, {_act(cfg, 'v[e] + (in != nullptr ? beta * in[e] : 0.0f)')});",
            "    }",
        ]
    return head + [
        "    const bool vec = (ldc % 4) == 0 && ((reinterpret_cast<uintptr_t>(C) & 15) == 0) &&",
        "                     (C_in == nullptr || (reinterpret_cast<uintptr_t>(C_in) & 15) == 0);",
    ] + loop + [
        "      if (row >= M) continue;",
    ] + fold + [
        "      float* out = C + (size_t)row * ldc + col;",
        "      const float* in = C_in == nullptr ? nullptr : C_in + (size_t)row * ldc + col;",
        "      if (vec && col + 3 < N) {",
        "        float4 c4 = make_float4(0.f, 0.f, 0.f, 0.f);",
        "        if (in != nullptr) c4 = synth_ldg4(in);",
        f"        synth_stg4(out, {', '.join(_act(cfg, f'v[{e}] + beta * c4.{x}') for e, x in enumerate('xyzw'))});",
        "      } else {",
        "        for (int e = 0; e < 4; ++e)",
        f"          if (col + e < N) out[e] = {_act(cfg, 'v[e] + (in != nullptr ? beta * in[e] : 0.0f)')};",
        "      }",
        "    }",
    ]

@dataclass(frozen=True)
class Epilogue:
    """What an epilogue brings to the kernel (each method's default: nothing) and writes (:meth:`tile`)."""

    cfg: KernelDesign

    @property
    def subtiles(self) -> int:
        """Store sub-tiles of one 64-row block (the running sub-tile count a tile advances; unused here)."""
        return self.cfg.bn // self.cfg.store_cols

    def title(self) -> str:
        """What the kernel's first comment line adds for this epilogue: nothing."""
        return ""

    def defines(self) -> list[str]:
        """The epilogue's ``#define`` lines: none."""
        return []

    def ptx(self) -> list[str]:
        """The epilogue's device functions outside the emulator: none beyond the base ones."""
        return []

    def device_lines(self) -> list[str]:
        """Device functions compiled for the GPU and the emulator alike: none."""
        return []

    def params(self) -> list[str]:
        """Kernel parameter lines after ``tmB``: none."""
        return []

    def storage(self, off: int) -> tuple[list[str], int]:
        """``(lines, bytes)`` of the epilogue's shared memory at byte offset ``off`` from ``sA``: none."""
        return [], 0

    def tile(self, rows: str, first: str) -> list[str]:
        """C of one 64-row block of a consumer warp group's tile, its rows from ``m0 + rows``; ``first``: the C
        count (unsigned) of its first store sub-tile in the warp group's run of sub-tiles. Lines indented for a
        consumer's depth 2 (a tile loop's callers indent them further)."""
        raise NotImplementedError

    def drain(self) -> list[str]:
        """Lines after a consumer's last tile: none."""
        return []


@dataclass(frozen=True)
class RegisterEpilogue(Epilogue):
    """C stored from the accumulators by every consumer thread (``st.global``; :func:`register_lines`)."""

    def tile(self, rows: str, first: str) -> list[str]:
        """:func:`register_lines` of the block (``first`` unused)."""
        return register_lines(self.cfg, rows=rows)


@dataclass(frozen=True)
class TmaStoreEpilogue(Epilogue):
    """C through shared staging slots and TMA stores, one line per statement of the store program ``store``
    (docs/hopper_store.md); register stores for a launch whose C is not TMA-aligned."""

    store: Program

    def title(self) -> str:
        """The staging buffers and the element type C is stored in."""
        cfg = self.cfg
        return (f", TMA-store epilogue ({cfg.staging} staging buffers of 64x{cfg.store_cols} {cfg.out_dtype} "
                "per warp group)")

    def defines(self) -> list[str]:
        """``SYNTH_TMA_STORE`` (the sub-tile's columns), ``SYNTH_OUT_BYTES``, ``SYNTH_OUT_BF16`` for bf16."""
        cfg = self.cfg
        return [f"#define SYNTH_TMA_STORE {cfg.store_cols}  // C leaves through TMA stores of 64 x this many elements",
                f"#define SYNTH_OUT_BYTES {cfg.out_bytes}  // C stored as {cfg.out_dtype}",
                *(["#define SYNTH_OUT_BF16 1"] if cfg.out_dtype == "bf16" else [])]

    def ptx(self) -> list[str]:
        """:data:`STORE_PTX`."""
        return [STORE_PTX.strip()]

    def device_lines(self) -> list[str]:
        """``synth_c_tma(C, ldc)``: whether this launch's C is TMA-aligned (the host's choice, read from C)."""
        cfg = self.cfg
        return [f"// tmC: C as the TMA stores write it ({cfg.out_dtype}, row stride {cfg.out_bytes} ldc bytes, box 64 "
                f"rows x {cfg.store_cols} columns, no swizzle).",
                "// The host encodes it only when C's base address and row stride are multiples of 16 bytes",
                "// (cuTensorMapEncodeTiled's rule); otherwise it passes a zeroed map and every consumer of the launch",
                "// stores C from registers instead (the register epilogue, bounds-checked per element): the choice is",
                "// the launch's (uniform), made here from C and ldc, the arguments the host decided on",
                "SYNTH_DEV bool synth_c_tma(const void* C, int ldc) {",
                f"  return ((reinterpret_cast<uintptr_t>(C) | ((uintptr_t)(unsigned)ldc * {cfg.out_bytes}u)) & 15) "
                "== 0;",
                "}"]

    def params(self) -> list[str]:
        """The tensor map of C."""
        return ["               const __grid_constant__ CUtensorMap tmC,"]

    def storage(self, off: int) -> tuple[list[str], int]:
        """``sStage``: the staging slots of every consumer warp group."""
        cfg = self.cfg
        return ([f"  const uint32_t sStage = sA + {off};  // TMA-store staging: {cfg.consumers} warp group(s) x "
                 f"{cfg.staging} x {64 * cfg.store_cols * cfg.out_bytes} bytes"], cfg.staging_bytes)

    def tile(self, rows: str, first: str) -> list[str]:
        """The store program's sub-tiles ``first, first + 1, ...`` of one 64-row block (or register stores)."""
        return _store_or_registers(self.cfg, self.store, first, rows=rows)

    def drain(self) -> list[str]:
        """The store program's final waits: every store has read its slot before the CTA exits."""
        return _store_drain(self.store)


def epilogue_of(cfg: KernelDesign, store=None) -> Epilogue:
    """The epilogue of ``cfg.epilogue``: ``tma_store`` with the store program ``store`` (default
    ``design_store_program(cfg)``), else the register epilogue."""
    if cfg.epilogue == "tma_store":
        return TmaStoreEpilogue(cfg, store if store is not None else design_store_program(cfg))
    return RegisterEpilogue(cfg)


__all__ = ["Epilogue", "RegisterEpilogue", "TmaStoreEpilogue", "epilogue_of", "register_lines", "STORE_PTX",
           "STORE_BARRIER"]

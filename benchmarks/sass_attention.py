"""FlashAttention forward on sm_90a, judged statically: synth's attention kernel beside FlashAttention-3's own, read
from SASS, the attention model's solve time, and a TFLOP/s prediction beside FA3's published figures.

No GPU. Three tables (docs/attention_perf.md):

1. **SASS**: the consumer main loop of each kernel (``synth.emit.sass.attention_loop``: the innermost natural loop
   with the most HGMMA; an ``mbarrier.try_wait`` retry block's jump back is not a loop), per kernel, head dim (64,
   128), f16, causal and not: instructions per HGMMA, the longest HGMMA-free run (wrapping around the loop),
   ``MUFU.EX2`` and ``SHFL`` per KV block (counts in the loop over KV blocks per iteration: the loop's HGMMA over
   ``d / 16 + BN / 16``), ``wgmma.wait_group`` per KV block and what ptxas says of the wgmma pipeline (serialized,
   waits it injected: ``synth.emit.sass.wgmma_diagnostics``), registers (ptxas's launch value and the
   ``setmaxnreg`` targets), shared memory, spills (and local-memory instructions in the loop).

   * synth: ``synth.emit.sm90.attention_kernel.emit_attention_kernel(ap, body, schedule, causal=...)`` of the
     schedule ``solve_ws`` finds for ``problems/ws/attention-d{128,64}-f16.yaml`` (``ap`` its lowering,
     ``synth.lower.hopper_attention.lower_attention``); "not built: <reason>" while that module is missing or fails.
   * FA3: flash-attention's ``hopper/`` (``--fa3 PATH`` to a checkout, else ``$SYNTH_FA3``), one forward
     instantiation per row: a two-line file that includes ``flash_fwd_launch_template.h`` and instantiates
     ``run_flash_fwd<90, d, d, ClusterM, half_t, half_t, causal, ...>`` with no varlen, paging, split, softcap,
     GQA packing or appended KV (the kernel FA3 dispatches for a dense f16 problem; ClusterM 2 where FA3's
     ``run_mha_fwd_`` enables its cluster: head dim 128 without a causal mask at an even count of row tiles). The
     tile is FA3's own (``tile_size_fwd_sm90``: 128x176 at d 128, 128x128 causal, 192x192 / 192x128 at d 64).
     CUTLASS: the checkout's ``csrc/cutlass`` when its submodule is there, else the ``nvidia-cutlass`` wheel's
     headers (FA3 needs CUTLASS >= 3.6). Nothing of FA3 is copied; its files are compiled where they lie.

   Both compiled by nvcc ``-arch=sm_90a -O3 -DNDEBUG`` through ``synth.emit.sass.compile_cuda`` (cached under
   ``~/.cache/synth/sass``); FA3 with the flags its ``setup.py`` builds with besides (``-std=c++17
   --expt-relaxed-constexpr --use_fast_math -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90``).
   The compile time of each FA3 instantiation is printed ("cached" when the cubin was already built).

2. **Solve**: ``solve_ws`` on each ``problems/ws/attention-*.yaml`` on this machine: seconds, status, II, gap, beside
   Twill's published 19-88 s (synth/data/published_attention.yaml).

3. **Prediction**: ``synth.search.attention_estimate.predict_attention`` of each solved schedule on H100 SXM at the
   FA3 paper's benchmark sizes (16k tokens, hidden 2048), beside FA3's published figures.

Usage::

    python benchmarks/sass_attention.py [--fa3 PATH] [--no-fa3] [--only d128,d128-causal,d64,d64-causal]
        [--time-limit S] [--no-predict]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import re
import sys
import time
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from synth.emit import sass  # noqa: E402
from synth.errors import SynthError  # noqa: E402
from synth.lower.hopper_attention import lower_attention  # noqa: E402
from synth.model.ws_bodies import attention_body  # noqa: E402
from synth.model.ws_read import read_ws  # noqa: E402
from synth.model.ws_schedule import solve_ws  # noqa: E402
from synth.search.attention_estimate import (PUBLISHED_ATTENTION_FILE, AttentionShape, AttentionTile,  # noqa: E402
                                             predict_attention, published_attention)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROBLEMS = sorted((ROOT / "problems" / "ws").glob("attention-*.yaml"))
FLAGS = ("-DNDEBUG",)
FA3_FLAGS = ("-DNDEBUG", "-std=c++17", "--expt-relaxed-constexpr", "--use_fast_math",
             "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED", "-DCUTLASS_ENABLE_GDC_FOR_SM90")
"""FA3's own nvcc flags that change its code (hopper/setup.py), besides the common ``-O3 -DNDEBUG``."""
CONFIGS = {"d128": (128, False), "d128-causal": (128, True), "d64": (64, False), "d64-causal": (64, True)}
"""The rows in the order they matter (and are compiled): head dim 128 non-causal first."""
FA3_TILES = {(128, False): (128, 176), (128, True): (128, 128), (64, False): (192, 192), (64, True): (192, 128)}
"""FA3's f16 forward tiles (hopper/tile_size.h, ``tile_size_fwd_sm90``), checked against the HGMMA shapes read."""
FA3_INSTANCE = """// FA3's forward kernel for one configuration; compiled in place from {where}
// headers digest {digest}
#include "flash_fwd_launch_template.h"
template void run_flash_fwd<90, {d}, {d}, {cluster}, cutlass::half_t, cutlass::half_t, {causal}, false, false, false,
                            false, false, false, false, false, false>(Flash_fwd_params &, cudaStream_t);
"""


# --------------------------------------------------------------------------------------------------- solving


class Solved:
    """One problem file solved: its body, schedule, tile and the solve's wall time."""

    def __init__(self, path: pathlib.Path, body, schedule, tile: AttentionTile, seconds: float) -> None:
        self.path, self.body, self.schedule, self.tile, self.seconds = path, body, schedule, tile, seconds


def tile_of(path: pathlib.Path) -> AttentionTile:
    """The tile a ``kind: attention`` problem file states (``BM``, ``BN``, ``head_dim``)."""
    doc = yaml.safe_load(path.read_text())
    return AttentionTile(int(doc["BM"]), int(doc["BN"]), int(doc["head_dim"]))


def solve_problem(path: pathlib.Path, time_limit: float = 60.0) -> Solved:
    """``solve_ws`` of the problem file at ``path`` (its pins, its machine), timed on this machine."""
    body, mach, pins = read_ws(str(path))
    t0 = time.monotonic()
    sched = solve_ws(body, mach, pins=pins, time_limit=time_limit)
    return Solved(path, body, sched, tile_of(path), time.monotonic() - t0)


def solve_tile(tile: AttentionTile, time_limit: float = 60.0) -> Solved:
    """``solve_ws`` of ``attention_body(d, BM, BN)`` (f16, sm_90) for a tile no problem file states."""
    body = attention_body(tile.d, tile.BM, tile.BN)
    t0 = time.monotonic()
    sched = solve_ws(body, time_limit=time_limit)
    return Solved(pathlib.Path(f"attention_body({tile.d}, {tile.BM}, {tile.BN})"), body, sched, tile,
                  time.monotonic() - t0)


# --------------------------------------------------------------------------------------------------- figures


def kernel_figures(c: sass.Compiled, hgmma_per_block: int) -> dict:
    """The SASS table's columns of one compiled kernel."""
    insns = sass.parse_sass(c.sass)
    st = sass.attention_stats(sass.attention_loop(insns), hgmma_per_block)
    targets = sass.setmaxnreg_targets(insns)
    diag = sass.wgmma_diagnostics(c.log)
    return {
        "blocks": st.blocks, "hgmma_per_block": hgmma_per_block if st.blocks else 0,
        "hgmma_shapes": " ".join(st.hgmma_shapes), "loop_insns": st.instructions,
        "per_hgmma": round(st.per_hgmma, 2), "longest_free": st.longest_hgmma_free,
        "ex2_per_block": round(st.ex2_per_block, 2), "shfl_per_block": round(st.shfl_per_block, 2),
        "registers": c.registers, "setmaxnreg": " ".join(f"{k} {n}" for k, n in targets) or "-",
        "spills": c.spill_stores + c.spill_loads, "loop_local": st.local, "static_smem": c.static_smem,
        "waits_per_block": round(st.wgmma_waits_per_block, 2),
        "ptxas_wgmma": "serialized" if diag.serialized else "no", "injected": diag.injected_waits,
        "serialized_reason": diag.serialized,
    }


def synth_row(solved: Solved, causal: bool, emitter=None) -> dict:
    """synth's kernel for ``solved`` (``causal`` mask or not), compiled and read; ``{"error": "not built: ..."}``
    while the emitter is missing or fails (no figures stand in for it)."""
    t = solved.tile
    try:
        if emitter is None:
            from synth.emit.sm90 import attention_kernel as emitter  # the module lands separately; absent: a row says so
        ap = lower_attention(solved.body, solved.schedule)
        text = emitter.emit_attention_kernel(ap, solved.body, solved.schedule, causal=causal)
    except Exception as exc:  # reported in the row, not hidden
        return {"error": f"not built: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"}
    t0 = time.monotonic()
    try:
        c = sass.compile_cuda(text, "sm_90a", flags=FLAGS)
        secs = time.monotonic() - t0
        f = kernel_figures(c, t.d // 16 + t.BN // 16)
    except SynthError as exc:
        return {"error": f"not built: {str(exc).splitlines()[0][:160]}"}
    f["compile"] = "cached" if secs < 2.0 else f"{secs:.0f} s"
    f["smem"] = solved.schedule.smem
    f["tile"] = f"{t.BM}x{t.BN}"
    return f


def fa3_checkout(arg: Optional[str]) -> Optional[pathlib.Path]:
    """``--fa3 PATH`` or ``$SYNTH_FA3``: a flash-attention checkout (its ``hopper/flash_fwd_launch_template.h``)."""
    p = arg or os.environ.get("SYNTH_FA3")
    return pathlib.Path(p).resolve() if p else None


def cutlass_version(include: pathlib.Path) -> Optional[tuple[int, int, int]]:
    """CUTLASS's version from ``cutlass/version.h`` under ``include``, or None."""
    try:
        text = (include / "cutlass" / "version.h").read_text()
    except OSError:
        return None
    parts = [re.search(rf"#define CUTLASS_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return tuple(int(m.group(1)) for m in parts) if all(parts) else None  # type: ignore[return-value]


def cutlass_for(fa3: pathlib.Path) -> tuple[Optional[pathlib.Path], str]:
    """(include dir, where from) for FA3: its ``csrc/cutlass`` submodule, else the nvidia-cutlass wheel; the
    include dir is None with the reason when neither is CUTLASS >= 3.6."""
    cands = [(fa3 / "csrc" / "cutlass" / "include", "the checkout's csrc/cutlass")]
    try:
        import cutlass_library  # the wheel's headers: only when the checkout has no submodule

        cands.append((pathlib.Path(cutlass_library.__file__).parent / "source" / "include",
                      "the nvidia-cutlass wheel"))
    except ImportError:
        pass
    seen = []
    for inc, where in cands:
        v = cutlass_version(inc)
        if v is None:
            continue
        if v >= (3, 6, 0):
            return inc, f"{where} (CUTLASS {'.'.join(map(str, v))})"
        seen.append(f"{where} is CUTLASS {'.'.join(map(str, v))}")
    return None, "no CUTLASS >= 3.6 headers: " + ("; ".join(seen) or "the checkout's csrc/cutlass is empty (git "
                                                 "submodule update --init csrc/cutlass) and nvidia-cutlass is not installed")


def headers_digest(hopper: pathlib.Path) -> str:
    """A digest of FA3's headers (the cache key of a compiled instantiation: a changed checkout compiles again)."""
    h = hashlib.sha256()
    for p in sorted(list(hopper.glob("*.h")) + list(hopper.glob("*.hpp"))):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def fa3_row(fa3: pathlib.Path, d: int, causal: bool) -> dict:
    """FA3's forward kernel at head dim ``d``, compiled and read; ``{"error": ...}`` with the first compiler error
    when it does not build."""
    hopper = fa3 / "hopper"
    if not (hopper / "flash_fwd_launch_template.h").is_file():
        return {"error": f"not available: {hopper}/flash_fwd_launch_template.h not found"}
    inc, where = cutlass_for(fa3)
    if inc is None:
        return {"error": f"not available: {where}"}
    cluster = 2 if d >= 128 and not causal else 1
    text = FA3_INSTANCE.format(where=f"{fa3.name}/hopper", digest=headers_digest(hopper), d=d, cluster=cluster,
                               causal="true" if causal else "false")
    bm, bn = FA3_TILES[(d, causal)]
    t0 = time.monotonic()
    try:
        c = sass.compile_cuda(text, "sm_90a", flags=FA3_FLAGS, include_dirs=(str(hopper), str(inc)))
    except SynthError as exc:
        lines = str(exc).splitlines()  # "nvcc failed:", then nvcc's output: its first error line
        first = next((ln for ln in lines[1:] if re.search(r"\berror\b", ln)), lines[0] if lines else "")
        return {"error": f"does not compile with {where}: {first.strip()[:200]}"}
    secs = time.monotonic() - t0
    f = kernel_figures(c, d // 16 + bn // 16)
    f["smem"] = "dynamic"
    f["tile"] = f"{bm}x{bn}" + (f" cluster {cluster}" if cluster > 1 else "")
    f["compile"] = "cached" if secs < 2.0 else f"{secs:.0f} s"
    f["cutlass"] = where
    return f


# --------------------------------------------------------------------------------------------------- tables

COLUMNS = [("tile", "tile"), ("hgmma_shapes", "HGMMA shapes"), ("blocks", "KV blocks / iter"),
           ("per_hgmma", "insn / HGMMA"), ("longest_free", "longest HGMMA-free"), ("ex2_per_block", "EX2 / block"),
           ("shfl_per_block", "SHFL / block"), ("waits_per_block", "wgmma waits / block"),
           ("ptxas_wgmma", "ptxas serializes wgmma"), ("injected", "ptxas-injected waits"),
           ("registers", "regs (ptxas)"), ("setmaxnreg", "setmaxnreg"),
           ("smem", "smem B"), ("spills", "spill B"), ("loop_local", "LDL+STL in loop"),
           ("compile", "compile")]


def sass_table(rows: list[tuple[str, dict]]) -> Table:
    t = Table(title="Consumer main loop, sm_90a SASS (static proxies, not timings)")
    t.add_column("kernel")
    for _, head in COLUMNS:
        t.add_column(head, justify="right")
    for name, f in rows:
        if "error" in f:
            t.add_row(name, f["error"].split(":")[0] + " (below)", *[""] * (len(COLUMNS) - 1))
        else:
            t.add_row(name, *(str(f.get(k, "")) for k, _ in COLUMNS))
    return t


def solve_table(solved: list[Solved], twill: tuple[float, float], twill_source: str) -> Table:
    t = Table(title=f"Attention schedule solve time on this machine ({os.cpu_count()} cores); Twill: "
                    f"{twill[0]:g}-{twill[1]:g} s ({twill_source})")
    for c in ("problem", "tile", "seconds", "status", "II", "bound", "gap", "consumers", "smem B", "registers"):
        t.add_column(c, justify="right" if c not in ("problem", "status") else "left")
    for s in solved:
        sc = s.schedule
        t.add_row(s.path.name, f"{s.tile.BM}x{s.tile.BN} d{s.tile.d}", f"{s.seconds:.1f}", sc.status, str(sc.ii),
                  str(sc.bound), f"{sc.gap:.3f}", f"{sc.consumers} {sc.mode}", str(sc.smem),
                  f"{sc.register_need} / {sc.registers[1]}")
    return t


def predict_table(solved: list[Solved], bench: dict, published, insns: Optional[dict] = None) -> Table:
    """The prediction of each solved schedule at the FA3 benchmark's sizes; ``insns``: ``(d, BM, BN, causal) ->``
    a consumer warp's instructions per KV block in synth's kernel, for the issue column."""
    insns = insns or {}
    best = max((p for p in published if p.dtype == "f16"), key=lambda p: p.tflops, default=None)
    title = "Predicted forward TFLOP/s on H100 SXM (synth/search/attention_estimate.py)"
    if best is not None:
        title += f"; FA3 published best f16: {best.tflops:g} ({best.config})"
    t = Table(title=title)
    for c in ("schedule", "causal", "seqlen", "batch x heads", "II alone", "persistent", "one CTA per tile",
              "issue / block", "waves", "bound"):
        t.add_column(c, justify="right" if c not in ("schedule", "bound") else "left")
    for s in solved:
        for causal in (False, True):
            for n in bench["seqlens"]:
                shape = AttentionShape.fa3_benchmark(n, s.tile.d, causal, bench["tokens"], bench["hidden"])
                li = insns.get((s.tile.d, s.tile.BM, s.tile.BN, causal))
                e = predict_attention(s.schedule, s.tile, shape, loop_instructions=li)
                g = predict_attention(s.schedule, s.tile, shape, persistent=False, loop_instructions=li)
                t.add_row(f"{s.tile.BM}x{s.tile.BN} d{s.tile.d} II {s.schedule.ii}", "yes" if causal else "no",
                          str(n), f"{shape.batch} x {shape.heads}", f"{e.steady_tflops:.0f}", f"{e.tflops:.0f}",
                          f"{g.tflops:.0f}", f"{e.issue_cycles} of {e.block_cycles}" if li else "-",
                          f"{e.wave_efficiency:.2f}", e.bound)
    peak = predict_attention(solved[0].schedule, solved[0].tile, AttentionShape(1, 1, 1, solved[0].tile.d)).peak_tflops \
        if solved else 0.0
    t.caption = (f"II alone: 4 BM BN d / II per SM and cycle, all SMs, 1.755 GHz (tensor peak {peak:.0f}); "
                 "persistent: FA3's schedulers; one CTA per tile: a grid, each CTA loading its Q; issue / block: "
                 "consumers x synth's SASS loop instructions per KV block, of the block's cycles")
    return t


def twill_seconds(path: Optional[str] = None) -> tuple[tuple[float, float], str]:
    """Twill's published solve times for its FlashAttention schedules and their source (the data file)."""
    with open(path or PUBLISHED_ATTENTION_FILE, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    tw = doc["twill"]
    return (float(tw["seconds"][0]), float(tw["seconds"][1])), " ".join(str(tw["source"]).split())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fa3", help="a flash-attention checkout (default: $SYNTH_FA3)")
    ap.add_argument("--no-fa3", action="store_true")
    ap.add_argument("--only", default=",".join(CONFIGS), help="rows: " + ", ".join(CONFIGS))
    ap.add_argument("--time-limit", type=float, default=60.0, help="solve_ws's limit per problem file, seconds")
    ap.add_argument("--no-predict", action="store_true")
    ap.add_argument("--tiles", default="128:128x176",
                    help="more attention tiles to solve and predict, d:BMxBN comma-separated (default FA3's head-dim-128 "
                         "non-causal tile; '' for none)")
    args = ap.parse_args(argv)
    console = Console(width=240)
    solved = [solve_problem(p, args.time_limit) for p in PROBLEMS]
    by_d = {s.tile.d: s for s in solved}
    for spec in filter(None, args.tiles.split(",")):
        d, bm_bn = spec.split(":")
        bm, bn = bm_bn.split("x")
        solved.append(solve_tile(AttentionTile(int(bm), int(bn), int(d)), args.time_limit))
    fa3 = None if args.no_fa3 else fa3_checkout(args.fa3)
    rows: list[tuple[str, dict]] = []
    insns: dict = {}
    for key in args.only.split(","):
        d, causal = CONFIGS[key]
        label = f"d{d} {'causal' if causal else 'non-causal'}"
        if d in by_d:
            f = synth_row(by_d[d], causal)
            rows.append((f"synth {label}", f))
            if "error" not in f and f["blocks"]:
                t = by_d[d].tile
                insns[(d, t.BM, t.BN, causal)] = f["loop_insns"] / f["blocks"]
        if args.no_fa3:
            continue
        if fa3 is None:
            rows.append((f"FA3 {label}", {"error": "not available (pass --fa3 PATH to a flash-attention checkout)"}))
        else:
            rows.append((f"FA3 {label}", fa3_row(fa3, d, causal)))
    console.print(sass_table(rows))
    for name, f in rows:
        if "error" in f:
            console.print(f"{name}: {f['error']}")
        if "cutlass" in f:
            console.print(f"{name}: CUTLASS from {f['cutlass']}")
        if f.get("serialized_reason"):
            console.print(f"{name}: ptxas serializes its wgmmas: {f['serialized_reason']}")
    tw, tw_src = twill_seconds()
    console.print(solve_table(solved, tw, tw_src))
    if not args.no_predict:
        published, bench = published_attention()
        console.print(predict_table(solved, bench, published, insns))
        for p in published:
            console.print(f"published: {p.name}: {p.tflops:g} TFLOP/s {p.dtype} on {p.gpu} -- {p.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

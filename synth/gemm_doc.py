"""The YAML front end of ``kind: gemm`` problems: a document to a checked :class:`~synth.problem.Problem`.

Keys: ``name``, ``description``, ``shape: {M, N, K}``, ``dtype`` (f16),
``tile: {BM, BN, BK}``, ``warps``, ``stages`` (int or ``auto``), ``arch``, and
optionally ``schedule`` (pins overriding those ``stages`` implies),
``objective`` and ``target: {shared_bytes, registers_bytes}`` (lower limits).

Every number is checked against its bound (:mod:`synth.bounds`) before
:mod:`synth.gemm` sees it; then :func:`synth.gemm.expand_gemm` validates the
configuration (tiling, alignment, shared memory, registers) and builds the loop.
"""

from __future__ import annotations

from .arch import ARCHS, get_arch
from .bounds import MAX_BYTES, MAX_GEMM_DIM, MAX_GEMM_STAGES, MAX_SPLIT_K, MAX_TILE_K, MAX_TILE_MN
from .errors import Loc, SynthError
from .gemm import DTYPES, GemmConfig, check_config, default_pins, expand_gemm
from .hopper.problem import MAINLOOPS, HopperGemm, hopper_gemm_from_doc
from .problem import Objective, Pins, Problem
from .sections import check_name, check_problem, parse_objective, parse_pins
from .yamlnodes import LDict, check_bound, check_keys, require, suggest, want_int

GEMM_KEYS = ("name", "description", "kind", "shape", "dtype", "tile", "warps", "stages", "split_k", "stream_k", "arch", "mainloop",
             "k_pipe_mmas", "min_k_tiles", "loop", "schedule", "objective", "target", "persistent",
             "epilogue", "pingpong", "out_dtype", "cluster", "activation")
"""Top-level keys of a ``kind: gemm`` document (``loop`` only to say it is derived)."""


def problem_from_gemm_doc(doc: LDict, path: str) -> "Problem | HopperGemm":
    """A ``kind: gemm`` document (an :class:`~synth.yamlnodes.LDict`) to a checked Problem.

    With ``mainloop: tma_wgmma`` (the default for ``arch: sm_90``) the result is a
    :class:`~synth.hopper.problem.HopperGemm` instead: the Hopper flow's problem
    (docs/hopper_kernel.md); ``mainloop: cp_async`` keeps the Ampere loop on any arch.
    """
    locs: dict[str, Loc] = {"": doc.loc}
    for k in doc:
        locs[k] = doc.val_loc[k]

    if "loop" in doc:
        raise SynthError(doc.key_loc["loop"], "a gemm problem's loop is derived from shape.K and tile.BK",
                         "remove 'loop:'; set shape.K and tile.BK instead")
    name = check_name(doc, required=False)

    shape = require(doc, "shape", "a gemm problem", "add shape: {M: 4096, N: 4096, K: 4096}")
    if not isinstance(shape, LDict):
        raise SynthError(doc.val_loc["shape"], "'shape' must be a mapping", "write shape: {M: 4096, N: 4096, K: 4096}")
    check_keys(shape, ("M", "N", "K"), "shape")
    dims = {}
    for k in ("M", "N", "K"):
        dims[k] = want_int(shape, k, "shape", lo=1, hi=MAX_GEMM_DIM)
        locs[f"shape.{k}"] = shape.val_loc[k]

    arch_name = doc.get("arch", "sm_80")
    if not isinstance(arch_name, str):
        raise SynthError(doc.val_loc["arch"], f"arch {arch_name!r} is not a name", "write arch: sm_80")
    try:
        arch = get_arch(arch_name)
    except KeyError:
        names = list(ARCHS)
        raise SynthError(doc.val_loc["arch"], f"unknown arch {arch_name!r}",
                         f"synth targets {', '.join(names)} (cp.async needs sm_80 or newer); "
                         f"{suggest(arch_name, names)}") from None

    mainloop = doc.get("mainloop", "tma_wgmma" if arch_name == "sm_90" else "cp_async")
    if mainloop not in MAINLOOPS:
        raise SynthError(doc.val_loc["mainloop"], f"unknown mainloop {mainloop!r}",
                         f"use one of {', '.join(MAINLOOPS)}; {suggest(str(mainloop), MAINLOOPS)}")
    if mainloop == "tma_wgmma":
        if arch_name != "sm_90":
            raise SynthError(doc.val_loc["mainloop"], f"mainloop: tma_wgmma needs TMA and wgmma, which {arch_name} does not have",
                             "use arch: sm_90, or mainloop: cp_async")
        return hopper_gemm_from_doc(doc, path, name or _hopper_name(dims, doc), dims, arch_name)
    if "k_pipe_mmas" in doc:
        raise SynthError(doc.key_loc["k_pipe_mmas"], "k_pipe_mmas belongs to the Hopper main loop (wgmma groups)",
                         "remove k_pipe_mmas:, or use arch: sm_90 with mainloop: tma_wgmma")
    if "out_dtype" in doc and doc["out_dtype"] != "f32":
        raise SynthError(doc.val_loc["out_dtype"], f"out_dtype {doc['out_dtype']!r}: the cp.async kernel stores C as "
                         "f32; f16 and bf16 output is the Hopper TMA-store epilogue's (docs/hopper_store.md)",
                         "remove out_dtype:, or use arch: sm_90 with mainloop: tma_wgmma and epilogue: tma_store")
    if "activation" in doc and doc["activation"] != "none":
        raise SynthError(doc.val_loc["activation"], f"activation {doc['activation']!r}: the fused activation is built "
                         "for the Hopper kernel's epilogues only (synth/emit/sm90/epilogue.py); the cp.async kernel "
                         "(synth/emit/cuda.py) stores C = alpha A B^T + beta C_in",
                         "remove activation:, or use arch: sm_90 with mainloop: tma_wgmma")
    if "pingpong" in doc and doc["pingpong"] is not False:
        raise SynthError(doc.key_loc["pingpong"], "ping-pong consumers are built for the Hopper main loop only "
                         "(docs/hopper_pingpong.md)", "remove pingpong:, or use arch: sm_90 with mainloop: tma_wgmma")
    if "cluster" in doc and doc["cluster"] != "1x1":
        raise SynthError(doc.val_loc["cluster"], f"cluster {doc['cluster']!r}: thread-block clusters are built for "
                         "the Hopper main loop only (docs/hopper_cluster.md)",
                         "remove cluster:, or use arch: sm_90 with mainloop: tma_wgmma")
    if "epilogue" in doc and doc["epilogue"] != "register":
        raise SynthError(doc.val_loc["epilogue"], f"epilogue {doc['epilogue']!r}: the TMA-store epilogue is built for "
                         "the Hopper main loop only (docs/hopper_store.md); the cp.async kernel stores C from registers",
                         "remove epilogue:, or use arch: sm_90 with mainloop: tma_wgmma")
    if "persistent" in doc:
        raise SynthError(doc.key_loc["persistent"], "persistent tiles are built for the Hopper main loop only "
                         "(docs/hopper_kernel.md, \"Persistent tiles\")",
                         "remove persistent:, or use arch: sm_90 with mainloop: tma_wgmma")

    dtype = doc.get("dtype", "f16")
    if not isinstance(dtype, str):
        raise SynthError(doc.val_loc["dtype"], f"dtype {dtype!r} is not a type name", "write dtype: f16")
    if dtype not in DTYPES:
        known = ("tf32", "f32", "bf16")
        msg = (f"dtype {dtype!r} is not yet supported (only f16 operands with f32 accumulation)" if dtype in known
               else f"unknown dtype {dtype!r}")
        raise SynthError(doc.val_loc["dtype"], msg, "use dtype: f16")

    tile = doc.get("tile")
    tdims = {"BM": 128, "BN": 128, "BK": 32}
    if tile is not None:
        if not isinstance(tile, LDict):
            raise SynthError(doc.val_loc["tile"], "'tile' must be a mapping", "write tile: {BM: 128, BN: 128, BK: 32}")
        check_keys(tile, ("BM", "BN", "BK"), "tile")
        for k in tile:
            tdims[k] = want_int(tile, k, "tile", lo=1, hi=MAX_TILE_K if k == "BK" else MAX_TILE_MN)
            locs[f"tile.{k}"] = tile.val_loc[k]
    warps = want_int(doc, "warps", "a gemm problem", lo=1, default=4, hi=16)

    stages = doc.get("stages", "auto")
    if stages == "auto":
        stages = None
    elif isinstance(stages, bool) or not isinstance(stages, int):
        raise SynthError(doc.val_loc["stages"], f"stages must be an integer or auto, not {stages!r}",
                         "write stages: 3, or stages: auto to let the solver choose")
    elif stages < 1:
        raise SynthError(doc.val_loc["stages"], f"stages is {stages}", "use at least 1 stage, or auto")
    else:
        check_bound(stages, MAX_GEMM_STAGES, doc.val_loc["stages"], "stages")

    split_k = want_int(doc, "split_k", "a gemm problem", lo=1, default=1, hi=MAX_SPLIT_K)
    if "split_k" in doc:
        locs["split_k"] = doc.val_loc["split_k"]
    stream_k = doc.get("stream_k", False)
    if not isinstance(stream_k, bool):
        raise SynthError(doc.val_loc["stream_k"], f"stream_k must be true or false, not {stream_k!r}",
                         "write stream_k: true (or remove it)")
    if "stream_k" in doc:
        locs["stream_k"] = doc.val_loc["stream_k"]
    cfg = GemmConfig(dims["M"], dims["N"], dims["K"], dtype, tdims["BM"], tdims["BN"], tdims["BK"], warps,
                     stages, arch_name, name, split_k, stream_k)
    # The k-tile loop runs T = ceil(K / BK) / split_k times (each split's share), T read at run time: one
    # kernel for every K whose splits have at least min_k_tiles k-tiles each (default 1: every K).
    # shape.K names the shape tuned for.
    check_config(cfg, path, locs, 1)
    min_k_tiles = want_int(doc, "min_k_tiles", "a gemm problem", lo=1, default=1,
                           hi=1 if stream_k else cfg.split_trip_count)

    shared_bytes = registers_bytes = None
    if "target" in doc:
        td = doc["target"]
        if not isinstance(td, LDict):
            raise SynthError(doc.val_loc["target"], "'target' must be a mapping", "write target: {shared_bytes: 98304}")
        check_keys(td, ("shared_bytes", "registers_bytes"), "a gemm problem's target")
        shared_bytes = want_int(td, "shared_bytes", "target", lo=0, default=None, hi=MAX_BYTES)
        if shared_bytes is not None and shared_bytes > arch.smem_per_block:
            raise SynthError(td.val_loc["shared_bytes"], f"target.shared_bytes {shared_bytes} exceeds the "
                             f"{arch.smem_per_block} B a CTA may use on {arch.name}",
                             f"use at most {arch.smem_per_block}, or omit it")
        registers_bytes = want_int(td, "registers_bytes", "target", lo=0, default=None, hi=MAX_BYTES)

    check_config(cfg, path, locs, min_k_tiles)  # default_pins needs a legal tiling
    base = default_pins(cfg, doc.loc)
    pins = base
    if "schedule" in doc:
        plain = expand_gemm(cfg, path, locs, base, Objective(), shared_bytes, registers_bytes, min_k_tiles)
        user = parse_pins(doc["schedule"], doc, plain.ops, plain.loop)
        if user.stage is not None and stages is not None and max(user.stage) + 1 != stages:
            raise SynthError(user.stage_loc or user.loc, f"schedule.stage has {max(user.stage) + 1} stages but "
                             f"stages is {stages}", "make them agree, or set stages: auto")
        # the default order goes with the default stages only
        order = user.order if user.order is not None else (base.order if user.stage is None else None)
        pins = Pins(stage=user.stage if user.stage is not None else base.stage,
                    order=order,
                    async_stages=user.async_stages if user.async_stages is not None else base.async_stages,
                    max_stage=(user.max_stage if user.max_stage is not None
                               else (max(user.stage) if user.stage is not None else base.max_stage)),
                    loc=user.loc, stage_loc=user.stage_loc or base.stage_loc,
                    order_loc=user.order_loc or (base.order_loc if order is base.order else None))
    objective = parse_objective(doc.get("objective"), doc)
    problem = expand_gemm(cfg, path, locs, pins, objective, shared_bytes, registers_bytes, min_k_tiles)
    check_problem(problem)
    return problem


def _hopper_name(dims: dict, doc: LDict) -> str:
    """The default name of an unnamed Hopper gemm problem (as :meth:`GemmConfig.problem_name`)."""
    tile = doc.get("tile") if isinstance(doc.get("tile"), LDict) else {}
    bm, bn = tile.get("BM", 128), tile.get("BN", 128)
    st, kp = doc.get("stages", "auto"), doc.get("k_pipe_mmas", "auto")
    split = f"-split{doc['split_k']}" if doc.get("split_k", 1) != 1 else ""
    return f"gemm-{dims['M']}x{dims['N']}x{dims['K']}-{doc.get('dtype', 'f16')}-{bm}x{bn}x64-s{st}-k{kp}{split}-sm_90"


__all__ = ["GEMM_KEYS", "problem_from_gemm_doc"]

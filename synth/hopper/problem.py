"""A ``kind: gemm`` problem on the Hopper main loop (``mainloop: tma_wgmma``), read and checked.

The loader (:mod:`synth.gemm_doc`) hands a ``kind: gemm`` document here when its main loop is
``tma_wgmma`` (the default for ``arch: sm_90``). :func:`hopper_gemm_from_doc` reads every key (its
type, its value among the names it may take, an integer within its documented bound, ``auto``),
builds the kernel's design (:class:`~synth.hopper.kernel_design.KernelDesign`: a CTA tile
``BM x BN x 64``, f16 or bf16 operands, ``stages`` and ``k_pipe_mmas`` pinned or chosen by CP-SAT,
the scheduler and the epilogue) and refuses the first of the design's own issues
(:meth:`KernelDesign.issues` with the problem's shape and ``target.shared_bytes``) at the line of its
key, with the design's message and fix: the kernel's rules (the tile, the pipeline, the shared
memory within 227 KiB, the shape's strides, which parts go together) are stated there, not here
(docs/hopper_kernel.md, "Bounds"). The result is a :class:`HopperGemm`, the first stage of the
Hopper flow (:mod:`synth.flow.hopper`): problem -> choice -> program -> {proof, kernel}.

Keys of the Ampere flow that have no meaning here are refused with a fix rather than ignored:
``schedule`` (op pins), ``objective``, ``min_k_tiles`` (the Hopper program is proven for every
``T >= 1``) and ``target.registers_bytes`` (registers are split by ``setmaxnreg``). A ``warps:`` is the
design's to check (:meth:`KernelDesign.warp_issues`: a producer warp group and the consumers', ``BM / 64`` of
them, or two for ping-pong).

``cluster:`` (``1x1``, ``2x1``, ``1x2`` or ``auto``; docs/hopper_cluster.md) pairs two CTAs that share an
operand tile; the design refuses it with split-K or ping-pong consumers; ``cluster: auto`` with split-K is refused
here (nothing to choose), other ``auto`` ones are left to :mod:`synth.hopper.design`, which pairs a cluster with
one CTA per tile or a persistent grid, never ping-pong.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from ..bounds import MAX_SPLIT_K
from ..errors import Loc, SynthError
from ..yamlnodes import (LDict, check_keys, comment_block, leading_comments, read_yaml_text, want_int, yaml_flow,
                         yaml_line)
from .kernel_design import (ACTIVATIONS, ALIGN_PAD, BK, CLUSTERS, DTYPES, EPILOGUES, MAX_STAGES, OUT_DTYPES,
                            SMEM_LIMIT, UNCHOSEN, Issue, KernelDesign, consumers_of, warps_of)

MAINLOOPS = ("tma_wgmma", "cp_async")
"""``mainloop:`` values: the Hopper TMA + mbarrier + wgmma loop, or the Ampere cp.async + mma.sync loop."""


@dataclass(frozen=True)
class HopperGemm:
    """A validated Hopper GEMM problem: ``C = alpha A B^T (+ beta C_in)``, A M x K, B N x K, computed by the kernel
    ``design`` (:class:`~synth.hopper.kernel_design.KernelDesign`, whose ``stages`` and ``k_pipe_mmas`` are None
    until CP-SAT chooses them, unless the problem pins them). The design's knobs read flat (``g.BM``, ``g.persistent``,
    ``g.epilogue``, ...); build one with :meth:`of`."""

    name: str
    M: int
    N: int
    K: int
    design: KernelDesign = KernelDesign.of(stages=None, k_pipe_mmas=None)
    shared_limit: int = SMEM_LIMIT
    """Shared memory the kernel may use (``target.shared_bytes`` or 227 KiB)."""
    arch: str = "sm_90"
    path: str = "<memory>"
    locs: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    """``key -> Loc`` of the document's values (errors point at them)."""
    auto: tuple[str, ...] = ()
    """Design keys the problem writes ``auto`` (``persistent``, ``pingpong``, ``epilogue``, ``cluster``): synth chooses them
    (:mod:`synth.hopper.design`); until then the design holds their defaults, or, where the defaults do not build
    with the other keys (``out_dtype: f16`` and ``epilogue: auto``), the first values that do
    (:func:`hopper_gemm_from_doc`)."""
    source: Optional[str] = field(default=None, compare=False, hash=False, repr=False)
    """The text of the problem file it was read from (the document's, :func:`synth.yamlnodes.read_yaml_text`); None
    when built in memory. The output folder's ``problem.yaml`` is written from it (:func:`hopper_problem_yaml`): the
    file is not read again after the proof."""
    pinned_warps: Optional[int] = None
    """The problem's ``warps:`` (None: left out): the designs synth may choose for ``auto`` keys run that many warps
    (:meth:`~synth.hopper.kernel_design.KernelDesign.warp_issues`)."""

    @classmethod
    def of(cls, name: str, M: int, N: int, K: int, dtype: str = "f16", BM: int = 128, BN: int = 128,
           stages: Optional[int] = None, k_pipe_mmas: Optional[int] = None, shared_limit: int = SMEM_LIMIT,
           arch: str = "sm_90", path: str = "<memory>", locs: Optional[dict] = None, *, auto: tuple = (),
           source: Optional[str] = None, **knobs) -> "HopperGemm":
        """The problem of this shape with the kernel of these knobs (:meth:`KernelDesign.of`'s; ``stages`` and
        ``k_pipe_mmas`` None: CP-SAT chooses)."""
        design = KernelDesign.of(name=name, dtype=dtype, bm=BM, bn=BN, stages=stages, k_pipe_mmas=k_pipe_mmas,
                                 **knobs)
        return cls(name, M, N, K, design, shared_limit, arch, path, locs or {}, auto, source)

    def with_(self, **knobs) -> "HopperGemm":
        """The problem with some knobs of its design changed (:meth:`KernelDesign.with_`'s names)."""
        return replace(self, design=self.design.with_(**knobs))

    # the design's knobs, read flat
    dtype = property(lambda self: self.design.dtype)
    BM = property(lambda self: self.design.bm)
    BN = property(lambda self: self.design.bn)
    BK = property(lambda self: self.design.bk)
    stages = property(lambda self: self.design.stages, doc="Pipeline depth; None: CP-SAT chooses.")
    k_pipe_mmas = property(lambda self: self.design.k_pipe_mmas,
                           doc="wgmma groups a consumer keeps in flight before releasing a slot; None: CP-SAT chooses.")
    split_k = property(lambda self: self.design.split_k)
    persistent = property(lambda self: self.design.persistent)
    epilogue = property(lambda self: self.design.epilogue)
    pingpong = property(lambda self: self.design.pingpong)
    out_dtype = property(lambda self: self.design.out_dtype)
    cluster = property(lambda self: self.design.cluster)
    activation = property(lambda self: self.design.activation)
    consumers = property(lambda self: self.design.consumers)
    ring_consumers = property(lambda self: self.design.ring_consumers)
    warps = property(lambda self: self.design.warps)

    @property
    def trip_count(self) -> int:
        """k-tiles of ``shape.K`` (the kernel itself takes any ``K``)."""
        return -(-self.K // self.BK)

    def at(self, stages: int, k_pipe_mmas: int = 0) -> KernelDesign:
        """The kernel with ``stages`` and ``k_pipe_mmas`` (the pipeline choice)."""
        return self.design.with_(stages=stages, k_pipe_mmas=k_pipe_mmas)

    def smem_bytes(self, stages: int) -> int:
        """Dynamic shared memory of the kernel at ``stages`` (:attr:`KernelDesign.smem_bytes`)."""
        return self.at(stages).smem_bytes

    def max_stages(self) -> int:
        """Most stages within ``shared_limit`` and the 16-stage bound (0 when not even one fits)."""
        return self.at(1).max_stages(self.shared_limit)

    def loc(self, key: str) -> Loc:
        return self.locs.get(key) or self.locs.get("") or Loc(self.path)


def _loc(d: LDict, key: str) -> Loc:
    return d.val_loc.get(key, d.loc) if isinstance(d, LDict) else Loc("<memory>")


def _refuse(doc: LDict, key: str, why: str, fix: str) -> None:
    if key in doc:
        raise SynthError(doc.key_loc[key], why, fix)


def _auto_or_int(doc: LDict, key: str, lo: int, hi: int, what: str) -> Optional[int]:
    if key not in doc or doc[key] == "auto":
        return None
    v = doc[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise SynthError(doc.val_loc[key], f"{key} must be an integer or auto, not {v!r}",
                         f"write {key}: auto, or a whole number for {what}")
    if not lo <= v <= hi:
        raise SynthError(doc.val_loc[key], f"{key} is {v}, outside {lo}..{hi} ({what})",
                         f"use a value in {lo}..{hi}, or auto")
    return v


def _cluster(doc: LDict, split_k: int) -> str:
    """The ``cluster:`` value of ``doc`` (``1x1`` when absent or ``auto``: the design holds it until
    :mod:`synth.hopper.design` chooses), refused at its line with the fix when it is not one of :data:`CLUSTERS`, or
    ``auto`` with a split (a cluster kernel has no split-K: nothing to choose)."""
    if "cluster" not in doc:
        return "1x1"
    v, loc = doc["cluster"], doc.val_loc["cluster"]
    if v == "auto":  # synth.hopper.design chooses among the shapes legal with the other keys
        if split_k > 1:
            raise SynthError(loc, f"cluster: auto with split_k = {split_k}: a cluster kernel has no split-K, so "
                             "there is nothing to choose", "remove cluster:, or use split_k: 1")
        return "1x1"
    if not isinstance(v, str) or v not in CLUSTERS:
        raise SynthError(loc, f"cluster {v!r}: expected one of {', '.join(CLUSTERS)} (CTAs along M x along N)",
                         "write cluster: 2x1 (two CTAs of a tile column share and multicast B), 1x2 (a tile row "
                         "shares A), or remove it (1x1: no cluster)")
    return v


def _reported(issues: list[Issue], stated: set, auto: tuple) -> list[Issue]:
    """The design's ``issues`` a problem is refused for, first the one to report: the design's order (the order a
    reader fixes them), except that an issue at a key the file does not state (absent, ``auto``, or implied by
    another key, as ``persistent`` by ``pingpong: true``) or joined to an ``auto`` key (:attr:`Issue.other`) follows
    the others; without the pipeline's :data:`UNCHOSEN` (CP-SAT chooses ``stages`` and ``k_pipe_mmas`` left
    ``auto``)."""
    kept = [i for i in issues if i.rule != UNCHOSEN]
    return sorted(kept, key=lambda i: i.key not in stated or i.other in auto)


def _design_issues(d: KernelDesign, limit: int, shape: tuple, warps: Optional[int]) -> list[Issue]:
    """The design's issues (:meth:`KernelDesign.issues` at the problem's shape) with ``warps:``'s
    (:meth:`KernelDesign.warp_issues`) after the tile's: the warp count is the tile's and the consumers'."""
    issues = d.issues(limit, shape)
    tile = [i for i in issues if i.key.startswith("tile.")]
    return tile + d.warp_issues(warps) + [i for i in issues if not i.key.startswith("tile.")]


def _held(d: KernelDesign, limit: int, shape: tuple, warps: Optional[int], stated: set, auto: tuple
          ) -> tuple[KernelDesign, list[Issue]]:
    """The design a problem holds until synth chooses its ``auto`` keys, and the issues it is refused for
    (:func:`_reported`'s order; empty: accepted). ``d`` holds the ``auto`` keys' defaults; where an issue of it is at
    an ``auto`` key or joined to one, synth chooses among the other values: the first of ``d.auto_variants(auto)``
    that has no issue (an ``epilogue: auto`` with an f16 C holds the TMA store, the one epilogue that stores it),
    else ``d`` and its issues (no value of the ``auto`` keys builds)."""
    issues = _reported(_design_issues(d, limit, shape, warps), stated, auto)
    if any(i.key in auto or i.other in auto for i in issues):
        for v in d.auto_variants(auto):
            if not _reported(_design_issues(v, limit, shape, warps), stated, auto):
                return v, []
    return d, issues


def _refuse_issue(g: "HopperGemm", issue: Issue) -> None:
    """SynthError at the line of ``issue``'s key with its message (the line of its other key added) and fix."""
    other = g.locs.get(issue.other) if issue.other else None
    raise SynthError(g.loc(issue.key), issue.text(other.line if other else None), issue.fix)


def hopper_gemm_from_doc(doc: LDict, path: str, name: str, dims: dict, arch: str) -> HopperGemm:
    """The :class:`HopperGemm` of a ``kind: gemm`` document with ``mainloop: tma_wgmma``.

    ``name``, ``dims`` (``M``, ``N``, ``K``) and ``arch`` were already checked by the caller. Reads every key (its
    type, its values, the keys of the cp.async main loop refused, ``auto``), builds the design and refuses the first
    of its issues (:meth:`KernelDesign.issues` with the problem's shape, in :func:`_reported`'s order; ``warps:``
    against the design's warp count, :meth:`KernelDesign.warp_issues`, once the tile has none; the ``auto`` keys
    as :func:`_held` holds them).
    Raises :class:`~synth.errors.SynthError` at the offending value.
    """
    locs: dict = {"": doc.loc, **{k: doc.val_loc[k] for k in doc}}
    _refuse(doc, "schedule", "schedule: pins ops of the cp.async main loop; the Hopper main loop (mainloop: "
            "tma_wgmma) has no such ops", "pin stages: and k_pipe_mmas: instead, or set mainloop: cp_async")
    _refuse(doc, "objective", "objective: weighs terms of the cp.async latency model; the Hopper main loop "
            "has its own cost model (docs/hopper.md)", "remove objective:, or set mainloop: cp_async")
    _refuse(doc, "min_k_tiles", "the Hopper program is proven for every k-tile count T >= 1, so min_k_tiles "
            "has nothing to restrict", "remove min_k_tiles:")
    if doc.get("stream_k", False) is not False:  # stream_k: false says what the Hopper kernel does
        _refuse(doc, "stream_k", "stream-K is built for the cp.async main loop only (docs/cuda_kernel.md, "
            "\"Stream-K\"); the Hopper kernel splits K with split_k", "use split_k: S, or set mainloop: cp_async")
    dtype = doc.get("dtype", "f16")
    if dtype not in DTYPES:
        raise SynthError(_loc(doc, "dtype"), f"dtype {dtype!r}: the Hopper main loop takes f16 or bf16 operands "
                         "(f32 accumulation)", "use dtype: f16 or dtype: bf16")
    tdims = {"BM": 128, "BN": 128, "BK": BK}
    tile = doc.get("tile")
    if tile is not None:
        if not isinstance(tile, LDict):
            raise SynthError(doc.val_loc["tile"], "'tile' must be a mapping", "write tile: {BM: 128, BN: 128, BK: 64}")
        check_keys(tile, ("BM", "BN", "BK"), "tile")
        for k in tile:
            tdims[k] = want_int(tile, k, "tile", lo=1, hi=256)
            locs[f"tile.{k}"] = tile.val_loc[k]
    warps = want_int(doc, "warps", "a gemm problem", lo=1, hi=16) if "warps" in doc else None
    stages = _auto_or_int(doc, "stages", 1, MAX_STAGES, "slots per operand")
    k_pipe = _auto_or_int(doc, "k_pipe_mmas", 0, MAX_STAGES - 1, "wgmma groups kept in flight before a release")
    limit = SMEM_LIMIT
    if "target" in doc:
        td = doc["target"]
        if not isinstance(td, LDict):
            raise SynthError(doc.val_loc["target"], "'target' must be a mapping", "write target: {shared_bytes: 98304}")
        check_keys(td, ("shared_bytes", "registers_bytes"), "a gemm problem's target")
        _refuse(td, "registers_bytes", "the Hopper kernel's registers are split by setmaxnreg (docs/hopper_kernel.md)",
                "remove target.registers_bytes")
        sb = want_int(td, "shared_bytes", "target", lo=0, default=None, hi=SMEM_LIMIT)
        if sb is not None:
            limit = sb
            locs["target.shared_bytes"] = td.val_loc["shared_bytes"]
    split_k = want_int(doc, "split_k", "a gemm problem", lo=1, default=1, hi=MAX_SPLIT_K)
    auto = tuple(k for k in ("persistent", "pingpong", "epilogue", "cluster") if doc.get(k) == "auto")
    persistent = False if "persistent" in auto else doc.get("persistent", False)
    if not isinstance(persistent, bool):
        raise SynthError(doc.val_loc["persistent"], f"persistent must be true or false, not {persistent!r}",
                         "write persistent: true (a persistent grid walks the tiles), auto, or remove it")
    epilogue = "register" if "epilogue" in auto else doc.get("epilogue", "register")
    if epilogue not in EPILOGUES:
        raise SynthError(doc.val_loc["epilogue"], f"epilogue {epilogue!r}: expected one of {', '.join(EPILOGUES)}",
                         "write epilogue: tma_store (C through shared staging buffers and TMA stores), auto, or remove it")
    pingpong = False if "pingpong" in auto else doc.get("pingpong", False)
    if not isinstance(pingpong, bool):
        raise SynthError(doc.val_loc["pingpong"], f"pingpong must be true, false or auto, not {pingpong!r}",
                         "write pingpong: true (two consumer warp groups take tiles in turn), auto, or remove it")
    if pingpong and ("persistent" not in doc or "persistent" in auto):
        persistent = True  # pingpong: true implies it (persistent: false is the design's to refuse)
    out_dtype = doc.get("out_dtype", "f32")
    if out_dtype not in OUT_DTYPES:
        raise SynthError(doc.val_loc["out_dtype"], f"out_dtype {out_dtype!r}: expected one of {', '.join(OUT_DTYPES)}",
                         "write out_dtype: f16 (C stored as f16 by the TMA-store epilogue), or remove it (f32)")
    activation = doc.get("activation", "none")
    if activation not in ACTIVATIONS:
        raise SynthError(doc.val_loc["activation"], f"activation {activation!r}: expected one of "
                         f"{', '.join(ACTIVATIONS)}", "write activation: relu (C = max(alpha A B^T + beta C_in, 0)), "
                         "or remove it (none)")
    cluster = _cluster(doc, split_k)
    g = HopperGemm.of(name, dims["M"], dims["N"], dims["K"], dtype, tdims["BM"], tdims["BN"], stages, k_pipe, limit,
                   arch, path, locs, split_k=split_k, persistent=persistent, epilogue=epilogue, pingpong=pingpong,
                   auto=auto, out_dtype=out_dtype, cluster=cluster, activation=activation, bk=tdims["BK"],
                   source=getattr(doc, "source", None))
    stated = {k for k in locs if k and doc.get(k) != "auto"}
    design, issues = _held(g.design, limit, (g.M, g.N, g.K), warps, stated, auto)
    if issues:
        _refuse_issue(g, issues[0])
    return replace(g, design=design, pinned_warps=warps)


CHOSEN = "chosen by synth solve (the problem said auto; docs/hopper_design.md)"
"""The comment on a design key of an output folder's ``problem.yaml`` that the problem left to synth."""


def hopper_gemm_yaml(g: HopperGemm) -> str:
    """A problem file reproducing ``g`` (for folders of problems built in memory), written by the one YAML
    writer (:func:`synth.yamlnodes.yaml_line`: a name such as ``"123"`` stays a string)."""
    items: list = [("name", g.name), ("kind", "gemm"), ("shape", {"M": g.M, "N": g.N, "K": g.K}), ("dtype", g.dtype),
                   ("tile", {"BM": g.BM, "BN": g.BN, "BK": g.BK}), ("arch", g.arch), ("mainloop", "tma_wgmma"),
                   ("stages", "auto" if g.stages is None else g.stages),
                   ("k_pipe_mmas", "auto" if g.k_pipe_mmas is None else g.k_pipe_mmas)]
    if g.split_k != 1:
        items.append(("split_k", g.split_k))
    # the chosen value of an auto key stands (a folder's problem.yaml pins what synth chose)
    for key, default in (("persistent", False), ("epilogue", "register"), ("pingpong", False)):
        if getattr(g, key) != default or key in g.auto:
            items.append((key, getattr(g, key)))
    if g.out_dtype != "f32":
        items.append(("out_dtype", g.out_dtype))
    if g.activation != "none":
        items.append(("activation", g.activation))
    if g.cluster != "1x1" or "cluster" in g.auto:
        items.append(("cluster", g.cluster))
    if g.shared_limit != SMEM_LIMIT:
        items.append(("target", {"shared_bytes": g.shared_limit}))
    return "\n".join(yaml_line(k, v, CHOSEN if k in g.auto else None) for k, v in items) + "\n"


def hopper_problem_yaml(g: HopperGemm) -> str:
    """The output folder's ``problem.yaml`` of ``g``: the problem file it was read from (``g.source``), written
    again by the one YAML writer (:mod:`synth.yamlnodes`), never edited as text. Its leading comments, then each
    key it gives, in its order, on a line of its own at column 0 (a mapping in flow style), each ``auto`` design key
    replaced by the value synth chose (with a comment saying so), the free-text ``description`` kept as comment
    lines. Whatever the spelling of the file (one flow mapping, a quoted name, a multi-line description, a key's
    value on the next line), the folder's file reads back to the same problem, and the certificate checker's line
    reader (synth/trusted/flags.py) reads its design keys as YAML does. A problem built in memory:
    :func:`hopper_gemm_yaml`."""
    if g.source is None:
        return hopper_gemm_yaml(g)
    doc = read_yaml_text(g.source, g.path)
    lines = leading_comments(doc)
    for key, value in doc.items():
        if key == "description":  # free text for people: a comment, which no reader of the file can mistake
            lines += comment_block("description", value if isinstance(value, str) else yaml_flow(value))
        elif key in g.auto:
            lines.append(yaml_line(key, getattr(g, key), CHOSEN))
        else:
            lines.append(yaml_line(key, value))
    return "\n".join(lines) + "\n"


__all__ = ["HopperGemm", "CLUSTERS", "consumers_of", "warps_of", "hopper_gemm_from_doc", "hopper_gemm_yaml",
           "hopper_problem_yaml", "CHOSEN", "MAINLOOPS", "DTYPES", "SMEM_LIMIT",
           "ALIGN_PAD", "BK"]

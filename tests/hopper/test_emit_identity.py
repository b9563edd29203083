"""The sm_90a emitter's text, byte for byte, for every design it builds: the guard of its refactors.

One sha256 (its first 16 hex digits) per case in ``tests/golden/sm90_emit_identity.json``. A case is an
:class:`KernelDesign` (every legal combination of the design fields: persistent, ping-pong, epilogue with its out
dtype and staging, cluster, split-K, dtype, load predicate; each with a spread of tiles, stages and ``K_PIPE_MMAS``,
plus a sweep of stages x ``K_PIPE_MMAS`` for the main designs) emitted from ``design_program(cfg)``, or one of the bug
tests' mutants (a tile carry, an order program, a store program, the ``cta`` scheduler, a program mutant) whose
text, or whose refusal's message, is hashed the same way. No compiler runs: hashing only, a few seconds. ``pytest
--update-golden`` rewrites the golden (for a deliberate change of the emitted text, reviewed in the diff);
``python tests/hopper/test_emit_identity.py`` prints the cases that differ from it.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import pytest

from synth.hopper.kernel_design import KernelDesign
from synth.emit.sm90.kernel import emit_sm90_kernel
from synth.lower.hopper_design import design_program
from synth.lower.hopper_design import design_store_program

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "golden" / "sm90_emit_identity.json"

BNS = (16, 48, 64, 80, 128, 144, 208, 256)
"""Tile widths: the smallest, store sub-tiles of 16 columns (48, 80, 144, 208) and of 32, the widest."""
STAGES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)
PREDICATES = ("k < T - 1", "k % 2 == 0")
DIGITS = 16
"""Hex digits of each sha256 kept in the golden (64 bits: a changed text is told apart all the same)."""


def _geometries() -> list[dict]:
    out = []
    for stages in STAGES:
        for kpm in sorted({0, 1, stages - 1} & set(range(stages))):
            for bm in (64, 128):
                for bn in BNS:
                    out.append(dict(bm=bm, bn=bn, stages=stages, k_pipe_mmas=kpm))
    return out


def _designs() -> list[dict]:
    """Every combination of the design fields that :meth:`KernelDesign.check` may accept (the tile decides)."""
    epilogues = [dict()] + [dict(epilogue="tma_store", staging=s) for s in (1, 2, 3, 4)] + \
        [dict(epilogue="tma_store", out_dtype=o, staging=s) for o in ("f16", "bf16") for s in (1, 2)]
    out = []
    for dtype in ("f16", "bf16"):
        for sched in (dict(), dict(persistent=True), dict(persistent=True, pingpong=True)):
            for ep in epilogues:
                for cluster in ("1x1", "2x1", "1x2"):
                    out.append(dict(dtype=dtype, cluster=cluster, **sched, **ep))
                    if not sched and cluster == "1x1":
                        out += [dict(dtype=dtype, load_when=w, **ep) for w in PREDICATES]
        out += [dict(dtype=dtype, split_k=s) for s in (2, 3, 5)]
    return out


SWEEP = (dict(), dict(bm=64, bn=64), dict(persistent=True), dict(persistent=True, pingpong=True, bm=64),
         dict(persistent=True, pingpong=True), dict(cluster="2x1"), dict(cluster="1x2", bm=64),
         dict(cluster="2x1", persistent=True), dict(cluster="1x2", persistent=True, bm=64, bn=64),
         dict(persistent=True, epilogue="tma_store"), dict(split_k=2), dict(load_when="k < T - 1"))
"""Designs run over every stages x K_PIPE_MMAS of 1..8 (the carried slots, the unrolled drains, the masks)."""


def _legal(kw: dict):
    cfg = KernelDesign.of(**kw)
    try:
        cfg.check()
    except ValueError:
        return None
    return cfg


def configs() -> list[KernelDesign]:
    """The configurations of the golden, each once, in a stable order."""
    geos = _geometries()
    out, seen = [], set()

    def add(kw):
        cfg = _legal(kw)
        if cfg is not None and cfg not in seen:
            seen.add(cfg)
            out.append(cfg)

    for i, d in enumerate(_designs()):
        # three geometries each, a different three per design (stride coprime to the list), and the design's
        # default tile
        for j in range(3):
            add({**geos[(7 * i + 53 * j) % len(geos)], **d})
        add(dict(d))
    for d in SWEEP:
        for stages in range(1, 9):
            for kpm in range(stages):
                add({**d, "stages": stages, "k_pipe_mmas": kpm})
    return out


def key(cfg: KernelDesign) -> str:
    """The knobs of ``cfg`` that differ from the defaults, ``name=value`` joined by commas (in the golden's order)."""
    base = KernelDesign.of()
    return ",".join(f"{k}={getattr(cfg, k)}" for k in KNOBS if getattr(cfg, k) != getattr(base, k)) or "default"


KNOBS = ("bm", "bn", "stages", "k_pipe_mmas", "load_when", "bk", "dtype", "name", "split_k", "persistent", "pingpong",
         "epilogue", "staging", "out_dtype", "cluster", "activation")
"""The design's knobs in the order the golden's keys name them."""


def _digest(thunk) -> str:
    try:
        text = thunk()
    except ValueError as e:  # a refusal is behaviour too: its message
        text = f"ValueError: {e}"
    return hashlib.sha256(text.encode()).hexdigest()[:DIGITS]


def mutant_cases() -> list[tuple[str, object]]:
    """``(name, thunk)`` of the emitter's other inputs: the bug tests' mutants of carry, order, store, scheduler
    and program (the emitted text or the refusal)."""
    from synth.verify.hopper_cluster import CLUSTER_BUGS
    from synth.hopper.mutants import field_mutants, mutants
    from synth.verify.hopper_persistent import CARRY_MUTANTS
    from synth.lower.hopper_pingpong import MUTANTS as ORDER_MUTANTS, order_program
    from synth.verify.hopper_pingpong import CARRY_MUTANTS as PP_CARRY
    from synth.hopper.store import STORE_MUTANTS, store_mutant

    cases: list = []
    pers = [KernelDesign.of(persistent=True), KernelDesign.of(persistent=True, stages=5, k_pipe_mmas=2, bn=80,
                                                    epilogue="tma_store"),
            KernelDesign.of(persistent=True, cluster="2x1"), KernelDesign.of(persistent=True, cluster="1x2", stages=3, bm=64),
            KernelDesign.of(persistent=True, pingpong=True, bm=64), KernelDesign.of(persistent=True, pingpong=True, stages=3)]
    for cfg in pers:
        roles = ("consumer", "producer") + (("consumer1", "producer0") if cfg.cluster_size > 1 else ())
        for name, c in sorted({**CARRY_MUTANTS, **(PP_CARRY if cfg.pingpong else {})}.items()):
            for role in roles:
                cases.append((f"{key(cfg)}|carry={role}:{name}",
                              lambda cfg=cfg, role=role, c=c: emit_sm90_kernel(cfg, carry={role: c})))
    for cfg in pers[4:]:
        for name in sorted(ORDER_MUTANTS):
            cases.append((f"{key(cfg)}|order={name}",
                          lambda cfg=cfg, name=name: emit_sm90_kernel(cfg, order=order_program(False, name))))
        cases.append((f"{key(cfg)}|order=odd", lambda cfg=cfg: emit_sm90_kernel(cfg, order=order_program(True))))
    for cfg in (KernelDesign.of(epilogue="tma_store"), KernelDesign.of(epilogue="tma_store", bn=208, out_dtype="bf16",
                                                             staging=3),
                KernelDesign.of(epilogue="tma_store", persistent=True), KernelDesign.of(epilogue="tma_store", persistent=True,
                                                                              pingpong=True, stages=5),
                KernelDesign.of(epilogue="tma_store", persistent=True, cluster="2x1", out_dtype="f16")):
        for name in sorted(STORE_MUTANTS):
            cases.append((f"{key(cfg)}|store={name}",
                          lambda cfg=cfg, name=name: emit_sm90_kernel(cfg, store=store_mutant(design_store_program(cfg),
                                                                                              name))))
    for cfg in (KernelDesign.of(persistent=True, cluster="2x1", bm=64, bn=64, stages=2),
                KernelDesign.of(persistent=True, cluster="1x2", stages=5), KernelDesign.of(cluster="2x1")):
        cases.append((f"{key(cfg)}|scheduler=cta", lambda cfg=cfg: emit_sm90_kernel(cfg, scheduler="cta")))
    for cfg in (KernelDesign.of(bm=128, bn=64, stages=3), KernelDesign.of(bm=64, bn=64, stages=4, k_pipe_mmas=2,
                                                                load_when="k < T - 1"),
                KernelDesign.of(persistent=True, stages=3), KernelDesign.of(split_k=2)):
        for name, mp, _ in mutants(design_program(cfg)):
            cases.append((f"{key(cfg)}|mutant={name}", lambda cfg=cfg, mp=mp: emit_sm90_kernel(cfg, mp)))
    for cfg in (KernelDesign.of(bm=64, bn=64, stages=2, k_pipe_mmas=1, cluster="2x1"),
                KernelDesign.of(bm=64, stages=3, cluster="1x2", persistent=True)):
        for name, (fn, _, _) in sorted(CLUSTER_BUGS.items()):
            cases.append((f"{key(cfg)}|cluster_bug={name}",
                          lambda cfg=cfg, fn=fn: emit_sm90_kernel(cfg, fn(design_program(cfg)))))
    for cfg in (KernelDesign.of(bm=64, bn=64, stages=2), KernelDesign.of(bm=64, bn=64, stages=2, cluster="2x1")):
        for name, mp in field_mutants(design_program(cfg)):
            cases.append((f"{key(cfg)}|field={name}", lambda cfg=cfg, mp=mp: emit_sm90_kernel(cfg, mp)))
    return cases


def hashes() -> dict[str, str]:
    """Case name -> sha256 of the emitted text (or of the refusal), every configuration and mutant case."""
    out = {key(cfg): _digest(lambda cfg=cfg: emit_sm90_kernel(cfg, design_program(cfg))) for cfg in configs()}
    for name, thunk in mutant_cases():
        assert name not in out, name
        out[name] = _digest(thunk)
    return out


def test_enumeration_covers_every_design():
    cfgs = configs()
    assert len(cfgs) >= 300
    for field, values in (("persistent", {False, True}), ("pingpong", {False, True}),
                          ("epilogue", {"register", "tma_store"}), ("out_dtype", {"f32", "f16", "bf16"}),
                          ("cluster", {"1x1", "2x1", "1x2"}), ("dtype", {"f16", "bf16"}),
                          ("staging", {1, 2, 3, 4}), ("stages", set(range(1, 9))), ("k_pipe_mmas", set(range(8))),
                          ("bm", {64, 128}), ("load_when", {None, *PREDICATES})):
        assert {getattr(c, field) for c in cfgs} >= values, field
    assert {c.split_k for c in cfgs} >= {1, 2, 3, 5}
    combos = {(c.persistent, c.pingpong, c.epilogue, c.cluster) for c in cfgs}
    assert (True, False, "tma_store", "2x1") in combos and (True, True, "tma_store", "1x1") in combos


def test_emitted_text_is_byte_identical(update_golden):
    got = hashes()
    if update_golden or not GOLDEN.exists():
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=0, sort_keys=True) + "\n")
        if not update_golden:
            pytest.fail(f"golden file {GOLDEN} was missing and has been written; re-run")
        return
    want = json.loads(GOLDEN.read_text())
    assert set(got) == set(want), (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])
    differ = sorted(k for k in got if got[k] != want[k])
    assert not differ, f"{len(differ)} of {len(got)} emitted kernels changed, e.g. {differ[:5]}"


if __name__ == "__main__":
    want = json.loads(GOLDEN.read_text())
    got = hashes()
    bad = sorted(k for k in got if want.get(k) != got[k])
    print(f"{len(got)} cases, {len(bad)} differ")
    for k in bad:
        print(" ", k)

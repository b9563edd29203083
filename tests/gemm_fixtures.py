"""Shared helpers of the gemm/CUDA tests: problems, schedules, programs.

``program_for`` uses :func:`synth.lower.lower` when it exists and otherwise a
small reference lowering of TVM's semantics (one group per step, committed
unconditionally as CUTLASS does; wait counts by simulation), so the emitter
can be tested on its own.
"""

from __future__ import annotations

import shutil

import pytest

from synth.expr import Bin, Ite, Num, Var, affine
from synth.gemm import GemmConfig, expand_gemm
from synth.graph import build_graph
from synth.program import Access, CommitStmt, OpStmt, Part, ProgBuffer, ProgOp, Program, Wait, WaitStmt
from synth.schedule import schedule_from_pins

NVCC = shutil.which("nvcc")
NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed for the CPU emulator")


CLUSTER_PROBLEM = """\
name: {name}
kind: gemm
shape: {{M: 512, N: 256, K: 1024}}
dtype: f16
tile: {{BM: 128, BN: 128, BK: 64}}
arch: sm_90
mainloop: tma_wgmma
cluster: 2x1
stages: 2
k_pipe_mmas: 1
"""
"""A small 2x1 cluster problem (2 stages: fast proofs); ``cluster:`` is on line 8. Fill ``name``."""

CLUSTER_SOLVED = CLUSTER_PROBLEM.format(name="cl2")
"""The 2x1 cluster problem the cluster tests solve (``solve_once(CLUSTER_SOLVED, *SOLVE_FLAGS)``: one folder)."""

PERSISTENT_CLUSTER_PROBLEM = """\
name: pcl
kind: gemm
shape: {M: 384, N: 64, K: 512}
dtype: f16
tile: {BM: 64, BN: 64, BK: 64}
arch: sm_90
mainloop: tma_wgmma
cluster: 2x1
persistent: true
stages: 2
k_pipe_mmas: 1
"""
"""A small persistent 2x1 cluster problem (6 tile rows: 3 cluster groups), solved once for the tests that use it."""

SOLVE_FLAGS = ("--time-limit", "300")
"""The flags of the shared cluster solves (a limit with room for a loaded machine; the same flags share a folder)."""


def gemm_doc(key_line: str) -> str:
    """A 2048^3 ``kind: gemm`` problem file (128x128x32 tiles, 4 warps, 3 stages, sm_80) with ``key_line`` at line 7."""
    return ("name: sk\nkind: gemm\nshape: {M: 2048, N: 2048, K: 2048}\ntile: {BM: 128, BN: 128, BK: 32}\n"
            f"warps: 4\nstages: 3\n{key_line}\narch: sm_80\n")


def gemm_problem(**kw):
    kw.setdefault("M", 512)
    kw.setdefault("N", 512)
    kw.setdefault("K", 512)
    return expand_gemm(GemmConfig(**kw))


def emitted_kernel(*, M=512, N=512, K=512, BM=64, BN=64, BK=32, warps=4, stages=3, **kw):
    """``(problem, schedule, program, kernel.cu text)`` of a gemm proved for every trip count from 1
    (``kw``: further GemmConfig fields, e.g. ``split_k``, ``stream_k``)."""
    from synth.emit.cuda import emit_kernel

    p = expand_gemm(GemmConfig(M=M, N=N, K=K, BM=BM, BN=BN, BK=BK, warps=warps, stages=stages, **kw), min_ktiles=1)
    s, prog = program_for(p)
    return p, s, prog, emit_kernel(p, s, prog)


def emulate_emitted(p, s, prog, text, M, N, K, **kw):
    """:func:`synth.emit.emulate.emulate_gemm` of ``text`` (the kernel of ``p``, ``s``, ``prog``) on ``M x N x K``."""
    from synth.emit.cuda import kernel_info
    from synth.emit.emulate import emulate_gemm

    cfg = p.gemm
    return emulate_gemm(text, M, N, K, BM=cfg.BM, BN=cfg.BN, warps=cfg.warps,
                        smem_bytes=kernel_info(p, s, prog).smem_bytes, **kw)


def program_for(problem, use_lower: bool = True):
    graph = build_graph(problem)
    sched = schedule_from_pins(problem, graph)
    if use_lower:
        try:
            from synth.lower import lower
        except ImportError:
            lower = None
        if lower is not None:
            return sched, lower(problem, graph, sched)
    return sched, reference_lower(problem, graph, sched)


def _piecewise(vals: list[int]):
    if len(set(vals)) == 1:
        return Num(vals[0])
    e = Num(vals[-1])
    for i in range(len(vals) - 2, -1, -1):
        e = Ite(Bin("==", Var("i"), Num(i)), Num(vals[i]), e)
    return e


def reference_lower(problem, graph, sched) -> Program:
    T = problem.loop.trip_count
    S = sched.max_stage
    mult = dict(sched.multiplicity)
    order = sched.body_order()
    ops = problem.ops
    producers = {}
    for e in graph.raw_edges():
        producers.setdefault((e.dst, e.buffer), (e.src, e.distance))
    # simulate the whole loop once to get the groups and the waits' counts
    parts = [("prologue", S, 0), ("body", T - S, S), ("epilogue", S, T)]
    group_of = {}  # (buffer, version) -> group index
    ngroups = 0
    counts: dict[tuple[str, int], list[int]] = {}
    last_async = max((pos for pos, oi in enumerate(order) if sched.is_async[oi]), default=None)
    for pname, ext, base in parts:
        for i in range(ext):
            j = base + i
            first_wait = None
            for pos, oi in enumerate(order):
                op = ops[oi]
                it = j - sched.stage[oi]
                if 0 <= it < T:
                    need = []
                    for b in op.reads:
                        if (oi, b) in producers:
                            src, d = producers[(oi, b)]
                            if sched.is_async[src] and it - d >= 0:
                                need.append(group_of[(b, it - d)])
                    if need:
                        key = (pname, pos if first_wait is None else first_wait)
                        cnt = ngroups - 1 - min(need)
                        if first_wait is None:
                            first_wait = pos
                            counts.setdefault(key, []).append(cnt)
                        else:
                            counts[key][-1] = min(counts[key][-1], cnt)
                    if sched.is_async[oi]:
                        for b in op.writes:
                            group_of[(b, it)] = ngroups
                if pos == last_async:
                    ngroups += 1  # one (possibly empty) group per step
                    first_wait = None
    waits = []
    pstmts = []
    for pname, ext, base in parts:
        stmts = []
        for pos, oi in enumerate(order):
            op = ops[oi]
            if (pname, pos) in counts:
                vals = counts[(pname, pos)]
                # a wait in every step of the part (steps where it was not needed get the max)
                full = vals if len(vals) == ext else None
                e = _piecewise(full) if full else Num(min(vals))
                stmts.append(WaitStmt(len(waits)))
                waits.append(Wait(pname, 0, e, op.name))
            it = affine({"i": 1}, base - sched.stage[oi])
            guard = None
            if pname == "prologue" and sched.stage[oi] > 0:
                guard = Bin(">=", Var("i"), Num(sched.stage[oi]))
            if pname == "epilogue":
                guard = Bin("<", Var("i"), Num(sched.stage[oi]))
            reads = []
            for b in op.reads:
                src, d = producers[(oi, b)]
                ver = affine({"i": 1}, base - sched.stage[oi] - d)
                reads.append(Access(b, ver, Bin("%", ver, Num(mult[b])), ops[src].name))
            writes = [Access(b, it, Bin("%", it, Num(mult[b]))) for b in op.writes]
            stmts.append(OpStmt(op.name, it, guard, 0 if sched.is_async[oi] else None, tuple(reads), tuple(writes)))
            if sched.is_async[oi] and not any(sched.is_async[o2] for o2 in order[pos + 1:]):
                stmts.append(CommitStmt(0, 0))
        pstmts.append(Part(pname, "i", Num(ext), tuple(stmts)))
    pops = tuple(ProgOp(o.name, o.unit, sched.stage[k], sched.is_async[k], sched.queue[k], None, o.latency)
                 for k, o in enumerate(ops))
    bufs = tuple(ProgBuffer(b.name, b.space, mult[b.name], b.bytes) for b in problem.buffers)
    return Program(problem.name, problem.loop.var, T, T, S, pops, bufs, ("cp_async",), tuple(pstmts), tuple(waits))

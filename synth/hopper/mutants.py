"""Mutants of a Hopper program, one per bug shape of issue 16 (docs/hopper.md).

Each mutant is ``(name, program, classes)``: the prover must refute an obligation of one of
``classes``, and the oracle must find a violation of one of them (it stops at a hang, so it
may see fewer consequences than the prover).
Pure functions of the program; a mutation that does not apply (no predicated load, no wgmma
wait) is left out.
"""

from __future__ import annotations

from dataclasses import replace

from ..completion import ArriveStmt, Tx, TryWaitStmt
from ..expr import Bin, Num, simplify
from ..program import OpStmt, WaitStmt
from .ir import HopperProgram


def _edit(p: HopperProgram, role: str, part: str, fn) -> HopperProgram:
    prog = p.role(role).program
    parts = tuple(replace(pt, stmts=tuple(fn(list(pt.stmts)))) if pt.name == part else pt for pt in prog.parts)
    return p.with_role(role, replace(prog, parts=parts))


def _find(p: HopperProgram, pred):
    for r in p.roles:
        for pt in r.program.parts:
            for k, s in enumerate(pt.stmts):
                if pred(r, s):
                    return r.name, pt.name, k
    return None


def mutants(p: HopperProgram) -> list[tuple[str, HopperProgram, frozenset]]:
    """The issue's mutants of ``p`` that apply to it."""
    out = []

    def at(loc, fn):
        role, part, k = loc

        def f(stmts):
            return fn(stmts, k)
        return _edit(p, role, part, f)

    w = _find(p, lambda r, s: isinstance(s, TryWaitStmt) and p.barrier(s.barrier).kind == "full") or \
        _find(p, lambda r, s: isinstance(s, TryWaitStmt))
    if w:
        out.append(("parity flipped", at(w, lambda st, k: st[:k] + [replace(st[k], state=replace(
            st[k].state, phase=1 - st[k].state.phase))] + st[k + 1:]), frozenset({"parity", "raw", "no_deadlock"})))
    tx = _find(p, lambda r, s: isinstance(s, ArriveStmt) and s.tx)
    if tx:
        for delta in (16, -16):
            out.append((f"bytes {delta:+d}", at(tx, lambda st, k, d=delta: st[:k] + [replace(st[k], tx=(replace(
                st[k].tx[0], bytes=st[k].tx[0].bytes + d),) + st[k].tx[1:])] + st[k + 1:]),
                frozenset({"tx_bytes", "no_deadlock"})))
        gated = _find(p, lambda r, s: isinstance(s, ArriveStmt) and any(t.gate for t in s.tx))
        if gated:
            out.append(("expect_tx left on a predicated-off load", at(gated, lambda st, k: st[:k] + [replace(
                st[k], tx=tuple(Tx(t.bytes) for t in st[k].tx))] + st[k + 1:]), frozenset({"tx_bytes", "no_deadlock"})))
    rel = _find(p, lambda r, s: isinstance(s, ArriveStmt) and not s.tx and p.barrier(s.barrier).kind == "empty")
    if rel:
        out.append(("release removed", at(rel, lambda st, k: st[:k] + st[k + 1:]),
                    frozenset({"arrivals", "no_deadlock"})))
        out.append(("arrival added", at(rel, lambda st, k: st[:k + 1] + [st[k]] + st[k + 1:]),
                    frozenset({"arrivals", "no_deadlock"})))
        role, part, k = rel
        stmts = p.role(role).program.part(part).stmts
        wpos = max((n for n in range(k) if isinstance(stmts[n], WaitStmt)), default=None)
        if wpos is not None:
            out.append(("release before wait_group", at(rel, lambda st, k, wp=wpos: st[:wp] + [st[k]] + st[wp:k]
                                                             + st[k + 1:]),
                        frozenset({"release_after_wgmma"})))
    full = _find(p, lambda r, s: isinstance(s, ArriveStmt) and s.tx and s.arrivals)
    if full:
        out.append(("arrive.expect_tx without arrive", at(full, lambda st, k: st[:k] + [replace(st[k], arrivals=0)]
                                                          + st[k + 1:]), frozenset({"arrivals", "no_deadlock"})))
    for r in p.roles:
        for idx, wt in enumerate(r.program.waits):
            prog = r.program
            waits = list(prog.waits)
            waits[idx] = replace(wt, in_flight=simplify(Bin("+", wt.in_flight, Num(1))))
            out.append((f"wait_group #{idx} + 1", p.with_role(r.name, replace(prog, waits=tuple(waits))),
                        frozenset({"release_after_wgmma", "slot_reuse"})))
            break
    return out


__all__ = ["mutants"]

"""Mutants of a Hopper program: one per bug shape of docs/hopper.md's bug table, and every single-field
and single-statement mutant (:func:`field_mutants`, the mutation sweep).

Each mutant is ``(name, program, classes)``: the prover must refute an obligation of one of
``classes``, and the oracle must find a violation of one of them (it stops at a hang, so it
may see fewer consequences than the prover).
Pure functions of the program; a mutation that does not apply (no predicated load, no wgmma
wait) is left out.
"""

from __future__ import annotations

from dataclasses import replace

from ..completion import ArriveStmt, Tx, TryWaitStmt
from ..expr import Bin, Expr, Num, simplify
from ..program import OpStmt, WaitStmt
from .ir import HopperProgram


def _add_k(e: Expr, k: int) -> Expr:
    """``e + k``, simplified (as :func:`synth.lower.exprs.add_k`; the IR does not import the lowering)."""
    return simplify(Bin("+", e, Num(k)))


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
    """The bug table's mutants of ``p`` (docs/hopper.md, "Known bug shapes") that apply to it."""
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


# ------------------------------------------------------------------------------------------------
# single-field and single-statement mutants (the mutation sweep)
# ------------------------------------------------------------------------------------------------

def _guard_variants(g) -> list[tuple[str, object]]:
    """``(how, guard)``: dropped, loosened and tightened by one (a comparison's left side moved)."""
    out: list[tuple[str, object]] = [("dropped", None)]
    if isinstance(g, Bin) and g.op in ("<=", "<", ">=", ">"):
        d = -1 if g.op in ("<=", "<") else 1
        out.append(("loosened", Bin(g.op, _add_k(g.lhs, d), g.rhs)))
        out.append(("tightened", Bin(g.op, _add_k(g.lhs, -d), g.rhs)))
    return out


def _state_variants(st) -> list[tuple[str, object]]:
    out = [("count + 1", replace(st, count=_add_k(st.count, 1))), ("count - 1", replace(st, count=_add_k(st.count, -1))),
           ("stages + 1", replace(st, stages=st.stages + 1))]
    if st.stages > 1:
        out.append(("stages - 1", replace(st, stages=st.stages - 1)))
    return out


def _stmt_variants(p: HopperProgram, s) -> list[tuple[str, object]]:
    """One-field edits of a role statement."""
    out: list[tuple[str, object]] = []
    if isinstance(s, TryWaitStmt):
        out.append(("phase flipped", replace(s, state=replace(s.state, phase=1 - s.state.phase))))
        out += [(f"state {how}", replace(s, state=st)) for how, st in _state_variants(s.state)]
    elif isinstance(s, ArriveStmt):
        out += [(f"state {how}", replace(s, state=st)) for how, st in _state_variants(s.state)]
        for d in (1, -1):
            if s.arrivals + d >= 0 and (s.arrivals + d or s.tx):
                out.append((f"arrivals {d:+d}", replace(s, arrivals=s.arrivals + d)))
        for k, t in enumerate(s.tx):
            for d in (16, -16):
                out.append((f"tx[{k}] bytes {d:+d}", replace(s, tx=s.tx[:k] + (replace(t, bytes=t.bytes + d),)
                                                             + s.tx[k + 1:])))
    elif isinstance(s, OpStmt) and s.barrier is not None:
        b = s.barrier
        out += [(f"complete_tx state {how}", replace(s, barrier=replace(b, state=st)))
                for how, st in _state_variants(b.state)]
        for d in (16, -16):
            out.append((f"bytes {d:+d}", replace(s, barrier=replace(b, bytes=b.bytes + d))))
    if s.guard is not None:
        out += [(f"guard {how}", replace(s, guard=g)) for how, g in _guard_variants(s.guard)]
    return out


def field_mutants(p: HopperProgram) -> list[tuple[str, HopperProgram]]:
    """Every single-field and single-statement mutant of ``p``, in a stable order: each role
    statement deleted, moved one place earlier, and each of its fields edited (barrier state count and
    stages +-1, a wait's phase flipped, arrivals +-1, expect_tx and TMA bytes +-16, its guard dropped,
    loosened or tightened by one); each wgmma wait's ``in_flight`` +-1; each barrier's init count +-1;
    each setup and teardown statement deleted. Names say what changed and where."""
    out: list[tuple[str, HopperProgram]] = []
    for r in p.roles:
        prog = r.program
        for pt in prog.parts:
            for k, s in enumerate(pt.stmts):
                where = f"{r.name} {pt.name}[{k}] {s.kind}"
                if isinstance(s, WaitStmt):
                    out.append((f"{where} deleted", p.with_role(r.name, prog.without_wait(pt.name, k))))
                else:
                    out.append((f"{where} deleted", _edit(p, r.name, pt.name, lambda st, k=k: st[:k] + st[k + 1:])))
                if k > 0:
                    out.append((f"{where} moved earlier", _edit(p, r.name, pt.name, lambda st, k=k: st[:k - 1] + [st[k]]
                                                                + [st[k - 1]] + st[k + 1:])))
                for how, s2 in _stmt_variants(p, s):
                    out.append((f"{where} {how}", _edit(p, r.name, pt.name,
                                                        lambda st, k=k, s2=s2: st[:k] + [s2] + st[k + 1:])))
        for idx, w in enumerate(prog.waits):
            for d in (1, -1):
                waits = prog.waits[:idx] + (replace(w, in_flight=_add_k(w.in_flight, d)),) + prog.waits[idx + 1:]
                out.append((f"{r.name} wait_group #{idx} in_flight {d:+d}",
                            p.with_role(r.name, replace(prog, waits=waits))))
    for n, b in enumerate(p.barriers):
        for d in (1, -1):
            if b.count + d >= 1:
                out.append((f"barrier {b.name} count {d:+d}", replace(
                    p, barriers=p.barriers[:n] + (replace(b, count=b.count + d),) + p.barriers[n + 1:])))
    for k, s in enumerate(p.setup):
        out.append((f"setup[{k}] {s.kind} deleted", replace(p, setup=p.setup[:k] + p.setup[k + 1:])))
    for k, s in enumerate(p.teardown):
        out.append((f"teardown[{k}] {s.kind} deleted", replace(p, teardown=p.teardown[:k] + p.teardown[k + 1:])))
    return out


__all__ = ["mutants", "field_mutants"]

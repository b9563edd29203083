"""``program.txt``: a :class:`~synth.program.Program` in RFC 0077's notation.

Input: a program (from :func:`synth.lower.lower` or ``program.json``). Output:
text, one loop per part (``for i in range(3):``). The flat statements of a part
are nested the way RFC 0077 prints them:

* consecutive statements with the same structural guard share one ``if 2 <= i:``;
* a commit group is ``async_commit_queue(q):`` holding each of its ops in an
  ``async_scope:`` (and the waits those ops need, as in RFC 0077's three-stage
  example); a gated commit sits under ``if <predicate>:``;
* a wait is ``async_wait_queue(q, n):`` enclosing the statements after it, up to
  the next commit group or the next wait that follows an op;
* an op is ``name: writes <- reads`` with slot indices (``A_s[(i + 3) % 4]``) and
  its original iteration as a comment; a predicated op sits under
  ``if <predicate at its iteration>:`` (``opaque(i + 3)`` for a data-dependent one).

Pure: the same program always gives the same text (golden files compare it byte
for byte).
"""

from __future__ import annotations

from typing import Optional, Union

from .expr import Expr, Num, evaluate, free_vars, parse, substitute, to_str, to_z3
from .lower import pretty_condition
from .program import Access, CommitStmt, OpStmt, Part, Program, WaitStmt

INDENT = "    "
_TITLES = {"prologue": "# Prologue", "body": "# Body", "epilogue": "# Epilogue"}

_Group = tuple  # ("group", gid, [stmts...], CommitStmt)
_Unit = Union[OpStmt, WaitStmt, _Group]


def program_text(program: Program) -> str:
    """The whole program as RFC 0077-style pseudo-code (ends with a newline)."""
    out = _header(program)
    for part in program.parts:
        if part.extent == Num(0):
            continue
        out.append("")
        out.append(_TITLES.get(part.name, f"# {part.name}"))
        out.append(f"for {part.var} in range({to_str(part.extent)}):")
        body = _Printer(program, part).block(_units(part), 1)
        out.extend(body if body else [INDENT + "pass"])
    return "\n".join(out) + "\n"


def _header(p: Program) -> list[str]:
    stages = p.max_stage + 1
    lines = [f"# {p.name}: for {p.loop_var} in range({p.trip_count}), "
             f"pipelined in {stages} stage{'s' if stages != 1 else ''}"
             + (f" (trip count at least {p.min_trip_count})" if isinstance(p.trip_count, str) else "")]
    for q, unit in enumerate(p.queues):
        lines.append(f"# queue {q}: {unit}")
    lines.append("# slots: " + ", ".join(f"{b.name} x{b.multiplicity}" for b in p.buffers))
    for n in p.notes:
        lines.append(f"# note: {n}")
    return lines


def _units(part: Part) -> list[_Unit]:
    """Statements with each commit group (its ops, the waits just before them, its
    commit) gathered into one unit."""
    stmts = part.stmts
    span: list[Optional[int]] = [None] * len(stmts)
    for k, s in enumerate(stmts):
        if isinstance(s, OpStmt) and s.group is not None:
            span[k] = s.group
        elif isinstance(s, CommitStmt):
            span[k] = s.group
    for k, s in enumerate(stmts):
        if isinstance(s, WaitStmt):
            n = k + 1
            while n < len(stmts) and isinstance(stmts[n], WaitStmt):
                n += 1
            nxt = stmts[n] if n < len(stmts) else None
            if isinstance(nxt, OpStmt) and nxt.group is not None and nxt.guard == s.guard:
                span[k] = nxt.group
    units: list[_Unit] = []
    k = 0
    while k < len(stmts):
        g = span[k]
        if g is None:
            units.append(stmts[k])  # type: ignore[arg-type]
            k += 1
            continue
        members = []
        commit = None
        while k < len(stmts) and span[k] == g:
            if isinstance(stmts[k], CommitStmt):
                commit = stmts[k]
                k += 1
                break
            members.append(stmts[k])
            k += 1
        units.append(("group", g, members, commit))
    return units


def _guard_of(u: _Unit) -> Optional[Expr]:
    if isinstance(u, tuple):
        for s in u[2]:
            if isinstance(s, OpStmt):
                return s.guard
        return u[3].guard if u[3] is not None else None
    return u.guard


class _Printer:
    def __init__(self, program: Program, part: Part) -> None:
        self.p = program
        self.part = part
        self._skip: Optional[str] = None
        """Inside a gated commit: the gate's condition, not repeated on its ops."""

    # -- blocks ------------------------------------------------------------------------------
    def block(self, units: list[_Unit], depth: int) -> list[str]:
        """Consecutive units with the same guard under one ``if``."""
        out: list[str] = []
        k = 0
        while k < len(units):
            g = _guard_of(units[k])
            n = k
            while n < len(units) and _guard_of(units[n]) == g:
                n += 1
            if g is None:
                out += self.seq(units[k:n], depth, in_group=False)
            else:
                out.append(INDENT * depth + f"if {to_str(g)}:")
                out += self.seq(units[k:n], depth + 1, in_group=False)
            k = n
        return out

    def seq(self, units: list, depth: int, in_group: bool) -> list[str]:
        """Units in order; a wait encloses what follows it (see the module docstring)."""
        out: list[str] = []
        k = 0
        while k < len(units):
            u = units[k]
            if isinstance(u, WaitStmt):
                n, seen_op = k + 1, False
                while n < len(units):
                    v = units[n]
                    if isinstance(v, tuple) or (isinstance(v, WaitStmt) and seen_op):
                        break
                    seen_op = seen_op or isinstance(v, OpStmt)
                    n += 1
                w = self.p.waits[u.wait]
                head = f"async_wait_queue({w.queue}, {to_str(w.in_flight)})"
                inner = units[k + 1:n]
                out.append(INDENT * depth + head + (":" if inner else ""))
                out += self.seq(inner, depth + 1, in_group)
                k = n
            elif isinstance(u, tuple):
                out += self.group(u, depth)
                k += 1
            else:
                out += self.op(u, depth, in_group)
                k += 1
        return out

    def group(self, u: _Group, depth: int) -> list[str]:
        _, gid, members, commit = u
        out: list[str] = []
        gate_cond = None
        if commit is not None and commit.gate:
            conds = []
            for s in members:
                if isinstance(s, OpStmt) and s.op in commit.gate:
                    c = self.pred(s)
                    if c is not None and c not in conds:
                        conds.append(c)
            gate_cond = " || ".join(conds) if len(conds) > 1 else (conds[0] if conds else None)
        if gate_cond is not None:
            out.append(INDENT * depth + f"if {gate_cond}:")
            depth += 1
        q = commit.queue if commit is not None else self.p.op(members[0].op).queue
        out.append(INDENT * depth + f"async_commit_queue({q}):")
        saved, self._skip = self._skip, gate_cond
        try:
            out += self.seq(members, depth + 1, in_group=True)
        finally:
            self._skip = saved
        return out

    # -- ops ---------------------------------------------------------------------------------
    def op(self, s: OpStmt, depth: int, in_group: bool) -> list[str]:
        out: list[str] = []
        cond = self.pred(s)
        if cond is not None and cond != self._skip:
            out.append(INDENT * depth + f"if {cond}:")
            depth += 1
        if in_group:
            out.append(INDENT * depth + "async_scope:")
            depth += 1
        out.append(INDENT * depth + self.op_line(s))
        return out

    def pred(self, s: OpStmt) -> Optional[str]:
        """The op's ``when`` at the statement's iteration, in the part's variable."""
        when = self.p.op(s.op).when
        if when is None:
            return None
        if when == "opaque":
            return f"opaque({to_str(s.iteration)})"
        e = pretty_condition(substitute(parse(when), {self.p.loop_var: s.iteration}), self.part.var)
        folded = _fold(e, s.guard, self.part, self.p)
        if folded is True:
            return None
        return "false" if folded is False else to_str(e)

    def op_line(self, s: OpStmt) -> str:
        w = ", ".join(_acc(a) for a in s.writes)
        r = ", ".join(_acc(a) for a in s.reads)
        if w and r:
            text = f"{s.op}: {w} <- {r}"
        elif w:
            text = f"{s.op}: {w}"
        else:
            text = f"{s.op}({r})"
        lv, pv = self.p.loop_var, self.part.var
        it = to_str(s.iteration)
        return text + (f"  # {lv} = {it}" if lv != pv else f"  # iteration {it}")


def _fold(cond: Expr, guard: Optional[Expr], part: Part, program: Program) -> Optional[bool]:
    """True/False when ``cond`` has that value at every ``i`` of ``part`` where ``guard``
    holds, for every allowed trip count (by enumeration for a constant extent, else Z3)."""
    names = free_vars(cond) | free_vars(part.extent) | (free_vars(guard) if guard is not None else frozenset())
    if not names - {part.var}:
        vals = set()
        for i in range(int(evaluate(part.extent, {}))):
            env = {part.var: i}
            if guard is None or evaluate(guard, env):
                vals.add(bool(evaluate(cond, env)))
        return vals.pop() if len(vals) == 1 else None
    # z3: only for a condition evaluation cannot fold; the printer is on light paths
    import z3

    env = {n: z3.Int(n) for n in names | {part.var}}
    i = env[part.var]
    dom = [i >= 0, i < to_z3(part.extent, env)]
    if isinstance(program.trip_count, str) and program.trip_count in env:
        dom.append(env[program.trip_count] >= program.min_trip_count)
    if guard is not None:
        dom.append(to_z3(guard, env))
    c = to_z3(cond, env)
    for value, query in ((True, z3.Not(c)), (False, c)):
        sv = z3.Solver()
        sv.set("timeout", 2000)
        sv.add(*dom, query)
        if sv.check() == z3.unsat:
            return value
    return None


def _acc(a: Access) -> str:
    return f"{a.buffer}[{to_str(a.slot)}]"


__all__ = ["program_text"]

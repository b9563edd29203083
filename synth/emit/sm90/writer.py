"""The statement writer of the sm_90a kernel: a Hopper program's statements as CUDA lines (docs/hopper_kernel.md).

:class:`Writer` holds the kernel text being written and turns each statement of the program into its lines, in
the program's order: ``try_wait`` -> ``synth_mbar_wait(bar, parity)`` with the parity ``PipelineState.parity()``
of the statement, ``arrive`` -> ``arrive`` / ``arrive.expect_tx`` / ``expect_tx`` with the statement's ``tx``
bytes (each gated by its load's predicate at ``state.count``; on a peer CTA's barrier a remote arrive through
``mapa``), ``commit`` / ``wait`` -> ``wgmma.commit_group`` / ``wgmma.wait_group N`` with ``N`` the program's
wait count, ``init`` / ``fence`` / ``inval`` from setup and teardown, guards as ``if``s, a part as a loop (a
constant-extent part unrolled). The program's op statements (the TMA copies and the wgmma) are written by the
mainloop component it is given (:class:`synth.emit.sm90.mainloop.Mainloop`): the writer knows the program's
statements, the ring's barrier addressing (slots, parities, carried slots and rounds, a mutant tile carry) and
a cluster's naming (a role's CTA, relative to the running CTA), not what the kernel's parts compose.
Nothing is re-derived here: every value comes from the statement.
"""

from __future__ import annotations

import re
from typing import Optional, Protocol

from ...completion import ArriveStmt, FenceStmt, InitStmt, InvalStmt, TryWaitStmt
from ...expr import Bin, Expr, Ite, Num, Var, as_affine, parse, simplify, substitute
from ...hopper.ir import HopperProgram
from ...program import CommitStmt, Part, WaitStmt
from ..cuda import c_expr
from ...hopper.kernel_design import KernelDesign

UNROLL_MAX = 16
"""Parts of a constant extent up to this are unrolled (wait counts become immediates)."""

_CTA = re.compile(r"([0-9]+)\Z")


def cta_of(name: str) -> Optional[int]:
    """The CTA a cluster program's role, barrier or buffer belongs to: the number ending its name (the convention
    of :func:`synth.verify.hopper_cluster.cta_of`, restated here because that module imports the provers, which the
    light runtime does not have)."""
    m = _CTA.search(name)
    return int(m.group(1)) if m else None


HALF_OP = re.compile(r"(load_([AB]))_h([0-9]+)_to([0-9]+)\Z")
"""A cluster program's copy of one part of the shared operand's box into one CTA (:mod:`synth.lower.cluster`):
``load_B_h{c}_to{d}`` is half ``c`` of the B box (producer ``c``'s, by the lowering's convention), into CTA ``d``."""


def carries_slots(stages: int) -> bool:
    """Whether a cluster kernel's loops carry their slots and rounds (:meth:`Writer.cx`): with a number of stages
    that is not a power of two, and with 8 or more (ptxas keeps ``% 8`` a mask but with the slots and rounds carried
    the persistent 8-stage ring's longest HGMMA-free run went from 33 to 25 or 28); with 1, 2 or 4 the masks are
    cheaper than the carried values (the persistent 4-stage ring: 7.38 / 19 with masks, 9.38 / 28 carried)."""
    return stages & (stages - 1) != 0 or stages >= 8


class OpWriter(Protocol):
    """What writes the program's op statements (the mainloop component): :meth:`group` gathers a role's statements
    into the units it writes (a cluster's multicast copies), :meth:`op` writes one op statement or unit."""

    def group(self, w: "Writer", stmts) -> list:
        """``stmts`` (a role's, in order) as the units :meth:`op` writes: each statement, or several as one."""
        ...

    def op(self, w: "Writer", depth: int, s) -> None:
        """Op statement or unit ``s`` at ``depth``; ValueError for a statement it does not write."""
        ...


class Writer:
    """The kernel text being written (:attr:`lines`) and the writer of the program ``p``'s statements into it; op
    statements go to ``op_writer`` (the mainloop). ``carry``: the persistent kernel's mutant tile carries (role or
    role kind -> :class:`synth.lower.hopper_persistent.TileCarry`); ``others``: further programs whose statements the
    kernel writes (the ping-pong order program), their barriers addressed as the ring program's."""

    def __init__(self, cfg: KernelDesign, p: HopperProgram, op_writer: OpWriter, carry=None, others=()) -> None:
        self.cfg, self.p, self.op_writer = cfg, p, op_writer
        self.lines: list[str] = []
        self.ops = {o.name: o for o in p.ops}
        self.loop_var = p.loop_var
        self.const: dict = {}
        self.carry = dict(carry or {})
        """Persistent kernels: role -> :class:`synth.lower.hopper_persistent.TileCarry` other than the running count
        (a mutant for the emulator's bug tests); the role being emitted is ``self.role``."""
        self.role = ""
        self.others = tuple(others)
        """Programs other than ``p`` whose statements the kernel writes (ping-pong: the order program,
        :func:`synth.lower.hopper_pingpong.order_program`, whose roles' statements surround each consumer tile's main
        loop); :meth:`barrier` finds their barriers."""
        self.cluster = cfg.cluster_size > 1
        self.cta: Optional[int] = None
        """A cluster kernel: the CTA whose role is being emitted (inside its ``if (crank == c)``)."""
        self.relative = False
        """A cluster kernel of 2 CTAs: write the role of CTA ``self.cta`` relative to the running CTA (its own CTA
        ``crank``, the other ``crank ^ 1``), so that the text is the same for both CTAs when the program is
        symmetric under their swap (:meth:`synth.emit.sm90.cluster.Cluster.roles`)."""
        self.carried: Optional[tuple[str, int]] = None
        """A cluster kernel's loop over ``(variable, S)`` whose ``S`` stages :func:`carries_slots`: the slots
        ``(v + c) % S`` and rounds ``(v + c) / S`` of its iteration are carried from one iteration to the next
        (:meth:`cx`)."""
        self.carried_phase = False
        """The carried loop's parities ``((v + c) / S + k) % 2`` are carried too, as a bit flipped at each wrap of the
        slot (:meth:`cx`; the ping-pong consumer's ring, :func:`synth.emit.sm90.scheduler.ring`)."""
        self.carried_used: set = set()
        """The ``(c, "slot" | "round" | "phase")`` the loop's statements used (:meth:`carried_step` declares and steps
        them)."""
        self.carried_at = (0, 0, "0")
        """Where the carried values are declared: (line index, depth, the loop's start)."""
        self.guard_now: Optional[Expr] = None
        """The guard of the statement being emitted (:meth:`cx` uses it to know ``v + c >= 0``)."""
        self.remote: dict = {}
        """The peer barrier arrays the role being emitted releases remotely: C name -> (the local array, the rank
        expression, its label), declared by :meth:`synth.emit.sm90.cluster.Cluster.roles` before the role."""

    def rank(self, d: int) -> str:
        """The C expression of CTA ``d``'s rank from the role being emitted: ``d`` or, relative, ``crank`` (its own
        CTA) or ``(crank ^ 1u)`` (the other)."""
        if not self.relative:
            return f"{d}u"
        return "crank" if d == self.cta else "(crank ^ 1u)"

    def label(self, name: str) -> str:
        """A role's, barrier's, buffer's or op's name for a comment: as it is, or, relative, with each CTA index
        written ``<own>`` or ``<peer>``."""
        if not self.relative:
            return name
        rel = lambda x: "<own>" if x == self.cta else "<peer>"  # noqa: E731
        m = HALF_OP.match(name)
        if m:
            return f"{m.group(1)}_h{rel(int(m.group(3)))}_to{rel(int(m.group(4)))}"
        c = cta_of(name)
        return name if c is None else f"{self.base(name)}{rel(c)}"

    def base(self, name: str) -> str:
        """The kernel's name of a barrier or buffer: a cluster program's ``full1`` / ``B0`` (CTA 1's, CTA 0's) are
        ``full`` / ``B`` at one offset of every CTA's shared memory; a one-CTA program's names are its own."""
        return re.sub(r"[0-9]+\Z", "", name) if self.cluster else name

    def local(self, name: str) -> bool:
        """Whether barrier or buffer ``name`` belongs to the CTA of the role being emitted (always, without a
        cluster)."""
        return not self.cluster or cta_of(name) == self.cta

    def cta_guard(self, name: str, body: list[str]) -> list[str]:
        """``body`` run by the CTA that owns barrier ``name`` only (a cluster's setup and teardown)."""
        if not self.cluster:
            return body
        c = cta_of(name)
        if c is None or c >= self.cfg.cluster_size:
            raise ValueError(f"barrier {name} names no CTA of the cluster {self.cfg.cluster}")
        return [f"if (crank == {c}u) {{  // CTA {c}'s barrier"] + ["  " + b for b in body] + ["}"]


    def mutant_carry(self):
        """The carry of the role being emitted (``self.role``): the one given for its name, else for its kind (a
        cluster role ``consumer1`` takes a carry given for ``consumer``); None for the running count."""
        c = self.carry.get(self.role, self.carry.get(re.sub(r"[0-9]+\Z", "", self.role)))
        return None if c is None or c.canonical else c

    def count_c(self, count: Expr, base: str) -> str:
        """The C count of a pipeline position under the role's carry (``base``: ``cs`` slot, ``cp`` parity)."""
        return f"({base} + (int)(({c_expr(count)}) - kb))"

    def slot_c(self, count: Expr, slot: Expr) -> str:
        """The C slot expression (before ``% stages``) of an access or state of count ``count``."""
        return c_expr(slot) if self.mutant_carry() is None else self.count_c(count, "cs")

    def slot_m(self, count: Expr, slot: Expr) -> str:
        """The C slot index (``% stages``) of an access or state of count ``count``."""
        if self.carried is not None and self.mutant_carry() is None:
            return self.cx(slot, self.cfg.stages)
        return f"({self.slot_c(count, slot)}) % {self.cfg.stages}"

    def cx(self, e: Expr, mod: Optional[int] = None) -> str:
        """``e`` in C, or ``(e) % mod`` when ``mod`` is given. In a loop with carried slots and rounds
        (:attr:`carried`: the loop variable ``v``, ``S`` stages), each ``(v + c) % S`` and ``(v + c) / S`` (``|c| < S``,
        ``v + c >= 0`` known from the statement's guard when ``c < 0``) is a variable carried from one iteration to
        the next (one per ``c``: an add, a compare and a select per iteration) instead of a division by the constant
        ``S``, and ``% mod`` is left out where the value is such a slot and ``mod`` is ``S`` (it is in
        ``0 .. S - 1``): the same values, which ptxas keeps in uniform registers (with 3, 5, 6 or 7 stages the
        divisions made the consumer loop's longest HGMMA-free run 34 to 44). With :attr:`carried_phase`, a parity
        ``((v + c) / S + k) % 2`` is the carried bit ``(v + c) / S % 2`` (flipped when the slot wraps), or its
        complement for an odd ``k``."""
        if self.carried is None:
            return c_expr(e) if mod is None else f"({c_expr(e)}) % {mod}"
        v, n = self.carried

        def offset(a: Expr) -> Optional[int]:
            aff = as_affine(a)
            if aff is None or aff[0] != {v: 1} or not -n < aff[1] < n:
                return None
            c = aff[1]
            return c if c >= 0 or self.nonnegative(v, -c) else None

        def halves(a: Expr) -> Optional[tuple[int, int]]:  # (c, k) of a = (v + c) / S + k, k a number
            k = 0
            if isinstance(a, Bin) and a.op == "+" and isinstance(a.rhs, Num):
                a, k = a.lhs, a.rhs.value
            if isinstance(a, Bin) and a.op == "/" and a.rhs == Num(n):
                c = offset(a.lhs)
                if c is not None:
                    return c, k
            return None

        def walk(x: Expr) -> Expr:
            if self.carried_phase and isinstance(x, Bin) and x.op == "%" and x.rhs == Num(2):
                h = halves(x.lhs)
                if h is not None:
                    self.carried_used.add((h[0], "phase"))
                    bit = Var(self.carried_name(v, h[0], "phase"))
                    return bit if h[1] % 2 == 0 else Bin("^", bit, Num(1))
            if isinstance(x, Bin) and x.op in ("%", "/") and x.rhs == Num(n):
                c = offset(x.lhs)
                if c is not None:
                    kind = "slot" if x.op == "%" else "round"
                    self.carried_used.add((c, kind))
                    return Var(self.carried_name(v, c, kind))
            if isinstance(x, Bin):
                return Bin(x.op, walk(x.lhs), walk(x.rhs))
            if isinstance(x, Ite):
                return Ite(walk(x.cond), walk(x.then), walk(x.other))
            return x

        r = walk(e)
        if mod is None or (mod == n and isinstance(r, Var) and r.name.startswith(f"{v}_slot")):
            return c_expr(r)
        return f"({c_expr(r)}) % {mod}"

    @staticmethod
    def carried_name(v: str, c: int, kind: str) -> str:
        """The C name of the carried ``(v + c) % S`` (``kind`` ``slot``), ``(v + c) / S`` (``round``) or
        ``(v + c) / S % 2`` (``phase``)."""
        return f"{v}_{kind}" + ("" if c == 0 else f"_{'p' if c > 0 else 'm'}{abs(c)}")

    def nonnegative(self, v: str, k: int) -> bool:
        """Whether the statement being emitted runs only with ``v >= k`` (a conjunct ``k' <= v`` of its guard,
        ``k' >= k``)."""
        todo, g = [self.guard_now], []
        while todo:
            x = todo.pop()
            if isinstance(x, Bin) and x.op == "&&":
                todo += [x.lhs, x.rhs]
            elif x is not None:
                g.append(x)
        return any(isinstance(x, Bin) and ((x.op == "<=" and isinstance(x.lhs, Num) and x.lhs.value >= k and
                                            x.rhs == Var(v)) or
                                           (x.op == ">=" and x.lhs == Var(v) and isinstance(x.rhs, Num) and
                                            x.rhs.value >= k)) for x in g)

    def carried_loop(self, depth: int, var: str, start: str, phase: bool = False) -> None:
        """Before a cluster kernel's loop over ``var`` from ``start``: with a number of stages that
        :func:`carries_slots`, set :attr:`carried`; :meth:`carried_step` declares the carried values the body
        used here. ``phase`` (the ping-pong consumer's ring): with any number of stages, parities carried too
        (:attr:`carried_phase`)."""
        n = self.cfg.stages
        self.carried_used = set()
        self.carried_phase = phase
        if self.mutant_carry() is not None or not (phase or (self.cluster and carries_slots(n))):
            self.carried = None
            return
        self.carried = (var, n)
        self.carried_at = (len(self.lines), depth, start)

    def carried_step(self, depth: int) -> None:
        """At the end of a loop iteration: the carried slots and rounds of the next (declared before the loop,
        from the loop's start: ``(start + S + c) % S`` and ``(start + S + c) / S - 1``, unsigned, so a round of a
        negative count wraps as the count does)."""
        if self.carried is None:
            return
        v, n = self.carried
        at, d0, start = self.carried_at
        decl, step = [], []
        used = {c for c, _ in self.carried_used}
        if (0, "slot") in self.carried_used:
            # (i - k) % S is the slot of k iterations before: a chain of moves from (i - 1) % S on, where no round of
            # these counts is needed, for k <= 2 (longer chains made the persistent ring's longest HGMMA-free run
            # 30 to 33 with K_PIPE_MMAS 3 and 4, against 28 to 29 with the step)
            lows = [c for c in used if -2 <= c < 0 and not any((d, kind) in self.carried_used for d in range(c, 0)
                                                                for kind in ("round", "phase"))]
            used |= set(range(min(lows), 0)) if lows else set()
        for c in sorted(used, reverse=True):
            count = v if c == 0 else f"{v} {'+' if c > 0 else '-'} {abs(c)}"
            slot, rnd, ph = (self.carried_name(v, c, kind) for kind in ("slot", "round", "phase"))
            x = f"{n + c}u" if start == "0" else f"({start} + {n + c}u)"
            decl.append(f"unsigned {slot} = {x} % {n}u;  // ({count}) % {n}, carried" if start != "0" else
                        f"unsigned {slot} = {(n + c) % n}u;  // ({count}) % {n}, carried")
            if c < 0 and (0, "slot") in self.carried_used and (c, "round") not in self.carried_used and \
                    (c, "phase") not in self.carried_used and all(d in used for d in range(c, 0)):
                # (i + c) % S is the previous iteration's (i + c + 1) % S: a move, before that one's own step
                step.insert(0, f"{slot} = {self.carried_name(v, c + 1, 'slot')};")
                continue
            wrap = [f"{slot} = 0u;"]
            if (c, "round") in self.carried_used:
                decl.append(f"unsigned {rnd} = {x} / {n}u - 1u;  // ({count}) / {n}, carried" if start != "0" else
                            f"unsigned {rnd} = {(n + c) // n - 1}u;  // ({count}) / {n}, carried")
                wrap.append(f"++{rnd};")
            if (c, "phase") in self.carried_used:  # the parity of the round (-1 is odd): a bit flipped at each wrap
                decl.append(f"unsigned {ph} = ({x} / {n}u + 1u) % 2u;  // ({count}) / {n} % 2, carried"
                            if start != "0" else f"unsigned {ph} = {((n + c) // n - 1) % 2}u;  // ({count}) / {n} % 2, carried")
                wrap.append(f"{ph} ^= 1u;")
            step.append(f"if (++{slot} == {n}u) {wrap[0]}" if len(wrap) == 1 else
                        f"if (++{slot} == {n}u) {{ {' '.join(wrap)} }}")
        self.lines[at:at] = ["  " * d0 + x for x in decl]
        for x in step:
            self.w(depth, x)
        self.carried = None
        self.carried_phase = False

    def carry_lines(self, depth: int) -> None:
        """The mutant carry's per-tile values ``cs``, ``cp``, ``cf`` (needs ``t``, ``KT`` and ``kb``)."""
        c = self.mutant_carry()
        if c is None:
            return
        env = {"T": parse("KT")}
        vals = [c_expr(substitute(parse(x), env)) for x in (c.slot_base, c.parity_base, c.flip)]
        self.w(depth, f"const int cs = {vals[0]}, cp = {vals[1]}, cf = {vals[2]};  // carried state (mutant)")

    def w(self, depth: int, text: str) -> None:
        """Append line ``text`` indented by ``depth`` levels (2 spaces each)."""
        self.lines.append("  " * depth + text)

    def barrier(self, name: str):
        """Barrier ``name`` of the ring program or of one of :attr:`others` (the ping-pong order program)."""
        for o in self.others:
            if name in {b.name for b in o.barriers}:
                return o.barrier(name)
        return self.p.barrier(name)

    def bar(self, name: str, state) -> str:
        """The C shared address of barrier ``name``'s slot at pipeline state ``state``."""
        return f"bar_{self.base(name)} + {self.bar_offset(name, state)}"

    def bar_offset(self, name: str, state) -> str:
        """The C byte offset of barrier ``name``'s slot at ``state`` from the barrier array's base."""
        b = self.barrier(name)
        if self.mutant_carry() is not None:
            return f"8 * ((({self.count_c(state.count, 'cs')}) % {state.stages}) % {b.slots})"
        return f"8 * ({self.cx(state.index(), b.slots)})"

    def remote_base(self, name: str) -> str:
        """The C name of barrier array ``name``'s shared::cluster address in the CTA owning it (a peer of the role
        being emitted), recorded in :attr:`remote` for :meth:`synth.emit.sm90.cluster.Cluster.roles` to declare before the role: ``mapa`` of
        the array's base, once per role rather than per release."""
        d = cta_of(name)
        var = f"bar_{self.base(name)}_{'peer' if self.relative else f'cta{d}'}"
        self.remote[var] = (f"bar_{self.base(name)}", self.rank(d), self.label(name))
        return var

    def parity(self, state) -> str:
        """The C parity a wait at pipeline state ``state`` passes on (``state.parity()``, or the mutant carry's)."""
        if self.mutant_carry() is not None:
            return (f"(({self.count_c(state.count, 'cp')}) / {state.stages} + {state.phase} + cf) % 2")
        return self.cx(state.parity())

    def pred(self, op: str, at: Expr) -> Optional[str]:
        """The C condition of op ``op``'s predicate at iteration ``at`` (None: always)."""
        when = self.ops[op].when
        if when is None:
            return None
        return c_expr(simplify(substitute(parse(when), {self.loop_var: at})))

    def guarded(self, depth: int, guard: Optional[Expr], body: list[str]) -> None:
        """Lines ``body`` at ``depth``, inside ``if (guard)`` when the statement has a guard."""
        if guard is None:
            for b in body:
                self.w(depth, b)
            return
        self.w(depth, f"if ({c_expr(guard)}) {{")
        for b in body:
            self.w(depth + 1, b)
        self.w(depth, "}")

    def setup_stmt(self, depth: int, s) -> None:
        """A setup or teardown statement: ``init`` (with the emulator's barrier names), ``inval``, ``fence``; in a
        cluster by the CTA owning the barrier (:meth:`cta_guard`). ValueError for another statement."""
        if isinstance(s, InitStmt):
            b = self.barrier(s.barrier)
            v = f"bar_{self.base(b.name)}"
            self.guarded(depth, s.guard, self.cta_guard(b.name, [
                f"for (int s = 0; s < {b.slots}; ++s) synth_mbar_init({v} + 8 * s, "
                f"{b.count});  // init {b.name}[{b.slots}], count {b.count}",
                "#ifdef SYNTH_EMULATE",
                f"for (int s = 0; s < {b.slots}; ++s) synth_emu_name_barrier("
                f"{v} + 8 * s, \"{b.name}\", s);",
                "#endif"]))
        elif isinstance(s, InvalStmt):
            b = self.barrier(s.barrier)
            self.guarded(depth, s.guard, self.cta_guard(b.name, [
                f"for (int s = 0; s < {b.slots}; ++s) synth_mbar_inval(bar_{self.base(b.name)} + 8 * s);"]))
        elif isinstance(s, FenceStmt):
            fn = "synth_fence_mbarrier_init()" if s.fence == "mbarrier_init" else "synth_fence_proxy_async()"
            self.guarded(depth, s.guard, [f"{fn};"])
        else:
            raise ValueError(f"statement {s!r} cannot appear in setup or teardown")

    def stmt(self, depth: int, role: str, s, waits) -> None:
        """Statement ``s`` of role ``role`` (its program's waits ``waits``) at ``depth``: a barrier or wgmma-group
        statement here, an op statement (or a unit of :meth:`OpWriter.group`) by the op writer. ValueError for a
        statement the kernel cannot be (a wait on a peer CTA's barrier, a remote arrive with tx bytes, ...)."""
        self.guard_now = getattr(s, "guard", None)
        if isinstance(s, TryWaitStmt):
            if not self.local(s.barrier):
                raise ValueError(f"{role}{self.cta}: try_wait on {s.barrier} of CTA {cta_of(s.barrier)}: "
                                 "mbarrier.try_wait takes a barrier of the waiting thread's own CTA")
            self.guarded(depth, s.guard, [f"synth_mbar_wait({self.bar(s.barrier, s.state)}, "
                                          f"{self.parity(s.state)});  // {self.label(s.barrier)} count "
                                          f"{c_expr(s.state.count)}"])
        elif isinstance(s, ArriveStmt):
            target = self.bar(s.barrier, s.state)
            body = []
            if not self.local(s.barrier):  # a release on a peer CTA's barrier: its shared::cluster address
                d = cta_of(s.barrier)
                if s.tx or d is None or d >= self.cfg.cluster_size:
                    raise ValueError(f"{role}{self.cta}: arrive on {s.barrier} (CTA {d}): a remote arrive carries no "
                                     "tx bytes and names a CTA of the cluster")
                if self.cfg.persistent and not carries_slots(self.cfg.stages):
                    # the persistent ring with 1, 2 or 4 stages: mapa per release (with the array's base mapped
                    # once, ptxas moved the release's address arithmetic into the run between the tile's HGMMA:
                    # 128x128, 4 stages, K_PIPE_MMAS 1 went from 7.38 / 19 to 7.62 / 29)
                    addr = f"synth_mapa({target}, {self.rank(d)})"
                else:
                    addr = f"{self.remote_base(s.barrier)} + {self.bar_offset(s.barrier, s.state)}"
                body = [f"synth_mbar_arrive_cluster({addr});  // remote: {self.label(s.barrier)}"] * s.arrivals
                if not body:
                    return
                if role != "producer":
                    body = ["if (wt == 0) {"] + ["  " + b for b in body] + ["}"]
                self.guarded(depth, s.guard, body)
                return
            if s.tx:
                terms = []
                for t in s.tx:
                    cond = None if t.gate is None else self.pred(t.gate, s.state.count)
                    terms.append(f"{t.bytes}u" if cond is None else f"(({cond}) ? {t.bytes}u : 0u)")
                body.append(f"const uint32_t tx_bytes = {' + '.join(terms)};")
                fn = "synth_mbar_arrive_expect_tx" if s.arrivals else "synth_mbar_expect_tx"
                body.append(f"{fn}({target}, tx_bytes);")
                extra = s.arrivals - 1
            else:
                extra = s.arrivals
                if not s.arrivals:
                    return
            body += [f"synth_mbar_arrive({target});"] * max(extra, 0)
            if role != "producer":
                body = ["if (wt == 0) {"] + ["  " + b for b in body] + ["}"]
            self.guarded(depth, s.guard, body)
        elif isinstance(s, CommitStmt):
            self.guarded(depth, s.guard, ["synth_wgmma_commit();"])
        elif isinstance(s, WaitStmt):
            n = simplify(substitute(waits[s.wait].in_flight, self.const)) if self.const else waits[s.wait].in_flight
            text = (f"synth_wgmma_wait_n<{n.value}>();" if isinstance(n, Num) and n.value >= 0
                    else f"synth_wgmma_wait({c_expr(n)});")
            self.guarded(depth, s.guard, [text])
        elif isinstance(s, (InitStmt, InvalStmt, FenceStmt)):
            self.setup_stmt(depth, s)
        else:  # the copies and the wgmma (ValueError there for what is no op either)
            self.op_writer.op(self, depth, s)

    def grouped(self, stmts) -> list:
        """A role's statements as the op writer writes them (:meth:`OpWriter.group`)."""
        return self.op_writer.group(self, stmts)

    def part(self, depth: int, role: str, part: Part, waits) -> None:
        """Part ``part`` of role ``role`` at ``depth``: a constant extent up to :data:`UNROLL_MAX` unrolled (its
        variable a constant in each copy), else a loop over its variable (unsigned in a cluster kernel, with the
        carried slots of :meth:`carried_loop`)."""
        self.w(depth, f"// ---- {role} {part.name}")
        if isinstance(part.extent, Num) and part.extent.value <= UNROLL_MAX:
            # a constant-extent part (the drain) is unrolled so that every wgmma.wait_group count is an
            # immediate: ptxas serializes all wgmma when a run-time count selects the wait
            for c in range(part.extent.value):
                self.w(depth, f"{{  // {part.var} = {c}")
                self.w(depth + 1, f"const int {part.var} = {c};")
                self.const = {part.var: Num(c)}
                for s in self.grouped(part.stmts):
                    self.stmt(depth + 1, role, s, waits)
                self.const = {}
                self.w(depth, "}")
            return
        if self.cluster:
            # unsigned, as the persistent ring's: ptxas then unrolls the loop with slots and parities as shifts and
            # masks (the 128x128 cluster consumer: 6.75 instructions per HGMMA, 10.4 with an int)
            self.carried_loop(depth, part.var, "0")
            self.w(depth, f"for (unsigned {part.var} = 0; {part.var} < (unsigned)({c_expr(part.extent)}); "
                          f"++{part.var}) {{")
        else:
            self.w(depth, f"for (int {part.var} = 0; {part.var} < {c_expr(part.extent)}; ++{part.var}) {{")
        for s in self.grouped(part.stmts):
            self.stmt(depth + 1, role, s, waits)
        self.carried_step(depth + 1)
        self.w(depth, "}")


__all__ = ["Writer", "OpWriter", "cta_of", "carries_slots", "HALF_OP", "UNROLL_MAX"]

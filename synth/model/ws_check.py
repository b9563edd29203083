"""An independent check of a warp-specialized body schedule, in plain Python (no CP-SAT, no shared helpers).

:func:`check_ws` re-derives from the body, the machine facts and the schedule's numbers every constraint of
docs/ws_model.md, each written here again rather than imported from :mod:`synth.model.ws_schedule` (so a wrong
encoding there is not repeated here): the consumer arrangement's legality, each op's duration, the stage bound and
step containment, every unit's capacity modulo ``II`` with every consumer's copies, each consumer warp group's
in-order stream modulo its period, the wgmma waits, the read-after-write dependences, the in-place updates of
carried registers, the ring slots, the register copies and the ``setmaxnreg`` split, shared memory, named barriers,
the groups in flight reported and the makespan. It returns the violations found, as sentences; ``[]`` is valid.
"""

from __future__ import annotations

from .ws_body import WsBody, WsMachine

_SYNC = ("fma", "mufu", "alu", "lsu")


def _overlap_mod(a: int, la: int, b: int, lb: int, mod: int) -> bool:
    """Do ``[a, a+la)`` and ``[b, b+lb)`` meet on a circle of ``mod`` cycles (``la, lb <= mod``)?"""
    if la <= 0 or lb <= 0:
        return False
    a %= mod
    b %= mod
    for k in (-1, 0, 1):
        bb = b + k * mod
        if a < bb + lb and bb < a + la:
            return True
    return False


def check_ws(body: WsBody, mach: WsMachine, sched) -> list[str]:
    errs: list[str] = []
    ops = body.ops
    n = len(ops)
    ii, C, mode = sched.ii, sched.consumers, sched.mode
    if ii < 1 or C < 1 or mode not in ("coop", "stagger", "alternate") or (C == 1 and mode != "coop"):
        return [f"arrangement {C} x {mode} at II {ii} is not one of the model's"]
    if len(sched.ops) != n or [p.name for p in sched.ops] != [o.name for o in ops]:
        return ["the schedule's ops are not the body's"]
    P = ii * C if mode == "alternate" else ii
    split = mode in ("coop", "stagger")
    stag = mode == "stagger"
    producer = sched.producer
    copies = any(o.unit == "tma" for o in ops)
    if body.producer is not None and producer != body.producer or not copies and producer and body.producer is None:
        errs.append(f"producer warp group {producer}: the body says {body.producer}")
    if copies and not producer and C > 1:
        errs.append("without a producer, more than one consumer warp group")
    delta = list(sched.offsets)
    if len(delta) != C or delta[0] != 0 or any(not 0 <= x < ii for x in delta) or \
            (not stag and any(delta)) or delta != sorted(delta):
        errs.append(f"consumer offsets {delta} are not 0 = d0 <= d1 <= ... < II (non-zero only when staggered)")
        delta = [0] * C
    dmax = max(delta)
    # -- the arrangement
    if C + int(producer) > mach.warp_groups:
        errs.append(f"{C + int(producer)} warp groups, the machine has {mach.warp_groups}")
    if split and body.rows % (body.row_quantum * C):
        errs.append(f"{body.rows} rows do not split among {C} consumer warp groups of {body.row_quantum}-row wgmma")
    if mode == "alternate" and any(b.carried and b.space == "reg" for b in body.buffers):
        errs.append("alternating warp groups cannot carry registers from one iteration to the next")
    nb = C if stag and C > 1 else 0
    if nb != sched.named_barriers or (nb and nb + 1 > mach.named_barriers):
        errs.append(f"named barriers {sched.named_barriers}: the order needs {nb}, the machine has "
                    f"{mach.named_barriers} (one is the CTA's)")
    # -- durations, stages, steps
    dur = []
    for o in ops:
        if o.unit == "tma" or not o.split or not stag:
            dur.append(o.work)
        else:
            dur.append((o.work + C - 1) // C)
    s = [p.start for p in sched.ops]
    for i, (o, p) in enumerate(zip(ops, sched.ops)):
        if p.duration != dur[i]:
            errs.append(f"{o.name}: duration {p.duration}, the arrangement gives {dur[i]}")
        if p.start < 0 or p.stage != p.start // ii:
            errs.append(f"{o.name}: start {p.start} and stage {p.stage} disagree at II {ii}")
        on_prod = o.unit == "tma" and producer
        step = ii if on_prod else P
        if p.start // step > body.max_stage:
            errs.append(f"{o.name}: step {p.start // step} is past the bound {body.max_stage}")
        if not on_prod:
            occ = dur[i] if (o.unit in _SYNC or o.blocking or o.hold) else o.issue
            if p.start % step + occ > step:
                errs.append(f"{o.name}: its {occ} cycles cross the end of its step")
        want_wg = ("producer" if producer else "consumer 0") if o.unit == "tma" else None
        if want_wg and p.warp_group != want_wg:
            errs.append(f"{o.name}: a TMA op runs on the {want_wg}, not {p.warp_group}")
    # -- wgmma waits
    W, w = {}, {}
    for i, (o, p) in enumerate(zip(ops, sched.ops)):
        if o.unit == "tensor" and not o.blocking:
            if p.wait_start is None or p.wait_end is None:
                errs.append(f"{o.name}: a wgmma without its wait")
                continue
            w[i], W[i] = p.wait_start, p.wait_end
            if w[i] < s[i] + o.issue or W[i] < w[i] or W[i] < s[i] + dur[i] + mach.wgmma_drain or W[i] - w[i] > P:
                errs.append(f"{o.name}: wait [{w[i]}, {W[i]}) is before its issue, its completion "
                            f"{s[i] + dur[i] + mach.wgmma_drain}, or longer than a period")
            k = 0
            for j, oj in enumerate(ops):
                if oj.unit == "tensor" and not oj.blocking:
                    m = 1 if j == i else 0
                    while s[j] + m * P + oj.issue <= w[i]:
                        if s[j] + m * P > s[i]:
                            k += 1
                        m += 1
            if p.groups != k:
                errs.append(f"{o.name}: {p.groups} groups in flight reported, {k} issued before its wait")
    if errs:
        return errs
    # -- units: every copy of every op, modulo II
    for u in ("tma", "tensor", "fma", "mufu", "alu", "lsu"):
        iv = []
        for i, o in enumerate(ops):
            if o.unit != u:
                continue
            copies = C if (stag and o.unit != "tma") else 1
            for c in range(copies):
                iv.append((f"{o.name}#{c}", s[i] + delta[c], dur[i]))
        for a in range(len(iv)):
            if iv[a][2] > ii:
                errs.append(f"{u}: {iv[a][0]} needs {iv[a][2]} cycles of an II of {ii}")
            for b in range(a + 1, len(iv)):
                if _overlap_mod(iv[a][1], iv[a][2], iv[b][1], iv[b][2], ii):
                    errs.append(f"{u}: {iv[a][0]} and {iv[b][0]} overlap modulo II {ii}")
    # -- one consumer warp group's stream, modulo its period
    st = []
    for i, o in enumerate(ops):
        if o.unit == "tma" and producer:
            continue
        if o.unit in _SYNC or o.blocking:
            st.append((o.name, s[i], dur[i]))
        elif o.issue:
            st.append((o.name + " issue", s[i], o.issue))
        if i in W:
            st.append((o.name + " wait", w[i], W[i] - w[i]))
    for a in range(len(st)):
        for b in range(a + 1, len(st)):
            if _overlap_mod(st[a][1], st[a][2], st[b][1], st[b][2], P):
                errs.append(f"warp group stream: {st[a][0]} and {st[b][0]} overlap modulo {P}")

    # -- dependences
    def last_writer(buf, before):
        ws = [j for j, o in enumerate(ops) if buf in o.writes and (before is None or j < before)]
        return ws[-1] if ws else None

    def ready(j, r):
        o = ops[j]
        if o.unit == "tma":
            return s[j] + dur[j] + o.latency + mach.barrier_cycles
        if o.unit == "tensor" and not o.blocking:
            return s[j] + dur[j] if (ops[r].unit == "tensor" and not ops[r].blocking) else W[j]
        return s[j] + dur[j] + o.latency

    def read_end(r):
        return W[r] if r in W else s[r] + dur[r]

    bufs = {b.name: b for b in body.buffers}
    for r, o in enumerate(ops):
        for b in o.reads:
            if bufs[b].once:
                continue
            if bufs[b].space == "smem":
                js = [j for j, oj in enumerate(ops) if b in oj.writes and j < r]
            else:
                j = last_writer(b, r)
                js = [] if j is None else [j]
            if not js:
                errs.append(f"{o.name} reads {b} before it is written")
            for j in js:
                if s[r] < ready(j, r):
                    errs.append(f"{o.name} starts at {s[r]}, before {ops[j].name}'s {b} is ready at {ready(j, r)}")
        for b in o.reads_prev:
            j = last_writer(b, None)
            if s[r] + ii < ready(j, r):
                errs.append(f"{o.name} of iteration i+1 starts at {s[r] + ii}, before {ops[j].name}'s {b} of "
                            f"iteration i is ready at {ready(j, r)}")
    for b in body.buffers:
        if not b.carried:
            continue
        for r, o in enumerate(ops):
            if b.name in o.reads:
                for j, oj in enumerate(ops):
                    if b.name in oj.writes and j != r and s[j] + ii < read_end(r):
                        errs.append(f"{oj.name} of iteration i+1 overwrites {b.name} before {o.name} of iteration i "
                                    "has read it")
    # -- rings
    depth = dict(sched.depth)
    for b in body.buffers:
        if b.space != "smem" or b.once:
            continue
        D = depth.get(b.name)
        if D is None or not 1 <= D <= body.max_depth:
            errs.append(f"{b.name}: depth {D} outside 1..{body.max_depth}")
            continue
        for j, oj in enumerate(ops):
            if b.name not in oj.writes:
                continue
            for r, o in enumerate(ops):
                if b.name not in o.reads:
                    continue
                if r in W and o.hold:
                    rel = ((W[r] - 1) // P + 1) * P
                else:
                    rel = read_end(r)
                rel += dmax
                if s[j] + D * ii < rel + (mach.barrier_cycles if producer else 0):
                    errs.append(f"{b.name}: {oj.name} of iteration i+{D} refills the slot at {s[j] + D * ii}, "
                                f"before {o.name} of iteration i releases it ({rel} + barrier)")
    # -- registers
    copies = dict(sched.copies)
    need = mach.reg_overhead
    for b in body.buffers:
        if b.space != "reg":
            continue
        size = (b.size + C - 1) // C if (b.rows and split) else b.size
        if b.carried:
            need += size
            continue
        k = copies.get(b.name)
        if k == 0 and b.alias:  # in the host's registers: the host's copies cover its reads
            kh = copies.get(b.alias, 0)
            for j, oj in enumerate(ops):
                if b.alias in oj.writes:
                    for r, o in enumerate(ops):
                        if b.name in o.reads and read_end(r) - s[j] > kh * P:
                            errs.append(f"{b.name} in {b.alias}'s registers: live {read_end(r) - s[j]} cycles from "
                                        f"{oj.name} to {o.name}, {kh} copies of {b.alias} cover {kh * P}")
            continue
        if k is None or k < 1:
            errs.append(f"{b.name}: {k} copies")
            continue
        for j, oj in enumerate(ops):
            if b.name in oj.writes:
                for r, o in enumerate(ops):
                    if b.name in o.reads and read_end(r) - s[j] > k * P:
                        errs.append(f"{b.name}: live {read_end(r) - s[j]} cycles from {oj.name} to {o.name}, "
                                    f"{k} copies cover {k * P}")
        need += k * size
    left = mach.registers // 128 - (mach.producer_registers if producer else 0)
    limit = min(left // C, mach.reg_max, mach.max_registers_per_thread) // mach.reg_step * mach.reg_step
    if need != sched.register_need:
        errs.append(f"register need {sched.register_need} reported, {need} counted")
    if need > limit or sched.registers != ((mach.producer_registers if producer else 0), limit):
        errs.append(f"registers: a consumer thread needs {need}, setmaxnreg gives {limit} "
                    f"(schedule says {sched.registers})")
    if limit < mach.reg_min:
        errs.append(f"setmaxnreg cannot go below {mach.reg_min}")
    # -- shared memory
    smem = body.smem_extra + (C * mach.mbarrier_bytes if mode == "alternate" else 0)
    for b in body.buffers:
        if b.space == "smem":
            smem += b.size if b.once else depth.get(b.name, 0) * (b.size + 2 * mach.mbarrier_bytes)
    if smem != sched.smem or smem > mach.smem:
        errs.append(f"shared memory {smem} bytes (schedule says {sched.smem}), the machine has {mach.smem}")
    # -- makespan and the solver's numbers
    for i, o in enumerate(ops):
        end = s[i] + dur[i] + o.latency + (0 if o.unit == "tma" and producer else dmax)
        if i in W:
            end = max(end, W[i] + dmax)
        if end > sched.makespan:
            errs.append(f"{o.name} ends at {end}, after the makespan {sched.makespan}")
    if not (0 < sched.bound <= ii) or abs(sched.gap - (ii - sched.bound) / ii) > 1e-9 or \
            sched.status not in ("OPTIMAL", "FEASIBLE") or (sched.status == "OPTIMAL" and sched.bound != ii):
        errs.append(f"status {sched.status}, bound {sched.bound}, gap {sched.gap} do not fit II {ii}")
    return errs


__all__ = ["check_ws"]

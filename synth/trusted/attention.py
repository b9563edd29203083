"""The independent re-check of an attention program (docs/attention.md, "What is proven"; docs/trust.md,
"Attention programs"): every obligation of its three classes re-derived from the bytes of ``program.json``.

:func:`read_attention_bytes` reads the file with the Hopper reader (:mod:`synth.trusted.hopper_program`, trip
counts from 0: ``n`` KV blocks, ``n >= 0``) and derives, trusting no field it can derive:

* **the registers**: the buffers ``program.json`` lists with ``"space": "register"``; the file must agree with what
  the program does: no TMA copy writes a register buffer and no barrier guards one, and a TMA copy writes every other
  buffer (a buffer neither copied nor a register is refused);
* **the barrier program**: ``program.json`` with every access of a register buffer left out of its op statements
  (registers are a warp group's own and take no part in a barrier), read again by the same reader;
* **the barrier hops**: ``C - 1`` for ``C >= 3`` roles issuing wgmmas (a ring of staggered consumers hands a turn on
  through ``C - 1`` order barriers), else 1;
* **each consumer's register program**: for each role whose op statements access a register buffer, its parts in
  the ``cp.async`` form (:mod:`synth.trusted.program`): its op statements with their register accesses only, its
  ``commit_group`` and ``wait_group`` statements, its wgmma queues and waits (each wait's ``before`` recomputed),
  the register buffers; written as a ``program.json`` of that form and read by that reader (the schema and every
  semantic check: distances derived, producers resolved);
* **the once reads**: a buffer that a TMA copy writes and no op statement lists as read is loaded once (Q): its
  reads are not in the file, so every async op that is not a copy (a wgmma, the ops that read shared memory) of
  every role that copies nothing is taken as a reader, of the barrier the copies of that buffer complete on.

:func:`derive_attention` gives the obligations: the barrier program's (:func:`synth.trusted.hopper.derive_hopper`
under a deadlock ranking, the hops above; ids and kinds as a Hopper certificate's), the ``register`` class
(:func:`synth.trusted.obligations.derive` of each register program, its ``raw``, ``war``, ``waw``, ``wellformed``
and ``count-nonnegative`` obligations: every access is a register's; id ``register:<role>:<id>``, charged to the
role's wait) and the ``once`` class (:func:`synth.trusted.hopper.derive_once`). :func:`check_attention_program`
asks Z3 and cvc5 each; :func:`write_attention_certificate` writes a certificate only when all hold, and
:func:`synth.trusted.certify.certify_attention` checks one.

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from typing import Optional

from . import solvers
from .hopper import HopperCheck, derive_hopper, derive_once, search_lags
from .hopper_program import MAX_BYTES as MAX_PROGRAM_BYTES
from .hopper_program import HopperInputError, HProgram, read_hopper_bytes
from .obligations import derive
from .program import InputError, Program, read_bytes

FORMAT = "synth-certificate-attention/1"
"""The manifest format of an attention program's certificate."""
REGISTER_KINDS = ("raw", "war", "waw", "wellformed", "count-nonnegative")
"""The ``cp.async`` obligation kinds of the ``register`` class (``coverage`` is the barrier program's)."""
MANIFEST = "manifest.json"
PROGRAM = "program.json"


class AttentionInputError(ValueError):
    """An attention ``program.json`` whose declarations disagree with what it does: the problem and the fix."""

    def __init__(self, msg: str, fix: str) -> None:
        super().__init__(msg)
        self.msg, self.fix = msg, fix


@dataclass(frozen=True)
class AttentionObligation:
    id: str
    kind: str
    """A Hopper class (``parity``, ``raw``, ...), ``register`` or ``once``."""
    description: str
    smt2: str = field(repr=False)
    wait: Optional[int] = None
    """A ``register`` obligation: the index of the role's wait it is charged to (None: global)."""


@dataclass(frozen=True)
class AttentionRead:
    """What the checker derives from an attention ``program.json`` (:func:`read_attention_bytes`)."""

    program: HProgram
    """The file as read (trip counts from 0)."""
    barrier: HProgram
    """The barrier program: register accesses left out (its ``sha256`` is the file's)."""
    registers: tuple
    hops: int
    register_programs: tuple
    """``(role, Program)``: each consumer's register program in the ``cp.async`` form (its ``sha256`` the file's)."""
    once: tuple
    """``(role, op, buffer, barrier)``."""


def _stmts(doc: dict):
    for r in doc["roles"]:
        for pt in r["parts"]:
            for s in pt["stmts"]:
                yield r, pt, s


def read_attention_bytes(data: bytes) -> AttentionRead:
    """Read an attention ``program.json`` and derive what its proof is about (module docstring). Raises
    :class:`~synth.trusted.hopper_program.HopperInputError` (the file, or a program derived from it, is refused by
    the Hopper reader), :class:`~synth.trusted.program.InputError` (a register program refused by the ``cp.async``
    reader) or :class:`AttentionInputError`."""
    p = read_hopper_bytes(data, zero_trips=True)
    doc = json.loads(bytes(data).decode("utf-8"))  # the reader accepted it: plain JSON, its checked fields
    space = {b["name"]: b["space"] for b in doc["buffers"]}
    registers = tuple(b for b, sp in space.items() if sp == "register")
    regs = set(registers)
    copied: dict[str, set] = {}
    listed_reads: set = set()
    for r, pt, s in _stmts(doc):
        if s["kind"] != "op":
            continue
        if "barrier" in s:
            for w in s.get("writes", []):
                copied.setdefault(w["buffer"], set()).add(s["barrier"]["barrier"] if isinstance(s["barrier"], dict)
                                                         else s["barrier"])
        else:
            listed_reads.update(a["buffer"] for a in s.get("reads", []))
    guarded = {g: b.name for b in p.barriers.values() for g in b.guards}
    for b in space:
        if b in regs and b in copied:
            raise AttentionInputError(f"buffer {b} is a register but a TMA copy writes it",
                                      "a copy writes shared memory: declare the buffer \"space\": \"shared\"")
        if b in regs and b in guarded:
            raise AttentionInputError(f"buffer {b} is a register but barrier {guarded[b]} guards it",
                                      "a barrier guards shared memory: declare the buffer \"space\": \"shared\"")
        if b not in regs and b not in copied:
            raise AttentionInputError(f"buffer {b} is {space[b]} but no TMA copy writes it (a register buffer, "
                                      "which no copy writes and no barrier guards, is declared \"space\": "
                                      "\"register\")", "declare it \"space\": \"register\", or add its copy")
    # the barrier program: register accesses left out of the op statements
    bdoc = json.loads(json.dumps(doc))
    for r, pt, s in _stmts(bdoc):
        if s["kind"] == "op":
            for key in ("reads", "writes"):
                if key in s:
                    s[key] = [a for a in s[key] if a["buffer"] not in regs]
    bp = replace(read_hopper_bytes(json.dumps(bdoc, indent=1).encode("utf-8"), zero_trips=True), sha256=p.sha256)
    consumers = [r for r in p.roles if any(s.kind == "op" and p.ops[s.op].is_async for pt in r.parts
                                           for s in pt.stmts)]
    hops = max(1, len(consumers) - 1) if len(consumers) >= 3 else 1
    rprogs = []
    for r in doc["roles"]:
        if any(s["kind"] == "op" and any(a["buffer"] in regs for a in s.get("reads", []) + s.get("writes", []))
               for pt in r["parts"] for s in pt["stmts"]):
            rprogs.append((r["role"], _register_program(doc, r, regs, p.sha256)))
    once = []
    for b in sorted(copied):
        if b in regs or b in listed_reads:
            continue
        bars = copied[b]
        if len(bars) != 1:
            raise AttentionInputError(f"buffer {b} is loaded once (no op statement lists a read of it) by copies "
                                      f"completing on {len(bars)} barriers ({', '.join(sorted(bars))})",
                                      "complete every copy of a buffer on one barrier")
        bar = next(iter(bars))
        copiers = {s.role for r in p.roles for pt in r.parts for s in pt.stmts if s.kind == "tma"}
        for r in p.roles:
            if r.name in copiers:
                continue
            seen = []
            for pt in r.parts:
                for s in pt.stmts:
                    if s.kind == "op" and p.ops[s.op].is_async and s.op not in seen:
                        seen.append(s.op)
            once += [(r.name, op, b, bar) for op in seen]
    return AttentionRead(p, bp, registers, hops, tuple(rprogs), tuple(once))


def _register_program(doc: dict, role: dict, regs: set, sha: str) -> Program:
    """``role``'s register program in the ``cp.async`` form, read by :func:`synth.trusted.program.read_bytes`."""
    used = []
    parts = []
    for pt in role["parts"]:
        stmts = []
        for s in pt["stmts"]:
            if s["kind"] == "op" and "barrier" not in s:
                t = {k: s[k] for k in ("kind", "op", "iteration", "guard", "group") if k in s}
                t["reads"] = [a for a in s.get("reads", []) if a["buffer"] in regs]
                t["writes"] = [a for a in s.get("writes", []) if a["buffer"] in regs]
                stmts.append(t)
                if s["op"] not in used:
                    used.append(s["op"])
            elif s["kind"] in ("commit", "wait"):
                stmts.append(dict(s))
        parts.append({"part": pt["part"], "var": pt["var"], "extent": pt["extent"], "stmts": stmts})
    waits = []
    for n, w in enumerate(role["waits"]):
        where = next(((pt, k) for pt in parts for k, s in enumerate(pt["stmts"])
                      if s["kind"] == "wait" and s["wait"] == n), None)
        after = "" if where is None else next((s["op"] for s in where[0]["stmts"][where[1] + 1:]
                                               if s["kind"] == "op"), "")
        waits.append({"part": w["part"], "queue": w["queue"], "in_flight": w["in_flight"], "before": after})
    ops = [o for o in doc["ops"] if o["name"] in used]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{doc['name']}.{role['role']}")[:64]
    rdoc = {"name": name, "loop": doc["loop"], "max_stage": max([o["stage"] for o in ops] + [0]), "ops": ops,
            "buffers": [b for b in doc["buffers"] if b["name"] in regs], "queues": role["queues"], "parts": parts,
            "waits": waits}
    prog = read_bytes(json.dumps(rdoc, indent=1).encode("utf-8"), f"program.json ({role['role']}'s registers)",
                      zero_trips=True)
    return replace(prog, sha256=sha)


def derive_attention(a: AttentionRead, lags: Optional[dict] = None) -> list[AttentionObligation]:
    """Every obligation of the attention program ``a`` (module docstring), in a stable order: the barrier program's
    under the deadlock ranking ``lags`` (``{role: lag}``), then the ``register`` class role by role, then ``once``."""
    out = [AttentionObligation(o.id, o.kind, o.description, o.smt2)
           for o in derive_hopper(a.barrier, lags or {}, hops=a.hops)]
    for role, prog in a.register_programs:
        out += [AttentionObligation(f"register:{role}:{o.id}", "register", f"{role}: {o.description}", o.smt2,
                                    o.wait) for o in derive(prog) if o.kind in REGISTER_KINDS]
    out += [AttentionObligation(o.id, o.kind, o.description, o.smt2) for o in derive_once(a.barrier, a.once, a.hops)]
    return out


@dataclass(frozen=True)
class AttentionResult:
    ok: bool
    checks: tuple
    """One :class:`~synth.trusted.hopper.HopperCheck` (the same record: id, kind, solvers' answers) per obligation
    (empty when the file is refused)."""
    messages: tuple
    """A summary line first, then each failure."""
    lags: tuple = ()
    hops: int = 1
    seconds: float = 0.0

    def render(self) -> str:
        return "\n".join(self.messages[:1] + tuple(f"  {m}" for m in self.messages[1:]))

    def by_class(self) -> dict:
        """``{class: (held, asked)}``: ``barrier`` (the barrier program's obligations), ``register``, ``once``."""
        out: dict = {}
        for c in self.checks:
            k = c.kind if c.kind in ("register", "once") else "barrier"
            held, asked = out.get(k, (0, 0))
            out[k] = (held + c.ok, asked + 1)
        return out


def _ask(o: AttentionObligation, timeout_s: float) -> HopperCheck:
    z = solvers.z3_answer(o.smt2, timeout_s)
    c = solvers.cvc5_answer(o.smt2, timeout_s) if z == "unsat" else "not asked"
    return HopperCheck(o.id, o.kind, o.description, z, c, z == "unsat" and c == "unsat")


def check_attention_program(data: bytes, *, timeout_s: float = 60.0,
                            kinds: Optional[tuple] = None) -> AttentionResult:
    """Re-derive every obligation of the attention ``program.json`` in ``data`` and ask Z3 and cvc5 each
    (``timeout_s`` per call; Z3 first, cvc5 only where Z3 proves it). ``kinds``: only obligations of these kinds
    (``register``, ``once``, or Hopper classes; the deadlock ranking is searched only when ``no_deadlock`` is
    asked). Never raises on bad input: a refused file gives ``ok`` False with the reason."""
    t0 = time.perf_counter()
    try:
        a = read_attention_bytes(data)
    except (HopperInputError, InputError, AttentionInputError) as e:
        fix = getattr(e, "fix", "")
        return AttentionResult(False, (), (f"independent attention check FAILED: program.json refused: {e}"
                                           + (f" (fix: {fix})" if fix else ""),), seconds=time.perf_counter() - t0)
    missing = solvers.missing()
    if missing:
        return AttentionResult(False, (), (f"independent attention check FAILED: missing solver(s): "
                                           f"{', '.join(missing)}",))
    try:
        lags = search_lags(a.barrier, timeout_s, a.hops) if kinds is None or "no_deadlock" in kinds else {}
        obs = [o for o in derive_attention(a, lags) if kinds is None or o.kind in kinds]
    except (ValueError, RecursionError) as e:
        return AttentionResult(False, (), (f"independent attention check FAILED: {a.program.name}: program outside "
                                           f"the checker's bounds: {e}",))
    checks = tuple(_ask(o, timeout_s) for o in obs)
    ok = bool(checks) and all(c.ok for c in checks)
    res = AttentionResult(ok, checks, (), tuple(lags.items()), a.hops, time.perf_counter() - t0)
    classes = ", ".join(f"{k} {h}/{n}" for k, (h, n) in res.by_class().items())
    head = (f"independent attention check {'OK' if ok else 'FAILED'}: {sum(c.ok for c in checks)}/{len(checks)} "
            f"obligations of {a.program.name} re-derived by synth.trusted and unsat with z3 and cvc5 ({classes}; "
            f"barrier hops {a.hops}; every n >= 0)")
    fails = [f"{c.id} [{c.kind}]: {c.description} (z3 {c.z3}, cvc5 {c.cvc5})" for c in checks if not c.ok]
    return replace(res, messages=tuple([head] + fails))


def _file_name(n: int, oid: str) -> str:
    return f"{n:03d}-" + re.sub(r"[^A-Za-z0-9_.]+", "-", oid.replace("<-", "-from-")).strip("-")[:120] + ".smt2"


def write_attention_certificate(data: bytes, directory: str, *, timeout_s: float = 60.0) -> AttentionResult:
    """Check the attention ``program.json`` in ``data`` (:func:`check_attention_program`) and, when every obligation
    holds, write its certificate into ``directory`` (created if absent): one SMT-LIB2 file per obligation, a copy
    of ``program.json`` and ``manifest.json`` (format :data:`FORMAT`: ``program``, ``program_sha256``,
    ``trip_count``, ``min_trip_count``, ``ranking``, ``hops``, ``registers``, ``classes``, ``solvers`` and
    ``obligations``, each ``{id, file, kind, wait, description, expected, result, sha256}``). ValueError (nothing
    written) when the check fails; returns the check."""
    res = check_attention_program(data, timeout_s=timeout_s)
    if not res.ok:
        raise ValueError(f"the trusted checker does not prove the attention program; no certificate:\n{res.render()}")
    a = read_attention_bytes(data)
    lags = dict(res.lags)
    answers = {c.id: {"z3": c.z3, "cvc5": c.cvc5} for c in res.checks}
    os.makedirs(directory, exist_ok=True)
    entries = []
    for n, ob in enumerate(derive_attention(a, lags)):
        name = _file_name(n, ob.id)
        raw = ob.smt2.encode("utf-8")
        with open(os.path.join(directory, name), "wb") as fh:
            fh.write(raw)
        entries.append({"id": ob.id, "file": name, "kind": ob.kind,
                        "wait": None if ob.wait is None else {"index": ob.wait},
                        "description": ob.description, "expected": "unsat", "result": answers.get(ob.id),
                        "sha256": hashlib.sha256(raw).hexdigest()})
    with open(os.path.join(directory, PROGRAM), "wb") as fh:
        fh.write(bytes(data))
    p = a.program
    manifest = {"format": FORMAT, "program": p.name, "program_sha256": hashlib.sha256(bytes(data)).hexdigest(),
                "trip_count": p.tsym if p.tsym else p.trip, "min_trip_count": p.min_trip, "ranking": lags,
                "hops": a.hops, "registers": list(a.registers),
                "classes": {k: n for k, (_, n) in res.by_class().items()}, "solvers": solvers.versions(),
                "obligations": entries}
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    return res


__all__ = ["FORMAT", "MAX_PROGRAM_BYTES", "REGISTER_KINDS", "AttentionInputError", "AttentionObligation", "AttentionRead",
           "AttentionResult", "read_attention_bytes", "derive_attention", "check_attention_program",
           "write_attention_certificate"]

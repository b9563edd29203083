"""The independent re-check of what a thread-block cluster program's setup and teardown must do
(docs/hopper_cluster.md): classes ``cluster_form``, ``init_visible`` and ``safe_exit``, decided
again from the bytes of ``program.json`` (read by :mod:`synth.trusted.hopper_program`).

The barrier protocol of the whole cluster (every role of every CTA, remote arrivals and multicast
bytes included) is :func:`synth.trusted.hopper.derive_hopper`'s; this module adds the rules that
are about CTAs. A role, barrier or buffer belongs to the CTA whose decimal index ends its name
(``consumer1``, ``empty1``, ``B1``: CTA 1). The rules are on the program's text (every statement
that exists, whatever its guard), so each holds for every trip count or for none; no solver is
needed:

* ``cluster_form``: every role, barrier and buffer names a CTA ``0 .. n - 1`` (``n >= 2``: the CTAs
  the roles name, all of them used); a ``try_wait`` waits on its own CTA's barrier; an op reads its own
  CTA's buffers; a copy writes the CTA whose barrier it completes on.
* ``init_visible``: each barrier a statement of another CTA's role touches (an arrive, a copy's
  ``complete_tx``) is initialized in ``setup``, and after its last init come a
  ``fence.mbarrier_init`` (the cluster-scope ``fence.mbarrier_init.release.cluster``) and, after
  that, a ``cluster_sync``.
* ``safe_exit``: for each CTA some other CTA's statement touches (a barrier, a buffer), ``teardown``
  holds a ``cluster_sync`` and no ``mbarrier.inval`` of that CTA's barriers before it.

Part of the trusted base: imports nothing from synth outside ``synth.trusted``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .hopper_program import HopperInputError, HProgram, read_hopper_bytes

CLASSES = ("cluster_form", "init_visible", "safe_exit")
_INDEX = re.compile(r"([0-9]+)\Z")


def cta(name: str) -> Optional[int]:
    """The CTA index ending ``name`` (None when it ends in no digit)."""
    m = _INDEX.search(name)
    return None if m is None else int(m.group(1))


@dataclass(frozen=True)
class ClusterCheck:
    id: str
    kind: str
    description: str
    ok: bool
    reason: str = ""
    """What fails, naming the role, its CTA and the barrier (or CTA) at stake; empty when ok."""


@dataclass(frozen=True)
class _Touch:
    role: str
    src: int
    part: str
    pos: int
    what: str
    target: str
    dst: int

    def say(self) -> str:
        return (f"{self.role} (CTA {self.src}) {self.what} {self.target} of CTA {self.dst} ({self.part} statement "
                f"{self.pos})")


def _touches(p: HProgram) -> list:
    out = []
    for r in p.roles:
        c = cta(r.name)
        for pt in r.parts:
            for s in pt.stmts:
                hits = []
                if s.kind == "arrive":
                    hits.append(("arrives remotely on", s.barrier))
                if s.kind == "tma":
                    hits.append((f"multicasts {s.op} (complete_tx) onto", s.barrier))
                    hits += [(f"multicasts {s.op} into", w.buffer) for w in s.writes]
                for what, target in hits:
                    d = cta(target)
                    if c is not None and d is not None and d != c:
                        out.append(_Touch(r.name, c, pt.name, s.pos, what, target, d))
    return out


def _form(p: HProgram) -> list:
    out = []
    used = sorted({cta(r.name) for r in p.roles if cta(r.name) is not None})
    n = len(used)
    names = [("role", r.name) for r in p.roles] + [("barrier", b) for b in p.barriers] + \
        [("buffer", b) for b in p.mult]
    why = ""
    for what, name in names:
        if cta(name) is None or cta(name) >= n:
            why = f"{what} {name} names no CTA of 0 .. {n - 1}"
            break
    if not why and used != list(range(n)):
        why = f"the roles name CTAs {used}, not 0 .. {n - 1}"
    if not why and n < 2:
        why = f"the roles name one CTA ({used[0] if used else 'none'}): a cluster program names n >= 2 CTAs"
    out.append(ClusterCheck("cluster_form:names", "cluster_form", "every role, barrier and buffer ends its name "
                            "with its CTA's index 0 .. n - 1", not why, why))
    for r in p.roles:
        c = cta(r.name)
        why = ""
        for pt in r.parts:
            for s in pt.stmts:
                at = f"{r.name} (CTA {c}) {pt.name} statement {s.pos}"
                if why:
                    break
                if s.kind == "try_wait" and cta(s.barrier) != c:
                    why = f"{at} waits on {s.barrier}, a barrier of CTA {cta(s.barrier)}"
                bad_read = [a.buffer for a in s.reads if cta(a.buffer) != c]
                if not why and bad_read:
                    why = f"{at} reads {bad_read[0]}, a buffer of CTA {cta(bad_read[0])}"
                bad_write = [w.buffer for w in s.writes if s.kind == "tma" and cta(w.buffer) != cta(s.barrier)]
                if not why and bad_write:
                    why = f"{at} copies into {bad_write[0]} but completes on {s.barrier}, a barrier of another CTA"
        out.append(ClusterCheck(f"cluster_form:{r.name}", "cluster_form", f"{r.name} waits on and reads its own "
                                "CTA's barriers and buffers; each copy writes the CTA whose barrier it completes on",
                                not why, why))
    return out


def _init_visible(p: HProgram, touches: list) -> list:
    out = []
    for b in p.barriers:
        hit = [t for t in touches if t.target == b]
        if not hit:
            continue
        inits = [k for k, (kind, v) in enumerate(p.setup) if kind == "init" and v == b]
        fence = next((k for k, (kind, v) in enumerate(p.setup) if inits and k > inits[-1] and kind == "fence"
                      and v == "mbarrier_init"), None)
        sync = next((k for k, (kind, _) in enumerate(p.setup) if fence is not None and k > fence
                     and kind == "cluster_sync"), None)
        if not inits:
            why = f"setup does not initialize {b}"
        elif fence is None:
            why = f"no fence.mbarrier_init.release.cluster follows {b}'s init in setup"
        elif sync is None:
            why = f"no cluster barrier follows {b}'s init and fence in setup"
        else:
            why = ""
        out.append(ClusterCheck(f"init_visible:{b}", "init_visible", f"{b}, which another CTA touches, is "
                                "initialized, then fence.mbarrier_init, then a cluster barrier, in setup", not why,
                                f"{hit[0].say()}, but {why}" if why else ""))
    return out


def _safe_exit(p: HProgram, touches: list) -> list:
    out = []
    rank = {}
    for r in p.roles:
        for pi, pt in enumerate(r.parts):
            for s in pt.stmts:
                rank[(r.name, pt.name, s.pos)] = (pi, s.pos)
    for d in sorted({t.dst for t in touches}):
        hit = [t for t in touches if t.dst == d]
        last = max(hit, key=lambda t: (rank[(t.role, t.part, t.pos)], t.role))
        sync = next((k for k, (kind, _) in enumerate(p.teardown) if kind == "cluster_sync"), None)
        early = [v for k, (kind, v) in enumerate(p.teardown) if kind == "inval" and cta(v) == d
                 and (sync is None or k < sync)]
        if sync is None:
            why = f"teardown has no cluster barrier: CTA {d} may leave first"
        elif early:
            why = f"teardown invalidates {early[0]} before its cluster barrier"
        else:
            why = ""
        out.append(ClusterCheck(f"safe_exit:cta{d}", "safe_exit", f"CTA {d}, which other CTAs arrive on or write "
                                "into, invalidates its barriers and exits only after a cluster barrier in teardown",
                                not why, f"last remote use of CTA {d}: {last.say()}; {why}" if why else ""))
    return out


def derive_cluster(p: HProgram) -> list:
    """The :data:`CLASSES` checks of cluster program ``p``, in a stable order."""
    touches = _touches(p)
    return _form(p) + _init_visible(p, touches) + _safe_exit(p, touches)


def check_cluster_bytes(data: bytes) -> tuple:
    """``(ok, checks, messages)`` for the bytes of a cluster ``program.json``: refused (``ok`` False, the
    reader's JSON path, problem and fix in ``messages``) or every :func:`derive_cluster` check. The barrier
    classes are :func:`synth.trusted.hopper.check_hopper_program`'s."""
    try:
        p = read_hopper_bytes(data)
    except HopperInputError as e:
        return False, (), (f"cluster check FAILED: program.json refused: {e} (fix: {e.fix})",)
    checks = derive_cluster(p)
    ok = all(c.ok for c in checks)
    msgs = [f"cluster check {'OK' if ok else 'FAILED'}: {sum(c.ok for c in checks)}/{len(checks)} cluster checks "
            f"of {p.name}"] + [f"{c.id} [{c.kind}]: {c.reason}" for c in checks if not c.ok]
    return ok, tuple(checks), tuple(msgs)


__all__ = ["derive_cluster", "check_cluster_bytes", "ClusterCheck", "CLASSES", "cta"]

"""The TMA-store epilogue's thread classes, decided again by the trusted checker (docs/hopper_store.md).

Input: the bytes of a store program (``store.json``, the sm_80 ``program.json`` form, read by
:func:`synth.trusted.program.read_bytes`) and the op units of its ``ops`` list. Output: a verdict per
class, ``converge`` and ``proxy_fence``. The ``war`` obligations of the same program (slot reuse after
``wait_group.read``, the exit after every store read) are the ordinary obligations of
:mod:`synth.trusted.obligations`.

The method differs from synth's (which compares statement positions): two threads, the elected one
(``E``, thread 0 of the warp group) and another (``O``), run two consecutive sub-tiles of the body,
and each carries the set of facts it knows; a named barrier (unit ``bar_sync``) gives both threads
the union of their sets (a guarded barrier or fence counts as not run; a guarded wait, write or read as
run). ``E``'s wait of a sub-tile adds the fact "this sub-tile's slot is free";
a thread may write the staging buffer only knowing the fact of the last wait ``E`` ran before that
write. A write by thread ``X`` of version ``v`` makes ``v`` unfenced for ``X``; ``X``'s
``fence.proxy.async`` turns each of its unfenced versions into the fact "``X``'s writes of ``v`` are
fenced"; the TMA store of ``v`` (run by ``E``) needs that fact for every thread that wrote ``v``.
``teardown``: a part after the body runs, unguarded, a wait with in-flight 0 on the bulk queue after which
only waits follow. Units are closed: an op of any other unit fails every class. Part of the trusted base: imports nothing from synth outside this package.
"""

from __future__ import annotations

import json

from .program import read_bytes

SCOPES = {"bar_sync": "converge", "st_shared": "all", "fence_proxy_async": "all", "tma_store": "elected"}
"""Which threads run an op of each unit (waits and commits: the elected thread)."""


def check_store_threads(data: bytes, file: str = "store.json") -> dict:
    """``{"converge": (ok, why), "proxy_fence": (ok, why), "teardown": (ok, why)}`` for the store program in
    ``data``; raises :class:`synth.trusted.program.InputError` when the bytes are not a well-formed program."""
    prog = read_bytes(data, file)
    units = {o["name"]: o["unit"] for o in json.loads(data)["ops"]}
    unknown = sorted({u for u in units.values() if u not in SCOPES})
    if unknown:
        why = f"unit(s) {', '.join(unknown)}: which threads run them is not known"
        return {"converge": (False, why), "proxy_fence": (False, why), "teardown": (False, why)}
    body = prog.part("body")
    know = {"E": set(), "O": set()}
    unfenced = {"E": set(), "O": set()}
    writers: dict = {}
    last_wait = None
    verdict = {"converge": (True, ""), "proxy_fence": (True, "")}

    def fail(cls: str, why: str) -> None:
        if verdict[cls][0]:
            verdict[cls] = (False, why)

    for k in (0, 1):  # two sub-tiles: the back edge from one to the next is run too
        for st in body.stmts:
            helps = st.kind == "op" and (SCOPES.get(units[st.op]) == "converge" or units[st.op] == "fence_proxy_async")
            if st.guard is not None and helps:
                continue  # a guarded barrier or fence may not run: it proves nothing (a guarded wait or access may)
            if st.kind == "wait":
                last_wait = ("free", k, st.pos)
                know["E"].add(last_wait)
                continue
            if st.kind == "commit":
                continue
            scope = SCOPES[units[st.op]]
            threads = ("E",) if scope == "elected" else ("E", "O")
            if scope == "converge":
                union = know["E"] | know["O"]
                know["E"], know["O"] = set(union), set(union)
                continue
            if units[st.op] == "fence_proxy_async":
                for t in threads:
                    know[t] |= {("fenced", t, v) for v in unfenced[t]}
                    unfenced[t] = set()
                continue
            for t in threads:
                for acc in st.writes:
                    if last_wait is not None and last_wait not in know[t]:
                        fail("converge", f"thread {t} runs {st.op} (sub-tile {k}), writing {acc.buffer}, without "
                                         "knowing of the elected thread's last wait_group.read (no bar.sync since)")
                    v = (acc.buffer, k)
                    unfenced[t].add(v)
                    writers.setdefault(v, set()).add(t)
                for acc in st.reads:
                    v = (acc.buffer, k)
                    for x in sorted(writers.get(v, ())):
                        if ("fenced", x, v) not in know[t]:
                            fail("proxy_fence", f"{st.op} (sub-tile {k}) reads {acc.buffer} written by thread {x}, "
                                                f"and thread {t} does not know those writes fenced "
                                                "(fence.proxy.async by the writer, then a bar.sync)")
                    if not writers.get(v):
                        fail("proxy_fence", f"{st.op} (sub-tile {k}) reads {acc.buffer} that the sub-tile does "
                                            "not write")
    # teardown: after the body, an unguarded wait with in-flight 0 on the bulk queue, nothing committed after it
    verdict["teardown"] = (False, "no wait_group.read 0 runs after the last sub-tile: a store may still read shared "
                                  "memory when the CTA exits")
    waits = {w.index: w for w in prog.waits}
    for pt in prog.parts:
        if pt.name == "body":
            continue
        for k, st in enumerate(pt.stmts):
            if st.kind == "wait" and st.guard is None and waits[st.wait].in_flight == ("num", 0) and \
                    waits[st.wait].queue == 0 and all(x.kind == "wait" for x in pt.stmts[k + 1:]):
                verdict["teardown"] = (True, "")
    return verdict


__all__ = ["check_store_threads", "SCOPES"]

"""The bugs of docs/attention.md's table, injected into an emitted attention ``kernel.cu`` (text edits), for the
emulator to catch (docs/attention.md, "The kernel").

:func:`attention_kernel_mutant` edits the text :func:`synth.emit.sm90.attention_kernel.emit_attention_kernel` wrote:
it splits a role's loop body into its statements (each a line, or an ``if`` block, at the body's indentation, as the
:class:`~synth.emit.sm90.writer.Writer` writes them) and moves, edits or hoists the statements :data:`KERNEL_MUTANTS`
names. Each must fail on the emulator (a wrong O, a hang, a fault or a protocol error, in at least one thread order)
where the unmutated kernel passes in all.
"""

from __future__ import annotations

import re

KERNEL_MUTANTS = {
    "softmax_before_wait": "every consumer's wait_group for qk (and the K release after it) moved to the end of its "
                           "step: rowmax and scale read S before qk's wgmma group has written it",
    "rescale_races_pv": "every consumer's wait_group for pv in the step after the last block keeps one group in "
                        "flight ((i < n) ? 1 : 0 becomes (i < n) ? 1 : 1): the O / l rescale after the loop reads O "
                        "while the last pv wgmma still accumulates into it",
    "v_released_early": "every consumer releases the V slot (arrive empty_V) right after committing pv, before the "
                        "wait_group that completes it: the producer refills the slot pv still reads",
    "order_wrong_parity": "consumer1 waits on its ping-pong order barrier order1 with the parity of turn i + 1",
    "q_load_before_exit": "the producer issues Q's arrive.expect_tx and TMA copy before its loop, also when the causal "
                          "mask leaves the CTA no KV block (n = 0): the consumers exit without waiting on full_Q, "
                          "its phase completes unobserved and the copy may land after mbarrier.inval",
}
"""Each bug of docs/attention.md's table as an edit of the kernel text (:func:`attention_kernel_mutant`)."""


def _loops(lines: list[str], role: str) -> tuple[int, list[tuple[int, int]]]:
    """``(marker, loops)``: the line of role ``role``'s ``// ---- ROLE body`` comment and, for each loop over its steps
    (one, or the pieces of :meth:`synth.emit.sm90.attention_kernel.AttentionWriter.part`), the range of its body's
    lines."""
    mark = next((k for k, x in enumerate(lines) if x.strip() == f"// ---- {role} body"), None)
    if mark is None:
        raise ValueError(f"no loop body of role {role} in the kernel text")
    ind = len(lines[mark]) - len(lines[mark].lstrip())
    loops = []
    k = mark + 1
    while k < len(lines) and (len(lines[k]) - len(lines[k].lstrip()) >= ind and lines[k].strip()):
        x = lines[k]
        if x.lstrip().startswith("for (int "):
            pad = x[:len(x) - len(x.lstrip())]
            end = next(j for j in range(k + 1, len(lines)) if lines[j] == pad + "}")
            loops.append((k + 1, end))
            k = end
        elif x.strip() == "}" and len(x) - len(x.lstrip()) == ind:
            break
        k += 1
    if not loops:
        raise ValueError(f"role {role}: its body is not a loop")
    return mark, loops


def _statements(body: list[str]) -> list[list[str]]:
    """``body`` (a loop's lines) as its statements: a line, or an ``if`` block up to its closing brace."""
    out: list[list[str]] = []
    depth = 0
    for x in body:
        if depth == 0:
            out.append([])
        out[-1].append(x)
        depth += x.count("{") - x.count("}")
    return out


def _edit_body(text: str, role: str, fn) -> str:
    """``text`` with ``fn`` applied to the statements of each loop of role ``role``'s body."""
    lines = text.split("\n")
    _, loops = _loops(lines, role)
    for a, b in reversed(loops):
        stmts = fn(_statements(lines[a:b]))
        lines[a:b] = [x for s in stmts for x in s]
    return "\n".join(lines)


def _find(stmts: list[list[str]], pattern: str, what: str) -> int:
    rx = re.compile(pattern, re.M)
    hits = [k for k, s in enumerate(stmts) if rx.search("\n".join(s))]
    if not hits:
        raise ValueError(f"no statement {what} ({pattern!r}) in the body")
    return hits[0]


def _consumers(text: str) -> list[str]:
    return re.findall(r"// ---- (consumer[0-9]+) body", text)


QK_WAIT = r"^\s*synth_wgmma_wait_n<0>\(\);$"
PV_WAIT = r"synth_wgmma_wait_n<[0-9]+>\(\);\n\s*else synth_wgmma_wait_n"


def attention_kernel_mutant(text: str, name: str) -> str:
    """The kernel ``text`` with bug ``name`` of :data:`KERNEL_MUTANTS` injected. KeyError for another name;
    ValueError when the text lacks the statements the edit needs (a kernel without ping-pong order barriers for
    ``order_wrong_parity``, ...)."""
    if name not in KERNEL_MUTANTS:
        raise KeyError(name)
    if name == "q_load_before_exit":
        return _hoist_q(text)
    if name == "order_wrong_parity":
        def flip(stmts):
            k = _find(stmts, r"synth_mbar_wait\(bar_order1 ", "waiting on order1")
            s = "\n".join(stmts[k])
            s2 = re.sub(r"(synth_mbar_wait\(bar_order1 \+ [^;]*?, )(.*)(\);  // order1)",
                        lambda m: f"{m.group(1)}({m.group(2)}) ^ 1{m.group(3)}", s, count=1)
            if s2 == s:
                raise ValueError("order1's wait has no parity to flip")
            stmts[k] = s2.split("\n")
            return stmts
        if "consumer1" not in _consumers(text):
            raise ValueError("order_wrong_parity: the kernel has no consumer1 (no ping-pong order)")
        return _edit_body(text, "consumer1", flip)

    def edit(stmts):
        if name == "softmax_before_wait":
            k = _find(stmts, QK_WAIT, "waiting for qk's group")
            moved = [stmts.pop(k)]
            if k < len(stmts) and "bar_empty_K" in "\n".join(stmts[k]):
                moved.append(stmts.pop(k))
            return stmts + moved
        if name == "rescale_races_pv":
            k = _find(stmts, PV_WAIT, "waiting for pv's group")
            s = "\n".join(stmts[k])
            s2 = re.sub(r"else synth_wgmma_wait_n<([0-9]+)>", lambda m: f"else synth_wgmma_wait_n<{int(m.group(1)) + 1}>", s)
            if s2 == s:
                raise ValueError("pv's wait has no count for the step after the last block")
            s = s2
            stmts[k] = s.split("\n")
            return stmts
        # v_released_early: the empty_V release right after pv's commit
        r = stmts.pop(_find(stmts, r"synth_mbar_arrive\(bar_empty_V", "releasing V"))
        pv = _find(stmts, r"synth_wgmma_rs_", "issuing pv")
        c = next(k for k in range(pv + 1, len(stmts)) if "synth_wgmma_commit" in "\n".join(stmts[k]))
        return stmts[:c + 1] + [r] + stmts[c + 1:]

    for role in _consumers(text):
        text = _edit_body(text, role, edit)
    return text


def _hoist_q(text: str) -> str:
    """The producer's Q statements (its arrive.expect_tx on full_Q and load_Q, guarded ``i < 1`` in its loop) moved
    before the loop, unguarded, at ``i = 0``."""
    lines = text.split("\n")
    mark, loops = _loops(lines, "producer")
    hoisted: list[str] = []
    for a, b in reversed(loops):
        stmts = _statements(lines[a:b])
        q = [s for s in stmts if "bar_full_Q" in "\n".join(s)]
        if q and not hoisted:
            pad = " " * (len(lines[mark]) - len(lines[mark].lstrip()))
            hoisted = [pad + "{  // Q loaded before the loop, whatever n (the bug)", pad + "  const int i = 0;"]
            for s in q:
                hoisted += s[1:-1] if s[0].strip().startswith("if (") else s
            hoisted.append(pad + "}")
        lines[a:b] = [x for s in stmts if s not in q for x in s]
    if not hoisted:
        raise ValueError("q_load_before_exit: the producer's loop loads no Q")
    return "\n".join(lines[:mark + 1] + hoisted + lines[mark + 1:])


__all__ = ["attention_kernel_mutant", "KERNEL_MUTANTS"]

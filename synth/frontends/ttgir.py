"""Triton TTGIR after the software pipeliner -> :class:`~synth.frontends.loop.Loop`.

Input: the text of ``.ttgir`` (``compiled_kernel.asm["ttgir"]``) for sm_80-style
``cp.async`` pipelining. The pipelined loop is the ``scf.for`` holding
``ttg.async_copy_global_to_local``; the ops before it in the same block are the
prologue, those after it the epilogue. Events:

* ``ttg.async_copy_global_to_local %ptr, %view ...`` -- an async write of the slot
  ``%view`` denotes. Its mask is ignored: a masked-off ``cp.async`` still zero-fills
  its destination (src-size 0), so the write happens either way.
* ``ttg.async_commit_group`` -- a commit on the one ``cp.async`` queue;
  ``ttg.async_wait {num = N}`` -- ``cp.async.wait_group N`` (its tokens are not used,
  as PTX does not use them).
* ``ttg.local_load %view`` -- a read of that slot.

Slots: ``ttg.memdesc_index %buf[%i]`` (or ``memdesc_subview``) of a
``ttg.local_alloc`` with ``M`` leading entries is slot ``%i`` of ``M``; subslices,
transposes and reinterprets keep buffer and slot. Slot indices inside the loop are
usually carried in ``iter_args`` (``select(i + 1 >= M, 0, i + 1)``): each carried
integer or view is fitted to ``a*k + b`` or ``(k + b) % N`` on the first
iterations and the fit is proven by induction with Z3 (the yield of the fitted
value at ``k`` equals the fit at ``k + 1``). What cannot be fitted and proven is
outside the model: a slot read from memory, an ``scf.if`` around copies, waits or
loads, sm_90 async ops (TMA, wgmma) touching a multi-buffered slot.
"""

from __future__ import annotations

import re

from .loop import Event, Loop
from .mlirtext import Op
from .scfloop import Walker, err, import_scf, short

COPY = "ttg.async_copy_global_to_local"
VIEW_OPS = ("ttg.memdesc_subslice", "ttg.memdesc_trans", "ttg.memdesc_reinterpret", "ttg.memdesc_reshape")
EVENT_OPS = (COPY, "ttg.async_commit_group", "ttg.async_wait", "ttg.local_load", "ttg.local_store")


def _shape(op: Op) -> list:
    m = re.search(r"memdesc<([\dx]+)x[a-z]", op.text)
    return [int(x) for x in m.group(1).split("x")] if m else []


def _key(kind: str, view) -> str:
    tag = "".join("_" + t.replace(",", "_") for t in view[3])
    return f"{kind}_{view[1]}{tag}"


def slot_view(walker: Walker, op: Op, env: dict, whole_buffer: bool = False) -> bool:
    """Bind the result of a slot selection (``ttg.memdesc_index`` / ``memdesc_subview``: slot ``%i`` of a
    ``local_alloc`` whose leading dimension is the slot count) or of a view op (subslice, transpose,
    reinterpret, reshape: same buffer and slot, a subslice tagged) to ``("view", buffer, slot, tags)``.
    ``whole_buffer``: a view op of the allocation itself is its slot 0. False for any other op."""
    n = op.name
    if n in ("ttg.memdesc_index", "ttg.memdesc_subview"):
        base = env.get(op.operands[0]) if op.operands else None
        if not (isinstance(base, tuple) and base[0] == "buf"):
            env[op.results[0]] = None
            return True
        idx = env.get(op.operands[1]) if len(op.operands) > 1 else None
        if len(op.operands) < 2:
            m = re.search(r"\[(-?\d+)", op.rest())
            idx = int(m.group(1)) if m else None
        shape = walker.shapes.get(base[1]) or [1]
        walker.buffers[base[1]] = shape[0]  # memdesc_index selects along the leading dimension
        env[op.results[0]] = ("view", base[1], idx, ())
        return True
    if n in VIEW_OPS:
        base = env.get(op.operands[0]) if op.operands else None
        if whole_buffer and isinstance(base, tuple) and base[0] == "buf":
            base = ("view", base[1], 0, ())
        if isinstance(base, tuple) and base[0] == "view":
            tag = base[3]
            if n == "ttg.memdesc_subslice":
                m = re.search(r"\[([\d,\s]+)\]", op.rest())
                tag = tag + ((m.group(1).replace(" ", ""),) if m else ("?",))
            env[op.results[0]] = ("view", base[1], base[2], tag)
        return True
    return False


class TritonWalker(Walker):
    """The ``ttg`` ops of sm_80 pipelining (module docstring)."""

    event_ops = EVENT_OPS

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        n = op.name
        if n == "ttg.local_alloc":
            name = op.results[0].lstrip("%") if op.results else f"buf{op.line}"
            self.buffers.setdefault(name, 1)
            self.shapes[name] = _shape(op)
            env[op.results[0]] = ("buf", name)
            return True
        if slot_view(self, op, env):
            return True
        if n == COPY:
            view = env.get(op.operands[1]) if len(op.operands) > 1 else None
            if isinstance(view, tuple) and view[0] == "buf":
                view = ("view", view[1], 0, ())
            self.need_view(op, view)
            events.append(Event("write", _key("copy", view), view[1], view[2], True, 0, line=op.line,
                                text=short(op)))
            return True
        if n == "ttg.async_commit_group":
            events.append(Event("commit", line=op.line, text=short(op)))
            return True
        if n == "ttg.async_wait":
            if "num" not in op.attrs:
                raise err(self.path, op.line, "ttg.async_wait without {num = N}", "print the TTGIR with attributes")
            events.append(Event("wait", count=int(op.attrs["num"]), line=op.line, text=short(op)))
            return True
        if n == "ttg.local_load":
            view = env.get(op.operands[0]) if op.operands else None
            if isinstance(view, tuple) and view[0] == "buf":
                view = ("view", view[1], 0, ())
            self.need_view(op, view)
            events.append(Event("read", _key("load", view), view[1], view[2], line=op.line, text=short(op)))
            return True
        if n == "ttg.local_store":
            view = env.get(op.operands[1]) if len(op.operands) > 1 else None
            if isinstance(view, tuple) and view[0] in ("view", "buf"):
                view = view if view[0] == "view" else ("view", view[1], 0, ())
                events.append(Event("write", _key("store", view), view[1], view[2], False, line=op.line,
                                    text=short(op)))
            return True
        if n == "ttg.local_dealloc":
            return True
        if n.startswith("ttng.") and ("async" in n or "tma" in n or "barrier" in n or "warp_group_dot" in n):
            raise err(self.path, op.line, f"{n}: sm_90 async ops are outside the model",
                      "compile for sm_80 (GPUTarget('cuda', 80, 32)) to get cp.async pipelining")
        return False


def new_dialect_names(text: str) -> str:
    """``text`` with Triton's dialects spelled ``ttg`` / ``ttng`` (before 3.2: ``triton_gpu`` / ``triton_nvidia_gpu``)."""
    return text.replace("triton_gpu.", "ttg.").replace("triton_nvidia_gpu.", "ttng.")


def ttgir_to_loop(text: str, path: str) -> Loop:
    """Read a pipelined TTGIR module; raises SynthError for what is outside the model (docstring)."""
    text = new_dialect_names(text)
    return import_scf(text, path, TritonWalker(path, {}), lambda op: op.name == COPY, "triton",
                      "a ttg.async_copy_global_to_local",
                      "pass the TTGIR of a kernel compiled with num_stages >= 2 for sm_80 (cp.async)")


__all__ = ["ttgir_to_loop", "TritonWalker", "slot_view", "VIEW_OPS"]

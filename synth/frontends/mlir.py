"""MLIR after ``scf`` pipelining of ``nvgpu`` async copies -> :class:`~synth.frontends.loop.Loop`.

Input: the text ``mlir-opt`` prints, e.g. after ``transform.memref.multibuffer`` and
``transform.nvgpu.pipeline_shared_memory_copies``. The pipelined loop is the
``scf.for`` holding ``nvgpu.device_async_copy``. Events:

* ``nvgpu.device_async_copy %src[...], %dst[...], n (, %srcElements)`` -- an async
  write of the slot ``%dst`` denotes (a ``srcElements`` below ``n`` zero-fills, so the
  write happens either way);
* ``nvgpu.device_async_create_group`` -- a commit on the one ``cp.async`` queue;
  ``nvgpu.device_async_wait {numGroups = N}`` -- ``cp.async.wait_group N`` (no
  ``numGroups``: 0);
* ``memref.load``, ``vector.load``, ``vector.transfer_read``, ``nvgpu.ldmatrix`` of
  a slot -- a read.

Shared buffers are ``memref.alloc`` in ``#gpu.address_space<workgroup>`` (or
``memref.get_global`` of one). A slot is ``memref.subview %buf[%i, ...]`` (slot ``%i``
of the leading dimension) or an access ``%buf[%i, ...]`` of the buffer itself; the
index may come from ``arith`` ops and ``affine.apply`` of the induction variable
or be carried in ``iter_args`` (fitted and proven by induction,
:mod:`~synth.frontends.scfloop`).
"""

from __future__ import annotations

import re

from .loop import Event, Loop
from .mlirtext import Op
from .scfloop import Walker, import_scf, short

COPY = "nvgpu.device_async_copy"
READS = ("memref.load", "vector.load", "vector.transfer_read", "nvgpu.ldmatrix")
EVENT_OPS = (COPY, "nvgpu.device_async_create_group", "nvgpu.device_async_wait") + READS


def _shape(op: Op) -> list:
    m = re.search(r"memref<([\dx?]+)x[a-z]", op.text)
    if not m:
        return []
    return [int(x) if x != "?" else None for x in m.group(1).split("x")]


class NvgpuWalker(Walker):
    """``memref`` / ``nvgpu`` / ``vector`` ops of an async-copy pipeline (module docstring)."""

    event_ops = EVENT_OPS

    def _index(self, op: Op, env: dict, base: str):
        """Value of the first index in ``base[...]`` on the op's line (None: unknown)."""
        m = re.search(re.escape(base) + r"\[\s*([^\],]+)", op.text)
        if not m:
            return 0
        tok = m.group(1).strip()
        if tok.startswith("%"):
            return env.get(tok)
        return int(tok) if re.fullmatch(r"-?\d+", tok) else None

    def _access(self, op: Op, env: dict, name: str):
        v = env.get(name)
        if isinstance(v, tuple) and v[0] == "buf":
            idx = self._index(op, env, name) if self.buffers.get(v[1], 1) > 1 else 0
            return ("view", v[1], idx, ())
        return v

    def dialect(self, op: Op, env: dict, events: list, where: str) -> bool:
        n = op.name
        if n in ("memref.alloc", "memref.alloca", "memref.get_global"):
            if "workgroup" in op.text or "address_space<3>" in op.text or ", 3>" in op.text:
                name = op.results[0].lstrip("%")
                shape = _shape(op)
                self.shapes[name] = shape
                self.buffers[name] = shape[0] if len(shape) >= 2 and shape[0] else 1
                env[op.results[0]] = ("buf", name)
            else:
                env[op.results[0]] = None
            return True
        if n == "memref.subview":
            base = env.get(op.operands[0]) if op.operands else None
            if isinstance(base, tuple) and base[0] == "buf":
                idx = self._index(op, env, op.operands[0])
                self.buffers[base[1]] = (self.shapes.get(base[1]) or [1])[0] or 1
                env[op.results[0]] = ("view", base[1], idx, ())
            elif isinstance(base, tuple) and base[0] == "view":
                env[op.results[0]] = base
            else:
                env[op.results[0]] = None
            return True
        if n in ("memref.cast", "memref.reinterpret_cast", "memref.collapse_shape", "memref.expand_shape",
                 "memref.assume_alignment"):
            base = env.get(op.operands[0]) if op.operands else None
            if op.results:
                env[op.results[0]] = base if isinstance(base, tuple) else None
            return True
        if n == COPY:
            m = re.search(r"device_async_copy\s+(%[\w$.-]+(?:#\d+)?)\[[^\]]*\]\s*,\s*(%[\w$.-]+(?:#\d+)?)", op.text)
            view = self._access(op, env, m.group(2)) if m else None
            self.need_view(op, view)
            events.append(Event("write", f"copy_{view[1]}", view[1], view[2], True, 0, line=op.line,
                                text=short(op)))
            return True
        if n == "nvgpu.device_async_create_group":
            events.append(Event("commit", line=op.line, text=short(op)))
            return True
        if n == "nvgpu.device_async_wait":
            events.append(Event("wait", count=int(op.attrs.get("numGroups", 0)), line=op.line, text=short(op)))
            return True
        if n in READS:
            src = op.operands[0] if op.operands else None
            view = self._access(op, env, src) if src else None
            if isinstance(view, tuple) and view[0] == "view":
                events.append(Event("read", f"{n.split('.')[-1]}_{view[1]}", view[1], view[2], line=op.line,
                                    text=short(op)))
            for r in op.results[:1]:
                env[r] = None
            return True
        if n in ("memref.store", "vector.store", "vector.transfer_write"):
            dst = op.operands[1] if len(op.operands) > 1 else None
            view = self._access(op, env, dst) if dst else None
            if isinstance(view, tuple) and view[0] == "view":
                events.append(Event("write", f"store_{view[1]}", view[1], view[2], False, line=op.line,
                                    text=short(op)))
            return True
        if n in ("memref.dealloc", "gpu.barrier", "nvvm.barrier0"):
            return True
        return False


def nvgpu_to_loop(text: str, path: str) -> Loop:
    """Read an MLIR module with a pipelined nvgpu async-copy loop (docstring); SynthError otherwise."""
    return import_scf(text, path, NvgpuWalker(path, {}), lambda op: op.name == COPY, "mlir",
                      "an nvgpu.device_async_copy",
                      "pass MLIR after transform.nvgpu.pipeline_shared_memory_copies (or another scf pipelining "
                      "of nvgpu async copies)")


__all__ = ["nvgpu_to_loop", "NvgpuWalker"]

"""``synth check``: read a compiler's pipelined loop, map it, prove its waits, report in its terms.

:func:`detect` names the input form from the file's content, :func:`import_loop`
runs the matching front-end, :func:`check_loop` maps and proves
(:func:`synth.verify.verify_program`) and returns a :class:`CheckResult` whose
:meth:`~CheckResult.render` explains each wait with its source line.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional

from ..errors import Loc, SynthError
from ..readfile import read_regular_text
from ..verify.phases import verify_hopper
from .loop import Loop
from .verdict import CheckResult, check_loop, lower_min_trip, zero_trip_program

from . import FORMS  # noqa: E402 - defined in the package, which loads no solver
from .mlir import nvgpu_to_loop
from .tilelang import check_tilelang, is_tilelang, tilelang_to_loop
from .ttgir import ttgir_to_loop
from .ttgir_hopper import HopperCheck, check_hopper, is_hopper_ttgir, ttgir_to_hopper
from .ttgir_nested import check_nested, is_nested_ttgir
from .ttgir_persistent import PersistentCheck, check_persistent, is_persistent_ttgir, persistent_to_hopper
from .ttgir_ws import WSCheck, check_ws, is_ws_ttgir, refuse_blackwell, ws_to_hopper
from .tvm import tvmscript_to_loops
MAX_BYTES = 16 * 1024 * 1024
"""Largest input read (16 MiB); a pipelined kernel's IR is a few hundred KiB at most."""


def detect(text: str, path: str) -> str:
    """``triton`` (TTGIR), ``tvm`` (TVMScript), ``mlir`` (nvgpu) or ``tilelang`` (TileLang's lowered device TIR),
    from the content."""
    if is_tilelang(text):
        return "tilelang"
    if any(t in text for t in ("ttg.async_copy_global_to_local", "ttg.async_wait", "#ttg.", "triton_gpu.")):
        return "triton"
    if "nvgpu.device_async_copy" in text or "nvgpu.device_async_wait" in text:
        return "mlir"
    if "async_commit_queue_scope" in text or "async_wait_queue_scope" in text or "T.prim_func" in text:
        return "tvm"
    raise SynthError(Loc(path), "cannot tell the input form: no ttg.async_copy_global_to_local (Triton), "
                     "nvgpu.device_async_copy (MLIR), async_commit_queue_scope (TVM) or T.ptx_cp_async / "
                     "T.tma_load (TileLang) in it",
                     "pass TTGIR after Triton's pipeliner, TVMScript after InjectSoftwarePipeline, MLIR "
                     "with nvgpu async copies, or TileLang's lowered device TIR")


def read_text(path: str) -> str:
    """The UTF-8 text of the regular file ``path``, at most :data:`MAX_BYTES` (read with :mod:`synth.readfile`:
    a folder, a device, a FIFO, a larger file or a byte that is not UTF-8 is a SynthError, exit 2)."""
    return read_regular_text(path, MAX_BYTES, "the input", fix="pass a .ttgir, .mlir or TVMScript .py file")


MAX_DIGITS = 40
"""Digits of an integer in a TTGIR or MLIR input (an ``i64`` has at most 20)."""


def check_digits(text: str, path: str) -> None:
    """SynthError at the first run of more than :data:`MAX_DIGITS` digits (every later reader converts
    numbers to ``int``; Python refuses more than 4300 digits and a long one is out of every type anyway)."""
    m = re.search(r"\d{%d,}" % (MAX_DIGITS + 1), text)
    if m is not None:
        before = text[:m.start()]
        line = before.count("\n") + 1
        col = m.start() - (before.rfind("\n") + 1) + 1
        raise SynthError(Loc(path, line, col), f"a number of {len(m.group())} digits",
                         f"integers in TTGIR and MLIR are at most 64-bit ({MAX_DIGITS} digits; docs/bounds.md)")


def _check_digits_unless_tvm(text: str, path: str, form: Optional[str]) -> None:
    try:
        f = form or detect(text, path)
    except SynthError:
        return  # the importer says what the input is not
    if f != "tvm":
        check_digits(text, path)


def import_loops(text: str, path: str, form: Optional[str] = None, func: Optional[str] = None) -> tuple:
    """Every :class:`Loop` of ``text`` in ``form`` (detected when None) that synth checks.

    A TVMScript file gives one loop per ``@T.prim_func`` with a pipelined loop (``func``
    picks one by name); TTGIR and MLIR give one loop (``func`` is refused there)."""
    form = form or detect(text, path)
    if form != "tvm":
        check_digits(text, path)
    if form == "tvm":
        return tvmscript_to_loops(text, path, func)
    if func is not None:
        raise SynthError(Loc(path), f"--func {func}: only a TVMScript file names its functions to check",
                         "drop --func (a TTGIR or MLIR input holds one pipelined loop)")
    if form == "tilelang":
        return (tilelang_to_loop(text, path),)
    if form == "triton":
        return (ttgir_to_loop(text, path),)
    return (nvgpu_to_loop(text, path),)


def import_loop(text: str, path: str, form: Optional[str] = None, func: Optional[str] = None) -> Loop:
    """The one :class:`Loop` of ``text`` (see :func:`import_loops`; several is a SynthError naming them)."""
    loops = import_loops(text, path, form, func)
    if len(loops) > 1:
        raise SynthError(Loc(path), f"{len(loops)} functions have pipelined loops "
                         f"({', '.join(lp.name for lp in loops)})", "pass --func NAME to pick one")
    return loops[0]


def _check_mbarrier(text: str, path: str, form: Optional[str], trip_count, min_trip_count, time_limit: float,
                    tightness: bool, arrive_sync: bool = True):
    """The Hopper prover's check of a Triton TTGIR that uses mbarriers (docs/check.md): warp-specialized
    (``ttg.warp_specialize``), persistent and flattened, or one warp group (TMA + wgmma); None for any other
    input. A Triton file with
    Blackwell ``tcgen05`` ops is refused first (exit 2 naming them). ``arrive_sync`` False: without the
    ``bar.sync`` Triton's lowering puts before each arrive and expect (the TTGIR's own convergence points only)."""
    if form == "triton" or (form is None and detect(text, path) == "triton"):
        refuse_blackwell(text, path)
    if is_nested_ttgir(text):  # a tile loop around the k-loop, or TMA stores in partitions (every T >= 0)
        return check_nested(text, path, trip_count=trip_count, min_trip_count=min_trip_count,
                            time_limit=time_limit, tightness=tightness, arrive_sync=arrive_sync)
    if min_trip_count == 0 and trip_count is None:
        return _check_mbarrier_from_zero(text, path, time_limit, tightness, arrive_sync)
    if is_ws_ttgir(text):
        return check_ws(text, path, trip_count=trip_count, min_trip_count=min_trip_count, time_limit=time_limit,
                        tightness=tightness, arrive_sync=arrive_sync)
    if is_persistent_ttgir(text):  # Triton's persistent matmul, its tile and k loops fused (flatten=True)
        return check_persistent(text, path, trip_count=trip_count, min_trip_count=min_trip_count,
                                time_limit=time_limit, tightness=tightness, arrive_sync=arrive_sync)
    if is_hopper_ttgir(text):
        return check_hopper(text, path, trip_count=trip_count, min_trip_count=min_trip_count,
                            time_limit=time_limit, tightness=tightness, arrive_sync=arrive_sync)
    return None


def _check_mbarrier_from_zero(text: str, path: str, time_limit: float, tightness: bool, arrive_sync: bool = True):
    """:func:`_check_mbarrier` with ``--min-trip-count 0``: the same mapping, proven for T >= 0."""
    for is_form, to_hopper, result in ((is_ws_ttgir, ws_to_hopper, WSCheck),
                                       (is_persistent_ttgir, persistent_to_hopper, PersistentCheck),
                                       (is_hopper_ttgir, ttgir_to_hopper, HopperCheck)):
        if is_form(text):
            imp = to_hopper(text, path, arrive_sync=arrive_sync)
            if not isinstance(imp.program.trip_count, int):  # a trip count fixed in the IR has no bound to lower
                imp = replace(imp, program=zero_trip_program(imp.program))
            return result(imp, verify_hopper(imp.program, time_limit=time_limit, tightness=tightness))
    return None


def _read_and_check_mbarrier(path: str, form: Optional[str], func: Optional[str], trip_count, min_trip_count,
                             time_limit: float, tightness: bool, arrive_sync: bool = True) -> tuple:
    """``(text, result)``: the file read (:func:`read_text`, its digits checked unless TVMScript) and, for a
    Triton input with no ``func``, :func:`_check_mbarrier`'s result (None when the loop uses no mbarrier)."""
    text = read_text(path)
    _check_digits_unless_tvm(text, path, form)
    if form == "tilelang" or (form is None and detect_quiet(text) == "tilelang"):
        if func is not None:
            raise SynthError(Loc(path), f"--func {func}: only a TVMScript file names its functions to check",
                             "drop --func (a TileLang device module holds one kernel)")
        return text, check_tilelang(text, path, trip_count=trip_count, min_trip_count=min_trip_count,
                                    time_limit=time_limit, tightness=tightness)
    if form in (None, "triton") and func is None:
        r = _check_mbarrier(text, path, form, trip_count, min_trip_count, time_limit, tightness, arrive_sync)
        if r is not None or arrive_sync:
            return text, r
    if not arrive_sync:
        raise SynthError(Loc(path), "--without-lowering-barriers applies to Triton's sm_90 TTGIR (TMA, mbarriers, "
                         "wgmma) only: this input is not one", "drop --without-lowering-barriers")
    return text, None


def detect_quiet(text: str) -> Optional[str]:
    """:func:`detect`, or None when the form cannot be told."""
    try:
        return detect(text, "")
    except SynthError:
        return None


def check_file_all(path: str, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
                   time_limit: float = 10.0, form: Optional[str] = None, tightness: bool = True,
                   func: Optional[str] = None, arrive_sync: bool = True) -> tuple:
    """Read ``path`` (a regular file, at most :data:`MAX_BYTES`), import it, map and prove the waits of each
    pipelined loop it holds (a TVMScript file: every ``@T.prim_func`` with one, or ``func``). ``arrive_sync``
    False (Triton sm_90 TTGIR only, else SynthError): the TTGIR's own convergence points, without the
    ``bar.sync`` Triton's lowering puts before each arrive and expect (docs/check.md)."""
    text, r = _read_and_check_mbarrier(path, form, func, trip_count, min_trip_count, time_limit, tightness,
                                       arrive_sync)
    if r is not None:
        return (r,)
    return tuple(check_loop(lp, trip_count=trip_count, min_trip_count=min_trip_count, time_limit=time_limit,
                            tightness=tightness) for lp in import_loops(text, path, form, func))


def check_file(path: str, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
               time_limit: float = 10.0, form: Optional[str] = None, tightness: bool = True,
               func: Optional[str] = None) -> CheckResult:
    """Read ``path``, import it, map it and prove its waits (one pipelined loop: a file with several is a
    SynthError unless ``func`` picks one; :func:`check_file_all` checks them all)."""
    text, r = _read_and_check_mbarrier(path, form, func, trip_count, min_trip_count, time_limit, tightness)
    if r is not None:
        return r
    return check_loop(import_loop(text, path, form, func), trip_count=trip_count, min_trip_count=min_trip_count,
                      time_limit=time_limit, tightness=tightness)


__all__ = ["check_file", "check_file_all", "check_loop", "import_loop", "import_loops", "detect", "CheckResult",
           "FORMS", "lower_min_trip", "zero_trip_program"]

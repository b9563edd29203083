"""``synth check``: read a compiler's pipelined loop, map it, prove its waits, report in its terms.

:func:`detect` names the input form from the file's content, :func:`import_loop`
runs the matching front-end, :func:`check_loop` maps and proves
(:func:`synth.verify.verify_program`) and returns a :class:`CheckResult` whose
:meth:`~CheckResult.render` explains each wait with its source line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from ..errors import Loc, SynthError
from ..expr import Num, evaluate, to_str
from ..printer import program_text
from ..program import Program
from ..readfile import read_regular_text
from ..verify import Report, verify_program
from ..verify.phases import verify_hopper
from .loop import Loop, SourceMap, to_program

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


@dataclass(frozen=True)
class CheckResult:
    loop: Loop
    program: Program
    source: SourceMap
    report: Report

    @property
    def ok(self) -> bool:
        return self.report.ok

    def counts(self) -> dict:
        """Waits proven / refuted / unknown."""
        out = {"proven": 0, "refuted": 0, "unknown": 0}
        for v in self.report.verdicts:
            out[v.status] += 1
        return out

    def render(self, verbose: bool = False) -> str:
        """Per wait: its source line, verdict, tightness and (refuted) the counterexample."""
        lp, p, rep = self.loop, self.report.program, self.report
        trip = p.trip_count if isinstance(p.trip_count, int) else f"{p.trip_count} >= {p.min_trip_count}"
        c = self.counts()
        fn = f" of function {lp.name}" if lp.source == "tvm" else ""
        lines = [f"{lp.path}: {lp.source} loop at line {lp.body_line}{fn}, trip count {trip}: "
                 f"{len(p.waits)} waits, {c['proven']} proven, {c['refuted']} refuted, {c['unknown']} unknown"
                 + ("" if rep.ok else " -- NOT PROVEN")]
        # "subsumed by wait #k": this wait may go while #k stays. Read alone, two such verdicts (#k redundant,
        # this one subsumed by #k) say both could go; only one may.
        subsumed = {v.index: int(m.group(1)) for v in rep.verdicts if v.tight is False
                    for m in [re.search(r"subsumed by wait #(\d+)", v.reason or "")] if m}
        for v in rep.verdicts:
            w = p.waits[v.index]
            line, text = self.source.waits[v.index]
            tight = "" if v.tight is None else (", tight" if v.tight else ", not tight")
            lines.append(f"  wait #{v.index} line {line} ({w.part}) {text}: keeps <= {to_str(w.in_flight)} groups "
                         f"in flight before {w.before}: {v.status}{tight}")
            if v.tight is False and v.reason:
                lines.append(f"    {v.reason}")
                if v.index in subsumed:
                    lines.append(f"    may be removed while wait #{subsumed[v.index]} stays")
                for j in sorted(j for j, k in subsumed.items() if k == v.index):
                    lines.append(f"    wait #{j} is subsumed by this one: remove one of the two, not both")
            if v.status != "proven":
                for o in rep.obligations:
                    if o.wait == v.index and o.status != "proven":
                        lines.append(f"    {o.status}: {o.description}")
                        if o.counterexample is not None:
                            lines.append(o.counterexample.render("      "))
                            lines += self._source_of(o.counterexample, "      ")
                        elif o.reason:
                            lines.append(f"      {o.reason}")
        if rep.global_failures:
            lines.append("  not charged to any wait (a race no wait guards):")
            for o in rep.global_failures:
                lines.append(f"    {o.status}: {o.description}")
                if o.counterexample is not None:
                    lines.append(o.counterexample.render("      "))
                    lines += self._source_of(o.counterexample, "      ")
        lines.append("  ops (synth name <- source lines):")
        for name, where in self.source.ops.items():
            locs = ", ".join(f"{part} line {ln}" for part, ln, _ in where)
            lines.append(f"    {name} ({'async ' if p.op(name).is_async else ''}stage {p.op(name).stage}): "
                         f"{where[0][2]}  [{locs}]")
        if verbose:
            lines.append("  mapped program:")
            lines += ["    " + x for x in program_text(p).splitlines()]
        return "\n".join(lines)

    def _source_of(self, cex, indent: str) -> list:
        """The source line of each statement the trace marks (``<--``), in the part it ran in."""
        out = []
        part = None
        for t in cex.trace:
            m = re.match(r"\s*step \d+ \((\w+), i = ", t)
            if m:
                part = m.group(1)
            if "<--" in t:
                name = t.strip().split(" ", 1)[0]
                hits = [(p, ln, txt) for p, ln, txt in self.source.ops.get(name, []) if p == part]
                for p, ln, txt in hits[:1]:
                    out.append(f"{indent}source: {name} in the {p} is line {ln}: {txt}")
        return out

    def to_json(self) -> dict:
        p = self.report.program
        return {"file": self.loop.path, "source": self.loop.source, "function": self.loop.name, "ok": self.ok,
                "counts": self.counts(),
                "trip_count": p.trip_count, "min_trip_count": p.min_trip_count,
                "waits": [{"index": v.index, "line": self.source.waits[v.index][0],
                           "text": self.source.waits[v.index][1], "part": p.waits[v.index].part,
                           "in_flight": to_str(p.waits[v.index].in_flight), "status": v.status, "tight": v.tight,
                           "reason": v.reason,
                           "counterexample": v.counterexample.render("") if v.counterexample else None}
                          for v in self.report.verdicts],
                "global_failures": [o.description for o in self.report.global_failures]}


def lower_min_trip(loop: Loop, min_trip_count: Optional[int]) -> Loop:
    """``loop`` allowing every trip count down to ``min_trip_count`` when that is below the smallest the
    front-end assumed (``--min-trip-count 0``: a loop that may run zero times). Every trip count in between
    must give the body a non-negative extent (else a SynthError at the loop's line); a loop with a fixed
    trip count, or a bound at or above the front-end's, is returned unchanged."""
    if min_trip_count is None or loop.trip_symbol is None or min_trip_count >= loop.min_trip:
        return loop
    extent = Num(loop.body_extent) if isinstance(loop.body_extent, int) else loop.body_extent
    for t in range(min_trip_count, loop.min_trip):
        try:
            b = evaluate(extent, {loop.trip_symbol: t})
        except (KeyError, ValueError, ZeroDivisionError):  # another free name, a division by zero
            b = None
        if b is None or isinstance(b, bool) or b < 0:
            value = "not a number of iterations" if b is None or isinstance(b, bool) else f"{b}"
            raise SynthError(Loc(loop.path, loop.body_line, 1),
                             f"--min-trip-count {min_trip_count}: at trip count {t} the loop's extent "
                             f"{to_str(extent)} is {value}, and the mapping reads the extent as the number of "
                             "body iterations (a negative one is outside the model)",
                             f"use --min-trip-count {loop.min_trip} or more")
    return replace(loop, min_trip=min_trip_count)


def check_loop(loop: Loop, *, trip_count: Optional[int] = None, min_trip_count: Optional[int] = None,
               time_limit: float = 10.0, tightness: bool = True) -> CheckResult:
    """Map ``loop`` and prove its waits for every trip count >= ``min_trip_count`` (default: the smallest the
    loop allows; 0 is honoured through :func:`lower_min_trip`, and what the mapping cannot express at the lower
    counts, such as a prologue copy guarded by ``0 < T``, is a SynthError naming the flag and the line)."""
    lowered = lower_min_trip(loop, min_trip_count) if trip_count is None else loop
    try:
        program, smap = to_program(lowered, min_trip=min_trip_count, trip_count=trip_count)
    except SynthError as e:
        if lowered is loop:
            raise
        raise SynthError(e.loc, f"--min-trip-count {min_trip_count}: {e.msg}", e.fix) from None
    report = verify_program(program, time_limit=time_limit, tightness=tightness, smt2=False)
    return CheckResult(loop, program, smap, report)


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


def zero_trip_program(p):
    """The Hopper program ``p`` (:class:`~synth.hopper.ir.HopperProgram`) quantified over every trip count
    T >= 0: ``min_trip_count`` 0 in it and in each role's program. The mapping of a Triton TTGIR does not
    depend on the bound (the guards are the IR's own predicates), so only the bound changes."""
    roles = tuple(replace(r, program=replace(r.program, min_trip_count=0)) for r in p.roles)
    return replace(p, min_trip_count=0, roles=roles)


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

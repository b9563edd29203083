"""Front-ends: each a pure function from a compiler's pipelined IR to synth's program.

* :mod:`~synth.frontends.ttgir` -- Triton TTGIR after the pipeliner (``ttg.async_copy_global_to_local``).
* :mod:`~synth.frontends.tvm` -- TVM TIR after ``InjectSoftwarePipeline`` (``async_commit_queue_scope``).
* :mod:`~synth.frontends.mlir` -- MLIR ``nvgpu.device_async_copy`` loops after ``scf`` pipelining.
* :mod:`~synth.frontends.tilelang` -- TileLang's lowered device TIR (``cp.async``, or sm_90 TMA + mbarrier + wgmma).
* :mod:`~synth.frontends.loop` -- their common form (:class:`Loop`) and its mapping onto a Program.
* :mod:`~synth.frontends.check` -- ``synth check``: import, map, prove, report in the source's terms.

docs/check.md states the mapping rules.
"""

FORMS = ("triton", "tvm", "mlir", "tilelang")
"""The input forms ``synth check --form`` takes (here, so the CLI's parser loads no solver)."""

_LAZY = {"CheckResult": "check", "check_file": "check", "check_loop": "check", "detect": "check",
         "import_loop": "check", "Event": "loop", "Loop": "loop", "to_program": "loop"}


def __getattr__(name: str):
    # the front-ends load Z3: only when one is used, so ``synth run`` and ``synth.kernel`` stay light
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["check_file", "check_loop", "import_loop", "detect", "CheckResult", "Event", "Loop", "to_program"]

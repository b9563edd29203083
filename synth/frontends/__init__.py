"""Front-ends: each a pure function from a compiler's pipelined IR to synth's program.

* :mod:`~synth.frontends.ttgir` -- Triton TTGIR after the pipeliner (``ttg.async_copy_global_to_local``).
* :mod:`~synth.frontends.tvm` -- TVM TIR after ``InjectSoftwarePipeline`` (``async_commit_queue_scope``).
* :mod:`~synth.frontends.mlir` -- MLIR ``nvgpu.device_async_copy`` loops after ``scf`` pipelining.
* :mod:`~synth.frontends.loop` -- their common form (:class:`Loop`) and its mapping onto a Program.
* :mod:`~synth.frontends.check` -- ``synth check``: import, map, prove, report in the source's terms.

docs/check.md states the mapping rules.
"""

from .check import CheckResult, check_file, check_loop, detect, import_loop
from .loop import Event, Loop, to_program

__all__ = ["check_file", "check_loop", "import_loop", "detect", "CheckResult", "Event", "Loop", "to_program"]

"""synth: software-pipeline schedules for GPU loops, synthesized with CP-SAT and proved with Z3.

Data flows one way: problem (``load``) -> dependence graph (``graph``) ->
schedule (``model``) -> pipelined program (``lower``) -> {proof (``verify``),
kernel and exports (``emit``)}.

The Python API is :mod:`synth.api` (one function per command: ``load``,
``solve``, ``lower``, ``verify``, ``certify``, ``emit``, ``run``, ``search``;
docs/api.md), and :func:`synth.kernel.load` turns an output folder into a
callable GEMM. ``import synth.api as synth`` gives the command names.
"""

__version__ = "0.8.0"


def __getattr__(name: str):
    # ``import synth`` stays light; ``synth.api`` and ``synth.kernel`` load on first use.
    if name in ("api", "kernel"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

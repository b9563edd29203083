"""synth: software-pipeline schedules for GPU loops, synthesized with CP-SAT and proved with Z3.

Data flows one way: problem (``load``) -> dependence graph (``graph``) ->
schedule (``model``) -> pipelined program (``lower``) -> {proof (``verify``),
kernel and exports (``emit``)}.
"""

__version__ = "0.1.0"

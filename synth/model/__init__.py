"""The CP-SAT model of the latency model (docs/latency_model.md), SLOTHY-style phases.

* :mod:`.vars` — the typed variable table of one fixed-II model and thin wrappers;
* :mod:`.constraints` — one ``add_<family>`` per constraint family; ``build_model``;
* :mod:`.objective` — what "best" means, its per-II encoding, lower bounds;
* :mod:`.solve` — the II search, re-checks, infeasibility explanations.

Public entry: :func:`solve`.
"""

from .constraints import build_model
from .solve import InternalError, best_uniform, heuristic_schedules, recheck, solve, uniform_schedule

__all__ = ["solve", "build_model", "recheck", "uniform_schedule", "heuristic_schedules", "best_uniform",
           "InternalError"]

"""Typed table of the CP-SAT variables of one fixed-II model, and thin model wrappers.

Every variable is named after the op or buffer it belongs to (``stage[load_A]``,
``t[mma]``, ``mult[A_s]``) so that a logged or exported model reads like the
problem. :class:`Model` wraps ``cp_model.CpModel``: ``int``/``bool`` create
named variables, ``add`` posts a linear constraint with optional enforcement
literals and records it as a formula when logging, ``family`` hands out the
enforcement literal of a user-visible constraint family (a dependence, a unit,
a capacity, a pin) so infeasibility can be explained in the user's terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ortools.sat.python import cp_model

from ..graph import Graph
from ..problem import Problem

IntVar = cp_model.IntVar
Lin = cp_model.LinearExprT


@dataclass(frozen=True)
class FamilyInfo:
    """What an enforcement literal stands for, for explanations."""

    key: tuple
    """``("dep", edge_index)``, ``("unit", name)``, ``("shared",)``, ``("pin_stage",)`` ..."""
    text: str


class Model:
    """Thin wrapper over ``CpModel`` with named variables and family literals."""

    def __init__(self, log: bool = False) -> None:
        self.m = cp_model.CpModel()
        self.log = log
        self.formulas: list[str] = []
        self.families: dict[tuple, tuple[cp_model.IntVar, FamilyInfo]] = {}

    def int(self, name: str, lo: int, hi: int) -> IntVar:
        return self.m.NewIntVar(lo, hi, name)

    def bool(self, name: str) -> IntVar:
        return self.m.NewBoolVar(name)

    def const(self, value: int) -> IntVar:
        return self.m.NewConstant(value)

    def add(self, ct: cp_model.BoundedLinearExpression | bool, formula: str = "",
            enforce: Sequence[IntVar] = ()) -> None:
        """Post ``ct`` (a linear comparison), enforced by every literal in ``enforce``."""
        if isinstance(ct, (bool, int)):
            # A constant comparison: true is dropped, false forbids the enforcement.
            if not ct:
                self.m.AddBoolOr([lit.Not() for lit in enforce])
        else:
            c = self.m.Add(ct)
            if enforce:
                c.OnlyEnforceIf(list(enforce))
        if self.log and formula:
            guard = f"  [if {', '.join(str(x) for x in enforce)}]" if enforce else ""
            self.formulas.append(formula + guard)

    def family(self, key: tuple, text: str) -> IntVar:
        """The enforcement literal of one user constraint family (created once)."""
        if key not in self.families:
            lit = self.m.NewBoolVar("on[" + ":".join(str(k) for k in key) + "]")
            self.families[key] = (lit, FamilyInfo(key, text))
        return self.families[key][0]


@dataclass
class Vars:
    """Variables of the model at one initiation interval ``ii``."""

    ii: int
    stage_hi: int
    """Upper end of the stage domains (bounds are constraints, so they can be explained)."""
    stage: list[IntVar]
    """``stage[a]``: the op's pipeline stage."""
    t: list[IntVar]
    """``t[a]``: issue offset within the step, ``0 <= t_a <= II - issue_a``."""
    is_async: list[IntVar]
    """``async[a]``: 1 when the op runs asynchronously (constant 0 off async units)."""
    stage_async: list[IntVar]
    """``stage_async[k]``: stage ``k`` is async (TVM's ``software_pipeline_async_stages``)."""
    mult: dict[str, IntVar]
    """``mult[x]``: slots of buffer ``x``."""
    tail: IntVar
    max_stage: IntVar
    shared_units: IntVar
    """Shared bytes divided by ``shared_quantum`` (the gcd of the shared buffer sizes)."""
    shared_quantum: int
    tail_hi: int = 0
    shared_hi: int = 0
    before: dict[tuple[int, int], IntVar] = field(default_factory=dict)
    """``before[a, b]``: 1 when ``a`` precedes ``b`` in the body (forced when it does)."""
    prec: dict[tuple[int, int], IntVar] = field(default_factory=dict)
    """``prec[a, b]``: 1 exactly when ``a`` precedes ``b`` in the body (both directions enforced)."""

    def tau(self, a: int) -> Lin:
        """Position key of op ``a`` in the body: ``n * t_a + a`` (distinct, order-preserving)."""
        return len(self.t) * self.t[a] + a


def new_vars(mdl: Model, problem: Problem, graph: Graph, ii: int, stage_hi: int) -> Vars:
    """Create every variable of the fixed-II model (domains only, no constraints)."""
    ops = problem.ops
    n = len(ops)
    stage = [mdl.int(f"stage[{op.name}]", 0, stage_hi) for op in ops]
    t = [mdl.int(f"t[{op.name}]", 0, ii - op.issue) for op in ops]
    is_async = []
    for op in ops:
        if problem.target.unit(op.unit).is_async:
            is_async.append(mdl.bool(f"async[{op.name}]"))
        else:
            is_async.append(mdl.const(0))
    stage_async = [mdl.bool(f"stage_async[{k}]") for k in range(stage_hi + 1)]
    max_dist = max((e.distance for e in graph.edges), default=0)
    mult_hi = stage_hi + max_dist + 2
    mult = {}
    for b in problem.buffers:
        mult[b.name] = mdl.const(1) if b.carried else mdl.int(f"mult[{b.name}]", 1, mult_hi)
    tail_hi = (stage_hi + 1) * ii + max(op.latency for op in ops)
    tail = mdl.int("tail", 0, tail_hi)
    max_stage = mdl.int("max_stage", 0, stage_hi)
    q = shared_quantum(problem)
    sh_hi = sum(b.bytes // q * (1 if b.carried else mult_hi) for b in problem.buffers if b.space == "shared")
    shared_units = mdl.int("shared_bytes/q", 0, max(sh_hi, 0))
    assert n == len(t)
    return Vars(ii, stage_hi, stage, t, is_async, stage_async, mult, tail, max_stage, shared_units, q,
                tail_hi, max(sh_hi, 0))


def shared_quantum(problem: Problem) -> int:
    """The gcd of the shared buffer sizes (shared memory is counted in these units)."""
    from math import gcd

    q = 0
    for b in problem.buffers:
        if b.space == "shared":
            q = gcd(q, b.bytes)
    return q or 1

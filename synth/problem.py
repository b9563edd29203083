"""The validated problem: a loop body to pipeline (docs/problem-format.md), as frozen dataclasses.

Produced by :func:`synth.load.load_problem` (or :func:`synth.gemm.expand_gemm`);
every element keeps the :class:`~synth.errors.Loc` it came from so later stages
can point back into ``problem.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

from .errors import Loc
from .expr import Expr


@dataclass(frozen=True)
class Buffer:
    name: str
    space: str
    """``shared`` or ``register``."""
    bytes: int
    carried: bool = False
    """An accumulator carried across iterations: never multi-buffered."""
    loc: Loc = field(default=Loc("<none>"), compare=False)


@dataclass(frozen=True)
class Predicate:
    """``when:`` of an op: an affine condition on the loop variable, or opaque."""

    text: str
    expr: Optional[Expr]
    """Parsed condition; None when opaque (true on an unknown subset of iterations)."""

    @property
    def opaque(self) -> bool:
        return self.expr is None


@dataclass(frozen=True)
class Op:
    name: str
    unit: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    latency: int
    """Cycles from issue to result."""
    issue: int
    """Cycles the op's unit is busy."""
    when: Optional[Predicate] = None
    loc: Loc = field(default=Loc("<none>"), compare=False)


@dataclass(frozen=True)
class Dep:
    """An explicit extra dependence edge ``deps: [{from, to, distance, latency}]``."""

    src: str
    dst: str
    distance: int
    latency: Optional[int]
    """None: use the producer's latency."""
    loc: Loc = field(default=Loc("<none>"), compare=False)


@dataclass(frozen=True)
class Unit:
    name: str
    is_async: bool
    count: int = 1
    """How many ops of this unit may be busy at once (default one)."""
    loc: Loc = field(default=Loc("<none>"), compare=False)


@dataclass(frozen=True)
class Target:
    shared_bytes: int
    registers_bytes: Optional[int]
    units: tuple[Unit, ...]
    loc: Loc = field(default=Loc("<none>"), compare=False)

    def unit(self, name: str) -> Unit:
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(name)

    @property
    def async_units(self) -> tuple[str, ...]:
        """Async unit names; the index of a unit here is its queue number."""
        return tuple(u.name for u in self.units if u.is_async)


@dataclass(frozen=True)
class Pins:
    """The user-pinned part of the schedule (TVM's annotations); None means free."""

    stage: Optional[tuple[int, ...]] = None
    order: Optional[tuple[int, ...]] = None
    async_stages: Optional[tuple[int, ...]] = None
    max_stage: Optional[int] = None
    loc: Loc = field(default=Loc("<none>"), compare=False)
    stage_loc: Optional[Loc] = field(default=None, compare=False)
    order_loc: Optional[Loc] = field(default=None, compare=False)


@dataclass(frozen=True)
class Loop:
    var: str
    trip_count: int | str
    """An int, or the name of a symbol (``T``)."""
    min_trip_count: int
    """Equal to ``trip_count`` when static."""
    loc: Loc = field(default=Loc("<none>"), compare=False)

    @property
    def symbolic(self) -> bool:
        return isinstance(self.trip_count, str)


@dataclass(frozen=True)
class Objective:
    """Weights of the lexicographic/weighted objective; ``latency`` first by default."""

    terms: tuple[tuple[str, int], ...] = (("latency", 1),)


@dataclass(frozen=True)
class Problem:
    name: str
    loop: Loop
    buffers: tuple[Buffer, ...]
    ops: tuple[Op, ...]
    target: Target
    deps: tuple[Dep, ...] = ()
    pins: Pins = Pins()
    objective: Objective = Objective()
    gemm: Optional[object] = None
    """For ``kind: gemm`` problems: the :class:`synth.gemm.GemmConfig` they came from."""
    path: str = "<memory>"

    def op(self, name: str) -> Op:
        return self.ops[self.op_index(name)]

    def op_index(self, name: str) -> int:
        """Program-order index of op ``name`` (KeyError when there is none)."""
        return self._op_index[name]

    def buffer(self, name: str) -> Buffer:
        return self._buffers[name]

    @cached_property
    def _op_index(self) -> dict[str, int]:
        return {o.name: i for i, o in enumerate(self.ops)}

    @cached_property
    def _buffers(self) -> dict[str, Buffer]:
        return {b.name: b for b in self.buffers}

    def queue_of_unit(self, unit: str) -> Optional[int]:
        """Queue number of an async unit (its index among async units), else None."""
        names = self.target.async_units
        return names.index(unit) if unit in names else None

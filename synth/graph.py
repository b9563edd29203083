"""Dependence graph of a loop body: edges with iteration distance and latency.

From ``reads``/``writes`` in program order:

* **raw** — a read after a write of the same buffer in program order depends on
  it in the same iteration (distance 0); a read at or before the write (an
  accumulator such as ``C_r``) depends on the previous iteration's write
  (distance 1). Latency: the producer's.
* **war** — a write at or after a read of the same buffer: iteration ``v + 1``'s
  write (or ``v``'s, when the write follows the read) must not clobber what
  iteration ``v`` still has to read. For buffers that may be multi-buffered this
  is what the multiplicity removes (``buffered=True``: not a scheduling
  constraint, see :func:`synth.schedule.multiplicities`); for ``carried`` buffers
  it is a hard ordering constraint with latency 0.
* **waw** — successive writes of a carried buffer by different ops.
* **explicit** — ``deps:`` entries of the problem file.

A zero-distance cycle (only possible through explicit deps) is an error, as is a
pinned schedule that breaks an edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .bounds import MAX_EDGES
from .errors import SynthError
from .problem import Problem


@dataclass(frozen=True)
class Edge:
    src: int
    """Producer op index (program order)."""
    dst: int
    distance: int
    """Iterations between the producer's instance and the consumer's."""
    latency: int
    kind: str
    """raw | war | waw | explicit"""
    buffer: str | None = None
    buffered: bool = False
    """A WAR edge that multi-buffering removes (never a scheduling constraint)."""

    @property
    def constraint(self) -> bool:
        return not self.buffered


@dataclass(frozen=True)
class Graph:
    n: int
    edges: tuple[Edge, ...]

    def constraints(self) -> tuple[Edge, ...]:
        """Edges every schedule must satisfy (excludes buffered WAR edges)."""
        return self.hard_edges

    @cached_property
    def hard_edges(self) -> tuple[Edge, ...]:
        """:meth:`constraints`, computed once."""
        return tuple(e for e in self.edges if e.constraint)

    def raw_edges(self, buffer: str | None = None) -> tuple[Edge, ...]:
        """RAW edges, all or those on ``buffer``."""
        if buffer is None:
            return tuple(e for e in self.edges if e.kind == "raw")
        return self.raw_by_buffer.get(buffer, ())

    @cached_property
    def raw_by_buffer(self) -> dict[str, tuple[Edge, ...]]:
        """RAW edges grouped by buffer (computed once: bodies of a thousand ops ask per buffer)."""
        out: dict[str, list[Edge]] = {}
        for e in self.edges:
            if e.kind == "raw" and e.buffer is not None:
                out.setdefault(e.buffer, []).append(e)
        return {k: tuple(v) for k, v in out.items()}


def build_graph(problem: Problem) -> Graph:
    """All dependence edges of ``problem``; raises on a zero-distance cycle, and when the
    buffers would make more than :data:`~synth.bounds.MAX_EDGES` edges."""
    ops = problem.ops
    carried = {b.name for b in problem.buffers if b.carried}
    writers: dict[str, list[int]] = {}
    for a_idx, prod in enumerate(ops):
        for buf in dict.fromkeys(prod.writes):
            writers.setdefault(buf, []).append(a_idx)
    _check_edge_count(problem, writers, carried)
    edges: list[Edge] = []
    for b_idx, op in enumerate(ops):
        for buf in op.reads:
            for a_idx in writers.get(buf, ()):
                prod = ops[a_idx]
                dist = 0 if a_idx < b_idx else 1
                edges.append(Edge(a_idx, b_idx, dist, prod.latency, "raw", buf))
                # The write that follows (or is) this read must wait for it.
                if a_idx >= b_idx:
                    edges.append(Edge(b_idx, a_idx, 0 if a_idx > b_idx else 1, 0, "war", buf,
                                      buffered=buf not in carried))
                else:
                    edges.append(Edge(b_idx, a_idx, 1, 0, "war", buf, buffered=buf not in carried))
    for buf in (b.name for b in problem.buffers if b.carried):  # problem order: deterministic
        ws = writers.get(buf, [])
        for x in ws:
            for y in ws:
                if x < y:
                    edges.append(Edge(x, y, 0, 0, "waw", buf))
                    edges.append(Edge(y, x, 1, 0, "waw", buf))
    for d in problem.deps:
        a, b = problem.op_index(d.src), problem.op_index(d.dst)
        lat = ops[a].latency if d.latency is None else d.latency
        edges.append(Edge(a, b, d.distance, lat, "explicit"))
    graph = Graph(len(ops), tuple(dict.fromkeys(edges)))
    _check_zero_cycles(problem, graph)
    return graph


def _check_edge_count(problem: Problem, writers: dict[str, list[int]], carried: set[str]) -> None:
    """Refuse bodies whose buffers alone make more edges than the bound (every reader of a
    buffer depends on every writer): the model and the checks are per edge."""
    readers: dict[str, int] = {}
    for op in problem.ops:
        for buf in op.reads:
            readers[buf] = readers.get(buf, 0) + 1
    total = 0
    worst: tuple[int, str] = (0, "")
    for buf, ws in writers.items():
        n = 2 * readers.get(buf, 0) * len(ws) + (2 * len(ws) * len(ws) if buf in carried else 0)
        total += n
        worst = max(worst, (n, buf))
    if total > MAX_EDGES:
        n, buf = worst
        raise SynthError(problem.buffer(buf).loc if buf else None,
                         f"the body has about {total} dependence edges, more than the {MAX_EDGES} allowed "
                         f"(buffer '{buf}' alone: {readers.get(buf, 0)} readers x {len(writers[buf])} writers)",
                         "give the ops their own buffers, or split the loop (see docs/bounds.md)")


def _check_zero_cycles(problem: Problem, graph: Graph) -> None:
    """Raise on a cycle of hard distance-0 edges (an iterative DFS: a body of any length works)."""
    adj: dict[int, list[Edge]] = {i: [] for i in range(graph.n)}
    for e in graph.constraints():
        if e.distance == 0:
            if e.src == e.dst:
                _cycle_error(problem, [e])
            adj[e.src].append(e)
    state = [0] * graph.n  # 0 unvisited, 1 on the current path, 2 done
    for root in range(graph.n):
        if state[root]:
            continue
        state[root] = 1
        path: list[Edge] = []          # edges from root to the op on top of ``todo``
        todo = [(root, iter(adj[root]))]
        while todo:
            u, it = todo[-1]
            e = next(it, None)
            if e is None:
                state[u] = 2
                todo.pop()
                if path:
                    path.pop()
                continue
            if state[e.dst] == 1:
                srcs = [s.src for s in path]
                cyc = path[srcs.index(e.dst):] if e.dst in srcs else []
                _cycle_error(problem, cyc + [e])
            if state[e.dst] == 0:
                state[e.dst] = 1
                path.append(e)
                todo.append((e.dst, iter(adj[e.dst])))


def _cycle_error(problem: Problem, cycle: list[Edge]) -> None:
    names = [problem.ops[e.src].name for e in cycle] + [problem.ops[cycle[-1].dst].name]
    loc = next((d.loc for d in problem.deps
                if any(d.src == problem.ops[e.src].name and d.dst == problem.ops[e.dst].name for e in cycle)),
               problem.ops[cycle[0].src].loc)
    if len(names) > 12:  # a long cycle: its ends and how many ops it passes in between
        names = names[:5] + [f"... {len(names) - 10} more ..."] + names[-5:]
    raise SynthError(loc, f"dependence cycle with zero iteration distance: {' -> '.join(names)}",
                     "give one edge of the cycle 'distance: 1' (a loop-carried dependence) or remove it")


def describe(problem: Problem, e: Edge) -> str:
    """``dependence mma->mma on C_r, distance 1`` — for errors and infeasibility reports."""
    on = f" on {e.buffer}" if e.buffer else ""
    return (f"{e.kind} dependence {problem.ops[e.src].name}->{problem.ops[e.dst].name}{on}, "
            f"distance {e.distance}")


def check_pins(problem: Problem, graph: Graph) -> None:
    """Raise when pinned stages/orders break a hard dependence (``s_b + d - s_a >= 0``,
    and when that is 0, ``order_a < order_b``)."""
    pins = problem.pins
    if pins.stage is None:
        return
    for e in graph.constraints():
        slack = pins.stage[e.dst] + e.distance - pins.stage[e.src]
        bad = slack < 0
        if slack == 0 and e.src == e.dst:
            bad = True
        if slack == 0 and pins.order is not None and pins.order[e.src] >= pins.order[e.dst]:
            bad = True
        if slack == 0 and pins.order is None and e.src > e.dst and e.distance == 0:
            bad = False  # the free order can still put the producer first
        if bad:
            a, b = problem.ops[e.src].name, problem.ops[e.dst].name
            why = (f"stage {pins.stage[e.dst]} of '{b}' is before stage {pins.stage[e.src]} of '{a}'"
                   if slack < 0 else f"'{b}' is ordered before '{a}' in the same pipelined iteration")
            where = pins.stage_loc if slack < 0 or pins.order_loc is None else pins.order_loc
            raise SynthError(where or pins.loc,
                             f"pinned schedule breaks the {describe(problem, e)}: {why}",
                             f"give '{b}' a stage of at least {pins.stage[e.src] - e.distance}" if slack < 0
                             else f"order '{a}' before '{b}' in schedule.order, or give '{b}' a stage of at "
                                  f"least {pins.stage[e.src] - e.distance + 1}")

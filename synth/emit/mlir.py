"""A schedule as an ``scf.for`` loop for MLIR's loop pipeliner (generic op form).

Input: a :class:`~synth.problem.Problem` and a :class:`~synth.schedule.Schedule`.
Output: one module with one ``func.func`` holding the loop: one placeholder
``"synth.op"`` per problem op, in program order, each carrying the attributes
the upstream scf pipelining test pass reads (``mlir-opt
--allow-unregistered-dialect --test-scf-pipelining``):

* ``__test_pipelining_stage__``: the op's stage (TVM's ``software_pipeline_stage``);
* ``__test_pipelining_op_order__``: its position in the pipelined body (TVM's
  ``software_pipeline_order``); the pass places ops by this number;

and ``__test_pipelining_loop__`` on the ``scf.for``, which also carries
``synth.async_stages`` (and ``synth.problem``). Each op also records its unit,
the buffers it reads and writes, latency, issue cycles, whether it runs async
(and on which queue) and its ``when`` predicate, as plain attributes.

Everything is printed in the generic form, with inherent attributes in the
attribute dictionary, which every MLIR version parses. Left out on purpose:
the ops have no SSA results, so the dependences are the attributes', not
use-def chains, and buffers are not multi-buffered here (the pipeliner rotates
values, not memory).
"""

from __future__ import annotations

import re

from ..problem import Problem
from ..schedule import Schedule
from .tvm import split_note

STAGE_ATTR = "__test_pipelining_stage__"
ORDER_ATTR = "__test_pipelining_op_order__"
LOOP_ATTR = "__test_pipelining_loop__"
ASYNC_ATTR = "synth.async_stages"

_SSA_RE = re.compile(r"^[A-Za-z_$.-][A-Za-z0-9_$.-]*$")


def mlir_pipelined_loop(problem: Problem, schedule: Schedule) -> str:
    """The annotated loop as MLIR generic-form text."""
    n = len(problem.ops)
    if len(schedule.stage) != n or len(schedule.order) != n:
        raise ValueError(f"schedule has {len(schedule.stage)} stages and {len(schedule.order)} orders "
                         f"for the {n} ops of {problem.name}")
    loop = problem.loop
    taken = {"c0", "c1", "ub"}
    iv = _ssa_name(loop.var, taken)
    taken.add(iv)
    sym = _ssa_name(str(loop.trip_count), taken) if loop.symbolic else None
    ub = f"%{sym}" if sym else "%ub"
    names = [op.name for op in problem.ops]

    out = [
        f"// synth: software pipeline of problem '{problem.name}' for MLIR's scf.for pipeliner",
        "//   mlir-opt --allow-unregistered-dialect --test-scf-pipelining this.mlir",
        f"// ops in program order: {', '.join(names)}",
        f"// pipelined body order: {', '.join(names[i] for i in schedule.body_order())}",
        *([f"// {split_note(problem)}"] if split_note(problem) else []),
        '"builtin.module"() ({',
    ]
    fn_args = "(index)" if sym else "()"
    out.append('  "func.func"() ({')
    if sym:
        out.append(f"  ^bb0(%{sym}: index):")
    out.append('    %c0 = "arith.constant"() {value = 0 : index} : () -> index')
    out.append('    %c1 = "arith.constant"() {value = 1 : index} : () -> index')
    if not sym:
        out.append(f'    %ub = "arith.constant"() {{value = {int(loop.trip_count)} : index}} : () -> index')
    out.append(f'    "scf.for"(%c0, {ub}, %c1) ({{')
    out.append(f"    ^bb0(%{iv}: index):")
    for i, op in enumerate(problem.ops):
        attrs = [
            f"name = {_str(op.name)}",
            f"unit = {_str(op.unit)}",
            f"reads = [{', '.join(_str(b) for b in op.reads)}]",
            f"writes = [{', '.join(_str(b) for b in op.writes)}]",
            f"latency = {op.latency} : i64",
            f"issue = {op.issue} : i64",
            f"async = {'true' if schedule.is_async[i] else 'false'}",
        ]
        if schedule.is_async[i] and schedule.queue[i] is not None:
            attrs.append(f"queue = {schedule.queue[i]} : i64")
        if op.when is not None:
            attrs.append(f"when = {_str(op.when.text)}")
        attrs.append(f"{STAGE_ATTR} = {schedule.stage[i]} : i64")
        attrs.append(f"{ORDER_ATTR} = {schedule.order[i]} : i64")
        out.append(f'      "synth.op"(%{iv}) {{{", ".join(attrs)}}} : (index) -> ()')
    out.append('      "scf.yield"() : () -> ()')
    stages = ", ".join(f"{s} : i64" for s in schedule.async_stages)
    out.append(f"    }}) {{{LOOP_ATTR}, {ASYNC_ATTR} = [{stages}], synth.problem = {_str(problem.name)}}} "
               ": (index, index, index) -> ()")
    out.append('    "func.return"() : () -> ()')
    out.append(f'  }}) {{function_type = {fn_args} -> (), sym_name = {_str(_symbol(problem.name))}}} : () -> ()')
    out.append("}) : () -> ()")
    return "\n".join(out) + "\n"


def _str(text: str) -> str:
    """An MLIR string literal."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):02X}" for c in text) + '"'


def _symbol(name: str) -> str:
    """A function name from a problem name (``gemm-128x128`` -> ``gemm_128x128``)."""
    sym = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return sym if sym[:1].isalpha() or sym[:1] == "_" else "_" + sym


def _ssa_name(name: str, taken: set[str]) -> str:
    """``name`` as an SSA value name, renamed (``k_``) where it would clash with one already used."""
    base = name if _SSA_RE.match(name) else re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    while base in taken:
        base += "_"
    return base

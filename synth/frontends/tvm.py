"""TVM TIR after ``InjectSoftwarePipeline`` -> :class:`~synth.frontends.loop.Loop`.

Input: a ``tvm.IRModule`` / ``PrimFunc`` (:func:`tvm_to_loop`) or its TVMScript text
(:func:`tvmscript_to_loop`). The pipelined loop is the (non-unrolled) ``for`` whose
body holds the async attributes; the statements before it in the enclosing
sequence are the prologue, those after it the epilogue (their unrolled loops are
run out, so their loop variables become constants). Events, in program order:

* ``T.attr(0, "async_commit_queue_scope", q)`` around statements: their events, then
  a commit on queue ``q``;
* ``async_scope`` around a store into a shared buffer: an async write of slot
  ``index[0]`` (the pass puts the multi-buffer index first);
* ``async_wait_queue_scope`` ``q`` with ``async_wait_inflight_count`` ``n``: a wait
  ``(q, n)`` before the wrapped statement;
* every load of a shared buffer in a store's value: a read (the op is named after
  the stored buffer).

``T.where`` predicates and ``if`` conditions become guards. A size variable in the
loop's extent is the trip count ``T``. Outside the model (exit 2): an async store
that reads a multi-buffered shared buffer (two async stages feeding each other),
nested pipelined loops, loops with non-constant extents outside the pipelined one,
index expressions with loads in them.
"""

from __future__ import annotations

import re
from typing import Optional

from ..bounds import MAX_CHECK_UNROLL
from ..errors import Loc, SynthError
from ..expr import Bin, Call, Expr, Ite, Num, Un, Var, evaluate, free_vars, parse, simplify, substitute, to_str
from .loop import Event, Loop
from .tvmscript import screen

_BIN = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "/", "FloorMod": "%", "Div": "/", "Mod": "%",
        "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==", "NE": "!=", "And": "&&", "Or": "||"}


def _t(x) -> str:
    return type(x).__name__


class _Unsupported(Exception):
    pass


def _conv(e, env: dict) -> Expr:
    """A TIR expression as a synth expression; ``env`` maps variable names to expressions."""
    n = _t(e)
    if n in ("IntImm",):
        v = int(e.value)
        dt = str(getattr(e, "dtype", None) or getattr(e, "ty", ""))
        return parse(bool(v)) if "bool" in dt else Num(v)
    if n == "Var" or n == "SizeVar":
        name = str(e.name)
        if name in env:
            return env[name]
        return Var(name)
    if n in _BIN:
        return simplify(Bin(_BIN[n], _conv(e.a, env), _conv(e.b, env)))
    if n == "Not":
        return simplify(Un("!", _conv(e.a, env)))
    if n in ("Min", "Max"):
        return simplify(Call(n.lower(), (_conv(e.a, env), _conv(e.b, env))))
    if n == "Select":
        return simplify(Ite(_conv(e.condition, env), _conv(e.true_value, env), _conv(e.false_value, env)))
    if n == "Cast":
        return _conv(e.value, env)
    if n == "Call" and "likely" in str(getattr(e, "op", "")) and len(e.args) == 1:
        return _conv(e.args[0], env)
    if n == "Call" and "if_then_else" in str(getattr(e, "op", "")) and len(e.args) == 3:
        return simplify(Ite(_conv(e.args[0], env), _conv(e.args[1], env), _conv(e.args[2], env)))
    raise _Unsupported(f"{n} in an index or condition ({e})")


def _loads(e, out: list) -> None:
    """Every BufferLoad in expression ``e``."""
    n = _t(e)
    if n in ("BufferLoad", "TensorLoad"):
        out.append(e)
        for i in e.indices:
            _loads(i, out)
        return
    for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, attr, None) if n not in ("IntImm", "FloatImm", "Var", "StringImm") else None
        if sub is not None and hasattr(sub, "same_as"):
            _loads(sub, out)
    for a in getattr(e, "args", []) or []:
        _loads(a, out)


def _buf(ld):
    """The buffer a load reads (``BufferLoad.buffer``; ``TensorLoad.source`` in TVM >= 0.27)."""
    b = getattr(ld, "buffer", None)
    return b if b is not None else ld.source


def _has_async(s) -> bool:
    n = _t(s)
    if n == "AttrStmt":
        if str(s.attr_key) in ("async_commit_queue_scope", "async_wait_queue_scope", "async_scope"):
            return True
        return _has_async(s.body)
    return any(_has_async(c) for c in _children(s))


def _children(s) -> list:
    n = _t(s)
    if n == "SeqStmt":
        return list(s.seq)
    if n == "SBlockRealize" or n == "BlockRealize":
        return [s.block]
    if n in ("SBlock", "Block"):
        return [s.body]
    if n == "IfThenElse":
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if hasattr(s, "body") and _t(s) not in ("PrimFunc",):
        return [s.body]
    return []


def _is_unrolled(f) -> bool:
    return "UNROLL" in str(f.kind).upper() or str(f.kind) in ("3",)


def _is_thread(f) -> bool:
    return "THREAD" in str(f.kind).upper() or getattr(f, "thread_binding", None) is not None


def _find_body(s, path: list, found: list) -> None:
    n = _t(s)
    if n == "For" and not _is_unrolled(s) and not _is_thread(s) and _has_async(s.body):
        found.append(list(path) + [s])
        return
    for c in _children(s):
        _find_body(c, path + [s], found)


def _line(s) -> int:
    """The source line of ``s``, else of the first statement inside it that has one (0: none)."""
    for _ in range(16):
        sp = getattr(s, "span", None)
        try:
            if sp is not None and sp.line is not None and int(sp.line) > 0:
                return int(sp.line)
        except (AttributeError, TypeError, ValueError):
            pass
        kids = _children(s)
        if not kids:
            return 0
        s = kids[0]
    return 0


class _Walker:
    def __init__(self, path: str, buffers: dict, mode: str) -> None:
        self.path = path
        self.buffers = buffers
        self.mode = mode
        self.events: list = []
        self.runout = 0  # iterations of constant-extent loops run out so far (MAX_CHECK_UNROLL)

    def err(self, s, msg: str, fix: str) -> SynthError:
        return SynthError(Loc(self.path, _line(s)), msg, fix)

    def expr(self, e, env: dict, s) -> Expr:
        try:
            return _conv(e, env)
        except _Unsupported as x:
            raise self.err(s, f"{x}: outside the model", "indices and conditions must be affine in the loop "
                           "variables (no loads, no calls)") from None

    def walk(self, s, env: dict, guard: Optional[Expr], ctx: dict) -> None:
        n = _t(s)
        if n == "SeqStmt":
            for c in s.seq:
                self.walk(c, env, guard, ctx)
        elif n in ("SBlockRealize", "BlockRealize"):
            g = self.expr(s.predicate, env, s)
            self.walk(s.block, env, _conj(guard, g), ctx)
        elif n in ("SBlock", "Block"):
            for b in s.alloc_buffers:
                self._buffer(b)
            self.walk(s.body, env, guard, ctx)
        elif n == "For":
            if self.mode == "body" and _has_async(s.body):
                raise self.err(s, "a loop with async copies or waits inside the pipelined loop",
                               "nested pipelines are outside the model")
            lo, ext = self.expr(s.min, env, s), self.expr(s.extent, env, s)
            if self.mode == "body" or not (isinstance(lo, Num) and isinstance(ext, Num)):
                if _has_async(s.body):
                    raise self.err(s, f"loop over {s.loop_var} outside the pipelined loop has a non-constant "
                                   "extent", "only constant-extent prologue and epilogue loops are supported")
                self.walk(s.body, env, guard, ctx)  # its variable stays a symbol: slots must not use it
                return
            self.runout += max(ext.value, 0)
            if self.runout > MAX_CHECK_UNROLL:
                raise self.err(s, f"the loops over {s.loop_var} and the others around the pipelined loop run "
                               f"{self.runout} iterations, more than the {MAX_CHECK_UNROLL} synth runs out",
                               "a pipeline's prologue and epilogue run stages - 1 iterations each; pass the "
                               "output of InjectSoftwarePipeline (docs/bounds.md)")
            for v in range(lo.value, lo.value + ext.value):
                e2 = dict(env)
                e2[str(s.loop_var.name)] = Num(v)
                self.walk(s.body, e2, guard, ctx)
        elif n == "AttrStmt":
            key = str(s.attr_key)
            if key == "async_commit_queue_scope":
                q = self.expr(s.value, env, s)
                c2 = dict(ctx, queue=q.value if isinstance(q, Num) else None)
                self.walk(s.body, env, guard, c2)
                self.events.append(Event("commit", queue=c2["queue"], guard=guard, line=_line(s),
                                         text=f"async_commit_queue({c2['queue']})"))
            elif key == "async_scope":
                self.walk(s.body, env, guard, dict(ctx, is_async=True))
            elif key == "async_wait_queue_scope":
                q = self.expr(s.value, env, s)
                inner = s.body
                if _t(inner) != "AttrStmt" or str(inner.attr_key) != "async_wait_inflight_count":
                    raise self.err(s, "async_wait_queue_scope without async_wait_inflight_count",
                                   "pass the output of InjectSoftwarePipeline unchanged")
                cnt = self.expr(inner.value, env, inner)
                qv = q.value if isinstance(q, Num) else 0
                self.events.append(Event("wait", queue=qv, count=cnt.value if isinstance(cnt, Num) else cnt,
                                         guard=guard, line=_line(s) or _line(inner.body),
                                         text=f"async_wait_queue({qv}, {to_str(cnt)})"))
                self.walk(inner.body, env, guard, ctx)
            else:
                self.walk(s.body, env, guard, ctx)
        elif n == "IfThenElse":
            c = self.expr(s.condition, env, s)
            self.walk(s.then_case, env, _conj(guard, c), ctx)
            if s.else_case is not None:
                self.walk(s.else_case, env, _conj(guard, simplify(Un("!", c))), ctx)
        elif n == "BufferStore":
            self._store(s, env, guard, ctx)
        elif n == "LetStmt":
            e2 = dict(env)
            e2[str(s.var.name)] = self.expr(s.value, env, s)
            self.walk(s.body, e2, guard, ctx)
        elif n in ("Evaluate",):
            loads: list = []
            _loads(s.value, loads)
            if any(self._shared(_buf(ld)) for ld in loads):
                raise self.err(s, "a call reads a shared buffer", "only stores are modeled")
        else:
            for c in _children(s):
                self.walk(c, env, guard, ctx)

    def _buffer(self, b) -> None:
        shape = [int(x) if _t(x) == "IntImm" else None for x in b.shape]
        self.buffers.setdefault(str(b.name), (shape[0] if len(shape) >= 2 and shape[0] else 1, str(b.scope())))

    def _shared(self, buf) -> bool:
        return str(buf.scope()).startswith("shared")

    def _store(self, s, env: dict, guard, ctx: dict) -> None:
        loads: list = []
        _loads(s.value, loads)
        for i in s.indices:
            _loads(i, loads)
        dest = str(s.buffer.name)
        key = f"{dest}_store"
        text = [x.strip() for x in str(s).splitlines() if x.strip()][-1]
        text = text if len(text) <= 100 else text[:97] + "..."
        shared_loads = [ld for ld in loads if self._shared(_buf(ld))]
        is_async = bool(ctx.get("is_async"))
        if is_async and ctx.get("queue") is None:
            raise self.err(s, "async_scope outside an async_commit_queue_scope with a constant queue",
                           "pass the output of InjectSoftwarePipeline unchanged")
        for ld in shared_loads:
            self._buffer(_buf(ld))
        reads = tuple((str(_buf(ld).name), self._slot(ld.indices, env, s)) for ld in shared_loads)
        if not is_async or not self._shared(s.buffer):
            for (name, slot) in reads:
                self.events.append(Event("read", key, name, slot, guard=guard, line=_line(s), text=text))
        if self._shared(s.buffer):
            self._buffer(s.buffer)
            self.events.append(Event("write", key, dest, self._slot(s.indices, env, s), is_async,
                                     ctx.get("queue") or 0, guard=guard, line=_line(s), text=text,
                                     reads=reads if is_async else ()))

    def _slot(self, indices, env: dict, s):
        if not indices:
            return 0
        e = self.expr(indices[0], env, s)
        return e.value if isinstance(e, Num) else e


def _conj(a: Optional[Expr], b: Expr) -> Optional[Expr]:
    b = simplify(b)
    if not free_vars(b):
        return a if evaluate(b, {}) else parse(False)
    return b if a is None else simplify(Bin("&&", a, b))


def _func(mod):
    n = _t(mod)
    if n == "PrimFunc":
        return "main", mod
    funcs = [(str(gv.name_hint), f) for gv, f in mod.functions.items() if _t(f) == "PrimFunc"]
    with_async = [(nm, f) for nm, f in funcs if _has_async(f.body)]
    return with_async[0] if with_async else (funcs[0] if funcs else ("main", None))


def tvm_to_loop(mod, path: str = "<tvm>", name: Optional[str] = None) -> Loop:
    """Read a module (or PrimFunc) after InjectSoftwarePipeline; SynthError for what is outside the model.

    ``name`` names a PrimFunc (a module's functions are named by their global names)."""
    fname, f = _func(mod)
    name = name or fname
    if f is None or not _has_async(f.body):
        raise SynthError(Loc(path), "no async pipeline: no async_commit_queue_scope or async_wait_queue_scope",
                         "run InjectSoftwarePipeline with software_pipeline_async_stages set")
    found: list = []
    _find_body(f.body, [], found)
    if len(found) != 1:
        raise SynthError(Loc(path), f"{'no' if not found else len(found)} pipelined loops found",
                         "pass one function with one (non-nested) pipelined loop")
    chain = found[0]
    body_for = chain[-1]
    seq_i = max((i for i, s in enumerate(chain[:-1]) if _t(s) == "SeqStmt"), default=None)
    buffers: dict = {}
    pro_w, body_w, epi_w = (_Walker(path, buffers, m) for m in ("straight", "body", "straight"))
    if seq_i is not None:
        seq = chain[seq_i]
        child = chain[seq_i + 1]
        idx = next(i for i, c in enumerate(seq.seq) if c.same_as(child))
        for c in list(seq.seq)[:idx]:
            pro_w.walk(c, {}, None, {})
        for c in list(seq.seq)[idx + 1:]:
            epi_w.walk(c, {}, None, {})
    for s in chain:
        if _t(s) in ("SBlock", "Block"):
            for b in s.alloc_buffers:
                pro_w._buffer(b)
    lo = _conv(body_for.min, {})
    if not isinstance(lo, Num):
        raise SynthError(Loc(path, _line(body_for)), "the pipelined loop's start is not a constant",
                         "data-dependent loop bounds are outside the model")
    ext = _conv(body_for.extent, {})
    syms = sorted(free_vars(ext))
    if len(syms) > 1:
        raise SynthError(Loc(path, _line(body_for)), f"the pipelined loop's extent {ext} has several symbols",
                         "one symbolic size is supported")
    ren = {syms[0]: Var("T")} if syms else {}
    env = {str(body_for.loop_var.name): simplify(Bin("+", Var("k"), lo))}
    env.update(ren)
    body_w.walk(body_for.body, env, None, {})

    def fix(events):
        out = []
        for e in events:
            sl = e.slot if isinstance(e.slot, (int, type(None))) else simplify(substitute(e.slot, ren))
            g = None if e.guard is None else simplify(substitute(e.guard, ren))
            cnt = e.count if isinstance(e.count, (int, type(None))) else simplify(substitute(e.count, ren))
            if isinstance(sl, Num):
                sl = sl.value
            if isinstance(cnt, Num):
                cnt = cnt.value
            if g is not None and not free_vars(g):
                if not evaluate(g, {}):
                    continue
                g = None
            rd = tuple((b, x if isinstance(x, int) else _num(simplify(substitute(x, ren)))) for b, x in e.reads)
            out.append(Event(e.kind, e.key, e.buffer, sl, e.is_async, e.queue, cnt, g, e.line, e.text, rd))
        return tuple(out)

    extent = simplify(substitute(ext, ren))
    min_trip = 1
    if syms:
        min_trip = next((t for t in range(0, 4097) if evaluate(extent, {"T": t}) >= 0), 1)
        min_trip = max(min_trip, 1)
    else:
        min_trip = extent.value
    queues = sorted({e.queue for e in pro_w.events + body_w.events + epi_w.events if e.kind in ("commit", "wait")}
                    | {0})
    if queues != list(range(len(queues))):
        raise SynthError(Loc(path), f"queue ids {queues} are not 0..n-1", "number the async queues from 0")
    return Loop(name=name, path=path, buffers={b: m for b, (m, _) in buffers.items()}, prologue=fix(pro_w.events),
                body=fix(body_w.events), epilogue=fix(epi_w.events), body_extent=extent,
                trip_symbol="T" if syms else None, min_trip=min_trip,
                queues=tuple(f"async queue {q}" for q in queues), source="tvm", body_line=_line(body_for),
                notes=(f"TVM TIR {path}: pipelined loop over {body_for.loop_var.name}, extent {extent}"
                       + (f" ({syms[0]} renamed T)" if syms else ""),))


def _num(e):
    return e.value if isinstance(e, Num) else e


def tvmscript_functions(text: str, path: str, only: Optional[str] = None) -> tuple:
    """``(name, PrimFunc)`` of every ``@T.prim_func`` in TVMScript ``text``, in file order.

    The text is first screened with :func:`synth.frontends.tvmscript.screen` (Python's
    ``ast`` only, a closed whitelist; nothing of the file is evaluated); only then is
    each accepted function's own text handed to TVM's parser, with ``T``, ``I`` and
    ``R`` (and the file's aliases of them) bound to TVM's script namespaces and no
    other name. Needs the ``apache-tvm`` package. ``only``: the function of that name alone (SynthError, before
    TVM is imported, when the file has none).
    """
    screened = screen(text, path)
    funcs = screened.funcs
    if only is not None:  # a name the file lacks is said at once, without importing TVM or parsing a function
        funcs = [f for f in screened.funcs if f.name == only]
        if not funcs:
            raise SynthError(Loc(path), f"no @T.prim_func named {only!r} in the file "
                             f"(it has {', '.join(f.name for f in screened.funcs) or 'none'})",
                             "pass --func with one of those names")
    try:
        # tvm: optional, only for a TVM input
        import tvm  # noqa: F401
        import tvm.script
        from tvm.script.parser.core.entry import _default_globals
    except ImportError:
        raise SynthError(Loc(path), "reading TVMScript needs the apache-tvm package",
                         "pip install apache-tvm (or pass Triton TTGIR / MLIR instead)") from None
    names = _default_globals()
    out = []
    for f in funcs:
        env = {a: names[r] for a, r in screened.aliases if r in ("T", "I", "R")}
        try:
            fn = tvm.script.from_source(f.text, extra_vars=env)
        except Exception as e:  # TVM's parser raises its own diagnostic types
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            first = first[len("error: "):] if first.startswith("error: ") else first
            at = re.search(r"--> <str>:(\d+):(\d+)", str(e))  # the text keeps the file's line numbers
            line, col = (int(at.group(1)), int(at.group(2)) + f.indent) if at else (f.line, 1)
            raise SynthError(Loc(path, line, col), f"TVMScript function {f.name} does not parse: {first}",
                             "pass the script printed by mod.script() after InjectSoftwarePipeline") from None
        if _t(fn) != "PrimFunc":
            raise SynthError(Loc(path, f.line, 1), f"{f.name} is not a PrimFunc", "pass @T.prim_func functions")
        out.append((f.name, fn))
    return tuple(out)


def tvmscript_to_loops(text: str, path: str, func: Optional[str] = None) -> tuple:
    """The :class:`Loop` of each function of TVMScript ``text`` that has a pipelined loop.

    ``func`` picks one function by name (SynthError when there is none of that name,
    or it has no async pipeline). Without it, every function with an async pipeline
    is read, in file order; a file with none is a SynthError.
    """
    if func is not None:
        fn = tvmscript_functions(text, path, only=func)[0][1]
        return (tvm_to_loop(fn, path, name=func),)
    funcs = tvmscript_functions(text, path)
    with_async = [(n, f) for n, f in funcs if _has_async(f.body)]
    if not with_async:
        raise SynthError(Loc(path), "no async pipeline: no async_commit_queue_scope or async_wait_queue_scope in "
                         f"{', '.join(n for n, _ in funcs)}",
                         "run InjectSoftwarePipeline with software_pipeline_async_stages set")
    return tuple(tvm_to_loop(f, path, name=n) for n, f in with_async)


def tvmscript_to_loop(text: str, path: str, func: Optional[str] = None) -> Loop:
    """The one pipelined loop of TVMScript ``text`` (``func`` picks the function); see :func:`tvmscript_to_loops`."""
    loops = tvmscript_to_loops(text, path, func)
    if len(loops) > 1:
        raise SynthError(Loc(path), f"{len(loops)} functions have pipelined loops ({', '.join(l.name for l in loops)})",
                         "pass --func NAME to pick one")
    return loops[0]


__all__ = ["tvm_to_loop", "tvmscript_to_loop", "tvmscript_to_loops", "tvmscript_functions"]

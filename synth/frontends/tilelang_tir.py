"""TileLang's lowered device TIR (``device_mod.script()``) -> a flat list of events (read, never run).

The text is Python syntax (TVMScript with ``T.`` intrinsics). It is parsed with Python's
:mod:`ast` only: nothing is compiled, imported or evaluated. :func:`read_tir` walks the one
``@T.prim_func`` it holds, in program order, and records the statements that matter to
the pipeline (:class:`TEvent`): ``cp.async`` copies, commits and waits, shared-memory
reads (``ptx_ldmatrix``, wgmma descriptors, buffer loads), synchronous stores into shared
memory, mbarrier inits / waits / arrivals / ``expect_tx``, TMA loads, wgmma batches. Each
event keeps its source line, its text, the guard it runs under and the loop variables its
offsets depend on, each with its bounds.

Expressions become :mod:`synth.expr` trees over the loop variables, the thread indices
(``T.launch_thread``) and the kernel's integer parameters (``K`` of ``T.dynamic("K")``); a
call the reader does not know gives None (unknown), and an unknown value that a slot, a
guard or a count needs is refused by the mapping (exit 2), never guessed.

Loops: the pipelined loop (the one non-unrolled loop holding ``ptx_cp_async``, or each
warp-specialized role's loop holding barrier traffic) is walked once with its variable
symbolic (``where = "body"``); every other loop whose body holds a commit, wait, barrier,
TMA or wgmma statement is run out (at most :data:`MAX_UNROLL` iterations), the rest are
walked once with their variable bounded by their extent.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import Optional

from ..errors import Loc, SynthError
from ..expr import Bin, Call, Expr, Ite, Num, Un, Var, free_vars, simplify

MAX_UNROLL = 1024
"""Iterations of the loops run out around or inside the pipelined loop, nested ones multiplied (docs/check.md,
"TileLang")."""
MAX_NEST = 64
"""Nesting of statements the reader follows (deeper: exit 2)."""
MAX_EXPR_NEST = 200
"""Nesting of an expression the reader follows (deeper: its value is unknown, refused where it is needed)."""

FIX = ("pass the device TIR of a TileLang kernel lowered for sm_80 or sm_90 "
       "(tests/check_inputs/tilelang/generate.py: device_mod.script()), unedited")

SYNC_KINDS = ("commit", "wait", "init", "bwait", "arrive", "expect", "tma", "wgmma", "wg_commit", "wg_wait")
ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float": 4, "int8": 1, "uint8": 1, "float8_e4m3": 1,
              "float8_e5m2": 1, "float8_e4m3fn": 1, "int32": 4, "uint32": 4, "float64": 8, "int64": 8}


def tir_error(path: str, line: int, msg: str, fix: str = FIX) -> SynthError:
    return SynthError(Loc(path, line, 1 if line else 0), msg, fix)


@dataclass(frozen=True)
class TEvent:
    """One statement of the kernel that matters to its pipeline.

    ``kind``: ``cp_async`` (write of ``buffer`` at element ``offset``), ``commit``, ``wait``
    (``count``), ``read`` (of ``buffer`` at ``offset``), ``store`` (a synchronous write of a shared
    buffer), ``init`` (barrier ``bar`` index ``offset``, ``count``), ``bwait`` (parity ``count``),
    ``arrive`` (``count`` arrivals: 1 when one elected thread runs it, else the role's threads),
    ``expect`` (``nbytes``, ``count`` arrivals: 0 for a bare ``expect_tx``), ``tma`` (``buffer`` at
    ``offset``, ``nbytes``, completing on barrier index ``bar_index``), ``wgmma`` (``reads``: buffer,
    offset pairs), ``wg_commit``, ``wg_wait`` (``count``), ``fence_init``, ``sync`` (a
    ``tvm_storage_sync`` inside a warp-specialized role: a bar.sync over its threads)."""

    kind: str
    line: int
    text: str
    where: str = ""
    """``pre`` (before the pipelined loop), ``body``, ``post``; or a role's part."""
    buffer: str = ""
    offset: Optional[Expr] = None
    count: Optional[Expr] = None
    nbytes: int = 0
    bar_index: Optional[Expr] = None
    guard: tuple = ()
    """Conditions (Exprs; None: unknown) of the enclosing ``if`` statements."""
    bounds: tuple = ()
    """``(var, lo, hi)``: loop and thread variables its expressions may mention, ``lo <= var < hi``."""
    reads: tuple = ()
    role: str = ""


@dataclass
class Kernel:
    """What :func:`read_tir` found: the events, the shared buffers and the loop(s)."""

    path: str
    name: str
    shared: dict = field(default_factory=dict)
    """Shared buffer -> element bytes."""
    params: tuple = ()
    """The kernel's integer parameters (``K``)."""
    events: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    """``(role, line, extent Expr, lower bound)`` of each pipelined loop walked symbolically."""
    roles: list = field(default_factory=list)
    """Warp-specialized: ``(role name, threads, line)`` in order; empty for one role."""
    ws_line: int = 0


def _seg(text: str, node) -> str:
    seg = ast.get_source_segment(text, node) or ""
    seg = " ".join(seg.split())
    return seg if len(seg) <= 120 else seg[:117] + "..."


def _is_t(node, *names) -> bool:
    """Whether ``node`` is ``T.<name>`` for one of ``names``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "T" \
        and node.attr in names


def _call_name(node) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "T":
        return node.func.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return ""


class _Reader:
    def __init__(self, text: str, path: str) -> None:
        self.text, self.path = text, path
        self.k = Kernel(path, "kernel")
        self.aliases: dict = {}
        self.desc: dict = {}
        self.threads = 1
        self.unrolled = 1
        """The product of the extents of the loops being run out around the current statement."""
        self._thread_bounds: dict = {}
        """Thread index variable -> (lo, hi) from ``T.launch_thread``."""

    def err(self, node, msg: str, fix: str = FIX) -> SynthError:
        return tir_error(self.path, getattr(node, "lineno", 0), msg, fix)

    # ---------------------------------------------------------------- expressions

    def expr(self, node, env: dict, depth: int = 0, parity: bool = False) -> Optional[Expr]:
        """A synth Expr of ``node`` (None: unknown). ``parity``: a ``T.bitwise_xor(a, b)`` is read as
        ``a + b``, which has the same low bit (only a barrier wait's parity is read that way)."""
        if depth > MAX_EXPR_NEST:
            return None
        d = depth + 1
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Num(int(node.value))
            if isinstance(node.value, int):
                if abs(node.value) > 2 ** 64:
                    raise self.err(node, f"the integer {node.value} is out of range", "integers are at most 64-bit")
                return Num(node.value)
            return None
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left, env, d, parity), self.expr(node.right, env, d, parity)
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}.get(type(node.op))
            if a is None or b is None or op is None:
                return None
            if op in ("/", "%") and not (isinstance(b, Num) and b.value > 0):
                return None
            return Bin(op, a, b)
        if isinstance(node, ast.UnaryOp):
            a = self.expr(node.operand, env, d, parity)
            if a is None:
                return None
            if isinstance(node.op, ast.USub):
                return Un("-", a)
            if isinstance(node.op, ast.Not):
                return Un("!", a)
            return None
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}.get(
                type(node.ops[0]))
            a, b = self.expr(node.left, env, d), self.expr(node.comparators[0], env, d)
            return None if a is None or b is None or op is None else Bin(op, a, b)
        if isinstance(node, ast.BoolOp):
            vals = [self.expr(v, env, d) for v in node.values]
            if any(v is None for v in vals):
                return None
            out = vals[0]
            for v in vals[1:]:
                out = Bin("&&" if isinstance(node.op, ast.And) else "||", out, v)
            return out
        name = _call_name(node)
        if not name:
            return None
        args = node.args
        if name in ("int32", "int64", "uint32", "int16", "bool") and len(args) == 1:
            return self.expr(args[0], env, d, parity)
        if name == "Cast" and len(args) == 2:
            return self.expr(args[1], env, d, parity)
        if name in ("min", "max") and len(args) == 2:
            a, b = self.expr(args[0], env, d), self.expr(args[1], env, d)
            return None if a is None or b is None else Call(name, (a, b))
        if name == "if_then_else" and len(args) == 3:
            c, a, b = (self.expr(x, env, d) for x in args)
            return None if c is None or a is None or b is None else Ite(c, a, b)
        if name == "likely" and len(args) == 1:
            return self.expr(args[0], env, d)
        if name == "bitwise_xor" and parity and len(args) == 2:
            a, b = self.expr(args[0], env, d, parity), self.expr(args[1], env, d, parity)
            return None if a is None or b is None else Bin("+", a, b)
        return None

    def bar_index(self, node, env: dict) -> tuple:
        """``(barrier buffer, index Expr)`` of ``mbarrier_1[i]``."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            raise self.err(node, f"{_seg(self.text, node)}: an mbarrier operand that is not `buffer[index]`")
        return self.aliases.get(node.value.id, node.value.id), self.expr(node.slice, env)

    def access_ptr(self, node, env: dict):
        """``(buffer, element offset, extent, rw mask)`` of ``T.tvm_access_ptr(type, buf, off, extent, rw)``,
        following ``T.handle_add_byte_offset(ptr, bytes)``; None when ``node`` is neither."""
        name = _call_name(node)
        if name == "handle_add_byte_offset" and len(node.args) == 2:
            inner = self.access_ptr(node.args[0], env)
            add = self.expr(node.args[1], env)
            if inner is None or add is None:
                return None
            b, off, ext, rw = inner
            eb = self.k.shared.get(b, 1)
            return b, None if off is None else Bin("+", off, Bin("/", add, Num(eb))), ext, rw
        buf = node.args[1] if name == "tvm_access_ptr" and len(node.args) == 5 else None
        if isinstance(buf, ast.Attribute) and buf.attr == "data":  # `As.data`
            buf = buf.value
        if not isinstance(buf, ast.Name):
            return None
        b = self.aliases.get(buf.id, buf.id)
        ext = self.expr(node.args[3], env)
        rw = self.expr(node.args[4], env)
        return (b, self.expr(node.args[2], env), ext.value if isinstance(ext, Num) else None,
                rw.value if isinstance(rw, Num) else 3)

    # ---------------------------------------------------------------- statements

    def read(self) -> Kernel:
        try:
            with warnings.catch_warnings():  # the parse's own warnings (an invalid escape) are not the user's
                warnings.simplefilter("ignore")
                tree = ast.parse(self.text, filename=self.path)
        except SyntaxError as e:
            raise tir_error(self.path, e.lineno or 0, f"not TileLang TIR text: {e.msg}") from None
        except (RecursionError, MemoryError, ValueError):
            raise tir_error(self.path, 0, "not TileLang TIR text: nested too deeply to parse") from None
        funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        if not funcs:
            raise tir_error(self.path, 0, "no @T.prim_func in the file")
        kern = [f for f in funcs if any(_call_name(c) in ("ptx_cp_async", "tma_load", "mbarrier_wait_parity")
                                        for c in ast.walk(f))]
        if len(kern) != 1:
            raise tir_error(self.path, (kern[1].lineno if len(kern) > 1 else funcs[0].lineno),
                            f"{'no' if not kern else len(kern)} device functions with cp.async or TMA copies",
                            "pass the device module of one TileLang kernel")
        f = kern[0]
        self.k.name = f.name
        env: dict = {}
        params = []
        for a in f.args.args:
            ann = a.annotation
            if _is_t(ann, "int32", "int64") or (_call_name(ann) in ("int32", "int64")):
                env[a.arg] = Var(a.arg)
                params.append(a.arg)
        self.k.params = tuple(params)
        self.block(f.body, env, (), (), "pre", "", 0)
        return self.k

    def block(self, stmts: list, env: dict, guard: tuple, bounds: tuple, where: str, role: str, depth: int) -> str:
        if depth > MAX_NEST:
            raise self.err(stmts[0] if stmts else None, f"statements nested deeper than {MAX_NEST}")
        i = 0
        while i < len(stmts):
            s = stmts[i]
            ws = self._ws_attr(s)
            if ws is not None and not role:
                # the scope's branch: the next `if`, after statements without pipeline traffic (a __syncthreads)
                j = i + 1
                while j < len(stmts) and not isinstance(stmts[j], ast.If) and not self._has_sync([stmts[j]]):
                    where = self.stmt(stmts[j], env, guard, bounds, where, role, depth)
                    j += 1
                if j == len(stmts) or not isinstance(stmts[j], ast.If):
                    raise self.err(s, "a warp-specialization scope not followed by its `if tx < N: ... else: ...`")
                self.ws(ws, s, stmts[j], env, guard, bounds, depth)
                i = j + 1
                continue
            where = self.stmt(s, env, guard, bounds, where, role, depth)
            i += 1
        return where

    def _ws_attr(self, s):
        if isinstance(s, ast.Expr) and _call_name(s.value) == "attr" and len(s.value.args) == 3 \
                and isinstance(s.value.args[1], ast.Constant) and s.value.args[1].value == "kWarpSpecializationScope":
            lst = s.value.args[0]
            if isinstance(lst, ast.List) and all(isinstance(x, ast.Constant) and isinstance(x.value, int)
                                                 for x in lst.elts):
                return [x.value for x in lst.elts]
            raise self.err(s, "a warp-specialization scope whose thread counts are not constants")
        return None

    def ws(self, counts: list, attr, node: ast.If, env: dict, guard: tuple, bounds: tuple, depth: int) -> None:
        if len(counts) != 2 or not node.orelse:
            raise self.err(node, f"a warp-specialization scope of {len(counts)} roles (synth reads a producer "
                           "branch and a consumer branch: `if tx < N: ... else: ...`)")
        self.k.ws_line = attr.lineno
        names = []
        # `if tx < P:` bounds the thread index in each branch: [0, P) in the first, [P, ...) in the second
        split = None
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Lt) \
                and isinstance(t.left, ast.Name) and isinstance(t.comparators[0], ast.Constant):
            v = env.get(t.left.id)
            if isinstance(v, Var) and v.name in self._thread_bounds:
                split = (v.name, t.comparators[0].value)
        for n_branch, (body, n) in enumerate(((node.body, counts[0]), (node.orelse, counts[1]))):
            saved = dict(self._thread_bounds)
            if split is not None:
                lo, hi = self._thread_bounds[split[0]]
                self._thread_bounds[split[0]] = (lo, min(hi, split[1])) if n_branch == 0 else (max(lo, split[1]), hi)
            has_tma = any(_call_name(c) == "tma_load" for st in body for c in ast.walk(st))
            nm = "producer" if has_tma else "consumer"
            if nm in names:
                raise self.err(node, f"both branches of the warp-specialization scope are {nm}s",
                               "one branch issues the TMA copies, the other runs the wgmma")
            names.append(nm)
            self.k.roles.append((nm, n, body[0].lineno if body else node.lineno))
            old = self.threads
            self.threads = n
            self.block(body, dict(env), guard, bounds, "pre", nm, depth + 1)
            self.threads = old
            self._thread_bounds = saved

    def _has_sync(self, stmts) -> bool:
        names = {"ptx_commit_group", "ptx_wait_group", "mbarrier_wait_parity", "ptx_arrive_barrier",
                 "ptx_arrive_barrier_expect_tx", "mbarrier_expect_tx", "tma_load", "warpgroup_commit_batch",
                 "warpgroup_wait", "ptx_init_barrier_thread_count"}
        return any(_call_name(c) in names for st in stmts for c in ast.walk(st))

    def _is_pipelined(self, s: ast.For, role: str) -> bool:
        it = s.iter
        if _call_name(it) in ("unroll", "vectorized", "grid"):
            return False
        calls = {_call_name(c) for st in s.body for c in ast.walk(st)}
        if role:
            return bool(calls & {"mbarrier_wait_parity", "ptx_arrive_barrier", "tma_load", "mbarrier_expect_tx",
                                 "ptx_arrive_barrier_expect_tx"})
        return "ptx_cp_async" in calls

    def stmt(self, s, env: dict, guard: tuple, bounds: tuple, where: str, role: str, depth: int) -> str:
        d = depth + 1
        if isinstance(s, ast.For):
            return self.loop(s, env, guard, bounds, where, role, d)
        if isinstance(s, ast.If):
            c = self.expr(s.test, env)
            if _call_name(s.test) == "tl_shuffle_elect":
                old = self.threads
                self.threads = 1
                where = self.block(s.body, env, guard, bounds, where, role, d)
                self.threads = old
                if s.orelse:
                    where = self.block(s.orelse, env, guard + (None,), bounds, where, role, d)
                return where
            where = self.block(s.body, env, guard + (c,), bounds, where, role, d)
            if s.orelse:
                where = self.block(s.orelse, env, guard + (None if c is None else Un("!", c),), bounds, where, role, d)
            return where
        if isinstance(s, ast.With):
            return self.block(s.body, env, guard, bounds, where, role, d)
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            self.assign(s, env, guard, bounds, where, role)
            return where
        if isinstance(s, ast.Expr):
            self.call(s.value, s, env, guard, bounds, where, role)
            return where
        if isinstance(s, (ast.Pass, ast.Return)):
            return where
        if isinstance(s, ast.While):
            if self._has_sync([s]):
                raise self.err(s, "a while loop around the pipeline's statements is outside the model",
                               "pass a kernel whose pipelined loop is a for loop")
            return where
        raise self.err(s, f"`{_seg(self.text, s)}` is not a TIR statement synth reads")

    def loop(self, s: ast.For, env: dict, guard: tuple, bounds: tuple, where: str, role: str, d: int) -> str:
        it = s.iter
        name = _call_name(it)
        if name not in ("serial", "unroll", "range", "grid", "vectorized", "parallel"):
            raise self.err(s, f"a loop over `{_seg(self.text, it)}` is outside the model")
        targets = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            raise self.err(s, "a loop target that is not a name")
        if name == "grid":
            exts = [self.expr(a, env) for a in it.args]
            rngs = [(Num(0), e) for e in exts]
        else:
            pos = [a for a in it.args]
            if len(pos) == 1:
                rngs = [(Num(0), self.expr(pos[0], env))]
            elif len(pos) == 2:
                lo, hi = self.expr(pos[0], env), self.expr(pos[1], env)
                rngs = [(lo, None if lo is None or hi is None else simplify(Bin("-", hi, lo)))]
            else:
                raise self.err(s, f"a loop `{_seg(self.text, it)}` with a step is outside the model")
        if len(rngs) != len(targets):
            raise self.err(s, "a loop whose targets and extents differ in number")
        if len(targets) == 1 and self._is_pipelined(s, role) and where == "pre":
            lo, ext = rngs[0]
            if lo is None or ext is None or not isinstance(simplify(lo), Num):
                raise self.err(s, "the pipelined loop's start or extent is not known (a constant start and an "
                               "extent in the kernel's integer parameters are supported)")
            self.k.loops.append((role, s.lineno, simplify(ext), simplify(lo).value))
            e2 = dict(env)
            e2[targets[0].id] = simplify(Bin("+", Var("k"), lo))
            self.block(s.body, e2, guard, bounds, "body", role, d)
            return "post"
        if where == "body" and self._is_pipelined(s, role):
            raise self.err(s, "a pipelined loop nested in another is outside the model",
                           "pass a kernel with one pipelined loop")
        for (lo, ext), t in zip(rngs, targets):
            if lo is None or ext is None or not isinstance(simplify(lo), Num) or not isinstance(simplify(ext), Num):
                if self._has_sync(s.body) or any(_call_name(c) == "ptx_cp_async" for st in s.body
                                                 for c in ast.walk(st)):
                    raise self.err(s, f"a loop of non-constant extent `{_seg(self.text, it)}` around the "
                                   "pipeline's statements is outside the model")
                return where
        rngs = [(simplify(lo).value, simplify(ext).value) for lo, ext in rngs]
        if self._has_sync(s.body):
            import itertools
            total = 1
            for _, n in rngs:
                total *= max(n, 0)
            if total * self.unrolled > MAX_UNROLL:
                raise self.err(s, f"loops of {total * self.unrolled} iterations in all around the pipeline's "
                               "statements", f"at most {MAX_UNROLL} iterations are run out (docs/check.md, "
                               "'TileLang')")
            self.unrolled *= max(total, 1)
            for vals in itertools.product(*[range(lo, lo + n) for lo, n in rngs]):
                e2 = dict(env)
                for t, v in zip(targets, vals):
                    e2[t.id] = Num(v)
                where = self.block(s.body, e2, guard, bounds, where, role, d)
            self.unrolled //= max(total, 1)
            return where
        e2 = dict(env)
        b2 = bounds
        for t, (lo, n) in zip(targets, rngs):
            if n <= 0:
                return where
            v = f"{t.id}__{s.lineno}"
            e2[t.id] = Var(v)
            b2 = b2 + ((v, lo, lo + n),)
        return self.block(s.body, e2, guard, b2, where, role, d)

    def assign(self, s, env: dict, guard: tuple, bounds: tuple, where: str, role: str) -> None:
        target = s.targets[0] if isinstance(s, ast.Assign) else s.target
        value = s.value
        if isinstance(s, ast.Assign) and len(s.targets) != 1:
            raise self.err(s, "a chained assignment")
        if isinstance(target, ast.Name):
            name = _call_name(value)
            if name == "launch_thread" and len(value.args) == 2:
                ext = self.expr(value.args[1], env)
                v = f"{target.id}__thread"
                env[target.id] = Var(v)
                if isinstance(ext, Num):
                    self._thread_bounds[v] = (0, ext.value)
                return
            if name == "decl_buffer":
                data = next((kw.value for kw in value.keywords if kw.arg == "data"), None)
                base = data.value if isinstance(data, ast.Attribute) and data.attr == "data" else data
                if isinstance(base, ast.Name):
                    self.aliases[target.id] = self.aliases.get(base.id, base.id)
                return
            if name == "handle_add_byte_offset" and isinstance(s, ast.AnnAssign) \
                    and _call_name(s.annotation) == "handle" and len(s.annotation.args) >= 2:
                ty, scope = s.annotation.args[0], s.annotation.args[1]
                if isinstance(scope, ast.Constant) and str(scope.value).startswith("shared"):
                    eb = ELEM_BYTES.get(ty.value if isinstance(ty, ast.Constant) else "", 0)
                    if not eb:
                        raise self.err(s, f"shared buffer {target.id} of an element type synth does not know")
                    self.k.shared[target.id] = eb
                return
            if name == "alloc_buffer":  # a shared buffer of its own (a single-buffer kernel's `As`)
                scope = next((kw.value for kw in value.keywords if kw.arg == "scope"), None)
                if isinstance(scope, ast.Constant) and str(scope.value) in ("shared", "shared.dyn"):
                    ty = value.args[1] if len(value.args) > 1 else next(
                        (kw.value for kw in value.keywords if kw.arg == "dtype"), ast.Constant("float32"))
                    eb = ELEM_BYTES.get(ty.value if isinstance(ty, ast.Constant) else "", 0)
                    if not eb:
                        raise self.err(s, f"shared buffer {target.id} of an element type synth does not know")
                    self.k.shared[target.id] = eb
                return
            if value is not None:
                env[target.id] = self.expr(value, env)
                self.loads(value, s, env, guard, bounds, where, role)
                self.pointer_uses(value, s, env, guard, bounds, where, role)
            return
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            b = self.aliases.get(target.value.id, target.value.id)
            if b in self.k.shared:
                idx = target.slice.lower if isinstance(target.slice, ast.Slice) else target.slice
                self.add("store", s, guard, bounds, where, role, buffer=b, offset=self.expr(idx, env))
            self.loads(value, s, env, guard, bounds, where, role)
            self.pointer_uses(value, s, env, guard, bounds, where, role)
            return
        raise self.err(s, f"`{_seg(self.text, s)}` is not an assignment synth reads")

    def loads(self, value, s, env, guard, bounds, where, role) -> None:
        for n in ast.walk(value):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                b = self.aliases.get(n.value.id, n.value.id)
                if b in self.k.shared:
                    idx = n.slice.lower if isinstance(n.slice, ast.Slice) else n.slice
                    self.add("read", s, guard, bounds, where, role, buffer=b, offset=self.expr(idx, env))

    def add(self, kind: str, s, guard, bounds, where, role, **kw) -> None:
        tb = tuple((v, lo, hi) for v, (lo, hi) in self._thread_bounds.items())
        self.k.events.append(TEvent(kind, s.lineno, _seg(self.text, s), where, guard=guard, bounds=bounds + tb,
                                    role=role, **kw))

    def call(self, c, s, env: dict, guard, bounds, where, role) -> None:
        name = _call_name(c)
        a = c.args if isinstance(c, ast.Call) else []
        if name == "ptx_cp_async":
            dst = self.access_ptr(a[0], env) if a else None
            if dst is None:
                raise self.err(s, "a cp.async whose destination is not T.tvm_access_ptr(...)")
            self.add("cp_async", s, guard, bounds, where, role, buffer=dst[0], offset=dst[1])
        elif name == "ptx_commit_group":
            self.add("commit", s, guard, bounds, where, role)
        elif name == "ptx_wait_group":
            self.add("wait", s, guard, bounds, where, role, count=self.expr(a[0], env) if a else None)
        elif name == "ptx_ldmatrix":
            src = self.access_ptr(a[2], env) if len(a) > 2 else None
            if src is None:
                raise self.err(s, "an ldmatrix whose source is not T.tvm_access_ptr(...)")
            self.add("read", s, guard, bounds, where, role, buffer=src[0], offset=src[1])
        elif name == "initialize_wgmma_descriptor":
            src = self.access_ptr(a[1], env) if len(a) > 1 else None
            self.desc[self._desc_name(a[0] if a else None, s)] = src
        elif name == "increase_descriptor_offset":
            key = self._desc_name(a[0] if a else None, s)
            cur = self.desc.get(key)
            add = self.expr(a[1], env) if len(a) > 1 else None
            if cur is not None:
                b, off, ext, rw = cur
                eb = self.k.shared.get(b, 1)
                self.desc[key] = (b, None if off is None or add is None else Bin("+", off, Bin("/", add, Num(eb))),
                                  ext, rw)
            else:
                self.desc[key] = None
        elif name in ("ptx_wgmma_ss", "ptx_wgmma_rs"):
            reads = []
            for x in a:
                if isinstance(x, ast.Attribute) and x.attr == "data" and isinstance(x.value, ast.Name):
                    key = self.aliases.get(x.value.id, x.value.id)
                    if key in self.desc:
                        d = self.desc[key]
                        if d is None:
                            raise self.err(s, "a wgmma descriptor whose shared address synth cannot read")
                        reads.append((d[0], d[1]))
            if len(reads) != (2 if name == "ptx_wgmma_ss" else 1):
                raise self.err(s, f"a wgmma whose {2 if name == 'ptx_wgmma_ss' else 1} shared-memory operand "
                               "descriptors synth cannot find (T.initialize_wgmma_descriptor before it)")
            self.add("wgmma", s, guard, bounds, where, role, reads=tuple(reads))
        elif name == "warpgroup_commit_batch":
            self.add("wg_commit", s, guard, bounds, where, role)
        elif name == "warpgroup_wait":
            self.add("wg_wait", s, guard, bounds, where, role, count=self.expr(a[0], env) if a else None)
        elif name == "ptx_init_barrier_thread_count":
            b, i = self.bar_index(a[0], env)
            self.add("init", s, guard, bounds, where, role, buffer=b, bar_index=i,
                     count=self.expr(a[1], env) if len(a) > 1 else None)
        elif name == "tvm_storage_sync" and role:
            # a named bar.sync over the role's threads inside a warp-specialized role: a convergence point
            self.add("sync", s, guard, bounds, where, role)
        elif name == "ptx_fence_barrier_init":
            self.add("fence_init", s, guard, bounds, where, role)
        elif name == "mbarrier_wait_parity":
            b, i = self.bar_index(a[0], env)
            self.add("bwait", s, guard, bounds, where, role, buffer=b, bar_index=i,
                     count=self.expr(a[1], env, parity=True) if len(a) > 1 else None)
        elif name in ("ptx_arrive_barrier", "ptx_arrive_barrier_expect_tx", "mbarrier_expect_tx"):
            if len(a) > (1 if name == "ptx_arrive_barrier" else 2) and name == "ptx_arrive_barrier":
                raise self.err(s, "a remote (cluster) arrive is outside the model")
            b, i = self.bar_index(a[0], env)
            if name == "ptx_arrive_barrier":
                self.add("arrive", s, guard, bounds, where, role, buffer=b, bar_index=i, count=Num(self.threads))
            else:
                nb = self.expr(a[1], env) if len(a) > 1 else None
                if not isinstance(nb, Num):
                    raise self.err(s, "expect_tx bytes that are not a constant")
                arr = 0 if name == "mbarrier_expect_tx" else self.threads
                self.add("expect", s, guard, bounds, where, role, buffer=b, bar_index=i, nbytes=nb.value,
                         count=Num(arr))
        elif name == "tma_load":
            if len(a) < 3:
                raise self.err(s, "a tma_load without descriptor, barrier and destination")
            if _call_name(a[0]) == "tvm_access_ptr":  # the 1D bulk copy: (dst, src, barrier, bytes, ...)
                if len(a) < 4:
                    raise self.err(s, "a 1D bulk tma_load without barrier and bytes")
                b, i = self.bar_index(a[2], env)
                dst = self.access_ptr(a[0], env)
                nb = self.expr(a[3], env)
                if dst is not None and dst[2] is not None and (
                        not isinstance(nb, Num) or nb.value != dst[2] * self.k.shared.get(dst[0], 0)):
                    raise self.err(s, "a 1D bulk tma_load whose byte count is not its destination's size")
            else:
                b, i = self.bar_index(a[1], env)
                dst = self.access_ptr(a[2], env)
            if dst is None or dst[2] is None:
                raise self.err(s, "a tma_load whose destination is not T.tvm_access_ptr(type, buf, off, n, 2)")
            eb = self.k.shared.get(dst[0], 0)
            n = dst[2] * eb
            for v, lo, hi in bounds:  # an unrolled loop of copies into one slot: each copies its part
                if dst[1] is not None and v in free_vars(dst[1]):
                    n *= hi - lo
            self.add("tma", s, guard, bounds, where, role, buffer=dst[0], offset=dst[1], nbytes=n, bar_index=i,
                     count=Var(b))
        elif name in ("tma_load_im2col", "tma_store", "ptx_cp_async_bulk", "ptx_arrive_cluster_barrier",
                      "tcgen05_mma", "ptx_tcgen05_mma_ss"):
            raise self.err(s, f"T.{name} is outside the model of synth check",
                           "synth reads cp.async pipelines and TMA + mbarrier + wgmma pipelines")
        elif name == "":
            raise self.err(s, f"`{_seg(self.text, s)}` is not a call synth reads")
        else:  # any other call: its pointers into shared memory are reads or writes, never ignored
            self.pointer_uses(c, s, env, guard, bounds, where, role)

    def pointer_uses(self, node, s, env, guard, bounds, where, role) -> None:
        """A read (access mask 1), a store (2) or both (3) per ``T.tvm_access_ptr`` of a shared buffer in
        ``node``, a call synth has no rule for (an extern call, ``T.ptx_stmatrix``, ...)."""
        for n in ast.walk(node):
            if _call_name(n) == "tvm_access_ptr":
                p = self.access_ptr(n, env)
                if p is None or p[0] not in self.k.shared:
                    continue
                if p[3] & 1:
                    self.add("read", s, guard, bounds, where, role, buffer=p[0], offset=p[1])
                if p[3] & 2:
                    self.add("store", s, guard, bounds, where, role, buffer=p[0], offset=p[1])

    def _desc_name(self, node, s) -> str:
        """The buffer a wgmma descriptor operand ``desc_a_1[0]`` names (aliases followed)."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            return self.aliases.get(node.value.id, node.value.id)
        raise self.err(s, "a wgmma descriptor operand that is not `buffer[0]`")


def read_tir(text: str, path: str) -> Kernel:
    """The events of TileLang device TIR ``text`` (module docstring); SynthError (exit 2) for what is
    outside the model, naming the file and line."""
    return _Reader(text, path).read()


__all__ = ["read_tir", "Kernel", "TEvent", "tir_error", "FIX", "MAX_UNROLL", "MAX_NEST", "MAX_EXPR_NEST"]

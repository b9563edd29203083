"""Read a TVMScript file without running it: a closed whitelist over Python's syntax tree.

TVM's TVMScript parser *evaluates* the Python expressions it meets (decorator
arguments, annotations, default values, every call): handing it an untrusted file
runs whatever the file says. So :func:`screen` reads the text with :func:`ast.parse`
only (the syntax tree is built, nothing is compiled or evaluated) and refuses, with
its line and column (exit 2), every construct outside what TVMScript as printed by
TVM (``mod.script()``) and as written in TVM's tests uses:

* at the top of the file: a docstring, imports (never executed: the names ``T``,
  ``I``, ``R`` of ``from tvm.script import tir as T`` and its spellings are bound to
  TVM's own script namespaces by synth; an import of another module binds nothing
  and is skipped), ``@T.prim_func`` functions, ``@I.ir_module`` classes of
  ``@T.prim_func`` functions (``@R.function`` members are skipped); an
  ``if __name__ == "__main__":`` block and functions or classes without a
  TVMScript decorator (a test's ``def test_...``) are skipped, never read; any
  other statement (an assignment, a call, ...) is refused;
* inside a function: ``for``, ``with``, ``if``/``else``, ``while``, assignments to
  names and buffer elements, annotated assignments, calls as statements, ``assert``,
  ``return``, ``pass``, ``break``, ``continue``;
* in an expression: literals (integers up to 2**64 in magnitude, strings up to 4096
  characters), names bound in the same function (parameters, loop variables,
  assignment targets) and ``range``, ``+ - * / // %``, comparisons, ``and or not``,
  bit ``& | ^ ~``, subscripts and slices, tuples, lists, dicts with constant keys, and
  calls whose callee is ``T.<name>`` (a closed list of TVMScript builders: buffers,
  blocks, loops, attributes, casts, intrinsics), ``T.axis.*``, ``T.ptx.*``,
  ``T.cuda.*``, ``I.<name>``, ``R.<name>`` or ``range``; attributes of a bound name
  only from ``data shape dtype strides elem_offset``.

Refused wherever they stand: lambdas, comprehensions, f-strings, ``:=``, ``**``,
shifts, ``@``, ``if``-expressions, starred arguments, ``**kwargs``, default values,
string annotations,
decorators other than ``T.prim_func``/``I.ir_module`` (with constant keyword
arguments), any name starting with ``_``, ``global``/``nonlocal``, imports inside a
function, ``try``, ``class`` inside a function, nested functions.

Each accepted function is then handed to TVM as its own text: the lines it spans,
dedented, after blank lines that keep its line numbers, and synth re-parses that
text and checks that its syntax tree is exactly the one screened before TVM sees it.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from typing import Optional

from ..errors import Loc, SynthError

MAX_INT = 1 << 64
"""Largest magnitude of an integer literal in a TVMScript file."""
MAX_STR = 4096
"""Characters of one string literal in a TVMScript file."""
MAX_DEPTH = 64
"""Nesting of statements and expressions in a TVMScript file (TVM's parser recurses)."""
MAX_NODES = 200_000
"""Syntax-tree nodes of a TVMScript file (a pipelined GEMM's script has a few thousand; 35,000 are read and
checked in about 3 s)."""

# TVMScript builders that ``mod.script()`` prints and TVM's tests write (a closed list).
T_NAMES = frozenset("""
prim_func Buffer buffer match_buffer alloc_buffer sblock_alloc_buffer decl_buffer buffer_decl
sblock block reads writes where attr sblock_attr block_attr init func_attr
thread_binding serial parallel unroll vectorized grid launch_thread env_thread
evaluate let bind assume allocate allocate_const Assert
Select Cast cast if_then_else likely min max floordiv floormod truncdiv truncmod ceildiv
abs exp exp2 exp10 log log2 log10 log1p sqrt rsqrt sigmoid tanh sin cos tan erf pow fma
floor ceil round trunc nearbyint fabs fmod isnan isinf isfinite popcount clz
shift_left shift_right bitwise_and bitwise_or bitwise_xor bitwise_not reinterpret
infinity max_value min_value
call_extern call_pure_extern call_intrin call_llvm_intrin call_llvm_pure_intrin call_packed call_cpacked
tvm_access_ptr address_of tvm_storage_sync tvm_thread_allreduce tvm_warp_shuffle tvm_warp_shuffle_up
tvm_warp_shuffle_down tvm_warp_activemask tvm_load_matrix_sync tvm_store_matrix_sync tvm_mma_sync
tvm_fill_fragment tvm_bmma_sync tvm_stack_alloca tvm_struct_get tvm_struct_set tvm_thread_invariant
ramp broadcast Ramp Broadcast Shuffle ptr Ptr handle void type_annotation IntImm FloatImm Range iter_var
bool boolean var Var Let
ptx_cp_async ptx_commit_group ptx_wait_group ptx_cp_async_barrier ptx_arrive_barrier ptx_init_barrier_thread_count
ptx_wait_barrier ptx_ldmatrix ptx_mma ptx_mma_sp mma_store mma_fill
Add Sub Mul Div Mod FloorDiv FloorMod Min Max EQ NE LT LE GT GE And Or Not LShift RShift
BitwiseAnd BitwiseOr BitwiseXor BitwiseNot BufferLoad Call CallEffectKind CommReducer Reduce
vscale get_active_lane_mask tvm_tuple undef isnullptr lookup_param hint
""".split())
_DTYPE = re.compile(r"(?:u?int(?:8|16|32|64)|float(?:16|32|64)|bfloat16|bf16|f16|f32|f64|i8|i16|i32|i64|u8|u16|u32|u64"
                    r"|float8_\w+|float6_\w+|float4_\w+)(?:x\d+)?")
T_SUBSPACES = frozenset({"axis", "ptx", "cuda"})
AXIS_NAMES = frozenset({"spatial", "reduce", "scan", "opaque", "remap", "S", "R"})
I_NAMES = frozenset({"ir_module", "module_attrs", "module_global_infos", "dummy_global_info", "vdevice"})
R_NAMES = frozenset({"function", "Tensor", "Shape", "Object", "Tuple", "Prim", "call_tir", "dataflow", "output",
                     "emit", "const", "shape", "prim_value", "str", "dtype"})
LOCAL_ATTRS = frozenset({"data", "shape", "dtype", "strides", "elem_offset"})
PRIM_FUNC_KW = frozenset({"private", "s_tir", "check_well_formed"})
IR_MODULE_KW = frozenset({"check_well_formed"})
BUILTIN_NAMES = frozenset({"range"})
SHADOWING = frozenset("eval exec compile open breakpoint input exit quit help globals locals vars getattr setattr "
                      "delattr super type object memoryview".split())
"""Python builtins a TVMScript name may not take: TVM's parser looks a name up among Python's builtins
when it meets it before the statement that binds it (an annotation naming a later variable)."""

# ``from tvm.script import tir as T`` and its spellings: the module imported -> the role of its alias.
_ROLES = {"tir": "T", "tirx": "T", "ir": "I", "relax": "R"}

_FIX = ("TVMScript is read, never run: write it as mod.script() prints it (docs/check.md, \"TVMScript\"), "
        "without Python code around or inside the functions")


@dataclass(frozen=True)
class ScreenedFunc:
    """One ``@T.prim_func`` of the file: its name, the module class it is in (or None),
    its first line (its first decorator's), the text TVM gets (line numbers kept) and its dedent."""

    name: str
    module: Optional[str]
    line: int
    text: str
    indent: int = 0
    """Columns the text was dedented by (a column TVM reports in it is this many to the left)."""


@dataclass(frozen=True)
class Screened:
    """What :func:`screen` accepted: the functions in file order, and what it skipped (name, line, why)."""

    funcs: tuple
    skipped: tuple
    aliases: tuple = ()
    """(name, role) of every name the file binds by import, and T, I, R themselves."""


def _err(path: str, node, msg: str, fix: str = _FIX) -> SynthError:
    return SynthError(Loc(path, getattr(node, "lineno", 0) or 0, (getattr(node, "col_offset", 0) or 0) + 1),
                      msg, fix)


def _chain(node) -> Optional[list]:
    """``a.b.c`` -> ``["a", "b", "c"]``; None when it is not a chain of names."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


class _Screen:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.aliases: dict = {}  # name -> role ("T", "I", "R", "tvm", or "" for an unused tvm import)

    def err(self, node, msg: str, fix: str = _FIX) -> SynthError:
        return _err(self.path, node, msg, fix)

    # ---- the top of the file ---------------------------------------------------------------
    def module(self, tree: ast.Module) -> Screened:
        funcs: list = []
        skipped: list = []
        for st in tree.body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                why = self.imports(st)
                if why is not None:
                    skipped.append(why)
        for name in ("T", "I", "R"):
            # mod.script() prints its imports commented out: T, I, R are then TVMScript's own names
            self.aliases.setdefault(name, name)
        for i, st in enumerate(tree.body):
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
                continue  # a docstring or a string statement: nothing is evaluated
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                continue
            elif isinstance(st, ast.If) and self.is_main(st):
                skipped.append(("__main__", st.lineno, "the __main__ block is skipped, never run"))
            elif isinstance(st, (ast.FunctionDef, ast.ClassDef)) and not self.is_script(st):
                what = "function" if isinstance(st, ast.FunctionDef) else "class"
                skipped.append((st.name, st.lineno, f"a {what} without @T.prim_func / @I.ir_module is skipped, "
                                "never run"))
            elif isinstance(st, ast.FunctionDef):
                self.decorator(st, "prim_func")
                funcs.append((st, None))
            elif isinstance(st, ast.ClassDef):
                self.decorator(st, "ir_module")
                if st.bases or st.keywords:
                    raise self.err(st, f"class {st.name} has base classes or keywords",
                                   "an @I.ir_module class is written 'class Module:'")
                for m in st.body:
                    if isinstance(m, ast.Expr) and isinstance(m.value, ast.Constant) \
                            and isinstance(m.value.value, str):
                        continue
                    if isinstance(m, ast.Pass):
                        continue
                    if not isinstance(m, ast.FunctionDef):
                        raise self.err(m, f"{_what(m)} in @I.ir_module class {st.name}",
                                       "an @I.ir_module class holds @T.prim_func functions only")
                    if self.decorator(m, "prim_func", relax_ok=True) == "R":
                        skipped.append((m.name, m.lineno, "a Relax function is skipped (only PrimFuncs are read)"))
                        continue
                    funcs.append((m, st.name))
            elif isinstance(st, ast.AsyncFunctionDef):
                raise self.err(st, "an async function", "TVMScript functions are plain @T.prim_func functions")
            else:
                raise self.err(st, f"module-level code ({_what(st)}) is not TVMScript",
                               "a TVMScript file holds imports, @T.prim_func functions and @I.ir_module "
                               "classes; move constants into the functions")
        for fn, _ in funcs:
            self.function(fn)
        return Screened(tuple(ScreenedFunc(fn.name, cls, _first_line(fn), self.extract(fn), fn.col_offset) for fn, cls in funcs),
                        tuple(skipped), tuple(sorted(self.aliases.items())))

    def is_script(self, st) -> bool:
        """Whether one of ``st``'s decorators names T.prim_func, I.ir_module or R.function (then it is read)."""
        for d in st.decorator_list:
            parts = _chain(d.func if isinstance(d, ast.Call) else d)
            if parts and parts[-1] in ("prim_func", "ir_module", "function") and (
                    self.aliases.get(parts[0]) in ("T", "I", "R", "tvm")):
                return True
        return False

    def is_main(self, st: ast.If) -> bool:
        t = st.test
        return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
                and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) and len(t.comparators) == 1
                and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__")

    def imports(self, st) -> Optional[tuple]:
        """Record the TVMScript aliases an import binds; ``(name, line, why)`` when it is skipped (not tvm).

        No import is executed: the names T, I, R are bound by synth to TVM's own namespaces."""
        if isinstance(st, ast.Import):
            for a in st.names:
                bound = a.asname or a.name.split(".")[0]
                self.name(st, bound)
                if a.name != "tvm" and not a.name.startswith("tvm."):
                    self.aliases.pop(bound, None)
                    continue
                self.bind_alias(st, bound, "tvm" if a.asname is None and bound == "tvm" else "")
            mods = [a.name for a in st.names if a.name != "tvm" and not a.name.startswith("tvm.")]
            return (f"import {', '.join(mods)}", st.lineno, "not a tvm module: skipped, never imported") \
                if mods else None
        mod = st.module or ""
        if st.level:
            raise self.err(st, "a relative import", "only tvm modules may be imported")
        if mod == "__future__":
            return None
        for a in st.names:
            if a.name == "*":
                raise self.err(st, f"from {mod} import *", "import names one by one (from tvm.script import tir as T)")
        if mod != "tvm" and not mod.startswith("tvm."):
            for a in st.names:
                self.name(st, a.asname or a.name)
                self.aliases.pop(a.asname or a.name, None)
            return (f"from {mod} import ...", st.lineno, "not a tvm module: skipped, never imported")
        for a in st.names:
            role = ""
            if mod in ("tvm.script", "tvm.script.parser"):
                role = _ROLES.get(a.name, "")
            self.bind_alias(st, a.asname or a.name, role)
        return None

    def bind_alias(self, st, name: str, role: str) -> None:
        self.name(st, name)
        self.aliases[name] = role

    def decorator(self, fn, want: str, relax_ok: bool = False) -> str:
        """Check ``fn``'s one decorator is ``T.prim_func`` (``I.ir_module`` for a class); its role."""
        if len(fn.decorator_list) != 1:
            raise self.err(fn, f"{fn.name} has {len(fn.decorator_list)} decorators",
                           f"write exactly one: @{'T.prim_func' if want == 'prim_func' else 'I.ir_module'}")
        d = fn.decorator_list[0]
        call = d if isinstance(d, ast.Call) else None
        parts = _chain(call.func if call else d)
        role = self.aliases.get(parts[0]) if parts else None
        ok = False
        if parts and len(parts) == 2 and role in ("T", "I", "R"):
            ok = (want == "prim_func" and ((role == "T" and parts[1] == "prim_func")
                                           or (relax_ok and role == "R" and parts[1] == "function"))) \
                or (want == "ir_module" and role == "I" and parts[1] == "ir_module")
        if parts and parts == ["tvm", "script", "ir_module"] and role == "tvm" and want == "ir_module":
            ok, role = True, "I"
        if not ok:
            raise self.err(d, f"decorator of {fn.name} is not @T.prim_func{' or @I.ir_module' if want != 'prim_func' else ''}",
                           "TVMScript functions carry @T.prim_func, modules @I.ir_module (with T and I imported "
                           "from tvm.script)")
        if call is not None:
            allowed = PRIM_FUNC_KW if want == "prim_func" else IR_MODULE_KW
            if call.args:
                raise self.err(call.args[0], "a positional decorator argument", "pass keyword arguments only")
            for kw in call.keywords:
                if kw.arg is None or kw.arg not in allowed:
                    raise self.err(kw.value, f"decorator argument {kw.arg or '**'!s} is not one of "
                                   f"{', '.join(sorted(allowed))}", "drop it")
                if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, (bool, str))):
                    raise self.err(kw.value, f"decorator argument {kw.arg} is not a constant",
                                   "write True, False or a string literal")
        return role or ""

    # ---- inside a function -----------------------------------------------------------------
    def function(self, fn: ast.FunctionDef) -> None:
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise self.err(fn, f"{fn.name} has *args, **kwargs, keyword-only or positional-only parameters",
                           "TVMScript parameters are plain 'name: T.Buffer(...)' or 'name: T.handle'")
        if a.defaults or a.kw_defaults:
            d = (a.defaults or [x for x in a.kw_defaults if x is not None])[0]
            raise self.err(d, f"a default value for a parameter of {fn.name}", "TVMScript parameters have no "
                           "default values")
        if fn.type_params if hasattr(fn, "type_params") else False:
            raise self.err(fn, "type parameters", "drop them")
        bound = set(BUILTIN_NAMES)
        for arg in a.args:
            self.name(arg, arg.arg)
            bound.add(arg.arg)
        for node in ast.walk(fn):
            for t in _targets(node):
                for n in _target_names(t):
                    self.name(n, n.id)
                    bound.add(n.id)
        self.bound = bound - set(a for a, r in self.aliases.items() if r in ("T", "I", "R"))
        for n in (x for x in bound if self.aliases.get(x) in ("T", "I", "R")):
            raise self.err(fn, f"{fn.name} rebinds {n}, the TVMScript namespace", "rename the variable")
        for arg in a.args:
            if arg.annotation is None:
                raise self.err(arg, f"parameter {arg.arg} has no annotation", "annotate it: T.Buffer(...) or T.handle")
            self.annotation(arg.annotation)
        if fn.returns is not None and not (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            self.annotation(fn.returns)
        self.body(fn.body, 1)

    def annotation(self, a, depth: int = 1) -> None:
        """An annotation: a TVMScript expression, never a string (a string annotation is code in a string)."""
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            raise self.err(a, "a string annotation", "write the annotation itself: T.Buffer(...), T.handle, T.int32")
        self.expr(a, depth)

    def name(self, node, name: str) -> None:
        if name.startswith("_"):
            raise self.err(node, f"the name {name!r} starts with '_'", "rename it")
        if name in SHADOWING:
            raise self.err(node, f"the name {name!r} is a Python builtin", "rename it")

    def body(self, stmts, depth: int) -> None:
        for s in stmts:
            self.stmt(s, depth + 1)

    def stmt(self, s, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.err(s, f"statements nested more than {MAX_DEPTH} deep", "flatten the function "
                           "(docs/bounds.md)")
        if isinstance(s, ast.For):
            if s.orelse:
                raise self.err(s.orelse[0], "for ... else", "drop the else")
            if getattr(s, "type_comment", None):
                raise self.err(s, "a type comment", "drop it")
            self.target(s.target)
            self.expr(s.iter, depth)
            self.body(s.body, depth)
        elif isinstance(s, ast.While):
            if s.orelse:
                raise self.err(s.orelse[0], "while ... else", "drop the else")
            self.expr(s.test, depth)
            self.body(s.body, depth)
        elif isinstance(s, ast.If):
            self.expr(s.test, depth)
            self.body(s.body, depth)
            self.body(s.orelse, depth)
        elif isinstance(s, ast.With):
            for it in s.items:
                self.expr(it.context_expr, depth)
                if it.optional_vars is not None:
                    self.target(it.optional_vars)
            self.body(s.body, depth)
        elif isinstance(s, ast.Assign):
            for t in s.targets:
                self.target(t, subscript_ok=True, depth=depth)
            self.expr(s.value, depth)
        elif isinstance(s, ast.AnnAssign):
            self.target(s.target, subscript_ok=False)
            self.annotation(s.annotation, depth)
            if s.value is not None:
                self.expr(s.value, depth)
        elif isinstance(s, ast.AugAssign):
            self.target(s.target, subscript_ok=True, depth=depth)
            self.op(s, s.op)
            self.expr(s.value, depth)
        elif isinstance(s, ast.Expr):
            v = s.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                self.expr(v, depth)
            elif isinstance(v, ast.Call):
                self.expr(v, depth)
            else:
                raise self.err(s, f"an expression statement ({_what(v)})", "a statement is a call such as "
                               "T.evaluate(...) or T.reads(...)")
        elif isinstance(s, ast.Assert):
            self.expr(s.test, depth)
            if s.msg is not None:
                self.expr(s.msg, depth)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value, depth)
        elif isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            pass
        else:
            raise self.err(s, f"{_what(s)} inside a TVMScript function", _FIX)

    def target(self, t, subscript_ok: bool = False, depth: int = 1) -> None:
        if isinstance(t, ast.Name):
            self.name(t, t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.target(e, subscript_ok, depth)
        elif isinstance(t, ast.Subscript) and subscript_ok and isinstance(t.value, ast.Name):
            self.expr(t.value, depth)
            self.expr(t.slice, depth)
        else:
            raise self.err(t, f"assignment to {_what(t)}", "assign to a name or a buffer element (B[i] = ...)")

    def op(self, node, op) -> None:
        if isinstance(op, (ast.Pow, ast.LShift, ast.RShift, ast.MatMult)):
            sym = {ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}[type(op)]
            raise self.err(node, f"the operator {sym}", "write T.pow, T.shift_left or T.shift_right")

    def expr(self, e, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.err(e, f"an expression nested more than {MAX_DEPTH} deep", "simplify it (docs/bounds.md)")
        d = depth + 1
        if isinstance(e, ast.Constant):
            v = e.value
            if isinstance(v, bool) or v is None:
                return
            if isinstance(v, int):
                if abs(v) > MAX_INT:
                    raise self.err(e, f"an integer literal of {len(str(abs(v)))} digits", "integers in TVMScript "
                                   "are at most 2**64 in magnitude (docs/bounds.md)")
                return
            if isinstance(v, float):
                return
            if isinstance(v, str):
                if len(v) > MAX_STR:
                    raise self.err(e, f"a string literal of {len(v)} characters", f"strings are at most {MAX_STR} "
                                   "characters (docs/bounds.md)")
                return
            raise self.err(e, f"a {type(v).__name__} literal", "TVMScript uses int, float, str, True, False, None")
        if isinstance(e, ast.Name):
            if e.id in self.bound or self.aliases.get(e.id) in ("T", "I", "R"):
                return
            raise self.err(e, f"the name {e.id!r} is not bound in this function",
                           "TVMScript names are parameters, loop variables, assigned variables and T, I, R")
        if isinstance(e, ast.Attribute):
            self.attribute(e)
            return
        if isinstance(e, ast.Call):
            parts = _chain(e.func)
            if parts == ["range"]:
                pass
            elif parts is None or self.aliases.get(parts[0]) not in ("T", "I", "R") or parts[0] in self.bound:
                raise self.err(e, f"a call of {_what(e.func)}: only T.*, I.*, R.* and range may be called",
                               _FIX)
            else:
                self.attribute(e.func)
            for a in e.args:
                if isinstance(a, ast.Starred):
                    raise self.err(a, "a starred argument", "write the arguments out")
                self.expr(a, d)
            for kw in e.keywords:
                if kw.arg is None:
                    raise self.err(kw.value, "a **keyword argument", "write the keyword arguments out")
                if kw.arg.startswith("_"):
                    raise self.err(kw.value, f"the keyword {kw.arg!r} starts with '_'", "rename it")
                self.expr(kw.value, d)
            return
        if isinstance(e, ast.BinOp):
            self.op(e, e.op)
            for side in (e.left, e.right):
                if isinstance(side, (ast.Tuple, ast.List, ast.Dict, ast.Set)) or (
                        isinstance(side, ast.Constant) and isinstance(side.value, (str, bytes))):
                    raise self.err(side, f"arithmetic on {_what(side)}", "arithmetic is on numbers and "
                                   "TVM expressions only")
            self.expr(e.left, d)
            self.expr(e.right, d)
            return
        if isinstance(e, ast.UnaryOp):
            self.expr(e.operand, d)
            return
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                self.expr(v, d)
            return
        if isinstance(e, ast.Compare):
            for op in e.ops:
                if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                    raise self.err(e, "'is' or 'in' in a comparison", "compare with == != < <= > >=")
            self.expr(e.left, d)
            for c in e.comparators:
                self.expr(c, d)
            return
        if isinstance(e, ast.Subscript):
            self.expr(e.value, d)
            self.expr(e.slice, d)
            return
        if isinstance(e, ast.Slice):
            for x in (e.lower, e.upper, e.step):
                if x is not None:
                    self.expr(x, d)
            return
        if isinstance(e, (ast.Tuple, ast.List)):
            for x in e.elts:
                if isinstance(x, ast.Starred):
                    raise self.err(x, "a starred element", "write the elements out")
                self.expr(x, d)
            return
        if isinstance(e, ast.Dict):
            for k, v in zip(e.keys, e.values):
                if k is None or not (isinstance(k, ast.Constant) and isinstance(k.value, (str, int))):
                    raise self.err(v if k is None else k, "a dict key that is not a string or integer literal",
                                   "write {\"key\": value}")
                self.expr(k, d)
                self.expr(v, d)
            return
        raise self.err(e, f"{_what(e)} in a TVMScript expression", _FIX)

    def attribute(self, e) -> None:
        parts = _chain(e)
        if parts is None:
            raise self.err(e, f"an attribute of {_what(e.value)}", _FIX)
        for p in parts:
            if p.startswith("_"):
                raise self.err(e, f"the attribute {p!r}", "names starting with '_' are refused")
        root = parts[0]
        role = self.aliases.get(root) if root not in self.bound else None
        rest = parts[1:]
        if role is None and root in self.bound:
            if len(rest) == 1 and rest[0] in LOCAL_ATTRS:
                return
            raise self.err(e, f"the attribute {'.'.join(parts)}",
                           f"only {', '.join(sorted(LOCAL_ATTRS))} of a buffer or variable may be read")
        ok = False
        if role == "T" and rest:
            if len(rest) == 1:
                ok = rest[0] in T_NAMES or bool(_DTYPE.fullmatch(rest[0]))
            elif rest[0] == "axis":
                ok = len(rest) == 2 and rest[1] in AXIS_NAMES
            elif rest[0] in T_SUBSPACES:
                ok = len(rest) <= 4
        elif role == "I":
            ok = len(rest) == 1 and rest[0] in I_NAMES
        elif role == "R":
            ok = len(rest) == 1 and rest[0] in R_NAMES
        if not ok:
            raise self.err(e, f"{'.'.join(parts)} is not a TVMScript builder synth reads",
                           "TVMScript names are T.<builder> (T.Buffer, T.sblock, T.attr, T.serial, ...), "
                           "I.ir_module and R.<builder>, with T, I, R imported from tvm.script")

    # ---- the text TVM gets -----------------------------------------------------------------
    def extract(self, fn: ast.FunctionDef) -> str:
        first = _first_line(fn)
        lines = self.text.splitlines(keepends=True)
        region = lines[first - 1: fn.end_lineno]
        col = fn.col_offset
        out = []
        for ln in region:
            lead = len(ln) - len(ln.lstrip(" \t"))
            out.append(ln[min(col, lead):] if lead else ln)
        text = "\n" * (first - 1) + "".join(out)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise self.err(fn, f"the text of {fn.name} cannot be read on its own", "indent the function's lines "
                           "consistently") from None
        if len(again.body) != 1 or ast.dump(again.body[0]) != ast.dump(fn):
            raise self.err(fn, f"the text of {fn.name} cannot be read on its own", "indent the function's lines "
                           "consistently")
        return text


def _first_line(fn) -> int:
    return min([fn.lineno] + [d.lineno for d in fn.decorator_list])


def _targets(node) -> list:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
        return [node.target]
    if isinstance(node, ast.With):
        return [it.optional_vars for it in node.items if it.optional_vars is not None]
    return []


def _target_names(t) -> list:
    """The names a target binds (through tuples and lists, not into subscripts)."""
    if isinstance(t, ast.Name):
        return [t]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    return []


def _what(node) -> str:
    names = {ast.Lambda: "a lambda", ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
             ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression",
             ast.JoinedStr: "an f-string", ast.NamedExpr: "an assignment expression (:=)",
             ast.IfExp: "an if-expression", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield from",
             ast.Starred: "a starred expression", ast.Set: "a set", ast.Global: "a global statement",
             ast.Nonlocal: "a nonlocal statement", ast.Import: "an import", ast.ImportFrom: "an import",
             ast.Try: "a try statement", ast.Raise: "a raise statement", ast.Delete: "a del statement",
             ast.ClassDef: "a class", ast.FunctionDef: "a nested function", ast.AsyncFunctionDef: "an async function",
             ast.Assign: "an assignment", ast.Expr: "an expression statement", ast.Call: "a call",
             ast.Attribute: "an attribute", ast.Subscript: "a subscript", ast.Tuple: "a tuple", ast.List: "a list",
             ast.Dict: "a dict", ast.Constant: "a literal", ast.Name: "a name", ast.If: "an if statement",
             ast.For: "a for loop", ast.While: "a while loop", ast.With: "a with statement",
             ast.AnnAssign: "an annotated assignment", ast.AugAssign: "an augmented assignment"}
    w = names.get(type(node), type(node).__name__)
    if isinstance(node, ast.Name):
        w = f"the name {node.id!r}"
    elif isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        src = ast.unparse(node)  # prints the tree back as text; evaluates nothing
        w = repr(src if len(src) <= 60 else src[:57] + "...")
    return w


def screen(text: str, path: str) -> Screened:
    """The ``@T.prim_func`` functions of TVMScript ``text``, read with :func:`ast.parse` only.

    Raises :class:`SynthError` (exit 2) at the line and column of the first construct
    outside the whitelist (module docstring), of a syntax error, or when the file has
    no ``@T.prim_func`` function. Nothing of the file is compiled, imported or run.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise SynthError(Loc(path, e.lineno or 0, e.offset or 0), f"not Python syntax: {e.msg}",
                         "pass the TVMScript text as mod.script() prints it") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise SynthError(Loc(path), f"not Python syntax: {type(e).__name__}: {str(e)[:200]}",
                         "pass the TVMScript text as mod.script() prints it") from None
    nodes = 0
    for _ in ast.walk(tree):
        nodes += 1
        if nodes > MAX_NODES:
            raise SynthError(Loc(path), f"the file has more than {MAX_NODES} syntax-tree nodes",
                             "pass the functions to check only (docs/bounds.md)")
    sc = _Screen(path, text)
    try:
        out = sc.module(tree)
    except RecursionError:
        raise SynthError(Loc(path), "the file nests too deep to be read", "simplify it (docs/bounds.md)") from None
    if not out.funcs:
        raise SynthError(Loc(path), "no @T.prim_func function in the file",
                         "pass TVMScript after InjectSoftwarePipeline (mod.script())")
    return out


__all__ = ["screen", "Screened", "ScreenedFunc", "MAX_INT", "MAX_STR", "MAX_DEPTH", "MAX_NODES", "T_NAMES"]

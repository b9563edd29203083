"""The layers of synth (docs/architecture.md, "Layers"), checked over every import of every module under synth/,
the imports inside functions included:

(a) every import of a synth module points to its own layer or a lower one;
(b) no two packages import each other, directly or around a longer circle;
(c) synth/trusted/ imports nothing of synth outside itself (the trusted checker stands alone);
(d) an import inside a function, of a synth module or of a heavy optional dependency, says why on its line or on
    the line above (the one reason the contract accepts: it keeps that dependency off a light path, such as
    synth.kernel's runtime or the CLI's argument parser).

The table :data:`LAYERS` is the contract; docs/architecture.md draws the same table. A new module must be placed
in it (a module the table does not place fails :func:`test_every_module_has_a_layer`).
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict
from functools import lru_cache

import pytest

SYNTH = pathlib.Path(__file__).resolve().parent.parent / "synth"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # top to bottom; a module belongs to the entry of the longest name that is it or a package above it
    ("face", ("synth.__main__", "synth.cli", "synth.cli_search", "synth.api", "synth.kernel", "synth.run",
              "synth.pipeline", "synth.envelope")),
    ("flow", ("synth.flow",)),
    ("search | frontends", ("synth.search", "synth.frontends")),
    ("emit", ("synth.emit",)),
    ("verify", ("synth.verify",)),
    ("lower", ("synth.lower", "synth.printer")),
    ("model", ("synth.model", "synth.sim")),
    ("ir", ("synth.hopper", "synth.load", "synth.gemm_doc", "synth.randgen")),
    ("base", ("synth", "synth.arch", "synth.bounds", "synth.completion", "synth.deadline", "synth.errors",
              "synth.expr", "synth.gemm", "synth.graph", "synth.outdir", "synth.problem", "synth.problem_schema",
              "synth.program", "synth.readfile", "synth.schedule", "synth.sections", "synth.yamlnodes")),
    ("trusted", ("synth.trusted",)),
)
"""The layers, top to bottom. ``synth`` in ``base`` is the package's ``__init__`` alone (a module is placed by
the longest entry naming it or a package above it, and every module under synth/ must be named by an entry
other than ``synth``, or be ``synth`` itself)."""

HEAVY = frozenset({"ortools", "z3", "cvc5", "jsonschema", "pycuda", "rich", "matplotlib", "tvm", "torch", "cupy",
                   "cuda", "triton", "dask", "distributed", "xdsl"})
"""Third-party packages a light path must not load (tests/test_light_runtime.py: a stock GPU image has none of
the first seven; the rest are optional extras)."""


def rank(layer: str) -> int:
    """0 for the top layer, growing downward."""
    return [name for name, _ in LAYERS].index(layer)


@lru_cache(maxsize=None)
def modules() -> dict[str, pathlib.Path]:
    """Every module under synth/ by dotted name (a package by its ``__init__.py``)."""
    out = {}
    for path in sorted(SYNTH.rglob("*.py")):
        parts = path.relative_to(SYNTH.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def layer_of(name: str) -> str:
    """The layer of module ``name`` (KeyError when :data:`LAYERS` does not place it)."""
    best, where = "", None
    for layer, prefixes in LAYERS:
        for p in prefixes:
            if (name == p or (name.startswith(p + ".") and p != "synth")) and len(p) > len(best):
                best, where = p, layer
    if where is None:
        raise KeyError(name)
    return where


def package_of(name: str) -> str:
    """The package a module counts in for (b): ``synth.<package>`` for a module under a package of synth (its
    subpackages included: synth.emit.sm90 is synth.emit), the module itself for a top-level module."""
    parts = name.split(".")
    if len(parts) >= 2 and is_package(".".join(parts[:2])):
        return ".".join(parts[:2])
    return name


class Import:
    """One imported module of one import statement."""

    def __init__(self, source: str, target: str, line: int, end: int, in_function: bool) -> None:
        self.source, self.target, self.line, self.end, self.in_function = source, target, line, end, in_function

    def __repr__(self) -> str:
        return f"{modules()[self.source].relative_to(SYNTH.parent)}:{self.line}: {self.target}"


def _targets(name: str, node: ast.AST) -> list[str]:
    """The modules ``node`` imports (absolute names; a synth name cut to the module that exists)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = name.split(".") if is_package(name) else name.split(".")[:-1]
            base = base[:len(base) - node.level + 1]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # `from pkg import mod` imports the module pkg.mod; `from mod import name` the module mod
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules() else prefix for a in node.names]
    out = []
    for t in names:
        if t == "synth" or t.startswith("synth."):
            while t not in modules() and "." in t:
                t = t.rsplit(".", 1)[0]
        out.append(t)
    return list(dict.fromkeys(out))


@lru_cache(maxsize=None)
def imports() -> tuple[Import, ...]:
    """Every import of every module under synth/, the ones inside functions included."""
    out = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for t in _targets(name, child):
                        out.append(Import(name, t, child.lineno, child.end_lineno or child.lineno, in_function))
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
    return tuple(out)


def synth_imports() -> list[Import]:
    return [i for i in imports() if i.target in modules() and i.target != i.source]


def test_docs_architecture_draws_the_same_table():
    """docs/architecture.md's table of layers names the modules :data:`LAYERS` does, layer by layer."""
    import re

    text = (SYNTH.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {}
    for layer, cell in re.findall(r"^\| ([a-z |\\]+?) \| (`synth.*) \|$", text, re.M):
        rows[layer.replace("\\|", "|")] = tuple(re.findall(r"`(synth[\w.]*)`", cell))
    want = {layer: prefixes for layer, prefixes in LAYERS}
    assert {k: sorted(v) for k, v in rows.items()} == {k: sorted(v) for k, v in want.items()}


def test_every_module_has_a_layer():
    unplaced = []
    for name in modules():
        try:
            layer_of(name)
        except KeyError:
            unplaced.append(name)
    assert not unplaced, f"place these modules in tests/test_layers.py's LAYERS and docs/architecture.md: {unplaced}"


def test_every_import_points_down():
    """(a): a module imports its own layer or a lower one, never a higher one."""
    up = [f"{i} ({layer_of(i.source)} imports {layer_of(i.target)})" for i in synth_imports()
          if rank(layer_of(i.target)) < rank(layer_of(i.source))]
    assert not up, "imports that point up:\n" + "\n".join(up)


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for i in synth_imports():
        a, b = package_of(i.source), package_of(i.target)
        if a != b:
            graph[a].add(b)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            strong(v)
    return out


def test_no_cycles_between_packages():
    """(b): the package graph (synth.emit.sm90 counts as synth.emit; a top-level module is its own node) has no
    circle, the imports inside functions included."""
    found = cycles(package_graph())
    if found:
        graph = package_graph()
        why = [f"{a} -> {b}: " + ", ".join(repr(i) for i in synth_imports()
                                              if package_of(i.source) == a and package_of(i.target) == b)
               for comp in found for a in comp for b in sorted(graph[a]) if b in comp]
        pytest.fail("packages that import each other:\n" + "\n".join(why))


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_trusted_imports_nothing_of_synth():
    """(c): synth/trusted/ reads the bytes of a folder on its own; it imports nothing of synth outside itself."""
    bad = [repr(i) for i in imports() if i.source.startswith("synth.trusted")
           and (i.target == "synth" or i.target.startswith("synth.")) and not i.target.startswith("synth.trusted")]
    assert not bad, bad


def _says_why(lines: list[str], imp: Import, function_imports: set[int]) -> bool:
    """A comment on the import's lines, or on the line above it (above a run of imports: above the run's first)."""
    if any("#" in lines[k - 1] for k in range(imp.line, imp.end + 1)):
        return True
    k = imp.line - 1
    while k >= 1 and k in function_imports:
        k -= 1
    return k >= 1 and lines[k - 1].strip().startswith("#")


def test_an_import_inside_a_function_says_why():
    """(d): an import inside a function, of a synth module or a heavy dependency (:data:`HEAVY`), carries a
    comment saying why it is not at the top of the module."""
    by_file = defaultdict(list)
    for i in imports():
        top = i.target.split(".")[0]
        if i.in_function and (i.target in modules() or top in HEAVY) and i.target != i.source:
            by_file[i.source].append(i)
    silent = []
    for name, imps in by_file.items():
        lines = modules()[name].read_text(encoding="utf-8").split("\n")
        at = {k for i in imports() if i.source == name and i.in_function for k in range(i.line, i.end + 1)}
        silent += [repr(i) for i in imps if not _says_why(lines, i, at)]
    assert not silent, "imports inside functions that do not say why:\n" + "\n".join(sorted(set(silent)))


def test_no_module_imports_another_s_private_names():
    """A module uses another's public names only: ``from synth.x import _name`` means the boundary is drawn in the
    wrong place (make the name public where it is defined, or move the code that needs it)."""
    bad = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and any(t in modules() for t in _targets(name, node)):
                bad += [f"{path.relative_to(SYNTH.parent)}:{node.lineno}: {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []

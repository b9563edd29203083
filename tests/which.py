"""Which tests cover a module of synth: the one place that maps a module to its tests, derived from the imports
(so it cannot drift from the code).

``python tests/which.py synth/hopper/kernel_design.py`` (or ``synth.hopper.kernel_design``) prints the test files
that import the module itself, then those that reach it only through a module of synth that imports it (nearest
first); ``-k`` prints them as one ``pytest`` command line. :func:`tests_of` is the same as a function.

An import counts wherever it stands (inside a test function too), with the packages whose ``__init__`` it runs;
``from synth.a import b`` counts for ``synth.a.b`` when that is a module; a test that runs ``python -m synth``
counts for ``synth.__main__``.
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections import deque
from functools import lru_cache

ROOT = pathlib.Path(__file__).resolve().parent.parent
SYNTH = ROOT / "synth"
TESTS = ROOT / "tests"


def module_name(path: pathlib.Path) -> str:
    """``synth.a.b`` of ``synth/a/b.py`` (a package by its ``__init__.py``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def modules() -> frozenset[str]:
    return frozenset(module_name(p) for p in SYNTH.rglob("*.py"))


def _imports(path: pathlib.Path, package: str) -> set[str]:
    """The synth modules ``path`` imports (relative imports resolved against ``package``)."""
    out = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in modules():
                n = n.rpartition(".")[0]
            while n.startswith("synth"):  # a module, and the packages it runs the __init__ of
                out.add(n)
                n = n.rpartition(".")[0]
    if '"-m", "synth"' in path.read_text():  # runs the command: python -m synth ...
        out.add("synth.__main__")
    return out


@lru_cache(maxsize=None)
def importers() -> dict[str, frozenset[str]]:
    """``module -> the synth modules that import it``."""
    rev: dict[str, set[str]] = {m: set() for m in modules()}
    for p in SYNTH.rglob("*.py"):
        name = module_name(p)
        package = name if p.name == "__init__.py" else name.rpartition(".")[0]
        for m in _imports(p, package):
            if m != name:
                rev[m].add(name)
    return {m: frozenset(s) for m, s in rev.items()}


@lru_cache(maxsize=None)
def test_imports() -> dict[str, frozenset[str]]:
    """``test file (relative path) -> the synth modules it imports``."""
    out = {}
    for p in sorted(TESTS.rglob("test_*.py")):
        out[str(p.relative_to(ROOT))] = frozenset(_imports(p, "tests"))
    return out


def tests_of(module: str) -> list[tuple[str, int]]:
    """``(test file, hops)`` for every test file that reaches ``module``: hops 0 imports it, hops ``h`` imports a
    synth module ``h`` imports away from it. Nearest first, then by name. KeyError for a name that is not a
    module of synth."""
    if module not in modules():
        raise KeyError(module)
    dist = {module: 0}
    queue = deque([module])
    while queue:
        m = queue.popleft()
        for up in importers()[m]:
            if up not in dist:
                dist[up] = dist[m] + 1
                queue.append(up)
    found = {}
    for test, mods in test_imports().items():
        hops = [dist[m] for m in mods if m in dist]
        if hops:
            found[test] = min(hops)
    return sorted(found.items(), key=lambda kv: (kv[1], kv[0]))


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "-k"]
    if len(args) != 1:
        print("usage: python tests/which.py [-k] synth/path/to/module.py | synth.dotted.name", file=sys.stderr)
        return 2
    arg = args[0]
    name = module_name((ROOT / arg).resolve()) if arg.endswith(".py") else arg
    try:
        found = tests_of(name)
    except (KeyError, ValueError):
        print(f"error: {arg}: not a module of synth/", file=sys.stderr)
        return 2
    if "-k" in argv:
        print("python -m pytest " + " ".join(t for t, _ in found))
    else:
        for t, hops in found:
            print(f"{t}\t{'imports it' if hops == 0 else f'{hops} import(s) away'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

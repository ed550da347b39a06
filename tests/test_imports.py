"""Every module of the exercises package imports cleanly, and their module-level imports form no cycle.

The graph is read from the source with `ast` (imports inside functions are deliberate late imports and
are left out); the kinds count as one node, since the engine discovers them as a whole.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "exercises"
KINDS = "exercises.kinds"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _node(name: str) -> str:
    """The graph node of a module: every kind module is the one node exercises.kinds."""
    return KINDS if name == KINDS or name.startswith(KINDS + ".") else name


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: at top level, also inside top-level if/try blocks."""
    found, todo = [], list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.append(stmt)
        elif isinstance(stmt, ast.If):
            if not (isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"):
                todo += stmt.body + stmt.orelse
        elif isinstance(stmt, ast.Try):
            todo += stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
    return found


def _from_target(stmt: ast.ImportFrom, package: str) -> str:
    """The module a `from … import` reads, its dots resolved against `package`."""
    if not stmt.level:
        return stmt.module or ""
    base = package.split(".")
    base = base[:len(base) - (stmt.level - 1)]
    return ".".join(base + ([stmt.module] if stmt.module else []))


def _imported(module: str, path: Path) -> set[str]:
    """The modules of the package that `module` imports at import time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for stmt in _top_level_imports(tree):
        if isinstance(stmt, ast.Import):
            out |= {alias.name for alias in stmt.names}
            continue
        target = _from_target(stmt, package)
        for alias in stmt.names:  # `from . import engine` imports the submodule engine
            sub = f"{target}.{alias.name}"
            out.add(sub if sub in MODULES else target)
    return {m for m in out if m in MODULES}


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        node = _node(module)
        edges.setdefault(node, set()).update(_node(m) for m in _imported(module, path) if _node(m) != node)
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_exercises_package_has_no_import_cycle():
    edges = graph()
    assert "exercises.core.steps" in edges and "exercises.solutions.builders" in edges
    found = cycle(edges)
    assert found is None, "import cycle: " + " → ".join(found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_step_registry_sits_below_what_reads_it():
    """steps knows nothing of the pipeline, solutions, rendering or the kinds."""
    edges = graph()
    below = {"exercises.core.steps", "exercises.core.exact"}
    for module in below:
        assert edges[module] <= below, f"{module} imports {edges[module] - below}"
    assert "exercises.core.engine" not in edges["exercises.solutions.walk"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith(KINDS + ".") and not m.endswith("__main__")))
def test_every_module_imports(module):
    importlib.import_module(module)


# The packages of exercises/, lowest first: a module imports (at import time) only from its own package or
# a lower one. The engine finds the kinds when discovery runs (a late import), since the kinds build on it.
LAYERS = ["exercises.i18n", "exercises.core", "exercises.rendering", "exercises.solutions", "exercises.kinds",
          "exercises.teacher", "exercises.worksheets", "exercises.cli"]
FACADE = {"exercises", "exercises.__main__"}  # the public names and `python -m exercises`: above everything


def layer(module: str) -> int:
    for rank, package in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            return rank
    raise AssertionError(f"{module} is in no layer of {LAYERS}")


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} → {b}" for a, targets in edges.items() if a not in FACADE
                  for b in targets if b not in FACADE and layer(b) > layer(a))


def test_every_module_sits_in_a_layer_and_imports_only_downward():
    edges = graph()
    for module in edges:
        if module not in FACADE:
            layer(module)  # the top level of exercises/ holds nothing but the facade
    assert upward_imports(edges) == []


def test_an_upward_import_is_found():
    assert upward_imports({"exercises.core.engine": {"exercises.kinds"}}) == ["exercises.core.engine → exercises.kinds"]
    assert upward_imports({"exercises.kinds": {"exercises.core.engine"}}) == []


def _every_import_target(module: str, path: Path) -> list[tuple[int, str]]:
    """Every package module an import names, at any depth (the late ones inside functions too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.ImportFrom):
            found.append((stmt.lineno, _from_target(stmt, package)))
        elif isinstance(stmt, ast.Import):
            found += [(stmt.lineno, alias.name) for alias in stmt.names]
    return [(line, t) for line, t in found if t == "exercises" or t.startswith("exercises.")]


def test_every_import_names_a_module_that_exists_also_the_late_ones():
    """A late import (inside a function) is not run by importing its module: read them all."""
    readers = dict(MODULES)  # and every module outside the package that reads it
    for folder in ("services", "storage", "ui", "app_pages", "bench", "scripts", "tests"):
        readers.update({_module_name(p): p for p in sorted((ROOT / folder).rglob("*.py"))
                        if "node_modules" not in p.parts})
    readers["app"] = ROOT / "app.py"
    missing = [f"{path.relative_to(ROOT)}:{line} imports {target}"
               for module, path in readers.items() for line, target in _every_import_target(module, path)
               if target not in MODULES]
    assert missing == []

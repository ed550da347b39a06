"""The project's imports form no cycle and run only downward, the late ones (inside functions) included.

The graph is read from the source with `ast`: every import statement at any depth is an arrow, since a
late import ties two modules as surely as one at the top, only later. A late import of a project
module says why on its line or the line above (a real cost it avoids: Streamlit or a heavy optional
library at import time, or the engine, which imports every kind as it loads).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attention_core", "exercises", "storage", "services", "ui", "app_pages")

# Lowest first: a module imports only from its own layer or a lower one. The engine's packages from the
# bottom up, the facade `exercises` (its public names and `python -m exercises`) on top of them; storage
# below the services (and it knows no kinds or messages: test_storage_knows_rows_not_kinds_or_messages).
LAYERS = ["attention_core",
          "exercises.i18n", "exercises.core", "exercises.rendering", "exercises.solutions", "exercises.kinds",
          "exercises.teacher", "exercises.worksheets", "exercises.cli", "exercises",
          "storage", "services", "ui", "app_pages", "app"]

# What storage still reads of the engine: the assignment records it returns (ItemSpec, Rules, AssignmentSpec)
# and the checks that make them. They leave when storage returns plain rows and the services build records.
STORAGE_STILL_READS = {"exercises.teacher.assignments"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}
MODULES["app"] = ROOT / "app.py"


def _from_target(stmt: ast.ImportFrom, package: str) -> str:
    """The module a `from … import` reads, its dots resolved against `package`."""
    if not stmt.level:
        return stmt.module or ""
    base = package.split(".")
    base = base[:len(base) - (stmt.level - 1)]
    return ".".join(base + ([stmt.module] if stmt.module else []))


def _run_on_import(tree: ast.Module) -> set[ast.stmt]:
    """The imports run when the module is imported: at top level, also inside top-level if/try blocks."""
    found, todo = set(), list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.add(stmt)
        elif isinstance(stmt, ast.If):
            todo += stmt.body + stmt.orelse
        elif isinstance(stmt, ast.Try):
            todo += stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
    return found


def imports(module: str, path: Path) -> list[tuple[int, str, bool]]:
    """(line, project module imported, late) for every import statement of `module`, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    on_import = _run_on_import(tree)
    found = []
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Import):
            targets = [alias.name for alias in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            target = _from_target(stmt, package)  # `from . import engine` imports the submodule engine
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in stmt.names]
        else:
            continue
        found += [(stmt.lineno, t, stmt not in on_import) for t in dict.fromkeys(targets) if t in MODULES]
    return found


def graph() -> dict[str, dict[str, int]]:
    """module → {module it imports: the line of the first such import}."""
    edges: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges[module] = {}
        for line, target, _late in imports(module, path):
            if target != module:
                edges[module].setdefault(target, line)
    return edges


def cycle(edges) -> list[str] | None:
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


def layer(module: str) -> int:
    for rank, package in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            return rank
    raise AssertionError(f"{module} is in no layer of {LAYERS}")


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{line}"


def upward_imports(edges) -> list[str]:
    """`file:line imports module` for every import from a lower layer to a higher one."""
    return sorted(f"{_where(a, line)} imports {b}" for a, targets in edges.items()
                  for b, line in targets.items() if layer(b) > layer(a))


def test_the_project_has_no_import_cycle():
    edges = graph()
    assert "exercises.core.steps" in edges and "storage.api" in edges and "ui.progress" in edges
    found = cycle(edges)
    assert found is None, "import cycle: " + " → ".join(found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b": 1}, "b": {}}) is None


def test_every_module_sits_in_a_layer_and_imports_only_downward():
    edges = graph()
    for module in edges:
        layer(module)
    assert upward_imports(edges) == []


def test_an_upward_import_is_found():
    assert upward_imports({"exercises.core.engine": {"exercises.kinds": 7}}) == [
        "exercises/core/engine.py:7 imports exercises.kinds"]
    assert upward_imports({"exercises.kinds": {"exercises.core.engine": 7}}) == []


def test_storage_knows_rows_not_kinds_or_messages():
    """Storage reads and writes rows: which kinds exist and what a message says are the services' to know."""
    edges = graph()
    reads = sorted(f"{_where(a, line)} imports {b}" for a, targets in edges.items() if a.startswith("storage")
                   for b, line in targets.items() if not b.startswith("storage") and b not in STORAGE_STILL_READS)
    assert reads == []


def test_the_step_registry_sits_below_what_reads_it():
    """steps knows nothing of the pipeline, solutions, rendering or the kinds (its exact rules, its
    operation counts, the careful student's writer and the rounding rules sit beside it)."""
    edges = graph()
    below = {"exercises.core.steps", "exercises.core.exact", "exercises.core.operations", "exercises.core.reach",
             "exercises.core.numbers"}
    for module in below:
        engine = {m for m in edges[module] if m.startswith("exercises")}  # attention_core lies below it all
        assert engine <= below, f"{module} imports {engine - below}"
    walk = "exercises.solutions.walk"  # the kinds import solutions: the engine, which imports them, only late
    assert all(late for _, target, late in imports(walk, MODULES[walk]) if target == "exercises.core.engine")


def _says_why(lines: list[str], line: int) -> bool:
    """A comment on the import's line, or a comment line right above it."""
    return "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")


def test_a_late_import_of_the_project_says_why():
    """Imports belong at the top; one inside a function is kept only for a cost it avoids, said beside it."""
    silent = []
    for module, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        silent += sorted({_where(module, line) for line, _target, late in imports(module, path)
                          if late and not _says_why(lines, line)})
    assert silent == []


def test_a_silent_late_import_is_found():
    lines = ["def f():", "    from . import engine", "    # the engine imports every kind", "    from . import x"]
    assert [_says_why(lines, n) for n in (2, 4)] == [False, True]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.partition(".")[0] in ("exercises", "storage", "services")
                                          and not m.endswith("__main__") and not m.startswith("exercises.kinds.")))
def test_every_module_imports(module):
    importlib.import_module(module)


def test_every_import_names_a_module_that_exists_also_the_late_ones():
    """A late import (inside a function) is not run by importing its module: read them all."""
    readers = dict(MODULES)  # and every module outside the packages that reads them
    for folder in ("bench", "scripts", "tests", "deploy"):
        readers.update({_module_name(p): p for p in sorted((ROOT / folder).rglob("*.py"))
                        if "node_modules" not in p.parts})
    missing = []
    for module, path in readers.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for stmt in ast.walk(tree):
            names = ([(stmt.lineno, _from_target(stmt, package))] if isinstance(stmt, ast.ImportFrom)
                     else [(stmt.lineno, a.name) for a in stmt.names] if isinstance(stmt, ast.Import) else [])
            missing += [f"{path.relative_to(ROOT)}:{line} imports {target}" for line, target in names
                        if target.partition(".")[0] in PACKAGES and target not in MODULES]
    assert missing == []

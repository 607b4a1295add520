"""The package's layers (issue 18): every module imports only its own folder and the layers below it,
and no import circle exists anywhere in hwsweep/. Imports inside functions count: a lazy import is
still a dependency, and circles made of them broke before."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "hwsweep"
# What each folder may import besides itself (docs/layout.md says the same in words).
ALLOWED = {
    "contracts": set(),
    "models": {"contracts"},
    "plan": {"contracts", "models"},
    "run": {"contracts", "models"},
    "analysis": {"contracts"},
    "report": {"contracts", "analysis"},
    "cluster": {"contracts", "plan"},
}
TOP = {"cli", "runtime"}  # the command line and the public name of the runtime API sit above every layer


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """The hwsweep modules `path` imports (a `from package import name` counts as the module package.name
    where that is a module), at any depth of the file."""
    known = {module_name(p, root) for p in root.rglob("*.py")}
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    return {module_name(p, root): imports(p, root) for p in root.rglob("*.py")}


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None (depth-first search, three colours)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (circle := visit(nxt)):
                return circle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, deps in sorted(edges.items()):
        here = layer(module)
        if here in TOP or here == "":
            continue
        assert here in ALLOWED, f"{module}: a folder the layer rules do not know; add it to ALLOWED and docs/layout.md"
        for dep in sorted(deps):
            there = layer(dep)
            if there != here and there not in ALLOWED[here] and dep != "hwsweep":
                bad.append(f"{module} imports {dep} ({here} may import {sorted(ALLOWED[here]) or 'nothing else'})")
    return bad


def test_no_import_circle():
    circle = find_circle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_every_module_imports_only_downward():
    assert upward_imports(graph()) == []


def test_no_module_left_at_the_top():
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in TOP | {"__init__"})
    assert loose == [], f"modules outside the layer folders: {loose}"


def test_the_checks_find_what_they_look_for(tmp_path):
    """A planted circle and a planted upward import are caught (so the checks above can fail)."""
    root = tmp_path / "hwsweep"
    for folder in ("contracts", "run", "analysis"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "contracts" / "a.py").write_text("from hwsweep.contracts import b\n")
    (root / "contracts" / "b.py").write_text("def f():\n    import hwsweep.contracts.a\n")
    (root / "analysis" / "c.py").write_text("from hwsweep.run.d import x\n")
    (root / "run" / "d.py").write_text("from .e import y\n")
    (root / "run" / "e.py").write_text("x = 1\n")
    edges = graph(root)
    assert edges["hwsweep.run.d"] == {"hwsweep.run.e"}  # relative imports resolve
    circle = find_circle(edges)
    assert circle is not None and circle[0] == circle[-1] and set(circle) == {"hwsweep.contracts.a", "hwsweep.contracts.b"}
    assert upward_imports(edges) == [
        "hwsweep.analysis.c imports hwsweep.run.d (analysis may import ['contracts'])"]


@pytest.mark.parametrize("name", ["hwsweep.runtime", "hwsweep.cli"])
def test_public_names_import(name):
    import importlib

    module = importlib.import_module(name)
    if name == "hwsweep.runtime":
        from hwsweep.run import runtime

        assert module is runtime and callable(module.init)  # one module under two names, not a copy
    else:
        assert callable(module.main)

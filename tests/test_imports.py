"""verify is a package without an import cycle: each module imports alone, and no chain of imports (at
module level, inside functions or for type checking alike) leads from one of its modules back to itself;
nor from any module of the package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "virtxml_cpu"
VERIFY = sorted(PACKAGE.glob("verify/*.py"))


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, every import statement counted (lazy ones and those under
    TYPE_CHECKING too: a cycle hidden in a function is still a cycle)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module(path)
        is_pkg = path.name == "__init__.py"
        here = name if is_pkg else name.rsplit(".", 1)[0]
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                # `from pkg import sub` imports the module pkg.sub; `from mod import name`, the module mod
                targets = [f"{base}.{a.name}" if _exists(f"{base}.{a.name}") else base for a in node.names]
            else:
                continue
            edges.update(t for t in targets if t.split(".")[0] == "virtxml_cpu" and _exists(t) and t != name)
    return graph


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A chain of imports from `start` back to it, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_the_graph_sees_imports_of_every_kind():
    """The checker itself: it finds verify's lazy import of its runner and the records every module uses."""
    graph = import_graph()
    assert "virtxml_cpu.verify.runner" in graph["virtxml_cpu.verify.run"]
    assert "virtxml_cpu.verify.types" in graph["virtxml_cpu.verify.record"]
    assert "virtxml_cpu.fs.files" in graph["virtxml_cpu.verify.record"]
    assert cycle_through({"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a") == ["a", "b", "c", "a"]


@pytest.mark.parametrize("path", VERIFY, ids=lambda p: p.name)
def test_no_module_of_verify_is_on_an_import_cycle(path):
    name = _module(path)
    assert cycle_through(import_graph(), name) is None, " -> ".join(cycle_through(import_graph(), name))


def test_no_module_of_the_package_is_on_an_import_cycle():
    graph = import_graph()
    cycles = [" -> ".join(c) for m in sorted(graph) if (c := cycle_through(graph, m))]
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("path", VERIFY, ids=lambda p: p.name)
def test_each_module_of_verify_imports_alone_in_a_fresh_interpreter(path):
    r = subprocess.run([sys.executable, "-c", f"import {_module(path)}"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and not r.stderr, r.stderr

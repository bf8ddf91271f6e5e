"""The package's imports: they only go down its layers (LAYERS), and no chain of them (at module level,
inside functions or for type checking alike) leads from a module back to itself; each module of verify
imports alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "virtxml_cpu"
VERIFY = sorted(PACKAGE.glob("verify/*.py"))


def _module(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str, root: Path = ROOT) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, every import statement counted (lazy ones and those under
    TYPE_CHECKING too: a cycle hidden in a function is still a cycle)."""
    root = package.parent
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        name = _module(path, root)
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
                targets = [f"{base}.{a.name}" if _exists(f"{base}.{a.name}", root) else base for a in node.names]
            else:
                continue
            edges.update(t for t in targets if t.split(".")[0] == package.name and _exists(t, root) and t != name)
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
    assert "virtxml_cpu.verify.launch" in graph["virtxml_cpu.verify.run"]
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


# The package's layers, bottom first. A module imports from its own layer and the ones below it, never from
# one above: the tables know nothing of who reads them, the pure core nothing of hosts or shells, and each
# shell (verify, render, hook, live, the command) builds on what is below it.
LAYERS = (
    ("virtxml_cpu", "virtxml_cpu.errors", "virtxml_cpu.constants"),  # the version, the exit codes every layer raises, the fixed facts
    ("virtxml_cpu.tables",),  # QEMU's and libvirt's facts as data, each row cited
    ("virtxml_cpu.xml",),  # domain XML as text: safe parsing, byte-preserving insertion
    ("virtxml_cpu.fs",),  # files root can trust, the one atomic writer, the user's files
    ("virtxml_cpu.core",),  # the facts, the pure resolution and decision, the pipeline and its memo
    ("virtxml_cpu.host",),  # asking the host: the sources, the local QEMU, libvirt's caches and connection
    ("virtxml_cpu.verify",),  # the rules against the host's QEMU
    ("virtxml_cpu.live.records",),  # the live verbs' results, beside them; render reads them, the hook's queue keeps them
    ("virtxml_cpu.render",),  # records -> the bytes a person or a program reads
    ("virtxml_cpu.hook",),  # the libvirt qemu hook: front, entry, evaluation, digest, queue, install
    ("virtxml_cpu.live",),  # apply, audit and watch over libvirt connections
    ("virtxml_cpu.cli", "virtxml_cpu.__main__"),  # the command
)


def layer_of(module: str) -> int | None:
    """The rank of the layer a module is in (a folder's modules are in its layer), or None."""
    for rank, members in enumerate(LAYERS):
        for m in members:
            if module == m or (m != "virtxml_cpu" and module.startswith(m + ".")):
                return rank
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes up the layers, as `importer -> imported`."""
    return [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
            for a in sorted(graph) for b in sorted(graph[a]) if layer_of(b) > layer_of(a)]


def test_every_module_is_in_a_layer():
    assert not [m for m in import_graph() if layer_of(m) is None], "add the module's folder to LAYERS"


def test_imports_only_go_down_the_layers():
    """Module level, lazy (inside functions) and TYPE_CHECKING imports alike."""
    assert not upward_imports(import_graph()), "\n".join(upward_imports(import_graph()))


def test_the_direction_check_sees_an_upward_import_of_any_kind(tmp_path):
    """The checker itself, on a package of its own: a lazy import of the hook from the core and a typing-only
    import of the host from the tables go up; the core importing the tables, and a layer itself, do not."""
    pkg = tmp_path / "virtxml_cpu"
    for layer in ("tables", "core", "host", "hook"):
        (pkg / layer).mkdir(parents=True)
        (pkg / layer / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "hook" / "spool.py").write_text("")
    (pkg / "host" / "connection.py").write_text("")
    (pkg / "tables" / "properties.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..host.connection import DEFAULT_URI\n")
    (pkg / "tables" / "qemu.py").write_text("from . import properties\n")
    (pkg / "core" / "decision.py").write_text(
        "from ..tables import qemu\nfrom . import memo\ndef f():\n    from ..hook import spool\n")
    (pkg / "core" / "memo.py").write_text("")
    assert upward_imports(import_graph(pkg)) == [
        "virtxml_cpu.core.decision (virtxml_cpu.core) -> virtxml_cpu.hook.spool (virtxml_cpu.hook)",
        "virtxml_cpu.tables.properties (virtxml_cpu.tables) -> virtxml_cpu.host.connection (virtxml_cpu.host)"]
    (pkg / "core" / "decision.py").write_text("from ..tables import qemu\nfrom . import memo\n")
    (pkg / "tables" / "properties.py").write_text("")
    assert upward_imports(import_graph(pkg)) == []

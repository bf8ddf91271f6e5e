"""The tests' own layout: the tests of a module are found from its name (tests/unit/LAYER/test_MODULE.py), every
test file is in one of the suite's folders, fixtures come from conftest.py and never from another test module,
and the order is conftest's, from the markers, whatever order files and tests are named in."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile

import pytest

from tests.support import ROOT, TESTS

PACKAGE = ROOT / "virtxml_cpu"
FOLDERS = ("unit", "project", "lab")  # where test files are; tests/support/ and tests/fixtures/ hold none
SUITE_WIDE = {"test_golden.py", "test_exercised.py"}  # tests/unit/ files about the whole package's output


def every_test_file() -> list:
    return sorted(TESTS.rglob("test_*.py"))


def _names(layer) -> set[str]:
    """The modules and subpackages of a package folder."""
    return {p.stem for p in layer.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in layer.iterdir() if (p / "__init__.py").exists()}


def test_every_test_file_is_in_a_folder_of_the_suite():
    stray = [str(p.relative_to(ROOT)) for p in every_test_file() if p.relative_to(TESTS).parts[0] not in FOLDERS]
    assert stray == [], "test files outside tests/unit/, tests/project/ and tests/lab/"


def test_a_unit_test_file_is_named_after_a_module_of_its_layer():
    """tests/unit/LAYER/test_MODULE.py or test_MODULE_ASPECT.py, MODULE in virtxml_cpu/LAYER/ (tests/unit/
    itself: the package's top)."""
    misnamed = []
    for path in every_test_file():
        rel = path.relative_to(TESTS / "unit") if (TESTS / "unit") in path.parents else None
        if rel is None or rel.name in SUITE_WIDE:
            continue
        layer = PACKAGE.joinpath(*rel.parts[:-1])
        name = rel.stem[len("test_"):]
        modules = _names(layer) if layer.is_dir() else set()
        if not any(name == m or name.startswith(m + "_") for m in modules):
            misnamed.append(str(path.relative_to(ROOT)))
    assert misnamed == [], "unit test files that name no module of their layer"


def _fixtures(module: str) -> set[str]:
    """The fixtures a test module defines (functions under @pytest.fixture)."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    found = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.dump(d) for d in node.decorator_list):
            found.add(node.name)
    return found


def test_no_test_module_imports_a_fixture_from_another_or_anything_from_conftest():
    """Fixtures are shared through conftest.py, never by importing them (pytest then finds them twice, and a
    module's fixtures depend on which modules import them); a lab test may take its unit twin's cases."""
    borrowed = []
    for path in every_test_file():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                if any(part.startswith("test_") or part == "conftest" for n in names for part in n.split(".")):
                    borrowed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                last = module.rsplit(".", 1)[-1]
                if node.level or last == "conftest":
                    borrowed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                elif last.startswith("test_") and {a.name for a in node.names} & _fixtures(module):
                    borrowed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert borrowed == [], "test modules importing a fixture from another test module, or from conftest"


def _collected(*args: str) -> list[str]:
    """The test ids pytest collects from `args`, in order ([] when it collects none: exit 5)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 5), r.stdout[-2000:] + r.stderr[-2000:]
    return [line for line in r.stdout.splitlines() if "::" in line]


def test_a_test_marked_last_runs_after_those_named_after_it():
    ids = _collected("tests/unit/test_exercised.py", "tests/unit/test_errors.py")
    last = [i for i in ids if i.endswith("::test_every_rule_row_and_decision_rule_was_exercised")]
    assert len(last) == 1 and ids[-1] == last[0] and any("test_errors.py" in i for i in ids), ids


def test_an_in_order_module_runs_as_written_whatever_order_it_is_named_in():
    written = _collected("tests/lab/test_cockpit.py")
    if not written:
        pytest.skip("SKIPPED LOUDLY: tests/lab/test_cockpit.py collects nothing here (no root or /dev/kvm): "
                    "nothing to order")
    assert len(written) > 2
    assert _collected(*reversed(written)) == written


def test_make_test_stops_at_once_in_a_checkout_others_can_change():
    """tools/trusted-checkout.sh: /usr is root's alone; a directory under /tmp is not (/tmp is writable by
    all, sticky or not): one line, exit 2."""
    script = ROOT / "tools" / "trusted-checkout.sh"
    ok = subprocess.run(["sh", str(script), "/usr"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    under_tmp = tempfile.mkdtemp(dir="/tmp")
    try:
        refused = subprocess.run(["sh", str(script), under_tmp], capture_output=True, text=True)
    finally:
        os.rmdir(under_tmp)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1 and "virtxml-cpu refuses under /tmp (not" in refused.stderr, refused.stderr

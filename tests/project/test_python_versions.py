"""Python 3.9 and newer, as pyproject.toml and the Debian package say: nothing in the package, the hook,
the tests, the benchmarks or the build tools needs a newer Python. Checked three ways: vermin (syntax,
standard-library modules, members and keyword arguments by the release that added them), this Python's
parser with 3.9's grammar, and the oldest Python here (the Debian 11 lab's, once made) compiling every
file and importing every module of the package."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.lab.harness import BULLSEYE_LAB

OLDEST = (3, 9)
TREES = ("virtxml_cpu", "hooks", "tests", "bench", "tools")
# Where an interpreter of the oldest releases may be: on PATH, or the Debian 11 lab's (tests/lab).
OLD_PYTHONS = ("python3.9", "python3.10", str(BULLSEYE_LAB.root / "usr/bin/python3.9"))


def sources() -> list[Path]:
    return sorted(p for tree in TREES for p in (ROOT / tree).rglob("*.py") if "__pycache__" not in p.parts)


def test_requires_python_and_the_package_dependency_say_3_9():
    from virtxml_cpu.core import toml_read

    project = toml_read.toml_reader().loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=%d.%d" % OLDEST
    control = (ROOT / "debian" / "control").read_text()
    depends = re.search(r"^Package: virtxml-cpu\n(?:.+\n)*?Depends: (.*(?:\n .*)*)", control, re.M).group(1)
    assert "python3 (>= %d.%d)" % OLDEST in depends
    assert "python3 (>= 3.11) | python3-tomli | python3-toml" in depends  # a TOML reader below 3.11


def test_vermin_finds_nothing_newer_than_3_9():
    """--eval-annotations: an annotation evaluated at run time (no `from __future__ import annotations`)
    counts as code; `# novermin` marks an import guarded by its fallback (toml_read.toml_reader)."""
    vermin = Path(sys.executable).parent / "vermin"
    if not vermin.exists():
        pytest.fail(f"vermin is not installed beside {sys.executable}: pip install -e '.[test]'")
    r = subprocess.run([str(vermin), "-t=%d.%d-" % OLDEST, "--eval-annotations", "--violations", "--no-tips",
                        *TREES], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "Minimum required versions: %d.%d" % OLDEST in r.stdout, r.stdout + r.stderr


def test_every_file_parses_with_the_grammar_of_3_9():
    for path in sources():
        ast.parse(path.read_bytes(), str(path), feature_version=OLDEST)


def oldest_python() -> tuple[str, tuple[int, int]] | None:
    found = []
    for name in OLD_PYTHONS:
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "-I", "-c", "import sys; print(*sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"}).stdout
        except OSError:
            continue  # not runnable here (a shim without a version, another architecture)
        if re.fullmatch(r"3 \d+\n", out):
            found.append((tuple(int(x) for x in out.split()), path))
    return min(((path, version) for version, path in found), key=lambda pv: pv[1], default=None)


def test_the_oldest_python_here_compiles_every_file_and_imports_every_module():
    old = oldest_python()
    if old is None:
        pytest.skip("SKIPPED LOUDLY: no Python 3.9 or 3.10 here (make test as root makes the Debian 11 lab's); "
                    "vermin and 3.9's grammar still checked")
    python, version = old
    assert version >= OLDEST, (python, version)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", "LC_ALL": "C.UTF-8"}
    r = subprocess.run([python, "-c", "import sys\nfor f in sys.argv[1:]: compile(open(f, 'rb').read(), f, 'exec')",
                        *map(str, sources())], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, (python, r.stderr)
    has_lxml = subprocess.run([python, "-c", "import lxml.etree"], capture_output=True, env=env, cwd="/")
    if has_lxml.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: {python} compiled every file but has no lxml to import the package with")
    r = subprocess.run([python, "-c", "import importlib, pkgutil, virtxml_cpu\n"
                        "names = [m.name for m in pkgutil.walk_packages(virtxml_cpu.__path__, 'virtxml_cpu.')\n"
                        "         if not m.name.endswith('__main__')]\n"
                        "for n in names: importlib.import_module(n)\n"
                        "print(len(names))"], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    modules = len([p for p in (ROOT / "virtxml_cpu").rglob("*.py") if p.name not in ("__init__.py", "__main__.py")])
    assert r.returncode == 0 and int(r.stdout) >= modules, (python, r.stdout, r.stderr)
    r = subprocess.run([python, "-m", "virtxml_cpu", "--version"], capture_output=True, text=True, timeout=60,
                       env=env, cwd="/")
    assert r.returncode == 0 and r.stdout.startswith("virtxml-cpu "), (python, r.stdout, r.stderr)

"""Every import the root-run hook makes from its own directories, tried as another local user would: a
module of theirs under a name nobody lists (lxml's optional `rnc2rng`, copy.py's `org`, any name the
interpreter looks up there), root's link to their file, a package directory their group may write, lxml's
`__init__.py` made theirs after install. `hook install` refuses each with one line; the installed front never
runs it (the planted code would leave a marker) and fails open with one line. Here in a root-owned layout
with the venv's interpreter; the Debian package's layout is tests/lab/test_deb_imports.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from virtxml_cpu.hook import install

from tests.support import FIXTURES, ROOT
from tests.support.users import LXML_DIR, NOBODY, cli, theirs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="SKIPPED LOUDLY: needs root (files of another uid)")
UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
XML = (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(
    b"<name>scratch</name>", f"<name>scratch</name><uuid>{UUID}</uuid>".encode())
ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook
MODES = ("audit", "enforce", "queue")
CASES = ("rnc2rng", "org", "backports_abc", "link", "group-writable", "bytecode", "lxml after install")


class Layout:
    """A root-owned install under `shared`: the package and lxml in one directory (`together`, as a venv's
    site-packages) or apart (the package directory and LIB_DIRS, as an editable install)."""

    def __init__(self, shared: Path, how: str):
        self.shared, self.marker = shared, shared / "ran"
        self.package = shared / ("site" if how == "together" else "pkg")
        self.lib = self.package if how == "together" else shared / "lib"
        shutil.copytree(ROOT / "virtxml_cpu", self.package / "virtxml_cpu",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(Path(LXML_DIR) / "lxml", self.lib / "lxml", ignore=shutil.ignore_patterns("__pycache__"))
        self.libs = () if how == "together" else (str(self.lib),)
        self.hooks = shared / "hooks"

    def config(self, mode: str) -> str:
        path = self.shared / f"{mode}.toml"
        path.write_text(f'[hook]\nmode = "{mode}"\nspool = "{self.shared / "spool"}"\nsyslog_socket = "/nonexistent"\n'
                        'libvirt_config_dir = ""\n')  # the name is no libvirt domain's: no transient check
        return str(path)

    def code(self) -> str:
        return f"open({str(self.marker)!r}, 'a').write(__name__ + '\\n')\n"

    def install(self, mode: str = "queue") -> subprocess.CompletedProcess:
        return cli("hook", "install", "--hooks-dir", str(self.hooks), "--legacy", "--mode", mode, "--config",
                   self.config(mode), "--digest-dir", "", python=sys.executable, cwd=self.package,
                   pythonpath=":".join(dict.fromkeys((str(self.package), str(self.lib)))))

    def front(self, mode: str = "queue", python: str = sys.executable) -> Path:
        """The script as `hook install` renders it for this layout (what it would have installed)."""
        path = self.shared / f"front-{mode}"
        path.write_text(install.render(install.template(), python, str(self.package), mode, self.config(mode),
                                       self.libs, ""))
        path.chmod(0o755)
        return path

    def run(self, script: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(script), "scratch", "prepare", "begin", "-"], input=XML, capture_output=True,
                              env=ENV, timeout=60)


@pytest.fixture(params=["together", "apart"])
def layout(shared, request):
    return Layout(shared, request.param)


def plant(lay: Layout, case: str) -> Path:
    """Plant `case` in the lib directory; the path `hook install` and the front must name."""
    if case in ("rnc2rng", "backports_abc"):
        planted = lay.lib / f"{case}.py"
        planted.write_text(lay.code())
        theirs(planted)
    elif case == "org":  # a namespace package (root's directory) whose portion below is theirs
        (lay.lib / "org").mkdir()
        planted = lay.lib / "org" / "python"
        planted.mkdir()
        (planted / "__init__.py").write_text(lay.code())
        (planted / "core.py").write_text(lay.code() + "PyStringMap = dict\n")
        theirs(planted, planted / "__init__.py", planted / "core.py")
    elif case == "link":  # root's link, to their file (named to break a log line)
        evil = lay.shared / "theirs" / "evil\u2028\x1b[2J\n.py"
        evil.parent.mkdir()
        evil.write_text(lay.code())
        theirs(evil.parent, evil)
        planted = lay.lib / "rnc2rng.py"
        planted.symlink_to(evil)
    elif case == "group-writable":  # root's package, in a directory their group may write
        planted = lay.lib / "rnc2rng"
        planted.mkdir()
        (planted / "__init__.py").write_text(lay.code())
        planted.chmod(0o775)
    elif case == "bytecode":  # root's source; their cached bytecode, which the loader reads instead
        import importlib.util
        import py_compile

        source = lay.lib / "rnc2rng.py"
        source.write_text(lay.code())
        planted = Path(py_compile.compile(str(source), doraise=True))
        assert planted == Path(importlib.util.cache_from_source(str(source)))
        st = source.stat()
        source.write_text("X = 1".ljust(st.st_size - 1) + "\n")  # the same size and mtime: the bytecode is used
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
        theirs(planted)
    else:
        planted = lay.lib / "lxml" / "__init__.py"
        planted.write_text(planted.read_text() + lay.code())
        theirs(planted)
    return planted


def assert_refused_once(r: subprocess.CompletedProcess, planted: Path, lay: Layout) -> None:
    lines = r.stderr.decode(errors="replace").splitlines()
    assert not lay.marker.exists(), f"the planted module ran as root: {lay.marker.read_text()!r} {lines}"
    assert r.returncode == 0 and len(lines) == 1, (r.returncode, lines)
    assert "guest start not checked" in lines[0] and str(planted) in lines[0], lines


@pytest.mark.parametrize("case", CASES)
def test_install_and_the_front_refuse_what_another_user_planted_where_the_hook_imports(layout, case):
    lay = layout
    if case == "lxml after install":
        r = lay.install()
        assert r.returncode == 0, r.stderr
        planted = plant(lay, case)  # theirs now, after install checked it
        script = lay.hooks / "qemu"
        status = cli("hook", "status", "--hooks-dir", str(lay.hooks), pythonpath=f"{ROOT}:{LXML_DIR}")
        assert status.returncode == 1 and f"{planted} is owned by uid {NOBODY}" in status.stdout, status.stdout
    else:
        planted = plant(lay, case)
        r = lay.install()
        assert r.returncode == 2 and not lay.hooks.exists() and len(r.stderr.splitlines()) == 1, (r.returncode, r.stderr)
        assert r.stderr.startswith("virtxml-cpu: not installing a hook") and str(planted) in r.stderr, r.stderr
        script = lay.front()
    if lay.marker.exists():  # the installing CLI's own lxml looked it up: that process is the admin's, not the hook's
        lay.marker.unlink()
    r = lay.run(script)
    if case == "backports_abc" and b"not importing" not in r.stderr:
        assert_decided(r, lay)  # only Debian's lxml 4.9 asks for it (tests/lab/test_deb_imports.py)
        return
    assert_refused_once(r, planted, lay)


def assert_decided(r: subprocess.CompletedProcess, lay: Layout) -> None:
    assert not lay.marker.exists() and b"decision=inject" in r.stderr, r.stderr


def test_the_front_and_install_accept_a_clean_layout_and_agree(layout):
    """Without anything planted both accept, and the front decides; install's walk and the front's finder
    apply one rule (import_guard) to the same directories."""
    r = layout.install()
    assert r.returncode == 0, r.stderr
    text = (layout.hooks / "qemu").read_text()
    assert install.installed_settings(text)["PACKAGE_DIR"] == str(layout.package), text
    assert install.installed_settings(text)["LIB_DIRS"] == "\n".join(layout.libs)
    assert_decided(layout.run(layout.hooks / "qemu"), layout)
    from virtxml_cpu.hook.import_guard import Checker

    assert Checker((str(layout.package), *layout.libs)).tree_problem() is None


def looked_up(lay: Layout, mode: str) -> dict[str, Path]:
    """The names the hook's interpreter looks up in the package and lib directories over a cold start in
    `mode`, each with the first of them that lacks it (a module planted there is the one found): the import
    system's own trace (-vv names every path it tries)."""
    wrap = lay.shared / "python-vv"
    wrap.write_text(f"#!/bin/sh\nexec {sys.executable} -vv \"$@\"\n")
    wrap.chmod(0o755)
    r = lay.run(lay.front(mode, str(wrap)))
    assert b"decision=inject" in r.stderr or b"refusing to start" in r.stderr, r.stderr[-2000:]
    names: dict[str, Path] = {}
    for root in dict.fromkeys((str(lay.package), *lay.libs)):
        for rel in re.findall(rf"^# trying {re.escape(root)}/([^/\n]+)$", r.stderr.decode(errors="replace"), re.M):
            name = rel.split(".")[0]
            if name and not any(p.name.split(".")[0] == name for p in Path(root).iterdir()):
                names.setdefault(name, Path(root))
    return names


def test_every_name_the_hook_looks_up_in_its_directories_is_checked_before_it_loads(layout):
    """Found by the import system, not from a list: each name a cold start looks up in its directories in
    each mode, planted as another user's module there, is refused by install and never run by the front."""
    lay = layout
    seen = {mode: looked_up(lay, mode) for mode in MODES}
    assert "rnc2rng" in seen["audit"], seen  # lxml's, at every cold start
    tried = set()
    for mode, names in seen.items():
        for name in sorted(set(names) - tried):
            tried.add(name)
            planted = names[name] / f"{name}.py"
            planted.write_text(lay.code())
            theirs(planted)
            r = lay.install(mode)
            if name == "lxml":  # the installing CLI imports lxml itself: the planted one breaks it first
                assert r.returncode != 0 and not lay.hooks.exists(), (name, r.stderr)
            else:
                assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(planted) in r.stderr, (name, r.stderr)
            if lay.marker.exists():  # the installing CLI's own imports, not the hook's
                lay.marker.unlink()
            assert_refused_once(lay.run(lay.front(mode)), planted, lay)
            planted.unlink()


@pytest.mark.parametrize("via", ["root's link in a group-writable directory", "a link of another owner"])
def test_a_link_in_an_import_directory_is_checked_the_way_it_resolves(tmp_path, via):
    """Root's link in a directory the hook imports from, reached through another link: one in a directory
    its group may write (they re-point it at any tree of root's), or one of another owner. The guard and
    install looked only at where the link ended up (its realpath); they check each name on the way, as
    fs/trusted.check_tree does for the package and lxml trees."""
    from virtxml_cpu.hook import import_guard

    top = tmp_path / "top"
    for d in (top, top / "lib", top / "other", top / "open"):
        d.mkdir()
        d.chmod(0o755)
    (top / "other" / "foo.py").write_text("")
    (top / "other" / "foo.py").chmod(0o644)
    if via.startswith("root's"):
        (top / "open").chmod(0o775)
        (top / "open" / "via").symlink_to(top / "other")
    else:
        (top / "open" / "via").symlink_to(top / "other")
        theirs(top / "open" / "via")
    (top / "lib" / "foo.py").symlink_to(top / "open" / "via" / "foo.py")
    assert import_guard.entry_problem(str(top / "lib" / "foo.py"))
    assert import_guard.Checker([str(top / "lib")]).tree_problem()
    (top / "lib" / "foo.py").unlink()
    (top / "lib" / "foo.py").symlink_to(top / "other" / "foo.py")  # root's, straight to root's file: fine
    assert import_guard.Checker([str(top / "lib")]).tree_problem() is None

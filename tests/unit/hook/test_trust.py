"""The shell front's own trust check (the Python inside hook/qemu-hook, `untrusted`: run at every guest start
before anything is imported) and fs/trusted.py's (what `hook install` and `hook status` apply) say the same
of the same trees: owners, modes, links, group- or other-writable directories, sticky ones. Built in
temporary directories and handed to another owner with chown, so only root runs it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from virtxml_cpu.fs.trusted import check_dir, check_tree
from virtxml_cpu.hook import install, trust

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="HOOK TRUST AGREEMENT SKIPPED: needs root (chown to "
                                                         "another owner, root-owned trees)")


def front_untrusted():
    """`untrusted(path, below)` as the installed front defines it (with `resolved`): from the template's embedded
    Python (shell quoting undone) and run here."""
    code = install.template().split("exec \"$PYTHON\" -I -S -c '", 1)[1].replace("'\"'\"'", "'")
    start, end = code.index("def resolved("), code.index("\nif not package:")
    namespace = {"os": os}
    exec(compile(code[start:end], "qemu-hook", "exec"), namespace)  # noqa: S102 - our own template
    return namespace["untrusted"]


def tree(top: Path) -> Path:
    """top/pkg with a module and a subpackage, top/other with a module; root's, 0755 and 0644."""
    for d in (top, top / "pkg", top / "pkg" / "sub", top / "other"):
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
    for f in (top / "pkg" / "mod.py", top / "pkg" / "sub" / "x.py", top / "other" / "y.py"):
        f.write_text("")
        f.chmod(0o644)
    return top / "pkg"


def chmod(rel: str, mode: int):
    return lambda top: (top / rel).chmod(mode)


def chown(rel: str):
    return lambda top: os.chown(top / rel, NOBODY, NOBODY, follow_symlinks=False)


def link(rel: str, to: str, theirs: bool = False):
    def make(top: Path) -> None:
        (top / rel).symlink_to(top / to)
        if theirs:
            os.chown(top / rel, NOBODY, NOBODY, follow_symlinks=False)
    return make


def steps(*changes):
    return lambda top: [change(top) for change in changes]


# (case, the change to a clean tree, whether both must call the package untrusted)
CASES = [
    ("clean", steps(), False),
    ("a module of another owner", chown("pkg/mod.py"), True),
    ("a group-writable module", chmod("pkg/mod.py", 0o664), True),
    ("an other-writable module", chmod("pkg/mod.py", 0o646), True),
    ("a group-writable directory inside", chmod("pkg/sub", 0o775), True),
    ("a sticky world-writable directory inside", chmod("pkg/sub", 0o1777), True),
    ("a directory of another owner inside", chown("pkg/sub"), True),
    ("the package directory group-writable", chmod("pkg", 0o775), True),
    ("the package directory sticky and world-writable", chmod("pkg", 0o1777), True),
    ("the package directory of another owner", chown("pkg"), True),
    ("a directory above of another owner", chown("."), True),
    ("a directory above group-writable", chmod(".", 0o775), True),
    ("a directory above root's, sticky and world-writable (as /tmp)", chmod(".", 0o1777), False),
    ("a directory above sticky and world-writable, of another owner", steps(chmod(".", 0o1777), chown(".")), True),
    ("root's link inside to root's tree", link("pkg/ln", "other"), False),
    ("root's link inside to root's module", link("pkg/ln.py", "other/y.py"), False),
    ("a link inside of another owner", link("pkg/ln", "other", theirs=True), True),
    ("root's link inside to a tree with an other-writable module",
     steps(chmod("other/y.py", 0o666), link("pkg/ln", "other")), True),
    ("root's link inside to a module of another owner", steps(chown("other/y.py"), link("pkg/ln.py", "other/y.py")),
     True),
    ("root's link inside to a tree below a group-writable directory",
     steps(chmod(".", 0o775), link("pkg/ln", "other")), True),
    ("root's link inside through root's link in a group-writable directory (theirs to re-point)",
     steps(lambda top: (top / "open").mkdir(mode=0o775), chmod("open", 0o775), link("open/via", "other"),
           lambda top: (top / "pkg" / "ln").symlink_to(top / "open" / "via" / "y.py")), True),
    ("root's link inside through a link of another owner", steps(link("via", "other", theirs=True),
                                                                 lambda top: (top / "pkg" / "ln").symlink_to(
                                                                     top / "via")), True),
    ("root's link inside that leads nowhere", lambda top: (top / "pkg" / "ln.py").symlink_to(top / "gone.py"), True),
]


@pytest.mark.parametrize("case, change, bad", CASES, ids=[c[0] for c in CASES])
def test_the_fronts_check_and_fs_trusted_agree_on_a_package_tree(tmp_path, case, change, bad):
    untrusted = front_untrusted()
    pkg = tree(tmp_path / "top")
    change(tmp_path / "top")
    front, ours = untrusted(str(pkg), True), check_tree(str(pkg), (0,))
    assert bool(front) == bool(ours) == bad, (case, front, ours)


LIB_CASES = [c for c in CASES if "inside" not in c[0] and "module" not in c[0]]  # the way to a lib directory


@pytest.mark.parametrize("case, change, bad", LIB_CASES, ids=[c[0] for c in LIB_CASES])
def test_the_fronts_check_and_fs_trusted_agree_on_the_way_to_a_lib_directory(tmp_path, case, change, bad):
    """What the front checks of a directory it adds to sys.path besides the package's (lxml's): the way to it
    and the directory itself, sticky or not; what is inside, the import guard checks as it is found. `hook
    install` once took a sticky world-writable one, which the front then refused at every start."""
    untrusted = front_untrusted()
    pkg = tree(tmp_path / "top")
    change(tmp_path / "top")
    front, ours = untrusted(str(pkg), False), check_dir(str(pkg), (0,))
    assert bool(front) == bool(ours) == bad, (case, front, ours)


def front_decision():
    """What the front decides of its PACKAGE_DIR and LIB_DIRS before anything is imported (its `why`): the
    template's embedded Python from `untrusted` to that decision, run here."""
    code = install.template().split("exec \"$PYTHON\" -I -S -c '", 1)[1].replace("'\"'\"'", "'")
    start, end = code.index("def resolved("), code.index("\nif why:")
    compiled = compile(code[start:end], "qemu-hook", "exec")

    def decide(package: str, libs: str = "") -> str | None:
        namespace = {"os": os, "package": package, "libs": libs}
        exec(compiled, namespace)  # noqa: S102 - our own template
        return namespace["why"]
    return decide


def package_dir(top: Path) -> Path:
    """top/site/virtxml_cpu as a package directory holds it, beside top/other/virtxml_cpu (root's both)."""
    top.mkdir()
    top.chmod(0o755)
    for where in (top / "site", top / "other"):
        tree(where)
        (where / "pkg").rename(where / "virtxml_cpu")
    return top / "site"


# (case, the change to top/ holding a clean PACKAGE_DIR top/site, whether both must refuse it)
PACKAGE_DIR_CASES = [
    ("clean", steps(), False),
    ("PACKAGE_DIR group-writable", chmod("site", 0o775), True),
    ("PACKAGE_DIR root's, sticky and world-writable", chmod("site", 0o1777), True),
    ("PACKAGE_DIR of another owner", chown("site"), True),
    ("virtxml_cpu a root's link to root's tree, in a sticky world-writable PACKAGE_DIR",
     steps(lambda top: (top / "site" / "virtxml_cpu").rename(top / "site" / "moved"),
           link("site/virtxml_cpu", "other/virtxml_cpu"), chmod("site", 0o1777)), True),
    ("virtxml_cpu a root's link to root's tree, in a group-writable PACKAGE_DIR",
     steps(lambda top: (top / "site" / "virtxml_cpu").rename(top / "site" / "moved"),
           link("site/virtxml_cpu", "other/virtxml_cpu"), chmod("site", 0o775)), True),
    ("virtxml_cpu a root's link to root's tree", steps(lambda top: (top / "site" / "virtxml_cpu").rename(
        top / "site" / "moved"), link("site/virtxml_cpu", "other/virtxml_cpu")), False),
    ("a directory above PACKAGE_DIR root's, sticky and world-writable (as /tmp)", chmod(".", 0o1777), False),
    ("PACKAGE_DIR a link of another owner to root's tree", steps(lambda top: (top / "site").rename(top / "moved"),
                                                                 link("site", "other", theirs=True)), True),
]


@pytest.mark.parametrize("case, change, bad", PACKAGE_DIR_CASES, ids=[c[0] for c in PACKAGE_DIR_CASES])
def test_the_fronts_decision_and_hook_install_agree_on_the_package_directory(tmp_path, case, change, bad):
    """The front puts PACKAGE_DIR itself on sys.path, as install's check knows (trust.untrusted_code: the
    virtxml_cpu tree, then PACKAGE_DIR as a directory imported from, fs/trusted.check_dir). The front once
    took a sticky world-writable PACKAGE_DIR, in which anyone may add a name the import guard then refuses
    at every start (the hook fails open: enforce enforces nothing), or, as the owner of a link there,
    choose which tree is imported."""
    decide = front_decision()
    package = package_dir(tmp_path / "top")
    change(tmp_path / "top")
    front = decide(str(package))
    ours = check_tree(str(package / "virtxml_cpu"), (0,)) or check_dir(str(package), (0,))
    assert bool(front) == bool(ours) == bad, (case, front, ours)


@pytest.mark.parametrize("through", ["interpreter", "home"])
def test_hook_install_refuses_an_interpreter_or_its_home_looked_up_in_a_sticky_directory(tmp_path, unshared, through):
    """The front runs PYTHON by name at every start and checks neither it nor the standard library the
    pyvenv.cfg's home leads to (only PACKAGE_DIR and LIB_DIRS). A name in a sticky world-writable directory
    is root's only while it is there: once a reboot or a tmp cleaner removes /tmp/venv, anyone may create
    it again with their own bin/python or os.py, and root runs that at the next guest start. Install took
    both, as it takes /tmp on the way to the package (which the front checks again at every start)."""
    base = Path(sys._base_executable).resolve()
    sticky = tmp_path / "tmp"  # as /tmp: root's, sticky, world-writable
    sticky.mkdir()
    sticky.chmod(0o1777)
    if through == "interpreter":
        (sticky / "venv" / "bin").mkdir(parents=True)
        python = sticky / "venv" / "bin" / "python3"
    else:  # the interpreter outside, its pyvenv.cfg naming a home through root's link in the sticky directory
        (sticky / "py").symlink_to(base.parent.parent)
        (unshared / "venv" / "bin").mkdir(parents=True)
        (unshared / "venv" / "pyvenv.cfg").write_text(f"home = {sticky / 'py' / 'bin'}\n")
        python = unshared / "venv" / "bin" / "python3"
    python.symlink_to(base)  # root's links, root's directories: only the sticky one is open to others
    why = trust.untrusted_code(str(python), install.PACKAGE_PARENT, trust.lib_dirs())
    assert why and "writable by group or others" in why, why
    assert str(sticky) in why or "/tmp " in why, why

"""The shell front's own trust check (the Python inside hook/qemu-hook, `untrusted`: run at every guest start
before anything is imported) and fs/trusted.py's (what `hook install` and `hook status` apply) say the same
of the same trees: owners, modes, links, group- or other-writable directories, sticky ones. Built in
temporary directories and handed to another owner with chown, so only root runs it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from virtxml_cpu.fs.trusted import check_dir, check_tree
from virtxml_cpu.hook import install

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="HOOK TRUST AGREEMENT SKIPPED: needs root (chown to "
                                                         "another owner, root-owned trees)")


def front_untrusted():
    """`untrusted(path, below)` as the installed front defines it: taken from the template's embedded
    Python (shell quoting undone) and run here."""
    code = install.template().split("exec \"$PYTHON\" -I -S -c '", 1)[1].replace("'\"'\"'", "'")
    start, end = code.index("def untrusted("), code.index("\nif not package:")
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

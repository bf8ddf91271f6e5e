"""The hook's imports in the Debian package's layout, under Debian's own python3 and python3-lxml: the lab
chroots' Debian 12 (python3.11, lxml 4.9.2) and Debian 11 (python3.9, lxml 4.6.3), whose lxml looks up
`rnc2rng` and `backports_abc` and whose copy.py looks up `org` in /usr/lib/python3/dist-packages at a
cold start. The package goes where the .deb puts it (/usr/lib/python3/dist-packages/virtxml_cpu), the
front is rendered as the .deb renders it (tools/gen_package_files.py: /usr/bin/python3, that directory,
no LIB_DIRS); another user's module is planted there. `hook install` refuses it with one line and the
front never runs it (the planted code would leave a marker), failing open with one line.

Lab chroots are shared: run only as `flock /tmp/virtxml-lab.lock .venv/bin/python -m pytest ...`; the chroot
is left as found (the package copy, what was planted and lxml's __init__.py are restored)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from virtxml_cpu.hook import install

from tests.support import FIXTURES, ROOT

LAB_DIR = Path("/var/lib/virtxml-cpu-lab")
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
CHROOTS = ("bookworm-bpo", "bullseye")
SITE = "usr/lib/python3/dist-packages"
NOBODY = 65534
UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
XML = (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(
    b"<name>scratch</name>", f"<name>scratch</name><uuid>{UUID}</uuid>".encode())
ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}
CASES = ("rnc2rng", "backports_abc", "org", "link", "group-writable", "lxml after install")

pytestmark = [pytest.mark.lab, pytest.mark.skipif(os.geteuid() != 0, reason="SKIPPED LOUDLY: needs root (chroot)")]


class DebRoot:
    """A lab chroot with the package where the .deb puts it, and a scratch directory in its /tmp."""

    def __init__(self, root: Path):
        self.root, self.site = root, root / SITE
        self.work = Path(tempfile.mkdtemp(prefix="vxc-imports-", dir=root / "tmp"))
        self.work.chmod(0o755)
        self.inside = "/" + str(self.work.relative_to(root))
        self.marker = self.work / "ran"

    def code(self) -> str:
        return f"open({self.inside + '/ran'!r}, 'a').write(__name__ + '\\n')\n"

    def config(self) -> str:
        (self.work / "queue.toml").write_text(
            f'[hook]\nmode = "queue"\nspool = "{self.inside}/spool"\nsyslog_socket = "/nonexistent"\n'
            'libvirt_config_dir = ""\n')  # the name is no libvirt domain's: no transient check
        return f"{self.inside}/queue.toml"

    def install(self) -> subprocess.CompletedProcess:
        return subprocess.run([CHROOT, str(self.root), "/usr/bin/python3", "-c",
                               "import sys; from virtxml_cpu.cli import main; sys.exit(main())", "hook", "install",
                               "--hooks-dir", f"{self.inside}/hooks", "--legacy", "--mode", "queue", "--config",
                               self.config(), "--digest-dir", ""], capture_output=True, text=True, env=ENV, timeout=120)

    def front(self) -> str:
        """The script as the .deb renders it (tools/gen_package_files.py), with a scratch config and no digest."""
        (self.work / "front").write_text(install.render(install.template(), "/usr/bin/python3", "/" + SITE, "queue",
                                                        self.config(), (), ""))
        (self.work / "front").chmod(0o755)
        return f"{self.inside}/front"

    def run(self, script: str) -> subprocess.CompletedProcess:
        return subprocess.run([CHROOT, str(self.root), "/bin/sh", script, "scratch", "prepare", "begin", "-"],
                              input=XML, capture_output=True, env=ENV, timeout=120)


@pytest.fixture(params=CHROOTS)
def deb_root(request):
    root = LAB_DIR / request.param
    if not (root / "usr/bin/python3").exists():
        pytest.skip(f"SKIPPED LOUDLY: no lab chroot {root} (the lab set-up makes it)")
    if subprocess.run([CHROOT, str(root), "python3", "-c", "import lxml.etree"], capture_output=True).returncode:
        pytest.skip(f"SKIPPED LOUDLY: {root} has no python3-lxml")
    package = root / SITE / "virtxml_cpu"
    if package.exists() and not any(package.rglob("*.py")):
        remove_debris(package)  # bytecode alone: what an earlier run's teardown raced with, no installed package
    assert not package.exists(), f"{package} exists (the .deb installed there?): not touching it"
    shutil.copytree(ROOT / "virtxml_cpu", package, ignore=shutil.ignore_patterns("__pycache__"))
    deb = DebRoot(root)
    kept = [deb.site / "lxml" / "__init__.py", *deb.site.glob("__pycache__/*"), *deb.site.glob("lxml/__pycache__/*")]
    saved = {p: (p.read_bytes(), p.stat()) for p in kept if p.is_file()}
    before = set(os.listdir(deb.site))
    try:
        yield deb
    finally:
        remove_debris(package)
        for name in set(os.listdir(deb.site)) - before:
            path = deb.site / name
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        for path in {*deb.site.glob("__pycache__/*"), *deb.site.glob("lxml/__pycache__/*")} - set(saved):
            path.unlink()  # bytecode root's own runs left (the installing CLI imports what was planted)
        for path, (data, st) in saved.items():
            if path.read_bytes() != data or path.stat().st_uid != st.st_uid:
                path.write_bytes(data)
                os.chown(path, st.st_uid, st.st_gid)
                os.chmod(path, st.st_mode & 0o7777)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        shutil.rmtree(deb.work, ignore_errors=True)


def remove_debris(package: Path) -> None:
    """Remove the copied package. A guest started meanwhile in this shared lab may run a hook that imports
    from it and writes bytecode into directories being removed, so the removal is tried until nothing is
    left (a bytecode-only tree left behind made the next run refuse to start)."""
    for _ in range(10):
        shutil.rmtree(package, ignore_errors=True)
        if not package.exists():
            return
        time.sleep(0.2)
    assert not package.exists(), f"{package} could not be removed"


def plant(deb: DebRoot, case: str) -> Path:
    site = deb.site
    if case in ("rnc2rng", "backports_abc"):
        planted = site / f"{case}.py"
        planted.write_text(deb.code())
        os.chown(planted, NOBODY, NOBODY)
    elif case == "org":  # copy.py: from org.python.core import PyStringMap
        (site / "org").mkdir()
        planted = site / "org" / "python"
        planted.mkdir()
        (planted / "__init__.py").write_text(deb.code())
        (planted / "core.py").write_text(deb.code() + "PyStringMap = dict\n")
        for p in (planted, planted / "__init__.py", planted / "core.py"):
            os.chown(p, NOBODY, NOBODY)
    elif case == "link":  # root's link to their file
        (deb.work / "theirs").mkdir()
        (deb.work / "theirs" / "evil.py").write_text(deb.code())
        for p in (deb.work / "theirs", deb.work / "theirs" / "evil.py"):
            os.chown(p, NOBODY, NOBODY)
        planted = site / "rnc2rng.py"
        planted.symlink_to(f"{deb.inside}/theirs/evil.py")
    elif case == "group-writable":
        planted = site / "rnc2rng"
        planted.mkdir()
        (planted / "__init__.py").write_text(deb.code())
        planted.chmod(0o775)
    else:
        planted = site / "lxml" / "__init__.py"
        planted.write_text(planted.read_text() + deb.code())
        os.chown(planted, NOBODY, NOBODY)
    return planted


@pytest.mark.parametrize("case", CASES)
def test_the_debian_layout_refuses_a_module_of_theirs_at_install_and_at_every_start(deb_root, case):
    deb = deb_root
    clean = deb.run(deb.front())
    assert clean.returncode == 0 and b"decision=inject" in clean.stderr, clean.stderr  # Debian's python3 decides
    inside = lambda p: "/" + str(p.relative_to(deb.root))  # noqa: E731 - the path as the chroot names it
    if case == "lxml after install":
        r = deb.install()
        assert r.returncode == 0, r.stderr
        planted = plant(deb, case)
        script = f"{deb.inside}/hooks/qemu"
    else:
        planted = plant(deb, case)
        r = deb.install()
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and inside(planted) in r.stderr, r.stderr
        assert not (deb.work / "hooks").exists()
        script = deb.front()
    if deb.marker.exists():  # the installing CLI's own lxml looked it up (the admin's process, not the hook)
        deb.marker.unlink()
    r = deb.run(script)
    lines = r.stderr.decode(errors="replace").splitlines()
    assert not deb.marker.exists(), f"the planted module ran as root: {deb.marker.read_text()!r} {lines}"
    assert r.returncode == 0 and len(lines) == 1 and "guest start not checked" in lines[0], lines
    assert inside(planted) in lines[0], lines

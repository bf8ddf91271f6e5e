"""contrib/arch/PKGBUILD: valid bash, read by Arch's makepkg as meant (`makepkg --printsrcinfo`, Debian's
makepkg package), built by that makepkg here into a package holding the .deb's files (paths mapped), and its
install script reloading the daemon that runs (the RPM's cases: tests/project/test_rpm.py).

makepkg refuses root: as root it runs as nobody. Debian has no pacman (PACMAN=true stands in for the
dependency checks it skips with --nodeps) and no `python` (a link to /usr/bin/python3); Debian's Python
installs into /usr/local unless DEB_PYTHON_INSTALL_LAYOUT=deb, which gives the .deb's own paths, where Arch's
gives /usr/lib/python3.X/site-packages and /usr/bin.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from virtxml_cpu import __version__
from virtxml_cpu.hook import install

from tests.support import ROOT
from tests.support.packages import POST_CASES, TEXTFILE, deb_entries, mapped, run_scriptlet

ARCH = ROOT / "contrib" / "arch"


@pytest.mark.parametrize("name", ["PKGBUILD", "virtxml-cpu.install"])
def test_bash_reads_it(name):
    r = subprocess.run(["bash", "-n", str(ARCH / name)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr


# Debian packages for makepkg and what the PKGBUILD's build() runs (python-build, python-installer, ...)
MAKEPKG_DEBS = ("makepkg", "libarchive-tools", "fakeroot", "python3-build", "python3-installer", "python3-setuptools",
                "python3-wheel", "python3-lxml", "python3-argparse-manpage")


def installed(package: str) -> bool:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return r.stdout.endswith("ok installed")


@pytest.fixture(scope="module")
def makepkg(tmp_path_factory):
    """Run makepkg ARGS in a fresh directory holding the PKGBUILD, its install file and (tarball=True) the
    source tarball of the tree as it is; returns (result, directory)."""
    missing = [p for p in MAKEPKG_DEBS if not installed(p)]
    if missing and os.geteuid() != 0:
        pytest.skip(f"MAKEPKG TESTS SKIPPED LOUDLY: not root to install {' '.join(missing)}")
    if missing:
        subprocess.run(["bash", "-c", '. tests/lab/need-pkgs.sh && need_pkgs "$@"', "need-pkgs", *missing], cwd=ROOT,
                       check=True)
    made = []

    def run(*args: str, tarball: bool = False) -> tuple[subprocess.CompletedProcess, Path]:
        work = Path(tempfile.mkdtemp(prefix="vxc-arch-"))
        made.append(work)
        work.chmod(0o777)  # makepkg runs as nobody and checks it may write there
        for name in ("PKGBUILD", "virtxml-cpu.install"):
            shutil.copy(ARCH / name, work)
        if tarball:
            source_tarball(work / f"virtxml-cpu-{__version__}.tar.gz")
        (work / "bin").mkdir()
        (work / "bin" / "python").symlink_to("/usr/bin/python3")
        drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if os.geteuid() == 0 else []
        env = {"PATH": f"{work}/bin:/usr/bin:/bin", "HOME": str(work), "PACMAN": "true", "LC_ALL": "C.UTF-8",
               "DEB_PYTHON_INSTALL_LAYOUT": "deb",
               **{v: str(work) for v in ("BUILDDIR", "PKGDEST", "SRCDEST", "SRCPKGDEST", "LOGDEST")}}
        r = subprocess.run([*drop, "makepkg", *args], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        return r, work

    yield run
    for work in made:
        shutil.rmtree(work, ignore_errors=True)


def source_tarball(out: Path) -> None:
    """The tree as `make deb` and `make rpm` copy it (tracked and new files, not ignored ones)."""
    import tarfile

    names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    with tarfile.open(out, "w:gz") as tar:
        for name in names:
            if name and os.path.exists(ROOT / name):
                tar.add(ROOT / name, f"virtxml-cpu-{__version__}/{name}", recursive=False)
    out.chmod(0o644)


@pytest.fixture(scope="module")
def srcinfo(makepkg) -> dict[str, list[str]]:
    r, _ = makepkg("--printsrcinfo")
    assert r.returncode == 0 and "ERROR" not in r.stderr, r.stderr
    info: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        if " = " in line:
            key, value = line.strip().split(" = ", 1)
            info.setdefault(key, []).append(value)
    return info


def test_makepkg_reads_the_pkgbuild(srcinfo):
    assert srcinfo["pkgname"] == ["virtxml-cpu"] and srcinfo["pkgver"] == [__version__]
    assert srcinfo["arch"] == ["any"] and srcinfo["license"] == ["GPL-2.0-or-later"]
    assert srcinfo["depends"] == ["python", "python-lxml"]
    assert srcinfo["optdepends"][0].startswith("libvirt-python: ")
    assert srcinfo["backup"] == ["etc/virtxml-cpu/config.toml"]  # the config survives upgrades
    assert srcinfo["source"] == [f"virtxml-cpu-{__version__}.tar.gz"]
    assert srcinfo["install"] == ["virtxml-cpu.install"]


def test_makepkg_builds_a_package_holding_the_debian_packages_files(makepkg, deb_file):
    r, work = makepkg("--nodeps", tarball=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (package,) = work.glob(f"virtxml-cpu-{__version__}-1-any.pkg.tar.*")
    listing = subprocess.run(["bsdtar", "-tvf", str(package)], capture_output=True, text=True, check=True).stdout
    arch = {}
    for line in listing.splitlines():
        mode, *_, rest = line.split(None, 8)
        path, _, link = rest.partition(" -> ")
        # not .PKGINFO, .MTREE, .INSTALL, .BUILDINFO; nor the byte code python-installer compiles (Arch's
        # packages ship it, Debian's postinst makes it)
        if not path.startswith(".") and "__pycache__" not in path:
            arch["/" + path.rstrip("/")] = (mode, link)
    rules = [
        (r"/usr/share/doc/virtxml-cpu/changelog\.gz", None),  # pkgrel and the PKGBUILD's history
        (r"/usr/share/doc/virtxml-cpu/copyright", None),      # license=()
        (r"/lib/systemd(.*)", r"/usr/lib/systemd\1"),  # Arch has no /lib
        (r"/lib", None), (r"/usr/libexec", None),
        (r"/usr/libexec/virtxml-cpu(.*)", r"/usr/lib/virtxml-cpu\1"),  # Arch has no /usr/libexec
        (r"/usr/share/doc/virtxml-cpu/(.*\.md)\.gz", r"/usr/share/doc/virtxml-cpu/\1"),  # makepkg compresses no docs
        (r"(.*)", r"\1"),
    ]
    expected = mapped(deb_entries(deb_file), rules)
    expected["/etc/libvirt/hooks/qemu.d/virtxml-cpu"] = ("lrwxrwxrwx", "/usr/lib/virtxml-cpu/qemu-hook")
    assert sorted(set(expected) - set(arch)) == [], "in the .deb, not the Arch package"
    assert sorted(set(arch) - set(expected)) == [], "in the Arch package, not the .deb"
    assert arch == expected  # modes and link targets too
    assert "_reload_libvirt" in subprocess.run(["bsdtar", "-xOf", str(package), ".INSTALL"], capture_output=True,
                                               text=True, check=True).stdout
    hook = subprocess.run(["bsdtar", "-xOf", str(package), "usr/lib/virtxml-cpu/qemu-hook"], capture_output=True,
                          text=True, check=True).stdout
    (package_dir,) = {p.rsplit("/virtxml_cpu/", 1)[0] for p in arch if "/virtxml_cpu/" in p}
    settings = install.installed_settings(hook)
    assert settings["PACKAGE_DIR"] == package_dir and settings["PYTHON"] == "/usr/bin/python3", settings


def install_function(name: str, tmp: Path) -> str:
    """A script that sources the install file (its metrics path moved into tmp) and calls one function."""
    text = (ARCH / "virtxml-cpu.install").read_text()
    assert text.count(TEXTFILE) == 1
    (tmp / "install").write_text(text.replace(TEXTFILE, str(tmp / "virtxml-cpu.prom")))
    return f". {tmp / 'install'}\n{name}\n"


@pytest.mark.parametrize("function", ["post_install", "post_upgrade", "post_remove"])
@pytest.mark.parametrize("active, calls", POST_CASES)
def test_the_install_script_reloads_virtqemud_when_it_runs_else_libvirtd(tmp_path, function, active, calls):
    (tmp_path / "virtxml-cpu.prom").write_text("virtxml_cpu_host_reachable 1\n")
    status, made = run_scriptlet(tmp_path, install_function(function, tmp_path), 1, active, "/bin/bash")
    assert (status, made) == (0, calls)
    assert (tmp_path / "virtxml-cpu.prom").exists() == (function != "post_remove")

"""A Debian system in a directory, driven from outside: run a command in it, apt-get there, the packages it
has, a log socket in its /run. Used by the lab tests that install the Debian package into a chroot."""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import time
from contextlib import suppress
from pathlib import Path

from tests.lab import harness
from tests.support.logsock import drain

PATH = "PATH=/usr/sbin:/usr/bin:/sbin:/bin"


def in_root(root: Path, *argv: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    r = subprocess.run(["chroot", str(root), "/usr/bin/env", "-i", PATH, "LC_ALL=C", "HOME=/root",
                        "DEBIAN_FRONTEND=noninteractive", *argv], capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{shlex.join(argv)} in {root}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def apt_get(root: Path, *args: str) -> str:
    """apt-get in the chroot; when its package lists are stale (a 404), refresh them once and retry."""
    argv = ("apt-get", "-y", "-q", "-o", "Dpkg::Use-Pty=0", "--no-install-recommends", *args)
    r = in_root(root, *argv, check=False)
    if r.returncode != 0 and ("Failed to fetch" in r.stderr or "Unable to locate" in r.stderr):
        in_root(root, "apt-get", "-q", "update")
        r = in_root(root, *argv, check=False)
    assert r.returncode == 0, f"apt-get {' '.join(args)} in {root}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def packages(root: Path) -> set[str]:
    out = in_root(root, "dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\n").stdout
    return {line.split()[1] for line in out.splitlines() if line.startswith("ii")}


def copy_in(root: Path, deb: Path) -> str:
    """The package inside the chroot's /tmp; apt-get needs a ./path to take it as a file."""
    shutil.copy(deb, root / "tmp" / deb.name)
    return f"/tmp/{deb.name}"


class LogSocket:
    """A datagram socket in the chroot's /run that the hook logs to (config hook.syslog_socket)."""

    def __init__(self, root: Path):
        self.inside = "/run/vxc-deb-test-log.sock"
        self.path = root / self.inside.lstrip("/")
        with suppress(FileNotFoundError):
            self.path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.3)

    def lines(self, name: str) -> list[str]:
        return [line for line in drain(self.sock) if f"domain={name} " in line]

    def close(self) -> None:
        self.sock.close()
        with suppress(FileNotFoundError):
            self.path.unlink()


def settle_after_reload(lab: harness.Lab) -> None:
    """The package scripts SIGHUP libvirtd; it re-reads its hooks in a thread: let it, then wait for it."""
    time.sleep(2)
    deadline = time.monotonic() + 30
    while subprocess.run(["virsh", "-c", lab.uri, "version"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "the lab libvirtd did not answer after the reload"
        time.sleep(0.2)

"""The hook installed in a lab's libvirtd (the host's, or a chroot's with its own python3 and lxml), its
config and log socket in the lab's filesystem."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from tests.lab import harness
from tests.support import ROOT
from tests.support.logsock import drain

HOOKS = Path("/etc/libvirt/hooks")
WORK = Path("/var/lib/virtxml-cpu-lab-incoming")  # in each lab's own filesystem: config, spool, log socket
PACKAGE = Path("/opt/virtxml-cpu-lab-incoming")  # the chroot lab's copy of the package
PACKAGED_HOOK = "/usr/libexec/virtxml-cpu/qemu-hook"  # where the .deb's qemu.d/virtxml-cpu points
MACHINE = {"7.2": "pc-q35-7.2", "10.0": "pc-q35-10.0"}


def in_lab(lab, *argv: str) -> subprocess.CompletedProcess:
    """A command in the lab's filesystem (the host's, or chrooted), as root with a clean environment."""
    prefix = [] if lab.root == Path("/") else ["chroot", str(lab.root)]
    r = subprocess.run([*prefix, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
                        "HOME=/root", "DEBIAN_FRONTEND=noninteractive", *argv],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{argv} in {lab.root}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def reload_hooks(lab) -> None:
    """libvirtd reads its hooks on SIGHUP; wait until it answers again."""
    os.kill(int(lab.path(Path("/run/libvirtd.pid")).read_text().split()[0]), 1)
    time.sleep(1.5)
    deadline = time.monotonic() + 30
    while subprocess.run(["virsh", "-c", lab.uri, "version"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, f"{lab.title}: libvirtd did not answer after SIGHUP"
        time.sleep(0.2)


def clear_interrupted(lab) -> list[str]:
    """Take out what a killed run's LabHook left in the lab (its hook in qemu.d, WORK, the package copy),
    leaving the .deb's hook alone; libvirtd, if it runs, reloads its hooks. Returns what was removed."""
    removed = []
    hook = lab.path(HOOKS / "qemu.d" / "virtxml-cpu")
    if os.path.lexists(hook) and not (hook.is_symlink() and os.readlink(hook) == PACKAGED_HOOK):
        hook.unlink()
        removed.append(str(hook))
    for leftover in (lab.path(WORK), lab.path(PACKAGE)):
        if leftover.exists():
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(str(leftover))
    if removed and lab.path(Path("/run/libvirtd.pid")).exists():
        reload_hooks(lab)
    return removed


class LabHook:
    """The hook installed in one lab, its config and log socket under WORK in the lab's filesystem."""

    def __init__(self, lab):
        self.lab = lab
        self.work = lab.path(WORK)
        clear_interrupted(lab)
        self.work.mkdir(mode=0o755, parents=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.work / "log.sock"))
        self.sock.settimeout(0.3)
        self.seen: list[str] = []
        self.mode("audit")
        if lab.root == Path("/"):
            cmd = [sys.executable, "-m", "virtxml_cpu"]
            run = lambda *a: subprocess.run([*cmd, *a], cwd=ROOT, capture_output=True, text=True, timeout=120)  # noqa: E731
        else:  # the chroot runs its own python3 + lxml on a root-owned copy of the package
            if not lab.path(Path("/usr/lib/python3/dist-packages/lxml")).is_dir():
                in_lab(lab, "apt-get", "-q", "update")
                in_lab(lab, "apt-get", "install", "-y", "-q", "--no-install-recommends", "python3-minimal",
                       "python3-lxml")
            copy = lab.path(PACKAGE)
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(ROOT / "virtxml_cpu", copy / "virtxml_cpu",
                            ignore=shutil.ignore_patterns("__pycache__"))
            run = lambda *a: subprocess.run(  # noqa: E731
                ["chroot", str(lab.root), "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                 f"PYTHONPATH={PACKAGE}", "/usr/bin/python3", "-m", "virtxml_cpu", *a],
                capture_output=True, text=True, timeout=120)
        self.cli = run
        r = run("hook", "install", "--hooks-dir", str(HOOKS), "--config", str(WORK / "config.toml"),
                "--digest-dir", str(WORK / "decisions"))
        assert r.returncode == 0, r.stderr
        reload_hooks(lab)

    def mode(self, mode: str) -> None:
        (self.work / "config.toml").write_text(f'[hook]\nmode = "{mode}"\nspool = "{WORK / "spool"}"\n'
                                               f'syslog_socket = "{WORK / "log.sock"}"\n')

    def lines(self, name: str) -> list[str]:
        """The lines logged for the domain `name` since the last call (the others are kept in `seen`)."""
        out = drain(self.sock)
        self.seen += out
        return [line.split(": ", 1)[1] for line in out if f"domain={name} " in line]

    def close(self) -> None:
        r = self.cli("hook", "uninstall", "--hooks-dir", str(HOOKS))
        reload_hooks(self.lab)
        self.sock.close()
        shutil.rmtree(self.work, ignore_errors=True)
        if self.lab.root != Path("/"):
            shutil.rmtree(self.lab.path(PACKAGE), ignore_errors=True)
        assert r.returncode == 0, r.stderr


@contextmanager
def in_every_lab():
    """The hook in the host lab and the backports lab (audit until a test says otherwise), each lab's
    domains cleaned up before and after; yields ({lab key: LabHook}, {lab key: connection})."""
    import libvirt

    harness.bring_up(harness.BPO_LAB)
    conns = {key: harness.connect(lab) for key, lab in harness.LABS.items()}
    for conn in conns.values():
        harness.cleanup(conn)
    installed = {}
    try:
        for key, lab in harness.LABS.items():
            installed[key] = LabHook(lab)
        yield installed, conns
    finally:
        for conn in conns.values():
            with suppress(libvirt.libvirtError):
                harness.cleanup(conn)
            conn.close()
        for h in installed.values():
            h.close()

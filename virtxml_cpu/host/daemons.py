"""Which libvirt daemon runs this host's QEMU guests, and so reads the qemu hook: the modular `virtqemud`
(Fedora, RHEL 9 and later, openSUSE) or the monolithic `libvirtd` (Debian, Ubuntu, Arch).

Both read hook scripts when they start and when they are reloaded (SIGHUP). virtqemud is socket-activated
and exits after 120 s without clients or running guests, so "virtqemud.socket is active" is not "virtqemud
runs": an idle one reads the hook when its socket next starts it, and there is nothing to reload. Under
systemd, `systemctl is-active` of the service and the socket tells the cases apart; without it (OpenRC, a
daemon started by hand or in a chroot) the daemon's listening socket in /run/libvirt is what is left.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from .local_qemu import run, which

RUN_DIR = "/run/libvirt"
MODULAR, MONOLITHIC = "virtqemud", "libvirtd"
DAEMONS = (MODULAR, MONOLITHIC)  # virtqemud first: where it runs it, not libvirtd, serves qemu:///system
SOCKETS = {MODULAR: "virtqemud-sock", MONOLITHIC: "libvirt-sock"}  # on a modular host libvirt-sock is virtproxyd's
RUNNING, IDLE, NONE = "running", "idle", "none"


class QemuDaemon(NamedTuple):
    name: str | None  # virtqemud, libvirtd, or None when neither was found
    state: str        # RUNNING (a reload reaches it), IDLE (socket-activated, not running now) or NONE
    systemd: bool     # found through systemd (reload with systemctl) rather than its socket file


def systemctl_states(systemctl: str | None, units: tuple[str, ...]) -> dict[str, str]:
    """{unit: state} from one `systemctl is-active UNIT...` (one line per unit: active, inactive, failed,
    activating, reloading, ...), run as local_qemu.run runs any binary; {} when there is no systemctl or
    no systemd answered (not booted with it, no bus: nothing on stdout)."""
    if not systemctl:
        return {}
    out, _why = run(systemctl, "is-active", *units)
    lines = (out or "").split()
    return dict(zip(units, lines)) if len(lines) == len(units) else {}


def qemu_daemon(systemctl: str | None = None, run_dir: str = RUN_DIR) -> QemuDaemon:
    """The daemon that reads the qemu hook here: a running service (virtqemud before libvirtd), else an
    active socket unit (idle, socket-activated), else, where systemd did not answer for it, a daemon's
    listening socket in `run_dir`; else none. `systemctl`: the binary to ask (default: found on
    /usr/bin:/bin)."""
    systemctl = systemctl or which("systemctl", "/usr/bin:/bin")
    units = tuple(f"{name}.{kind}" for name in DAEMONS for kind in ("service", "socket"))
    states = systemctl_states(systemctl, units)
    for name in DAEMONS:
        if states.get(f"{name}.service") in ("active", "reloading", "activating"):
            return QemuDaemon(name, RUNNING, True)
    for name in DAEMONS:
        if states.get(f"{name}.socket") == "active":
            return QemuDaemon(name, IDLE, True)
    for name in DAEMONS:
        try:
            if stat.S_ISSOCK(os.stat(os.path.join(run_dir, SOCKETS[name])).st_mode):
                return QemuDaemon(name, RUNNING, False)
        except OSError:
            continue
    return QemuDaemon(None, NONE, bool(states))


def reload_note(daemon: QemuDaemon) -> str:
    """What to do so the daemon picks up an installed or removed hook, naming that daemon."""
    if daemon.state == RUNNING:
        how = (f"systemctl reload {daemon.name}" if daemon.systemd else
               f"kill -HUP $(pidof {daemon.name})")
        return (f"{daemon.name} reads hooks when it starts: reload it (SIGHUP) before the hook is used "
                f"({how})")
    if daemon.state == IDLE:
        return (f"{daemon.name} is socket-activated and not running now: it reads the hook when it next "
                "starts (nothing to reload)")
    return ("no libvirt daemon (virtqemud or libvirtd) is running: it reads the hook when it starts (or on "
            "SIGHUP)")


def describe(daemon: QemuDaemon) -> str:
    """One phrase for `hook status`: `virtqemud running`, `virtqemud idle (socket-activated)`, ..."""
    if daemon.state == IDLE:
        return f"{daemon.name} idle (socket-activated)"
    return f"{daemon.name} running" if daemon.name else "no libvirt daemon running"

"""host/daemons.py: which libvirt daemon reads the qemu hook (virtqemud, libvirtd, or none), asked of a
stand-in `systemctl` that answers `is-active` as a host of each kind would, and of a run directory holding
real listening sockets or none; and what `hook install`/`uninstall`/`status` say from it."""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from pathlib import Path

import pytest

from virtxml_cpu.hook import install
from virtxml_cpu.hook import status as hook_status
from virtxml_cpu.host import daemons

UNITS = ("virtqemud.service", "virtqemud.socket", "libvirtd.service", "libvirtd.socket")


def stand_in(where: Path, active: set[str] | None) -> tuple[str, Path]:
    """In `where` (conftest's `shared`: as root, local_qemu.run runs the binary as an unprivileged user,
    who cannot enter pytest's private tmp_path), a systemctl that prints one state per unit asked (`active` for those in `active`, else
    `inactive`, exit 3 as systemctl does) and records its argv; `active=None`: a host not booted with
    systemd (nothing on stdout, the message on stderr, exit 1)."""
    calls = where / "calls"
    calls.touch()
    calls.chmod(0o666)  # written by the unprivileged user the stand-in runs as
    if active is None:
        body = 'echo "System has not been booted with systemd as init system (PID 1). Can\'t operate." >&2\nexit 1\n'
    else:
        body = ("rc=0\nshift\nfor unit; do\n  case \" $ACTIVE \" in\n    *\" $unit \"*) echo active ;;\n"
                "    *) echo inactive; rc=3 ;;\n  esac\ndone\nexit $rc\n")
        body = f"ACTIVE='{' '.join(sorted(active))}'\n" + body
    script = where / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n{body}')
    script.chmod(0o755)
    return str(script), calls


@contextmanager
def listening(run_dir: Path, *names: str):
    """Real listening unix sockets named as the daemons' in /run/libvirt."""
    socks = []
    try:
        for name in names:
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(run_dir / name))
            s.listen(1)
            socks.append(s)
        yield
    finally:
        for s in socks:
            s.close()


def case(active, sockets, expected, note, id):
    return pytest.param(active, sockets, expected, note, id=id)


CASES = [  # (units active, sockets listening, expected (name, state, systemd), a phrase of the reload note)
    case({"virtqemud.service", "virtqemud.socket"}, (), ("virtqemud", "running", True), "systemctl reload virtqemud",
         "virtqemud-runs"),
    case({"virtqemud.socket"}, (), ("virtqemud", "idle", True), "nothing to reload", "virtqemud-idle"),
    case({"libvirtd.service", "libvirtd.socket"}, (), ("libvirtd", "running", True), "systemctl reload libvirtd",
         "libvirtd-runs"),
    case({"libvirtd.service", "virtqemud.socket"}, (), ("libvirtd", "running", True), "systemctl reload libvirtd",
         "libvirtd-runs-virtqemud-idle"),
    case({"libvirtd.socket"}, (), ("libvirtd", "idle", True), "nothing to reload", "libvirtd-idle"),
    case(set(), (), (None, "none", True), "no libvirt daemon (virtqemud or libvirtd) is running", "neither"),
    # systemd answers, nothing of libvirt active, but a daemon started by hand listens
    case(set(), ("libvirt-sock",), ("libvirtd", "running", False), "kill -HUP $(pidof libvirtd)",
         "libvirtd-by-hand"),
    case(None, ("libvirt-sock",), ("libvirtd", "running", False), "kill -HUP $(pidof libvirtd)",
         "no-systemd-libvirtd"),
    case(None, ("virtqemud-sock", "libvirt-sock"), ("virtqemud", "running", False), "kill -HUP $(pidof virtqemud)",
         "no-systemd-virtqemud-and-virtproxyd"),
    case(None, (), (None, "none", False), "no libvirt daemon", "no-systemd-nothing"),
]


@pytest.mark.parametrize("active, sockets, expected, note", CASES)
def test_the_daemon_that_reads_the_hook(shared, active, sockets, expected, note):
    systemctl, calls = stand_in(shared, active)
    run_dir = shared / "run-libvirt"
    run_dir.mkdir()
    with listening(run_dir, *sockets):
        found = daemons.qemu_daemon(systemctl, str(run_dir))
    assert tuple(found) == expected
    assert note in daemons.reload_note(found)
    # one question, never a reload or a start: finding the daemon changes nothing
    assert calls.read_text().splitlines() == ["is-active " + " ".join(UNITS)]


def test_a_stale_socket_file_is_no_daemon(shared):
    """A regular file where the socket was (not a socket): nothing listens there."""
    systemctl, _ = stand_in(shared, None)
    (shared / "virtqemud-sock").write_text("")
    assert tuple(daemons.qemu_daemon(systemctl, str(shared))) == (None, "none", False)


def test_no_systemctl_at_all_falls_back_to_the_sockets(shared):
    with listening(shared, "virtqemud-sock"):
        found = daemons.qemu_daemon(str(shared / "no-systemctl"), str(shared))
    assert tuple(found) == ("virtqemud", "running", False)


def test_an_untrusted_systemctl_is_not_run(shared):
    """The binary asked is run only as any binary is (local_qemu.run): writable by others, it is not."""
    systemctl, calls = stand_in(shared, {"virtqemud.service"})
    os.chmod(systemctl, 0o777)
    assert tuple(daemons.qemu_daemon(systemctl, str(shared))) == (None, "none", False)
    assert calls.read_text() == ""


def test_describe_names_the_daemon_and_its_state():
    assert daemons.describe(daemons.QemuDaemon("virtqemud", daemons.IDLE, True)) == "virtqemud idle (socket-activated)"
    assert daemons.describe(daemons.QemuDaemon("libvirtd", daemons.RUNNING, False)) == "libvirtd running"
    assert daemons.describe(daemons.QemuDaemon(None, daemons.NONE, True)) == "no libvirt daemon running"


def test_hook_install_uninstall_and_status_name_this_hosts_daemon(tmp_path):
    here = daemons.qemu_daemon()
    note = daemons.reload_note(here)
    hooks = tmp_path / "hooks"
    assert install.install(str(hooks), "audit", None, legacy=False)[-1] == note
    rec = hook_status.status_record(str(hooks))
    assert rec["daemon"] == {"name": here.name, "state": here.state, "systemd": here.systemd}
    _, lines = hook_status.status(str(hooks))
    assert f"({daemons.describe(here)}); hooks directory {hooks}" in lines[0]
    assert install.uninstall(str(hooks))[-1] == note

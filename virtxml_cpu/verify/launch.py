"""Starting the QEMU `verify` checks: which emulator, whether KVM is usable, whom QEMU runs as, and one
paused QEMU per question, asked over QMP and killed after a timeout.

This is the only part of verify that starts processes; what to ask and how to judge the answers is in
compare.py.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Callable

from ..constants import KVM_DEVICE
from ..host import local_qemu
from ..tables import qemu
from ..errors import BadInput, EnvironmentProblem, shown
from ..host.qmp import QMP, QMPClosed, QMPError
from .types import QemuBinary, CpuMode, Identity, Run, VerifyOptions

GIVE_UP_AFTER = 3  # QEMUs killed by the timeout before verify stops starting more


def find_emulator(opts: VerifyOptions) -> tuple[str, str | None]:
    """The QEMU to check, and the version libvirt reports for it when it came from --connect: --emulator
    (any executable, a wrapper script too), libvirt's, or this host's (local_qemu.this_host: libvirt's
    emulator where its cache names one). Only one local_qemu.untrusted() clears is started, whichever source
    named it: as root one root owns that nobody else may change (nor a directory above it), even though it
    then runs unprivileged, since root hands it the kvm group. A symbolic link is resolved once and its
    target returned: a link its owner re-points between two QEMUs never changes what runs."""
    libvirt_version = None
    if opts.emulator:
        path = os.path.abspath(opts.emulator)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise BadInput(f"--emulator {shown(opts.emulator)}: not an executable file")
    elif opts.connect:
        from ..host.connection import emulator_for

        path, libvirt_version = emulator_for(opts.connect)
    else:
        path = local_qemu.this_host()
        if not path:
            raise EnvironmentProblem("QEMU is not available: none of " + ", ".join(local_qemu.CANDIDATES)
                                     + " (name one with --emulator PATH)")
    real = os.path.realpath(path)  # resolved once: the very path checked is the one every QEMU runs from
    why = local_qemu.untrusted(real)
    if why and os.geteuid() == 0:
        raise BadInput(f"{shown(path)}: as root, verify starts only an emulator root owns that nobody else may "
                       "write, in a directory nobody else may write")
    if why:
        raise BadInput(f"{shown(path)}: verify starts only an emulator nobody but you and root may change "
                       f"({shown(why)})")
    return real, libvirt_version


def check_kvm(device: str = KVM_DEVICE) -> None:
    """KVM must be there and ours to open: QEMU starts with accel=kvm."""
    if not os.path.exists(device):
        raise EnvironmentProblem(f"KVM is not available on this host ({device} does not exist): "
                                 "nothing to verify against")
    try:
        os.close(os.open(device, os.O_RDWR | os.O_CLOEXEC))
    except PermissionError:
        raise EnvironmentProblem(f"cannot open {device}: run `virtxml-cpu verify` as root or as a member of "
                                 "the kvm group") from None
    except OSError as e:
        raise EnvironmentProblem(f"KVM is not usable on this host: {device}: {e.strerror}") from None


def qemu_identity(device: str = KVM_DEVICE) -> Identity:
    """As root, QEMU runs as an unprivileged user holding the group that may open /dev/kvm; as root only
    when nobody less privileged can open it. Otherwise as this user."""
    if os.geteuid() != 0:
        return Identity(pwd.getpwuid(os.geteuid()).pw_name)
    st = os.stat(device)
    group_rw = st.st_mode & 0o060 == 0o060
    other_rw = st.st_mode & 0o006 == 0o006
    for user in local_qemu.unprivileged_users():  # the one user rule; plus the group that may open KVM
        if other_rw:
            return Identity(user.name, user.uid, user.gid, ())
        if group_rw:
            return Identity(f"{user.name} (group {st.st_gid})", user.uid, user.gid, (st.st_gid,))
    return Identity("root")


class Runner:
    """Starts one QEMU per call; each is killed after `timeout` seconds.

    Nothing QEMU's user can reach by name: its monitor is one end of a socketpair handed over as an open
    descriptor (`-chardev socket,fd=N`, as libvirt hands QEMU its monitor socket) and its output goes to
    an unnamed file of ours. So no other process of that user can plant a link, a FIFO or a monitor of
    its own where root opens, reads or connects."""

    def __init__(self, emulator: str, identity: Identity, timeout: float):
        self.emulator, self.identity, self.timeout = emulator, identity, timeout
        self._lock = threading.Lock()
        self.killed = 0  # QEMUs the watchdog had to kill

    def _expire(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self.killed += 1
        _kill(proc)

    def session(self, machine_opt: str, cpu: str | None, work: Callable[[QMP], object]) -> object:
        """Start QEMU paused, run `work` on its monitor, stop it. Raises QMPClosed with QEMU's own message
        when it does not start or answer."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = theirs.fileno()
        argv = [self.emulator, "-S", "-nodefaults", "-nographic", "-machine", machine_opt,
                "-chardev", f"socket,id=qmp,fd={fd}", "-mon", "chardev=qmp,mode=control"] + (
                    ["-cpu", cpu] if cpu else [])
        log = tempfile.TemporaryFile()  # unnamed (O_TMPFILE): QEMU writes to it, nobody can open it
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                                    pass_fds=(fd,), start_new_session=True, **self.identity.popen())
        except OSError as e:
            ours.close()
            log.close()
            raise QMPClosed(f"cannot run {self.emulator} as {self.identity.name}: {e.strerror}") from None
        finally:
            theirs.close()
        watchdog = threading.Timer(self.timeout, self._expire, (proc,))
        watchdog.start()
        try:
            with QMP(ours, self.timeout) as mon:
                mon.handshake()
                result = work(mon)
                try:
                    mon.execute("quit")
                except (QMPClosed, QMPError):
                    pass
            return result
        except QMPClosed as e:
            _kill(proc)
            raise QMPClosed(_last_line(log) or str(e)) from None
        except QMPError as e:
            raise QMPClosed(str(e)) from None
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise QMPClosed(f"an answer verify cannot read ({type(e).__name__}: {e})") from None
        finally:
            watchdog.cancel()
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                _kill(proc)
            log.close()


def _kill(proc: subprocess.Popen) -> None:
    """The process group QEMU was started in (a wrapper script and the QEMU it runs)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def _last_line(log) -> str:
    """QEMU's last message that is not a warning: why it did not start."""
    try:
        log.seek(max(0, os.fstat(log.fileno()).st_size - 4096))
        text = log.read().decode(errors="replace")
    except OSError:
        return ""
    found = [ln.strip() for ln in text.splitlines() if ln.strip() and "warning:" not in ln]
    return found[-1] if found else ""


def probe(runner: Runner) -> QemuBinary:
    """The QEMU's version, package string, machine types (with compat-props where it answers) and models."""
    def work(mon: QMP):
        version = mon.execute("query-version")
        try:
            machines, compat = mon.execute("query-machines", {"compat-props": True}), True
        except QMPError:  # before QEMU 9.x: no such argument
            machines, compat = mon.execute("query-machines"), False
        models = frozenset(d["name"] for d in mon.execute("query-cpu-definitions"))
        return version, machines, compat, models

    version, machines, compat, models = runner.session("none,accel=kvm", None, work)
    q = version["qemu"]
    return QemuBinary(runner.emulator, (int(q["major"]), int(q["minor"]), int(q["micro"])),
                 version.get("package", "").strip(), machines, compat, models)


def read_vcpu(runner: Runner, machine: str, mode: CpuMode) -> Run:
    """What vCPU 0 has of each property (qom-get); after GIVE_UP_AFTER kills, not tried at all."""
    def work(mon: QMP):
        path = mon.execute("query-cpus-fast")[0]["qom-path"]
        out = {}
        for p in qemu.PROPERTIES:
            try:
                out[p] = "on" if mon.execute("qom-get", {"path": path, "property": p}) else "off"
            except QMPError as e:
                if "not found" not in e.desc:
                    raise QMPClosed(str(e)) from None
                out[p] = "absent"
        return out

    start = time.monotonic()
    if runner.killed >= GIVE_UP_AFTER:
        why = f"not tried: {runner.killed} QEMUs did not answer within {runner.timeout:g} s"
        return Run(machine, mode, None, why, 0.0)
    try:
        got = runner.session(f"{machine},accel=kvm", mode.qemu_cpu, work)
        return Run(machine, mode, got, None, time.monotonic() - start)
    except QMPClosed as e:
        return Run(machine, mode, None, str(e), time.monotonic() - start)

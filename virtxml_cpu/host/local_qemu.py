"""The QEMU on this host: which binary, whether it may be run, as whom, and what it says of itself.

Every QEMU the tool runs goes through here (verify's paused QEMUs through verify/launch.py, with the same trust
check and user rule): one finder (this_host: libvirt's emulator where its capabilities cache names one,
else the first of CANDIDATES), one trust check, one unprivileged-user rule, one way to run a binary. The
hook runs nothing. Parsing what a QEMU answers is hostfacts' (pure; version_of here only formats).
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from ..core.hostfacts import HostFacts, build_from_version, parse_machine_help, qemu_answer
from ..core.hostfacts import parse_version_line
from ..tables.version import format_version
from ..fs.trusted import check_ancestors, check_trusted

# The binaries a local libvirt runs for x86 KVM guests: Debian, Ubuntu, SUSE, Arch; RHEL, Fedora's qemu-kvm.
CANDIDATES = ("qemu-system-x86_64", "/usr/libexec/qemu-kvm")
# Whom a QEMU runs as when we are root (as libvirt runs QEMU): the first of these that exists and is not
# uid 0, else uid/gid 65534; never with supplementary groups.
UNPRIVILEGED_USERS = ("libvirt-qemu", "qemu", "nobody")
NOBODY = 65534
PROBE_TIMEOUT = 10.0


class User(NamedTuple):
    name: str
    uid: int
    gid: int


def which(name: str, search: str | None = None) -> str | None:
    """The first executable `name` on PATH (or on `search`)."""
    for d in (search or os.environ.get("PATH", "/usr/bin:/bin")).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def find(binary: str | None = None) -> str | None:
    """`binary` (a path, or a name looked up on PATH), or the first of CANDIDATES there is; absolute."""
    for name in (binary,) if binary else CANDIDATES:
        path = name if os.path.isabs(name) else which(name)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


def libvirt_emulator(directory: str | None = None) -> str | None:
    """The emulator libvirt runs x86_64 guests with, as its capabilities cache names it (caps_cache.emulators),
    if it is still there to run: of several, the one named as the first of CANDIDATES is, else the first."""
    from .caps_cache import emulators

    found = [p for p in emulators("x86_64", directory) if os.path.isfile(p) and os.access(p, os.X_OK)]
    rank = {os.path.basename(c): i for i, c in enumerate(CANDIDATES)}
    return min(found, key=lambda p: rank.get(os.path.basename(p), len(rank)), default=None)


def this_host(directory: str | None = None) -> str | None:
    """This host's QEMU: libvirt's emulator wherever its cache names one, else find()'s."""
    return libvirt_emulator(directory) or find()


def untrusted(path: str) -> str | None:
    """Why `path` may not be run, or None: it must be a regular executable owned by root (or by the user
    we are, who could run it anyway) that nobody else may write, below directories nobody else may change
    (trusted.check_ancestors). As root that is root's alone."""
    owners = (0, os.geteuid())
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError as e:
        return f"{path}: {e.strerror}"
    if not (stat.S_ISREG(st.st_mode) and st.st_mode & 0o111):
        return f"{real} is not an executable file"
    why = check_trusted(st, owners)
    if why:
        return f"{real} {why}"
    return check_ancestors(real, owners)


def unprivileged_users():
    """The users a root-run QEMU may run as, in UNPRIVILEGED_USERS' order (uid 0 never)."""
    import pwd

    for name in UNPRIVILEGED_USERS:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        if pw.pw_uid != 0:
            yield User(name, pw.pw_uid, pw.pw_gid)


def unprivileged_user() -> User:
    return next(unprivileged_users(), User("nobody", NOBODY, NOBODY))


def unreachable(path: str, user: User) -> str | None:
    """Why `user` (no supplementary groups) cannot execute `path`: a directory on the way or the file
    itself without the search/execute bit for it. None when it can."""
    real = os.path.realpath(path)
    steps = [os.path.dirname(real)]
    while steps[-1] != "/":
        steps.append(os.path.dirname(steps[-1]))
    for p in reversed(steps):
        if not _may(p, user, 0o1):
            return f"{p}"
    return None if _may(real, user, 0o1) else real


def _may(path: str, user: User, bit: int) -> bool:
    st = os.stat(path)
    shift = 6 if st.st_uid == user.uid else 3 if st.st_gid == user.gid else 0
    return bool(st.st_mode >> shift & bit)


def run(path: str, *args: str, timeout: float = PROBE_TIMEOUT, as_root: bool = False) -> tuple[str | None, str]:
    """(stdout of `path args`, "") or (None, why it was not run or gave nothing). Only a trusted binary
    (untrusted() is None) runs; as root as unprivileged_user() with no supplementary groups, unless
    `as_root` (a binary root runs anyway: the hook's own interpreter); stdin closed, a bare environment,
    cwd /, bounded in time. The one way the tool runs a binary."""
    real = os.path.realpath(path)  # what was checked is what runs: no link to swap in between
    why = untrusted(real)
    if why:
        return None, f"not asked ({why})"
    drop = {}
    if os.geteuid() == 0 and not as_root:
        user = unprivileged_user()
        blocked = unreachable(real, user)
        if blocked:
            return None, f"not asked (as root the unprivileged user {user.name} cannot reach {blocked})"
        drop = dict(user=user.uid, group=user.gid, extra_groups=[])
    import subprocess  # only here: the hook never runs anything

    try:
        done = subprocess.run([real, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                              cwd="/", **drop)
    except subprocess.TimeoutExpired:
        return None, f"{real} {' '.join(args)} gave no answer within {timeout:g} s"
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return None, f"{real} {' '.join(args)}: {getattr(e, 'strerror', None) or e}"
    return done.stdout, ""


def run_trusted(path: str, *args: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """stdout of a trusted binary's `args`, or None (run() without the reason)."""
    return run(path, *args, timeout=timeout)[0]


def version_of(path: str) -> tuple[str, str] | None:
    """(version, package) from the first line of `path --version`, run() runs it; None when it
    was not run or named no release."""
    out = run_trusted(path, "--version")
    parsed = parse_version_line(out.splitlines()[0] if out and out.strip() else "")
    return (format_version(parsed[0]), parsed[1]) if parsed else None


def ask(path: str) -> tuple[HostFacts, str]:
    """What the QEMU at `path` says of itself: `--version` (release, package string) and `-machine help`
    (machine names, aliases, the default, descriptions). (facts, "") or (HostFacts(), why not)."""
    out, why = run(path, "--version")
    if out is None:
        return HostFacts(), why
    what = f"{path} --version"
    help_out, _ = run(path, "-machine", "help")
    machines = parse_machine_help(help_out or "", path)
    if machines.machines:
        machines = machines._replace(sources=(f"{path} -machine help",))
    facts = qemu_answer(build_from_version(out, what), machines, what)
    return (facts, "") if facts.qemu_version else (HostFacts(), f"{path} --version named no QEMU release")

"""The record of QEMU builds `verify` passed on this host, read by `apply` and `hook install`.

A note that the rules were never checked against the local QEMU is only worth something if nobody but
root can forge the record, so it is trusted only as a small root-owned file in a root-owned directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import time
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    from .verify import Outcome

DEFAULT_RECORD = "/var/lib/virtxml-cpu/verified.json"
MAX_RECORD_BYTES = 64 * 1024
LOCAL_EMULATORS = ("qemu-system-x86_64", "/usr/libexec/qemu-kvm")  # Debian/Ubuntu/SUSE/Arch; RHEL


def record_key(emulator: str, version: str, package: str) -> str:
    """A build is its path, version and package string: a rebuilt or patched package is another build."""
    return f"{emulator}|{version}|{package}"


def parse_version_line(text: str) -> tuple[str, str] | None:
    """`QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)` -> ("7.2.22", "Debian ...")."""
    m = re.search(r"version (\d+\.\d+(?:\.\d+)?)(?: \((.*)\))?", text)
    return (m.group(1), m.group(2) or "") if m else None


def local_emulator() -> str | None:
    """The QEMU a local libvirt would use: the first of LOCAL_EMULATORS on PATH."""
    for name in LOCAL_EMULATORS:
        path = shutil.which(name)
        if path:
            return os.path.abspath(path)
    return None


def local_build() -> tuple[str, str, str] | None:
    """(emulator, version, package) of the local QEMU, from its --version (no KVM needed)."""
    path = local_emulator()
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    parsed = parse_version_line(out.splitlines()[0] if out.strip() else "")
    return (path, *parsed) if parsed else None


def read_record(path: str = DEFAULT_RECORD) -> dict:
    """Verified builds; empty unless the file is a root-owned regular file nobody else may write, in a
    root-owned directory, small, and of the expected shape."""
    try:
        dst = os.stat(os.path.dirname(path) or ".")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022 or dst.st_uid != 0
                or dst.st_mode & 0o022 or st.st_size > MAX_RECORD_BYTES):
            return {}
        data = json.loads(os.read(fd, MAX_RECORD_BYTES + 1))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    verified = data.get("verified") if isinstance(data, dict) and data.get("format") == 1 else None
    if not isinstance(verified, dict):
        return {}
    return {k: v for k, v in verified.items() if isinstance(k, str) and isinstance(v, dict)}


def write_record(o: Outcome, path: str = DEFAULT_RECORD) -> str:
    """Note a pass (root only: the record is trusted because only root can write it)."""
    if os.geteuid() != 0:
        return f"not recorded in {path}: only root keeps the record of verified builds"
    verified = read_record(path)
    verified[o.build.key] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checks": o.checks,
                             "tool": __version__, "build": o.host.qemu_flavour}
    data = json.dumps({"format": 1, "verified": verified}, indent=1, sort_keys=True).encode()
    if len(data) > MAX_RECORD_BYTES:  # keep the newest entries
        verified = {o.build.key: verified[o.build.key]}
        data = json.dumps({"format": 1, "verified": verified}, indent=1, sort_keys=True).encode()
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as e:
        return f"not recorded in {path}: {e.strerror}"
    return f"recorded in {path}"


def unverified_note(path: str = DEFAULT_RECORD) -> str | None:
    """One line for `apply` and `hook install` when this host's QEMU build was never verified here."""
    build = local_build()
    if build is None or record_key(*build) in read_record(path):
        return None
    emulator, version, package = build
    return (f"note: the rules were never verified against {emulator} (QEMU {version}"
            + (f", {package}" if package else "") + ") on this host: run `virtxml-cpu verify` first")

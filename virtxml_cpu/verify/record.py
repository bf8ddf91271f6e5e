"""The record of QEMU builds `verify` passed on this host, read by `apply` and `hook install`.

A note that the rules were never checked against the local QEMU is only worth something if nobody but
root can forge the record, so it is trusted only as a small root-owned file in a root-owned directory.
"""

from __future__ import annotations

import json
import os
import time

from .. import __version__
from ..host import local_qemu
from ..errors import VirtxmlCpuError
from ..fs.files import write_output
from ..fs.trusted import check_trusted, read_regular, resolve_trusted
from ..constants import VERIFIED_RECORD
from .types import VerifyResult, record_key

MAX_RECORD_BYTES = 64 * 1024


def local_binary() -> tuple[str, str, str] | None:
    """(emulator, version, package) of this host's QEMU (local_qemu.this_host: libvirt's emulator where its
    capabilities cache names one), from its --version (no KVM needed): found, run and read by host/local_qemu.py
    alone (the one finder, runner and version parser)."""
    path = local_qemu.this_host()
    parsed = local_qemu.version_of(path) if path else None
    return (path, *parsed) if parsed else None


def read_record(path: str = VERIFIED_RECORD) -> dict:
    """Verified builds; empty unless the file is a root-owned regular file nobody else may write, in a
    root-owned directory nobody else may write, small, and of the expected shape."""
    try:
        if check_trusted(os.stat(os.path.dirname(path) or ".")) is not None:
            return {}
        raw, st = read_regular(path, MAX_RECORD_BYTES)
        if check_trusted(st) is not None:
            return {}
        data = json.loads(raw)
    except (OSError, ValueError):
        return {}
    verified = data.get("verified") if isinstance(data, dict) and data.get("format") == 1 else None
    if not isinstance(verified, dict):
        return {}
    return {k: v for k, v in verified.items() if isinstance(k, str) and isinstance(v, dict)}


def write_record(o: VerifyResult, path: str = VERIFIED_RECORD) -> str:
    """Note a pass (root only: the record is trusted because only root can write it)."""
    if os.geteuid() != 0:
        return f"not recorded in {path}: only root keeps the record of verified builds"
    verified = read_record(path)
    verified[o.binary.key] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checks": o.checks,
                             "tool": __version__, "build": o.host.qemu_build}
    data = json.dumps({"format": 1, "verified": verified}, indent=1, sort_keys=True).encode()
    if len(data) > MAX_RECORD_BYTES:  # keep the newest entries
        verified = {o.binary.key: verified[o.binary.key]}
        data = json.dumps({"format": 1, "verified": verified}, indent=1, sort_keys=True).encode()
    directory = os.path.dirname(path) or "."
    _real, why = resolve_trusted(directory, (0,), missing_ok=True)  # no one else's directory or link on the way
    if why:
        return f"not recorded in {path}: {why}"
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        write_output(path, data, [])  # root's rules: only root's links, nothing of another user's replaced
    except OSError as e:
        return f"not recorded in {path}: {e.strerror}"
    except VirtxmlCpuError as e:
        return f"not recorded: {e}"
    return f"recorded in {path}"


def unverified_note(path: str = VERIFIED_RECORD) -> str | None:
    """One line for `apply` and `hook install` when this host's QEMU build was never verified here."""
    binary = local_binary()
    if binary is None or record_key(*binary) in read_record(path):
        return None
    emulator, version, package = binary
    return (f"note: the rules were never verified against {emulator} (QEMU {version}"
            + (f", {package}" if package else "") + ") on this host: run `virtxml-cpu verify` first")

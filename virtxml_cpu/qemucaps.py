"""What libvirt already knows about a QEMU binary: its capabilities cache.

libvirtd probes every emulator once and keeps the answer as root-owned XML in
/var/cache/libvirt/qemu/capabilities/<sha256 of the emulator path>.xml: `<emulator>`, `<version>` (7002022
is 7.2.22), `<package>` (the build: "Debian 1:7.2+dfsg-7+deb12u18+b3", Ubuntu's says "ubuntu") and every
`<machine name alias default>`. The hook learns the QEMU build from here instead of running anything a
domain definition names. The parser is pure; the reader trusts only root-owned files nobody else can write.
"""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

from .hostfacts import HostFacts, flavour_of_package, probe_local_qemu, which
from .safefs import Untrusted, check_trusted, read_regular
from .xmlio import parse_xml

CACHE_DIR = "/var/cache/libvirt/qemu/capabilities"
MAX_CACHE_BYTES = 8 * 1024 * 1024  # about 220 KiB today (every CPU model); a runaway file is refused


class Machine(NamedTuple):
    name: str
    alias: str | None
    default: bool


class QemuCaps(NamedTuple):
    emulator: str
    version: tuple[int, int, int] | None
    package: str
    machines: tuple[Machine, ...]

    def host_facts(self, what: str) -> HostFacts:
        """The machine list and aliases, the release, and the build its package string names."""
        aliases = {m.alias: m.name for m in self.machines if m.alias}
        default = next((m.name for m in self.machines if m.default), None)
        if default:
            aliases[""] = default
        names = frozenset(m.name for m in self.machines) | frozenset(aliases) - {""}
        flavour = flavour_of_package(self.package) if self.version else None
        return HostFacts(aliases=aliases, machines=names, qemu_version=self.version, sources=(what,),
                         qemu_flavour=flavour,
                         flavour_source=f"{what}: package {self.package or '(none)'}" if flavour else "")


def parse(data: bytes) -> QemuCaps:
    """A capabilities cache file -> emulator, version, package, KVM machine types (BadInput if not one)."""
    root = parse_xml(data, "QEMU capabilities cache").getroot()
    if root.tag != "qemuCaps":
        raise ValueError("not a libvirt QEMU capabilities cache (<qemuCaps>)")
    raw = (root.findtext("version") or "").strip()
    version = None
    if raw.isdigit() and len(raw) <= 9:
        n = int(raw)
        version = (n // 1000000, n // 1000 % 1000, n % 1000)
    machines = [m for m in root.iterfind("machine") if m.get("type", "kvm") == "kvm"] or list(root.iterfind("machine"))
    return QemuCaps(
        emulator=(root.findtext("emulator") or "").strip(),
        version=version,
        package=(root.findtext("package") or "").strip(),
        machines=tuple(Machine(m.get("name", ""), m.get("alias"), m.get("default") == "yes")
                       for m in machines if m.get("name")),
    )


def cache_file(emulator: str, directory: str = CACHE_DIR) -> str:
    """libvirt names each cache file by the SHA-256 of the emulator path (virFileCacheGetFileName)."""
    return os.path.join(directory, hashlib.sha256(emulator.encode()).hexdigest() + ".xml")


def lookup(emulator: str | None, directory: str = CACHE_DIR) -> tuple[HostFacts, str]:
    """The facts libvirt cached for `emulator` (the domain's devices/emulator), and why they are missing
    when they are: (HostFacts(), reason). Only a root-owned directory and file nobody else can write count,
    and the file must say it describes exactly this emulator."""
    if not emulator or not os.path.isabs(emulator) or "\0" in emulator:
        return HostFacts(), "the domain names no absolute emulator path"
    path = cache_file(emulator, directory)
    try:
        why = check_trusted(os.stat(directory))
        if why:
            return HostFacts(), f"{directory} {why}"
        data, st = read_regular(path, MAX_CACHE_BYTES)
        why = check_trusted(st)
        if why:
            return HostFacts(), f"{path} {why}"
        caps = parse(data)
    except FileNotFoundError:
        return HostFacts(), f"libvirt has no capabilities cached for {emulator}"
    except (OSError, Untrusted) as e:
        return HostFacts(), f"{path}: {e.strerror or e}"
    except Exception as e:  # noqa: BLE001 - a malformed cache file is only a missing fact
        return HostFacts(), f"{path}: {e}"
    if caps.emulator != emulator:
        return HostFacts(), f"{path} describes {caps.emulator}, not {emulator}"
    return caps.host_facts(f"libvirt's capabilities cache for {emulator}"), ""


def local_qemu(binary: str = "qemu-system-x86_64") -> HostFacts:
    """The local QEMU's build for the CLI: what libvirt cached for it when readable, else its --version
    (run only when trusted, and unprivileged: hostfacts.probe_local_qemu)."""
    path = binary if os.path.isabs(binary) else which(binary)
    if not path:
        return HostFacts()
    cached, _why = lookup(path)
    return cached if cached.qemu_flavour else probe_local_qemu(path)

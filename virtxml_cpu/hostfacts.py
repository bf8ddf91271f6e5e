"""Host facts: what KVM supports (/dev/kvm), machine aliases (capabilities), the host-model CPU
(domain capabilities). Parsers are pure; the /dev/kvm probe is the only I/O here."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import struct
from collections import namedtuple

from .errors import BadInput
from .flavours import FLAVOURS
from .machines import classify, parse_version
from .safefs import check_ancestors, check_trusted
from .xmlio import parse_xml

KVM_GET_SUPPORTED_CPUID = 0xC008AE05  # _IOWR(KVMIO=0xAE, 0x05, struct kvm_cpuid2)
_ENTRY = struct.Struct("=IIIIIIIIII")  # function, index, flags, eax, ebx, ecx, edx, padding[3]
_REGS = ("eax", "ebx", "ecx", "edx")


class HostFacts(namedtuple("HostFacts", "cpuid aliases machines host_model qemu_version sources qemu_flavour "
                           "flavour_source version_source descriptions",
                           defaults=(None, {}, frozenset(), None, None, (), None, "", "", {},))):
    """Everything known about the host; empty fields mean 'not known'."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    cpuid: dict[tuple[int, str], int] | None  # KVM_GET_SUPPORTED_CPUID (index 0 entries)
    aliases: dict[str, str]  # pc -> pc-i440fx-7.2, "" -> default (never mutated)
    machines: frozenset[str]
    host_model: tuple[str | None, tuple[tuple[str, str], ...]] | None  # model, features
    qemu_version: tuple[int, ...] | None
    sources: tuple[str, ...]
    qemu_flavour: str | None  # upstream | ubuntu | rhel, when known
    flavour_source: str  # how it is known, for explain
    version_source: str  # how qemu_version is known, for explain
    descriptions: dict[str, str]  # machine name -> QEMU's description of it (`-machine help`; never mutated)

    def supports(self, leaf: int, reg: str, bit: int) -> bool | None:
        if self.cpuid is None:
            return None
        return bool(self.cpuid.get((leaf, reg), 0) >> bit & 1)

    def merged(self, other: "HostFacts") -> "HostFacts":
        return HostFacts(
            cpuid=other.cpuid if other.cpuid is not None else self.cpuid,
            aliases=other.aliases or self.aliases,
            machines=other.machines or self.machines,
            host_model=other.host_model or self.host_model,
            qemu_version=other.qemu_version or self.qemu_version,
            sources=self.sources + other.sources,
            qemu_flavour=other.qemu_flavour or self.qemu_flavour,
            flavour_source=other.flavour_source if other.qemu_flavour else self.flavour_source,
            version_source=(other.version_source or other.flavour_source) if other.qemu_version
            else self.version_source,
            descriptions=other.descriptions or self.descriptions,
        )


def decode_supported_cpuid(buf: bytes) -> dict[tuple[int, str], int]:
    """Decode a struct kvm_cpuid2 buffer into {(leaf, register): value} for sub-leaf 0."""
    (nent,) = struct.unpack_from("=I", buf, 0)
    out: dict[tuple[int, str], int] = {}
    for i in range(nent):
        fn, index, _flags, *regs = _ENTRY.unpack_from(buf, 8 + i * _ENTRY.size)[:7]
        if index == 0:
            for name, value in zip(_REGS, regs):
                out[(fn, name)] = value
    return out


def probe_kvm(device: str = "/dev/kvm") -> HostFacts:
    """KVM_GET_SUPPORTED_CPUID on /dev/kvm (no QEMU, no libvirt). Empty facts when unavailable."""
    try:
        fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return HostFacts()
    try:
        nent = 256
        while nent <= 4096:
            buf = bytearray(struct.pack("=II", nent, 0) + bytes(_ENTRY.size * nent))
            try:
                fcntl.ioctl(fd, KVM_GET_SUPPORTED_CPUID, buf, True)
            except OSError as e:
                if e.errno == errno.E2BIG:
                    nent *= 2
                    continue
                return HostFacts()
            return HostFacts(cpuid=decode_supported_cpuid(bytes(buf)), sources=(f"{device} (KVM_GET_SUPPORTED_CPUID)",))
        return HostFacts()
    finally:
        os.close(fd)


def parse_capabilities(data: bytes, arch: str = "x86_64") -> HostFacts:
    """`virsh capabilities` -> machine names and aliases (canonical='...') for one guest arch."""
    root = parse_xml(data, "capabilities").getroot()
    if root.tag != "capabilities":
        raise BadInput("capabilities file is not <capabilities> XML")
    aliases: dict[str, str] = {}
    machines: set[str] = set()
    emulator = ""
    for guest in root.iterfind("guest"):
        arch_el = guest.find("arch")
        if arch_el is None or arch_el.get("name") != arch:
            continue
        emulator = emulator or (arch_el.findtext("emulator") or "").strip()
        for i, m in enumerate(arch_el.iterfind("machine")):
            name = (m.text or "").strip()
            canonical = m.get("canonical")
            machines.add(name)
            if canonical:
                aliases[name] = canonical
                machines.add(canonical)
            if i == 0:  # libvirt lists QEMU's default machine first (virQEMUCapsProbeQMPMachineTypes)
                aliases.setdefault("", canonical or name)
    flavour, why = flavour_from_machines(machines, emulator)
    return HostFacts(aliases=aliases, machines=frozenset(machines), sources=("capabilities",),
                     qemu_flavour=flavour, flavour_source=why)


def flavour_from_machines(machines, emulator: str = "") -> tuple[str | None, str]:
    """The build a host's machine list (and emulator path) shows: its own machine names give it away."""
    for flavour in FLAVOURS.values():
        if flavour.emulator_marker and flavour.emulator_marker.search(emulator):
            return flavour.name, f"the emulator is {emulator}"
    for name in sorted(machines):
        owners = [f for f in FLAVOURS.values() if classify(name, f) is not None]
        if len(owners) == 1 and owners[0].name != "upstream" and name not in owners[0].aliases:
            return owners[0].name, f"the host's QEMU offers machine type {name}"
    if any(m.startswith(("pc-i440fx-", "pc-q35-")) for m in machines):
        return "upstream", "the host's QEMU offers only upstream machine type names"
    return None, ""


def flavour_of_package(text: str) -> str:
    """The build a QEMU package string names (`--version`'s first line, or libvirt's cached <package>):
    Ubuntu's and RHEL's say so; anything else (Debian's, a source build) is upstream."""
    for flavour in FLAVOURS.values():
        if flavour.version_marker and flavour.version_marker.search(text):
            return flavour.name
    return "upstream"


def flavour_from_version(text: str, what: str) -> HostFacts:
    """`qemu-system-x86_64 --version`: the package string names the build (Ubuntu, RHEL) or not (upstream)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    version = parse_qemu_version(first)
    if version is None:
        return HostFacts()
    return HostFacts(qemu_version=version, qemu_flavour=flavour_of_package(first), flavour_source=f"{what}: {first}",
                     sources=(what,))


UNPRIVILEGED_USERS = ("libvirt-qemu", "qemu", "nobody")  # who runs QEMU's --version when we are root
PROBE_TIMEOUT = 10.0


def probe_local_qemu(binary: str = "qemu-system-x86_64") -> HostFacts:
    """Ask a local QEMU binary for its version string (one short process, ~15 ms); empty facts when absent
    or not trustworthy (run_trusted says which binaries run, and as whom)."""
    path = binary if os.path.isabs(binary) else which(binary)
    out = run_trusted(path, "--version") if path else None
    return flavour_from_version(out, f"{path} --version") if out else HostFacts()


def run_trusted(path: str, *args: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """stdout of `path args` (a QEMU's or libvirtd's --version), or None. Only a root-owned binary in a
    root-owned directory, neither writable by group or others, is run; as root it runs as an unprivileged
    user with no supplementary groups (as libvirt runs QEMU), stdin closed, a bare environment, bounded in
    time. Every probe the CLI runs goes through here (verify's QEMUs through qemu_runner); the hook runs
    nothing."""
    real = os.path.realpath(path)  # what was checked is what runs: no link to swap in between
    if not trusted_executable(real):
        return None
    import subprocess  # only here: the hook never runs anything

    drop = _unprivileged() if os.geteuid() == 0 else {}
    try:
        return subprocess.run([real, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                              cwd="/", **drop).stdout
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def trusted_executable(path: str) -> bool:
    """Whether `path` is a root-owned regular executable nobody else may write, below directories nobody
    else may change (safefs.check_ancestors): what a root-run probe may execute."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return False
    return (stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111) and check_trusted(st) is None
            and check_ancestors(real) is None)


def _unprivileged() -> dict:
    import pwd

    for user in UNPRIVILEGED_USERS:
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            continue
        return dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
    return dict(user=65534, group=65534, extra_groups=[])


def which(name: str, search: str | None = None) -> str | None:
    """The first executable `name` on PATH (or on `search`)."""
    for d in (search or os.environ.get("PATH", "/usr/bin:/bin")).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def parse_domcapabilities(data: bytes) -> HostFacts:
    """`virsh domcapabilities` -> the host-model CPU libvirt would use, and the emulator version."""
    root = parse_xml(data, "domain capabilities").getroot()
    if root.tag != "domainCapabilities":
        raise BadInput("domain capabilities file is not <domainCapabilities> XML")
    mode = root.find("cpu/mode[@name='host-model']")
    host_model = None
    if mode is not None and mode.get("supported", "yes") == "yes":
        model_el = mode.find("model")
        model = (model_el.text or "").strip() if model_el is not None else None
        feats = tuple((f.get("name", ""), f.get("policy", "require")) for f in mode.iterfind("feature"))
        host_model = (model, feats)
    return HostFacts(host_model=host_model, sources=("domain capabilities",))


def parse_qemu_version(text: str) -> tuple[int, ...] | None:
    m = re.search(r"version ([0-9]+\.[0-9]+(?:\.[0-9]+)?)", text, re.ASCII)
    return parse_version(m.group(1)) if m else None

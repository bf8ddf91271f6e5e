"""Host facts: the model (HostFacts) and the pure parsers of what each source says: /dev/kvm's supported
CPUID, libvirt's capabilities and domain capabilities, a QEMU's `--version` and `-machine help`, libvirt's
integer version. No I/O here: the /dev/kvm probe is host/kvm.py's, running a QEMU host/local_qemu.py's, and
which source outranks which core/precedence.py's."""

from __future__ import annotations

import re
import struct
from collections import namedtuple
from collections.abc import Iterable

from ..tables import lazyre
from . import precedence  # module-level patterns compiled where first used (the hook's cold start)
from ..errors import BadInput
from ..tables.builds.known import BUILDS
from ..tables.version import Version, parse_version
from .machines import classify
from .memo import frozen
from ..xml.parse import parse_xml

ENTRY = struct.Struct("=IIIIIIIIII")  # function, index, flags, eax, ebx, ecx, edx, padding[3]
_REGS = ("eax", "ebx", "ecx", "edx")


class HostFacts(namedtuple("HostFacts", "cpuid aliases machines host_model qemu_version sources qemu_build "
                           "build_source version_source descriptions unused package",
                           defaults=(None, {}, frozenset(), None, None, (), None, "", "", {}, (), ""))):
    """Everything known about the host; empty fields mean 'not known'."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    cpuid: dict[tuple[int, str], int] | None  # KVM_GET_SUPPORTED_CPUID (index 0 entries)
    aliases: dict[str, str]  # pc -> pc-i440fx-7.2, "" -> default (never mutated)
    machines: frozenset[str]
    host_model: tuple[str | None, tuple[tuple[str, str], ...]] | None  # model, features
    qemu_version: Version | None
    sources: tuple[str, ...]
    qemu_build: str | None  # upstream | ubuntu | rhel, when known
    build_source: str  # how it is known, for explain
    version_source: str  # how qemu_version is known, for explain
    descriptions: dict[str, str]  # machine name -> QEMU's description of it (`-machine help`; never mutated)
    unused: tuple[str, ...]  # each source that could not be used, and why ("local QEMU: not asked (...)")
    package: str  # the QEMU's package string (qemu-kvm-10.1.0-17.el9), as it or libvirt's cache says; the
    #               RHEL major is read from it alone, never from the wording above (it can hold a URI or a path)

    def supports(self, leaf: int, reg: str, bit: int) -> bool | None:
        if self.cpuid is None:
            return None
        return bool(self.cpuid.get((leaf, reg), 0) >> bit & 1)



_KNOWN = ("cpuid", "aliases", "machines", "host_model", "descriptions")  # the build and release: precedence.settle


def combine(facts: Iterable[HostFacts]) -> HostFacts:
    """The facts of several sources, most authoritative first: each field from the first source that knows
    it, the build and the release by precedence.settle (their wording and package string with them), the
    sources and unused ones listed in order. Its mappings are FrozenDicts: the result is a hashable value
    (pipeline's memo key)."""
    facts = list(facts)
    out = {k: frozen(next((getattr(f, k) for f in facts if getattr(f, k) is not None and getattr(f, k) != {}
                    and getattr(f, k) != frozenset()), getattr(HostFacts(), k))) for k in _KNOWN}
    return precedence.settle(HostFacts(**out, sources=tuple(s for f in facts for s in f.sources),
                                       unused=tuple(u for f in facts for u in f.unused)),
                             [c for f in facts for c in precedence.from_each(f)])


def decode_supported_cpuid(buf: bytes) -> dict[tuple[int, str], int]:
    """Decode a struct kvm_cpuid2 buffer into {(leaf, register): value} for sub-leaf 0."""
    (nent,) = struct.unpack_from("=I", buf, 0)
    out: dict[tuple[int, str], int] = {}
    for i in range(nent):
        fn, index, _flags, *regs = ENTRY.unpack_from(buf, 8 + i * ENTRY.size)[:7]
        if index == 0:
            for name, value in zip(_REGS, regs):
                out[(fn, name)] = value
    return out


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
    build, why = build_from_machines(machines, emulator)
    return HostFacts(aliases=aliases, machines=frozenset(machines), sources=("capabilities",),
                     qemu_build=build, build_source=why)


def build_from_machines(machines, emulator: str = "") -> tuple[str | None, str]:
    """The build a host's machine list (and emulator path) shows: its own machine names give it away."""
    for build in BUILDS.values():
        if build.emulator_marker and build.emulator_marker.search(emulator):
            return build.name, f"the emulator is {emulator}"
    for name in sorted(machines):
        owners = [f for f in BUILDS.values() if classify(name, f) is not None]
        if len(owners) == 1 and owners[0].name != "upstream" and name not in owners[0].aliases:
            return owners[0].name, f"the host's QEMU offers machine type {name}"
    if any(m.startswith(("pc-i440fx-", "pc-q35-")) for m in machines):
        return "upstream", "the host's QEMU offers only upstream machine type names"
    return None, ""


def build_of_package(package: str) -> str:
    """The build a QEMU package string names (`--version`'s, query-version's, libvirt's cached <package>):
    Ubuntu's and RHEL's say so; anything else (Debian's, a source build) is upstream."""
    for build in BUILDS.values():
        if build.version_marker and build.version_marker.search(package):
            return build.name
    return "upstream"


def release_facts(release: Version, package: str, what: str, said: str | None = None) -> HostFacts:
    """A QEMU's release and package string as host facts: the one place they become a release, a build
    (build_of_package) and a package, whoever read them -- a --version line (build_from_version), QMP
    query-version (verify), libvirt's capabilities cache (caps_cache). `what` is the source, `said` its
    own words for explain (default: the package string)."""
    return HostFacts(qemu_version=release, qemu_build=build_of_package(package),
                     build_source=f"{what}: {said if said is not None else 'package ' + (package or '(none)')}",
                     sources=(what,), package=package)


def build_from_version(text: str, what: str) -> HostFacts:
    """`qemu-system-x86_64 --version`: its first line parsed (parse_version_line), then release_facts."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    parsed = parse_version_line(first)
    return release_facts(parsed[0], parsed[1], what, first) if parsed else HostFacts()


def qemu_answer(version: HostFacts, machines: HostFacts, what: str) -> HostFacts:
    """What one QEMU binary says of itself: its release and package (release_facts, from its --version or
    query-version), and its machine list (`-machine help` or query-machines); its build is the one
    precedence.own_build gives. No release is no answer at all."""
    if version.qemu_version is None:
        return HostFacts()
    build, by_machines = precedence.own_build(version.qemu_build, machines.qemu_build, machines.build_source)
    if by_machines is not None:
        version = version._replace(qemu_build=build, build_source=f"{what}: {by_machines}")
    return version._replace(aliases=machines.aliases, machines=machines.machines,
                            descriptions=machines.descriptions, sources=version.sources + machines.sources)


_MACHINE_LINE = lazyre.compile(r"^(\S+)\s+(.*?)((?:\s+\((?:alias of \S+|default|deprecated)\))*)\s*$")


def parse_machine_help(text: str, emulator: str = "") -> HostFacts:
    """`qemu-system-x86_64 -machine help` -> machine names, aliases ("q35 ... (alias of pc-q35-7.2)"), the
    default ("(default)") and QEMU's description of each machine (aliases' descriptions left out)."""
    aliases: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    names: set[str] = set()
    for line in text.splitlines()[1:]:
        m = _MACHINE_LINE.match(line)
        if not m or m.group(1) == "none":
            continue
        name, marks = m.group(1), m.group(3)
        names.add(name)
        target = re.search(r"\(alias of (\S+)\)", marks)
        if target:
            aliases[name] = target.group(1)
            names.add(target.group(1))
        else:
            descriptions[name] = m.group(2)
        if "(default)" in marks:
            aliases[""] = target.group(1) if target else name
    build, why = build_from_machines(names, emulator)
    return HostFacts(aliases=aliases, machines=frozenset(names), descriptions=descriptions,
                     qemu_build=build, build_source=why)


def decode_libvirt_version(n: int | str | None) -> tuple[int, int, int] | None:
    """libvirt's integer QEMU version (getVersion, a capabilities cache's <version>): 7002022 is 7.2.22.
    ASCII digits only, at most 9 of them; 0 or anything else is no version."""
    if isinstance(n, str):
        n = n.strip()
        if not (n.isascii() and n.isdigit() and len(n) <= 9):
            return None
        n = int(n)
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n < 10**9:
        return None
    return (n // 1000000, n // 1000 % 1000, n % 1000)


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


# The first "version X.Y[.Z]" of the line, as QEMU prints it; an earlier "version 7" is passed over, and of a
# longer number its first three parts are read.
_VERSION_LINE = lazyre.compile(r"version ([0-9]+\.[0-9]+(?:\.[0-9]+)?)(?: \((.*)\))?", lazyre.ASCII)


def parse_version_line(text: str) -> tuple[Version, str] | None:
    """`QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)` -> ((7, 2, 22), "Debian ...");
    ASCII digits only (the one parser of a QEMU's version line)."""
    m = _VERSION_LINE.search(text)
    return (parse_version(m.group(1)), m.group(2) or "") if m else None


def parse_qemu_version(text: str) -> Version | None:
    parsed = parse_version_line(text)
    return parsed[0] if parsed else None

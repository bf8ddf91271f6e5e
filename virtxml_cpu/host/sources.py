"""Host sources, assembled once: every shell (explain/rewrite, audit/apply/watch, the hook, verify) names
its sources in one HostSources, and assemble() alone asks them and puts their answers in order.

The order of the sources, for the QEMU build and the QEMU release separately and for the other facts
(machine names, aliases, the default machine, QEMU's descriptions of its machines: from the first source
that has them), is core/precedence.py's HOST_FACT_SOURCES; KVM's CPUID comes from /dev/kvm only, the
host-model CPU from libvirt only.

A source a shell does not have is None (nothing is said about it); one it chose not to ask is NotAsked(why);
either way, or when asking failed, the facts' `unused` says so ("local QEMU: not asked (...)"), and
explain and the hook show it.
"""

from __future__ import annotations

from collections import namedtuple

from ..core import precedence
from . import caps_cache
from ..core.config import Config
from ..errors import BadInput, shown
from ..core.hostfacts import HostFacts, combine
from .kvm import probe_kvm

LOCAL = "<local QEMU>"  # caps_cache: the capabilities cache of the local QEMU (local_qemu.this_host)


class NotAsked(namedtuple("NotAsked", "why")):
    """A source deliberately not asked, and why (said as explain shows it)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    why: str


class HostSources(namedtuple("HostSources", "build release emulator config connect capabilities "
                             "domcapabilities libvirt_qemu caps_cache caps_dir digest_dir local_qemu kvm",
                             defaults=(None, None, None, Config()) + (None,) * 7 + (False, False))):
    """Every source of host facts, as the shells name them (their order: precedence.HOST_FACT_SOURCES)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    build: str | None  # --qemu-build
    release: str | None  # --qemu-version
    emulator: str | HostFacts | None  # --emulator PATH, or what that QEMU answered (verify)
    config: Config  # qemu_build, qemu_version
    connect: str | tuple | None  # a libvirt URI to open, or (an open connection, its URI)
    capabilities: str | None  # a `virsh capabilities` file (- for stdin)
    domcapabilities: str | None  # a `virsh domcapabilities` file
    libvirt_qemu: HostFacts | None  # verify --connect: what libvirt's emulator answered
    caps_cache: str | NotAsked | None  # the emulator whose libvirt capabilities cache to read, or LOCAL
    caps_dir: str | None  # None: libvirt's (caps_cache.CACHE_DIR)
    digest_dir: str | None  # where parsed caches are kept (the hook's, beside its spool)
    local_qemu: bool | NotAsked | HostFacts  # ask the local QEMU, or what it answered (verify)
    kvm: bool | NotAsked  # KVM_GET_SUPPORTED_CPUID on /dev/kvm


def on_connection(src: HostSources, conn, uri: str) -> HostSources:
    """The sources of one host of audit, apply or watch: the open connection; /dev/kvm only when the URI
    is this host."""
    from .connection import is_local

    kvm = src.kvm if src.kvm is not True or is_local(uri) else NotAsked(f"{uri} is another host")
    return src._replace(connect=(conn, uri), kvm=kvm)


def connection_facts(src: HostSources | None, cfg: Config, conn, uri: str) -> HostFacts:
    """One host's facts for audit, apply and watch (`src` None: the config's sources and /dev/kvm)."""
    return assemble(on_connection(src or HostSources(config=cfg, kvm=True), conn, uri))


def _has(f: HostFacts) -> list:
    return [precedence.from_facts(f)] if f.qemu_version else []


def assemble(src: HostSources) -> HostFacts:
    """The host facts the sources give, put in precedence's order; BadInput when --emulator names no QEMU."""
    unused: list[str] = []
    kvm = _kvm(src.kvm, unused)
    named = _named(src.emulator)
    libvirt = _libvirt(src)
    cache, cached_path = _cache(src, unused)
    local = _local(src, cache, cached_path, unused)
    qemus = [f for f in (src.libvirt_qemu, cache) if f is not None and f.qemu_version]  # libvirt's emulator, its cache
    facts = combine([kvm] + precedence.in_order({"named QEMU": [named], "libvirt": [libvirt, *qemus],
                                                  "local QEMU": [local]}))  # /dev/kvm alone gives the CPUID
    claims = precedence.in_order({
        "command line": precedence.from_command_line(src.build, src.release),
        "named QEMU": _has(named),
        "config": precedence.from_config(src.config),
        "libvirt": precedence.libvirt_claims(libvirt) + [c for f in qemus for c in _has(f)],
        "local QEMU": _has(local),
        "upstream names": precedence.weak_libvirt_claims(libvirt),
    })  # the machine name's step is per domain: precedence.builds_for
    return precedence.settle(facts, claims)._replace(unused=facts.unused + tuple(unused))


def _kvm(kvm, unused: list[str]) -> HostFacts:
    if isinstance(kvm, NotAsked):
        unused.append(f"/dev/kvm: not read ({kvm.why})")
    return probe_kvm() if kvm is True else HostFacts()


def _named(emulator) -> HostFacts:
    if emulator is None or isinstance(emulator, HostFacts):
        return emulator or HostFacts()
    from . import local_qemu

    path = local_qemu.find(emulator)
    facts, why = local_qemu.ask(path) if path else (HostFacts(), "not an executable file")
    if facts.qemu_version is None:
        raise BadInput(f"--emulator {shown(emulator)}: not a QEMU that answers --version ({why}; only a binary "
                       "root owns that nobody else may write, in such a directory, is run)")
    return facts


def _libvirt(src: HostSources) -> HostFacts:
    """The connection's facts, then the files' (one of them is given, in practice)."""
    parts = []
    if src.connect:
        from . import connection

        if isinstance(src.connect, tuple):
            parts.append(connection.host_facts_from(*src.connect))
        else:
            parts.append(connection.host_facts(src.connect))
    if src.capabilities or src.domcapabilities:
        from ..fs.files import read_input
        from ..core.hostfacts import parse_capabilities, parse_domcapabilities

        if src.capabilities:
            parts.append(parse_capabilities(read_input(src.capabilities)))
        if src.domcapabilities:
            parts.append(parse_domcapabilities(read_input(src.domcapabilities)))
    return combine(parts)


def _cache(src: HostSources, unused: list[str]) -> tuple[HostFacts | None, str | None]:
    """libvirt's capabilities cache for the emulator named (LOCAL: the local QEMU's), and that path."""
    target = src.caps_cache
    if target is None:
        return None, None
    if isinstance(target, NotAsked):
        unused.append(f"libvirt's capabilities cache: not read ({target.why})")
        return None, None
    if target == LOCAL:
        target = _this_host(src)
        if target is None:
            return None, None  # the local QEMU's line says so
    facts, why = caps_cache.lookup(target, src.caps_dir or caps_cache.CACHE_DIR, src.digest_dir)
    if why:
        unused.append(f"libvirt's capabilities cache: {why}")
    return facts, target


def _this_host(src: HostSources) -> str | None:
    """The local QEMU: this host's, as hook status, verify and hook install name it."""
    from . import local_qemu

    return local_qemu.this_host(src.caps_dir)


def _local(src: HostSources, cache: HostFacts | None, cached_path: str | None, unused: list[str]) -> HostFacts:
    local = src.local_qemu
    if isinstance(local, HostFacts):
        return local
    if isinstance(local, NotAsked):
        unused.append(f"local QEMU: not asked ({local.why})")
    if local is not True:
        return HostFacts()
    from . import local_qemu

    path = cached_path if src.caps_cache == LOCAL else _this_host(src)
    if path is None:
        unused.append(f"local QEMU: none found (libvirt's capabilities cache names none; "
                      f"{' on PATH, '.join(local_qemu.CANDIDATES)})")
        return HostFacts()
    if cache is not None and cache.qemu_version and cached_path == path:
        return HostFacts()  # libvirt's cache answered for this very binary: nothing to run
    facts, why = local_qemu.ask(path)
    if why:
        unused.append(f"local QEMU: {why}")
    return facts

"""The libvirt connection (libvirt-python imported lazily: file mode works without it)."""

from __future__ import annotations

from urllib.parse import urlparse

from .errors import EnvironmentProblem
from .hostfacts import HostFacts, parse_capabilities, parse_domcapabilities, probe_kvm


def libvirt_module():
    try:
        import libvirt  # noqa: PLC0415
    except ImportError:
        raise EnvironmentProblem("libvirt-python is not installed (pip install 'virtxml-cpu[libvirt]')") from None
    return libvirt


def open_connection(uri: str, read_only: bool = True):
    libvirt = libvirt_module()
    libvirt.registerErrorHandler(lambda *_: None, None)  # errors become exceptions, not stderr noise
    try:
        return libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"cannot connect to {uri}: {e.get_error_message()}") from None


def open_for_reading(uri: str):
    """Read-write when allowed (domain capabilities need it), else read-only."""
    try:
        return open_connection(uri, read_only=False)
    except EnvironmentProblem:
        return open_connection(uri)


def host_facts(uri: str) -> HostFacts:
    """Machine aliases, the host-model CPU and the QEMU version from a new libvirt connection."""
    conn = open_for_reading(uri)
    try:
        return host_facts_from(conn, uri)
    finally:
        conn.close()


def host_facts_from(conn, uri: str) -> HostFacts:
    """The same facts from an open connection (one connection per host: over ssh each costs a handshake)."""
    libvirt = libvirt_module()
    try:
        caps = parse_capabilities(conn.getCapabilities().encode())
        try:
            dom = parse_domcapabilities(conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0).encode())
        except libvirt.libvirtError:  # read-only connections may not ask
            dom = HostFacts()
        v = conn.getVersion()
        version = (v // 1000000, v // 1000 % 1000, v % 1000)
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    facts = caps.merged(dom)
    return facts._replace(qemu_version=version, sources=tuple(f"{s} ({uri})" for s in facts.sources),
                   flavour_source=f"{facts.flavour_source} ({uri})" if facts.qemu_flavour else "")


def is_local(uri: str) -> bool:
    """/dev/kvm describes this host only when the URI has no remote host part."""
    return not urlparse(uri).hostname


def connection_host_facts(conn, uri: str, probe: bool, qemu_flavour: str | None = None) -> HostFacts:
    """Facts for the host behind an open connection: /dev/kvm when it is this host, then libvirt's; a
    configured QEMU flavour outranks the one libvirt's machine list shows."""
    local = probe_kvm() if probe and is_local(uri) else HostFacts()
    facts = local.merged(host_facts_from(conn, uri))
    if qemu_flavour:
        facts = facts._replace(qemu_flavour=qemu_flavour, flavour_source="configured qemu_flavour")
    return facts

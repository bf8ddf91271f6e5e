"""The libvirt connection (libvirt-python imported lazily: file mode works without it)."""

from __future__ import annotations

from .errors import EnvironmentProblem
from .hostfacts import HostFacts, parse_capabilities, parse_domcapabilities


def _libvirt():
    try:
        import libvirt  # noqa: PLC0415
    except ImportError:
        raise EnvironmentProblem("libvirt-python is not installed (pip install 'virtxml-cpu[libvirt]')") from None
    return libvirt


def open_connection(uri: str, read_only: bool = True):
    libvirt = _libvirt()
    libvirt.registerErrorHandler(lambda *_: None, None)  # errors become exceptions, not stderr noise
    try:
        return libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"cannot connect to {uri}: {e.get_error_message()}") from None


def host_facts(uri: str) -> HostFacts:
    """Machine aliases, the host-model CPU and the QEMU version from a libvirt connection."""
    libvirt = _libvirt()
    try:  # domain capabilities need a read-write connection; fall back to read-only without them
        conn = open_connection(uri, read_only=False)
    except EnvironmentProblem:
        conn = open_connection(uri)
    try:
        caps = parse_capabilities(conn.getCapabilities().encode())
        try:
            dom = parse_domcapabilities(conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0).encode())
        except libvirt.libvirtError:
            dom = HostFacts()
        v = conn.getVersion()
        version = (v // 1000000, v // 1000 % 1000, v % 1000)
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    finally:
        conn.close()
    facts = caps.merged(dom)
    return HostFacts(facts.cpuid, facts.aliases, facts.machines, facts.host_model, version,
                     tuple(f"{s} ({uri})" for s in facts.sources))

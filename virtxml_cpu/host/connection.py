"""The libvirt connection (libvirt-python imported lazily: file mode works without it)."""

from __future__ import annotations

import errno
import threading
from urllib.parse import urlparse

from ..errors import AccessDenied, EnvironmentProblem, HostTimeout
from ..core.hostfacts import HostFacts, combine, decode_libvirt_version, parse_capabilities, parse_domcapabilities
from ..core.precedence import DEFAULT_TIMEOUT


def libvirt_module():
    try:
        import libvirt  # noqa: PLC0415
    except ImportError:
        raise EnvironmentProblem("the libvirt Python binding is missing (Debian: apt-get install python3-libvirt; "
                                 "pip: pip install 'virtxml-cpu[libvirt]')") from None
    return libvirt


_EVENT_LOOP = threading.Lock()
_event_loop_running = False


def ensure_event_loop() -> None:
    """libvirt's default event loop, in a daemon thread: keepalive needs it to notice a silent peer.
    Registered once per process, before the first connection is opened."""
    global _event_loop_running
    with _EVENT_LOOP:
        if _event_loop_running:
            return
        libvirt = libvirt_module()
        libvirt.virEventRegisterDefaultImpl()

        def run():
            while True:
                libvirt.virEventRunDefaultImpl()

        threading.Thread(target=run, name="libvirt-events", daemon=True).start()
        _event_loop_running = True


def keepalive(timeout: float) -> tuple[int, int]:
    """libvirt keepalive (interval, count) that drops a peer silent for about `timeout` seconds."""
    interval = max(1, int(timeout // 5))
    return interval, max(1, int(timeout // interval) - 1)


def open_connection(uri: str, read_only: bool = True, timeout: float | None = DEFAULT_TIMEOUT):
    """Open with a bound on the whole handshake (TCP, RPC, authentication): a peer that accepts and stays
    silent is a HostTimeout after `timeout` seconds, not a hang. The open goes on in a daemon thread that is
    abandoned (and its connection closed, should it ever complete). Keepalive then bounds every call."""
    libvirt = libvirt_module()
    libvirt.registerErrorHandler(lambda *_: None, None)  # errors become exceptions, not stderr noise
    if timeout is not None:
        ensure_event_loop()
    box: dict = {}
    lock = threading.Lock()
    done = threading.Event()

    def worker():
        try:
            conn = libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
        except libvirt.libvirtError as e:
            conn, box["error"] = None, e
        with lock:
            if box.get("abandoned") and conn is not None:
                conn.close()
            else:
                box["conn"] = conn
        done.set()

    threading.Thread(target=worker, name=f"open {uri}", daemon=True).start()
    if not done.wait(timeout):
        with lock:
            box["abandoned"] = True
            late = box.pop("conn", None)
        if late is None:
            raise HostTimeout(f"{uri}: no answer within {timeout:g}s while connecting (timed out)")
        box["conn"] = late
    if "error" in box:
        kind = AccessDenied if denied(box["error"]) else EnvironmentProblem
        raise kind(f"cannot connect to {uri}: {box['error'].get_error_message()}") from None
    conn = box["conn"]
    if timeout is not None:
        try:
            conn.setKeepAlive(*keepalive(timeout))
        except libvirt.libvirtError:
            pass  # a local driver without keepalive: nothing can stall there
    return conn


def close_watching(conn, callback_id) -> None:
    """Stop the events registered as `callback_id` and close `conn`; a connection already lost is closed."""
    try:
        conn.domainEventDeregisterAny(callback_id)
        conn.close()
    except libvirt_module().libvirtError:
        pass


def denied(e) -> bool:
    """Whether a libvirt error says this user may not (authentication, access control, the socket's
    permissions), as opposed to a daemon that is not there."""
    libvirt = libvirt_module()
    codes = {getattr(libvirt, n, None) for n in ("VIR_ERR_AUTH_FAILED", "VIR_ERR_AUTH_UNAVAILABLE",
                                                 "VIR_ERR_AUTH_CANCELLED", "VIR_ERR_ACCESS_DENIED",
                                                 "VIR_ERR_OPERATION_DENIED")} - {None}
    code = e.get_error_code()
    return code in codes or (code == libvirt.VIR_ERR_SYSTEM_ERROR and (e.err or ())[7:8] == (errno.EACCES,))


def open_for_reading(uri: str, timeout: float | None = DEFAULT_TIMEOUT):
    """Read-write when allowed (domain capabilities need it), else read-only; a timeout is final."""
    try:
        return open_connection(uri, read_only=False, timeout=timeout)
    except HostTimeout:
        raise
    except EnvironmentProblem as e:
        refused = e
    try:
        return open_connection(uri, timeout=timeout)
    except HostTimeout:
        raise
    except EnvironmentProblem as e:
        if isinstance(refused, AccessDenied) and not isinstance(e, AccessDenied):
            # refused read-write, and read-only failed too (e.g. its polkit check, without a system bus):
            # this user is not let in
            raise AccessDenied(f"{refused}; read-only: {str(e).split(': ', 1)[-1]}") from None
        raise


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
        v = conn.getVersion() if conn.getType() == "QEMU" else 0  # other drivers' versions are not QEMU's
        version = decode_libvirt_version(v)
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    facts = combine([caps, dom])
    return facts._replace(qemu_version=version, version_source=f"libvirt {uri}: the hypervisor version" if version else "",
                          sources=tuple(f"{s} ({uri})" for s in facts.sources),
                          build_source=f"{facts.build_source} ({uri})" if facts.qemu_build else "")


def emulator_for(uri: str) -> tuple[str, str | None]:
    """The emulator libvirt uses for x86_64 KVM domains (domain capabilities <path>) and the QEMU version
    libvirt reports for it: what verify --connect starts, on this host only."""
    from ..tables.version import format_version
    from ..errors import BadInput
    from ..xml.parse import parse_xml

    if not is_local(uri):
        raise BadInput(f"{uri}: verify starts QEMU on this host; give a local URI or run it on that host")
    conn = open_for_reading(uri)
    try:
        caps = conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0)
        v = conn.getVersion()
    except libvirt_module().libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    finally:
        conn.close()
    path = (parse_xml(caps.encode(), "domain capabilities").getroot().findtext("path") or "").strip()
    if not path:
        raise EnvironmentProblem(f"{uri}: the domain capabilities name no emulator")
    version = decode_libvirt_version(v)
    return path, format_version(version) if version else None


def is_local(uri: str) -> bool:
    """/dev/kvm describes this host only when the URI has no remote host part."""
    return not urlparse(uri).hostname

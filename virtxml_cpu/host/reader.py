"""Reading domains from libvirt, in one place: which domains a verb works on, and the flags a definition
is read with (Nova's guest.py is the model: one place puts the XMLDesc flags together)."""

from __future__ import annotations

from .connection import libvirt_module


def domains(conn, names=(), listed=None) -> tuple[list, list[tuple[str, str]]]:
    """(domains, unknown): every domain on the connection when no names are given, else each name's
    domain in the order given, and (name, libvirt's message) for each name libvirt does not know. Names
    are picked from `listed` when the caller has listed anyway (no round trip per name; a name not in it
    is asked of libvirt: defined since, or libvirt's own message why not); without a listing each name is
    looked up, and nothing is listed (one user may look domains up whom libvirt's ACL does not let list
    them). A name is taken exactly as written."""
    if not names:
        return list(conn.listAllDomains() if listed is None else listed), []
    libvirt = libvirt_module()
    by_name = {d.name(): d for d in listed} if listed is not None else {}
    found, unknown = [], []
    for name in names:
        dom = by_name.get(name)
        if dom is None:
            try:
                dom = conn.lookupByName(name)
            except libvirt.libvirtError as e:
                unknown.append((name, e.get_error_message()))
                continue
        found.append(dom)
    return found, unknown


def definition(dom, secure: bool = False, persistent: bool | None = None) -> bytes:
    """The domain's definition: the persistent one (INACTIVE) when it has one, else the running one.
    `secure` adds what libvirt keeps back otherwise (passwords): a definition to be defined again needs
    it. `persistent`: when the caller knows already (from a listing), no round trip asks."""
    libvirt = libvirt_module()
    if persistent is None:
        persistent = dom.isPersistent()
    flags = (libvirt.VIR_DOMAIN_XML_INACTIVE if persistent else 0) | (libvirt.VIR_DOMAIN_XML_SECURE if secure else 0)
    return dom.XMLDesc(flags).encode()


def running(dom) -> bytes:
    """The running guest's definition, as it was started (live changes included)."""
    return dom.XMLDesc(0).encode()

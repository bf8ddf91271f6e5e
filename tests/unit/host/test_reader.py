"""host/reader.py, the one place that picks a verb's domains and reads their definitions, on libvirt's test
driver (no daemon): the listing, names in the order given (one that is not a domain is libvirt's own
message), and the flags a definition is read with."""

from __future__ import annotations

import pytest

libvirt = pytest.importorskip("libvirt")

from virtxml_cpu.host import reader  # noqa: E402

SECRET = "<graphics type='vnc' port='-1' autoport='yes' passwd='s3cret'/>"


@pytest.fixture
def conn(tmp_path):
    """A driver of its own: "test" running, "shut off" (with a no-break space) defined and shut off."""
    node = tmp_path / "node.xml"
    node.write_text("<node><domain type='test'><name>test</name><memory>65536</memory><os><type>hvm</type></os>"
                    "</domain></node>")
    c = libvirt.open(f"test://{node}")
    c.defineXML("<domain type='test'><name>shut\u00a0off</name><memory>65536</memory>"
                f"<os><type>hvm</type></os><devices>{SECRET}</devices></domain>")
    yield c
    c.close()


def test_every_domain_without_names_and_each_name_in_order_with_the_unknown_ones_apart(conn):
    doms, unknown = reader.domains(conn)
    assert sorted(d.name() for d in doms) == ["shut\u00a0off", "test"] and unknown == []
    doms, unknown = reader.domains(conn, ["test", "nope", "shut\u00a0off", "shut off"])
    assert [d.name() for d in doms] == ["test", "shut\u00a0off"]  # a name exactly as written: NBSP is not a blank
    assert [name for name, _ in unknown] == ["nope", "shut off"]
    assert all(message and message == conn_error(conn, name) for name, message in unknown), unknown


def conn_error(conn, name: str) -> str:
    try:
        conn.lookupByName(name)
    except libvirt.libvirtError as e:
        return e.get_error_message()
    return ""


def test_a_name_defined_after_the_listing_is_asked_of_libvirt(conn):
    listed = conn.listAllDomains()
    conn.defineXML("<domain type='test'><name>late</name><memory>65536</memory><os><type>hvm</type></os></domain>")
    doms, unknown = reader.domains(conn, ["late"], listed)
    assert [d.name() for d in doms] == ["late"] and unknown == []


class Unlisting:
    """The connection as a user sees it whom libvirt's ACL lets look domains up but not list them
    (no connect:search_domains)."""

    def __init__(self, conn):
        self.conn = conn

    def listAllDomains(self, flags=0):  # noqa: N802 - libvirt's name
        raise libvirt.libvirtError("access denied: 'search_domains'")

    def lookupByName(self, name):  # noqa: N802
        return self.conn.lookupByName(name)


def test_names_without_a_listing_are_looked_up_and_nothing_is_listed(conn):
    doms, unknown = reader.domains(Unlisting(conn), ["shut\u00a0off", "nope"])
    assert [d.name() for d in doms] == ["shut\u00a0off"] and [name for name, _ in unknown] == ["nope"]
    with pytest.raises(libvirt.libvirtError):
        reader.domains(Unlisting(conn))  # every domain: that is a listing


def test_the_persistent_definition_and_the_secrets_only_when_asked(conn):
    dom = conn.lookupByName("shut\u00a0off")
    assert reader.definition(dom) == dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).encode()
    assert b"s3cret" not in reader.definition(dom) and b"s3cret" in reader.definition(dom, secure=True)
    assert reader.definition(dom, persistent=True) == reader.definition(dom)
    running = conn.lookupByName("test")
    assert reader.running(running) == running.XMLDesc(0).encode()

"""The guest OS a domain names, through the real libvirtd: libvirt keeps virt-install's libosinfo metadata,
audit shows it, and apply leaves a RHEL 7.3 guest (kernel known to oops with PV spinlocks on AMD hosts)
without kvm-pv-unhalt while a CentOS 6.5 guest next to it gets the bit. About ten seconds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
HM = "<cpu mode='host-model' check='partial'/>"
INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE


def cli(*args, check):
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == check, (r.returncode, r.stdout, r.stderr)
    return r


def define(conn, stem, os_id):
    name = harness.unique_name(stem)
    xml = harness.boot_sector_guest(name, "pc-q35-7.2", HM).replace(b"  <memory", (
        "  <metadata>\n    <libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>\n"
        f"      <libosinfo:os id='{os_id}'/>\n    </libosinfo:libosinfo>\n  </metadata>\n  <memory").encode(), 1)
    return conn.defineXML(harness.startable(xml).decode())


@pytest.fixture
def conn(lab_up):
    """Its own connection, touching only the domains this test defines (no sweep of the shared lab)."""
    c = lab_up.connect()
    yield c
    c.close()


def test_audit_and_apply_take_the_named_guest_os_into_account(conn):
    rhel = define(conn, "os-rhel73", "http://redhat.com/rhel/7.3")
    centos = define(conn, "os-centos65", "http://centos.org/centos/6.5")
    try:
        r = cli("audit", "--format", "json", rhel.name(), centos.name(), check=1)
        docs = {d["domain"]: d for d in map(json.loads, r.stdout.splitlines()) if d.get("domain")}
        assert docs[rhel.name()]["guest_os"]["libosinfo_id"] == "http://redhat.com/rhel/7.3"
        assert (docs[rhel.name()]["decision"]["action"], docs[rhel.name()]["decision"]["rule"]) == \
               ("keep", "guest-kernel")
        assert docs[centos.name()]["guest_os"]["kernel"] == "no-pv-spinlocks"
        assert docs[centos.name()]["decision"]["action"] == "inject"

        before = rhel.XMLDesc(INACTIVE)
        cli("apply", "--yes", rhel.name(), centos.name(), check=0)
        assert rhel.XMLDesc(INACTIVE) == before
        after = centos.XMLDesc(INACTIVE)
        assert "<pvspinlock state='on'/>" in after and "http://centos.org/centos/6.5" in after
    finally:
        for dom in (rhel, centos):
            dom.undefine()

"""Guests a stack owns, on real libvirt in both labs (libvirt 9.0 + QEMU 7.2 on the host, libvirt 11.3 + QEMU
10.0 in the bookworm-backports chroot), with the hook in enforce mode: a Nova-, an oVirt- and a KubeVirt-shaped
guest (defined, then started) and an OpenNebula- and a CloudStack-shaped guest (started as transient
domains, as those stacks do) all start and log decision=managed with their stack and knob; a plain guest
started with `virsh create` starts and logs decision=transient (libvirt keeps no NAME.xml for it at
`prepare begin`); a plain persistent guest is refused. And `apply --all --yes` over one guest of each stack
and a plain one changes only the plain one."""

from __future__ import annotations

import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import pytest
from lxml import etree

from tests.lab import harness

from tests.support import FIXTURES, ROOT, require_lab
from tests.lab.hooks import MACHINE, in_every_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
HM = "<cpu mode='host-model' check='partial'/>"
# fixture -> (stack, started as libvirt is asked by that stack: persistent define + start, or transient create)
SHAPED = {"stack-nova.xml": ("OpenStack Nova", "define"), "stack-ovirt.xml": ("oVirt/VDSM", "define"),
          "stack-kubevirt.xml": ("KubeVirt", "define"), "stack-opennebula.xml": ("OpenNebula", "create"),
          "stack-cloudstack.xml": ("Apache CloudStack", "create")}


def shaped(fixture: str | None, stem: str, lab) -> bytes:
    """A startable boot-sector guest carrying the fixture's <metadata> and <sysinfo><system> (the stack's own
    marks, as its source writes them)."""
    name = harness.unique_name(stem)
    guest = etree.fromstring(harness.startable(harness.boot_sector_guest(name, MACHINE[lab.key], HM, lab=lab)))
    if fixture is not None:
        src = etree.parse(str(FIXTURES / fixture)).getroot()
        meta = src.find("metadata")
        if meta is not None:
            guest.append(meta)
        system = src.find("sysinfo/system")
        if system is not None:
            sysinfo = etree.SubElement(guest, "sysinfo", type="smbios")
            sysinfo.append(system)
            etree.SubElement(guest.find("os"), "smbios", mode="sysinfo")
            for entry in system.findall("entry[@name='uuid']"):  # libvirt wants the domain's own uuid there
                system.remove(entry)
    return etree.tostring(guest)


def start(conn, xml: bytes, how: str):
    flags = libvirt.VIR_DOMAIN_START_PAUSED
    if how == "create":
        return conn.createXML(xml.decode(), flags)
    dom = conn.defineXML(xml.decode())
    harness.create(dom, flags)
    return dom


def gone(dom, lab) -> None:
    with suppress(libvirt.libvirtError):
        if dom.isActive():
            dom.destroy()
    with suppress(libvirt.libvirtError):
        if dom.isPersistent():
            dom.undefine()
    for suffix in (".img", ".serial"):
        with suppress(FileNotFoundError):
            lab.path(harness.IMAGES / f"{dom.name()}{suffix}").unlink()


@pytest.fixture(scope="module")
def hooks(lab_up):
    with in_every_lab() as hooks_and_connections:
        yield hooks_and_connections


@pytest.mark.parametrize("key", list(harness.LABS))
def test_enforce_lets_every_stacks_guest_and_a_transient_one_start_and_refuses_a_plain_persistent_one(hooks, key):
    installed, conns = hooks
    lab, hook, conn = harness.LABS[key], installed[key], conns[key]
    hook.mode("enforce")
    started = []
    try:
        for fixture, (stack, how) in SHAPED.items():
            dom = start(conn, shaped(fixture, fixture[6:-4], lab), how)
            started.append(dom)
            assert dom.isActive() and dom.isPersistent() == (how == "define"), fixture
            (line,) = hook.lines(dom.name())
            print(f"\n{lab.title}: {how} {fixture}: {line}")
            assert "op=prepare" in line and "mode=enforce" in line and "decision=managed" in line, line
            assert ("stack=" + (f'"{stack}"' if " " in stack else stack)) in line and "edits_last=no" in line, line
            assert "knob=" in line and "result=refused" not in line, line
        transient = start(conn, shaped(None, "transient", lab), "create")
        started.append(transient)
        (line,) = hook.lines(transient.name())
        print(f"{lab.title}: create plain: {line}")
        assert transient.isActive() and "decision=transient" in line and "stack=" not in line, line
        plain = conn.defineXML(shaped(None, "plain", lab).decode())
        started.append(plain)
        assert lab.path(Path("/etc/libvirt/qemu") / f"{plain.name()}.xml").is_file()
        with pytest.raises(libvirt.libvirtError) as e:
            plain.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert "refusing to start" in e.value.get_error_message() and not plain.isActive()
        (line,) = hook.lines(plain.name())
        assert "decision=inject" in line and "result=refused" in line, line
    finally:
        hook.mode("audit")
        for dom in started:
            gone(dom, lab)


@pytest.mark.parametrize("key", list(harness.LABS))
def test_queue_mode_queues_none_of_them(hooks, key):
    installed, conns = hooks
    lab, hook, conn = harness.LABS[key], installed[key], conns[key]
    hook.mode("queue")
    spool = hook.work / "spool"
    started = []
    try:
        for fixture, (stack, how) in (("stack-kubevirt.xml", SHAPED["stack-kubevirt.xml"]), (None, ("", "create"))):
            dom = start(conn, shaped(fixture, "queue", lab), how)
            started.append(dom)
            (line,) = hook.lines(dom.name())
            assert ("decision=managed" if fixture else "decision=transient") in line and "queued=" not in line, line
        assert not spool.exists() or not list(spool.glob("*.json"))
    finally:
        hook.mode("audit")
        for dom in started:
            gone(dom, lab)


def test_apply_all_changes_only_the_plain_guest(hooks):
    """On the host lab (libvirt 9.0): one persistent guest of each stack and a plain one."""
    _, conns = hooks
    lab, conn = harness.HOST_LAB, conns[harness.HOST_LAB.key]
    foreign = [d.name() for d in conn.listAllDomains()]
    assert not foreign, f"the host lab has domains this test did not make, which apply --all would change: {foreign}"
    flags = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
    doms = {f: conn.defineXML(shaped(f, f[6:-4], lab).decode()) for f in SHAPED}
    doms["plain"] = conn.defineXML(shaped(None, "apply-plain", lab).decode())
    try:
        before = {k: d.XMLDesc(flags) for k, d in doms.items()}
        r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "apply", "--all", "--yes"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        print(f"\napply --all --yes: exit {r.returncode}\n{r.stdout}{r.stderr}")
        assert r.returncode == 0, r.stderr
        after = {k: d.XMLDesc(flags) for k, d in doms.items()}
        for fixture, (stack, _) in SHAPED.items():
            name = doms[fixture].name()
            assert after[fixture] == before[fixture], f"{fixture} was redefined"
            (said,) = [line for line in r.stdout.splitlines() if line.startswith(f"{name}: managed: ")]
            assert f"{stack} writes this definition again" in said and "turn the bit on there: " in said
        assert after["plain"] != before["plain"] and "<pvspinlock state='on'/>" in after["plain"]
        assert f"{doms['plain'].name()}: added kvm-pv-unhalt" in r.stdout
        assert "changed 1, would change 0, unchanged 0, managed 5, skipped 0" in r.stderr
    finally:
        for dom in doms.values():
            gone(dom, lab)

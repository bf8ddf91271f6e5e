"""A restore or an incoming migration is no cold start, in both labs (libvirt 9.0 + QEMU 7.2 on the host,
libvirt 11.3 + QEMU 10.0 in the bookworm-backports chroot), with the hook installed in enforce mode:
`virsh save` + `virsh restore` and `managedsave` + `start` of a guest that lacks kvm-pv-unhalt succeed, its
cold start is still refused, and a live migration between the two labs is let in by the destination."""

from __future__ import annotations

import shutil
from contextlib import suppress

import pytest

from tests.lab import harness
from tests.lab.hooks import MACHINE, LabHook, in_every_lab
from tests.support.logsock import drain

from tests.support import require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
HM = "<cpu mode='host-model' check='partial'/>"
QEMU64 = "<cpu mode='custom' match='exact' check='none'><model fallback='forbid'>qemu64</model></cpu>"


@pytest.fixture(scope="module")
def hooks(lab_up):
    """The hook in both labs (audit until a test says otherwise); removed afterwards."""
    with in_every_lab() as hooks_and_connections:
        yield hooks_and_connections


def define(conn, lab, stem: str, cpu: str, machine: str | None = None):
    name = harness.unique_name(stem)
    xml = harness.startable(harness.boot_sector_guest(name, machine or MACHINE[lab.key], cpu, lab=lab))
    return conn.defineXML(xml.decode())


def remove(dom, lab) -> None:
    with suppress(libvirt.libvirtError):
        if dom.isActive():
            dom.destroy()
    with suppress(libvirt.libvirtError):
        if dom.hasManagedSaveImage(0):
            dom.managedSaveRemove(0)
    with suppress(libvirt.libvirtError):
        dom.undefine()
    for suffix in (".img", ".serial", ".saved"):
        with suppress(FileNotFoundError):
            lab.path(harness.IMAGES / f"{dom.name()}{suffix}").unlink()


@pytest.mark.parametrize("key", list(harness.LABS))
def test_restore_and_managed_save_start_under_enforce_a_cold_start_is_refused(hooks, key):
    installed, conns = hooks
    lab, hook, conn = harness.LABS[key], installed[key], conns[key]
    dom = define(conn, lab, "restore", HM)
    image = harness.IMAGES / f"{dom.name()}.saved"
    try:
        hook.mode("audit")  # it runs without the bit, as a guest started before enforce was turned on
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert ["decision=inject" in line for line in hook.lines(dom.name())] == [True], hook.seen
        hook.mode("enforce")
        dom.save(str(image))
        conn.restore(str(image))
        assert dom.isActive()
        (restored,) = hook.lines(dom.name())
        dom.managedSave(0)
        assert dom.hasManagedSaveImage(0)
        dom.createWithFlags(0)  # `virsh start` of a guest with a managed-save image restores it
        assert dom.isActive() and not dom.hasManagedSaveImage(0)
        (resumed,) = hook.lines(dom.name())
        for line in (restored, resumed):
            assert "op=prepare after=restore " in line and "decision=cold-boot" in line, line
            assert line.endswith("needs a cold boot to gain kvm-pv-unhalt (guest ABI is fixed here)"), line
        dom.destroy()
        with pytest.raises(libvirt.libvirtError) as e:
            dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert "refusing to start" in e.value.get_error_message() and not dom.isActive()
        (cold,) = hook.lines(dom.name())
        assert "result=refused" in cold and "after=" not in cold, cold
        print(f"\n{lab.title}: restore: {restored}\ncold start: {cold}")
    finally:
        hook.mode("audit")
        remove(dom, lab)


@pytest.mark.parametrize("source,destination", [("10.0", "7.2"), ("7.2", "10.0")])
def test_an_incoming_live_migration_is_let_in_by_the_destinations_enforce_hook(hooks, source, destination):
    """Between the two labs on this machine (each libvirtd has its own host uuid): a live migration of a guest
    that lacks the bit; on the destination (enforce) `migrate begin` then `prepare begin` run, and the guest
    arrives running; its cold start there is refused."""
    installed, conns = hooks
    src, dst = harness.LABS[source], harness.LABS[destination]
    dom = define(conns[source], src, "migrate", QEMU64, machine="pc-q35-7.2")  # a machine both QEMUs have
    try:
        installed[source].mode("audit")
        installed[destination].mode("enforce")
        dst.path(harness.IMAGES).mkdir(parents=True, exist_ok=True)
        shutil.copy(src.path(harness.IMAGES / f"{dom.name()}.img"), dst.path(harness.IMAGES / f"{dom.name()}.img"))
        dom.createWithFlags(0)
        assert "decision=inject" in installed[source].lines(dom.name())[0]
        # the chroot cannot resolve the host's name, so the migration stream goes to 127.0.0.1
        arrived = dom.migrate(conns[destination], libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_UNSAFE, None,
                              "tcp://127.0.0.1", 0)
        assert arrived.isActive() and arrived.state()[0] == libvirt.VIR_DOMAIN_RUNNING and not dom.isActive()
        (line,) = installed[destination].lines(dom.name())
        assert "op=prepare after=migrate " in line and "decision=cold-boot" in line, line
        print(f"\nmigrated {src.title} -> {dst.title}: {line}")
        xml = arrived.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        arrived.destroy()  # it arrived transient: gone now
        there = conns[destination].defineXML(xml)
        with pytest.raises(libvirt.libvirtError) as e:
            there.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert "refusing to start" in e.value.get_error_message()
        assert "result=refused" in installed[destination].lines(dom.name())[0]
    finally:
        installed[destination].mode("audit")
        with suppress(libvirt.libvirtError):
            remove(conns[destination].lookupByName(dom.name()), dst)
        with suppress(FileNotFoundError):  # the copy, when the guest never arrived
            dst.path(harness.IMAGES / f"{dom.name()}.img").unlink()
        remove(dom, src)


EXEMPT = "<metadata><vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' policy='never'/></metadata>"


def logged(hook: LabHook, uuid: str) -> list[str]:
    """The lines logged for the domain with `uuid` since the last call (whatever its name's quoting)."""
    out = drain(hook.sock)
    hook.seen += out
    return [line.split(": ", 1)[1] for line in out if f"uuid={uuid} " in line]


@pytest.mark.parametrize("key", list(harness.LABS))
def test_a_rejected_restore_with_a_victims_uuid_lets_no_cold_start_in(hooks, key):
    """The attack: whoever may save and restore their own (exempt) guest runs `virsh restore OWN.save --xml
    ALT.xml`, ALT.xml carrying the victim's uuid (under their own name, or the victim's too). libvirt runs
    `restore begin` with ALT.xml, then rejects the restore; the victim's cold start right after is refused
    (enforce). The image still restores as it is."""
    installed, conns = hooks
    lab, hook, conn = harness.LABS[key], installed[key], conns[key]
    victim = define(conn, lab, "victim", HM)
    own_name = harness.unique_name("own") + "\u00a0"  # libvirt keeps the blank; the hook must too
    xml = harness.startable(harness.boot_sector_guest(own_name, MACHINE[lab.key], HM, lab=lab)).decode()
    own = conn.defineXML(xml.replace("</name>", "</name>" + EXEMPT, 1))
    image = harness.IMAGES / f"{own.name()}.saved"
    try:
        hook.mode("enforce")
        own.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        own.save(str(image))
        saved = conn.saveImageGetXMLDesc(str(image), libvirt.VIR_DOMAIN_XML_SECURE)
        mine = f"<name>{own_name}</name>"
        assert mine in saved and own.UUIDString() in saved
        alt = saved.replace(own.UUIDString(), victim.UUIDString())
        logged(hook, own.UUIDString())
        for attack, said in ((alt, []), (alt.replace(mine, f"<name>{victim.name()}</name>"), ["not marked"])):
            with pytest.raises(libvirt.libvirtError) as e:
                conn.restoreFlags(str(image), attack, 0)
            assert "does not match" in e.value.get_error_message()
            with pytest.raises(libvirt.libvirtError) as e:
                victim.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
            assert "refusing to start" in e.value.get_error_message() and not victim.isActive()
            *restore, cold = logged(hook, victim.UUIDString())
            assert len(restore) == len(said) and all("op=restore " in x and f'result="{s}"' in x
                                                     for s, x in zip(said, restore)), restore
            assert "op=prepare " in cold and "result=refused" in cold and "after=" not in cold, cold
        conn.restore(str(image))  # the image as it is: its own restore
        assert own.isActive()
        line = [x for x in logged(hook, own.UUIDString()) if "op=prepare" in x]
        assert len(line) == 1 and "op=prepare after=restore " in line[0], hook.seen[-6:]
        print(f"\n{lab.title}: victim after the rejected restores: {cold}\nown restore: {line[0]}")
    finally:
        hook.mode("audit")
        remove(victim, lab)
        remove(own, lab)
        with suppress(FileNotFoundError):
            lab.path(image).unlink()

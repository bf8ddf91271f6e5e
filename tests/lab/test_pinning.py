"""Dedicated host CPUs against the real libvirt and QEMU (9.0/7.2 on the host, 11.3/10.0 in the chroot).

1. Every cpuset string of tests/unit/core/test_placement.py: libvirt defines it and writes back what cpuset.parse reads
   (virBitmapFormat), or refuses it; and libvirt refuses the placement elements placement.read refuses, with the
   message it reports.
2. A 2-vCPU guest pinned to host CPUs 0 and 1 (this host has 2): audit through libvirt says dedicated-vcpus,
   keep; started, its `CPU n/KVM` threads are allowed on host CPU n only; the guest's CPUID 0x40000001, read
   with the boot sector, has neither PV_UNHALT (EAX bit 7) nor KVM_HINTS_REALTIME (EDX bit 0); with
   <kvm><hint-dedicated state='on'/> libvirt and QEMU start it under every CPU mode and the guest reads EDX
   bit 0 set, EAX unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from tests.lab import harness
from virtxml_cpu.core import cpuset, placement
from virtxml_cpu.core.domain import extract

from tests.support import ROOT, require_lab
from tests.unit.core.test_placement import CPUSETS

libvirt = require_lab()
pytestmark = pytest.mark.lab
PV_UNHALT, REALTIME = 1 << 7, 1 << 0
LABS = sorted(harness.LABS)
PINS = "<cputune><vcpupin vcpu='0' cpuset='0'/><vcpupin vcpu='1' cpuset='1'/></cputune>"
HINT = "<kvm><hint-dedicated state='on'/></kvm>"
# CPU modes (machine, <cpu>): a named model, host-model and host-passthrough.
MODES = {
    "custom": ("q35", "<cpu mode='custom' match='exact'><model fallback='forbid'>qemu64</model></cpu>"),
    "host-model": ("q35", "<cpu mode='host-model' check='partial'/>"),
    "host-passthrough": ("q35", "<cpu mode='host-passthrough'/>"),
}


@pytest.fixture(scope="module")
def conns(lab_up):
    out = {}
    for key in LABS:
        harness.bring_up(harness.LABS[key])
        out[key] = harness.connect(harness.LABS[key])
        harness.cleanup(out[key])
    yield out
    for c in out.values():
        harness.cleanup(c)
        c.close()


def _domain(name: str, vcpus: int, cputune: etree._Element | None = None, vcpu_attrs=None) -> str:
    root = etree.fromstring(f"<domain type='kvm'><name>{name}</name><memory unit='MiB'>32</memory>"
                            "<vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os></domain>")
    vcpu = root.find("vcpu")
    vcpu.text = str(vcpus)
    for k, v in (vcpu_attrs or {}).items():
        vcpu.set(k, v)
    if cputune is not None:
        root.insert(2, cputune)
    return etree.tostring(root, encoding="unicode")  # lxml writes a tab in an attribute as &#9;: kept


def _define(conn, xml: str) -> tuple[str | None, str | None]:
    """(the <vcpupin vcpu='0'> cpuset libvirt wrote back, None) or (None, libvirt's error)."""
    try:
        dom = conn.defineXML(xml)
    except libvirt.libvirtError as e:
        return None, e.get_error_message()
    try:
        back = etree.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).encode())
        pin = back.find("cputune/vcpupin[@vcpu='0']")
        return (pin.get("cpuset") if pin is not None else ""), None
    finally:
        dom.undefine()


@pytest.mark.parametrize("key", LABS)
def test_cpuset_syntax_is_libvirts(conns, key):
    conn = conns[key]
    disagree = []
    for text, cpus in CPUSETS:
        tune = etree.Element("cputune")
        etree.SubElement(tune, "vcpupin", vcpu="0", cpuset=text)
        written, error = _define(conn, _domain(harness.unique_name("cpuset"), 1, tune))
        placed = placement.read(extract(etree.fromstring(_domain("x", 1, tune))))
        if cpus is None:
            ok = error is not None and "Failed to parse bitmap" in error and placed.error in error
        elif not cpus:
            ok = error is not None and placed.error is not None and placed.error in error
        else:
            ok = error is None and written == cpuset.format(cpus) and placed.error is None
        if not ok:
            disagree.append((text, written, error, placed.error))
    assert not disagree, disagree


REFUSED = [
    ("<cputune><vcpupin vcpu='0' cpuset='0'/><vcpupin vcpu='0' cpuset='1'/></cputune>", {}),
    ("<cputune><vcpupin vcpu='0'/></cputune>", {}),
    ("<cputune><vcpupin vcpu='x' cpuset='1'/></cputune>", {}),
    ("<cputune><emulatorpin cpuset='0'/><emulatorpin cpuset='1'/></cputune>", {}),
    ("<cputune><vcpusched vcpus='0' scheduler='fifo' priority='1'/>"
     "<vcpusched vcpus='0-1' scheduler='rr' priority='1'/></cputune>", {}),
    ("<cputune><vcpusched vcpus='5' scheduler='fifo' priority='1'/></cputune>", {}),
    ("<cputune><vcpusched vcpus='0' scheduler='deadline'/></cputune>", {}),
    ("<cputune><emulatorpin cpuset='0,^0'/></cputune>", {}),
    ("", {"cpuset": "1,^1"}),
    ("", {"placement": "numad"}),
]


@pytest.mark.parametrize("key", LABS)
def test_libvirt_refuses_what_pinning_refuses_with_the_same_message(conns, key):
    conn = conns[key]
    disagree = []
    for tune, attrs in REFUSED:
        el = etree.fromstring(tune) if tune else None
        _, error = _define(conn, _domain(harness.unique_name("refused"), 2, el, attrs))
        el = etree.fromstring(tune) if tune else None
        placed = placement.read(extract(etree.fromstring(_domain("x", 2, el, attrs))))
        if error is None or placed.error is None or placed.error not in error:
            disagree.append((tune, attrs, error, placed.error))
    assert not disagree, disagree


def _audit(lab, name: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "audit", "--connect", lab.uri, "--format", "json", name],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    return next(row for row in rows if row.get("domain") == name)


def _vcpu_threads_affinity(conn, lab, name, machine, cpu) -> tuple[list, dict[str, str]]:
    """Start the pinned guest paused: libvirt's view of each vCPU's host CPUs, and each `CPU n/KVM` thread's
    Cpus_allowed_list as the host kernel has it."""
    xml = harness.boot_sector_guest(name, machine, cpu, "", lab=lab, cputune_xml=PINS)
    dom = conn.defineXML(harness.startable(xml).decode())
    try:
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        try:
            maps = dom.vcpus()[1]
            pid = int(lab.path(Path(f"/run/libvirt/qemu/{name}.pid")).read_text())
            threads = {}
            for task in Path(f"/proc/{pid}/task").iterdir():
                comm = (task / "comm").read_text().strip()
                if comm.startswith("CPU "):
                    status = (task / "status").read_text()
                    threads[comm] = next(line.split(":", 1)[1].strip() for line in status.splitlines()
                                         if line.startswith("Cpus_allowed_list:"))
            return maps, threads
        finally:
            dom.destroy()
    finally:
        dom.undefine()


def _boot(conn, lab, name, machine, cpu, features, register) -> int:
    xml = harness.boot_sector_guest(name, machine, cpu, features, lab=lab, register=register, cputune_xml=PINS)
    return int(harness.boot_and_read_cpuid(conn, harness.startable(xml), name, lab=lab), 16)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("key", LABS)
def test_pinned_guest_is_kept_and_reads_the_hint_only_with_hint_dedicated(conns, key, mode):
    lab, conn = harness.LABS[key], conns[key]
    machine, cpu = MODES[mode]
    name = harness.unique_name(f"pinned-{mode}")
    dom = conn.defineXML(harness.boot_sector_guest(name, machine, cpu, "", lab=lab, cputune_xml=PINS).decode())
    try:
        row = _audit(lab, name)
        stored = etree.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).encode())
        pins = [(p.get("vcpu"), p.get("cpuset")) for p in stored.findall("cputune/vcpupin")]
    finally:
        dom.undefine()
    assert pins == [("0", "0"), ("1", "1")]
    if mode == "custom":  # a named model without PV_UNHALT: compat would add it if the guest were not pinned
        assert (row["decision"]["action"], row["decision"]["rule"]) == ("keep", "dedicated-vcpus"), row
        assert row["needs_fix"] is False
    assert any(n.startswith("dedicated host CPUs: each of its 2 vCPU(s)") for n in row["decision"]["notes"]), row
    maps, threads = _vcpu_threads_affinity(conn, lab, name, machine, cpu)
    assert maps == [(True, False), (False, True)] and threads == {"CPU 0/KVM": "0", "CPU 1/KVM": "1"}, (maps, threads)
    eax = _boot(conn, lab, name, machine, cpu, "", "eax")
    edx = _boot(conn, lab, name, machine, cpu, "", "edx")
    hinted_eax = _boot(conn, lab, name, machine, cpu, HINT, "eax")
    hinted_edx = _boot(conn, lab, name, machine, cpu, HINT, "edx")
    print(f"\n{lab.title}, {mode}, pinned 0,1: EAX {eax:08X} EDX {edx:08X}; with hint-dedicated: "
          f"EAX {hinted_eax:08X} EDX {hinted_edx:08X}")
    assert edx & REALTIME == 0 and hinted_edx & REALTIME
    assert hinted_eax == eax  # the hint changes only EDX
    if mode == "custom":
        assert eax & PV_UNHALT == 0  # the tool kept it: no PV_UNHALT

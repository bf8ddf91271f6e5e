"""The engine against the real thing: libvirtd + Debian QEMU + /dev/kvm, read back with QMP qom-get.

Every pc-i440fx/pc-q35 machine type the installed QEMU offers x every CPU mode, plus XML variants.
A disagreement is a bug in the rules or the engine, never in this test.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.lab import harness

from .conftest import require_lab
from virtxml_cpu import engine, rules
from virtxml_cpu.domain import extract
from virtxml_cpu.hostfacts import probe_kvm
from virtxml_cpu.libvirt_conn import host_facts
from virtxml_cpu.xmlio import parse_domain

libvirt = require_lab()
pytestmark = pytest.mark.lab
REPORT = Path(os.environ.get("VIRTXML_CPU_LAB_REPORT", "build/lab-report.json"))

CPU_MODES = {
    "none": "",
    "custom": "<cpu mode='custom' match='exact'><model fallback='forbid'>qemu64</model></cpu>",
    "host-model": "<cpu mode='host-model'/>",
    "host-passthrough": "<cpu mode='host-passthrough'/>",
    "maximum": "<cpu mode='maximum'/>",
}
HP = CPU_MODES["host-passthrough"]
HM = CPU_MODES["host-model"]
CUSTOM = CPU_MODES["custom"]
SKY = "<cpu mode='custom' match='exact'><model fallback='forbid'>Skylake-Client</model></cpu>"
QNS = "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'"
NO_PCI = "<controller type='usb' model='none'/><memballoon model='none'/>"


def qargs(*args):
    return "<qemu:commandline>" + "".join(f"<qemu:arg value='{a}'/>" for a in args) + "</qemu:commandline>"


# (label, machine, cpu, features, type, extra[, devices, vcpus])
VARIANTS = [
    ("pvspinlock-on", "pc-q35-7.2", HM, "<pvspinlock state='on'/>", "kvm", ""),
    ("pvspinlock-on-custom-2.0", "pc-i440fx-2.0", CUSTOM, "<pvspinlock state='on'/>", "kvm", ""),
    ("pvspinlock-off-passthrough", "pc-q35-7.2", HP, "<pvspinlock state='off'/>", "kvm", ""),
    ("pvspinlock-off-maximum", "pc-i440fx-7.2", CPU_MODES["maximum"], "<pvspinlock state='off'/>", "kvm", ""),
    ("apic-eoi-off", "pc-q35-7.2", HM, "<apic eoi='off'/>", "kvm", ""),
    ("apic-eoi-off-passthrough", "pc-q35-7.2", HP, "<apic eoi='off'/>", "kvm", ""),
    ("kvm-hidden", "pc-q35-7.2", HM, "<kvm><hidden state='on'/></kvm>", "kvm", ""),
    ("kvm-hidden-passthrough", "pc-q35-7.2", HP, "<kvm><hidden state='on'/></kvm>", "kvm", ""),
    ("hint-dedicated", "pc-q35-7.2", HM, "<kvm><hint-dedicated state='on'/></kvm>", "kvm", ""),
    ("hint-dedicated-hidden", "pc-q35-7.2", HM, "<kvm><hidden state='on'/><hint-dedicated state='on'/></kvm>",
     "kvm", ""),
    ("poll-control", "pc-q35-7.2", HM, "<kvm><poll-control state='on'/></kvm>", "kvm", ""),
    ("pv-ipi-off-passthrough", "pc-q35-7.2", HP, "<kvm><pv-ipi state='off'/></kvm>", "kvm", ""),
    ("split-irqchip-custom-7.2", "pc-q35-7.2", CUSTOM, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-custom-5.1", "pc-q35-5.1", CUSTOM, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-custom-6.0", "pc-q35-6.0", CUSTOM, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-passthrough-5.1", "pc-q35-5.1", HP, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-passthrough-7.2", "pc-q35-7.2", HP, "<ioapic driver='qemu'/>", "kvm", ""),
    ("kernel-irqchip-explicit", "pc-q35-7.2", HM, "<ioapic driver='kvm'/>", "kvm", ""),
    ("kvmclock-absent", "pc-q35-7.2", HM, "", "kvm", "<clock offset='utc'><timer name='kvmclock' present='no'/></clock>"),
    ("x2apic-disabled", "pc-q35-7.2",
     "<cpu mode='custom'><model>qemu64</model><feature policy='disable' name='x2apic'/></cpu>", "", "kvm", ""),
    ("svm-required-filtered", "pc-q35-7.2",
     "<cpu mode='custom'><model>qemu64</model><feature policy='require' name='svm'/></cpu>", "", "kvm", ""),
    ("skylake-1.7", "pc-i440fx-1.7", SKY, "", "kvm", ""),
    ("skylake-2.1", "pc-i440fx-2.1", SKY, "", "kvm", ""),
    ("qemu64-1.7", "pc-i440fx-1.7", CUSTOM, "", "kvm", ""),
    ("alias-pc", "pc", HM, "", "kvm", ""),
    ("alias-q35", "q35", CUSTOM, "", "kvm", ""),
    ("no-machine", None, "", "", "kvm", ""),
    ("global-pv-unhalt", "pc-q35-7.2", HM, "", "kvm", qargs("-global", "x86_64-cpu.kvm-pv-unhalt=on")),
    ("global-model-specific", "pc-q35-7.2", CUSTOM, "", "kvm", qargs("-global", "qemu64-x86_64-cpu.kvm-pv-ipi=on")),
    ("commandline-cpu", "pc-q35-7.2", HM, "<pvspinlock state='off'/>", "kvm",
     qargs("-cpu", "qemu64,kvm-pv-unhalt=on,kvm-pv-tlb-flush=on")),
    ("cpu-pm-passthrough", "pc-q35-7.2", HP, "", "kvm", qargs("-overcommit", "cpu-pm=on")),
    ("tcg-none-7.2", "pc-q35-7.2", "", "", "qemu", ""),
    ("tcg-custom-2.0", "pc-i440fx-2.0", CUSTOM, "", "qemu", ""),
    ("tcg-skylake", "pc-i440fx-7.2", SKY, "", "qemu", ""),
    ("tcg-pvspinlock-on-refused", "pc-i440fx-7.2", "", "<pvspinlock state='on'/>", "qemu", ""),
    ("hidden-pvspinlock-on-refused", "pc-q35-7.2", HM, "<kvm><hidden state='on'/></kvm><pvspinlock state='on'/>",
     "kvm", ""),
    # Machines without PCI (libvirt wants no USB controller / balloon there); isapc has one CPU at most.
    ("isapc", "isapc", "", "", "kvm", "", NO_PCI, 1),
    ("isapc-qemu64", "isapc", CUSTOM, "", "kvm", "", NO_PCI, 1),
    ("microvm", "microvm", "", "", "kvm", "", NO_PCI),
    ("microvm-passthrough", "microvm", HP, "", "kvm", "", NO_PCI),
    ("pc-q35-4.0-split-default", "pc-q35-4.0", CUSTOM, "", "kvm", ""),
    ("metadata-override", "pc-q35-7.2", HM, "", "kvm",
     "<metadata><vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' policy='never'/></metadata>"),
]


def domain_xml(name, machine, cpu, features="", vtype="kvm", extra="", devices="", vcpus=2) -> bytes:
    mattr = f" machine='{machine}'" if machine else ""
    feats = f"<features>{features}</features>" if features else ""
    return (f"<domain type='{vtype}' {QNS}><name>{name}</name><memory unit='MiB'>64</memory><vcpu>{vcpus}</vcpu>"
            f"<os><type arch='x86_64'{mattr}>hvm</type></os>{feats}{cpu}"
            f"<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>{devices}</devices>{extra}</domain>").encode()


@pytest.fixture(scope="module")
def lab_host(lab):
    return probe_kvm().merged(host_facts(harness.URI))


def _compare(conn, host, label, xml):
    started = harness.startable(xml)
    res = engine.resolve(extract(parse_domain(started).getroot()), host)
    want = {p: res.features[p].qemu_property for p in rules.PROPERTIES}
    try:
        got = harness.read_properties(conn, started, rules.PROPERTIES)
    except libvirt.libvirtError as e:
        msg = e.get_error_message()
        ok = res.start_refusal is not None and res.start_refusal in msg
        return label, {"start": "refused"}, ({} if ok else {"start": (res.start_refusal, msg, "")})
    if res.start_refusal:
        return label, got, {"start": (res.start_refusal, "started", "")}
    got = {p: "on" if v else "off" for p, v in got.items()}
    diffs = {p: (want[p], got[p], res.features[p].detail) for p in rules.PROPERTIES if want[p] != got[p]}
    return label, got, diffs


def _run_all(lab, lab_host, cases):
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda c: _compare(lab, lab_host, c[0], c[1]), cases))


def _write_report(kind, results):
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[kind] = {label: {"qemu": got, "disagreements": diffs} for label, got, diffs in results}
    REPORT.write_text(json.dumps(data, indent=1, sort_keys=True))


def pc_machines(host) -> list[str]:
    return sorted(m for m in host.machines if m.startswith(("pc-i440fx-", "pc-q35-")))


def test_every_machine_type_times_every_cpu_mode(lab, lab_host):
    machines = pc_machines(lab_host)
    assert len(machines) >= 50, machines  # QEMU 7.2 offers pc-i440fx-1.4..7.2 and pc-q35-2.4..7.2
    cases = [(f"{m}/{mode}", domain_xml(harness.unique_name("m"), m, cpu))
             for m in machines for mode, cpu in CPU_MODES.items()]
    results = _run_all(lab, lab_host, cases)
    _write_report("matrix", results)
    bad = {label: diffs for label, _got, diffs in results if diffs}
    checked = len(results) * len(rules.PROPERTIES)
    print(f"\nmatrix: {len(machines)} machine types x {len(CPU_MODES)} CPU modes = {len(results)} guests, "
          f"{checked} property checks, {sum(len(d) for d in bad.values())} disagreements")
    assert not bad, json.dumps(bad, indent=1)


def test_xml_variants(lab, lab_host):
    cases = [(v[0], domain_xml(harness.unique_name("v"), *v[1:])) for v in VARIANTS]
    results = _run_all(lab, lab_host, cases)
    _write_report("variants", results)
    bad = {label: diffs for label, _got, diffs in results if diffs}
    print(f"\nvariants: {len(results)} guests, {sum(len(d) for d in bad.values())} disagreements")
    assert not bad, json.dumps(bad, indent=1)


def test_cpu_feature_kvm_pv_unhalt_is_rejected_at_start_as_the_tool_warns(lab, lab_host):
    xml = (harness.startable(domain_xml(harness.unique_name("lit"), "pc-q35-7.2",
                                        "<cpu mode='host-model'><feature policy='require' name='kvm_pv_unhalt'/></cpu>", "")))
    res = engine.resolve(extract(parse_domain(xml).getroot()), lab_host)
    assert any("unknown CPU feature" in w for w in res.warnings)
    dom = lab.defineXML(xml.decode())
    try:
        with pytest.raises(libvirt.libvirtError, match="unknown CPU feature"):
            dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    finally:
        dom.undefine()

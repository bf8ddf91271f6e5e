"""The tool's rules against the real thing, on two QEMUs: Debian 12's QEMU 7.2 (libvirt 9.0) and QEMU 10.0.2 from
bookworm-backports (libvirt 11.3, in a chroot), with /dev/kvm, read back with QMP qom-get.

Every pc-i440fx/pc-q35 machine type each QEMU offers x every CPU mode, plus XML variants (every form of an
explicit choice). A disagreement is a bug in the rules or in resolving them, never in this test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.lab import harness
from tests.lab.matrix import CPU_MODES, domain_xml, pc_machines, run_all

from tests.support import ROOT, require_lab
from virtxml_cpu.core import resolve
from virtxml_cpu.core.property_steps import rule_applies
from virtxml_cpu.tables import qemu as tables_qemu
from virtxml_cpu.core.domain import extract
from virtxml_cpu.host.sources import HostSources, assemble
from virtxml_cpu.xml.parse import parse_domain

libvirt = require_lab()
pytestmark = pytest.mark.lab
REPORT = Path(os.environ.get("VIRTXML_CPU_LAB_REPORT", "build/lab-report.json"))

HP = CPU_MODES["host-passthrough"]
HM = CPU_MODES["host-model"]
CUSTOM = CPU_MODES["custom"]
SKY = "<cpu mode='custom' match='exact'><model fallback='forbid'>Skylake-Client</model></cpu>"
NO_PCI = "<controller type='usb' model='none'/><memballoon model='none'/>"


Q35, I440FX = "{newest-q35}", "{newest-i440fx}"  # the newest versioned machine of each lab's QEMU


def qargs(*args):
    return "<qemu:commandline>" + "".join(f"<qemu:arg value='{a}'/>" for a in args) + "</qemu:commandline>"


# (label, machine, cpu, features, type, extra[, devices, vcpus])
VARIANTS = [
    ("pvspinlock-on", Q35, HM, "<pvspinlock state='on'/>", "kvm", ""),
    ("pvspinlock-on-custom-2.0", "pc-i440fx-2.0", CUSTOM, "<pvspinlock state='on'/>", "kvm", ""),
    ("pvspinlock-off-passthrough", Q35, HP, "<pvspinlock state='off'/>", "kvm", ""),
    ("pvspinlock-off-maximum", I440FX, CPU_MODES["maximum"], "<pvspinlock state='off'/>", "kvm", ""),
    ("apic-eoi-off", Q35, HM, "<apic eoi='off'/>", "kvm", ""),
    ("apic-eoi-off-passthrough", Q35, HP, "<apic eoi='off'/>", "kvm", ""),
    ("kvm-hidden", Q35, HM, "<kvm><hidden state='on'/></kvm>", "kvm", ""),
    ("kvm-hidden-passthrough", Q35, HP, "<kvm><hidden state='on'/></kvm>", "kvm", ""),
    ("hint-dedicated", Q35, HM, "<kvm><hint-dedicated state='on'/></kvm>", "kvm", ""),
    ("hint-dedicated-hidden", Q35, HM, "<kvm><hidden state='on'/><hint-dedicated state='on'/></kvm>",
     "kvm", ""),
    ("poll-control", Q35, HM, "<kvm><poll-control state='on'/></kvm>", "kvm", ""),
    ("pv-ipi-off-passthrough", Q35, HP, "<kvm><pv-ipi state='off'/></kvm>", "kvm", ""),
    ("split-irqchip-custom-7.2", Q35, CUSTOM, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-custom-5.1", "pc-q35-5.1", CUSTOM, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-custom-6.0", "pc-q35-6.0", CUSTOM, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-passthrough-5.1", "pc-q35-5.1", HP, "<ioapic driver='qemu'/>", "kvm", ""),
    ("split-irqchip-passthrough-7.2", Q35, HP, "<ioapic driver='qemu'/>", "kvm", ""),
    ("kernel-irqchip-explicit", Q35, HM, "<ioapic driver='kvm'/>", "kvm", ""),
    ("kvmclock-absent", Q35, HM, "", "kvm", "<clock offset='utc'><timer name='kvmclock' present='no'/></clock>"),
    ("x2apic-disabled", Q35,
     "<cpu mode='custom'><model>qemu64</model><feature policy='disable' name='x2apic'/></cpu>", "", "kvm", ""),
    ("svm-required-filtered", Q35,
     "<cpu mode='custom'><model>qemu64</model><feature policy='require' name='svm'/></cpu>", "", "kvm", ""),
    ("skylake-1.7", "pc-i440fx-1.7", SKY, "", "kvm", ""),
    ("skylake-2.1", "pc-i440fx-2.1", SKY, "", "kvm", ""),
    ("qemu64-1.7", "pc-i440fx-1.7", CUSTOM, "", "kvm", ""),
    ("alias-pc", "pc", HM, "", "kvm", ""),
    ("alias-q35", "q35", CUSTOM, "", "kvm", ""),
    ("no-machine", None, "", "", "kvm", ""),
    ("global-pv-unhalt", Q35, HM, "", "kvm", qargs("-global", "x86_64-cpu.kvm-pv-unhalt=on")),
    ("global-model-specific", Q35, CUSTOM, "", "kvm", qargs("-global", "qemu64-x86_64-cpu.kvm-pv-ipi=on")),
    ("commandline-cpu", Q35, HM, "<pvspinlock state='off'/>", "kvm",
     qargs("-cpu", "qemu64,kvm-pv-unhalt=on,kvm-pv-tlb-flush=on")),
    ("cpu-pm-passthrough", Q35, HP, "", "kvm", qargs("-overcommit", "cpu-pm=on")),
    ("tcg-none-7.2", Q35, "", "", "qemu", ""),
    ("tcg-custom-2.0", "pc-i440fx-2.0", CUSTOM, "", "qemu", ""),
    ("tcg-skylake", I440FX, SKY, "", "qemu", ""),
    ("tcg-pvspinlock-on-refused", I440FX, "", "<pvspinlock state='on'/>", "qemu", ""),
    ("hidden-pvspinlock-on-refused", Q35, HM, "<kvm><hidden state='on'/></kvm><pvspinlock state='on'/>",
     "kvm", ""),
    # Machines without PCI (libvirt wants no USB controller / balloon there); isapc has one CPU at most.
    ("isapc", "isapc", "", "", "kvm", "", NO_PCI, 1),
    ("isapc-qemu64", "isapc", CUSTOM, "", "kvm", "", NO_PCI, 1),
    ("microvm", "microvm", "", "", "kvm", "", NO_PCI),
    ("microvm-passthrough", "microvm", HP, "", "kvm", "", NO_PCI),
    ("pc-q35-4.0-split-default", "pc-q35-4.0", CUSTOM, "", "kvm", ""),
    ("metadata-override", Q35, HM, "", "kvm",
     "<metadata><vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' policy='never'/></metadata>"),
    # Every form of an explicit choice.
    ("pvspinlock-bare", Q35, HM, "<pvspinlock/>", "kvm", ""),
    ("pvspinlock-bare-custom", I440FX, CUSTOM, "<pvspinlock/>", "kvm", ""),
    *[(f"cpu-feature-{pol}-{name}", Q35,
       f"<cpu mode='custom'><model>qemu64</model><feature policy='{pol}' name='{name}'/></cpu>", "", "kvm", "")
      for pol in ("require", "force", "optional", "disable", "forbid") for name in ("kvm_pv_unhalt",)],
    ("cpu-feature-dash-name", Q35, "<cpu mode='host-model'><feature policy='require' name='kvm-pv-unhalt'/></cpu>",
     "", "kvm", ""),
    ("cmdline-noarg-before-cpu", Q35, CUSTOM, "", "kvm", qargs("-no-user-config", "-cpu", "qemu64,kvm-pv-unhalt=on")),
    ("cmdline-noargs-around", Q35, CUSTOM, "", "kvm",
     qargs("-S", "-nodefaults", "-cpu", "qemu64,kvm_pv_unhalt=on", "-no-user-config")),
    ("cmdline-last-cpu-wins", Q35, CUSTOM, "", "kvm",
     qargs("-cpu", "qemu64,kvm-pv-unhalt=on", "-cpu", "qemu64,kvm-pv-eoi=off")),
    ("cmdline-plus-feature", Q35, CUSTOM, "", "kvm", qargs("-cpu", "qemu64,+kvm_pv_unhalt")),
    ("cmdline-minus-feature", Q35, CUSTOM, "<pvspinlock state='on'/>", "kvm", qargs("-cpu", "qemu64,-kvm_pv_unhalt")),
    ("cmdline-bare-feature", Q35, CUSTOM, "", "kvm", qargs("-cpu", "qemu64,kvm-pv-unhalt")),
    # QEMU's bool grammar (qemu.GRAMMAR): y/n taken, 1/0/On refused with its own message (the start fails).
    ("cmdline-y-n", Q35, CUSTOM, "", "kvm", qargs("-cpu", "qemu64,kvm-pv-unhalt=y,kvm-pv-eoi=n")),
    ("cmdline-refused-1", Q35, CUSTOM, "", "kvm", qargs("-cpu", "qemu64,kvm-pv-eoi=1")),
    ("cmdline-refused-On", Q35, CUSTOM, "", "kvm", qargs("-cpu", "qemu64,kvm_pv_unhalt=On")),
    ("global-refused-0", Q35, CUSTOM, "", "kvm", qargs("-global", "x86_64-cpu.kvm-pv-unhalt=0")),
    ("cmdline-double-dash", Q35, CUSTOM, "", "kvm", qargs("--cpu", "qemu64,kvm-pv-unhalt=on")),
    ("global-keyvalue-form", Q35, CUSTOM, "", "kvm",
     qargs("-global", "driver=x86_64-cpu,property=kvm-pv-unhalt,value=on")),
    ("global-underscore-model", Q35, CUSTOM, "", "kvm", qargs("-global", "qemu64-x86_64-cpu.kvm_pv_unhalt=on")),
    ("global-other-model", Q35, CUSTOM, "", "kvm", qargs("-global", "EPYC-x86_64-cpu.kvm-pv-unhalt=on")),
    ("global-max-reaches-host", Q35, HP, "", "kvm", qargs("-global", "max-x86_64-cpu.kvm-pv-unhalt=off")),
    ("global-then-pvspinlock", Q35, CUSTOM, "<pvspinlock state='off'/>", "kvm",
     qargs("-global", "x86_64-cpu.kvm-pv-unhalt=on")),
    # <cpu><cache>: libvirt's l3-cache property.
    ("cache-emulate-old-machine", "pc-i440fx-2.7",
     "<cpu mode='custom'><model>qemu64</model><cache level='3' mode='emulate'/></cpu>", "", "kvm", ""),
    ("cache-disable", Q35, "<cpu mode='custom'><model>qemu64</model><cache mode='disable'/></cpu>", "", "kvm", ""),
    ("cache-passthrough-host", Q35, "<cpu mode='host-passthrough'><cache mode='passthrough'/></cpu>", "", "kvm", ""),
    ("cache-passthrough-custom-refused", Q35,
     "<cpu mode='custom'><model>qemu64</model><cache mode='passthrough'/></cpu>", "", "kvm", ""),
]


@pytest.fixture(scope="module", params=sorted(harness.LABS))  # each on an xdist worker of its own (conftest)
def qlab(request):
    """(lab, connection, host facts as the tool reads them from that libvirt) for each QEMU."""
    lab = harness.LABS[request.param]
    harness.bring_up(lab)
    conn = harness.connect(lab)
    harness.cleanup(conn)
    host = assemble(HostSources(connect=lab.uri, kvm=True))  # as explain --connect reads it
    yield lab, conn, host
    harness.cleanup(conn)
    conn.close()


def newest(host) -> dict[str, str]:
    versions = {}
    for fam in ("pc-q35", "pc-i440fx"):
        names = [m for m in host.machines if m.startswith(fam + "-") and m[len(fam) + 1:].replace(".", "").isdigit()]
        versions["{newest-" + fam[3:] + "}"] = max(names, key=lambda m: tuple(map(int, m[len(fam) + 1:].split("."))))
    return versions


def _write_report(kind, results):
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[kind] = {label: {"qemu": got, "disagreements": diffs} for label, got, diffs in results}
    REPORT.write_text(json.dumps(data, indent=1, sort_keys=True))


def test_every_machine_type_times_every_cpu_mode(qlab):
    lab, conn, host = qlab
    machines = pc_machines(host)
    # QEMU 7.2: pc-i440fx-1.4..7.2 and pc-q35-2.4..7.2 (55); 10.0.2: pc-*-2.4..10.0 (61)
    assert len(machines) >= 50, machines
    assert host.qemu_build == "upstream", host.build_source
    cases = [(f"{m}/{mode}", domain_xml(harness.unique_name("m"), m, cpu))
             for m in machines for mode, cpu in CPU_MODES.items()]
    results = run_all(conn, host, cases)
    _write_report(f"matrix-{lab.key}", results)
    bad = {label: diffs for label, _got, diffs in results if diffs}
    checked = len(results) * len(tables_qemu.PROPERTIES)
    print(f"\nmatrix on {lab.title}: {len(machines)} machine types x {len(CPU_MODES)} CPU modes = {len(results)} "
          f"guests, {checked} property checks, {sum(len(d) for d in bad.values())} disagreements")
    assert not bad, json.dumps(bad, indent=1)


def test_xml_variants(qlab):
    lab, conn, host = qlab
    latest = newest(host)
    cases = [(v[0], domain_xml(harness.unique_name("v"), *v[1:], newest=latest)) for v in VARIANTS
             if latest.get(v[1], v[1]) in host.machines or v[1] in (None, "pc", "q35", "isapc", "microvm")]
    skipped = [v[0] for v in VARIANTS if v[0] not in {c[0] for c in cases}]
    assert all(any(m in v[1] for m in ("1.7", "2.0", "2.1")) for v in VARIANTS if v[0] in skipped), skipped
    results = run_all(conn, host, cases)
    _write_report(f"variants-{lab.key}", results)
    bad = {label: diffs for label, _got, diffs in results if diffs}
    refused = sum(1 for _l, got, _d in results if got == {"start": "refused"})
    print(f"\nvariants on {lab.title}: {len(results)} guests ({refused} refused by libvirt, as predicted), "
          f"{len(results) * len(tables_qemu.PROPERTIES)} property checks, {sum(len(d) for d in bad.values())} "
          f"disagreements; not offered by this QEMU: {', '.join(skipped) or 'none'}")
    assert not bad, json.dumps(bad, indent=1)


def test_compat_props_of_every_machine_match_the_upstream_rows():
    """QEMU 10.0.2 reports each machine type's compat properties itself (query-machines compat-props):
    the x86 CPU ones among the properties this tool resolves must be exactly the upstream compat rows."""
    from virtxml_cpu.tables.builds.known import UPSTREAM
    from virtxml_cpu.core.machines import classify

    lab = harness.BPO_LAB
    harness.bring_up(lab)
    reply = harness.qmp_direct(lab, [{"execute": "query-machines", "arguments": {"compat-props": True}}])[0]
    machines = [m for m in reply["return"] if m["name"].startswith(("pc-i440fx-", "pc-q35-"))]
    assert len(machines) >= 60
    rows_used, checked = set(), 0
    for m in machines:
        qemu = {(c["property"], c["value"]) for c in m.get("compat-props", [])
                if c["qom-type"].endswith("x86_64-cpu") and c["property"] in tables_qemu.PROPERTIES}
        machine = classify(m["name"], UPSTREAM)
        ours = set()
        for rule in UPSTREAM.machine_rows:
            applies = rule_applies(rule, machine, "on")
            assert applies is not None, (m["name"], rule)
            if applies:
                if rule.layer == "compat":
                    ours.add((rule.prop, rule.value))
                    rows_used.add(rule)
                else:  # x86_cpu_change_kvm_default() is gone since 9.1: no 10.0 machine may need one
                    raise AssertionError(f"{m['name']}: kvm-default row {rule} applies on QEMU 10.0")
        assert qemu == ours, (m["name"], qemu, ours)
        checked += 1
    print(f"\ncompat-props: {checked} machine types of QEMU 10.0.2 agree with the upstream rows "
          f"({len(rows_used)} compat rows in use)")
    assert {r.prop for r in rows_used} == {"l3-cache", "kvm-msi-ext-dest-id"}


def test_cpu_feature_kvm_pv_unhalt_is_rejected_at_start_as_the_tool_warns(qlab):
    lab, conn, host = qlab
    xml = (harness.startable(domain_xml(harness.unique_name("lit"), "q35",
                                        "<cpu mode='host-model'><feature policy='require' name='kvm_pv_unhalt'/></cpu>", "")))
    res = resolve.resolve(extract(parse_domain(xml).getroot()), host)
    assert any("unknown CPU feature" in w for w in res.warnings)
    dom = conn.defineXML(xml.decode())
    try:
        with pytest.raises(libvirt.libvirtError, match="unknown CPU feature"):
            dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    finally:
        dom.undefine()


def test_model_table_generator_stops_on_a_failed_expansion(tmp_path):
    """tools/gen_cpu_models.py matches replies by id and exits on any error (a failed reply used to shift
    every later model's bits); run against the lab's real QEMU with one bogus model."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools" / "gen_cpu_models.py")
    gen = importlib.util.module_from_spec(spec)
    sys_argv = sys.argv
    sys.argv = ["gen"]
    try:
        spec.loader.exec_module(gen)
    finally:
        sys.argv = sys_argv
    ok = gen.qmp([{"execute": "query-cpu-model-expansion", "arguments": {"type": "full", "model": {"name": "qemu64"}}}])
    assert ok[0]["model"]["props"]["svm"] is True
    with pytest.raises(SystemExit, match="no-such-model"):
        gen.qmp([{"execute": "query-cpu-model-expansion", "arguments": {"type": "full", "model": {"name": "qemu64"}}},
                 {"execute": "query-cpu-model-expansion", "arguments": {"type": "full", "model": {"name": "no-such-model"}}}])


FEATURES_SCRAMBLED = ("<vmcoreinfo state='on'/><smm state='on'/><pvspinlock state='on'/><ioapic driver='kvm'/>"
                      "<pmu state='on'/><kvm><hidden state='off'/></kvm><hyperv mode='custom'><relaxed state='on'/>"
                      "</hyperv><msrs unknown='ignore'/><vmport state='off'/><apic/><pae/><acpi/>")
CPU_SCRAMBLED = ("<cpu mode='custom' match='exact'><numa><cell id='0' cpus='0-1' memory='65536' unit='KiB'/></numa>"
                 "<feature policy='require' name='x2apic'/><maxphysaddr mode='emulate' bits='42'/>"
                 "<cache mode='disable'/><topology sockets='1' dies='1' cores='2' threads='1'/>"
                 "<vendor>AMD</vendor><model fallback='allow'>qemu64</model></cpu>")


def test_libvirt_writes_children_in_the_order_the_rewriter_uses(qlab):
    """Define with <features>/<cpu>/<domain> children scrambled; libvirt's formatter writes them back in its
    own order, which must be the order tables/libvirt_order.py says (it is what xml/insert.py inserts by)."""
    from lxml import etree

    from virtxml_cpu.tables import libvirt_order

    lab, conn, host = qlab
    name = harness.unique_name("order")
    xml = (f"<domain type='kvm'><name>{name}</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>"
           f"<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices><on_crash>destroy</on_crash>"
           f"<clock offset='utc'/>{CPU_SCRAMBLED}<features>{FEATURES_SCRAMBLED}</features>"
           f"<os><type arch='x86_64' machine='q35'>hvm</type></os></domain>")
    dom = conn.defineXML(xml)
    try:
        back = etree.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).encode())
    finally:
        dom.undefine()
    for parent, order in ((back.find("features"), libvirt_order.FEATURES), (back.find("cpu"), libvirt_order.CPU),
                          (back, libvirt_order.DOMAIN)):
        tags = [c.tag for c in parent if isinstance(c.tag, str) and c.tag in order]
        assert len(tags) >= 5, tags
        assert tags == sorted(tags, key=order.index), (parent.tag, tags)
    assert [c.tag for c in back.find("features")][:3] == ["acpi", "apic", "pae"]
    print(f"\norder on {lab.title}: features {[c.tag for c in back.find('features')]}, "
          f"cpu {[c.tag for c in back.find('cpu')]}")

"""domain.extract reads each element's children once, the settings one parent at a time: it must read what
libvirt's XPath reads, the first element at each step (`features[1]/kvm[1]/hidden[1]/@state`), the last
matching sibling for a selected one (`clock[1]/timer[@name='kvmclock'][last()]`), every placement element
at its path. Checked against XPath itself on the bundled documents and on generated ones, with repeats,
comments, processing instructions and look-alikes in other namespaces where the rules look."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from lxml import etree

from virtxml_cpu import constants
from virtxml_cpu.core import commandline, domain
from virtxml_cpu.tables.libvirt_xml import PLACEMENT, SETTINGS
from virtxml_cpu.tables.orchestrators import ORCHESTRATORS

from tests.support import FIXTURES, ROOT

SOURCES = sorted(p for d in (FIXTURES, ROOT / "examples") for p in d.glob("*.xml"))
NS = {"q": constants.QEMU_NS, "own": constants.OWN_NS, "os": domain.LIBOSINFO_NS}


def _one(root, path: str):
    found = root.xpath(path, namespaces=NS)
    return found[0] if found else None


def _text(root, path: str):
    el = _one(root, path)
    return None if el is None else (el.text or "").strip()


def _step(path: tuple[str, ...]) -> str:
    return "/".join(f"{tag}[1]" for tag in path)


def reference(root) -> dict:
    """The facts extract reads, each by an XPath of its own."""
    settings_ = []
    for row in SETTINGS:
        parent, last = _step(row.path[:-1]), row.path[-1]
        if row.select:
            attr, want = row.select
            el = _one(root, f"{parent}/{last}[@{attr}='{want}'][last()]")
        else:
            el = _one(root, f"{parent}/{last}[1]")
        value = None if el is None else el.get(row.attr, row.bare)
        if value is not None:
            settings_.append((row.key, value))
    placed = []
    for row in PLACEMENT:
        path = _step(row.path) if row.first else "/".join(row.path)
        for el in root.xpath(path):
            cpus, attrs = el.get(row.cpus), tuple(el.get(a) for a in row.attrs)
            if cpus is not None or row.missing is not None or any(a is not None for a in attrs):
                placed.append(domain.Placed(row.key, cpus, attrs))
    cpu = _one(root, "cpu[1]")
    orchestrator = None
    for child in root.xpath("metadata[1]/*"):
        q = etree.QName(child)
        found = [o.name for o in ORCHESTRATORS for ns, element in o.metadata
                 if (q.namespace or "").startswith(ns) and q.localname == element]
        if found:
            orchestrator = found[0]
            break
    if orchestrator is None:
        for entry in root.xpath("sysinfo/system/entry"):
            found = [o.name for o in ORCHESTRATORS if (entry.get("name"), (entry.text or "").strip()) in o.sysinfo]
            if found:
                orchestrator = found[0]
                break
    spinlocks = _one(root, "features[1]/hyperv[1]/spinlocks[1]")
    qemu_args = commandline.read([a.get("value", "") for a in root.xpath("q:commandline/q:arg", namespaces=NS)])
    irqchip, irqchip_keys = commandline.machine_irqchip(qemu_args, tuple(settings_))
    return {
        "name": None if _one(root, "name[1]") is None else root.xpath("string(name[1])"),  # libvirt's own XPath
        "uuid": _text(root, "uuid[1]"), "virt_type": root.get("type"),
        "arch": _one(root, "os[1]/type[1]/@arch"), "machine": _one(root, "os[1]/type[1]/@machine"),
        "cpu_mode": "none" if cpu is None else cpu.get("mode") or "custom",
        "cpu_model": _text(root, "cpu[1]/model[1]") or None,
        "cpu_features": tuple((f.get("name") or "", f.get("policy") or "require") for f in root.xpath("cpu[1]/feature")),
        "settings": tuple(settings_),
        "hyperv": _one(root, "features[1]/hyperv[1]") is not None,
        "hyperv_spinlocks": spinlocks is not None and spinlocks.get("state") == "on",
        "numa_cells": len(root.xpath("cpu[1]/numa[1]/cell")),
        "qemu": qemu_args,
        "override_policy": _one(root, "metadata[1]/own:cpu[1]/@policy", ),
        "os_id": _one(root, "metadata[1]/os:libosinfo[1]/os:os[1]/@id"),
        "emulator": _text(root, "devices[1]/emulator[1]"),
        "orchestrator": orchestrator,
        "placement": tuple(placed),
        "launch_security": _one(root, "launchSecurity[1]/@type"),
        "irqchip": irqchip, "irqchip_keys": irqchip_keys,
    }


def check(root) -> None:
    facts = domain.extract(root)._asdict()
    want = reference(root)
    assert {k: facts[k] for k in want} == want


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_the_bundled_documents_read_as_xpath_reads_them(path):
    check(etree.parse(str(path)).getroot())


def _element(tag: str, attrs: dict, children=st.just(())):
    return st.builds(lambda a, c, t: f"<{tag}{''.join(f' {k}={v!r}' for k, v in a.items())}>{t}{''.join(c)}</{tag}>",
                     st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in attrs.items()}),
                     children, st.sampled_from(["", " x ", "2"]))


NOISE = st.sampled_from(["<!-- c -->", "<?pi x?>", "<o:kvm xmlns:o='urn:o'><hidden state='on'/></o:kvm>",
                         "<o:timer xmlns:o='urn:o' name='kvmclock' present='no'/>", "<other/>"])
STATE = {"state": ["on", "off", ""]}


def _some(*parts, most=4):
    return st.lists(st.one_of(*parts, NOISE), max_size=most)


KVM = _element("kvm", {}, _some(*(_element(t, STATE) for t in ("hidden", "hint-dedicated", "poll-control", "pv-ipi"))))
FEATURES = _element("features", {}, _some(
    KVM, _element("pvspinlock", STATE), _element("apic", {"eoi": ["on", "off"]}),
    _element("ioapic", {"driver": ["qemu", "kvm"]}), _element("hyperv", {}, _some(_element("spinlocks", STATE)))))
CPU = _element("cpu", {"mode": ["host-model", "custom", ""]}, _some(
    _element("model", {}), _element("feature", {"name": ["x2apic", "kvm_pv_unhalt"], "policy": ["require", "disable"]}),
    _element("cache", {"mode": ["emulate", "passthrough"]}), _element("numa", {}, _some(_element("cell", {})))))
CLOCK = _element("clock", {}, _some(_element("timer", {"name": ["kvmclock", "rtc"], "present": ["yes", "no"]})))
CPUTUNE = _element("cputune", {}, _some(
    _element("vcpupin", {"vcpu": ["0", "1"], "cpuset": ["0", "1-2"]}), _element("emulatorpin", {"cpuset": ["3"]}),
    _element("vcpusched", {"vcpus": ["0"], "scheduler": ["fifo"], "priority": ["1"]})))
METADATA = _element("metadata", {}, _some(
    st.just("<own:cpu xmlns:own='urn:virtxml-cpu:domain:1' policy='never'/>"),
    st.just(f"<os:libosinfo xmlns:os='{domain.LIBOSINFO_NS}'><os:os id='http://microsoft.com/win/10'/></os:libosinfo>"),
    st.sampled_from([f"<o:{element} xmlns:o='{ns}x'/>" for o in ORCHESTRATORS for ns, element in o.metadata])))
SYSINFO = _element("sysinfo", {"type": ["smbios", "fwcfg"]}, _some(_element("system", {}, _some(
    st.sampled_from([f"<entry name='{k}'>{v}</entry>" for o in ORCHESTRATORS for k, v in o.sysinfo]
                    + ["<entry name='product'>Other</entry>", "<entry name='serial'>Apache Software Foundation</entry>"])
))))
TOP = _some(
    _element("name", {}), _element("uuid", {}), _element("vcpu", {"placement": ["static", "auto"], "cpuset": ["0-3"]}),
    _element("os", {}, _some(_element("type", {"arch": ["x86_64"], "machine": ["pc-q35-6.2", "pc"]}))),
    FEATURES, CPU, CLOCK, CPUTUNE, METADATA, SYSINFO, _element("launchSecurity", {"type": ["sev", "tdx"]}),
    _element("devices", {}, _some(_element("emulator", {}), _element("disk", {}))),
    st.just(f"<q:commandline xmlns:q='{constants.QEMU_NS}'><q:arg value='-cpu'/><q:arg value='host'/></q:commandline>"),
    most=14)


@settings(max_examples=1500, deadline=None)
@given(TOP)
def test_generated_documents_read_as_xpath_reads_them(parts):
    check(etree.fromstring(f"<domain type='kvm'>{''.join(parts)}</domain>"))

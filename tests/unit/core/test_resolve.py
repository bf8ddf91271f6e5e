"""The rules against QEMU's documented behaviour, boundary by boundary (no libvirt needed)."""

from __future__ import annotations

import pytest
from lxml import etree

from virtxml_cpu.core import decision, domain, precedence, resolve
from virtxml_cpu.tables import qemu
from virtxml_cpu.tables.builds.known import BUILDS, UPSTREAM
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.machines import classify

# Nothing known about the host but the QEMU build: upstream, as these rules are read from upstream QEMU.
NO_HOST = HostFacts(qemu_build="upstream", build_source="test")


def up(**kw) -> HostFacts:
    return HostFacts(qemu_build="upstream", build_source="test", **kw)


def dom(machine="pc-q35-7.2", cpu="", features=None, vtype="kvm", extra="", vcpus=2):
    """A domain; `features=None` writes no <features> element at all (a different path than an empty one)."""
    mattr = f" machine='{machine}'" if machine else ""
    feats = "" if features is None else f"<features>{features}</features>"
    xml = (f"<domain type='{vtype}' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
           f"<name>t</name><vcpu>{vcpus}</vcpu><os><type arch='x86_64'{mattr}>hvm</type></os>"
           f"{feats}{cpu}<devices/>{extra}</domain>")
    return domain.extract(etree.fromstring(xml))


def states(facts, host=NO_HOST):
    return {p: v.state for p, v in resolve.resolve(facts, host).features.items()}


@pytest.mark.parametrize("machine,l3", [("pc-i440fx-2.7", "off"), ("pc-i440fx-2.8", "on"),
                                        ("pc-q35-2.7", "off"), ("pc-q35-2.8", "on"), ("pc-1.3", "off")])
def test_l3_cache_boundary(machine, l3):
    assert states(dom(machine))["l3-cache"] == l3


def test_x2apic_kept_as_model_bit_up_to_1_7():
    assert states(dom("pc-i440fx-1.7"))["x2apic"] == "off"  # qemu64 has no x2apic
    assert states(dom("pc-i440fx-2.0"))["x2apic"] == "on"
    sky = "<cpu mode='custom'><model>Skylake-Client</model></cpu>"
    assert states(dom("pc-i440fx-1.7", sky))["x2apic"] == "on"  # the model's own bit


def test_svm_model_bit_up_to_2_1_filtered_by_host():
    nested = up(cpuid={(0x80000001, "ecx"): 1 << 2, (0x40000001, "eax"): 0xFFFFFFFF, (1, "ecx"): 1 << 21})
    bare = up(cpuid={(0x80000001, "ecx"): 0, (0x40000001, "eax"): 0xFFFFFFFF, (1, "ecx"): 1 << 21})
    assert states(dom("pc-i440fx-2.1"), nested)["svm"] == "on"
    assert states(dom("pc-i440fx-2.1"), bare)["svm"] == "off"
    assert states(dom("pc-i440fx-2.1"))["svm"] == "host-dependent"
    assert states(dom("pc-i440fx-2.2"), nested)["svm"] == "off"


def test_pv_eoi_compat_up_to_1_2():
    assert states(dom("pc-1.2"))["kvm-pv-eoi"] == "off"
    assert states(dom("pc-1.3"))["kvm-pv-eoi"] == "on"


def test_msi_ext_dest_id_needs_split_irqchip_and_6_0():
    split = "<ioapic driver='qemu'/>"
    assert states(dom("pc-q35-5.1", features=split))["kvm-msi-ext-dest-id"] == "off"
    assert states(dom("pc-q35-6.0", features=split))["kvm-msi-ext-dest-id"] == "on"
    assert states(dom("pc-q35-6.0"))["kvm-msi-ext-dest-id"] == "off"
    host = "<cpu mode='host-passthrough'/>"
    assert states(dom("pc-q35-5.1", host, split))["kvm-msi-ext-dest-id"] == "off"
    assert states(dom("pc-q35-7.2", host, split))["kvm-msi-ext-dest-id"] == "on"


def test_pv_unhalt_named_models_never_host_passthrough_always():
    for m in ("pc-i440fx-1.4", "pc-i440fx-2.11", "pc-q35-7.2", "q35", None):
        assert states(dom(m))["kvm-pv-unhalt"] == "off"
        assert states(dom(m, "<cpu mode='host-model'/>"))["kvm-pv-unhalt"] == "off"
        assert states(dom(m, "<cpu mode='host-passthrough'/>"))["kvm-pv-unhalt"] == "on"
    assert states(dom(cpu="<cpu mode='host-passthrough'/>", features="<pvspinlock state='off'/>"))[
        "kvm-pv-unhalt"] == "off"


def test_rhel_machines_have_pv_unhalt_and_asyncpf_int_rows():
    s = states(dom("pc-q35-rhel8.4.0"))
    assert s["kvm-pv-unhalt"] == "on" and s["kvm-asyncpf-int"] == "off"
    assert states(dom("pc-q35-rhel8.5.0"))["kvm-asyncpf-int"] == "host-dependent"  # on, if KVM has it
    host = HostFacts(cpuid={(0x40000001, "eax"): 1 << 14 | 1 << 7})  # no build: the rhel name pins it
    assert states(dom("pc-q35-rhel9.2.0"), host)["kvm-asyncpf-int"] == "on"
    assert states(dom("pc-i440fx-rhel7.3.0"))["l3-cache"] == "off"
    assert states(dom("pc-i440fx-rhel7.6.0"))["l3-cache"] == "on"


def test_hidden_and_tcg_clear_the_kvm_leaf_but_not_hints():
    s = states(dom(features="<kvm><hidden state='on'/><hint-dedicated state='on'/></kvm>"))
    assert all(s[p] == "off" for p in qemu.KVM_LEAF_EAX_BIT)
    assert s["kvm-hint-dedicated"] == "on" and s["x2apic"] == "on"
    t = states(dom(vtype="qemu"))
    assert all(t[p] == "off" for p in qemu.KVM_LEAF_EAX_BIT)
    assert t["svm"] == "on" and t["x2apic"] == "off"  # qemu64 bits; TCG keeps svm


def test_tcg_x2apic_depends_on_qemu_version():
    sky = "<cpu mode='custom'><model>Skylake-Client</model></cpu>"
    assert states(dom(cpu=sky, vtype="qemu"))["x2apic"] == "host-dependent"
    assert states(dom(cpu=sky, vtype="qemu"), up(qemu_version=(7, 2, 22)))["x2apic"] == "off"
    assert states(dom(cpu=sky, vtype="qemu"), up(qemu_version=(9, 0, 0)))["x2apic"] == "on"


def test_commandline_global_and_cpu_pm():
    glob = ("<qemu:commandline><qemu:arg value='-global'/>"
            "<qemu:arg value='x86_64-cpu.kvm-pv-unhalt=on'/></qemu:commandline>")
    r = resolve.resolve(dom(extra=glob), NO_HOST)
    assert r.features["kvm-pv-unhalt"].state == "on" and r.explicit_unhalt
    pm = "<qemu:commandline><qemu:arg value='-overcommit'/><qemu:arg value='cpu-pm=on'/></qemu:commandline>"
    r = resolve.resolve(dom(cpu="<cpu mode='host-passthrough'/>", extra=pm), NO_HOST)
    v = r.features["kvm-pv-unhalt"]
    assert v.state == "off" and v.qemu_property == "on"


def test_commandline_cpu_replaces_libvirt_cpu():
    cmd = "<qemu:commandline><qemu:arg value='-cpu'/><qemu:arg value='host,kvm-pv-ipi=off'/></qemu:commandline>"
    r = resolve.resolve(dom(features="<pvspinlock state='off'/>", extra=cmd), NO_HOST)
    assert r.cpu_kind == "host"
    assert r.features["kvm-pv-unhalt"].state == "on"  # libvirt's kvm-pv-unhalt=off was replaced
    assert r.features["kvm-pv-ipi"].state == "off"


def test_alias_resolution_from_capabilities():
    host = HostFacts(aliases={"pc": "pc-i440fx-7.2", "q35": "pc-q35-7.2", "": "pc-i440fx-7.2"})
    assert classify("q35", UPSTREAM, host.aliases).version == (7, 2)
    assert classify(None, UPSTREAM, host.aliases).alias_of == "pc-i440fx-7.2"
    assert classify("pc-q35-4.0.1", UPSTREAM).version == (4, 0, 1)
    assert classify("pc-0.15", UPSTREAM).family == "pc-i440fx"
    assert classify("microvm", UPSTREAM).family == "microvm"


def test_unresolved_alias_is_new_enough_for_old_rows_but_not_for_5_1():
    split = "<ioapic driver='qemu'/>"
    s = states(dom("q35", features=split))
    assert s["l3-cache"] == "on"
    assert s["kvm-msi-ext-dest-id"] == "host-dependent"


def test_every_rule_cites_its_source():
    """A commit hash or the downstream patch and its array: every row says where it comes from."""
    for build in BUILDS.values():
        for rule in build.kvm_defaults + build.machine_rows:
            assert rule.prop in qemu.PROPERTIES
            cites_commit = any(len(w) >= 10 and all(c in "0123456789abcdef" for c in w.strip("'(),;"))
                               for w in rule.source.split())
            cites_patch = "patch" in rule.source or "pc_rhel" in rule.source
            assert cites_commit or cites_patch, (build.name, rule)


@pytest.mark.parametrize("machine,vcpus,numa,pol,action,rule", [
    ("pc-q35-7.2", 2, 0, "compat", "inject", "policy-compat"),
    ("pc-i440fx-2.11", 2, 0, "compat", "inject", "policy-compat"),
    ("pc-i440fx-2.10", 2, 0, "compat", "keep", "machine-too-old"),
    ("pc-i440fx-2.10", 2, 0, "always", "inject", "policy-always"),
    ("pc-q35-7.2", 2, 0, "never", "keep", "policy-never"),
    ("pc-q35-7.2", 2, 1, "numa", "keep", "numa-single-node"),
    ("pc-q35-7.2", 2, 2, "numa", "inject", "policy-numa"),
    ("microvm", 2, 0, "always", "keep", "machine-family"),
    ("q35", 2, 0, "compat", "inject", "policy-compat"),
])
def test_decisions(machine, vcpus, numa, pol, action, rule):
    cells = "".join(f"<cell id='{i}' cpus='{i}' memory='1024'/>" for i in range(numa))
    cpu = f"<cpu mode='host-model'><numa>{cells}</numa></cpu>" if numa else "<cpu mode='host-model'/>"
    d = decision.decide(resolve.resolve(dom(machine, cpu, vcpus=vcpus), NO_HOST), pol)
    assert (d.action, d.rule) == (action, rule), d.reason


def test_host_without_pv_unhalt_is_left_alone():
    host = HostFacts(cpuid={(0x40000001, "eax"): 0x7B & ~0x80})
    d = decision.decide(resolve.resolve(dom(), host), "compat")
    assert (d.action, d.rule) == ("keep", "accelerator-unsupported")
    assert "does not support" in d.reason


def test_single_vcpu_and_dedicated_notes():
    d = decision.decide(resolve.resolve(dom(vcpus=1), NO_HOST), "compat")
    assert d.action == "inject" and any("1 vCPU" in n for n in d.notes)
    assert not any("KVM_HINTS_REALTIME" in n for n in d.notes)
    d = decision.decide(resolve.resolve(dom(features="<kvm><hint-dedicated state='on'/></kvm>"), NO_HOST), "compat")
    assert d.action == "inject" and any("KVM_HINTS_REALTIME" in n for n in d.notes)
    assert not any("1 vCPU" in n for n in d.notes)


def test_without_a_features_element():
    """No <features> at all is its own path (dom() writes none by default)."""
    f = dom()
    assert f.settings == () and f.pvspinlock is None
    assert decision.decide(resolve.resolve(f, NO_HOST), "compat").rule == "policy-compat"


def test_metadata_override_beats_cli():
    own = "<metadata><v:cpu xmlns:v='urn:virtxml-cpu:domain:1' policy='never'/></metadata>"
    f = dom(extra=own)
    assert f.override_policy == "never"
    assert precedence.policy(f.override_policy, "always", "compat") == ("never", "domain <metadata>")


@pytest.mark.parametrize("build,machine", [("upstream", "pc-q35-7.2"), ("ubuntu", "pc-q35-jammy"),
                                             ("rhel", "pc-q35-rhel9.2.0")])
def test_x2apic_off_without_in_kernel_irqchip_on_every_build(build, machine):
    off = ("<qemu:commandline><qemu:arg value='-machine'/><qemu:arg value='kernel-irqchip=off'/>"
           "</qemu:commandline>")
    host = HostFacts(qemu_build=build, build_source="test")
    r = resolve.resolve(dom(machine, "<cpu mode='custom'><model>Skylake-Client</model></cpu>", extra=off), host)
    assert r.irqchip == "off" and r.features["x2apic"].state == "off"
    assert "492a4c94be" in r.features["x2apic"].detail
    assert r.features["kvm-pv-unhalt"].state == "off"
    assert decision.decide(r, "compat").rule == "accelerator-unsupported"


def test_decision_branches_reached_only_by_unusual_domains():
    arm = domain.extract(etree.fromstring(
        "<domain type='kvm'><name>a</name><os><type arch='aarch64' machine='virt'>hvm</type></os><devices/></domain>"))
    assert decision.decide(resolve.resolve(arm, NO_HOST), "compat").rule == "not-x86"
    no_unhalt = up(cpuid={(0x40000001, "eax"): 0x7B & ~0x80})
    hp = resolve.resolve(dom(cpu="<cpu mode='host-passthrough'/>"), no_unhalt)
    assert hp.features["kvm-pv-unhalt"].state == "off"
    assert decision.decide(hp, "compat").rule == "cpu-mode"
    # An Ubuntu codename between artful (2.10) and bionic (2.11): its compat level straddles 2.11.
    between = resolve.resolve(dom("pc-q35-aztec"), HostFacts(qemu_build="ubuntu", build_source="t"))
    assert decision.decide(between, "compat").rule == "machine-version-unknown"
    assert decision.decide(between, "always").rule == "policy-always"


def test_invalid_exemption_keeps_the_domain():
    from virtxml_cpu.core.config import Config
    from virtxml_cpu.core.pipeline import process

    xml = (b"<domain type='kvm'><name>t</name><os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>"
           b"<metadata><v:cpu xmlns:v='urn:virtxml-cpu:domain:1' policy='Never'/></metadata><devices/></domain>")
    o = process(xml, "t.xml", NO_HOST, Config())
    assert (o.decision.rule, o.changed, o.output) == ("metadata-invalid", False, xml)


ADD_A_PROPERTY = '''
import virtxml_cpu.tables.properties as P
P.TABLE += (P._pv("kvm-asyncpf-vmexit", 10, (9, 0), "eba978061e"),)  # the one row
P.BY_NAME = {p.name: p for p in P.TABLE}
P.PROPERTIES = tuple(p.name for p in P.TABLE)
from lxml import etree
from virtxml_cpu.core import domain, resolve
from virtxml_cpu.core.hostfacts import HostFacts
def state(mode, release, cpuid=None):
    xml = (f"<domain type='kvm'><name>t</name><vcpu>2</vcpu><os><type arch='x86_64' machine='pc-q35-9.0'>hvm"
           f"</type></os><cpu mode='{mode}'/><devices/></domain>")
    host = HostFacts(cpuid=cpuid, qemu_build="upstream", build_source="t", qemu_version=release)
    v = resolve.resolve(domain.extract(etree.fromstring(xml)), host).features["kvm-asyncpf-vmexit"]
    return f"{v.state}/{v.source}"
print(state("host-model", (8, 2, 0)), state("host-model", (9, 2, 0)),
      state("host-passthrough", (9, 2, 0), {(0x40000001, "eax"): 1 << 10}))
'''


def test_adding_a_property_is_one_table_row():
    """An 18th property (KVM_FEATURE_ASYNC_PF_VMEXIT, QEMU 9.0) as one tables/properties.py row and nothing else:
    absent before its release, off for named models, passed through by -cpu host."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", ADD_A_PROPERTY], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["off/qemu-release", "off/qemu-default", "on/-cpu", "host"], out


@pytest.mark.parametrize("xml,prop,state,source", [
    ("<features><kvm><pv-ipi state='off'/></kvm></features>", "kvm-pv-ipi", "off", "<features><kvm>"),
    ("<features><kvm><poll-control state='on'/></kvm></features>", "kvm-poll-control", "on", "<features><kvm>"),
    ("<features><apic eoi='off'/></features>", "kvm-pv-eoi", "off", "<features><apic>"),
    ("<clock offset='utc'><timer name='rtc'/><timer name='kvmclock' present='no'/></clock>", "kvmclock", "off",
     "<clock><timer>"),
    ("<features><ioapic driver='qemu'/></features>", "kvm-msi-ext-dest-id", "on", "kvm-default"),
    ("<cpu mode='custom'><model>qemu64</model><cache mode='emulate' level='3'/></cpu>", "l3-cache", "on",
     "<cpu><cache>"),
])
def test_each_libvirt_xml_row_reads_and_translates(xml, prop, state, source):
    """One row of tables/libvirt_xml.py both reads the element and says what libvirt passes QEMU for it."""
    cpu = "" if "<cpu" in xml else "<cpu mode='custom'><model>qemu64</model></cpu>"
    f = dom("pc-i440fx-2.7" if "cache" in xml else "pc-q35-7.2", cpu=cpu + ("" if "<features>" in xml else xml),
            features=xml[len("<features>"):-len("</features>")] if xml.startswith("<features>") else None)
    v = resolve.resolve(f, up(cpuid={(0x40000001, "eax"): 0xFFFF}, qemu_version=(7, 2, 0))).features[prop]
    assert (v.state, v.source) == (state, source), v


# kernel_irqchip in <qemu:commandline>, as QEMU 5.2.0, 7.2.22, 10.0.2 and 11.1.2 read it behind libvirt's own
# `-machine TYPE[,kernel_irqchip=X] -accel kvm` (tests/lab/test_irqchip.py starts each case): the -machine options
# merge and the last value wins; from 6.0 both spellings in them are refused; a second -accel is never read.
IRQCHIP_CASES = {
    "one -machine, two values": (["-machine", "kernel_irqchip=split,kernel_irqchip=on"], "", "on", None),
    "one -machine, two values the other way": (["-machine", "pc,kernel_irqchip=on,kernel_irqchip=split"], "", "split",
                                               None),
    "-machine twice": (["-machine", "kernel_irqchip=split", "-machine", "kernel_irqchip=on"], "", "on", None),
    "-M then -machine": (["-M", "kernel-irqchip=on", "--machine", "kernel-irqchip=split"], "", "split", None),
    "a later -machine without it": (["-machine", "kernel_irqchip=split", "-machine", "usb=off"], "", "split", None),
    "a comma inside a value": (["-machine", "kernel_irqchip=split,dt-compatible=a,,kernel_irqchip=on"], "",
                               "split", None),
    "a comma ending a value": (["-machine", "kernel_irqchip=split,dt-compatible=a,,,kernel_irqchip=on"], "", "on",
                               None),
    "commas ending a value": (["-machine", "kernel_irqchip=split,dt-compatible=a,,,,,kernel-irqchip=on"], "", "on",
                              "conflict"),
    "-accel behind libvirt's": (["-accel", "kvm,kernel-irqchip=split"], "", "on", None),
    "-machine and -accel": (["-machine", "kernel_irqchip=split", "-accel", "kvm,kernel-irqchip=on"], "", "split",
                            None),
    "over libvirt's <ioapic>": (["-machine", "kernel_irqchip=on"], "<ioapic driver='qemu'/>", "on", None),
    "both spellings in one": (["-machine", "kernel_irqchip=split,kernel-irqchip=on"], "", "on", "conflict"),
    "both spellings over two": (["-machine", "kernel-irqchip=split", "-machine", "kernel_irqchip=on"], "", "on",
                                "conflict"),
    "libvirt's spelling and the other": (["-machine", "kernel-irqchip=on"], "<ioapic driver='qemu'/>", "on",
                                         "conflict"),
}


def _irqchip_domain(args, features):
    cmd = "".join(f"<qemu:arg value='{a}'/>" for a in args)
    return dom("pc-q35-7.2", features=features or None, extra=f"<qemu:commandline>{cmd}</qemu:commandline>")


@pytest.mark.parametrize("case", sorted(IRQCHIP_CASES))
@pytest.mark.parametrize("release", [(5, 2), (7, 2), (10, 0), (11, 1)])
def test_kernel_irqchip_as_qemu_reads_it(case, release):
    args, features, want, conflict = IRQCHIP_CASES[case]
    r = resolve.resolve(_irqchip_domain(args, features), up(qemu_version=release, version_source="test"))
    refusal = "Conflict between 'kernel_irqchip' and 'kernel-irqchip'" if conflict and release >= (6, 0) else None
    assert (r.irqchip, r.qemu_refusal) == (want, refusal)
    if refusal:
        assert decision.decide(r, "compat").rule == "qemu-refuses"


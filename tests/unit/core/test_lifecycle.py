"""The tables of this round: the machine lifecycle per build and release, QEMU's -cpu grammar, the 18th
property (kvm-asyncpf-vmexit), TDX filtering, Ubuntu 26.04's and RHEL 9.8/10.2's machine names.

Expected values come from the primary sources the rows cite (boards.h's arithmetic, the patches read), from
QEMU 7.2.22 run here (the grammar) and from the issue's count for QEMU 11.1 (36 pc machine types, 18 of them
deprecated), not from the tables.
"""

from __future__ import annotations

import json
import re

import pytest
from lxml import etree

from virtxml_cpu.core import cpu_option, domain, resolve as core_resolve, lifecycle, decision
from virtxml_cpu.verify import run as verify
from virtxml_cpu.render import explain
from virtxml_cpu.core.answer import Resolution
from virtxml_cpu.core.config import Config
from virtxml_cpu.tables import cpu_models, qemu as tables_qemu
from virtxml_cpu.tables.builds.known import UBUNTU, UPSTREAM
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.live.records import AuditRow, HostResult, RowDecision, summarize
from virtxml_cpu.render import jsonlines, prometheus
from virtxml_cpu.render import table as table_render

from tests.support import FIXTURES


def dom(machine: str, cpu: str = "<cpu mode='custom'><model>qemu64</model></cpu>", extra: str = "",
        qemu: str = "") -> bytes:
    cmd = (f"<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>{qemu}</qemu:commandline>"
           if qemu else "")
    return (f"<domain type='kvm'><name>t</name><vcpu>2</vcpu><os><type arch='x86_64' machine='{machine}'>hvm</type>"
            f"</os>{cpu}{extra}<devices/>{cmd}</domain>").encode()


def resolve(xml: bytes, **host) -> Resolution:
    return core_resolve.resolve(domain.extract(etree.fromstring(xml)), HostFacts(**host))


def up(release, **kw):
    return dict(qemu_build="upstream", build_source="test", qemu_version=release, version_source="test", **kw)


# ---------------------------------------------------------------------------------------------------------
# Machine lifecycle

def _status_counts(release):
    names = [n for n in lifecycle.known_names(UPSTREAM, release) if n.startswith(("pc-i440fx-", "pc-q35-"))]
    got = {n: lifecycle.versioned_status(n, release, UPSTREAM).status for n in names}
    return {s: sorted(n for n, v in got.items() if v == s) for s in lifecycle.STATUSES}


def test_qemu_11_1_offers_36_pc_machine_types_18_of_them_deprecated():
    c = _status_counts((11, 1, 3))
    offered = c["offered"] + c["deprecated"]
    assert len(offered) == 36 and len(c["deprecated"]) == 18
    assert "pc-i440fx-5.2" in c["deprecated"] and "pc-i440fx-5.1" in c["not-offered"]
    assert "pc-q35-8.1" in c["deprecated"] and "pc-q35-8.2" in c["offered"]


@pytest.mark.parametrize("release,name,status", [
    ((10, 1, 0), "pc-q35-4.1", "not-offered"),  # 10 - 4 == 6 and 1 >= 1: not registered
    ((10, 1, 0), "pc-q35-4.2", "deprecated"),
    ((10, 1, 0), "pc-q35-7.1", "deprecated"),  # 10 - 7 == 3 and 1 >= 1
    ((10, 1, 0), "pc-q35-7.2", "offered"),
    ((10, 0, 2), "pc-q35-2.4", "deprecated"),  # deletion gated until 10.1 (QEMU_DELETE_MACHINES)
    ((10, 0, 2), "pc-q35-7.1", "offered"),
    ((9, 0, 0), "pc-i440fx-2.3", "deprecated"),  # by hand since 8.2, no age rule before 9.1
    ((9, 0, 0), "pc-i440fx-2.4", "offered"),
    ((9, 1, 0), "pc-i440fx-2.3", "not-offered"),  # removed from the code in 9.1
    ((8, 1, 0), "pc-i440fx-1.7", "deprecated"),
    ((8, 2, 0), "pc-i440fx-1.7", "not-offered"),
    ((7, 2, 22), "pc-q35-2.3", "not-offered"),  # removed in 2.6
    ((2, 10, 0), "pc-q35-2.11", "not-offered"),  # no machine newer than its QEMU
    ((4, 0, 0), "pc-q35-4.0.1", "not-offered"),
    ((4, 1, 0), "pc-q35-4.0.1", "offered"),
    ((7, 2, 22), "pc-i440fx-3.2", "not-offered"),  # there was no QEMU 3.2
    ((10, 0, 50), "pc-q35-4.1", "deprecated"),  # a 10.1 development snapshot counts as 10.1 ...
])
def test_versioned_lifecycle(release, name, status):
    assert lifecycle.versioned_status(name, release, UPSTREAM).status == status


def test_boards_h_arithmetic_for_development_snapshots():
    assert lifecycle._expired(3, (9, 2, 50), 7, 0)  # 9.2.50 is the 10.0 cycle: 10 - 7 == 3 and 0 >= 0
    assert not lifecycle._expired(3, (9, 1, 50), 7, 0)  # 9.1.50 is 9.2: 9 - 7 == 2


def test_a_guest_the_qemu_will_not_start_is_kept_and_said_so():
    r = resolve(dom("pc-i440fx-2.11"), **up((11, 1, 3)))
    d = decision.decide(r, "compat")
    assert r.machine_status == "not-offered" and d.action == "keep" and d.rule == "machine-not-offered"
    assert "QEMU 11.1.3" in d.reason and "change its machine type" in d.reason and "3dfa5a5c71" in d.reason
    doc = explain.to_json(process(dom("pc-i440fx-2.11"), "t.xml", HostFacts(**up((11, 1, 3))), Config()))
    assert doc["machine_status"] == "not-offered" and doc["machine_base"] == "pc-i440fx-2.11"
    text = explain.table(process(dom("pc-i440fx-2.11"), "t.xml", HostFacts(**up((11, 1, 3))), Config()))
    assert "machine status: not-offered (QEMU 11.1.3" in text


def test_a_configured_release_older_than_the_machine_is_not_offered():
    r = resolve(dom("pc-q35-2.11"), **up((2, 10)))
    assert r.machine_status == "not-offered" and "newer than itself" in r.machine_status_why
    assert decision.decide(r, "compat").rule == "machine-not-offered"


def test_a_deprecated_machine_is_decided_as_before_with_a_note():
    r = resolve(dom("pc-q35-5.2"), **up((11, 1, 3)))
    d = decision.decide(r, "compat")
    assert r.machine_status == "deprecated" and d.rule == "policy-compat"
    assert any("deprecated" in n and "plan a change of machine type" in n for n in d.notes)


def test_the_hosts_machine_list_decides_what_is_offered():
    r = resolve(dom("pc-q35-7.2"), **up((7, 2, 22), machines=frozenset({"pc-q35-7.1"}), sources=("capabilities",)))
    assert r.machine_status == "not-offered" and "does not list" in r.machine_status_why


def test_a_machine_of_another_build_is_not_offered_by_the_chosen_one():
    r = resolve(dom("pc-q35-noble"), **up((10, 0, 2)))
    assert r.machine_status == "not-offered" and "only Ubuntu's QEMU" in r.machine_status_why


def test_audit_counts_deprecated_and_not_offered():
    keep = RowDecision("keep", "machine-not-offered", "r")
    rows = (AuditRow("h", "a", "u1", "shut off", True, "off", decision=keep, machine_status="not-offered"),
            AuditRow("h", "b", "u2", "shut off", True, "off", decision=keep, machine_status="deprecated"),
            AuditRow("h", "c", "u3", "shut off", True, "off", decision=keep, machine_status="offered"))
    hosts = [HostResult("h", rows)]
    s = summarize(hosts)
    assert (s.machine_deprecated, s.machine_not_offered) == (1, 1)
    assert jsonlines.summary_record(hosts)["machine_not_offered"] == 1
    assert "machine type not offered by the host's QEMU: 1, deprecated: 1" in table_render.summary_line(hosts)
    text = prometheus.tail(hosts, 0.0)
    assert 'virtxml_cpu_host_domains_machine_status{host="h",status="not-offered"} 1' in text
    assert 'virtxml_cpu_host_domains_machine_status{host="h",status="deprecated"} 1' in text


def test_verify_compares_the_table_with_query_machines():
    """A QEMU 10.0.2 list (as its -machine help shows it here): no disagreement; a changed deprecated flag and a
    machine the table does not expect are each reported."""
    listed = [{"name": f"pc-{f}-{v}", "deprecated": v.startswith(("2.", "3.", "4.", "5.", "6.")) or v == "7.0"}
              for f in ("i440fx", "q35") for v in
              [f"2.{m}" for m in range(4, 13)] + ["3.0", "3.1", "4.0", "4.1", "4.2"] +
              [f"{a}.{b}" for a in range(5, 10) for b in range(3)] + ["10.0"]]
    listed.append({"name": "pc-q35-4.0.1", "deprecated": True})
    host = HostFacts(**up((10, 0, 2)))
    n, found = verify.lifecycle_disagreements(listed, host)
    assert n >= len(listed) and not found, [d.line() for d in found]
    listed[0]["deprecated"] = False
    listed.append({"name": "pc-q35-1.7", "deprecated": False})
    _n, found = verify.lifecycle_disagreements(listed, host)
    assert {(d.machine, d.qemu, d.tool) for d in found} == {("pc-i440fx-2.4", "offered", "deprecated"),
                                                            ("pc-q35-1.7", "offered", "not-offered")}



def test_verify_takes_an_unknown_build_for_no_build():
    """With the build unknown the tool resolves each name under every build that has it; verify takes no
    build's table of names for it (not upstream's): only the names QEMU lists are compared."""
    listed = [{"name": "pc-q35-9.2", "deprecated": False}]
    n, found = verify.lifecycle_disagreements(listed, HostFacts(qemu_version=(9, 2, 0)))
    assert (n, found) == (1, [])
    n, _found = verify.lifecycle_disagreements(listed, HostFacts(**up((9, 2, 0))))
    assert n > 1  # a known upstream build: its names up to 9.2 as well

# ---------------------------------------------------------------------------------------------------------
# Ubuntu 26.04's names, RHEL 9.8 / 10.2

UBUNTU_2604 = [  # (name, base) as the 26.04 build's define-ubuntu-machine-types.patch defines them
    ("pc-i440fx-oracular", "pc-i440fx-9.0"), ("pc-q35-oracular", "pc-q35-9.0"),
    ("pc-i440fx-plucky", "pc-i440fx-9.2"), ("pc-q35-plucky", "pc-q35-9.1"),
    ("pc-i440fx-questing", "pc-i440fx-10.0"), ("pc-q35-questing", "pc-q35-10.1"),
    ("pc-i440fx-questing-v2", "pc-i440fx-10.1"),
    ("pc-i440fx-resolute", "pc-i440fx-10.2"), ("pc-q35-resolute", "pc-q35-10.2"),
    ("pc-i440fx-noble-v2", "pc-i440fx-8.2"), ("pc-q35-noble-v2", "pc-q35-8.2"),
    ("pc-i440fx-hirsute-hpb", "pc-i440fx-5.1"), ("pc-q35-hirsute-hpb", "pc-q35-5.2"),
    ("pc-q35-cosmic", "pc-q35-2.11"), ("pc-q35-cosmic-hpb", "pc-q35-2.12"),
    ("pc-i440fx-focal-hpb", "pc-i440fx-4.0"), ("pc-q35-focal-hpb", "pc-q35-4.2"),
    ("pc-i440fx-jammy-hpb-maxcpus", "pc-i440fx-6.2"), ("pc-q35-mantic-maxcpus", "pc-q35-8.0"),
    ("pc-q35-yakkety", "pc-q35-2.6"),
]


@pytest.mark.parametrize("name,base", UBUNTU_2604)
def test_ubuntu_2604_names_and_their_bases(name, base):
    r = resolve(dom(name), qemu_build="ubuntu", build_source="test", qemu_version=(10, 2, 1),
                version_source="test")
    assert (r.machine.base, r.machine_status) == (base, "offered"), r.machine.how


def test_explain_names_the_upstream_machine_a_downstream_one_is_built_from():
    r = resolve(dom("pc-q35-plucky"), qemu_build="ubuntu", build_source="t", qemu_version=(10, 2, 1))
    assert r.machine.described() == "pc-q35-plucky (Ubuntu 25.04, built as pc-q35-9.1)"
    upstream = resolve(dom("pc-q35-9.1"), **up((10, 2, 0)))
    assert upstream.machine.base == "pc-q35-9.1" and upstream.machine.described() == "pc-q35-9.1"
    alias = resolve(dom("q35"), **up((10, 2, 0), aliases={"q35": "pc-q35-10.2"}))
    assert alias.machine.base == "pc-q35-10.2"


@pytest.mark.parametrize("name", ["pc-q35-questing-v2", "pc-i440fx-trusty", "pc-q35-xenial"])
def test_names_the_2604_build_does_not_have(name):
    r = resolve(dom(name), qemu_build="ubuntu", build_source="t", qemu_version=(10, 2, 1))
    assert r.machine.base is None or r.machine_status == "not-offered", (r.machine_status, r.machine.how)


def test_ubuntu_suffix_variants_all_have_rows():
    suffixed = [k for k in UBUNTU.tables[0].suffix_overrides]
    assert {"noble-v2", "questing-v2", "jammy-hpb-maxcpus", "mantic-hpb-maxcpus", "hirsute-hpb"} <= set(suffixed)


@pytest.mark.parametrize("name,release,status,base", [
    ("pc-q35-rhel9.8.0", (10, 1, 0), "offered", "pc-q35-10.1"),
    ("pc-q35-rhel10.2.0", (10, 1, 0), "offered", "pc-q35-10.1"),
    ("pc-q35-rhel9.8.0", (10, 0, 0), "not-offered", "pc-q35-10.1"),
])
def test_rhel_9_8_and_10_2_machines(name, release, status, base):
    r = resolve(dom(name), qemu_build="rhel", build_source="test", qemu_version=release)
    assert (r.machine_status, r.machine.base, r.features["kvm-pv-unhalt"].state) == (status, base, "on")
    assert r.machine.downstream == f"RHEL {name.split('rhel')[1]}"


@pytest.mark.parametrize("package,name,status", [
    ("qemu-kvm-10.1.0-17.el9", "pc-q35-rhel8.6.0", "deprecated"),  # RHEL 9: (9 - 8) >= 1
    ("qemu-kvm-10.1.0-17.el9", "pc-q35-rhel9.6.0", "offered"),
    ("qemu-kvm-10.1.0-17.el9", "pc-i440fx-rhel7.6.0", "deprecated"),  # kept: deletion after 3 majors in RHEL 9
    ("qemu-kvm-10.1.0-5.el10", "pc-q35-rhel9.6.0", "deprecated"),
    ("qemu-kvm-10.1.0-5.el10", "pc-q35-rhel10.2.0", "offered"),
    ("qemu-kvm-10.1.0", "pc-q35-rhel8.6.0", "offered"),  # RHEL major not said: not assumed
])
def test_rhel_age_rule_counts_rhel_majors(package, name, status):
    r = resolve(dom(name), qemu_build="rhel", qemu_version=(10, 1, 0), package=package,
                build_source=f"/usr/libexec/qemu-kvm --version: QEMU emulator version 10.1.0 ({package})")
    assert r.machine_status == status, r.machine_status_why


# ---------------------------------------------------------------------------------------------------------
# The 18th property and TDX

KVM_ALL = {(0x40000001, "eax"): 0xFFFF | 1 << 24}


def test_kvm_asyncpf_vmexit_off_for_named_models_passed_through_by_host():
    named = resolve(dom("pc-q35-10.0"), **up((10, 0, 2)), cpuid=KVM_ALL)
    assert named.features["kvm-asyncpf-vmexit"].state == "off"
    host = resolve(dom("pc-q35-10.0", "<cpu mode='host-passthrough'/>"), **up((10, 0, 2)), cpuid=KVM_ALL)
    assert host.features["kvm-asyncpf-vmexit"].state == "on"
    no_bit = resolve(dom("pc-q35-10.0", "<cpu mode='host-passthrough'/>"), **up((10, 0, 2)),
                     cpuid={(0x40000001, "eax"): 0xFBFF})
    assert no_bit.features["kvm-asyncpf-vmexit"].state == "off"
    old = resolve(dom("pc-q35-8.2", "<cpu mode='host-passthrough'/>"), **up((8, 2, 0)), cpuid=KVM_ALL)
    v = old.features["kvm-asyncpf-vmexit"]
    assert (v.state, v.source) == ("off", "qemu-release") and "eba978061e" in v.detail


TDX_LOST = ("kvmclock", "kvmclock-stable-bit", "kvm-asyncpf", "kvm-asyncpf-int", "kvm-asyncpf-vmexit",
            "kvm-steal-time", "kvm-pv-eoi")


def test_tdx_guests_lose_what_tdx_does_not_support():
    tdx = "<launchSecurity type='tdx'/>"
    r = resolve(dom("pc-q35-10.1", "<cpu mode='host-passthrough'/>", tdx), **up((10, 1, 0)), cpuid=KVM_ALL)
    assert all(r.features[p].state == "off" and "4d6e288a35" in r.features[p].detail for p in TDX_LOST)
    assert r.features["kvm-pv-unhalt"].state == "on" and r.features["kvm-nopiodelay"].state == "on"
    named = resolve(dom("pc-q35-10.1", extra=tdx), **up((10, 1, 0)), cpuid=KVM_ALL)
    assert named.features["kvmclock"].source == "filtered" and named.features["kvm-pv-eoi"].state == "off"
    plain = resolve(dom("pc-q35-10.1"), **up((10, 1, 0)), cpuid=KVM_ALL)
    assert plain.features["kvmclock"].state == "on"


def test_a_model_own_property_the_model_table_lacks_is_unknown(monkeypatch):
    """Adding a model-own property row before tables/cpu_models.py is regenerated: unknown, never a KeyError."""
    monkeypatch.setitem(cpu_models.MODEL_BITS, "qemu64", {"x2apic": False})  # as if svm were a new row
    r = resolve(dom("pc-q35-7.2"), **up((7, 2, 22)))
    assert r.features["svm"].state == "off"  # svm=off in kvm_default_props still applies on top
    r = resolve(dom("pc-i440fx-2.1"), **up((7, 2, 22)))  # pc_compat_2_1: svm keeps the model's bit
    assert r.features["svm"].state == "host-dependent" and "predates the property" in r.features["svm"].detail


# ---------------------------------------------------------------------------------------------------------
# QEMU's -cpu grammar (QEMU 7.2.22 here: `qemu-system-x86_64 -cpu qemu64,kvm-pv-eoi=V`)

@pytest.mark.parametrize("value,want", [("on", "on"), ("yes", "on"), ("true", "on"), ("y", "on"),
                                        ("off", "off"), ("no", "off"), ("false", "off"), ("n", "off")])
def test_qemu_takes_these_spellings(value, want):
    r = resolve(dom("pc-q35-7.2", qemu=f"<qemu:arg value='-cpu'/><qemu:arg value='qemu64,kvm-pv-eoi={value}'/>"),
                **up((7, 2, 22)))
    assert r.features["kvm-pv-eoi"].state == want and r.qemu_refusal is None


@pytest.mark.parametrize("value", ["1", "0", "ON", "On", ""])
def test_qemu_refuses_these_spellings(value):
    r = resolve(dom("pc-q35-7.2", qemu=f"<qemu:arg value='-cpu'/><qemu:arg value='qemu64,kvm-pv-eoi={value}'/>"),
                **up((7, 2, 22)))
    d = decision.decide(r, "compat")
    assert (d.action, d.rule) == ("keep", "qemu-refuses")
    assert (f"can't apply global qemu64-x86_64-cpu.kvm-pv-eoi={value}: Parameter 'kvm-pv-eoi' expects 'on' or "
            "'off'") in d.reason


def test_flags_bare_names_and_underscores():
    r = resolve(dom("pc-q35-7.2", qemu="<qemu:arg value='-cpu'/><qemu:arg value='qemu64,-kvm_pv_eoi,+kvm-pv-unhalt,"
                                        "kvm_poll_control'/>"), **up((7, 2, 22)), cpuid=KVM_ALL)
    assert (r.features["kvm-pv-eoi"].state, r.features["kvm-pv-unhalt"].state,
            r.features["kvm-poll-control"].state) == ("off", "on", "on")


# Each property's +u/-u (u: its name with `_` for `-`) on QEMU 5.2.0, 7.2.22, 10.0.2 and 11.1.2 run here alike
# (`qemu-system-x86_64 -machine pc,accel=tcg -S -cpu qemu64,+u`): taken where QEMU registers an alias, else refused;
# u=on and a bare u are taken for every property the release has.
UNDERSCORE_FLAG_TAKEN = {"kvm-pv-unhalt", "kvm-pv-eoi", "kvm-nopiodelay", "kvm-asyncpf", "kvm-asyncpf-int",
                         "kvm-steal-time", "kvm-poll-control"}
DASHED = sorted(p for p in tables_qemu.PROPERTIES if "-" in p)


@pytest.mark.parametrize("prop", DASHED)
@pytest.mark.parametrize("sign", ["+", "-"])
def test_flag_spellings_as_qemu_runs_them(prop, sign):
    u = prop.replace("-", "_")
    r = resolve(dom("pc-q35-7.2", qemu=f"<qemu:arg value='-cpu'/><qemu:arg value='qemu64,{sign}{u}'/>"),
                **up((7, 2, 22)))
    if prop in UNDERSCORE_FLAG_TAKEN:
        assert r.qemu_refusal is None
        assert cpu_option.parse_cpu_option(f"qemu64,{sign}{u}", (7, 2, 22)).props == [(prop, sign == "+")]
    else:
        assert r.qemu_refusal == f"Property 'qemu64-x86_64-cpu.{u}' not found"
        assert decision.decide(r, "compat").rule == "qemu-refuses"
    for form in (f"{u}=on", u):  # feat2prop: `_` reads as `-`
        assert cpu_option.parse_cpu_option(f"qemu64,{form}", (7, 2, 22)) == ("qemu64", [(prop, True)], [])


@pytest.mark.parametrize("prop", DASHED)
def test_global_underscore_names_as_qemu_runs_them(prop):
    """-global names the QOM property as written: QEMU 7.2.22, `-global x86_64-cpu.kvm_pv_tlb_flush=on`."""
    u = prop.replace("-", "_")
    r = resolve(dom("pc-q35-7.2", qemu=f"<qemu:arg value='-global'/><qemu:arg value='x86_64-cpu.{u}=on'/>"),
                **up((7, 2, 22)))
    if prop in UNDERSCORE_FLAG_TAKEN:
        assert r.qemu_refusal is None
    else:
        assert r.qemu_refusal == (f"can't apply global x86_64-cpu.{u}=on: Property 'qemu64-x86_64-cpu.{u}' "
                                  "not found")


def test_a_refused_value_is_named_before_a_refused_flag_spelling():
    """QEMU 7.2.22: `-cpu qemu64,+kvm_pv_tlb_flush,kvm-pv-eoi=1` fails on the value (a -global, applied first)."""
    r = resolve(dom("pc-q35-7.2", qemu="<qemu:arg value='-cpu'/><qemu:arg value='qemu64,+kvm_pv_tlb_flush,"
                                        "kvm-pv-eoi=1'/>"), **up((7, 2, 22)))
    assert r.qemu_refusal.startswith("can't apply global qemu64-x86_64-cpu.kvm-pv-eoi=1")


@pytest.mark.parametrize("cpu,release,refusal,state", [
    # before 2.8 (fc7dfd205f) the feature names were kvm_pv_unhalt ...: +/- take that spelling only
    ("+kvm_pv_unhalt", (2, 5), None, "on"),
    ("+kvm-pv-unhalt", (2, 5), "CPU feature kvm-pv-unhalt not found", None),
    ("-kvm-pv-eoi", (2, 7), "CPU feature kvm-pv-eoi not found", None),
    ("kvm_pv_unhalt=on", (2, 5), None, "on"),  # feat2prop, as in every release
    ("kvm-pv-unhalt=on", (2, 5), None, "on"),
    # from 2.8 the dash name, the old one an alias (54b8dc7c19)
    ("+kvm-pv-unhalt", (2, 8), None, "on"),
    ("+kvm_pv_unhalt", (2, 8), None, "on"),
    ("+kvm_pv-unhalt", (7, 2), "Property 'qemu64-x86_64-cpu.kvm_pv-unhalt' not found", None),
    ("+kvmclock_stable_bit", (2, 5), "CPU feature kvmclock_stable_bit not found", None),  # a dash name since 2.1
])
def test_flag_spellings_by_release(cpu, release, refusal, state):
    r = resolve(dom("pc-i440fx-2.5", qemu=f"<qemu:arg value='-cpu'/><qemu:arg value='qemu64,{cpu}'/>"),
                **up(release, cpuid=KVM_ALL))
    assert r.qemu_refusal == refusal
    if refusal:  # the way out names no on/off value: the spelling is what QEMU refuses
        assert "on/off" not in decision.decide(r, "compat").reason
    if state:
        assert r.features["kvm-pv-unhalt"].state == state


def test_a_refused_global_value_is_refused_too():
    r = resolve(dom("pc-q35-7.2", qemu="<qemu:arg value='-global'/><qemu:arg value='x86_64-cpu.kvm-pv-unhalt=1'/>"),
                **up((7, 2, 22)))
    d = decision.decide(r, "compat")
    assert d.rule == "qemu-refuses" and "x86_64-cpu.kvm-pv-unhalt=1" in d.reason


def test_explain_json_has_18_properties_and_the_machine_fields():
    doc = json.loads(json.dumps(explain.to_json(process(dom("pc-q35-7.2"), "t.xml", HostFacts(**up((7, 2, 22))),
                                                       Config()))))
    assert len(doc["features"]) == 18 and "kvm-asyncpf-vmexit" in doc["features"]
    assert (doc["machine_status"], doc["machine_base"]) == ("offered", "pc-q35-7.2")


def test_rhel_9_has_no_rhel7_0_to_7_5_machines():
    r = resolve(dom("pc-q35-rhel7.5.0"), qemu_build="rhel", qemu_version=(9, 1, 0),
                build_source="QEMU emulator version 9.1.0 (qemu-kvm-9.1.0-15.el9_6)", package="qemu-kvm-9.1.0-15.el9_6")
    assert r.machine_status == "not-offered" and "8f7a74ab78" in r.machine_status_why
    assert decision.decide(r, "compat").rule == "machine-not-offered"


def test_rhel_9_2_has_no_rhel7_5_machine_either():
    r = resolve(dom("pc-i440fx-rhel7.5.0"), qemu_build="rhel", qemu_version=(7, 2, 0),
                build_source="QEMU emulator version 7.2.0 (qemu-kvm-7.2.0-14.el9_2.5)", package="qemu-kvm-7.2.0-14.el9_2.5")
    assert r.machine_status == "not-offered"
    el8 = resolve(dom("pc-i440fx-rhel7.5.0"), qemu_build="rhel", qemu_version=(6, 2, 0),
                  build_source="QEMU emulator version 6.2.0 (qemu-kvm-6.2.0-40.module+el8.9.0+20867+9a6a0901.2)",
                  package="qemu-kvm-6.2.0-40.module+el8.9.0+20867+9a6a0901.2")
    assert el8.machine_status == "offered"


MACHINE_HELP = sorted((FIXTURES / "machine-help").glob("qemu-*.txt"))


@pytest.mark.parametrize("path", MACHINE_HELP, ids=[p.stem for p in MACHINE_HELP])
def test_lifecycle_table_against_recorded_machine_help(path):
    """Every pc machine name QEMU 5.2.0, 7.2.22, 10.0.2 and 11.1.2 ever had, against that QEMU's own `-machine
    help` (Debian's builds, run here): listed, listed "(deprecated)", or not listed at all."""
    release = tuple(int(p) for p in path.stem.split("-")[1].split("."))
    seen = {}
    for line in path.read_text().splitlines():
        m = re.match(r"(pc-\S+)\s", line)
        if m:
            seen[m.group(1)] = lifecycle.DEPRECATED if "(deprecated)" in line else lifecycle.OFFERED
    names = lifecycle.known_names(UPSTREAM, release)
    assert set(seen) <= set(names)
    got = {n: lifecycle.versioned_status(n, release, UPSTREAM).status for n in names}
    assert got == {n: seen.get(n, lifecycle.NOT_OFFERED) for n in names}


def test_qemus_message_names_the_property_as_qemu_does():
    """-cpu turns kvm_pv_unhalt into kvm-pv-unhalt before the global is applied; -global keeps its spelling;
    a -global for another CPU type never applies (QEMU 7.2.22 and 10.0.2 here)."""
    cpu = resolve(dom("pc-q35-7.2", qemu="<qemu:arg value='-cpu'/><qemu:arg value='qemu64,kvm_pv_unhalt=On'/>"),
                  **up((7, 2, 22)))
    assert cpu.qemu_refusal == ("can't apply global qemu64-x86_64-cpu.kvm-pv-unhalt=On: Parameter 'kvm-pv-unhalt' "
                                "expects 'on' or 'off'")
    glob = resolve(dom("pc-q35-7.2", qemu="<qemu:arg value='-global'/>"
                                          "<qemu:arg value='qemu64-x86_64-cpu.kvm_pv_unhalt=On'/>"), **up((7, 2, 22)))
    assert "qemu64-x86_64-cpu.kvm_pv_unhalt=On: Parameter 'kvm_pv_unhalt'" in glob.qemu_refusal
    other = resolve(dom("pc-q35-7.2", qemu="<qemu:arg value='-global'/>"
                                           "<qemu:arg value='EPYC-x86_64-cpu.kvm-pv-unhalt=1'/>"), **up((7, 2, 22)))
    assert other.qemu_refusal is None


@pytest.mark.parametrize("build,release,alias,target,base", [
    ("upstream", (10, 2, 0), "q35", "pc-q35-10.2", "pc-q35-10.2"),
    ("upstream", (7, 2, 22), "pc", "pc-i440fx-7.2", "pc-i440fx-7.2"),
    ("ubuntu", (10, 2, 1), "ubuntu", "pc-i440fx-resolute", "pc-i440fx-10.2"),
    ("ubuntu", (10, 2, 1), "ubuntu-q35", "pc-q35-resolute", "pc-q35-10.2"),
    ("ubuntu", (9, 2, 0), "ubuntu-q35", "pc-q35-plucky", "pc-q35-9.1"),
    ("ubuntu", (11, 0, 0), "ubuntu", None, None),  # a codename the tables have not read: not guessed
    ("upstream", (10, 1, 50), "q35", None, None),  # a development snapshot's newest machine is ahead of it
])
def test_an_alias_in_a_known_release_is_its_target(build, release, alias, target, base):
    r = resolve(dom(alias), qemu_build=build, build_source="t", qemu_version=release)
    assert (r.machine.alias_of, r.machine.base) == (target, base), r.machine.how


def test_q35_with_the_release_known_decides_what_its_range_did_not():
    """pc_compat_5_1 (kvm-msi-ext-dest-id off) straddles q35's 4.2 ... X.Y range; QEMU 10.0's q35 is 10.0."""
    split = "<features><ioapic driver='qemu'/></features>"
    r = resolve(dom("q35", extra=split), **up((10, 0, 2)), cpuid=KVM_ALL)
    assert r.features["kvm-msi-ext-dest-id"].state == "on"


def test_one_version_grammar_and_spelling():
    from virtxml_cpu.tables.version import format_version, is_release, parse_version

    assert parse_version("7.2") == (7, 2) and parse_version("10.0.2") == (10, 0, 2)
    assert format_version(parse_version("8.2.50")) == "8.2.50" and format_version(None) == "?"
    for bad in ("7", "1.2.3.4", "7.2.", ".7", "7.x", "\u0667.\u0662", "7.2\n", " 7.2", ""):
        assert not is_release(bad), bad
        with pytest.raises(ValueError, match="not a version"):
            parse_version(bad)


def test_a_release_window_says_what_an_unknown_release_is():
    """[since, until), each side open when None; an unknown release is what the caller says: ANY (some release
    has the row) or AS_CURRENT (only a window still open holds)."""
    from virtxml_cpu.tables.version import ANY, AS_CURRENT, in_window

    assert in_window((2, 5), (2, 5), (2, 6), ANY) and not in_window((2, 6), (2, 5), (2, 6), ANY)
    assert not in_window((2, 4, 9), (2, 5), None, AS_CURRENT) and in_window((99, 0), (2, 5), None, AS_CURRENT)
    assert in_window((1, 0), None, (2, 0), AS_CURRENT) and not in_window((2, 0, 0), None, (2, 0), AS_CURRENT)
    assert in_window(None, (2, 5), (2, 6), ANY) and not in_window(None, (2, 5), (2, 6), AS_CURRENT)
    assert in_window(None, (2, 5), None, AS_CURRENT) and in_window(None, None, None, AS_CURRENT)
    with pytest.raises(ValueError):
        in_window(None, None, None, "current")


def test_each_kind_of_row_reads_an_unknown_release_its_own_way():
    """A compat or default row may apply in any release (a machine whose chain holds it came from a QEMU that
    had it); a property, a downstream machine definition and QEMU's readings are taken as current."""
    from virtxml_cpu.tables.builds.model import Release, Rule
    from virtxml_cpu.tables.properties import BY_NAME

    gone = Rule("compat", "kvm-pv-eoi", "off", "src", "upstream", until=(2, 6))
    assert gone.exists_in(None) and not gone.exists_in((2, 6))
    assert not Release("xenial", {}, "src", until=(10, 1)).exists_in(None)
    assert Release("noble", {}, "src", since=(8, 2)).exists_in(None)
    assert BY_NAME["kvm-pv-unhalt"].exists_in(None) and not BY_NAME["kvm-pv-unhalt"].exists_in((1, 6))
    assert tables_qemu.overcommit_rule(None) is tables_qemu.OVERCOMMIT[-1]
    assert tables_qemu.overcommit_rule((9, 0)) is tables_qemu.OVERCOMMIT[0]

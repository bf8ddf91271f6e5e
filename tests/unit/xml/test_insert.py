"""Every form of an explicit choice is kept, <cpu><cache> is read, and insertions land where libvirt's
formatter puts them without touching any other character (the cases of the builds issue, each a test)."""

from __future__ import annotations

import pytest

from virtxml_cpu.core import domain, resolve as core_resolve
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.xml.parse import parse_domain

UP = HostFacts(qemu_build="upstream", build_source="test")
QNS = "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'"


def xml(features=None, cpu="", extra="", machine="pc-q35-7.2", nl="\n") -> bytes:
    feats = "" if features is None else f"  {features}{nl}"
    text = (f"<domain type='kvm' {QNS}>{nl}  <name>t</name>{nl}  <vcpu>2</vcpu>{nl}"
            f"  <os>{nl}    <type arch='x86_64' machine='{machine}'>hvm</type>{nl}  </os>{nl}"
            f"{feats}{'  ' + cpu + nl if cpu else ''}  <devices/>{nl}{extra}</domain>{nl}")
    return text.encode()


def run(data: bytes, style=None):
    return process(data, "t.xml", UP, Config(), None, style)


def only_inserted(before: bytes, after: bytes) -> bool:
    """`after` is `before` with text inserted (characters only added, in order)."""
    it = iter(after)
    return all(any(c == d for d in it) for c in before)


def resolve(data: bytes):
    return core_resolve.resolve(domain.extract(parse_domain(data).getroot()), UP)


# --- explicit choices -----------------------------------------------------------------------------------

def test_bare_pvspinlock_is_on_and_a_second_run_adds_nothing():
    data = xml("<features>\n    <pvspinlock/>\n  </features>")
    r = resolve(data)
    assert r.features["kvm-pv-unhalt"].state == "on" and r.explicit_unhalt
    o = run(data)
    assert not o.changed and o.decision.rule == "user-choice"


@pytest.mark.parametrize("pol,state", [("require", "on"), ("force", "on"), ("optional", "off"),
                                       ("disable", "off"), ("forbid", "off")])
def test_cpu_feature_every_policy_is_an_explicit_choice_libvirt_refuses(pol, state):
    data = xml(cpu=f"<cpu mode='custom'><model>qemu64</model><feature policy='{pol}' name='kvm_pv_unhalt'/></cpu>")
    r = resolve(data)
    assert r.explicit_unhalt and r.start_refusal == "unknown CPU feature: kvm_pv_unhalt"
    assert r.features["kvm-pv-unhalt"].state == state
    assert not run(data).changed


ARGS = {
    "noarg-swallows-nothing": (["-no-hpet", "-cpu", "host,kvm-pv-unhalt=off"], "off"),
    "several-noargs": (["-S", "-nodefaults", "-cpu", "qemu64,kvm_pv_unhalt=on", "-enable-kvm"], "on"),
    "last-cpu-wins": (["-cpu", "qemu64,kvm-pv-unhalt=on", "-cpu", "qemu64"], "off"),
    "plus": (["-cpu", "qemu64,+kvm_pv_unhalt"], "on"),
    "minus": (["-cpu", "host,-kvm-pv-unhalt"], "off"),
    "bare": (["-cpu", "qemu64,kvm-pv-unhalt"], "on"),
    "double-dash": (["--cpu", "qemu64,kvm-pv-unhalt=on"], "on"),
    "global": (["-global", "x86_64-cpu.kvm-pv-unhalt=on"], "on"),
    "global-kv": (["-global", "driver=x86_64-cpu,property=kvm_pv_unhalt,value=on"], "on"),
    "global-model": (["-global", "qemu64-x86_64-cpu.kvm-pv-unhalt=on"], "on"),
    "global-other-model": (["-global", "EPYC-x86_64-cpu.kvm-pv-unhalt=on"], "off"),
}


@pytest.mark.parametrize("case", sorted(ARGS))
def test_commandline_forms(case):
    args, state = ARGS[case]
    extra = "  <qemu:commandline>" + "".join(f"<qemu:arg value='{a}'/>" for a in args) + "</qemu:commandline>\n"
    data = xml(extra=extra, cpu="<cpu mode='custom'><model>qemu64</model></cpu>")
    r = resolve(data)
    assert r.features["kvm-pv-unhalt"].state == state, r.features["kvm-pv-unhalt"]
    o = run(data)
    if case != "global-other-model":
        assert not o.changed, o.decision  # the user's choice, whatever it is, is kept
    assert run(o.output).output == o.output


def test_cpu_pm_guest_whose_unhalt_was_off_anyway_is_left_alone():
    extra = "  <qemu:commandline><qemu:arg value='-overcommit'/><qemu:arg value='cpu-pm=on'/></qemu:commandline>\n"
    o = run(xml(extra=extra))
    assert o.decision.rule == "cpu-pm" and not o.changed


@pytest.mark.parametrize("cache,machine,l3", [
    ("<cache level='3' mode='emulate'/>", "pc-i440fx-2.7", "on"),
    ("<cache mode='disable'/>", "pc-q35-7.2", "off"),
    ("<cache mode='passthrough'/>", "pc-q35-7.2", "off"),
])
def test_cpu_cache_sets_l3_cache(cache, machine, l3):
    mode = "host-passthrough" if "passthrough" in cache else "custom"
    model = "<model>qemu64</model>" if mode == "custom" else ""
    r = resolve(xml(cpu=f"<cpu mode='{mode}'>{model}{cache}</cpu>", machine=machine))
    assert r.features["l3-cache"].state == l3 and r.features["l3-cache"].source == "<cpu><cache>"


# --- insertion ------------------------------------------------------------------------------------------

def test_pvspinlock_goes_before_vmcoreinfo_like_libvirt():
    o = run(xml("<features>\n    <acpi/>\n    <vmcoreinfo state='on'/>\n  </features>"))
    text = o.output.decode()
    assert text.index("<pvspinlock") < text.index("<vmcoreinfo") and only_inserted(o.source, o.output)


def test_cpu_feature_goes_after_cache_and_maxphysaddr_before_numa():
    cpu = ("<cpu mode='custom'>\n    <model>qemu64</model>\n    <cache mode='disable'/>\n"
           "    <maxphysaddr mode='emulate' bits='42'/>\n    <numa><cell id='0' cpus='0-1' memory='1024'/></numa>\n  </cpu>")
    text = run(xml(cpu=cpu), style="cpu-feature").output.decode()
    assert text.index("<maxphysaddr") < text.index("kvm_pv_unhalt") < text.index("<numa>")


@pytest.mark.parametrize("parent", ["<features/>", "<features />"])
def test_self_closing_features_is_opened_keeping_every_other_character(parent):
    o = run(xml(parent))
    before, after = o.source.decode(), o.output.decode()
    assert parent.replace("/>", ">") in after and "<pvspinlock state='on'/>" in after
    assert only_inserted(before.replace(parent, parent.replace("/", "")), after)


def test_self_closing_cpu_with_cpu_feature_style():
    o = run(xml(cpu="<cpu mode='host-model' check='partial'/>"), style="cpu-feature")
    assert "<cpu mode='host-model' check='partial'>" in o.output.decode()


@pytest.mark.parametrize("nl", ["\r", "\r\n", "\n"])
def test_line_endings_survive(nl):
    o = run(xml("<features>" + nl + "    <acpi/>" + nl + "  </features>", nl=nl))
    assert only_inserted(o.source, o.output) and o.changed
    other = {"\r": ("\n",), "\r\n": (), "\n": ("\r",)}[nl]
    assert not any(x in o.output.decode() for x in other)
    assert f"<acpi/>{nl}    <pvspinlock state='on'/>{nl}  </features>" in o.output.decode()


def test_mixed_line_endings_keep_their_lines():
    data = xml("<features>\r\n    <acpi/>\r\n  </features>")  # CRLF inside an LF file
    o = run(data)
    assert only_inserted(o.source, o.output) and "<acpi/>\r\n    <pvspinlock" in o.output.decode()


@pytest.mark.parametrize("tail", ["note", "<![CDATA[ x < y ]]>", "<!-- c -->"])
def test_text_cdata_or_comment_after_the_last_feature(tail):
    o = run(xml(f"<features>\n    <acpi/>{tail}\n  </features>"))
    assert o.changed and only_inserted(o.source, o.output)
    assert run(o.output).output == o.output

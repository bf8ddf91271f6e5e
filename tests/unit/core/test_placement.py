"""Dedicated host CPUs: libvirt's cpuset syntax, where each vCPU runs, and the dedicated-vcpus rule.

The cpuset cases are libvirt's own grammar (virBitmapParseInternal); tests/lab/test_pinning.py checks the same
strings against the lab's libvirt 9.0 and 11.3.
"""

from __future__ import annotations

import io
import json
import random

import time

import pytest
from lxml import etree

from virtxml_cpu.core import cpuset, decision, placement
from virtxml_cpu.hook import evaluate
from virtxml_cpu import cli
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.domain import extract
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.tables.libvirt_xml import HINT_DEDICATED
from virtxml_cpu.core.pipeline import process

from tests.support import FIXTURES, Capture

# (text, the CPUs libvirt sets) -- None: libvirt refuses it ("Failed to parse bitmap").
CPUSETS = [
    ("3", {3}), ("0-3", {0, 1, 2, 3}), ("6-6", {6}), ("7 - 7", {7}), ("0,2", {0, 2}), ("4,4", {4}),
    (" 5 ,", {5}), ("0-3,^2", {0, 1, 3}), ("2-3,^2", {3}), ("0-3,^0,^1,^3", {2}), ("^2,0-3", {0, 1, 2, 3}),
    ("1-3,^2,2", {1, 2, 3}), ("0,^0", set()), ("0-+3", {0, 1, 2, 3}), ("1,\t2", {1, 2}), ("16383", {16383}),
    ("", None), ("  ", None), ("0,,1", None), ("^1-3", None), ("1 2", None), ("-1", None), ("+1", None),
    ("1-0", None), ("16384", None), ("0-16384", None), ("^16384", None), ("2147483648", None), ("a", None),
    ("0-", None), ("^", None), ("٣", None), (",1", None),
    # the last occurrence of a field decides; a later `^N` clears only what came before it
    ("0-3,^1,0-3,^2", {0, 1, 3}), ("^1,1,^1", set()), ("5,\t, 6", None), ("0-3,\t", {0, 1, 2, 3}),
    ("0-3,^1,0-3,^1,2", {0, 2, 3}), ("0-3,0-3,^1-2", None), ("000000001-000000002", {1, 2}),
    (",".join(f"{i}-{i}" for i in range(300)) + ",^7", set(range(300)) - {7}),  # counted, not one by one
]


@pytest.mark.parametrize("text,cpus", CPUSETS)
def test_cpuset_reads_as_libvirt_reads_it(text, cpus):
    if cpus is None:
        with pytest.raises(cpuset.CpusetError, match=r"^Failed to parse bitmap '"):
            cpuset.parse(text)
    else:
        assert cpuset.parse(text) == cpus


@pytest.mark.parametrize("text", [
    ",".join(["0-16383"] * 524000),  # 524,000 fields: one range
    ",".join(f"{i % 1000}-{i % 1000 + i // 1000}" for i in range(420000)),  # 420,000 distinct ranges
    ",".join(["0-16383,^5"] * 230000),  # a range and a clear, again and again
], ids=["repeated", "distinct", "alternating"])
def test_a_4_mib_cpuset_costs_about_what_parsing_4_mib_of_xml_costs(text):
    """One field at a time, character by character, 4 MiB took 2-3 s here (30-40 times lxml's parse of a
    plain 4 MiB definition), on every guest start."""
    from lxml import etree

    plain = b"<domain>" + b"<disk type='file'><source file='/d.img'/></disk>" * (4 * 1024 * 1024 // 48) + b"</domain>"
    t = time.perf_counter()
    etree.fromstring(plain)
    baseline = time.perf_counter() - t
    t = time.perf_counter()
    getattr(cpuset.mask, "__wrapped__", cpuset.mask)(text)  # not a cached answer
    took = time.perf_counter() - t
    assert took < max(0.5, 15 * baseline), (took, baseline)  # 30-40 times before


def test_a_short_cpuset_costs_less_than_parsing_a_small_definition():
    """`0-3` read in bulk went through a count of 16384 depths, about 0.4 ms: 20 times lxml's parse of the
    definition holding it, paid by each distinct placement (the hook's cold start, every template)."""
    from lxml import etree

    small = (FIXTURES / "dedicated-vcpupin.xml").read_bytes()
    read = getattr(cpuset.mask, "__wrapped__", cpuset.mask)  # not a cached answer

    def best(fn):
        out = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(50):
                fn()
            out.append(time.perf_counter() - t)
        return min(out)

    parse, mask = best(lambda: etree.fromstring(small)), best(lambda: read("0-3,8-11"))
    assert mask < 5 * parse, (mask, parse)


@pytest.mark.parametrize("fields", [255, 256, 257, 3000])
def test_many_plain_fields_read_as_the_field_by_field_reader_reads_them(fields):
    """On either side of the count where plain fields stop being read one mask operation each."""
    rng = random.Random(fields)
    text = ",".join(str(rng.randrange(16384)) if rng.random() < 0.5 else f"{rng.randrange(8000)}-{rng.randrange(8000, 16384)}"
                    for _ in range(fields))
    assert _outcome(text) == _outcome(text + " ")


def _outcome(text):
    try:
        return getattr(cpuset.mask, "__wrapped__", cpuset.mask)(text)
    except cpuset.CpusetError as e:
        assert str(e) == f"Failed to parse bitmap '{text}'"
        return "refused"


def test_plain_fields_read_as_the_field_by_field_reader_reads_them():
    """`N` and `N-M` fields alone are read in bulk; a blank after the last number (which libvirt skips) sends
    the same text through the reader that follows virBitmapParseInternal field by field."""
    rng = random.Random(0)
    numbers = [lambda: str(rng.randrange(40)), lambda: str(rng.randrange(16370, 16400)),
               lambda: "0" * rng.randrange(1, 12) + str(rng.randrange(20)), lambda: str(rng.choice(LONG)),
               lambda: "".join(rng.choice("0123456789") for _ in range(rng.randrange(4)))]

    def field():
        odd = rng.random() < 0.1
        if odd:
            return rng.choice(["", "-", "1--2", "1-2-3", "-1", "1-", "3,"])
        n = rng.choice(numbers)
        return n() if rng.random() < 0.4 else f"{n()}-{rng.choice(numbers)()}"

    for _ in range(20000):
        text = ",".join(field() for _ in range(rng.randrange(1, 8))) + rng.choice(["", "", ","])
        assert _outcome(text) == _outcome(text + " "), text


LONG = [2**31 - 1, 2**31, 2**32, 9999999999, 999999999, 16383, 16384]


def test_cpuset_format_is_virBitmapFormat():
    assert cpuset.format({0, 1, 2, 3, 5, 7, 8}) == "0-3,5,7-8" and cpuset.format(set()) == ""


DOMAIN = """<domain type='kvm'><name>d</name><vcpu{vattrs}>{n}</vcpu>{cputune}
<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>{features}
<cpu mode='custom' match='exact'><model>qemu64</model></cpu><devices/></domain>"""


def facts(n=2, pins=(), vattrs="", extra="", features=""):
    tune = "".join(f"<vcpupin vcpu='{v}' cpuset='{c}'/>" for v, c in pins) + extra
    xml = DOMAIN.format(vattrs=vattrs, n=n, cputune=f"<cputune>{tune}</cputune>" if tune else "",
                        features=f"<features>{features}</features>" if features else "")
    return extract(etree.fromstring(xml))


@pytest.mark.parametrize("kw,dedicated", [
    (dict(pins=[(0, "2"), (1, "3")]), True),
    (dict(n=4, pins=[(0, "2"), (1, "3"), (2, "4")]), False),  # N-1 of N vCPUs pinned
    (dict(pins=[(0, "2"), (1, "2")]), False),  # two vCPUs on one host CPU
    (dict(pins=[(0, "2-3,^3"), (1, "0-3,^0-2")]), False),  # '^N-M' is refused by libvirt
    (dict(pins=[(0, "2-3,^3"), (1, "0-3,^0,^1,^2")]), True),  # '^' leaves one CPU each
    (dict(pins=[(0, "0-1"), (1, "2-3")]), False),  # a range of two each
    (dict(vattrs=" cpuset='2-3'"), False),  # <vcpu cpuset> alone: both float over 2-3
    (dict(n=1, vattrs=" cpuset='3'"), True),  # one vCPU, one host CPU
    (dict(n=3, pins=[(0, "2"), (1, "3")], vattrs=" cpuset='7'"), True),  # <vcpu cpuset> places vCPU 2
    (dict(n=3, pins=[(0, "2"), (1, "3")], vattrs=" cpuset='3'"), False),  # ... onto vCPU 1's CPU
    (dict(n=3, pins=[(0, "2"), (1, "3")], vattrs=" placement='auto' cpuset='7'"), False),  # numad decides
    (dict(extra="<emulatorpin cpuset='0'/>"), False),
    (dict(extra="<vcpusched vcpus='0-1' scheduler='fifo' priority='1'/>"), False),
    (dict(pins=[(0, "2"), (1, "3")], extra="<emulatorpin cpuset='2-3'/>"), True),  # Nova's default
    (dict(pins=[(0, "2"), (1, "3"), (2, "2")]), True),  # vCPU 2 does not exist: libvirt ignores the pin
    (dict(pins=[(0, "2"), (0, "3")]), False),  # duplicate vcpupin: refused
    (dict(pins=[(0, "2"), (1, "0,^0")]), False),  # empty cpuset: refused
])
def test_dedicated_means_one_host_cpu_of_its_own_per_vcpu(kw, dedicated):
    assert placement.read(facts(**kw)).dedicated is dedicated


@pytest.mark.parametrize("kw,error", [
    (dict(pins=[(0, "2"), (0, "3")]), "duplicate vcpupin for vcpu '0'"),
    (dict(pins=[(0, "2"), (1, "0,^0")]), "Invalid value of 'cpuset': 0,^0"),
    (dict(pins=[(0, "2"), ("x", "3")]),
     "Invalid value for attribute 'vcpu' in element 'vcpupin': 'x'. Expected non-negative integer value"),
    (dict(extra="<vcpupin vcpu='0'/>"), "missing cpuset for vcpupin"),
    (dict(extra="<emulatorpin cpuset='1'/><emulatorpin cpuset='2'/>"), "only one emulatorpin is supported"),
    (dict(extra="<vcpusched vcpus='0' scheduler='fifo' priority='1'/><vcpusched vcpus='0-1' scheduler='rr' "
                "priority='1'/>"), "'vcpusched' attributes 'vcpus' must not overlap"),
    (dict(extra="<vcpusched vcpus='5' scheduler='fifo' priority='1'/>"),
     "vCPU '5' is not present in domain definition"),
    (dict(vattrs=" placement='numad'"), "Invalid value for attribute 'placement' in element 'vcpu': 'numad'."),
])
def test_what_libvirt_refuses_is_named_with_its_message(kw, error):
    placed = placement.read(facts(**kw))
    assert placed.error == error and not placed.dedicated and error in placed.why


def test_a_bare_vcpu_places_nothing_and_says_nothing():
    assert not placement.read(facts()).written
    assert not any("placement" in n or "dedicated" in n for n in decide(facts()).notes)


def decide(f, pol="compat"):
    from virtxml_cpu.core.resolve import resolve

    return decision.decide(resolve(f, HostFacts(qemu_version=(7, 2, 0), qemu_build="upstream")), pol)


@pytest.mark.parametrize("pol", ["compat", "numa"])
def test_compat_and_numa_keep_a_dedicated_guest_and_name_the_hint(pol):
    d = decide(facts(pins=[(0, "2"), (1, "3")]), pol)
    assert (d.action, d.rule) == ("keep", "dedicated-vcpus") and f"policy '{pol}'" in d.reason
    assert any(n.startswith("dedicated host CPUs: each of its 2 vCPU(s)") and "0->2, 1->3" in n for n in d.notes)
    assert any(HINT_DEDICATED in n and "EDX bit 0" in n for n in d.notes)


def test_always_still_adds_it_and_says_the_guest_is_dedicated():
    d = decide(facts(pins=[(0, "2"), (1, "3")]), "always")
    assert (d.action, d.rule) == ("inject", "policy-always")
    assert any(HINT_DEDICATED in n for n in d.notes)


def test_boundaries_are_added_under_compat_with_the_reason_they_do_not_count():
    for kw, why in [(dict(n=4, pins=[(0, "2"), (1, "3"), (2, "4")]), "1 of 4 vCPU(s) (vCPU 3)"),
                    (dict(pins=[(0, "2"), (1, "2")]), "vCPUs 0, 1 share host CPU 2"),
                    (dict(pins=[(0, "0-3"), (1, "0-3")]), "may run on host CPUs 0-3"),
                    (dict(extra="<vcpusched vcpus='0-1' scheduler='fifo' priority='1'/>"),
                     "realtime <vcpusched> alone places no vCPU")]:
        d = decide(facts(**kw))
        assert (d.action, d.rule) == ("inject", "policy-compat"), kw
        assert any(n.startswith("vCPU placement: not on dedicated host CPUs") and why in n for n in d.notes), d.notes


def test_hint_already_on_is_not_advised_again():
    d = decide(facts(pins=[(0, "2"), (1, "3")], features="<kvm><hint-dedicated state='on'/></kvm>"))
    assert d.rule == "dedicated-vcpus" and "already" in d.reason
    assert not any(HINT_DEDICATED in n for n in d.notes)


NOVA = (FIXTURES / "openstack-nova-dedicated-realtime.xml").read_bytes()


def test_nova_guest_says_no_flavor_or_image_setting_carries_the_hint():
    o = process(NOVA, "nova", HostFacts(qemu_version=(7, 2, 0), qemu_build="upstream"), Config(), render=False)
    assert o.decision.rule == "dedicated-vcpus"
    nova = [n for n in o.decision.notes if n.startswith("managed by OpenStack Nova, on dedicated CPUs")]
    assert nova and "hw:cpu_policy=dedicated" in nova[0] and "no Nova setting carries the hint" in nova[0]


def test_kubevirt_guest_names_dedicatedCpuPlacement():
    xml = NOVA.replace(b'<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">',
                       b'<kubevirt xmlns="http://kubevirt.io"><nova:instance xmlns:nova="urn:x">').replace(
        b"</nova:instance>", b"</nova:instance></kubevirt>")
    o = process(xml, "kv", HostFacts(qemu_version=(7, 2, 0), qemu_build="upstream"), Config(), render=False)
    assert any("KubeVirt, on dedicated CPUs" in n and "dedicatedCpuPlacement: true" in n for n in o.decision.notes)


def test_explain_and_the_hook_show_the_rule(tmp_path, capsys):
    path = FIXTURES / "dedicated-vcpupin.xml"
    assert cli.main(["explain", "--no-host-probe", "--qemu-build", "upstream", str(path)]) == 0
    out = capsys.readouterr().out
    assert "keep as is [dedicated-vcpus, policy compat" in out and "note: dedicated host CPUs:" in out
    conf = tmp_path / "c.toml"
    conf.write_text(f'[hook]\nmode = "enforce"\nspool = "{tmp_path / "spool"}"\n')
    log = Capture()
    rc = evaluate.run(["dedicated-vcpupin", "prepare", "begin", "-"], config_path=str(conf),
                  stdin=io.BytesIO(path.read_bytes()), log=log)
    assert rc == 0 and "rule=dedicated-vcpus" in log.lines[0] and "decision=keep" in log.lines[0]


def test_audit_shows_the_rule(capsys):
    libvirt = pytest.importorskip("libvirt", reason="libvirt-python is not installed: the audit through "
                                                    "libvirt's test driver is SKIPPED")
    conn = libvirt.open("test:///default")
    dom = conn.defineXML((FIXTURES / "dedicated-vcpupin.xml").read_text().replace(
        "<name>dedicated-vcpupin</name>", "<name>vxc-dedicated-audit</name>"))
    try:
        cli.main(["audit", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream",
                  "--format", "json", "vxc-dedicated-audit"])
    finally:
        dom.undefine()
        conn.close()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    row = next(r for r in rows if r.get("domain") == "vxc-dedicated-audit")
    assert row["decision"]["rule"] == "dedicated-vcpus" and row["needs_fix"] is False


def test_a_decision_reads_the_placement_once(monkeypatch):
    """A placement too long to keep between calls (a 4 MiB cpuset) is parsed once per decision, not once for
    the rule and again for the notes."""
    from virtxml_cpu.core import resolve as core_resolve

    pins = "".join(f"<vcpupin vcpu='{i}' cpuset='{i + 2}'/>" for i in range(4))
    long = ",".join(["2"] * (placement.KEPT_TEXT // 2 + 1))
    xml = ("<domain type='kvm'><name>g</name><vcpu cpuset='" + long + "'>4</vcpu><os><type arch='x86_64' "
           f"machine='pc-q35-7.2'>hvm</type></os><cputune>{pins}</cputune><devices/></domain>")
    res = core_resolve.resolve(extract(etree.fromstring(xml)), HostFacts(qemu_build="upstream", build_source="t"))
    calls = []
    real = placement.read
    monkeypatch.setattr(placement, "read", lambda facts: calls.append(1) or real(facts))
    d = decision.decide(res, "compat")
    assert d.rule == "dedicated-vcpus" and len(calls) == 1

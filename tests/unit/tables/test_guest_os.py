"""The guest's own kernel, where the domain names it (libosinfo): the rows, the matcher, and what the
decision and the report make of them."""

from __future__ import annotations

import json
import re

import pytest

from virtxml_cpu.tables import guest_os
from virtxml_cpu.render import explain
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.pipeline import process

from tests.support import FIXTURES

RHEL73 = (FIXTURES / "guest-rhel73-amd-host.xml").read_bytes()
CENTOS65 = (FIXTURES / "guest-centos65-i440fx.xml").read_bytes()
OS_ID = re.compile(rb'<libosinfo:os id="[^"]*"/>')


def with_os(data: bytes, os_id: str | None) -> bytes:
    """The same domain naming another OS, or none (the libosinfo block removed)."""
    if os_id is None:
        return re.sub(rb"\s*<metadata>.*?</metadata>", b"", data, flags=re.S)
    return OS_ID.sub(f'<libosinfo:os id="{os_id}"/>'.encode(), data)


def test_every_row_cites_a_source_and_covers_a_real_range():
    for row in guest_os.GUEST_KERNELS:
        assert row.effect in guest_os.EFFECTS, row
        assert row.prefix.startswith("http://") and row.prefix.endswith("/"), row
        assert row.first[:len(row.last)] <= row.last, row
        assert len(row.source) > 40 and ("@" in row.source or "#" in row.source), row
        assert row.name and row.why, row


@pytest.mark.parametrize("os_id, name, effect", [
    ("http://redhat.com/rhel/7.3", "RHEL 7.3", guest_os.MISHANDLES),
    ("http://redhat.com/rhel/7.0", "RHEL 7.0-7.2", guest_os.MISHANDLES),
    ("http://redhat.com/rhel/7.2", "RHEL 7.0-7.2", guest_os.MISHANDLES),
    ("http://redhat.com/rhel/7.4", None, None),  # no evidence either way: decided as before
    ("http://redhat.com/rhel/7.8", None, None),
    ("http://redhat.com/rhel/7.30", None, None),
    ("http://redhat.com/rhel/7-unknown", None, None),
    ("http://redhat.com/rhel-atomic/7.3", None, None),
    ("http://redhat.com/rhel/6.0", "RHEL 6", guest_os.IGNORES),
    ("http://redhat.com/rhel/6.8", "RHEL 6", guest_os.IGNORES),
    ("http://redhat.com/rhel/6.9", None, None),
    ("http://centos.org/centos/6.5", "CentOS 6", guest_os.IGNORES),
    ("http://centos.org/centos/6.10", None, None),
    ("http://centos.org/centos/7.0", "CentOS 7", guest_os.MAY_MISHANDLE),  # one id for all of CentOS 7.x
    ("http://freebsd.org/freebsd/13.1", "FreeBSD", guest_os.IGNORES),
    ("http://freebsd.org/freebsd/14.3", "FreeBSD", guest_os.IGNORES),
    ("http://freebsd.org/freebsd/15.0", None, None),
    ("http://microsoft.com/win/11", None, None),  # Windows keeps policy's own note (looks_windows)
    ("http://ubuntu.com/ubuntu/22.04", None, None),
    ("rhel7.3", None, None),
    ("", None, None),
    (None, None, None),
])
def test_lookup(os_id, name, effect):
    row = guest_os.lookup(os_id)
    assert (row.name if row else None, row.effect if row else None) == (name, effect)


def test_a_guest_known_to_mishandle_pv_spinlocks_is_kept_under_compat(host):
    o = process(RHEL73, "rhel73.xml", host, Config())
    d = o.decision
    assert (d.action, d.rule, d.policy) == ("keep", "guest-kernel", "compat")
    assert o.output == RHEL73
    note = next(n for n in d.notes if n.startswith("guest RHEL 7.3"))
    assert "kvm_kick_cpu+0x27" in note and "kubevirt/kubevirt#4972" in note and "c1118b3602c2" in note
    assert "--policy always" in note and "<vxc:cpu policy='always'/>" in note


def test_and_under_numa_when_numa_would_add_it(host):
    numa = RHEL73.replace(b"<cpu mode='host-model' check='partial'/>",
                          b"<cpu mode='host-model' check='partial'><numa>"
                          b"<cell id='0' cpus='0-1' memory='2097152' unit='KiB'/>"
                          b"<cell id='1' cpus='2-3' memory='2097152' unit='KiB'/></numa></cpu>")
    assert process(numa, "rhel73-numa.xml", host, Config(), cli_policy="numa").decision.rule == "guest-kernel"
    assert process(with_os(numa, None), "numa.xml", host, Config(), cli_policy="numa").decision.rule == "policy-numa"


@pytest.mark.parametrize("how", ["command line", "domain metadata"])
def test_policy_always_still_adds_it_and_says_why_not_by_default(host, how):
    if how == "command line":
        o = process(RHEL73, "rhel73.xml", host, Config(), cli_policy="always")
    else:
        data = RHEL73.replace(b"  </metadata>",
                              b"    <vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' policy='always'/>\n  </metadata>")
        o = process(data, "rhel73.xml", host, Config())
    assert (o.decision.action, o.decision.rule) == ("inject", "policy-always")
    assert b"<pvspinlock state='on'/>" in o.output
    assert any(n.startswith("guest RHEL 7.3") for n in o.decision.notes)


def test_a_guest_that_ignores_the_bit_gets_a_note_and_the_same_decision(host):
    o = process(CENTOS65, "centos65.xml", host, Config())
    bare = process(with_os(CENTOS65, None), "centos65.xml", host, Config())
    assert (o.decision.action, o.decision.rule, o.decision.reason) == \
           (bare.decision.action, bare.decision.rule, bare.decision.reason) == \
           ("inject", "policy-compat", bare.decision.reason)
    assert [n for n in o.decision.notes if n not in bare.decision.notes] == [
        guest_os.note("http://centos.org/centos/6.5", guest_os.lookup("http://centos.org/centos/6.5"))]
    assert "changes nothing for it" in o.decision.notes[-1]


def test_centos7_one_id_for_every_7x_release_keeps_the_decision_and_warns(host):
    o = process(with_os(RHEL73, "http://centos.org/centos/7.0"), "c7.xml", host, Config())
    bare = process(with_os(RHEL73, None), "c7.xml", host, Config())
    assert (o.decision.action, o.decision.rule, o.decision.reason) == \
           (bare.decision.action, bare.decision.rule, bare.decision.reason)
    assert o.decision.action == "inject"
    (note,) = [n for n in o.decision.notes if n not in bare.decision.notes]
    assert note.startswith("guest CentOS 7 (http://centos.org/centos/7.0)") and "<vxc:cpu policy='never'/>" in note
    exempt = with_os(RHEL73, "http://centos.org/centos/7.0").replace(
        b"  </metadata>", b"    <vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' policy='never'/>\n  </metadata>")
    assert process(exempt, "c7.xml", host, Config()).decision.rule == "policy-never"


@pytest.mark.parametrize("os_id", ["http://redhat.com/rhel/7.4", "http://example.org/os/1.0",
                                   "http://redhat.com/rhel/7"])
def test_an_os_no_row_covers_decides_exactly_as_no_os_at_all(host, os_id):
    named = process(with_os(RHEL73, os_id), "x.xml", host, Config())
    bare = process(with_os(RHEL73, None), "x.xml", host, Config())
    assert named.decision == bare.decision
    assert named.decision.rule == "policy-compat"


def test_explain_shows_the_guest_os_it_read(host):
    o = process(RHEL73, "rhel73.xml", host, Config(), render=False)
    doc = explain.to_json(o)
    assert doc["guest_os"]["libosinfo_id"] == "http://redhat.com/rhel/7.3"
    assert doc["guest_os"]["kernel"] == guest_os.MISHANDLES and "b783267f" in doc["guest_os"]["source"]
    assert json.loads(explain.to_json_line(o)) == doc
    assert "   guest OS: http://redhat.com/rhel/7.3 (RHEL 7.3: mishandles-pv-spinlocks)" in explain.table(o).splitlines()

    unknown = process(with_os(RHEL73, "http://ubuntu.com/ubuntu/22.04"), "u.xml", host, Config(), render=False)
    assert explain.to_json(unknown)["guest_os"] == {"libosinfo_id": "http://ubuntu.com/ubuntu/22.04"}
    assert "guest OS: http://ubuntu.com/ubuntu/22.04 (no finding about its kernel)" in explain.table(unknown)

    none = process(with_os(RHEL73, None), "n.xml", host, Config(), render=False)
    assert "guest_os" not in explain.to_json(none) and "guest OS" not in explain.table(none)


def test_an_unprintable_os_id_is_shown_escaped(host):
    o = process(with_os(RHEL73, "http://x/&#10;== forged&#x202E;/1.0"), "x.xml", host, Config(), render=False)
    table = explain.table(o)
    assert "== forged" not in "".join(l for l in table.splitlines() if l.startswith("=="))
    line = next(l for l in table.splitlines() if "guest OS" in l)
    assert "\u202e" not in line and "\\n== forged\\u202e" in line

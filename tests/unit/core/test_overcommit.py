"""-overcommit in <qemu:commandline> read as QEMU reads it: every spelling of cpu-pm, several -overcommit options,
and what QEMU refuses. The rows are what QEMU 7.2.22 and 10.0.2 did here (tests/lab/test_overcommit.py runs them
against both and reads PV_UNHALT from the guest's CPUID)."""

from __future__ import annotations

import pytest
from lxml import etree

from virtxml_cpu.core import domain, resolve as core_resolve, decision
from virtxml_cpu.core.answer import SRC_CPU_PM
from virtxml_cpu.core.hostfacts import HostFacts

QEMU_7_2, QEMU_10_0 = (7, 2, 22), (10, 0, 2)

# (the -overcommit values in order, strips on 7.2, strips on 10.0); a string: QEMU's error, on both
CASES = [
    ((), False, False),
    (("cpu-pm=on",), True, True),
    (("cpu-pm=yes",), True, True),
    (("cpu-pm=true",), True, True),
    (("cpu-pm=y",), True, True),
    (("cpu-pm",), True, True),
    (("mem-lock=off,cpu-pm",), True, True),
    (("mem-lock=on,cpu-pm=on",), True, True),
    (("cpu-pm=on,",), True, True),
    (("cpu-pm=off",), False, False),
    (("cpu-pm=no",), False, False),
    (("cpu-pm=n",), False, False),
    (("cpu-pm=false",), False, False),
    (("nocpu-pm",), False, False),
    (("mem-lock=off,nocpu-pm",), False, False),
    (("cpu-pm=on,cpu-pm=off",), False, False),
    (("cpu-pm=off,cpu-pm=on",), True, True),
    (("cpu-pm=on", "mem-lock=off"), False, True),
    (("cpu-pm=on", "cpu-pm=off"), False, False),
    (("cpu-pm=off", "cpu-pm=on"), True, True),
    (("cpu-pm=1",), "-overcommit cpu-pm=1: Parameter 'cpu-pm' expects 'on' or 'off'", None),
    (("cpu-pm=On",), "-overcommit cpu-pm=On: Parameter 'cpu-pm' expects 'on' or 'off'", None),
    (("cpu-pm=",), "-overcommit cpu-pm=: Parameter 'cpu-pm' expects 'on' or 'off'", None),
    (("cpu-pm=on,,x",), "-overcommit cpu-pm=on,,x: Parameter 'cpu-pm' expects 'on' or 'off'", None),
    (("cpu-pm=on,bogus=1",), "-overcommit cpu-pm=on,bogus=1: Invalid parameter 'bogus'", None),
    (("on",), "-overcommit on: Invalid parameter 'on'", None),
]


def _domain(values) -> domain.DomainFacts:
    args = "".join(f"<qemu:arg value='-overcommit'/><qemu:arg value='{v}'/>" for v in values)
    xml = ("<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><name>t</name><vcpu>2</vcpu>"
           "<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><features><pvspinlock state='on'/></features>"
           f"<cpu mode='custom'><model>qemu64</model></cpu><devices/><qemu:commandline>{args}</qemu:commandline>"
           "</domain>")
    return domain.extract(etree.fromstring(xml))


def resolve(values, release):
    return core_resolve.resolve(_domain(values), HostFacts(qemu_build="upstream", build_source="test",
                                                     qemu_version=release))


@pytest.mark.parametrize("values,on_7_2,on_10_0", CASES, ids=[" ".join(c[0]) or "none" for c in CASES])
def test_overcommit_as_qemu_reads_it(values, on_7_2, on_10_0):
    for release, want in ((QEMU_7_2, on_7_2), (QEMU_10_0, on_10_0 if on_10_0 is not None else on_7_2)):
        r = resolve(values, release)
        unhalt = r.features["kvm-pv-unhalt"]
        if isinstance(want, str):
            assert r.qemu_refusal == want
            assert decision.decide(r, "compat").rule == "qemu-refuses"
            continue
        assert r.qemu_refusal is None
        assert unhalt.qemu_property == "on"  # QEMU sets it either way (<pvspinlock state='on'/>)
        assert (unhalt.state, unhalt.source == SRC_CPU_PM) == (("off", True) if want else ("on", False)), \
            (release, unhalt)


def test_unknown_release_reads_as_current():
    assert resolve(("cpu-pm=on", "mem-lock=off"), None).features["kvm-pv-unhalt"].state == "off"
    assert resolve(("cpu-pm=on", "mem-lock=off"), (9, 0, 0)).features["kvm-pv-unhalt"].state == "on"
    assert resolve(("cpu-pm=on", "mem-lock=off"), (9, 1, 0)).features["kvm-pv-unhalt"].state == "off"


def test_double_dash_and_bare_spelling_reach_the_decision():
    xml = ("<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><name>t</name><vcpu>2</vcpu>"
           "<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><cpu mode='custom'><model>qemu64</model></cpu>"
           "<devices/><qemu:commandline><qemu:arg value='--overcommit'/><qemu:arg value='cpu-pm'/></qemu:commandline>"
           "</domain>")
    r = core_resolve.resolve(domain.extract(etree.fromstring(xml)), HostFacts(qemu_build="upstream", build_source="t",
                                                                       qemu_version=QEMU_7_2))
    assert decision.decide(r, "compat").rule == "cpu-pm"

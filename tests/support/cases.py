"""Cases a unit test checks against the rules and a lab test against the real QEMU or libvirt: the same rows
for both."""

from __future__ import annotations

from lxml import etree

from virtxml_cpu.core import domain, resolve as core_resolve
from virtxml_cpu.core.hostfacts import HostFacts

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

"""kernel_irqchip in <qemu:commandline> against real QEMU: each case of tests/unit/core/test_resolve.py IRQCHIP_CASES
started behind libvirt's own options (`-machine q35[,kernel_irqchip=split] -accel kvm`) on QEMU 7.2.22 (the host)
and on 5.2.0, 10.0.2 and 11.1.2 (their chroots, when present); the irqchip QEMU made (from the APIC and IOAPIC types
it created) or its refusal, against what the tool says for that release. No libvirt daemon is touched."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from lxml import etree

from tests.lab import harness
from virtxml_cpu.core import domain, resolve
from virtxml_cpu.core.hostfacts import HostFacts

from tests.unit.core.test_resolve import IRQCHIP_CASES

pytestmark = pytest.mark.lab
RELEASES = {harness.HOST_LAB: (7, 2, 22), harness.BULLSEYE_LAB: (5, 2, 0), harness.BPO_LAB: (10, 0, 2),
            harness.FORKY_LAB: (11, 1, 2)}
LIBVIRT_SPLIT = "kernel_irqchip=split"  # what libvirt writes on its -machine for <ioapic driver='qemu'/>


def _lab_or_skip(lab: harness.Lab) -> None:
    missing = harness.qemu_missing(lab)
    if missing:
        pytest.skip(f"REAL QEMU TESTS SKIPPED: {missing}")


def _irqchip(lab: harness.Lab, args: list[str]) -> str:
    """Start QEMU paused with `args` and read which irqchip it made: on, split, off, or `refused: ERROR`."""
    commands = [{"execute": "qmp_capabilities"},
                {"execute": "qom-list", "arguments": {"path": "/machine/unattached/device[0]"}},
                {"execute": "human-monitor-command", "arguments": {"command-line": "info qtree"}},
                {"execute": "quit"}]
    proc = subprocess.run(harness.qemu_in(lab) + args + ["-S", "-nodefaults", "-display", "none", "-qmp", "stdio"],
                          input="".join(json.dumps(c) + "\n" for c in commands), capture_output=True, text=True,
                          timeout=120)
    replies = [json.loads(line)["return"] for line in proc.stdout.splitlines() if '"return"' in line]
    if len(replies) < 3:
        return "refused: " + proc.stderr.strip()
    lapic = next(p["type"] for p in replies[1] if p["name"] == "lapic")
    if "dev: kvm-ioapic" in replies[2]:
        return "on"
    assert "dev: ioapic" in replies[2], replies[2][:2000]
    return "split" if lapic == "child<kvm-apic>" else "off"


def _engine(release, args: list[str], features: str) -> str:
    cmd = "".join(f"<qemu:arg value='{a}'/>" for a in args)
    xml = (f"<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><name>t</name><vcpu>1</vcpu>"
           f"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><features>{features}</features><devices/>"
           f"<qemu:commandline>{cmd}</qemu:commandline></domain>")
    r = resolve.resolve(domain.extract(etree.fromstring(xml)),
                       HostFacts(qemu_build="upstream", build_source="test", qemu_version=release,
                                 version_source="test"))
    return f"refused: {r.qemu_refusal}" if r.qemu_refusal else r.irqchip


@pytest.mark.parametrize("lab", list(RELEASES), ids=[lab.key for lab in RELEASES])
def test_kernel_irqchip_cases_on_real_qemu(lab):
    _lab_or_skip(lab)
    release = RELEASES[lab]

    def run(case):
        args, features, _want, _conflict = IRQCHIP_CASES[case]
        machine = "q35" + ("," + LIBVIRT_SPLIT if "<ioapic driver='qemu'/>" in features else "")
        return _irqchip(lab, ["-machine", machine, "-accel", "kvm", *args])

    cases = sorted(IRQCHIP_CASES)
    with ThreadPoolExecutor(2) as pool:
        seen = dict(zip(cases, pool.map(run, cases)))
    wrong = []
    for case in cases:
        args, features, *_ = IRQCHIP_CASES[case]
        said = _engine(release, args, features)
        qemu = seen[case]
        if said != qemu and not (said.startswith("refused: ") and qemu.startswith("refused: ")
                                 and said[len("refused: "):] in qemu):
            wrong.append(f"{case}: QEMU {lab.key}: {qemu!r}, the tool: {said!r}")
    assert not wrong, "\n".join(wrong)

"""End to end inside a guest: a boot sector executes CPUID 0x40000001 and prints EAX on the serial port.

Before `virtxml-cpu rewrite` bit 7 (KVM_FEATURE_PV_UNHALT) is clear; after it, it is set.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
PV_UNHALT = 1 << 7
# (lab, kind) -> (machine, <cpu>): QEMU 7.2 in the host lab, QEMU 10.0.2 in the chroot lab.
GUESTS = {
    ("7.2", "host-model"): ("pc-q35-7.2", "<cpu mode='host-model' check='partial'/>"),
    ("7.2", "custom"): ("pc-i440fx-7.2", "<cpu mode='custom' match='exact'><model fallback='forbid'>qemu64</model></cpu>"),
    ("7.2", "no-cpu"): ("q35", ""),
    ("10.0", "host-model"): ("pc-q35-10.0", "<cpu mode='host-model' check='partial'/>"),
    ("10.0", "custom"): ("pc-i440fx-10.0", "<cpu mode='custom' match='exact'><model fallback='forbid'>qemu64</model></cpu>"),
    ("10.0", "no-cpu"): ("pc-q35-10.0", ""),
}
SEEN: dict[str, tuple[str, str]] = {}


def rewrite(xml: bytes, lab: harness.Lab) -> bytes:
    """The tool told which libvirt the guest runs on (the chroot's QEMU 10.0 is not the host's local 7.2)."""
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "rewrite", "--connect", lab.uri, "-"], input=xml,
                       capture_output=True, cwd=ROOT, check=True)
    return r.stdout


@pytest.mark.parametrize("key", sorted(GUESTS))
def test_guest_reads_pv_unhalt_only_after_rewrite(lab_up, key):
    lab_key, kind = key
    lab = harness.LABS[lab_key]
    harness.bring_up(lab)
    conn = harness.connect(lab)
    machine, cpu = GUESTS[key]
    name = harness.unique_name(f"cpuid-{kind}")
    original = harness.boot_sector_guest(name, machine, cpu, lab=lab)
    before = harness.boot_and_read_cpuid(conn, harness.startable(original), name, lab=lab)
    fixed = rewrite(original, lab)
    assert fixed != original and b"<pvspinlock state='on'/>" in fixed
    after = harness.boot_and_read_cpuid(conn, harness.startable(fixed), name, lab=lab)
    conn.close()
    SEEN[key] = (before, after)
    print(f"\n{kind} on {machine} ({lab.title}): CPUID 0x40000001.EAX before {before}, after {after}")
    assert int(before, 16) & PV_UNHALT == 0
    assert int(after, 16) & PV_UNHALT
    assert int(after, 16) == int(before, 16) | PV_UNHALT  # nothing else in the leaf changed
    assert rewrite(fixed, lab) == fixed  # a second run changes nothing

"""-overcommit against the real QEMUs of both labs (7.2.22 on the host, 10.0.2 in the chroot): each spelling of
tests/unit/core/test_overcommit.py run on QEMU itself with the CPUID boot sector, its guest's PV_UNHALT (CPUID
0x40000001 EAX bit 7) against what the tool says for that release, and QEMU's refusal against the tool's."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.lab import harness
from virtxml_cpu.core import decision
from virtxml_cpu.core.answer import SRC_CPU_PM

from tests.support import require_lab
from tests.unit.core.test_overcommit import CASES, QEMU_7_2, QEMU_10_0, resolve

libvirt = require_lab()
pytestmark = pytest.mark.lab
PV_UNHALT = 1 << 7
RELEASES = {harness.HOST_LAB.key: QEMU_7_2, harness.BPO_LAB.key: QEMU_10_0}
WORK = Path("/tmp/virtxml-cpu-lab-overcommit")  # inside each lab's filesystem


def _run(lab: harness.Lab, values: tuple[str, ...], tag: str, timeout: float = 60.0) -> tuple[int | None, str]:
    """Boot the CPUID sector on the lab's QEMU with these -overcommit options: (EAX, or None when QEMU
    exited first, QEMU's stderr)."""
    work = lab.path(WORK)
    work.mkdir(exist_ok=True)
    disk, serial = WORK / f"{tag}.img", WORK / f"{tag}.serial"
    lab.path(disk).write_bytes(harness.BOOT_SECTOR + bytes(1024 * 1024 - 512))
    lab.path(serial).unlink(missing_ok=True)
    args = [a for v in values for a in ("-overcommit", v)]
    proc = subprocess.Popen(harness.qemu_in(lab) + [
        "-machine", "pc-i440fx-7.2,accel=kvm", "-m", "32", "-nodefaults", "-display", "none",
        "-cpu", "qemu64,kvm-pv-unhalt=on", "-drive", f"file={disk},format=raw,if=ide",
        "-serial", f"file:{serial}", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            text = lab.path(serial).read_text() if lab.path(serial).exists() else ""
            if text.endswith("\n"):
                return int(text.strip()[-8:], 16), ""
            time.sleep(0.2)
        if proc.poll() is None:
            raise AssertionError(f"{lab.title}: no CPUID from the guest within {timeout:g}s ({values})")
        return None, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        lab.path(disk).unlink(missing_ok=True)
        lab.path(serial).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def labs(lab_up):
    for lab in (harness.HOST_LAB, harness.BPO_LAB):
        harness.bring_up(lab)
    return harness


@pytest.mark.parametrize("key", sorted(RELEASES))
def test_overcommit_spellings_on_real_qemu(labs, key):
    lab, release = harness.LABS[key], RELEASES[key]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda ic: _run(lab, ic[1][0], f"c{ic[0]}"), enumerate(CASES)))
    wrong = []
    for (values, *_), (eax, stderr) in zip(CASES, runs):
        r = resolve(values, release)
        if eax is None:
            if r.qemu_refusal is None or r.qemu_refusal not in stderr:
                wrong.append(f"{values}: QEMU said {stderr.strip()!r}, the tool {r.qemu_refusal!r}")
            continue
        stripped = not eax & PV_UNHALT
        said = r.features["kvm-pv-unhalt"].source == SRC_CPU_PM
        if r.qemu_refusal or stripped != said:
            wrong.append(f"{values}: guest EAX {eax:08X}, the tool {r.features['kvm-pv-unhalt']} "
                         f"refusal {r.qemu_refusal!r}")
        assert decision.decide(r, "compat").rule in ("cpu-pm", "user-choice")
    assert not wrong, f"{lab.title}:\n" + "\n".join(wrong)

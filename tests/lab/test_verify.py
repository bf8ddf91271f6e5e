"""`virtxml-cpu verify` on the lab's two real QEMUs (Debian 12's 7.2 and bookworm-backports' 10.0.2, the
latter through a wrapper script), a changed table row caught, and the environment failures it must name.

No libvirt is involved: verify starts QEMU itself. Each full run takes about 25-35 s on this 2-core machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab
from virtxml_cpu.tables import qemu

require_lab()
pytestmark = pytest.mark.lab
HOST_QEMU = "/usr/bin/qemu-system-x86_64"


@pytest.fixture(scope="module")
def shared_dir():
    """A directory the unprivileged user QEMU runs as can traverse (pytest's tmp_path is root-only)."""
    d = Path(tempfile.mkdtemp(prefix="vxc-lab-verify-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def qemu_10(shared_dir) -> str:
    """QEMU 10.0.2 of the backports chroot, run from outside it with its own firmware (-L), so that the
    QMP socket and the dropped privileges work as for any QEMU."""
    root = harness.BPO_ROOT
    if not (root / "usr/bin/qemu-system-x86_64").exists():
        harness.bring_up(harness.BPO_LAB)
    wrapper = shared_dir / "qemu-10.0"
    wrapper.write_text(f"#!/bin/sh\nexec {root}/usr/bin/qemu-system-x86_64 -L {root}/usr/share/qemu "
                       f"-L {root}/usr/share/seabios \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def verify(*args, pythonpath: str | None = None, user: list[str] | None = None, timeout: float = 240):
    env = dict(os.environ, PYTHONPATH=pythonpath or str(ROOT))
    cmd = (user or []) + [sys.executable, "-m", "virtxml_cpu", "verify", *args]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=pythonpath or ROOT, timeout=timeout)
    return proc, time.monotonic() - t


def full_run(emulator: str, shared_dir: Path, name: str) -> dict:
    report, record = shared_dir / f"{name}.json", shared_dir / f"{name}-verified.json"
    proc, seconds = verify("--emulator", emulator, "--json", str(report), "--record", str(record))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(report.read_text())
    s = data["summary"]
    assert s["disagreements"] == 0 and s["not_started"] == 0, proc.stdout
    assert s["cpu_models"] == 5 and s["properties"] == len(qemu.PROPERTIES) == 18
    assert s["checks"] == s["machine_types"] * 5 * 18 == len(data["runs"]) * 18
    assert data["build"] == "upstream" and data["package"].startswith("Debian 1:")
    for r in data["runs"]:  # the report carries both answers for every pair
        assert {p: "off" if v == "absent" else v for p, v in r["qemu"].items()} == r["tool"], r
    # QEMU's answers are real and vary with the machine type: l3-cache is off up to 2.7, on from 2.8.
    l3 = {r["machine"]: r["qemu"]["l3-cache"] for r in data["runs"] if r["cpu"] == "intel"}
    assert l3["pc-i440fx-2.7"] == "off" and l3["pc-i440fx-2.8"] == "on"
    unhalt = {r["cpu"]: r["qemu"]["kvm-pv-unhalt"] for r in data["runs"] if r["machine"] == "q35"}
    assert unhalt == {"default": "off", "intel": "off", "amd": "off", "host": "on", "max": "on"}
    # The pass is recorded for this emulator, version and package.
    verified = json.loads(record.read_text())["verified"]
    assert list(verified) == [f"{emulator}|{data['qemu_version']}|{data['package']}"]
    assert proc.stdout.splitlines()[-1].startswith(f"verify: {s['machine_types']} machine types x 5 CPU models x 18 ")
    print(f"\nverify on QEMU {data['qemu_version']}: {s['machine_types']} machine types x 5 CPU models x 18 "
          f"properties = {s['checks']} checks, compat-props checks {s['compat_checks']}, "
          f"{s['disagreements']} disagreements, {seconds:.1f} s")
    return data


def test_zero_disagreements_on_qemu_7_2(shared_dir):
    data = full_run(HOST_QEMU, shared_dir, "7.2")
    assert data["qemu_version"].startswith("7.2.") and data["summary"]["machine_types"] >= 55
    assert data["compat_props_answered"] is False


def test_zero_disagreements_on_qemu_10_0(shared_dir, qemu_10):
    data = full_run(qemu_10, shared_dir, "10.0")
    assert data["qemu_version"] == "10.0.2" and data["summary"]["machine_types"] >= 61
    assert data["compat_props_answered"] is True and data["summary"]["compat_checks"] > 0
    assert data["qemu_user"].startswith("libvirt-qemu")  # not root: the kvm group is enough


def changed_copy(where: Path) -> Path:
    """The package with one table row changed: upstream's l3-cache compat row (pc_compat_2_7, off up to
    2.7) moved to 2.8."""
    shutil.copytree(ROOT / "virtxml_cpu", where / "virtxml_cpu", ignore=shutil.ignore_patterns("__pycache__"))
    table = where / "virtxml_cpu" / "tables" / "builds" / "upstream.py"
    text = table.read_text()
    changed, n = re.subn(r"(\"l3-cache\", \"off\",.{0,200}?up_to=\(2, )7\)", r"\g<1>8)", text, flags=re.S)
    assert n == 1, "the l3-cache compat row of builds/upstream.py changed shape: update changed_copy()"
    table.write_text(changed)
    return where


def test_a_changed_table_row_is_caught(shared_dir, qemu_10):
    copy = changed_copy(shared_dir / "changed")
    two_seven_eight = ("--machine", "pc-*-2.7", "--machine", "pc-*-2.8")
    proc, seconds = verify("--emulator", HOST_QEMU, *two_seven_eight, "--record", str(shared_dir / "no"),
                           pythonpath=str(copy))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("DISAGREE")]
    # pc-i440fx-2.8 and pc-q35-2.8 are in QEMU 7.2; every CPU model now says l3-cache off there.
    assert found and all(re.match(r"DISAGREE pc-(i440fx|q35)-2\.8 \S+ l3-cache: QEMU on, tool off \(", ln)
                         for ln in found), found
    assert len(found) == 2 * 5
    assert "10 disagreements" in proc.stdout.splitlines()[-1]
    assert not (shared_dir / "no").exists()  # a failed run is not recorded
    # QEMU 10.0.2's own compat-props say the same without the qom-get of a CPU.
    proc10, _ = verify("--emulator", qemu_10, "--machine", "pc-i440fx-2.8", "--cpu", "default",
                       "--record", str(shared_dir / "no"), pythonpath=str(copy))
    assert proc10.returncode == 1
    assert "DISAGREE pc-i440fx-2.8 default-cpu l3-cache: QEMU on, tool off" in proc10.stdout
    assert re.search(r"DISAGREE pc-i440fx-2\.8 default-cpu ioapic=kvm \(vs pc-i440fx-\d+\.\d+ \+ 1 compat props\) "
                     r"l3-cache: QEMU's compat-props imply on, tool off", proc10.stdout), proc10.stdout
    # The unchanged package agrees on the same selection.
    ok, _ = verify("--emulator", HOST_QEMU, *two_seven_eight, "--record", str(shared_dir / "no"))
    assert ok.returncode == 0, ok.stdout
    print(f"\nchanged row: {len(found)} disagreements named on QEMU 7.2 in {seconds:.1f} s")


def test_without_the_kvm_group_it_says_so(shared_dir):
    proc, _ = verify("--emulator", HOST_QEMU, user=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    assert proc.returncode == 3
    assert proc.stderr.strip() == ("virtxml-cpu: cannot open /dev/kvm: run `virtxml-cpu verify` as root or as a "
                                   "member of the kvm group")
    assert proc.stdout == ""


def test_a_qemu_that_never_answers_is_killed(shared_dir):
    stuck = shared_dir / "stuck-qemu"
    stuck.write_text("#!/bin/sh\nsleep 613.25\n")  # not exec: the shell and its child are both ours to end
    stuck.chmod(0o755)
    broken = shared_dir / "broken-qemu"
    broken.write_text("#!/bin/sh\necho 'qemu-system-x86_64: Could not access KVM kernel module' >&2\nexit 1\n")
    broken.chmod(0o755)
    proc, seconds = verify("--emulator", str(stuck), "--timeout", "2")
    assert proc.returncode == 3 and seconds < 15, (proc.stderr, seconds)
    assert proc.stderr.startswith(f"virtxml-cpu: QEMU or KVM is not usable: {stuck}")
    assert not [p for p in os.listdir("/proc") if p.isdigit() and b"613.25" in _cmdline(p)]
    proc, _ = verify("--emulator", str(broken))
    assert proc.returncode == 3
    assert proc.stderr.strip().endswith("qemu-system-x86_64: Could not access KVM kernel module"), proc.stderr


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_connect_takes_the_emulator_libvirt_uses(shared_dir):
    harness.bring_up(harness.HOST_LAB)
    proc, _ = verify("--connect", harness.HOST_LAB.uri, "--machine", "q35", "--cpu", "default",
                     "--record", str(shared_dir / "connect.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"QEMU {HOST_QEMU}: QEMU emulator version 7.2.")
    # The chroot's libvirtd names /usr/bin/qemu-system-x86_64 of its own filesystem: not this host's binary.
    harness.bring_up(harness.BPO_LAB)
    proc, _ = verify("--connect", harness.BPO_LAB.uri, "--machine", "q35")
    assert proc.returncode == 3
    assert "runs QEMU 10.0.2, but /usr/bin/qemu-system-x86_64 here is 7.2." in proc.stderr

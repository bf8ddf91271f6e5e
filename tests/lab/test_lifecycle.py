"""The machine lifecycle table against the lab's two real QEMUs: `explain` on every pc machine name QEMU 7.2 and
10.0.2 ever had (pc-0.10 up to their own release) must give the machine_status that QEMU's `-machine help`
shows: listed and "(deprecated)", listed, or not listed at all.

explain runs with --no-host-probe and the release given, so the table decides, not the binary's own list.
Under the lab lock (the chroot is shared): flock /tmp/virtxml-lab.lock pytest tests/lab/test_lifecycle.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab
from virtxml_cpu.core import lifecycle
from virtxml_cpu.tables.builds.known import UPSTREAM
from virtxml_cpu.core.hostfacts import parse_qemu_version

require_lab()
pytestmark = pytest.mark.lab

QEMUS = {"7.2": ["/usr/bin/qemu-system-x86_64"],
         "10.0": ["chroot", str(harness.BPO_ROOT), "/usr/bin/qemu-system-x86_64"]}


def machine_help(cmd: list[str]) -> dict[str, str]:
    """-machine help -> {pc machine name: offered | deprecated} (aliases are names of their own here too)."""
    out = subprocess.run(cmd + ["-machine", "help"], capture_output=True, text=True, check=True, timeout=30).stdout
    seen = {}
    for line in out.splitlines():
        m = re.match(r"(pc-\S+)\s", line)
        if m:
            seen[m.group(1)] = lifecycle.DEPRECATED if "(deprecated)" in line else lifecycle.OFFERED
    return seen


@pytest.mark.parametrize("key", sorted(QEMUS))
def test_machine_status_matches_the_qemus_machine_help(key, tmp_path):
    cmd = QEMUS[key]
    if cmd[0] == "chroot" and not (harness.BPO_ROOT / "usr/bin/qemu-system-x86_64").exists():
        harness.bring_up(harness.BPO_LAB)
    version = subprocess.run(cmd + ["--version"], capture_output=True, text=True, check=True).stdout
    release = parse_qemu_version(version)
    seen = machine_help(cmd)
    names = [n for n in lifecycle.known_names(UPSTREAM, release)]
    assert set(seen) <= set(names), set(seen) - set(names)  # every name the QEMU has is among those asked
    files = []
    for name in names:
        path = tmp_path / f"{name}.xml"
        path.write_text(f"<domain type='kvm'><name>{name}</name><vcpu>2</vcpu><os><type arch='x86_64' "
                        f"machine='{name}'>hvm</type></os><cpu mode='custom'><model>qemu64</model></cpu><devices/>"
                        "</domain>")
        files.append(str(path))
    proc = subprocess.run([sys.executable, "-m", "virtxml_cpu", "explain", "--no-host-probe", "--format", "json",
                           "--qemu-build", "upstream", "--qemu-version", ".".join(map(str, release)), *files],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          timeout=120)
    docs = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(docs) == len(names), proc.stderr
    want = {d["machine"]: seen.get(d["machine"], lifecycle.NOT_OFFERED) for d in docs}
    wrong = [(d["machine"], d["machine_status"], want[d["machine"]], d["machine_status_reason"])
             for d in docs if d["machine_status"] != want[d["machine"]]]
    assert not wrong, "\n".join(map(str, wrong))
    refused = [d for d in docs if d["machine_status"] == lifecycle.NOT_OFFERED]
    assert all(d["decision"]["rule"] == "machine-not-offered" for d in refused)
    counts = {s: sum(d["machine_status"] == s for d in docs) for s in lifecycle.STATUSES}
    print(f"\nQEMU {version.split()[3]}: {len(names)} pc machine names, {counts}")

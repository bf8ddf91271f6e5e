"""The oldest and the newest Debian libvirt hosts in support, each a chroot lab with its own daemons
(tests/lab/up-chroot.sh): Debian 11 bullseye (libvirt 7.0, QEMU 5.2, Python 3.9, python3-libvirt 7.0) and
Debian forky (libvirt 12.8, QEMU 11.1, its python3).

On each: the .deb installs with that system's apt and dpkg; its hook runs at a real guest start under that
libvirt (audit logs one line; enforce refuses a guest that lacks the bit, `apply` run there fixes it and
then it starts, with bit 7 in its CPUID); `audit` and `apply` run with that system's python3 and
python3-libvirt against its daemon; a sample of machine types x CPU modes agrees with QEMU (qom-get). On
forky: a guest whose machine type QEMU 11.1 no longer offers is `not-offered` in explain and audit, as
libvirt refuses it, and `verify` passes against QEMU 11.1.

The sample is every pc machine type the QEMU offers x (no <cpu>, custom qemu64, host-model): the CPU modes
whose properties depend on the machine type. host-passthrough and maximum turn every paravirt bit the host
has on whatever the machine, and the XML variants of tests/lab/test_qemu.py exercise the tool's parser and
rules, which are the same code on every libvirt; both run in full on the two middle labs.

Each lab has an xdist worker of its own (conftest.work_unit; `make test` runs the labs side by side): the test leaves its chroot as it
found it (the package and what it brought are purged again).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest

from tests.lab import harness
from tests.lab.debroot import LogSocket, apt_get, copy_in, in_root, packages, settle_after_reload
from tests.lab.hooks import clear_interrupted
from tests.lab.matrix import CPU_MODES, domain_xml, pc_machines, run_all
from virtxml_cpu.core import lifecycle
from virtxml_cpu.tables import qemu
from virtxml_cpu.host.sources import HostSources, assemble

from tests.support import require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab

SAMPLE_MODES = ("none", "custom", "host-model")
HM = "<cpu mode='host-model'/>"
CONFIG = "etc/virtxml-cpu/config.toml"
HOOK = "etc/libvirt/hooks/qemu.d/virtxml-cpu"
PV_UNHALT = 0x80  # CPUID 0x40000001 EAX bit 7
GONE = "pc-i440fx-2.11"  # QEMU 11.1 dropped it (machine types older than six years); libvirt 12.8 refuses it


@pytest.fixture(scope="module", params=sorted(harness.END_LABS))
def end(request):
    """(lab, connection) for each end; the lab is brought up if it is not."""
    lab = harness.END_LABS[request.param]
    harness.bring_up(lab)
    conn = harness.connect(lab)
    harness.cleanup(conn)
    yield lab, conn
    with suppress(libvirt.libvirtError):
        conn.close()
    conn = harness.connect(lab)  # a test may have restarted the daemon
    harness.cleanup(conn)
    conn.close()


@pytest.fixture(scope="module")
def installed(end, deb):
    """The .deb installed with the lab's own apt; afterwards purged with everything it brought."""
    lab, conn = end
    root = lab.root
    if "virtxml-cpu" in packages(root):  # an interrupted earlier run
        apt_get(root, "purge", "virtxml-cpu")
    clear_interrupted(lab)
    before = packages(root)
    t0 = time.monotonic()
    out = apt_get(root, "install", copy_in(root, deb))
    print(f"\n{lab.title}: apt-get install ./{deb.name}: {time.monotonic() - t0:.1f} s")
    reload_as_told(lab, out)
    try:
        yield lab, conn, out
    finally:
        with suppress(FileNotFoundError):
            (root / "tmp" / deb.name).unlink()
        added = sorted(packages(root) - before)
        if added:
            reload_as_told(lab, apt_get(root, "purge", *added))
        assert packages(root) == before


def reload_as_told(lab: harness.Lab, apt_output: str) -> None:
    """The package's scripts reload libvirtd through its init script or unit. Debian 11's libvirt-daemon has
    neither (they come with libvirt-daemon-system, which a chroot lab without systemd leaves out): there the
    package says how to reload it, and the test does what it says (SIGHUP)."""
    if (lab.root / "etc/init.d/libvirtd").exists():
        assert "reloaded libvirtd" in apt_output, apt_output
    else:
        assert "libvirtd is not running (or was not reloaded): it picks the change up when it starts, or on SIGHUP" \
            in apt_output, apt_output
        os.kill(int(lab.path(Path("/run/libvirtd.pid")).read_text().split()[0]), signal.SIGHUP)
    settle_after_reload(lab)


def tool(lab: harness.Lab, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    """The installed virtxml-cpu, run in the lab's system (its python3, its python3-libvirt, its daemon)."""
    return in_root(lab.root, "virtxml-cpu", *args, check=check)


def newest_q35(lab: harness.Lab) -> str:
    host = assemble(HostSources(connect=lab.uri, kvm=True))
    return max((m for m in pc_machines(host) if m.startswith("pc-q35-")),
               key=lambda m: tuple(map(int, m[len("pc-q35-"):].split("."))))


def test_the_deb_installs_with_that_systems_apt(installed):
    lab, _conn, out = installed
    root = lab.root
    assert "hooks/qemu.d/virtxml-cpu installed (audit mode" in out, out
    assert os.readlink(root / HOOK) == "/usr/libexec/virtxml-cpu/qemu-hook"
    python = in_root(root, "python3", "-c", "import sys, libvirt; print(sys.version.split()[0], libvirt.getVersion())")
    version = tool(lab, "--version")
    assert version.returncode == 0 and version.stdout.startswith("virtxml-cpu "), version.stderr
    status = tool(lab, "hook", "status")
    assert "interpreter /usr/bin/python3 ok" in status.stdout and "mode audit" in status.stdout, status.stdout
    print(f"{lab.title}: python3 {python.stdout.strip()}; {version.stdout.strip()}")


def test_hook_audits_enforces_and_the_guest_starts_once_apply_fixed_it(installed):
    lab, conn, _out = installed
    root = lab.root
    log = LogSocket(root)
    name = harness.unique_name("end")
    xml = harness.startable(harness.boot_sector_guest(name, newest_q35(lab), HM, lab=lab))
    dom = conn.defineXML(xml.decode())
    try:
        # audit (the package's default): the start goes on and the hook logs one line.
        (root / CONFIG).write_text(f'[hook]\nsyslog_socket = "{log.inside}"\n')
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        dom.destroy()
        lines = log.lines(name)
        assert len(lines) == 1 and "op=prepare" in lines[0] and "decision=inject" in lines[0], lines

        audit = tool(lab, "audit", "--format", "json", name)
        assert audit.returncode == 1, audit.stderr  # the guest needs the fix
        rows = [json.loads(line) for line in audit.stdout.splitlines()]
        mine = [r for r in rows if r.get("domain") == name]
        assert len(mine) == 1 and mine[0]["needs_fix"] is True, rows

        # enforce: refused, with the message in libvirt's error.
        (root / CONFIG).write_text(f'[hook]\nmode = "enforce"\nsyslog_socket = "{log.inside}"\n')
        with pytest.raises(libvirt.libvirtError, match=re.escape(f"Fix: virtxml-cpu apply --yes -- {name},")):
            dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert not dom.isActive()

        fixed = tool(lab, "apply", "--yes", name)
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        dom = conn.lookupByName(name)
        assert "<pvspinlock state='on'/>" in dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        eax = harness.start_and_read_cpuid(dom, timeout=90, lab=lab)  # starts under enforce now (slow when busy)
        assert int(eax, 16) & PV_UNHALT, eax
        again = tool(lab, "audit", "--format", "json", name)
        assert again.returncode == 0, again.stdout + again.stderr
        print(f"{lab.title}: hook audit line, enforce refusal, apply, start with CPUID 0x40000001.EAX {eax}")
    finally:
        (root / CONFIG).write_text("")
        with suppress(libvirt.libvirtError):
            conn.lookupByName(name).undefine()
        log.close()


def test_a_sample_of_machine_types_times_cpu_modes_agrees_with_qemu(end):
    lab, conn = end
    host = assemble(HostSources(connect=lab.uri, kvm=True))  # as explain --connect reads it
    assert host.qemu_build == "upstream", host.build_source
    machines = pc_machines(host)
    assert len(machines) >= 30, machines  # QEMU 5.2: pc-i440fx-1.4 ... 5.2, pc-q35-2.4 ... 5.2; 11.1: 5.2 ... 11.1
    cases = [(f"{m}/{mode}", domain_xml(harness.unique_name("s"), m, CPU_MODES[mode]))
             for m in machines for mode in SAMPLE_MODES]
    t0 = time.monotonic()
    results = run_all(conn, host, cases)
    bad = {label: diffs for label, _got, diffs in results if diffs}
    print(f"\nsample on {lab.title}: {len(machines)} machine types x {len(SAMPLE_MODES)} CPU modes = "
          f"{len(results)} guests, {len(results) * len(qemu.PROPERTIES)} property checks, "
          f"{sum(len(d) for d in bad.values())} disagreements, {time.monotonic() - t0:.0f} s")
    assert not bad, json.dumps(bad, indent=1)


@pytest.fixture
def forky(installed):
    lab, conn, _out = installed
    if lab is not harness.FORKY_LAB:
        pytest.skip(f"forky only (QEMU 11.1, libvirt 12.8); this is {lab.title}")
    return lab, conn


def restart_libvirtd(lab: harness.Lab, while_down) -> None:
    """Stop the lab's libvirtd by its pidfile, call while_down(), bring the lab up again (the daemon reads
    the saved definitions as it starts)."""
    pid = int(lab.path(Path("/run/libvirtd.pid")).read_text().split()[0])
    os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}"):
        assert time.monotonic() < deadline, f"libvirtd {pid} of {lab.title} did not stop"
        time.sleep(0.1)
    while_down()
    harness.bring_up(lab)


def test_a_machine_type_qemu_dropped_is_not_offered_as_libvirt_refuses_it(forky):
    """A guest defined before QEMU was upgraded keeps its definition; libvirt 12.8 refuses to define or start
    it again, and explain and audit (through that libvirt) say not-offered."""
    lab, conn = forky
    name = harness.unique_name("gone")
    xml = domain_xml(name, GONE, CPU_MODES["custom"]).decode()
    with pytest.raises(libvirt.libvirtError, match=f"does not support machine type '{GONE}'"):
        conn.defineXML(xml)
    (lab.root / "tmp" / f"{name}.xml").write_text(xml)
    explain = tool(lab, "explain", "--format", "json", f"/tmp/{name}.xml")
    doc = json.loads(explain.stdout)
    assert doc["machine_status"] == lifecycle.NOT_OFFERED, explain.stdout + explain.stderr
    assert doc["decision"]["rule"] == "machine-not-offered", doc["decision"]

    # The definition as the older QEMU's libvirt left it, read when the daemon starts.
    restart_libvirtd(lab, while_down=lambda: lab.path(Path(f"/etc/libvirt/qemu/{name}.xml")).write_text(xml))
    conn = harness.connect(lab)
    try:
        dom = conn.lookupByName(name)
        with pytest.raises(libvirt.libvirtError, match=f"does not support machine type '{GONE}'"):
            dom.create()
        audit = tool(lab, "audit", "--format", "json", name)
        rows = [json.loads(line) for line in audit.stdout.splitlines()]
        mine = [r for r in rows if r.get("domain") == name]
        assert len(mine) == 1 and mine[0]["machine_status"] == lifecycle.NOT_OFFERED, audit.stdout + audit.stderr
        print(f"\n{GONE} on {lab.title}: libvirt refuses it; explain and audit: {mine[0]['machine_status']}")
    finally:
        with suppress(libvirt.libvirtError):
            conn.lookupByName(name).undefine()
        conn.close()
        (lab.root / "tmp" / f"{name}.xml").unlink()


def test_verify_passes_against_qemu_11_1(forky):
    """`virtxml-cpu verify` as installed there: every machine type x its CPU models against QEMU 11.1."""
    lab, _conn = forky
    t0 = time.monotonic()
    proc = tool(lab, "verify", "--json", "/tmp/vxc-verify.json")
    report = lab.root / "tmp/vxc-verify.json"
    try:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        s = json.loads(report.read_text())["summary"]
    finally:
        with suppress(FileNotFoundError):
            report.unlink()
    assert s["disagreements"] == 0 and s["not_started"] == 0 and s["properties"] == len(qemu.PROPERTIES), s
    assert s["machine_types"] >= 30, s
    print(f"\nverify on {lab.title}: {s['checks']} checks over {s['machine_types']} machine types, "
          f"0 disagreements, {time.monotonic() - t0:.0f} s")

"""The qemu hook installed into the real libvirtd: audit, enforce, queue, save/restore, daemon restart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab
from tests.support.logsock import drain

libvirt = require_lab()
pytestmark = pytest.mark.lab
HOOKS = "/etc/libvirt/hooks"
HM = "<cpu mode='host-model' check='partial'/>"
HP = "<cpu mode='host-passthrough' check='none'/>"
PV_UNHALT = 1 << 7


def cli(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


class HookEnv:
    def __init__(self, root: Path):
        self.root = root
        self.config = root / "config.toml"
        self.spool = root / "spool"
        self.sock_path = root / "log.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.sock_path))
        self.sock.settimeout(0.2)

    def mode(self, mode: str) -> None:
        self.config.write_text(f'[hook]\nmode = "{mode}"\nspool = "{self.spool}"\n'
                               f'syslog_socket = "{self.sock_path}"\n')

    def logs(self) -> list[str]:
        return drain(self.sock)


@pytest.fixture(scope="module")
def hook(lab, tmp_path_factory):
    env = HookEnv(tmp_path_factory.mktemp("hook"))
    env.mode("audit")
    cli("hook", "install", "--hooks-dir", HOOKS, "--config", str(env.config),
        "--digest-dir", str(env.root / "decisions"))
    harness.reload_hooks()
    yield env
    cli("hook", "uninstall", "--hooks-dir", HOOKS)
    harness.reload_hooks()


def define(conn, stem, cpu, features=""):
    name = harness.unique_name(stem)
    return conn.defineXML(harness.startable(harness.boot_sector_guest(name, "pc-q35-7.2", cpu, features)).decode())


@contextmanager
def restore_script(name: str, sed_expr: str):
    """Another script in the qemu.d chain that rewrites the XML on `restore` with sed."""
    path = Path(HOOKS) / "qemu.d" / name
    path.write_text(f"#!/bin/sh\nif [ \"$2\" = restore ]; then\n  sed \"{sed_expr}\"\nfi\n")
    path.chmod(0o755)
    harness.reload_hooks()
    try:
        yield
    finally:
        path.unlink()
        harness.reload_hooks()


def starts_paused(conn, stem, cpu) -> tuple[str, str]:
    """Define a guest, start it paused (it must start), destroy and undefine it; its name and uuid."""
    dom = define(conn, stem, cpu)
    try:
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert dom.isActive()
        dom.destroy()
        return dom.name(), dom.UUIDString()
    finally:
        dom.undefine()


def test_status_reports_the_installed_hook(hook):
    r = cli("hook", "status", "--hooks-dir", HOOKS)
    assert "qemu.d/virtxml-cpu: installed" in r.stdout and "interpreter" in r.stdout and "ok" in r.stdout


def test_audit_logs_decisions_and_both_guests_start(lab, hook):
    hook.mode("audit")
    hook.logs()
    for stem, cpu, decision in (("audit-hm", HM, "decision=inject"), ("audit-hp", HP, "decision=keep")):
        name, uuid = starts_paused(lab, stem, cpu)
        lines = [line for line in hook.logs() if f"domain={name}" in line]
        assert len(lines) == 1, lines
        assert decision in lines[0] and "op=prepare" in lines[0] and f"uuid={uuid}" in lines[0]


def test_a_repeat_start_is_answered_from_the_digest(lab, hook):
    """libvirt hands `prepare` a new `id` at every start: the second start is still a digest hit, its line
    the first one's plus cached=yes."""
    hook.mode("audit")
    hook.logs()
    dom = define(lab, "repeat", HM)
    try:
        lines = []
        for _ in range(2):
            dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
            dom.destroy()
            lines += [line.split(": ", 1)[1] for line in hook.logs() if f"domain={dom.name()}" in line]
        assert len(lines) == 2 and lines[1] == lines[0] + " cached=yes", lines
    finally:
        dom.undefine()


def test_enforce_refuses_with_a_visible_message_then_starts_once_fixed(lab, hook):
    hook.mode("enforce")
    dom = define(lab, "enforce", HM)
    try:
        with pytest.raises(libvirt.libvirtError) as e:
            dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        msg = e.value.get_error_message()
        assert "refusing to start" in msg and "kvm-pv-unhalt" in msg and f"virtxml-cpu apply --yes -- {dom.name()}" in msg
        assert not dom.isActive()
        cli("apply", dom.name(), "--yes")
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        path = harness.qmp(dom, {"execute": "query-cpus-fast"})[0]["qom-path"]
        assert harness.qmp(dom, {"execute": "qom-get", "arguments": {"path": path, "property": "kvm-pv-unhalt"}})
        dom.destroy()
    finally:
        dom.undefine()


def test_queue_then_apply_pending_then_cold_boot_reads_the_bit(lab, hook):
    hook.mode("queue")
    dom = define(lab, "queue", HM)
    try:
        before = harness.start_and_read_cpuid(dom)
        entries = list(hook.spool.glob("*.json"))
        assert [p.name for p in entries] == [f"{dom.UUIDString()}.json"]
        r = cli("apply", "--pending", "--yes", "--config", str(hook.config))
        assert f"{dom.name()}: added kvm-pv-unhalt" in r.stdout
        assert not list(hook.spool.glob("*.json"))
        hook.mode("audit")
        after = harness.start_and_read_cpuid(dom)
        print(f"\nqueue mode: CPUID 0x40000001.EAX before {before}, after apply --pending {after}")
        assert int(before, 16) & PV_UNHALT == 0 and int(after, 16) & PV_UNHALT
    finally:
        dom.undefine()


def test_save_restore_passes_and_an_xml_changing_hook_would_break_it(lab, hook, tmp_path):
    hook.mode("audit")
    dom = define(lab, "restore", HM)
    image = tmp_path / "saved.img"
    try:
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        dom.save(str(image))
        lab.restore(str(image))
        assert dom.isActive()
        assert any(f"domain={dom.name()}" in line and "op=prepare after=restore" in line for line in hook.logs())
        dom.save(str(image))
        # A hook that adds one CPU feature on restore: libvirt's ABI check must reject it.
        with restore_script("zz-vxc-test-modify", "s#</cpu>#<feature policy='disable' name='avx512f'/></cpu>#"):
            with pytest.raises(libvirt.libvirtError) as e:
                lab.restore(str(image))
        print(f"\nrestore with an XML-changing hook: {e.value.get_error_message()}")
        assert "CPU feature count" in e.value.get_error_message()
    finally:
        if dom.isActive():
            dom.destroy()
        dom.undefine()


def test_a_previous_scripts_restore_xml_passes_through_the_hook(lab, hook, tmp_path):
    """In the qemu.d chain our hook prints nothing on restore, so the previous script's XML stands."""
    hook.mode("enforce")
    dom = define(lab, "chain", HP)  # host-passthrough: allowed to start under enforce
    image = tmp_path / "saved.img"
    try:
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        dom.save(str(image))
        with restore_script("00-vxc-test-describe", "s#</name>#</name><description>set-by-previous-hook</description>#"):
            lab.restore(str(image))
        assert "<description>set-by-previous-hook</description>" in dom.XMLDesc(0)
    finally:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
        hook.mode("audit")


def test_broken_config_does_not_stop_a_guest(lab, hook):
    hook.config.write_text("this is [not toml\n")
    try:
        starts_paused(lab, "badcfg", HM)
    finally:
        hook.mode("audit")


def test_libvirtd_restart_leaves_running_guest_running(lab_up, hook):
    conn = harness.connect()
    dom = define(conn, "reconnect", HM)
    dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    pid = int(Path(f"/run/libvirt/qemu/{dom.name()}.pid").read_text())
    conn.close()
    harness.restart_libvirtd()
    time.sleep(1)
    conn = harness.connect()
    try:
        again = conn.lookupByName(dom.name())
        assert again.isActive() and os.path.exists(f"/proc/{pid}")
        again.destroy()
        again.undefine()
    finally:
        conn.close()


def test_hook_learns_the_build_from_libvirts_capabilities_cache_and_prepare_stays_lean(lab_up, hook):
    """The installed hook reads what this libvirtd cached for /usr/bin/qemu-system-x86_64 (never runs it):
    the same release, machines and default as libvirt's own capabilities, and the Debian build (upstream)."""
    from virtxml_cpu.host import caps_cache
    from virtxml_cpu.core.hostfacts import parse_capabilities

    lab = harness.connect()  # its own: an earlier test of this module restarts libvirtd
    facts, why = caps_cache.lookup("/usr/bin/qemu-system-x86_64")
    version = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout
    assert why == "" and facts.qemu_build == "upstream" and "package Debian" in facts.build_source
    assert ".".join(map(str, facts.qemu_version[:2])) in version.split("(")[0]
    libvirts = parse_capabilities(lab.getCapabilities().encode())
    assert facts.machines >= libvirts.machines - {""} and facts.aliases[""] == libvirts.aliases[""]
    hook.mode("audit")
    hook.logs()
    name, _ = starts_paused(lab, "caps", HM)
    lab.close()
    (line,) = [line for line in hook.logs() if f"domain={name}" in line]
    assert "qemu=upstream" in line and "qemu_basis" not in line, line
    assert list((hook.root / "qemu-caps").glob("*.json"))  # the digest beside the spool
    # prepare as libvirt runs it, against the python + lxml floor, in the same run
    dom_xml = harness.boot_sector_guest(harness.unique_name("caps-timing"), "pc-q35-7.2", HM)
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}
    installed = f"{HOOKS}/qemu.d/virtxml-cpu"
    samples = {"hook": [], "floor": []}
    for _ in range(15):
        for key, cmd in (("hook", [installed, "t", "prepare", "begin", "-"]),
                         ("floor", [sys.executable, "-c", "import lxml.etree"])):
            t = time.perf_counter()
            subprocess.run(cmd, input=dom_xml, capture_output=True, env=env, timeout=60)
            samples[key].append(time.perf_counter() - t)
            hook.logs()  # drained: a full datagram queue would make the next run wait
    med = {k: sorted(v)[len(v) // 2] * 1000 for k, v in samples.items()}
    print(f"\nprepare path with the capabilities cache: {med['hook']:.0f} ms, floor {med['floor']:.0f} ms, "
          f"ratio {med['hook'] / med['floor']:.2f}x")
    assert med["hook"] / med["floor"] < 3

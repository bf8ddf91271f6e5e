"""Live libvirt verbs against the real daemon: apply, audit, watch, and a fleet of connections.

The fleet uses two real connections at once (the local socket and a remote URI over loopback TCP,
which tests/lab/up.sh enables) plus one unreachable URI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.lab import harness
from virtxml_cpu.core.config import Config
from virtxml_cpu.live.apply import ApplyOptions, Selection, apply

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
HM = "<cpu mode='host-model' check='partial'/>"
HP = "<cpu mode='host-passthrough' check='none'/>"
CUSTOM = "<cpu mode='custom' match='exact'><model fallback='forbid'>qemu64</model></cpu>"
TCP = "qemu+tcp://127.0.0.1/system"
DOWN = "qemu+tcp://127.0.0.1:1/system"
SECURE_INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
PV_UNHALT = 1 << 7


def cli(*args, check=None):
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    if check is not None:
        assert r.returncode == check, (r.returncode, r.stdout, r.stderr)
    return r


def define(conn, stem, cpu, machine="pc-q35-7.2", devices_extra=""):
    name = harness.unique_name(stem)
    xml = harness.boot_sector_guest(name, machine, cpu)
    if devices_extra:
        xml = xml.replace(b"</devices>", devices_extra.encode() + b"</devices>")
    return conn.defineXML(harness.startable(xml).decode())


def qom_unhalt(dom) -> bool:
    path = harness.qmp(dom, {"execute": "query-cpus-fast"})[0]["qom-path"]
    return harness.qmp(dom, {"execute": "qom-get", "arguments": {"path": path, "property": "kvm-pv-unhalt"}})


def test_apply_changes_exactly_the_picked_domains_and_they_boot_with_the_bit(lab):
    doms = {"hm": define(lab, "pick-hm", HM), "custom": define(lab, "pick-custom", CUSTOM),
            "hp": define(lab, "keep-hp", HP), "old": define(lab, "keep-old", CUSTOM, machine="pc-i440fx-2.10")}
    try:
        before = {k: d.XMLDesc(SECURE_INACTIVE) for k, d in doms.items()}
        r = cli("apply", "--yes", *[d.name() for d in doms.values()], check=0)
        assert "changed 2," in r.stderr
        after = {k: d.XMLDesc(SECURE_INACTIVE) for k, d in doms.items()}
        assert after["hp"] == before["hp"] and after["old"] == before["old"]
        for k in ("hm", "custom"):
            assert "<pvspinlock state='on'/>" in after[k] and after[k] != before[k]
            eax = harness.start_and_read_cpuid(doms[k])
            print(f"\napply {k}: CPUID 0x40000001.EAX at next boot {eax}")
            assert int(eax, 16) & PV_UNHALT
        assert cli("apply", "--yes", *[d.name() for d in doms.values()], check=0).stderr.startswith("changed 0,")
    finally:
        for d in doms.values():
            d.undefine()


def test_apply_keeps_secrets(lab):
    vnc = "<graphics type='vnc' port='-1' autoport='yes' passwd='s3cretpw'/>"
    dom = define(lab, "secret", HM, devices_extra=vnc)
    try:
        assert "s3cretpw" in dom.XMLDesc(SECURE_INACTIVE)
        cli("apply", "--yes", dom.name(), check=0)
        xml = dom.XMLDesc(SECURE_INACTIVE)
        assert "<pvspinlock state='on'/>" in xml and "passwd='s3cretpw'" in xml
    finally:
        dom.undefine()


def test_apply_never_touches_the_running_guest(lab):
    dom = define(lab, "running", HM)
    try:
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert qom_unhalt(dom) is False
        r = cli("apply", "--yes", dom.name(), check=0)
        assert "next cold boot" in r.stdout
        assert qom_unhalt(dom) is False  # the running QEMU is as it was
        assert "pvspinlock" not in dom.XMLDesc(0)  # live definition untouched
        dom.destroy()
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        assert qom_unhalt(dom) is True
        dom.destroy()
    finally:
        dom.undefine()


def test_transient_domains_are_skipped_with_a_reason(lab):
    name = harness.unique_name("transient")
    xml = harness.startable(harness.boot_sector_guest(name, "pc-q35-7.2", HM)).decode()
    dom = lab.createXML(xml, libvirt.VIR_DOMAIN_START_PAUSED)
    try:
        r = cli("apply", "--yes", name, check=0)
        assert f"{name}: skipped: transient domain" in r.stdout
        r = cli("audit", name, check=0)  # nothing persistent to fix: not counted as work
        assert "transient domain" in r.stdout
    finally:
        dom.destroy()


def test_a_definition_changed_meanwhile_is_not_overwritten(lab):
    dom = define(lab, "race", HM)
    try:
        def someone_else_edits(_prompt):
            xml = dom.XMLDesc(SECURE_INACTIVE).replace("</name>", "</name><description>edited</description>", 1)
            lab.defineXML(xml)
            return True

        res = apply(harness.URI, Selection((dom.name(),)), ApplyOptions(Config(), confirm=someone_else_edits))
        assert res.tally == {"skipped": 1}
        xml = dom.XMLDesc(SECURE_INACTIVE)
        assert "<description>edited</description>" in xml and "pvspinlock" not in xml
    finally:
        dom.undefine()


def test_fleet_audit_and_apply_over_two_connections_and_one_unreachable(lab):
    dom = define(lab, "fleet", HM)
    running = define(lab, "fleet-run", HP)
    try:
        running.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        # An unreachable host outranks domains that need work (exit 3, not 1): see the exit status table.
        r = cli("audit", "--connect", harness.URI, "--connect", TCP, "--connect", DOWN, "--observe",
                "--format", "json", dom.name(), running.name(), check=3)
        records = [json.loads(line) for line in r.stdout.splitlines()]
        by = {(x["host"], x["domain"]): x for x in records if x["record"] == "domain"}
        for uri in (harness.URI, TCP):
            assert by[(uri, dom.name())]["needs_fix"] is True
            assert by[(uri, dom.name())]["pv_unhalt"] == "off"
            run = by[(uri, running.name())]
            assert run["needs_fix"] is False and run["live_pv_unhalt"] == "on" and run["observed_pv_unhalt"] == "on"
        hosts = {x["host"]: x for x in records if x["record"] == "host"}
        assert hosts[DOWN]["condition"] == "unreachable" and hosts[DOWN]["error"]
        assert records[-1]["record"] == "summary" and records[-1]["unreachable"] == [DOWN]
        assert DOWN in r.stderr and "unreachable" in r.stderr
        r = cli("apply", "--yes", "--connect", TCP, "--connect", DOWN, "--connect", harness.URI, dom.name(), check=3)
        assert "changed 1," in r.stderr and f"unreachable: {DOWN}" in r.stderr
        assert "<pvspinlock state='on'/>" in dom.XMLDesc(SECURE_INACTIVE)
        cli("audit", "--connect", TCP, dom.name(), check=0)
    finally:
        running.destroy()
        running.undefine()
        dom.undefine()


def test_a_refused_define_and_an_unknown_name_are_per_domain_and_the_others_carry_on(lab, tmp_path):
    """The emulator of one domain disappeared, so libvirt refuses to define it again; another name is no
    domain at all. apply fixes the rest, reports each, exits 3; audit reports the unknown name, exits 2."""
    emulator = harness.IMAGES / "qemu-that-goes-away"
    emulator.parent.mkdir(parents=True, exist_ok=True)
    emulator.unlink(missing_ok=True)
    emulator.symlink_to("/usr/bin/qemu-system-x86_64")
    name = harness.unique_name("refused")
    xml = harness.startable(harness.boot_sector_guest(name, "pc-q35-7.2", HM)).replace(
        b"/usr/bin/qemu-system-x86_64", str(emulator).encode())
    refused = lab.defineXML(xml.decode())
    fine = define(lab, "fine", HM)
    emulator.unlink()
    try:
        r = cli("apply", "--yes", refused.name(), "vxc-lab-no-such-domain", fine.name(), check=3)
        assert f"{refused.name()}: define failed, definition unchanged" in r.stderr
        assert "changed 1," in r.stderr and "unknown 1," in r.stderr and "failed 1" in r.stderr
        assert "<pvspinlock state='on'/>" in fine.XMLDesc(SECURE_INACTIVE)
        assert "pvspinlock" not in refused.XMLDesc(SECURE_INACTIVE)
        r = cli("audit", "--format", "json", "vxc-lab-no-such-domain", fine.name(), check=2)
        rows = {x["domain"]: x for x in map(json.loads, r.stdout.splitlines()) if x["record"] == "domain"}
        assert rows["vxc-lab-no-such-domain"]["error"] and rows[fine.name()]["pv_unhalt"] == "on"
        assert "1 domain(s) not audited" in r.stderr
        prom = tmp_path / "virtxml-cpu.prom"
        cli("audit", "--format", "prometheus", "-o", str(prom), refused.name(), fine.name(), check=1)
        from prometheus_client.parser import text_string_to_metric_families

        samples = {(x.name, x.labels.get("domain"), x.labels.get("view")): x.value
                   for f in text_string_to_metric_families(prom.read_text()) for x in f.samples}
        assert samples[("virtxml_cpu_domain_pv_unhalt", fine.name(), "definition")] == 1
        assert samples[("virtxml_cpu_domain_needs_fix", refused.name(), None)] == 1
        assert samples[("virtxml_cpu_host_reachable", None, None)] == 1
    finally:
        refused.undefine()
        fine.undefine()


def _wait_for(predicate, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def test_watch_fixes_new_definitions_does_not_loop_and_survives_a_restart(lab_up, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hook]\nspool = "{tmp_path / "spool"}"\nsyslog_socket = "{tmp_path / "no-syslog"}"\n')
    conn = harness.connect()
    queued = define(conn, "watch-queued", HM)  # defined before the watcher runs, queued by the hook
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / f"{queued.UUIDString()}.json").write_text(json.dumps({"uuid": queued.UUIDString(),
                                                                    "name": queued.name()}))
    poisoned = {"00000000-0000-0000-0000-000000000000.json", "0.json"}  # sorted first: must not stop the rest
    (spool / "00000000-0000-0000-0000-000000000000.json").write_text(
        '{"uuid": "00000000-0000-0000-0000-000000000000", "attempts": 1e400}')
    os.mkfifo(spool / "0.json")
    log = open(tmp_path / "watch.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "virtxml_cpu", "watch", "--config", str(cfg)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT)
    names = [queued.name()]
    try:
        assert _wait_for(lambda: "watching" in (tmp_path / "watch.log").read_text(), 20)
        assert _wait_for(lambda: "pvspinlock" in queued.XMLDesc(SECURE_INACTIVE), 10), "queue not applied"
        assert _wait_for(lambda: {p.name for p in spool.iterdir()} == poisoned, 5)
        dom = define(conn, "watch1", HM)
        names.append(dom.name())
        t = time.monotonic()
        assert _wait_for(lambda: "pvspinlock" in dom.XMLDesc(SECURE_INACTIVE), 10), "watch did not fix it"
        print(f"\nwatch fixed a new definition in {time.monotonic() - t:.1f}s")
        time.sleep(3)
        text = (tmp_path / "watch.log").read_text()
        assert text.count(f"{dom.name()}: added kvm-pv-unhalt") == 1, text  # its own update did not loop
        conn.close()
        harness.restart_libvirtd()
        conn = harness.connect()
        assert _wait_for(lambda: (tmp_path / "watch.log").read_text().count("watching") >= 2, 40), \
            (tmp_path / "watch.log").read_text()
        dom2 = define(conn, "watch2", CUSTOM)
        names.append(dom2.name())
        assert _wait_for(lambda: "pvspinlock" in dom2.XMLDesc(SECURE_INACTIVE), 10), "not fixed after restart"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        harness.stop_watch(proc, conn, names, log)


def _clients() -> set[str]:
    out = subprocess.run(["virt-admin", "-c", "libvirtd:///system", "srv-clients-list", "libvirtd"],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines()[2:] if line.strip()}


def test_watch_keeps_one_connection_and_backs_off_a_queued_fix_it_cannot_apply(lab_up, tmp_path):
    """A queued fix for a transient domain cannot be applied: watch records why, waits a minute before the
    next try instead of every 10 s, and does all this over its one connection."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hook]\nspool = "{tmp_path / "spool"}"\nsyslog_socket = "{tmp_path / "no-syslog"}"\n')
    conn = harness.connect()
    name = harness.unique_name("transient")
    transient = conn.createXML(harness.startable(harness.boot_sector_guest(name, "pc-q35-7.2", HM)).decode(),
                               libvirt.VIR_DOMAIN_START_PAUSED)
    (tmp_path / "spool").mkdir()
    entry = tmp_path / "spool" / f"{transient.UUIDString()}.json"
    entry.write_text(json.dumps({"uuid": transient.UUIDString(), "name": name}))
    before = _clients()
    log = open(tmp_path / "watch.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "virtxml_cpu", "watch", "--config", str(cfg)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        assert _wait_for(lambda: "queued fix kept" in (tmp_path / "watch.log").read_text(), 20)
        seen = set()
        deadline = time.monotonic() + 23  # two queue passes (every 10 s)
        while time.monotonic() < deadline:
            seen |= _clients() - before
            time.sleep(0.5)
        text = (tmp_path / "watch.log").read_text()
        data = json.loads(entry.read_text())
        assert data["attempts"] == 1 and data["next_try"] > time.time() + 30
        assert data["last_outcome"] == {"host": "qemu:///system", "domain": name, "kind": "skipped",
                                        "reason": "transient domain (no persistent definition to fix)"}
        assert text.count("queued fix kept") == 1, text  # not retried at the next passes
        assert len(seen) == 1, (seen, text)  # one connection all along (the old code opened one per pass)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        transient.destroy()
        conn.close()
        log.close()


REDEFINER = r"""
import json, re, sys, time
sys.path.insert(0, sys.argv[1])
import libvirt
from tests.lab import harness
conn = harness.connect()
doms = [conn.lookupByName(n) for n in sys.argv[3:]]
flags = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
last, n, overwritten = {}, 0, 0
stop = sys.argv[2]
import os
while not os.path.exists(stop):
    for d in doms:
        n += 1
        kib = 32768 + 1024 * n
        xml = d.XMLDesc(flags)
        seen = int(re.search(r"<memory unit='KiB'>(\d+)<", xml).group(1))
        overwritten += d.name() in last and seen != last[d.name()]  # someone defined over our last write
        xml = re.sub(r"<(memory|currentMemory) unit='KiB'>\d+<", lambda m: f"<{m.group(1)} unit='KiB'>{kib}<", xml)
        conn.defineXML(xml)
        last[d.name()] = kib
print(json.dumps({"last": last, "defines": n, "overwritten": overwritten}))
"""


def _memory(dom) -> int:
    import re

    return int(re.search(r"<memory unit='KiB'>(\d+)<", dom.XMLDesc(SECURE_INACTIVE)).group(1))


def test_apply_never_writes_over_a_concurrent_redefinition(lab_up, tmp_path):
    """Another process redefines 10 domains with a new <memory> in a loop while apply runs on 20: no domain
    ends with an older memory than the redefiner last wrote, and each raced one is fixed or reported
    "changed meanwhile". How often the remaining window (docs/live.md, "Apply") was hit is printed, not asserted."""
    lab = harness.connect()  # its own: an earlier test of this module restarts libvirtd
    doms = [define(lab, f"redef{i}", HM) for i in range(20)]
    raced, calm = doms[:10], doms[10:]
    stop = tmp_path / "stop"
    redefiner = subprocess.Popen([sys.executable, "-c", REDEFINER, str(ROOT), str(stop), *[d.name() for d in raced]],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        time.sleep(1)
        t = time.monotonic()
        r = cli("apply", "--yes", *[d.name() for d in doms])
        took = time.monotonic() - t
        stop.touch()
        report = json.loads(redefiner.communicate(timeout=60)[0])
        last = report["last"]
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
        older = {d.name(): (_memory(d), last[d.name()]) for d in raced if _memory(d) != last[d.name()]}
        assert not older, older  # nobody's change was written over
        meanwhile = [line for line in r.stdout.splitlines() if ": skipped: changed meanwhile: " in line]
        for d in calm:
            assert f"{d.name()}: added kvm-pv-unhalt" in r.stdout and "pvspinlock" in d.XMLDesc(SECURE_INACTIVE)
        for d in raced:  # each raced domain was either fixed or reported, never silently lost
            fixed = f"{d.name()}: added kvm-pv-unhalt" in r.stdout
            assert fixed or any(d.name() in line for line in meanwhile), (d.name(), r.stdout, r.stderr)
        rtt = []
        for _ in range(50):  # the window that remains is about one round trip (compare's reply -> define)
            t0 = time.perf_counter()
            calm[0].XMLDesc(SECURE_INACTIVE)
            rtt.append(time.perf_counter() - t0)
        print(f"\nconcurrent redefiner: apply on 20 took {took:.1f}s; {len(meanwhile)} reported changed meanwhile; "
              f"redefiner made {report['defines']} defines, {report['overwritten']} found written over by apply; "
              f"last values kept; XMLDesc round trip median {sorted(rtt)[25] * 1000:.2f} ms")
    finally:
        stop.touch()
        if redefiner.poll() is None:
            redefiner.kill()
        for d in doms:
            d.undefine()
        lab.close()


def test_apply_pending_skips_poisoned_entries_and_dry_run_changes_nothing(lab_up, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hook]\nspool = "{spool}"\n')
    lab = harness.connect()
    dom = define(lab, "pending", HM)
    uuid = dom.UUIDString()
    gone = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
    (spool / "00000000-0000-0000-0000-000000000000.json").write_text('{"uuid": "00000000-0000-0000-0000-000000000000", '
                                                                      '"attempts": 1e400}')
    subprocess.run(["mkfifo", str(spool / "x.json")], check=True)
    (spool / f"{gone}.json").write_text(json.dumps({"uuid": gone, "name": "gone"}))
    (spool / f"{uuid}.json").write_text(json.dumps({"uuid": uuid, "name": dom.name()}))
    before = {p.name: (p.read_bytes() if p.is_file() else None) for p in spool.iterdir()}
    try:
        for dry in (["--dry-run"], ["--diff"]):
            r = cli("apply", "--pending", *dry, "--config", str(cfg))
            assert "Traceback" not in r.stderr and f"{dom.name()}: would add" in r.stdout, r
            assert "gone: no such domain any more; queued fix would be dropped" in r.stdout
            assert {p.name: (p.read_bytes() if p.is_file() else None) for p in spool.iterdir()} == before
        assert "pvspinlock" not in dom.XMLDesc(SECURE_INACTIVE)
        r = cli("apply", "--pending", "--yes", "--config", str(cfg))
        assert r.returncode == 0 and "Traceback" not in r.stderr, r
        assert f"{dom.name()}: added kvm-pv-unhalt" in r.stdout and "gone: no such domain any more" in r.stdout
        assert "attempts must be an integer" in r.stderr and "FIFO" in r.stderr
        assert sorted(p.name for p in spool.iterdir()) == ["00000000-0000-0000-0000-000000000000.json", "x.json"]
    finally:
        dom.undefine()
        lab.close()

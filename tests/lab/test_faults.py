"""Fleet verbs under faults, against the real libvirtd, on loopback only: a host that accepts and stays
silent (a listener this test makes), a host that refuses, and the lab daemon stopped with SIGSTOP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
TCP = "qemu+tcp://127.0.0.1/system"
SECURE_INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE


sys.path.insert(0, str(ROOT / "bench"))
import fleet_faults  # noqa: E402  (its loopback listeners: a silent host, a refusing port)


@pytest.fixture
def silent():
    """A loopback listener that accepts connections and never says a word (a wedged host)."""
    port, sock = fleet_faults.silent_listener()
    yield f"qemu+tcp://127.0.0.1:{port}/system"
    sock.close()


@pytest.fixture
def refusing():
    return f"qemu+tcp://127.0.0.1:{fleet_faults.refused_port()}/system"


def define(conn, stem):
    name = harness.unique_name(stem)
    return conn.defineXML(harness.startable(harness.boot_sector_guest(name, "pc-q35-7.2",
                                                                     "<cpu mode='host-model'/>")).decode())


def timed_lines(cmd):
    """Run a command; (seconds since start, line) for each stdout line as it arrives, exit code, stderr."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [(time.monotonic() - t0, line) for line in p.stdout]
    err = p.stderr.read()
    return lines, p.wait(timeout=120), err, time.monotonic() - t0


def test_audit_reports_healthy_hosts_at_once_and_a_silent_host_as_timed_out(lab, silent, refusing):
    dom = define(lab, "faults-audit")
    try:
        cmd = [sys.executable, "-m", "virtxml_cpu", "audit", "--format", "json", "--timeout", "3",
               "--connect", silent, "--connect", refusing, "--connect", TCP]
        lines, code, err, took = timed_lines(cmd)
        rows = [(t, json.loads(line)) for t, line in lines]
        assert code == 3, err  # environment problems outrank "a domain needs the fix"
        healthy = [(t, r) for t, r in rows
                   if r["record"] == "domain" and r["host"] == TCP and r["domain"] == dom.name()]
        assert healthy and healthy[0][1]["needs_fix"] is True
        assert healthy[0][0] < 2.5, "the healthy host's results waited for the silent one"
        by_host = {r["host"]: r for _t, r in rows if r["record"] == "host"}
        assert by_host[silent]["condition"] == "timed_out" and by_host[refusing]["condition"] == "unreachable"
        summary = rows[-1][1]
        assert summary["record"] == "summary" and summary["version"] == 2
        assert summary["timed_out"] == [silent] and summary["unreachable"] == [refusing]
        assert summary["needs_fix"] >= 1 and summary["hosts_ok"] == 1
        assert 3 <= took < 15, took
        assert "timed out" in err and "unreachable" in err
        print(f"\naudit with a silent and a refusing host: {took:.1f}s (timeout 3s); healthy rows after "
              f"{healthy[0][0]:.2f}s")
    finally:
        dom.undefine()


def test_table_rows_stream_too(lab, silent):
    dom = define(lab, "faults-table")
    try:
        lines, code, err, took = timed_lines([sys.executable, "-m", "virtxml_cpu", "audit", "--timeout", "3",
                                              "--connect", silent, "--connect", TCP])
        assert code == 3
        mine = [t for t, line in lines if dom.name() in line]
        assert mine and mine[0] < 2.5 and any("TIMED OUT" in line for _t, line in lines)
    finally:
        dom.undefine()


def test_apply_finishes_with_a_silent_host_and_does_the_others(lab, silent):
    dom = define(lab, "faults-apply")
    try:
        lines, code, err, took = timed_lines([sys.executable, "-m", "virtxml_cpu", "apply", "--yes", "--timeout", "3",
                                              "--connect", silent, "--connect", TCP, dom.name()])
        assert code == 3 and took < 15, (took, err)
        assert any(f"{dom.name()}: added kvm-pv-unhalt" in line for _t, line in lines)
        assert "timed out" in err and "changed 1," in err
        assert "<pvspinlock state='on'/>" in dom.XMLDesc(SECURE_INACTIVE)
    finally:
        dom.undefine()


def test_watch_notices_a_stopped_libvirtd_and_fixes_what_was_defined_around_it(lab_up, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hook]\nspool = "{tmp_path / "spool"}"\nsyslog_socket = "{tmp_path / "no-syslog"}"\n')
    log = open(tmp_path / "watch.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "virtxml_cpu", "watch", "--timeout", "4", "--config", str(cfg)],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    conn = harness.connect()
    names = []
    pid = harness.libvirtd_pid()

    def logged():
        return (tmp_path / "watch.log").read_text()

    def wait_for(pred, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return True
            time.sleep(0.2)
        return False

    try:
        assert wait_for(lambda: "watching" in logged(), 20), logged()
        os.kill(pid, signal.SIGSTOP)
        try:
            assert wait_for(lambda: "lost the connection" in logged(), 20), logged()  # keepalive, ~4 s
            time.sleep(5)  # reconnect attempts time out while it is stopped
        finally:
            os.kill(pid, signal.SIGCONT)
        dom = define(conn, "around-stall")  # defined as it wakes up, before watch is back
        names.append(dom.name())
        assert wait_for(lambda: logged().count("watching") >= 2, 40), logged()
        assert wait_for(lambda: "pvspinlock" in dom.XMLDesc(SECURE_INACTIVE), 20), logged()
        later = define(conn, "after-stall")  # and events work again
        names.append(later.name())
        assert wait_for(lambda: "pvspinlock" in later.XMLDesc(SECURE_INACTIVE), 20), logged()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        print(f"\nwatch through a SIGSTOP of libvirtd:\n{logged()}")
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        harness.stop_watch(proc, conn, names, log)


def test_a_fleet_with_wedged_hosts_costs_at_most_the_timeout_and_reports_every_domain(lab):
    """bench/fleet_faults.py in small: 10 hosts (the lab daemon over loopback TCP) x its domains, then
    the same with 2 refusing and 2 silent hosts added, --timeout 3."""
    doms = [define(lab, "fleet-scale") for _ in range(20)]
    listeners = []
    try:
        per_host = len(lab.listAllDomains())
        healthy = [f"{TCP}?host={n}" for n in range(10)]
        wedged = [f"qemu+tcp://127.0.0.1:{fleet_faults.refused_port()}/system" for _ in range(2)]
        for _ in range(2):
            port, sock = fleet_faults.silent_listener()
            listeners.append(sock)
            wedged.append(f"qemu+tcp://127.0.0.1:{port}/system")
        h_time, h_rows, _ = fleet_faults.run(healthy, 3)
        f_time, f_rows, summary = fleet_faults.run(healthy + wedged, 3)
        assert h_rows == f_rows == 10 * per_host
        assert len(summary["timed_out"]) == 2 and len(summary["unreachable"]) == 2
        assert f_time <= h_time + 3 + 2.0, (h_time, f_time)  # 2 s of slack for a loaded 2-core machine
        print(f"\nfleet: {10 * per_host} domains on 10 hosts in {h_time:.2f}s; with 2 refusing + 2 silent "
              f"hosts (timeout 3s) {f_time:.2f}s")
    finally:
        for s in listeners:
            s.close()
        for d in doms:
            d.undefine()

"""`audit --follow --format json` (live/follow.py) against libvirt's test driver: the snapshot, then a
domain's row again within a moment of it being defined, started, redefined or undefined through another
connection, and a host it cannot reach said as a `connection` record. `test:///default` is one driver
state per process, shared by every connection to it, and fires lifecycle events."""

from __future__ import annotations

import threading
import time

import pytest

from virtxml_cpu import cli
from virtxml_cpu.core.config import Config
from virtxml_cpu.errors import AccessDenied, EnvironmentProblem, HostTimeout
from virtxml_cpu.live.records import SCHEMA_VERSION

libvirt = pytest.importorskip("libvirt")

from virtxml_cpu.live.audit import AuditOptions  # noqa: E402
from virtxml_cpu.live.follow import condition, follow  # noqa: E402

URI = "test:///default"
NOVA = ("<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
        "<nova:name>x</nova:name></nova:instance></metadata>")


def xml(name: str, features: str = "", metadata: str = "", uuid: str = "") -> str:
    return (f"<domain type='kvm'><name>{name}</name>{f'<uuid>{uuid}</uuid>' if uuid else ''}{metadata}<memory>8192</memory><vcpu>2</vcpu>"
            f"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>{features}"
            "<cpu mode='host-model'/></domain>")


class Following:
    def __init__(self, uri: str = URI, timeout: float = 5.0):
        self.records: list[dict] = []
        self.stop = threading.Event()
        opts = AuditOptions(Config(), details=True, timeout=timeout, host_timeout=timeout)
        self.thread = threading.Thread(target=follow, args=(uri, opts, self.records.append, self.stop),
                                       kwargs={"hook": lambda: {"installed": False}}, daemon=True)
        self.thread.start()

    def wait(self, cond, seconds: float = 2.0, what: str = "") -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for r in list(self.records):
                if cond(r):
                    return r
            time.sleep(0.02)
        raise AssertionError(f"no {what} within {seconds} s: {self.records[-5:]}")

    def close(self):
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def conn():
    c = libvirt.open(URI)
    yield c
    for name in ("f-web", "f-nova"):
        try:
            d = c.lookupByName(name)
            if d.isActive():
                d.destroy()
            d.undefine()
        except libvirt.libvirtError:
            pass
    c.close()


def test_snapshot_then_each_change_as_an_event_within_2_s(conn):
    conn.defineXML(xml("f-nova", metadata=NOVA))
    f = Following()
    try:
        hello = f.wait(lambda r: True, what="hello")
        assert hello == {"record": "hello", "version": SCHEMA_VERSION, "host": URI}
        f.wait(lambda r: r["record"] == "hook", what="the snapshot and the hook record")
        snap = {r["domain"]: r for r in f.records if r["record"] == "domain"}
        assert [r["record"] for r in f.records[-3:]] == ["host", "summary", "hook"]
        assert f.records[-1]["status"] == {"installed": False}
        nova = snap["f-nova"]
        assert nova["needs_fix"] and not nova["fixable"] and nova["managed_by"] == "OpenStack Nova"
        assert nova["details"]["cpu_mode"] == "host-model" and nova["details"]["machine"] == "pc-q35-7.2"
        assert nova["details"]["features"]["kvm-pv-unhalt"]["state"] == nova["pv_unhalt"]

        def event(name, what):
            return lambda r: r["record"] == "event" and r["event"] == what and (r["row"] or {}).get("domain") == name

        t0 = time.monotonic()
        conn.defineXML(xml("f-web"))
        row = f.wait(event("f-web", "defined"), what="the defined event")["row"]
        assert time.monotonic() - t0 < 2
        assert row["needs_fix"] and row["fixable"] and row["state"] == "shut off" and row["details"]
        conn.lookupByName("f-web").create()
        assert f.wait(event("f-web", "started"), what="the started event")["row"]["state"] == "running"
        n = len(f.records)
        conn.defineXML(xml("f-web", features="<features><pvspinlock state='on'/></features>",
                           uuid=conn.lookupByName("f-web").UUIDString()))  # fixed elsewhere
        fixed = f.wait(lambda r: r in f.records[n:] and event("f-web", "defined")(r), what="the redefinition")["row"]
        assert not fixed["needs_fix"] and not fixed["fixable"] and fixed["pv_unhalt"] == "on"
        uuid = fixed["uuid"]
        dom = conn.lookupByName("f-web")
        dom.destroy()
        dom.undefine()
        gone = f.wait(lambda r: r["record"] == "event" and r["uuid"] == uuid and r["row"] is None, what="the removal")
        assert gone["event"] in ("undefined", "stopped")
    finally:
        f.close()


def test_an_unreachable_host_is_a_connection_record_and_it_keeps_trying(tmp_path):
    uri = f"qemu:///system?socket={tmp_path}/none"
    f = Following(uri, timeout=2)
    try:
        r = f.wait(lambda r: r["record"] == "connection", what="the connection record")
        assert r["condition"] == "unreachable" and r["error"].startswith(f"cannot connect to {uri}")
        time.sleep(1.2)
        assert f.thread.is_alive()
        assert sum(r["record"] == "connection" for r in f.records) == 1  # said once, not at each retry
    finally:
        f.close()


def test_condition_words():
    assert condition(AccessDenied("x")) == "denied"
    assert condition(HostTimeout("x")) == "timed_out"
    assert condition(EnvironmentProblem("x")) == "unreachable"


def test_follow_takes_json_and_one_host(capsys):
    for argv in (["audit", "--follow"], ["audit", "--follow", "--format", "json", "--connect", URI, "--connect", URI],
                 ["audit", "--follow", "--format", "json", "--", "web"]):
        assert cli.main(argv) == 2
        assert "audit --follow takes --format json" in capsys.readouterr().err


def test_details_on_plain_audit(capsys):
    import json
    assert cli.main(["audit", "--connect", URI, "--no-host-probe", "--format", "json", "--details"]) in (0, 1)
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    doms = [r for r in recs if r["record"] == "domain"]
    assert doms and all(r["details"]["features"] for r in doms) and recs[-1]["version"] == SCHEMA_VERSION
    assert cli.main(["audit", "--connect", URI, "--no-host-probe", "--format", "json"]) in (0, 1)
    assert all(json.loads(x).get("details", None) is None for x in capsys.readouterr().out.splitlines())

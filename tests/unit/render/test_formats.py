"""One renderer per audit output format, over typed records: the stream on stdout and the `-o` file hold
the same bytes for every format, hosts are streamed as they finish, the JSON lines follow the schema
docs/live.md documents, and the Prometheus exposition parses. First over records built here (through the real
CLI shell, with the libvirt side replaced by those records), then through the CLI against libvirt's
in-process test driver (test:///default)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from virtxml_cpu.live import audit
from virtxml_cpu import cli
from virtxml_cpu.host import connection
from virtxml_cpu.hook import spool
from virtxml_cpu.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_WORK_FOUND
from virtxml_cpu.live.records import (
    SCHEMA_VERSION, TIMED_OUT, UNREACHABLE, ApplyOutcome, AuditRow, HostResult, RowDecision, summarize)
from virtxml_cpu.render.formats import RENDERERS, emit
from virtxml_cpu.render import applylines, jsonlines
from virtxml_cpu.render.table import summary_line

from tests.support import ROOT
from tests.support.live import watching

FORMATS = tuple(RENDERERS)
NOW = 1_700_000_000.25
FIX = RowDecision("inject", "policy-compat", "kvm-pv-unhalt is off: adding <features><pvspinlock state='on'/>",
                  ("1 vCPU: Linux guests do not use PV spinlocks on a single CPU",))
KEEP = RowDecision("keep", "already-on", "kvm-pv-unhalt is already on")
A, B = "qemu+ssh://kvm1/system", "qemu+ssh://kvm2/system"


def hosts() -> list[HostResult]:
    return [
        HostResult(A, (
            AuditRow(A, "web", "u-web", "shut off", True, "off", decision=FIX, needs_fix=True, fixable=True),
            AuditRow(A, "db", "u-db", "running", True, "on", "on", "on", decision=KEEP),
            AuditRow(A, 'odd "name"', "u-odd", "running", False, "off", "off", decision=FIX),
            AuditRow(A, "nova-1", "u-nova", "shut off", True, "off", managed_by="OpenStack Nova", decision=FIX,
                     needs_fix=True, stack="OpenStack Nova"),
            AuditRow(A, "ghost", error="Domain not found"),
        ), seconds=0.125),
        HostResult(B, error="cannot connect to qemu+ssh://kvm2/system: Connection refused", condition=UNREACHABLE),
        HostResult("qemu+tcp://kvm3/system", error="qemu+tcp://kvm3/system: not done within 300s (timed out)",
                   condition=TIMED_OUT, seconds=300.0),
    ]


def rendered(fmt: str, results: list[HostResult]) -> str:
    chunks: list[str] = []
    emit(RENDERERS[fmt], results, chunks.append, lambda: NOW)
    return "".join(chunks)


@pytest.fixture
def fake_audit(monkeypatch, capsys):
    """The CLI shell as it is, with the libvirt side replaced by `hosts()`. Returns what stdout held each
    time a host after the first was handed out (read off, so the test sees the rest afterwards)."""
    seen_before: list[str] = []

    def stream(uris, opts):
        for i, h in enumerate(hosts()):
            if i:
                seen_before.append(capsys.readouterr().out)
            yield h

    monkeypatch.setattr(audit, "audit_stream", stream)
    monkeypatch.setattr(connection, "libvirt_module", lambda: None)  # the binding is part of the libvirt side
    monkeypatch.setattr(time, "time", lambda: NOW)
    return seen_before


@pytest.mark.parametrize("fmt", FORMATS)
def test_stdout_and_the_output_file_hold_the_same_bytes(fmt, fake_audit, capsys, tmp_path):
    assert cli.main(["audit", "--format", fmt]) == EXIT_ENVIRONMENT
    streamed = "".join(fake_audit) + capsys.readouterr().out
    out = tmp_path / f"audit.{fmt}"
    assert cli.main(["audit", "--format", fmt, "-o", str(out)]) == EXIT_ENVIRONMENT
    assert capsys.readouterr().out == "" and fake_audit[2:] == ["", ""]  # -o: nothing on stdout
    assert streamed.encode() == out.read_bytes() == rendered(fmt, hosts()).encode()
    assert streamed.endswith("\n") and "needs_work" not in streamed and "need_fix" not in streamed


@pytest.mark.parametrize("fmt", ("table", "json"))
def test_each_host_is_on_stdout_before_the_next_is_audited(fmt, fake_audit, capsys):
    cli.main(["audit", "--format", fmt])
    first = fake_audit[0]
    assert "web" in first and "ghost" in first and B not in first


def test_prometheus_on_stdout_is_the_exposition(fake_audit, capsys):
    cli.main(["audit", "--format", "prometheus"])
    text = "".join(fake_audit) + capsys.readouterr().out
    assert fake_audit == ["", ""]  # families must stay together: written at the end
    samples = {(x.name, x.labels.get("domain"), x.labels.get("host")): x.value
               for f in text_string_to_metric_families(text) for x in f.samples}
    assert samples[("virtxml_cpu_domain_needs_fix", "web", A)] == 1
    assert samples[("virtxml_cpu_domain_needs_fix", "db", A)] == 0
    assert samples[("virtxml_cpu_host_domains_needs_fix", None, A)] == 2
    assert samples[("virtxml_cpu_host_reachable", None, B)] == 0
    assert samples[("virtxml_cpu_audit_timestamp_seconds", None, None)] == NOW


def _documented_fields() -> dict[str, list[str]]:
    """The documented JSON schema: for each record kind, the fields of the first table under its heading in
    docs/live.md."""
    out = {}
    text = (ROOT / "docs" / "live.md").read_text()
    for kind in ("domain", "host", "summary"):
        m = re.search(rf'^#{{3,4}} `"record": "{kind}"`\n(?:(?:[^|\n].*)?\n)*((?:\|.*\n)+)', text, re.M)
        assert m, f"docs/live.md documents no {kind} record"
        out[kind] = re.findall(r"^\| `(\w+)` \|", m.group(1), re.M)
    return out


def test_json_lines_follow_the_documented_schema():
    records = [json.loads(line) for line in rendered("json", hosts()).splitlines()]
    assert [r["record"] for r in records] == ["domain"] * 5 + ["host"] * 3 + ["summary"]
    documented = _documented_fields()
    for r in records:
        assert list(r) == documented[r["record"]], r["record"]
    web, ghost = records[0], records[4]
    assert web["needs_fix"] is True and web["decision"]["rule"] == "policy-compat" and web["error"] is None
    assert ghost["error"] == "Domain not found" and ghost["decision"] is None and ghost["needs_fix"] is False
    assert records[5] == {"record": "host", "host": A, "condition": "ok", "error": None, "domains": 4,
                          "needs_fix": 2, "fixable": 1, "domain_errors": 1}
    assert [r["condition"] for r in records[6:8]] == [UNREACHABLE, TIMED_OUT]
    assert records[-1] == {"record": "summary", "version": SCHEMA_VERSION, "hosts": 3, "hosts_ok": 1,
                           "unreachable": [B], "timed_out": ["qemu+tcp://kvm3/system"], "domains": 4,
                           "needs_fix": 2, "have_pv_unhalt": 1, "domain_errors": 1, "machine_deprecated": 0,
                           "machine_not_offered": 0, "fixable": 1, "managed": 1}
    nova = records[3]
    assert (web["stack"], web["fixable"], nova["fixable"], nova["needs_fix"]) == (None, True, False, True)
    assert nova["stack"]["name"] == "OpenStack Nova" and nova["stack"]["edits_last"] is False
    assert "cpu_mode = host-passthrough" in nova["stack"]["knob"] and "migration" in nova["stack"]["cost"]
    assert set(nova["stack"]) == {"name", "edits_last", "knob", "knob_since", "default", "cost", "source"}


def test_json_does_not_depend_on_timing():
    slower = [HostResult(h.uri, h.rows, h.error, h.condition, h.seconds * 7 + 1) for h in hosts()]
    assert rendered("json", slower) == rendered("json", hosts())


def test_table_lines():
    lines = rendered("table", hosts()).splitlines()
    assert lines[0].split() == ["HOST", "DOMAIN", "STATE", "PV-UNHALT", "LIVE", "QEMU", "NEEDS-FIX", "REASON"]
    web = next(line for line in lines if " web " in line).split()
    assert web[:7] == [A, "web", "shut", "off", "off", "-", "-"] and web[7] == "yes"
    assert any(B in line and "UNREACHABLE" in line for line in lines)
    assert any("TIMED OUT" in line for line in lines)
    assert any("ghost" in line and "ERROR" in line and "Domain not found" in line for line in lines)


def test_summary_line_and_record_count_the_same():
    s = summarize(hosts())
    line = summary_line(hosts())
    assert line.startswith(f"{s.domains} domains on {s.hosts_ok} host(s): {s.needs_fix} need kvm-pv-unhalt, "
                           f"{s.have_pv_unhalt} have it")
    assert f"unreachable: {B}" in line and "timed out: qemu+tcp://kvm3/system" in line
    assert jsonlines.summary_record(hosts())["needs_fix"] == s.needs_fix == 2


def test_records_refuse_what_cannot_be():
    with pytest.raises(ValueError):
        HostResult(A, condition="timed out")  # one spelling: timed_out
    with pytest.raises(ValueError):
        HostResult(A, error="down")  # an error makes the host unreachable or timed out, not ok
    with pytest.raises(ValueError):
        ApplyOutcome(A, "web", "would change")
    assert ApplyOutcome(A, "web", "skipped", "transient domain").kind == "skipped"


# Through the CLI against libvirt's test driver: in-process, no daemon; all connections of one process
# to test:///default share its state while one is open.

def _xml(name: str, cpu: str) -> str:
    return (f"<domain type='kvm'><name>{name}</name><memory>65536</memory>"
            f"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>{cpu}</domain>")


@pytest.fixture
def test_driver():
    libvirt = pytest.importorskip("libvirt", reason="libvirt-python is not installed: the audit through "
                                                    "libvirt's test driver is SKIPPED")
    conn = libvirt.open("test:///default")
    doms = [conn.defineXML(_xml("vxc-render-fix", "<cpu mode='host-model'/>")),
            conn.defineXML(_xml("vxc-render-has", "<cpu mode='host-passthrough'/>")),
            conn.defineXML(_xml("vxc-render-run", "<cpu mode='custom'><model>qemu64</model></cpu>"))]
    doms[2].create()
    transient = conn.createXML(_xml("vxc-render-transient", "<cpu mode='host-model'/>"), 0)
    yield conn
    transient.destroy()
    doms[2].destroy()
    for d in doms:
        d.undefine()
    conn.close()


TIMED = re.compile(r"^virtxml_cpu_(host_audit_seconds|audit_timestamp_seconds)\b.*$", re.M)


@pytest.mark.parametrize("fmt", FORMATS)
def test_test_driver_stdout_and_output_file_match(fmt, test_driver, capsys, tmp_path):
    args = ["audit", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream",
            "--format", fmt]
    assert cli.main(args) == EXIT_WORK_FOUND
    streamed = capsys.readouterr().out
    out = tmp_path / "audit.out"
    assert cli.main(args + ["-o", str(out)]) == EXIT_WORK_FOUND
    written = out.read_text()
    if fmt == "prometheus":  # two samples are times: how long the host took, and when
        assert len(TIMED.findall(streamed)) == 2
        streamed, written = TIMED.sub("", streamed), TIMED.sub("", written)
    assert streamed == written and "vxc-render-fix" in streamed


def test_test_driver_rows(test_driver, capsys):
    args = ["audit", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream",
            "--format", "json"]
    cli.main(args)
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows = {r["domain"]: r for r in records if r["record"] == "domain"}
    assert rows["vxc-render-fix"]["needs_fix"] is True and rows["vxc-render-fix"]["state"] == "shut off"
    assert rows["vxc-render-has"]["needs_fix"] is False and rows["vxc-render-has"]["pv_unhalt"] == "on"
    run = rows["vxc-render-run"]
    assert run["needs_fix"] is True and run["state"] == "running" and run["live_pv_unhalt"] == "off"
    transient = rows["vxc-render-transient"]
    assert transient["persistent"] is False and transient["needs_fix"] is False
    assert transient["decision"]["reason"].startswith("transient domain")
    assert records[-1]["needs_fix"] == 2 and records[-1]["version"] == SCHEMA_VERSION
    assert cli.main(args + ["vxc-no-such-domain", "vxc-render-has"]) == EXIT_BAD_INPUT
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records[0]["domain"] == "vxc-no-such-domain" and records[0]["error"]
    assert records[-1]["domain_errors"] == 1 and records[-1]["domains"] == 1


def test_test_driver_audit_by_name_costs_no_round_trip_per_name(test_driver, capsys, monkeypatch):
    """Named domains are picked from the one listing (a daemon answers each lookupByName with a round trip as
    long as the XMLDesc itself); only a name missing from it is asked of libvirt, whose message it reports.
    Rows keep the order of the names, with each domain's state and persistence."""
    import libvirt

    looked_up = []
    lookup = libvirt.virConnect.lookupByName

    def counting(self, name):
        looked_up.append(name)
        return lookup(self, name)

    monkeypatch.setattr(libvirt.virConnect, "lookupByName", counting)
    names = ["vxc-render-transient", "vxc-no-such-domain", "vxc-render-run", "vxc-render-fix", "vxc-render-fix"]
    args = ["audit", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream",
            "--format", "json", "--"]
    assert cli.main(args + names) == EXIT_BAD_INPUT
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert looked_up == ["vxc-no-such-domain"]
    rows = [r for r in records if r["record"] == "domain"]
    assert [r["domain"] for r in rows] == ["vxc-no-such-domain", "vxc-render-transient", "vxc-render-run",
                                           "vxc-render-fix", "vxc-render-fix"]
    assert "not found" in rows[0]["error"].lower()
    assert [(r["state"], r["persistent"]) for r in rows[1:]] == [
        ("running", False), ("running", True), ("shut off", True), ("shut off", True)]


def test_test_driver_fetched_ahead_errors_stay_their_domains_rows(test_driver, monkeypatch):
    """Definitions are fetched in batches before they are read: a domain that vanishes, or whose definition
    cannot be read, is still that domain's row, in its place, across batch boundaries."""
    import libvirt

    from virtxml_cpu.core.config import Config
    from virtxml_cpu.host.sources import HostSources, NotAsked
    from virtxml_cpu.live import audit as live_audit

    xml_desc = libvirt.virDomain.XMLDesc

    def failing(self, flags=0):
        if self.name() == "vxc-render-has":
            raise libvirt.libvirtError("gone")
        if self.name() == "vxc-render-run" and flags == 0:  # the running definition
            raise libvirt.libvirtError("gone while running")
        return "<domain" if self.name() == "vxc-render-fix" else xml_desc(self, flags)

    monkeypatch.setattr(libvirt.virDomain, "XMLDesc", failing)
    monkeypatch.setattr(live_audit, "FETCH_AHEAD", 2)
    names = ("vxc-render-fix", "vxc-render-has", "vxc-render-run", "vxc-render-transient", "vxc-render-fix")
    sources = HostSources(build="upstream", config=Config(), kvm=NotAsked("--no-host-probe"))
    (result,) = live_audit.audit(["test:///default"], live_audit.AuditOptions(Config(), names=names, sources=sources))
    rows = [(r.domain, (r.error or "").split(":")[0], r.state) for r in result.rows]
    assert rows == [("vxc-render-fix", "cannot be audited", None), ("vxc-render-has", "vanished while auditing", None),
                    ("vxc-render-run", "vanished while auditing", None), ("vxc-render-transient", "", "running"),
                    ("vxc-render-fix", "cannot be audited", None)]


def test_every_format_the_cli_offers_has_a_renderer():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command").choices["audit"]
    (fmt,) = [a for a in sub._actions if a.dest == "format"]
    assert tuple(fmt.choices) == tuple(RENDERERS)


# Apply outcomes: one renderer makes the lines apply prints and watch logs.

def test_apply_lines_for_every_kind_and_the_summary():
    lines = {kind: applylines.outcome(ApplyOutcome(A, "web\n1", kind, why, ("1 vCPU",)))
             for kind, why in (("changed", "takes effect at its next start"), ("would-change", FIX.reason),
                               ("unchanged", KEEP.reason), ("skipped", "not confirmed"),
                               ("unknown", "Domain not found"), ("failed", "define failed, definition unchanged: x"))}
    assert lines["changed"] == [("web\\n1: note: 1 vCPU", False),
                                ("web\\n1: added kvm-pv-unhalt; takes effect at its next start", False)]
    assert lines["would-change"][-1] == (f"web\\n1: would add kvm-pv-unhalt: {FIX.reason}", False)
    assert lines["unchanged"][-1] == (f"web\\n1: unchanged: {KEEP.reason}", False)
    assert lines["skipped"][-1] == ("web\\n1: skipped: not confirmed", False)
    assert lines["unknown"][-1] == ("web\\n1: Domain not found", True)
    assert lines["failed"][-1] == ("web\\n1: define failed, definition unchanged: x", True)
    tally = Counter({"changed": 2, "failed": 1})
    assert applylines.summary(tally, []) == "changed 2, would change 0, unchanged 0, managed 0, skipped 0, unknown 0, failed 1"
    assert applylines.summary(tally, [B]).endswith(f"failed 1; unreachable: {B}")


APPLY = ["apply", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream"]


def test_test_driver_apply_reports_each_outcome_and_exits_by_kind(test_driver, capsys):
    names = ["vxc-render-fix", "vxc-render-has", "vxc-render-transient", "vxc-no-such-domain"]
    assert cli.main(APPLY + ["--dry-run", *names]) == EXIT_BAD_INPUT  # an unknown name outranks work found
    out, err = capsys.readouterr()
    assert out.startswith("vxc-render-fix: note: 1 vCPU: ")  # the policy's notes come before the outcome
    fix, has, transient = [x for x in out.splitlines() if ": note: " not in x]  # the unknown name: stderr
    assert fix.startswith("vxc-render-fix: would add kvm-pv-unhalt: kvm-pv-unhalt is off")
    assert has.startswith("vxc-render-has: unchanged: ")
    assert transient == "vxc-render-transient: skipped: transient domain (no persistent definition to fix)"
    assert "virtxml-cpu: vxc-no-such-domain: " in err
    assert "changed 0, would change 1, unchanged 1, managed 0, skipped 1, unknown 1, failed 0" in err
    assert "pvspinlock" not in test_driver.lookupByName("vxc-render-fix").XMLDesc(0)  # a dry run changes nothing
    assert cli.main(APPLY + ["--dry-run", "vxc-render-fix"]) == EXIT_WORK_FOUND
    capsys.readouterr()
    assert cli.main(APPLY + ["--yes", "vxc-render-fix", "vxc-render-run"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert "vxc-render-fix: added kvm-pv-unhalt; takes effect at its next start\n" in out
    assert "vxc-render-run: added kvm-pv-unhalt; takes effect at its next cold boot (the running guest is " \
           "untouched)\n" in out
    assert "changed 2, would change 0, unchanged 0, managed 0, skipped 0, unknown 0, failed 0" in err
    assert "pvspinlock" in test_driver.lookupByName("vxc-render-fix").XMLDesc(0)


def test_test_driver_queue_keeps_the_outcome_and_drops_what_is_settled(test_driver, capsys, tmp_path):
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir(mode=0o700)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hook]\nspool = "{spool_dir}"\n')
    fix, transient = (test_driver.lookupByName(n) for n in ("vxc-render-fix", "vxc-render-transient"))
    for dom in (fix, transient):  # as the hook queues them
        spool.write(str(spool_dir), dom.UUIDString(), {"name": dom.name(), "rule": "policy-compat"})
    before = {p.name: p.read_bytes() for p in spool_dir.iterdir()}
    assert cli.main(APPLY + ["--pending", "--dry-run", "--config", str(cfg)]) == EXIT_WORK_FOUND
    assert {p.name: p.read_bytes() for p in spool_dir.iterdir()} == before  # a dry run changes nothing
    capsys.readouterr()
    assert cli.main(APPLY + ["--pending", "--yes", "--config", str(cfg)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "vxc-render-fix: added kvm-pv-unhalt" in out
    assert ("vxc-render-transient: skipped: transient domain (no persistent definition to fix)\n"
            "vxc-render-transient: queued fix kept (skipped); next try in 60s (attempt 1)\n") in out
    (kept,) = spool.entries(str(spool_dir))
    assert kept.uuid == transient.UUIDString() and kept.domain == "vxc-render-transient" and kept.attempts == 1
    assert kept.last_outcome == ApplyOutcome("test:///default", "vxc-render-transient", "skipped",
                                             "transient domain (no persistent definition to fix)")


def test_watch_logs_the_lines_apply_prints(test_driver, capsys):
    """watch over the test driver: a domain defined while it runs is fixed, and the log line is the one
    `apply` prints for the same outcome (problems would be warnings)."""
    with watching() as logged:
        deadline = time.monotonic() + 10
        dom = test_driver.defineXML(_xml("vxc-render-watched", "<cpu mode='host-model'/>"))
        while "pvspinlock" not in dom.XMLDesc(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # its own redefinition comes back as an event: found unchanged
    try:
        mine = [(m, w) for m, w in logged if m.startswith("vxc-render-watched") and ": note: " not in m]
        assert mine[0] == ("vxc-render-watched: added kvm-pv-unhalt; takes effect at its next start", False), logged
        assert mine[1:] and all(m.startswith("vxc-render-watched: unchanged: ") for m, _w in mine[1:]), logged
        assert not any(w for _m, w in logged), logged
    finally:
        dom.undefine()


def test_watch_refuses_to_apply_without_its_host_facts(test_driver, monkeypatch, tmp_path):
    """libvirt failing to give the capabilities (libvirt's own error, from the call on a connection that is
    gone, as when a daemon drops it mid-call): watch says so in one warning and exits 3, applying neither a
    new definition nor the queue. Deciding with empty facts would drop --qemu-build, --qemu-version and
    the config's values."""
    import threading

    import libvirt

    from virtxml_cpu.core.config import Config
    from virtxml_cpu.host.sources import HostSources, NotAsked
    from virtxml_cpu.live.apply import ApplyOptions
    from virtxml_cpu.live.watch import watch

    real = libvirt.virConnect.getCapabilities

    def unreadable(_conn):
        gone = libvirt.open("test:///default")
        gone.close()
        return real(gone)

    spool_dir = tmp_path / "spool"
    spool_dir.mkdir(mode=0o700)
    queued = test_driver.lookupByName("vxc-render-fix")
    spool.write(str(spool_dir), queued.UUIDString(), {"name": queued.name(), "rule": "policy-compat"})
    monkeypatch.setattr(libvirt.virConnect, "getCapabilities", unreadable)
    logged, stop, box = [], threading.Event(), {}
    cfg = Config(qemu_build="upstream", spool=str(spool_dir))
    opts = ApplyOptions(cfg, sources=HostSources(build="upstream", release="7.2.0", config=cfg,
                                                 kvm=NotAsked("--no-host-probe")))
    t = threading.Thread(target=lambda: box.setdefault("code", watch(
        "test:///default", opts, stop, lambda m, warning=False: logged.append((m, warning)))))
    t.start()
    t.join(3)
    dom = test_driver.defineXML(_xml("vxc-render-watched", "<cpu mode='host-model'/>"))
    try:
        t.join(3)
        stop.set()  # a watch that carried on is stopped here
        t.join(10)
        assert box.get("code") == EXIT_ENVIRONMENT, logged
        (line,) = logged
        assert line[1] and line[0].startswith("cannot assemble the host facts of test:///default (test:///default: "
                                              "invalid connection pointer in virConnectGetCapabilities)") \
            and line[0].endswith("; applying nothing, stopping"), logged
        assert "pvspinlock" not in queued.XMLDesc(0) and "pvspinlock" not in dom.XMLDesc(0)
        assert len(spool.entries(str(spool_dir))) == 1
    finally:
        dom.undefine()

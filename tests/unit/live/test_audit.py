"""Operating at fleet scale without libvirt: Prometheus metrics, orchestrator-managed domains, the hook's
queue with backoff."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from virtxml_cpu.hook import evaluate, spool
from virtxml_cpu.core.config import Config
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.core.pipeline import process
from virtxml_cpu.live.records import TIMED_OUT, UNREACHABLE, ApplyOutcome, AuditRow, HostResult, RowDecision
from virtxml_cpu.render import prometheus

from tests.support import FIXTURES, ROOT

UP = HostFacts(qemu_build="upstream", build_source="test")


def row(domain, pv="off", needs=True, **kw):
    return AuditRow("qemu:///system", domain, f"u-{domain}", "running", True, pv_unhalt=pv, needs_fix=needs,
                    decision=RowDecision("inject" if needs else "keep", "r", "why"), **kw)


def test_prometheus_exposition_parses_and_says_what_it_should():
    results = [HostResult("qemu:///system", (row("web", live_pv_unhalt="off", observed_pv_unhalt="off"),
                                             row('odd"name\\x\ny', pv="on", needs=False),
                                             row("nova-vm", managed_by="OpenStack Nova"),
                                             AuditRow("qemu:///system", "ghost", error="no domain")), seconds=0.25),
               HostResult("qemu+ssh://down/system", error="cannot connect", condition=UNREACHABLE)]
    text = prometheus.tail(results, 1_700_000_000.0)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    s = {(f.name, tuple(sorted(x.labels.items()))): x.value for f in fams.values() for x in f.samples}

    def get(name, **labels):
        return s[(name, tuple(sorted(labels.items())))]

    assert get("virtxml_cpu_host_reachable", host="qemu:///system") == 1
    assert get("virtxml_cpu_host_reachable", host="qemu+ssh://down/system") == 0
    assert get("virtxml_cpu_host_domains", host="qemu:///system") == 3
    assert get("virtxml_cpu_host_domains_needs_fix", host="qemu:///system") == 2
    assert get("virtxml_cpu_host_domain_errors", host="qemu:///system") == 1
    assert get("virtxml_cpu_host_audit_seconds", host="qemu:///system") == 0.25
    web = dict(host="qemu:///system", domain="web", uuid="u-web")
    assert get("virtxml_cpu_domain_pv_unhalt", **web, view="definition") == 0
    assert get("virtxml_cpu_domain_pv_unhalt", **web, view="observed") == 0
    assert get("virtxml_cpu_domain_needs_fix", **web) == 1
    odd = dict(host="qemu:///system", domain='odd"name\\x\ny', uuid='u-odd"name\\x\ny')
    assert get("virtxml_cpu_domain_pv_unhalt", **odd, view="definition") == 1
    from virtxml_cpu.tables.orchestrators import BY_NAME
    assert get("virtxml_cpu_domain_managed", host="qemu:///system", domain="nova-vm", uuid="u-nova-vm",
               orchestrator="OpenStack Nova", knob=BY_NAME["OpenStack Nova"].knob) == 1
    assert get("virtxml_cpu_audit_timestamp_seconds") == 1_700_000_000.0


@pytest.mark.parametrize("metadata,who,says,knob", [
    ("<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:name>x</nova:name>"
     "</nova:instance>", "OpenStack Nova", "hard reboot", "cpu_mode = host-passthrough"),
    ("<ovirt-vm:vm xmlns:ovirt-vm='http://ovirt.org/vm/1.0'><ovirt-vm:clusterVersion>4.7</ovirt-vm:clusterVersion>"
     "</ovirt-vm:vm>", "oVirt/VDSM", "VDSM", "Pass-Through Host CPU"),
    ("<kubevirt xmlns='http://kubevirt.io'><uid>1</uid></kubevirt>", "KubeVirt", "virt-launcher",
     "spec.template.spec.domain.features.pvspinlock: {}"),
])
def test_orchestrator_managed_domains_are_recognised_and_explained(metadata, who, says, knob):
    data = (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(
        b"</domain>", f"<metadata>{metadata}</metadata></domain>".encode())
    o = process(data, "m.xml", UP, Config(), render=False)
    assert o.resolution.facts.orchestrator == who
    assert any(n.startswith(f"managed by {who}") and says in n for n in o.decision.notes)
    logged = []
    evaluate.run(["vm", "prepare", "begin", "-"], mode="audit", config_path=None,
                 stdin=__import__("io").BytesIO(data), log=lambda m, **kw: logged.append(m))
    assert (f'stack="{who}"' in logged[0] or f"stack={who}" in logged[0]) and "edits_last=no" in logged[0]
    assert knob in logged[0].split(" knob=", 1)[1]


def test_unmanaged_domain_has_no_orchestrator():
    o = process((ROOT / "examples" / "fedora-host-model.xml").read_bytes(), "f.xml", UP, Config(), render=False)
    assert o.resolution.facts.orchestrator is None


TRANSIENT = ApplyOutcome("qemu:///system", "vm", "skipped", "transient domain (no persistent definition to fix)")


def test_spool_postpones_with_growing_delay_and_keeps_the_outcome(tmp_path):
    d = str(tmp_path / "spool")
    spool.write(d, "0B7E2D1C6A514F0E8D7B3C2F9E1A4B66", {"name": "vm", "rule": "policy-compat"})  # as queued before "domain"
    (e,) = spool.entries(d)
    assert (e.uuid, e.domain, e.attempts) == ("0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66", "vm", 0) and e.due(0)
    e1 = spool.postpone(e, TRANSIENT, now=1000.0)
    e2 = spool.postpone(e1, TRANSIENT, now=2000.0)
    assert (e1.next_try, e2.next_try) == (1060.0, 2120.0) and e2.attempts == 2
    (back,) = spool.entries(d)
    assert back.attempts == 2 and back.last_outcome == TRANSIENT and not back.due(2100.0) and back.due(2120.0)
    data = json.loads(open(back.path).read())
    assert data["rule"] == "policy-compat" and data["domain"] == "vm" and "name" not in data
    assert data["last_outcome"] == {"host": "qemu:///system", "domain": "vm", "kind": "skipped",
                                    "reason": "transient domain (no persistent definition to fix)"}
    assert spool.delay(30) == spool.MAX_DELAY
    spool.drop(back)
    assert spool.entries(d) == []


def test_spool_skips_unreadable_entries_with_a_warning(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    warned = []
    assert spool.entries(str(tmp_path), warn=warned.append) == [] and "bad.json" in warned[0]


def test_audit_stream_hands_out_fast_hosts_first_and_times_out_a_stalled_one(monkeypatch):
    """A host that connects and then stalls mid-audit is reported at its whole-host deadline; the others
    come out as soon as they are done, and the stalled thread cannot keep the run waiting."""
    import threading
    import time

    from virtxml_cpu.live import audit

    release = threading.Event()

    def fake_host(uri, opts):
        if uri == "stalls":
            release.wait(30)
        time.sleep(0.05 if uri == "fast" else 0.3)
        return HostResult(uri, rows=(row(f"{uri}-vm"),), seconds=0.1)

    monkeypatch.setattr(audit, "audit_host", fake_host)
    opts = audit.AuditOptions(Config(), timeout=0.5, host_timeout=1.0)
    t0 = time.monotonic()
    seen = [(h.uri, h.condition, round(time.monotonic() - t0, 1)) for h in audit.audit_stream(["stalls", "slow", "fast"], opts)]
    release.set()
    assert [s[:2] for s in seen] == [("fast", "ok"), ("slow", "ok"), ("stalls", TIMED_OUT)]
    assert seen[0][2] < 0.3 and 0.9 <= seen[2][2] < 2.0, seen


def test_apply_names_what_a_wedged_host_did_and_did_not_handle(monkeypatch):
    import threading

    from virtxml_cpu.live import apply

    release = threading.Event()

    def fake_apply_into(uri, which, opts, res):
        res.todo = ["a", "b", "c"]
        res.done.append(res.todo.pop(0))
        res.tally["changed"] += 1
        release.wait(30)  # wedged before b

    monkeypatch.setattr(apply, "apply_into", fake_apply_into)
    res, problem = apply.apply_with_deadline("qemu+tcp://wedged/system", apply.Selection(all_domains=True),
                                            apply.ApplyOptions(Config()), host_timeout=0.5)
    release.set()
    assert res.tally == {"changed": 1}
    assert "timed out" in problem and "handled: a;" in problem and "not handled: b, c" in problem

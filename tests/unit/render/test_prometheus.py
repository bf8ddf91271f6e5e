"""The Prometheus text render/prometheus.py writes for `audit --format prometheus`, read back with
prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from virtxml_cpu.live.records import UNREACHABLE, AuditRow, HostResult, RowDecision
from virtxml_cpu.render import prometheus


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

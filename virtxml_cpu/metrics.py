"""Audit results -> Prometheus text exposition format, for node_exporter's textfile collector (pure).

Per domain: kvm-pv-unhalt in the persistent definition, in the live definition and as QEMU reports it
(1 on, 0 off; a host-dependent value is left out), and whether the definition needs the fix. Per host:
reachable, domain counts, audit duration.
"""

from __future__ import annotations

PREFIX = "virtxml_cpu"
STATE = {"on": 1, "off": 0}


def _label(value) -> str:
    text = str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kv) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in kv.items()) + "}"


def exposition(results, now: float) -> str:
    """`results`: audit.HostAudit list. Families in a fixed order, each with HELP and TYPE once."""
    families = {
        "domain_pv_unhalt": ("gauge", "kvm-pv-unhalt of the domain (1 on, 0 off) in its persistent definition "
                                      "(view=definition), its live definition (view=live) or as QEMU reports it "
                                      "(view=observed)", []),
        "domain_needs_fix": ("gauge", "1 when the persistent definition should get kvm-pv-unhalt", []),
        "domain_managed": ("gauge", "1 when an orchestrator regenerates the definition (a fix there does not "
                                    "last)", []),
        "host_reachable": ("gauge", "1 when the libvirt host answered the audit", []),
        "host_domains": ("gauge", "domains audited on the host", []),
        "host_domains_need_fix": ("gauge", "domains on the host whose definition should get kvm-pv-unhalt", []),
        "host_domain_errors": ("gauge", "domains named but not audited (unknown or vanished)", []),
        "host_audit_seconds": ("gauge", "how long the host's audit took", []),
        "audit_timestamp_seconds": ("gauge", "when this audit finished (Unix time)", []),
    }

    def add(name, labels, value):
        families[name][2].append(f"{PREFIX}_{name}{labels} {value}")

    for h in results:
        rows = [r for r in h.rows if "error" not in r]
        add("host_reachable", _labels(host=h.uri), 0 if h.error else 1)
        add("host_domains", _labels(host=h.uri), len(rows))
        add("host_domains_need_fix", _labels(host=h.uri), sum(bool(r["needs_work"]) for r in rows))
        add("host_domain_errors", _labels(host=h.uri), len(h.rows) - len(rows))
        add("host_audit_seconds", _labels(host=h.uri), f"{h.seconds:.3f}")
        for r in rows:
            base = dict(host=h.uri, domain=r["domain"], uuid=r.get("uuid", ""))
            for view, key in (("definition", "pv_unhalt"), ("live", "live_pv_unhalt"),
                              ("observed", "observed_pv_unhalt")):
                if r.get(key) in STATE:
                    add("domain_pv_unhalt", _labels(**base, view=view), STATE[r[key]])
            add("domain_needs_fix", _labels(**base), int(bool(r["needs_work"])))
            if r.get("managed_by"):
                add("domain_managed", _labels(**base, orchestrator=r["managed_by"]), 1)
    add("audit_timestamp_seconds", "", f"{now:.3f}")
    out = []
    for name, (kind, text, samples) in families.items():
        if samples:
            out += [f"# HELP {PREFIX}_{name} {text}", f"# TYPE {PREFIX}_{name} {kind}", *samples]
    return "\n".join(out) + "\n"

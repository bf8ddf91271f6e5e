"""The audit as Prometheus text exposition, for node_exporter's textfile collector.

Per domain: kvm-pv-unhalt in the persistent definition, in the live definition and as QEMU reports it
(1 on, 0 off; a host-dependent value is left out), and whether the definition needs the fix. Per host:
reachable, domain counts, audit duration. A family's samples must stay together, so everything is
written at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import shown
from ..tables import orchestrators
from ..live.records import HostResult

PREFIX = "virtxml_cpu"
STATE = {"on": 1, "off": 0}
FAMILIES = {  # name: (type, help), in the order written
    "domain_pv_unhalt": ("gauge", "kvm-pv-unhalt of the domain (1 on, 0 off) in its persistent definition "
                                  "(view=definition), its live definition (view=live) or as QEMU reports it "
                                  "(view=observed)"),
    "domain_needs_fix": ("gauge", "1 when the persistent definition should get kvm-pv-unhalt"),
    "domain_managed": ("gauge", "1 when the stack that wrote the definition writes it again (a fix made in libvirt "
                                "does not last), 0 when edits made in libvirt last there; knob: what turns the bit "
                                "on in the stack"),
    "domain_fixable": ("gauge", "1 when `apply` would change the domain (it needs the fix, is persistent and no "
                                "stack writes it again)"),
    "host_reachable": ("gauge", "1 when the libvirt host answered the audit"),
    "host_domains": ("gauge", "domains audited on the host"),
    "host_domains_needs_fix": ("gauge", "domains on the host whose definition should get kvm-pv-unhalt"),
    "host_domain_errors": ("gauge", "domains not audited (unknown, vanished or unreadable)"),
    "host_domains_machine_status": ("gauge", "domains on the host whose machine type its QEMU marks deprecated "
                                             "(status=deprecated) or does not offer (status=not-offered)"),
    "host_audit_seconds": ("gauge", "how long the host's audit took"),
    "audit_timestamp_seconds": ("gauge", "when this audit finished (Unix time)"),
}


def _label(value) -> str:
    """A label value: the exposition format's escapes (backslash, quote, newline), and every other control,
    format or separator character (CR, TAB, NEL, U+2028, U+202E ...) shown escaped first: the format has no
    escape of its own for them, and raw they would reach whoever reads the file."""
    text = "\n".join(shown(part) for part in str(value).split("\n"))
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kv) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in kv.items()) + "}"


def head() -> str:
    return ""


def host(_h: HostResult) -> str:
    return ""


def tail(hosts: Sequence[HostResult], now: float) -> str:
    """Families in a fixed order, each with HELP and TYPE once."""
    samples: dict[str, list[str]] = {name: [] for name in FAMILIES}

    def add(name, labels, value):
        samples[name].append(f"{PREFIX}_{name}{labels} {value}")

    for h in hosts:
        audited = h.audited
        add("host_reachable", _labels(host=h.uri), 0 if h.error else 1)
        add("host_domains", _labels(host=h.uri), len(audited))
        add("host_domains_needs_fix", _labels(host=h.uri), sum(r.needs_fix for r in audited))
        add("host_domain_errors", _labels(host=h.uri), len(h.rows) - len(audited))
        for status in ("deprecated", "not-offered"):
            add("host_domains_machine_status", _labels(host=h.uri, status=status),
                sum(r.machine_status == status for r in audited))
        add("host_audit_seconds", _labels(host=h.uri), f"{h.seconds:.3f}")
        for r in audited:
            base = dict(host=h.uri, domain=r.domain, uuid=r.uuid or "")
            for view, value in (("definition", r.pv_unhalt), ("live", r.live_pv_unhalt),
                                ("observed", r.observed_pv_unhalt)):
                if value in STATE:
                    add("domain_pv_unhalt", _labels(**base, view=view), STATE[value])
            add("domain_needs_fix", _labels(**base), int(r.needs_fix))
            add("domain_fixable", _labels(**base), int(r.fixable))
            if r.managed_by:
                stack = orchestrators.BY_NAME.get(r.managed_by)
                knob = {"knob": stack.knob} if stack else {}
                add("domain_managed", _labels(**base, orchestrator=r.managed_by, **knob),
                    int(orchestrators.managed(r.managed_by)))
    add("audit_timestamp_seconds", "", f"{now:.3f}")
    out = []
    for name, (kind, text) in FAMILIES.items():
        if samples[name]:
            out += [f"# HELP {PREFIX}_{name} {text}", f"# TYPE {PREFIX}_{name} {kind}", *samples[name]]
    return "\n".join(out) + "\n"

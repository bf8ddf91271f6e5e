"""The audit as JSON lines a program reads: each host's domain records and then its host record as soon as
that host is done, and a summary record last. Every record has `"record"`: domain | host | summary, and
always the same keys (null when they do not apply); the summary carries the schema's `"version"`. Nothing
depends on timing, so the same hosts give the same bytes (a configuration tool can compare runs)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..tables import orchestrators
from ..live.records import AuditRow, HostResult, summarize


def domain_record(r: AuditRow) -> dict:
    d = r.decision
    return {"record": "domain", "host": r.host, "domain": r.domain, "uuid": r.uuid, "state": r.state,
            "persistent": r.persistent, "pv_unhalt": r.pv_unhalt, "live_pv_unhalt": r.live_pv_unhalt,
            "observed_pv_unhalt": r.observed_pv_unhalt, "managed_by": r.managed_by, "guest_os": r.guest_os,
            "needs_fix": r.needs_fix,
            "decision": None if d is None else {"action": d.action, "rule": d.rule, "reason": d.reason,
                                                "notes": list(d.notes)},
            "error": r.error, "machine_status": r.machine_status, "stack": orchestrators.record(r.stack),
            "fixable": r.fixable, "stack_command": r.stack_command,
            "details": r.details}


def host_record(h: HostResult) -> dict:
    audited = h.audited
    return {"record": "host", "host": h.uri, "condition": h.condition, "error": h.error,
            "domains": len(audited), "needs_fix": sum(r.needs_fix for r in audited),
            "fixable": sum(r.fixable for r in audited),
            "domain_errors": len(h.rows) - len(audited)}


def summary_record(hosts: Sequence[HostResult]) -> dict:
    s = summarize(hosts)
    return {"record": "summary", "version": s.version, "hosts": s.hosts, "hosts_ok": s.hosts_ok,
            "unreachable": list(s.unreachable), "timed_out": list(s.timed_out), "domains": s.domains,
            "needs_fix": s.needs_fix, "have_pv_unhalt": s.have_pv_unhalt, "domain_errors": s.domain_errors,
            "machine_deprecated": s.machine_deprecated, "machine_not_offered": s.machine_not_offered,
            "fixable": s.fixable, "managed": s.managed}


def _line(record: dict) -> str:
    return json.dumps(record) + "\n"


def head() -> str:
    return ""


def host(h: HostResult) -> str:
    return "".join(_line(domain_record(r)) for r in h.rows) + _line(host_record(h))


def tail(hosts: Sequence[HostResult], _now: float) -> str:
    return _line(summary_record(hosts))

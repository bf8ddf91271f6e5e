"""audit's stream of hosts, without libvirt: each host's results handed out when that host is done, a
stalled host reported at its deadline."""

from __future__ import annotations

from virtxml_cpu.core.config import Config
from virtxml_cpu.live.records import TIMED_OUT, AuditRow, HostResult, RowDecision


def row(domain, pv="off", needs=True, **kw):
    return AuditRow("qemu:///system", domain, f"u-{domain}", "running", True, pv_unhalt=pv, needs_fix=needs,
                    decision=RowDecision("inject" if needs else "keep", "r", "why"), **kw)


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

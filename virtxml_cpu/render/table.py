"""The audit as a table a person reads: a header, then each host's lines as soon as it is done."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import HostResult, summarize

HEADER = (f"{'HOST':<28} {'DOMAIN':<24} {'STATE':<9} {'PV-UNHALT':<9} {'LIVE':<5} {'QEMU':<5} "
          f"{'NEEDS-FIX':<9} REASON")


def head() -> str:
    return HEADER + "\n"


def host(h: HostResult) -> str:
    lines = []
    if h.error:
        lines.append(f"{h.uri:<28} {'-':<24} {h.condition.replace('_', ' ').upper():<9} {h.error}")
    for r in h.rows:
        if r.error is not None:
            lines.append(f"{h.uri:<28} {r.domain:<24} {'ERROR':<9} {r.error}")
            continue
        lines.append(f"{h.uri:<28} {r.domain:<24} {r.state:<9} {r.pv_unhalt:<9} "
                     f"{r.live_pv_unhalt or '-':<5} {r.observed_pv_unhalt or '-':<5} "
                     f"{('yes' if r.needs_fix else 'no'):<9} {r.decision.reason}")
    return "".join(line + "\n" for line in lines)


def tail(_hosts: Sequence[HostResult], _now: float) -> str:
    return ""


def summary_line(hosts: Sequence[HostResult]) -> str:
    """The closing line on stderr, whatever the format."""
    s = summarize(hosts)
    per = sum(h.seconds for h in hosts if not h.error) / max(1, s.domains)
    text = (f"{s.domains} domains on {s.hosts_ok} host(s): {s.needs_fix} need kvm-pv-unhalt, "
            f"{s.have_pv_unhalt} have it ({per * 1000:.1f} ms per domain)")
    if s.domain_errors:
        text += f"; {s.domain_errors} domain(s) not audited (unknown or vanished)"
    if s.machine_not_offered or s.machine_deprecated:
        text += (f"; machine type not offered by the host's QEMU: {s.machine_not_offered}, deprecated: "
                 f"{s.machine_deprecated}")
    for condition, uris in (("unreachable", s.unreachable), ("timed out", s.timed_out)):
        if uris:
            text += f"; {condition}: {', '.join(uris)}"
    return text

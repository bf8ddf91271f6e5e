"""The audit as a table a person reads: a header, then each host's lines as soon as it is done."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import shown
from ..tables import orchestrators
from ..live.records import AuditRow, HostResult, summarize
from .commands import apply_fix

HEADER = (f"{'HOST':<28} {'DOMAIN':<24} {'STATE':<9} {'PV-UNHALT':<9} {'LIVE':<5} {'QEMU':<5} "
          f"{'NEEDS-FIX':<9} REASON")


def head() -> str:
    return HEADER + "\n"


def host(h: HostResult) -> str:
    """Every field shown escaped: a name or message with a CR, TAB, NEL, U+2028 or U+202E cannot move the
    cursor, end the row or reverse the columns after it."""
    lines = []
    uri = shown(h.uri)
    if h.error:
        lines.append(f"{uri:<28} {'-':<24} {h.condition.replace('_', ' ').upper():<9} {shown(h.error)}")
    for r in h.rows:
        if r.error is not None:
            lines.append(f"{uri:<28} {shown(r.domain):<24} {'ERROR':<9} {shown(r.error)}")
            continue
        lines.append(f"{uri:<28} {shown(r.domain):<24} {shown(r.state or '-'):<9} {shown(r.pv_unhalt or '-'):<9} "
                     f"{shown(r.live_pv_unhalt or '-'):<5} {shown(r.observed_pv_unhalt or '-'):<5} "
                     f"{('yes' if r.needs_fix else 'no'):<9} {shown(r.decision.reason)}")
        if r.stack:
            lines.append(f"{uri:<28} {shown(r.domain):<24} {'STACK':<9} {stack_line(r)}")
    return "".join(line + "\n" for line in lines)


def stack_line(r: AuditRow) -> str:
    """The stack that wrote a row's definition, whether a change made in libvirt lasts, and its knob."""
    s = orchestrators.BY_NAME[r.stack]
    lasts = "a change made in libvirt " + ("lasts" if s.edits_last else "does not last: apply leaves it")
    since = f" (since {s.knob_since})" if s.knob_since else ""
    return shown(f"{s.name}: {lasts}; knob: {s.knob}{since}")


def tail(_hosts: Sequence[HostResult], _now: float) -> str:
    return ""


def summary_line(hosts: Sequence[HostResult]) -> str:
    """The closing line on stderr, whatever the format."""
    s = summarize(hosts)
    per = sum(h.seconds for h in hosts if not h.error) / max(1, s.domains)
    text = (f"{s.domains} domains on {s.hosts_ok} host(s): {s.needs_fix} need kvm-pv-unhalt, "
            f"{s.have_pv_unhalt} have it ({per * 1000:.1f} ms per domain)")
    if s.domain_errors:
        text += f"; {s.domain_errors} domain(s) not audited (unknown, vanished or unreadable)"
    if s.machine_not_offered or s.machine_deprecated:
        text += (f"; machine type not offered by the host's QEMU: {s.machine_not_offered}, deprecated: "
                 f"{s.machine_deprecated}")
    for condition, uris in (("unreachable", s.unreachable), ("timed out", s.timed_out)):
        if uris:
            text += f"; {condition}: {', '.join(shown(u) for u in uris)}"
    return text


def fix_lines(hosts: Sequence[HostResult], options: Sequence[str] = ()) -> list[str]:
    """After the summary (stderr): per host with domains `apply` would fix, the `apply` that fixes them,
    with the options the audit decided with, ready to paste (render.commands quotes it); then, for each
    domain a stack writes again that lacks the bit, the stack's own command where it has one."""
    out = []
    for h in hosts:
        names = [r.domain for r in h.rows if r.error is None and r.fixable]
        if names:
            out.append(f"fix with: {apply_fix(h.uri, names, options)}")
    for h in hosts:
        for r in h.audited:
            if r.stack_command:
                out.append(f"fix in {r.stack} ({shown(r.domain)}): {r.stack_command}")
    return out

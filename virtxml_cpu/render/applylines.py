"""Apply outcomes -> the lines a person reads: what `apply` prints and what `watch` logs, made here only.

Each line comes with whether it reports a problem: `apply` writes those to stderr (prefixed with the
program's name) and the others to stdout; `watch` logs them as warnings. Names are shown on one line
whatever they contain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import shown
from ..live.records import APPLY_KINDS, CHANGED, MANAGED, SKIPPED, UNCHANGED, WOULD_CHANGE, ApplyOutcome

Line = tuple[str, bool]  # (text, reports a problem)

_SAYS = {CHANGED: "added kvm-pv-unhalt; ", WOULD_CHANGE: "would add kvm-pv-unhalt: ", UNCHANGED: "unchanged: ",
         MANAGED: "managed: ", SKIPPED: "skipped: "}  # unknown and failed: the reason says it all


def outcome(o: ApplyOutcome) -> list[Line]:
    """The policy's notes on the domain, then what was done and why."""
    name = shown(o.domain)
    return [(f"{name}: note: {n}", False) for n in o.notes] + [
        (f"{name}: {_SAYS.get(o.kind, '')}{shown(o.reason)}", o.problem)]


def queue_dropped(label: str, dry_run: bool) -> Line:
    """A queued fix whose domain is gone."""
    return f"{shown(label)}: no such domain any more; queued fix {'would be dropped' if dry_run else 'dropped'}", False


def queue_kept(o: ApplyOutcome, attempts: int, wait: float) -> Line:
    """A queued fix that could not be applied now and is tried again later."""
    return f"{shown(o.domain)}: queued fix kept ({o.kind}); next try in {wait:.0f}s (attempt {attempts})", False


def queue_not_applied(label: str, why: str) -> Line:
    """A queued fix that could not even be tried (the others carry on)."""
    return f"{shown(label)}: queued fix not applied: {shown(why)}", True


def summary(tally: Mapping[str, int], down: Sequence[str]) -> str:
    """The closing line of `apply` (stderr): every kind counted, and the hosts that could not be done."""
    text = ", ".join(f"{kind.replace('-', ' ')} {tally.get(kind, 0)}" for kind in APPLY_KINDS)
    return text + (f"; unreachable: {', '.join(down)}" if down else "")

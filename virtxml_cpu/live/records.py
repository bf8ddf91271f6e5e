"""The results of the live verbs as typed records, with one set of field names for every output format.

`audit` makes an AuditRow per domain and a HostResult per host; `summarize` folds them into a Summary.
`apply` and `watch` make an ApplyOutcome per domain (the hook's queue keeps the last one of each entry).
The renderers (virtxml_cpu.render.formats) read these and nothing else, so a field is spelled the same in the
table, the JSON lines and the Prometheus metrics. SCHEMA_VERSION is the version of the JSON lines schema
(docs/live.md, "Audit output"); it changes when a field is renamed, removed or changes meaning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..tables import orchestrators

SCHEMA_VERSION = 2  # 2: stack, fixable, stack_command, details on domain records; fixable and managed counted

OK, UNREACHABLE, TIMED_OUT = "ok", "unreachable", "timed_out"
CONDITIONS = (OK, UNREACHABLE, TIMED_OUT)


class RowDecision(NamedTuple):
    """What the policy decided for the domain's definition (decision.Decision, as reported)."""

    action: str  # inject | keep
    rule: str
    reason: str
    notes: tuple[str, ...] = ()


class AuditRow(NamedTuple):
    """One domain on one host. A domain that could not be audited (an unknown name, one that vanished
    meanwhile, a definition that cannot be read) has `error` set and only host, domain and (when known)
    uuid besides. A named tuple, as immutable as a frozen dataclass and made in a third of the time: an
    audit makes one per domain."""

    host: str
    domain: str
    uuid: str | None = None
    state: str | None = None  # running, shut off, paused ...
    persistent: bool | None = None
    pv_unhalt: str | None = None  # kvm-pv-unhalt in the persistent definition: on | off | host-dependent
    live_pv_unhalt: str | None = None  # in the live definition of a running guest (on | off)
    observed_pv_unhalt: str | None = None  # what QEMU reports (--observe): on | off | "error: ..."
    managed_by: str | None = None  # the orchestrator that regenerates the definition
    guest_os: dict | None = None  # the libosinfo id the domain names and what is known of its kernel
    decision: RowDecision | None = None
    needs_fix: bool = False  # the persistent definition should get kvm-pv-unhalt
    error: str | None = None
    machine_status: str | None = None  # offered | deprecated | not-offered on this host's QEMU (core/lifecycle.py)
    stack: str | None = None  # the stack that wrote the definition (a tables/orchestrators.STACKS name)
    fixable: bool = False  # `apply` would change it (core/decision.fixable): needs the fix, persistent, not managed
    stack_command: str | None = None  # the command that sets the stack's knob, shell-quoted, where there is one
    details: dict | None = None  # with --details: what explain adds (machine, CPU mode, QEMU build, properties)


@dataclass(frozen=True)
class HostResult:
    """One libvirt host: its domains' rows, or why there are none."""

    uri: str
    rows: tuple[AuditRow, ...] = ()
    error: str | None = None
    condition: str = OK  # ok | unreachable | timed_out (accepted the connection, did not answer in time)
    seconds: float = 0.0  # how long the host's audit took

    def __post_init__(self):
        if self.condition not in CONDITIONS:
            raise ValueError(f"host condition {self.condition!r} is none of {', '.join(CONDITIONS)}")
        if (self.condition == OK) != (self.error is None):
            raise ValueError("a host has an error exactly when its condition is not ok")

    @property
    def audited(self) -> tuple[AuditRow, ...]:
        """The rows of domains that were audited (not those with an error)."""
        return tuple(r for r in self.rows if r.error is None)


@dataclass(frozen=True)
class Summary:
    """A whole audit, each condition separately so a monitoring check can alert on each."""

    hosts: int
    hosts_ok: int
    unreachable: tuple[str, ...]
    timed_out: tuple[str, ...]
    domains: int  # audited
    needs_fix: int  # domains whose persistent definition should get kvm-pv-unhalt
    have_pv_unhalt: int
    domain_errors: int  # not audited (an unknown name, a domain that vanished, a definition that cannot be read)
    fixable: int = 0  # domains `apply` would change
    managed: int = 0  # domains whose definition a stack writes again (the fix is the stack's knob)
    machine_deprecated: int = 0  # domains whose machine type this host's QEMU marks deprecated
    machine_not_offered: int = 0  # domains whose machine type this host's QEMU does not offer (will not start)
    version: int = SCHEMA_VERSION


def summarize(hosts: Sequence[HostResult]) -> Summary:
    rows = [r for h in hosts for r in h.audited]
    return Summary(
        hosts=len(hosts),
        hosts_ok=sum(h.condition == OK for h in hosts),
        unreachable=tuple(h.uri for h in hosts if h.condition == UNREACHABLE),
        timed_out=tuple(h.uri for h in hosts if h.condition == TIMED_OUT),
        domains=len(rows),
        needs_fix=sum(r.needs_fix for r in rows),
        have_pv_unhalt=sum(r.pv_unhalt == "on" for r in rows),
        domain_errors=sum(r.error is not None for h in hosts for r in h.rows),
        fixable=sum(r.fixable for r in rows),
        managed=sum(orchestrators.managed(r.stack) for r in rows),
        machine_deprecated=sum(r.machine_status == "deprecated" for r in rows),
        machine_not_offered=sum(r.machine_status == "not-offered" for r in rows),
    )


CHANGED, WOULD_CHANGE, UNCHANGED, MANAGED, SKIPPED, UNKNOWN, FAILED = (
    "changed", "would-change", "unchanged", "managed", "skipped", "unknown", "failed")
# in the order apply's summary counts; managed: a stack writes the definition again, so apply leaves it and
# names the stack's knob (--include-managed changes it anyway)
APPLY_KINDS = (CHANGED, WOULD_CHANGE, UNCHANGED, MANAGED, SKIPPED, UNKNOWN, FAILED)
PROBLEMS = (UNKNOWN, FAILED)  # kinds that are reported as errors (stderr, a warning in watch's log)


@dataclass(frozen=True)
class ApplyOutcome:
    """What `apply` (or `watch`, or the hook's queue) did to one domain, and why: `kind` is one of
    APPLY_KINDS; `reason` says why it was skipped or failed (a transient domain, not confirmed, changed
    meanwhile, vanished, define failed ...), when a change takes effect, the stack and its knob (managed), or
    else the policy's reason; `notes` are the policy's notes on the domain; `stack` names the stack that
    wrote the definition, when one did."""

    host: str
    domain: str
    kind: str
    reason: str = ""
    notes: tuple[str, ...] = ()
    stack: str | None = None

    def __post_init__(self):
        if self.kind not in APPLY_KINDS:
            raise ValueError(f"apply outcome {self.kind!r} is none of {', '.join(APPLY_KINDS)}")

    @property
    def problem(self) -> bool:
        return self.kind in PROBLEMS

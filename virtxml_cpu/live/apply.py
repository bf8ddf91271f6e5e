"""`virtxml-cpu apply`: fix persistent definitions through libvirt (never the running guest).

Reads each definition with INACTIVE|SECURE (secrets survive), rewrites it with the same pipeline as
files, re-reads it just before defining (no lost updates) and defines it again with the same uuid. Every
domain gets its own outcome (a records.ApplyOutcome, said through render.applylines and counted by kind):
a failed define, an unknown name or a domain that vanished is that domain's outcome and the others carry
on.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..hook import spool
from ..core.config import Config
from ..errors import EnvironmentProblem, VirtxmlCpuError, failure, shown, shown_lines
from ..core.hostfacts import HostFacts
from ..host import reader
from ..core.precedence import DEFAULT_TIMEOUT
from ..host.connection import libvirt_module, open_connection, open_for_reading
from ..host.sources import HostSources, connection_facts
from ..core.decision import fixable, stack_note
from ..core.pipeline import process
from .records import CHANGED, FAILED, MANAGED, SKIPPED, UNCHANGED, UNKNOWN, WOULD_CHANGE, ApplyOutcome
from ..render import applylines
from ..render.explain import unified_diff
from ..tables import orchestrators


def to_terminal(line: str, problem: bool) -> None:
    """Where `apply` says things: problems on stderr, the rest on stdout."""
    if problem:
        print(f"virtxml-cpu: {line}", file=sys.stderr)
    else:
        print(line)


@dataclass(frozen=True)
class ApplyOptions:
    """Everything `apply` and `watch` decide with, in one place."""

    cfg: Config
    policy: str | None = None
    style: str | None = None
    dry_run: bool = False
    diff: bool = False
    yes: bool = False
    sources: HostSources | None = None  # the flags' and config's; None: the config's, /dev/kvm for local URIs
    say: Callable[[str, bool], None] = to_terminal  # one line, and whether it reports a problem
    confirm: Callable[[str], bool] | None = None  # asked with the diff escaped for a terminal (shown_lines)
    shown_diff: Callable[[str], str] = str  # how --diff's diffs are said (the CLI escapes them on a terminal)
    timeout: float = DEFAULT_TIMEOUT  # connecting, and any one libvirt call (keepalive)
    include_managed: bool = False  # redefine guests a stack writes again too (the change will not last there)

    @property
    def changes_nothing(self) -> bool:
        return self.dry_run or self.diff


@dataclass(frozen=True)
class Selection:
    """Which domains: named ones, all of them, or the hook's queue."""

    names: tuple[str, ...] = ()
    all_domains: bool = False
    pending: bool = False


@dataclass(frozen=True)
class Target:
    """An open connection to one libvirt host: its URI (the `host` of every outcome) and its facts."""

    conn: object
    uri: str
    facts: HostFacts


@dataclass
class ApplyResult:
    """Outcomes counted by kind, and how far a host got."""

    tally: Counter = field(default_factory=Counter)
    done: list[str] = field(default_factory=list)  # domains handled so far, in order (whatever the outcome)
    todo: list[str] = field(default_factory=list)  # domains not reached yet

    def add(self, other: "ApplyResult") -> None:
        self.tally.update(other.tally)


def report(opts: ApplyOptions, o: ApplyOutcome, res: ApplyResult | None = None) -> ApplyOutcome:
    """Say the outcome (through the one renderer) and count it in `res`."""
    for line in applylines.outcome(o):
        opts.say(*line)
    if res is not None:
        res.tally[o.kind] += 1
    return o


def apply(uri: str, which: Selection, opts: ApplyOptions) -> ApplyResult:
    """One host: open a connection, apply, close. Raises EnvironmentProblem when the host is unreachable."""
    res = ApplyResult()
    apply_into(uri, which, opts, res)
    return res


def apply_with_deadline(uri: str, which: Selection, opts: ApplyOptions,
                        host_timeout: float) -> tuple[ApplyResult, str | None]:
    """One host's apply in a thread of its own: a host that stalls mid-way is abandoned at its deadline
    (the thread is a daemon), and the problem says which domains were handled and which were not."""
    res, box = ApplyResult(), {}

    def work():
        try:
            apply_into(uri, which, opts, res)
        except EnvironmentProblem as e:
            box["problem"] = str(e)
        except Exception as e:  # noqa: BLE001 - the host's problem, one line: never a traceback from a thread
            libvirt_error = getattr(sys.modules.get("libvirt"), "libvirtError", None)
            if libvirt_error is not None and isinstance(e, libvirt_error):  # the connection dropped (keepalive)
                box["problem"] = f"{uri}: {e.get_error_message()}; {_progress(res)}"
            else:
                box["problem"] = f"{uri}: stopped: {failure(e)}; {_progress(res)}"

    t = threading.Thread(target=work, name=f"apply {uri}", daemon=True)
    t.start()
    t.join(host_timeout)
    if t.is_alive():
        return res, f"{uri}: not done within {host_timeout:g}s (timed out); {_progress(res)}"
    return res, box.get("problem")


def _progress(res: ApplyResult) -> str:
    done, todo = list(res.done), list(res.todo)
    return (f"handled: {', '.join(done) or 'none'}; "
            f"not handled: {', '.join(todo) or 'not known (the host stalled before listing its domains)'}")


def apply_into(uri: str, which: Selection, opts: ApplyOptions, res: ApplyResult) -> None:
    """`apply` filling a result the caller holds, so that a host abandoned mid-way still tells which
    domains were handled (`res.done`) and which were not (`res.todo`)."""
    if opts.changes_nothing:
        conn = open_for_reading(uri, opts.timeout)
    else:
        conn = open_connection(uri, read_only=False, timeout=opts.timeout)
    try:
        apply_on(Target(conn, uri, connection_facts(opts.sources, opts.cfg, conn, uri)), which, opts, res)
    finally:
        conn.close()


def apply_on(target: Target, which: Selection, opts: ApplyOptions, res: ApplyResult,
             now: float | None = None) -> None:
    """Apply over an open connection (watch keeps one); per-domain outcomes are said and counted in `res`."""
    if which.pending:
        for entry in spool.entries(opts.cfg.spool, warn=lambda m: opts.say(m, True)):
            if now is not None and not entry.due(now):
                continue
            try:
                apply_entry(target, entry, opts, res, now)
            except VirtxmlCpuError as e:  # one entry's problem never stops the queue
                opts.say(*applylines.queue_not_applied(entry.domain or entry.uuid, str(e)))
        return
    doms, unknown = reader.domains(target.conn, () if which.all_domains else which.names)
    for name, message in unknown:
        report(opts, ApplyOutcome(target.uri, name, UNKNOWN, message), res)
    res.todo = [d.name() for d in doms]
    for dom in doms:
        report(opts, apply_one(target, dom, opts), res)
        res.done.append(res.todo.pop(0))


def apply_entry(target: Target, entry: spool.Entry, opts: ApplyOptions, res: ApplyResult,
                now: float | None = None) -> None:
    """One queued fix: applied and dropped, or kept for later with its outcome. A dry run or --diff
    changes nothing, the queue included."""
    libvirt = libvirt_module()
    try:
        dom = target.conn.lookupByUUIDString(entry.uuid)
    except libvirt.libvirtError:
        if not opts.changes_nothing:
            spool.drop(entry)  # the queued domain is gone: nothing left to fix
        opts.say(*applylines.queue_dropped(entry.domain or entry.uuid, opts.changes_nothing))
        return
    o = report(opts, apply_one(target, dom, opts), res)
    if opts.changes_nothing:
        return
    if o.kind in (CHANGED, UNCHANGED, MANAGED):  # managed: the stack's knob is the fix, not a later try
        spool.drop(entry)
    else:
        later = spool.postpone(entry, o, now)
        opts.say(*applylines.queue_kept(o, later.attempts, spool.delay(later.attempts)))


def apply_one(target: Target, dom, opts: ApplyOptions) -> ApplyOutcome:
    """apply_domain, where a definition that cannot be read or decided (a bad document, a fault it
    triggers) is that domain's failed outcome and the others carry on; a libvirt error is the
    connection's and goes up."""
    libvirt = libvirt_module()
    try:
        return apply_domain(target, dom, opts)
    except libvirt.libvirtError:
        raise
    except Exception as e:  # noqa: BLE001 - one bad domain stays one bad domain
        return ApplyOutcome(target.uri, dom.name(), FAILED, f"not fixed: {failure(e)}")


def managed_reason(stack: str) -> str:
    """Why apply leaves a guest a stack writes again, and what turns the bit on there."""
    s = orchestrators.BY_NAME[stack]
    since = f" (since {s.knob_since})" if s.knob_since else ""
    cost = f"; cost: {s.cost}" if s.cost else ""
    return (f"not redefined: {s.name} writes this definition again, so a change made here would not last; "
            f"turn the bit on there: {s.knob}{since}{cost} (--include-managed redefines it anyway)")


def apply_domain(target: Target, dom, opts: ApplyOptions) -> ApplyOutcome:
    """Fix one domain's persistent definition; what was done (or why not) is the outcome."""
    libvirt = libvirt_module()
    name, uuid = dom.name(), dom.UUIDString()  # held by the handle: no round trip, cannot fail

    stack = None

    def outcome(kind: str, reason: str, notes: tuple[str, ...] = ()) -> ApplyOutcome:
        return ApplyOutcome(target.uri, name, kind, reason, notes, stack)

    try:
        if not dom.isPersistent():
            return outcome(SKIPPED, "transient domain (no persistent definition to fix)")
        xml = reader.definition(dom, secure=True, persistent=True)
    except libvirt.libvirtError as e:
        return outcome(FAILED, f"vanished before it could be read: {e.get_error_message()}")
    o = process(xml, name, target.facts, opts.cfg, opts.policy, opts.style)
    notes = tuple(o.decision.notes)
    stack = o.resolution.facts.orchestrator
    if not o.changed:
        return outcome(UNCHANGED, o.decision.reason, notes)
    if not fixable(o.changed, True, stack, opts.include_managed):
        return outcome(MANAGED, managed_reason(stack), tuple(n for n in notes if n != stack_note(stack)))
    if opts.diff:
        opts.say(opts.shown_diff(unified_diff(o)).rstrip("\n"), False)
    if opts.changes_nothing:
        return outcome(WOULD_CHANGE, o.decision.reason, notes)
    if not opts.yes:
        question = f"{shown_lines(unified_diff(o))}Define '{shown(name)}' with this change? [y/N] "
        if opts.confirm is None or not opts.confirm(question):
            return outcome(SKIPPED, "not confirmed", notes)
    text = o.output.decode()
    try:
        # The window that remains: from libvirtd answering this compare to it handling defineXML, about one
        # round trip on the open connection (docs/live.md, "Apply"); libvirt has no compare-and-define.
        if reader.definition(dom, secure=True, persistent=True) != xml:
            return outcome(SKIPPED, "changed meanwhile: its definition changed while we worked", notes)
        new = target.conn.defineXML(text)
        after = reader.definition(new, secure=True, persistent=True)
    except libvirt.libvirtError as e:
        return outcome(FAILED, f"define failed, definition unchanged: {e.get_error_message()}", notes)
    if new.UUIDString() != uuid:
        return outcome(FAILED, f"libvirt defined a different domain ({new.UUIDString()})", notes)
    if after != o.output:  # libvirt gives back exactly what was defined: someone defined it after us
        fixed = not process(after, name, target.facts, opts.cfg, opts.policy, opts.style, render=False).changed
        return outcome(SKIPPED, "changed meanwhile: defined, but it was defined again right after by someone else; "
                       "their definition stands (" + ("it has kvm-pv-unhalt" if fixed else "without kvm-pv-unhalt")
                       + "); run again", notes)
    when = "at its next cold boot (the running guest is untouched)" if dom.isActive() else "at its next start"
    return outcome(CHANGED, f"takes effect {when}", notes)

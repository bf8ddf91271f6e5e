"""`virtxml-cpu apply`: fix persistent definitions through libvirt (never the running guest).

Reads each definition with INACTIVE|SECURE (secrets survive), rewrites it with the same pipeline as
files, re-reads it just before defining (no lost updates) and defines it again with the same uuid. Every
domain gets its own outcome: a failed define, an unknown name or a domain that vanished is reported for
that domain and the others carry on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from . import spool
from .config import Config
from .errors import EnvironmentProblem, VirtxmlCpuError, shown
from .hostfacts import HostFacts
from .libvirt_conn import DEFAULT_TIMEOUT, connection_host_facts, libvirt_module, open_connection, open_for_reading
from .pipeline import process
from .report import unified_diff


@dataclass(frozen=True)
class ApplyOptions:
    """Everything `apply` and `watch` decide with, in one place."""

    cfg: Config
    policy: str | None = None
    style: str | None = None
    dry_run: bool = False
    diff: bool = False
    yes: bool = False
    probe: bool = True
    out: TextIO = sys.stdout
    err: TextIO = sys.stderr
    confirm: Callable[[str], bool] | None = None
    timeout: float = DEFAULT_TIMEOUT  # connecting, and any one libvirt call (keepalive)

    @property
    def changes_nothing(self) -> bool:
        return self.dry_run or self.diff


@dataclass(frozen=True)
class Selection:
    """Which domains: named ones, all of them, or the hook's queue."""

    names: tuple[str, ...] = ()
    all_domains: bool = False
    pending: bool = False


@dataclass
class ApplyResult:
    changed: int = 0
    would_change: int = 0
    skipped: int = 0
    unchanged: int = 0
    unknown: int = 0  # names that are no domain there
    failed: int = 0  # defines libvirt refused, domains that vanished mid-way
    failures: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)  # domains handled so far, in order (whatever the outcome)
    todo: list[str] = field(default_factory=list)  # domains not reached yet

    def add(self, other: "ApplyResult") -> None:
        for k in ("changed", "would_change", "skipped", "unchanged", "unknown", "failed"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.failures += other.failures


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
        except Exception as e:  # noqa: BLE001 - a libvirt error: the connection dropped mid-way (keepalive)
            libvirt_error = getattr(sys.modules.get("libvirt"), "libvirtError", None)
            if libvirt_error is None or not isinstance(e, libvirt_error):
                raise
            box["problem"] = f"{uri}: {e.get_error_message()}; {_progress(res)}"

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
        host = connection_host_facts(conn, uri, opts.probe, opts.cfg)
        apply_on(conn, host, which, opts, res)
    finally:
        conn.close()


def apply_on(conn, host: HostFacts, which: Selection, opts: ApplyOptions, res: ApplyResult,
             now: float | None = None) -> None:
    """Apply over an open connection (watch keeps one); per-domain outcomes go into `res`."""
    libvirt = libvirt_module()
    if which.pending:
        for entry in spool.entries(opts.cfg.spool, warn=lambda m: _say(opts.err, m)):
            if now is not None and not entry.due(now):
                continue
            try:
                apply_entry(conn, entry, host, opts, res, now)
            except VirtxmlCpuError as e:  # one entry's problem never stops the queue
                _say(opts.err, f"{shown(entry.name or entry.uuid)}: queued fix not applied: {e}")
        return
    if which.all_domains:
        doms = conn.listAllDomains()
    else:
        doms = []
        for name in which.names:
            try:
                doms.append(conn.lookupByName(name))
            except libvirt.libvirtError as e:
                _say(opts.err, f"{name}: {e.get_error_message()}")
                res.unknown += 1
    res.todo = [d.name() for d in doms]
    for dom in doms:
        apply_domain(conn, dom, host, opts, res)
        res.done.append(res.todo.pop(0))


def apply_entry(conn, entry: spool.Entry, host: HostFacts, opts: ApplyOptions, res: ApplyResult,
                now: float | None = None) -> str:
    """One queued fix: applied and dropped, or kept for later with its reason. A dry run or --diff
    changes nothing, the queue included."""
    libvirt = libvirt_module()
    label = shown(entry.name or entry.uuid)
    try:
        dom = conn.lookupByUUIDString(entry.uuid)
    except libvirt.libvirtError:
        if opts.changes_nothing:
            print(f"{label}: no such domain any more; queued fix would be dropped", file=opts.out)
            return "vanished"
        spool.drop(entry)  # the queued domain is gone: nothing left to fix
        print(f"{label}: no such domain any more; queued fix dropped", file=opts.out)
        return "vanished"
    outcome = apply_domain(conn, dom, host, opts, res)
    if opts.changes_nothing:
        return outcome
    if outcome in ("changed", "unchanged"):
        spool.drop(entry)
    else:
        later = spool.postpone(entry, outcome, now)
        print(f"{shown(dom.name())}: queued fix kept ({outcome}); next try in {spool.delay(later.attempts):.0f}s "
              f"(attempt {later.attempts})", file=opts.out)
    return outcome


def apply_domain(conn, dom, host: HostFacts, opts: ApplyOptions, res: ApplyResult) -> str:
    """Fix one domain's persistent definition. Returns its outcome: changed, unchanged, would-change,
    transient, not confirmed, changed meanwhile, vanished, define failed."""
    libvirt = libvirt_module()
    flags = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
    name, uuid = shown(dom.name()), dom.UUIDString()  # held by the handle: no round trip, cannot fail
    try:
        if not dom.isPersistent():
            print(f"{name}: skipped: transient domain (no persistent definition to fix)", file=opts.out)
            res.skipped += 1
            return "transient"
        xml = dom.XMLDesc(flags).encode()
    except libvirt.libvirtError as e:
        return _failed(opts, res, name, f"vanished before it could be read: {e.get_error_message()}", "vanished")
    o = process(xml, name, host, opts.cfg, opts.policy, opts.style)
    for note in o.decision.notes:
        print(f"{name}: note: {note}", file=opts.out)
    if not o.changed:
        print(f"{name}: unchanged: {o.decision.reason}", file=opts.out)
        res.unchanged += 1
        return "unchanged"
    if opts.diff:
        opts.out.write(unified_diff(o))
    if opts.changes_nothing:
        print(f"{name}: would add kvm-pv-unhalt: {o.decision.reason}", file=opts.out)
        res.would_change += 1
        return "would-change"
    if not opts.yes:
        if opts.confirm is None or not opts.confirm(f"{unified_diff(o)}Define '{name}' with this change? [y/N] "):
            print(f"{name}: skipped: not confirmed", file=opts.out)
            res.skipped += 1
            return "not confirmed"
    text = o.output.decode()
    try:
        # The window that remains: from libvirtd answering this compare to it handling defineXML, about one
        # round trip on the open connection (README); libvirt has no compare-and-define.
        if dom.XMLDesc(flags).encode() != xml:
            return _changed_meanwhile(opts, res, name, "its definition changed while we worked; skipped")
        new = conn.defineXML(text)
        after = new.XMLDesc(flags).encode()
    except libvirt.libvirtError as e:
        return _failed(opts, res, name, f"define failed, definition unchanged: {e.get_error_message()}",
                       "define failed")
    if new.UUIDString() != uuid:
        return _failed(opts, res, name, f"libvirt defined a different domain ({new.UUIDString()})", "define failed")
    if after != o.output:  # libvirt gives back exactly what was defined: someone defined it after us
        fixed = not process(after, name, host, opts.cfg, opts.policy, opts.style, render=False).changed
        return _changed_meanwhile(opts, res, name, "defined, but it was defined again right after by someone "
                                  "else; their definition stands (" + ("it has kvm-pv-unhalt" if fixed else
                                                                       "without kvm-pv-unhalt") + "); run again")
    when = "at its next cold boot (the running guest is untouched)" if dom.isActive() else "at its next start"
    print(f"{name}: added kvm-pv-unhalt; takes effect {when}", file=opts.out)
    res.changed += 1
    return "changed"


def _changed_meanwhile(opts: ApplyOptions, res: ApplyResult, name: str, why: str) -> str:
    _say(opts.err, f"{name}: changed meanwhile: {why}")
    res.skipped += 1
    return "changed meanwhile"


def _failed(opts: ApplyOptions, res: ApplyResult, name: str, why: str, outcome: str) -> str:
    _say(opts.err, f"{name}: {why}")
    res.failed += 1
    res.failures.append(f"{name}: {why}")
    return outcome


def _say(err: TextIO, message: str) -> None:
    print(f"virtxml-cpu: {message}", file=err)

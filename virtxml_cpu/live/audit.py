"""`virtxml-cpu audit`: what every domain on one or more libvirt hosts has, and what it needs.

Read-only. Hosts are audited concurrently, each in a thread of its own with a deadline: a host that
refuses, or accepts and stays silent, is reported as such and never holds the others' results back; each
host's results are handed out as soon as that host is done.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..tables import guest_os
from ..core.config import Config
from ..errors import HostTimeout, VirtxmlCpuError, failure
from ..host import reader
from ..core.precedence import DEFAULT_TIMEOUT, timeouts
from ..host.connection import libvirt_module, open_for_reading
from ..host.sources import HostSources, connection_facts
from ..core.decision import fixable
from ..core.pipeline import process
from ..render import explain
from ..render.commands import stack_command
from .records import OK, TIMED_OUT, UNREACHABLE, AuditRow, HostResult, RowDecision

STATES = {0: "no state", 1: "running", 2: "blocked", 3: "paused", 4: "shutdown", 5: "shut off", 6: "crashed",
          7: "suspended"}


def observe_pv_unhalt(dom) -> str:
    """QMP qom-get on vCPU 0 of a running guest (libvirt marks the domain tainted: custom-monitor)."""
    import json

    import libvirt_qemu

    def qmp(cmd):
        return json.loads(libvirt_qemu.qemuMonitorCommand(dom, json.dumps(cmd), 0))["return"]

    path = qmp({"execute": "query-cpus-fast"})[0]["qom-path"]
    return "on" if qmp({"execute": "qom-get", "arguments": {"path": path, "property": "kvm-pv-unhalt"}}) else "off"


@dataclass(frozen=True)
class AuditOptions:
    """What an audit reads and how: one object from the shell to every host and domain."""

    cfg: Config
    policy: str | None = None
    style: str | None = None
    names: tuple[str, ...] = ()  # empty: every domain
    observe: bool = False  # also ask the running QEMU (QMP qom-get)
    sources: HostSources | None = None  # the flags' and config's; None: the config's, /dev/kvm for local URIs
    progress: Callable[[str, int, int], None] | None = None
    timeout: float = DEFAULT_TIMEOUT  # connecting, and any one libvirt call (keepalive)
    host_timeout: float = timeouts(None, Config())[1].value  # the whole host (precedence's default)
    details: bool = False  # each row also carries what explain adds (render.explain.details)


def audit_one(uri: str, dom, host, opts: AuditOptions) -> AuditRow:
    """One domain's row on an open connection (watching a host: the domain an event named); an error is
    the row's, as in audit_host."""
    libvirt = libvirt_module()
    fetched = _fetch(dom, {}, set(), set())
    try:
        return _audit_domain(uri, dom, host, opts, fetched)
    except libvirt.libvirtError as e:
        return AuditRow(uri, dom.name(), fetched.uuid, error=f"vanished while auditing: {e.get_error_message()}")
    except Exception as e:  # noqa: BLE001 - one bad definition is that domain's row
        return AuditRow(uri, dom.name(), fetched.uuid, error=f"cannot be audited: {failure(e)}")


def audit_host(uri: str, opts: AuditOptions) -> HostResult:
    started = time.monotonic()
    try:
        conn = open_for_reading(uri, opts.timeout)  # --observe and domain capabilities need read-write
    except VirtxmlCpuError as e:
        return HostResult(uri, error=str(e), condition=TIMED_OUT if isinstance(e, HostTimeout) else UNREACHABLE,
                          seconds=time.monotonic() - started)
    try:
        return audit_connection(uri, conn, opts, started=started)
    finally:
        conn.close()


def audit_connection(uri: str, conn, opts: AuditOptions, host=None, started: float | None = None) -> HostResult:
    """audit_host on a connection already open (left open); `host`: its facts when already assembled."""
    libvirt = libvirt_module()
    started = time.monotonic() if started is None else started
    rows: list[AuditRow] = []
    error = None
    try:
        host = host or connection_facts(opts.sources, opts.cfg, conn, uri)
        # Three list calls whatever the number of domains, and no round trip per name: every domain, the
        # running ones and the transient ones (always running, usually none; the persistent ones would be
        # nearly all of them).
        listed = conn.listAllDomains()
        active = {d.UUIDString() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)}
        transient = {d.UUIDString() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_TRANSIENT)}
        known = {d: d.UUIDString() for d in listed}  # the listing's handles, each UUID asked once
        doms, unknown_names = reader.domains(conn, opts.names, listed)
        rows += [AuditRow(uri, n, error=message) for n, message in unknown_names]  # that name's row, not the host's
        unknown = len(rows)  # the unknown names' rows, before the domains'
        i = 0
        while i < len(doms):
            # A batch of definitions fetched, then read: while Python reads a definition, a reply that comes
            # in wakes libvirt's event loop thread (keepalive), which then waits for the interpreter lock.
            batch, size = [], 0
            while i < len(doms) and len(batch) < FETCH_AHEAD and size < FETCH_AHEAD_BYTES:
                fetched = _fetch(doms[i], known, active, transient)
                batch.append((doms[i], fetched))
                size += fetched.size
                i += 1
            for dom, fetched in batch:
                try:
                    rows.append(_audit_domain(uri, dom, host, opts, fetched))
                except libvirt.libvirtError as e:  # vanished between the listing and the read
                    rows.append(AuditRow(uri, dom.name(), fetched.uuid,
                                         error=f"vanished while auditing: {e.get_error_message()}"))
                except Exception as e:  # noqa: BLE001 - one bad definition is that domain's row, never the host's
                    rows.append(AuditRow(uri, dom.name(), fetched.uuid, error=f"cannot be audited: {failure(e)}"))
                if opts.progress:
                    opts.progress(uri, len(rows) - unknown, len(doms))
    except libvirt.libvirtError as e:
        error = e.get_error_message()
    except VirtxmlCpuError as e:
        error = str(e)
    return HostResult(uri, tuple(rows), error, UNREACHABLE if error else OK, time.monotonic() - started)


FETCH_AHEAD = 64  # definitions fetched before they are read
FETCH_AHEAD_BYTES = 4 * 1024 * 1024  # and no more of them than this held at once


class Fetched(namedtuple("Fetched", "uuid flags xml live status size")):
    """What libvirt said about one domain for its row: each answer, or the error asking raised, raised again
    where the row is made, in the order the questions were asked before they were batched (an answer after
    an error was not asked for)."""

    __slots__ = ()
    uuid: str
    flags: object  # (active, persistent)
    xml: object  # the definition, inactive when persistent
    live: object  # the running definition; None when shut off
    status: object  # libvirt's state number; None when shut off
    size: int


def _fetch(dom, known: dict, active: set, transient: set) -> Fetched:
    uuid = known.get(dom)
    answers: list = []
    try:
        if uuid is not None:
            is_active, is_persistent = uuid in active, uuid not in transient
        else:  # not in the listing: asked of the domain itself
            uuid = dom.UUIDString()
            is_active, is_persistent = bool(dom.isActive()), bool(dom.isPersistent())
        answers.append((is_active, is_persistent))
        answers.append(reader.definition(dom, persistent=is_persistent))
        answers.append(reader.running(dom) if is_active else None)
        answers.append(dom.state()[0] if is_active else None)
    except Exception as e:  # noqa: BLE001 - raised again where the row is made, as before batching
        answers.append(e)
    answers += [None] * (4 - len(answers))
    size = sum(len(a) for a in answers[1:3] if isinstance(a, bytes))
    return Fetched(uuid, *answers, size)


def _answer(value):
    if isinstance(value, BaseException):
        raise value
    return value


def _audit_domain(uri: str, dom, host, opts: AuditOptions, fetched: Fetched) -> AuditRow:
    name = dom.name()
    active, persistent = _answer(fetched.flags)
    o = process(_answer(fetched.xml), name, host, opts.cfg, opts.policy, opts.style, render=False)
    d = o.decision
    reason = d.reason if persistent else "transient domain: nothing persistent to fix; " + d.reason
    live_pv_unhalt = observed = None
    if active:
        live = process(_answer(fetched.live), name, host, opts.cfg, opts.policy, opts.style, render=False)
        live_pv_unhalt = live.resolution.features["kvm-pv-unhalt"].qemu_property
        if opts.observe:
            try:
                observed = observe_pv_unhalt(dom)
            except Exception as e:  # noqa: BLE001 - report, keep auditing
                observed = f"error: {e}"
    stack = o.resolution.facts.orchestrator
    return AuditRow(
        uri, name, fetched.uuid, STATES.get(_answer(fetched.status), "?") if active else "shut off", persistent,
        pv_unhalt=o.resolution.features["kvm-pv-unhalt"].state, live_pv_unhalt=live_pv_unhalt,
        observed_pv_unhalt=observed, managed_by=stack,
        guest_os=guest_os.record(o.resolution.facts.os_id) if o.resolution.facts.os_id else None,
        decision=RowDecision(d.action, d.rule, reason, tuple(d.notes)),
        needs_fix=d.action == "inject" and persistent, machine_status=o.resolution.machine_status,
        stack=stack, fixable=fixable(d.action == "inject", persistent, stack),
        stack_command=stack_command(stack, name) if d.action == "inject" else None,
        details=explain.details(o) if opts.details else None)


def audit(uris: list[str], opts: AuditOptions) -> list[HostResult]:
    return list(audit_stream(uris, opts))


def audit_stream(uris: list[str], opts: AuditOptions, workers: int = 16) -> Iterator[HostResult]:
    """Each host's audit as soon as it is done, in completion order. A host still working when its
    `host_timeout` runs out is reported timed out and its thread abandoned (a daemon: it cannot keep the
    process alive), so a wedged host costs the run its deadline, never more."""
    done: queue.Queue[HostResult] = queue.Queue()
    pending = list(reversed(uris))
    running: dict[str, float] = {}  # uri -> deadline
    reported: set[str] = set()
    lock = threading.Lock()

    def start(uri: str) -> None:
        running[uri] = time.monotonic() + opts.host_timeout

        def work():
            try:
                result = audit_host(uri, opts)
            except Exception as e:  # noqa: BLE001 - a host's audit that dies is that host's error, one line
                result = HostResult(uri, error=f"audit stopped: {failure(e)}", condition=UNREACHABLE)
            with lock:
                if uri not in reported:
                    done.put(result)

        threading.Thread(target=work, name=f"audit {uri}", daemon=True).start()

    while pending or running:
        while pending and len(running) < workers:
            start(pending.pop())
        wait = max(0.0, min(running.values()) - time.monotonic())
        try:
            result = done.get(timeout=wait)
        except queue.Empty:
            now = time.monotonic()
            late = [u for u, deadline in running.items() if deadline <= now]
            with lock:
                for uri in late:
                    reported.add(uri)
                    del running[uri]
            for uri in late:
                yield HostResult(uri, error=f"{uri}: not done within {opts.host_timeout:g}s (timed out)",
                                 condition=TIMED_OUT, seconds=opts.host_timeout)
            continue
        with lock:
            reported.add(result.uri)
        running.pop(result.uri, None)
        yield result


def stderr_progress():
    last = [0.0]

    def report(uri: str, i: int, n: int) -> None:
        now = time.monotonic()
        if n >= 50 and (now - last[0] > 1 or i == n):
            last[0] = now
            end = "\n" if i == n or not sys.stderr.isatty() else "\r"
            print(f"audit {uri}: {i}/{n} domains", end=end, file=sys.stderr, flush=True)
    return report

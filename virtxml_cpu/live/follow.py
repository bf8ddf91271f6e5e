"""`virtxml-cpu audit --follow --format json`: the audit of one libvirt host, then each domain's row again
whenever libvirt says it changed, as JSON lines, until stopped. Read-only: nothing is fixed.

A program that shows the host (the Cockpit page) runs this one command and reads everything from it:
a `hello` record (the schema's version), a snapshot (the domain records, the host record, the summary
record, exactly as `audit --format json` writes them), a `hook` record (what `hook status --format json`
says) after the first snapshot, then an `event` record per domain libvirt reports defined, undefined, started, stopped ... carrying that
domain's row as it is now (null when the domain is gone). When the connection is lost or cannot be made
a `connection` record says why (`unreachable`, `timed_out` or `denied`) and the command keeps trying;
once connected again a whole snapshot follows, since events may have been missed meanwhile.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable

from ..errors import AccessDenied, HostTimeout, VirtxmlCpuError
from ..host.connection import close_watching, ensure_event_loop, libvirt_module, open_for_reading
from ..host.sources import connection_facts
from ..render.jsonlines import domain_record, host_record, summary_record
from ..live.records import SCHEMA_VERSION
from .audit import AuditOptions, audit_connection, audit_one

SETTLE = 0.1  # seconds to gather the events of one change (define + start come together) before reading
MAX_BACKOFF = 5.0  # between tries to reach libvirtd: a restarted daemon is seen within this
EVENTS = {0: "defined", 1: "undefined", 2: "started", 3: "suspended", 4: "resumed", 5: "stopped",
          6: "shutdown", 7: "pmsuspended", 8: "crashed"}  # virDomainEventType


def condition(e: VirtxmlCpuError) -> str:
    """A failed connection as a word a program can act on."""
    if isinstance(e, HostTimeout):
        return "timed_out"
    return "denied" if isinstance(e, AccessDenied) else "unreachable"


def follow(uri: str, opts: AuditOptions, write: Callable[[dict], None], stop: threading.Event | None = None,
           hook: Callable[[], dict] | None = None) -> int:
    """Write the records until `stop` is set (SIGTERM or SIGINT when run in the main thread). `write`
    takes one record; `hook` gives the hook's status, written as a `hook` record after the first snapshot
    (it probes the local QEMU: the domains come first)."""
    libvirt = libvirt_module()
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    ensure_event_loop()
    write({"record": "hello", "version": SCHEMA_VERSION, "host": uri})
    todo: queue.Queue[tuple[str, str]] = queue.Queue()

    def on_event(_conn, dom, event, _detail, _opaque):
        todo.put((dom.UUIDString(), EVENTS.get(event, str(event))))

    backoff = 0.5
    last_problem = None
    while not stop.is_set():
        try:
            conn = open_for_reading(uri, opts.timeout)
        except VirtxmlCpuError as e:
            problem = (condition(e), str(e))
            if problem != last_problem:  # said once, not at every retry
                write({"record": "connection", "host": uri, "condition": problem[0], "error": problem[1]})
                last_problem = problem
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        closed = threading.Event()
        conn.registerCloseCallback(lambda *_, ev=closed: ev.set(), None)
        cb = conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_event, None)
        try:
            facts = connection_facts(opts.sources, opts.cfg, conn, uri)
            result = audit_connection(uri, conn, opts, facts)  # after registering: a change meanwhile is an event too
        except (VirtxmlCpuError, libvirt.libvirtError) as e:
            problem = ("unreachable", str(e) if isinstance(e, VirtxmlCpuError) else e.get_error_message())
            write({"record": "connection", "host": uri, "condition": problem[0], "error": problem[1]})
            last_problem = problem
            close_watching(conn, cb)
            stop.wait(backoff)
            continue
        if result.error:  # lost meanwhile: try again
            write({"record": "connection", "host": uri, "condition": result.condition, "error": result.error})
            last_problem = (result.condition, result.error)
            close_watching(conn, cb)
            stop.wait(backoff)
            continue
        backoff, last_problem = 0.5, None
        for row in result.rows:
            write(domain_record(row))
        write(host_record(result))
        write(summary_record([result]))
        if hook is not None:
            write({"record": "hook", "host": uri, "status": hook()})
            hook = None
        while not stop.is_set() and not closed.is_set():
            try:
                first = todo.get(timeout=0.5)
            except queue.Empty:
                continue
            time.sleep(SETTLE)
            latest = {first[0]: first[1]}
            while True:
                try:
                    uuid, what = todo.get_nowait()
                except queue.Empty:
                    break
                latest[uuid] = what
            for uuid, what in latest.items():
                write(_event(uri, conn, uuid, what, facts, opts))
        if not stop.is_set():
            problem = ("unreachable", f"lost the connection to {uri}")
            write({"record": "connection", "host": uri, "condition": problem[0], "error": problem[1]})
            last_problem = problem
        close_watching(conn, cb)
    return 0


def _event(uri: str, conn, uuid: str, what: str, facts, opts: AuditOptions) -> dict:
    """The event record: the domain's row as it is now, or null when libvirt no longer has it."""
    libvirt = libvirt_module()
    try:
        dom = conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError:
        return {"record": "event", "host": uri, "event": what, "uuid": uuid, "row": None}
    return {"record": "event", "host": uri, "event": what, "uuid": uuid,
            "row": domain_record(audit_one(uri, dom, facts, opts))}


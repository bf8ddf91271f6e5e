"""`virtxml-cpu watch`: apply the policy to every domain defined or redefined on a libvirt host.

Listens to lifecycle events (DEFINED added/updated), re-reads and fixes the persistent definition
outside the event callback, applies the hook's queue, reconnects with backoff when libvirtd restarts,
logs to syslog (stderr without /dev/log), and stops cleanly on SIGTERM. Its own redefinition comes back
as an UPDATED event and is then found unchanged: nothing loops.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from dataclasses import replace

from .errors import VirtxmlCpuError
from .hook import Log
from .hostfacts import HostFacts
from .libvirt_conn import libvirt_module, connection_host_facts
from .live import ApplyOptions, ApplyResult, Selection, apply_domain, apply_on

SPOOL_EVERY = 10.0  # seconds between looks at the hook's queue (entries that failed wait longer: spool.py)
MAX_BACKOFF = 30.0


class _LogWriter:
    """A file-like sink for apply's messages: one log line per line."""

    def __init__(self, log: Log):
        self.log, self.buf = log, ""

    def write(self, text: str) -> None:
        self.buf += text
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            if line.strip():
                self.log(line)

    def flush(self) -> None:
        pass


def watch(uri: str | None, opts: ApplyOptions, stop: threading.Event | None = None, log: Log | None = None) -> int:
    """Run until SIGTERM (or `stop`); `opts` says how to decide (its output goes to the log; it defines
    without asking)."""
    libvirt = libvirt_module()
    uri = uri or "qemu:///system"
    cfg = opts.cfg
    log = log or Log(cfg.syslog_socket or "/dev/log")
    out = _LogWriter(log)
    opts = replace(opts, yes=True, confirm=None, out=out, err=out)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    libvirt.virEventRegisterDefaultImpl()
    libvirt.virEventAddTimeout(500, lambda *_: None, None)  # wake the loop regularly so it sees `stop`

    def loop():
        while not stop.is_set():
            libvirt.virEventRunDefaultImpl()

    threading.Thread(target=loop, name="libvirt-events", daemon=True).start()
    todo: queue.Queue[str] = queue.Queue()
    backoff = 1.0

    def on_event(_conn, dom, event, detail, _opaque):
        if event == libvirt.VIR_DOMAIN_EVENT_DEFINED and detail in (
                libvirt.VIR_DOMAIN_EVENT_DEFINED_ADDED, libvirt.VIR_DOMAIN_EVENT_DEFINED_UPDATED):
            todo.put(dom.UUIDString())

    while not stop.is_set():
        try:
            conn = libvirt.open(uri)
        except libvirt.libvirtError as e:
            log(f"cannot connect to {uri} ({e.get_error_message()}); retrying in {backoff:.0f}s", warning=True)
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        backoff = 1.0
        closed = threading.Event()
        conn.registerCloseCallback(lambda *_, ev=closed: ev.set(), None)  # this connection's event only
        cb = conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_event, None)
        try:
            host = connection_host_facts(conn, uri, opts.probe, cfg.qemu_flavour)
        except VirtxmlCpuError as e:
            log(f"host facts unavailable ({e}); continuing without them", warning=True)
            host = HostFacts()
        log(f"watching {uri} for defined domains (policy {opts.policy or cfg.policy or 'compat'})")
        _apply_spool(conn, host, opts, log)
        waited = 0.0
        while not stop.is_set() and not closed.is_set():
            try:
                uuid = todo.get(timeout=0.5)
            except queue.Empty:
                waited += 0.5
                if waited >= SPOOL_EVERY:
                    waited = 0.0
                    _apply_spool(conn, host, opts, log)
                continue
            try:
                apply_domain(conn, conn.lookupByUUIDString(uuid), host, opts, ApplyResult())
            except (libvirt.libvirtError, VirtxmlCpuError) as e:
                log(f"{uuid}: not fixed: {e}", warning=True)
        if closed.is_set() and not stop.is_set():
            log(f"lost the connection to {uri}; reconnecting", warning=True)
        try:
            conn.domainEventDeregisterAny(cb)
            conn.close()
        except libvirt.libvirtError:
            pass
    log("stopped")
    return 0


def _apply_spool(conn, host, opts: ApplyOptions, log) -> None:
    """The hook's queue, over the watch's own connection; entries not yet due are left for later."""
    try:
        apply_on(conn, host, Selection(pending=True), opts, ApplyResult(), now=time.time())
    except (VirtxmlCpuError, libvirt_module().libvirtError) as e:
        log(f"queued fixes not applied: {e}", warning=True)

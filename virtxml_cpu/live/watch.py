"""`virtxml-cpu watch`: apply the policy to every domain defined or redefined on a libvirt host.

Listens to lifecycle events (DEFINED added/updated), re-reads and fixes the persistent definition
outside the event callback, applies the hook's queue, reconnects with backoff when libvirtd restarts,
logs to syslog (stderr without /dev/log), and stops cleanly on SIGTERM. Its own redefinition comes back
as an UPDATED event and is then found unchanged: nothing loops.
"""

from __future__ import annotations

import hashlib
import queue
import signal
import threading
import time
from dataclasses import replace

from ..core import precedence
from ..errors import EXIT_ENVIRONMENT, EXIT_OK, EnvironmentProblem, VirtxmlCpuError
from ..hook.logline import Log
from ..constants import DEFAULT_URI
from ..host import reader
from ..host.connection import close_watching, ensure_event_loop, libvirt_module, open_connection
from ..host.sources import connection_facts
from .apply import ApplyOptions, ApplyResult, Selection, Target, apply_on, apply_one, report
from .records import FAILED, ApplyOutcome

SPOOL_EVERY = 10.0  # seconds between looks at the hook's queue (entries that failed wait longer: hook/spool.py)
MAX_BACKOFF = 30.0


def watch(uri: str | None, opts: ApplyOptions, stop: threading.Event | None = None, log: Log | None = None) -> int:
    """Run until SIGTERM (or `stop`); `opts` says how to decide (it defines without asking). Each outcome
    is logged as `apply` prints it, problems as warnings. Host facts that cannot be assembled are one
    warning and exit 3, with nothing applied: decided without them, a fix would follow other rules than
    the ones asked for (the unit restarts it)."""
    libvirt = libvirt_module()
    uri = uri or DEFAULT_URI
    cfg = opts.cfg
    log = log or Log(cfg.syslog_socket or "/dev/log")
    opts = replace(opts, yes=True, confirm=None, say=lambda line, problem: log(line, warning=problem))
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    ensure_event_loop()  # lifecycle events and keepalive
    todo: queue.Queue[str] = queue.Queue()
    backoff = 1.0
    known: dict[str, str] | None = None  # uuid -> digest of its definition when last seen

    def on_event(_conn, dom, event, detail, _opaque):
        if event == libvirt.VIR_DOMAIN_EVENT_DEFINED and detail in (
                libvirt.VIR_DOMAIN_EVENT_DEFINED_ADDED, libvirt.VIR_DOMAIN_EVENT_DEFINED_UPDATED):
            todo.put(dom.UUIDString())

    while not stop.is_set():
        try:  # bounded: a libvirtd that accepts and does not answer (stopped, wedged) is a timeout
            conn = open_connection(uri, read_only=False, timeout=opts.timeout)
        except EnvironmentProblem as e:
            log(f"cannot connect ({e}); retrying in {backoff:.0f}s", warning=True)
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        backoff = 1.0
        closed = threading.Event()
        conn.registerCloseCallback(lambda *_, ev=closed: ev.set(), None)  # this connection's event only
        cb = conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_event, None)
        try:
            host = connection_facts(opts.sources, cfg, conn, uri)
        except VirtxmlCpuError as e:  # deciding without them would drop --qemu-build, --qemu-version, the config
            log(f"cannot assemble the host facts of {uri} ({e}); applying nothing, stopping", warning=True)
            close_watching(conn, cb)
            return EXIT_ENVIRONMENT
        target = Target(conn, uri, host)
        policy = precedence.policy(None, opts.policy, cfg.policy).value  # a domain's own metadata aside
        log(f"watching {uri} for defined domains (policy {policy}; keepalive "
            f"drops a silent libvirtd after about {opts.timeout:g}s)")
        try:
            known = _sweep(target, opts, log, known)
        except libvirt.libvirtError as e:
            log(f"cannot list the domains ({e.get_error_message()}); reconnecting", warning=True)
            closed.set()
        _apply_spool(target, opts, log)
        waited = 0.0
        while not stop.is_set() and not closed.is_set():
            try:
                uuid = todo.get(timeout=0.5)
            except queue.Empty:
                waited += 0.5
                if waited >= SPOOL_EVERY:
                    waited = 0.0
                    _apply_spool(target, opts, log)
                continue
            digest = _fix(target, opts, uuid, lambda uuid=uuid: conn.lookupByUUIDString(uuid))
            if digest is not None:
                known[uuid] = digest
        if closed.is_set() and not stop.is_set():
            log(f"lost the connection to {uri}; reconnecting", warning=True)
        close_watching(conn, cb)
    log("stopped")
    return EXIT_OK



def _digest(dom) -> str:
    return hashlib.sha256(reader.definition(dom, secure=True, persistent=True)).hexdigest()


def _fix(target: Target, opts: ApplyOptions, label: str, find) -> str | None:
    """Apply to the domain `find` gives; a domain that cannot be fixed is a failed outcome, logged like the
    others. Returns the digest of its definition afterwards (None when it could not be read)."""
    libvirt = libvirt_module()
    try:
        dom = find()
        report(opts, apply_one(target, dom, opts))
        return _digest(dom)
    except (libvirt.libvirtError, VirtxmlCpuError) as e:
        report(opts, ApplyOutcome(target.uri, label, FAILED, f"not fixed: {e}"))
        return None


def _sweep(target: Target, opts: ApplyOptions, log, known: dict[str, str] | None) -> dict[str, str]:
    """What every persistent definition looks like now. After a reconnect, the ones defined or changed
    while no events could arrive (a restart, a stall) get the policy, as a DEFINED event would have had it.
    The first connection only takes the picture: domains defined before watch started are not its work."""
    libvirt = libvirt_module()
    now = {}
    for dom in target.conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_PERSISTENT):
        try:
            now[dom.UUIDString()] = (dom, _digest(dom))
        except libvirt.libvirtError:
            continue  # gone meanwhile
    if known is None:
        return {uuid: digest for uuid, (_dom, digest) in now.items()}
    missed = [dom for uuid, (dom, digest) in now.items() if known.get(uuid) != digest]
    if missed:
        log(f"{len(missed)} domain(s) defined or changed while not connected: applying the policy")
    out = {uuid: digest for uuid, (_dom, digest) in now.items()}
    for dom in missed:
        digest = _fix(target, opts, dom.name(), lambda dom=dom: dom)
        if digest is not None:
            out[dom.UUIDString()] = digest
    return out


def _apply_spool(target: Target, opts: ApplyOptions, log) -> None:
    """The hook's queue, over the watch's own connection; entries not yet due are left for later."""
    try:
        apply_on(target, Selection(pending=True), opts, ApplyResult(), now=time.time())
    except (VirtxmlCpuError, libvirt_module().libvirtError) as e:
        log(f"queued fixes not applied: {e}", warning=True)

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .config import Config
from .errors import HostTimeout, VirtxmlCpuError
from .libvirt_conn import DEFAULT_TIMEOUT, HOST_TIMEOUT_FACTOR, connection_host_facts, libvirt_module, open_for_reading
from .pipeline import process

STATES = {0: "no state", 1: "running", 2: "blocked", 3: "paused", 4: "shutdown", 5: "shut off", 6: "crashed",
          7: "suspended"}


@dataclass
class HostAudit:
    uri: str
    rows: list[dict] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    timed_out: bool = False  # the host accepted the connection but did not answer in time

    @property
    def condition(self) -> str:
        return "timed out" if self.timed_out else ("unreachable" if self.error else "ok")


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
    probe: bool = True  # read /dev/kvm for local URIs
    progress: Callable[[str, int, int], None] | None = None
    timeout: float = DEFAULT_TIMEOUT  # connecting, and any one libvirt call (keepalive)
    host_timeout: float = HOST_TIMEOUT_FACTOR * DEFAULT_TIMEOUT  # the whole host


def audit_host(uri: str, opts: AuditOptions) -> HostAudit:
    started = time.monotonic()
    result = HostAudit(uri)
    try:
        libvirt = libvirt_module()
        conn = open_for_reading(uri, opts.timeout)  # --observe and domain capabilities need read-write
    except VirtxmlCpuError as e:
        result.error, result.timed_out = str(e), isinstance(e, HostTimeout)
        result.seconds = time.monotonic() - started
        return result
    try:
        host = connection_host_facts(conn, uri, opts.probe, opts.cfg)
        doms = []
        for n in opts.names:  # an unknown name is that name's row, not the host's failure
            try:
                doms.append(conn.lookupByName(n))
            except libvirt.libvirtError as e:
                result.rows.append({"host": uri, "domain": n, "error": e.get_error_message(), "needs_work": False})
        doms = doms if opts.names else conn.listAllDomains()
        # Two list calls instead of two round trips per domain.
        persistent = {d.UUIDString() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_PERSISTENT)}
        active = {d.UUIDString() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)}
        for i, dom in enumerate(doms, 1):
            uuid = dom.UUIDString()
            try:
                result.rows.append(_audit_domain(uri, dom, host, opts, uuid in active, uuid in persistent))
            except libvirt.libvirtError as e:  # vanished between the listing and the read
                result.rows.append({"host": uri, "domain": dom.name(), "uuid": uuid, "needs_work": False,
                                    "error": f"vanished while auditing: {e.get_error_message()}"})
            if opts.progress:
                opts.progress(uri, i, len(doms))
    except libvirt.libvirtError as e:
        result.error = e.get_error_message()
    except VirtxmlCpuError as e:
        result.error = str(e)
    finally:
        conn.close()
        result.seconds = time.monotonic() - started
    return result


def _audit_domain(uri: str, dom, host, opts: AuditOptions, active: bool, persistent: bool) -> dict:
    libvirt = libvirt_module()
    name = dom.name()
    state = STATES.get(dom.state()[0], "?") if active else "shut off"
    row = {"host": uri, "domain": name, "uuid": dom.UUIDString(), "state": state, "persistent": persistent}
    flags = libvirt.VIR_DOMAIN_XML_INACTIVE if persistent else 0
    o = process(dom.XMLDesc(flags).encode(), name, host, opts.cfg, opts.policy, opts.style, render=False)
    row["pv_unhalt"] = o.resolution.features["kvm-pv-unhalt"].state
    row["decision"] = {"action": o.decision.action, "rule": o.decision.rule, "reason": o.decision.reason,
                       "notes": list(o.decision.notes)}
    row["managed_by"] = o.resolution.facts.orchestrator
    row["needs_work"] = o.decision.action == "inject" and bool(persistent)
    if active:
        live = process(dom.XMLDesc(0).encode(), name, host, opts.cfg, opts.policy, opts.style, render=False)
        row["live_pv_unhalt"] = live.resolution.features["kvm-pv-unhalt"].qemu_property
        if opts.observe:
            try:
                row["observed_pv_unhalt"] = observe_pv_unhalt(dom)
            except Exception as e:  # noqa: BLE001 - report, keep auditing
                row["observed_pv_unhalt"] = f"error: {e}"
    if not persistent:
        row["decision"]["reason"] = "transient domain: nothing persistent to fix; " + row["decision"]["reason"]
    return row


def audit(uris: list[str], opts: AuditOptions) -> list[HostAudit]:
    return list(audit_stream(uris, opts))


def audit_stream(uris: list[str], opts: AuditOptions, workers: int = 16) -> Iterator[HostAudit]:
    """Each host's audit as soon as it is done, in completion order. A host still working when its
    `host_timeout` runs out is reported timed out and its thread abandoned (a daemon: it cannot keep the
    process alive), so a wedged host costs the run its deadline, never more."""
    done: queue.Queue[HostAudit] = queue.Queue()
    pending = list(reversed(uris))
    running: dict[str, float] = {}  # uri -> deadline
    reported: set[str] = set()
    lock = threading.Lock()

    def start(uri: str) -> None:
        running[uri] = time.monotonic() + opts.host_timeout

        def work():
            result = audit_host(uri, opts)
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
                yield HostAudit(uri, error=f"{uri}: not done within {opts.host_timeout:g}s (timed out)",
                                seconds=opts.host_timeout, timed_out=True)
            continue
        with lock:
            reported.add(result.uri)
        running.pop(result.uri, None)
        yield result


TABLE_HEADER = (f"{'HOST':<28} {'DOMAIN':<24} {'STATE':<9} {'PV-UNHALT':<9} {'LIVE':<5} {'QEMU':<5} "
                f"{'DECISION':<7} REASON")


def table_rows(h: HostAudit) -> list[str]:
    """One host's rows of the table (printed as soon as the host is done)."""
    lines = []
    if h.error:
        lines.append(f"{h.uri:<28} {'-':<24} {h.condition.upper():<9} {h.error}")
    for r in h.rows:
        if "error" in r:
            lines.append(f"{h.uri:<28} {r['domain']:<24} {'ERROR':<9} {r['error']}")
            continue
        lines.append(f"{h.uri:<28} {r['domain']:<24} {r['state']:<9} {r['pv_unhalt']:<9} "
                     f"{r.get('live_pv_unhalt', '-'):<5} {r.get('observed_pv_unhalt', '-'):<5} "
                     f"{('FIX' if r['needs_work'] else 'ok'):<7} {r['decision']['reason']}")
    return lines


def table(results: list[HostAudit]) -> str:
    return "\n".join([TABLE_HEADER] + [line for h in results for line in table_rows(h)])


def summary(results: list[HostAudit]) -> str:
    rows = [r for h in results for r in h.rows if "error" not in r]
    errors = sum("error" in r for h in results for r in h.rows)
    per = sum(h.seconds for h in results if not h.error) / max(1, len(rows))
    ok = [h for h in results if not h.error]
    text = (f"{len(rows)} domains on {len(ok)} host(s): {sum(r['needs_work'] for r in rows)} need "
            f"kvm-pv-unhalt, {sum(r['pv_unhalt'] == 'on' for r in rows)} have it ({per * 1000:.1f} ms per domain)")
    if errors:
        text += f"; {errors} domain(s) not audited (unknown or vanished)"
    for condition in ("unreachable", "timed out"):
        hosts = [h.uri for h in results if h.condition == condition]
        if hosts:
            text += f"; {condition}: {', '.join(hosts)}"
    return text


def summary_record(results: list[HostAudit]) -> dict:
    """The summary as data: each condition separately, so a monitoring check can alert on each."""
    rows = [r for h in results for r in h.rows if "error" not in r]
    return {"summary": {
        "hosts": len(results),
        "hosts_ok": sum(h.condition == "ok" for h in results),
        "unreachable": [h.uri for h in results if h.condition == "unreachable"],
        "timed_out": [h.uri for h in results if h.condition == "timed out"],
        "domains": len(rows),
        "need_fix": sum(bool(r["needs_work"]) for r in rows),
        "have_pv_unhalt": sum(r["pv_unhalt"] == "on" for r in rows),
        "domain_errors": sum("error" in r for h in results for r in h.rows),
    }}


def stderr_progress():
    last = [0.0]

    def report(uri: str, i: int, n: int) -> None:
        now = time.monotonic()
        if n >= 50 and (now - last[0] > 1 or i == n):
            last[0] = now
            end = "\n" if i == n or not sys.stderr.isatty() else "\r"
            print(f"audit {uri}: {i}/{n} domains", end=end, file=sys.stderr, flush=True)
    return report

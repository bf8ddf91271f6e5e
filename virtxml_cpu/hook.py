"""The libvirt qemu hook's work: decide at `prepare`, log, refuse (enforce) or queue (queue mode).

Never calls libvirt (the daemon is waiting for us), never changes the XML (prepare ignores stdout;
migrate/restore must keep the guest ABI), and fails open: any error is logged and the guest starts.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time

from . import config as configmod
from .hostfacts import HostFacts, probe_kvm, probe_local_qemu
from .pipeline import process
from .xmlio import MAX_INPUT_BYTES

SYSLOG_SOCKET = "/dev/log"
EMULATOR = re.compile(rb"<emulator>([^<]{1,4096})</emulator>")
from .domain import OWN_NS  # noqa: E402


class Log:
    """One line per event to syslog/journald through a datagram socket, else to stderr."""

    def __init__(self, path: str = SYSLOG_SOCKET):
        self.path = path

    def __call__(self, message: str, warning: bool = False, fallback: bool = True) -> None:
        pri = 8 + (4 if warning else 6)  # facility user, severity warning/info
        line = f"<{pri}>virtxml-cpu[{os.getpid()}]: {message}"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.connect(self.path)
                s.send(line.encode("utf-8", "replace"))
        except OSError:
            if fallback:
                sys.stderr.write(f"virtxml-cpu: {message}\n")


def _kv(**fields) -> str:
    return " ".join(f"{k}={json.dumps(v) if isinstance(v, str) and (' ' in v or not v) else v}"
                    for k, v in fields.items())


def hook_host_facts(data: bytes, cfg) -> HostFacts:
    """/dev/kvm, and the QEMU build: configured, else the domain's <emulator> --version (the hook must not
    call back into libvirt, so capabilities are out of reach)."""
    facts = probe_kvm()
    if cfg.qemu_flavour:
        return facts.merged(HostFacts(qemu_flavour=cfg.qemu_flavour, flavour_source=f"qemu_flavour in {cfg.path}"))
    m = EMULATOR.search(data)
    emulator = m.group(1).decode("utf-8", "replace").strip() if m else "qemu-system-x86_64"
    cache = os.path.join(os.path.dirname(cfg.spool.rstrip("/")) or ".", "qemu-version.json")
    return facts.merged(probe_local_qemu(emulator, cache))


def enforce_message(name: str, why: str) -> str:
    """The one line `virsh start` shows: what is missing, the fix, the exemption."""
    return (f"virtxml-cpu: refusing to start '{name}': it lacks kvm-pv-unhalt (paravirtual spinlocks; {why}). "
            f"Fix: virtxml-cpu apply {name} --yes, then start it. "
            f"Exempt: add <vxc:cpu xmlns:vxc='{OWN_NS}' policy='never'/> to its <metadata>.")


def run(argv: list[str], mode: str | None = None, config_path: str | None = None,
        stdin=None, log: Log | None = None) -> int:
    """Hook entry: argv = [domain, op, subop, extra]. Returns the exit status for libvirt."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    name, op = (argv + ["-", "-"])[:2]
    log = log or Log()
    try:
        cfg = configmod.load(config_path)
    except Exception as e:  # noqa: BLE001 - fail open
        log(f"domain={name} op={op} config unusable ({e}); guest not checked", warning=True)
        return 0
    log = Log(cfg.syslog_socket) if cfg.syslog_socket and log.path == SYSLOG_SOCKET else log
    try:
        data = stdin.read(MAX_INPUT_BYTES + 1)
        outcome = process(data, name, hook_host_facts(data, cfg), cfg, render=False)
    except Exception as e:  # noqa: BLE001 - fail open, whatever went wrong
        log(f"domain={name} op={op} cannot evaluate ({type(e).__name__}: {e}); guest not checked", warning=True)
        return 0
    r, d = outcome.resolution, outcome.decision
    hook_mode = cfg.hook_mode or mode or "audit"
    fields = dict(domain=r.facts.name or name, uuid=r.facts.uuid or "-", op=op,
                  machine=r.machine.label(), cpu_mode=r.facts.cpu_mode,
                  pv_unhalt=r.features["kvm-pv-unhalt"].state, decision=d.action, rule=d.rule, mode=hook_mode)
    if r.facts.orchestrator:
        fields["managed_by"] = r.facts.orchestrator  # its definition is regenerated: see the note
    if op in ("migrate", "restore"):
        extra = " needs a cold boot to gain kvm-pv-unhalt (guest ABI is fixed here)" if d.action == "inject" else ""
        log(_kv(**fields, reason=d.reason) + extra)
        return 0  # print nothing: the XML stays as it is
    if d.action == "inject" and hook_mode == "enforce":
        log(_kv(**fields, reason=d.reason, result="refused"), warning=True, fallback=False)
        v = r.features["kvm-pv-unhalt"]
        why = f"{v.state} from {v.source} on {r.machine.label()}, CPU {r.facts.cpu_mode}"
        sys.stderr.write(enforce_message(r.facts.name or name, why) + "\n")
        return 1
    if d.action == "inject" and hook_mode == "queue":
        try:
            from . import spool  # queue mode only: the other paths do not pay for it

            spool.write(cfg.spool, r.facts.uuid, {"name": r.facts.name, "rule": d.rule, "reason": d.reason,
                                                  "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            fields["queued"] = cfg.spool
        except OSError as e:
            log(f"domain={name} cannot queue the fix in {cfg.spool}: {e}", warning=True)
    log(_kv(**fields, reason=d.reason))
    return 0

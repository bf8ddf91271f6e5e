"""The libvirt qemu hook's work: decide at `prepare`, log, refuse (enforce) or queue (queue mode).

Never calls libvirt (the daemon is waiting for us), never changes the XML (prepare ignores stdout;
migrate/restore must keep the guest ABI), and fails open: any error is logged and the guest starts. Every
line is logfmt fields only; an error's text is one quoted `error=` field, so nothing in it (a domain name)
can add fields.
"""

from __future__ import annotations

import os
import sys
import time

from . import config as configmod
from .domain import OWN_NS, DomainFacts, canonical_uuid
from .errors import shown
from .hostfacts import HostFacts
from .hostsrc import HostSources, assemble
from .machines import format_version
from .logline import SYSLOG_SOCKET, Log, field, kv
from .pipeline import decide, read
from .xmlio import MAX_INPUT_BYTES

__all__ = ["Log", "SYSLOG_SOCKET", "hook_host_facts", "run"]


def hook_sources(dom: DomainFacts, cfg, caps_dir: str | None = None) -> HostSources:
    """The hook's sources: the config, libvirt's capabilities cache for the domain's devices/emulator
    (release, aliases, the build its package string names), /dev/kvm. Nothing is executed (the hook must
    not run a path a domain definition names) and libvirt is not called back."""
    digests = os.path.join(os.path.dirname(cfg.spool.rstrip("/")) or "/", "qemu-caps")  # beside the spool
    return HostSources(config=cfg, caps_cache=dom.emulator or "", caps_dir=caps_dir, digest_dir=digests, kvm=True)


def hook_host_facts(dom: DomainFacts, cfg, caps_dir: str | None = None) -> HostFacts:
    return assemble(hook_sources(dom, cfg, caps_dir))


def enforce_message(name: str, why: str) -> str:
    """The one line `virsh start` shows: what is missing, the fix, the exemption."""
    name = shown(name)
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
        log(kv(domain=name, op=op, result="guest not checked", error=f"config unusable: {e}"), warning=True)
        return 0
    log = Log(cfg.syslog_socket) if cfg.syslog_socket and log.path == SYSLOG_SOCKET else log
    try:
        doc = read(stdin.read(MAX_INPUT_BYTES + 1), name, render=False)
        host = hook_host_facts(doc.facts, cfg)  # from the domain's own devices/emulator, read from this one parse
        outcome = decide(doc, host, cfg)
    except Exception as e:  # noqa: BLE001 - fail open, whatever went wrong
        log(kv(domain=name, op=op, result="guest not checked", error=f"cannot evaluate: {type(e).__name__}: {e}"),
            warning=True)
        return 0
    r, d = outcome.resolution, outcome.decision
    hook_mode = cfg.hook_mode or mode or "audit"
    uuid = canonical_uuid(r.facts.uuid)
    fields = dict(domain=r.facts.name or name, uuid=uuid or "-", op=op,
                  machine=r.machine.label(), cpu_mode=r.facts.cpu_mode,
                  pv_unhalt=r.features["kvm-pv-unhalt"].state, decision=d.action, rule=d.rule, mode=hook_mode)
    fields["qemu"] = host.qemu_flavour or "unknown"
    fields["release"] = format_version(host.qemu_version) if host.qemu_version else "unknown"
    unused = "; ".join(host.unused)  # each source that could not be used, and why
    if not host.qemu_flavour:
        fields["qemu_basis"] = f"build unknown: {unused or 'no source names it'}"
    elif unused:
        fields["unused"] = unused
    if r.facts.orchestrator:
        fields["managed_by"] = r.facts.orchestrator  # its definition is regenerated: see the note
    if op in ("migrate", "restore"):
        extra = " needs a cold boot to gain kvm-pv-unhalt (guest ABI is fixed here)" if d.action == "inject" else ""
        log(kv(**fields, reason=d.reason) + extra)
        return 0  # print nothing: the XML stays as it is
    if d.action == "inject" and hook_mode == "enforce":
        log(kv(**fields, reason=d.reason, result="refused"), warning=True, fallback=False)
        v = r.features["kvm-pv-unhalt"]
        why = f"{v.state} from {v.source} on {r.machine.label()}, CPU {r.facts.cpu_mode}"
        sys.stderr.write(enforce_message(r.facts.name or name, why) + "\n")
        return 1
    if d.action == "inject" and hook_mode == "queue":
        from . import spool  # queue mode only: the other paths do not pay for it

        try:
            if uuid is None:
                raise spool.Refused(f"the domain's uuid {field(r.facts.uuid or '')} is not a uuid")
            spool.write(cfg.spool, uuid, {"domain": r.facts.name, "rule": d.rule, "reason": d.reason,
                                          "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            fields["queued"] = cfg.spool
        except (OSError, spool.Refused) as e:
            log(kv(domain=name, spool=cfg.spool, result="fix not queued", error=str(e)), warning=True)
    log(kv(**fields, reason=d.reason))
    return 0

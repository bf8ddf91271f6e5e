"""The libvirt qemu hook's work: decide at `prepare`, log, refuse (enforce) or queue (queue mode).

Never calls libvirt (the daemon is waiting for us), never changes the XML (prepare ignores stdout;
migrate/restore must keep the guest ABI), and fails open: any error is logged and the guest starts. Every
line is logfmt fields only; an error's text is one quoted `error=` field, so nothing in it (a domain name)
can add fields.
"""

from __future__ import annotations

import os
import sys

from ..constants import CAPS_DIGESTS_BESIDE_SPOOL, KVM_DEVICE, MAX_DEFINITION_BYTES, beside_spool
from ..core import config, precedence
from . import digest
from ..host import caps_cache
from ..core.domain import DomainFacts, canonical_uuid
from .act import act, enforce_message
from ..core.hostfacts import HostFacts
from ..host.sources import HostSources, assemble
from .logline import SYSLOG_SOCKET, Log, kv
from ..tables.version import format_version
from ..core.pipeline import decided, read
from ..tables import orchestrators

__all__ = ["Log", "SYSLOG_SOCKET", "enforce_message", "evaluate", "hook_host_facts", "hook_sources", "run"]


def hook_sources(dom: DomainFacts, cfg, caps_dir: str | None = None) -> HostSources:
    """The hook's sources: the config, libvirt's capabilities cache for the domain's devices/emulator
    (release, aliases, the build its package string names), /dev/kvm. Nothing is executed (the hook must
    not run a path a domain definition names) and libvirt is not called back."""
    digests = beside_spool(cfg.spool, CAPS_DIGESTS_BESIDE_SPOOL)
    return HostSources(config=cfg, caps_cache=dom.emulator or "", caps_dir=caps_dir, digest_dir=digests, kvm=True)


def hook_host_facts(dom: DomainFacts, cfg, caps_dir: str | None = None) -> HostFacts:
    return assemble(hook_sources(dom, cfg, caps_dir))


def dependencies(dom: DomainFacts, caps_dir: str | None = None) -> list[str]:
    """The files hook_host_facts reads besides the definition and the config: a digest entry stands only
    while each looks as it did."""
    caps_dir = caps_dir or caps_cache.CACHE_DIR
    paths = [KVM_DEVICE, caps_dir]
    if dom.emulator and os.path.isabs(dom.emulator) and "\0" not in dom.emulator:
        paths.append(caps_cache.cache_file(dom.emulator, caps_dir))
    return paths


def run(argv: list[str], mode: str | None = None, config_path: str | None = None,
        stdin=None, log: Log | None = None, data: bytes | None = None, digest_dir: str | None = None,
        digest_key: str | None = None, config_raw: bytes | None | bool = False) -> int:
    """Hook entry: argv = [domain, op, subop, extra]. Returns the exit status for libvirt. With
    `digest_dir` and `digest_key` (hook/entry.py), the verdict is kept for the next start; `config_raw` is the
    config's bytes that key was made of (None: no file; False: not read yet)."""
    name, op = (argv + ["-", "-"])[:2]
    log = log or Log()
    try:
        raw = config.read_raw(config_path, environ={}) if config_raw is False else config_raw
        cfg = config.from_raw(raw, config_path, environ={})  # only the rendered path: no variable steers root
    except Exception as e:  # noqa: BLE001 - fail open
        log(kv(domain=name, op=op, result="guest not checked", error=f"config unusable: {e}"), warning=True)
        return 0
    log = Log(cfg.syslog_socket) if cfg.syslog_socket and log.path == SYSLOG_SOCKET else log
    try:
        if data is None:
            data = (stdin if stdin is not None else sys.stdin.buffer).read(MAX_DEFINITION_BYTES + 1)
        verdict, deps = evaluate(data, name, cfg, mode)
    except Exception as e:  # noqa: BLE001 - fail open, whatever went wrong
        log(kv(domain=name, op=op, result="guest not checked", error=f"cannot evaluate: {type(e).__name__}: {e}"),
            warning=True)
        return 0
    if digest_dir and digest_key and deps is not None:
        digest.store(digest_dir, digest_key, verdict, deps)
    return act(verdict, op, log, name=name)


def evaluate(data: bytes, name: str, cfg, mode: str | None) -> tuple[dict, list[tuple[str, str]] | None]:
    """The decision for one definition as the verdict `act` carries out, and the dependencies it read
    (path, identity) as they were before and after (None when one changed meanwhile: not kept). The
    definition decides; `name` (libvirt's, the hook's argv) is the name every line, refusal and queue entry
    gives, even where the definition's <name> says otherwise."""
    doc = read(data, name, render=False)
    before = [(p, digest.identity(p)) for p in dependencies(doc.facts)]
    host = hook_host_facts(doc.facts, cfg)  # from the domain's own devices/emulator, read from this one parse
    o = decided(doc, host, cfg)
    deps = before if all(digest.identity(p) == was for p, was in before) else None
    r, d = o.resolution, o.decision
    chosen_mode = precedence.hook_mode(cfg.hook_mode, mode).value
    uuid = canonical_uuid(r.facts.uuid)
    fields = [("domain", name), ("uuid", uuid or "-"), ("machine", r.machine.label()),
              ("cpu_mode", r.facts.cpu_mode), ("pv_unhalt", r.features["kvm-pv-unhalt"].state),
              ("decision", d.action), ("rule", d.rule), ("mode", chosen_mode)]
    fields.append(("qemu", host.qemu_build or "unknown"))
    fields.append(("release", format_version(host.qemu_version) if host.qemu_version else "unknown"))
    unused = "; ".join(host.unused)  # each source that could not be used, and why
    if not host.qemu_build:
        fields.append(("qemu_basis", f"build unknown: {unused or 'no source names it'}"))
    elif unused:
        fields.append(("unused", unused))
    stack = orchestrators.BY_NAME.get(r.facts.orchestrator) if r.facts.orchestrator else None
    if stack is not None:  # who wrote the definition, whether a change made in libvirt lasts there, its knob
        fields += [("stack", stack.name), ("edits_last", "yes" if stack.edits_last else "no"), ("knob", stack.knob)]
    v = r.features["kvm-pv-unhalt"]
    verdict = {"fields": fields, "name": name, "domain": name, "uuid": uuid or "", "raw_uuid": r.facts.uuid or "",
               "rule": d.rule, "reason": d.reason, "action": d.action, "mode": chosen_mode,
               "why": f"{v.state} from {v.source} on {r.machine.label()}, CPU {r.facts.cpu_mode}",
               "spool": cfg.spool, "syslog": cfg.syslog_socket or "",
               "managed": "yes" if stack and stack.managed else "",  # strings only: the digest keeps them
               "libvirt_config_dir": cfg.libvirt_config_dir}
    if r.facts.name is not None:
        verdict["defined_name"] = r.facts.name  # an incoming mark is left only when it is libvirt's argv
    return verdict, deps

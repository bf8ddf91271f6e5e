"""The hook's Python entry: the shell front (data/qemu-hook) execs an isolated interpreter into `main`.

A repeat start is answered from the decision digest (virtxml_cpu.digest) with the same log line as a full
evaluation plus `cached=yes`, importing neither lxml nor the rule tables; anything else goes to
virtxml_cpu.hook, which evaluates and keeps its verdict for the next start. What both do with a verdict
(log, refuse, queue) is `act`. Fails open: no error here stops a guest.
"""

from __future__ import annotations

import sys

from .logline import SYSLOG_SOCKET, Log, field, kv

HANDLED = (("prepare", "begin"), ("migrate", "begin"), ("restore", "begin"))
MAX_DEFINITION_BYTES = 10 * 1024 * 1024  # xmlio.MAX_INPUT_BYTES (a test keeps them equal)
COLD_BOOT = " needs a cold boot to gain kvm-pv-unhalt (guest ABI is fixed here)"


def main(argv: list[str], stdin=None) -> int:
    """argv as the front passes it: mode, config path, digest directory ('' each: the default), then
    libvirt's domain, operation, sub-operation, extra."""
    mode, config_path, digest_dir = (list(argv[:3]) + ["", "", ""])[:3]
    args = list(argv[3:])
    name, op, sub = (args + ["-", "-", "-"])[:3]
    if (op, sub) not in HANDLED:
        return 0
    stdin = stdin if stdin is not None else sys.stdin.buffer
    data = stdin.read(MAX_DEFINITION_BYTES + 1)
    key = None
    if digest_dir:
        try:
            from . import digest
            from .config import read_raw

            key = digest.key(data, name, mode, config_path, read_raw(config_path or None, environ={}))
            hit = digest.lookup(digest_dir, key)
            if hit is not None:
                return act(hit, op, Log(hit.get("syslog") or SYSLOG_SOCKET), cached=True)
        except Exception:  # noqa: BLE001 - the digest is only a shortcut: evaluate in full
            pass
    try:
        from .hook import run
    except Exception as e:  # noqa: BLE001 - lxml moved or broken: fail open
        sys.stderr.write(f"virtxml-cpu hook: cannot load virtxml_cpu ({e}); guest start not checked\n")
        return 0
    return run(args, mode=mode or None, config_path=config_path or None, data=data,
               digest_dir=digest_dir or None, digest_key=key)


def act(verdict: dict, op: str, log, cached: bool = False) -> int:
    """Log the verdict (one line), and refuse (enforce) or queue (queue mode) a start that lacks the fix.
    migrate and restore print nothing and only log: the guest ABI is fixed there."""
    fields = list(verdict["fields"])
    fields.insert(2, ("op", op))
    fields.append(("reason", verdict["reason"]))
    tail = {"cached": "yes"} if cached else {}
    inject, mode = verdict["action"] == "inject", verdict["mode"]
    if op in ("migrate", "restore"):
        log(kv(**dict(fields), **tail) + (COLD_BOOT if inject else ""))
        return 0
    if inject and mode == "enforce":
        log(kv(**dict(fields), result="refused", **tail), warning=True, fallback=False)
        sys.stderr.write(enforce_message(verdict["name"], verdict["why"]) + "\n")
        return 1
    if inject and mode == "queue":
        import time

        from . import spool  # queue mode only: the other paths do not pay for it

        where = verdict.get("spool", "")
        try:
            if not verdict["uuid"]:
                raise spool.Refused(f"the domain's uuid {field(verdict.get('raw_uuid', ''))} is not a uuid")
            spool.write(where, verdict["uuid"], {"domain": verdict.get("domain") or None, "rule": verdict["rule"],
                                                 "reason": verdict["reason"],
                                                 "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            fields.insert(len(fields) - 1, ("queued", where))
        except (OSError, spool.Refused) as e:
            log(kv(domain=verdict["fields"][0][1], spool=where, result="fix not queued", error=str(e)), warning=True)
    log(kv(**dict(fields), **tail))
    return 0


def enforce_message(name: str, why: str) -> str:
    """The one line `virsh start` shows: what is missing, the fix, the exemption."""
    from .errors import shown

    name = shown(name)
    return (f"virtxml-cpu: refusing to start '{name}': it lacks kvm-pv-unhalt (paravirtual spinlocks; {why}). "
            f"Fix: virtxml-cpu apply {name} --yes, then start it. "
            f"Exempt: add <vxc:cpu xmlns:vxc='{OWN_NS}' policy='never'/> to its <metadata>.")


OWN_NS = "urn:virtxml-cpu:domain:1"  # domain.OWN_NS (a test keeps them equal)

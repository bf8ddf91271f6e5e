"""What the hook does with a verdict, from a full evaluation (virtxml_cpu.hook) or the decision digest
(virtxml_cpu.hookentry): one log line, and a refusal (enforce) or a queued fix (queue mode)."""

from __future__ import annotations

import sys

from .logline import field, kv

COLD_BOOT = " needs a cold boot to gain kvm-pv-unhalt (guest ABI is fixed here)"
OWN_NS = "urn:virtxml-cpu:domain:1"  # domain.OWN_NS (a test keeps them equal)


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

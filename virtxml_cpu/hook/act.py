"""What the hook does with a verdict, from a full evaluation (virtxml_cpu.hook.evaluate) or the decision digest
(virtxml_cpu.hook.entry): one log line, and a refusal (enforce) or a queued fix (queue mode) at a cold
start. `restore begin` and `migrate begin` only leave a mark (virtxml_cpu.hook.incoming) for the `prepare` that
follows them, which then neither refuses nor queues: the guest ABI is fixed there."""

from __future__ import annotations

import sys

from ..constants import LIBVIRT_CONFIG_DIR, OWN_NS, SPOOL_DIR
from . import incoming
from .logline import field, kv

COLD_BOOT = " needs a cold boot to gain kvm-pv-unhalt (guest ABI is fixed here)"


def act(verdict: dict, op: str, log, cached: bool = False, name: str | None = None) -> int:
    """Log the verdict (one line), and refuse (enforce) or queue (queue mode) a cold start that lacks the
    fix. `migrate`/`restore` print nothing and mark the domain `name` (libvirt's argv, as passed) with the
    verdict's uuid (logging only when that fails); the `prepare` of that same name and uuid takes the mark,
    logs that the guest needs a cold boot, and starts it. Without `name` no mark is left or taken. A guest
    the tool cannot fix (a stack writes its definition again; no persistent definition: `name` has no
    config file) is neither refused nor queued: its line says why."""
    fields = list(verdict["fields"])
    fields.insert(2, ("op", op))
    fields.append(("reason", verdict["reason"]))
    tail = {"cached": "yes"} if cached else {}
    inject, mode = verdict["action"] == "inject", verdict["mode"]
    marks = incoming.beside(verdict.get("spool") or SPOOL_DIR)
    if op in incoming.OPS:
        why = incoming.leave(marks, name, verdict.get("defined_name"), verdict["uuid"], op)
        if why:  # its prepare will be taken for a cold start: say so
            log(kv(**dict(fields), result="not marked", error=why, **tail), warning=True)
        return 0
    after = incoming.take(marks, name, verdict["uuid"]) if op == "prepare" else None
    if after:
        fields.insert(3, ("after", after))
        if inject:
            fields = [("decision", "cold-boot") if k == "decision" else (k, v) for k, v in fields]
        log(kv(**dict(fields), **tail) + (COLD_BOOT if inject else ""))
        return 0
    if inject and mode in ("enforce", "queue"):
        not_ours = _not_fixable_here(verdict, name)
        if not_ours:  # apply cannot fix it: refusing or queueing would stop a start nobody here can mend
            fields = [("decision", not_ours) if k == "decision" else (k, v) for k, v in fields]
            log(kv(**dict(fields), **tail))
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


def _not_fixable_here(verdict: dict, name: str | None) -> str | None:
    """`managed` when a stack writes the definition again (its knob is in the line), `transient` when libvirt
    keeps no persistent definition for the domain (virsh create), else None: apply can fix it."""
    if verdict.get("managed"):
        return "managed"
    from .persistent import has_definition

    name = name if name is not None else verdict["name"]
    if has_definition(name, verdict.get("libvirt_config_dir", LIBVIRT_CONFIG_DIR)) is False:
        return "transient"
    return None


def enforce_message(name: str, why: str) -> str:
    """The one line `virsh start` shows: what is missing, the fix (a command that runs as shown), the
    exemption."""
    from ..errors import shown
    from ..render.commands import line

    return (f"virtxml-cpu: refusing to start '{shown(name)}': it lacks kvm-pv-unhalt (paravirtual spinlocks; "
            f"{why}). Fix: {line(['apply', '--yes'], [name])}, then start it. "
            f"Exempt: add <vxc:cpu xmlns:vxc='{OWN_NS}' policy='never'/> to its <metadata>.")

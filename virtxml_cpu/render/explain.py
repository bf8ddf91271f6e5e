"""explain's output: a pipeline.Decided as the table a person reads or the JSON line a program reads, and
rewrite's and apply's unified diff. Pure: it renders and keeps nothing; the JSON line comes in parts (own_json,
resolution_json, decision_json, joined) so that the shell printing many lines can keep the parts a template's
clones share."""

from __future__ import annotations

import difflib
import json

from ..tables import guest_os, orchestrators
from ..core import precedence
from ..core.decision import fixable
from ..errors import shown
from ..core.pipeline import Decided
from ..tables.qemu import PROPERTIES
from .commands import stack_command


# One encoder for every line: json.dumps builds a new one on each call that passes separators.
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_STRING = json.encoder.encode_basestring_ascii  # what that encoder writes for a str (ensure_ascii)


def _features(features) -> dict:
    feats = {}
    for p in PROPERTIES:
        v = features[p]
        feats[p] = {"state": v.state, "source": v.source, "detail": v.detail}
        if v.qom:
            feats[p]["qemu_property"] = v.qom
    return feats


def _shared(r) -> dict:
    """What depends on the resolution alone (not on the domain's name, uuid or the decision). The guest OS
    appears only when the domain names one."""
    guest = {"guest_os": guest_os.record(r.facts.os_id)} if r.facts.os_id else {}
    return {
        "machine": r.facts.machine,
        "machine_resolved": r.machine.alias_of or r.facts.machine,
        "machine_family": r.machine.family,
        "machine_base": r.machine.base,
        "machine_status": r.machine_status,
        "machine_status_reason": r.machine_status_why,
        "qemu_build": r.build,
        "qemu_build_basis": r.build_basis,
        "qemu_release": precedence.described(r.host),
        "cpu_mode": r.facts.cpu_mode,
        "cpu_model": r.model,
        "accel": r.accel,
        "kernel_irqchip": r.irqchip,
        "features": _features(r.features),
        "host_facts": list(r.host.sources),
        "host_facts_unused": list(r.host.unused),
        **guest,
    }


def _stack_parts(o: Decided) -> tuple[dict | None, bool, str | None]:
    """The stack that wrote the document, whether `apply` would change it (a document is taken for a
    persistent definition), and the stack's own command."""
    facts = o.resolution.facts
    changed = o.changed
    return (orchestrators.record(facts.orchestrator), fixable(changed, True, facts.orchestrator),
            stack_command(facts.orchestrator, facts.name) if changed else None)


def _own(o: Decided) -> dict:
    r = o.resolution
    stack, fix, command = _stack_parts(o)
    return {"file": o.label, "domain": r.facts.name, "uuid": r.facts.uuid, "changed": o.changed,
            "stack": stack, "fixable": fix, "stack_command": command}


def own_json(o: Decided) -> str:
    """_COMPACT(_own(o)), written out: the one part of a line encoded for every document, values that need
    no encoder set up and walked (the stack's record, rare, goes through the encoder)."""
    facts = o.resolution.facts
    changed = o.changed
    if facts.orchestrator is None:
        tail = f',"stack":null,"fixable":{"true" if changed else "false"},"stack_command":null}}'
    else:
        stack, fix, command = _stack_parts(o)
        tail = (f',"stack":{_COMPACT(stack)},"fixable":{"true" if fix else "false"},'
                f'"stack_command":{_nullable(command)}}}')
    return (f'{{"file":{_STRING(o.label)},"domain":{_nullable(facts.name)},"uuid":{_nullable(facts.uuid)},'
            f'"changed":{"true" if changed else "false"}' + tail)


def _nullable(text: str | None) -> str:
    return "null" if text is None else _STRING(text)


def _decision(o: Decided) -> dict:
    d = o.decision
    return {"action": d.action, "rule": d.rule, "reason": d.reason, "policy": d.policy,
            "policy_source": o.policy_source, "style": o.style, "notes": list(d.notes)}


DETAIL_KEYS = ("machine", "machine_resolved", "machine_status_reason", "cpu_mode", "cpu_model", "qemu_build",
               "qemu_build_basis", "qemu_release", "features")


def details(o: Decided) -> dict:
    """What explain says beyond an audit row (audit --details): the machine type, CPU mode, QEMU build and
    every property with its source, and the policy the decision followed."""
    shared = _shared(o.resolution)
    return {**{k: shared[k] for k in DETAIL_KEYS}, "policy": o.decision.policy, "policy_source": o.policy_source}


def to_json(o: Decided) -> dict:
    return {**_own(o), "decision": _decision(o), **_shared(o.resolution)}


def resolution_json(o: Decided) -> str:
    """The resolution's part of the JSON line (the same for every clone of a template)."""
    return _COMPACT(_shared(o.resolution))


def decision_json(o: Decided) -> str:
    return _COMPACT(_decision(o))


def joined(own: str, shared: str, decision: str) -> str:
    """One line of JSON from its encoded parts: the same object as to_json."""
    return f'{own[:-1]},"decision":{decision},{shared[1:]}'


def to_json_line(o: Decided) -> str:
    """One line of JSON: the same object as to_json, each part encoded here (joined)."""
    return joined(own_json(o), resolution_json(o), decision_json(o))


def table(o: Decided, verbose: bool = False) -> str:
    r, d = o.resolution, o.decision
    accel = {"kvm": "KVM", "tcg": "TCG"}.get(r.accel, r.accel)
    model = f" ({r.model})" if r.model and r.cpu_kind == "named" else ""
    lines = [f"== {r.facts.name or '?'}  [{o.label}]",
             f"   machine {r.machine.described()}, CPU {r.facts.cpu_mode}{model}, {accel}, kernel_irqchip={r.irqchip}",
             f"   machine status: {r.machine_status} ({r.machine_status_why})",
             f"   QEMU build: {r.build_basis}; {precedence.described(r.host)}"]
    lines.extend(f"   host facts: {u}" for u in r.host.unused)
    if r.facts.os_id:
        row = guest_os.lookup(r.facts.os_id)
        known = f" ({row.name}: {row.effect})" if row else " (no finding about its kernel)"
        lines.append(f"   guest OS: {r.facts.os_id}{known}")
    width = max(len(p) for p in PROPERTIES)
    lines.append(f"   {'FEATURE':<{width}}  {'STATE':<14}  {'SOURCE':<26}  REASON")
    for p in PROPERTIES:
        v = r.features[p]
        detail = v.detail if verbose or len(v.detail) <= 100 else v.detail[:97] + "..."
        lines.append(f"   {p:<{width}}  {v.state:<14}  {v.source:<26}  {detail}")
    verb = "add kvm-pv-unhalt" if d.action == "inject" else "keep as is"
    lines.append(f"   decision: {verb} [{d.rule}, policy {d.policy} from {o.policy_source}]")
    lines.append(f"   why: {d.reason}")
    stack, fix, command = _stack_parts(o)
    if stack is not None:
        lasts = "a change made in libvirt " + ("lasts" if stack["edits_last"] else "does not last")
        since = f" (since {stack['knob_since']})" if stack["knob_since"] else ""
        lines.append(f"   stack: {stack['name']}: {lasts}; apply {'changes' if fix else 'leaves'} it")
        lines.append(f"   knob: {stack['knob']}{since}")
        if stack["cost"]:
            lines.append(f"   cost: {stack['cost']}")
        if command:
            lines.append(f"   stack command: {command}")
    lines.extend(f"   note: {n}" for n in d.notes)
    return "\n".join(shown(line) for line in lines)  # names, machine types, reasons: each line one line


def unified_diff(o: Decided) -> str:
    a = o.source.decode("utf-8").splitlines(keepends=True)
    b = o.output.decode("utf-8").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, fromfile=f"a/{o.label}", tofile=f"b/{o.label}"))

"""Outcome -> the table a person reads, or the JSON a program reads (pure)."""

from __future__ import annotations

import difflib
import json

from .pipeline import Outcome
from .rules import PROPERTIES


def to_json(o: Outcome) -> dict:
    r, d = o.resolution, o.decision
    feats = {}
    for p in PROPERTIES:
        v = r.features[p]
        feats[p] = {"state": v.state, "source": v.source, "detail": v.detail}
        if v.qom:
            feats[p]["qemu_property"] = v.qom
    return {
        "file": o.label,
        "domain": r.facts.name,
        "uuid": r.facts.uuid,
        "machine": r.facts.machine,
        "machine_resolved": r.machine.alias_of or r.facts.machine,
        "machine_family": r.machine.family,
        "qemu_flavour": r.flavour,
        "qemu_flavour_basis": r.flavour_basis,
        "cpu_mode": r.facts.cpu_mode,
        "cpu_model": r.model,
        "accel": r.accel,
        "kernel_irqchip": r.irqchip,
        "features": feats,
        "decision": {"action": d.action, "rule": d.rule, "reason": d.reason, "policy": d.policy,
                     "policy_source": o.policy_source, "style": o.style, "notes": list(d.notes)},
        "host_facts": list(r.host.sources),
        "changed": o.changed,
    }


def to_json_line(o: Outcome) -> str:
    return json.dumps(to_json(o), sort_keys=False, separators=(",", ":"))


def table(o: Outcome, verbose: bool = False) -> str:
    r, d = o.resolution, o.decision
    accel = {"kvm": "KVM", "tcg": "TCG"}.get(r.accel, r.accel)
    model = f" ({r.model})" if r.model and r.cpu_kind == "named" else ""
    lines = [f"== {r.facts.name or '?'}  [{o.label}]",
             f"   machine {r.machine.label()}, CPU {r.facts.cpu_mode}{model}, {accel}, kernel_irqchip={r.irqchip}",
             f"   QEMU build: {r.flavour_basis}"]
    width = max(len(p) for p in PROPERTIES)
    lines.append(f"   {'FEATURE':<{width}}  {'STATE':<14}  {'SOURCE':<26}  REASON")
    for p in PROPERTIES:
        v = r.features[p]
        detail = v.detail if verbose or len(v.detail) <= 100 else v.detail[:97] + "..."
        lines.append(f"   {p:<{width}}  {v.state:<14}  {v.source:<26}  {detail}")
    verb = "add kvm-pv-unhalt" if d.action == "inject" else "keep as is"
    lines.append(f"   decision: {verb} [{d.rule}, policy {d.policy} from {o.policy_source}]")
    lines.append(f"   why: {d.reason}")
    lines.extend(f"   note: {n}" for n in d.notes)
    return "\n".join(lines)


def unified_diff(o: Outcome) -> str:
    a = o.source.decode("utf-8").splitlines(keepends=True)
    b = o.output.decode("utf-8").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, fromfile=f"a/{o.label}", tofile=f"b/{o.label}"))

"""One answer from the answers under several QEMU builds (pure): which builds a domain is resolved under
is precedence.builds_for's (the one precedence rule); here they are only merged. A property on which they
disagree is host-dependent, each build's answer in its detail.
"""

from __future__ import annotations

from . import lifecycle
from .machines import Machine
from .answer import HOST, SRC_BUILD, Resolution, Value
from ..tables.properties import PROPERTIES


def merge(results: list[Resolution]) -> Resolution:
    """One Resolution for several possible builds: agreement stays, disagreement is host-dependent."""
    first = results[0]
    features: dict[str, Value] = {}
    for p in PROPERTIES:
        vals = [r.features[p] for r in results]
        if len({v.qemu_property for v in vals}) == 1 and len({v.state for v in vals}) == 1:
            features[p] = vals[0]
        else:
            features[p] = Value(HOST, SRC_BUILD, "depends on the QEMU build: " + "; ".join(
                f"{r.build}: {v.state} ({v.source})" for r, v in zip(results, vals)))
    machines = [r.machine for r in results]
    lows = [m.low for m in machines]
    highs = [m.high for m in machines]
    machine = Machine(first.machine.name, first.machine.family if len({m.family for m in machines}) == 1 else "unknown",
                      "|".join(r.build for r in results),
                      None if None in lows else min(lows), None if None in highs else max(highs),
                      alias_of=first.machine.alias_of if len({m.alias_of for m in machines}) == 1 else None,
                      irqchip=first.irqchip, how="; ".join(f"{r.build}: {r.machine.how}" for r in results))
    refusals = {r.start_refusal for r in results}
    statuses = {r.machine_status for r in results}
    status, status_why = (first.machine_status, first.machine_status_why) if len(statuses) == 1 else (
        lifecycle.OFFERED, "depends on the QEMU build: " + "; ".join(f"{r.build}: {r.machine_status}"
                                                                    for r in results))
    support = {p: first.support[p] if len({r.support[p][0] for r in results}) == 1
               else (None, "depends on the QEMU build") for p in PROPERTIES}
    return Resolution(first.facts, machine, first.accel, first.irqchip, first.cpu_kind, first.model, features,
                      first.explicit_unhalt, tuple(dict.fromkeys(w for r in results for w in r.warnings)),
                      start_refusal=first.start_refusal if len(refusals) == 1 else None, host=first.host,
                      build="|".join(r.build for r in results), support=support,
                      cpu_from_commandline=first.cpu_from_commandline, machine_status=status,
                      machine_status_why=status_why, qemu_refusal=first.qemu_refusal)

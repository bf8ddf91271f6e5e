"""Which QEMU build(s) a domain is resolved under, and one answer from several (pure).

The host's build when its machine table has the machine; else every build whose table has it (merged:
a property on which they disagree is host-dependent, each build's answer in its detail).
"""

from __future__ import annotations

from . import lifecycle
from .hostfacts import HostFacts
from .machines import Machine, claimants, classify
from .resolution import HOST, SRC_FLAVOUR, Resolution, Value
from ..tables.builds.known import FLAVOURS, UPSTREAM, Flavour
from ..tables.properties import PROPERTIES


def candidates(name: str | None, host: HostFacts) -> tuple[list[tuple[Flavour, Machine]], str, list[str]]:
    machine_label = name or "(none: the default machine)"
    if host.qemu_flavour:
        chosen = FLAVOURS[host.qemu_flavour]
        mine = classify(name, chosen, host.aliases, host.qemu_version, host.descriptions.get(name or ""), chosen=True)
        basis = f"{chosen.name}: {host.flavour_source}"
        if mine is not None:
            return [(chosen, mine)], basis, []
    claim = claimants(name, host.aliases, host.qemu_version, host.descriptions.get(name or ""))
    if host.qemu_flavour:
        if claim:
            names = ", ".join(f.title for f, _ in claim)
            return claim, f"{'/'.join(f.name for f, _ in claim)}: machine {machine_label} exists only in {names}", [
                f"machine type {machine_label} does not exist in {chosen.title} ({host.flavour_source}); "
                f"resolved as {names}, where it does"]
        return [(chosen, Machine(name, "unknown", chosen.name, how="no flavour knows this name"))], basis, []
    if not claim:
        return [(UPSTREAM, Machine(name, "unknown", UPSTREAM.name, how="no flavour knows this name"))], \
            "upstream: no QEMU build has this machine name; nothing is known about it", []
    if len(claim) == 1:
        return claim, f"{claim[0][0].name}: machine type {machine_label} exists only in {claim[0][0].title}", []
    return claim, (f"not known ({' or '.join(f.name for f, _ in claim)}: machine {machine_label} exists in each; "
                   "give --qemu-flavour, --connect or run where the QEMU is installed)"), []


def merge(results: list[Resolution]) -> Resolution:
    """One Resolution for several possible builds: agreement stays, disagreement is host-dependent."""
    first = results[0]
    features: dict[str, Value] = {}
    for p in PROPERTIES:
        vals = [r.features[p] for r in results]
        if len({v.qemu_property for v in vals}) == 1 and len({v.state for v in vals}) == 1:
            features[p] = vals[0]
        else:
            features[p] = Value(HOST, SRC_FLAVOUR, "depends on the QEMU build: " + "; ".join(
                f"{r.flavour}: {v.state} ({v.source})" for r, v in zip(results, vals)))
    machines = [r.machine for r in results]
    lows = [m.low for m in machines]
    highs = [m.high for m in machines]
    machine = Machine(first.machine.name, first.machine.family if len({m.family for m in machines}) == 1 else "unknown",
                      "|".join(r.flavour for r in results),
                      None if None in lows else min(lows), None if None in highs else max(highs),
                      alias_of=first.machine.alias_of if len({m.alias_of for m in machines}) == 1 else None,
                      irqchip=first.irqchip, how="; ".join(f"{r.flavour}: {r.machine.how}" for r in results))
    refusals = {r.start_refusal for r in results}
    statuses = {r.machine_status for r in results}
    status, status_why = (first.machine_status, first.machine_status_why) if len(statuses) == 1 else (
        lifecycle.OFFERED, "depends on the QEMU build: " + "; ".join(f"{r.flavour}: {r.machine_status}"
                                                                    for r in results))
    support = {p: first.support[p] if len({r.support[p][0] for r in results}) == 1
               else (None, "depends on the QEMU build") for p in PROPERTIES}
    return Resolution(first.facts, machine, first.accel, first.irqchip, first.cpu_kind, first.model, features,
                      first.explicit_unhalt, tuple(dict.fromkeys(w for r in results for w in r.warnings)),
                      start_refusal=first.start_refusal if len(refusals) == 1 else None, host=first.host,
                      flavour="|".join(r.flavour for r in results), support=support,
                      cpu_from_commandline=first.cpu_from_commandline, machine_status=status,
                      machine_status_why=status_why, qemu_refusal=first.qemu_refusal)

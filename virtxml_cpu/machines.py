"""Machine type names -> Machine, by interpreting one flavour's naming data (flavours/).

A machine's compat level is the upstream machine version whose options it is built from. It is known
exactly for upstream names and for downstream names in the flavour's tables; for aliases and for downstream
versions the tables have never seen it is a range (`low`..`high`), and a rule whose boundary falls inside
that range cannot be decided from the name alone.
"""

from __future__ import annotations

from typing import NamedTuple

from .flavours import FLAVOURS, I440FX, PC, Q35, Flavour, NameTable, Release, Version
from .memo import MISSING, Kept

PC_FAMILIES = PC
__all__ = ["I440FX", "Q35", "PC_FAMILIES", "Machine", "classify", "claimants", "version_at_least",
           "version_at_most", "own_version_at_most", "parse_version", "format_version"]


class Machine(NamedTuple):
    """What the rules need to know about a machine type, under one flavour."""

    name: str | None  # as written in the XML (None when absent)
    family: str  # pc-i440fx, pc-q35, microvm, isapc, xenfv, ..., unknown
    flavour: str  # the flavour whose naming data read it
    low: Version | None = None  # compat level range (upstream machine version), inclusive
    high: Version | None = None
    own_version: Version | None = None  # a downstream machine's own version (RHEL X.Y.Z)
    alias_of: str | None = None  # the canonical name an alias or absent machine resolved to
    irqchip: str = "on"  # default kernel_irqchip
    how: str = ""  # which table row or grammar read the name

    @property
    def version(self) -> Version | None:
        return self.low if self.low is not None and self.low == self.high else None

    @property
    def is_pc(self) -> bool:
        return self.family in PC_FAMILIES

    def label(self) -> str:
        if self.alias_of and self.alias_of != self.name:
            return f"{self.name or '(default)'} = {self.alias_of}"
        return self.name or "(default)"


def parse_version(text: str) -> Version:
    """ASCII digits only: '٣.٠' or '7.2\\n' are not versions."""
    parts = text.split(".")
    if not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


def format_version(v: Version | None) -> str:
    return ".".join(str(p) for p in v) if v else "?"


_CLASSIFIED = Kept()


def classify(name: str | None, flavour: Flavour, host_aliases: dict[str, str] | None = None) -> Machine | None:
    """Read `name` with `flavour`'s naming data; None when that build has no such machine.

    `host_aliases` (from the host's capabilities) says what `pc`, `q35` and the default machine are there.
    An absent machine is the flavour's default machine. Pure, so answers are cached (a fleet has few
    distinct machine names); the cache holds the flavour, so its id stays its own.
    """
    key = (name, tuple(sorted(host_aliases.items())) if host_aliases else ())
    machine = _CLASSIFIED.get(flavour, key)
    if machine is MISSING:
        machine = _CLASSIFIED.put(flavour, key, _classify(name, flavour, host_aliases or {}))
    return machine


def _classify(name: str | None, flavour: Flavour, host_aliases: dict[str, str]) -> Machine | None:
    key = name or ""
    canonical = host_aliases.get(key)
    if canonical and canonical != name:
        resolved = classify(canonical, flavour)
        if resolved is None:
            return None
        return Machine(name, resolved.family, flavour.name, resolved.low, resolved.high, resolved.own_version,
                       canonical, resolved.irqchip, f"host capabilities: {key or 'default'} = {canonical}")
    alias_name = name or flavour.default_machine
    alias = flavour.aliases.get(alias_name)
    if alias is not None:
        if alias.canonical:
            resolved = classify(alias.canonical, flavour)
            assert resolved is not None, alias.canonical  # data error, caught by the flavour tests
            return Machine(name, resolved.family, flavour.name, resolved.low, resolved.high, resolved.own_version,
                           alias.canonical, resolved.irqchip, alias.source)
        return Machine(name, alias.family, flavour.name, alias.floor, None,
                       alias_of=None if name else alias_name, how=alias.source)
    if not name:
        return None
    if name in flavour.fixed:
        return Machine(name, flavour.fixed[name], flavour.name, irqchip=flavour.irqchip_defaults.get(name, "on"),
                       how=f"{flavour.title}: unversioned machine")
    for pattern, family in flavour.versioned:
        m = pattern.fullmatch(name)
        if m:
            fam = family or m.group("family")
            v = parse_version(m.group("version"))
            return Machine(name, fam, flavour.name, v, v, irqchip=flavour.irqchip_defaults.get(name, "on"),
                           how=f"{flavour.title}: versioned machine")
    for table in flavour.tables:
        m = table.pattern.fullmatch(name)
        if m:
            return _from_table(name, m, table, flavour)
    return None


def claimants(name: str | None, host_aliases: dict[str, str] | None = None) -> list[tuple[Flavour, Machine]]:
    """Every flavour that has a machine of this name, with the machine as it reads it."""
    out = []
    for flavour in FLAVOURS.values():
        machine = classify(name, flavour, host_aliases)
        if machine is not None:
            out.append((flavour, machine))
    return out


def _from_table(name: str, m, table: NameTable, flavour: Flavour) -> Machine:
    groups = m.groupdict()
    family = groups.get("family") or table.family_of_bare or I440FX
    key, suffix = groups["key"], groups.get("suffix") or ""
    release = table.suffix_overrides.get(key + suffix) or next((r for r in table.releases if r.key == key), None)
    own = parse_version(key) if table.order == "version" else None
    if release is not None:
        base = _base(release, family)
        irqchip = release.irqchip.get(family) or flavour.irqchip_defaults.get(f"{family}-{format_version(base)}", "on")
        return Machine(name, family, flavour.name, base, base, own, irqchip=irqchip,
                       how=f"{release.source} ({key}{suffix}: {family}-{format_version(base)} options)")
    below, above = _neighbours(key, table)
    low = _base(below, family) if below else None
    high = _base(above, family) if above else None
    around = " and ".join(f"{r.key}" for r in (below, above) if r)
    return Machine(name, family, flavour.name, low, high, own,
                   how=f"{table.source}: {key} is not in the table; its compat level lies between its "
                       f"neighbours ({around or 'none known'})")


def _base(release: Release, family: str) -> Version:
    return release.bases.get(family) or next(iter(release.bases.values()))


def _neighbours(key: str, table: NameTable) -> tuple[Release | None, Release | None]:
    if table.order == "version":
        v = parse_version(key)
        ordered = sorted(table.releases, key=lambda r: parse_version(r.key))
        below = [r for r in ordered if parse_version(r.key) <= v]
        above = [r for r in ordered if parse_version(r.key) >= v]
    else:  # alphabetical from `ordered_from`; a name sorting before it is from the next alphabet cycle
        start = next(i for i, r in enumerate(table.releases) if r.key == table.ordered_from)
        ordered = sorted(table.releases[start:], key=lambda r: r.key)
        if key < ordered[0].key:
            return ordered[-1], None
        below = [r for r in ordered if r.key <= key]
        above = [r for r in ordered if r.key >= key]
    return (below[-1] if below else None), (above[0] if above else None)


def version_at_least(machine: Machine, floor: Version) -> bool | None:
    """True/False when the machine's compat level range decides it; None when it straddles `floor`."""
    if machine.low is not None and machine.low >= floor:
        return True
    if machine.high is not None and machine.high < floor:
        return False
    return None


def version_at_most(machine: Machine, ceiling: Version) -> bool | None:
    """Whether a `pc_compat_X_Y` row (machines <= X.Y, including X.Y.z) applies; None when undecidable."""
    at_least = version_at_least(machine, _next(ceiling))
    return None if at_least is None else not at_least


def own_version_at_most(machine: Machine, ceiling: Version) -> bool | None:
    return None if machine.own_version is None else machine.own_version <= ceiling


def _next(v: Version) -> Version:
    """The smallest version above every X.Y.z with X.Y == v (4.0 -> 4.0.1 is still <= 4.0's rules)."""
    return v[:-1] + (v[-1] + 1,)

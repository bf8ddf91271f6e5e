"""Machine type names -> Machine, by interpreting one build's naming data (tables/builds/).

A machine's compat level is the upstream machine version whose options it is built from. It is known
exactly for upstream names and for downstream names in the build's tables; for aliases and for downstream
versions the tables have never seen it is a range (`low`..`high`), and a rule whose boundary falls inside
that range cannot be decided from the name alone.
"""

from __future__ import annotations

from collections import namedtuple

from ..tables.builds.known import BUILDS, I440FX, PC, Q35, Build, NameTable, Release
from ..tables.version import ANY, Version, format_version, in_window, parse_version

PC_FAMILIES = PC
__all__ = ["I440FX", "Q35", "PC_FAMILIES", "Machine", "classify", "claimants", "version_at_least",
           "version_at_most", "own_version_at_most"]


class Machine(namedtuple("Machine", "name family build low high own_version alias_of irqchip how arrays "
                         "defined_in downstream",
                         defaults=(None, None, None, None, "on", "", "upstream", None, "",))):
    """What the rules need to know about a machine type, under one build."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    name: str | None  # as written in the XML (None when absent)
    family: str  # pc-i440fx, pc-q35, microvm, isapc, xenfv, ..., unknown
    build: str  # the build whose naming data read it
    low: Version | None  # compat level range (upstream machine version), inclusive
    high: Version | None
    own_version: Version | None  # a downstream machine's own version (RHEL X.Y.Z)
    alias_of: str | None  # the canonical name an alias or absent machine resolved to
    irqchip: str  # default kernel_irqchip
    how: str  # which table row or grammar read the name
    arrays: str  # whose machine compat arrays it takes: "upstream" (pc_compat_X_Y) | "rhel"
    defined_in: str | None  # when this QEMU release does not define the name: which releases do
    downstream: str  # the distribution release a downstream name belongs to ("Ubuntu 25.04", "RHEL 9.8.0")

    @property
    def version(self) -> Version | None:
        return self.low if self.low is not None and self.low == self.high else None

    @property
    def is_pc(self) -> bool:
        return self.family in PC_FAMILIES

    @property
    def base(self) -> str | None:
        """The upstream machine type this one is built from (pc-q35-9.1 for pc-q35-plucky); None when the
        compat level is not known exactly."""
        v = self.version
        if v is not None and self.family in PC_FAMILIES:
            return f"{self.family}-{format_version(v)}"
        if self.family not in PC_FAMILIES and self.family != "unknown" and self.low is None:
            return self.alias_of or self.name  # an unversioned machine (microvm, isapc) is its own base
        return None

    def described(self) -> str:
        """'pc-q35-plucky (Ubuntu 25.04, built as pc-q35-9.1)': what explain's machine line shows."""
        base = self.base
        built = [self.downstream] if self.downstream else []
        if base and base != (self.alias_of or self.name):
            built.append(f"built as {base}")
        return self.label() + (f" ({', '.join(built)})" if built else "")

    def label(self) -> str:
        if self.alias_of and self.alias_of != self.name:
            return f"{self.name or '(default)'} = {self.alias_of}"
        return self.name or "(default)"


def _newest(alias, build: Build, release: Version | None) -> str | None:
    """What an alias stands for in a known release: upstream's pc/q35 are FAMILY-X.Y of QEMU X.Y (the
    DEFINE_*_MACHINE_AS_LATEST of that release); Ubuntu's ubuntu/ubuntu-q35 the newest codename row it defines."""
    if release is None or len(release) > 2 and release[2] >= 50:  # a development snapshot's newest is ahead
        return None
    if alias.newest == "version":
        return f"{alias.family}-{release[0]}.{release[1]}"
    if alias.newest == "table" and build.tables:
        rows = [r for r in build.tables[0].releases if alias.family in r.bases and r.since and r.exists_in(release)]
        if rows:
            newest = max(rows, key=lambda r: r.since)
            return f"{alias.family}-{newest.key}" if newest.since[:2] == release[:2] else None
    return None


def classify(name: str | None, build: Build, host_aliases: dict[str, str] | None = None,
             release: Version | None = None, description: str | None = None,
             chosen: bool = False) -> Machine | None:
    """Read `name` with `build`'s naming data; None when that build has no such machine (pure).

    `host_aliases` (from the host's capabilities) says what `pc`, `q35` and the default machine are there;
    `release` is the build's QEMU release when known (a name defined differently over time takes the
    definition of that release); `description` is QEMU's own description of the machine (`-machine help`),
    which dates a downstream name the tables do not know. `chosen`: the build is known to be this one, so
    the upstream names it registers as its own machines count (RHEL 8's pc-i440fx-2.11). An absent machine
    is the build's default machine.
    """
    host_aliases = host_aliases or {}
    key = name or ""
    canonical = host_aliases.get(key)
    if canonical and canonical != name:
        resolved = classify(canonical, build, release=release, chosen=chosen)
        if resolved is None:
            return None
        return resolved._replace(name=name, alias_of=canonical, how=f"host capabilities: {key or 'default'} = "
                                                                     f"{canonical}")
    alias_name = name or build.default_machine
    alias = build.aliases.get(alias_name)
    if alias is not None:
        target = alias.canonical or _newest(alias, build, release)
        if target and not alias.canonical:
            resolved = classify(target, build, release=release, chosen=chosen)
            if resolved is not None and resolved.version is not None:
                return resolved._replace(name=name, alias_of=target,
                                         how=f"{alias.source}: in QEMU {format_version(release)}, {target}")
        if alias.canonical:
            resolved = classify(alias.canonical, build, release=release, chosen=chosen)
            assert resolved is not None, alias.canonical  # data error, caught by the build tests
            return resolved._replace(name=name, alias_of=alias.canonical, how=alias.source)
        return Machine(name, alias.family, build.name, alias.floor, _at_most(None, release),
                       alias_of=None if name else alias_name, how=alias.source,
                       arrays=build.tables[0].arrays if build.tables else "upstream")  # the build's own
    if not name:
        return None
    if name in build.fixed:
        return Machine(name, build.fixed[name], build.name, irqchip=build.irqchip_defaults.get(name, "on"),
                       how=f"{build.title}: unversioned machine")
    for pattern, family in build.versioned + (build.registered if chosen else ()):
        m = pattern.fullmatch(name)
        if m:
            fam = family or m.group("family")
            v = parse_version(m.group("version"))
            return Machine(name, fam, build.name, v, v, irqchip=build.irqchip_defaults.get(name, "on"),
                           how=f"{build.title}: versioned machine")
    for table in build.tables:
        m = table.pattern.fullmatch(name)
        if m:
            return _from_table(name, m, table, build, release, description)
    return None


def claimants(name: str | None, host_aliases: dict[str, str] | None = None, release: Version | None = None,
              description: str | None = None) -> list[tuple[Build, Machine]]:
    """Every build that has a machine of this name, with the machine as it reads it."""
    out = []
    for build in BUILDS.values():
        machine = classify(name, build, host_aliases, release, description)
        if machine is not None:
            out.append((build, machine))
    return out


def _from_table(name: str, m, table: NameTable, build: Build, release: Version | None,
                description: str | None) -> Machine:
    groups = m.groupdict()
    family = groups.get("family") or table.family_of_bare or I440FX
    key, suffix = groups["key"], groups.get("suffix") or ""
    own = parse_version(key) if table.order == "version" else None
    row = _definition(table, key, suffix, family, release)
    if row is not None:
        base = row.bases[family]
        irqchip = row.irqchip.get(family) or build.irqchip_defaults.get(f"{family}-{format_version(base)}", "on")
        gone = None if in_window(release, row.since, row.until, unknown=ANY) else _span(row)  # some release has it
        return Machine(name, family, build.name, base, base, own, irqchip=irqchip, arrays=table.arrays,
                       defined_in=gone, downstream=_release_label(table, key, row),
                       how=f"{row.source} ({key}{suffix}: {family}-{format_version(base)} options)"
                                            + (f"; not defined by QEMU {format_version(release)}" if gone else ""))
    if table.order == "version":
        below, above = _neighbours(key, table)
        around = " and ".join(r.key for r in (below, above) if r)
        return Machine(name, family, build.name, _base(below, family) if below else None,
                       _base(above, family) if above else None, own, arrays=table.arrays,
                       how=f"{table.source}: {key} is not in the table; its compat level lies between its "
                           f"neighbours ({around or 'none known'})")
    return _dated(name, family, build, table, release, description)


def _definition(table: NameTable, key: str, suffix: str, family: str, release: Version | None) -> Release | None:
    """The row defining KEY+suffix for this family in that QEMU release (a suffixed name only by its own row:
    pc-q35-questing-v2 does not exist); among a name's definitions over time the one of `release`, else the
    newest."""
    if suffix:
        rows = [r for r in table.suffix_overrides.get(key + suffix, ()) if family in r.bases]
    else:
        rows = [r for r in table.releases if r.key == key and family in r.bases]
    if not rows:
        return None
    return next((r for r in reversed(rows) if r.exists_in(release)), rows[-1])


def _release_label(table: NameTable, key: str, row: Release) -> str:
    if "{described}" in table.release_label and not row.described:
        return ""
    return table.release_label.format(key=key, described=row.described)


def _dated(name: str, family: str, build: Build, table: NameTable, release: Version | None,
           description: str | None) -> Machine:
    """A downstream name no known release defined: its level is what QEMU's own description dates it to
    ("Ubuntu 24.04 PC ..."), bounded by the QEMU release itself; else unknown, and said so."""
    unknown = Machine(name, family, build.name, None, _at_most(None, release), arrays=table.arrays,
                      how=f"{table.source}: no known release defines {name}"
                          + ("" if description else " and no local QEMU describes it")
                          + "; its compat level is unknown, so no rule that depends on it is assumed")
    found = table.dated_by.search(description or "") if table.dated_by else None
    if not found:
        return unknown
    said = parse_version(found.group("release"))
    dated = sorted((parse_version(r.described), r) for r in table.releases if r.described and family in r.bases)
    same = [r for v, r in dated if v == said]
    if same:
        base = same[-1].bases[family]
        return Machine(name, family, build.name, base, base, arrays=table.arrays,
                       how=f"QEMU describes {name} as '{description}': {same[-1].key}'s {family}-"
                           f"{format_version(base)} options ({same[-1].source})")
    below = [r for v, r in dated if v < said]
    above = [r for v, r in dated if v > said]
    low = below[-1].bases[family] if below else None
    high = _at_most(above[0].bases[family] if above else None, release)
    return Machine(name, family, build.name, low, high, arrays=table.arrays,
                   how=f"QEMU describes {name} as '{description}': between "
                       f"{below[-1].key if below else 'the oldest'} and "
                       f"{above[0].key if above else 'this QEMU ' + format_version(release)}")


def _span(row: Release) -> str:
    return f"QEMU {format_version(row.since) if row.since else '...'} to " + (
        f"{format_version(row.until)} (exclusive)" if row.until else "current")


def _at_most(high: Version | None, release: Version | None) -> Version | None:
    """No machine is newer than the QEMU that offers it."""
    cap = release[:2] if release else None
    return cap if high is None else (high if cap is None else min(high, cap))


def _base(release: Release, family: str) -> Version:
    return release.bases.get(family) or next(iter(release.bases.values()))


def _neighbours(key: str, table: NameTable) -> tuple[Release | None, Release | None]:
    """The known versions around an unknown one (RHEL X.Y.Z)."""
    v = parse_version(key)
    ordered = sorted(table.releases, key=lambda r: parse_version(r.key))
    below = [r for r in ordered if parse_version(r.key) <= v]
    above = [r for r in ordered if parse_version(r.key) >= v]
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

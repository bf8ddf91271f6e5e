"""Machine type names -> (family, version, flavour).

QEMU's compat rules are keyed by machine family and version; RHEL's qemu-kvm has its own machine names
whose compat levels follow the upstream release each RHEL minor release was based on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, ...]

I440FX = "pc-i440fx"
Q35 = "pc-q35"
PC_FAMILIES = frozenset({I440FX, Q35})
ALIAS_FLOOR: "Version" = (4, 2)

_VERSIONED = re.compile(r"^(pc-i440fx|pc-q35)-(\d+(?:\.\d+)+)$")
_OLD_PC = re.compile(r"^pc-(\d+\.\d+)$")  # pc-0.10 ... pc-1.3: the i440fx family before its rename
_RHEL = re.compile(r"^(pc-i440fx|pc-q35)-rhel(\d+(?:\.\d+)+)$")

# RHEL machine -> the upstream machine version whose compat level it carries
# (reference qemu.md section 11, from the "from pc_compat_X_Y" comments of the RHEL patches; the
# entries marked there as inferred stay inferred).
RHEL_UPSTREAM_EQUIVALENT: dict[Version, Version] = {
    (7, 0, 0): (1, 5),
    (7, 1, 0): (2, 1),
    (7, 2, 0): (2, 3),
    (7, 3, 0): (2, 6),
    (7, 4, 0): (2, 9),
    (7, 5, 0): (2, 10),
    (7, 6, 0): (2, 12),
    (8, 0, 0): (3, 1),
    (8, 1, 0): (4, 1),
    (8, 2, 0): (4, 2),
    (8, 3, 0): (5, 1),
    (8, 4, 0): (5, 2),
    (8, 5, 0): (6, 0),
    (8, 6, 0): (6, 2),
    (9, 0, 0): (6, 2),
    (9, 2, 0): (7, 2),
    (9, 4, 0): (8, 2),
    (9, 6, 0): (9, 1),
}


@dataclass(frozen=True)
class Machine:
    """What the rules need to know about a machine type."""

    name: str | None  # as written in the XML (None when absent)
    family: str  # pc-i440fx, pc-q35, microvm, isapc, xenfv, unknown
    version: Version | None  # None for unversioned machines and unresolved aliases
    flavour: str = "upstream"  # upstream | rhel
    rhel_version: Version | None = None
    alias_of: str | None = None  # the canonical name an alias or absent machine resolved to
    # Lowest version an unresolved alias can stand for: libvirt >= 8.1 requires QEMU >= 4.2, and an
    # alias is the newest machine of its QEMU.
    floor: Version | None = None

    @property
    def is_pc(self) -> bool:
        return self.family in PC_FAMILIES

    def label(self) -> str:
        if self.alias_of and self.alias_of != self.name:
            return f"{self.name or '(default)'} = {self.alias_of}"
        return self.name or "(default)"


def parse_version(text: str) -> Version:
    return tuple(int(p) for p in text.split("."))


def format_version(v: Version | None) -> str:
    return ".".join(str(p) for p in v) if v else "?"


def classify(name: str | None, aliases: dict[str, str] | None = None) -> Machine:
    """Classify a machine name; `aliases` maps `pc`/`q35`/default to canonical names (host capabilities).

    An absent machine is QEMU's default machine, i.e. the `pc` alias on x86.
    """
    aliases = aliases or {}
    lookup = name if name else ""
    canonical = aliases.get(lookup) or (aliases.get("pc") if not name else None)
    if canonical and canonical != name:
        resolved = classify(canonical)
        return Machine(name, resolved.family, resolved.version, resolved.flavour,
                       resolved.rhel_version, alias_of=canonical)
    if name is None or name in ("pc", ""):
        return Machine(name, I440FX, None, floor=ALIAS_FLOOR)
    if name == "q35":
        return Machine(name, Q35, None, floor=ALIAS_FLOOR)
    m = _VERSIONED.match(name)
    if m:
        return Machine(name, m.group(1), parse_version(m.group(2)))
    m = _OLD_PC.match(name)
    if m:
        return Machine(name, I440FX, parse_version(m.group(1)))
    m = _RHEL.match(name)
    if m:
        rv = parse_version(m.group(2))
        return Machine(name, m.group(1), RHEL_UPSTREAM_EQUIVALENT.get(rv), "rhel", rv)
    for family in ("microvm", "isapc", "xenfv", "xenpv"):
        if name == family or name.startswith(family + "-"):
            return Machine(name, family, None)
    return Machine(name, "unknown", None)


def version_at_least(machine: Machine, floor: Version) -> bool | None:
    """True/False when known; None when the version is not known (unresolved alias)."""
    if machine.version is not None:
        return machine.version >= floor
    if machine.floor is not None and machine.floor >= floor:
        return True
    return None


def version_at_most(machine: Machine, ceiling: Version) -> bool | None:
    """Whether a `pc_compat_X_Y` row (machines <= X.Y) applies; None when it cannot be known."""
    at_least = version_at_least(machine, _next(ceiling))
    return None if at_least is None else not at_least


def _next(v: Version) -> Version:
    """The smallest version above every X.Y.z with X.Y == v (4.0 -> 4.0.1 is still <= 4.0's rules)."""
    return v[:-1] + (v[-1] + 1,)

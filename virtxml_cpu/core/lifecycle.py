"""Whether a build's QEMU release offers a machine type, marks it deprecated, or has none (pure).

An interpreter of the builds' Lifecycle rows: the age rule of include/hw/boards.h (and RHEL's version of
it), what releases removed from the code or deprecated by hand, no machine newer than its QEMU, and a
downstream name's own Release rows (since/until). When the host's QEMU lists its machines, that list decides
what is offered; the table still says what is deprecated.
"""

from __future__ import annotations

from collections import namedtuple

from ..tables import lazyre  # module-level patterns compiled where first used (the hook's cold start)
from ..tables.builds.known import BUILDS, PC, AgeRule, Build
from .machines import Machine
from ..tables.version import Version, format_version, is_release, parse_version

OFFERED, DEPRECATED, NOT_OFFERED = "offered", "deprecated", "not-offered"
STATUSES = (OFFERED, DEPRECATED, NOT_OFFERED)
_EL = lazyre.compile(r"[.+]el(?P<major>[0-9]{1,9})", lazyre.ASCII)  # qemu-kvm-10.1.0-17.el9 -> RHEL 9


class Status(namedtuple("Status", "status why")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    status: str  # offered | deprecated | not-offered
    why: str


def _expired(cutoff: int, release: Version, major: int, minor: int) -> bool:
    """boards.h _MACHINE_VER_IS_EXPIRED_IMPL: formal releases (micro < 50) count from this release, development
    snapshots (micro >= 50) from the next one (the next minor, or the next major after x.2)."""
    cur_major, cur_minor = release[0], release[1] if len(release) > 1 else 0
    micro = release[2] if len(release) > 2 else 0
    if micro >= 50:
        cur_major, cur_minor = (cur_major + 1, 0) if cur_minor == 2 else (cur_major, cur_minor + 1)
    return cur_major - major > cutoff or (cur_major - major == cutoff and cur_minor - minor >= 0)


def _age(rule: AgeRule, counted_at: Version, major: int, minor: int) -> str | None:
    """NOT_OFFERED, DEPRECATED or None by the age rule, at `counted_at` (a QEMU release, or (RHEL major,)).
    9.1 ... 10.0 delete only with QEMU_DELETE_MACHINES in QEMU's environment, which libvirt does not set."""
    if rule.counted == "rhel":
        cutoff = rule.delete_after_by_major.get(counted_at[0], rule.delete_after)
        if counted_at[0] - major >= cutoff:
            return NOT_OFFERED
        return DEPRECATED if counted_at[0] - major >= rule.deprecate_after else None
    if _expired(rule.delete_after, counted_at, major, minor) and counted_at >= rule.delete_since:
        return NOT_OFFERED
    return DEPRECATED if _expired(rule.deprecate_after, counted_at, major, minor) else None


def versioned_name(name: str, build: Build) -> tuple[str, Version] | None:
    """(prefix, version) of an upstream-style versioned name, read with the build's own grammar
    (Build.versioned: pc-i440fx-X.Y, pc-q35-X.Y[.Z], pc-X.Y): 'pc-q35-7.2' -> ('pc-q35-', (7, 2))."""
    for pattern, _family in build.versioned:
        m = pattern.fullmatch(name)
        if m:
            return name[:m.start("version")], parse_version(m.group("version"))
    return None


def versioned_status(name: str, release: Version, build: Build) -> Status | None:
    """An upstream-style versioned name (versioned_name) on the build's QEMU `release`."""
    parsed = versioned_name(name, build)
    if parsed is None:
        return None
    prefix, v = parsed
    lifecycle = build.lifecycle
    qemu = f"QEMU {format_version(release)} ({build.title})"
    for span in lifecycle.removals:
        if span.covers(prefix, v) and release >= span.release:
            if span.release == (0,):
                return Status(NOT_OFFERED, f"no QEMU has a machine type {name}: {span.source}")
            return Status(NOT_OFFERED, f"{qemu} has no machine type {name}: {span.source}")
    if v > release:
        return Status(NOT_OFFERED, f"{qemu} has no machine type {name}: no QEMU offers a machine type newer than "
                                   "itself")
    age = lifecycle.age
    if age and release >= age.since:
        verdict = _age(age, release, v[0], v[1])
        if verdict == NOT_OFFERED:
            return Status(NOT_OFFERED, f"{qemu} does not register {name}: versioned machine types are dropped "
                                       f"{age.delete_after} years after their release ({age.source})")
        if verdict == DEPRECATED:
            return Status(DEPRECATED, f"{qemu} marks {name} deprecated: versioned machine types are deprecated "
                                      f"{age.deprecate_after} years after their release ({age.source})")
    for span in lifecycle.deprecations:
        if span.covers(prefix, v) and release >= span.release:
            return Status(DEPRECATED, f"{qemu} marks {name} deprecated ({span.source})")
    return Status(OFFERED, f"{qemu} offers {name}")


def known_names(build: Build, release: Version) -> list[str]:
    """Every PC machine name the tables know for this build up to `release`: upstream's versioned names (pc-0.10
    on) and the build's own table keys with their suffixed variants."""
    names = [f"pc-0.{minor}" for minor in range(10, 16)] + [f"pc-1.{minor}" for minor in range(4)]
    for major in range(1, release[0] + 1):
        for minor in {1: range(4, 8), 2: range(13), 3: range(2)}.get(major, range(3)):  # QEMU's releases
            names += [f"pc-i440fx-{major}.{minor}", f"pc-q35-{major}.{minor}"]
    names.append("pc-q35-4.0.1")
    for table in build.tables:
        for row in table.releases + tuple(r for rows in table.suffix_overrides.values() for r in rows):
            names += [f"{family}-{'rhel' if table.arrays == 'rhel' else ''}{row.key}" for family in row.bases]
    return sorted(set(n for n in names if not n.startswith("rhel")))


def rhel_major(package: str) -> int | None:
    """The RHEL major a qemu-kvm package is built for, from its package string (qemu-kvm-10.1.0-17.el9): the
    host facts' `package` field, never their wording, which can hold a URI, a host name or a path."""
    m = _EL.search(package or "")
    return int(m.group("major")) if m else None


def status(machine: Machine, host) -> Status:
    """The machine's status on the host's QEMU (HostFacts: release, build, machine list)."""
    name = machine.alias_of or machine.name
    release = host.qemu_version
    build: Build | None = BUILDS.get(machine.build)
    listed = host.machines
    if machine.name and listed and machine.name not in listed:
        qemu = f"QEMU {format_version(release)}" if release else "QEMU"
        return Status(NOT_OFFERED, f"this host's {qemu} does not list machine type {machine.name} among its machines")
    if host.qemu_build and machine.build != host.qemu_build and machine.name and machine.family != "unknown":
        chosen = BUILDS[host.qemu_build].title
        owner = build.title if build else machine.build
        return Status(NOT_OFFERED, f"{chosen} has no machine type {machine.name}: only {owner} defines it")
    if not machine.name or machine.alias_of:
        return Status(OFFERED, f"{machine.label()}: an alias or the default machine, always the build's newest")
    if build is None or machine.family not in PC:
        return Status(OFFERED, "no lifecycle is known for this machine type; nothing says it is gone")
    if machine.defined_in:
        return Status(NOT_OFFERED, f"QEMU {format_version(release)} ({build.title}) has no machine type {name}: "
                                   f"only {machine.defined_in} define it")
    found = _downstream(name, build, host) if machine.own_version or machine.downstream else None
    if found is None and release is not None:
        found = versioned_status(name, release, build)
    if found is None:
        if release is None:
            return Status(OFFERED, "the QEMU release is not known, so neither is the machine type's lifecycle")
        return Status(OFFERED, f"QEMU {format_version(release)} ({build.title}) defines {name}: {machine.how}")
    if listed and found.status == NOT_OFFERED:  # the host lists it: the table is behind this build
        return Status(OFFERED, f"listed by this host's QEMU, although the tables say: {found.why}")
    return found


def _downstream_name(name: str, build: Build) -> tuple[str, Version] | None:
    """(prefix, own version) of a downstream versioned name of a machine family, read with the build's own
    name table (pc-q35-rhel9.6.0 -> ('pc-q35-rhel', (9, 6, 0))); a bare name (rhel6.5.0) or a codename is
    none."""
    for table in build.tables:
        m = table.pattern.fullmatch(name) if "family" in table.pattern.groupindex else None
        if m and is_release(m.group("key")):
            return name[:m.start("key")], parse_version(m.group("key"))
    return None


def _downstream(name: str, build: Build, host) -> Status | None:
    """A downstream versioned name (pc-q35-rhel9.6.0): what the build's RHEL major removed, then its age rule
    (qemu-kvm >= 9.1)."""
    life = build.downstream_lifecycle
    release = host.qemu_version
    parsed = _downstream_name(name, build) if life.age is not None and release is not None else None
    if parsed is None:
        return None
    prefix, own = parsed
    major = rhel_major(host.package)
    if major is None:
        return Status(OFFERED, f"{name}: whether it is deprecated or gone depends on the RHEL major release the "
                               "qemu-kvm package is built for, which its version string did not say")
    qemu = f"qemu-kvm {format_version(release)} of RHEL {major}"
    for span in life.removals:
        if span.covers(prefix, own) and (major,) >= span.release:
            return Status(NOT_OFFERED, f"{qemu} has no machine type {name}: {span.source}")
    if release < life.age.since:
        return Status(OFFERED, f"{qemu} offers {name} (its deprecation marks before qemu-kvm "
                               f"{format_version(life.age.since)} are not in the tables)")
    verdict = _age(life.age, (major,), *own[:2])
    if verdict == NOT_OFFERED:
        return Status(NOT_OFFERED, f"{qemu} does not register {name} ({life.age.source})")
    if verdict == DEPRECATED:
        return Status(DEPRECATED, f"{qemu} marks {name} deprecated: machine types of earlier RHEL majors are "
                                  f"({life.age.source})")
    return Status(OFFERED, f"{qemu} offers {name}")

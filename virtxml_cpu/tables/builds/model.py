"""The shape of a QEMU build: how its machine types are named, what they are built from, and the rows that
change the CPU's KVM defaults and properties. Data only; core/machines.py and core/resolve.py interpret it.

Mirrors QEMU's own structure: a machine type is "the options of upstream machine X.Y" plus a build's deltas
(Ubuntu's and RHEL's patches map their names onto upstream option chains), kvm_default_props is one table per
build, and compat rows apply to machines at or below a version (pc_compat_X_Y).
"""

from __future__ import annotations

import re
from collections import namedtuple

from ..version import ANY, AS_CURRENT, Version, in_window

I440FX = "pc-i440fx"
Q35 = "pc-q35"
PC = frozenset({I440FX, Q35})


class Rule(namedtuple("Rule", "layer prop value source origin families up_to own_up_to when since until models",
                      defaults=(None,) * 7)):
    """One row: a kvm_default_props entry, an x86_cpu_change_kvm_default() call or a compat property.

    `since`/`until` are releases of the build's QEMU (Ubuntu's and RHEL's packages carry the upstream
    release they are based on): a row applies only to a QEMU that has it. With the release unknown every
    row may apply: a machine whose chain holds a row comes from a QEMU that had it."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    layer: str  # "kvm-default" (named CPU models under KVM) | "compat" (every x86 CPU, counts as user-set)
    prop: str
    value: str | None  # "on" | "off" | None (x86_cpu_change_kvm_default(prop, NULL): keep the model's bit)
    source: str
    origin: str  # whose table the row is from: "upstream", "ubuntu", "rhel"
    families: frozenset[str] | None  # None: every machine family
    up_to: Version | None  # machines whose upstream compat level is <= up_to (pc_compat_X_Y)
    own_up_to: Version | None  # machines whose own (downstream) version is <= own_up_to
    when: str | None  # "irqchip=split" | "irqchip=off"
    since: Version | None  # the first QEMU release with this row
    until: Version | None  # the first QEMU release without it
    models: frozenset[str] | None  # a compat row for these CPU models only ("Conroe-x86_64-cpu")

    @property
    def machine_keyed(self) -> bool:
        """A machine's compat row (pc_compat_X_Y, a downstream machine's array), not the build's own table."""
        return (self.families is not None or self.up_to is not None or self.own_up_to is not None
                or self.models is not None)

    def exists_in(self, release: Version | None) -> bool:
        return in_window(release, self.since, self.until, unknown=ANY)


class Release(namedtuple("Release", "key bases source irqchip since until described",
                         defaults=({}, None, None, "",))):
    """A downstream machine version (an Ubuntu codename, a RHEL X.Y.Z) and the upstream options it is built
    from, per family (a family it lacks has no such machine). `irqchip` overrides the default
    kernel_irqchip of that upstream base. `since`/`until`: the build's QEMU releases that define it so
    (a name redefined later has one row per definition)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    key: str
    bases: dict[str, Version]
    source: str
    irqchip: dict[str, str]  # never mutated
    since: Version | None
    until: Version | None
    described: str  # the release its machine description names ("Ubuntu 24.04 PC ..." -> "24.04")

    def exists_in(self, release: Version | None) -> bool:
        """Whether QEMU `release` defines it so (an unknown release is taken as current)."""
        return in_window(release, self.since, self.until, unknown=AS_CURRENT)


class NameTable(namedtuple("NameTable", "pattern releases order source suffix_overrides family_of_bare arrays "
                           "dated_by release_label",
                           defaults=({}, None, "upstream", None, "",))):
    """A grammar `family-KEY[suffix]` whose KEY is looked up in `releases` (oldest first).

    `order` says what an unknown KEY is: "version" (RHEL X.Y.Z: its compat level lies between its known
    neighbours), "named" (Ubuntu codenames: nothing follows from the name; QEMU's own description of the
    machine, matched by `dated_by`, may date it). `suffix_overrides` maps KEY+suffix to its own
    definitions when a suffix changes the base (pc-q35-cosmic-hpb). `arrays`: whose machine compat arrays
    these machines take (Ubuntu's are built from upstream's, RHEL's have their own).
    """

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    pattern: re.Pattern
    releases: tuple[Release, ...]
    order: str
    source: str
    suffix_overrides: dict[str, tuple[Release, ...]]  # never mutated
    family_of_bare: str | None  # for patterns without a family group (rhel6.x.0 is i440fx)
    arrays: str
    dated_by: re.Pattern | None  # finds (?P<release>...) in a machine description
    release_label: str  # names a row's distribution release: "Ubuntu {described}", "RHEL {key}"


class Alias(namedtuple("Alias", "family floor source canonical newest",
                       defaults=(None, "",))):
    """`pc`, `q35`, `ubuntu`: the newest machine of a family in whatever build runs. Its lowest possible
    compat level: libvirt >= 8.1 requires QEMU >= 4.2, so an alias stands for 4.2 or newer."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    family: str
    floor: Version | None
    source: str
    canonical: str | None  # when the build fixes what the alias means (RHEL: pc-i440fx-rhel7.6.0)
    newest: str  # what it stands for in a known release: "version" (FAMILY-X.Y of the QEMU X.Y), "table"
    # (the newest row of the build's name table defined in that release); "": not known from the release


class Span(namedtuple("Span", "prefix low high release source")):
    """Versioned machine types `prefix` + X.Y with low <= X.Y <= high (inclusive) and a QEMU release where
    their status changes: `removed` (the first release whose code has none of them; (0,) = never existed
    under this prefix) or `deprecated` (the first release that marks them so, until they are removed)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    prefix: str  # "pc-i440fx-", "pc-q35-", "pc-" (the i440fx names before 1.4)
    low: Version
    high: Version
    release: Version  # the QEMU release the change comes with
    source: str

    def covers(self, name_prefix: str, version: Version) -> bool:
        return name_prefix == self.prefix and self.low <= version[:2] <= self.high


class AgeRule(namedtuple("AgeRule", "deprecate_after delete_after since delete_since source counted "
                         "delete_after_by_major",
                         defaults=("qemu", {},))):
    """include/hw/core/boards.h's versioned machine lifecycle: a machine (major, minor) is deprecated once
    the build's major release is `deprecate_after` majors on (the same minor or later in the last year),
    and not registered once it is `delete_after` majors on; counted against the QEMU release (upstream) or
    the RHEL major release the package is built for (RHEL's RHEL_VERSION)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    deprecate_after: int
    delete_after: int
    since: Version  # the first QEMU release with these macros
    delete_since: Version  # the first QEMU release where the deletion takes effect
    source: str
    counted: str  # "qemu": QEMU_VERSION_MAJOR/MINOR | "rhel": RHEL_VERSION (the RHEL major)
    delete_after_by_major: dict[int, int]  # RHEL: the deletion cutoff each RHEL major builds with


class Lifecycle(namedtuple("Lifecycle", "age removals deprecations",
                           defaults=(None, (), (),))):
    """Which versioned machine types a build's release offers: the age rule, and what releases removed
    from the code or marked deprecated before it (an unversioned or downstream codename machine has no
    lifecycle: it exists in the releases its Release row names)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    age: AgeRule | None
    removals: tuple[Span, ...]
    deprecations: tuple[Span, ...]


class Build(namedtuple("Build", "name title versioned tables aliases default_machine fixed "
                         "irqchip_defaults kvm_defaults machine_rows version_marker emulator_marker "
                         "registered lifecycle downstream_lifecycle",
                         defaults=(None, (), Lifecycle(), Lifecycle(),))):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    name: str  # upstream | ubuntu | rhel
    title: str
    versioned: tuple[tuple[re.Pattern, str | None], ...]  # upstream numeric names: (pattern, family or group)
    tables: tuple[NameTable, ...]
    aliases: dict[str, Alias]
    default_machine: str  # the alias an absent machine means
    fixed: dict[str, str]  # unversioned machine name -> family
    irqchip_defaults: dict[str, str]  # machine name -> default kernel_irqchip where it is not "on"
    kvm_defaults: tuple[Rule, ...]  # this build's kvm_default_props (+ kvm_cpu_instance_init changes)
    machine_rows: tuple[Rule, ...]  # machine-keyed rows, oldest-first semantics as pc_compat_X_Y
    version_marker: re.Pattern | None  # matches `qemu-system-x86_64 --version` of this build
    emulator_marker: re.Pattern | None  # matches the emulator path of this build
    registered: tuple[tuple[re.Pattern, str | None], ...]  # upstream names this build registers as its
    # own machines: read only when the build is known (they do not make a name this build's)
    lifecycle: Lifecycle  # which versioned machine types each release offers or deprecates
    downstream_lifecycle: Lifecycle  # the same for the build's own versioned names (RHEL)

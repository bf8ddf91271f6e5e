"""Which QEMU build and release the guests run on: the one precedence rule, and its one wording.

The order of the sources (the command line, the QEMU it names, the config, libvirt, the local QEMU,
libvirt's upstream-only machine list, the machine name alone) is hostsrc.ORDER, written out in hostsrc's
docstring; hostsrc.assemble() asks the sources and hands their claims here in that order.
Each source is a Claim; settle() takes the first that names each fact and records where it came from,
for hostsrc.assemble() and for hostfacts.combine() alike (the one rule that picks). Pure; it takes and
returns hostfacts.HostFacts, which it does not import (hostfacts imports this module).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence

from .machines import format_version, parse_version

Version = tuple[int, ...]


class Claim(namedtuple("Claim", "flavour release source package", defaults=("",))):
    """One source's word on the QEMU build and/or release."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    flavour: str | None
    release: Version | None
    source: str  # said as explain shows it
    package: str  # the QEMU's package string, when the source is a QEMU or libvirt's cache of one


def from_facts(facts: HostFacts) -> Claim:
    """A QEMU's own answer (its --version, query-version) or libvirt's cache of it, as a claim."""
    return Claim(facts.qemu_flavour, facts.qemu_version, facts.flavour_source or facts.version_source, facts.package)


def from_each(facts: HostFacts) -> list[Claim]:
    """One source's own facts as two claims, its build and its release, each with its own wording
    (hostfacts.combine)."""
    return [Claim(facts.qemu_flavour, None, facts.flavour_source, facts.package),
            Claim(None, facts.qemu_version, facts.version_source or facts.flavour_source, facts.package)]


def from_command_line(flavour: str | None, release: str | None) -> list[Claim]:
    """--qemu-flavour and --qemu-version (rank 1)."""
    return ([Claim(flavour, None, "--qemu-flavour")] if flavour else []) + (
        [Claim(None, parse_version(release), "--qemu-version")] if release else [])


def from_config(cfg) -> list[Claim]:
    """qemu_flavour and qemu_version of the config (rank 3)."""
    where = f"in {cfg.path}" if cfg.path else "in the config"
    return ([Claim(cfg.qemu_flavour, None, f"qemu_flavour {where}")] if cfg.qemu_flavour else []) + (
        [Claim(None, parse_version(cfg.qemu_version), f"qemu_version {where}")] if cfg.qemu_version else [])


def libvirt_claims(facts: HostFacts) -> list[Claim]:
    """libvirt's word (rank 4): a downstream machine name or emulator path, the hypervisor version. A
    machine list of upstream names only is rank 6 (every build registers those), after the local binary."""
    strong = facts.qemu_flavour not in (None, "upstream")
    return [Claim(facts.qemu_flavour if strong else None, facts.qemu_version, facts.flavour_source if strong
                  else facts.version_source)]


def weak_libvirt_claims(facts: HostFacts) -> list[Claim]:
    return [Claim(facts.qemu_flavour, None, facts.flavour_source)] if facts.qemu_flavour == "upstream" else []


def settle(facts: HostFacts, claims: Sequence[Claim]) -> HostFacts:
    """The first claim naming the build gives the build, the first naming a release gives the release; the
    package string comes with the release's claim, else with the build's."""
    flavour = next((c for c in claims if c.flavour), None)
    release = next((c for c in claims if c.release), None)
    return facts._replace(
        qemu_flavour=flavour.flavour if flavour else None, flavour_source=flavour.source if flavour else "",
        qemu_version=release.release if release else None, version_source=release.source if release else "",
        package=next((c.package for c in (release, flavour) if c and c.package), ""))


def described(facts: HostFacts) -> str:
    """`explain`'s QEMU line, after the build: 'release 7.2.22 (from ...)' or why it is not known."""
    if facts.qemu_version is None:
        return "release not known (taken as current)"
    return f"release {format_version(facts.qemu_version)} (from {facts.version_source or 'host facts'})"

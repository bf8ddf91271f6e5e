"""Which QEMU build and release a domain is resolved under: the one precedence rule, and its one wording.

The rule, whole (nothing else picks a build or a release), in two steps:
  * Source order. Each source says what it knows as Claims; sources.ORDER (host/sources.py) lists the sources (the command
    line, the QEMU it names, the config, libvirt, the local QEMU, libvirt's upstream-only machine list),
    written out in its docstring, and sources.assemble() hands their claims here in that order.
    settle() takes the first claim naming the build and, separately, the first naming the release, and
    records where each came from (hostfacts.combine() settles several sources' facts the same way). One
    QEMU's own answer is one claim: the downstream build its package string or its own machine names
    name, else upstream (own_build()).
  * The machine name (builds_for(), per domain), for the build only:
    - the settled build has the domain's machine type: that build;
    - the settled build lacks it and other builds have it: the machine name wins, the domain is resolved
      under each build that has it, with a warning that names the settled build and its source;
    - the settled build lacks it and no build has it: the settled build, the machine unknown;
    - no source named a build: each build that has the machine type (merged by merge.merge when
      several); none has it: upstream, the machine unknown.
The release is never taken from the machine name: unknown, it stays unknown (taken as current).

Pure; it takes and returns hostfacts.HostFacts, which it does not import (hostfacts imports this module).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence

from .machines import Machine, claimants, classify
from ..tables.builds.known import BUILDS, UPSTREAM, Build
from ..tables.version import Version, format_version, parse_version


class Claim(namedtuple("Claim", "build release source package", defaults=("",))):
    """One source's word on the QEMU build and/or release."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    build: str | None
    release: Version | None
    source: str  # said as explain shows it
    package: str  # the QEMU's package string, when the source is a QEMU or libvirt's cache of one


def from_facts(facts: HostFacts) -> Claim:
    """A QEMU's own answer (its --version, query-version) or libvirt's cache of it, as a claim."""
    return Claim(facts.qemu_build, facts.qemu_version, facts.build_source or facts.version_source, facts.package)


def from_each(facts: HostFacts) -> list[Claim]:
    """One source's own facts as two claims, its build and its release, each with its own wording
    (hostfacts.combine)."""
    return [Claim(facts.qemu_build, None, facts.build_source, facts.package),
            Claim(None, facts.qemu_version, facts.version_source or facts.build_source, facts.package)]


def from_command_line(build: str | None, release: str | None) -> list[Claim]:
    """--qemu-build and --qemu-version (rank 1)."""
    return ([Claim(build, None, "--qemu-build")] if build else []) + (
        [Claim(None, parse_version(release), "--qemu-version")] if release else [])


def from_config(cfg) -> list[Claim]:
    """qemu_build and qemu_version of the config (rank 3)."""
    where = f"in {cfg.path}" if cfg.path else "in the config"
    return ([Claim(cfg.qemu_build, None, f"qemu_build {where}")] if cfg.qemu_build else []) + (
        [Claim(None, parse_version(cfg.qemu_version), f"qemu_version {where}")] if cfg.qemu_version else [])


def libvirt_claims(facts: HostFacts) -> list[Claim]:
    """libvirt's word (rank 4): a downstream machine name or emulator path, the hypervisor version. A
    machine list of upstream names only is rank 6 (every build registers those), after the local binary."""
    strong = facts.qemu_build not in (None, "upstream")
    return [Claim(facts.qemu_build if strong else None, facts.qemu_version, facts.build_source if strong
                  else facts.version_source)]


def weak_libvirt_claims(facts: HostFacts) -> list[Claim]:
    return [Claim(facts.qemu_build, None, facts.build_source)] if facts.qemu_build == "upstream" else []


def settle(facts: HostFacts, claims: Sequence[Claim]) -> HostFacts:
    """The first claim naming the build gives the build, the first naming a release gives the release; the
    package string comes with the release's claim, else with the build's."""
    build = next((c for c in claims if c.build), None)
    release = next((c for c in claims if c.release), None)
    return facts._replace(
        qemu_build=build.build if build else None, build_source=build.source if build else "",
        qemu_version=release.release if release else None, version_source=release.source if release else "",
        package=next((c.package for c in (release, build) if c and c.package), ""))


def chosen(facts: HostFacts) -> Build | None:
    """The build settle() gave, as its table; None when no source named one (never upstream by default)."""
    return BUILDS[facts.qemu_build] if facts.qemu_build else None


def own_build(package_build: str, machines_build: str | None, machines_source: str) -> tuple[str, str | None]:
    """One QEMU's word on its build, from its package string's build (build_of_package: upstream unless
    it names Ubuntu or RHEL) and its machine list's (build_from_machines): the downstream build either
    names, the package's first, else upstream. (build, the machine list's wording when it is the one)."""
    if package_build == UPSTREAM.name and machines_build not in (None, UPSTREAM.name):
        return machines_build, machines_source
    return package_build, None


def builds_for(name: str | None, host: HostFacts) -> tuple[list[tuple[Build, Machine]], str, list[str]]:
    """The rule's machine-name step: the build(s) a domain with machine type `name` is resolved under, each with the
    machine as that build reads it; the basis explain shows; the warnings the step gives."""
    machine_label = name or "(none: the default machine)"
    settled = chosen(host)
    if settled:
        mine = classify(name, settled, host.aliases, host.qemu_version, host.descriptions.get(name or ""), chosen=True)
        basis = f"{settled.name}: {host.build_source}"
        if mine is not None:
            return [(settled, mine)], basis, []
    claim = claimants(name, host.aliases, host.qemu_version, host.descriptions.get(name or ""))
    if settled:
        if claim:
            names = ", ".join(f.title for f, _ in claim)
            return claim, f"{'/'.join(f.name for f, _ in claim)}: machine {machine_label} exists only in {names}", [
                f"machine type {machine_label} does not exist in {settled.title} ({host.build_source}); "
                f"resolved as {names}, where it does"]
        return [(settled, Machine(name, "unknown", settled.name, how="no build knows this name"))], basis, []
    if not claim:
        return [(UPSTREAM, Machine(name, "unknown", UPSTREAM.name, how="no build knows this name"))], \
            "upstream: no QEMU build has this machine name; nothing is known about it", []
    if len(claim) == 1:
        return claim, f"{claim[0][0].name}: machine type {machine_label} exists only in {claim[0][0].title}", []
    return claim, (f"not known ({' or '.join(f.name for f, _ in claim)}: machine {machine_label} exists in each; "
                   "give --qemu-build, --connect or run where the QEMU is installed)"), []


def described(facts: HostFacts) -> str:
    """`explain`'s QEMU line, after the build: 'release 7.2.22 (from ...)' or why it is not known."""
    if facts.qemu_version is None:
        return "release not known (taken as current)"
    return f"release {format_version(facts.qemu_version)} (from {facts.version_source or 'host facts'})"

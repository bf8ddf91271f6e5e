"""Which QEMU build and release the guests run on: the one precedence rule, and its one wording.

First to last, for the build (upstream | ubuntu | rhel) and the release (X.Y[.Z]) separately:
  1. the command line: --qemu-flavour, --qemu-version
  2. the QEMU named on the command line: explain's --emulator PATH (its --version and -machine help),
     verify's --emulator (the QEMU it starts, asked over QMP)
  3. the config: qemu_flavour, qemu_version
  4. libvirt: the connection (--connect; audit, apply and watch always) or its files (--capabilities), and
     libvirt's capabilities cache for the emulator (the hook: the domain's; explain: the local QEMU's):
     a downstream machine name, emulator path or package string, the QEMU version; verify --connect: the
     emulator libvirt names, asked over QMP
  5. the local QEMU (qemu-system-x86_64 or /usr/libexec/qemu-kvm, its --version and -machine help; the
     QEMU verify starts when nothing names one); not with --connect (that QEMU is on another host) nor when
     libvirt's capabilities cache already answered for it
  6. libvirt's machine list showing upstream names only (weaker than a package string: RHEL 8 and Ubuntu
     also register upstream names)
  7. the machine name alone (engine.resolve, when nothing above names the build)
Each source is a Claim; settle() takes the first that names each fact and records where it came from.
The other facts (machine names, aliases, the default machine, QEMU's descriptions) come from the first
source in the same order that has them; KVM's CPUID from /dev/kvm only, the host-model CPU from libvirt
only. hostsrc.assemble() is the one place the sources are asked and put in this order. Pure.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from .hostfacts import HostFacts
from .machines import format_version, parse_version

Version = tuple[int, ...]


class Claim(NamedTuple):
    """One source's word on the QEMU build and/or release."""

    flavour: str | None
    release: Version | None
    source: str  # said as explain shows it


def from_facts(facts: HostFacts) -> Claim:
    """A QEMU's own answer (its --version, query-version) or libvirt's cache of it, as a claim."""
    return Claim(facts.qemu_flavour, facts.qemu_version, facts.flavour_source or facts.version_source)


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
    """The first claim naming the build gives the build, the first naming a release gives the release."""
    flavour = next((c for c in claims if c.flavour), None)
    release = next((c for c in claims if c.release), None)
    return facts._replace(
        qemu_flavour=flavour.flavour if flavour else None, flavour_source=flavour.source if flavour else "",
        qemu_version=release.release if release else None, version_source=release.source if release else "")


def described(facts: HostFacts) -> str:
    """`explain`'s QEMU line, after the build: 'release 7.2.22 (from ...)' or why it is not known."""
    if facts.qemu_version is None:
        return "release not known (taken as current)"
    return f"release {format_version(facts.qemu_version)} (from {facts.version_source or 'host facts'})"

"""Which QEMU build and release the guests run on: the one precedence rule, and its one wording.

First to last, for the build (upstream | ubuntu | rhel) and the release (X.Y[.Z]) separately:
  1. the command line: --qemu-flavour, --qemu-version
  2. the command line: --emulator PATH (its --version)
  3. the config: qemu_flavour, qemu_version
  4. libvirt (--connect, --capabilities): a downstream machine name or emulator path, the hypervisor version
  5. the local qemu-system-x86_64 --version (not with --connect: that QEMU is on another host)
  6. libvirt's machine list showing upstream names only (weaker than a package string: RHEL 8 and Ubuntu
     also register upstream names)
  7. the machine name alone (engine.resolve, when nothing above names the build)
Each source is a Claim; settle() takes the first that names each fact and records where it came from.
Pure except probe_machines(), which runs the emulator the user or the host named.
"""

from __future__ import annotations

import os
import re
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
    """A probe's answer (`--version` of a binary, a libvirt connection) as a claim."""
    return Claim(facts.qemu_flavour, facts.qemu_version, facts.flavour_source or facts.version_source)


def from_command_line(flavour: str | None, release: str | None) -> list[Claim]:
    """--qemu-flavour and --qemu-version (rank 1)."""
    return ([Claim(flavour, None, "--qemu-flavour")] if flavour else []) + (
        [Claim(None, parse_version(release), "--qemu-version")] if release else [])


def from_config(cfg) -> list[Claim]:
    """qemu_flavour and qemu_version of the config (rank 3), or of the command line when the live verbs
    folded their options into the config they hand each host (named in `cfg.given`)."""
    out = []
    for key in ("qemu_flavour", "qemu_version"):
        value = getattr(cfg, key, None)
        if value:
            source = "--" + key.replace("_", "-") if key in getattr(cfg, "given", ()) else f"{key} in {cfg.path}"
            out.append(Claim(value, None, source) if key == "qemu_flavour" else
                       Claim(None, parse_version(value), source))
    return out


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


_MACHINE_LINE = re.compile(r"^(\S+)\s+(.*?)(?:\s+\(alias of \S+\))?(?:\s+\((?:default|deprecated)\))*\s*$")


def parse_machine_help(text: str) -> dict[str, str]:
    """`qemu-system-x86_64 -machine help` -> {machine name: description} (aliases are left out)."""
    out = {}
    for line in text.splitlines()[1:]:
        m = _MACHINE_LINE.match(line)
        if m and "(alias of " not in line:
            out[m.group(1)] = m.group(2)
    return out


def probe_machines(binary: str) -> dict[str, str]:
    """Ask a QEMU binary for its machines' descriptions (one short process); empty when it cannot answer.
    Only the CLI calls this, on the binary the user named or the one on PATH, and only as
    hostfacts.run_trusted runs a QEMU."""
    from .hostfacts import run_trusted, which

    path = binary if os.path.isabs(binary) else which(binary)
    out = run_trusted(path, "-machine", "help") if path else None
    return parse_machine_help(out) if out else {}

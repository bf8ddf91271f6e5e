"""Which value wins, wherever the tool has more than one source for a value: each rule once, as an ordered
tuple of sources (first to last), and a function that returns the value with the source it came from.
docs/configuration.md and docs/qemu-build.md list these tuples as tools/gen_precedence.py writes them.

  * policy(), style(), hook_mode(), timeouts(): the first source that gives a value; the last row is the
    default.
  * The QEMU build and release, in two steps:
    - Source order (HOST_FACT_SOURCES). Each source says what it knows as Claims; host/sources.assemble()
      hands them here by source (in_order()), and settle() takes the first claim naming the build and,
      separately, the first naming the release, and records where each came from (hostfacts.combine()
      settles several sources' facts the same way). One QEMU's own answer is one claim: the downstream
      build its package string or its own machine names name, else upstream (own_build()). The other host
      facts (machine names, aliases, descriptions) come from the first source in the same order that has them.
    - The machine name (builds_for(), per domain), for the build only:
      the settled build has the domain's machine type: that build; it lacks it and other builds have it:
      the machine name wins, the domain is resolved under each build that has it, with a warning that names
      the settled build and its source; no build has it: the settled build, the machine unknown; no source
      named a build: each build that has the machine type (merged by merge.merge when several), and when
      none has it, upstream with the machine unknown.
    The release is never taken from the machine name: unknown, it stays unknown (taken as current).

Pure; it takes and returns hostfacts.HostFacts, which it does not import (hostfacts imports this module).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping, Sequence

from .machines import Machine, claimants, classify
from ..constants import DEFAULT_STYLE
from ..tables.builds.known import BUILDS, UPSTREAM, Build
from ..tables.version import Version, format_version, parse_version


class Source(namedtuple("Source", "said title default what", defaults=(None, ""))):
    """One place a value can come from: how the tool names it beside the value, how the docs list it, and,
    for a rule's last row, the value itself."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    said: str
    title: str  # Markdown, as the docs list it
    default: object
    what: str  # Markdown: what the source is, where the docs list it with more than its title


class Chosen(namedtuple("Chosen", "value source")):
    """The value that won and the source it came from (Source.said)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    value: object
    source: str


DEFAULT_POLICY = "compat"
DEFAULT_HOOK_MODE = "audit"
DEFAULT_TIMEOUT = 30.0  # seconds a libvirt peer may stay silent: connecting, and any one call
HOST_TIMEOUT_FACTOR = 10  # a whole host gets this many times the peer timeout

METADATA, COMMAND_LINE, CONFIG, DEFAULT = "domain <metadata>", "command line", "config file", "default"
POLICY = (Source(METADATA, "the domain's own metadata, `<vxc:cpu policy='...'/>`"),
          Source(COMMAND_LINE, "the command line, `--policy`"),
          Source(CONFIG, "the config, `policy`"),
          Source(DEFAULT, "the default", DEFAULT_POLICY))
STYLE = (Source(COMMAND_LINE, "the command line, `--style`"),
         Source(CONFIG, "the config, `style`"),
         Source(DEFAULT, "the default", DEFAULT_STYLE))
HOOK_MODE = (Source(CONFIG, "the config, `[hook] mode`"),
             Source("hook install", "the mode `hook install --mode` wrote into the hook (its `MODE`)"),
             Source(DEFAULT, "the default", DEFAULT_HOOK_MODE))
TIMEOUT = (Source(COMMAND_LINE, "the command line, `--timeout`"),
           Source(CONFIG, "the config, `timeout`"),
           Source(DEFAULT, "the default", DEFAULT_TIMEOUT))
HOST_TIMEOUT = (Source(CONFIG, "the config, `host_timeout`"),
                Source("timeout", f"{HOST_TIMEOUT_FACTOR} times the timeout"))
RULES = {"policy": POLICY, "style": STYLE, "hook mode": HOOK_MODE, "timeout (each libvirt call)": TIMEOUT,
         "host timeout (a whole host)": HOST_TIMEOUT}  # as docs/configuration.md lists them


def first(order: Sequence[Source], *given) -> Chosen:
    """The first source in `order` that gives a value (None: it gives none); the given values are in the
    order's order, and a row not given one stands for its default."""
    for source, value in zip(order, given):
        if value is not None:
            return Chosen(value, source.said)
    for source in order[len(given):]:
        if source.default is not None:
            return Chosen(source.default, source.said)
    raise ValueError("no source gives a value and the rule has no default")


def policy(metadata: str | None, option: str | None, config: str | None) -> Chosen:
    """The policy a domain is decided under. The metadata's value wins whenever it is written, valid or not
    (an invalid one is a decision of its own: decision.invalid_exemption)."""
    return _chosen(POLICY, _POLICIES, (metadata, option, config))


def style(option: str | None, config: str | None) -> Chosen:
    """How the fix is written."""
    return _chosen(STYLE, _STYLES, (option, config))


# first()'s answers for policy() and style(), each rule's by all the values it was given (strings or None):
# asked once per document, nearly always with the same values.
_POLICIES: dict[tuple, Chosen] = {}
_STYLES: dict[tuple, Chosen] = {}
_KEPT_LIMIT = 256  # a domain's metadata may name any policy: a rule's kept answers start over past this many


def _chosen(order: Sequence[Source], kept: dict, given: tuple) -> Chosen:
    try:
        found = kept.get(given)
    except TypeError:  # a value that is no key (none the config check lets through): answered afresh
        return first(order, *given)
    if found is None:
        if len(kept) >= _KEPT_LIMIT:
            kept.clear()
        found = kept[given] = first(order, *given)
    return found


def hook_mode(config: str | None, installed: str | None) -> Chosen:
    """The hook's mode: the config's, else the one `hook install` rendered into the hook."""
    return first(HOOK_MODE, config, installed)


def timeouts(option: float | None, config) -> tuple[Chosen, Chosen]:
    """(each libvirt peer, a whole host) in seconds, from --timeout and the config's timeout/host_timeout."""
    peer = first(TIMEOUT, option, config.timeout)
    return peer, first(HOST_TIMEOUT, config.host_timeout, HOST_TIMEOUT_FACTOR * peer.value)


# The sources of the QEMU build and release, first to last (docs/qemu-build.md lists them from here):
# host/sources.assemble() gives each source's claims and facts under its `said`, and in_order() puts them
# in this order.
HOST_FACT_SOURCES = (
    Source("command line", "the command line", what="`--qemu-build`, `--qemu-version X.Y[.Z]`"),
    Source("named QEMU", "the QEMU named on the command line",
           what="`explain --emulator PATH` (its `--version` and `-machine help`), `verify --emulator PATH` (the QEMU "
           "that verify starts, asked over QMP)"),
    Source("config", "the config", what="`qemu_build`, `qemu_version`"),
    Source("libvirt", "libvirt",
           what="the connection (`--connect`; `audit`, `apply` and `watch` always) or its files (`--capabilities`, "
           "`--domcapabilities`): a downstream machine name or emulator path, the QEMU version; then libvirt's "
           "capabilities cache for the emulator (the hook: the domain's `<emulator>`; `explain`: the local "
           "QEMU's): package string and version; `verify --connect`: the emulator libvirt names, asked over QMP"),
    Source("local QEMU", "the local QEMU",
           what="this host's QEMU (libvirt's emulator wherever its capabilities cache names one, else the first of "
           "`qemu-system-x86_64` on `PATH`, `/usr/libexec/qemu-kvm`): `--version` and `-machine help`; not "
           "with `--connect`, nor when libvirt's capabilities cache answered for it"),
    Source("upstream names", "libvirt's machine list when it shows upstream names only",
           what="every build registers those names, so the list only says \"upstream\" when nothing above named "
           "the build"),
    Source("machine name", "the machine name alone",
           what="per domain, the build(s) that have the domain's machine type (`precedence.builds_for`)"),
)


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


def in_order(said: Mapping[str, Sequence]) -> list:
    """What each source said (claims or facts, by Source.said of HOST_FACT_SOURCES), first source first."""
    unknown = set(said) - {s.said for s in HOST_FACT_SOURCES}
    if unknown:
        raise KeyError(f"not a source of host facts: {', '.join(sorted(unknown))}")
    return [x for s in HOST_FACT_SOURCES for x in said.get(s.said, ())]


def from_command_line(build: str | None, release: str | None) -> list[Claim]:
    """--qemu-build and --qemu-version."""
    return ([Claim(build, None, "--qemu-build")] if build else []) + (
        [Claim(None, parse_version(release), "--qemu-version")] if release else [])


def from_config(cfg) -> list[Claim]:
    """qemu_build and qemu_version of the config."""
    where = f"in {cfg.path}" if cfg.path else "in the config"
    return ([Claim(cfg.qemu_build, None, f"qemu_build {where}")] if cfg.qemu_build else []) + (
        [Claim(None, parse_version(cfg.qemu_version), f"qemu_version {where}")] if cfg.qemu_version else [])


def libvirt_claims(facts: HostFacts) -> list[Claim]:
    """libvirt's word: a downstream machine name or emulator path, the hypervisor version. A machine list of
    upstream names only is weak_libvirt_claims' (every build registers those), after the local QEMU."""
    strong = facts.qemu_build not in (None, "upstream")
    return [Claim(facts.qemu_build if strong else None, facts.qemu_version, facts.build_source if strong
                  else facts.version_source)]


def weak_libvirt_claims(facts: HostFacts) -> list[Claim]:
    """libvirt's machine list of upstream names only: "upstream", when nothing before it named a build."""
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

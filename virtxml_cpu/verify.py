"""`virtxml-cpu verify`: the rules against the QEMU this host runs.

The tool can only be as right as its tables, and most users run QEMU builds nobody here has run. So: start
the host's own QEMU paused, without disks or devices, for every x86 machine type it lists x a few CPU models,
read what vCPU 0 really has (QMP qom-get), and compare with what the tool computes for a libvirt domain
with the same machine and CPU under the build it detected. Where the QEMU reports its machines' compat
properties (query-machines compat-props, QEMU 10), those are checked against the tool too.

This module is the comparison (domains, answers, disagreements, the report), pure but for `run`;
qemu_runner.py starts the QEMUs and verified.py keeps the record of passes.
"""

from __future__ import annotations

import fnmatch
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, NamedTuple
from xml.sax.saxutils import quoteattr

from . import __version__, domain, engine, lifecycle, qemu_build, rules
from .errors import EXIT_OK, EXIT_WORK_FOUND, BadInput, EnvironmentProblem
from .config import Config
from .flavours import FLAVOURS
from .hostfacts import HostFacts, flavour_from_machines, qemu_answer
from .hostsrc import HostSources, assemble
from .qmp import QMPClosed
from .verified import DEFAULT_RECORD, record_key
from .xmlio import parse_domain

if TYPE_CHECKING:
    from .qemu_runner import Identity

DEFAULT_TIMEOUT = 20.0  # seconds one QEMU may take from exec to its last answer (~0.1 s here)
# A named Intel and AMD model, the first this QEMU has (query-cpu-definitions).
INTEL_MODELS = ("Skylake-Client", "Haswell", "SandyBridge", "Nehalem", "Penryn", "Conroe")
AMD_MODELS = ("EPYC", "Opteron_G5", "Opteron_G4", "Opteron_G3", "Opteron_G2", "qemu64")
MODE_KEYS = ("default", "intel", "amd", "host", "max")
# -cpu host/max carry arch-capabilities=off: nested hosts abort on MSR 0x10a without it; none of the
# properties checked depends on it, and the domain the tool resolves disables it the same way.
NO_ARCH_CAPS = "<feature policy='disable' name='arch-capabilities'/>"
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"


class VerifyOptions(NamedTuple):
    emulator: str | None = None  # any executable (a wrapper script too)
    connect: str | None = None  # the emulator libvirt's domain capabilities name
    qemu_flavour: str | None = None  # --qemu-flavour (outranks everything; hostsrc has the order)
    config: Config = Config()  # its qemu_flavour and qemu_version rank as explain ranks them
    timeout: float = DEFAULT_TIMEOUT
    workers: int = 2
    machines: tuple[str, ...] = ()  # shell patterns; empty: every x86 machine type
    modes: tuple[str, ...] = ()  # MODE_KEYS; empty: all of them
    json_path: str | None = None
    record: str | None = DEFAULT_RECORD  # None: do not record a pass
    progress: Callable[[str], None] | None = None


class CpuMode(NamedTuple):
    key: str  # default | intel | amd | host | max
    label: str  # shown: "no -cpu", "EPYC", "host"
    qemu_cpu: str | None  # the -cpu value; None: no -cpu
    cpu_xml: str  # the <cpu> of a libvirt domain that gets the same CPU


class Run(NamedTuple):
    """One QEMU started for one machine type and CPU."""

    machine: str
    mode: CpuMode
    qemu: dict[str, str] | None  # property -> on | off | absent; None when QEMU did not start
    error: str | None
    seconds: float


class Disagreement(NamedTuple):
    machine: str
    model: str
    prop: str
    qemu: str
    tool: str
    source: str
    reason: str
    check: str = "qom-get"  # or compat-props

    def line(self) -> str:
        what = {"compat-props": "QEMU's compat-props imply", "lifecycle": "QEMU's query-machines says"}.get(
            self.check, "QEMU")
        return (f"DISAGREE {self.machine} {self.model} {self.prop}: {what} {self.qemu}, tool {self.tool} "
                f"({self.source}: {self.reason})")


class Build(NamedTuple):
    """What the probe learnt about the QEMU."""

    emulator: str
    version: str  # 7.2.22
    package: str  # Debian 1:7.2+dfsg-7+deb12u18+b3 ("" for a plain build)
    machines: list  # query-machines
    compat_props: bool  # whether query-machines answered with compat-props
    models: frozenset[str]  # query-cpu-definitions

    @property
    def key(self) -> str:
        return record_key(self.emulator, self.version, self.package)

    @property
    def version_line(self) -> str:
        return f"QEMU emulator version {self.version}" + (f" ({self.package})" if self.package else "")


# ---------------------------------------------------------------------------------------------------------
# What to run, what the tool says, where they differ.

def cpu_modes(models: frozenset[str], wanted: tuple[str, ...] = ()) -> list[CpuMode]:
    """No -cpu, an Intel and an AMD model this QEMU has, host and max."""
    modes = [CpuMode("default", "default-cpu", None, "")]  # no -cpu: the machine's default model
    for key, candidates in (("intel", INTEL_MODELS), ("amd", AMD_MODELS)):
        model = next((m for m in candidates if m in models), None)
        if model:
            modes.append(CpuMode(key, model, model, f"<cpu mode='custom' match='exact' check='none'><model "
                                                    f"fallback='forbid'>{model}</model></cpu>"))
    modes.append(CpuMode("host", "host", "host,arch-capabilities=off",
                         f"<cpu mode='host-passthrough' check='none'>{NO_ARCH_CAPS}</cpu>"))
    modes.append(CpuMode("max", "max", "max,arch-capabilities=off",
                         f"<cpu mode='maximum' check='none'>{NO_ARCH_CAPS}</cpu>"))
    return [m for m in modes if not wanted or m.key in wanted]


def is_x86_pc(name: str) -> bool:
    return name.startswith("pc-") or name in ("isapc", "microvm")


def x86_machines(query_machines: list, patterns: tuple[str, ...] = ()) -> list[str]:
    """The PC machine types (pc-i440fx-*, pc-q35-*, downstream pc-* names, isapc, microvm) and their aliases
    (pc, q35, ubuntu ...): each alias is checked too, since the tool resolves it through the host's table."""
    names = []
    for m in query_machines:
        if is_x86_pc(m.get("name", "")):
            names.append(m["name"])
            if m.get("alias"):
                names.append(m["alias"])
    names = sorted(set(names), key=_machine_order)
    return [n for n in names if not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _machine_order(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def machine_facts(query_machines: list, emulator: str) -> HostFacts:
    """What libvirt would read from this QEMU: machine names, aliases and the default machine, and QEMU's own
    description of each (it dates a downstream machine name the tables do not know)."""
    aliases, names, descriptions = {}, set(), {}
    for m in query_machines:
        name = m.get("name", "")
        names.add(name)
        if m.get("desc"):
            descriptions[name] = m["desc"]
        if m.get("alias"):
            aliases[m["alias"]] = name
            names.add(m["alias"])
        if m.get("is-default"):
            aliases[""] = name
    flavour, why = flavour_from_machines(names, emulator)
    return HostFacts(aliases=aliases, machines=frozenset(names), sources=(f"{emulator} query-machines",),
                     qemu_flavour=flavour, flavour_source=why, descriptions=descriptions)


def qemu_facts(build: Build) -> HostFacts:
    """What the QEMU verify started says of itself (query-version, query-machines), as explain reads a
    QEMU's --version and -machine help (hostfacts.qemu_answer)."""
    return qemu_answer(build.version_line, machine_facts(build.machines, build.emulator),
                       f"{build.emulator} query-version")


def sources(opts: VerifyOptions, build: Build, kvm: bool = True) -> HostSources:
    """verify's sources: --qemu-flavour, the config, /dev/kvm, and the QEMU it started, ranked as what
    named it: --emulator (as explain's --emulator), --connect (libvirt's), else the local QEMU."""
    where = "emulator" if opts.emulator else "libvirt_qemu" if opts.connect else "local_qemu"
    return HostSources(flavour=opts.qemu_flavour, config=opts.config, kvm=kvm, **{where: qemu_facts(build)})


def domain_xml(machine: str, mode: CpuMode, ioapic: str | None = None,
               globals_: tuple[tuple[str, str, str], ...] = ()) -> bytes:
    """The libvirt domain that runs this machine and CPU: one vCPU, no devices, KVM."""
    feats = f"<features><ioapic driver='{ioapic}'/></features>" if ioapic else ""
    args = "".join(f"<qemu:arg value='-global'/><qemu:arg value={quoteattr(f'{d}.{p}={v}')}/>" for d, p, v in globals_)
    cmd = f"<qemu:commandline>{args}</qemu:commandline>" if args else ""
    return (f"<domain type='kvm' xmlns:qemu='{QEMU_NS}'><name>verify</name><memory unit='MiB'>128</memory>"
            f"<vcpu>1</vcpu><os><type arch='x86_64' machine={quoteattr(machine)}>hvm</type></os>{feats}"
            f"{mode.cpu_xml}<devices/>{cmd}</domain>").encode()


def tool_answer(machine: str, mode: CpuMode, host: HostFacts, ioapic: str | None = None,
                globals_: tuple[tuple[str, str, str], ...] = ()) -> engine.Resolution:
    xml = domain_xml(machine, mode, ioapic, globals_)
    return engine.resolve(domain.extract(parse_domain(xml, f"{machine}/{mode.key}").getroot()), host)


def disagreements(run: Run, res: engine.Resolution) -> list[Disagreement]:
    """A property QEMU does not have counts as off (absent)."""
    out = []
    for p in rules.PROPERTIES:
        qemu = run.qemu[p]
        want = res.features[p]
        if want.qemu_property != ("off" if qemu == "absent" else qemu):
            out.append(Disagreement(run.machine, run.mode.label, p, qemu, want.qemu_property, want.source, want.detail))
    return out


def cpu_compat_props(machine: dict) -> tuple[tuple[str, str, str], ...]:
    """A query-machines entry's compat properties on x86 CPU types among the properties resolved."""
    return tuple((c["qom-type"], c["property"], c["value"]) for c in machine.get("compat-props") or ()
                 if c.get("property") in rules.PROPERTIES
                 and c.get("qom-type", "").endswith(("x86_64-cpu", "i386-cpu")))


def compat_cases(query_machines: list, patterns: tuple[str, ...] = ()) -> list[tuple[str, str, tuple]]:
    """(machine, base, its CPU compat props): a machine type is its family's newest (`pc`, `q35`) plus its
    compat properties, so the tool must say the same for it as for the newest with those as -global."""
    base = {m["alias"]: m["name"] for m in query_machines if m.get("alias") in ("pc", "q35")}
    out = []
    for m in query_machines:
        name = m.get("name", "")
        family = "pc" if name.startswith("pc-i440fx-") else "q35" if name.startswith("pc-q35-") else None
        if family in base and (not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)):
            out.append((name, base[family], cpu_compat_props(m)))
    return sorted(out, key=lambda c: _machine_order(c[0]))


def compat_disagreements(case: tuple[str, str, tuple], mode: CpuMode, host: HostFacts) -> list[Disagreement]:
    """Under the kernel and the split irqchip alike (kvm-msi-ext-dest-id shows only under the latter)."""
    machine, base, props = case
    out = []
    for ioapic in ("kvm", "qemu"):
        ours = tool_answer(machine, mode, host, ioapic)
        theirs = tool_answer(base, mode, host, ioapic, props)
        for p in rules.PROPERTIES:
            a, b = ours.features[p], theirs.features[p]
            if a.qemu_property != b.qemu_property:
                label = f"{mode.label} ioapic={ioapic} (vs {base} + {len(props)} compat props)"
                out.append(Disagreement(machine, label, p, b.qemu_property, a.qemu_property, a.source, a.detail,
                                        "compat-props"))
    return out


def lifecycle_disagreements(query_machines: list, host: HostFacts) -> tuple[int, list[Disagreement]]:
    """The machine lifecycle table against the QEMU's own list: every PC machine type it lists (offered, or
    deprecated by its `deprecated` flag) and every name the tables know for this build up to its release
    (not listed: not offered). The table is asked without the QEMU's list, which would otherwise decide."""
    listed = {m["name"]: (lifecycle.DEPRECATED if m.get("deprecated") else lifecycle.OFFERED)
              for m in query_machines if m.get("name", "").startswith("pc-")}
    flavour = FLAVOURS.get(host.qemu_flavour or "upstream", FLAVOURS["upstream"])
    # RHEL: which of its own names each RHEL major keeps is not in the tables, so only what it lists is compared.
    full = host.qemu_version and flavour.downstream_lifecycle.age is None
    known = lifecycle.known_names(flavour, host.qemu_version) if full else []
    table_host = host._replace(machines=frozenset())
    out = []
    names = sorted(set(listed) | set(known), key=_machine_order)
    for name in names:
        res = tool_answer(name, CpuMode("default", "default-cpu", None, ""), table_host)
        qemu = listed.get(name, lifecycle.NOT_OFFERED)
        if res.machine_status != qemu:
            out.append(Disagreement(name, "-", "machine_status", qemu, res.machine_status, "lifecycle",
                                    res.machine_status_why, "lifecycle"))
    return len(names), out


class Outcome(NamedTuple):
    build: Build
    host: HostFacts
    identity: Identity
    machines: list[str]
    modes: list[CpuMode]
    runs: list[Run]
    disagreements: list[Disagreement]
    compat_checked: int | None  # properties compared through compat-props; None: not answered
    seconds: float
    tool: dict = {}  # (machine, CPU key) -> {property: the tool's value}
    lifecycle_checked: int = 0  # machine names whose status was compared with query-machines

    @property
    def checks(self) -> int:
        return sum(len(rules.PROPERTIES) for r in self.runs if r.qemu is not None)

    @property
    def failed(self) -> list[Run]:
        return [r for r in self.runs if r.qemu is None]

    @property
    def exit_code(self) -> int:
        return EXIT_WORK_FOUND if self.disagreements else EXIT_OK


def summary(o: Outcome) -> str:
    compat = ("compat-props: not answered by this QEMU" if o.compat_checked is None
              else f"compat-props: {o.compat_checked} checks")
    failed = f", {len(o.failed)} not started (listed above)" if o.failed else ""
    return (f"verify: {len(o.machines)} machine types x {len(o.modes)} CPU models x {len(rules.PROPERTIES)} "
            f"properties = {o.checks} checks ({len(o.runs) - len(o.failed)} QEMUs{failed}); {compat}; "
            f"machine status: {o.lifecycle_checked} names; "
            f"{len(o.disagreements)} disagreements; {o.seconds:.1f} s")


def lines(o: Outcome) -> list[str]:
    b, h = o.build, o.host
    out = [f"QEMU {b.emulator}: {b.version_line}; run as {o.identity.name}",
           f"build: {h.qemu_flavour} ({h.flavour_source})",
           f"release: {qemu_build.described(h)}",
           f"CPU models: {', '.join(m.label for m in o.modes)}"]
    out += [f"not started: {r.machine} {r.mode.label}: {r.error}" for r in o.failed]
    out += [d.line() for d in o.disagreements]
    out.append(summary(o))
    return out


def report(o: Outcome) -> dict:
    """The JSON a user attaches to a bug report."""
    b, h = o.build, o.host
    return {
        "tool": f"virtxml-cpu {__version__}", "emulator": b.emulator, "qemu_version": b.version,
        "package": b.package, "build": h.qemu_flavour, "build_basis": h.flavour_source,
        "release": qemu_build.described(h),
        "qemu_user": o.identity.name, "properties": list(rules.PROPERTIES),
        "cpu_models": {m.key: {"label": m.label, "-cpu": m.qemu_cpu, "libvirt": m.cpu_xml} for m in o.modes},
        "machines": o.machines, "compat_props_answered": o.compat_checked is not None,
        "runs": [{"machine": r.machine, "cpu": r.mode.key, "qemu": r.qemu, "tool": o.tool.get((r.machine, r.mode.key)),
                  "error": r.error, "seconds": round(r.seconds, 3)} for r in o.runs],
        "disagreements": [d._asdict() for d in o.disagreements],
        "summary": {"machine_types": len(o.machines), "cpu_models": len(o.modes),
                    "properties": len(rules.PROPERTIES), "checks": o.checks, "not_started": len(o.failed),
                    "compat_checks": o.compat_checked, "lifecycle_checks": o.lifecycle_checked,
                    "disagreements": len(o.disagreements),
                    "seconds": round(o.seconds, 1)},
    }


# ---------------------------------------------------------------------------------------------------------
# The one shell step: start the QEMUs, then compare.

def run(opts: VerifyOptions) -> Outcome:
    from . import qemu_runner as qr  # here: it builds on this module's types; the comparison needs none of it

    start = time.monotonic()
    emulator, libvirt_version = qr.find_emulator(opts)
    qr.check_kvm()
    identity = qr.qemu_identity()
    runner = qr.Runner(emulator, identity, opts.timeout)
    try:
        build = qr.probe(runner)
    except QMPClosed as e:
        raise EnvironmentProblem(f"QEMU or KVM is not usable: {emulator} (as {identity.name}): {e}") from None
    if libvirt_version and libvirt_version != build.version:  # a libvirtd in a chroot or container
        raise EnvironmentProblem(f"{opts.connect} runs QEMU {libvirt_version}, but {emulator} here is "
                                 f"{build.version}: libvirt's emulator lives in another filesystem; "
                                 "name it with --emulator")
    host = assemble(sources(opts, build))
    machines = x86_machines(build.machines, opts.machines)
    modes = cpu_modes(build.models, opts.modes)
    if not machines:
        raise BadInput(f"{emulator} lists no x86 PC machine type"
                       + (" matching --machine" if opts.machines else ""))
    if opts.progress:
        opts.progress(f"{len(machines)} machine types x {len(modes)} CPU models on {emulator}, "
                      f"{opts.workers} at a time")
    jobs = [(m, mode) for m in machines for mode in modes]
    with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as pool:
        runs = list(pool.map(lambda job: qr.read_vcpu(runner, *job), jobs))
    tool = {(r.machine, r.mode.key): tool_answer(r.machine, r.mode, host) for r in runs if r.qemu is not None}
    found = [d for r in runs if r.qemu is not None for d in disagreements(r, tool[r.machine, r.mode.key])]
    compat_checked = None
    if build.compat_props:
        cases = compat_cases(build.machines, opts.machines)
        compat_checked = len(cases) * len(modes) * 2 * len(rules.PROPERTIES)
        found += [d for case in cases for mode in modes for d in compat_disagreements(case, mode, host)]
    lifecycle_checked, lifecycle_found = lifecycle_disagreements(build.machines, host)
    found += lifecycle_found
    if all(r.qemu is None for r in runs):
        raise EnvironmentProblem(f"QEMU started no machine type: {runs[0].error}")
    if runner.killed >= qr.GIVE_UP_AFTER:
        raise EnvironmentProblem(f"{emulator} stopped answering: {runner.killed} QEMUs killed after "
                                 f"{opts.timeout:g} s each; nothing verified")
    return Outcome(build, host, identity, machines, modes, runs, found, compat_checked, time.monotonic() - start,
                   {k: {p: v.qemu_property for p, v in res.features.items() if p in rules.PROPERTIES}
                    for k, res in tool.items()}, lifecycle_checked)

"""What verify runs and how it judges: the machine types and CPU models to start, the libvirt domain
that gets the same machine and CPU, what the tool says for it, and where that differs from what QEMU
reported (qom-get, query-machines compat-props and deprecation). Pure."""

from __future__ import annotations

import fnmatch
import re
from xml.sax.saxutils import quoteattr

from ..constants import QEMU_NS
from ..core import precedence, domain, resolve, lifecycle
from ..tables import qemu
from ..core.hostfacts import HostFacts, build_from_machines, qemu_answer, release_facts
from ..host.sources import HostSources
from ..xml.parse import parse_domain
from .types import QemuBinary, CpuMode, Disagreement, Run, VerifyOptions

# A named Intel and AMD model, the first this QEMU has (query-cpu-definitions).
INTEL_MODELS = ("Skylake-Client", "Haswell", "SandyBridge", "Nehalem", "Penryn", "Conroe")
AMD_MODELS = ("EPYC", "Opteron_G5", "Opteron_G4", "Opteron_G3", "Opteron_G2", "qemu64")
# -cpu host/max carry arch-capabilities=off: nested hosts abort on MSR 0x10a without it; none of the
# properties checked depends on it, and the domain the tool resolves disables it the same way.
NO_ARCH_CAPS = "<feature policy='disable' name='arch-capabilities'/>"


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
    build, why = build_from_machines(names, emulator)
    return HostFacts(aliases=aliases, machines=frozenset(names), sources=(f"{emulator} query-machines",),
                     qemu_build=build, build_source=why, descriptions=descriptions)


def qemu_facts(binary: QemuBinary) -> HostFacts:
    """What the QEMU verify started says of itself: query-version's typed release and package string
    (hostfacts.release_facts, as a --version line's once parsed) and query-machines, as explain reads a
    QEMU's --version and -machine help (hostfacts.qemu_answer)."""
    what = f"{binary.emulator} query-version"
    return qemu_answer(release_facts(binary.release, binary.package, what),
                       machine_facts(binary.machines, binary.emulator), what)


def sources(opts: VerifyOptions, binary: QemuBinary, kvm: bool = True) -> HostSources:
    """verify's sources: --qemu-build, the config, /dev/kvm, and the QEMU it started, ranked as what
    named it: --emulator (as explain's --emulator), --connect (libvirt's), else the local QEMU."""
    where = "emulator" if opts.emulator else "libvirt_qemu" if opts.connect else "local_qemu"
    return HostSources(build=opts.qemu_build, config=opts.config, kvm=kvm, **{where: qemu_facts(binary)})


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
                globals_: tuple[tuple[str, str, str], ...] = ()) -> resolve.Resolution:
    xml = domain_xml(machine, mode, ioapic, globals_)
    return resolve.resolve(domain.extract(parse_domain(xml, f"{machine}/{mode.key}").getroot()), host)


def disagreements(run: Run, res: resolve.Resolution) -> list[Disagreement]:
    """A property QEMU does not have counts as off (absent)."""
    out = []
    for p in qemu.PROPERTIES:
        said = run.qemu[p]
        want = res.features[p]
        if want.qemu_property != ("off" if said == "absent" else said):
            out.append(Disagreement(run.machine, run.mode.label, p, said, want.qemu_property, want.source, want.detail))
    return out


def cpu_compat_props(machine: dict) -> tuple[tuple[str, str, str], ...]:
    """A query-machines entry's compat properties on x86 CPU types among the properties resolved."""
    return tuple((c["qom-type"], c["property"], c["value"]) for c in machine.get("compat-props") or ()
                 if c.get("property") in qemu.PROPERTIES
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
        for p in qemu.PROPERTIES:
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
    # The precedence.settle() gave it, and no other (precedence.chosen): an unknown build is not
    # taken as upstream (builds_for resolves each name under every build that has it), so no build's names
    # apply. Nor do RHEL's: which of its own names each RHEL major keeps is not in the tables. Then only what
    # QEMU lists is compared.
    build = precedence.chosen(host)
    full = build and host.qemu_version and build.downstream_lifecycle.age is None
    known = lifecycle.known_names(build, host.qemu_version) if full else []
    table_host = host._replace(machines=frozenset())
    out = []
    names = sorted(set(listed) | set(known), key=_machine_order)
    for name in names:
        res = tool_answer(name, CpuMode("default", "default-cpu", None, ""), table_host)
        said = listed.get(name, lifecycle.NOT_OFFERED)
        if res.machine_status != said:
            out.append(Disagreement(name, "-", "machine_status", said, res.machine_status, "lifecycle",
                                    res.machine_status_why, "lifecycle"))
    return len(names), out

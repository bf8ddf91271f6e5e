"""Effective CPU features with provenance: DomainFacts + HostFacts -> Resolution (pure).

An interpreter of the tables -- tables/properties.py (each property's defaults, release and support conditions),
tables/libvirt_xml.py (what libvirt writes for the domain XML) and tables/builds/ (each build's rows) -- in QEMU's own
order (target/i386 and hw/core/qdev.c): the CPU model's bits, then the build's kvm_default_props as machine
compat changed them (named models under KVM only), then machine compat_props (every x86 CPU, counted as
user-set), then -global, then -cpu properties (libvirt's <cpu>/<features>, or a <qemu:commandline> -cpu
that replaces them), then host/max auto-enable, then `kvm=off`/TCG clearing the KVM leaf, then the filter
against what the accelerator supports, then what the QEMU release lacks, then what KVM itself strips. One
function per step; STEPS is the order. Rows and properties apply only on the QEMU releases that have them.

The build(s) a domain is resolved under are precedence.builds_for's (the one precedence rule); several answers
are merged by merge.merge.
"""

from __future__ import annotations

from . import precedence, merge, cpu_option, property_steps, lifecycle, overcommit
from .cpu_option import parse_cpu_option
from .commandline import irqchip_refusal
from .domain import DomainFacts
from .hostfacts import HostFacts
from .libvirt_cpu import explicit_unhalt, libvirt_cpu_props, start_refusal
from .machines import Machine
from .answer import Resolution
from .support import support
from ..tables import libvirt_xml, qemu
from ..tables.builds.known import Build


def resolve(facts: DomainFacts, host: HostFacts | None = None) -> Resolution:
    """Resolve under the build(s) precedence.builds_for names for this machine (merged when several).
    Pure in (facts, host facts); the domain's name and uuid are not read (pipeline keeps one answer for
    a template's clones)."""
    host = host or HostFacts()
    candidates, basis, warnings = precedence.builds_for(facts.machine, host)
    # <qemu:commandline>'s -cpu and -overcommit as this QEMU release reads them: once, whatever the builds
    option = parse_cpu_option(facts.qemu.cpu, host.qemu_version) if facts.qemu.cpu else None
    overcommitted = overcommit.read(facts.qemu.overcommit, host.qemu_version)
    results = [_resolve_one(facts, host, build, machine, list(warnings), option, overcommitted)
               for build, machine in candidates]
    res = results[0] if len(results) == 1 else merge.merge(results)
    return res._replace(build_basis=basis)


def _resolve_one(facts: DomainFacts, host: HostFacts, build: Build, machine: Machine,
                 warnings: list[str], option, overcommitted: tuple[bool, str | None]) -> Resolution:
    accel = _accel(facts.virt_type)
    irqchip = _irqchip(facts, machine)
    status = lifecycle.status(machine, host)
    if status.status == lifecycle.NOT_OFFERED:
        warnings.append(f"machine type {facts.machine} is not offered: {status.why}"
                        + ("; read as the definition of those releases" if machine.defined_in else ""))
    libvirt_props = libvirt_cpu_props(facts, warnings)
    cpu_pm, overcommit_refusal = overcommitted
    if option is not None:
        model = option.model
        written = f"-cpu {facts.qemu.cpu}"  # one string for every property: a copy each is quadratic in memory
        cpu_props = [(p, v, "qemu:commandline -cpu", written) for p, v in option.props]
        warnings.append("<qemu:commandline> passes its own -cpu, which replaces libvirt's -cpu "
                        "(and every <features>/<cpu> setting libvirt put there)")
        kind = qemu.MAX_FEATURE_MODELS.get(model, "named")
    else:
        cpu_props = libvirt_props
        kind = qemu.CPU_MODE_KINDS.get(facts.cpu_mode, "named")
        if facts.cpu_mode == libvirt_xml.CPU_MODE_NONE or (facts.cpu_mode == libvirt_xml.CPU_MODE_CUSTOM
                                                           and not facts.cpu_model):
            model = qemu.ISAPC_DEFAULT_MODEL if machine.family == "isapc" else \
                qemu.DEFAULT_MODEL.get(facts.arch or qemu.DEFAULT_ARCH, qemu.DEFAULT_MODEL[qemu.DEFAULT_ARCH])
        elif facts.cpu_mode == libvirt_xml.CPU_MODE_HOST_MODEL:
            model = host.host_model[0] if host.host_model else None
        else:
            model = facts.cpu_model
    supported = support(facts, accel, irqchip, host)
    values = property_steps.run(property_steps.Context(facts, host, build, machine, accel, irqchip, kind, model,
                                                       cpu_props, supported, cpu_pm))
    refusal = start_refusal(facts, kind, values, warnings)
    # QEMU reads -overcommit while parsing its options, then the -machine options, before it builds a vCPU from
    # -cpu and -global
    qemu_refusal = (overcommit_refusal or irqchip_refusal(facts.irqchip_keys, host.qemu_version)
                    or cpu_option.qemu_refusal(model, kind, option, facts.qemu.globals, host.qemu_version))
    return Resolution(facts, machine, accel, irqchip, kind, model, values, explicit_unhalt(facts),
                      tuple(dict.fromkeys(warnings)), start_refusal=refusal, host=host, build=build.name,
                      support=supported, cpu_from_commandline=bool(facts.qemu.cpu),
                      machine_status=status.status, machine_status_why=status.why, qemu_refusal=qemu_refusal)


def _accel(virt_type: str | None) -> str:
    return qemu.ACCELERATORS.get(virt_type or "", virt_type or "unknown")


def _irqchip(facts: DomainFacts, machine: Machine) -> str:
    """The domain's -machine options' kernel_irqchip (DomainFacts.irqchip), else the machine type's default."""
    return facts.irqchip or machine.irqchip

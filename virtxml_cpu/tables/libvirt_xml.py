"""What libvirt makes of the domain XML the rules read: one row per element, used both to read the facts
(domain.extract) and to translate them into QEMU options (core/libvirt_cpu.py), in libvirt's own terms.

Sources: libvirt src/qemu/qemu_command.c (qemuBuildCpuCommandLine, qemuBuildCpuFeatureArg,
qemuBuildMachineCommandLine), src/conf/domain_conf.c (virDomainFeaturesDefParse), src/qemu/qemu_process.c
(qemuProcessVerifyKVMFeatures), src/qemu/qemu_validate.c, src/cpu/cpu_x86.c (virCPUx86ValidateFeatures);
checked against libvirt 9.0 and 11.3 by the lab tests.
"""

from __future__ import annotations

from collections import namedtuple

from .qemu import FEAT2PROP

ON_OFF = {"on": "on", "off": "off"}


class Setting(namedtuple("Setting", "key path attr option prop values source detail bare select verified "
                         "refused_with_named",
                         defaults=(None, None, "", {},))):
    """One element/attribute of the domain XML and the QEMU option libvirt writes for it."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    key: str  # the name it has in DomainFacts.settings
    path: tuple[str, ...]  # element path below <domain>
    attr: str  # the attribute read
    option: str  # "-cpu" (a vCPU property) | "-machine"
    prop: str  # the QEMU property or -machine option it becomes
    values: dict[str, str]  # XML value -> QEMU value; any other value: libvirt writes nothing
    source: str  # the provenance label explain shows
    detail: str  # "{v}": the XML value, "{q}": the QEMU value (the libvirt function each row mirrors: its comment)
    bare: str | None  # the value of the element written without the attribute
    select: tuple[str, str] | None  # (attribute, value) picking one of several sibling elements
    verified: str  # libvirt's error when the started vCPU lacks what "on" asked for
    refused_with_named: dict[str, str]  # XML value -> libvirt's error with a named CPU model


SETTINGS: tuple[Setting, ...] = (
    # In the order resolution applies them (core/libvirt_cpu.py); a later one wins for the same property.
    # qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_HIDDEN)
    Setting("kvm-hidden", ("features", "kvm", "hidden"), "state", "-cpu", "kvm", {"on": "off"},
            "<features><kvm>", "<hidden state='{v}'/> -> kvm={q}"),
    # qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_DEDICATED)
    Setting("hint-dedicated", ("features", "kvm", "hint-dedicated"), "state", "-cpu", "kvm-hint-dedicated", ON_OFF,
            "<features><kvm>", "<kvm><hint-dedicated state='{v}'/> -> kvm-hint-dedicated={q}"),
    # qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_POLLCONTROL)
    Setting("poll-control", ("features", "kvm", "poll-control"), "state", "-cpu", "kvm-poll-control", ON_OFF,
            "<features><kvm>", "<kvm><poll-control state='{v}'/> -> kvm-poll-control={q}"),
    # qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_PVIPI)
    Setting("pv-ipi", ("features", "kvm", "pv-ipi"), "state", "-cpu", "kvm-pv-ipi", ON_OFF,
            "<features><kvm>", "<kvm><pv-ipi state='{v}'/> -> kvm-pv-ipi={q}"),
    # qemuBuildCpuCommandLine (VIR_DOMAIN_FEATURE_PVSPINLOCK)
    Setting("pvspinlock", ("features", "pvspinlock"), "state", "-cpu", "kvm-pv-unhalt", ON_OFF,
            "<features><pvspinlock>", "<pvspinlock state='{v}'/> -> kvm-pv-unhalt={q}", bare="on",
            verified="host doesn't support paravirtual spinlocks"),
    # qemuBuildCpuCommandLine (apic_eoi)
    Setting("apic-eoi", ("features", "apic"), "eoi", "-cpu", "kvm-pv-eoi", ON_OFF,
            "<features><apic>", "<apic eoi='{v}'/> -> kvm-pv-eoi={q}"),
    # qemuBuildCpuCommandLine (VIR_DOMAIN_TIMER_NAME_KVMCLOCK)
    Setting("kvmclock", ("clock", "timer"), "present", "-cpu", "kvmclock", {"yes": "on", "no": "off"},
            "<clock><timer>", "<timer name='kvmclock' present='{v}'/> -> kvmclock={q}", select=("name", "kvmclock")),
    # qemuBuildCpuCommandLine (def->cpu->cache)
    Setting("cache", ("cpu", "cache"), "mode", "-cpu", "l3-cache",
            {"emulate": "on", "passthrough": "off", "disable": "off"},
            "<cpu><cache>", "<cache mode='{v}'/> -> l3-cache={q} (qemuBuildCpuCommandLine)",
            refused_with_named={"passthrough": "CPU cache mode 'passthrough' can only be used with"}),
    # qemuBuildMachineCommandLine (VIR_DOMAIN_FEATURE_IOAPIC)
    Setting("ioapic", ("features", "ioapic"), "driver", "-machine", "kernel_irqchip", {"qemu": "split", "kvm": "on"},
            "<features><ioapic>", "<ioapic driver='{v}'/> -> kernel_irqchip={q}"),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}

class Placement(namedtuple("Placement", "key path first cpus of attrs libvirt meaning empty missing single",
                           defaults=(None, None,))):
    """One element that places vCPU or emulator threads on host CPUs, read as libvirt's domain parser reads
    it. Its set attribute is in libvirt's cpuset syntax (cpuset.parse); `errors` are libvirt's refusals."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    key: str  # the name it has in DomainFacts.placement
    path: tuple[str, ...]  # element path below <domain>
    first: bool  # only the first such element counts (libvirt's XPath ends in [1]); else every one
    cpus: str  # the attribute in cpuset syntax
    of: str  # what its numbers are: "host" CPUs or "vcpu" ids
    attrs: tuple[str, ...]  # other attributes read
    libvirt: str  # the libvirt function this row mirrors
    meaning: str  # what libvirt does with it
    empty: str  # libvirt's error for a cpuset that names no CPU ({v}: the attribute's text)
    missing: str | None  # libvirt's error when the set attribute is absent (None: the element is a no-op)
    single: str | None  # libvirt's error when there is more than one


# Sources: libvirt 9.0.0 src/conf/domain_conf.c (virDomainVcpuParse, virDomainVcpuPinDefParseXML,
# virDomainEmulatorPinDefParseXML, virDomainThreadSchedParseHelper, virDomainDefGetVcpuPinInfoHelper: a
# vCPU's affinity is its <vcpupin>, else numad's choice with placement='auto', else <vcpu cpuset>, else every
# host CPU), src/qemu/qemu_process.c (qemuProcessSetupPid: the same order when QEMU's threads start).
PLACEMENT: tuple[Placement, ...] = (
    Placement("vcpu-cpuset", ("vcpu",), True, "cpuset", "host", ("placement",),
              "virDomainVcpuParse (def->cpumask)",
              "the host CPUs of every vCPU that has no <vcpupin>; ignored with placement='auto'",
              "Invalid value of 'cpuset': {v}"),
    Placement("vcpupin", ("cputune", "vcpupin"), False, "cpuset", "host", ("vcpu",),
              "virDomainVcpuPinDefParseXML (vcpu->cpumask)",
              "the host CPUs of one vCPU; one for a vCPU id >= <vcpu> is ignored ('Ignoring vcpupin for missing "
              "vcpus')", "Invalid value of 'cpuset': {v}", missing="missing cpuset for vcpupin"),
    Placement("emulatorpin", ("cputune", "emulatorpin"), False, "cpuset", "host", (),
              "virDomainEmulatorPinDefParseXML (cputune.emulatorpin)",
              "the host CPUs of QEMU's emulator threads (not the vCPUs)", "Invalid value of 'cpuset': {v}",
              missing="missing cpuset for emulatorpin", single="only one emulatorpin is supported"),
    Placement("vcpusched", ("cputune", "vcpusched"), False, "vcpus", "vcpu", ("scheduler", "priority"),
              "virDomainVcpuThreadSchedParse (vcpu->sched)",
              "the host scheduler (fifo/rr: realtime) of the vCPUs it names; places nothing",
              "'vcpus' scheduler bitmap '{v}' is empty",
              missing="Missing attribute 'vcpus' in element 'vcpusched'"),
)
PLACEMENT_BY_KEY: dict[str, Placement] = {p.key: p for p in PLACEMENT}
# The form that tells a guest its vCPUs have host CPUs of their own (KVM_HINTS_REALTIME, CPUID 0x40000001
# EDX bit 0): qemuBuildCpuCommandLine writes kvm-hint-dedicated=on for it; libvirt 5.7.0 / QEMU 2.12.
HINT_DEDICATED = "<features><kvm><hint-dedicated state='on'/></kvm></features>"

# <cpu><feature name policy>: one -cpu flag per element (qemuBuildCpuFeatureArg / virQEMUCapsCPUFeatureToQEMU).
CPU_FEATURE_POLICIES = {"require": "on", "force": "on", "disable": "off", "forbid": "off"}  # optional: nothing
CPU_FEATURE_SOURCE = "<cpu><feature>"
# Features libvirt's x86 CPU map (9.0-11.3) does not have: virCPUx86ValidateFeatures refuses the start.
NOT_IN_CPU_MAP = frozenset({"kvm-pv-unhalt"})
NOT_IN_CPU_MAP_ERROR = "unknown CPU feature: {name}"
NOT_IN_CPU_MAP_NOTE = ("libvirt 9.0-11.3 refuse to start a domain with <feature name='kvm_pv_unhalt'/> "
                       "('unknown CPU feature: kvm_pv_unhalt'); <features><pvspinlock state='on'/> is the form it "
                       "takes")


# <cpu mode> (formatdomain "CPU model and topology"): no <cpu> is mode none (libvirt passes no -cpu), a <cpu>
# without mode is custom; host-model is a named model libvirt expands from the host (qemuBuildCpuModelArgStr).
CPU_MODE_NONE, CPU_MODE_CUSTOM, CPU_MODE_HOST_MODEL = "none", "custom", "host-model"
# <kvm><hint-dedicated>: libvirt 5.7.0 (formatdomain: "hint-dedicated ... Since 5.7.0") writes
# kvm-hint-dedicated, which QEMU has since 2.12 (target/i386 FEAT_KVM_HINTS, be7773268d).
HINT_DEDICATED_SINCE = {"libvirt": (5, 7, 0), "QEMU": (2, 12)}


def qemu_name(name: str) -> str:
    """The property a feature name sets in `name=value` (what libvirt writes): QEMU reads each `_` as `-` there
    (qemu.FEAT2PROP), in every release; +name/-name are the -cpu reader's (core/cpu_option.py)."""
    under, dash = FEAT2PROP
    return name.replace(under, dash)


def cpu_feature_value(policy: str) -> str | None:
    return CPU_FEATURE_POLICIES.get(policy)


class Style(namedtuple("Style", "parent tag attrs")):
    """How the tool turns kvm-pv-unhalt on: the element it adds and where (insert.plan writes it)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    parent: str  # the child of <domain> that holds it
    tag: str
    attrs: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        attrs = "".join(f" {k}='{v}'" for k, v in self.attrs)
        return f"<{self.parent}><{self.tag}{attrs}/>"


STYLES: dict[str, Style] = {
    "pvspinlock": Style("features", "pvspinlock", (("state", "on"),)),
    "cpu-feature": Style("cpu", "feature", (("policy", "require"), ("name", "kvm_pv_unhalt"))),
}

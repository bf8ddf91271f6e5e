"""What libvirt makes of the domain XML the rules read: one row per element, used both to read the facts
(domain.extract) and to translate them into QEMU options (engine), in libvirt's own terms.

Sources: libvirt src/qemu/qemu_command.c (qemuBuildCpuCommandLine, qemuBuildCpuFeatureArg,
qemuBuildMachineCommandLine), src/conf/domain_conf.c (virDomainFeaturesDefParse), src/qemu/qemu_process.c
(qemuProcessVerifyKVMFeatures), src/qemu/qemu_validate.c, src/cpu/cpu_x86.c (virCPUx86ValidateFeatures);
checked against libvirt 9.0 and 11.3 by the lab tests.
"""

from __future__ import annotations

from collections import namedtuple

ON_OFF = {"on": "on", "off": "off"}


class Setting(namedtuple("Setting", "key path attr option prop values source detail libvirt bare select "
                         "verified refused_with_named",
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
    detail: str  # "{v}": the XML value, "{q}": the QEMU value
    libvirt: str  # the libvirt function this row mirrors
    bare: str | None  # the value of the element written without the attribute
    select: tuple[str, str] | None  # (attribute, value) picking one of several sibling elements
    verified: str  # libvirt's error when the started vCPU lacks what "on" asked for
    refused_with_named: dict[str, str]  # XML value -> libvirt's error with a named CPU model


SETTINGS: tuple[Setting, ...] = (
    # In the order the engine applies them; a later one wins for the same property.
    Setting("kvm-hidden", ("features", "kvm", "hidden"), "state", "-cpu", "kvm", {"on": "off"},
            "<features><kvm>", "<hidden state='{v}'/> -> kvm={q}", "qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_HIDDEN)"),
    Setting("hint-dedicated", ("features", "kvm", "hint-dedicated"), "state", "-cpu", "kvm-hint-dedicated", ON_OFF,
            "<features><kvm>", "<kvm><hint-dedicated state='{v}'/> -> kvm-hint-dedicated={q}",
            "qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_DEDICATED)"),
    Setting("poll-control", ("features", "kvm", "poll-control"), "state", "-cpu", "kvm-poll-control", ON_OFF,
            "<features><kvm>", "<kvm><poll-control state='{v}'/> -> kvm-poll-control={q}",
            "qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_POLLCONTROL)"),
    Setting("pv-ipi", ("features", "kvm", "pv-ipi"), "state", "-cpu", "kvm-pv-ipi", ON_OFF,
            "<features><kvm>", "<kvm><pv-ipi state='{v}'/> -> kvm-pv-ipi={q}",
            "qemuBuildCpuCommandLine (VIR_DOMAIN_KVM_PVIPI)"),
    Setting("pvspinlock", ("features", "pvspinlock"), "state", "-cpu", "kvm-pv-unhalt", ON_OFF,
            "<features><pvspinlock>", "<pvspinlock state='{v}'/> -> kvm-pv-unhalt={q}",
            "qemuBuildCpuCommandLine (VIR_DOMAIN_FEATURE_PVSPINLOCK)", bare="on",
            verified="host doesn't support paravirtual spinlocks"),
    Setting("apic-eoi", ("features", "apic"), "eoi", "-cpu", "kvm-pv-eoi", ON_OFF,
            "<features><apic>", "<apic eoi='{v}'/> -> kvm-pv-eoi={q}", "qemuBuildCpuCommandLine (apic_eoi)"),
    Setting("kvmclock", ("clock", "timer"), "present", "-cpu", "kvmclock", {"yes": "on", "no": "off"},
            "<clock><timer>", "<timer name='kvmclock' present='{v}'/> -> kvmclock={q}",
            "qemuBuildCpuCommandLine (VIR_DOMAIN_TIMER_NAME_KVMCLOCK)", select=("name", "kvmclock")),
    Setting("cache", ("cpu", "cache"), "mode", "-cpu", "l3-cache",
            {"emulate": "on", "passthrough": "off", "disable": "off"},
            "<cpu><cache>", "<cache mode='{v}'/> -> l3-cache={q} (qemuBuildCpuCommandLine)",
            "qemuBuildCpuCommandLine (def->cpu->cache)",
            refused_with_named={"passthrough": "CPU cache mode 'passthrough' can only be used with"}),
    Setting("ioapic", ("features", "ioapic"), "driver", "-machine", "kernel_irqchip", {"qemu": "split", "kvm": "on"},
            "<features><ioapic>", "<ioapic driver='{v}'/> -> kernel_irqchip={q}",
            "qemuBuildMachineCommandLine (VIR_DOMAIN_FEATURE_IOAPIC)"),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}

# <cpu><feature name policy>: one -cpu flag per element (qemuBuildCpuFeatureArg / virQEMUCapsCPUFeatureToQEMU).
CPU_FEATURE_POLICIES = {"require": "on", "force": "on", "disable": "off", "forbid": "off"}  # optional: nothing
CPU_FEATURE_SOURCE = "<cpu><feature>"
# Features libvirt's x86 CPU map (9.0-11.3) does not have: virCPUx86ValidateFeatures refuses the start.
NOT_IN_CPU_MAP = frozenset({"kvm-pv-unhalt"})
NOT_IN_CPU_MAP_ERROR = "unknown CPU feature: {name}"
NOT_IN_CPU_MAP_NOTE = ("libvirt 9.0-11.3 refuse to start a domain with <feature name='kvm_pv_unhalt'/> "
                       "('unknown CPU feature: kvm_pv_unhalt'); <features><pvspinlock state='on'/> is the form it "
                       "takes")


def qemu_name(name: str) -> str:
    """QEMU accepts both spellings of a feature (dash names since 2.8, underscores as aliases)."""
    return name.replace("_", "-")


def cpu_feature_value(policy: str) -> str | None:
    return CPU_FEATURE_POLICIES.get(policy)


class Style(namedtuple("Style", "parent tag attrs")):
    """How the tool turns kvm-pv-unhalt on: the element it adds and where (rewrite.plan writes it)."""

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

"""Effective CPU features with provenance: DomainFacts + HostFacts -> Resolution (pure).

Follows QEMU's own order (shared reference qemu.md section 1): CPU model bits, then KVM default
properties as machine compat changed them (named models under KVM only), then machine compat_props
(every x86 CPU, counted as user-set), then -global, then -cpu properties (libvirt's <cpu>/<features>, or a
<qemu:commandline> -cpu that replaces them), then host/max auto-enable, then `kvm=off`/TCG clearing the
KVM leaf, then the filter against what the accelerator supports, then what KVM itself strips.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import rules
from .cpu_models import MODEL_BITS
from .domain import DomainFacts
from .hostfacts import HostFacts
from .machines import Machine, classify, version_at_most

ON, OFF, HOST = "on", "off", "host-dependent"
TCG_X2APIC_SINCE = (9, 0)  # x2APIC emulation for TCG (Bui Quang Minh's series, merged for QEMU 9.0)


@dataclass(frozen=True)
class Value:
    state: str  # on | off | host-dependent
    source: str  # where the value comes from, short
    detail: str  # why, with the QEMU/libvirt/KVM reference
    qom: str | None = None  # what QMP qom-get reports, when KVM changes it afterwards (cpu-pm)

    @property
    def qemu_property(self) -> str:
        return self.qom or self.state


@dataclass(frozen=True)
class Resolution:
    facts: DomainFacts
    machine: Machine
    accel: str  # kvm | tcg | other
    irqchip: str  # on | split | off
    cpu_kind: str  # named | host | max
    model: str | None  # QEMU CPU model for named CPUs
    features: dict[str, Value]
    explicit_unhalt: str | None  # who chose kvm-pv-unhalt explicitly, if anyone
    warnings: tuple[str, ...] = ()
    start_refusal: str | None = None  # libvirt's error when it will refuse to start the domain
    host: HostFacts = field(default_factory=HostFacts)


@dataclass
class _Slot:
    value: bool | None  # None = unknown (host-dependent)
    source: str
    detail: str
    user_set: bool = False
    auto: bool = False  # host/max: to be filled from host support


def _bool(text: str) -> bool | None:
    t = text.strip().lower()
    if t in ("on", "true", "yes", "1"):
        return True
    if t in ("off", "false", "no", "0"):
        return False
    return None


def _qemu_name(name: str) -> str:
    return name.replace("_", "-")


def parse_cpu_option(text: str) -> tuple[str, list[tuple[str, bool]]]:
    """`-cpu model,+feat,-feat,feat=on` -> (model, [(prop, value)])."""
    parts = text.split(",")
    props: list[tuple[str, bool]] = []
    for p in parts[1:]:
        if not p:
            continue
        if p[0] in "+-":
            props.append((_qemu_name(p[1:]), p[0] == "+"))
        elif "=" in p:
            k, v = p.split("=", 1)
            b = _bool(v)
            if b is not None:
                props.append((_qemu_name(k), b))
    return parts[0], props


def _irqchip(facts: DomainFacts, machine: Machine) -> str:
    if facts.qemu.accel_irqchip:
        return facts.qemu.accel_irqchip
    if facts.ioapic_driver == "qemu":
        return "split"
    if facts.ioapic_driver == "kvm":
        return "on"
    if machine.family == "microvm":
        return "split"  # microvm default_kernel_irqchip_split (0ebf007dda, 4.2)
    if machine.family == "pc-q35" and machine.version == (4, 0):
        return "split"  # pc-q35-4.0 only (b2fc91db84, c87759ce87)
    return "on"


def _accel(virt_type: str | None) -> str:
    return {"kvm": "kvm", "qemu": "tcg"}.get(virt_type or "", virt_type or "unknown")


def _rule_applies(rule: rules.Rule, machine: Machine, irqchip: str) -> bool | None:
    if rule.flavour != "any" and rule.flavour != machine.flavour:
        return False
    if rule.when and rule.when != f"irqchip={irqchip}":
        return False
    if rule.families is not None and machine.family not in rule.families:
        return False
    if rule.rhel_up_to is not None:
        return machine.rhel_version is not None and machine.rhel_version <= rule.rhel_up_to
    if rule.up_to is not None:
        return version_at_most(machine, rule.up_to)
    return True


def _model_bits(facts: DomainFacts, host: HostFacts, model: str | None) -> tuple[dict[str, bool | None], str]:
    """x2apic/svm as the CPU model defines them (host-model: as libvirt expands it)."""
    if facts.cpu_mode == "host-model" and not facts.qemu.cpu:
        if host.host_model:
            base, feats = host.host_model
            bits = dict(MODEL_BITS.get(base or "", {"x2apic": None, "svm": None}))
            for name, policy in feats:
                if name in bits:
                    bits[name] = policy in ("require", "force")
            return bits, f"host-model = {base} + {len(feats)} features (domain capabilities)"
        inferred = {b: host.supports(*rules.HOST_CPUID_BIT[b]) for b in ("x2apic", "svm")}
        how = "inferred from /dev/kvm" if host.cpuid is not None else "unknown without host facts"
        return inferred, f"host-model: libvirt names every host CPU feature in its CPU map ({how})"
    bits = MODEL_BITS.get(model or "")
    if bits is None:
        return {"x2apic": None, "svm": None}, f"CPU model {model} is not in the model table"
    return dict(bits), f"CPU model {model} definition"


def resolve(facts: DomainFacts, host: HostFacts | None = None) -> Resolution:
    host = host or HostFacts()
    machine = classify(facts.machine, host.aliases)
    accel = _accel(facts.virt_type)
    irqchip = _irqchip(facts, machine)
    warnings: list[str] = []
    if host.machines and facts.machine and facts.machine not in host.machines:
        warnings.append(f"machine type {facts.machine} is not offered by this host's QEMU")

    # The CPU QEMU is asked for: libvirt's, unless <qemu:commandline> passes its own -cpu (last one wins).
    libvirt_props = _libvirt_cpu_props(facts, warnings)
    if facts.qemu.cpu:
        model, cmd_props = parse_cpu_option(facts.qemu.cpu)
        cpu_props = [(p, v, "qemu:commandline -cpu", f"-cpu {facts.qemu.cpu}") for p, v in cmd_props]
        warnings.append("<qemu:commandline> passes its own -cpu, which replaces libvirt's -cpu "
                        "(and every <features>/<cpu> setting libvirt put there)")
        kind = {"host": "host", "max": "max"}.get(model, "named")
    else:
        cpu_props = libvirt_props
        kind = {"host-passthrough": "host", "maximum": "max"}.get(facts.cpu_mode, "named")
        if facts.cpu_mode == "none" or (facts.cpu_mode == "custom" and not facts.cpu_model):
            model = rules.ISAPC_DEFAULT_MODEL if machine.family == "isapc" else \
                rules.DEFAULT_MODEL.get(facts.arch or "x86_64", "qemu64")
        elif facts.cpu_mode == "host-model":
            model = (host.host_model[0] if host.host_model else None)
        else:
            model = facts.cpu_model
    slots: dict[str, _Slot] = {}

    # 1. The CPU model's own bits, or host/max.
    if kind == "named":
        bits, why = _model_bits(facts, host, model)
        for p in rules.PROPERTIES:
            if p in bits:
                slots[p] = _Slot(bits[p], "cpu-model", why)
            elif p == "kvm-pv-unhalt":
                slots[p] = _Slot(False, "qemu-default", "upstream kvm_default_props never includes it (QEMU 1.2 to "
                                 "master); only -cpu host/max or <pvspinlock state='on'/> turns it on")
            elif p == "kvm-hint-dedicated":
                slots[p] = _Slot(False, "qemu-default", "off unless asked for (FEAT_KVM_HINTS, be7773268d, 2.12)")
            else:
                slots[p] = _Slot(False, "qemu-default", "no CPU model defines KVM paravirt bits; only -cpu host/max "
                                 "or an explicit property turns this on")
    else:
        for p in rules.PROPERTIES:
            slots[p] = _Slot(None, f"-cpu {kind}", f"-cpu {kind} enables what the accelerator supports", auto=True)
        slots["kvm-hint-dedicated"] = _Slot(False, f"-cpu {kind}",
                                            "FEAT_KVM_HINTS is never auto-enabled (0d914f39a7, 2.12)")
    slots["l3-cache"] = _Slot(True, "qemu-default", "l3-cache property default true (14c985cffa, 2.8)")

    # 2. KVM default properties, as machine compat changed them (named models under KVM only).
    if kind == "named" and accel == "kvm":
        base = {p: (s.value, s.source, s.detail) for p, s in slots.items()}
        for rule in rules.KVM_DEFAULTS + tuple(r for r in rules.MACHINE_ROWS if r.layer == "kvm-default"):
            applies = _rule_applies(rule, machine, irqchip)
            if applies is False:
                continue
            if applies is None:
                slots[rule.prop] = _Slot(None, "machine-compat",
                                         f"depends on which machine {machine.label()} stands for: {rule.source}")
                continue
            if rule.value is None:
                v, _src, d = base[rule.prop]
                slots[rule.prop] = _Slot(v, "machine-compat", f"{machine.label()}: {rule.source}; so {d}")
            else:
                src = "kvm-default" if rule.flavour != "rhel" else "rhel-kvm-default"
                slots[rule.prop] = _Slot(rule.value == ON, src, rule.source)

    # 3. Machine compat_props: every x86 CPU, user-set.
    for rule in (r for r in rules.MACHINE_ROWS if r.layer == "compat"):
        applies = _rule_applies(rule, machine, irqchip)
        if applies is False:
            continue
        if applies is None:
            slots[rule.prop] = _Slot(None, "machine-compat",
                                     f"depends on which machine {machine.label()} stands for: {rule.source}",
                                     user_set=True)
        else:
            slots[rule.prop] = _Slot(rule.value == ON, "machine-compat",
                                     f"{machine.label()}: {rule.source}", user_set=True)

    # 4. -global, then -cpu properties.
    for driver, prop, value in facts.qemu.globals:
        p = _qemu_name(prop)
        if p in slots and _global_matches(driver, kind, model):
            b = _bool(value)
            if b is not None:
                slots[p] = _Slot(b, "qemu:commandline -global", f"-global {driver}.{prop}={value}", user_set=True)
    for p, v, src, detail in cpu_props:
        if p == "kvm":
            continue
        if p in slots:
            slots[p] = _Slot(v, src, detail, user_set=True)
    expose_kvm = not any(p == "kvm" and not v for p, v, *_ in cpu_props)

    # 5. host/max: auto-enable what the accelerator supports, except user-set properties.
    for p, s in slots.items():
        if s.auto and not s.user_set:
            sup, why = _supported(p, accel, irqchip, host)
            slots[p] = _Slot(sup, s.source, f"passed through: {why}")

    # 6. The KVM leaf cleared as a whole.
    for p in rules.KVM_LEAF_EAX_BIT:
        if accel != "kvm" and slots[p].value is not False:
            slots[p] = _Slot(False, "tcg", "not KVM: QEMU clears the KVM leaf (aec661de86, 2.8)")
        elif not expose_kvm and slots[p].value is not False:
            slots[p] = _Slot(False, "kvm-hidden", "<kvm><hidden state='on'/> = -cpu ...,kvm=off: no KVM leaf")

    # 7. Filter what the accelerator cannot provide.
    for p, s in slots.items():
        if s.value is False or p == "l3-cache":
            continue
        sup, why = _supported(p, accel, irqchip, host)
        if sup is False:
            slots[p] = _Slot(False, "filtered", f"{s.detail}; dropped: {why}")
        elif sup is None and s.value is True:
            slots[p] = _Slot(None, s.source, f"{s.detail}; kept only if {why}")

    values = {p: Value(_state(s.value), s.source, s.detail) for p, s in slots.items()}

    # 8. What KVM strips after QEMU: HLT exits disabled -> no PV_UNHALT (kvm_update_cpuid_runtime).
    if facts.qemu.cpu_pm and accel == "kvm" and values["kvm-pv-unhalt"].state != OFF:
        v = values["kvm-pv-unhalt"]
        values["kvm-pv-unhalt"] = Value(OFF, "kvm-cpu-pm",
                                        "-overcommit cpu-pm=on disables HLT exits; KVM clears PV_UNHALT "
                                        "from the guest CPUID (caa057a2cad6)", qom=v.state)
    refusal = None
    if facts.pvspinlock == "on" and not facts.qemu.cpu and values["kvm-pv-unhalt"].qemu_property == OFF:
        # qemuProcessVerifyKVMFeatures checks the started vCPU, whatever check= says.
        refusal = "host doesn't support paravirtual spinlocks"
        warnings.append(f"libvirt will refuse to start this domain ('{refusal}'): <pvspinlock state='on'/> but "
                        f"kvm-pv-unhalt ends up off ({values['kvm-pv-unhalt'].source})")
    return Resolution(facts, machine, accel, irqchip, kind, model, values, _explicit_unhalt(facts),
                      tuple(warnings), start_refusal=refusal, host=host)


def _state(v: bool | None) -> str:
    return HOST if v is None else (ON if v else OFF)


def _global_matches(driver: str, kind: str, model: str | None) -> bool:
    if driver in ("x86_64-cpu", "i386-cpu", "x86-cpu"):
        return True
    name = {"host": "host", "max": "max"}.get(kind, model or "")
    return driver in (f"{name}-x86_64-cpu", f"{name}-i386-cpu")


def _libvirt_cpu_props(facts: DomainFacts, warnings: list[str]) -> list[tuple[str, bool, str, str]]:
    """The -cpu properties libvirt generates, in its order (qemuBuildCpuCommandLine)."""
    out: list[tuple[str, bool, str, str]] = []
    for name, policy in facts.cpu_features:
        q = _qemu_name(name)
        if q == "kvm-pv-unhalt":
            warnings.append("<cpu><feature name='kvm_pv_unhalt'/>: libvirt 9.0-11.3 refuse to start this domain "
                            "('unknown CPU feature: kvm_pv_unhalt'); use <features><pvspinlock state='on'/>")
        if policy in ("require", "force"):
            out.append((q, True, "<cpu><feature>", f"<feature policy='{policy}' name='{name}'/>"))
        elif policy in ("disable", "forbid"):
            out.append((q, False, "<cpu><feature>", f"<feature policy='{policy}' name='{name}'/>"))
    if facts.kvm_hidden:
        out.append(("kvm", False, "<features><kvm>", "<hidden state='on'/> -> kvm=off"))
    for state, prop, xml in ((facts.hint_dedicated, "kvm-hint-dedicated", "<kvm><hint-dedicated"),
                             (facts.poll_control, "kvm-poll-control", "<kvm><poll-control"),
                             (facts.pv_ipi, "kvm-pv-ipi", "<kvm><pv-ipi")):
        if state in ("on", "off"):
            out.append((prop, state == "on", "<features><kvm>", f"{xml} state='{state}'/> -> {prop}={state}"))
    if facts.pvspinlock in ("on", "off"):
        out.append(("kvm-pv-unhalt", facts.pvspinlock == "on", "<features><pvspinlock>",
                    f"<pvspinlock state='{facts.pvspinlock}'/> -> kvm-pv-unhalt={facts.pvspinlock}"))
    if facts.apic_eoi in ("on", "off"):
        out.append(("kvm-pv-eoi", facts.apic_eoi == "on", "<features><apic>",
                    f"<apic eoi='{facts.apic_eoi}'/> -> kvm-pv-eoi={facts.apic_eoi}"))
    if facts.kvmclock_present in ("yes", "no"):
        on = facts.kvmclock_present == "yes"
        out.append(("kvmclock", on, "<clock><timer>",
                    f"<timer name='kvmclock' present='{facts.kvmclock_present}'/> -> kvmclock={'on' if on else 'off'}"))
    return out


def _supported(prop: str, accel: str, irqchip: str, host: HostFacts) -> tuple[bool | None, str]:
    """Whether the accelerator would keep `prop` on (QEMU's filter), with the reason."""
    if accel != "kvm":
        if prop == "svm":
            return True, "TCG emulates SVM"
        if prop == "x2apic":
            if host.qemu_version is None:
                return None, "QEMU >= 9.0 (TCG emulates x2APIC only since 9.0)"
            return (host.qemu_version >= TCG_X2APIC_SINCE,
                    f"TCG emulates x2APIC only since QEMU 9.0 (this is {'.'.join(map(str, host.qemu_version))})")
        return False, "TCG provides no KVM paravirt features"
    if prop == "kvm-pv-unhalt" and irqchip == "off":
        return False, "QEMU reports kvm-pv-unhalt unsupported without in-kernel irqchip (648774779a, 2.7)"
    if prop == "x2apic" and irqchip == "off":
        return False, "x2apic needs the in-kernel irqchip (492a4c94be, 2.6)"
    if prop == "kvm-msi-ext-dest-id":
        return (irqchip == "split",
                "QEMU offers kvm-msi-ext-dest-id only with kernel_irqchip=split (c1bb5418e3, 6.0)")
    if prop in rules.QEMU_SYNTHESIZED:
        return True, rules.QEMU_SYNTHESIZED[prop]
    if prop in rules.KVM_LEAF_EAX_BIT:
        sup = host.supports(0x40000001, "eax", rules.KVM_LEAF_EAX_BIT[prop])
    else:
        sup = host.supports(*rules.HOST_CPUID_BIT[prop])
    if sup is None:
        if prop in rules.KVM_BASELINE:
            return True, "every KVM that QEMU >= 4.2 runs on supports it"
        return None, "the host's KVM supports it (not known without /dev/kvm or host facts)"
    return sup, ("the host's KVM supports it" if sup else "the host's KVM does not support it") + " (/dev/kvm)"


def _explicit_unhalt(facts: DomainFacts) -> str | None:
    if facts.pvspinlock:
        return f"<features><pvspinlock state='{facts.pvspinlock}'/>"
    for name, policy in facts.cpu_features:
        if _qemu_name(name) == "kvm-pv-unhalt":
            return f"<cpu><feature policy='{policy}' name='{name}'/>"
    if facts.qemu.cpu and re.search(r"kvm[-_]pv[-_]unhalt", facts.qemu.cpu):
        return f"<qemu:commandline> -cpu {facts.qemu.cpu}"
    for driver, prop, value in facts.qemu.globals:
        if _qemu_name(prop) == "kvm-pv-unhalt":
            return f"<qemu:commandline> -global {driver}.{prop}={value}"
    return None

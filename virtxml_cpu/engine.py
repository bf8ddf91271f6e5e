"""Effective CPU features with provenance: DomainFacts + HostFacts -> Resolution (pure).

An interpreter of the flavour tables (flavours/) in QEMU's own order (target/i386 and hw/core/qdev.c):
the CPU model's bits, then the build's kvm_default_props as machine compat changed them (named models
under KVM only), then machine compat_props (every x86 CPU, counted as user-set), then -global, then -cpu
properties (libvirt's <cpu>/<features>, or a <qemu:commandline> -cpu that replaces them), then host/max
auto-enable, then `kvm=off`/TCG clearing the KVM leaf, then the filter against what the accelerator
supports, then what KVM itself strips. One function per step; STEPS is the order.

When the QEMU build is not known and the machine name does not pin it down, the domain is resolved under
every build that has such a machine and the answers are merged: a property on which they disagree is
host-dependent, with each build's answer in its detail.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from . import rules
from .cpu_models import MODEL_BITS
from .domain import DomainFacts
from .flavours import FLAVOURS, UPSTREAM, Flavour, Rule
from .hostfacts import HostFacts
from .machines import Machine, claimants, classify, own_version_at_most, version_at_most
from .memo import MISSING, Kept

ON, OFF, HOST = "on", "off", "host-dependent"
TCG_X2APIC_SINCE = (9, 0)  # x2APIC emulation for TCG (Bui Quang Minh's series, merged for QEMU 9.0)

# Provenance tags a policy may act on.
SRC_TCG, SRC_HIDDEN, SRC_CPU_PM = "tcg", "kvm-hidden", "kvm-cpu-pm"
SRC_FILTERED, SRC_FLAVOUR = "filtered", "qemu-flavour"


class Value(NamedTuple):
    """One property's answer (a tuple: 17 are built per domain)."""

    state: str  # on | off | host-dependent
    source: str  # where the value comes from, short
    detail: str  # why, with the QEMU/libvirt/KVM reference
    qom: str | None = None  # what QMP qom-get reports, when KVM changes it afterwards (cpu-pm)

    @property
    def qemu_property(self) -> str:
        return self.qom or self.state


class Resolution(NamedTuple):
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
    host: HostFacts = HostFacts()
    flavour: str = "upstream"  # the QEMU build assumed; "a|b" when unknown and the answers were merged
    flavour_basis: str = ""  # why that build
    support: dict[str, tuple[bool | None, str]] = {}  # would the accelerator keep it (never mutated)
    cpu_from_commandline: bool = False  # <qemu:commandline> -cpu replaced libvirt's -cpu


class _Slot:
    """One property while the steps run (mutable, per resolution)."""

    __slots__ = ("value", "source", "detail", "user_set", "auto")

    def __init__(self, value: bool | None, source: str, detail: str, user_set: bool = False, auto: bool = False):
        self.value = value  # None = unknown (host-dependent)
        self.source = source
        self.detail = detail
        self.user_set = user_set
        self.auto = auto  # host/max: to be filled from host support


class _Context:
    """Everything the steps read; computed once per (domain, flavour)."""

    __slots__ = ("facts", "host", "flavour", "machine", "accel", "irqchip", "kind", "model", "cpu_props", "warnings",
                 "support")

    def __init__(self, facts, host, flavour, machine, accel, irqchip, kind, model, cpu_props, warnings):
        self.facts: DomainFacts = facts
        self.host: HostFacts = host
        self.flavour: Flavour = flavour
        self.machine: Machine = machine
        self.accel = accel
        self.irqchip = irqchip
        self.kind = kind
        self.model: str | None = model
        self.cpu_props: list[tuple[str, bool, str, str]] = cpu_props
        self.warnings: list[str] = warnings
        self.support: dict[str, tuple[bool | None, str]] = {}  # filled once, read by steps


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
    """`-cpu model,+feat,-feat,feat=on,feat` -> (model, [(prop, value)]); a bare `feat` means feat=on."""
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
        else:
            props.append((_qemu_name(p), True))
    return parts[0], props


def _accel(virt_type: str | None) -> str:
    return {"kvm": "kvm", "qemu": "tcg"}.get(virt_type or "", virt_type or "unknown")


def _irqchip(facts: DomainFacts, machine: Machine) -> str:
    if facts.qemu.accel_irqchip:
        return facts.qemu.accel_irqchip
    if facts.ioapic_driver == "qemu":
        return "split"
    if facts.ioapic_driver == "kvm":
        return "on"
    return machine.irqchip


def rule_applies(rule: Rule, machine: Machine, irqchip: str) -> bool | None:
    if rule.when and rule.when != f"irqchip={irqchip}":
        return False
    if rule.families is not None and machine.family not in rule.families:
        return False
    if rule.own_up_to is not None:
        return own_version_at_most(machine, rule.own_up_to)
    if rule.up_to is not None:
        return version_at_most(machine, rule.up_to)
    return True


# ---------------------------------------------------------------------------------------------------------
# The steps, in QEMU's order.

def _model_bits(ctx: _Context) -> tuple[dict[str, bool | None], str]:
    """x2apic/svm as the CPU model defines them (host-model: as libvirt expands it)."""
    facts, host = ctx.facts, ctx.host
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
    bits = MODEL_BITS.get(ctx.model or "")
    if bits is None:
        return {"x2apic": None, "svm": None}, f"CPU model {ctx.model} is not in the model table"
    return dict(bits), f"CPU model {ctx.model} definition"


def step_cpu_model(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """1. The CPU model's own bits, or host/max (filled from host support in step 6)."""
    if ctx.kind == "named":
        bits, why = _model_bits(ctx)
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
            slots[p] = _Slot(None, f"-cpu {ctx.kind}", f"-cpu {ctx.kind} enables what the accelerator supports",
                             auto=True)
        slots["kvm-hint-dedicated"] = _Slot(False, f"-cpu {ctx.kind}",
                                            "FEAT_KVM_HINTS is never auto-enabled (0d914f39a7, 2.12)")
    slots["l3-cache"] = _Slot(True, "qemu-default", "l3-cache property default true (14c985cffa, 2.8)")


_APPLICABLE = Kept()


def _applicable(ctx: _Context, layer: str) -> tuple[tuple[Rule, bool | None], ...]:
    """The rows of one layer that may apply to this machine, with rule_applies' answer. Pure in (build,
    machine, irqchip), so cached: a fleet has few distinct machines."""
    key = (ctx.machine, ctx.irqchip, layer)
    answer = _APPLICABLE.get(ctx.flavour, key)
    if answer is MISSING:
        rows = (ctx.flavour.kvm_defaults if layer == "kvm-default" else ()) + tuple(
            r for r in ctx.flavour.machine_rows if r.layer == layer)
        answer = _APPLICABLE.put(ctx.flavour, key, tuple(
            (r, a) for r in rows if (a := rule_applies(r, ctx.machine, ctx.irqchip)) is not False))
    return answer


def step_kvm_defaults(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """2. The build's kvm_default_props as machine compat changed them (named models under KVM only)."""
    if ctx.kind != "named" or ctx.accel != "kvm":
        return
    base = {p: (s.value, s.detail) for p, s in slots.items()}
    for rule, applies in _applicable(ctx, "kvm-default"):
        if applies is None:
            slots[rule.prop] = _Slot(None, "machine-compat",
                                     f"depends on which machine {ctx.machine.label()} stands for: {rule.source}")
        elif rule.value is None:  # keep the CPU model's own bit: a machine's compat row, or a build's table
            v, d = base[rule.prop]
            if id(rule) in _DEFAULT_ROWS:
                slots[rule.prop] = _Slot(v, f"{ctx.flavour.name}-kvm-default", f"{rule.source}; so {d}")
            else:
                slots[rule.prop] = _Slot(v, "machine-compat", f"{ctx.machine.label()}: {rule.source}; so {d}")
        else:
            src = "kvm-default" if id(rule) in _UPSTREAM_DEFAULTS else f"{ctx.flavour.name}-kvm-default"
            slots[rule.prop] = _Slot(rule.value == ON, src, rule.source)


def step_machine_compat(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """3. Machine compat_props: every x86 CPU, counted as user-set."""
    for rule, applies in _applicable(ctx, "compat"):
        if applies is None:
            slots[rule.prop] = _Slot(None, "machine-compat",
                                     f"depends on which machine {ctx.machine.label()} stands for: {rule.source}",
                                     user_set=True)
        else:
            slots[rule.prop] = _Slot(rule.value == ON, "machine-compat", f"{ctx.machine.label()}: {rule.source}",
                                     user_set=True)


def step_globals(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """4. -global DRIVER.PROP=VALUE from <qemu:commandline>, after compat_props (qdev global order)."""
    for driver, prop, value in ctx.facts.qemu.globals:
        p = _qemu_name(prop)
        if p in slots and _global_matches(driver, ctx.kind, ctx.model):
            b = _bool(value)
            if b is not None:
                slots[p] = _Slot(b, "qemu:commandline -global", f"-global {driver}.{prop}={value}", user_set=True)


def step_cpu_properties(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """5. -cpu MODEL,prop=... (libvirt's, or the last -cpu of <qemu:commandline>)."""
    for p, v, src, detail in ctx.cpu_props:
        if p in slots:
            slots[p] = _Slot(v, src, detail, user_set=True)


def step_host_max(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """6. host/max: auto-enable what the accelerator supports, except user-set properties."""
    for p, s in slots.items():
        if s.auto and not s.user_set:
            sup, why = ctx.support[p]
            slots[p] = _Slot(sup, s.source, f"passed through: {why}")


def step_kvm_leaf(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """7. The KVM leaf cleared as a whole: not KVM, or kvm=off."""
    hidden = any(p == "kvm" and not v for p, v, *_ in ctx.cpu_props)
    for p in rules.KVM_LEAF_EAX_BIT:  # recorded even where the bit was off already: it is the final cause
        if ctx.accel != "kvm":
            slots[p] = _Slot(False, SRC_TCG, "not KVM: QEMU clears the KVM leaf (aec661de86, 2.8)")
        elif hidden:
            slots[p] = _Slot(False, SRC_HIDDEN, "<kvm><hidden state='on'/> = -cpu ...,kvm=off: no KVM leaf")


def step_filter(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """8. Drop what the accelerator cannot provide."""
    for p, s in slots.items():
        if s.value is False or p == "l3-cache":
            continue
        sup, why = ctx.support[p]
        if sup is False:
            slots[p] = _Slot(False, SRC_FILTERED, f"{s.detail}; dropped: {why}")
        elif sup is None and s.value is True:
            slots[p] = _Slot(None, s.source, f"{s.detail}; kept only if {why}")


_UPSTREAM_DEFAULTS = frozenset(id(r) for r in UPSTREAM.kvm_defaults)  # shared rows keep the plain label
_DEFAULT_ROWS = frozenset(id(r) for f in FLAVOURS.values() for r in f.kvm_defaults)  # a build's own table

STEPS = (step_cpu_model, step_kvm_defaults, step_machine_compat, step_globals, step_cpu_properties,
         step_host_max, step_kvm_leaf, step_filter)


def _kvm_strips(ctx: _Context, values: dict[str, Value]) -> None:
    """9. What KVM strips after QEMU: HLT exits disabled -> no PV_UNHALT (kvm_update_cpuid_runtime)."""
    v = values["kvm-pv-unhalt"]
    if ctx.facts.qemu.cpu_pm and ctx.accel == "kvm" and v.source != SRC_HIDDEN:
        values["kvm-pv-unhalt"] = Value(OFF, SRC_CPU_PM, "-overcommit cpu-pm=on disables HLT exits; KVM clears "
                                        "PV_UNHALT from the guest CPUID (caa057a2cad6)", qom=v.state)


# ---------------------------------------------------------------------------------------------------------

_RESOLVED = Kept()
_IDENTITY = ("name", "uuid")  # the only facts that differ between clones of one template: DomainFacts[:2]


assert DomainFacts._fields[:len(_IDENTITY)] == _IDENTITY


def resolve(facts: DomainFacts, host: HostFacts | None = None) -> Resolution:
    """Resolve under the host's QEMU build, or under every build that has this machine when it is unknown.

    Pure in (facts but name and uuid, host facts), so answers are kept per host: a fleet's domains are
    mostly clones of a few templates."""
    host = host or HostFacts()
    key = facts[len(_IDENTITY):]
    kept = _RESOLVED.get(host, key)
    if kept is not MISSING:
        return kept._replace(facts=facts)
    candidates, basis, warnings = _flavour_candidates(facts.machine, host)
    results = [_resolve_one(facts, host, flavour, machine, list(warnings)) for flavour, machine in candidates]
    res = results[0] if len(results) == 1 else _merge(results)
    return _RESOLVED.put(host, key, res._replace(flavour_basis=basis))


def _flavour_candidates(name: str | None, host: HostFacts) -> tuple[list[tuple[Flavour, Machine]], str, list[str]]:
    machine_label = name or "(none: the default machine)"
    if host.qemu_flavour:
        chosen = FLAVOURS[host.qemu_flavour]
        mine = classify(name, chosen, host.aliases)
        basis = f"{chosen.name}: {host.flavour_source}"
        if mine is not None:
            return [(chosen, mine)], basis, []
    claim = claimants(name, host.aliases)
    if host.qemu_flavour:
        if claim:
            names = ", ".join(f.title for f, _ in claim)
            return claim, f"{'/'.join(f.name for f, _ in claim)}: machine {machine_label} exists only in {names}", [
                f"machine type {machine_label} does not exist in {chosen.title} ({host.flavour_source}); "
                f"resolved as {names}, where it does"]
        return [(chosen, Machine(name, "unknown", chosen.name, how="no flavour knows this name"))], basis, []
    if not claim:
        return [(UPSTREAM, Machine(name, "unknown", UPSTREAM.name, how="no flavour knows this name"))], \
            "upstream: no QEMU build has this machine name; nothing is known about it", []
    if len(claim) == 1:
        return claim, f"{claim[0][0].name}: machine type {machine_label} exists only in {claim[0][0].title}", []
    return claim, (f"not known ({' or '.join(f.name for f, _ in claim)}: machine {machine_label} exists in each; "
                   "give --qemu-flavour, --connect or run where the QEMU is installed)"), []


def _resolve_one(facts: DomainFacts, host: HostFacts, flavour: Flavour, machine: Machine,
                 warnings: list[str]) -> Resolution:
    accel = _accel(facts.virt_type)
    irqchip = _irqchip(facts, machine)
    if host.machines and facts.machine and facts.machine not in host.machines:
        warnings.append(f"machine type {facts.machine} is not offered by this host's QEMU")
    libvirt_props = _libvirt_cpu_props(facts, warnings)
    if facts.qemu.cpu:
        model, cmd = parse_cpu_option(facts.qemu.cpu)
        cpu_props = [(p, v, "qemu:commandline -cpu", f"-cpu {facts.qemu.cpu}") for p, v in cmd]
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
            model = host.host_model[0] if host.host_model else None
        else:
            model = facts.cpu_model
    ctx = _Context(facts, host, flavour, machine, accel, irqchip, kind, model, cpu_props, warnings)
    ctx.support = _support(ctx)
    slots: dict[str, _Slot] = {}
    for step in STEPS:
        step(ctx, slots)
    values = {p: Value(_state(s.value), s.source, s.detail) for p, s in slots.items()}
    _kvm_strips(ctx, values)
    refusal = _start_refusal(ctx, values)
    return Resolution(facts, machine, accel, irqchip, kind, model, values, _explicit_unhalt(facts),
                      tuple(dict.fromkeys(warnings)), start_refusal=refusal, host=host, flavour=flavour.name,
                      support=ctx.support, cpu_from_commandline=bool(facts.qemu.cpu))


def _start_refusal(ctx: _Context, values: dict[str, Value]) -> str | None:
    """libvirt's own checks that stop the start (qemuProcessStartValidate, qemuProcessVerifyKVMFeatures)."""
    facts = ctx.facts
    for name, _policy in facts.cpu_features:  # not in libvirt's CPU map (virCPUx86ValidateFeatures)
        if _qemu_name(name) == "kvm-pv-unhalt":
            return f"unknown CPU feature: {name}"
    if facts.cpu_cache and not facts.qemu.cpu:
        mode, level = facts.cpu_cache
        if mode == "passthrough" and ctx.kind == "named":
            return "CPU cache mode 'passthrough' can only be used with"
    # qemuProcessVerifyKVMFeatures reads the started vCPU, also when a <qemu:commandline> -cpu replaced libvirt's.
    if facts.pvspinlock == "on" and values["kvm-pv-unhalt"].qemu_property == OFF:
        ctx.warnings.append(f"libvirt will refuse to start this domain ('host doesn't support paravirtual "
                            f"spinlocks'): <pvspinlock state='on'/> but kvm-pv-unhalt ends up off "
                            f"({values['kvm-pv-unhalt'].source})")
        return "host doesn't support paravirtual spinlocks"
    return None


def _merge(results: list[Resolution]) -> Resolution:
    """One Resolution for several possible builds: agreement stays, disagreement is host-dependent."""
    first = results[0]
    features: dict[str, Value] = {}
    for p in rules.PROPERTIES:
        vals = [r.features[p] for r in results]
        if len({v.qemu_property for v in vals}) == 1 and len({v.state for v in vals}) == 1:
            features[p] = vals[0]
        else:
            features[p] = Value(HOST, SRC_FLAVOUR, "depends on the QEMU build: " + "; ".join(
                f"{r.flavour}: {v.state} ({v.source})" for r, v in zip(results, vals)))
    machines = [r.machine for r in results]
    lows = [m.low for m in machines]
    highs = [m.high for m in machines]
    machine = Machine(first.machine.name, first.machine.family if len({m.family for m in machines}) == 1 else "unknown",
                      "|".join(r.flavour for r in results),
                      None if None in lows else min(lows), None if None in highs else max(highs),
                      alias_of=first.machine.alias_of if len({m.alias_of for m in machines}) == 1 else None,
                      irqchip=first.irqchip, how="; ".join(f"{r.flavour}: {r.machine.how}" for r in results))
    refusals = {r.start_refusal for r in results}
    support = {p: first.support[p] if len({r.support[p][0] for r in results}) == 1
               else (None, "depends on the QEMU build") for p in rules.PROPERTIES}
    return Resolution(first.facts, machine, first.accel, first.irqchip, first.cpu_kind, first.model, features,
                      first.explicit_unhalt, tuple(dict.fromkeys(w for r in results for w in r.warnings)),
                      start_refusal=first.start_refusal if len(refusals) == 1 else None, host=first.host,
                      flavour="|".join(r.flavour for r in results), support=support,
                      cpu_from_commandline=first.cpu_from_commandline)


def _state(v: bool | None) -> str:
    return HOST if v is None else (ON if v else OFF)


def _global_matches(driver: str, kind: str, model: str | None) -> bool:
    """Whether `-global driver.prop` reaches this vCPU: TYPE_X86_CPU, or the CPU's type or a QOM parent."""
    if driver in rules.X86_CPU_DRIVERS:
        return True
    name = {"host": "host", "max": "max"}.get(kind, model or "")
    types = (name,) + rules.CPU_TYPE_PARENTS.get(name, ())
    return any(driver in (f"{t}-x86_64-cpu", f"{t}-i386-cpu") for t in types)


def _libvirt_cpu_props(facts: DomainFacts, warnings: list[str]) -> list[tuple[str, bool, str, str]]:
    """The -cpu properties libvirt generates, in its order (qemuBuildCpuCommandLine)."""
    out: list[tuple[str, bool, str, str]] = []
    for name, policy in facts.cpu_features:
        q = _qemu_name(name)
        if q == "kvm-pv-unhalt":
            warnings.append(f"<cpu><feature name='{name}'/>: libvirt 9.0-11.3 refuse to start this domain "
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
    if facts.cpu_cache:
        mode, _level = facts.cpu_cache
        if mode in ("emulate", "passthrough", "disable"):
            on = mode == "emulate"
            out.append(("l3-cache", on, "<cpu><cache>",
                        f"<cache mode='{mode}'/> -> l3-cache={'on' if on else 'off'} (qemuBuildCpuCommandLine)"))
    return out


_SUPPORT = Kept(256)


def _support(ctx: _Context) -> dict[str, tuple[bool | None, str]]:
    """What the accelerator keeps, per property: pure in (host facts, accelerator, irqchip), so computed
    once per host and kept (the cache holds the host facts, so their id stays theirs)."""
    answer = _SUPPORT.get(ctx.host, (ctx.accel, ctx.irqchip))
    if answer is MISSING:
        answer = _SUPPORT.put(ctx.host, (ctx.accel, ctx.irqchip), {p: _supported(p, ctx) for p in rules.PROPERTIES})
    return answer


def _supported(prop: str, ctx: _Context) -> tuple[bool | None, str]:
    """Whether the accelerator would keep `prop` on (QEMU's filter), with the reason."""
    accel, irqchip, host = ctx.accel, ctx.irqchip, ctx.host
    if prop == "l3-cache":
        return True, "a property of QEMU's CPUID, not filtered"
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


_UNHALT = re.compile(r"(^|,)[+-]?kvm[-_]pv[-_]unhalt($|[,=])")


def _explicit_unhalt(facts: DomainFacts) -> str | None:
    """Who chose kvm-pv-unhalt explicitly, in any form libvirt or QEMU accepts; such a choice is never changed."""
    if facts.pvspinlock:
        return f"<features><pvspinlock state='{facts.pvspinlock}'/>"
    for name, policy in facts.cpu_features:
        if _qemu_name(name) == "kvm-pv-unhalt":
            return f"<cpu><feature policy='{policy}' name='{name}'/>"
    if facts.qemu.cpu and _UNHALT.search(facts.qemu.cpu):
        return f"<qemu:commandline> -cpu {facts.qemu.cpu}"
    for driver, prop, value in facts.qemu.globals:
        if _qemu_name(prop) == "kvm-pv-unhalt":
            return f"<qemu:commandline> -global {driver}.{prop}={value}"
    return None

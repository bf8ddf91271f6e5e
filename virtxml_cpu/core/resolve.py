"""Effective CPU features with provenance: DomainFacts + HostFacts -> Resolution (pure).

An interpreter of the tables -- tables/properties.py (each property's defaults, release and support conditions),
tables/libvirt_xml.py (what libvirt writes for the domain XML) and tables/builds/ (each build's rows) -- in QEMU's own
order (target/i386 and hw/core/qdev.c): the CPU model's bits, then the build's kvm_default_props as machine
compat changed them (named models under KVM only), then machine compat_props (every x86 CPU, counted as
user-set), then -global, then -cpu properties (libvirt's <cpu>/<features>, or a <qemu:commandline> -cpu
that replaces them), then host/max auto-enable, then `kvm=off`/TCG clearing the KVM leaf, then the filter
against what the accelerator supports, then what the QEMU release lacks, then what KVM itself strips. One
function per step; STEPS is the order. Rows and properties apply only on the QEMU releases that have them.

When the QEMU build is not known and the machine name does not pin it down, the domain is resolved under
every build that has such a machine and the answers are merged: a property on which they disagree is
host-dependent, with each build's answer in its detail.
"""

from __future__ import annotations

from collections import namedtuple
from functools import lru_cache

from ..tables import lazyre, libvirt_xml, qemu as rules
from . import lifecycle, overcommit
from ..tables.cpu_models import MODEL_BITS
from .domain import DomainFacts
from ..tables.builds.known import FLAVOURS, UPSTREAM, Flavour, Rule
from .hostfacts import HostFacts
from .machines import Machine, claimants, classify, format_version, own_version_at_most, version_at_most
from ..tables.properties import (
    BY_NAME, CONFIDENTIAL, KVM_LEAF_HIDDEN, KVM_LEAF_WITHOUT_KVM, KVM_STRIPS, PROPERTIES, TABLE, Property)

ON, OFF, HOST = "on", "off", "host-dependent"

# Provenance tags a policy may act on.
SRC_TCG, SRC_HIDDEN, SRC_CPU_PM = "tcg", "kvm-hidden", "kvm-cpu-pm"
SRC_FILTERED, SRC_FLAVOUR, SRC_ABSENT = "filtered", "qemu-flavour", "qemu-release"
MODEL_OWN = tuple(p.name for p in TABLE if p.named_default is None)  # bits each CPU model defines itself


class Value(namedtuple("Value", "state source detail qom",
                       defaults=(None,))):
    """One property's answer (a tuple: 18 are built per domain)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    state: str  # on | off | host-dependent
    source: str  # where the value comes from, short
    detail: str  # why, with the QEMU/libvirt/KVM reference
    qom: str | None  # what QMP qom-get reports, when KVM changes it afterwards (cpu-pm)

    @property
    def qemu_property(self) -> str:
        return self.qom or self.state


class Resolution(namedtuple("Resolution", "facts machine accel irqchip cpu_kind model features "
                            "explicit_unhalt warnings start_refusal host flavour flavour_basis support "
                            "cpu_from_commandline machine_status machine_status_why qemu_refusal",
                            defaults=((), None, HostFacts(), "upstream", "", {}, False, lifecycle.OFFERED, "", None,))):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    facts: DomainFacts
    machine: Machine
    accel: str  # kvm | tcg | other
    irqchip: str  # on | split | off
    cpu_kind: str  # named | host | max
    model: str | None  # QEMU CPU model for named CPUs
    features: dict[str, Value]
    explicit_unhalt: str | None  # who chose kvm-pv-unhalt explicitly, if anyone
    warnings: tuple[str, ...]
    start_refusal: str | None  # libvirt's error when it will refuse to start the domain
    host: HostFacts
    flavour: str  # the QEMU build assumed; "a|b" when unknown and the answers were merged
    flavour_basis: str  # why that build
    support: dict[str, tuple[bool | None, str]]  # would the accelerator keep it (never mutated)
    cpu_from_commandline: bool  # <qemu:commandline> -cpu replaced libvirt's -cpu
    machine_status: str  # offered | deprecated | not-offered (core/lifecycle.py)
    machine_status_why: str
    qemu_refusal: str | None  # QEMU's own error when it refuses a <qemu:commandline> spelling


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


def qemu_bool(text: str, release: tuple[int, ...] | None = None) -> bool | None:
    """A boolean as QEMU `release` reads it (rules.GRAMMAR); None: QEMU refuses the value."""
    g = rules.grammar(release)
    return True if text in g.true else False if text in g.false else None


_qemu_name = libvirt_xml.qemu_name
_BOOL_PROPS = frozenset(PROPERTIES) | {"kvm"}  # the boolean properties read here (kvm=off hides the KVM leaf)


class CpuOption(namedtuple("CpuOption", "model props refused")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    model: str
    props: list[tuple[str, bool]]
    refused: list[tuple[str, str]]  # (property as written, value) QEMU will not take


def _spelled(names) -> str:
    """A regular expression alternative of `names` in either spelling (`_` for any `-`)."""
    return "|".join(sorted((n.replace("-", "[-_]") for n in names), key=len, reverse=True))


# The -cpu parts that can matter, after the model: `+p`/`-p`, `p=value` or a bare `p`, for p in _BOOL_PROPS (no
# other property is read). One scan finds them, so a -cpu of a million other properties costs its length.
_CPU_PROP = lazyre.compile(rf",(?:([+-])({_spelled(_BOOL_PROPS)})|({_spelled(_BOOL_PROPS)})(=?)([^,]*))(?=,|\Z)")
_UNHALT = lazyre.compile(r",[+-]*kvm[-_]pv[-_]unhalt(?=[=,]|\Z)")  # a -cpu part naming kvm-pv-unhalt


@lru_cache(maxsize=2)  # the engine asks twice for one definition's -cpu (its refusal, its properties)
def parse_cpu_option(text: str, release: tuple[int, ...] | None = None) -> CpuOption:
    """`-cpu model,+feat,-feat,feat=on,feat` -> the properties by QEMU's grammar (rules.GRAMMAR): a bare `feat`
    means feat=on, `_` reads as `-`; a value QEMU refuses for one of the properties resolved is listed apart.
    Only the properties resolved here (and `kvm`) are listed: no other is read. A part repeated counts at its
    last occurrence (where it decides), a refused one at its first (the one QEMU names)."""
    g = rules.grammar(release)
    found = _CPU_PROP.findall(text)
    read: dict = {}
    for part in dict.fromkeys(found):  # each distinct part once, in order
        sign, flag, k, eq, v = part
        if flag:
            read[part] = (flag.replace("_", "-"), rules.FLAG_PREFIXES[sign])
        elif not eq:
            if not v:  # `p` followed by more of a name is another property
                read[part] = (k.replace("_", "-"), rules.BARE_FLAG)
        elif v in g.true or v in g.false:
            read[part] = (k.replace("_", "-"), v in g.true)
        else:
            read[part] = (k, v, None)
    last = list(dict.fromkeys(reversed(found)))[::-1]  # the parts in the order of their last occurrences
    props = [read[p] for p in last if len(read.get(p, ())) == 2]
    refused = [read[p][:2] for p in read if len(read[p]) == 3]
    return CpuOption(text.split(",", 1)[0], props, refused)


def _refusal(model: str | None, kind: str, text: str | None, globals_, release) -> str | None:
    """QEMU's own error for the first spelling it refuses: the -cpu's (x86_cpu_parse_featurestr turns each
    property into a -global of the model's type, its name in the dash spelling), then each -global that reaches
    the vCPU (named as written)."""
    g = rules.grammar(release)
    if text:
        opt = parse_cpu_option(text, release)
        if opt.refused:
            prop, value = opt.refused[0]
            cpu_type = rules.cpu_type_names(rules.MAX_FEATURE_MODELS.get(kind, model or opt.model))[0]
            return g.refused.format(type=cpu_type, prop=_qemu_name(prop), value=value)
    for driver, prop, value in globals_:
        if (_qemu_name(prop) in _BOOL_PROPS and qemu_bool(value, release) is None
                and _global_matches(driver, kind, model)):
            return g.refused.format(type=driver, prop=prop, value=value)
    return None


def _accel(virt_type: str | None) -> str:
    return rules.ACCELERATORS.get(virt_type or "", virt_type or "unknown")


def _irqchip(facts: DomainFacts, machine: Machine) -> str:
    if facts.qemu.accel_irqchip:
        return facts.qemu.accel_irqchip
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.option == "-machine" and row.prop == "kernel_irqchip" and value in row.values:
            return row.values[value]
    return machine.irqchip


def rule_applies(rule: Rule, machine: Machine, irqchip: str, release: tuple[int, ...] | None = None) -> bool | None:
    """Whether a row applies to this machine and irqchip on QEMU `release` (None: unknown, as current);
    None when the machine's compat level cannot decide it."""
    if not rule.exists_in(release):
        return False
    if rule.machine_keyed and rule.origin != machine.arrays:  # RHEL machines take RHEL's arrays only
        return False
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
    """The bits a CPU model defines itself (MODEL_OWN), as the model has them (host-model: as libvirt
    expands it)."""
    facts, host = ctx.facts, ctx.host
    unknown: dict[str, bool | None] = dict.fromkeys(MODEL_OWN)
    if facts.cpu_mode == "host-model" and not facts.qemu.cpu:
        if host.host_model:
            base, feats = host.host_model
            bits = {**unknown, **MODEL_BITS.get(base or "", {})}
            for name, policy in feats:
                if name in bits:
                    bits[name] = policy in ("require", "force")
            return bits, f"host-model = {base} + {len(feats)} features (domain capabilities)"
        inferred = {b: host.supports(*BY_NAME[b].cpuid) if BY_NAME[b].cpuid else None for b in MODEL_OWN}
        how = "inferred from /dev/kvm" if host.cpuid is not None else "unknown without host facts"
        return inferred, f"host-model: libvirt names every host CPU feature in its CPU map ({how})"
    bits = MODEL_BITS.get(ctx.model or "")
    if bits is None or not bits:
        return unknown, f"CPU model {ctx.model} is not in the model table"
    return dict(bits), f"CPU model {ctx.model} definition"


def step_cpu_model(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """1. The CPU model's own bits and QEMU's property defaults, or host/max (filled from host support in
    step 6)."""
    if ctx.kind == "named":
        bits, why = _model_bits(ctx)
        for p in TABLE:
            if p.named_default is None:  # a model-own bit the model table lacks is unknown (regenerate it)
                known = p.name in bits
                slots[p.name] = _Slot(bits.get(p.name), "cpu-model", why if known else
                                      f"{why} has no {p.name}: tools/gen_cpu_models.py predates the property")
            else:
                slots[p.name] = _Slot(p.named_default, "qemu-default", p.default_why)
        return
    for p in TABLE:
        if p.auto:
            slots[p.name] = _Slot(None, f"-cpu {ctx.kind}", f"-cpu {ctx.kind} enables what the accelerator supports",
                                  auto=True)
        elif p.auto_why:
            slots[p.name] = _Slot(p.named_default, f"-cpu {ctx.kind}", p.auto_why)
        else:
            slots[p.name] = _Slot(p.named_default, "qemu-default", p.default_why)


def _applicable(ctx: _Context, layer: str) -> tuple[tuple[Rule, bool | None], ...]:
    """The rows of one layer that may apply to this machine on this QEMU release, with rule_applies' answer."""
    rows = (ctx.flavour.kvm_defaults if layer == "kvm-default" else ()) + tuple(
        r for r in ctx.flavour.machine_rows if r.layer == layer)
    release = ctx.host.qemu_version
    return tuple((r, a) for r in rows if (r.models is None or ctx.model in r.models)
                 and (a := rule_applies(r, ctx.machine, ctx.irqchip, release)) is not False)


def _default_source(rule: Rule) -> str:
    """A build-wide kvm_default_props row: upstream's plain, a downstream build's by its name."""
    return "kvm-default" if rule.origin == "upstream" else f"{rule.origin}-kvm-default"


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
            if rule.machine_keyed:
                slots[rule.prop] = _Slot(v, "machine-compat", f"{ctx.machine.label()}: {rule.source}; so {d}")
            else:
                slots[rule.prop] = _Slot(v, _default_source(rule), f"{rule.source}; so {d}")
        else:
            slots[rule.prop] = _Slot(rule.value == ON, _default_source(rule), rule.source)


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
            b = qemu_bool(value, ctx.host.qemu_version)
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
    for p in (q.name for q in TABLE if q.kvm_leaf):  # recorded even where the bit was off already: the final cause
        if ctx.accel != "kvm":
            slots[p] = _Slot(False, SRC_TCG, KVM_LEAF_WITHOUT_KVM)
        elif hidden:
            slots[p] = _Slot(False, SRC_HIDDEN, KVM_LEAF_HIDDEN)


def step_filter(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """8. Drop what the accelerator cannot provide."""
    for p, s in slots.items():
        if s.value is False or BY_NAME[p].host == "none":
            continue
        sup, why = ctx.support[p]
        if sup is False:
            slots[p] = _Slot(False, SRC_FILTERED, f"{s.detail}; dropped: {why}")
        elif sup is None and s.value is True:
            slots[p] = _Slot(None, s.source, f"{s.detail}; kept only if {why}")


def step_release(ctx: _Context, slots: dict[str, _Slot]) -> None:
    """9. A property this QEMU release does not have is absent: off, whatever asked for it."""
    release = ctx.host.qemu_version
    for p in TABLE:
        if not p.exists_in(release):
            slots[p.name] = _Slot(False, SRC_ABSENT, _absent(p, release))


STEPS = (step_cpu_model, step_kvm_defaults, step_machine_compat, step_globals, step_cpu_properties,
         step_host_max, step_kvm_leaf, step_filter, step_release)


def _absent(p: Property, release: tuple[int, ...]) -> str:
    came = f"it came in {format_version(p.since)} ({p.since_source})"
    gone = f"; removed in {format_version(p.removed)}" if p.removed else ""
    return f"QEMU {format_version(release)} has no {p.name}: {came}{gone}"


def _kvm_strips(ctx: _Context, values: dict[str, Value]) -> None:
    """10. What KVM strips after QEMU (properties.KVM_STRIPS): HLT exits disabled -> no PV_UNHALT
    (kvm_update_cpuid_runtime)."""
    active = {rules.OVERCOMMIT_CPU_PM: overcommit.read(ctx.facts.qemu.overcommit, ctx.host.qemu_version)[0]}
    for strip in KVM_STRIPS:
        v = values[strip.prop]
        if active[strip.when] and ctx.accel == "kvm" and v.source not in (SRC_HIDDEN, SRC_ABSENT):
            values[strip.prop] = Value(OFF, SRC_CPU_PM, strip.why, qom=v.state)


# ---------------------------------------------------------------------------------------------------------

def resolve(facts: DomainFacts, host: HostFacts | None = None) -> Resolution:
    """Resolve under the host's QEMU build, or under every build that has this machine when it is unknown.
    Pure in (facts, host facts); the domain's name and uuid are not read (pipeline keeps one answer for
    a template's clones)."""
    host = host or HostFacts()
    candidates, basis, warnings = _flavour_candidates(facts.machine, host)
    results = [_resolve_one(facts, host, flavour, machine, list(warnings)) for flavour, machine in candidates]
    res = results[0] if len(results) == 1 else _merge(results)
    return res._replace(flavour_basis=basis)


def _flavour_candidates(name: str | None, host: HostFacts) -> tuple[list[tuple[Flavour, Machine]], str, list[str]]:
    machine_label = name or "(none: the default machine)"
    if host.qemu_flavour:
        chosen = FLAVOURS[host.qemu_flavour]
        mine = classify(name, chosen, host.aliases, host.qemu_version, host.descriptions.get(name or ""), chosen=True)
        basis = f"{chosen.name}: {host.flavour_source}"
        if mine is not None:
            return [(chosen, mine)], basis, []
    claim = claimants(name, host.aliases, host.qemu_version, host.descriptions.get(name or ""))
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
    status = lifecycle.status(machine, host)
    if status.status == lifecycle.NOT_OFFERED:
        warnings.append(f"machine type {facts.machine} is not offered: {status.why}"
                        + ("; read as the definition of those releases" if machine.defined_in else ""))
    libvirt_props = _libvirt_cpu_props(facts, warnings)
    if facts.qemu.cpu:
        model, cmd, _refused = parse_cpu_option(facts.qemu.cpu, host.qemu_version)
        written = f"-cpu {facts.qemu.cpu}"  # one string for every property: a copy each is quadratic in memory
        cpu_props = [(p, v, "qemu:commandline -cpu", written) for p, v in cmd]
        warnings.append("<qemu:commandline> passes its own -cpu, which replaces libvirt's -cpu "
                        "(and every <features>/<cpu> setting libvirt put there)")
        kind = rules.MAX_FEATURE_MODELS.get(model, "named")
    else:
        cpu_props = libvirt_props
        kind = rules.CPU_MODE_KINDS.get(facts.cpu_mode, "named")
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
    # QEMU reads -overcommit while parsing its options, before it builds a vCPU from -cpu and -global
    qemu_refusal = (overcommit.read(facts.qemu.overcommit, host.qemu_version)[1]
                    or _refusal(model, kind, facts.qemu.cpu, facts.qemu.globals, host.qemu_version))
    return Resolution(facts, machine, accel, irqchip, kind, model, values, _explicit_unhalt(facts),
                      tuple(dict.fromkeys(warnings)), start_refusal=refusal, host=host, flavour=flavour.name,
                      support=ctx.support, cpu_from_commandline=bool(facts.qemu.cpu),
                      machine_status=status.status, machine_status_why=status.why, qemu_refusal=qemu_refusal)


def _start_refusal(ctx: _Context, values: dict[str, Value]) -> str | None:
    """libvirt's own checks that stop the start (libvirt_xml: virCPUx86ValidateFeatures, qemu_validate.c,
    qemuProcessVerifyKVMFeatures)."""
    facts = ctx.facts
    for name, _policy in facts.cpu_features:
        if _qemu_name(name) in libvirt_xml.NOT_IN_CPU_MAP:
            return libvirt_xml.NOT_IN_CPU_MAP_ERROR.format(name=name)
    for key, value in facts.settings:
        refusal = libvirt_xml.BY_KEY[key].refused_with_named.get(value)
        if refusal and ctx.kind == "named" and not facts.qemu.cpu:
            return refusal
    # qemuProcessVerifyKVMFeatures reads the started vCPU, also when a <qemu:commandline> -cpu replaced libvirt's.
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.verified and row.values.get(value) == ON and values[row.prop].qemu_property == OFF:
            ctx.warnings.append(f"libvirt will refuse to start this domain ('{row.verified}'): "
                                f"{row.detail.format(v=value, q=ON).split(' -> ')[0]} but {row.prop} ends up off "
                                f"({values[row.prop].source})")
            return row.verified
    return None


def _merge(results: list[Resolution]) -> Resolution:
    """One Resolution for several possible builds: agreement stays, disagreement is host-dependent."""
    first = results[0]
    features: dict[str, Value] = {}
    for p in PROPERTIES:
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
    statuses = {r.machine_status for r in results}
    status, status_why = (first.machine_status, first.machine_status_why) if len(statuses) == 1 else (
        lifecycle.OFFERED, "depends on the QEMU build: " + "; ".join(f"{r.flavour}: {r.machine_status}"
                                                                    for r in results))
    support = {p: first.support[p] if len({r.support[p][0] for r in results}) == 1
               else (None, "depends on the QEMU build") for p in PROPERTIES}
    return Resolution(first.facts, machine, first.accel, first.irqchip, first.cpu_kind, first.model, features,
                      first.explicit_unhalt, tuple(dict.fromkeys(w for r in results for w in r.warnings)),
                      start_refusal=first.start_refusal if len(refusals) == 1 else None, host=first.host,
                      flavour="|".join(r.flavour for r in results), support=support,
                      cpu_from_commandline=first.cpu_from_commandline, machine_status=status,
                      machine_status_why=status_why, qemu_refusal=first.qemu_refusal)


def _state(v: bool | None) -> str:
    return HOST if v is None else (ON if v else OFF)


def _global_matches(driver: str, kind: str, model: str | None) -> bool:
    """Whether `-global driver.prop` reaches this vCPU: TYPE_X86_CPU, or the CPU's type or a QOM parent."""
    if driver in rules.X86_CPU_DRIVERS:
        return True
    name = rules.MAX_FEATURE_MODELS.get(kind, model or "")
    types = (name,) + rules.CPU_TYPE_PARENTS.get(name, ())
    return any(driver in rules.cpu_type_names(t) for t in types)


def _libvirt_cpu_props(facts: DomainFacts, warnings: list[str]) -> list[tuple[str, bool, str, str]]:
    """The -cpu properties libvirt generates, in its order: <cpu><feature> first (qemuBuildCpuFeatureArg),
    then each libvirt_xml row the domain writes."""
    out: list[tuple[str, bool, str, str]] = []
    for name, policy in facts.cpu_features:
        q = _qemu_name(name)
        if q in libvirt_xml.NOT_IN_CPU_MAP:
            warnings.append(f"<cpu><feature name='{name}'/>: {libvirt_xml.NOT_IN_CPU_MAP_NOTE}")
        value = libvirt_xml.cpu_feature_value(policy)
        if value:
            out.append((q, value == ON, libvirt_xml.CPU_FEATURE_SOURCE, f"<feature policy='{policy}' name='{name}'/>"))
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.option == "-cpu" and value in row.values:
            q = row.values[value]
            out.append((row.prop, q == ON, row.source, row.detail.format(v=value, q=q)))
    return out


def _support(ctx: _Context) -> dict[str, tuple[bool | None, str]]:
    """What the accelerator keeps, per property (QEMU's filter), with the reason: the rows' conditions."""
    secure = CONFIDENTIAL.get(ctx.facts.launch_security or "")
    if secure and ctx.accel == "kvm" and (ctx.host.qemu_version is None or ctx.host.qemu_version >= secure.since):
        return {p.name: (False, f"<launchSecurity type='{secure.launch_security}'>: {secure.source} lacks it")
                if p.kvm_leaf and p.name not in secure.keeps else _supported(p, ctx.accel, ctx.irqchip, ctx.host)
                for p in TABLE}
    return {p.name: _supported(p, ctx.accel, ctx.irqchip, ctx.host) for p in TABLE}


def _supported(p: Property, accel: str, irqchip: str, host: HostFacts) -> tuple[bool | None, str]:
    release = host.qemu_version
    if not p.exists_in(release):
        return False, _absent(p, release)
    if p.host == "none":
        return True, p.host_why
    if accel != "kvm":
        if isinstance(p.tcg, bool):
            return p.tcg, p.tcg_why
        if release is None:
            return None, f"QEMU >= {format_version(p.tcg)} ({p.tcg_why})"
        return release >= p.tcg, f"{p.tcg_why} (this is {format_version(release)})"
    if p.kvm_needs and irqchip not in p.kvm_needs.irqchips:
        return False, p.kvm_needs.why
    if p.host == "qemu":
        return True, p.host_why
    sup = host.supports(*p.cpuid)
    if sup is None:
        if p.baseline:
            return True, "every KVM that QEMU >= 4.2 runs on supports it"
        return None, "the host's KVM supports it (not known without /dev/kvm or host facts)"
    return sup, ("the host's KVM supports it" if sup else "the host's KVM does not support it") + " (/dev/kvm)"


def _explicit_unhalt(facts: DomainFacts) -> str | None:
    """Who chose kvm-pv-unhalt explicitly, in any form libvirt or QEMU accepts; such a choice is never changed."""
    for key, value in facts.settings:
        row = libvirt_xml.BY_KEY[key]
        if row.prop == "kvm-pv-unhalt":
            return f"{row.source[:-1]} {row.attr}='{value}'/>"
    for name, policy in facts.cpu_features:
        if _qemu_name(name) == "kvm-pv-unhalt":
            return f"<cpu><feature policy='{policy}' name='{name}'/>"
    if facts.qemu.cpu and _UNHALT.search(facts.qemu.cpu):
        return f"<qemu:commandline> -cpu {facts.qemu.cpu}"
    for driver, prop, value in facts.qemu.globals:
        if _qemu_name(prop) == "kvm-pv-unhalt":
            return f"<qemu:commandline> -global {driver}.{prop}={value}"
    return None

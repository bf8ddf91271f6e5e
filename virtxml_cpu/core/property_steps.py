"""Each vCPU property's effective state, set by one function per step in QEMU's order (target/i386 and
hw/core/qdev.c): the CPU model's bits, the build's kvm_default_props as machine compat changed them, machine
compat_props, -global, -cpu, host/max auto-enable, the KVM leaf cleared, the accelerator's filter, the QEMU
release, and what KVM strips after QEMU. STEPS is the order; core/resolve.py runs them.
"""

from __future__ import annotations

from collections import namedtuple

from .cpu_option import global_matches, qemu_bool
from .domain import DomainFacts
from .hostfacts import HostFacts
from .machines import Machine, own_version_at_most, version_at_most
from .answer import OFF, ON, SRC_ABSENT, SRC_CPU_PM, SRC_FILTERED, SRC_HIDDEN, SRC_TCG, Value, state
from .support import absent
from ..tables import libvirt_xml, qemu
from ..tables.builds.known import Build, Rule
from ..tables.cpu_models import MODEL_BITS
from ..tables.properties import BY_NAME, KVM_LEAF_HIDDEN, KVM_LEAF_WITHOUT_KVM, KVM_STRIPS, TABLE
from ..tables.version import Version

MODEL_OWN = tuple(p.name for p in TABLE if p.named_default is None)  # bits each CPU model defines itself
qemu_name = libvirt_xml.qemu_name


class Slot(namedtuple("Slot", "value source detail user_set auto", defaults=(False, False))):
    """One property between the steps (a tuple: a step returns the slots it changes, nothing is mutated)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    value: bool | None  # None = unknown (host-dependent)
    source: str
    detail: str
    user_set: bool
    auto: bool  # host/max: to be filled from host support


class Context(namedtuple("Context", "facts host build machine accel irqchip kind model cpu_props support cpu_pm")):
    """Everything the steps read; computed once per (domain, build)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    facts: DomainFacts
    host: HostFacts
    build: Build
    machine: Machine
    accel: str
    irqchip: str
    kind: str
    model: str | None
    cpu_props: list[tuple[str, bool, str, str]]
    support: dict[str, tuple[bool | None, str]]
    cpu_pm: bool  # cpu-pm on after every -overcommit (overcommit.read)


def run(ctx: Context) -> dict[str, Value]:
    """The steps in order, each over the slots the ones before it left, then what KVM strips."""
    slots: dict[str, Slot] = {}
    for step in STEPS:
        slots = {**slots, **step(ctx, slots)}
    values = {p: Value(state(s.value), s.source, s.detail) for p, s in slots.items()}
    return {**values, **kvm_strips(ctx, values)}


def rule_applies(rule: Rule, machine: Machine, irqchip: str, release: Version | None = None) -> bool | None:
    """Whether a row applies to this machine and irqchip on QEMU `release` (None: unknown, any release);
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



def _model_bits(ctx: Context) -> tuple[dict[str, bool | None], str]:
    """The bits a CPU model defines itself (MODEL_OWN), as the model has them (host-model: as libvirt
    expands it)."""
    facts, host = ctx.facts, ctx.host
    unknown: dict[str, bool | None] = dict.fromkeys(MODEL_OWN)
    if facts.cpu_mode == libvirt_xml.CPU_MODE_HOST_MODEL and not facts.qemu.cpu:
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


def step_cpu_model(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """1. The CPU model's own bits and QEMU's property defaults, or host/max (filled from host support in
    step 6)."""
    out: dict[str, Slot] = {}
    if ctx.kind == "named":
        bits, why = _model_bits(ctx)
        for p in TABLE:
            if p.named_default is None:  # a model-own bit the model table lacks is unknown (regenerate it)
                known = p.name in bits
                out[p.name] = Slot(bits.get(p.name), "cpu-model", why if known else
                                      f"{why} has no {p.name}: tools/gen_cpu_models.py predates the property")
            else:
                out[p.name] = Slot(p.named_default, "qemu-default", p.default_why)
        return out
    for p in TABLE:
        if p.auto:
            out[p.name] = Slot(None, f"-cpu {ctx.kind}", f"-cpu {ctx.kind} enables what the accelerator supports",
                                  auto=True)
        elif p.auto_why:
            out[p.name] = Slot(p.named_default, f"-cpu {ctx.kind}", p.auto_why)
        else:
            out[p.name] = Slot(p.named_default, "qemu-default", p.default_why)
    return out


def _applicable(ctx: Context, layer: str) -> tuple[tuple[Rule, bool | None], ...]:
    """The rows of one layer that may apply to this machine on this QEMU release, with rule_applies' answer."""
    rows = (ctx.build.kvm_defaults if layer == "kvm-default" else ()) + tuple(
        r for r in ctx.build.machine_rows if r.layer == layer)
    release = ctx.host.qemu_version
    return tuple((r, a) for r in rows if (r.models is None or ctx.model in r.models)
                 and (a := rule_applies(r, ctx.machine, ctx.irqchip, release)) is not False)


def _default_source(rule: Rule) -> str:
    """A build-wide kvm_default_props row: upstream's plain, a downstream build's by its name."""
    return "kvm-default" if rule.origin == "upstream" else f"{rule.origin}-kvm-default"


def step_kvm_defaults(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """2. The build's kvm_default_props as machine compat changed them (named models under KVM only)."""
    out: dict[str, Slot] = {}
    if ctx.kind != "named" or ctx.accel != qemu.KVM_ACCEL:
        return out
    base = {p: (s.value, s.detail) for p, s in slots.items()}
    for rule, applies in _applicable(ctx, "kvm-default"):
        if applies is None:
            out[rule.prop] = Slot(None, "machine-compat",
                                  f"depends on which machine {ctx.machine.label()} stands for: {rule.source}")
        elif rule.value is None:  # keep the CPU model's own bit: a machine's compat row, or a build's table
            v, d = base[rule.prop]
            if rule.machine_keyed:
                out[rule.prop] = Slot(v, "machine-compat", f"{ctx.machine.label()}: {rule.source}; so {d}")
            else:
                out[rule.prop] = Slot(v, _default_source(rule), f"{rule.source}; so {d}")
        else:
            out[rule.prop] = Slot(rule.value == ON, _default_source(rule), rule.source)
    return out


def step_machine_compat(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """3. Machine compat_props: every x86 CPU, counted as user-set."""
    out: dict[str, Slot] = {}
    for rule, applies in _applicable(ctx, "compat"):
        if applies is None:
            out[rule.prop] = Slot(None, "machine-compat",
                                  f"depends on which machine {ctx.machine.label()} stands for: {rule.source}",
                                  user_set=True)
        else:
            out[rule.prop] = Slot(rule.value == ON, "machine-compat", f"{ctx.machine.label()}: {rule.source}",
                                  user_set=True)
    return out


def step_globals(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """4. -global DRIVER.PROP=VALUE from <qemu:commandline>, after compat_props (qdev global order)."""
    out: dict[str, Slot] = {}
    for driver, prop, value in ctx.facts.qemu.globals:
        p = qemu_name(prop)
        if p in slots and global_matches(driver, ctx.kind, ctx.model):
            b = qemu_bool(value, ctx.host.qemu_version)
            if b is not None:
                out[p] = Slot(b, "qemu:commandline -global", f"-global {driver}.{prop}={value}", user_set=True)
    return out


def step_cpu_properties(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """5. -cpu MODEL,prop=... (libvirt's, or the last -cpu of <qemu:commandline>)."""
    out: dict[str, Slot] = {}
    for p, v, src, detail in ctx.cpu_props:
        if p in slots:
            out[p] = Slot(v, src, detail, user_set=True)
    return out


def step_host_max(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """6. host/max: auto-enable what the accelerator supports, except user-set properties."""
    out: dict[str, Slot] = {}
    for p, s in slots.items():
        if s.auto and not s.user_set:
            sup, why = ctx.support[p]
            out[p] = Slot(sup, s.source, f"passed through: {why}")
    return out


def step_kvm_leaf(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """7. The KVM leaf cleared as a whole: not KVM, or kvm=off."""
    out: dict[str, Slot] = {}
    hidden = any(p == qemu.KVM_SWITCH and not v for p, v, *_ in ctx.cpu_props)
    for p in (q.name for q in TABLE if q.kvm_leaf):  # recorded even where the bit was off already: the final cause
        if ctx.accel != qemu.KVM_ACCEL:
            out[p] = Slot(False, SRC_TCG, KVM_LEAF_WITHOUT_KVM)
        elif hidden:
            out[p] = Slot(False, SRC_HIDDEN, KVM_LEAF_HIDDEN)
    return out


def step_filter(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """8. Drop what the accelerator cannot provide."""
    out: dict[str, Slot] = {}
    for p, s in slots.items():
        if s.value is False or BY_NAME[p].host == "none":
            continue
        sup, why = ctx.support[p]
        if sup is False:
            out[p] = Slot(False, SRC_FILTERED, f"{s.detail}; dropped: {why}")
        elif sup is None and s.value is True:
            out[p] = Slot(None, s.source, f"{s.detail}; kept only if {why}")
    return out


def step_release(ctx: Context, slots: dict[str, Slot]) -> dict[str, Slot]:
    """9. A property this QEMU release does not have is absent: off, whatever asked for it."""
    out: dict[str, Slot] = {}
    release = ctx.host.qemu_version
    for p in TABLE:
        if not p.exists_in(release):
            out[p.name] = Slot(False, SRC_ABSENT, absent(p, release))
    return out


STEPS = (step_cpu_model, step_kvm_defaults, step_machine_compat, step_globals, step_cpu_properties,
         step_host_max, step_kvm_leaf, step_filter, step_release)


def kvm_strips(ctx: Context, values: dict[str, Value]) -> dict[str, Value]:
    """10. What KVM strips after QEMU (properties.KVM_STRIPS): HLT exits disabled -> no PV_UNHALT
    (kvm_update_cpuid_runtime)."""
    out: dict[str, Value] = {}
    active = {qemu.OVERCOMMIT_CPU_PM: ctx.cpu_pm}
    for strip in KVM_STRIPS:
        v = values[strip.prop]
        if active[strip.when] and ctx.accel == qemu.KVM_ACCEL and v.source not in (SRC_HIDDEN, SRC_ABSENT):
            out[strip.prop] = Value(OFF, SRC_CPU_PM, strip.why, qom=v.state)
    return out

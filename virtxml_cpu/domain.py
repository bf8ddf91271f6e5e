"""Domain XML -> DomainFacts: every input the rules look at, read once from the parsed tree."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
OWN_NS = "urn:virtxml-cpu:domain:1"
LIBOSINFO_NS = "http://libosinfo.org/xmlns/libvirt/domain/1.0"


# QEMU options that take no argument (qemu-options.hx: DEF(name, 0, ...)), current and historical. Every
# other option consumes the next argv element, as QEMU's own lookup_opt() does.
NO_ARG_OPTIONS = frozenset({
    "h", "help", "version", "S", "s", "snapshot", "nographic", "no-quit", "full-screen", "alt-grab",
    "ctrl-grab", "no-frame", "noframe", "sdl", "curses", "portrait", "win2k-hack", "no-fd-bootchk", "no-acpi",
    "no-hpet", "no-reboot", "no-shutdown", "enable-kvm", "no-kvm", "no-kvm-irqchip", "no-kvm-pit",
    "no-kvm-pit-reinjection", "enable-nesting", "nodefaults", "nodefconfig", "no-user-config", "daemonize",
    "usb", "old-param", "semihosting", "rtc-td-hack", "show-cursor", "singlestep", "preconfig",
    "only-migratable", "enable-fips", "xen-attach", "xen-domid-restrict", "enable-sync-profile", "localtime",
    "mem-prealloc", "no-kqemu", "kernel-kqemu", "enable-kqemu", "tdf", "audio-help", "std-vga",
})


# Orchestrators that generate a domain's definition, by the metadata they write into it.
ORCHESTRATORS = (
    ("OpenStack Nova", "http://openstack.org/xmlns/libvirt/nova/", "instance"),
    ("oVirt/VDSM", "http://ovirt.org/vm/", "vm"),
    ("KubeVirt", "http://kubevirt.io", "kubevirt"),
)


@dataclass(frozen=True)
class QemuArgs:
    """What `<qemu:commandline>` does to the CPU."""

    cpu: str | None = None  # last -cpu value (QEMU uses the last one)
    globals: tuple[tuple[str, str, str], ...] = ()  # (driver, property, value) from -global
    cpu_pm: bool = False  # -overcommit cpu-pm=on
    accel_irqchip: str | None = None  # kernel_irqchip / kernel-irqchip from -machine/-accel


@dataclass(frozen=True)
class DomainFacts:
    name: str | None
    uuid: str | None
    virt_type: str | None  # kvm, qemu, ...
    arch: str | None
    machine: str | None
    cpu_mode: str  # none, custom, host-model, host-passthrough, maximum
    cpu_model: str | None
    cpu_check: str | None
    cpu_features: tuple[tuple[str, str], ...]  # (name, policy)
    cpu_cache: tuple[str, str | None] | None  # <cpu><cache mode= level=>
    pvspinlock: str | None  # on/off/None; <pvspinlock/> without state is on (libvirt reads it so)
    apic_eoi: str | None
    kvm_hidden: bool
    hint_dedicated: str | None
    poll_control: str | None
    pv_ipi: str | None
    ioapic_driver: str | None  # kvm/qemu/None
    kvmclock_present: str | None  # yes/no/None
    hyperv: bool
    hyperv_spinlocks: bool
    vcpus: int
    numa_cells: int
    qemu: QemuArgs
    override_policy: str | None  # from <metadata><virtxml-cpu:cpu policy=...>
    os_id: str | None  # libosinfo id, e.g. http://microsoft.com/win/10
    emulator: str | None
    orchestrator: str | None = None  # who generates this definition (ORCHESTRATORS)

    @property
    def looks_windows(self) -> bool:
        return bool(self.hyperv or (self.os_id and "microsoft.com/win" in self.os_id))


def _state(el, attr="state"):
    return el.get(attr) if el is not None else None


def _pvspinlock(feats) -> str | None:
    el = feats.find("pvspinlock") if feats is not None else None
    if el is None:
        return None
    return el.get("state") or "on"  # virDomainFeaturesDefParse: a bare <pvspinlock/> is on


def _int(text, default):
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def parse_qemu_args(values: list[str]) -> QemuArgs:
    cpu = None
    globals_: list[tuple[str, str, str]] = []
    cpu_pm = False
    irqchip = None
    i = 0
    while i < len(values):
        opt = _option_name(values[i])
        if opt is None or opt in NO_ARG_OPTIONS:
            i += 1
            continue
        arg = values[i + 1] if i + 1 < len(values) else ""
        if opt == "cpu":
            cpu = arg
        elif opt == "global":
            g = _parse_global(arg)
            if g:
                globals_.append(g)
        elif opt == "overcommit":
            if re.search(r"(^|,)cpu-pm=on($|,)", arg):
                cpu_pm = True
        elif opt in ("machine", "M", "accel"):
            m = re.search(r"kernel[-_]irqchip=(on|off|split)", arg)
            if m:
                irqchip = m.group(1)
        i += 2
    return QemuArgs(cpu, tuple(globals_), cpu_pm, irqchip)


def _option_name(value: str) -> str | None:
    """`-cpu` and `--cpu` are the same option to QEMU; anything else is a stray argument."""
    if not value.startswith("-") or value == "-":
        return None
    return value[2:] if value.startswith("--") else value[1:]


def _parse_global(arg: str) -> tuple[str, str, str] | None:
    if arg.startswith("driver="):
        kv = dict(p.split("=", 1) for p in arg.split(",") if "=" in p)
        if {"driver", "property", "value"} <= kv.keys():
            return kv["driver"], kv["property"], kv["value"]
        return None
    m = re.match(r"^([^.=]+)\.([^=]+)=(.*)$", arg)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def extract(root: etree._Element) -> DomainFacts:
    """Read the facts from a parsed <domain> element (pure)."""
    os_type = root.find("os/type")
    cpu = root.find("cpu")
    feats = root.find("features")
    kvm = feats.find("kvm") if feats is not None else None

    cache = None
    if cpu is None:
        mode, model, check, cpu_features = "none", None, None, ()
    else:
        model_el = cpu.find("model")
        model = (model_el.text or "").strip() or None if model_el is not None else None
        mode = cpu.get("mode") or "custom"
        check = cpu.get("check")
        cpu_features = tuple((f.get("name") or "", f.get("policy") or "require") for f in cpu.findall("feature"))
        cache_el = cpu.find("cache")
        if cache_el is not None:
            cache = (cache_el.get("mode") or "", cache_el.get("level"))

    vcpu_el = root.find("vcpu")
    vcpus = _int(vcpu_el.text.strip() if vcpu_el is not None and vcpu_el.text else None, 1)
    cells = root.findall("cpu/numa/cell")
    timer = None
    for t in root.findall("clock/timer"):
        if t.get("name") == "kvmclock":
            timer = t.get("present")
    args = [a.get("value", "") for a in root.iterfind(f"{{{QEMU_NS}}}commandline/{{{QEMU_NS}}}arg")]
    override = None
    own = root.find(f"metadata/{{{OWN_NS}}}cpu")
    if own is not None:
        override = own.get("policy")
    os_el = root.find(f"metadata/{{{LIBOSINFO_NS}}}libosinfo/{{{LIBOSINFO_NS}}}os")
    hyperv = feats.find("hyperv") if feats is not None else None
    hv_spin = hyperv.find("spinlocks") if hyperv is not None else None
    emulator = root.find("devices/emulator")
    name = root.find("name")
    uuid = root.find("uuid")
    return DomainFacts(
        name=(name.text or "").strip() if name is not None else None,
        uuid=(uuid.text or "").strip() if uuid is not None else None,
        virt_type=root.get("type"),
        arch=os_type.get("arch") if os_type is not None else None,
        machine=os_type.get("machine") if os_type is not None else None,
        cpu_mode=mode,
        cpu_model=model,
        cpu_check=check,
        cpu_features=cpu_features,
        cpu_cache=cache,
        pvspinlock=_pvspinlock(feats),
        apic_eoi=_state(feats.find("apic"), "eoi") if feats is not None else None,
        kvm_hidden=_state(kvm.find("hidden")) == "on" if kvm is not None else False,
        hint_dedicated=_state(kvm.find("hint-dedicated")) if kvm is not None else None,
        poll_control=_state(kvm.find("poll-control")) if kvm is not None else None,
        pv_ipi=_state(kvm.find("pv-ipi")) if kvm is not None else None,
        ioapic_driver=_state(feats.find("ioapic"), "driver") if feats is not None else None,
        kvmclock_present=timer,
        hyperv=hyperv is not None,
        hyperv_spinlocks=_state(hv_spin) == "on",
        vcpus=vcpus,
        numa_cells=len(cells),
        qemu=parse_qemu_args(args),
        override_policy=override,
        os_id=os_el.get("id") if os_el is not None else None,
        emulator=(emulator.text or "").strip() if emulator is not None else None,
        orchestrator=_orchestrator(root.find("metadata")),
    )


def _orchestrator(metadata) -> str | None:
    if metadata is None:
        return None
    for child in metadata:
        if not isinstance(child.tag, str):
            continue
        q = etree.QName(child)
        for name, ns, local in ORCHESTRATORS:
            if (q.namespace or "").startswith(ns) and q.localname == local:
                return name
    return None

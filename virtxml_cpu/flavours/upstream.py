"""Upstream QEMU (and builds that do not patch these tables: Debian, Fedora, Arch, ...).

Each row cites the upstream QEMU commit (and the release it is in) that made it. kvm_default_props is the
same text in v6.0, v8.2, v9.0 and master (target/i386/kvm/kvm-cpu.c since 6.1, target/i386/cpu.c 2.5-6.0).
QEMU 8.0-10.x add no row among the properties this tool resolves (pc_compat_8_0 ... pc_compat_10_0 set
none of them; checked against QEMU 10.0.2's own `query-machines` compat-props by the lab tests).
"""

from __future__ import annotations

from .. import lazyre as re  # patterns compiled where first used

from .model import I440FX, PC, Q35, Alias, Flavour, Rule

_SINCE_1_2 = "default since 1.2"


def _row(layer: str, prop: str, value: str | None, source: str, **kw) -> Rule:
    return Rule(layer, prop, value, source, "upstream", **kw)


def _default(prop: str, value: str | None, source: str, **kw) -> Rule:
    return _row("kvm-default", prop, value, source, **kw)


KVM_DEFAULTS: tuple[Rule, ...] = (
    _default("kvmclock", "on", f"kvm_default_props; 5114e84222 (2.5), {_SINCE_1_2}"),
    _default("kvm-nopiodelay", "on", f"kvm_default_props; 5114e84222 (2.5), {_SINCE_1_2}"),
    _default("kvm-asyncpf", "on", f"kvm_default_props; 5114e84222 (2.5), {_SINCE_1_2}"),
    _default("kvm-steal-time", "on", f"kvm_default_props; 5114e84222 (2.5), {_SINCE_1_2}"),
    _default("kvm-pv-eoi", "on", "kvm_default_props; 2969475869 (1.4)", since=(1, 4)),
    _default("kvmclock-stable-bit", "on", f"kvm_default_props; 5114e84222 (2.5), {_SINCE_1_2}"),
    _default("x2apic", "on", "kvm_default_props; ef02ef5f45 'Enable x2apic by default on KVM' (2.0)", since=(2, 0)),
    _default("svm", "off", "kvm_default_props; 75d373ef97 'Disable SVM by default in KVM mode' (2.2)", since=(2, 2)),
    _default("kvm-msi-ext-dest-id", "off", "kvm_default_props; c1bb5418e3 (6.0)", since=(6, 0)),
    _default("kvm-msi-ext-dest-id", "on",
             "kvm_cpu_instance_init: on with kernel_irqchip=split; c1bb5418e3 (6.0), dc89f32d92 (7.1)",
             when="irqchip=split", since=(6, 0)),
    _default("x2apic", "off", "kvm_cpu_instance_init: off without in-kernel irqchip; 492a4c94be (2.6)",
             when="irqchip=off", since=(2, 6)),
)

SVM_COMPAT_2_1 = _default("svm", None, "pc_compat_2_1: x86_cpu_change_kvm_default('svm', NULL); 75d373ef97 (2.2)",
                          families=PC, up_to=(2, 1), since=(2, 2))

# pc_compat_X_Y arrays and the pc_compat_X_Y_fn() calls of x86_cpu_change_kvm_default. QEMU never removes
# such a row while a machine needs it; it goes with the last machine (a machine a release lacks is
# reported as such, its rows are not rewritten).
PC_COMPAT_5_1_MSI = _row("compat", "kvm-msi-ext-dest-id", "off",
                         "pc_compat_5_1 {TYPE_X86_CPU, kvm-msi-ext-dest-id, off}; c1bb5418e3 (6.0)",
                         families=PC, up_to=(5, 1), since=(6, 0))
MACHINE_ROWS: tuple[Rule, ...] = (
    _default("kvm-pv-eoi", None, "pc_compat_1_2: x86_cpu_change_kvm_default('kvm-pv-eoi', NULL); 2969475869 (1.4)",
             families=PC, up_to=(1, 2), since=(1, 4)),
    _default("x2apic", None, "pc_compat_1_7: x86_cpu_change_kvm_default('x2apic', NULL); ef02ef5f45 (2.0)",
             families=PC, up_to=(1, 7), since=(2, 0)),
    SVM_COMPAT_2_1,
    _row("compat", "l3-cache", "off", "pc_compat_2_7 {TYPE_X86_CPU, l3-cache, off}; 14c985cffa (2.8)",
         families=PC, up_to=(2, 7), since=(2, 8)),
    PC_COMPAT_5_1_MSI,
)

VERSIONED = (
    # pc-i440fx-1.4 ... , pc-q35-1.4 ... , pc-q35-4.0.1 (8e8cbed0); ASCII digits only.
    (re.compile(r"(?P<family>pc-i440fx|pc-q35)-(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)", re.ASCII), None),
    # pc-0.10 ... pc-1.3: the i440fx family before its rename in 1.4
    (re.compile(r"pc-(?P<version>[0-9]+\.[0-9]+)", re.ASCII), I440FX),
)

ALIASES = {
    "pc": Alias(I440FX, (4, 2), "the newest pc-i440fx-X.Y of the running QEMU (MachineClass alias)"),
    "q35": Alias(Q35, (4, 2), "the newest pc-q35-X.Y of the running QEMU (MachineClass alias)"),
}

FIXED = {
    "microvm": "microvm", "isapc": "isapc", "xenfv": "xenfv", "xenfv-3.1": "xenfv", "xenfv-4.2": "xenfv",
    "xenpv": "xenpv", "xenpvh": "xenpvh", "none": "none", "x-remote": "x-remote",
    "nitro-enclave": "nitro-enclave",
}

# Default kernel_irqchip where it is not "on", keyed by the upstream machine whose options set it (a
# downstream machine built on pc-q35-4.0 inherits it unless its Release overrides it).
IRQCHIP_DEFAULTS = {
    "pc-q35-4.0": "split",  # b2fc91db84 (4.0), kept for that machine only by c87759ce87 (4.1)
    "microvm": "split",  # default_kernel_irqchip_split (0ebf007dda, 4.2)
}

UPSTREAM = Flavour(
    name="upstream",
    title="upstream QEMU",
    versioned=VERSIONED,
    tables=(),
    aliases=ALIASES,
    default_machine="pc",
    fixed=FIXED,
    irqchip_defaults=IRQCHIP_DEFAULTS,
    kvm_defaults=KVM_DEFAULTS,
    machine_rows=MACHINE_ROWS,
    version_marker=None,
)

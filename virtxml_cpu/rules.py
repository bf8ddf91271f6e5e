"""The rules, as data: QEMU's KVM default properties and the machine-type compat rows that change them.

Read like QEMU's own tables. Resolution (engine.py) applies, for a named CPU model under KVM:
KVM_DEFAULTS (in order, `when` conditions checked) -> MACHINE_ROWS of layer "kvm-default" that match the
machine (a value of None means `x86_cpu_change_kvm_default(prop, NULL)`: keep the model's own bit) ->
MACHINE_ROWS of layer "compat" (QEMU compat_props, which apply to every x86 CPU, `host`/`max` included,
and count as user-set so `host`/`max` do not auto-enable over them).
Adding a QEMU release means adding rows here. Sources: upstream QEMU commits (see
shared reference qemu.md sections 2, 3, 7, 11).
"""

from __future__ import annotations

from dataclasses import dataclass

from .machines import I440FX, Q35, Version

PROPERTIES: tuple[str, ...] = (
    "kvm-pv-unhalt", "kvm-pv-eoi", "kvmclock", "kvm-nopiodelay", "kvm-asyncpf", "kvm-asyncpf-int",
    "kvm-steal-time", "kvmclock-stable-bit", "kvm-msi-ext-dest-id", "kvm-pv-tlb-flush", "kvm-pv-ipi",
    "kvm-poll-control", "kvm-pv-sched-yield", "kvm-hint-dedicated", "x2apic", "svm", "l3-cache",
)

# Properties living in CPUID leaf 0x40000001 EAX (FEAT_KVM): cleared as a whole by `kvm=off` and TCG.
KVM_LEAF_EAX_BIT: dict[str, int] = {
    "kvmclock": 0, "kvm-nopiodelay": 1, "kvm-asyncpf": 4, "kvm-steal-time": 5, "kvm-pv-eoi": 6,
    "kvm-pv-unhalt": 7, "kvm-pv-tlb-flush": 9, "kvm-pv-ipi": 11, "kvm-poll-control": 12,
    "kvm-pv-sched-yield": 13, "kvm-asyncpf-int": 14, "kvm-msi-ext-dest-id": 15,
    "kvmclock-stable-bit": 24,
}
# Host CPUID bits for the non-KVM-leaf features: (leaf, register, bit).
HOST_CPUID_BIT: dict[str, tuple[int, str, int]] = {
    "x2apic": (0x1, "ecx", 21),
    "svm": (0x80000001, "ecx", 2),
    "kvm-hint-dedicated": (0x40000001, "edx", 0),
}
# What every KVM that libvirt >= 8.1 / QEMU >= 4.2 can run on reports (Linux >= 4.5; PV_UNHALT since
# 3.12, PV_EOI since 3.6). Anything else needs the host's answer (/dev/kvm) to be known.
KVM_BASELINE = frozenset({
    "kvmclock", "kvm-nopiodelay", "kvm-asyncpf", "kvm-pv-eoi", "kvm-pv-unhalt", "kvmclock-stable-bit",
    "x2apic",
})
# Added by QEMU's kvm_arch_get_supported_cpuid() on top of what the kernel reports.
QEMU_SYNTHESIZED = {
    "kvm-hint-dedicated": "always reported as supported by QEMU (kvm_arch_get_supported_cpuid, EDX)",
}


@dataclass(frozen=True)
class Rule:
    layer: str  # "kvm-default" | "compat"
    prop: str
    value: str | None  # "on" | "off" | None (keep the CPU model's own bit)
    source: str
    families: frozenset[str] | None = None  # None: every machine family
    up_to: Version | None = None  # applies to machines <= up_to (pc_compat_X_Y); None: all versions
    flavour: str = "any"  # "upstream" | "rhel" | "any"
    rhel_up_to: Version | None = None  # RHEL-only rows keyed by the RHEL machine version
    when: str | None = None  # "irqchip=split" | "irqchip=off"


PC = frozenset({I440FX, Q35})

# kvm_default_props (target/i386/kvm/kvm-cpu.c since 6.1; target/i386/cpu.c 2.5-6.0), applied to builtin
# CPU models only, under KVM only. Identical text in v6.0, v8.2, v9.0 and master.
KVM_DEFAULTS: tuple[Rule, ...] = (
    Rule("kvm-default", "kvmclock", "on", "kvm_default_props; 5114e84222 (2.5), default since 1.2"),
    Rule("kvm-default", "kvm-nopiodelay", "on", "kvm_default_props; 5114e84222 (2.5), default since 1.2"),
    Rule("kvm-default", "kvm-asyncpf", "on", "kvm_default_props; 5114e84222 (2.5), default since 1.2"),
    Rule("kvm-default", "kvm-steal-time", "on", "kvm_default_props; 5114e84222 (2.5), default since 1.2"),
    Rule("kvm-default", "kvm-pv-eoi", "on", "kvm_default_props; 2969475869 (1.4)"),
    Rule("kvm-default", "kvmclock-stable-bit", "on", "kvm_default_props; 5114e84222 (2.5), default since 1.2"),
    Rule("kvm-default", "x2apic", "on", "kvm_default_props; ef02ef5f45 'Enable x2apic by default on KVM' (2.0)"),
    Rule("kvm-default", "svm", "off", "kvm_default_props; 75d373ef97 'Disable SVM by default in KVM mode' (2.2)"),
    Rule("kvm-default", "kvm-msi-ext-dest-id", "off", "kvm_default_props; c1bb5418e3 (6.0)"),
    Rule("kvm-default", "kvm-msi-ext-dest-id", "on",
         "kvm_cpu_instance_init: on with kernel_irqchip=split; c1bb5418e3 (6.0), dc89f32d92 (7.1)",
         when="irqchip=split"),
    Rule("kvm-default", "x2apic", "off",
         "kvm_cpu_instance_init: off without in-kernel irqchip; 492a4c94be (2.6)", when="irqchip=off"),
    Rule("kvm-default", "kvm-pv-unhalt", "on",
         "RHEL qemu-kvm appends {kvm-pv-unhalt, on} to kvm_default_props (x86_64 machine-types patch)",
         flavour="rhel"),
)

# Machine-type rows: pc_compat_X_Y arrays and the pc_compat_X_Y_fn() calls of x86_cpu_change_kvm_default.
MACHINE_ROWS: tuple[Rule, ...] = (
    Rule("kvm-default", "kvm-pv-eoi", None,
         "pc_compat_1_2: x86_cpu_change_kvm_default('kvm-pv-eoi', NULL); 2969475869 (1.4)",
         families=PC, up_to=(1, 2)),
    Rule("kvm-default", "x2apic", None,
         "pc_compat_1_7: x86_cpu_change_kvm_default('x2apic', NULL); ef02ef5f45 (2.0)",
         families=PC, up_to=(1, 7)),
    Rule("kvm-default", "svm", None,
         "pc_compat_2_1: x86_cpu_change_kvm_default('svm', NULL); 75d373ef97 (2.2)",
         families=PC, up_to=(2, 1)),
    Rule("compat", "l3-cache", "off", "pc_compat_2_7 {TYPE_X86_CPU, l3-cache, off}; 14c985cffa (2.8)",
         families=PC, up_to=(2, 7)),
    Rule("compat", "kvm-msi-ext-dest-id", "off",
         "pc_compat_5_1 {TYPE_X86_CPU, kvm-msi-ext-dest-id, off}; c1bb5418e3 (6.0)",
         families=PC, up_to=(5, 1)),
    Rule("compat", "kvm-asyncpf-int", "on",
         "RHEL pc_rhel_compat {TYPE_X86_CPU, kvm-asyncpf-int, on} (bz 1941397)",
         families=PC, flavour="rhel"),
    Rule("compat", "kvm-asyncpf-int", "off",
         "RHEL pc_rhel_8_4_compat {TYPE_X86_CPU, kvm-asyncpf-int, off}",
         families=PC, flavour="rhel", rhel_up_to=(8, 4, 0)),
)

# Default CPU model QEMU uses when libvirt passes no -cpu (no <cpu> element): libvirt writes it in as
# mode='custom'. pc/q35 default to qemu64 on x86_64; isapc to 486; microvm to qemu64 as well.
DEFAULT_MODEL = {"x86_64": "qemu64", "i686": "qemu32"}
ISAPC_DEFAULT_MODEL = "486"

"""Facts about the CPU properties themselves, the same in every QEMU build: which properties the tool
resolves, where each lives in CPUID, what every KVM reports. Per-build rules (kvm_default_props, machine
compat rows, machine names) are in flavours/.
"""

from __future__ import annotations

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

# Default CPU model QEMU uses when libvirt passes no -cpu (no <cpu> element): libvirt writes it in as
# mode='custom'. pc/q35/microvm default to qemu64 on x86_64; isapc to 486.
DEFAULT_MODEL = {"x86_64": "qemu64", "i686": "qemu32"}
ISAPC_DEFAULT_MODEL = "486"

# -global drivers that reach every x86 vCPU (TYPE_X86_CPU of the 64- and 32-bit binaries).
X86_CPU_DRIVERS = ("x86_64-cpu", "i386-cpu")
# QOM parents: `host` is a subclass of `max` (target/i386: host_x86_cpu_type_info.parent = max), so a
# -global on max-x86_64-cpu reaches -cpu host too.
CPU_TYPE_PARENTS = {"host": ("max",)}

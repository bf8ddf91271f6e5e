"""Facts about QEMU's x86 CPUs that are the same in every build: default models, -global drivers, QOM
parents. The properties themselves are rows of properties.py (PROPERTIES and KVM_LEAF_EAX_BIT are views
of it); per-build rules (kvm_default_props, machine compat rows, machine names) are in flavours/.
"""

from __future__ import annotations

from .properties import PROPERTIES as _PROPERTIES, TABLE

PROPERTIES: tuple[str, ...] = _PROPERTIES  # one row each in properties.py
# Properties living in CPUID leaf 0x40000001 EAX (FEAT_KVM): cleared as a whole by `kvm=off` and TCG.
KVM_LEAF_EAX_BIT: dict[str, int] = {p.name: p.cpuid[2] for p in TABLE if p.kvm_leaf}

# Default CPU model QEMU uses when libvirt passes no -cpu (no <cpu> element): libvirt writes it in as
# mode='custom'. pc/q35/microvm default to qemu64 on x86_64; isapc to 486.
DEFAULT_MODEL = {"x86_64": "qemu64", "i686": "qemu32"}
ISAPC_DEFAULT_MODEL = "486"

# -global drivers that reach every x86 vCPU (TYPE_X86_CPU of the 64- and 32-bit binaries).
X86_CPU_DRIVERS = ("x86_64-cpu", "i386-cpu")
# QOM parents: `host` is a subclass of `max` (target/i386: host_x86_cpu_type_info.parent = max), so a
# -global on max-x86_64-cpu reaches -cpu host too.
CPU_TYPE_PARENTS = {"host": ("max",)}

"""Upstream QEMU (and builds that do not patch these tables: Debian, Fedora, Arch, ...).

Each row cites the upstream QEMU commit (and the release it is in) that made it. kvm_default_props is the
same text in v6.0, v8.2, v9.0 and master (target/i386/kvm/kvm-cpu.c since 6.1, target/i386/cpu.c 2.5-6.0).
QEMU 8.0-10.x add no row among the properties this tool resolves (pc_compat_8_0 ... pc_compat_10_0 set
none of them; checked against QEMU 10.0.2's own `query-machines` compat-props by the lab tests).
"""

from __future__ import annotations

from .. import lazyre as re  # patterns compiled where first used

from .model import I440FX, PC, Q35, AgeRule, Alias, Build, Lifecycle, Rule, Span

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
    (re.compile(r"(?P<family>pc-i440fx|pc-q35)-(?P<version>[0-9]{1,9}\.[0-9]{1,9}(?:\.[0-9]{1,9})?)", re.ASCII), None),
    # pc-0.10 ... pc-1.3: the i440fx family before its rename in 1.4
    (re.compile(r"pc-(?P<version>[0-9]{1,9}\.[0-9]{1,9})", re.ASCII), I440FX),
)

ALIASES = {
    "pc": Alias(I440FX, (4, 2), "the newest pc-i440fx-X.Y of the running QEMU (MachineClass alias)",
                newest="version"),
    "q35": Alias(Q35, (4, 2), "the newest pc-q35-X.Y of the running QEMU (MachineClass alias)", newest="version"),
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

# The versioned machine lifecycle (include/hw/boards.h; include/hw/core/boards.h in later trees):
# MACHINE_VER_DEPRECATION sets deprecation_reason once (QEMU_VERSION_MAJOR - major) > 3, or == 3 with QEMU_VERSION_MINOR >= minor;
# MACHINE_VER_DELETION skips the registration at 6 the same way. Introduced by a391eeb129 (9.1), the deletion
# gated on QEMU_DELETE_MACHINES or QEMU >= 10.1 until 3dfa5a5c71 (10.1) made it unconditional. Checked against
# QEMU 10.0.2's `-machine help` (deprecated: every 2.x ... 7.0; 2.4 ... 10.0 all registered).
AGE_RULE = AgeRule(3, 6, since=(9, 1), delete_since=(10, 1),
                   source="boards.h MACHINE_VER_DEPRECATION/MACHINE_VER_DELETION (a391eeb129, 9.1; deletion "
                          "unconditional from 10.1, 3dfa5a5c71)")
_NEVER = (0,)  # a Span whose release is (0,): no QEMU ever had these names
_RENAMED = "the i440fx machines are named pc-i440fx-X.Y from 1.4 on (pc-X.Y before)"
REMOVALS: tuple[Span, ...] = (
    Span("pc-", (1, 4), (99, 99), _NEVER, _RENAMED),
    Span("pc-i440fx-", (0, 0), (1, 3), _NEVER, _RENAMED),
    Span("pc-q35-", (0, 0), (1, 3), _NEVER, "the first q35 machine is pc-q35-1.4"),
    *(Span(p, low, high, _NEVER, why) for p in ("pc-i440fx-", "pc-q35-") for low, high, why in (
        ((1, 8), (1, 99), "QEMU 1.7 was followed by 2.0"), ((2, 13), (2, 99), "QEMU 2.12 was followed by 3.0"),
        ((3, 2), (3, 99), "QEMU 3.1 was followed by 4.0"))),
    Span("pc-q35-", (1, 4), (2, 3), (2, 6), "86165b499e 'q35: Remove old machine versions' (2.6)"),
    Span("pc-", (0, 10), (0, 11), (4, 0), "cc425b5ddf (4.0): pc-0.10, pc-0.11 removed"),
    Span("pc-", (0, 12), (0, 15), (5, 0), "30d2a17b46 (5.0): pc-0.12 ... pc-0.15 removed"),
    Span("pc-", (1, 0), (1, 3), (6, 0), "f862ddbb1a (6.0): pc-1.0 ... pc-1.3 removed"),
    Span("pc-i440fx-", (1, 4), (1, 7), (8, 2), "ea985d235b (8.2): pc-i440fx-1.4 ... 1.7 removed"),
    Span("pc-i440fx-", (2, 0), (2, 3), (9, 1), "dbe442ad48, 80685972e3, d6b832fca8, 46a2bd5257 (9.1): "
                                                "pc-i440fx-2.0 ... 2.3 removed"),
    Span("pc-i440fx-", (2, 4), (2, 5), (10, 1), "07a2adeebb, ff63280a81 (10.1): pc-*-2.4, 2.5 removed"),
    Span("pc-q35-", (2, 4), (2, 5), (10, 1), "07a2adeebb, ff63280a81 (10.1): pc-*-2.4, 2.5 removed"),
    Span("pc-i440fx-", (2, 6), (2, 7), (11, 0), "52d8e35bd1, 6fcfe360dc (11.0): pc-*-2.6, 2.7 removed"),
    Span("pc-q35-", (2, 6), (2, 7), (11, 0), "52d8e35bd1, 6fcfe360dc (11.0): pc-*-2.6, 2.7 removed"),
)
# deprecation_reason set by hand before the age rule (docs/about/deprecated.rst); seen in QEMU 5.2's and 7.2's -machine
# help. Hand deprecations before 5.0 are not in the table.
DEPRECATIONS: tuple[Span, ...] = (
    Span("pc-", (1, 0), (1, 3), (5, 0), "docs/system/deprecated.rst: pc-1.0, pc-1.1, pc-1.2 and pc-1.3 (since 5.0)"),
    Span("pc-i440fx-", (1, 4), (1, 7), (7, 0), "docs/about/deprecated.rst: pc-i440fx-1.4 up to 1.7 (since 7.0)"),
    Span("pc-i440fx-", (2, 0), (2, 3), (8, 2), "docs/about/deprecated.rst: pc-i440fx-2.0 up to 2.3 (since 8.2)"),
)
LIFECYCLE = Lifecycle(AGE_RULE, REMOVALS, DEPRECATIONS)

UPSTREAM = Build(
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
    lifecycle=LIFECYCLE,
)

"""The 18 CPU properties the tool resolves: one row each, every QEMU/KVM fact about it in that row.

Resolution reads these rows and nothing else about a property: where it lives in CPUID, what a named CPU
model has before KVM's defaults, which QEMU release introduced it, what TCG, the irqchip and the host's
KVM must provide for QEMU to keep it, and whether `-cpu host`/`max` turn it on. Per-build defaults and
machine compat rows are in tables/builds/; the libvirt XML that sets a property is in tables/libvirt_xml.py.

Sources: QEMU target/i386/cpu.c feature_word_info[] and kvm_arch_get_supported_cpuid() (target/i386/kvm/
kvm.c), include/standard-headers/asm-x86/kvm_para.h for the bits; the release of each name is the QEMU
release of the commit cited.
"""

from __future__ import annotations

from collections import namedtuple

from .version import AS_CURRENT, Version, in_window

KVM_LEAF = 0x40000001

_NO_PV = "no CPU model defines KVM paravirt bits; only -cpu host/max or an explicit property turns this on"
_TCG_NO_PV = "TCG provides no KVM paravirt features"
_NOT_FILTERED = "a property of QEMU's CPUID, not filtered"


# The oldest QEMU whose KVM requirement (Linux >= 4.5) gives every `baseline` row's bit.
BASELINE_SINCE = (4, 2)

class Needs(namedtuple("Needs", "irqchips why")):
    """A condition QEMU's filter puts on a property under KVM: kept only with one of these irqchips."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    irqchips: frozenset[str]
    why: str


class Property(namedtuple("Property", "name cpuid since since_source named_default default_why removed tcg "
                          "tcg_why kvm_needs host host_why baseline auto auto_why underscore_flag dash_flag",
                          defaults=(None, False, _TCG_NO_PV, None, "kvm", "", False, True, "", None, None,))):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    name: str  # the QEMU property (the dash spelling since 2.8, fc7dfd205f)
    cpuid: tuple[int, str, int] | None  # (leaf, register, bit); None: not one bit
    since: Version  # the QEMU release that introduced it
    since_source: str  # the commit
    named_default: bool | None  # a named model's value before kvm_default_props; None: the model's own bit
    default_why: str
    removed: Version | None  # the QEMU release that removed it, if any
    tcg: bool | Version  # kept under TCG: always, never, or since that QEMU release
    tcg_why: str
    kvm_needs: Needs | None  # what the irqchip must be for KVM to keep it
    host: str  # "kvm": KVM_GET_SUPPORTED_CPUID decides; "qemu": QEMU always offers it; "none": not filtered
    host_why: str
    baseline: bool  # every KVM that QEMU >= BASELINE_SINCE runs on has it (Linux >= 4.5)
    auto: bool  # -cpu host/max turn it on when the accelerator supports it
    auto_why: str  # why host/max leave it alone ("": they keep the QEMU default)
    # -cpu's +name/-name look a name up as written (no `_` -> `-`, unlike name=value and a bare name):
    underscore_flag: Version | None  # the first release whose +/- takes the underscore spelling (see _OLD_NAME)
    dash_flag: Version | None  # the first release whose +/- takes `name`, when later than `since` (see _OLD_NAME)

    @property
    def kvm_leaf(self) -> bool:
        """In CPUID 0x40000001 EAX (FEAT_KVM): cleared as a whole by `kvm=off` and by TCG."""
        return self.cpuid is not None and self.cpuid[:2] == (KVM_LEAF, "eax")

    def exists_in(self, release: Version | None) -> bool:
        """Whether QEMU `release` has this property (an unknown release is taken as current)."""
        return in_window(release, self.since, self.removed, unknown=AS_CURRENT)


# Which spelling -cpu's `+name`/`-name` take. Up to 2.7 feature_word_info[] held the KVM names with underscores
# (kvm_pv_unhalt, ...) and +/- matched them as written (add_flagname_to_bitmaps: `+kvm-pv-unhalt` is "CPU feature
# kvm-pv-unhalt not found"); 2.8 renamed them to dashes (fc7dfd205f) and registered the old names as QOM aliases
# (54b8dc7c19). Since then +/- set the QOM property named as written (x86_cpu_expand_features), so an underscore
# spelling is taken only where an alias is registered (x86_cpu_initfn's object_property_add_alias list); others
# refuse: "Property 'qemu64-x86_64-cpu.kvm_pv_tlb_flush' not found". QEMU 5.2.0, 7.2.22, 10.0.2 and 11.1.2 run here
# alike, each property's +u, -u, u=on and bare u (tests/unit/core/test_lifecycle.py
# test_flag_spellings_as_qemu_runs_them).
_OLD_NAME = {"dash_flag": (2, 8)}  # an underscore name before 2.8 (fc7dfd205f), its alias from then (54b8dc7c19)


def _pv(name: str, bit: int, since: Version, commit: str, default_why: str = _NO_PV, **kw) -> Property:
    """A KVM paravirt bit (CPUID 0x40000001 EAX): off in every named model."""
    return Property(name, (KVM_LEAF, "eax", bit), since, commit, False, default_why, **kw)


_STEAL_TIME = "c3d3980794 (1.3); in the 1.2 default list by bit"
_MSI_SPLIT = "QEMU offers kvm-msi-ext-dest-id only with kernel_irqchip=split (c1bb5418e3, 6.0)"
TABLE: tuple[Property, ...] = (
    _pv("kvm-pv-unhalt", 7, (1, 7), "f010bc643a", baseline=True,
        default_why="upstream kvm_default_props never includes it (QEMU 1.2 to master); only -cpu host/max or "
                    "<pvspinlock state='on'/> turns it on",
        kvm_needs=Needs(frozenset({"on", "split"}), "QEMU reports kvm-pv-unhalt unsupported without in-kernel "
                                                    "irqchip (648774779a, 2.7)"),
        underscore_flag=(1, 7), **_OLD_NAME),
    _pv("kvm-pv-eoi", 6, (1, 2), "bfee7546df", baseline=True, underscore_flag=(1, 2), **_OLD_NAME),
    _pv("kvmclock", 0, (0, 13), "bb0300dc57", baseline=True),
    _pv("kvm-nopiodelay", 1, (0, 13), "bb0300dc57", baseline=True, underscore_flag=(0, 13), **_OLD_NAME),
    _pv("kvm-asyncpf", 4, (0, 14), "f6584ee203", baseline=True, underscore_flag=(0, 14), **_OLD_NAME),
    _pv("kvm-asyncpf-int", 14, (5, 2), "db5daafab2", underscore_flag=(5, 2)),  # its alias came with it
    _pv("kvm-asyncpf-vmexit", 10, (9, 0), "eba978061e"),
    _pv("kvm-steal-time", 5, (1, 3), _STEAL_TIME, underscore_flag=(1, 3), **_OLD_NAME),
    _pv("kvmclock-stable-bit", 24, (2, 1), "8248c36a5d", baseline=True),
    _pv("kvm-msi-ext-dest-id", 15, (6, 0), "c1bb5418e3", kvm_needs=Needs(frozenset({"split"}), _MSI_SPLIT),
        host="qemu", host_why=_MSI_SPLIT),
    _pv("kvm-pv-tlb-flush", 9, (2, 11), "6976af663d"),
    _pv("kvm-pv-ipi", 11, (3, 1), "7f710c32bb"),
    _pv("kvm-poll-control", 12, (4, 2), "d645e13287", underscore_flag=(4, 2)),  # its alias came with it
    _pv("kvm-pv-sched-yield", 13, (4, 2), "b896c4b50d"),
    Property("kvm-hint-dedicated", (KVM_LEAF, "edx", 0), (2, 12), "be7773268d", False,
             "off unless asked for (FEAT_KVM_HINTS, be7773268d, 2.12)",
             host="qemu", host_why="always reported as supported by QEMU (kvm_arch_get_supported_cpuid, EDX)",
             auto=False, auto_why="FEAT_KVM_HINTS is never auto-enabled (0d914f39a7, 2.12)"),
    Property("x2apic", (0x1, "ecx", 21), (0, 10), "CPUID feature name since the first x86 CPU models", None,
             "the CPU model's own bit", baseline=True,
             tcg=(9, 0), tcg_why="TCG emulates x2APIC only since QEMU 9.0",
             kvm_needs=Needs(frozenset({"on", "split"}), "x2apic needs the in-kernel irqchip (492a4c94be, 2.6)")),
    Property("svm", (0x80000001, "ecx", 2), (0, 10), "CPUID feature name since the first x86 CPU models", None,
             "the CPU model's own bit", tcg=True, tcg_why="TCG emulates SVM"),
    Property("l3-cache", None, (2, 8), "14c985cffa", True,  # an L3 entry in CPUID 2, 4 and 0x80000006
             "l3-cache property default true (14c985cffa, 2.8)",
             tcg=True, tcg_why=_NOT_FILTERED, host="none", host_why=_NOT_FILTERED, auto=False),
)

BY_NAME: dict[str, Property] = {p.name: p for p in TABLE}
PV_UNHALT = "kvm-pv-unhalt"  # the property the tool adds (<pvspinlock state='on'/>)

# The KVM leaf (every kvm_leaf property) disappears as a whole: under TCG, and with `kvm=off`.
KVM_LEAF_WITHOUT_KVM = "not KVM: QEMU clears the KVM leaf (aec661de86, 2.8)"
KVM_LEAF_HIDDEN = "<kvm><hidden state='on'/> = -cpu ...,kvm=off: no KVM leaf"

# What KVM itself does after QEMU: with HLT exits disabled it clears PV_UNHALT from the guest's CPUID
# (kvm_update_cpuid_runtime; KVM docs: userspace should not advertise PV_UNHALT then).
CPU_PM_STRIPS = ("-overcommit cpu-pm=on disables HLT exits; KVM clears PV_UNHALT from the guest CPUID "
                 "(caa057a2cad6)")


class KvmStrip(namedtuple("KvmStrip", "prop when why")):
    """A bit KVM clears from the guest's CPUID after QEMU set it (qom-get still reports QEMU's value)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    prop: str
    when: str  # the QEMU option that makes KVM do it: "cpu-pm" (qemu.OVERCOMMIT_CPU_PM; overcommit.read)
    why: str


KVM_STRIPS: tuple[KvmStrip, ...] = (KvmStrip("kvm-pv-unhalt", "cpu-pm", CPU_PM_STRIPS),)
PROPERTIES: tuple[str, ...] = tuple(p.name for p in TABLE)


class Confidential(namedtuple("Confidential", "launch_security since keeps source")):
    """A confidential-guest type that filters the KVM leaf: only `keeps` survive, from QEMU `since` on."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    launch_security: str  # <launchSecurity type='...'>
    since: Version
    keeps: frozenset[str]
    source: str


# target/i386/kvm/tdx.c TDX_SUPPORTED_KVM_FEATURES (4d6e288a35, 10.1): NOP_IO_DELAY, PV_UNHALT, PV_TLB_FLUSH,
# PV_SEND_IPI, POLL_CONTROL, PV_SCHED_YIELD, MSI_EXT_DEST_ID; tdx_get_supported_cpuid masks KVM_CPUID_FEATURES EAX
# with it, so the filter drops every other KVM-leaf bit (kvmclock, kvmclock-stable-bit, kvm-asyncpf,
# kvm-asyncpf-int, kvm-asyncpf-vmexit, kvm-steal-time, kvm-pv-eoi).
TDX = Confidential("tdx", (10, 1), frozenset({"kvm-nopiodelay", "kvm-pv-unhalt", "kvm-pv-tlb-flush", "kvm-pv-ipi",
                                              "kvm-poll-control", "kvm-pv-sched-yield", "kvm-msi-ext-dest-id"}),
                   "TDX_SUPPORTED_KVM_FEATURES (target/i386/kvm/tdx.c, 4d6e288a35, 10.1)")
CONFIDENTIAL: dict[str, Confidential] = {c.launch_security: c for c in (TDX,)}

"""RHEL / CentOS Stream qemu-kvm: pc-*-rhelX.Y.Z machine types with RHEL's own compat arrays, and
kvm-pv-unhalt in kvm_default_props.

Sources (qemu-kvm package, SOURCES/*Add-x86_64-machine-types.patch and the later machine-type patches, read
in the el8 (6.2.0-40), el9 (7.2.0, 8.0.0, 9.1.0, 10.1.0) and el10 (10.0.0, 10.1.0) trees; RHEL 7's
qemu-kvm-rhev/-ev 2.x and 1.5.3 for the rhel6 machines):
- target/i386/kvm/kvm-cpu.c: `{ "kvm-pv-unhalt", "on" }` appended to kvm_default_props (every build).
- RHEL machines take RHEL's arrays only (pc_rhel_compat, pc_rhel_X_Y_compat, hw_compat_rhel_X_Y), never
  upstream's pc_compat_X_Y: no RHEL array sets kvm-msi-ext-dest-id, so it is on with a split irqchip on
  every RHEL machine of a >= 6.0 build. The "from pc_compat_X_Y" comments only say where an entry was
  copied from; the compat level kept per release below is used for the 2.11 policy boundary only.
- pc_rhel_compat {kvm-asyncpf-int, on} (bz 1941397; every pc-q35-rhel and pc-i440fx-rhel7.x machine, not
  pc-i440fx-rhel10.0.0), pc_rhel_8_4_compat {kvm-asyncpf-int, off}, pc_rhel_7_3_compat {l3-cache, off},
  pc_compat_rhel710/700 (svm, x2apic: the model's bit), pc_rhel_7_0_compat (per-model x2apic on),
  pc_compat_rhel660/630 (RHEL 7 builds: kvm-pv-unhalt, kvm-pv-eoi: the model's bit).
- qemu-kvm 6.0.0-22.el8 ... 6.2.0-8.el8 also register upstream pc-i440fx-4.2 and pc-i440fx-2.11
  (bz 1897923, reverted by bz 2062613): upstream's arrays, RHEL's kvm_default_props, no pc_rhel_compat.
- Upstream pc-i440fx-*/pc-q35-* are otherwise compiled out; `pc` is pc-i440fx-rhel7.6.0 (RHEL 7.6 ... 9).
"""

from __future__ import annotations

from .. import lazyre as re  # patterns compiled where first used

from .model import I440FX, PC, Q35, AgeRule, Alias, Build, Lifecycle, NameTable, Release, Rule, Span
from .upstream import FIXED, IRQCHIP_DEFAULTS, KVM_DEFAULTS, MACHINE_ROWS

_PATCH = "RHEL x86_64 machine-types patch"


def _rel(key: str, version, note: str = "", since=None) -> Release:
    return Release(key, {I440FX: version, Q35: version}, f"{_PATCH}: {note or 'compat comments'}", since=since)


# qemu-kvm 10.1.0-17.el9 (RHEL 9.8) and 10.1.0 el10 (RHEL 10.2), read in openela-main/qemu-kvm.
_EL9_8 = ("openela-main/qemu-kvm 061f0ea73f8f (qemu-kvm-10.1.0-17.el9), "
          "SOURCES/kvm-x86-create-new-pc-q35-machine-type-for-rhel-9.8.patch")
_EL10_2 = ("openela-main/qemu-kvm fd835c8a550d (qemu-kvm 10.1.0, el10), "
           "SOURCES/kvm-x86-create-new-rhel-10.2-specific-pc-q35-machine-typ.patch")


RELEASES: tuple[Release, ...] = (
    _rel("6.0.0", (0, 12), "RHEL 6.0 is based on QEMU 0.12 (RHEL 7 builds keep rhel6.X.0)"),
    _rel("7.0.0", (1, 5), "'RHEL-7 is based on QEMU 1.5.3'"),
    _rel("7.1.0", (2, 1), "pc_compat_2_1...2_3 entries (level inferred)"),
    _rel("7.2.0", (2, 3), "pc_compat_2_3...2_6 entries (level inferred)"),
    _rel("7.3.0", (2, 6), "'from pc_compat_2_6/2_7/2_8', l3-cache off"),
    _rel("7.4.0", (2, 9), "'from pc_compat_2_9/2_10'"),
    _rel("7.5.0", (2, 10), "'from pc_compat_2_11/2_12'"),
    _rel("7.6.0", (2, 12), "'Similar to PC_COMPAT_3_0 + PC_COMPAT_2_12'"),
    _rel("8.0.0", (3, 1), "'from pc_compat_3_1'"),
    _rel("8.1.0", (4, 1), "'from hw_compat_4_1'"),
    _rel("8.2.0", (4, 2), "'from pc_compat_4_2'"),
    _rel("8.3.0", (5, 1), "'from hw/pc_compat_5_1'"),
    _rel("8.4.0", (5, 2), "'from hw/pc_compat_5_2'"),
    _rel("8.5.0", (6, 0), "'from hw/pc_compat_6_0 / 6_1'"),
    _rel("8.6.0", (6, 2), "downstream-only compat"),
    _rel("9.0.0", (6, 2), "'from pc_compat_6_2'"),
    _rel("9.2.0", (7, 2), "'from ..._7_2'"),
    _rel("9.4.0", (8, 2), "'from pc_compat_9_0 (backported)', hw_compat_8_2"),
    _rel("9.6.0", (9, 1), "DEFINE_Q35_MACHINE_AS_LATEST(9, 6, 0) in qemu-kvm 9.1 (level inferred: "
         "pc_rhel_9_8_compat carries pc_compat_9_1's entries for it)"),
    _rel("9.8.0", (10, 1), f"pc_q35_rhel_machine_9_8_0_options = pc_q35_machine_options of qemu-kvm 10.1, no compat "
         f"array ({_EL9_8}; also in el10's {_EL10_2.split(', ')[0]})", since=(10, 1)),
    _rel("10.0.0", (10, 0), "pc-q35-rhel10.0.0 / pc-i440fx-rhel10.0.0 in qemu-kvm 10.0 (level inferred)"),
    _rel("10.2.0", (10, 1), f"pc_q35_rhel_machine_10_2_0_options = pc_q35_machine_options of qemu-kvm 10.1 "
         f"({_EL10_2})", since=(10, 1)),
)

VERSIONS = NameTable(
    pattern=re.compile(r"(?P<family>pc-i440fx|pc-q35)-rhel(?P<key>[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9})", re.ASCII),
    releases=RELEASES, order="version", source=_PATCH, arrays="rhel", release_label="RHEL {key}")
RHEL6 = NameTable(
    pattern=re.compile(r"rhel(?P<key>6\.[0-9]{1,9}\.[0-9]{1,9})", re.ASCII),
    releases=RELEASES, order="version", source=f"{_PATCH} (RHEL 7 qemu-kvm keeps the RHEL 6 machines)",
    family_of_bare=I440FX, arrays="rhel")

_X2APIC_MODELS = frozenset({"Conroe", "Penryn", "Nehalem", "Nehalem-IBRS", "Westmere", "Westmere-IBRS",
                            "Opteron_G1", "Opteron_G2", "Opteron_G3", "Opteron_G4", "Opteron_G5"})


def _row(layer: str, prop: str, value: str | None, source: str, **kw) -> Rule:
    return Rule(layer, prop, value, f"{_PATCH}: {source}", "rhel", **kw)


# RHEL's own arrays, in the order a machine's chain adds them (newest machine's first; later wins).
RHEL_ROWS: tuple[Rule, ...] = (
    _row("compat", "kvm-asyncpf-int", "on", "pc_rhel_compat {TYPE_X86_CPU, kvm-asyncpf-int, on} (bz 1941397)",
         families=frozenset({Q35}), since=(6, 0)),
    _row("compat", "kvm-asyncpf-int", "on", "pc_rhel_compat {TYPE_X86_CPU, kvm-asyncpf-int, on} (bz 1941397; "
         "pc_machine_rhel7_options)", families=frozenset({I440FX}), own_up_to=(7, 6, 0), since=(6, 0)),
    _row("compat", "kvm-asyncpf-int", "off", "pc_rhel_8_4_compat {TYPE_X86_CPU, kvm-asyncpf-int, off}",
         families=PC, own_up_to=(8, 4, 0), since=(6, 0)),
    _row("compat", "l3-cache", "off", "pc_rhel_7_3_compat {TYPE_X86_CPU, l3-cache, off}", families=PC,
         own_up_to=(7, 3, 0)),
    _row("kvm-default", "svm", None, "pc_compat_rhel710: x86_cpu_change_kvm_default('svm', NULL)",
         families=frozenset({I440FX}), own_up_to=(7, 1, 0)),
    _row("kvm-default", "x2apic", None, "pc_compat_rhel700: x86_cpu_change_kvm_default('x2apic', NULL)",
         families=frozenset({I440FX}), own_up_to=(7, 0, 0)),
    _row("compat", "x2apic", "on", "pc_rhel_7_0_compat {<model>-x86_64-cpu, x2apic, on}",
         families=frozenset({I440FX}), own_up_to=(7, 0, 0), models=_X2APIC_MODELS),
    _row("kvm-default", "kvm-pv-unhalt", None, "pc_compat_rhel660: x86_cpu_change_kvm_default('kvm-pv-unhalt', NULL) "
         "(RHEL 7 builds)", families=frozenset({I440FX}), own_up_to=(6, 6, 0)),
    _row("kvm-default", "kvm-pv-eoi", None, "pc_compat_rhel630: kvm-pv-eoi not auto-enabled (RHEL 7 builds)",
         families=frozenset({I440FX}), own_up_to=(6, 3, 0)),
    _row("compat", "x2apic", "off", "PC_RHEL6_6_COMPAT {<model>-x86_64-cpu, x2apic, off}",
         families=frozenset({I440FX}), own_up_to=(6, 6, 0), models=frozenset({"Opteron_G4", "Opteron_G5"})),
)

# SOURCES/*Adapt-versioned-machine-type-macros-for-RHEL.patch (qemu-kvm >= 9.1, openela-main/qemu-kvm 061f0ea73f8f):
# a pc-*-rhelX.Y.Z machine is deprecated once (RHEL_VERSION - X) >= 1 and not registered once >= the deletion
# cutoff: 3 in RHEL 9 ("Increase deletion schedule to 3 releases", keeps rhel7.6.0), 4 in RHEL 10 ("... to 4
# releases", b7a9a4207b87 and fd835c8a550d). RHEL_VERSION is the RHEL major the package is built for (.elN).
RHEL_AGE = AgeRule(1, 3, since=(9, 1), delete_since=(9, 1), counted="rhel", delete_after_by_major={9: 3, 10: 4},
                   source="RHEL's Adapt-versioned-machine-type-macros-for-RHEL.patch: deprecated after 1 RHEL major, "
                          "not registered after 3 (RHEL 9) or 4 (RHEL 10)")

RHEL = Build(
    name="rhel",
    title="RHEL/CentOS qemu-kvm",
    versioned=(),
    tables=(VERSIONS, RHEL6),
    aliases={"pc": Alias(I440FX, (2, 12), f"{_PATCH}: pc = pc-i440fx-rhel7.6.0, the newest RHEL i440fx",
                         canonical="pc-i440fx-rhel7.6.0"),
             "q35": Alias(Q35, (2, 12), f"{_PATCH}: the newest pc-q35-rhelX.Y.Z")},
    default_machine="pc",
    fixed={k: v for k, v in FIXED.items() if k in ("none",)},
    irqchip_defaults=IRQCHIP_DEFAULTS,
    kvm_defaults=KVM_DEFAULTS + (
        Rule("kvm-default", "kvm-pv-unhalt", "on",
             f"{_PATCH}: {{kvm-pv-unhalt, on}} appended to kvm_default_props (target/i386/kvm/kvm-cpu.c)", "rhel"),),
    machine_rows=MACHINE_ROWS + RHEL_ROWS,  # upstream's reach only the upstream names RHEL 8 registered
    version_marker=re.compile(r"qemu-kvm-(?:rhev-|ev-)?[0-9][^)]*[.+]el[0-9]"),
    emulator_marker=re.compile(r"/usr/libexec/qemu-kvm$"),
    registered=((re.compile(r"pc-i440fx-(?P<version>2\.11|4\.2)", re.ASCII), I440FX),),
    downstream_lifecycle=Lifecycle(RHEL_AGE, removals=tuple(
        # RHEL 9's x86_64 machine-types patch, "Merged patches (6.1.0)": a3995e2eff ... 8f7a74ab78 "Remove RHEL
        # 7.0.0 ... 7.5.0 machine type(s)" (openela-main/qemu-kvm 061f0ea73f8f); release = the RHEL major.
        Span(prefix, (7, 0), (7, 5), (9,), "RHEL 9 removed the rhel7.0.0 ... rhel7.5.0 machine types "
             "(a3995e2eff ... 8f7a74ab78, qemu-kvm 6.1 rebase)") for prefix in ("pc-i440fx-rhel", "pc-q35-rhel"))),
)

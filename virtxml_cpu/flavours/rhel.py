"""RHEL / CentOS Stream qemu-kvm: pc-*-rhelX.Y.Z machine types and kvm-pv-unhalt in kvm_default_props.

Sources (RHEL qemu-kvm package, SOURCES/*Add-x86_64-machine-types.patch in el8/el9 and the 10.1 rebase):
- target/i386/kvm/kvm-cpu.c: `{ "kvm-pv-unhalt", "on" }` appended to kvm_default_props (every RHEL machine).
- pc_rhel_compat: {TYPE_X86_CPU, "kvm-asyncpf-int", "on"} (bz 1941397); pc_rhel_8_4_compat turns it off.
- Each machine's compat comments ("from pc_compat_X_Y") give the upstream level it corresponds to; the
  levels of rhel7.0.0-7.2.0 and rhel9.6.0 are inferred from those comments, not stated by them.
- Upstream pc-i440fx-*/pc-q35-* are compiled out; `pc` is pc-i440fx-rhel7.6.0. RHEL 7 also keeps the
  RHEL 6 machines (rhel6.X.0, i440fx), older than rhel7.0.0.
"""

from __future__ import annotations

import re

from .model import I440FX, PC, Q35, Alias, Flavour, NameTable, Release, Rule
from .upstream import FIXED, IRQCHIP_DEFAULTS, KVM_DEFAULTS, MACHINE_ROWS

_PATCH = "RHEL x86_64 machine-types patch"


def _rel(key: str, version, note: str = "") -> Release:
    return Release(key, {I440FX: version, Q35: version}, f"{_PATCH}: {note or 'compat comments'}")


RELEASES: tuple[Release, ...] = (
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
    _rel("9.6.0", (9, 1), "DEFINE_Q35_MACHINE_AS_LATEST(9, 6, 0) in qemu-kvm 10.1 (level inferred)"),
)

VERSIONS = NameTable(
    pattern=re.compile(r"(?P<family>pc-i440fx|pc-q35)-rhel(?P<key>[0-9]+\.[0-9]+\.[0-9]+)", re.ASCII),
    releases=RELEASES, order="version", source=_PATCH)
RHEL6 = NameTable(
    pattern=re.compile(r"rhel(?P<key>6\.[0-9]+\.[0-9]+)", re.ASCII),
    releases=RELEASES, order="version", source=f"{_PATCH} (RHEL 7 qemu-kvm keeps the RHEL 6 machines)",
    family_of_bare=I440FX)

RHEL = Flavour(
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
    machine_rows=MACHINE_ROWS + (
        Rule("compat", "kvm-asyncpf-int", "on", "pc_rhel_compat {TYPE_X86_CPU, kvm-asyncpf-int, on} (bz 1941397)", "rhel",
             families=PC),
        Rule("compat", "kvm-asyncpf-int", "off", "pc_rhel_8_4_compat {TYPE_X86_CPU, kvm-asyncpf-int, off}", "rhel",
             families=PC, own_up_to=(8, 4, 0)),
    ),
    version_marker=re.compile(r"qemu-kvm-[0-9][^)]*[.+]el[0-9]"),
    emulator_marker=re.compile(r"/usr/libexec/qemu-kvm$"),
)

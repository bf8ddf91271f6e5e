"""Ubuntu's QEMU: machine types named after releases, the `ubuntu` default machine, svm left to the model.

Sources (Ubuntu packaging, debian/patches/ubuntu/):
- define-ubuntu-machine-types.patch (noble tree): each pc-i440fx-/pc-q35-<codename> calls one upstream
  pc_*_X_Y_machine_options(); -hpb adds host-phys-bits only; pc-q35-eoan keeps the kernel irqchip.
- lp2012763-maxcpus-too-low.patch: -maxcpus variants (jammy onward), more vCPUs only.
- enable-svm-by-default.patch: removes {"svm", "off"} from kvm_default_props and the pc_compat_2_1
  x86_cpu_change_kvm_default("svm", NULL) call, so named CPU models keep their own svm bit under KVM.
- Ubuntu Server documentation "QEMU machine types": -v<N> point releases (pc-q35-noble-v2 ...), resolute
  forked from 10.2; later releases are forked from the upstream machine types of the QEMU they ship.
"""

from __future__ import annotations

import re

from .model import I440FX, Q35, Alias, NameTable, Release, Rule
from .upstream import KVM_DEFAULTS, MACHINE_ROWS, SVM_COMPAT_2_1, UPSTREAM

_PATCH = "define-ubuntu-machine-types.patch"
_FORKED = "Ubuntu docs: forked from the newest upstream machine type of the QEMU it ships"


def _both(key: str, version, source: str = _PATCH) -> Release:
    return Release(key, {I440FX: version, Q35: version}, source)


RELEASES: tuple[Release, ...] = (
    Release("trusty", {I440FX: (2, 0)}, f"{_PATCH}: pc_i440fx_2_0_machine_options + pc_compat_2_0_fn"),
    Release("wily", {I440FX: (2, 4)}, f"{_PATCH}: 2.5 options with hw_version 2.4 and pc_compat_2_4"),
    _both("xenial", (2, 5)),
    _both("yakkety", (2, 6)),
    _both("zesty", (2, 8)),
    _both("artful", (2, 10)),
    _both("bionic", (2, 11)),
    Release("cosmic", {I440FX: (2, 12), Q35: (2, 11)}, f"{_PATCH}: q35 cosmic is 2.11 ('wrong, kept for compat')"),
    _both("disco", (3, 1)),
    Release("eoan", {I440FX: (4, 0), Q35: (4, 0)}, f"{_PATCH}: q35 eoan sets default_kernel_irqchip_split = false",
            irqchip={Q35: "on"}),
    Release("focal", {I440FX: (4, 0), Q35: (4, 2)}, f"{_PATCH}: i440fx focal is 4.0, q35 focal 4.2"),
    _both("groovy", (5, 0)),
    _both("hirsute", (5, 2)),
    _both("impish", (6, 0)),
    _both("jammy", (6, 2)),
    _both("kinetic", (7, 0)),
    _both("lunar", (7, 2)),
    _both("mantic", (8, 0)),
    _both("noble", (8, 2)),
    _both("oracular", (9, 0), f"{_FORKED} (24.10: QEMU 9.0)"),
    _both("plucky", (9, 2), f"{_FORKED} (25.04: QEMU 9.2)"),
    _both("questing", (10, 1), f"{_FORKED} (25.10: QEMU 10.1)"),
    _both("resolute", (10, 2), "Ubuntu docs: pc-*-resolute forked from pc-*-10.2"),
)

# Suffixes that change the base (all others -- -hpb, -maxcpus, -v<N> -- keep it).
SUFFIX_OVERRIDES = {
    "cosmic-hpb": Release("cosmic-hpb", {I440FX: (2, 12), Q35: (2, 12)}, f"{_PATCH}: cosmic-hpb is 2.12"),
    "hirsute-hpb": Release("hirsute-hpb", {I440FX: (5, 1), Q35: (5, 2)}, f"{_PATCH}: i440fx hirsute-hpb is 5.1"),
}

CODENAMES = NameTable(
    pattern=re.compile(r"(?P<family>pc-i440fx|pc-q35)-(?P<key>[a-z]+)(?P<suffix>(?:-hpb|-maxcpus|-v[0-9]+)*)",
                       re.ASCII),
    releases=RELEASES,
    order="alphabetical",
    ordered_from="artful",
    suffix_overrides=SUFFIX_OVERRIDES,
    source=_PATCH,
)

UBUNTU = UPSTREAM._replace(
    name="ubuntu",
    title="Ubuntu's QEMU",
    tables=(CODENAMES,),
    aliases={**UPSTREAM.aliases,
             "ubuntu": Alias(I440FX, (4, 2), f"{_PATCH}: the newest pc-i440fx-<codename>, QEMU's default machine"),
             "ubuntu-q35": Alias(Q35, (4, 2), f"{_PATCH}: the newest pc-q35-<codename>")},
    default_machine="ubuntu",
    kvm_defaults=tuple(r for r in KVM_DEFAULTS if r.prop != "svm") + (
        Rule("kvm-default", "svm", None, "enable-svm-by-default.patch: Ubuntu's QEMU does not disable svm under "
                                         "KVM (removed from kvm_default_props); the CPU model keeps its own bit",
             "ubuntu"),),
    machine_rows=tuple(r for r in MACHINE_ROWS if r != SVM_COMPAT_2_1),
    version_marker=re.compile(r"ubuntu", re.IGNORECASE),
)

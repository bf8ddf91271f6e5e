"""Ubuntu's QEMU: machine types named after releases, the `ubuntu` default machine, svm left to the model.

Sources (Ubuntu's qemu packaging, debian/patches/ubuntu/, read per release: xenial 1:2.5+dfsg-5ubuntu10.31,
bionic 1:2.11+dfsg-1ubuntu7.31, cosmic 2.12, focal 1:4.2-3ubuntu6.24, jammy 1:6.2+dfsg-2ubuntu6.17, noble
1:8.2.2+ds-0ubuntu1; older builds from their imported source packages):
- define-ubuntu-machine-types.patch: each pc-i440fx-/pc-q35-<codename> calls one upstream
  pc_*_X_Y_machine_options(); -hpb adds host-phys-bits only; pc-q35-eoan keeps the kernel irqchip. Names
  come and go: utopic and vivid exist in the utopic ... xenial builds only (yakkety dropped them), yakkety
  and zesty were dropped by cosmic's 2.12 and added back by eoan's 4.0.
- lp2012763-maxcpus-too-low.patch: -maxcpus variants (jammy, mantic), more vCPUs only.
- enable-svm-by-default.patch (from 1:2.5+dfsg-5ubuntu11, the first yakkety upload; so every Ubuntu QEMU
  release >= 2.6, and not xenial's 2.5): removes {"svm", "off"} from kvm_default_props and the
  pc_compat_2_1 x86_cpu_change_kvm_default("svm", NULL) call: named CPU models keep their own svm bit.
- Each machine's description is "Ubuntu YY.MM PC (...)"; it dates a name no row knows.
- Ubuntu 26.04's define-ubuntu-machine-types.patch (QEMU 10.2), read in intel/Intel-distribution-of-QEMU at
  6cb2a9a2375fd78e7afe99ece5bb112179246d13: oracular 9.0, plucky i440fx 9.2 / q35 9.1, questing i440fx 10.0 /
  q35 10.1 (pc-i440fx-questing-v2: 10.1), resolute 10.2; every -hpb, -maxcpus and -v2 name with its own base
  (SUFFIX_OVERRIDES). trusty, wily and xenial are gone there (the upstream options they call were removed).
"""

from __future__ import annotations

from .. import lazyre as re  # patterns compiled where first used

from .model import I440FX, Q35, Alias, NameTable, Release, Rule
from .upstream import KVM_DEFAULTS, MACHINE_ROWS, SVM_COMPAT_2_1, UPSTREAM

_PATCH = "define-ubuntu-machine-types.patch"
# The 26.04 build's copy, read in full: debian/patches/ubuntu/ of a tree vendoring Ubuntu's resolute packaging
# (QEMU 10.2, ubuntu alias on pc-i440fx-resolute).
_PATCH_2604 = ("define-ubuntu-machine-types.patch of Ubuntu 26.04 (QEMU 10.2; intel/Intel-distribution-of-QEMU "
               "6cb2a9a2375f)")
_SVM_PATCH = "enable-svm-by-default.patch"
_SVM_FROM = (2, 6)  # the first Ubuntu QEMU release carrying it


def _both(key: str, version, described: str, since=None, source: str = _PATCH, **kw) -> Release:
    return Release(key, {I440FX: version, Q35: version}, source, since=since, described=described, **kw)


def _pc(key: str, version, described: str, source: str, **kw) -> Release:
    return Release(key, {I440FX: version}, source, described=described, **kw)


RELEASES: tuple[Release, ...] = (
    _pc("trusty", (2, 0), "14.04", f"{_PATCH}: pc_i440fx_2_0_machine_options + pc_compat_2_0_fn; gone with "
        "upstream's 2.0 options (9.1), not in the 26.04 build", until=(9, 1)),
    _pc("utopic", (2, 1), "14.10", "define-ubuntu-machine-types.patch of utopic: the newest machine (2.1)",
        until=(2, 2)),
    _pc("utopic", (2, 2), "14.10", "vivid's build: pc_machine_utopic is the newest machine (2.2)",
        since=(2, 2), until=(2, 3)),
    _pc("utopic", (2, 3), "14.10", "wily's build: pc_machine_utopic is the newest machine (2.3)",
        since=(2, 3), until=(2, 4)),
    _pc("utopic", (2, 1), "14.10", f"xenial's {_PATCH} (5ubuntu10.9 on): pc_i440fx_2_1_machine_options + "
        "pc_compat_2_1; dropped by yakkety", since=(2, 5), until=(2, 6)),
    _pc("vivid", (2, 3), "15.04", f"{_PATCH} (wily, xenial): pc_i440fx_2_3_machine_options + pc_compat_2_3; "
        "dropped by yakkety", since=(2, 3), until=(2, 6)),
    _pc("wily", (2, 4), "", f"{_PATCH} (xenial on): 2.4 options (2.5 with hw_version 2.4 and pc_compat_2_4 from "
        "focal's 4.2-3ubuntu6.9 on); gone with upstream's 2.4/2.5 options (10.1), not in the 26.04 build",
        since=(2, 5), until=(10, 1)),
    _both("xenial", (2, 5), "16.04", since=(2, 5), until=(10, 1),
          source=f"{_PATCH}; gone with upstream's 2.5 options (10.1), not in the 26.04 build"),
    _both("yakkety", (2, 6), "16.10", since=(2, 6), until=(2, 12)),
    _both("yakkety", (2, 6), "16.10", since=(4, 0), source=f"{_PATCH}: added back by eoan (dropped in cosmic)"),
    _both("zesty", (2, 8), "17.04", since=(2, 8), until=(2, 12)),
    _both("zesty", (2, 8), "17.04", since=(4, 0), source=f"{_PATCH}: added back by eoan (dropped in cosmic)"),
    _both("artful", (2, 10), "17.10", since=(2, 10)),
    _both("bionic", (2, 11), "18.04", since=(2, 11)),
    Release("cosmic", {I440FX: (2, 12), Q35: (2, 11)}, f"{_PATCH}: q35 cosmic is 2.11 ('wrong, kept for compat')",
            since=(2, 12), described="18.10"),
    _both("disco", (3, 1), "19.04", since=(3, 1)),
    Release("eoan", {I440FX: (4, 0), Q35: (4, 0)}, f"{_PATCH}: q35 eoan sets default_kernel_irqchip_split = false",
            irqchip={Q35: "on"}, since=(4, 0), described="19.10"),
    Release("focal", {I440FX: (4, 0), Q35: (4, 2)}, f"{_PATCH}: i440fx focal is 4.0, q35 focal 4.2", since=(4, 2),
            described="20.04"),
    _both("groovy", (5, 0), "20.10", since=(5, 0)),
    _both("hirsute", (5, 2), "21.04", since=(5, 2)),
    _both("impish", (6, 0), "21.10", since=(6, 0)),
    _both("jammy", (6, 2), "22.04", since=(6, 2)),
    _both("kinetic", (7, 0), "22.10", since=(7, 0)),
    _both("lunar", (7, 2), "23.04", since=(7, 2)),
    _both("mantic", (8, 0), "23.10", since=(8, 0)),
    _both("noble", (8, 2), "24.04", since=(8, 2)),
    _both("oracular", (9, 0), "24.10", since=(9, 0), source=f"{_PATCH_2604}: pc_*_machine_9_0_options"),
    Release("plucky", {I440FX: (9, 2), Q35: (9, 1)}, f"{_PATCH_2604}: i440fx plucky calls "
            "pc_i440fx_machine_9_2_options, q35 plucky pc_q35_machine_9_1_options", since=(9, 2), described="25.04"),
    Release("questing", {I440FX: (10, 0), Q35: (10, 1)}, f"{_PATCH_2604}: i440fx questing calls "
            "pc_i440fx_machine_10_0_options (the 10.1 one is questing-v2), q35 questing pc_q35_machine_10_1_options",
            since=(10, 1), described="25.10"),
    _both("resolute", (10, 2), "26.04", since=(10, 2), source=f"{_PATCH_2604}: pc_*_machine_10_2_options; "
          "alias ubuntu (i440fx, the default machine) and ubuntu-q35"),
)


def _variant(key: str, bases: dict, source: str, since, irqchip: dict | None = None) -> Release:
    return Release(key, bases, f"{_PATCH_2604}: {source}", irqchip or {}, since=since,
                   described=next(r.described for r in RELEASES if r.key == key.split("-")[0] and r.described))


def _same(key: str, since, how: str = "host-phys-bits only") -> Release:
    base = next(r for r in RELEASES if r.key == key.split("-")[0] and (r.until is None))
    return _variant(key, dict(base.bases), f"{key}: {base.key}'s options, {how}", since, dict(base.irqchip))


# Every suffixed name the 26.04 build defines, with its own base per family (a family it lacks has none: there is
# no pc-q35-questing-v2). -hpb: host-phys-bits (bionic ... mantic, LP 1776189); -maxcpus: 1024 vCPUs (jammy,
# mantic, LP 2012763); -v2: noble's arch-caps fix (LP 2131822), questing's i440fx rebased on 10.1.
SUFFIX_OVERRIDES = {r.key: (r,) for r in (
    _same("bionic-hpb", (2, 11)),
    _variant("cosmic-hpb", {I440FX: (2, 12), Q35: (2, 12)}, "cosmic-hpb is 2.12 on both (q35 cosmic is 2.11)",
             (2, 12)),
    _same("disco-hpb", (3, 1)),
    _same("eoan-hpb", (4, 0), "eoan's options (q35: the kernel irqchip), host-phys-bits"),
    _same("focal-hpb", (4, 2)),
    _same("groovy-hpb", (5, 0)),
    _variant("hirsute-hpb", {I440FX: (5, 1), Q35: (5, 2)}, "i440fx hirsute-hpb calls pc_i440fx_machine_5_1_options, "
             "q35 hirsute-hpb hirsute's (5.2)", (5, 2)),
    _same("impish-hpb", (6, 0)),
    _same("jammy-hpb", (6, 2)),
    _same("jammy-maxcpus", (6, 2), "max_cpus 1024"),
    _same("jammy-hpb-maxcpus", (6, 2), "host-phys-bits, max_cpus 1024"),
    _same("kinetic-hpb", (7, 0)),
    _same("lunar-hpb", (7, 2)),
    _same("mantic-hpb", (8, 0)),
    _same("mantic-maxcpus", (8, 0), "max_cpus 1024"),
    _same("mantic-hpb-maxcpus", (8, 0), "host-phys-bits, max_cpus 1024"),
    _same("noble-v2", (8, 2), "x-arch-cap-always-on=false (LP 2131822)"),
    _variant("questing-v2", {I440FX: (10, 1)}, "i440fx only: pc_i440fx_machine_10_1_options", (10, 1)),
)}

CODENAMES = NameTable(
    pattern=re.compile(r"(?P<family>pc-i440fx|pc-q35)-(?P<key>[a-z]+)(?P<suffix>(?:-hpb|-maxcpus|-v[0-9]+)*)",
                       re.ASCII),
    releases=RELEASES,
    order="named",
    suffix_overrides=SUFFIX_OVERRIDES,
    source=_PATCH,
    dated_by=re.compile(r"^Ubuntu (?P<release>[0-9]+\.[0-9]+) PC", re.ASCII),
    release_label="Ubuntu {described}",
)

# Upstream's svm rows, which enable-svm-by-default.patch deletes from Ubuntu's QEMU 2.6 on.
_SVM_OFF = next(r for r in KVM_DEFAULTS if r.prop == "svm")
_UNTIL_PATCH = f"; deleted by {_SVM_PATCH} from Ubuntu's QEMU 2.6 on"

UBUNTU = UPSTREAM._replace(
    name="ubuntu",
    title="Ubuntu's QEMU",
    tables=(CODENAMES,),
    aliases={**UPSTREAM.aliases,
             "ubuntu": Alias(I440FX, (4, 0), f"{_PATCH}: the newest pc-i440fx-<codename>, QEMU's default machine "
                                             "(focal's, the oldest libvirt >= 8.1 runs with, is 4.0)", newest="table"),
             "ubuntu-q35": Alias(Q35, (4, 2), f"{_PATCH}: the newest pc-q35-<codename> (first in focal, 4.2)",
                                 newest="table")},
    default_machine="ubuntu",
    kvm_defaults=tuple(r if r is not _SVM_OFF else r._replace(source=r.source + _UNTIL_PATCH, until=_SVM_FROM)
                       for r in KVM_DEFAULTS) + (
        Rule("kvm-default", "svm", None, f"{_SVM_PATCH}: Ubuntu's QEMU does not disable svm under KVM (removed "
                                         "from kvm_default_props); the CPU model keeps its own bit", "ubuntu",
             since=_SVM_FROM),),
    machine_rows=tuple(r if r is not SVM_COMPAT_2_1 else r._replace(source=r.source + _UNTIL_PATCH, until=_SVM_FROM)
                       for r in MACHINE_ROWS),
    version_marker=re.compile(r"ubuntu", re.IGNORECASE),
)

"""Facts about QEMU's x86 CPUs and libvirt's translation to them that are the same in every build: default
models, -global drivers, QOM names and parents, accelerators, CPU modes, and QEMU's grammar for -cpu values.
The properties themselves are rows of tables/properties.py (PROPERTIES and KVM_LEAF_EAX_BIT are views of it);
per-build rules (kvm_default_props, machine compat rows, machine names) are in tables/builds/.
"""

from __future__ import annotations

from collections import namedtuple

from .properties import PROPERTIES as _PROPERTIES, TABLE
from .version import AS_CURRENT, Version, in_window

PROPERTIES: tuple[str, ...] = _PROPERTIES  # one row each in tables/properties.py
# Properties living in CPUID leaf 0x40000001 EAX (FEAT_KVM): cleared as a whole by `kvm=off` and TCG.
KVM_LEAF_EAX_BIT: dict[str, int] = {p.name: p.cpuid[2] for p in TABLE if p.kvm_leaf}

# Default CPU model QEMU uses when libvirt passes no -cpu (no <cpu> element): libvirt writes it in as
# mode='custom'. pc/q35/microvm default to qemu64 on x86_64; isapc to 486.
DEFAULT_MODEL = {"x86_64": "qemu64", "i686": "qemu32"}
ISAPC_DEFAULT_MODEL = "486"

DEFAULT_ARCH = "x86_64"  # a domain without <os><type arch> is read as x86_64 (DEFAULT_MODEL's qemu64)

# The accelerator whose KVM leaf, defaults and host support the rules read (ACCELERATORS' value for type='kvm').
KVM_ACCEL = "kvm"
# -cpu ...,kvm=off hides the KVM leaf (target/i386/cpu.c: DEFINE_PROP_BOOL("kvm", X86CPU, expose_kvm, true)).
KVM_SWITCH = "kvm"

# <qemu:commandline>: libvirt appends each <qemu:arg value> to QEMU's command line as written
# (qemuBuildCommandLine); QEMU's option parser (softmmu/vl.c lookup_opt) takes `-name` and `--name` alike, and an
# option that takes an argument takes the next one. The options read here:
OPTION_PREFIXES = ("--", "-")
CMDLINE_CPU = "cpu"  # -cpu MODEL,...: the last one wins (vl.c QEMU_OPTION_cpu: cpu_option = optarg)
CMDLINE_GLOBAL = "global"  # -global DRIVER.PROP=VALUE, each in order (qemu_global_option)
# -machine (-M) carries the irqchip: kernel_irqchip=on|off|split, or kernel-irqchip (IRQCHIP rows: which one
# counts). libvirt writes it on -machine (qemuBuildMachineCommandLine, tables/libvirt_xml.py SETTINGS' -machine
# row), then `-accel kvm` (qemuBuildAccelCommandLine; libvirt 9.0 here), then <qemu:commandline>.
MACHINE_OPTIONS = frozenset({"machine", "M"})
ACCEL_OPTION = "accel"
MACHINE_OPTION = "-machine"
IRQCHIP_PROPERTY = "kernel_irqchip"
IRQCHIP_VALUES = ("on", "off", "split")


class IrqchipRule(namedtuple("IrqchipRule", "since conflict source")):
    """How QEMU `since` on reads kernel_irqchip from several -machine/-accel options."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    since: Version | None  # the first QEMU release that reads it this way (None: as far as read)
    conflict: str | None  # QEMU's error when the -machine options hold both spellings (None: the last one wins)
    source: str


_IRQCHIP_SEEN = ("QEMU {} run here (tests/lab/test_irqchip.py): -machine twice, both spellings, -accel before and after "
                 "-machine, two -accel")
IRQCHIP: tuple[IrqchipRule, ...] = (
    IrqchipRule(None, None,
                "softmmu/vl.c: every -machine/-M merges into one (merge_lists) and machine_set_property sets each "
                "key in order, `_` read as `-`, so the last kernel_irqchip or kernel-irqchip wins. -accel "
                "kvm,kernel-irqchip= overrides it (the -machine one is only a sugar property of kvm-accel, "
                "11bc4a13d1), but only the first -accel is used (the first accelerator that starts), and behind "
                "libvirt's own `-accel kvm` a <qemu:commandline> -accel is never read; "
                + _IRQCHIP_SEEN.format("5.2.0")),
    IrqchipRule((6, 0), "Conflict between 'kernel_irqchip' and 'kernel-irqchip'",
                "vl: switch -M parsing to keyval (6.0): the merged -machine options go through keyval_dashify, which "
                "refuses a key given in both spellings, and the last one of one spelling wins; "
                + _IRQCHIP_SEEN.format("7.2.22, 10.0.2 and 11.1.2")),
)


def newest(rows: tuple, release: Version | None):
    """The newest of `rows` (oldest first, each from its `since`) QEMU `release` has; an unknown release reads
    as current."""
    return [r for r in rows if in_window(release, r.since, None, unknown=AS_CURRENT)][-1]


def irqchip_rule(release: Version | None) -> IrqchipRule:
    """How QEMU `release` reads kernel_irqchip (an unknown release reads as current)."""
    return newest(IRQCHIP, release)

# -global drivers that reach every x86 vCPU (TYPE_X86_CPU of the 64- and 32-bit binaries).
X86_CPU_DRIVERS = ("x86_64-cpu", "i386-cpu")
# QOM parents: `host` is a subclass of `max` (target/i386: host_x86_cpu_type_info.parent = max), so a
# -global on max-x86_64-cpu reaches -cpu host too.
CPU_TYPE_PARENTS = {"host": ("max",)}

# libvirt's domain type -> QEMU accelerator (qemuBuildAccelCommandLine: type='kvm' -> accel=kvm, 'qemu' -> tcg);
# any other type is passed on as its name.
ACCELERATORS = {"kvm": "kvm", "qemu": "tcg"}
# libvirt's CPU mode -> the -cpu it writes (qemuBuildCpuModelArgStr): host-passthrough -> host, maximum -> max;
# custom and host-model name a model. The -cpu models with max_features (host, max) enable what the accelerator
# supports; every other -cpu is a named model.
CPU_MODE_KINDS = {"host-passthrough": "host", "maximum": "max"}
MAX_FEATURE_MODELS = {"host": "host", "max": "max"}
# QOM type names of a CPU model (x86_cpu_type_name): "<model>-x86_64-cpu" (and -i386-cpu in qemu-system-i386).
CPU_TYPE_SUFFIXES = ("-x86_64-cpu", "-i386-cpu")


def cpu_type_names(model: str) -> tuple[str, ...]:
    return tuple(model + suffix for suffix in CPU_TYPE_SUFFIXES)


class BoolGrammar(namedtuple("BoolGrammar", "since true false refused source")):
    """How QEMU reads a boolean CPU property in -cpu and -global (qapi_bool_parse through the string input
    visitor; x86_cpu_parse_featurestr for +f/-f and a bare name). Case matters: ON and On are refused."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    since: Version | None  # the first QEMU release with this vocabulary (None: as far as read)
    true: frozenset[str]
    false: frozenset[str]
    refused: str  # QEMU's error for any other value; {type}, {prop}, {value}
    source: str


GRAMMAR: tuple[BoolGrammar, ...] = (
    BoolGrammar(None, frozenset({"on", "yes", "true", "y"}), frozenset({"off", "no", "false", "n"}),
                "can't apply global {type}.{prop}={value}: Parameter '{prop}' expects 'on' or 'off'",
                "qapi/qapi-util.c qapi_bool_parse; QEMU 5.2.0, 7.2.22 and 11.1.2 run here alike: =1, =0, =ON, =On, "
                "=YES and = refused, +f, -f, f and f_g taken"),
)
FLAG_PREFIXES = {"+": True, "-": False}  # -cpu model,+feat,-feat (x86_cpu_parse_featurestr)
BARE_FLAG = True  # -cpu model,feat means feat=on
# x86_cpu_parse_featurestr's feat2prop: in `name=value` and a bare `name` each `_` reads as `-` (QEMU 1.7's, 2.7's and
# every later one read here); +name/-name and -global take a name as written (properties.py underscore_flag and
# dash_flag).
FEAT2PROP = ("_", "-")


def either_spelling(name: str) -> str:
    """A regular expression of `name` with each `-` or `_` in either spelling (FEAT2PROP)."""
    under, dash = FEAT2PROP
    return name.replace(under, dash).replace(dash, f"[{dash}{under}]")


class FlagRefusal(namedtuple("FlagRefusal", "since message after_values source")):
    """QEMU's error for a +name/-name spelling it does not take."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    since: Version | None  # the first QEMU release with this error (None: as far as read)
    message: str  # {type}: the CPU's QOM type, {prop}: the name as written
    after_values: bool  # QEMU reads +/- after every name=value (else: each in its place in the -cpu)
    source: str


FLAG_REFUSED: tuple[FlagRefusal, ...] = (
    FlagRefusal(None, "CPU feature {prop} not found", False,
                "target-i386/cpu.c x86_cpu_parse_featurestr -> add_flagname_to_bitmaps (2.7) matches the "
                "feature_word_info[] names as written, part by part; QEMU 1.7's only printed it and started without "
                "the feature"),
    FlagRefusal((2, 8), "Property '{type}.{prop}' not found", True,
                "x86_cpu_expand_features sets the QOM property named as written when the vCPU is realized, after "
                "the -global properties of name=value; QEMU 5.2.0, 7.2.22, 10.0.2 and 11.1.2 run here: "
                "-cpu qemu64,+kvm_pv_tlb_flush"),
)


# -global DRIVER.PROP=VALUE names a QOM property as written (no feat2prop): a feature's dash name, or its underscore
# spelling where QEMU registers that as an alias, from the later of the property's underscore_flag and dash_flag
# (2.8's aliases, 54b8dc7c19; up to 2.7 the properties had only their feat2prop'd names). QEMU 7.2.22 run here:
GLOBAL_NOT_FOUND = "can't apply global {driver}.{prop}={value}: Property '{type}.{prop}' not found"


def flag_refused(release: Version | None) -> FlagRefusal:
    """QEMU `release`'s error for a +name/-name it does not take (an unknown release reads as current)."""
    return newest(FLAG_REFUSED, release)


def grammar(release: Version | None) -> BoolGrammar:
    """The vocabulary of QEMU `release` (an unknown release reads as current)."""
    return newest(GRAMMAR, release)


# -overcommit (qemu_overcommit_opts in vl.c): a QemuOpts list without an implied first name. QemuOpts' own
# grammar (util/qemu-option.c get_opt_name_value, get_opt_value): parameters separated by ',', ',,' a comma
# inside a value, a parameter without '=' a flag (`cpu-pm` is cpu-pm=on, `nocpu-pm` cpu-pm=off), the last
# of one name wins (qemu_opt_find), any other name refused. cpu-pm reads its value with GRAMMAR.
OVERCOMMIT_OPTION = "overcommit"
OVERCOMMIT_CPU_PM = "cpu-pm"
OPTS_FLAG_OFF_PREFIX = "no"
OPTS_HELP = frozenset({"help", "?"})  # QEMU prints the option's help and exits (is_help_option)


class OvercommitRule(namedtuple("OvercommitRule", "since keeps names refused unknown source")):
    """How QEMU `since` on combines several -overcommit options, and what it refuses in one."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    since: Version | None  # the first QEMU release that reads it this way (None: as far as read)
    keeps: bool  # an -overcommit without cpu-pm keeps the earlier one's value (else: cpu-pm off)
    names: frozenset[str]  # the parameters qemu_overcommit_opts has
    refused: str  # QEMU's error for a cpu-pm value it does not take; {arg}, {value}
    unknown: str  # QEMU's error for a parameter it does not know; {arg}, {name}
    source: str


_OVERCOMMIT_REFUSED = "-overcommit {arg}: Parameter 'cpu-pm' expects 'on' or 'off'"
_OVERCOMMIT_UNKNOWN = "-overcommit {arg}: Invalid parameter '{name}'"
OVERCOMMIT: tuple[OvercommitRule, ...] = (
    OvercommitRule(None, False, frozenset({"mem-lock", "cpu-pm"}), _OVERCOMMIT_REFUSED, _OVERCOMMIT_UNKNOWN,
                   "softmmu/vl.c QEMU_OPTION_overcommit: enable_cpu_pm = qemu_opt_get_bool(opts, \"cpu-pm\", false), "
                   "so the last -overcommit decides; QEMU 7.2.22 run here: `-overcommit cpu-pm=on -overcommit "
                   "mem-lock=off` leaves PV_UNHALT in the guest's CPUID"),
    OvercommitRule((9, 1), True, frozenset({"mem-lock", "cpu-pm"}), _OVERCOMMIT_REFUSED, _OVERCOMMIT_UNKNOWN,
                   "system/vl.c overcommit_parse: qemu_opt_get_bool(opts, \"cpu-pm\", enable_cpu_pm) (3fd73736c6, "
                   "9.1), so the last cpu-pm of any -overcommit decides; QEMU 10.0.2 run here: `-overcommit cpu-pm=on "
                   "-overcommit mem-lock=off` strips PV_UNHALT"),
)


def overcommit_rule(release: Version | None) -> OvercommitRule:
    """How QEMU `release` reads -overcommit (an unknown release reads as current)."""
    return newest(OVERCOMMIT, release)

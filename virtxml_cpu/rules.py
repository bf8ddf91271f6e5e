"""Facts about QEMU's x86 CPUs and libvirt's translation to them that are the same in every build: default
models, -global drivers, QOM names and parents, accelerators, CPU modes, and QEMU's grammar for -cpu values.
The properties themselves are rows of properties.py (PROPERTIES and KVM_LEAF_EAX_BIT are views of it);
per-build rules (kvm_default_props, machine compat rows, machine names) are in flavours/.
"""

from __future__ import annotations

from typing import NamedTuple

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


class BoolGrammar(NamedTuple):
    """How QEMU reads a boolean CPU property in -cpu and -global (qapi_bool_parse through the string input
    visitor; x86_cpu_parse_featurestr for +f/-f and a bare name). Case matters: ON and On are refused."""

    since: tuple[int, ...] | None  # the first QEMU release with this vocabulary (None: as far as read)
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
UNDERSCORE_ALIASES_SINCE = (2, 8)  # kvm_pv_unhalt = kvm-pv-unhalt (54b8dc7c19, fc7dfd205f)


def grammar(release: tuple[int, ...] | None) -> BoolGrammar:
    """The vocabulary of QEMU `release` (an unknown release reads as current)."""
    rows = [g for g in GRAMMAR if g.since is None or release is None or release >= g.since]
    return rows[-1] if rows else GRAMMAR[0]

"""A -cpu option and the -global options of <qemu:commandline>, read as QEMU reads them (pure): the properties
they set, the first spelling QEMU refuses, whether a -global reaches the vCPU, whether kvm-pv-unhalt is named.

QEMU's grammar is rows of tables/qemu.py (GRAMMAR, FLAG_PREFIXES, BARE_FLAG, ...); this module interprets them.
"""

from __future__ import annotations

from collections import namedtuple

from ..tables import lazyre, libvirt_xml, qemu
from ..tables.properties import BY_NAME, PROPERTIES, PV_UNHALT
from ..tables.version import AS_CURRENT, Version, in_window

def qemu_bool(text: str, release: Version | None = None) -> bool | None:
    """A boolean as QEMU `release` reads it (qemu.GRAMMAR); None: QEMU refuses the value."""
    g = qemu.grammar(release)
    return True if text in g.true else False if text in g.false else None


qemu_name = libvirt_xml.qemu_name
BOOL_PROPS = frozenset(PROPERTIES) | {qemu.KVM_SWITCH}  # the boolean properties read here (kvm=off hides the KVM leaf)


class CpuOption(namedtuple("CpuOption", "model props refused")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    model: str
    props: list[tuple[str, bool]]
    refused: list[tuple[str, str | None]]  # (property as written, value) QEMU will not take; None: the +/- spelling


def _spelled(names) -> str:
    """A regular expression alternative of `names` in each spelling QEMU reads as one (qemu.FEAT2PROP: any `_`
    for a `-`); which of them a release takes as +name/-name is flag_taken's."""
    return "|".join(sorted(map(qemu.either_spelling, names), key=len, reverse=True))


# The -cpu parts that can matter, after the model: `+p`/`-p`, `p=value` or a bare `p`, for p in BOOL_PROPS (no
# other property is read). One scan finds them, so a -cpu of a million other properties costs its length.
_CPU_PROP = lazyre.compile(rf",(?:([+-])({_spelled(BOOL_PROPS)})|({_spelled(BOOL_PROPS)})(=?)([^,]*))(?=,|\Z)")
_UNHALT = lazyre.compile(rf",[+-]*(?:{_spelled([PV_UNHALT])})(?=[=,]|\Z)")  # a -cpu part naming kvm-pv-unhalt


def flag_taken(written: str, release: Version | None = None) -> bool:
    """Whether QEMU `release` takes `+written`/`-written`: +/- look a name up as written (no `_` -> `-`), so only
    the spellings properties.py gives each property from its release (underscore_flag, dash_flag)."""
    prop = BY_NAME.get(qemu_name(written))
    if prop is None:
        return True  # `kvm`: one spelling
    under, dash = qemu.FEAT2PROP
    if written == prop.name:
        since = prop.dash_flag
    elif written == prop.name.replace(dash, under) and prop.underscore_flag:
        since = prop.underscore_flag
    else:
        return False  # no name QEMU registers (kvm_pv_tlb_flush, kvm_pv-unhalt)
    return in_window(release, since, None, unknown=AS_CURRENT)


def global_name_taken(written: str, release: Version | None = None) -> bool:
    """Whether QEMU `release` has a QOM property named `written` for -global (qemu.GLOBAL_NOT_FOUND): the dash
    name, or the underscore spelling once it is an alias (the later of underscore_flag and dash_flag)."""
    prop = BY_NAME.get(qemu_name(written))
    if prop is None or written == prop.name:
        return True
    under, dash = qemu.FEAT2PROP
    if written != prop.name.replace(dash, under) or not prop.underscore_flag:
        return False
    since = max(prop.underscore_flag, prop.dash_flag or prop.underscore_flag)
    return in_window(release, since, None, unknown=AS_CURRENT)


def parse_cpu_option(text: str, release: Version | None = None) -> CpuOption:
    """`-cpu model,+feat,-feat,feat=on,feat` -> the properties by QEMU's grammar (qemu.GRAMMAR): a bare `feat`
    means feat=on, `_` reads as `-` in feat=value and a bare feat, +feat/-feat take the spellings flag_taken says;
    a value or a +/- spelling QEMU refuses for one of the properties resolved is listed apart (its value None for a
    spelling). Only the properties resolved here (and `kvm`) are listed: no other is read. A part repeated counts
    at its last occurrence (where it decides), a refused one at its first (the one QEMU names)."""
    g = qemu.grammar(release)
    found = _CPU_PROP.findall(text)
    read: dict = {}
    for part in dict.fromkeys(found):  # each distinct part once, in order
        sign, flag, k, eq, v = part
        if flag:
            taken = flag_taken(flag, release)
            read[part] = (qemu_name(flag), qemu.FLAG_PREFIXES[sign]) if taken else (flag, None, None)
        elif not eq:
            if not v:  # `p` followed by more of a name is another property
                read[part] = (qemu_name(k), qemu.BARE_FLAG)
        elif v in g.true or v in g.false:
            read[part] = (qemu_name(k), v in g.true)
        else:
            read[part] = (k, v, None)
    last = list(dict.fromkeys(reversed(found)))[::-1]  # the parts in the order of their last occurrences
    props = [read[p] for p in last if len(read.get(p, ())) == 2]
    refused = [read[p][:2] for p in read if len(read[p]) == 3]
    if qemu.flag_refused(release).after_values:  # QEMU names a refused value before a refused +/- spelling
        refused.sort(key=lambda r: r[1] is None)
    return CpuOption(text.split(",", 1)[0], props, refused)


def qemu_refusal(model: str | None, kind: str, opt: CpuOption | None, globals_, release) -> str | None:
    """QEMU's own error for the first spelling it refuses: the -cpu's (`opt`: parse_cpu_option's for `release`;
    x86_cpu_parse_featurestr turns each property into a -global of the model's type, its name in the dash
    spelling), then each -global that reaches the vCPU (named as written: a name QEMU lacks, or a value it
    refuses)."""
    g = qemu.grammar(release)
    if opt is not None:
        if opt.refused:
            prop, value = opt.refused[0]
            cpu_type = qemu.cpu_type_names(qemu.MAX_FEATURE_MODELS.get(kind, model or opt.model))[0]
            if value is None:  # a +/- spelling
                return qemu.flag_refused(release).message.format(type=cpu_type, prop=prop)
            return g.refused.format(type=cpu_type, prop=qemu_name(prop), value=value)
    for driver, prop, value in globals_:
        if qemu_name(prop) in BOOL_PROPS and global_matches(driver, kind, model):
            if not global_name_taken(prop, release):  # QEMU looks the property up before it reads the value
                cpu_type = qemu.cpu_type_names(qemu.MAX_FEATURE_MODELS.get(kind, model or ""))[0]
                return qemu.GLOBAL_NOT_FOUND.format(driver=driver, prop=prop, value=value, type=cpu_type)
            if qemu_bool(value, release) is None:
                return g.refused.format(type=driver, prop=prop, value=value)
    return None


def global_matches(driver: str, kind: str, model: str | None) -> bool:
    """Whether `-global driver.prop` reaches this vCPU: TYPE_X86_CPU, or the CPU's type or a QOM parent."""
    if driver in qemu.X86_CPU_DRIVERS:
        return True
    name = qemu.MAX_FEATURE_MODELS.get(kind, model or "")
    types = (name,) + qemu.CPU_TYPE_PARENTS.get(name, ())
    return any(driver in qemu.cpu_type_names(t) for t in types)



def names_unhalt(text: str) -> bool:
    """Whether a -cpu option names kvm-pv-unhalt in any spelling or sign (an explicit choice, even one QEMU
    refuses)."""
    return bool(_UNHALT.search(text))

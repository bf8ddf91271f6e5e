"""<qemu:commandline> read by the rows of tables/qemu_commandline.py (pure): the -cpu, -global and -overcommit
arguments, and the kernel_irqchip the domain's -machine options set, libvirt's own merged with these."""

from __future__ import annotations

from collections import namedtuple

from ..tables import lazyre, qemu  # module-level patterns compiled where first used (the hook's cold start)
from ..tables.libvirt_xml import BY_KEY as SETTINGS_BY_KEY
from ..tables.qemu_commandline import BY_NAME, EACH, GLOBAL, IRQCHIP, LAST, NO_ARG_OPTIONS


class QemuArgs(namedtuple("QemuArgs", "cpu globals overcommit irqchip irqchip_keys",
                          defaults=(None, (), (), None, (),))):
    """What `<qemu:commandline>` does to the CPU."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    cpu: str | None  # last -cpu value (QEMU uses the last one); read as QEMU reads it by core/cpu_option.py
    globals: tuple[tuple[str, str, str], ...]  # (driver, property, value) from -global
    overcommit: tuple[str, ...]  # each -overcommit's value, in order (overcommit.read says what QEMU makes of them)
    irqchip: str | None  # the last kernel_irqchip / kernel-irqchip of its -machine options (qemu.IRQCHIP)
    irqchip_keys: tuple[str, ...]  # the spellings of that key in its -machine options, each once


NONE = QemuArgs()


def read(values: list[str]) -> QemuArgs:
    """The <qemu:arg> values in order -> QemuArgs, each option kept as its qemu_commandline row says."""
    found: dict[str, object] = {}
    irqchip, keys = None, {}
    i = 0
    while i < len(values):
        opt = option_name(values[i])
        if opt is None or opt in NO_ARG_OPTIONS:
            i += 1
            continue
        arg = values[i + 1] if i + 1 < len(values) else ""
        row = BY_NAME.get(opt)
        if row is None:
            pass
        elif row.kept == LAST:
            found[row.field] = arg
        elif row.kept == EACH:
            found.setdefault(row.field, []).append(arg)
        elif row.kept == GLOBAL:
            g = parse_global(arg)
            if g:
                found.setdefault(row.field, []).append(g)
        elif row.kept == IRQCHIP:
            for key, value in irqchips(arg):  # the last one wins (qemu.IRQCHIP)
                keys[key] = None
                irqchip = value
        i += 2
    return QemuArgs(found.get("cpu"), tuple(found.get("globals", ())), tuple(found.get("overcommit", ())),
                    irqchip, tuple(keys))


def option_name(value: str) -> str | None:
    """`-cpu` and `--cpu` are the same option to QEMU; anything else is a stray argument."""
    for prefix in qemu.OPTION_PREFIXES:
        if value.startswith(prefix) and value != "-":
            return value[len(prefix):]
    return None


# A -machine parameter setting the irqchip (rules.IRQCHIP_*), at the start or after a `,`. QemuOpts and keyval
# separate parameters by `,` and read `,,` as a comma inside a value, so it is a parameter of its own only after a
# run of an odd number of commas (irqchips counts the run), and its value ends only at a lone one.
_IRQCHIP = lazyre.compile(rf"(?<![^,])({qemu.either_spelling(qemu.IRQCHIP_PROPERTY)})=({'|'.join(qemu.IRQCHIP_VALUES)})"
                          r"(?=,|\Z)")
_COMMAS = lazyre.compile(",*")


def irqchips(arg: str) -> list[tuple[str, str]]:
    """Each (key as written, value) of one -machine argument that sets the irqchip, in order; linear in its length
    (a run of commas is counted once, and only when it has four or more)."""
    out, backwards, size, commas = [], None, len(arg), _COMMAS.match
    for m in _IRQCHIP.finditer(arg):
        start, end = m.span()
        if start > 1 and arg[start - 2] == ",":  # runs of one or three commas are read without a count
            if start == 2 or arg[start - 3] != ",":
                continue  # two: inside the value before it
            if start > 3 and arg[start - 4] == ",":
                backwards = backwards or arg[::-1]
                if len(commas(backwards, size - start).group()) % 2 == 0:
                    continue
        if end + 1 < size and arg[end + 1] == ",":
            continue  # `,,` after it: a comma in its value (QEMU refuses the value)
        out.append(m.groups())
    return out


_GLOBAL = lazyre.compile(r"^([^.=]+)\.([^=]+)=(.*)$")  # compiled once: a definition may hold 70,000 -global


def parse_global(arg: str) -> tuple[str, str, str] | None:
    if arg.startswith("driver="):
        kv = dict(p.split("=", 1) for p in arg.split(",") if "=" in p)
        if {"driver", "property", "value"} <= kv.keys():
            return kv["driver"], kv["property"], kv["value"]
        return None
    m = _GLOBAL.match(arg)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def machine_irqchip(args: QemuArgs, settings) -> tuple[str | None, tuple[str, ...]]:
    """The kernel_irqchip of the domain's -machine options (None: they set none) and the spellings of its key
    there: libvirt's own -machine comes first (its libvirt_xml row), <qemu:commandline>'s after it, and every
    -machine merges into one (qemu.IRQCHIP), so the command line's last one wins."""
    irqchip, keys = None, ()
    for key, value in settings:
        row = SETTINGS_BY_KEY[key]
        if row.option == qemu.MACHINE_OPTION and row.prop == qemu.IRQCHIP_PROPERTY and value in row.values:
            irqchip, keys = row.values[value], (row.prop,)
            break
    if args.irqchip_keys:
        return args.irqchip, tuple(dict.fromkeys(keys + args.irqchip_keys))
    return irqchip, keys


def irqchip_refusal(keys: tuple[str, ...], release: tuple[int, ...] | None) -> str | None:
    """QEMU `release`'s error for a kernel_irqchip given in both spellings in the -machine options (`keys`:
    machine_irqchip's, every -machine merged into one, qemu.IRQCHIP)."""
    rule = qemu.irqchip_rule(release)
    return rule.conflict if rule.conflict and len(keys) > 1 else None

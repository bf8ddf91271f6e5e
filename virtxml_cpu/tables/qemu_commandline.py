"""The grammar of <qemu:commandline> as far as the rules read it, as rows: which QEMU options count, what each
fills, and which options take no argument. core/commandline.py interprets these rows.

libvirt appends each <qemu:arg value> to QEMU's command line as written (qemuBuildCommandLine); QEMU's option
parser (softmmu/vl.c lookup_opt) takes `-name` and `--name` alike (qemu.OPTION_PREFIXES), and an option that
takes an argument takes the next one.
"""

from __future__ import annotations

from collections import namedtuple

from . import qemu

# How an option's arguments are kept (core/commandline.py has one reader for each).
LAST = "last"  # only the last one counts
EACH = "each"  # every one, in order
GLOBAL = "global"  # every one that parses as DRIVER.PROP=VALUE or driver=,property=,value=, in order
IRQCHIP = "irqchip"  # each kernel_irqchip parameter of the argument (qemu.IRQCHIP: the last one wins)


class CommandlineOption(namedtuple("CommandlineOption", "names field kept source")):
    """One QEMU option the rules read from <qemu:commandline>."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    names: tuple[str, ...]  # the option's names, without the leading - or --
    field: str  # the commandline.QemuArgs field it fills
    kept: str  # LAST, EACH, GLOBAL or IRQCHIP
    source: str


OPTIONS: tuple[CommandlineOption, ...] = (
    CommandlineOption((qemu.CMDLINE_CPU,), "cpu", LAST, "softmmu/vl.c QEMU_OPTION_cpu: cpu_option = optarg"),
    CommandlineOption((qemu.CMDLINE_GLOBAL,), "globals", GLOBAL,
                      "softmmu/vl.c QEMU_OPTION_global -> qemu_global_option: DRIVER.PROP=VALUE or "
                      "driver=D,property=P,value=V, each applied in order"),
    CommandlineOption((qemu.OVERCOMMIT_OPTION,), "overcommit", EACH,
                      "softmmu/vl.c QEMU_OPTION_overcommit: each one read in order (qemu.OVERCOMMIT)"),
    CommandlineOption(tuple(sorted(qemu.MACHINE_OPTIONS)), "irqchip", IRQCHIP,
                      "softmmu/vl.c: every -machine/-M merges into one (qemu.IRQCHIP); -accel: behind libvirt's own "
                      "`-accel kvm` QEMU never reads another one"),
)
BY_NAME = {name: row for row in OPTIONS for name in row.names}

# QEMU options that take no argument (qemu-options.hx: DEF(name, 0, ...)), current and historical. Every
# other option consumes the next argv element, as QEMU's own lookup_opt() does.
NO_ARG_OPTIONS = frozenset({
    "h", "help", "version", "S", "s", "snapshot", "nographic", "no-quit", "full-screen", "alt-grab",
    "ctrl-grab", "no-frame", "noframe", "sdl", "curses", "portrait", "win2k-hack", "no-fd-bootchk", "no-acpi",
    "no-hpet", "no-reboot", "no-shutdown", "enable-kvm", "no-kvm", "no-kvm-irqchip", "no-kvm-pit",
    "no-kvm-pit-reinjection", "enable-nesting", "nodefaults", "nodefconfig", "no-user-config", "daemonize",
    "usb", "old-param", "semihosting", "rtc-td-hack", "show-cursor", "singlestep", "preconfig",
    "only-migratable", "enable-fips", "xen-attach", "xen-domid-restrict", "enable-sync-profile", "localtime",
    "mem-prealloc", "no-kqemu", "kernel-kqemu", "enable-kqemu", "tdf", "audio-help", "std-vga",
})

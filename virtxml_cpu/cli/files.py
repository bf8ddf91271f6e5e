"""What the verbs over domain XML files share (explain, rewrite): their host-fact sources and the run over
the files, each file's error its own line and the worst exit code the run's."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..errors import EXIT_OK, VirtxmlCpuError, shown
from ..host.sources import LOCAL, HostSources, NotAsked


def host_sources(args, cfg) -> HostSources:
    """explain's and rewrite's sources (host/sources.py has the order): the flags, --emulator, the config,
    libvirt (--connect or its files), and unless --no-host-probe /dev/kvm and the local QEMU (libvirt's cache
    of it first; not with --connect: that QEMU is on another host)."""
    off = NotAsked("--no-host-probe") if args.no_host_probe else NotAsked("--connect: that QEMU is on another host") \
        if args.connect else None
    return HostSources(build=args.qemu_build, release=args.qemu_version, emulator=args.emulator, config=cfg,
                       connect=args.connect, capabilities=args.capabilities, domcapabilities=args.domcapabilities,
                       caps_cache=LOCAL if off is None and not args.emulator else None,
                       local_qemu=(off or True) if not args.emulator else False,
                       kvm=NotAsked("--no-host-probe") if args.no_host_probe else True)


def over_files(args, each: Callable[[str, str, object, object], int]) -> int:
    """`each(path, label, host, cfg)` for every file named (- is stdin), with the host facts assembled once;
    a file's error is one line and the run goes on to the next."""
    from ..core import config
    from ..host.sources import assemble
    from .output import err

    cfg = config.load(args.config)
    host = assemble(host_sources(args, cfg))
    status = EXIT_OK
    for path in args.files:
        label = "<stdin>" if path == "-" else shown(path)
        try:
            status = max(status, each(path, label, host, cfg))
        except VirtxmlCpuError as e:
            err(str(e))
            status = max(status, e.exit_code)
    return status


def notes(args, o) -> None:
    for note in o.decision.notes if not args.quiet else ():
        print(f"virtxml-cpu: {o.label}: note: {note}", file=sys.stderr)

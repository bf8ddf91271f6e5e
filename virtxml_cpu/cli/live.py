"""What the verbs that talk to libvirt share: the binding checked once for the run, their host-fact
sources, the options a suggested command repeats, and the note on an unverified local QEMU."""

from __future__ import annotations

from ..host.sources import HostSources, NotAsked
from .output import err


def require_libvirt() -> None:
    """No binding: one line for the run, not one per host."""
    from ..host.connection import libvirt_module

    libvirt_module()


def live_sources(args, cfg) -> HostSources:
    """audit's, apply's and watch's sources besides each connection: the flags, the config, /dev/kvm."""
    return HostSources(build=args.qemu_build, release=args.qemu_version, config=cfg,
                       kvm=NotAsked("--no-host-probe") if args.no_host_probe else True)


def deciding_options(args) -> list[str]:
    """The options a live verb was given that change a decision, as words for a suggested command."""
    words = [w for opt, value in (("--policy", args.policy), ("--style", args.style), ("--config", args.config),
                                  ("--qemu-build", args.qemu_build), ("--qemu-version", args.qemu_version))
             if value is not None for w in (opt, value)]
    return words + (["--no-host-probe"] if args.no_host_probe else [])


def unverified_note(uris) -> None:
    """`apply` and `hook install` on a host whose QEMU build was never verified: one line pointing at verify."""
    from ..host.connection import is_local
    from ..verify.record import unverified_note as note_for

    note = note_for() if any(is_local(u) for u in uris) else None
    if note:
        err(note)

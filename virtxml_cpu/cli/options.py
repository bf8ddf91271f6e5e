"""The options several verbs share and the types of their values; a help text names a default by the
constant that holds it."""

from __future__ import annotations

import argparse

from ..constants import CONFIG_PATH, DEFAULT_STYLE, DEFAULT_URI, KVM_DEVICE, MAX_SECONDS
from ..tables.version import is_release
from ..core.decision import POLICIES, STYLES
from ..core.precedence import DEFAULT_POLICY, DEFAULT_TIMEOUT, HOST_TIMEOUT_FACTOR
from ..tables.builds.known import NAMES as BUILD_NAMES

EPILOG = """exit status: 0 done; 1 --check found work (rewrite) or a domain needs work (audit);
2 bad input or usage; 3 environment error (libvirt unreachable, permission denied)."""


def release(text: str) -> str:
    if not is_release(text):
        raise argparse.ArgumentTypeError(f"not a QEMU release X.Y[.Z]: {text!r}")
    return text


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"give a number of seconds above 0, at most {MAX_SECONDS}")
    return value


def config_option(p: argparse.ArgumentParser, what: str = "config file") -> None:
    p.add_argument("--config", help=f"{what} (default {CONFIG_PATH})")


def build_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--qemu-build", choices=BUILD_NAMES, help=help)


def policy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", choices=POLICIES,
                   help=f"when to add kvm-pv-unhalt (default: config, else {DEFAULT_POLICY})")
    p.add_argument("--style", choices=STYLES, help=f"how to add it (default: {DEFAULT_STYLE})")
    config_option(p)
    build_option(p, "the QEMU build the guests run on (default: --emulator, config, libvirt, the local QEMU, "
                    "else the machine name; see docs: which QEMU build and release)")
    p.add_argument("--qemu-version", type=release, metavar="X.Y[.Z]",
                   help="the QEMU release the guests run on (default: --emulator, config, libvirt, the local "
                        "QEMU; unknown: taken as current)")


def file_options(p: argparse.ArgumentParser) -> None:
    """Options of the verbs that read domain XML files (explain, rewrite)."""
    p.add_argument("files", nargs="*", default=["-"], metavar="FILE", help="domain XML files, - for stdin")
    policy_options(p)
    p.add_argument("--connect", metavar="URI", help="read host facts from this libvirt connection")
    p.add_argument("--capabilities", metavar="FILE", help="`virsh capabilities` output (machine aliases)")
    p.add_argument("--domcapabilities", metavar="FILE", help="`virsh domcapabilities` output (host-model CPU)")
    p.add_argument("--emulator", metavar="PATH", help="the QEMU binary the guests run on: its --version and "
                                                     "-machine help give the build, release and machine aliases "
                                                     "(default: qemu-system-x86_64 on PATH, else "
                                                     "/usr/libexec/qemu-kvm)")
    p.add_argument("--no-host-probe", action="store_true",
                   help=f"do not read KVM's supported CPUID from {KVM_DEVICE} nor ask the local QEMU")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    p.add_argument("-v", "--verbose", action="store_true", help="full reasons, host facts used")


def live_verb(sub, name: str, summary: str, description: str, several: bool = True) -> argparse.ArgumentParser:
    """The parser of a verb that talks to libvirt, with the options they share."""
    p = sub.add_parser(name, epilog=EPILOG, help=summary, description=description)
    if several:
        p.add_argument("domains", nargs="*", metavar="DOMAIN",
                       help="domain names, after -- (apply --yes -- NAME...): there a name such as --all is a "
                            "name, never an option")
        p.add_argument("--connect", metavar="URI", action="append", help=f"repeatable; default {DEFAULT_URI}")
    else:
        p.add_argument("--connect", metavar="URI", default=DEFAULT_URI)
    p.add_argument("--no-host-probe", action="store_true", help=f"do not read {KVM_DEVICE} (local URIs only)")
    p.add_argument("--timeout", type=seconds, metavar="SECONDS",
                   help="how long a libvirt host may stay silent while connecting or on any call (default: "
                        f"config, else {DEFAULT_TIMEOUT:g}); a host gets {HOST_TIMEOUT_FACTOR} times that in all")
    policy_options(p)
    return p


def include_managed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include-managed", action="store_true",
                   help="also redefine guests a stack (Nova, oVirt, KubeVirt, OpenNebula, CloudStack ...) writes "
                        "again; without it they are reported `managed` with the stack's knob "
                        "(docs/orchestrators.md)")

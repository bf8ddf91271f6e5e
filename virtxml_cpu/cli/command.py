"""The parser of every verb and the one dispatch: each verb's module adds its options and runs as
`main(args)`; an error it raises is one line on stderr and its exit code."""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..errors import EXIT_ENVIRONMENT, VirtxmlCpuError
from . import apply, audit, explain, hook, rewrite, verify, watch
from .options import EPILOG
from .output import err

VERBS = (explain, rewrite, apply, audit, watch, verify, hook)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="virtxml-cpu", epilog=EPILOG,
        description="Compute the CPU features QEMU gives a libvirt guest, explain them, and add "
                    "kvm-pv-unhalt (paravirtual spinlocks) where the rules say so.")
    parser.add_argument("--version", action="version", version=f"virtxml-cpu {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        verb.arguments(sub).set_defaults(run_verb=verb.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run_verb(args)
    except VirtxmlCpuError as e:
        err(str(e))
        return e.exit_code


def run() -> None:
    """The console entry point: a reader that goes away (`| head`) ends the run quietly, and a full or
    failing stdout is one line, exit 3, never a traceback."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_ENVIRONMENT
    except OSError as e:
        if e.errno is None or e.filename is not None:
            raise
        err(f"cannot write the output: {e.strerror}")
        code = EXIT_ENVIRONMENT
    if code == EXIT_ENVIRONMENT:
        try:  # nothing more may reach a closed or full stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
    sys.exit(code)

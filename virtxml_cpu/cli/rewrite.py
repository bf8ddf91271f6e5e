"""`virtxml-cpu rewrite`: add kvm-pv-unhalt where the policy says so, to stdout, a file, in place (locked,
atomic), as a diff, or only checked."""

from __future__ import annotations

import sys

from ..errors import EXIT_OK, EXIT_WORK_FOUND, BadInput, shown
from .files import notes, over_files
from .options import EPILOG, file_options
from .output import for_stdout


def arguments(sub):
    p = sub.add_parser("rewrite", help="add kvm-pv-unhalt where the policy says so", epilog=EPILOG)
    file_options(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", help="write to this file (one input only)")
    out.add_argument("-i", "--in-place", action="store_true", help="replace each file atomically")
    out.add_argument("--diff", action="store_true", help="print a unified diff instead of the XML")
    out.add_argument("--check", action="store_true", help="change nothing; exit 1 if a change would be made")
    p.add_argument("--backup", metavar="SUFFIX", help="with --in-place: keep the original as FILE+SUFFIX")
    return p


def main(args) -> int:
    if args.backup is not None and not args.in_place:
        raise BadInput("--backup goes with --in-place")
    if args.backup is not None and (not args.backup or "/" in args.backup or "\0" in args.backup):
        raise BadInput("--backup takes a non-empty file name suffix such as .orig, not a path")
    if args.output and len(args.files) != 1:
        raise BadInput("-o takes exactly one input file")
    if args.in_place and "-" in args.files:
        raise BadInput("--in-place needs files, not stdin")

    from ..core.pipeline import process  # here, once per run, not per file: not when rewrite is not run
    from ..fs.files import read_input

    def each(path: str, label: str, host, cfg) -> int:
        if args.in_place:
            return in_place(args, path, label, host, cfg)
        return emit(args, process(read_input(path), label, host, cfg, args.policy, args.style,
                                  render=not args.check))
    return over_files(args, each)


def in_place(args, path: str, label: str, host, cfg) -> int:
    """Lock, read, decide, rewrite, rename: concurrent runs on one file make exactly one change."""
    from ..core.pipeline import process
    from ..fs.files import update_in_place

    def transform(data: bytes):
        o = process(data, label, host, cfg, args.policy, args.style)
        return (o.output if o.changed else None), o

    written, o, backup = update_in_place(path, transform, args.backup)
    notes(args, o)
    if written and not args.quiet:
        extra = f"; original kept as {shown(backup)}" if backup else ""
        print(f"{label}: added kvm-pv-unhalt ({o.decision.rule}){extra}", file=sys.stderr)
    elif not written and args.verbose:
        print(f"{label}: unchanged: {o.decision.reason}", file=sys.stderr)
    return EXIT_OK


def emit(args, o) -> int:
    notes(args, o)
    if args.check:
        if o.changed and not args.quiet:
            print(f"{o.label}: would add kvm-pv-unhalt: {o.decision.reason}")
        return EXIT_WORK_FOUND if o.changed else EXIT_OK
    from ..fs.files import write_output
    from ..render import explain

    if args.diff:
        sys.stdout.write(for_stdout(explain.unified_diff(o)))
        return EXIT_OK
    if args.output:
        write_output(args.output, o.output, args.files)
        return EXIT_OK
    sys.stdout.buffer.write(o.output)
    sys.stdout.flush()
    return EXIT_OK

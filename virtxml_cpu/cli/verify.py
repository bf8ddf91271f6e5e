"""`virtxml-cpu verify`: start this host's QEMU for every machine type x a few CPU models and compare what
vCPU 0 has with what the tool computes; a pass is noted in the verified record."""

from __future__ import annotations

import json
import sys

from ..constants import VERIFIED_RECORD
from ..errors import EXIT_OK
from ..verify.types import DEFAULT_TIMEOUT, DEFAULT_WORKERS, MAX_WORKERS, MODE_KEYS
from .options import EPILOG, build_option, config_option, seconds


def arguments(sub):
    p = sub.add_parser("verify", epilog=EPILOG, help="check the rules against this host's QEMU",
                       description="Start this host's QEMU paused, without disks or devices, for every x86 "
                                   "machine type it lists x a few CPU models, read what vCPU 0 has (QMP "
                                   "qom-get) and compare with what the tool computes. Exit 1 on any "
                                   "disagreement, 3 when KVM or QEMU is unavailable. Needs root or the kvm group.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--emulator", metavar="PATH", help="the QEMU to start (any executable, a wrapper script too)")
    where.add_argument("--connect", metavar="URI", help="the emulator this local libvirt uses for KVM domains")
    build_option(p, "the QEMU build to check the rules of (default: as explain decides it: what an --emulator "
                    "QEMU shows, the config, else what the QEMU shows)")
    config_option(p)
    p.add_argument("--machine", action="append", default=[], metavar="PATTERN",
                   help="only machine types matching this shell pattern (repeatable)")
    p.add_argument("--cpu", action="append", default=[], choices=MODE_KEYS,
                   help="only these CPU models (repeatable; default: all)")
    p.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"how long one QEMU may take before it is killed (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, choices=range(1, MAX_WORKERS + 1), metavar="N",
                   help=f"QEMUs at a time (default {DEFAULT_WORKERS})")
    p.add_argument("--json", metavar="FILE", help="write a report to attach to a bug report; - prints it on "
                   "stdout as one line, after the result lines, which then go to stderr")
    p.add_argument("--record", metavar="FILE",
                   help=f"where a pass is noted (default {VERIFIED_RECORD})")
    p.add_argument("-q", "--quiet", action="store_true", help="print disagreements and the summary only")
    return p


def main(args) -> int:
    from ..core import config
    from ..fs.files import write_output
    from ..render import verify as render_verify
    from ..verify import record
    from ..verify import run as verify

    cfg = config.load(args.config)
    opts = verify.VerifyOptions(args.emulator, args.connect, args.qemu_build, cfg, args.timeout, args.workers,
                                tuple(args.machine), tuple(args.cpu), args.json, args.record or VERIFIED_RECORD,
                                None if args.quiet else lambda msg: print(msg, file=sys.stderr, flush=True))
    result = verify.run(opts)
    to_stdout = args.json == "-"
    for line in render_verify.lines(result, args.quiet):
        print(line, file=sys.stderr if to_stdout else sys.stdout, flush=True)
    if args.json and not to_stdout:
        write_output(args.json, render_verify.json_document(result).encode(), [])
    if result.exit_code == EXIT_OK and not result.failed:
        note = record.write_record(result, opts.record)
        if not args.quiet:
            print(note, file=sys.stderr, flush=True)
    if to_stdout:  # last, so a reader of both streams finds it as the final line
        print(json.dumps(render_verify.report(result)), flush=True)
    return result.exit_code

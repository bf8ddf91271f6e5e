"""`virtxml-cpu audit`: what every domain on libvirt hosts has and needs, in the --format asked, to stdout
as each host is done or to the -o file at the end; --follow keeps reporting one host."""

from __future__ import annotations

import sys

from ..constants import DEFAULT_URI
from ..errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_WORK_FOUND, BadInput
from .live import deciding_options, live_sources, require_libvirt
from .options import live_verb
from .output import err, write_record, write_stdout


def arguments(sub):
    p = live_verb(sub, "audit", "report kvm-pv-unhalt of every domain on libvirt hosts",
                  "For each domain on each connection: kvm-pv-unhalt in its persistent definition and, for "
                  "running guests, in the live definition. Exit 1 when any domain needs the fix. Connections "
                  "are audited concurrently. The table ends with the apply that fixes what was found (fix "
                  "with: ..., on stderr).")
    p.add_argument("--observe", action="store_true",
                   help="also read what QEMU really has for running guests (QMP qom-get through libvirt; "
                        "libvirt then marks those domains 'tainted: custom-monitor')")
    p.add_argument("--format", choices=("table", "json", "prometheus"), default="table",
                   help="prometheus: node_exporter textfile-collector metrics")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the report to FILE atomically (e.g. /var/lib/node_exporter/textfile/virtxml-cpu.prom)")
    p.add_argument("--details", action="store_true",
                   help="each domain record (--format json) also carries what explain adds: machine type, CPU mode, "
                        "QEMU build, every property with its source")
    p.add_argument("--follow", action="store_true",
                   help="with --format json and one host: after the audit, each domain's record again whenever "
                        "libvirt reports it defined, undefined, started or stopped, until stopped (implies "
                        "--details; fixes nothing; docs/live.md, \"Following a host\")")
    return p


def main(args) -> int:
    require_libvirt()
    import time

    from ..core import config
    from ..core.precedence import timeouts
    from ..live import audit
    from ..live.records import summarize

    cfg = config.load(args.config)
    if args.follow:
        if args.format != "json" or args.output or args.domains or len(args.connect or [DEFAULT_URI]) != 1:
            raise BadInput("audit --follow takes --format json and at most one --connect, no -o and no names")
    opts = audit.AuditOptions(cfg, args.policy, args.style, tuple(args.domains), args.observe,
                              live_sources(args, cfg), None if args.follow else audit.stderr_progress(),
                              *(c.value for c in timeouts(args.timeout, cfg)), details=args.details or args.follow)
    if args.follow:
        from ..hook.status import status_json
        from ..live.follow import follow

        return follow((args.connect or [DEFAULT_URI])[0], opts, write_record, hook=status_json)
    from ..render.formats import RENDERERS, emit
    from ..render.table import fix_lines, summary_line

    chunks: list[str] = []
    write = chunks.append if args.output else write_stdout
    hosts = emit(RENDERERS[args.format], reporting_errors(audit.audit_stream(args.connect or [DEFAULT_URI], opts)),
                 write, time.time)
    if args.output:
        from ..fs.files import write_output

        write_output(args.output, "".join(chunks).encode(), [])
    print(summary_line(hosts), file=sys.stderr)
    if args.format == "table":
        for line in fix_lines(hosts, deciding_options(args)):
            print(line, file=sys.stderr)
    s = summarize(hosts)
    if s.unreachable or s.timed_out:
        return EXIT_ENVIRONMENT
    if s.domain_errors:
        return EXIT_BAD_INPUT
    return EXIT_WORK_FOUND if s.needs_fix else EXIT_OK


def reporting_errors(hosts):
    """The hosts, each unreachable or timed-out one also named on stderr as it comes."""
    for h in hosts:
        if h.error:
            err(f"{h.uri}: {h.error}")
        yield h

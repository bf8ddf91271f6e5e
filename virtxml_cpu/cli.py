"""The `virtxml-cpu` command: a thin shell over pipeline.process()."""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import __version__
from .core import config
from .core.config import HOOK_MODES
from .tables.builds.known import NAMES as BUILD_NAMES
from .errors import (EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_WORK_FOUND, BadInput, EnvironmentProblem,
                     VirtxmlCpuError)
from .hook.install import DEFAULT_DIGEST_DIR, DEFAULT_HOOKS_DIR
from .host.connection import DEFAULT_URI
from .errors import shown, shown_lines
from .fs.files import read_input, update_in_place, write_output
from .host.sources import LOCAL, HostSources, NotAsked, assemble
from .core import pipeline
from .core.pipeline import process
from .render import explain
from .core.decide import POLICIES, STYLES

EPILOG = """exit status: 0 done; 1 --check found work (rewrite) or a domain needs work (audit);
2 bad input or usage; 3 environment error (libvirt unreachable, permission denied)."""


def _policy_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", choices=POLICIES, help="when to add kvm-pv-unhalt (default: config, else compat)")
    p.add_argument("--style", choices=STYLES, help="how to add it (default: pvspinlock)")
    p.add_argument("--config", help=f"config file (default {config.DEFAULT_PATH})")
    p.add_argument("--qemu-build", choices=BUILD_NAMES,
                   help="the QEMU build the guests run on (default: --emulator, config, libvirt, the local "
                        "QEMU, else the machine name; see docs: which QEMU build and release)")
    p.add_argument("--qemu-flavour", dest="qemu_build", choices=BUILD_NAMES, help=argparse.SUPPRESS)  # older name
    p.add_argument("--qemu-version", type=_release, metavar="X.Y[.Z]",
                   help="the QEMU release the guests run on (default: --emulator, config, libvirt, the local "
                        "QEMU; unknown: taken as current)")


def _release(text: str) -> str:
    if not config.is_release(text):
        raise argparse.ArgumentTypeError(f"not a QEMU release X.Y[.Z]: {text!r}")
    return text


def _live_opts(p: argparse.ArgumentParser, several: bool = True) -> None:
    """Options of the verbs that talk to libvirt."""
    if several:
        p.add_argument("domains", nargs="*", metavar="DOMAIN",
                       help="domain names, after -- (apply --yes -- NAME...): there a name such as --all is a "
                            "name, never an option")
        p.add_argument("--connect", metavar="URI", action="append", help=f"repeatable; default {DEFAULT_URI}")
    else:
        p.add_argument("--connect", metavar="URI", default=DEFAULT_URI)
    p.add_argument("--no-host-probe", action="store_true", help="do not read /dev/kvm (local URIs only)")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="how long a libvirt host may stay silent while connecting or on any call "
                        "(default: config, else 30); a host gets 10 times that in all")
    _policy_opts(p)


def _live_verb(sub, name: str, summary: str, description: str, several: bool = True) -> argparse.ArgumentParser:
    """The parser of a verb that talks to libvirt, with the options they share (_live_opts)."""
    p = sub.add_parser(name, epilog=EPILOG, help=summary, description=description)
    _live_opts(p, several)
    return p


def _include_managed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include-managed", action="store_true",
                   help="also redefine guests a stack (Nova, oVirt, KubeVirt, OpenNebula, CloudStack ...) writes "
                        "again; without it they are reported `managed` with the stack's knob "
                        "(docs/orchestrators.md)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError("give a number of seconds above 0, at most 86400")
    return value


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", default=["-"], metavar="FILE", help="domain XML files, - for stdin")
    _policy_opts(p)
    p.add_argument("--connect", metavar="URI", help="read host facts from this libvirt connection")
    p.add_argument("--capabilities", metavar="FILE", help="`virsh capabilities` output (machine aliases)")
    p.add_argument("--domcapabilities", metavar="FILE", help="`virsh domcapabilities` output (host-model CPU)")
    p.add_argument("--emulator", metavar="PATH", help="the QEMU binary the guests run on: its --version and "
                                                     "-machine help give the build, release and machine aliases "
                                                     "(default: qemu-system-x86_64 on PATH, else "
                                                     "/usr/libexec/qemu-kvm)")
    p.add_argument("--no-host-probe", action="store_true",
                   help="do not read KVM's supported CPUID from /dev/kvm nor ask the local QEMU")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    p.add_argument("-v", "--verbose", action="store_true", help="full reasons, host facts used")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="virtxml-cpu", epilog=EPILOG,
        description="Compute the CPU features QEMU gives a libvirt guest, explain them, and add "
                    "kvm-pv-unhalt (paravirtual spinlocks) where the rules say so.")
    parser.add_argument("--version", action="version", version=f"virtxml-cpu {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("explain", help="show effective CPU features and the decision", epilog=EPILOG)
    _common(ex)
    ex.add_argument("--format", choices=("table", "json"), default="table")
    named = ex.add_mutually_exclusive_group()
    named.add_argument("--domain", action="append", default=[], metavar="NAME",
                       help="explain this domain's persistent definition, read from --connect (default "
                            f"{DEFAULT_URI}) with its host facts as audit reads them (repeatable; --domain=NAME "
                            "keeps a name that starts with - a name)")
    named.add_argument("--all-domains", action="store_true", help="every domain on --connect")
    rw = sub.add_parser("rewrite", help="add kvm-pv-unhalt where the policy says so", epilog=EPILOG)
    _common(rw)
    out = rw.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", help="write to this file (one input only)")
    out.add_argument("-i", "--in-place", action="store_true", help="replace each file atomically")
    out.add_argument("--diff", action="store_true", help="print a unified diff instead of the XML")
    out.add_argument("--check", action="store_true", help="change nothing; exit 1 if a change would be made")
    rw.add_argument("--backup", metavar="SUFFIX", help="with --in-place: keep the original as FILE+SUFFIX")

    ap = _live_verb(sub, "apply", "fix persistent definitions through libvirt",
                    "Rewrite the persistent definitions of libvirt domains (read with INACTIVE|SECURE, so secrets "
                    "survive) and define them again. A running guest is never touched: the change applies at "
                    "its next cold boot. Give the names after --, options before it.")
    which, show = ap.add_mutually_exclusive_group(), ap.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="every domain on the connection")
    which.add_argument("--pending", action="store_true", help="the fixes the hook queued (queue mode)")
    show.add_argument("--dry-run", action="store_true", help="say what would change; exit 1 if anything would")
    show.add_argument("--diff", action="store_true", help="show the diffs; change nothing")
    ap.add_argument("-y", "--yes", action="store_true", help="do not ask before defining")
    _include_managed(ap)

    au = _live_verb(sub, "audit", "report kvm-pv-unhalt of every domain on libvirt hosts",
                    "For each domain on each connection: kvm-pv-unhalt in its persistent definition and, for "
                    "running guests, in the live definition. Exit 1 when any domain needs the fix. Connections "
                    "are audited concurrently. The table ends with the apply that fixes what was found (fix "
                    "with: ..., on stderr).")
    au.add_argument("--observe", action="store_true",
                    help="also read what QEMU really has for running guests (QMP qom-get through libvirt; "
                         "libvirt then marks those domains 'tainted: custom-monitor')")
    au.add_argument("--format", choices=("table", "json", "prometheus"), default="table",
                    help="prometheus: node_exporter textfile-collector metrics")
    au.add_argument("-o", "--output", metavar="FILE",
                    help="write the report to FILE atomically (e.g. /var/lib/node_exporter/textfile/virtxml-cpu.prom)")
    au.add_argument("--details", action="store_true",
                    help="each domain record (--format json) also carries what explain adds: machine type, CPU mode, "
                         "QEMU build, every property with its source")
    au.add_argument("--follow", action="store_true",
                    help="with --format json and one host: after the audit, each domain's record again whenever "
                         "libvirt reports it defined, undefined, started or stopped, until stopped (implies "
                         "--details; fixes nothing; docs/live.md, \"Following a host\")")

    wa = _live_verb(sub, "watch", "fix each newly defined or updated domain (service)",
                    "Listen to libvirt lifecycle events and apply the policy to every domain defined or redefined; "
                    "also applies the hook's queue. Reconnects when libvirtd restarts; stops on SIGTERM. See "
                    "contrib/systemd/.", several=False)
    _include_managed(wa)

    ve = sub.add_parser("verify", epilog=EPILOG, help="check the rules against this host's QEMU",
                        description="Start this host's QEMU paused, without disks or devices, for every x86 "
                                    "machine type it lists x a few CPU models, read what vCPU 0 has (QMP "
                                    "qom-get) and compare with what the tool computes. Exit 1 on any "
                                    "disagreement, 3 when KVM or QEMU is unavailable. Needs root or the kvm group.")
    where = ve.add_mutually_exclusive_group()
    where.add_argument("--emulator", metavar="PATH", help="the QEMU to start (any executable, a wrapper script too)")
    where.add_argument("--connect", metavar="URI", help="the emulator this local libvirt uses for KVM domains")
    ve.add_argument("--qemu-build", choices=BUILD_NAMES, help="the QEMU build to check the rules of "
                    "(default: as explain decides it: what an --emulator QEMU shows, the config, else what the "
                    "QEMU shows)")
    ve.add_argument("--qemu-flavour", dest="qemu_build", choices=BUILD_NAMES, help=argparse.SUPPRESS)  # older name
    ve.add_argument("--config", help=f"config file (default {config.DEFAULT_PATH})")
    ve.add_argument("--machine", action="append", default=[], metavar="PATTERN",
                    help="only machine types matching this shell pattern (repeatable)")
    ve.add_argument("--cpu", action="append", default=[], choices=("default", "intel", "amd", "host", "max"),
                    help="only these CPU models (repeatable; default: all)")
    ve.add_argument("--timeout", type=_seconds, default=20.0, metavar="SECONDS",
                    help="how long one QEMU may take before it is killed (default 20)")
    ve.add_argument("--workers", type=int, default=2, choices=range(1, 9), metavar="N",
                    help="QEMUs at a time (default 2)")
    ve.add_argument("--json", metavar="FILE", help="write a report to attach to a bug report; - prints it on "
                    "stdout as one line, after the result lines, which then go to stderr")
    ve.add_argument("--record", metavar="FILE",
                    help="where a pass is noted (default /var/lib/virtxml-cpu/verified.json)")
    ve.add_argument("-q", "--quiet", action="store_true", help="print disagreements and the summary only")

    hk = sub.add_parser("hook", help="install, remove or inspect the libvirt qemu hook", epilog=EPILOG)
    hk.add_argument("action", choices=("install", "uninstall", "status"))
    hk.add_argument("--hooks-dir", default=DEFAULT_HOOKS_DIR, help=f"default {DEFAULT_HOOKS_DIR}")
    hk.add_argument("--mode", choices=HOOK_MODES, help="audit (log), enforce (refuse the start), queue "
                                                      "(log and queue the fix for `apply --pending`)")
    hk.add_argument("--config", help="config file the hook reads (default /etc/virtxml-cpu/config.toml)")
    hk.add_argument("--format", choices=("table", "json"), default="table",
                    help="status: json gives the hook, libvirt and the local QEMU build with its last verify pass")
    hk.add_argument("--digest-dir", default=DEFAULT_DIGEST_DIR, metavar="DIR",
                    help=f"where the hook keeps its decisions for repeat starts, a directory only root can change "
                         f"(default {DEFAULT_DIGEST_DIR}; '' keeps none)")
    place = hk.add_mutually_exclusive_group()
    place.add_argument("--legacy", action="store_true", default=None,
                       help="install as DIR/qemu (libvirt < 6.5); default: decided from libvirtd --version")
    place.add_argument("--qemu-d", dest="legacy", action="store_false", help="install into DIR/qemu.d/")
    return parser


def host_sources(args, cfg) -> HostSources:
    """explain's and rewrite's sources (hostsrc has the order): the flags, --emulator, the config, libvirt
    (--connect or its files), and unless --no-host-probe /dev/kvm and the local QEMU (libvirt's cache of it
    first; not with --connect: that QEMU is on another host)."""
    off = NotAsked("--no-host-probe") if args.no_host_probe else NotAsked("--connect: that QEMU is on another host") \
        if args.connect else None
    return HostSources(build=args.qemu_build, release=args.qemu_version, emulator=args.emulator, config=cfg,
                       connect=args.connect, capabilities=args.capabilities, domcapabilities=args.domcapabilities,
                       caps_cache=LOCAL if off is None and not args.emulator else None,
                       local_qemu=(off or True) if not args.emulator else False,
                       kvm=NotAsked("--no-host-probe") if args.no_host_probe else True)


def live_sources(args, cfg) -> HostSources:
    """audit's, apply's and watch's sources besides each connection: the flags, the config, /dev/kvm."""
    return HostSources(build=args.qemu_build, release=args.qemu_version, config=cfg,
                       kvm=NotAsked("--no-host-probe") if args.no_host_probe else True)


def _err(msg: str) -> None:
    print(f"virtxml-cpu: {shown(msg)}", file=sys.stderr)  # one line, whatever a name in it holds


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "explain" and (args.domain or args.all_domains):
        try:
            if args.files != ["-"]:
                raise BadInput("explain takes files or --domain/--all-domains, not both")
            return _explain_domains(args)
        except VirtxmlCpuError as e:
            _err(str(e))
            return e.exit_code
    if args.command in ("apply", "hook", "audit", "watch", "verify"):
        try:
            if args.command not in ("hook", "verify"):  # no binding: one line for the run, not one per host
                from .host.connection import libvirt_module

                libvirt_module()
            return {"apply": _apply, "hook": _hook, "audit": _audit, "watch": _watch,
                    "verify": _verify}[args.command](args)
        except VirtxmlCpuError as e:
            _err(str(e))
            return e.exit_code
    try:
        if args.command == "rewrite":
            if args.backup is not None and not args.in_place:
                raise BadInput("--backup goes with --in-place")
            if args.backup is not None and (not args.backup or "/" in args.backup or "\0" in args.backup):
                raise BadInput("--backup takes a non-empty file name suffix such as .orig, not a path")
            if args.output and len(args.files) != 1:
                raise BadInput("-o takes exactly one input file")
            if args.in_place and "-" in args.files:
                raise BadInput("--in-place needs files, not stdin")
        cfg = config.load(args.config)
        host = assemble(host_sources(args, cfg))
    except VirtxmlCpuError as e:
        _err(str(e))
        return e.exit_code
    status = EXIT_OK
    render = args.command == "rewrite" and not args.check
    in_place = args.command == "rewrite" and args.in_place
    for path in args.files:
        label = "<stdin>" if path == "-" else shown(path)
        try:
            if in_place:
                status = max(status, _in_place(args, path, label, host, cfg))
                continue
            outcome = process(read_input(path), label, host, cfg, args.policy, args.style, render=render)
            status = max(status, _emit(args, path, outcome))
        except VirtxmlCpuError as e:
            _err(str(e))
            status = max(status, e.exit_code)
    return status


def _explain_domains(args) -> int:
    """explain for libvirt domains: each persistent definition (read INACTIVE) with the host facts audit
    uses for that connection, so both say the same; an unknown name is one line and exit 2."""
    from .host.sources import connection_facts
    from .host.connection import deadlines, libvirt_module, open_for_reading

    libvirt = libvirt_module()
    cfg = config.load(args.config)
    uri = args.connect or DEFAULT_URI
    conn = open_for_reading(uri, deadlines(None, cfg)[0])
    status = EXIT_OK
    try:
        host = connection_facts(live_sources(args, cfg), cfg, conn, uri)
        doms = []
        for name in args.domain:
            try:
                doms.append(conn.lookupByName(name))
            except libvirt.libvirtError as e:
                _err(f"{shown(name)}: {e.get_error_message()}")
                status = EXIT_BAD_INPUT
        for dom in doms if args.domain else conn.listAllDomains():
            try:
                flags = libvirt.VIR_DOMAIN_XML_INACTIVE if dom.isPersistent() else 0
                xml = dom.XMLDesc(flags).encode()
            except libvirt.libvirtError as e:  # vanished between the listing and the read
                _err(f"{shown(dom.name())}: {e.get_error_message()}")
                status = EXIT_BAD_INPUT
                continue
            status = max(status, _emit(args, dom.name(), process(xml, dom.name(), host, cfg, args.policy,
                                                                   args.style, render=False)))
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    finally:
        conn.close()
    return status


def _in_place(args, path: str, label: str, host, cfg) -> int:
    """Lock, read, decide, rewrite, rename: concurrent runs on one file make exactly one change."""
    def transform(data: bytes):
        o = process(data, label, host, cfg, args.policy, args.style)
        return (o.output if o.changed else None), o

    written, o, backup = update_in_place(path, transform, args.backup)
    _notes(args, o)
    if written and not args.quiet:
        extra = f"; original kept as {shown(backup)}" if backup else ""
        print(f"{label}: added kvm-pv-unhalt ({o.decision.rule}){extra}", file=sys.stderr)
    elif not written and args.verbose:
        print(f"{label}: unchanged: {o.decision.reason}", file=sys.stderr)
    return EXIT_OK


def _notes(args, o) -> None:
    for note in o.decision.notes if not args.quiet else ():
        print(f"virtxml-cpu: {o.label}: note: {note}", file=sys.stderr)


def _emit(args, path: str, o) -> int:
    if args.command == "explain":
        line = json_line(o) if args.format == "json" else explain.table(o, args.verbose) + "\n"
        sys.stdout.write(line + "\n")  # what print() writes, in one write instead of two
        return EXIT_OK
    _notes(args, o)
    if args.check:
        if o.changed and not args.quiet:
            print(f"{o.label}: would add kvm-pv-unhalt: {o.decision.reason}")
        return EXIT_WORK_FOUND if o.changed else EXIT_OK
    if args.diff:
        sys.stdout.write(_for_stdout(explain.unified_diff(o)))
        return EXIT_OK
    if args.output:
        write_output(args.output, o.output, args.files)
        return EXIT_OK
    sys.stdout.buffer.write(o.output)
    sys.stdout.flush()
    return EXIT_OK


def json_line(o) -> str:
    """explain's JSON line (explain.to_json_line's bytes), the parts a template's clones share rendered once
    and kept by the pipeline's memo: the resolution's for every document with its key, the decision's for
    every document with the same decision."""
    shared = pipeline.shared_part(o, "resolution", "json", explain.resolution_json)
    decision = pipeline.shared_part(o, "decision", "json", explain.decision_json)
    return explain.joined(explain.own_json(o), shared, decision)


def _for_stdout(diff: str) -> str:
    """A diff escaped for a terminal (docs/files.md, "Diffs on a terminal"); byte-exact into a pipe or a file,
    where `patch` reads it."""
    return shown_lines(diff) if sys.stdout.isatty() else diff


def _ask(prompt: str) -> bool:
    return input(prompt).strip().lower() in ("y", "yes")


def _apply(args) -> int:
    from .host.connection import deadlines
    from .live.apply import ApplyOptions, ApplyResult, Selection, apply_with_deadline
    from .render.records import FAILED, UNKNOWN, WOULD_CHANGE
    from .render.applylines import summary
    from .render.commands import apply_fix

    if not (args.domains or args.all or args.pending):
        raise BadInput("name domains, or use --all or --pending")
    confirm = _ask if not args.yes and sys.stdin.isatty() else None
    if confirm is None and not (args.yes or args.dry_run or args.diff):
        raise BadInput("not a terminal: pass --yes to define without asking, or --dry-run/--diff")
    cfg = config.load(args.config)
    timeout, host_timeout = deadlines(args.timeout, cfg)
    opts = ApplyOptions(cfg, args.policy, args.style, args.dry_run, args.diff, args.yes,
                        sources=live_sources(args, cfg), confirm=confirm, timeout=timeout, shown_diff=_for_stdout,
                        include_managed=args.include_managed)
    which = Selection(tuple(args.domains), args.all, args.pending)
    total, down = ApplyResult(), []
    for uri in args.connect or [DEFAULT_URI]:
        res, problem = apply_with_deadline(uri, which, opts, host_timeout)
        total.add(res)
        if problem:  # one unreachable or wedged host does not stop the others
            _err(problem)
            down.append(uri)
            if res.todo:  # the domains it did not reach, as the command that finishes them
                mode = ["--pending"] if args.pending else []
                mode += ["--dry-run"] if args.dry_run else ["--diff"] if args.diff else ["--yes"] if args.yes else []
                mode += ["--include-managed"] if args.include_managed else []
                print(f"finish with: {apply_fix(uri, [] if args.pending else res.todo, mode + _deciding_options(args))}",
                      file=sys.stderr)
    print(summary(total.tally, down), file=sys.stderr)
    _unverified_note(args.connect or [DEFAULT_URI])
    if total.tally[FAILED] or down:
        return EXIT_ENVIRONMENT
    if total.tally[UNKNOWN]:
        return EXIT_BAD_INPUT
    return EXIT_WORK_FOUND if total.tally[WOULD_CHANGE] else EXIT_OK


def _audit(args) -> int:
    """Options from the arguments, a renderer for --format, and one writer: stdout as each host is done,
    or the -o file, written atomically at the end."""
    import time

    from .live import audit
    from .render.records import summarize
    from .render.formats import RENDERERS, emit
    from .host.connection import deadlines
    from .render.table import fix_lines, summary_line

    cfg = config.load(args.config)
    if args.follow:
        if args.format != "json" or args.output or args.domains or len(args.connect or [DEFAULT_URI]) != 1:
            raise BadInput("audit --follow takes --format json and at most one --connect, no -o and no names")
    opts = audit.AuditOptions(cfg, args.policy, args.style, tuple(args.domains), args.observe,
                              live_sources(args, cfg), None if args.follow else audit.stderr_progress(),
                              *deadlines(args.timeout, cfg), details=args.details or args.follow)
    if args.follow:
        from .live.follow import follow

        return follow((args.connect or [DEFAULT_URI])[0], opts, _write_record, hook=hook_status_record)
    chunks: list[str] = []
    write = chunks.append if args.output else _write_stdout
    results = _reporting_errors(audit.audit_stream(args.connect or [DEFAULT_URI], opts))
    hosts = emit(RENDERERS[args.format], results, write, time.time)
    if args.output:
        write_output(args.output, "".join(chunks).encode(), [])
    print(summary_line(hosts), file=sys.stderr)
    if args.format == "table":
        for line in fix_lines(hosts, _deciding_options(args)):
            print(line, file=sys.stderr)
    s = summarize(hosts)
    if s.unreachable or s.timed_out:
        return EXIT_ENVIRONMENT
    if s.domain_errors:
        return EXIT_BAD_INPUT
    return EXIT_WORK_FOUND if s.needs_fix else EXIT_OK


def _deciding_options(args) -> list[str]:
    """The options a live verb was given that change a decision, as words for a suggested command."""
    words = [w for opt, value in (("--policy", args.policy), ("--style", args.style), ("--config", args.config),
                                  ("--qemu-build", args.qemu_build), ("--qemu-version", args.qemu_version))
             if value is not None for w in (opt, value)]
    return words + (["--no-host-probe"] if args.no_host_probe else [])


def _write_stdout(text: str) -> None:
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


def _reporting_errors(hosts):
    """The hosts, each unreachable or timed-out one also named on stderr as it comes."""
    for h in hosts:
        if h.error:
            _err(f"{h.uri}: {h.error}")
        yield h


def _watch(args) -> int:
    from .host.connection import deadlines
    from .live.apply import ApplyOptions
    from .live.watch import watch

    cfg = config.load(args.config)
    return watch(args.connect, ApplyOptions(cfg, args.policy, args.style, sources=live_sources(args, cfg),
                                            timeout=deadlines(args.timeout, cfg)[0],
                                            include_managed=args.include_managed))


def _hook(args) -> int:
    from .hook import install

    if args.action == "install":
        lines = install.install(args.hooks_dir, args.mode, args.config, args.legacy, args.digest_dir)
        _unverified_note([DEFAULT_URI])
    elif args.action == "uninstall":
        lines = install.uninstall(args.hooks_dir)
    elif args.format == "json":
        rec = hook_status_record(args.hooks_dir)
        print(json.dumps(rec))
        return EXIT_OK if rec["trusted"] else EXIT_WORK_FOUND
    else:
        installed, lines = install.status(args.hooks_dir)
        print("\n".join(lines))
        return EXIT_OK if installed else EXIT_WORK_FOUND
    print("\n".join(lines))
    return EXIT_OK


def hook_status_record(hooks_dir: str = DEFAULT_HOOKS_DIR) -> dict:
    """`hook status --format json`: the hook as install.status_record finds it, and the local QEMU with
    its last verify pass."""
    from .hook import install
    from .verify.record import local_binary, read_record, record_key

    rec = install.status_record(hooks_dir)
    binary = local_binary()
    rec["qemu"] = None if binary is None else {
        "emulator": binary[0], "version": binary[1], "package": binary[2],
        "verified": read_record().get(record_key(*binary))}
    return rec


def _write_record(record: dict) -> None:
    """One JSON line on stdout at once (a program reads them as they come)."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _unverified_note(uris) -> None:
    """`apply` and `hook install` on a host whose QEMU build was never verified: one line pointing at verify."""
    from .host.connection import is_local
    from .verify.record import unverified_note

    note = unverified_note() if any(is_local(u) for u in uris) else None
    if note:
        _err(note)


def _verify(args) -> int:
    from .verify import run as verify
    from .render import verify as render_verify
    from .verify import record

    cfg = config.load(args.config)
    opts = verify.VerifyOptions(args.emulator, args.connect, args.qemu_build, cfg, args.timeout, args.workers,
                                tuple(args.machine), tuple(args.cpu), args.json,
                                args.record or record.DEFAULT_RECORD,
                                None if args.quiet else lambda msg: print(msg, file=sys.stderr, flush=True))
    outcome = verify.run(opts)
    to_stdout = args.json == "-"
    for line in render_verify.lines(outcome, args.quiet):
        print(line, file=sys.stderr if to_stdout else sys.stdout, flush=True)
    if args.json and not to_stdout:
        write_output(args.json, render_verify.json_document(outcome).encode(), [])
    if outcome.exit_code == EXIT_OK and not outcome.failed:
        note = record.write_record(outcome, opts.record)
        if not args.quiet:
            print(note, file=sys.stderr, flush=True)
    if to_stdout:  # last, so a reader of both streams finds it as the final line
        print(json.dumps(render_verify.report(outcome)), flush=True)
    return outcome.exit_code


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
        _err(f"cannot write the output: {e.strerror}")
        code = EXIT_ENVIRONMENT
    if code == EXIT_ENVIRONMENT:
        try:  # nothing more may reach a closed or full stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
    sys.exit(code)

"""`virtxml-cpu explain`: each domain's effective CPU features with their provenance, and the decision; from
files, or from libvirt's definitions read as audit reads them."""

from __future__ import annotations

import sys

from ..constants import DEFAULT_URI
from ..errors import EXIT_BAD_INPUT, EXIT_OK, BadInput, EnvironmentProblem, shown
from .files import over_files
from .options import EPILOG, file_options
from .output import err


def arguments(sub):
    p = sub.add_parser("explain", help="show effective CPU features and the decision", epilog=EPILOG)
    file_options(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    named = p.add_mutually_exclusive_group()
    named.add_argument("--domain", action="append", default=[], metavar="NAME",
                       help="explain this domain's persistent definition, read from --connect (default "
                            f"{DEFAULT_URI}) with its host facts as audit reads them (repeatable; --domain=NAME "
                            "keeps a name that starts with - a name)")
    named.add_argument("--all-domains", action="store_true", help="every domain on --connect")
    return p


def main(args) -> int:
    if args.domain or args.all_domains:
        if args.files != ["-"]:
            raise BadInput("explain takes files or --domain/--all-domains, not both")
        return domains(args)

    def each(path: str, label: str, host, cfg) -> int:
        from ..core.pipeline import process
        from ..fs.files import read_input

        return show(args, process(read_input(path), label, host, cfg, args.policy, args.style, render=False))
    return over_files(args, each)


def show(args, o) -> int:
    from ..render import explain

    line = json_line(o) if args.format == "json" else explain.table(o, args.verbose) + "\n"
    sys.stdout.write(line + "\n")  # what print() writes, in one write instead of two
    return EXIT_OK


def json_line(o) -> str:
    """explain's JSON line (explain.to_json_line's bytes), the parts a template's clones share rendered once
    and kept by the pipeline's memo: the resolution's for every document with its key, the decision's for
    every document with the same decision."""
    from ..core import pipeline
    from ..render import explain

    shared = pipeline.shared_part(o, "resolution", "json", explain.resolution_json)
    decision = pipeline.shared_part(o, "decision", "json", explain.decision_json)
    return explain.joined(explain.own_json(o), shared, decision)


def domains(args) -> int:
    """explain for libvirt domains: each definition (host/reader.py) with the host facts audit uses for that
    connection, so both say the same; an unknown name is one line and exit 2."""
    from ..core import config
    from ..core.pipeline import process
    from ..host import reader
    from ..core.precedence import timeouts
    from ..host.connection import libvirt_module, open_for_reading
    from ..host.sources import connection_facts
    from .live import live_sources

    libvirt = libvirt_module()
    cfg = config.load(args.config)
    uri = args.connect or DEFAULT_URI
    conn = open_for_reading(uri, timeouts(None, cfg)[0].value)
    status = EXIT_OK
    try:
        host = connection_facts(live_sources(args, cfg), cfg, conn, uri)
        doms, unknown = reader.domains(conn, args.domain)
        for name, message in unknown:
            err(f"{shown(name)}: {message}")
            status = EXIT_BAD_INPUT
        for dom in doms:
            try:
                xml = reader.definition(dom)
            except libvirt.libvirtError as e:  # vanished between the listing and the read
                err(f"{shown(dom.name())}: {e.get_error_message()}")
                status = EXIT_BAD_INPUT
                continue
            o = process(xml, dom.name(), host, cfg, args.policy, args.style, render=False)
            status = max(status, show(args, o))
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    finally:
        conn.close()
    return status

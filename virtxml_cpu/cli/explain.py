"""`virtxml-cpu explain`: each domain's effective CPU features with their provenance, and the decision; from
files, or from libvirt's definitions read as audit reads them."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..constants import DEFAULT_URI
from ..errors import EXIT_BAD_INPUT, EXIT_OK, BadInput, EnvironmentProblem, shown
from .files import over_files
from .options import EPILOG, file_options
from .output import err

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the hook's cold start (see core/memo.py)
    from ..core.pipeline import Decided


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

    from ..core.pipeline import process  # here, once per run, not per file: not when explain is not run
    from ..fs.files import read_input

    show = shower(args)

    def each(path: str, label: str, host, cfg) -> int:
        return show(process(read_input(path), label, host, cfg, args.policy, args.style, render=False))
    return over_files(args, each)


def shower(args) -> Callable[[Decided], int]:
    """show(o) for this run: each Decided's table or JSON line to stdout (the modules it uses imported once
    per run, not per document)."""
    from ..render import explain

    line_of = json_liner()

    def show(o: Decided) -> int:
        line = line_of(o) if args.format == "json" else explain.table(o, args.verbose) + "\n"
        sys.stdout.write(line + "\n")  # what print() writes, in one write instead of two
        return EXIT_OK
    return show


def json_liner() -> Callable[[Decided], str]:
    """json_line, with the modules it uses imported once (a run's, not a document's)."""
    from ..core.pipeline import shared_part
    from ..render import explain

    def json_line(o: Decided) -> str:
        return explain.joined(explain.own_json(o), shared_part(o, "resolution", "json", explain.resolution_json),
                              shared_part(o, "decision", "json", explain.decision_json))
    return json_line


def json_line(o: Decided) -> str:
    """explain's JSON line (explain.to_json_line's bytes), the parts a template's clones share rendered once
    and kept by the pipeline's memo: the resolution's for every document with its key, the decision's for
    every document with the same decision."""
    return json_liner()(o)


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
    show = shower(args)
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
            status = max(status, show(o))
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    finally:
        conn.close()
    return status

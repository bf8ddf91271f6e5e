#!/usr/bin/env python3
"""Where `audit --format json`'s time goes beyond its floor (bench/audit_processes.py's: list the domains
and read each definition with libvirt-python), over the same test-driver domains.

Start-up, in fresh processes (best of R): the interpreter with libvirt imported (the floor's own start),
then each step audit takes before its first domain, timed in order in one child: the package's imports for
the parser, the parser built and the arguments read, the config, the audit verb's imports, the connection
and the host's facts. Per domain, in one process (best of R passes over N domains, us a domain): the floor's
XMLDesc loop, then audit's own steps, each alone, and the whole of a host's audit (audit_connection, its
listings included) and its JSON records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from audit_processes import node_file  # noqa: E402 - the same domains as the whole-process bench

STARTUP = r"""
import sys, time, json
t = [("interpreter", time.perf_counter())]
import libvirt
t.append(("import libvirt (the floor's)", time.perf_counter()))
from virtxml_cpu.cli import command
t.append(("import the verbs (cli.command)", time.perf_counter()))
args = command.build_parser().parse_args(["audit", "--connect", sys.argv[1], "--format", "json"])
t.append(("build the parser, read the arguments", time.perf_counter()))
from virtxml_cpu.core import config
cfg = config.load(args.config)
t.append(("load the config", time.perf_counter()))
from virtxml_cpu.live import audit
from virtxml_cpu.render.formats import RENDERERS, emit
t.append(("import audit and its renderers", time.perf_counter()))
from virtxml_cpu.host.connection import open_for_reading
from virtxml_cpu.host.sources import connection_facts
conn = open_for_reading(sys.argv[1])
t.append(("connect (a thread, keepalive)", time.perf_counter()))
connection_facts(None, cfg, conn, sys.argv[1])
t.append(("the host's facts", time.perf_counter()))
print(json.dumps([(name, b - a) for (_, a), (name, b) in zip(t, t[1:])]))
"""


def startup(uri: str, rounds: int) -> list[tuple[str, float]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    best: dict[str, float] = {}
    order: list[str] = []
    for _ in range(rounds + 1):  # the first fills the bytecode caches
        out = subprocess.run([sys.executable, "-c", STARTUP, uri], capture_output=True, text=True, env=env,
                             cwd=ROOT, check=True).stdout
        for name, seconds in json.loads(out):
            if name not in best:
                order.append(name)
            best[name] = min(best.get(name, seconds), seconds)
    return [(name, best[name]) for name in order]


def per_domain(uri: str, n: int, rounds: int) -> list[tuple[str, float]]:
    sys.path.insert(0, str(ROOT))
    import libvirt

    from virtxml_cpu.core import domain, pipeline
    from virtxml_cpu.core.config import Config
    from virtxml_cpu.host import reader
    from virtxml_cpu.host.connection import open_for_reading
    from virtxml_cpu.host.sources import connection_facts
    from virtxml_cpu.live import audit
    from virtxml_cpu.render.formats import RENDERERS, emit
    from virtxml_cpu.xml import parse as xml_parse

    cfg = Config()
    conn = open_for_reading(uri)
    host = connection_facts(None, cfg, conn, uri)
    opts = audit.AuditOptions(cfg)
    doms = conn.listAllDomains()
    xmls = [reader.definition(d, persistent=True) for d in doms]
    roots = [xml_parse.parse_domain_lean(x, d.name()) for x, d in zip(xmls, doms)]
    docs = [pipeline.read(x, d.name(), render=False) for x, d in zip(xmls, doms)]
    result = audit.audit_connection(uri, conn, opts, host)

    def floor():
        for d in conn.listAllDomains():
            d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)

    def each(fn, *items):
        return lambda: [None for _ in map(fn, *items)]

    stages = [
        ("floor: list + XMLDesc(INACTIVE)", floor),
        ("reader.definition (XMLDesc, the flags)", each(lambda d: reader.definition(d, persistent=True), doms)),
        ("parse_domain_lean (checks + parse)", each(xml_parse.parse_domain_lean, xmls, [d.name() for d in doms])),
        ("domain.extract (the facts)", each(domain.extract, roots)),
        ("pipeline.decided (memo warm)", each(lambda doc: pipeline.decided(doc, host, cfg), docs)),
        ("audit_one (fetch, process, row)", each(lambda d: audit.audit_one(uri, d, host, opts), doms)),
        ("JSON records of the rows", lambda: emit(RENDERERS["json"], [result], lambda _s: None, time.time)),
        ("audit_connection (a host, whole)", lambda: audit.audit_connection(uri, conn, opts, host)),
    ]
    out = []
    for name, fn in stages:
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        out.append((name, best / n))
    conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="domains (default 2000)")
    ap.add_argument("-r", "--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        empty, full = Path(tmp) / "node-0.xml", Path(tmp) / f"node-{args.n}.xml"
        node_file(empty, 0)
        node_file(full, args.n)
        steps = startup(f"test://{empty}", args.rounds)
        print(f"start-up, best of {args.rounds} processes (ms):")
        for name, seconds in steps:
            print(f"  {name:<40} {seconds * 1e3:7.1f}")
        print(f"  {'beyond the floor (all after libvirt)':<40} {sum(s for _, s in steps[1:]) * 1e3:7.1f}")
        print(f"{args.n} domains, best of {args.rounds} passes (us a domain):")
        for name, seconds in per_domain(f"test://{full}", args.n, args.rounds):
            print(f"  {name:<40} {seconds * 1e6:7.1f}")


if __name__ == "__main__":
    main()

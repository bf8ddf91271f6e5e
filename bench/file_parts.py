#!/usr/bin/env python3
"""Where a document's time goes in `rewrite --check` and `explain --format json`, stage by stage, in one
process: each stage timed over the same documents as bench/file_cost.py (clones of the bundled fixtures and
examples), best of R passes, next to the floor's own stages (open + read, lxml parse, serialize).

The stages are the pipeline's own functions called as the CLI calls them; a stage's time is measured alone
(with the stages before it done outside the timer), so the sum is close to, not exactly, the whole. Last,
each command whole in this process (cli.main over every document, less over one: its start-up), memo warm:
what it costs beyond the sum of its stages is the command's own loop.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in (ROOT / "tests" / "fixtures", ROOT / "examples") for p in d.glob("*.xml"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--docs", type=int, default=2000)
    ap.add_argument("-r", "--runs", type=int, default=7)
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose virtxml_cpu is timed (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    import tempfile

    from lxml import etree

    from virtxml_cpu.core import domain, pipeline
    from virtxml_cpu.core.config import Config
    from virtxml_cpu.fs.files import read_input
    from virtxml_cpu.host.sources import HostSources, NotAsked, assemble
    from virtxml_cpu import cli
    from virtxml_cpu.cli import explain as cli_explain

    from virtxml_cpu.xml import parse as xml_parse

    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.docs):  # the same clones as file_cost.py
            text_ = SOURCES[i % len(SOURCES)].read_bytes()
            text_ = re.sub(rb"<name>([^<]*)</name>", lambda m: b"<name>%s-%d</name>" % (m.group(1), i), text_, 1)
            text_ = re.sub(rb"<uuid>[^<]*</uuid>", b"<uuid>%s</uuid>" % str(uuid.UUID(int=i)).encode(), text_, 1)
            dst = Path(tmp) / f"d{i:05d}.xml"
            dst.write_bytes(text_)
            files.append(str(dst))
        datas = [read_input(f) for f in files]
        host = assemble(HostSources(build="upstream", config=Config(), kvm=NotAsked("--no-host-probe")))
        cfg = Config()
        floor_parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
        trees = [etree.fromstring(d, floor_parser) for d in datas]
        roots = [xml_parse.parse_domain_lean(d, f) for d, f in zip(datas, files)]
        docs = [pipeline.read(d, f, render=False) for d, f in zip(datas, files)]
        outcomes = [pipeline.decided(doc, host, cfg) for doc in docs]
        json_line = cli_explain.json_liner()  # the shell's: the parts clones share kept in the memo

        def read_plain(f):
            with open(f, "rb") as fh:
                return fh.read()

        stages = [  # each result dropped as made, as the commands drop theirs (kept, they cost the collector)
            ("floor", "open + read", lambda: _each(read_plain, files)),
            ("floor", "lxml parse", lambda: _each(lambda d: etree.fromstring(d, floor_parser), datas)),
            ("floor", "lxml serialize", lambda: _each(etree.tostring, trees)),
            ("both", "read_input (checked read)", lambda: _each(read_input, files)),
            ("both", "checks before parsing", lambda: _each(xml_parse.check_raw, datas, files)),
            ("both", "parse_domain_lean (checks + parse)", lambda: _each(xml_parse.parse_domain_lean, datas, files)),
            ("both", "domain.extract (the facts)", lambda: _each(domain.extract, roots)),
            ("both", "pipeline.decided (memo warm)", lambda: _each(lambda doc: pipeline.decided(doc, host, cfg), docs)),
            ("explain", "the JSON line", lambda: _each(json_line, outcomes)),
        ]
        verbs = {"--check": ["rewrite", "--check", "-q"], "explain": ["explain", "--format", "json"]}
        common = ["--no-host-probe", "--qemu-build", "upstream"]
        for who, verb in verbs.items():  # the whole command in this process, its start-up taken off
            stages.append((who, "the command, memo warm (cli.main)", _marginal(cli.main, verb + common, files)))
        print(f"{args.docs} documents, best of {args.runs} passes, us per document ({pipeline.__file__})")
        for who, name, fn in stages:
            best = min(_time(fn) for _ in range(args.runs)) / args.docs * 1e6
            print(f"  {who:<8} {name:<38} {best:7.1f}")


def _each(fn, *items) -> None:
    for _ in map(fn, *items):
        pass


def _marginal(main, argv: list[str], files: list[str]):
    """A stage running the whole command over every file in this process, stdout thrown away; it returns
    the time of the same command over one file, which _time takes off (the start-up: parser, config, host)."""
    import contextlib
    import os

    def run() -> float:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            t = time.perf_counter()
            main(argv + files[:1])
            one = time.perf_counter() - t
            main(argv + files)
        return one
    return run


def _time(fn) -> float:
    """How long fn() takes, less the seconds it returns (a part it timed that is not the stage's)."""
    t = time.perf_counter()
    extra = fn()
    return time.perf_counter() - t - (extra if isinstance(extra, float) else 0.0)


if __name__ == "__main__":
    main()

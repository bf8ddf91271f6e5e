#!/usr/bin/env python3
"""Deciding a document whose configuration was decided before (the memo warm: a fleet's clones), in
process, against a floor measured in the same run: the lean parse and fact extraction every decision
needs anyway.

  floor:  domain.extract(parse_domain_lean(...)) of each fixture and example
  warm:   pipeline.process(..., render=False) + explain's JSON line of the same documents, after one pass

Best of R repeats of N passes over the documents; prints microseconds per document and warm - floor (what
the memo's keys, lookups and the JSON line cost on top of reading).
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import recorded_host  # noqa: E402
from virtxml_cpu.core import domain  # noqa: E402
from virtxml_cpu.core.config import Config  # noqa: E402
from virtxml_cpu.core.hostfacts import combine  # noqa: E402
from virtxml_cpu.core.pipeline import process  # noqa: E402
from virtxml_cpu.xml.parse import parse_domain_lean  # noqa: E402

from virtxml_cpu.cli.explain import json_liner  # noqa: E402 - the shell's: explain's parts kept for clones

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="passes over the documents per repeat")
    ap.add_argument("-r", type=int, default=5, help="repeats (the best is reported)")
    args = ap.parse_args()
    host = combine([recorded_host()])
    docs = [p.read_bytes() for d in (ROOT / "tests" / "fixtures", ROOT / "examples") for p in sorted(d.glob("*.xml"))]

    def floor():
        for d in docs:
            domain.extract(parse_domain_lean(d, "x"))

    json_line = json_liner()

    def warm():
        for d in docs:
            json_line(process(d, "x", host, Config(), render=False))

    warm()
    per = args.n * len(docs)
    f = min(timeit.repeat(floor, number=args.n, repeat=args.r)) / per * 1e6
    w = min(timeit.repeat(warm, number=args.n, repeat=args.r)) / per * 1e6
    print(f"floor (lean parse + facts): {f:.1f} us per document")
    print(f"warm decide + JSON line:    {w:.1f} us per document = {w / f:.2f}x the floor; "
          f"{w - f:.1f} us on top of reading")


if __name__ == "__main__":
    main()

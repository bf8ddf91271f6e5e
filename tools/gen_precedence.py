#!/usr/bin/python3
"""The docs' lists of which value wins, written from virtxml_cpu/core/precedence.py (its tuples are the one
statement of each order): docs/configuration.md's table of settings and docs/qemu-build.md's sources of host
facts, each between its two marker lines.

    python3 tools/gen_precedence.py           # rewrite the blocks in docs/
    python3 tools/gen_precedence.py --check   # exit 1, naming the page, when a block differs

tests/unit/core/test_precedence.py checks the pages the same way (`pytest --regen` rewrites them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from virtxml_cpu.core import precedence  # noqa: E402

BEGIN = "<!-- {name}: written by tools/gen_precedence.py from virtxml_cpu/core/precedence.py -->"
END = "<!-- end of {name} -->"


def _source(s: precedence.Source) -> str:
    if s.default is None:
        return s.title
    value = f"{s.default:g}" if isinstance(s.default, float) else s.default
    return f"{s.title}, `{value}`"


def settings_table() -> str:
    """Every setting with more than one source, and its sources first to last (precedence.RULES)."""
    rows = [f"| {name} | {'; '.join(_source(s) for s in order)} |" for name, order in precedence.RULES.items()]
    return "\n".join(["| setting | its sources, first to last: the first that gives a value wins |", "| --- | --- |",
                      *rows])


def host_fact_sources() -> str:
    """The sources of the QEMU build and release, first to last (precedence.HOST_FACT_SOURCES)."""
    return "\n".join(f"{n}. **{s.title}**: {s.what}." for n, s in enumerate(precedence.HOST_FACT_SOURCES, 1))


BLOCKS = {"settings precedence": ("docs/configuration.md", settings_table),
          "host fact sources": ("docs/qemu-build.md", host_fact_sources)}


def rewritten(text: str, name: str, body: str) -> str:
    """`text` with the block `name` (its marker lines kept) holding `body`; ValueError when a marker is missing."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    head, found, rest = text.partition(begin + "\n")
    _old, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"no block {name!r} ({begin} ... {end})")
    return f"{head}{begin}\n{body}\n{end}{tail}"


def pages(root: Path = ROOT) -> dict[Path, str]:
    """Each page with a block, as its text should be."""
    out: dict[Path, str] = {}
    for name, (page, make) in BLOCKS.items():
        path = root / page
        out[path] = rewritten(out.get(path) or path.read_text(), name, make())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only say which page differs (exit 1)")
    args = p.parse_args(argv)
    stale = [path for path, text in pages().items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)}: differs from virtxml_cpu/core/precedence.py; run tools/gen_precedence.py")
        return 1 if stale else 0
    for path, text in pages().items():
        if path in stale:
            path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

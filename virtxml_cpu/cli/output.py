"""What every verb writes besides its records: one-line errors, and stdout written as it comes."""

from __future__ import annotations

import json
import sys

from ..errors import shown, shown_lines


def err(msg: str) -> None:
    print(f"virtxml-cpu: {shown(msg)}", file=sys.stderr)  # one line, whatever a name in it holds


def write_stdout(text: str) -> None:
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


def write_record(record: dict) -> None:
    """One JSON line on stdout at once (a program reads them as they come)."""
    write_stdout(json.dumps(record) + "\n")


def for_stdout(diff: str) -> str:
    """A diff escaped for a terminal (docs/files.md, "Diffs on a terminal"); byte-exact into a pipe or a file,
    where `patch` reads it."""
    return shown_lines(diff) if sys.stdout.isatty() else diff

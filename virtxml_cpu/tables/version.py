"""A version as the tables write it: a QEMU or libvirt release or a machine type's compat level, X.Y[.Z] held as a
tuple of integers (compared as tuples), its one grammar and spelling, and the one check of a release window.

Whether a row holds for a release nobody named is the caller's choice, written at each call: `ANY` (some
release has it, so it may apply: a machine whose chain holds a row comes from a QEMU that had it) or
`AS_CURRENT` (read as the current release: only a window still open holds).
"""

from __future__ import annotations

Version = tuple[int, ...]  # (7, 2) or (7, 2, 22)

ANY = "any"
AS_CURRENT = "as current"


def is_release(text: str) -> bool:
    """X.Y or X.Y.Z, ASCII digits only ('٣.٠' and '7.2\\n' are not)."""
    parts = text.split(".")
    return 2 <= len(parts) <= 3 and all(p.isascii() and p.isdigit() for p in parts)


def parse_version(text: str) -> Version:
    """'7.2.22' -> (7, 2, 22); anything is_release refuses is a ValueError."""
    if not is_release(text):
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in text.split("."))


def format_version(v: Version | None) -> str:
    """(7, 2, 22) -> '7.2.22'; '?' for none."""
    return ".".join(str(p) for p in v) if v else "?"


def in_window(release: Version | None, since: Version | None, until: Version | None, unknown: str) -> bool:
    """Whether `release` lies in [since, until) (None: open on that side); an unknown release as `unknown` says
    (ANY: it may be any, so yes; AS_CURRENT: yes while the window is still open)."""
    if release is None:
        if unknown not in (ANY, AS_CURRENT):
            raise ValueError(f"unknown={unknown!r}: ANY or AS_CURRENT")
        return unknown == ANY or until is None
    return (since is None or release >= since) and (until is None or release < until)

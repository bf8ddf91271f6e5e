"""Answers kept per holder object: the caches that let a fleet's many similar domains share work.

Keyed by the holder's identity (a QEMU flavour, a host's facts, a resolution's features) plus a key;
the entry holds the holder itself, so its id cannot be reused by another object while the answer is
kept. Bounded: when full, it starts over (answers are cheap to recompute, never wrong to drop).
"""

from __future__ import annotations

MISSING = object()


class Kept:
    def __init__(self, limit: int = 4096):
        self._entries: dict[tuple, tuple] = {}
        self._limit = limit

    def get(self, holder, key: tuple = ()):
        """The kept answer, or MISSING."""
        hit = self._entries.get((id(holder),) + key)
        return hit[1] if hit is not None and hit[0] is holder else MISSING

    def put(self, holder, key: tuple, value):
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[(id(holder),) + key] = (holder, value)
        return value

"""Answers kept by value: the memo the pipeline keeps (pipeline.MEMO), so that a fleet's many clones of a
few templates share one resolution, decision and encoded JSON.

Keys are the hashable facts that decide an answer, never an object's identity: equal facts, the same
answer, whoever built them. Bounded in entries and in what they hold: when either is full, it starts over
(answers are cheap to recompute, never wrong to drop). The second bound is for the long-lived `watch`: a
domain's author who redefines it with ever new 4 MiB definitions made it keep about 8 MiB each, up to
16 GiB before the entry count started it over. FrozenDict makes the host's mappings such facts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the hook's cold start ~2 ms where lxml does not import it (Debian's python3-lxml)
    from typing import TypeVar

    T = TypeVar("T")


BUDGET = 64 * 1024 * 1024  # bytes of the documents behind the answers kept (a fleet of 4096 10 KiB clones: 40 MiB)


class Memo:
    def __init__(self, limit: int = 4096, budget: int = BUDGET):
        self._entries: dict[Hashable, object] = {}
        self._limit = limit
        self._budget = budget
        self._spent = 0

    def get(self, key: Hashable, compute: Callable[[], T], cost: int = 0) -> T:
        """The answer kept for `key`, or compute() kept under it; `cost`: the size of the document it is
        about (its key and answer hold text of it)."""
        try:
            return self._entries[key]  # type: ignore[return-value]
        except KeyError:
            pass
        if len(self._entries) >= self._limit or self._spent + cost > self._budget:
            self._entries.clear()
            self._spent = 0
        value = self._entries[key] = compute()
        self._spent += cost
        return value

    def find(self, key: Hashable):
        """The answer kept for `key`, or None (no answer kept is None)."""
        return self._entries.get(key)

    def __len__(self) -> int:
        return len(self._entries)


class FrozenDict(dict):
    """A mapping that is a value: hashable (its hash computed once, as frozenset's is), never changed."""

    __slots__ = ("_hash",)

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(frozenset(self.items()))
            return self._hash

    def __reduce__(self):
        return FrozenDict, (dict(self),)

    def _refuse(self, *_args, **_kwargs):
        raise TypeError("a FrozenDict is a value: it is never changed (build a new one)")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore


class HashedTuple(tuple):
    """A tuple whose hash is worked out once (a host's CPU model and its features, hashed per domain)."""

    def __hash__(self) -> int:
        try:
            return self.__dict__["hash"]
        except KeyError:
            h = self.__dict__["hash"] = tuple.__hash__(self)
            return h


def frozen(value):
    """`value` usable in a key, its hash worked out once: a dict as a FrozenDict, a tuple as a HashedTuple (kept as
    it is when it is one already)."""
    kind = type(value)
    return FrozenDict(value) if kind is dict else HashedTuple(value) if kind is tuple else value

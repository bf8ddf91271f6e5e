"""`re.compile` deferred to a pattern's first use, for the rule tables: they hold a dozen patterns and the
hook's prepare path reads about four (compiling them all at import cost it a millisecond). A table module
imports this as `re`; its rows stay as written."""

from __future__ import annotations

import re as _re
from re import ASCII, DOTALL, IGNORECASE  # noqa: F401 - the flags the tables and modules use

__all__ = ["ASCII", "DOTALL", "IGNORECASE", "Pattern", "compile"]


class Pattern:
    """A regular expression compiled when first matched; otherwise what re.compile returns."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags, self._compiled = pattern, flags, None

    def _re(self) -> _re.Pattern:
        if self._compiled is None:
            self._compiled = _re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, string: str, *args):
        return self._re().search(string, *args)

    def match(self, string: str, *args):
        return self._re().match(string, *args)

    def fullmatch(self, string: str, *args):
        return self._re().fullmatch(string, *args)

    def __getattr__(self, name: str):  # groupindex, finditer, ...
        return getattr(self._re(), name)

    def __eq__(self, other) -> bool:
        return isinstance(other, Pattern) and (self.pattern, self.flags) == (other.pattern, other.flags)

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"lazyre.compile({self.pattern!r}, {self.flags})"


def compile(pattern: str, flags: int = 0) -> Pattern:  # noqa: A001 - re's own name, as the tables call it
    return Pattern(pattern, flags)

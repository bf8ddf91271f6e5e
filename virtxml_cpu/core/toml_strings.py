"""TOML 1.0's one-line strings as toml_check reads them: a basic string with its escapes, a literal one as
written. Each takes the text and the index of its opening quote and returns the string and the index after its
closing quote, or raises BadString (a string is on one line: the caller names the line)."""

from __future__ import annotations

from ..errors import shown

_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_HEX = frozenset("0123456789abcdefABCDEF")
_UNCLOSED = "a string without its closing quote on its line"


class BadString(ValueError):
    """Why a string is not one TOML 1.0 has; one line."""


def basic(s: str, i: int) -> tuple[str, int]:
    out = []
    i += 1
    while True:
        c = s[i:i + 1]
        if c in ("", "\n", "\r"):
            raise BadString(_UNCLOSED)
        i += 1
        if c == '"':
            return "".join(out), i
        if c != "\\":
            out.append(c)
            continue
        e = s[i:i + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 1
            continue
        width = {"u": 4, "U": 8}.get(e)
        digits = s[i + 1:i + 1 + width] if width else ""
        if not width or len(digits) != width or not set(digits) <= _HEX:
            raise BadString(f"an escape TOML 1.0 does not have (\\{shown(e)})")
        code = int(digits, 16)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            raise BadString(f"\\{e}{digits} is no Unicode scalar value")
        out.append(chr(code))
        i += 1 + width


def literal(s: str, i: int) -> tuple[str, int]:
    end = s.find("'", i + 1)
    line_end = min((x for x in (s.find("\n", i), s.find("\r", i)) if x >= 0), default=len(s))
    if end < 0 or end > line_end:
        raise BadString(_UNCLOSED)
    return s[i + 1:end], end + 1

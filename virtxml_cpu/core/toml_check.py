"""The config's TOML, read against TOML 1.0's grammar before any TOML reader sees it.

The readers a Python may have disagree: toml 0.10 (Debian 11's and 12's python3-toml) takes a vertical tab,
form feed, NBSP, U+2028, NEL or U+3000 for a blank, a bare CR inside a string and `1.e1` for a number, and
the plain reader a header without its `]`, where TOML 1.0 and tomllib refuse each. So that a file means one
thing, or is refused, on every host, `read` takes the part of TOML 1.0 a config is written in (comments,
`[table]` headers, bare, quoted and dotted keys, one-line strings, integers, floats, booleans, inline tables,
with TOML's rules against defining a key or table twice) and refuses the rest in one line: whatever TOML
forbids, and what no setting takes or a reader misreads (arrays, dates, multi-line strings, escapes in keys,
nan). A number is converted only once it is known to be at most MAX_NUMBER characters long.
"""

from __future__ import annotations

from ..errors import shown
from ..tables import lazyre
from . import toml_strings

MAX_NUMBER = 32  # characters: "86400" is five; int() of 5,000 digits is a ValueError on 3.11+
MAX_DEPTH = 8  # inline tables within inline tables

BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DEC = r"[+-]?(?:0|[1-9](?:_?[0-9])*)"
_ZERO_PREFIXABLE = r"[0-9](?:_?[0-9])*"
_INTEGER = lazyre.compile(_DEC)
_FLOAT = lazyre.compile(r"%s(?:\.%s(?:[eE][+-]?%s)?|[eE][+-]?%s)|[+-]?inf"
                        % (_DEC, _ZERO_PREFIXABLE, _ZERO_PREFIXABLE, _ZERO_PREFIXABLE))
_DATE = lazyre.compile(r"[0-9]{2}:|[0-9]{4}-")
_TOKEN_END = frozenset(" \t\r\n#,}]")
_INLINE_MARKS = frozenset(",{}[]=#'\"\\")


class NotToml(ValueError):
    """Where (`line N: `) and why the text is not TOML this config can be written in; one line."""


def read(text: str) -> dict:
    """The tables and values of `text` (tomllib's reading of it), or NotToml."""
    return _Reader(text).document()


def _char(c: str) -> str:
    return repr(c) if c.isprintable() and c not in " \t" else "U+%04X" % ord(c)


class _Reader:
    __slots__ = ("s", "i", "data", "explicit", "pending", "frozen")

    def __init__(self, text: str):
        self.s, self.i, self.data = text, 0, {}
        self.explicit: set = set()  # tables a header declared, or dotted keys of an earlier section made
        self.pending: set = set()  # tables dotted keys of this section made: no header may declare them
        self.frozen: set = set()  # inline tables: nothing may be added to them

    def fail(self, why: str):
        raise NotToml(f"line {self.s.count(chr(10), 0, self.i) + 1}: {why}")

    def peek(self) -> str:
        return self.s[self.i:self.i + 1]

    def document(self) -> dict:
        self.controls()
        s, header = self.s, ()
        while True:
            self.blanks()
            if self.i >= len(s):
                return self.data
            c = s[self.i]
            if c == "[":
                if s.startswith("[[", self.i):
                    self.fail("an array of tables ([[...]]), which no setting is")
                self.i += 1
                self.blanks()
                key = self.key()
                self.blanks()
                if self.peek() != "]":
                    self.fail("a table header without its closing ']'")
                self.i += 1
                header = self.declare(key)
            elif c not in "#\r\n":
                key = self.key_and_equals()
                self.assign(header, key, self.value(0))
            self.end_of_line()

    def controls(self) -> None:
        """TOML allows no control character but a tab, and a CR only before a LF, anywhere (comments too)."""
        for n, c in enumerate(self.s):
            if (c < " " and c not in "\t\n" or c == "\x7f") and not (c == "\r" and self.s.startswith("\n", n + 1)):
                self.i = n
                self.fail(f"control character {_char(c)}, which TOML allows nowhere")

    def found(self) -> str:
        c = self.peek()
        return _char(c) if c not in ("", "\n", "\r") else "the end of the line"

    def blanks(self) -> None:
        s, i = self.s, self.i
        while i < len(s) and s[i] in " \t":
            i += 1
        self.i = i

    def end_of_line(self) -> None:
        self.blanks()
        s = self.s
        if self.peek() == "#":
            end = s.find("\n", self.i)
            self.i = len(s) if end < 0 else end
            if s[self.i - 1:self.i] == "\r":
                self.i -= 1
        if self.i >= len(s):
            return
        if s.startswith("\n", self.i):
            self.i += 1
        elif s.startswith("\r\n", self.i):
            self.i += 2
        else:
            self.fail(f"expected the end of the line, found {self.found()} (TOML's blanks are spaces and tabs)")

    def key_and_equals(self) -> tuple:
        """A key and the `=` after it, blanks around it taken: a key/value pair's left side."""
        key = self.key()
        self.blanks()
        if self.peek() != "=":
            self.fail(f"expected '=' after the key, found {self.found()}")
        self.i += 1
        self.blanks()
        return key

    def key(self) -> tuple:
        parts = [self.simple_key()]
        while True:
            at = self.i
            self.blanks()
            if self.peek() != ".":
                self.i = at
                return tuple(parts)
            if self.i != at or self.s[self.i + 1:self.i + 2] in (" ", "\t"):
                self.fail("blanks around a dot in a key, which toml 0.10 misreads: write hook.mode")
            self.i += 1
            parts.append(self.simple_key())

    def simple_key(self) -> str:
        c = self.peek()
        if c == '"':
            if "\\" in self.s[self.i:self.s.find('"', self.i + 1)]:
                self.fail("an escape in a quoted key, which toml 0.10 keeps as written: write the key plainly")
            return self.basic()
        if c == "'":
            return self.literal()
        start, s = self.i, self.s
        while self.i < len(s) and s[self.i] in BARE_KEY:
            self.i += 1
        if self.i == start:
            self.fail(f"expected a key, found {self.found()}")
        return s[start:self.i]

    def value(self, depth: int):
        s, c = self.s, self.peek()
        if c == '"' or c == "'":
            if s.startswith(c * 3, self.i):
                self.fail("a multi-line string, which toml 0.10 misreads: write each value on one line")
            return self.basic() if c == '"' else self.literal()
        if c == "{":
            return self.inline_table(depth + 1)
        if c == "[":
            self.fail("an array, which no setting takes")
        start = self.i
        while self.i < len(s) and s[self.i] not in _TOKEN_END:
            self.i += 1
        token = s[start:self.i]
        if token in ("true", "false"):
            return token == "true"
        if not token:
            self.fail(f"expected a value, found {self.found()}")
        self.i = start
        if len(token) > MAX_NUMBER:
            self.fail(f"a number of more than {MAX_NUMBER} characters")
        if token[:2] in ("0x", "0o", "0b"):
            self.fail("a hexadecimal, octal or binary number, which toml 0.10 misreads: write it in decimal")
        if _INTEGER.fullmatch(token):
            value = int(token.replace("_", ""))
        elif _FLOAT.fullmatch(token):
            value = float(token.replace("_", ""))
        elif _DATE.match(token):
            self.fail("a date or time, which no setting takes")
        elif token.lstrip("+-") == "nan":
            self.fail("nan, which no setting takes")
        else:
            self.fail(f"'{shown(token)}' is not a TOML value (a string needs quotes; numbers as TOML writes them)")
        self.i += len(token)
        return value

    def basic(self) -> str:
        return self.string(toml_strings.basic)

    def literal(self) -> str:
        return self.string(toml_strings.literal)

    def string(self, read) -> str:
        """A one-line string from its opening quote; a bad one fails on its line."""
        try:
            text, self.i = read(self.s, self.i)
        except toml_strings.BadString as e:
            self.fail(str(e))
        return text

    def inline_table(self, depth: int) -> dict:
        if depth > MAX_DEPTH:
            self.fail("inline tables nested too deeply")
        self.i += 1
        table: dict = {}
        frozen: set = set()
        self.blanks()
        if self.peek() == "}":
            self.i += 1
            return table
        while True:
            key = self.key_and_equals()
            at = self.i
            value = self.value(depth)
            if isinstance(value, str) and _INLINE_MARKS & set(self.s[at + 1:self.i - 1]):
                self.i = at
                self.fail("a string in an inline table holding one of , { } [ ] = # ' \" \\, which toml 0.10 "
                          "misreads: write the table as [hook]")
            if any(key[:n] in frozen for n in range(1, len(key) + 1)):
                self.fail("adds to an inline table, which TOML forbids")
            nest = self.nest(table, key[:-1])
            if key[-1] in nest:
                self.fail(f"sets {self.dotted(key)} twice")
            nest[key[-1]] = value
            if isinstance(value, dict):
                frozen.add(key)
            self.blanks()
            c = self.peek()
            self.i += 1
            if c == "}":
                return table
            if c != ",":
                self.i -= 1
                self.fail(f"expected ',' or '}}' in an inline table (on one line), found {self.found()}")
            self.blanks()

    def declare(self, key: tuple) -> tuple:
        """A `[table]` header: a table no header declared before and no dotted key or inline table made."""
        self.explicit |= self.pending
        self.pending.clear()
        if key in self.explicit or any(key[:n] in self.frozen for n in range(1, len(key) + 1)):
            self.fail(f"declares the table [{self.dotted(key)}] twice")
        self.explicit.add(key)
        self.nest(self.data, key)
        return key

    def assign(self, header: tuple, key: tuple, value) -> None:
        for n in range(1, len(key)):
            if header + key[:n] in self.explicit:
                self.fail(f"a dotted key reopens the table [{self.dotted(header + key[:n])}]")
            self.pending.add(header + key[:n])
        parent = header + key[:-1]
        if any(parent[:n] in self.frozen for n in range(1, len(parent) + 1)):
            self.fail("adds to an inline table, which TOML forbids")
        nest = self.nest(self.data, parent)
        if key[-1] in nest:
            self.fail(f"sets {self.dotted(header + key)} twice")
        nest[key[-1]] = value
        if isinstance(value, dict):
            self.frozen.add(header + key)

    def nest(self, table: dict, key: tuple) -> dict:
        for part in key:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                self.fail("makes a table of a key that holds a value")
        return table

    @staticmethod
    def dotted(key: tuple) -> str:
        return ".".join(k if k and set(k) <= BARE_KEY else '"%s"' % shown(k) for k in key)

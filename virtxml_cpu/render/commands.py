"""Commands suggested to a person, made here only: every word shell-quoted, the domain names after `--`.

A line shown here runs as shown in a POSIX shell and reaches exactly the names in it: `--` ends the
options, so a name such as `--all` or `--connect=qemu+ext:?command=...` is a name; a name with shell
syntax (`web01;sh .p;#`, spaces, quotes) is one quoted word. A word holding a character a terminal would
act on (a control, a bidi override, a blank other than the space) is written as
`"$(printf '%b' '...')"`: the format is fixed and the name is data, those bytes written as `\\0ooo`
escapes, so a name that starts with `-` or holds `%` or a backslash is never read as an option or a
format; dash, bash, zsh (native and as sh), mksh and busybox sh read back the same bytes (a test runs
each). A libvirt name never holds a newline, which `$(...)` would strip at the end: one there is written
inside single quotes instead, exact but on a line of its own.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

PROGRAM = "virtxml-cpu"


def word(text: str) -> str:
    """One shell word that is `text` when the shell reads it: the one function every suggested command is
    quoted by (the hook's refusal too). Printable whatever `text` holds, but for a trailing newline."""
    if text.isprintable():
        return shlex.quote(text)
    body = text.rstrip("\n")
    tail = shlex.quote(text[len(body):]) if len(body) < len(text) else ""
    data = "".join(c if c.isprintable() and c not in "'\\" else
                   "".join(f"\\0{b:03o}" for b in _utf8(c)) for c in body)
    return (f"\"$(printf '%b' '{data}')\"" if body else "") + tail


def _utf8(c: str) -> bytes:
    """The bytes a character stands for: an undecodable byte of argv (surrogateescape) is that byte."""
    try:
        return c.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no argv or listing gives
        return c.encode("utf-8", "surrogatepass")


def line(args: Sequence[str], names: Iterable[str] = ()) -> str:
    """`virtxml-cpu ARGS -- NAMES`, each word quoted; `--` only when there are names."""
    names = list(names)
    return " ".join(word(w) for w in [PROGRAM, *args, *(["--", *names] if names else [])])


def apply_fix(uri: str, names: Iterable[str], options: Sequence[str] = ()) -> str:
    """The `apply` that fixes these domains of this host (it shows each diff and asks before defining)."""
    return line(["apply", "--connect", uri, *options], names)

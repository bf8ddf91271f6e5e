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

from ..tables import lazyre
from ..tables.orchestrators import KUBEVIRT_PATCH

PROGRAM = "virtxml-cpu"
_DNS_LABEL = lazyre.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = lazyre.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


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


def stack_command(stack: str | None, domain: str | None) -> str | None:
    """The command that turns the bit on in the stack's own terms, where the stack has one and the domain
    says enough to build it; None otherwise. KubeVirt: virt-launcher names the domain NAMESPACE_NAME
    (VMINamespaceKeyFunc; a namespace is a DNS label and holds no underscore, so the first one splits) and
    its metadata holds only the VMI's uid; the VirtualMachine has the VMI's name. Both parts must be what
    Kubernetes allows (a DNS label, a DNS subdomain), so no domain name can make the command reach anything
    else; a name that is not is given no command."""
    if stack != "KubeVirt" or not domain or "_" not in domain:
        return None
    namespace, name = domain.split("_", 1)
    if not (_DNS_LABEL.fullmatch(namespace) and len(namespace) <= 63
            and _DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253):
        return None
    return " ".join(word(w) for w in ("kubectl", "patch", "vm", name, "-n", namespace, "--type", "merge",
                                      "-p", KUBEVIRT_PATCH))

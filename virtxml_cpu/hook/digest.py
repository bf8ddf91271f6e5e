"""The hook's decision digest: what `prepare` decided for a definition, kept for its next start.

A repeat start of an unchanged guest is answered from an entry, importing neither lxml nor the rule
tables. Entries are named by digest_key.key(), which covers everything the decision read of the
definition, the config, the package and the host.

What the decision read from other files is recorded as dependencies and compared at every hit: the
capabilities cache file libvirt keeps for the domain's emulator and its directory (device, inode, size,
mtime, ctime, owner and mode; or that it was absent), and /dev/kvm (its node: a reloaded module makes a
new one; its times change whenever guests start).

The store is a directory only the effective user can change, checked like the spool (no link, 0700, every
directory above it root's or ours); entries are regular files of at most MAX_ENTRY_BYTES, never read
through a link, written whole and synced by atomic.replace_at in the directory opened once, and carrying
their own checksum. A bad, foreign or stale entry is a miss, never an error. At most MAX_ENTRIES
are kept.
"""

from __future__ import annotations

import os
import stat

from ..fs.trusted import check_private_dir, check_trusted, open_private_dir, read_regular
from .digest_key import FORMAT, sha256  # an entry's first line names the format its key was made for

try:  # JSON strings without the json package
    from _json import encode_basestring_ascii as _quoted, scanstring as _unquoted
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    from json.decoder import py_scanstring as _unquoted
    from json.encoder import py_encode_basestring_ascii as _quoted

MAX_ENTRY_BYTES = 16 * 1024
MAX_ENTRIES = 512
SUFFIX = ".decision"
# An entry's lines that hold one string each, named by their first word: the key, then the verdict's strings.
STRING_LINES = ("key", "name", "why", "uuid", "rule", "reason", "action", "mode", "spool", "syslog", "domain",
                "raw_uuid", "defined_name", "managed", "libvirt_config_dir")


def identity(path: str) -> str:
    """What a dependency looked like: its inode, size, times, owner and mode (a device: its node); or
    `absent`."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as e:
        return f"error:{e.errno}"
    if stat.S_ISCHR(st.st_mode):  # /dev/kvm: its times and owner change as guests start; a new node is new
        return f"device:{st.st_dev}:{st.st_ino}:{st.st_rdev}"
    return (f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_uid}:"
            f"{stat.S_IFMT(st.st_mode)}:{stat.S_IMODE(st.st_mode)}:{st.st_rdev}")


def lookup(directory: str, k: str) -> dict | None:
    """The decision kept under key `k`, when its entry is whole, ours, and every dependency is as it was;
    else None (a miss)."""
    if not directory or check_private_dir(directory):
        return None
    try:
        raw, st = read_regular(os.path.join(directory, k + SUFFIX), MAX_ENTRY_BYTES)
    except OSError:
        return None
    if st.st_uid != os.geteuid() or check_trusted(st, (os.geteuid(),)):
        return None
    entry = parse(raw)
    if entry is None or entry.get("key") != k:
        return None
    for path, was in entry["deps"]:
        if identity(path) != was:
            return None
    return entry


def parse(raw: bytes) -> dict | None:
    """An entry's fields, or None when it is not a whole entry of this format."""
    body, sep, tail = raw.rpartition(b"\nsum ")
    if not sep or tail.rstrip(b"\n") != sha256(body + b"\n").hexdigest().encode():
        return None
    try:
        lines = body.decode("ascii").split("\n")
    except UnicodeDecodeError:
        return None
    if lines[0] != FORMAT.decode():
        return None
    entry: dict = {"deps": [], "fields": []}
    try:
        for line in lines[1:]:
            kind, _, rest = line.partition(" ")
            if kind == "dep":
                path, end = _unquoted(rest, 1)
                entry["deps"].append((path, rest[end + 1:]))
            elif kind == "field":
                name, _, value = rest.partition(" ")
                text, end = _unquoted(value, 1)
                if not name or end != len(value):
                    return None
                entry["fields"].append((name, text))
            elif kind in STRING_LINES:
                text, end = _unquoted(rest, 1)
                if end != len(rest):
                    return None
                entry[kind] = text
            else:
                return None
    except (ValueError, IndexError):
        return None
    if not all(k in entry for k in ("key", "name", "why", "uuid", "rule", "reason", "action", "mode")):
        return None
    return entry


def render(k: str, verdict: dict, deps: list[tuple[str, str]]) -> bytes:
    lines = [FORMAT.decode(), f"key {_quoted(k)}"]
    lines += [f"dep {_quoted(path)} {was}" for path, was in deps]
    lines += [f"field {name} {_quoted(str(value))}" for name, value in verdict["fields"]]
    lines += [f"{kind} {_quoted(verdict[kind])}" for kind in
              STRING_LINES[1:] if kind in verdict]
    body = "\n".join(lines).encode("ascii") + b"\n"
    return body + b"sum " + sha256(body).hexdigest().encode() + b"\n"


def store(directory: str, k: str, verdict: dict, deps: list[tuple[str, str]]) -> bool:
    """Keep a decision (best effort: a store that cannot be used is no error, the next start decides
    again). The oldest entries go when there are more than MAX_ENTRIES."""
    data = render(k, verdict, deps)
    if not directory or len(data) > MAX_ENTRY_BYTES:
        return False
    from ..fs.atomic import replace_at  # here: a repeat start never writes

    try:
        dfd = open_private_dir(directory)
    except OSError:
        return False
    try:
        _trim(dfd)
        replace_at(dfd, k + SUFFIX, data)  # whole or not at all, synced (fs/atomic.py)
    except OSError:
        return False
    finally:
        os.close(dfd)
    return True


def _trim(dfd: int) -> None:
    """Room for one more entry in the open directory: the oldest go when MAX_ENTRIES are there (only then is
    anything stat'ed)."""
    names = [n for n in os.listdir(dfd) if n.endswith(SUFFIX) and len(n) == 64 + len(SUFFIX)]
    if len(names) < MAX_ENTRIES:
        return
    aged = []
    for name in names:
        try:
            st = os.lstat(name, dir_fd=dfd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            aged.append((st.st_mtime_ns, name))
    for _mtime, name in sorted(aged)[:max(0, len(aged) - MAX_ENTRIES + 1)]:
        try:
            os.unlink(name, dir_fd=dfd)
        except OSError:
            pass

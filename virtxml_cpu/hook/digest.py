"""The hook's decision digest: what `prepare` decided for a definition, kept for its next start.

A guest's definition rarely changes between starts; what libvirt hands `prepare` differs only in values
it assigns per start. The digest maps a key to the decision's log fields, so a repeat start neither
imports lxml nor the rule tables. The key covers everything the decision reads:

- the definition's bytes without libvirt's per-start values (`canonical`): the root's `id='N'` (seen in the
  lab, libvirt 9.0 and 11.3, DAC driver: the only difference between two starts) and the text of
  `<label>`/`<imagelabel>` inside a `<seclabel type='dynamic'>` (SELinux draws a new MCS pair each start,
  virSecuritySELinuxGenLabel);
- the domain name libvirt passes, the hook's mode and config path, and the config file's bytes;
- the package: its version and every module's inode, size, mtime and ctime, subpackages included (an edited
  checkout or any reinstall is a new package);
- the host: /proc/sys/kernel/random/boot_id (a reboot, a new kernel or CPU).

What the decision read from other files is recorded as dependencies and compared at every hit: the
capabilities cache file libvirt keeps for the domain's emulator and its directory (device, inode, size,
mtime, ctime, owner and mode; or that it was absent), and /dev/kvm (its node: a reloaded module makes a
new one; its times change whenever guests start).

The store is a directory only the effective user can change, checked like the spool (no link, 0700, every
directory above it root's or ours); entries are regular files of at most MAX_ENTRY_BYTES, never read
through a link, written whole and synced by atomic.replace_at in the directory opened once, and carrying
their own checksum. A
bad, foreign or stale entry is a miss, never an error. At most MAX_ENTRIES are kept.
"""

from __future__ import annotations

import os
import stat

from .. import __version__
from ..fs.trusted import check_private_dir, check_trusted, open_private_dir, read_regular

try:  # the builtin SHA-256: hashlib would load OpenSSL
    from _sha256 import sha256
except ImportError:  # Python 3.12+
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256
try:  # JSON strings without the json package
    from _json import encode_basestring_ascii as _quoted, scanstring as _unquoted
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    from json.decoder import py_scanstring as _unquoted
    from json.encoder import py_encode_basestring_ascii as _quoted

FORMAT = b"virtxml-cpu decision 1"
MAX_ENTRY_BYTES = 16 * 1024
MAX_ENTRIES = 512
SUFFIX = ".decision"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
KVM_DEVICE = "/dev/kvm"
_XML_SPACE = b" \t\r\n"  # XML's white space (the S production)
# An entry's lines that hold one string each, named by their first word: the key, then the verdict's strings.
STRING_LINES = ("key", "name", "why", "uuid", "rule", "reason", "action", "mode", "spool", "syslog", "domain",
                "raw_uuid")
_ATTRIBUTE_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.-")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package, above hook/


def canonical(data: bytes) -> bytes:
    """The definition without libvirt's per-start values; anything of an unexpected shape stays as it is
    (then two starts simply differ: a miss, never a wrong answer)."""
    return _without_dynamic_labels(_without_root_id(data))


def _without_root_id(data: bytes) -> bytes:
    """`<domain type='kvm' id='7'>` -> `<domain type='kvm'>`: the root start tag read attribute by attribute
    (quotes respected), the `id` dropped only when its value is all digits."""
    i = len(data) - len(data.lstrip(_XML_SPACE))
    if not data.startswith(b"<domain", i) or data[i + 7:i + 8] not in (b" ", b"\t", b"\r", b"\n"):
        return data
    j, cut = i + 7, None
    for _ in range(64):
        start = j
        while data[j:j + 1] in (b" ", b"\t", b"\r", b"\n"):
            j += 1
        if data[j:j + 1] in (b">", b"/"):  # the tag's end
            break
        if j == start:  # attributes not separated: not libvirt's
            return data
        k = j
        while k < len(data) and data[k] in _ATTRIBUTE_NAME_BYTES:
            k += 1
        name, k = data[j:k], k
        while data[k:k + 1] in (b" ", b"\t", b"\r", b"\n"):
            k += 1
        if not name or data[k:k + 1] != b"=":
            return data
        k += 1
        while data[k:k + 1] in (b" ", b"\t", b"\r", b"\n"):
            k += 1
        quote = data[k:k + 1]
        end = data.find(quote, k + 1) if quote in (b"'", b'"') else -1
        if end < 0 or b"<" in data[k + 1:end]:
            return data
        if name == b"id" and data[k + 1:end].isdigit():
            if cut is not None:
                return data  # two ids: not libvirt's
            cut = (start, end + 1)
        j = end + 1
    else:
        return data
    return data if cut is None else data[:cut[0]] + data[cut[1]:]


_DYNAMIC = (b"type='dynamic'", b'type="dynamic"')


def _without_dynamic_labels(data: bytes) -> bytes:
    """The text of <label> and <imagelabel> inside each <seclabel type='dynamic' ...>...</seclabel> dropped
    (text only: what is removed holds no '<', so no element can go with it).

    Linear, and a step per `type='dynamic'` rather than per `<seclabel`: the tag a marker is in is the last
    `<seclabel` before it with no '>' between, its body ends at the first closer after the tag's '>', and
    every search starts where the last one ended or reuses what it found (a run of openers before one
    closer, as libvirt keeps verbatim in a CDATA section of <metadata>, is looked through once)."""
    if _DYNAMIC[0] not in data and _DYNAMIC[1] not in data:
        return data
    out, pos, cur, close = [], 0, 0, -1
    marks = [data.find(m) for m in _DYNAMIC]  # the next of each spelling at or after cur (-1: none left)
    while True:
        live = [m for m in marks if m >= 0]
        if not live:
            break
        q = min(live)
        s = data.rfind(b"<seclabel", cur, q)
        if s >= 0 and data.find(b">", s, q) < 0:  # the marker is inside this start tag
            gt = data.find(b">", q)
            if gt < 0:
                break
            if close < gt:  # the first closer after this tag: found once for every opener before it
                close = data.find(b"</seclabel>", gt)
                if close < 0:
                    break
            if data[gt - 1:gt] != b"/":
                out.append(data[pos:gt + 1])
                out.append(_strip_texts(data[gt + 1:close], (b"label", b"imagelabel")))
                pos = cur = close
        cur = max(cur, q + 1)
        marks = [data.find(_DYNAMIC[i], cur) if 0 <= m < cur else m for i, m in enumerate(marks)]
    out.append(data[pos:])
    return b"".join(out)


def _strip_texts(body: bytes, names: tuple[bytes, ...]) -> bytes:
    """Each <name>TEXT</name>'s TEXT dropped where it holds no '<'. A step per closer: of the openers
    before a closer only the last can hold a text without '<' (the next opener is a '<')."""
    for name in names:
        opening, closing = b"<" + name + b">", b"</" + name + b">"
        out, pos, cur = [], 0, 0
        while True:
            s = body.find(opening, cur)
            if s < 0:
                break
            e = body.find(closing, s + len(opening))
            if e < 0:
                break
            s = body.rfind(opening, s, e)  # the last opener before this closer
            t = s + len(opening)
            if body.find(b"<", t, e) < 0:
                out.append(body[pos:t])
                pos = e
            cur = e
        out.append(body[pos:])
        body = b"".join(out)
    return body


def package_identity(top: str = _PACKAGE) -> bytes:
    """The version and every module's path, inode, size, mtime and ctime, in the package and every
    subpackage. A reinstall writes new files (a new inode and ctime, which no one can set back), so even
    a rebuild of the same version with its mtimes restored (dpkg, debhelper's clamping) is a new package."""
    parts = [__version__.encode()]
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(os.path.join(top, rel)) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) and e.name != "__pycache__":
                    todo.append(os.path.join(rel, e.name))
                elif e.name.endswith(".py"):
                    parts.append(f"{os.path.join(rel, e.name)}:{st.st_dev}:{st.st_ino}:{st.st_size}:"
                                 f"{st.st_mtime_ns}:{st.st_ctime_ns}".encode("utf-8", "surrogateescape"))
        except OSError:
            parts.append(b"?" + rel.encode("utf-8", "surrogateescape"))
    return b"\n".join(parts)


def key(definition: bytes, name: str, mode: str, config_path: str, config_bytes: bytes | None,
        package: bytes | None = None) -> str:
    """The digest key of one decision (hex). `config_bytes` None: no config file."""
    try:
        boot = read_regular(BOOT_ID, 256)[0]
    except OSError:
        boot = b"?"
    h = sha256()
    for part in (FORMAT, package if package is not None else package_identity(), boot, name.encode("utf-8", "replace"),
                 mode.encode(), config_path.encode("utf-8", "surrogateescape"),
                 b"-" if config_bytes is None else b"+" + config_bytes, canonical(definition)):
        h.update(b"%d:" % len(part))
        h.update(part)
    return h.hexdigest()


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

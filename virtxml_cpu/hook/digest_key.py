"""The decision digest's key: one SHA-256 over everything a decision of `prepare` reads.

A guest's definition rarely changes between starts; what libvirt hands `prepare` differs only in values
it assigns per start, so those are dropped before hashing (`canonical`):

- the root's `id='N'` (seen in the lab, libvirt 9.0 and 11.3, DAC driver: the only difference between two
  starts);
- the text of `<label>`/`<imagelabel>` inside a `<seclabel type='dynamic'>` (SELinux draws a new MCS pair
  each start, virSecuritySELinuxGenLabel).

The scanners work on the bytes, without a parser (a repeat start imports no lxml), and each takes time
linear in the definition: whoever may define a domain chooses its bytes, and libvirt waits for the hook
without a timeout. Anything of an unexpected shape stays in the key: a miss, never a wrong answer.

Besides the definition the key holds the domain name libvirt passes, the hook's mode and config path,
the config file's bytes; the package (`package_identity`: its version and every module's inode, size,
mtime and ctime, subpackages included: an edited checkout or any reinstall is a new package); the host
(/proc/sys/kernel/random/boot_id: a reboot, a new kernel or CPU); and the entry format (FORMAT). The store
of entries under these keys is digest.py's.
"""

from __future__ import annotations

import os

from .. import __version__
from ..fs.trusted import read_regular

try:  # the builtin SHA-256: hashlib would load OpenSSL
    from _sha256 import sha256
except ImportError:  # Python 3.12+
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256

FORMAT = b"virtxml-cpu decision 1"  # the entries' format, the first part of every key: another never answers
BOOT_ID = "/proc/sys/kernel/random/boot_id"
_XML_SPACE = b" \t\r\n"  # XML's white space (the S production)
_ATTRIBUTE_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.-")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package, above hook/


def canonical(data: bytes) -> bytes:
    """The definition without libvirt's per-start values; anything of an unexpected shape stays as it is
    (then two starts simply differ: a miss, never a wrong answer)."""
    return _without_dynamic_labels(_without_root_id(data))


def _without_root_id(data: bytes) -> bytes:
    """`<domain type='kvm' id='7'>` -> `<domain type='kvm'>`. libvirt writes the running domain's ID on the
    root of the definition it hands `prepare` (seen in the lab: the one difference between two starts under
    the DAC driver), a new number each start. The root start tag is read attribute by attribute (quotes
    respected), and the `id` dropped only when it is there once and all digits; anything else is no tag
    libvirt wrote and stays.

    Linear: only the root start tag is read, at most 64 attributes, each byte of it looked at a fixed number
    of times (a value's closing quote found with one search from its opening one); the rest is one copy."""
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
    (text only: what is removed holds no '<', so no element can go with it). With SELinux, libvirt writes
    `<seclabel type='dynamic' model='selinux' relabel='yes'>` holding `<label>system_u:system_r:svirt_t:s0:c1,c2
    </label>` and `<imagelabel>system_u:object_r:svirt_image_t:s0:c1,c2</imagelabel>`, the MCS pair c1,c2 drawn
    anew each start (virSecuritySELinuxGenLabel); the other texts and every static label stay.

    Linear, and a step per `type='dynamic'` rather than per `<seclabel`: the tag a marker is in is the last
    `<seclabel` before it with no '>' between, its body ends at the first closer after the tag's '>', and
    every search starts where the last one ended or reuses what it found (a run of openers before one
    closer, as libvirt keeps verbatim in a CDATA section of <metadata>, is looked through once; so is a run
    of openers before one '/>', which has no body: the scan goes on after that '>')."""
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
            else:  # an empty <seclabel .../>: every marker before its '>' is in an empty tag too
                cur = gt + 1
        cur = max(cur, q + 1)
        marks = [data.find(_DYNAMIC[i], cur) if 0 <= m < cur else m for i, m in enumerate(marks)]
    out.append(data[pos:])
    return b"".join(out)


def _strip_texts(body: bytes, names: tuple[bytes, ...]) -> bytes:
    """Each <name>TEXT</name>'s TEXT dropped where it holds no '<': in a dynamic <seclabel>'s body, the MCS
    label libvirt generated for this start (<label>, <imagelabel>).

    Linear: a step per closer, and each search starts where the last closer was found: of the openers
    before a closer only the last can hold a text without '<' (the next opener is a '<'), so a run of
    openers is looked through once, backwards from the closer."""
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
        prefix = rel + "/" if rel else ""
        try:
            with os.scandir(os.path.join(top, rel)) as it:
                entries = sorted(it, key=_entry_name)
            for e in entries:
                name = e.name
                if e.is_dir(follow_symlinks=False):  # the directory entry's type: no stat
                    if name != "__pycache__":
                        todo.append(prefix + name)
                elif name.endswith(".py"):  # only a module is stat'ed (every start pays for each)
                    st = e.stat(follow_symlinks=False)
                    parts.append(f"{prefix}{name}:{st.st_dev}:{st.st_ino}:{st.st_size}:"
                                 f"{st.st_mtime_ns}:{st.st_ctime_ns}".encode("utf-8", "surrogateescape"))
        except OSError:
            parts.append(b"?" + rel.encode("utf-8", "surrogateescape"))
    return b"\n".join(parts)


def _entry_name(entry) -> str:
    return entry.name


def key(definition: bytes, name: str, mode: str, config_path: str, config_bytes: bytes | None,
        package: bytes | None = None) -> str:
    """The digest key of one decision (hex). `config_bytes` None: no config file."""
    try:
        boot = read_regular(BOOT_ID, 256)[0]
    except OSError:
        boot = b"?"
    h = sha256()
    for part in (FORMAT, package if package is not None else package_identity(), boot,
                 name.encode("utf-8", "surrogatepass"), mode.encode(), config_path.encode("utf-8", "surrogateescape"),
                 b"-" if config_bytes is None else b"+" + config_bytes, canonical(definition)):
        h.update(b"%d:" % len(part))
        h.update(part)
    return h.hexdigest()

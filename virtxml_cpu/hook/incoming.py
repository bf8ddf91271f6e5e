"""The mark `restore begin` and `migrate begin` leave for the `prepare begin` libvirt runs next.

libvirt runs `prepare begin` for a restore (`virsh restore`, a start with a managed-save image) and on the
destination of an incoming migration just as for a cold start: the same arguments (`NAME prepare begin -`),
the same environment, and a definition that differs only in what a persistent one may hold too (the
running guest's expanded `<cpu mode='custom' check='full'>`, `<resource>`). What differs is the operation
before it: `restore begin` or `migrate begin` for the same domain, milliseconds earlier (seen with libvirt
9.0 and 11.3). So those two leave a mark, and that prepare takes it (reads and removes it): the guest ABI is
fixed there, so it is neither refused nor queued.

A mark is for one domain: the name libvirt passes as the hook's first argument, byte for byte, and the
definition's uuid. `restore begin` gets the save image's name as its argument but, with `virsh restore
--xml`, the caller's definition on stdin, which libvirt checks against the image only afterwards (its uuid:
"Target domain uuid ... does not match"; its name: "Target domain name ... does not match"). So a
definition whose `<name>` is not the argument leaves no mark at all (libvirt refuses that restore), and a
mark left for another domain's uuid under one's own name is taken by no prepare but one of a domain that
has both: never another guest's cold start.

Root reads and writes here, so nobody else may steer it: the directory is a 0700 one of the effective user
(trusted.open_private_dir: no link followed on the way), a mark is named by the SHA-256 of its name and uuid
(64 hex digits: no byte of the name reaches a path), written whole (atomic.replace_at), read only as a small
regular file without following a link, and honoured once, within TTL seconds of the monotonic clock of the
same boot. Each write clears the marks past their time, so the directory stays small. Nothing here raises:
a mark that cannot be left or read is a cold start.
"""

from __future__ import annotations

import os
import time

from ..constants import INCOMING_BESIDE_SPOOL, beside_spool

try:  # the builtin SHA-256: hashlib would load OpenSSL
    from _sha256 import sha256
except ImportError:  # Python 3.12+
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256

TTL = 30.0  # seconds from `restore begin`/`migrate begin` to its prepare (milliseconds in the lab)
MAX_MARK_BYTES = 128
MAX_MARKS = 256  # marks kept at most; the oldest go first
OPS = ("restore", "migrate")
BOOT_ID = "/proc/sys/kernel/random/boot_id"
_HEX = frozenset("0123456789abcdef")


def beside(spool: str) -> str:
    """The marks' directory: INCOMING_BESIDE_SPOOL beside the hook's spool."""
    return beside_spool(spool, INCOMING_BESIDE_SPOOL)


def is_uuid(text) -> bool:
    """A uuid in the canonical form the hook writes (lowercase, dashed 8-4-4-4-12)."""
    if not isinstance(text, str) or len(text) != 36 or any(text[i] != "-" for i in (8, 13, 18, 23)):
        return False
    digits = text.replace("-", "")
    return len(digits) == 32 and set(digits) <= _HEX


def mark_name(name: str, uuid: str) -> str:
    """The file of the mark for (name, uuid): SHA-256 over the name's exact bytes and the uuid, each with its
    length (no two pairs share one), as 64 hex digits."""
    raw = name.encode("utf-8", "surrogateescape")  # argv's bytes as the kernel gave them
    h = sha256(b"%d:" % len(raw) + raw + b"%d:" % len(uuid) + uuid.encode("ascii"))
    return h.hexdigest()


def leave(directory: str, name: str, defined: str | None, uuid: str, op: str) -> str:
    """Mark that `op` (restore, migrate) began for the domain libvirt names `name` (its argv, as passed)
    whose definition says `<name>` `defined` and `uuid`. '' when done, else why not."""
    if op not in OPS:
        return f"not an incoming operation: {op!r}"
    if not is_uuid(uuid):
        return f"not a uuid: {uuid!r}"
    if not isinstance(name, str) or defined != name:
        return "the definition's <name> is not the name libvirt passed (libvirt refuses such a restore)"
    from ..fs.atomic import replace_at
    from ..fs.trusted import open_private_dir

    try:
        fd = open_private_dir(directory)
    except OSError as e:
        return f"{directory} {e.strerror or e}"
    mark = mark_name(name, uuid)
    try:
        _clear_old(fd)
        replace_at(fd, mark, f"{op} {_boot_id()} {_now():.3f}\n".encode())
    except OSError as e:
        return f"{directory}/{mark}: {e.strerror or e}"
    finally:
        os.close(fd)
    return ""


def take(directory: str, name: str, uuid: str) -> str | None:
    """The operation whose mark for (`name`, `uuid`) is there and fresh (removed: it counts once), else
    None."""
    if not isinstance(name, str) or not is_uuid(uuid):
        return None
    mark = mark_name(name, uuid)
    try:
        os.lstat(os.path.join(directory, mark))  # the cold start's whole cost: no mark, nothing more
    except (OSError, ValueError):
        return None
    from ..fs.trusted import open_private_dir, read_regular

    try:
        fd = open_private_dir(directory, create=False)
    except OSError:
        return None
    try:
        try:
            raw = read_regular(mark, MAX_MARK_BYTES, dir_fd=fd)[0]
        finally:
            try:
                os.unlink(mark, dir_fd=fd)
            except OSError:
                pass
        op, boot, when = raw.decode("ascii").split()
        age = _now() - float(when)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return op if op in OPS and boot == _boot_id() and 0.0 <= age <= TTL else None


def _is_mark(name: str) -> bool:
    """A mark's file name, or a uuid (the name a mark had before it was bound to the domain's name)."""
    return (len(name) == 64 and set(name) <= _HEX) or is_uuid(name)


def _clear_old(fd: int) -> None:
    """Remove the marks past their time (by modification time), and the oldest past MAX_MARKS."""
    marks = []
    for name in os.listdir(fd):
        if _is_mark(name):
            try:
                marks.append((os.lstat(name, dir_fd=fd).st_mtime, name))
            except OSError:
                continue
    marks.sort(reverse=True)
    now = time.time()
    for i, (mtime, name) in enumerate(marks):
        if i >= MAX_MARKS - 1 or not now - TTL <= mtime <= now + TTL:
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass


def _now() -> float:
    return time.monotonic()  # one clock for every process of this boot, whatever the wall clock does


def _boot_id() -> str:
    try:
        with open(BOOT_ID, "rb") as f:
            return f.read(64).decode("ascii").strip() or "-"
    except (OSError, ValueError):
        return "-"

"""The mark `restore begin` and `migrate begin` leave for the `prepare begin` libvirt runs next.

libvirt runs `prepare begin` for a restore (`virsh restore`, a start with a managed-save image) and on the
destination of an incoming migration just as for a cold start: the same arguments (`NAME prepare begin -`),
the same environment, and a definition that differs only in what a persistent one may hold too (the
running guest's expanded `<cpu mode='custom' check='full'>`, `<resource>`). What differs is the operation
before it: `restore begin` or `migrate begin` for the same domain, milliseconds earlier (seen with libvirt
9.0 and 11.3). So those two leave a mark, `<directory>/<uuid>`, and that prepare takes it (reads and
removes it): the guest ABI is fixed there, so it is neither refused nor queued.

Root reads and writes here, so nobody else may steer it: the directory is a 0700 one of the effective user
(trusted.open_private_dir: no link followed on the way), a mark is named only by a canonical uuid, written
whole (atomic.replace_at), read only as a small regular file without following a link, and honoured once,
within TTL seconds of the monotonic clock of the same boot. Each write clears the marks past their time,
so the directory stays small. Nothing here raises: a mark that cannot be left or read is a cold start.
"""

from __future__ import annotations

import os
import time

TTL = 30.0  # seconds from `restore begin`/`migrate begin` to its prepare (milliseconds in the lab)
MAX_MARK_BYTES = 128
MAX_MARKS = 256  # marks kept at most; the oldest go first
OPS = ("restore", "migrate")
BOOT_ID = "/proc/sys/kernel/random/boot_id"
_HEX = frozenset("0123456789abcdef")


def beside(spool: str) -> str:
    """The marks' directory: `incoming` beside the hook's spool (/var/lib/virtxml-cpu/incoming)."""
    return os.path.join(os.path.dirname(spool.rstrip("/")) or "/", "incoming")


def is_uuid(text) -> bool:
    """A uuid in the canonical form the hook writes (lowercase, dashed 8-4-4-4-12): a safe file name."""
    if not isinstance(text, str) or len(text) != 36 or any(text[i] != "-" for i in (8, 13, 18, 23)):
        return False
    digits = text.replace("-", "")
    return len(digits) == 32 and set(digits) <= _HEX


def leave(directory: str, uuid: str, op: str) -> str:
    """Mark that `op` (restore, migrate) began for the domain `uuid`. '' when done, else why not."""
    if op not in OPS or not is_uuid(uuid):
        return f"not a uuid: {uuid!r}" if op in OPS else f"not an incoming operation: {op!r}"
    from ..fs.atomic import replace_at
    from ..fs.trusted import open_private_dir

    try:
        fd = open_private_dir(directory)
    except OSError as e:
        return f"{directory} {e.strerror or e}"
    try:
        _clear_old(fd)
        replace_at(fd, uuid, f"{op} {_boot_id()} {_now():.3f}\n".encode())
    except OSError as e:
        return f"{directory}/{uuid}: {e.strerror or e}"
    finally:
        os.close(fd)
    return ""


def take(directory: str, uuid: str) -> str | None:
    """The operation whose mark for `uuid` is there and fresh (removed: it counts once), else None."""
    if not is_uuid(uuid):
        return None
    try:
        os.lstat(os.path.join(directory, uuid))  # the cold start's whole cost: no mark, nothing more
    except (OSError, ValueError):
        return None
    from ..fs.trusted import open_private_dir, read_regular

    try:
        fd = open_private_dir(directory, create=False)
    except OSError:
        return None
    try:
        try:
            raw = read_regular(uuid, MAX_MARK_BYTES, dir_fd=fd)[0]
        finally:
            try:
                os.unlink(uuid, dir_fd=fd)
            except OSError:
                pass
        op, boot, when = raw.decode("ascii").split()
        age = _now() - float(when)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return op if op in OPS and boot == _boot_id() and 0.0 <= age <= TTL else None


def _clear_old(fd: int) -> None:
    """Remove the marks past their time (by modification time), and the oldest past MAX_MARKS."""
    marks = []
    for name in os.listdir(fd):
        if is_uuid(name):
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

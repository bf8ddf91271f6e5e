"""A user's files: reading inputs, and writing so that a user's file is never lost, half-written or swapped.

- `--in-place` locks the file, reads it, and renames a complete new file over it; a run that waited for the
  lock sees the renamed file, so concurrent runs on one file make exactly one change.
- Where the file is, and which links lead there, is fs/paths.py's (every step relative to the directory's
  open fd, links followed as fs.protected_symlinks would, as root only root's); the writes are
  fs/atomic.py's (replace whole, or create where no file is).
- Backups hold the bytes that were read and are created, never over an existing file nor through a link:
  FILE.orig is taken, so FILE.orig.1 is used. A backup that already holds exactly the bytes read (a run
  killed between backup and rename) is reused.
- Temporary files are named .virtxml-cpu.PID.RANDOM.tmp; a run removes the ones in its directory whose
  creating process is gone (a killed run), never anything else.
- Only regular files are replaced: a device, FIFO or socket is refused (or, when it is this process's own
  stdout, written as a stream).
- Owner, group, mode and extended attributes (ACLs, SELinux labels) are kept, or nothing is written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from collections.abc import Callable
from typing import TypeVar

from ..errors import BadInput, EnvironmentProblem, VirtxmlCpuError, shown
from ..constants import MAX_DEFINITION_BYTES
from .atomic import create_at, replace_at
from .attributes import keep_attributes, prepare
from .paths import NOT_REGULAR, Place, env_error, locate, moved, os_error, root_may_not_replace

T = TypeVar("T")
MAX_BACKUP_NUMBER = 999
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


_READ_INPUT = os.O_RDONLY | os.O_CLOEXEC  # what open(path, "rb") asks for


def read_input(path: str) -> bytes:
    """Read a file (or stdin, `-`), at most MAX_DEFINITION_BYTES + 1 bytes; pipes and /dev/fd/N work too."""
    try:
        if path == "-":
            return _read_fd(sys.stdin.fileno(), "<stdin>")
        fd = os.open(path, _READ_INPUT)  # not open(): a file object per document costs more than the read
        try:
            return _read_fd(fd, path, refuse_directory=True)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise BadInput(f"{shown(path)}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{shown(path)}: is a directory") from None
    except OSError as e:
        raise env_error(path, e) from None


def update_in_place(path: str, transform: Callable[[bytes], tuple[bytes | None, T]],
                    backup_suffix: str | None = None) -> tuple[bool, T, str | None]:
    """Lock `path`, read it, and replace it with `transform(data)[0]` unless that is None or unchanged.

    Returns (written, transform's second value, backup path). Through a symbolic link, the link's target
    is updated and the link kept, where fs.protected_symlinks would follow that link: another user's link
    in /tmp is refused even when the sysctl is off (resolving with `realpath` would follow any link)."""
    while True:
        place = locate(path)
        fd = None
        try:
            try:
                st = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):  # checked before opening: opening a device can act
                    raise BadInput(f"{shown(path)} {NOT_REGULAR}; --in-place replaces regular files only; "
                                   "nothing was written")
                fd = os.open(place.name, _READ, dir_fd=place.dfd)
            except FileNotFoundError:
                raise BadInput(f"{shown(path)}: no such file") from None
            except OSError as e:
                if e.errno == errno.ELOOP:
                    continue  # became a link since it was located: locate it again
                raise env_error(path, e) from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"{shown(path)} {NOT_REGULAR}; nothing was written")
            why = root_may_not_replace(place.dfd, st)
            if why:
                raise EnvironmentProblem(f"{shown(path)}: as root, --in-place replaces nothing another user can "
                                         f"change ({why}); nothing was written; run it as that user")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
            except FileNotFoundError:
                raise BadInput(f"{shown(path)} was removed while waiting to update it; nothing was written") from None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                continue  # another run renamed a new file into place while we waited: read that one
            data = _read_fd(fd, path)
            new, result = transform(data)
            if new is None or new == data:
                return False, result, None
            _still_named(place, path, st)
            backup = write_backup(place, backup_suffix, data, fd) if backup_suffix else None
            _replace(place, new, fd, path, st)
            return True, result, backup
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock
            os.close(place.dfd)


def _still_named(place: Place, path: str, locked: os.stat_result | None) -> None:
    """Refuse unless `path` still names the directory we hold (paths.moved) and (when `locked`) its name
    there is still the file we locked: someone moved the directory, or replaced the file despite the lock."""
    problem = moved(place, path)
    if problem is None and locked is not None:
        try:
            st = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
            same = (st.st_dev, st.st_ino) == (locked.st_dev, locked.st_ino)
        except OSError:
            same = False
        if not same:
            problem = "it was replaced by another program despite the lock"
    if problem:
        raise EnvironmentProblem(f"{shown(path)}: {problem} while it was being updated; nothing was written")


def _read_fd(fd: int, path: str, refuse_directory: bool = False) -> bytes:
    """At most MAX_DEFINITION_BYTES + 1 bytes, in reads sized to the file (a 10 MiB buffer for every small file
    would cost more than parsing it). A regular file's short read is its end: no second read to see it."""
    chunks, size = [], 0
    try:
        st = os.fstat(fd)
    except OSError as e:
        raise env_error(path, e) from None
    if refuse_directory and stat.S_ISDIR(st.st_mode):  # open() refused a directory; os.open opens it
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    regular = stat.S_ISREG(st.st_mode)
    step = min(st.st_size + 1, MAX_DEFINITION_BYTES + 1) if regular else 1 << 16
    try:
        while size <= MAX_DEFINITION_BYTES:
            want = min(step, MAX_DEFINITION_BYTES + 1 - size)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if regular and len(chunk) < want:
                break
    except OSError as e:
        raise env_error(path, e) from None
    return b"".join(chunks)


def write_backup(place: Place, suffix: str, data: bytes, src_fd: int) -> str:
    """NAME+SUFFIX in the directory `place` holds, with `data` and the owner, mode and xattrs of the open
    file `src_fd`; created without following links and without replacing anything: when it exists,
    NAME+SUFFIX.1, .2, ... Returns the path written (for messages)."""
    if "/" in suffix or not suffix:
        raise BadInput(f"backup suffix {shown(suffix)} must be a non-empty file name suffix")
    shown_as = place.shown + suffix
    kept = _existing_backup(place, suffix, data, os.fstat(src_fd))
    if kept:
        return kept
    tails = [suffix + (f".{n}" if n else "") for n in range(MAX_BACKUP_NUMBER + 1)]
    try:
        made = create_at(place.dfd, (place.name + tail for tail in tails), data,
                         prepare=lambda fd: keep_attributes(fd, src_fd, place.shown))
    except OSError as e:
        if e.filename2 is not None:  # making that name failed
            raise env_error(place.shown + e.filename2[len(place.name):], e, "; nothing was written") from None
        raise env_error(shown_as, e, " (writing the backup); nothing was written") from None
    if made is None:
        raise EnvironmentProblem(f"{shown(shown_as)}: {MAX_BACKUP_NUMBER} backups exist already; "
                                 "nothing was written")
    return place.shown + made[len(place.name):]


def _existing_backup(place: Place, suffix: str, data: bytes, st: os.stat_result) -> str | None:
    """The newest existing backup when it holds exactly `data` (a run killed after its backup and before
    its rename left it): reused, so the next run completes without a second backup. Only a regular file
    of ours, never through a link."""
    newest = None
    for n in range(MAX_BACKUP_NUMBER + 1):
        tail = suffix + (f".{n}" if n else "")
        try:
            have = os.stat(place.name + tail, dir_fd=place.dfd, follow_symlinks=False)
        except OSError:
            break
        newest = tail
    if newest is None:
        return None
    if not stat.S_ISREG(have.st_mode) or have.st_size != len(data) or have.st_uid != st.st_uid:
        return None
    try:
        fd = os.open(place.name + newest, _READ, dir_fd=place.dfd)
    except OSError:
        return None
    try:
        return place.shown + newest if _read_fd(fd, place.shown + newest) == data else None
    except VirtxmlCpuError:
        return None
    finally:
        os.close(fd)


def write_output(path: str, data: bytes, inputs: list[str], mode: int | None = None, fresh: bool = False) -> None:
    """`-o FILE`: replace a regular file atomically (keeping its owner, mode, xattrs) or create it; refuse a
    device or FIFO unless it is this process's own stdout, and refuse any input file under another name.
    A final symbolic link is followed as `update_in_place` does. `mode`: the new file's mode instead;
    `fresh`: nothing of the replaced file is kept (the writer's own new file, as root's hook must be)."""
    try:
        st = os.stat(path)  # /dev/stdout and /dev/fd/1 are links the kernel resolves
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise os_error(path, e) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        out = os.fstat(sys.stdout.fileno())
        if (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino):
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
    place = locate(path)
    fd = None
    try:
        try:
            st = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise env_error(path, e) from None
        if st is not None:
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"-o {shown(path)} is not a regular file (a device, FIFO or socket); "
                               "nothing was written")
            try:
                fd = os.open(place.name, _READ, dir_fd=place.dfd)
            except OSError as e:
                raise env_error(path, e, "; nothing was written") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"-o {shown(path)} is not a regular file; nothing was written")
            for name in inputs:
                try:
                    other = os.stat(name) if name != "-" else None
                except OSError:
                    continue
                if other is not None and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                    raise BadInput(f"-o {shown(path)} is the input file {shown(name)}; use --in-place")
        why = root_may_not_replace(place.dfd, st)
        if why and st is not None:
            raise EnvironmentProblem(f"-o {shown(path)}: as root, nothing another user can change is replaced "
                                     f"({why}); nothing was written; name a new file, or run as that user")
        if why:
            fresh_file(place, data, path, mode)
            return
        _replace(place, data, None if fresh else fd, path, None, mode)
    finally:
        if fd is not None:
            os.close(fd)
        os.close(place.dfd)


def _replace(place: Place, data: bytes, src_fd: int | None, shown_as: str, locked: os.stat_result | None,
             mode: int | None = None) -> None:
    """atomic.replace_at in the directory `place` holds: attributes copied from `src_fd` (or a new file's
    defaults; `mode` where given), and right before the rename, the check that the path still names that
    directory (and file)."""
    try:
        replace_at(place.dfd, place.name, data, prepare=prepare(src_fd, shown_as, mode),
                   before_rename=lambda: _still_named(place, shown_as, locked))
    except OSError as e:
        raise env_error(shown_as, e, "; the original is unchanged") from None


def fresh_file(place: Place, data: bytes, shown_as: str, mode: int | None = None) -> None:
    """A new file `place.name` holding `data`, mode 0666 less the umask or `mode` (atomic.create_at): never
    over an existing name, never through a link. Root's only way to write into a directory another user can
    change."""
    try:
        made = create_at(place.dfd, [place.name], data, prepare=prepare(None, shown_as, mode))
    except OSError as e:
        raise env_error(shown_as, e, "; nothing was written") from None
    if made is None:
        raise EnvironmentProblem(f"{shown(shown_as)}: appeared while it was being written; nothing was written")

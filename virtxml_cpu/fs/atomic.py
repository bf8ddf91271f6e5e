"""The one place a file is written: replaced whole, or created where no file is, and durably.

Both work in a directory already open (its fd: whoever can rename the directory's path cannot steer the
write elsewhere) and start alike: a new O_CREAT|O_EXCL|O_NOFOLLOW temporary file (temps.create_temp) is
written, given its attributes and fsynced. `replace_at` then renames it over the name; `create_at` links it
under a name that must not exist yet (never over a file, never through a link). Last, the directory is
fsynced, so the new name survives a power cut. A crash at any point leaves the old file or the new one,
never a part of either; at most a temporary file is left, which the next write in that directory removes
(temps.remove_stale_temps). Used by fs/files.py (`--in-place`, `-o` and what goes through it: the audit
report, the verified record, the hook's front; backups; root's fresh files), the spool's entries, the
restore marks, the capabilities cache and digest.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable

from .temps import create_temp, remove_stale_temps

_CREATE_ONLY = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV)  # link(2) refused by the filesystem


def replace_at(dfd: int, name: str, data: bytes, mode: int = 0o600, prepare: Callable[[int], None] | None = None,
               before_rename: Callable[[], None] | None = None) -> None:
    """`name` in the open directory `dfd` replaced by `data`. `prepare(fd)` sets the new file's attributes
    before it is synced; `before_rename()` may refuse (raise) at the last moment. Whatever is raised, the
    temporary file is removed and `name` is as it was."""
    fd, tmp = _written_temp(dfd, data, mode, prepare)
    try:
        os.close(fd)
        if before_rename is not None:
            before_rename()
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        _unlink_quietly(dfd, tmp)
        raise
    _sync_directory(dfd)


def create_at(dfd: int, names: Iterable[str], data: bytes, mode: int = 0o600,
              prepare: Callable[[int], None] | None = None) -> str | None:
    """The first of `names` free in the open directory `dfd`, created holding `data` (attributes set by
    `prepare(fd)`): a name already there, a dangling link included, is never written over nor followed.
    Returns the name created, or None when every one was taken. Where the filesystem has no hard links,
    the name is created with O_EXCL and written, and removed again if that fails. An OSError while making
    a name carries the name as its filename2; whatever is raised, no name is made."""
    fd, tmp = _written_temp(dfd, data, mode, prepare)
    try:
        for name in names:
            try:
                os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno not in _NO_HARD_LINKS:
                    raise
                if not _create_exclusive(dfd, name, data, stat.S_IMODE(os.fstat(fd).st_mode), prepare):
                    continue
            _sync_directory(dfd)
            return name
        return None
    finally:
        os.close(fd)
        _unlink_quietly(dfd, tmp)


def _written_temp(dfd: int, data: bytes, mode: int, prepare: Callable[[int], None] | None) -> tuple[int, str]:
    """A new temporary file in `dfd` holding `data`, prepared and synced, still open; removed on failure.
    First the temporary files killed runs left there are removed."""
    remove_stale_temps(dfd)
    fd, tmp = create_temp(dfd, mode)
    try:
        _fill(fd, data, prepare)
    except BaseException:
        os.close(fd)
        _unlink_quietly(dfd, tmp)
        raise
    return fd, tmp


def _create_exclusive(dfd: int, name: str, data: bytes, mode: int, prepare: Callable[[int], None] | None) -> bool:
    """`name` created with O_EXCL and written (False: it exists); on failure removed again."""
    try:
        fd = os.open(name, _CREATE_ONLY, mode, dir_fd=dfd)
    except FileExistsError:
        return False
    except OSError as e:
        raise OSError(e.errno, e.strerror, None, None, name) from None
    try:
        _fill(fd, data, prepare)
    except BaseException:
        _unlink_quietly(dfd, name)
        raise
    finally:
        os.close(fd)
    return True


def _fill(fd: int, data: bytes, prepare: Callable[[int], None] | None) -> None:
    """All of `data` written to the new file `fd`, its attributes set, the file synced."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if prepare is not None:
        prepare(fd)
    os.fsync(fd)


def _unlink_quietly(dfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        pass


def _sync_directory(dfd: int) -> None:
    try:
        os.fsync(dfd)
    except OSError:  # a filesystem that cannot sync a directory: the new name is there all the same
        pass

"""The one way a file is replaced: whole or not at all, and durably.

In a directory already open (its fd: whoever can rename the directory's path cannot steer the write
elsewhere), a new O_CREAT|O_EXCL|O_NOFOLLOW temporary file (safefs.create_temp) is written, fsynced and
renamed over the name; then the directory is fsynced, so the rename survives a power cut. A crash at any
point leaves the old file or the new one, never a part of either; at most a temporary file is left, which
the next write in that directory removes (safefs.remove_stale_temps). Used by fs/files.py (`--in-place`, `-o`,
the verified record), the spool's entries and the capabilities digest.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .trusted import create_temp, remove_stale_temps


def replace_at(dfd: int, name: str, data: bytes, mode: int = 0o600, prepare: Callable[[int], None] | None = None,
               before_rename: Callable[[], None] | None = None) -> None:
    """`name` in the open directory `dfd` replaced by `data`. `prepare(fd)` sets the new file's attributes
    before it is synced; `before_rename()` may refuse (raise) at the last moment. Whatever is raised, the
    temporary file is removed and `name` is as it was."""
    remove_stale_temps(dfd)
    fd, tmp = create_temp(dfd, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if prepare is not None:
                prepare(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename()
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    try:
        os.fsync(dfd)
    except OSError:  # a filesystem that cannot sync a directory: the rename is done all the same
        pass

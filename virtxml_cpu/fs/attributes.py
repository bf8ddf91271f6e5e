"""A new file's attributes, set on its open fd before it is synced and renamed (fs/atomic.py's `prepare`):
those open(2) would give it, a mode asked for, or those of the file it replaces, kept whole or nothing is
written."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from ..errors import EnvironmentProblem, shown


def prepare(src_fd: int | None, shown_as: str, mode: int | None = None) -> Callable[[int], None]:
    """A new file's `prepare`: the attributes of the file it replaces (the open `src_fd`), or a new file's
    default mode; then `mode` where one is asked for (an executable), so the file has it when it appears."""
    def set_attributes(fd: int) -> None:
        if src_fd is None:
            default_mode(fd)
        else:
            keep_attributes(fd, src_fd, shown_as)
        if mode is not None:
            os.fchmod(fd, mode)
    return set_attributes


def default_mode(fd: int) -> None:
    """A new file's mode, as open(2) would give it: 0666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)


def keep_attributes(fd: int, src_fd: int, shown_as: str) -> None:
    """Owner, group, mode, then extended attributes (ACLs included) of the open file `src_fd` onto the new
    file `fd`; refuse with a clear message when they cannot all be kept (the caller removes the new file)."""
    st = os.fstat(src_fd)
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, st.st_uid if st.st_uid != os.geteuid() else -1, st.st_gid)
        except PermissionError:
            raise EnvironmentProblem(
                f"{shown(shown_as)}: cannot keep its owner/group {st.st_uid}:{st.st_gid} (only root or the "
                "owner may); nothing was written; run as that user or as root") from None
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    try:
        names = os.listxattr(src_fd)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return
        raise
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(src_fd, name))
        except OSError as e:
            raise EnvironmentProblem(f"{shown(shown_as)}: cannot keep its extended attribute {name} "
                                     f"({e.strerror}); nothing was written") from None
